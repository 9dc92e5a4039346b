//! Output packets to pcap files, one per egress port (`port-N.pcap` in a
//! directory), so a user can diff Synapse's output with their switch's.
//!
//! Each file is a classic pcap with ns timestamps (magic `a1b23c4d`,
//! Ethernet), written through a buffer to a temporary name and renamed
//! when the run ends ([`PcapOut::finish`]): a run that fails leaves no half
//! file under the final name. A packet's timestamp is that of the input
//! packet it came from.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Bytes kept of an output packet (a larger one is cut, its length kept).
pub const SNAPLEN: u32 = 262_144;

struct PortFile {
    w: BufWriter<File>,
    tmp: PathBuf,
    packets: u64,
}

/// The output pcaps of a run (see the module doc).
pub struct PcapOut {
    dir: PathBuf,
    files: BTreeMap<u32, PortFile>,
}

impl PcapOut {
    /// Writes into `dir` (created if missing).
    pub fn new(dir: &Path) -> io::Result<PcapOut> {
        std::fs::create_dir_all(dir)?;
        Ok(PcapOut { dir: dir.to_path_buf(), files: BTreeMap::new() })
    }

    /// The file of egress port `port`.
    pub fn path(dir: &Path, port: u32) -> PathBuf {
        dir.join(format!("port-{port}.pcap"))
    }

    pub fn write(&mut self, port: u32, ts_ns: u64, data: &[u8]) -> io::Result<()> {
        let f = match self.files.get_mut(&port) {
            Some(f) => f,
            None => {
                let tmp = self.dir.join(format!(".port-{port}.pcap.tmp"));
                let mut w = BufWriter::with_capacity(1 << 16, File::create(&tmp)?);
                let mut h = Vec::with_capacity(24);
                h.extend(0xa1b2_3c4du32.to_le_bytes());
                h.extend(2u16.to_le_bytes());
                h.extend(4u16.to_le_bytes());
                h.extend(0i32.to_le_bytes());
                h.extend(0u32.to_le_bytes());
                h.extend(SNAPLEN.to_le_bytes());
                h.extend(1u32.to_le_bytes()); // Ethernet
                w.write_all(&h)?;
                self.files.entry(port).or_insert(PortFile { w, tmp, packets: 0 })
            }
        };
        let cap = data.len().min(SNAPLEN as usize);
        let mut r = [0u8; 16];
        r[0..4].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_le_bytes());
        r[4..8].copy_from_slice(&((ts_ns % 1_000_000_000) as u32).to_le_bytes());
        r[8..12].copy_from_slice(&(cap as u32).to_le_bytes());
        r[12..16].copy_from_slice(&(data.len() as u32).to_le_bytes());
        f.w.write_all(&r)?;
        f.w.write_all(&data[..cap])?;
        f.packets += 1;
        Ok(())
    }

    /// Packets written so far per port.
    pub fn per_port(&self) -> BTreeMap<u32, u64> {
        self.files.iter().map(|(&p, f)| (p, f.packets)).collect()
    }

    /// Flushes every file and gives it its final name; returns the packets
    /// per port.
    pub fn finish(&mut self) -> io::Result<BTreeMap<u32, u64>> {
        let counts = self.per_port();
        for (port, mut f) in std::mem::take(&mut self.files) {
            f.w.flush()?;
            drop(f.w);
            std::fs::rename(&f.tmp, Self::path(&self.dir, port))?;
        }
        Ok(counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::capture::{Capture, Frames, OnTruncated};

    #[test]
    fn one_pcap_per_port_read_back_by_the_capture_reader() {
        let dir = std::env::temp_dir().join(format!("synapse-pcapout-{}", std::process::id()));
        let mut o = PcapOut::new(&dir).unwrap();
        o.write(3, 1_500_000_007, b"to three").unwrap();
        o.write(1, 2_000_000_000, b"to one").unwrap();
        o.write(3, 2_500_000_000, b"again three").unwrap();
        assert!(!PcapOut::path(&dir, 3).exists(), "renamed only at the end");
        assert_eq!(o.finish().unwrap(), BTreeMap::from([(1, 1), (3, 2)]));
        let mut c = Capture::open(&PcapOut::path(&dir, 3), OnTruncated::Error).unwrap();
        let mut f = Frames::new();
        while c.next_into(&mut f).unwrap() {}
        assert_eq!(f.len(), 2);
        assert_eq!((f.frame(0), f.frame(1)), (&b"to three"[..], &b"again three"[..]));
        assert_eq!(f.ts_ns, vec![1_500_000_007, 2_500_000_000]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

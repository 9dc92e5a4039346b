//! Captures read in chunks: pcap and pcapng files, gzip'd or not, frame by
//! frame into a reused [`Frames`] batch, so memory is bounded by the batch
//! and the reader's buffer, never by the file.
//!
//! The formats are parsed by `pcap-parser` (a streaming parser over a
//! circular buffer) and gzip is undone by `flate2` (a `.gz` is recognised
//! by its magic bytes, not its name). Legacy pcap comes in either byte
//! order with µs or ns timestamps; pcapng in sections of interfaces (SHB,
//! IDB), each interface with its own timestamp resolution and offset, and
//! packets in enhanced (EPB) or simple (SPB, interface 0, no timestamp:
//! the previous packet's) blocks. A frame carries its timestamp in ns since
//! the epoch and its interface (pcapng's interface id in its section; 0 in
//! pcap), which a run may take as the ingress port.
//!
//! Bad input is one [`CaptureError`] naming the file and the packet
//! (1-based) at which reading stopped: a file that is neither format, a
//! corrupt block, a link type other than Ethernet, or a file that ends
//! inside a record (truncated, also a gzip stream cut short). With
//! [`OnTruncated::Stop`] a truncated tail ends the capture instead, the
//! frames before it kept and a warning left in [`Capture::warning`].

use flate2::read::MultiGzDecoder;
use pcap_parser::traits::{PcapNGPacketBlock, PcapReaderIterator};
use pcap_parser::Block;
use pcap_parser::{create_reader, Linktype, PcapBlockOwned, PcapError};
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The reader's buffer to start with: a few hundred typical frames.
const BUFFER: usize = 1 << 18;
/// The largest record accepted (a larger length field is a corrupt file).
const MAX_RECORD: usize = 1 << 26;

/// What a truncated tail does: an error (the default), or the end of the
/// capture with a warning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnTruncated {
    #[default]
    Error,
    Stop,
}

/// A capture that cannot be read: one line naming the file and the packet.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CaptureError(pub String);

/// A batch of frames, columnar: frame `i` is `bytes[start[i]..start[i + 1]]`
/// (`start` has one element more than there are frames).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Frames {
    pub bytes: Vec<u8>,
    pub start: Vec<u32>,
    /// Per frame: timestamp (ns since the epoch), interface, length on the wire.
    pub ts_ns: Vec<u64>,
    pub interface: Vec<u32>,
    pub orig_len: Vec<u32>,
}

impl Frames {
    pub fn new() -> Self {
        Frames { start: vec![0], ..Default::default() }
    }

    /// Empties the batch, keeping the buffers' capacity.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.start.clear();
        self.start.push(0);
        self.ts_ns.clear();
        self.interface.clear();
        self.orig_len.clear();
    }

    pub fn push(&mut self, data: &[u8], ts_ns: u64, interface: u32, orig_len: u32) {
        self.bytes.extend_from_slice(data);
        self.start.push(self.bytes.len() as u32);
        self.ts_ns.push(ts_ns);
        self.interface.push(interface);
        self.orig_len.push(orig_len);
    }

    pub fn len(&self) -> usize {
        self.ts_ns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ts_ns.is_empty()
    }

    pub fn frame(&self, i: usize) -> &[u8] {
        &self.bytes[self.start[i] as usize..self.start[i + 1] as usize]
    }
}

/// The file under the decoder: counts the bytes read (progress) and keeps
/// the last I/O error, which `pcap-parser` reduces to `ReadError`.
struct Source<R> {
    inner: R,
    read: Arc<AtomicU64>,
    error: Arc<Mutex<Option<io::Error>>>,
}

impl<R: Read> Read for Source<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Ok(n) => {
                self.read.fetch_add(n as u64, Ordering::Relaxed);
                Ok(n)
            }
            Err(e) => {
                *self.error.lock().unwrap() = Some(io::Error::new(e.kind(), e.to_string()));
                Err(e)
            }
        }
    }
}

/// The gzip decoder's errors, kept as the file's are.
struct Keep<R> {
    inner: R,
    error: Arc<Mutex<Option<io::Error>>>,
}

impl<R: Read> Read for Keep<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).inspect_err(|e| {
            *self.error.lock().unwrap() = Some(io::Error::new(e.kind(), e.to_string()));
        })
    }
}

/// Per interface of the current pcapng section: units per second of its
/// timestamps and its offset in seconds.
#[derive(Clone, Copy)]
struct Iface {
    resolution: u64,
    offset_s: i64,
    snaplen: u32,
}

/// A capture file being read (see the module doc).
pub struct Capture {
    name: String,
    reader: Box<dyn PcapReaderIterator + Send>,
    on_truncated: OnTruncated,
    /// Legacy pcap: ns (else µs) timestamps.
    nano: bool,
    ifaces: Vec<Iface>,
    packets: u64,
    last_ts_ns: u64,
    capacity: usize,
    read: Arc<AtomicU64>,
    error: Arc<Mutex<Option<io::Error>>>,
    size: Option<u64>,
    done: bool,
    /// The truncated tail a [`OnTruncated::Stop`] capture stopped at.
    pub warning: Option<String>,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture").field("name", &self.name).field("packets", &self.packets).finish()
    }
}

impl Capture {
    /// Opens a capture file (gzip'd or not).
    pub fn open(path: &Path, on_truncated: OnTruncated) -> Result<Capture, CaptureError> {
        let name = path.display().to_string();
        let f = File::open(path).map_err(|e| CaptureError(format!("{name}: {}", io_what(&e))))?;
        let size = f.metadata().ok().map(|m| m.len());
        let mut c = Capture::from_reader(&name, f, on_truncated)?;
        c.size = size;
        Ok(c)
    }

    /// A capture read from `r` (`name` names it in errors).
    pub fn from_reader<R: Read + Send + 'static>(
        name: &str,
        r: R,
        on_truncated: OnTruncated,
    ) -> Result<Capture, CaptureError> {
        let read = Arc::new(AtomicU64::new(0));
        let error = Arc::new(Mutex::new(None));
        let mut src = BufReader::new(Source { inner: r, read: read.clone(), error: error.clone() });
        let gz = {
            let head = io::BufRead::fill_buf(&mut src).map_err(|e| CaptureError(format!("{name}: {}", io_what(&e))))?;
            head.starts_with(&[0x1f, 0x8b])
        };
        let input: Box<dyn Read + Send> = if gz {
            Box::new(Keep { inner: MultiGzDecoder::new(src), error: error.clone() })
        } else {
            Box::new(src)
        };
        let reader = match create_reader(BUFFER, input) {
            Ok(r) => r,
            Err(PcapError::Eof) => return Err(CaptureError(format!("{name}: empty file: expected a pcap or pcapng capture"))),
            Err(PcapError::ReadError) => {
                let e = error.lock().unwrap().take();
                return Err(CaptureError(match e {
                    // Nothing readable before the cut: no packet to keep.
                    Some(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                        format!("{name}: packet 1: truncated capture (the gzip stream ends early); 0 complete packets before it")
                    }
                    Some(e) => format!("{name}: {}", io_what(&e)),
                    None => format!("{name}: read error"),
                }));
            }
            Err(_) => {
                return Err(CaptureError(format!(
                    "{name}: expected a pcap or pcapng capture (gzip'd or not); the file starts with neither"
                )))
            }
        };
        Ok(Capture {
            name: name.to_string(),
            reader,
            on_truncated,
            nano: false,
            ifaces: Vec::new(),
            packets: 0,
            last_ts_ns: 0,
            capacity: BUFFER,
            read,
            error,
            size: None,
            done: false,
            warning: None,
        })
    }

    /// Packets read so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Bytes of the file read so far (compressed bytes for a gzip'd one)
    /// and its size, if known: the progress of a run.
    pub fn progress(&self) -> (u64, Option<u64>) {
        (self.read.load(Ordering::Relaxed), self.size)
    }

    /// Every frame has been read.
    pub fn is_done(&self) -> bool {
        self.done
    }

    fn fail<T>(&self, what: impl std::fmt::Display) -> Result<T, CaptureError> {
        fail_at(&self.name, self.packets, what)
    }

    /// A truncated tail: an error, or the end with a warning.
    fn truncated(&mut self, what: &str) -> Result<bool, CaptureError> {
        let msg = format!(
            "{}: packet {}: truncated capture ({what}); {} complete packets before it",
            self.name,
            self.packets + 1,
            self.packets
        );
        match self.on_truncated {
            OnTruncated::Error => Err(CaptureError(msg)),
            OnTruncated::Stop => {
                self.warning = Some(msg);
                self.done = true;
                Ok(false)
            }
        }
    }

    /// The first `n` frames of the capture at `path` (usize::MAX: all), in
    /// one [`Frames`]; a capture cut short ends at its last whole frame.
    pub fn read_first(path: &Path, n: usize) -> Result<Frames, CaptureError> {
        let mut cap = Capture::open(path, OnTruncated::Stop)?;
        let mut all = Frames::new();
        while all.len() < n && cap.next_into(&mut all)? {}
        Ok(all)
    }

    /// Appends the next frame to `out`; false at the end of the capture.
    pub fn next_into(&mut self, out: &mut Frames) -> Result<bool, CaptureError> {
        if self.done {
            return Ok(false);
        }
        loop {
            // What the block was, taken out before the buffer is touched again.
            enum Got {
                Frame { ts_ns: u64 },
                Other,
            }
            let (offset, got) = match self.reader.next() {
                Ok((offset, block)) => {
                    let got = match block {
                        PcapBlockOwned::LegacyHeader(h) => {
                            self.nano = h.is_nanosecond_precision();
                            check_link(&self.name, h.network)?;
                            self.ifaces = vec![Iface { resolution: 0, offset_s: 0, snaplen: h.snaplen }];
                            Got::Other
                        }
                        PcapBlockOwned::Legacy(b) => {
                            let frac = if self.nano { b.ts_usec as u64 } else { b.ts_usec as u64 * 1000 };
                            let ts_ns = b.ts_sec as u64 * 1_000_000_000 + frac;
                            out.push(b.data, ts_ns, 0, b.origlen);
                            Got::Frame { ts_ns }
                        }
                        PcapBlockOwned::NG(Block::SectionHeader(_)) => {
                            self.ifaces.clear();
                            Got::Other
                        }
                        PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                            check_link(&self.name, idb.linktype)?;
                            let Some(resolution) = ts_resolution(idb.if_tsresol) else {
                                return fail_at(&self.name, self.packets, format!("interface {}: timestamp resolution code {} is invalid", self.ifaces.len(), idb.if_tsresol));
                            };
                            self.ifaces.push(Iface { resolution, offset_s: idb.if_tsoffset, snaplen: idb.snaplen });
                            Got::Other
                        }
                        PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                            let Some(ifc) = self.ifaces.get(epb.if_id as usize).copied() else {
                                return fail_at(&self.name, self.packets, format!("packet block names interface {} of {} in its section", epb.if_id, self.ifaces.len()));
                            };
                            let ts = ((epb.ts_high as u64) << 32) | epb.ts_low as u64;
                            let ns = ts as u128 * 1_000_000_000 / ifc.resolution as u128;
                            let ts_ns = (ns as i128 + ifc.offset_s as i128 * 1_000_000_000).clamp(0, u64::MAX as i128) as u64;
                            out.push(epb.packet_data(), ts_ns, epb.if_id, epb.origlen);
                            Got::Frame { ts_ns }
                        }
                        PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                            let Some(ifc) = self.ifaces.first().copied() else {
                                return fail_at(&self.name, self.packets, "simple packet block before any interface description");
                            };
                            let mut d = spb.packet_data();
                            if ifc.snaplen > 0 && d.len() > ifc.snaplen as usize {
                                d = &d[..ifc.snaplen as usize];
                            }
                            out.push(d, self.last_ts_ns, 0, spb.origlen);
                            Got::Frame { ts_ns: self.last_ts_ns }
                        }
                        PcapBlockOwned::NG(_) => Got::Other,
                    };
                    (offset, got)
                }
                Err(PcapError::Eof) => {
                    self.done = true;
                    return Ok(false);
                }
                Err(PcapError::Incomplete(_)) => {
                    if !self.refill()? {
                        return Ok(false);
                    }
                    continue;
                }
                Err(PcapError::BufferTooSmall) => {
                    if self.capacity >= MAX_RECORD {
                        return self.fail(format!("corrupt capture (a record longer than {} MiB)", MAX_RECORD >> 20));
                    }
                    self.capacity *= 2;
                    self.reader.grow(self.capacity);
                    if !self.refill()? {
                        return Ok(false);
                    }
                    continue;
                }
                Err(PcapError::UnexpectedEof) => return self.truncated("the file ends inside a record"),
                Err(PcapError::ReadError) => return self.read_error(),
                Err(e) => {
                    let what = match e {
                        PcapError::NomError(_, k) | PcapError::OwnedNomError(_, k) => format!("{k:?}"),
                        e => e.to_string(),
                    };
                    return self.fail(format!("corrupt capture (unparsable block: {what})"));
                }
            };
            self.reader.consume(offset);
            if let Got::Frame { ts_ns, .. } = got {
                self.packets += 1;
                self.last_ts_ns = ts_ns;
                return Ok(true);
            }
        }
    }

    /// More of the file into the buffer; false: a truncated tail ended
    /// the capture ([`OnTruncated::Stop`]).
    fn refill(&mut self) -> Result<bool, CaptureError> {
        match self.reader.refill() {
            Ok(()) => Ok(true),
            Err(_) => self.read_error(),
        }
    }

    /// A read failed under the parser: a gzip stream cut short is a
    /// truncated capture, anything else an I/O or gzip error.
    fn read_error(&mut self) -> Result<bool, CaptureError> {
        let e = self.error.lock().unwrap().take();
        match e {
            Some(e) if e.kind() == io::ErrorKind::UnexpectedEof => self.truncated("the gzip stream ends early"),
            Some(e) => self.fail(format!("cannot read the capture ({})", io_what(&e))),
            None => self.fail("cannot read the capture"),
        }
    }
}

/// Units per second of pcapng's `if_tsresol`: 10^n, or 2^n with the top
/// bit set (`pcap-parser`'s own check refuses every 2^n code).
fn ts_resolution(code: u8) -> Option<u64> {
    let n = (code & 0x7f) as u32;
    if code & 0x80 == 0 {
        10u64.checked_pow(n)
    } else {
        1u64.checked_shl(n).filter(|_| n < 64)
    }
}

/// An error at the packet after the `read` complete ones.
fn fail_at<T>(name: &str, read: u64, what: impl std::fmt::Display) -> Result<T, CaptureError> {
    Err(CaptureError(format!("{name}: packet {}: {what}", read + 1)))
}

fn check_link(name: &str, l: Linktype) -> Result<(), CaptureError> {
    if l == Linktype::ETHERNET {
        Ok(())
    } else {
        Err(CaptureError(format!(
            "{name}: link type {}: expected Ethernet (1), the frames a P4 parser starts on",
            l.0
        )))
    }
}

fn io_what(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => "no such file".into(),
        io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A legacy pcap: magic in the given byte order, µs or ns.
    pub(crate) fn pcap(frames: &[(u32, u32, &[u8])], big: bool, nano: bool) -> Vec<u8> {
        let w32 = |v: u32| if big { v.to_be_bytes() } else { v.to_le_bytes() };
        let w16 = |v: u16| if big { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut b = Vec::new();
        b.extend(w32(if nano { 0xa1b23c4d } else { 0xa1b2c3d4 }));
        b.extend(w16(2));
        b.extend(w16(4));
        b.extend(w32(0));
        b.extend(w32(0));
        b.extend(w32(65535));
        b.extend(w32(1));
        for &(s, frac, d) in frames {
            b.extend(w32(s));
            b.extend(w32(frac));
            b.extend(w32(d.len() as u32));
            b.extend(w32(d.len() as u32 + 4)); // orig_len: the wire had 4 more bytes
            b.extend_from_slice(d);
        }
        b
    }

    fn block(kind: u32, body: &[u8]) -> Vec<u8> {
        let mut body = body.to_vec();
        while body.len() % 4 != 0 {
            body.push(0);
        }
        let len = 12 + body.len() as u32;
        let mut b = Vec::new();
        b.extend(kind.to_le_bytes());
        b.extend(len.to_le_bytes());
        b.extend(body);
        b.extend(len.to_le_bytes());
        b
    }

    fn shb() -> Vec<u8> {
        let mut body = Vec::new();
        body.extend(0x1a2b3c4du32.to_le_bytes());
        body.extend(1u16.to_le_bytes());
        body.extend(0u16.to_le_bytes());
        body.extend((-1i64).to_le_bytes());
        block(0x0a0d0d0a, &body)
    }

    /// An IDB with `if_tsresol` (None: the default, µs).
    fn idb(tsresol: Option<u8>) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend(1u16.to_le_bytes()); // Ethernet
        body.extend(0u16.to_le_bytes());
        body.extend(0u32.to_le_bytes()); // snaplen: none
        if let Some(r) = tsresol {
            body.extend(9u16.to_le_bytes());
            body.extend(1u16.to_le_bytes());
            body.extend([r, 0, 0, 0]);
            body.extend([0u8; 4]); // opt_endofopt
        }
        block(1, &body)
    }

    fn epb(iface: u32, ts: u64, d: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend(iface.to_le_bytes());
        body.extend(((ts >> 32) as u32).to_le_bytes());
        body.extend((ts as u32).to_le_bytes());
        body.extend((d.len() as u32).to_le_bytes());
        body.extend((d.len() as u32).to_le_bytes());
        body.extend_from_slice(d);
        block(6, &body)
    }

    fn spb(d: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend((d.len() as u32).to_le_bytes());
        body.extend_from_slice(d);
        block(3, &body)
    }

    fn read_all(bytes: Vec<u8>, t: OnTruncated) -> Result<(Frames, Capture), CaptureError> {
        let mut c = Capture::from_reader("x.pcap", io::Cursor::new(bytes), t)?;
        let mut f = Frames::new();
        while c.next_into(&mut f)? {}
        Ok((f, c))
    }

    fn gzip(b: &[u8]) -> Vec<u8> {
        use flate2::write::GzEncoder;
        use std::io::Write;
        let mut e = GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn pcap_in_both_byte_orders_and_resolutions() {
        let frames: [(u32, u32, &[u8]); 2] = [(10, 5, b"abcdefgh"), (11, 999, b"xyz")];
        for big in [false, true] {
            for nano in [false, true] {
                let (f, c) = read_all(pcap(&frames, big, nano), OnTruncated::Error).unwrap();
                let unit = if nano { 1 } else { 1000 };
                assert_eq!(f.ts_ns, vec![10_000_000_000 + 5 * unit, 11_000_000_000 + 999 * unit], "big {big} nano {nano}");
                assert_eq!((f.frame(0), f.frame(1)), (&b"abcdefgh"[..], &b"xyz"[..]));
                assert_eq!(f.orig_len, vec![12, 7]);
                assert_eq!(f.interface, vec![0, 0]);
                assert_eq!(c.packets(), 2);
            }
        }
    }

    #[test]
    fn pcapng_interfaces_keep_their_own_resolution() {
        // Interface 0 in µs (the default), 1 in ns (tsresol 9), 2 in 1/1024 s.
        let mut b = shb();
        b.extend(idb(None));
        b.extend(idb(Some(9)));
        b.extend(idb(Some(0x80 | 10)));
        b.extend(epb(0, 2_000_001, b"p0"));
        b.extend(epb(1, 2_000_000_007, b"p1"));
        b.extend(epb(2, 3 * 1024 + 512, b"p2"));
        b.extend(spb(b"spb"));
        // A new section forgets the interfaces: its own interface 0 in ms.
        b.extend(shb());
        b.extend(idb(Some(3)));
        b.extend(epb(0, 4_000, b"q0"));
        let (f, _) = read_all(b, OnTruncated::Error).unwrap();
        assert_eq!(f.ts_ns, vec![2_000_001_000, 2_000_000_007, 3_500_000_000, 3_500_000_000, 4_000_000_000]);
        assert_eq!(f.interface, vec![0, 1, 2, 0, 0]);
        assert_eq!(f.frame(3), b"spb");
        assert_eq!(f.frame(4), b"q0");
        // A packet naming an interface its section lacks.
        let mut b = shb();
        b.extend(idb(None));
        b.extend(epb(1, 0, b"p"));
        let e = read_all(b, OnTruncated::Error).unwrap_err();
        assert!(e.0.contains("packet 1: packet block names interface 1 of 1"), "{e}");
    }

    #[test]
    fn gzip_is_read_by_its_magic() {
        let frames: [(u32, u32, &[u8]); 2] = [(1, 0, b"one"), (2, 0, b"two")];
        let raw = pcap(&frames, false, false);
        let (f, c) = read_all(gzip(&raw), OnTruncated::Error).unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!(f.frame(1), b"two");
        assert!(c.progress().0 < raw.len() as u64 + 64);
    }

    #[test]
    fn truncation_and_corruption_name_the_packet() {
        let frames: [(u32, u32, &[u8]); 3] = [(1, 0, b"aaaa"), (2, 0, b"bbbb"), (3, 0, b"cccc")];
        let raw = pcap(&frames, false, false);
        let cut = raw[..raw.len() - 2].to_vec();
        let e = read_all(cut.clone(), OnTruncated::Error).unwrap_err();
        assert!(e.0.starts_with("x.pcap: packet 3: truncated capture"), "{e}");
        // Stop: the two complete packets, and a warning.
        let (f, c) = read_all(cut, OnTruncated::Stop).unwrap();
        assert_eq!(f.len(), 2);
        assert!(c.warning.as_deref().unwrap().contains("packet 3: truncated"));
        // A gzip stream cut short: at its start, or after many packets
        // (incompressible frames, so the cut falls in the last ones).
        let gz = gzip(&raw);
        let e = read_all(gz[..gz.len() - 12].to_vec(), OnTruncated::Error).unwrap_err();
        assert!(e.0.contains("packet 1: truncated capture"), "{e}");
        let mut x = 1u64;
        let noise: Vec<Vec<u8>> = (0..3000)
            .map(|_| (0..100).map(|_| { x = x.wrapping_mul(6364136223846793005).wrapping_add(1); (x >> 56) as u8 }).collect())
            .collect();
        let many: Vec<(u32, u32, &[u8])> = noise.iter().map(|d| (0, 0, &d[..])).collect();
        let gz = gzip(&pcap(&many, false, false));
        let e = read_all(gz[..gz.len() - 500].to_vec(), OnTruncated::Error).unwrap_err();
        assert!(e.0.contains("truncated capture (the gzip stream ends early)"), "{e}");
        let (f, _) = read_all(gz[..gz.len() - 500].to_vec(), OnTruncated::Stop).unwrap();
        assert!((2900..3000).contains(&f.len()), "{}", f.len());
        assert_eq!(f.frame(f.len() - 1), &noise[f.len() - 1][..]);
        // A pcapng block whose trailing length disagrees.
        let mut b = shb();
        b.extend(idb(None));
        b.extend(epb(0, 0, b"good"));
        let mut bad = epb(0, 0, b"bad!");
        let n = bad.len();
        bad[n - 4] ^= 0x40;
        b.extend(bad);
        let e = read_all(b, OnTruncated::Stop).unwrap_err();
        assert!(e.0.starts_with("x.pcap: packet 2: corrupt capture"), "{e}");
        // A record length beyond any frame.
        let mut raw = pcap(&frames, false, false);
        raw[24 + 8..24 + 12].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
        let e = read_all(raw, OnTruncated::Error).unwrap_err();
        assert!(e.0.contains("packet 1: ") && (e.0.contains("corrupt") || e.0.contains("truncated")), "{e}");
    }

    #[test]
    fn not_a_capture_is_one_line() {
        let e = read_all(b"hello, this is not a capture at all".to_vec(), OnTruncated::Error).unwrap_err();
        assert!(e.0.contains("expected a pcap or pcapng capture"), "{e}");
        let e = read_all(Vec::new(), OnTruncated::Error).unwrap_err();
        assert!(e.0.contains("empty file"), "{e}");
        let mut raw = pcap(&[], false, false);
        raw[20] = 101; // raw IP
        let e = read_all(raw, OnTruncated::Error).unwrap_err();
        assert!(e.0.contains("link type 101"), "{e}");
        let e = Capture::open(Path::new("/nonexistent/x.pcap"), OnTruncated::Error).unwrap_err();
        assert_eq!(e.0, "/nonexistent/x.pcap: no such file");
    }

    #[test]
    fn large_frames_grow_the_buffer_and_memory_stays_bounded() {
        // A 1 MiB frame (beyond the starting buffer), then many small ones.
        let big = vec![7u8; 1 << 20];
        let mut frames: Vec<(u32, u32, &[u8])> = vec![(0, 0, &big)];
        let small = [1u8; 60];
        for i in 0..20_000 {
            frames.push((i, 0, &small));
        }
        let mut c = Capture::from_reader("x", io::Cursor::new(pcap(&frames, false, false)), OnTruncated::Error).unwrap();
        let mut f = Frames::new();
        let mut n = 0;
        loop {
            f.clear();
            if !c.next_into(&mut f).unwrap() {
                break;
            }
            n += 1;
        }
        assert_eq!(n, 20_001);
        assert!(c.capacity <= 1 << 22);
    }
}

//! A stand-in executor: a tiny fixed program with the shape of a router,
//! for testing and benchmarking what consumes an executor's output
//! (streaming, interning, counters, output pcaps) without a compiled P4
//! program. Frames are Ethernet + IPv4 + UDP/TCP at fixed offsets.
//!
//! - table 0, `route`: LPM on the IPv4 destination (1 word); entries in
//!   match order 10.2.3.0/24, 10.1.0.0/16, 10.0.0.0/8, action `set_nhop`
//!   (id 1, next hop = the entry's index); a miss runs `drop` (id 2) and
//!   drops the packet (reason 1) without visiting the other tables;
//! - table 1, `nhop`: exact on the next hop (1 word): entries 0, 1 run
//!   `set_dmac` (3); a miss runs `NoAction` (0);
//! - table 2, `acl`: ternary on (protocol, UDP/TCP destination port)
//!   (2 words): UDP port 53 `deny` (4, dropped, reason 2), any UDP
//!   `permit` (5); a miss runs `NoAction`.
//!
//! A frame shorter than 42 bytes is a parser error (code 1) and visits
//! nothing. A packet that is not dropped leaves on port next hop + 1 with
//! its TTL decremented; a permitted UDP packet with an even source port is
//! also cloned to port 9.

use super::{Outcome, Outputs, RunPacket, Visits};

#[derive(Default)]
pub struct Standin {
    last_reason: u32,
    out: Vec<u8>,
}

const ROUTES: [(u32, u32); 3] = [(0x0a02_0300, 24), (0x0a01_0000, 16), (0x0a00_0000, 8)];

impl Standin {
    pub fn key_words_all(&self) -> Vec<usize> {
        vec![1, 1, 2]
    }
}

fn be16(b: &[u8], at: usize) -> u32 {
    u16::from_be_bytes([b[at], b[at + 1]]) as u32
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl RunPacket for Standin {
    fn tables(&self) -> usize {
        3
    }

    fn key_words(&self, t: usize) -> usize {
        [1, 1, 2][t]
    }

    fn run(&mut self, f: &[u8], _port: u32, _now_ps: u64, visits: &mut Visits, outputs: Option<&mut Outputs>) -> Outcome {
        if f.len() < 42 {
            visits.end_packet();
            return Outcome { dropped: false, parser_error: 1, outputs: 0 };
        }
        let dst = be32(f, 30);
        let route = ROUTES.iter().position(|&(p, l)| dst >> (32 - l) == p >> (32 - l));
        let Some(nhop) = route else {
            visits.push(0, -1, 2, &[dst]);
            visits.end_packet();
            self.last_reason = 1;
            return Outcome { dropped: true, parser_error: 0, outputs: 0 };
        };
        visits.push(0, nhop as i32, 1, &[dst]);
        let n = nhop as u32;
        visits.push(1, if n < 2 { n as i32 } else { -1 }, if n < 2 { 3 } else { 0 }, &[n]);
        let (proto, dport) = (f[23] as u32, be16(f, 36));
        let acl = match (proto, dport) {
            (17, 53) => Some(0),
            (17, _) => Some(1),
            _ => None,
        };
        visits.push(2, acl.map_or(-1, |e| e), [0, 4, 5][acl.map_or(0, |e| e as usize + 1)], &[proto, dport]);
        visits.end_packet();
        if acl == Some(0) {
            self.last_reason = 2;
            return Outcome { dropped: true, parser_error: 0, outputs: 0 };
        }
        let clone = acl == Some(1) && be16(f, 34) % 2 == 0;
        if let Some(o) = outputs {
            self.out.clear();
            self.out.extend_from_slice(f);
            self.out[22] = self.out[22].wrapping_sub(1);
            // The packet's index in the batch: its visits were just ended.
            let input = visits.packets() as u32 - 1;
            o.push(n + 1, input, &self.out);
            if clone {
                o.push(9, input, f);
            }
        }
        Outcome { dropped: false, parser_error: 0, outputs: 1 + clone as u32 }
    }

    fn drop_reason(&self) -> u32 {
        self.last_reason
    }

    fn drop_reasons(&self) -> Vec<String> {
        vec!["dropped".into(), "route miss".into(), "acl deny".into()]
    }
}

/// Frame `rep` of flow `flow`: the flow decides destination, protocol and
/// ports; the repetition changes the IP id and the TTL (every frame
/// differs); every 13th flow is cut short (a parser error).
pub fn frame(flow: u32, rep: u32) -> Vec<u8> {
    let mut f = vec![0u8; 42];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[18..20].copy_from_slice(&((rep.wrapping_mul(7).wrapping_add(flow)) as u16).to_be_bytes());
    f[22] = 64 - (rep % 50) as u8;
    f[23] = if flow % 10 == 9 { 6 } else { 17 };
    let dst = match flow % 4 {
        0 => 0x0a02_0300 | (flow & 0xff),
        1 => 0x0a01_0000 | (flow & 0xffff),
        2 => 0x0a00_0000 | (flow & 0xff_ffff),
        _ => 0x0b00_0000 | flow,
    };
    f[26..30].copy_from_slice(&(0xc0a8_0000u32 | flow).to_be_bytes());
    f[30..34].copy_from_slice(&dst.to_be_bytes());
    f[34..36].copy_from_slice(&((1000 + flow) as u16).to_be_bytes());
    let dport = if flow % 5 == 0 { 53 } else { 80 + flow % 7 };
    f[36..38].copy_from_slice(&(dport as u16).to_be_bytes());
    if flow % 13 == 12 {
        f.truncate(30);
    }
    f
}

//! Code specialised to one program, written as a generator would emit it:
//! the ceiling of per-program code generation, measured against the
//! interpreter ([`super::Executor`]) on the same program and capture.
//!
//! [`Router`] is `tests/data/p4/router.json` (the `p4speed` router): the
//! parser as straight-line reads at fixed offsets (no PHV: only the fields
//! the program reads are held, in locals), the tables probed through the
//! linked program's own lookup structures (entries stay the control
//! plane's), actions inline, simple_switch's flow for a unicast packet
//! only (the router makes no clones, resubmits or multicast), and the
//! deparser as the frame copied with the written fields patched. Its
//! visits and output packets are the interpreter's, bit for bit (the test
//! below runs both on every kind of frame the parser distinguishes).
//!
//! [`Router::link`] refuses a program of another shape: the tables, their
//! lookup paths, actions and next nodes must be the ones this code was
//! written for.

use super::control::{Node, NO_ACTION};
use super::exec::Program;
use super::run::{Outcome, Outputs};
use super::table::{Hit, Index, Probe};
use super::visits::Visits;

/// One keyed table's place in the linked program.
#[derive(Clone, Copy, Debug)]
struct T {
    /// Table index (into `hot`, `indexes`).
    ti: usize,
    keyed: u16,
    probe: Probe,
    hits: u32,
    data: u32,
    miss: Hit,
}

/// The router of `tests/data/p4/router.json`, specialised (see the module doc).
pub struct Router<'p> {
    p: &'p Program,
    lpm: T,
    acl: T,
    nhop: T,
    port: T,
    /// Action ids.
    set_nhop: u32,
    drop: u32,
    set_dmac: u32,
    deny: u32,
    permit: u32,
    set_tag: u32,
    drop_port: u64,
    /// Parser error codes.
    too_short: u32,
    stack_oob: u32,
    no_match: u32,
    bad_ihl: u32,
    /// `counter_array c` (the permit action's), per index [packets, bytes].
    pub counter: [u64; 2],
    /// `scalars.tag` of the last packet (what `Executor::field` would read).
    pub tag: u16,
    vals: Vec<u128>,
}

fn be16(b: &[u8], at: usize) -> u32 {
    u16::from_be_bytes([b[at], b[at + 1]]) as u32
}

impl<'p> Router<'p> {
    /// The specialised code over `p`, if `p` is the router.
    pub fn link(p: &'p Program) -> Result<Router<'p>, String> {
        let action = |name: &str| {
            p.actions.iter().position(|a| a.name == name).map(|i| i as u32).ok_or_else(|| format!("no action {name}"))
        };
        let node = |name: &str| {
            p.nodes.iter().position(|n| matches!(n, Node::Table(t) if p.tables[*t as usize].name == name))
        };
        let table = |name: &str, probe: Option<Probe>, acts: &[(u32, Option<&str>)]| -> Result<T, String> {
            let ti = p.tables.iter().position(|t| t.name == name).ok_or_else(|| format!("no table {name}"))?;
            let (t, th) = (&p.tables[ti], p.hot[ti]);
            if !th.plain || probe.is_some_and(|pr| th.probe != pr) {
                return Err(format!("{name}: not the lookup path this code probes"));
            }
            let n = t.rows.len() / (3 * t.key.len().max(1));
            // every entry's and the miss's (action, next) among those written for
            let hits = p.hits[th.hits as usize..th.hits as usize + n].iter().chain([&th.miss]);
            for h in hits {
                let next = if h.next < 0 { None } else { Some(h.next) };
                let ok = acts.iter().any(|&(a, nx)| a == h.action && nx.map(|x| node(x).map(|i| i as i32)).unwrap_or(None) == next);
                if !ok {
                    return Err(format!("{name}: action {} then node {} not written for", h.action, h.next));
                }
            }
            Ok(T { ti, keyed: th.keyed, probe: th.probe, hits: th.hits, data: th.data, miss: th.miss })
        };
        let cond = |name: &str| p.nodes.iter().position(|n| matches!(n, Node::Cond(c) if c.name == name));
        let (noop, set_nhop, drop, set_dmac, deny, permit, set_tag) = (action("NoAction")?, action("MyIngress.set_nhop")?,
            action("MyIngress.drop")?, action("MyIngress.set_dmac")?, action("MyIngress.deny")?, action("MyIngress.permit")?,
            action("MyIngress.set_tag")?);
        if p.objs.ingress < 0 || p.objs.egress < 0 || cond("node_1").is_none() || cond("node_2").is_none() {
            return Err("not the router's pipelines".into());
        }
        // the lpm's next on a hit is node_2 (the ttl test), which this code inlines
        let lpm = {
            let ti = p.tables.iter().position(|t| t.name == "MyIngress.ipv4_lpm").ok_or("no table MyIngress.ipv4_lpm")?;
            let th = p.hot[ti];
            let n2 = cond("node_2").unwrap() as i32;
            let n = p.tables[ti].rows.len() / 3;
            let ok = p.hits[th.hits as usize..th.hits as usize + n].iter().chain([&th.miss])
                .all(|h| (h.action == drop && h.next < 0) || ((h.action == set_nhop || h.action == noop) && h.next == n2));
            if !ok || th.probe != Probe::Lpm1 || !th.plain {
                return Err("MyIngress.ipv4_lpm: not the table this code was written for".into());
            }
            T { ti, keyed: th.keyed, probe: th.probe, hits: th.hits, data: th.data, miss: th.miss }
        };
        let acl = table("MyIngress.acl", None, &[(deny, Some("MyIngress.nhop_tbl")), (permit, Some("MyIngress.nhop_tbl")),
                                               (deny, None), (permit, None), (noop, None), (noop, Some("MyIngress.nhop_tbl"))])?;
        if !matches!(p.indexes[acl.ti], Index::Linear(_) | Index::Classifier(_)) || p.tables[acl.ti].words != 4 {
            return Err("MyIngress.acl: not the key this code builds".into());
        }
        let nhop = table("MyIngress.nhop_tbl", Some(Probe::Exact1), &[(set_dmac, None), (set_tag, None), (noop, None)])?;
        let port = table("MyEgress.port_tbl", Some(Probe::Exact1), &[(noop, None), (set_tag, None)])?;
        let e = &p.errors;
        let bad_ihl = p.error_names.iter().find(|(_, n)| n.as_str() == "BadIhl").map(|(&c, _)| c).ok_or("no error BadIhl")?;
        Ok(Router { p, lpm, acl, nhop, port, set_nhop, drop, set_dmac, deny, permit, set_tag,
                    drop_port: p.objs.flow.drop_port, too_short: e.too_short, stack_oob: e.stack_out_of_bounds,
                    no_match: e.no_match, bad_ihl, counter: [0; 2], tag: 0, vals: vec![0; 4] })
    }

    #[inline(always)]
    fn hit(&self, t: &T, entry: Option<u32>) -> (Hit, &'p [u128]) {
        let h = entry.map_or(t.miss, |e| self.p.hits[(t.hits + e) as usize]);
        (h, if h.action == NO_ACTION { &[] } else { &self.p.data[(t.data + h.data) as usize..] })
    }

    /// The arrival time: the router has no meter, nothing reads it.
    pub fn arrive(&mut self, _now_ps: u64) {}

    /// The pipeline that dropped the last dropped packet: the router drops
    /// only in ingress (its egress has no drop).
    pub fn drop_pipeline(&self) -> u32 {
        1
    }

    /// One frame through the router (as [`super::RunPacket::run`]).
    pub fn run(&mut self, frame: &[u8], ingress_port: u32, visits: &mut Visits, outputs: Option<&mut Outputs>) -> Outcome {
        let _ = ingress_port; // the router reads no metadata it sets
        let input = visits.packets() as u32;
        let n = frame.len();
        // parser: start, parse_vlan (a stack of 2), parse_ipv4, parse_udp, parse_magic
        let mut err = 0;
        let (mut ip, mut udp) = (usize::MAX, usize::MAX);
        if n < 14 {
            err = self.too_short;
        } else {
            let (mut ty, mut pos, mut vlans) = (be16(frame, 12), 14, 0);
            loop {
                if ty == 0x8100 {
                    if vlans == 2 {
                        err = self.stack_oob;
                    } else if pos + 4 > n {
                        err = self.too_short;
                    } else {
                        ty = be16(frame, pos + 2);
                        pos += 4;
                        vlans += 1;
                        continue;
                    }
                } else if ty == 0x800 {
                    if pos + 20 > n {
                        err = self.too_short;
                    } else {
                        ip = pos;
                        pos += 20;
                        if frame[ip] & 0xf != 5 {
                            err = self.bad_ihl;
                        } else if frame[ip + 9] == 0x11 {
                            if pos + 8 > n {
                                err = self.too_short;
                            } else {
                                udp = pos;
                                pos += 8;
                                // lookahead<bit<4>>
                                if pos >= n {
                                    err = self.too_short;
                                } else if frame[pos] >> 4 == 0xa {
                                    let m = frame[pos];
                                    if m & 0xfe != 0xa2 && m != 0xa1 {
                                        err = self.no_match;
                                    }
                                }
                            }
                        }
                    }
                }
                break;
            }
        }
        // ingress
        let mut espec = 0u64;
        let (mut ttl_w, mut dmac) = (None, None);
        'ingress: {
            if ip == usize::MAX {
                espec = self.drop_port; // tbl_drop
                break 'ingress;
            }
            let dst = u32::from_be_bytes(frame[ip + 16..ip + 20].try_into().unwrap());
            let mut ttl = frame[ip + 8];
            let t = self.lpm;
            visits.key_words.push(dst);
            let e = self.p.indexes[t.ti].lookup_one(t.probe, dst);
            let (h, d) = self.hit(&t, e);
            visits.close(t.keyed, e.map_or(-1, |e| e as i32), h.action);
            let mut nhop = 0u32;
            if h.action == self.set_nhop {
                nhop = d[0] as u32 & 0xffff;
                espec = d[1] as u64 & 0x1ff;
                ttl = ttl.wrapping_sub(1);
                ttl_w = Some(ttl);
            } else if h.action == self.drop {
                espec = self.drop_port;
                break 'ingress;
            }
            // node_2
            if ttl == 0 {
                espec = self.drop_port; // tbl_drop_ttl
                break 'ingress;
            }
            let t = self.acl;
            let (sport, dport, uv) = if udp == usize::MAX { (0, 0, 0) } else { (be16(frame, udp), be16(frame, udp + 2), 1) };
            let at = visits.key_words.len();
            visits.key_words.extend_from_slice(&[dport, frame[ip + 9] as u32, sport, uv]);
            let e = self.p.indexes[t.ti].lookup_words(&visits.key_words[at..], &mut self.vals);
            let (h, _) = self.hit(&t, e);
            visits.close(t.keyed, e.map_or(-1, |e| e as i32), h.action);
            if h.action == self.deny {
                espec = self.drop_port;
                break 'ingress;
            }
            if h.action == self.permit {
                self.counter[0] += 1;
                self.counter[1] += n as u64;
            }
            if h.next < 0 {
                break 'ingress;
            }
            let t = self.nhop;
            visits.key_words.push(nhop);
            let e = self.p.indexes[t.ti].lookup_one(t.probe, nhop);
            let (h, d) = self.hit(&t, e);
            visits.close(t.keyed, e.map_or(-1, |e| e as i32), h.action);
            if h.action == self.set_dmac {
                dmac = Some(d[0] as u64 & 0xffff_ffff_ffff);
                self.tag = ((((nhop << 4) | 3) ^ 1) & 0xffff) as u16;
            } else if h.action == self.set_tag {
                self.tag = d[0] as u16;
            }
        }
        if espec == self.drop_port {
            visits.end_packet();
            return Outcome { dropped: true, parser_error: err, outputs: 0 };
        }
        // egress: node_e1 (hdr.u is never extracted: false), port_tbl
        let t = self.port;
        let w = espec as u32;
        visits.key_words.push(w);
        let e = self.p.indexes[t.ti].lookup_one(t.probe, w);
        let (h, d) = self.hit(&t, e);
        visits.close(t.keyed, e.map_or(-1, |e| e as i32), h.action);
        if h.action == self.set_tag {
            self.tag = d[0] as u16;
        }
        let mut sent = 0;
        if let Some(o) = outputs {
            // the deparser: every header emitted where it was parsed, the written fields patched
            let at = o.bytes.len();
            o.bytes.extend_from_slice(frame);
            if let Some(m) = dmac {
                o.bytes[at..at + 6].copy_from_slice(&m.to_be_bytes()[2..]);
            }
            if let Some(t) = ttl_w {
                o.bytes[at + ip + 8] = t;
            }
            o.end_packet(espec as u32, input);
            sent = 1;
        }
        visits.end_packet();
        Outcome { dropped: false, parser_error: err, outputs: sent }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::program::{Executor, RunPacket};

    /// The router's description, as `RustProgram.load(router.json, router-entries.txt).description` writes it.
    fn router() -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/p4/router-desc.json");
        std::fs::read_to_string(path).expect("tests/data/p4/router-desc.json")
    }

    /// Frames of every path the router's parser and tables distinguish.
    pub(crate) fn frames(seed: u64) -> Vec<Vec<u8>> {
        let mut r = crate::program::externs::SplitMix64(seed);
        let mut out = Vec::new();
        for _ in 0..4000 {
            let x = r.next_u64();
            let mut f = vec![0u8; 0];
            let mut eth = [0u8; 14];
            for b in eth.iter_mut().take(12) {
                *b = r.next_u64() as u8;
            }
            let vlans = [0, 0, 0, 1, 2, 3][(x % 6) as usize];
            let ty = [0x0800u16, 0x0800, 0x86dd, 0x8100][((x >> 3) % 4) as usize];
            eth[12..14].copy_from_slice(&(if vlans > 0 { 0x8100 } else { ty }).to_be_bytes());
            f.extend_from_slice(&eth);
            for i in 0..vlans {
                let next: u16 = if i + 1 < vlans { 0x8100 } else { ty };
                f.extend_from_slice(&[r.next_u64() as u8, r.next_u64() as u8]);
                f.extend_from_slice(&next.to_be_bytes());
            }
            let mut ip = [0u8; 20];
            for b in ip.iter_mut() {
                *b = r.next_u64() as u8;
            }
            ip[0] = if (x >> 6) % 16 == 0 { 0x46 } else { 0x45 };
            ip[8] = [0u8, 1, 2, 64][((x >> 10) % 4) as usize];
            ip[9] = if (x >> 12) % 4 == 0 { 6 } else { 0x11 };
            let dst: u32 = [0x0a01_0203, 0x0a02_0304, 0x0b00_0001, 0x0a01_ffff][((x >> 14) % 4) as usize];
            ip[16..20].copy_from_slice(&dst.to_be_bytes());
            f.extend_from_slice(&ip);
            let mut udp = [0u8; 8];
            let sport: u16 = [0, 0x3ff, 0x400, 1234][((x >> 16) % 4) as usize];
            let dport: u16 = [53, 80, 53, 9][((x >> 18) % 4) as usize];
            udp[0..2].copy_from_slice(&sport.to_be_bytes());
            udp[2..4].copy_from_slice(&dport.to_be_bytes());
            f.extend_from_slice(&udp);
            let m = [0xa1u8, 0xa2, 0xa3, 0xa7, 0x10, 0xaf][((x >> 20) % 6) as usize];
            f.push(m);
            for _ in 0..(x >> 24) % 20 {
                f.push(r.next_u64() as u8);
            }
            // a frame cut anywhere, now and then
            if (x >> 40) % 5 == 0 {
                let cut = (x >> 44) as usize % (f.len() + 1);
                f.truncate(cut);
            }
            out.push(f);
        }
        out
    }

    #[test]
    fn the_specialised_router_makes_the_interpreters_visits_outputs_and_counts() {
        let desc = router();
        let mut ex = Executor::from_json(&desc).unwrap();
        let prog = Program::from_json(&desc).unwrap();
        let mut nat = Router::link(&prog).unwrap();
        for seed in 1..4 {
            let (mut v1, mut o1, mut v2, mut o2) = (Visits::new(), Outputs::new(), Visits::new(), Outputs::new());
            for f in frames(seed) {
                let a = ex.run(&f, 1, 0, &mut v1, Some(&mut o1));
                let b = nat.run(&f, 1, &mut v2, Some(&mut o2));
                assert_eq!(a, b, "frame {f:02x?}");
            }
            assert_eq!(v1, v2);
            assert_eq!(o1, o2);
            let c = ex.prog.objs.counters.iter().position(|c| c.0 == "c").unwrap();
            assert_eq!(ex.externs().counters[c][0], nat.counter);
        }
    }

    #[test]
    fn another_program_is_refused() {
        let desc = router();
        let mut d: serde_json::Value = serde_json::from_str(&desc).unwrap();
        // nhop_tbl's set_dmac then goes on to the acl: not what this code was written for
        for n in d["nodes"].as_array_mut().unwrap() {
            if n["name"] == "MyIngress.nhop_tbl" {
                n["next"]["actions"]["3"] = serde_json::json!(3);
            }
        }
        let p = Program::from_json(&d.to_string()).unwrap();
        assert!(Router::link(&p).is_err());
    }
}

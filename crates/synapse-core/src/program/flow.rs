//! simple_switch's packet flow around a program's pipelines: ingress,
//! clones, digests, resubmit, multicast, the priority check at enqueue,
//! egress, recirculation (BMv2's `targets/simple_switch/simple_switch.cpp`).
//!
//! [`Flow::process`] runs one received frame and every copy it makes, in
//! the order they are made, before the next frame (the control plane's
//! twin, the oracle, is `synapse_vmt.p4.switch.Flow`):
//!
//! 1. **ingress**: a fresh PHV (metadata zero; a resubmitted or
//!    recirculated packet keeps its field list), `ingress_port`,
//!    `packet_length`, `instance_type`, the parser, the ingress pipeline;
//! 2. an **ingress clone** whose mirroring session is configured: the frame
//!    as it arrived, parsed again, metadata zeroed but the clone's field
//!    list (instance type 1), to the session's port and/or group; a
//!    **digest**; a **resubmit** (instance type 6; nothing else happens to
//!    the packet); **multicast** (one copy per replica with its
//!    `egress_rid`, instance type 5); `egress_spec` = drop port: dropped;
//!    else to `egress_spec` (instance type 0);
//! 3. **enqueue**: a priority not below the number of queues drops it;
//! 4. **egress**: `egress_port`, `egress_spec` = drop port + 1,
//!    `packet_length` (the packet's current length), the egress pipeline;
//!    an **egress clone** (instance type 2); `egress_spec` = drop port:
//!    dropped; else deparsed, and a **recirculate** sends the bytes back to
//!    ingress (instance type 4), else the packet leaves.
//!
//! The executor supplies the passes ([`Passes`]); this module only decides
//! what happens between them. A packet stuck in a resubmit or recirculate
//! loop is stopped after [`MAX_PASSES`] passes.

use std::collections::{HashMap, VecDeque};

use super::run::Outputs;
use super::visits::Visits;

/// Passes (ingress and egress) of one input packet and its copies before it is stopped.
pub const MAX_PASSES: u32 = 64;

/// `standard_metadata.instance_type` values (BMv2's `PktInstanceType`).
pub mod instance {
    pub const NORMAL: u64 = 0;
    pub const INGRESS_CLONE: u64 = 1;
    pub const EGRESS_CLONE: u64 = 2;
    pub const RECIRC: u64 = 4;
    pub const REPLICATION: u64 = 5;
    pub const RESUBMIT: u64 = 6;
}

/// What simple_switch configures besides table entries (the entries
/// file's `mirroring_add`, `mc_*` commands and the switch's options).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchConfig {
    /// Mirror session -> (egress port, multicast group).
    pub mirroring: HashMap<u32, (Option<u32>, Option<u32>)>,
    /// Multicast group -> its replicas (egress port, egress_rid), in BMv2's order.
    pub mc_groups: HashMap<u32, Vec<(u32, u32)>>,
    /// `--priority-queues` (default 1).
    pub priority_queues: u64,
    /// `--drop-port` (default 511).
    pub drop_port: u64,
}

impl Default for SwitchConfig {
    fn default() -> Self {
        SwitchConfig { mirroring: HashMap::new(), mc_groups: HashMap::new(), priority_queues: 1, drop_port: 511 }
    }
}

/// The fields simple_switch reads and writes by name, and the packet's
/// own registers (set by the clone/resubmit/recirculate/digest externs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum Meta {
    IngressPort,
    PacketLength,
    InstanceType,
    EgressSpec,
    EgressPort,
    McastGrp,
    EgressRid,
    Priority,
    IngressTimestamp,
    EgressTimestamp,
    ChecksumError,
    ParserError,
    /// The clone's mirror session | 0x10000 (0: no clone asked for).
    CloneSession,
    CloneFieldList,
    /// Field list of a resubmit / recirculate (0: none).
    Resubmit,
    Recirculate,
    /// Learn list of a digest (0: none).
    Learn,
    /// The packet's length as headers are added and removed.
    Length,
}

impl Meta {
    pub const COUNT: usize = Meta::Length as usize + 1;
}

/// Which pipeline a pass runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pipe {
    Ingress,
    Egress,
}

/// What the executor does for the flow.
pub trait Passes {
    type Phv;
    /// A PHV as a packet arrives: every metadata field zero, no header valid.
    fn fresh(&mut self) -> Self::Phv;
    /// Runs the parser over `frame`; returns where the payload starts.
    fn parse(&mut self, phv: &mut Self::Phv, frame: &[u8]) -> usize;
    /// Runs a pipeline over a copy parsed from `frame`, appending the packet's visits.
    fn pipeline(&mut self, phv: &mut Self::Phv, pipe: Pipe, ctx: &Pass, frame: &[u8], visits: &mut Visits);
    /// The deparsed packet (checksums updated) into `out`.
    fn deparse(&mut self, phv: &mut Self::Phv, frame: &[u8], payload: usize, out: &mut Vec<u8>);
    /// A field simple_switch reads by name (0 if the program has none).
    fn get(&self, phv: &Self::Phv, m: Meta) -> u64;
    fn set(&mut self, phv: &mut Self::Phv, m: Meta, v: u64);
    /// A copy of `phv` (a clone or a multicast replica).
    fn copy(&mut self, phv: &Self::Phv) -> Self::Phv;
    /// Zeroes the metadata and the packet's registers of `phv`, then copies
    /// the fields of `field_list` from `from` (BMv2's `reset_metadata` and
    /// `copy_fields_between_phvs`).
    fn reset_metadata(&mut self, phv: &mut Self::Phv, from: &Self::Phv, field_list: u64);
    /// A digest of learn list `learn` from `phv`.
    fn digest(&mut self, phv: &Self::Phv, learn: u64);
    /// A copy is done with (sent or dropped): its storage may be reused.
    fn recycle(&mut self, _phv: Self::Phv) {}
    /// The queue of passes, empty, to reuse from packet to packet (a
    /// packet without copies then allocates nothing); default: a new one.
    fn take_work(&mut self) -> VecDeque<Work<Self::Phv>> {
        VecDeque::new()
    }
    /// The queue back after a packet, empty.
    fn give_work(&mut self, _work: VecDeque<Work<Self::Phv>>) {}
}

/// The context of one pass, for externs that need it (meters, counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// The length the packet had when it arrived (BMv2's ingress length).
    pub ingress_length: u64,
    pub now_us: u64,
}

/// Why copies were dropped, and what the flow made, over the packets run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowCounts {
    pub drop_ingress: u64,
    pub drop_egress: u64,
    pub drop_priority: u64,
    pub drop_no_replica: u64,
    pub drop_pass_limit: u64,
    pub ingress_clones: u64,
    pub egress_clones: u64,
    pub resubmits: u64,
    pub recirculations: u64,
    pub replicas: u64,
    /// Packets sent per egress port.
    pub out_ports: std::collections::BTreeMap<u64, u64>,
}

/// A pass to run; `own` is the copy's own frame (a recirculated packet's
/// deparsed bytes), None for the frame as received.
pub enum Work<P> {
    Ingress { own: Option<Vec<u8>>, keep: Option<(P, u64)>, instance: u64, ingress_length: u64 },
    Egress { port: u64, phv: P, ingress_length: u64, payload: usize, own: Option<Vec<u8>> },
}

/// The packet flow (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct Flow {
    pub config: SwitchConfig,
    pub counts: FlowCounts,
    out: Vec<u8>,
}

impl Flow {
    pub fn new(config: SwitchConfig) -> Flow {
        Flow { config, counts: FlowCounts::default(), out: Vec::new() }
    }

    /// Runs `frame`, arrived on `port` at `now_us`, and its copies; appends
    /// the visits of all of them (one packet of `visits`) and, when asked,
    /// the packets that leave. Returns how many left.
    pub fn process<X: Passes>(&mut self, x: &mut X, frame: &[u8], port: u32, now_us: u64, visits: &mut Visits,
                              mut outputs: Option<&mut Outputs>) -> u32 {
        let input = visits.packets() as u32;
        let mut work = x.take_work();
        // the last packet left it empty (clear() on an empty deque is still a call)
        if !work.is_empty() {
            work.clear();
        }
        // the received packet's ingress pass, first in the queue: run at once
        let ctx = Pass { ingress_length: frame.len() as u64, now_us };
        // The pass a pass hands on for its own packet (to egress, resubmitted,
        // recirculated) is the last one made: it runs next without the queue
        // when nothing else is queued, so a unicast packet never touches it.
        let mut next = self.ingress(x, frame, None, port, None, instance::NORMAL, ctx, visits, &mut work);
        let (mut passes, mut sent) = (1, 0);
        loop {
            let w = match next.take() {
                Some(w) if work.is_empty() => w,
                Some(w) => {
                    work.push_back(w);
                    work.pop_front().unwrap()
                }
                None => match work.pop_front() {
                    Some(w) => w,
                    None => break,
                },
            };
            passes += 1;
            if passes > MAX_PASSES {
                self.counts.drop_pass_limit += 1;
                work.clear();
                break;
            }
            match w {
                Work::Ingress { own, keep, instance: inst, ingress_length } => {
                    let ctx = Pass { ingress_length, now_us };
                    next = self.ingress(x, frame, own, port, keep, inst, ctx, visits, &mut work);
                }
                Work::Egress { port: eport, mut phv, ingress_length, payload, own } => {
                    let ctx = Pass { ingress_length, now_us };
                    let frame_of = own.as_deref().unwrap_or(frame);
                    let cfg = &self.config;
                    x.set(&mut phv, Meta::EgressPort, eport);
                    x.set(&mut phv, Meta::EgressSpec, cfg.drop_port + 1);
                    let len = x.get(&phv, Meta::Length);
                    x.set(&mut phv, Meta::PacketLength, len);
                    x.set(&mut phv, Meta::EgressTimestamp, now_us);
                    x.pipeline(&mut phv, Pipe::Egress, &ctx, frame_of, visits);
                    let clone = x.get(&phv, Meta::CloneSession);
                    if clone != 0 {
                        if let Some(&session) = self.config.mirroring.get(&((clone & 0xffff) as u32)) {
                            let mut q = x.copy(&phv);
                            x.reset_metadata(&mut q, &phv, x.get(&phv, Meta::CloneFieldList));
                            x.set(&mut q, Meta::InstanceType, instance::EGRESS_CLONE);
                            x.set(&mut q, Meta::Length, len);
                            self.counts.egress_clones += 1;
                            self.send(x, q, session, ingress_length, payload, own.clone(), &mut work);
                        }
                        x.set(&mut phv, Meta::CloneSession, 0);
                    }
                    if x.get(&phv, Meta::EgressSpec) == self.config.drop_port {
                        self.counts.drop_egress += 1;
                        x.recycle(phv);
                        continue;
                    }
                    let fl = x.get(&phv, Meta::Recirculate);
                    if fl != 0 {
                        self.out.clear();
                        x.deparse(&mut phv, frame_of, payload, &mut self.out);
                        self.counts.recirculations += 1;
                        let bytes = self.out.clone();
                        let n = bytes.len() as u64;
                        next = Some(Work::Ingress { own: Some(bytes), keep: Some((phv, fl)), instance: instance::RECIRC,
                                                    ingress_length: n });
                        continue;
                    }
                    if let Some(o) = outputs.as_deref_mut() {
                        // deparsed straight into the batch's bytes
                        x.deparse(&mut phv, frame_of, payload, &mut o.bytes);
                        o.end_packet(eport as u32, input);
                    }
                    x.recycle(phv);
                    *self.counts.out_ports.entry(eport).or_insert(0) += 1;
                    sent += 1;
                }
            }
        }
        x.give_work(work);
        visits.end_packet();
        sent
    }

    #[allow(clippy::too_many_arguments)]
    fn ingress<X: Passes>(&mut self, x: &mut X, received: &[u8], own: Option<Vec<u8>>, port: u32, keep: Option<(X::Phv, u64)>,
                          inst: u64, ctx: Pass, visits: &mut Visits, work: &mut VecDeque<Work<X::Phv>>)
                          -> Option<Work<X::Phv>> {
        let frame = own.as_deref().unwrap_or(received);
        let mut phv = x.fresh();
        match keep {
            Some((from, fl)) => {
                x.reset_metadata(&mut phv, &from, fl);
                x.recycle(from);
            }
            None => x.set(&mut phv, Meta::IngressPort, port as u64),
        }
        let n = frame.len() as u64;
        x.set(&mut phv, Meta::PacketLength, n);
        x.set(&mut phv, Meta::Length, n);
        x.set(&mut phv, Meta::InstanceType, inst);
        x.set(&mut phv, Meta::IngressTimestamp, ctx.now_us);
        let payload = x.parse(&mut phv, frame);
        x.pipeline(&mut phv, Pipe::Ingress, &ctx, frame, visits);
        let clone = x.get(&phv, Meta::CloneSession);
        if clone != 0 {
            if let Some(&session) = self.config.mirroring.get(&((clone & 0xffff) as u32)) {
                // the packet as it arrived, parsed again; metadata zeroed but the clone's field list
                let mut q = x.fresh();
                x.set(&mut q, Meta::IngressPort, x.get(&phv, Meta::IngressPort));
                x.set(&mut q, Meta::PacketLength, n);
                let qpayload = x.parse(&mut q, frame);
                x.reset_metadata(&mut q, &phv, x.get(&phv, Meta::CloneFieldList));
                x.set(&mut q, Meta::InstanceType, instance::INGRESS_CLONE);
                x.set(&mut q, Meta::Length, n);
                self.counts.ingress_clones += 1;
                self.send(x, q, session, ctx.ingress_length, qpayload, own.clone(), work);
            }
            x.set(&mut phv, Meta::CloneSession, 0);
        }
        let learn = x.get(&phv, Meta::Learn);
        if learn != 0 {
            x.digest(&phv, learn);
        }
        let fl = x.get(&phv, Meta::Resubmit);
        if fl != 0 {
            self.counts.resubmits += 1;
            return Some(Work::Ingress { own, keep: Some((phv, fl)), instance: instance::RESUBMIT,
                                        ingress_length: ctx.ingress_length });
        }
        let mgid = x.get(&phv, Meta::McastGrp);
        if mgid != 0 {
            x.set(&mut phv, Meta::InstanceType, instance::REPLICATION);
            self.multicast(x, phv, mgid as u32, ctx.ingress_length, payload, own, work);
            return None;
        }
        let espec = x.get(&phv, Meta::EgressSpec);
        if espec == self.config.drop_port {
            self.counts.drop_ingress += 1;
            x.recycle(phv);
            return None;
        }
        x.set(&mut phv, Meta::InstanceType, instance::NORMAL);
        self.admit(x, espec, phv, ctx.ingress_length, payload, own)
    }

    #[allow(clippy::too_many_arguments)]
    fn send<X: Passes>(&mut self, x: &mut X, q: X::Phv, session: (Option<u32>, Option<u32>), ilen: u64, payload: usize,
                       own: Option<Vec<u8>>, work: &mut VecDeque<Work<X::Phv>>) {
        let (port, grp) = session;
        if let Some(g) = grp {
            let r = x.copy(&q);
            self.multicast(x, r, g, ilen, payload, own.clone(), work);
        }
        if let Some(p) = port {
            self.enqueue(x, p as u64, q, ilen, payload, own, work);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn multicast<X: Passes>(&mut self, x: &mut X, phv: X::Phv, grp: u32, ilen: u64, payload: usize, own: Option<Vec<u8>>,
                            work: &mut VecDeque<Work<X::Phv>>) {
        let reps = self.config.mc_groups.get(&grp).cloned().unwrap_or_default();
        if reps.is_empty() {
            self.counts.drop_no_replica += 1;
            x.recycle(phv);
            return;
        }
        for (port, rid) in reps {
            let mut q = x.copy(&phv);
            x.set(&mut q, Meta::EgressRid, rid as u64);
            self.counts.replicas += 1;
            self.enqueue(x, port as u64, q, ilen, payload, own.clone(), work);
        }
        x.recycle(phv);
    }

    #[allow(clippy::too_many_arguments)]
    fn enqueue<X: Passes>(&mut self, x: &mut X, port: u64, phv: X::Phv, ilen: u64, payload: usize, own: Option<Vec<u8>>,
                          work: &mut VecDeque<Work<X::Phv>>) {
        if let Some(w) = self.admit(x, port, phv, ilen, payload, own) {
            work.push_back(w);
        }
    }

    /// The egress pass of a copy the queue admits (its priority below the
    /// number of queues), else None (dropped).
    #[inline]
    fn admit<X: Passes>(&mut self, x: &mut X, port: u64, phv: X::Phv, ilen: u64, payload: usize, own: Option<Vec<u8>>)
                        -> Option<Work<X::Phv>> {
        if x.get(&phv, Meta::Priority) >= self.config.priority_queues {
            self.counts.drop_priority += 1;
            x.recycle(phv);
            return None;
        }
        Some(Work::Egress { port, phv, ingress_length: ilen, payload, own })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in program. Frame: [egress port, ingress action, payload...].
    /// Ingress actions: 1 clone to session 5, 2 multicast group 7,
    /// 3 resubmit (pass = 1, field list 1) unless pass != 0, 4 priority 3,
    /// 5 mark_to_drop, 6 digest. Egress by port: 2 clone to session 6,
    /// 3 recirculate (pass = 2, payload byte + 1) unless pass != 0, 10 drop.
    /// Each pass visits table 0 (ingress) or 1 (egress) with key
    /// [instance_type, egress port or 0, egress_rid, pass].
    #[derive(Clone, Debug, Default)]
    struct Phv {
        meta: HashMap<Meta, u64>,
        pass: u64,
        port: u64,
        act: u64,
        payload_byte: u64,
    }

    #[derive(Default)]
    struct Toy {
        digests: Vec<u64>,
    }

    impl Passes for Toy {
        type Phv = Phv;
        fn fresh(&mut self) -> Phv {
            Phv::default()
        }
        fn parse(&mut self, p: &mut Phv, frame: &[u8]) -> usize {
            p.port = frame[0] as u64;
            p.act = frame[1] as u64;
            p.payload_byte = frame.get(2).copied().unwrap_or(0) as u64;
            2
        }
        fn pipeline(&mut self, p: &mut Phv, pipe: Pipe, _ctx: &Pass, _frame: &[u8], v: &mut Visits) {
            let g = |m| p.meta.get(&m).copied().unwrap_or(0);
            match pipe {
                Pipe::Ingress => {
                    v.push(0, 0, 0, &[g(Meta::InstanceType) as u32, 0, g(Meta::EgressRid) as u32, p.pass as u32]);
                    p.meta.insert(Meta::EgressSpec, p.port);
                    match p.act {
                        1 => {
                            p.meta.insert(Meta::CloneSession, 5 | 0x10000);
                            p.meta.insert(Meta::CloneFieldList, 1);
                        }
                        2 => {
                            p.meta.insert(Meta::McastGrp, 7);
                        }
                        3 if p.pass == 0 => {
                            p.pass = 1;
                            p.meta.insert(Meta::Resubmit, 1);
                        }
                        4 => {
                            p.meta.insert(Meta::Priority, 3);
                        }
                        5 => {
                            p.meta.insert(Meta::EgressSpec, 511);
                        }
                        6 => {
                            p.meta.insert(Meta::Learn, 1);
                        }
                        _ => {}
                    }
                }
                Pipe::Egress => {
                    let port = g(Meta::EgressPort);
                    v.push(1, 0, 0, &[g(Meta::InstanceType) as u32, port as u32, g(Meta::EgressRid) as u32, p.pass as u32]);
                    match port {
                        2 => {
                            p.meta.insert(Meta::CloneSession, 6 | 0x10000);
                            p.meta.insert(Meta::CloneFieldList, 1);
                        }
                        3 if p.pass == 0 => {
                            p.pass = 2;
                            p.payload_byte += 1;
                            p.meta.insert(Meta::Recirculate, 1);
                        }
                        10 => {
                            p.meta.insert(Meta::EgressSpec, 511);
                        }
                        _ => {}
                    }
                }
            }
        }
        fn deparse(&mut self, p: &mut Phv, frame: &[u8], payload: usize, out: &mut Vec<u8>) {
            out.extend_from_slice(&[p.port as u8, p.act as u8, p.payload_byte as u8]);
            out.extend_from_slice(&frame[(payload + 1).min(frame.len())..]);
        }
        fn get(&self, p: &Phv, m: Meta) -> u64 {
            p.meta.get(&m).copied().unwrap_or(0)
        }
        fn set(&mut self, p: &mut Phv, m: Meta, v: u64) {
            p.meta.insert(m, v);
        }
        fn copy(&mut self, p: &Phv) -> Phv {
            p.clone()
        }
        fn reset_metadata(&mut self, p: &mut Phv, from: &Phv, fl: u64) {
            p.meta.clear();
            p.pass = if fl == 1 { from.pass } else { 0 };
        }
        fn digest(&mut self, p: &Phv, _learn: u64) {
            self.digests.push(p.port);
        }
    }

    fn config() -> SwitchConfig {
        let mut c = SwitchConfig::default();
        c.mirroring.insert(5, (Some(9), None));
        c.mirroring.insert(6, (Some(8), None));
        c.mc_groups.insert(7, vec![(6, 200), (4, 100), (5, 100)]);
        c
    }

    /// (table, key) of every visit of packet 0.
    fn run(flow: &mut Flow, frame: &[u8]) -> (Vec<(u16, Vec<u32>)>, Outputs) {
        let mut v = Visits::new();
        let mut out = Outputs::new();
        flow.process(&mut Toy::default(), frame, 0, 0, &mut v, Some(&mut out));
        ((0..v.len()).map(|i| (v.table[i], v.key(i).to_vec())).collect(), out)
    }

    #[test]
    fn ingress_clone_goes_before_the_original_with_its_instance_type() {
        let mut f = Flow::new(config());
        let (v, out) = run(&mut f, &[1, 1, 0]);
        assert_eq!(v, vec![(0, vec![0, 0, 0, 0]), (1, vec![1, 9, 0, 0]), (1, vec![0, 1, 0, 0])]);
        assert_eq!(out.port, vec![9, 1]);
        assert_eq!(f.counts.ingress_clones, 1);
    }

    #[test]
    fn multicast_replicas_in_order_with_their_rid() {
        let mut f = Flow::new(config());
        let (v, out) = run(&mut f, &[1, 2, 0]);
        assert_eq!(v[1..], [(1, vec![5, 6, 200, 0]), (1, vec![5, 4, 100, 0]), (1, vec![5, 5, 100, 0])]);
        assert_eq!(out.port, vec![6, 4, 5]);
        f.config.mc_groups.clear();
        let (_, out) = run(&mut f, &[1, 2, 0]);
        assert!(out.is_empty());
        assert_eq!(f.counts.drop_no_replica, 1);
    }

    #[test]
    fn resubmit_runs_ingress_again_keeping_its_field_list() {
        let mut f = Flow::new(config());
        let (v, out) = run(&mut f, &[1, 3, 0]);
        // the first pass is not forwarded; the second (instance 6, pass kept) goes out as a normal packet
        assert_eq!(v, vec![(0, vec![0, 0, 0, 0]), (0, vec![6, 0, 0, 1]), (1, vec![0, 1, 0, 1])]);
        assert_eq!((out.port.clone(), f.counts.resubmits), (vec![1], 1));
    }

    #[test]
    fn egress_clone_and_recirculation() {
        let mut f = Flow::new(config());
        let (v, out) = run(&mut f, &[2, 0, 0]);
        assert_eq!(v[1..], [(1, vec![0, 2, 0, 0]), (1, vec![2, 8, 0, 0])]);
        assert_eq!(out.port, vec![2, 8]);
        // recirculated: the deparsed bytes (payload byte + 1) come back to ingress with pass 2 kept
        let (v, out) = run(&mut f, &[3, 0, 7, 42]);
        assert_eq!(v, vec![(0, vec![0, 0, 0, 0]), (1, vec![0, 3, 0, 0]), (0, vec![4, 0, 0, 2]), (1, vec![0, 3, 0, 2])]);
        assert_eq!(out.packet(0), &[3, 0, 8, 42]);
        assert_eq!(f.counts.recirculations, 1);
    }

    #[test]
    fn drops_priority_and_digests() {
        let mut f = Flow::new(config());
        assert!(run(&mut f, &[1, 5, 0]).1.is_empty());
        assert!(run(&mut f, &[10, 0, 0]).1.is_empty());
        assert!(run(&mut f, &[1, 4, 0]).1.is_empty());
        assert_eq!((f.counts.drop_ingress, f.counts.drop_egress, f.counts.drop_priority), (1, 1, 1));
        f.config.priority_queues = 8;
        assert_eq!(run(&mut f, &[1, 4, 0]).1.port, vec![1]);
        let mut toy = Toy::default();
        f.process(&mut toy, &[4, 6, 0], 0, 0, &mut Visits::new(), None);
        assert_eq!(toy.digests, vec![4]);
    }

    #[test]
    fn a_copy_loop_is_stopped_after_max_passes() {
        // session 6 sends egress clones back to port 2, which clones again: for ever
        let mut c = config();
        c.mirroring.insert(6, (Some(2), None));
        let mut f = Flow::new(c);
        let (v, _) = run(&mut f, &[2, 0, 0]);
        assert_eq!(v.len() as u32, MAX_PASSES);
        assert_eq!(f.counts.drop_pass_limit, 1);
    }
}

//! Cycle-stepped harnesses of single units, to co-simulate the model with the
//! RTL in `hw/rtl/` (issue 12).
//!
//! Each harness takes a whole stimulus, one row of inputs per cycle, and
//! returns one row of outputs per cycle, calling the model in the same order
//! within a cycle as the simulator does (`sim/mod.rs`, phases 2–8). The RTL
//! testbench applies the same rows to the same-named ports and compares the
//! rows. Generators drive the model closed-loop (a fake ELU answers misses
//! after a random latency, in order) to make stimulus worth replaying:
//! random, and corner cases via their knobs (full queues, reassignments).

use super::pmu::{Config, MissRequest, Pmu, Request, Response, State};
use super::Cycle;
use crate::classify::Match;
use crate::rules::{Key, MAX_FIELDS};
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Keeps the low `bits` bits of a key (word 0 first): the RTL's key port.
pub fn mask_key(key: &Key, bits: u32) -> Key {
    let mut k = *key;
    for (w, x) in k.0.iter_mut().enumerate() {
        let lo = w as u32 * 32;
        if lo >= bits {
            *x = 0;
        } else if bits - lo < 32 {
            *x &= (1u32 << (bits - lo)) - 1;
        }
    }
    k
}

/// Inputs of one PMU in one cycle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PmuIn {
    /// 0 none, 1 associate(`ctl_tbl`), 2 leave(`ctl_tbl` if `ctl_next_v`).
    pub ctl_op: u8,
    pub ctl_tbl: u16,
    pub ctl_next_v: bool,
    /// A request offered to Q_r (table, tag, key); taken iff `req_ready`.
    pub req: Option<(u16, u64, Key)>,
    /// The ELU's reply to an earlier miss (table, tag, key, action).
    pub fill: Option<(u16, u64, Key, Match)>,
    pub rsp_ready: bool,
    pub mq_ready: bool,
}

/// Outputs of one PMU in one cycle (heads of Q_p and Q_m before the pops).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PmuOut {
    pub req_ready: bool,
    pub rsp: Option<Response>,
    pub mq: Option<(u16, u64, Key)>,
    /// State at the end of the cycle: 0 free, 1 associated, 2 transient.
    pub state: u8,
    pub state_tbl: u16,
}

/// A PMU stepped one pipeline cycle at a time.
pub struct PmuStepper {
    pub pmu: Pmu,
    pub key_bits: u32,
    now: Cycle,
    /// Every key offered so far: a request names its key by index here.
    keys: Vec<Key>,
}

impl PmuStepper {
    /// `config.clock_ratio` is taken as 1: the RTL's TAU and II are in
    /// pipeline cycles (convert with [`super::pmu::Timing::from_config`]).
    pub fn new(config: &Config, key_bits: u32) -> PmuStepper {
        let mut c = config.clone();
        c.clock_ratio = 1.0;
        PmuStepper {
            pmu: Pmu::new(0, &c),
            key_bits,
            now: 0,
            keys: Vec::new(),
        }
    }

    /// One cycle. Errors on a fill with no miss outstanding.
    pub fn step(&mut self, i: &PmuIn) -> Result<PmuOut, String> {
        let now = self.now;
        let p = &mut self.pmu;
        match i.ctl_op {
            0 => {}
            1 => {
                if p.is_free() {
                    p.associate(i.ctl_tbl)
                }
            }
            2 => p.leave(i.ctl_next_v.then_some(i.ctl_tbl)),
            x => return Err(format!("cycle {now}: ctl_op {x} (expected 0, 1 or 2)")),
        }
        if let Some((table, tag, key, action)) = i.fill {
            if p.outstanding() == 0 {
                return Err(format!("cycle {now}: fill with no miss outstanding"));
            }
            let miss = MissRequest {
                table,
                tag,
                key: mask_key(&key, self.key_bits),
                pmu: Some(0),
            };
            p.fill(&miss, action);
        }
        let keys = &self.keys;
        let key_of = |_: u16, flow: u32, _: u32| keys[flow as usize];
        p.tick(now, &key_of);
        let mut out = PmuOut {
            rsp: p.peek_response().copied(),
            mq: p.peek_miss().map(|m| (m.table, m.tag, m.key)),
            ..PmuOut::default()
        };
        if i.rsp_ready {
            p.pop_response();
        }
        if i.mq_ready {
            p.pop_miss();
        }
        out.req_ready = p.can_accept(now);
        if let Some((table, tag, key)) = i.req {
            if out.req_ready {
                self.keys.push(mask_key(&key, self.key_bits));
                let keys = &self.keys;
                let req = Request {
                    table,
                    tag,
                    flow: keys.len() as u32 - 1,
                    stamp: 0,
                    at: now + 1,
                };
                p.accept(req, 0, &|_, flow, _| keys[flow as usize]);
            }
        }
        p.try_finish_drain();
        (out.state, out.state_tbl) = match p.state() {
            State::Free => (0, 0),
            State::Associated { table } => (1, table),
            State::Transient { table, .. } => (2, table),
        };
        self.now += 1;
        Ok(out)
    }
}

/// Runs the model over a whole stimulus.
pub fn run_pmu(config: &Config, key_bits: u32, stim: &[PmuIn]) -> Result<Vec<PmuOut>, String> {
    let mut s = PmuStepper::new(config, key_bits);
    stim.iter().map(|i| s.step(i)).collect()
}

/// Knobs of the closed-loop PMU stimulus generator.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PmuGen {
    pub cycles: usize,
    pub seed: u64,
    pub key_bits: u32,
    /// Distinct keys requested (vs block_size: the hit rate).
    pub keys: u32,
    pub tables: u16,
    pub tag_bits: u32,
    /// Probability of a new request in a cycle with none pending.
    pub p_req: f64,
    /// Probabilities that the VMU / the ELU bus are ready; each is re-drawn
    /// with probability 1/`burst` per cycle, so stalls come in runs.
    pub p_rsp_ready: f64,
    pub p_mq_ready: f64,
    pub burst: u32,
    /// Fake ELU: reply latency range (cycles, ≥ 1) and misses it holds.
    pub elu_lat: (u64, u64),
    pub elu_cap: usize,
    /// Probability of an associate / leave / re-leave in a cycle.
    pub p_ctl: f64,
}

impl Default for PmuGen {
    fn default() -> PmuGen {
        PmuGen {
            cycles: 2000,
            seed: 1,
            key_bits: 104,
            keys: 96,
            tables: 4,
            tag_bits: 16,
            p_req: 0.7,
            p_rsp_ready: 0.9,
            p_mq_ready: 0.8,
            burst: 8,
            elu_lat: (1, 40),
            elu_cap: 16,
            p_ctl: 0.002,
        }
    }
}

/// The fake ELU's answer for a key (a pure function, so any order of
/// replies gives the same actions).
pub fn elu_action(key: &Key) -> Match {
    let mut h: u32 = 0x811c_9dc5;
    for &w in key.0.iter() {
        h = (h ^ w).wrapping_mul(0x0100_0193);
    }
    (h % 8 != 0).then_some(h % 100_000)
}

fn random_key(rng: &mut impl Rng, bits: u32) -> Key {
    let mut k = Key([0; MAX_FIELDS]);
    for w in k.0.iter_mut() {
        *w = rng.gen();
    }
    mask_key(&k, bits)
}

/// Drives the model closed-loop; returns the stimulus and the model's
/// outputs (which [`run_pmu`] reproduces from the stimulus alone).
pub fn gen_pmu(config: &Config, g: &PmuGen) -> (Vec<PmuIn>, Vec<PmuOut>) {
    gen_pmu_stream(config, g, &[])
}

/// As [`gen_pmu`], but requests take their keys in the order of `stream`
/// (a recorded key sequence, e.g. a ClassBench trace; it wraps around) and
/// the fake ELU answers each key with its action there (e.g. the rule the
/// classifier matched). An empty stream draws keys from a random pool.
pub fn gen_pmu_stream(
    config: &Config,
    g: &PmuGen,
    stream: &[(Key, Match)],
) -> (Vec<PmuIn>, Vec<PmuOut>) {
    let mut rng = rand_pcg::Pcg64::seed_from_u64(g.seed);
    let stream: Vec<(Key, Match)> = stream
        .iter()
        .map(|(k, a)| (mask_key(k, g.key_bits), *a))
        .collect();
    let answers: std::collections::HashMap<Key, Match> = stream.iter().copied().collect();
    let mut next_key = 0usize;
    let pool: Vec<Key> = (0..g.keys.max(1))
        .map(|_| random_key(&mut rng, g.key_bits))
        .collect();
    let answer = |k: &Key| answers.get(k).copied().unwrap_or_else(|| elu_action(k));
    let mut s = PmuStepper::new(config, g.key_bits);
    let (mut stim, mut outs) = (Vec::with_capacity(g.cycles), Vec::with_capacity(g.cycles));
    let mut elu: VecDeque<(Cycle, MissRequest)> = VecDeque::new();
    let mut pending: Option<(u16, u64, Key)> = None;
    let mut tag: u64 = 0;
    let tag_mask = if g.tag_bits >= 64 {
        u64::MAX
    } else {
        (1 << g.tag_bits) - 1
    };
    let (mut rsp_ready, mut mq_ready) = (true, true);
    let tables = g.tables.max(1);
    for now in 0..g.cycles as Cycle {
        let mut i = PmuIn::default();
        if rng.gen::<f64>() < g.p_ctl {
            let t = rng.gen_range(0..tables);
            match s.pmu.state() {
                State::Free => {
                    i.ctl_op = if rng.gen() { 1 } else { 2 };
                    i.ctl_tbl = t;
                    i.ctl_next_v = true;
                }
                State::Associated { .. } | State::Transient { .. } => {
                    i.ctl_op = 2;
                    i.ctl_tbl = t;
                    i.ctl_next_v = rng.gen::<f64>() < 0.8;
                }
            }
            // The VMU stops routing to a PMU that leaves: drop the offer.
            pending = None;
        }
        // The state this cycle's requests see (ctl applies first).
        let assoc = match (s.pmu.state(), i.ctl_op) {
            (State::Free, 1) | (State::Free, 2) if i.ctl_next_v => Some(i.ctl_tbl),
            (State::Associated { table }, 0) => Some(table),
            _ => None,
        };
        if let Some(&(due, m)) = elu.front() {
            if due <= now {
                elu.pop_front();
                i.fill = Some((m.table, m.tag, m.key, answer(&m.key)));
            }
        }
        if rng.gen_range(0..g.burst.max(1)) == 0 {
            rsp_ready = rng.gen::<f64>() < g.p_rsp_ready;
        }
        if rng.gen_range(0..g.burst.max(1)) == 0 {
            mq_ready = rng.gen::<f64>() < g.p_mq_ready;
        }
        i.rsp_ready = rsp_ready;
        i.mq_ready = mq_ready && elu.len() < g.elu_cap.max(1);
        if now == 0 && i.ctl_op == 0 {
            // Start associated, as a PMU the optimizer has placed.
            (i.ctl_op, i.ctl_tbl) = (1, 0);
        }
        let assoc = if now == 0 { Some(i.ctl_tbl) } else { assoc };
        if let Some(table) = assoc {
            if pending.is_none() && rng.gen::<f64>() < g.p_req {
                let key = if stream.is_empty() {
                    pool[rng.gen_range(0..pool.len())]
                } else {
                    next_key += 1;
                    stream[(next_key - 1) % stream.len()].0
                };
                pending = Some((table, tag, key));
                tag = (tag + 1) & tag_mask;
            }
            i.req = pending;
        }
        let o = s.step(&i).expect("the generator keeps fills consistent");
        if i.req.is_some() && o.req_ready {
            pending = None;
        }
        if i.mq_ready {
            if let Some((table, tag, key)) = o.mq {
                let lat = rng.gen_range(g.elu_lat.0.max(1)..=g.elu_lat.1.max(g.elu_lat.0.max(1)));
                let due = (now + lat).max(elu.back().map_or(0, |e| e.0));
                elu.push_back((
                    due,
                    MissRequest {
                        table,
                        tag,
                        key,
                        pmu: Some(0),
                    },
                ));
            }
        }
        stim.push(i);
        outs.push(o);
    }
    (stim, outs)
}

/// Inputs of the ELU's ORB in one cycle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OrbIn {
    /// The miss-queue head offered (table, tag, key); taken iff `in_ready`.
    pub miss: Option<(u16, u64, Key)>,
    /// The lookup module finished the lookup of ORB entry `slot`.
    pub done: Option<(u32, Match)>,
}

/// Outputs of the ORB in one cycle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OrbOut {
    pub in_ready: bool,
    /// The entry handed to the lookup module (issue pointer).
    pub issue: Option<u32>,
    /// The reply leaving in order (commit pointer): table, tag, key, action.
    pub commit: Option<(u16, u64, Key, Match)>,
}

/// One lookup = one memory read whose answer is [`elu_action`]: the lookup
/// module's timing comes from the stimulus (`OrbIn::done`), not from HBM.
struct OneRead;
impl crate::classify::Classifier for OneRead {
    fn classify(&self, key: &Key) -> Match {
        elu_action(key)
    }
}
impl crate::classify::MemoryWalk for OneRead {
    fn walk(&self, key: &Key, acc: &mut Vec<crate::classify::MemAccess>) -> Match {
        acc.push(crate::classify::MemAccess {
            bank: 0,
            addr: 0,
            bytes: 32,
        });
        elu_action(key)
    }
    fn memory_bytes(&self) -> u64 {
        0
    }
}

/// The model's ELU reduced to its ORB, stepped one cycle at a time, in the
/// simulator's order: lookup completions, commit, register, issue.
pub struct OrbStepper {
    elu: super::elu::Elu,
    hbm: super::hbm::Hbm,
    walkers: Vec<Box<dyn crate::classify::MemoryWalk + Send>>,
    entries: usize,
    key_bits: u32,
    now: Cycle,
}

impl OrbStepper {
    pub fn new(entries: u32, lookup_slots: u32, key_bits: u32) -> OrbStepper {
        let config = super::elu::Config {
            orb_entries: entries.max(1),
            miss_queue: 1,
            lookup_slots: lookup_slots.max(1),
            latency_cycles: 0,
            ..super::elu::Config::default()
        };
        let tables = 1 << 16;
        OrbStepper {
            elu: super::elu::Elu::new(config, tables, 250.0),
            hbm: super::hbm::Hbm::new(super::hbm::Timing::default()),
            walkers: (0..tables)
                .map(|_| Box::new(OneRead) as Box<dyn crate::classify::MemoryWalk + Send>)
                .collect(),
            entries: entries.max(1) as usize,
            key_bits,
            now: 0,
        }
    }

    pub fn step(&mut self, i: &OrbIn) -> Result<OrbOut, String> {
        let now = self.now;
        let mut out = OrbOut::default();
        if let Some((slot, _)) = i.done {
            if self.elu.slot_state(slot as usize) != Some(false) {
                return Err(format!(
                    "cycle {now}: lookup done for ORB entry {slot}, which is not being looked up"
                ));
            }
            self.elu
                .access_done(now, slot, &mut self.hbm, &mut |_, _| {});
        }
        out.commit = self.elu.commit().map(|(m, a)| (m.table, m.tag, m.key, a));
        out.in_ready = self.elu.orb_len() < self.entries;
        if let Some((table, tag, key)) = i.miss {
            if out.in_ready {
                self.elu.enqueue(
                    now,
                    MissRequest {
                        table,
                        tag,
                        key: mask_key(&key, self.key_bits),
                        pmu: Some(0),
                    },
                );
            }
        }
        let mut issued = None;
        self.elu
            .tick(now, &mut self.hbm, &self.walkers, &mut |_, s| {
                issued = Some(s)
            });
        out.issue = issued;
        self.now += 1;
        Ok(out)
    }
}

pub fn run_orb(
    entries: u32,
    lookup_slots: u32,
    key_bits: u32,
    stim: &[OrbIn],
) -> Result<Vec<OrbOut>, String> {
    let mut s = OrbStepper::new(entries, lookup_slots, key_bits);
    stim.iter().map(|i| s.step(i)).collect()
}

/// Knobs of the closed-loop ORB stimulus generator.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OrbGen {
    pub cycles: usize,
    pub seed: u64,
    pub key_bits: u32,
    pub tag_bits: u32,
    /// Probability of a new miss in a cycle with none pending.
    pub p_miss: f64,
    /// Lookup latency range; at most one lookup finishes per cycle.
    pub lat: (u64, u64),
}

impl Default for OrbGen {
    fn default() -> OrbGen {
        OrbGen {
            cycles: 2000,
            seed: 1,
            key_bits: 104,
            tag_bits: 16,
            p_miss: 0.5,
            lat: (1, 30),
        }
    }
}

/// Drives the ORB closed-loop with a lookup module of random latency.
pub fn gen_orb(entries: u32, lookup_slots: u32, g: &OrbGen) -> (Vec<OrbIn>, Vec<OrbOut>) {
    let mut rng = rand_pcg::Pcg64::seed_from_u64(g.seed);
    let mut s = OrbStepper::new(entries, lookup_slots, g.key_bits);
    let (mut stim, mut outs) = (Vec::new(), Vec::new());
    let mut pending: Option<(u16, u64, Key)> = None;
    // Registered misses not yet issued, in order (the issue pointer's view).
    let mut registered: VecDeque<Key> = VecDeque::new();
    let mut done_at: std::collections::BTreeMap<Cycle, (u32, Match)> = Default::default();
    let mut tag = 0u64;
    let tag_mask = if g.tag_bits >= 64 {
        u64::MAX
    } else {
        (1 << g.tag_bits) - 1
    };
    for now in 0..g.cycles as Cycle {
        let mut i = OrbIn::default();
        if pending.is_none() && rng.gen::<f64>() < g.p_miss {
            pending = Some((rng.gen_range(0..4), tag, random_key(&mut rng, g.key_bits)));
            tag = (tag + 1) & tag_mask;
        }
        i.miss = pending;
        i.done = done_at.remove(&now);
        let o = s
            .step(&i)
            .expect("the generator keeps completions consistent");
        if o.in_ready {
            if let Some((_, _, k)) = pending.take() {
                registered.push_back(k);
            }
        }
        if let Some(slot) = o.issue {
            let key = registered
                .pop_front()
                .expect("issued an unregistered entry");
            let mut due = now + rng.gen_range(g.lat.0.max(1)..=g.lat.1.max(g.lat.0.max(1)));
            while done_at.contains_key(&due) {
                due += 1;
            }
            done_at.insert(due, (slot, elu_action(&key)));
        }
        stim.push(i);
        outs.push(o);
    }
    (stim, outs)
}

/// Responses a VMU can take in one cycle (one per port of the response
/// network; the last port carries the ELU's direct replies).
pub const VMU_PORTS: usize = 2;

/// Inputs of one VMU in one cycle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmuIn {
    /// A PHV offered to the request producer: its key's lookup3 hash (the
    /// simulator hashes each flow's key once). Taken iff `phv_ready`.
    pub phv: Option<u32>,
    /// The PMU (interconnect) can take a request this cycle.
    pub req_ready: bool,
    /// Responses: (tag, early miss?, action) — a miss parks, else resolves.
    pub rsp: [Option<(u64, bool, Match)>; VMU_PORTS],
    /// The next stage can take a released PHV.
    pub rel_ready: bool,
    /// The CPU writes lookup-table entry (index, pmu) at the end of the cycle.
    pub lut: Option<(u32, u16)>,
}

/// Outputs of one VMU in one cycle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmuOut {
    pub phv_ready: bool,
    /// A request sent to a PMU (pmu, tag).
    pub req: Option<(u16, u64)>,
    /// A key sent straight to the ELU (its entry names no PMU): its tag.
    pub direct: Option<u64>,
    /// The PHV released in order: tag, action, answered after a miss.
    pub rel: Option<(u64, Match, bool)>,
}

/// One VMU stepped a cycle at a time, in the simulator's order: responses,
/// release, request, then the CPU's table write.
pub struct VmuStepper {
    pub vmu: super::vmu::Vmu,
    issued: u64,
    released: u64,
    answered: std::collections::HashSet<u64>,
    parked: std::collections::HashSet<u64>,
    now: Cycle,
}

impl VmuStepper {
    pub fn new(lookup_bits: u32, phv_fifo: u32) -> VmuStepper {
        VmuStepper {
            // The VMU alone: no response port register (the cluster adds it).
            vmu: {
                let mut v = super::vmu::Vmu::new(0, 5, lookup_bits, 1, phv_fifo, 1);
                v.rsp_delay = 0;
                v
            },
            issued: 0,
            released: 0,
            answered: Default::default(),
            parked: Default::default(),
            now: 0,
        }
    }

    pub fn step(&mut self, i: &VmuIn) -> Result<VmuOut, String> {
        let now = self.now;
        let v = &mut self.vmu;
        let mut out = VmuOut::default();
        for &(tag, miss, action) in i.rsp.iter().flatten() {
            if tag < self.released || tag >= self.issued || self.answered.contains(&tag) {
                return Err(format!(
                    "cycle {now}: response for tag {tag}, which is not waiting"
                ));
            }
            if miss {
                if !self.parked.insert(tag) {
                    return Err(format!(
                        "cycle {now}: second miss notification for tag {tag}"
                    ));
                }
                v.park(tag);
            } else {
                self.answered.insert(tag);
                v.resolve(tag, action, now);
            }
        }
        if i.rel_ready && v.head_ready_at(now) {
            let s = v.release(now);
            self.answered.remove(&s.phv);
            self.parked.remove(&s.phv);
            out.rel = Some((s.phv, s.action.unwrap(), s.via == super::vmu::Via::Miss));
            self.released += 1;
        }
        if let Some(h) = i.phv {
            if v.has_room(now) {
                let p = v.route_index(h as usize & (v.lut.len() - 1));
                if p == super::vmu::INVALID {
                    let tag = v.issue(self.issued, 0, now, now);
                    v.park(tag);
                    self.parked.insert(tag);
                    out.direct = Some(tag);
                } else if i.req_ready {
                    let tag = v.issue(self.issued, 0, now, now);
                    out.req = Some((p, tag));
                }
                if out.direct.is_some() || out.req.is_some() {
                    out.phv_ready = true;
                    self.issued += 1;
                }
            }
        }
        if let Some((idx, pmu)) = i.lut {
            if idx as usize >= v.lut.len() {
                return Err(format!(
                    "cycle {now}: lookup-table index {idx} out of range"
                ));
            }
            v.lut.set(idx as usize, pmu);
        }
        self.now += 1;
        Ok(out)
    }
}

pub fn run_vmu(lookup_bits: u32, phv_fifo: u32, stim: &[VmuIn]) -> Result<Vec<VmuOut>, String> {
    let mut s = VmuStepper::new(lookup_bits, phv_fifo);
    stim.iter().map(|i| s.step(i)).collect()
}

/// Knobs of the closed-loop VMU stimulus generator (fake PMUs and ELU).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VmuGen {
    pub cycles: usize,
    pub seed: u64,
    pub pmus: u16,
    /// Probability that a table entry is invalid (keys go to the ELU).
    pub p_invalid: f64,
    pub p_phv: f64,
    pub p_req_ready: f64,
    pub p_rel_ready: f64,
    pub p_hit: f64,
    /// Probability of a CPU table write in a cycle (after the initial fill).
    pub p_lut: f64,
    pub hit_lat: (u64, u64),
    pub fill_lat: (u64, u64),
}

impl Default for VmuGen {
    fn default() -> VmuGen {
        VmuGen {
            cycles: 2000,
            seed: 1,
            pmus: 4,
            p_invalid: 0.1,
            p_phv: 0.7,
            p_req_ready: 0.8,
            p_rel_ready: 0.9,
            p_hit: 0.7,
            p_lut: 0.02,
            hit_lat: (2, 6),
            fill_lat: (5, 40),
        }
    }
}

/// Drives the VMU closed-loop; `tag_bits` bounds the tags in flight.
pub fn gen_vmu(lookup_bits: u32, phv_fifo: u32, g: &VmuGen) -> (Vec<VmuIn>, Vec<VmuOut>) {
    use std::collections::BTreeMap;
    let mut rng = rand_pcg::Pcg64::seed_from_u64(g.seed);
    let mut s = VmuStepper::new(lookup_bits, phv_fifo);
    let entries = 1u32 << s.vmu.lut.bits;
    let (mut stim, mut outs) = (Vec::new(), Vec::new());
    let mut ports: [BTreeMap<Cycle, (u64, bool, Match)>; VMU_PORTS] = Default::default();
    let put = |ports: &mut [BTreeMap<Cycle, (u64, bool, Match)>; VMU_PORTS],
               port: usize,
               mut due: Cycle,
               e| {
        while ports[port].contains_key(&due) {
            due += 1;
        }
        ports[port].insert(due, e);
        due
    };
    let lat =
        |rng: &mut rand_pcg::Pcg64, r: (u64, u64)| rng.gen_range(r.0.max(1)..=r.1.max(r.0.max(1)));
    let mut pending: Option<u32> = None;
    let (mut req_ready, mut rel_ready) = (true, true);
    for now in 0..g.cycles as Cycle {
        let mut i = VmuIn::default();
        // The CPU fills the table first, then rewrites entries now and then.
        if (now as u32) < entries || rng.gen::<f64>() < g.p_lut {
            let idx = if (now as u32) < entries {
                now as u32
            } else {
                rng.gen_range(0..entries)
            };
            let pmu = if rng.gen::<f64>() < g.p_invalid {
                super::vmu::INVALID
            } else {
                rng.gen_range(0..g.pmus.max(1))
            };
            i.lut = Some((idx, pmu));
        }
        if pending.is_none() && rng.gen::<f64>() < g.p_phv {
            pending = Some(rng.gen());
        }
        i.phv = pending;
        if rng.gen_range(0..8) == 0 {
            req_ready = rng.gen::<f64>() < g.p_req_ready;
        }
        if rng.gen_range(0..8) == 0 {
            rel_ready = rng.gen::<f64>() < g.p_rel_ready;
        }
        i.req_ready = req_ready;
        i.rel_ready = rel_ready;
        for (p, q) in ports.iter_mut().enumerate() {
            if let Some((&due, _)) = q.iter().next() {
                if due <= now {
                    i.rsp[p] = q.remove(&due);
                }
            }
        }
        let o = s
            .step(&i)
            .expect("the generator keeps responses consistent");
        if o.phv_ready {
            pending = None;
        }
        let act = |tag: u64| (tag % 5 != 0).then_some(tag as u32 * 7);
        if let Some((_pmu, tag)) = o.req {
            // Every PMU's response comes back on port 0: the last port is the
            // ELU's direct replies, and a VMU has one response port besides it.
            let port = 0;
            if rng.gen::<f64>() < g.p_hit {
                put(
                    &mut ports,
                    port,
                    now + lat(&mut rng, g.hit_lat),
                    (tag, false, act(tag)),
                );
            } else {
                let m = put(
                    &mut ports,
                    port,
                    now + lat(&mut rng, g.hit_lat),
                    (tag, true, None),
                );
                let f = (now + lat(&mut rng, g.fill_lat)).max(m + 1);
                put(&mut ports, port, f, (tag, false, act(tag)));
            }
        }
        if let Some(tag) = o.direct {
            put(
                &mut ports,
                VMU_PORTS - 1,
                now + lat(&mut rng, g.fill_lat),
                (tag, false, act(tag)),
            );
        }
        stim.push(i);
        outs.push(o);
    }
    (stim, outs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config {
            count: 1,
            block_size: 8,
            latency_cycles: 3,
            ii_cycles: 1,
            q_r: 4,
            q_p: 4,
            q_m: 4,
            clock_ratio: 1.0,
        }
    }

    #[test]
    fn replaying_a_generated_stimulus_reproduces_its_outputs() {
        let g = PmuGen {
            cycles: 3000,
            keys: 12,
            p_ctl: 0.01,
            ..PmuGen::default()
        };
        let (stim, outs) = gen_pmu(&cfg(), &g);
        assert_eq!(run_pmu(&cfg(), g.key_bits, &stim).unwrap(), outs);
        // The stream exercises what the co-simulation claims to check.
        let kinds =
            |k: fn(&Response) -> bool| outs.iter().filter(|o| o.rsp.is_some_and(|r| k(&r))).count();
        assert!(kinds(|r| matches!(r, Response::Hit { .. })) > 100);
        assert!(kinds(|r| matches!(r, Response::Miss { .. })) > 100);
        assert!(kinds(|r| matches!(r, Response::Fill { .. })) > 100);
        assert!(outs.iter().any(|o| !o.req_ready), "Q_r never filled");
        assert!(outs.iter().any(|o| o.state == 2), "never transient");
        assert!(
            outs.windows(2).any(|w| w[0].state == 2 && w[1].state == 1),
            "never re-associated"
        );
    }

    #[test]
    fn a_fill_without_an_outstanding_miss_is_an_error() {
        let i = PmuIn {
            fill: Some((0, 0, Key::default(), None)),
            ..PmuIn::default()
        };
        assert!(run_pmu(&cfg(), 104, &[i]).is_err());
    }

    #[test]
    fn orb_replies_in_order_after_out_of_order_lookups() {
        let g = OrbGen {
            cycles: 3000,
            ..OrbGen::default()
        };
        let (stim, outs) = gen_orb(8, 4, &g);
        assert_eq!(run_orb(8, 4, g.key_bits, &stim).unwrap(), outs);
        let offered: Vec<u64> = stim
            .iter()
            .zip(&outs)
            .filter_map(|(i, o)| i.miss.filter(|_| o.in_ready).map(|m| m.1))
            .collect();
        let committed: Vec<u64> = outs.iter().filter_map(|o| o.commit.map(|c| c.1)).collect();
        assert!(committed.len() > 500);
        assert_eq!(
            committed[..],
            offered[..committed.len()],
            "replies leave in arrival order"
        );
        // Completions came out of order, and the ORB filled up.
        let slots: Vec<u32> = stim.iter().filter_map(|i| i.done.map(|d| d.0)).collect();
        let issued: Vec<u32> = outs.iter().filter_map(|o| o.issue).collect();
        assert_ne!(slots[..], issued[..slots.len()]);
        assert!(outs.iter().any(|o| !o.in_ready));
    }

    #[test]
    fn vmu_releases_in_order_and_replays() {
        let g = VmuGen {
            cycles: 3000,
            ..VmuGen::default()
        };
        let (stim, outs) = gen_vmu(5, 8, &g);
        assert_eq!(run_vmu(5, 8, &stim).unwrap(), outs);
        let rel: Vec<u64> = outs.iter().filter_map(|o| o.rel.map(|r| r.0)).collect();
        assert!(rel.len() > 500);
        assert!(
            rel.iter().enumerate().all(|(i, &t)| t == i as u64),
            "in order"
        );
        assert!(outs.iter().any(|o| o.direct.is_some()));
        assert!(
            outs.iter().any(|o| o.rel.is_some_and(|r| r.2)),
            "a parked PHV released"
        );
        assert!(
            stim.iter().any(|i| i.phv.is_some() && i.req_ready)
                && outs.iter().any(|o| !o.phv_ready)
        );
    }

    #[test]
    fn mask_key_keeps_the_low_bits() {
        let k = Key([u32::MAX; MAX_FIELDS]);
        let m = mask_key(&k, 104);
        assert_eq!(&m.0[..5], &[u32::MAX, u32::MAX, u32::MAX, 0xff, 0]);
    }
}

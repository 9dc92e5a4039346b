//! The cycle-accurate simulator of Synapse (paper §4.5: "a discrete-time
//! simulator ... accounts for module latencies and initiation intervals").
//!
//! Build a [`Simulator`] from a [`Config`], then alternate
//! [`Simulator::run_until`] with reads of the per-window counters and
//! [`Simulator::assign`] calls, as the runtime optimizer does.
//!
//! Each busy cycle runs these phases, in order:
//! 1. memory completions due now (the ELU issues the next dependent read or
//!    marks the lookup valid); packet arrivals due now enter their entry
//!    table's input FIFO (dropped, and counted, when it is full);
//! 2. ELU commit: the oldest valid ORB entry replies (fills its PMU);
//! 3. every PMU ticks (retires CAM results into Q_p / Q_m, issues from Q_r);
//! 4. response network: each PMU hands the head of its Q_p to its VMU;
//! 5. PMU → ELU shared bus: one miss per cycle, round robin;
//! 6. ELU: registers a miss in the ORB, starts a lookup;
//! 7. per table (round robin for the interconnect): the action unit releases
//!    the oldest answered PHV to the next table or the exit, then the request
//!    producer sends the head of the input FIFO to its PMU;
//! 8. draining (transient) PMUs that are done become free or join their next
//!    table.
//!
//! When no queue holds work the clock jumps to the next memory completion or
//! arrival. Within a stepped cycle a PMU is ticked only from its wake cycle
//! on (`pmu_wake`: its cached [`Pmu::next_event`], reset whenever the
//! simulator hands it a request, a fill or takes a miss); earlier ticks would
//! change nothing. Results are bit-identical to ticking every PMU
//! (`cargo run --release -p synapse-core --example simgolden`).

pub mod config;
pub mod engine;
pub mod source;
pub mod stats;

pub use config::Config;

use crate::classify::{linear::Linear, Classifier, Match, MemoryWalk};
use crate::hw::elu::{Algo, Elu};
use crate::hw::hbm::Hbm;
use crate::hw::interconnect::{Network, SharedBus};
use crate::hw::pmu::{MissRequest, Pmu, Request, Response, State};
use crate::hw::vmu::{Vmu, INVALID};
use crate::hw::Cycle;
use crate::pipeline::{Cfg, Next};
use crate::rules::{Key, RuleSet};
use engine::Engine;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use source::{Arrival, Source};
use stats::{Counters, EdgeRow, LogHist, WindowRow};
use std::collections::VecDeque;

/// Why a simulator cannot be built or an operation is refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct SimError(pub String);

fn err<T>(m: impl Into<String>) -> Result<T, SimError> {
    Err(SimError(m.into()))
}

#[derive(Clone, Copy, Debug)]
struct Phv {
    id: u64,
    flow: u32,
    arrived: Cycle,
}

enum Ev {
    /// An HBM read of the ORB entry completed.
    MemDone(u32),
}

struct Table {
    name: String,
    vmu: Vmu,
    input: VecDeque<Phv>,
    keys: Vec<Key>,
    /// Per flow, the VMU lookup-table index of its key (hashed once).
    lut_index: Vec<u32>,
    oracle: Vec<Match>,
    /// PMUs on the VMU's ring.
    members: Vec<u16>,
    /// Routing decision of a head that could not move (next stage full).
    pending: Option<Next>,
    win: Counters,
    total: Counters,
    /// Per window: PHVs to table j (index j) or exit (last index).
    edges: Vec<u64>,
    hbm_seen: u64,
    reordered_seen: u64,
}

/// The simulated system.
pub struct Simulator {
    pub config: Config,
    cycle_ps: f64,
    now: Cycle,
    tables: Vec<Table>,
    walkers: Vec<Box<dyn MemoryWalk + Send>>,
    pmus: Vec<Pmu>,
    /// Per PMU, the earliest cycle at which its tick can change something
    /// ([`Pmu::next_event`]); `0` after any change from outside (request,
    /// ELU fill, miss taken, state change). A PMU is ticked only from this
    /// cycle on: every tick before it would be a no-op.
    pmu_wake: Vec<Cycle>,
    /// At most the least of `pmu_wake`: before it, phase 3 and the wake-up
    /// scan skip the PMUs altogether.
    pmu_min_wake: Cycle,
    net: Network,
    bus: SharedBus,
    bus_rr: usize,
    /// Keys of tables without PMUs, sent by the VMU straight to the ELU.
    direct: VecDeque<MissRequest>,
    elu: Elu,
    hbm: Hbm,
    engine: Engine<Ev>,
    cfg: Cfg,
    source: Source,
    next_arrival: Option<(Cycle, Arrival)>,
    rng: Pcg64,
    stage_fifo: usize,
    vmu_latency: Cycle,
    window: Cycle,
    window_end: Cycle,
    rows: Vec<WindowRow>,
    edge_rows: Vec<EdgeRow>,
    // Invariant ledger.
    created: u64,
    dropped: u64,
    exited_bits: Vec<u64>,
    duplicates: u64,
    wrong_action: u64,
    keys_done: u64,
    /// Cycles stepped one by one (the rest were skipped as idle).
    pub busy_cycles: u64,
    /// Some PMU may be transient.
    draining: bool,
    /// Phase 7 of this cycle moved a PHV into a table's input FIFO.
    fed: bool,
}

/// Builds the ELU's structure for a rule set through the classifier
/// registry (the multibit trie, or the linear scan).
fn build_walker(
    algo: Algo,
    set: &RuleSet,
    table: &str,
    build: &crate::classify::BuildConfig,
) -> Result<Box<dyn MemoryWalk + Send>, SimError> {
    let name = match algo {
        Algo::Trie => "trie",
        Algo::Linear => "linear",
        Algo::Dtree => "dtree",
        Algo::Ptree => "ptree",
    };
    let s = crate::classify::build_structure(name, set, build)
        .map_err(|e| match e {
            // One line that says what to do in a scenario (the classify
            // command's advice names its own build parameters).
            crate::classify::BuildError::OverBudget { what, bytes, budget } => SimError(format!(
                "config: table {table:?}: the ELU's {what} needs more than its memory budget of \
                 {budget} bytes (stopped at {bytes}) for these {} rules; use the decision tree: \
                 --set elu.algo=dtree",
                set.rules.len()
            )),
            e => SimError(format!(
                "config: table {table:?}: building the ELU's {name}: {e}"
            )),
        })?;
    Ok(s)
}

impl Simulator {
    /// Builds a simulator from a JSON configuration (see [`Config`]).
    pub fn from_json(json: &str) -> Result<Simulator, SimError> {
        let c: Config = serde_json::from_str(json).map_err(|e| SimError(format!("config: {e}")))?;
        Simulator::new(c)
    }

    /// Builds the rule sets, the traffic and the hardware of `config`.
    pub fn new(config: Config) -> Result<Simulator, SimError> {
        let mut sets = Vec::new();
        for t in &config.tables {
            let set = match &t.rules {
                config::Rules::Path { path } => {
                    let text = std::fs::read_to_string(path)
                        .map_err(|e| SimError(format!("{path}: {e}")))?;
                    crate::rules::classbench::parse_rules(&text, path)
                        .map_err(|e| SimError(e.to_string()))?
                }
                config::Rules::Generate { generate } => {
                    let params = crate::workload::seed::Params::builtin(&generate.kind).ok_or_else(|| {
                        SimError(format!("config: table {:?}: unknown rule type {:?} (expected acl, fw or ipc)", t.name, generate.kind))
                    })?;
                    crate::workload::rulegen::generate(
                        &params,
                        generate.count as usize,
                        generate.seed,
                    )
                }
            };
            sets.push(set);
        }
        let dur_ps = (config.duration_ns * 1000.0) as u64;
        let (src, flow_keys): (Source, Vec<Vec<Key>>) = match &config.traffic {
            config::Traffic::Flows {
                dist,
                flows,
                mean_pkt_bytes,
                flow_duration_ns,
                profile,
                max_bytes,
            } => {
                use crate::workload::{flowsize::FlowSizeDist, profile::Profile, traffic};
                let terr = |e: String| SimError(format!("config: traffic: {e}"));
                let mut d = FlowSizeDist::from_spec(dist).map_err(|e| terr(e.to_string()))?;
                if *max_bytes > 0.0 {
                    d = d.truncated(*max_bytes).map_err(|e| terr(e.to_string()))?;
                }
                let prof = Profile::builtin(profile).map_err(|e| terr(e.to_string()))?;
                let tc = traffic::TrafficConfig {
                    dist: d,
                    flows: *flows,
                    duration_ps: dur_ps.max(1),
                    flow_duration_ps: ((*flow_duration_ns * 1000.0) as u64).max(1),
                    mean_pkt_bytes: *mean_pkt_bytes,
                    profile: Some(prof),
                    seed: config.seed,
                };
                let src = traffic::Traffic::new(&tc).map_err(|e| terr(e.to_string()))?;
                let src = src.map(|a| Arrival {
                    t_ps: a.t_ps,
                    flow: a.flow,
                });
                let keys = sets
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        source::keys_for(s, *flows as usize, config.seed ^ (0x1000 + i as u64))
                    })
                    .collect();
                (Box::new(src), keys)
            }
            config::Traffic::Trace { path, rate_mpps } => {
                let text =
                    std::fs::read_to_string(path).map_err(|e| SimError(format!("{path}: {e}")))?;
                let trace = crate::rules::classbench::parse_trace(&text, path)
                    .map_err(|e| SimError(e.to_string()))?;
                let mut ids = std::collections::HashMap::new();
                let mut keys = Vec::new();
                let flows: Vec<u32> = trace
                    .iter()
                    .map(|e| {
                        *ids.entry(e.key).or_insert_with(|| {
                            keys.push(e.key);
                            keys.len() as u32 - 1
                        })
                    })
                    .collect();
                (
                    Box::new(source::Replay::new(flows, *rate_mpps)),
                    vec![keys; sets.len()],
                )
            }
        };
        Simulator::build(config, sets, flow_keys, src)
    }

    /// Builds from explicit rule sets, per-table flow keys and an arrival
    /// stream (tests and embedding); the config's rules and traffic are ignored.
    pub fn build(
        config: Config,
        sets: Vec<RuleSet>,
        flow_keys: Vec<Vec<Key>>,
        source: Source,
    ) -> Result<Simulator, SimError> {
        if config.tables.is_empty() {
            return err("config: at least one table is needed");
        }
        if !(config.clock_mhz > 0.0) || !(config.window_ns > 0.0) {
            return err("config: clock_mhz and window_ns must be > 0");
        }
        if config.pmus.count > u16::MAX as u32 - 1 {
            return err("config: pmus.count too large");
        }
        let n = config.tables.len();
        let idx = |name: &str| -> Result<u16, SimError> {
            config
                .tables
                .iter()
                .position(|t| t.name == name)
                .map(|i| i as u16)
                .ok_or_else(|| SimError(format!("config: no table named {name:?}")))
        };
        for (i, t) in config.tables.iter().enumerate() {
            if config.tables[..i].iter().any(|u| u.name == t.name) {
                return err(format!("config: table name {:?} used twice", t.name));
            }
        }
        let edges: Vec<(u16, u16, f64)> = config
            .edges
            .iter()
            .map(|e| Ok((idx(&e.src)?, idx(&e.dst)?, e.p)))
            .collect::<Result<_, SimError>>()?;
        let entry: Vec<(u16, f64)> = if config.entry.is_empty() {
            vec![(0, 1.0)]
        } else {
            config
                .entry
                .iter()
                .map(|(k, v)| Ok((idx(k)?, *v)))
                .collect::<Result<_, SimError>>()?
        };
        let cfg = Cfg::new(n, &edges, &entry).map_err(|e| SimError(format!("config: {e}")))?;
        let pmu_count = config.pmus.count as usize;
        let mut pmus: Vec<Pmu> = (0..pmu_count)
            .map(|i| Pmu::new(i as u16, &config.pmus))
            .collect();
        let mut walkers = Vec::new();
        let mut tables = Vec::new();
        for (i, (t, set)) in config.tables.iter().zip(&sets).enumerate() {
            let keys = flow_keys[i].clone();
            let lin = Linear::new(set);
            let oracle: Vec<Match> = keys.iter().map(|k| lin.classify(k)).collect();
            walkers.push(build_walker(
                config.elu.algo,
                set,
                &t.name,
                &crate::classify::BuildConfig::default(),
            )?);
            let words = set.schema.len().max(1);
            let mut vmu = Vmu::new(
                i as u16,
                words,
                t.lookup_bits,
                config.vmu.vnodes,
                t.phv_fifo,
                config.seed as u32 ^ i as u32,
            );
            let mut members = Vec::new();
            for &p in &t.pmus {
                if p as usize >= pmu_count {
                    return err(format!(
                        "config: table {:?} names PMU {p}, but pmus.count is {pmu_count}",
                        t.name
                    ));
                }
                if !pmus[p as usize].is_free() {
                    return err(format!("config: PMU {p} is given to two tables"));
                }
                pmus[p as usize].associate(i as u16);
                vmu.add_pmu(p as u16);
                members.push(p as u16);
            }
            let lut_index = keys.iter().map(|k| vmu.index(k) as u32).collect();
            tables.push(Table {
                name: t.name.clone(),
                vmu,
                lut_index,
                input: VecDeque::new(),
                keys,
                oracle,
                members,
                pending: None,
                win: Counters::default(),
                total: Counters::default(),
                edges: vec![0; n + 1],
                hbm_seen: 0,
                reordered_seen: 0,
            });
        }
        let cycle_ps = 1e6 / config.clock_mhz;
        let window = ((config.window_ns * 1000.0 / cycle_ps).round() as Cycle).max(1);
        let mut sim = Simulator {
            cycle_ps,
            now: 0,
            net: Network::new(config.interconnect.clone(), pmu_count),
            bus: SharedBus::new(1),
            bus_rr: 0,
            direct: VecDeque::new(),
            elu: Elu::new(config.elu.clone(), n, config.clock_mhz),
            hbm: Hbm::new(config.hbm.clone()),
            engine: Engine::new(),
            cfg,
            source,
            next_arrival: None,
            rng: Pcg64::seed_from_u64(config.seed ^ 0xC0FFEE),
            stage_fifo: config.pipeline.stage_fifo.max(1) as usize,
            vmu_latency: config.vmu.latency_cycles as Cycle
                + config.interconnect.latency_cycles as Cycle,
            window,
            window_end: window,
            rows: Vec::new(),
            edge_rows: Vec::new(),
            created: 0,
            dropped: 0,
            exited_bits: Vec::new(),
            duplicates: 0,
            wrong_action: 0,
            keys_done: 0,
            busy_cycles: 0,
            draining: false,
            fed: false,
            tables,
            walkers,
            pmu_wake: vec![0; pmus.len()],
            pmu_min_wake: 0,
            pmus,
            config,
        };
        sim.pull_arrival();
        Ok(sim)
    }

    fn pull_arrival(&mut self) {
        self.next_arrival = self.source.next().map(|a| {
            (
                crate::hw::ceil_cycles((a.t_ps as f64 / self.cycle_ps) - 1e-9),
                a,
            )
        });
    }

    pub fn now(&self) -> Cycle {
        self.now
    }
    pub fn now_ns(&self) -> f64 {
        self.now as f64 * self.cycle_ps / 1000.0
    }
    pub fn cycle_ns(&self) -> f64 {
        self.cycle_ps / 1000.0
    }
    pub fn table_names(&self) -> Vec<String> {
        self.tables.iter().map(|t| t.name.clone()).collect()
    }
    /// Keys (table lookups) completed so far.
    pub fn keys_done(&self) -> u64 {
        self.keys_done
    }

    /// Advances simulated time to `t_ns` (never back).
    pub fn run_until_ns(&mut self, t_ns: f64) {
        let until = (t_ns * 1000.0 / self.cycle_ps).floor().max(0.0) as Cycle;
        self.run_until(until);
    }

    /// Runs every cycle before `until`; afterwards `now() == until`.
    pub fn run_until(&mut self, until: Cycle) {
        while self.now < until {
            while self.now >= self.window_end {
                self.close_window();
            }
            let now = self.now;
            while let Some((_, ev)) = self.engine.pop_until(now) {
                match ev {
                    Ev::MemDone(slot) => {
                        let engine = &mut self.engine;
                        self.elu.access_done(now, slot, &mut self.hbm, &mut |c, s| {
                            engine.schedule(c, Ev::MemDone(s))
                        });
                    }
                }
            }
            while let Some((c, a)) = self.next_arrival {
                if c > now {
                    break;
                }
                self.arrive(now, a);
                self.pull_arrival();
            }
            let wake = self.tick(now);
            self.busy_cycles += 1;
            self.now = if wake <= now + 1 {
                now + 1
            } else {
                let mut next = until.min(wake);
                if let Some((c, _)) = self.next_arrival {
                    next = next.min(c);
                }
                if let Some(c) = self.engine.peek() {
                    next = next.min(c);
                }
                next.max(now + 1)
            };
        }
        while self.window_end <= until {
            self.close_window();
        }
    }

    fn arrive(&mut self, now: Cycle, a: Arrival) {
        let t = match self.cfg.single_entry() {
            Some(t) => t,
            None => {
                let u: f64 = self.rng.gen();
                self.cfg.entry(u)
            }
        };
        let id = self.created;
        self.created += 1;
        let table = &mut self.tables[t as usize];
        table.win.arrived += 1;
        if table.input.len() >= self.stage_fifo {
            table.win.drops += 1;
            self.dropped += 1;
            return;
        }
        table.input.push_back(Phv {
            id,
            flow: a.flow,
            arrived: now,
        });
    }

    /// One cycle (phases 2–8); returns the next cycle at which a queue can
    /// make progress (`Cycle::MAX` if none; memory completions and arrivals
    /// are handled by the caller).
    fn tick(&mut self, now: Cycle) -> Cycle {
        // 2. ELU commit: one reply per cycle.
        if let Some((miss, action)) = self.elu.commit() {
            match miss.pmu {
                Some(p) => {
                    self.pmus[p as usize].fill(&miss, action);
                    self.touch_pmu(p as usize);
                }
                None => {
                    let t = &mut self.tables[miss.table as usize];
                    let lat = t.vmu.resolve(miss.tag, action, now);
                    t.win.lat_sum += lat;
                    t.win.lat.add(lat);
                }
            }
        }
        // 3–4. PMUs, then the response network.
        let soon = now + 1;
        let mut busy = false;
        let mut misses_waiting = false;
        let mut min_wake = Cycle::MAX;
        let pmus_due = self.pmu_min_wake <= now;
        for (p, wake) in self.pmus.iter_mut().zip(self.pmu_wake.iter_mut()) {
            if !pmus_due {
                break;
            }
            if *wake > now {
                min_wake = min_wake.min(*wake);
                continue;
            }
            if p.is_idle() {
                *wake = Cycle::MAX;
                continue;
            }
            p.tick(now);
            misses_waiting |= p.q_m_len() > 0;
            if let Some(r) = p.pop_response() {
                match r {
                    Response::Hit {
                        table,
                        tag,
                        action,
                        compared,
                    } => {
                        let t = &mut self.tables[table as usize];
                        t.win.hits += 1;
                        t.win.cam_compares += compared as u64;
                        let lat = t.vmu.resolve(tag, action, now);
                        t.win.lat_sum += lat;
                        t.win.lat.add(lat);
                    }
                    Response::Miss {
                        table,
                        tag,
                        compared,
                    } => {
                        let t = &mut self.tables[table as usize];
                        t.win.misses += 1;
                        t.win.cam_compares += compared as u64;
                        t.vmu.park(tag);
                    }
                    Response::Fill { table, tag, action } => {
                        let t = &mut self.tables[table as usize];
                        let lat = t.vmu.resolve(tag, action, now);
                        t.win.lat_sum += lat;
                        t.win.lat.add(lat);
                    }
                }
            }
            *wake = p.next_event(now).unwrap_or(Cycle::MAX);
            min_wake = min_wake.min(*wake);
        }
        if pmus_due {
            self.pmu_min_wake = min_wake;
        }
        // 5. PMU → ELU bus: one miss per cycle, round robin over the PMUs and
        // the VMUs' direct path (last).
        if (misses_waiting || !self.direct.is_empty())
            && self.elu.can_enqueue()
            && self.bus.can_send(now, 0)
        {
            let n = self.pmus.len() + 1;
            for k in 0..n {
                let i = (self.bus_rr + k) % n;
                let miss = if i < self.pmus.len() {
                    let m = self.pmus[i].pop_miss();
                    if m.is_some() {
                        self.touch_pmu(i);
                    }
                    m
                } else {
                    self.direct.pop_front()
                };
                if let Some(m) = miss {
                    self.bus.try_send(now, 0);
                    self.tables[m.table as usize].win.elu_requests += 1;
                    self.elu.enqueue(now, m);
                    self.bus_rr = (i + 1) % n;
                    break;
                }
            }
        }
        busy |= !self.direct.is_empty();
        // 6. ELU registers and starts lookups.
        {
            let engine = &mut self.engine;
            self.elu
                .tick(now, &mut self.hbm, &self.walkers, &mut |c, s| {
                    engine.schedule(c, Ev::MemDone(s))
                });
        }
        busy |= self.elu.has_work();
        // 7. Tables: release, then request.
        let nt = self.tables.len();
        self.fed = false;
        for k in 0..nt {
            let ti = (now as usize + k) % nt;
            self.release(now, ti);
            self.request(now, ti);
            let t = &self.tables[ti];
            busy |= !t.input.is_empty() || t.vmu.head_ready();
        }
        // A release may have fed a table already visited in this loop: its
        // input is not empty, so the next cycle must be stepped.
        busy |= self.fed;
        // 8. Draining PMUs (only scanned while some PMU is transient).
        if self.draining {
            let mut still = false;
            for i in 0..self.pmus.len() {
                if let State::Transient { .. } = self.pmus[i].state() {
                    self.touch_pmu(i);
                    match self.pmus[i].try_finish_drain() {
                        Some(Some(t)) => {
                            let tb = &mut self.tables[t as usize];
                            tb.vmu.add_pmu(i as u16);
                            tb.members.push(i as u16);
                        }
                        Some(None) => {}
                        None => still = true,
                    }
                }
            }
            self.draining = still;
        }
        if busy || !self.direct.is_empty() {
            return soon;
        }
        // PMUs (including those that got requests in phase 7) wake when
        // their next request or CAM result is due.
        if self.pmu_min_wake <= now {
            let mut wake = Cycle::MAX;
            for (p, w) in self.pmus.iter().zip(self.pmu_wake.iter_mut()) {
                if *w <= now {
                    *w = p.next_event(now).unwrap_or(Cycle::MAX);
                }
                wake = wake.min(*w);
            }
            self.pmu_min_wake = wake;
        }
        self.pmu_min_wake
    }

    /// A PMU changed from outside its tick: tick it at the next stepped cycle.
    fn touch_pmu(&mut self, i: usize) {
        self.pmu_wake[i] = 0;
        self.pmu_min_wake = 0;
    }

    fn release(&mut self, now: Cycle, ti: usize) {
        if !self.tables[ti].vmu.head_ready() {
            return;
        }
        let next = match self.tables[ti].pending.take() {
            Some(n) => n,
            None if self.cfg.has_out(ti as u16) => {
                let u: f64 = self.rng.gen();
                self.cfg.next(ti as u16, u)
            }
            None => Next::Exit,
        };
        if let Next::Table(d) = next {
            if self.tables[d as usize].input.len() >= self.stage_fifo {
                let t = &mut self.tables[ti];
                t.pending = Some(next);
                t.win.stalls += 1;
                return;
            }
        }
        let t = &mut self.tables[ti];
        let slot = t.vmu.release();
        let action = slot.action.unwrap();
        if action != t.oracle[slot.flow as usize] {
            self.wrong_action += 1;
        }
        t.win.processed += 1;
        t.win.sojourn_sum += now - slot.arrived;
        self.keys_done += 1;
        match next {
            Next::Table(d) => {
                self.fed = true;
                t.edges[d as usize] += 1;
                self.tables[d as usize].input.push_back(Phv {
                    id: slot.phv,
                    flow: slot.flow,
                    arrived: now,
                });
                self.tables[d as usize].win.arrived += 1;
            }
            Next::Exit => {
                let n = t.edges.len();
                t.edges[n - 1] += 1;
                let (w, b) = ((slot.phv / 64) as usize, slot.phv % 64);
                if self.exited_bits.len() <= w {
                    self.exited_bits.resize(w + 1, 0);
                }
                if self.exited_bits[w] & (1 << b) != 0 {
                    self.duplicates += 1;
                }
                self.exited_bits[w] |= 1 << b;
            }
        }
    }

    fn request(&mut self, now: Cycle, ti: usize) {
        let t = &mut self.tables[ti];
        let Some(&phv) = t.input.front() else { return };
        if !t.vmu.has_room() {
            t.win.stalls += 1;
            return;
        }
        let key = t.keys[phv.flow as usize];
        let p = t.vmu.route_index(t.lut_index[phv.flow as usize] as usize);
        if p == INVALID {
            // No PMU: the VMU sends the key to the ELU itself (bounded by the
            // PHV buffer).
            t.input.pop_front();
            let tag = t.vmu.issue(phv.id, phv.flow, phv.arrived, now);
            t.vmu.park(tag);
            t.win.misses += 1;
            self.direct.push_back(MissRequest {
                table: ti as u16,
                tag,
                key,
                pmu: None,
            });
        } else {
            let pu = p as usize;
            if !self.pmus[pu].can_accept() || !self.net.try_send(now, pu) {
                t.win.stalls += 1;
                return;
            }
            t.input.pop_front();
            let tag = t.vmu.issue(phv.id, phv.flow, phv.arrived, now);
            // touch_pmu (the table is borrowed).
            self.pmu_wake[pu] = 0;
            self.pmu_min_wake = 0;
            self.pmus[pu].accept(Request {
                table: ti as u16,
                tag,
                key,
                at: now + self.vmu_latency,
            });
        }
        t.win.fifo_max = t.win.fifo_max.max(t.vmu.occupancy() as u64);
    }

    fn close_window(&mut self) {
        let end = self.window_end;
        let nt = self.tables.len();
        for (i, t) in self.tables.iter_mut().enumerate() {
            let mut c = std::mem::take(&mut t.win);
            c.hbm_bytes = self.elu.bytes[i] - t.hbm_seen;
            t.hbm_seen = self.elu.bytes[i];
            c.reordered = t.vmu.reordered - t.reordered_seen;
            t.reordered_seen = t.vmu.reordered;
            t.total.merge(&c);
            for (d, cnt) in t.edges.iter_mut().enumerate() {
                if *cnt > 0 {
                    let dst = if d == nt { -1 } else { d as i32 };
                    self.edge_rows.push(EdgeRow {
                        end,
                        src: i as u16,
                        dst,
                        count: *cnt,
                    });
                    *cnt = 0;
                }
            }
            self.rows.push(WindowRow {
                end,
                table: i as u16,
                pmus: t.members.len() as u32,
                c,
            });
        }
        self.window_end += self.window;
    }

    /// Completed window rows since the last call.
    pub fn take_windows(&mut self) -> Vec<WindowRow> {
        std::mem::take(&mut self.rows)
    }
    /// Completed routing counts since the last call.
    pub fn take_edges(&mut self) -> Vec<EdgeRow> {
        std::mem::take(&mut self.edge_rows)
    }
    pub fn window_cycles(&self) -> Cycle {
        self.window
    }

    /// Gives `table` exactly the PMUs `pmus`. PMUs it loses drain (transient)
    /// and become free; PMUs it gains join at once if free, or after draining
    /// from their current table. Only the affected lookup-table entries change.
    pub fn assign(&mut self, table: &str, pmus: &[u32]) -> Result<(), SimError> {
        let Some(ti) = self.tables.iter().position(|t| t.name == table) else {
            return err(format!("assign: no table named {table:?}"));
        };
        let t16 = ti as u16;
        for &p in pmus {
            if p as usize >= self.pmus.len() {
                return err(format!(
                    "assign: PMU {p} does not exist (pmus.count = {})",
                    self.pmus.len()
                ));
            }
        }
        let want: Vec<u16> = pmus.iter().map(|&p| p as u16).collect();
        self.draining = true;
        self.pmu_wake.fill(0);
        self.pmu_min_wake = 0;
        // Leaving: members not wanted, and pending joins not wanted.
        for i in 0..self.pmus.len() {
            let p = i as u16;
            if want.contains(&p) {
                continue;
            }
            match self.pmus[i].state() {
                State::Associated { table } if table == t16 => {
                    self.remove_member(ti, p);
                    self.pmus[i].leave(None);
                }
                State::Transient {
                    table,
                    next: Some(n),
                } if n == t16 => {
                    self.pmus[i].leave(None);
                    let _ = table;
                }
                _ => {}
            }
        }
        // Joining.
        for &p in &want {
            let i = p as usize;
            match self.pmus[i].state() {
                State::Free => {
                    self.pmus[i].associate(t16);
                    self.tables[ti].vmu.add_pmu(p);
                    self.tables[ti].members.push(p);
                }
                State::Associated { table } if table == t16 => {}
                State::Associated { table } => {
                    self.remove_member(table as usize, p);
                    self.pmus[i].leave(Some(t16));
                }
                State::Transient { .. } => self.pmus[i].leave(Some(t16)),
            }
        }
        Ok(())
    }

    fn remove_member(&mut self, ti: usize, p: u16) {
        let t = &mut self.tables[ti];
        t.members.retain(|&m| m != p);
        t.vmu.remove_pmu(p);
    }

    /// (id, state, table name, channel) of every PMU.
    pub fn pmu_states(&self) -> Vec<(u32, &'static str, Option<String>, u32)> {
        self.pmus
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let (s, t) = match p.state() {
                    State::Free => ("free", None),
                    State::Associated { table } => ("associated", Some(table)),
                    State::Transient { table, .. } => ("transient", Some(table)),
                };
                (
                    i as u32,
                    s,
                    t.map(|t| self.tables[t as usize].name.clone()),
                    self.net.channel(i) as u32,
                )
            })
            .collect()
    }

    /// Totals per table so far (closed windows plus the open one).
    pub fn totals(&self) -> Vec<Counters> {
        self.tables
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut c = t.total.clone();
                let mut w = t.win.clone();
                w.hbm_bytes = self.elu.bytes[i] - t.hbm_seen;
                w.reordered = t.vmu.reordered - t.reordered_seen;
                c.merge(&w);
                c
            })
            .collect()
    }

    /// The summary of issue #4: per table hit rate, latency, HBM bandwidth,
    /// offered load and throughput over the time simulated so far.
    pub fn summary(&self) -> Vec<(String, TableSummary)> {
        let ns = self.now_ns().max(1e-9);
        let cyc = self.cycle_ns();
        self.totals()
            .into_iter()
            .zip(&self.tables)
            .map(|(c, t)| {
                let looked = c.hits + c.misses;
                (
                    t.name.clone(),
                    TableSummary {
                        hit_rate: if looked > 0 {
                            c.hits as f64 / looked as f64
                        } else {
                            0.0
                        },
                        mean_latency_ns: if c.lat.total() > 0 {
                            c.lat_sum as f64 / c.lat.total() as f64 * cyc
                        } else {
                            0.0
                        },
                        mean_sojourn_ns: if c.processed > 0 {
                            c.sojourn_sum as f64 / c.processed as f64 * cyc
                        } else {
                            0.0
                        },
                        p99_latency_ns: c.lat.quantile(0.99) * cyc,
                        hbm_gbps: c.hbm_bytes as f64 / ns,
                        offered_mpps: c.arrived as f64 / ns * 1000.0,
                        throughput_mpps: c.processed as f64 / ns * 1000.0,
                        keys: c.processed,
                        drops: c.drops,
                        misses: c.misses,
                        hits: c.hits,
                    },
                )
            })
            .collect()
    }

    /// Per-key latency histogram of a table: (bucket lower edges in ns, counts).
    pub fn latency_histogram(&self, table: &str) -> Result<(Vec<f64>, Vec<u64>), SimError> {
        let Some(i) = self.tables.iter().position(|t| t.name == table) else {
            return err(format!("no table named {table:?}"));
        };
        let c = &self.totals()[i];
        let last = c
            .lat
            .counts
            .iter()
            .rposition(|&x| x > 0)
            .map_or(0, |x| x + 1);
        let edges = (0..=last)
            .map(|b| LogHist::lower(b) as f64 * self.cycle_ns())
            .collect();
        Ok((edges, c.lat.counts[..last].to_vec()))
    }

    /// Checks that every PHV left exactly once with the oracle's action.
    pub fn check_invariants(&self) -> Invariants {
        let in_flight: u64 = self
            .tables
            .iter()
            .map(|t| (t.input.len() + t.vmu.occupancy()) as u64)
            .sum();
        let exited: u64 = self.exited_bits.iter().map(|w| w.count_ones() as u64).sum();
        Invariants {
            created: self.created,
            exited,
            dropped: self.dropped,
            in_flight,
            lost: self.created as i64 - exited as i64 - self.dropped as i64 - in_flight as i64,
            duplicates: self.duplicates,
            wrong_action: self.wrong_action,
        }
    }

    /// Occupancy of the queues, for inspection.
    pub fn queue_depths(&self) -> QueueDepths {
        QueueDepths {
            input: self.tables.iter().map(|t| t.input.len()).collect(),
            phv_fifo: self.tables.iter().map(|t| t.vmu.occupancy()).collect(),
            q_r: self.pmus.iter().map(|p| p.q_r_len()).collect(),
            q_m: self.pmus.iter().map(|p| p.q_m_len()).collect(),
            miss_queue: self.elu.miss_queue_len(),
            orb: self.elu.orb_len(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct TableSummary {
    pub hit_rate: f64,
    /// Per-key match latency (request → answer).
    pub mean_latency_ns: f64,
    /// Time in the table (arrival → release, in order).
    pub mean_sojourn_ns: f64,
    pub p99_latency_ns: f64,
    pub hbm_gbps: f64,
    pub offered_mpps: f64,
    pub throughput_mpps: f64,
    pub keys: u64,
    pub drops: u64,
    pub hits: u64,
    pub misses: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invariants {
    pub created: u64,
    pub exited: u64,
    pub dropped: u64,
    pub in_flight: u64,
    /// created − exited − dropped − in flight: must be 0.
    pub lost: i64,
    pub duplicates: u64,
    pub wrong_action: u64,
}

impl Invariants {
    pub fn ok(&self) -> bool {
        self.lost == 0 && self.duplicates == 0 && self.wrong_action == 0
    }
}

#[derive(Clone, Debug)]
pub struct QueueDepths {
    pub input: Vec<usize>,
    pub phv_fifo: Vec<usize>,
    pub q_r: Vec<usize>,
    pub q_m: Vec<usize>,
    pub miss_queue: usize,
    pub orb: usize,
}

#[cfg(test)]
mod tests;

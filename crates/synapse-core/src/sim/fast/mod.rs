//! The fast mode: the exact run's summary figures (hit rate, latency mean
//! and p99, HBM bandwidth, throughput, drops, per table) at a fraction of
//! its cost, each with an interval. The exact engine stays the reference;
//! the fast mode's error against it is measured on a validation suite
//! (`tests/test_fast_mode.py`, `docs/fast-mode.md`).
//!
//! How:
//! 1. **Spatial sampling of flows** (SHARDS, Waldspurger et al., FAST '15):
//!    a flow is simulated iff a hash of its id falls below R·2^32, R =
//!    `sample_flows / flows`. Every flow's size and start are the exact
//!    run's (the same plan, `workload::traffic`); a sampled flow's packets
//!    are drawn the same way (a Poisson process at its rate) with draws of
//!    its own, and cross the CFG with draws of their own.
//! 2. **Miniature caches** (Waldspurger et al., ATC '17): each PMU is an LRU
//!    of R·B entries fed with the sampled keys the VMU sends it (the same
//!    hash, lookup table and ring), with the CAM's semantics: a miss changes
//!    nothing until its fill (early miss notification: the key misses again
//!    until then), and the fill makes it the most recent entry.
//! 3. **The miss path in sampled windows** (SMARTS-style, `miss.rs`): short
//!    windows spread over the run simulate the exact engine's own ELU and
//!    HBM from empty, fed with the full-rate miss stream: the sampled
//!    misses, and for every flow not sampled the misses of a sampled flow of
//!    about its size that started before it, shifted to its start (its
//!    *donor*). Their latencies give each period's miss-latency
//!    distribution and the ELU's queueing delay; a sampled miss outside a
//!    window is filled after its key's walk on an idle ELU (`mrc.rs`'s
//!    `unloaded_fill`) plus the last window's mean queueing delay.
//! 4. **Estimates and intervals.** Misses are model-assisted: every flow's
//!    expected misses under a simple model (`flow_model_misses`) plus the
//!    sampled flows' misses beyond it over R (a difference estimator); HBM
//!    bytes and miss latencies per miss are the sampled misses', scaled to
//!    that count; arrivals are the plan's expected ones;
//!    hits take `vmu_latency + τ_c` plus the VMU's response port register
//!    (`RSP_DELAY`, as every answer). Intervals: the sampled flows are split
//!    into random groups by hash, each group's figures computed alone, and
//!    the spread of the groups gives the sampling error (standard random
//!    groups); the interval is the estimate ± 1.96 of it, widened for the
//!    exact run's own randomness and by a floor per figure for what the
//!    model leaves out.
//!
//! A routed simulator (a P4 program, [`Simulator::run_fast_arrivals`])
//! is given every arrival: its tables share keys between flows, so every
//! flow runs through the caches (R = 1), along its route, each next hop
//! sent when the PHV leaves the last (after its answer).
//!
//! Overload: when the windows' ELU falls behind its misses, the share of
//! them it serves (answered over sent in the measured parts of the windows
//! that fell behind) scales throughput, keys, hits, misses and HBM bytes,
//! and the entry tables' input FIFOs drop the rest of the PHVs.
//!
//! Left out (see `docs/fast-mode.md` for when that matters): latencies
//! behind full queues under overload, interconnect conflicts, PMU queueing.

mod cache;
mod miss;


use super::mrc::unloaded_fill;
use super::*;
use crate::hash::lookup3::hashword;
use crate::hw::pmu::Timing;
use crate::hw::FastBuild;
use crate::hw::vmu::RSP_DELAY;
use cache::MiniCaches;
use miss::{EluWindow, Memo, Miss};
use rand_distr::Exp1;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// A flow plan: per flow its first packet (ps), packets and duration (its
/// packets spread at `packets / fd_ps`), and, for a routed simulator,
/// every arrival (time in ps, flow) in time order.
struct Plan<'a> {
    starts: Cow<'a, [f64]>,
    packets: Cow<'a, [u64]>,
    fd_ps: FlowDuration,
    arrivals: Option<(&'a [u64], &'a [u32])>,
}

/// Each flow's duration, ps: the traffic's one for every flow (CFG), or a
/// flow's own (routed: from its arrivals).
enum FlowDuration {
    Same(f64),
    Each(Vec<f64>),
}

impl std::ops::Index<usize> for FlowDuration {
    type Output = f64;
    #[inline]
    fn index(&self, f: usize) -> &f64 {
        match self {
            FlowDuration::Same(d) => d,
            FlowDuration::Each(v) => &v[f],
        }
    }
}

/// The fast mode's parameters (`[fast]` of a scenario, `--set fast.KEY=V`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FastConfig {
    /// Flows simulated (SHARDS rate R = min(1, this / flows)).
    pub sample_flows: u32,
    /// Share of the run's time the ELU is simulated in (its windows).
    pub elu_share: f64,
    /// A window: warm-up, measured part and tail (ns), then a drain.
    pub warm_ns: f64,
    pub measure_ns: f64,
    pub tail_ns: f64,
    /// Random groups of sampled flows, for the intervals.
    pub groups: u32,
    /// Seed of the sampling hash and the draws (the run's seed is mixed in).
    pub seed: u64,
    /// Entries a miniature PMU cache has at least: the rate is raised to
    /// `min_entries / block_size` when `sample_flows` gives fewer (an LRU of
    /// a handful of entries does not scale to one of hundreds).
    pub min_entries: u32,
    /// Windows at most (the share shrinks on long runs).
    pub max_windows: u32,
    /// A mean ELU backlog beyond this (ns) flags the run as overloaded.
    pub backlog_limit_ns: f64,
    /// A sampled flow of at least this many packets is a *large flow*: its
    /// hits are counted, not looked up one by one (0: none is).
    pub elephant_packets: u32,
}

impl Default for FastConfig {
    fn default() -> FastConfig {
        FastConfig {
            sample_flows: 150,
            elu_share: 0.1,
            warm_ns: 4_000.0,
            measure_ns: 8_000.0,
            tail_ns: 4_000.0,
            groups: 16,
            seed: 0,
            min_entries: 16,
            max_windows: 32,
            backlog_limit_ns: 1_000.0,
            elephant_packets: 32,
        }
    }
}

/// A figure and its interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Estimate {
    fn new(value: f64, half: f64) -> Estimate {
        let h = if half.is_finite() { half.abs() } else { 0.0 };
        Estimate { value, lo: value - h, hi: value + h }
    }
}

/// One table's figures, as [`TableSummary`] has them, each with its interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FastTable {
    pub name: String,
    pub hit_rate: Estimate,
    pub mean_latency_ns: Estimate,
    pub mean_sojourn_ns: Estimate,
    pub p99_latency_ns: Estimate,
    pub hbm_gbps: Estimate,
    pub offered_mpps: Estimate,
    pub throughput_mpps: Estimate,
    pub keys: Estimate,
    pub drops: Estimate,
    pub hits: Estimate,
    pub misses: Estimate,
    /// The latency at each of [`QUANTILES`], ns (no interval: the figures
    /// draw them as boxes).
    pub quantiles_ns: Vec<f64>,
}

/// How far (relative) an overloaded run's served throughput, keys, drops
/// and HBM bandwidth may be from the exact engine's: the model's error on
/// the validation suite's overloaded points (docs/fast-mode.md).
pub const OVERLOAD_REL: f64 = 0.2;

/// The latency quantiles a [`FastTable`] gives (a sweep's `lat_pNN_ns`).
pub const QUANTILES: [f64; 5] = [0.05, 0.25, 0.5, 0.75, 0.95];

/// The fast run's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FastReport {
    pub tables: Vec<FastTable>,
    /// Flows in the plan and simulated, and the sampling rate.
    pub flows: u64,
    pub sampled_flows: u64,
    pub rate: f64,
    /// References looked up (sampled keys' lookups; a large flow's hits
    /// are counted, not looked up).
    pub sampled_refs: u64,
    /// ELU windows simulated and the misses they measured.
    pub elu_windows: u64,
    pub measured_misses: u64,
    /// Mean over the ELU windows of how long after a window's measured
    /// part its last measured miss was answered, ns: the backlog the ELU
    /// carries. Beyond a window's tail the ELU falls behind its misses.
    pub backlog_ns: f64,
    /// The ELU falls behind (`backlog_ns` > `backlog_limit_ns`):
    /// the run is overloaded, and its throughput, drops and latencies are
    /// beyond this model (the exact engine's producers stall and drop).
    pub overloaded: bool,
    /// The share of the offered load the ELU serves (1 unless overloaded).
    pub served_share: f64,
    /// Per-window estimates (the exact run's statistics windows).
    pub windows: Vec<FastWindow>,
    /// Wall time of each step of the run, s (for profiling: `fastspeed`).
    #[serde(skip)]
    pub steps_s: Vec<(&'static str, f64)>,
}

/// Estimated counters of one (statistics window, table).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FastWindow {
    pub end_ns: f64,
    pub table: u16,
    pub arrived: f64,
    pub processed: f64,
    pub hits: f64,
    pub misses: f64,
    pub hbm_bytes: f64,
    pub pmus: u32,
}

/// A latency histogram of weighted counts on [`LogHist`]'s buckets.
#[derive(Clone, Debug, Default)]
struct WHist {
    w: Vec<f64>,
    sum: f64,
    n: f64,
}

impl WHist {
    fn add(&mut self, v: u64, w: f64) {
        let b = LogHist::bucket(v);
        if b >= self.w.len() {
            self.w.resize(b + 1, 0.0);
        }
        self.w[b] += w;
        self.sum += v as f64 * w;
        self.n += w;
    }
    fn add_hist(&mut self, o: &WHist, scale: f64) {
        if o.w.len() > self.w.len() {
            self.w.resize(o.w.len(), 0.0);
        }
        for (a, b) in self.w.iter_mut().zip(&o.w) {
            *a += b * scale;
        }
        self.sum += o.sum * scale;
        self.n += o.n * scale;
    }
    fn mean(&self) -> f64 {
        if self.n > 0.0 { self.sum / self.n } else { 0.0 }
    }
    /// The q-quantile as [`LogHist::quantile`] gives it (a bucket's midpoint).
    fn quantile(&self, q: f64) -> f64 {
        if self.n <= 0.0 {
            return 0.0;
        }
        let rank = (q * self.n).max(1e-12);
        let mut acc = 0.0;
        for (b, &c) in self.w.iter().enumerate() {
            acc += c;
            if acc >= rank - 1e-9 {
                let lo = LogHist::lower(b) as f64;
                let hi = LogHist::lower(b + 1) as f64;
                return if hi - lo <= 1.0 { lo } else { (lo + hi - 1.0) / 2.0 };
            }
        }
        0.0
    }
}

/// A sampled key's reference: arrival cycle, table, key id, sampled flow.
#[derive(Clone, Copy, Debug)]
struct Ref {
    c: Cycle,
    table: u16,
    key: u32,
    flow: u32,
    /// Its hop on its route (routed).
    hop: u16,
    /// A large flow's reference: already counted (`Elephants`).
    counted: bool,
}

/// The large flows' references (CFG traffic), per stream (a sampled flow
/// of at least `elephant_packets` packets at one table whose key is its
/// own). Their heavy skew made them most of the sampled references, and
/// nearly all are hits: a large flow's gaps are far shorter than the time
/// its PMU takes to see `block_size` other keys. So a stream's references
/// are counted once (arrivals, windows), and only those whose answer is
/// not known go through the loop as events: the first ones, up to the
/// first hit (a miss, and the misses while it is filled), and the first
/// one after an eviction. Between them, every reference hits; the cache
/// learns of them only when the key would be evicted (`MiniCaches::fill`
/// asks for its last reference before then), so it evicts what it would
/// with every reference looked up. A fill is taken to happen at the
/// lookup point the loop applies it at (as for every key).
struct Elephants {
    table: Vec<u16>,
    key: Vec<u32>,
    flow: Vec<u32>,
    /// Per stream: its references' cycles, in order.
    times: Vec<Vec<Cycle>>,
    /// Per stream: the next reference not accounted for by an event.
    next: Vec<usize>,
    /// Per stream: cached and hitting from `next` on, with no event pending.
    bulk: Vec<bool>,
    /// Per table, per key id: its stream (u32::MAX: none).
    of_key: Vec<Vec<u32>>,
}

/// A cache stamp: the lookup point's cycle, then the order of touches.
#[inline]
fn stamp(c: Cycle, seq: u64) -> u128 {
    ((c as u128) << 64) | seq as u128
}

/// What the fast mode knows of one sampled key of a table.
#[derive(Clone, Copy, Debug)]
struct KeyInfo {
    /// PMU slot in the table's members (u16::MAX: no PMU).
    slot: u16,
    pmu: u16,
    /// Cycles from its miss to its fill on an idle ELU.
    fill: u32,
    /// HBM bytes one walk of it is charged.
    bytes: u64,
}

/// Per table, per group of sampled flows: counts and latencies.
#[derive(Clone, Debug, Default)]
struct GroupStats {
    refs: f64,
    misses: f64,
    bytes: f64,
    /// The model's latencies of the group's misses.
    lat: WHist,
    /// Its flows' misses minus the model's ([`flow_model_misses`]).
    resid: f64,
}

impl<const N: usize> Simulator<N> {
    /// Runs the fast mode on this (fresh) simulator's scenario: flow
    /// traffic, no rule updates. See the module documentation.
    pub fn run_fast(&mut self, fc: &FastConfig) -> Result<FastReport, SimError> {
        if self.routes.is_some() {
            return err("fast mode: a routed simulator's arrivals come from its embedding (run_fast_arrivals)");
        }
        if self.updates.is_some() {
            return err("fast mode: rule updates run in the exact engine only");
        }
        if self.shed_first | self.shed_all != 0
            || self.limit.is_some()
            || self.pmus.iter().any(|p| p.admit.is_some())
            || self.config.defence.slru_protected > 0.0
        {
            // Its miss-ratio curves are plain LRU's, its ELU a queueing model.
            return err("fast mode: [defence] runs in the exact engine only");
        }
        if !matches!(self.source, Source::Flows(_)) {
            return err("fast mode: flow traffic only (a trace runs in the exact engine)");
        }
        // The plan read in place: the traffic is out of the simulator for
        // the run (the core borrows the simulator mutably) and back after.
        let source = std::mem::replace(&mut self.source, Source::Other(Box::new(std::iter::empty())));
        let Source::Flows(t) = &source else { unreachable!() };
        let plan = Plan {
            starts: Cow::Borrowed(t.flow_starts()),
            packets: Cow::Borrowed(t.flow_packets_all()),
            fd_ps: FlowDuration::Same(t.flow_duration_ps()),
            arrivals: None,
        };
        let r = self.fast_core(fc, plan);
        self.source = source;
        r
    }

    /// The fast mode on a fresh routed simulator (`--p4`): `t_ps` and
    /// `flows` are every arrival the embedding would push
    /// ([`Simulator::push_arrivals`]: time order, flow ids). A flow's
    /// packets are its arrivals; a sampled flow's PHVs follow its route.
    pub fn run_fast_arrivals(&mut self, fc: &FastConfig, t_ps: &[u64], flows: &[u32]) -> Result<FastReport, SimError> {
        let Some(r) = self.routes.as_ref() else {
            return err("run_fast_arrivals: this simulator is not routed (run_fast)");
        };
        if self.updates.is_some() {
            return err("fast mode: rule updates run in the exact engine only");
        }
        if t_ps.len() != flows.len() || t_ps.windows(2).any(|w| w[1] < w[0]) {
            return err("run_fast_arrivals: times and flows of different lengths, or times not in order");
        }
        let nf = r.flows();
        if let Some(&f) = flows.iter().find(|&&f| f as usize >= nf) {
            return err(format!("run_fast_arrivals: flow {f} of {nf}"));
        }
        let end_ps = self.config.duration_ns * 1000.0;
        let (mut first, mut last, mut n) = (vec![f64::NAN; nf], vec![0.0f64; nf], vec![0u64; nf]);
        for (&t, &f) in t_ps.iter().zip(flows) {
            let (t, f) = (t as f64, f as usize);
            if t >= end_ps {
                break;
            }
            if n[f] == 0 {
                first[f] = t;
            }
            last[f] = t;
            n[f] += 1;
        }
        // A flow's duration as the plan's: n packets at (n - 1) / (last - first).
        let fd_ps = FlowDuration::Each((0..nf).map(|f| if n[f] > 1 { (last[f] - first[f]) * n[f] as f64 / (n[f] - 1) as f64 } else { 1.0 }).collect());
        let starts = Cow::Owned(first.iter().map(|&x| if x.is_nan() { f64::INFINITY } else { x }).collect());
        self.fast_core(fc, Plan { starts, packets: Cow::Owned(n), fd_ps, arrivals: Some((t_ps, flows)) })
    }

    fn fast_core(&mut self, fc: &FastConfig, plan: Plan<'_>) -> Result<FastReport, SimError> {
        let Plan { starts, packets, fd_ps, arrivals: given } = plan;
        let nt = self.tables.len();
        let flows = starts.len();
        let clock = self.clock;
        let until = (self.config.duration_ns * 1000.0 / clock.ps()).floor().max(0.0) as Cycle;
        let cyc_ns = clock.ps() / 1000.0;
        let vmu_lat = self.vmu_latency;
        // An answer acts at its VMU a cycle after it leaves the PMU or the ELU.
        let rsp = RSP_DELAY;
        let tau = Timing::from_config(&self.config.pmus).tau;
        let elu_lat = self.config.elu.latency_cycles as Cycle;
        // A hit's latency: the VMU, the CAM, the response port.
        let hit_lat = vmu_lat + tau + rsp;
        let seed = self.config.seed ^ fc.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let block = self.config.pmus.block_size;
        // A routed simulator's tables share keys between flows (a session,
        // a route): sampling flows is not sampling its keys, so every flow
        // runs through the caches there (only the ELU is sampled).
        let rate = if flows == 0 || given.is_some() {
            1.0
        } else {
            let by_size = if block > 0 { fc.min_entries as f64 / block as f64 } else { 0.0 };
            (fc.sample_flows as f64 / flows as f64).max(by_size).min(1.0)
        };
        let thr = (rate * 4294967296.0) as u64;
        let groups = fc.groups.clamp(2, 255) as usize; // a group id is a u8
        let hseed = (seed as u32) ^ 0x6f1d_2a47;
        // Time per step (`FastReport::steps_s`, `fastspeed`).
        let mut steps_s: Vec<(&'static str, f64)> = Vec::with_capacity(6);
        let mut t_lap = std::time::Instant::now();
        let mut lap = |name: &'static str| {
            let now = std::time::Instant::now();
            steps_s.push((name, (now - t_lap).as_secs_f64()));
            t_lap = now;
        };
        // 1. The sampled flows, and per flow its group.
        let mut sampled: Vec<u32> = Vec::new();
        let mut group_of: Vec<u8> = Vec::new();
        let mut is_sampled = vec![u32::MAX; flows];
        for f in 0..flows as u32 {
            let h = hashword(&[f], hseed);
            if (h as u64) < thr || rate >= 1.0 {
                is_sampled[f as usize] = sampled.len() as u32;
                sampled.push(f);
                group_of.push((hashword(&[f, 1], hseed) as usize % groups) as u8);
            }
        }
        lap("flows");
        // 2. Their keys: per table an id per distinct key, with what the
        // model needs of it. A key index is a flow (CFG) or a key of the
        // table's (routed).
        let mut key_id: Vec<HashMap<Key<N>, u32, FastBuild>> = vec![HashMap::default(); nt];
        let mut keys: Vec<Vec<Key<N>>> = vec![Vec::new(); nt];
        let mut info: Vec<Vec<KeyInfo>> = vec![Vec::new(); nt];
        // The walks memoised from here on: the windows' ELU walks the same keys.
        let (walkers, handles): (Vec<Box<dyn MemoryWalk<N> + Send>>, Vec<_>) =
            std::mem::take(&mut self.walkers).into_iter().map(Memo::wrap).unzip();
        // Each key is walked once below (its fill time), each read waiting
        // for the last, in a structure mostly out of the CPU's caches: the
        // reads of all of them first, side by side (`MemoryWalk::warm`).
        for (t, w) in walkers.iter().enumerate() {
            let tk = &self.tables[t].keys;
            // Each key once (a table's key is shared by many flows' hops).
            let mut ks: Vec<Key<N>> = match self.routes.as_ref() {
                Some(r) => sampled.iter().flat_map(|&f| r.hops(f)).filter(|&(tb, _)| tb as usize == t).map(|(_, k)| tk[k as usize]).collect(),
                None => sampled.iter().map(|&f| tk[f as usize]).collect(),
            };
            ks.sort_unstable();
            ks.dedup();
            w.warm(&ks);
        }
        lap("keys' reads");
        let mut hbm0 = Hbm::new(self.config.hbm.clone());
        let mut base = 0;
        let mut scratch = Vec::new();
        // Per table, per PMU id: its slot in the table's members (u16::MAX: none).
        let npmu = self.tables.iter().flat_map(|t| t.members.iter().map(|&p| p as usize + 1)).max().unwrap_or(0);
        let mut slots = vec![u16::MAX; nt * npmu];
        for (t, tb) in self.tables.iter().enumerate() {
            for (i, &p) in tb.members.iter().enumerate() {
                slots[t * npmu + p as usize] = i as u16;
            }
        }
        let mut intern = |t: usize, ix: usize| -> u32 {
            let tb = &self.tables[t];
            let k = tb.keys[ix];
            let next = keys[t].len() as u32;
            let id = *key_id[t].entry(k).or_insert(next);
            if id == next {
                keys[t].push(k);
                let pmu = tb.vmu.route_index(tb.lut_index[ix] as usize);
                let slot = if (pmu as usize) < npmu { slots[t * npmu + pmu as usize] } else { u16::MAX };
                let fill = unloaded_fill(walkers[t].as_ref(), &k, &mut hbm0, clock, tau, elu_lat, &mut base, &mut scratch);
                let bytes = scratch.iter().map(|a| hbm0.charged(a.bytes)).sum();
                info[t].push(KeyInfo { slot, pmu, fill, bytes });
            }
            id
        };
        // Per sampled flow: its key per table (CFG), or its route's hops
        // (table, key id) (routed).
        let mut flow_key: Vec<Vec<u32>> = vec![Vec::new(); nt];
        let mut flow_hops: Vec<Vec<(u16, u32)>> = Vec::new();
        // Per flow, per table: the hops of its route there (routed only).
        let mut visits: Vec<f32> = Vec::new();
        // Per flow: its route's tables (donors share them; 0 for CFG).
        let mut sig_of: Vec<u32> = vec![0; flows];
        if let Some(r) = self.routes.as_ref() {
            visits = vec![0.0; flows * nt];
            let mut sigs: HashMap<Vec<u16>, u32> = HashMap::new();
            for f in 0..flows {
                let tabs: Vec<u16> = r.hops(f as u32).map(|(t, _)| t).collect();
                for &t in &tabs {
                    visits[f * nt + t as usize] += 1.0;
                }
                let n = sigs.len() as u32;
                sig_of[f] = *sigs.entry(tabs).or_insert(n);
            }
            for &f in &sampled {
                let hops: Vec<(u16, u32)> = r.hops(f).collect();
                flow_hops.push(hops.into_iter().map(|(t, k)| (t, intern(t as usize, k as usize))).collect());
            }
        } else {
            for &f in &sampled {
                for (t, fk) in flow_key.iter_mut().enumerate() {
                    fk.push(intern(t, f as usize));
                }
            }
        }
        drop(intern);
        lap("keys");
        // 3. The sampled flows' packets, routed through the CFG (or their
        // given arrivals along their routes).
        let mut rng = Pcg64::seed_from_u64(seed ^ 0x51ed_fa57);
        let mut refs: Vec<Ref> = Vec::new();
        let single = self.cfg.single_entry();
        let mut packets_sampled = 0u64;
        let hop_gap = hit_lat + 1;
        if let Some((ts, fs)) = given {
            for (&t, &f) in ts.iter().zip(fs) {
                let si = is_sampled[f as usize];
                if si == u32::MAX {
                    continue;
                }
                let c = clock.ceil(t);
                if c >= until {
                    break;
                }
                packets_sampled += 1;
                // The first hop; each next one is sent when the PHV leaves
                // the last (after its answer: a miss holds it until filled).
                if let Some(&(tb, id)) = flow_hops[si as usize].first() {
                    refs.push(Ref { c, table: tb, key: id, flow: si, hop: 0, counted: false });
                }
            }
        }
        // The large flows' streams (CFG only: a routed table shares keys).
        let end_ps = until as f64 * clock.ps();
        let mut el = Elephants { table: vec![], key: vec![], flow: vec![], times: vec![], next: vec![], bulk: vec![], of_key: keys.iter().map(|k| vec![u32::MAX; k.len()]).collect() };
        let mut el_entry = vec![0.0f64; nt];
        let mut el_stream: Vec<u32> = vec![u32::MAX; nt];
        let el_min = fc.elephant_packets as u64;
        let mut users: Vec<Vec<u32>> = keys.iter().map(|k| vec![0; k.len()]).collect();
        if given.is_none() && el_min > 0 && block > 0 {
            for fk in flow_key.iter().enumerate() {
                for &k in fk.1 {
                    users[fk.0][k as usize] += 1;
                }
            }
        }
        for (si, &f) in sampled.iter().enumerate() {
            if given.is_some() {
                break;
            }
            el_stream.iter_mut().for_each(|x| *x = u32::MAX);
            let n = packets[f as usize].max(1);
            let gap = fd_ps[f as usize] / n as f64;
            if el_min > 0 && block > 0 && packets[f as usize] >= el_min {
                // Its packets before the end, about: one growth of the
                // stream's times instead of a dozen.
                let expect = ((end_ps - starts[f as usize]) / gap).clamp(0.0, n as f64) as usize + 1;
                for t in 0..nt {
                    let k = flow_key[t][si];
                    if users[t][k as usize] == 1 && info[t][k as usize].slot != u16::MAX {
                        el_stream[t] = el.times.len() as u32;
                        el.of_key[t][k as usize] = el_stream[t];
                        el.table.push(t as u16);
                        el.key.push(k);
                        el.flow.push(si as u32);
                        el.times.push(Vec::with_capacity(expect + expect / 8));
                    }
                }
            }
            let mut t = starts[f as usize];
            // A large flow at the one table of a CFG without edges: only
            // its times (the same draws as the loop below, without its
            // per-packet branches).
            if let Some(x) = single.filter(|&x| !self.cfg.has_out(x) && el_stream[x as usize] != u32::MAX) {
                let ts = &mut el.times[el_stream[x as usize] as usize];
                let before = ts.len();
                for i in 0..n {
                    let Some(c) = arrival(&mut rng, &mut t, i, gap, &clock, until) else { break };
                    ts.push(c);
                }
                // Whole counts: the sums of ones the loop below makes.
                let k = ts.len() - before;
                packets_sampled += k as u64;
                el_entry[x as usize] += k as f64;
                continue;
            }
            for i in 0..n {
                let Some(c) = arrival(&mut rng, &mut t, i, gap, &clock, until) else { break };
                packets_sampled += 1;
                let mut tb = match single {
                    Some(x) => x,
                    None => self.cfg.entry(rng.gen()),
                };
                let mut hop = 0;
                loop {
                    match el_stream[tb as usize] {
                        u32::MAX => refs.push(Ref { c: c + hop * hop_gap, table: tb, key: flow_key[tb as usize][si], flow: si as u32, hop: hop as u16, counted: false }),
                        e => {
                            el.times[e as usize].push(c + hop * hop_gap);
                            el_entry[tb as usize] += (hop == 0) as u8 as f64;
                        }
                    }
                    if !self.cfg.has_out(tb) {
                        break;
                    }
                    match self.cfg.next(tb, rng.gen()) {
                        Next::Table(d) => tb = d,
                        Next::Exit => break,
                    }
                    hop += 1;
                }
            }
        }
        for t in el.times.iter_mut() {
            t.sort_unstable();
        }
        el.next = vec![0; el.times.len()];
        el.bulk = vec![false; el.times.len()];
        drop(users);
        lap("packets");
        // (cycle, table, flow) packed in one integer: one comparison a step.
        refs.sort_unstable_by_key(|r| ((r.c as u128) << 64) | ((r.table as u128) << 32) | r.flow as u128);
        lap("sort");
        // 4. Donors: each flow not sampled borrows the misses of the last
        // sampled flow of about its size (half-octave bins of packets) that
        // started before it.
        let bin = half_octave;
        let nbins = bin(packets.iter().copied().max().unwrap_or(1)) + 1;
        let nsig = sig_of.iter().copied().max().map_or(1, |m| m as usize + 1);
        let mut last_in_bin: Vec<u32> = vec![u32::MAX; nbins * nsig];
        // Per sampled flow its clients' start offsets (cycles), in flow
        // order: `client_delta[client_from[d]..client_from[d + 1]]`.
        let mut pairs: Vec<(u32, Cycle)> = Vec::new();
        if rate < 1.0 {
            pairs.reserve(flows - sampled.len());
            for f in 0..flows {
                if packets[f] == 0 {
                    continue;
                }
                let (b, s0) = (bin(packets[f]), sig_of[f] as usize * nbins);
                let lib = &mut last_in_bin[s0..s0 + nbins];
                if is_sampled[f] != u32::MAX {
                    lib[b] = is_sampled[f];
                    continue;
                }
                // The nearest bin with a donor, the lower one first.
                let mut donor = lib[b];
                let mut d = 1;
                while donor == u32::MAX && d < nbins {
                    if d <= b {
                        donor = lib[b - d];
                    }
                    if donor == u32::MAX && b + d < nbins {
                        donor = lib[b + d];
                    }
                    d += 1;
                }
                if donor != u32::MAX {
                    let x = (starts[f] - starts[sampled[donor as usize] as usize]).max(0.0) / clock.ps();
                    pairs.push((donor, round_pos(x)));
                }
            }
        }
        let mut client_from = vec![0u32; sampled.len() + 1];
        for &(d, _) in &pairs {
            client_from[d as usize + 1] += 1;
        }
        for i in 0..sampled.len() {
            client_from[i + 1] += client_from[i];
        }
        let mut client_delta: Vec<Cycle> = vec![0; pairs.len()];
        {
            let mut at = client_from.clone();
            for &(d, delta) in &pairs {
                client_delta[at[d as usize] as usize] = delta;
                at[d as usize] += 1;
            }
        }
        drop(pairs);
        lap("donors");
        // 5. The windows of the miss path: every `period` cycles from a
        // random offset, `span` cycles of misses, the middle measured.
        let ns = |x: f64| ((x / cyc_ns).round() as Cycle).max(1);
        let (warm, meas, tail) = (ns(fc.warm_ns), ns(fc.measure_ns), ns(fc.tail_ns));
        let span = warm + meas + tail;
        // At most `max_windows` windows: a long run samples a smaller share.
        let period = ((span as f64 / fc.elu_share.clamp(1e-6, 1.0)).round() as Cycle)
            .max(span)
            .max(until / fc.max_windows.max(1) as Cycle);
        let offset = rng.gen_range(0..period);
        // The window of cycle `c` and its phase there; the last window
        // found is remembered (the loop asks about nearby cycles again and
        // again: a comparison instead of a division).
        let last_win = std::cell::Cell::new((u64::MAX, 0 as Cycle));
        let win_of = |c: Cycle| -> Option<(u64, Cycle)> {
            if c < offset {
                return None;
            }
            let (k, from) = last_win.get();
            if k != u64::MAX && c >= from && c - from < period {
                return Some((k, c - from));
            }
            let k = (c - offset) / period;
            let from = offset + k * period;
            last_win.set((k, from));
            Some((k, c - from))
        };
        let in_span = |c: Cycle| win_of(c).is_some_and(|(_, ph)| ph < span);
        let in_measure = |c: Cycle| win_of(c).is_some_and(|(_, ph)| ph >= warm && ph < warm + meas);
        // 6. The run: sampled references in time order, the windows beside.
        let cap = ((block as f64 * rate).round() as u32).max(1);
        let mut caches: Vec<MiniCaches> = (0..nt).map(|t| MiniCaches::new(keys[t].len(), self.tables[t].members.len(), if block == 0 { 0 } else { cap })).collect();
        let mut fills: BinaryHeap<Reverse<(Cycle, u16, u32)>> = BinaryHeap::new();
        let mut replicas: BinaryHeap<Reverse<(Cycle, u64)>> = BinaryHeap::new();
        let mut rep_store: Vec<Miss> = Vec::new();
        let mut rseq = 0u64;
        let mut window: Option<(u64, EluWindow<N>)> = None;
        // The last window, its buffers reused by the next one.
        let mut spare: Option<EluWindow<N>> = None;
        let mut done: Vec<(Miss, Cycle)> = Vec::new();
        let mut q_est: f64 = 0.0;
        let stat_win = self.window.max(1);
        let n_stat = (until / stat_win + 1) as usize;
        // Per table: per group; per period: measured miss latencies and counts; per statistics window.
        let mut gstats: Vec<Vec<GroupStats>> = vec![vec![GroupStats::default(); groups]; nt];
        let n_periods = (until / period + 2) as usize;
        let mut period_hist: Vec<Vec<WHist>> = vec![vec![WHist::default(); n_periods]; nt];
        let mut period_misses: Vec<Vec<f64>> = vec![vec![0.0; n_periods]; nt];
        let mut win_refs = vec![vec![0.0f64; n_stat]; nt];
        let mut win_misses = vec![vec![0.0f64; n_stat]; nt];
        let mut win_bytes = vec![vec![0.0f64; n_stat]; nt];
        let mut sojourn_acc: Vec<(f64, f64)> = vec![(0.0, 0.0); nt];
        let mut window_misses: Vec<(u16, Cycle, Cycle, bool)> = Vec::new();
        let mut measure_refs = vec![0.0f64; nt];
        // Per table: sampled references that are their PHV's first table
        // (where an overloaded run drops).
        let mut entry_refs = vec![0.0f64; nt];
        let mut miss_model: Vec<WHist> = vec![WHist::default(); nt];
        // Per window: how long after its measured part its last measured
        // miss was answered (the ELU's backlog).
        let mut lags: Vec<Cycle> = Vec::new();
        // Per window: its lag, and the misses the ELU answered in its
        // measured part and those sent to it there (its service rate
        // against its load, for an overloaded run).
        let mut served: Vec<(Option<Cycle>, f64, f64)> = Vec::new();
        let (mut elu_windows, mut measured) = (0u64, 0u64);
        let w = 1.0 / rate;
        // Per table, per sampled flow: its misses (for the model-assisted
        // estimate of the misses, step 7).
        let mut flow_miss = vec![vec![0.0f64; sampled.len()]; nt];
        let period_ix = |c: Cycle| -> usize { win_of(c).map_or(0, |(k, _)| k as usize + 1) };
        let mut ri = 0;
        // The large flows' references, counted once; per ELU window, their
        // references in its measured part. Each stream's first reference
        // is its first event (by lookup cycle).
        let mut el_meas: Vec<Vec<f64>> = vec![vec![0.0; nt]; n_periods];
        let mut el_events: BinaryHeap<Reverse<(Cycle, u32)>> = BinaryHeap::new();
        for e in 0..el.times.len() {
            let (t, g) = (el.table[e] as usize, group_of[el.flow[e] as usize] as usize);
            gstats[t][g].refs += el.times[e].len() as f64;
            // Sorted times: the statistics window by stepping, not dividing.
            // Its ELU period too (`win_of`'s, stepped: k and its start).
            let (mut wi, mut wend) = (0usize, stat_win);
            let (mut k, mut from) = (0usize, offset);
            let wr = &mut win_refs[t];
            for &c in &el.times[e] {
                while c >= wend {
                    wi += 1;
                    wend += stat_win;
                }
                wr[wi.min(n_stat - 1)] += w;
                if c < offset {
                    continue;
                }
                while c - from >= period {
                    k += 1;
                    from += period;
                }
                let ph = c - from;
                if ph >= warm && ph < warm + meas {
                    el_meas[(k + 1).min(n_periods - 1)][t] += w;
                }
            }
            if let Some(&c) = el.times[e].first() {
                el_events.push(Reverse((c + vmu_lat, e as u32)));
            }
        }
        for t in 0..nt {
            entry_refs[t] += el_entry[t];
        }
        lap("large flows");
        let mut seq = 0u64;
        // The sojourn estimate's time within the loop (`steps_s`).
        let mut soj_s = 0.0f64;
        // The sojourn's misses of a table (one buffer for the run).
        let mut soj_ev: Vec<(Cycle, Cycle)> = Vec::new();
        let mut el_looked = 0u64;
        // Routed: the PHVs' next hops, by request cycle (sampled flow, hop).
        let mut later: BinaryHeap<Reverse<(Cycle, u32, u16)>> = BinaryHeap::new();
        macro_rules! next_hop {
            ($si:expr, $hop:expr, $c:expr) => {{
                let (si, h) = ($si as usize, $hop as usize + 1);
                if given.is_some() && h < flow_hops[si].len() && $c < until {
                    later.push(Reverse(($c, si as u32, h as u16)));
                }
            }};
        }
        let mut batch: Vec<Ref> = Vec::new();
        // The fills due at a step (one buffer for the run).
        let mut due: Vec<(Cycle, u16, u32)> = Vec::new();
        // An ELU window runs until its last miss is answered; its measured
        // misses feed the period histograms, the sojourn estimate and the
        // backlog (the same for a window that a later one ends and the last).
        macro_rules! finish_window {
            ($k:expr, $win:expr) => {{
                let (k, mut win) = ($k, $win);
                done.clear();
                win.run_to(Cycle::MAX - 2, &walkers, &mut done);
                measured += record(&done, &mut period_hist, &mut window_misses, &period_ix);
                for &(m, c) in &done {
                    if m.sampled {
                        next_hop!(m.flow, m.hop, c + 1);
                    }
                }
                let ms = offset + k * period + warm;
                if let Some(v) = el_meas.get(k as usize + 1) {
                    measure_refs.iter_mut().zip(v).for_each(|(a, b)| *a += b);
                }
                let t_s = std::time::Instant::now();
                window_sojourn(&window_misses, &mut sojourn_acc, hit_lat, ms - warm, ms, ms + meas, &measure_refs, &mut soj_ev);
                soj_s += t_s.elapsed().as_secs_f64();
                lags.extend(window_lag(&window_misses, ms + meas));
                served.push(window_served(&window_misses, ms, ms + meas));
                spare = Some(win);
            }};
        }
        loop {
            let next_ref = [refs.get(ri).map(|r| r.c), later.peek().map(|Reverse((c, _, _))| *c)].into_iter().flatten().min().map(|c| c + vmu_lat);
            let next_rep = replicas.peek().map(|Reverse((c, _))| *c);
            let next_el = el_events.peek().map(|Reverse((c, _))| *c);
            // The next point the loop must reach: a lookup (of a reference
            // or a large flow's event), or a replica to send.
            let Some(lk) = [next_ref, next_rep, next_el].into_iter().flatten().min() else { break };
            // An older window still draining when the next one starts
            // finishes alone first.
            if let Some((k, _)) = window.as_ref() {
                if in_span(lk) && win_of(lk).is_some_and(|(kk, _)| kk != *k) {
                    let (k, win) = window.take().unwrap();
                    finish_window!(k, win);
                    measure_refs.iter_mut().for_each(|x| *x = 0.0);
                }
            }
            // Open the window of `lk` if it is in one.
            if window.is_none() && in_span(lk) && lk < until {
                let (k, ph) = win_of(lk).unwrap();
                let win = match spare.take() {
                    Some(mut w) => {
                        w.reset(lk - ph);
                        w
                    }
                    None => EluWindow::new(&self.config, nt, lk - ph),
                };
                window = Some((k, win));
                elu_windows += 1;
                window_misses.clear();
            }
            // Replicas due by then go to the window.
            while let Some(Reverse((c, i))) = replicas.peek().copied() {
                if c > lk {
                    break;
                }
                replicas.pop();
                let m = rep_store[i as usize];
                if let Some((k, win)) = window.as_mut() {
                    if win_of(c).is_some_and(|(kk, ph)| kk == *k && ph < span) {
                        let (t, id) = (m.table as usize, m.key as usize);
                        win.send(m, keys[t][id]);
                    }
                }
            }
            // The window runs to `lk`; its answers fill the sampled keys'
            // caches (with the model's fills, in time order).
            done.clear();
            let mut closed = false;
            if let Some((k, win)) = window.as_mut() {
                win.run_to(lk, &walkers, &mut done);
                let end = offset + *k * period + span;
                if lk >= end && win.open_measured == 0 {
                    closed = true;
                }
            }
            due.clear();
            measured += record(&done, &mut period_hist, &mut window_misses, &period_ix);
            for &(m, c) in &done {
                if m.sampled {
                    // Its PHV's next hop: not before the lookups after `lk`.
                    next_hop!(m.flow, m.hop, (c + 1 + rsp).max((lk + 1).saturating_sub(vmu_lat)));
                    if m.measured {
                        let ki = info[m.table as usize][m.key as usize];
                        let lat = (c - m.issued) as f64;
                        q_est = 0.9 * q_est + 0.1 * (lat - (vmu_lat + ki.fill as Cycle) as f64).max(0.0);
                    }
                    due.push((c, m.table, m.key));
                }
            }
            while let Some(&Reverse((c, t, k))) = fills.peek() {
                if c > lk {
                    break;
                }
                fills.pop();
                due.push((c, t, k));
            }
            due.sort_unstable();
            for &(_, t, k) in &due {
                let ki = info[t as usize][k as usize];
                if ki.slot != u16::MAX {
                    let tu = t as usize;
                    seq += 1;
                    // A large flow's last reference before `lk`, if its
                    // hits were not looked up (`Elephants`).
                    let (elr, of) = (&el, &el.of_key[tu]);
                    let mut touched = |v: u32| -> Option<u128> {
                        let e = of[v as usize];
                        if e == u32::MAX || !elr.bulk[e as usize] {
                            return None;
                        }
                        let ts = &elr.times[e as usize][elr.next[e as usize]..];
                        let j = ts.partition_point(|&c| c + vmu_lat < lk);
                        (j > 0).then(|| stamp(ts[j - 1] + vmu_lat, u64::MAX))
                    };
                    let gone = caches[tu].fill(ki.slot as usize, k, stamp(lk, seq), &mut touched);
                    if let Some(v) = gone {
                        let e = el.of_key[tu][v as usize];
                        if e != u32::MAX && el.bulk[e as usize] {
                            // Its references before `lk` hit; the next one misses.
                            let e = e as usize;
                            let from = el.next[e];
                            let j = from + el.times[e][from..].partition_point(|&c| c + vmu_lat < lk);
                            el.bulk[e] = false;
                            el.next[e] = j;
                            if let Some(&c) = el.times[e].get(j) {
                                el_events.push(Reverse((c + vmu_lat, e as u32)));
                            }
                        }
                    }
                }
            }
            if closed {
                let (k, mut win) = window.take().unwrap();
                if given.is_some() {
                    // Routed: the tail's answers still fill the caches and
                    // release their PHVs to their next hops.
                    let mut rest = Vec::new();
                    win.run_to(Cycle::MAX - 2, &walkers, &mut rest);
                    for &(m, c) in &rest {
                        if m.sampled {
                            fills.push(Reverse((c, m.table, m.key)));
                            next_hop!(m.flow, m.hop, (c + 1 + rsp).max((lk + 1).saturating_sub(vmu_lat)));
                        }
                    }
                }
                let ms = offset + k * period + warm;
                if let Some(v) = el_meas.get(k as usize + 1) {
                    measure_refs.iter_mut().zip(v).for_each(|(a, b)| *a += b);
                }
                let t_s = std::time::Instant::now();
                window_sojourn(&window_misses, &mut sojourn_acc, hit_lat, ms - warm, ms, ms + meas, &measure_refs, &mut soj_ev);
                soj_s += t_s.elapsed().as_secs_f64();
                lags.extend(window_lag(&window_misses, ms + meas));
                served.push(window_served(&window_misses, ms, ms + meas));
                measure_refs.iter_mut().for_each(|x| *x = 0.0);
                spare = Some(win);
            }
            // The lookups at `lk`.
            batch.clear();
            while let Some(r) = refs.get(ri) {
                if r.c + vmu_lat != lk {
                    break;
                }
                batch.push(*r);
                ri += 1;
            }
            while let Some(&Reverse((c, si, h))) = later.peek() {
                if c + vmu_lat != lk {
                    break;
                }
                later.pop();
                let (tb, id) = flow_hops[si as usize][h as usize];
                batch.push(Ref { c, table: tb, key: id, flow: si, hop: h, counted: false });
            }
            let mut mixed = false;
            while let Some(&Reverse((c, e))) = el_events.peek() {
                if c != lk {
                    break;
                }
                el_events.pop();
                let e = e as usize;
                let rc = el.times[e][el.next[e]];
                batch.push(Ref { c: rc, table: el.table[e], key: el.key[e], flow: el.flow[e], hop: 0, counted: true });
                mixed = true;
                el_looked += 1;
            }
            if !later.is_empty() || given.is_some() || mixed {
                batch.sort_unstable_by_key(|r| (r.table, r.flow));
            }
            for r in batch.iter() {
                let ki = info[r.table as usize][r.key as usize];
                let t = r.table as usize;
                let g = group_of[r.flow as usize] as usize;
                let sw = (r.c / stat_win) as usize;
                if !r.counted {
                    gstats[t][g].refs += 1.0;
                    entry_refs[t] += (r.hop == 0) as u8 as f64;
                    win_refs[t][sw.min(n_stat - 1)] += w;
                    if in_measure(r.c) {
                        measure_refs[t] += w;
                    }
                }
                seq += 1;
                let hit = ki.slot != u16::MAX && caches[t].lookup(ki.slot as usize, r.key, stamp(lk, seq));
                if r.counted {
                    // A large flow's event: a hit starts its run of hits;
                    // after a miss, its next reference is the next event.
                    let e = el.of_key[t][r.key as usize] as usize;
                    el.next[e] += 1;
                    el.bulk[e] = hit;
                    if !hit {
                        if let Some(&c) = el.times[e].get(el.next[e]) {
                            el_events.push(Reverse((c + vmu_lat, e as u32)));
                        }
                    }
                }
                if hit {
                    next_hop!(r.flow, r.hop, r.c + hop_gap);
                    continue;
                }
                let bus_at = if ki.slot == u16::MAX { r.c } else { lk + tau };
                let m = Miss { at: bus_at, issued: r.c, table: r.table, key: r.key, pmu: ki.pmu, sampled: true, measured: in_measure(bus_at), flow: r.flow, hop: r.hop };
                gstats[t][g].misses += 1.0;
                flow_miss[t][r.flow as usize] += 1.0;
                gstats[t][g].bytes += ki.bytes as f64;
                win_misses[t][sw.min(n_stat - 1)] += w;
                win_bytes[t][sw.min(n_stat - 1)] += ki.bytes as f64 * w;
                period_misses[t][period_ix(r.c)] += w;
                let model_lat = round_pos((vmu_lat + rsp + ki.fill as Cycle) as f64 + q_est);
                gstats[t][g].lat.add(model_lat, 1.0);
                miss_model[t].add(model_lat, 1.0);
                match window.as_mut() {
                    Some((k, win)) if win_of(bus_at).is_some_and(|(kk, ph)| kk == *k && ph < span) => {
                        win.send(m, keys[t][r.key as usize]);
                    }
                    _ => {
                        let fill_at = lk + ki.fill as Cycle + round_pos(q_est);
                        fills.push(Reverse((fill_at, r.table, r.key)));
                        next_hop!(r.flow, r.hop, fill_at + 1 + rsp);
                    }
                }
                // The donor's clients miss alike, shifted to their starts.
                let fi = r.flow as usize;
                for &d in &client_delta[client_from[fi] as usize..client_from[fi + 1] as usize] {
                    let at = bus_at + d;
                    if at < until && in_span(at) {
                        let m = Miss { at, issued: r.c + d, sampled: false, measured: in_measure(at), ..m };
                        replicas.push(Reverse((at, rseq)));
                        rep_store.push(m);
                        rseq += 1;
                    }
                }
            }
        }
        // The last window drains.
        if let Some((k, win)) = window.take() {
            finish_window!(k, win);
        }
        drop(spare);
        drop(walkers);
        self.walkers = handles.into_iter().map(Memo::give_back).collect();
        lap("loop");
        // 7. The estimates.
        let dur_ns = until as f64 * cyc_ns;
        let backlog_ns = if lags.is_empty() { 0.0 } else { lags.iter().sum::<Cycle>() as f64 / lags.len() as f64 * cyc_ns };
        let overloaded = backlog_ns > fc.backlog_limit_ns;
        // Overload: the share of the misses the ELU serves, from the windows
        // that fell behind (their answers over their misses; the others
        // serve all theirs).
        let limit = fc.backlog_limit_ns / cyc_ns;
        let share = {
            let (mut num, mut den) = (0.0, 0.0);
            for &(lag, answered, sent) in &served {
                den += sent;
                num += if lag.is_some_and(|l| l as f64 > limit) { answered.min(sent) } else { sent };
            }
            if overloaded && den > 0.0 { num / den } else { 1.0 }
        };
        let arrivals = expected_arrivals(&starts, &packets, &fd_ps, until, clock.ps(), stat_win);
        // Routed: each table's arrivals per statistics window, counted
        // (every arrival's route is known).
        let counted: Option<Vec<Vec<f64>>> = given.map(|(ts, fs)| {
            let mut v = vec![vec![0.0f64; arrivals.len()]; nt];
            for (&t, &f) in ts.iter().zip(fs) {
                let c = clock.ceil(t);
                if c >= until {
                    break;
                }
                let i = ((c / stat_win) as usize).min(arrivals.len() - 1);
                for (tb, x) in v.iter_mut().enumerate() {
                    x[i] += visits[f as usize * nt + tb] as f64;
                }
            }
            v
        });
        let mut tables = Vec::new();
        let mut windows = Vec::new();
        for t in 0..nt {
            let refs_s: f64 = gstats[t].iter().map(|g| g.refs).sum();
            // Share of the plan's packets that visit table t.
            let visit = if packets_sampled > 0 { refs_s / packets_sampled as f64 } else { 0.0 };
            let arr_t: Vec<f64> = match &counted {
                Some(v) => v[t].clone(),
                None => arrivals.iter().map(|a| a * visit).collect(),
            };
            let visit_of = |f: usize| if counted.is_some() { visits[f * nt + t] as f64 } else { visit };
            let arrived: f64 = arr_t.iter().sum::<f64>();
            // Misses, model-assisted (difference estimator, Särndal et al.,
            // 1992): every flow's expected misses under a simple model
            // (`flow_model_misses`: its first packet, and those arriving
            // while that miss is filled), plus the sampled flows' misses
            // beyond the model over R. The model explains most of the
            // spread between flows (their sizes), so far fewer flows give
            // the same error as the plain estimate (misses over R); it is
            // unbiased whatever the model.
            let ht = gstats[t].iter().map(|g| g.misses).sum::<f64>() * w;
            let no_pmu = self.tables[t].members.is_empty() || block == 0;
            let fill_ps = if info[t].is_empty() { 0.0 } else { info[t].iter().map(|k| k.fill as f64).sum::<f64>() / info[t].len() as f64 + q_est } * clock.ps();
            let end_ps = until as f64 * clock.ps();
            let model = |f: usize| flow_model_misses(starts[f], packets[f], fd_ps[f], end_ps, visit_of(f), fill_ps, no_pmu);
            let model_all: f64 = (0..flows).map(model).sum();
            for (si, &f) in sampled.iter().enumerate() {
                gstats[t][group_of[si] as usize].resid += flow_miss[t][si] - model(f as usize);
            }
            let resid: f64 = gstats[t].iter().map(|g| g.resid).sum();
            let misses = if ht > 0.0 { (model_all + resid * w).max(0.0) } else { 0.0 };
            // The other figures from the misses follow it: the sampled
            // misses' bytes and latencies per miss, scaled to its count.
            let kappa = if ht > 0.0 { misses / ht } else { 1.0 };
            period_misses[t].iter_mut().for_each(|x| *x *= kappa);
            win_misses[t].iter_mut().for_each(|x| *x *= kappa);
            win_bytes[t].iter_mut().for_each(|x| *x *= kappa);
            let lookups = arrived;
            let hit_rate = if lookups > 0.0 { (1.0 - misses / lookups).clamp(0.0, 1.0) } else { 0.0 };
            // Latency: hits at vmu_latency + τ_c; misses per period from
            // the window measured in it (or the model's if none).
            let mut lat = WHist::default();
            lat.add(hit_lat, (lookups - misses).max(0.0));
            let mut model_share = 0.0;
            for k in 0..n_periods {
                let m = period_misses[t][k];
                if m <= 0.0 {
                    continue;
                }
                let h = pick_period(&period_hist[t], k);
                if h.n > 0.0 {
                    lat.add_hist(h, m / h.n);
                } else {
                    model_share += m;
                }
            }
            if model_share > 0.0 && miss_model[t].n > 0.0 {
                // No window measured this table's misses: the model's
                // latencies of its sampled misses.
                lat.add_hist(&miss_model[t], model_share / miss_model[t].n);
            }
            let bytes = gstats[t].iter().map(|g| g.bytes).sum::<f64>() * w * kappa;
            let (soj_sum, soj_n) = sojourn_acc[t];
            let mean_lat_ns = lat.mean() * cyc_ns;
            let sojourn_ns = if soj_n > 0.0 { soj_sum / soj_n * cyc_ns } else { mean_lat_ns };
            let in_flight = if dur_ns > 0.0 { arrived / dur_ns * sojourn_ns } else { 0.0 };
            // Overload (`share` < 1): the ELU serves that share of the
            // misses, so the PMUs' producers stall and the entry tables'
            // input FIFOs drop the rest of the PHVs (a table's share of
            // first visits, `entry`); later tables see only the served
            // PHVs. The hit rate stays the offered stream's. In flight:
            // the FIFOs' few dozen PHVs, left out.
            let entry = if refs_s > 0.0 { entry_refs[t] / refs_s } else { 1.0 };
            let offered = arrived * (entry + (1.0 - entry) * share);
            let drops = arrived * entry * (1.0 - share);
            let processed = if share < 1.0 { arrived * share } else { (arrived - in_flight).max(0.0) };
            let (misses_s, bytes_s) = (misses * share, bytes * share);
            // Random groups: each group is a sample at rate R / G; its
            // figures alone, with the plan's arrivals, and their spread.
            let gf = groups as f64 / rate;
            let per_group = |f: &dyn Fn(&GroupStats) -> f64| -> f64 {
                let v: Vec<f64> = gstats[t].iter().map(f).collect();
                let m = v.iter().sum::<f64>() / v.len() as f64;
                (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1).max(1) as f64 / v.len() as f64).sqrt()
            };
            let z = 1.96 * (1.0 + rate).sqrt();
            let lk = lookups.max(1.0);
            // A group's misses (the model's plus its residuals alone), and
            // its misses' latency and bytes per miss.
            let mean_model = miss_model[t].mean();
            let m_g = |g: &GroupStats| (model_all + g.resid * gf).max(0.0);
            let lat_g = |g: &GroupStats| if g.lat.n > 0.0 { g.lat.sum / g.lat.n } else { mean_model };
            let per_miss = if ht > 0.0 { bytes / misses } else { 0.0 };
            let se_hit = per_group(&|g| m_g(g) / lk);
            let se_lat = per_group(&|g| ((lk - m_g(g)).max(0.0) * hit_lat as f64 + m_g(g) * lat_g(g)) / lk * cyc_ns);
            let se_p99 = per_group(&|g| {
                let mut h = WHist::default();
                h.add(hit_lat, (lk - m_g(g)).max(0.0));
                if g.lat.n > 0.0 {
                    h.add_hist(&g.lat, m_g(g) / g.lat.n);
                }
                h.quantile(0.99) * cyc_ns
            });
            let se_bytes = per_group(&|g| m_g(g) * if g.misses > 0.0 { g.bytes / g.misses } else { per_miss });
            let p99 = lat.quantile(0.99) * cyc_ns;
            let poisson = arrived.max(1.0).sqrt();
            let floor_rel = |x: f64, r: f64| x.abs() * r;
            // Overload: how far the served share is from the exact
            // engine's (validation suite, docs/fast-mode.md), relative.
            let ov = if share < 1.0 { OVERLOAD_REL } else { 0.0 };
            let served_half = |x: f64, floor: f64| x.abs() * (floor + ov);
            tables.push(FastTable {
                name: self.tables[t].name.clone(),
                hit_rate: Estimate::new(hit_rate, z * se_hit + 0.002 + ov * (1.0 - hit_rate) * 0.5),
                mean_latency_ns: Estimate::new(mean_lat_ns, z * se_lat + floor_rel(mean_lat_ns, 0.03)),
                mean_sojourn_ns: Estimate::new(sojourn_ns, z * se_lat * (sojourn_ns / mean_lat_ns.max(1e-9)) + floor_rel(sojourn_ns, 0.15)),
                p99_latency_ns: Estimate::new(p99, z * se_p99 + floor_rel(p99, 0.125)),
                hbm_gbps: Estimate::new(bytes_s / dur_ns, z * se_bytes * share / dur_ns + served_half(bytes_s / dur_ns, 0.02)),
                offered_mpps: Estimate::new(offered / dur_ns * 1e3, z * poisson / dur_ns * 1e3 + served_half(offered / dur_ns * 1e3, 0.01)),
                throughput_mpps: Estimate::new(processed / dur_ns * 1e3, z * poisson / dur_ns * 1e3 + served_half(processed / dur_ns * 1e3, 0.01)),
                keys: Estimate::new(processed, z * poisson + served_half(processed, 0.01)),
                drops: Estimate::new(drops, served_half(arrived * entry * share, 0.0)),
                hits: Estimate::new((lookups - misses) * share, (z * se_hit * lookups + 0.002 * lookups) * share + served_half((lookups - misses) * share, 0.0)),
                misses: Estimate::new(misses_s, (z * se_hit * lookups + 0.002 * lookups) * share + served_half(misses_s, 0.0)),
                quantiles_ns: QUANTILES.iter().map(|&q| lat.quantile(q) * cyc_ns).collect(),
            });
            for (i, &a) in arr_t.iter().enumerate() {
                windows.push(FastWindow {
                    end_ns: ((i as Cycle + 1) * stat_win).min(until) as f64 * cyc_ns,
                    table: t as u16,
                    arrived: a * (entry + (1.0 - entry) * share),
                    processed: a * share,
                    hits: (a - win_misses[t][i]).max(0.0) * share,
                    misses: win_misses[t][i] * share,
                    hbm_bytes: win_bytes[t][i] * share,
                    pmus: self.tables[t].members.len() as u32,
                });
            }
        }
        lap("estimates");
        steps_s.push(("sojourn (in loop)", soj_s));
        Ok(FastReport {
            tables,
            flows: flows as u64,
            sampled_flows: sampled.len() as u64,
            rate,
            sampled_refs: refs.len() as u64 + el_looked,
            elu_windows,
            measured_misses: measured,
            backlog_ns,
            overloaded,
            served_share: share,
            windows,
            steps_s,
        })
    }

}

/// Packet `i`'s cycle in a flow's stream: its time `t` moved on by an
/// exponential gap after the first packet; None at or past `until`. The
/// one draw per packet both of the packet loops make (the same stream).
#[inline(always)]
fn arrival(rng: &mut Pcg64, t: &mut f64, i: u64, gap: f64, clock: &crate::hw::PsClock, until: Cycle) -> Option<Cycle> {
    if i > 0 {
        let e: f64 = rng.sample(Exp1);
        *t += e * gap;
    }
    let c = clock.ceil(*t as u64);
    (c < until).then_some(c)
}

/// `floor(2 log2 n)` (n at least 1), in integers: the bit length of n²
/// less one (the half-octave bin of a flow of n packets).
#[inline]
fn half_octave(n: u64) -> usize {
    let n = n.max(1) as u128;
    (127 - (n * n).leading_zeros()) as usize
}

/// `x.round() as Cycle` for x ≥ 0 without a call to libm (`f64::round`
/// is one on the baseline x86-64 target): `x - trunc(x)` is exact.
#[inline]
fn round_pos(x: f64) -> Cycle {
    let i = x as Cycle;
    if x - i as f64 >= 0.5 { i.saturating_add(1) } else { i }
}

/// A flow's expected misses at a table under a simple model (the control
/// variate of the misses' estimate): its packets before `end_ps` (the first
/// at `start_ps`, the others at `packets / fd_ps`), a share `visit` of them
/// at the table; each flow misses its first packet and those arriving while
/// that miss is filled (`fill_ps`), or every packet at a table without PMUs.
fn flow_model_misses(start_ps: f64, packets: u64, fd_ps: f64, end_ps: f64, visit: f64, fill_ps: f64, all: bool) -> f64 {
    if start_ps >= end_ps {
        return 0.0;
    }
    let n = packets.max(1) as f64;
    let rate = n / fd_ps.max(1e-9);
    let later = (n - 1.0).min(rate * (end_ps - start_ps)).max(0.0);
    if all {
        return (1.0 + later) * visit;
    }
    (1.0 + (rate * visit * fill_ps).min(later)) * visit.min(1.0)
}

/// Records a window's answered misses: measured ones in their period's
/// latency histogram; every one, with whether it was measured, for the
/// sojourn. Returns how many were measured.
fn record(
    done: &[(Miss, Cycle)],
    hists: &mut [Vec<WHist>],
    misses: &mut Vec<(u16, Cycle, Cycle, bool)>,
    period_ix: &dyn Fn(Cycle) -> usize,
) -> u64 {
    let mut n = 0;
    for &(m, c) in done {
        // Answered at its VMU a cycle after the ELU's reply.
        let c = c + RSP_DELAY;
        if m.measured {
            hists[m.table as usize][period_ix(m.issued)].add(c - m.issued, 1.0);
            n += 1;
        }
        misses.push((m.table, m.issued, c, m.measured));
    }
    n
}

/// Mean sojourn of each table's PHVs arriving in a window's measured part
/// `[from, to]`, given the window's misses (sent, answered) from its start
/// `start`: PHVs arrive as a Poisson stream at the table's rate (`weight[t]`
/// PHVs over the measured part) and leave in order, one a cycle at most, no
/// earlier than their own answer (`hit` cycles after they arrive) nor than
/// the answer of every miss sent before them (the VMU's in-order release):
/// `r_i = max(d_i, r_{i-1} + 1)`, `d_i = max(a_i + hit, b(a_i))`. Adds
/// (PHVs × mean sojourn, PHVs) to `acc`.
///
/// In closed form, the expectation over the arrivals rather than a draw per
/// PHV: each cycle `a` brings λ PHVs on average, ready at `d(a)`, a step
/// function of `a` with a piece per miss that raises `b`. The PHVs with one
/// `d` (those a miss holds, or one cycle's) leave one a cycle after the
/// backlog `U` left by earlier ones: N of them wait `N·U + N(N-1)/2` cycles
/// beyond `d` (Poisson N: `μU + μ²/2`), and `U` falls by one a cycle. `U`
/// is carried as its mean (a fluid backlog), each stretch of unheld cycles
/// summed as an arithmetic series: O(misses), not O(PHVs). The draws'
/// mean agrees within a few percent (`tests::sojourn_closed_form_is_the_draws_mean`).
fn window_sojourn(
    misses: &[(u16, Cycle, Cycle, bool)],
    acc: &mut [(f64, f64)],
    hit: Cycle,
    start: Cycle,
    from: Cycle,
    to: Cycle,
    weight: &[f64],
    ev: &mut Vec<(Cycle, Cycle)>,
) {
    for (t, a) in acc.iter_mut().enumerate() {
        if weight[t] <= 0.0 || to <= from {
            continue;
        }
        let lambda = weight[t] / (to - from) as f64; // PHVs per cycle
        ev.clear();
        ev.extend(misses.iter().filter(|m| m.0 as usize == t).map(|m| (m.1, m.2)));
        ev.sort_unstable();
        let mut q = Sojourn { lambda, from, wait: 0.0, backlog: 0.0, next_d: 0 };
        // Arrival cycles: start + 1 ..= to (a = ceil(x), start < x < to).
        let (mut p, end) = (start + 1, to + 1);
        let (mut i, mut b) = (0, 0 as Cycle);
        while p < end {
            while i < ev.len() && ev[i].0 <= p {
                b = b.max(ev[i].1);
                i += 1;
            }
            // The piece ends where a miss raises b.
            while i < ev.len() && ev[i].1 <= b {
                i += 1;
            }
            let qe = ev.get(i).map_or(end, |e| e.0.min(end));
            // Held (d = b) while b - a >= hit, then d = a + hit.
            let split = (b.saturating_sub(hit) + 1).clamp(p, qe);
            if split > p {
                q.held(p, split, b);
            }
            if qe > split {
                q.free(split, qe, hit);
            }
            p = qe;
        }
        let n = (end - from) as f64 * lambda;
        a.0 += q.wait / n * weight[t];
        a.1 += weight[t];
    }
}

/// [`window_sojourn`]'s running sums: the expected sojourn summed over the
/// measured PHVs (`wait`), and the mean backlog at cycle `next_d`.
struct Sojourn {
    lambda: f64,
    from: Cycle,
    wait: f64,
    backlog: f64,
    next_d: Cycle,
}

impl Sojourn {
    /// The backlog at `d` (after the cycles since the last PHVs' `d`).
    fn backlog_at(&self, d: Cycle) -> f64 {
        (self.backlog - d.saturating_sub(self.next_d) as f64).max(0.0)
    }

    /// Cycles `[p, q)` whose PHVs are all ready at `d` (a miss holds them).
    fn held(&mut self, p: Cycle, q: Cycle, d: Cycle) {
        let u = self.backlog_at(d);
        let l = self.lambda;
        let c0 = p.max(self.from).min(q);
        let (mu_before, mu) = ((c0 - p) as f64 * l, (q - c0) as f64 * l);
        // Σ (d - a) over the measured cycles a in [c0, q).
        let n = (q - c0) as f64;
        let base = n * d as f64 - (c0 + q - 1) as f64 * n / 2.0;
        self.wait += l * base + mu * (u + mu_before) + mu * mu / 2.0;
        self.backlog = (u + mu_before + mu - 1.0).max(0.0);
        self.next_d = d + 1;
    }

    /// Cycles `[p, q)` whose PHVs are ready `hit` cycles after they arrive.
    fn free(&mut self, p: Cycle, q: Cycle, hit: Cycle) {
        let u0 = self.backlog_at(p + hit);
        let l = self.lambda;
        let m = q - p;
        // The backlog at the k-th cycle: u0 - k(1 - λ), held at 0 from
        // where it reaches it when λ < 1.
        let c = 1.0 - l;
        let k0 = self.from.saturating_sub(p).min(m);
        let k1 = if c > 0.0 { m.min((u0 / c).ceil() as Cycle) } else { m };
        let backlog_sum = if k1 > k0 {
            let n = (k1 - k0) as f64;
            n * u0 - c * (k0 + k1 - 1) as f64 * n / 2.0
        } else {
            0.0
        };
        let n = (m - k0) as f64;
        self.wait += l * (n * hit as f64 + backlog_sum) + n * l * l / 2.0;
        self.backlog = (u0 - m as f64 * c).max(0.0);
        self.next_d = q + hit;
    }
}

/// How long after `end` the last measured miss of a window was answered
/// (none: the window measured no miss).
fn window_lag(misses: &[(u16, Cycle, Cycle, bool)], end: Cycle) -> Option<Cycle> {
    misses.iter().filter(|m| m.3).map(|m| m.2.saturating_sub(end)).max()
}

/// A window's lag (as [`window_lag`]), the misses answered within its
/// measured part `[from, to)` and those sent to the ELU there.
fn window_served(misses: &[(u16, Cycle, Cycle, bool)], from: Cycle, to: Cycle) -> (Option<Cycle>, f64, f64) {
    let answered = misses.iter().filter(|m| m.2 >= from && m.2 < to).count() as f64;
    let sent = misses.iter().filter(|m| m.3).count() as f64;
    (window_lag(misses, to), answered, sent)
}

/// The measured latencies of period `k`, or of the nearest period with some.
fn pick_period(hists: &[WHist], k: usize) -> &WHist {
    for d in 0..hists.len() {
        for j in [k.checked_sub(d), k.checked_add(d)].into_iter().flatten() {
            if let Some(h) = hists.get(j) {
                if h.n > 0.0 {
                    return h;
                }
            }
        }
    }
    &hists[k.min(hists.len() - 1)]
}

/// Expected packet arrivals per statistics window (`win` cycles) before
/// `until`: each flow sends its first packet at its start, then at its rate
/// (`packets / flow duration`) until it has sent them all.
fn expected_arrivals(starts: &[f64], packets: &[u64], fd_ps: &FlowDuration, until: Cycle, cycle_ps: f64, win: Cycle) -> Vec<f64> {
    let n = until.div_ceil(win).max(1) as usize;
    let w_ps = win as f64 * cycle_ps;
    let end_ps = until as f64 * cycle_ps;
    let bound = |i: usize| (((i as Cycle + 1) * win).min(until)) as f64 * cycle_ps;
    let mut slope = vec![0.0f64; n + 1];
    let mut part = vec![0.0f64; n];
    let mut step = |at: f64, rate: f64| {
        // From `at` on, `rate` packets per ps more.
        if at >= end_ps {
            return;
        }
        let at = at.max(0.0);
        let i = ((at / w_ps) as usize).min(n - 1);
        part[i] += rate * (bound(i) - at);
        slope[i + 1] += rate;
    };
    let mut first = vec![0.0f64; n];
    for (f, (&s, &p)) in starts.iter().zip(packets).enumerate() {
        let fd_ps = fd_ps[f];
        if s >= end_ps {
            continue;
        }
        first[((s.max(0.0) / w_ps) as usize).min(n - 1)] += 1.0;
        if p > 1 {
            let rate = p as f64 / fd_ps;
            step(s, rate);
            step(s + (p - 1) as f64 / rate, -rate);
        }
    }
    let mut out = vec![0.0; n];
    let mut r = 0.0;
    for i in 0..n {
        r += slope[i];
        out[i] = r * (bound(i) - i as f64 * w_ps) + part[i] + first[i];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The integer half-octave bin and rounding are the float ones.
    #[test]
    fn half_octave_and_round_pos_are_the_float_ones() {
        let bin = |n: u64| (2.0 * (n.max(1) as f64).log2()).floor() as usize;
        for n in (0..3_000_000u64).chain((0..40).flat_map(|k| [(1u64 << k) - 1, 1 << k, (1 << k) + 1])) {
            assert_eq!(half_octave(n), bin(n), "{n}");
        }
        let mut x = 0.0f64;
        while x < 1e7 {
            for y in [x, x + 0.5, x + 0.49999999999999994, x + 0.5000000000000001, x + 0.25, x + 0.75] {
                assert_eq!(round_pos(y), y.round() as Cycle, "{y}");
            }
            x = x * 1.37 + 1.0;
        }
    }

    /// The sojourn as a draw per PHV (`window_sojourn`'s model simulated):
    /// its mean over many seeds is what the closed form gives.
    fn drawn_sojourn(ev: &[(Cycle, Cycle)], hit: Cycle, start: Cycle, from: Cycle, to: Cycle, lambda: f64, rng: &mut Pcg64) -> (u64, u64) {
        let (mut b, mut i, mut r) = (0 as Cycle, 0, 0 as Cycle);
        let (mut sum, mut n) = (0u64, 0u64);
        let mut x = start as f64;
        loop {
            let e: f64 = rng.sample(Exp1);
            x += e / lambda;
            if x >= to as f64 {
                break;
            }
            let a = x.ceil() as Cycle;
            while i < ev.len() && ev[i].0 <= a {
                b = b.max(ev[i].1);
                i += 1;
            }
            r = (a + hit).max(b).max(r + 1);
            if a >= from {
                sum += r - a;
                n += 1;
            }
        }
        (sum, n)
    }

    #[test]
    fn sojourn_closed_form_is_the_draws_mean() {
        let mut rng = Pcg64::seed_from_u64(7);
        let (start, from, to, hit) = (1_000, 2_000, 4_000, 5);
        // Light to heavy loads, sparse to dense misses (fills of 80-400 cycles).
        for (lambda, gap, tol) in [(0.02, 40.0, 0.01), (0.13, 25.0, 0.01), (0.13, 150.0, 0.01), (0.5, 60.0, 0.01), (0.9, 200.0, 0.02)] {
            let mut misses = Vec::new();
            let mut s = start as f64;
            while s < 5_000.0 {
                s += rng.sample::<f64, _>(Exp1) * gap;
                let fill = 80 + rng.gen_range(0..320);
                misses.push((0u16, s as Cycle, s as Cycle + fill, true));
            }
            let weight = [lambda * (to - from) as f64];
            let mut acc = [(0.0, 0.0)];
            window_sojourn(&misses, &mut acc, hit, start, from, to, &weight, &mut Vec::new());
            let closed = acc[0].0 / acc[0].1;
            let mut ev: Vec<(Cycle, Cycle)> = misses.iter().map(|m| (m.1, m.2)).collect();
            ev.sort_unstable();
            let (mut sum, mut n) = (0u64, 0u64);
            for _ in 0..400 {
                let (s, k) = drawn_sojourn(&ev, hit, start, from, to, lambda, &mut rng);
                sum += s;
                n += k;
            }
            let drawn = sum as f64 / n as f64;
            assert!((closed - drawn).abs() <= tol * drawn, "λ {lambda}, misses every {gap}: closed form {closed}, draws {drawn}");
            eprintln!("λ {lambda} gap {gap}: closed {closed:.3} drawn {drawn:.3}");
        }
    }

    /// The expected arrivals add up to what the plan sends before the end:
    /// flows that end before it send all their packets.
    #[test]
    fn expected_arrivals_count_whole_flows_and_cut_the_last() {
        let starts = vec![0.0, 1_000.0, 50_000.0];
        let packets = vec![1, 11, 5];
        // 10 ns flows: flow 1 sends its 11 packets from 1 ns to 10.09 ns.
        let w = expected_arrivals(&starts, &packets, &FlowDuration::Same(10_000.0), 25, 4_000.0, 2);
        let total: f64 = w.iter().sum();
        // Before 100 ns: flows 0 and 1 whole (12); flow 2 starts at 50 ns,
        // sends its 4 later packets over 8 ns: all before 100 ns.
        assert!((total - 17.0).abs() < 1e-9, "{total} {w:?}");
        let cut = expected_arrivals(&starts, &packets, &FlowDuration::Same(10_000.0), 13, 4_000.0, 2);
        // Up to 52 ns: flow 2's first packet and 2 ns of its rate (0.5/ns).
        assert!((cut.iter().sum::<f64>() - (12.0 + 1.0 + 1.0)).abs() < 1e-9, "{cut:?}");
    }
}

/// Counting a large flow's hits instead of looking each up (`Elephants`)
/// keeps the fast mode's expectation: over fast seeds, the mean hit rate
/// and mean latency with `elephant_packets` at its default and at 0 (every
/// reference drawn and looked up) agree within 4 standard errors of their
/// difference, on the validation suite's two points nearest their bounds.
#[cfg(test)]
mod elephant_tests {
    use super::*;
    use crate::sim::Config;

    /// The built-in scenario (`synapse run`'s) with `traffic.flows`,
    /// `traffic.mean_pkt_bytes` and `pmus.count` set.
    fn scenario(flows: u64, pkt_bytes: f64, pmus: u64) -> Config {
        let mut j: serde_json::Value = serde_json::from_str(include_str!("../../../benches/scenarios/default_1ms.json")).unwrap();
        j["traffic"]["flows"] = flows.into();
        j["traffic"]["mean_pkt_bytes"] = pkt_bytes.into();
        j["pmus"]["count"] = pmus.into();
        // The table's PMUs: all of them (as `synapse run` lists them).
        j["tables"][0]["pmus"] = (0..pmus).collect::<Vec<u64>>().into();
        serde_json::from_value(j).unwrap()
    }

    /// Per seed: (hit rate, mean latency ns).
    fn runs(c: &Config, elephant_packets: u32, seeds: u64) -> Vec<(f64, f64)> {
        (0..seeds)
            .map(|seed| {
                let fc = FastConfig { seed, elephant_packets, ..FastConfig::default() };
                let r = Simulator::new(c.clone()).unwrap().run_fast(&fc).unwrap();
                (r.tables[0].hit_rate.value, r.tables[0].mean_latency_ns.value)
            })
            .collect()
    }

    fn mean_se(x: impl Iterator<Item = f64>) -> (f64, f64) {
        let v: Vec<f64> = x.collect();
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        (m, (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0) / n).sqrt())
    }

    #[test]
    fn counted_large_flows_agree_with_every_reference_looked_up() {
        assert!(FastConfig::default().elephant_packets > 0);
        // load2x, and the overloaded flows12k-pmus2 (tests/test_fast_mode.py).
        for c in [scenario(2400, 800.0, 8), scenario(12000, 8000.0, 2)] {
            let counted = runs(&c, FastConfig::default().elephant_packets, 16);
            let every = runs(&c, 0, 16);
            for (name, f) in [("hit rate", (|x: &(f64, f64)| x.0) as fn(&(f64, f64)) -> f64), ("mean latency", |x| x.1)] {
                let (ma, sa) = mean_se(counted.iter().map(f));
                let (mb, sb) = mean_se(every.iter().map(f));
                let se = (sa * sa + sb * sb).sqrt();
                assert!((ma - mb).abs() <= 4.0 * se.max(1e-12), "{name}: counted {ma} ± {sa}, every reference {mb} ± {sb}");
            }
        }
    }
}

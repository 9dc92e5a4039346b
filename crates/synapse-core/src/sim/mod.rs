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
//! 4. response network: each PMU hands the head of its Q_p to its VMU
//!    (as the ELU's reply of phase 2 to a table's direct key, it crosses a
//!    register at the VMU's port: the PHV is answered from the next cycle);
//! 5. PMU → ELU shared bus: one miss per cycle, round robin;
//! 6. ELU: registers a miss in the ORB, starts a lookup;
//! 7. per table (round robin for the interconnect): the action unit releases
//!    the oldest answered PHV to the next table or the exit, then the request
//!    producer sends the head of the input FIFO to its PMU if the PHV buffer
//!    had room at the start of the cycle (a release frees its slot for the
//!    next cycle: the room is a register, as in `synapse_vmu.v`);
//! 8. draining (transient) PMUs that are done become free or join their next
//!    table.
//!
//! When no queue holds work the clock jumps to the next memory completion or
//! arrival. Within a stepped cycle a PMU is ticked only from its wake cycle
//! on (`pmu_wake`: its cached [`Pmu::next_event`], reset whenever the
//! simulator hands it a request, a fill or takes a miss); earlier ticks would
//! change nothing. Results are bit-identical to ticking every PMU
//! (`cargo run --release -p synapse-core --example simgolden`).
//!
//! Fewer cycles need a step: a request to an idle PMU (hits delivered
//! ahead may still be in its pipeline) with no miss at the ELU, or none
//! whose reply can come before the request arrives (`Elu::quiet_until`),
//! is issued ahead ([`Pmu::accept`]); a run of answered PHVs behind a
//! released head leaves ahead, each counted at its own cycle, while nothing
//! can read the table's PHV buffer (`release_ahead`); a head waiting for
//! room in a full PHV buffer, a miss waiting in Q_m for the bus and an ELU
//! waiting on memory do not force a step (the skipped cycles' stalls are
//! added at the next step, and the clock stops at each window end). A miss
//! the bus brings to an ELU busy with older lookups is registered, and its
//! walk started, at the cycle it is sent instead of the next one
//! (`Elu::can_tick_ahead`), when no memory read completes then.
//!
//! Cycles that are not stepped cost little too: one that only brings
//! arrivals before the wake-up cycle runs just the fed tables' request
//! producers (`arrival_step`), and memory reads in the middle of a walk
//! are issued while the clock jumps, without a visit of the clock loop.
//!
//! Where things are: `build.rs` builds a simulator from a [`Config`];
//! `run.rs` is the clock (phase 1, idle jumps, window closing); `phases.rs`
//! is one stepped cycle (phases 2–8); `api.rs` is what the embedding reads
//! and changes between runs (counters, [`Simulator::assign`], summaries,
//! invariants). Hardware units live in `crate::hw`.

mod api;
mod build;
mod join;
pub mod config;
pub mod engine;
pub mod fast;
pub mod mrc;
mod phases;
mod record;
mod record_cluster;
mod routed;
mod run;
pub mod source;
pub mod stats;
mod updates;

pub use api::{ClassSummary, Drain, Invariants, QueueDepths, TableSummary};

pub use build::reuse_structures;
pub use config::Config;
pub use record::{PmuEvent, PmuRecording};
pub use record_cluster::ClusterLog;
pub use routed::{RouteChange, RouteStats, RoutedTable};
pub use updates::{parse_ops, Consistency, Invalidate, Op, Scheduled, UpdateStats, UpdatesConfig};

use crate::classify::{linear::Linear, Classifier, Match, MemoryWalk};
use crate::hw::elu::{Algo, Elu};
use crate::hw::fifo::Fifo;
use crate::hw::hbm::Hbm;
use crate::hw::interconnect::{Network, SharedBus};
use crate::hw::pmu::{MissRequest, Pmu, Request, Response, State};
use crate::hw::vmu::{Vmu, INVALID};
use crate::hw::Cycle;
use crate::pipeline::{Cfg, Next};
use crate::rules::{Key, RuleSet, MAX_FIELDS};
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

#[derive(Clone, Copy)]
enum Ev {
    /// An HBM read of the ORB entry completed.
    MemDone(u32),
}

impl Default for Ev {
    /// A filler for the event queue's empty slots (never read).
    fn default() -> Ev {
        Ev::MemDone(u32::MAX)
    }
}

struct Table<const N: usize> {
    name: String,
    vmu: Vmu,
    input: Fifo<Phv>,
    keys: Vec<Key<N>>,
    /// Per flow, the VMU lookup-table index of its key (hashed once).
    lut_index: Vec<u32>,
    oracle: Vec<Match>,
    /// PMUs on the VMU's ring.
    members: Vec<u16>,
    /// Routing decision of a head that could not move (next stage full).
    pending: Option<Next>,
    /// The action unit released a run of answered PHVs ahead (one per
    /// cycle, see `release`); it is busy until this cycle.
    release_free: Cycle,
    /// The input head waits for room in the full PHV buffer, which only a
    /// release (at a stepped cycle) makes: cycles from `stall_from` on are
    /// not stepped for it, and their stalls are added at the next step.
    blocked: bool,
    stall_from: Cycle,
    win: Counters,
    total: Counters,
    /// Per window: PHVs to table j (index j) or exit (last index).
    edges: Vec<u64>,
    hbm_seen: u64,
    reordered_seen: u64,
    /// PHVs released with the default action (no rule matched).
    defaults: u64,
}

/// The simulated system.
pub struct Simulator<const N: usize = MAX_FIELDS> {
    pub config: Config,
    /// The pipeline clock's period (ps), and conversions of times in ps.
    clock: crate::hw::PsClock,
    now: Cycle,
    tables: Vec<Table<N>>,
    walkers: Vec<Box<dyn MemoryWalk<N> + Send>>,
    pmus: Vec<Pmu<N>>,
    /// Per PMU, the earliest cycle at which its tick can change something
    /// ([`Pmu::next_event`]); `0` after any change from outside (request,
    /// ELU fill, miss taken, state change). A PMU is ticked only from this
    /// cycle on: every tick before it would be a no-op.
    pmu_wake: Vec<Cycle>,
    /// At most the least of `pmu_wake`: before it, phase 3 and the wake-up
    /// scan skip the PMUs altogether.
    pmu_min_wake: Cycle,
    /// Bit set of the PMUs whose `pmu_wake` is not `Cycle::MAX` (they hold
    /// work or were touched): phase 3 and the wake-up scan visit only these,
    /// in index order, instead of every PMU.
    pmu_active: Vec<u64>,
    /// Bit set of the PMUs with a miss in Q_m, waiting for the bus.
    pmu_qm: Vec<u64>,
    net: Network,
    bus: SharedBus,
    bus_rr: usize,
    /// Keys of tables without PMUs, sent by the VMU straight to the ELU.
    direct: VecDeque<MissRequest<N>>,
    elu: Elu<N>,
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
    /// Uncontended CAM hits are resolved as one event (`hit_ahead` in
    /// `phases.rs`); off only to test that against the stepped model.
    fast: bool,
    /// Cycles that bring only arrivals before the wake-up cycle run just
    /// the fed tables' request producers (`arrival_step` in `phases.rs`);
    /// off only to test that against full steps.
    lean_arrivals: bool,
    /// Some PMU may be transient.
    draining: bool,
    /// Phase 7 of this cycle moved a PHV into a table's input FIFO.
    fed: bool,
    /// The clock stopped at a cycle whose memory completions, already
    /// done, finished a lookup (`run.rs`): it must be stepped.
    lookup_done: bool,
    /// Some table is `blocked` (else there are no skipped stalls to count).
    any_blocked: bool,
    /// No table feeds another (no edges): a table's releases cannot change
    /// any other table's queues.
    isolated: bool,
    /// The end of the current [`Simulator::run_until`].
    until: Cycle,
    /// What the last stepped cycle returned: no queue can move before it
    /// unless an arrival comes or a lookup finishes (see `run.rs`).
    wake: Cycle,
    /// The part of `wake` that is not the PMUs' (`pmu_min_wake`): the
    /// tables', the ELU's and the bus's, as of the last non-busy step.
    other_wake: Cycle,
    /// Explicit per-PHV routes (`routed.rs`) instead of CFG probabilities.
    routes: Option<routed::Routes<N>>,
    /// Per table, the data plane's learned entries in force or requested,
    /// in the order of their positions after the table's built entries
    /// (`program::learn`, through `RouteSink::table_writes`).
    learned: Vec<Vec<u32>>,
    /// The rule sets the tables were built from (rule updates start there).
    sets: Vec<RuleSet<N>>,
    /// Rule updates (`updates.rs`); none until one is scheduled or requested.
    updates: Option<Box<updates::Updates<N>>>,
    /// The run was drained ([`Simulator::drain`]): no more arrivals.
    ended: bool,
    /// One PMU's inputs, recorded for the RTL co-simulation (`record.rs`).
    rec: Option<Box<PmuRecording<N>>>,
    /// With an `[attack]`: legitimate and attack PHVs counted apart.
    legit: Option<Box<stats::Classes>>,
    /// `defence.miss_rate_mpps`: the ELU's per-table miss-rate limit.
    limit: Option<crate::hw::ratelimit::MissLimit>,
    /// `defence.shed_backlog` and `defence.shed_all_backlog`: the ELU's
    /// shed gate at each PMU's Q_m head (0: off).
    shed_first: u32,
    shed_all: u32,
    /// Per table, PHVs dropped because their miss was shed.
    shed: Vec<u64>,
    /// Warm joins that copied entries (`vmu.join = "warm"`, `join.rs`),
    /// and the entries they copied.
    pub warm_joins: u64,
    pub warm_copied: u64,
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod attack_tests;
#[cfg(test)]
mod join_tests;

//! Rule updates while traffic flows: insert, modify and delete entries and
//! change a table's default action (the paper's §3 CRUD on a running VMT).
//!
//! **Requests** come from the scenario's `[[updates]]` schedule (operations
//! at a time, from a file or inline, or random churn at a rate) and from the
//! embedding in batches ([`Simulator::request_updates`]). Each table has one
//! **update engine** in the ELU: when idle it takes every pending request
//! as one batch and builds the next version of the table's structure:
//! - the decision tree is updated in place, incrementally (FACL; its
//!   `insert`/`delete`), charged `dtree_op_ns` per operation; so is the
//!   partitioned tree (tombstones and a delta, folded in now and then),
//!   charged `ptree_op_ns`;
//! - the trie (and the linear array) is built beside the old one and
//!   swapped (the replica swap t4p4s measures), charged the new structure's
//!   bytes at `build_gbps` plus `swap_ns`.
//!
//! At the **commit** (the swap) the new version is in force at the ELU and
//! the PMUs of the table drop the cached answers the batch made stale:
//! `exact` invalidates exactly the cached keys a changed entry covers (and,
//! for a default change, the keys answered by the old default), one CAM
//! cycle each; `flush` clears the whole CAM in one cycle; `none` keeps
//! them (a test hook: the versioned oracle must then see stale answers).
//! Lookups the ELU walked before the swap still answer their PHVs (their
//! lookup committed under the old version) but do not fill the CAM.
//!
//! **Answers are stable entry ids**, not positions: an entry keeps its id
//! while others are inserted above it; a modify gives the entry a new id
//! (new action data) and a default change a new default id. With no update
//! ever requested, ids equal positions and nothing here runs (the golden
//! outputs are unchanged).
//!
//! **Versioned oracle.** Per flow, the history of its correct answer (commit
//! cycle, id). A PHV released with an answer is checked against the answers
//! in force from its request to its release (its lookup committed in that
//! span): one of them is correct; an answer of an older version is a
//! `stale_answer`, anything else a `wrong_action`.

use super::*;
use crate::classify::{BuildConfig, Incremental, Structure};
use crate::rules::{FieldMatch, MatchKind, Rule};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

#[path = "xtable.rs"]
mod xtable;
pub use xtable::Consistency;
use xtable::{Old, Prog};

/// Ids of entries inserted while running start here, above any initial
/// position; defaults get ids from [`DEFAULT_ID`].
const FIRST_NEW_ID: u32 = 1 << 24;
pub(super) const DEFAULT_ID: u32 = 1 << 31;

/// What a committed update does to the PMUs' cached answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Invalidate {
    /// Exactly the cached keys a changed entry covers.
    #[default]
    Exact,
    /// The whole CAM of every PMU of the table.
    Flush,
    /// Nothing (a test hook: stale answers follow).
    None,
}

/// The `[update_engine]` table of a scenario: what an update costs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpdatesConfig {
    pub invalidate: Invalidate,
    /// Write bandwidth of a replica build (trie, linear array), GB/s.
    pub build_gbps: f64,
    /// Fixed cost of swapping a built replica in, ns.
    pub swap_ns: f64,
    /// An incremental decision-tree update, ns per operation.
    pub dtree_op_ns: f64,
    /// An incremental partitioned-tree update, ns per operation (a
    /// tombstone or a delta write, in place like the decision tree's); a
    /// batch that folds the pending updates in (a rebuild) is also charged
    /// the rebuilt tree's bytes at `build_gbps` plus `swap_ns`, as a
    /// replica.
    pub ptree_op_ns: f64,
    /// Most operations one build (batch) takes; the rest wait for the next.
    pub max_batch: u32,
    /// Per table (each table commits on its own) or per program (a PHV
    /// sees one version of every table: `xtable.rs`).
    pub consistency: Consistency,
}

impl UpdatesConfig {
    pub fn is_default(&self) -> bool {
        *self == UpdatesConfig::default()
    }
}

impl Default for UpdatesConfig {
    fn default() -> UpdatesConfig {
        UpdatesConfig {
            invalidate: Invalidate::Exact,
            build_gbps: 16.0,
            swap_ns: 1000.0,
            dtree_op_ns: 200.0,
            ptree_op_ns: 200.0,
            max_batch: 256,
            consistency: Consistency::Table,
        }
    }
}

/// One scheduled item: operations at `at_ns` (from `file`, one per line,
/// and/or `ops`), or random churn of `churn_per_s` operations per second
/// from `at_ns` to `until_ns` (0: the end of the run).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Scheduled {
    pub at_ns: f64,
    /// The table (empty: the first).
    pub table: String,
    pub file: Option<String>,
    pub ops: Vec<String>,
    pub churn_per_s: f64,
    pub until_ns: f64,
    pub seed: u64,
    /// One transaction over several tables: per table, its operations
    /// (committed as one program version in `program` consistency).
    pub transaction: BTreeMap<String, Vec<String>>,
    /// Churn whose every event is one transaction of one random operation
    /// on each of these tables (instead of `table`).
    pub churn_tables: Vec<String>,
}

impl Default for Scheduled {
    fn default() -> Scheduled {
        Scheduled {
            at_ns: 0.0,
            table: String::new(),
            file: None,
            ops: Vec::new(),
            churn_per_s: 0.0,
            until_ns: 0.0,
            seed: 1,
            transaction: BTreeMap::new(),
            churn_tables: Vec::new(),
        }
    }
}

/// One update of a table, positions in its current priority order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op<const N: usize> {
    /// Insert `rule` at position `pos` (later entries move down).
    Insert { pos: u32, rule: Rule<N> },
    /// Delete the entry at `pos`.
    Delete { pos: u32 },
    /// New action data for the entry at `pos` (a new id).
    Modify { pos: u32 },
    /// A new default action (the answer of keys no entry matches).
    Default,
}

fn parse_value(s: &str) -> Option<u32> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return u32::from_str_radix(h, 16).ok();
    }
    if s.contains('.') {
        let p: Vec<&str> = s.split('.').collect();
        if p.len() != 4 {
            return None;
        }
        let mut v = 0u32;
        for x in p {
            v = (v << 8) | x.parse::<u8>().ok()? as u32;
        }
        return Some(v);
    }
    s.parse().ok()
}

fn parse_field(tok: &str, bits: u8) -> Option<FieldMatch> {
    if tok == "*" {
        return Some(FieldMatch::ANY);
    }
    if let Some((a, b)) = tok.split_once("..") {
        let (lo, hi) = (parse_value(a)?, parse_value(b)?);
        return (lo <= hi).then(|| FieldMatch::range(lo, hi));
    }
    if let Some((v, m)) = tok.split_once("&&&") {
        return Some(FieldMatch::ternary(parse_value(v)?, parse_value(m)?));
    }
    if let Some((v, l)) = tok.split_once('/') {
        let l: u8 = l.parse().ok()?;
        let v = parse_value(v)?;
        return (l <= bits).then(|| FieldMatch::prefix(v, l, bits));
    }
    Some(FieldMatch::exact(parse_value(tok)?))
}

/// Parses update operations, one per line (`#` starts a comment):
/// `insert POS F1 F2 ...` (one field per schema field: `*`, `V`, `V/LEN`,
/// `LO..HI`, `V&&&MASK`; values decimal, `0x` hex or dotted quads),
/// `delete POS`, `modify POS`, `default`. Errors name `source:line`.
pub fn parse_ops<const N: usize>(
    text: &str,
    source: &str,
    first_line: usize,
    schema: &crate::rules::Schema,
) -> Result<Vec<Op<N>>, String> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = format!("{source}:{}", first_line + i);
        let toks: Vec<&str> = line.split_whitespace().collect();
        let pos = |t: Option<&&str>| -> Result<u32, String> {
            t.and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("{at}: expected a position (a number) after {:?}", toks[0]))
        };
        let op = match toks[0] {
            "insert" => {
                let p = pos(toks.get(1))?;
                let fields = &toks[2..];
                if fields.len() != schema.len() {
                    return Err(format!(
                        "{at}: expected {} fields after the position ({}), found {}",
                        schema.len(),
                        schema.fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(" "),
                        fields.len()
                    ));
                }
                let mut fm = Vec::new();
                for (tok, spec) in fields.iter().zip(&schema.fields) {
                    fm.push(parse_field(tok, spec.bits).ok_or_else(|| {
                        format!("{at}: field {}: expected *, V, V/LEN, LO..HI or V&&&MASK, found {tok:?}", spec.name)
                    })?);
                }
                Op::Insert { pos: p, rule: Rule::new(&fm, 0, 0) }
            }
            "delete" | "modify" if toks.len() == 2 => {
                let p = pos(toks.get(1))?;
                if toks[0] == "delete" {
                    Op::Delete { pos: p }
                } else {
                    Op::Modify { pos: p }
                }
            }
            "default" if toks.len() == 1 => Op::Default,
            _ => {
                return Err(format!(
                    "{at}: expected `insert POS FIELDS...`, `delete POS`, `modify POS` or `default`, found {line:?}"
                ))
            }
        };
        out.push(op);
    }
    Ok(out)
}

/// The ELU's structure of an updatable table.
enum Inner<const N: usize> {
    /// Updated in place (incremental insert / delete): dtree, ptree.
    InPlace(Box<dyn Incremental<N>>),
    /// Rebuilt beside the old one and swapped.
    Built(Box<dyn Structure<N>>),
}

/// What the ELU walks for an updatable table: the structure answers with
/// positions, mapped to the entries' stable ids.
struct Live<const N: usize> {
    inner: Inner<N>,
    ids: Vec<u32>,
    default: Match,
    /// Program consistency: the key word holding the PHV's version tag,
    /// the tag of this version, and the previous version kept for PHVs
    /// stamped before the flip (until they are all out).
    tagword: Option<usize>,
    tag: u32,
    old: Option<Box<Old<N>>>,
}

impl<const N: usize> Live<N> {
    #[inline]
    fn map(&self, m: Match) -> Match {
        match m {
            Some(p) => Some(self.ids[p as usize]),
            None => self.default,
        }
    }

    /// Walks the version the key's tag names (the key without its tag).
    fn answer(&self, key: &Key<N>, mut walk: impl FnMut(&Inner<N>, &Key<N>) -> Match) -> Match {
        let Some(w) = self.tagword else {
            return self.map(walk(&self.inner, key));
        };
        let mut k = *key;
        k.0[w] = 0;
        match &self.old {
            Some(o) if key.0[w] == o.tag => o.map(walk(&o.inner, &k)),
            _ => self.map(walk(&self.inner, &k)),
        }
    }
}

fn walk_inner<const N: usize>(
    i: &Inner<N>,
    key: &Key<N>,
    acc: Option<&mut Vec<crate::classify::MemAccess>>,
) -> Match {
    match (i, acc) {
        (Inner::InPlace(d), Some(a)) => d.walk(key, a),
        (Inner::Built(b), Some(a)) => b.walk(key, a),
        (Inner::InPlace(d), None) => d.classify(key),
        (Inner::Built(b), None) => b.classify(key),
    }
}

fn inner_bytes<const N: usize>(i: &Inner<N>) -> u64 {
    match i {
        Inner::InPlace(d) => d.memory_bytes(),
        Inner::Built(b) => b.memory_bytes(),
    }
}

/// The walker the simulator's ELU holds for an updatable table; the update
/// engine holds the same [`Live`] to swap versions.
struct LiveWalker<const N: usize>(Arc<Mutex<Live<N>>>);

impl<const N: usize> crate::classify::Classifier<N> for LiveWalker<N> {
    fn classify(&self, key: &Key<N>) -> Match {
        let l = self.0.lock().unwrap();
        l.answer(key, |i, k| walk_inner(i, k, None))
    }
}

impl<const N: usize> MemoryWalk<N> for LiveWalker<N> {
    fn walk(&self, key: &Key<N>, acc: &mut Vec<crate::classify::MemAccess>) -> Match {
        let l = self.0.lock().unwrap();
        l.answer(key, |i, k| walk_inner(i, k, Some(&mut *acc)))
    }
    fn memory_bytes(&self) -> u64 {
        inner_bytes(&self.0.lock().unwrap().inner)
    }
}

/// A batch being built: what commits at `done`.
struct Build<const N: usize> {
    done: Cycle,
    /// (request cycle, transaction, op) of the batch, in order.
    ops: Vec<(Cycle, u64, Op<N>)>,
    /// Per transaction of the batch, the flows whose answer it changed:
    /// (flow, transaction, new answer), for the program-version oracle.
    vchanges: Vec<(u32, u64, Match)>,
    /// Bytes of the replica built beside the structure in force.
    replica_bytes: u64,
    rules: Vec<Rule<N>>,
    ids: Vec<u32>,
    default: Match,
    /// A replica built beside the old structure (none: a structure
    /// updated in place at the commit).
    replica: Option<Box<dyn Structure<N>>>,
    /// Fields of every entry the batch inserts, deletes or modifies: the
    /// keys they cover may change answer.
    covers: Vec<Rule<N>>,
    default_changed: bool,
}

/// Update state of one table.
struct TableUpdates<const N: usize> {
    live: Arc<Mutex<Live<N>>>,
    /// The version in force: entries in priority order, their ids, the
    /// default answer.
    rules: Vec<Rule<N>>,
    ids: Vec<u32>,
    default: Match,
    schema: crate::rules::Schema,
    /// (request cycle, transaction, op), in transaction order.
    pending: VecDeque<(Cycle, u64, Op<N>)>,
    building: Option<Build<N>>,
    /// Per flow: (cycle from which it is correct, answer), oldest first.
    hist: Vec<Vec<(Cycle, Match)>>,
    /// Per flow: (program version from which it is correct, answer), oldest
    /// first; versions are transaction numbers (0: the initial rules).
    vhist: Vec<Vec<(u64, Match)>>,
    /// Program consistency: the version tag of the structure in force, and
    /// of the previous one while it is kept for PHVs stamped before the flip.
    tag: u32,
    old_tag: Option<u32>,
    /// Bytes of the previous structure while it is kept.
    old_bytes: u64,
    /// ELU replies with a smaller index were walked before the last swap.
    /// Recent swaps, oldest first: (ELU replies with a smaller index were
    /// walked before it, the entries it changed, the default it replaced
    /// if it changed the default). A reply walked before a swap must not
    /// cache a key the swap changed; dropped once every such reply is out.
    recent: VecDeque<(u64, Vec<Rule<N>>, Option<Match>)>,
    next_id: u32,
    next_default: u32,
    /// The ELU's algorithm for this table.
    algo: Algo,
    /// Entries once every queued operation is applied (churn positions).
    expected: i64,
    /// The last transaction committed here (0: the initial rules).
    txn_in_force: u64,
}

struct Churn {
    /// One random operation on each per event (one transaction).
    tables: Vec<u16>,
    next: f64,
    gap: f64,
    until: Cycle,
    rng: Pcg64,
}

/// Counters of the updates, for the summary.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UpdateStats {
    /// Operations requested (churn counted when due), committed, refused
    /// (a position out of range).
    pub requested: u64,
    pub committed: u64,
    pub rejected: u64,
    /// Batches (replica swaps / in-place updates) committed.
    pub batches: u64,
    /// Batches of a partitioned tree that folded its pending updates in
    /// (charged as a replica write).
    pub fold_ins: u64,
    /// Cached keys invalidated (exact) or flushed.
    pub invalidated: u64,
    /// ELU replies not cached because their walk preceded a swap.
    pub uncached_fills: u64,
    /// Answers of an older version than the one in force at the request.
    pub stale_answers: u64,
    /// Per committed operation: request → every PMU consistent, ns.
    pub latency_ns: Vec<f64>,
    /// Simulated build time charged, summed over the batches, ns.
    pub build_ns: f64,
    /// Simulated time of the first request and the last commit, ns.
    pub first_request_ns: f64,
    pub last_commit_ns: f64,
    /// PHVs whose answers at two or more updatable tables were checked
    /// against one program version, and those no single version explains
    /// (answers of different versions); unresolved: versions still open at
    /// the end.
    pub checked_phvs: u64,
    pub mixed_version_phvs: u64,
    pub mixed_unresolved: u64,
    /// Program consistency: flips (the ingress stamp moved to a new
    /// version), per committed operation request → retire of the version it
    /// replaced (ns), and PHVs stamped before a flip that looked up after it.
    pub flips: u64,
    pub retire_latency_ns: Vec<f64>,
    /// Answers of a kept old version given to PHVs stamped before a flip
    /// that differ from the version in force (the old version at work).
    pub old_version_answers: u64,
    /// ELU structure bytes held beside the ones in force (replicas being
    /// built, old versions kept until retired): the peak, the mean over the
    /// time from the first request, and the structures in force at the end.
    pub extra_bytes_peak: u64,
    pub extra_bytes_mean: f64,
    pub structure_bytes: u64,
    /// Per table, the answers released while every answer is checked
    /// (program consistency, or two updatable tables) that were an entry
    /// and those that were a miss (the default): P4 hit/miss counts.
    pub answers: Vec<(u64, u64)>,
}

fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * q).round() as usize]
}

impl UpdateStats {
    /// The `q` quantile of the update latency (0 when none).
    pub fn latency_quantile(&self, q: f64) -> f64 {
        quantile(&self.latency_ns, q)
    }
    /// The `q` quantile of request → retire (program consistency).
    pub fn retire_latency_quantile(&self, q: f64) -> f64 {
        quantile(&self.retire_latency_ns, q)
    }
}

/// The update engine of a simulator.
pub(super) struct Updates<const N: usize> {
    cfg: UpdatesConfig,
    tables: Vec<Option<TableUpdates<N>>>,
    /// Timed requests, sorted by cycle: (cycle, schedule item, table, op);
    /// the operations of one item at one cycle are one transaction.
    timed: VecDeque<(Cycle, u64, u16, Op<N>)>,
    churn: Vec<Churn>,
    pub(super) stats: UpdateStats,
    /// The earliest cycle at which something is due.
    next_due: Cycle,
    /// The next transaction number (program version).
    next_txn: u64,
    /// Program consistency (`xtable.rs`).
    prog: Prog,
    /// Answers of PHVs in flight at updatable tables (table, flow, answer),
    /// checked against one program version when they leave; kept while
    /// more than one table is updatable (or in program consistency).
    pub(super) xcheck: bool,
    answers: HashMap<u64, Vec<(u16, u32, Match)>>,
    /// Left PHVs whose check waits for versions still open.
    deferred: Vec<Vec<(u16, u32, Match)>>,
    /// Extra structure bytes now, since `mem_last`, and their integral.
    extra_now: u64,
    mem_last: Cycle,
    extra_integral: f64,
}

/// The ELU's structure `algo` over `set`, for a table named `table`.
fn structure<const N: usize>(
    algo: Algo,
    set: &RuleSet<N>,
    table: &str,
    build: &BuildConfig,
) -> Result<Box<dyn Structure<N>>, SimError> {
    let name = match algo {
        Algo::Trie => "trie",
        Algo::Linear => "linear",
        Algo::Dtree => "dtree",
        Algo::Ptree => "ptree",
    };
    crate::classify::build_structure_n(name, set, build).map_err(|e| {
        SimError(format!(
            "config: table {table:?}: building the ELU's {name}: {e}"
        ))
    })
}

/// The registry name of an algorithm updated in place.
fn in_place(algo: Algo) -> Option<&'static str> {
    match algo {
        Algo::Dtree => Some("dtree"),
        Algo::Ptree => Some("ptree"),
        _ => None,
    }
}

/// What an in-place operation of `algo` costs, ns (none: rebuilt as a
/// replica instead).
fn op_ns(algo: Algo, cfg: &UpdatesConfig) -> Option<f64> {
    match algo {
        Algo::Dtree => Some(cfg.dtree_op_ns),
        Algo::Ptree => Some(cfg.ptree_op_ns),
        _ => None,
    }
}

fn matches_fields<const N: usize>(r: &Rule<N>, k: &Key<N>) -> bool {
    r.matches(k)
}

impl<const N: usize> Simulator<N> {
    fn updates_mut(&mut self) -> &mut Updates<N> {
        if self.updates.is_none() {
            self.updates = Some(Box::new(Updates {
                cfg: self.config.update_engine.clone(),
                tables: (0..self.tables.len()).map(|_| None).collect(),
                timed: VecDeque::new(),
                churn: Vec::new(),
                stats: UpdateStats {
                    answers: vec![(0, 0); self.tables.len()],
                    ..UpdateStats::default()
                },
                next_due: Cycle::MAX,
                next_txn: 1,
                prog: Prog::default(),
                xcheck: false,
                answers: HashMap::new(),
                deferred: Vec::new(),
                extra_now: 0,
                mem_last: 0,
                extra_integral: 0.0,
            }));
        }
        self.updates.as_mut().unwrap()
    }

    fn table_index(&self, name: &str) -> Result<u16, SimError> {
        if name.is_empty() {
            return Ok(0);
        }
        self.tables
            .iter()
            .position(|t| t.name == name)
            .map(|i| i as u16)
            .ok_or_else(|| SimError(format!("updates: no table named {name:?}")))
    }

    /// Makes table `t` updatable: its ELU walker becomes a [`LiveWalker`]
    /// over the rule set it was built from (ids = positions).
    fn make_live(&mut self, t: u16) -> Result<(), SimError> {
        if self.updates_mut().tables[t as usize].is_some() {
            return Ok(());
        }
        let ti = t as usize;
        let set = self.sets[ti].clone();
        let name = self.tables[ti].name.clone();
        // A program's table (routed) falls back as its build did: P4
        // ternary masks need not be prefixes.
        let tries: &[Algo] = if self.routes.is_some() {
            &[self.config.elu.algo, Algo::Dtree, Algo::Linear]
        } else {
            &[self.config.elu.algo]
        };
        let mut built = Err(SimError(String::new()));
        for &a in tries {
            built = if let Some(n) = in_place(a) {
                crate::classify::build_incremental_n(n, &set, &self.config.elu.build)
                    .map(|d| (a, Inner::InPlace(d)))
                    .map_err(|e| SimError(format!("config: table {name:?}: building the ELU's {n}: {e}")))
            } else {
                structure(a, &set, &name, &self.config.elu.build).map(|s| (a, Inner::Built(s)))
            };
            if built.is_ok() {
                break;
            }
        }
        let (algo, inner) = built?;
        let n = set.rules.len() as u32;
        let program = self.config.update_engine.consistency == Consistency::Program;
        if program && set.schema.len() >= N {
            return err(format!(
                "config: update_engine.consistency = \"program\" tags keys with a version in a spare key word: table {name:?} uses all {N}"
            ));
        }
        let tagword = program.then_some(N - 1);
        let live = Arc::new(Mutex::new(Live {
            inner,
            ids: (0..n).collect(),
            default: None,
            tagword,
            tag: 0,
            old: None,
        }));
        self.walkers[ti] = Box::new(LiveWalker(live.clone()));
        let hist = self.tables[ti]
            .oracle
            .iter()
            .map(|&m| vec![(0, m)])
            .collect();
        let schema = set.schema.clone();
        let vhist = self.tables[ti].oracle.iter().map(|&m| vec![(0, m)]).collect();
        self.updates_mut().tables[ti] = Some(TableUpdates {
            live,
            rules: set.rules,
            ids: (0..n).collect(),
            default: None,
            schema,
            pending: VecDeque::new(),
            building: None,
            hist,
            vhist,
            tag: 0,
            old_tag: None,
            old_bytes: 0,
            recent: VecDeque::new(),
            next_id: FIRST_NEW_ID,
            next_default: DEFAULT_ID,
            algo,
            expected: n as i64,
            txn_in_force: 0,
        });
        let u = self.updates_mut();
        u.xcheck = program || u.tables.iter().flatten().count() >= 2;
        u.prog.tagword = tagword;
        Ok(())
    }

    /// Reads the scenario's `[[updates]]` schedule (called once by the
    /// builder when it is not empty).
    pub(super) fn schedule_updates(&mut self) -> Result<(), SimError> {
        let sched = self.config.updates.clone();
        for (k, s) in sched.iter().enumerate() {
            let t = self.table_index(&s.table)?;
            let at = self.ns_to_cycle(s.at_ns);
            let mut ops: Vec<(u16, Op<N>)> = Vec::new();
            if s.file.is_some() || !s.ops.is_empty() || (s.transaction.is_empty() && s.churn_tables.is_empty()) {
                self.make_live(t)?;
                let schema = self.sets[t as usize].schema.clone();
                if let Some(path) = &s.file {
                    let text = std::fs::read_to_string(path)
                        .map_err(|e| SimError(format!("{path}: {e}")))?;
                    ops.extend(parse_ops::<N>(&text, path, 1, &schema).map_err(SimError)?.into_iter().map(|o| (t, o)));
                }
                let src = format!("updates.{k}.ops");
                ops.extend(parse_ops::<N>(&s.ops.join("\n"), &src, 0, &schema).map_err(SimError)?.into_iter().map(|o| (t, o)));
            }
            for (name, lines) in &s.transaction {
                let tx = self.table_index(name).map_err(|e| SimError(format!("updates.{k}.transaction: {e}")))?;
                self.make_live(tx)?;
                let schema = self.sets[tx as usize].schema.clone();
                let src = format!("updates.{k}.transaction.{name}");
                ops.extend(parse_ops::<N>(&lines.join("\n"), &src, 0, &schema).map_err(SimError)?.into_iter().map(|o| (tx, o)));
            }
            let mut churn_tables = Vec::new();
            for name in &s.churn_tables {
                let tx = self.table_index(name).map_err(|e| SimError(format!("updates.{k}.churn_tables: {e}")))?;
                self.make_live(tx)?;
                churn_tables.push(tx);
            }
            if churn_tables.is_empty() {
                churn_tables.push(t);
            }
            let u = self.updates_mut();
            for (tx, op) in ops {
                u.timed.push_back((at, k as u64, tx, op));
            }
            if s.churn_per_s > 0.0 {
                let cycle_ns = self.clock.ps() / 1000.0;
                let until = if s.until_ns > 0.0 {
                    self.ns_to_cycle(s.until_ns)
                } else {
                    Cycle::MAX
                };
                let gap = 1e9 / s.churn_per_s / cycle_ns;
                let rng = Pcg64::seed_from_u64(s.seed ^ self.config.seed ^ 0x5EED_u64 ^ k as u64);
                self.updates_mut().churn.push(Churn {
                    tables: churn_tables,
                    next: at as f64,
                    gap,
                    until,
                    rng,
                });
            } else if s.churn_per_s < 0.0 {
                return err(format!("config: updates.{k}.churn_per_s must be >= 0"));
            }
        }
        let u = self.updates_mut();
        u.timed.make_contiguous().sort_by_key(|e| e.0);
        self.refresh_due();
        Ok(())
    }

    fn ns_to_cycle(&self, ns: f64) -> Cycle {
        (ns.max(0.0) * 1000.0 / self.clock.ps()).round() as Cycle
    }

    /// Requests a batch of operations on `table` now (the embedding API);
    /// returns how many were queued. Lines as in [`parse_ops`].
    pub fn request_updates(&mut self, table: &str, lines: &[String]) -> Result<usize, SimError> {
        self.request_transaction(&[(table.to_string(), lines.to_vec())])
    }

    /// Requests one transaction now: per table, its operations (lines as
    /// in [`parse_ops`]). In `program` consistency a PHV sees all of it or
    /// none of it; per table, each table commits its part on its own.
    /// Returns how many operations were queued.
    pub fn request_transaction(&mut self, parts: &[(String, Vec<String>)]) -> Result<usize, SimError> {
        let mut all = Vec::new();
        for (table, lines) in parts {
            let t = self.table_index(table)?;
            let schema = self.sets[t as usize].schema.clone();
            let ops = parse_ops::<N>(&lines.join("\n"), "updates", 1, &schema).map_err(SimError)?;
            all.push((t, ops));
        }
        Ok(self.request_ops(all)?.0)
    }

    /// [`Self::request_transaction`] of parsed operations, per table index;
    /// returns how many were queued and the transaction's number.
    pub(super) fn request_ops(&mut self, all: Vec<(u16, Vec<Op<N>>)>) -> Result<(usize, u64), SimError> {
        for (t, _) in &all {
            if *t as usize >= self.tables.len() {
                return err(format!("updates: table {t} of {}", self.tables.len()));
            }
        }
        for (t, _) in &all {
            self.make_live(*t)?;
        }
        let now = self.now;
        let n: usize = all.iter().map(|(_, o)| o.len()).sum();
        let u = self.updates_mut();
        u.stats.requested += n as u64;
        if u.stats.requested == n as u64 {
            u.stats.first_request_ns = now as f64;
        }
        let txn = u.next_txn;
        u.next_txn += 1;
        for (t, ops) in all {
            let tu = u.tables[t as usize].as_mut().unwrap();
            for o in ops {
                tu.expected += match o {
                    Op::Insert { .. } => 1,
                    Op::Delete { .. } => -1,
                    _ => 0,
                };
                tu.pending.push_back((now, txn, o));
            }
        }
        self.refresh_due();
        Ok((n, txn))
    }

    /// Schedules operations on table `t` at given cycles (the data plane's
    /// writes, `program::learn`, at their packets' arrival): each cycle's
    /// operations are one transaction, requested when the clock reaches it.
    pub(super) fn schedule_ops(&mut self, t: u16, ops: Vec<(Cycle, Op<N>)>) -> Result<(), SimError> {
        if t as usize >= self.tables.len() {
            return err(format!("updates: table {t} of {}", self.tables.len()));
        }
        self.make_live(t)?;
        let now = self.now;
        let u = self.updates_mut();
        for (c, op) in ops {
            let c = c.max(now);
            // after everything due at or before c (in order), as a schedule item of its own
            let at = u.timed.partition_point(|e| e.0 <= c);
            u.timed.insert(at, (c, u64::MAX, t, op));
        }
        self.refresh_due();
        Ok(())
    }

    /// Counters of the updates (all zero when none was requested).
    pub fn update_stats(&self) -> UpdateStats {
        let mut s = self
            .updates
            .as_ref()
            .map(|u| u.stats.clone())
            .unwrap_or_default();
        // Churn due while its engine was busy is generated when the engine
        // takes it; count it as requested already.
        if let Some(u) = &self.updates {
            for c in &u.churn {
                let end = (self.now.min(c.until)) as f64;
                if c.next < end {
                    let due = ((end - c.next) / c.gap).ceil() as u64 * c.tables.len() as u64;
                    if s.requested == 0 && due > 0 {
                        s.first_request_ns = c.next.ceil();
                    }
                    s.requested += due;
                }
            }
        }
        let cyc = self.clock.ps() / 1000.0;
        s.first_request_ns *= cyc;
        s.last_commit_ns *= cyc;
        if let Some(u) = &self.updates {
            let first = (s.first_request_ns / cyc) as Cycle;
            let integral = u.extra_integral + u.extra_now as f64 * (self.now - u.mem_last) as f64;
            if self.now > first {
                s.extra_bytes_mean = integral / (self.now - first) as f64;
            }
            s.mixed_unresolved = u.deferred.len() as u64;
            s.structure_bytes = u
                .tables
                .iter()
                .flatten()
                .map(|t| inner_bytes(&t.live.lock().unwrap().inner))
                .sum();
        }
        s
    }

    /// The next cycle at which the update engine has work (`Cycle::MAX`:
    /// none); the clock stops there.
    #[inline]
    pub(super) fn updates_due(&self) -> Cycle {
        self.updates.as_ref().map_or(Cycle::MAX, |u| u.next_due)
    }

    fn refresh_due(&mut self) {
        let now = self.now;
        let Some(u) = self.updates.as_mut() else {
            return;
        };
        let mut due = Cycle::MAX;
        if let Some(&(c, ..)) = u.timed.front() {
            due = due.min(c);
        }
        let program = u.cfg.consistency == Consistency::Program;
        let prog_busy = u.prog.building.is_some() || u.prog.retained;
        for c in &u.churn {
            let at = c.next.ceil() as Cycle;
            let busy = if program {
                prog_busy
            } else {
                c.tables.iter().any(|&t| {
                    u.tables[t as usize]
                        .as_ref()
                        .is_some_and(|t| t.building.is_some())
                })
            };
            if at < c.until && !busy {
                due = due.min(at);
            }
        }
        if program {
            if let Some((done, _)) = u.prog.building {
                due = due.min(done);
            } else if u.prog.retained {
                if u.prog.old_inflight == 0 {
                    due = due.min(now);
                }
            } else if u.tables.iter().flatten().any(|t| !t.pending.is_empty()) {
                due = due.min(now);
            }
        } else {
            for t in u.tables.iter().flatten() {
                match &t.building {
                    Some(b) => due = due.min(b.done),
                    None if !t.pending.is_empty() => due = due.min(now),
                    None => {}
                }
            }
        }
        u.next_due = due;
    }

    /// Runs the update engine at `now` (called by the clock when
    /// [`Simulator::updates_due`] is reached): takes due requests, commits
    /// finished builds, starts new ones.
    pub(super) fn run_updates(&mut self, now: Cycle) {
        let program = self.config.update_engine.consistency == Consistency::Program;
        // Builds done by now commit first: requests made while they ran
        // join the next batch.
        if program {
            self.program_step(now);
        } else {
            for t in 0..self.tables.len() {
                let done = self.updates.as_ref().unwrap().tables[t]
                    .as_ref()
                    .and_then(|tu| tu.building.as_ref().map(|b| b.done));
                if done.is_some_and(|d| d <= now) {
                    self.commit_build(now, t);
                    self.recheck_deferred();
                }
            }
        }
        // Requests due by now, each at its own request cycle (churn is
        // generated late while its engine is busy: the engine takes nothing
        // before its build ends). Each scheduled item's operations at one
        // cycle, and each churn event, are one transaction.
        let mut reqs: Vec<(Cycle, u64, u16, Op<N>)> = Vec::new();
        {
            let u = self.updates.as_mut().unwrap();
            let mut last: Option<(Cycle, u64)> = None;
            while u.timed.front().is_some_and(|e| e.0 <= now) {
                let (c, group, t, op) = u.timed.pop_front().unwrap();
                if last != Some((c, group)) {
                    last = Some((c, group));
                    u.next_txn += 1;
                }
                reqs.push((c, u.next_txn - 1, t, op));
            }
        }
        for r in reqs.clone() {
            self.count_pending(r.2, &r.3, 1);
        }
        let nchurn = self.updates.as_ref().unwrap().churn.len();
        for i in 0..nchurn {
            loop {
                let (tables, at, until) = {
                    let c = &self.updates.as_ref().unwrap().churn[i];
                    (c.tables.clone(), c.next.ceil() as Cycle, c.until)
                };
                if at > now || at >= until {
                    break;
                }
                let txn = {
                    let u = self.updates.as_mut().unwrap();
                    u.next_txn += 1;
                    u.next_txn - 1
                };
                // A transaction over several tables concerns one flow (its
                // treatment in each table), as a policy change would.
                let flow = (tables.len() > 1).then(|| self.updates.as_mut().unwrap().churn[i].rng.gen::<u32>());
                for t in tables {
                    let op = self.random_op(i, t, flow);
                    self.count_pending(t, &op, 1);
                    reqs.push((at, txn, t, op));
                }
                let c = &mut self.updates.as_mut().unwrap().churn[i];
                c.next += c.gap;
            }
        }
        {
            let u = self.updates.as_mut().unwrap();
            if let Some(first) = reqs.iter().map(|r| r.0).min() {
                if u.stats.requested == 0 {
                    u.stats.first_request_ns = first as f64;
                }
                u.stats.requested += reqs.len() as u64;
            }
            for (c, txn, t, op) in reqs {
                u.tables[t as usize]
                    .as_mut()
                    .unwrap()
                    .pending
                    .push_back((c, txn, op));
            }
        }
        if program {
            self.program_start(now);
        } else {
            for t in 0..self.tables.len() {
                let idle = self.updates.as_ref().unwrap().tables[t]
                    .as_ref()
                    .is_some_and(|tu| tu.building.is_none() && !tu.pending.is_empty());
                if idle {
                    self.start_build(now, t, u64::MAX);
                }
            }
        }
        // Route changes of transactions now in force everywhere (routed.rs).
        self.apply_routes();
        self.refresh_due();
    }

    /// Keeps the table's expected size (after every queued operation) for
    /// the churn generator; `sign` -1 undoes a refused operation.
    fn count_pending(&mut self, t: u16, op: &Op<N>, sign: i64) {
        let tu = self.updates.as_mut().unwrap().tables[t as usize]
            .as_mut()
            .unwrap();
        match op {
            Op::Insert { .. } => tu.expected += sign,
            Op::Delete { .. } => tu.expected -= sign,
            _ => {}
        }
    }

    /// A random operation of churn `i` on table `t`: inserts of entries
    /// that cover some flow's key (flow `flow` when given, so traffic sees them), deletes and
    /// modifies of random entries, in equal parts (the table keeps its size).
    /// Positions refer to the version in force (queued operations may shift
    /// them; one out of range is refused and counted).
    fn random_op(&mut self, i: usize, t: u16, flow: Option<u32>) -> Op<N> {
        let ti = t as usize;
        let nkeys = self.tables[ti].keys.len();
        let u = self.updates.as_mut().unwrap();
        let tu = u.tables[ti].as_ref().unwrap();
        let n = tu.expected.max(0) as u32;
        let schema = tu.schema.clone();
        let rng = &mut u.churn[i].rng;
        let kind: u32 = rng.gen_range(0..3);
        if n == 0 || kind == 0 || nkeys == 0 {
            let key = if nkeys > 0 {
                let f = flow.map_or_else(|| rng.gen_range(0..nkeys), |f| f as usize % nkeys);
                self.tables[ti].keys[f]
            } else {
                let mut k = Key::<N>::zeroed();
                k.0.iter_mut().for_each(|w| *w = rng.gen());
                k
            };
            // An exception carved out of the entry that answers the key
            // now (as ACL updates are): the same fields, the first prefix
            // field 8 bits longer around the key, just above that entry.
            // The set keeps its character (no broad entry shadowing it).
            let template = tu.rules.iter().position(|r| r.matches(&key));
            let mut rule = match template {
                Some(p) => tu.rules[p],
                None => Rule::new(&[], 0, 0),
            };
            for (f, spec) in schema.fields.iter().enumerate() {
                let v = key.0[f];
                match spec.kind {
                    MatchKind::Lpm => {
                        let len = rule.fields[f].prefix_len(spec.bits).unwrap_or(0);
                        rule.fields[f] = FieldMatch::prefix(v, (len + 8).min(spec.bits), spec.bits);
                        break;
                    }
                    MatchKind::Exact => rule.fields[f] = FieldMatch::exact(v),
                    _ => {}
                }
            }
            let pos = template.map_or(n, |p| (p as u32).min(n));
            Op::Insert { pos, rule }
        } else if kind == 1 {
            Op::Delete {
                pos: rng.gen_range(0..n),
            }
        } else {
            Op::Modify {
                pos: rng.gen_range(0..n),
            }
        }
    }

    /// Takes the pending requests of table `t` of transactions up to
    /// `upto` (per table: up to the engine's batch size) as one batch:
    /// applies it to a copy of the version in force and charges its build
    /// time. Returns whether a build started.
    fn start_build(&mut self, now: Cycle, t: usize, upto: u64) -> bool {
        let cycle_ns = self.clock.ps() / 1000.0;
        let table = &self.tables[t];
        let u = self.updates.as_mut().unwrap();
        let cfg = u.cfg.clone();
        let program = cfg.consistency == Consistency::Program;
        let tu = u.tables[t].as_mut().unwrap();
        let algo = tu.algo;
        // One batch: what is pending, up to the engine's batch size (per
        // table) or the transactions the program's batch takes.
        let take = if program {
            tu.pending.iter().take_while(|o| o.1 <= upto).count()
        } else {
            tu.pending.len().min(cfg.max_batch.max(1) as usize)
        };
        let ops: Vec<(Cycle, u64, Op<N>)> = tu.pending.drain(..take).collect();
        let (mut rules, mut ids, mut default) = (tu.rules.clone(), tu.ids.clone(), tu.default);
        let mut covers = Vec::new();
        let mut default_changed = false;
        let mut kept = Vec::new();
        let mut rejected = 0;
        // The program-version oracle: answers after each transaction of the
        // batch, for the flows its entries cover.
        let mut vchanges = Vec::new();
        let mut now_ans: HashMap<u32, Match> = HashMap::new();
        let (mut group_from, mut group_default) = (0usize, default);
        for (i, &(c, txn, op)) in ops.iter().enumerate() {
            let ok = match op {
                Op::Insert { pos, rule } if pos as usize <= rules.len() => {
                    rules.insert(pos as usize, rule);
                    ids.insert(pos as usize, tu.next_id);
                    tu.next_id += 1;
                    covers.push(rule);
                    true
                }
                Op::Delete { pos } if (pos as usize) < rules.len() => {
                    covers.push(rules.remove(pos as usize));
                    ids.remove(pos as usize);
                    true
                }
                Op::Modify { pos } if (pos as usize) < rules.len() => {
                    covers.push(rules[pos as usize]);
                    ids[pos as usize] = tu.next_id;
                    tu.next_id += 1;
                    true
                }
                Op::Default => {
                    default = Some(tu.next_default);
                    tu.next_default += 1;
                    default_changed = true;
                    true
                }
                _ => false,
            };
            if ok {
                kept.push((c, txn, op));
            } else {
                rejected += 1;
                tu.expected -= match op {
                    Op::Insert { .. } => 1,
                    Op::Delete { .. } => -1,
                    _ => 0,
                };
            }
            if ops.get(i + 1).is_none_or(|n| n.1 != txn) {
                // The transaction's end: flows its entries cover (or the
                // default answered) may have a new answer.
                let group = &covers[group_from..];
                for (f, key) in table.keys.iter().enumerate() {
                    let f = f as u32;
                    let cur = *now_ans.get(&f).unwrap_or(&table.oracle[f as usize]);
                    let touched = group.iter().any(|r| r.matches(key))
                        || (default != group_default && cur == group_default);
                    if !touched {
                        continue;
                    }
                    let new = match rules.iter().position(|r| r.matches(key)) {
                        Some(p) => Some(ids[p]),
                        None => default,
                    };
                    if new != cur {
                        now_ans.insert(f, new);
                        vchanges.push((f, txn, new));
                    }
                }
                group_from = covers.len();
                group_default = default;
            }
        }
        let build_ns;
        let replica = if let (Some(per_op), false) = (op_ns(tu.algo, &cfg), program) {
            // A batch that folds a ptree's pending updates in writes the
            // rebuilt tree whole (its size now stands in for the new one's).
            let inserts = kept.iter().filter(|o| matches!(o.2, Op::Insert { .. })).count();
            let deletes = kept.iter().filter(|o| matches!(o.2, Op::Delete { .. })).count();
            let fold_ns = match &tu.live.lock().unwrap().inner {
                Inner::InPlace(d) if d.folds_in(inserts, deletes) => {
                    u.stats.fold_ins += 1;
                    d.memory_bytes() as f64 / cfg.build_gbps.max(1e-9) + cfg.swap_ns
                }
                _ => 0.0,
            };
            build_ns = per_op * kept.len() as f64 + fold_ns;
            None
        } else {
            let set = RuleSet::new(tu.schema.clone(), rules.clone());
            // A rule set the structure cannot hold is refused whole (the
            // version in force stays).
            match structure(algo, &set, &table.name, &self.config.elu.build) {
                Ok(s) => {
                    // Program consistency keeps the old tree for the PHVs
                    // stamped before the flip: the new one is a copy,
                    // written beside it, then updated in place.
                    let ops_ns = op_ns(tu.algo, &cfg).map_or(0.0, |o| o * kept.len() as f64);
                    build_ns = s.memory_bytes() as f64 / cfg.build_gbps.max(1e-9) + cfg.swap_ns + ops_ns;
                    Some(s)
                }
                Err(_) => {
                    u.stats.rejected += rejected + kept.len() as u64;
                    return false;
                }
            }
        };
        u.stats.rejected += rejected;
        if kept.is_empty() {
            return false;
        }
        u.stats.build_ns += build_ns;
        let replica_bytes = replica.as_ref().map_or(0, |r| r.memory_bytes());
        let done = now + ((build_ns / cycle_ns).ceil() as Cycle).max(1);
        tu.building = Some(Build {
            done,
            ops: kept,
            vchanges,
            replica_bytes,
            rules,
            ids,
            default,
            replica,
            covers,
            default_changed,
        });
        u.mem_add(now, replica_bytes as i64);
        true
    }

    /// The swap: the batch's version is in force from `now`; the PMUs of
    /// the table invalidate what it made stale; the per-flow oracle moves on.
    fn commit_build(&mut self, now: Cycle, t: usize) {
        let walks: u64 = self.elu.lookups.iter().sum();
        let u = self.updates.as_mut().unwrap();
        let mode = u.cfg.invalidate;
        let tu = u.tables[t].as_mut().unwrap();
        let b = tu.building.take().unwrap();
        let old_default = tu.default;
        {
            let mut live = tu.live.lock().unwrap();
            match (&mut live.inner, b.replica) {
                (Inner::InPlace(d), None) => {
                    for (_, _, op) in &b.ops {
                        // Positions were checked against the same sequence.
                        let r = match *op {
                            Op::Insert { pos, rule } => d.insert(pos as usize, rule),
                            Op::Delete { pos } => d.delete(pos as usize),
                            _ => Ok(()),
                        };
                        if let Err(e) = r {
                            // Over budget: rebuild beside it instead.
                            let set = RuleSet::new(tu.schema.clone(), b.rules.clone());
                            let _ = e;
                            let name = in_place(tu.algo).expect("an algorithm updated in place");
                            *d = crate::classify::build_incremental_n(name, &set, &self.config.elu.build)
                                .expect("the tree of a rule set it held");
                            break;
                        }
                    }
                }
                (inner, Some(r)) => *inner = Inner::Built(r),
                (_, None) => unreachable!("a replica for a rebuilt structure"),
            }
            live.ids = b.ids.clone();
            live.default = b.default;
        }
        tu.rules = b.rules;
        tu.ids = b.ids;
        tu.default = b.default;
        tu.txn_in_force = b.ops.last().map_or(tu.txn_in_force, |o| o.1);
        tu.recent.push_back((
            walks,
            b.covers.clone(),
            b.default_changed.then_some(old_default),
        ));
        for &(f, txn, m) in &b.vchanges {
            tu.vhist[f as usize].push((txn, m));
        }
        u.mem_add(now, -(b.replica_bytes as i64));
        self.advance_oracle(now, t, &b.covers, b.default_changed, old_default);
        // The PMUs of the table (members and those draining from it).
        let mut worst = 0;
        let mut invalidated = 0u64;
        for (pi, p) in self.pmus.iter_mut().enumerate() {
            if p.table() != Some(t as u16) {
                continue;
            }
            let n = match mode {
                Invalidate::Exact => p.cam.invalidate_where(|k, a| {
                    b.covers.iter().any(|r| matches_fields(r, k))
                        || (b.default_changed && a == old_default)
                }),
                Invalidate::Flush => {
                    let n = p.cam.len();
                    p.cam.clear();
                    n
                }
                Invalidate::None => 0,
            };
            invalidated += n as u64;
            // One CAM write per invalidated entry; a flush resets every
            // valid bit at once.
            let stall = match mode {
                Invalidate::Flush => 1,
                _ => n as Cycle,
            };
            if stall > 0 {
                p.block_until(now + stall);
                self.pmu_wake[pi] = 0;
                self.pmu_active[pi / 64] |= 1u64 << (pi % 64);
                self.pmu_min_wake = 0;
            }
            worst = worst.max(stall);
        }
        let u = self.updates.as_mut().unwrap();
        u.stats.invalidated += invalidated;
        u.stats.batches += 1;
        u.stats.committed += b.ops.len() as u64;
        let cycle_ns = self.clock.ps() / 1000.0;
        for (req, _, _) in &b.ops {
            u.stats
                .latency_ns
                .push((now + worst - req) as f64 * cycle_ns);
        }
        u.stats.last_commit_ns = (now + worst) as f64;
    }

    /// The per-flow oracle after table `t`'s version changed at `now`: only
    /// flows a changed entry covers (or that the default answered) can
    /// change answer.
    fn advance_oracle(&mut self, now: Cycle, t: usize, covers: &[Rule<N>], default_changed: bool, old_default: Match) {
        let tu = self.updates.as_mut().unwrap().tables[t].as_mut().unwrap();
        let table = &mut self.tables[t];
        for (f, key) in table.keys.iter().enumerate() {
            let cur = table.oracle[f];
            let touched = covers.iter().any(|r| matches_fields(r, key))
                || (default_changed && cur == old_default);
            if !touched {
                continue;
            }
            let new = match tu.rules.iter().position(|r| r.matches(key)) {
                Some(p) => Some(tu.ids[p]),
                None => tu.default,
            };
            if new != cur {
                table.oracle[f] = new;
                tu.hist[f].push((now, new));
            }
        }
    }

    /// The ELU's reply `action` to `miss`, the `index`-th reply overall: may
    /// it fill the CAM (no swap after its walk changed its key's answer)?
    #[inline]
    pub(super) fn fill_allowed(
        &mut self,
        miss: &MissRequest<N>,
        action: Match,
        index: u64,
    ) -> bool {
        let Some(u) = self.updates.as_mut() else {
            return true;
        };
        let Some(tu) = u.tables[miss.table as usize].as_mut() else {
            return true;
        };
        if let Some(w) = u.prog.tagword {
            // Program consistency: a reply for a PHV stamped before the last
            // flip (an old tag) is not cached: the PMU compares the reply's
            // tag with its own, the version in force.
            let ok = miss.key.0[w] == tu.tag;
            if !ok {
                u.stats.uncached_fills += 1;
            }
            return ok;
        }
        // Replies come in index order: swaps no later reply precedes go.
        while tu.recent.front().is_some_and(|r| r.0 <= index) {
            tu.recent.pop_front();
        }
        let stale = tu.recent.iter().any(|(_, covers, old_default)| {
            covers.iter().any(|r| r.matches(&miss.key)) || old_default.is_some_and(|d| d == action)
        });
        if stale {
            u.stats.uncached_fills += 1;
        }
        !stale
    }

    /// Whether a released answer goes to [`Self::judge`]: it is not the
    /// current oracle's, or answers are checked across tables.
    #[inline]
    pub(super) fn to_judge(&self, t: usize, flow: u32, action: Match) -> bool {
        action != self.tables[t].oracle[flow as usize] || self.updates.as_deref().is_some_and(|u| u.xcheck)
    }

    /// A released PHV's answer `action` at table `t` (called when it differs
    /// from the current oracle, and for every release while answers are
    /// checked across tables). Per table: it may be correct for a version
    /// in force during its lookup (from its request at `issued` on); in
    /// program consistency it must be the answer of the PHV's stamped
    /// version. Else another version's answer (stale) or wrong.
    pub(super) fn judge(&mut self, t: usize, phv: u64, flow: u32, action: Match, issued: Cycle) {
        let current = action == self.tables[t].oracle[flow as usize];
        let Some(u) = self.updates.as_deref_mut() else {
            self.wrong_action += current as u64 ^ 1;
            return;
        };
        let Some(tu) = u.tables[t].as_ref() else {
            self.wrong_action += current as u64 ^ 1;
            return;
        };
        if u.xcheck {
            u.answers.entry(phv).or_default().push((t as u16, flow, action));
            let a = &mut u.stats.answers[t];
            match action {
                Some(id) if id < DEFAULT_ID => a.0 += 1,
                _ => a.1 += 1,
            }
        }
        if u.prog.tagword.is_some() {
            let v = u.prog.version_of(phv);
            let h = &tu.vhist[flow as usize];
            let at = h.iter().rposition(|e| e.0 <= v).unwrap_or(0);
            if h[at].1 == action {
                // A PHV stamped before the flip served by the kept version.
                u.stats.old_version_answers += !current as u64;
                return;
            }
            if h.iter().any(|e| e.1 == action) {
                u.stats.stale_answers += 1;
            } else {
                self.wrong_action += 1;
            }
            return;
        }
        if current {
            return;
        }
        let h = &tu.hist[flow as usize];
        // The answer in force at the request, and every later one.
        let from = h.iter().rposition(|e| e.0 <= issued).unwrap_or(0);
        if h[from..].iter().any(|e| e.1 == action) {
            return;
        }
        if h[..from].iter().any(|e| e.1 == action) {
            u.stats.stale_answers += 1;
        } else {
            self.wrong_action += 1;
        }
    }
}

/// The answer of `rules` (ids, default) to `key`.
fn answer_of<const N: usize>(rules: &[Rule<N>], ids: &[u32], default: Match, key: &Key<N>) -> Match {
    match rules.iter().position(|r| r.matches(key)) {
        Some(p) => Some(ids[p]),
        None => default,
    }
}

/// What explicit routes (`routed.rs`) need of the update engine.
impl<const N: usize> Simulator<N> {
    /// The first transaction not yet in force at every table (`u64::MAX`:
    /// none open): a route change of an earlier one may take effect.
    pub(super) fn open_from(&self) -> u64 {
        let Some(u) = self.updates.as_deref() else {
            return u64::MAX;
        };
        u.tables
            .iter()
            .flatten()
            .map(|tu| {
                let b = tu.building.as_ref().and_then(|b| b.ops.first().map(|o| o.1));
                let p = tu.pending.front().map(|o| o.1);
                b.unwrap_or(u64::MAX).min(p.unwrap_or(u64::MAX))
            })
            .min()
            .unwrap_or(u64::MAX)
    }

    /// The program version PHV `phv` is stamped with (program consistency
    /// with a table updatable; else None).
    pub(super) fn program_version(&self, phv: u64) -> Option<u64> {
        let u = self.updates.as_deref()?;
        u.prog.tagword.map(|_| u.prog.version_of(phv))
    }

    /// The last transaction requested (0: none).
    pub(super) fn last_txn(&self) -> u64 {
        self.updates.as_deref().map_or(0, |u| u.next_txn - 1)
    }

    /// Table `t` has new keys from index `from` on (appended to its keys,
    /// oracle answers of the version in force): their histories start with
    /// that answer, and a batch being built that changes it records the
    /// change (batches still pending see them when they start).
    pub(super) fn keys_added(&mut self, t: usize, from: usize) {
        let Some(tu) = self.updates.as_deref_mut().and_then(|u| u.tables[t].as_mut()) else {
            return;
        };
        let table = &mut self.tables[t];
        for f in from..table.keys.len() {
            let key = table.keys[f];
            let now = answer_of(&tu.rules, &tu.ids, tu.default, &key);
            table.oracle[f] = now;
            tu.hist.push(vec![(0, now)]);
            tu.vhist.push(vec![(0, now)]);
            if let Some(b) = tu.building.as_mut() {
                let next = answer_of(&b.rules, &b.ids, b.default, &key);
                let last = b.ops.last().map_or(0, |o| o.1);
                if next != now {
                    b.vchanges.push((f as u32, last, next));
                }
            }
        }
    }

    /// Key `k`'s answer at table `t` in program version `txn`, and the
    /// answer the entry at position `pos` (None: a miss) gives in the
    /// version in force, when that version is `txn`'s at this table (no
    /// later transaction changed it); None when it cannot be told.
    pub(super) fn answer_and_expected(&self, t: usize, k: u32, txn: u64, pos: Option<u32>) -> Option<(Match, Match)> {
        let Some(tu) = self.updates.as_deref().and_then(|u| u.tables[t].as_ref()) else {
            // Never updated: ids are positions.
            return Some((self.tables[t].oracle[k as usize], pos));
        };
        if tu.txn_in_force > txn {
            return None;
        }
        let h = &tu.vhist[k as usize];
        let ans = h[h.iter().rposition(|e| e.0 <= txn).unwrap_or(0)].1;
        let exp = match pos {
            Some(p) => Some(*tu.ids.get(p as usize)?),
            None => tu.default,
        };
        Some((ans, exp))
    }
}

#[cfg(test)]
#[path = "updates_tests.rs"]
mod tests;

//! Explicit per-PHV routes: the simulator replays what a program did.
//!
//! For ClassBench scenarios a PHV's path is drawn from the CFG's edge
//! probabilities and its key at a table is its flow's key there. A P4
//! program run (`synapse run --p4`) knows better: the functional interpreter
//! (Python, `synapse_vmt.p4.interp`) has already decided, per packet, which
//! tables it visits, in which order, and with which key at each. Here each
//! arrival names a **route** (a distinct such visit sequence: one per
//! distinct frame) and the PHV follows it hop by hop; the CFG is not used.
//!
//! A route is a list of hops `(table, key index)`; a table's keys are the
//! distinct keys the interpreter saw there (`Table::keys`), so per-key work
//! (hashing into the VMU's lookup table, the oracle answer) is done once.
//! The oracle invariant then checks every visit: the PMU/ELU answer must equal
//! the linear oracle's, and the oracle's answer must equal the interpreter's
//! matched entry (`expected`; a mismatch is counted in `wrong_action`).
//!
//! Arrivals come in batches from the embedding ([`Simulator::push_arrivals`],
//! one call per control period across PyO3), never one by one. An arrival
//! names a **flow** (at build, flow r follows route r); the flow's route is
//! looked up when its PHV enters and kept by the PHV to its exit.
//!
//! **Route changes.** A P4 write changes a table's entries and, through the
//! actions that set the metadata later tables key on, the routes and keys of
//! the flows whose path crosses a changed entry.
//! [`Simulator::change_routes`] takes one transaction: the table operations
//! (the update engine's, `updates.rs`), keys new to a table (appended; their
//! per-key work done once here) and, per flow, its new route. The table
//! operations go to the update engine as one transaction; the flows switch
//! to their new routes when that transaction is in force at every table (in
//! `program` consistency: at its flip, in the same cycle as the ingress
//! stamp moves), so a PHV that entered before follows its old route with
//! old keys and sees the old version, one that enters after follows the new
//! route and sees the new version. Routes are append-only: a PHV in flight
//! holds its route's hop index. The program's matched entry per new hop
//! (`hop_expected`, a position in the transaction's version) is checked
//! against the versioned oracle when the change takes effect, as the build
//! checks `expected` (mismatches counted in `wrong_action`).

use super::*;
use crate::hw::elu::Algo;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One keyed table of a routed simulation, its keys `N` words wide (the
/// simulator's width: a narrower table's words beyond its schema are zero).
pub struct RoutedTable<const N: usize = MAX_FIELDS> {
    pub name: String,
    /// The table's entries in match order (index 0 wins), one schema field
    /// per 32-bit key word.
    pub rules: RuleSet<N>,
    /// The distinct keys routes use at this table.
    pub keys: Vec<Key<N>>,
    /// Per key, the entry the program matched (`None`: miss).
    pub expected: Vec<Match>,
}

/// Arrivals pushed by the embedding, consumed by the clock.
#[derive(Clone, Default)]
struct Feed(Arc<Mutex<VecDeque<Arrival>>>);

impl Iterator for Feed {
    type Item = Arrival;
    fn next(&mut self) -> Option<Arrival> {
        self.0.lock().unwrap().pop_front()
    }
}

/// A flow without a route: its arrivals visit no table (not created).
const NO_ROUTE: u32 = u32::MAX;

/// Counters of route changes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RouteStats {
    /// Routes (built and appended), flows.
    pub routes: u64,
    pub flows: u64,
    /// Route changes requested, and those in force (flows switched).
    pub requested: u64,
    pub applied: u64,
    /// New hops whose program answer was checked against the versioned
    /// oracle when in force, those that disagreed (also in
    /// `wrong_action`), and those a later transaction made uncheckable.
    pub checked: u64,
    pub mismatched: u64,
    pub unchecked: u64,
    /// Keys appended to tables after the build.
    pub keys_added: u64,
    /// PHVs (program consistency) that entered on a route of another
    /// program version than the one they were stamped with: a route whose
    /// change is later than their version, or one a change at or before
    /// their version replaced. Must be 0.
    pub wrong_version_routes: u64,
    /// Arrivals of flows with no route (not created).
    pub unrouted: u64,
}

/// A route change waiting for its transaction: the flow, its new route and
/// the program's answer (a position; None: a miss) per hop, if given.
struct Waiting {
    txn: u64,
    flow: u32,
    route: u32,
    expected: Vec<Option<u32>>,
}

/// The routes and the position of every PHV in flight on its route.
pub(super) struct Routes<const N: usize> {
    /// Route r's hops are `start[r]..start[r + 1]` of `table` / `key`.
    start: Vec<u32>,
    table: Vec<u16>,
    key: Vec<u32>,
    /// Flow → its route (arrivals name flows).
    flow_route: Vec<u32>,
    /// Route changes not yet in force, in transaction order, and per flow
    /// the transactions of its waiting changes.
    waiting: VecDeque<Waiting>,
    waiting_of: HashMap<u32, VecDeque<u64>>,
    /// Per route, the transaction that made it (0: the build).
    route_txn: Vec<u64>,
    stats: RouteStats,
    /// PHV id → index of its current hop.
    at: HashMap<u64, u32>,
    feed: Feed,
    last_t_ps: u64,
    /// Per table, the linear oracle over its built rule set, made when
    /// keys are first appended to it.
    linear: Vec<Option<Linear<N>>>,
}

impl<const N: usize> Routes<N> {
    /// The route of flow `f` and its first hop (None: no route).
    pub(super) fn first(&self, f: u32) -> Option<(u32, u16, u32)> {
        let r = *self.flow_route.get(f as usize)?;
        let h = *self.start.get(r as usize)? as usize;
        Some((r, self.table[h], self.key[h]))
    }
    /// The hops (table, key index) of flow `f`'s route (none: no route).
    pub(super) fn hops(&self, f: u32) -> impl Iterator<Item = (u16, u32)> + '_ {
        let r = self.flow_route.get(f as usize).copied().unwrap_or(NO_ROUTE);
        let (a, b) = match (self.start.get(r as usize), self.start.get(r as usize + 1)) {
            (Some(&a), Some(&b)) => (a as usize, b as usize),
            _ => (0, 0),
        };
        (a..b).map(|h| (self.table[h], self.key[h]))
    }
    /// Flows known (arrivals name flows below this).
    pub(super) fn flows(&self) -> usize {
        self.flow_route.len()
    }
    /// An arrival of a flow with no route.
    pub(super) fn unrouted(&mut self) {
        self.stats.unrouted += 1;
    }
    /// A PHV stamped with program version `v` enters flow `f`'s route `r`:
    /// is that the flow's route in version `v`?
    pub(super) fn check_version(&mut self, f: u32, r: u32, v: u64) {
        let future = self.route_txn[r as usize] > v;
        let replaced = self.waiting_of.get(&f).is_some_and(|w| w.front().is_some_and(|&t| t <= v));
        self.stats.wrong_version_routes += (future || replaced) as u64;
    }
    /// A PHV entered the first hop of route `r`.
    pub(super) fn enter(&mut self, phv: u64, r: u32) {
        self.at.insert(phv, self.start[r as usize]);
    }
    /// Where the PHV goes after its current hop (no state change).
    pub(super) fn next(&self, phv: u64) -> Next {
        let h = self.at[&phv] as usize + 1;
        // The route ends where the next route starts (start is sorted).
        if self.start.binary_search(&(h as u32)).is_ok() || h >= self.table.len() {
            Next::Exit
        } else {
            Next::Table(self.table[h])
        }
    }
    /// The PHV moves to its next hop: its key index there.
    pub(super) fn advance(&mut self, phv: u64) -> u32 {
        let h = self.at.get_mut(&phv).unwrap();
        *h += 1;
        self.key[*h as usize]
    }
    pub(super) fn leave(&mut self, phv: u64) {
        self.at.remove(&phv);
    }
}

/// One transaction of a routed simulator ([`Simulator::change_routes`]).
#[derive(Clone, Debug, Default)]
pub struct RouteChange<const N: usize> {
    /// Per table (simulator index), its operations (positions in the order
    /// after the operations queued before).
    pub ops: Vec<(u16, Vec<Op<N>>)>,
    /// Keys new to a table, appended in this order: table t's j-th new key
    /// gets index (its keys before) + j.
    pub new_keys: Vec<(u16, Key<N>)>,
    /// The flows whose route changes; flow i's new route is hops
    /// `route_start[i]..route_start[i + 1]` (empty: no route; a flow id
    /// beyond the known ones is a new flow).
    pub flows: Vec<u32>,
    pub route_start: Vec<u32>,
    pub hop_table: Vec<u16>,
    pub hop_key: Vec<u32>,
    /// Per hop (or empty: not checked), the position of the entry the
    /// program matched in the transaction's version (None: a miss).
    pub hop_expected: Vec<Option<u32>>,
}

/// Builds the ELU structure of a program table: the configured algorithm if
/// its budget allows, else the decision tree, else the linear scan (P4
/// ternary masks need not be prefixes).
fn walker_for<const N: usize>(
    algo: Algo,
    set: &RuleSet<N>,
    name: &str,
    b: &crate::classify::BuildConfig,
) -> Result<Box<dyn MemoryWalk<N> + Send>, SimError> {
    let mut last = None;
    for a in [algo, Algo::Dtree, Algo::Linear] {
        match build::build_walker(a, set, name, b) {
            Ok(w) => return Ok(w),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap())
}

impl<const N: usize> Simulator<N> {
    /// Builds a simulator whose PHVs follow explicit routes. `config.tables`
    /// must name `tables` in the same order (PMUs, VMU sizes); its rules,
    /// traffic, edges and entry are ignored. Route r's hops are
    /// `route_start[r]..route_start[r + 1]` of `hop_table`/`hop_key` (flow r
    /// follows it; an empty one: flow r visits no table until a change
    /// gives it a route). Arrivals come from [`Self::push_arrivals`].
    pub fn build_routed(
        mut config: Config,
        tables: Vec<RoutedTable<N>>,
        route_start: Vec<u32>,
        hop_table: Vec<u16>,
        hop_key: Vec<u32>,
    ) -> Result<Simulator<N>, SimError> {
        if config.tables.len() != tables.len() {
            return err("routed: config.tables and tables differ in length");
        }
        for (c, t) in config.tables.iter().zip(&tables) {
            if c.name != t.name {
                return err(format!(
                    "routed: config table {:?} != table {:?}",
                    c.name, t.name
                ));
            }
            if t.keys.len() != t.expected.len() {
                return err(format!(
                    "routed: table {:?}: keys and expected differ in length",
                    t.name
                ));
            }
        }
        if hop_table.len() != hop_key.len() || route_start.first() != Some(&0) {
            return err("routed: hop_table and hop_key differ in length, or route_start[0] != 0");
        }
        if *route_start.last().unwrap() as usize != hop_table.len() {
            return err("routed: route_start must end at the number of hops");
        }
        if route_start.windows(2).any(|w| w[1] < w[0]) {
            return err("routed: route_start must not decrease");
        }
        for (&t, &k) in hop_table.iter().zip(&hop_key) {
            let Some(tb) = tables.get(t as usize) else {
                return err(format!("routed: hop names table {t} of {}", tables.len()));
            };
            if k as usize >= tb.keys.len() {
                return err(format!(
                    "routed: hop names key {k} of table {:?} ({} keys)",
                    tb.name,
                    tb.keys.len()
                ));
            }
        }
        let algo = config.elu.algo;
        config.elu.algo = Algo::Linear; // always builds; replaced per table below
        config.edges.clear();
        config.entry.clear();
        let mut sets = Vec::new();
        let mut keys = Vec::new();
        let mut expected = Vec::new();
        for t in tables {
            sets.push(t.rules);
            keys.push(t.keys);
            expected.push(t.expected);
        }
        let feed = Feed::default();
        let mut sim = Simulator::<N>::build(config, sets.clone(), keys, Box::new(feed.clone()))?;
        sim.config.elu.algo = algo;
        for (i, set) in sets.iter().enumerate() {
            sim.walkers[i] = walker_for(algo, set, &sim.tables[i].name, &sim.config.elu.build)?;
            // The oracle (linear over the rule set) must agree with the program.
            for (o, e) in sim.tables[i].oracle.iter().zip(&expected[i]) {
                if o != e {
                    sim.wrong_action += 1;
                }
            }
        }
        let n = route_start.len() as u32 - 1;
        // An empty route: the flow visits no table (yet).
        let flow_route = route_start
            .windows(2)
            .enumerate()
            .map(|(r, w)| if w[0] == w[1] { NO_ROUTE } else { r as u32 })
            .collect();
        sim.routes = Some(Routes {
            start: route_start,
            table: hop_table,
            key: hop_key,
            flow_route,
            waiting: VecDeque::new(),
            waiting_of: HashMap::new(),
            route_txn: vec![0; n as usize],
            stats: RouteStats {
                routes: n as u64,
                flows: n as u64,
                ..RouteStats::default()
            },
            at: HashMap::new(),
            feed,
            last_t_ps: 0,
            linear: Vec::new(),
        });
        Ok(sim)
    }

    /// Counts the PHVs of flows from `legit_flows` on apart, as attack
    /// traffic (`stats::Classes`: the summary's `legit` and `attack`). A
    /// program run with an `[attack]` numbers its attack routes after the
    /// legitimate ones (`synapse_vmt.p4.attack`). Before the first arrival.
    pub fn count_classes(&mut self, legit_flows: u32) -> Result<(), SimError> {
        if self.routes.as_ref().map_or(true, |r| r.last_t_ps > 0 || !r.feed.0.lock().unwrap().is_empty()) || self.now > 0 || self.next_arrival.is_some() {
            return err("count_classes: a routed simulator before its first arrival expected");
        }
        self.legit = Some(Box::new(super::stats::Classes { legit_flows, ..Default::default() }));
        Ok(())
    }

    /// Appends arrivals (times in ps, non-decreasing, and flow ids: at
    /// build flow r follows route r) to a routed simulator's input.
    pub fn push_arrivals(&mut self, t_ps: &[u64], route: &[u32]) -> Result<(), SimError> {
        let Some(r) = self.routes.as_mut() else {
            return err("push_arrivals: this simulator is not routed (build_routed)");
        };
        if self.ended {
            return err("push_arrivals: the run has ended (drained)");
        }
        if t_ps.len() != route.len() {
            return err("push_arrivals: t_ps and route differ in length");
        }
        let n_routes = r.flow_route.len();
        let mut last = r.last_t_ps;
        for (&t, &x) in t_ps.iter().zip(route) {
            if t < last {
                return err(format!(
                    "push_arrivals: times must not decrease ({t} after {last} ps)"
                ));
            }
            if x as usize >= n_routes {
                return err(format!("push_arrivals: flow {x} of {n_routes}"));
            }
            last = t;
        }
        r.last_t_ps = last;
        r.feed.0.lock().unwrap().extend(
            t_ps.iter()
                .zip(route)
                .map(|(&t_ps, &flow)| Arrival { t_ps, flow }),
        );
        if self.next_arrival.is_none() {
            self.pull_arrival();
        }
        Ok(())
    }

    /// Replaces, in one transaction, table entries and the routes of
    /// `change.flows` (see the module doc); returns the transaction number.
    /// Nothing changes when it is refused.
    pub fn change_routes(&mut self, change: RouteChange<N>) -> Result<u64, SimError> {
        let Some(r) = self.routes.as_ref() else {
            return err("change_routes: this simulator is not routed (build_routed)");
        };
        let c = change;
        let nt = self.tables.len();
        let mut added = vec![0usize; nt];
        for &(t, _) in &c.new_keys {
            let Some(a) = added.get_mut(t as usize) else {
                return err(format!("change_routes: new key of table {t} of {nt}"));
            };
            *a += 1;
        }
        if c.route_start.len() != c.flows.len() + 1
            || c.route_start.first() != Some(&0)
            || *c.route_start.last().unwrap() as usize != c.hop_table.len()
            || c.route_start.windows(2).any(|w| w[1] < w[0])
        {
            return err("change_routes: route_start must be flows + 1 non-decreasing offsets from 0 to the number of hops");
        }
        if c.hop_key.len() != c.hop_table.len()
            || !(c.hop_expected.is_empty() || c.hop_expected.len() == c.hop_table.len())
        {
            return err("change_routes: hop_table, hop_key (and hop_expected if given) differ in length");
        }
        for (&t, &k) in c.hop_table.iter().zip(&c.hop_key) {
            let Some(tb) = self.tables.get(t as usize) else {
                return err(format!("change_routes: hop names table {t} of {nt}"));
            };
            if k as usize >= tb.keys.len() + added[t as usize] {
                return err(format!(
                    "change_routes: hop names key {k} of table {:?} ({} keys with the new ones)",
                    tb.name,
                    tb.keys.len() + added[t as usize]
                ));
            }
        }
        if c.flows.iter().any(|&f| f == NO_ROUTE) || r.start.len() as u64 + c.flows.len() as u64 >= NO_ROUTE as u64 {
            return err("change_routes: too many flows or routes");
        }
        // The table operations first: a table refused for the update engine
        // (make_live) refuses the whole change before anything moves. A
        // change without any takes effect with the last transaction.
        let txn = if c.ops.iter().all(|o| o.1.is_empty()) {
            self.last_txn()
        } else {
            self.request_ops(c.ops)?.1
        };
        // New keys, per table in their order.
        let mut per_table: Vec<Vec<Key<N>>> = vec![Vec::new(); nt];
        for (t, k) in c.new_keys {
            per_table[t as usize].push(k);
        }
        for (t, keys) in per_table.into_iter().enumerate() {
            if !keys.is_empty() {
                self.add_keys(t, keys);
            }
        }
        let r = self.routes.as_mut().unwrap();
        for (i, &flow) in c.flows.iter().enumerate() {
            let (a, b) = (c.route_start[i] as usize, c.route_start[i + 1] as usize);
            let route = if a == b {
                NO_ROUTE
            } else {
                r.table.extend_from_slice(&c.hop_table[a..b]);
                r.key.extend_from_slice(&c.hop_key[a..b]);
                r.start.push(r.table.len() as u32);
                r.route_txn.push(txn);
                r.stats.routes += 1;
                r.start.len() as u32 - 2
            };
            if flow as usize >= r.flow_route.len() {
                r.flow_route.resize(flow as usize + 1, NO_ROUTE);
                r.stats.flows = r.flow_route.len() as u64;
            }
            let expected = if c.hop_expected.is_empty() {
                Vec::new()
            } else {
                c.hop_expected[a..b].to_vec()
            };
            r.stats.requested += 1;
            r.waiting_of.entry(flow).or_default().push_back(txn);
            r.waiting.push_back(Waiting { txn, flow, route, expected });
        }
        // A change with no table operation is in force now.
        self.apply_routes();
        Ok(txn)
    }

    /// Appends keys to table `t` with their per-key work done once (VMU
    /// hash, oracle answer in the version in force); returns the index of
    /// the first.
    fn add_keys(&mut self, t: usize, keys: Vec<Key<N>>) -> usize {
        let from = self.tables[t].keys.len();
        let r = self.routes.as_mut().unwrap();
        r.stats.keys_added += keys.len() as u64;
        if r.linear.len() <= t {
            r.linear.resize_with(t + 1, || None);
        }
        let lin = r.linear[t].get_or_insert_with(|| Linear::new(&self.sets[t]));
        let tb = &mut self.tables[t];
        for k in keys {
            tb.lut_index.push(tb.vmu.index(&k) as u32);
            tb.oracle.push(lin.classify(&k));
            tb.keys.push(k);
        }
        self.keys_added(t, from);
        from
    }

    /// Appends keys new to table `t` (their routes come later, in
    /// [`Self::append_routes`]) with the entry the program matched for
    /// each: a key whose oracle answer differs is counted in
    /// `wrong_action`, as the build checks `expected`.
    pub fn append_keys(&mut self, t: usize, keys: Vec<Key<N>>, expected: Vec<Match>) -> Result<(), SimError> {
        if self.routes.is_none() {
            return err("append_keys: this simulator is not routed (build_routed)");
        }
        if t >= self.tables.len() || keys.len() != expected.len() {
            return err(format!("append_keys: table {t} of {}, {} keys and {} answers", self.tables.len(), keys.len(), expected.len()));
        }
        let from = self.add_keys(t, keys);
        let bad = self.tables[t].oracle[from..].iter().zip(&expected).filter(|(o, e)| o != e).count();
        self.wrong_action += bad as u64;
        Ok(())
    }

    /// Appends routes, flow r following route r (a stream's routes: every
    /// route appended so far has its flow). Route i's hops are
    /// `start[i]..start[i + 1]` of `table`/`key`, none empty.
    pub fn append_routes(&mut self, start: &[u32], table: &[u16], key: &[u32]) -> Result<(), SimError> {
        let nt = self.tables.len();
        let Some(r) = self.routes.as_mut() else {
            return err("append_routes: this simulator is not routed (build_routed)");
        };
        let routes = r.start.len() - 1;
        if r.flow_route.len() != routes || r.stats.requested > 0 {
            return err("append_routes: the flows are not the routes (routes were changed)");
        }
        if start.first() != Some(&0) || *start.last().unwrap() as usize != table.len() || table.len() != key.len()
            || start.windows(2).any(|w| w[1] <= w[0])
        {
            return err("append_routes: start must be increasing offsets from 0 to the number of hops (no empty route)");
        }
        for (&t, &k) in table.iter().zip(key) {
            let Some(tb) = self.tables.get(t as usize) else {
                return err(format!("append_routes: hop names table {t} of {nt}"));
            };
            if k as usize >= tb.keys.len() {
                return err(format!("append_routes: hop names key {k} of table {:?} ({} keys)", tb.name, tb.keys.len()));
            }
        }
        if routes + start.len() >= NO_ROUTE as usize {
            return err("append_routes: too many routes");
        }
        let base = r.table.len() as u32;
        r.table.extend_from_slice(table);
        r.key.extend_from_slice(key);
        for &s in &start[1..] {
            r.start.push(base + s);
            r.flow_route.push(r.route_txn.len() as u32);
            r.route_txn.push(0);
        }
        r.stats.routes = r.route_txn.len() as u64;
        r.stats.flows = r.flow_route.len() as u64;
        Ok(())
    }

    /// Flows whose route change's transaction is in force at every table
    /// switch now; the program's answers on their new hops are checked.
    pub(super) fn apply_routes(&mut self) {
        if self.routes.as_ref().is_none_or(|r| r.waiting.is_empty()) {
            return;
        }
        let open = self.open_from();
        loop {
            let r = self.routes.as_mut().unwrap();
            if !r.waiting.front().is_some_and(|w| w.txn < open) {
                return;
            }
            let w = r.waiting.pop_front().unwrap();
            r.flow_route[w.flow as usize] = w.route;
            let q = r.waiting_of.get_mut(&w.flow).unwrap();
            q.pop_front();
            if q.is_empty() {
                r.waiting_of.remove(&w.flow);
            }
            r.stats.applied += 1;
            if w.expected.is_empty() {
                continue;
            }
            let h0 = r.start[w.route as usize] as usize;
            let hops: Vec<(u16, u32)> = (0..w.expected.len()).map(|i| (r.table[h0 + i], r.key[h0 + i])).collect();
            let (mut checked, mut bad, mut unk) = (0, 0, 0);
            for ((t, k), e) in hops.into_iter().zip(w.expected) {
                match self.answer_and_expected(t as usize, k, w.txn, e) {
                    Some((a, x)) => {
                        checked += 1;
                        bad += (a != x) as u64;
                    }
                    None => unk += 1,
                }
            }
            self.wrong_action += bad;
            let s = &mut self.routes.as_mut().unwrap().stats;
            s.checked += checked;
            s.mismatched += bad;
            s.unchecked += unk;
        }
    }

    /// Counters of the routes and their changes (None: not routed).
    pub fn route_stats(&self) -> Option<RouteStats> {
        self.routes.as_ref().map(|r| r.stats.clone())
    }

    /// The route (hops: table, key index) flow `f` follows now (empty: none).
    pub fn flow_route(&self, f: u32) -> Vec<(u16, u32)> {
        let Some((route, _, _)) = self.routes.as_ref().and_then(|r| r.first(f)) else {
            return Vec::new();
        };
        let r = self.routes.as_ref().unwrap();
        let (a, b) = (r.start[route as usize] as usize, r.start[route as usize + 1] as usize);
        (a..b).map(|h| (r.table[h], r.key[h])).collect()
    }

    /// Arrivals pushed but not yet entered.
    pub fn pending_arrivals(&self) -> usize {
        self.routes
            .as_ref()
            .map_or(0, |r| r.feed.0.lock().unwrap().len())
            + self.next_arrival.is_some() as usize
    }
}

/// A capture streamed into the simulator (`program::stream`): keys of
/// fewer words than the simulator's are zero-padded, as the build pads them.
impl<const N: usize> crate::program::RouteSink for Simulator<N> {
    fn append_keys(&mut self, table: u16, words: usize, keys: &[u32], expected: &[i32]) -> Result<(), String> {
        if words > N || words == 0 || keys.len() != words * expected.len() {
            return Err(format!("append_keys: {} words of {words}-word keys for {} answers ({N}-word simulator)", keys.len(), expected.len()));
        }
        let ks = keys.chunks(words).map(Key::from_words).collect();
        let ex = expected.iter().map(|&e| (e >= 0).then_some(e as u32)).collect();
        Simulator::append_keys(self, table as usize, ks, ex).map_err(|e| e.0)
    }
    fn append_routes(&mut self, start: &[u32], table: &[u16], key: &[u32]) -> Result<(), String> {
        Simulator::append_routes(self, start, table, key).map_err(|e| e.0)
    }
    fn push_arrivals(&mut self, t_ps: &[u64], flow: &[u32]) -> Result<(), String> {
        Simulator::push_arrivals(self, t_ps, flow).map_err(|e| e.0)
    }
    /// The data plane's adds and expiries become the update engine's
    /// inserts (after the table's entries) and deletes, each requested at
    /// its packet's arrival: the ELU's rule store follows the learned
    /// entries and the PMUs' copies are invalidated as for any update.
    fn table_writes(&mut self, table: u16, words: usize, writes: &[crate::program::learn::Write]) -> Result<(), String> {
        let t = table as usize;
        if t >= self.tables.len() || words > N || words == 0 {
            return Err(format!("table_writes: table {table} of {}, {words}-word keys ({N}-word simulator)", self.tables.len()));
        }
        if self.learned.len() < self.tables.len() {
            self.learned.resize(self.tables.len(), Vec::new());
        }
        let fixed = self.sets[t].rules.len() as u32;
        let mut ops = Vec::with_capacity(writes.len());
        for w in writes {
            if w.key.len() != words {
                return Err(format!("table_writes: a key of {} words for table {table} of {words}", w.key.len()));
            }
            let live = &mut self.learned[t];
            let c = self.clock.ceil(w.t_us.saturating_mul(1_000_000));
            if w.add {
                let fm: Vec<_> = w.key.iter().map(|&x| crate::rules::FieldMatch::exact(x)).collect();
                ops.push((c, super::updates::Op::Insert { pos: fixed + live.len() as u32, rule: crate::rules::Rule::new(&fm, 0, 0) }));
                live.push(w.number);
            } else {
                let Some(i) = live.iter().position(|&n| n == w.number) else {
                    return Err(format!("table_writes: entry {} of table {table} expires but was never added", w.number));
                };
                live.remove(i);
                ops.push((c, super::updates::Op::Delete { pos: fixed + i as u32 }));
            }
        }
        self.schedule_ops(table, ops).map_err(|e| e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{FieldMatch, FieldSpec, MatchKind, Rule, Schema};

    /// A one-field ternary table in `N`-word keys (the words past the first
    /// are zero in keys and don't-care in rules).
    fn table<const N: usize>(name: &str, rules: &[(u32, u32)], keys: &[u32]) -> RoutedTable<N> {
        let schema = Schema {
            fields: vec![FieldSpec {
                name: "f".into(),
                bits: 32,
                kind: MatchKind::Ternary,
            }],
        };
        let rules: Vec<Rule<N>> = rules
            .iter()
            .enumerate()
            .map(|(i, &(v, m))| Rule::new(&[FieldMatch::ternary(v, m)], (100 - i) as u32, i as u32))
            .collect();
        let set = RuleSet::new(schema, rules);
        let keys: Vec<Key<N>> = keys.iter().map(|&k| Key::from_words(&[k])).collect();
        let lin = Linear::new(&set);
        let expected = keys.iter().map(|k| lin.classify(k)).collect();
        RoutedTable {
            name: name.into(),
            rules: set,
            keys,
            expected,
        }
    }

    fn config(names: &[&str], pmus: &[Vec<u32>]) -> Config {
        let mut c = Config::default();
        c.pmus.count = 4;
        c.tables = names
            .iter()
            .zip(pmus)
            .map(|(n, p)| {
                let mut t = c.tables[0].clone();
                t.name = n.to_string();
                t.pmus = p.clone();
                t
            })
            .collect();
        c
    }

    /// Three routes over two tables in `N`-word keys: the invariants and
    /// the per-table summaries.
    fn run_routes<const N: usize>() -> (Invariants, Vec<(String, TableSummary)>) {
        let a = table::<N>("a", &[(1, 0xff), (0, 0)], &[1, 2]);
        let b = table::<N>("b", &[(7, 0xff)], &[7, 8]);
        let c = config(&["a", "b"], &[vec![0], vec![]]);
        // route 0: a(key 1) -> b(key 7); route 1: b(key 8) only; route 2: a(key 2).
        let mut sim = Simulator::<N>::build_routed(
            c,
            vec![a, b],
            vec![0, 2, 3, 4],
            vec![0, 1, 1, 0],
            vec![0, 0, 1, 1],
        )
        .unwrap();
        let n = 300u32;
        let t: Vec<u64> = (0..n as u64).map(|i| i * 200_000).collect();
        let r: Vec<u32> = (0..n).map(|i| i % 3).collect();
        sim.push_arrivals(&t[..150], &r[..150]).unwrap();
        sim.run_until_ns(30_000.0);
        sim.push_arrivals(&t[150..], &r[150..]).unwrap();
        assert!(sim.push_arrivals(&[0], &[0]).is_err(), "time went back");
        sim.run_until_ns(200_000.0);
        let summary = sim.summary();
        assert!(sim.drain().drained);
        assert!(sim.push_arrivals(&[300_000_000], &[0]).is_err(), "the run has ended");
        (sim.check_invariants(), summary)
    }

    #[test]
    fn phvs_follow_their_routes() {
        let (inv, s) = run_routes::<8>();
        assert!(inv.ok(), "{inv:?}");
        assert_eq!(inv.exited, 300);
        // a: routes 0 and 2 (200 visits); b: routes 0 and 1 (200 visits).
        assert_eq!(s[0].1.keys, 200);
        assert_eq!(s[1].1.keys, 200);
    }

    /// A learned entry (`program::learn`) through `RouteSink::table_writes`:
    /// key 2 of table a is added at 50 µs and expires at 150 µs, two
    /// updates requested at those times and committed; every answer is the
    /// versioned oracle's, none stale, and the cached miss was invalidated.
    #[test]
    fn data_plane_writes_become_updates() {
        use crate::program::learn::Write;
        use crate::program::RouteSink;
        let a = table::<8>("a", &[(1, 0xff)], &[2]);
        let c = config(&["a"], &[vec![0]]);
        let mut sim = Simulator::<8>::build_routed(c, vec![a], vec![0, 1], vec![0], vec![0]).unwrap();
        let w = |t_us, add| Write { keyed: 0, t_us, add, number: 1, key: vec![2].into() };
        assert!(RouteSink::table_writes(&mut sim, 0, 2, &[w(50, true)]).is_err(), "a 2-word key for a 1-word table");
        assert!(RouteSink::table_writes(&mut sim, 0, 1, &[w(10, false)]).is_err(), "an expiry of an entry never added");
        RouteSink::table_writes(&mut sim, 0, 1, &[w(50, true), w(150, false)]).unwrap();
        let t: Vec<u64> = (0..200u64).map(|i| i * 1_000_000).collect();
        sim.push_arrivals(&t, &vec![0; 200]).unwrap();
        sim.run_until_ns(250_000.0);
        assert!(sim.drain().drained);
        let inv = sim.check_invariants();
        assert!(inv.ok(), "{inv:?}");
        let u = sim.update_stats();
        assert_eq!((u.requested, u.committed, u.stale_answers), (2, 2, 0));
        // the insert made the key's cached miss stale: its PMU copy was invalidated
        assert!(u.invalidated >= 1, "{u:?}");
    }

    #[test]
    fn wide_keys_route_as_narrow_ones() {
        // The same tables in 16- and 32-word keys: same timing, same counters.
        let narrow = run_routes::<8>();
        assert_eq!(run_routes::<16>(), narrow);
        assert_eq!(run_routes::<32>(), narrow);
    }

    /// "sessions" a (keys 1, 2) and "terminations" b (keys 7): flow 0
    /// (key 1) has a session, so it goes on to b; flow 1 (key 2) has none
    /// and stops at a. Flows alternate, `n` arrivals over 200 µs.
    fn sessions(consistency: Consistency, n: u64) -> Simulator<8> {
        let a = table::<8>("a", &[(1, 0xff)], &[1, 2]);
        let b = table::<8>("b", &[(7, 0xff)], &[7]);
        let mut c = config(&["a", "b"], &[vec![0], vec![1]]);
        c.update_engine.consistency = consistency;
        // route 0: a(key 1) -> b(key 7); route 1: a(key 2).
        let mut sim = Simulator::<8>::build_routed(c, vec![a, b], vec![0, 2, 3], vec![0, 1, 0], vec![0, 0, 1]).unwrap();
        let t: Vec<u64> = (0..n).map(|i| i * 200_000_000 / n).collect();
        let f: Vec<u32> = (0..n as u32).map(|i| i % 2).collect();
        sim.push_arrivals(&t, &f).unwrap();
        sim
    }

    fn ternary(v: u32) -> Rule<8> {
        Rule::new(&[FieldMatch::ternary(v, 0xff)], 0, 0)
    }

    /// One write: flow 1 gets a session (a: insert 2) and a termination
    /// (b: insert 8, a key new to b); flow 0's session is deleted. Flow 1
    /// now goes a(2) -> b(8), flow 0 stops at a. `expected`: the program's
    /// matched positions per new hop.
    fn the_write(expected: Vec<Option<u32>>) -> RouteChange<8> {
        RouteChange {
            ops: vec![
                (0, vec![Op::Insert { pos: 1, rule: ternary(2) }, Op::Delete { pos: 0 }]),
                (1, vec![Op::Insert { pos: 1, rule: ternary(8) }]),
            ],
            new_keys: vec![(1, Key::from_words(&[8]))],
            flows: vec![1, 0],
            route_start: vec![0, 2, 3],
            hop_table: vec![0, 1, 0],
            hop_key: vec![1, 1, 0],
            hop_expected: expected,
        }
    }

    #[test]
    fn a_route_change_takes_effect_at_its_transactions_flip() {
        let mut sim = sessions(Consistency::Program, 2000);
        sim.run_until_ns(60_000.0);
        let before = sim.summary();
        let txn = sim.change_routes(the_write(vec![Some(0), Some(1), None])).unwrap();
        assert_eq!(txn, 1);
        // Requested, not in force: the flows keep their routes until the flip.
        assert_eq!(sim.flow_route(1), vec![(0, 1)]);
        assert_eq!(sim.route_stats().unwrap().applied, 0);
        sim.run_until_ns(200_000.0);
        assert_eq!(sim.flow_route(1), vec![(0, 1), (1, 1)]);
        assert_eq!(sim.flow_route(0), vec![(0, 0)]);
        let inv = sim.check_invariants();
        assert!(inv.ok(), "{inv:?}");
        assert_eq!(inv.exited, 2000);
        let u = sim.update_stats();
        assert_eq!((u.flips, u.committed, u.stale_answers), (1, 3, 0));
        assert_eq!(u.mixed_version_phvs + u.mixed_unresolved, 0, "{u:?}");
        assert!(u.checked_phvs > 0, "answers at a and b checked against one version");
        let r = sim.route_stats().unwrap();
        assert_eq!((r.applied, r.checked, r.mismatched, r.unchecked), (2, 3, 0, 0), "{r:?}");
        assert_eq!(r.wrong_version_routes, 0);
        assert_eq!((r.keys_added, r.routes), (1, 4));
        // b saw flow 0 before the flip and flow 1 after: about half of all.
        let s = sim.summary();
        let bkeys = |s: &Vec<(String, TableSummary)>| s[1].1.keys;
        assert_eq!(bkeys(&before), 300);
        assert!((995..=1005).contains(&bkeys(&s)), "{}", bkeys(&s));
        assert_eq!(s[0].1.keys, 2000);
    }

    #[test]
    fn per_phv_answers_follow_the_stamped_version_across_many_changes() {
        // Flip flow 1 on and off every 20 µs at 200 Mpps: every PHV's
        // answers match its version and so does its route.
        let mut sim = sessions(Consistency::Program, 40_000);
        for (i, at) in (1..9).map(|i| (i, i as f64 * 20_000.0)) {
            sim.run_until_ns(at);
            let on = i % 2 == 1;
            let c = if on {
                // flow 1 gains its session (a: insert 2 at the end) and goes to b(7).
                RouteChange {
                    ops: vec![(0, vec![Op::Insert { pos: 1, rule: ternary(2) }])],
                    flows: vec![1],
                    route_start: vec![0, 2],
                    hop_table: vec![0, 1],
                    hop_key: vec![1, 0],
                    hop_expected: vec![Some(1), Some(0)],
                    ..RouteChange::default()
                }
            } else {
                RouteChange {
                    ops: vec![(0, vec![Op::Delete { pos: 1 }])],
                    flows: vec![1],
                    route_start: vec![0, 1],
                    hop_table: vec![0],
                    hop_key: vec![1],
                    hop_expected: vec![None],
                    ..RouteChange::default()
                }
            };
            sim.change_routes(c).unwrap();
        }
        sim.run_until_ns(200_000.0);
        assert!(sim.drain().drained);
        let inv = sim.check_invariants();
        assert!(inv.ok(), "{inv:?}");
        let u = sim.update_stats();
        assert_eq!((u.flips, u.stale_answers, u.mixed_version_phvs + u.mixed_unresolved), (8, 0, 0), "{u:?}");
        assert!(u.old_version_answers > 0, "some PHVs in flight at a flip were answered by the old version");
        let r = sim.route_stats().unwrap();
        assert_eq!((r.applied, r.checked, r.mismatched, r.wrong_version_routes), (8, 12, 0, 0), "{r:?}");
        // Overloaded (drops): PHVs wait, so some stamped before a flip
        // look up after it.
        assert!(inv.dropped > 0 && sim.summary()[1].1.keys > 0);
    }

    #[test]
    fn per_table_commits_switch_routes_once_every_table_committed() {
        // Table consistency: a and b commit on their own; the flows switch
        // after the later of the two, and the hops check as before.
        let mut sim = sessions(Consistency::Table, 2000);
        sim.run_until_ns(60_000.0);
        sim.change_routes(the_write(vec![Some(0), Some(1), None])).unwrap();
        assert_eq!(sim.flow_route(1), vec![(0, 1)]);
        sim.run_until_ns(200_000.0);
        assert_eq!(sim.flow_route(1), vec![(0, 1), (1, 1)]);
        let inv = sim.check_invariants();
        assert!(inv.ok(), "{inv:?}");
        let u = sim.update_stats();
        assert_eq!((u.batches, u.committed, u.stale_answers, u.flips), (2, 3, 0, 0));
        let r = sim.route_stats().unwrap();
        assert_eq!((r.applied, r.checked, r.mismatched), (2, 3, 0), "{r:?}");
    }

    #[test]
    fn a_program_answer_the_oracle_does_not_give_is_counted() {
        let mut sim = sessions(Consistency::Program, 2000);
        sim.run_until_ns(60_000.0);
        // flow 0's hop at a claims a hit after its session was deleted.
        sim.change_routes(the_write(vec![Some(0), Some(1), Some(0)])).unwrap();
        sim.run_until_ns(200_000.0);
        let r = sim.route_stats().unwrap();
        assert_eq!((r.checked, r.mismatched), (3, 1));
        assert_eq!(sim.check_invariants().wrong_action, 1);
    }

    #[test]
    fn route_changes_are_checked_before_anything_moves() {
        let mut sim = sessions(Consistency::Program, 2000);
        let mut bad = the_write(Vec::new());
        bad.hop_key[1] = 2; // b has 1 key + 1 new
        assert!(sim.change_routes(bad).is_err());
        let mut bad = the_write(Vec::new());
        bad.route_start = vec![0, 3, 2];
        assert!(sim.change_routes(bad).is_err());
        assert_eq!(sim.update_stats().requested, 0);
        assert_eq!(sim.route_stats().unwrap().requested, 0);
        // A flow with no route: its arrivals are not created; a new flow.
        let c = RouteChange {
            flows: vec![0, 5],
            route_start: vec![0, 0, 1],
            hop_table: vec![0],
            hop_key: vec![0],
            ..RouteChange::default()
        };
        sim.change_routes(c).unwrap();
        assert!(sim.flow_route(0).is_empty());
        sim.push_arrivals(&[300_000_000], &[5]).unwrap();
        sim.run_until_ns(400_000.0);
        let r = sim.route_stats().unwrap();
        assert_eq!((r.unrouted, r.flows), (1000, 6));
        let inv = sim.check_invariants();
        assert!(inv.ok(), "{inv:?}");
        assert_eq!(inv.created, 1001);
    }

    /// The stand-in program's tables (`program::standin`) as rule sets.
    fn standin_tables<const N: usize>() -> Vec<RoutedTable<N>> {
        let field = |name: &str, kind| FieldSpec { name: name.into(), bits: 32, kind };
        let mk = |name: &str, fields: Vec<FieldSpec>, rules: Vec<Vec<FieldMatch>>| {
            let n = rules.len();
            let rules = rules.iter().enumerate().map(|(i, f)| Rule::new(f, (n - i) as u32, i as u32)).collect();
            RoutedTable { name: name.into(), rules: RuleSet::new(Schema { fields }, rules), keys: Vec::new(), expected: Vec::new() }
        };
        vec![
            mk("route", vec![field("dst", MatchKind::Lpm)], vec![
                vec![FieldMatch::prefix(0x0a02_0300, 24, 32)],
                vec![FieldMatch::prefix(0x0a01_0000, 16, 32)],
                vec![FieldMatch::prefix(0x0a00_0000, 8, 32)],
            ]),
            mk("nhop", vec![field("nhop", MatchKind::Exact)], vec![vec![FieldMatch::exact(0)], vec![FieldMatch::exact(1)]]),
            mk("acl", vec![field("proto", MatchKind::Ternary), field("dport", MatchKind::Ternary)], vec![
                vec![FieldMatch::ternary(17, 0xff), FieldMatch::ternary(53, 0xffff)],
                vec![FieldMatch::ternary(17, 0xff), FieldMatch::ANY],
            ]),
        ]
    }

    #[test]
    fn a_streamed_capture_runs_to_a_drained_end_with_the_programs_answers() {
        use crate::program::capture::{tests::pcap, Capture, OnTruncated};
        use crate::program::standin::{frame, Standin};
        use crate::program::{Clock, Port, Stream};
        // 300 flows x 20 packets, every frame different, at 20 Mpps.
        let frames: Vec<Vec<u8>> = (0..20).flat_map(|r| (0..300).map(move |f| frame(f, r))).collect();
        let recs: Vec<(u32, u32, &[u8])> = frames.iter().map(|d| (0, 0, &d[..])).collect();
        let cap = Capture::from_reader("x", std::io::Cursor::new(pcap(&recs, false, false)), OnTruncated::Error).unwrap();
        let mut exec = Standin::default();
        let mut s = Stream::new(cap, exec.key_words_all(), Clock::Rate { gap_ps: 50_000.0 }, Port::Fixed(0), None, None).unwrap();
        s.fill(u64::MAX, 1000, &mut exec).unwrap();
        assert_eq!(s.visited(), vec![0, 1, 2]);
        s.simulate(vec![Some(0), Some(1), Some(2)]).unwrap();
        let c = config(&["route", "nhop", "acl"], &[vec![0], vec![1], vec![2, 3]]);
        let mut sim = Simulator::<8>::build_routed(c, standin_tables(), vec![0], vec![], vec![]).unwrap();
        let mut t = 0u64;
        while !s.is_done() {
            t += 5_000_000;
            s.fill(t, u64::MAX, &mut exec).unwrap();
            s.sync(&mut sim).unwrap();
            sim.run_until_ns(t as f64 / 1000.0);
        }
        sim.run_until_ns(t as f64 / 1000.0 + 50_000.0);
        let inv = sim.check_invariants();
        assert!(inv.ok(), "{inv:?}");
        assert_eq!((inv.in_flight, inv.dropped, inv.wrong_action), (0, 0, 0), "{inv:?}");
        assert_eq!(inv.created, 6000 - s.counters.unrouted);
        // The simulator looked up every key the program did.
        let sum = sim.summary();
        for (ti, (_, ts)) in sum.iter().enumerate() {
            assert_eq!(ts.keys, s.counters.lookups[ti], "table {ti}");
        }
        let r = sim.route_stats().unwrap();
        assert_eq!(r.routes as usize, s.interner().n_routes());
        assert!(r.routes <= 300 && r.keys_added > 0);
        // An answer the oracle does not give is counted.
        let mut one = Simulator::<8>::build_routed(config(&["route", "nhop", "acl"], &[vec![0], vec![], vec![]]),
                                                  standin_tables(), vec![0], vec![], vec![]).unwrap();
        one.append_keys(0, vec![Key::from_words(&[0x0a02_0301]), Key::from_words(&[0x0b00_0000])], vec![Some(1), None]).unwrap();
        assert_eq!(one.check_invariants().wrong_action, 1);
        assert!(one.append_routes(&[0, 1], &[0], &[2]).is_err(), "key 2 of 2");
        one.append_routes(&[0, 1, 2], &[0, 0], &[0, 1]).unwrap();
        assert_eq!(one.flow_route(1), vec![(0, 1)]);
    }

    #[test]
    fn an_oracle_disagreeing_with_the_program_is_counted() {
        let mut a = table::<8>("a", &[(1, 0xff)], &[1]);
        a.expected = vec![None];
        let c = config(&["a"], &[vec![0]]);
        let sim = Simulator::build_routed(c, vec![a], vec![0, 1], vec![0], vec![0]).unwrap();
        assert_eq!(sim.check_invariants().wrong_action, 1);
    }
}

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
//! one call per control period across PyO3), never one by one.

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

/// The routes and the position of every PHV in flight on its route.
pub(super) struct Routes {
    /// Route r's hops are `start[r]..start[r + 1]` of `table` / `key`.
    start: Vec<u32>,
    table: Vec<u16>,
    key: Vec<u32>,
    /// PHV id → index of its current hop.
    at: HashMap<u64, u32>,
    feed: Feed,
    last_t_ps: u64,
}

impl Routes {
    /// The first hop of route `r`.
    pub(super) fn first(&self, r: u32) -> (u16, u32) {
        let h = self.start[r as usize] as usize;
        (self.table[h], self.key[h])
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

/// Builds the ELU structure of a program table: the configured algorithm if
/// its budget allows, else the decision tree, else the linear scan (P4
/// ternary masks need not be prefixes).
fn walker_for<const N: usize>(
    algo: Algo,
    set: &RuleSet<N>,
    name: &str,
) -> Result<Box<dyn MemoryWalk<N> + Send>, SimError> {
    let b = crate::classify::BuildConfig::default();
    let mut last = None;
    for a in [algo, Algo::Dtree, Algo::Linear] {
        match build::build_walker(a, set, name, &b) {
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
    /// `route_start[r]..route_start[r + 1]` of `hop_table`/`hop_key`; every
    /// route has at least one hop. Arrivals come from [`Self::push_arrivals`].
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
        if route_start.windows(2).any(|w| w[1] <= w[0]) {
            return err("routed: every route needs at least one hop (route_start increasing)");
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
            sim.walkers[i] = walker_for(algo, set, &sim.tables[i].name)?;
            // The oracle (linear over the rule set) must agree with the program.
            for (o, e) in sim.tables[i].oracle.iter().zip(&expected[i]) {
                if o != e {
                    sim.wrong_action += 1;
                }
            }
        }
        sim.routes = Some(Routes {
            start: route_start,
            table: hop_table,
            key: hop_key,
            at: HashMap::new(),
            feed,
            last_t_ps: 0,
        });
        Ok(sim)
    }

    /// Appends arrivals (times in ps, non-decreasing, and route ids) to a
    /// routed simulator's input.
    pub fn push_arrivals(&mut self, t_ps: &[u64], route: &[u32]) -> Result<(), SimError> {
        let Some(r) = self.routes.as_mut() else {
            return err("push_arrivals: this simulator is not routed (build_routed)");
        };
        if t_ps.len() != route.len() {
            return err("push_arrivals: t_ps and route differ in length");
        }
        let n_routes = r.start.len() - 1;
        let mut last = r.last_t_ps;
        for (&t, &x) in t_ps.iter().zip(route) {
            if t < last {
                return err(format!(
                    "push_arrivals: times must not decrease ({t} after {last} ps)"
                ));
            }
            if x as usize >= n_routes {
                return err(format!("push_arrivals: route {x} of {n_routes}"));
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

    /// Arrivals pushed but not yet entered.
    pub fn pending_arrivals(&self) -> usize {
        self.routes
            .as_ref()
            .map_or(0, |r| r.feed.0.lock().unwrap().len())
            + self.next_arrival.is_some() as usize
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
        (sim.check_invariants(), sim.summary())
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

    #[test]
    fn wide_keys_route_as_narrow_ones() {
        // The same tables in 16- and 32-word keys: same timing, same counters.
        let narrow = run_routes::<8>();
        assert_eq!(run_routes::<16>(), narrow);
        assert_eq!(run_routes::<32>(), narrow);
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

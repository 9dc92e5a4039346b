//! Lookups under update churn: the measurement behind `synapse bench
//! classify --updates-per-s`.
//!
//! One thread alternates batches of lookups over a trace with the updates
//! owed at the offered rate, on a clock of lookup plus update time: random
//! deletes and inserts of rules like the set's, keeping the set near its
//! size, placed as [`Placement`] says: copies of its rules at uniformly
//! random positions (priorities collide, every tree's best rule drops), or
//! rules of the set that the churn deleted put back at their own priority
//! (between the rules next to them in the set's order: the priorities
//! follow the set's, as ClassBench-derived update benchmarks and
//! TupleMerge's delete and re-insert rules of the set), or new rules
//! (a rule of the set with a sibling prefix on one address: as specific
//! as it) at the rank their specificity gives (their parent's place in the
//! set's order among the rules now). Every update
//! is timed on its own (its latency, including any fold-in it makes); the
//! lookups are timed per batch. A sample of each batch's answers is checked
//! against the linear oracle over the rules as they were then, after the
//! run (the updates replayed): a linear scan between the batches would
//! evict the structure from the caches and charge the lookups for it.
//! `wrong` counts the answers that differ.

use super::{Incremental, Match};
use crate::rules::{Key, Rule, RuleSet};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use std::time::Instant;

/// Where the churn's inserts go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// Copies of the set's rules at uniformly random positions.
    #[default]
    Uniform,
    /// Rules of the set that the churn deleted, each back at its own
    /// priority (its place in the set's order among the rules left).
    Near,
    /// New rules like the set's: a rule of the set with one address
    /// prefix moved to its sibling (same length, so as specific), at its
    /// parent's place in the set's order among the rules now (after the
    /// rules of lower rank, among those of the same).
    Rank,
}

impl std::str::FromStr for Placement {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "uniform" => Ok(Placement::Uniform),
            "near" => Ok(Placement::Near),
            "rank" => Ok(Placement::Rank),
            _ => Err(format!("unknown churn placement {s:?} (expected uniform, near or rank)")),
        }
    }
}

/// What a churn run measured.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ChurnReport {
    /// Where the inserts went.
    pub churn: Placement,
    pub lookups: u64,
    /// Seconds spent in lookups and in updates (the run's clock).
    pub lookup_s: f64,
    pub update_s: f64,
    pub updates: u64,
    /// Latency of single updates (each timed alone), microseconds.
    pub update_latency_us_p50: f64,
    pub update_latency_us_p99: f64,
    pub update_latency_us_max: f64,
    /// Answers checked against the oracle and those that differed.
    pub checked: u64,
    pub wrong: u64,
    /// Rules at the end.
    pub rules: usize,
    /// Latency of single updates at the 99.9th percentile, microseconds.
    pub update_latency_us_p999: f64,
    /// Updates owed at the end (due at the offered rate, not made): more
    /// than a catch-up group's worth says the offered rate was above the
    /// update path's capacity, the run saturated (`saturated`).
    pub updates_owed: u64,
    pub saturated: bool,
    /// The rules as the churn left them, in priority order (for a fresh
    /// build: [`static_rate`]).
    #[serde(skip)]
    pub final_rules: Vec<Rule>,
}

impl ChurnReport {
    /// Lookups per second of lookup time: the structure's rate under churn.
    pub fn lookups_per_s(&self) -> f64 {
        self.lookups as f64 / self.lookup_s.max(1e-12)
    }
    /// Updates per second of the run's clock (lookups and updates): what was
    /// sustained at the offered rate on one core.
    pub fn updates_per_s(&self) -> f64 {
        self.updates as f64 / (self.lookup_s + self.update_s).max(1e-12)
    }
    /// Updates per second of update time: the update path's capacity.
    pub fn update_capacity_per_s(&self) -> f64 {
        self.updates as f64 / self.update_s.max(1e-12)
    }
}

/// Lookups per batch between updates.
const BATCH: usize = 1024;
/// Answers per batch checked against the oracle.
const CHECK: usize = 16;
/// Most updates between two batches: offered above the update path's
/// capacity, the debt would otherwise grow with every group and leave the
/// lookups a few batches in the whole run (their rate measured over
/// microseconds); capped, the run alternates and reports the debt.
const CATCH_UP: u64 = 256;

/// Runs `keys` through `t` (built over `set`) in batches for about `secs`
/// seconds of lookup and update time while updates arrive at `rate` per
/// second of that time (`rate` 0: no updates). Seeded: the same seed makes
/// the same updates (their timing follows the clock).
pub fn run(t: &mut dyn Incremental, set: &RuleSet, keys: &[Key], rate: f64, secs: f64, seed: u64, placement: Placement) -> ChurnReport {
    let mut rng = Pcg64::seed_from_u64(seed);
    let n0 = set.len();
    // The oracle's rules as indices into `arena` (cheap to move about).
    let arena: Vec<Rule> = set.rules.clone();
    // The rules now: their number and, for `Near` (the rules of the set
    // left, ascending: each at its own priority), a bit per rule of the
    // set; the rules deleted, to be put back. (Not the list of rules, whose
    // shifting per update would charge the lookups with its cache misses:
    // the oracle replays the updates after the run.)
    let mut len = n0;
    let mut present: Vec<u64> = (0..n0.div_ceil(64)).map(|w| if (w + 1) * 64 <= n0 { !0 } else { (1u64 << (n0 % 64)) - 1 }).collect();
    let mut rep = ChurnReport { churn: placement, ..Default::default() };
    let mut gone: Vec<u32> = Vec::new();
    // For `Rank`: per rank (a rule of the set) the rules now that hold it
    // (the rule or its mutants), as a Fenwick tree: the rules now are in
    // rank order, so a position's rank is a select and a rank's place a sum.
    let mut at_rank = Fenwick::ones(if placement == Placement::Rank { n0 } else { 0 });
    // A mutant of rule `p` on field `f` is rule `n0 + p * nf + f` (made
    // again where needed: no list that grows with the run).
    let nf = set.schema.len();
    let rule = |i: u32| if (i as usize) < n0 { arena[i as usize] } else { mutant(&arena[(i as usize - n0) / nf], (i as usize - n0) % nf) };
    let mut lat: Vec<f32> = Vec::new();
    let mut out = vec![0i32; BATCH];
    let mut at = 0usize;
    // The updates in order (position, rule; `u32::MAX`: a delete) and the
    // answers to check (updates before, key, answer), for the oracle after
    // the run.
    let mut log: Vec<(u32, u32)> = Vec::new();
    let mut sample: Vec<(u64, u32, i32)> = Vec::new();
    if keys.is_empty() {
        return rep;
    }
    while rep.lookup_s + rep.update_s < secs {
        // The updates due by now on the run's clock.
        let due = (rate * (rep.lookup_s + rep.update_s)) as u64;
        let due = due.min(rep.updates + CATCH_UP);
        // (Not past the run's end: a slow update must not owe a flood.)
        while rep.updates < due && n0 > 0 && rep.lookup_s + rep.update_s < secs {
            // Keep the set within a few per cent of its size.
            let insert = len == 0 || (len < n0 + n0 / 32 + 1 && (len <= n0 - n0.min(n0 / 32) || rng.gen::<bool>()));
            // (Near: only a deleted rule goes back, so the set stays at or
            // below its size.)
            let insert = insert && (placement != Placement::Near || !gone.is_empty());
            if insert {
                let (pos, r) = match placement {
                    Placement::Uniform => (rng.gen_range(0..=len), rng.gen_range(0..n0) as u32),
                    Placement::Near => {
                        let r = gone.swap_remove(rng.gen_range(0..gone.len()));
                        present[r as usize / 64] |= 1 << (r % 64);
                        (rank(&present, r), r)
                    }
                    Placement::Rank => {
                        let p = rng.gen_range(0..n0);
                        let below = at_rank.prefix(p);
                        let pos = below + rng.gen_range(0..=at_rank.prefix(p + 1) - below);
                        at_rank.add(p, 1);
                        let r = &set.rules[p];
                        let fs = (0..nf).filter(|&f| set.schema.fields[f].kind == crate::rules::MatchKind::Lpm && r.fields[f].mask != 0 && r.fields[f].lo == r.fields[f].hi);
                        // (A rule with no address prefix goes in as it is.)
                        let f = fs.clone().nth(rng.gen_range(0..fs.count().max(1)));
                        (pos, f.map_or(p, |f| n0 + p * nf + f) as u32)
                    }
                };
                let t0 = Instant::now();
                t.insert(pos, rule(r)).expect("insert in range");
                let dt = t0.elapsed();
                len += 1;
                log.push((pos as u32, r));
                lat.push(dt.as_secs_f32());
                rep.update_s += dt.as_secs_f64();
            } else {
                let pos = rng.gen_range(0..len);
                let t0 = Instant::now();
                t.delete(pos).expect("delete in range");
                let dt = t0.elapsed();
                if placement == Placement::Near {
                    let r = select(&present, pos as u32);
                    present[r as usize / 64] &= !(1 << (r % 64));
                    gone.push(r);
                }
                if placement == Placement::Rank {
                    at_rank.add(at_rank.select(pos), -1);
                }
                len -= 1;
                log.push((pos as u32, u32::MAX));
                lat.push(dt.as_secs_f32());
                rep.update_s += dt.as_secs_f64();
            }
            rep.updates += 1;
        }
        let end = (at + BATCH).min(keys.len());
        let batch = &keys[at..end];
        let t0 = Instant::now();
        t.classify_batch(batch, &mut out[..batch.len()]);
        rep.lookup_s += t0.elapsed().as_secs_f64();
        rep.lookups += batch.len() as u64;
        // A sample of the batch for the oracle.
        for i in (0..batch.len()).step_by((batch.len() / CHECK).max(1)) {
            sample.push((rep.updates, (at + i) as u32, out[i]));
        }
        at = if end == keys.len() { 0 } else { end };
    }
    rep.updates_owed = ((rate * (rep.lookup_s + rep.update_s)) as u64).saturating_sub(rep.updates);
    rep.saturated = rep.updates_owed > CATCH_UP;
    // The oracle: the updates replayed, each sample checked against the
    // rules as they were when it was answered.
    let mut now: Vec<u32> = (0..n0 as u32).collect();
    let mut done = 0usize;
    for &(before, k, got) in &sample {
        for &(pos, r) in &log[done..before as usize] {
            match r {
                u32::MAX => _ = now.remove(pos as usize),
                r => now.insert(pos as usize, r),
            }
        }
        done = before as usize;
        let want: Match = now.iter().position(|&r| rule(r).matches(&keys[k as usize])).map(|p| p as u32);
        rep.checked += 1;
        rep.wrong += (got != want.map_or(-1, |p| p as i32)) as u64;
    }
    for &(pos, r) in &log[done..] {
        match r {
            u32::MAX => _ = now.remove(pos as usize),
            r => now.insert(pos as usize, r),
        }
    }
    debug_assert_eq!(now.len(), len);
    rep.rules = now.len();
    if !lat.is_empty() {
        lat.sort_unstable_by(|a, b| a.total_cmp(b));
        let q = |p: f64| lat[((lat.len() - 1) as f64 * p).round() as usize] as f64 * 1e6;
        rep.update_latency_us_p50 = q(0.5);
        rep.update_latency_us_p99 = q(0.99);
        rep.update_latency_us_p999 = q(0.999);
        rep.update_latency_us_max = q(1.0);
    }
    rep.final_rules = now.iter().map(|&r| rule(r)).collect();
    rep
}

/// A rule like `r`, as specific: its address prefix `f` (a value and mask,
/// not a wildcard) moved to its sibling, the last fixed bit flipped.
fn mutant(r: &Rule, f: usize) -> Rule {
    let mut m = *r;
    let f = &mut m.fields[f];
    let bit = f.mask & f.mask.wrapping_neg();
    f.lo ^= bit;
    f.hi ^= bit;
    m
}

/// Counts per index with prefix sums and select in `O(log n)` (a Fenwick
/// tree).
struct Fenwick(Vec<i64>);

impl Fenwick {
    /// `n` counts of one.
    fn ones(n: usize) -> Self {
        let mut t = vec![0i64; n + 1];
        for i in 1..=n {
            t[i] += 1;
            let j = i + (i & i.wrapping_neg());
            if j <= n {
                t[j] += t[i];
            }
        }
        Fenwick(t)
    }
    fn add(&mut self, i: usize, d: i64) {
        let mut i = i + 1;
        while i < self.0.len() {
            self.0[i] += d;
            i += i & i.wrapping_neg();
        }
    }
    /// The sum of the counts below `i`.
    fn prefix(&self, mut i: usize) -> usize {
        let mut s = 0;
        while i > 0 {
            s += self.0[i];
            i -= i & i.wrapping_neg();
        }
        s as usize
    }
    /// The index holding the `p`-th unit (from 0).
    fn select(&self, p: usize) -> usize {
        let (mut at, mut left) = (0usize, p as i64);
        let mut step = (self.0.len() - 1).checked_next_power_of_two().unwrap_or(0);
        while step > 0 {
            if at + step < self.0.len() && self.0[at + step] <= left {
                at += step;
                left -= self.0[at];
            }
            step >>= 1;
        }
        at
    }
}

/// The rules below `r` in the bit set `bits`.
fn rank(bits: &[u64], r: u32) -> usize {
    let w = r as usize / 64;
    bits[..w].iter().map(|b| b.count_ones() as usize).sum::<usize>() + (bits[w] & ((1u64 << (r % 64)) - 1)).count_ones() as usize
}

/// The `p`-th rule (from 0) in the bit set `bits`.
fn select(bits: &[u64], mut p: u32) -> u32 {
    for (w, &b) in bits.iter().enumerate() {
        let c = b.count_ones();
        if p < c {
            let mut b = b;
            for _ in 0..p {
                b &= b - 1;
            }
            return w as u32 * 64 + b.trailing_zeros();
        }
        p -= c;
    }
    unreachable!("position {p} past the rules")
}

/// Lookups per second of `t` over `keys` in whole-trace batch passes for
/// about `secs` seconds (at least one pass): the static rate, measured as
/// `synapse bench classify` measures it, e.g. of a fresh build of the rules
/// a churn left ([`ChurnReport::final_rules`]).
pub fn static_rate<C: super::Classifier + ?Sized>(t: &C, keys: &[Key], secs: f64) -> f64 {
    let mut out = vec![0i32; keys.len()];
    t.classify_batch(keys, &mut out);
    let (mut n, t0) = (0u64, Instant::now());
    while n == 0 || t0.elapsed().as_secs_f64() < secs {
        t.classify_batch(keys, &mut out);
        std::hint::black_box(&out);
        n += keys.len() as u64;
    }
    n as f64 / t0.elapsed().as_secs_f64().max(1e-12)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::partition::{PTree, PTreeConfig};
    use crate::workload::{rulegen, seed::Params, tracegen};

    #[test]
    fn churn_on_a_generated_set_answers_as_the_oracle() {
        let set = rulegen::generate(&Params::builtin("acl").unwrap(), 500, 2);
        let keys: Vec<Key> = tracegen::generate(&set, 4000, tracegen::Pareto::new(1.0, 0.1).unwrap(), 3).iter().map(|e| e.key).collect();
        // A rate high enough for several updates (and fold-ins) per batch;
        // how many depends on the machine, the answers do not.
        for placement in [Placement::Uniform, Placement::Near, Placement::Rank] {
            let mut t = PTree::build(&set, &PTreeConfig { max_delta: 8, ..Default::default() }).unwrap();
            let rep = run(&mut t, &set, &keys, 5e6, 0.1, 1, placement);
            assert!(rep.updates > 0 && rep.checked >= CHECK as u64, "{rep:?}");
            assert_eq!(rep.wrong, 0, "{rep:?}");
            assert_eq!(t.rule_set().rules, rep.final_rules);
        }
    }

    /// A ptree whose answers after its first update are off by one.
    struct OffByOne(PTree, bool);

    impl crate::classify::Classifier for OffByOne {
        fn classify(&self, key: &Key) -> Match {
            self.0.classify(key).map(|p| p + self.1 as u32)
        }
        fn classify_batch(&self, keys: &[Key], out: &mut [i32]) {
            self.0.classify_batch(keys, out);
            out.iter_mut().filter(|o| **o >= 0).for_each(|o| *o += self.1 as i32);
        }
    }

    impl crate::classify::MemoryWalk for OffByOne {
        fn walk(&self, key: &Key, accesses: &mut Vec<crate::classify::MemAccess>) -> Match {
            self.0.walk(key, accesses)
        }
        fn memory_bytes(&self) -> u64 {
            self.0.memory_bytes()
        }
    }

    impl crate::classify::Structure for OffByOne {
        fn stats(&self) -> Vec<(&'static str, String)> {
            Vec::new()
        }
    }

    impl Incremental for OffByOne {
        fn insert(&mut self, pos: usize, rule: Rule) -> Result<(), crate::classify::BuildError> {
            self.1 = true;
            self.0.insert(pos, rule)
        }
        fn delete(&mut self, pos: usize) -> Result<(), crate::classify::BuildError> {
            self.1 = true;
            self.0.delete(pos)
        }
    }

    #[test]
    fn the_oracle_after_the_run_checks_each_answer_against_the_rules_of_its_time() {
        // Answers wrong from the first update on: the batches before it
        // (none due at time 0) check right, those after wrong.
        let set = rulegen::generate(&Params::builtin("acl").unwrap(), 300, 2);
        let keys: Vec<Key> = tracegen::generate(&set, 2000, tracegen::Pareto::new(1.0, 0.1).unwrap(), 3).iter().map(|e| e.key).collect();
        let mut t = OffByOne(PTree::build(&set, &PTreeConfig::default()).unwrap(), false);
        let rep = run(&mut t, &set, &keys, 2e5, 0.05, 1, Placement::Uniform);
        assert!(rep.updates > 0, "{rep:?}");
        assert!(rep.wrong > 0 && rep.wrong < rep.checked, "{rep:?}");
        // The same run with right answers: none wrong.
        let mut t = PTree::build(&set, &PTreeConfig::default()).unwrap();
        let rep = run(&mut t, &set, &keys, 2e5, 0.05, 1, Placement::Uniform);
        assert!(rep.updates > 0 && rep.wrong == 0, "{rep:?}");
    }

    #[test]
    fn offered_above_capacity_the_lookups_keep_their_batches_and_the_run_says_it_saturated() {
        let set = rulegen::generate(&Params::builtin("acl").unwrap(), 500, 2);
        let keys: Vec<Key> = tracegen::generate(&set, 4000, tracegen::Pareto::new(1.0, 0.1).unwrap(), 3).iter().map(|e| e.key).collect();
        // A billion a second: no update path keeps up.
        let mut t = PTree::build(&set, &PTreeConfig::default()).unwrap();
        let rep = run(&mut t, &set, &keys, 1e9, 0.05, 1, Placement::Uniform);
        assert!(rep.saturated && rep.updates_owed > CATCH_UP, "{rep:?}");
        // At most a catch-up group between two batches.
        assert!(rep.updates <= CATCH_UP * (rep.lookups / 900 + 2), "{rep:?}");
        assert_eq!(rep.wrong, 0, "{rep:?}");
        // A thousand a second: kept up with (owing at most the updates due
        // during the last batch: milliseconds' worth if the host preempted
        // it, as when the tests run side by side on a loaded machine).
        let mut t = PTree::build(&set, &PTreeConfig::default()).unwrap();
        let rep = run(&mut t, &set, &keys, 1e3, 0.05, 1, Placement::Uniform);
        assert!(!rep.saturated && rep.updates_owed < 32, "{rep:?}");
    }

    #[test]
    fn near_churn_puts_rules_of_the_set_back_at_their_own_priority() {
        // Each rule made distinct (its destination port), so the order of
        // the rules left says where each went back.
        let mut set = rulegen::generate(&Params::builtin("fw").unwrap(), 300, 4);
        for (i, r) in set.rules.iter_mut().enumerate() {
            r.fields[3] = crate::rules::FieldMatch::range(i as u32, i as u32);
        }
        let keys: Vec<Key> = tracegen::generate(&set, 500, tracegen::Pareto::new(1.0, 0.1).unwrap(), 3).iter().map(|e| e.key).collect();
        let mut t = PTree::build(&set, &PTreeConfig::default()).unwrap();
        let rep = run(&mut t, &set, &keys, 5e6, 0.05, 2, Placement::Near);
        assert!(rep.updates > 50, "{rep:?}");
        assert_eq!(rep.wrong, 0);
        // The rules left are a subsequence of the set (no copies, the
        // set's order), within a thirty-second of its size.
        let at: Vec<usize> = rep.final_rules.iter().map(|r| set.rules.iter().position(|x| x == r).expect("a rule of the set")).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{at:?}");
        assert!(rep.rules <= set.len() && rep.rules + set.len() / 32 + 1 >= set.len(), "{}", rep.rules);
    }

    #[test]
    fn rank_churn_inserts_siblings_of_the_set_s_rules_at_their_parent_s_rank() {
        // Each rule made distinct (its destination port): a rule now names
        // its parent, and the order of the rules left says where each went.
        let mut set = rulegen::generate(&Params::builtin("acl").unwrap(), 300, 4);
        for (i, r) in set.rules.iter_mut().enumerate() {
            r.fields[3] = crate::rules::FieldMatch::range(i as u32, i as u32);
        }
        let keys: Vec<Key> = tracegen::generate(&set, 500, tracegen::Pareto::new(1.0, 0.1).unwrap(), 3).iter().map(|e| e.key).collect();
        let mut t = PTree::build(&set, &PTreeConfig { max_delta: 8, ..Default::default() }).unwrap();
        let rep = run(&mut t, &set, &keys, 5e6, 0.05, 2, Placement::Rank);
        assert!(rep.updates > 50, "{rep:?}");
        assert_eq!(rep.wrong, 0, "{rep:?}");
        assert_eq!(t.rule_set().rules, rep.final_rules);
        // In the set's order by parent; the new ones differ from their
        // parent in one address only, by its last fixed bit (as specific).
        let parent: Vec<usize> = rep.final_rules.iter().map(|r| r.fields[3].lo as usize).collect();
        assert!(parent.windows(2).all(|w| w[0] <= w[1]), "{parent:?}");
        let mut new = 0;
        for r in &rep.final_rules {
            let p = &set.rules[r.fields[3].lo as usize];
            if r == p {
                continue;
            }
            new += 1;
            let d: Vec<usize> = (0..5).filter(|&f| r.fields[f] != p.fields[f]).collect();
            assert!(d.len() == 1 && d[0] < 2, "{d:?}");
            let (a, b) = (r.fields[d[0]], p.fields[d[0]]);
            assert!(a.mask == b.mask && (a.lo ^ b.lo) == (b.mask & b.mask.wrapping_neg()), "{a:?} {b:?}");
        }
        assert!(new > 0);
        assert!(rep.rules + set.len() / 32 + 1 >= set.len() && rep.rules <= set.len() + set.len() / 32 + 1, "{}", rep.rules);
    }

    #[test]
    fn the_fenwick_counts_select_as_a_sorted_list() {
        let mut f = Fenwick::ones(37);
        let mut v: Vec<usize> = (0..37).collect();
        let mut rng = Pcg64::seed_from_u64(5);
        for _ in 0..500 {
            if rng.gen::<bool>() && !v.is_empty() {
                let p = rng.gen_range(0..v.len());
                assert_eq!(f.select(p), v[p]);
                f.add(v.remove(p), -1);
            } else {
                let i = rng.gen_range(0..37);
                f.add(i, 1);
                v.insert(v.partition_point(|&x| x <= i), i);
            }
            for i in 0..=37 {
                assert_eq!(f.prefix(i), v.partition_point(|&x| x < i));
            }
        }
    }
}

//! Lookups under update churn: the measurement behind `synapse bench
//! classify --updates-per-s`.
//!
//! One thread alternates batches of lookups over a trace with the updates
//! owed at the offered rate (random inserts of rules like the set's, copies
//! of its own rules at random positions, and random deletes, keeping the
//! set near its size), on a clock of lookup plus update time. Every update
//! is timed on its own (its latency, including any fold-in it makes); the
//! lookups are timed per batch. A sample of each batch's answers is checked
//! against the linear oracle over the rules as they are then, outside the
//! timed parts: `wrong` counts the answers that differ.

use super::{Incremental, Match};
use crate::rules::{Key, Rule, RuleSet};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use std::time::Instant;

/// What a churn run measured.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ChurnReport {
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

/// Runs `keys` through `t` (built over `set`) in batches for about `secs`
/// seconds of lookup and update time while updates arrive at `rate` per
/// second of that time (`rate` 0: no updates). Seeded: the same seed makes
/// the same updates (their timing follows the clock).
pub fn run(t: &mut dyn Incremental, set: &RuleSet, keys: &[Key], rate: f64, secs: f64, seed: u64) -> ChurnReport {
    let mut rng = Pcg64::seed_from_u64(seed);
    let n0 = set.len();
    // The oracle's rules as indices into `arena` (cheap to move about).
    let arena: Vec<Rule> = set.rules.clone();
    let mut order: Vec<u32> = (0..n0 as u32).collect();
    let mut rep = ChurnReport::default();
    let mut lat: Vec<f32> = Vec::new();
    let mut out = vec![0i32; BATCH];
    let mut at = 0usize;
    if keys.is_empty() {
        return rep;
    }
    while rep.lookup_s + rep.update_s < secs {
        // The updates due by now on the run's clock.
        let due = (rate * (rep.lookup_s + rep.update_s)) as u64;
        // (Not past the run's end: a slow update must not owe a flood.)
        while rep.updates < due && n0 > 0 && rep.lookup_s + rep.update_s < secs {
            let len = order.len();
            // Keep the set within a few per cent of its size.
            let insert = len == 0 || (len < n0 + n0 / 32 + 1 && (len <= n0 - n0.min(n0 / 32) || rng.gen::<bool>()));
            let t0 = Instant::now();
            if insert {
                let pos = rng.gen_range(0..=len);
                let r = rng.gen_range(0..n0) as u32;
                t.insert(pos, arena[r as usize]).expect("insert in range");
                let dt = t0.elapsed();
                order.insert(pos, r);
                lat.push(dt.as_secs_f32());
                rep.update_s += dt.as_secs_f64();
            } else {
                let pos = rng.gen_range(0..len);
                t.delete(pos).expect("delete in range");
                let dt = t0.elapsed();
                order.remove(pos);
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
        // The oracle on a sample of the batch, outside the clock.
        for i in (0..batch.len()).step_by((batch.len() / CHECK).max(1)) {
            let want: Match = order.iter().position(|&r| arena[r as usize].matches(&batch[i])).map(|p| p as u32);
            rep.checked += 1;
            rep.wrong += (out[i] != want.map_or(-1, |p| p as i32)) as u64;
        }
        at = if end == keys.len() { 0 } else { end };
    }
    rep.rules = order.len();
    if !lat.is_empty() {
        lat.sort_unstable_by(|a, b| a.total_cmp(b));
        let q = |p: f64| lat[((lat.len() - 1) as f64 * p).round() as usize] as f64 * 1e6;
        rep.update_latency_us_p50 = q(0.5);
        rep.update_latency_us_p99 = q(0.99);
        rep.update_latency_us_max = q(1.0);
    }
    rep
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
        let mut t = PTree::build(&set, &PTreeConfig { max_delta: 8, ..Default::default() }).unwrap();
        // A rate high enough for several updates (and fold-ins) per batch;
        // how many depends on the machine, the answers do not.
        let rep = run(&mut t, &set, &keys, 5e6, 0.1, 1);
        assert!(rep.updates > 0 && rep.checked >= CHECK as u64, "{rep:?}");
        assert_eq!(rep.wrong, 0, "{rep:?}");
        assert_eq!(t.rule_set().len(), rep.rules);
    }
}

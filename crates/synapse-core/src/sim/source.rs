//! Inputs of a simulation: rule sets, flow keys and packet arrivals.
//!
//! The real generators live in `crate::workload` (ClassBench-style rules,
//! CAIDA flow sizes); this module adapts them to the simulator and, until they
//! are merged, supplies small stand-ins with the same shapes.

use crate::rules::{FieldMatch, Key, Rule, RuleSet, Schema, MAX_FIELDS};
use rand::{Rng, SeedableRng};
use rand_distr::Exp1;
use rand_pcg::Pcg64;

/// One packet arrival: when, and which flow.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Arrival {
    pub t_ps: u64,
    pub flow: u32,
}

/// A stream of arrivals in non-decreasing time order.
pub type Source = Box<dyn Iterator<Item = Arrival> + Send>;

/// Stand-in rule generator: random 5-tuple rules with prefixes and port ranges.
pub fn generate_rules(count: usize, seed: u64) -> RuleSet {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut rules = Vec::with_capacity(count);
    for i in 0..count {
        let sl = rng.gen_range(8..=32u8);
        let dl = rng.gen_range(8..=32u8);
        let sp = if rng.gen_bool(0.7) { FieldMatch::range(0, 65535) } else { let p = rng.gen_range(0..65535u32); FieldMatch::range(p, p) };
        let dp = if rng.gen_bool(0.3) { FieldMatch::range(0, 65535) } else { let p = rng.gen_range(0..1024u32); FieldMatch::range(p, p + rng.gen_range(0..8)) };
        let proto = if rng.gen_bool(0.2) { FieldMatch::ANY } else { FieldMatch::ternary([6u32, 17][rng.gen_range(0..2)], 0xff) };
        rules.push(Rule::new(
            &[
                FieldMatch::prefix(rng.gen(), sl, 32),
                FieldMatch::prefix(rng.gen(), dl, 32),
                sp,
                dp,
                proto,
            ],
            (count - i) as u32,
            i as u32,
        ));
    }
    RuleSet::new(Schema::five_tuple(), rules)
}

/// Stand-in for `workload::tracegen::flow_keys`: each flow gets a key inside
/// a random rule (ClassBench's trace generator picks rules likewise).
pub fn flow_keys(set: &RuleSet, n: usize, seed: u64) -> Vec<(Key, u32)> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let bits: Vec<u8> = set.schema.fields.iter().map(|f| f.bits).collect();
    (0..n)
        .map(|_| {
            if set.rules.is_empty() {
                return (Key(rng.gen()), u32::MAX);
            }
            let r = rng.gen_range(0..set.rules.len());
            let rule = &set.rules[r];
            let mut k = [0u32; MAX_FIELDS];
            for (i, &b) in bits.iter().enumerate() {
                let f = rule.fields[i];
                k[i] = match f.as_range(b) {
                    Some((lo, hi)) => lo + (rng.gen::<u64>() % (hi as u64 - lo as u64 + 1)) as u32,
                    None => f.lo,
                };
            }
            (Key(k), r as u32)
        })
        .collect()
}

/// Stand-in flow traffic: flows with heavy-tailed sizes (Pareto), starting
/// uniformly over the run, each a Poisson process of rate size / duration.
pub struct Flows {
    starts: Vec<(f64, u32, u64)>,
    next: usize,
    heap: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u32, u64)>>,
    flow_duration_ps: f64,
    rng: Pcg64,
}

impl Flows {
    pub fn new(flows: u32, duration_ps: u64, flow_duration_ps: u64, seed: u64) -> Flows {
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut starts: Vec<(f64, u32, u64)> = (0..flows)
            .map(|f| {
                let u: f64 = rng.gen::<f64>().max(1e-12);
                let size = (2.0 * u.powf(-1.0 / 1.2)).min(1e6) as u64 + 1;
                (rng.gen::<f64>() * duration_ps as f64, f, size)
            })
            .collect();
        starts.sort_by(|a, b| a.0.total_cmp(&b.0));
        Flows { starts, next: 0, heap: Default::default(), flow_duration_ps: flow_duration_ps as f64, rng }
    }
}

impl Iterator for Flows {
    type Item = Arrival;
    fn next(&mut self) -> Option<Arrival> {
        let top = self.heap.peek().map(|r| r.0 .0);
        let start = self.starts.get(self.next).map(|s| s.0 as u64);
        let from_start = match (start, top) {
            (Some(s), Some(t)) => s <= t,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        let (t, flow, left) = if from_start {
            let (s, f, n) = self.starts[self.next];
            self.next += 1;
            (s as u64, f, n)
        } else {
            self.heap.pop().unwrap().0
        };
        if left > 1 {
            let size = left as f64;
            let gap: f64 = self.rng.sample::<f64, _>(Exp1) * self.flow_duration_ps / size.max(1.0);
            self.heap.push(std::cmp::Reverse((t + gap as u64 + 1, flow, left - 1)));
        }
        Some(Arrival { t_ps: t, flow })
    }
}

/// A fixed-rate replay of a list of flows (a header trace): packet i arrives
/// at i / rate.
pub struct Replay {
    flows: Vec<u32>,
    i: usize,
    gap_ps: f64,
}

impl Replay {
    pub fn new(flows: Vec<u32>, rate_mpps: f64) -> Replay {
        Replay { flows, i: 0, gap_ps: 1e6 / rate_mpps.max(1e-9) }
    }
}

impl Iterator for Replay {
    type Item = Arrival;
    fn next(&mut self) -> Option<Arrival> {
        let f = *self.flows.get(self.i)?;
        let t = (self.i as f64 * self.gap_ps) as u64;
        self.i += 1;
        Some(Arrival { t_ps: t, flow: f })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{linear::Linear, Classifier};

    #[test]
    fn flow_keys_fall_inside_their_rule() {
        let set = generate_rules(50, 1);
        let lin = Linear::new(&set);
        for (k, r) in flow_keys(&set, 500, 2) {
            assert!(set.rules[r as usize].matches(&k));
            assert!(lin.classify(&k).unwrap() <= r);
        }
    }

    #[test]
    fn flows_arrive_in_time_order() {
        let v: Vec<Arrival> = Flows::new(200, 1_000_000_000, 100_000_000, 3).collect();
        assert!(v.windows(2).all(|w| w[0].t_ps <= w[1].t_ps));
        assert!(v.len() > 200);
    }
}

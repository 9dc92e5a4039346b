//! Inputs of a simulation: rule sets, flow keys and packet arrivals.
//!
//! The real generators live in `crate::workload` (ClassBench-style rules,
//! CAIDA flow sizes); this module adapts them to the simulator and, until they
//! are merged, supplies small stand-ins with the same shapes.

use crate::rules::{Key, RuleSet};
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

/// One key per flow, inside the table's rules (ClassBench style, from
/// [`crate::workload::tracegen::flow_keys`]); a table without rules gets
/// random keys (every lookup then takes the default action).
pub fn keys_for(set: &RuleSet, flows: usize, seed: u64) -> Vec<Key> {
    if set.is_empty() {
        let mut rng = Pcg64::seed_from_u64(seed);
        return (0..flows).map(|_| Key(rng.gen())).collect();
    }
    crate::workload::tracegen::flow_keys(set, flows, seed).into_iter().map(|x| x.0).collect()
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

    #[test]
    fn flows_arrive_in_time_order() {
        let v: Vec<Arrival> = Flows::new(200, 1_000_000_000, 100_000_000, 3).collect();
        assert!(v.windows(2).all(|w| w[0].t_ps <= w[1].t_ps));
        assert!(v.len() > 200);
    }
}

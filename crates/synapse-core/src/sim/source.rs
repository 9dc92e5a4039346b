//! Inputs of a simulation: rule sets, flow keys and packet arrivals.
//!
//! The generators live in `crate::workload` (ClassBench-style rules and flow
//! keys, CAIDA flow-size traffic); this module adapts them to the simulator
//! and adds the fixed-rate replay of a header trace.

use crate::rules::{Key, RuleSet};
use crate::workload::Traffic;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// One packet arrival: when, and which flow.
pub use crate::workload::traffic::Arrival;

/// A stream of arrivals in non-decreasing time order. The built-in kinds are
/// called directly (the simulator pulls one per key, and a call through a
/// `Box<dyn Iterator>` cost about as much as a tenth of the generator);
/// anything else (tests, the routed embedding's feed) comes boxed.
pub enum Source {
    Flows(Traffic),
    Replay(Replay),
    /// Flows with attack packets mixed in (`workload/attack.rs`).
    Mixed(Box<crate::workload::attack::Mix<Source>>),
    Other(Box<dyn Iterator<Item = Arrival> + Send>),
}

impl Iterator for Source {
    type Item = Arrival;
    #[inline]
    fn next(&mut self) -> Option<Arrival> {
        match self {
            Source::Flows(t) => t.next(),
            Source::Replay(r) => r.next(),
            Source::Mixed(m) => m.next(),
            Source::Other(b) => b.next(),
        }
    }
}

impl<T: Iterator<Item = Arrival> + Send + 'static> From<Box<T>> for Source {
    fn from(b: Box<T>) -> Source {
        Source::Other(b)
    }
}

/// One key per flow, inside the table's rules (ClassBench style, from
/// [`crate::workload::tracegen::flow_keys`]); a table without rules gets
/// random keys (every lookup then takes the default action).
pub fn keys_for(set: &RuleSet, flows: usize, seed: u64) -> Vec<Key> {
    if set.is_empty() {
        let mut rng = Pcg64::seed_from_u64(seed);
        return (0..flows).map(|_| Key(rng.gen())).collect();
    }
    crate::workload::tracegen::flow_keys(set, flows, seed)
        .into_iter()
        .map(|x| x.0)
        .collect()
}

/// [`keys_for`], with a share `nomatch` of the flows (exactly
/// `round(nomatch × flows)`, chosen at random) keyed to match no rule of
/// `set` but its catch-alls ([`crate::workload::tracegen::nomatch_keys`]):
/// their lookups end at the set's catch-all rule, or, in a set without
/// one, at the table's default action. A share of 0 draws nothing (the
/// keys are [`keys_for`]'s).
pub fn keys_with_nomatch(set: &RuleSet, flows: usize, seed: u64, nomatch: f64) -> Result<Vec<Key>, String> {
    let mut keys = keys_for(set, flows, seed);
    let k = (nomatch * flows as f64).round() as usize;
    if k == 0 || set.is_empty() {
        return Ok(keys);
    }
    let mut rng = Pcg64::seed_from_u64(seed ^ 0x6e6f_6d61_7463_6821);
    let picked = rand::seq::index::sample(&mut rng, flows, k.min(flows));
    let other = crate::workload::tracegen::nomatch_keys(set, picked.len(), rng.gen())?;
    for (f, key) in picked.into_iter().zip(other) {
        keys[f] = key;
    }
    Ok(keys)
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
        Replay {
            flows,
            i: 0,
            gap_ps: 1e6 / rate_mpps.max(1e-9),
        }
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
    fn replay_spaces_packets_at_the_rate() {
        let v: Vec<Arrival> = Replay::new(vec![3, 1, 3], 250.0).collect();
        assert_eq!(
            v,
            vec![
                Arrival { t_ps: 0, flow: 3 },
                Arrival {
                    t_ps: 4000,
                    flow: 1
                },
                Arrival {
                    t_ps: 8000,
                    flow: 3
                },
            ]
        );
    }
}

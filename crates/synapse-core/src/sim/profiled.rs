//! Flow traffic with a time-varying flow arrival rate, for the runtime-OPT
//! experiment (Fig. 8 of the Synapse paper, §6 "Traffic Generation").
//!
//! Adapts the traffic model of [`crate::workload::traffic`] (CAIDA flow sizes,
//! each flow a Poisson process of rate proportional to its size, flow starts
//! following a [`Profile`]) to the simulator's [`Source`]. The simulator uses
//! it when `traffic.profile` is not `"uniform"`.

use super::source::{Arrival, Source};
use super::SimError;
use crate::workload::flowsize::FlowSizeDist;
use crate::workload::profile::Profile;
use crate::workload::traffic::{Traffic, TrafficConfig};

/// Arrivals of `flows` flows whose starts follow the named profile.
pub fn source(
    dist: &str,
    flows: u32,
    duration_ps: u64,
    flow_duration_ps: u64,
    mean_pkt_bytes: f64,
    profile: &str,
    seed: u64,
) -> Result<Source, SimError> {
    let dist = FlowSizeDist::from_spec(dist).map_err(|e| SimError(format!("config: traffic.dist: {e}")))?;
    let profile = Profile::builtin(profile).map_err(|e| SimError(format!("config: traffic.profile: {e}")))?;
    let cfg = TrafficConfig {
        dist,
        flows,
        duration_ps: duration_ps.max(1),
        flow_duration_ps: flow_duration_ps.max(1),
        mean_pkt_bytes,
        profile: Some(profile),
        seed,
    };
    let t = Traffic::new(&cfg).map_err(|e| SimError(format!("config: traffic: {e}")))?;
    Ok(Box::new(t.map(|a| Arrival { t_ps: a.t_ps, flow: a.flow })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_profile_triples_flow_starts_in_the_middle_third() {
        // The profile shapes flow arrivals; packets follow each flow's size
        // (heavy-tailed), so count flow starts: ids first appear in order.
        let d = 3_000_000_000u64; // 3 ms
        let src = source("caida2019:1e6", 30_000, d, 100_000_000, 800.0, "step", 7).unwrap();
        let (mut thirds, mut next) = ([0u64; 3], 0u32);
        for a in src.take_while(|a| a.t_ps < d) {
            if a.flow >= next {
                next = a.flow + 1;
                thirds[(a.t_ps * 3 / d) as usize] += 1;
            }
        }
        let mid = thirds[1] as f64 / ((thirds[0] + thirds[2]) as f64 / 2.0);
        assert!((2.7..3.3).contains(&mid), "{thirds:?}");
        assert!(source("caida2019", 10, d, 1, 800.0, "wobble", 1).is_err());
    }
}

//! Interconnects. Follows §4.4 of the Synapse paper.
//!
//! VMT → PMU: a **segmented-channel** network (the paper's choice: PMUs split
//! into channels, each channel takes one request per cycle, so tables reaching
//! different channels proceed in parallel), a **full crossbar** (every PMU has
//! its own port) or a **shared bus** (one request per cycle in all). All three
//! are "one grant per port per cycle"; they differ in which PMUs share a port.
//! A request that loses a conflict waits a cycle; one that wins reaches the
//! PMU `latency_cycles` later (the simulator adds it to the VMU's latency,
//! `sim/build.rs`). PMU → ELU is a shared bus ([`SharedBus`]).

use super::Cycle;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Segmented,
    Crossbar,
    Bus,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub kind: Kind,
    /// Channels of the segmented design (PMUs split into equal contiguous groups).
    pub channels: u32,
    /// Cycles a request spends crossing the network.
    pub latency_cycles: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            kind: Kind::Segmented,
            channels: 4,
            latency_cycles: 1,
        }
    }
}

/// One grant per port per cycle.
pub struct Ports {
    free_at: Vec<Cycle>,
    pub conflicts: u64,
}

impl Ports {
    pub fn new(n: usize) -> Ports {
        Ports {
            free_at: vec![0; n.max(1)],
            conflicts: 0,
        }
    }
    pub fn can_send(&self, now: Cycle, port: usize) -> bool {
        self.free_at[port] <= now
    }
    /// Takes the port for this cycle if it is free; a loser is counted.
    pub fn try_send(&mut self, now: Cycle, port: usize) -> bool {
        if self.free_at[port] <= now {
            self.free_at[port] = now + 1;
            true
        } else {
            self.conflicts += 1;
            false
        }
    }
    /// Holds `port` for `cycles` cycles from the first cycle it is free at
    /// or after `now` (a burst, e.g. a warm join's copies on the bus);
    /// returns that first cycle.
    pub fn reserve(&mut self, now: Cycle, port: usize, cycles: Cycle) -> Cycle {
        let start = self.free_at[port].max(now);
        self.free_at[port] = start + cycles;
        start
    }
}

/// The VMT → PMU request network.
pub struct Network {
    pub config: Config,
    port_of: Vec<u16>,
    pub ports: Ports,
}

impl Network {
    pub fn new(config: Config, pmus: usize) -> Network {
        let (nports, port_of): (usize, Vec<u16>) = match config.kind {
            Kind::Crossbar => (pmus, (0..pmus as u16).collect()),
            Kind::Bus => (1, vec![0; pmus]),
            Kind::Segmented => {
                let c = (config.channels.max(1) as usize).min(pmus.max(1));
                (c, (0..pmus).map(|p| (p * c / pmus.max(1)) as u16).collect())
            }
        };
        Network {
            config,
            port_of,
            ports: Ports::new(nports),
        }
    }
    /// The channel (port) PMU `pmu` sits on.
    pub fn channel(&self, pmu: usize) -> usize {
        self.port_of[pmu] as usize
    }
    pub fn can_send(&self, now: Cycle, pmu: usize) -> bool {
        self.ports.can_send(now, self.channel(pmu))
    }
    pub fn try_send(&mut self, now: Cycle, pmu: usize) -> bool {
        let c = self.channel(pmu);
        self.ports.try_send(now, c)
    }
}

/// PMU → ELU: one shared bus, one transfer per cycle.
pub type SharedBus = Ports;

#[cfg(test)]
mod tests {
    use super::*;

    fn net(kind: Kind) -> Network {
        Network::new(
            Config {
                kind,
                channels: 2,
                latency_cycles: 1,
            },
            4,
        )
    }

    #[test]
    fn segmented_conflict_in_a_channel_waits_a_cycle() {
        let mut n = net(Kind::Segmented);
        assert_eq!(
            (n.channel(0), n.channel(1), n.channel(2), n.channel(3)),
            (0, 0, 1, 1)
        );
        assert!(n.try_send(10, 0));
        assert!(!n.try_send(10, 1), "same channel, same cycle");
        assert!(n.try_send(10, 2), "other channel proceeds");
        assert!(n.try_send(11, 1), "loser goes next cycle");
        assert_eq!(n.ports.conflicts, 1);
    }

    #[test]
    fn crossbar_never_conflicts_across_pmus_bus_always_does() {
        let mut x = net(Kind::Crossbar);
        assert!((0..4).all(|p| x.try_send(5, p)));
        assert!(!x.try_send(5, 0));
        let mut b = net(Kind::Bus);
        assert!(b.try_send(5, 3));
        assert!(!b.try_send(5, 0));
        assert!(b.can_send(6, 0));
    }
}

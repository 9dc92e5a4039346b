//! Admission of ELU fills into a PMU's CAM: a defence against cache
//! flooding (paper §8).
//!
//! Plain LRU caches every missed key, so a flood of never-repeating keys
//! evicts the popular entries. The *doorkeeper* of TinyLFU (Einziger,
//! Friedman and Manes, "TinyLFU: A Highly Efficient Cache Admission
//! Policy", ACM ToS 2017) sits in front of the LRU: a small Bloom filter of
//! the keys that missed. A fill that would evict an entry is admitted only
//! when its key is already in the filter (it missed before); otherwise the
//! key is recorded and the answer goes to the VMU uncached. A fill into a
//! CAM that still has a free entry evicts nothing and is always admitted.
//! The filter is cleared after `reset_factor` × CAM entries recorded keys
//! (TinyLFU's sample period), so it forgets the flood and its false
//! positives stay bounded.
//!
//! In hardware the filter is a bit array (`bits_per_entry` × CAM entries
//! bits, two lookup3 hashes) read and written in the cycle of the fill; it
//! adds no latency to a lookup.

use crate::hash::lookup3::hashword;
use crate::rules::Key;
use serde::{Deserialize, Serialize};

/// Which fills the CAM takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Every fill (plain LRU).
    #[default]
    Lru,
    /// A fill that would evict only for a key that missed before.
    Doorkeeper,
}

/// The `[defence.admission]` table of a scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub policy: Policy,
    /// Filter bits per CAM entry (rounded up to a power of two in total).
    pub bits_per_entry: u32,
    /// Keys recorded, per CAM entry, before the filter is cleared.
    pub reset_factor: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            policy: Policy::Lru,
            bits_per_entry: 32,
            reset_factor: 4,
        }
    }
}

/// The doorkeeper of one PMU.
#[derive(Clone, Debug)]
pub struct Doorkeeper {
    bits: Vec<u64>,
    mask: u32,
    recorded: u32,
    reset_after: u32,
    /// Fills refused (answered, not cached) and filter clears.
    pub refused: u64,
    pub resets: u64,
}

impl Doorkeeper {
    /// A doorkeeper for a CAM of `entries` entries.
    pub fn new(c: &Config, entries: u32) -> Doorkeeper {
        let n = (c.bits_per_entry.max(1) as u64 * entries.max(1) as u64).next_power_of_two().max(64);
        Doorkeeper {
            bits: vec![0; (n / 64) as usize],
            mask: (n - 1) as u32,
            recorded: 0,
            reset_after: (c.reset_factor.max(1) * entries.max(1)).max(1),
            refused: 0,
            resets: 0,
        }
    }

    /// The two filter bits `key` maps to (the RTL, `synapse_admit.v`, takes
    /// them as inputs: the hashes are computed when the miss enters Q_m).
    pub fn probes<const N: usize>(&self, key: &Key<N>) -> [u32; 2] {
        [hashword(&key.0, 0x5eed_0001) & self.mask, hashword(&key.0, 0x5eed_0002) & self.mask]
    }

    fn test(&self, b: u32) -> bool {
        self.bits[(b / 64) as usize] & (1 << (b % 64)) != 0
    }

    /// Whether the filter holds `key` (or a false positive).
    pub fn contains<const N: usize>(&self, key: &Key<N>) -> bool {
        self.probes(key).iter().all(|&b| self.test(b))
    }

    /// A fill of `key` into a CAM that is `full`: admit it, or record the
    /// key and refuse.
    pub fn admit<const N: usize>(&mut self, key: &Key<N>, full: bool) -> bool {
        if !full || self.contains(key) {
            return true;
        }
        self.record(key);
        self.refused += 1;
        false
    }

    /// Whether `key` missed before (is in the filter); if not, records it
    /// now. The ELU's shed gate (`sim/phases.rs`, phase 5) asks this of a
    /// miss at the head of Q_m: a first-seen key is shed under overload,
    /// and its next miss passes as seen.
    pub fn seen<const N: usize>(&mut self, key: &Key<N>) -> bool {
        if self.contains(key) {
            return true;
        }
        self.record(key);
        false
    }

    fn record<const N: usize>(&mut self, key: &Key<N>) {
        for b in self.probes(key) {
            self.bits[(b / 64) as usize] |= 1 << (b % 64);
        }
        self.recorded += 1;
        if self.recorded >= self.reset_after {
            self.bits.iter_mut().for_each(|w| *w = 0);
            self.recorded = 0;
            self.resets += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> Key {
        Key::five_tuple(i, i.wrapping_mul(7), 80, 443, 6)
    }

    /// Key by key: a fill into a CAM with room goes in; into a full one,
    /// a key's first fill is refused and its second admitted; after
    /// `reset_factor × entries` recorded keys the filter forgets them all.
    #[test]
    fn second_miss_is_admitted_and_the_filter_resets() {
        let c = Config { policy: Policy::Doorkeeper, bits_per_entry: 64, reset_factor: 2 };
        let mut d = Doorkeeper::new(&c, 8);
        assert!(d.admit(&key(1), false));
        assert!(!d.contains(&key(1)), "an admitted fill into free room is not recorded");
        assert!(!d.admit(&key(1), true));
        assert!(d.admit(&key(1), true));
        // 15 more refused keys: 16 recorded = 2 × 8, then a clear.
        for i in 2..17 {
            assert!(!d.admit(&key(i), true), "key {i}");
        }
        assert_eq!((d.refused, d.resets), (16, 1));
        assert!(!d.contains(&key(1)) && !d.contains(&key(16)));
        assert!(!d.admit(&key(1), true));
    }

    /// A flood of never-repeating keys is refused (bar false positives,
    /// bounded by the filter's size), while a key seen twice is admitted.
    #[test]
    fn never_repeating_keys_are_refused() {
        let c = Config { policy: Policy::Doorkeeper, ..Config::default() };
        let mut d = Doorkeeper::new(&c, 256);
        let admitted = (0..100_000).filter(|&i| d.admit(&key(i + 1000), true)).count();
        // 1024 keys recorded per period in 8192 bits, 2 hashes: ≤ ~5 %.
        assert!(admitted < 5_000, "{admitted}");
        assert!(!d.admit(&key(1), true) && d.admit(&key(1), true));
    }
}

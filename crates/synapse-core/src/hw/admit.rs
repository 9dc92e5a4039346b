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
//! Two refinements, both off by default (the RTL, `synapse_admit.v`,
//! models the filter without them):
//!
//! - `repeats`: a second filter of the keys that missed twice in the
//!   window. A key the CAM cannot keep (a scan cycling through more keys
//!   than the CAM holds) misses again and again; a legitimate key misses
//!   once or twice (first sight, then the admitted fill) and then hits.
//!   The ELU's shed gate ([`Doorkeeper::passes`]) sheds, under load, a
//!   key's first miss *and* its misses after the second, so a scan costs
//!   at most one ELU walk per key per window.
//! - `judge_backlog`: the filter judges fills only while the ELU holds at
//!   least this many misses (the backlog the shed gate reads, broadcast to
//!   the PMUs); below it every fill is cached as under plain LRU, so with
//!   no attack the doorkeeper costs (almost) no hit rate.
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
    /// A second filter of the keys that missed twice (module doc): the
    /// shed gate sheds their later misses too.
    pub repeats: bool,
    /// Judge fills only while the ELU holds at least this many misses;
    /// below, admit every fill. 0: always judge.
    pub judge_backlog: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            policy: Policy::Lru,
            bits_per_entry: 32,
            reset_factor: 4,
            repeats: false,
            judge_backlog: 0,
        }
    }
}

/// The doorkeeper of one PMU.
#[derive(Clone, Debug)]
pub struct Doorkeeper {
    bits: Vec<u64>,
    /// The keys that missed twice in this window (`repeats`; empty without).
    again: Vec<u64>,
    judge_backlog: u32,
    /// The ELU's backlog as the PMU last saw it (set by the simulator
    /// before a fill when `judge_backlog` > 0).
    pub backlog: usize,
    mask: u32,
    recorded: u32,
    reset_after: u32,
    /// Fills refused (answered, not cached) and filter clears.
    pub refused: u64,
    pub resets: u64,
    /// Misses the shed gate found in the second filter (`repeats`).
    pub repeated: u64,
}

impl Doorkeeper {
    /// A doorkeeper for a CAM of `entries` entries.
    pub fn new(c: &Config, entries: u32) -> Doorkeeper {
        let n = (c.bits_per_entry.max(1) as u64 * entries.max(1) as u64).next_power_of_two().max(64);
        Doorkeeper {
            bits: vec![0; (n / 64) as usize],
            again: if c.repeats { vec![0; (n / 64) as usize] } else { Vec::new() },
            judge_backlog: c.judge_backlog,
            backlog: 0,
            mask: (n - 1) as u32,
            recorded: 0,
            reset_after: (c.reset_factor.max(1) * entries.max(1)).max(1),
            refused: 0,
            resets: 0,
            repeated: 0,
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

    /// Whether this doorkeeper judges fills (`judge_backlog` and the ELU's
    /// backlog the simulator last set).
    pub fn judges(&self) -> bool {
        self.backlog >= self.judge_backlog as usize
    }

    /// Whether `judge_backlog` makes the simulator set [`Doorkeeper::backlog`].
    pub fn needs_backlog(&self) -> bool {
        self.judge_backlog > 0
    }

    /// Whether the filter holds `key` (or a false positive).
    pub fn contains<const N: usize>(&self, key: &Key<N>) -> bool {
        self.probes(key).iter().all(|&b| self.test(b))
    }

    /// A fill of `key` into a CAM that is `full`: admit it, or record the
    /// key and refuse.
    pub fn admit<const N: usize>(&mut self, key: &Key<N>, full: bool) -> bool {
        if !full || !self.judges() || self.contains(key) {
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

    /// The shed gate's question under load: whether the miss of `key` may
    /// go to the ELU. A first-time key is recorded and may not ([`seen`]).
    /// With `repeats`, a seen key is recorded in the second filter and
    /// passes once; a key already there (its third miss or later in this
    /// window) may not.
    ///
    /// [`seen`]: Doorkeeper::seen
    pub fn passes<const N: usize>(&mut self, key: &Key<N>) -> bool {
        if !self.seen(key) {
            return false;
        }
        if self.again.is_empty() {
            return true;
        }
        let p = self.probes(key);
        let hit = |w: &[u64], b: u32| w[(b / 64) as usize] & (1 << (b % 64)) != 0;
        if p.iter().all(|&b| hit(&self.again, b)) {
            self.repeated += 1;
            return false;
        }
        for b in p {
            self.again[(b / 64) as usize] |= 1 << (b % 64);
        }
        true
    }

    fn record<const N: usize>(&mut self, key: &Key<N>) {
        for b in self.probes(key) {
            self.bits[(b / 64) as usize] |= 1 << (b % 64);
        }
        self.recorded += 1;
        if self.recorded >= self.reset_after {
            self.bits.iter_mut().for_each(|w| *w = 0);
            self.again.iter_mut().for_each(|w| *w = 0);
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
        let c = Config { policy: Policy::Doorkeeper, bits_per_entry: 64, reset_factor: 2, ..Config::default() };
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

    /// `repeats`: at the shed gate a key's first miss is shed (recorded),
    /// its second passes, and its third and later in the window are shed
    /// (a scan's key, which the CAM could not keep); a clear forgets both
    /// filters. Without `repeats` every miss after the first passes.
    #[test]
    fn a_key_missing_a_third_time_is_shed_with_repeats() {
        let plain = Config { policy: Policy::Doorkeeper, bits_per_entry: 64, reset_factor: 2, ..Config::default() };
        let mut d = Doorkeeper::new(&Config { repeats: true, ..plain.clone() }, 8);
        let mut p = Doorkeeper::new(&plain, 8);
        let k = key(5);
        assert_eq!([d.passes(&k), d.passes(&k), d.passes(&k), d.passes(&k)], [false, true, false, false]);
        assert_eq!([p.passes(&k), p.passes(&k), p.passes(&k)], [false, true, true]);
        assert_eq!(d.repeated, 2);
        // 15 more first-time keys: 16 recorded = 2 x 8, a clear of both filters.
        for i in 10..25 {
            assert!(!d.passes(&key(i)));
        }
        assert_eq!(d.resets, 1);
        assert_eq!([d.passes(&k), d.passes(&k), d.passes(&k)], [false, true, false]);
    }

    /// `judge_backlog`: below it a fill into a full CAM is admitted and
    /// nothing is recorded (plain LRU); at it, the doorkeeper judges.
    #[test]
    fn fills_are_judged_only_at_the_backlog() {
        let c = Config { policy: Policy::Doorkeeper, judge_backlog: 8, ..Config::default() };
        let mut d = Doorkeeper::new(&c, 64);
        d.backlog = 7;
        assert!(d.admit(&key(1), true) && !d.contains(&key(1)) && d.refused == 0);
        d.backlog = 8;
        assert!(!d.admit(&key(1), true) && d.admit(&key(1), true));
        assert_eq!(d.refused, 1);
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

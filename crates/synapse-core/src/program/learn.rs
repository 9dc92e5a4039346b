//! Tables written from the data plane: PNA's add-on-miss tables (as
//! P4-DPDK's learner tables run them), the write path t4p4s measures as
//! "writable table entries".
//!
//! A table marked `add_on_miss` (exact keys only) keeps, beside the
//! control plane's entries, entries its own miss action adds:
//!
//! - `add_entry(action, params.., profile)` in the table's default
//!   (miss) action adds an entry for the packet's key with that action and
//!   data, visible to the very next packet. It fails (nothing added,
//!   counted) when the table holds `max_size` entries, or when called
//!   anywhere else than a miss of an add-on-miss table.
//! - Each learned entry ages: it expires `profiles_us[profile]` after it
//!   was added or its timer was last restarted, and from then on it matches
//!   nothing (PNA `pna_idle_timeout = AUTO_DELETE`). A hit does *not*
//!   restart the timer by itself (P4-DPDK's learner: only its `rearm`);
//!   the hit action calls `restart_expire_timer()` or
//!   `set_entry_expire_time(profile)` (new profile, timer restarted).
//! - The control plane's entries never age.
//!
//! Entry numbers (a visit's matched entry): the control plane's entries
//! 0..n in match order, then each learned entry `n + k` for the k-th add
//! of the run (never reused, so an entry that expired and was learned
//! again has a new number). The Python interpreter
//! (`synapse_vmt.p4.learn`) follows the same rules; BMv2 has no
//! add-on-miss (v1model keeps such state in registers).
//!
//! Aging runs at the start of each packet, before any lookup, from a
//! min-heap of expiry times (a restarted timer leaves its old heap item
//! behind, skipped when popped). Every add and expiry can be logged
//! ([`Write`]) for the simulator: the stream turns them into the update
//! engine's inserts and deletes at the packet's arrival time.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// The "slot" of a hit on a control-plane entry (an action's context).
pub const FIXED: u32 = u32::MAX - 1;

/// What the description says of an add-on-miss table.
#[derive(Clone, Debug, Default)]
pub struct Spec {
    /// Expire time profiles (µs), indexed by profile id.
    pub profiles_us: Vec<u64>,
    /// Most entries (the control plane's and learned ones together).
    pub max_size: u32,
    /// The control plane's entries (the first learned entry's number).
    pub fixed: u32,
    /// Per action index: the node a hit running it goes to next.
    pub next_of: Vec<i32>,
}

/// One learned entry.
#[derive(Clone, Debug)]
struct Entry {
    key: Box<[u32]>,
    number: u32,
    action: u32,
    data: Box<[u128]>,
    profile: u32,
    expires_us: u64,
}

/// A data-plane write, for the simulator (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// Keyed table (visit numbering).
    pub keyed: u16,
    /// The packet time (µs) at which it happened.
    pub t_us: u64,
    /// An add (else an expiry).
    pub add: bool,
    pub number: u32,
    pub key: Box<[u32]>,
}

/// Counters of one add-on-miss table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub adds: u64,
    /// `add_entry` calls refused: the table was full.
    pub full: u64,
    pub expired: u64,
    /// Timers restarted (`restart_expire_timer`, `set_entry_expire_time`).
    pub restarts: u64,
    /// Hits on learned entries.
    pub hits: u64,
}

/// The learned entries of one table.
#[derive(Debug, Default)]
pub struct Learner {
    slots: Vec<Option<Entry>>,
    free: Vec<u32>,
    by_key: HashMap<Box<[u32]>, u32>,
    heap: BinaryHeap<Reverse<(u64, u32, u32)>>,
    next_number: u32,
    pub stats: Stats,
}

/// A learned entry's hit: its number, action, next node and slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit {
    pub number: u32,
    pub action: u32,
    pub next: i32,
    pub slot: u32,
}

impl Learner {
    pub fn new(spec: &Spec) -> Learner {
        Learner { next_number: spec.fixed, ..Default::default() }
    }

    /// Entries learned and not expired.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// The learned entry for `key`, if any.
    #[inline]
    pub fn lookup(&mut self, key: &[u32], spec: &Spec) -> Option<Hit> {
        let &slot = self.by_key.get(key)?;
        let e = self.slots[slot as usize].as_ref().unwrap();
        self.stats.hits += 1;
        Some(Hit { number: e.number, action: e.action, next: spec.next_of[e.action as usize], slot })
    }

    /// The action data of the entry in `slot`.
    pub fn data(&self, slot: u32) -> &[u128] {
        &self.slots[slot as usize].as_ref().unwrap().data
    }

    /// Adds an entry for `key` at `now_us`; false when it is refused (the
    /// table is full, or the key is there already).
    #[allow(clippy::too_many_arguments)]
    pub fn add(&mut self, spec: &Spec, keyed: u16, key: &[u32], action: u32, data: &[u128], profile: u32, now_us: u64,
               log: Option<&mut Vec<Write>>) -> bool {
        if self.by_key.contains_key(key) {
            return false;
        }
        if spec.fixed as usize + self.by_key.len() >= spec.max_size as usize {
            self.stats.full += 1;
            return false;
        }
        let expires_us = now_us.saturating_add(spec.profiles_us[profile as usize]);
        let number = self.next_number;
        self.next_number += 1;
        let key: Box<[u32]> = key.into();
        let e = Entry { key: key.clone(), number, action, data: data.into(), profile, expires_us };
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(e);
                s
            }
            None => {
                self.slots.push(Some(e));
                self.slots.len() as u32 - 1
            }
        };
        self.heap.push(Reverse((expires_us, slot, number)));
        if let Some(log) = log {
            log.push(Write { keyed, t_us: now_us, add: true, number, key: key.clone() });
        }
        self.by_key.insert(key, slot);
        self.stats.adds += 1;
        true
    }

    /// Restarts the timer of the entry in `slot` (with a new profile if given).
    pub fn restart(&mut self, spec: &Spec, slot: u32, profile: Option<u32>, now_us: u64) {
        let Some(Some(e)) = self.slots.get_mut(slot as usize) else { return };
        if let Some(p) = profile {
            e.profile = p;
        }
        e.expires_us = now_us.saturating_add(spec.profiles_us[e.profile as usize]);
        self.heap.push(Reverse((e.expires_us, slot, e.number)));
        self.stats.restarts += 1;
    }

    /// Removes the entries whose time is up at `now_us` (see the module doc).
    #[inline]
    pub fn age(&mut self, keyed: u16, now_us: u64, mut log: Option<&mut Vec<Write>>) {
        while let Some(&Reverse((t, slot, number))) = self.heap.peek() {
            if t > now_us {
                break;
            }
            self.heap.pop();
            let live = self.slots[slot as usize].as_ref().is_some_and(|e| e.number == number && e.expires_us == t);
            if !live {
                continue; // restarted since, or already gone
            }
            let e = self.slots[slot as usize].take().unwrap();
            self.by_key.remove(&e.key);
            self.free.push(slot);
            self.stats.expired += 1;
            if let Some(log) = log.as_deref_mut() {
                log.push(Write { keyed, t_us: now_us, add: false, number, key: e.key });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        Spec { profiles_us: vec![10, 100], max_size: 3, fixed: 1, next_of: vec![-1, 7] }
    }

    #[test]
    fn adds_ages_and_numbers_entries() {
        let s = spec();
        let mut l = Learner::new(&s);
        let mut log = Vec::new();
        assert!(l.add(&s, 0, &[5], 1, &[9], 0, 0, Some(&mut log)));
        assert!(!l.add(&s, 0, &[5], 1, &[9], 0, 1, Some(&mut log)), "a key learned once");
        assert_eq!(l.lookup(&[5], &s), Some(Hit { number: 1, action: 1, next: 7, slot: 0 }));
        assert!(l.add(&s, 0, &[6], 1, &[8], 1, 2, Some(&mut log)));
        // max_size 3 with one fixed entry: full
        assert!(!l.add(&s, 0, &[7], 1, &[7], 0, 3, None));
        assert_eq!(l.stats.full, 1);
        // entry [5] expires at 10: alive at 9, gone at 10
        l.age(0, 9, Some(&mut log));
        assert!(l.lookup(&[5], &s).is_some());
        l.age(0, 10, Some(&mut log));
        assert!(l.lookup(&[5], &s).is_none());
        assert_eq!(log.last().unwrap(), &Write { keyed: 0, t_us: 10, add: false, number: 1, key: vec![5].into() });
        // learned again: a new number
        assert!(l.add(&s, 0, &[5], 0, &[1], 0, 11, Some(&mut log)));
        assert_eq!(l.lookup(&[5], &s).unwrap().number, 3);
    }

    #[test]
    fn a_restarted_timer_postpones_the_expiry() {
        let s = spec();
        let mut l = Learner::new(&s);
        l.add(&s, 0, &[5], 1, &[], 0, 0, None);
        let h = l.lookup(&[5], &s).unwrap();
        l.restart(&s, h.slot, None, 8); // now expires at 18
        l.age(0, 17, None);
        assert!(l.lookup(&[5], &s).is_some());
        l.age(0, 18, None);
        assert!(l.lookup(&[5], &s).is_none());
        // a new profile: 100 us from the restart
        l.add(&s, 0, &[6], 1, &[], 0, 20, None);
        let h = l.lookup(&[6], &s).unwrap();
        l.restart(&s, h.slot, Some(1), 25);
        l.age(0, 124, None);
        assert!(l.lookup(&[6], &s).is_some());
        l.age(0, 125, None);
        assert!(l.is_empty());
    }
}

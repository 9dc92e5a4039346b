//! The PMU's cache: a fully associative CAM with LRU replacement, or
//! segmented LRU (SLRU, `[defence] slru_protected`: Karedla, Love and
//! Wherry, IEEE Computer 1994), a scan-resistant replacement against cache
//! flooding.
//!
//! Follows §4.2 and §4.5 of the Synapse paper: a CAM searched in parallel,
//! extended with a linked list of its entries in recency order so that an
//! access and a replacement are O(1). Here the list is index-linked (`prev`,
//! `next` slot numbers) and a hash map stands in for the parallel search.
//! A lookup reports how many entries it compared (the valid ones: their match
//! lines switch), the energy proxy of the metrics.
//!
//! SLRU splits the recency list in two: a *protected* segment (at most
//! `protected_cap` entries, from the head) of keys hit since their fill, and
//! a *probation* segment after it (from `mid` to the tail). A fill enters at
//! the probation head; a hit moves its entry to the list head (protected),
//! and when the protected segment overflows its last entry is demoted to the
//! probation head (the boundary moves back by one). The victim is still the
//! tail: the probation segment's LRU entry, so keys seen once (a scan, a
//! flood of new keys) evict each other, not the keys hit again.

use super::FastBuild;
use crate::classify::Match;
use crate::rules::{Key, MAX_FIELDS};
use std::collections::HashMap;

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Slot<const N: usize> {
    key: Key<N>,
    action: Match,
    prev: u32,
    next: u32,
    /// SLRU: in the protected segment.
    prot: bool,
}

/// Result of a CAM search.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Lookup {
    Hit { action: Match },
    Miss,
}

/// A CAM of keys of `N` words (default: the 8-word [`Key`]).
pub struct Cam<const N: usize = MAX_FIELDS> {
    capacity: u32,
    slots: Vec<Slot<N>>,
    map: HashMap<Key<N>, u32, FastBuild>,
    /// Most recently used.
    head: u32,
    /// Least recently used: the next victim.
    tail: u32,
    /// Slots emptied by [`Cam::invalidate_where`], reused first.
    free: Vec<u32>,
    /// A version tag in key word `.0` whose value `.1` matches every
    /// version (an "any version" bit beside the tag field: entries whose
    /// answer is the same in the versions live; `sim/xtable.rs`).
    any_tag: Option<(usize, u32)>,
    /// SLRU: the protected segment's size (0: plain LRU), its entries, and
    /// the first probation entry (NIL: none).
    protected_cap: u32,
    protected: u32,
    mid: u32,
}

impl<const N: usize> Cam<N> {
    pub fn new(capacity: u32) -> Cam<N> {
        Cam {
            capacity,
            slots: Vec::with_capacity(capacity as usize),
            map: HashMap::with_capacity_and_hasher(capacity as usize, FastBuild::default()),
            head: NIL,
            tail: NIL,
            free: Vec::new(),
            any_tag: None,
            protected_cap: 0,
            protected: 0,
            mid: NIL,
        }
    }

    /// Segmented LRU with a protected segment of `protected` entries (0:
    /// plain LRU). On an empty CAM.
    pub fn set_slru(&mut self, protected: u32) {
        assert!(self.map.is_empty(), "set_slru on a CAM holding entries");
        self.protected_cap = protected.min(self.capacity);
    }

    /// Key word `word` is a version tag and `any` the value matching
    /// every version (see `any_tag`).
    pub fn set_any_tag(&mut self, word: usize, any: u32) {
        self.any_tag = Some((word, any));
    }

    pub fn capacity(&self) -> u32 {
        self.capacity
    }
    /// Valid entries.
    pub fn len(&self) -> u32 {
        self.map.len() as u32
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    fn unlink(&mut self, i: u32) {
        let Slot { prev, next, prot, .. } = self.slots[i as usize];
        if self.mid == i {
            self.mid = next;
        }
        if prot {
            self.protected -= 1;
            self.slots[i as usize].prot = false;
        }
        if prev == NIL {
            self.head = next
        } else {
            self.slots[prev as usize].next = next
        }
        if next == NIL {
            self.tail = prev
        } else {
            self.slots[next as usize].prev = prev
        }
    }

    /// SLRU: `i` (unlinked) to the list head, protected; the protected
    /// segment's last entry demoted when it overflows.
    fn promote(&mut self, i: u32) {
        self.push_front(i);
        self.slots[i as usize].prot = true;
        self.protected += 1;
        if self.protected > self.protected_cap {
            let d = if self.mid == NIL { self.tail } else { self.slots[self.mid as usize].prev };
            self.slots[d as usize].prot = false;
            self.protected -= 1;
            self.mid = d;
        }
    }

    /// SLRU: `i` (unlinked) to the probation segment's head.
    fn push_probation(&mut self, i: u32) {
        if self.mid == NIL {
            // At the tail.
            self.slots[i as usize].prev = self.tail;
            self.slots[i as usize].next = NIL;
            if self.tail != NIL {
                self.slots[self.tail as usize].next = i;
            }
            self.tail = i;
            if self.head == NIL {
                self.head = i;
            }
        } else {
            let m = self.mid;
            let p = self.slots[m as usize].prev;
            self.slots[i as usize].prev = p;
            self.slots[i as usize].next = m;
            self.slots[m as usize].prev = i;
            if p == NIL {
                self.head = i;
            } else {
                self.slots[p as usize].next = i;
            }
        }
        self.mid = i;
    }

    /// A hit (or a fill of a cached key) on slot `i`.
    fn touch(&mut self, i: u32) {
        if self.protected_cap > 0 {
            if self.head != i || !self.slots[i as usize].prot {
                self.unlink(i);
                self.promote(i);
            }
        } else if self.head != i {
            self.unlink(i);
            self.push_front(i);
        }
    }

    fn push_front(&mut self, i: u32) {
        self.slots[i as usize].prev = NIL;
        self.slots[i as usize].next = self.head;
        if self.head != NIL {
            self.slots[self.head as usize].prev = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }

    /// Searches `key`; a hit becomes the most recently used entry. Returns
    /// the result and the number of entries compared.
    pub fn lookup(&mut self, key: &Key<N>) -> (Lookup, u32) {
        let compared = self.len();
        let mut hit = self.map.get(key).copied();
        if let (None, Some((w, any))) = (hit, self.any_tag) {
            // The same search: the tag field matches the key's version or
            // an entry valid for any version.
            let mut k = *key;
            k.0[w] = any;
            hit = self.map.get(&k).copied();
        }
        match hit {
            Some(i) => {
                self.touch(i);
                (
                    Lookup::Hit {
                        action: self.slots[i as usize].action,
                    },
                    compared,
                )
            }
            None => (Lookup::Miss, compared),
        }
    }

    /// Whether `key` is cached, without touching recency.
    pub fn contains(&self, key: &Key<N>) -> bool {
        self.map.contains_key(key)
    }

    /// Fills `key → action` as the most recent entry, evicting the least
    /// recently used one when full. Returns the evicted key.
    pub fn insert(&mut self, key: Key<N>, action: Match) -> Option<Key<N>> {
        if self.capacity == 0 {
            return None;
        }
        if let Some(&i) = self.map.get(&key) {
            self.slots[i as usize].action = action;
            self.touch(i);
            return None;
        }
        let mut evicted = None;
        let i = if let Some(f) = self.free.pop() {
            self.slots[f as usize].key = key;
            self.slots[f as usize].action = action;
            f
        } else if (self.slots.len() as u32) < self.capacity {
            self.slots.push(Slot {
                key,
                action,
                prev: NIL,
                next: NIL,
                prot: false,
            });
            self.slots.len() as u32 - 1
        } else {
            let v = self.tail;
            self.unlink(v);
            let old = self.slots[v as usize].key;
            self.map.remove(&old);
            evicted = Some(old);
            self.slots[v as usize].key = key;
            self.slots[v as usize].action = action;
            v
        };
        self.map.insert(key, i);
        if self.protected_cap > 0 {
            self.push_probation(i);
        } else {
            self.push_front(i);
        }
        evicted
    }

    /// Invalidates every entry (a PMU changing tables).
    pub fn clear(&mut self) {
        self.slots.clear();
        self.free.clear();
        self.map.clear();
        self.head = NIL;
        self.tail = NIL;
        self.protected = 0;
        self.mid = NIL;
    }

    /// Invalidates every entry for which `stale(key, action)` holds (a rule
    /// update made its cached answer stale); returns how many. The freed
    /// slots are reused by later fills.
    pub fn invalidate_where(&mut self, mut stale: impl FnMut(&Key<N>, Match) -> bool) -> u32 {
        let mut n = 0;
        let mut i = self.head;
        while i != NIL {
            let next = self.slots[i as usize].next;
            let s = self.slots[i as usize];
            if stale(&s.key, s.action) {
                self.unlink(i);
                self.map.remove(&s.key);
                self.free.push(i);
                n += 1;
            }
            i = next;
        }
        n
    }

    /// Invalidates every entry for which `stale(key, action)` holds and
    /// rewrites the key of every other one with `retag` (a version tag in
    /// the key moved on: one bulk write of the tag field); returns how many
    /// were invalidated. Recency is kept.
    pub fn invalidate_or_retag(
        &mut self,
        mut stale: impl FnMut(&Key<N>, Match) -> bool,
        mut retag: impl FnMut(&mut Key<N>),
    ) -> u32 {
        let mut n = 0;
        let mut i = self.head;
        let mut moved = Vec::new();
        while i != NIL {
            let next = self.slots[i as usize].next;
            let s = self.slots[i as usize];
            self.map.remove(&s.key);
            if stale(&s.key, s.action) {
                self.unlink(i);
                self.free.push(i);
                n += 1;
            } else {
                retag(&mut self.slots[i as usize].key);
                moved.push(i);
            }
            i = next;
        }
        for i in moved {
            let k = self.slots[i as usize].key;
            if self.map.contains_key(&k) {
                // Two entries re-tagged to one key: keep the more recent.
                self.unlink(i);
                self.free.push(i);
                n += 1;
            } else {
                self.map.insert(k, i);
            }
        }
        n
    }

    /// Entries (key, action) from most to least recently used: what a
    /// warm join reads out of an old owner (`sim/join.rs`).
    pub fn entries_by_recency(&self) -> Vec<(Key<N>, Match)> {
        let mut out = Vec::with_capacity(self.map.len());
        let mut i = self.head;
        while i != NIL {
            let s = &self.slots[i as usize];
            out.push((s.key, s.action));
            i = s.next;
        }
        out
    }

    /// Keys from most to least recently used (for tests and inspection).
    pub fn keys_by_recency(&self) -> Vec<Key<N>> {
        self.entries_by_recency().into_iter().map(|(k, _)| k).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(i: u32) -> Key {
        Key::five_tuple(i, 0, 0, 0, 0)
    }

    /// Segmented LRU against a reference of two queues (protected,
    /// probation; front = most recent) on random hits, fills and
    /// invalidations: the same hits, victims and recency order.
    #[test]
    fn slru_matches_a_two_queue_reference() {
        use rand::{Rng, SeedableRng};
        use std::collections::VecDeque;
        for (cap, prot) in [(8u32, 6u32), (5, 1), (4, 4), (16, 12)] {
            let mut rng = rand_pcg::Pcg64::seed_from_u64(cap as u64 * 31 + prot as u64);
            let mut c = Cam::new(cap);
            c.set_slru(prot);
            let (mut pq, mut bq): (VecDeque<u32>, VecDeque<u32>) = (VecDeque::new(), VecDeque::new());
            for _ in 0..20_000 {
                let x = rng.gen_range(0..3 * cap);
                let op = rng.gen_range(0..10);
                if op < 6 {
                    let (hit, _) = c.lookup(&k(x));
                    let was = pq.iter().position(|&y| y == x).map(|i| pq.remove(i)).or_else(|| bq.iter().position(|&y| y == x).map(|i| bq.remove(i)));
                    assert_eq!(hit == Lookup::Miss, was.is_none(), "lookup {x}");
                    if was.is_some() {
                        pq.push_front(x);
                        if pq.len() > prot as usize {
                            bq.push_front(pq.pop_back().unwrap());
                        }
                    }
                } else if op < 9 {
                    let ev = c.insert(k(x), Some(x));
                    let cached = pq.contains(&x) || bq.contains(&x);
                    if cached {
                        assert_eq!(ev, None);
                        let was = pq.iter().position(|&y| y == x).map(|i| pq.remove(i)).or_else(|| bq.iter().position(|&y| y == x).map(|i| bq.remove(i)));
                        assert!(was.is_some());
                        pq.push_front(x);
                        if pq.len() > prot as usize {
                            bq.push_front(pq.pop_back().unwrap());
                        }
                    } else {
                        let want = if pq.len() + bq.len() == cap as usize { bq.pop_back().or_else(|| pq.pop_back()) } else { None };
                        assert_eq!(ev, want.map(k), "fill {x}");
                        bq.push_front(x);
                    }
                } else {
                    let n = c.invalidate_where(|key, _| key.0[0] == x);
                    let before = pq.len() + bq.len();
                    pq.retain(|&y| y != x);
                    bq.retain(|&y| y != x);
                    assert_eq!(n as usize, before - pq.len() - bq.len());
                }
                let want: Vec<Key> = pq.iter().chain(bq.iter()).map(|&y| k(y)).collect();
                assert_eq!(c.keys_by_recency(), want);
            }
        }
    }

    /// A scan of new keys through a full SLRU evicts only probation
    /// entries: the keys hit since their fill stay cached.
    #[test]
    fn slru_keeps_the_hit_keys_through_a_scan() {
        let mut c = Cam::new(8);
        c.set_slru(6);
        for i in 0..8 {
            c.insert(k(i), Some(i));
        }
        for i in 0..6 {
            assert!(matches!(c.lookup(&k(i)).0, Lookup::Hit { .. }));
        }
        for i in 100..1000 {
            c.insert(k(i), None);
        }
        assert!((0..6).all(|i| c.contains(&k(i))));
        // Plain LRU loses them all.
        let mut l = Cam::new(8);
        for i in 0..8 {
            l.insert(k(i), Some(i));
        }
        for i in 100..1000 {
            l.insert(k(i), None);
        }
        assert!((0..6).all(|i| !l.contains(&k(i))));
    }

    #[test]
    fn retag_moves_the_kept_entries_to_the_new_tag_and_keeps_recency() {
        let mut c = Cam::new(4);
        for i in 0..4 {
            c.insert(k(i), Some(i));
        }
        c.lookup(&k(0)); // most recent
        let n = c.invalidate_or_retag(|key, _| key.0[0] == 2, |key| key.0[7] = 9);
        assert_eq!((n, c.len()), (1, 3));
        let tagged = |i: u32| {
            let mut x = k(i);
            x.0[7] = 9;
            x
        };
        assert_eq!(c.keys_by_recency(), vec![tagged(0), tagged(3), tagged(1)]);
        assert!(!c.contains(&k(0)) && c.contains(&tagged(0)));
        assert_eq!(c.lookup(&tagged(3)).0, Lookup::Hit { action: Some(3) });
        // The freed slot is reused; the LRU entry (1) is the next victim.
        c.insert(k(5), Some(5));
        assert_eq!(c.insert(k(6), Some(6)), Some(tagged(1)));
    }

    #[test]
    fn an_any_version_entry_matches_every_tag_a_tagged_one_only_its_own() {
        let mut c = Cam::new(4);
        let tag = |i: u32, t: u32| {
            let mut x = k(i);
            x.0[7] = t;
            x
        };
        c.set_any_tag(7, u32::MAX);
        c.insert(tag(1, u32::MAX), Some(1));
        c.insert(tag(2, 5), Some(2));
        assert_eq!(c.lookup(&tag(1, 4)).0, Lookup::Hit { action: Some(1) });
        assert_eq!(c.lookup(&tag(1, 5)).0, Lookup::Hit { action: Some(1) });
        assert_eq!(c.lookup(&tag(2, 5)).0, Lookup::Hit { action: Some(2) });
        assert_eq!(c.lookup(&tag(2, 4)).0, Lookup::Miss);
    }

    #[test]
    fn lru_victim_is_least_recently_used() {
        let mut c = Cam::new(3);
        for i in 0..3 {
            assert_eq!(c.insert(k(i), Some(i)), None);
        }
        // Touch 0: now 1 is the LRU.
        assert_eq!(c.lookup(&k(0)).0, Lookup::Hit { action: Some(0) });
        assert_eq!(c.insert(k(9), None), Some(k(1)));
        assert_eq!(c.keys_by_recency(), vec![k(9), k(0), k(2)]);
        assert_eq!(c.lookup(&k(1)).0, Lookup::Miss);
        assert_eq!(c.lookup(&k(9)).0, Lookup::Hit { action: None });
    }

    #[test]
    fn reinsert_updates_without_evicting_and_counts_compares() {
        let mut c = Cam::new(2);
        c.insert(k(1), Some(1));
        assert_eq!(c.lookup(&k(5)).1, 1);
        c.insert(k(2), Some(2));
        assert_eq!(c.insert(k(1), Some(7)), None);
        assert_eq!(c.len(), 2);
        assert_eq!(c.lookup(&k(1)), (Lookup::Hit { action: Some(7) }, 2));
        c.clear();
        assert!(c.is_empty());
        assert_eq!(c.lookup(&k(1)), (Lookup::Miss, 0));
    }

    #[test]
    fn wide_keys_differing_in_any_word_are_distinct_entries() {
        // A 24-word key (switch's ipv6_acl): keys equal but for one word
        // must not alias, whichever word it is.
        let mut c: Cam<32> = Cam::new(64);
        let base = Key::<32>::from_words(&[0xdead_beef; 24]);
        c.insert(base, Some(0));
        for w in 0..24 {
            let mut k = base;
            k.0[w] ^= 1;
            assert_eq!(c.lookup(&k).0, Lookup::Miss, "word {w}");
            c.insert(k, Some(w as u32 + 1));
        }
        assert_eq!(c.len(), 25);
        assert_eq!(c.lookup(&base).0, Lookup::Hit { action: Some(0) });
        let mut k = base;
        k.0[23] ^= 1;
        assert_eq!(c.lookup(&k).0, Lookup::Hit { action: Some(24) });
    }

    #[test]
    fn matches_a_reference_lru_on_random_accesses() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(3);
        let mut c = Cam::new(8);
        let mut reference: Vec<u32> = Vec::new(); // front = MRU
        for _ in 0..5000 {
            let x = rng.gen_range(0..20u32);
            let hit = matches!(c.lookup(&k(x)).0, Lookup::Hit { .. });
            let pos = reference.iter().position(|&y| y == x);
            assert_eq!(hit, pos.is_some());
            match pos {
                Some(p) => {
                    reference.remove(p);
                }
                None => {
                    let ev = c.insert(k(x), Some(x));
                    if reference.len() == 8 {
                        assert_eq!(ev, Some(k(reference.pop().unwrap())));
                    } else {
                        assert_eq!(ev, None);
                    }
                }
            }
            reference.insert(0, x);
        }
    }
}

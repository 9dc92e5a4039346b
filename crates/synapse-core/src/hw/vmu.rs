//! The Virtual Matching Unit (VMU) of one logical table.
//!
//! Follows §4.1 and Appendix D of the Synapse paper.
//! - **Lookup table**: a key is hashed with lookup3 to an index of a 2^N-entry
//!   table whose entry is invalid or names a PMU. The CPU precomputes it from
//!   a consistent-hashing **ring** (each PMU at `vnodes` points; an index
//!   belongs to the first point at or after its position) and, when the PMU set
//!   changes, writes only the entries whose owner changed — adding or removing
//!   one of P PMUs moves about 1/P of them.
//! - **Request producer**: tags each key with a sequence number.
//! - **Response consumer** with the PHV waiting FIFO: a miss notification
//!   parks the PHV; a valid response releases the current PHV or, when PHVs
//!   wait, the FIFO head. Here the FIFO is kept as a window of tagged slots in
//!   request order, so that responses that come back out of order (different
//!   PMUs, the ELU) still release PHVs in order, one per cycle (the action
//!   unit's II = 1). Its size is the PHV buffer shared by producer and
//!   consumer: the producer blocks while it is full.
//!
//! Timing (as the cluster RTL, `synapse_cluster.v`): a response reaches the
//! consumer through a port register, so an answer that leaves a PMU (or the
//! ELU) in cycle c can release its PHV from c + `rsp_delay` (1 in the
//! simulator; 0 for the VMU alone, whose RTL has no such register). The
//! producer's room is the window's at the start of the cycle: a release
//! frees its slot for the next cycle's request, not this cycle's.

use super::Cycle;
use crate::classify::Match;
use crate::hash::lookup3::{hash_key, hashword};
use super::fifo::Fifo;
use crate::rules::Key;

pub const INVALID: u16 = u16::MAX;

/// Cycles from an answer leaving its PMU (or the ELU) to the VMU acting on
/// it: the register at each of the cluster's VMU response ports.
pub const RSP_DELAY: Cycle = 1;

/// A consistent-hashing ring of PMUs.
#[derive(Clone, Debug)]
pub struct Ring {
    pub vnodes: u32,
    pub seed: u32,
    /// (position, pmu), sorted.
    points: Vec<(u32, u16)>,
}

impl Ring {
    pub fn new(vnodes: u32, seed: u32) -> Ring {
        Ring {
            vnodes: vnodes.max(1),
            seed,
            points: Vec::new(),
        }
    }
    pub fn add(&mut self, pmu: u16) {
        for r in 0..self.vnodes {
            let pos = hashword(&[pmu as u32, r], self.seed);
            self.points.push((pos, pmu));
        }
        self.points.sort_unstable();
    }
    pub fn remove(&mut self, pmu: u16) {
        self.points.retain(|&(_, p)| p != pmu);
    }
    pub fn pmus(&self) -> Vec<u16> {
        let mut v: Vec<u16> = self.points.iter().map(|&(_, p)| p).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
    /// The PMU owning ring position `pos` (binary search, as the CPU's BST).
    pub fn owner(&self, pos: u32) -> u16 {
        if self.points.is_empty() {
            return INVALID;
        }
        let i = self.points.partition_point(|&(p, _)| p < pos);
        self.points[if i == self.points.len() { 0 } else { i }].1
    }
}

/// The VMU's 2^N-entry lookup table.
#[derive(Clone, Debug)]
pub struct LookupTable {
    pub bits: u32,
    entries: Vec<u16>,
}

impl LookupTable {
    pub fn new(bits: u32) -> LookupTable {
        let bits = bits.clamp(1, 24);
        LookupTable {
            bits,
            entries: vec![INVALID; 1 << bits],
        }
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    #[inline]
    pub fn get(&self, index: usize) -> u16 {
        self.entries[index]
    }
    /// The CPU writes one entry (a single-port table, one write a cycle).
    pub fn set(&mut self, index: usize, pmu: u16) {
        self.entries[index] = pmu;
    }
    /// Ring position of entry `i`: entries are spread evenly over the ring.
    fn position(&self, i: usize) -> u32 {
        ((i as u64) << (32 - self.bits)) as u32
    }
    /// Recomputes every entry from the ring and writes only those that
    /// changed (the CPU's incremental update); returns how many it wrote.
    pub fn update(&mut self, ring: &Ring) -> usize {
        self.update_moves(ring).len()
    }
    /// As [`LookupTable::update`], returning the (entry, previous owner)
    /// of every entry it wrote: the slots whose keys change PMU.
    pub fn update_moves(&mut self, ring: &Ring) -> Vec<(u32, u16)> {
        let mut moved = Vec::new();
        for i in 0..self.entries.len() {
            let o = ring.owner(self.position(i));
            if self.entries[i] != o {
                moved.push((i as u32, self.entries[i]));
                self.entries[i] = o;
            }
        }
        moved
    }
    /// Entries owned by each PMU id (INVALID excluded), for balance checks.
    pub fn shares(&self, pmus: usize) -> Vec<usize> {
        let mut s = vec![0; pmus];
        for &e in &self.entries {
            if (e as usize) < pmus {
                s[e as usize] += 1;
            }
        }
        s
    }
}

/// How a PHV's answer was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    Hit,
    Miss,
    /// Its miss was shed before the ELU (`Pmu::shed_head`): the PHV is
    /// dropped at its release, not sent on.
    Shed,
}

/// A PHV between request and release.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    pub phv: u64,
    pub flow: u32,
    /// When it entered the table's stage FIFO.
    pub arrived: Cycle,
    /// When the request producer sent its key.
    pub issued: Cycle,
    pub action: Option<Match>,
    pub via: Via,
    /// The first cycle its answer can release it (answer + `rsp_delay`).
    pub ready: Cycle,
}

/// The request producer and response consumer of one table.
pub struct Vmu {
    pub table: u16,
    /// Key words hashed.
    pub words: usize,
    pub seed: u32,
    pub ring: Ring,
    pub lut: LookupTable,
    window: Fifo<Slot>,
    /// Tag of `window[0]`.
    base_tag: u64,
    capacity: usize,
    /// Responses that came back ahead of an older unanswered PHV.
    pub reordered: u64,
    /// Tag of the oldest unanswered PHV (or the next tag if none).
    oldest_open: u64,
    /// Answers known ahead of their cycle ([`Vmu::deliver`]): (tag,
    /// action, cycle, rank within the cycle), in tag and time order.
    pending: Fifo<(u64, Match, Cycle, u32)>,
    /// Cycles from an answer leaving its PMU or the ELU to the consumer
    /// acting on it (the cluster's response port register).
    pub rsp_delay: Cycle,
    /// The cycle of the last release (its slot is free from the next one).
    last_release: Cycle,
}

impl Vmu {
    pub fn new(
        table: u16,
        words: usize,
        lookup_bits: u32,
        vnodes: u32,
        phv_fifo: u32,
        seed: u32,
    ) -> Vmu {
        Vmu {
            table,
            words,
            seed,
            ring: Ring::new(vnodes, seed ^ 0x5eed),
            lut: LookupTable::new(lookup_bits),
            window: Fifo::new(
                phv_fifo.max(1) as usize,
                Slot { phv: 0, flow: 0, arrived: 0, issued: 0, action: None, via: Via::Hit, ready: 0 },
            ),
            base_tag: 0,
            capacity: phv_fifo.max(1) as usize,
            reordered: 0,
            oldest_open: 0,
            pending: Fifo::new(phv_fifo.max(1) as usize, (0, None, 0, 0)),
            rsp_delay: RSP_DELAY,
            last_release: Cycle::MAX,
        }
    }

    /// An answer that will reach the response consumer at cycle `at`, at
    /// `rank` among that cycle's responses (lower first), known ahead (an
    /// uncontended CAM hit). It takes effect when the simulator settles
    /// the VMU at or past that point ([`Vmu::settle`]), exactly as a
    /// [`Vmu::resolve`] then. Answers must be delivered in tag order with
    /// non-decreasing (at, rank).
    #[inline]
    pub fn deliver(&mut self, tag: u64, action: Match, at: Cycle, rank: u32) {
        debug_assert!(self.pending.get(self.pending.len().wrapping_sub(1)).map_or(true, |&(t, _, c, r)| t < tag && (c, r) <= (at, rank)));
        self.pending.push_back((tag, action, at, rank));
    }
    /// Applies the delivered answers due before (`now`, `rank`), in order.
    /// Call before anything reads or changes the window at that point.
    #[inline]
    pub fn settle(&mut self, now: Cycle, rank: u32) {
        if self.pending.is_empty() {
            return;
        }
        while let Some(&(tag, action, at, r)) = self.pending.front() {
            if (at, r) >= (now, rank) {
                break;
            }
            self.pending.pop_front();
            self.resolve(tag, action, at);
        }
    }
    /// The first cycle the window's head can be released with its
    /// delivered answer, if it waits for one.
    pub fn head_due(&self) -> Option<Cycle> {
        match self.pending.front() {
            Some(&(tag, _, at, _)) if tag == self.base_tag => Some(at + self.rsp_delay),
            _ => None,
        }
    }
    /// Answers delivered but not yet settled.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Lookup-table index of a key: lookup3, then `h % 2^N` as in Appendix D.
    #[inline]
    pub fn index<const N: usize>(&self, key: &Key<N>) -> usize {
        (hash_key(key, self.words, self.seed) as usize) & (self.lut.len() - 1)
    }
    /// The PMU for a key, or INVALID.
    #[inline]
    pub fn route<const N: usize>(&self, key: &Key<N>) -> u16 {
        self.lut.get(self.index(key))
    }
    /// The PMU at a lookup-table index from [`Vmu::index`] (the simulator
    /// hashes each flow's key once, as the key never changes).
    #[inline]
    pub fn route_index(&self, index: usize) -> u16 {
        self.lut.get(index)
    }

    pub fn add_pmu(&mut self, pmu: u16) -> usize {
        self.ring.add(pmu);
        self.lut.update(&self.ring)
    }
    /// [`Vmu::add_pmu`], returning the moved entries and their previous
    /// owners (INVALID where the table had no PMU).
    pub fn add_pmu_moves(&mut self, pmu: u16) -> Vec<(u32, u16)> {
        self.ring.add(pmu);
        self.lut.update_moves(&self.ring)
    }
    pub fn remove_pmu(&mut self, pmu: u16) -> usize {
        self.ring.remove(pmu);
        self.lut.update(&self.ring)
    }

    /// The PHV buffer has room at cycle `now`: the producer may issue. A
    /// release at `now` frees its slot from `now + 1` (the room is a
    /// register).
    #[inline]
    pub fn has_room(&self, now: Cycle) -> bool {
        self.window.len() + usize::from(self.last_release == now) < self.capacity
    }
    /// PHVs waiting for their answer or for release.
    pub fn occupancy(&self) -> usize {
        self.window.len()
    }
    /// Request producer: registers a PHV, returns its tag.
    #[inline]
    pub fn issue(&mut self, phv: u64, flow: u32, arrived: Cycle, now: Cycle) -> u64 {
        debug_assert!(self.has_room(now));
        let tag = self.base_tag + self.window.len() as u64;
        self.window.push_back(Slot {
            phv,
            flow,
            arrived,
            issued: now,
            action: None,
            via: Via::Hit,
            ready: Cycle::MAX,
        });
        if self.oldest_open < tag {
            // Every older PHV is answered; keep the pointer at the first open one.
        } else {
            self.oldest_open = tag;
        }
        tag
    }
    /// Response consumer: a miss notification marks the PHV as parked.
    pub fn park(&mut self, tag: u64) {
        let i = (tag - self.base_tag) as usize;
        self.window[i].via = Via::Miss;
    }
    /// Response consumer: a valid response (hit or ELU fill) leaving its
    /// PMU or the ELU at `now`. Returns the key's match latency (request
    /// sent → answer at the consumer, `now + rsp_delay`).
    pub fn resolve(&mut self, tag: u64, action: Match, now: Cycle) -> Cycle {
        let i = (tag - self.base_tag) as usize;
        debug_assert!(self.window[i].action.is_none(), "tag {tag} answered twice");
        let ready = now + self.rsp_delay;
        self.window[i].action = Some(action);
        self.window[i].ready = ready;
        let lat = ready - self.window[i].issued;
        if tag != self.oldest_open {
            // An older PHV is still unanswered.
            self.reordered += 1;
            return lat;
        }
        // Advance past every answered PHV (amortised O(1)).
        let end = self.base_tag + self.window.len() as u64;
        while self.oldest_open < end
            && self.window[(self.oldest_open - self.base_tag) as usize]
                .action
                .is_some()
        {
            self.oldest_open += 1;
        }
        lat
    }
    /// Response consumer: the PHV's miss was shed (`Response::Shed`): it
    /// is answered (releasing in order as any other) and dropped there.
    pub fn shed(&mut self, tag: u64, now: Cycle) {
        let i = (tag - self.base_tag) as usize;
        self.window[i].via = Via::Shed;
        self.resolve(tag, None, now);
    }
    /// The head's miss was shed (call when [`Vmu::head_ready`]).
    pub fn head_shed(&self) -> bool {
        self.window.front().is_some_and(|s| s.via == Via::Shed)
    }
    /// The head is answered (releasable at [`Vmu::head_at`]).
    pub fn head_ready(&self) -> bool {
        self.window.front().is_some_and(|s| s.action.is_some())
    }
    /// The head's answer has reached the consumer by `now`: the action
    /// unit may release it this cycle.
    #[inline]
    pub fn head_ready_at(&self, now: Cycle) -> bool {
        self.window.front().is_some_and(|s| s.action.is_some() && s.ready <= now)
    }
    /// The first cycle the head can be released (call when
    /// [`Vmu::head_ready`]).
    pub fn head_at(&self) -> Cycle {
        self.window.front().map_or(Cycle::MAX, |s| s.ready)
    }
    /// The PHV id at the head of the window (call when [`Vmu::head_ready`]).
    pub fn head_phv(&self) -> u64 {
        self.window.front().map_or(u64::MAX, |s| s.phv)
    }
    /// Releases the head at cycle `now` (call when [`Vmu::head_ready_at`]).
    pub fn release(&mut self, now: Cycle) -> Slot {
        debug_assert!(self.head_ready_at(now));
        self.last_release = now;
        self.base_tag += 1;
        self.window.pop_front().unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adding_or_removing_a_pmu_moves_about_one_pth_of_entries() {
        let mut v = Vmu::new(0, 5, 14, 128, 64, 1);
        for p in 0..7 {
            v.add_pmu(p);
        }
        let n = v.lut.len() as f64;
        let before: Vec<u16> = (0..v.lut.len()).map(|i| v.lut.get(i)).collect();
        let moved = v.add_pmu(7) as f64 / n;
        // Ideal 1/8; only entries now owned by PMU 7 change.
        assert!((moved - 0.125).abs() < 0.03, "moved {moved}");
        for i in 0..v.lut.len() {
            if v.lut.get(i) != before[i] {
                assert_eq!(v.lut.get(i), 7);
            }
        }
        let removed = v.remove_pmu(3) as f64 / n;
        assert!((removed - 0.125).abs() < 0.03, "removed {removed}");
        let shares = v.lut.shares(8);
        assert_eq!(shares[3], 0);
        for (p, &s) in shares.iter().enumerate() {
            if p != 3 {
                assert!((s as f64 / n - 1.0 / 7.0).abs() < 0.05, "pmu {p}: {s}");
            }
        }
    }

    #[test]
    fn empty_ring_leaves_entries_invalid() {
        let mut v = Vmu::new(0, 5, 4, 8, 4, 1);
        assert_eq!(v.route(&Key::default()), INVALID);
        v.add_pmu(2);
        assert_eq!(v.route(&Key::default()), 2);
        assert_eq!(v.remove_pmu(2), 16);
        assert_eq!(v.route(&Key::default()), INVALID);
    }

    #[test]
    fn miss_parks_and_later_hits_wait_behind_it_in_order() {
        let mut v = Vmu::new(0, 5, 4, 8, 3, 1);
        v.rsp_delay = 0; // the VMU alone: answers act in their own cycle
        let t0 = v.issue(100, 0, 0, 0);
        let t1 = v.issue(101, 1, 1, 1);
        v.park(t0);
        assert_eq!(v.resolve(t1, Some(1), 6), 5); // hit of the current PHV while the FIFO holds one
        assert!(!v.head_ready(), "hit waits behind the parked PHV");
        assert_eq!(v.reordered, 1);
        let _t2 = v.issue(102, 2, 2, 2);
        assert!(!v.has_room(2), "PHV buffer full: producer blocks");
        assert_eq!(v.resolve(t0, Some(7), 100), 100); // ELU fill releases the FIFO head
        assert!(v.head_ready_at(100));
        let s = v.release(100);
        assert_eq!((s.phv, s.action, s.via), (100, Some(Some(7)), Via::Miss));
        assert!(!v.has_room(100), "the release frees its slot for the next cycle");
        assert!(v.has_room(101));
        assert!(v.head_ready_at(101));
        assert_eq!(v.release(101).phv, 101);
        assert!(!v.head_ready());
        assert!(v.has_room(101));
    }

    #[test]
    fn an_answer_releases_from_the_cycle_after_it_leaves_its_pmu() {
        let mut v = Vmu::new(0, 5, 4, 8, 2, 1);
        let t0 = v.issue(100, 0, 0, 0);
        assert_eq!(v.resolve(t0, Some(3), 5), 6, "latency counts the port register");
        assert!(v.head_ready() && !v.head_ready_at(5), "not in the cycle it left the PMU");
        assert!(v.head_ready_at(6));
        assert_eq!(v.head_at(), 6);
    }
}

//! The event queue of the simulator: discrete time at the pipeline clock.
//!
//! Events are ordered by `(cycle, seq)`: by time, and among events of one
//! cycle first in, first out. The simulator polls its queues cycle by cycle
//! while any holds work and otherwise jumps straight to the next event, so
//! idle cycles cost nothing.

use crate::hw::Cycle;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Item<E> {
    cycle: Cycle,
    seq: u64,
    ev: E,
}

impl<E> PartialEq for Item<E> {
    fn eq(&self, o: &Self) -> bool {
        (self.cycle, self.seq) == (o.cycle, o.seq)
    }
}
impl<E> Eq for Item<E> {}
impl<E> PartialOrd for Item<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Item<E> {
    // Reversed: BinaryHeap is a max-heap and we want the earliest first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.cycle, o.seq).cmp(&(self.cycle, self.seq))
    }
}

pub struct Engine<E> {
    heap: BinaryHeap<Item<E>>,
    seq: u64,
    now: Cycle,
}

impl<E> Default for Engine<E> {
    fn default() -> Self {
        Engine {
            heap: BinaryHeap::new(),
            seq: 0,
            now: 0,
        }
    }
}

impl<E> Engine<E> {
    pub fn new() -> Engine<E> {
        Engine::default()
    }
    pub fn now(&self) -> Cycle {
        self.now
    }
    /// Schedules `ev` at `cycle` (not before now).
    pub fn schedule(&mut self, cycle: Cycle, ev: E) {
        debug_assert!(
            cycle >= self.now,
            "event in the past: {cycle} < {}",
            self.now
        );
        self.heap.push(Item {
            cycle: cycle.max(self.now),
            seq: self.seq,
            ev,
        });
        self.seq += 1;
    }
    /// Cycle of the next event.
    pub fn peek(&self) -> Option<Cycle> {
        self.heap.peek().map(|i| i.cycle)
    }
    /// Pops the next event if it is due at or before `until`, advancing now.
    pub fn pop_until(&mut self, until: Cycle) -> Option<(Cycle, E)> {
        if self.heap.peek()?.cycle > until {
            return None;
        }
        let it = self.heap.pop().unwrap();
        self.now = it.cycle;
        Some((it.cycle, it.ev))
    }
    /// Moves time forward (never back).
    pub fn advance(&mut self, to: Cycle) {
        self.now = self.now.max(to);
    }
    pub fn len(&self) -> usize {
        self.heap.len()
    }
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_by_cycle_then_fifo_among_ties() {
        let mut e = Engine::new();
        e.schedule(5, "b1");
        e.schedule(3, "a");
        e.schedule(5, "b2");
        e.schedule(5, "b3");
        e.schedule(9, "c");
        let mut out = Vec::new();
        while let Some((c, ev)) = e.pop_until(u64::MAX) {
            out.push((c, ev));
        }
        assert_eq!(
            out,
            vec![(3, "a"), (5, "b1"), (5, "b2"), (5, "b3"), (9, "c")]
        );
        assert_eq!(e.now(), 9);
    }

    #[test]
    fn pop_until_is_inclusive_and_skips_idle_time() {
        let mut e = Engine::new();
        e.schedule(1_000_000, 1);
        assert_eq!(e.pop_until(999_999), None);
        assert_eq!(e.now(), 0);
        assert_eq!(e.peek(), Some(1_000_000));
        assert_eq!(e.pop_until(1_000_000), Some((1_000_000, 1)));
        // An event scheduled during processing at the same cycle still runs
        // after the ones already queued for that cycle.
        e.schedule(1_000_000, 2);
        e.schedule(1_000_001, 3);
        e.schedule(1_000_000, 4);
        assert_eq!(e.pop_until(2_000_000), Some((1_000_000, 2)));
        assert_eq!(e.pop_until(2_000_000), Some((1_000_000, 4)));
        assert_eq!(e.pop_until(2_000_000), Some((1_000_001, 3)));
    }
}

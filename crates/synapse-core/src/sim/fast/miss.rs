//! The miss path in sampled windows of time (SMARTS-style): the exact
//! engine's own ELU and HBM (`hw::elu`, `hw::hbm`: miss queue, ORB, lookup
//! slots, in-order commit, banks, bus budget) driven event by event by the
//! misses alone, at their full rate, during short windows spread over the
//! run. Each window starts empty, warms up (its misses are not measured),
//! measures the misses sent to the ELU in its middle part, keeps taking
//! misses for a while after, then drains until every measured miss has its
//! answer. Between windows nothing is simulated: the misses' latencies are
//! estimated from the windows (`mod.rs`).
//!
//! The PMU → ELU side is reduced to one bus taking one miss a cycle, first
//! come first served (the exact engine's round robin over the PMUs' Q_m
//! gives the same order when they rarely wait).

use super::super::*;
use crate::classify::{Classifier, MemAccess};
use crate::hw::FastBuild;
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Mutex};

/// A lookup structure whose walks are remembered per key: the window
/// simulation walks the same sampled keys again and again. It holds the
/// simulator's structure behind a shared handle, given back with
/// [`Memo::give_back`] after the run.
pub(super) struct Memo<const N: usize> {
    inner: Arc<Mutex<Option<Box<dyn MemoryWalk<N> + Send>>>>,
    /// Per key: its walk's accesses (`arena[from..to]`) and match. One
    /// arena rather than a buffer per key: a run memoises a few hundred.
    cache: RefCell<(HashMap<Key<N>, (u32, u32, Match), FastBuild>, Vec<MemAccess>)>,
}

/// The handle [`Memo::wrap`] returns, to take the structure back.
pub(super) type Handle<const N: usize> = Arc<Mutex<Option<Box<dyn MemoryWalk<N> + Send>>>>;

impl<const N: usize> Memo<N> {
    pub(super) fn wrap(inner: Box<dyn MemoryWalk<N> + Send>) -> (Box<dyn MemoryWalk<N> + Send>, Handle<N>) {
        let h = Arc::new(Mutex::new(Some(inner)));
        (Box::new(Memo { inner: h.clone(), cache: RefCell::new((HashMap::default(), Vec::new())) }), h)
    }
    pub(super) fn give_back(h: Handle<N>) -> Box<dyn MemoryWalk<N> + Send> {
        h.lock().unwrap().take().expect("structure given back twice")
    }
}

impl<const N: usize> Classifier<N> for Memo<N> {
    fn classify(&self, key: &Key<N>) -> Match {
        self.inner.lock().unwrap().as_ref().unwrap().classify(key)
    }
}

impl<const N: usize> MemoryWalk<N> for Memo<N> {
    fn walk(&self, key: &Key<N>, accesses: &mut Vec<MemAccess>) -> Match {
        let mut c = self.cache.borrow_mut();
        let (map, arena) = &mut *c;
        if let Some(&(a, b, m)) = map.get(key) {
            accesses.extend_from_slice(&arena[a as usize..b as usize]);
            return m;
        }
        let from = accesses.len();
        let m = self.inner.lock().unwrap().as_ref().unwrap().walk(key, accesses);
        let a = arena.len() as u32;
        arena.extend_from_slice(&accesses[from..]);
        map.insert(*key, (a, arena.len() as u32, m));
        m
    }
    fn memory_bytes(&self) -> u64 {
        self.inner.lock().unwrap().as_ref().unwrap().memory_bytes()
    }
    fn warm(&self, keys: &[Key<N>]) {
        self.inner.lock().unwrap().as_ref().unwrap().warm(keys)
    }
}

/// A miss on its way to the ELU.
#[derive(Clone, Copy, Debug)]
pub(super) struct Miss {
    /// The cycle the bus may take it (the CAM's answer, or the VMU's
    /// request for a table without PMUs).
    pub at: Cycle,
    /// The cycle its key's request was sent (latency is counted from it).
    pub issued: Cycle,
    pub table: u16,
    pub key: u32,
    pub pmu: u16,
    /// A sampled key's miss (its answer fills a miniature cache).
    pub sampled: bool,
    /// Sent in a measured part of a window.
    pub measured: bool,
    /// A routed PHV's sampled flow and hop (its next hop waits for the
    /// answer).
    pub flow: u32,
    pub hop: u16,
}

/// A window of simulated misses: the exact ELU and HBM, from empty.
pub(super) struct EluWindow<const N: usize> {
    elu: Elu<N>,
    hbm: Hbm,
    engine: Engine<u32>,
    /// The next cycle to simulate (every earlier one is done).
    now: Cycle,
    bus_free: Cycle,
    /// Misses not yet on the bus, by (cycle, order sent).
    input: BinaryHeap<Reverse<(Cycle, u64, u32)>>,
    seq: u64,
    bus: std::collections::VecDeque<u32>,
    /// Misses (and their keys) by tag (free tags reused).
    slab: Vec<Miss>,
    keys: Vec<Key<N>>,
    free: Vec<u32>,
    /// Measured misses not answered yet.
    pub open_measured: u64,
}

impl<const N: usize> EluWindow<N> {
    pub(super) fn new(config: &Config, tables: usize, start: Cycle) -> EluWindow<N> {
        EluWindow {
            elu: Elu::new(config.elu.clone(), tables, config.clock_mhz),
            hbm: Hbm::new(config.hbm.clone()),
            engine: Engine::new(),
            now: start,
            bus_free: start,
            input: BinaryHeap::new(),
            seq: 0,
            bus: std::collections::VecDeque::new(),
            slab: Vec::new(),
            keys: Vec::new(),
            free: Vec::new(),
            open_measured: 0,
        }
    }

    /// From empty again at cycle `start`, as [`EluWindow::new`] gives it,
    /// its buffers kept (a run's windows one after another).
    pub(super) fn reset(&mut self, start: Cycle) {
        self.elu.reset();
        self.hbm = Hbm::new(self.hbm.timing().clone());
        self.engine.reset();
        (self.now, self.bus_free, self.seq, self.open_measured) = (start, start, 0, 0);
        self.input.clear();
        self.bus.clear();
        self.slab.clear();
        self.keys.clear();
        self.free.clear();
    }

    /// Queues a miss of key `key` (its `at` not before the window's
    /// current cycle).
    pub(super) fn send(&mut self, m: Miss, key: Key<N>) {
        let tag = match self.free.pop() {
            Some(t) => {
                self.slab[t as usize] = m;
                self.keys[t as usize] = key;
                t
            }
            None => {
                self.slab.push(m);
                self.keys.push(key);
                self.slab.len() as u32 - 1
            }
        };
        self.open_measured += m.measured as u64;
        self.input.push(Reverse((m.at.max(self.now), self.seq, tag)));
        self.seq += 1;
    }

    /// The earliest cycle, not before `now`, at which something can happen
    /// (`Cycle::MAX`: nothing will).
    pub(super) fn next_cycle(&self) -> Cycle {
        let mut c = self.elu.next_event(self.now.saturating_sub(1));
        if let Some(p) = self.engine.peek() {
            c = c.min(p);
        }
        if let Some(&Reverse((at, _, _))) = self.input.peek() {
            c = c.min(at);
        }
        if !self.bus.is_empty() && self.elu.can_enqueue() {
            c = c.min(self.bus_free);
        }
        c.max(self.now)
    }

    /// Simulates every cycle up to `to` (included); answered misses are
    /// appended to `done` with their answer's cycle, in order.
    pub(super) fn run_to(&mut self, to: Cycle, walkers: &[Box<dyn MemoryWalk<N> + Send>], done: &mut Vec<(Miss, Cycle)>) {
        loop {
            let c = self.next_cycle();
            if c > to || c == Cycle::MAX {
                self.now = self.now.max(to.saturating_add(1).min(Cycle::MAX - 1));
                return;
            }
            self.step(c, walkers, done);
            self.now = c + 1;
        }
    }

    /// One cycle, in the exact engine's phase order: memory completions,
    /// the ELU's commit, the bus, the ELU's registration and walk start.
    fn step(&mut self, c: Cycle, walkers: &[Box<dyn MemoryWalk<N> + Send>], done: &mut Vec<(Miss, Cycle)>) {
        while let Some((_, slot)) = self.engine.pop_until(c) {
            let engine = &mut self.engine;
            self.elu.access_done(c, slot, &mut self.hbm, &mut |t, s| engine.schedule(t, s));
        }
        if let Some((m, _)) = self.elu.commit() {
            let miss = self.slab[m.tag as usize];
            self.free.push(m.tag as u32);
            self.open_measured -= miss.measured as u64;
            done.push((miss, c));
        }
        while let Some(&Reverse((at, _, tag))) = self.input.peek() {
            if at > c {
                break;
            }
            self.input.pop();
            self.bus.push_back(tag);
        }
        if c >= self.bus_free && self.elu.can_enqueue() {
            if let Some(tag) = self.bus.pop_front() {
                let m = self.slab[tag as usize];
                let key = self.keys[tag as usize];
                self.elu.enqueue(c, MissRequest { table: m.table, tag: tag as u64, key, pmu: Some(m.pmu) });
                self.bus_free = c + 1;
            }
        }
        if self.elu.can_tick(c) {
            let engine = &mut self.engine;
            self.elu.tick(c, &mut self.hbm, walkers, &mut |t, s| engine.schedule(t, s));
        }
    }
}

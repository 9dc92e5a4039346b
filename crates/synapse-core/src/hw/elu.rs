//! The External Lookup Unit (ELU).
//!
//! Follows §4.3 of the Synapse paper. Misses of every PMU arrive over a
//! shared bus in one **miss queue** (Q_m^G). Each is registered in the
//! **Outstanding Request Buffer** (ORB), a reorder buffer: entries are
//! allocated at the tail, handed to the **lookup module** in order at the
//! *issue* pointer, finish out of order, and leave in order at the *commit*
//! pointer (oldest) once valid, one reply per cycle (Q_l^G), which fills the
//! PMU's cache. The lookup module walks the table's structure in off-chip
//! memory ([`MemoryWalk`]); each access depends on the previous one, so one
//! lookup is a chain of HBM reads, while up to `lookup_slots` lookups overlap
//! (the trie keeps each level in its own bank so they pipeline). The memory
//! port issues one read per cycle.

use super::hbm::Hbm;
use super::pmu::MissRequest;
use crate::rules::MAX_FIELDS;
use super::Cycle;
use crate::classify::{Match, MemAccess, MemoryWalk};
use serde::{Deserialize, Serialize};
use super::fifo::Fifo;
use crate::rules::Key;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Algo {
    /// The multibit set-pruning trie of the paper (§4.3), one level per
    /// memory bank (classify::trie).
    Trie,
    /// Linear scan of the rule array (the oracle; slow on purpose).
    Linear,
    /// The decision tree (HiCuts/HyperCuts-like): for rule sets, such as
    /// firewall sets, whose trie exceeds its memory budget.
    Dtree,
    /// The partitioned multi-way tree (classify::partition): 64-byte nodes
    /// (one HBM burst each) and 3-4 levels, so fewer dependent reads.
    Ptree,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub algo: Algo,
    pub orb_entries: u32,
    pub miss_queue: u32,
    /// Lookups the static scheduler keeps in flight at once.
    pub lookup_slots: u32,
    /// Cycles from the miss queue into the ORB (registering the request).
    pub latency_cycles: u32,
    /// Build parameters of the lookup structures (`[elu.build]`: `trie`,
    /// `dtree` with its `facl`, `ptree`), for every table's.
    pub build: crate::classify::BuildConfig,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            algo: Algo::Trie,
            orb_entries: 64,
            miss_queue: 64,
            lookup_slots: 8,
            latency_cycles: 1,
            build: Default::default(),
        }
    }
}

struct Entry<const N: usize> {
    miss: MissRequest<N>,
    result: Match,
    accesses: Vec<MemAccess>,
    next: usize,
    valid: bool,
    /// Completion cycle of the read in flight (while walking).
    due: Cycle,
}

/// The ELU of keys of `N` words (default: the 8-word key).
pub struct Elu<const N: usize = MAX_FIELDS> {
    pub config: Config,
    /// The pipeline clock, for memory times in picoseconds.
    clock: super::PsClock,
    miss_q: Fifo<(Cycle, MissRequest<N>)>,
    orb: Vec<Option<Entry<N>>>,
    /// Oldest entry (the commit pointer).
    head: usize,
    len: usize,
    /// Entries from `head` handed to the lookup module so far (issue pointer
    /// = head + issued).
    issued: usize,
    walking: usize,
    port_free: Cycle,
    /// Access buffers of finished walks, reused (one per walk in flight).
    pool: Vec<Vec<MemAccess>>,
    /// Per table: lookups done and HBM bytes charged.
    pub lookups: Vec<u64>,
    pub bytes: Vec<u64>,
    /// Replies committed so far (lookups are walked and committed in the
    /// same ORB order, so reply `i` is walk `i`: rule updates use it to
    /// tell a lookup walked before a replica swap).
    pub commits: u64,
}

impl<const N: usize> Elu<N> {
    pub fn new(config: Config, tables: usize, clock_mhz: f64) -> Elu<N> {
        let n = config.orb_entries.max(1) as usize;
        Elu {
            clock: super::PsClock::new(1e6 / clock_mhz),
            miss_q: Fifo::new(
                config.miss_queue.max(1) as usize,
                (0, MissRequest { table: 0, tag: 0, key: Key([0; N]), pmu: None }),
            ),
            orb: (0..n).map(|_| None).collect(),
            head: 0,
            len: 0,
            issued: 0,
            walking: 0,
            port_free: 0,
            pool: Vec::new(),
            lookups: vec![0; tables],
            bytes: vec![0; tables],
            commits: 0,
            config,
        }
    }

    /// Back to the state [`Elu::new`] gives (queues empty, counters at
    /// zero), its buffers kept: the fast mode starts an ELU from empty in
    /// every window of a run.
    pub fn reset(&mut self) {
        self.miss_q.clear();
        for e in self.orb.iter_mut() {
            if let Some(mut x) = e.take() {
                self.pool.push(std::mem::take(&mut x.accesses));
            }
        }
        (self.head, self.len, self.issued, self.walking, self.port_free, self.commits) = (0, 0, 0, 0, 0, 0);
        self.lookups.fill(0);
        self.bytes.fill(0);
    }

    pub fn can_enqueue(&self) -> bool {
        self.miss_q.len() < self.config.miss_queue.max(1) as usize
    }
    pub fn enqueue(&mut self, now: Cycle, miss: MissRequest<N>) {
        debug_assert!(self.can_enqueue());
        self.miss_q
            .push_back((now + self.config.latency_cycles as Cycle, miss));
    }
    pub fn miss_queue_len(&self) -> usize {
        self.miss_q.len()
    }
    pub fn orb_len(&self) -> usize {
        self.len
    }
    /// Misses the ELU holds: queued, or registered in the ORB and not yet
    /// committed (what the shed gate compares with its thresholds).
    #[inline]
    pub fn backlog(&self) -> usize {
        self.miss_q.len() + self.len
    }
    /// No miss queued or in the ORB: [`Elu::tick`] and [`Elu::commit`] do
    /// nothing.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0 && self.miss_q.is_empty()
    }
    /// The next cycle after `now` at which [`Elu::tick`] or [`Elu::commit`]
    /// can change something by itself (`Cycle::MAX` if none): memory
    /// completions, enqueues and commits happen at stepped cycles, after
    /// which this is asked again. A miss waiting for a full ORB waits for a
    /// commit, an entry waiting for a lookup slot for a completion.
    pub fn next_event(&self, now: Cycle) -> Cycle {
        let soon = now + 1;
        if self.head_valid()
            || (self.issued < self.len && self.walking < self.config.lookup_slots.max(1) as usize)
        {
            return soon;
        }
        match self.miss_q.front() {
            Some(&(ready, _)) if self.len < self.orb.len() => ready.max(soon),
            _ => Cycle::MAX,
        }
    }
    /// No commit (no reply to a PMU) before the returned cycle, asked after
    /// this cycle's [`Elu::tick`]: commits leave in ORB order, and a head
    /// still walking commits no earlier than its read in flight completes
    /// plus one cycle per read after it. Otherwise `now + 1` (nothing known).
    pub fn quiet_until(&self, now: Cycle) -> Cycle {
        let soon = now + 1;
        if self.len == 0 || self.issued == 0 {
            return soon;
        }
        match self.orb[self.head].as_ref() {
            Some(e) if !e.valid => (e.due + (e.accesses.len() - e.next - 1) as Cycle).max(soon),
            _ => soon,
        }
    }
    /// Work this cycle that is not waiting on memory.
    pub fn has_work(&self) -> bool {
        !self.miss_q.is_empty()
            || (self.issued < self.len && self.walking < self.config.lookup_slots.max(1) as usize)
            || self.head_valid()
    }
    fn head_valid(&self) -> bool {
        self.len > 0 && self.orb[self.head].as_ref().is_some_and(|e| e.valid)
    }

    fn issue_access(
        &mut self,
        now: Cycle,
        slot: usize,
        hbm: &mut Hbm,
        sched: &mut impl FnMut(Cycle, u32),
    ) {
        let at = now.max(self.port_free);
        self.port_free = at + 1;
        let clock = self.clock;
        let e = self.orb[slot].as_mut().unwrap();
        let a = e.accesses[e.next];
        let (done_ps, charged) = hbm.read_charged(clock.to_ps(at), a.bank, a.bytes);
        self.bytes[e.miss.table as usize] += charged;
        let done = clock.ceil(done_ps).max(at + 1);
        e.due = done;
        sched(done, slot as u32);
    }

    /// [`Elu::tick`] at `now` would do something: a miss-queue head is
    /// ready and the ORB has room, or an entry waits for a free lookup
    /// slot. Otherwise the tick is a no-op, and the caller can skip it.
    #[inline]
    pub fn can_tick(&self, now: Cycle) -> bool {
        (self.issued < self.len && self.walking < self.config.lookup_slots.max(1) as usize)
            || (self.len < self.orb.len() && self.miss_q.front().is_some_and(|&(ready, _)| ready <= now))
    }

    /// The miss just enqueued at `now`, alone in the miss queue and due at
    /// `now + 1`, may be registered (and its walk started) at `now` by a
    /// [`Elu::tick`] for `now + 1`, if nothing else at `now + 1` changes
    /// that tick or is changed by it (the caller checks that no memory read
    /// completes at `now + 1` and no rule update or window end is near):
    /// the ORB has room without a commit (which would not change the slot
    /// taken nor the entry issued: head and issue pointer move together);
    /// it holds an older entry, so the head (commits, `quiet_until`) is
    /// unchanged; every older entry is issued, so the tick issues at most
    /// this one and leaves nothing for the cycle after; and the miss queue
    /// holds at least two, so `can_enqueue` at `now + 1` is the same.
    #[inline]
    pub fn can_tick_ahead(&self, now: Cycle) -> bool {
        self.miss_q.len() == 1
            && self.config.miss_queue >= 2
            && self.miss_q.front().is_some_and(|&(ready, _)| ready == now + 1)
            && self.len > 0
            && self.len < self.orb.len()
            && self.issued == self.len
    }

    /// One cycle: (1) register the miss-queue head in the ORB if it has room;
    /// (2) hand the entry at the issue pointer to the lookup module if a slot
    /// is free, issuing its first memory read. `sched(cycle, slot)` asks to be
    /// called back through [`Elu::access_done`] when a read completes.
    pub fn tick(
        &mut self,
        now: Cycle,
        hbm: &mut Hbm,
        walkers: &[Box<dyn MemoryWalk<N> + Send>],
        sched: &mut impl FnMut(Cycle, u32),
    ) {
        if let Some(&(ready, miss)) = self.miss_q.front() {
            if ready <= now && self.len < self.orb.len() {
                self.miss_q.pop_front();
                let slot = (self.head + self.len) % self.orb.len();
                self.orb[slot] = Some(Entry {
                    miss,
                    result: None,
                    accesses: Vec::new(),
                    next: 0,
                    valid: false,
                    due: 0,
                });
                self.len += 1;
            }
        }
        if self.issued < self.len && self.walking < self.config.lookup_slots.max(1) as usize {
            let slot = (self.head + self.issued) % self.orb.len();
            self.issued += 1;
            let mut acc = self.pool.pop().unwrap_or_default();
            acc.clear();
            let e = self.orb[slot].as_mut().unwrap();
            let table = e.miss.table as usize;
            e.result = walkers[table].walk(&e.miss.key, &mut acc);
            self.lookups[table] += 1;
            if acc.is_empty() {
                e.valid = true;
                self.pool.push(acc);
            } else {
                e.accesses = acc;
                self.walking += 1;
                self.issue_access(now, slot, hbm, sched);
            }
        }
    }

    /// A read of the lookup in `slot` completed at `now`: issue the next
    /// dependent read, or mark the entry valid. Returns whether the lookup
    /// is done: an intermediate read changes nothing that [`Elu::tick`],
    /// [`Elu::commit`] or [`Elu::next_event`] look at (it only issues the
    /// next read), so the simulator need not step that cycle for it.
    pub fn access_done(
        &mut self,
        now: Cycle,
        slot: u32,
        hbm: &mut Hbm,
        sched: &mut impl FnMut(Cycle, u32),
    ) -> bool {
        let slot = slot as usize;
        let e = self.orb[slot]
            .as_mut()
            .expect("completion for an empty ORB entry");
        e.next += 1;
        if e.next < e.accesses.len() {
            self.issue_access(now, slot, hbm, sched);
            false
        } else {
            e.valid = true;
            self.walking -= 1;
            // Recycle the access buffer.
            self.pool.push(std::mem::take(&mut e.accesses));
            true
        }
    }

    /// ORB entry `slot`: `None` if free, else whether its lookup is done.
    pub fn slot_state(&self, slot: usize) -> Option<bool> {
        self.orb.get(slot)?.as_ref().map(|e| e.valid)
    }

    /// The commit pointer: the oldest entry leaves once valid, in order.
    pub fn commit(&mut self) -> Option<(MissRequest<N>, Match)> {
        if !self.head_valid() {
            return None;
        }
        let e = self.orb[self.head].take().unwrap();
        self.head = (self.head + 1) % self.orb.len();
        self.len -= 1;
        self.issued -= 1;
        self.commits += 1;
        Some((e.miss, e.result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{Classifier, Match};
    use crate::hw::hbm::Timing;
    use crate::rules::Key;

    /// A fake structure: key word 0 = number of reads, all in bank word 1;
    /// the answer is word 2.
    struct Fake;
    impl Classifier for Fake {
        fn classify(&self, key: &Key) -> Match {
            Some(key.0[2])
        }
    }
    impl MemoryWalk for Fake {
        fn walk(&self, key: &Key, acc: &mut Vec<MemAccess>) -> Match {
            for i in 0..key.0[0] {
                acc.push(MemAccess {
                    bank: (key.0[1] + i) as u16,
                    addr: 0,
                    bytes: 32,
                });
            }
            Some(key.0[2])
        }
        fn memory_bytes(&self) -> u64 {
            0
        }
    }

    fn miss(tag: u64, reads: u32, bank: u32) -> MissRequest {
        let mut k = Key::default();
        k.0[0] = reads;
        k.0[1] = bank;
        k.0[2] = tag as u32 * 10;
        MissRequest {
            table: 0,
            tag,
            key: k,
            pmu: Some(0),
        }
    }

    /// Runs the ELU cycle by cycle; returns (commit cycle, tag) in order.
    fn run(elu: &mut Elu, hbm: &mut Hbm, until: Cycle) -> Vec<(Cycle, u64)> {
        let walkers: Vec<Box<dyn MemoryWalk + Send>> = vec![Box::new(Fake)];
        let mut events: Vec<(Cycle, u32)> = Vec::new();
        let mut out = Vec::new();
        for now in 0..until {
            let mut due: Vec<u32> = Vec::new();
            events.retain(|&(c, s)| {
                if c == now {
                    due.push(s);
                    false
                } else {
                    true
                }
            });
            for s in due {
                elu.access_done(now, s, hbm, &mut |c, s| events.push((c, s)));
            }
            if let Some((m, r)) = elu.commit() {
                assert_eq!(r, Some(m.tag as u32 * 10));
                out.push((now, m.tag));
            }
            elu.tick(now, hbm, &walkers, &mut |c, s| events.push((c, s)));
        }
        out
    }

    fn hbm() -> Hbm {
        // 100 ns = 25 cycles at 250 MHz; transfer of 32 B at 32 GB/s = 1 ns.
        Hbm::new(Timing {
            latency_ns: 100.0,
            peak_gbps: 32.0,
            bank_busy_ns: 0.0,
            ..Timing::default()
        })
    }

    /// An ELU reset mid-walk (misses queued, in the ORB, reading) then
    /// given a stream answers it as a new one does, cycle for cycle.
    #[test]
    fn reset_gives_a_new_elu() {
        let config = Config { latency_cycles: 1, orb_entries: 4, lookup_slots: 2, ..Config::default() };
        let stream = |elu: &mut Elu| {
            for t in 0..12u64 {
                elu.enqueue(0, miss(t, 1 + (t % 3) as u32, t as u32 % 4));
            }
        };
        let mut used = Elu::new(config.clone(), 1, 250.0);
        stream(&mut used);
        run(&mut used, &mut hbm(), 40);
        assert!(used.len > 0 && used.miss_queue_len() > 0, "reset mid-run");
        used.reset();
        stream(&mut used);
        let mut new = Elu::new(config, 1, 250.0);
        stream(&mut new);
        let (a, b) = (run(&mut used, &mut hbm(), 2000), run(&mut new, &mut hbm(), 2000));
        assert_eq!(a.len(), 12);
        assert_eq!(a, b);
        assert_eq!((used.lookups.clone(), used.bytes.clone(), used.commits), (new.lookups.clone(), new.bytes.clone(), new.commits));
    }

    #[test]
    fn dependent_reads_chain_and_reply_comes_next_cycle() {
        let mut elu = Elu::new(
            Config {
                latency_cycles: 1,
                ..Config::default()
            },
            1,
            250.0,
        );
        let mut h = hbm();
        elu.enqueue(0, miss(1, 2, 0));
        // Enqueued at 0, ORB at 1, walk starts at 1; read 1 done at
        // 1 + ceil(101 ns / 4 ns) = 27, read 2 done at 53, committed at 53.
        let out = run(&mut elu, &mut h, 100);
        assert_eq!(out, vec![(53, 1)]);
        assert_eq!(elu.bytes[0], 64);
    }

    #[test]
    fn finish_out_of_order_reply_in_order() {
        let mut elu = Elu::new(
            Config {
                latency_cycles: 0,
                ..Config::default()
            },
            1,
            250.0,
        );
        let mut h = hbm();
        elu.enqueue(0, miss(1, 3, 0)); // long
        elu.enqueue(0, miss(2, 1, 5)); // short: done first, waits at commit
        let out = run(&mut elu, &mut h, 200);
        assert_eq!(out.iter().map(|x| x.1).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(
            out[1].0,
            out[0].0 + 1,
            "the waiting reply leaves right after"
        );
    }

    #[test]
    fn full_orb_holds_the_miss_queue() {
        let mut elu = Elu::new(
            Config {
                orb_entries: 1,
                miss_queue: 2,
                latency_cycles: 0,
                ..Config::default()
            },
            1,
            250.0,
        );
        let mut h = hbm();
        elu.enqueue(0, miss(1, 1, 0));
        elu.enqueue(0, miss(2, 1, 1));
        assert!(!elu.can_enqueue());
        let out = run(&mut elu, &mut h, 200);
        // The second cannot enter the ORB until the first commits.
        assert_eq!(out.len(), 2);
        assert!(out[1].0 >= out[0].0 + 26);
    }

    #[test]
    fn nothing_commits_before_quiet_until() {
        // Misses of 1-4 reads arriving over time; after each cycle's tick
        // the bound must not be later than the next commit, and it must
        // see past `now + 1` while a walk is in flight.
        let walkers: Vec<Box<dyn MemoryWalk + Send>> = vec![Box::new(Fake)];
        let mut elu = Elu::new(Config { latency_cycles: 1, ..Config::default() }, 1, 250.0);
        let mut h = hbm();
        let mut events: Vec<(Cycle, u32)> = Vec::new();
        let (mut bounds, mut commits) = (Vec::new(), Vec::new());
        for now in 0..600 {
            let mut due: Vec<u32> = Vec::new();
            events.retain(|&(c, s)| if c == now { due.push(s); false } else { true });
            for s in due {
                elu.access_done(now, s, &mut h, &mut |c, s| events.push((c, s)));
            }
            if elu.commit().is_some() {
                commits.push(now);
            }
            if now % 37 == 0 && now < 400 && elu.can_enqueue() {
                elu.enqueue(now, miss(now, 1 + (now % 4) as u32, (now % 3) as u32));
            }
            // A tick `can_tick` rules out changes nothing.
            let before = (elu.len, elu.issued, elu.walking, elu.miss_q.len(), elu.port_free, events.len());
            let can = elu.can_tick(now);
            elu.tick(now, &mut h, &walkers, &mut |c, s| events.push((c, s)));
            let after = (elu.len, elu.issued, elu.walking, elu.miss_q.len(), elu.port_free, events.len());
            assert!(can || before == after, "at {now}: {before:?} -> {after:?}");
            bounds.push((now, elu.quiet_until(now)));
        }
        assert!(commits.len() > 5);
        for &(now, b) in &bounds {
            if let Some(&c) = commits.iter().find(|&&c| c > now) {
                assert!(b <= c, "at {now}: bound {b}, commit at {c}");
            }
        }
        assert!(bounds.iter().any(|&(now, b)| b > now + 20), "a walk in flight is seen");
    }
}

//! The Physical Matching Unit (PMU): a CAM shard with its queues.
//!
//! Follows §4.2 of the Synapse paper. Requests arrive in **Q_r**; the CAM
//! answers each in τ_c cycles and takes a new one every II_c cycles. A hit
//! goes to **Q_p** (responses to the VMU). A miss goes to **Q_m** (towards the
//! ELU) and, at the same time, an *early miss notification* goes to Q_p so the
//! VMU parks the PHV instead of blocking. The ELU's reply fills the CAM and is
//! forwarded to the VMU through Q_p. A PMU only issues when Q_p and Q_m can
//! take whatever its pipeline may produce, so it never drops.
//!
//! The free / associated / transient state machine: a PMU leaving a table
//! first drains (Q_r, pipeline, Q_p, Q_m, and its misses still at the ELU),
//! then becomes free (CAM invalidated) and may join another table.
//!
//! The PMU may run on its own clock: `clock_ratio` = PMU clock / pipeline
//! clock; its τ_c and II_c, counted in PMU cycles, are converted to pipeline
//! cycles rounding up.

use super::cam::{Cam, Lookup};
use super::fifo::Fifo;
use super::Cycle;
use crate::classify::Match;
use crate::rules::{Key, MAX_FIELDS};
use serde::{Deserialize, Serialize};

/// PMU parameters: the `[pmus]` table of a scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// PMUs in the system.
    pub count: u32,
    /// CAM entries per PMU.
    pub block_size: u32,
    /// PMU clock / pipeline clock.
    pub clock_ratio: f64,
    /// τ_c, in PMU cycles.
    pub latency_cycles: u32,
    /// II_c, in PMU cycles.
    pub ii_cycles: u32,
    pub q_r: u32,
    pub q_p: u32,
    pub q_m: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            count: 8,
            block_size: 256,
            clock_ratio: 1.0,
            latency_cycles: 2,
            ii_cycles: 1,
            q_r: 16,
            q_p: 16,
            q_m: 16,
        }
    }
}

/// Timing in pipeline cycles, derived from [`Config`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub tau: Cycle,
    pub ii: Cycle,
    pub q_r: usize,
    pub q_p: usize,
    pub q_m: usize,
}

impl Timing {
    pub fn from_config(c: &Config) -> Timing {
        let r = if c.clock_ratio > 0.0 {
            c.clock_ratio
        } else {
            1.0
        };
        let conv = |x: u32| ((x as f64 / r) - 1e-9).ceil().max(1.0) as Cycle;
        Timing {
            tau: conv(c.latency_cycles),
            ii: conv(c.ii_cycles),
            q_r: c.q_r.max(1) as usize,
            q_p: c.q_p.max(1) as usize,
            q_m: c.q_m.max(1) as usize,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Free,
    Associated {
        table: u16,
    },
    /// Draining the requests of `table`; joins `next` once drained.
    Transient {
        table: u16,
        next: Option<u16>,
    },
}

/// A lookup request from a VMU, tagged by its request producer.
///
/// It names its key instead of carrying it: `flow` indexes the table's key
/// array and `stamp` is the version tag the VMU wrote into the key's tag
/// word (program-consistent rule updates, `sim/xtable.rs`; unused without).
/// The CAM reads the key when it searches (the `key_of` argument of
/// [`Pmu::accept`] and [`Pmu::tick`]), so a request and a pipeline entry
/// are 32 bytes, not the ~90 they were with an 8-word key in them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Cycle it reaches Q_r (after the interconnect).
    pub at: Cycle,
    pub tag: u64,
    pub flow: u32,
    pub stamp: u32,
    pub table: u16,
}

/// What a PMU sends back to its VMU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Response {
    Hit {
        table: u16,
        tag: u64,
        action: Match,
        compared: u32,
    },
    /// Early miss notification: the PHV waits in the VMU's FIFO.
    Miss { table: u16, tag: u64, compared: u32 },
    /// The ELU's answer for an earlier miss, after filling the CAM.
    Fill { table: u16, tag: u64, action: Match },
    /// An earlier miss dropped at the head of Q_m by the ELU's shed gate
    /// ([`Pmu::shed_head`]): the VMU drops the PHV.
    Shed { table: u16, tag: u64 },
}

/// A missed key on its way to the ELU.
#[derive(Clone, Copy, Debug)]
pub struct MissRequest<const N: usize = MAX_FIELDS> {
    pub table: u16,
    pub tag: u64,
    pub key: Key<N>,
    /// The PMU to fill, or none for a table without PMUs (the VMU sends the
    /// key to the ELU itself).
    pub pmu: Option<u16>,
}

/// A request in the CAM pipeline, with its search result.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    /// Cycle the result leaves the pipeline.
    ready: Cycle,
    tag: u64,
    flow: u32,
    stamp: u32,
    compared: u32,
    table: u16,
    /// The hit's action, or `None` for a miss.
    hit: Option<Match>,
    /// A hit already handed to the VMU ([`Pmu::deliver_ahead`]): it only
    /// occupies the pipeline until `ready`, then leaves without a Q_p entry.
    delivered: bool,
}

/// A PMU whose CAM holds keys of `N` words (default: the 8-word [`Key`]).
pub struct Pmu<const N: usize = MAX_FIELDS> {
    pub id: u16,
    pub t: Timing,
    pub cam: Cam<N>,
    state: State,
    q_r: Fifo<Request>,
    /// CAM pipeline (at most min(Q_p, Q_m) entries: see `issue_blocked`).
    pipe: Fifo<InFlight>,
    /// Delivered entries in `pipe`.
    delivered: usize,
    /// Grows past Q_p only with ELU fills.
    q_p: Fifo<Response>,
    q_m: Fifo<MissRequest<N>>,
    next_issue: Cycle,
    /// A request issued ahead by [`Pmu::accept`] still counts in Q_r before
    /// this cycle (its arrival), as it would have waited there.
    ahead_until: Cycle,
    /// Misses of this PMU at the ELU, not yet answered.
    outstanding: u32,
    // Counters.
    pub hits: u64,
    pub misses: u64,
    pub compares: u64,
    /// Ticks at which a ready request could not issue because Q_p or Q_m
    /// was full (the simulator skips ticks while an issue stays blocked).
    pub stalls: u64,
    /// Admission of fills (`hw/admit.rs`); `None` caches every fill.
    pub admit: Option<super::admit::Doorkeeper>,
    /// Misses dropped at the head of Q_m by the shed gate.
    pub shed: u64,
}

impl<const N: usize> Pmu<N> {
    pub fn new(id: u16, config: &Config) -> Pmu<N> {
        let t = Timing::from_config(config);
        let req = Request { at: 0, tag: 0, flow: 0, stamp: 0, table: 0 };
        let entry = InFlight { ready: 0, tag: 0, flow: 0, stamp: 0, compared: 0, table: 0, hit: None, delivered: false };
        let rsp = Response::Miss { table: 0, tag: 0, compared: 0 };
        let miss = MissRequest { table: 0, tag: 0, key: Key([0; N]), pmu: None };
        Pmu {
            id,
            t,
            cam: Cam::new(config.block_size),
            state: State::Free,
            q_r: Fifo::new(t.q_r, req),
            pipe: Fifo::new(t.q_p.min(t.q_m), entry),
            delivered: 0,
            q_p: Fifo::new(t.q_p, rsp),
            q_m: Fifo::new(t.q_m, miss),
            next_issue: 0,
            ahead_until: 0,
            outstanding: 0,
            hits: 0,
            misses: 0,
            compares: 0,
            stalls: 0,
            admit: None,
            shed: 0,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }
    pub fn is_free(&self) -> bool {
        self.state == State::Free
    }
    /// The table whose requests this PMU serves (also while draining).
    pub fn table(&self) -> Option<u16> {
        match self.state {
            State::Free => None,
            State::Associated { table } | State::Transient { table, .. } => Some(table),
        }
    }

    /// Associates a free PMU with `table`.
    pub fn associate(&mut self, table: u16) {
        assert!(self.is_free(), "PMU {} is not free", self.id);
        self.state = State::Associated { table };
    }

    /// Starts leaving the current table; `next` is joined once drained.
    pub fn leave(&mut self, next: Option<u16>) {
        self.state = match self.state {
            State::Free => match next {
                Some(t) => State::Associated { table: t },
                None => State::Free,
            },
            State::Associated { table } | State::Transient { table, .. } => {
                State::Transient { table, next }
            }
        };
    }

    /// A transient PMU whose work is done becomes free (CAM invalidated, as
    /// its entries belong to the old table's key space) and joins its next
    /// table, which is returned.
    pub fn try_finish_drain(&mut self) -> Option<Option<u16>> {
        if let State::Transient { next, .. } = self.state {
            if self.is_idle() && self.outstanding == 0 {
                self.cam.clear();
                self.state = match next {
                    Some(t) => State::Associated { table: t },
                    None => State::Free,
                };
                return Some(next);
            }
        }
        None
    }

    /// Q_r has room at `now` for one more request (counting those on the
    /// network).
    #[inline]
    pub fn can_accept(&self, now: Cycle) -> bool {
        self.q_r.len() + usize::from(now < self.ahead_until) < self.t.q_r
    }
    /// A request sent over the interconnect; it is usable from `req.at`.
    ///
    /// When the PMU holds no work and no miss at the ELU, nothing can
    /// change its CAM or queues before `req.at`, so the request would issue
    /// exactly at `req.at` with the same CAM answer: it is issued now (the
    /// CAM searched now), its result due at `req.at + τ_c`, and it keeps
    /// counting in Q_r until `req.at`. This saves the simulator a stepped
    /// cycle per uncontended request; every observable result is unchanged.
    ///
    /// A miss of this PMU at the ELU does not prevent it when no ELU reply
    /// can come before `req.at` (`quiet_until`, the first cycle one may
    /// come, is after it): the CAM is then unchanged until the issue, and
    /// a later fill enters Q_p as it would have.
    ///
    /// Hits delivered ahead still in the pipeline do not prevent it either
    /// while they are fewer than Q_p and Q_m hold: they only leave the
    /// pipeline (never into Q_p), so at `req.at` the issue finds Q_p and
    /// Q_m empty and at most that many entries in flight, not blocked.
    ///
    /// `key_of(table, flow, stamp)` is the key a request names. Returns
    /// whether the request was issued ahead.
    #[inline]
    pub fn accept(
        &mut self,
        req: Request,
        quiet_until: Cycle,
        key_of: &impl Fn(u16, u32, u32) -> Key<N>,
    ) -> bool {
        debug_assert!(self.q_r.len() < self.t.q_r);
        if (self.outstanding == 0 || quiet_until > req.at)
            && self.next_issue <= req.at
            && self.is_idle()
            && self.pipe.len() < self.t.q_p.min(self.t.q_m)
            && matches!(self.state, State::Associated { .. })
        {
            self.ahead_until = req.at;
            self.issue(req, req.at, key_of);
            return true;
        }
        self.q_r.push_back(req);
        false
    }

    /// Right after [`Pmu::accept`] issued a request ahead on this (then
    /// idle) PMU: if the CAM hit, its answer leaves the pipeline at its
    /// ready cycle straight into an empty Q_p, and the VMU takes it there
    /// in the same cycle (phase 4 pops one response per PMU per cycle, and
    /// nothing else can reach this Q_p before: no miss is outstanding, the
    /// entries ahead of it in the pipeline were delivered already, and
    /// later requests retire later). So the simulator may hand it to the
    /// VMU now; the entry stays in the pipeline until its ready cycle
    /// (it still counts against Q_p / Q_m room for a request queued
    /// behind it) and then leaves without a Q_p entry. Returns (action,
    /// CAM compares, ready cycle) for a hit, `None` for a miss.
    pub fn deliver_ahead(&mut self) -> Option<(Match, u32, Cycle)> {
        debug_assert!(self.pipe.len() == self.delivered + 1 && self.q_p.is_empty() && self.q_r.is_empty());
        let e = self.pipe.get_mut(self.pipe.len() - 1)?;
        let action = e.hit?;
        e.delivered = true;
        self.delivered += 1;
        Some((action, e.compared, e.ready))
    }

    /// Drops delivered entries that left the pipeline by `now` (a later
    /// [`Pmu::accept`] must see the PMU as the hardware would: idle).
    #[inline(always)]
    pub fn retire_delivered(&mut self, now: Cycle) {
        while self.delivered > 0 && self.pipe.front().is_some_and(|e| e.delivered && e.ready <= now) {
            self.pipe.pop_front();
            self.delivered -= 1;
        }
    }

    /// Nothing queued or in the CAM pipeline (delivered hits aside: they
    /// need nothing more from the PMU).
    #[inline]
    pub fn is_idle(&self) -> bool {
        self.q_r.is_empty() && self.pipe.len() == self.delivered && self.q_p.is_empty() && self.q_m.is_empty()
    }
    /// The next cycle after `now` at which [`Pmu::tick`] can change
    /// something, or `None` if it holds no work (ELU replies aside). A miss
    /// waiting in Q_m needs no tick: the bus takes it (and the simulator
    /// then asks again); an issue blocked by full Q_p / Q_m waits for a
    /// retirement or a pop. (Ticks skipped while blocked would only have
    /// counted [`Pmu::stalls`].)
    #[inline]
    pub fn next_event(&self, now: Cycle) -> Option<Cycle> {
        if !self.q_p.is_empty() {
            return Some(now + 1);
        }
        let mut t = Cycle::MAX;
        // A delivered entry's retirement matters only to an issue it blocks:
        // with Q_r empty, the first entry that retires into a queue (behind
        // any number of delivered hits).
        let mut i = 0;
        if self.q_r.is_empty() {
            while self.pipe.get(i).is_some_and(|e| e.delivered) {
                i += 1;
            }
        }
        if let Some(e) = self.pipe.get(i) {
            t = e.ready;
        }
        if let Some(h) = self.q_r.front() {
            if !self.issue_blocked() {
                t = t.min(h.at.max(self.next_issue));
            }
        }
        (t != Cycle::MAX).then(|| t.max(now + 1))
    }
    /// Q_p or Q_m could not take what the pipeline may produce.
    #[inline]
    fn issue_blocked(&self) -> bool {
        let inflight = self.pipe.len();
        inflight + self.q_p.len() >= self.t.q_p || inflight + self.q_m.len() >= self.t.q_m
    }
    pub fn outstanding(&self) -> u32 {
        self.outstanding
    }
    pub fn q_r_len(&self) -> usize {
        self.q_r.len()
    }
    pub fn q_m_len(&self) -> usize {
        self.q_m.len()
    }

    /// One cycle, in two phases: (1) retire CAM results ready by `now` into
    /// Q_p / Q_m; (2) issue the head of Q_r if II_c allows and Q_p and Q_m
    /// can take what the pipeline may produce. `key_of` as in
    /// [`Pmu::accept`].
    #[inline]
    pub fn tick(&mut self, now: Cycle, key_of: &impl Fn(u16, u32, u32) -> Key<N>) {
        // A hit delivered ahead that leaves now would sit in Q_p until
        // phase 4 of this cycle: it still counts against this issue.
        let mut in_q_p = 0;
        while self.pipe.front().is_some_and(|e| e.ready <= now) {
            let e = self.pipe.pop_front().unwrap();
            if e.delivered {
                self.delivered -= 1;
                in_q_p += usize::from(e.ready == now);
                continue;
            }
            match e.hit {
                Some(action) => self.q_p.push_back(Response::Hit {
                    table: e.table,
                    tag: e.tag,
                    action,
                    compared: e.compared,
                }),
                None => {
                    self.q_p.push_back(Response::Miss {
                        table: e.table,
                        tag: e.tag,
                        compared: e.compared,
                    });
                    self.q_m.push_back(MissRequest {
                        table: e.table,
                        tag: e.tag,
                        key: key_of(e.table, e.flow, e.stamp),
                        pmu: Some(self.id),
                    });
                    self.outstanding += 1;
                }
            }
        }
        let Some(head) = self.q_r.front() else { return };
        if head.at > now || self.next_issue > now || self.is_free() {
            return;
        }
        if self.issue_blocked() || (in_q_p > 0 && self.pipe.len() + self.q_p.len() + in_q_p >= self.t.q_p) {
            self.stalls += 1;
            return;
        }
        let req = self.q_r.pop_front().unwrap();
        self.issue(req, now, key_of);
    }

    /// Searches the CAM for `req` at cycle `at`: the result leaves the
    /// pipeline τ_c later; the next issue waits II_c.
    #[inline]
    fn issue(&mut self, req: Request, at: Cycle, key_of: &impl Fn(u16, u32, u32) -> Key<N>) {
        let (res, compared) = self.cam.lookup(&key_of(req.table, req.flow, req.stamp));
        self.compares += compared as u64;
        let hit = match res {
            Lookup::Hit { action } => {
                self.hits += 1;
                Some(action)
            }
            Lookup::Miss => {
                self.misses += 1;
                None
            }
        };
        self.pipe.push_back(InFlight {
            ready: at + self.t.tau,
            tag: req.tag,
            flow: req.flow,
            stamp: req.stamp,
            compared,
            table: req.table,
            hit,
            delivered: false,
        });
        self.next_issue = at + self.t.ii;
    }

    /// The head of Q_p, left in place (a VMU that is not ready this cycle).
    pub fn peek_response(&self) -> Option<&Response> {
        self.q_p.front()
    }
    /// The VMU takes the head of Q_p (one response per PMU per cycle).
    pub fn pop_response(&mut self) -> Option<Response> {
        self.q_p.pop_front()
    }
    /// The PMU→ELU bus takes the head of Q_m.
    pub fn peek_miss(&self) -> Option<&MissRequest<N>> {
        self.q_m.front()
    }
    pub fn pop_miss(&mut self) -> Option<MissRequest<N>> {
        self.q_m.pop_front()
    }

    /// The ELU's shed gate at the head of Q_m (paper §8's flooding; the
    /// gate is per PMU, so each sheds at most one miss a cycle): with the
    /// ELU holding `backlog` misses, the head is dropped when `backlog ≥
    /// all_at` (any key), or when `backlog ≥ first_at` and the doorkeeper
    /// has not seen its key (which it then records, so the key's next miss
    /// passes). Thresholds of 0 never shed. A dropped miss leaves Q_m
    /// without reaching the bus and its PHV is answered [`Response::Shed`]
    /// through Q_p. Returns whether it shed one.
    pub fn shed_head(&mut self, backlog: usize, first_at: u32, all_at: u32) -> bool {
        let Some(head) = self.q_m.front() else { return false };
        let drop = (all_at > 0 && backlog >= all_at as usize)
            || (first_at > 0
                && backlog >= first_at as usize
                && self.admit.as_mut().is_some_and(|d| !d.passes(&head.key)));
        if !drop {
            return false;
        }
        let m = self.q_m.pop_front().unwrap();
        self.outstanding -= 1;
        self.shed += 1;
        self.q_p.push_back(Response::Shed { table: m.table, tag: m.tag });
        true
    }

    /// Whether a fill of `key` may enter the CAM (always, without an
    /// admission policy or when the key is cached already).
    fn admits(&mut self, key: &Key<N>) -> bool {
        match &mut self.admit {
            None => true,
            Some(d) => {
                let full = self.cam.len() >= self.cam.capacity();
                self.cam.contains(key) || d.admit(key, full)
            }
        }
    }

    /// The ELU's reply: fill the CAM (unless the PMU is draining away from
    /// that table) and forward the answer to the VMU.
    pub fn fill(&mut self, miss: &MissRequest<N>, action: Match) {
        self.outstanding -= 1;
        if let State::Associated { table } = self.state {
            if table == miss.table && self.admits(&miss.key) {
                self.cam.insert(miss.key, action);
            }
        }
        self.q_p.push_back(Response::Fill {
            table: miss.table,
            tag: miss.tag,
            action,
        });
    }
}

/// Rule updates (`sim/updates.rs`): what a committed update does to a PMU.
impl<const N: usize> Pmu<N> {
    /// The ELU's reply to a lookup walked under a rule set replaced since:
    /// forwarded to the VMU (the PHV's lookup committed under the old
    /// version) but not cached, as the CAM must not learn a stale answer.
    pub fn forward(&mut self, miss: &MissRequest<N>, action: Match) {
        self.outstanding -= 1;
        self.q_p.push_back(Response::Fill {
            table: miss.table,
            tag: miss.tag,
            action,
        });
    }

    /// The CAM's search port is busy invalidating until `until`: no issue
    /// before it.
    pub fn block_until(&mut self, until: Cycle) {
        self.next_issue = self.next_issue.max(until);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config {
            count: 1,
            block_size: 4,
            latency_cycles: 2,
            ii_cycles: 1,
            q_r: 4,
            q_p: 4,
            q_m: 4,
            clock_ratio: 1.0,
        }
    }
    /// Request `key` names flow `key`, whose key is `kf`'s.
    fn req(tag: u64, key: u32, at: Cycle) -> Request {
        Request {
            table: 0,
            tag,
            flow: key,
            stamp: 0,
            at,
        }
    }
    fn kf(_: u16, flow: u32, _: u32) -> Key {
        Key::five_tuple(flow, 0, 0, 0, 0)
    }

    /// The shed gate, threshold by threshold: a first-time key is shed at
    /// `backlog == first_at` (one below is kept), recorded, and its next
    /// miss passes as seen; `all_at` sheds any key; the PHV gets a Shed
    /// answer through Q_p and the miss is no longer outstanding.
    #[test]
    fn shed_gate_drops_first_time_keys_at_its_threshold() {
        let mut p = Pmu::new(0, &cfg());
        p.associate(0);
        p.admit = Some(super::super::admit::Doorkeeper::new(
            &super::super::admit::Config { policy: super::super::admit::Policy::Doorkeeper, ..Default::default() },
            4,
        ));
        let miss = |p: &mut Pmu, tag: u64, key: u32, at: Cycle| {
            p.accept(req(tag, key, at), 0, &kf);
            for c in at..at + 3 {
                p.tick(c, &kf);
            }
            assert!(matches!(p.pop_response(), Some(Response::Miss { .. })));
        };
        miss(&mut p, 0, 1, 0);
        assert!(!p.shed_head(7, 8, 0), "one below the threshold");
        assert!(!p.shed_head(100, 0, 0), "thresholds of 0 never shed");
        assert!(p.shed_head(8, 8, 0));
        assert_eq!(p.pop_response(), Some(Response::Shed { table: 0, tag: 0 }));
        assert_eq!((p.outstanding(), p.q_m_len(), p.shed), (0, 0, 1));
        // The same key again: seen, kept at any first-time threshold...
        miss(&mut p, 1, 1, 10);
        assert!(!p.shed_head(64, 8, 0));
        // ...but not past the bound on every miss.
        assert!(!p.shed_head(15, 8, 16) && p.shed_head(16, 8, 16));
        assert_eq!(p.pop_response(), Some(Response::Shed { table: 0, tag: 1 }));
        assert!(!p.shed_head(100, 1, 1), "nothing left in Q_m");
    }

    #[test]
    fn hit_leaves_exactly_tau_after_issue() {
        let mut p = Pmu::new(0, &cfg());
        p.associate(0);
        p.cam.insert(Key::five_tuple(7, 0, 0, 0, 0), Some(3));
        p.accept(req(0, 7, 10), 0, &kf);
        p.tick(9, &kf);
        assert!(p.pop_response().is_none());
        p.tick(10, &kf); // issues at 10
        p.tick(11, &kf);
        assert!(p.pop_response().is_none(), "one cycle early");
        p.tick(12, &kf);
        assert_eq!(
            p.pop_response(),
            Some(Response::Hit {
                table: 0,
                tag: 0,
                action: Some(3),
                compared: 1
            })
        );
        assert_eq!(p.hits, 1);
    }

    #[test]
    fn miss_sends_early_notification_and_key_to_q_m_together() {
        let mut p = Pmu::new(0, &cfg());
        p.associate(0);
        p.accept(req(5, 1, 0), 0, &kf);
        p.tick(0, &kf);
        p.tick(1, &kf);
        assert!(p.peek_miss().is_none());
        p.tick(2, &kf);
        assert_eq!(
            p.pop_response(),
            Some(Response::Miss {
                table: 0,
                tag: 5,
                compared: 0
            })
        );
        let m = p.pop_miss().unwrap();
        assert_eq!((m.tag, m.pmu), (5, Some(0)));
        assert_eq!(p.outstanding(), 1);
        p.fill(&m, Some(9));
        assert_eq!(
            p.pop_response(),
            Some(Response::Fill {
                table: 0,
                tag: 5,
                action: Some(9)
            })
        );
        assert!(p.cam.contains(&m.key));
    }

    #[test]
    fn initiation_interval_spaces_issues() {
        let mut c = cfg();
        c.ii_cycles = 3;
        let mut p = Pmu::new(0, &c);
        p.associate(0);
        for t in 0..3 {
            p.accept(req(t, t as u32, 0), 0, &kf);
        }
        // Answers leave τ_c = 2 after each issue.
        let mut answered_at = Vec::new();
        for now in 0..12 {
            p.tick(now, &kf);
            if p.pop_response().is_some() {
                answered_at.push(now);
            }
        }
        assert_eq!(answered_at, vec![2, 5, 8]);
    }

    /// Replays `reqs` (arrival cycle = accept cycle + 3) and optional ELU
    /// fills on a PMU, cycle by cycle; returns (cycle, response) in order.
    fn replay(
        p: &mut Pmu,
        reqs: &[(Cycle, u64, u32)],
        fills: &[(Cycle, u32)],
    ) -> Vec<(Cycle, Response)> {
        let mut out = Vec::new();
        for now in 0..40 {
            for &(c, k) in fills {
                if c == now {
                    let m = p.pop_miss().or_else(|| {
                        Some(MissRequest {
                            table: 0,
                            tag: 99,
                            key: Key::five_tuple(k, 0, 0, 0, 0),
                            pmu: Some(0),
                        })
                    });
                    p.fill(&m.unwrap(), Some(k));
                }
            }
            for &(c, tag, k) in reqs {
                if c == now {
                    assert!(p.can_accept(now));
                    p.accept(req(tag, k, now + 3), 0, &kf);
                }
            }
            p.tick(now, &kf);
            if let Some(r) = p.pop_response() {
                out.push((now, r));
            }
        }
        out
    }

    #[test]
    fn request_issued_ahead_answers_as_if_it_had_waited_in_q_r() {
        // The same requests on a PMU that issues ahead (idle at accept) and
        // on one that cannot (a miss outstanding at the ELU, never filled):
        // the same answers at the same cycles.
        let reqs = [(0, 0, 7), (1, 1, 8), (9, 2, 7), (20, 3, 9)];
        let mut a = Pmu::new(0, &cfg());
        a.associate(0);
        a.cam.insert(Key::five_tuple(7, 0, 0, 0, 0), Some(3));
        let ahead = replay(&mut a, &reqs, &[]);
        let mut b = Pmu::new(0, &cfg());
        b.associate(0);
        b.cam.insert(Key::five_tuple(7, 0, 0, 0, 0), Some(3));
        b.outstanding = 1;
        let waited = replay(&mut b, &reqs, &[]);
        assert_eq!(ahead, waited);
        assert_eq!(
            ahead[0],
            (
                5,
                Response::Hit {
                    table: 0,
                    tag: 0,
                    action: Some(3),
                    compared: 1
                }
            )
        );
        // The answer of a request issued ahead is due at its arrival + τ_c.
        assert_eq!(
            ahead
                .iter()
                .filter(|(_, r)| matches!(r, Response::Hit { .. }))
                .count(),
            2
        );
    }

    #[test]
    fn request_issued_ahead_still_counts_in_q_r_until_it_arrives() {
        let mut c = cfg();
        c.q_r = 1;
        let mut p = Pmu::new(0, &c);
        p.associate(0);
        p.accept(req(0, 1, 5), 0, &kf);
        assert!(!p.can_accept(4), "Q_r holds the request until cycle 5");
        assert!(p.can_accept(5));
    }

    #[test]
    fn no_issue_ahead_while_a_fill_may_change_the_cam() {
        // A miss of key 4 is at the ELU; its fill comes at cycle 2, before
        // the request for key 4 (accepted at 0) reaches Q_r at 3: it hits.
        let mut p = Pmu::new(0, &cfg());
        p.associate(0);
        p.accept(req(0, 4, 0), 0, &kf);
        for now in 0..3 {
            p.tick(now, &kf);
        }
        assert!(matches!(p.pop_response(), Some(Response::Miss { .. })));
        let out = replay(&mut p, &[(0, 1, 4)], &[(2, 4)]);
        assert_eq!(
            out.last().unwrap().1,
            Response::Hit {
                table: 0,
                tag: 1,
                action: Some(4),
                compared: 1
            }
        );
    }

    #[test]
    fn half_clock_doubles_latency_and_ii() {
        let mut c = cfg();
        c.clock_ratio = 0.5;
        let t = Timing::from_config(&c);
        assert_eq!((t.tau, t.ii), (4, 2));
        c.clock_ratio = 1.0;
        assert_eq!(Timing::from_config(&c).tau, 2);
    }

    #[test]
    fn full_q_m_blocks_issue_and_counts_a_stall() {
        let mut c = cfg();
        c.q_m = 1;
        let mut p = Pmu::new(0, &c);
        p.associate(0);
        p.accept(req(0, 1, 0), 0, &kf);
        p.accept(req(1, 2, 0), 0, &kf);
        p.tick(0, &kf); // issues miss 0
        p.tick(1, &kf); // pipeline holds one: Q_m could overflow, blocked
        assert_eq!(p.stalls, 1);
        p.tick(2, &kf); // miss 0 retires into Q_m; Q_m full, still blocked
        assert_eq!(p.q_r_len(), 1);
        p.pop_miss();
        p.tick(3, &kf);
        assert_eq!(p.q_r_len(), 0);
    }

    #[test]
    fn transient_drains_outstanding_misses_before_freeing() {
        let mut p = Pmu::new(0, &cfg());
        p.associate(0);
        p.cam.insert(Key::five_tuple(9, 0, 0, 0, 0), None);
        p.accept(req(0, 1, 0), 0, &kf);
        p.tick(0, &kf);
        p.leave(Some(1));
        assert_eq!(
            p.state(),
            State::Transient {
                table: 0,
                next: Some(1)
            }
        );
        p.tick(2, &kf);
        assert_eq!(p.try_finish_drain(), None, "response and miss still queued");
        p.pop_response();
        let m = p.pop_miss().unwrap();
        assert_eq!(p.try_finish_drain(), None, "miss outstanding at the ELU");
        p.fill(&m, Some(1));
        assert!(!p.cam.contains(&m.key), "no fill while leaving");
        p.pop_response();
        assert_eq!(p.try_finish_drain(), Some(Some(1)));
        assert_eq!(p.state(), State::Associated { table: 1 });
        assert!(p.cam.is_empty());
    }

    /// Requests one cycle apart on one PMU: with each hit handed to the VMU
    /// ahead, later requests issue ahead behind the delivered hits still in
    /// the pipeline (up to min(Q_p, Q_m) of them), and every answer, cycle
    /// and stall is as on a PMU that queues them all in Q_r.
    #[test]
    fn requests_issued_ahead_behind_delivered_hits_answer_as_if_queued() {
        for q_p in [1, 2, 4] {
            // Q_r never full: the simulator offers a request only when it
            // has room (accept's precondition), and here all nine may wait.
            let c = Config { q_p, q_r: 16, ..cfg() };
            let reqs: Vec<(u64, u32, Cycle)> =
                vec![(0, 1, 3), (1, 2, 4), (2, 1, 5), (3, 2, 7), (4, 1, 8), (5, 5, 10), (6, 2, 11), (7, 1, 14), (8, 2, 15)];
            let run = |ahead: bool| {
                let mut p = Pmu::new(0, &c);
                p.associate(0);
                p.cam.insert(Key::five_tuple(1, 0, 0, 0, 0), Some(3));
                p.cam.insert(Key::five_tuple(2, 0, 0, 0, 0), Some(4));
                let (mut out, mut issued_ahead) = (vec![], 0);
                for now in 0..24 {
                    // As in the simulator: PMU ticks (phase 3), then requests
                    // (phase 7).
                    p.tick(now, &kf);
                    if let Some(r) = p.pop_response() {
                        out.push((now, r));
                    }
                    for &(tag, k, at) in &reqs {
                        if at == now + 2 {
                            p.retire_delivered(now);
                            let r = req(tag, k, at);
                            if !ahead {
                                p.q_r.push_back(r);
                            } else if p.accept(r, 0, &kf) {
                                issued_ahead += 1;
                                if let Some((action, compared, at)) = p.deliver_ahead() {
                                    out.push((at, Response::Hit { table: 0, tag, action, compared }));
                                }
                            }
                        }
                    }
                }
                out.sort_by_key(|&(c, r)| (c, format!("{r:?}")));
                (out, p.stalls, p.is_idle(), issued_ahead)
            };
            let (queued, stalls, idle, _) = run(false);
            let (ahead, stalls2, idle2, n) = run(true);
            assert_eq!(ahead, queued, "q_p {q_p}");
            assert_eq!((stalls, idle), (stalls2, idle2), "q_p {q_p}");
            // Not vacuous: with room for four, most issue ahead, behind
            // delivered hits.
            assert!(q_p < 4 || n >= 6, "q_p {q_p}: {n} issued ahead");
        }
    }

    /// A hit handed to the VMU ahead behaves like one that went through
    /// Q_p: same issue cycles and stalls for the requests behind it, on a
    /// PMU whose Q_p holds one response.
    #[test]
    fn delivered_hit_blocks_like_one_in_q_p_and_leaves_no_response() {
        let one = Config { q_p: 1, ..cfg() };
        let run = |deliver: bool| {
            let mut p = Pmu::new(0, &one);
            p.associate(0);
            p.cam.insert(Key::five_tuple(1, 0, 0, 0, 0), Some(3));
            p.cam.insert(Key::five_tuple(2, 0, 0, 0, 0), Some(4));
            assert!(p.accept(req(0, 1, 3), 0, &kf), "idle: issued ahead");
            let got = if deliver { p.deliver_ahead() } else { None };
            assert!(!p.accept(req(1, 2, 4), 0, &kf), "busy: queued");
            let mut out = vec![];
            for now in 0..12 {
                p.tick(now, &kf);
                if let Some(r) = p.pop_response() {
                    out.push((now, r));
                }
            }
            (got, out, p.stalls, p.is_idle())
        };
        let (none, all, stalls, idle) = run(false);
        let (got, rest, stalls2, idle2) = run(true);
        assert_eq!(none, None);
        let Response::Hit { action, compared, .. } = all[0].1 else { panic!("{:?}", all[0]) };
        assert_eq!(got, Some((action, compared, all[0].0)), "answer, compares, cycle");
        assert_eq!((action, all[0].0), (Some(3), 5));
        assert_eq!(rest, all[1..], "the second hit leaves at the same cycle");
        assert_eq!((stalls, idle), (stalls2, idle2));
        assert!(stalls > 0, "Q_p of one: the second issue waited");
    }
}

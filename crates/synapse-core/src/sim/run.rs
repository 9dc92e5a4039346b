//! The clock: advances simulated time, delivers memory completions and
//! packet arrivals due now, steps busy cycles ([`Simulator::tick`], in
//! `phases.rs`) and jumps over idle ones, and closes the counter windows.

use super::*;

impl<const N: usize> Simulator<N> {
    pub(super) fn pull_arrival(&mut self) {
        self.next_arrival = self.source.next().map(|a| (self.clock.ceil(a.t_ps), a));
    }

    /// Advances simulated time to `t_ns` (never back).
    pub fn run_until_ns(&mut self, t_ns: f64) {
        let until = (t_ns * 1000.0 / self.clock.ps()).floor().max(0.0) as Cycle;
        self.run_until(until);
    }

    /// Runs every cycle before `until`; afterwards `now() == until`.
    pub fn run_until(&mut self, until: Cycle) {
        self.until = until;
        // The embedding may have changed things since (assign, updates).
        self.wake = 0;
        // Arrival-only cycles without a full step (`arrival_step`): not
        // with rule updates, a recording or explicit routes (none of which
        // starts during a run).
        let lean = self.lean_arrivals && self.updates.is_none() && self.rec.is_none() && self.routes.is_none();
        while self.now < until {
            self.count_skipped_stalls();
            while self.now >= self.window_end {
                self.close_window();
            }
            let now = self.now;
            // Before the last step's wake-up cycle only an arrival or a
            // finished lookup can give a stepped cycle something to do; a
            // memory read in the middle of a walk just issues the next one.
            // (A lookup may have finished at this cycle already, while the
            // clock moved here: see below.)
            let mut step = now >= self.wake || std::mem::take(&mut self.lookup_done);
            step |= self.memory_done(now);
            let mut arrived = false;
            while let Some((c, a)) = self.next_arrival {
                if c > now {
                    break;
                }
                arrived = true;
                self.arrive(now, a);
                self.pull_arrival();
            }
            if now >= self.updates_due() {
                self.run_updates(now);
                step = true;
            }
            if arrived && !step && lean && !self.draining {
                // Only the arrivals can move anything this cycle (the
                // request producers they feed; next_arrival is already the
                // next one, as hit_ahead needs).
                self.wake = self.arrival_step(now);
            } else if step || arrived {
                self.wake = self.tick(now);
                self.busy_cycles += 1;
            }
            let wake = self.wake;
            self.now = if wake <= now + 1 {
                now + 1
            } else {
                // Stop at the window's end: stalls of skipped cycles are
                // counted in their own window.
                let mut next = until.min(wake).min(self.window_end);
                if let Some((c, _)) = self.next_arrival {
                    next = next.min(c);
                }
                next = next.min(self.updates_due());
                // Memory completions before then that only issue a walk's
                // next read need no visit of this loop each: the first one
                // that finishes a lookup stops the clock at its cycle (a
                // step). Nothing else happens in between.
                while let Some(c) = self.engine.peek() {
                    if c >= next {
                        break;
                    }
                    if self.memory_done(c) {
                        self.lookup_done = true;
                        next = c;
                        break;
                    }
                }
                next.max(now + 1)
            };
        }
        self.count_skipped_stalls();
        while self.window_end <= until {
            self.close_window();
        }
        self.settle_answers(until);
    }

    /// Phase 1's memory completions due at `now`; returns whether one
    /// finished a lookup (an intermediate read only issues the next one).
    // (Always: with `elu_ahead` in `tick` it was left out of line, +2 %.)
    #[inline(always)]
    fn memory_done(&mut self, now: Cycle) -> bool {
        let mut done = false;
        while let Some((_, ev)) = self.engine.pop_until(now) {
            match ev {
                Ev::MemDone(slot) => {
                    let engine = &mut self.engine;
                    done |= self.elu.access_done(now, slot, &mut self.hbm, &mut |c, s| {
                        engine.schedule(c, Ev::MemDone(s))
                    });
                }
            }
        }
        done
    }

    /// Counts a stall for every cycle skipped while a table's input head
    /// waited for room in its PHV buffer (as a stepped cycle would have).
    fn count_skipped_stalls(&mut self) {
        if !self.any_blocked {
            return;
        }
        let now = self.now;
        for t in &mut self.tables {
            if t.blocked {
                t.win.stalls += now - t.stall_from;
                t.stall_from = now;
            }
        }
    }

    fn arrive(&mut self, now: Cycle, mut a: Arrival) {
        let (flow, mut route) = (a.flow, a.flow);
        let t = match (&mut self.routes, self.cfg.single_entry()) {
            (Some(r), _) => {
                // a.flow names a flow: its route now, and the PHV's key
                // index at the route's first table.
                let Some((rt, t, k)) = r.first(a.flow) else {
                    r.unrouted();
                    return;
                };
                route = rt;
                a.flow = k;
                t
            }
            // An attack aimed at one table (no draw: the legitimate PHVs
            // draw their tables as in the run without attack).
            (None, _) if self.legit.as_deref().is_some_and(|l| l.attack_entry.is_some() && l.class(a.flow) == 1) => {
                self.legit.as_deref().unwrap().attack_entry.unwrap()
            }
            (None, Some(t)) => t,
            (None, None) => {
                let u: f64 = self.rng.gen();
                self.cfg.entry(u)
            }
        };
        let id = self.created;
        self.created += 1;
        let table = &mut self.tables[t as usize];
        table.win.arrived += 1;
        let full = table.input.len() >= self.stage_fifo;
        if let Some(l) = self.legit.as_deref_mut() {
            l.arrive(flow, id, now, full); // the flow it arrived as (routed: not its key index)
        }
        if full {
            table.win.drops += 1;
            self.dropped += 1;
            return;
        }
        table.input.push_back(Phv {
            id,
            flow: a.flow,
            arrived: now,
        });
        if self.routes.is_some() {
            let v = self.program_version(id);
            let r = self.routes.as_mut().unwrap();
            r.enter(id, route);
            if let Some(v) = v {
                r.check_version(flow, route, v);
            }
        }
    }

    fn close_window(&mut self) {
        let end = self.window_end;
        self.settle_answers(end);
        let nt = self.tables.len();
        for (i, t) in self.tables.iter_mut().enumerate() {
            let mut c = std::mem::take(&mut t.win);
            c.hbm_bytes = self.elu.bytes[i] - t.hbm_seen;
            t.hbm_seen = self.elu.bytes[i];
            c.reordered = t.vmu.reordered - t.reordered_seen;
            t.reordered_seen = t.vmu.reordered;
            t.total.merge(&c);
            for (d, cnt) in t.edges.iter_mut().enumerate() {
                if *cnt > 0 {
                    let dst = if d == nt { -1 } else { d as i32 };
                    self.edge_rows.push(EdgeRow {
                        end,
                        src: i as u16,
                        dst,
                        count: *cnt,
                    });
                    *cnt = 0;
                }
            }
            self.rows.push(WindowRow {
                end,
                table: i as u16,
                pmus: t.members.len() as u32,
                c,
            });
        }
        self.window_end += self.window;
    }
}

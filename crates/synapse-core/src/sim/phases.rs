//! One stepped cycle: phases 2–8 of the module documentation (phase 1,
//! memory completions and arrivals, is in `run.rs`).

use super::*;
use crate::hw::vmu::Via;

impl<const N: usize> Simulator<N> {
    /// One cycle (phases 2–8); returns the next cycle at which a queue can
    /// make progress (`Cycle::MAX` if none; memory completions and arrivals
    /// are handled by the caller).
    pub(super) fn tick(&mut self, now: Cycle) -> Cycle {
        // 2. ELU commit: one reply per cycle.
        let elu_busy = !self.elu.is_empty();
        if let Some((miss, action)) = if elu_busy { self.elu.commit() } else { None } {
            match miss.pmu {
                Some(p) => {
                    // A reply walked before a rule update's swap must not
                    // fill the CAM (updates.rs).
                    if self.updates.is_none() || self.fill_allowed(&miss, action, self.elu.commits - 1) {
                        // The doorkeeper's `judge_backlog`: the ELU's backlog, broadcast.
                        if let Some(d) = self.pmus[p as usize].admit.as_mut().filter(|d| d.needs_backlog()) {
                            d.backlog = self.elu.backlog();
                        }
                        self.pmus[p as usize].fill(&miss, action);
                        if let Some(r) = self.rec.as_deref_mut() { r.fill(p as usize, now, &miss, action) }
                    } else {
                        // Not recorded: a recorded run has no rule updates (record.rs).
                        self.pmus[p as usize].forward(&miss, action);
                    }
                    self.touch_pmu(p as usize);
                }
                None => {
                    if let Some(c) = self.rec.as_deref_mut().and_then(|r| r.cl()) { c.fill(now, &miss, action) }
                    let t = &mut self.tables[miss.table as usize];
                    // Phase 2 comes before every PMU response of this cycle.
                    t.vmu.settle(now, 0);
                    let lat = t.vmu.resolve(miss.tag, action, now);
                    t.win.lat_sum += lat;
                    t.win.lat.add(lat);
                }
            }
        }
        // 3–4. PMUs (only those with work, in index order), then the
        // response network.
        let soon = now + 1;
        let mut busy = false;
        if self.pmu_min_wake <= now {
            let mut min_wake = Cycle::MAX;
            let sw = self.stamp_word(); // once per step, not per PMU ticked
            for wi in 0..self.pmu_active.len() {
                let mut bits = self.pmu_active[wi];
                while bits != 0 {
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let pi = wi * 64 + b;
                    let w = self.pmu_wake[pi];
                    if w > now {
                        min_wake = min_wake.min(w);
                        continue;
                    }
                    let p = &mut self.pmus[pi];
                    if p.is_idle() {
                        self.pmu_wake[pi] = Cycle::MAX;
                        self.pmu_active[wi] &= !(1u64 << b);
                        continue;
                    }
                    let tables = &self.tables;
                    p.tick(now, &|t, f, s| key_of(tables, sw, t, f, s));
                    if p.q_m_len() > 0 {
                        self.pmu_qm[wi] |= 1u64 << b;
                    }
                    if let Some(r) = p.pop_response() {
                        if let Some(rec) = self.rec.as_deref_mut() { rec.rsp(pi, now, &r) }
                        self.respond(now, pi, r);
                    }
                    let p = &self.pmus[pi];
                    let w = p.next_event(now).unwrap_or(Cycle::MAX);
                    self.pmu_wake[pi] = w;
                    if w == Cycle::MAX {
                        self.pmu_active[wi] &= !(1u64 << b);
                    }
                    min_wake = min_wake.min(w);
                }
            }
            self.pmu_min_wake = min_wake;
        }
        // 5a. The shed gate (defence.shed_backlog): each PMU may drop the
        // miss at its Q_m head, judged against the ELU's backlog now.
        let shed_any = (self.shed_first | self.shed_all) != 0 && self.shed_gate();
        // 5. PMU → ELU bus: one miss per cycle, round robin over the PMUs and
        // the VMUs' direct path (last).
        let misses_waiting = self.pmu_qm.iter().any(|&w| w != 0);
        if let Some(c) = self.rec.as_deref_mut().and_then(|r| r.cl()) {
            if self.elu.can_enqueue() { c.elu_ready(now) }
        }
        let mut sent = false;
        if (misses_waiting || !self.direct.is_empty())
            && self.elu.can_enqueue()
            && self.bus.can_send(now, 0)
        {
            let n = self.pmus.len() + 1;
            // Round robin from bus_rr (a wrapping index: no division a step).
            let mut i = self.bus_rr % n;
            for _ in 0..n {
                if let Some(l) = &mut self.limit {
                    // The miss-rate limit: a table over it waits (its
                    // misses stay queued), the round robin moves on.
                    let head = if i < self.pmus.len() { self.pmus[i].peek_miss().map(|m| m.table) } else { self.direct.front().map(|m| m.table) };
                    if let Some(t) = head {
                        if !l.allows(t as usize, now) {
                            l.held[t as usize] += 1;
                            i = if i + 1 == n { 0 } else { i + 1 };
                            continue;
                        }
                    }
                }
                let miss = if i < self.pmus.len() {
                    let m = self.pmus[i].pop_miss();
                    if m.is_some() {
                        if let Some(r) = self.rec.as_deref_mut() { r.miss_taken(i, now) }
                        self.touch_pmu(i);
                        if self.pmus[i].q_m_len() == 0 {
                            self.pmu_qm[i / 64] &= !(1u64 << (i % 64));
                        }
                    }
                    m
                } else {
                    self.direct.pop_front()
                };
                if let Some(m) = miss {
                    if let Some(c) = self.rec.as_deref_mut().and_then(|r| r.cl()) { c.bus(now, i, &m) }
                    if let Some(l) = &mut self.limit {
                        l.take(m.table as usize, now);
                    }
                    self.bus.try_send(now, 0);
                    self.tables[m.table as usize].win.elu_requests += 1;
                    self.elu.enqueue(now, m);
                    sent = true;
                    self.bus_rr = if i + 1 == n { 0 } else { i + 1 };
                    break;
                }
                i = if i + 1 == n { 0 } else { i + 1 };
            }
        }
        busy |= !self.direct.is_empty();
        // 6. ELU registers and starts lookups (when it has something to
        // register or start).
        if self.elu.can_tick(now) {
            let engine = &mut self.engine;
            self.elu
                .tick(now, &mut self.hbm, &self.walkers, &mut |c, s| {
                    engine.schedule(c, Ev::MemDone(s))
                });
        }
        // A miss the bus just brought is registered ahead, its first read
        // issued as at the next cycle (`Elu::can_tick_ahead`), when no
        // memory read completes then (phase 1 would come first), the next
        // cycle is in this window and run (the ELU's counters), and no rule
        // update can swap a structure. Saves the step at the next cycle.
        if sent {
            self.elu_ahead(now);
        }
        let elu_wake = self.elu.next_event(now);
        // Misses waiting in Q_m move on the next cycle if the ELU's miss
        // queue has room (the bus takes one per cycle); otherwise once the
        // ELU, at one of its own steps, takes its head.
        // With the shed gate, a cycle that shed a miss or raised the ELU's
        // backlog may find the next Q_m head to shed.
        let bus_wake = if (self.elu.can_enqueue() || shed_any || (sent && (self.shed_first | self.shed_all) != 0))
            && self.pmu_qm.iter().any(|&w| w != 0)
        {
            soon
        } else {
            Cycle::MAX
        };
        // 7. Tables: release, then request.
        let nt = self.tables.len();
        self.fed = false;
        let mut table_wake = Cycle::MAX;
        let mut any_blocked = false;
        // (No division for the usual single table.)
        let mut ti = if nt > 1 { now as usize % nt } else { 0 };
        for _ in 0..nt {
            // Answers delivered ahead for this cycle or earlier take effect.
            self.tables[ti].vmu.settle(now, u32::MAX);
            self.release(now, ti);
            self.request(now, ti);
            let t = &mut self.tables[ti];
            // A head waiting for room in the PHV buffer needs no step until
            // a release; any other waiting head retries next cycle.
            // (Full at the next cycle: this cycle's release frees its
            // slot from then.)
            t.blocked = !t.input.is_empty() && !t.vmu.has_room(soon);
            t.stall_from = soon;
            any_blocked |= t.blocked;
            busy |= !t.input.is_empty() && !t.blocked;
            if t.vmu.head_ready() {
                // Released next cycle (or once its answer is through the
                // port register), or once a run released ahead is out.
                table_wake = table_wake.min(t.release_free.max(t.vmu.head_at()).max(soon));
            } else if let Some(at) = t.vmu.head_due() {
                // Its answer was delivered ahead (`hit_ahead`).
                table_wake = table_wake.min(at.max(t.release_free).max(soon));
            }
            ti = if ti + 1 == nt { 0 } else { ti + 1 };
        }
        self.any_blocked = any_blocked;
        busy |= table_wake <= soon;
        // A release may have fed a table already visited in this loop: its
        // input is not empty, so the next cycle must be stepped.
        busy |= self.fed;
        // 8. Draining PMUs (only scanned while some PMU is transient).
        if self.draining {
            let mut still = false;
            for i in 0..self.pmus.len() {
                if let State::Transient { .. } = self.pmus[i].state() {
                    self.touch_pmu(i);
                    match self.pmus[i].try_finish_drain() {
                        Some(Some(t)) => self.join_member(t as usize, i as u16),
                        Some(None) => {}
                        None => still = true,
                    }
                }
            }
            self.draining = still;
        }
        if busy || !self.direct.is_empty() {
            return soon;
        }
        // PMUs (including those that got requests in phase 7) wake when
        // their next request or CAM result is due.
        if self.pmu_min_wake <= now {
            self.rescan_pmus(now);
        }
        self.other_wake = table_wake.min(elu_wake).min(bus_wake);
        self.pmu_min_wake.min(self.other_wake)
    }

    /// Phase 5a: every PMU with a miss in Q_m asks its shed gate
    /// ([`Pmu::shed_head`]) with the ELU's backlog of this cycle. Returns
    /// whether one shed.
    #[inline(never)]
    fn shed_gate(&mut self) -> bool {
        let backlog = self.elu.backlog();
        // Below the lower of the (non-zero) thresholds nothing is shed.
        let lo = [self.shed_first, self.shed_all].into_iter().filter(|&x| x > 0).min().unwrap_or(u32::MAX);
        if backlog < lo as usize {
            return false;
        }
        let mut any = false;
        for wi in 0..self.pmu_qm.len() {
            let mut bits = self.pmu_qm[wi];
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let pi = wi * 64 + b;
                if self.pmus[pi].shed_head(backlog, self.shed_first, self.shed_all) {
                    any = true;
                    self.touch_pmu(pi);
                    if self.pmus[pi].q_m_len() == 0 {
                        self.pmu_qm[wi] &= !(1u64 << b);
                    }
                }
            }
        }
        any
    }

    /// Phase 6 of the next cycle now, after the bus sent a miss (see
    /// `tick`); out of line: the ELU's tick inlined a second time in
    /// `tick` cost more than it saved.
    #[inline(never)]
    fn elu_ahead(&mut self, now: Cycle) {
        if self.fast
            && self.updates.is_none()
            && self.rec.is_none()
            && now + 1 < self.window_end.min(self.until)
            && self.elu.can_tick_ahead(now)
            && self.engine.peek().map_or(true, |c| c > now + 1)
        {
            let engine = &mut self.engine;
            self.elu
                .tick(now + 1, &mut self.hbm, &self.walkers, &mut |c, s| {
                    engine.schedule(c, Ev::MemDone(s))
                });
        }
    }

    /// Asks every PMU touched since the last scan for its wake cycle and
    /// sets `pmu_min_wake` to the least.
    fn rescan_pmus(&mut self, now: Cycle) {
        let mut wake = Cycle::MAX;
        for wi in 0..self.pmu_active.len() {
            let mut bits = self.pmu_active[wi];
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let pi = wi * 64 + b;
                let w = &mut self.pmu_wake[pi];
                if *w <= now {
                    *w = self.pmus[pi].next_event(now).unwrap_or(Cycle::MAX);
                    if *w == Cycle::MAX {
                        self.pmu_active[wi] &= !(1u64 << b);
                    }
                }
                wake = wake.min(*w);
            }
        }
        self.pmu_min_wake = wake;
    }

    /// A cycle before the last step's wake-up cycle (`self.wake`) that
    /// brings only arrivals, in place of [`Simulator::tick`]. Until then
    /// phases 2-6 would do nothing, and phase 7 would do nothing in a table
    /// whose input FIFO was empty (its release is not due) or whose head is
    /// `blocked` (the stall is counted as for a skipped cycle): so only the
    /// request producers of the tables just fed act, in the same round
    /// robin order. The wake-up cycle is then the last one with what those
    /// requests changed: their tables' heads and the PMUs they touched
    /// (asked again directly, without a scan of the other PMUs). The
    /// caller checks that no rule update, recording, explicit route or
    /// draining PMU is about.
    pub(super) fn arrival_step(&mut self, now: Cycle) -> Cycle {
        let soon = now + 1;
        let old_min = self.pmu_min_wake;
        let mut other = self.other_wake;
        let mut busy = false;
        // The PMUs the requests went to, with their wake cycles before.
        let mut touched = [(0usize, 0 as Cycle); 4];
        let mut n_touched = 0;
        let nt = self.tables.len();
        let mut ti = if nt > 1 { now as usize % nt } else { 0 };
        for _ in 0..nt {
            let t = &mut self.tables[ti];
            if !t.input.is_empty() && !t.blocked {
                t.vmu.settle(now, u32::MAX);
                debug_assert!(!t.vmu.head_ready_at(now) || now < t.release_free, "a release was due");
                if let Some(tp) = self.request(now, ti) {
                    if n_touched < touched.len() {
                        touched[n_touched] = tp;
                    }
                    n_touched += 1;
                }
                let t = &mut self.tables[ti];
                t.blocked = !t.input.is_empty() && !t.vmu.has_room(soon);
                t.stall_from = soon;
                self.any_blocked |= t.blocked;
                busy |= !t.input.is_empty() && !t.blocked;
                if t.vmu.head_ready() {
                    other = other.min(t.release_free.max(t.vmu.head_at()).max(soon));
                } else if let Some(at) = t.vmu.head_due() {
                    other = other.min(at.max(t.release_free).max(soon));
                }
            }
            ti = if ti + 1 == nt { 0 } else { ti + 1 };
        }
        if busy || !self.direct.is_empty() {
            // As tick: the touched PMUs are asked at the next step.
            return soon;
        }
        if n_touched > touched.len() {
            self.rescan_pmus(now);
        } else {
            let mut min = old_min;
            let mut rescan = false;
            for &(pu, was) in &touched[..n_touched] {
                debug_assert!(was > now);
                let w = self.pmus[pu].next_event(now).unwrap_or(Cycle::MAX);
                self.pmu_wake[pu] = w;
                if w == Cycle::MAX {
                    self.pmu_active[pu / 64] &= !(1u64 << (pu % 64));
                }
                // The earliest PMU now wakes later: the least is not known.
                rescan |= w > was && was <= old_min;
                min = min.min(w);
            }
            if rescan {
                self.rescan_pmus(now);
            } else {
                self.pmu_min_wake = min;
            }
        }
        self.other_wake = other;
        self.pmu_min_wake.min(other)
    }

    /// A PMU changed from outside its tick: tick it at the next stepped cycle.
    #[inline]
    pub(in crate::sim) fn touch_pmu(&mut self, i: usize) {
        self.pmu_wake[i] = 0;
        self.pmu_min_wake = 0;
        self.pmu_active[i / 64] |= 1u64 << (i % 64);
    }

    /// Phase 4: the VMU takes PMU `pi`'s response (PMUs in index order;
    /// answers delivered ahead from lower-indexed PMUs come first).
    #[inline]
    fn respond(&mut self, now: Cycle, pi: usize, r: Response) {
        match r {
            Response::Hit {
                table,
                tag,
                action,
                compared,
            } => {
                let t = &mut self.tables[table as usize];
                t.win.hits += 1;
                t.win.cam_compares += compared as u64;
                t.vmu.settle(now, 1 + pi as u32);
                let lat = t.vmu.resolve(tag, action, now);
                t.win.lat_sum += lat;
                t.win.lat.add(lat);
            }
            Response::Miss {
                table,
                tag,
                compared,
            } => {
                let t = &mut self.tables[table as usize];
                t.win.misses += 1;
                t.win.cam_compares += compared as u64;
                t.vmu.park(tag);
            }
            Response::Fill { table, tag, action } => {
                let t = &mut self.tables[table as usize];
                t.vmu.settle(now, 1 + pi as u32);
                let lat = t.vmu.resolve(tag, action, now);
                t.win.lat_sum += lat;
                t.win.lat.add(lat);
            }
            Response::Shed { table, tag } => {
                let t = &mut self.tables[table as usize];
                t.vmu.settle(now, 1 + pi as u32);
                t.vmu.shed(tag, now);
            }
        }
    }

    /// Phase 7's release of a head whose miss was shed: it leaves the
    /// pipeline dropped (counted per table, and with the dropped PHVs).
    #[inline(never)]
    fn drop_shed(&mut self, now: Cycle, ti: usize) {
        let slot = self.tables[ti].vmu.release(now);
        self.shed[ti] += 1;
        self.dropped += 1;
        if let Some(l) = self.legit.as_deref_mut() {
            l.shed(slot.phv);
        }
        if let Some(r) = &mut self.routes {
            r.leave(slot.phv);
        }
        if self.updates.is_some() {
            self.phv_exit(slot.phv);
        }
    }

    fn release(&mut self, now: Cycle, ti: usize) {
        let t = &self.tables[ti];
        if !t.vmu.head_ready_at(now) || now < t.release_free {
            return;
        }
        if self.shed_first | self.shed_all != 0 && t.vmu.head_shed() {
            self.drop_shed(now, ti);
            return;
        }
        let next = match self.tables[ti].pending.take() {
            Some(n) => n,
            None if self.routes.is_some() => {
                let phv = self.tables[ti].vmu.head_phv();
                self.routes.as_ref().unwrap().next(phv)
            }
            None if self.cfg.has_out(ti as u16) => {
                let u: f64 = self.rng.gen();
                self.cfg.next(ti as u16, u)
            }
            None => Next::Exit,
        };
        if let Next::Table(d) = next {
            if self.tables[d as usize].input.len() >= self.stage_fifo {
                let t = &mut self.tables[ti];
                t.pending = Some(next);
                t.win.stalls += 1;
                if let Some(c) = self.rec.as_deref_mut().and_then(|r| r.cl()) { c.stall(now, ti) }
                return;
            }
        }
        let t = &mut self.tables[ti];
        let slot = t.vmu.release(now);
        let action = slot.action.unwrap();
        if let Some(c) = self.rec.as_deref_mut().and_then(|r| r.cl()) { c.rel(now, ti, action, slot.via == Via::Miss) }
        if self.to_judge(ti, slot.flow, action) {
            // Wrong, or (with rule updates) another version's answer.
            self.judge(ti, slot.phv, slot.flow, action, slot.issued);
        }
        if let Some(l) = self.legit.as_deref_mut() {
            l.release(slot.via == Via::Hit, slot.phv, matches!(next, Next::Exit).then_some(now));
        }
        let t = &mut self.tables[ti];
        t.defaults += is_default(action) as u64;
        t.win.processed += 1;
        t.win.sojourn_sum += now - slot.arrived;
        self.keys_done += 1;
        match next {
            Next::Table(d) => {
                self.fed = true;
                t.edges[d as usize] += 1;
                let flow = match &mut self.routes {
                    Some(r) => r.advance(slot.phv),
                    None => slot.flow,
                };
                self.tables[d as usize].input.push_back(Phv {
                    id: slot.phv,
                    flow,
                    arrived: now,
                });
                self.tables[d as usize].win.arrived += 1;
            }
            Next::Exit => {
                self.exit(ti, slot.phv);
                self.release_ahead(now, ti);
            }
        }
    }

    #[inline]
    fn exit(&mut self, ti: usize, phv: u64) {
        if let Some(r) = &mut self.routes {
            r.leave(phv);
        }
        let t = &mut self.tables[ti];
        let n = t.edges.len();
        t.edges[n - 1] += 1;
        let (w, b) = ((phv / 64) as usize, phv % 64);
        if self.exited_bits.len() <= w {
            self.exited_bits.resize(w + 1, 0);
        }
        if self.exited_bits[w] & (1 << b) != 0 {
            self.duplicates += 1;
        }
        self.exited_bits[w] |= 1 << b;
        if self.updates.is_some() {
            self.phv_exit(phv);
        }
    }

    /// After the head left to the exit at `now`: the answered PHVs behind it
    /// would leave one per cycle at `now + 1, now + 2, ...` whatever else
    /// happens, as long as nothing reads this table's PHV buffer meanwhile.
    /// That holds while the table's input FIFO stays empty (no request
    /// producer step, which reads the buffer's occupancy): no arrival, and
    /// no other table feeds it (`isolated`). So release them now, each
    /// counted at its own cycle, up to the next arrival (whose cycle
    /// releases before it requests), the window's end
    /// and the end of the run; the action unit is then busy until the cycle
    /// after the last. This replaces a stepped cycle per PHV of a backlog
    /// (behind a miss) by one.
    fn release_ahead(&mut self, now: Cycle, ti: usize) {
        // With explicit routes a PHV's next table is its own, not the CFG's.
        if self.routes.is_some() || !self.isolated || self.cfg.has_out(ti as u16) || !self.tables[ti].input.is_empty() {
            return;
        }
        let mut limit = self.window_end.min(self.until);
        if let Some((c, _)) = self.next_arrival {
            // At the arrival's cycle the release still comes first (phase 7
            // releases, then requests).
            limit = limit.min(c + 1);
        }
        let mut at = now + 1;
        while at < limit && self.tables[ti].vmu.head_ready_at(at) && !self.tables[ti].vmu.head_shed() {
            let t = &mut self.tables[ti];
            let slot = t.vmu.release(at);
            if let Some(c) = self.rec.as_deref_mut().and_then(|r| r.cl()) { c.rel(at, ti, slot.action.unwrap(), slot.via == Via::Miss) }
            if self.to_judge(ti, slot.flow, slot.action.unwrap()) {
                self.judge(ti, slot.phv, slot.flow, slot.action.unwrap(), slot.issued);
            }
            if let Some(l) = self.legit.as_deref_mut() {
                l.release(slot.via == Via::Hit, slot.phv, Some(at));
            }
            let t = &mut self.tables[ti];
            t.defaults += is_default(slot.action.unwrap()) as u64;
            t.win.processed += 1;
            t.win.sojourn_sum += at - slot.arrived;
            self.keys_done += 1;
            self.exit(ti, slot.phv);
            at += 1;
        }
        self.tables[ti].release_free = at;
    }

    /// Phase 7's request producer of table `ti`. Returns the PMU it sent a
    /// request to, with that PMU's wake cycle from before (`arrival_step`).
    fn request(&mut self, now: Cycle, ti: usize) -> Option<(usize, Cycle)> {
        if self.rec.is_some() {
            self.rec_phv(now, ti);
        }
        let t = &mut self.tables[ti];
        let Some(&phv) = t.input.front() else { return None };
        if !t.vmu.has_room(now) {
            t.win.stalls += 1;
            return None;
        }
        let flow = phv.flow;
        let mut stamp = 0;
        if let Some(u) = self.updates.as_deref() {
            // Program consistency: the PHV's version tag (xtable.rs).
            if let Some(w) = u.tag_word() {
                stamp = u.tag(ti, phv.id).unwrap_or(t.keys[flow as usize].0[w]);
            }
        }
        let p = t.vmu.route_index(t.lut_index[flow as usize] as usize);
        // The CAM reads the key when it searches (now if issued ahead, else
        // later): start its load now, beside the lookup-table index's.
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is only a hint; the address is a live element.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(t.keys.as_ptr().add(flow as usize) as *const i8);
        }
        if p == INVALID {
            // No PMU: the VMU sends the key to the ELU itself (bounded by the
            // PHV buffer).
            t.input.pop_front();
            let tag = t.vmu.issue(phv.id, flow, phv.arrived, now);
            t.vmu.park(tag);
            t.win.misses += 1;
            if let Some(c) = self.rec.as_deref_mut().and_then(|r| r.cl()) { c.direct(now, ti, tag) }
            let key = key_of(&self.tables, self.stamp_word(), ti as u16, flow, stamp);
            self.direct.push_back(MissRequest {
                table: ti as u16,
                tag,
                key,
                pmu: None,
            });
        } else {
            let pu = p as usize;
            if !self.pmus[pu].can_accept(now) || !self.net.try_send(now, pu) {
                t.win.stalls += 1;
                return None;
            }
            t.input.pop_front();
            let tag = t.vmu.issue(phv.id, flow, phv.arrived, now);
            // touch_pmu (the table is borrowed).
            let was = self.pmu_wake[pu];
            self.pmu_wake[pu] = 0;
            self.pmu_min_wake = 0;
            self.pmu_active[pu / 64] |= 1u64 << (pu % 64);
            let req = Request { table: ti as u16, tag, flow, stamp, at: now + self.vmu_latency };
            let (tables, sw) = (&self.tables, self.stamp_word());
            let key_of = |t, f, s| key_of(tables, sw, t, f, s);
            if let Some(r) = self.rec.as_deref_mut() { r.req(pu, &req, key_of(req.table, flow, stamp)) }
            // With rule updates (which may change a CAM at any stepped
            // cycle) only an idle PMU with no miss out issues ahead.
            // (Only read with a miss of this PMU out: else not asked.)
            let quiet = if self.fast && self.updates.is_none() && self.pmus[pu].outstanding() > 0 {
                self.elu.quiet_until(now)
            } else {
                0
            };
            let p = &mut self.pmus[pu];
            p.retire_delivered(now);
            let ahead = p.accept(req, quiet, &key_of);
            let t = &mut self.tables[ti];
            t.win.fifo_max = t.win.fifo_max.max(t.vmu.occupancy() as u64);
            if ahead {
                self.hit_ahead(now, ti, pu, tag, quiet);
            }
            return Some((pu, was));
        }
        let t = &mut self.tables[ti];
        t.win.fifo_max = t.win.fifo_max.max(t.vmu.occupancy() as u64);
        None
    }

    /// Settles every table's answers delivered ahead before `before`
    /// (before a window closes, and when a run returns to the embedding).
    pub(super) fn settle_answers(&mut self, before: Cycle) {
        for t in &mut self.tables {
            t.vmu.settle(before, 0);
        }
    }

    /// An uncontended hit as one event. Right after a request was issued
    /// ahead to an idle PMU ([`Pmu::accept`]): when the CAM hit and the PHV
    /// is alone in its table's PHV buffer, its whole way out is fixed now.
    /// The answer reaches the VMU at its ready cycle `r` (phases 3-4; see
    /// [`Pmu::deliver_ahead`]) and, the head being answered, leaves at
    /// `rel = max(r, release_free)` (phase 7), to the exit. This is
    /// resolved now, each part counted as at its own cycle, under the
    /// conditions of `release_ahead`: nothing reads this table's PHV
    /// buffer before `rel` (no arrival before it, no other table feeding
    /// it), `rel` is in this window and this run, and no rule update or
    /// recording is active. Nothing else can answer a PHV of this table
    /// meanwhile (the buffer holds only this one), so the reorder count
    /// is unchanged. Saves the stepped cycle at `r` of every such hit.
    fn hit_ahead(&mut self, now: Cycle, ti: usize, pu: usize, tag: u64, quiet: Cycle) {
        if !self.fast || self.updates.is_some() || self.rec.is_some() {
            return;
        }
        // The ready cycle is known before the CAM is searched: issued ahead
        // at the request's arrival, due τ_c later. Its counters go to this
        // window, and the embedding sees it settled when the run returns.
        let ready = now + self.vmu_latency + self.pmus[pu].t.tau;
        if ready >= self.window_end.min(self.until) {
            return;
        }
        // With a miss of this PMU out, its fill must not reach Q_p at or
        // before `ready` (it would be taken first).
        // (`quiet` is the request's `Elu::quiet_until(now)`: fast, no
        // updates, a miss out.)
        if self.pmus[pu].outstanding() > 0 && quiet <= ready {
            return;
        }
        let t = &self.tables[ti];
        let mut limit = self.window_end.min(self.until);
        if let Some((c, _)) = self.next_arrival {
            // An arrival at `rel` is fine: phase 7 releases before it requests.
            limit = limit.min(c + 1);
        }
        // The answer leaves the PMU at `ready`; through the VMU's port
        // register it can release from `ready + rsp_delay`.
        let rel = (ready + t.vmu.rsp_delay).max(t.release_free);
        let out_now = t.vmu.occupancy() == 1
            && t.input.is_empty()
            && self.isolated
            && self.routes.is_none()
            && !self.cfg.has_out(ti as u16)
            && rel < limit;
        let Some((action, compared, r)) = self.pmus[pu].deliver_ahead() else {
            return;
        };
        debug_assert_eq!(r, ready);
        let t = &mut self.tables[ti];
        // Phase 4 at `r`.
        t.win.hits += 1;
        t.win.cam_compares += compared as u64;
        if !out_now {
            // The VMU applies it when it reaches `r` (PMU pu's turn in
            // phase 4); until then an answer for an older PHV may still
            // come first. The request was sent now: latency `r - now`.
            let lat = r + t.vmu.rsp_delay - now;
            t.win.lat_sum += lat;
            t.win.lat.add(lat);
            t.vmu.deliver(tag, action, r, 1 + pu as u32);
            return;
        }
        let lat = t.vmu.resolve(tag, action, r);
        t.win.lat_sum += lat;
        t.win.lat.add(lat);
        // Phase 7 at `rel`.
        let slot = t.vmu.release(rel);
        if self.to_judge(ti, slot.flow, action) {
            self.judge(ti, slot.phv, slot.flow, action, slot.issued);
        }
        if let Some(l) = self.legit.as_deref_mut() {
            l.release(slot.via == Via::Hit, slot.phv, Some(rel));
        }
        let t = &mut self.tables[ti];
        t.defaults += is_default(action) as u64;
        t.win.processed += 1;
        t.win.sojourn_sum += rel - slot.arrived;
        t.release_free = rel + 1;
        self.keys_done += 1;
        self.exit(ti, slot.phv);
    }
}

impl<const N: usize> Simulator<N> {
    /// The key word holding a program version tag, if rule updates stamp
    /// one into every request (xtable.rs).
    #[inline]
    fn stamp_word(&self) -> Option<usize> {
        self.updates.as_deref().and_then(|u| u.tag_word())
    }
}

/// The key a request or miss names: flow `flow` of table `t`, its tag word
/// `sw` (if any) set to `stamp`.
#[inline]
fn key_of<const N: usize>(tables: &[Table<N>], sw: Option<usize>, t: u16, flow: u32, stamp: u32) -> Key<N> {
    let mut k = tables[t as usize].keys[flow as usize];
    if let Some(w) = sw {
        k.0[w] = stamp;
    }
    k
}

/// An answer that is the table's default action: no rule matched (or, with
/// rule updates, a default that an update set).
#[inline(always)]
fn is_default(action: Match) -> bool {
    action.is_none_or(|id| id >= super::updates::DEFAULT_ID)
}

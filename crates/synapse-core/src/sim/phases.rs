//! One stepped cycle: phases 2–8 of the module documentation (phase 1,
//! memory completions and arrivals, is in `run.rs`).

use super::*;

impl Simulator {
    /// One cycle (phases 2–8); returns the next cycle at which a queue can
    /// make progress (`Cycle::MAX` if none; memory completions and arrivals
    /// are handled by the caller).
    pub(super) fn tick(&mut self, now: Cycle) -> Cycle {
        // 2. ELU commit: one reply per cycle.
        if let Some((miss, action)) = self.elu.commit() {
            match miss.pmu {
                Some(p) => {
                    self.pmus[p as usize].fill(&miss, action);
                    self.touch_pmu(p as usize);
                }
                None => {
                    let t = &mut self.tables[miss.table as usize];
                    let lat = t.vmu.resolve(miss.tag, action, now);
                    t.win.lat_sum += lat;
                    t.win.lat.add(lat);
                }
            }
        }
        // 3–4. PMUs, then the response network.
        let soon = now + 1;
        let mut busy = false;
        let mut misses_waiting = false;
        let mut min_wake = Cycle::MAX;
        let pmus_due = self.pmu_min_wake <= now;
        for (p, wake) in self.pmus.iter_mut().zip(self.pmu_wake.iter_mut()) {
            if !pmus_due {
                break;
            }
            if *wake > now {
                min_wake = min_wake.min(*wake);
                continue;
            }
            if p.is_idle() {
                *wake = Cycle::MAX;
                continue;
            }
            p.tick(now);
            misses_waiting |= p.q_m_len() > 0;
            if let Some(r) = p.pop_response() {
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
                        let lat = t.vmu.resolve(tag, action, now);
                        t.win.lat_sum += lat;
                        t.win.lat.add(lat);
                    }
                }
            }
            *wake = p.next_event(now).unwrap_or(Cycle::MAX);
            min_wake = min_wake.min(*wake);
        }
        if pmus_due {
            self.pmu_min_wake = min_wake;
        }
        // 5. PMU → ELU bus: one miss per cycle, round robin over the PMUs and
        // the VMUs' direct path (last).
        if (misses_waiting || !self.direct.is_empty())
            && self.elu.can_enqueue()
            && self.bus.can_send(now, 0)
        {
            let n = self.pmus.len() + 1;
            for k in 0..n {
                let i = (self.bus_rr + k) % n;
                let miss = if i < self.pmus.len() {
                    let m = self.pmus[i].pop_miss();
                    if m.is_some() {
                        self.touch_pmu(i);
                    }
                    m
                } else {
                    self.direct.pop_front()
                };
                if let Some(m) = miss {
                    self.bus.try_send(now, 0);
                    self.tables[m.table as usize].win.elu_requests += 1;
                    self.elu.enqueue(now, m);
                    self.bus_rr = (i + 1) % n;
                    break;
                }
            }
        }
        busy |= !self.direct.is_empty();
        // 6. ELU registers and starts lookups.
        {
            let engine = &mut self.engine;
            self.elu
                .tick(now, &mut self.hbm, &self.walkers, &mut |c, s| {
                    engine.schedule(c, Ev::MemDone(s))
                });
        }
        busy |= self.elu.has_work();
        // 7. Tables: release, then request.
        let nt = self.tables.len();
        self.fed = false;
        for k in 0..nt {
            let ti = (now as usize + k) % nt;
            self.release(now, ti);
            self.request(now, ti);
            let t = &self.tables[ti];
            busy |= !t.input.is_empty() || t.vmu.head_ready();
        }
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
                        Some(Some(t)) => {
                            let tb = &mut self.tables[t as usize];
                            tb.vmu.add_pmu(i as u16);
                            tb.members.push(i as u16);
                        }
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
            let mut wake = Cycle::MAX;
            for (p, w) in self.pmus.iter().zip(self.pmu_wake.iter_mut()) {
                if *w <= now {
                    *w = p.next_event(now).unwrap_or(Cycle::MAX);
                }
                wake = wake.min(*w);
            }
            self.pmu_min_wake = wake;
        }
        self.pmu_min_wake
    }

    /// A PMU changed from outside its tick: tick it at the next stepped cycle.
    fn touch_pmu(&mut self, i: usize) {
        self.pmu_wake[i] = 0;
        self.pmu_min_wake = 0;
    }

    fn release(&mut self, now: Cycle, ti: usize) {
        if !self.tables[ti].vmu.head_ready() {
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
                return;
            }
        }
        let t = &mut self.tables[ti];
        let slot = t.vmu.release();
        let action = slot.action.unwrap();
        if action != t.oracle[slot.flow as usize] {
            self.wrong_action += 1;
        }
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
                if let Some(r) = &mut self.routes {
                    r.leave(slot.phv);
                }
                let n = t.edges.len();
                t.edges[n - 1] += 1;
                let (w, b) = ((slot.phv / 64) as usize, slot.phv % 64);
                if self.exited_bits.len() <= w {
                    self.exited_bits.resize(w + 1, 0);
                }
                if self.exited_bits[w] & (1 << b) != 0 {
                    self.duplicates += 1;
                }
                self.exited_bits[w] |= 1 << b;
            }
        }
    }

    fn request(&mut self, now: Cycle, ti: usize) {
        let t = &mut self.tables[ti];
        let Some(&phv) = t.input.front() else { return };
        if !t.vmu.has_room() {
            t.win.stalls += 1;
            return;
        }
        let key = t.keys[phv.flow as usize];
        let p = t.vmu.route_index(t.lut_index[phv.flow as usize] as usize);
        if p == INVALID {
            // No PMU: the VMU sends the key to the ELU itself (bounded by the
            // PHV buffer).
            t.input.pop_front();
            let tag = t.vmu.issue(phv.id, phv.flow, phv.arrived, now);
            t.vmu.park(tag);
            t.win.misses += 1;
            self.direct.push_back(MissRequest {
                table: ti as u16,
                tag,
                key,
                pmu: None,
            });
        } else {
            let pu = p as usize;
            if !self.pmus[pu].can_accept() || !self.net.try_send(now, pu) {
                t.win.stalls += 1;
                return;
            }
            t.input.pop_front();
            let tag = t.vmu.issue(phv.id, phv.flow, phv.arrived, now);
            // touch_pmu (the table is borrowed).
            self.pmu_wake[pu] = 0;
            self.pmu_min_wake = 0;
            self.pmus[pu].accept(Request {
                table: ti as u16,
                tag,
                key,
                at: now + self.vmu_latency,
            });
        }
        t.win.fifo_max = t.win.fifo_max.max(t.vmu.occupancy() as u64);
    }
}

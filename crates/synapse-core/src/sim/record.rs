//! Optional recorder of one PMU's inputs and responses in a full simulation,
//! to replay them into the RTL co-simulation (`hw/harness.rs`, issue 12).
//!
//! The simulator calls the recorder at the few places where a PMU's inputs
//! change: a control operation (`api.rs`), an ELU fill (phase 2), the
//! response taken (phase 3), the miss taken by the bus (phase 5) and a
//! request accepted into Q_r (phase 7). Each call site is one line on an
//! `Option` that is `None` unless [`Simulator::record_pmu`] was called, so a
//! run without a recorder does exactly what it did before.
//!
//! [`PmuRecording::stimulus`] turns the events into the harness's dense
//! one-row-per-cycle stimulus. The simulator ticks a PMU only on cycles
//! where it can make progress; the rows in between are its no-op cycles.
//! A request the simulator accepts at cycle `c` arrives in Q_r at
//! `c + vmu_latency`; the harness's PMU takes a request at `c'` for `c' + 1`,
//! so it is offered at `c + vmu_latency - 1` (Q_r is never fuller then).

use super::*;
use crate::hw::harness::PmuIn;

/// One input (or the taken response) of the recorded PMU.
#[derive(Clone, Copy, Debug)]
pub enum PmuEvent<const N: usize> {
    /// 1 associate(`tbl`), 2 leave(`tbl` if `next_v`), as `PmuIn::ctl_op`.
    Ctl { op: u8, tbl: u16, next_v: bool },
    /// A request accepted into Q_r, usable from cycle `at`.
    Req {
        table: u16,
        tag: u64,
        key: Key<N>,
        at: Cycle,
    },
    Fill {
        table: u16,
        tag: u64,
        key: Key<N>,
        action: Match,
    },
    /// The bus took the head of Q_m.
    MissTaken,
    /// The VMU took the head of Q_p.
    Rsp(Response),
}

/// The events of one PMU, in order, each with its cycle.
#[derive(Clone, Debug, Default)]
pub struct PmuRecording<const N: usize> {
    pub pmu: usize,
    pub events: Vec<(Cycle, PmuEvent<N>)>,
    /// The whole cluster's events ([`Simulator::record_cluster`]).
    pub cluster: Option<Box<super::record_cluster::ClusterLog<N>>>,
}

impl<const N: usize> PmuRecording<N> {
    #[inline]
    pub(super) fn ctl(&mut self, pmu: usize, now: Cycle, op: u8, tbl: u16, next_v: bool) {
        if let Some(c) = self.cluster.as_deref_mut() {
            c.ctl(pmu, now, op, tbl, next_v);
        }
        if pmu == self.pmu {
            self.events.push((now, PmuEvent::Ctl { op, tbl, next_v }));
        }
    }
    #[inline]
    pub(super) fn req(&mut self, pmu: usize, r: &Request, key: Key<N>) {
        if let Some(c) = self.cluster.as_deref_mut() {
            c.req(pmu, r);
        }
        if pmu == self.pmu {
            let (table, tag, at) = (r.table, r.tag, r.at);
            self.events.push((
                at,
                PmuEvent::Req {
                    table,
                    tag,
                    key,
                    at,
                },
            ));
        }
    }
    #[inline]
    pub(super) fn fill(&mut self, pmu: usize, now: Cycle, m: &MissRequest<N>, action: Match) {
        if let Some(c) = self.cluster.as_deref_mut() {
            c.fill(now, m, action);
        }
        if pmu == self.pmu {
            let (table, tag, key) = (m.table, m.tag, m.key);
            self.events.push((
                now,
                PmuEvent::Fill {
                    table,
                    tag,
                    key,
                    action,
                },
            ));
        }
    }
    /// The cluster recorder, if this records the whole cluster.
    #[inline]
    pub(super) fn cl(&mut self) -> Option<&mut super::record_cluster::ClusterLog<N>> {
        self.cluster.as_deref_mut()
    }
    #[inline]
    pub(super) fn miss_taken(&mut self, pmu: usize, now: Cycle) {
        if pmu == self.pmu {
            self.events.push((now, PmuEvent::MissTaken));
        }
    }
    #[inline]
    pub(super) fn rsp(&mut self, pmu: usize, now: Cycle, r: &Response) {
        if let Some(c) = self.cluster.as_deref_mut() {
            c.rsp(pmu, now, r);
        }
        if pmu == self.pmu {
            self.events.push((now, PmuEvent::Rsp(*r)));
        }
    }

    /// The harness stimulus, `rows` rows from cycle 0 (tags masked to
    /// `tag_bits`, keys wider than the harness's 8 words refused), and the
    /// responses the simulator's PMU gave, per row, for checking a replay.
    /// A stretch of more than `max_gap` cycles without any event is cut to
    /// `max_gap` rows: with no input a PMU is quiet after draining its
    /// queues, so the cut cycles change nothing (choose `max_gap` above
    /// `q_r * ii + tau + q_p`; a replay checked against the responses shows it).
    #[allow(clippy::type_complexity)]
    pub fn stimulus(
        &self,
        rows: usize,
        tag_bits: u32,
        max_gap: Cycle,
    ) -> Result<(Vec<PmuIn>, Vec<Option<Response>>), String> {
        let tag = |t: u64| {
            if tag_bits >= 64 {
                t
            } else {
                t & ((1u64 << tag_bits) - 1)
            }
        };
        let key = |k: &Key<N>| -> Result<Key, String> {
            let mut out = Key::default();
            for (i, &w) in k.0.iter().enumerate() {
                match out.0.get_mut(i) {
                    Some(o) => *o = w,
                    None if w == 0 => {}
                    None => return Err(format!("key wider than {MAX_FIELDS} words")),
                }
            }
            Ok(out)
        };
        let rsp_tag = |r: &Response| -> Response {
            match *r {
                Response::Hit {
                    table,
                    tag: t,
                    action,
                    compared,
                } => Response::Hit {
                    table,
                    tag: tag(t),
                    action,
                    compared,
                },
                Response::Miss {
                    table,
                    tag: t,
                    compared,
                } => Response::Miss {
                    table,
                    tag: tag(t),
                    compared,
                },
                Response::Fill {
                    table,
                    tag: t,
                    action,
                } => Response::Fill {
                    table,
                    tag: tag(t),
                    action,
                },
                // (The RTL has no shed gate: a recording with one is refused.)
                Response::Shed { table, tag: t } => Response::Shed { table, tag: tag(t) },
            }
        };
        let idle = PmuIn {
            rsp_ready: true,
            ..PmuIn::default()
        };
        let mut stim = vec![idle; rows];
        let mut rsps = vec![None; rows];
        // Requests are offered the cycle before they are usable.
        let cycle = |c: Cycle, e: &PmuEvent<N>| match e {
            PmuEvent::Req { at, .. } => at.checked_sub(1).ok_or("request usable at cycle 0"),
            _ => Ok(c),
        };
        let mut order = Vec::with_capacity(self.events.len());
        for (i, (c, e)) in self.events.iter().enumerate() {
            order.push((cycle(*c, e)?, i));
        }
        order.sort_unstable();
        let (mut last, mut row) = (0, 0usize);
        for &(c0, i) in &order {
            row += (c0 - last).min(max_gap) as usize;
            last = c0;
            let (c, e) = (row, &self.events[i].1);
            if c >= rows {
                break;
            }
            let row = &mut stim[c];
            let clash = |what: &str| Err(format!("cycle {c}: two {what} for PMU {}", self.pmu));
            match e {
                PmuEvent::Ctl { op, tbl, next_v } => {
                    if row.ctl_op != 0 {
                        return clash("control operations");
                    }
                    (row.ctl_op, row.ctl_tbl, row.ctl_next_v) = (*op, *tbl, *next_v);
                }
                PmuEvent::Req {
                    table,
                    tag: t,
                    key: k,
                    ..
                } => {
                    if row.req.is_some() {
                        return clash("requests");
                    }
                    row.req = Some((*table, tag(*t), key(k)?));
                }
                PmuEvent::Fill {
                    table,
                    tag: t,
                    key: k,
                    action,
                } => {
                    if row.fill.is_some() {
                        return clash("fills");
                    }
                    row.fill = Some((*table, tag(*t), key(k)?, *action));
                }
                PmuEvent::MissTaken => row.mq_ready = true,
                PmuEvent::Rsp(r) => rsps[c] = Some(rsp_tag(r)),
            }
        }
        Ok((stim, rsps))
    }
}

impl<const N: usize> Simulator<N> {
    /// Records PMU `pmu`'s inputs from now on (before the first cycle: the
    /// recording starts from the PMU's reset state plus its association).
    pub fn record_pmu(&mut self, pmu: usize) -> Result<(), SimError> {
        if pmu >= self.pmus.len() || self.now != 0 {
            return err(format!(
                "record_pmu: PMU {pmu} of {} before cycle 0 (now {})",
                self.pmus.len(),
                self.now
            ));
        }
        if self.updates.is_some() {
            // Invalidations by rule updates are not inputs the RTL PMU has.
            return err("record_pmu: a run with rule updates cannot be recorded".to_string());
        }
        if self.shed_first | self.shed_all != 0 {
            return err("record_pmu: a run with a shed gate (defence.shed_*) cannot be recorded".to_string());
        }
        let mut r = PmuRecording {
            pmu,
            events: Vec::new(),
            cluster: None,
        };
        match self.pmus[pmu].state() {
            State::Free => {}
            State::Associated { table } => r.ctl(pmu, 0, 1, table, true),
            State::Transient { .. } => return err("record_pmu: PMU is transient".to_string()),
        }
        self.rec = Some(Box::new(r));
        Ok(())
    }

    /// The recording so far (and stops recording).
    pub fn take_recording(&mut self) -> Option<PmuRecording<N>> {
        self.rec.take().map(|b| *b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::harness::run_pmu;

    /// Records PMU `pmu` of the default scenario for `cycles` cycles.
    fn recorded(pmu: usize, cycles: Cycle) -> (Config, PmuRecording<MAX_FIELDS>) {
        let c = Config {
            duration_ns: 1e6,
            ..Config::default()
        };
        let mut s = Simulator::new(c.clone()).unwrap();
        s.record_pmu(pmu).unwrap();
        s.run_until(cycles);
        (c, s.take_recording().unwrap())
    }

    #[test]
    fn a_replayed_recording_gives_the_simulators_responses_on_the_same_cycles() {
        let cycles = 20_000;
        let (c, rec) = recorded(0, 250_000);
        let (stim, want) = rec.stimulus(cycles, 16, 48).unwrap();
        let reqs = stim.iter().filter(|i| i.req.is_some()).count();
        let fills = stim.iter().filter(|i| i.fill.is_some()).count();
        let taken = stim.iter().filter(|i| i.mq_ready).count();
        assert!(
            reqs > 300 && fills > 50 && taken >= fills,
            "{reqs} {fills} {taken}"
        );
        let out = run_pmu(&c.pmus, 32 * MAX_FIELDS as u32, &stim).unwrap();
        let mut hits = 0;
        for (cyc, (o, w)) in out.iter().zip(&want).enumerate() {
            assert!(
                o.req_ready || stim[cyc].req.is_none(),
                "cycle {cyc}: request refused"
            );
            assert_eq!(o.rsp, *w, "cycle {cyc}");
            hits += matches!(w, Some(Response::Hit { .. })) as usize;
        }
        assert!(hits > 10);
    }

    #[test]
    fn recording_changes_nothing_and_only_one_pmu_is_recorded() {
        let c = Config {
            duration_ns: 50_000.0,
            ..Config::default()
        };
        let mut a = Simulator::new(c.clone()).unwrap();
        let mut b = Simulator::new(c).unwrap();
        b.record_pmu(3).unwrap();
        a.run_until(10_000);
        b.run_until(10_000);
        assert_eq!(format!("{:?}", a.totals()), format!("{:?}", b.totals()));
        let r = b.take_recording().unwrap();
        assert_eq!(r.pmu, 3);
        assert!(r.events.len() > 10);
        assert!(
            b.record_pmu(0).is_err(),
            "recording starts before the first cycle"
        );
    }
}

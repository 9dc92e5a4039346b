//! What the embedding (the Python binding, the CLI, tests) reads and
//! changes between runs: clocks, per-window counters, PMU assignment,
//! summaries, invariants and queue depths.

use super::*;

impl<const N: usize> Simulator<N> {
    pub fn now(&self) -> Cycle {
        self.now
    }
    pub fn now_ns(&self) -> f64 {
        self.now as f64 * self.clock.ps() / 1000.0
    }
    pub fn cycle_ns(&self) -> f64 {
        self.clock.ps() / 1000.0
    }
    pub fn table_names(&self) -> Vec<String> {
        self.tables.iter().map(|t| t.name.clone()).collect()
    }
    /// Keys (table lookups) completed so far.
    pub fn keys_done(&self) -> u64 {
        self.keys_done
    }

    /// Completed window rows since the last call.
    pub fn take_windows(&mut self) -> Vec<WindowRow> {
        std::mem::take(&mut self.rows)
    }
    /// Completed routing counts since the last call.
    pub fn take_edges(&mut self) -> Vec<EdgeRow> {
        std::mem::take(&mut self.edge_rows)
    }
    pub fn window_cycles(&self) -> Cycle {
        self.window
    }

    /// New shares of arriving PHVs entering each table (by name), from now
    /// on: the traffic mix shifts while the pipeline runs (a scenario's
    /// `[[mix]]`). A routed simulator's routes name their first tables.
    pub fn set_entry(&mut self, shares: &[(String, f64)]) -> Result<(), SimError> {
        if self.routes.is_some() {
            return err("set_entry: a routed simulator's traffic names its entry tables");
        }
        let mut entry = Vec::with_capacity(shares.len());
        for (name, s) in shares {
            let Some(t) = self.tables.iter().position(|t| &t.name == name) else {
                return err(format!("set_entry: no table named {name:?}"));
            };
            entry.push((t as u16, *s));
        }
        self.cfg.set_entry(&entry).map_err(|e| SimError(format!("set_entry: {e}")))
    }

    /// Gives `table` exactly the PMUs `pmus`. PMUs it loses drain (transient)
    /// and become free; PMUs it gains join at once if free, or after draining
    /// from their current table. Only the affected lookup-table entries change.
    pub fn assign(&mut self, table: &str, pmus: &[u32]) -> Result<(), SimError> {
        let Some(ti) = self.tables.iter().position(|t| t.name == table) else {
            return err(format!("assign: no table named {table:?}"));
        };
        let t16 = ti as u16;
        for &p in pmus {
            if p as usize >= self.pmus.len() {
                return err(format!(
                    "assign: PMU {p} does not exist (pmus.count = {})",
                    self.pmus.len()
                ));
            }
        }
        let want: Vec<u16> = pmus.iter().map(|&p| p as u16).collect();
        self.draining = true;
        self.pmu_wake.fill(0);
        self.pmu_min_wake = 0;
        self.pmu_active = super::build::active_all(self.pmus.len());
        // Leaving: members not wanted, and pending joins not wanted.
        for i in 0..self.pmus.len() {
            let p = i as u16;
            if want.contains(&p) {
                continue;
            }
            match self.pmus[i].state() {
                State::Associated { table } if table == t16 => {
                    self.remove_member(ti, p);
                    self.pmus[i].leave(None);
                    if let Some(r) = self.rec.as_deref_mut() { r.ctl(i, self.now, 2, 0, false) }
                }
                State::Transient {
                    table,
                    next: Some(n),
                } if n == t16 => {
                    self.pmus[i].leave(None);
                    if let Some(r) = self.rec.as_deref_mut() { r.ctl(i, self.now, 2, 0, false) }
                    let _ = table;
                }
                _ => {}
            }
        }
        // Joining.
        for &p in &want {
            let i = p as usize;
            match self.pmus[i].state() {
                State::Free => {
                    self.pmus[i].associate(t16);
                    if let Some(r) = self.rec.as_deref_mut() { r.ctl(i, self.now, 1, t16, true) }
                    self.join_member(ti, p);
                }
                State::Associated { table } if table == t16 => {}
                State::Associated { table } => {
                    self.remove_member(table as usize, p);
                    self.pmus[i].leave(Some(t16));
                    if let Some(r) = self.rec.as_deref_mut() { r.ctl(i, self.now, 2, t16, true) }
                }
                State::Transient { .. } => {
                    self.pmus[i].leave(Some(t16));
                    if let Some(r) = self.rec.as_deref_mut() { r.ctl(i, self.now, 2, t16, true) }
                }
            }
        }
        Ok(())
    }

    fn remove_member(&mut self, ti: usize, p: u16) {
        let t = &mut self.tables[ti];
        t.members.retain(|&m| m != p);
        t.vmu.remove_pmu(p);
    }

    /// (id, state, table name, channel) of every PMU.
    pub fn pmu_states(&self) -> Vec<(u32, &'static str, Option<String>, u32)> {
        self.pmus
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let (s, t) = match p.state() {
                    State::Free => ("free", None),
                    State::Associated { table } => ("associated", Some(table)),
                    State::Transient { table, .. } => ("transient", Some(table)),
                };
                (
                    i as u32,
                    s,
                    t.map(|t| self.tables[t as usize].name.clone()),
                    self.net.channel(i) as u32,
                )
            })
            .collect()
    }

    /// Totals per table so far (closed windows plus the open one).
    pub fn totals(&self) -> Vec<Counters> {
        self.tables
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut c = t.total.clone();
                let mut w = t.win.clone();
                w.hbm_bytes = self.elu.bytes[i] - t.hbm_seen;
                w.reordered = t.vmu.reordered - t.reordered_seen;
                c.merge(&w);
                c
            })
            .collect()
    }

    /// The summary of issue #4: per table hit rate, latency, HBM bandwidth,
    /// offered load and throughput over the time simulated so far.
    pub fn summary(&self) -> Vec<(String, TableSummary)> {
        let ns = self.now_ns().max(1e-9);
        let cyc = self.cycle_ns();
        self.totals()
            .into_iter()
            .zip(&self.tables)
            .map(|(c, t)| {
                let looked = c.hits + c.misses;
                (
                    t.name.clone(),
                    TableSummary {
                        hit_rate: if looked > 0 {
                            c.hits as f64 / looked as f64
                        } else {
                            0.0
                        },
                        mean_latency_ns: if c.lat.total() > 0 {
                            c.lat_sum as f64 / c.lat.total() as f64 * cyc
                        } else {
                            0.0
                        },
                        mean_sojourn_ns: if c.processed > 0 {
                            c.sojourn_sum as f64 / c.processed as f64 * cyc
                        } else {
                            0.0
                        },
                        p99_latency_ns: c.lat.quantile(0.99) * cyc,
                        hbm_gbps: c.hbm_bytes as f64 / ns,
                        offered_mpps: c.arrived as f64 / ns * 1000.0,
                        throughput_mpps: c.processed as f64 / ns * 1000.0,
                        keys: c.processed,
                        drops: c.drops,
                        misses: c.misses,
                        hits: c.hits,
                    },
                )
            })
            .collect()
    }

    /// With an `[attack]`: the legitimate PHVs' figures and the attack's,
    /// in that order (`None` without one). Throughput is PHVs exited per
    /// µs of the time simulated so far; latency is arrival → exit.
    pub fn class_summary(&self) -> Option<[ClassSummary; 2]> {
        let l = self.legit.as_deref()?;
        let ns = self.now_ns().max(1e-9);
        let cyc = self.cycle_ns();
        Some([0, 1].map(|c| {
            let looked = l.hits[c] + l.misses[c];
            ClassSummary {
                arrived: l.arrived[c],
                dropped: l.dropped[c],
                shed: l.shed[c],
                exited: l.exited[c],
                hits: l.hits[c],
                misses: l.misses[c],
                hit_rate: if looked > 0 { l.hits[c] as f64 / looked as f64 } else { 0.0 },
                throughput_mpps: l.exited[c] as f64 / ns * 1000.0,
                mean_latency_ns: if l.exited[c] > 0 { l.lat_sum[c] as f64 / l.exited[c] as f64 * cyc } else { 0.0 },
                p99_latency_ns: l.lat[c].quantile(0.99) * cyc,
            }
        }))
    }

    /// Defence counters: fills the PMUs' admission refused, per table the
    /// misses the ELU's rate limit held back (cycles at the bus), and per
    /// table the PHVs dropped because the shed gate dropped their miss.
    pub fn defence_counters(&self) -> (u64, Vec<u64>, Vec<u64>) {
        let refused = self.pmus.iter().filter_map(|p| p.admit.as_ref()).map(|d| d.refused).sum();
        let held = self.limit.as_ref().map_or_else(|| vec![0; self.tables.len()], |l| l.held.clone());
        (refused, held, self.shed.clone())
    }

    /// Per-key latency histogram of a table: (bucket lower edges in ns, counts).
    pub fn latency_histogram(&self, table: &str) -> Result<(Vec<f64>, Vec<u64>), SimError> {
        let Some(i) = self.tables.iter().position(|t| t.name == table) else {
            return err(format!("no table named {table:?}"));
        };
        let c = &self.totals()[i];
        let last = c
            .lat
            .counts
            .iter()
            .rposition(|&x| x > 0)
            .map_or(0, |x| x + 1);
        let edges = (0..=last)
            .map(|b| LogHist::lower(b) as f64 * self.cycle_ns())
            .collect();
        Ok((edges, c.lat.counts[..last].to_vec()))
    }

    /// Checks that every PHV left exactly once with the oracle's action.
    pub fn check_invariants(&self) -> Invariants {
        let in_flight: u64 = self
            .tables
            .iter()
            .map(|t| (t.input.len() + t.vmu.occupancy()) as u64)
            .sum();
        let exited: u64 = self.exited_bits.iter().map(|w| w.count_ones() as u64).sum();
        Invariants {
            created: self.created,
            exited,
            dropped: self.dropped,
            in_flight,
            lost: self.created as i64 - exited as i64 - self.dropped as i64 - in_flight as i64,
            duplicates: self.duplicates,
            wrong_action: self.wrong_action,
        }
    }

    /// PHVs in flight (in a table's input FIFO or PHV buffer) per table, by
    /// name; tables holding none are left out.
    pub fn in_flight_by_table(&self) -> Vec<(String, u64)> {
        self.tables
            .iter()
            .map(|t| (t.name.clone(), (t.input.len() + t.vmu.occupancy()) as u64))
            .filter(|x| x.1 > 0)
            .collect()
    }

    /// Per table, the PHVs it released with the default action (no rule
    /// matched) so far.
    pub fn default_answers(&self) -> Vec<u64> {
        self.tables.iter().map(|t| t.defaults).collect()
    }

    /// Per table, the bytes its ELU structure occupies in off-chip memory
    /// (as built with the config's `elu.build` parameters).
    pub fn elu_memory_bytes(&self) -> Vec<u64> {
        self.walkers.iter().map(|w| w.memory_bytes()).collect()
    }

    /// Tables that hold no PMU now: the VMU sends every key of theirs to
    /// the ELU (no cache), as when a pool has fewer PMUs than tables.
    pub fn tables_without_pmus(&self) -> Vec<String> {
        self.tables.iter().filter(|t| t.members.is_empty()).map(|t| t.name.clone()).collect()
    }

    /// Ends the run: stops the arrivals (any not yet due are never
    /// created) and simulates on until every PHV has exited or been
    /// dropped, for at most `config.drain_ns`. A run is over only when
    /// drained: [`Invariants::ok`] is false while PHVs are in flight.
    /// Counters and windows go on as in any run (read the summary first if
    /// it must cover only the run's own time). Further arrivals are
    /// refused ([`Simulator::push_arrivals`]).
    pub fn drain(&mut self) -> Drain {
        self.source = Source::Other(Box::new(std::iter::empty()));
        self.next_arrival = None;
        self.ended = true;
        let start = self.now;
        let limit = start + (self.config.drain_ns.max(0.0) * 1000.0 / self.clock.ps()).ceil() as Cycle;
        // Checked every microsecond (the clock skips idle cycles anyway).
        let step = ((1000.0 / self.clock.ps()).round() as Cycle).max(1);
        while self.check_invariants().in_flight > 0 && self.now < limit {
            self.run_until((self.now + step).min(limit));
        }
        let in_flight = self.in_flight_by_table();
        Drain {
            drained: in_flight.is_empty(),
            ns: (self.now - start) as f64 * self.clock.ps() / 1000.0,
            in_flight,
        }
    }

    /// Occupancy of the queues, for inspection.
    pub fn queue_depths(&self) -> QueueDepths {
        QueueDepths {
            input: self.tables.iter().map(|t| t.input.len()).collect(),
            phv_fifo: self.tables.iter().map(|t| t.vmu.occupancy()).collect(),
            q_r: self.pmus.iter().map(|p| p.q_r_len()).collect(),
            q_m: self.pmus.iter().map(|p| p.q_m_len()).collect(),
            miss_queue: self.elu.miss_queue_len(),
            orb: self.elu.orb_len(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct TableSummary {
    pub hit_rate: f64,
    /// Per-key match latency (request → answer).
    pub mean_latency_ns: f64,
    /// Time in the table (arrival → release, in order).
    pub mean_sojourn_ns: f64,
    pub p99_latency_ns: f64,
    pub hbm_gbps: f64,
    pub offered_mpps: f64,
    pub throughput_mpps: f64,
    pub keys: u64,
    pub drops: u64,
    pub hits: u64,
    pub misses: u64,
}

/// One class of PHVs (legitimate or attack) over the run so far.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassSummary {
    pub arrived: u64,
    /// Dropped at a full entry FIFO or shed before the ELU.
    pub dropped: u64,
    /// Of `dropped`, those whose miss the shed gate dropped.
    pub shed: u64,
    pub exited: u64,
    /// Table visits answered from a CAM, and the others.
    pub hits: u64,
    pub misses: u64,
    pub hit_rate: f64,
    pub throughput_mpps: f64,
    /// Arrival → exit.
    pub mean_latency_ns: f64,
    pub p99_latency_ns: f64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invariants {
    pub created: u64,
    pub exited: u64,
    pub dropped: u64,
    pub in_flight: u64,
    /// created − exited − dropped − in flight: must be 0.
    pub lost: i64,
    pub duplicates: u64,
    pub wrong_action: u64,
}

impl Invariants {
    /// The run ended well: every PHV left exactly once (or was dropped at
    /// the entry) with the oracle's answer, and none is still in flight
    /// (a run must end [`Simulator::drain`]ed).
    pub fn ok(&self) -> bool {
        self.ok_so_far() && self.in_flight == 0
    }
    /// Nothing went wrong yet: no PHV lost, duplicated or answered wrong;
    /// PHVs may still be in flight (a check in the middle of a run).
    pub fn ok_so_far(&self) -> bool {
        self.lost == 0 && self.duplicates == 0 && self.wrong_action == 0
    }
}

/// What [`Simulator::drain`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct Drain {
    /// Every PHV exited or was dropped within the limit.
    pub drained: bool,
    /// Simulated time the drain ran, ns (checked every µs: the time to the
    /// last exit, rounded up to a µs; the limit when not drained).
    pub ns: f64,
    /// PHVs still in flight per table (empty when drained): where they are
    /// stuck, or queued behind a bottleneck too slow to clear them.
    pub in_flight: Vec<(String, u64)>,
}

#[derive(Clone, Debug)]
pub struct QueueDepths {
    pub input: Vec<usize>,
    pub phv_fifo: Vec<usize>,
    pub q_r: Vec<usize>,
    pub q_m: Vec<usize>,
    pub miss_queue: usize,
    pub orb: usize,
}

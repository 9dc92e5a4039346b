//! Per-packet consistency across tables: a PHV sees one version of the
//! whole program (two-phase consistent updates with version tags).
//!
//! With `[update_engine] consistency = "program"` an update **transaction**
//! (a schedule item's operations, a [`Simulator::request_transaction`], a
//! churn event over `churn_tables`) is one program version. The engine
//! takes whole transactions (up to `max_batch` operations) as one batch:
//! 1. **prepare**: every table the batch touches builds its next structure
//!    beside the one in force (the decision tree too: the old tree must stay
//!    for the PHVs already stamped, so the new one is a copy updated in
//!    place), charged as in per-table mode; the batch is ready when the
//!    slowest table is;
//! 2. **flip**: the ingress stamp moves to the new version (PHVs created
//!    from now on carry it). Each PHV carries its version as a tag that
//!    every lookup appends to its key (a spare key word): the ELU walks the
//!    structure the tag names, and the PMUs' CAM entries are tagged with it
//!    too, so a cached answer only serves PHVs of its version. At the flip
//!    each PMU of a touched table invalidates the keys the batch changed
//!    (exact, one CAM cycle each; or flushes) and marks every other entry
//!    valid for any version in one bulk write of an "any version" bit (a
//!    don't-care on the tag field: their answer is the same in both), so
//!    PHVs of either version keep hitting them. Entries filled after the
//!    flip carry the new tag only; a reply for an old-tag PHV after the
//!    flip is not cached. This is what hardware would do: invalidating
//!    everything at the flip costs every flow a miss, and an untagged
//!    cache would serve new answers to old PHVs (or old to new); a tag
//!    field plus one bit per entry and two bulk writes cost little.
//! 3. **retire**: once every PHV stamped before the flip has left, the old
//!    structures are freed and the next batch may start (one tag bit: two
//!    versions live at most).
//!
//! The versioned oracle checks each answer against the PHV's stamped
//! version, and (in either mode, whenever two or more tables are
//! updatable) that a PHV's answers at all its tables come from one program
//! version: `mixed_version_phvs` counts those no single version explains.
//! Costs measured: request → flip → retire latency, structure bytes held
//! beside the ones in force (replicas and retained old versions), and the
//! old PHVs' extra misses (`uncached_fills`).

use super::*;

/// The tag of a CAM entry valid for every live version (its "any version"
/// bit set): an entry kept at a flip, its answer the same in both.
const ANY_VERSION: u32 = u32::MAX;

/// How updates become visible to PHVs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Consistency {
    /// Each table commits its own batches: a PHV's answer at a table is of
    /// a version in force during its lookup there, but two tables may
    /// answer it from different transactions.
    #[default]
    Table,
    /// A PHV sees one version of every table (two-phase, version tags).
    Program,
}

/// A table's previous version, kept for PHVs stamped before the flip.
pub(super) struct Old<const N: usize> {
    pub(super) inner: Inner<N>,
    pub(super) ids: Vec<u32>,
    pub(super) default: Match,
    pub(super) tag: u32,
}

impl<const N: usize> Old<N> {
    #[inline]
    pub(super) fn map(&self, m: Match) -> Match {
        match m {
            Some(p) => Some(self.ids[p as usize]),
            None => self.default,
        }
    }
}

/// The program-wide version state.
#[derive(Default)]
pub(super) struct Prog {
    /// The key word holding the version tag (program consistency only).
    pub(super) tagword: Option<usize>,
    /// The version stamped at ingress now, and the one before the last flip.
    version: u64,
    prev_version: u64,
    /// PHVs with a smaller id were stamped before the last flip.
    boundary: u64,
    /// Of those, how many are still in flight.
    pub(super) old_inflight: u64,
    /// The old structures are kept (flipped, not yet retired).
    pub(super) retained: bool,
    /// A batch being prepared: (ready cycle, its last transaction).
    pub(super) building: Option<(Cycle, u64)>,
    /// Request cycles of the operations of the last flip (for request →
    /// retire), and when the flip's PMUs were consistent.
    flip_ops: Vec<Cycle>,
    flip_done: Cycle,
}

impl Prog {
    /// The program version PHV `phv` was stamped with.
    #[inline]
    pub(super) fn version_of(&self, phv: u64) -> u64 {
        if self.retained && phv < self.boundary {
            self.prev_version
        } else {
            self.version
        }
    }
}

/// Half-open version intervals `[lo, hi)`.
type Spans = Vec<(u64, u64)>;

fn intersect(a: &Spans, b: &Spans) -> Spans {
    let mut out = Vec::new();
    for &(x0, x1) in a {
        for &(y0, y1) in b {
            let (lo, hi) = (x0.max(y0), x1.min(y1));
            if lo < hi {
                out.push((lo, hi));
            }
        }
    }
    out
}

impl<const N: usize> Updates<N> {
    /// Extra structure bytes change by `delta` at `now`.
    pub(super) fn mem_add(&mut self, now: Cycle, delta: i64) {
        self.extra_integral += self.extra_now as f64 * now.saturating_sub(self.mem_last) as f64;
        self.mem_last = self.mem_last.max(now);
        self.extra_now = (self.extra_now as i64 + delta).max(0) as u64;
        self.stats.extra_bytes_peak = self.stats.extra_bytes_peak.max(self.extra_now);
    }

    /// The first transaction not yet in force at table `t` (its answers to
    /// later versions are not known yet).
    fn horizon(&self, t: u16) -> u64 {
        let Some(tu) = self.tables[t as usize].as_ref() else {
            return u64::MAX;
        };
        let b = tu
            .building
            .as_ref()
            .and_then(|b| b.ops.first().map(|o| o.1));
        let p = tu.pending.front().map(|o| o.1);
        b.unwrap_or(u64::MAX).min(p.unwrap_or(u64::MAX))
    }

    /// Is there one program version whose answers are all of `answers`
    /// ((table, flow, answer) of one PHV)? Some(true): none (mixed);
    /// None: not known yet (a version that could explain them is open).
    fn mixed(&self, answers: &[(u16, u32, Match)]) -> Option<bool> {
        // Versions requested so far: the PHV's answers come from these.
        let last = self.next_txn - 1;
        let known = answers
            .iter()
            .map(|a| self.horizon(a.0).saturating_sub(1))
            .min()
            .unwrap_or(last)
            .min(last);
        let mut cand: Spans = vec![(0, known + 1)];
        for &(t, f, a) in answers {
            let Some(tu) = self.tables[t as usize].as_ref() else {
                continue;
            };
            let h = &tu.vhist[f as usize];
            let s: Spans = h
                .iter()
                .enumerate()
                .filter(|(_, e)| e.1 == a)
                .map(|(i, e)| (e.0, h.get(i + 1).map_or(u64::MAX, |n| n.0)))
                .collect();
            cand = intersect(&cand, &s);
            if cand.is_empty() {
                break;
            }
        }
        if !cand.is_empty() {
            Some(false)
        } else if last <= known {
            Some(true)
        } else {
            None
        }
    }

    fn count_checked(&mut self, answers: Vec<(u16, u32, Match)>) {
        match self.mixed(&answers) {
            Some(m) => {
                self.stats.checked_phvs += 1;
                self.stats.mixed_version_phvs += m as u64;
            }
            None => self.deferred.push(answers),
        }
    }

    /// The version tag PHV `phv` looks up table `t` with (program
    /// consistency; None: the table is not updatable, its keys' tag word
    /// stays as built).
    #[inline]
    pub(in crate::sim) fn tag(&self, t: usize, phv: u64) -> Option<u32> {
        let tu = self.tables[t].as_ref()?;
        Some(match tu.old_tag {
            Some(o) if phv < self.prog.boundary => o,
            _ => tu.tag,
        })
    }

    /// The key word that holds [`Updates::tag`], if any.
    pub(in crate::sim) fn tag_word(&self) -> Option<usize> {
        self.prog.tagword
    }
}

impl<const N: usize> Simulator<N> {
    /// A PHV left the program: the old version may retire; its answers are
    /// checked against one program version.
    pub(in crate::sim) fn phv_exit(&mut self, phv: u64) {
        let Some(u) = self.updates.as_deref_mut() else {
            return;
        };
        if u.prog.retained && phv < u.prog.boundary {
            u.prog.old_inflight -= 1;
            if u.prog.old_inflight == 0 {
                u.next_due = 0; // retire at the next cycle
            }
        }
        if u.xcheck {
            if let Some(a) = u.answers.remove(&phv) {
                if a.len() >= 2 {
                    u.count_checked(a);
                }
            }
        }
    }

    /// Checks again the PHVs whose versions were open (after a commit).
    pub(super) fn recheck_deferred(&mut self) {
        let u = self.updates.as_deref_mut().unwrap();
        if u.deferred.is_empty() {
            return;
        }
        for a in std::mem::take(&mut u.deferred) {
            u.count_checked(a);
        }
    }

    /// Program consistency, at `now`: flips a prepared batch, retires the
    /// old version once its PHVs are out.
    pub(super) fn program_step(&mut self, now: Cycle) {
        let u = self.updates.as_deref().unwrap();
        if u.prog.building.is_some_and(|b| b.0 <= now) {
            self.flip(now);
        }
        let u = self.updates.as_deref().unwrap();
        if u.prog.retained && u.prog.old_inflight == 0 {
            self.retire(now);
        }
    }

    /// Starts preparing the next batch: whole transactions in order, up to
    /// `max_batch` operations (at least one transaction).
    pub(super) fn program_start(&mut self, now: Cycle) {
        loop {
            let u = self.updates.as_deref().unwrap();
            if u.prog.building.is_some() || u.prog.retained {
                return;
            }
            let mut per_txn: BTreeMap<u64, usize> = BTreeMap::new();
            for tu in u.tables.iter().flatten() {
                for o in &tu.pending {
                    *per_txn.entry(o.1).or_default() += 1;
                }
            }
            let Some(&first) = per_txn.keys().next() else {
                return;
            };
            let (mut upto, mut n) = (first, 0usize);
            for (&txn, &k) in &per_txn {
                if n > 0 && n + k > u.cfg.max_batch.max(1) as usize {
                    break;
                }
                n += k;
                upto = txn;
            }
            let mut done = None;
            for t in 0..self.tables.len() {
                let touched = self.updates.as_deref().unwrap().tables[t]
                    .as_ref()
                    .is_some_and(|tu| tu.pending.front().is_some_and(|o| o.1 <= upto));
                if touched && self.start_build(now, t, upto) {
                    let b = self.updates.as_deref().unwrap().tables[t]
                        .as_ref()
                        .unwrap()
                        .building
                        .as_ref()
                        .unwrap()
                        .done;
                    done = Some(done.map_or(b, |d: Cycle| d.max(b)));
                }
            }
            if let Some(d) = done {
                self.updates.as_deref_mut().unwrap().prog.building = Some((d, upto));
                return;
            }
            // Every operation refused: try the next transactions.
        }
    }

    /// The flip: every touched table's new structure is in force for PHVs
    /// stamped from now on; the old ones stay for the PHVs in flight.
    fn flip(&mut self, now: Cycle) {
        let (_, upto) = self
            .updates
            .as_deref_mut()
            .unwrap()
            .prog
            .building
            .take()
            .unwrap();
        let tag = upto as u32;
        let cycle_ns = self.clock.ps() / 1000.0;
        let mut worst = 0;
        let mut reqs = Vec::new();
        for t in 0..self.tables.len() {
            let building = self.updates.as_deref().unwrap().tables[t]
                .as_ref()
                .is_some_and(|tu| tu.building.is_some());
            if building {
                let (stall, r) = self.flip_table(now, t, tag);
                worst = worst.max(stall);
                reqs.extend(r);
            }
        }
        let in_flight: u64 = self
            .tables
            .iter()
            .map(|t| (t.input.len() + t.vmu.occupancy()) as u64)
            .sum();
        let created = self.created;
        let u = self.updates.as_deref_mut().unwrap();
        let p = &mut u.prog;
        p.prev_version = p.version;
        p.version = upto;
        p.boundary = created;
        p.old_inflight = in_flight;
        p.retained = true;
        u.stats.flips += 1;
        for &req in &reqs {
            u.stats
                .latency_ns
                .push((now + worst - req) as f64 * cycle_ns);
        }
        u.stats.last_commit_ns = (now + worst) as f64;
        u.prog.flip_ops = reqs;
        u.prog.flip_done = now + worst;
        if in_flight == 0 {
            self.retire(now);
        }
        self.recheck_deferred();
    }

    /// Table `t`'s part of the flip; returns the PMUs' stall (cycles) and
    /// the request cycles of its operations.
    fn flip_table(&mut self, now: Cycle, t: usize, tag: u32) -> (Cycle, Vec<Cycle>) {
        let u = self.updates.as_deref_mut().unwrap();
        let mode = u.cfg.invalidate;
        let w = u.prog.tagword.unwrap();
        let tu = u.tables[t].as_mut().unwrap();
        let b = tu.building.take().unwrap();
        let old_default = tu.default;
        let old_tag = tu.tag;
        let old_bytes;
        {
            let mut live = tu.live.lock().unwrap();
            let l = &mut *live;
            old_bytes = inner_bytes(&l.inner);
            let inner = std::mem::replace(&mut l.inner, Inner::Built(b.replica.unwrap()));
            l.old = Some(Box::new(Old {
                inner,
                ids: std::mem::replace(&mut l.ids, b.ids.clone()),
                default: l.default,
                tag: l.tag,
            }));
            l.default = b.default;
            l.tag = tag;
        }
        tu.old_tag = Some(old_tag);
        tu.tag = tag;
        tu.old_bytes = old_bytes;
        tu.rules = b.rules;
        tu.ids = b.ids;
        tu.default = b.default;
        tu.txn_in_force = b.ops.last().map_or(tu.txn_in_force, |o| o.1);
        for &(f, txn, m) in &b.vchanges {
            tu.vhist[f as usize].push((txn, m));
        }
        u.stats.batches += 1;
        u.stats.committed += b.ops.len() as u64;
        u.mem_add(now, old_bytes as i64 - b.replica_bytes as i64);
        self.advance_oracle(now, t, &b.covers, b.default_changed, old_default);
        // The PMUs of the table: changed keys invalidated, the rest marked
        // valid for any version (one bulk write of that bit).
        let covers = &b.covers;
        let mut worst = 0;
        let mut invalidated = 0u64;
        for (pi, p) in self.pmus.iter_mut().enumerate() {
            if p.table() != Some(t as u16) {
                continue;
            }
            p.cam.set_any_tag(w, ANY_VERSION);
            let n = p.cam.invalidate_or_retag(
                |k, a| {
                    (k.0[w] != old_tag && k.0[w] != ANY_VERSION)
                        || match mode {
                            Invalidate::Exact => {
                                covers.iter().any(|r| r.matches(k))
                                    || (b.default_changed && a == old_default)
                            }
                            Invalidate::Flush => true,
                            Invalidate::None => false,
                        }
                },
                |k| k.0[w] = ANY_VERSION,
            );
            invalidated += n as u64;
            let stall = match mode {
                Invalidate::Exact => n as Cycle + 1,
                _ => 1,
            };
            p.block_until(now + stall);
            self.pmu_wake[pi] = 0;
            self.pmu_active[pi / 64] |= 1u64 << (pi % 64);
            self.pmu_min_wake = 0;
            worst = worst.max(stall);
        }
        self.updates.as_deref_mut().unwrap().stats.invalidated += invalidated;
        (worst, b.ops.iter().map(|o| o.0).collect())
    }

    /// Every PHV stamped before the flip has left: the old structures go.
    fn retire(&mut self, now: Cycle) {
        let cycle_ns = self.clock.ps() / 1000.0;
        let u = self.updates.as_deref_mut().unwrap();
        let mut freed = 0u64;
        for tu in u.tables.iter_mut().flatten() {
            if tu.old_tag.take().is_some() {
                tu.live.lock().unwrap().old = None;
                freed += tu.old_bytes;
                tu.old_bytes = 0;
            }
        }
        u.mem_add(now, -(freed as i64));
        u.prog.retained = false;
        let at = now.max(u.prog.flip_done);
        for req in std::mem::take(&mut u.prog.flip_ops) {
            u.stats.retire_latency_ns.push((at - req) as f64 * cycle_ns);
        }
    }
}

#[cfg(test)]
#[path = "xtable_tests.rs"]
mod tests;

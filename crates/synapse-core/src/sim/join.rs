//! How a PMU joins a table that already has PMUs (`vmu.join`).
//!
//! Adding a PMU to a table's ring moves about 1/P of the VMU's lookup-table
//! entries to it (§4.1, consistent hashing); the keys of those entries are
//! cached at their old owners. A **cold** join (the paper's) leaves them
//! there: each moved key misses once at the new PMU and is walked again by
//! the ELU. A **warm** join copies them first:
//! - each old owner reads out its cached entries of the moved slots, one
//!   per II_c of its search port (the CAM keeps each entry's lookup-table
//!   index beside the key, so selecting them is one match on that field),
//!   and serves no lookup meanwhile;
//! - the copies cross the PMU → ELU shared bus, one a cycle, in a burst
//!   that delays the misses queued behind it, and reach the new PMU's CAM
//!   through the ELU's fill path (one write a cycle);
//! - the new PMU serves its first request once the last copy is written;
//!   requests routed to it meanwhile wait in its Q_r, and then hit.
//!
//! At most the new PMU's capacity is copied, the most recently used first
//! (round robin over the old owners); the copies keep their recency order.
//! The old owners keep their copies (unreachable now, aged out by LRU as in
//! a cold join).

use super::*;
use config::Join;

impl<const N: usize> Simulator<N> {
    /// Puts PMU `p` (associated with table `ti`, its CAM empty) on the
    /// table's ring, warm or cold as `vmu.join` says.
    pub(in crate::sim) fn join_member(&mut self, ti: usize, p: u16) {
        if self.config.vmu.join == Join::Cold {
            self.tables[ti].vmu.add_pmu(p);
            self.tables[ti].members.push(p);
            return;
        }
        let moved = self.tables[ti].vmu.add_pmu_moves(p);
        self.tables[ti].members.push(p);
        self.warm_copy(ti, p, &moved);
    }

    fn warm_copy(&mut self, ti: usize, p: u16, moved: &[(u32, u16)]) {
        let now = self.now;
        // Previous owner of each lookup-table slot that moved (INVALID: not moved).
        let mut from = vec![INVALID; self.tables[ti].vmu.lut.len()];
        let mut sources: Vec<u16> = Vec::new();
        for &(i, o) in moved {
            from[i as usize] = o;
            if o != INVALID && o != p && !sources.contains(&o) {
                sources.push(o);
            }
        }
        sources.sort_unstable();
        // Per old owner, its cached entries of the slots it lost, most recent first.
        let vmu = &self.tables[ti].vmu;
        let mut lists: Vec<Vec<(Key<N>, Match)>> = Vec::with_capacity(sources.len());
        for &o in &sources {
            let pm = &self.pmus[o as usize];
            let live = matches!(pm.state(), State::Associated { table } if table as usize == ti);
            let l = if live {
                pm.cam.entries_by_recency().into_iter().filter(|(k, _)| from[vmu.index(k)] == o).collect()
            } else {
                Vec::new()
            };
            lists.push(l);
        }
        // The new PMU's capacity bounds the copy: round robin, most recent first.
        let cap = self.pmus[p as usize].cam.capacity() as usize;
        let mut taken = vec![0usize; lists.len()];
        let mut order: Vec<(Key<N>, Match)> = Vec::new();
        while order.len() < cap {
            let mut any = false;
            for (s, l) in lists.iter().enumerate() {
                if order.len() < cap && taken[s] < l.len() {
                    order.push(l[taken[s]]);
                    taken[s] += 1;
                    any = true;
                }
            }
            if !any {
                break;
            }
        }
        let n = order.len() as Cycle;
        if n == 0 {
            return;
        }
        // Old owners: their search port reads out what they send.
        let mut reads_done = now;
        for (s, &o) in sources.iter().enumerate() {
            if taken[s] == 0 {
                continue;
            }
            let pm = &mut self.pmus[o as usize];
            let until = now + taken[s] as Cycle * pm.t.ii;
            pm.block_until(until);
            reads_done = reads_done.max(until);
            self.touch_pmu(o as usize);
        }
        // The bus carries one copy a cycle, after what it already holds.
        let start = self.bus.reserve(now, 0, n);
        let last = (start + n).max(reads_done);
        // Written least recent first, so the most recent ends at the head.
        let np = &mut self.pmus[p as usize];
        for &(k, a) in order.iter().rev() {
            np.cam.insert(k, a);
        }
        np.block_until(last + 1);
        self.touch_pmu(p as usize);
        self.warm_joins += 1;
        self.warm_copied += n;
    }
}

//! Counters per table and per statistics window (default 10 µs, the
//! paper's Appendix C window), and a log-bucketed latency histogram.

use crate::hw::Cycle;

/// Histogram with 8 linear sub-buckets per power of two: exact below 16,
/// within 12.5 % above.
///
/// `counts` holds the buckets up to the highest one used (the rest are
/// zero): a window's histogram is a few hundred bytes, not the 4 KB of
/// all buckets a fresh one would zero at every window close. Equality and
/// `Debug` are those of all buckets.
#[derive(Clone)]
pub struct LogHist {
    pub counts: Vec<u64>,
}

impl PartialEq for LogHist {
    fn eq(&self, o: &LogHist) -> bool {
        let n = self.counts.len().max(o.counts.len());
        (0..n).all(|b| self.counts.get(b).unwrap_or(&0) == o.counts.get(b).unwrap_or(&0))
    }
}

impl std::fmt::Debug for LogHist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        struct All<'a>(&'a [u64]);
        impl std::fmt::Debug for All<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let zeros = std::iter::repeat(&0u64).take(BUCKETS.saturating_sub(self.0.len()));
                f.debug_list().entries(self.0.iter().chain(zeros)).finish()
            }
        }
        f.debug_struct("LogHist").field("counts", &All(&self.counts)).finish()
    }
}

const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;
const BUCKETS: usize = 8 * 62;

impl Default for LogHist {
    fn default() -> Self {
        LogHist { counts: Vec::new() }
    }
}

impl LogHist {
    #[inline]
    pub fn bucket(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let e = 63 - v.leading_zeros() as u64; // >= 3
        let sub = (v >> (e - SUB_BITS as u64)) & (SUB - 1);
        ((e - SUB_BITS as u64 + 1) * SUB + sub) as usize
    }
    /// Smallest value of bucket `b`.
    pub fn lower(b: usize) -> u64 {
        let b = b as u64;
        if b < SUB {
            return b;
        }
        let e = b / SUB + SUB_BITS as u64 - 1;
        let sub = b % SUB;
        (SUB + sub) << (e - SUB_BITS as u64)
    }
    #[inline]
    pub fn add(&mut self, v: u64) {
        let b = Self::bucket(v).min(BUCKETS - 1);
        if b >= self.counts.len() {
            self.grow(b + 1);
        }
        self.counts[b] += 1;
    }
    #[cold]
    fn grow(&mut self, n: usize) {
        // Latencies of a few hundred cycles: 64 buckets hold up to ~1,000.
        self.counts.resize(n.max(64).min(BUCKETS), 0);
    }
    pub fn merge(&mut self, o: &LogHist) {
        if o.counts.len() > self.counts.len() {
            self.counts.resize(o.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
    }
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
    /// The q-quantile, as the midpoint of its bucket (exact below 16).
    pub fn quantile(&self, q: f64) -> f64 {
        let n = self.total();
        if n == 0 {
            return 0.0;
        }
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut acc = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= rank {
                let lo = Self::lower(b) as f64;
                let hi = Self::lower(b + 1) as f64;
                return if hi - lo <= 1.0 {
                    lo
                } else {
                    (lo + hi - 1.0) / 2.0
                };
            }
        }
        0.0
    }
    pub fn clear(&mut self) {
        self.counts.iter_mut().for_each(|c| *c = 0);
    }
}

/// Counters of one table over one window (or the whole run).
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// PHVs offered to the table (including dropped ones).
    pub arrived: u64,
    /// PHVs that left the table with their action.
    pub processed: u64,
    pub hits: u64,
    pub misses: u64,
    pub elu_requests: u64,
    pub hbm_bytes: u64,
    /// Per-key match latency (request sent → answer back at the VMU),
    /// cycles: sum and histogram (one entry per answered key).
    pub lat_sum: u64,
    pub lat: LogHist,
    /// Sum of sojourn times in the table (arrival → release), cycles, over
    /// the processed PHVs; includes waiting behind older misses.
    pub sojourn_sum: u64,
    pub cam_compares: u64,
    /// Cycles the table could not move a PHV (full PHV buffer, interconnect
    /// conflict, full Q_r, full next stage).
    pub stalls: u64,
    /// PHVs dropped at the full ingress FIFO (counted, never silent).
    pub drops: u64,
    /// Largest PHV-buffer occupancy seen.
    pub fifo_max: u64,
    pub reordered: u64,
}

impl Counters {
    pub fn merge(&mut self, o: &Counters) {
        self.arrived += o.arrived;
        self.processed += o.processed;
        self.hits += o.hits;
        self.misses += o.misses;
        self.elu_requests += o.elu_requests;
        self.hbm_bytes += o.hbm_bytes;
        self.lat_sum += o.lat_sum;
        self.sojourn_sum += o.sojourn_sum;
        self.lat.merge(&o.lat);
        self.cam_compares += o.cam_compares;
        self.stalls += o.stalls;
        self.drops += o.drops;
        self.fifo_max = self.fifo_max.max(o.fifo_max);
        self.reordered += o.reordered;
    }
}

/// Legitimate (class 0) and attack (class 1) PHVs counted apart, when the
/// run has an `[attack]` (`workload/attack.rs`): attack PHVs are those of
/// flows from `legit_flows` on (the flow a PHV arrived as: a routed PHV's
/// `flow` is later its key index at a table, so its class is kept with its
/// arrival). Hits and misses count each table visit; latency is a PHV's
/// time from its arrival to its exit.
#[derive(Clone, Debug, Default)]
pub struct Classes {
    pub legit_flows: u32,
    /// The table attack PHVs enter (`[attack] table`), if aimed at one.
    pub attack_entry: Option<u16>,
    /// Arrival cycle and class of each PHV in flight, by id: an entry from
    /// its arrival to its exit or drop, so bounded by the PHVs the pipeline
    /// holds, not by the PHVs of the run.
    pub(crate) born: hashbrown::HashMap<u64, (Cycle, usize)>,
    pub arrived: [u64; 2],
    /// Dropped at the full input FIFO or shed before the ELU (`shed`
    /// counts the latter apart).
    pub dropped: [u64; 2],
    pub shed: [u64; 2],
    pub exited: [u64; 2],
    pub hits: [u64; 2],
    pub misses: [u64; 2],
    pub lat_sum: [u64; 2],
    pub lat: [LogHist; 2],
}

impl Classes {
    #[inline]
    pub fn class(&self, flow: u32) -> usize {
        (flow >= self.legit_flows) as usize
    }
    /// PHV `phv` of flow `flow` arrived at `now`; `dropped`: at a full
    /// input FIFO.
    #[inline]
    pub fn arrive(&mut self, flow: u32, phv: u64, now: Cycle, dropped: bool) {
        let c = self.class(flow);
        self.arrived[c] += 1;
        self.dropped[c] += dropped as u64;
        if !dropped {
            self.born.insert(phv, (now, c));
        }
    }
    /// A PHV left a table, answered from its CAM (`hit`) or not; `exit`:
    /// it left the pipeline at that cycle.
    #[inline]
    pub fn release(&mut self, hit: bool, phv: u64, exit: Option<Cycle>) {
        let (born, c) = *self.born.get(&phv).expect("a PHV in flight has its arrival");
        self.hits[c] += hit as u64;
        self.misses[c] += !hit as u64;
        if let Some(at) = exit {
            self.born.remove(&phv);
            let lat = at - born;
            self.exited[c] += 1;
            self.lat_sum[c] += lat;
            self.lat[c].add(lat);
        }
    }
    /// A PHV whose miss was shed left a table, dropped.
    pub fn shed(&mut self, phv: u64) {
        let (_, c) = self.born.remove(&phv).expect("a PHV in flight has its arrival");
        self.misses[c] += 1;
        self.dropped[c] += 1;
        self.shed[c] += 1;
    }
    /// PHVs whose arrival is held (those in flight).
    pub fn held(&self) -> usize {
        self.born.len()
    }
}

/// One completed (window, table) row.
#[derive(Clone, Debug)]
pub struct WindowRow {
    /// Window end.
    pub end: Cycle,
    pub table: u16,
    pub pmus: u32,
    pub c: Counters,
}

/// One completed (window, src, dst) routing count; `dst` = -1 is exit.
#[derive(Clone, Copy, Debug)]
pub struct EdgeRow {
    pub end: Cycle,
    pub src: u16,
    pub dst: i32,
    pub count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_monotone() {
        let mut prev = 0;
        for v in 0..100_000u64 {
            let b = LogHist::bucket(v);
            assert!(b == prev || b == prev + 1, "v={v}");
            assert!(
                LogHist::lower(b) <= v && v < LogHist::lower(b + 1),
                "v={v} b={b}"
            );
            prev = b;
        }
    }

    /// A histogram holding only the buckets it used prints and compares
    /// as one holding all of them.
    #[test]
    fn short_histograms_print_and_compare_as_full_ones() {
        let mut h = LogHist::default();
        let mut full = LogHist { counts: vec![0; BUCKETS] };
        for v in [3, 40, 41, 700, 5] {
            h.add(v);
            full.add(v);
        }
        assert!(h.counts.len() < BUCKETS);
        assert_eq!(format!("{h:?}"), format!("{full:?}"));
        assert_eq!(format!("{h:#?}"), format!("{full:#?}"));
        assert_eq!(h, full);
        assert_eq!(format!("{:?}", LogHist::default()), format!("{:?}", LogHist { counts: vec![0; BUCKETS] }));
        let mut m = LogHist::default();
        m.merge(&h);
        m.merge(&full);
        assert_eq!(m.total(), 10);
        assert_eq!(m.quantile(0.5), full.quantile(0.5));
        h.add(1 << 40);
        assert_ne!(h, full);
    }

    #[test]
    fn quantiles_exact_for_small_values() {
        let mut h = LogHist::default();
        for v in 1..=100 {
            h.add(if v <= 99 { 5 } else { 1000 });
        }
        assert_eq!(h.quantile(0.5), 5.0);
        assert_eq!(h.quantile(0.99), 5.0);
        let p100 = h.quantile(1.0);
        assert!((960.0..=1100.0).contains(&p100), "{p100}");
    }
}

//! Flow-level packet arrivals: the traffic model of the simulator.
//!
//! Follows §6 of the Synapse paper ("Traffic Generation"): flow sizes are
//! sampled from a real flow-size distribution ([`FlowSizeDist`]); each flow's
//! packets form a Poisson process whose rate is linearly proportional to its
//! size; flow arrivals are uniform over the simulation (or follow a
//! time-varying [`Profile`], for the paper's Fig. 8); offered load is raised
//! by adding flows.
//!
//! Concretely, flow `i` of `B_i` bytes sends `N_i = ceil(B_i / mean_pkt_bytes)`
//! packets. Its first packet arrives at its start time `s_i`; the next
//! `N_i − 1` follow with exponential gaps of mean `flow_duration / N_i`, i.e.
//! a Poisson process of rate `N_i / flow_duration`, so every flow is active
//! for about `flow_duration` whatever its size. Flows are numbered in order of
//! start time, so flow ids first appear in increasing order. The aggregate
//! packet rate in steady state is `flows · E[N] / duration`
//! ([`TrafficConfig::offered_pps`]); flows that start near the end run past
//! `duration` (the consumer stops reading where it likes: [`Traffic`] is lazy).
//!
//! Arrivals of all active flows are merged in time order with a binary heap
//! keyed by (time, flow): O(log active flows) per packet, and flows enter the
//! heap only when they start. Same seed, same arrivals, bit for bit.

use rand::{Rng, SeedableRng};
use rand_distr::Exp1;
use rand_pcg::Pcg64;

use super::flowsize::{packets, FlowSizeDist};
use super::profile::Profile;

/// Default mean packet size used to turn flow bytes into packets. A round
/// figure of the order of mean packet sizes on backbone links; `synapse
/// traffic fit` measures the real one from a pcap.
pub const DEFAULT_MEAN_PKT_BYTES: f64 = 1000.0;

/// One packet arrival: when, and which flow it belongs to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Arrival {
    pub t_ps: u64,
    pub flow: u32,
}

/// Why a traffic configuration cannot run.
#[derive(Clone, PartialEq, Debug, thiserror::Error)]
pub enum TrafficError {
    #[error("duration_ps must be > 0")]
    ZeroDuration,
    #[error("flow_duration_ps must be > 0")]
    ZeroFlowDuration,
    #[error("mean_pkt_bytes must be finite and > 0, got {0}")]
    BadPacketSize(f64),
    #[error("packet rate {0} must be finite and >= 0")]
    BadRate(f64),
    #[error("{0} flows do not fit a 32-bit flow id")]
    TooManyFlows(f64),
}

/// What to generate. Offered load is set by `flows` (see [`flows_for_rate`]).
#[derive(Clone, PartialEq, Debug)]
pub struct TrafficConfig {
    /// Flow sizes in bytes.
    pub dist: FlowSizeDist,
    /// Number of flows started over the run.
    pub flows: u32,
    /// Length of the run over which flows start, in picoseconds.
    pub duration_ps: u64,
    /// Mean active time of a flow, in picoseconds: a flow of N packets sends at
    /// rate N / flow_duration.
    pub flow_duration_ps: u64,
    /// Mean packet size in bytes: N = ceil(bytes / mean_pkt_bytes).
    pub mean_pkt_bytes: f64,
    /// Flow start density over the run; `None` is uniform.
    pub profile: Option<Profile>,
    /// Seed of the Pcg64 streams.
    pub seed: u64,
}

impl TrafficConfig {
    /// A configuration with uniform starts, flows active a tenth of the run,
    /// [`DEFAULT_MEAN_PKT_BYTES`] and seed 0.
    pub fn new(dist: FlowSizeDist, flows: u32, duration_ps: u64) -> Self {
        Self {
            dist,
            flows,
            duration_ps,
            flow_duration_ps: (duration_ps / 10).max(1),
            mean_pkt_bytes: DEFAULT_MEAN_PKT_BYTES,
            profile: None,
            seed: 0,
        }
    }

    pub fn validate(&self) -> Result<(), TrafficError> {
        if self.duration_ps == 0 {
            return Err(TrafficError::ZeroDuration);
        }
        if self.flow_duration_ps == 0 {
            return Err(TrafficError::ZeroFlowDuration);
        }
        if !(self.mean_pkt_bytes.is_finite() && self.mean_pkt_bytes > 0.0) {
            return Err(TrafficError::BadPacketSize(self.mean_pkt_bytes));
        }
        Ok(())
    }

    /// Expected packets per flow, E[N].
    pub fn mean_packets(&self) -> f64 {
        self.dist.mean_packets(self.mean_pkt_bytes)
    }

    /// Expected aggregate packet rate (packets per second) in steady state:
    /// flows · E[N] / duration. With a profile this is the mean over the run;
    /// the rate at run fraction x is about `offered_pps() * profile.density(x)`.
    pub fn offered_pps(&self) -> f64 {
        self.flows as f64 * self.mean_packets() / (self.duration_ps as f64 * 1e-12)
    }
}

/// Flows needed for an expected aggregate rate of `pps` packets per second.
pub fn flows_for_rate(
    pps: f64,
    dist: &FlowSizeDist,
    duration_ps: u64,
    mean_pkt_bytes: f64,
) -> Result<u32, TrafficError> {
    if !(pps.is_finite() && pps >= 0.0) {
        return Err(TrafficError::BadRate(pps));
    }
    if duration_ps == 0 {
        return Err(TrafficError::ZeroDuration);
    }
    if !(mean_pkt_bytes.is_finite() && mean_pkt_bytes > 0.0) {
        return Err(TrafficError::BadPacketSize(mean_pkt_bytes));
    }
    let flows = (pps * duration_ps as f64 * 1e-12 / dist.mean_packets(mean_pkt_bytes)).round();
    if flows > u32::MAX as f64 {
        return Err(TrafficError::TooManyFlows(flows));
    }
    Ok(flows as u32)
}

/// A flow on the heap: its next arrival time (f64 picoseconds, ordered by its
/// bit pattern, which is monotone for non-negative floats), then its id,
/// packed into one `u128` so that a comparison is a single integer compare.
#[derive(Clone, Copy, Debug)]
struct Active {
    /// `t_bits << 32 | flow`.
    key: u128,
    left: u64,
    gap_ps: f64,
}

impl Active {
    fn pack(t: f64, flow: u32) -> u128 {
        ((t.to_bits() as u128) << 32) | flow as u128
    }
    fn t(&self) -> f64 {
        f64::from_bits((self.key >> 32) as u64)
    }
    fn flow(&self) -> u32 {
        self.key as u32
    }
}

/// Binary min-heap of active flows on their packed key. Keys are unique (the
/// flow id is part of it), so the pop order is the same as any other exact
/// priority queue's (e.g. `std`'s `BinaryHeap` used before).
#[derive(Clone, Debug, Default)]
struct FlowHeap {
    v: Vec<Active>,
}

impl FlowHeap {
    fn len(&self) -> usize {
        self.v.len()
    }
    fn peek(&self) -> Option<&Active> {
        self.v.first()
    }
    fn push(&mut self, a: Active) {
        let mut i = self.v.len();
        self.v.push(a);
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.v[parent].key <= a.key {
                break;
            }
            self.v[i] = self.v[parent];
            i = parent;
        }
        self.v[i] = a;
    }
    /// Puts `a` where the minimum was and restores the heap (one sift-down).
    fn replace_top(&mut self, a: Active) {
        let n = self.v.len();
        let v = &mut self.v[..];
        let mut i = 0;
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && v[r].key < v[l].key { r } else { l };
            if a.key <= v[c].key {
                break;
            }
            v[i] = v[c];
            i = c;
        }
        v[i] = a;
    }
    fn pop_top(&mut self) {
        let last = self.v.pop().unwrap();
        if !self.v.is_empty() {
            self.replace_top(last);
        }
    }
}

/// The arrivals of a [`TrafficConfig`], in non-decreasing time order.
#[derive(Clone, Debug)]
pub struct Traffic {
    /// Start time (ps) of each flow, sorted; the index is the flow id.
    starts: Vec<f64>,
    /// Packets of each flow.
    packets: Vec<u64>,
    flow_duration_ps: f64,
    next_flow: usize,
    heap: FlowHeap,
    rng: Pcg64,
    emitted: u64,
    total: u64,
}

impl Traffic {
    /// Plans every flow (size and start) up front; arrivals are drawn lazily.
    pub fn new(cfg: &TrafficConfig) -> Result<Self, TrafficError> {
        cfg.validate()?;
        // Two streams: the plan (sizes, starts) and the packet gaps.
        let mut plan_rng = Pcg64::seed_from_u64(cfg.seed);
        let n = cfg.flows as usize;
        let d = cfg.duration_ps as f64;
        let mut flows: Vec<(f64, u64)> = (0..n)
            .map(|_| {
                let pk = packets(cfg.dist.sample(&mut plan_rng), cfg.mean_pkt_bytes);
                let u: f64 = plan_rng.gen();
                let x = match &cfg.profile {
                    Some(p) => p.quantile(u),
                    None => u,
                };
                (x * d, pk)
            })
            .collect();
        // Stable sort: equal starts keep their draw order.
        flows.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (starts, packets): (Vec<f64>, Vec<u64>) = flows.into_iter().unzip();
        let total = packets.iter().sum();
        Ok(Self {
            starts,
            packets,
            flow_duration_ps: cfg.flow_duration_ps as f64,
            next_flow: 0,
            heap: FlowHeap::default(),
            rng: Pcg64::seed_from_u64(cfg.seed ^ 0x9E37_79B9_7F4A_7C15),
            emitted: 0,
            total,
        })
    }

    /// Number of flows.
    pub fn flows(&self) -> u32 {
        self.starts.len() as u32
    }

    /// Packets flow `flow` sends in total.
    pub fn flow_packets(&self, flow: u32) -> u64 {
        self.packets[flow as usize]
    }

    /// Time of the first packet of flow `flow`.
    pub fn flow_start_ps(&self, flow: u32) -> u64 {
        self.starts[flow as usize] as u64
    }

    /// Packets of all flows: the length of the whole sequence.
    pub fn total_packets(&self) -> u64 {
        self.total
    }

    /// Packets not yet returned.
    pub fn remaining(&self) -> u64 {
        self.total - self.emitted
    }

    /// Flows currently between their first and last packet.
    pub fn active_flows(&self) -> usize {
        self.heap.len()
    }

    /// Time of the next arrival, without taking it.
    pub fn next_time(&self) -> Option<u64> {
        let start = self.starts.get(self.next_flow).copied();
        let top = self.heap.peek().map(|a| a.t());
        match (start, top) {
            (Some(s), Some(t)) => Some(s.min(t) as u64),
            (Some(s), None) => Some(s as u64),
            (None, Some(t)) => Some(t as u64),
            (None, None) => None,
        }
    }

    /// Appends up to `max` arrivals to `t_ps` and `flow`; returns how many.
    pub fn fill(&mut self, t_ps: &mut Vec<u64>, flow: &mut Vec<u32>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            match self.next() {
                Some(a) => {
                    t_ps.push(a.t_ps);
                    flow.push(a.flow);
                    n += 1;
                }
                None => break,
            }
        }
        n
    }

    /// Arrivals before `t_end_ps` (appended), leaving later ones for later.
    pub fn fill_until(&mut self, t_end_ps: u64, t_ps: &mut Vec<u64>, flow: &mut Vec<u32>) -> usize {
        let mut n = 0;
        while self.next_time().is_some_and(|t| t < t_end_ps) {
            let a = self.next().unwrap();
            t_ps.push(a.t_ps);
            flow.push(a.flow);
            n += 1;
        }
        n
    }

    #[inline]
    fn gap(&mut self, mean_ps: f64) -> f64 {
        let e: f64 = self.rng.sample(Exp1);
        e * mean_ps
    }
}

impl Iterator for Traffic {
    type Item = Arrival;

    #[inline]
    fn next(&mut self) -> Option<Arrival> {
        // A flow that starts before the heap's earliest arrival goes first;
        // ties order by (time, flow id), as in the heap.
        let starting = match (self.starts.get(self.next_flow), self.heap.peek()) {
            (Some(&s), Some(top)) => Active::pack(s, self.next_flow as u32) < top.key,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        self.emitted += 1;
        if starting {
            let id = self.next_flow;
            self.next_flow += 1;
            let s = self.starts[id];
            let n = self.packets[id];
            if n > 1 {
                let gap_ps = self.flow_duration_ps / n as f64;
                let t = s + self.gap(gap_ps);
                self.heap.push(Active {
                    key: Active::pack(t, id as u32),
                    left: n - 1,
                    gap_ps,
                });
            }
            return Some(Arrival {
                t_ps: s as u64,
                flow: id as u32,
            });
        }
        let top = *self.heap.peek().unwrap();
        let t = top.t();
        let out = Arrival {
            t_ps: t as u64,
            flow: top.flow(),
        };
        if top.left > 1 {
            // Replace in place: one sift-down instead of a pop and a push.
            let step = self.gap(top.gap_ps);
            self.heap.replace_top(Active {
                key: Active::pack(t + step, top.flow()),
                left: top.left - 1,
                gap_ps: top.gap_ps,
            });
        } else {
            self.heap.pop_top();
        }
        Some(out)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let r = self.remaining() as usize;
        (r, Some(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000_000;

    fn small_dist() -> FlowSizeDist {
        // 1 to 100 packets of 1000 B, log-uniform: light enough tail for rate tests.
        FlowSizeDist::from_points(vec![(1000.0, 0.2), (100_000.0, 1.0)]).unwrap()
    }

    #[test]
    fn arrivals_are_sorted_and_counts_match_sizes() {
        let mut cfg =
            TrafficConfig::new(FlowSizeDist::builtin("caida2019").unwrap(), 2000, 10 * MS);
        cfg.seed = 5;
        let tr = Traffic::new(&cfg).unwrap();
        let want: Vec<u64> = (0..tr.flows()).map(|f| tr.flow_packets(f)).collect();
        let starts: Vec<u64> = (0..tr.flows()).map(|f| tr.flow_start_ps(f)).collect();
        let total = tr.total_packets();
        let mut got = vec![0u64; want.len()];
        let mut first = vec![u64::MAX; want.len()];
        let mut prev = 0;
        let mut n = 0u64;
        for a in tr {
            assert!(a.t_ps >= prev, "arrival {n} at {} before {prev}", a.t_ps);
            prev = a.t_ps;
            got[a.flow as usize] += 1;
            first[a.flow as usize] = first[a.flow as usize].min(a.t_ps);
            n += 1;
        }
        assert_eq!(got, want);
        assert_eq!(n, total);
        assert_eq!(first, starts, "a flow's first packet is at its start");
        assert!(
            starts.windows(2).all(|w| w[0] <= w[1]),
            "flow ids in start order"
        );
    }

    #[test]
    fn same_seed_same_arrivals() {
        let mut cfg = TrafficConfig::new(FlowSizeDist::builtin("caida2018").unwrap(), 500, MS);
        cfg.profile = Some(Profile::builtin("burst").unwrap());
        cfg.seed = 42;
        let a: Vec<Arrival> = Traffic::new(&cfg).unwrap().take(200_000).collect();
        let b: Vec<Arrival> = Traffic::new(&cfg).unwrap().take(200_000).collect();
        assert_eq!(a, b);
        cfg.seed = 43;
        let c: Vec<Arrival> = Traffic::new(&cfg).unwrap().take(200_000).collect();
        assert_ne!(a, c);
    }

    #[test]
    fn mean_rate_matches_offered_pps() {
        // Steady state is [flow_duration, duration]; count arrivals there.
        let mut cfg = TrafficConfig::new(small_dist(), 20_000, 100 * MS);
        cfg.flow_duration_ps = 5 * MS;
        cfg.seed = 9;
        let tr = Traffic::new(&cfg).unwrap();
        let (lo, hi) = (10 * MS, 100 * MS);
        let n = tr.filter(|a| a.t_ps >= lo && a.t_ps < hi).count() as f64;
        let rate = n / ((hi - lo) as f64 * 1e-12);
        let want = cfg.offered_pps();
        // Flow-count noise dominates: about 1/sqrt(18 000 flows) * CV(N) < 1.5 %.
        assert!(
            (rate / want - 1.0).abs() < 0.04,
            "rate {rate} vs offered {want}"
        );
    }

    #[test]
    fn flows_for_rate_inverts_offered_pps() {
        let d = FlowSizeDist::builtin("caida2019").unwrap();
        let n = flows_for_rate(2e8, &d, 10 * MS, 1000.0).unwrap();
        let mut cfg = TrafficConfig::new(d.clone(), n, 10 * MS);
        cfg.mean_pkt_bytes = 1000.0;
        assert!(
            (cfg.offered_pps() / 2e8 - 1.0).abs() < 1e-3,
            "{} flows -> {}",
            n,
            cfg.offered_pps()
        );
        assert!(flows_for_rate(-1.0, &d, MS, 1000.0).is_err());
        assert!(flows_for_rate(1e30, &d, MS, 1000.0).is_err());
    }

    #[test]
    fn a_flow_sends_at_a_rate_proportional_to_its_size() {
        // The span first..last packet of an N-packet flow is a sum of N-1
        // exponential gaps of mean F/N: mean (N-1)/N * F whatever N.
        let mut cfg = TrafficConfig::new(small_dist(), 3000, 10 * MS);
        cfg.flow_duration_ps = MS;
        cfg.seed = 2;
        let tr = Traffic::new(&cfg).unwrap();
        let pk: Vec<u64> = (0..tr.flows()).map(|f| tr.flow_packets(f)).collect();
        let mut last = vec![0u64; pk.len()];
        let mut first = vec![u64::MAX; pk.len()];
        for a in tr {
            let f = a.flow as usize;
            first[f] = first[f].min(a.t_ps);
            last[f] = a.t_ps;
        }
        let (mut sum, mut want, mut cnt) = (0.0, 0.0, 0.0);
        for f in 0..pk.len() {
            if pk[f] >= 20 {
                sum += (last[f] - first[f]) as f64;
                want += (pk[f] - 1) as f64 / pk[f] as f64 * MS as f64;
                cnt += 1.0;
            }
        }
        assert!(cnt > 500.0);
        assert!(
            (sum / want - 1.0).abs() < 0.03,
            "mean span {} vs {}",
            sum / cnt,
            want / cnt
        );
    }

    #[test]
    fn profile_shapes_the_packet_rate() {
        // Step profile: the middle third carries 3x the rate of the first third.
        // Every flow sends 10 packets so only the start times vary.
        let ten = FlowSizeDist::from_points(vec![(10_000.0, 1.0)]).unwrap();
        let mut cfg = TrafficConfig::new(ten, 30_000, 90 * MS);
        cfg.flow_duration_ps = MS;
        cfg.profile = Some(Profile::builtin("step").unwrap());
        cfg.seed = 4;
        let mut thirds = [0u64; 3];
        for a in Traffic::new(&cfg).unwrap() {
            // Skip the edges where flows straddle a step.
            let x = a.t_ps / MS;
            match x {
                2..=29 => thirds[0] += 1,
                32..=59 => thirds[1] += 1,
                62..=89 => thirds[2] += 1,
                _ => {}
            }
        }
        let r = thirds[1] as f64 / thirds[0] as f64;
        assert!((r - 3.0).abs() < 0.15, "middle/first {r} ({thirds:?})");
        let r2 = thirds[2] as f64 / thirds[0] as f64;
        assert!((r2 - 1.0).abs() < 0.08, "last/first {r2}");
    }

    #[test]
    fn fill_and_fill_until_agree_with_the_iterator() {
        let mut cfg = TrafficConfig::new(small_dist(), 1000, MS);
        cfg.seed = 8;
        let all: Vec<Arrival> = Traffic::new(&cfg).unwrap().collect();
        let mut tr = Traffic::new(&cfg).unwrap();
        let (mut t, mut f) = (Vec::new(), Vec::new());
        let cut = MS / 2;
        let n1 = tr.fill_until(cut, &mut t, &mut f);
        assert!(t.iter().all(|&x| x < cut));
        assert_eq!(tr.next_time().map(|x| x >= cut), Some(true));
        while tr.fill(&mut t, &mut f, 777) > 0 {}
        assert!(n1 > 0 && n1 < all.len());
        assert_eq!(t.len(), all.len());
        assert!(all
            .iter()
            .zip(t.iter().zip(&f))
            .all(|(a, (&t, &f))| a.t_ps == t && a.flow == f));
        assert_eq!(tr.remaining(), 0);
    }

    #[test]
    fn bad_configs_are_rejected() {
        let d = small_dist();
        let mut c = TrafficConfig::new(d.clone(), 1, MS);
        c.mean_pkt_bytes = 0.0;
        assert!(matches!(
            Traffic::new(&c),
            Err(TrafficError::BadPacketSize(_))
        ));
        let mut c = TrafficConfig::new(d.clone(), 1, MS);
        c.flow_duration_ps = 0;
        assert!(matches!(
            Traffic::new(&c),
            Err(TrafficError::ZeroFlowDuration)
        ));
        let c = TrafficConfig::new(d, 1, 0);
        assert!(matches!(Traffic::new(&c), Err(TrafficError::ZeroDuration)));
    }

    #[test]
    fn no_flows_no_arrivals() {
        let tr = Traffic::new(&TrafficConfig::new(small_dist(), 0, MS)).unwrap();
        assert_eq!(tr.count(), 0);
    }
}

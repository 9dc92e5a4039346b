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
//! Arrivals of all active flows are merged in time order by a radix heap
//! (`FlowQueue`) keyed by (time, flow); flows enter it one by one in start
//! order. Per packet that costs about a third of the instructions of the
//! binary heap it replaced (kept in the tests as the oracle), with the same
//! arrivals. Same seed, same arrivals, bit for bit.

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

/// A flow's next packet: its arrival time (f64 picoseconds, as its bit
/// pattern, which orders like the float for non-negative times), the packets
/// the flow still sends counting this one, and the mean gap between them.
#[derive(Clone, Copy, Debug)]
struct Active {
    t: u64,
    left: u64,
    gap_ps: f64,
    flow: u32,
}

/// Bits of a digit of [`FlowQueue`]'s radix. With 8 an element moves less
/// (312 vs 373 instructions per arrival at 12k active flows) but its 2048
/// buckets cost more CPU time than 4's 256 (about 82 vs 76 ns, binary heap
/// 100 ns, medians of 6 interleaved runs).
const DIGIT: u32 = 4;
/// Buckets of [`FlowQueue`]: a digit value for each digit position.
const BUCKETS: usize = (63 / DIGIT as usize + 1) << DIGIT;
const WORDS: usize = BUCKETS.div_ceil(64);

/// Radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, 1990) with 2^DIGIT-ary
/// digits, of flows on their next arrival time, ties broken by flow id.
///
/// It needs monotone keys, which the generator has: a packet's successor comes
/// after it, and the next flow's start is queued when the previous start is
/// taken. `equal` holds the times equal to `last`, the time of the current
/// minimum. Any other time goes to the bucket of (the highest digit position
/// where it differs from `last`, its digit there): bucket order is time
/// order. When `equal` runs empty, the lowest occupied bucket is spread around
/// its minimum into lower buckets, so an element moves a few times on its way
/// down (a digit or more a move) instead of sifting through log2(active flows)
/// heap levels per packet. The moves are appends to a few dozen vectors,
/// cheap and predictable where a binary heap's sift-down mispredicts a branch
/// per level.
///
/// The keys (time, flow) are unique, so the pop order is the same as any
/// exact priority queue's (the binary heap before, see the test oracle).
#[derive(Clone, Debug)]
struct FlowQueue {
    /// Time bits of the current minimum; every queued time is at least it.
    last: u64,
    /// After [`FlowQueue::settle`], not empty unless the queue is, and its
    /// last element is the minimum (the least flow id of equal times).
    equal: Vec<Active>,
    buckets: Vec<Vec<Active>>,
    /// Bit i of word i / 64 is set when bucket i is not empty.
    occupied: [u64; WORDS],
    /// Bit w is set when `occupied[w]` is not 0.
    words: u64,
    len: usize,
}

impl Default for FlowQueue {
    fn default() -> Self {
        Self {
            last: 0,
            equal: Vec::new(),
            buckets: vec![Vec::new(); BUCKETS],
            occupied: [0; WORDS],
            words: 0,
            len: 0,
        }
    }
}

impl FlowQueue {
    fn len(&self) -> usize {
        self.len
    }

    /// Puts `a` in its bucket (no length count).
    #[inline(always)]
    fn place(&mut self, a: Active) {
        let x = a.t ^ self.last;
        if x == 0 {
            self.equal.push(a);
        } else {
            let level = (63 - x.leading_zeros()) / DIGIT;
            let digit = (a.t >> (level * DIGIT)) as usize & ((1 << DIGIT) - 1);
            let i = ((level as usize) << DIGIT | digit) % BUCKETS;
            self.buckets[i].push(a);
            self.occupied[i / 64] |= 1 << (i % 64);
            self.words |= 1 << (i / 64);
        }
    }

    /// Queues `a`; its time must be at least the current minimum's.
    #[inline]
    fn push(&mut self, a: Active) {
        debug_assert!(a.t >= self.last);
        self.place(a);
        self.len += 1;
    }

    /// The minimum (valid after [`FlowQueue::settle`]).
    #[inline]
    fn peek(&self) -> Option<&Active> {
        self.equal.last()
    }

    /// Takes the minimum; push what follows it, then call
    /// [`FlowQueue::settle`] before the next peek or pop.
    #[inline]
    fn pop(&mut self) -> Option<Active> {
        let a = self.equal.pop()?;
        self.len -= 1;
        Some(a)
    }

    /// Brings the minimum to the end of `equal`.
    #[inline]
    fn settle(&mut self) {
        if self.equal.is_empty() {
            if self.words == 0 {
                return;
            }
            let w = self.words.trailing_zeros() as usize % WORDS;
            let bit = self.occupied[w].trailing_zeros() as usize;
            // Cleared before a spread, which may fill lower buckets of word w.
            self.occupied[w] &= !(1 << bit);
            if self.occupied[w] == 0 {
                self.words &= !(1 << w);
            }
            let i = (w * 64 + bit) % BUCKETS;
            let b = &mut self.buckets[i];
            if b.len() == 1 {
                // Alone in its bucket (the common case): it is the minimum.
                let a = b.pop().unwrap();
                self.last = a.t;
                self.equal.push(a);
            } else {
                self.spread(i);
            }
        }
        if self.equal.len() > 1 {
            self.least_flow_last();
        }
    }

    /// Moves bucket `i`'s elements to lower buckets around their minimum,
    /// which becomes `last`.
    #[inline(never)]
    fn spread(&mut self, i: usize) {
        let mut v = std::mem::take(&mut self.buckets[i]);
        self.last = v.iter().map(|a| a.t).min().unwrap();
        for &a in &v {
            self.place(a);
        }
        v.clear();
        // Keep the allocation for the next time this bucket fills.
        self.buckets[i] = v;
    }

    /// Equal times (rare): the least flow id goes first.
    #[cold]
    fn least_flow_last(&mut self) {
        let (j, _) = self
            .equal
            .iter()
            .enumerate()
            .min_by_key(|(_, a)| a.flow)
            .unwrap();
        let n = self.equal.len();
        self.equal.swap(j, n - 1);
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
    /// The flow whose first packet is queued (flows enter the queue one by
    /// one in start order); `flows()` once all have started.
    next_flow: usize,
    queue: FlowQueue,
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
        let mut tr = Self {
            starts,
            packets,
            flow_duration_ps: cfg.flow_duration_ps as f64,
            next_flow: 0,
            queue: FlowQueue::default(),
            rng: Pcg64::seed_from_u64(cfg.seed ^ 0x9E37_79B9_7F4A_7C15),
            emitted: 0,
            total,
        };
        tr.queue_start();
        tr.queue.settle();
        Ok(tr)
    }

    /// Queues the first packet of flow `next_flow`, if there is one.
    #[inline]
    fn queue_start(&mut self) {
        let id = self.next_flow;
        if let (Some(&s), Some(&n)) = (self.starts.get(id), self.packets.get(id)) {
            self.queue.push(Active {
                t: s.to_bits(),
                left: n,
                gap_ps: self.flow_duration_ps / n as f64,
                flow: id as u32,
            });
        }
    }

    /// Number of flows.
    pub fn flows(&self) -> u32 {
        self.starts.len() as u32
    }

    /// Packets flow `flow` sends in total.
    pub fn flow_packets(&self, flow: u32) -> u64 {
        self.packets[flow as usize]
    }

    /// Packets of every flow, in flow id order.
    pub fn flow_packets_all(&self) -> &[u64] {
        &self.packets
    }

    /// Time of the first packet of flow `flow`.
    pub fn flow_start_ps(&self, flow: u32) -> u64 {
        self.starts[flow as usize] as u64
    }

    /// Start times (ps) of every flow, in flow id (start) order.
    pub fn flow_starts(&self) -> &[f64] {
        &self.starts
    }

    /// Mean active time of a flow, ps: a flow of N packets sends at rate
    /// N / flow_duration.
    pub fn flow_duration_ps(&self) -> f64 {
        self.flow_duration_ps
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
        // The queue also holds the next flow's first packet.
        self.queue.len() - (self.next_flow < self.starts.len()) as usize
    }

    /// Time of the next arrival, without taking it.
    pub fn next_time(&self) -> Option<u64> {
        self.queue.peek().map(|a| ps(f64::from_bits(a.t)))
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

/// `t as u64` for a time in picoseconds: one conversion instruction below
/// 2^63 ps instead of the saturating sequence for the whole `u64` range.
#[inline(always)]
fn ps(t: f64) -> u64 {
    if (0.0..9.2e18).contains(&t) {
        // SAFETY: in range of i64, so the truncation is exact and defined.
        unsafe { t.to_int_unchecked::<i64>() as u64 }
    } else {
        ps_slow(t)
    }
}

#[cold]
#[inline(never)]
fn ps_slow(t: f64) -> u64 {
    t as u64
}

impl Iterator for Traffic {
    type Item = Arrival;

    #[inline]
    fn next(&mut self) -> Option<Arrival> {
        let top = self.queue.pop()?;
        self.emitted += 1;
        if top.flow as usize == self.next_flow {
            // A first packet: the next flow's may come before this one's second.
            self.next_flow += 1;
            self.queue_start();
        }
        let t = f64::from_bits(top.t);
        if top.left > 1 {
            let step = self.gap(top.gap_ps);
            self.queue.push(Active {
                t: (t + step).to_bits(),
                left: top.left - 1,
                ..top
            });
        }
        self.queue.settle();
        Some(Arrival {
            t_ps: ps(t),
            flow: top.flow,
        })
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

    /// The generator before the radix heap (binary heap of active flows,
    /// starts merged from the sorted start list), kept as the oracle: same
    /// config, same arrivals.
    mod oracle {
        use super::super::*;

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

        pub struct OldTraffic {
            starts: Vec<f64>,
            packets: Vec<u64>,
            flow_duration_ps: f64,
            next_flow: usize,
            heap: FlowHeap,
            rng: Pcg64,
        }

        impl OldTraffic {
            pub fn active_flows(&self) -> usize {
                self.heap.v.len()
            }

            /// The plan (starts, packets) is the new generator's, which did not change.
            pub fn new(cfg: &TrafficConfig) -> OldTraffic {
                let tr = Traffic::new(cfg).unwrap();
                OldTraffic {
                    starts: tr.starts,
                    packets: tr.packets,
                    flow_duration_ps: cfg.flow_duration_ps as f64,
                    next_flow: 0,
                    heap: FlowHeap::default(),
                    rng: Pcg64::seed_from_u64(cfg.seed ^ 0x9E37_79B9_7F4A_7C15),
                }
            }

            fn gap(&mut self, mean_ps: f64) -> f64 {
                let e: f64 = self.rng.sample(Exp1);
                e * mean_ps
            }
        }

        impl Iterator for OldTraffic {
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
        }
    }
    /// The radix-heap generator against the binary-heap one it replaced:
    /// same arrivals, and the same `next_time` and `active_flows` between.
    #[test]
    fn arrivals_match_the_binary_heap_oracle() {
        let caida = FlowSizeDist::builtin("caida2019")
            .unwrap()
            .truncated(10e6)
            .unwrap();
        let ten = FlowSizeDist::from_points(vec![(10_000.0, 1.0)]).unwrap();
        let mut cfgs = Vec::new();
        for seed in 1..=4 {
            // The 120k-flow scenario's shape, scaled down.
            let mut c = TrafficConfig::new(caida.clone(), 3000, 10 * MS);
            c.flow_duration_ps = 5 * MS / 2;
            c.mean_pkt_bytes = 800.0;
            c.profile = Some(Profile::builtin("uniform").unwrap());
            c.seed = seed;
            cfgs.push(c);
        }
        let mut c = TrafficConfig::new(FlowSizeDist::builtin("caida2018").unwrap(), 500, MS);
        c.profile = Some(Profile::builtin("burst").unwrap());
        c.seed = 42;
        cfgs.push(c);
        let mut c = TrafficConfig::new(small_dist(), 1000, MS);
        c.flow_duration_ps = 3 * MS; // flows outlive the run
        c.seed = 8;
        cfgs.push(c);
        let mut c = TrafficConfig::new(ten, 2000, 9 * MS);
        c.flow_duration_ps = 1000; // 10 packets within a ns: many flows interleave
        c.profile = Some(Profile::builtin("step").unwrap());
        c.seed = 4;
        cfgs.push(c);
        for n in [0, 1, 2] {
            cfgs.push(TrafficConfig::new(small_dist(), n, MS));
        }
        for cfg in &cfgs {
            let mut new = Traffic::new(cfg).unwrap();
            let mut old = oracle::OldTraffic::new(cfg);
            let mut n = 0u64;
            loop {
                assert_eq!(
                    new.active_flows(),
                    old.active_flows(),
                    "arrival {n} of {cfg:?}"
                );
                let want = old.next();
                assert_eq!(new.next_time(), want.map(|a| a.t_ps));
                let got = new.next();
                assert_eq!(got, want, "arrival {n} of {cfg:?}");
                if got.is_none() {
                    break;
                }
                n += 1;
            }
            assert_eq!(n, new.total_packets());
        }
    }

    /// The radix heap alone against std's binary heap, with many equal times
    /// (which the generator almost never makes) and pushes at the minimum.
    #[test]
    fn flow_queue_pops_like_a_binary_heap() {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut rng = Pcg64::seed_from_u64(7);
        for spread_bits in [0u32, 2, 8, 20, 40, 63] {
            let mut q = FlowQueue::default();
            let mut want = BinaryHeap::new();
            let mut now = 0u64;
            let mut flow = 0u32;
            for step in 0..20_000 {
                // Push a few keys at or after the minimum, then pop one.
                for _ in 0..rng.gen_range(0..3) {
                    let d = if spread_bits == 0 {
                        0
                    } else {
                        rng.gen::<u64>() >> (64 - spread_bits)
                    };
                    let t = now.saturating_add(d);
                    let f = if rng.gen_bool(0.5) {
                        flow
                    } else {
                        rng.gen_range(0..=flow)
                    };
                    flow += 1;
                    q.push(Active {
                        t,
                        left: step,
                        gap_ps: 0.0,
                        flow: f,
                    });
                    want.push(Reverse((t, f, step)));
                }
                q.settle();
                assert_eq!(q.len(), want.len());
                let Some(Reverse((t, f, _))) = want.pop() else {
                    assert!(q.pop().is_none());
                    continue;
                };
                let got = q.pop().unwrap();
                // Equal (time, flow) pairs (never in the generator) may come
                // in either order.
                assert_eq!((got.t, got.flow), (t, f), "step {step}, bits {spread_bits}");
                now = t;
            }
        }
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

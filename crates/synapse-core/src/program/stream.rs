//! A capture streamed through the program into the routed simulator, in
//! bounded memory: read a batch of frames ([`Capture`]), run each through
//! the executor ([`RunPacket`]), count per table, intern its route
//! ([`Interner`]), write its output packets ([`PcapOut`]); then hand the
//! simulator ([`RouteSink`]) the keys and routes new since the last time
//! and the batch's arrivals. The embedding alternates [`Stream::fill`] up
//! to the end of its next control period, [`Stream::sync`] and the
//! simulator's `run_until`.
//!
//! Arrival times ([`Clock`]): a fixed-rate replay (packet i at i × gap, as
//! a header trace is replayed) or the capture's own timestamps relative to
//! its first packet (a timestamp earlier than the one before arrives with
//! it, counted in `reordered`). Memory: the batch, the arrivals not yet
//! synced (one control period's), and the interned keys and routes.
//!
//! Every keyed table of the program is interned; which of them the
//! simulator has is told once, before the first sync ([`Stream::simulate`]):
//! a route's hops at other tables are left out, and a packet with no hop
//! left makes no arrival (`unrouted`).

use super::capture::{Capture, CaptureError, Frames};
use super::intern::Interner;
use super::pcapout::PcapOut;
use super::{Outputs, RunPacket, Visits};
use std::collections::BTreeMap;
use std::time::Duration;

/// Frames run per batch.
pub const BATCH: usize = 4096;
const NONE: u32 = u32::MAX;

/// When packets arrive (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Clock {
    /// Packet i arrives at `i × gap_ps` (as `(i as f64 * gap_ps) as u64`).
    Rate { gap_ps: f64 },
    /// At its capture timestamp minus the first packet's.
    Timestamps,
}

/// The ingress port a packet runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Port {
    Fixed(u32),
    /// The capture's interface (pcapng's interface id; 0 in pcap).
    Interface,
}

/// What the program did, per keyed table and overall.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub packets: u64,
    /// Per keyed table: lookups, lookups that matched an entry, and per
    /// action id + 1 (0: none, a miss without a default action) the
    /// lookups that ran it.
    pub lookups: Vec<u64>,
    pub matched: Vec<u64>,
    pub actions: Vec<Vec<u64>>,
    /// Packets that left no copy, and per drop reason (the executor's).
    pub dropped: u64,
    pub drops: Vec<u64>,
    /// Packets per parser error code (0, no error, left out).
    pub parser_errors: BTreeMap<u32, u64>,
    /// Output packets, and those beyond the first of their input packet
    /// (clones and multicast copies).
    pub outputs: u64,
    pub copies: u64,
    /// Packets that visited no simulated table (no arrival).
    pub unrouted: u64,
    /// Packets whose capture timestamp was earlier than the one before.
    pub reordered: u64,
}

/// CPU time of the calling thread (its own, whatever else the machine
/// runs): what [`StageTimes`] adds up.
#[cfg(unix)]
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Elsewhere: time since the first call (wall, not CPU).
#[cfg(not(unix))]
pub fn thread_cpu() -> Duration {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed()
}

/// Where a stream's time went, by stage (CPU time of the thread running
/// it, [`thread_cpu`], taken per batch, not per packet): reading frames, the executor,
/// counting and route interning, writing output packets, and handing the
/// simulator its keys, routes and arrivals (`sync`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageTimes {
    pub read: Duration,
    pub execute: Duration,
    pub intern: Duration,
    pub output: Duration,
    pub sync: Duration,
}

impl Counters {
    fn new(tables: usize) -> Self {
        Counters { lookups: vec![0; tables], matched: vec![0; tables], actions: vec![Vec::new(); tables], ..Default::default() }
    }
}

/// What receives the stream: the routed simulator (`sim::routed`), or a
/// recorder in tests. Keys and routes arrive in id order, each once.
pub trait RouteSink {
    /// Keys appended to simulated table `table` (`words` each, flat) with
    /// the entry the program matched for each (-1: a miss).
    fn append_keys(&mut self, table: u16, words: usize, keys: &[u32], expected: &[i32]) -> Result<(), String>;
    /// Routes appended: route i's hops are `start[i]..start[i + 1]` of
    /// `table`/`key` (`start[0] == 0`); flow r follows route r.
    fn append_routes(&mut self, start: &[u32], table: &[u16], key: &[u32]) -> Result<(), String>;
    /// Arrivals (times in ps, non-decreasing; flows).
    fn push_arrivals(&mut self, t_ps: &[u64], flow: &[u32]) -> Result<(), String>;
    /// Entries the data plane added to or aged out of simulated table
    /// `table` (`super::learn`), in the order they happened.
    fn table_writes(&mut self, table: u16, words: usize, writes: &[super::learn::Write]) -> Result<(), String> {
        let _ = (table, words, writes);
        Err("this sink takes no data-plane table writes".into())
    }
}

/// A capture being streamed (see the module doc).
pub struct Stream {
    capture: Capture,
    clock: Clock,
    port: Port,
    /// Packets to read at most (None: the whole capture).
    limit: Option<u64>,
    interner: Interner,
    pub counters: Counters,
    /// The held batch, its arrival times, and the buffers its run fills.
    frames: Frames,
    t_ps: Vec<u64>,
    visits: Visits,
    outputs: Outputs,
    /// Per held frame: its ingress port, and its outcome and drop reason.
    ports: Vec<u32>,
    outcomes: Vec<(super::Outcome, u32)>,
    out: Option<PcapOut>,
    read: u64,
    first_ts: Option<u64>,
    last_t_ps: u64,
    /// Arrivals not yet synced (interner routes).
    arr_t: Vec<u64>,
    arr_r: Vec<u32>,
    /// Per keyed table its simulator table (set by `simulate`), per
    /// interned route its simulator route (NONE: no simulated hop), and
    /// what was synced.
    sim_of: Option<Vec<Option<u16>>>,
    route_map: Vec<u32>,
    sim_routes: u32,
    sent_keys: Vec<usize>,
    reasons: Vec<String>,
    /// Data-plane table writes not yet synced (`super::learn`).
    writes: Vec<super::learn::Write>,
    pub writes_total: u64,
    pub times: StageTimes,
    /// The most arrivals held between two syncs: what the stream buffers
    /// for the simulator, bounded by a control period's packets.
    pub pending_peak: usize,
}

impl Stream {
    /// Streams `capture` through a program whose keyed table t has
    /// `key_words[t]` words; output packets go to `out`, if given.
    pub fn new(capture: Capture, key_words: Vec<usize>, clock: Clock, port: Port, limit: Option<u64>,
               out: Option<PcapOut>) -> Result<Stream, String> {
        if let Clock::Rate { gap_ps } = clock {
            if !(gap_ps > 0.0 && gap_ps.is_finite()) {
                return Err(format!("stream: the replay's gap must be > 0 ps, found {gap_ps}"));
            }
        }
        let n = key_words.len();
        let all = (0..n).map(|t| Some(t as u16)).collect();
        Ok(Stream {
            capture,
            clock,
            port,
            limit,
            interner: Interner::new(key_words, all)?,
            counters: Counters::new(n),
            frames: Frames::new(),
            t_ps: Vec::new(),
            visits: Visits::new(),
            outputs: Outputs::new(),
            ports: Vec::new(),
            outcomes: Vec::new(),
            out,
            read: 0,
            first_ts: None,
            last_t_ps: 0,
            arr_t: Vec::new(),
            arr_r: Vec::new(),
            sim_of: None,
            route_map: Vec::new(),
            sim_routes: 0,
            sent_keys: vec![0; n],
            reasons: Vec::new(),
            writes: Vec::new(),
            writes_total: 0,
            times: StageTimes::default(),
            pending_peak: 0,
        })
    }

    /// Packets read so far.
    pub fn packets_read(&self) -> u64 {
        self.read
    }

    /// Every packet has been read and run.
    pub fn is_done(&self) -> bool {
        self.frames.is_empty() && (self.capture.is_done() || self.limit.is_some_and(|l| self.read >= l))
    }

    /// The arrival time of the last packet read (ps).
    pub fn last_time_ps(&self) -> u64 {
        self.last_t_ps
    }

    pub fn capture(&self) -> &Capture {
        &self.capture
    }

    pub fn interner(&self) -> &Interner {
        &self.interner
    }

    /// The drop reasons' names, as the executor gave them.
    pub fn drop_reasons(&self) -> &[String] {
        &self.reasons
    }

    /// The arrival time of packet `read` (not yet read), if it is known
    /// before reading it.
    fn next_time(&self) -> Option<u64> {
        match self.clock {
            Clock::Rate { gap_ps } => Some((self.read as f64 * gap_ps) as u64),
            Clock::Timestamps => None,
        }
    }

    /// Reads frames into the held batch while the last one read arrives
    /// before `until_ps` (at most `max` held); returns how many are held.
    pub fn read(&mut self, until_ps: u64, max: usize) -> Result<usize, CaptureError> {
        let t0 = thread_cpu();
        let r = self.read_frames(until_ps, max);
        self.times.read += thread_cpu().saturating_sub(t0);
        r
    }

    fn read_frames(&mut self, until_ps: u64, max: usize) -> Result<usize, CaptureError> {
        while self.frames.len() < max && !self.limit.is_some_and(|l| self.read >= l) {
            let want = match self.next_time() {
                Some(t) => t < until_ps,
                None => self.read == 0 || self.last_t_ps < until_ps,
            };
            if !want || !self.capture.next_into(&mut self.frames)? {
                break;
            }
            let i = self.frames.len() - 1;
            let t = match self.clock {
                Clock::Rate { .. } => self.next_time().unwrap(),
                Clock::Timestamps => {
                    let ts = self.frames.ts_ns[i];
                    let first = *self.first_ts.get_or_insert(ts);
                    let t = ts.saturating_sub(first).saturating_mul(1000);
                    if t < self.last_t_ps {
                        self.counters.reordered += 1;
                    }
                    t.max(self.last_t_ps)
                }
            };
            self.t_ps.push(t);
            self.last_t_ps = t;
            self.read += 1;
        }
        Ok(self.frames.len())
    }

    /// The held batch: frames, arrival times (ps) and ingress ports.
    pub fn held(&self) -> (&Frames, &[u64], Vec<u32>) {
        let ports = match self.port {
            Port::Fixed(p) => vec![p; self.frames.len()],
            Port::Interface => self.frames.interface.clone(),
        };
        (&self.frames, &self.t_ps, ports)
    }

    /// Runs the held batch through `exec` and empties it: counters, routes,
    /// arrivals, output packets.
    pub fn run_held(&mut self, exec: &mut dyn RunPacket) -> Result<(), String> {
        let n = self.frames.len();
        if self.read == n as u64 {
            exec.log_writes();
        }
        self.visits.clear();
        self.outputs.clear();
        let want_out = self.out.is_some();
        let t0 = thread_cpu();
        self.ports.clear();
        match self.port {
            Port::Fixed(p) => self.ports.resize(n, p),
            Port::Interface => self.ports.extend_from_slice(&self.frames.interface),
        }
        self.outcomes.clear();
        exec.run_batch(&self.frames, &self.ports, &self.t_ps, &mut self.visits,
                       if want_out { Some(&mut self.outputs) } else { None }, &mut self.outcomes)?;
        if self.visits.packets() != n || self.outcomes.len() != n {
            return Err(format!("executor: a batch of {n} packets from packet {} ended {} packets of visits and {} outcomes",
                               self.read - n as u64 + 1, self.visits.packets(), self.outcomes.len()));
        }
        let c = &mut self.counters;
        for &(o, r) in &self.outcomes {
            if o.dropped {
                c.dropped += 1;
                let r = r as usize;
                if c.drops.len() <= r {
                    c.drops.resize(r + 1, 0);
                }
                c.drops[r] += 1;
            }
            if o.parser_error != 0 {
                *c.parser_errors.entry(o.parser_error).or_default() += 1;
            }
            c.outputs += o.outputs as u64;
            c.copies += o.outputs.saturating_sub(1) as u64;
        }
        c.packets += n as u64;
        let w = exec.take_writes();
        self.writes_total += w.len() as u64;
        self.writes.extend(w);
        if self.reasons.is_empty() {
            self.reasons = exec.drop_reasons();
        }
        let t1 = thread_cpu();
        self.times.execute += t1.saturating_sub(t0);
        let v = &self.visits;
        for i in 0..v.len() {
            let t = v.table[i] as usize;
            if t >= c.lookups.len() {
                return Err(format!("executor: visit of keyed table {t} of {}", c.lookups.len()));
            }
            c.lookups[t] += 1;
            c.matched[t] += (v.entry[i] >= 0) as u64;
            let a = v.action[i].wrapping_add(1) as usize;
            let acts = &mut c.actions[t];
            if acts.len() <= a {
                acts.resize(a + 1, 0);
            }
            acts[a] += 1;
        }
        for p in 0..n {
            match self.interner.intern(&self.visits, p).map_err(|e| format!("executor: {e}"))? {
                Some(r) => {
                    self.arr_t.push(self.t_ps[p]);
                    self.arr_r.push(r);
                }
                None => c.unrouted += 1,
            }
        }
        let t2 = thread_cpu();
        self.times.intern += t2.saturating_sub(t1);
        if let Some(out) = self.out.as_mut() {
            let o = &self.outputs;
            for j in 0..o.len() {
                let ts = self.frames.ts_ns[o.input[j] as usize];
                out.write(o.port[j], ts, o.packet(j)).map_err(|e| format!("output pcap: {e}"))?;
            }
            self.times.output += thread_cpu().saturating_sub(t2);
        }
        self.frames.clear();
        self.t_ps.clear();
        Ok(())
    }

    /// Reads and runs packets while the last one read arrives before
    /// `until_ps`, at most `max` more of them.
    pub fn fill(&mut self, until_ps: u64, max: u64, exec: &mut dyn RunPacket) -> Result<(), String> {
        let stop = self.read.saturating_add(max);
        loop {
            let room = (stop - self.read).min(BATCH as u64) as usize;
            if room == 0 || self.read(until_ps, room).map_err(|e| e.0)? == 0 {
                return Ok(());
            }
            self.run_held(exec)?;
        }
    }

    /// Keyed tables visited so far (lookups > 0).
    pub fn visited(&self) -> Vec<usize> {
        (0..self.counters.lookups.len()).filter(|&t| self.counters.lookups[t] > 0).collect()
    }

    /// Which keyed tables the simulator has: `sim_of[t]`, dense from 0.
    /// Once, before the first sync.
    pub fn simulate(&mut self, sim_of: Vec<Option<u16>>) -> Result<(), String> {
        if self.sim_of.is_some() {
            return Err("stream: the simulated tables are set once".into());
        }
        if sim_of.len() != self.counters.lookups.len() {
            return Err(format!("stream: {} tables mapped, the program has {}", sim_of.len(), self.counters.lookups.len()));
        }
        self.sim_of = Some(sim_of);
        Ok(())
    }

    /// Hands `sink` what is new: keys, routes (with the simulated hops
    /// only), and the arrivals since the last sync.
    pub fn sync(&mut self, sink: &mut dyn RouteSink) -> Result<(), String> {
        let t0 = thread_cpu();
        let r = self.sync_new(sink);
        self.times.sync += thread_cpu().saturating_sub(t0);
        r
    }

    fn sync_new(&mut self, sink: &mut dyn RouteSink) -> Result<(), String> {
        self.pending_peak = self.pending_peak.max(self.arr_t.len());
        let Some(sim_of) = self.sim_of.as_ref() else {
            return Err("stream: simulate() before the first sync".into());
        };
        for (t, s) in sim_of.iter().enumerate() {
            let (words, flat, expected) = self.interner.keys(t);
            let from = self.sent_keys[t];
            if let Some(s) = *s {
                if expected.len() > from {
                    sink.append_keys(s, words, &flat[from * words..], &expected[from..])?;
                }
            }
            self.sent_keys[t] = expected.len();
        }
        let (start, ht, hk) = self.interner.routes();
        let mut st = vec![0u32];
        let (mut tab, mut key) = (Vec::new(), Vec::new());
        for r in self.route_map.len()..start.len() - 1 {
            for h in start[r] as usize..start[r + 1] as usize {
                if let Some(s) = sim_of[ht[h] as usize] {
                    tab.push(s);
                    key.push(hk[h]);
                }
            }
            if tab.len() as u32 == *st.last().unwrap() {
                self.route_map.push(NONE);
            } else {
                st.push(tab.len() as u32);
                self.route_map.push(self.sim_routes);
                self.sim_routes += 1;
            }
        }
        if st.len() > 1 {
            sink.append_routes(&st, &tab, &key)?;
        }
        let (mut t, mut f) = (Vec::with_capacity(self.arr_t.len()), Vec::with_capacity(self.arr_t.len()));
        for (&at, &r) in self.arr_t.iter().zip(&self.arr_r) {
            match self.route_map[r as usize] {
                NONE => self.counters.unrouted += 1,
                s => {
                    t.push(at);
                    f.push(s);
                }
            }
        }
        self.arr_t.clear();
        self.arr_r.clear();
        // table writes before the arrivals: each is requested at its own packet's time
        let writes = std::mem::take(&mut self.writes);
        let mut per: BTreeMap<u16, Vec<super::learn::Write>> = BTreeMap::new();
        for w in writes {
            if let Some(Some(s)) = sim_of.get(w.keyed as usize) {
                per.entry(*s).or_default().push(w);
            }
        }
        for (s, ws) in per {
            let words = ws[0].key.len();
            sink.table_writes(s, words, &ws)?;
        }
        if !t.is_empty() {
            sink.push_arrivals(&t, &f)?;
        }
        Ok(())
    }

    /// Closes the output pcaps (renamed to their final names); returns the
    /// packets per egress port.
    pub fn finish(&mut self) -> std::io::Result<BTreeMap<u32, u64>> {
        match self.out.as_mut() {
            Some(o) => o.finish(),
            None => Ok(BTreeMap::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::capture::{tests::pcap, OnTruncated};
    use super::super::standin::{frame, Standin};
    use super::*;
    use std::collections::HashMap;

    /// Everything a sink was given.
    #[derive(Default)]
    struct Recorder {
        keys: Vec<Vec<(Vec<u32>, i32)>>,
        routes: Vec<Vec<(u16, u32)>>,
        arrivals: Vec<(u64, u32)>,
    }

    impl RouteSink for Recorder {
        fn append_keys(&mut self, table: u16, words: usize, keys: &[u32], expected: &[i32]) -> Result<(), String> {
            let t = table as usize;
            if self.keys.len() <= t {
                self.keys.resize(t + 1, Vec::new());
            }
            for (k, &e) in keys.chunks(words).zip(expected) {
                self.keys[t].push((k.to_vec(), e));
            }
            Ok(())
        }
        fn append_routes(&mut self, start: &[u32], table: &[u16], key: &[u32]) -> Result<(), String> {
            for w in start.windows(2) {
                self.routes.push((w[0] as usize..w[1] as usize).map(|h| (table[h], key[h])).collect());
            }
            Ok(())
        }
        fn push_arrivals(&mut self, t_ps: &[u64], flow: &[u32]) -> Result<(), String> {
            assert!(flow.iter().all(|&f| (f as usize) < self.routes.len()), "an arrival before its route");
            self.arrivals.extend(t_ps.iter().copied().zip(flow.iter().copied()));
            Ok(())
        }
    }

    /// `flows` flows, `reps` packets each, every frame different (IP id,
    /// TTL), interleaved; timestamps 1 µs apart from 100 s.
    fn capture(flows: u32, reps: u32) -> Vec<u8> {
        let mut frames = Vec::new();
        for r in 0..reps {
            for f in 0..flows {
                frames.push(frame(f, r));
            }
        }
        let t: Vec<(u32, u32, &[u8])> = frames.iter().enumerate().map(|(i, d)| (100 + i as u32 / 1_000_000, i as u32 % 1_000_000, &d[..])).collect();
        pcap(&t, false, false)
    }

    fn stream(bytes: Vec<u8>, clock: Clock) -> Stream {
        let c = Capture::from_reader("x.pcap", std::io::Cursor::new(bytes), OnTruncated::Error).unwrap();
        Stream::new(c, Standin::default().key_words_all(), clock, Port::Fixed(0), None, None).unwrap()
    }

    /// Runs a whole capture: fill and sync in periods of `period` ps.
    fn run_all(s: &mut Stream, sink: &mut Recorder, period: u64) {
        let mut exec = Standin::default();
        let mut until = period;
        s.fill(until, 100, &mut exec).unwrap(); // discover on the first 100 packets
        let visited = s.visited();
        let map = (0..3).map(|t| visited.iter().position(|&v| v == t).map(|i| i as u16)).collect();
        s.simulate(map).unwrap();
        while !s.is_done() {
            s.fill(until, u64::MAX, &mut exec).unwrap();
            s.sync(sink).unwrap();
            until += period;
        }
        s.sync(sink).unwrap();
    }

    #[test]
    fn every_packet_replays_its_own_visits() {
        let mut s = stream(capture(50, 7), Clock::Rate { gap_ps: 20_000.0 });
        let mut rec = Recorder::default();
        run_all(&mut s, &mut rec, 1_000_000);
        assert_eq!(s.counters.packets, 350);
        // Reference: each packet run alone, its visits as (table, key, entry).
        let frames: Vec<Vec<u8>> = (0..7).flat_map(|r| (0..50).map(move |f| frame(f, r))).collect();
        let mut exec = Standin::default();
        let mut want = Vec::new();
        let mut lookups = [0u64; 3];
        for (i, f) in frames.iter().enumerate() {
            let mut v = Visits::new();
            exec.run(f, 0, 0, &mut v, None);
            let hops: Vec<(u16, Vec<u32>, i32)> = (0..v.len()).map(|j| (v.table[j], v.key(j).to_vec(), v.entry[j])).collect();
            for h in &hops {
                lookups[h.0 as usize] += 1;
            }
            if !hops.is_empty() {
                want.push(((i as f64 * 20_000.0) as u64, hops));
            }
        }
        assert_eq!(s.counters.lookups, lookups.to_vec());
        // All three tables were visited in the first 100 packets: the
        // simulator's indices are the program's.
        let got: Vec<(u64, Vec<(u16, Vec<u32>, i32)>)> = rec
            .arrivals
            .iter()
            .map(|&(t, f)| {
                let hops = rec.routes[f as usize].iter().map(|&(tb, k)| {
                    let (key, e) = &rec.keys[tb as usize][k as usize];
                    (tb, key.clone(), *e)
                });
                (t, hops.collect())
            })
            .collect();
        assert_eq!(got, want);
        // Distinct routes: one per flow whatever the IP id and TTL.
        assert_eq!(rec.routes.len(), s.interner().n_routes());
        assert!(rec.routes.len() <= 50);
    }

    #[test]
    fn interned_state_does_not_grow_with_repetition() {
        let sizes = |reps: u32| {
            let mut s = stream(capture(40, reps), Clock::Timestamps);
            let mut rec = Recorder::default();
            run_all(&mut s, &mut rec, 5_000_000);
            let i = s.interner();
            (i.n_routes(), (0..3).map(|t| i.keys(t).2.len()).collect::<Vec<_>>(), i.memory_bytes(), rec.routes.len())
        };
        let a = sizes(2);
        assert_eq!(sizes(60), a);
    }

    #[test]
    fn timestamps_are_relative_and_never_go_back() {
        let f = frame(1, 0);
        let t: Vec<(u32, u32, &[u8])> = vec![(10, 0, &f), (10, 5, &f), (10, 3, &f), (11, 0, &f)];
        let mut s = stream(pcap(&t, false, false), Clock::Timestamps);
        assert_eq!(s.read(u64::MAX, 10).unwrap(), 4);
        assert_eq!(s.held().1, &[0, 5_000_000, 5_000_000, 1_000_000_000_000]);
        assert_eq!(s.counters.reordered, 1);
        // Reading up to a time stops after the first packet at or past it.
        let mut s = stream(pcap(&t, false, false), Clock::Timestamps);
        assert_eq!(s.read(4_000_000, 10).unwrap(), 2);
        let mut s = stream(pcap(&t, false, false), Clock::Rate { gap_ps: 1000.0 });
        assert_eq!(s.read(2500, 10).unwrap(), 3);
    }

    #[test]
    fn counters_match_a_direct_count() {
        let bytes = capture(30, 5);
        let mut s = stream(bytes, Clock::Rate { gap_ps: 1000.0 });
        let mut exec = Standin::default();
        s.fill(u64::MAX, u64::MAX, &mut exec).unwrap();
        let mut acts: HashMap<(u16, u32), u64> = HashMap::new();
        let (mut dropped, mut perr) = (0, 0);
        for r in 0..5 {
            for f in 0..30 {
                let mut v = Visits::new();
                let o = exec.run(&frame(f, r), 0, 0, &mut v, None);
                dropped += o.dropped as u64;
                perr += (o.parser_error != 0) as u64;
                for j in 0..v.len() {
                    *acts.entry((v.table[j], v.action[j])).or_default() += 1;
                }
            }
        }
        let c = &s.counters;
        for (&(t, a), &n) in &acts {
            assert_eq!(c.actions[t as usize][a.wrapping_add(1) as usize], n);
        }
        assert_eq!(c.actions.iter().flatten().sum::<u64>(), acts.values().sum::<u64>());
        assert_eq!((c.dropped, c.parser_errors.values().sum::<u64>()), (dropped, perr));
        assert!(dropped > 0 && perr > 0);
        assert_eq!(c.drops.iter().sum::<u64>(), dropped);
    }

    #[test]
    fn output_packets_go_to_one_pcap_per_port() {
        let dir = std::env::temp_dir().join(format!("synapse-stream-out-{}", std::process::id()));
        let c = Capture::from_reader("x", std::io::Cursor::new(capture(20, 2)), OnTruncated::Error).unwrap();
        let out = PcapOut::new(&dir).unwrap();
        let mut s = Stream::new(c, Standin::default().key_words_all(), Clock::Timestamps, Port::Fixed(0), None, Some(out)).unwrap();
        let mut exec = Standin::default();
        s.fill(u64::MAX, u64::MAX, &mut exec).unwrap();
        let per_port = s.finish().unwrap();
        assert_eq!(per_port.values().sum::<u64>(), s.counters.outputs);
        let c = &s.counters;
        let parser_errors: u64 = c.parser_errors.values().sum(); // short frames: no output
        assert_eq!(c.outputs, c.packets - c.dropped - parser_errors + c.copies);
        assert!(c.copies > 0);
        for (&p, &n) in &per_port {
            let mut c = Capture::open(&PcapOut::path(&dir, p), OnTruncated::Error).unwrap();
            let mut f = Frames::new();
            while c.next_into(&mut f).unwrap() {}
            assert_eq!(f.len() as u64, n);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unsimulated_tables_leave_their_hops_out() {
        let mut s = stream(capture(20, 3), Clock::Rate { gap_ps: 1000.0 });
        let mut exec = Standin::default();
        s.fill(u64::MAX, u64::MAX, &mut exec).unwrap();
        // Only the ACL (table 2) is simulated, as simulator table 0.
        s.simulate(vec![None, None, Some(0)]).unwrap();
        let mut rec = Recorder::default();
        s.sync(&mut rec).unwrap();
        assert!(rec.routes.iter().all(|r| r.iter().all(|&(t, _)| t == 0)));
        assert_eq!(rec.keys.len(), 1);
        assert_eq!(rec.arrivals.len() as u64, s.counters.lookups[2]);
        assert_eq!(s.counters.unrouted, s.counters.packets - s.counters.lookups[2]);
        assert!(s.simulate(vec![None; 3]).is_err());
    }
}

//! The traffic generator alone (`workload::traffic`), for callgrind:
//! `genspeed [FLOWS RUN_MS SKIP_MS DURATION_MS FLOW_DURATION_MS]` takes the
//! 120k-flow scenario's traffic (caida2019 at most 10 MB, 800 B packets,
//! seed 1; defaults 120000 100 0 100 25), skips the arrivals before SKIP_MS,
//! then draws those up to RUN_MS in `measure` and prints their count, a hash
//! of the sequence (same for any exact generator) and CPU ns per arrival.
//! Instructions: `valgrind --tool=callgrind --toggle-collect='*genspeed::measure'
//! target/release/examples/genspeed 120000 60 40`; the default scenario's
//! traffic is `genspeed 1200 2 0 1 0.25`.
use synapse_core::workload::{FlowSizeDist, Profile, Traffic, TrafficConfig};
const MS: u64 = 1_000_000_000;

#[inline(never)]
fn measure(tr: &mut Traffic, until: u64) -> (u64, u64) {
    let (mut n, mut h) = (0u64, 0u64);
    while let Some(a) = tr.next() {
        n += 1;
        h = h.wrapping_mul(31).wrapping_add(a.t_ps ^ a.flow as u64);
        if a.t_ps >= until {
            break;
        }
    }
    (n, h)
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let flows: u32 = a.get(1).map_or(120_000, |x| x.parse().unwrap());
    let run_ms: u64 = a.get(2).map_or(100, |x| x.parse().unwrap());
    let skip_ms: u64 = a.get(3).map_or(0, |x| x.parse().unwrap());
    let dur_ms: u64 = a.get(4).map_or(100, |x| x.parse().unwrap());
    let fdur_ms: f64 = a.get(5).map_or(25.0, |x| x.parse().unwrap());
    let dist = FlowSizeDist::builtin("caida2019")
        .unwrap()
        .truncated(10e6)
        .unwrap();
    let mut cfg = TrafficConfig::new(dist, flows, dur_ms * MS);
    cfg.flow_duration_ps = (fdur_ms * MS as f64) as u64;
    cfg.mean_pkt_bytes = 800.0;
    cfg.profile = Some(Profile::builtin("uniform").unwrap());
    cfg.seed = 1;
    let mut tr = Traffic::new(&cfg).unwrap();
    let (s, _) = measure_skip(&mut tr, skip_ms * MS);
    let c0 = cpu();
    let (n, h) = measure(&mut tr, run_ms * MS);
    let el = cpu() - c0;
    println!(
        "skipped {s}, {n} arrivals, hash {h:x}, {:.1} ns/arrival, active {}",
        el * 1e9 / n as f64,
        tr.active_flows()
    );
}

#[inline(never)]
fn measure_skip(tr: &mut Traffic, until: u64) -> (u64, u64) {
    let mut n = 0;
    while tr.next_time().is_some_and(|t| t < until) {
        tr.next();
        n += 1;
    }
    (n, 0)
}

/// User + system CPU seconds of this process (Linux `/proc/self/stat`).
fn cpu() -> f64 {
    let st = std::fs::read_to_string("/proc/self/stat").unwrap();
    let rest = st.rsplit(')').next().unwrap();
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f[i - 3].parse::<f64>().unwrap();
    (ticks(14) + ticks(15)) / 100.0
}

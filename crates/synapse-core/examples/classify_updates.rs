//! The update path alone, for profiling (`perf record`): random inserts of
//! copies of a generated set's rules at random positions and random
//! deletes, as `classify::churn` makes them, without lookups or the oracle:
//! `cargo run --release -p synapse-core --example classify_updates -- KIND N UPDATES [KEY=VALUE..]`
//! prints the leaves an update of each rule writes, the latency
//! distribution, the compactions' share and the slowest updates. The same
//! seed makes the same updates: an update slow in one run and not in the
//! next was slowed by the machine (another process on the core), not by
//! its work. With `SCHED=1` each update over a millisecond
//! also shows the time the thread was on the CPU (`/proc/thread-self/schedstat`).
use rand::{Rng, SeedableRng};
use synapse_core::classify::{build_incremental_n, BuildConfig};
use synapse_core::workload::{rulegen, seed::Params};

fn on_cpu_us() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    s.split_whitespace().next().and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0) / 1e3
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let kind = a.get(1).map_or("acl", |s| s.as_str());
    let n: usize = a.get(2).map_or(10_000, |s| s.parse().unwrap());
    let m: usize = a.get(3).map_or(200_000, |s| s.parse().unwrap());
    let set = rulegen::generate(&Params::builtin(kind).unwrap(), n, 1);
    let mut cfg = BuildConfig::default();
    for kv in a.iter().skip(4) {
        let (k, v) = kv.split_once('=').expect("KEY=VALUE");
        cfg.set(k, v).unwrap();
    }
    let sched = std::env::var_os("SCHED").is_some();
    // The leaves an update of each rule writes.
    let mut reach = synapse_core::classify::partition::PTree::build(&set, &cfg.ptree).unwrap().leaves_per_rule();
    reach.sort_unstable();
    let writes: usize = reach.iter().sum();
    println!(
        "{kind} {n}: leaves a rule reaches: mean {:.1}, p50 {}, p99 {}, max {}; the {} rules over 128 make {:.0} % of the leaf writes",
        writes as f64 / n as f64,
        reach[n / 2],
        reach[n * 99 / 100],
        reach[n - 1],
        reach.iter().filter(|&&x| x > 128).count(),
        100.0 * reach.iter().filter(|&&x| x > 128).sum::<usize>() as f64 / writes.max(1) as f64
    );
    let mut t = build_incremental_n("ptree", &set, &cfg).unwrap();
    let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
    let mut len = set.len();
    // (latency us, update, insert, compacts)
    let mut lat = Vec::with_capacity(m);
    let start = (std::time::Instant::now(), on_cpu_us());
    for i in 0..m {
        // As `classify::churn` keeps the set within a few per cent of its size.
        let insert = len < n + n / 32 + 1 && (len <= n - n / 32 || rng.gen::<bool>());
        let folds = t.folds_in(insert as usize, !insert as usize);
        let c0 = if sched { on_cpu_us() } else { 0.0 };
        let t0 = std::time::Instant::now();
        if insert {
            let pos = rng.gen_range(0..=len);
            t.insert(pos, set.rules[rng.gen_range(0..n)]).unwrap();
            len += 1;
        } else {
            t.delete(rng.gen_range(0..len)).unwrap();
            len -= 1;
        }
        let us = t0.elapsed().as_secs_f64() * 1e6;
        if sched && us > 1000.0 {
            println!("  update {i}: {us:.0} us, on the CPU {:.0} us", on_cpu_us() - c0);
        }
        lat.push((us, i, insert, folds));
    }
    let total = start.0.elapsed().as_secs_f64();
    // The thread's time on the CPU over the loop: the rate without the
    // time other processes took the core from it.
    let cpu = (on_cpu_us() - start.1) / 1e6;
    let mean = lat.iter().map(|x| x.0).sum::<f64>() / m as f64;
    let mut s = lat.clone();
    s.sort_by(|a, b| a.0.total_cmp(&b.0));
    let q = |p: f64| s[((m - 1) as f64 * p).round() as usize].0;
    println!(
        "{kind} {n}: {m} updates, {:.3} M/s ({:.3} M/s of time on the CPU), mean {mean:.2} us, p50 {:.2} p90 {:.2} p99 {:.2} p99.9 {:.1} max {:.0} us",
        m as f64 / total / 1e6,
        m as f64 / cpu.max(1e-9) / 1e6,
        q(0.5),
        q(0.9),
        q(0.99),
        q(0.999),
        q(1.0)
    );
    let fold: Vec<f64> = lat.iter().filter(|x| x.3).map(|x| x.0).collect();
    println!(
        "  {} compactions, mean {:.0} us, {:.1} % of the update time",
        fold.len(),
        fold.iter().sum::<f64>() / fold.len().max(1) as f64,
        100.0 * fold.iter().sum::<f64>() / (mean * m as f64)
    );
    let tail: f64 = s.iter().rev().take(m / 1000).map(|x| x.0).sum::<f64>() / m as f64;
    println!("  the slowest 0.1 % take {:.0} % of the update time", 100.0 * tail / mean);
    for x in s.iter().rev().take(6) {
        println!("  slow: {:.0} us, update {} ({}{})", x.0, x.1, if x.2 { "insert" } else { "delete" }, if x.3 { ", compacts" } else { "" });
    }
}

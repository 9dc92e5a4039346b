//! Runs one classifier's batch lookup over a ClassBench trace a fixed
//! number of times and nothing else, for profilers (`perf record`,
//! `valgrind --tool=cachegrind`) whose counts should come from lookups only:
//!
//! ```text
//! cargo run --release -p synapse-core --example classify_passes -- ALGO RULES TRACE PASSES [KEY=VALUE ...]
//! ```
//!
//! `updates=N` (ptree): first deletes N rules and inserts each back where it
//! was, so the lookups run with N tombstones and N rules in the delta and
//! the checksum is the one without updates.

use synapse_core::classify::partition::PTree;
use synapse_core::classify::{build_structure, BuildConfig, Structure};
use synapse_core::rules::{classbench, Key};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 4 {
        eprintln!("usage: classify_passes ALGO RULES TRACE PASSES [KEY=VALUE ...]");
        std::process::exit(2);
    }
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{p}: {e}"));
    let set = classbench::parse_rules(&read(&a[1]), &a[1]).unwrap_or_else(|e| panic!("{e}"));
    let keys: Vec<Key> = classbench::parse_trace(&read(&a[2]), &a[2]).unwrap_or_else(|e| panic!("{e}")).iter().map(|e| e.key).collect();
    let passes: usize = a[3].parse().expect("PASSES: a count");
    let mut cfg = BuildConfig::default();
    let mut updates = 0usize;
    for kv in &a[4..] {
        let (k, v) = kv.split_once('=').expect("KEY=VALUE");
        match k {
            "updates" => updates = v.parse().expect("updates: a count"),
            _ => cfg.set(k, v).unwrap_or_else(|e| panic!("{e}")),
        }
    }
    let c: Box<dyn Structure> = if updates > 0 && a[0] == "ptree" {
        let mut t = PTree::build(&set, &cfg.ptree).unwrap_or_else(|e| panic!("{e}"));
        for i in 0..updates {
            // Spread over the set; the same rule back at its position.
            let at = (i * 7919) % set.len();
            t.delete(at).unwrap();
            t.insert(at, set.rules[at]).unwrap();
        }
        let (delta, dead) = t.pending();
        println!("{updates} updates: {delta} rules in the delta, {dead} tombstones");
        Box::new(t)
    } else {
        build_structure(&a[0], &set, &cfg).unwrap_or_else(|e| panic!("{e}"))
    };
    let mut out = vec![0i32; keys.len()];
    let mut sum = 0i64;
    let start = (std::time::Instant::now(), cpu_ns());
    for _ in 0..passes {
        c.classify_batch(&keys, &mut out);
        sum += out.iter().map(|&x| x as i64).sum::<i64>();
    }
    let n = (passes * keys.len()).max(1) as f64;
    let ns = start.0.elapsed().as_secs_f64() * 1e9 / n;
    let cpu = start.1.zip(cpu_ns()).map_or(f64::NAN, |(a, b)| (b - a) as f64 / n);
    println!("{} lookups, checksum {sum}, {ns:.2} ns per lookup (on CPU: {cpu:.2} ns)", passes * keys.len());
}

/// This thread's time on a CPU (Linux: /proc/thread-self/schedstat), so a
/// comparison on a shared machine leaves out the time others ran.
fn cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat").ok()?.split_whitespace().next()?.parse().ok()
}

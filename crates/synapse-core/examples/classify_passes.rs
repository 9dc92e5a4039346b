//! Runs one classifier's batch lookup over a ClassBench trace a fixed
//! number of times and nothing else, for profilers (`perf record`,
//! `valgrind --tool=cachegrind`) whose counts should come from lookups only:
//!
//! ```text
//! cargo run --release -p synapse-core --example classify_passes -- ALGO RULES TRACE PASSES [KEY=VALUE ...]
//! ```

use synapse_core::classify::{build_structure, BuildConfig};
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
    for kv in &a[4..] {
        let (k, v) = kv.split_once('=').expect("KEY=VALUE");
        cfg.set(k, v).unwrap_or_else(|e| panic!("{e}"));
    }
    let c = build_structure(&a[0], &set, &cfg).unwrap_or_else(|e| panic!("{e}"));
    let mut out = vec![0i32; keys.len()];
    let mut sum = 0i64;
    for _ in 0..passes {
        c.classify_batch(&keys, &mut out);
        sum += out.iter().map(|&x| x as i64).sum::<i64>();
    }
    println!("{} lookups, checksum {sum}", passes * keys.len());
}

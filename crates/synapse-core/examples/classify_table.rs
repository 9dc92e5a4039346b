//! Measures the classifiers on ClassBench rule sets: build statistics,
//! bytes per rule, single-core lookups per second (one key at a time and
//! batched), and agreement with the linear oracle. Used by
//! `scripts/bench_classify.sh`; run it in release mode:
//!
//! ```text
//! cargo run --release -p synapse-core --example classify_table -- \
//!     [--algos linear,trie,dtree,ptree] [--secs 1] [--stride 8] [--budget-mb 1024] [--set KEY=VALUE] [--stats] \
//!     RULES[:TRACE] ...
//! ```
//!
//! An input is a ClassBench file `RULES[:TRACE]` or a generated set
//! `gen:TYPE:COUNT[:SEED]` (TYPE acl, fw or ipc; a 100K-header trace with
//! Pareto locality 1 0.1 is drawn from it). `--write DIR` writes every set and
//! trace as ClassBench files and the `--answers` algorithm's (default ptree)
//! answer per trace line
//! (`NAME.answers`, 0-based rule or -1) so that `dpdk-test-acl` can run on
//! the same input and be checked against us. Without a trace, keys are drawn
//! inside the rules. Output: one tab-separated line per (set, algorithm).

use std::time::Instant;
use synapse_core::classify::{build_structure, linear::Linear, BuildConfig, Classifier, Structure};
use synapse_core::rules::{classbench, Key, RuleSet};
use synapse_core::workload::{rulegen, seed::Params, tracegen};

fn die(msg: String) -> ! {
    eprintln!("classify_table: {msg}");
    std::process::exit(2)
}

/// Lookups per second of `f` over `keys`, repeated for at least `secs`.
fn rate(keys: &[Key], secs: f64, mut f: impl FnMut(&[Key]) -> i64) -> f64 {
    let mut sink = 0i64;
    let (mut n, start) = (0u64, Instant::now());
    loop {
        sink = sink.wrapping_add(f(keys));
        n += keys.len() as u64;
        let t = start.elapsed().as_secs_f64();
        if t >= secs {
            std::hint::black_box(sink);
            return n as f64 / t;
        }
    }
}

fn keys_inside(set: &RuleSet, n: usize) -> Vec<Key> {
    // A deterministic walk: a rule, then a point inside each of its fields.
    let widths = [32u8, 32, 16, 16, 8];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|_| {
            if set.is_empty() {
                return Key::five_tuple(next() as u32, next() as u32, next() as u16, next() as u16, next() as u8);
            }
            let r = &set.rules[next() as usize % set.len()];
            let mut k = [0u32; 5];
            for f in 0..5 {
                let (lo, hi) = r.fields[f].as_range(widths[f]).unwrap_or((r.fields[f].lo, r.fields[f].lo));
                k[f] = lo + (next() % (hi as u64 - lo as u64 + 1)) as u32;
            }
            Key::five_tuple(k[0], k[1], k[2] as u16, k[3] as u16, k[4] as u8)
        })
        .collect()
}

fn main() {
    let mut algos = vec!["linear".to_string(), "trie".into(), "dtree".into(), "ptree".into()];
    let (mut secs, mut stats) = (1.0f64, false);
    let mut cfg = BuildConfig::default();
    let mut inputs = Vec::new();
    let mut write: Option<std::path::PathBuf> = None;
    let mut answers = "ptree".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |name: &str| args.next().unwrap_or_else(|| die(format!("{name} needs a value")));
        match a.as_str() {
            "--algos" => algos = val("--algos").split(',').map(String::from).collect(),
            "--secs" => secs = val("--secs").parse().unwrap_or_else(|_| die("--secs: expected seconds".into())),
            "--stride" => cfg.trie.stride = val("--stride").parse().unwrap_or_else(|_| die("--stride: expected 1..16".into())),
            "--bucket" => cfg.dtree.bucket = val("--bucket").parse().unwrap_or_else(|_| die("--bucket: expected a count".into())),
            "--budget-mb" => {
                let mb: u64 = val("--budget-mb").parse().unwrap_or_else(|_| die("--budget-mb: expected MiB".into()));
                cfg.trie.max_bytes = mb << 20;
                cfg.dtree.max_bytes = mb << 20;
            }
            "--set" => {
                let kv = val("--set");
                let (k, v) = kv.split_once('=').unwrap_or_else(|| die(format!("--set: expected KEY=VALUE, found {kv:?}")));
                cfg.set(k, v).unwrap_or_else(|e| die(format!("--set: {e}")));
            }
            "--stats" => stats = true,
            "--write" => write = Some(val("--write").into()),
            "--answers" => answers = val("--answers"),
            s if s.starts_with("--") => die(format!("unknown option {s}")),
            _ => inputs.push(a),
        }
    }
    if cfg!(debug_assertions) {
        die("refusing to measure a debug build: use --release".into());
    }
    println!("set\trules\talgo\tbuild_ms\tbytes\tbytes_per_rule\tsw_bytes_per_rule\tmlps_single\tmlps_batch\tagree");
    for input in inputs {
        let (name, set, keys) = if let Some(spec) = input.strip_prefix("gen:") {
            let parts: Vec<&str> = spec.split(':').collect();
            let (kind, count) = match parts.as_slice() {
                [k, c] | [k, c, _] => (*k, c.parse::<usize>().unwrap_or_else(|_| die(format!("{input}: bad count")))),
                _ => die(format!("{input}: expected gen:TYPE:COUNT[:SEED]")),
            };
            let seed: u64 = parts.get(2).map_or(1, |s| s.parse().unwrap_or_else(|_| die(format!("{input}: bad seed"))));
            let params = Params::builtin(kind).unwrap_or_else(|| die(format!("{input}: type must be acl, fw or ipc")));
            let set = rulegen::generate(&params, count, seed);
            let pareto = tracegen::Pareto::new(1.0, 0.1).unwrap();
            let trace = tracegen::generate(&set, 100_000, pareto, seed);
            let name = format!("gen_{kind}_{count}");
            if let Some(dir) = &write {
                let rules = classbench::format_rules(&set).unwrap_or_else(|e| die(e));
                std::fs::write(dir.join(&name), rules).unwrap_or_else(|e| die(format!("{}: {e}", dir.display())));
                let lines: Vec<String> = trace.iter().map(classbench::format_trace_entry).collect();
                std::fs::write(dir.join(format!("{name}_trace")), lines.join("\n") + "\n").unwrap_or_else(|e| die(e.to_string()));
            }
            (name, set, trace.iter().map(|e| e.key).collect::<Vec<Key>>())
        } else {
            let (rules_path, trace_path) = match input.split_once(':') {
                Some((r, t)) => (r.to_string(), Some(t.to_string())),
                None => (input.clone(), None),
            };
            let name = std::path::Path::new(&rules_path).file_name().unwrap().to_string_lossy().to_string();
            let text = std::fs::read_to_string(&rules_path).unwrap_or_else(|e| die(format!("{rules_path}: {e}")));
            let set = classbench::parse_rules(&text, &rules_path).unwrap_or_else(|e| die(e.to_string()));
            let keys: Vec<Key> = match &trace_path {
                Some(t) => {
                    let text = std::fs::read_to_string(t).unwrap_or_else(|e| die(format!("{t}: {e}")));
                    classbench::parse_trace(&text, t).unwrap_or_else(|e| die(e.to_string())).iter().map(|e| e.key).collect()
                }
                None => keys_inside(&set, 100_000),
            };
            (name, set, keys)
        };
        // The oracle's answers on a sample, to check every structure.
        let sample = &keys[..keys.len().min(20_000)];
        let lin = Linear::new(&set);
        let want: Vec<i32> = sample.iter().map(|k| lin.classify(k).map_or(-1, |r| r as i32)).collect();
        for algo in &algos {
            let t0 = Instant::now();
            let c: Box<dyn Structure> = match build_structure(algo, &set, &cfg) {
                Ok(c) => c,
                Err(e) => {
                    println!("{name}\t{}\t{algo}\t-\t-\t-\t-\t-\t-\tbuild failed: {e}", set.len());
                    continue;
                }
            };
            let build_ms = t0.elapsed().as_secs_f64() * 1e3;
            let mut out = vec![0i32; sample.len()];
            c.classify_batch(sample, &mut out);
            let agree = out.iter().zip(&want).filter(|(a, b)| a == b).count();
            // The linear scan is O(N): give it a shorter key list.
            let keys = if algo == "linear" && set.len() > 5000 { &keys[..keys.len().min(2000)] } else { &keys[..] };
            let single = rate(keys, secs, |ks| ks.iter().map(|k| c.classify(k).map_or(-1, |r| r as i64)).sum());
            let mut buf = vec![0i32; keys.len()];
            let batch = rate(keys, secs, |ks| {
                c.classify_batch(ks, &mut buf);
                buf.iter().map(|&x| x as i64).sum()
            });
            if *algo == answers {
                if let Some(dir) = &write {
                    let mut all = vec![0i32; keys.len()];
                    c.classify_batch(keys, &mut all);
                    let text: Vec<String> = all.iter().map(|a| a.to_string()).collect();
                    std::fs::write(dir.join(format!("{name}.answers")), text.join("\n") + "\n").unwrap_or_else(|e| die(e.to_string()));
                }
            }
            let bytes = c.memory_bytes();
            // The software structure's own size where it differs from the
            // hardware layout (the decision tree).
            let sw = c.stats().into_iter().find(|(k, _)| *k == "bytes (software)").map_or(bytes, |(_, v)| v.parse().unwrap_or(bytes));
            let per_rule = |b: u64| b as f64 / set.len().max(1) as f64;
            println!(
                "{name}\t{}\t{algo}\t{build_ms:.1}\t{bytes}\t{:.1}\t{:.1}\t{:.3}\t{:.3}\t{agree}/{}",
                set.len(),
                per_rule(bytes),
                per_rule(sw),
                single / 1e6,
                batch / 1e6,
                sample.len()
            );
            if stats {
                // Memory reads per lookup as the ELU would make them.
                let mut acc = Vec::new();
                let (mut reads, mut bytes) = (0usize, 0u64);
                for k in sample {
                    acc.clear();
                    c.walk(k, &mut acc);
                    reads += acc.len();
                    bytes += acc.iter().map(|a| a.bytes as u64).sum::<u64>();
                }
                let n = sample.len().max(1) as f64;
                eprintln!("  {name} {algo}: reads per lookup = {:.2} ({:.0} bytes)", reads as f64 / n, bytes as f64 / n);
                for (k, v) in c.stats() {
                    eprintln!("  {name} {algo}: {k} = {v}");
                }
            }
        }
    }
}

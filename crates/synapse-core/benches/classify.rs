//! Batched lookups of the ELU's structures next to the linear oracle, on
//! generated ClassBench-style sets (acl, fw, ipc; 1K and 10K rules) with a
//! ClassBench trace. `cargo bench -p synapse-core --bench classify`.
//! `-- ptree_updates`: the partitioned tree's incremental updates, an insert
//! and a delete at random positions per iteration, fold-ins included.
//! The full table, with DPDK's rte_acl beside, is `scripts/bench_classify.sh`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use synapse_core::classify::partition::{PTree, PTreeConfig};
use synapse_core::classify::{build_structure, BuildConfig};
use synapse_core::rules::Key;
use synapse_core::workload::{rulegen, seed::Params, tracegen};

fn lookups(c: &mut Criterion) {
    // A small trie budget: set pruning fails fast on the sets it cannot hold.
    let mut config = BuildConfig::default();
    config.trie.max_bytes = 64 << 20;
    let mut g = c.benchmark_group("classify_batch");
    g.sample_size(10);
    for kind in ["acl", "fw", "ipc"] {
        for n in [1_000usize, 10_000] {
            let set = rulegen::generate(&Params::builtin(kind).unwrap(), n, 1);
            let trace = tracegen::generate(&set, 20_000, tracegen::Pareto::new(1.0, 0.1).unwrap(), 1);
            let keys: Vec<Key> = trace.iter().map(|e| e.key).collect();
            let mut out = vec![0i32; keys.len()];
            g.throughput(Throughput::Elements(keys.len() as u64));
            for algo in ["trie", "dtree", "linear"] {
                if algo == "linear" && n > 1_000 {
                    continue;
                }
                let Ok(s) = build_structure(algo, &set, &config) else {
                    eprintln!("{algo} on {kind} {n}: over budget, skipped");
                    continue;
                };
                g.bench_with_input(BenchmarkId::new(algo, format!("{kind}_{n}")), &keys, |b, keys| {
                    b.iter(|| s.classify_batch(keys, &mut out))
                });
            }
        }
    }
    g.finish();
}

fn ptree_updates(c: &mut Criterion) {
    let mut g = c.benchmark_group("ptree_updates");
    g.sample_size(10);
    for kind in ["acl", "fw"] {
        for n in [1_000usize, 10_000] {
            let set = rulegen::generate(&Params::builtin(kind).unwrap(), n, 1);
            let more = rulegen::generate(&Params::builtin(kind).unwrap(), 1_000, 2);
            let mut t = PTree::build(&set, &PTreeConfig::default()).unwrap();
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            // Per element one operation: an iteration is an insert and a delete.
            g.throughput(Throughput::Elements(2));
            g.bench_function(BenchmarkId::new("insert+delete", format!("{kind}_{n}")), |b| {
                b.iter(|| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let len = t.len() as u64;
                    t.insert((x % (len + 1)) as usize, more.rules[(x >> 32) as usize % more.len()]).unwrap();
                    t.delete(((x >> 16) % (len + 1)) as usize).unwrap();
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, lookups, ptree_updates);
criterion_main!(benches);

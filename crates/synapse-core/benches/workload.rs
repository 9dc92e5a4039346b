//! Speed of the ClassBench workloads: rule generation (rules/s for 100K-rule
//! sets of each built-in type), trace generation (headers/s, 1M headers from
//! a 10K acl set), and the linear oracle (lookups/s on a 1K acl set, the size
//! of ClassBench's acl1_1k, with its generated trace).
//!
//! `cargo bench -p synapse-core --bench workload`

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use synapse_core::classify::{linear::Linear, Classifier};
use synapse_core::rules::Key;
use synapse_core::workload::{rulegen, seed::Params, tracegen};

fn workload(c: &mut Criterion) {
    if cfg!(debug_assertions) {
        panic!("benchmarks need a release build");
    }
    let mut g = c.benchmark_group("rulegen");
    g.sample_size(10);
    g.throughput(Throughput::Elements(100_000));
    for kind in ["acl", "fw", "ipc"] {
        let p = Params::builtin(kind).unwrap();
        g.bench_function(format!("{kind}_100k"), |b| b.iter(|| black_box(rulegen::generate(&p, 100_000, 1))));
    }
    g.finish();

    let acl10k = rulegen::generate(&Params::builtin("acl").unwrap(), 10_000, 1);
    let mut g = c.benchmark_group("tracegen");
    g.sample_size(10);
    g.throughput(Throughput::Elements(1_000_000));
    g.bench_function("acl10k_1m", |b| {
        b.iter(|| black_box(tracegen::generate(&acl10k, 1_000_000, tracegen::Pareto::default(), 1)))
    });
    g.finish();

    let acl1k = rulegen::generate(&Params::builtin("acl").unwrap(), 1_000, 1);
    let keys: Vec<Key> = tracegen::generate(&acl1k, 100_000, tracegen::Pareto::default(), 2)
        .into_iter()
        .map(|e| e.key)
        .collect();
    let lin = Linear::new(&acl1k);
    let mut out = vec![0i32; keys.len()];
    let mut g = c.benchmark_group("linear");
    g.sample_size(10);
    g.throughput(Throughput::Elements(keys.len() as u64));
    g.bench_function("acl1k_100k_lookups", |b| {
        b.iter(|| {
            lin.classify_batch(&keys, &mut out);
            black_box(out[0])
        })
    });
    g.finish();
}

criterion_group!(benches, workload);
criterion_main!(benches);

//! Simulated keys per second on the default scenario (1 ms, 2000 CAIDA
//! flows, 8 PMUs × 256), single core; building the rule set, trie and
//! traffic is excluded. `cargo bench -p synapse-core --bench sim`
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use synapse_core::sim::{Config, Simulator};

fn bench(c: &mut Criterion) {
    let mut cfg = Config::default();
    cfg.tables[0].pmus = (0..cfg.pmus.count).collect();
    let probe = {
        let mut s = Simulator::new(cfg.clone()).unwrap();
        s.run_until_ns(cfg.duration_ns);
        s.keys_done()
    };
    let mut g = c.benchmark_group("sim");
    g.throughput(Throughput::Elements(probe));
    g.sample_size(10);
    g.bench_function("default_1ms", |b| {
        b.iter_batched(
            || Simulator::new(cfg.clone()).unwrap(),
            |mut s| {
                s.run_until_ns(cfg.duration_ns);
                s.keys_done()
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

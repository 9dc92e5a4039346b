//! Simulated keys per second on the default scenario, single core.
//! `cargo bench -p synapse-core --bench sim`
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use synapse_core::sim::{Config, Simulator};

fn bench(c: &mut Criterion) {
    let mut cfg = Config::default();
    cfg.duration_ns = 200_000.0;
    let probe = {
        let mut s = Simulator::new(cfg.clone()).unwrap();
        s.run_until_ns(cfg.duration_ns);
        s.keys_done()
    };
    let mut g = c.benchmark_group("sim");
    g.throughput(Throughput::Elements(probe));
    g.sample_size(10);
    g.bench_function("default_200us", |b| {
        b.iter(|| {
            let mut s = Simulator::new(cfg.clone()).unwrap();
            s.run_until_ns(cfg.duration_ns);
            s.keys_done()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

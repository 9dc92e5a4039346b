//! Simulated keys per second, single core, building the rule set, trie and
//! traffic excluded (`cargo bench -p synapse-core --bench sim`):
//! - `default_1ms`: the scenario of `synapse run` (benches/scenarios/);
//! - `flows120k_100ms`: `synapse run --set duration_ns=100000000 --set
//!   traffic.flows=120000 --set traffic.flow_duration_ns=25000000`, the
//!   long run whose speed must not fall as it grows (one iteration takes
//!   seconds; pick one with a name filter: `-- flows120k`);
//! - `config_default_1ms`: `Config::default()` with every PMU on the table.
//!
//! Throughput is reported in keys (table lookups completed) per second.
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use synapse_core::sim::{Config, Simulator};

fn scenario(name: &str) -> Config {
    let path = format!("{}/benches/scenarios/{name}.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn bench_one(c: &mut Criterion, name: &str, cfg: Config) {
    // Criterion filters by name only after the probe run below: skip early.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if filter.is_some_and(|f| !name.contains(&f)) {
        return;
    }
    let probe = {
        let mut s = Simulator::new(cfg.clone()).unwrap();
        s.run_until_ns(cfg.duration_ns);
        s.keys_done()
    };
    let mut g = c.benchmark_group("sim");
    g.throughput(Throughput::Elements(probe));
    g.sample_size(10);
    g.bench_function(name, |b| {
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

fn bench(c: &mut Criterion) {
    bench_one(c, "default_1ms", scenario("default_1ms"));
    let mut cfg = Config::default();
    cfg.tables[0].pmus = (0..cfg.pmus.count).collect();
    bench_one(c, "config_default_1ms", cfg);
    bench_one(c, "flows120k_100ms", scenario("flows120k_100ms"));
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! Arrivals per second of the flow-level traffic model (`workload::traffic`).
//!
//! `cargo bench -p synapse-core --bench traffic`. Loads: 10K flows over 10 ms
//! (about 1K flows active at once) and 1M flows (about 100K active), CAIDA
//! 2019 sizes truncated at 10 MB so one elephant does not dominate; and the
//! up-front plan (sizes and starts) of 100K flows.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use synapse_core::workload::{FlowSizeDist, Profile, Traffic, TrafficConfig};

const MS: u64 = 1_000_000_000;
const BATCH: u64 = 1_000_000;

fn arrivals(c: &mut Criterion) {
    if cfg!(debug_assertions) {
        panic!("benchmarks need a release build");
    }
    let dist = FlowSizeDist::builtin("caida2019")
        .unwrap()
        .truncated(10e6)
        .unwrap();
    let mut g = c.benchmark_group("traffic");
    g.throughput(Throughput::Elements(BATCH));
    g.sample_size(10);
    for (name, flows, profile) in [
        ("10k_flows", 10_000u32, None),
        ("1m_flows", 1_000_000, None),
        ("1m_flows_diurnal", 1_000_000, Some("diurnal")),
    ] {
        let mut cfg = TrafficConfig::new(dist.clone(), flows, 10 * MS);
        cfg.profile = profile.map(|p| Profile::builtin(p).unwrap());
        cfg.seed = 1;
        // Run a third of the way in so the heap holds its steady-state flows.
        let mut warm = Traffic::new(&cfg).unwrap();
        let skip = warm.total_packets() / 3;
        for _ in 0..skip {
            black_box(warm.next());
        }
        g.bench_function(name, |b| {
            b.iter_batched(
                || warm.clone(),
                |mut tr| {
                    let mut last = 0;
                    for _ in 0..BATCH {
                        last = tr.next().map_or(last, |a| a.t_ps);
                    }
                    black_box(last)
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();

    let mut g = c.benchmark_group("traffic_plan");
    g.throughput(Throughput::Elements(100_000));
    g.sample_size(10);
    g.bench_function("plan_100k_flows", |b| {
        let mut cfg = TrafficConfig::new(dist.clone(), 100_000, 10 * MS);
        cfg.seed = 1;
        b.iter(|| black_box(Traffic::new(&cfg).unwrap().total_packets()))
    });
    g.finish();
}

criterion_group!(benches, arrivals);
criterion_main!(benches);

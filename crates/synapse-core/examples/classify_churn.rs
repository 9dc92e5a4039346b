//! Lookups under update churn on a generated set, for quick measurements:
//! `cargo run --release -p synapse-core --example classify_churn -- KIND N RATE SECS`
//! (`synapse bench classify --updates-per-s` is the user's command).
use synapse_core::classify::{build_incremental_n, churn, BuildConfig};
use synapse_core::rules::Key;
use synapse_core::workload::{rulegen, seed::Params, tracegen};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let kind = a.get(1).map_or("acl", |s| s.as_str());
    let n: usize = a.get(2).map_or(10_000, |s| s.parse().unwrap());
    let rate: f64 = a.get(3).map_or(1e6, |s| s.parse().unwrap());
    let secs: f64 = a.get(4).map_or(1.0, |s| s.parse().unwrap());
    let set = rulegen::generate(&Params::builtin(kind).unwrap(), n, 1);
    let keys: Vec<Key> = tracegen::generate(&set, 100_000, tracegen::Pareto::new(1.0, 0.1).unwrap(), 2).iter().map(|e| e.key).collect();
    let mut cfg = BuildConfig::default();
    for kv in a.iter().skip(5) {
        let (k, v) = kv.split_once('=').expect("KEY=VALUE");
        cfg.set(k, v).unwrap();
    }
    for r in [0.0, rate] {
        let mut t = build_incremental_n("ptree", &set, &cfg).unwrap();
        let rep = churn::run(t.as_mut(), &set, &keys, r, secs, 7);
        println!(
            "{kind} {n} rate {r:e}: {:.2} M lookups/s, {:.3} M updates/s sustained (capacity {:.3} M/s), p50 {:.2} us p99 {:.2} us max {:.0} us, wrong {}/{}",
            rep.lookups_per_s() / 1e6,
            rep.updates_per_s() / 1e6,
            rep.update_capacity_per_s() / 1e6,
            rep.update_latency_us_p50,
            rep.update_latency_us_p99,
            rep.update_latency_us_max,
            rep.wrong,
            rep.checked
        );
    }
}

//! The fast mode's bias apart from its noise, for development: `cargo run
//! --release -p synapse-core --example fastseeds SCENARIO.json SEEDS
//! [sim.KEY=VALUE | FAST_KEY=VALUE ...]` runs the exact engine once and the
//! fast mode with fast seeds 0..SEEDS, and prints the exact figures, the
//! fast ones' means with their standard errors, and the first seeds' hit
//! rate / mean latency / throughput (one run's spread). A difference of
//! the mean from the exact value beyond a few standard errors is a bias
//! of the method; within them, the seed's luck. SCENARIO.json as `synapse
//! run` hands it to the core (`Scenario.to_json()`, benches/scenarios).
use synapse_core::sim::{fast::FastConfig, Config, Simulator};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 || args[1].parse::<u64>().is_err() {
        eprintln!("usage: fastseeds SCENARIO.json SEEDS [sim.KEY=VALUE | FAST_KEY=VALUE ...]");
        std::process::exit(2);
    }
    let mut j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&args[0]).unwrap()).unwrap();
    let seeds: u64 = args[1].parse().unwrap();
    let mut sets = serde_json::to_value(FastConfig::default()).unwrap();
    for a in &args[2..] {
        let (k, v) = a.split_once('=').unwrap();
        if let Some(x) = k.strip_prefix("sim.") {
            let parts: Vec<&str> = x.split('.').collect();
            let mut node = &mut j;
            for p in &parts[..parts.len() - 1] {
                node = if let Ok(i) = p.parse::<usize>() { &mut node[i] } else { &mut node[*p] };
            }
            node[parts[parts.len() - 1]] = serde_json::from_str(v).unwrap();
        } else {
            sets[k] = serde_json::from_str(v).unwrap();
        }
    }
    let c: Config = serde_json::from_value(j).unwrap();
    let mut ex = Simulator::new(c.clone()).unwrap();
    ex.run_until_ns(c.duration_ns);
    let es = ex.summary();
    for (name, e) in &es {
        println!("exact {name} hit {:.4} lat {:.2} p99 {:.2} thr {:.4} offered {:.4} sojourn {:.2}", e.hit_rate, e.mean_latency_ns, e.p99_latency_ns, e.throughput_mpps, e.offered_mpps, e.mean_sojourn_ns);
    }
    let nt = es.len();
    let mut acc = vec![[0.0f64; 8]; nt];
    let mut lats = vec![Vec::new(); nt];
    for s in 0..seeds {
        sets["seed"] = serde_json::json!(s);
        let fc: FastConfig = serde_json::from_value(sets.clone()).unwrap();
        let mut fa = Simulator::new(c.clone()).unwrap();
        let r = fa.run_fast(&fc).unwrap();
        for (t, ft) in r.tables.iter().enumerate() {
            let v = [ft.hit_rate.value, ft.mean_latency_ns.value, ft.p99_latency_ns.value, ft.throughput_mpps.value, ft.hits.value, ft.misses.value, ft.offered_mpps.value, ft.mean_sojourn_ns.value];
            lats[t].push((ft.hit_rate.value, ft.mean_latency_ns.value, ft.throughput_mpps.value));
            for i in 0..8 { acc[t][i] += v[i]; }
        }
    }
    for t in 0..nt {
        let m: Vec<f64> = acc[t].iter().map(|x| x / seeds as f64).collect();
        let sd = |f: &dyn Fn(&(f64, f64, f64)) -> f64| { let v: Vec<f64> = lats[t].iter().map(f).collect(); let mu = v.iter().sum::<f64>() / v.len() as f64; (v.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / (v.len() - 1) as f64 / v.len() as f64).sqrt() };
        println!("fast  {} hit {:.4} (se {:.4}) lat {:.2} (se {:.2}) p99 {:.2} thr {:.4} (se {:.4}) hits {:.0} misses {:.0} offered {:.4} sojourn {:.2}", es[t].0, m[0], sd(&|x| x.0), m[1], sd(&|x| x.1), m[2], m[3], sd(&|x| x.2), m[4], m[5], m[6], m[7]);
        let l: Vec<String> = lats[t].iter().take(40).map(|x| format!("{:.4}/{:.1}/{:.2}", x.0, x.1, x.2)).collect();
        println!("      first seeds: {}", l.join(" "));
    }
}

//! The fast mode beside the exact engine on one scenario, for development:
//! `cargo run --release -p synapse-core --example fastcheck [SCENARIO.json]
//! [KEY=VALUE of the fast config ...]` (the default scenario if none; a JSON
//! as `synapse run` passes it to the core, see benches/scenarios). Prints
//! both summaries, their differences and the run times (interleaved rounds
//! are `synapse bench fast`'s job).
use std::time::Instant;
use synapse_core::sim::{fast::FastConfig, Config, Simulator};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut c = Config::default();
    let mut fc = FastConfig::default();
    let mut sets = serde_json::to_value(&fc).unwrap();
    for a in &args {
        if a.ends_with(".json") {
            c = serde_json::from_str(&std::fs::read_to_string(a).unwrap()).unwrap();
        } else if let Some((k, v)) = a.split_once('=') {
            if let Some(x) = k.strip_prefix("sim.") {
                let mut j = serde_json::to_value(&c).unwrap();
                let mut node = &mut j;
                let parts: Vec<&str> = x.split('.').collect();
                for p in &parts[..parts.len() - 1] {
                    node = if let Ok(i) = p.parse::<usize>() { &mut node[i] } else { &mut node[*p] };
                }
                node[parts[parts.len() - 1]] = serde_json::from_str(v).unwrap_or(serde_json::Value::String(v.into()));
                c = serde_json::from_value(j).unwrap();
            } else {
                sets[k] = serde_json::from_str(v).unwrap();
            }
        }
    }
    fc = serde_json::from_value(sets).unwrap();
    let mut ex = Simulator::new(c.clone()).unwrap();
    let t0 = Instant::now();
    ex.run_until_ns(c.duration_ns);
    let te = t0.elapsed().as_secs_f64();
    let mut fa = Simulator::new(c.clone()).unwrap();
    let t1 = Instant::now();
    let r = fa.run_fast(&fc).unwrap();
    let tf = t1.elapsed().as_secs_f64();
    println!(
        "exact {:.4} s ({:.2} M keys/s), fast {:.5} s: {:.1}x; rate {:.4}, {} sampled flows, {} refs, {} ELU windows, {} measured misses",
        te,
        ex.keys_done() as f64 / te / 1e6,
        tf,
        te / tf,
        r.rate,
        r.sampled_flows,
        r.sampled_refs,
        r.elu_windows,
        r.measured_misses
    );
    for ((name, e), f) in ex.summary().into_iter().zip(&r.tables) {
        let row = |k: &str, x: f64, est: synapse_core::sim::fast::Estimate| {
            let inside = est.lo <= x && x <= est.hi;
            let rel = if x != 0.0 { (est.value - x) / x } else { 0.0 };
            println!(
                "  {name:>10} {k:>16}: exact {x:>12.5} fast {:>12.5} [{:>12.5}, {:>12.5}] {:>+8.4}{} {}",
                est.value,
                est.lo,
                est.hi,
                if k == "hit_rate" { est.value - x } else { rel },
                if k == "hit_rate" { " abs" } else { " rel" },
                if inside { "" } else { "OUT" }
            );
        };
        row("hit_rate", e.hit_rate, f.hit_rate);
        row("mean_latency_ns", e.mean_latency_ns, f.mean_latency_ns);
        row("p99_latency_ns", e.p99_latency_ns, f.p99_latency_ns);
        row("mean_sojourn_ns", e.mean_sojourn_ns, f.mean_sojourn_ns);
        row("hbm_gbps", e.hbm_gbps, f.hbm_gbps);
        row("offered_mpps", e.offered_mpps, f.offered_mpps);
        row("throughput_mpps", e.throughput_mpps, f.throughput_mpps);
        row("drops", e.drops as f64, f.drops);
    }
}

//! Simulated keys per second on the default scenario:
//! `cargo run --release -p synapse-core --example simspeed [duration_us] [flows] [flow_duration_us]`
//! (the flows last the whole run unless `flow_duration_us` is given), or
//! `... --example simspeed SCENARIO.json [run_ns]` for a scenario as
//! `synapse run` passes it to the core (optionally only its first `run_ns`,
//! e.g. to profile the start of a long run).
use std::time::Instant;
use synapse_core::sim::{config::Traffic, Config, Simulator};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if let Some(path) = a.get(1).filter(|p| p.ends_with(".json")) {
        // A scenario as `synapse` passes it to the core (see benches/sim.rs).
        let c: Config = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let run_ns = a.get(2).map_or(c.duration_ns, |x| x.parse().unwrap());
        return measure(c, run_ns);
    }
    let dur_us: f64 = a.get(1).map_or(1000.0, |x| x.parse().unwrap());
    let mut c = Config {
        duration_ns: dur_us * 1000.0,
        ..Config::default()
    };
    if let Some(f) = a.get(2) {
        if let Traffic::Flows {
            flows,
            flow_duration_ns,
            ..
        } = &mut c.traffic
        {
            *flows = f.parse().unwrap();
            *flow_duration_ns = a.get(3).map_or(dur_us, |x| x.parse().unwrap()) * 1000.0;
        }
    }
    let run_ns = c.duration_ns;
    measure(c, run_ns)
}

fn measure(c: Config, run_ns: f64) {
    let t0 = Instant::now();
    let mut s = Simulator::new(c.clone()).unwrap();
    let t1 = Instant::now();
    let cpu0 = cpu_seconds();
    s.run_until_ns(run_ns);
    let run = t1.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let keys = s.keys_done();
    println!(
        "build {:.3} s, run {:.3} s, {} keys, {:.2} M keys/s, {} of {} cycles stepped",
        (t1 - t0).as_secs_f64(),
        run,
        keys,
        keys as f64 / run / 1e6,
        s.busy_cycles,
        s.now()
    );
    if cpu > 0.0 {
        // CPU time is steadier than wall clock on a shared machine (10 ms ticks).
        println!(
            "run cpu {:.2} s, {:.2} M keys/s of cpu",
            cpu,
            keys as f64 / cpu / 1e6
        );
    }
    println!("{:?}", s.summary());
}

/// User + system CPU time of this process (Linux `/proc/self/stat`), 0 elsewhere.
fn cpu_seconds() -> f64 {
    let Ok(st) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some(rest) = st.rsplit(')').next() else {
        return 0.0;
    };
    // Fields after the command: state is field 3; utime, stime are 14, 15.
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i - 3).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(14) + ticks(15)) / 100.0
}

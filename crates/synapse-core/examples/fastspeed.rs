//! The fast mode's own cost, for development: `cargo run --release -p
//! synapse-core --example fastspeed SCENARIO.json RUNS [FAST_KEY=VALUE ...]`
//! runs the fast mode RUNS times, each on a simulator just built (as
//! `synapse bench fast` does), and prints the median and quartiles of the
//! CPU time of its thread. `--dump FILE` instead writes the report of fast
//! seeds 0..RUNS, one JSON line each (two builds' dumps are equal iff
//! their estimates are). SCENARIO.json as `synapse run` hands it to the
//! core (`Scenario.to_json()`, benches/scenarios). With FASTSPEED_WARM
//! set, every run is on one simulator (warm caches), for comparison.
use synapse_core::program::stream::thread_cpu;
use synapse_core::sim::{fast::FastConfig, Config, Simulator};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let dump = args.iter().position(|a| a == "--dump").map(|i| {
        let f = args.get(i + 1).cloned().unwrap_or_default();
        args.drain(i..(i + 2).min(args.len()));
        f
    });
    if args.len() < 2 || args[1].parse::<usize>().is_err() || dump.as_deref() == Some("") {
        eprintln!("usage: fastspeed SCENARIO.json RUNS [--dump FILE] [FAST_KEY=VALUE ...]");
        std::process::exit(2);
    }
    let c: Config = serde_json::from_str(&std::fs::read_to_string(&args[0]).unwrap()).unwrap();
    let runs: usize = args[1].parse().unwrap();
    let mut sets = serde_json::to_value(FastConfig::default()).unwrap();
    for a in &args[2..] {
        let (k, v) = a.split_once('=').unwrap();
        sets[k] = serde_json::from_str(v).unwrap();
    }
    if let Some(path) = dump {
        let mut out = String::new();
        for s in 0..runs {
            sets["seed"] = serde_json::json!(s);
            let fc: FastConfig = serde_json::from_value(sets.clone()).unwrap();
            let r = Simulator::new(c.clone()).unwrap().run_fast(&fc).unwrap();
            out += &serde_json::to_string(&r).unwrap();
            out.push('\n');
        }
        std::fs::write(path, out).unwrap();
        return;
    }
    let fc: FastConfig = serde_json::from_value(sets).unwrap();
    if std::env::var_os("FASTSPEED_SAME").is_some() {
        // For a profiler: one simulator, the fast mode again and again
        // (warm caches, unlike a run on a simulator just built).
        let mut sim = Simulator::new(c.clone()).unwrap();
        for _ in 0..runs {
            std::hint::black_box(sim.run_fast(&fc).unwrap());
        }
        return;
    }
    let mut t = Vec::with_capacity(runs);
    // Page faults of the run (first touches of memory new to the process).
    let mut faults = Vec::with_capacity(runs);
    let mut steps: Vec<(&'static str, Vec<f64>)> = Vec::new();
    // FASTSPEED_WARM: every run on one simulator, its caches warm (what
    // the fresh simulator's cache misses cost, step by step).
    let warm = std::env::var_os("FASTSPEED_WARM").is_some();
    let mut same = warm.then(|| Simulator::new(c.clone()).unwrap());
    for _ in 0..runs {
        let mut fresh = (!warm).then(|| Simulator::new(c.clone()).unwrap());
        let sim = fresh.as_mut().or(same.as_mut()).unwrap();
        let (t0, f0) = (thread_cpu(), minor_faults());
        let r = sim.run_fast(&fc).unwrap();
        t.push((thread_cpu() - t0).as_secs_f64() * 1e3);
        faults.push((minor_faults() - f0) as f64);
        for (i, &(name, s)) in r.steps_s.iter().enumerate() {
            if steps.len() <= i {
                steps.push((name, Vec::new()));
            }
            steps[i].1.push(s * 1e3);
        }
    }
    let q = |t: &mut Vec<f64>, p: f64| {
        t.sort_by(f64::total_cmp);
        t[((t.len() - 1) as f64 * p).round() as usize]
    };
    println!(
        "fast core: median {:.4} ms (quartiles {:.4}, {:.4}) of thread CPU over {runs} runs",
        q(&mut t, 0.5),
        q(&mut t, 0.25),
        q(&mut t, 0.75)
    );
    println!("  page faults: median {} a run", q(&mut faults, 0.5));
    let by_step: Vec<String> = steps
        .iter_mut()
        .map(|(name, v)| format!("{name} {:.4}", q(v, 0.5)))
        .collect();
    println!("  by step (median ms): {}", by_step.join(", "));
}

/// Minor page faults of this thread so far.
fn minor_faults() -> i64 {
    // SAFETY: `ru` is a valid rusage for the call to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return 0;
    }
    ru.ru_minflt
}

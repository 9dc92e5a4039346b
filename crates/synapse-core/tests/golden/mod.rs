//! The simulator's golden runs: five scenarios (the default, the paper's
//! fig. 6 and fig. 7 points, and a three-table pipeline under 20 PMU
//! reassignments, on a segmented interconnect and on a shared bus), each
//! hashed (FNV-1a) over every window row, edge row, the summary and the
//! invariants at the end of its duration, the measurement window the
//! hashes were recorded over. Each run then ends drained
//! ([`Simulator::drain`]), which the hashes do not cover.
//!
//! Shared by the test that pins the hashes (`tests/simgolden.rs`) and the
//! example that prints them (`examples/simgolden.rs`).

use synapse_core::sim::{config, Config, Drain, Invariants, Simulator};

/// One golden run's outcome.
pub struct Golden {
    pub name: &'static str,
    pub hash: u64,
    pub keys: u64,
    /// The drain after the measured duration, and the invariants after it.
    pub drain: Drain,
    pub invariants: Invariants,
}

impl Golden {
    /// The line the example prints and the test compares.
    pub fn line(&self) -> String {
        format!("{}: {:016x} keys {}", self.name, self.hash, self.keys)
    }
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

fn run(name: &'static str, c: Config, plans: &[(&str, &[u32])]) -> Golden {
    let mut s = Simulator::new(c.clone()).unwrap();
    let mut text = String::new();
    let step = c.duration_ns / (plans.len() + 1) as f64;
    let mut t = 0.0;
    for (n, p) in plans {
        t += step;
        s.run_until_ns(t);
        s.assign(n, p).unwrap();
    }
    s.run_until_ns(c.duration_ns);
    for w in s.take_windows() {
        text += &format!("{w:?}\n");
    }
    for e in s.take_edges() {
        text += &format!("{e:?}\n");
    }
    let sum = format!("{:?}", s.summary());
    text += &sum;
    text += &format!("{:?}", s.check_invariants());
    // GOLDEN_DUMP=DIR writes the hashed text to DIR/<name>.txt, to diff two
    // builds when a hash changes.
    if let Ok(dir) = std::env::var("GOLDEN_DUMP") {
        std::fs::write(format!("{dir}/{name}.txt"), &text).unwrap();
    }
    if std::env::var("GOLDEN_VERBOSE").is_ok() {
        println!("  {sum}");
    }
    let (hash, keys) = (fnv(&text), s.keys_done());
    let drain = s.drain();
    Golden { name, hash, keys, drain, invariants: s.check_invariants() }
}

/// Runs the five golden scenarios, in order.
pub fn run_all() -> Vec<Golden> {
    let mut out = vec![run("default", Config::default(), &[])];
    let mut c = Config { duration_ns: 300_000.0, ..Config::default() };
    c.pmus.block_size = 64;
    out.push(run("fig6_b64", c, &[]));
    let mut c = Config { duration_ns: 300_000.0, ..Config::default() };
    c.pmus.count = 3;
    c.tables[0].pmus = vec![0, 1, 2];
    c.vmu.vnodes = 8;
    if let config::Traffic::Flows { flows, .. } = &mut c.traffic {
        *flows = 5000;
    }
    out.push(run("fig7_p3_overload", c, &[]));
    let mut c: Config = serde_json::from_str(
        r#"{"duration_ns": 200000, "tables": [
            {"name": "acl", "pmus": [0,1,2], "phv_fifo": 16},
            {"name": "fwd", "pmus": [3,4], "phv_fifo": 16, "rules": {"generate": {"type": "ipc", "count": 300, "seed": 5}}},
            {"name": "nat", "pmus": [], "phv_fifo": 16}],
          "edges": [{"src": "acl", "dst": "fwd", "p": 0.6}, {"src": "acl", "dst": "nat", "p": 0.3},
                    {"src": "fwd", "dst": "nat", "p": 0.5}],
          "pmus": {"count": 8, "block_size": 32, "q_r": 4, "q_p": 4, "q_m": 4, "clock_ratio": 0.5},
          "pipeline": {"stage_fifo": 8}}"#,
    )
    .unwrap();
    c.elu.orb_entries = 8;
    c.elu.miss_queue = 4;
    let plans: [(&str, &[u32]); 6] = [
        ("acl", &[0, 1, 5, 6]),
        ("fwd", &[2, 3]),
        ("nat", &[4, 7]),
        ("acl", &[]),
        ("fwd", &[0, 1, 2, 3, 5, 6]),
        ("acl", &[7, 4]),
    ];
    let plans: Vec<(&str, &[u32])> = plans.iter().cycle().take(20).cloned().collect();
    out.push(run("cfg3_reassign_half_clock", c.clone(), &plans));
    c.interconnect.kind = synapse_core::hw::interconnect::Kind::Bus;
    c.entry.insert("acl".into(), 1.0);
    c.entry.insert("fwd".into(), 1.0);
    out.push(run("cfg3_bus_two_entries", c, &plans[..7]));
    out
}

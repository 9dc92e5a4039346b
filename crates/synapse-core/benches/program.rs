//! Functional execution of a compiled P4 program: parse, tables, actions
//! and deparse per frame, no timing model, one core. The program is the
//! 3-table route3 (LPM route -> exact next hop -> ternary/range ACL, 1,167
//! entries; `benches/scenarios/route3-program.json`, compiled by
//! `synapse p4 compile`), the frames IPv4 TCP/UDP to destinations inside
//! its routes, every one different (IPv4 id, TTL, TCP sequence), as in a
//! real trace. `cargo bench -p synapse-core --bench program`. The command
//! on the user's own program and capture is `synapse bench p4`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::Value;
use synapse_core::program::{Executor, Outputs, RunPacket, Visits};

const DESC: &str = include_str!("scenarios/route3-program.json");

/// `n` frames to the routes of the description's LPM table (seeded).
fn frames(desc: &Value, n: usize) -> Vec<Vec<u8>> {
    let lpm = desc["nodes"].as_array().unwrap().iter().find(|t| t["name"] == "Route3Ingress.ipv4_lpm").unwrap();
    let hex = |v: &Value| u32::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
    let routes: Vec<(u32, u32)> = lpm["entries"].as_array().unwrap().iter().map(|e| (hex(&e["m"][0][0]), hex(&e["m"][0][2]))).collect();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|i| {
            let r = next();
            let (net, mask) = routes[(r % routes.len() as u64) as usize];
            let dst = net | (r >> 32) as u32 & !mask;
            let tcp = r & 0x100 != 0;
            let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 8, 0];
            let l4 = if tcp { 20 } else { 8 };
            f.extend([0x45, 0, 0, (20 + l4 + 32) as u8]);
            f.extend((i as u16).to_be_bytes());
            f.extend([0, 0, 32 + (i % 200) as u8, if tcp { 6 } else { 17 }, 0, 0]);
            f.extend((next() as u32 | 0x0a00_0000).to_be_bytes());
            f.extend(dst.to_be_bytes());
            f.extend((next() as u32).to_be_bytes()); // ports
            if tcp {
                f.extend((i as u32).wrapping_mul(1460).to_be_bytes());
                f.extend([0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
            } else {
                f.extend([0, 40, 0, 0]);
            }
            f.extend([0u8; 32]);
            f
        })
        .collect()
}

fn route3(c: &mut Criterion) {
    let desc: Value = serde_json::from_str(DESC).unwrap();
    let fr = frames(&desc, 100_000);
    let mut ex = Executor::from_json(DESC).unwrap();
    let (mut v, mut o) = (Visits::new(), Outputs::new());
    let mut g = c.benchmark_group("program");
    g.sample_size(10);
    g.throughput(Throughput::Elements(fr.len() as u64));
    for (name, out) in [("route3", true), ("route3_no_deparse", false)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                for chunk in fr.chunks(4096) {
                    v.clear();
                    o.clear();
                    for f in chunk {
                        ex.run(f, 1, 0, &mut v, if out { Some(&mut o) } else { None });
                    }
                }
                std::hint::black_box((&v, &o));
            })
        });
    }
    g.finish();
    // the frames reach every table: a bench of lookups that all miss would mislead
    assert!(ex.packets > 0 && v.entry.iter().filter(|&&e| e >= 0).count() > v.len() / 2);
}

criterion_group!(benches, route3);
criterion_main!(benches);

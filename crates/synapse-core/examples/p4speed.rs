//! The compiled P4 executor alone on a capture, for `perf`: `p4speed
//! DESCRIPTION.json CAPTURE [LIMIT PASSES [native|gen]]` runs the description (a
//! compiled program with its entries, as `synapse p4 compile --json` or
//! `RustProgram.description` writes it) over the capture's first LIMIT
//! frames (default all) PASSES times (default 5; the first, untimed, hashes the answers) with outputs, and prints
//! packets per CPU second of the median pass and a hash of the visits.
//! `native` runs the router's specialised code (`program::native`) instead;
//! `gen` the program's generated code compiled in (`program::codegen::emit`'s
//! modules for the router, route3-edge and heavyhitter: `tests/gen/router.rs`,
//! `tests/gen/route3_edge.rs` and `tests/gen/heavyhitter.rs`, of
//! `tests/data/p4/heavyhitter-nocsum-noclone-desc.json`).
//! `load` the program's generated code built as a library and loaded
//! (`program::gencrate`, `program::cdylib`: one call per 4096-frame batch),
//! after printing how long building (or finding it in the cache) took.
//! `perf record -g target/release/examples/p4speed d.json c.pcap` (with
//! `CARGO_PROFILE_RELEASE_DEBUG=true` at build for symbols).
use std::path::Path;
use synapse_core::program::{Capture, Executor, Frames, Outputs, RunPacket, Visits};

fn cpu_s() -> f64 {
    let mut ts = Timespec { tv_sec: 0, tv_nsec: 0 };
    // CLOCK_THREAD_CPUTIME_ID = 3
    unsafe { clock_gettime(3, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}
extern "C" {
    fn clock_gettime(clk: i32, ts: *mut Timespec) -> i32;
}

/// The timed passes over `$all`, `$run` one frame `$i` into visits `$v`
/// and outputs `$o`; prints the median rate and the answers' hash. A macro,
/// not a function taking a closure: each caller gets the loop inline, as
/// the interpreter's was before the native mode (through a shared closure
/// it measured 0.91x at equal instructions).
macro_rules! timed_passes {
    ($all:expr, $passes:expr, |$v:ident, $o:ident, $i:ident| $run:expr) => {
        timed_passes!($all, $passes, |$v, $o, c, e| for $i in c..e {
            $run;
        })
    };
    ($all:expr, $passes:expr, |$v:ident, $o:ident, $c:ident, $e:ident| $batch:expr) => {{
        let (mut $v, mut $o) = (Visits::new(), Outputs::new());
        let n = $all.len();
        let mut rates = Vec::new();
        let mut h = 0u64;
        for pass in 0..$passes {
            let t = cpu_s();
            for c in (0..n).step_by(4096) {
                $v.clear();
                $o.clear();
                let ($c, $e) = (c, (c + 4096).min(n));
                $batch;
                if pass == 0 {
                    // the answers, hashed outside the timed passes
                    h = $v.entry.iter().fold(h, |h, &e| h.wrapping_mul(31).wrapping_add(e as u64));
                    h = $v.key_words.iter().fold(h, |h, &k| h.wrapping_mul(31).wrapping_add(k as u64));
                    h = $o.bytes.iter().fold(h, |h, &b| h.wrapping_mul(131).wrapping_add(b as u64));
                }
            }
            if pass > 0 {
                rates.push(n as f64 / (cpu_s() - t));
            }
        }
        rates.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!("{n} packets, {:.3} M packets per CPU s (median of {}), hash {h:016x}", rates[rates.len() / 2] / 1e6, rates.len());
    }};
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let desc = std::fs::read_to_string(&a[1]).unwrap();
    let limit: usize = a.get(3).map_or(usize::MAX, |x| x.parse().unwrap());
    let passes: usize = a.get(4).map_or(5, |x| x.parse().unwrap());
    let all = Capture::read_first(Path::new(&a[2]), limit).unwrap();
    match a.get(5).map(String::as_str) {
        Some("native") => return native(&desc, &all, passes),
        Some("gen") => return gen(&desc, &all, passes),
        Some("load") => return load(&desc, &all, passes),
        _ => {}
    }
    let mut ex = Executor::from_json(&desc).unwrap();
    timed_passes!(all, passes, |v, o, i| ex.run(all.frame(i), 1, 0, &mut v, Some(&mut o)));
}

/// [`main`]'s passes with the router's specialised code.
fn native(desc: &str, all: &Frames, passes: usize) {
    let prog = synapse_core::program::Program::from_json(desc).unwrap();
    let mut ex = match synapse_core::program::native::Router::link(&prog) {
        Ok(r) => r,
        Err(e) => {
            // what a generator would still have to take from this program
            for why in synapse_core::program::codegen::unsupported(&prog) {
                eprintln!("{why}");
            }
            eprintln!("p4speed: native: {e}");
            std::process::exit(2);
        }
    };
    timed_passes!(all, passes, |v, o, i| ex.run(all.frame(i), 1, &mut v, Some(&mut o)));
}

/// The router's generated module (`p4emit tests/data/p4/router-desc.json`).
mod router_gen {
    include!("../tests/gen/router.rs");
}

/// heavyhitter's generated module, without checksums and its clone (`p4emit tests/data/p4/heavyhitter-nocsum-noclone-desc.json`).
mod heavyhitter_gen {
    include!("../tests/gen/heavyhitter.rs");
}

/// route3-edge's generated module (`p4emit tests/data/p4/route3-edge-desc.json`).
mod route3_edge_gen {
    include!("../tests/gen/route3_edge.rs");
}

/// [`main`]'s passes with the program's generated code (the router's, heavyhitter's or route3-edge's:
/// each module links only the program it was generated from).
fn gen(desc: &str, all: &Frames, passes: usize) {
    let prog = synapse_core::program::Program::from_json(desc).unwrap();
    if let Ok(mut ex) = heavyhitter_gen::Gen::link(&prog) {
        timed_passes!(all, passes, |v, o, i| ex.run(all.frame(i), 1, &mut v, Some(&mut o)));
        return;
    }
    if let Ok(mut ex) = route3_edge_gen::Gen::link(&prog) {
        timed_passes!(all, passes, |v, o, i| ex.run(all.frame(i), 1, &mut v, Some(&mut o)));
        return;
    }
    let mut ex = match router_gen::Gen::link(&prog) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("p4speed: gen: {e}");
            std::process::exit(2);
        }
    };
    timed_passes!(all, passes, |v, o, i| ex.run(all.frame(i), 1, &mut v, Some(&mut o)));
}

/// [`main`]'s passes with the program's generated code, loaded.
fn load(desc: &str, all: &Frames, passes: usize) {
    use synapse_core::program::gencrate;
    let prog = synapse_core::program::Program::from_json(desc).unwrap();
    let src = gencrate::module(&prog).unwrap_or_else(|why| {
        for w in why {
            eprintln!("{w}");
        }
        eprintln!("p4speed: load: no generated code for this program");
        std::process::exit(2);
    });
    let t = std::time::Instant::now();
    let (lib, b) = gencrate::load(&gencrate::Build::from_env(), &src).unwrap_or_else(|e| {
        eprintln!("p4speed: load: {e}");
        std::process::exit(2);
    });
    println!("{} {} in {:.2} s", if b.built { "built" } else { "cached" }, b.path.display(), t.elapsed().as_secs_f64());
    let mut ex = lib.link(desc, &prog).unwrap();
    let ports = vec![1; all.len()];
    let times = vec![0; all.len()];
    let mut oc = Vec::new();
    // the capture as the timed passes' 4096-frame batches, split before timing
    let batches: Vec<Frames> = (0..all.len()).step_by(4096).map(|c| {
        let mut b = Frames::new();
        for i in c..(c + 4096).min(all.len()) {
            b.push(all.frame(i), 0, 0, 0);
        }
        b
    }).collect();
    timed_passes!(all, passes, |v, o, c, e| {
        oc.clear();
        ex.run_batch(&batches[c / 4096], &ports[c..e], &times[c..e], &mut v, Some(&mut o), &mut oc).unwrap();
    });
}

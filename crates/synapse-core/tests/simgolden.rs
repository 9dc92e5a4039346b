//! The simulator's golden hashes (`tests/golden/mod.rs`): any change to
//! what the five golden runs measure fails here. Speed work must keep them
//! bit-identical; a change of model semantics changes them on purpose.
//!
//! To regenerate after such a change: run
//! `cargo run --release -p synapse-core --example simgolden`, paste its
//! lines into `GOLDEN` below and say in the commit why they changed
//! (`GOLDEN_DUMP=DIR` writes the hashed text of each run to `DIR/<name>.txt`
//! to diff two builds).

mod golden;

/// Recorded before the speed work (commit d37dee1), unchanged by it, and
/// changed once on purpose: the VMU acts on a response a cycle after it
/// leaves its PMU or the ELU, and a release frees its PHV slot for the next
/// cycle's request (the cluster RTL's registers, docs/how-to/rtl.md).
const GOLDEN: [&str; 5] = [
    "default: ccb1343f35e03c40 keys 32161",
    "fig6_b64: 144ec759aa7d2165 keys 16163",
    "fig7_p3_overload: 927d3b26fd95381f keys 13131",
    "cfg3_reassign_half_clock: dcedb8bed4800eeb keys 2563",
    "cfg3_bus_two_entries: 1fae776d1bc5a4b6 keys 3154",
];

#[test]
fn the_golden_runs_are_bit_identical_and_end_drained() {
    let runs = golden::run_all();
    let lines: Vec<String> = runs.iter().map(|g| g.line()).collect();
    assert_eq!(lines, GOLDEN, "a golden hash changed (see this file's header to regenerate)");
    for g in &runs {
        assert!(g.drain.drained && g.invariants.ok(), "{}: {:?} {:?}", g.name, g.drain, g.invariants);
    }
}

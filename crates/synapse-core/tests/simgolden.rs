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

/// Recorded before the speed work (commit d37dee1) and unchanged since.
const GOLDEN: [&str; 5] = [
    "default: 695f07bac0017626 keys 32161",
    "fig6_b64: a696a832591bc7da keys 16187",
    "fig7_p3_overload: 8126ca00a3d05981 keys 13012",
    "cfg3_reassign_half_clock: e5905ea29b3604e5 keys 2634",
    "cfg3_bus_two_entries: a9f2ab6321e0eafd keys 3161",
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

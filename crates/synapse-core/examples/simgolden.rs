//! Prints the simulator's golden lines (`tests/golden/mod.rs`): one per
//! scenario, a hash of every window row, edge row, the summary and the
//! invariants over its duration, then whether the run drained after it.
//! `tests/simgolden.rs` pins them; regenerate them there with:
//! `cargo run --release -p synapse-core --example simgolden`
#[path = "../tests/golden/mod.rs"]
mod golden;

fn main() {
    for g in golden::run_all() {
        println!("{} inv_ok {}", g.line(), g.drain.drained && g.invariants.ok());
    }
}

//! Whether the developers' real data is beside the repository
//! (`../shared/data`, or `$SYNAPSE_SHARED/data`): the tests that need it
//! then run; without it they show as ignored (never as a pass), as in a
//! user's clone. `SYNAPSE_REQUIRE_SHARED=1` makes them run without it, and
//! fail. (Data added after a build is seen once this script reruns: after
//! `cargo clean -p synapse-core` or a change of either variable.)

use std::path::PathBuf;

fn main() {
    println!("cargo:rustc-check-cfg=cfg(synapse_shared)");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SYNAPSE_SHARED");
    println!("cargo:rerun-if-env-changed=SYNAPSE_REQUIRE_SHARED");
    let root = std::env::var_os("SYNAPSE_SHARED").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap()).join("../../../shared")
    });
    let data = root.join("data");
    if data.is_dir() {
        // Rerun if it changes or goes away.
        println!("cargo:rerun-if-changed={}", data.display());
        println!("cargo:rustc-cfg=synapse_shared");
    } else if std::env::var("SYNAPSE_REQUIRE_SHARED").is_ok_and(|v| v == "1") {
        println!("cargo:rustc-cfg=synapse_shared");
    }
}

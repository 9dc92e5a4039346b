//! Test helper: the optional real data in `../shared/data` beside the repo
//! (env `SYNAPSE_SHARED` names the `shared` dir). A user's clone has none:
//! tests that need it carry
//! `#[cfg_attr(not(synapse_shared), ignore = "needs ../shared/data")]`, so
//! there they show as ignored, never as passed (`build.rs` sets the cfg
//! when the data is there, or when `SYNAPSE_REQUIRE_SHARED=1` says it must
//! be).

use std::path::PathBuf;

fn root() -> PathBuf {
    std::env::var_os("SYNAPSE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"))
}

/// `shared/data/<rel>`; a test that runs needs it, so its absence fails.
pub fn shared(rel: &str) -> PathBuf {
    let p = root().join("data").join(rel);
    assert!(
        p.exists(),
        "real data not present at {} (the developers' checkout has it; SYNAPSE_SHARED names another shared dir)",
        p.display()
    );
    p
}

#[test]
fn tests_needing_the_shared_data_run_exactly_when_it_is_there() {
    // Else they would be ignored beside the data (a build from before it
    // came: `cargo clean -p synapse-core`), or run without it unasked.
    let there = root().join("data").is_dir();
    let required = std::env::var("SYNAPSE_REQUIRE_SHARED").is_ok_and(|v| v == "1");
    assert_eq!(cfg!(synapse_shared), there || required, "data at {}: {there}", root().display());
}

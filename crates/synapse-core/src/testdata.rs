//! Test helper: the optional real data in `../shared/data` beside the repo
//! (env `SYNAPSE_SHARED` names the `shared` dir). A user's clone has none,
//! so tests that need it print why and skip.

use std::path::PathBuf;

/// `shared/data/<rel>` if it exists; otherwise prints the reason and `None`.
pub fn shared(rel: &str) -> Option<PathBuf> {
    let root = std::env::var_os("SYNAPSE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    let p = root.join("data").join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipped: real data not present at {} (only in the developers' checkout)", p.display());
        None
    }
}

//! Packet classifiers: given a key, the index of the first (highest-priority)
//! matching rule of a [`RuleSet`](crate::rules::RuleSet), or none.
//!
//! [`linear::Linear`] is the oracle every other structure is checked against.
//! The ELU's structures (trie, decision tree) implement the same trait so the
//! simulator and the CLI can swap them by name.

pub mod linear;

use crate::rules::{Key, RuleSet};

/// Answer of a classifier: the 0-based rule index, or `None` for no match.
pub type Match = Option<u32>;

pub trait Classifier {
    fn classify(&self, key: &Key) -> Match;

    /// Classifies a batch; `out[i]` is the rule index or -1 for no match.
    fn classify_batch(&self, keys: &[Key], out: &mut [i32]) {
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.classify(k).map_or(-1, |r| r as i32);
        }
    }
}

/// One read of off-chip memory made by a lookup: which bank (for the trie,
/// one bank per level), where, and how many bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MemAccess {
    pub bank: u16,
    pub addr: u64,
    pub bytes: u32,
}

/// A classifier whose data sits in off-chip memory: the ELU walks it and the
/// simulator charges every access to the HBM model. The accesses of one
/// lookup are dependent (each needs the previous one's answer), in order.
pub trait MemoryWalk: Classifier {
    /// Classifies `key`, appending the memory reads it makes to `accesses`.
    fn walk(&self, key: &Key, accesses: &mut Vec<MemAccess>) -> Match;
    /// Bytes the structure occupies in off-chip memory.
    fn memory_bytes(&self) -> u64;
}

/// Names [`build`] accepts; the CLI offers exactly these.
pub const ALGORITHMS: &[&str] = &["linear"];

/// Builds the classifier named `algo` over `set`. Adding a structure is one
/// entry in [`ALGORITHMS`] and one match arm here.
pub fn build(algo: &str, set: &RuleSet) -> Result<Box<dyn Classifier + Send + Sync>, String> {
    match algo {
        "linear" => Ok(Box::new(linear::Linear::new(set))),
        _ => Err(format!("unknown classifier {algo:?} (expected one of: {})", ALGORITHMS.join(", "))),
    }
}

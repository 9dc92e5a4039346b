//! Packet classifiers: given a key, the index of the first (highest-priority)
//! matching rule of a [`RuleSet`](crate::rules::RuleSet), or none.
//!
//! [`linear::Linear`] is the oracle every other structure is checked against.
//! The ELU's structures (trie, decision tree, exact-match hash table) implement the same trait so the
//! simulator and the CLI can swap them by name.

pub mod churn;
pub mod dtree;
pub mod exact;
pub mod linear;
pub mod partition;
pub mod simd;
pub mod trie;

#[cfg(test)]
mod proptests;

use crate::rules::{Key, Rule, RuleSet, MAX_FIELDS};

/// Answer of a classifier: the 0-based rule index, or `None` for no match.
pub type Match = Option<u32>;

/// A classifier of keys of `N` words (default: the 8-word [`Key`]).
pub trait Classifier<const N: usize = MAX_FIELDS> {
    fn classify(&self, key: &Key<N>) -> Match;

    /// Classifies a batch; `out[i]` is the rule index or -1 for no match.
    fn classify_batch(&self, keys: &[Key<N>], out: &mut [i32]) {
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
pub trait MemoryWalk<const N: usize = MAX_FIELDS>: Classifier<N> {
    /// Classifies `key`, appending the memory reads it makes to `accesses`.
    fn walk(&self, key: &Key<N>, accesses: &mut Vec<MemAccess>) -> Match;
    /// Bytes the structure occupies in off-chip memory.
    fn memory_bytes(&self) -> u64;
    /// Brings what walking each of `keys` reads into the CPU's caches
    /// (answers nothing, changes nothing), before they are walked one by
    /// one: a structure may step the keys' walks side by side, whose reads
    /// do not depend on each other and so overlap, where one walk's reads
    /// each wait for the last. The fast mode walks a few hundred keys of a
    /// structure just built and mostly out of the cache.
    fn warm(&self, _keys: &[Key<N>]) {}
}

/// Why a lookup structure could not be built.
#[derive(Clone, PartialEq, Debug, thiserror::Error)]
pub enum BuildError {
    /// The structure would exceed its memory budget (set pruning and
    /// decision-tree replication can explode); nothing large was allocated.
    #[error("{what} needs more than its memory budget of {budget} bytes (stopped at {bytes} bytes); raise it (--set {key}=BYTES) or use another structure")]
    OverBudget { what: &'static str, key: &'static str, bytes: u64, budget: u64 },
    /// A rule the structure cannot represent.
    #[error("unsupported rule: {0}")]
    Unsupported(String),
    /// A bad build parameter (or an unknown algorithm name).
    #[error("{0}")]
    BadConfig(String),
}

/// A lookup structure built by name ([`build_structure`]): classifies,
/// walks memory, and describes itself.
pub trait Structure<const N: usize = MAX_FIELDS>: MemoryWalk<N> + Send + Sync {
    /// Build statistics as (name, value) rows, for printing.
    fn stats(&self) -> Vec<(&'static str, String)>;
}

/// A structure updated in place: a rule inserted at a priority position
/// (0 = highest; later rules move down one) or deleted from one (later
/// rules move up), without a rebuild beside it.
pub trait Incremental<const N: usize = MAX_FIELDS>: Structure<N> {
    fn insert(&mut self, pos: usize, rule: Rule<N>) -> Result<(), BuildError>;
    fn delete(&mut self, pos: usize) -> Result<(), BuildError>;
    /// Whether `inserts` and `deletes` more would rebuild the structure
    /// (fold its pending updates in): the ELU then writes it whole, as a
    /// replica. The decision tree never does.
    fn folds_in(&self, _inserts: usize, _deletes: usize) -> bool {
        false
    }
}

impl<const N: usize> Incremental<N> for dtree::DTree<N> {
    fn insert(&mut self, pos: usize, rule: Rule<N>) -> Result<(), BuildError> {
        dtree::DTree::insert(self, pos, rule)
    }
    fn delete(&mut self, pos: usize) -> Result<(), BuildError> {
        dtree::DTree::delete(self, pos)
    }
}

impl<const N: usize> Incremental<N> for partition::PTree<N> {
    fn insert(&mut self, pos: usize, rule: Rule<N>) -> Result<(), BuildError> {
        partition::PTree::insert(self, pos, rule)
    }
    fn delete(&mut self, pos: usize) -> Result<(), BuildError> {
        partition::PTree::delete(self, pos)
    }
    fn folds_in(&self, inserts: usize, deletes: usize) -> bool {
        partition::PTree::folds_in(self, inserts, deletes)
    }
}

/// Names [`build_incremental_n`] accepts.
pub const INCREMENTAL_ALGORITHMS: &[&str] = &["dtree", "ptree"];

/// The structure `algo` over `set`, to be updated in place, at any key
/// width.
pub fn build_incremental_n<const N: usize>(algo: &str, set: &RuleSet<N>, config: &BuildConfig) -> Result<Box<dyn Incremental<N>>, BuildError> {
    match algo {
        "dtree" => Ok(Box::new(dtree::DTree::build(set, &config.dtree)?)),
        "ptree" => Ok(Box::new(partition::PTree::build(set, &config.ptree)?)),
        _ => Err(BuildError::BadConfig(format!(
            "{algo:?} is not updated in place (expected one of: {})",
            INCREMENTAL_ALGORITHMS.join(", ")
        ))),
    }
}

/// Build parameters for every algorithm of the registry (a scenario's
/// `[elu.build]`: `trie`, `dtree` with its `facl`, `ptree`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BuildConfig {
    pub trie: trie::TrieConfig,
    pub dtree: dtree::DTreeConfig,
    pub ptree: partition::PTreeConfig,
}

impl BuildConfig {
    /// The parameters [`BuildConfig::set`] accepts.
    pub const KEYS: &'static [&'static str] = &[
        "trie.stride",
        "trie.max_bytes",
        "dtree.bucket",
        "dtree.max_depth",
        "dtree.spfac",
        "dtree.max_cut_bits",
        "dtree.max_bytes",
        "facl.dt_modules",
        "facl.dt_layers",
        "facl.layer_nodes",
        "facl.ls_engines",
        "facl.ls_depth",
        "facl.ls_modules",
        "ptree.bucket",
        "ptree.max_depth",
        "ptree.spfac",
        "ptree.max_bytes",
        "ptree.simd",
        "ptree.avx512",
        "ptree.max_trees",
        "ptree.small",
        "ptree.max_delta",
        "ptree.wide_leaves",
    ];

    /// Sets one parameter by its dotted name (`trie.stride`, `dtree.bucket`,
    /// `facl.dt_layers`, ...); an unknown name or a bad value is an error
    /// naming what was expected. Ranges are checked when building.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        fn num<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, String> {
            value.trim().parse().map_err(|_| format!("{key}: expected a number, found {value:?}"))
        }
        let f = &mut self.dtree.facl;
        match key {
            "trie.stride" => self.trie.stride = num(key, value)?,
            "trie.max_bytes" => self.trie.max_bytes = num(key, value)?,
            "dtree.bucket" => self.dtree.bucket = num(key, value)?,
            "dtree.max_depth" => self.dtree.max_depth = num(key, value)?,
            "dtree.spfac" => self.dtree.spfac = num(key, value)?,
            "dtree.max_cut_bits" => self.dtree.max_cut_bits = num(key, value)?,
            "dtree.max_bytes" => self.dtree.max_bytes = num(key, value)?,
            "facl.dt_modules" => f.dt_modules = num(key, value)?,
            "facl.dt_layers" => f.dt_layers = num(key, value)?,
            "facl.layer_nodes" => f.layer_nodes = num(key, value)?,
            "facl.ls_engines" => f.ls_engines = num(key, value)?,
            "facl.ls_depth" => f.ls_depth = num(key, value)?,
            "facl.ls_modules" => f.ls_modules = num(key, value)?,
            "ptree.bucket" => self.ptree.bucket = num(key, value)?,
            "ptree.max_depth" => self.ptree.max_depth = num(key, value)?,
            "ptree.spfac" => self.ptree.spfac = num(key, value)?,
            "ptree.max_bytes" => self.ptree.max_bytes = num(key, value)?,
            "ptree.simd" => self.ptree.simd = num::<u8>(key, value)? != 0,
            "ptree.avx512" => self.ptree.avx512 = num::<u8>(key, value)? != 0,
            "ptree.max_trees" => self.ptree.max_trees = num(key, value)?,
            "ptree.small" => self.ptree.small = num(key, value)?,
            "ptree.max_delta" => self.ptree.max_delta = num(key, value)?,
            "ptree.wide_leaves" => {
                self.ptree.wide_leaves = if value.trim() == "auto" { None } else { Some(num(key, value)?) }
            }
            _ => return Err(format!("unknown build parameter {key:?} (expected one of: {})", Self::KEYS.join(", "))),
        }
        Ok(())
    }
}

/// Names [`build`] accepts; the CLI offers exactly these.
pub const ALGORITHMS: &[&str] = &["linear", "trie", "dtree", "ptree", "exact"];

/// Builds the classifier named `algo` over `set`. Adding a structure is one
/// entry in [`ALGORITHMS`] and one match arm here.
pub fn build(algo: &str, set: &RuleSet) -> Result<Box<dyn Classifier + Send + Sync>, String> {
    let c = BuildConfig::default();
    match algo {
        "linear" => Ok(Box::new(linear::Linear::new(set))),
        "trie" => Ok(Box::new(trie::Trie::build(set, &c.trie).map_err(|e| e.to_string())?)),
        "dtree" => Ok(Box::new(dtree::DTree::build(set, &c.dtree).map_err(|e| e.to_string())?)),
        "ptree" => Ok(Box::new(partition::PTree::build(set, &c.ptree).map_err(|e| e.to_string())?)),
        "exact" => Ok(Box::new(exact::Exact::build(set).map_err(|e| e.to_string())?)),
        _ => Err(format!("unknown classifier {algo:?} (expected one of: {})", ALGORITHMS.join(", "))),
    }
}

/// Like [`build`], with build parameters, and a structure that can walk
/// memory and report its build statistics.
pub fn build_structure(algo: &str, set: &RuleSet, config: &BuildConfig) -> Result<Box<dyn Structure>, BuildError> {
    Ok(match algo {
        "linear" => Box::new(linear::Linear::new(set)),
        "trie" => Box::new(trie::Trie::build(set, &config.trie)?),
        "dtree" => Box::new(dtree::DTree::build(set, &config.dtree)?),
        "ptree" => Box::new(partition::PTree::build(set, &config.ptree)?),
        "exact" => Box::new(exact::Exact::build(set)?),
        _ => {
            return Err(BuildError::BadConfig(format!(
                "unknown classifier {algo:?} (expected one of: {})",
                ALGORITHMS.join(", ")
            )))
        }
    })
}

/// Names [`build_structure_n`] accepts: the structures built for keys of
/// any width.
pub const WIDE_ALGORITHMS: &[&str] = &["linear", "trie", "dtree", "ptree", "exact"];

/// [`build_structure`] for keys of `N` words (P4 tables wider than the
/// 5-tuple); the algorithms of [`WIDE_ALGORITHMS`].
pub fn build_structure_n<const N: usize>(algo: &str, set: &RuleSet<N>, config: &BuildConfig) -> Result<Box<dyn Structure<N>>, BuildError> {
    Ok(match algo {
        "linear" => Box::new(linear::Linear::new(set)),
        "trie" => Box::new(trie::Trie::build(set, &config.trie)?),
        "dtree" => Box::new(dtree::DTree::build(set, &config.dtree)?),
        "exact" => Box::new(exact::Exact::build(set)?),
        "ptree" => Box::new(partition::PTree::build(set, &config.ptree)?),
        _ => {
            return Err(BuildError::BadConfig(format!(
                "unknown classifier {algo:?} (expected one of: {})",
                WIDE_ALGORITHMS.join(", ")
            )))
        }
    })
}

impl<const N: usize> Structure<N> for linear::Linear<N> {
    fn stats(&self) -> Vec<(&'static str, String)> {
        let bytes = self.memory_bytes();
        vec![("rules", (bytes / linear::RULE_BYTES as u64).to_string()), ("bytes", bytes.to_string())]
    }
}

/// A structure over a rule set of any compiled key width.
pub enum AnyStructure {
    W8(Box<dyn Structure<8>>),
    W16(Box<dyn Structure<16>>),
    W32(Box<dyn Structure<32>>),
}

impl AnyStructure {
    /// Builds `algo` over `set` at the set's width.
    pub fn build(algo: &str, set: &crate::rules::AnyRuleSet, config: &BuildConfig) -> Result<AnyStructure, BuildError> {
        use crate::rules::AnyRuleSet as A;
        Ok(match set {
            A::W8(s) => AnyStructure::W8(build_structure(algo, s, config)?),
            A::W16(s) => AnyStructure::W16(build_structure_n(algo, s, config)?),
            A::W32(s) => AnyStructure::W32(build_structure_n(algo, s, config)?),
        })
    }

    /// Classifies keys given as rows of `words` words (`flat.len()` a
    /// multiple of `words`, `words` at most the structure's width; missing
    /// words are zero) into `out` (-1: no match).
    pub fn classify_words(&self, flat: &[u32], words: usize, out: &mut [i32]) {
        fn run<const N: usize>(s: &dyn Structure<N>, flat: &[u32], words: usize, out: &mut [i32]) {
            const CHUNK: usize = 1024;
            let mut keys = Vec::with_capacity(CHUNK);
            for (rows, o) in flat.chunks(CHUNK * words.max(1)).zip(out.chunks_mut(CHUNK)) {
                keys.clear();
                keys.extend(rows.chunks_exact(words.max(1)).map(|r| Key::<N>::from_words(&r[..words])));
                s.classify_batch(&keys, o);
            }
        }
        match self {
            AnyStructure::W8(s) => run(s.as_ref(), flat, words, out),
            AnyStructure::W16(s) => run(s.as_ref(), flat, words, out),
            AnyStructure::W32(s) => run(s.as_ref(), flat, words, out),
        }
    }

    /// Seconds `passes` batch passes over the keys given as rows of `words`
    /// words take (`classify_words`' keys made once, before the clock):
    /// a rate measurement with the loop here.
    pub fn time_words(&self, flat: &[u32], words: usize, passes: usize) -> f64 {
        fn run<const N: usize>(s: &dyn Structure<N>, flat: &[u32], words: usize, passes: usize) -> f64 {
            let keys: Vec<Key<N>> = flat.chunks_exact(words.max(1)).map(|r| Key::<N>::from_words(&r[..words])).collect();
            let mut out = vec![-1i32; keys.len()];
            let t = std::time::Instant::now();
            for _ in 0..passes {
                s.classify_batch(&keys, &mut out);
                std::hint::black_box(&out);
            }
            t.elapsed().as_secs_f64()
        }
        match self {
            AnyStructure::W8(s) => run(s.as_ref(), flat, words, passes),
            AnyStructure::W16(s) => run(s.as_ref(), flat, words, passes),
            AnyStructure::W32(s) => run(s.as_ref(), flat, words, passes),
        }
    }

    /// Classifies one key given as `words` (at most the structure's width;
    /// missing words are zero), without a batch's buffers: the P4
    /// executor's per-packet lookup.
    #[inline]
    pub fn classify_one(&self, words: &[u32]) -> Match {
        match self {
            AnyStructure::W8(s) => s.classify(&Key::<8>::from_words(words)),
            AnyStructure::W16(s) => s.classify(&Key::<16>::from_words(words)),
            AnyStructure::W32(s) => s.classify(&Key::<32>::from_words(words)),
        }
    }

    /// Key words the structure takes at most.
    pub fn width(&self) -> usize {
        match self {
            AnyStructure::W8(_) => 8,
            AnyStructure::W16(_) => 16,
            AnyStructure::W32(_) => 32,
        }
    }

    /// Bytes the structure takes in off-chip memory.
    pub fn memory_bytes(&self) -> u64 {
        match self {
            AnyStructure::W8(s) => s.memory_bytes(),
            AnyStructure::W16(s) => s.memory_bytes(),
            AnyStructure::W32(s) => s.memory_bytes(),
        }
    }

    pub fn stats(&self) -> Vec<(&'static str, String)> {
        match self {
            AnyStructure::W8(s) => s.stats(),
            AnyStructure::W16(s) => s.stats(),
            AnyStructure::W32(s) => s.stats(),
        }
    }
}

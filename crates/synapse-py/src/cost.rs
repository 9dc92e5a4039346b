//! Software tables to measure, for the CPU cost model (`synapse reproduce
//! cpu-model`): a table of `entries` exact, LPM or ternary entries built by
//! one of our classifiers, and a batch of lookup keys that hit it. Python
//! times [`PyCostTable::run`] with the thread's CPU clock; Rust does the
//! per-lookup loop.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use synapse_core::classify::{build_structure, BuildConfig, BuildError, Structure};
use synapse_core::rules::{FieldMatch, Key, Rule, RuleSet, Schema};
use synapse_core::workload::seed::Params;
use synapse_core::workload::{rulegen, tracegen};

/// IPv4 prefix lengths of a BGP table and their shares (RouteViews, as in
/// the DIR-24-8 and Poptrie evaluations: over half are /24, most of the rest
/// /16–/23).
const LPM_LENGTHS: &[(u8, u32)] = &[
    (8, 1),
    (12, 2),
    (16, 12),
    (18, 6),
    (19, 12),
    (20, 20),
    (21, 22),
    (22, 40),
    (23, 45),
    (24, 300),
    (28, 2),
    (32, 3),
];

/// `n` entries of `kind`: `exact` (distinct 5-tuples), `lpm` (destination
/// prefixes with a BGP length mix, other fields wildcards) or `ternary`
/// (ClassBench acl1 rules).
fn table(kind: &str, n: usize, seed: u64) -> PyResult<RuleSet> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let any = FieldMatch::ANY;
    let rules: Vec<Rule> = match kind {
        "exact" => (0..n as u32)
            .map(|i| {
                // An odd multiplier is a bijection on u32: distinct keys.
                let src = i.wrapping_mul(0x9E37_79B1) ^ (seed as u32);
                let f = [
                    FieldMatch::exact(src),
                    FieldMatch::exact(rng.gen()),
                    FieldMatch::exact(rng.gen::<u16>() as u32),
                    FieldMatch::exact(rng.gen::<u16>() as u32),
                    FieldMatch::exact(rng.gen::<u8>() as u32),
                ];
                Rule::new(&f, i, i)
            })
            .collect(),
        "lpm" => {
            let total: u32 = LPM_LENGTHS.iter().map(|&(_, w)| w).sum();
            let mut rules: Vec<Rule> = (0..n as u32)
                .map(|i| {
                    let mut u = rng.gen_range(0..total);
                    let len = LPM_LENGTHS
                        .iter()
                        .find(|&&(_, w)| {
                            if u < w {
                                true
                            } else {
                                u -= w;
                                false
                            }
                        })
                        .unwrap()
                        .0;
                    let f = [any, FieldMatch::prefix(rng.gen(), len, 32), any, any, any];
                    Rule::new(&f, i, i)
                })
                .collect();
            // Longest prefix first: the first match is the longest match.
            rules.sort_by_key(|r| std::cmp::Reverse(r.fields[1].mask.count_ones()));
            rules
        }
        "ternary" => {
            return Ok(rulegen::generate(
                &Params::builtin("acl").expect("built-in acl seed"),
                n,
                seed,
            ));
        }
        _ => {
            return Err(PyValueError::new_err(format!(
                "unknown table kind {kind:?} (expected exact, lpm or ternary)"
            )))
        }
    };
    Ok(RuleSet::new(Schema::five_tuple(), rules))
}

/// A built table and lookup keys drawn from its entries.
#[pyclass(name = "CostTable", module = "synapse_vmt._core", frozen)]
pub struct PyCostTable {
    structure: Box<dyn Structure>,
    keys: Vec<Key>,
    #[pyo3(get)]
    entries: usize,
}

#[pymethods]
impl PyCostTable {
    /// `entries` entries of `kind` in structure `algo` (any name of
    /// `algorithms()`); `config` as for `Classifier`. An over-budget build
    /// is a `MemoryError`, other build errors a `ValueError`.
    #[new]
    #[pyo3(signature = (kind, algo, entries, seed=1, keys=65536, config=None))]
    fn new(
        py: Python<'_>,
        kind: &str,
        algo: &str,
        entries: usize,
        seed: u64,
        keys: usize,
        config: Option<std::collections::HashMap<String, String>>,
    ) -> PyResult<Self> {
        let mut cfg = BuildConfig::default();
        for (k, v) in config.unwrap_or_default() {
            cfg.set(&k, &v).map_err(PyValueError::new_err)?;
        }
        let set = table(kind, entries, seed)?;
        let (structure, keys) = py
            .allow_threads(|| {
                let s = build_structure(algo, &set, &cfg)?;
                let mut rng = Pcg64::seed_from_u64(seed ^ 0xC057);
                let keys: Vec<Key> = (0..keys)
                    .map(|_| {
                        tracegen::header_in_rule(
                            &set.rules[rng.gen_range(0..set.rules.len().max(1))],
                            &mut rng,
                        )
                    })
                    .collect();
                Ok::<_, BuildError>((s, keys))
            })
            .map_err(|e| match e {
                BuildError::OverBudget { .. } => {
                    pyo3::exceptions::PyMemoryError::new_err(e.to_string())
                }
                _ => PyValueError::new_err(e.to_string()),
            })?;
        Ok(PyCostTable {
            structure,
            keys,
            entries: set.len(),
        })
    }

    /// Looks up `lookups` keys (cycling through the key batch); returns how
    /// many matched, so the loop cannot be optimised away.
    fn run(&self, py: Python<'_>, lookups: usize) -> u64 {
        py.allow_threads(|| {
            let mut hits = 0u64;
            for i in 0..lookups {
                hits += self
                    .structure
                    .classify(&self.keys[i % self.keys.len()])
                    .is_some() as u64;
            }
            hits
        })
    }

    /// Bytes the structure occupies.
    #[getter]
    fn bytes(&self) -> u64 {
        self.structure.memory_bytes()
    }
}

/// A stand-in rule set shaped like a P4 table: `n` rules over key words of
/// the given match kinds (`exact`, `lpm`, `ternary`, `range`, `optional`),
/// drawn as ClassBench draws its fields (prefixes with a BGP length mix,
/// half-wildcarded ternaries, port-range classes), then ordered most
/// specific first.
fn shaped_table(kinds: &[String], n: usize, seed: u64) -> PyResult<RuleSet> {
    use synapse_core::rules::{FieldSpec, MatchKind, MAX_FIELDS};
    if kinds.is_empty() || kinds.len() > MAX_FIELDS {
        return Err(PyValueError::new_err(format!("a key of {} words (supported: 1 to {MAX_FIELDS})", kinds.len())));
    }
    let mut rng = Pcg64::seed_from_u64(seed);
    let total: u32 = LPM_LENGTHS.iter().map(|&(_, w)| w).sum();
    let mut fields = Vec::new();
    for k in kinds {
        let kind = MatchKind::parse(k).ok_or_else(|| PyValueError::new_err(format!("unknown match kind {k:?}")))?;
        fields.push(FieldSpec { name: format!("w{}", fields.len()), bits: 32, kind });
    }
    let mut rules: Vec<Rule> = (0..n as u32)
        .map(|i| {
            let f: Vec<FieldMatch> = fields
                .iter()
                .map(|spec| match spec.kind {
                    MatchKind::Exact => FieldMatch::exact(rng.gen()),
                    MatchKind::Lpm => {
                        let mut u = rng.gen_range(0..total);
                        let len = LPM_LENGTHS.iter().find(|&&(_, w)| if u < w { true } else { u -= w; false }).unwrap().0;
                        FieldMatch::prefix(rng.gen(), len, 32)
                    }
                    MatchKind::Ternary | MatchKind::Optional => {
                        if rng.gen_bool(0.5) {
                            FieldMatch::ANY
                        } else if spec.kind == MatchKind::Optional {
                            FieldMatch::exact(rng.gen())
                        } else {
                            FieldMatch::prefix(rng.gen(), rng.gen_range(1..=32), 32)
                        }
                    }
                    MatchKind::Range => match rng.gen_range(0..4) {
                        0 => FieldMatch::ANY,
                        1 => FieldMatch::range(0, 1023),
                        2 => FieldMatch::range(1024, 65535),
                        _ => {
                            let lo = rng.gen_range(0..65535u32);
                            FieldMatch::range(lo, (lo + rng.gen_range(0..64)).min(65535))
                        }
                    },
                })
                .collect();
            Rule::new(&f, i, i)
        })
        .collect();
    // Most specific first, as generated ClassBench sets are ordered.
    rules.sort_by_key(|r| std::cmp::Reverse(r.fields.iter().map(|f| f.mask.count_ones()).sum::<u32>()));
    Ok(RuleSet::new(Schema { fields }, rules))
}

/// Bytes of off-chip memory the ELU's structure `algo` takes for `n`
/// entries of a table whose key words have match kinds `kinds`; raises
/// `MemoryError` when over its build budget.
#[pyfunction]
#[pyo3(signature = (kinds, n, algo, seed=1, config=None))]
fn structure_bytes(
    py: Python<'_>,
    kinds: Vec<String>,
    n: usize,
    algo: &str,
    seed: u64,
    config: Option<std::collections::HashMap<String, String>>,
) -> PyResult<u64> {
    let mut cfg = BuildConfig::default();
    for (k, v) in config.unwrap_or_default() {
        cfg.set(&k, &v).map_err(PyValueError::new_err)?;
    }
    let set = shaped_table(&kinds, n, seed)?;
    py.allow_threads(|| build_structure(algo, &set, &cfg).map(|s| s.memory_bytes())).map_err(|e| match e {
        BuildError::OverBudget { .. } => pyo3::exceptions::PyMemoryError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCostTable>()?;
    m.add_function(wrap_pyfunction!(structure_bytes, m)?)?;
    Ok(())
}

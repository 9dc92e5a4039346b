//! Software tables to measure, for the CPU cost model (`synapse reproduce
//! cpu-model`): a table of `entries` exact, LPM or ternary entries built by
//! one of our classifiers, and a batch of lookup keys that hit it. Python
//! times [`PyCostTable::run`] with the thread's CPU clock; Rust does the
//! per-lookup loop. Beside them, what turns those times into cycles on this
//! host: a loop of dependent additions of known cycle count ([`spin_adds`],
//! the clock) and the per-packet work besides lookups ([`PyPacketBase`]).

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

/// Additions per iteration of the timed loop: enough that the loop's own
/// counter and branch (which issue beside them) add nothing.
pub const ADDS_PER_ITERATION: u64 = 64;

/// `iterations` x [`ADDS_PER_ITERATION`] dependent integer additions of a
/// register: one cycle each (a register-register add's latency on every
/// x86-64 and AArch64 core; an add of an immediate is not used, as recent
/// Intel cores fold those chains at rename and run them faster), so Python,
/// timing it with the thread's CPU clock, gets the clock rate the thread ran
/// at. Returns the sum, so nothing is left out.
#[pyfunction]
fn spin_adds(py: Python<'_>, iterations: u64) -> PyResult<u64> {
    if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        return Err(PyValueError::new_err(
            "no timed loop of known cycles for this CPU architecture",
        ));
    }
    Ok(py.allow_threads(|| spin(iterations)))
}

#[cfg(target_arch = "x86_64")]
fn spin(iterations: u64) -> u64 {
    let mut x: u64 = 0;
    for _ in 0..iterations {
        // SAFETY: register arithmetic only.
        unsafe {
            std::arch::asm!(".rept 64", "add {x}, {y}", ".endr", x = inout(reg) x, y = in(reg) 1u64,
                            options(nomem, nostack));
        }
    }
    x
}

#[cfg(target_arch = "aarch64")]
fn spin(iterations: u64) -> u64 {
    let mut x: u64 = 0;
    for _ in 0..iterations {
        // SAFETY: register arithmetic only.
        unsafe {
            std::arch::asm!(".rept 64", "add {x}, {x}, {y}", ".endr", x = inout(reg) x, y = in(reg) 1u64,
                            options(nomem, nostack));
        }
    }
    x
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn spin(_iterations: u64) -> u64 {
    0
}

/// Bytes of a frame of the batch: a minimum Ethernet frame, as the seed's
/// 64 B baseline.
const FRAME: usize = 64;

/// The per-packet work of a software target besides its table lookups, for
/// the CPU model's base: over a batch of 64-byte IPv4 TCP/UDP frames, parse
/// Ethernet, IPv4 (its header length) and the L4 ports into the 5-tuple key,
/// hash the key (lookup3, as the VMU does) and write the frame and its hash
/// to an output ring. No NIC: the seed's 146-cycle base also holds DPDK's
/// receive and transmit.
#[pyclass(name = "PacketBase", module = "synapse_vmt._core", frozen)]
pub struct PyPacketBase {
    frames: Vec<u8>,
}

#[pymethods]
impl PyPacketBase {
    #[new]
    #[pyo3(signature = (frames=4096, seed=1))]
    fn new(frames: usize, seed: u64) -> Self {
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut buf = vec![0u8; frames.max(1) * FRAME];
        for f in buf.chunks_exact_mut(FRAME) {
            f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            f[14] = 0x45;
            f[16..18].copy_from_slice(&((FRAME - 14) as u16).to_be_bytes());
            f[22] = 64;
            f[23] = if rng.gen::<bool>() { 6 } else { 17 };
            f[26..34].copy_from_slice(&rng.gen::<u64>().to_be_bytes());
            f[34..38].copy_from_slice(&rng.gen::<u32>().to_be_bytes());
        }
        PyPacketBase { frames: buf }
    }

    /// Processes `packets` frames (cycling through the batch); returns a
    /// checksum of the hashes, so the work cannot be optimised away.
    fn run(&self, py: Python<'_>, packets: usize) -> u64 {
        py.allow_threads(|| {
            let n = self.frames.len() / FRAME;
            let mut ring = vec![0u8; 64 * FRAME];
            let mut sum = 0u64;
            for i in 0..packets {
                let f = &self.frames[(i % n) * FRAME..(i % n + 1) * FRAME];
                let key = parse(f);
                let h = synapse_core::hash::lookup3::hashword(&key, 0x5e5a);
                let slot = (i % 64) * FRAME;
                ring[slot..slot + FRAME].copy_from_slice(f);
                ring[slot..slot + 4].copy_from_slice(&h.to_le_bytes());
                sum = sum.wrapping_add(h as u64);
            }
            sum ^ ring[FRAME * (packets % 64)] as u64
        })
    }
}

/// The 5-tuple of an Ethernet/IPv4 frame as four words (src, dst, ports,
/// protocol); zeros where a header is missing or too short.
fn parse(f: &[u8]) -> [u32; 4] {
    let word = |o: usize| u32::from_be_bytes([f[o], f[o + 1], f[o + 2], f[o + 3]]);
    if f.len() < 34 || u16::from_be_bytes([f[12], f[13]]) != 0x0800 {
        return [0; 4];
    }
    let ihl = ((f[14] & 0x0f) as usize) * 4;
    let proto = f[23] as u32;
    let l4 = 14 + ihl;
    let ports = if (proto == 6 || proto == 17) && f.len() >= l4 + 4 { word(l4) } else { 0 };
    [word(26), word(30), ports, proto]
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCostTable>()?;
    m.add_class::<PyPacketBase>()?;
    m.add_function(wrap_pyfunction!(spin_adds, m)?)?;
    m.add("SPIN_ADDS_PER_ITERATION", ADDS_PER_ITERATION)?;
    Ok(())
}

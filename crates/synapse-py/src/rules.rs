//! Rules, traces and classifiers for Python: Rust parses and formats the
//! ClassBench files, generates sets and traces, and classifies a whole trace
//! per call. Parse errors become `synapse_vmt._core.ParseError` (a
//! `ValueError`) whose message is `file:line: what was expected`.

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::fmt::Write as _;
use synapse_core::classify;
use synapse_core::rules::classbench::{self, TraceEntry};
use synapse_core::classify::AnyStructure;
use synapse_core::rules::{AnyRuleSet, FieldSpec, Key, MatchKind, RuleSet, Schema};
use synapse_core::workload::seed::{Params, PortClass};
use synapse_core::workload::{rulegen, stats, tracegen};

pyo3::create_exception!(
    synapse_vmt._core,
    ParseError,
    PyValueError,
    "A malformed input file; the message is 'file:line: what was expected'."
);

fn parse_err(e: synapse_core::rules::ParseError) -> PyErr {
    ParseError::new_err(e.to_string())
}

/// A rule set in priority order (index 0 wins): a ClassBench 5-tuple set
/// (`inner`), or a P4 table's set of any key width from
/// [`PyRuleSet::from_arrays`] (`wide`; `inner` is then empty).
#[pyclass(name = "RuleSet", module = "synapse_vmt._core", frozen)]
pub struct PyRuleSet {
    pub inner: RuleSet,
    pub wide: Option<AnyRuleSet>,
}

impl PyRuleSet {
    fn five_tuple_only(&self, what: &str) -> PyResult<()> {
        match self.wide {
            Some(_) => Err(PyValueError::new_err(format!("{what} is for ClassBench 5-tuple rule sets, not a set from from_arrays"))),
            None => Ok(()),
        }
    }
}

fn flat(a: &PyReadonlyArray2<'_, u32>) -> Vec<u32> {
    a.as_array().iter().copied().collect()
}

fn keys_array<'py>(py: Python<'py>, keys: impl ExactSizeIterator<Item = Key>, cols: usize) -> Bound<'py, PyArray2<u32>> {
    let n = keys.len();
    let mut flat = Vec::with_capacity(n * cols);
    for k in keys {
        flat.extend_from_slice(&k.0[..cols]);
    }
    Array2::from_shape_vec((n, cols), flat).expect("shape").into_pyarray_bound(py)
}

#[pymethods]
impl PyRuleSet {
    /// Parses ClassBench filter text; `file` names it in errors.
    #[staticmethod]
    fn parse(py: Python<'_>, text: &str, file: &str) -> PyResult<Self> {
        let set = py.allow_threads(|| classbench::parse_rules(text, file)).map_err(parse_err)?;
        Ok(PyRuleSet { inner: set, wide: None })
    }

    /// Generates `count` rules of a built-in type (`acl`, `fw`, `ipc`) or,
    /// when `seed_text` is given, from that ClassBench parameter file
    /// (`seed_file` names it in errors). `smoothness` is db_generator's
    /// prefix-length smoothing (0 keeps the seed's spikes).
    #[staticmethod]
    #[pyo3(signature = (kind, count, seed, seed_text=None, seed_file="<seed>", smoothness=0))]
    fn generate(
        py: Python<'_>,
        kind: &str,
        count: usize,
        seed: u64,
        seed_text: Option<&str>,
        seed_file: &str,
        smoothness: u32,
    ) -> PyResult<Self> {
        let params = match seed_text {
            Some(t) => Params::parse(t, seed_file).map_err(parse_err)?,
            None => Params::builtin(kind).ok_or_else(|| {
                PyValueError::new_err(format!("unknown rule-set type {kind:?} (expected acl, fw or ipc)"))
            })?,
        };
        let set = py.allow_threads(|| rulegen::generate_smoothed(&params, count, seed, smoothness));
        Ok(PyRuleSet { inner: set, wide: None })
    }

    /// A rule set from per-word arrays (uint32, n_rules x n_words, row 0
    /// wins): word w of rule r matches a key word k when
    /// `lo[r, w] <= k & mask[r, w] <= hi[r, w]`. `widths` (bits per word,
    /// default 32) and `kinds` (`exact`, `lpm`, `ternary`, `range`,
    /// `optional` per word, default ternary) guide the trie and the tree.
    /// More than 32 words is an error naming the table `name`.
    #[staticmethod]
    #[pyo3(signature = (lo, hi, mask, widths=None, kinds=None, name="<rules>"))]
    fn from_arrays(
        py: Python<'_>,
        lo: PyReadonlyArray2<'_, u32>,
        hi: PyReadonlyArray2<'_, u32>,
        mask: PyReadonlyArray2<'_, u32>,
        widths: Option<Vec<u8>>,
        kinds: Option<Vec<String>>,
        name: &str,
    ) -> PyResult<Self> {
        let shape = lo.shape().to_vec();
        if hi.shape() != shape.as_slice() || mask.shape() != shape.as_slice() {
            return Err(PyValueError::new_err(format!(
                "table {name}: lo, hi and mask must have one shape, found {:?}, {:?}, {:?}",
                shape,
                hi.shape(),
                mask.shape()
            )));
        }
        let nw = shape[1];
        synapse_core::rules::words_for(name, nw).map_err(PyValueError::new_err)?;
        let widths = widths.unwrap_or_else(|| vec![32; nw]);
        let kinds = kinds.unwrap_or_else(|| vec!["ternary".into(); nw]);
        if widths.len() != nw || kinds.len() != nw {
            return Err(PyValueError::new_err(format!(
                "table {name}: expected {nw} widths and kinds (one per word), found {} and {}",
                widths.len(),
                kinds.len()
            )));
        }
        let mut fields = Vec::with_capacity(nw);
        for (w, (&bits, kind)) in widths.iter().zip(&kinds).enumerate() {
            if !(1..=32).contains(&bits) {
                return Err(PyValueError::new_err(format!("table {name}: word {w}: expected a width of 1..32 bits, found {bits}")));
            }
            let kind = MatchKind::parse(kind).ok_or_else(|| {
                PyValueError::new_err(format!("table {name}: word {w}: expected a match kind (exact, lpm, ternary, range, optional), found {kind:?}"))
            })?;
            fields.push(FieldSpec { name: format!("w{w}"), bits, kind });
        }
        let (lo, hi, mask) = (flat(&lo), flat(&hi), flat(&mask));
        let set = py
            .allow_threads(|| AnyRuleSet::from_words(name, Schema { fields }, &lo, &hi, &mask))
            .map_err(PyValueError::new_err)?;
        Ok(PyRuleSet { inner: RuleSet::new(Schema { fields: vec![] }, vec![]), wide: Some(set) })
    }

    fn __len__(&self) -> usize {
        self.wide.as_ref().map_or(self.inner.len(), |w| w.len())
    }

    /// Key words of the set (5 for ClassBench).
    #[getter]
    fn words(&self) -> usize {
        self.wide.as_ref().map_or(5, |w| w.words())
    }

    /// The set in the ClassBench filter format, one line per rule.
    fn format(&self) -> PyResult<String> {
        self.five_tuple_only("format")?;
        classbench::format_rules(&self.inner).map_err(PyValueError::new_err)
    }

    /// The distributions `synapse rules stats` prints, as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.five_tuple_only("stats")?;
        let s = stats::stats(&self.inner);
        let d = PyDict::new_bound(py);
        d.set_item("rules", s.rules)?;
        d.set_item("protocols", s.protocols.into_iter().collect::<Vec<_>>())?;
        let classes = |c: [usize; 5]| -> Vec<(&'static str, usize)> {
            PortClass::ALL.iter().map(|p| p.name()).zip(c).collect()
        };
        d.set_item("sport", classes(s.sport))?;
        d.set_item("dport", classes(s.dport))?;
        d.set_item("ppc", s.ppc.into_iter().collect::<Vec<_>>())?;
        d.set_item(
            "prefix_pairs",
            s.prefix_pairs.into_iter().map(|((a, b), n)| (a, b, n)).collect::<Vec<_>>(),
        )?;
        d.set_item("src_len", s.src_len)?;
        d.set_item("dst_len", s.dst_len)?;
        d.set_item("flags", s.flags.into_iter().collect::<Vec<_>>())?;
        d.set_item("unique_src", s.unique_src)?;
        d.set_item("unique_dst", s.unique_dst)?;
        d.set_item("unique_pairs", s.unique_pairs)?;
        Ok(d)
    }

    /// `n` flow keys drawn from the rules (ClassBench-like skew): a uint32
    /// array of shape (n, 5) and the uint32 index of each key's rule.
    #[allow(clippy::type_complexity)]
    fn flow_keys<'py>(&self, py: Python<'py>, n: usize, seed: u64) -> PyResult<(Bound<'py, PyArray2<u32>>, Bound<'py, PyArray1<u32>>)> {
        self.five_tuple_only("flow_keys")?;
        let fk = py.allow_threads(|| tracegen::flow_keys(&self.inner, n, seed));
        let rules: Vec<u32> = fk.iter().map(|x| x.1).collect();
        Ok((keys_array(py, fk.into_iter().map(|x| x.0), 5), PyArray1::from_vec_bound(py, rules)))
    }
}

/// A header trace: keys, flags and, when known, the rule each came from.
#[pyclass(name = "Trace", module = "synapse_vmt._core", frozen)]
pub struct PyTrace {
    pub entries: Vec<TraceEntry>,
}

#[pymethods]
impl PyTrace {
    /// Parses a ClassBench trace; `file` names it in errors.
    #[staticmethod]
    fn parse(py: Python<'_>, text: &str, file: &str) -> PyResult<Self> {
        let entries = py.allow_threads(|| classbench::parse_trace(text, file)).map_err(parse_err)?;
        Ok(PyTrace { entries })
    }

    /// `packets` headers from `rules` with ClassBench's Pareto locality.
    #[staticmethod]
    #[pyo3(signature = (rules, packets, seed, a=1.0, b=0.1))]
    fn generate(py: Python<'_>, rules: &PyRuleSet, packets: usize, seed: u64, a: f64, b: f64) -> PyResult<Self> {
        rules.five_tuple_only("Trace.generate")?;
        let pareto = tracegen::Pareto::new(a, b).map_err(PyValueError::new_err)?;
        let entries = py.allow_threads(|| tracegen::generate(&rules.inner, packets, pareto, seed));
        Ok(PyTrace { entries })
    }

    fn __len__(&self) -> usize {
        self.entries.len()
    }

    /// The trace in the ClassBench format `src dst sport dport proto flags rule`.
    fn format(&self, py: Python<'_>) -> String {
        py.allow_threads(|| {
            let mut s = String::with_capacity(self.entries.len() * 48);
            for e in &self.entries {
                let k = &e.key.0;
                let _ = write!(s, "{}\t{}\t{}\t{}\t{}\t{}", k[0], k[1], k[2], k[3], k[4], e.flags);
                if let Some(r) = e.rule {
                    let _ = write!(s, "\t{r}");
                }
                s.push('\n');
            }
            s
        })
    }

    /// The headers as a uint32 array of shape (n, 5).
    fn keys<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<u32>> {
        keys_array(py, self.entries.iter().map(|e| e.key), 5)
    }

    /// The rule each header was drawn from (int64), or None when any line
    /// lacks the rule column.
    fn rules<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyArray1<i64>>> {
        let v: Option<Vec<i64>> = self.entries.iter().map(|e| e.rule.map(|r| r as i64)).collect();
        v.map(|v| PyArray1::from_vec_bound(py, v))
    }
}

/// A classifier built by name over a rule set.
#[pyclass(name = "Classifier", module = "synapse_vmt._core", frozen)]
pub struct PyClassifier {
    inner: AnyStructure,
    #[pyo3(get)]
    algo: String,
    /// Key words of the rule set.
    #[pyo3(get)]
    words: usize,
    /// Seconds the build took (wall clock, without the Python call).
    #[pyo3(get)]
    build_s: f64,
}

#[pymethods]
impl PyClassifier {
    /// `config`: build parameters by dotted name (`trie.stride`,
    /// `dtree.bucket`, ...; see `classify::BuildConfig::KEYS`).
    #[new]
    #[pyo3(signature = (rules, algo, config=None))]
    fn new(py: Python<'_>, rules: &PyRuleSet, algo: &str, config: Option<std::collections::HashMap<String, String>>) -> PyResult<Self> {
        let mut cfg = classify::BuildConfig::default();
        let mut items: Vec<(String, String)> = config.unwrap_or_default().into_iter().collect();
        items.sort();
        for (k, v) in items {
            cfg.set(&k, &v).map_err(PyValueError::new_err)?;
        }
        let config = cfg;
        let start = std::time::Instant::now();
        let inner = py
            .allow_threads(|| match &rules.wide {
                Some(w) => AnyStructure::build(algo, w, &config),
                None => classify::build_structure(algo, &rules.inner, &config).map(AnyStructure::W8),
            })
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let build_s = start.elapsed().as_secs_f64();
        Ok(PyClassifier { inner, algo: algo.to_string(), words: rules.words(), build_s })
    }

    /// Classifies keys given as a uint32 array (n x words): an int32 array,
    /// the index of the first matching rule or -1.
    fn classify_keys<'py>(&self, py: Python<'py>, keys: PyReadonlyArray2<'py, u32>) -> PyResult<Bound<'py, PyArray1<i32>>> {
        let (n, w) = (keys.shape()[0], keys.shape()[1]);
        if w != self.words {
            return Err(PyValueError::new_err(format!("expected keys of {} words (columns), found {w}", self.words)));
        }
        let flat = flat(&keys);
        let out = py.allow_threads(|| {
            let mut out = vec![-1i32; n];
            self.inner.classify_words(&flat, w, &mut out);
            out
        });
        Ok(PyArray1::from_vec_bound(py, out))
    }

    /// Classifies keys given as a uint32 array (n x words) `passes` times
    /// over and returns the seconds taken (the keys converted once, before
    /// the clock): a rate measurement for rule sets of any width.
    fn time_keys(&self, py: Python<'_>, keys: PyReadonlyArray2<'_, u32>, passes: usize) -> PyResult<f64> {
        let w = keys.shape()[1];
        if w != self.words {
            return Err(PyValueError::new_err(format!("expected keys of {} words (columns), found {w}", self.words)));
        }
        let flat = flat(&keys);
        Ok(py.allow_threads(|| self.inner.time_words(&flat, w, passes)))
    }

    /// Classifies the headers `start..stop` of `trace` (all by default): an
    /// int32 array, the index of the first matching rule or -1.
    #[pyo3(signature = (trace, start=0, stop=None))]
    fn classify<'py>(&self, py: Python<'py>, trace: &PyTrace, start: usize, stop: Option<usize>) -> PyResult<Bound<'py, PyArray1<i32>>> {
        let AnyStructure::W8(inner) = &self.inner else {
            return Err(PyValueError::new_err("a ClassBench trace has 5-tuple keys: use classify_keys for a wide rule set"));
        };
        let stop = stop.unwrap_or(trace.entries.len()).min(trace.entries.len());
        let start = start.min(stop);
        let out = py.allow_threads(|| {
            let keys: Vec<Key> = trace.entries[start..stop].iter().map(|e| e.key).collect();
            let mut out = vec![-1i32; keys.len()];
            inner.classify_batch(&keys, &mut out);
            out
        });
        Ok(PyArray1::from_vec_bound(py, out))
    }

    /// Bytes the structure occupies (`MemoryWalk::memory_bytes`).
    fn memory_bytes(&self) -> u64 {
        self.inner.memory_bytes()
    }

    /// Classifies headers `start..stop` of `trace` `passes` times over and
    /// returns the seconds taken: a rate measurement with the loop in Rust
    /// (no array returned per pass).
    #[pyo3(signature = (trace, passes, start=0, stop=None))]
    fn time_batches(&self, py: Python<'_>, trace: &PyTrace, passes: usize, start: usize, stop: Option<usize>) -> PyResult<f64> {
        let AnyStructure::W8(inner) = &self.inner else {
            return Err(PyValueError::new_err("a ClassBench trace has 5-tuple keys: time_batches needs a 5-tuple rule set"));
        };
        let stop = stop.unwrap_or(trace.entries.len()).min(trace.entries.len());
        let start = start.min(stop);
        py.allow_threads(|| {
            let keys: Vec<Key> = trace.entries[start..stop].iter().map(|e| e.key).collect();
            let mut out = vec![-1i32; keys.len()];
            let t = std::time::Instant::now();
            for _ in 0..passes {
                inner.classify_batch(&keys, &mut out);
                std::hint::black_box(&out);
            }
            Ok(t.elapsed().as_secs_f64())
        })
    }

    /// Build statistics as (name, value) pairs, in print order.
    fn stats(&self) -> Vec<(String, String)> {
        self.inner.stats().into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }
}

/// Lookups of `trace` by `algo` (one updated in place) over `rules` while
/// random updates arrive at `rate` per second, for about `secs` seconds of
/// lookup and update time, on this thread (`classify::churn`, inserts
/// placed as `churn` says: "uniform", "near" or "rank"): a JSON object of the
/// counts and times, with `fresh_lookups_per_s`, the static rate of a
/// fresh build of the rules as the churn left them (whole-trace batch
/// passes for `secs`).
#[pyfunction]
#[pyo3(signature = (rules, trace, algo, config, rate, secs, seed=1, churn="uniform"))]
#[allow(clippy::too_many_arguments)]
fn classify_churn(
    py: Python<'_>,
    rules: &PyRuleSet,
    trace: &PyTrace,
    algo: &str,
    config: std::collections::HashMap<String, String>,
    rate: f64,
    secs: f64,
    seed: u64,
    churn: &str,
) -> PyResult<String> {
    rules.five_tuple_only("classify_churn")?;
    let placement: classify::churn::Placement = churn.parse().map_err(PyValueError::new_err)?;
    let mut cfg = classify::BuildConfig::default();
    let mut items: Vec<(String, String)> = config.into_iter().collect();
    items.sort();
    for (k, v) in items {
        cfg.set(&k, &v).map_err(PyValueError::new_err)?;
    }
    py.allow_threads(|| {
        let mut t = classify::build_incremental_n(algo, &rules.inner, &cfg).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let keys: Vec<Key> = trace.entries.iter().map(|e| e.key).collect();
        let rep = classify::churn::run(t.as_mut(), &rules.inner, &keys, rate, secs, seed, placement);
        let now = RuleSet::new(rules.inner.schema.clone(), rep.final_rules.clone());
        let fresh = classify::build_incremental_n(algo, &now, &cfg).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let mut v = serde_json::to_value(&rep).map_err(|e| PyValueError::new_err(e.to_string()))?;
        v["fresh_lookups_per_s"] = classify::churn::static_rate(fresh.as_ref(), &keys, secs).into();
        Ok(v.to_string())
    })
}

/// Names of the classifiers `Classifier` accepts.
#[pyfunction]
fn algorithms() -> Vec<&'static str> {
    classify::ALGORITHMS.to_vec()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ParseError", m.py().get_type_bound::<ParseError>())?;
    m.add_class::<PyRuleSet>()?;
    m.add_class::<PyTrace>()?;
    m.add_class::<PyClassifier>()?;
    m.add_function(wrap_pyfunction!(algorithms, m)?)?;
    m.add_function(wrap_pyfunction!(classify_churn, m)?)?;
    Ok(())
}

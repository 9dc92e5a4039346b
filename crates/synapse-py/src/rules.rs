//! Rules, traces and classifiers for Python: Rust parses and formats the
//! ClassBench files, generates sets and traces, and classifies a whole trace
//! per call. Parse errors become `synapse_vmt._core.ParseError` (a
//! `ValueError`) whose message is `file:line: what was expected`.

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray1, PyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::fmt::Write as _;
use synapse_core::classify;
use synapse_core::rules::classbench::{self, TraceEntry};
use synapse_core::rules::{Key, RuleSet};
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

/// A ClassBench 5-tuple rule set in priority order (index 0 wins).
#[pyclass(name = "RuleSet", module = "synapse_vmt._core", frozen)]
pub struct PyRuleSet {
    pub inner: RuleSet,
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
        Ok(PyRuleSet { inner: set })
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
        Ok(PyRuleSet { inner: set })
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// The set in the ClassBench filter format, one line per rule.
    fn format(&self) -> PyResult<String> {
        classbench::format_rules(&self.inner).map_err(PyValueError::new_err)
    }

    /// The distributions `synapse rules stats` prints, as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
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
    fn flow_keys<'py>(&self, py: Python<'py>, n: usize, seed: u64) -> (Bound<'py, PyArray2<u32>>, Bound<'py, PyArray1<u32>>) {
        let fk = py.allow_threads(|| tracegen::flow_keys(&self.inner, n, seed));
        let rules: Vec<u32> = fk.iter().map(|x| x.1).collect();
        (keys_array(py, fk.into_iter().map(|x| x.0), 5), PyArray1::from_vec_bound(py, rules))
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
    inner: Box<dyn classify::Structure>,
    #[pyo3(get)]
    algo: String,
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
            .allow_threads(|| classify::build_structure(algo, &rules.inner, &config))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let build_s = start.elapsed().as_secs_f64();
        Ok(PyClassifier { inner, algo: algo.to_string(), build_s })
    }

    /// Classifies the headers `start..stop` of `trace` (all by default): an
    /// int32 array, the index of the first matching rule or -1.
    #[pyo3(signature = (trace, start=0, stop=None))]
    fn classify<'py>(&self, py: Python<'py>, trace: &PyTrace, start: usize, stop: Option<usize>) -> Bound<'py, PyArray1<i32>> {
        let stop = stop.unwrap_or(trace.entries.len()).min(trace.entries.len());
        let start = start.min(stop);
        let out = py.allow_threads(|| {
            let keys: Vec<Key> = trace.entries[start..stop].iter().map(|e| e.key).collect();
            let mut out = vec![-1i32; keys.len()];
            self.inner.classify_batch(&keys, &mut out);
            out
        });
        PyArray1::from_vec_bound(py, out)
    }

    /// Bytes the structure occupies (`MemoryWalk::memory_bytes`).
    fn memory_bytes(&self) -> u64 {
        self.inner.memory_bytes()
    }

    /// Classifies headers `start..stop` of `trace` `passes` times over and
    /// returns the seconds taken: a rate measurement with the loop in Rust
    /// (no array returned per pass).
    #[pyo3(signature = (trace, passes, start=0, stop=None))]
    fn time_batches(&self, py: Python<'_>, trace: &PyTrace, passes: usize, start: usize, stop: Option<usize>) -> f64 {
        let stop = stop.unwrap_or(trace.entries.len()).min(trace.entries.len());
        let start = start.min(stop);
        py.allow_threads(|| {
            let keys: Vec<Key> = trace.entries[start..stop].iter().map(|e| e.key).collect();
            let mut out = vec![-1i32; keys.len()];
            let t = std::time::Instant::now();
            for _ in 0..passes {
                self.inner.classify_batch(&keys, &mut out);
                std::hint::black_box(&out);
            }
            t.elapsed().as_secs_f64()
        })
    }

    /// Build statistics as (name, value) pairs, in print order.
    fn stats(&self) -> Vec<(String, String)> {
        self.inner.stats().into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }
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
    Ok(())
}

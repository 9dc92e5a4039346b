//! Python face of the traffic model (`synapse_core::workload::traffic`).
//!
//! A config dict goes in; arrivals come out as numpy batches
//! `(t_ps: uint64[], flow: uint32[])`, never one packet at a time.
//! Config keys: `dist` (a built-in name, `name:max_bytes`, or a list of
//! `[bytes, cum]` points),
//! `flows`, `duration_ps`, and optionally `flow_duration_ps`,
//! `mean_pkt_bytes`, `max_bytes` (truncate the size distribution),
//! `profile` (a built-in name or a list of `[t_fraction, weight]` points) and
//! `seed`. Unknown keys are an error.

use std::io::Write;

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use synapse_core::workload::{flowsize, profile, traffic, FlowSizeDist, Profile, TrafficConfig};

const KEYS: &[&str] = &[
    "dist",
    "flows",
    "duration_ps",
    "flow_duration_ps",
    "mean_pkt_bytes",
    "max_bytes",
    "profile",
    "seed",
];

fn err(e: impl ToString) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// A list of pairs from any sequence of 2-sequences (lists or tuples).
fn pairs(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<(f64, f64)>> {
    let bad = || {
        PyValueError::new_err(format!(
            "{what}: expected a built-in name or a list of [{}] points",
            if what == "dist" {
                "bytes, cumulative_fraction"
            } else {
                "t_fraction, weight"
            }
        ))
    };
    let rows: Vec<Vec<f64>> = obj.extract().map_err(|_| bad())?;
    rows.into_iter()
        .map(|r| {
            if r.len() == 2 {
                Ok((r[0], r[1]))
            } else {
                Err(bad())
            }
        })
        .collect()
}

/// A flow-size distribution from a built-in name or a list of (bytes, cum) points.
fn dist_from(obj: &Bound<'_, PyAny>) -> PyResult<FlowSizeDist> {
    if let Ok(name) = obj.extract::<String>() {
        return FlowSizeDist::from_spec(&name).map_err(err);
    }
    let pts = pairs(obj, "dist")?;
    FlowSizeDist::from_points(pts).map_err(|e| err(format!("dist: {e}")))
}

fn profile_from(obj: &Bound<'_, PyAny>) -> PyResult<Option<Profile>> {
    if obj.is_none() {
        return Ok(None);
    }
    if let Ok(name) = obj.extract::<String>() {
        return Profile::builtin(&name).map(Some).map_err(err);
    }
    let pts = pairs(obj, "profile")?;
    Profile::from_points(pts)
        .map(Some)
        .map_err(|e| err(format!("profile: {e}")))
}

fn config_from(cfg: &Bound<'_, PyDict>) -> PyResult<TrafficConfig> {
    for k in cfg.keys() {
        let k: String = k.extract()?;
        if !KEYS.contains(&k.as_str()) {
            return Err(err(format!(
                "unknown traffic config key {k:?}; expected one of: {}",
                KEYS.join(", ")
            )));
        }
    }
    let need = |k: &str| {
        cfg.get_item(k)?
            .ok_or_else(|| err(format!("traffic config needs {k:?}")))
    };
    let mut dist = dist_from(&need("dist")?)?;
    if let Some(m) = cfg.get_item("max_bytes")? {
        if !m.is_none() {
            dist = dist.truncated(m.extract()?).map_err(err)?;
        }
    }
    let flows: u32 = need("flows")?
        .extract()
        .map_err(|_| err("flows: expected an integer in 0..2^32"))?;
    let duration_ps: u64 = need("duration_ps")?
        .extract()
        .map_err(|_| err("duration_ps: expected a non-negative integer"))?;
    let mut c = TrafficConfig::new(dist, flows, duration_ps);
    if let Some(v) = cfg.get_item("flow_duration_ps")? {
        c.flow_duration_ps = v
            .extract()
            .map_err(|_| err("flow_duration_ps: expected a non-negative integer"))?;
    }
    if let Some(v) = cfg.get_item("mean_pkt_bytes")? {
        c.mean_pkt_bytes = v
            .extract()
            .map_err(|_| err("mean_pkt_bytes: expected a number"))?;
    }
    if let Some(v) = cfg.get_item("profile")? {
        c.profile = profile_from(&v)?;
    }
    if let Some(v) = cfg.get_item("seed")? {
        c.seed = v
            .extract()
            .map_err(|_| err("seed: expected a non-negative integer"))?;
    }
    c.validate().map_err(err)?;
    Ok(c)
}

/// Packet arrivals of flows with heavy-tailed sizes, in time order.
#[pyclass(module = "synapse_vmt._core")]
pub struct Traffic {
    inner: traffic::Traffic,
    cfg: TrafficConfig,
}

#[pymethods]
impl Traffic {
    #[new]
    fn new(config: &Bound<'_, PyDict>) -> PyResult<Self> {
        let cfg = config_from(config)?;
        let inner = traffic::Traffic::new(&cfg).map_err(err)?;
        Ok(Self { inner, cfg })
    }

    /// Up to `n` next arrivals as `(t_ps: uint64[], flow: uint32[])`; empty at the end.
    fn next_batch<'py>(
        &mut self,
        py: Python<'py>,
        n: usize,
    ) -> (Bound<'py, PyArray1<u64>>, Bound<'py, PyArray1<u32>>) {
        let cap = n.min(self.inner.remaining() as usize);
        let (mut t, mut f) = (Vec::with_capacity(cap), Vec::with_capacity(cap));
        py.allow_threads(|| self.inner.fill(&mut t, &mut f, n));
        (t.into_pyarray_bound(py), f.into_pyarray_bound(py))
    }

    /// All arrivals before `t_end_ps` not yet returned.
    fn until<'py>(
        &mut self,
        py: Python<'py>,
        t_end_ps: u64,
    ) -> (Bound<'py, PyArray1<u64>>, Bound<'py, PyArray1<u32>>) {
        let (mut t, mut f) = (Vec::new(), Vec::new());
        py.allow_threads(|| self.inner.fill_until(t_end_ps, &mut t, &mut f));
        (t.into_pyarray_bound(py), f.into_pyarray_bound(py))
    }

    /// Packets of each flow (index = flow id).
    fn flow_packets<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        (0..self.inner.flows())
            .map(|f| self.inner.flow_packets(f))
            .collect::<Vec<_>>()
            .into_pyarray_bound(py)
    }

    /// Start time of each flow in ps (non-decreasing in flow id).
    fn flow_starts_ps<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        (0..self.inner.flows())
            .map(|f| self.inner.flow_start_ps(f))
            .collect::<Vec<_>>()
            .into_pyarray_bound(py)
    }

    #[getter]
    fn flows(&self) -> u32 {
        self.inner.flows()
    }
    #[getter]
    fn total_packets(&self) -> u64 {
        self.inner.total_packets()
    }
    #[getter]
    fn remaining(&self) -> u64 {
        self.inner.remaining()
    }
    /// Expected aggregate packet rate (packets/s) in steady state.
    #[getter]
    fn offered_pps(&self) -> f64 {
        self.cfg.offered_pps()
    }
    /// Expected packets per flow.
    #[getter]
    fn mean_packets(&self) -> f64 {
        self.cfg.mean_packets()
    }
}

/// Summary of a flow-size distribution: quantiles, mean bytes and packets.
#[pyfunction]
#[pyo3(signature = (dist, mean_pkt_bytes = traffic::DEFAULT_MEAN_PKT_BYTES))]
fn flow_dist_stats<'py>(
    py: Python<'py>,
    dist: &Bound<'py, PyAny>,
    mean_pkt_bytes: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let d = dist_from(dist)?;
    if !(mean_pkt_bytes.is_finite() && mean_pkt_bytes > 0.0) {
        return Err(err(format!(
            "mean_pkt_bytes must be finite and > 0, got {mean_pkt_bytes}"
        )));
    }
    let out = PyDict::new_bound(py);
    let (lo, hi) = d.range();
    out.set_item("points", d.points().len())?;
    out.set_item("min_bytes", lo)?;
    out.set_item("max_bytes", hi)?;
    out.set_item("mean_bytes", d.mean_bytes())?;
    for (k, u) in [
        ("median_bytes", 0.5),
        ("p90_bytes", 0.9),
        ("p99_bytes", 0.99),
        ("p999_bytes", 0.999),
    ] {
        out.set_item(k, d.quantile(u))?;
    }
    out.set_item("mean_pkt_bytes", mean_pkt_bytes)?;
    out.set_item("mean_packets", d.mean_packets(mean_pkt_bytes))?;
    Ok(out)
}

/// The (bytes, cumulative fraction) points of a distribution.
#[pyfunction]
fn flow_dist_points(dist: &Bound<'_, PyAny>) -> PyResult<Vec<(f64, f64)>> {
    Ok(dist_from(dist)?.points())
}

/// CDF of a distribution at the given sizes (for checks and plots).
#[pyfunction]
fn flow_dist_cdf<'py>(
    py: Python<'py>,
    dist: &Bound<'py, PyAny>,
    bytes: Vec<f64>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let d = dist_from(dist)?;
    Ok(bytes
        .iter()
        .map(|&b| d.cdf(b))
        .collect::<Vec<_>>()
        .into_pyarray_bound(py))
}

/// The (t_fraction, weight) points of a profile and its normalised density on a grid.
#[pyfunction]
fn profile_points(profile: &Bound<'_, PyAny>) -> PyResult<Vec<(f64, f64)>> {
    Ok(profile_from(profile)?
        .ok_or_else(|| err("profile: expected a name or points"))?
        .points())
}

/// Normalised flow-arrival density of a profile at run fractions `x` (mean 1).
#[pyfunction]
fn profile_density<'py>(
    py: Python<'py>,
    profile: &Bound<'py, PyAny>,
    x: Vec<f64>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let p = profile_from(profile)?.ok_or_else(|| err("profile: expected a name or points"))?;
    Ok(x.iter()
        .map(|&v| p.density(v))
        .collect::<Vec<_>>()
        .into_pyarray_bound(py))
}

/// Flows needed for an expected aggregate rate of `pps` packets/s.
#[pyfunction]
#[pyo3(signature = (pps, dist, duration_ps, mean_pkt_bytes = traffic::DEFAULT_MEAN_PKT_BYTES))]
fn flows_for_rate(
    pps: f64,
    dist: &Bound<'_, PyAny>,
    duration_ps: u64,
    mean_pkt_bytes: f64,
) -> PyResult<u32> {
    traffic::flows_for_rate(pps, &dist_from(dist)?, duration_ps, mean_pkt_bytes).map_err(err)
}

/// Arrival rows `t_ps,flow\n` as CSV bytes (numpy's savetxt is 50x slower).
#[pyfunction]
fn arrivals_csv<'py>(
    py: Python<'py>,
    t_ps: PyReadonlyArray1<'py, u64>,
    flow: PyReadonlyArray1<'py, u32>,
) -> PyResult<Bound<'py, PyBytes>> {
    let (t, f) = (t_ps.as_slice()?, flow.as_slice()?);
    if t.len() != f.len() {
        return Err(err("t_ps and flow differ in length"));
    }
    let mut out = Vec::with_capacity(t.len() * 16);
    for (a, b) in t.iter().zip(f) {
        writeln!(out, "{a},{b}").expect("write to Vec");
    }
    Ok(PyBytes::new_bound(py, &out))
}

/// `attack_mix(t_ps, flows, attack_json, legit_flows, pool)`: the
/// arrivals `(t_ps, flows)` (sorted by time) with an `[attack]`'s packets
/// mixed in (`workload::attack::Mix`); attack packet j is flow
/// `legit_flows + j % pool`. `attack_json` is the `[attack]` table
/// (checked: unknown keys and bad values are errors).
#[pyfunction]
fn attack_mix<'py>(
    py: Python<'py>,
    t_ps: PyReadonlyArray1<'_, u64>,
    flows: PyReadonlyArray1<'_, u32>,
    attack_json: &str,
    legit_flows: u32,
    pool: u32,
) -> PyResult<(Bound<'py, PyArray1<u64>>, Bound<'py, PyArray1<u32>>)> {
    use synapse_core::workload::attack::{Attack, Mix};
    let a: Attack = serde_json::from_str(attack_json).map_err(err)?;
    a.check().map_err(err)?;
    let (t, f) = (t_ps.as_array(), flows.as_array());
    if t.len() != f.len() {
        return Err(err("attack_mix: t_ps and flows differ in length"));
    }
    let legit = t.iter().zip(f.iter()).map(|(&t_ps, &flow)| traffic::Arrival { t_ps, flow });
    let (ts, fs): (Vec<u64>, Vec<u32>) = Mix::new(legit, &a, legit_flows, pool).map(|x| (x.t_ps, x.flow)).unzip();
    Ok((ts.into_pyarray_bound(py), fs.into_pyarray_bound(py)))
}

/// A class of `attack_frames`: (name, layout "plain" | "gtpu", UDP template, TCP
/// template, fields, tables, share).
type ForgeClass = (String, String, Vec<u8>, Vec<u8>, Vec<(String, (String, u64, u64, Vec<(u64, u64, u64)>))>, Vec<Vec<Vec<(String, u64, u64, u32, u64, u64)>>>, f64);

/// `attack_frames(classes, n, seed, legit)`: `n` distinct attack frames,
/// none among `legit` (`workload::forge`, python/synapse_vmt/p4/attack.py).
/// A class is `(name, layout, udp template, tcp template, fields, tables, share)`;
/// a field `(name, (draw, a, b, rows))` with draw `fixed` (a), `range`
/// ([a, b]), `entry` (table a, key b) or `forged` (a bits, drawn again
/// while in a row (lo, hi, mask)); a table a list of entries, each a list
/// of `(kind, value, mask, width, lo, hi)` with kind `exact`, `masked` or
/// `range`. ValueError on a bad class or too few forged bits.
#[pyfunction]
fn attack_frames<'py>(py: Python<'py>, classes: Vec<ForgeClass>, n: usize, seed: u64, legit: Vec<Vec<u8>>) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    use synapse_core::workload::forge::{forge, Class, Draw, EntryMatch, Layout};
    let mut cs = Vec::new();
    for (name, layout, udp, tcp, fields, tables, share) in classes {
        let layout = match layout.as_str() {
            "plain" => Layout::Plain,
            "gtpu" => Layout::Gtpu,
            other => return Err(err(format!("attack_frames: layout {other}?"))),
        };
        let mut fs = Vec::new();
        for (field, (kind, a, b, rows)) in fields {
            let d = match kind.as_str() {
                "fixed" => Draw::Fixed(a),
                "range" => Draw::Range(a, b),
                "entry" => Draw::Entry { table: a as usize, key: b as usize },
                "forged" => Draw::Forged { bits: a as u32, rows },
                other => return Err(err(format!("attack_frames: {field}: draw {other}?"))),
            };
            fs.push((field, d));
        }
        let mut ts = Vec::new();
        for t in tables {
            let mut es = Vec::new();
            for e in t {
                let mut ms = Vec::new();
                for (kind, value, mask, width, lo, hi) in e {
                    ms.push(match kind.as_str() {
                        "exact" => EntryMatch::Exact(value),
                        "masked" => EntryMatch::Masked { value, mask, width },
                        "range" => EntryMatch::Range(lo, hi),
                        other => return Err(err(format!("attack_frames: match {other}?"))),
                    });
                }
                es.push(ms);
            }
            ts.push(es);
        }
        cs.push(Class { name, layout, templates: [udp, tcp], fields: fs, tables: ts, share });
    }
    let legit: std::collections::HashSet<Vec<u8>> = legit.into_iter().collect();
    let out = py.allow_threads(|| forge(&cs, n, seed, &legit)).map_err(err)?;
    Ok(out.iter().map(|f| PyBytes::new_bound(py, f)).collect())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(attack_mix, m)?)?;
    m.add_function(wrap_pyfunction!(attack_frames, m)?)?;
    m.add_class::<Traffic>()?;
    m.add_function(wrap_pyfunction!(flow_dist_stats, m)?)?;
    m.add_function(wrap_pyfunction!(flow_dist_points, m)?)?;
    m.add_function(wrap_pyfunction!(flow_dist_cdf, m)?)?;
    m.add_function(wrap_pyfunction!(profile_points, m)?)?;
    m.add_function(wrap_pyfunction!(profile_density, m)?)?;
    m.add_function(wrap_pyfunction!(flows_for_rate, m)?)?;
    m.add_function(wrap_pyfunction!(arrivals_csv, m)?)?;
    m.add("FLOW_DISTS", flowsize::BUILTINS.to_vec())?;
    m.add("PROFILES", profile::BUILTINS.to_vec())?;
    m.add("FIG8_PROFILES", profile::FIG8.to_vec())?;
    m.add("DEFAULT_MEAN_PKT_BYTES", traffic::DEFAULT_MEAN_PKT_BYTES)?;
    Ok(())
}

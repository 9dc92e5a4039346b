//! Binding of the miss-ratio curves (`synapse mrc`, `synapse_core::sim::mrc`):
//! a scenario's config in (or a routed simulator and batches of its
//! arrivals), the curve's rows out as numpy columns.

use crate::sim::{each, Simulator};
use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use synapse_core::sim::{self, mrc};

fn verr(e: impl ToString) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// The curves of every table of one run.
#[pyclass(module = "synapse_vmt._core")]
pub struct Mrc {
    curves: Vec<mrc::TableMrc>,
}

fn config(pmus: Vec<u32>, blocks: Vec<u32>, sampling: &str, value: f64, shadow: bool) -> PyResult<mrc::MrcConfig> {
    let sampling = match sampling {
        "exact" => mrc::Sampling::Exact,
        "rate" if value > 0.0 && value <= 1.0 => mrc::Sampling::Rate(value),
        "size" if value >= 1.0 => mrc::Sampling::Size(value as usize),
        _ => return Err(verr(format!("mrc: sampling {sampling:?} {value}: expected exact, rate in (0, 1] or size >= 1"))),
    };
    if pmus.is_empty() || blocks.is_empty() {
        return Err(verr("mrc: empty grid of PMU counts or block sizes"));
    }
    Ok(mrc::MrcConfig { pmus, blocks, sampling, shadow })
}

#[pymethods]
impl Mrc {
    /// `{"table", "pmus", "block_size", "hit_rate"}`: one row per table and grid point.
    fn rows<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (mut t, mut p, mut b, mut h) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for c in &self.curves {
            for (pm, bl, hr) in c.curve() {
                t.push(c.keys.name.clone());
                p.push(pm as i64);
                b.push(bl as i64);
                h.push(hr);
            }
        }
        let d = PyDict::new_bound(py);
        d.set_item("table", t)?;
        d.set_item("pmus", p.into_pyarray_bound(py))?;
        d.set_item("block_size", b.into_pyarray_bound(py))?;
        d.set_item("hit_rate", h.into_pyarray_bound(py))?;
        Ok(d)
    }
    /// Per table: the PMU ids each PMU count of the grid shards its keys over.
    fn pmu_sets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new_bound(py);
        for c in &self.curves {
            d.set_item(&c.keys.name, c.pmu_sets())?;
        }
        Ok(d)
    }
    /// `set_pmus(table, pmus, ids, carry)`: table's count `pmus` shards its
    /// keys over `ids` from now on (`TableMrc::set_pmus`); whether it changed.
    fn set_pmus(&mut self, table: &str, pmus: u32, ids: Vec<u16>, carry: f64) -> PyResult<bool> {
        let Some(c) = self.curves.iter_mut().find(|c| c.keys.name == table) else {
            return Err(verr(format!("mrc: no table {table:?}")));
        };
        c.set_pmus(pmus, &ids, carry).map_err(verr)
    }
    /// Per table: references seen, distinct keys, and the sampling rate at the end.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new_bound(py);
        for c in &self.curves {
            let t = PyDict::new_bound(py);
            t.set_item("refs", c.refs)?;
            t.set_item("keys", c.key_count())?;
            t.set_item("rate", c.rate())?;
            d.set_item(&c.keys.name, t)?;
        }
        Ok(d)
    }
}

/// `mrc_run(config_json, pmus, blocks, sampling, value, shadow)`: the curves
/// of a flow-traffic (or trace) scenario over its whole duration.
#[pyfunction]
fn mrc_run(
    py: Python<'_>,
    config_json: &str,
    pmus: Vec<u32>,
    blocks: Vec<u32>,
    sampling: &str,
    value: f64,
    shadow: bool,
) -> PyResult<Mrc> {
    let cfg = config(pmus, blocks, sampling, value, shadow)?;
    let curves = py
        .allow_threads(|| -> Result<_, sim::SimError> {
            let mut s = sim::Simulator::from_json(config_json)?;
            s.mrc(&cfg)
        })
        .map_err(verr)?;
    Ok(Mrc { curves })
}

/// `mrc_routed(sim, pmus, blocks, sampling, value, shadow)`: empty curves
/// of a routed simulator's tables; feed them with [`mrc_push`].
#[pyfunction]
fn mrc_routed(sim: PyRef<'_, Simulator>, pmus: Vec<u32>, blocks: Vec<u32>, sampling: &str, value: f64, shadow: bool) -> PyResult<Mrc> {
    let cfg = config(pmus, blocks, sampling, value, shadow)?;
    let curves = each!(sim.inner(), s => s.mrc_routed(&cfg)).map_err(verr)?;
    Ok(Mrc { curves })
}

/// `mrc_push(mrc, sim, t_ps, flows)`: a batch of the routed simulator's
/// arrivals (as `push_arrivals` takes them) into its curves.
#[pyfunction]
fn mrc_push(
    mut m: PyRefMut<'_, Mrc>,
    sim: PyRef<'_, Simulator>,
    t_ps: PyReadonlyArray1<'_, u64>,
    flows: PyReadonlyArray1<'_, u32>,
) -> PyResult<()> {
    let (Some(t), Some(f)) = (t_ps.as_slice().ok(), flows.as_slice().ok()) else {
        return Err(verr("mrc_push: contiguous arrays expected"));
    };
    let curves = &mut m.curves;
    each!(sim.inner(), s => s.mrc_push(curves, t, f)).map_err(verr)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Mrc>()?;
    m.add_function(wrap_pyfunction!(mrc_run, m)?)?;
    m.add_function(wrap_pyfunction!(mrc_routed, m)?)?;
    m.add_function(wrap_pyfunction!(mrc_push, m)?)?;
    Ok(())
}

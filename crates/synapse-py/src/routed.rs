//! Binding of the routed simulator (`synapse run --p4`): the PHVs follow the
//! table visits the P4 interpreter computed. Tables, routes and arrivals cross
//! as numpy arrays, arrivals in batches (one call per control period).

use crate::sim::Simulator;
use numpy::{PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use synapse_core::rules::{
    FieldMatch, FieldSpec, Key, MatchKind, Rule, RuleSet, Schema, MAX_FIELDS,
};
use synapse_core::sim;

fn verr(e: impl ToString) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// One program table as the simulator needs it: per key word its bits and
/// match kind; the entries as (lo, hi, mask) word rows in match order; the
/// distinct keys routes use and, per key, the entry the program matched (-1:
/// miss).
#[allow(clippy::too_many_arguments)]
fn routed_table(
    name: String,
    bits: Vec<u8>,
    kinds: Vec<String>,
    lo: PyReadonlyArray2<'_, u32>,
    hi: PyReadonlyArray2<'_, u32>,
    mask: PyReadonlyArray2<'_, u32>,
    keys: PyReadonlyArray2<'_, u32>,
    expected: PyReadonlyArray1<'_, i64>,
) -> PyResult<sim::RoutedTable> {
    let words = bits.len();
    if words > MAX_FIELDS {
        return Err(verr(format!(
            "table {name}: key of {words} words; the simulator supports at most {MAX_FIELDS}"
        )));
    }
    let fields = bits
        .iter()
        .zip(&kinds)
        .enumerate()
        .map(|(i, (&b, k))| {
            let kind = MatchKind::parse(k)
                .ok_or_else(|| verr(format!("table {name}: match kind {k:?}")))?;
            Ok(FieldSpec {
                name: format!("w{i}"),
                bits: b,
                kind,
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    if fields.len() != words {
        return Err(verr(format!(
            "table {name}: bits and kinds differ in length"
        )));
    }
    let (lo, hi, mask) = (lo.as_array(), hi.as_array(), mask.as_array());
    let n = lo.nrows();
    if lo.shape() != hi.shape() || lo.shape() != mask.shape() || (n > 0 && lo.ncols() != words) {
        return Err(verr(format!(
            "table {name}: lo/hi/mask must be n_entries x {words}"
        )));
    }
    let rules = (0..n)
        .map(|r| {
            let f: Vec<FieldMatch> = (0..words)
                .map(|w| FieldMatch {
                    lo: lo[[r, w]],
                    hi: hi[[r, w]],
                    mask: mask[[r, w]],
                })
                .collect();
            // Priority only orders; index order is what the classifiers use.
            Rule::new(&f, (n - r) as u32, r as u32)
        })
        .collect();
    let keys_a = keys.as_array();
    if keys_a.nrows() > 0 && keys_a.ncols() != words {
        return Err(verr(format!("table {name}: keys must be n_keys x {words}")));
    }
    let keys: Vec<Key> = keys_a
        .rows()
        .into_iter()
        .map(|row| {
            let mut k = [0u32; MAX_FIELDS];
            for (d, s) in k.iter_mut().zip(row.iter()) {
                *d = *s;
            }
            Key(k)
        })
        .collect();
    let expected = expected
        .as_array()
        .iter()
        .map(|&e| if e < 0 { None } else { Some(e as u32) })
        .collect();
    Ok(sim::RoutedTable {
        name,
        rules: RuleSet::new(Schema { fields }, rules),
        keys,
        expected,
    })
}

/// `routed_simulator(config_json, tables, route_start, hop_table, hop_key)`:
/// `tables` is a list of tuples `(name, bits, kinds, lo, hi, mask, keys,
/// expected)` in `config.tables` order.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn routed_simulator(
    py: Python<'_>,
    config_json: &str,
    tables: Vec<(
        String,
        Vec<u8>,
        Vec<String>,
        PyReadonlyArray2<'_, u32>,
        PyReadonlyArray2<'_, u32>,
        PyReadonlyArray2<'_, u32>,
        PyReadonlyArray2<'_, u32>,
        PyReadonlyArray1<'_, i64>,
    )>,
    route_start: PyReadonlyArray1<'_, u32>,
    hop_table: PyReadonlyArray1<'_, u32>,
    hop_key: PyReadonlyArray1<'_, u32>,
) -> PyResult<Simulator> {
    let config: sim::Config =
        serde_json::from_str(config_json).map_err(|e| verr(format!("config: {e}")))?;
    let mut ts = Vec::new();
    for (name, bits, kinds, lo, hi, mask, keys, expected) in tables {
        ts.push(routed_table(
            name, bits, kinds, lo, hi, mask, keys, expected,
        )?);
    }
    let start = route_start.as_array().to_vec();
    let ht: Vec<u16> = hop_table.as_array().iter().map(|&t| t as u16).collect();
    let hk = hop_key.as_array().to_vec();
    let inner = py
        .allow_threads(|| sim::Simulator::build_routed(config, ts, start, ht, hk))
        .map_err(verr)?;
    Ok(Simulator::wrap(inner))
}

/// Appends a batch of arrivals (ps, non-decreasing; route ids) to a routed simulator.
#[pyfunction]
fn push_arrivals(
    mut sim: PyRefMut<'_, Simulator>,
    t_ps: PyReadonlyArray1<'_, u64>,
    route: PyReadonlyArray1<'_, u32>,
) -> PyResult<()> {
    let t = t_ps.as_array();
    let r = route.as_array();
    let (t, r) = (
        t.as_slice().map(|s| s.to_vec()),
        r.as_slice().map(|s| s.to_vec()),
    );
    let (Some(t), Some(r)) = (t, r) else {
        return Err(verr("push_arrivals: contiguous arrays expected"));
    };
    sim.inner_mut().push_arrivals(&t, &r).map_err(verr)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The one place Python learns how wide a simulated key may be.
    m.add("MAX_KEY_WORDS", MAX_FIELDS)?;
    m.add_function(wrap_pyfunction!(routed_simulator, m)?)?;
    m.add_function(wrap_pyfunction!(push_arrivals, m)?)?;
    Ok(())
}

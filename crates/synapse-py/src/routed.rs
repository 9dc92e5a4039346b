//! Binding of the routed simulator (`synapse run --p4`): the PHVs follow the
//! table visits the P4 interpreter computed. Tables, routes and arrivals cross
//! as numpy arrays, arrivals in batches (one call per control period).
//!
//! Key width: the simulator is built at the narrowest compiled width
//! (`rules::KEY_WIDTHS`: 8, 16, 32 words) that holds the program's widest
//! simulated table; narrower tables' keys are zero-padded to it (their rules
//! leave the extra words don't-care). A table wider than `MAX_WORDS` is an
//! error naming it.

use crate::sim::{each, AnySim, Simulator};
use numpy::{PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use synapse_core::rules::{
    words_for, FieldMatch, FieldSpec, Key, MatchKind, Rule, RuleSet, Schema, MAX_WORDS,
};
use synapse_core::sim;

fn verr(e: impl ToString) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// One program table as Python passes it: name; per key word its bits and
/// match kind; the entries as (lo, hi, mask) word rows in match order; the
/// distinct keys routes use and, per key, the entry the program matched (-1:
/// miss).
type TableArgs<'py> = (
    String,
    Vec<u8>,
    Vec<String>,
    PyReadonlyArray2<'py, u32>,
    PyReadonlyArray2<'py, u32>,
    PyReadonlyArray2<'py, u32>,
    PyReadonlyArray2<'py, u32>,
    PyReadonlyArray1<'py, i64>,
);

/// One program table in `N`-word keys (`N` at least its key words).
fn routed_table<const N: usize>(t: &TableArgs<'_>) -> PyResult<sim::RoutedTable<N>> {
    let (name, bits, kinds, lo, hi, mask, keys, expected) = t;
    let words = bits.len();
    if words > N {
        return Err(verr(format!(
            "table {name}: key of {words} words in a simulator of {N}-word keys"
        )));
    }
    let fields = bits
        .iter()
        .zip(kinds)
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
    let keys: Vec<Key<N>> = keys_a
        .rows()
        .into_iter()
        .map(|row| {
            let mut k = Key::<N>::zeroed();
            for (d, s) in k.0.iter_mut().zip(row.iter()) {
                *d = *s;
            }
            k
        })
        .collect();
    let expected = expected
        .as_array()
        .iter()
        .map(|&e| if e < 0 { None } else { Some(e as u32) })
        .collect();
    Ok(sim::RoutedTable {
        name: name.clone(),
        rules: RuleSet::new(Schema { fields }, rules),
        keys,
        expected,
    })
}

/// The routed simulator of `tables` in `N`-word keys.
fn build_n<const N: usize>(
    py: Python<'_>,
    config: sim::Config,
    tables: &[TableArgs<'_>],
    route: (Vec<u32>, Vec<u16>, Vec<u32>),
) -> PyResult<sim::Simulator<N>> {
    let ts = tables
        .iter()
        .map(routed_table::<N>)
        .collect::<PyResult<Vec<_>>>()?;
    let (start, ht, hk) = route;
    py.allow_threads(|| sim::Simulator::<N>::build_routed(config, ts, start, ht, hk))
        .map_err(verr)
}

/// `routed_simulator(config_json, tables, route_start, hop_table, hop_key)`:
/// `tables` is a list of tuples `(name, bits, kinds, lo, hi, mask, keys,
/// expected)` in `config.tables` order. The key width is the narrowest
/// compiled one that holds every table (`Simulator.key_words`).
#[pyfunction]
fn routed_simulator(
    py: Python<'_>,
    config_json: &str,
    tables: Vec<TableArgs<'_>>,
    route_start: PyReadonlyArray1<'_, u32>,
    hop_table: PyReadonlyArray1<'_, u32>,
    hop_key: PyReadonlyArray1<'_, u32>,
) -> PyResult<Simulator> {
    let config: sim::Config =
        serde_json::from_str(config_json).map_err(|e| verr(format!("config: {e}")))?;
    let mut width = 8;
    for t in &tables {
        width = width.max(words_for(&t.0, t.1.len()).map_err(verr)?);
    }
    let route = (
        route_start.as_array().to_vec(),
        hop_table.as_array().iter().map(|&t| t as u16).collect(),
        hop_key.as_array().to_vec(),
    );
    let inner = match width {
        8 => AnySim::W8(build_n::<8>(py, config, &tables, route)?),
        16 => AnySim::W16(build_n::<16>(py, config, &tables, route)?),
        _ => AnySim::W32(build_n::<32>(py, config, &tables, route)?),
    };
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
    each!(sim.inner_mut(), s => s.push_arrivals(&t, &r)).map_err(verr)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The one place Python learns how wide a simulated key may be.
    m.add("MAX_KEY_WORDS", MAX_WORDS)?;
    m.add_function(wrap_pyfunction!(routed_simulator, m)?)?;
    m.add_function(wrap_pyfunction!(push_arrivals, m)?)?;
    Ok(())
}

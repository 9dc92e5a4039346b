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
use pyo3::types::PyDict;
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
/// compiled one that holds every table (`Simulator.key_words`), plus the
/// version tag's word under `consistency = "program"`.
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
    // Program consistency tags keys with a version in a spare word: leave one.
    let spare = (config.update_engine.consistency == sim::Consistency::Program) as usize;
    let mut width = 8;
    for t in &tables {
        let w = t.1.len();
        let need = if w < MAX_WORDS { w + spare } else { w };
        width = width.max(words_for(&t.0, need).map_err(verr)?);
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

/// A write's transaction as arrays (see `change_routes`).
struct Change {
    op_table: Vec<u16>,
    op_kind: Vec<u8>,
    op_pos: Vec<u32>,
    op_rows: [numpy::ndarray::Array2<u32>; 3],
    key_table: Vec<u16>,
    keys: numpy::ndarray::Array2<u32>,
    flows: Vec<u32>,
    route_start: Vec<u32>,
    hop_table: Vec<u16>,
    hop_key: Vec<u32>,
    hop_expected: Vec<i64>,
}

fn change_n<const N: usize>(s: &mut sim::Simulator<N>, c: &Change) -> Result<u64, String> {
    let n = c.op_table.len();
    let [lo, hi, mask] = &c.op_rows;
    if c.op_kind.len() != n || c.op_pos.len() != n || lo.nrows() != n || hi.shape() != lo.shape() || mask.shape() != lo.shape() {
        return Err("change_routes: op_table, op_kind, op_pos and the op_lo/op_hi/op_mask rows differ in length".into());
    }
    if lo.ncols() > N || c.keys.ncols() > N {
        return Err(format!("change_routes: rows wider than the simulator's {N}-word keys"));
    }
    if c.keys.nrows() != c.key_table.len() {
        return Err("change_routes: key_table and keys differ in length".into());
    }
    let mut ops: Vec<(u16, Vec<sim::Op<N>>)> = Vec::new();
    for i in 0..n {
        let pos = c.op_pos[i];
        let op = match c.op_kind[i] {
            0 => {
                let f: Vec<FieldMatch> = (0..lo.ncols())
                    .map(|w| FieldMatch { lo: lo[[i, w]], hi: hi[[i, w]], mask: mask[[i, w]] })
                    .collect();
                sim::Op::Insert { pos, rule: Rule::new(&f, 0, 0) }
            }
            1 => sim::Op::Delete { pos },
            2 => sim::Op::Modify { pos },
            3 => sim::Op::Default,
            k => return Err(format!("change_routes: op kind {k} (0 insert, 1 delete, 2 modify, 3 default)")),
        };
        match ops.iter_mut().find(|o| o.0 == c.op_table[i]) {
            Some(o) => o.1.push(op),
            None => ops.push((c.op_table[i], vec![op])),
        }
    }
    let new_keys = c
        .key_table
        .iter()
        .zip(c.keys.rows())
        .map(|(&t, row)| {
            let mut k = Key::<N>::zeroed();
            for (d, s) in k.0.iter_mut().zip(row.iter()) {
                *d = *s;
            }
            (t, k)
        })
        .collect();
    let change = sim::RouteChange {
        ops,
        new_keys,
        flows: c.flows.clone(),
        route_start: c.route_start.clone(),
        hop_table: c.hop_table.clone(),
        hop_key: c.hop_key.clone(),
        hop_expected: c.hop_expected.iter().map(|&e| (e >= 0).then_some(e as u32)).collect(),
    };
    s.change_routes(change).map_err(|e| e.to_string())
}

/// `change_routes(sim, op_table, op_kind, op_pos, op_lo, op_hi, op_mask,
/// key_table, keys, flows, route_start, hop_table, hop_key, hop_expected)`:
/// one transaction of a routed simulator (a P4 write): table operations
/// (kind 0 insert of the row's (lo, hi, mask) words at pos, 1 delete, 2
/// modify, 3 default), keys new to tables (appended in order), and per flow
/// its new route (hops `route_start[i]..route_start[i+1]`; empty: none) with
/// the program's matched position per hop (-1: a miss; empty: unchecked).
/// The flows switch when the transaction is in force. Returns its number.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn change_routes(
    py: Python<'_>,
    mut sim: PyRefMut<'_, Simulator>,
    op_table: PyReadonlyArray1<'_, u16>,
    op_kind: PyReadonlyArray1<'_, u8>,
    op_pos: PyReadonlyArray1<'_, u32>,
    op_lo: PyReadonlyArray2<'_, u32>,
    op_hi: PyReadonlyArray2<'_, u32>,
    op_mask: PyReadonlyArray2<'_, u32>,
    key_table: PyReadonlyArray1<'_, u16>,
    keys: PyReadonlyArray2<'_, u32>,
    flows: PyReadonlyArray1<'_, u32>,
    route_start: PyReadonlyArray1<'_, u32>,
    hop_table: PyReadonlyArray1<'_, u16>,
    hop_key: PyReadonlyArray1<'_, u32>,
    hop_expected: PyReadonlyArray1<'_, i64>,
) -> PyResult<u64> {
    let c = Change {
        op_table: op_table.as_array().to_vec(),
        op_kind: op_kind.as_array().to_vec(),
        op_pos: op_pos.as_array().to_vec(),
        op_rows: [op_lo.as_array().to_owned(), op_hi.as_array().to_owned(), op_mask.as_array().to_owned()],
        key_table: key_table.as_array().to_vec(),
        keys: keys.as_array().to_owned(),
        flows: flows.as_array().to_vec(),
        route_start: route_start.as_array().to_vec(),
        hop_table: hop_table.as_array().to_vec(),
        hop_key: hop_key.as_array().to_vec(),
        hop_expected: hop_expected.as_array().to_vec(),
    };
    let inner = sim.inner_mut();
    py.allow_threads(|| each!(inner, s => change_n(s, &c))).map_err(verr)
}

/// Counters of a routed simulator's routes and their changes.
#[pyfunction]
fn route_stats<'py>(py: Python<'py>, sim: PyRef<'_, Simulator>) -> PyResult<Bound<'py, PyDict>> {
    let Some(r) = each!(sim.inner(), s => s.route_stats()) else {
        return Err(verr("route_stats: this simulator is not routed"));
    };
    let d = PyDict::new_bound(py);
    d.set_item("routes", r.routes)?;
    d.set_item("flows", r.flows)?;
    d.set_item("requested", r.requested)?;
    d.set_item("applied", r.applied)?;
    d.set_item("checked", r.checked)?;
    d.set_item("mismatched", r.mismatched)?;
    d.set_item("unchecked", r.unchecked)?;
    d.set_item("keys_added", r.keys_added)?;
    d.set_item("unrouted", r.unrouted)?;
    d.set_item("wrong_version_routes", r.wrong_version_routes)?;
    Ok(d)
}

/// Counts flows from `legit_flows` on apart as attack traffic (the
/// summary's `legit` and `attack`); before the first arrival.
#[pyfunction]
fn count_classes(mut sim: PyRefMut<'_, Simulator>, legit_flows: u32) -> PyResult<()> {
    each!(sim.inner_mut(), s => s.count_classes(legit_flows)).map_err(verr)
}

/// The hops (table index, key index) flow `f` follows now (empty: none).
#[pyfunction]
fn flow_route(sim: PyRef<'_, Simulator>, f: u32) -> Vec<(u16, u32)> {
    each!(sim.inner(), s => s.flow_route(f))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The one place Python learns how wide a simulated key may be.
    m.add("MAX_KEY_WORDS", MAX_WORDS)?;
    m.add_function(wrap_pyfunction!(routed_simulator, m)?)?;
    m.add_function(wrap_pyfunction!(push_arrivals, m)?)?;
    m.add_function(wrap_pyfunction!(change_routes, m)?)?;
    m.add_function(wrap_pyfunction!(route_stats, m)?)?;
    m.add_function(wrap_pyfunction!(flow_route, m)?)?;
    m.add_function(wrap_pyfunction!(count_classes, m)?)?;
    Ok(())
}

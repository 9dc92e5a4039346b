//! Binding of the cycle-stepped unit harnesses (`synapse_core::hw::harness`)
//! for co-simulation with the RTL: a whole stimulus goes in as numpy columns
//! (one row per cycle), the model's outputs come back the same way.
//! Keys are `(cycles, 8)` uint32 arrays, word 0 = the key's low 32 bits.
//! An action is an int64, -1 for "no rule" (`None`).

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use synapse_core::classify::Match;
use synapse_core::hw::harness::{self, OrbIn, OrbOut, PmuIn, PmuOut, VmuIn, VmuOut, VMU_PORTS};
use synapse_core::hw::pmu::{self, Response};
use synapse_core::rules::{Key, MAX_FIELDS};

fn verr(e: impl ToString) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn col(d: &Bound<'_, PyDict>, name: &str, n: Option<usize>) -> PyResult<Vec<i64>> {
    let v = d
        .get_item(name)?
        .ok_or_else(|| verr(format!("stimulus: missing column {name:?}")))?;
    let a: PyReadonlyArray1<i64> = v.extract()?;
    let x = a.as_array().to_vec();
    if n.is_some_and(|n| n != x.len()) {
        return Err(verr(format!(
            "stimulus: column {name:?} has {} rows, expected {}",
            x.len(),
            n.unwrap()
        )));
    }
    Ok(x)
}

fn keys(d: &Bound<'_, PyDict>, name: &str, n: usize) -> PyResult<Vec<Key>> {
    let v = d
        .get_item(name)?
        .ok_or_else(|| verr(format!("stimulus: missing column {name:?}")))?;
    let a: PyReadonlyArray2<u32> = v.extract()?;
    let a = a.as_array();
    if a.nrows() != n || a.ncols() != MAX_FIELDS {
        return Err(verr(format!(
            "stimulus: {name:?} must be ({n}, {MAX_FIELDS}) uint32"
        )));
    }
    Ok(a.rows()
        .into_iter()
        .map(|r| {
            let mut k = Key::default();
            for (w, x) in k.0.iter_mut().zip(r.iter()) {
                *w = *x;
            }
            k
        })
        .collect())
}

fn act_out(a: Match) -> i64 {
    a.map_or(-1, |x| x as i64)
}
fn act_in(a: i64) -> Match {
    (a >= 0).then_some(a as u32)
}

fn keys_out<'py>(py: Python<'py>, k: &[Key]) -> PyObject {
    let flat: Vec<u32> = k.iter().flat_map(|k| k.0).collect();
    Array2::from_shape_vec((k.len(), MAX_FIELDS), flat)
        .unwrap()
        .into_pyarray_bound(py)
        .into_any()
        .unbind()
}

fn pmu_stim_in(d: &Bound<'_, PyDict>) -> PyResult<Vec<PmuIn>> {
    let ctl_op = col(d, "ctl_op", None)?;
    let n = ctl_op.len();
    let c = |name| col(d, name, Some(n));
    let (ctl_tbl, ctl_next_v) = (c("ctl_tbl")?, c("ctl_next_v")?);
    let (req_valid, req_tbl, req_tag) = (c("req_valid")?, c("req_tbl")?, c("req_tag")?);
    let (fill_valid, fill_tbl, fill_tag, fill_act) = (
        c("fill_valid")?,
        c("fill_tbl")?,
        c("fill_tag")?,
        c("fill_act")?,
    );
    let (rsp_ready, mq_ready) = (c("rsp_ready")?, c("mq_ready")?);
    let (req_key, fill_key) = (keys(d, "req_key", n)?, keys(d, "fill_key", n)?);
    Ok((0..n)
        .map(|i| PmuIn {
            ctl_op: ctl_op[i] as u8,
            ctl_tbl: ctl_tbl[i] as u16,
            ctl_next_v: ctl_next_v[i] != 0,
            req: (req_valid[i] != 0).then_some((req_tbl[i] as u16, req_tag[i] as u64, req_key[i])),
            fill: (fill_valid[i] != 0).then_some((
                fill_tbl[i] as u16,
                fill_tag[i] as u64,
                fill_key[i],
                act_in(fill_act[i]),
            )),
            rsp_ready: rsp_ready[i] != 0,
            mq_ready: mq_ready[i] != 0,
        })
        .collect())
}

fn pmu_stim_out<'py>(py: Python<'py>, s: &[PmuIn]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new_bound(py);
    let put = |name: &str, f: &dyn Fn(&PmuIn) -> i64| -> PyResult<()> {
        d.set_item(
            name,
            s.iter().map(f).collect::<Vec<i64>>().into_pyarray_bound(py),
        )
    };
    put("ctl_op", &|i| i.ctl_op as i64)?;
    put("ctl_tbl", &|i| i.ctl_tbl as i64)?;
    put("ctl_next_v", &|i| i.ctl_next_v as i64)?;
    put("req_valid", &|i| i.req.is_some() as i64)?;
    put("req_tbl", &|i| i.req.map_or(0, |r| r.0 as i64))?;
    put("req_tag", &|i| i.req.map_or(0, |r| r.1 as i64))?;
    put("fill_valid", &|i| i.fill.is_some() as i64)?;
    put("fill_tbl", &|i| i.fill.map_or(0, |r| r.0 as i64))?;
    put("fill_tag", &|i| i.fill.map_or(0, |r| r.1 as i64))?;
    put("fill_act", &|i| i.fill.map_or(-1, |r| act_out(r.3)))?;
    put("rsp_ready", &|i| i.rsp_ready as i64)?;
    put("mq_ready", &|i| i.mq_ready as i64)?;
    let rk: Vec<Key> = s
        .iter()
        .map(|i| i.req.map_or(Key::default(), |r| r.2))
        .collect();
    let fk: Vec<Key> = s
        .iter()
        .map(|i| i.fill.map_or(Key::default(), |r| r.2))
        .collect();
    d.set_item("req_key", keys_out(py, &rk))?;
    d.set_item("fill_key", keys_out(py, &fk))?;
    Ok(d)
}

fn pmu_out<'py>(py: Python<'py>, o: &[PmuOut]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new_bound(py);
    let put = |name: &str, f: &dyn Fn(&PmuOut) -> i64| -> PyResult<()> {
        d.set_item(
            name,
            o.iter().map(f).collect::<Vec<i64>>().into_pyarray_bound(py),
        )
    };
    put("req_ready", &|x| x.req_ready as i64)?;
    put("rsp_kind", &|x| match x.rsp {
        None => 0,
        Some(Response::Hit { .. }) => 1,
        Some(Response::Miss { .. }) => 2,
        Some(Response::Fill { .. }) => 3,
        // (Only the simulator's shed gate makes one; the harness has none.)
        Some(Response::Shed { .. }) => 4,
    })?;
    put("rsp_tbl", &|x| match x.rsp {
        Some(
            Response::Hit { table, .. }
            | Response::Miss { table, .. }
            | Response::Fill { table, .. }
            | Response::Shed { table, .. },
        ) => table as i64,
        None => 0,
    })?;
    put("rsp_tag", &|x| match x.rsp {
        Some(
            Response::Hit { tag, .. }
            | Response::Miss { tag, .. }
            | Response::Fill { tag, .. }
            | Response::Shed { tag, .. },
        ) => tag as i64,
        None => 0,
    })?;
    put("rsp_act", &|x| match x.rsp {
        Some(Response::Hit { action, .. } | Response::Fill { action, .. }) => act_out(action),
        _ => -1,
    })?;
    put("rsp_cmp", &|x| match x.rsp {
        Some(Response::Hit { compared, .. } | Response::Miss { compared, .. }) => compared as i64,
        _ => 0,
    })?;
    put("mq_valid", &|x| x.mq.is_some() as i64)?;
    put("mq_tbl", &|x| x.mq.map_or(0, |m| m.0 as i64))?;
    put("mq_tag", &|x| x.mq.map_or(0, |m| m.1 as i64))?;
    put("state", &|x| x.state as i64)?;
    put("state_tbl", &|x| x.state_tbl as i64)?;
    let mk: Vec<Key> = o
        .iter()
        .map(|x| x.mq.map_or(Key::default(), |m| m.2))
        .collect();
    d.set_item("mq_key", keys_out(py, &mk))?;
    Ok(d)
}

/// `pmu_generate(config_json, gen_json, stream_keys=None, stream_actions=None)
/// -> (stimulus, outputs)`: drives one PMU closed-loop with a fake ELU
/// (knobs: `harness::PmuGen`); with a stream, requests replay its keys in
/// order and the ELU answers with its actions (-1 = no rule).
/// `admit_replay(config_json, entries, op, full, keys)`: the doorkeeper
/// (`hw::admit`) of a CAM of `entries` entries, one operation per row: `op`
/// 0 none, 1 a fill (admitted when the CAM is not `full` or the key missed
/// before), 2 the shed gate's question (has the key missed before?). Returns
/// per row the key's two filter bits (`h0`, `h1`), the answer (`yes`) and
/// whether the filter was cleared by this row (`clear`), as numpy columns.
#[pyfunction]
fn admit_replay<'py>(
    py: Python<'py>,
    config_json: &str,
    entries: u32,
    op: PyReadonlyArray1<'_, i64>,
    full: PyReadonlyArray1<'_, i64>,
    keys_in: PyReadonlyArray2<'_, u32>,
) -> PyResult<Bound<'py, PyDict>> {
    use synapse_core::hw::admit::{Config, Doorkeeper};
    let c: Config = serde_json::from_str(config_json).map_err(verr)?;
    let (op, full, k) = (op.as_array(), full.as_array(), keys_in.as_array());
    let n = op.len();
    if full.len() != n || k.nrows() != n || k.ncols() != MAX_FIELDS {
        return Err(verr(format!("admit_replay: op, full and keys ({n}, {MAX_FIELDS}) must have as many rows")));
    }
    let mut d = Doorkeeper::new(&c, entries);
    let (mut h0, mut h1, mut yes, mut clear) = (vec![0i64; n], vec![0i64; n], vec![0i64; n], vec![0i64; n]);
    for i in 0..n {
        let mut key = Key::default();
        for (w, x) in key.0.iter_mut().zip(k.row(i).iter()) {
            *w = *x;
        }
        let [a, b] = d.probes(&key);
        (h0[i], h1[i]) = (a as i64, b as i64);
        let resets = d.resets;
        yes[i] = match op[i] {
            0 => 0,
            1 => d.admit(&key, full[i] != 0) as i64,
            2 => d.seen(&key) as i64,
            x => return Err(verr(format!("admit_replay: row {i}: op {x} (expected 0, 1 or 2)"))),
        };
        clear[i] = (d.resets != resets) as i64;
    }
    let out = PyDict::new_bound(py);
    out.set_item("h0", h0.into_pyarray_bound(py))?;
    out.set_item("h1", h1.into_pyarray_bound(py))?;
    out.set_item("yes", yes.into_pyarray_bound(py))?;
    out.set_item("clear", clear.into_pyarray_bound(py))?;
    Ok(out)
}

#[pyfunction]
#[pyo3(signature = (config_json, gen_json, stream_keys=None, stream_actions=None))]
fn pmu_generate<'py>(
    py: Python<'py>,
    config_json: &str,
    gen_json: &str,
    stream_keys: Option<PyReadonlyArray2<'py, u32>>,
    stream_actions: Option<PyReadonlyArray1<'py, i64>>,
) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>)> {
    let c: pmu::Config = serde_json::from_str(config_json).map_err(verr)?;
    let g: harness::PmuGen = serde_json::from_str(gen_json).map_err(verr)?;
    let mut stream = Vec::new();
    if let (Some(k), Some(a)) = (stream_keys, stream_actions) {
        let (k, a) = (k.as_array(), a.as_array());
        if k.nrows() != a.len() || k.ncols() > MAX_FIELDS {
            return Err(verr(
                "stream_keys must be (n, <=8) uint32 and stream_actions (n,) int64",
            ));
        }
        for (r, &x) in k.rows().into_iter().zip(a.iter()) {
            let mut key = Key::default();
            for (w, v) in key.0.iter_mut().zip(r.iter()) {
                *w = *v;
            }
            stream.push((key, act_in(x)));
        }
    }
    let (s, o) = py.allow_threads(|| harness::gen_pmu_stream(&c, &g, &stream));
    Ok((pmu_stim_out(py, &s)?, pmu_out(py, &o)?))
}

/// `pmu_run(config_json, key_bits, stimulus) -> outputs`: replays a stimulus.
#[pyfunction]
fn pmu_run<'py>(
    py: Python<'py>,
    config_json: &str,
    key_bits: u32,
    stimulus: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyDict>> {
    let c: pmu::Config = serde_json::from_str(config_json).map_err(verr)?;
    let s = pmu_stim_in(stimulus)?;
    let o = py
        .allow_threads(|| harness::run_pmu(&c, key_bits, &s))
        .map_err(verr)?;
    pmu_out(py, &o)
}

/// `pmu_record(config_json, pmu, sim_cycles, rows, max_gap) -> (stimulus,
/// outputs, info)`: runs the full simulator on a scenario (`sim::Config`
/// JSON) for `sim_cycles` cycles recording PMU `pmu`'s inputs
/// (`sim/record.rs`), turns them into `rows` rows of stimulus (idle
/// stretches cut to `max_gap`), and replays it into the harness's PMU.
/// `info`: the PMU config (JSON), key bits, and how many rows the replay's
/// response differs from the simulator's (0 when the recording is faithful).
#[pyfunction]
fn pmu_record<'py>(
    py: Python<'py>,
    config_json: &str,
    pmu: usize,
    sim_cycles: u64,
    rows: usize,
    max_gap: u64,
) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>, Bound<'py, PyDict>)> {
    let key_bits = 32 * MAX_FIELDS as u32;
    let (cfg, stim, out, differ) = py
        .allow_threads(|| -> Result<_, String> {
            let mut sim = synapse_core::sim::Simulator::from_json(config_json).map_err(|e| e.0)?;
            sim.record_pmu(pmu).map_err(|e| e.0)?;
            sim.run_until(sim_cycles);
            let rec = sim.take_recording().ok_or("no recording")?;
            let (stim, want) = rec.stimulus(rows, 16, max_gap)?;
            let mut cfg = sim.config.pmus.clone();
            cfg.count = 1;
            let out = harness::run_pmu(&cfg, key_bits, &stim)?;
            let differ = out.iter().zip(&want).filter(|(o, w)| o.rsp != **w).count();
            Ok((cfg, stim, out, differ))
        })
        .map_err(verr)?;
    let info = PyDict::new_bound(py);
    info.set_item("config", serde_json::to_string(&cfg).map_err(verr)?)?;
    info.set_item("key_bits", key_bits)?;
    info.set_item("differ_from_sim", differ)?;
    Ok((pmu_stim_out(py, &stim)?, pmu_out(py, &out)?, info))
}

/// `cluster_record(config_json, sim_cycles) -> str`: runs the full
/// simulator on a scenario (`sim::Config` JSON) for `sim_cycles` cycles
/// recording its whole VMT cluster (`sim/record_cluster.rs`); returns the
/// recording as JSON (`ClusterLog::to_json`).
#[pyfunction]
fn cluster_record(py: Python<'_>, config_json: &str, sim_cycles: u64) -> PyResult<String> {
    py.allow_threads(|| -> Result<String, String> {
        let mut sim = synapse_core::sim::Simulator::from_json(config_json).map_err(|e| e.0)?;
        sim.record_cluster().map_err(|e| e.0)?;
        sim.run_until(sim_cycles);
        let rec = sim.take_recording().and_then(|r| r.cluster).ok_or("no recording")?;
        Ok(rec.to_json().to_string())
    })
    .map_err(verr)
}

fn orb_stim_in(d: &Bound<'_, PyDict>) -> PyResult<Vec<OrbIn>> {
    let in_valid = col(d, "in_valid", None)?;
    let n = in_valid.len();
    let c = |name| col(d, name, Some(n));
    let (in_tbl, in_tag) = (c("in_tbl")?, c("in_tag")?);
    let (done_valid, done_slot, done_act) = (c("done_valid")?, c("done_slot")?, c("done_act")?);
    let in_key = keys(d, "in_key", n)?;
    Ok((0..n)
        .map(|i| OrbIn {
            miss: (in_valid[i] != 0).then_some((in_tbl[i] as u16, in_tag[i] as u64, in_key[i])),
            done: (done_valid[i] != 0).then_some((done_slot[i] as u32, act_in(done_act[i]))),
        })
        .collect())
}

fn orb_stim_out<'py>(py: Python<'py>, s: &[OrbIn]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new_bound(py);
    let put = |name: &str, f: &dyn Fn(&OrbIn) -> i64| -> PyResult<()> {
        d.set_item(
            name,
            s.iter().map(f).collect::<Vec<i64>>().into_pyarray_bound(py),
        )
    };
    put("in_valid", &|i| i.miss.is_some() as i64)?;
    put("in_tbl", &|i| i.miss.map_or(0, |m| m.0 as i64))?;
    put("in_tag", &|i| i.miss.map_or(0, |m| m.1 as i64))?;
    put("done_valid", &|i| i.done.is_some() as i64)?;
    put("done_slot", &|i| i.done.map_or(0, |x| x.0 as i64))?;
    put("done_act", &|i| i.done.map_or(-1, |x| act_out(x.1)))?;
    let k: Vec<Key> = s
        .iter()
        .map(|i| i.miss.map_or(Key::default(), |m| m.2))
        .collect();
    d.set_item("in_key", keys_out(py, &k))?;
    Ok(d)
}

fn orb_out<'py>(py: Python<'py>, o: &[OrbOut]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new_bound(py);
    let put = |name: &str, f: &dyn Fn(&OrbOut) -> i64| -> PyResult<()> {
        d.set_item(
            name,
            o.iter().map(f).collect::<Vec<i64>>().into_pyarray_bound(py),
        )
    };
    put("in_ready", &|x| x.in_ready as i64)?;
    put("iss_valid", &|x| x.issue.is_some() as i64)?;
    put("iss_slot", &|x| x.issue.map_or(0, |s| s as i64))?;
    put("cm_valid", &|x| x.commit.is_some() as i64)?;
    put("cm_tbl", &|x| x.commit.map_or(0, |c| c.0 as i64))?;
    put("cm_tag", &|x| x.commit.map_or(0, |c| c.1 as i64))?;
    put("cm_act", &|x| x.commit.map_or(-1, |c| act_out(c.3)))?;
    let k: Vec<Key> = o
        .iter()
        .map(|x| x.commit.map_or(Key::default(), |c| c.2))
        .collect();
    d.set_item("cm_key", keys_out(py, &k))?;
    Ok(d)
}

/// `orb_generate(entries, lookup_slots, gen_json) -> (stimulus, outputs)`.
#[pyfunction]
fn orb_generate<'py>(
    py: Python<'py>,
    entries: u32,
    lookup_slots: u32,
    gen_json: &str,
) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>)> {
    let g: harness::OrbGen = serde_json::from_str(gen_json).map_err(verr)?;
    let (s, o) = py.allow_threads(|| harness::gen_orb(entries, lookup_slots, &g));
    Ok((orb_stim_out(py, &s)?, orb_out(py, &o)?))
}

/// `orb_run(entries, lookup_slots, key_bits, stimulus) -> outputs`.
#[pyfunction]
fn orb_run<'py>(
    py: Python<'py>,
    entries: u32,
    lookup_slots: u32,
    key_bits: u32,
    stimulus: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyDict>> {
    let s = orb_stim_in(stimulus)?;
    let o = py
        .allow_threads(|| harness::run_orb(entries, lookup_slots, key_bits, &s))
        .map_err(verr)?;
    orb_out(py, &o)
}

fn vmu_stim_in(d: &Bound<'_, PyDict>) -> PyResult<Vec<VmuIn>> {
    let phv_valid = col(d, "phv_valid", None)?;
    let n = phv_valid.len();
    let c = |name: &str| col(d, name, Some(n));
    let (phv_hash, req_ready, rel_ready) = (c("phv_hash")?, c("req_ready")?, c("rel_ready")?);
    let (lut_we, lut_addr, lut_data) = (c("lut_we")?, c("lut_addr")?, c("lut_data")?);
    let mut ports = Vec::new();
    for p in 0..VMU_PORTS {
        ports.push((
            c(&format!("rsp{p}_valid"))?,
            c(&format!("rsp{p}_miss"))?,
            c(&format!("rsp{p}_tag"))?,
            c(&format!("rsp{p}_act"))?,
        ));
    }
    Ok((0..n)
        .map(|i| {
            let mut rsp = [None; VMU_PORTS];
            for (p, (v, m, t, a)) in ports.iter().enumerate() {
                rsp[p] = (v[i] != 0).then_some((t[i] as u64, m[i] != 0, act_in(a[i])));
            }
            VmuIn {
                phv: (phv_valid[i] != 0).then_some(phv_hash[i] as u32),
                req_ready: req_ready[i] != 0,
                rsp,
                rel_ready: rel_ready[i] != 0,
                lut: (lut_we[i] != 0).then_some((lut_addr[i] as u32, lut_data[i] as u16)),
            }
        })
        .collect())
}

fn vmu_stim_out<'py>(py: Python<'py>, s: &[VmuIn]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new_bound(py);
    let put = |name: &str, f: &dyn Fn(&VmuIn) -> i64| -> PyResult<()> {
        d.set_item(
            name,
            s.iter().map(f).collect::<Vec<i64>>().into_pyarray_bound(py),
        )
    };
    put("phv_valid", &|i| i.phv.is_some() as i64)?;
    put("phv_hash", &|i| i.phv.unwrap_or(0) as i64)?;
    put("req_ready", &|i| i.req_ready as i64)?;
    put("rel_ready", &|i| i.rel_ready as i64)?;
    put("lut_we", &|i| i.lut.is_some() as i64)?;
    put("lut_addr", &|i| i.lut.map_or(0, |l| l.0 as i64))?;
    put("lut_data", &|i| i.lut.map_or(0, |l| l.1 as i64))?;
    for p in 0..VMU_PORTS {
        put(&format!("rsp{p}_valid"), &|i| i.rsp[p].is_some() as i64)?;
        put(&format!("rsp{p}_miss"), &|i| {
            i.rsp[p].map_or(0, |r| r.1 as i64)
        })?;
        put(&format!("rsp{p}_tag"), &|i| {
            i.rsp[p].map_or(0, |r| r.0 as i64)
        })?;
        put(&format!("rsp{p}_act"), &|i| {
            i.rsp[p].map_or(-1, |r| act_out(r.2))
        })?;
    }
    Ok(d)
}

fn vmu_out<'py>(py: Python<'py>, o: &[VmuOut]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new_bound(py);
    let put = |name: &str, f: &dyn Fn(&VmuOut) -> i64| -> PyResult<()> {
        d.set_item(
            name,
            o.iter().map(f).collect::<Vec<i64>>().into_pyarray_bound(py),
        )
    };
    put("phv_ready", &|x| x.phv_ready as i64)?;
    put("req_valid", &|x| x.req.is_some() as i64)?;
    put("req_pmu", &|x| x.req.map_or(0, |r| r.0 as i64))?;
    put("req_tag", &|x| x.req.map_or(0, |r| r.1 as i64))?;
    put("direct_valid", &|x| x.direct.is_some() as i64)?;
    put("direct_tag", &|x| x.direct.map_or(0, |t| t as i64))?;
    put("rel_valid", &|x| x.rel.is_some() as i64)?;
    put("rel_tag", &|x| x.rel.map_or(0, |r| r.0 as i64))?;
    put("rel_act", &|x| x.rel.map_or(-1, |r| act_out(r.1)))?;
    put("rel_via", &|x| x.rel.map_or(0, |r| r.2 as i64))?;
    Ok(d)
}

/// `vmu_generate(lookup_bits, phv_fifo, gen_json) -> (stimulus, outputs)`.
#[pyfunction]
fn vmu_generate<'py>(
    py: Python<'py>,
    lookup_bits: u32,
    phv_fifo: u32,
    gen_json: &str,
) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>)> {
    let g: harness::VmuGen = serde_json::from_str(gen_json).map_err(verr)?;
    let (s, o) = py.allow_threads(|| harness::gen_vmu(lookup_bits, phv_fifo, &g));
    Ok((vmu_stim_out(py, &s)?, vmu_out(py, &o)?))
}

/// `vmu_run(lookup_bits, phv_fifo, stimulus) -> outputs`.
#[pyfunction]
fn vmu_run<'py>(
    py: Python<'py>,
    lookup_bits: u32,
    phv_fifo: u32,
    stimulus: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyDict>> {
    let s = vmu_stim_in(stimulus)?;
    let o = py
        .allow_threads(|| harness::run_vmu(lookup_bits, phv_fifo, &s))
        .map_err(verr)?;
    vmu_out(py, &o)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pmu_generate, m)?)?;
    m.add_function(wrap_pyfunction!(admit_replay, m)?)?;
    m.add_function(wrap_pyfunction!(pmu_run, m)?)?;
    m.add_function(wrap_pyfunction!(pmu_record, m)?)?;
    m.add_function(wrap_pyfunction!(cluster_record, m)?)?;
    m.add_function(wrap_pyfunction!(orb_generate, m)?)?;
    m.add_function(wrap_pyfunction!(orb_run, m)?)?;
    m.add_function(wrap_pyfunction!(vmu_generate, m)?)?;
    m.add_function(wrap_pyfunction!(vmu_run, m)?)?;
    Ok(())
}

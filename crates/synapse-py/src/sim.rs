//! Binding of the simulator: `synapse_vmt._core.Simulator(config_json)`.
//! The contract is docs/simulator-api.md: batches out (numpy columns per
//! window), never per packet.
//!
//! The core simulator is generic over the key width (`Simulator<N>`, N
//! 32-bit words); the binding holds one of the compiled widths
//! ([`AnySim`]: 8, 16 or 32 words, `rules::KEY_WIDTHS`) and dispatches each
//! call once (`each!`), so a batch runs fully monomorphized. ClassBench
//! scenarios use 8 words; a P4 program's routed simulator (`routed.rs`) the
//! narrowest width that holds its widest table.

use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyList, PyString};
use std::time::Instant;

/// A fast summary's quantile keys (`lat_p05_ns`, ...), made once: the
/// binding's summary costs a fixed part of a short fast run.
fn quantile_names(py: Python<'_>) -> &'static [Py<PyString>] {
    static NAMES: GILOnceCell<Vec<Py<PyString>>> = GILOnceCell::new();
    NAMES.get_or_init(py, || {
        sim::fast::QUANTILES
            .iter()
            .map(|q| PyString::new_bound(py, &format!("lat_p{:02}_ns", (q * 100.0).round() as u32)).unbind())
            .collect()
    })
}
use synapse_core::sim;

/// `[fast]` parsed from its JSON, the last one kept: a sweep's or a
/// bench's runs pass the same table again, and its parse was a fixed
/// part of a short fast run.
fn fast_config(json: &str) -> PyResult<sim::fast::FastConfig> {
    static LAST: std::sync::Mutex<Option<(String, sim::fast::FastConfig)>> = std::sync::Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((j, fc)) = last.as_ref().filter(|(j, _)| j == json) {
        return Ok(fc.clone());
    }
    let fc: sim::fast::FastConfig = serde_json::from_str(json).map_err(|e| verr(format!("fast: {e}")))?;
    *last = Some((json.to_owned(), fc.clone()));
    Ok(fc)
}

/// A simulator of one compiled key width.
pub(crate) enum AnySim {
    W8(sim::Simulator<8>),
    W16(sim::Simulator<16>),
    W32(sim::Simulator<32>),
}

/// Runs `$body` with `$s` bound to the typed simulator inside an [`AnySim`].
macro_rules! each {
    ($any:expr, $s:ident => $body:expr) => {
        match $any {
            $crate::sim::AnySim::W8($s) => $body,
            $crate::sim::AnySim::W16($s) => $body,
            $crate::sim::AnySim::W32($s) => $body,
        }
    };
}
pub(crate) use each;

#[pyclass(module = "synapse_vmt._core")]
pub struct Simulator {
    inner: AnySim,
    /// Wall-clock seconds spent in run_until (simulation speed).
    wall_s: f64,
}

impl Simulator {
    /// Wraps a simulator built elsewhere (the routed builder, `routed.rs`).
    pub(crate) fn wrap(inner: AnySim) -> Simulator {
        Simulator { inner, wall_s: 0.0 }
    }
    pub(crate) fn inner_mut(&mut self) -> &mut AnySim {
        &mut self.inner
    }
    pub(crate) fn inner(&self) -> &AnySim {
        &self.inner
    }
}

fn verr(e: impl ToString) -> PyErr {
    PyValueError::new_err(e.to_string())
}

#[pymethods]
impl Simulator {
    #[new]
    fn new(py: Python<'_>, config_json: &str) -> PyResult<Self> {
        let inner = py
            .allow_threads(|| sim::Simulator::from_json(config_json))
            .map_err(verr)?;
        Ok(Simulator::wrap(AnySim::W8(inner)))
    }

    /// Key width of this simulator in 32-bit words (8, 16 or 32).
    #[getter]
    fn key_words(&self) -> usize {
        match self.inner {
            AnySim::W8(_) => 8,
            AnySim::W16(_) => 16,
            AnySim::W32(_) => 32,
        }
    }

    /// Advances simulated time to `t_ns` (idle cycles skipped).
    fn run_until(&mut self, py: Python<'_>, t_ns: f64) {
        let t0 = Instant::now();
        each!(&mut self.inner, s => py.allow_threads(|| s.run_until_ns(t_ns)));
        self.wall_s += t0.elapsed().as_secs_f64();
    }

    fn now_ns(&self) -> f64 {
        each!(&self.inner, s => s.now_ns())
    }

    fn table_names(&self) -> Vec<String> {
        each!(&self.inner, s => s.table_names())
    }

    /// Keys (table lookups) completed so far.
    fn keys_done(&self) -> u64 {
        each!(&self.inner, s => s.keys_done())
    }

    /// Per-(window, table) rows completed since the last call.
    fn windows<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (rows, cyc) = each!(&mut self.inner, s => (s.take_windows(), s.cycle_ns()));
        let d = PyDict::new_bound(py);
        let f =
            |g: &dyn Fn(&sim::stats::WindowRow) -> f64| rows.iter().map(g).collect::<Vec<f64>>();
        let i =
            |g: &dyn Fn(&sim::stats::WindowRow) -> i64| rows.iter().map(g).collect::<Vec<i64>>();
        d.set_item("t_ns", f(&|r| r.end as f64 * cyc).into_pyarray_bound(py))?;
        d.set_item("table", i(&|r| r.table as i64).into_pyarray_bound(py))?;
        d.set_item("arrived", i(&|r| r.c.arrived as i64).into_pyarray_bound(py))?;
        d.set_item(
            "processed",
            i(&|r| r.c.processed as i64).into_pyarray_bound(py),
        )?;
        d.set_item("hits", i(&|r| r.c.hits as i64).into_pyarray_bound(py))?;
        d.set_item("misses", i(&|r| r.c.misses as i64).into_pyarray_bound(py))?;
        d.set_item(
            "elu_requests",
            i(&|r| r.c.elu_requests as i64).into_pyarray_bound(py),
        )?;
        d.set_item(
            "hbm_bytes",
            i(&|r| r.c.hbm_bytes as i64).into_pyarray_bound(py),
        )?;
        d.set_item(
            "lat_mean_ns",
            f(&|r| {
                let n = r.c.lat.total();
                if n > 0 {
                    r.c.lat_sum as f64 / n as f64 * cyc
                } else {
                    f64::NAN
                }
            })
            .into_pyarray_bound(py),
        )?;
        d.set_item(
            "lat_p50_ns",
            f(&|r| {
                if r.c.lat.total() > 0 {
                    r.c.lat.quantile(0.5) * cyc
                } else {
                    f64::NAN
                }
            })
            .into_pyarray_bound(py),
        )?;
        d.set_item(
            "lat_p99_ns",
            f(&|r| {
                if r.c.lat.total() > 0 {
                    r.c.lat.quantile(0.99) * cyc
                } else {
                    f64::NAN
                }
            })
            .into_pyarray_bound(py),
        )?;
        d.set_item(
            "sojourn_mean_ns",
            f(&|r| {
                if r.c.processed > 0 {
                    r.c.sojourn_sum as f64 / r.c.processed as f64 * cyc
                } else {
                    f64::NAN
                }
            })
            .into_pyarray_bound(py),
        )?;
        d.set_item("pmus", i(&|r| r.pmus as i64).into_pyarray_bound(py))?;
        d.set_item(
            "cam_compares",
            i(&|r| r.c.cam_compares as i64).into_pyarray_bound(py),
        )?;
        d.set_item("stalls", i(&|r| r.c.stalls as i64).into_pyarray_bound(py))?;
        d.set_item("drops", i(&|r| r.c.drops as i64).into_pyarray_bound(py))?;
        d.set_item(
            "fifo_max",
            i(&|r| r.c.fifo_max as i64).into_pyarray_bound(py),
        )?;
        d.set_item(
            "reordered",
            i(&|r| r.c.reordered as i64).into_pyarray_bound(py),
        )?;
        Ok(d)
    }

    /// Per-window routing counts: PHVs leaving table `src` for `dst` (-1 = exit).
    fn edges<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (rows, cyc) = each!(&mut self.inner, s => (s.take_edges(), s.cycle_ns()));
        let d = PyDict::new_bound(py);
        let i = |g: &dyn Fn(&sim::stats::EdgeRow) -> i64| rows.iter().map(g).collect::<Vec<i64>>();
        let t_ns: Vec<f64> = rows.iter().map(|r| r.end as f64 * cyc).collect();
        d.set_item("t_ns", t_ns.into_pyarray_bound(py))?;
        d.set_item("src", i(&|r| r.src as i64).into_pyarray_bound(py))?;
        d.set_item("dst", i(&|r| r.dst as i64).into_pyarray_bound(py))?;
        d.set_item("count", i(&|r| r.count as i64).into_pyarray_bound(py))?;
        Ok(d)
    }

    /// Gives `table` exactly the PMUs `pmus` (leaving ones drain first).
    fn assign(&mut self, table: &str, pmus: Vec<u32>) -> PyResult<()> {
        each!(&mut self.inner, s => s.assign(table, &pmus)).map_err(verr)
    }

    fn pmu_states<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let l = PyList::empty_bound(py);
        for (id, state, table, channel) in each!(&self.inner, s => s.pmu_states()) {
            let d = PyDict::new_bound(py);
            d.set_item("id", id)?;
            d.set_item("state", state)?;
            d.set_item("table", table)?;
            d.set_item("channel", channel)?;
            l.append(d)?;
        }
        Ok(l)
    }

    /// `{"tables": {NAME: {...}}, "sim_keys_per_s": ...}`.
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new_bound(py);
        let tables = PyDict::new_bound(py);
        let elu_bytes = each!(&self.inner, s => s.elu_memory_bytes());
        let defaults = each!(&self.inner, s => s.default_answers());
        for (((name, s), elu_bytes), defaults) in each!(&self.inner, s => s.summary()).into_iter().zip(elu_bytes).zip(defaults) {
            let t = PyDict::new_bound(py);
            t.set_item("hit_rate", s.hit_rate)?;
            t.set_item("mean_latency_ns", s.mean_latency_ns)?;
            t.set_item("mean_sojourn_ns", s.mean_sojourn_ns)?;
            t.set_item("p99_latency_ns", s.p99_latency_ns)?;
            t.set_item("hbm_gbps", s.hbm_gbps)?;
            t.set_item("offered_mpps", s.offered_mpps)?;
            t.set_item("throughput_mpps", s.throughput_mpps)?;
            t.set_item("keys", s.keys)?;
            t.set_item("drops", s.drops)?;
            // The table's ELU structure in off-chip memory (elu.build).
            t.set_item("elu_bytes", elu_bytes)?;
            // PHVs released with the default action (no rule matched).
            t.set_item("default_answers", defaults)?;
            tables.set_item(name, t)?;
        }
        d.set_item("tables", tables)?;
        // With an [attack]: legitimate and attack PHVs apart (docs/flood.md).
        if let Some(classes) = each!(&self.inner, s => s.class_summary()) {
            for (name, c) in ["legit", "attack"].into_iter().zip(classes) {
                let x = PyDict::new_bound(py);
                x.set_item("arrived", c.arrived)?;
                x.set_item("dropped", c.dropped)?;
                x.set_item("shed", c.shed)?;
                x.set_item("exited", c.exited)?;
                x.set_item("hits", c.hits)?;
                x.set_item("misses", c.misses)?;
                x.set_item("hit_rate", c.hit_rate)?;
                x.set_item("throughput_mpps", c.throughput_mpps)?;
                x.set_item("mean_latency_ns", c.mean_latency_ns)?;
                x.set_item("p99_latency_ns", c.p99_latency_ns)?;
                d.set_item(name, x)?;
            }
        }
        let (refused, held, shed) = each!(&self.inner, s => s.defence_counters());
        if refused > 0 || held.iter().any(|&h| h > 0) || shed.iter().any(|&h| h > 0) {
            let x = PyDict::new_bound(py);
            x.set_item("fills_refused", refused)?;
            x.set_item("misses_held", held)?;
            // Per table: PHVs dropped because their miss was shed.
            x.set_item("miss_shed", shed)?;
            d.set_item("defence", x)?;
        }
        let keys = self.keys_done() as f64;
        d.set_item(
            "sim_keys_per_s",
            if self.wall_s > 0.0 {
                keys / self.wall_s
            } else {
                0.0
            },
        )?;
        d.set_item("sim_time_ns", self.now_ns())?;
        d.set_item("wall_s", self.wall_s)?;
        Ok(d)
    }

    /// The fast mode on this fresh simulator's scenario (`sim::fast`):
    /// `fast_json` is its `[fast]` table. Returns the summary's shape
    /// (`tables`, `sim_keys_per_s`, `sim_time_ns`, `wall_s`), each table's
    /// figures with an `interval` per figure, a `fast` record of how the
    /// run was sampled, `windows` (per statistics window and table) and
    /// `mode`. The counts (`keys`, `drops`, `hits`, `misses`) are whole
    /// numbers unless the run is overloaded (`sim.fast_summary` scales
    /// them first, then rounds).
    ///
    /// A routed simulator (`--p4`) takes every arrival instead: `t_ps`
    /// and `flows` as `push_arrivals` would get them, all at once.
    #[pyo3(signature = (fast_json, t_ps=None, flows=None))]
    fn run_fast<'py>(
        &mut self,
        py: Python<'py>,
        fast_json: &str,
        t_ps: Option<PyReadonlyArray1<'_, u64>>,
        flows: Option<PyReadonlyArray1<'_, u32>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let fc = fast_config(fast_json)?;
        let given = match (&t_ps, &flows) {
            (Some(t), Some(f)) => match (t.as_slice(), f.as_slice()) {
                (Ok(t), Ok(f)) => Some((t, f)),
                _ => return Err(verr("run_fast: contiguous arrays expected")),
            },
            (None, None) => None,
            _ => return Err(verr("run_fast: t_ps and flows go together")),
        };
        let t0 = Instant::now();
        macro_rules! go {
            ($s:expr) => {
                match given {
                    Some((t, f)) => py.allow_threads(|| $s.run_fast_arrivals(&fc, t, f)),
                    None => py.allow_threads(|| $s.run_fast(&fc)),
                }
            };
        }
        let rep = match &mut self.inner {
            AnySim::W8(s) => go!(s),
            AnySim::W16(s) => go!(s),
            AnySim::W32(s) => go!(s),
        }
        .map_err(verr)?;
        let wall = t0.elapsed().as_secs_f64();
        let d = PyDict::new_bound(py);
        let tables = PyDict::new_bound(py);
        let mut keys = 0.0;
        for t in &rep.tables {
            let row = PyDict::new_bound(py);
            let iv = PyDict::new_bound(py);
            for (k, e) in [
                (intern!(py, "hit_rate"), t.hit_rate),
                (intern!(py, "mean_latency_ns"), t.mean_latency_ns),
                (intern!(py, "mean_sojourn_ns"), t.mean_sojourn_ns),
                (intern!(py, "p99_latency_ns"), t.p99_latency_ns),
                (intern!(py, "hbm_gbps"), t.hbm_gbps),
                (intern!(py, "offered_mpps"), t.offered_mpps),
                (intern!(py, "throughput_mpps"), t.throughput_mpps),
                (intern!(py, "keys"), t.keys),
                (intern!(py, "drops"), t.drops),
                (intern!(py, "hits"), t.hits),
                (intern!(py, "misses"), t.misses),
            ] {
                row.set_item(k, e.value)?;
                iv.set_item(k, (e.lo, e.hi))?;
            }
            // The counts as whole numbers (Python's `round`: half to even),
            // here rather than in `sim.fast_summary`: a fixed cost of every
            // short run. An overloaded run's are scaled there first.
            if !rep.overloaded {
                for (k, e) in [
                    (intern!(py, "keys"), t.keys),
                    (intern!(py, "drops"), t.drops),
                    (intern!(py, "hits"), t.hits),
                    (intern!(py, "misses"), t.misses),
                ] {
                    row.set_item(k, e.value.round_ties_even() as i64)?;
                }
            }
            keys += t.keys.value;
            for (q, v) in quantile_names(py).iter().zip(&t.quantiles_ns) {
                row.set_item(q.bind(py), v)?;
            }
            row.set_item(intern!(py, "interval"), iv)?;
            tables.set_item(&t.name, row)?;
        }
        d.set_item(intern!(py, "tables"), tables)?;
        d.set_item(intern!(py, "sim_keys_per_s"), if wall > 0.0 { keys / wall } else { 0.0 })?;
        d.set_item(intern!(py, "sim_time_ns"), self.now_ns().max(each!(&self.inner, s => s.config.duration_ns)))?;
        d.set_item(intern!(py, "wall_s"), wall)?;
        let f = PyDict::new_bound(py);
        f.set_item(intern!(py, "flows"), rep.flows)?;
        f.set_item(intern!(py, "sampled_flows"), rep.sampled_flows)?;
        f.set_item(intern!(py, "rate"), rep.rate)?;
        f.set_item(intern!(py, "sampled_refs"), rep.sampled_refs)?;
        f.set_item(intern!(py, "elu_windows"), rep.elu_windows)?;
        f.set_item(intern!(py, "measured_misses"), rep.measured_misses)?;
        f.set_item(intern!(py, "backlog_ns"), rep.backlog_ns)?;
        f.set_item(intern!(py, "overloaded"), rep.overloaded)?;
        f.set_item(intern!(py, "served_share"), rep.served_share)?;
        d.set_item(intern!(py, "fast"), f)?;
        // The windows as one (8, n) array, a row per column of
        // `FAST_WINDOW_COLUMNS` (`sim.fast_summary` names them): one array
        // made, not eight.
        let n = rep.windows.len();
        let mut w = Vec::with_capacity(8 * n);
        let cols: [fn(&sim::fast::FastWindow) -> f64; 8] = [
            |r| r.end_ns,
            |r| r.table as f64,
            |r| r.arrived,
            |r| r.processed,
            |r| r.hits,
            |r| r.misses,
            |r| r.hbm_bytes,
            |r| r.pmus as f64,
        ];
        for g in cols {
            w.extend(rep.windows.iter().map(g));
        }
        let w = numpy::ndarray::Array2::from_shape_vec((8, n), w).expect("8 rows of n");
        d.set_item(intern!(py, "windows"), w.into_pyarray_bound(py))?;
        d.set_item(intern!(py, "mode"), intern!(py, "fast"))?;
        Ok(d)
    }

    /// `(edges_ns, counts)`: bucket lower edges (one more than counts).
    fn latency_histogram<'py>(
        &self,
        py: Python<'py>,
        table: &str,
    ) -> PyResult<(PyObject, PyObject)> {
        let (e, c) = each!(&self.inner, s => s.latency_histogram(table)).map_err(verr)?;
        let c: Vec<i64> = c.into_iter().map(|x| x as i64).collect();
        Ok((
            e.into_pyarray_bound(py).into_any().unbind(),
            c.into_pyarray_bound(py).into_any().unbind(),
        ))
    }

    /// Every PHV left exactly once with the oracle's action: the counts.
    fn check_invariants<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let v = each!(&self.inner, s => s.check_invariants());
        let d = PyDict::new_bound(py);
        d.set_item("ok", v.ok())?;
        d.set_item("created", v.created)?;
        d.set_item("exited", v.exited)?;
        d.set_item("dropped", v.dropped)?;
        d.set_item("in_flight", v.in_flight)?;
        d.set_item("lost", v.lost)?;
        d.set_item("duplicates", v.duplicates)?;
        d.set_item("wrong_action", v.wrong_action)?;
        // Rule updates: answers of a replaced version (0 without updates).
        let u = each!(&self.inner, s => s.update_stats());
        d.set_item("stale_answers", u.stale_answers)?;
        // PHVs whose answers at two tables came from different versions.
        d.set_item("mixed_version_phvs", u.mixed_version_phvs)?;
        // Mixed versions are a fault only when the program promised one.
        let program = each!(&self.inner, s => s.config.update_engine.consistency)
            == synapse_core::sim::Consistency::Program;
        d.set_item("ok", v.ok() && u.stale_answers == 0 && !(program && u.mixed_version_phvs > 0))?;
        Ok(d)
    }

    /// Ends the run: stops the arrivals and simulates on until every PHV
    /// has exited or been dropped, for at most the config's `drain_ns`.
    /// Returns `{"drained": bool, "ns": float, "in_flight": {table: n}}`
    /// (`in_flight`: where PHVs remain when not drained).
    fn drain<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let t0 = Instant::now();
        let r = each!(&mut self.inner, s => py.allow_threads(|| s.drain()));
        self.wall_s += t0.elapsed().as_secs_f64();
        let d = PyDict::new_bound(py);
        d.set_item("drained", r.drained)?;
        d.set_item("ns", r.ns)?;
        let f = PyDict::new_bound(py);
        for (t, n) in r.in_flight {
            f.set_item(t, n)?;
        }
        d.set_item("in_flight", f)?;
        Ok(d)
    }

    /// Tables holding no PMU now (every key of theirs goes to the ELU).
    fn tables_without_pmus(&self) -> Vec<String> {
        each!(&self.inner, s => s.tables_without_pmus())
    }

    /// New entry shares `{table: share}` from now on (the traffic mix
    /// shifts). Unknown table or no positive share: ValueError.
    fn set_entry(&mut self, shares: std::collections::BTreeMap<String, f64>) -> PyResult<()> {
        let v: Vec<(String, f64)> = shares.into_iter().collect();
        each!(&mut self.inner, s => s.set_entry(&v)).map_err(verr)
    }

    /// Requests a batch of rule updates on `table` ("" = the first) now:
    /// lines `insert POS FIELDS...`, `delete POS`, `modify POS`, `default`.
    /// Returns how many were queued; they commit as the simulation runs.
    fn request_updates(&mut self, table: &str, ops: Vec<String>) -> PyResult<usize> {
        each!(&mut self.inner, s => s.request_updates(table, &ops)).map_err(verr)
    }

    /// Requests one transaction now: per table, its operations (committed
    /// as one program version under `consistency = "program"`).
    fn request_transaction(&mut self, parts: std::collections::BTreeMap<String, Vec<String>>) -> PyResult<usize> {
        let parts: Vec<(String, Vec<String>)> = parts.into_iter().collect();
        each!(&mut self.inner, s => s.request_transaction(&parts)).map_err(verr)
    }

    /// Counters of the rule updates: requested, committed, rejected,
    /// batches, invalidated, uncached_fills, stale_answers, latency
    /// quantiles (ns), first request and last commit (ns).
    fn update_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let u = each!(&self.inner, s => s.update_stats());
        let d = PyDict::new_bound(py);
        d.set_item("requested", u.requested)?;
        d.set_item("committed", u.committed)?;
        d.set_item("rejected", u.rejected)?;
        d.set_item("batches", u.batches)?;
        d.set_item("fold_ins", u.fold_ins)?;
        d.set_item("invalidated", u.invalidated)?;
        d.set_item("uncached_fills", u.uncached_fills)?;
        d.set_item("stale_answers", u.stale_answers)?;
        d.set_item("latency_ns_p50", u.latency_quantile(0.5))?;
        d.set_item("latency_ns_p99", u.latency_quantile(0.99))?;
        d.set_item("latency_ns_max", u.latency_quantile(1.0))?;
        d.set_item("first_request_ns", u.first_request_ns)?;
        d.set_item("last_commit_ns", u.last_commit_ns)?;
        d.set_item("build_ns", u.build_ns)?;
        // Consistency across tables (sim/xtable.rs).
        d.set_item("checked_phvs", u.checked_phvs)?;
        d.set_item("mixed_version_phvs", u.mixed_version_phvs)?;
        d.set_item("mixed_unresolved", u.mixed_unresolved)?;
        d.set_item("flips", u.flips)?;
        d.set_item("retire_latency_ns_p50", u.retire_latency_quantile(0.5))?;
        d.set_item("retire_latency_ns_p99", u.retire_latency_quantile(0.99))?;
        d.set_item("old_version_answers", u.old_version_answers)?;
        d.set_item("extra_bytes_peak", u.extra_bytes_peak)?;
        d.set_item("extra_bytes_mean", u.extra_bytes_mean)?;
        d.set_item("structure_bytes", u.structure_bytes)?;
        // P4 hit/miss per table (entry vs default answers), while every answer is checked.
        d.set_item("answers_matched", u.answers.iter().map(|a| a.0).collect::<Vec<_>>())?;
        d.set_item("answers_missed", u.answers.iter().map(|a| a.1).collect::<Vec<_>>())?;
        Ok(d)
    }

    /// Current queue occupancies.
    fn queue_depths<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let q = each!(&self.inner, s => s.queue_depths());
        let d = PyDict::new_bound(py);
        d.set_item("input", q.input)?;
        d.set_item("phv_fifo", q.phv_fifo)?;
        d.set_item("q_r", q.q_r)?;
        d.set_item("q_m", q.q_m)?;
        d.set_item("miss_queue", q.miss_queue)?;
        d.set_item("orb", q.orb)?;
        Ok(d)
    }

    /// The effective configuration (defaults filled in), as JSON.
    fn config_json(&self) -> PyResult<String> {
        serde_json::to_string(each!(&self.inner, s => &s.config)).map_err(verr)
    }
}

/// The default configuration tree as JSON (Python mirrors it).
#[pyfunction]
pub fn default_sim_config() -> PyResult<String> {
    serde_json::to_string(&sim::Config::default()).map_err(verr)
}

/// Simulators built after this share the lookup structure of an earlier one
/// with the same rules, algorithm and build parameters (`False`: each
/// builds its own). Sweep workers turn it on: the runs are the same.
#[pyfunction]
pub fn reuse_structures(on: bool) {
    sim::reuse_structures(on)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Simulator>()?;
    m.add_function(wrap_pyfunction!(default_sim_config, m)?)?;
    m.add_function(wrap_pyfunction!(reuse_structures, m)?)?;
    Ok(())
}

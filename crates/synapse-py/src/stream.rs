//! Binding of a capture streamed through a P4 program into the routed
//! simulator (`synapse run --p4 --pcap`): `CaptureStream` reads the capture
//! in Rust (`program::capture`), interns routes and counts per table
//! (`program::stream`), and hands a routed `Simulator` its new keys, routes
//! and arrivals at each `sync`. Frames cross to Python only for the
//! interpreter's batches (`held`, then `run_held` with the visits it
//! computed): per batch, never per packet.

use crate::gen::PyGenProgram;
use crate::program::PyP4Program;
use crate::sim::{each, Simulator};
use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::Path;
use synapse_core::program::{self, Capture, Clock, OnTruncated, Outcome, PcapOut, Port, Precomputed, Stream, Visits};

fn verr(e: impl ToString) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// A capture being streamed (see the module doc).
#[pyclass(module = "synapse_vmt._core")]
pub struct CaptureStream {
    inner: Stream,
    pre: Precomputed,
}

fn vec_of<T: numpy::Element + Copy>(a: &PyReadonlyArray1<'_, T>) -> Vec<T> {
    a.as_array().iter().copied().collect()
}

#[pymethods]
impl CaptureStream {
    /// `CaptureStream(path, key_words, rate_mpps=None, ingress_port=0,
    /// limit=None, stop_at_truncated=False, out_dir=None,
    /// drop_reasons=["dropped"])`: `key_words[t]` is keyed table t's key
    /// width; `rate_mpps` None replays at the capture's timestamps;
    /// `ingress_port` None takes the capture's interface.
    #[new]
    #[pyo3(signature = (path, key_words, rate_mpps=None, ingress_port=Some(0), limit=None, stop_at_truncated=false, out_dir=None, drop_reasons=vec!["dropped".to_string()]))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        path: &str,
        key_words: Vec<usize>,
        rate_mpps: Option<f64>,
        ingress_port: Option<u32>,
        limit: Option<u64>,
        stop_at_truncated: bool,
        out_dir: Option<&str>,
        drop_reasons: Vec<String>,
    ) -> PyResult<Self> {
        let on = if stop_at_truncated { OnTruncated::Stop } else { OnTruncated::Error };
        let cap = Capture::open(Path::new(path), on).map_err(verr)?;
        let clock = match rate_mpps {
            Some(r) if r > 0.0 => Clock::Rate { gap_ps: 1e6 / r },
            Some(r) => return Err(verr(format!("rate_mpps must be > 0, found {r}"))),
            None => Clock::Timestamps,
        };
        let port = ingress_port.map_or(Port::Interface, Port::Fixed);
        let out = match out_dir {
            Some(d) => Some(PcapOut::new(Path::new(d)).map_err(|e| verr(format!("{d}: {e}")))?),
            None => None,
        };
        let inner = Stream::new(cap, key_words.clone(), clock, port, limit, out).map_err(verr)?;
        Ok(CaptureStream { inner, pre: Precomputed::new(key_words, drop_reasons) })
    }

    /// Reads frames while the last one read arrives before `until_ps` (at
    /// most `max` held); returns how many are held.
    fn read(&mut self, py: Python<'_>, until_ps: u64, max: usize) -> PyResult<usize> {
        let s = &mut self.inner;
        py.allow_threads(|| s.read(until_ps, max)).map_err(verr)
    }

    /// The held frames: (bytes uint8, start uint32 (one more than frames),
    /// arrival times uint64 ps, ingress ports uint32).
    #[allow(clippy::type_complexity)]
    fn held<'py>(&self, py: Python<'py>) -> (Bound<'py, numpy::PyArray1<u8>>, Bound<'py, numpy::PyArray1<u32>>,
                                             Bound<'py, numpy::PyArray1<u64>>, Bound<'py, numpy::PyArray1<u32>>) {
        let (f, t, ports) = self.inner.held();
        (f.bytes.clone().into_pyarray_bound(py), f.start.clone().into_pyarray_bound(py),
         t.to_vec().into_pyarray_bound(py), ports.into_pyarray_bound(py))
    }

    /// Runs the held frames with visits computed elsewhere: per visit its
    /// keyed table, matched entry (-1: miss), action id (0xffffffff: none),
    /// key words (`key_start`, one more than visits); per packet its first
    /// visit (`pkt_start`, one more than packets), whether it was dropped,
    /// its drop reason and its parser error code.
    #[allow(clippy::too_many_arguments)]
    fn run_held(
        &mut self,
        py: Python<'_>,
        table: PyReadonlyArray1<'_, u16>,
        entry: PyReadonlyArray1<'_, i32>,
        action: PyReadonlyArray1<'_, u32>,
        key_start: PyReadonlyArray1<'_, u32>,
        key_words: PyReadonlyArray1<'_, u32>,
        pkt_start: PyReadonlyArray1<'_, u32>,
        dropped: PyReadonlyArray1<'_, bool>,
        reason: PyReadonlyArray1<'_, u32>,
        parser_error: PyReadonlyArray1<'_, u32>,
    ) -> PyResult<()> {
        let v = Visits {
            table: vec_of(&table),
            entry: vec_of(&entry),
            action: vec_of(&action),
            key_start: vec_of(&key_start),
            key_words: vec_of(&key_words),
            pkt_start: vec_of(&pkt_start),
        };
        if v.key_start.is_empty() || v.pkt_start.is_empty() {
            return Err(verr("run_held: key_start and pkt_start have one element more than visits / packets"));
        }
        let (d, pe) = (dropped.as_array(), parser_error.as_array());
        if d.len() != pe.len() {
            return Err(verr("run_held: dropped and parser_error differ in length"));
        }
        let outcome = d.iter().zip(pe.iter()).map(|(&dropped, &parser_error)| Outcome { dropped, parser_error, outputs: 0 }).collect();
        let held = self.inner.held().0.len();
        if d.len() != held {
            return Err(verr(format!("run_held: {} packets of visits for {held} held frames", d.len())));
        }
        self.pre.load(v, outcome, vec_of(&reason)).map_err(verr)?;
        let (s, pre) = (&mut self.inner, &mut self.pre);
        py.allow_threads(|| s.run_held(pre)).map_err(verr)
    }

    /// Reads and runs packets through the compiled program's executor
    /// while the last one read arrives before `until_ps` (at most `max`
    /// more; None: no limit). The per-packet loop is Rust's.
    /// `prog` is a `P4Program` or a `GenProgram` (its generated code).
    #[pyo3(signature = (prog, until_ps, max=None))]
    fn fill(&mut self, py: Python<'_>, prog: &Bound<'_, PyAny>, until_ps: u64, max: Option<u64>) -> PyResult<()> {
        let s = &mut self.inner;
        let max = max.unwrap_or(u64::MAX);
        if let Ok(mut g) = prog.downcast::<PyGenProgram>().map(|g| g.borrow_mut()) {
            let ex = &mut g.gen;
            return py.allow_threads(|| s.fill(until_ps, max, ex)).map_err(verr);
        }
        let mut p = prog.downcast::<PyP4Program>()?.borrow_mut();
        let ex = &mut p.ex;
        py.allow_threads(|| s.fill(until_ps, max, ex)).map_err(verr)
    }

    /// Keyed tables visited so far.
    fn visited(&self) -> Vec<usize> {
        self.inner.visited()
    }

    /// Which keyed tables the simulator has (`sim_of[t]`: its index, or None).
    fn simulate(&mut self, sim_of: Vec<Option<u16>>) -> PyResult<()> {
        self.inner.simulate(sim_of).map_err(verr)
    }

    /// Hands `sim` (a routed simulator) the new keys, routes and arrivals.
    fn sync(&mut self, py: Python<'_>, mut sim: PyRefMut<'_, Simulator>) -> PyResult<()> {
        let (s, inner) = (&mut self.inner, sim.inner_mut());
        py.allow_threads(|| each!(inner, x => s.sync(x))).map_err(verr)
    }

    /// Every packet read and run.
    #[getter]
    fn done(&self) -> bool {
        self.inner.is_done()
    }

    /// (bytes of the file read, its size or None, packets read).
    fn progress(&self) -> (u64, Option<u64>, u64) {
        let (b, size) = self.inner.capture().progress();
        (b, size, self.inner.packets_read())
    }

    /// Arrival time of the last packet read (ps).
    #[getter]
    fn last_time_ps(&self) -> u64 {
        self.inner.last_time_ps()
    }

    /// The truncated tail a `stop_at_truncated` capture stopped at, if any.
    #[getter]
    fn warning(&self) -> Option<String> {
        self.inner.capture().warning.clone()
    }

    /// The program's counters: packets; per keyed table lookups, matched
    /// and {action id: count} (-1: no action); drops per reason name,
    /// parser errors per code, outputs, copies, unrouted, reordered;
    /// interned routes, keys per table, entry conflicts, interner bytes;
    /// `stage_s`: CPU seconds per stage (read, execute, intern, output,
    /// sync); `pending_peak`: the most arrivals held between two syncs.
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = &self.inner.counters;
        let d = PyDict::new_bound(py);
        d.set_item("packets", c.packets)?;
        d.set_item("lookups", c.lookups.clone())?;
        d.set_item("matched", c.matched.clone())?;
        let acts: Vec<std::collections::BTreeMap<i64, u64>> = c
            .actions
            .iter()
            .map(|a| a.iter().enumerate().filter(|(_, &n)| n > 0).map(|(i, &n)| (i as i64 - 1, n)).collect())
            .collect();
        d.set_item("actions", acts)?;
        d.set_item("dropped", c.dropped)?;
        let names = self.inner.drop_reasons();
        let drops: std::collections::BTreeMap<String, u64> = c
            .drops
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, &n)| (names.get(i).cloned().unwrap_or_else(|| format!("reason {i}")), n))
            .collect();
        d.set_item("drops", drops)?;
        d.set_item("parser_errors", c.parser_errors.clone())?;
        d.set_item("outputs", c.outputs)?;
        d.set_item("copies", c.copies)?;
        d.set_item("unrouted", c.unrouted)?;
        d.set_item("reordered", c.reordered)?;
        let i = self.inner.interner();
        d.set_item("routes", i.n_routes())?;
        d.set_item("keys", (0..i.tables()).map(|t| i.keys(t).2.len()).collect::<Vec<_>>())?;
        d.set_item("entry_conflicts", i.conflicts)?;
        d.set_item("table_writes", self.inner.writes_total)?;
        d.set_item("interner_bytes", i.memory_bytes())?;
        let st = &self.inner.times;
        let stages = PyDict::new_bound(py);
        for (k, v) in [("read", st.read), ("execute", st.execute), ("intern", st.intern), ("output", st.output), ("sync", st.sync)] {
            stages.set_item(k, v.as_secs_f64())?;
        }
        d.set_item("stage_s", stages)?;
        d.set_item("pending_peak", self.inner.pending_peak)?;
        Ok(d)
    }

    /// Closes the output pcaps; returns the packets per egress port.
    fn finish(&mut self) -> PyResult<std::collections::BTreeMap<u32, u64>> {
        self.inner.finish().map_err(|e| verr(format!("output pcap: {e}")))
    }
}

/// `stream_standin(path, rate_mpps, until_ps)`: the stand-in program over a
/// capture, read and run to the end (counters only): the streaming
/// machinery's own rate, without an executor's cost (`synapse bench p4`).
#[pyfunction]
fn stream_standin<'py>(py: Python<'py>, path: &str, rate_mpps: f64) -> PyResult<Bound<'py, PyDict>> {
    let cap = Capture::open(Path::new(path), OnTruncated::Error).map_err(verr)?;
    let mut exec = program::standin::Standin::default();
    let kw = exec.key_words_all();
    let mut s = Stream::new(cap, kw, Clock::Rate { gap_ps: 1e6 / rate_mpps }, Port::Fixed(0), None, None).map_err(verr)?;
    py.allow_threads(|| s.fill(u64::MAX, u64::MAX, &mut exec)).map_err(verr)?;
    let d = PyDict::new_bound(py);
    d.set_item("packets", s.counters.packets)?;
    d.set_item("routes", s.interner().n_routes())?;
    Ok(d)
}

/// Arrivals pushed to a routed simulator and not yet entered (a run has
/// drained when this and the invariants' `in_flight` are 0).
#[pyfunction]
fn pending_arrivals(sim: PyRef<'_, Simulator>) -> usize {
    each!(sim.inner(), s => s.pending_arrivals())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CaptureStream>()?;
    m.add_function(wrap_pyfunction!(pending_arrivals, m)?)?;
    m.add_function(wrap_pyfunction!(stream_standin, m)?)?;
    Ok(())
}

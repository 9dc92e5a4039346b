//! Binding of the P4 program executor (`synapse_core::program`): a program
//! description (JSON, from `synapse_vmt.p4.compile`) in; batches of frames
//! (one byte array and offsets) in, numpy columns of visits and outcomes
//! (and, on request, output packets) out. The per-packet loop is Rust's.

use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use synapse_core::program::{Executor, Outputs, RunPacket, Visits};

fn verr(e: impl ToString) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// A compiled P4 program and the executor's state (see `synapse_vmt.p4.compile`).
#[pyclass(name = "P4Program", module = "synapse_vmt._core")]
pub struct PyP4Program {
    pub(crate) ex: Executor,
}

/// The frames of a batch: `data[offsets[i]..offsets[i + 1]]`, checked.
fn frames<'a>(data: &'a [u8], offsets: &'a [i64]) -> PyResult<Vec<&'a [u8]>> {
    if offsets.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::with_capacity(offsets.len() - 1);
    for w in offsets.windows(2) {
        let (a, b) = (w[0], w[1]);
        if a < 0 || b < a || b as usize > data.len() {
            return Err(verr(format!("offsets: expected a non-decreasing sequence within the {} bytes of data, found {a}..{b}", data.len())));
        }
        out.push(&data[a as usize..b as usize]);
    }
    Ok(out)
}

#[pymethods]
impl PyP4Program {
    #[new]
    fn new(description: &str) -> PyResult<Self> {
        Ok(PyP4Program { ex: Executor::from_json(description).map_err(verr)? })
    }

    /// Names of the keyed tables, in visit numbering.
    #[getter]
    fn tables(&self) -> Vec<String> {
        self.ex.prog.keyed_tables().map(|t| t.name.clone()).collect()
    }

    /// 32-bit words of each keyed table's key.
    #[getter]
    fn key_words(&self) -> Vec<usize> {
        (0..self.ex.tables()).map(|t| self.ex.key_words(t)).collect()
    }

    /// Names of the actions, by action index.
    #[getter]
    fn actions(&self) -> Vec<String> {
        self.ex.prog.actions.iter().map(|a| a.name.clone()).collect()
    }

    /// Constructs compiled as no-ops or fallbacks, by name.
    #[getter]
    fn unsupported(&self) -> Vec<String> {
        self.ex.prog.unsupported.clone()
    }

    /// Parser error names by code.
    #[getter]
    fn error_names(&self) -> std::collections::BTreeMap<u32, String> {
        self.ex.prog.error_names.clone()
    }

    /// Per keyed table, the lookup structure its entries were bound to.
    #[getter]
    fn lookup_structures(&self) -> Vec<(String, String)> {
        let p = &self.ex.prog;
        p.keyed.iter().map(|&t| (p.tables[t as usize].name.clone(), format!("{:?}", p.indexes[t as usize]))).collect()
    }

    /// Runs the frames `data[offsets[i]:offsets[i+1]]` in order. Returns a
    /// dict of numpy arrays: per visit `table` (u16), `entry` (i32, -1:
    /// miss), `action` (u32, 2^32-1: none), `key_start` (u32, one more than
    /// visits) and `key_words` (u32); per packet `pkt_start` (u32, one more
    /// than packets), `dropped` (bool), `parser_error` (u32),
    /// `exact_visits` (u32: visits before the packet became inexact, all
    /// when exact), `inexact` (bool), `drop_pipeline` (i8: the pipeline
    /// whose drop dropped it, 0 the first; -1 not dropped or dropped
    /// otherwise, as the interpreter's `Trace.drop_pipeline`); with `outputs`, the output packets
    /// `out_port`, `out_input`, `out_start`, `out_bytes`.
    #[pyo3(signature = (data, offsets, ingress_port = 0, outputs = false, times_ps = None))]
    fn run_batch<'py>(&mut self, py: Python<'py>, data: PyReadonlyArray1<'py, u8>, offsets: PyReadonlyArray1<'py, i64>,
                      ingress_port: u32, outputs: bool, times_ps: Option<PyReadonlyArray1<'py, u64>>) -> PyResult<Bound<'py, PyDict>> {
        let (data, offsets) = (data.as_slice()?, offsets.as_slice()?);
        let fr = frames(data, offsets)?;
        let times = match &times_ps {
            Some(t) => t.as_slice()?.to_vec(),
            None => vec![0; fr.len()],
        };
        if times.len() != fr.len() {
            return Err(PyValueError::new_err("times_ps: expected one time per frame"));
        }
        let ex = &mut self.ex;
        let (v, o, dropped, perr, exact, inexact, dpipe) = py.allow_threads(|| {
            let mut v = Visits::new();
            let mut o = Outputs::new();
            let n = fr.len();
            let (mut dropped, mut perr, mut exact, mut inexact) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
            let mut dpipe: Vec<i8> = Vec::with_capacity(n);
            for (f, &t) in fr.iter().zip(&times) {
                let out = ex.run(f, ingress_port, t, &mut v, if outputs { Some(&mut o) } else { None });
                dpipe.push(if out.dropped { ex.drop_reason() as i8 - 1 } else { -1 });
                dropped.push(out.dropped);
                perr.push(out.parser_error);
                exact.push(ex.exact_visits());
                inexact.push(ex.inexact_reason().is_some());
            }
            (v, o, dropped, perr, exact, inexact, dpipe)
        });
        let d = PyDict::new_bound(py);
        d.set_item("table", v.table.into_pyarray_bound(py))?;
        d.set_item("entry", v.entry.into_pyarray_bound(py))?;
        d.set_item("action", v.action.into_pyarray_bound(py))?;
        d.set_item("key_start", v.key_start.into_pyarray_bound(py))?;
        d.set_item("key_words", v.key_words.into_pyarray_bound(py))?;
        d.set_item("pkt_start", v.pkt_start.into_pyarray_bound(py))?;
        d.set_item("dropped", dropped.into_pyarray_bound(py))?;
        d.set_item("parser_error", perr.into_pyarray_bound(py))?;
        d.set_item("exact_visits", exact.into_pyarray_bound(py))?;
        d.set_item("inexact", inexact.into_pyarray_bound(py))?;
        d.set_item("drop_pipeline", dpipe.into_pyarray_bound(py))?;
        if outputs {
            d.set_item("out_port", o.port.into_pyarray_bound(py))?;
            d.set_item("out_input", o.input.into_pyarray_bound(py))?;
            d.set_item("out_start", o.start.into_pyarray_bound(py))?;
            d.set_item("out_bytes", o.bytes.into_pyarray_bound(py))?;
        }
        Ok(d)
    }

    /// Seconds to run the batch `passes` times (visits and output packets
    /// produced and dropped after each pass, as a consumer would): the
    /// functional rate, without Python in the loop. `times`: each frame's
    /// arrival (ps; default 0), the clock of aging and meters.
    #[pyo3(signature = (data, offsets, passes = 1, ingress_port = 0, outputs = true, times = None))]
    #[allow(clippy::too_many_arguments)]
    fn time_batch(&mut self, py: Python<'_>, data: PyReadonlyArray1<'_, u8>, offsets: PyReadonlyArray1<'_, i64>, passes: usize,
                  ingress_port: u32, outputs: bool, times: Option<PyReadonlyArray1<'_, u64>>) -> PyResult<f64> {
        let (data, offsets) = (data.as_slice()?, offsets.as_slice()?);
        let fr = frames(data, offsets)?;
        let ts: Vec<u64> = match &times {
            Some(t) => t.as_slice()?.to_vec(),
            None => vec![0; fr.len()],
        };
        if ts.len() != fr.len() {
            return Err(verr(format!("time_batch: {} times for {} frames", ts.len(), fr.len())));
        }
        let ex = &mut self.ex;
        Ok(py.allow_threads(|| {
            let mut v = Visits::new();
            let mut o = Outputs::new();
            let t = std::time::Instant::now();
            for _ in 0..passes {
                for (chunk, tc) in fr.chunks(4096).zip(ts.chunks(4096)) {
                    v.clear();
                    o.clear();
                    for (f, &t) in chunk.iter().zip(tc) {
                        ex.run(f, ingress_port, t, &mut v, if outputs { Some(&mut o) } else { None });
                    }
                    std::hint::black_box((&v, &o));
                }
            }
            t.elapsed().as_secs_f64()
        }))
    }

    /// Counted events so far (synthesized fields, fallback branches,
    /// unsupported externs and checksums), by name; and packets run.
    fn events<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new_bound(py);
        for (k, v) in self.ex.events() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Per add-on-miss table: adds, adds refused as the table was full,
    /// expiries, timer restarts, hits on learned entries and the entries it
    /// holds now (`program::learn`).
    fn learn_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new_bound(py);
        for (name, s, n) in self.ex.learn_stats() {
            let t = PyDict::new_bound(py);
            t.set_item("adds", s.adds)?;
            t.set_item("full", s.full)?;
            t.set_item("expired", s.expired)?;
            t.set_item("restarts", s.restarts)?;
            t.set_item("hits", s.hits)?;
            t.set_item("entries", n)?;
            d.set_item(name, t)?;
        }
        Ok(d)
    }

    /// What the externs and the packet flow did so far: counters (per
    /// index: packets, bytes), direct counters (per table and entry), meter
    /// colours, digests per learn list, the registers' non-zero cells, and
    /// the flow's drops and copies.
    fn extern_state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let x = self.ex.externs();
        let p = &self.ex.prog;
        let d = PyDict::new_bound(py);
        let counters = PyDict::new_bound(py);
        let nonzero = |cells: &[[u64; 2]]| -> Vec<(usize, u64, u64)> {
            cells.iter().enumerate().filter(|(_, c)| c[0] > 0).map(|(i, c)| (i, c[0], c[1])).collect()
        };
        for (k, cells) in x.counters.iter().enumerate() {
            let v = nonzero(cells);
            if !v.is_empty() {
                counters.set_item(&p.objs.counters[k].0, v)?;
            }
        }
        d.set_item("counters", counters)?;
        let direct = PyDict::new_bound(py);
        for (t, cells) in x.direct.iter().enumerate() {
            let v = nonzero(cells);
            if !v.is_empty() {
                direct.set_item(&p.tables[t].name, v)?;
            }
        }
        d.set_item("direct", direct)?;
        d.set_item("colors", x.colors.iter().zip(&p.objs.meters).filter(|(c, _)| c.iter().any(|&n| n > 0))
            .map(|(c, m)| (m.name.clone(), c.to_vec())).collect::<Vec<_>>())?;
        d.set_item("digests", x.digests.iter().map(|(n, c)| (n.clone(), *c)).collect::<Vec<_>>())?;
        let regs = PyDict::new_bound(py);
        for (k, cells) in x.registers.iter().enumerate() {
            regs.set_item(&p.objs.registers[k].0, cells.iter().map(|&v| v as u64).collect::<Vec<_>>())?;
        }
        d.set_item("registers", regs)?;
        let f = &self.ex.flow.counts;
        d.set_item("flow", [
            ("ingress: mark_to_drop", f.drop_ingress), ("egress: mark_to_drop", f.drop_egress),
            ("Priority out of range", f.drop_priority), ("multicast group without replicas", f.drop_no_replica),
            ("pass limit (resubmit/recirculate loop)", f.drop_pass_limit), ("ingress_clone", f.ingress_clones),
            ("egress_clone", f.egress_clones), ("resubmit", f.resubmits), ("recirculate", f.recirculations),
            ("replication", f.replicas),
        ].into_iter().map(|(n, v)| (n.to_string(), v)).collect::<Vec<_>>())?;
        d.set_item("out_ports", f.out_ports.iter().map(|(&k, &v)| (k, v)).collect::<Vec<_>>())?;
        Ok(d)
    }

    #[getter]
    fn packets(&self) -> (u64, u64) {
        (self.ex.packets, self.ex.inexact_packets)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyP4Program>()?;
    Ok(())
}

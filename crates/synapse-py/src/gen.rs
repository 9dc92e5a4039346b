//! Binding of a program's generated code (`synapse_core::program::gencrate`
//! builds it as a library, `cdylib` loads it): `GenProgram(description)`
//! builds or takes it from the cache and links the program in it;
//! `CaptureStream.fill` runs it as it runs a `P4Program`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::Path;
use std::sync::Arc;
use synapse_core::program::cdylib::{check_capture, Library, Loaded};
use synapse_core::program::gencrate::{load, module, Build};
use synapse_core::program::Program;

fn verr(e: impl ToString) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Why `description`'s program cannot have generated code here (one line:
/// what of it the generator does not take, no cargo, no synapse-core
/// source), or None.
#[pyfunction]
fn codegen_unavailable(description: &str) -> PyResult<Option<String>> {
    let prog = Program::from_json(description).map_err(verr)?;
    if let Err(why) = module(&prog) {
        return Ok(Some(format!("no generated code for this program: {}", why.join("; "))));
    }
    Ok(Build::from_env().missing())
}

/// A program linked in its generated code's library (see the module doc).
#[pyclass(name = "GenProgram", module = "synapse_vmt._core")]
pub struct PyGenProgram {
    pub(crate) gen: Loaded,
    lib: Arc<Library>,
    desc: String,
    /// The library loaded.
    #[pyo3(get)]
    path: String,
    /// cargo ran to build it (False: taken from the cache).
    #[pyo3(get)]
    built: bool,
    /// Wall seconds of building (or finding) and loading it.
    #[pyo3(get)]
    load_s: f64,
}

#[pymethods]
impl PyGenProgram {
    #[new]
    fn new(py: Python<'_>, description: &str) -> PyResult<Self> {
        let t = std::time::Instant::now();
        let prog = Program::from_json(description).map_err(verr)?;
        let src = module(&prog).map_err(|why| verr(format!("no generated code for this program: {}", why.join("; "))))?;
        let (lib, b) = py.allow_threads(|| load(&Build::from_env(), &src)).map_err(verr)?;
        let gen = lib.link(description, &prog).map_err(verr)?;
        Ok(PyGenProgram { gen, lib, desc: description.to_string(), path: b.path.display().to_string(), built: b.built,
                          load_s: t.elapsed().as_secs_f64() })
    }

    /// The first `n` packets of the capture at `pcap` (on `ingress_port`;
    /// None: the capture's interface) through a fresh link of this code and
    /// the interpreter: None, or (the first differing packet's index, what
    /// differs).
    #[pyo3(signature = (pcap, n = 1000, ingress_port = Some(0)))]
    fn check(&self, py: Python<'_>, pcap: &str, n: usize, ingress_port: Option<u32>) -> PyResult<Option<(usize, String)>> {
        let (lib, desc) = (&self.lib, &self.desc);
        py.allow_threads(|| check_capture(lib, desc, Path::new(pcap), n, ingress_port)).map_err(verr)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyGenProgram>()?;
    m.add_function(wrap_pyfunction!(codegen_unavailable, m)?)?;
    Ok(())
}

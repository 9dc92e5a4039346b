//! Python binding of synapse-core, imported as `synapse_vmt._core`.
//!
//! Small on purpose: file paths, config dicts and numpy batches go in;
//! numpy arrays and dicts come out. Nothing here loops per packet on behalf
//! of Python, and nothing here decides policy.

use pyo3::prelude::*;

mod cost;
mod externs;
mod frontend;
mod gen;
mod hwmodel;
mod mrc;
mod p4rt;
mod p4rtclient;
mod program;
mod routed;
mod rules;
mod sim;
mod stream;
mod traffic;

/// The crate version, so Python can check it loaded the matching build.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(version, m)?)?;
    rules::register(m)?;
    traffic::register(m)?;
    sim::register(m)?;
    cost::register(m)?;
    hwmodel::register(m)?;
    routed::register(m)?;
    externs::register(m)?;
    mrc::register(m)?;
    p4rt::register(m)?;
    frontend::register(m)?;
    p4rtclient::register(m)?;
    program::register(m)?;
    gen::register(m)?;
    stream::register(m)?;
    Ok(())
}

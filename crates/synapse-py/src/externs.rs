//! The program layer's externs on their own, so the control plane's
//! definitions (`synapse_vmt.p4.hashes`, `synapse_vmt.p4.externs`) are
//! checked against the executor's: a batch of buffers hashed, a batch of
//! packets metered.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use synapse_core::program::hash::{Algo, CrcSpec};
use synapse_core::program::meter::Meter;

/// `algo`'s hash of each buffer (`crc`: a custom CRC's `(width, poly, init,
/// xor_out, refin, refout)`).
#[pyfunction]
#[pyo3(signature = (algo, buffers, crc=None))]
fn p4_hash(algo: &str, buffers: Vec<Vec<u8>>, crc: Option<(u8, u64, u64, u64, bool, bool)>) -> PyResult<Vec<u64>> {
    let spec = crc.map(|(w, p, i, x, ri, ro)| CrcSpec::new(w, p, i, x, ri, ro));
    let a = Algo::from_name(algo, spec).ok_or_else(|| PyValueError::new_err(format!("unknown hash algorithm {algo:?}")))?;
    Ok(buffers.iter().map(|b| a.hash(b)).collect())
}

/// The colours a meter with `rates` gives packets of `lengths` bytes
/// arriving at `times_us` (in order).
#[pyfunction]
fn p4_meter(packets: bool, rates: Vec<(f64, u64)>, lengths: Vec<u64>, times_us: Vec<u64>) -> PyResult<Vec<u32>> {
    let mut m = Meter::new(packets);
    if !rates.is_empty() {
        m.set_rates(&rates).map_err(|_| PyValueError::new_err("meter rates must not decrease"))?;
    }
    Ok(lengths.iter().zip(&times_us).map(|(&l, &t)| m.execute(l, t)).collect())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(p4_hash, m)?)?;
    m.add_function(wrap_pyfunction!(p4_meter, m)?)?;
    Ok(())
}

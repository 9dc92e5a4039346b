//! A raw gRPC client for `synapse bench p4rt --client rust`
//! (python/synapse_vmt/p4rt/bench.py): it sends serialised requests, made
//! before the clock starts, to one unary method of a P4Runtime server and
//! times them, so a benchmark of the server is not bound by the client.
//!
//! Why not Python's grpcio: a call costs it 120–180 µs of CPU, more than the
//! server spends on a single Write. Here a call is tonic's HTTP/2 framing on
//! a single-threaded tokio runtime (no hand-over between threads), with
//! the messages kept as bytes (`RawCodec`, no protobuf work while timed).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::uri::PathAndQuery;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tonic::client::Grpc;
use tonic::transport::{Channel, Endpoint};

use crate::frontend::RawCodec;

/// One connection to a server: ``BenchClient(port)`` connects to
/// ``127.0.0.1:port`` (loopback only).
#[pyclass(module = "synapse_vmt._core")]
pub struct BenchClient {
    rt: tokio::runtime::Runtime,
    ch: Channel,
}

/// One call: its answer's status as an error line, or its latency.
async fn call(ch: Channel, path: PathAndQuery, req: Bytes, timeout: Duration) -> Result<Duration, String> {
    let mut grpc = Grpc::new(ch).max_decoding_message_size(64 << 20).max_encoding_message_size(64 << 20);
    grpc.ready().await.map_err(|e| format!("the connection failed: {e}"))?;
    let t0 = Instant::now();
    let mut r = tonic::Request::new(req);
    r.set_timeout(timeout);
    match tokio::time::timeout(timeout, grpc.unary::<Bytes, Bytes, _>(r, path, RawCodec)).await {
        Ok(Ok(_)) => Ok(t0.elapsed()),
        Ok(Err(s)) => Err(format!("{:?}: {}", s.code(), s.message())),
        Err(_) => Err("DeadlineExceeded: the client's deadline passed".into()),
    }
}

#[pymethods]
impl BenchClient {
    #[new]
    fn new(py: Python<'_>, port: u16) -> PyResult<Self> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        let ch = py.allow_threads(|| {
            rt.block_on(async {
                Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
                    .map_err(|e| PyValueError::new_err(e.to_string()))?
                    .tcp_nodelay(true)
                    .initial_stream_window_size(Some(4 << 20))
                    .initial_connection_window_size(Some(16 << 20))
                    .connect()
                    .await
                    .map_err(|e| PyRuntimeError::new_err(format!("127.0.0.1:{port}: cannot connect: {e}")))
            })
        })?;
        Ok(BenchClient { rt, ch })
    }

    /// Send every request of ``requests`` to ``method`` (``/p4.v1.P4Runtime/Write``),
    /// ``window`` of them in flight at once (1: each after the answer to the
    /// one before): ``(seconds from the first send to the last answer,
    /// [each call's latency in seconds])``, the latencies in sending order.
    /// The first call that fails (any status but OK, or ``timeout_s`` passed)
    /// raises RuntimeError with its status.
    #[pyo3(signature = (method, requests, window = 1, timeout_s = 60.0))]
    fn run(&self, py: Python<'_>, method: &str, requests: Vec<Vec<u8>>, window: usize, timeout_s: f64) -> PyResult<(f64, Vec<f64>)> {
        let path = PathAndQuery::try_from(method).map_err(|e| PyValueError::new_err(format!("{method}: {e}")))?;
        if window == 0 {
            return Err(PyValueError::new_err("window must be at least 1"));
        }
        let timeout = Duration::from_secs_f64(timeout_s);
        let reqs: Vec<Bytes> = requests.into_iter().map(Bytes::from).collect(); // before the clock starts
        let ch = self.ch.clone();
        let out: Result<(Duration, Vec<Duration>), String> = py.allow_threads(|| {
            self.rt.block_on(async move {
                let n = reqs.len();
                let t0 = Instant::now();
                let mut lat = vec![Duration::ZERO; n];
                if window == 1 {
                    for (i, r) in reqs.into_iter().enumerate() {
                        lat[i] = call(ch.clone(), path.clone(), r, timeout).await?;
                    }
                    return Ok((t0.elapsed(), lat));
                }
                let slots = Arc::new(Semaphore::new(window));
                let mut calls = JoinSet::new();
                for (i, r) in reqs.into_iter().enumerate() {
                    let permit = slots.clone().acquire_owned().await.expect("the semaphore is never closed");
                    let (ch, path) = (ch.clone(), path.clone());
                    calls.spawn(async move {
                        let got = call(ch, path, r, timeout).await;
                        drop(permit);
                        got.map(|d| (i, d))
                    });
                    // answers collected as they come, so a failure stops the run early
                    while let Some(done) = calls.try_join_next() {
                        let (i, d) = done.map_err(|e| e.to_string())??;
                        lat[i] = d;
                    }
                }
                while let Some(done) = calls.join_next().await {
                    let (i, d) = done.map_err(|e| e.to_string())??;
                    lat[i] = d;
                }
                Ok((t0.elapsed(), lat))
            })
        });
        let (total, lat) = out.map_err(|e| PyRuntimeError::new_err(format!("{method}: {e}")))?;
        Ok((total.as_secs_f64(), lat.iter().map(Duration::as_secs_f64).collect()))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<BenchClient>()?;
    Ok(())
}

//! A raw gRPC client for `synapse bench p4rt --client rust`
//! (python/synapse_vmt/p4rt/bench.py): it sends serialised requests, made
//! before the clock starts, to one unary method of a P4Runtime server and
//! times them, so a benchmark of the server is not bound by the client.
//!
//! Why not Python's grpcio: a call costs it 120–180 µs of CPU, more than the
//! server spends on a single Write. Here a call is HTTP/2 straight on `h2`
//! (what tonic sends through) on a single-threaded tokio runtime: the
//! request's HEADERS and DATA frames are queued before the connection task
//! runs, so they leave in one `writev` (tonic flushes the HEADERS alone
//! first: two segments, and the server may wake twice), and the gRPC frame
//! of each message is made before the clock starts.
//!
//! Like the server's front end (frontend.rs, `spin_before_park`), the
//! client about to sleep waiting for an answer first polls its socket for
//! at most `spin_us` µs: one at a time, an idle vCPU's sleep and wake-up
//! cost more than the RPC, on the client's side as on the server's.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use h2::client::SendRequest;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// One connection to a server: ``BenchClient(port, spin_us=150)`` connects to
/// ``127.0.0.1:port`` (loopback only); ``spin_us`` 0: never poll before sleeping.
#[pyclass(module = "synapse_vmt._core")]
pub struct BenchClient {
    rt: tokio::runtime::Runtime,
    send: SendRequest<Bytes>,
    authority: String,
}

/// A message as its gRPC frame: uncompressed, its length, its bytes.
fn grpc_frame(msg: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(5 + msg.len());
    b.put_u8(0);
    b.put_u32(msg.len() as u32);
    b.put_slice(msg);
    b.freeze()
}

/// The gRPC status of an answer's headers or trailers: None when OK or absent.
fn failed(h: &http::HeaderMap) -> Option<String> {
    let s = tonic::Status::from_header_map(h)?;
    (s.code() != tonic::Code::Ok).then(|| format!("{:?}: {}", s.code(), s.message()))
}

/// One call: its answer's status as an error line, or its latency.
async fn call(send: SendRequest<Bytes>, req: http::Request<()>, body: Bytes, timeout: Duration) -> Result<Duration, String> {
    let gone = |e: h2::Error| format!("the connection failed: {e}");
    let mut send = send.ready().await.map_err(gone)?;
    let t0 = Instant::now();
    let answer = async {
        let (resp, mut stream) = send.send_request(req, false).map_err(gone)?;
        stream.send_data(body, true).map_err(gone)?;
        let resp = resp.await.map_err(gone)?;
        if resp.status() != http::StatusCode::OK {
            return Err(format!("HTTP status {}", resp.status()));
        }
        if let Some(e) = failed(resp.headers()) {
            return Err(e); // a trailers-only answer
        }
        let mut body = resp.into_body();
        while let Some(chunk) = body.data().await {
            let n = chunk.map_err(gone)?.len();
            let _ = body.flow_control().release_capacity(n);
        }
        match body.trailers().await.map_err(gone)? {
            Some(t) => match failed(&t) {
                Some(e) => Err(e),
                None if t.contains_key("grpc-status") => Ok(()),
                None => Err("an answer without grpc-status".into()),
            },
            None => Err("an answer without trailers".into()),
        }
    };
    match tokio::time::timeout(timeout, answer).await {
        Ok(Ok(())) => Ok(t0.elapsed()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("DeadlineExceeded: the client's deadline passed".into()),
    }
}

/// The client's socket (-1: none) and spin, for `spin_before_park`.
static SOCKET: AtomicI32 = AtomicI32::new(-1);
static SPIN: AtomicU64 = AtomicU64::new(150);

/// Before the client's thread sleeps: poll its socket until an answer's
/// bytes are there or the spin passes, the core yielded between polls.
fn spin_before_park() {
    crate::frontend::poll_for_input(SOCKET.load(Ordering::Relaxed), Duration::from_micros(SPIN.load(Ordering::Relaxed)));
}

#[pymethods]
impl BenchClient {
    #[new]
    #[pyo3(signature = (port, spin_us = 150))]
    fn new(py: Python<'_>, port: u16, spin_us: u64) -> PyResult<Self> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .on_thread_park(spin_before_park)
            .build()
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        let authority = format!("127.0.0.1:{port}");
        let send = py.allow_threads(|| {
            rt.block_on(async {
                let cannot = |e: &dyn std::fmt::Display| PyRuntimeError::new_err(format!("{authority}: cannot connect: {e}"));
                let tcp = TcpStream::connect(&authority).await.map_err(|e| cannot(&e))?;
                tcp.set_nodelay(true).map_err(|e| cannot(&e))?;
                let fd = tcp.as_raw_fd();
                let (send, conn) = h2::client::Builder::new()
                    .initial_window_size(4 << 20)
                    .initial_connection_window_size(16 << 20)
                    .max_frame_size(1 << 20)
                    .handshake::<_, Bytes>(tcp)
                    .await
                    .map_err(|e| cannot(&e))?;
                tokio::spawn(async move {
                    let _ = conn.await; // ends when the client is dropped
                });
                SOCKET.store(fd, Ordering::Relaxed);
                SPIN.store(spin_us, Ordering::Relaxed);
                Ok::<_, PyErr>(send)
            })
        })?;
        Ok(BenchClient { rt, send, authority })
    }

    /// Send every request of ``requests`` to ``method`` (``/p4.v1.P4Runtime/Write``),
    /// ``window`` of them in flight at once (1: each after the answer to the
    /// one before): ``(seconds from the first send to the last answer,
    /// [each call's latency in seconds])``, the latencies in sending order.
    /// The first call that fails (any status but OK, or ``timeout_s`` passed)
    /// raises RuntimeError with its status.
    #[pyo3(signature = (method, requests, window = 1, timeout_s = 60.0))]
    fn run(&self, py: Python<'_>, method: &str, requests: Vec<Vec<u8>>, window: usize, timeout_s: f64) -> PyResult<(f64, Vec<f64>)> {
        let uri: http::Uri = format!("http://{}{method}", self.authority)
            .parse()
            .map_err(|e| PyValueError::new_err(format!("{method}: {e}")))?;
        if window == 0 {
            return Err(PyValueError::new_err("window must be at least 1"));
        }
        let timeout = Duration::from_secs_f64(timeout_s);
        let head = move || {
            http::Request::post(uri.clone())
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .header("grpc-timeout", format!("{}m", timeout.as_millis().max(1)))
                .body(())
                .expect("a valid request head")
        };
        // before the clock starts: every message framed, every request head made
        let reqs: Vec<(http::Request<()>, Bytes)> = requests.iter().map(|r| (head(), grpc_frame(r))).collect();
        let send = self.send.clone();
        let out: Result<(Duration, Vec<Duration>), String> = py.allow_threads(|| {
            self.rt.block_on(async move {
                let n = reqs.len();
                let t0 = Instant::now();
                let mut lat = vec![Duration::ZERO; n];
                if window == 1 {
                    for (i, (h, b)) in reqs.into_iter().enumerate() {
                        lat[i] = call(send.clone(), h, b, timeout).await?;
                    }
                    return Ok((t0.elapsed(), lat));
                }
                let slots = Arc::new(Semaphore::new(window));
                let mut calls = JoinSet::new();
                for (i, (h, b)) in reqs.into_iter().enumerate() {
                    let permit = slots.clone().acquire_owned().await.expect("the semaphore is never closed");
                    let send = send.clone();
                    calls.spawn(async move {
                        let got = call(send, h, b, timeout).await;
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

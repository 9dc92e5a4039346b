//! The P4Runtime server's front end (`synapse serve`, python/synapse_vmt/p4rt/server.py):
//! a gRPC server over HTTP/2 on a tokio runtime this extension owns, bound
//! to the public address.
//!
//! Why: a grpc.aio call costs about 330 µs of Python CPU before the handler
//! runs, which bounds single writes near 1 k/s. Here `Write` is served
//! without that: the request's bytes wait in a queue for the server's
//! writer thread, a Python thread that takes every queued Write at once
//! (`Frontend.take()`, the GIL taken once per such batch, never per
//! update), decodes each (`WriteDecoder`), applies it to the table store
//! and answers it (`Call.reply`). A Python thread keeps its thread state,
//! so a Write costs no thread state made and freed, and Writes that arrive
//! together share one hand-over between threads. Every other RPC (StreamChannel
//! arbitration, Read, pipeline configs, Capabilities) is proxied, HTTP/2
//! stream to HTTP/2 stream with its bytes untouched, to the grpc.aio server
//! on an internal loopback port, with the client's address in the
//! `x-synapse-peer` header (the stream limits count per client connection).
//! Messages stay bytes (`RawCodec`): no generated code, no protoc.
//!
//! A worker about to sleep first polls, for at most `SPIN_US` µs, the connection
//! that last sent bytes (`Conn`, `spin_before_park`). Why: a client that
//! sends its next Write once the last is answered (one at a time) otherwise
//! finds the worker asleep in `epoll_wait`, and on a virtual machine the
//! sleep and the wake-up of an idle vCPU cost more than the RPC: 42 µs of
//! server CPU per empty RPC idle against 16 µs with the cores kept busy.
//!
//! `Call.is_active()` turns False once the client cancels the Write or its
//! connection drops (the RPC's future is dropped), so the store stops
//! applying a batch as it does under grpc.aio.

use std::convert::Infallible;
use std::future::Future;
use std::net::{SocketAddr, TcpListener as StdListener, ToSocketAddrs};
use std::pin::Pin;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tonic::body::BoxBody;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::transport::server::{TcpConnectInfo, TcpIncoming};
use tonic::transport::{Channel, Endpoint, Server};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_stream::StreamExt;
use tonic::transport::server::Connected;
use tonic::{Code, Status};
use tower::ServiceExt;

/// Largest message either way, as the grpc.aio server's options.
const MAX_MESSAGE: usize = 64 << 20;
const WRITE: &str = "/p4.v1.P4Runtime/Write";
const CAPABILITIES: &str = "/p4.v1.P4Runtime/Capabilities";

/// Messages as their bytes.
#[derive(Clone, Copy, Default)]
pub(crate) struct RawCodec;
pub(crate) struct Raw;

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Bytes;
    type Error = Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Bytes;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        let n = src.remaining();
        Ok(Some(src.copy_to_bytes(n)))
    }
}

/// The Python handler's answer: None (OK) or (status code, message, `grpc-status-details-bin` bytes or None).
type Answer = Option<(i32, String, Option<Vec<u8>>)>;

/// A queued Write as its handler sees it.
#[pyclass(module = "synapse_vmt._core", frozen)]
pub struct Call {
    active: Arc<AtomicBool>,
    peer: String,
    reply: Mutex<Option<oneshot::Sender<Answer>>>,
}

impl Call {
    /// `is_active()` without a call into Python (the store's apply loop asks it per update).
    pub(crate) fn active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }
}

#[pymethods]
impl Call {
    /// False once the client has cancelled or gone away.
    fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// The client's address as gRPC writes it (`ipv4:127.0.0.1:5555`).
    fn peer(&self) -> String {
        self.peer.clone()
    }

    /// Answer the Write: None (OK) or (status code, message, status details or None). Once.
    #[pyo3(signature = (answer))]
    fn reply(&self, answer: Answer) {
        if let Some(tx) = self.reply.lock().unwrap().take() {
            let _ = tx.send(answer); // the client may be gone
        }
    }
}

/// A Write waiting for the writer thread.
struct Job {
    raw: Bytes,
    call: Call,
}

/// Sets the call inactive when the RPC's future is dropped (done, cancelled, connection gone).
struct Active(Arc<AtomicBool>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

fn peer_name(addr: Option<SocketAddr>) -> String {
    match addr {
        Some(SocketAddr::V4(a)) => format!("ipv4:{a}"),
        Some(SocketAddr::V6(a)) => format!("ipv6:{a}"),
        None => "unknown".into(),
    }
}

/// An OSError with errno set where the OS gave one (Python words it: `strerror`).
fn os_err(e: std::io::Error) -> PyErr {
    match e.raw_os_error() {
        Some(code) => PyOSError::new_err((code, e.to_string())),
        None => PyOSError::new_err(e.to_string()),
    }
}

type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A Write of at most this many bytes (a few updates) may run on the
/// runtime's worker thread that received it (`Inline`).
const INLINE_BYTES: usize = 2048;

/// The Python handlers: ``here(request, call)`` runs a small Write on the
/// calling thread, answering ``(True, answer)``, or ``(False, None)`` where
/// it would wait (the store busy, a test hook, the simulator): then it goes
/// to the writer thread's queue.
struct Handlers {
    here: Py<PyAny>,
}

#[derive(Clone)]
struct WriteService {
    jobs: mpsc::Sender<Job>,
    handlers: Arc<Handlers>,
    peer: String,
}

fn status(answer: Answer) -> Result<tonic::Response<Bytes>, Status> {
    match answer {
        None => Ok(tonic::Response::new(Bytes::new())), // an empty WriteResponse
        Some((code, msg, details)) => Err(match details {
            Some(d) => Status::with_details(Code::from_i32(code), msg, Bytes::from(d)),
            None => Status::new(Code::from_i32(code), msg),
        }),
    }
}

impl UnaryService<Bytes> for WriteService {
    type Response = Bytes;
    type Future = BoxFut<Result<tonic::Response<Bytes>, Status>>;

    fn call(&mut self, req: tonic::Request<Bytes>) -> Self::Future {
        let (jobs, handlers, peer) = (self.jobs.clone(), self.handlers.clone(), self.peer.clone());
        Box::pin(async move {
            let raw = req.into_inner();
            let active = Arc::new(AtomicBool::new(true));
            let _guard = Active(active.clone());
            if raw.len() <= INLINE_BYTES {
                // A hand-over to the writer thread and back costs more than
                // a few updates do. The worker keeps its Python thread state
                // (`on_thread_start`), so taking the GIL here is cheap.
                let here = Python::with_gil(|py| -> PyResult<(bool, Answer)> {
                    let call = Py::new(py, Call { active: active.clone(), peer: peer.clone(), reply: Mutex::new(None) })?;
                    handlers.here.call1(py, (PyBytes::new_bound(py, &raw), call))?.extract(py)
                });
                match here {
                    Ok((true, answer)) => return status(answer),
                    Ok((false, _)) => {}
                    Err(e) => {
                        Python::with_gil(|py| e.print(py));
                        return Err(Status::unknown(format!("write failed: {e}")));
                    }
                }
            }
            let (tx, rx) = oneshot::channel();
            let call = Call { active, peer, reply: Mutex::new(Some(tx)) };
            if jobs.send(Job { raw, call }).is_err() {
                return Err(Status::unavailable("the server is stopping"));
            }
            match rx.await {
                Ok(answer) => status(answer),
                Err(_) => Err(Status::internal("the write was dropped unanswered")),
            }
        })
    }
}

/// Capabilities: a constant (the serialised CapabilitiesResponse).
#[derive(Clone)]
struct Constant(Bytes);

impl UnaryService<Bytes> for Constant {
    type Response = Bytes;
    type Future = std::future::Ready<Result<tonic::Response<Bytes>, Status>>;

    fn call(&mut self, _: tonic::Request<Bytes>) -> Self::Future {
        std::future::ready(Ok(tonic::Response::new(self.0.clone())))
    }
}

/// The P4Runtime service: Write here, the rest to the grpc.aio server.
#[derive(Clone)]
struct P4Runtime {
    jobs: mpsc::Sender<Job>,
    handlers: Arc<Handlers>,
    capabilities: Bytes,
    backend: Channel,
}

impl NamedService for P4Runtime {
    const NAME: &'static str = "p4.v1.P4Runtime";
}

impl tower::Service<http::Request<BoxBody>> for P4Runtime {
    type Response = http::Response<BoxBody>;
    type Error = Infallible;
    type Future = BoxFut<Result<http::Response<BoxBody>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: http::Request<BoxBody>) -> Self::Future {
        let peer = peer_name(req.extensions().get::<TcpConnectInfo>().and_then(|i| i.remote_addr()));
        if req.uri().path() == WRITE {
            let svc = WriteService { jobs: self.jobs.clone(), handlers: self.handlers.clone(), peer };
            return Box::pin(async move {
                let mut grpc = Grpc::new(RawCodec).apply_max_message_size_config(Some(MAX_MESSAGE), Some(MAX_MESSAGE));
                Ok(grpc.unary(svc, req).await)
            });
        }
        if req.uri().path() == CAPABILITIES {
            let svc = Constant(self.capabilities.clone());
            return Box::pin(async move { Ok(Grpc::new(RawCodec).unary(svc, req).await) });
        }
        // Set here, whatever the client sent: the stream limits trust it.
        if let Ok(v) = http::HeaderValue::from_str(&peer) {
            req.headers_mut().insert("x-synapse-peer", v);
        }
        let backend = self.backend.clone();
        Box::pin(async move {
            match backend.oneshot(req).await {
                Ok(resp) => Ok(resp),
                Err(e) => Ok(Status::unavailable(format!("the server's internal channel failed: {e}")).into_http()),
            }
        })
    }
}

/// How long a worker with nothing to do polls the last active connection
/// before it sleeps: longer than a client's turn between an answer and its
/// next request (about 20 µs for the Rust benchmark client, 60–120 µs for
/// grpcio), short enough that an idle server costs nothing: the spin
/// happens once per wake-up, so its CPU is at most this much per request.
/// The environment's `SYNAPSE_SERVE_SPIN_US` sets it (0: never spin).
const SPIN_US: u64 = 150;

/// The spin in µs, read from the environment when a front end starts.
static SPIN: AtomicU64 = AtomicU64::new(SPIN_US);

/// The socket of the connection that last sent the front end bytes (-1: none).
static LAST_ACTIVE: AtomicI32 = AtomicI32::new(-1);

/// An accepted connection: its reads mark it the last active one.
struct Conn(TcpStream);

impl Connected for Conn {
    type ConnectInfo = TcpConnectInfo;
    fn connect_info(&self) -> TcpConnectInfo {
        self.0.connect_info()
    }
}

impl AsyncRead for Conn {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.0).poll_read(cx, buf);
        if buf.filled().len() > before {
            LAST_ACTIVE.store(self.0.as_raw_fd(), Ordering::Relaxed);
        }
        r
    }
}

impl AsyncWrite for Conn {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[std::io::IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // its number may be reused by another socket: no longer worth a spin
        let _ = LAST_ACTIVE.compare_exchange(self.0.as_raw_fd(), -1, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// Before a worker sleeps: poll the last active connection until it has
/// bytes or `SPIN` passes, yielding the core between polls, so a loaded
/// machine's other work runs meanwhile. The worker's `epoll_wait` then
/// returns at once for a request that came during the spin. A socket
/// closed meanwhile reads POLLNVAL or POLLHUP and ends the spin too.
fn spin_before_park() {
    poll_for_input(LAST_ACTIVE.load(Ordering::Relaxed), Duration::from_micros(SPIN.load(Ordering::Relaxed)));
}

/// Poll `fd` (none when negative) until it is readable, closed, or `spin`
/// passes, yielding the core between polls; shared with the benchmark's
/// client (`p4rtclient.rs`), which spins the same way before it sleeps.
pub(crate) fn poll_for_input(fd: i32, spin: Duration) {
    if fd < 0 || spin.is_zero() {
        return;
    }
    let t0 = Instant::now();
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    while t0.elapsed() < spin {
        // SAFETY: one pollfd on the stack, a zero timeout
        if unsafe { libc::poll(&mut p, 1, 0) } != 0 {
            return;
        }
        std::thread::yield_now();
    }
}

/// Writes handed to the writer thread at most at once.
const TAKE_MAX: usize = 256;

/// The front end: ``Frontend(host, port, backend_port, here, capabilities)`` binds
/// ``host:port`` (every address the host resolves to; port 0: a free one,
/// the same on each) with SO_REUSEADDR and without SO_REUSEPORT, so a busy
/// port fails here (OSError), and serves until ``stop()``; the writer
/// thread loops on ``take()``.
#[pyclass(module = "synapse_vmt._core")]
pub struct Frontend {
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    jobs: Mutex<mpsc::Receiver<Job>>,
    /// A sender kept to wake the writer thread's ``take()`` at ``stop()``.
    wake: Mutex<Option<mpsc::Sender<Job>>>,
    stopped: AtomicBool,
    #[pyo3(get)]
    port: u16,
}

#[pymethods]
impl Frontend {
    #[new]
    fn new(py: Python<'_>, host: &str, port: u16, backend_port: u16, here: Py<PyAny>, capabilities: Vec<u8>) -> PyResult<Self> {
        let addrs: Vec<SocketAddr> = (host, port)
            .to_socket_addrs()
            .map_err(os_err)?
            .collect();
        if addrs.is_empty() {
            return Err(PyOSError::new_err(format!("{host} has no address")));
        }
        let mut listeners = Vec::new();
        let mut bound = port;
        for mut a in addrs {
            if bound != 0 {
                a.set_port(bound);
            }
            // std sets SO_REUSEADDR (not SO_REUSEPORT) on Unix
            let l = StdListener::bind(a).map_err(os_err)?;
            l.set_nonblocking(true).map_err(os_err)?;
            bound = l.local_addr().map_err(os_err)?.port();
            listeners.push(l);
        }
        if let Ok(v) = std::env::var("SYNAPSE_SERVE_SPIN_US") {
            let us = v.trim().parse::<u64>().map_err(|_| PyValueError::new_err(format!("SYNAPSE_SERVE_SPIN_US={v}: not a whole number of µs")))?;
            SPIN.store(us, Ordering::Relaxed);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("p4rt-frontend")
            // Each worker keeps a Python thread state for its life (made
            // here, the GIL released at once): `with_gil` on it then only
            // takes the GIL, instead of making and freeing a thread state.
            .on_thread_start(|| unsafe {
                pyo3::ffi::PyGILState_Ensure();
                pyo3::ffi::PyEval_SaveThread();
            })
            .on_thread_park(spin_before_park)
            .enable_all()
            .build()
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        let (jobs, queue) = mpsc::channel();
        // kept to wake the writer thread's `take()` at `stop()`
        let wake = jobs.clone();
        py.allow_threads(|| {
            let _enter = runtime.enter();
            let backend = Endpoint::from_shared(format!("http://127.0.0.1:{backend_port}"))
                .map_err(|e| PyRuntimeError::new_err(e.to_string()))?
                .tcp_nodelay(true)
                .initial_stream_window_size(Some(4 << 20))
                .initial_connection_window_size(Some(16 << 20))
                .connect_lazy();
            let svc = P4Runtime { jobs, handlers: Arc::new(Handlers { here }), capabilities: Bytes::from(capabilities), backend };
            for l in listeners {
                let l = tokio::net::TcpListener::from_std(l).map_err(os_err)?;
                let incoming = TcpIncoming::from_listener(l, true, None)
                    .map_err(|e| PyOSError::new_err(e.to_string()))?
                    .map(|c| c.map(Conn));
                let server = Server::builder()
                    .initial_stream_window_size(Some(4 << 20))
                    .initial_connection_window_size(Some(16 << 20))
                    .add_service(svc.clone())
                    .serve_with_incoming(incoming);
                runtime.spawn(async move {
                    if let Err(e) = server.await {
                        eprintln!("synapse serve: the P4Runtime front end stopped: {e}");
                    }
                });
            }
            Ok::<_, PyErr>(())
        })?;
        Ok(Frontend { runtime: Mutex::new(Some(runtime)), jobs: Mutex::new(queue), wake: Mutex::new(Some(wake)), stopped: AtomicBool::new(false), port: bound })
    }

    /// The Writes queued now (waiting for the first, at most ``TAKE_MAX``):
    /// a list of (request bytes, Call); None once the front end is stopped.
    fn take(&self, py: Python<'_>) -> PyResult<Option<Vec<(Py<PyBytes>, Py<Call>)>>> {
        let got: Vec<Job> = py.allow_threads(|| {
            let queue = self.jobs.lock().unwrap();
            while !self.stopped.load(Ordering::Acquire) {
                match queue.recv_timeout(Duration::from_millis(200)) {
                    Ok(_) if self.stopped.load(Ordering::Acquire) => break, // `stop()`'s wake-up
                    Ok(job) => {
                        let mut got = vec![job];
                        while got.len() < TAKE_MAX {
                            match queue.try_recv() {
                                Ok(job) => got.push(job),
                                Err(_) => break,
                            }
                        }
                        return got;
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
            }
            Vec::new()
        });
        if got.is_empty() {
            return Ok(None);
        }
        let out: PyResult<Vec<_>> =
            got.into_iter().map(|j| Ok((PyBytes::new_bound(py, &j.raw).unbind(), Py::new(py, j.call)?))).collect();
        out.map(Some)
    }

    /// Stop serving: the socket is closed and the RPCs in flight are dropped.
    fn stop(&self, py: Python<'_>) {
        self.stopped.store(true, Ordering::Release);
        // `take()` returns None now rather than at its next timeout, so the
        // writer thread can be joined before the interpreter finalizes (a
        // daemon thread taking the GIL back then is ended by an unwind that
        // aborts the process)
        if let Some(tx) = self.wake.lock().unwrap().take() {
            let (reply, _) = oneshot::channel();
            let call = Call { active: Arc::new(AtomicBool::new(false)), peer: String::new(), reply: Mutex::new(Some(reply)) };
            let _ = tx.send(Job { raw: Bytes::new(), call });
        }
        let rt = self.runtime.lock().unwrap().take();
        if let Some(rt) = rt {
            py.allow_threads(|| rt.shutdown_background());
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Frontend>()?;
    m.add_class::<Call>()?;
    Ok(())
}

//! Generated code loaded as a library: the interface between the
//! executor's consumers ([`RunPacket`]) and a program's generated module
//! (`super::codegen`) built as a cdylib by [`super::gencrate`].
//!
//! The library exports one `extern "C"` symbol, [`SYMBOL`], returning a
//! `#[repr(C)]` [`Table`]: the ABI version, the hash its crate was built
//! under, and `link` / `run_batch` / `free`. Only C types cross the
//! boundary: `link` takes the program's description (JSON) and links its
//! own copy of it (a Rust `Program` laid out by another compiler run must
//! never be shared); `run_batch` takes a batch of frames (bytes, offsets,
//! ingress ports) and answers with pointers into the library's own
//! buffers ([`Results`]), which the host appends to its [`Visits`] and
//! [`Outputs`]. A library whose version or hash differs is refused.
//!
//! The library side is [`export_gen!`], expanded in the generated crate
//! over the module's `Gen`; the host side is [`Library`] and [`Loaded`]
//! (a [`RunPacket`]). [`first_difference`] runs the same frames through
//! two executors (the loaded code and the interpreter, its oracle) and
//! names the first packet whose answers differ.

use super::capture::{Capture, Frames};
use super::exec::{Executor, Program};
use super::run::{Outcome, Outputs, RunPacket};
use super::visits::Visits;
use std::ffi::c_void;
use std::path::Path;
use std::sync::Arc;

/// Version of [`Table`] and the types it passes; a library built for
/// another is refused.
pub const ABI: u32 = 2;
/// The symbol the library exports (`fn() -> *const Table`).
pub const SYMBOL: &[u8] = b"synapse_gen_table";

/// What the library's symbol returns (see the module doc).
#[repr(C)]
pub struct Table {
    pub abi: u32,
    pub hash: u64,
    /// Links the description `desc[..len]`: a handle, or null with the
    /// reason written to `err`.
    pub link: unsafe extern "C" fn(desc: *const u8, len: usize, err: *mut Msg) -> *mut c_void,
    /// Runs a batch: 0, or 1 when the code panicked (the handle is then
    /// not used again).
    pub run_batch: unsafe extern "C" fn(h: *mut c_void, batch: *const Batch, res: *mut Results) -> i32,
    pub free: unsafe extern "C" fn(h: *mut c_void),
}

/// A message buffer the host owns.
#[repr(C)]
pub struct Msg {
    pub buf: *mut u8,
    pub cap: usize,
    pub len: usize,
}

/// A batch of frames: frame `i` is `bytes[start[i]..start[i + 1]]`,
/// arrived on `ports[i]` at `times[i]` (picoseconds).
#[repr(C)]
pub struct Batch {
    pub n: usize,
    pub bytes: *const u8,
    pub start: *const u32,
    pub ports: *const u32,
    pub times: *const u64,
    /// Non-zero: make output packets.
    pub outputs: u32,
}

/// One packet's outcome and drop reason ([`RunPacket::drop_reason`]).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Out {
    pub dropped: u32,
    pub parser_error: u32,
    pub outputs: u32,
    pub reason: u32,
}

/// A batch's answers, as [`Visits`] and [`Outputs`] lay them out (starts
/// from 0, `input` the index in the batch); valid until the next call.
#[repr(C)]
pub struct Results {
    pub visits: usize,
    pub table: *const u16,
    pub entry: *const i32,
    pub action: *const u32,
    /// `visits + 1` elements.
    pub key_start: *const u32,
    pub key_words: *const u32,
    /// `n + 1` elements, and `n` outcomes.
    pub pkt_start: *const u32,
    pub outcome: *const Out,
    pub outs: usize,
    pub out_port: *const u32,
    pub out_input: *const u32,
    /// `outs + 1` elements.
    pub out_start: *const u32,
    pub out_bytes: *const u8,
}

/// `len` elements at `p` (none when `len` is 0, whatever `p` is).
///
/// # Safety
/// When `len > 0`, `p` points to `len` initialised elements.
unsafe fn slice<'a, T>(p: *const T, len: usize) -> &'a [T] {
    if len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(p, len)
    }
}

// ---------------------------------------------------------------- library side

/// What the generated module's `Gen` offers ([`export_gen!`] implements it
/// from `Gen`'s own `link`, `run`, `arrive` and `drop_pipeline`).
pub trait Generated: Sized {
    fn link(p: &'static Program) -> Result<Self, String>;
    fn run(&mut self, frame: &[u8], ingress_port: u32, visits: &mut Visits, outputs: Option<&mut Outputs>) -> Outcome;
    /// The next packets arrive at `now_ps` (what meters see).
    fn arrive(&mut self, now_ps: u64);
    /// [`RunPacket::drop_reason`] of the last packet, when it was dropped.
    fn drop_reason(&self) -> u32;
}


/// The library's state behind a handle: its own linked program (leaked
/// for the `'static` borrow `Gen` holds, freed in [`guest_free`]) and
/// buffers.
pub struct Guest<G> {
    gen: G,
    prog: *mut Program,
    visits: Visits,
    outputs: Outputs,
    outcome: Vec<Out>,
}

fn message(err: *mut Msg, e: &str) {
    // SAFETY: the host passes a buffer of `cap` bytes
    unsafe {
        if let Some(m) = err.as_mut() {
            let n = e.len().min(m.cap);
            std::ptr::copy_nonoverlapping(e.as_ptr(), m.buf, n);
            m.len = n;
        }
    }
}

/// [`Table::link`] for `G`.
///
/// # Safety
/// `desc` points to `len` bytes; `err` is null or a valid [`Msg`].
pub unsafe extern "C" fn guest_link<G: Generated>(desc: *const u8, len: usize, err: *mut Msg) -> *mut c_void {
    let r = std::panic::catch_unwind(|| -> Result<*mut c_void, String> {
        let text = std::str::from_utf8(slice(desc, len)).map_err(|e| format!("description: {e}"))?;
        let prog = Box::into_raw(Box::new(Program::from_json(text)?));
        match G::link(&*prog) {
            Ok(gen) => Ok(Box::into_raw(Box::new(Guest { gen, prog, visits: Visits::new(), outputs: Outputs::new(),
                                                          outcome: Vec::new() })) as *mut c_void),
            Err(e) => {
                drop(Box::from_raw(prog));
                Err(e)
            }
        }
    });
    match r {
        Ok(Ok(h)) => h,
        Ok(Err(e)) => {
            message(err, &e);
            std::ptr::null_mut()
        }
        Err(_) => {
            message(err, "the generated code panicked while linking");
            std::ptr::null_mut()
        }
    }
}

/// [`Table::run_batch`] for `G`.
///
/// # Safety
/// `h` is a handle from [`guest_link`] for the same `G`; `batch` and its
/// arrays are valid as [`Batch`] says; `res` is writable.
pub unsafe extern "C" fn guest_run_batch<G: Generated>(h: *mut c_void, batch: *const Batch, res: *mut Results) -> i32 {
    let g = &mut *(h as *mut Guest<G>);
    let b = &*batch;
    let start = slice(b.start, if b.n == 0 { 0 } else { b.n + 1 });
    let bytes = slice(b.bytes, start.last().map_or(0, |&e| e as usize));
    let ports = slice(b.ports, b.n);
    let times = slice(b.times, b.n);
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        g.visits.clear();
        g.outputs.clear();
        g.outcome.clear();
        for i in 0..b.n {
            let f = &bytes[start[i] as usize..start[i + 1] as usize];
            g.gen.arrive(times[i]);
            let o = g.gen.run(f, ports[i], &mut g.visits, if b.outputs != 0 { Some(&mut g.outputs) } else { None });
            let reason = if o.dropped { g.gen.drop_reason() } else { 0 };
            g.outcome.push(Out { dropped: o.dropped as u32, parser_error: o.parser_error, outputs: o.outputs, reason });
        }
    }));
    if ran.is_err() {
        return 1;
    }
    let (v, o) = (&g.visits, &g.outputs);
    *res = Results {
        visits: v.len(),
        table: v.table.as_ptr(),
        entry: v.entry.as_ptr(),
        action: v.action.as_ptr(),
        key_start: v.key_start.as_ptr(),
        key_words: v.key_words.as_ptr(),
        pkt_start: v.pkt_start.as_ptr(),
        outcome: g.outcome.as_ptr(),
        outs: o.len(),
        out_port: o.port.as_ptr(),
        out_input: o.input.as_ptr(),
        out_start: o.start.as_ptr(),
        out_bytes: o.bytes.as_ptr(),
    };
    0
}

/// [`Table::free`] for `G`.
///
/// # Safety
/// `h` is a handle from [`guest_link`] for the same `G`, not used again.
pub unsafe extern "C" fn guest_free<G: Generated>(h: *mut c_void) {
    if !h.is_null() {
        let g = Box::from_raw(h as *mut Guest<G>);
        let prog = g.prog;
        drop(g); // the code borrowing the program first
        drop(Box::from_raw(prog));
    }
}

/// Exports a generated module's `Gen` as the library's [`Table`]:
/// `export_gen!(gen::Gen, 0x1234_u64)` in the generated crate's `lib.rs`.
#[macro_export]
macro_rules! export_gen {
    ($gen:ident :: Gen, $hash:expr) => {
        impl $crate::program::cdylib::Generated for $gen::Gen<'static> {
            fn link(p: &'static $crate::program::Program) -> Result<Self, String> {
                $gen::Gen::link(p)
            }
            fn run(&mut self, frame: &[u8], ingress_port: u32, visits: &mut $crate::program::Visits,
                   outputs: Option<&mut $crate::program::Outputs>) -> $crate::program::Outcome {
                $gen::Gen::run(self, frame, ingress_port, visits, outputs)
            }
            fn arrive(&mut self, now_ps: u64) {
                $gen::Gen::arrive(self, now_ps)
            }
            fn drop_reason(&self) -> u32 {
                $gen::Gen::drop_pipeline(self)
            }
        }

        /// The library's table (`synapse_core::program::cdylib`).
        #[no_mangle]
        pub extern "C" fn synapse_gen_table() -> *const $crate::program::cdylib::Table {
            use $crate::program::cdylib as c;
            static T: c::Table = c::Table {
                abi: c::ABI,
                hash: $hash,
                link: c::guest_link::<$gen::Gen<'static>>,
                run_batch: c::guest_run_batch::<$gen::Gen<'static>>,
                free: c::guest_free::<$gen::Gen<'static>>,
            };
            &T
        }
    };
}

// ---------------------------------------------------------------- host side

/// A loaded library whose ABI version and hash are the expected ones.
pub struct Library {
    table: &'static Table,
    pub path: std::path::PathBuf,
    // unloaded after every handle (each `Loaded` holds an Arc); None: the
    // table is this binary's own (tests)
    _lib: Option<libloading::Library>,
}

impl Library {
    /// Loads `path` and checks its table against [`ABI`] and `hash`.
    pub fn open(path: &Path, hash: u64) -> Result<Arc<Library>, String> {
        // loaded through a link of its own name: the loader reuses a library already loaded
        // under the same name, or the same file, so a rebuilt library (a new file at the
        // same path) loads as itself even when an earlier one stays loaded
        static OPENED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let alias = path.with_extension(format!("so.{}.{n}", std::process::id()));
        let _ = std::fs::remove_file(&alias);
        std::fs::hard_link(path, &alias).map_err(|e| format!("{}: {e}", path.display()))?;
        // SAFETY: the library is one `gencrate` built; its initialisers are Rust's
        let lib = unsafe { libloading::Library::new(&alias) };
        let _ = std::fs::remove_file(&alias);
        let lib = lib.map_err(|e| format!("{}: {e}", path.display()))?;
        let table = unsafe {
            let f = lib.get::<extern "C" fn() -> *const Table>(SYMBOL).map_err(|e| format!("{}: {e}", path.display()))?;
            &*f()
        };
        if table.abi != ABI || table.hash != hash {
            return Err(format!("{}: built for ABI {} and hash {:016x}, expected ABI {ABI} and hash {hash:016x}",
                               path.display(), table.abi, table.hash));
        }
        Ok(Arc::new(Library { table, path: path.to_path_buf(), _lib: Some(lib) }))
    }

    /// Links the program described by `desc` (linked here as `prog`) in the library.
    pub fn link(self: &Arc<Self>, desc: &str, prog: &Program) -> Result<Loaded, String> {
        let mut buf = vec![0u8; 1024];
        let mut err = Msg { buf: buf.as_mut_ptr(), cap: buf.len(), len: 0 };
        // SAFETY: the table's functions follow the ABI checked in `open`
        let h = unsafe { (self.table.link)(desc.as_ptr(), desc.len(), &mut err) };
        if h.is_null() {
            return Err(format!("{}: {}", self.path.display(), String::from_utf8_lossy(&buf[..err.len])));
        }
        Ok(Loaded {
            handle: h,
            lib: self.clone(),
            key_words: (0..prog.keyed.len()).map(|t| prog.tables[prog.keyed[t] as usize].words).collect(),
            reasons: prog.drop_reasons(),
            last_reason: 0,
            one: Frames::new(),
        })
    }
}

/// A program linked in a loaded library: a [`RunPacket`] whose batches
/// cross the library boundary in one call each.
pub struct Loaded {
    handle: *mut c_void,
    lib: Arc<Library>,
    key_words: Vec<usize>,
    reasons: Vec<String>,
    last_reason: u32,
    /// The one-frame batch of [`RunPacket::run`].
    one: Frames,
}

// SAFETY: the handle is owned by this value alone and the library's code
// keeps no thread-bound state
unsafe impl Send for Loaded {}

impl Drop for Loaded {
    fn drop(&mut self) {
        // SAFETY: the handle came from this library's `link` and is not used again
        unsafe { (self.lib.table.free)(self.handle) }
    }
}

impl RunPacket for Loaded {
    fn tables(&self) -> usize {
        self.key_words.len()
    }

    fn key_words(&self, t: usize) -> usize {
        self.key_words[t]
    }

    fn run(&mut self, frame: &[u8], ingress_port: u32, now_ps: u64, visits: &mut Visits, outputs: Option<&mut Outputs>) -> Outcome {
        let mut one = std::mem::take(&mut self.one);
        one.clear();
        one.push(frame, 0, 0, frame.len() as u32);
        let mut out = Vec::with_capacity(1);
        let r = self.run_batch(&one, &[ingress_port], &[now_ps], visits, outputs, &mut out);
        self.one = one;
        if let Err(e) = r {
            panic!("{e}");
        }
        self.last_reason = out[0].1;
        out[0].0
    }

    fn run_batch(&mut self, frames: &Frames, ports: &[u32], t_ps: &[u64], visits: &mut Visits,
                 outputs: Option<&mut Outputs>, outcomes: &mut Vec<(Outcome, u32)>) -> Result<(), String> {
        let n = frames.len();
        assert_eq!(ports.len(), n);
        assert_eq!(t_ps.len(), n);
        let b = Batch { n, bytes: frames.bytes.as_ptr(), start: frames.start.as_ptr(), ports: ports.as_ptr(), times: t_ps.as_ptr(),
                        outputs: outputs.is_some() as u32 };
        // SAFETY: null pointers with zero counts are never read (`slice`)
        let mut r: Results = unsafe { std::mem::zeroed() };
        // SAFETY: `b` describes `frames` and `ports`; `r` is written before it is read
        if unsafe { (self.lib.table.run_batch)(self.handle, &b, &mut r) } != 0 {
            return Err(format!("{}: the generated code panicked", self.lib.path.display()));
        }
        // SAFETY: `r` points into the library's buffers, sized as `Results` says, until the next call
        unsafe {
            let (vbase, kbase, pbase) = (visits.len() as u32, visits.key_words.len() as u32, visits.packets() as u32);
            visits.table.extend_from_slice(slice(r.table, r.visits));
            visits.entry.extend_from_slice(slice(r.entry, r.visits));
            visits.action.extend_from_slice(slice(r.action, r.visits));
            let ks = slice(r.key_start, r.visits + 1);
            visits.key_words.extend_from_slice(slice(r.key_words, ks[r.visits] as usize));
            visits.key_start.extend(ks[1..].iter().map(|&k| k + kbase));
            visits.pkt_start.extend(slice(r.pkt_start, n + 1)[1..].iter().map(|&p| p + vbase));
            for o in slice(r.outcome, n) {
                let oc = Outcome { dropped: o.dropped != 0, parser_error: o.parser_error, outputs: o.outputs };
                outcomes.push((oc, o.reason));
            }
            if let Some(out) = outputs {
                let os = slice(r.out_start, r.outs + 1);
                let bbase = out.bytes.len() as u32;
                out.bytes.extend_from_slice(slice(r.out_bytes, os[r.outs] as usize));
                out.start.extend(os[1..].iter().map(|&s| s + bbase));
                out.port.extend_from_slice(slice(r.out_port, r.outs));
                out.input.extend(slice(r.out_input, r.outs).iter().map(|&i| i + pbase));
            }
        }
        Ok(())
    }

    fn drop_reason(&self) -> u32 {
        self.last_reason
    }

    fn drop_reasons(&self) -> Vec<String> {
        self.reasons.clone()
    }
}

/// Runs `frames` (on `ports`) through `a` and `b`: the first packet whose
/// outcome, drop reason, visits or output packets differ, by index in
/// `frames`, with what differs.
pub fn first_difference(a: &mut dyn RunPacket, b: &mut dyn RunPacket, frames: &Frames, ports: &[u32])
                        -> Result<Option<(usize, String)>, String> {
    let t = vec![0; frames.len()];
    let mut runs = Vec::new();
    for x in [a as &mut dyn RunPacket, b] {
        let (mut v, mut o, mut oc) = (Visits::new(), Outputs::new(), Vec::new());
        x.run_batch(frames, ports, &t, &mut v, Some(&mut o), &mut oc)?;
        runs.push((v, o, oc));
    }
    let ((va, oa, ca), (vb, ob, cb)) = (&runs[0], &runs[1]);
    let outs = |o: &Outputs, p: usize| -> Vec<(u32, Vec<u8>)> {
        (0..o.len()).filter(|&j| o.input[j] as usize == p).map(|j| (o.port[j], o.packet(j).to_vec())).collect()
    };
    let visits = |v: &Visits, p: usize| -> Vec<(u16, i32, u32, Vec<u32>)> {
        v.of_packet(p).map(|i| (v.table[i], v.entry[i], v.action[i], v.key(i).to_vec())).collect()
    };
    for p in 0..frames.len() {
        let what = if ca[p] != cb[p] {
            format!("outcome {:?} against {:?}", ca[p], cb[p])
        } else if visits(va, p) != visits(vb, p) {
            format!("visits {:?} against {:?}", visits(va, p), visits(vb, p))
        } else if outs(oa, p) != outs(ob, p) {
            "output packets".to_string()
        } else {
            continue;
        };
        return Ok(Some((p, what)));
    }
    Ok(None)
}

/// The check on load: the first `n` frames of the capture at `path`
/// (ingress port `port`, or the capture's interface when None) through a
/// fresh link of `lib` and a fresh interpreter of `desc`; the first
/// difference, as [`first_difference`].
pub fn check_capture(lib: &Arc<Library>, desc: &str, path: &Path, n: usize, port: Option<u32>)
                     -> Result<Option<(usize, String)>, String> {
    let all = Capture::read_first(path, n).map_err(|e| e.0)?;
    let ports: Vec<u32> = match port {
        Some(p) => vec![p; all.len()],
        None => all.interface.clone(),
    };
    let mut ex = Executor::from_json(desc)?;
    let mut gen = lib.link(desc, &ex.prog)?;
    first_difference(&mut ex, &mut gen, &all, &ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    mod generated {
        pub use crate::program::native::Router as Gen;
    }
    crate::export_gen!(generated::Gen, 0x5eed);

    /// The library side's table over the router's code, as this binary's
    /// own (no file loaded): the boundary's types and copies, in process.
    fn lib() -> Arc<Library> {
        // SAFETY: the table is the static `export_gen!` made above
        let table = unsafe { &*synapse_gen_table() };
        assert_eq!((table.abi, table.hash), (ABI, 0x5eed));
        Arc::new(Library { table, path: "(this binary)".into(), _lib: None })
    }

    fn router() -> String {
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/p4/router-desc.json")).unwrap()
    }

    /// The router's capture, then frames of every path its parser and
    /// tables distinguish, on ports 0 to 2.
    fn capture() -> (Frames, Vec<u32>) {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/p4/router.pcap");
        let mut all = Capture::read_first(Path::new(path), usize::MAX).unwrap();
        for f in crate::program::native::tests::frames(7) {
            all.push(&f, 0, 0, 0);
        }
        let ports = (0..all.len() as u32).map(|i| i % 3).collect();
        (all, ports)
    }

    #[test]
    fn batches_across_the_boundary_give_the_interpreters_answers() {
        let desc = router();
        let (frames, ports) = capture();
        assert!(frames.len() > 4000);
        let mut ex = Executor::from_json(&desc).unwrap();
        let mut gen = lib().link(&desc, &ex.prog).unwrap();
        assert_eq!(first_difference(&mut ex, &mut gen, &frames, &ports).unwrap(), None);
        // appended after what a batch already holds, one frame at a time too
        let (mut v1, mut o1, mut v2, mut o2) = (Visits::new(), Outputs::new(), Visits::new(), Outputs::new());
        let (mut c1, mut c2) = (Vec::new(), Vec::new());
        let mut ex = Executor::from_json(&desc).unwrap();
        let t = vec![0; frames.len()];
        for _ in 0..2 {
            ex.run_batch(&frames, &ports, &t, &mut v1, Some(&mut o1), &mut c1).unwrap();
            gen.run_batch(&frames, &ports, &t, &mut v2, Some(&mut o2), &mut c2).unwrap();
        }
        let o = gen.run(frames.frame(5), ports[5], 0, &mut v2, Some(&mut o2));
        assert_eq!(o, ex.run(frames.frame(5), ports[5], 0, &mut v1, Some(&mut o1)));
        assert_eq!((v1, o1, c1), (v2, o2, c2));
        assert_eq!((gen.tables(), gen.key_words(1), gen.drop_reasons()), (ex.tables(), ex.key_words(1), ex.drop_reasons()));
    }

    /// The interpreter with one answer changed at packet `at`: its last
    /// visit's entry, or its last output byte.
    struct Skew {
        ex: Executor,
        at: usize,
        n: usize,
        output: bool,
    }

    impl RunPacket for Skew {
        fn tables(&self) -> usize {
            self.ex.tables()
        }
        fn key_words(&self, t: usize) -> usize {
            self.ex.key_words(t)
        }
        fn run(&mut self, frame: &[u8], port: u32, now: u64, v: &mut Visits, mut o: Option<&mut Outputs>) -> Outcome {
            let r = self.ex.run(frame, port, now, v, o.as_deref_mut());
            if self.n == self.at {
                if self.output {
                    *o.unwrap().bytes.last_mut().unwrap() ^= 1;
                } else {
                    *v.entry.last_mut().unwrap() += 1;
                }
            }
            self.n += 1;
            r
        }
        fn drop_reason(&self) -> u32 {
            self.ex.drop_reason()
        }
    }

    #[test]
    fn a_difference_is_named_by_packet_index() {
        let desc = router();
        let (frames, ports) = capture();
        let mut ex = Executor::from_json(&desc).unwrap();
        let (mut v, mut o, mut c) = (Visits::new(), Outputs::new(), Vec::new());
        ex.run_batch(&frames, &ports, &vec![0; frames.len()], &mut v, Some(&mut o), &mut c).unwrap();
        // packets past the middle, one with visits, one with an output packet
        let half = frames.len() / 2;
        let visited = (half..frames.len()).find(|&p| !v.of_packet(p).is_empty()).unwrap();
        let sent = (half + 1..frames.len()).find(|&p| c[p].0.outputs > 0).unwrap();
        for (at, output, what) in [(visited, false, "visits"), (sent, true, "output packets")] {
            let mut skew = Skew { ex: Executor::from_json(&desc).unwrap(), at, n: 0, output };
            let mut gen = lib().link(&desc, &ex.prog).unwrap();
            let (p, why) = first_difference(&mut gen, &mut skew, &frames, &ports).unwrap().unwrap();
            assert_eq!(p, at);
            assert!(why.starts_with(what), "{why}");
        }
    }

    #[test]
    fn a_link_error_comes_back_as_text() {
        let desc = router();
        let mut d: serde_json::Value = serde_json::from_str(&desc).unwrap();
        for n in d["nodes"].as_array_mut().unwrap() {
            if n["name"] == "MyIngress.nhop_tbl" {
                n["next"]["actions"]["3"] = serde_json::json!(3);
            }
        }
        let text = d.to_string();
        let p = Program::from_json(&text).unwrap();
        let e = lib().link(&text, &p).err().unwrap();
        assert!(e.contains("not written for"), "{e}");
        let e = lib().link("{", &p).err().unwrap();
        assert!(e.contains("program description"), "{e}");
    }
}

//! P4Runtime table writes decoded in one call per Write, for `synapse serve`
//! (python/synapse_vmt/p4rt/server.py).
//!
//! `WriteDecoder` holds the P4Info's plain tables (match fields with their
//! kind and width, the actions each allows with their parameter widths).
//! `decode` reads a serialised `p4.v1.WriteRequest` and, for every update
//! that is a well-formed INSERT, MODIFY or DELETE of an entry of one of
//! those tables, gives what the store needs to apply it: the entry's key
//! (the bytes of `store.key_bytes` of the entry the Python decoder would
//! build), the entry re-encoded (decoded into an `Entry` by the Python
//! decoder only when something reads it) and its metadata. Every other
//! update (another entity, a default entry, a table behind an action
//! profile, and any update with something wrong in it) comes back as None:
//! the Python decoder, the reference, decodes it and gives its error.
//! So this is a fast path that never decides an error itself;
//! tests/test_p4rt_fast_writes.py checks it against the Python decoder on
//! random valid and malformed Writes.

use std::collections::HashMap;

use bytes::Bytes;
use prost::Message;
use pyo3::prelude::*;
use pyo3::intern;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple, PyType};

// The parts of p4runtime.proto (p4.v1) the fast path reads. Fields left out
// are skipped by prost; the Python decoder ignores them too, or (another
// entity, `FieldMatch.other`, a profile member in `TableAction`) their
// absence sends the update to it. Byte fields are `Bytes`: slices of the
// request, not copies. The request is what the server's protobuf library
// serialised, so each field appears once.

#[derive(Clone, PartialEq, Message)]
struct WriteRequest {
    #[prost(uint64, tag = "1")]
    device_id: u64,
    #[prost(message, optional, tag = "3")]
    election_id: Option<Uint128>,
    #[prost(message, repeated, tag = "4")]
    updates: Vec<Update>,
    #[prost(int32, tag = "5")]
    atomicity: i32,
    #[prost(string, tag = "6")]
    role: String,
}

#[derive(Clone, PartialEq, Message)]
struct Uint128 {
    #[prost(uint64, tag = "1")]
    high: u64,
    #[prost(uint64, tag = "2")]
    low: u64,
}

#[derive(Clone, PartialEq, Message)]
struct Update {
    #[prost(int32, tag = "1")]
    r#type: i32,
    #[prost(message, optional, tag = "2")]
    entity: Option<Entity>,
}

/// `Entity` with its `table_entry` left as bytes (a message and a bytes
/// field look the same on the wire): the entry's own bytes, kept for the
/// Python decoder.
#[derive(Clone, PartialEq, Message)]
struct Entity {
    #[prost(bytes = "bytes", optional, tag = "2")]
    table_entry: Option<Bytes>,
}

/// A message whose presence is all that matters here.
#[derive(Clone, PartialEq, Message)]
struct Present {}

#[derive(Clone, PartialEq, Message)]
struct TableEntry {
    #[prost(uint32, tag = "1")]
    table_id: u32,
    #[prost(message, repeated, tag = "2")]
    r#match: Vec<FieldMatch>,
    #[prost(message, optional, tag = "3")]
    action: Option<TableAction>,
    #[prost(int32, tag = "4")]
    priority: i32,
    #[prost(message, optional, tag = "6")]
    meter_config: Option<Present>,
    #[prost(bool, tag = "8")]
    is_default_action: bool,
    #[prost(int64, tag = "9")]
    idle_timeout_ns: i64,
    #[prost(message, optional, tag = "10")]
    time_since_last_hit: Option<Present>,
    #[prost(bytes = "bytes", tag = "11")]
    metadata: Bytes,
    #[prost(message, optional, tag = "12")]
    meter_counter_data: Option<Present>,
}

#[derive(Clone, PartialEq, Message)]
struct FieldMatch {
    #[prost(uint32, tag = "1")]
    field_id: u32,
    #[prost(oneof = "MatchType", tags = "2, 3, 4, 6, 7")]
    field_match_type: Option<MatchType>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum MatchType {
    #[prost(message, tag = "2")]
    Exact(OneValue),
    #[prost(message, tag = "3")]
    Ternary(Ternary),
    #[prost(message, tag = "4")]
    Lpm(Lpm),
    #[prost(message, tag = "6")]
    Range(Range),
    #[prost(message, tag = "7")]
    Optional(OneValue),
}

#[derive(Clone, PartialEq, Message)]
struct OneValue {
    #[prost(bytes = "bytes", tag = "1")]
    value: Bytes,
}

#[derive(Clone, PartialEq, Message)]
struct Ternary {
    #[prost(bytes = "bytes", tag = "1")]
    value: Bytes,
    #[prost(bytes = "bytes", tag = "2")]
    mask: Bytes,
}

#[derive(Clone, PartialEq, Message)]
struct Lpm {
    #[prost(bytes = "bytes", tag = "1")]
    value: Bytes,
    #[prost(int32, tag = "2")]
    prefix_len: i32,
}

#[derive(Clone, PartialEq, Message)]
struct Range {
    #[prost(bytes = "bytes", tag = "1")]
    low: Bytes,
    #[prost(bytes = "bytes", tag = "2")]
    high: Bytes,
}

#[derive(Clone, PartialEq, Message)]
struct TableAction {
    #[prost(message, optional, tag = "1")]
    action: Option<Action>,
}

#[derive(Clone, PartialEq, Message)]
struct Action {
    #[prost(uint32, tag = "1")]
    action_id: u32,
    #[prost(message, repeated, tag = "4")]
    params: Vec<Param>,
}

#[derive(Clone, PartialEq, Message)]
struct Param {
    #[prost(uint32, tag = "2")]
    param_id: u32,
    #[prost(bytes = "bytes", tag = "3")]
    value: Bytes,
}

/// A match kind, numbered as `store.key_bytes` writes it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Exact = 0,
    Lpm = 1,
    Ternary = 2,
    Range = 3,
    Optional = 4,
}

impl Kind {
    fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "exact" => Kind::Exact,
            "lpm" => Kind::Lpm,
            "ternary" => Kind::Ternary,
            "range" => Kind::Range,
            "optional" => Kind::Optional,
            _ => return None,
        })
    }
}

struct Field {
    id: u32,
    kind: Kind,
    width: u32,
}

struct Table {
    name: Py<PyString>,
    priority: bool,
    fields: Vec<Field>, // by field id: the order of the entry's matches
    actions: HashMap<u32, Vec<u32>>, // action id -> parameter widths
}

/// Decodes the plain-table updates of a WriteRequest (see the module doc).
#[pyclass(module = "synapse_vmt._core", frozen)]
pub struct WriteDecoder {
    tables: HashMap<u32, Table>,
    kinds: [Py<PyString>; 3], // "insert", "modify", "delete"
}

/// One update the fast path took: kind (1 insert, 2 modify, 3 delete),
/// table id, key, the entry's bytes, metadata.
struct Decoded {
    kind: usize,
    table: u32,
    key: Vec<u8>,
    entry: Bytes,
    metadata: Bytes,
}

// --- unsigned big-endian values as their shortest bytes (no leading zero byte) ---

fn shortest(b: &[u8]) -> &[u8] {
    &b[b.iter().position(|&x| x != 0).unwrap_or(b.len())..]
}

fn bit_len(s: &[u8]) -> u32 {
    s.first().map_or(0, |&x| (s.len() as u32 - 1) * 8 + (8 - x.leading_zeros()))
}

/// A value given as P4Runtime bytes, shortest: None when empty or wider
/// than `width` bits (leading zero bytes are allowed, as the Python decoder
/// allows them).
fn value(b: &[u8], width: u32) -> Option<&[u8]> {
    if b.is_empty() {
        return None;
    }
    let s = shortest(b);
    (bit_len(s) <= width).then_some(s)
}

/// Byte `i` from the right (0: the last) of a shortest value; 0 past its start.
fn byte_r(v: &[u8], i: usize) -> u8 {
    if i < v.len() {
        v[v.len() - 1 - i]
    } else {
        0
    }
}

/// `v & !mask != 0`.
fn outside(v: &[u8], mask: &[u8]) -> bool {
    (0..v.len()).any(|i| byte_r(v, i) & !byte_r(mask, i) != 0)
}

/// The low `n` bits of `v` are zero.
fn low_bits_clear(v: &[u8], n: u32) -> bool {
    (0..v.len()).all(|i| {
        let lo = i as u32 * 8;
        let m: u8 = if lo + 8 <= n { 0xff } else if lo >= n { 0 } else { (1u8 << (n - lo)) - 1 };
        byte_r(v, i) & m == 0
    })
}

/// Push an int of `bits` bits whose ones are bits `lo..bits` (from the
/// right): the all-ones value (lo 0) and a prefix mask, as the key writes ints.
fn push_ones(key: &mut Vec<u8>, bits: u32, lo: u32) {
    if bits <= lo {
        key.extend_from_slice(&[0, 0]);
        return;
    }
    let n = bits.div_ceil(8) as usize;
    key.extend_from_slice(&(n as u16).to_be_bytes());
    for i in (0..n).rev() {
        let mut byte = 0u8;
        for b in 0..8 {
            let bit = i as u32 * 8 + b;
            if bit >= lo && bit < bits {
                byte |= 1 << b;
            }
        }
        key.push(byte);
    }
}

/// One element of the key: None, or an int as a 2-byte length and its
/// shortest big-endian bytes (`store.key_bytes`).
fn push_int(key: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        None => key.extend_from_slice(&[0xff, 0xff]),
        Some(b) => {
            let s = shortest(b);
            key.extend_from_slice(&(s.len() as u16).to_be_bytes());
            key.extend_from_slice(s);
        }
    }
}

fn push_none(key: &mut Vec<u8>, n: usize) {
    for _ in 0..n {
        key.extend_from_slice(&[0xff, 0xff]);
    }
}

impl Table {
    /// The entry's key (`Match.key()` of each field, then the priority), or
    /// None where the Python decoder must look (an error).
    fn key(&self, te: &TableEntry) -> Option<Vec<u8>> {
        let mut got: Vec<Option<&MatchType>> = vec![None; self.fields.len()];
        for fm in &te.r#match {
            let i = self.fields.iter().position(|f| f.id == fm.field_id)?;
            if got[i].replace(fm.field_match_type.as_ref()?).is_some() {
                return None; // given twice
            }
        }
        let mut key = Vec::with_capacity(24 * self.fields.len() + 8);
        for (f, m) in self.fields.iter().zip(got) {
            let w = f.width;
            key.push(f.kind as u8);
            match (f.kind, m) {
                (Kind::Exact, Some(MatchType::Exact(x))) => {
                    push_int(&mut key, Some(value(&x.value, w)?));
                    push_none(&mut key, 3);
                }
                (Kind::Lpm, Some(MatchType::Lpm(x))) => {
                    let v = value(&x.value, w)?;
                    if x.prefix_len <= 0 || x.prefix_len as u32 > w || !low_bits_clear(v, w - x.prefix_len as u32) {
                        return None;
                    }
                    push_int(&mut key, Some(v));
                    push_ones(&mut key, w, w - x.prefix_len as u32);
                    push_none(&mut key, 2);
                }
                (Kind::Ternary, Some(MatchType::Ternary(x))) => {
                    let (v, mask) = (value(&x.value, w)?, value(&x.mask, w)?);
                    if mask.is_empty() || outside(v, mask) {
                        return None;
                    }
                    push_int(&mut key, Some(v));
                    push_int(&mut key, Some(mask));
                    push_none(&mut key, 2);
                }
                (Kind::Range, Some(MatchType::Range(x))) => {
                    let (lo, hi) = (value(&x.low, w)?, value(&x.high, w)?);
                    if (lo.len(), lo) > (hi.len(), hi) {
                        return None; // shortest forms: longer is larger, else byte order
                    }
                    push_int(&mut key, Some(lo));
                    push_none(&mut key, 1);
                    push_int(&mut key, Some(lo));
                    push_int(&mut key, Some(hi));
                }
                (Kind::Optional, Some(MatchType::Optional(x))) => {
                    push_int(&mut key, Some(value(&x.value, w)?));
                    push_ones(&mut key, w, 0);
                    push_none(&mut key, 2);
                }
                (_, Some(_)) => return None, // the wrong kind of match
                (Kind::Exact, None) => return None,
                // omitted: the don't-care match (`entries.wildcard`)
                (Kind::Range, None) => {
                    push_int(&mut key, Some(&[]));
                    push_none(&mut key, 1);
                    push_int(&mut key, Some(&[]));
                    push_ones(&mut key, w, 0);
                }
                (_, None) => {
                    push_int(&mut key, Some(&[]));
                    push_int(&mut key, Some(&[]));
                    push_none(&mut key, 2);
                }
            }
        }
        if self.priority {
            if te.priority <= 0 {
                return None;
            }
            push_int(&mut key, Some(&te.priority.to_be_bytes()));
        } else {
            if te.priority != 0 {
                return None;
            }
            push_int(&mut key, None);
        }
        Some(key)
    }

    /// The action of an INSERT or MODIFY is one this table allows, with each
    /// of its parameters given once and fitting its width.
    fn action_ok(&self, te: &TableEntry) -> bool {
        let Some(a) = te.action.as_ref().and_then(|ta| ta.action.as_ref()) else { return false };
        let Some(widths) = self.actions.get(&a.action_id) else { return false };
        if a.params.len() != widths.len() {
            return false;
        }
        let mut seen = 0u64;
        a.params.iter().all(|p| {
            let i = p.param_id as usize;
            if i == 0 || i > widths.len() || i > 64 || seen & (1 << (i - 1)) != 0 {
                return false;
            }
            seen |= 1 << (i - 1);
            value(&p.value, widths[i - 1]).is_some()
        })
    }
}

impl WriteDecoder {
    fn one(&self, u: Update) -> Option<Decoded> {
        if !(1..=3).contains(&u.r#type) {
            return None;
        }
        let raw = u.entity?.table_entry?;
        let te = TableEntry::decode(raw.clone()).ok()?;
        let t = self.tables.get(&te.table_id)?;
        if te.is_default_action
            || te.idle_timeout_ns != 0
            || te.time_since_last_hit.is_some()
            || te.meter_config.is_some()
            || te.meter_counter_data.is_some()
        {
            return None;
        }
        let key = t.key(&te)?;
        if u.r#type != 3 && !t.action_ok(&te) {
            return None;
        }
        Some(Decoded { kind: u.r#type as usize, table: te.table_id, key, entry: raw, metadata: te.metadata })
    }
}

#[pymethods]
impl WriteDecoder {
    /// `WriteDecoder(tables)`: one `(table id, name, needs priority,
    /// [(field id, match kind, width)], [(action id, [param widths])])` per
    /// table the fast path may write (not const, no action profile).
    #[new]
    #[allow(clippy::type_complexity)]
    fn new(py: Python<'_>, tables: Vec<(u32, String, bool, Vec<(u32, String, u32)>, Vec<(u32, Vec<u32>)>)>) -> PyResult<Self> {
        let mut out = HashMap::new();
        for (id, name, priority, fields, actions) in tables {
            let mut fs = Vec::new();
            for (id, kind, width) in fields {
                let kind = Kind::parse(&kind)
                    .ok_or_else(|| pyo3::exceptions::PyValueError::new_err(format!("{name}: match kind {kind}?")))?;
                fs.push(Field { id, kind, width });
            }
            fs.sort_by_key(|f| f.id);
            let t = Table { name: PyString::new_bound(py, &name).unbind(), priority, fields: fs, actions: actions.into_iter().collect() };
            out.insert(id, t);
        }
        let s = |x: &str| PyString::intern_bound(py, x).unbind();
        Ok(WriteDecoder { tables: out, kinds: [s("insert"), s("modify"), s("delete")] })
    }

    /// One item per update of the serialised WriteRequest `request`: None
    /// (the Python decoder's) or `(kind, table name, key, entry bytes,
    /// metadata)`. None in place of the list when the bytes do not parse.
    fn decode<'py>(&self, py: Python<'py>, request: &[u8]) -> PyResult<Option<Bound<'py, PyList>>> {
        let Some(req) = parse(py, request) else {
            return Ok(None);
        };
        Ok(Some(self.items(py, req.updates)))
    }

    /// The whole request: `(device id, role, election id or None,
    /// atomicity, items)` with the items of `decode`; None when the bytes
    /// do not parse.
    #[allow(clippy::type_complexity)]
    fn decode_write<'py>(
        &self,
        py: Python<'py>,
        request: &[u8],
    ) -> PyResult<Option<(u64, String, Option<u128>, i32, Bound<'py, PyList>)>> {
        let Some(req) = parse(py, request) else {
            return Ok(None);
        };
        let eid = req.election_id.as_ref().map(|e| (e.high as u128) << 64 | e.low as u128);
        Ok(Some((req.device_id, req.role, eid, req.atomicity, self.items(py, req.updates))))
    }
}

/// A Write of at most this many bytes is decoded with the GIL held: a few
/// updates take less than releasing it, and a released GIL may go to another
/// thread for its whole switch interval (5 ms) before a single Write gets it back.
const HOLD_GIL_BYTES: usize = 4096;

/// The request parsed (None: the bytes are no WriteRequest), the GIL released for a large one.
fn parse(py: Python<'_>, request: &[u8]) -> Option<WriteRequest> {
    let go = || WriteRequest::decode(Bytes::copy_from_slice(request)).ok();
    if request.len() <= HOLD_GIL_BYTES {
        go()
    } else {
        py.allow_threads(go)
    }
}

impl WriteDecoder {
    fn items<'py>(&self, py: Python<'py>, updates: Vec<Update>) -> Bound<'py, PyList> {
        let decoded: Vec<Option<Decoded>> = if updates.len() <= 8 {
            updates.into_iter().map(|u| self.one(u)).collect()
        } else {
            py.allow_threads(|| updates.into_iter().map(|u| self.one(u)).collect())
        };
        let items = decoded.into_iter().map(|d| match d {
            None => py.None(),
            Some(d) => PyTuple::new_bound(
                py,
                [
                    self.kinds[d.kind - 1].clone_ref(py).into_any(),
                    self.tables[&d.table].name.clone_ref(py).into_any(),
                    PyBytes::new_bound(py, &d.key).into_any().unbind(),
                    PyBytes::new_bound(py, &d.entry).into_any().unbind(),
                    PyBytes::new_bound(py, &d.metadata).into_any().unbind(),
                ],
            )
            .into_any()
            .unbind(),
        });
        PyList::new_bound(py, items)
    }
}

/// The table an `apply_items` run writes now (the last one looked up).
struct Target<'py> {
    name: Bound<'py, PyAny>,
    entries: Bound<'py, PyDict>,
    size: usize,
    spec_name: String,
}

/// A `Stored` (store.py) of an entry the fast path took, made without
/// running Python code: `object.__new__` and its slots set. `decode` must
/// not refer back to the store (the entry is not tracked for cycles).
#[allow(clippy::too_many_arguments)]
fn stored<'py>(
    cls: &Bound<'py, PyType>,
    seq: &Bound<'py, PyAny>,
    packets: &Bound<'py, PyAny>,
    bytes: &Bound<'py, PyAny>,
    metadata: &Bound<'py, PyAny>,
    src: Bound<'py, PyTuple>,
    decode: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = cls.py();
    let obj = unsafe {
        let args = PyTuple::empty_bound(py);
        Bound::from_owned_ptr_or_err(py, pyo3::ffi::PyType_GenericNew(cls.as_type_ptr(), args.as_ptr(), std::ptr::null_mut()))?
    };
    obj.setattr(intern!(py, "seq"), seq)?;
    obj.setattr(intern!(py, "packets"), packets)?;
    obj.setattr(intern!(py, "bytes"), bytes)?;
    obj.setattr(intern!(py, "metadata"), metadata)?;
    obj.setattr(intern!(py, "src"), src)?;
    obj.setattr(intern!(py, "decode"), decode)?;
    obj.setattr(intern!(py, "wire"), py.None())?;
    // Left out of the cycle collector: it would walk every stored entry
    // again and again as a table grows (a third of an insert's CPU). Safe
    // because nothing the entry holds refers back to it (`decode` holds
    // its server and pipeline weakly: server.py, `_EntryDecoder`).
    unsafe { pyo3::ffi::PyObject_GC_UnTrack(obj.as_ptr().cast()) };
    Ok(obj)
}

/// `TableStore.apply`'s loop over the write decoder's items (store.py), in
/// one call per Write: for each `(kind, table, key, entry bytes, metadata)`
/// an insert, modify or delete in `tables[table].entries` (through
/// `work`: the tables written so far, each a copy when `atomic`), with the
/// same errors as `TableStore._put`. `seq` is the store's last insertion
/// number. Before each update, the client gone (`call` inactive, or
/// `gone(i)` true) fails that update and the rest CANCELLED. Returns
/// (per update None or (status name, message), anything changed, `seq` after).
#[pyfunction]
#[pyo3(signature = (items, tables, work, atomic, seq, stored_cls, decode, call=None, gone=None))]
#[allow(clippy::too_many_arguments)]
fn apply_items<'py>(
    py: Python<'py>,
    items: &Bound<'py, PyList>,
    tables: &Bound<'py, PyDict>,
    work: &Bound<'py, PyDict>,
    atomic: bool,
    mut seq: u64,
    stored_cls: &Bound<'py, PyType>,
    decode: &Bound<'py, PyAny>,
    call: Option<&Bound<'py, crate::frontend::Call>>,
    gone: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyList>, bool, u64)> {
    let n = items.len();
    let errs = PyList::empty_bound(py);
    let mut changed = false;
    let mut target: Option<Target<'py>> = None;
    let zero = 0u64.into_py(py).into_bound(py);
    let err = |code: &str, msg: String| PyTuple::new_bound(py, [code.into_py(py), msg.into_py(py)]).into_any();
    for (i, item) in items.iter().enumerate() {
        let left = match (call, gone) {
            (Some(c), _) => !c.get().active(),
            (None, Some(g)) => g.call1((i,))?.is_truthy()?,
            _ => false,
        };
        if left {
            let e = err("CANCELLED", "not applied: the client went away".into());
            for _ in i..n {
                errs.append(&e)?;
            }
            break;
        }
        let item = item.downcast_into::<PyTuple>()?;
        let (kind, name, key, raw, meta) = (item.get_item(0)?, item.get_item(1)?, item.get_item(2)?, item.get_item(3)?, item.get_item(4)?);
        if !target.as_ref().is_some_and(|t| t.name.is(&name) || t.name.eq(&name).unwrap_or(false)) {
            let t = match work.get_item(&name)? {
                Some(t) => t,
                None => match tables.get_item(&name)? {
                    None => {
                        errs.append(err("NOT_FOUND", format!("no table {name}")))?;
                        continue;
                    }
                    Some(t) => {
                        let t = if atomic { t.call_method0(intern!(py, "copy"))? } else { t };
                        work.set_item(&name, &t)?;
                        t
                    }
                },
            };
            target = Some(Target {
                name: name.clone(),
                entries: t.getattr(intern!(py, "entries"))?.downcast_into::<PyDict>()?,
                size: t.getattr(intern!(py, "size"))?.extract()?,
                spec_name: t.getattr(intern!(py, "spec"))?.getattr(intern!(py, "name"))?.extract()?,
            });
        }
        let t = target.as_ref().expect("set above");
        let kind_s = kind.downcast::<PyString>()?.to_cow()?;
        let src = PyTuple::new_bound(py, [&raw, &kind]);
        match &*kind_s {
            "insert" => {
                if t.entries.contains(&key)? {
                    errs.append(err("ALREADY_EXISTS", format!("{}: an entry with this match and priority exists", t.spec_name)))?;
                    continue;
                }
                if t.entries.len() >= t.size {
                    errs.append(err("RESOURCE_EXHAUSTED", format!("{}: table full ({} entries)", t.spec_name, t.size)))?;
                    continue;
                }
                seq += 1;
                let s = stored(stored_cls, &seq.into_py(py).into_bound(py), &zero, &zero, &meta, src, decode)?;
                t.entries.set_item(&key, s)?;
            }
            "modify" => {
                let Some(old) = t.entries.get_item(&key)? else {
                    errs.append(err("NOT_FOUND", format!("{}: no entry with this match and priority", t.spec_name)))?;
                    continue;
                };
                let s = stored(
                    stored_cls,
                    &old.getattr(intern!(py, "seq"))?,
                    &old.getattr(intern!(py, "packets"))?,
                    &old.getattr(intern!(py, "bytes"))?,
                    &meta,
                    src,
                    decode,
                )?;
                t.entries.set_item(&key, s)?;
            }
            "delete" => {
                if t.entries.get_item(&key)?.is_none() {
                    errs.append(err("NOT_FOUND", format!("{}: no entry with this match and priority", t.spec_name)))?;
                    continue;
                }
                t.entries.del_item(&key)?;
            }
            other => {
                errs.append(err("INVALID_ARGUMENT", format!("unknown update {other}")))?;
                continue;
            }
        }
        errs.append(py.None())?;
        changed = true;
    }
    Ok((errs, changed, seq))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(apply_items, m)?)?;
    m.add_class::<WriteDecoder>()?;
    Ok(())
}

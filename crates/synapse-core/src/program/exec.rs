//! The executor: a [`Program`] linked from its [`Description`] (every
//! reference checked, expressions and ops compiled, entries bound to their
//! tables' lookup structures) and an [`Executor`] that runs packets
//! through it, implementing [`RunPacket`].
//!
//! Per packet: the PHV is restored (only the groups the last packet wrote),
//! `standard_metadata.ingress_port` and `packet_length` are set, the parser
//! runs, then the pipelines (each keyed table visited is appended to the
//! [`Visits`]), then, when output packets are asked for and the packet is
//! not dropped, the deparser. Nothing is allocated per packet.
//!
//! **Exactness.** What the executor cannot compute is never guessed
//! silently. An extern it does not run marks its output field
//! *synthesized*; the mark follows assignments (as in the interpreter: a
//! static closure over the program's assignments, tracked per packet only
//! where it can matter). A table keying on a synthesized field, a
//! conditional reading one or one the compiler could not lower (a fallback
//! branch), and an expression needing more than 128 bits make the packet
//! **inexact** from that point: [`Executor::exact_visits`] says how many of
//! its visits came before, and [`Executor::events`] counts each reason by
//! name. Constructs run as no-ops (counters, clones, digests) are counted
//! too, without making the packet inexact (they do not change what the
//! visits are).

use std::collections::BTreeMap;

use serde_json::Value;

use super::action::{Action, Dst, Op};
use super::control::{Cond, Node, NO_ACTION};
use super::deparser::{CkInput, Checksum};
use super::expr::{reads, Code, Scope};
use super::externs::Extern;
use super::ir::{hex_u128, Description, NextDesc, NodeDesc, FORMAT, VERSION};
use super::parser::{Errors, POp, ParseState, Parser, Part};
use super::phv::{mask, Layout, Phv};
use super::flow::{Meta, Pass, Pipe};
use super::run::{Outcome, Outputs, RunPacket};
use super::table::{Hit, Index, KeyHot, KeyPart, Table, TableHot, MAX_KEY_WORDS};
use super::visits::Visits;
use crate::rules::MatchKind;

/// "None" for indices stored as u32 (no header, no reason, not extracted).
pub const NONE: u32 = u32::MAX;

/// One field of a header, for extraction and emission.
#[derive(Clone, Debug)]
pub struct FieldIo {
    pub slot: u32,
    pub cell: u32,
    /// Offset in the header's fixed part (bits).
    pub bit: u32,
    pub width: u32,
    pub limbs: u32,
    pub varbit: bool,
}

#[derive(Clone, Debug)]
pub struct Hdr {
    pub name: String,
    pub valid: u32,
    pub group: u32,
    /// Cells of its fields (after the validity cell).
    pub cells: (u32, u32),
    pub fields: Vec<FieldIo>,
    /// The fields extraction fills: those the program reads (a field no
    /// expression, key, select or checksum reads stays 0 in the PHV; the
    /// deparser emits it from the frame's bytes), or all of them for a
    /// header copied, shifted in a stack or hashed whole.
    pub loads: Vec<FieldIo>,
    /// `loads` as 8-byte big-endian reads, when each fits one (see
    /// [`super::parser::Load8`]); None: some load spans more (the field-by-field path).
    pub plan: Option<Vec<super::parser::Load8>>,
    /// Bytes the plan reads past the header's start (its last read's end).
    pub plan_bytes: u32,
    /// Bytes of its fixed fields.
    pub bytes: u32,
    /// Largest varbit length in bits (0: none).
    pub varbit_max: u32,
    pub union: Option<u32>,
    pub metadata: bool,
}

#[derive(Clone, Debug)]
pub struct Stack {
    pub name: String,
    pub headers: Vec<u32>,
    /// The next-index cell and its reset group.
    pub next: u32,
    pub group: u32,
}

/// `standard_metadata` fields the executor reads and writes: (cell, group).
#[derive(Clone, Debug, Default)]
pub struct Std {
    pub ingress_port: Option<(u32, u32)>,
    pub packet_length: Option<(u32, u32)>,
    pub parser_error: Option<(u32, u32)>,
    pub egress_spec: Option<(u32, u32)>,
    pub egress_port: Option<(u32, u32)>,
    pub mcast_grp: Option<(u32, u32)>,
    pub masks: [u128; 3],
    pub egress_port_mask: u128,
}

/// A linked program (see the module doc).
///
/// `repr(C)` keeps the fields in this order: what every packet reads (the
/// tables' hot records, the nodes, actions, headers, parser, expression
/// code, layout) leads, together in few cache lines; what only linking,
/// reports and rare paths read comes last. Letting rustc order them put
/// the large `objs` first, and the hot fields' place moved with its size
/// (864 bytes more there cost the router 5 % in CPU time).
#[derive(Debug)]
#[repr(C)]
pub struct Program {
    /// Per table: what every application reads (see [`TableHot`]), its
    /// lookup structure, and the program-wide arrays they index: key
    /// fields, entries' hits, action data.
    pub hot: Vec<TableHot>,
    pub key_hot: Vec<KeyHot>,
    pub indexes: Vec<Index>,
    pub hits: Vec<Hit>,
    pub data: Vec<u128>,
    pub nodes: Vec<Node>,
    pub pipelines: Vec<(String, i32)>,
    pub actions: Vec<Action>,
    pub headers: Vec<Hdr>,
    pub parser: Parser,
    pub code: Code,
    pub lay: Layout,
    pub std: Std,
    pub deparser: Vec<u32>,
    pub packs: Vec<Option<super::deparser::Pack>>,
    pub checksums: Vec<Checksum>,
    pub hdr_of_slot: Vec<u32>,
    pub errors: Errors,
    /// The externs' objects, calculations and the switch's configuration.
    pub objs: super::externs::Objects,
    pub tables: Vec<Table>,
    pub externs: Vec<Extern>,
    pub stacks: Vec<Stack>,
    pub unions: Vec<Vec<u32>>,
    /// Slots that may hold a synthesized value; the reads an assignment's taint follows.
    pub maybe: Vec<bool>,
    pub taint_reads: Vec<u32>,
    /// Table index of each keyed table, in visit numbering.
    pub keyed: Vec<u32>,
    /// Most key fields of a table.
    pub max_key_fields: usize,
    pub error_names: BTreeMap<u32, String>,
    /// What the compiler and the linker could not lower (named).
    pub unsupported: Vec<String>,
    pub source: String,
}

/// A program being linked: what compiling ops needs (see `action.rs`).
pub struct Linker<'a> {
    pub d: &'a Description,
    /// The externs' objects and calculations (linked first: call sites name them).
    pub objs: super::externs::Objects,
    pub lay: Layout,
    pub code: Code,
    pub headers: Vec<Hdr>,
    pub hdr_of_slot: Vec<u32>,
    pub stacks: Vec<Stack>,
    pub externs: Vec<Extern>,
    pub maybe: Vec<bool>,
    pub taint_reads: Vec<u32>,
    /// For expression scopes: stacks as (next slot, element field slots), unions as validity slots.
    pub stack_scope: Vec<(u32, Vec<Vec<u32>>)>,
    pub union_scope: Vec<Vec<u32>>,
}

/// The expression scope of a linker (a macro: it borrows fields, not the whole linker).
macro_rules! scope {
    ($lk:expr, $params:expr, $parser:expr) => {
        Scope { lay: &$lk.lay, stacks: &$lk.stack_scope, unions: &$lk.union_scope, params: $params, parser: $parser }
    };
}
pub(crate) use scope;

impl Linker<'_> {
    /// Where an assignment to `slot` writes.
    pub fn dst(&self, slot: usize) -> Dst {
        let h = self.hdr_of_slot[slot];
        let (hdr, fbit) = match self.headers.get(h as usize) {
            Some(hd) if !hd.metadata => {
                // a varbit header moves its later fields: it is re-assembled
                let i = hd.fields.iter().position(|f| f.slot as usize == slot).filter(|_| hd.varbit_max == 0);
                (h, i.filter(|&i| i < 64).map_or(0, |i| 1u64 << i))
            }
            _ => (NONE, 0),
        };
        Dst { cell: self.lay.cell[slot], group: self.lay.group[slot], hdr, fbit }
    }

    pub fn header(&self, h: u64, what: &str) -> Result<u32, String> {
        if (h as usize) < self.headers.len() {
            Ok(h as u32)
        } else {
            Err(format!("{what}: expected a header index below {}, found {h}", self.headers.len()))
        }
    }

    /// After an assignment to `slot` from `tree`: the op that carries the synthesized mark, if any can arrive.
    pub fn taint_after(&mut self, slot: u32, tree: &Value, out: &mut Vec<Op>) {
        if !self.maybe.iter().any(|&m| m) {
            return;
        }
        let mut r = Vec::new();
        reads(tree, &mut r);
        r.retain(|&s| (s as usize) < self.maybe.len() && self.maybe[s as usize]);
        if r.is_empty() && !self.maybe[slot as usize] {
            return;
        }
        let start = self.taint_reads.len() as u32;
        self.taint_reads.extend(r);
        out.push(Op::Taint { slot, reads: (start, self.taint_reads.len() as u32) });
    }
}

/// Which slots the program reads, and which headers it uses whole (see [`Hdr::loads`]).
fn read_set(d: &Description, nslots: usize) -> (Vec<bool>, Vec<bool>) {
    fn walk(v: &Value, read: &mut [bool], full: &mut [bool]) {
        let Some(a) = v.as_array() else { return };
        let int = |i: usize| a.get(i).and_then(|x| x.as_u64()).map(|x| x as usize);
        match a.first().and_then(|x| x.as_str()) {
            Some("f") => {
                if let Some(s) = int(1).filter(|&s| s < read.len()) {
                    read[s] = true;
                }
            }
            Some("h") | Some("hdr_copy") => {
                let i = if a[0] == "h" { 1 } else { 2 };
                if let Some(h) = int(i).filter(|&h| h < full.len()) {
                    full[h] = true;
                }
            }
            Some("payload") => full.iter_mut().for_each(|f| *f = true),
            _ => {}
        }
        for x in a.iter().skip(1) {
            walk(x, read, full);
        }
    }
    let mut read = vec![false; nslots];
    let mut full = vec![false; d.headers.len()];
    for st in &d.stacks {
        for &h in &st.headers {
            if let Some(f) = full.get_mut(h as usize) {
                *f = true;
            }
        }
    }
    let trees = d.actions.iter().flat_map(|a| a.ops.iter()).chain(d.parser.states.iter().flat_map(|s| s.ops.iter().chain(s.key.iter())));
    for t in trees {
        walk(t, &mut read, &mut full);
    }
    for n in &d.nodes {
        match n {
            NodeDesc::Cond(c) => {
                if let Some(e) = &c.expr {
                    walk(e, &mut read, &mut full);
                }
            }
            NodeDesc::Table(t) => {
                for k in &t.key {
                    if let Some(r) = read.get_mut(k.slot as usize) {
                        *r = true;
                    }
                }
            }
        }
    }
    let x = &d.externs;
    let ext_trees = x.calculations.iter().flat_map(|c| c.inputs.iter())
        .chain(x.selectors.iter().flat_map(|c| c.inputs.iter()))
        .chain(x.field_lists.iter().flat_map(|f| f.1.iter()))
        .chain(x.learn_lists.iter().flat_map(|f| f.2.iter()));
    for t in ext_trees {
        walk(t, &mut read, &mut full);
    }
    for ck in &d.checksums {
        if ck.verify {
            // the parser compares the calculation with the field it holds
            if let Some(r) = read.get_mut(ck.target as usize) {
                *r = true;
            }
        }
        for i in &ck.inputs {
            walk(i, &mut read, &mut full);
        }
        if let Some(c) = &ck.cond {
            walk(c, &mut read, &mut full);
        }
    }
    (read, full)
}

/// Slots an op list marks synthesized, and assignments (destination, reads).
fn collect_taint(ops: &[Value], synth: &mut Vec<u32>, deps: &mut Vec<(u32, Vec<u32>)>) {
    for op in ops {
        let Some(a) = op.as_array() else { continue };
        match a.first().and_then(|x| x.as_str()) {
            Some("set") => {
                if let (Some(s), Some(t)) = (a.get(1).and_then(|x| x.as_u64()), a.get(2)) {
                    let mut r = Vec::new();
                    reads(t, &mut r);
                    deps.push((s as u32, r));
                }
            }
            Some("synth") => synth.extend(a.get(1).and_then(|x| x.as_u64()).map(|s| s as u32)),
            Some("extern") => {
                if let (Some(n), Some(args)) = (a.get(1).and_then(|x| x.as_str()), a.get(2).and_then(|x| x.as_array())) {
                    synth.extend(Extern::taints(n, args));
                }
            }
            Some("prim") => collect_taint(&a[1..], synth, deps),
            _ => {}
        }
    }
}

fn hexes(v: &[String], what: &str) -> Result<Vec<u128>, String> {
    v.iter().map(|x| hex_u128(x, what)).collect()
}

fn kind(s: &str, what: &str) -> Result<MatchKind, String> {
    match s {
        "valid" | "selector" => Ok(MatchKind::Exact),
        _ => MatchKind::parse(s).ok_or_else(|| format!("{what}: expected a match kind among exact, lpm, ternary, range, optional; found {s:?}")),
    }
}

impl Program {
    /// The names of [`RunPacket::drop_reason`]'s reasons: "dropped", then
    /// the pipeline a drop happened in.
    pub fn drop_reasons(&self) -> Vec<String> {
        std::iter::once("dropped".to_string()).chain(self.pipelines.iter().map(|(n, _)| n.clone())).collect()
    }

    /// Parses and links a description (JSON text).
    pub fn from_json(text: &str) -> Result<Program, String> {
        let d: Description = serde_json::from_str(text).map_err(|e| format!("program description: {e}"))?;
        Program::link(&d)
    }

    /// Checks and compiles `d`; an error names the place (action and
    /// primitive, parser state, table, entry).
    pub fn link(d: &Description) -> Result<Program, String> {
        if d.format != FORMAT || d.version != VERSION {
            return Err(format!("program description: expected format {FORMAT:?} version {VERSION}, found {:?} version {}", d.format, d.version));
        }
        let lay = Layout::new(d)?;
        let nslots = lay.cell.len();
        let slot = |s: u32, what: &str| lay.slot(s as u64, what);
        // headers
        let mut headers = Vec::new();
        let mut hdr_of_slot = vec![NONE; nslots];
        for (hi, h) in d.headers.iter().enumerate() {
            let what = format!("header {}", h.name);
            let v = slot(h.valid, &what)?;
            hdr_of_slot[v] = hi as u32;
            let mut fields = Vec::new();
            let mut bit = 0;
            for &f in &h.fields {
                let s = slot(f, &what)?;
                hdr_of_slot[s] = hi as u32;
                fields.push(FieldIo { slot: s as u32, cell: lay.cell[s], bit, width: lay.width[s], limbs: lay.limbs[s], varbit: lay.varbit[s] });
                if !lay.varbit[s] {
                    bit += lay.width[s];
                }
            }
            let first = fields.first().map_or(lay.cell[v] + 1, |f| f.cell);
            let last = fields.last().map_or(first, |f| f.cell + f.limbs + f.varbit as u32);
            headers.push(Hdr {
                name: h.name.clone(),
                valid: lay.cell[v],
                group: lay.group[v],
                cells: (first, last),
                loads: Vec::new(),
                plan: None,
                plan_bytes: 0,
                bytes: bit.div_ceil(8),
                varbit_max: fields.iter().filter(|f| f.varbit).map(|f| f.width).sum(),
                fields,
                union: h.union,
                metadata: h.metadata,
            });
        }
        let (read, full) = read_set(d, nslots);
        for (hi, hd) in headers.iter_mut().enumerate() {
            // a header the deparser may assemble from its fields (see `Dst`) is extracted whole
            let whole = full.get(hi).copied().unwrap_or(true) || hd.varbit_max > 0 || hd.fields.len() > 64;
            hd.loads = hd.fields.iter().filter(|f| whole || read[f.slot as usize]).cloned().collect();
            if hd.varbit_max == 0 {
                if let Some((plan, bytes)) = super::parser::Load8::plan(&hd.loads) {
                    (hd.plan, hd.plan_bytes) = (Some(plan), bytes);
                }
            }
        }
        let mut stacks = Vec::new();
        let mut stack_scope = Vec::new();
        for st in &d.stacks {
            let what = format!("header stack {}", st.name);
            let next = slot(st.next, &what)?;
            let mut elems = Vec::new();
            for &h in &st.headers {
                let hd = d.headers.get(h as usize).ok_or_else(|| format!("{what}: expected header indices"))?;
                elems.push(hd.fields.clone());
            }
            stack_scope.push((st.next, elems));
            stacks.push(Stack { name: st.name.clone(), headers: st.headers.clone(), next: lay.cell[next], group: lay.group[next] });
        }
        let mut unions = Vec::new();
        let mut union_scope = Vec::new();
        for u in &d.unions {
            for &h in &u.headers {
                if h as usize >= headers.len() {
                    return Err(format!("header union {}: expected header indices", u.name));
                }
            }
            unions.push(u.headers.clone());
            union_scope.push(u.headers.iter().map(|&h| d.headers[h as usize].valid).collect());
        }
        // static taint: what unsupported externs write, closed over assignments
        let (mut synth, mut deps) = (Vec::new(), Vec::new());
        for a in &d.actions {
            collect_taint(&a.ops, &mut synth, &mut deps);
        }
        for s in &d.parser.states {
            collect_taint(&s.ops, &mut synth, &mut deps);
        }
        let mut maybe = vec![false; nslots];
        for s in synth {
            if (s as usize) < nslots {
                maybe[s as usize] = true;
            }
        }
        loop {
            let mut changed = false;
            for (dst, r) in &deps {
                let dst = *dst as usize;
                if dst < nslots && !maybe[dst] && r.iter().any(|&s| (s as usize) < nslots && maybe[s as usize]) {
                    maybe[dst] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }

        let mut lk = Linker { d, objs: Default::default(), lay, code: Code::default(), headers, hdr_of_slot, stacks, externs: Vec::new(), maybe, taint_reads: Vec::new(), stack_scope, union_scope };
        lk.objs = lk.objects()?;

        let mut actions = Vec::new();
        for a in &d.actions {
            actions.push(lk.action(&a.name, &a.params, &a.ops)?);
        }
        let parser = lk.parser()?;
        let std = lk.std()?;
        let mut tables = Vec::new();
        let mut nodes = Vec::new();
        for (ni, n) in d.nodes.iter().enumerate() {
            match n {
                NodeDesc::Table(t) => {
                    tables.push(lk.table(t, &actions, d.nodes.len())?);
                    nodes.push(Node::Table(tables.len() as u32 - 1));
                }
                NodeDesc::Cond(c) => {
                    let what = format!("conditional {}", c.name);
                    let e = match &c.expr {
                        Some(t) => Some(lk.code.compile_truth(t, &scope!(lk, None, false), &what)?),
                        None => None,
                    };
                    let mut r = Vec::new();
                    if let Some(t) = &c.expr {
                        reads(t, &mut r);
                    }
                    r.retain(|&s| (s as usize) < nslots && lk.maybe[s as usize]);
                    r.dedup();
                    let check = |x: i64| -> Result<i32, String> {
                        if x >= -1 && x < d.nodes.len() as i64 {
                            Ok(x as i32)
                        } else {
                            Err(format!("{what}: expected a next node below {}, found {x}", d.nodes.len()))
                        }
                    };
                    let fallback = lk.code.reasons.id(&format!("fallback branch: {}", c.label));
                    nodes.push(Node::Cond(Cond { name: c.name.clone(), e, on_true: check(c.true_next)?, on_false: check(c.false_next)?, taint: r, fallback }));
                }
            }
            let _ = ni;
        }
        let mut keyed = Vec::new();
        for (k, &n) in d.keyed.iter().enumerate() {
            match nodes.get(n as usize) {
                Some(Node::Table(t)) if tables[*t as usize].keyed == Some(k as u16) => keyed.push(*t),
                _ => return Err(format!("keyed[{k}]: expected the node of keyed table {k}, found {n}")),
            }
        }
        let mut pipelines = Vec::new();
        for p in &d.pipelines {
            if p.init < -1 || p.init >= nodes.len() as i64 {
                return Err(format!("pipeline {}: expected an init node below {}, found {}", p.name, nodes.len(), p.init));
            }
            pipelines.push((p.name.clone(), p.init as i32));
        }
        for &h in &d.deparser {
            lk.header(h as u64, "deparser")?;
        }
        let checksums = lk.checksums()?;
        let errors = Errors {
            too_short: d.errors.packet_too_short,
            no_match: d.errors.no_match,
            stack_out_of_bounds: d.errors.stack_out_of_bounds,
            header_too_short: d.errors.header_too_short,
            timeout: d.errors.parser_timeout,
            invalid_argument: d.errors.names.iter().find(|(_, n)| *n == "ParserInvalidArgument").and_then(|(c, _)| c.parse().ok()).unwrap_or(d.errors.header_too_short),
        };
        let error_names = d.errors.names.iter().filter_map(|(c, n)| Some((c.parse::<u32>().ok()?, n.clone()))).collect();
        let max_key_fields = tables.iter().map(|t: &Table| t.key.len()).max().unwrap_or(0);
        // the lookup path's records, contiguous (the Table records keep names, rows, selector groups, handles)
        let (mut hot, mut indexes, mut key_hot, mut hits, mut data) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for t in tables.iter_mut() {
            let ks = t.key_hot();
            let plain = t.taint.is_empty() && t.learn.is_none() && t.selector.is_none() && !t.counters && t.meter.is_none();
            // a table that is not plain takes the general path to its cold part
            let probe = if plain { t.index.probe(&ks) } else { super::table::Probe::General };
            hot.push(TableHot { miss: t.miss, keys: key_hot.len() as u32, hits: hits.len() as u32, data: data.len() as u32,
                                keyed: t.keyed.unwrap_or(u16::MAX), nkeys: ks.len() as u8, words: t.words as u8, plain,
                                one_word: TableHot::one_word(&ks), probe });
            key_hot.extend(ks);
            // moved, not copied: one copy of the entries' hits and data
            hits.append(&mut t.hits);
            data.append(&mut t.data);
            indexes.push(std::mem::replace(&mut t.index, Index::None));
        }
        let mut unsupported = d.unsupported.clone();
        for (i, e) in lk.externs.iter().enumerate() {
            if let Extern::Unsupported { reason, .. } = e {
                let name = lk.code.reasons.names[*reason as usize].clone();
                if !unsupported.contains(&name) {
                    unsupported.push(name);
                }
            }
            let _ = i;
        }
        for ck in &checksums {
            if !ck.supported {
                let n = format!("checksum {} ({})", ck.name, ck.algo);
                if !unsupported.contains(&n) {
                    unsupported.push(n);
                }
            }
        }
        unsupported.sort();
        Ok(Program {
            source: d.source.clone(),
            lay: lk.lay,
            code: lk.code,
            packs: super::deparser::pack_plans(&lk.headers),
            headers: lk.headers,
            hdr_of_slot: lk.hdr_of_slot,
            stacks: lk.stacks,
            unions,
            actions,
            externs: lk.externs,
            objs: lk.objs,
            parser,
            errors,
            error_names,
            tables,
            hot,
            indexes,
            key_hot,
            hits,
            data,
            nodes,
            pipelines,
            keyed,
            deparser: d.deparser.clone(),
            checksums,
            std,
            maybe: lk.maybe,
            taint_reads: lk.taint_reads,
            unsupported,
            max_key_fields,
        })
    }

    /// Sets header `h` valid or invalid (see `action.rs` for the semantics).
    /// Only a header made valid here (its fields zeroed) is re-assembled by
    /// the deparser; one valid already keeps its extracted bytes.
    pub fn set_valid(&self, st: &mut State, h: u32, on: bool) {
        let hd = &self.headers[h as usize];
        let was = st.phv.cells[hd.valid as usize] != 0;
        if on {
            if !was {
                st.phv.cells[hd.cells.0 as usize..hd.cells.1 as usize].fill(0);
                // not in a union: no call (wrote_header marks the group)
                if hd.union.is_none() { st.phv.cells[hd.valid as usize] = 1 } else { self.make_valid(st, h) }
                st.wrote_header(hd.group, h);
            }
        } else {
            st.phv.cells[hd.valid as usize] = 0;
            st.phv.mark(hd.group);
        }
        if was != on {
            self.length_follows(st, hd, on);
        }
    }

    /// BMv2's add_header / remove_header of a packet header: the packet's length register follows.
    #[inline]
    pub fn length_follows(&self, st: &mut State, hd: &Hdr, on: bool) {
        if hd.metadata {
            return;
        }
        if let Some((c, g, m)) = self.objs.meta[super::flow::Meta::Length as usize] {
            let len = st.phv.cells[c as usize] as i128 + if on { hd.bytes as i128 } else { -(hd.bytes as i128) };
            st.phv.cells[c as usize] = len.max(0) as u128 & m;
            st.phv.mark(g);
        }
    }

    /// Header `h` valid, the other members of its union invalid.
    pub fn make_valid(&self, st: &mut State, h: u32) {
        let hd = &self.headers[h as usize];
        st.phv.cells[hd.valid as usize] = 1;
        st.phv.mark(hd.group);
        if let Some(u) = hd.union {
            for &o in &self.unions[u as usize] {
                if o != h {
                    let od = &self.headers[o as usize];
                    st.phv.cells[od.valid as usize] = 0;
                    st.phv.mark(od.group);
                }
            }
        }
    }

    /// `push` (or `push_front`) / `pop` of `n` elements of a stack.
    pub fn shift_stack(&self, st: &mut State, stack: u32, n: u32, push: bool, front: bool) {
        let s = &self.stacks[stack as usize];
        let len = s.headers.len();
        let n = n as usize;
        let order: Vec<usize> = if push { (0..len).rev().collect() } else { (0..len).collect() };
        for i in order {
            let j = if push { i.checked_sub(n) } else { Some(i + n).filter(|&j| j < len) };
            let d = &self.headers[s.headers[i] as usize];
            match j {
                Some(j) => {
                    let sh = &self.headers[s.headers[j] as usize];
                    st.phv.cells[d.valid as usize] = st.phv.cells[sh.valid as usize];
                    let k = (d.cells.1 - d.cells.0) as usize;
                    st.phv.cells.copy_within(sh.cells.0 as usize..sh.cells.0 as usize + k, d.cells.0 as usize);
                }
                None => {
                    st.phv.cells[d.cells.0 as usize..d.cells.1 as usize].fill(0);
                    st.phv.cells[d.valid as usize] = (push && !(front && i < n)) as u128;
                }
            }
            st.wrote_header(d.group, s.headers[i]);
        }
        let next = st.phv.cells[s.next as usize];
        st.phv.cells[s.next as usize] = if push { (next + n as u128).min(len as u128) } else { next.saturating_sub(n as u128) };
        st.phv.mark(s.group);
    }

    /// Keyed tables.
    pub fn keyed_tables(&self) -> impl Iterator<Item = &Table> {
        self.keyed.iter().map(|&t| &self.tables[t as usize])
    }
}

impl Linker<'_> {
    fn std(&self) -> Result<Std, String> {
        let s = &self.d.std;
        let f = |x: Option<u32>, what: &str| -> Result<Option<(u32, u32)>, String> {
            x.map(|x| self.lay.slot(x as u64, what).map(|s| (self.lay.cell[s], self.lay.group[s]))).transpose()
        };
        let w = |x: Option<u32>| x.map_or(u128::MAX, |x| mask(self.lay.width[x as usize]));
        Ok(Std {
            ingress_port: f(s.ingress_port, "std.ingress_port")?,
            packet_length: f(s.packet_length, "std.packet_length")?,
            parser_error: f(s.parser_error, "std.parser_error")?,
            egress_spec: f(s.egress_spec, "std.egress_spec")?,
            egress_port: f(s.egress_port, "std.egress_port")?,
            mcast_grp: f(s.mcast_grp, "std.mcast_grp")?,
            masks: [w(s.ingress_port), w(s.packet_length), w(s.parser_error)],
            egress_port_mask: w(s.egress_port),
        })
    }

    fn parser(&mut self) -> Result<Parser, String> {
        let p = &self.d.parser;
        let n = p.states.len() as i64;
        if p.init < -1 || p.init >= n || (p.init == -1 && n > 0) {
            return Err(format!("parser: expected an init state below {n}, found {}", p.init));
        }
        let mut states = Vec::new();
        for (i, s) in p.states.iter().enumerate() {
            let name = s.name.clone().unwrap_or_else(|| format!("#{i}"));
            let what = format!("parser state {name}");
            let mut ops = Vec::new();
            for (oi, v) in s.ops.iter().enumerate() {
                let w = format!("{what}: op {oi}");
                let bad = || format!("{w}: expected a parser op array, found {v}");
                let a = v.as_array().ok_or_else(bad)?;
                let tag = a.first().and_then(|x| x.as_str()).ok_or_else(bad)?;
                let int = |k: usize| a.get(k).and_then(|x| x.as_u64()).ok_or_else(bad);
                match tag {
                    "extract" => {
                        let h = self.header(int(1)?, &w)?;
                        if self.headers[h as usize].varbit_max > 0 {
                            return Err(format!("{w}: header {} has a varbit field: expected extract_vl", self.headers[h as usize].name));
                        }
                        ops.push(POp::Extract(h));
                    }
                    "extract_stack" => {
                        let k = int(1)? as usize;
                        let st = self.stacks.get(k).ok_or_else(|| format!("{w}: expected a header stack index, found {k}"))?;
                        if st.headers.iter().any(|&h| self.headers.get(h as usize).is_none_or(|hd| hd.varbit_max > 0)) {
                            return Err(format!("{w}: expected a stack of fixed-size headers"));
                        }
                        ops.push(POp::ExtractStack(k as u32));
                    }
                    "extract_vl" => {
                        let h = self.header(int(1)?, &w)?;
                        if self.headers[h as usize].varbit_max == 0 {
                            return Err(format!("{w}: header {} has no varbit field", self.headers[h as usize].name));
                        }
                        let (e, _) = self.code.compile(a.get(2).ok_or_else(bad)?, &scope!(self, None, true), &w)?;
                        ops.push(POp::ExtractVl(h, e));
                    }
                    "set" | "synth" => {
                        let mut out = Vec::new();
                        self.op(v, None, true, &w, &mut out)?;
                        ops.extend(out.into_iter().map(POp::Do));
                    }
                    "prim" => {
                        let mut out = Vec::new();
                        self.op(a.get(1).ok_or_else(bad)?, None, true, &w, &mut out)?;
                        ops.extend(out.into_iter().map(POp::Do));
                    }
                    "verify" => {
                        let cond = self.code.compile_truth(a.get(1).ok_or_else(bad)?, &scope!(self, None, true), &w)?;
                        let (error, _) = self.code.compile(a.get(2).ok_or_else(bad)?, &scope!(self, None, true), &w)?;
                        ops.push(POp::Verify { cond, error });
                    }
                    "advance" => {
                        let (e, _) = self.code.compile(a.get(1).ok_or_else(bad)?, &scope!(self, None, true), &w)?;
                        ops.push(POp::Advance(e));
                    }
                    _ => return Err(format!("{w}: unknown parser op {tag:?}")),
                }
            }
            let mut key = Vec::new();
            let mut total = 0u32;
            for v in &s.key {
                let bad = || format!("{what}: expected a select key part, found {v}");
                let a = v.as_array().ok_or_else(bad)?;
                let int = |k: usize| a.get(k).and_then(|x| x.as_u64()).ok_or_else(bad);
                let part = match a.first().and_then(|x| x.as_str()) {
                    Some("f") => {
                        let s = self.lay.slot(int(1)?, &what)?;
                        if self.lay.limbs[s] > 1 || self.lay.varbit[s] {
                            return Err(format!("{what}: select on field {} wider than 128 bits is not supported", self.lay.names[s]));
                        }
                        Part::Field { cell: self.lay.cell[s], w: self.lay.width[s] }
                    }
                    Some("la") => Part::Look { off: int(1)? as u32, w: int(2)? as u32 },
                    Some("sf") => {
                        let (e, _) = self.code.compile(&serde_json::json!(["sf", int(1)?, int(2)?]), &scope!(self, None, true), &what)?;
                        let Some(super::expr::Ins::StackField(i)) = self.code.ins.get(e.start as usize).copied() else { return Err(bad()) };
                        Part::Stack { i, w: int(3)? as u32 }
                    }
                    _ => return Err(bad()),
                };
                let w = match part {
                    Part::Field { w, .. } | Part::Look { w, .. } | Part::Stack { w, .. } => w,
                };
                total += w.div_ceil(8) * 8;
                key.push(part);
            }
            if total > 128 {
                return Err(format!("{what}: select key of {total} bits: at most 128 are supported"));
            }
            let mut transitions = Vec::new();
            let next = |x: i64| -> Result<i32, String> {
                if x >= -1 && x < n {
                    Ok(x as i32)
                } else {
                    Err(format!("{what}: expected a next state below {n}, found {x}"))
                }
            };
            for (v, m, nx) in &s.transitions {
                let (v, m) = (hex_u128(v, &what)?, hex_u128(m, &what)?);
                transitions.push((v & m, m, next(*nx)?));
            }
            let default = s.default.map(next).transpose()?;
            states.push(ParseState { name, ops, key, transitions, default, reject: s.reject });
        }
        Ok(Parser { init: p.init as i32, states })
    }

    fn table(&mut self, t: &super::ir::TableDesc, actions: &[Action], nnodes: usize) -> Result<Table, String> {
        let what = format!("table {}", t.name);
        let node = |x: i64| -> Result<i32, String> {
            if x >= -1 && x < nnodes as i64 {
                Ok(x as i32)
            } else {
                Err(format!("{what}: expected a next node below {nnodes}, found {x}"))
            }
        };
        let action = |a: u32, w: &str| -> Result<&Action, String> {
            actions.get(a as usize).ok_or_else(|| format!("{w}: expected an action index below {}, found {a}", actions.len()))
        };
        let next_of = |a: u32, hit: bool| -> Result<i32, String> {
            match &t.next {
                NextDesc::HitMiss { hit: h, miss: m } => node(if hit { *h } else { *m }),
                NextDesc::Actions { actions: by, base } => node(*by.get(&a.to_string()).unwrap_or(base)),
            }
        };
        let mut data = Vec::new();
        let call = |a: u32, d: &[String], w: &str, data: &mut Vec<u128>| -> Result<u32, String> {
            let act = action(a, w)?;
            if d.len() != act.params.len() {
                return Err(format!("{w}: action {} takes {} parameters, found {}", act.name, act.params.len(), d.len()));
            }
            let off = data.len() as u32;
            for (x, &pw) in hexes(d, w)?.into_iter().zip(&act.params) {
                data.push(x & mask(pw));
            }
            Ok(off)
        };
        let miss = match &t.default {
            Some(c) => Hit { action: c.a, data: call(c.a, &c.d, &format!("{what}: default action"), &mut data)?, next: next_of(c.a, false)? },
            None => Hit { action: NO_ACTION, data: 0, next: match &t.next {
                NextDesc::HitMiss { miss, .. } => node(*miss)?,
                NextDesc::Actions { base, .. } => node(*base)?,
            } },
        };
        let mut key = Vec::new();
        let mut words = 0usize;
        let mut taint = Vec::new();
        let mut taint_reason = Vec::new();
        for (i, k) in t.key.iter().enumerate() {
            let w = format!("{what}: key field {}", k.name);
            let s = self.lay.slot(k.slot as u64, &w)?;
            if self.lay.limbs[s] > 1 || self.lay.varbit[s] || k.width == 0 || k.width > 128 {
                return Err(format!("{w}: expected a key field of 1 to 128 bits"));
            }
            let slice = match &k.mask {
                Some(m) => Some((hex_u128(m, &w)?, k.shift)),
                None => None,
            };
            let valid = match k.valid {
                Some(v) => Some(self.lay.cell[self.lay.slot(v as u64, &w)?]),
                None => None,
            };
            let kw = k.width.div_ceil(32);
            words += kw as usize;
            if self.maybe[s] {
                taint.push((i as u32, s as u32));
            }
            taint_reason.push(self.code.reasons.id(&format!("synthesized field: {}", k.name)));
            key.push(KeyPart { cell: self.lay.cell[s], width: k.width, kind: kind(&k.kind, &w)?, valid, slice, words: kw, slot: s as u32, name: k.name.clone() });
        }
        if words > MAX_KEY_WORDS {
            return Err(format!("{what}: key of {words} 32-bit words is wider than the supported {MAX_KEY_WORDS} words"));
        }
        if t.keyed.is_none() && !t.entries.is_empty() {
            return Err(format!("{what}: a keyless table takes no entries"));
        }
        let mut rows = Vec::new();
        let mut hits = Vec::new();
        let (mut members, mut groups, mut handles) = (Vec::new(), Vec::new(), Vec::new());
        for (ei, e) in t.entries.iter().enumerate() {
            let w = format!("{what}: entry {ei}");
            if e.m.len() != key.len() {
                return Err(format!("{w}: expected {} match fields, found {}", key.len(), e.m.len()));
            }
            for (k, (lo, hi, m)) in key.iter().zip(&e.m) {
                let (lo, hi, m) = (hex_u128(lo, &w)?, hex_u128(hi, &w)?, hex_u128(m, &w)?);
                let _ = k;
                rows.extend([lo, hi, m]);
            }
            hits.push(Hit { action: e.a, data: call(e.a, &e.d, &w, &mut data)?, next: next_of(e.a, true)? });
            handles.push(e.h.unwrap_or(ei as u32));
            match &e.g {
                Some(ms) if !ms.is_empty() => {
                    let start = members.len() as u32;
                    for (a, d) in ms {
                        members.push(Hit { action: *a, data: call(*a, d, &w, &mut data)?, next: next_of(*a, true)? });
                    }
                    groups.push((start, ms.len() as u32));
                }
                _ => groups.push((0, 0)),
            }
        }
        let mut default_group = (0, 0);
        if let Some(ms) = t.default_group.as_ref().filter(|m| !m.is_empty()) {
            let start = members.len() as u32;
            for (a, d) in ms {
                members.push(Hit { action: *a, data: call(*a, d, &format!("{what}: default group"), &mut data)?, next: next_of(*a, false)? });
            }
            default_group = (start, ms.len() as u32);
        }
        let selector = match &t.selector {
            Some(n) => Some(*self.objs.selectors.get(n).ok_or_else(|| format!("{what}: expected action selector {n:?} among the externs' selectors"))?),
            None => None,
        };
        let meter = match &t.meter {
            Some(m) => {
                let k = self.objs.meters.iter().position(|x| x.name == m.name)
                    .ok_or_else(|| format!("{what}: expected direct meter {:?} among the externs' meters", m.name))?;
                let s = self.lay.slot(m.target as u64, &what)?;
                Some((k as u32, super::externs::Out { dst: self.dst(s), slot: s as u32, mask: mask(self.lay.width[s].min(128)) }))
            }
            None => None,
        };
        let mut tb = Table {
            name: t.name.clone(),
            keyed: t.keyed.map(|k| k as u16),
            key,
            words,
            rows,
            hits,
            miss,
            data,
            index: Index::None,
            taint,
            taint_reason,
            members,
            groups,
            default_group,
            selector,
            counters: t.counters,
            meter,
            handles,
            learn: None,
        };
        if let Some(l) = &t.add_on_miss {
            if t.keyed.is_none() || tb.key.iter().any(|k| k.kind != MatchKind::Exact) {
                return Err(format!("{what}: add_on_miss: expected a keyed table with exact keys only (PNA)"));
            }
            if t.counters || t.meter.is_some() || t.selector.is_some() {
                return Err(format!("{what}: add_on_miss: direct counters, meters and action selectors are not supported on it"));
            }
            if l.profiles_us.is_empty() {
                return Err(format!("{what}: add_on_miss: expected at least one expire time profile"));
            }
            let next_of = (0..actions.len() as u32).map(|a| next_of(a, true)).collect::<Result<Vec<_>, _>>()?;
            tb.learn = Some(super::learn::Spec { profiles_us: l.profiles_us.clone(), max_size: l.max_size,
                                                 fixed: t.entries.len() as u32, next_of });
        }
        tb.build_index();
        Ok(tb)
    }

    fn checksums(&mut self) -> Result<Vec<Checksum>, String> {
        let mut out = Vec::new();
        for ck in &self.d.checksums {
            if !ck.update && !ck.verify {
                continue;
            }
            let what = format!("checksum {}", ck.name);
            let target = self.lay.slot(ck.target as u64, &what)?;
            let mut inputs = Vec::new();
            for v in &ck.inputs {
                let bad = || format!("{what}: expected a calculation input, found {v}");
                let a = v.as_array().ok_or_else(bad)?;
                let int = |k: usize| a.get(k).and_then(|x| x.as_u64()).ok_or_else(bad);
                inputs.push(match a.first().and_then(|x| x.as_str()) {
                    Some("f") => {
                        let s = self.lay.slot(int(1)?, &what)?;
                        if self.lay.varbit[s] {
                            return Err(format!("{what}: a varbit field as a calculation input is not supported"));
                        }
                        CkInput::Field { slot: s as u32, header: self.hdr_of_slot[s] }
                    }
                    Some("c") => {
                        let (v, _, _) = super::ir::parse_hex(a.get(1).and_then(|x| x.as_str()).ok_or_else(bad)?).map_err(|e| format!("{what}: expected {e}"))?;
                        CkInput::Const { v, width: int(2)? as u32 }
                    }
                    Some("h") => CkInput::Header(self.header(int(1)?, &what)?),
                    Some("payload") => CkInput::Payload,
                    _ => return Err(bad()),
                });
            }
            if inputs.iter().any(|i| matches!(i, CkInput::Field { header: NONE, .. })) {
                return Err(format!("{what}: expected fields of headers as inputs"));
            }
            let cond = match &ck.cond {
                Some(c) => Some(self.code.compile_truth(c, &scope!(self, None, false), &what)?),
                None => None,
            };
            let unsupported = self.code.reasons.id(&format!("unsupported: checksum {} ({})", ck.name, ck.algo));
            let imp = super::externs::algo_named(&ck.algo);
            let supported = imp.is_some();
            let dst = self.dst(target);
            out.push(Checksum { sum16: super::deparser::sum16_plan(&inputs, imp.as_ref(), &self.lay, &self.headers), name: ck.name.clone(), algo: ck.algo.clone(), imp, target: target as u32, dst, inputs, cond, supported,
                                unsupported, verify: ck.verify, update: ck.update });
        }
        Ok(out)
    }
}

/// One packet's state while it runs (see the module doc).
pub struct State {
    pub phv: Phv,
    /// Bitset over slots: holds a synthesized value (only slots in `maybe`).
    taint: Vec<u64>,
    taints: bool,
    /// Per header: the frame offset it was extracted from (NONE: not
    /// extracted, or written as a whole since), and which of its fields
    /// were written since (bit i: field i).
    pub hdr_src: Vec<u32>,
    pub fdirty: Vec<u64>,
    /// The parser's position (bytes); after parsing, the payload's start.
    pub pos: usize,
    /// A lookahead in a parser `set` ran past the frame.
    pub too_short: bool,
    /// Visits of the current packet so far.
    pub nvisits: u32,
    /// The first inexact event of the packet (NONE: exact) and the visits before it.
    pub inexact: u32,
    pub inexact_at: u32,
    /// Events per reason (`Code::reasons`), over every packet run.
    pub events: Vec<u64>,
    /// Registers, counters, meters, the random generator, the current pass.
    pub ext: super::externs::ExternState,
    /// The pipeline at whose end the last dropped packet was marked to drop
    /// (`u32::MAX`: dropped otherwise, e.g. a multicast group without replicas).
    pub drop_pipeline: u32,
    /// The packet's arrival time (µs since the run's start).
    pub now_us: u64,
    /// Per table: its learned entries (add-on-miss tables only).
    pub learn: Vec<Option<super::learn::Learner>>,
    pub learning: bool,
    /// Data-plane writes since the log was last drained (None: not logged).
    pub writes: Option<Vec<super::learn::Write>>,
    /// The add-on-miss table whose action runs (NONE: none), the learned
    /// entry it hit (NONE: a miss; `learn::FIXED`: a control-plane entry) and its key.
    pub learn_at: u32,
    pub learn_slot: u32,
    pub learn_key: Vec<u32>,
}

impl State {
    pub fn new(p: &Program) -> State {
        State {
            phv: Phv::new(&p.lay),
            taint: vec![0; p.lay.cell.len().div_ceil(64)],
            taints: p.maybe.iter().any(|&m| m),
            hdr_src: vec![NONE; p.headers.len()],
            fdirty: vec![0; p.headers.len()],
            pos: 0,
            too_short: false,
            nvisits: 0,
            inexact: NONE,
            inexact_at: 0,
            events: vec![0; p.code.reasons.names.len()],
            ext: super::externs::ExternState::new(p),
            drop_pipeline: 0,
            now_us: 0,
            learn: p.tables.iter().map(|t| t.learn.as_ref().map(super::learn::Learner::new)).collect(),
            learning: p.tables.iter().any(|t| t.learn.is_some()),
            writes: None,
            learn_at: NONE,
            learn_slot: NONE,
            learn_key: Vec::new(),
        }
    }

    /// The packet arrives at `now_ps`: learned entries whose time is up go.
    #[inline]
    fn arrive(&mut self, p: &Program, now_ps: u64) {
        self.now_us = now_ps / 1_000_000;
        if self.learning {
            for (t, l) in self.learn.iter_mut().enumerate() {
                if let Some(l) = l {
                    l.age(p.tables[t].keyed.unwrap_or(0), self.now_us, self.writes.as_mut());
                }
            }
        }
    }

    /// A field was written (see [`Dst`]).
    #[inline(always)]
    pub fn wrote(&mut self, d: Dst) {
        self.phv.mark(d.group);
        if d.hdr != NONE {
            if d.fbit == 0 {
                self.hdr_src[d.hdr as usize] = NONE;
            } else {
                self.fdirty[d.hdr as usize] |= d.fbit;
            }
        }
    }

    /// Header `h` (reset group `g`) was written as a whole: the deparser assembles it.
    #[inline]
    pub fn wrote_header(&mut self, g: u32, h: u32) {
        self.phv.mark(g);
        self.hdr_src[h as usize] = NONE;
    }

    #[inline]
    pub fn note(&mut self, r: u32) {
        if let Some(c) = self.events.get_mut(r as usize) {
            *c += 1;
        }
    }

    /// An event that makes the packet inexact from here on.
    #[inline]
    pub fn note_inexact(&mut self, r: u32) {
        self.note(r);
        if self.inexact == NONE {
            self.inexact = r;
            self.inexact_at = self.nvisits;
        }
    }

    #[inline]
    pub fn tainted(&self, slot: u32) -> bool {
        self.taints && (self.taint[(slot >> 6) as usize] >> (slot & 63)) & 1 == 1
    }

    #[inline]
    pub fn set_taint(&mut self, slot: u32, on: bool) {
        if !self.taints {
            return;
        }
        let (w, b) = ((slot >> 6) as usize, 1u64 << (slot & 63));
        if on {
            self.taint[w] |= b;
        } else {
            self.taint[w] &= !b;
        }
    }

    fn start(&mut self, p: &Program) {
        self.phv.reset(&p.lay);
        self.hdr_src.fill(NONE);
        self.pos = 0;
        self.start_packet();
    }

    /// What [`Self::start`] resets besides the PHV (the flow's passes reset
    /// the PHV as they hand it out).
    fn start_packet(&mut self) {
        if self.taints {
            self.taint.fill(0);
        }
        self.too_short = false;
        self.nvisits = 0;
        self.inexact = NONE;
        self.inexact_at = 0;
    }
}

/// One copy of a packet while simple_switch's flow runs it ([`super::flow`]):
/// its PHV and what the executor tracks of its headers.
#[derive(Clone)]
pub struct PktCopy {
    pub phv: Phv,
    pub hdr_src: Vec<u32>,
    pub fdirty: Vec<u64>,
    pub pos: usize,
}

/// A packet in simple_switch's flow: the received packet lives in the
/// [`State`] itself (a unicast packet, nearly every one, is run without
/// copying or swapping its PHV); clones, replicas and resubmitted copies
/// made while it is there are boxed [`PktCopy`]s from a pool.
pub enum FlowPhv {
    Main,
    Copy(Box<PktCopy>),
}

/// The executor's passes for [`super::flow::Flow`]: a boxed copy's PHV is
/// swapped into the [`State`] for a pass and out after it; finished copies
/// return to a pool, so a packet without copies allocates nothing.
struct Passes<'a> {
    p: &'a Program,
    st: &'a mut State,
    sc: &'a mut Scratch,
    pool: &'a mut Vec<Box<PktCopy>>,
    work: &'a mut std::collections::VecDeque<super::flow::Work<FlowPhv>>,
    /// The first pass's parser error.
    parser_error: Option<u32>,
    /// No live [`FlowPhv::Main`]: the State's PHV may be handed out.
    main_free: bool,
}

impl Passes<'_> {
    fn swap(&mut self, c: &mut FlowPhv) {
        if let FlowPhv::Copy(c) = c {
            std::mem::swap(&mut self.st.phv, &mut c.phv);
            std::mem::swap(&mut self.st.hdr_src, &mut c.hdr_src);
            std::mem::swap(&mut self.st.fdirty, &mut c.fdirty);
            std::mem::swap(&mut self.st.pos, &mut c.pos);
        }
    }

    fn phv<'b>(&'b self, c: &'b FlowPhv) -> &'b Phv {
        match c {
            FlowPhv::Main => &self.st.phv,
            FlowPhv::Copy(b) => &b.phv,
        }
    }

    fn meta_set(&mut self, c: &mut FlowPhv, m: Meta, v: u64) {
        if let Some((cell, g, mk)) = self.p.objs.meta[m as usize] {
            let phv = match c {
                FlowPhv::Main => &mut self.st.phv,
                FlowPhv::Copy(b) => &mut b.phv,
            };
            phv.cells[cell as usize] = v as u128 & mk;
            phv.mark(g);
        }
    }

    /// A boxed copy from the pool, its PHV fresh.
    fn boxed(&mut self) -> Box<PktCopy> {
        match self.pool.pop() {
            Some(mut c) => {
                c.phv.reset(&self.p.lay);
                c.hdr_src.fill(NONE);
                c.fdirty.fill(0);
                c.pos = 0;
                c
            }
            None => Box::new(PktCopy {
                phv: Phv::new(&self.p.lay),
                hdr_src: vec![NONE; self.p.headers.len()],
                fdirty: vec![0; self.p.headers.len()],
                pos: 0,
            }),
        }
    }
}

impl super::flow::Passes for Passes<'_> {
    type Phv = FlowPhv;

    fn fresh(&mut self) -> FlowPhv {
        if self.main_free {
            self.main_free = false;
            let st = &mut *self.st;
            // (`fdirty` needs no reset: the deparser reads it only for a header extracted since, which clears it)
            st.phv.reset(&self.p.lay);
            st.hdr_src.fill(NONE);
            st.pos = 0;
            FlowPhv::Main
        } else {
            FlowPhv::Copy(self.boxed())
        }
    }

    fn copy(&mut self, c: &FlowPhv) -> FlowPhv {
        let mut b = self.pool.pop().unwrap_or_else(|| Box::new(PktCopy { phv: Phv::new(&self.p.lay), hdr_src: Vec::new(), fdirty: Vec::new(), pos: 0 }));
        match c {
            FlowPhv::Main => {
                b.phv.clone_from(&self.st.phv);
                b.hdr_src.clone_from(&self.st.hdr_src);
                b.fdirty.clone_from(&self.st.fdirty);
                b.pos = self.st.pos;
            }
            FlowPhv::Copy(src) => b.clone_from(src),
        }
        FlowPhv::Copy(b)
    }

    fn parse(&mut self, c: &mut FlowPhv, frame: &[u8]) -> usize {
        self.swap(c);
        let p = self.p;
        let err = if p.parser.init >= 0 { p.parse(self.st, frame) } else { 0 };
        self.parser_error.get_or_insert(err);
        self.swap(c);
        if err != 0 {
            self.meta_set(c, Meta::ParserError, err as u64);
        }
        if p.objs.verify {
            self.swap(c);
            let bad = p.verify_checksums(self.st, frame, self.sc);
            self.swap(c);
            self.meta_set(c, Meta::ChecksumError, bad as u64);
        }
        match c {
            FlowPhv::Main => self.st.pos,
            FlowPhv::Copy(b) => b.pos,
        }
    }

    fn pipeline(&mut self, c: &mut FlowPhv, pipe: Pipe, ctx: &Pass, frame: &[u8], visits: &mut Visits) {
        let pi = match pipe {
            Pipe::Ingress => self.p.objs.ingress,
            Pipe::Egress => self.p.objs.egress,
        };
        if pi < 0 {
            return;
        }
        self.swap(c);
        self.st.ext.pass = *ctx;
        let p = self.p;
        p.run_pipeline(pi as usize, self.st, frame, visits, self.sc);
        self.swap(c);
    }

    fn deparse(&mut self, c: &mut FlowPhv, frame: &[u8], payload: usize, out: &mut Vec<u8>) {
        self.swap(c);
        self.st.pos = payload;
        let p = self.p;
        p.deparse(self.st, frame, self.sc, out);
        self.swap(c);
    }

    fn get(&self, c: &FlowPhv, m: Meta) -> u64 {
        self.p.objs.meta[m as usize].map_or(0, |(cell, _, _)| self.phv(c).cells[cell as usize] as u64)
    }

    fn set(&mut self, c: &mut FlowPhv, m: Meta, v: u64) {
        self.meta_set(c, m, v);
    }

    fn reset_metadata(&mut self, c: &mut FlowPhv, from: &FlowPhv, field_list: u64) {
        let objs = &self.p.objs;
        // `c` and `from` are never both the State's PHV (only one Main lives)
        let (dst, src): (&mut Phv, &Phv) = match (&mut *c, from) {
            (FlowPhv::Copy(d), FlowPhv::Main) => (&mut d.phv, &self.st.phv),
            (FlowPhv::Main, FlowPhv::Copy(s)) => (&mut self.st.phv, &s.phv),
            (FlowPhv::Copy(d), FlowPhv::Copy(s)) => (&mut d.phv, &s.phv),
            (FlowPhv::Main, FlowPhv::Main) => unreachable!("one packet in the State's PHV at a time"),
        };
        for &(cell, g) in &objs.metadata {
            dst.cells[cell as usize] = 0;
            dst.mark(g);
        }
        if let Some(fields) = objs.field_lists.get(&field_list) {
            for &(cell, g, limbs) in fields {
                let (a, b) = (cell as usize, (cell + limbs) as usize);
                dst.cells[a..b].copy_from_slice(&src.cells[a..b]);
                dst.mark(g);
            }
        }
        for m in [Meta::CloneSession, Meta::CloneFieldList, Meta::Resubmit, Meta::Recirculate, Meta::Learn] {
            self.meta_set(c, m, 0);
        }
    }

    fn digest(&mut self, _c: &FlowPhv, learn: u64) {
        let name = self.p.objs.learn_lists.get(&learn).map_or_else(|| format!("learn list {learn}"), |l| l.0.clone());
        *self.st.ext.digests.entry(name).or_insert(0) += 1;
    }

    fn recycle(&mut self, c: FlowPhv) {
        match c {
            FlowPhv::Main => self.main_free = true,
            FlowPhv::Copy(b) => self.pool.push(b),
        }
    }

    fn take_work(&mut self) -> std::collections::VecDeque<super::flow::Work<FlowPhv>> {
        std::mem::take(self.work)
    }

    fn give_work(&mut self, work: std::collections::VecDeque<super::flow::Work<FlowPhv>>) {
        *self.work = work;
    }
}

impl Executor {
    /// One received frame through simple_switch's packet flow ([`super::flow`]).
    fn run_flow(&mut self, frame: &[u8], ingress_port: u32, now_ps: u64, visits: &mut Visits, outputs: Option<&mut Outputs>) -> Outcome {
        let p = &self.prog;
        let st = &mut self.st;
        st.arrive(p, now_ps);
        st.start_packet();
        let mut x = Passes { p, st, sc: &mut self.sc, pool: &mut self.pool, work: &mut self.work, parser_error: None, main_free: true };
        let (di, de) = (self.flow.counts.drop_ingress, self.flow.counts.drop_egress);
        let sent = self.flow.process(&mut x, frame, ingress_port, now_ps / 1_000_000, visits, outputs);
        let parser_error = x.parser_error.unwrap_or(0);
        // which pipeline's mark_to_drop dropped it, as the interpreter names drops
        let c = &self.flow.counts;
        self.st.drop_pipeline = if c.drop_ingress > di { 0 } else if c.drop_egress > de { 1 } else { u32::MAX };
        self.packets += 1;
        self.inexact_packets += (self.st.inexact != NONE) as u64;
        Outcome { dropped: sent == 0, parser_error, outputs: sent }
    }
}

/// Per-lookup scratch space, allocated once.
pub struct Scratch {
    pub vals: Vec<u128>,
    pub bytes: Vec<u8>,
    /// A learned entry's action data while its action runs.
    pub learned: Vec<u128>,
}

/// Runs packets through a [`Program`] (see the module doc).
/// `repr(C)`: the program's hot fields lead (see [`Program`]), the per-packet state next.
#[repr(C)]
pub struct Executor {
    pub prog: Program,
    st: State,
    sc: Scratch,
    /// simple_switch's packet flow, and the copies it made, kept for reuse.
    pub flow: super::flow::Flow,
    /// The flow's queue of passes, reused from packet to packet.
    work: std::collections::VecDeque<super::flow::Work<FlowPhv>>,
    /// The program names simple_switch's fields: packets run its flow
    /// (decided once, not per packet).
    flows: bool,
    /// Packets run, and how many were inexact.
    pub packets: u64,
    pub inexact_packets: u64,
    pool: Vec<Box<PktCopy>>,
}

impl Executor {
    pub fn new(prog: Program) -> Executor {
        let st = State::new(&prog);
        let sc = Scratch { vals: vec![0; prog.max_key_fields.max(1)], bytes: Vec::new(), learned: Vec::new() };
        let flow = super::flow::Flow::new(prog.objs.flow.clone());
        let flows = prog.objs.meta.iter().any(Option::is_some);
        Executor { prog, st, sc, flow, pool: Vec::new(), work: Default::default(), packets: 0, inexact_packets: 0, flows }
    }

    pub fn from_json(text: &str) -> Result<Executor, String> {
        Ok(Executor::new(Program::from_json(text)?))
    }

    /// Visits the last packet made before it became inexact (all of them when exact).
    pub fn exact_visits(&self) -> u32 {
        if self.st.inexact == NONE {
            self.st.nvisits
        } else {
            self.st.inexact_at
        }
    }

    /// Why the last packet became inexact, if it did.
    pub fn inexact_reason(&self) -> Option<&str> {
        (self.st.inexact != NONE).then(|| self.prog.code.reasons.names[self.st.inexact as usize].as_str())
    }

    /// Events so far, by name (synthesized fields, fallback branches,
    /// unsupported externs and checksums, inexact expressions), nonzero only.
    pub fn events(&self) -> Vec<(String, u64)> {
        self.prog.code.reasons.names.iter().zip(&self.st.events).filter(|(_, &c)| c > 0).map(|(n, &c)| (n.clone(), c)).collect()
    }

    /// Logs the data-plane writes (adds, expiries) from now on, for [`Self::take_writes`].
    pub fn log_writes(&mut self) {
        self.st.writes.get_or_insert_with(Vec::new);
    }

    /// The data-plane writes logged since the last call.
    pub fn take_writes(&mut self) -> Vec<super::learn::Write> {
        self.st.writes.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Per add-on-miss table (name): its counters and the entries it holds now.
    pub fn learn_stats(&self) -> Vec<(String, super::learn::Stats, usize)> {
        self.prog.tables.iter().zip(&self.st.learn)
            .filter_map(|(t, l)| l.as_ref().map(|l| (t.name.clone(), l.stats.clone(), l.len())))
            .collect()
    }

    /// The externs' state: registers, counters, meters, digests.
    pub fn externs(&self) -> &super::externs::ExternState {
        &self.st.ext
    }

    /// The PHV cell of `slot` after the last packet (tests).
    pub fn field(&self, slot: usize) -> u128 {
        self.st.phv.cells[self.prog.lay.value_cell(slot) as usize]
    }
}

impl RunPacket for Executor {
    fn tables(&self) -> usize {
        self.prog.keyed.len()
    }

    fn key_words(&self, t: usize) -> usize {
        self.prog.tables[self.prog.keyed[t] as usize].words
    }

    fn run(&mut self, frame: &[u8], ingress_port: u32, now_ps: u64, visits: &mut Visits, outputs: Option<&mut Outputs>) -> Outcome {
        if self.flows {
            return self.run_flow(frame, ingress_port, now_ps, visits, outputs);
        }
        let p = &self.prog;
        let st = &mut self.st;
        st.arrive(p, now_ps);
        st.start(p);
        if let Some((c, g)) = p.std.ingress_port {
            st.phv.cells[c as usize] = ingress_port as u128 & p.std.masks[0];
            st.phv.mark(g);
        }
        if let Some((c, g)) = p.std.packet_length {
            st.phv.cells[c as usize] = frame.len() as u128 & p.std.masks[1];
            st.phv.mark(g);
        }
        let input = visits.packets() as u32;
        let parser_error = if p.parser.init >= 0 { p.parse(st, frame) } else { 0 };
        if parser_error != 0 {
            if let Some((c, g)) = p.std.parser_error {
                st.phv.cells[c as usize] = parser_error as u128 & p.std.masks[2];
                st.phv.mark(g);
            }
        }
        let dropped = p.run_pipelines(st, frame, visits, &mut self.sc);
        let mut n = 0;
        if let Some(out) = outputs {
            if !dropped {
                // deparsed straight into the batch's bytes
                p.deparse(st, frame, &mut self.sc, &mut out.bytes);
                let port = p.std.egress_port.or(p.std.egress_spec).map_or(0, |(c, _)| st.phv.cells[c as usize] as u32);
                out.end_packet(port, input);
                n = 1;
            }
        }
        visits.end_packet();
        self.packets += 1;
        self.inexact_packets += (st.inexact != NONE) as u64;
        Outcome { dropped, parser_error, outputs: n }
    }

    /// The pipeline that dropped the packet (1: the first), as the
    /// interpreter names its drops (`ingress`, `egress`).
    fn drop_reason(&self) -> u32 {
        self.st.drop_pipeline.wrapping_add(1)
    }

    fn log_writes(&mut self) {
        Executor::log_writes(self);
    }

    fn take_writes(&mut self) -> Vec<super::learn::Write> {
        Executor::take_writes(self)
    }

    fn drop_reasons(&self) -> Vec<String> {
        self.prog.drop_reasons()
    }
}


#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// Builds descriptions for tests: headers (slots in order: validity,
    /// then fields), then everything else as JSON.
    #[derive(Default)]
    pub struct B {
        fields: Vec<(String, u32, i64)>,
        headers: Vec<Value>,
        slots: std::collections::HashMap<String, u32>,
        hidx: std::collections::HashMap<String, u32>,
    }

    impl B {
        pub fn new() -> B {
            let mut b = B::default();
            b.header("standard_metadata", &[("ingress_port", 9), ("egress_spec", 9), ("egress_port", 9), ("packet_length", 32), ("mcast_grp", 16), ("parser_error", 32)], true);
            b.header("meta", &[("a", 16), ("b", 16), ("c", 32)], true);
            b
        }
        pub fn header(&mut self, name: &str, fields: &[(&str, u32)], metadata: bool) -> u32 {
            let h = self.headers.len() as i64;
            let valid = self.fields.len() as u32;
            self.fields.push((format!("{name}.$valid$"), 1, h));
            self.slots.insert(format!("{name}.$valid$"), valid);
            let mut fs = Vec::new();
            for (f, w) in fields {
                let s = self.fields.len() as u32;
                self.fields.push((format!("{name}.{f}"), *w, h));
                self.slots.insert(format!("{name}.{f}"), s);
                fs.push(s);
            }
            let max_bits: u32 = fields.iter().map(|f| f.1).sum::<u32>() + 64;
            self.headers.push(json!({"name": name, "valid": valid, "fields": fs, "metadata": metadata, "max_bits": max_bits}));
            self.hidx.insert(name.to_string(), h as u32);
            h as u32
        }
        pub fn s(&self, name: &str) -> u32 {
            self.slots[name]
        }
        pub fn h(&self, name: &str) -> u32 {
            self.hidx[name]
        }
        pub fn f(&self, name: &str) -> Value {
            json!(["f", self.s(name)])
        }
        /// A description: `rest` gives parser, actions, nodes, pipelines, ... (defaults: empty).
        pub fn build(&self, rest: Value) -> Description {
            let mut d = json!({
                "format": FORMAT, "version": VERSION, "fields": self.fields, "headers": self.headers,
                "errors": {"names": {"0": "NoError", "1": "PacketTooShort", "2": "NoMatch", "3": "StackOutOfBounds", "4": "HeaderTooShort", "5": "ParserTimeout"},
                           "PacketTooShort": 1, "NoMatch": 2, "StackOutOfBounds": 3, "HeaderTooShort": 4, "ParserTimeout": 5},
                "std": {"ingress_port": self.s("standard_metadata.ingress_port"), "packet_length": self.s("standard_metadata.packet_length"),
                        "parser_error": self.s("standard_metadata.parser_error"), "egress_spec": self.s("standard_metadata.egress_spec"),
                        "egress_port": self.s("standard_metadata.egress_port"), "mcast_grp": self.s("standard_metadata.mcast_grp")},
                "parser": {"init": -1, "states": []}, "actions": [], "nodes": [], "pipelines": [], "keyed": []
            });
            for (k, v) in rest.as_object().unwrap() {
                d[k] = v.clone();
            }
            serde_json::from_value(d).unwrap()
        }
    }

    pub fn state(name: &str, ops: Value, key: Value, transitions: Value, default: Value) -> Value {
        json!({"name": name, "ops": ops, "key": key, "transitions": transitions, "default": default, "reject": null})
    }

    /// Runs `frames`; per packet (visits as (table, entry, action, key), outcome, output bytes).
    pub fn run(ex: &mut Executor, frames: &[Vec<u8>]) -> Vec<(Vec<(u16, i32, u32, Vec<u32>)>, Outcome, Option<Vec<u8>>)> {
        let mut v = Visits::new();
        let mut o = Outputs::new();
        frames
            .iter()
            .map(|f| {
                v.clear();
                o.clear();
                let out = ex.run(f, 3, 0, &mut v, Some(&mut o));
                let visits = (0..v.len()).map(|i| (v.table[i], v.entry[i], v.action[i], v.key(i).to_vec())).collect();
                (visits, out, (!o.is_empty()).then(|| o.packet(0).to_vec()))
            })
            .collect()
    }

    /// Ethernet-like and IPv4-like headers, a parser selecting on the type.
    fn eth_ip() -> B {
        let mut b = B::new();
        b.header("eth", &[("dst", 48), ("src", 48), ("type", 16)], false);
        b.header("ip", &[("ver", 4), ("ihl", 4), ("tos", 8), ("ttl", 8), ("proto", 8), ("dst", 32)], false);
        b
    }

    fn eth_ip_parser(b: &B) -> Value {
        json!({"init": 0, "states": [
            state("start", json!([["extract", b.h("eth")]]), json!([["f", b.s("eth.type"), 16]]), json!([["0x800", "0xffff", 1]]), json!(-1)),
            state("ip", json!([["extract", b.h("ip")], ["verify", ["==", b.f("ip.ver"), ["c", "0x4"]], ["c", "0x7"]]]), json!([]), json!([]), json!(-1)),
        ]})
    }

    fn frame(ty: u16, ip: &[u8], payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0xaa; 6];
        f.extend([0xbb; 6]);
        f.extend(ty.to_be_bytes());
        f.extend(ip);
        f.extend(payload);
        f
    }

    #[test]
    fn extracts_selects_and_emits_the_frame_unchanged_and_patched() {
        let b = eth_ip();
        // one action: ttl - 1 (p4c's masked form), and the lookup of an exact table on ip.dst
        let d = b.build(json!({
            "parser": eth_ip_parser(&b),
            "actions": [{"name": "dec", "id": 0, "params": [], "ops": [["set", b.s("ip.ttl"), ["&", ["+", b.f("ip.ttl"), ["c", "0xff"]], ["c", "0xff"]]]]},
                        {"name": "fwd", "id": 1, "params": [9], "ops": [["set", b.s("standard_metadata.egress_spec"), ["p", 0]]]}],
            "nodes": [{"kind": "table", "name": "t", "keyed": 0, "key": [{"slot": b.s("ip.dst"), "width": 32, "match": "exact", "valid": b.s("ip.$valid$"), "mask": null, "name": "ip.dst"}],
                       "entries": [{"m": [["0xa000001", "0xa000001", "0xffffffff"]], "a": 1, "d": ["0x5"]}],
                       "default": {"a": 0, "d": []}, "next": {"actions": {}, "base": -1}}],
            "pipelines": [{"name": "ingress", "init": 0}],
            "deparser": [b.h("eth"), b.h("ip")], "keyed": [0]
        }));
        let mut ex = Executor::new(Program::link(&d).unwrap());
        let ip_hit = [0x45, 0, 64, 17, 10, 0, 0, 1];
        let ip_miss = [0x45, 0, 64, 17, 10, 0, 0, 2];
        let arp = frame(0x806, &[1, 2, 3], b"");
        let out = run(&mut ex, &[frame(0x800, &ip_hit, b"xyz"), frame(0x800, &ip_miss, b"xyz"), arp.clone()]);
        // a hit forwards to port 5, frame unchanged (headers copied, then the payload)
        assert_eq!(out[0].0, vec![(0, 0, 1, vec![0x0a00_0001])]);
        assert_eq!(out[0].2.as_deref(), Some(&frame(0x800, &ip_hit, b"xyz")[..]));
        // a miss runs the default: ttl 64 -> 63, the only byte patched
        assert_eq!(out[1].0, vec![(0, -1, 0, vec![0x0a00_0002])]);
        assert_eq!(out[1].2.as_deref(), Some(&frame(0x800, &[0x45, 0, 63, 17, 10, 0, 0, 2], b"xyz")[..]));
        // not IPv4: the key of an invalid header is 0; the frame is its own payload after eth
        assert_eq!(out[2].0, vec![(0, -1, 0, vec![0])]);
        assert_eq!(out[2].2.as_deref(), Some(&arp[..]));
        assert_eq!(ex.field(b.s("standard_metadata.packet_length") as usize), arp.len() as u128);
        assert_eq!(ex.field(b.s("standard_metadata.ingress_port") as usize), 3);
    }

    #[test]
    fn set_valid_on_a_valid_header_keeps_its_bytes_and_invalid_headers_are_not_emitted() {
        let b = eth_ip();
        let d = b.build(json!({
            "parser": eth_ip_parser(&b),
            "actions": [{"name": "a", "id": 0, "params": [], "ops": [["valid", b.h("eth"), 1], ["valid", b.h("ip"), 0]]}],
            "nodes": [{"kind": "table", "name": "t", "keyed": null, "key": [], "entries": [], "default": {"a": 0, "d": []}, "next": {"actions": {}, "base": -1}}],
            "pipelines": [{"name": "ingress", "init": 0}], "deparser": [b.h("eth"), b.h("ip")]
        }));
        let mut ex = Executor::new(Program::link(&d).unwrap());
        // eth.src is read by nothing (not extracted), yet emitted from the frame's bytes; ip removed
        let out = run(&mut ex, &[frame(0x800, &[0x45, 0, 64, 17, 10, 0, 0, 1], b"pl")]);
        let mut want = frame(0x800, &[], b"");
        want.extend(b"pl");
        assert_eq!(out[0].2.as_deref(), Some(&want[..]));
    }

    #[test]
    fn a_rejected_packet_keeps_its_headers_and_runs_with_parser_error() {
        let b = eth_ip();
        let d = b.build(json!({"parser": eth_ip_parser(&b), "deparser": [b.h("eth"), b.h("ip")]}));
        let mut ex = Executor::new(Program::link(&d).unwrap());
        let out = run(&mut ex, &[frame(0x800, &[0x55, 0, 64, 17, 10, 0, 0, 1], b""), frame(0x800, &[0x45, 0, 64], b""), vec![1, 2, 3]]);
        // verify fails (version 5): error 7 from the program; ip stays extracted
        assert_eq!(out[0].1.parser_error, 7);
        assert_eq!(ex.prog.error_names.get(&7), None);
        assert_eq!(out[0].2.as_ref().unwrap().len(), 14 + 8);
        // too short for ip: PacketTooShort, ip invalid, eth kept and its bytes and the rest emitted
        assert_eq!(out[1].1.parser_error, 1);
        assert_eq!(out[1].2.as_ref().unwrap().len(), 14 + 3);
        // too short for eth: nothing extracted, the whole frame is payload
        assert_eq!(out[2].1.parser_error, 1);
        assert_eq!(out[2].2.as_deref(), Some(&[1u8, 2, 3][..]));
        assert!(!out[0].1.dropped);
    }

    #[test]
    fn a_loop_without_extract_times_out() {
        let b = eth_ip();
        let d = b.build(json!({"parser": {"init": 0, "states": [state("spin", json!([]), json!([]), json!([]), json!(0))]}}));
        let mut ex = Executor::new(Program::link(&d).unwrap());
        assert_eq!(run(&mut ex, &[vec![0; 20]])[0].1.parser_error, 5);
    }

    #[test]
    fn exit_ends_the_pipeline_and_a_drop_in_ingress_skips_egress() {
        let b = eth_ip();
        let m = |x: &str| b.s(&format!("meta.{x}"));
        let d = b.build(json!({
            "actions": [{"name": "mark_a", "id": 0, "params": [], "ops": [["set", m("a"), ["c", "0x1"]], ["exit"], ["set", m("b"), ["c", "0x1"]]]},
                        {"name": "mark_c", "id": 1, "params": [], "ops": [["set", m("c"), ["+", ["f", m("c")], ["c", "0x1"]]]]},
                        {"name": "drop", "id": 2, "params": [], "ops": [["drop"]]}],
            "nodes": [{"kind": "table", "name": "t0", "keyed": null, "key": [], "entries": [], "default": {"a": 0, "d": []}, "next": {"actions": {}, "base": 1}},
                      {"kind": "table", "name": "t1", "keyed": null, "key": [], "entries": [], "default": {"a": 1, "d": []}, "next": {"actions": {}, "base": -1}},
                      {"kind": "cond", "name": "c", "label": "c", "expr": ["==", ["f", m("a")], ["c", "0x1"]], "true": 4, "false": 1},
                      {"kind": "table", "name": "e0", "keyed": null, "key": [], "entries": [], "default": {"a": 1, "d": []}, "next": {"actions": {}, "base": -1}},
                      {"kind": "table", "name": "d0", "keyed": null, "key": [], "entries": [], "default": {"a": 2, "d": []}, "next": {"actions": {}, "base": -1}}],
            "pipelines": [{"name": "ingress", "init": 0}, {"name": "egress", "init": 3}]
        }));
        let mut ex = Executor::new(Program::link(&d).unwrap());
        run(&mut ex, &[vec![0; 4]]);
        // exit skipped the rest of mark_a and t1; egress ran
        assert_eq!((ex.field(m("a") as usize), ex.field(m("b") as usize), ex.field(m("c") as usize)), (1, 0, 1));
        // a program whose ingress drops: egress does not run
        let mut d2 = d.clone();
        d2.pipelines[0].init = 4;
        let mut ex = Executor::new(Program::link(&d2).unwrap());
        let out = run(&mut ex, &[vec![0; 4]]);
        assert!(out[0].1.dropped && out[0].2.is_none());
        assert_eq!(ex.field(m("c") as usize), 0);
        assert_eq!(ex.field(b.s("standard_metadata.egress_spec") as usize), 511);
    }

    #[test]
    fn stacks_extract_in_order_then_push_and_pop_shift_them() {
        let mut b = B::new();
        b.header("t0", &[("v", 8)], false);
        b.header("t1", &[("v", 8)], false);
        b.header("t2", &[("v", 8)], false);
        let next = b.fields.len() as u32;
        b.fields.push(("s.$next$".into(), 32, -1));
        let stack = json!([{"name": "s", "headers": [b.h("t0"), b.h("t1"), b.h("t2")], "next": next}]);
        // extract elements while the last one's value is odd; then run `ops`
        let prog = |ops: Value| {
            b.build(json!({
                "stacks": stack,
                "parser": {"init": 0, "states": [state("s", json!([["extract_stack", 0]]), json!([["sf", 0, 0, 8]]), json!([["0x1", "0x1", 0]]), json!(-1))]},
                "actions": [{"name": "a", "id": 0, "params": [], "ops": ops}],
                "nodes": [{"kind": "table", "name": "t", "keyed": null, "key": [], "entries": [], "default": {"a": 0, "d": []}, "next": {"actions": {}, "base": -1}}],
                "pipelines": [{"name": "ingress", "init": 0}], "deparser": [b.h("t0"), b.h("t1"), b.h("t2")]
            }))
        };
        let mut ex = Executor::new(Program::link(&prog(json!([]))).unwrap());
        let out = run(&mut ex, &[vec![1, 3, 4, 9], vec![1, 3, 5, 7]]);
        assert_eq!(out[0].2.as_deref(), Some(&[1u8, 3, 4, 9][..]));
        assert_eq!(ex.field(next as usize), 3);
        // a fourth element does not fit
        assert_eq!(out[1].1.parser_error, 3);
        // pop 1: t0 <- t1, t1 <- t2, t2 invalid; push 1 (P4_14): t0 new (valid, 0)
        let mut ex = Executor::new(Program::link(&prog(json!([["pop", 0, 1]]))).unwrap());
        assert_eq!(run(&mut ex, &[vec![1, 3, 4, 9]])[0].2.as_deref(), Some(&[3u8, 4, 9][..]));
        assert_eq!(ex.field(next as usize), 2);
        let mut ex = Executor::new(Program::link(&prog(json!([["push", 0, 1, 0]]))).unwrap());
        assert_eq!(run(&mut ex, &[vec![1, 4, 9]])[0].2.as_deref(), Some(&[0u8, 1, 4, 9][..]));
        // push_front leaves the new element invalid
        let mut ex = Executor::new(Program::link(&prog(json!([["push", 0, 1, 1]]))).unwrap());
        assert_eq!(run(&mut ex, &[vec![1, 4, 9]])[0].2.as_deref(), Some(&[1u8, 4, 9][..]));
    }

    #[test]
    fn set_valid_zeroes_and_a_union_keeps_one_member() {
        let mut b = B::new();
        b.header("x", &[("v", 8)], false);
        b.header("y", &[("w", 16)], false);
        let mut d = b.build(json!({
            "unions": [{"name": "u", "headers": [b.h("x"), b.h("y")]}],
            "parser": {"init": 0, "states": [state("s", json!([["extract", b.h("x")]]), json!([]), json!([]), json!(-1))]},
            "actions": [{"name": "a", "id": 0, "params": [], "ops": [["valid", b.h("y"), 1], ["set", b.s("y.w"), ["c", "0xbeef"]],
                         ["set", b.s("meta.a"), ["b2d", ["vu", 0]]]]}],
            "nodes": [{"kind": "table", "name": "t", "keyed": null, "key": [], "entries": [], "default": {"a": 0, "d": []}, "next": {"actions": {}, "base": -1}}],
            "pipelines": [{"name": "ingress", "init": 0}], "deparser": [b.h("x"), b.h("y")]
        }));
        d.headers[b.h("x") as usize].union = Some(0);
        d.headers[b.h("y") as usize].union = Some(0);
        let mut ex = Executor::new(Program::link(&d).unwrap());
        // y became valid: x (the other member) invalid; y emitted, x not
        assert_eq!(run(&mut ex, &[vec![7, 1, 2]])[0].2.as_deref(), Some(&[0xbe, 0xef, 1, 2][..]));
        assert_eq!(ex.field(b.s("meta.a") as usize), 1);
    }

    #[test]
    fn varbit_fields_extract_by_length_and_emit_as_read() {
        let mut b = B::new();
        b.header("o", &[("len", 8), ("opts", 0)], false);
        let mut d = b.build(json!({
            "parser": {"init": 0, "states": [
                state("l", json!([["extract_vl", 0, ["<<", ["la", 0, 8], ["c", "0x3"]]]]), json!([]), json!([]), json!(-1))]},
            "deparser": [0]
        }));
        d.headers[0].max_bits = Some(8 + 64);
        d.parser.states[0].ops = vec![json!(["extract_vl", b.h("o"), ["<<", ["la", 0, 8], ["c", "0x3"]]])];
        d.deparser = vec![b.h("o")];
        let mut ex = Executor::new(Program::link(&d).unwrap());
        let out = run(&mut ex, &[vec![2, 0xa, 0xb, 0xc], [vec![9], vec![0; 20]].concat(), vec![3, 1]]);
        // len 2: two bytes of options, then the payload
        assert_eq!(out[0].2.as_deref(), Some(&[2u8, 0xa, 0xb, 0xc][..]));
        assert_eq!(out[0].1.parser_error, 0);
        // 9 bytes do not fit in 64 bits of options: HeaderTooShort
        assert_eq!(out[1].1.parser_error, 4);
        // 3 bytes announced, 1 present: PacketTooShort
        assert_eq!(out[2].1.parser_error, 1);
    }

    #[test]
    fn a_synthesized_key_makes_the_packet_inexact_from_that_visit() {
        let b = eth_ip();
        let m = |x: &str| b.s(&format!("meta.{x}"));
        let key = |s: u32| json!([{"slot": s, "width": 16, "match": "exact", "valid": null, "mask": null, "name": "k"}]);
        let d = b.build(json!({
            "actions": [{"name": "hash", "id": 0, "params": [], "ops": [["extern", "my_extern", [["f", m("a")], ["n", "calculation", "h"]]],
                                                                        ["set", m("b"), ["&", ["f", m("a")], ["c", "0xff"]]]]}],
            "nodes": [{"kind": "table", "name": "t0", "keyed": 0, "key": key(m("c")), "entries": [], "default": {"a": 0, "d": []}, "next": {"actions": {}, "base": 1}},
                      {"kind": "table", "name": "t1", "keyed": 1, "key": key(m("b")), "entries": [], "default": null, "next": {"actions": {}, "base": -1}}],
            "pipelines": [{"name": "ingress", "init": 0}], "keyed": [0, 1]
        }));
        let mut ex = Executor::new(Program::link(&d).unwrap());
        let out = run(&mut ex, &[vec![0; 4]]);
        assert_eq!(out[0].0.len(), 2);
        // t0 was exact; t1 keys on b, copied from the unknown extern's output
        assert_eq!(ex.exact_visits(), 1);
        assert_eq!(ex.inexact_reason(), Some("synthesized field: k"));
        let ev: std::collections::BTreeMap<_, _> = ex.events().into_iter().collect();
        assert_eq!(ev.get("unsupported extern my_extern"), Some(&1));
    }

    #[test]
    fn malformed_descriptions_name_the_place() {
        let b = eth_ip();
        let bad = |rest: Value| Program::link(&b.build(rest)).unwrap_err();
        let e = bad(json!({"actions": [{"name": "act", "id": 0, "params": [], "ops": [["set", 999, ["c", "0x1"]]]}]}));
        assert!(e.contains("action act: primitive 0") && e.contains("999"), "{e}");
        let e = bad(json!({"actions": [{"name": "act", "id": 0, "params": [], "ops": [["set", 2, ["frobnicate", ["c", "0x1"]]]]}]}));
        assert!(e.contains("action act: primitive 0") && e.contains("frobnicate"), "{e}");
        let e = bad(json!({"parser": {"init": 0, "states": [state("st", json!([["extract", 99]]), json!([]), json!([]), json!(-1))]}}));
        assert!(e.contains("parser state st") && e.contains("header index"), "{e}");
        let e = bad(json!({"nodes": [{"kind": "table", "name": "tb", "keyed": 0, "key": [], "entries": [], "default": {"a": 3, "d": []}, "next": {"actions": {}, "base": -1}}], "keyed": [0]}));
        assert!(e.contains("table tb: default action") && e.contains("action index"), "{e}");
        assert!(Program::from_json("{\"format\": 1}").unwrap_err().starts_with("program description:"));
        assert!(Program::from_json(&serde_json::to_string(&json!({"format": "x"})).unwrap()).is_err());
    }

    /// An add-on-miss table (`learn.rs`): a miss learns the packet's key
    /// with its TTL as action data; the next packet hits it and reads that
    /// data; hits restart the 10 µs timer; past it the entry is gone and
    /// is learned again under a new number. The write log has each add
    /// and expiry at its packet's time.
    #[test]
    fn an_add_on_miss_table_learns_ages_and_logs() {
        let b = eth_ip();
        let table = |extra: Value| {
            let mut t = json!({"kind": "table", "name": "flows", "keyed": 0,
                "key": [{"slot": b.s("ip.dst"), "width": 32, "match": "exact", "valid": b.s("ip.$valid$"), "mask": null, "shift": 0, "name": "ip.dst"}],
                "entries": [], "default": {"a": 1, "d": []}, "next": {"hit": -1, "miss": -1},
                "add_on_miss": {"profiles_us": [10], "max_size": 2}});
            for (k, v) in extra.as_object().unwrap() {
                t[k] = v.clone();
            }
            t
        };
        let desc = |t: Value| b.build(json!({
            "parser": eth_ip_parser(&b),
            "actions": [
                {"name": "hit", "id": 0, "params": [16], "ops": [["set", b.s("meta.a"), ["p", 0]], ["extern", "restart_expire_timer", []]]},
                {"name": "learn", "id": 1, "params": [], "ops": [["extern", "add_entry", [["n", "string", "hit"], ["f", b.s("ip.ttl")], ["e", ["c", "0x0"]]]]]}],
            "nodes": [t], "pipelines": [{"name": "ingress", "init": 0}], "keyed": [0]}));
        let mut ex = Executor::new(Program::link(&desc(table(json!({})))).unwrap());
        ex.log_writes();
        let ip = |ttl: u8, dst: u8| frame(0x800, &[0x45, 0, ttl, 6, 10, 0, 0, dst], &[]);
        let mut got = Vec::new();
        for (t_us, ttl, dst) in [(0u64, 5u8, 1u8), (5, 9, 1), (14, 9, 1), (24, 9, 1), (30, 7, 2), (31, 8, 3), (32, 8, 4)] {
            let mut v = Visits::new();
            ex.run(&ip(ttl, dst), 0, t_us * 1_000_000, &mut v, None);
            got.push((v.entry[0], ex.field(b.s("meta.a") as usize)));
        }
        // t=5, 14: hits on entry 0 (data: the TTL 5 of the packet that learned it); each restarts
        // the timer (expiry 15, then 24); t=24: gone, learned again as entry 1 (TTL 9); dst 2 and 3
        // are new; max_size 2: dst 3 is not learned, and dst 4 neither (the table holds 1 and 2)
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![-1, 0, 0, -1, -1, -1, -1]);
        assert_eq!((got[1].1, got[2].1), (5, 5));
        let w = ex.take_writes();
        let log: Vec<_> = w.iter().map(|w| (w.t_us, w.add, w.number, w.key.to_vec())).collect();
        assert_eq!(log, vec![(0, true, 0, vec![10 << 24 | 1]), (24, false, 0, vec![10 << 24 | 1]), (24, true, 1, vec![10 << 24 | 1]),
                             (30, true, 2, vec![10 << 24 | 2])]);
        let s = &ex.learn_stats()[0];
        assert_eq!((s.1.adds, s.1.expired, s.1.full, s.1.restarts, s.2), (3, 1, 2, 2, 2));
        // an add-on-miss table keys on exact fields only
        let mut bad = table(json!({}));
        bad["key"][0]["match"] = json!("ternary");
        assert!(Program::link(&desc(bad)).unwrap_err().contains("exact keys only"));
        assert!(Program::link(&desc(table(json!({"add_on_miss": {"profiles_us": [], "max_size": 2}})))).unwrap_err().contains("profile"));
    }
}

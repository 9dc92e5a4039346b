//! Actions: each primitive compiled once into an [`Op`] over PHV cells
//! (the common assignments — a constant, a field, an action parameter —
//! get their own op; anything else evaluates its [`Expr`]), and the loop
//! that runs an action's ops for one packet.
//!
//! Semantics follow BMv2 as the interpreter (`synapse_vmt.p4.exprs`) runs
//! it: an assignment truncates to the destination's width; `setValid` on
//! an invalid header zeroes its fields (BMv2's `add_header`) and
//! invalidates the other members of its union; `setInvalid` clears the
//! validity bit only (the fields keep their values); `assign_header`
//! copies validity and fields; `push`/`pop` shift a stack's elements (the
//! new elements of a P4_14 `push` are valid and zeroed, of `push_front`
//! invalid); `mark_to_drop` sets `egress_spec` to 511 and `mcast_grp` to 0;
//! `exit` ends the pipeline; `_jump`/`_jump_if_zero` jump to a primitive.

use serde_json::Value;

use super::exec::{scope, Linker, Program, State};
use super::expr::Scope;
use super::expr::{Code, Env, Expr, Ins};
use super::externs::Extern;
use super::phv::mask;

/// BMv2 simple_switch's drop port: `mark_to_drop` sets `egress_spec` to it.
pub const DROP_PORT: u128 = 511;

/// Where an assignment writes: the cell, its reset group, and for a field
/// of a packet header the header and the field's bit in its dirty mask
/// (0: the whole header is re-assembled; see the deparser).
#[derive(Clone, Copy, Debug)]
pub struct Dst {
    pub cell: u32,
    pub group: u32,
    pub hdr: u32,
    pub fbit: u64,
}

/// One compiled primitive.
#[derive(Clone, Debug)]
pub enum Op {
    SetConst { dst: Dst, v: u128 },
    Copy { dst: Dst, src: u32, mask: u128 },
    SetParam { dst: Dst, param: u32, mask: u128 },
    Set { dst: Dst, mask: u128, e: Expr },
    /// A field wider than 128 bits copied from one of the same width.
    SetWide { dst: Dst, src: u32, n: u32 },
    /// After an assignment: the destination's taint is its reads' (slots in `reads`).
    Taint { slot: u32, reads: (u32, u32) },
    /// The field's value cannot be computed: marked synthesized, left as it was.
    Synth { slot: u32, reason: u32 },
    Valid { h: u32, on: bool },
    /// `frame`: the two headers have one layout, so `dst` may be emitted
    /// from the frame bytes `src` was extracted from (see [`hdr_copy`]).
    HdrCopy { dst: u32, src: u32, frame: bool },
    Push { stack: u32, n: u32, front: bool },
    Pop { stack: u32, n: u32 },
    Drop,
    Exit,
    Jump(u32),
    JumpZero { e: Expr, to: u32 },
    Extern(u32),
    /// A primitive the compiler could not lower: counted, no effect.
    Unsupported(u32),
    /// A run of plain assignments (`SetConst`, `Copy`, `SetParam`) fused at
    /// link into one op: one dispatch for the run, then a loop over
    /// pre-decoded [`Move`]s (see [`fuse_moves`]).
    Moves(Box<Fused>),
    /// `setValid` of a header outside a union with the constant assignments
    /// to its fields that follow it (see [`templates`]).
    Build(Box<Build>),
}

/// A header built from constants: `setValid(h)` then assignments of
/// constants to its fields, planned at link. On an invalid header its
/// cells are written from `template` (zeros and the constants) in one copy,
/// not zeroed then written field by field; on a valid one (setValid does
/// nothing) only the constants are written.
#[derive(Clone, Debug)]
pub struct Build {
    pub h: u32,
    pub template: Box<[u128]>,
    /// The constant assignments, as a run (their writes and marks).
    pub consts: Fused,
}

/// `ops` with each `setValid(h)` (h outside a union) followed, before any
/// op other than an assignment, by constant assignments to h's fields
/// turned into an [`Op::Build`] that holds them. An assignment is lifted
/// only when no op between the setValid and it reads or writes its field,
/// so the values every op sees are unchanged.
pub fn templates(ops: Vec<Op>, headers: &[super::exec::Hdr], code: &Code) -> Vec<Op> {
    if ops.iter().any(|o| matches!(o, Op::Jump(_) | Op::JumpZero { .. })) {
        return ops;
    }
    let mut out: Vec<Op> = Vec::with_capacity(ops.len());
    let mut it = ops.into_iter().peekable();
    while let Some(op) = it.next() {
        let Op::Valid { h, on: true } = op else {
            out.push(op);
            continue;
        };
        let hd = &headers[h as usize];
        let (lo, hi) = hd.cells;
        if hd.union.is_some() || hi - lo > 64 {
            out.push(op);
            continue;
        }
        let mut lifted: Vec<Move> = Vec::new();
        let mut after: Vec<Op> = Vec::new();
        // cells read or written since the setValid
        let mut touched: Vec<u32> = Vec::new();
        // A move lifted into the template (a constant to h's field that no
        // op since the setValid touched), else kept (true), what it touches noted.
        let mut keep = |m: Move, touched: &mut Vec<u32>| {
            if m.from == Src::Const && (lo..hi).contains(&m.dst.cell) && !touched.contains(&m.dst.cell) {
                lifted.push(m);
                return false;
            }
            if m.from == Src::Cell {
                touched.push(m.src);
            }
            touched.push(m.dst.cell);
            true
        };
        while let Some(next) = it.peek() {
            match next {
                Op::SetConst { .. } | Op::Copy { .. } | Op::SetParam { .. } => {
                    if keep(Move::of(next).unwrap(), &mut touched) {
                        after.push(next.clone());
                    }
                }
                Op::Moves(f) => {
                    let kept: Vec<Move> = f.moves.iter().copied().filter(|&m| keep(m, &mut touched)).collect();
                    match kept.len() {
                        0 => {}
                        1 => after.push(kept[0].op()),
                        _ => after.push(Op::Moves(Box::new(Fused::of(kept.into())))),
                    }
                }
                Op::Set { dst, e, .. } => {
                    let mut reads = Vec::new();
                    let known = code.ins[e.start as usize..e.end as usize].iter().all(|i| match *i {
                        Ins::Field(c) | Ins::CmpFC(c, _) => {
                            reads.push(c);
                            true
                        }
                        Ins::StackField(_) | Ins::ValidUnion(_) | Ins::LastIndex(_) | Ins::Size(_) | Ins::Look(..) => false,
                        _ => true,
                    });
                    if !known {
                        break;
                    }
                    touched.extend(reads);
                    touched.push(dst.cell);
                    after.push(next.clone());
                }
                _ => break,
            }
            it.next();
        }
        if lifted.is_empty() {
            out.push(op);
            out.append(&mut after);
            continue;
        }
        let mut template = vec![0u128; (hi - lo) as usize];
        for m in &lifted {
            template[(m.dst.cell - lo) as usize] = m.v;
        }
        out.push(Op::Build(Box::new(Build { h, template: template.into(), consts: Fused::of(lifted.into()) })));
        out.append(&mut after);
    }
    out
}

/// A fused run: its moves, then what their writes mark, gathered at link
/// (the marks are read only after the action, so once per run is the same
/// as once per move).
#[derive(Clone, Debug)]
pub struct Fused {
    pub moves: Box<[Move]>,
    /// Words of the PHV's dirty set and the group bits to set in each.
    pub groups: Box<[(u32, u64)]>,
    /// Packet headers written: (header, written whole, field bits).
    pub hdrs: Box<[(u32, bool, u64)]>,
    /// When no move reads a cell the run writes and none writes a cell
    /// twice, the order does not matter: the moves by kind, each kind one
    /// loop without a branch per move.
    pub split: Option<Split>,
}

/// A [`Fused`] run's moves by kind: constants, cell copies, action data.
#[derive(Clone, Debug)]
pub struct Split {
    pub consts: Box<[(u32, u128)]>,
    pub copies: Box<[(u32, u32, u128)]>,
    pub params: Box<[(u32, u32, u128)]>,
}

impl Fused {
    fn of(moves: Box<[Move]>) -> Fused {
        let mut groups: Vec<(u32, u64)> = Vec::new();
        let mut hdrs: Vec<(u32, bool, u64)> = Vec::new();
        for m in moves.iter() {
            let (w, b) = (m.dst.group >> 6, 1u64 << (m.dst.group & 63));
            match groups.iter_mut().find(|g| g.0 == w) {
                Some(g) => g.1 |= b,
                None => groups.push((w, b)),
            }
            if m.dst.hdr != super::exec::NONE {
                let i = match hdrs.iter().position(|h| h.0 == m.dst.hdr) {
                    Some(i) => i,
                    None => {
                        hdrs.push((m.dst.hdr, false, 0));
                        hdrs.len() - 1
                    }
                };
                if m.dst.fbit == 0 {
                    hdrs[i].1 = true;
                } else {
                    hdrs[i].2 |= m.dst.fbit;
                }
            }
        }
        let dsts: Vec<u32> = moves.iter().map(|m| m.dst.cell).collect();
        let once = dsts.iter().enumerate().all(|(i, d)| !dsts[..i].contains(d));
        let free = moves.iter().all(|m| m.from != Src::Cell || !dsts.contains(&m.src));
        let split = (once && free).then(|| {
            let of = |k: Src| moves.iter().filter(move |m| m.from == k);
            Split {
                consts: of(Src::Const).map(|m| (m.dst.cell, m.v)).collect(),
                copies: of(Src::Cell).map(|m| (m.dst.cell, m.src, m.v)).collect(),
                params: of(Src::Param).map(|m| (m.dst.cell, m.src, m.v)).collect(),
            }
        });
        Fused { moves, groups: groups.into(), hdrs: hdrs.into(), split }
    }

    /// The moves' writes to `cells`, as the ops they replace make them in order.
    #[inline(always)]
    pub fn apply(&self, cells: &mut [u128], params: &[u128]) {
        match &self.split {
            Some(s) => {
                for &(d, v) in s.consts.iter() {
                    cells[d as usize] = v;
                }
                for &(d, src, m) in s.copies.iter() {
                    cells[d as usize] = cells[src as usize] & m;
                }
                for &(d, p, m) in s.params.iter() {
                    cells[d as usize] = params[p as usize] & m;
                }
            }
            None => {
                for m in self.moves.iter() {
                    let v = m.value(cells, params);
                    cells[m.dst.cell as usize] = v;
                }
            }
        }
    }

    /// Runs the moves, then marks what they wrote (as `State::wrote` per move would).
    #[inline(always)]
    pub fn run(&self, params: &[u128], st: &mut State) {
        self.apply(&mut st.phv.cells, params);
        self.mark(st);
    }

    /// Marks what the moves write.
    #[inline(always)]
    pub fn mark(&self, st: &mut State) {
        for &(w, b) in self.groups.iter() {
            st.phv.mark_word(w, b);
        }
        for &(h, whole, bits) in self.hdrs.iter() {
            if whole {
                st.hdr_src[h as usize] = super::exec::NONE;
            }
            st.fdirty[h as usize] |= bits;
        }
    }
}

/// One plain assignment of an [`Op::Moves`] run: `cells[dst] = v` (a
/// constant), `cells[src] & v`, or `params[src] & v`.
#[derive(Clone, Copy, Debug)]
pub struct Move {
    pub v: u128,
    pub dst: Dst,
    pub src: u32,
    pub from: Src,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Src {
    Const,
    Cell,
    Param,
}

impl Move {
    fn of(op: &Op) -> Option<Move> {
        match *op {
            Op::SetConst { dst, v } => Some(Move { v, dst, src: 0, from: Src::Const }),
            Op::Copy { dst, src, mask } => Some(Move { v: mask, dst, src, from: Src::Cell }),
            Op::SetParam { dst, param, mask } => Some(Move { v: mask, dst, src: param, from: Src::Param }),
            _ => None,
        }
    }

    /// The op it came from.
    fn op(&self) -> Op {
        let (dst, v, src) = (self.dst, self.v, self.src);
        match self.from {
            Src::Const => Op::SetConst { dst, v },
            Src::Cell => Op::Copy { dst, src, mask: v },
            Src::Param => Op::SetParam { dst, param: src, mask: v },
        }
    }

    /// Its value, read before it is written (as the op it came from reads it).
    #[inline(always)]
    pub fn value(&self, cells: &[u128], params: &[u128]) -> u128 {
        match self.from {
            Src::Const => self.v,
            Src::Cell => cells[self.src as usize] & self.v,
            Src::Param => params[self.src as usize] & self.v,
        }
    }
}

/// `ops` with every run of two or more plain assignments replaced by one
/// [`Op::Moves`] (same order, so a later move reads what an earlier one
/// wrote). Ops with jumps are left as they are: their targets are op indices.
pub fn fuse_moves(ops: Vec<Op>) -> Vec<Op> {
    if ops.iter().any(|o| matches!(o, Op::Jump(_) | Op::JumpZero { .. })) {
        return ops;
    }
    let mut out = Vec::with_capacity(ops.len());
    // the current run of plain assignments, as they came
    let mut run: Vec<Op> = Vec::new();
    let flush = |run: &mut Vec<Op>, out: &mut Vec<Op>| {
        if run.len() > 1 {
            out.push(Op::Moves(Box::new(Fused::of(run.iter().filter_map(Move::of).collect()))));
            run.clear();
        } else {
            out.append(run);
        }
    };
    for op in ops {
        if Move::of(&op).is_none() {
            flush(&mut run, &mut out);
            out.push(op);
        } else {
            run.push(op);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// An action: its name and its ops.
#[derive(Clone, Debug)]
pub struct Action {
    pub name: String,
    pub params: Vec<u32>,
    pub ops: Vec<Op>,
}

impl Linker<'_> {
    /// Compiles one op (`["set", slot, expr]`, ...); `params`: the action's
    /// parameter widths (None in the parser); `what` names the place.
    pub fn op(&mut self, v: &Value, params: Option<&[u32]>, parser: bool, what: &str, out: &mut Vec<Op>) -> Result<(), String> {
        let bad = || format!("{what}: expected an op array, found {v}");
        let a = v.as_array().ok_or_else(bad)?;
        let tag = a.first().and_then(|x| x.as_str()).ok_or_else(bad)?;
        let int = |i: usize| a.get(i).and_then(|x| x.as_u64()).ok_or_else(|| format!("{what}: {tag}: expected an integer operand {i}"));
        match tag {
            "set" => {
                let s = self.lay.slot(int(1)?, what)?;
                let tree = a.get(2).ok_or_else(bad)?;
                let dst = self.dst(s);
                let w = self.lay.width[s];
                if self.lay.varbit[s] {
                    return Err(format!("{what}: assignment to varbit field {} is not supported", self.lay.names[s]));
                }
                if self.lay.limbs[s] > 1 {
                    // only a copy from a field of the same width
                    let src = tree.as_array().filter(|t| t.first().and_then(|x| x.as_str()) == Some("f")).and_then(|t| t.get(1)?.as_u64());
                    match src.map(|x| x as usize).filter(|&x| x < self.lay.width.len() && self.lay.width[x] == w && !self.lay.varbit[x]) {
                        Some(src) => out.push(Op::SetWide { dst, src: self.lay.cell[src], n: self.lay.limbs[s] }),
                        None => {
                            let r = self.code.reasons.id(&format!("{what}: assignment to field {} wider than 128 bits", self.lay.names[s]));
                            out.push(Op::Synth { slot: s as u32, reason: r });
                        }
                    }
                    return Ok(());
                }
                let sc = scope!(self, params, parser);
                let (e, b) = self.code.compile(tree, &sc, what)?;
                let e = e.for_bits(w);
                let m = mask(w);
                let op = match self.code.ins[e.start as usize..e.end as usize] {
                    [super::expr::Ins::Const(k)] => Op::SetConst { dst, v: self.code.consts[k as usize] & m },
                    [super::expr::Ins::Field(c)] => Op::Copy { dst, src: c, mask: if b.bits <= w { u128::MAX } else { m } },
                    [super::expr::Ins::Param(p)] => Op::SetParam { dst, param: p, mask: m },
                    _ => Op::Set { dst, mask: m, e },
                };
                out.push(op);
                self.taint_after(s as u32, tree, out);
            }
            "synth" => {
                let s = self.lay.slot(int(1)?, what)?;
                let why = a.get(2).and_then(|x| x.as_str()).unwrap_or("an expression it cannot evaluate");
                let r = self.code.reasons.id(&format!("unsupported: {why}"));
                out.push(Op::Synth { slot: s as u32, reason: r });
            }
            "unsupported" => {
                let why = a.get(1).and_then(|x| x.as_str()).unwrap_or("?");
                out.push(Op::Unsupported(self.code.reasons.id(&format!("unsupported: {why}"))));
            }
            "hdr_copy" => {
                let (d, s) = (self.header(int(1)?, what)?, self.header(int(2)?, what)?);
                if self.headers[d as usize].fields.len() != self.headers[s as usize].fields.len() {
                    return Err(format!("{what}: assign_header: expected headers of one type"));
                }
                let (dh, sh) = (&self.headers[d as usize], &self.headers[s as usize]);
                let io = |h: &super::exec::Hdr| h.fields.iter().map(|f| (f.bit, f.width)).collect::<Vec<_>>();
                let frame = dh.varbit_max == 0 && sh.varbit_max == 0 && dh.bytes == sh.bytes && io(dh) == io(sh);
                out.push(Op::HdrCopy { dst: d, src: s, frame });
            }
            "valid" => out.push(Op::Valid { h: self.header(int(1)?, what)?, on: int(2)? != 0 }),
            "drop" => out.push(Op::Drop),
            "exit" => out.push(Op::Exit),
            "push" | "pop" => {
                let st = int(1)? as u32;
                if st as usize >= self.stacks.len() {
                    return Err(format!("{what}: expected a header stack index, found {st}"));
                }
                let n = int(2)? as u32;
                out.push(if tag == "push" { Op::Push { stack: st, n, front: int(3)? != 0 } } else { Op::Pop { stack: st, n } });
            }
            "jump" => out.push(Op::Jump(int(1)? as u32)),
            "jz" => {
                let sc = scope!(self, params, parser);
                let e = self.code.compile_truth(a.get(1).ok_or_else(bad)?, &sc, what)?;
                out.push(Op::JumpZero { e, to: int(2)? as u32 });
            }
            "extern" => {
                let name = a.get(1).and_then(|x| x.as_str()).ok_or_else(bad)?;
                let raw = a.get(2).and_then(|x| x.as_array()).ok_or_else(bad)?;
                let sc = scope!(self, params, parser);
                let mut args = Vec::with_capacity(raw.len());
                for x in raw {
                    args.push(Extern::arg(x, &mut self.code, &sc, &format!("{what}: {name}"))?);
                }
                let _ = raw;
                let objs = std::mem::take(&mut self.objs);
                let ex = self.extern_call(name, &args, &objs);
                self.objs = objs;
                self.externs.push(ex?);
                out.push(Op::Extern(self.externs.len() as u32 - 1));
            }
            _ => return Err(format!("{what}: unknown op {tag:?}")),
        }
        Ok(())
    }

    /// An action's ops: one per primitive, so `_jump` targets are primitive indices.
    pub fn action(&mut self, name: &str, params: &[u32], ops: &[Value]) -> Result<Action, String> {
        let mut out = Vec::new();
        let mut at = Vec::with_capacity(ops.len() + 1); // primitive index -> op index
        for (i, v) in ops.iter().enumerate() {
            at.push(out.len() as u32);
            self.op(v, Some(params), false, &format!("action {name}: primitive {i}"), &mut out)?;
        }
        at.push(out.len() as u32);
        for op in out.iter_mut() {
            match op {
                Op::Jump(t) | Op::JumpZero { to: t, .. } => {
                    *t = *at.get(*t as usize).ok_or_else(|| format!("action {name}: expected a jump to a primitive below {}, found {t}", ops.len()))?;
                }
                _ => {}
            }
        }
        let ops = templates(fuse_moves(out), &self.headers, &self.code);
        Ok(Action { name: name.to_string(), params: params.to_vec(), ops })
    }
}

/// Runs `ops` with action data `params`; true when the action ran `exit`.
///
/// The assignments and jumps run here; every other op in [`run_other`],
/// out of line: inlined, its code made this function hoist a hundred loads
/// of the program's fields before the first op, on each of the ~30 calls
/// a packet makes (most run one to three ops).
pub fn run(ops: &[Op], params: &[u128], lk: &Program, st: &mut State, frame: &[u8]) -> bool {
    let mut pc = 0;
    while pc < ops.len() {
        let op = &ops[pc];
        pc += 1;
        match op {
            &Op::SetConst { dst, v } => {
                st.phv.cells[dst.cell as usize] = v;
                st.wrote(dst);
            }
            &Op::Copy { dst, src, mask } => {
                st.phv.cells[dst.cell as usize] = st.phv.cells[src as usize] & mask;
                st.wrote(dst);
            }
            &Op::SetParam { dst, param, mask } => {
                st.phv.cells[dst.cell as usize] = params[param as usize] & mask;
                st.wrote(dst);
            }
            Op::Moves(f) => f.run(params, st),
            &Op::Set { .. } if set_quick(op, params, st) => {}
            // frequent (a tunnel's headers), called straight: run_other's frame costs more than they do
            &Op::Valid { h, on } => valid(lk, st, h, on),
            Op::Build(b) => build(lk, st, b),
            &Op::HdrCopy { dst, src, frame } => hdr_copy(lk, st, dst, src, frame),
            Op::Exit => return true,
            &Op::Jump(t) => pc = t as usize,
            _ => {
                if run_other(op, &mut pc, params, lk, st, frame) {
                    return true;
                }
            }
        }
    }
    false
}

#[inline(never)]
fn valid(lk: &Program, st: &mut State, h: u32, on: bool) {
    lk.set_valid(st, h, on)
}

/// A [`Build`]: as `setValid` then its constants, written from the template.
#[inline(never)]
fn build(lk: &Program, st: &mut State, b: &Build) {
    let hd = &lk.headers[b.h as usize];
    if st.phv.cells[hd.valid as usize] == 0 {
        st.phv.cells[hd.cells.0 as usize..hd.cells.1 as usize].copy_from_slice(&b.template);
        st.phv.cells[hd.valid as usize] = 1;
        st.wrote_header(hd.group, b.h);
        lk.length_follows(st, hd, true);
    } else {
        b.consts.apply(&mut st.phv.cells, &[]);
    }
    b.consts.mark(st);
}

/// `assign_header`: validity and fields copied. With `frame` (one layout)
/// `dst` also takes `src`'s place in the frame and its written fields: the
/// deparser then emits it as it emits `src`, from the frame's bytes patched
/// with those fields (the tunnel's inner headers), not packed field by field.
#[inline(never)]
fn hdr_copy(lk: &Program, st: &mut State, dst: u32, src: u32, frame: bool) {
    let (d, s) = (&lk.headers[dst as usize], &lk.headers[src as usize]);
    st.phv.cells[d.valid as usize] = st.phv.cells[s.valid as usize];
    let (ds, ss) = (d.cells.0 as usize, s.cells.0 as usize);
    let n = (d.cells.1 - d.cells.0) as usize;
    st.phv.cells.copy_within(ss..ss + n, ds);
    if frame {
        st.phv.mark(d.group);
        st.hdr_src[dst as usize] = st.hdr_src[src as usize];
        st.fdirty[dst as usize] = st.fdirty[src as usize];
    } else {
        st.wrote_header(d.group, dst);
    }
}

/// Runs `op` when it is a `set` whose expression has a fast form (a
/// shifted, masked or incremented field): inline, without [`Code::eval`]'s
/// call; false for any other op, which it leaves undone.
#[inline(always)]
pub fn set_quick(op: &Op, params: &[u128], st: &mut State) -> bool {
    let &Op::Set { dst, mask, e } = op else { return false };
    let Some(v) = Code::quick(e.fast, &st.phv.cells, params) else { return false };
    st.phv.cells[dst.cell as usize] = v & mask;
    st.wrote(dst);
    true
}

/// One op, out of line (see [`run`]; the parser's `set`s come here
/// directly); true when the action ends (a parser `set` whose lookahead
/// ran past the frame sets `st.too_short`).
#[inline(never)]
pub fn run_other(op: &Op, pc: &mut usize, params: &[u128], lk: &Program, st: &mut State, frame: &[u8]) -> bool {
    match *op {
        Op::Set { dst, mask, e } => {
            let mut why = u32::MAX;
            let v = lk.code.eval(e, &Env { cells: &st.phv.cells, params, frame, pos: st.pos }, &mut why);
            let v = match v {
                Ok(v) => v,
                Err(_) => {
                    // a lookahead past the end inside a parser `set`: the state rejects
                    st.too_short = true;
                    return true;
                }
            };
            if why != u32::MAX {
                st.note_inexact(why);
            }
            st.phv.cells[dst.cell as usize] = v & mask;
            st.wrote(dst);
        }
        Op::SetWide { dst, src, n } => {
            let (c, s, n) = (dst.cell as usize, src as usize, n as usize);
            st.phv.cells.copy_within(s..s + n, c);
            st.wrote(dst);
        }
        Op::Taint { slot, reads } => {
            let t = lk.taint_reads[reads.0 as usize..reads.1 as usize].iter().any(|&r| st.tainted(r));
            st.set_taint(slot, t);
        }
        Op::Synth { slot, reason } => {
            st.note(reason);
            st.set_taint(slot, true);
        }
        Op::Valid { h, on } => valid(lk, st, h, on),
        Op::HdrCopy { dst, src, frame } => hdr_copy(lk, st, dst, src, frame),
        Op::Build(ref b) => build(lk, st, b),
        Op::Push { stack, n, front } => lk.shift_stack(st, stack, n, true, front),
        Op::Pop { stack, n } => lk.shift_stack(st, stack, n, false, false),
        Op::Drop => {
            if let Some((c, g)) = lk.std.egress_spec {
                st.phv.cells[c as usize] = DROP_PORT;
                st.phv.mark(g);
            }
            if let Some((c, g)) = lk.std.mcast_grp {
                st.phv.cells[c as usize] = 0;
                st.phv.mark(g);
            }
        }
        Op::JumpZero { e, to } => {
            let mut why = u32::MAX;
            let v = lk.code.eval(e, &Env { cells: &st.phv.cells, params, frame, pos: st.pos }, &mut why).unwrap_or(0);
            if why != u32::MAX {
                st.note_inexact(why);
            }
            if v == 0 {
                *pc = to as usize;
            }
        }
        Op::Extern(i) => lk.externs[i as usize].run(lk, st, params, frame),
        Op::Unsupported(r) => st.note(r),
        Op::Exit => return true,
        Op::Jump(t) => *pc = t as usize,
        Op::SetConst { .. } | Op::Copy { .. } | Op::SetParam { .. } | Op::Moves(_) => {
            return run(std::slice::from_ref(op), params, lk, st, frame);
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The three plain assignments as `run` executes them, one op at a time.
    fn reference(ops: &[Op], cells: &mut [u128], params: &[u128]) {
        for op in ops {
            match *op {
                Op::SetConst { dst, v } => cells[dst.cell as usize] = v,
                Op::Copy { dst, src, mask } => cells[dst.cell as usize] = cells[src as usize] & mask,
                Op::SetParam { dst, param, mask } => cells[dst.cell as usize] = params[param as usize] & mask,
                Op::Moves(ref f) => f.apply(cells, params),
                _ => {}
            }
        }
    }

    fn op() -> impl Strategy<Value = Op> {
        let dst = (0u32..24).prop_map(|c| Dst { cell: c, group: c, hdr: u32::MAX, fbit: 0 });
        let m = prop_oneof![Just(u128::MAX), Just(0xffu128), any::<u128>()];
        prop_oneof![
            (dst.clone(), any::<u128>()).prop_map(|(dst, v)| Op::SetConst { dst, v }),
            (dst.clone(), 0u32..24, m.clone()).prop_map(|(dst, src, mask)| Op::Copy { dst, src, mask }),
            (dst.clone(), 0u32..3, m).prop_map(|(dst, param, mask)| Op::SetParam { dst, param, mask }),
            Just(Op::Drop),
        ]
    }

    proptest! {
        /// Fused runs of moves write what the ops they replace write, in
        /// order (a move reading a cell an earlier one wrote sees the new value).
        #[test]
        fn fused_moves_equal_the_ops_they_replace(ops in proptest::collection::vec(op(), 0..12),
                                                  cells in proptest::collection::vec(any::<u128>(), 24),
                                                  params in proptest::collection::vec(any::<u128>(), 3)) {
            let fused = fuse_moves(ops.clone());
            prop_assert!(fused.len() <= ops.len());
            prop_assert!(!fused.windows(2).any(|w| Move::of(&w[0]).is_some() && Move::of(&w[1]).is_some()));
            let (mut a, mut b) = (cells.clone(), cells);
            reference(&ops, &mut a, &params);
            reference(&fused, &mut b, &params);
            prop_assert_eq!(a, b);
        }
    }

    fn marks(dirty: &mut [u64], src: &mut [u32], fd: &mut [u64], d: Dst) {
        // as State::wrote marks one write
        dirty[(d.group >> 6) as usize] |= 1 << (d.group & 63);
        if d.hdr != super::super::exec::NONE {
            if d.fbit == 0 {
                src[d.hdr as usize] = super::super::exec::NONE;
            } else {
                fd[d.hdr as usize] |= d.fbit;
            }
        }
    }

    proptest! {
        /// A fused run's marks, gathered at link, are the marks of its moves one by one.
        #[test]
        fn fused_marks_equal_the_marks_of_each_move(ds in proptest::collection::vec((0u32..200, prop_oneof![Just(u32::MAX), 0u32..4], prop_oneof![Just(0u64), 1u64..16]), 2..20)) {
            let moves: Vec<Move> = ds.iter().map(|&(g, h, f)| Move { v: 0, dst: Dst { cell: 0, group: g, hdr: h, fbit: f }, src: 0, from: Src::Const }).collect();
            let (mut d1, mut s1, mut f1) = (vec![0u64; 4], vec![7u32; 4], vec![0u64; 4]);
            for m in &moves {
                marks(&mut d1, &mut s1, &mut f1, m.dst);
            }
            let fu = Fused::of(moves.into());
            let (mut d2, mut s2, mut f2) = (vec![0u64; 4], vec![7u32; 4], vec![0u64; 4]);
            for &(w, b) in fu.groups.iter() {
                d2[w as usize] |= b;
            }
            for &(h, whole, bits) in fu.hdrs.iter() {
                if whole {
                    s2[h as usize] = super::super::exec::NONE;
                }
                f2[h as usize] |= bits;
            }
            prop_assert_eq!((d1, s1, f1), (d2, s2, f2));
        }
    }

    #[test]
    fn a_run_split_by_kind_writes_what_its_ops_write() {
        let d = |c: u32| Dst { cell: c, group: c, hdr: u32::MAX, fbit: 0 };
        let ops = vec![Op::SetParam { dst: d(0), param: 1, mask: 0xff }, Op::Copy { dst: d(1), src: 5, mask: u128::MAX },
                       Op::SetConst { dst: d(2), v: 7 }, Op::Copy { dst: d(3), src: 4, mask: 0xf }];
        let fused = fuse_moves(ops.clone());
        let Op::Moves(f) = &fused[0] else { panic!("not fused") };
        assert!(f.split.is_some());
        let (mut a, mut b): (Vec<u128>, Vec<u128>) = ((0..6).map(|i| 1000 + i).collect(), (0..6).map(|i| 1000 + i).collect());
        reference(&ops, &mut a, &[3, 0x1234]);
        reference(&fused, &mut b, &[3, 0x1234]);
        assert_eq!(a, b);
        // a copy of a cell the run writes keeps the order
        let ops = vec![Op::SetConst { dst: d(2), v: 7 }, Op::Copy { dst: d(3), src: 2, mask: 0xf }];
        let Op::Moves(f) = &fuse_moves(ops)[0] else { panic!("not fused") };
        assert!(f.split.is_none());
    }

    /// Packet headers x and y of one layout, fields `f0`, `f1`, ... `widths` wide.
    fn two_headers(b: &mut crate::program::exec::tests::B, widths: &[u32]) -> (u32, u32) {
        let names: Vec<String> = (0..widths.len()).map(|i| format!("f{i}")).collect();
        let fields: Vec<(&str, u32)> = names.iter().map(|n| n.as_str()).zip(widths.iter().copied()).collect();
        (b.header("x", &fields, false), b.header("y", &fields, false))
    }

    /// What `x` and its copy `y` (one layout, fields `widths` wide, whole
    /// bytes in all) emit after `frame` is parsed into `x` and the ops run:
    /// sets `pre` on x, `y = x`, then sets `post` on x or y (field, which, value).
    fn copied(widths: &[u32], frame: &[u8], pre: &[(usize, u64)], post: &[(usize, bool, u64)], from_frame: bool) -> Option<Vec<u8>> {
        use crate::program::exec::tests::{run, state, B};
        use crate::program::exec::Executor;
        use serde_json::json;
        let mut b = B::new();
        let (x, y) = two_headers(&mut b, widths);
        let set = |h: &str, f: usize, v: u64| json!(["set", b.s(&format!("{h}.f{}", f % widths.len())), ["c", format!("{v:#x}")]]);
        let mut ops: Vec<serde_json::Value> = pre.iter().map(|&(f, v)| set("x", f, v)).collect();
        ops.push(json!(["hdr_copy", y, x]));
        ops.extend(post.iter().map(|&(f, on_y, v)| set(if on_y { "y" } else { "x" }, f, v)));
        let d = b.build(json!({
            "parser": {"init": 0, "states": [state("s", json!([["extract", x]]), json!([]), json!([]), json!(-1))]},
            "actions": [{"name": "a", "id": 0, "params": [], "ops": ops}],
            "nodes": [{"kind": "table", "name": "t", "keyed": null, "key": [], "entries": [], "default": {"a": 0, "d": []}, "next": {"actions": {}, "base": -1}}],
            "pipelines": [{"name": "ingress", "init": 0}], "deparser": [x, y]
        }));
        let mut p = Program::link(&d).unwrap();
        for a in p.actions.iter_mut() {
            for op in a.ops.iter_mut() {
                if let Op::HdrCopy { frame, .. } = op {
                    assert!(*frame);
                    *frame = from_frame;
                }
            }
        }
        let mut ex = Executor::new(p);
        run(&mut ex, &[frame.to_vec()]).pop().unwrap().2
    }

    proptest! {
        /// A copied header emitted from its source's frame bytes (patched
        /// with the fields written before and after the copy) is the header
        /// packed from its fields, for any layout of whole bytes.
        #[test]
        fn a_copy_emitted_from_the_frame_equals_the_copy_packed(widths in proptest::collection::vec(1u32..=40, 1..10),
                                                               frame in proptest::collection::vec(any::<u8>(), 0..60),
                                                               pre in proptest::collection::vec((0usize..10, any::<u64>()), 0..3),
                                                               post in proptest::collection::vec((0usize..10, any::<bool>(), any::<u64>()), 0..4)) {
            let mut widths = widths;
            let total: u32 = widths.iter().sum();
            if !total.is_multiple_of(8) {
                widths.push(8 - total % 8);
            }
            let want = copied(&widths, &frame, &pre, &post, false);
            prop_assert_eq!(copied(&widths, &frame, &pre, &post, true), want);
        }
    }

    /// Two packet headers x, y of `widths` and a program that links them.
    fn xy(widths: &[u32]) -> (Program, crate::program::exec::tests::B) {
        use serde_json::json;
        let mut b = crate::program::exec::tests::B::new();
        let (x, y) = two_headers(&mut b, widths);
        (Program::link(&b.build(json!({"deparser": [x, y]}))).unwrap(), b)
    }

    /// Where an assignment to `slot` writes (as the linker's `dst`).
    fn dst_of(p: &Program, slot: usize) -> Dst {
        let h = p.hdr_of_slot[slot];
        let (hdr, fbit) = match p.headers.get(h as usize) {
            Some(hd) if !hd.metadata => (h, 1u64 << hd.fields.iter().position(|f| f.slot as usize == slot).unwrap()),
            _ => (super::super::exec::NONE, 0),
        };
        Dst { cell: p.lay.cell[slot], group: p.lay.group[slot], hdr, fbit }
    }

    /// An op of a tunnel's shape over x, y and meta: setValid/setInvalid, a
    /// constant, a copy or action data into a field.
    fn tunnel_op(nf: usize) -> impl Strategy<Value = (u8, u8, usize, usize, u64)> {
        (0u8..6, 0u8..3, 0..nf, 0..nf, any::<u64>())
    }

    proptest! {
        /// setValid and the constants after it, built from a template, leave
        /// the PHV, the frame offsets and the written fields as the ops they
        /// replace leave them, whatever the headers' validity before.
        #[test]
        fn templates_equal_the_ops_they_replace(widths in proptest::collection::vec(1u32..=64, 1..8),
                                                ops in proptest::collection::vec(tunnel_op(8), 0..14),
                                                seed in any::<u64>(), params in proptest::collection::vec(any::<u128>(), 2)) {
            let (p, b) = xy(&widths);
            let nf = widths.len();
            let hname = |k: u8| ["x", "y", "meta"][k as usize];
            let slot = |k: u8, f: usize| if k == 2 { b.s(["meta.a", "meta.b", "meta.c"][f % 3]) } else { b.s(&format!("{}.f{}", hname(k), f % nf)) } as usize;
            let mut orig = Vec::new();
            for &(kind, k, f, g, v) in &ops {
                let d = dst_of(&p, slot(k, f));
                let w = p.lay.width[slot(k, f)];
                orig.push(match kind {
                    0 => Op::Valid { h: b.h(hname(k % 2)), on: v & 1 == 1 },
                    1 | 2 => Op::SetConst { dst: d, v: v as u128 & mask(w) },
                    3 => Op::SetParam { dst: d, param: (v & 1) as u32, mask: mask(w) },
                    4 => Op::Valid { h: b.h(hname(k % 2)), on: true },
                    _ => Op::Copy { dst: d, src: p.lay.cell[slot((k + 1) % 3, g)], mask: mask(w) },
                });
            }
            let planned = templates(fuse_moves(orig.clone()), &p.headers, &p.code);
            let mut st = State::new(&p);
            let mut x = seed | 1;
            for c in st.phv.cells.iter_mut() {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                *c = x as u128;
            }
            for h in [b.h("x"), b.h("y")] {
                st.phv.cells[p.headers[h as usize].valid as usize] = (x >> h & 1) as u128;
                st.hdr_src[h as usize] = h * 7;
                st.fdirty[h as usize] = x >> 8 & 0xf;
            }
            let mut want = State::new(&p);
            want.phv = st.phv.clone();
            want.hdr_src = st.hdr_src.clone();
            want.fdirty = st.fdirty.clone();
            run(&orig, &params, &p, &mut want, &[]);
            run(&planned, &params, &p, &mut st, &[]);
            prop_assert_eq!(&st.phv, &want.phv);
            prop_assert_eq!(&st.hdr_src, &want.hdr_src);
            prop_assert_eq!(&st.fdirty, &want.fdirty);
        }
    }

    #[test]
    fn the_constants_after_set_valid_are_built_from_a_template() {
        let (p, b) = xy(&[8, 16, 8]);
        let d = |s: &str| dst_of(&p, b.s(s) as usize);
        let ops = vec![Op::Valid { h: b.h("y"), on: true }, Op::SetConst { dst: d("y.f0"), v: 4 }, Op::Copy { dst: d("y.f1"), src: d("x.f1").cell, mask: u128::MAX },
                       Op::SetConst { dst: d("y.f2"), v: 0x11 }, Op::SetConst { dst: d("x.f0"), v: 1 }];
        let planned = templates(fuse_moves(ops), &p.headers, &p.code);
        let Op::Build(bl) = &planned[0] else { panic!("not built: {planned:?}") };
        assert_eq!(&bl.template[..], &[4, 0, 0x11]);
        // what is not a constant of y's stays, in order
        assert_eq!(planned.len(), 2);
        // a constant after a read of its field is not lifted
        let ops = vec![Op::Valid { h: b.h("y"), on: true }, Op::Copy { dst: d("x.f0"), src: d("y.f0").cell, mask: u128::MAX }, Op::SetConst { dst: d("y.f0"), v: 4 }];
        assert!(matches!(templates(fuse_moves(ops), &p.headers, &p.code)[0], Op::Valid { .. }));
    }

    #[test]
    fn ops_with_jumps_are_not_fused() {
        let d = Dst { cell: 0, group: 0, hdr: u32::MAX, fbit: 0 };
        let ops = vec![Op::SetConst { dst: d, v: 1 }, Op::SetConst { dst: d, v: 2 }, Op::Jump(0)];
        assert_eq!(fuse_moves(ops).len(), 3);
    }
}

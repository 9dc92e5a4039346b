//! Expressions: BMv2's expression trees compiled once into a flat stack
//! code, evaluated per packet without allocation.
//!
//! **Values.** BMv2 computes with unbounded integers and truncates on
//! assignment (p4c emits the `& 0xff..` masks that make `+`, `-`, `~` and
//! `<<` wrap). Here a value is a `u128`: its true value's two's complement
//! residue mod 2^128. That residue is exact for everything that only feeds
//! `+ - * & | ^ ~ <<` and assignments to fields of at most 128 bits
//! (truncation mod 2^w, w <= 128, only needs the residue). The operations
//! that need the true value — comparisons, `>>`, `/`, `%`, truth
//! (`d2b`, `not`, `and`, `or`, `?:`, `if`) and the saturating casts — get it
//! from a bound computed at compile time for every subexpression (`0 <= v <
//! 2^bits`, or `-2^bits <= v < 2^bits` when it can be negative): a value
//! known to lie in `[0, 2^128)` is read unsigned, one in `[-2^127, 2^127)`
//! signed (`i128`), and the instruction is chosen accordingly (`LtU` /
//! `LtS`). Where neither holds (a field wider than 128 bits, a product of
//! two wide values compared) the compiler emits [`Ins::Inexact`]: at run
//! time it yields 0 and marks the packet inexact under a name, so a value
//! the executor cannot compute is reported, never silently wrong. No
//! shipped program needs it.
//!
//! Signed fields are stored as their bit pattern and read unsigned, as the
//! interpreter reads them (`synapse_vmt.p4.exprs`); `two_comp_mod` gives the
//! signed value.

use serde_json::Value;

use super::ir::parse_hex;
use super::phv::{mask, read_bits, Layout};

/// Widest bound tracked (bits); anything wider is "unbounded".
const CAP: u32 = 1 << 20;
/// Deepest operand stack an expression may need.
pub const MAX_DEPTH: usize = 32;

/// A bound on a value: `0 <= v < 2^bits`, or `-2^bits <= v < 2^bits` when `neg`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bound {
    pub neg: bool,
    pub bits: u32,
}

impl Bound {
    pub const BOOL: Bound = Bound { neg: false, bits: 1 };
    pub fn new(neg: bool, bits: u32) -> Bound {
        Bound { neg, bits: bits.min(CAP) }
    }
    /// The residue is the value, read unsigned.
    pub fn fits_u(self) -> bool {
        !self.neg && self.bits <= 128
    }
    /// The residue is the value, read as `i128`.
    pub fn fits_s(self) -> bool {
        self.bits <= 127
    }
    fn exact(self) -> bool {
        self.fits_u() || self.fits_s()
    }
    fn fits_u64(self) -> bool {
        !self.neg && self.bits <= 64
    }
    fn exact64(self) -> bool {
        self.fits_u64() || self.bits <= 63
    }
}

/// One instruction of the stack code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ins {
    /// Push a cell.
    Field(u32),
    /// Push `consts[i]`.
    Const(u32),
    /// Push action data `i`.
    Param(u32),
    /// Push `w` bits at bit `off` after the parser's position (PacketTooShort beyond the frame).
    Look(u32, u32),
    /// Push a field of a stack's last extracted element (`stack_fields[i]`).
    StackField(u32),
    /// Push 1 if a member of union `unions[i]` is valid.
    ValidUnion(u32),
    /// Push a stack's next-index cell minus one / as it is.
    LastIndex(u32),
    Size(u32),
    Add,
    Sub,
    Mul,
    And,
    Or,
    Xor,
    Shl,
    ShrU,
    ShrS,
    DivU,
    DivS,
    ModU,
    ModS,
    Eq,
    Ne,
    LtU,
    LtS,
    LeU,
    LeS,
    GtU,
    GtS,
    GeU,
    GeS,
    /// Logical not / bitwise not / truth (`!= 0`, as 0 or 1).
    Not,
    BNot,
    Truth,
    /// two_comp_mod, sat_cast, usat_cast to a constant width.
    Tcm(u32),
    SatS(u32),
    SatU(u32),
    /// Short-circuit `and` / `or`: pop; if decided, push 0 / 1 and jump.
    AndJump(u32),
    OrJump(u32),
    /// Pop; jump when 0.
    JumpZero(u32),
    Jump(u32),
    /// Pop `n` values, push 0, and mark the packet inexact under `reasons[r]`.
    Inexact(u8, u32),
    /// Push a cell compared with a constant, `cmps[i]` = (mask, k, eq):
    /// `(cell & mask == k) == eq`. A superinstruction fused at compile time
    /// from the shapes p4c emits for conditions (`f == k`, `f != k`,
    /// `f & m == k`, `d2b(f)`, their `not`): see [`Code::fuse`].
    CmpFC(u32, u32),
}

/// Names of what the executor cannot compute exactly, interned.
#[derive(Clone, Debug, Default)]
pub struct Reasons {
    pub names: Vec<String>,
    index: std::collections::HashMap<String, u32>,
}

impl Reasons {
    pub fn id(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), self.names.len() as u32 - 1);
        self.names.len() as u32 - 1
    }
}

/// The stack code of every expression of a program.
#[derive(Clone, Debug, Default)]
pub struct Code {
    pub ins: Vec<Ins>,
    pub consts: Vec<u128>,
    /// Per stack-field reference: the cell of the field in each element.
    pub stack_fields: Vec<(u32, Vec<u32>)>,
    /// Per union reference: its members' validity cells.
    pub unions: Vec<Vec<u32>>,
    pub reasons: Reasons,
    /// The reason a division by zero reports.
    pub div_zero: u32,
    /// Operands of [`Ins::CmpFC`]: (mask, k, eq).
    pub cmps: Vec<(u128, u128, bool)>,
    /// Compile without superinstructions (the generic code the tests compare them with).
    pub no_fuse: bool,
    /// While compiling: every operation so far is exact in 64 bits.
    ops64: bool,
}

/// An expression: `code.ins[start..end]`. `narrow`: evaluated in `u64`
/// (exact: every value whose true size matters fits in 64 bits, and the
/// result is used as a value of at most 64 bits); `ops64`: the operations
/// inside would allow it (an assignment to a field of at most 64 bits
/// only needs that).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Expr {
    pub start: u32,
    pub end: u32,
    pub narrow: bool,
    pub ops64: bool,
    /// The same computation without the stack machine, for the shapes
    /// p4c emits most (a field compared with a constant, a field's truth,
    /// a shifted or incremented field under a mask).
    pub fast: Fast,
}

/// See [`Expr::fast`]; cells are PHV cells, constants values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Fast {
    #[default]
    No,
    Field(u32),
    Const(u128),
    Param(u32),
    /// `(cell >> shift) & mask`
    ShrAnd(u32, u32, u128),
    /// `(cell + k) & mask` (mod 2^128)
    AddAnd(u32, u128, u128),
    /// `(cell & mask) == k`, `(cell & mask) != k`: a field compared with a
    /// constant, or its truth (`MaskNe(cell, !0, 0)`), from an [`Ins::CmpFC`]
    MaskEq(u32, u128, u128),
    MaskNe(u32, u128, u128),
    /// A lookahead alone (a parser `set` of the bits ahead): `w` bits at
    /// bit `off` after the parser's position. It reads the frame, so
    /// [`Code::quick`] has no value for it: [`Code::eval`] reads it.
    Look(u32, u32),
}

impl Expr {
    /// This expression as the value of a `w`-bit assignment.
    pub fn for_bits(self, w: u32) -> Expr {
        Expr { narrow: self.ops64 && w <= 64, ..self }
    }
}

/// Deepest stack of a narrow expression.
const NARROW_DEPTH: usize = 8;

/// What an expression may refer to while it is compiled.
pub struct Scope<'a> {
    pub lay: &'a Layout,
    /// Stacks: (next-index slot, element headers' field slots by position).
    pub stacks: &'a [(u32, Vec<Vec<u32>>)],
    /// Unions: members' validity slots.
    pub unions: &'a [Vec<u32>],
    /// Action data available (None: none, outside actions).
    pub params: Option<&'a [u32]>,
    /// In the parser (lookahead allowed).
    pub parser: bool,
}

/// Slots an expression reads (for taint tracking).
pub fn reads(tree: &Value, out: &mut Vec<u32>) {
    if let Some(a) = tree.as_array() {
        if a.first().and_then(|x| x.as_str()) == Some("f") {
            if let Some(s) = a.get(1).and_then(|x| x.as_u64()) {
                out.push(s as u32);
            }
            return;
        }
        for x in a.iter().skip(1) {
            reads(x, out);
        }
    }
}

impl Code {
    /// Compiles `tree`; `what` names the place in errors.
    pub fn compile(&mut self, tree: &Value, sc: &Scope, what: &str) -> Result<(Expr, Bound), String> {
        let start = self.ins.len() as u32;
        let mut depth = 0usize;
        self.ops64 = true;
        let b = self.node(tree, sc, what, 0, &mut depth)?;
        let ops64 = self.ops64 && depth <= NARROW_DEPTH;
        let e = Expr { start, end: self.ins.len() as u32, narrow: ops64 && b.fits_u64(), ops64, fast: Fast::No };
        Ok((Expr { fast: self.fast(e), ..e }, b))
    }

    /// Compiles `tree` as a condition (its truth, 0 or 1).
    pub fn compile_truth(&mut self, tree: &Value, sc: &Scope, what: &str) -> Result<Expr, String> {
        let (e, b) = self.compile(tree, sc, what)?;
        self.ops64 = e.ops64;
        self.truth(b, what);
        let start = e.start as usize;
        self.fold(start);
        // a bare field's truth, `[Field, Truth]`, is a comparison too
        self.fuse(start);
        let ops64 = self.ops64;
        let e = Expr { start: e.start, end: self.ins.len() as u32, narrow: ops64, ops64, fast: Fast::No };
        Ok(Expr { fast: self.fast(e), ..e })
    }

    /// The [`Fast`] form of `e`'s code, if it has one.
    fn fast(&self, e: Expr) -> Fast {
        use Ins::*;
        let k = |i: u32| self.consts[i as usize];
        match self.ins[e.start as usize..e.end as usize] {
            [Field(c)] => Fast::Field(c),
            [Const(i)] => Fast::Const(k(i)),
            [Param(p)] => Fast::Param(p),
            [Look(off, w)] => Fast::Look(off, w),
            [Field(c), Const(i), And] => Fast::ShrAnd(c, 0, k(i)),
            [Field(c), Const(s), ShrU] if k(s) < 128 => Fast::ShrAnd(c, k(s) as u32, u128::MAX),
            [Field(c), Const(s), ShrU, Const(m), And] if k(s) < 128 => Fast::ShrAnd(c, k(s) as u32, k(m)),
            [Field(c), Const(s), ShrU, Const(m), And, Const(m2), And] if k(s) < 128 => Fast::ShrAnd(c, k(s) as u32, k(m) & k(m2)),
            [Field(c), Const(i), Add] => Fast::AddAnd(c, k(i), u128::MAX),
            [Field(c), Const(i), Add, Const(m), And] => Fast::AddAnd(c, k(i), k(m)),
            [CmpFC(c, j)] => match self.cmps[j as usize] {
                (m, v, true) => Fast::MaskEq(c, m, v),
                (m, v, false) => Fast::MaskNe(c, m, v),
            },
            _ => Fast::No,
        }
    }

    /// Replaces the code from `start` by one constant when it reads nothing
    /// (constant folding: `b2d(true)`, `0x1 << 0x3`, ...).
    fn fold(&mut self, start: usize) {
        if self.ins.len() <= start + 1 {
            return;
        }
        let pure = self.ins[start..].iter().all(|i| {
            !matches!(i, Ins::Field(_) | Ins::CmpFC(..) | Ins::Param(_) | Ins::Look(..) | Ins::StackField(_) | Ins::ValidUnion(_)
                | Ins::LastIndex(_) | Ins::Size(_) | Ins::Inexact(..) | Ins::DivU | Ins::DivS | Ins::ModU | Ins::ModS)
        });
        if !pure {
            return;
        }
        let e = Expr { start: start as u32, end: self.ins.len() as u32, narrow: false, ops64: false, fast: Fast::No };
        let mut why = u32::MAX;
        if let Ok(v) = self.eval(e, &Env { cells: &[], params: &[], frame: &[], pos: 0 }, &mut why) {
            self.ins.truncate(start);
            let k = self.konst(v);
            self.ins.push(k);
        }
    }

    fn inexact(&mut self, pop: u8, what: &str, why: &str) {
        let r = self.reasons.id(&format!("{what}: {why}"));
        self.ins.push(Ins::Inexact(pop, r));
    }

    /// Turns the value on the stack into its truth (nothing to do for a bool).
    fn truth(&mut self, b: Bound, what: &str) {
        if b == Bound::BOOL {
            return;
        }
        self.ops64 &= b.exact64();
        if b.exact() {
            self.ins.push(Ins::Truth);
        } else {
            self.inexact(1, what, "truth of a value wider than 128 bits");
        }
    }

    fn konst(&mut self, v: u128) -> Ins {
        self.consts.push(v);
        Ins::Const(self.consts.len() as u32 - 1)
    }

    fn node(&mut self, t: &Value, sc: &Scope, what: &str, d: usize, depth: &mut usize) -> Result<Bound, String> {
        let start = self.ins.len();
        let b = self.node_inner(t, sc, what, d, depth)?;
        self.fold(start);
        self.fuse(start);
        Ok(b)
    }

    /// Replaces the code from `start` by one [`Ins::CmpFC`] when it is a
    /// field compared with a constant (the whole node, so no jump lands
    /// inside it). The comparison is made on the 128-bit cell: the value
    /// itself, which the generic code's 64-bit evaluation also gives when it
    /// is chosen (every value then fits in 64 bits).
    fn fuse(&mut self, start: usize) {
        use Ins::*;
        if self.no_fuse {
            return;
        }
        let k = |i: u32| self.consts[i as usize];
        let (c, cmp) = match self.ins[start..] {
            [Field(c), Const(i), Eq] => (c, (u128::MAX, k(i), true)),
            [Field(c), Const(i), Ne] => (c, (u128::MAX, k(i), false)),
            [Field(c), Const(m), And, Const(i), Eq] => (c, (k(m), k(i), true)),
            [Field(c), Const(m), And, Const(i), Ne] => (c, (k(m), k(i), false)),
            [Field(c), Truth] => (c, (u128::MAX, 0, false)),
            [Field(c), Not] => (c, (u128::MAX, 0, true)),
            [CmpFC(c, j), Not] => {
                let (m, v, eq) = self.cmps[j as usize];
                (c, (m, v, !eq))
            }
            _ => return,
        };
        self.ins.truncate(start);
        self.cmps.push(cmp);
        self.ins.push(CmpFC(c, self.cmps.len() as u32 - 1));
    }

    fn node_inner(&mut self, t: &Value, sc: &Scope, what: &str, d: usize, depth: &mut usize) -> Result<Bound, String> {
        *depth = (*depth).max(d + 1);
        if d + 1 > MAX_DEPTH {
            return Err(format!("{what}: expected an expression at most {MAX_DEPTH} operands deep"));
        }
        let bad = || format!("{what}: expected an expression array, found {t}");
        let a = t.as_array().ok_or_else(bad)?;
        let op = a.first().and_then(|x| x.as_str()).ok_or_else(bad)?;
        let int = |i: usize| -> Result<u64, String> {
            a.get(i).and_then(|x| x.as_u64()).ok_or_else(|| format!("{what}: {op}: expected an integer operand {i}, found {t}"))
        };
        let arg = |i: usize| -> Result<&Value, String> { a.get(i).ok_or_else(|| format!("{what}: {op}: expected operand {i}")) };
        match op {
            "f" => {
                let s = sc.lay.slot(int(1)?, what)?;
                if sc.lay.varbit[s] || sc.lay.limbs[s] > 1 {
                    self.inexact(0, what, &format!("field {} wider than 128 bits read in an expression", sc.lay.names[s]));
                    return Ok(Bound::new(false, 0));
                }
                self.ins.push(Ins::Field(sc.lay.cell[s]));
                Ok(Bound::new(false, sc.lay.width[s]))
            }
            "c" => {
                let s = arg(1)?.as_str().ok_or_else(|| format!("{what}: expected a hex constant, found {t}"))?;
                let (v, neg, bits) = parse_hex(s).map_err(|e| format!("{what}: expected {e}"))?;
                let k = self.konst(v);
                self.ins.push(k);
                Ok(Bound::new(neg, bits))
            }
            "b" => {
                let k = self.konst((int(1)? != 0) as u128);
                self.ins.push(k);
                Ok(Bound::BOOL)
            }
            "p" => {
                let i = int(1)? as usize;
                let ps = sc.params.ok_or_else(|| format!("{what}: action data outside an action"))?;
                let w = *ps.get(i).ok_or_else(|| format!("{what}: expected action data 0..{}, found {i}", ps.len() as i64 - 1))?;
                self.ins.push(Ins::Param(i as u32));
                Ok(Bound::new(false, w))
            }
            "la" => {
                if !sc.parser {
                    return Err(format!("{what}: lookahead outside the parser"));
                }
                let (off, w) = (int(1)? as u32, int(2)? as u32);
                if w > 128 {
                    self.inexact(0, what, "lookahead wider than 128 bits");
                    return Ok(Bound::new(false, 0));
                }
                self.ins.push(Ins::Look(off, w));
                Ok(Bound::new(false, w))
            }
            "sf" => {
                let (st, pos) = (int(1)? as usize, int(2)? as usize);
                let (next, elems) = sc.stacks.get(st).ok_or_else(|| format!("{what}: expected a header stack index, found {st}"))?;
                let mut cells = Vec::new();
                let mut w = 0;
                for e in elems {
                    let s = *e.get(pos).ok_or_else(|| format!("{what}: expected a field position of the stack, found {pos}"))? as usize;
                    if sc.lay.limbs[s] > 1 || sc.lay.varbit[s] {
                        return Err(format!("{what}: a stack field wider than 128 bits is not supported"));
                    }
                    cells.push(sc.lay.cell[s]);
                    w = sc.lay.width[s];
                }
                if cells.is_empty() {
                    return Err(format!("{what}: expected a non-empty header stack"));
                }
                self.stack_fields.push((sc.lay.cell[*next as usize], cells));
                self.ins.push(Ins::StackField(self.stack_fields.len() as u32 - 1));
                Ok(Bound::new(false, w))
            }
            "vu" => {
                let u = int(1)? as usize;
                let members = sc.unions.get(u).ok_or_else(|| format!("{what}: expected a header union index, found {u}"))?;
                self.unions.push(members.iter().map(|&s| sc.lay.cell[s as usize]).collect());
                self.ins.push(Ins::ValidUnion(self.unions.len() as u32 - 1));
                Ok(Bound::BOOL)
            }
            "lsi" | "ssi" => {
                let st = int(1)? as usize;
                let (next, _) = sc.stacks.get(st).ok_or_else(|| format!("{what}: expected a header stack index, found {st}"))?;
                let c = sc.lay.cell[*next as usize];
                self.ins.push(if op == "lsi" { Ins::LastIndex(c) } else { Ins::Size(c) });
                Ok(if op == "lsi" { Bound::new(true, 32) } else { Bound::new(false, 32) })
            }
            "~" | "not" | "d2b" | "b2d" => {
                let x = self.node(arg(1)?, sc, what, d, depth)?;
                match op {
                    "~" => {
                        self.ins.push(Ins::BNot);
                        Ok(Bound::new(true, x.bits))
                    }
                    "not" => {
                        self.truth(x, what);
                        self.ins.push(Ins::Not);
                        Ok(Bound::BOOL)
                    }
                    _ => {
                        self.truth(x, what);
                        Ok(Bound::BOOL)
                    }
                }
            }
            "and" | "or" => {
                let x = self.node(arg(1)?, sc, what, d, depth)?;
                self.truth(x, what);
                let j = self.ins.len();
                self.ins.push(Ins::Jump(0));
                let y = self.node(arg(2)?, sc, what, d, depth)?;
                self.truth(y, what);
                let end = self.ins.len() as u32;
                self.ins[j] = if op == "and" { Ins::AndJump(end) } else { Ins::OrJump(end) };
                Ok(Bound::BOOL)
            }
            "?:" => {
                let c = self.node(arg(1)?, sc, what, d, depth)?;
                self.truth(c, what);
                let jz = self.ins.len();
                self.ins.push(Ins::JumpZero(0));
                let x = self.node(arg(2)?, sc, what, d, depth)?;
                let jmp = self.ins.len();
                self.ins.push(Ins::Jump(0));
                self.ins[jz] = Ins::JumpZero(self.ins.len() as u32);
                let y = self.node(arg(3)?, sc, what, d, depth)?;
                self.ins[jmp] = Ins::Jump(self.ins.len() as u32);
                Ok(Bound::new(x.neg || y.neg, x.bits.max(y.bits)))
            }
            "tcm" | "sat" | "usat" => {
                let x = self.node(arg(1)?, sc, what, d, depth)?;
                let wv = arg(2)?;
                let w = match wv.as_array().map(|w| (w.first().and_then(|s| s.as_str()), w.get(1).and_then(|s| s.as_str()))) {
                    Some((Some("c"), Some(h))) => match parse_hex(h) {
                        Ok((v, false, bits)) if bits <= 16 => v as u32,
                        _ => return Err(format!("{what}: {op}: expected a width constant, found {h}")),
                    },
                    _ => return Err(format!("{what}: {op}: expected a constant width, found {wv}")),
                };
                self.ops64 &= w <= 64 && (op == "tcm" || x.exact64());
                match op {
                    "tcm" if w <= 128 => {
                        self.ins.push(Ins::Tcm(w));
                        Ok(Bound::new(w > 0, w.saturating_sub(1)))
                    }
                    "tcm" if x.fits_u() || (!x.neg && x.bits < w) => Ok(x), // narrower than the width: unchanged
                    "sat" if w >= 1 && w <= 128 && x.exact() => {
                        self.ins.push(Ins::SatS(w | if x.fits_s() { 0 } else { 1 << 31 }));
                        Ok(Bound::new(true, w - 1))
                    }
                    "usat" if w <= 128 && x.exact() => {
                        self.ins.push(Ins::SatU(w | if x.fits_s() { 0 } else { 1 << 31 }));
                        Ok(Bound::new(false, w))
                    }
                    _ => {
                        self.inexact(1, what, &format!("{op} of a value wider than 128 bits"));
                        Ok(Bound::new(false, 0))
                    }
                }
            }
            "+" | "-" | "*" | "/" | "%" | "<<" | ">>" | "&" | "|" | "^" | "==" | "!=" | "<" | "<=" | ">" | ">=" => {
                let x = self.node(arg(1)?, sc, what, d, depth)?;
                let k0 = self.ins.len();
                let y = self.node(arg(2)?, sc, what, d + 1, depth)?;
                let ykonst = if self.ins.len() == k0 + 1 {
                    match self.ins[k0] {
                        Ins::Const(i) if y.fits_u() => Some(self.consts[i as usize]),
                        _ => None,
                    }
                } else {
                    None
                };
                self.binary(op, x, y, ykonst, what)
            }
            _ => Err(format!("{what}: unknown operator {op:?}")),
        }
    }

    fn binary_div(&mut self, op: &str, x: Bound, y: Bound, un: bool, _what: &str) -> Result<Bound, String> {
        let either = x.neg || y.neg;
        Ok(if op == "/" {
            self.ins.push(if un { Ins::DivU } else { Ins::DivS });
            Bound::new(either, x.bits + either as u32)
        } else {
            self.ins.push(if un { Ins::ModU } else { Ins::ModS });
            Bound::new(y.neg, y.bits)
        })
    }

    fn binary(&mut self, op: &str, x: Bound, y: Bound, yk: Option<u128>, what: &str) -> Result<Bound, String> {
        let (un, si) = (x.fits_u() && y.fits_u(), x.fits_s() && y.fits_s());
        let both64 = (x.fits_u64() && y.fits_u64()) || (x.bits <= 63 && y.bits <= 63);
        match op {
            "<<" => self.ops64 &= y.fits_u64(),
            ">>" => self.ops64 &= y.fits_u64() && x.exact64(),
            "/" | "%" | "==" | "!=" | "<" | "<=" | ">" | ">=" => self.ops64 &= both64,
            _ => {}
        }
        let max = x.bits.max(y.bits);
        let either = x.neg || y.neg;
        let pick = |code: &mut Code, u: Ins, s: Ins, res: Bound| -> Bound {
            if un {
                code.ins.push(u);
                res
            } else if si {
                code.ins.push(s);
                res
            } else {
                code.inexact(2, what, &format!("{op} of values wider than 128 bits"));
                Bound::new(false, 0)
            }
        };
        Ok(match op {
            "+" => {
                self.ins.push(Ins::Add);
                Bound::new(either, max + 1)
            }
            "-" => {
                self.ins.push(Ins::Sub);
                Bound::new(true, if either { max + 1 } else { max })
            }
            "*" => {
                self.ins.push(Ins::Mul);
                Bound::new(either, x.bits + y.bits + either as u32)
            }
            "&" => {
                self.ins.push(Ins::And);
                match (x.neg, y.neg) {
                    (false, false) => Bound::new(false, x.bits.min(y.bits)),
                    (false, true) => Bound::new(false, x.bits),
                    (true, false) => Bound::new(false, y.bits),
                    (true, true) => Bound::new(true, max),
                }
            }
            "|" | "^" => {
                self.ins.push(if op == "|" { Ins::Or } else { Ins::Xor });
                Bound::new(either, max)
            }
            "<<" => {
                if !y.fits_u() {
                    self.inexact(2, what, "shift by a value that may be negative or wider than 128 bits");
                    return Ok(Bound::new(false, 0));
                }
                self.ins.push(Ins::Shl);
                let by = match yk {
                    Some(k) => k.min(CAP as u128) as u32,
                    None if y.bits < 20 => (1u32 << y.bits) - 1,
                    None => CAP,
                };
                Bound::new(x.neg, x.bits.saturating_add(by))
            }
            ">>" => {
                if !y.fits_u() || !x.exact() {
                    self.inexact(2, what, "shift of a value wider than 128 bits");
                    return Ok(Bound::new(false, 0));
                }
                self.ins.push(if x.fits_u() { Ins::ShrU } else { Ins::ShrS });
                let by = yk.map_or(0, |k| k.min(CAP as u128) as u32);
                Bound::new(x.neg, x.bits.saturating_sub(by))
            }
            "/" | "%" if un || si => {
                self.div_zero = self.reasons.id("division by zero");
                return self.binary_div(op, x, y, un, what);
            }
            "/" => pick(self, Ins::DivU, Ins::DivS, Bound::new(either, x.bits + either as u32)),
            "%" => pick(self, Ins::ModU, Ins::ModS, Bound::new(y.neg, y.bits)),
            "==" | "!=" => pick(self, if op == "==" { Ins::Eq } else { Ins::Ne }, if op == "==" { Ins::Eq } else { Ins::Ne }, Bound::BOOL),
            "<" => pick(self, Ins::LtU, Ins::LtS, Bound::BOOL),
            "<=" => pick(self, Ins::LeU, Ins::LeS, Bound::BOOL),
            ">" => pick(self, Ins::GtU, Ins::GtS, Bound::BOOL),
            ">=" => pick(self, Ins::GeU, Ins::GeS, Bound::BOOL),
            _ => unreachable!(),
        })
    }
}

/// What an expression reads while it runs.
pub struct Env<'a> {
    pub cells: &'a [u128],
    pub params: &'a [u128],
    /// The frame and the parser's byte position (lookahead).
    pub frame: &'a [u8],
    pub pos: usize,
}

/// Why an evaluation stopped: a lookahead past the frame's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooShort;

/// The machine word an expression is evaluated in: `u64` for narrow
/// expressions, `u128` for the others (see the module doc).
trait Word: Copy + Eq + Ord + std::fmt::Debug {
    const BITS: u32;
    const ZERO: Self;
    const ONE: Self;
    fn from(x: u128) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
    fn not(self) -> Self;
    fn shl(self, b: Self) -> Self;
    fn shr(self, b: Self) -> Self;
    fn sar(self, b: Self) -> Self;
    fn lt_s(self, o: Self) -> bool;
    fn div_s(self, o: Self) -> Self;
    fn mod_s(self, o: Self) -> Self;
    fn div_u(self, o: Self) -> Self;
    fn mod_u(self, o: Self) -> Self;
    fn is_neg(self) -> bool;
}

macro_rules! word {
    ($u:ty, $i:ty) => {
        impl Word for $u {
            const BITS: u32 = <$u>::BITS;
            const ZERO: Self = 0;
            const ONE: Self = 1;
            #[inline(always)]
            fn from(x: u128) -> Self {
                x as $u
            }
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            #[inline(always)]
            fn and(self, o: Self) -> Self {
                self & o
            }
            #[inline(always)]
            fn or(self, o: Self) -> Self {
                self | o
            }
            #[inline(always)]
            fn xor(self, o: Self) -> Self {
                self ^ o
            }
            #[inline(always)]
            fn not(self) -> Self {
                !self
            }
            #[inline(always)]
            fn shl(self, b: Self) -> Self {
                if b >= Self::BITS as $u { 0 } else { self << b }
            }
            #[inline(always)]
            fn shr(self, b: Self) -> Self {
                if b >= Self::BITS as $u { 0 } else { self >> b }
            }
            #[inline(always)]
            fn sar(self, b: Self) -> Self {
                ((self as $i) >> (b.min(Self::BITS as $u - 1))) as $u
            }
            #[inline(always)]
            fn lt_s(self, o: Self) -> bool {
                (self as $i) < (o as $i)
            }
            #[inline(always)]
            fn div_u(self, o: Self) -> Self {
                self / o
            }
            #[inline(always)]
            fn mod_u(self, o: Self) -> Self {
                self % o
            }
            /// Floor division, as Python's `//`.
            #[inline(always)]
            fn div_s(self, o: Self) -> Self {
                let (a, b) = (self as $i, o as $i);
                let q = a.wrapping_div(b);
                (if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) { q - 1 } else { q }) as $u
            }
            /// Modulo with the divisor's sign, as Python's `%`.
            #[inline(always)]
            fn mod_s(self, o: Self) -> Self {
                let (a, b) = (self as $i, o as $i);
                let r = a.wrapping_rem(b);
                (if r != 0 && ((r < 0) != (b < 0)) { r + b } else { r }) as $u
            }
            #[inline(always)]
            fn is_neg(self) -> bool {
                (self as $i) < 0
            }
        }
    };
}
word!(u64, i64);
word!(u128, i128);

#[inline(always)]
fn low_mask<W: Word>(w: u32) -> W {
    W::from(mask(w))
}

/// `w` bits at bit `off` after the parser's position.
#[inline(always)]
fn look(env: &Env, off: u32, w: u32) -> Result<u128, TooShort> {
    let bit = env.pos * 8 + off as usize;
    if bit + w as usize > env.frame.len() * 8 {
        return Err(TooShort);
    }
    Ok(read_bits(env.frame, bit, w))
}

impl Code {
    /// The value of an expression with a [`Fast`] form (None: it has none,
    /// run [`Code::eval`]); small enough to inline where the ops run.
    #[inline(always)]
    pub fn quick(f: Fast, c: &[u128], params: &[u128]) -> Option<u128> {
        Some(match f {
            Fast::No | Fast::Look(..) => return None,
            Fast::Field(x) => c[x as usize],
            Fast::Const(k) => k,
            Fast::Param(i) => params[i as usize],
            Fast::ShrAnd(x, s, m) => (c[x as usize] >> s) & m,
            Fast::AddAnd(x, k, m) => c[x as usize].wrapping_add(k) & m,
            Fast::MaskEq(x, m, k) => (c[x as usize] & m == k) as u128,
            Fast::MaskNe(x, m, k) => (c[x as usize] & m != k) as u128,
        })
    }

    /// Evaluates `e`. `inexact` receives the reason of an [`Ins::Inexact`]
    /// (or of a division by zero) when one runs.
    /// The fast forms inline at the caller (a condition, a checksum's),
    /// the stack machine behind a call.
    #[inline(always)]
    pub fn eval(&self, e: Expr, env: &Env, inexact: &mut u32) -> Result<u128, TooShort> {
        match Code::quick(e.fast, env.cells, env.params) {
            Some(v) => Ok(v),
            None => match e.fast {
                Fast::Look(off, w) => look(env, off, w),
                _ => self.eval_code(e, env, inexact),
            },
        }
    }

    #[inline(never)]
    fn eval_code(&self, e: Expr, env: &Env, inexact: &mut u32) -> Result<u128, TooShort> {
        if e.narrow {
            self.run::<u64, { NARROW_DEPTH + 1 }>(e, env, inexact).map(|v| v as u128)
        } else {
            self.run::<u128, { MAX_DEPTH + 1 }>(e, env, inexact)
        }
    }

    #[inline(always)]
    fn run<W: Word, const N: usize>(&self, e: Expr, env: &Env, inexact: &mut u32) -> Result<W, TooShort> {
        let mut st = [W::ZERO; N];
        let mut sp = 0usize;
        let mut pc = e.start as usize;
        let end = e.end as usize;
        macro_rules! push {
            ($v:expr) => {{
                st[sp] = $v;
                sp += 1;
            }};
        }
        macro_rules! bin {
            (|$a:ident, $b:ident| $body:expr) => {{
                sp -= 1;
                let $b = st[sp];
                let $a = st[sp - 1];
                st[sp - 1] = $body;
            }};
        }
        let bool_ = |b: bool| if b { W::ONE } else { W::ZERO };
        while pc < end {
            let ins = self.ins[pc];
            pc += 1;
            match ins {
                Ins::Field(c) => push!(W::from(env.cells[c as usize])),
                Ins::CmpFC(c, j) => {
                    let (m, k, eq) = self.cmps[j as usize];
                    push!(bool_((env.cells[c as usize] & m == k) == eq))
                }
                Ins::Const(k) => push!(W::from(self.consts[k as usize])),
                Ins::Param(i) => push!(W::from(env.params[i as usize])),
                Ins::Look(off, w) => push!(W::from(look(env, off, w)?)),
                Ins::StackField(i) => {
                    let (next, cells) = &self.stack_fields[i as usize];
                    let n = env.cells[*next as usize] as usize;
                    // nothing extracted yet reads the last element, as the interpreter does
                    let idx = if n == 0 { cells.len() - 1 } else { (n - 1).min(cells.len() - 1) };
                    push!(W::from(env.cells[cells[idx] as usize]))
                }
                Ins::ValidUnion(i) => push!(bool_(self.unions[i as usize].iter().any(|&c| env.cells[c as usize] != 0))),
                Ins::LastIndex(c) => push!(W::from(env.cells[c as usize]).sub(W::ONE)),
                Ins::Size(c) => push!(W::from(env.cells[c as usize])),
                Ins::Add => bin!(|a, b| a.add(b)),
                Ins::Sub => bin!(|a, b| a.sub(b)),
                Ins::Mul => bin!(|a, b| a.mul(b)),
                Ins::And => bin!(|a, b| a.and(b)),
                Ins::Or => bin!(|a, b| a.or(b)),
                Ins::Xor => bin!(|a, b| a.xor(b)),
                Ins::Shl => bin!(|a, b| a.shl(b)),
                Ins::ShrU => bin!(|a, b| a.shr(b)),
                Ins::ShrS => bin!(|a, b| a.sar(b)),
                Ins::DivU | Ins::DivS | Ins::ModU | Ins::ModS => {
                    sp -= 1;
                    let (a, b) = (st[sp - 1], st[sp]);
                    st[sp - 1] = if b == W::ZERO {
                        *inexact = self.div_zero;
                        W::ZERO
                    } else {
                        match ins {
                            Ins::DivU => a.div_u(b),
                            Ins::ModU => a.mod_u(b),
                            Ins::DivS => a.div_s(b),
                            _ => a.mod_s(b),
                        }
                    };
                }
                Ins::Eq => bin!(|a, b| bool_(a == b)),
                Ins::Ne => bin!(|a, b| bool_(a != b)),
                Ins::LtU => bin!(|a, b| bool_(a < b)),
                Ins::LtS => bin!(|a, b| bool_(a.lt_s(b))),
                Ins::LeU => bin!(|a, b| bool_(a <= b)),
                Ins::LeS => bin!(|a, b| bool_(!b.lt_s(a))),
                Ins::GtU => bin!(|a, b| bool_(a > b)),
                Ins::GtS => bin!(|a, b| bool_(b.lt_s(a))),
                Ins::GeU => bin!(|a, b| bool_(a >= b)),
                Ins::GeS => bin!(|a, b| bool_(!a.lt_s(b))),
                Ins::Not => st[sp - 1] = bool_(st[sp - 1] == W::ZERO),
                Ins::BNot => st[sp - 1] = st[sp - 1].not(),
                Ins::Truth => st[sp - 1] = bool_(st[sp - 1] != W::ZERO),
                Ins::Tcm(w) => {
                    let v = st[sp - 1].and(low_mask(w));
                    st[sp - 1] = if w > 0 && w < W::BITS && v.shr(W::from((w - 1) as u128)).and(W::ONE) == W::ONE {
                        v.sub(W::ONE.shl(W::from(w as u128)))
                    } else {
                        v
                    };
                }
                Ins::SatS(wf) => {
                    let (w, unsigned) = (wf & 0xff, wf >> 31 == 1);
                    let hi = W::from(mask(w - 1));
                    let v = st[sp - 1];
                    st[sp - 1] = if unsigned || !v.is_neg() {
                        v.min(hi)
                    } else {
                        let lo = hi.not(); // -2^(w-1)
                        if v.lt_s(lo) { lo } else { v }
                    };
                }
                Ins::SatU(wf) => {
                    let (w, unsigned) = (wf & 0xff, wf >> 31 == 1);
                    let v = st[sp - 1];
                    st[sp - 1] = if !unsigned && v.is_neg() { W::ZERO } else { v.min(low_mask(w)) };
                }
                Ins::AndJump(t) => {
                    if st[sp - 1] == W::ZERO {
                        pc = t as usize;
                    } else {
                        sp -= 1;
                    }
                }
                Ins::OrJump(t) => {
                    if st[sp - 1] != W::ZERO {
                        st[sp - 1] = W::ONE;
                        pc = t as usize;
                    } else {
                        sp -= 1;
                    }
                }
                Ins::JumpZero(t) => {
                    sp -= 1;
                    if st[sp] == W::ZERO {
                        pc = t as usize;
                    }
                }
                Ins::Jump(t) => pc = t as usize,
                Ins::Inexact(pop, r) => {
                    sp -= pop as usize;
                    push!(W::ZERO);
                    *inexact = r;
                }
            }
        }
        Ok(st[sp - 1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::ir::Description;
    use proptest::prelude::*;
    use serde_json::json;

    /// A layout of four fields: a: 8 bits, b: 16, c: 32, d: 128.
    fn layout() -> Layout {
        let d: Description = serde_json::from_value(json!({
            "format": "synapse-p4-program", "version": 1,
            "fields": [["h.$valid$", 1, 0], ["h.a", 8, 0], ["h.b", 16, 0], ["h.c", 32, 0], ["h.d", 128, 0], ["w.x", 320, 1]],
            "headers": [{"name": "h", "valid": 0, "fields": [1, 2, 3, 4], "metadata": true},
                        {"name": "w", "valid": 5, "fields": [5], "metadata": true}],
            "errors": {"names": {}, "PacketTooShort": 1, "NoMatch": 2, "StackOutOfBounds": 3, "HeaderTooShort": 4, "ParserTimeout": 5},
            "std": {}, "parser": {"init": -1, "states": []}, "actions": [], "nodes": [], "pipelines": [], "keyed": []
        }))
        .unwrap();
        Layout::new(&d).unwrap()
    }

    fn run(tree: Value, cells: &[u128], params: &[u128]) -> (u128, u32) {
        let lay = layout();
        let mut code = Code::default();
        let widths: Vec<u32> = params.iter().map(|_| 16).collect();
        let sc = Scope { lay: &lay, stacks: &[], unions: &[], params: Some(&widths), parser: true };
        let (e, _) = code.compile(&tree, &sc, "test").unwrap();
        let mut full = lay.template.clone();
        for (i, &v) in cells.iter().enumerate() {
            full[lay.cell[i + 1] as usize] = v;
        }
        let mut inexact = u32::MAX;
        let frame = [0xa5u8, 0x5a];
        let env = Env { cells: &full, params, frame: &frame, pos: 0 };
        let v = code.eval(e, &env, &mut inexact).unwrap();
        // as the value of a 16-bit assignment (evaluated in u64 when its operations allow)
        let mut why = u32::MAX;
        let v16 = code.eval(e.for_bits(16), &env, &mut why).unwrap();
        assert_eq!(v16 & 0xffff, v & 0xffff, "{tree}: {:?}", e);
        // and without the fast forms, through the stack machine
        let slow = code.eval(Expr { fast: Fast::No, ..e }, &env, &mut why).unwrap();
        assert_eq!(slow, v, "{tree}");
        (v, inexact)
    }

    proptest! {
        /// A lookahead alone, read by its fast form, is what the stack
        /// machine reads, past the frame's end included (PacketTooShort).
        #[test]
        fn a_lookahead_read_fast_equals_the_stack_machine(frame in proptest::collection::vec(any::<u8>(), 0..40), pos in 0usize..24,
                                                          off in 0u32..80, w in 1u32..=128) {
            let lay = layout();
            let mut code = Code::default();
            let sc = Scope { lay: &lay, stacks: &[], unions: &[], params: None, parser: true };
            let (e, _) = code.compile(&json!(["la", off, w]), &sc, "test").unwrap();
            prop_assert_eq!(e.fast, Fast::Look(off, w));
            let env = Env { cells: &lay.template, params: &[], frame: &frame, pos };
            let (mut a, mut b) = (u32::MAX, u32::MAX);
            let fast = code.eval(e.for_bits(w), &env, &mut a);
            prop_assert_eq!(fast, code.eval(Expr { fast: Fast::No, ..e.for_bits(w) }, &env, &mut b));
            prop_assert_eq!(fast.is_err(), (pos * 8 + (off + w) as usize) > frame.len() * 8);
        }
    }

    fn f(s: u32) -> Value {
        json!(["f", s])
    }
    fn c(v: i128) -> Value {
        json!(["c", if v < 0 { format!("-{:#x}", -v) } else { format!("{v:#x}") }])
    }

    /// The reference: Python's unbounded integers, here i128 on small values.
    fn reference(op: &str, a: i128, b: i128) -> i128 {
        match op {
            "+" => a + b,
            "-" => a - b,
            "*" => a * b,
            "&" => a & b,
            "|" => a | b,
            "^" => a ^ b,
            "<<" => a << b,
            ">>" => a >> b,
            // floor division and modulo, computed in floating point (exact at these sizes)
            "/" => ((a as f64) / (b as f64)).floor() as i128,
            "%" => a - b * ((a as f64) / (b as f64)).floor() as i128,
            "==" => (a == b) as i128,
            "!=" => (a != b) as i128,
            "<" => (a < b) as i128,
            "<=" => (a <= b) as i128,
            ">" => (a > b) as i128,
            ">=" => (a >= b) as i128,
            _ => unreachable!(),
        }
    }

    proptest! {
        /// Every binary operator on (field - const) operands, which can be
        /// negative, agrees with unbounded arithmetic once truncated to a
        /// 16-bit field, or exactly for comparisons and divisions.
        #[test]
        fn binary_operators_match_unbounded_integers(op in prop::sample::select(vec!["+", "-", "*", "&", "|", "^", "<<", ">>", "/", "%", "==", "!=", "<", "<=", ">", ">="]),
                                                      a in 0i128..256, b in 0i128..65536, ka in -300i128..300, kb in -70000i128..70000, sh in 0i128..40) {
            let x = json!(["-", f(1), c(ka)]);
            let (y, yv) = if op == "<<" || op == ">>" { (c(sh), sh) } else { (json!(["-", f(2), c(kb)]), b - kb) };
            let xv = a - ka;
            prop_assume!(!((op == "/" || op == "%") && yv == 0));
            let want = reference(op, xv, yv);
            let (got, inexact) = run(json!([op, x, y]), &[a as u128, b as u128], &[]);
            prop_assert_eq!(inexact, u32::MAX);
            prop_assert_eq!(got & 0xffff, (want as u128) & 0xffff);
            if matches!(op, "/" | "%" | "==" | "!=" | "<" | "<=" | ">" | ">=" | ">>") {
                prop_assert_eq!(got as i128, want);
            }
        }

        #[test]
        fn casts_match_their_definitions(v in -100_000i128..100_000, w in 1u32..20) {
            let x = json!(["-", f(3), c(-v)]); // c = 0, so x = v
            let (t, _) = run(json!(["tcm", x.clone(), c(w as i128)]), &[0, 0, 0], &[]);
            let m = (1i128 << w) - 1;
            let mut want = v & m;
            if want >> (w - 1) & 1 == 1 { want -= 1 << w; }
            prop_assert_eq!(t as i128, want);
            let (s, _) = run(json!(["sat", x.clone(), c(w as i128)]), &[0, 0, 0], &[]);
            prop_assert_eq!(s as i128, v.clamp(-(1 << (w - 1)), (1 << (w - 1)) - 1));
            let (u, _) = run(json!(["usat", x, c(w as i128)]), &[0, 0, 0], &[]);
            prop_assert_eq!(u as i128, v.clamp(0, m));
        }
    }

    #[test]
    fn logic_ternary_and_short_circuit() {
        let cells = [5u128, 0, 7];
        assert_eq!(run(json!(["and", ["d2b", f(1)], ["==", f(3), c(7)]]), &cells, &[]).0, 1);
        assert_eq!(run(json!(["and", ["d2b", f(2)], ["la", 100, 8]]), &cells, &[]).0, 0); // no lookahead past the end
        assert_eq!(run(json!(["or", ["d2b", f(1)], ["la", 100, 8]]), &cells, &[]).0, 1);
        assert_eq!(run(json!(["?:", ["d2b", f(2)], ["la", 100, 8], c(9)]), &cells, &[]).0, 9);
        assert_eq!(run(json!(["?:", ["d2b", f(1)], ["la", 4, 8], c(9)]), &cells, &[]).0, 0x55);
        assert_eq!(run(json!(["not", ["d2b", f(2)]]), &cells, &[]).0, 1);
        assert_eq!(run(json!(["b2d", ["d2b", f(1)]]), &cells, &[]).0, 1);
        assert_eq!(run(json!(["&", ["+", f(1), ["p", 0]], c(0xff)]), &cells, &[0x1fe]).0, 3);
        assert_eq!(run(json!(["~", f(1)]), &cells, &[]).0 & 0xff, 0xfa);
    }

    #[test]
    fn wide_values_are_exact_or_named() {
        // 128-bit field: unsigned comparisons and shifts are exact
        let top = 1u128 << 127;
        assert_eq!(run(json!([">", f(4), c(1)]), &[0, 0, 0, top], &[]), (1, u32::MAX));
        assert_eq!(run(json!([">>", f(4), c(127)]), &[0, 0, 0, top], &[]), (1, u32::MAX));
        // (d << 8) >> 8 needs 136 bits: named, not wrong
        let (v, why) = run(json!([">>", ["<<", f(4), c(8)], c(8)]), &[0, 0, 0, top], &[]);
        assert_eq!(v, 0);
        assert_ne!(why, u32::MAX);
        // a 320-bit field in an expression: named
        assert_ne!(run(json!(["+", f(5), c(1)]), &[], &[]).1, u32::MAX);
        // but arithmetic that is truncated on assignment stays exact: (d + d) mod 2^128
        assert_eq!(run(json!(["+", f(4), f(4)]), &[0, 0, 0, top + 1], &[]), (2, u32::MAX));
    }

    /// A condition of the shapes p4c emits: comparisons of a field (a: 8
    /// bits .. d: 128) with a constant, masked or not, truths, under `not`,
    /// `and`, `or`, and arithmetic the superinstructions must leave alone.
    fn cond() -> impl Strategy<Value = Value> {
        let field = (1u32..5).prop_map(f);
        let k = prop_oneof![0i128..4, any::<u32>().prop_map(|x| x as i128), Just(i128::MAX)].prop_map(c);
        let leaf = prop_oneof![
            (field.clone(), k.clone(), prop::bool::ANY).prop_map(|(x, k, eq)| json!([if eq { "==" } else { "!=" }, x, k])),
            (field.clone(), k.clone(), k.clone(), prop::bool::ANY).prop_map(|(x, m, k, eq)| json!([if eq { "==" } else { "!=" }, ["&", x, m], k])),
            field.clone().prop_map(|x| json!(["d2b", x])),
            (field.clone(), k.clone()).prop_map(|(x, k)| json!(["<", ["+", x, k.clone()], k])),
        ];
        leaf.prop_recursive(3, 12, 2, |inner| {
            prop_oneof![
                inner.clone().prop_map(|x| json!(["not", x])),
                (inner.clone(), inner.clone(), prop::bool::ANY).prop_map(|(x, y, a)| json!([if a { "and" } else { "or" }, x, y])),
            ]
        })
    }

    proptest! {
        /// The fused comparisons ([`Ins::CmpFC`], [`Fast::MaskEq`]) give
        /// what the generic stack code gives, as conditions and as values,
        /// in 64 and 128 bits.
        #[test]
        fn fused_comparisons_equal_the_generic_code(tree in cond(), vals in proptest::collection::vec(prop_oneof![0u128..4, any::<u32>().prop_map(|x| x as u128), any::<u128>()], 4)) {
            let lay = layout();
            let sc = Scope { lay: &lay, stacks: &[], unions: &[], params: None, parser: false };
            let mut full = lay.template.clone();
            for (i, &v) in vals.iter().enumerate() {
                full[lay.cell[i + 1] as usize] = v & mask(lay.width[i + 1]);
            }
            let env = Env { cells: &full, params: &[], frame: &[], pos: 0 };
            let (mut fused, mut generic) = (Code::default(), Code { no_fuse: true, ..Code::default() });
            let (fc, gc) = (fused.compile_truth(&tree, &sc, "t").unwrap(), generic.compile_truth(&tree, &sc, "t").unwrap());
            prop_assert!(!generic.ins.iter().any(|i| matches!(i, Ins::CmpFC(..))));
            let (fv, fvw) = (fused.compile(&tree, &sc, "t").unwrap().0, fused.compile(&tree, &sc, "t").unwrap().0.for_bits(1));
            let (gv, gvw) = (generic.compile(&tree, &sc, "t").unwrap().0, generic.compile(&tree, &sc, "t").unwrap().0.for_bits(1));
            let ev = |code: &Code, e: Expr| { let mut w = u32::MAX; (code.eval(e, &env, &mut w).unwrap(), w) };
            for (a, b) in [(fc, gc), (fv, gv), (fvw, gvw)] {
                let want = ev(&generic, b);
                prop_assert_eq!(ev(&fused, a), want, "{}", tree);
                // and the fused code through the stack machine, not its fast form
                prop_assert_eq!(ev(&fused, Expr { fast: Fast::No, ..a }), want, "{}", tree);
            }
        }
    }

    #[test]
    fn comparisons_of_a_field_with_a_constant_are_fused() {
        let lay = layout();
        let sc = Scope { lay: &lay, stacks: &[], unions: &[], params: None, parser: false };
        let mut code = Code::default();
        for t in [json!(["==", f(2), c(5)]), json!(["not", ["!=", ["&", f(3), c(0xff)], c(7)]]), json!(["d2b", f(1)])] {
            let e = code.compile_truth(&t, &sc, "t").unwrap();
            assert!(matches!(code.ins[e.start as usize..e.end as usize], [Ins::CmpFC(..)]), "{t}");
            assert!(matches!(e.fast, Fast::MaskEq(..) | Fast::MaskNe(..)), "{t}");
        }
    }
}

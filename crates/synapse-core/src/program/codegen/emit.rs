//! [`emit`]: the Rust source of a module that runs one linked program per
//! packet, for the subset [`super::unsupported`] accepts.
//!
//! The source is driven by the program, not a template: every PHV cell the
//! program reads or writes is a local (`c<cell>`, `u64` up to 64 bits);
//! the parser is a loop over its states with each header read at fixed
//! offsets from its start (only the fields the program reads); each
//! pipeline a loop over its nodes, a table building its key straight into
//! the visit record and probing the linked program's own lookup structure
//! (entries stay the control plane's), its possible actions inline (which
//! action an entry names is the control plane's, so every action is
//! written for every table); simple_switch's flow for a unicast packet; the
//! deparser as the frame's bytes with the written fields patched (or header
//! by header, when the deparser's order may differ from the frame's or
//! headers come and go: see [`headers`]).
//!
//! The module's interface (what a loader may rely on):
//! `pub struct Gen<'p>`, `Gen::link(&Program) -> Result<Gen, String>`
//! (refuses a program whose [`Program::shape_hash`] differs) and
//! `Gen::run(&mut self, frame, ingress_port, &mut Visits, Option<&mut Outputs>) -> Outcome`,
//! with the interpreter's visits, outputs, outcome and counters.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use super::super::action::{Dst, Op, Src};
use super::super::control::Node;
use super::super::exec::{Program, NONE};
use super::super::expr::{Expr, Fast, Ins};
use super::super::externs::{Extern, Val};
use super::super::flow::Meta;
use super::super::gencrate::{fnv, FNV0};
use super::super::parser::{POp, Part, MAX_STATES};

mod ext;
pub(super) use ext::extern_ok;
pub(super) mod headers;

/// What an expression is evaluated in: the parser (a lookahead past the
/// frame rejects the packet) or an action (its data at `p.data[d + i]`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Parser,
    Action,
    Pipe,
}

struct Gen<'a> {
    p: &'a Program,
    /// Cell -> width (bits) of the field it holds.
    width: BTreeMap<u32, u32>,
    /// Cells the code holds in locals.
    cells: BTreeSet<u32>,
    /// Packet header fields written anywhere: (header, field index).
    dirty: BTreeSet<(u32, u32)>,
    /// Cells written anywhere; headers extracted anywhere.
    written: BTreeSet<u32>,
    extracted: BTreeSet<u32>,
    too_short: u32,
    /// Headers made valid, invalid or copied into, and the copies that keep
    /// the frame's bytes (dst, src): see [`headers`].
    built: BTreeSet<u32>,
    copies: BTreeSet<(u32, u32)>,
}

fn hex(v: u128) -> String {
    if v < 10 {
        format!("{v}")
    } else {
        format!("{v:#x}")
    }
}

fn mask(w: u32) -> u128 {
    if w >= 128 {
        u128::MAX
    } else {
        (1u128 << w) - 1
    }
}

impl<'a> Gen<'a> {
    fn new(p: &'a Program) -> Gen<'a> {
        let mut width = BTreeMap::new();
        for (s, &c) in p.lay.cell.iter().enumerate() {
            if !p.lay.varbit[s] {
                width.insert(c, p.lay.width[s]);
            }
        }
        for h in &p.headers {
            width.insert(h.valid, 1);
        }
        Gen { p, width, cells: BTreeSet::new(), dirty: BTreeSet::new(), written: BTreeSet::new(), extracted: BTreeSet::new(), too_short: p.errors.too_short,
              built: BTreeSet::new(), copies: BTreeSet::new() }
    }

    fn ty(&self, c: u32) -> &'static str {
        if self.width.get(&c).copied().unwrap_or(128) <= 64 {
            "u64"
        } else {
            "u128"
        }
    }

    /// Cell `c` read as a `W` (`u64` or `u128`).
    fn cell(&mut self, c: u32, w: &str) -> String {
        self.cells.insert(c);
        if self.ty(c) == w {
            format!("c{c}")
        } else {
            format!("(c{c} as {w})")
        }
    }

    /// `cells[dst] = v & mask` (v a `u128` or `u64` expression of type `vt`), and the deparser's mark.
    fn assign(&mut self, dst: Dst, v: &str, vt: &str, m: u128) -> String {
        let c = dst.cell;
        self.cells.insert(c);
        self.written.insert(c);
        let t = self.ty(c);
        let fits = t == "u64" && m <= u64::MAX as u128;
        let val = match (vt, fits) {
            ("u64", true) => format!("{v} & {}", hex(m)),
            (_, true) => format!("(({v}) as u64) & {}", hex(m)),
            (_, false) => format!("(({v}) as u128 & {}) as {t}", hex(m)),
        };
        let mut s = format!("c{c} = {val};");
        if dst.hdr != NONE {
            let f = dst.fbit.trailing_zeros(); // 64: a field past the 64th, refused by `module`
            self.dirty.insert((dst.hdr, f));
            write!(s, " d{}_{f} = true;", dst.hdr).unwrap();
        }
        s
    }

    /// An expression's value as a `W`: its fast form, else its stack code
    /// turned into one Rust expression (jumps into `if`s).
    fn expr(&mut self, e: Expr, ctx: Ctx) -> Result<(String, &'static str), String> {
        let fast = |_: &mut Self, s: String| -> Result<(String, &'static str), String> { Ok((s, "u128")) };
        match e.fast {
            Fast::No => {}
            Fast::Field(x) => {
                let s = self.cell(x, "u128");
                return fast(self, s);
            }
            Fast::Const(k) => return fast(self, format!("{}u128", hex(k))),
            Fast::Param(i) => return fast(self, format!("p.data[d + {i}]")),
            Fast::ShrAnd(x, s, m) => {
                let c = self.cell(x, "u128");
                return fast(self, format!("(({c} >> {s}) & {})", hex(m)));
            }
            Fast::AddAnd(x, k, m) => {
                let c = self.cell(x, "u128");
                return fast(self, format!("({c}.wrapping_add({}) & {})", hex(k), hex(m)));
            }
            Fast::MaskEq(x, m, k) => {
                let c = self.cell(x, "u128");
                return fast(self, format!("(({c} & {}) == {}) as u128", hex(m), hex(k)));
            }
            Fast::MaskNe(x, m, k) => {
                let c = self.cell(x, "u128");
                return fast(self, format!("(({c} & {}) != {}) as u128", hex(m), hex(k)));
            }
            Fast::Look(off, w) => return Ok((self.look(off, w, ctx)?, "u128")),
        }
        let w = if e.narrow { "u64" } else { "u128" };
        let mut stack = Vec::new();
        self.code(e.start as usize, e.end as usize, &mut stack, w, ctx)?;
        if stack.len() != 1 {
            return Err(format!("an expression leaving {} values", stack.len()));
        }
        Ok((stack.pop().unwrap(), w))
    }

    fn look(&mut self, off: u32, w: u32, ctx: Ctx) -> Result<String, String> {
        if ctx != Ctx::Parser {
            return Err("a lookahead outside the parser".into());
        }
        let ts = self.too_short;
        let (b, sh) = (off / 8, off % 8);
        let nb = (sh + w).div_ceil(8);
        if w == 0 || nb > 16 {
            return Ok(format!("{{ let Some(v) = look(frame, pos, {off}, {w}) else {{ err = {ts}; break 'parse; }}; v }}"));
        }
        // the bytes the bits lie in, read at once (`w` bits after bit `sh` of byte `pos + b`)
        let bytes: Vec<String> = (0..nb).map(|i| format!("frame[pos + {}]", b + i)).collect();
        let pad = vec!["0".to_string(); 16 - nb as usize];
        let read = if nb == 1 { format!("{} as u128", bytes[0]) } else { format!("u128::from_be_bytes([{}])", [pad, bytes].concat().join(", ")) };
        let shr = nb * 8 - sh - w;
        Ok(format!("{{ if pos + {} > n {{ err = {ts}; break 'parse; }} (({read}) >> {shr}) & {} }}", b + nb, hex(mask(w))))
    }

    /// `ins[pc..end]` evaluated symbolically onto `st` (Rust expressions of type `w`).
    fn code(&mut self, mut pc: usize, end: usize, st: &mut Vec<String>, w: &'static str, ctx: Ctx) -> Result<(), String> {
        let code = &self.p.code;
        let (i, sw) = if w == "u64" { ("i64", "64") } else { ("i128", "128") };
        while pc < end {
            let ins = code.ins[pc];
            pc += 1;
            macro_rules! pop {
                () => {
                    st.pop().ok_or("an expression popping an empty stack")?
                };
            }
            macro_rules! bin {
                ($f:expr) => {{
                    let b = pop!();
                    let a = pop!();
                    #[allow(clippy::redundant_closure_call)]
                    st.push(($f)(a, b));
                }};
            }
            match ins {
                Ins::Field(c) => {
                    let s = self.cell(c, w);
                    st.push(s)
                }
                Ins::CmpFC(c, j) => {
                    let (m, k, eq) = code.cmps[j as usize];
                    let s = self.cell(c, "u128");
                    st.push(format!("((({s} & {}) == {}) == {eq}) as {w}", hex(m), hex(k)))
                }
                Ins::Const(k) => st.push(format!("({} as {w})", hex(code.consts[k as usize]) + "u128")),
                Ins::Param(k) => st.push(format!("(p.data[d + {k}] as {w})")),
                Ins::Look(off, n) => {
                    let s = self.look(off, n, ctx)?;
                    st.push(format!("({s} as {w})"))
                }
                Ins::StackField(k) => {
                    let (next, cells) = code.stack_fields[k as usize].clone();
                    let n = self.cell(next, "u64");
                    let last = cells.len() - 1;
                    let mut arms = String::new();
                    for (idx, &c) in cells.iter().enumerate().take(last) {
                        let v = self.cell(c, w);
                        write!(arms, "{} => {v}, ", idx + 1).unwrap();
                    }
                    let v = self.cell(cells[last], w);
                    st.push(format!("(match {n} {{ {arms}_ => {v} }})"))
                }
                Ins::LastIndex(c) => {
                    let s = self.cell(c, w);
                    st.push(format!("{s}.wrapping_sub(1)"))
                }
                Ins::Size(c) => {
                    let s = self.cell(c, w);
                    st.push(s)
                }
                Ins::ValidUnion(u) => {
                    let cs = code.unions[u as usize].clone();
                    let vs: Vec<String> = cs.iter().map(|&c| self.cell(c, "u64")).collect();
                    st.push(format!("(({}) != 0) as {w}", vs.join(" | ")))
                }
                Ins::Inexact(..) => return Err("an expression the executor cannot compute exactly".into()),
                Ins::Add => bin!(|a, b| format!("{a}.wrapping_add({b})")),
                Ins::Sub => bin!(|a, b| format!("{a}.wrapping_sub({b})")),
                Ins::Mul => bin!(|a, b| format!("{a}.wrapping_mul({b})")),
                Ins::And => bin!(|a, b| format!("({a} & {b})")),
                Ins::Or => bin!(|a, b| format!("({a} | {b})")),
                Ins::Xor => bin!(|a, b| format!("({a} ^ {b})")),
                Ins::Shl => bin!(|a, b| format!("shl{sw}({a}, {b})")),
                Ins::ShrU => bin!(|a, b| format!("shr{sw}({a}, {b})")),
                Ins::ShrS => bin!(|a, b| format!("((({a}) as {i}) >> ({b}).min({sw} - 1)) as {w}")),
                Ins::DivU => bin!(|a, b| format!("({a}).checked_div({b}).unwrap_or(0)")),
                Ins::ModU => bin!(|a, b| format!("({a}).checked_rem({b}).unwrap_or(0)")),
                Ins::DivS => bin!(|a, b| format!("div_s{sw}({a}, {b})")),
                Ins::ModS => bin!(|a, b| format!("mod_s{sw}({a}, {b})")),
                Ins::Eq => bin!(|a, b| format!("({a} == {b}) as {w}")),
                Ins::Ne => bin!(|a, b| format!("({a} != {b}) as {w}")),
                Ins::LtU => bin!(|a, b| format!("({a} < {b}) as {w}")),
                Ins::LeU => bin!(|a, b| format!("({a} <= {b}) as {w}")),
                Ins::GtU => bin!(|a, b| format!("({a} > {b}) as {w}")),
                Ins::GeU => bin!(|a, b| format!("({a} >= {b}) as {w}")),
                Ins::LtS => bin!(|a, b| format!("(({a} as {i}) < ({b} as {i})) as {w}")),
                Ins::LeS => bin!(|a, b| format!("(({a} as {i}) <= ({b} as {i})) as {w}")),
                Ins::GtS => bin!(|a, b| format!("(({a} as {i}) > ({b} as {i})) as {w}")),
                Ins::GeS => bin!(|a, b| format!("(({a} as {i}) >= ({b} as {i})) as {w}")),
                Ins::Not => {
                    let a = pop!();
                    st.push(format!("({a} == 0) as {w}"))
                }
                Ins::BNot => {
                    let a = pop!();
                    st.push(format!("!{a}"))
                }
                Ins::Truth => {
                    let a = pop!();
                    st.push(format!("({a} != 0) as {w}"))
                }
                Ins::Tcm(n) => {
                    let a = pop!();
                    st.push(format!("tcm{sw}({a}, {n})"))
                }
                Ins::SatS(n) => {
                    let a = pop!();
                    st.push(format!("sat_s{sw}({a}, {n})"))
                }
                Ins::SatU(n) => {
                    let a = pop!();
                    st.push(format!("sat_u{sw}({a}, {n})"))
                }
                Ins::AndJump(t) | Ins::OrJump(t) => {
                    // pop; if decided, 0 (and) / 1 (or), else the rest up to t
                    let a = pop!();
                    let depth = st.len();
                    self.code(pc, t as usize, st, w, ctx)?;
                    if st.len() != depth + 1 {
                        return Err("a short-circuit operand of another shape".into());
                    }
                    let b = st.pop().unwrap();
                    st.push(match ins {
                        Ins::AndJump(_) => format!("(if {a} == 0 {{ 0 }} else {{ {b} }})"),
                        _ => format!("(if {a} != 0 {{ 1 }} else {{ {b} }})"),
                    });
                    pc = t as usize;
                }
                Ins::JumpZero(t) => {
                    // cond ? x : y as p4c's expressions compile it: `JumpZero(else) x Jump(end) y`
                    let c = pop!();
                    let t = t as usize;
                    let Some(&Ins::Jump(e)) = code.ins.get(t.wrapping_sub(1)) else {
                        return Err("a conditional of another shape".into());
                    };
                    let depth = st.len();
                    self.code(pc, t - 1, st, w, ctx)?;
                    self.code(t, e as usize, st, w, ctx)?;
                    if st.len() != depth + 2 {
                        return Err("a conditional of another shape".into());
                    }
                    let y = st.pop().unwrap();
                    let x = st.pop().unwrap();
                    st.push(format!("(if {c} != 0 {{ {x} }} else {{ {y} }})"));
                    pc = e as usize;
                }
                Ins::Jump(_) => return Err("a jump outside a conditional".into()),
            }
        }
        Ok(())
    }

    fn val(&mut self, v: Val, ctx: Ctx) -> Result<String, String> {
        Ok(match v {
            Val::Cell(c) => self.cell(c, "u128"),
            Val::Expr(e) => {
                let (s, t) = self.expr(e, ctx)?;
                if t == "u128" { s } else { format!("(({s}) as u128)") }
            }
        })
    }

    /// One op; `exit` breaks out of the action's block `'a`.
    fn op(&mut self, op: &Op, ctx: Ctx, out: &mut String) -> Result<(), String> {
        let s = match op {
            &Op::SetConst { dst, v } => self.assign(dst, &format!("{}u128", hex(v)), "u128", u128::MAX),
            &Op::Copy { dst, src, mask } => {
                let t = self.ty(src);
                let v = self.cell(src, t);
                self.assign(dst, &v, t, mask)
            }
            &Op::SetParam { dst, param, mask } => self.assign(dst, &format!("p.data[d + {param}]"), "u128", mask),
            &Op::Set { dst, mask, e } => {
                let (v, t) = self.expr(e, ctx)?;
                self.assign(dst, &v, t, mask)
            }
            Op::Moves(f) => {
                for m in f.moves.iter() {
                    let one = match m.from {
                        Src::Const => Op::SetConst { dst: m.dst, v: m.v },
                        Src::Cell => Op::Copy { dst: m.dst, src: m.src, mask: m.v },
                        Src::Param => Op::SetParam { dst: m.dst, param: m.src, mask: m.v },
                    };
                    self.op(&one, ctx, out)?;
                }
                return Ok(());
            }
            Op::Drop => {
                // mark_to_drop: egress_spec = 511, mcast_grp = 0
                let mut s = String::new();
                if let Some((c, _)) = self.p.std.egress_spec {
                    self.cells.insert(c);
                    write!(s, "c{c} = 511; ").unwrap();
                }
                if let Some((c, _)) = self.p.std.mcast_grp {
                    self.cells.insert(c);
                    write!(s, "c{c} = 0;").unwrap();
                }
                s
            }
            Op::Exit => "break 'a true;".into(),
            Op::Valid { .. } | Op::HdrCopy { .. } | Op::Build(_) => self.header_op(op)?,
            Op::Extern(x) => match &self.p.externs[*x as usize] {
                Extern::NoOp => return Ok(()),
                &Extern::Count { counter, idx } => {
                    let i = self.val(idx, ctx)?;
                    format!("self.ext.count({counter}, {i});")
                }
                &Extern::RegRead { reg, idx, out: o } => {
                    let i = self.val(idx, ctx)?;
                    let set = self.assign(o.dst, "v", "u128", o.mask);
                    format!("if let Some(&v) = self.ext.registers[{reg}].get(({i}) as usize) {{ {set} }}")
                }
                x => self.extern_op(x, ctx)?,
            },
            _ => return Err(format!("op {op:?}")),
        };
        out.push_str(&s);
        out.push('\n');
        Ok(())
    }

    /// Action `a`'s ops as a block evaluating to whether it exited.
    fn action(&mut self, a: usize, ctx: Ctx) -> Result<String, String> {
        let act = &self.p.actions[a];
        let mut body = String::new();
        for op in &act.ops {
            self.op(op, ctx, &mut body)?;
        }
        let ind = "                ";
        let lines: String = body.lines().map(|l| format!("{ind}{l}\n")).collect();
        if !act.ops.iter().any(|o| matches!(o, Op::Exit)) {
            return Ok(format!("{{\n{lines}{}}}", &ind[4..]));
        }
        // exit: the pipeline ends
        let lines: String = body.lines().map(|l| format!("{ind}    {l}\n")).collect();
        Ok(format!("{{\n{ind}let exited = 'a: {{\n{lines}{ind}    false\n{ind}}};\n{ind}if exited {{\n{ind}    nd = -1;\n{ind}}}\n{}}}", &ind[4..]))
    }

    /// A field's load from the header's bytes `h` (a `[u8; N]`): `width` bits at `bit`.
    fn load(bit: u32, width: u32) -> String {
        let (b, sh) = ((bit / 8) as usize, bit % 8);
        let nb = (sh + width).div_ceil(8) as usize;
        let bytes: Vec<String> = (b..b + nb).map(|i| format!("h[{i}]")).collect();
        let (read, tw) = match nb {
            1 => (bytes[0].clone(), 8),
            2 => (format!("u16::from_be_bytes([{}])", bytes.join(", ")), 16),
            3 | 4 => {
                let pad = vec!["0".to_string(); 4 - nb];
                (format!("u32::from_be_bytes([{}])", [pad, bytes].concat().join(", ")), 32)
            }
            _ => {
                let pad = vec!["0".to_string(); 8 - nb];
                (format!("u64::from_be_bytes([{}])", [pad, bytes].concat().join(", ")), 64)
            }
        };
        let shr = nb as u32 * 8 - sh - width;
        let mut s = format!("({read} as u64)");
        if shr > 0 {
            s = format!("({s} >> {shr})");
        }
        if width < tw - (tw - nb as u32 * 8) || sh > 0 {
            s = format!("({s} & {})", hex(mask(width)));
        }
        s
    }

    fn extract(&mut self, h: u32, out: &mut String, indent: &str) {
        let hd = &self.p.headers[h as usize];
        self.extracted.insert(h);
        let bytes = hd.bytes;
        let mut s = format!("{indent}if pos + {bytes} > n {{ err = {}; break 'parse; }}\n", self.too_short);
        if !hd.loads.is_empty() {
            writeln!(s, "{indent}let h: &[u8; {bytes}] = frame[pos..pos + {bytes}].try_into().unwrap();").unwrap();
        }
        let loads = hd.loads.clone();
        for f in &loads {
            self.cells.insert(f.cell);
            let v = Self::load(f.bit, f.width);
            let t = self.ty(f.cell);
            let v = if t == "u64" { v } else { format!("{v} as u128") };
            writeln!(s, "{indent}c{} = {v};", f.cell).unwrap();
        }
        self.cells.insert(hd.valid);
        write!(s, "{indent}c{} = 1; s{h} = pos;", hd.valid).unwrap();
        if let Some(u) = hd.union {
            // the union's other members invalid
            for &o in &self.p.unions[u as usize] {
                if o != h {
                    let v = self.p.headers[o as usize].valid;
                    self.cells.insert(v);
                    write!(s, " c{v} = 0;").unwrap();
                }
            }
        }
        for fi in 0..hd.fields.len() as u32 {
            if self.dirty.contains(&(h, fi)) {
                write!(s, " d{h}_{fi} = false;").unwrap();
            }
        }
        writeln!(s, " pos += {bytes};").unwrap();
        out.push_str(&s);
    }
}

impl Program {
    /// A hash of what generated code is written from: the description
    /// without its entries (layout, headers, parser, actions, nodes, keys,
    /// deparser, externs' declarations and calculations' inputs, tables'
    /// selectors and direct counters and meters), not the tables' entries, defaults
    /// or the switch's configuration, which stay the control plane's.
    pub fn shape_hash(&self) -> u64 {
        let tables: Vec<_> = self.tables.iter().map(|t| (&t.name, t.keyed, &t.key, t.words, (t.selector, t.counters, &t.meter))).collect();
        let hot: Vec<_> = self.hot.iter().map(|h| (h.keys, h.keyed, h.nkeys, h.words, h.plain, h.one_word)).collect();
        let c = &self.code;
        let code = (&c.ins, &c.consts, &c.stack_fields, &c.unions, &c.reasons.names, c.div_zero, &c.cmps);
        let regs: Vec<_> = self.objs.registers.iter().map(|r| (&r.0, r.1, r.2)).collect();
        let calcs: Vec<_> = self.objs.calcs.iter().map(|c| (&c.name, &c.inputs)).collect();
        let s = format!("{:?}", ((&self.lay, &self.headers, &self.stacks, &self.unions, &self.parser, &self.actions, &self.nodes),
                                  (&self.pipelines, &self.deparser, code, &self.std, &self.errors, &self.externs, &self.keyed),
                                  (&self.key_hot, tables, hot, &self.objs.meta, self.objs.ingress, self.objs.egress, regs),
                                  (&self.objs.counters, calcs)));
        fnv(FNV0, s.as_bytes())
    }
}

/// Which headers' order in the frame is the deparser's on every parser
/// path: every header extracted is deparsed, and along the parse graph
/// each state's extracts come after those of every state before it in
/// the deparser's order (a stack's elements in theirs). Then the
/// deparsed packet is the frame with the written fields patched.
fn frame_order(p: &Program) -> bool {
    let rank = |h: u32| p.deparser.iter().position(|&x| x == h);
    // a union member's extraction may invalidate another one extracted before it
    let extracted = |h: u32| p.parser.states.iter().flat_map(|s| &s.ops).any(|o| match o {
        POp::Extract(x) => *x == h,
        POp::ExtractStack(k) => p.stacks[*k as usize].headers.contains(&h),
        _ => false,
    });
    if p.unions.iter().any(|u| u.iter().filter(|&&h| extracted(h)).count() > 1) {
        return false;
    }
    // per state: its extracts' (rank, stack) in order
    let mut units: Vec<Vec<(usize, Option<u32>)>> = Vec::new();
    for s in &p.parser.states {
        let mut u = Vec::new();
        for op in &s.ops {
            match op {
                POp::Extract(h) => match rank(*h) {
                    Some(r) => u.push((r, None)),
                    None => return false,
                },
                POp::ExtractStack(k) => {
                    let hs = &p.stacks[*k as usize].headers;
                    let Some(r0) = rank(hs[0]) else { return false };
                    if hs.iter().enumerate().any(|(i, &h)| rank(h) != Some(r0 + i)) {
                        return false;
                    }
                    u.push((r0, Some(*k)));
                }
                _ => {}
            }
        }
        if u.windows(2).any(|w| !(w[0].0 < w[1].0 || (w[0].1.is_some() && w[0] == w[1]))) {
            return false;
        }
        units.push(u);
    }
    let n = p.parser.states.len();
    let next = |s: usize| -> Vec<usize> {
        let st = &p.parser.states[s];
        st.transitions.iter().map(|t| t.2).chain(st.default).filter(|&x| x >= 0).map(|x| x as usize).collect()
    };
    for s in 0..n {
        // states reachable from s by one transition or more
        let mut seen = vec![false; n];
        let mut todo = next(s);
        while let Some(t) = todo.pop() {
            if !std::mem::replace(&mut seen[t], true) {
                todo.extend(next(t));
            }
        }
        for (t, _) in seen.iter().enumerate().filter(|x| *x.1) {
            for a in &units[s] {
                for b in &units[t] {
                    if !(a.0 < b.0 || (a.1.is_some() && a == b)) {
                        return false;
                    }
                }
            }
        }
    }
    true
}

/// The Rust source of a module running `p` per packet (see the module
/// doc), or what of `p` is outside the subset ([`super::unsupported`]'s lines).
pub fn emit(p: &Program) -> Result<String, Vec<String>> {
    let why = super::unsupported(p);
    if !why.is_empty() {
        return Err(why);
    }
    module(p).map_err(|e| vec![e])
}

/// The parser's states as the arms of a `match` on the state.
fn parser(g: &mut Gen) -> Result<String, String> {
    let p = g.p;
    let mut parse = String::new();
    let st = &p.parser.states;
    for (si, s) in st.iter().enumerate() {
        writeln!(parse, "                {si} => {{ // {}", s.name).unwrap();
        let ind = "                    ";
        for op in &s.ops {
            match op {
                POp::Extract(h) => g.extract(*h, &mut parse, ind),
                POp::ExtractStack(k) => {
                    let stack = &p.stacks[*k as usize];
                    g.cells.insert(stack.next);
                    writeln!(parse, "{ind}match c{} {{", stack.next).unwrap();
                    for (i, &h) in stack.headers.iter().enumerate() {
                        writeln!(parse, "{ind}    {i} => {{").unwrap();
                        g.extract(h, &mut parse, &format!("{ind}        "));
                        writeln!(parse, "{ind}    }}").unwrap();
                    }
                    writeln!(parse, "{ind}    _ => {{ err = {}; break 'parse; }}", p.errors.stack_out_of_bounds).unwrap();
                    writeln!(parse, "{ind}}}").unwrap();
                    writeln!(parse, "{ind}c{} += 1;", stack.next).unwrap();
                }
                POp::Do(op) => {
                    let mut s = String::new();
                    g.op(op, Ctx::Parser, &mut s)?;
                    write!(parse, "{ind}{s}").unwrap();
                }
                POp::Verify { cond, error } => {
                    let (c, _) = g.expr(*cond, Ctx::Parser)?;
                    let (e, _) = g.expr(*error, Ctx::Parser)?;
                    writeln!(parse, "{ind}if {c} == 0 {{ err = ({e}) as u32; break 'parse; }}").unwrap();
                }
                POp::Advance(e) => {
                    let s = g.advance(*e)?;
                    writeln!(parse, "{ind}{s}").unwrap();
                }
                POp::ExtractVl(..) => return Err(format!("parser state {}: varbit", s.name)),
            }
        }
        // select: the key's parts, each padded to whole bytes
        let bits: u32 = s.key.iter().map(|k| match *k {
            Part::Field { w, .. } | Part::Look { w, .. } | Part::Stack { w, .. } => w.div_ceil(8) * 8,
        }).sum();
        let big = bits > 64 || s.transitions.iter().any(|t| t.0 > u64::MAX as u128 || t.1 > u64::MAX as u128);
        let kt = if big { "u128" } else { "u64" };
        let then = |x: i32| -> String {
            format!("{x}")
        };
        if s.key.is_empty() {
            match s.default {
                Some(d) => writeln!(parse, "{ind}s = {};", then(d)).unwrap(),
                None => writeln!(parse, "{ind}s = -2;").unwrap(),
            }
        } else {
            let mut parts = Vec::new();
            let mut shift_after = Vec::new();
            for k in &s.key {
                let (v, w) = match *k {
                    Part::Field { cell, w } => (g.cell(cell, kt), w),
                    Part::Look { off, w } => (format!("({} as {kt})", g.look(off, w, Ctx::Parser)?), w),
                    Part::Stack { i, w } => {
                        // the stack's last extracted element (the last one when none is)
                        let (next, cells) = p.code.stack_fields[i as usize].clone();
                        let nx = g.cell(next, "u64");
                        let mut arms = String::new();
                        let last = cells.len() - 1;
                        for (idx, &c) in cells.iter().enumerate().take(last) {
                            let v = g.cell(c, kt);
                            write!(arms, "{} => {v}, ", idx + 1).unwrap();
                        }
                        let v = g.cell(cells[last], kt);
                        (format!("(match {nx} {{ {arms}_ => {v} }})"), w)
                    }
                };
                parts.push(v);
                shift_after.push(w.div_ceil(8) * 8);
            }
            // key = ((p0 << w1) | p1) << w2 | p2 ..., a shift of 128 bits or more giving 0
            let mut key = String::new();
            for (i, v) in parts.iter().enumerate() {
                if i == 0 {
                    key = v.clone();
                } else {
                    let sh = shift_after[i];
                    key = if sh >= if big { 128 } else { 64 } { v.clone() } else { format!("(({key}) << {sh}) | {v}") };
                }
            }
            writeln!(parse, "{ind}let key: {kt} = {key};").unwrap();
            let mut chain = String::new();
            for &(v, m, nx) in &s.transitions {
                write!(chain, "if key & {} == {} {{ {} }} else ", hex(m), hex(v), then(nx)).unwrap();
            }
            let dflt = s.default.map_or("-2".to_string(), then);
            writeln!(parse, "{ind}s = {chain}{{ {dflt} }};").unwrap();
        }
        writeln!(parse, "                }}").unwrap();
    }
    Ok(parse)
}

/// The module's source, or the first construct it cannot be written for
/// (beyond [`super::unsupported`]'s own checks, which it relies on).
pub(super) fn module(p: &Program) -> Result<String, String> {
    if p.objs.meta.iter().all(Option::is_none) {
        return Err("no simple_switch metadata (a program run without its packet flow)".into());
    }
    if let Some(&h) = p.deparser.iter().find(|&&h| p.headers[h as usize].metadata) {
        return Err(format!("deparser: metadata header {}", p.headers[h as usize].name));
    }
    let mut g = Gen::new(p);
    let meta = |m: Meta| p.objs.meta[m as usize];
    // The writes are found first (an extract clears its fields' marks): the actions, once.
    let mut actions = Vec::new();
    for a in 0..p.actions.len() {
        actions.push(g.action(a, Ctx::Action)?);
    }
    // parser: generated twice, the second time knowing every field the parser writes
    parser(&mut g)?;
    // a header copied with its frame bytes takes its source's marks: the actions again, knowing them all
    if g.close_marks() {
        actions = (0..p.actions.len()).map(|a| g.action(a, Ctx::Action)).collect::<Result<_, _>>()?;
    }
    let parse = parser(&mut g)?;
    // pipelines: every node, in each (which follow which is the entries')
    let mut pipes = Vec::new();
    for pi in [p.objs.ingress, p.objs.egress] {
        if pi < 0 {
            pipes.push(String::new());
            continue;
        }
        let init = p.pipelines[pi as usize].1;
        let mut s = format!("        nd = {init};\n        while nd >= 0 {{\n            match nd {{\n");
        for (ni, node) in p.nodes.iter().enumerate() {
            match node {
                Node::Cond(c) => {
                    let e = c.e.ok_or("a condition not lowered")?;
                    let (v, _) = g.expr(e, Ctx::Pipe)?;
                    writeln!(s, "                {ni} => nd = if {v} != 0 {{ {} }} else {{ {} }}, // {}", c.on_true, c.on_false, c.name).unwrap();
                }
                Node::Table(ti) => {
                    let ti = *ti as usize;
                    let th = p.hot[ti];
                    let t = &p.tables[ti];
                    writeln!(s, "                {ni} => {{ // {}", t.name).unwrap();
                    writeln!(s, "                    let th = &self.t[{ti}];").unwrap();
                    if th.keyed == u16::MAX {
                        writeln!(s, "                    let h = th.miss;").unwrap();
                    } else {
                        let keys = &p.key_hot[th.keys as usize..th.keys as usize + th.nkeys as usize];
                        writeln!(s, "                    let at = visits.key_words.len();").unwrap();
                        let mut words = Vec::new();
                        let mut vals = Vec::new();
                        for k in keys {
                            let x = if th.one_word {
                                g.cell(k.cell, "u64")
                            } else {
                                let c = g.cell(k.cell, "u128");
                                if k.mask == u128::MAX && k.shift == 0 { c } else { format!("(({c} & {}) >> {})", hex(k.mask), k.shift) }
                            };
                            let x = if k.valid != u32::MAX {
                                let v = g.cell(k.valid, "u64");
                                format!("if {v} == 0 {{ 0 }} else {{ {x} }}")
                            } else {
                                x
                            };
                            if th.one_word {
                                words.push(format!("({x}) as u32"));
                            } else {
                                let i = vals.len();
                                writeln!(s, "                    let x{i}: u128 = {x};").unwrap();
                                for j in 0..k.words {
                                    words.push(format!("(x{i} >> {}) as u32", 32 * (k.words - 1 - j)));
                                }
                                vals.push(format!("x{i}"));
                            }
                        }
                        if th.one_word && words.len() == 1 {
                            writeln!(s, "                    let w = {};", words[0]).unwrap();
                            writeln!(s, "                    visits.key_words.push(w);").unwrap();
                            writeln!(s, "                    let e = match th.probe {{ Probe::General => self.ix[{ti}].lookup_words(&visits.key_words[at..], &mut self.vals), pr => self.ix[{ti}].lookup_one(pr, w) }};").unwrap();
                        } else {
                            writeln!(s, "                    visits.key_words.extend_from_slice(&[{}]);", words.join(", ")).unwrap();
                            if th.one_word {
                                writeln!(s, "                    let e = self.ix[{ti}].lookup_words(&visits.key_words[at..], &mut self.vals);").unwrap();
                            } else {
                                for (i, v) in vals.iter().enumerate() {
                                    writeln!(s, "                    self.vals[{i}] = {v};").unwrap();
                                }
                                writeln!(s, "                    let e = self.ix[{ti}].lookup(&self.vals, &visits.key_words[at..]);").unwrap();
                            }
                        }
                        writeln!(s, "                    let h = e.map_or(th.miss, |e| p.hits[(th.hits + e) as usize]);").unwrap();
                        s += &g.selector(ti)?;
                        writeln!(s, "                    visits.close({}, e.map_or(-1, |e| e as i32), h.action);", th.keyed).unwrap();
                        s += &g.direct(ti);
                    }
                    writeln!(s, "                    let d = (th.data + h.data) as usize;").unwrap();
                    writeln!(s, "                    nd = h.next;").unwrap();
                    writeln!(s, "                    match h.action {{").unwrap();
                    for (a, act) in p.actions.iter().enumerate().filter(|a| !a.1.ops.is_empty()) {
                        writeln!(s, "                        {a} => a{a}!(d), // {}", act.name).unwrap();
                    }
                    writeln!(s, "                        _ => {{}}\n                    }}\n                }}").unwrap();
                }
            }
        }
        s.push_str("                _ => unreachable!(),\n            }\n        }\n");
        pipes.push(s);
    }
    // the flow's metadata
    let set_meta = |g: &mut Gen, m: Meta, v: &str| -> String {
        match meta(m) {
            Some((c, _, mk)) if g.cells.contains(&c) => {
                let t = g.ty(c);
                format!("c{c} = (({v}) as u128 & {}) as {t};\n", hex(mk))
            }
            _ => String::new(),
        }
    };
    let get_meta = |g: &mut Gen, m: Meta| -> String {
        match meta(m) {
            Some((c, _, _)) => format!("({} as u64)", g.cell(c, "u64")),
            None => "0u64".into(),
        }
    };
    let espec = get_meta(&mut g, Meta::EgressSpec);
    let mut ingress_meta = String::new();
    for (m, v) in [(Meta::IngressPort, "ingress_port"), (Meta::PacketLength, "n"), (Meta::Length, "n"), (Meta::InstanceType, "0")] {
        ingress_meta += &set_meta(&mut g, m, v);
    }
    let perr = match set_meta(&mut g, Meta::ParserError, "err") {
        s if s.is_empty() => s,
        s => format!("        if err != 0 {{\n            {s}        }}\n"),
    } + &g.verify_checksums()?;
    let mut egress_meta = String::new();
    let len = g.length_now();
    for (m, v) in [(Meta::EgressPort, "eport"), (Meta::EgressSpec, "self.drop_port + 1"), (Meta::PacketLength, len.as_str())] {
        egress_meta += &set_meta(&mut g, m, v);
    }
    // deparser
    let whole = frame_order(p) && !g.reshapes();
    let mut dep = g.update_checksums()?;
    let patch = |g: &Gen, h: u32, base: &str| -> String {
        let hd = &p.headers[h as usize];
        let mut s = String::new();
        for (fi, f) in hd.fields.iter().enumerate() {
            if !g.dirty.contains(&(h, fi as u32)) {
                continue;
            }
            let c = f.cell;
            let body = if f.bit % 8 == 0 && f.width % 8 == 0 && f.width <= 64 {
                let nb = f.width / 8;
                format!("o[{base} + {}..{base} + {}].copy_from_slice(&(c{c} as u64).to_be_bytes()[{}..]);", f.bit / 8, f.bit / 8 + nb, 8 - nb)
            } else {
                format!("put_bits(&mut o[{base}..], {}, {}, c{c} as u128);", f.bit, f.width)
            };
            writeln!(s, "            if d{h}_{fi} {{ {body} }}").unwrap();
        }
        s
    };
    if whole {
        dep.push_str("            o.extend_from_slice(frame);\n");
        for &h in &p.deparser {
            let pt = patch(&g, h, &format!("at + s{h}"));
            if !pt.is_empty() {
                let v = p.headers[h as usize].valid;
                writeln!(dep, "            if c{v} != 0 {{\n{pt}            }}").unwrap();
            }
        }
    } else {
        for &h in &p.deparser {
            let hd = &p.headers[h as usize];
            let v = hd.valid;
            g.cells.insert(v);
            let pt = patch(&g, h, "b");
            if g.built.contains(&h) {
                dep += &g.emit_built(h, &pt);
                continue;
            }
            writeln!(dep, "            if c{v} != 0 {{\n            let b = o.len();\n            o.extend_from_slice(&frame[s{h}..s{h} + {}]);\n{pt}            }}", hd.bytes).unwrap();
        }
        dep.push_str("            o.extend_from_slice(&frame[pos.min(n)..]);\n");
    }
    // what the flow would do beyond a unicast packet, and the time: not generated
    for m in [Meta::McastGrp, Meta::Priority, Meta::CloneSession, Meta::CloneFieldList, Meta::Resubmit, Meta::Recirculate, Meta::Learn] {
        // (mark_to_drop's 0 to mcast_grp is not an assignment)
        if let Some((c, _, _)) = meta(m) {
            if g.written.contains(&c) {
                return Err(format!("writes simple_switch's {m:?}"));
            }
        }
    }
    if let Some(&(h, _)) = g.dirty.iter().find(|d| d.1 >= 64) {
        return Err(format!("header {}: a field past the 64th written", p.headers[h as usize].name));
    }
    for m in [Meta::IngressTimestamp, Meta::EgressTimestamp] {
        if let Some((c, _, _)) = meta(m) {
            if g.cells.contains(&c) {
                return Err(format!("reads simple_switch's {m:?}"));
            }
        }
    }
    // the locals: every cell used, fresh; each header's source; each written field's mark
    let mut locals = String::new();
    for &c in &g.cells {
        writeln!(locals, "        let mut c{c}: {} = {};", g.ty(c), hex(p.lay.template[c as usize])).unwrap();
    }
    for &h in g.extracted.iter().chain(&p.deparser).chain(&g.built).collect::<BTreeSet<_>>() {
        let at = if g.built.contains(&h) { "usize::MAX" } else { "0" };
        writeln!(locals, "        let mut s{h}: usize = {at}; // {}", p.headers[h as usize].name).unwrap();
    }
    for &(h, f) in &g.dirty {
        writeln!(locals, "        let mut d{h}_{f} = false; // {}.{}", p.headers[h as usize].name,
                 p.lay.names[p.headers[h as usize].fields[f as usize].slot as usize]).unwrap();
    }
    // each action once, as a macro over its data's place (the locals are the run's)
    let mut macros = String::new();
    for (a, body) in actions.iter().enumerate().filter(|a| !p.actions[a.0].ops.is_empty()) {
        let body = body.replace("p.data[d + ", "p.data[$d + ");
        writeln!(macros, "        // {}\n        macro_rules! a{a} {{\n            ($d:ident) => {{{body}}}\n        }}", p.actions[a].name).unwrap();
    }
    let ntab = p.tables.len();
    let hash = p.shape_hash();
    let nvals = p.max_key_fields.max(1);
    let (ingress, egress) = (&pipes[0], &pipes[1]);
    let init = p.parser.init;
    let src = &p.source;
    Ok(format!(r#"// @generated by `synapse_core::program::codegen::emit` from the description of {src:?};
// do not edit: regenerate (see docs/program-layer-streaming.md).
#[allow(unused_imports)]
use synapse_core::program::control::NO_ACTION;
use synapse_core::program::exec::Program;
#[allow(unused_imports)]
use synapse_core::program::externs::{{hash_offset, ExternState}};
use synapse_core::program::flow::Pass;
use synapse_core::program::run::{{Outcome, Outputs}};
use synapse_core::program::table::{{Index, Probe, TableHot}};
use synapse_core::program::visits::Visits;

/// `Program::shape_hash` of the program this code runs.
pub const SHAPE: u64 = {hash:#018x};

/// The program, specialised; entries, defaults and the switch's configuration stay the linked program's.
#[allow(dead_code)]
pub struct Gen<'p> {{
    p: &'p Program,
    /// Per table: its hot record (entries' places, the miss, the probe) and lookup structure.
    t: [TableHot; {ntab}],
    ix: [&'p Index; {ntab}],
    vals: Vec<u128>,
    drop_port: u64,
    /// The externs' state (registers, counters, meters, the random generator), as the interpreter's.
    pub ext: ExternState,
    /// PHV cells a calculation reads, stored before it runs.
    sc: Vec<u128>,
    now_us: u64,
    /// The last dropped packet's pipeline: 1 ingress, 2 egress.
    dropped_in: u32,
}}

impl<'p> Gen<'p> {{
    /// This code over `p`, if `p` is the program it was generated from.
    pub fn link(p: &'p Program) -> Result<Gen<'p>, String> {{
        if p.shape_hash() != SHAPE {{
            return Err(format!("not the program this code was generated from (shape {{:#018x}}, expected {{SHAPE:#018x}})", p.shape_hash()));
        }}
        if p.objs.flow.priority_queues == 0 {{
            return Err("no priority queue: every packet would be dropped".into());
        }}
        Ok(Gen {{
            p,
            t: std::array::from_fn(|i| p.hot[i]),
            ix: std::array::from_fn(|i| &p.indexes[i]),
            vals: vec![0; {nvals}],
            drop_port: p.objs.flow.drop_port,
            ext: ExternState::new(p),
            sc: p.lay.template.clone(),
            now_us: 0,
            dropped_in: 0,
        }})
    }}

    /// The next packets arrive at `now_ps` (the time meters see).
    #[allow(dead_code)]
    pub fn arrive(&mut self, now_ps: u64) {{
        self.now_us = now_ps / 1_000_000;
    }}

    /// The pipeline that dropped the last dropped packet (`RunPacket::drop_reason`).
    #[allow(dead_code)]
    pub fn drop_pipeline(&self) -> u32 {{
        self.dropped_in
    }}

    /// One received frame (as the interpreter's `RunPacket::run`).
    #[allow(unused_mut, unused_variables, unused_assignments, unused_labels, unused_parens, unused_macros, unreachable_code, clippy::all)]
    pub fn run(&mut self, frame: &[u8], ingress_port: u32, visits: &mut Visits, outputs: Option<&mut Outputs>) -> Outcome {{
        let p = self.p;
        let n = frame.len();
        let input = visits.packets() as u32;
        self.ext.pass = Pass {{ ingress_length: n as u64, now_us: self.now_us }};
{locals}        let mut pos = 0usize;
        let mut err = 0u32;
        let mut nd = -1i32;
{macros}{ingress_meta}        // parser
        'parse: {{
            let mut s: i32 = {init};
            let mut visited = 0usize;
            while s >= 0 {{
                match s {{
{parse}                _ => unreachable!(),
                }}
                visited += 1;
                if visited > {MAX_STATES} {{ err = {timeout}; break 'parse; }}
                if s == -2 {{ err = {no_match}; break 'parse; }}
            }}
        }}
{perr}        // ingress
{ingress}        let eport = {espec};
        if eport == self.drop_port {{
            self.dropped_in = 1;
            visits.end_packet();
            return Outcome {{ dropped: true, parser_error: err, outputs: 0 }};
        }}
        // egress
{egress_meta}{egress}        if {espec} == self.drop_port {{
            self.dropped_in = 2;
            visits.end_packet();
            return Outcome {{ dropped: true, parser_error: err, outputs: 0 }};
        }}
        if let Some(out) = outputs {{
            // the deparser
            let o = &mut out.bytes;
            let at = o.len();
{dep}            out.end_packet(eport as u32, input);
        }}
        visits.end_packet();
        Outcome {{ dropped: false, parser_error: err, outputs: 1 }}
    }}
}}

/// `w` bits at bit `off` after byte `pos`, None past the frame's end.
#[allow(dead_code)]
fn look(f: &[u8], pos: usize, off: u32, w: u32) -> Option<u128> {{
    let bit = pos * 8 + off as usize;
    if bit + w as usize > f.len() * 8 {{
        return None;
    }}
    let mut v = 0u128;
    for b in bit..bit + w as usize {{
        v = (v << 1) | ((f[b / 8] >> (7 - b % 8)) & 1) as u128;
    }}
    Some(v)
}}

/// Writes the low `w` bits of `v` at bit `bit` of `o`.
#[allow(dead_code)]
fn put_bits(o: &mut [u8], bit: usize, w: usize, v: u128) {{
    for i in 0..w {{
        let b = bit + i;
        let x = ((v >> (w - 1 - i)) & 1) as u8;
        o[b / 8] = (o[b / 8] & !(0x80 >> (b % 8))) | (x << (7 - b % 8));
    }}
}}

macro_rules! word {{
    ($u:ty, $i:ty, $shl:ident, $shr:ident, $div:ident, $rem:ident, $tcm:ident, $sats:ident, $satu:ident) => {{
        #[allow(dead_code)]
        fn $shl(a: $u, b: $u) -> $u {{ if b >= <$u>::BITS as $u {{ 0 }} else {{ a << b }} }}
        #[allow(dead_code)]
        fn $shr(a: $u, b: $u) -> $u {{ if b >= <$u>::BITS as $u {{ 0 }} else {{ a >> b }} }}
        #[allow(dead_code)]
        fn $div(a: $u, b: $u) -> $u {{
            if b == 0 {{ return 0; }}
            let (a, b) = (a as $i, b as $i);
            let q = a.wrapping_div(b);
            (if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {{ q - 1 }} else {{ q }}) as $u
        }}
        #[allow(dead_code)]
        fn $rem(a: $u, b: $u) -> $u {{
            if b == 0 {{ return 0; }}
            let (a, b) = (a as $i, b as $i);
            let r = a.wrapping_rem(b);
            (if r != 0 && ((r < 0) != (b < 0)) {{ r + b }} else {{ r }}) as $u
        }}
        #[allow(dead_code)]
        fn $tcm(v: $u, w: u32) -> $u {{
            let v = v & if w >= <$u>::BITS {{ <$u>::MAX }} else {{ ((1 as $u) << w) - 1 }};
            if w > 0 && w < <$u>::BITS && (v >> (w - 1)) & 1 == 1 {{ v.wrapping_sub((1 as $u) << w) }} else {{ v }}
        }}
        #[allow(dead_code)]
        fn $sats(v: $u, wf: u32) -> $u {{
            let (w, unsigned) = (wf & 0xff, wf >> 31 == 1);
            let hi: $u = if w - 1 >= <$u>::BITS {{ <$u>::MAX }} else {{ ((1 as $u) << (w - 1)) - 1 }};
            if unsigned || (v as $i) >= 0 {{ v.min(hi) }} else {{ let lo = !hi; if (v as $i) < (lo as $i) {{ lo }} else {{ v }} }}
        }}
        #[allow(dead_code)]
        fn $satu(v: $u, wf: u32) -> $u {{
            let (w, unsigned) = (wf & 0xff, wf >> 31 == 1);
            let m: $u = if w >= <$u>::BITS {{ <$u>::MAX }} else {{ ((1 as $u) << w) - 1 }};
            if !unsigned && (v as $i) < 0 {{ 0 }} else {{ v.min(m) }}
        }}
    }};
}}
word!(u64, i64, shl64, shr64, div_s64, mod_s64, tcm64, sat_s64, sat_u64);
word!(u128, i128, shl128, shr128, div_s128, mod_s128, tcm128, sat_s128, sat_u128);
"#, timeout = p.errors.timeout, no_match = p.errors.no_match))
}

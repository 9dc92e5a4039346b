//! The program's parser as a table of states: each state's ops (extract a
//! header, the next element of a stack, a header with a varbit field;
//! `set`, `verify`, `advance`, parser primitives), then its select key
//! (fields, `lookahead` bits, fields of a stack's last element, each padded
//! to whole bytes and concatenated, as BMv2 does) matched against
//! value/mask transitions in order, then the default.
//!
//! A packet the parser rejects (too short for an extract or a lookahead, no
//! transition matching, a failed `verify`, a full stack, a varbit longer
//! than its header allows, more than [`MAX_STATES`] states) keeps what it
//! extracted and goes on into ingress with `standard_metadata.parser_error`
//! set, as simple_switch does (and the interpreter).

use super::action::{self, Op};
use super::exec::{FieldIo, Program, State};
use super::expr::{Env, Expr};
use super::phv::{read_bits, read_wide};

/// States visited per packet before ParserTimeout (a loop without extract).
pub const MAX_STATES: usize = 1000;

#[derive(Clone, Debug)]
pub enum POp {
    Extract(u32),
    ExtractStack(u32),
    /// A header with a varbit field, the field's length in bits computed first.
    ExtractVl(u32, Expr),
    /// `set` and parser primitives.
    Do(Op),
    Verify { cond: Expr, error: Expr },
    Advance(Expr),
}

/// One part of a select key: where its value comes from and its width
/// (padded to whole bytes in the key).
#[derive(Clone, Copy, Debug)]
pub enum Part {
    Field { cell: u32, w: u32 },
    Look { off: u32, w: u32 },
    /// `code.stack_fields[i]`.
    Stack { i: u32, w: u32 },
}

#[derive(Clone, Debug)]
pub struct ParseState {
    pub name: String,
    pub ops: Vec<POp>,
    pub key: Vec<Part>,
    /// (value, mask, next state; -1: accept).
    pub transitions: Vec<(u128, u128, i32)>,
    /// None: no default, NoMatch.
    pub default: Option<i32>,
    /// A state the compiler could not lower: rejects with this code.
    pub reject: Option<u32>,
}

/// The core parser errors' codes (the program's own numbering).
#[derive(Clone, Copy, Debug, Default)]
pub struct Errors {
    pub too_short: u32,
    pub no_match: u32,
    pub stack_out_of_bounds: u32,
    pub header_too_short: u32,
    pub timeout: u32,
    pub invalid_argument: u32,
}

/// One field's extraction planned at link: the 8 bytes at `byte` (from
/// the header's start), big-endian, shifted left by `shl` then right by
/// `shr`, into `cell`. A header is then a run of loads and shifts, with
/// no per-field test of width or limbs.
#[derive(Clone, Copy, Debug)]
pub struct Load8 {
    pub cell: u32,
    pub byte: u16,
    pub shl: u8,
    pub shr: u8,
}

impl Load8 {
    /// The plan of `loads` and the bytes it reads past the header's start,
    /// when each is a field of at most 64 bits within one 8-byte read.
    pub fn plan(loads: &[FieldIo]) -> Option<(Vec<Load8>, u32)> {
        let fits = |f: &FieldIo| f.limbs == 1 && !f.varbit && f.width > 0 && (f.bit & 7) + f.width <= 64 && f.bit / 8 + 8 <= u16::MAX as u32;
        if !loads.iter().all(fits) {
            return None;
        }
        let plan: Vec<Load8> = loads.iter()
            .map(|f| Load8 { cell: f.cell, byte: (f.bit / 8) as u16, shl: (f.bit & 7) as u8, shr: (64 - f.width) as u8 })
            .collect();
        let bytes = plan.iter().map(|l| l.byte as u32 + 8).max().unwrap_or(0);
        Some((plan, bytes))
    }
}

#[derive(Clone, Debug, Default)]
pub struct Parser {
    pub init: i32,
    pub states: Vec<ParseState>,
}

impl Program {
    /// Parses `frame` into `st`'s PHV; returns the parser error (0: none)
    /// and leaves `st.pos` at the first byte not parsed.
    pub fn parse(&self, st: &mut State, frame: &[u8]) -> u32 {
        let e = &self.errors;
        let mut s = self.parser.init;
        st.pos = 0;
        let mut visited = 0usize;
        while s >= 0 {
            let state = &self.parser.states[s as usize];
            if let Some(code) = state.reject {
                return code;
            }
            for op in &state.ops {
                match op {
                    POp::Extract(h) => {
                        if !self.extract(st, *h, frame) {
                            return e.too_short;
                        }
                    }
                    POp::ExtractStack(k) => {
                        let stack = &self.stacks[*k as usize];
                        let i = st.phv.cells[stack.next as usize] as usize;
                        if i >= stack.headers.len() {
                            return e.stack_out_of_bounds;
                        }
                        if !self.extract(st, stack.headers[i], frame) {
                            return e.too_short;
                        }
                        st.phv.cells[stack.next as usize] = i as u128 + 1;
                        st.phv.mark(stack.group);
                    }
                    POp::ExtractVl(h, len) => {
                        let mut why = u32::MAX;
                        let env = Env { cells: &st.phv.cells, params: &[], frame, pos: st.pos };
                        let Ok(bits) = self.code.eval(*len, &env, &mut why) else { return e.too_short };
                        if let Err(code) = self.extract_vl(st, *h, bits, frame) {
                            return code;
                        }
                    }
                    POp::Do(op) => {
                        if !action::set_quick(op, &[], st) {
                            action::run_other(op, &mut 0, &[], self, st, frame);
                        }
                        if std::mem::take(&mut st.too_short) {
                            return e.too_short;
                        }
                    }
                    POp::Verify { cond, error } => {
                        let mut why = u32::MAX;
                        let env = Env { cells: &st.phv.cells, params: &[], frame, pos: st.pos };
                        match self.code.eval(*cond, &env, &mut why) {
                            Err(_) => return e.too_short,
                            Ok(0) => return self.code.eval(*error, &env, &mut why).map_or(e.too_short, |c| c as u32),
                            Ok(_) => {}
                        }
                    }
                    POp::Advance(bits) => {
                        let mut why = u32::MAX;
                        let env = Env { cells: &st.phv.cells, params: &[], frame, pos: st.pos };
                        let Ok(bits) = self.code.eval(*bits, &env, &mut why) else { return e.too_short };
                        let end = (st.pos as u128).saturating_add(bits / 8);
                        if end > frame.len() as u128 {
                            return e.too_short;
                        }
                        st.pos = end as usize;
                    }
                }
            }
            let next = match self.select(state, st, frame) {
                Some(n) => n,
                None => return e.too_short,
            };
            visited += 1;
            if visited > MAX_STATES {
                return e.timeout;
            }
            match next {
                Ok(n) => s = n,
                Err(()) => return e.no_match,
            }
        }
        0
    }

    /// The next state: Some(Ok(state)), Some(Err) for no match, None when a
    /// lookahead runs past the frame.
    fn select(&self, state: &ParseState, st: &State, frame: &[u8]) -> Option<Result<i32, ()>> {
        if state.key.is_empty() {
            return Some(state.default.ok_or(()));
        }
        let mut key = 0u128;
        for p in &state.key {
            let (v, w) = match *p {
                Part::Field { cell, w } => (st.phv.cells[cell as usize], w),
                Part::Look { off, w } => {
                    let bit = st.pos * 8 + off as usize;
                    if bit + w as usize > frame.len() * 8 {
                        return None;
                    }
                    (read_bits(frame, bit, w), w)
                }
                Part::Stack { i, w } => {
                    let (next, cells) = &self.code.stack_fields[i as usize];
                    let n = st.phv.cells[*next as usize] as usize;
                    let idx = if n == 0 { cells.len() - 1 } else { (n - 1).min(cells.len() - 1) };
                    (st.phv.cells[cells[idx] as usize], w)
                }
            };
            key = key.checked_shl(w.div_ceil(8) * 8).unwrap_or(0) | v;
        }
        for &(v, m, n) in &state.transitions {
            if key & m == v {
                return Some(Ok(n));
            }
        }
        Some(state.default.ok_or(()))
    }

    /// Extracts fixed-size header `h` at the parser's position; false when
    /// the frame is too short.
    #[inline]
    pub fn extract(&self, st: &mut State, h: u32, frame: &[u8]) -> bool {
        let hd = &self.headers[h as usize];
        let start = st.pos;
        let end = start + hd.bytes as usize;
        if end > frame.len() {
            return false;
        }
        match &hd.plan {
            // the planned loads, when the frame has 8 bytes at each (nearly always)
            Some(plan) if start + hd.plan_bytes as usize <= frame.len() => {
                let at = &frame[start..];
                for l in plan {
                    let b = l.byte as usize;
                    let x = u64::from_be_bytes(at[b..b + 8].try_into().unwrap());
                    st.phv.cells[l.cell as usize] = ((x << l.shl) >> l.shr) as u128;
                }
            }
            _ => self.extract_fields(st, hd, start, frame),
        }
        self.make_valid(st, h);
        st.hdr_src[h as usize] = start as u32;
        st.fdirty[h as usize] = 0;
        st.pos = end;
        true
    }

    /// [`Self::extract`]'s loads field by field (a wide field, or a frame
    /// ending within 8 bytes of a field).
    fn extract_fields(&self, st: &mut State, hd: &super::exec::Hdr, start: usize, frame: &[u8]) {
        let base = start * 8;
        for f in &hd.loads {
            if f.limbs == 1 {
                let b0 = start + (f.bit >> 3) as usize;
                let sh = f.bit & 7;
                st.phv.cells[f.cell as usize] = if sh + f.width <= 64 && f.width > 0 && b0 + 8 <= frame.len() {
                    let x = u64::from_be_bytes(frame[b0..b0 + 8].try_into().unwrap());
                    ((x << sh) >> (64 - f.width)) as u128
                } else {
                    read_bits(frame, base + f.bit as usize, f.width)
                };
            } else {
                read_wide(frame, base + f.bit as usize, f.width, &mut st.phv.cells[f.cell as usize..(f.cell + f.limbs) as usize]);
            }
        }
    }

    /// Extracts header `h` whose varbit field is `bits` long.
    fn extract_vl(&self, st: &mut State, h: u32, bits: u128, frame: &[u8]) -> Result<(), u32> {
        let hd = &self.headers[h as usize];
        let vmax = hd.varbit_max as u128;
        if bits > vmax {
            return Err(self.errors.header_too_short);
        }
        if bits % 8 != 0 {
            return Err(self.errors.invalid_argument);
        }
        let total = hd.bytes as usize + (bits / 8) as usize;
        let start = st.pos;
        if start + total > frame.len() {
            return Err(self.errors.too_short);
        }
        let mut bit = start * 8;
        for f in &hd.fields {
            let c = f.cell as usize;
            if f.varbit {
                st.phv.cells[c] = bits; // the length cell, then the value
                let cells = &mut st.phv.cells[c + 1..c + 1 + f.limbs as usize];
                cells.fill(0);
                read_wide(frame, bit, bits as u32, cells);
                bit += bits as usize;
            } else {
                if f.limbs == 1 {
                    st.phv.cells[c] = read_bits(frame, bit, f.width);
                } else {
                    read_wide(frame, bit, f.width, &mut st.phv.cells[c..c + f.limbs as usize]);
                }
                bit += f.width as usize;
            }
        }
        self.make_valid(st, h);
        st.hdr_src[h as usize] = start as u32;
        st.fdirty[h as usize] = 0;
        st.pos = start + total;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::program::exec::tests::{run, state, B};
    use crate::program::exec::{Executor, Program};
    use proptest::prelude::*;
    use serde_json::json;

    proptest! {
        /// A header's planned loads (8-byte reads) and its field-by-field
        /// path (the frame ends within 8 bytes of a field) read the same
        /// values as a bit-by-bit reference, at any number of bytes after it.
        #[test]
        fn extraction_reads_every_field_at_any_frame_end(ws in proptest::collection::vec(1u32..=32, 1..4),
                                                         bytes in proptest::collection::vec(any::<u8>(), 16),
                                                         lead in 0usize..3, tail in 0usize..10) {
            let mut b = B::new();
            let used: u32 = ws.iter().sum();
            let mut fields: Vec<(String, u32)> = ws.iter().enumerate().map(|(i, &w)| (format!("f{i}"), w)).collect();
            if used % 8 != 0 {
                fields.push(("pad".into(), 8 - used % 8));
            }
            let named: Vec<(&str, u32)> = fields.iter().map(|(n, w)| (n.as_str(), *w)).collect();
            b.header("h", &named, false);
            b.header("l", &[("x", 8)], false);
            // the select reads every field, so extraction loads them all
            let key: Vec<_> = ws.iter().enumerate().map(|(i, &w)| json!(["f", b.s(&format!("h.f{i}")), w])).collect();
            let mut ops = vec![json!(["extract", b.h("h")])];
            if lead > 0 {
                ops.insert(0, json!(["extract", b.h("l")]));
            }
            let states = vec![state("start", json!(ops), json!(key), json!([]), json!(-1))];
            let d = b.build(json!({"parser": {"init": 0, "states": states}}));
            let mut ex = Executor::new(Program::link(&d).unwrap());
            let hbytes = used.div_ceil(8) as usize;
            let skip = if lead > 0 { 1 } else { 0 };
            let frame = bytes[..skip + hbytes + tail.min(16 - skip - hbytes)].to_vec();
            let out = run(&mut ex, &[frame.clone()]);
            prop_assert_eq!(out[0].1.parser_error, 0);
            let mut bit = skip * 8;
            for (i, &w) in ws.iter().enumerate() {
                let want = (0..w as usize).fold(0u128, |v, k| (v << 1) | ((frame[(bit + k) / 8] >> (7 - (bit + k) % 8)) & 1) as u128);
                prop_assert_eq!(ex.field(b.s(&format!("h.f{i}")) as usize), want);
                bit += w as usize;
            }
        }

        /// A select key of a 12-bit field and 4 lookahead bits, each padded
        /// to whole bytes (24 bits), against value/mask transitions in order.
        #[test]
        fn select_takes_the_first_transition_whose_masked_value_matches(
            trans in proptest::collection::vec((any::<u32>(), any::<u32>()), 0..6), default in any::<bool>(),
            f in 0u32..4096, la in 0u32..16, fixed in any::<u32>(),
        ) {
            let mut b = B::new();
            b.header("h", &[("f", 12), ("pad", 4)], false);
            // transitions masked to the key's 24 bits; some given the key's exact bits so they hit
            let key = (f << 8) | la;
            let trans: Vec<(u32, u32)> = trans.iter().map(|&(v, m)| {
                let m = m & 0x00ff_ff0f & if v & 1 == 1 { 0x000f_000f } else { u32::MAX };
                (if fixed & 1 == 1 { key & m } else { v & m }, m)
            }).collect();
            let mut states = vec![state("start", json!([["extract", b.h("h")]]), json!([["f", b.s("h.f"), 12], ["la", 0, 4]]),
                json!(trans.iter().enumerate().map(|(i, (v, m))| json!([format!("{v:#x}"), format!("{m:#x}"), i + 1])).collect::<Vec<_>>()),
                if default { json!(7) } else { json!(null) })];
            for i in 1..=7 {
                states.push(state(&format!("s{i}"), json!([["set", b.s("meta.a"), ["c", format!("{i:#x}")]]]), json!([]), json!([]), json!(-1)));
            }
            let d = b.build(json!({"parser": {"init": 0, "states": states}}));
            let mut ex = Executor::new(Program::link(&d).unwrap());
            let frame = vec![(f >> 4) as u8, ((f & 0xf) << 4) as u8, (la << 4) as u8];
            let out = run(&mut ex, &[frame]);
            let want = trans.iter().position(|&(v, m)| key & m == v).map(|i| i + 1).or(default.then_some(7));
            match want {
                Some(s) => {
                    prop_assert_eq!(out[0].1.parser_error, 0);
                    prop_assert_eq!(ex.field(b.s("meta.a") as usize), s as u128);
                }
                None => prop_assert_eq!(out[0].1.parser_error, 2),
            }
        }
    }
}

//! What [`super::emit`] writes for headers that come and go: `setValid`,
//! `setInvalid` and `assign_header` in actions and parser states, the
//! parser's `advance`, the deparser emitting by validity, and the checksums
//! the parser verifies and the deparser updates (GTP-U encapsulation adds
//! outer IPv4/UDP/GTP-U headers, decapsulation removes them).
//!
//! The generated code keeps, per header, the interpreter's per-packet
//! record of it (`State::hdr_src`, `State::fdirty`): `s<h>`, where in the
//! frame it was extracted (`usize::MAX`: built by the program, not
//! extracted), and `d<h>_<f>`, whether field `f` was written since. A valid
//! header with a place is emitted as the frame's bytes with the written
//! fields patched; one without is packed from its fields (`hb`, 64-bit
//! words of the fields' pieces, the way `deparser::Pack` plans them).
//! `setValid` and `setInvalid` of a packet header move simple_switch's
//! packet length (`Meta::Length`) as BMv2's add_header/remove_header do.
//!
//! A checksum's input (fields, constants, headers, the payload) is the bit
//! string the interpreter builds: fields of one header and constants as
//! words at fixed places (their 16-bit lanes summed for `csum16`), anything
//! else through [`crate::program::hash::Bits`]; the algorithm is the linked
//! program's (`Program::checksums[i].imp`, [`crate::program::hash`]).

use std::fmt::Write;

use super::super::super::action::Op;
use super::super::super::deparser::CkInput;
use super::super::super::exec::Program;
use super::super::super::expr::Expr;
use super::super::super::flow::Meta;
use super::super::super::hash::Algo;
use super::super::super::parser::POp;
use super::{hex, mask, Ctx, Gen};

/// One item of a bit string laid out at generation time.
#[derive(Clone, Copy)]
enum Item {
    Cell(u32),
    Const(u128),
}

/// What of `p`'s checksums the generator does not write, one line each.
pub fn unsupported_checksums(p: &Program) -> Vec<String> {
    let mut out = Vec::new();
    for ck in p.checksums.iter().filter(|c| c.verify || c.update) {
        if ck.imp.is_none() {
            out.push(format!("checksum {}: algorithm {} not implemented", ck.name, ck.algo));
        }
        let wide = ck.inputs.iter().any(|i| match *i {
            CkInput::Field { slot, .. } => p.lay.limbs[slot as usize] > 1,
            CkInput::Const { width, .. } => width > 128,
            CkInput::Header(h) => p.headers[h as usize].fields.iter().any(|f| f.limbs > 1 || f.varbit),
            CkInput::Payload => false,
        });
        if wide || p.lay.limbs[ck.target as usize] > 1 {
            out.push(format!("checksum {}: a value wider than 128 bits", ck.name));
        }
    }
    out
}

impl Gen<'_> {
    /// `setValid`/`setInvalid` (`Valid`, `Build`) and `assign_header` (`HdrCopy`), as `action.rs` runs them.
    pub(super) fn header_op(&mut self, op: &Op) -> Result<String, String> {
        let p = self.p;
        Ok(match *op {
            Op::Valid { h, on } => {
                let hd = &p.headers[h as usize];
                let v = hd.valid;
                self.touch(h)?;
                if !on {
                    let len = self.length(h, false);
                    return Ok(format!("if c{v} != 0 {{ c{v} = 0; {len}}}"));
                }
                let mut s = format!("if c{v} == 0 {{ ");
                for c in hd.cells.0..hd.cells.1 {
                    write!(s, "c{c} = 0; ").unwrap();
                }
                write!(s, "c{v} = 1; ").unwrap();
                // a union's other members invalid (their length stays, as BMv2's)
                for &o in hd.union.map_or(&[][..], |u| &p.unions[u as usize][..]) {
                    if o != h {
                        let ov = p.headers[o as usize].valid;
                        self.cells.insert(ov);
                        write!(s, "c{ov} = 0; ").unwrap();
                    }
                }
                write!(s, "s{h} = usize::MAX; {}}}", self.length(h, true)).unwrap();
                s
            }
            Op::Build(ref b) => {
                let hd = &p.headers[b.h as usize];
                let v = hd.valid;
                self.touch(b.h)?;
                let mut s = format!("if c{v} == 0 {{ ");
                for (c, &t) in (hd.cells.0..hd.cells.1).zip(b.template.iter()) {
                    write!(s, "c{c} = {}; ", hex(t)).unwrap();
                }
                write!(s, "c{v} = 1; s{} = usize::MAX; {}}}", b.h, self.length(b.h, true)).unwrap();
                // the constants again (a valid header keeps its other fields), and their marks
                for m in b.consts.moves.iter() {
                    write!(s, " {}", self.assign(m.dst, &format!("{}u128", hex(m.v)), "u128", u128::MAX)).unwrap();
                }
                s
            }
            Op::HdrCopy { dst, src, frame } => {
                let (d, sh) = (&p.headers[dst as usize], &p.headers[src as usize]);
                if d.cells.1 - d.cells.0 != sh.cells.1 - sh.cells.0 {
                    return Err(format!("assign_header {} = {}: headers of other sizes", d.name, sh.name));
                }
                self.touch(dst)?;
                self.touch(src)?;
                let mut s = format!("c{} = c{};", d.valid, sh.valid);
                for (dc, sc) in (d.cells.0..d.cells.1).zip(sh.cells.0..sh.cells.1) {
                    match (self.ty(dc), self.ty(sc)) {
                        (a, b) if a == b => write!(s, " c{dc} = c{sc};").unwrap(),
                        ("u128", _) => write!(s, " c{dc} = c{sc} as u128;").unwrap(),
                        _ => return Err(format!("assign_header {} = {}: fields of other widths", d.name, sh.name)),
                    }
                }
                if frame {
                    // the source's place in the frame and its marks
                    self.copies.insert((dst, src));
                    write!(s, " s{dst} = s{src};").unwrap();
                    for f in 0..d.fields.len() as u32 {
                        if self.dirty.contains(&(src, f)) {
                            write!(s, " d{dst}_{f} = d{src}_{f};").unwrap();
                        } else if self.dirty.contains(&(dst, f)) {
                            write!(s, " d{dst}_{f} = false;").unwrap();
                        }
                    }
                } else {
                    write!(s, " s{dst} = usize::MAX;").unwrap();
                }
                s
            }
            _ => return Err(format!("op {op:?}")),
        })
    }

    /// Header `h` may be valid without being extracted: all its cells held, emitted by validity.
    fn touch(&mut self, h: u32) -> Result<(), String> {
        let hd = &self.p.headers[h as usize];
        if hd.varbit_max != 0 || hd.fields.iter().any(|f| f.limbs > 1) {
            return Err(format!("header {}: a varbit field or one wider than 128 bits made valid or copied", hd.name));
        }
        self.built.insert(h);
        self.cells.insert(hd.valid);
        for c in hd.cells.0..hd.cells.1 {
            self.cells.insert(c);
        }
        Ok(())
    }

    /// Whether the deparsed packet may be more than the frame with fields
    /// patched: a header the program builds, copies or removes is deparsed,
    /// or the parser skips bytes (`advance`: they are not emitted).
    pub(super) fn reshapes(&self) -> bool {
        let p = self.p;
        p.deparser.iter().any(|h| self.built.contains(h))
            || p.parser.states.iter().flat_map(|s| &s.ops).any(|o| matches!(o, POp::Advance(_)))
    }

    /// BMv2's add_header (`on`) / remove_header of packet header `h`: the packet's length follows.
    fn length(&mut self, h: u32, on: bool) -> String {
        let hd = &self.p.headers[h as usize];
        let Some((c, _, m)) = self.p.objs.meta[Meta::Length as usize].filter(|_| !hd.metadata) else { return String::new() };
        self.cells.insert(c);
        self.written.insert(c);
        let (t, b) = (self.ty(c), hd.bytes);
        if on {
            format!("c{c} = ((c{c} as u128).wrapping_add({b}) & {}) as {t}; ", hex(m))
        } else {
            format!("c{c} = ((c{c} as u128).saturating_sub({b}) & {}) as {t}; ", hex(m))
        }
    }

    /// The packet's length as egress sees it (simple_switch's `packet_length` there): the
    /// frame's, unless headers were added or removed.
    pub(super) fn length_now(&mut self) -> String {
        match self.p.objs.meta[Meta::Length as usize] {
            Some((c, _, _)) if self.written.contains(&c) => format!("({} as u64)", self.cell(c, "u64")),
            _ => "n".into(),
        }
    }

    /// The parser's `advance`: `bits / 8` bytes skipped, past the frame's end a PacketTooShort.
    pub(super) fn advance(&mut self, e: Expr) -> Result<String, String> {
        let (v, _) = self.expr(e, Ctx::Parser)?;
        let ts = self.too_short;
        Ok(format!("{{ let end = (pos as u128).saturating_add((({v}) as u128) / 8); if end > n as u128 {{ err = {ts}; break 'parse; }} pos = end as usize; }}"))
    }

    /// A header copied with its frame bytes takes its source's marks: adds
    /// them; true when the actions must be written again to copy them.
    pub(super) fn close_marks(&mut self) -> bool {
        let mut grew = false;
        loop {
            let add: Vec<(u32, u32)> = self.copies.iter()
                .flat_map(|&(d, s)| self.dirty.range((s, 0)..(s + 1, 0)).map(move |&(_, f)| (d, f)))
                .filter(|x| !self.dirty.contains(x))
                .collect();
            if add.is_empty() {
                return grew || !self.copies.is_empty();
            }
            self.dirty.extend(add);
            grew = true;
        }
    }

    /// Items laid end to end from bit 0 (`(item, width)`), as 64-bit
    /// big-endian words (the last zero-padded), each an OR of its pieces.
    fn words(&mut self, items: &[(Item, u32)]) -> Vec<String> {
        let total: u32 = items.iter().map(|i| i.1).sum();
        let mut out = Vec::new();
        for k in 0..total.div_ceil(64) {
            let (lo, hi) = (64 * k, 64 * k + 64);
            let (mut konst, mut parts) = (0u64, Vec::new());
            let mut o = 0;
            for &(it, w) in items {
                let (a, b) = (o.max(lo), (o + w).min(hi));
                let end = o + w;
                o += w;
                if a >= b {
                    continue;
                }
                // the item's bits [a, b) of the string: its value's bits from end - b, at word bit hi - b
                let (sr, sl, n) = (end - b, hi - b, b - a);
                let m = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
                match it {
                    Item::Const(v) => konst |= (((v >> sr) as u64) & m) << sl,
                    Item::Cell(c) => {
                        let t = self.ty(c);
                        self.cells.insert(c);
                        let mut e = format!("c{c}");
                        if sr > 0 {
                            e = format!("({e} >> {sr})");
                        }
                        if t != "u64" {
                            e = format!("({e} as u64)");
                        }
                        if n < 64 {
                            e = format!("({e} & {})", hex(m as u128));
                        }
                        if sl > 0 {
                            e = format!("({e} << {sl})");
                        }
                        parts.push(e);
                    }
                }
            }
            if konst != 0 || parts.is_empty() {
                parts.push(format!("{}u64", hex(konst as u128)));
            }
            out.push(parts.join(" | "));
        }
        out
    }

    /// Header `h`'s bytes packed from its fields into a new local `name` (`[u8; 8 * words]`).
    fn pack(&mut self, h: u32, name: &str, ind: &str) -> String {
        let hd = &self.p.headers[h as usize];
        let items: Vec<(Item, u32)> = hd.fields.iter().map(|f| (Item::Cell(f.cell), f.width)).collect();
        let words = self.words(&items);
        let mut s = format!("{ind}let mut {name} = [0u8; {}];\n", 8 * words.len());
        for (k, w) in words.iter().enumerate() {
            writeln!(s, "{ind}{name}[{}..{}].copy_from_slice(&({w}).to_be_bytes());", 8 * k, 8 * k + 8).unwrap();
        }
        s
    }

    /// The deparser's code for header `h`, which the program may build:
    /// the frame's bytes patched (`patch`, over `o[b..]`) when it has a place there, else packed.
    pub(super) fn emit_built(&mut self, h: u32, patch: &str) -> String {
        let hd = &self.p.headers[h as usize];
        let (v, bytes) = (hd.valid, hd.bytes);
        let ind = "                ";
        let pack = self.pack(h, "hb", ind);
        format!("            if c{v} != 0 {{\n            if s{h} != usize::MAX {{\n            let b = o.len();\n            o.extend_from_slice(&frame[s{h}..s{h} + {bytes}]);\n{patch}            }} else {{\n{pack}{ind}o.extend_from_slice(&hb[..{bytes}]);\n            }}\n            }}\n")
    }

    /// Checksum `i`'s value into the new local `name` (a `u128`), as
    /// `Program::checksum_value` computes it (its condition aside).
    fn checksum_value(&mut self, i: usize, name: &str, ind: &str) -> String {
        let p = self.p;
        let ck = &p.checksums[i];
        let w = p.lay.width[ck.target as usize];
        let algo = format!("p.checksums[{i}].imp.as_ref().unwrap()");
        let csum = matches!(ck.imp, Some(Algo::Csum16));
        // fields of one header and constants: at fixed places while the header is valid
        let mut hdr = None;
        let fixed = ck.inputs.iter().all(|x| match *x {
            CkInput::Field { header, .. } => *hdr.get_or_insert(header) == header,
            CkInput::Const { .. } => true,
            _ => false,
        });
        if fixed {
            let all: Vec<(Item, u32)> = ck.inputs.iter().map(|x| match *x {
                CkInput::Field { slot, .. } => (Item::Cell(p.lay.value_cell(slot as usize)), p.lay.width[slot as usize]),
                CkInput::Const { v, width } => (Item::Const(v & mask(width)), width),
                _ => unreachable!(),
            }).collect();
            let consts: Vec<(Item, u32)> = all.iter().copied().filter(|x| matches!(x.0, Item::Const(_))).collect();
            let one = |g: &mut Gen, items: &[(Item, u32)]| -> String {
                let bits: u32 = items.iter().map(|x| x.1).sum();
                let words = g.words(items);
                if csum {
                    // the 16-bit lanes of each word (`deparser::Sum16`'s sum)
                    let lanes: Vec<String> = words.iter()
                        .map(|w| format!("{{ let w = {w}; (w & 0xffff) + (w >> 16 & 0xffff) + (w >> 32 & 0xffff) + (w >> 48) }}"))
                        .collect();
                    let sum = if lanes.is_empty() { "0".into() } else { lanes.join(" + ") };
                    return format!("synapse_core::program::hash::fold16({sum}) as u128 & {}", hex(mask(w)));
                }
                let mut s = format!("{{ let mut cb = [0u8; {}]; ", 8 * words.len());
                for (k, x) in words.iter().enumerate() {
                    write!(s, "cb[{}..{}].copy_from_slice(&({x}).to_be_bytes()); ", 8 * k, 8 * k + 8).unwrap();
                }
                write!(s, "{algo}.hash(&cb[..{}]) as u128 & {} }}", bits.div_ceil(8), hex(mask(w))).unwrap();
                s
            };
            return match hdr {
                None => format!("{ind}let {name}: u128 = {};\n", one(self, &all)),
                Some(h) => {
                    let v = p.headers[h as usize].valid;
                    self.cells.insert(v);
                    let (a, b) = (one(self, &all), one(self, &consts));
                    format!("{ind}let {name}: u128 = if c{v} != 0 {{ {a} }} else {{ {b} }};\n")
                }
            };
        }
        // anything else: the bit string built as the interpreter builds it
        let mut s = format!("{ind}let {name}: u128 = {{\n{ind}    let mut bits = synapse_core::program::hash::Bits::new();\n{ind}    let mut after = 0usize;\n");
        let after = |h: u32| p.deparser.iter().position(|&x| x == h).map_or(0, |x| x + 1);
        for x in &ck.inputs {
            match *x {
                CkInput::Field { slot, header } => {
                    let v = p.headers[header as usize].valid;
                    let c = self.cell(p.lay.value_cell(slot as usize), "u128");
                    self.cells.insert(v);
                    writeln!(s, "{ind}    if c{v} != 0 {{ bits.push_wide({c}, {}); after = {}; }}", p.lay.width[slot as usize], after(header)).unwrap();
                }
                CkInput::Const { v, width } => writeln!(s, "{ind}    bits.push_wide({}, {width});", hex(v & mask(width))).unwrap(),
                CkInput::Header(h) => {
                    let hd = &p.headers[h as usize];
                    self.cells.insert(hd.valid);
                    let pack = self.pack(h, "hb", &format!("{ind}        "));
                    writeln!(s, "{ind}    if c{} != 0 {{\n{pack}{ind}        bits.push_bytes(&hb[..{}]);\n{ind}        after = {};\n{ind}    }}",
                             hd.valid, hd.bytes, after(h)).unwrap();
                }
                CkInput::Payload => {
                    for (j, &h) in p.deparser.iter().enumerate() {
                        let hd = &p.headers[h as usize];
                        self.cells.insert(hd.valid);
                        let pack = self.pack(h, "hb", &format!("{ind}        "));
                        writeln!(s, "{ind}    if after <= {j} && c{} != 0 {{\n{pack}{ind}        bits.push_bytes(&hb[..{}]);\n{ind}    }}", hd.valid, hd.bytes).unwrap();
                    }
                    writeln!(s, "{ind}    bits.push_bytes(&frame[pos.min(n)..]);").unwrap();
                }
            }
        }
        write!(s, "{ind}    {algo}.hash(bits.bytes()) as u128 & {}\n{ind}}};\n", hex(mask(w))).unwrap();
        s
    }

    /// The checksums the deparser updates: each, its condition true, written into its field (and marked).
    pub(super) fn update_checksums(&mut self) -> Result<String, String> {
        let p = self.p;
        let mut s = String::new();
        let ind = "            ";
        for (i, ck) in p.checksums.iter().enumerate().filter(|c| c.1.update) {
            let val = self.checksum_value(i, "ck", &format!("{ind}    "));
            let set = self.assign(ck.dst, "ck", "u128", u128::MAX);
            let cond = match ck.cond {
                Some(c) => self.expr(c, Ctx::Pipe)?.0,
                None => "1".into(),
            };
            writeln!(s, "{ind}// update_checksum {}\n{ind}if {cond} != 0 {{\n{val}{ind}    {set}\n{ind}}}", ck.name).unwrap();
        }
        Ok(s)
    }

    /// BMv2's `verify_checksums` after the parser (when the program reads
    /// `checksum_error`): a verified checksum whose header is valid, its
    /// condition true, differing from its field sets the flag.
    pub(super) fn verify_checksums(&mut self) -> Result<String, String> {
        let p = self.p;
        let Some((flag, _, m)) = p.objs.meta[Meta::ChecksumError as usize].filter(|_| p.objs.verify) else { return Ok(String::new()) };
        let ind = "        ";
        let mut s = format!("{ind}let mut bad = false;\n");
        for (i, ck) in p.checksums.iter().enumerate().filter(|c| c.1.verify) {
            let h = p.hdr_of_slot[ck.target as usize];
            let mut when = Vec::new();
            if h != super::NONE {
                when.push(format!("{} != 0", self.cell(p.headers[h as usize].valid, "u64")));
            }
            if let Some(c) = ck.cond {
                when.push(format!("{} != 0", self.expr(c, Ctx::Pipe)?.0));
            }
            let when = if when.is_empty() { "true".to_string() } else { when.join(" && ") };
            let val = self.checksum_value(i, "ck", &format!("{ind}    "));
            let field = self.cell(p.lay.value_cell(ck.target as usize), "u128");
            writeln!(s, "{ind}// verify_checksum {}\n{ind}if {when} {{\n{val}{ind}    bad |= ck != {field};\n{ind}}}", ck.name).unwrap();
        }
        if self.cells.contains(&flag) {
            let t = self.ty(flag);
            writeln!(s, "{ind}c{flag} = (bad as u128 & {}) as {t};", hex(m)).unwrap();
        }
        Ok(s)
    }
}

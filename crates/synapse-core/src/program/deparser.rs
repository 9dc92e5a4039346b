//! The deparser: the checksums it updates, then the valid headers in the
//! program's emit order, then the payload (the frame's bytes after what
//! the parser consumed).
//!
//! A header extracted from the frame and not written since is copied from
//! the frame's bytes; any other is assembled field by field. Checksum
//! updates (`update_checksum`: a calculation over fields, constants,
//! headers and the payload, written into a field when its condition holds)
//! hand the calculation's bit string to its algorithm ([`super::hash`]); an
//! algorithm it does not implement leaves the field as it is and is
//! counted by name.

use super::exec::{Program, Scratch, State, NONE};
use super::expr::{Env, Expr};
use super::phv::{append_bits, mask, write_bits, write_wide};

/// One input of a checksum's calculation.
#[derive(Clone, Debug)]
pub enum CkInput {
    /// A field (skipped while its header is invalid).
    Field { slot: u32, header: u32 },
    Const { v: u128, width: u32 },
    Header(u32),
    /// The headers after the last input's header in emit order, then the payload.
    Payload,
}

#[derive(Clone, Debug)]
pub struct Checksum {
    pub name: String,
    pub algo: String,
    /// The algorithm, resolved once at link (None: not implemented).
    pub imp: Option<super::hash::Algo>,
    pub target: u32,
    pub dst: super::action::Dst,
    pub inputs: Vec<CkInput>,
    pub cond: Option<Expr>,
    /// Whether [`super::hash`] implements the algorithm; counted under
    /// `unsupported` when it does not.
    pub supported: bool,
    pub unsupported: u32,
    /// Whether the parser verifies it, the deparser updates it.
    pub verify: bool,
    pub update: bool,
    /// A `csum16` over fields of at most 48 bits (an IPv4 header's): the
    /// fields summed straight from the PHV ([`sum16`]), not packed into
    /// bytes first.
    pub sum16: Option<Sum16>,
}

/// A [`Checksum::sum16`]: its fields, and when they are all of one header
/// (IPv4's), their bits planned at link as 64-bit words of pieces (as a
/// [`Pack`]'s), whose four 16-bit lanes are summed: no branch per field.
#[derive(Clone, Debug)]
pub struct Sum16 {
    pub ins: Box<[SumIn]>,
    plan: Option<SumPlan>,
}

/// The header's validity cell, the words' pieces and their ends.
type SumPlan = (u32, Box<[Piece]>, Box<[u16]>);

impl Sum16 {
    fn of(ins: Box<[SumIn]>) -> Sum16 {
        let one = ins.first().map(|f| f.valid).filter(|&v| ins.iter().all(|f| f.valid == v));
        let plan = one.map(|v| {
            let mut o = 0;
            let fields: Vec<(u32, u32, u32)> = ins.iter().map(|f| {
                o += f.w;
                (f.cell, o - f.w, f.w)
            }).collect();
            let (pieces, ends) = plan_words(&fields);
            (v, pieces, ends)
        });
        Sum16 { ins, plan }
    }

    /// The ones'-complement sum (not folded; folded, as [`sum16`]'s).
    #[inline]
    pub fn sum(&self, cells: &[u128]) -> u64 {
        let Some((valid, pieces, ends)) = &self.plan else { return sum16(&self.ins, cells) };
        if cells[*valid as usize] == 0 {
            return 0;
        }
        let (mut i, mut sum) = (0usize, 0u64);
        for &e in ends.iter() {
            let mut w = 0u64;
            for p in &pieces[i..e as usize] {
                w |= ((cells[p.cell as usize] as u64 & p.mask) << p.shl) >> p.shr;
            }
            i = e as usize;
            // the word's 16-bit lanes (a partial last word is zero-padded, as sum16 pads)
            sum += (w & 0xffff) + (w >> 16 & 0xffff) + (w >> 32 & 0xffff) + (w >> 48);
        }
        sum
    }
}

/// A header's packing planned at link: each 64-bit word of its bytes as the
/// OR of its fields' pieces, each one mask and two constant shifts in
/// `u64` (a field across a word boundary is a piece of each word), so a
/// header rebuilt by an action (a tunnel's outer IPv4, UDP and GTP-U) is
/// written without a 128-bit accumulator or a branch per field. Planned for
/// a whole number of bytes of fields of at most 64 bits ([`pack_plans`]).
#[derive(Clone, Debug)]
pub struct Pack {
    pieces: Box<[Piece]>,
    /// End of each word's pieces.
    ends: Box<[u16]>,
    bytes: u32,
}

#[derive(Clone, Copy, Debug)]
struct Piece {
    cell: u32,
    shl: u8,
    shr: u8,
    mask: u64,
}

/// Fields (cell, first bit, width at most 64) laid end to end, as 64-bit
/// words of pieces: the pieces, and where each word's end. Shared by
/// [`Pack`] and [`Sum16`].
fn plan_words(fields: &[(u32, u32, u32)]) -> (Box<[Piece]>, Box<[u16]>) {
    let total = fields.iter().map(|&(_, o, w)| o + w).max().unwrap_or(0);
    let (mut pieces, mut ends) = (Vec::new(), Vec::new());
    for k in 0..total.div_ceil(64) {
        let (lo, hi) = (64 * k, 64 * k + 64);
        for &(cell, o, w) in fields {
            let e = o + w;
            if e <= lo || o >= hi {
                continue;
            }
            // the field's low bit at word bit hi - e: left of the word's end, or past it
            let (shl, shr) = if e <= hi { (hi - e, 0) } else { (0, e - hi) };
            pieces.push(Piece { cell, shl: shl as u8, shr: shr as u8, mask: super::phv::mask(w) as u64 });
        }
        ends.push(pieces.len() as u16);
    }
    (pieces.into(), ends.into())
}

/// Per header, its [`Pack`] when it has one.
pub fn pack_plans(headers: &[super::exec::Hdr]) -> Vec<Option<Pack>> {
    headers.iter().map(|hd| {
        let total: u32 = hd.fields.iter().map(|f| f.width).sum();
        if hd.varbit_max != 0 || !total.is_multiple_of(8) || total != hd.bytes * 8 || total == 0
            || hd.fields.iter().any(|f| f.varbit || f.limbs != 1 || f.width > 64) {
            return None;
        }
        let fields: Vec<(u32, u32, u32)> = hd.fields.iter().map(|f| (f.cell, f.bit, f.width)).collect();
        let (pieces, ends) = plan_words(&fields);
        Some(Pack { pieces, ends, bytes: total / 8 })
    }).collect()
}

impl Pack {
    /// Writes the header's bytes at the start of `out`; returns the bits written.
    #[inline]
    pub fn write(&self, cells: &[u128], out: &mut [u8]) -> usize {
        let (mut i, mut at) = (0usize, 0usize);
        let n = self.bytes as usize;
        for &e in self.ends.iter() {
            let mut w = 0u64;
            for p in &self.pieces[i..e as usize] {
                w |= ((cells[p.cell as usize] as u64 & p.mask) << p.shl) >> p.shr;
            }
            i = e as usize;
            let b = w.to_be_bytes();
            if n - at >= 8 {
                out[at..at + 8].copy_from_slice(&b);
                at += 8;
            } else {
                for &x in &b[..n - at] {
                    out[at] = x;
                    at += 1;
                }
            }
        }
        n * 8
    }
}

/// A field of a [`Checksum::sum16`]: its value cell, its header's validity
/// cell (an invalid header's fields are left out), its width (at most 48).
#[derive(Clone, Copy, Debug)]
pub struct SumIn {
    pub cell: u32,
    pub valid: u32,
    pub w: u32,
}

/// The [`Checksum::sum16`] plan of a checksum, when it has one.
pub fn sum16_plan(inputs: &[CkInput], imp: Option<&super::hash::Algo>, lay: &super::phv::Layout, headers: &[super::exec::Hdr])
                  -> Option<Sum16> {
    if !matches!(imp, Some(super::hash::Algo::Csum16)) {
        return None;
    }
    inputs.iter().map(|i| match *i {
        CkInput::Field { slot, header } => {
            let s = slot as usize;
            (lay.limbs[s] == 1 && !lay.varbit[s] && (1..=48).contains(&lay.width[s]))
                .then(|| SumIn { cell: lay.value_cell(s), valid: headers[header as usize].valid, w: lay.width[s] })
        }
        _ => None,
    }).collect::<Option<Box<[SumIn]>>>().map(Sum16::of)
}

/// The ones'-complement sum (not folded) of the bit string of the valid
/// fields of `ins`, as [`super::hash::ones_sum`] gives over its bytes: the
/// fields shifted through an accumulator, each 16 bits added as they fill,
/// the last partial word zero-padded (a zero-padded odd byte, as there).
#[inline]
pub fn sum16(ins: &[SumIn], cells: &[u128]) -> u64 {
    let (mut acc, mut n, mut sum) = (0u64, 0u32, 0u64);
    for i in ins {
        if cells[i.valid as usize] == 0 {
            continue;
        }
        // n < 16 before and w <= 48: the bits pending fit in 64
        acc = (acc << i.w) | (cells[i.cell as usize] as u64 & ((1u64 << i.w) - 1));
        n += i.w;
        while n >= 16 {
            n -= 16;
            sum += (acc >> n) & 0xffff;
        }
    }
    if n > 0 {
        sum += (acc << (16 - n)) & 0xffff;
    }
    sum
}

impl Program {
    /// Updates the checksums and appends the packet's bytes to `out`.
    pub fn deparse(&self, st: &mut State, frame: &[u8], sc: &mut Scratch, out: &mut Vec<u8>) {
        for ck in self.checksums.iter().filter(|c| c.update) {
            self.update_checksum(ck, st, frame, sc);
        }
        for &h in &self.deparser {
            self.emit(h, st, frame, out);
        }
        out.extend_from_slice(&frame[st.pos.min(frame.len())..]);
    }

    /// Bytes of header `h` as emitted (fixed part and its varbit field's current length).
    fn header_bytes(&self, h: u32, st: &State) -> usize {
        let hd = &self.headers[h as usize];
        if hd.varbit_max == 0 {
            return hd.bytes as usize;
        }
        let vb: usize = hd.fields.iter().filter(|f| f.varbit).map(|f| (st.phv.cells[f.cell as usize] / 8) as usize).sum();
        hd.bytes as usize + vb
    }

    /// Appends header `h`'s bits to `out` at bit `at` (out must hold them); returns the bits written.
    fn write_header(&self, h: u32, st: &State, out: &mut [u8], at: usize) -> usize {
        let hd = &self.headers[h as usize];
        if at & 7 == 0 && hd.varbit_max == 0 {
            if let Some(p) = &self.packs[h as usize] {
                return p.write(&st.phv.cells, &mut out[at >> 3..]);
            }
            return self.pack_header(hd, st, &mut out[at >> 3..]);
        }
        let mut bit = at;
        for f in &hd.fields {
            let c = f.cell as usize;
            if f.varbit {
                let len = st.phv.cells[c] as u32;
                write_wide(out, bit, len, &st.phv.cells[c + 1..c + 1 + f.limbs as usize]);
                bit += len as usize;
            } else if f.limbs == 1 {
                write_bits(out, bit, f.width, st.phv.cells[c]);
                bit += f.width as usize;
            } else {
                write_wide(out, bit, f.width, &st.phv.cells[c..c + f.limbs as usize]);
                bit += f.width as usize;
            }
        }
        bit - at
    }

    /// A fixed-size header's fields packed through a 128-bit accumulator,
    /// flushed 8 bytes at a time as they fill (fields of at most 64 bits;
    /// wider ones written on their own).
    pub(crate) fn pack_header(&self, hd: &super::exec::Hdr, st: &State, out: &mut [u8]) -> usize {
        let (mut acc, mut n, mut at) = (0u128, 0u32, 0usize);
        for f in &hd.fields {
            if f.limbs > 1 || f.width > 64 {
                // flush what is pending (whole bytes, then its bits), then the wide field
                let bit = at * 8 + n as usize;
                if n > 0 {
                    write_bits(out, at * 8, n, acc);
                }
                if f.limbs == 1 {
                    write_bits(out, bit, f.width, st.phv.cells[f.cell as usize]);
                } else {
                    write_wide(out, bit, f.width, &st.phv.cells[f.cell as usize..(f.cell + f.limbs) as usize]);
                }
                let end = bit + f.width as usize;
                at = end / 8;
                n = (end % 8) as u32;
                acc = if n > 0 { (out[at] >> (8 - n)) as u128 } else { 0 };
                continue;
            }
            // n < 64 before, w <= 64: what is pending fits in the 128; flushed 8 bytes at a time
            acc = (acc << f.width) | (st.phv.cells[f.cell as usize] & super::phv::mask(f.width));
            n += f.width;
            if n >= 64 {
                n -= 64;
                out[at..at + 8].copy_from_slice(&((acc >> n) as u64).to_be_bytes());
                at += 8;
            }
        }
        while n >= 8 {
            n -= 8;
            out[at] = (acc >> n) as u8;
            at += 1;
        }
        if n > 0 {
            write_bits(out, at * 8, n, acc);
        }
        at * 8 + n as usize
    }

    fn emit(&self, h: u32, st: &State, frame: &[u8], out: &mut Vec<u8>) {
        let hd = &self.headers[h as usize];
        if st.phv.cells[hd.valid as usize] == 0 {
            return;
        }
        let n = self.header_bytes(h, st);
        let src = st.hdr_src[h as usize];
        // Every field in the PHV (all extracted) and more than one written
        // (an IPv4 header rebuilt field by field for a tunnel): packed
        // whole, cheaper than patching the frame's bytes a field at a time.
        let dirty = st.fdirty[h as usize];
        let packed = dirty & dirty.wrapping_sub(1) != 0 && hd.loads.len() == hd.fields.len() && hd.varbit_max == 0;
        if src != NONE && (src as usize + n) <= frame.len() && !packed {
            // the bytes it was extracted from, with the fields written since
            let start = out.len();
            out.extend_from_slice(&frame[src as usize..src as usize + n]);
            let mut m = dirty;
            while m != 0 {
                let f = &hd.fields[m.trailing_zeros() as usize];
                m &= m - 1;
                if f.limbs == 1 {
                    write_bits(&mut out[start..], f.bit as usize, f.width, st.phv.cells[f.cell as usize]);
                } else {
                    write_wide(&mut out[start..], f.bit as usize, f.width, &st.phv.cells[f.cell as usize..(f.cell + f.limbs) as usize]);
                }
            }
            return;
        }
        let start = out.len();
        out.resize(start + n, 0);
        self.write_header(h, st, &mut out[start..], 0);
    }

    /// Whether a checksum marked `verify` fails on the parsed packet (its
    /// target header valid, its condition true, the calculation differing
    /// from the field): BMv2's `Parser::verify_checksums`.
    pub fn verify_checksums(&self, st: &mut State, frame: &[u8], sc: &mut Scratch) -> bool {
        let mut bad = false;
        for ck in self.checksums.iter().filter(|c| c.verify && c.supported) {
            let h = self.hdr_of_slot[ck.target as usize];
            if h != super::exec::NONE && st.phv.cells[self.headers[h as usize].valid as usize] == 0 {
                continue;
            }
            let cell = self.lay.value_cell(ck.target as usize) as usize;
            let before = st.phv.cells[cell];
            if let Some(v) = self.checksum_value(ck, st, frame, sc) {
                bad |= v != before;
            }
        }
        bad
    }

    fn update_checksum(&self, ck: &Checksum, st: &mut State, frame: &[u8], sc: &mut Scratch) {
        if !ck.supported {
            st.note(ck.unsupported);
            return;
        }
        if let Some(v) = self.checksum_value(ck, st, frame, sc) {
            st.phv.cells[self.lay.value_cell(ck.target as usize) as usize] = v;
            st.wrote(ck.dst);
        }
    }

    /// The checksum's calculation over the PHV; None when its condition is false.
    fn checksum_value(&self, ck: &Checksum, st: &mut State, frame: &[u8], sc: &mut Scratch) -> Option<u128> {
        if let Some(c) = ck.cond {
            let mut why = u32::MAX;
            let env = Env { cells: &st.phv.cells, params: &[], frame, pos: st.pos };
            if self.code.eval(c, &env, &mut why).unwrap_or(0) == 0 {
                return None;
            }
        }
        if let Some(s) = &ck.sum16 {
            return Some(super::hash::fold16(s.sum(&st.phv.cells)) as u128 & mask(self.lay.width[ck.target as usize]));
        }
        // the calculation's input as a bit string
        let buf = &mut sc.bytes;
        buf.clear();
        let mut bits = 0usize;
        let mut last_header = None;
        for inp in &ck.inputs {
            match *inp {
                CkInput::Field { slot, header } => {
                    let hd = &self.headers[header as usize];
                    if st.phv.cells[hd.valid as usize] == 0 {
                        continue;
                    }
                    let (c, w) = (self.lay.value_cell(slot as usize) as usize, self.lay.width[slot as usize]);
                    if self.lay.limbs[slot as usize] == 1 {
                        append_bits(buf, bits, w, st.phv.cells[c]);
                    } else {
                        buf.resize((bits + w as usize).div_ceil(8), 0);
                        write_wide(buf, bits, w, &st.phv.cells[c..c + self.lay.limbs[slot as usize] as usize]);
                    }
                    bits += w as usize;
                    last_header = Some(header);
                }
                CkInput::Const { v, width } => {
                    buf.resize((bits + width as usize).div_ceil(8), 0);
                    write_wide(buf, bits, width, &[v & mask(width.min(128))]);
                    bits += width as usize;
                }
                CkInput::Header(h) => {
                    if st.phv.cells[self.headers[h as usize].valid as usize] == 0 {
                        continue;
                    }
                    buf.resize((bits + 8 * self.header_bytes(h, st)).div_ceil(8), 0);
                    bits += self.write_header(h, st, buf, bits);
                    last_header = Some(h);
                }
                CkInput::Payload => {
                    let after = last_header.and_then(|lh| self.deparser.iter().position(|&x| x == lh)).map_or(0, |p| p + 1);
                    for &h in &self.deparser[after..] {
                        if st.phv.cells[self.headers[h as usize].valid as usize] != 0 {
                            buf.resize((bits + 8 * self.header_bytes(h, st)).div_ceil(8), 0);
                            bits += self.write_header(h, st, buf, bits);
                        }
                    }
                    let payload = &frame[st.pos.min(frame.len())..];
                    if bits % 8 == 0 {
                        // on a byte boundary (as always after whole headers): the bytes as they are
                        buf.truncate(bits / 8);
                        buf.extend_from_slice(payload);
                        bits += 8 * payload.len();
                    } else {
                        for &b in payload {
                            buf.resize((bits + 8).div_ceil(8), 0);
                            write_bits(buf, bits, 8, b as u128);
                            bits += 8;
                        }
                    }
                }
            }
        }
        let w = self.lay.width[ck.target as usize];
        let n = bits.div_ceil(8).min(buf.len());
        ck.imp.as_ref().map(|a| a.hash(&buf[..n]) as u128 & mask(w))
    }
}

#[cfg(test)]
mod tests {
    use crate::program::exec::tests::B;
    use crate::program::exec::{Program, State};
    use crate::program::phv::{mask, read_bits};
    use proptest::prelude::*;
    use serde_json::json;

    /// A program whose deparser emits one header of fields `widths` wide,
    /// padded to whole bytes; the header and the widths with the pad.
    fn one_header(mut widths: Vec<u32>) -> (Program, u32, Vec<u32>) {
        let total: u32 = widths.iter().sum();
        if total % 8 != 0 {
            widths.push(8 - total % 8);
        }
        let mut b = B::new();
        let names: Vec<String> = (0..widths.len()).map(|i| format!("f{i}")).collect();
        let fields: Vec<(&str, u32)> = names.iter().map(|n| n.as_str()).zip(widths.iter().copied()).collect();
        let h = b.header("h", &fields, false);
        (Program::link(&b.build(json!({"deparser": [h]}))).unwrap(), h, widths)
    }

    proptest! {
        /// The fields' sum equals csum16 over their packed bytes (BMv2's
        /// way, the generic path), for any widths up to 48 and any headers
        /// invalid.
        #[test]
        fn sum16_of_fields_equals_csum16_of_their_bytes(fields in proptest::collection::vec((1u32..=48, any::<u64>(), any::<bool>()), 0..16)) {
            let mut cells = Vec::new();
            let mut ins = Vec::new();
            let (mut buf, mut bits) = (Vec::new(), 0usize);
            for &(w, v, valid) in &fields {
                let cell = cells.len() as u32;
                // stray bits above the width are left out, as an assignment's truncation makes them
                cells.push(v as u128 | 1 << 100);
                cells.push(valid as u128);
                ins.push(super::SumIn { cell, valid: cell + 1, w });
                if valid {
                    crate::program::phv::append_bits(&mut buf, bits, w, v as u128);
                    bits += w as usize;
                }
            }
            let want = crate::program::hash::csum16(&buf);
            prop_assert_eq!(crate::program::hash::fold16(super::sum16(&ins, &cells)), want);
        }

        /// Fields of one header summed by the plan give the checksum the
        /// accumulator gives, the header valid or not.
        #[test]
        fn planned_sum16_equals_the_accumulator(fields in proptest::collection::vec((1u32..=48, any::<u64>()), 1..16), valid in any::<bool>()) {
            let mut cells = vec![valid as u128];
            let mut ins = Vec::new();
            for &(w, v) in &fields {
                ins.push(super::SumIn { cell: cells.len() as u32, valid: 0, w });
                cells.push(v as u128 | 1 << 100);
            }
            let s = super::Sum16::of(ins.clone().into());
            prop_assert!(s.plan.is_some());
            prop_assert_eq!(crate::program::hash::fold16(s.sum(&cells)), crate::program::hash::fold16(super::sum16(&ins, &cells)));
        }

        /// A header's planned packing writes the bytes the accumulator
        /// writes, for any widths up to 64 (stray bits above a width left out).
        #[test]
        fn planned_packing_equals_the_accumulator(widths in proptest::collection::vec(1u32..=64, 1..16), seed in any::<u64>()) {
            let (p, h, widths) = one_header(widths);
            let mut st = State::new(&p);
            let mut x = seed | 1;
            for f in &p.headers[h as usize].fields {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                st.phv.cells[f.cell as usize] = (x as u128) << 64 | x.rotate_left(29) as u128;
            }
            let bytes = widths.iter().sum::<u32>() as usize / 8;
            let (mut a, mut c) = (vec![0u8; bytes], vec![0u8; bytes]);
            let plan = p.packs[h as usize].as_ref().unwrap();
            prop_assert_eq!(plan.write(&st.phv.cells, &mut a), bytes * 8);
            p.pack_header(&p.headers[h as usize], &st, &mut c);
            prop_assert_eq!(a, c);
        }

        /// A header assembled through the accumulator holds each field's
        /// value at its bit offset, for any widths (wide fields included).
        #[test]
        fn packed_headers_hold_every_field_at_its_offset(widths in proptest::collection::vec(1u32..=140, 1..12), seed in any::<u64>()) {
            let (p, h, widths) = one_header(widths);
            let mut st = State::new(&p);
            let mut x = seed | 1;
            let mut vals = Vec::new();
            for f in &p.headers[h as usize].fields {
                let mut limbs = Vec::new();
                for l in 0..f.limbs {
                    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                    let top = if l == 0 { f.width - 128 * (f.limbs - 1) } else { 128 };
                    let v = ((x as u128) << 64 | x.rotate_left(29) as u128) & mask(top);
                    st.phv.cells[(f.cell + l) as usize] = v;
                    limbs.push(v);
                }
                vals.push(limbs);
            }
            let bytes = widths.iter().sum::<u32>() as usize / 8;
            let mut out = vec![0u8; bytes];
            prop_assert_eq!(p.pack_header(&p.headers[h as usize], &st, &mut out), bytes * 8);
            let mut bit = 0usize;
            for (f, limbs) in p.headers[h as usize].fields.iter().zip(&vals) {
                let mut at = bit;
                for (l, v) in limbs.iter().enumerate() {
                    let w = if l == 0 { f.width - 128 * (f.limbs - 1) } else { 128 };
                    prop_assert_eq!(read_bits(&out, at, w), *v);
                    at += w as usize;
                }
                bit += f.width as usize;
            }
        }
    }
}

//! The PHV (packet header vector): every header field and metadata field of
//! one packet, flat, and the bit-level reads and writes between packet bytes
//! and fields.
//!
//! A field is one `u128` cell when it is at most 128 bits wide (nearly all
//! are); a wider fixed field takes `ceil(w / 128)` cells, the most
//! significant first, its value right-aligned; a varbit field takes a cell
//! holding its current length in bits and then the cells of its largest
//! value. A header's validity bit is a cell too (`$valid$`, 0 or 1), so
//! keys and expressions read it like any field.
//!
//! Reset between packets costs what the packet touched, not the PHV's
//! size: cells are grouped by header (a stack's next-index cell is its own
//! group), every write marks its group dirty (one OR into a bitset), and
//! the next packet starts by restoring the dirty groups from the template
//! (all fields 0, metadata headers valid).

use super::ir::Description;

/// Where each slot of the description lives in the PHV.
#[derive(Clone, Debug)]
pub struct Layout {
    /// Slot -> its first cell (for a varbit field, its length cell).
    pub cell: Vec<u32>,
    /// Slot -> width in bits (a varbit field: its largest width).
    pub width: Vec<u32>,
    /// Slot -> cells of its value (1 for fields of at most 128 bits).
    pub limbs: Vec<u32>,
    /// Slot -> whether it is a varbit field.
    pub varbit: Vec<bool>,
    /// Slot -> its reset group.
    pub group: Vec<u32>,
    /// Slot -> its name (`header.field`).
    pub names: Vec<String>,
    /// Group -> its cells `[start, end)`.
    pub groups: Vec<(u32, u32)>,
    /// Cells of a fresh packet.
    pub template: Vec<u128>,
    /// Group -> the one cell of it the template sets (to 1: a metadata
    /// header's validity; `u32::MAX`: none), the rest of it being 0.
    pub group_one: Vec<u32>,
}

impl Layout {
    pub fn new(d: &Description) -> Result<Layout, String> {
        let n = d.fields.len();
        let mut lay = Layout {
            cell: vec![0; n],
            width: vec![0; n],
            limbs: vec![1; n],
            varbit: vec![false; n],
            group: vec![0; n],
            names: d.fields.iter().map(|f| f.0.clone()).collect(),
            groups: Vec::new(),
            template: Vec::new(),
            group_one: Vec::new(),
        };
        // largest varbit width, from each header's max_bits
        let mut vb_max = vec![0u32; n];
        for h in &d.headers {
            let fixed: u32 = h.fields.iter().map(|&s| d.fields.get(s as usize).map_or(0, |f| f.1)).sum();
            for &s in &h.fields {
                if d.fields.get(s as usize).map(|f| f.1) == Some(0) {
                    let max = h.max_bits.ok_or_else(|| format!("header {}: expected max_bits for its varbit field", h.name))?;
                    vb_max[s as usize] = max.checked_sub(fixed).ok_or_else(|| format!("header {}: max_bits below its fixed fields", h.name))?;
                }
            }
        }
        // groups: one per header, one per slot outside headers
        let mut group_of_header = vec![u32::MAX; d.headers.len()];
        let mut cells = 0u32;
        for (s, (name, w, h)) in d.fields.iter().enumerate() {
            let g = if *h >= 0 {
                let h = *h as usize;
                if h >= d.headers.len() {
                    return Err(format!("field {name}: expected a header index below {}, found {h}", d.headers.len()));
                }
                if group_of_header[h] == u32::MAX {
                    group_of_header[h] = lay.groups.len() as u32;
                    lay.groups.push((cells, cells));
                }
                group_of_header[h]
            } else {
                lay.groups.push((cells, cells));
                lay.groups.len() as u32 - 1
            };
            let gr = &mut lay.groups[g as usize];
            if gr.1 != cells {
                return Err(format!("field {name}: expected the slots of a header to be contiguous"));
            }
            lay.cell[s] = cells;
            lay.group[s] = g;
            let (width, limbs, extra) = if *w == 0 {
                lay.varbit[s] = true;
                (vb_max[s], vb_max[s].div_ceil(128).max(1), 1)
            } else {
                (*w, w.div_ceil(128), 0)
            };
            lay.width[s] = width;
            lay.limbs[s] = limbs;
            cells += limbs + extra;
            gr.1 = cells;
        }
        lay.template = vec![0; cells as usize];
        for h in &d.headers {
            if h.metadata {
                let v = *lay.cell.get(h.valid as usize).ok_or_else(|| format!("header {}: expected a valid slot", h.name))?;
                lay.template[v as usize] = 1;
            }
        }
        lay.group_one = lay.groups.iter().map(|&(a, b)| (a..b).find(|&c| lay.template[c as usize] != 0).unwrap_or(u32::MAX)).collect();
        debug_assert!(lay.groups.iter().zip(&lay.group_one).all(|(&(a, b), &one)| {
            (a..b).all(|c| lay.template[c as usize] == (c == one) as u128)
        }));
        Ok(lay)
    }

    /// Cells of a packet's PHV.
    pub fn cells(&self) -> usize {
        self.template.len()
    }

    /// The cell of `slot`'s value (after a varbit field's length cell).
    #[inline]
    pub fn value_cell(&self, slot: usize) -> u32 {
        self.cell[slot] + self.varbit[slot] as u32
    }

    /// `slot`, checked against the layout (`what` names the place).
    pub fn slot(&self, slot: u64, what: &str) -> Result<usize, String> {
        if (slot as usize) < self.cell.len() {
            Ok(slot as usize)
        } else {
            Err(format!("{what}: expected a PHV slot below {}, found {slot}", self.cell.len()))
        }
    }
}

/// One packet's PHV: the cells and which groups it wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phv {
    pub cells: Vec<u128>,
    dirty: Vec<u64>,
}

impl Phv {
    pub fn new(lay: &Layout) -> Phv {
        Phv { cells: lay.template.clone(), dirty: vec![0; lay.groups.len().div_ceil(64)] }
    }

    /// Marks group `g` written (it is restored before the next packet).
    #[inline(always)]
    pub fn mark(&mut self, g: u32) {
        self.dirty[(g >> 6) as usize] |= 1u64 << (g & 63);
    }

    /// Marks the groups of `bits` in word `wi` of the dirty set written
    /// (a fused run's groups, gathered at link; see `action::Fused`).
    #[inline(always)]
    pub fn mark_word(&mut self, wi: u32, bits: u64) {
        self.dirty[wi as usize] |= bits;
    }

    /// Restores every written group from the template.
    pub fn reset(&mut self, lay: &Layout) {
        for wi in 0..self.dirty.len() {
            let mut bits = std::mem::take(&mut self.dirty[wi]);
            while bits != 0 {
                let g = wi * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let (a, b) = (lay.groups[g].0 as usize, lay.groups[g].1 as usize);
                // the template is 0 but for a metadata header's validity:
                // zeroed, not copied (no load per cell)
                self.cells[a..b].fill(0);
                let one = lay.group_one[g];
                if one != u32::MAX {
                    self.cells[one as usize] = 1;
                }
            }
        }
    }
}

/// All-ones mask of `w` bits (`w` up to 128).
#[inline(always)]
pub fn mask(w: u32) -> u128 {
    if w >= 128 {
        u128::MAX
    } else {
        (1u128 << w) - 1
    }
}

/// `w` bits (at most 128) of `buf` starting at bit `bit` (bit 0: the most
/// significant bit of byte 0), as a number. The caller checks the range is
/// inside `buf`.
#[inline(always)]
pub fn read_bits(buf: &[u8], bit: usize, w: u32) -> u128 {
    let b0 = bit >> 3;
    let sh = (bit & 7) as u32;
    if w == 0 {
        return 0;
    }
    if sh + w <= 64 && b0 + 8 <= buf.len() {
        let x = u64::from_be_bytes(buf[b0..b0 + 8].try_into().unwrap());
        return ((x << sh) >> (64 - w)) as u128;
    }
    if sh + w <= 128 && b0 + 16 <= buf.len() {
        let x = u128::from_be_bytes(buf[b0..b0 + 16].try_into().unwrap());
        return (x << sh) >> (128 - w);
    }
    read_bits_slow(buf, bit, w)
}

fn read_bits_slow(buf: &[u8], bit: usize, w: u32) -> u128 {
    let (mut v, mut i, end) = (0u128, bit, bit + w as usize);
    while i < end {
        let off = i & 7;
        let take = (8 - off).min(end - i);
        let bits = (buf[i >> 3] >> (8 - off - take)) as u128 & ((1u128 << take) - 1);
        v = if take == 128 { bits } else { (v << take) | bits };
        i += take;
    }
    v
}

/// Writes the low `w` bits (at most 128) of `v` into `buf` at bit `bit`,
/// leaving the other bits of the bytes it touches as they were.
#[inline]
pub fn write_bits(buf: &mut [u8], bit: usize, w: u32, v: u128) {
    if w == 0 {
        return;
    }
    if bit & 7 == 0 && w & 7 == 0 {
        let b0 = bit >> 3;
        let n = (w >> 3) as usize;
        buf[b0..b0 + n].copy_from_slice(&v.to_be_bytes()[16 - n..]);
        return;
    }
    let (mut i, end) = (bit, bit + w as usize);
    while i < end {
        let off = i & 7;
        let take = (8 - off).min(end - i);
        let shift = end - i - take; // bits of v below this chunk
        let bits = ((v >> shift) as u8) & (((1u16 << take) - 1) as u8);
        let pos = 8 - off - take;
        let m = ((((1u16 << take) - 1) as u8) << pos) as u8;
        let b = &mut buf[i >> 3];
        *b = (*b & !m) | (bits << pos);
        i += take;
    }
}

/// Appends the low `w` bits (at most 128) of `v` to a bit string of `bit`
/// bits held in `buf` (`bit.div_ceil(8)` bytes, the bits past `bit` zero),
/// keeping that form. The checksum and hash inputs are built this way: with
/// one 16-byte store, not a bit loop or a call to `memcpy`.
#[inline]
pub fn append_bits(buf: &mut Vec<u8>, bit: usize, w: u32, v: u128) {
    debug_assert_eq!(buf.len(), bit.div_ceil(8));
    let (off, w) = (bit & 7, w as usize);
    if w == 0 {
        return;
    }
    let t = off + w;
    if t > 128 {
        buf.resize((bit + w).div_ceil(8), 0);
        write_bits(buf, bit, w as u32, v);
        return;
    }
    let v = v & mask(w as u32);
    // the partial last byte's bits then `v`, left-aligned in 128 bits
    let start = bit / 8;
    let c = if off == 0 {
        v << (128 - t)
    } else {
        let head = (buf[start] >> (8 - off)) as u128;
        ((head << w) | v) << (128 - t)
    };
    buf.truncate(start);
    buf.extend_from_slice(&c.to_be_bytes());
    buf.truncate(start + t.div_ceil(8));
}

/// A value of `w` bits spread over `out.len()` cells, most significant
/// first, right-aligned (the first cell holds the top `w - 128 (n - 1)` bits).
pub fn read_wide(buf: &[u8], bit: usize, w: u32, out: &mut [u128]) {
    let n = out.len();
    for (k, o) in out.iter_mut().rev().enumerate() {
        let lo = (k as u32) * 128;
        if lo >= w {
            *o = 0;
            continue;
        }
        let take = (w - lo).min(128);
        *o = read_bits(buf, bit + (w - lo - take) as usize, take);
    }
    debug_assert!(n >= w.div_ceil(128) as usize);
}

/// Writes a value spread over cells as [`read_wide`] reads it.
pub fn write_wide(buf: &mut [u8], bit: usize, w: u32, cells: &[u128]) {
    for (k, c) in cells.iter().rev().enumerate() {
        let lo = (k as u32) * 128;
        if lo >= w {
            continue;
        }
        let take = (w - lo).min(128);
        write_bits(buf, bit + (w - lo - take) as usize, take, *c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference_read(buf: &[u8], bit: usize, w: u32) -> u128 {
        (0..w as usize).fold(0u128, |v, i| {
            let b = bit + i;
            (v << 1) | ((buf[b >> 3] >> (7 - (b & 7))) & 1) as u128
        })
    }

    proptest! {
        /// Reset (groups zeroed, a metadata header's validity set) gives
        /// back the template in every group written, whatever was written.
        #[test]
        fn reset_restores_the_template(writes in proptest::collection::vec((0usize..64, any::<u128>()), 0..40)) {
            let d: super::super::ir::Description = serde_json::from_value(serde_json::json!({
                "format": "synapse-p4-program", "version": 1,
                "fields": [["m.$valid$", 1, 0], ["m.a", 8, 0], ["m.b", 16, 0], ["h.$valid$", 1, 1], ["h.c", 32, 1], ["h.d", 200, 1],
                           ["x", 9, -1], ["g.$valid$", 1, 2], ["g.e", 3, 2]],
                "headers": [{"name": "m", "valid": 0, "fields": [1, 2], "metadata": true},
                            {"name": "h", "valid": 3, "fields": [4, 5], "metadata": false},
                            {"name": "g", "valid": 7, "fields": [8], "metadata": true}],
                "errors": {"names": {}, "PacketTooShort": 1, "NoMatch": 2, "StackOutOfBounds": 3, "HeaderTooShort": 4, "ParserTimeout": 5},
                "std": {}, "parser": {"init": -1, "states": []}, "actions": [], "nodes": [], "pipelines": [], "keyed": []
            })).unwrap();
            let lay = Layout::new(&d).unwrap();
            let mut phv = Phv::new(&lay);
            for &(c, v) in &writes {
                let c = c % lay.cells();
                phv.cells[c] = v;
                let g = lay.groups.iter().position(|&(a, b)| (a as usize..b as usize).contains(&c)).unwrap();
                phv.mark(g as u32);
            }
            phv.reset(&lay);
            prop_assert_eq!(&phv.cells, &lay.template);
            prop_assert_eq!(lay.template.iter().filter(|&&t| t == 1).count(), 2);
        }

        #[test]
        fn read_and_write_agree_with_a_bit_by_bit_reference(
            buf in proptest::collection::vec(any::<u8>(), 0..40), bit in 0usize..200, w in 0u32..=128, v in any::<u128>()
        ) {
            prop_assume!(bit + w as usize <= buf.len() * 8);
            prop_assert_eq!(read_bits(&buf, bit, w), reference_read(&buf, bit, w));
            let mut out = buf.clone();
            write_bits(&mut out, bit, w, v);
            prop_assert_eq!(read_bits(&out, bit, w), v & mask(w));
            // the bits around the field are untouched
            for i in (0..buf.len() * 8).filter(|&i| i < bit || i >= bit + w as usize) {
                prop_assert_eq!(reference_read(&out, i, 1), reference_read(&buf, i, 1));
            }
        }

        /// Appending fields one after another builds the bit string that
        /// writing them into a zeroed buffer of the final length does
        /// (values with bits above their width, offsets of every phase).
        #[test]
        fn appended_bits_equal_bits_written_in_place(
            fields in proptest::collection::vec((0u32..=128, any::<u128>()), 0..12)
        ) {
            let (mut app, mut bit) = (Vec::new(), 0usize);
            let total: usize = fields.iter().map(|f| f.0 as usize).sum();
            let mut out = vec![0u8; total.div_ceil(8)];
            for &(w, v) in &fields {
                append_bits(&mut app, bit, w, v);
                write_bits(&mut out, bit, w, v);
                bit += w as usize;
                prop_assert_eq!(app.len(), bit.div_ceil(8));
            }
            prop_assert_eq!(app, out);
        }

        #[test]
        fn wide_values_round_trip(buf in proptest::collection::vec(any::<u8>(), 48..60), bit in 0usize..40, w in 129u32..=320) {
            let mut cells = vec![0u128; w.div_ceil(128) as usize];
            read_wide(&buf, bit, w, &mut cells);
            let mut out = vec![0u8; buf.len()];
            write_wide(&mut out, bit, w, &cells);
            for i in 0..w as usize {
                prop_assert_eq!(reference_read(&out, bit + i, 1), reference_read(&buf, bit + i, 1));
            }
        }
    }
}

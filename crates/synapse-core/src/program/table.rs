//! Match tables: the key a packet builds (per field: the PHV value, 0 while
//! its header is invalid, a slice's bits shifted down), its 32-bit words
//! (most significant first, `ceil(w / 32)` per field: the visit's key), and
//! the first entry it matches in match order (index 0 wins), found by a
//! structure chosen for the table's match kinds:
//!
//! - all fields exact: a hash table on the key words;
//! - one lpm field, the others exact: a multibit trie (stride 8) on the
//!   exact fields' bits followed by the lpm field's, each slot keeping the
//!   smallest entry index of the prefixes that end there; a lookup takes the
//!   smallest along its path, which is the longest prefix when entries are
//!   in match order, and the first entry in any order;
//! - anything else (ternary, range, optional): a linear scan up to
//!   [`LINEAR_MAX`] entries, compiled at load into a [`Scan`] (only the
//!   fields an entry can fail on, each one masked compare), else
//!   the ELU's partitioned tree over the key words (`ptree`, at every key
//!   width; `crate::classify`), which answers the
//!   first matching rule exactly as the scan does. A table with a range on
//!   a field wider than 32 bits (not expressible per word) is scanned.

use crate::classify::{AnyStructure, BuildConfig};
use crate::rules::{AnyRuleSet, FieldSpec, MatchKind, Schema};

use super::exec::State;
use super::phv::mask;

/// Largest table matched by a linear scan.
pub const LINEAR_MAX: usize = 16;
/// Most key words a table may have (`crate::rules::MAX_WORDS`).
pub const MAX_KEY_WORDS: usize = crate::rules::MAX_WORDS;

/// One key field.
#[derive(Clone, Debug)]
pub struct KeyPart {
    pub cell: u32,
    pub width: u32,
    pub kind: MatchKind,
    /// The header's validity cell: the key reads 0 while it is 0.
    pub valid: Option<u32>,
    /// A slice: `(value & mask) >> shift`.
    pub slice: Option<(u128, u32)>,
    /// Words of this field in the key.
    pub words: u32,
    pub slot: u32,
    pub name: String,
}

/// A key field as a lookup reads it (see [`TableHot`]): `(cell & mask) >>
/// shift`, 0 while the validity cell (`u32::MAX`: none) is 0.
#[derive(Clone, Copy, Debug)]
pub struct KeyHot {
    pub mask: u128,
    pub cell: u32,
    pub valid: u32,
    pub shift: u32,
    pub words: u32,
}

/// What every application of a table reads, 32 bytes, in one array over
/// the program's tables: its key fields' [`KeyHot`]s (`keys..keys + nkeys`
/// of [`super::exec::Program::key_hot`]), the miss, its entries' hits and
/// action data in the program-wide arrays from `hits` and `data`. The
/// [`Table`] record (names, rows, build-time data) is read only by tables
/// that are not `plain` (synthesized key fields, add-on-miss, action
/// selectors, direct counters and meters).
#[derive(Clone, Copy, Debug)]
pub struct TableHot {
    pub miss: Hit,
    pub keys: u32,
    pub hits: u32,
    pub data: u32,
    /// Its visit number (`u16::MAX`: keyless).
    pub keyed: u16,
    pub nkeys: u8,
    pub words: u8,
    pub plain: bool,
    /// Every key field one word and whole (no slice): see [`TableHot::word`].
    pub one_word: bool,
    /// How a plain table's key is built and probed (chosen at link).
    pub probe: Probe,
}

/// A plain table's lookup path, chosen at link from its key fields and
/// lookup structure: one whole one-word field in an exact hash or an lpm
/// trie of at most 32 bits (nearly every table of a router) is one word
/// pushed and one probe of that structure, without the key loop or
/// [`Index::lookup_words`]' dispatch on the structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// The key built field by field, then [`Index::lookup_words`] or [`Index::lookup`].
    General,
    /// One field, [`HashIndex::get_one`].
    Exact1,
    /// One field, [`Trie::get_word`].
    Lpm1,
}

/// Writes a key field's value as its 32-bit words, most significant
/// first, at `words[w..]`; returns the index after them. The exact tables'
/// hash keys are these words, so the packet's key and the entries' must
/// be split alike.
#[inline]
fn push_words(x: u128, n: u32, words: &mut [u32], w: usize) -> usize {
    if n == 1 {
        // nearly every field: one word, no shifts of 128-bit values
        words[w] = x as u32;
        return w + 1;
    }
    for i in 0..n as usize {
        words[w + i] = (x >> (32 * (n as usize - 1 - i))) as u32;
    }
    w + n as usize
}

impl TableHot {
    /// Reads the key's field values into `vals` and its words into `words` (as [`Table::key`]).
    #[inline]
    pub fn key(keys: &[KeyHot], cells: &[u128], vals: &mut [u128], words: &mut [u32]) {
        let mut w = 0;
        for (k, v) in keys.iter().zip(vals.iter_mut()) {
            let mut x = (cells[k.cell as usize] & k.mask) >> k.shift;
            if k.valid != u32::MAX && cells[k.valid as usize] == 0 {
                x = 0;
            }
            *v = x;
            w = push_words(x, k.words, words, w);
        }
    }

    /// The key word of a field that is one word and not a slice (nearly
    /// every key field; see [`Self::one_word`]): no 128-bit mask and shift.
    /// A one-word key is these words alone, written straight into the
    /// visit record, and [`Index::lookup_words`] reads them there.
    #[inline(always)]
    pub fn word(k: &KeyHot, cells: &[u128]) -> u32 {
        let x = cells[k.cell as usize] as u32;
        if k.valid != u32::MAX && cells[k.valid as usize] == 0 {
            0
        } else {
            x
        }
    }

    /// Whether `keys` may be built by [`Self::word`].
    pub fn one_word(keys: &[KeyHot]) -> bool {
        keys.iter().all(|k| k.words == 1 && k.shift == 0 && k.mask == u128::MAX)
    }
}

/// What a lookup gives: the action (u32::MAX: none), where its data
/// starts in [`Table::data`], and the next node (-1: end of pipeline).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit {
    pub action: u32,
    pub data: u32,
    pub next: i32,
}

/// How a table finds its first matching entry.
pub enum Index {
    /// Entries with no lookup structure (a keyless table, or an empty one).
    None,
    Exact(HashIndex),
    Lpm(Trie),
    Linear(Scan),
    Classifier(AnyStructure),
}

impl Index {
    /// The index of the first entry the key matches.
    #[inline]
    pub fn lookup(&self, vals: &[u128], words: &[u32]) -> Option<u32> {
        match self {
            Index::None => None,
            Index::Exact(h) => h.get(words),
            Index::Lpm(tr) => tr.get(vals),
            Index::Linear(s) => s.get(vals),
            Index::Classifier(c) => c.classify_one(words),
        }
    }
}

impl Index {
    /// The lookup path of a table whose key is `keys` (see [`Probe`]).
    pub fn probe(&self, keys: &[KeyHot]) -> Probe {
        if keys.len() != 1 || !TableHot::one_word(keys) {
            return Probe::General;
        }
        match self {
            Index::Exact(h) if !h.one.is_empty() => Probe::Exact1,
            Index::Lpm(tr) if tr.pad32 != u32::MAX => Probe::Lpm1,
            _ => Probe::General,
        }
    }

    /// The lookup of a one-word key `w` by `probe` (not [`Probe::General`]),
    /// as [`Self::lookup_words`] answers it.
    #[inline(always)]
    pub fn lookup_one(&self, probe: Probe, w: u32) -> Option<u32> {
        match (probe, self) {
            (Probe::Exact1, Index::Exact(h)) => h.get_one(w),
            (Probe::Lpm1, Index::Lpm(tr)) => tr.get_word(w),
            _ => unreachable!("probe {probe:?} chosen for another structure"),
        }
    }

    /// [`Self::lookup`] for a key whose fields are one word each (see
    /// [`TableHot::one_word`]): field `i`'s value is `words[i]`. The
    /// exact hash, the classifier and a 64-bit scan read the words; the
    /// others get the values widened into `vals` first.
    #[inline]
    pub fn lookup_words(&self, words: &[u32], vals: &mut [u128]) -> Option<u32> {
        match self {
            Index::None => None,
            // a one-word key's packed slots: probed here, not through the general path
            Index::Exact(h) if !h.one.is_empty() => h.get_one(words[0]),
            Index::Exact(h) => h.get(words),
            Index::Classifier(c) => c.classify_one(words),
            Index::Linear(s) if !s.narrow.is_empty() => s.scan64(|f| words[f] as u64),
            // one lpm field of at most 32 bits (an IPv4 route): its word is the trie's key
            Index::Lpm(tr) if tr.pad32 != u32::MAX => tr.get_word(words[0]),
            _ => {
                for (v, &w) in vals.iter_mut().zip(words) {
                    *v = w as u128;
                }
                self.lookup(&vals[..words.len()], words)
            }
        }
    }
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(match self {
            Index::None => "none",
            Index::Exact(_) => "exact hash",
            Index::Lpm(_) => "lpm trie",
            Index::Linear(_) => "linear scan",
            Index::Classifier(_) => "classifier",
        })
    }
}

#[derive(Debug)]
pub struct Table {
    pub name: String,
    /// Index among the keyed tables (visits name it), None for keyless ones.
    pub keyed: Option<u16>,
    pub key: Vec<KeyPart>,
    pub words: usize,
    /// Per entry, per key field: lo, hi, mask.
    pub rows: Vec<u128>,
    /// Per entry its hit, and the action data hits and members index: built
    /// here; a linked program moves them into `Program::hits` and
    /// `Program::data` (empty here then).
    pub hits: Vec<Hit>,
    pub miss: Hit,
    pub data: Vec<u128>,
    /// Built here; a linked program keeps it in `Program::indexes` (None here then).
    pub index: Index,
    /// Key fields that may hold a synthesized value: (key field, slot).
    pub taint: Vec<(u32, u32)>,
    /// Per key field: the reason a synthesized value there is counted under.
    pub taint_reason: Vec<u32>,
    /// Action selector groups: per entry `(start, len)` into `members`
    /// (len 0: not a group), the default's, and the selector's calculation.
    pub members: Vec<Hit>,
    pub groups: Vec<(u32, u32)>,
    pub default_group: (u32, u32),
    pub selector: Option<u32>,
    /// A direct counter counts every hit; a direct meter (meter, its result field) runs on every hit.
    pub counters: bool,
    pub meter: Option<(u32, super::externs::Out)>,
    /// Per entry: BMv2's entry handle (a direct meter's rates name it).
    pub handles: Vec<u32>,
    /// PNA add-on-miss: entries the data plane adds (`super::learn`).
    pub learn: Option<super::learn::Spec>,
}

impl Table {
    /// Reads the key's field values into `vals` and its words into `words`.
    #[inline]
    pub fn key(&self, cells: &[u128], vals: &mut [u128], words: &mut [u32]) {
        let mut w = 0;
        for (k, v) in self.key.iter().zip(vals.iter_mut()) {
            let mut x = cells[k.cell as usize];
            if let Some(vc) = k.valid {
                if cells[vc as usize] == 0 {
                    x = 0;
                }
            }
            if let Some((m, s)) = k.slice {
                x = (x & m) >> s;
            }
            *v = x;
            w = push_words(x, k.words, words, w);
        }
    }

    /// The index of the first entry the key matches.
    #[inline]
    pub fn lookup(&self, vals: &[u128], words: &[u32]) -> Option<u32> {
        self.index.lookup(vals, words)
    }

    /// Its key fields as lookups read them.
    pub fn key_hot(&self) -> Vec<KeyHot> {
        self.key.iter().map(|k| {
            let (mask, shift) = k.slice.unwrap_or((u128::MAX, 0));
            KeyHot { mask, cell: k.cell, valid: k.valid.unwrap_or(u32::MAX), shift, words: k.words }
        }).collect()
    }

    /// The linear oracle: the first entry whose every field has `lo <= v & mask <= hi`.
    pub fn scan(&self, vals: &[u128]) -> Option<u32> {
        let nf = self.key.len();
        'entry: for (e, row) in self.rows.chunks_exact(3 * nf.max(1)).enumerate() {
            for (i, &v) in vals[..nf].iter().enumerate() {
                let x = v & row[3 * i + 2];
                if x < row[3 * i] || x > row[3 * i + 1] {
                    continue 'entry;
                }
            }
            return Some(e as u32);
        }
        None
    }

    /// Builds the lookup structure for the entries in `rows`.
    pub fn build_index(&mut self) {
        let n = self.hits.len();
        let nf = self.key.len();
        self.index = if nf == 0 || n == 0 {
            Index::None
        } else if self.key.iter().all(|k| k.kind == MatchKind::Exact) {
            let mut words = vec![0u32; self.words];
            let mut h = HashIndex::new(self.words, n);
            for e in 0..n {
                let mut w = 0;
                for (i, k) in self.key.iter().enumerate() {
                    w = push_words(self.rows[e * 3 * nf + 3 * i], k.words, &mut words, w);
                }
                h.insert(&words, e as u32);
            }
            h.pack();
            Index::Exact(h)
        } else if let Some(t) = Trie::build(self) {
            Index::Lpm(t)
        } else if n <= LINEAR_MAX || self.key.iter().any(|k| k.kind == MatchKind::Range && k.width > 32) {
            Index::Linear(Scan::new(&self.rows, nf))
        } else {
            self.classifier().map_or_else(|| Index::Linear(Scan::new(&self.rows, nf)), Index::Classifier)
        };
    }

    fn classifier(&self) -> Option<AnyStructure> {
        let nf = self.key.len();
        let mut fields = Vec::new();
        for k in &self.key {
            let top = k.width - 32 * (k.words - 1);
            for j in 0..k.words {
                let bits = if j == 0 { top } else { 32 } as u8;
                fields.push(FieldSpec { name: k.name.clone(), bits, kind: k.kind });
            }
        }
        let (mut lo, mut hi, mut mk) = (Vec::new(), Vec::new(), Vec::new());
        for row in self.rows.chunks_exact(3 * nf) {
            for (i, k) in self.key.iter().enumerate() {
                for j in (0..k.words).rev() {
                    lo.push((row[3 * i] >> (32 * j)) as u32);
                    hi.push((row[3 * i + 1] >> (32 * j)) as u32);
                    mk.push((row[3 * i + 2] >> (32 * j)) as u32);
                }
            }
        }
        let set = AnyRuleSet::from_words(&self.name, Schema { fields }, &lo, &hi, &mk).ok()?;
        // ptree at every width: it builds where the decision tree passes its
        // budget (UPF's generated 10K acls), 2-10x faster, with 0.6-1.7x its
        // lookups on the P4 ACLs' generated entries (scripts/bench_wide.py).
        AnyStructure::build("ptree", &set, &BuildConfig::default()).ok()
    }
}

/// A linear scan compiled from the entries' rows (see [`Table::scan`], the
/// oracle it must equal): per entry only the fields it can fail on (a field
/// with `lo == 0` and `hi >= mask` matches every value and is dropped: the
/// wildcards of a ternary entry, a full range), each one test
/// `(v & mask) - lo <= hi - lo` (wrapping: `lo <= x <= hi` in one compare).
#[derive(Clone, Debug, Default)]
pub struct Scan {
    /// Per entry: the end of its tests in `tests` (its start: the previous entry's end).
    ends: Vec<u32>,
    tests: Vec<Test>,
    /// The same tests in 64 bits, when every mask and bound fits (nearly
    /// every table: no 128-bit arithmetic, half the bytes scanned); empty otherwise.
    narrow: Vec<Test64>,
}

#[derive(Clone, Copy, Debug)]
struct Test {
    mask: u128,
    lo: u128,
    span: u128,
    field: u32,
}

/// A [`Test`] whose mask and `lo + span` fit in 64 bits: `v & mask` then
/// fits too, and a value below `lo` still wraps above the span (`2^64 -
/// (lo - x) > span` as `lo + span < 2^64`), so the 64-bit test answers as
/// the 128-bit one.
#[derive(Clone, Copy, Debug)]
struct Test64 {
    mask: u64,
    lo: u64,
    span: u64,
    field: u32,
}

impl Scan {
    /// From rows of (lo, hi, mask) per field, `nf` fields.
    pub fn new(rows: &[u128], nf: usize) -> Scan {
        let mut s = Scan::default();
        for row in rows.chunks_exact(3 * nf.max(1)) {
            for (i, f) in row.chunks_exact(3).enumerate() {
                let (lo, hi, m) = (f[0], f[1], f[2]);
                if lo > hi {
                    // matches nothing: 0 - 1 wraps above a span of 0
                    s.tests.push(Test { mask: 0, lo: 1, span: 0, field: i as u32 });
                } else if lo != 0 || hi < m {
                    s.tests.push(Test { mask: m, lo, span: hi - lo, field: i as u32 });
                }
            }
            // the test an entry most likely fails first (fewest values
            // passing: a narrow span under a wide mask): a miss, the common
            // case of a small table, is then settled in one test per entry
            let start = s.ends.last().map_or(0, |&e| e as usize);
            let pass = |t: &Test| if t.mask == 0 { f64::NEG_INFINITY } else { (t.span.checked_add(1).map_or(128.0, |x| (x as f64).log2())) - t.mask.count_ones() as f64 };
            s.tests[start..].sort_by(|a, b| pass(a).total_cmp(&pass(b)));
            s.ends.push(s.tests.len() as u32);
        }
        let fits = |t: &Test| t.mask <= u64::MAX as u128 && t.lo.checked_add(t.span).is_some_and(|h| h <= u64::MAX as u128);
        if s.tests.iter().all(fits) {
            s.narrow = s.tests.iter().map(|t| Test64 { mask: t.mask as u64, lo: t.lo as u64, span: t.span as u64, field: t.field }).collect();
        }
        s
    }

    /// The first entry whose every test passes.
    #[inline]
    pub fn get(&self, vals: &[u128]) -> Option<u32> {
        if !self.narrow.is_empty() {
            return self.get_narrow(vals);
        }
        let mut start = 0;
        'entry: for (e, &end) in self.ends.iter().enumerate() {
            let tests = &self.tests[start..end as usize];
            start = end as usize;
            for t in tests {
                if (vals[t.field as usize] & t.mask).wrapping_sub(t.lo) > t.span {
                    continue 'entry;
                }
            }
            return Some(e as u32);
        }
        None
    }

    #[inline]
    fn get_narrow(&self, vals: &[u128]) -> Option<u32> {
        self.scan64(|f| vals[f] as u64)
    }

    /// The 64-bit tests over field values `val(field)` (their low 64 bits).
    #[inline(always)]
    fn scan64(&self, val: impl Fn(usize) -> u64) -> Option<u32> {
        let mut start = 0;
        'entry: for (e, &end) in self.ends.iter().enumerate() {
            let tests = &self.narrow[start..end as usize];
            start = end as usize;
            for t in tests {
                if (val(t.field as usize) & t.mask).wrapping_sub(t.lo) > t.span {
                    continue 'entry;
                }
            }
            return Some(e as u32);
        }
        None
    }
}

/// An open-addressing hash table from key words to the first entry with them.
pub struct HashIndex {
    words: usize,
    keys: Vec<u32>,
    /// Entry index + 1 per slot (0: empty); capacity a power of two.
    slots: Vec<u32>,
    entries: Vec<u32>,
    /// A one-word key's slots packed as `key << 32 | entry + 1` (0: empty):
    /// a probe reads one slot, not a slot, then its key, then its entry.
    one: Vec<u64>,
}

#[inline]
fn hash(words: &[u32]) -> u64 {
    let mut h = 0x9e37_79b9_7f4a_7c15u64;
    for &w in words {
        h = (h.rotate_left(5) ^ w as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    h ^ (h >> 29)
}

impl HashIndex {
    pub fn new(words: usize, n: usize) -> HashIndex {
        let cap = (n * 2).next_power_of_two().max(16);
        HashIndex { words, keys: Vec::with_capacity(n * words), slots: vec![0; cap], entries: Vec::with_capacity(n), one: Vec::new() }
    }

    /// After the inserts: a one-word key's slots packed (see `one`), same
    /// places, so a probe walks the same slots.
    pub fn pack(&mut self) {
        if self.words == 1 && self.entries.iter().all(|&e| e < u32::MAX) {
            self.one = self.slots.iter().map(|&s| match s {
                0 => 0,
                s => (self.keys[(s - 1) as usize] as u64) << 32 | (self.entries[(s - 1) as usize] as u64 + 1),
            }).collect();
        }
    }

    /// Adds `key` -> `entry` unless the key is there already (the first wins).
    pub fn insert(&mut self, key: &[u32], entry: u32) {
        let m = self.slots.len() - 1;
        let mut i = hash(key) as usize & m;
        loop {
            let s = self.slots[i];
            if s == 0 {
                self.keys.extend_from_slice(key);
                self.entries.push(entry);
                self.slots[i] = self.entries.len() as u32;
                return;
            }
            let k = (s - 1) as usize * self.words;
            if &self.keys[k..k + self.words] == key {
                return;
            }
            i = (i + 1) & m;
        }
    }

    #[inline]
    pub fn get(&self, key: &[u32]) -> Option<u32> {
        if !self.one.is_empty() {
            return self.get_one(key[0]);
        }
        let m = self.slots.len() - 1;
        let mut i = hash(key) as usize & m;
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            let k = (s - 1) as usize * self.words;
            // compared word by word (keys are a few words: no call to memcmp)
            if self.keys[k..k + self.words].iter().zip(key).all(|(a, b)| a == b) {
                return Some(self.entries[(s - 1) as usize]);
            }
            i = (i + 1) & m;
        }
    }

    #[inline]
    fn get_one(&self, key: u32) -> Option<u32> {
        let m = self.one.len() - 1;
        let mut i = hash(&[key]) as usize & m;
        loop {
            let p = self.one[i];
            if p == 0 {
                return None;
            }
            if (p >> 32) as u32 == key {
                return Some(p as u32 - 1);
            }
            i = (i + 1) & m;
        }
    }
}

/// A stride-8 multibit trie over a key's bit string (see the module doc),
/// stored compressed as poptrie does: per node, a 256-bit map of the
/// slots with a child (children contiguous, found by popcount) and a
/// 256-bit map of where the slots' smallest entry index changes (one
/// value per run). A node is 88 bytes instead of 256 slots.
pub struct Trie {
    /// Key fields in bit-string order (exact ones first, the lpm field last).
    order: Vec<usize>,
    /// Width of each key field (by key position).
    widths: Vec<u32>,
    bytes: usize,
    nodes: Vec<PNode>,
    /// Per run of slots: the smallest entry index ending there (u32::MAX: none).
    leaves: Vec<u32>,
    /// Smallest index of the entries with an empty prefix.
    zero: u32,
    /// One field of at most 32 bits: the shift that left-aligns it in its
    /// bytes (see [`Trie::get_word`]); `u32::MAX` otherwise.
    pad32: u32,
}

#[derive(Clone, Copy, Default)]
struct PNode {
    child: [u64; 4],
    leaf: [u64; 4],
    /// Set bits of `child` / `leaf` in the words before each word.
    child_pre: [u16; 4],
    leaf_pre: [u16; 4],
    child_base: u32,
    leaf_base: u32,
}

/// The uncompressed trie a [`Trie`] is built from: 256 slots per node of
/// (child node, smallest entry index ending in the slot).
struct Wide {
    slots: Vec<(u32, u32)>,
    zero: u32,
}

impl Wide {
    fn insert(&mut self, key: &[u8], len: u32, e: u32) {
        if len == 0 {
            self.zero = self.zero.min(e);
            return;
        }
        let lv = ((len - 1) / 8) as usize;
        let r = len - 8 * lv as u32;
        let mut node = 0usize;
        for &b in &key[..lv] {
            let s = node * 256 + b as usize;
            if self.slots[s].0 == 0 {
                let child = (self.slots.len() / 256) as u32;
                self.slots.extend(std::iter::repeat_n((0, u32::MAX), 256));
                self.slots[s].0 = child;
            }
            node = self.slots[s].0 as usize;
        }
        let base = (key[lv] as usize) & (0xff00usize >> r) & 0xff;
        for x in base..base + (1usize << (8 - r)) {
            let s = &mut self.slots[node * 256 + x].1;
            *s = (*s).min(e);
        }
    }
}

impl Trie {
    /// The trie of `t`'s entries, if its key is exact fields and one lpm
    /// field and every entry's masks have that shape.
    fn build(t: &Table) -> Option<Trie> {
        let nf = t.key.len();
        let lpm: Vec<usize> = (0..nf).filter(|&i| t.key[i].kind == MatchKind::Lpm).collect();
        if lpm.len() != 1 || t.key.iter().any(|k| !matches!(k.kind, MatchKind::Exact | MatchKind::Lpm)) {
            return None;
        }
        let mut order: Vec<usize> = (0..nf).filter(|&i| i != lpm[0]).collect();
        order.push(lpm[0]);
        let bits: u32 = t.key.iter().map(|k| k.width).sum();
        let bytes = bits.div_ceil(8) as usize;
        if bytes > 64 {
            return None;
        }
        let widths = t.key.iter().map(|k| k.width).collect();
        let pad32 = if nf == 1 && bits <= 32 { 8 * bytes as u32 - bits } else { u32::MAX };
        let mut tr = Trie { order, widths, bytes, nodes: Vec::new(), leaves: Vec::new(), zero: u32::MAX, pad32 };
        let mut wide = Wide { slots: vec![(0, u32::MAX); 256], zero: u32::MAX };
        let mut buf = [0u8; 64];
        for e in 0..t.hits.len() {
            let row = &t.rows[e * 3 * nf..(e + 1) * 3 * nf];
            let mut len = 0u32;
            for (j, &i) in tr.order.iter().enumerate() {
                let (w, m) = (t.key[i].width, row[3 * i + 2]);
                let full = mask(w);
                if j + 1 < tr.order.len() {
                    if m != full {
                        return None;
                    }
                    len += w;
                } else {
                    let plen = m.count_ones();
                    if m != full & !mask(w - plen) {
                        return None; // not a prefix
                    }
                    len += plen;
                }
            }
            tr.write(&row.iter().step_by(3).copied().collect::<Vec<_>>(), &mut buf);
            wide.insert(&buf[..bytes], len, e as u32);
        }
        tr.zero = wide.zero;
        tr.nodes.push(PNode::default());
        tr.compress(&wide, 0, 0);
        Some(tr)
    }

    /// Fills compressed node `at` from wide node `w`, its children after it.
    fn compress(&mut self, wide: &Wide, w: usize, at: usize) {
        let slots = &wide.slots[w * 256..(w + 1) * 256];
        let mut n = PNode { leaf_base: self.leaves.len() as u32, ..PNode::default() };
        let mut kids = Vec::new();
        for (x, &(child, best)) in slots.iter().enumerate() {
            if x == 0 || best != slots[x - 1].1 {
                n.leaf[x >> 6] |= 1 << (x & 63);
                self.leaves.push(best);
            }
            if child != 0 {
                n.child[x >> 6] |= 1 << (x & 63);
                kids.push(child as usize);
            }
        }
        for i in 1..4 {
            n.child_pre[i] = n.child_pre[i - 1] + n.child[i - 1].count_ones() as u16;
            n.leaf_pre[i] = n.leaf_pre[i - 1] + n.leaf[i - 1].count_ones() as u16;
        }
        n.child_base = self.nodes.len() as u32;
        self.nodes.extend(std::iter::repeat_n(PNode::default(), kids.len()));
        self.nodes[at] = n;
        for (i, k) in kids.into_iter().enumerate() {
            self.compress(wide, k, n.child_base as usize + i);
        }
    }

    /// The key's bit string (fields in `order`) into `buf`.
    #[inline]
    fn write(&self, vals: &[u128], buf: &mut [u8; 64]) {
        buf[..self.bytes].fill(0);
        let mut bit = 0usize;
        for &i in &self.order {
            let w = self.widths[i];
            super::phv::write_bits(buf, bit, w, vals[i]);
            bit += w as usize;
        }
    }

    /// [`Self::get`] for one field of at most 32 bits, from its word
    /// (a value of its width): its bytes, the padding bits at the end.
    #[inline]
    fn get_word(&self, x: u32) -> Option<u32> {
        let b = (x << self.pad32).to_be_bytes();
        self.walk(&b[4 - self.bytes..])
    }

    #[inline]
    fn get(&self, vals: &[u128]) -> Option<u32> {
        if self.order.len() == 1 && self.bytes <= 16 {
            // one field: its value's bytes, the padding bits at the end
            let pad = 8 * self.bytes as u32 - self.widths[self.order[0]];
            let b = (vals[self.order[0]] << pad).to_be_bytes();
            return self.walk(&b[16 - self.bytes..]);
        }
        let mut buf = [0u8; 64];
        self.write(vals, &mut buf);
        self.walk(&buf[..self.bytes])
    }

    #[inline]
    fn walk(&self, key: &[u8]) -> Option<u32> {
        let mut best = self.zero;
        let mut n = &self.nodes[0];
        for &b in key {
            let (w, bit) = ((b >> 6) as usize, (b & 63) as u32);
            let upto = (2u64 << bit).wrapping_sub(1); // bits 0..=bit
            let lr = n.leaf_pre[w] as u32 + (n.leaf[w] & upto).count_ones();
            best = best.min(self.leaves[(n.leaf_base + lr - 1) as usize]);
            if (n.child[w] >> bit) & 1 == 0 {
                break;
            }
            let cr = n.child_pre[w] as u32 + (n.child[w] & (upto >> 1)).count_ones();
            n = &self.nodes[(n.child_base + cr) as usize];
        }
        (best != u32::MAX).then_some(best)
    }
}

/// Where a keyed lookup with a synthesized key field is counted.
pub fn tainted_key(t: &Table, st: &State) -> Option<usize> {
    t.taint.iter().find(|&&(_, s)| st.tainted(s)).map(|&(i, _)| i as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A table over cells 0.. (one per field) with `rows` (lo, hi, mask per field), index built.
    fn table(fields: &[(MatchKind, u32)], rows: &[Vec<(u128, u128, u128)>]) -> Table {
        let key: Vec<KeyPart> = fields
            .iter()
            .enumerate()
            .map(|(i, &(kind, width))| KeyPart { cell: i as u32, width, kind, valid: None, slice: None, words: width.div_ceil(32), slot: i as u32, name: format!("f{i}") })
            .collect();
        let words = key.iter().map(|k| k.words as usize).sum();
        let mut t = Table {
            name: "t".into(),
            keyed: Some(0),
            key,
            words,
            rows: rows.iter().flat_map(|r| r.iter().flat_map(|&(a, b, c)| [a, b, c])).collect(),
            hits: (0..rows.len()).map(|e| Hit { action: e as u32, data: 0, next: -1 }).collect(),
            miss: Hit { action: NO_HIT, data: 0, next: -1 },
            data: vec![],
            index: Index::None,
            taint: vec![],
            taint_reason: vec![],
            members: vec![],
            groups: vec![(0, 0); rows.len()],
            default_group: (0, 0),
            selector: None,
            counters: false,
            meter: None,
            handles: (0..rows.len() as u32).collect(),
            learn: None,
        };
        t.build_index();
        t
    }
    const NO_HIT: u32 = u32::MAX;

    /// A random match of `kind` on a `w`-bit field, and a value near it.
    fn field_match(kind: MatchKind, w: u32) -> impl Strategy<Value = ((u128, u128, u128), u128)> {
        let full = mask(w);
        (any::<u128>(), any::<u128>(), 0..=w, any::<u128>()).prop_map(move |(a, b, plen, noise)| {
            let (a, b) = (a & full, b & full);
            let near = a ^ (noise & full & mask(3)); // close to the entry: hits often
            match kind {
                MatchKind::Exact | MatchKind::Optional => ((a, a, full), near),
                MatchKind::Lpm => {
                    let m = full & !mask(w - plen);
                    ((a & m, a & m, m), near)
                }
                MatchKind::Ternary => ((a & b, a & b, b), near),
                MatchKind::Range => ((a.min(b), a.max(b), full), near),
            }
        })
    }

    fn check(fields: Vec<(MatchKind, u32)>, n: std::ops::Range<usize>) -> impl Strategy<Value = ()> {
        let f2 = fields.clone();
        let row = fields.iter().map(|&(k, w)| field_match(k, w)).collect::<Vec<_>>();
        (proptest::collection::vec(row, n), proptest::collection::vec(any::<u64>(), 20)).prop_map(move |(rows, picks)| {
            let entries: Vec<Vec<_>> = rows.iter().map(|r| r.iter().map(|x| x.0).collect()).collect();
            let t = table(&f2, &entries);
            let mut keys: Vec<Vec<u128>> = rows.iter().map(|r| r.iter().map(|x| x.1).collect()).collect();
            keys.extend(picks.iter().map(|&p| f2.iter().map(|&(_, w)| (p as u128 * 0x9e37_79b9_7f4a_7c15) & mask(w)).collect()));
            let (mut vals, mut words) = (vec![0u128; f2.len()], vec![0u32; MAX_KEY_WORDS]);
            for k in keys {
                t.key(&k, &mut vals, &mut words);
                assert_eq!(t.lookup(&vals, &words[..t.words]), t.scan(&vals), "{:?} on {:?} with {:?}", t.index, k, entries);
                if t.key.iter().all(|k| k.words == 1) {
                    // one-word keys: looked up from the words alone
                    let mut wide = vec![0u128; f2.len()];
                    assert_eq!(t.index.lookup_words(&words[..t.words], &mut wide), t.scan(&vals), "words, {:?} on {:?}", t.index, k);
                }
            }
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn exact_hash_on_one_word_keys(_ in check(vec![(MatchKind::Exact, 9)], 0..60)) {}
        #[test]
        fn exact_hash_on_32_bit_keys_keeps_the_first(_ in check(vec![(MatchKind::Exact, 32)], 0..60)) {}
        #[test]
        fn exact_hash_answers_the_first_entry(_ in check(vec![(MatchKind::Exact, 16), (MatchKind::Exact, 48), (MatchKind::Exact, 9)], 0..60)) {}
        #[test]
        fn exact_hash_keeps_the_first_of_duplicate_keys(_ in check(vec![(MatchKind::Exact, 3), (MatchKind::Exact, 2)], 0..30)) {}
        #[test]
        fn lpm_trie_answers_the_first_entry_in_any_order(_ in check(vec![(MatchKind::Exact, 3), (MatchKind::Lpm, 32)], 0..80)) {}
        #[test]
        fn lpm_trie_on_128_bit_prefixes(_ in check(vec![(MatchKind::Lpm, 128)], 0..40)) {}
        #[test]
        fn ternary_and_range_scan_or_classifier(_ in check(vec![(MatchKind::Ternary, 32), (MatchKind::Range, 16), (MatchKind::Ternary, 8), (MatchKind::Lpm, 24)], 0..60)) {}
        #[test]
        fn one_word_scans_and_classifiers_read_the_words(_ in check(vec![(MatchKind::Ternary, 32), (MatchKind::Range, 16), (MatchKind::Optional, 9)], 0..40)) {}
        #[test]
        fn one_lpm_field_reads_its_word(_ in check(vec![(MatchKind::Lpm, 32)], 0..80)) {}
        #[test]
        fn one_lpm_field_of_odd_width_reads_its_word(_ in check(vec![(MatchKind::Lpm, 21)], 0..60)) {}
        #[test]
        fn one_word_lpm_and_exact_read_the_words(_ in check(vec![(MatchKind::Exact, 8), (MatchKind::Lpm, 32)], 0..60)) {}
        #[test]
        fn wide_ranges_are_scanned(_ in check(vec![(MatchKind::Range, 48), (MatchKind::Exact, 8)], 0..40)) {}
    }

    /// A row field: any (lo, hi, mask), or a wildcard, a full range, an empty range.
    fn scan_field() -> impl Strategy<Value = (u128, u128, u128)> {
        let w = || prop_oneof![any::<u128>(), (0u128..8), Just(u128::MAX)];
        prop_oneof![
            (w(), w(), w()),
            Just((0, 0, 0)),
            w().prop_map(|m| (0, m, m)),
            (w(), w()).prop_map(|(a, b)| (a.max(b), a.min(b), u128::MAX)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn compiled_scan_equals_the_row_scan(nf in 1usize..5,
                                             rows in proptest::collection::vec(proptest::collection::vec(scan_field(), 5), 0..17),
                                             keys in proptest::collection::vec(proptest::collection::vec(prop_oneof![any::<u128>(), 0u128..8], 5), 1..20)) {
            let t = table(&vec![(MatchKind::Range, 128); nf], &rows.iter().map(|r| r[..nf].to_vec()).collect::<Vec<_>>());
            let s = Scan::new(&t.rows, nf);
            for k in &keys {
                prop_assert_eq!(s.get(&k[..nf]), t.scan(&k[..nf]));
            }
        }
    }

    /// A row field whose mask and bounds fit in 64 bits (the scan's 64-bit tests), or an empty range.
    fn narrow_field() -> impl Strategy<Value = (u128, u128, u128)> {
        let w = || prop_oneof![any::<u64>().prop_map(u128::from), (0u128..8), Just(u64::MAX as u128)];
        prop_oneof![
            (w(), w(), w()),
            Just((0, 0, 0)),
            w().prop_map(|m| (0, m, m)),
            (w(), w()).prop_map(|(a, b)| (a.max(b), a.min(b), u64::MAX as u128)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Keys with bits above 64 too: the 64-bit tests mask them off as the 128-bit ones do.
        #[test]
        fn narrow_scan_equals_the_row_scan(nf in 1usize..5,
                                           rows in proptest::collection::vec(proptest::collection::vec(narrow_field(), 5), 1..17),
                                           keys in proptest::collection::vec(proptest::collection::vec(prop_oneof![any::<u128>(), any::<u64>().prop_map(u128::from), 0u128..8], 5), 1..20)) {
            let t = table(&vec![(MatchKind::Range, 128); nf], &rows.iter().map(|r| r[..nf].to_vec()).collect::<Vec<_>>());
            let s = Scan::new(&t.rows, nf);
            prop_assert!(s.tests.is_empty() || !s.narrow.is_empty());
            for k in &keys {
                prop_assert_eq!(s.get(&k[..nf]), t.scan(&k[..nf]));
                // and every key the rows name, or just past their bounds
                for r in &rows {
                    let near: Vec<u128> = r[..nf].iter().map(|f| f.0.wrapping_sub(1)).collect();
                    let at: Vec<u128> = r[..nf].iter().map(|f| f.1).collect();
                    prop_assert_eq!(s.get(&near), t.scan(&near));
                    prop_assert_eq!(s.get(&at), t.scan(&at));
                }
            }
        }
    }

    proptest! {
        /// One-word whole keys built without mask and shift give the generic build's values and words.
        #[test]
        fn one_word_key_build_equals_the_generic_one(cells in proptest::collection::vec(prop_oneof![0u128..=u32::MAX as u128, 0u128..2], 8),
                                                    keys in proptest::collection::vec((0u32..8, prop_oneof![Just(u32::MAX), 0u32..8]), 0..6)) {
            let keys: Vec<KeyHot> = keys.iter().map(|&(cell, valid)| KeyHot { mask: u128::MAX, cell, valid, shift: 0, words: 1 }).collect();
            prop_assert!(TableHot::one_word(&keys));
            let (mut v1, mut w1) = (vec![0u128; 6], vec![0u32; 6]);
            TableHot::key(&keys, &cells, &mut v1, &mut w1);
            let w2: Vec<u32> = keys.iter().map(|k| TableHot::word(k, &cells)).collect();
            prop_assert_eq!(&w1[..keys.len()], &w2[..]);
            // the words widened are the generic build's values
            prop_assert!(v1.iter().zip(&w2).all(|(&v, &w)| v == w as u128));
        }
    }

    /// Tables of one field of each kind and width, with their rows' bounds as keys too.
    fn one_field() -> impl Strategy<Value = (Table, Vec<u32>)> {
        (prop_oneof![Just(MatchKind::Exact), Just(MatchKind::Lpm), Just(MatchKind::Ternary)], 1u32..=40)
            .prop_flat_map(|(kind, w)| {
                let rows = proptest::collection::vec(field_match(kind, w).prop_map(|(f, _)| vec![f]), 0..40);
                (Just((kind, w)), rows, proptest::collection::vec(0u128..=mask(w.min(32)), 0..20))
            })
            .prop_map(|((kind, w), rows, mut keys)| {
                keys.extend(rows.iter().flat_map(|r| [r[0].0, r[0].0.wrapping_sub(1), r[0].1]));
                let keys = keys.into_iter().map(|k| (k & mask(w.min(32))) as u32).collect();
                (table(&[(kind, w)], &rows), keys)
            })
    }

    proptest! {
        /// A one-field table's shaped probe answers as the general one-word lookup and the generic key's lookup.
        #[test]
        fn shaped_probes_equal_the_general_lookup((t, keys) in one_field()) {
            let ks = t.key_hot();
            let probe = t.index.probe(&ks);
            if t.key[0].width > 32 || t.key[0].kind == MatchKind::Ternary {
                prop_assert_eq!(probe, Probe::General);
            }
            if probe == Probe::General {
                return Ok(());
            }
            let mut vals = vec![0u128; 1];
            for &w in &keys {
                let cells = [w as u128];
                let (mut v, mut words) = (vec![0u128; 1], vec![0u32; 1]);
                TableHot::key(&ks, &cells, &mut v, &mut words);
                prop_assert_eq!(words[0], w);
                let want = t.index.lookup(&v, &words);
                prop_assert_eq!(t.index.lookup_one(probe, w), want);
                prop_assert_eq!(t.index.lookup_words(&[w], &mut vals), want);
                prop_assert_eq!(want, t.scan(&v));
            }
        }
    }

    #[test]
    fn structures_are_chosen_by_match_kinds_and_size() {
        let kinds = |t: &Table| format!("{:?}", t.index);
        let e = |v: u128| vec![(v, v, mask(16))];
        assert_eq!(kinds(&table(&[(MatchKind::Exact, 16)], &[e(1), e(2)])), "exact hash");
        assert_eq!(kinds(&table(&[(MatchKind::Lpm, 16)], &[e(1)])), "lpm trie");
        assert_eq!(kinds(&table(&[(MatchKind::Ternary, 16)], &(0..LINEAR_MAX as u128).map(e).collect::<Vec<_>>())), "linear scan");
        assert_eq!(kinds(&table(&[(MatchKind::Ternary, 16)], &(0..40).map(e).collect::<Vec<_>>())), "classifier");
        assert_eq!(kinds(&table(&[(MatchKind::Ternary, 16)], &[])), "none");
        // an lpm field given a non-prefix mask (a hand-written entry): scanned, not mis-indexed
        assert_eq!(kinds(&table(&[(MatchKind::Lpm, 16)], &[vec![(0x0f0, 0x0f0, 0x0ff0)]])), "linear scan");
    }
}

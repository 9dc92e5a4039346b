//! Keys, match kinds and rules: what a match table holds.
//!
//! A **key** is the fields a table matches on, each at most 32 bits wide
//! (wider P4 fields are split into 32-bit words, as hardware containers do).
//! Unused words are zero. A **rule** matches every field with one of the P4
//! match kinds (exact, ternary, lpm, range, optional); all of them reduce to
//! one test, `lo <= key & mask <= hi` ([`FieldMatch`]), which is what the
//! linear oracle and the PMU CAM evaluate. The kind is kept beside it because
//! structures such as the trie need to know which fields are prefixes.
//!
//! A [`RuleSet`] is in priority order: index 0 wins over every later rule
//! (ClassBench's "first matching line wins"). Classifiers answer with that
//! index.
//!
//! **Width.** Keys, rules, rule sets, classifiers and the CAM are generic over
//! the number of key words `N`, defaulting to [`MAX_FIELDS`] (8): code that
//! says `Key` means the 8-word key, so the 5-tuple paths compile to what they
//! always did. P4 tables with wider keys (a field of `w` bits takes
//! `ceil(w/32)` words, most significant first) use `N` = 16 or 32, chosen
//! at build time by [`words_for`]; [`AnyRuleSet`] and [`with_width!`]
//! dispatch to those monomorphized instances. More than [`MAX_WORDS`] words
//! is an error naming the table.

pub mod classbench;

use std::fmt;

/// Words of the default key: most fields a 5-tuple-style key can have.
/// ClassBench's 5-tuple uses five.
pub const MAX_FIELDS: usize = 8;

/// Most words any key can have (1024 bits).
pub const MAX_WORDS: usize = 32;

/// The key widths (in words) that are compiled: a table of `n` words uses
/// the first one at least `n`.
pub const KEY_WIDTHS: [usize; 3] = [MAX_FIELDS, 16, MAX_WORDS];

/// The compiled key width for a table of `words` words, or an error naming
/// `table` when it is wider than [`MAX_WORDS`].
pub fn words_for(table: &str, words: usize) -> Result<usize, String> {
    KEY_WIDTHS.iter().copied().find(|&w| w >= words).ok_or_else(|| {
        format!(
            "table {table}: key of {words} 32-bit words is wider than the supported {MAX_WORDS} words ({} bits)",
            32 * MAX_WORDS
        )
    })
}

/// The fields of one lookup, in schema order; unused words are zero.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Key<const N: usize = MAX_FIELDS>(pub [u32; N]);

/// The all-zero 8-word key (only the default width, so that
/// `Key::default()` needs no annotation; any width has [`Key::zeroed`]).
impl Default for Key {
    fn default() -> Self {
        Key([0; MAX_FIELDS])
    }
}

impl<const N: usize> Key<N> {
    /// The all-zero key.
    pub const fn zeroed() -> Key<N> {
        Key([0; N])
    }

    /// A key from its first words (the rest zero); `words.len() <= N`.
    pub fn from_words(words: &[u32]) -> Key<N> {
        let mut k = [0u32; N];
        k[..words.len()].copy_from_slice(words);
        Key(k)
    }
}

impl Key {
    /// A ClassBench 5-tuple key: source, destination, ports, protocol.
    pub fn five_tuple(src: u32, dst: u32, sport: u16, dport: u16, proto: u8) -> Key {
        let mut k = [0u32; MAX_FIELDS];
        k[0] = src;
        k[1] = dst;
        k[2] = sport as u32;
        k[3] = dport as u32;
        k[4] = proto as u32;
        Key(k)
    }
}

/// P4 match kinds (P4_16 core and v1model).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum MatchKind {
    Exact,
    Ternary,
    Lpm,
    Range,
    Optional,
}

impl MatchKind {
    pub fn parse(s: &str) -> Option<MatchKind> {
        Some(match s {
            "exact" => MatchKind::Exact,
            "ternary" => MatchKind::Ternary,
            "lpm" => MatchKind::Lpm,
            "range" => MatchKind::Range,
            "optional" => MatchKind::Optional,
            _ => return None,
        })
    }
}

/// One field of a rule: matches a key word `k` when `lo <= k & mask <= hi`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct FieldMatch {
    pub lo: u32,
    pub hi: u32,
    pub mask: u32,
}

/// All-ones mask of a field `bits` wide.
#[inline]
pub fn width_mask(bits: u8) -> u32 {
    if bits >= 32 {
        u32::MAX
    } else {
        (1u32 << bits) - 1
    }
}

/// Mask of the top `len` bits of a field `bits` wide.
#[inline]
pub fn prefix_mask(len: u8, bits: u8) -> u32 {
    if len == 0 {
        0
    } else {
        width_mask(bits) & !width_mask(bits - len.min(bits))
    }
}

impl FieldMatch {
    /// Matches every value.
    pub const ANY: FieldMatch = FieldMatch { lo: 0, hi: 0, mask: 0 };

    pub fn exact(v: u32) -> FieldMatch {
        FieldMatch { lo: v, hi: v, mask: u32::MAX }
    }
    pub fn ternary(value: u32, mask: u32) -> FieldMatch {
        FieldMatch { lo: value & mask, hi: value & mask, mask }
    }
    /// `value/len` in a field `bits` wide.
    pub fn prefix(value: u32, len: u8, bits: u8) -> FieldMatch {
        let m = prefix_mask(len, bits);
        FieldMatch { lo: value & m, hi: value & m, mask: m }
    }
    /// Inclusive range `lo..=hi`.
    pub fn range(lo: u32, hi: u32) -> FieldMatch {
        FieldMatch { lo, hi, mask: u32::MAX }
    }

    #[inline(always)]
    pub fn matches(&self, k: u32) -> bool {
        let x = k & self.mask;
        self.lo <= x && x <= self.hi
    }

    pub fn is_any(&self) -> bool {
        self.mask == 0
    }

    /// The prefix length if this field is a prefix of a `bits`-wide field
    /// (exact counts as a full-length prefix, wildcard as length 0).
    pub fn prefix_len(&self, bits: u8) -> Option<u8> {
        if self.lo != self.hi {
            // A range that happens to be an aligned block is also a prefix.
            if self.mask & width_mask(bits) != width_mask(bits) {
                return None;
            }
            let size = (self.hi - self.lo) as u64 + 1;
            if !size.is_power_of_two() || (self.lo as u64) % size != 0 {
                return None;
            }
            let host = size.trailing_zeros() as u8;
            return (host <= bits).then_some(bits - host);
        }
        let m = self.mask & width_mask(bits);
        let len = m.count_ones() as u8;
        (prefix_mask(len, bits) == m).then_some(len)
    }

    /// The inclusive range of `bits`-wide values this field matches, if it
    /// is one contiguous range (always true except for non-prefix ternaries).
    pub fn as_range(&self, bits: u8) -> Option<(u32, u32)> {
        let w = width_mask(bits);
        if self.mask & w == w {
            return Some((self.lo, self.hi.min(w)));
        }
        let len = self.prefix_len(bits)?;
        let host = w & !prefix_mask(len, bits);
        Some((self.lo, self.lo | host))
    }
}

/// One field of a table's key.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FieldSpec {
    pub name: String,
    pub bits: u8,
    pub kind: MatchKind,
}

/// The key layout of a table.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Schema {
    pub fields: Vec<FieldSpec>,
}

impl Schema {
    /// ClassBench's 5-tuple: prefixes on addresses, ranges on ports,
    /// value/mask on the protocol.
    pub fn five_tuple() -> Schema {
        let f = |name: &str, bits, kind| FieldSpec { name: name.into(), bits, kind };
        Schema {
            fields: vec![
                f("src", 32, MatchKind::Lpm),
                f("dst", 32, MatchKind::Lpm),
                f("sport", 16, MatchKind::Range),
                f("dport", 16, MatchKind::Range),
                f("proto", 8, MatchKind::Ternary),
            ],
        }
    }
    pub fn len(&self) -> usize {
        self.fields.len()
    }
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

/// ClassBench-ng's trailing TCP-flags field `0xVALUE/0xMASK`: read, kept and
/// written back, never matched (as rte_acl and the published classifiers do).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Flags {
    pub value: u16,
    pub mask: u16,
}

/// A rule: one [`FieldMatch`] per schema field (the rest are [`FieldMatch::ANY`]),
/// a P4 priority (larger wins; for ClassBench files, `len - line`), and an action.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Rule<const N: usize = MAX_FIELDS> {
    pub fields: [FieldMatch; N],
    pub priority: u32,
    pub action: u32,
    pub flags: Option<Flags>,
}

impl<const N: usize> Rule<N> {
    /// A rule matching its first fields with `fields` (`fields.len() <= N`),
    /// the rest with [`FieldMatch::ANY`].
    pub fn new(fields: &[FieldMatch], priority: u32, action: u32) -> Rule<N> {
        let mut f = [FieldMatch::ANY; N];
        f[..fields.len()].copy_from_slice(fields);
        Rule { fields: f, priority, action, flags: None }
    }

    #[inline(always)]
    pub fn matches(&self, key: &Key<N>) -> bool {
        self.fields.iter().zip(key.0.iter()).all(|(f, &k)| f.matches(k))
    }
}

/// Rules in priority order (index 0 first) over one schema.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RuleSet<const N: usize = MAX_FIELDS> {
    pub schema: Schema,
    pub rules: Vec<Rule<N>>,
}

impl<const N: usize> RuleSet<N> {
    pub fn new(schema: Schema, rules: Vec<Rule<N>>) -> RuleSet<N> {
        RuleSet { schema, rules }
    }
    pub fn len(&self) -> usize {
        self.rules.len()
    }
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

impl<const N: usize> RuleSet<N> {
    /// A rule set from flat per-word arrays, `n_rules x schema.len()` each,
    /// row-major, row 0 winning: word `w` of rule `r` matches when
    /// `lo <= key & mask <= hi`. `table` names the set in errors.
    pub fn from_words(table: &str, schema: Schema, lo: &[u32], hi: &[u32], mask: &[u32]) -> Result<RuleSet<N>, String> {
        let nw = schema.len();
        if nw > N {
            return Err(format!("table {table}: key of {nw} words does not fit in {N} words"));
        }
        if lo.len() != hi.len() || lo.len() != mask.len() || (nw == 0 && !lo.is_empty()) || (nw > 0 && lo.len() % nw != 0) {
            return Err(format!(
                "table {table}: lo, hi and mask must have the same shape (rules x {nw} words), found {}, {}, {} values",
                lo.len(),
                hi.len(),
                mask.len()
            ));
        }
        let n = if nw == 0 { 0 } else { lo.len() / nw };
        let rules = (0..n)
            .map(|r| {
                let mut f = [FieldMatch::ANY; N];
                for w in 0..nw {
                    let i = r * nw + w;
                    f[w] = FieldMatch { lo: lo[i], hi: hi[i], mask: mask[i] };
                }
                Rule { fields: f, priority: (n - r) as u32, action: r as u32, flags: None }
            })
            .collect();
        Ok(RuleSet { schema, rules })
    }
}

/// A rule set of any compiled key width ([`KEY_WIDTHS`]); [`with_width!`]
/// runs generic code on the set inside.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum AnyRuleSet {
    W8(RuleSet<8>),
    W16(RuleSet<16>),
    W32(RuleSet<32>),
}

/// Runs `$body` with `$set` bound to the typed set inside an [`AnyRuleSet`]
/// (or any enum with the variants `W8`, `W16`, `W32`), once per width.
#[macro_export]
macro_rules! with_width {
    ($any:expr, $set:ident => $body:expr) => {
        match $any {
            $crate::rules::AnyRuleSet::W8($set) => $body,
            $crate::rules::AnyRuleSet::W16($set) => $body,
            $crate::rules::AnyRuleSet::W32($set) => $body,
        }
    };
}

impl AnyRuleSet {
    /// [`RuleSet::from_words`] at the narrowest compiled width that holds
    /// `schema.len()` words; wider than [`MAX_WORDS`] is an error naming `table`.
    pub fn from_words(table: &str, schema: Schema, lo: &[u32], hi: &[u32], mask: &[u32]) -> Result<AnyRuleSet, String> {
        Ok(match words_for(table, schema.len())? {
            8 => AnyRuleSet::W8(RuleSet::from_words(table, schema, lo, hi, mask)?),
            16 => AnyRuleSet::W16(RuleSet::from_words(table, schema, lo, hi, mask)?),
            _ => AnyRuleSet::W32(RuleSet::from_words(table, schema, lo, hi, mask)?),
        })
    }
    pub fn schema(&self) -> &Schema {
        with_width!(self, s => &s.schema)
    }
    /// Key words of the table (not the compiled width).
    pub fn words(&self) -> usize {
        self.schema().len()
    }
    pub fn len(&self) -> usize {
        with_width!(self, s => s.len())
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A parse error that names where and what was expected.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub struct ParseError {
    /// File name, or `<input>` when parsing a string.
    pub file: String,
    /// 1-based line number; 0 when the error concerns the whole input.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        } else {
            write!(f, "{}: {}", self.file, self.message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_match_and_length() {
        let p = FieldMatch::prefix(0x0a01_0000, 16, 32);
        assert!(p.matches(0x0a01_ffff));
        assert!(!p.matches(0x0a02_0000));
        assert_eq!(p.prefix_len(32), Some(16));
        assert_eq!(p.as_range(32), Some((0x0a01_0000, 0x0a01_ffff)));
        assert_eq!(FieldMatch::ANY.prefix_len(32), Some(0));
        assert_eq!(FieldMatch::exact(7).prefix_len(16), Some(16));
    }

    #[test]
    fn range_edges_are_inclusive() {
        let r = FieldMatch::range(1024, 65535);
        assert!(!r.matches(1023));
        assert!(r.matches(1024));
        assert!(r.matches(65535));
        assert_eq!(r.prefix_len(16), None);
        assert_eq!(FieldMatch::range(0, 65535).prefix_len(16), Some(0));
        assert_eq!(FieldMatch::range(1024, 2047).prefix_len(16), Some(6));
    }

    #[test]
    fn ternary_that_is_not_a_prefix_has_no_range() {
        let t = FieldMatch::ternary(0x01, 0x05);
        assert!(t.matches(0x03));
        assert!(!t.matches(0x04));
        assert_eq!(t.as_range(8), None);
    }

    #[test]
    fn key_widths_and_the_limit_error_names_the_table() {
        assert_eq!(words_for("t", 5), Ok(8));
        assert_eq!(words_for("t", 9), Ok(16));
        assert_eq!(words_for("t", 24), Ok(32));
        assert_eq!(words_for("t", 32), Ok(32));
        let e = words_for("ingress.acl", 33).unwrap_err();
        assert!(e.contains("ingress.acl") && e.contains("33"), "{e}");
        let schema = |n| Schema { fields: (0..n).map(|i| FieldSpec { name: format!("w{i}"), bits: 32, kind: MatchKind::Exact }).collect() };
        let e = AnyRuleSet::from_words("ingress.wide", schema(33), &[0; 33], &[0; 33], &[0; 33]).unwrap_err();
        assert!(e.contains("ingress.wide"), "{e}");
        let set = AnyRuleSet::from_words("t", schema(12), &[7; 24], &[9; 24], &[u32::MAX; 24]).unwrap();
        assert!(matches!(set, AnyRuleSet::W16(_)));
        assert_eq!((set.len(), set.words()), (2, 12));
        assert!(AnyRuleSet::from_words("t", schema(12), &[7; 23], &[9; 23], &[0; 23]).is_err());
        let AnyRuleSet::W16(s) = set else { unreachable!() };
        assert!(s.rules[0].matches(&Key::from_words(&[8; 12])));
        assert!(!s.rules[0].matches(&Key::from_words(&[8; 11])));
    }

    #[test]
    fn rule_matches_all_fields() {
        let r = Rule::new(
            &[
                FieldMatch::prefix(0x0a00_0000, 8, 32),
                FieldMatch::ANY,
                FieldMatch::range(0, 65535),
                FieldMatch::range(80, 80),
                FieldMatch::ternary(6, 0xff),
            ],
            1,
            0,
        );
        assert!(r.matches(&Key::five_tuple(0x0a01_0203, 5, 1234, 80, 6)));
        assert!(!r.matches(&Key::five_tuple(0x0a01_0203, 5, 1234, 81, 6)));
        assert!(!r.matches(&Key::five_tuple(0x0a01_0203, 5, 1234, 80, 17)));
    }
}

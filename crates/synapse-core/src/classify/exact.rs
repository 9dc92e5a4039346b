//! Exact match: a hash table of whole keys, as software P4 targets build it
//! (t4p4s on DPDK uses `rte_hash`) and as the cost models measure it.
//!
//! Open addressing over buckets of whole 64-byte lines (one cache line, one
//! HBM burst, for keys up to 15 words; a wider record takes as many lines as
//! it needs): each bucket holds one or more (key, rule) slots; a key hashes
//! (lookup3) to a home bucket and probes linearly. The table is sized to a
//! load factor of at most 1/2 of its slots, so a lookup reads one bucket
//! almost always. Only rule sets whose every field is exact (full mask,
//! `lo == hi`) or fully wildcarded in every rule alike can be built; anything
//! else is [`BuildError::Unsupported`]. Duplicate keys keep the first
//! (highest priority) rule, as the linear oracle does.

use super::{BuildError, Classifier, Match, MemAccess, MemoryWalk, Structure};
use crate::hash::lookup3::hashword;
use crate::rules::{Key, RuleSet};

/// Bytes of a line: one cache line, one HBM burst.
pub const BUCKET_BYTES: u32 = 64;
const EMPTY: u32 = u32::MAX;

/// One cache line; a bucket is `lines` of them holding records
/// `(key words..., rule)`, an empty slot having rule [`EMPTY`]. Laid out as
/// the memory it models, so measured software costs (the CPU model) see the
/// lines a probe reads.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u32; 16]);

pub struct Exact<const N: usize = 8> {
    /// Key words used (the schema's fields); the rest of a key is ignored.
    words: usize,
    /// Which of those words the rules match on (all rules alike).
    care: [u32; N],
    /// Lines per bucket and slots per bucket.
    lines: usize,
    slots: usize,
    mask: usize,
    table: Vec<Line>,
    entries: usize,
}

/// (lines per bucket, slots per bucket) for keys of `words` words.
pub fn layout(words: usize) -> (usize, usize) {
    let record = words + 1;
    let lines = record.div_ceil(16);
    (lines, 16 * lines / record)
}

impl<const N: usize> Exact<N> {
    pub fn build(set: &RuleSet<N>) -> Result<Exact<N>, BuildError> {
        let words = set.schema.len().clamp(1, N);
        let mut care = [0u32; N];
        if let Some(r0) = set.rules.first() {
            for (w, c) in care.iter_mut().enumerate().take(words) {
                *c = if r0.fields[w].is_any() { 0 } else { u32::MAX };
            }
        }
        for (i, r) in set.rules.iter().enumerate() {
            for w in 0..words {
                let f = r.fields[w];
                let ok = if care[w] == 0 { f.is_any() } else { f.mask == u32::MAX && f.lo == f.hi };
                if !ok {
                    return Err(BuildError::Unsupported(format!(
                        "rule {i}: field {w} is not an exact match like the other rules' (an exact table needs every field exact, or wildcarded in every rule)"
                    )));
                }
            }
        }
        let (lines, slots) = layout(words);
        let buckets = (2 * set.rules.len()).div_ceil(slots).max(1).next_power_of_two();
        let mut t = Exact { words, care, lines, slots, mask: buckets - 1, table: vec![Line([EMPTY; 16]); buckets * lines], entries: 0 };
        for (i, r) in set.rules.iter().enumerate() {
            let mut k = Key([0u32; N]);
            for w in 0..words {
                k.0[w] = r.fields[w].lo & care[w];
            }
            t.insert(k, i as u32);
        }
        Ok(t)
    }

    #[inline]
    fn masked(&self, key: &Key<N>) -> Key<N> {
        let mut k = Key([0u32; N]);
        for w in 0..self.words {
            k.0[w] = key.0[w] & self.care[w];
        }
        k
    }

    #[inline]
    fn home(&self, k: &Key<N>) -> usize {
        hashword(&k.0[..self.words], 0x5eed) as usize & self.mask
    }

    /// The words of bucket `b` (its lines, contiguous).
    #[inline]
    fn bucket(&self, b: usize) -> &[u32] {
        let lines = &self.table[b * self.lines..(b + 1) * self.lines];
        // SAFETY: Line is repr(C) over [u32; 16] (no padding), and the lines
        // of a bucket are contiguous in the Vec.
        unsafe { std::slice::from_raw_parts(lines.as_ptr() as *const u32, 16 * lines.len()) }
    }

    fn bucket_mut(&mut self, b: usize) -> &mut [u32] {
        let lines = &mut self.table[b * self.lines..(b + 1) * self.lines];
        // SAFETY: as in `bucket`.
        unsafe { std::slice::from_raw_parts_mut(lines.as_mut_ptr() as *mut u32, 16 * lines.len()) }
    }

    fn insert(&mut self, k: Key<N>, rule: u32) {
        let (w, slots, mut b) = (self.words, self.slots, self.home(&k));
        loop {
            let mut placed = None;
            for rec in self.bucket_mut(b).chunks_exact_mut(w + 1).take(slots) {
                if rec[w] == EMPTY {
                    rec[..w].copy_from_slice(&k.0[..w]);
                    rec[w] = rule;
                    placed = Some(true);
                    break;
                }
                if rec[..w] == k.0[..w] {
                    placed = Some(false); // a higher-priority rule already holds this key
                    break;
                }
            }
            match placed {
                Some(new) => {
                    self.entries += new as usize;
                    return;
                }
                None => b = (b + 1) & self.mask,
            }
        }
    }

    /// The bucket probes of a lookup: (buckets read, answer).
    #[inline]
    fn probe(&self, key: &Key<N>) -> (u32, Match) {
        let (w, k) = (self.words, self.masked(key));
        let mut b = self.home(&k);
        let mut reads = 1;
        loop {
            for rec in self.bucket(b).chunks_exact(w + 1).take(self.slots) {
                if rec[w] == EMPTY {
                    return (reads, None);
                }
                if rec[..w] == k.0[..w] {
                    return (reads, Some(rec[w]));
                }
            }
            b = (b + 1) & self.mask;
            reads += 1;
        }
    }

    pub fn buckets(&self) -> usize {
        self.mask + 1
    }
}

impl<const N: usize> Classifier<N> for Exact<N> {
    #[inline]
    fn classify(&self, key: &Key<N>) -> Match {
        self.probe(key).1
    }
}

impl<const N: usize> MemoryWalk<N> for Exact<N> {
    /// One read of the bucket's lines per bucket probed, all from bank 0.
    fn walk(&self, key: &Key<N>, accesses: &mut Vec<MemAccess>) -> Match {
        let (reads, m) = self.probe(key);
        let home = self.home(&self.masked(key)) as u64;
        let bytes = BUCKET_BYTES * self.lines as u32;
        for i in 0..reads as u64 {
            let b = (home + i) & self.mask as u64;
            accesses.push(MemAccess { bank: 0, addr: b * bytes as u64, bytes });
        }
        m
    }
    fn memory_bytes(&self) -> u64 {
        self.table.len() as u64 * BUCKET_BYTES as u64
    }
}

impl<const N: usize> Structure<N> for Exact<N> {
    fn stats(&self) -> Vec<(&'static str, String)> {
        vec![
            ("entries", self.entries.to_string()),
            ("buckets", self.buckets().to_string()),
            ("slots_per_bucket", self.slots.to_string()),
            ("bytes", self.memory_bytes().to_string()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::linear::Linear;
    use crate::rules::{FieldMatch, Rule, Schema};
    use proptest::prelude::*;

    fn exact_set(keys: &[(u32, u32, u16)]) -> RuleSet {
        let rules = keys
            .iter()
            .enumerate()
            .map(|(i, &(s, d, p))| {
                let f = [
                    FieldMatch::exact(s),
                    FieldMatch::exact(d),
                    FieldMatch::ANY,
                    FieldMatch::exact(p as u32),
                    FieldMatch::ANY,
                ];
                Rule::new(&f, i as u32, i as u32)
            })
            .collect();
        RuleSet::new(Schema::five_tuple(), rules)
    }

    proptest! {
        #[test]
        fn agrees_with_the_linear_oracle(
            keys in proptest::collection::vec((0u32..64, 0u32..4, 0u16..4), 0..200),
            probes in proptest::collection::vec((0u32..64, 0u32..4, any::<u16>(), 0u16..4, any::<u8>()), 1..200),
        ) {
            let set = exact_set(&keys);
            let (t, lin) = (Exact::build(&set).unwrap(), Linear::new(&set));
            for &(s, d, sp, dp, pr) in &probes {
                let k = Key::five_tuple(s, d, sp, dp, pr);
                prop_assert_eq!(t.classify(&k), lin.classify(&k));
                let mut acc = Vec::new();
                prop_assert_eq!(t.walk(&k, &mut acc), lin.classify(&k));
                prop_assert!(!acc.is_empty());
            }
        }
    }

    #[test]
    fn duplicate_keys_keep_the_first_rule() {
        let set = exact_set(&[(1, 2, 3), (1, 2, 3), (4, 5, 6)]);
        let t = Exact::build(&set).unwrap();
        assert_eq!(t.classify(&Key::five_tuple(1, 2, 9, 3, 17)), Some(0));
        assert_eq!(t.classify(&Key::five_tuple(4, 5, 0, 6, 0)), Some(2));
        assert_eq!(t.classify(&Key::five_tuple(4, 5, 0, 7, 0)), None);
        assert_eq!(t.stats()[0].1, "2");
    }

    #[test]
    fn rejects_non_exact_fields_and_sizes_to_half_load() {
        let mut set = exact_set(&[(1, 2, 3), (4, 5, 6)]);
        set.rules[1].fields[0] = FieldMatch::prefix(4, 24, 32);
        assert!(matches!(
            Exact::build(&set),
            Err(BuildError::Unsupported(_))
        ));
        let keys: Vec<_> = (0..1000).map(|i| (i, 0, 0)).collect();
        let t = Exact::build(&exact_set(&keys)).unwrap();
        // 5 words + rule = 24 B records: 2 per bucket, 2000 slots -> 1024 buckets.
        assert_eq!((t.slots, t.buckets()), (2, 1024));
        assert_eq!(t.memory_bytes(), 1024 * 64);
    }
}

#[cfg(test)]
mod wide_tests {
    use super::*;
    use crate::classify::linear::Linear;
    use crate::rules::{FieldMatch, FieldSpec, MatchKind, Rule, Schema};
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64;

    /// `n` exact rules over `w`-word keys with values from a small range (so
    /// duplicates and collisions happen), checked against the oracle.
    fn check<const N: usize>(w: usize, n: usize) {
        let mut rng = Pcg64::seed_from_u64(w as u64);
        let schema = Schema { fields: (0..w).map(|i| FieldSpec { name: format!("f{i}"), bits: 32, kind: MatchKind::Exact }).collect() };
        let keys: Vec<Vec<u32>> = (0..n).map(|_| (0..w).map(|_| rng.gen_range(0..4)).collect()).collect();
        let rules = keys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let f: Vec<FieldMatch> = k.iter().map(|&v| FieldMatch::exact(v)).collect();
                Rule::<N>::new(&f, i as u32, i as u32)
            })
            .collect();
        let set = RuleSet::<N>::new(schema, rules);
        let (t, lin) = (Exact::build(&set).unwrap(), Linear::new(&set));
        let (lines, slots) = layout(w);
        assert_eq!((t.lines, t.slots), (lines, slots));
        for _ in 0..2000 {
            let k: Vec<u32> = (0..w).map(|_| rng.gen_range(0..4)).collect();
            let key = Key::<N>::from_words(&k);
            assert_eq!(t.classify(&key), lin.classify(&key));
            let mut acc = Vec::new();
            t.walk(&key, &mut acc);
            assert!(acc.iter().all(|a| a.bytes == 64 * lines as u32));
        }
    }

    #[test]
    fn wide_keys_agree_with_the_oracle_and_take_whole_lines() {
        check::<16>(12, 300); // 13-word records: one per line
        check::<32>(24, 300); // 25-word records: two lines per bucket, one slot
        check::<8>(3, 300); // 4-word records: four per line
        assert_eq!(layout(24), (2, 1));
        assert_eq!(layout(15), (1, 1));
        assert_eq!(layout(5), (1, 2));
    }
}

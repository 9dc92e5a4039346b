//! Exact match: a hash table of whole keys, as software P4 targets build it
//! (t4p4s on DPDK uses `rte_hash`) and as the cost models measure it.
//!
//! Open addressing over 64-byte buckets (one cache line, one HBM burst):
//! each bucket holds a few (key, rule) slots; a key hashes (lookup3) to a
//! home bucket and probes linearly. The table is sized to a load factor of at
//! most 1/2 of its slots, so a lookup reads one bucket almost always. Only
//! rule sets whose every field is exact (full mask, `lo == hi`) or fully
//! wildcarded in every rule alike can be built; anything else is
//! [`BuildError::Unsupported`]. Duplicate keys keep the first (highest
//! priority) rule, as the linear oracle does.

use super::{BuildError, Classifier, Match, MemAccess, MemoryWalk, Structure};
use crate::hash::lookup3::hash_key;
use crate::rules::{Key, RuleSet, MAX_FIELDS};

/// Bytes of a bucket: one cache line, one HBM burst.
pub const BUCKET_BYTES: u32 = 64;
const EMPTY: u32 = u32::MAX;

/// One cache line of records `(key words..., rule)`; an empty slot has rule
/// [`EMPTY`]. Laid out as the memory it models, so measured software costs
/// (the CPU model) see one line per probe.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Bucket([u32; 16]);

pub struct Exact {
    /// Key words used (the schema's fields); the rest of a key is ignored.
    words: usize,
    /// Which of those words the rules match on (all rules alike).
    care: [u32; MAX_FIELDS],
    /// Slots per bucket: as many (key, rule) records as fit in 64 bytes.
    slots: usize,
    mask: usize,
    buckets: Vec<Bucket>,
    entries: usize,
}

impl Exact {
    pub fn build(set: &RuleSet) -> Result<Exact, BuildError> {
        let words = set.schema.len().clamp(1, MAX_FIELDS);
        let mut care = [0u32; MAX_FIELDS];
        if let Some(r0) = set.rules.first() {
            for (w, c) in care.iter_mut().enumerate().take(words) {
                *c = if r0.fields[w].is_any() { 0 } else { u32::MAX };
            }
        }
        for (i, r) in set.rules.iter().enumerate() {
            for w in 0..words {
                let f = r.fields[w];
                let ok = if care[w] == 0 {
                    f.is_any()
                } else {
                    f.mask == u32::MAX && f.lo == f.hi
                };
                if !ok {
                    return Err(BuildError::Unsupported(format!(
                        "rule {i}: field {w} is not an exact match like the other rules' (an exact table needs every field exact, or wildcarded in every rule)"
                    )));
                }
            }
        }
        if words + 1 > 16 {
            return Err(BuildError::Unsupported(format!(
                "{words}-word keys do not fit a 64-byte bucket record"
            )));
        }
        // A record is the used key words plus the rule index.
        let record = 4 * (words + 1);
        let slots = (BUCKET_BYTES as usize / record).max(1);
        let buckets = (2 * set.rules.len())
            .div_ceil(slots)
            .max(1)
            .next_power_of_two();
        let mut t = Exact {
            words,
            care,
            slots,
            mask: buckets - 1,
            buckets: vec![Bucket([EMPTY; 16]); buckets],
            entries: 0,
        };
        for (i, r) in set.rules.iter().enumerate() {
            let mut k = Key::default();
            for w in 0..words {
                k.0[w] = r.fields[w].lo & care[w];
            }
            t.insert(k, i as u32);
        }
        Ok(t)
    }

    #[inline]
    fn masked(&self, key: &Key) -> Key {
        let mut k = Key::default();
        for w in 0..self.words {
            k.0[w] = key.0[w] & self.care[w];
        }
        k
    }

    #[inline]
    fn home(&self, k: &Key) -> usize {
        hash_key(k, self.words, 0x5eed) as usize & self.mask
    }

    fn insert(&mut self, k: Key, rule: u32) {
        let (w, mut b) = (self.words, self.home(&k));
        loop {
            let bucket = &mut self.buckets[b].0;
            for rec in bucket.chunks_exact_mut(w + 1).take(self.slots) {
                if rec[w] == EMPTY {
                    rec[..w].copy_from_slice(&k.0[..w]);
                    rec[w] = rule;
                    self.entries += 1;
                    return;
                }
                if rec[..w] == k.0[..w] {
                    return; // a higher-priority rule already holds this key
                }
            }
            b = (b + 1) & self.mask;
        }
    }

    /// The bucket probes of a lookup: (buckets read, answer).
    #[inline]
    fn probe(&self, key: &Key) -> (u32, Match) {
        let (w, k) = (self.words, self.masked(key));
        let mut b = self.home(&k);
        let mut reads = 1;
        loop {
            for rec in self.buckets[b].0.chunks_exact(w + 1).take(self.slots) {
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

impl Classifier for Exact {
    #[inline]
    fn classify(&self, key: &Key) -> Match {
        self.probe(key).1
    }
}

impl MemoryWalk for Exact {
    /// One 64-byte read per bucket probed, all from bank 0.
    fn walk(&self, key: &Key, accesses: &mut Vec<MemAccess>) -> Match {
        let (reads, m) = self.probe(key);
        let home = self.home(&self.masked(key)) as u64;
        for i in 0..reads as u64 {
            let b = (home + i) & self.mask as u64;
            accesses.push(MemAccess {
                bank: 0,
                addr: b * BUCKET_BYTES as u64,
                bytes: BUCKET_BYTES,
            });
        }
        m
    }
    fn memory_bytes(&self) -> u64 {
        self.buckets() as u64 * BUCKET_BYTES as u64
    }
}

impl Structure for Exact {
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

//! Linear search: every rule in priority order, the first match wins. O(N)
//! per key; the brute-force oracle of every other classifier.

use super::{Classifier, Match, MemAccess, MemoryWalk};
use crate::rules::{Key, Rule, RuleSet, MAX_FIELDS};

pub struct Linear<const N: usize = MAX_FIELDS> {
    rules: Vec<Rule<N>>,
}

impl<const N: usize> Linear<N> {
    pub fn new(set: &RuleSet<N>) -> Linear<N> {
        Linear { rules: set.rules.clone() }
    }
}

impl<const N: usize> Classifier<N> for Linear<N> {
    #[inline]
    fn classify(&self, key: &Key<N>) -> Match {
        self.rules.iter().position(|r| r.matches(key)).map(|i| i as u32)
    }
}

/// Bytes of one rule record in memory: five (value, mask-or-high) pairs of
/// 32 bits, padded to a power of two so a burst holds whole records.
pub const RULE_BYTES: u32 = 64;
/// Bytes read per burst when scanning the rule array.
pub const BURST_BYTES: u32 = 64;

impl<const N: usize> MemoryWalk<N> for Linear<N> {
    /// A linear scan reads the rule array burst by burst up to the first
    /// match (or to the end on a miss), all from bank 0.
    fn walk(&self, key: &Key<N>, accesses: &mut Vec<MemAccess>) -> Match {
        let m = self.classify(key);
        let scanned = m.map_or(self.rules.len() as u64, |i| i as u64 + 1);
        let per_burst = (BURST_BYTES / RULE_BYTES).max(1) as u64;
        let bursts = scanned.div_ceil(per_burst).max(1);
        for b in 0..bursts {
            accesses.push(MemAccess { bank: 0, addr: b * BURST_BYTES as u64, bytes: BURST_BYTES });
        }
        m
    }
    fn memory_bytes(&self) -> u64 {
        self.rules.len() as u64 * RULE_BYTES as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{FieldMatch, Schema};

    #[test]
    fn first_match_wins_and_none_when_nothing_matches() {
        let any = [FieldMatch::ANY; 5];
        let mut narrow = any;
        narrow[3] = FieldMatch::range(80, 80);
        let set = RuleSet::new(
            Schema::five_tuple(),
            vec![Rule::new(&narrow, 2, 0), Rule::new(&narrow, 1, 1)],
        );
        let lin = Linear::new(&set);
        assert_eq!(lin.classify(&Key::five_tuple(1, 2, 3, 80, 6)), Some(0));
        assert_eq!(lin.classify(&Key::five_tuple(1, 2, 3, 81, 6)), None);
        let mut out = [0; 2];
        lin.classify_batch(&[Key::five_tuple(1, 2, 3, 80, 6), Key::five_tuple(1, 2, 3, 81, 6)], &mut out);
        assert_eq!(out, [0, -1]);
        let empty = Linear::new(&RuleSet::new(Schema::five_tuple(), vec![]));
        assert_eq!(empty.classify(&Key::default()), None);
        let _ = any;
    }

    #[test]
    fn walk_reads_up_to_the_match() {
        let mut narrow = [FieldMatch::ANY; 5];
        narrow[3] = FieldMatch::range(80, 80);
        let set = RuleSet::new(Schema::five_tuple(), vec![Rule::new(&narrow, 3, 0); 3]);
        let lin = Linear::new(&set);
        let mut acc = Vec::new();
        assert_eq!(lin.walk(&Key::five_tuple(1, 2, 3, 80, 6), &mut acc), Some(0));
        assert_eq!(acc.len(), 1);
        acc.clear();
        assert_eq!(lin.walk(&Key::five_tuple(1, 2, 3, 81, 6), &mut acc), None);
        assert_eq!(acc.len(), 3);
    }
}

//! Linear search: every rule in priority order, the first match wins. O(N)
//! per key; the brute-force oracle of every other classifier.

use super::{Classifier, Match};
use crate::rules::{Key, Rule, RuleSet};

pub struct Linear {
    rules: Vec<Rule>,
}

impl Linear {
    pub fn new(set: &RuleSet) -> Linear {
        Linear { rules: set.rules.clone() }
    }
}

impl Classifier for Linear {
    #[inline]
    fn classify(&self, key: &Key) -> Match {
        self.rules.iter().position(|r| r.matches(key)).map(|i| i as u32)
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
}

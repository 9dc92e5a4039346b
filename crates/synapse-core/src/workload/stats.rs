//! Statistics of a 5-tuple rule set, the ones a ClassBench seed holds:
//! protocol mix, port classes of source and destination ports, port-pair
//! classes, prefix-length pairs and their marginals, flags, and how many
//! distinct address prefixes there are. `synapse rules stats` prints them
//! so a generated set can be compared with a real one.

use super::seed::PortClass;
use crate::rules::RuleSet;
use std::collections::{BTreeMap, HashSet};

#[derive(Clone, PartialEq, Debug, Default)]
pub struct Stats {
    pub rules: usize,
    /// Protocol spec (`"6"`, `"*"` for the wildcard, `"0x06/0x0f"`) → rules.
    pub protocols: BTreeMap<String, usize>,
    /// Rules per class, in [`PortClass::ALL`] order.
    pub sport: [usize; 5],
    pub dport: [usize; 5],
    /// Port-pair class (`"wc_em"`) → rules.
    pub ppc: BTreeMap<String, usize>,
    /// (source length, destination length) → rules.
    pub prefix_pairs: BTreeMap<(u8, u8), usize>,
    /// Rules per source / destination prefix length 0..=32.
    pub src_len: Vec<usize>,
    pub dst_len: Vec<usize>,
    /// Flags spec (`"0x0000/0x0200"`, `"none"` when absent) → rules.
    pub flags: BTreeMap<String, usize>,
    pub unique_src: usize,
    pub unique_dst: usize,
    /// Distinct (source, destination) prefix pairs.
    pub unique_pairs: usize,
}

fn class_index(c: PortClass) -> usize {
    PortClass::ALL.iter().position(|&x| x == c).unwrap()
}

/// Counts the statistics of a ClassBench-style 5-tuple set. Fields that
/// are not prefixes or ranges (impossible in a ClassBench file) count as
/// length 32 / arbitrary range.
pub fn stats(set: &RuleSet) -> Stats {
    let mut s = Stats { rules: set.len(), src_len: vec![0; 33], dst_len: vec![0; 33], ..Default::default() };
    let (mut src, mut dst, mut pairs) = (HashSet::new(), HashSet::new(), HashSet::new());
    for r in &set.rules {
        let f = &r.fields;
        let sl = f[0].prefix_len(32).unwrap_or(32);
        let dl = f[1].prefix_len(32).unwrap_or(32);
        *s.prefix_pairs.entry((sl, dl)).or_default() += 1;
        s.src_len[sl as usize] += 1;
        s.dst_len[dl as usize] += 1;
        src.insert((f[0].lo, sl));
        dst.insert((f[1].lo, dl));
        pairs.insert((f[0].lo, sl, f[1].lo, dl));
        let class = |m: &crate::rules::FieldMatch| {
            let (lo, hi) = m.as_range(16).unwrap_or((m.lo, m.hi));
            PortClass::of(lo, hi)
        };
        let (sc, dc) = (class(&f[2]), class(&f[3]));
        s.sport[class_index(sc)] += 1;
        s.dport[class_index(dc)] += 1;
        *s.ppc.entry(format!("{}_{}", sc.name(), dc.name())).or_default() += 1;
        let p = match f[4].mask & 0xff {
            0 => "*".to_string(),
            0xff => f[4].lo.to_string(),
            m => format!("0x{:02x}/0x{:02x}", f[4].lo, m),
        };
        *s.protocols.entry(p).or_default() += 1;
        let fl = match r.flags {
            Some(x) => format!("0x{:04x}/0x{:04x}", x.value, x.mask),
            None => "none".into(),
        };
        *s.flags.entry(fl).or_default() += 1;
    }
    s.unique_src = src.len();
    s.unique_dst = dst.len();
    s.unique_pairs = pairs.len();
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::classbench::parse_rules;

    #[test]
    fn counts_a_small_set() {
        let text = "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0200\t\n\
                    @10.0.0.0/8\t1.2.3.4/32\t1024 : 65535\t0 : 1023\t0x11/0xFF\t0x0000/0x0000\t\n\
                    @0.0.0.0/0\t1.2.3.4/32\t5 : 9\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t\n";
        let s = stats(&parse_rules(text, "t").unwrap());
        assert_eq!(s.rules, 3);
        assert_eq!(s.protocols.get("6"), Some(&1));
        assert_eq!(s.protocols.get("*"), Some(&1));
        assert_eq!(s.sport, [1, 1, 0, 1, 0]);
        assert_eq!(s.dport, [1, 0, 1, 0, 1]);
        assert_eq!(s.ppc.get("wc_em"), Some(&1));
        assert_eq!(s.prefix_pairs.get(&(8, 32)), Some(&1));
        assert_eq!((s.unique_src, s.unique_dst, s.unique_pairs), (2, 2, 3));
        assert_eq!(s.src_len[8], 2);
        assert_eq!(s.flags.get("0x0000/0x0000"), Some(&2));
    }
}

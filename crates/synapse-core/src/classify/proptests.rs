//! Every classifier equals the linear oracle: on random rule sets built to
//! overlap (few distinct prefixes and port edges, wildcards, duplicates, the
//! empty set, non-prefix ternaries), on keys drawn at rules' corners, and on
//! the real ClassBench 1K sets when `../shared/data` is there (else ignored).

use super::dtree::{DTree, DTreeConfig};
use super::linear::Linear;
use super::partition::{PTree, PTreeConfig};
use super::trie::{Trie, TrieConfig};
use super::{build, build_structure, BuildConfig, Classifier, Incremental, MemoryWalk};
use crate::rules::{classbench, FieldMatch, Key, Rule, RuleSet, Schema};
use proptest::prelude::*;

fn prefix32() -> impl Strategy<Value = FieldMatch> {
    let bases = prop::sample::select(vec![0u32, 0x0a00_0000, 0x0a01_0000, 0x0a01_0200, 0xc0a8_0101, 0xffff_ffff, 0x8000_0000]);
    (bases, prop::sample::select(vec![0u8, 1, 4, 8, 15, 16, 24, 31, 32])).prop_map(|(v, l)| FieldMatch::prefix(v, l, 32))
}

fn port() -> impl Strategy<Value = FieldMatch> {
    let edges = prop::sample::select(vec![0u32, 1, 79, 80, 81, 1023, 1024, 6000, 65534, 65535]);
    (edges.clone(), edges).prop_map(|(a, b)| FieldMatch::range(a.min(b), a.max(b)))
}

fn proto() -> impl Strategy<Value = FieldMatch> {
    prop_oneof![
        Just(FieldMatch::ANY),
        Just(FieldMatch::exact(6)),
        Just(FieldMatch::exact(17)),
        // Not a prefix: the trie expands it, the tree bounds it.
        Just(FieldMatch::ternary(0x04, 0x0c)),
    ]
}

fn rule() -> impl Strategy<Value = Rule> {
    (prefix32(), prefix32(), port(), port(), proto()).prop_map(|(s, d, sp, dp, p)| Rule::new(&[s, d, sp, dp, p], 0, 0))
}

fn rule_set() -> impl Strategy<Value = RuleSet> {
    prop::collection::vec(rule(), 0..40).prop_flat_map(|rules| {
        // Duplicate some rules at random later positions.
        let n = rules.len();
        (Just(rules), prop::collection::vec((0..n.max(1), 0..n.max(1) + 1), 0..4)).prop_map(|(mut rules, dups)| {
            for (from, to) in dups {
                if from < rules.len() {
                    let r = rules[from];
                    rules.insert(to.min(rules.len()), r);
                }
            }
            RuleSet::new(Schema::five_tuple(), rules)
        })
    })
}

/// Keys at and next to rules' corners, plus arbitrary ones.
fn keys_for(set: &RuleSet, seeds: &[(u32, u32, u32)]) -> Vec<Key> {
    let widths = [32u8, 32, 16, 16, 8];
    let mut keys = Vec::new();
    for &(a, b, c) in seeds {
        let mut k = [0u32; 5];
        for f in 0..5 {
            let w = crate::rules::width_mask(widths[f]);
            let h = a.wrapping_mul(0x9e37_79b9).wrapping_add(b.rotate_left(f as u32 * 7)).wrapping_add(c);
            k[f] = if set.is_empty() || h % 4 == 0 {
                h & w
            } else {
                let r = &set.rules[(h as usize / 4) % set.len()];
                let (lo, hi) = r.fields[f].as_range(widths[f]).unwrap_or((r.fields[f].lo, r.fields[f].lo));
                match (h >> 8) % 5 {
                    0 => lo,
                    1 => hi.min(w),
                    2 => lo.wrapping_sub(1) & w,
                    3 => hi.wrapping_add(1) & w,
                    _ => lo + ((hi.min(w) - lo) / 2),
                }
            };
        }
        keys.push(Key::five_tuple(k[0], k[1], k[2] as u16, k[3] as u16, k[4] as u8));
    }
    keys
}

fn check_all(set: &RuleSet, keys: &[Key], trie: &TrieConfig, dtree: &DTreeConfig) {
    let lin = Linear::new(set);
    let want: Vec<Option<u32>> = keys.iter().map(|k| lin.classify(k)).collect();
    let d = DTree::build(set, dtree).unwrap();
    let mut built: Vec<(&str, Box<dyn MemoryWalk>)> = vec![("dtree", Box::new(d))];
    // The partitioned tree with the best kernels the CPU has, with the
    // AVX2 ones (on an AVX-512 CPU) and with the scalar ones, small
    // buckets so the trees branch.
    for simd in [true, false] {
        let cfg = PTreeConfig { bucket: dtree.bucket, simd, ..Default::default() };
        built.push((if simd { "ptree" } else { "ptree scalar" }, Box::new(PTree::build(set, &cfg).unwrap())));
    }
    let cfg = PTreeConfig { bucket: dtree.bucket, avx512: false, ..Default::default() };
    built.push(("ptree avx2", Box::new(PTree::build(set, &cfg).unwrap())));
    match Trie::build(set, trie) {
        Ok(t) => built.push(("trie", Box::new(t))),
        // A small random set can still blow a small budget (wildcards
        // under many expanded port prefixes); that must be a clean refusal.
        Err(e) => assert!(matches!(e, super::BuildError::OverBudget { .. }), "{e}"),
    }
    let mut out = vec![0i32; keys.len()];
    let mut acc = Vec::new();
    for (name, c) in &built {
        for (k, w) in keys.iter().zip(&want) {
            assert_eq!(c.classify(k), *w, "{name} on {k:?}");
            acc.clear();
            assert_eq!(c.walk(k, &mut acc), *w, "{name} walk on {k:?}");
        }
        c.classify_batch(keys, &mut out);
        let want_i: Vec<i32> = want.iter().map(|w| w.map_or(-1, |r| r as i32)).collect();
        assert_eq!(out, want_i, "{name} batch");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn trie_and_dtree_equal_the_oracle(
        set in rule_set(),
        seeds in prop::collection::vec(any::<(u32, u32, u32)>(), 1..120),
        stride in 1u8..=8,
        bucket in 1usize..6,
    ) {
        let keys = keys_for(&set, &seeds);
        let trie = TrieConfig { stride, max_bytes: 1 << 20 };
        let dtree = DTreeConfig { bucket, ..Default::default() };
        check_all(&set, &keys, &trie, &dtree);
    }

    #[test]
    fn dtree_updates_equal_the_oracle_on_the_new_set(
        set in rule_set(),
        ops in prop::collection::vec((any::<bool>(), any::<usize>(), rule()), 1..25),
        seeds in prop::collection::vec(any::<(u32, u32, u32)>(), 1..80),
    ) {
        let mut d = DTree::build(&set, &DTreeConfig { bucket: 2, ..Default::default() }).unwrap();
        let mut rules = set.rules.clone();
        for (ins, at, r) in ops {
            update_both(&mut d, &mut rules, ins, at, r);
        }
        let now = RuleSet::new(Schema::five_tuple(), rules);
        let lin = Linear::new(&now);
        for k in keys_for(&now, &seeds) {
            prop_assert_eq!(d.classify(&k), lin.classify(&k));
        }
    }

    #[test]
    fn ptree_updates_equal_the_oracle_after_every_step(
        set in rule_set(),
        ops in prop::collection::vec((0u8..3, any::<usize>(), rule()), 1..25),
        seeds in prop::collection::vec(any::<(u32, u32, u32)>(), 1..60),
        max_delta in 0usize..6,
        simd in any::<bool>(),
        wide_leaves in 0usize..4,
    ) {
        // Small buckets so rules are replicated and cover leaves; a small
        // compaction bound so some steps compact; rules reaching more than
        // `wide_leaves` (1-3, or never) leaves kept in the side leaf, at
        // the build and by inserts. Ops: insert, delete, modify (the rule
        // at a position replaced: a delete and an insert there).
        let cfg = PTreeConfig { bucket: 2, simd, max_delta, wide_leaves: Some(wide_leaves), ..Default::default() };
        let mut p = PTree::build(&set, &cfg).unwrap();
        let mut rules = set.rules.clone();
        for (op, at, r) in ops {
            if op == 2 && !rules.is_empty() {
                update_both(&mut p, &mut rules, false, at, r);
                update_both(&mut p, &mut rules, true, at, r);
            } else {
                update_both(&mut p, &mut rules, op == 0, at, r);
            }
            let now = RuleSet::new(Schema::five_tuple(), rules.clone());
            prop_assert_eq!(&p.rule_set().rules, &rules);
            prop_assert_eq!(p.len(), rules.len());
            // The blocks a leaf holds are never a hole another one takes.
            prop_assert_eq!(p.check_blocks(), Ok(()));
            ptree_agrees(&p, &now, &keys_for(&now, &seeds))?;
        }
        prop_assert!(p.insert(rules.len() + 1, rules.first().copied().unwrap_or_else(|| Rule::new(&[FieldMatch::ANY; 5], 0, 0))).is_err());
        prop_assert!(p.delete(rules.len()).is_err());
    }
}

/// The same update on the tree and on the oracle's rule list: `r` inserted
/// at `at` (modulo the positions), or (`insert` false, or no rule left)
/// the rule at `at` (modulo the rules) deleted.
fn update_both<const N: usize>(p: &mut impl Incremental<N>, rules: &mut Vec<Rule<N>>, insert: bool, at: usize, r: Rule<N>) {
    if insert || rules.is_empty() {
        let at = at % (rules.len() + 1);
        Incremental::insert(p, at, r).unwrap();
        rules.insert(at, r);
    } else {
        let at = at % rules.len();
        Incremental::delete(p, at).unwrap();
        rules.remove(at);
    }
}

/// The tree's answers over `keys` equal the oracle's over `now`, by every
/// path: one key, a batch, and the walk the memory model replays.
fn ptree_agrees<const N: usize>(p: &PTree<N>, now: &RuleSet<N>, keys: &[Key<N>]) -> Result<(), TestCaseError> {
    let lin = Linear::new(now);
    let mut out = vec![0; keys.len()];
    p.classify_batch(keys, &mut out);
    let mut acc = Vec::new();
    for (k, o) in keys.iter().zip(&out) {
        let w = lin.classify(k);
        prop_assert_eq!(p.classify(k), w, "{:?}", k);
        prop_assert_eq!(*o, w.map_or(-1, |r| r as i32), "batch {:?}", k);
        acc.clear();
        prop_assert_eq!(p.walk(k, &mut acc), w, "walk {:?}", k);
    }
    Ok(())
}

/// Churn on generated ClassBench-style sets (rules deleted, rules of
/// another set inserted, at random positions), checked against the oracle
/// every 25 operations with a trace and corner keys, both kernels, with
/// the default fold-in bounds and with small ones.
#[test]
fn ptree_updates_on_generated_1k_sets_equal_the_oracle() {
    use crate::workload::{rulegen, seed::Params};
    for kind in ["acl", "fw", "ipc"] {
        let set = rulegen::generate(&Params::builtin(kind).unwrap(), 1_000, 5);
        let more = rulegen::generate(&Params::builtin(kind).unwrap(), 300, 6);
        // A side-leaf bound of 64, none, a small one (many rules aside), and the automatic choice.
        for (simd, max_delta, wide_leaves) in [(true, 64, Some(64)), (false, 64, Some(64)), (true, 8, Some(64)), (true, 64, Some(0)), (true, 8, Some(4)), (true, 64, None)] {
            let mut p = PTree::build(&set, &PTreeConfig { simd, max_delta, wide_leaves, ..Default::default() }).unwrap();
            let mut rules = set.rules.clone();
            let mut x = 0x2545_f491_4f6c_dd1du64;
            for i in 0..300 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                update_both(&mut p, &mut rules, i % 2 == 0, x as usize, more.rules[i / 2 % more.len()]);
                if i % 25 != 24 {
                    continue;
                }
                let now = RuleSet::new(set.schema.clone(), rules.clone());
                let mut keys = trace_keys(&now, 1_000);
                let seeds: Vec<(u32, u32, u32)> = (0..500u32).map(|j| (j, j.wrapping_mul(31) ^ i as u32, !j)).collect();
                keys.extend(keys_for(&now, &seeds));
                let lin = Linear::new(&now);
                let want: Vec<i32> = keys.iter().map(|k| lin.classify(k).map_or(-1, |r| r as i32)).collect();
                let mut out = vec![0i32; keys.len()];
                p.classify_batch(&keys, &mut out);
                assert!(out == want, "{kind} simd {simd} max_delta {max_delta}: batch differs after {} updates (wide_leaves {wide_leaves:?})", i + 1);
                assert_eq!(p.check_blocks(), Ok(()), "{kind}: blocks after {} updates", i + 1);
                let mut acc = Vec::new();
                for (k, w) in keys.iter().zip(&want).step_by(7) {
                    acc.clear();
                    assert_eq!(p.walk(k, &mut acc).map_or(-1, |r| r as i32), *w, "{kind}: walk after {} updates", i + 1);
                    assert_eq!(p.classify(k).map_or(-1, |r| r as i32), *w, "{kind}: classify after {} updates", i + 1);
                }
            }
            assert_eq!(p.rule_set().rules, rules);
        }
    }
}

#[test]
fn build_parameters_are_set_by_name_and_unknown_ones_refused() {
    let mut c = BuildConfig::default();
    c.set("trie.stride", "4").unwrap();
    c.set("dtree.bucket", " 16").unwrap();
    c.set("facl.dt_layers", "12").unwrap();
    assert_eq!((c.trie.stride, c.dtree.bucket, c.dtree.facl.dt_layers), (4, 16, 12));
    assert!(c.set("trie.strid", "4").unwrap_err().contains("unknown build parameter"));
    assert!(c.set("trie.stride", "four").unwrap_err().contains("expected a number"));
    assert!(c.set("trie.stride", "300").is_err(), "u8 overflow");
    for k in BuildConfig::KEYS {
        assert!(c.set(k, "1").is_ok(), "{k}");
    }
}

#[test]
fn empty_set_misses_everywhere() {
    let set = RuleSet::new(Schema::five_tuple(), vec![]);
    for algo in super::ALGORITHMS {
        let c = build(algo, &set).unwrap();
        assert_eq!(c.classify(&Key::default()), None, "{algo}");
        assert_eq!(c.classify(&Key::five_tuple(u32::MAX, 1, 2, 3, 4)), None, "{algo}");
    }
    assert!(build("hash", &set).err().unwrap().contains("unknown classifier"));
    assert!(build_structure("hash", &set, &BuildConfig::default()).err().unwrap().to_string().contains("unknown classifier"));
}

#[test]
#[cfg_attr(not(synapse_shared), ignore = "needs ../shared/data (the developers' checkout)")]
fn real_classbench_1k_sets_equal_the_oracle() {
    let dir = crate::testdata::shared("classbench/sets");
    for name in ["acl1_1k", "fw1_1k", "ipc1_1k"] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let set = classbench::parse_rules(&text, name).unwrap();
        let trace = std::fs::read_to_string(dir.join(format!("{name}_trace"))).unwrap();
        let trace = classbench::parse_trace(&trace, name).unwrap();
        let mut keys: Vec<Key> = trace.iter().map(|e| e.key).take(20_000).collect();
        let seeds: Vec<(u32, u32, u32)> = (0..5000u32).map(|i| (i, i.wrapping_mul(7919), i ^ 0x5555)).collect();
        keys.extend(keys_for(&set, &seeds));
        let lin = Linear::new(&set);
        let want: Vec<i32> = keys.iter().map(|k| lin.classify(k).map_or(-1, |r| r as i32)).collect();
        // The trace's rule column is an upper bound on the first match.
        for (e, w) in trace.iter().zip(&want) {
            assert!(e.rule.map_or(true, |r| *w >= 0 && *w as u32 <= r), "{name}: trace disagrees with the oracle");
        }
        let mut out = vec![0i32; keys.len()];
        // Stride 4 keeps the tries small; fw1's set pruning still exceeds
        // 16 MiB, which must fail cleanly rather than grow.
        let mut cfg = BuildConfig::default();
        cfg.trie = TrieConfig { stride: 4, max_bytes: 16 << 20 };
        for algo in ["trie", "dtree", "ptree"] {
            match build_structure(algo, &set, &cfg) {
                Ok(c) => {
                    c.classify_batch(&keys, &mut out);
                    assert!(out == want, "{algo} differs from the oracle on {name}");
                }
                Err(e @ super::BuildError::OverBudget { .. }) if algo == "trie" && name == "fw1_1k" => {
                    eprintln!("{algo} on {name}: {e}");
                }
                Err(e) => panic!("{algo} on {name}: {e}"),
            }
        }
    }
}

/// Keys from a ClassBench-style trace of `set` (corners and insides).
fn trace_keys(set: &RuleSet, n: usize) -> Vec<Key> {
    use crate::workload::tracegen;
    tracegen::generate(set, n, tracegen::Pareto::new(1.0, 0.0).unwrap(), 7).iter().map(|e| e.key).collect()
}

#[test]
fn generated_10k_sets_equal_the_oracle() {
    use crate::workload::{rulegen, seed::Params};
    for kind in ["acl", "fw", "ipc"] {
        let set = rulegen::generate(&Params::builtin(kind).unwrap(), 10_000, 3);
        let mut keys = trace_keys(&set, 2_000);
        let seeds: Vec<(u32, u32, u32)> = (0..1000u32).map(|i| (i, i.wrapping_mul(31), !i)).collect();
        keys.extend(keys_for(&set, &seeds));
        let lin = Linear::new(&set);
        let want: Vec<i32> = keys.iter().map(|k| lin.classify(k).map_or(-1, |r| r as i32)).collect();
        let mut out = vec![0i32; keys.len()];
        let d = DTree::build(&set, &DTreeConfig::default()).unwrap();
        d.classify_batch(&keys, &mut out);
        assert!(out == want, "dtree differs from the oracle on generated {kind} 10K");
        for (simd, avx512) in [(true, true), (true, false), (false, false)] {
            let p = PTree::build(&set, &PTreeConfig { simd, avx512, ..Default::default() }).unwrap();
            p.classify_batch(&keys, &mut out);
            assert!(out == want, "ptree (simd {simd}, avx512 {avx512}) differs from the oracle on generated {kind} 10K");
            let single: Vec<i32> = keys.iter().map(|k| p.classify(k).map_or(-1, |r| r as i32)).collect();
            assert!(single == want, "ptree (simd {simd}) one at a time on generated {kind} 10K");
        }
        // Set pruning on 10K multi-field rules is expected to blow a small
        // budget; when it fits, it must be exact.
        match Trie::build(&set, &TrieConfig { stride: 4, max_bytes: 8 << 20 }) {
            Ok(t) => {
                t.classify_batch(&keys, &mut out);
                assert!(out == want, "trie differs from the oracle on generated {kind} 10K");
            }
            Err(e) => assert!(matches!(e, super::BuildError::OverBudget { .. }), "{e}"),
        }
    }
}

#[test]
fn generated_100k_dtree_stays_bounded_and_trie_refuses() {
    use crate::workload::{rulegen, seed::Params};
    let set = rulegen::generate(&Params::builtin("acl").unwrap(), 100_000, 5);
    let d = DTree::build(&set, &DTreeConfig::default()).unwrap();
    // Bounded: a few hundred bytes per rule, far below the 512 MiB budget.
    assert!(d.stats().bytes < 400 * set.len() as u64, "{} bytes", d.stats().bytes);
    let keys = trace_keys(&set, 500);
    let lin = Linear::new(&set);
    for k in &keys {
        assert_eq!(d.classify(k), lin.classify(k));
    }
    let tight = DTreeConfig { max_bytes: 1 << 20, ..Default::default() };
    assert!(matches!(DTree::build(&set, &tight), Err(super::BuildError::OverBudget { .. })));
    let e = Trie::build(&set, &TrieConfig { stride: 8, max_bytes: 16 << 20 }).err().expect("over budget");
    assert!(matches!(e, super::BuildError::OverBudget { budget, .. } if budget == 16 << 20), "{e}");
}

/// Wide keys: P4-like fields of 1 to 128 bits split into 32-bit words (most
/// significant first), every match kind; the rules are built per field and
/// split per word as `python/synapse_vmt/p4/keys.py` does.
mod wide {
    use super::*;
    use crate::rules::{width_mask, FieldSpec, MatchKind};

    /// (bits, kind) of each field; a 12-word key (UPF's ACL: 233 bits) and
    /// a 24-word one (switch's ipv6_acl).
    pub(super) const UPF_LIKE: &[(u32, MatchKind)] = &[
        (128, MatchKind::Lpm),
        (48, MatchKind::Exact),
        (16, MatchKind::Range),
        (8, MatchKind::Ternary),
        (64, MatchKind::Ternary),
        (1, MatchKind::Exact),
        (32, MatchKind::Optional),
    ];
    /// 9 leaf words (the ports paired) and a byte field folded into the
    /// index row, in a 16-word key.
    pub(super) const FOLDED: &[(u32, MatchKind)] = &[
        (128, MatchKind::Lpm),
        (32, MatchKind::Ternary),
        (16, MatchKind::Range),
        (16, MatchKind::Range),
        (96, MatchKind::Exact),
        (8, MatchKind::Ternary),
    ];
    pub(super) const SWITCH_LIKE: &[(u32, MatchKind)] = &[
        (128, MatchKind::Lpm),
        (48, MatchKind::Exact),
        (16, MatchKind::Range),
        (8, MatchKind::Ternary),
        (64, MatchKind::Ternary),
        (1, MatchKind::Exact),
        (32, MatchKind::Optional),
        (128, MatchKind::Ternary),
        (128, MatchKind::Lpm),
        (64, MatchKind::Exact),
        (32, MatchKind::Range),
        (8, MatchKind::Optional),
    ];

    fn words(bits: u32) -> usize {
        bits.div_ceil(32) as usize
    }

    pub(super) fn schema(fields: &[(u32, MatchKind)]) -> Schema {
        let mut out = Vec::new();
        for (i, &(bits, kind)) in fields.iter().enumerate() {
            let n = words(bits);
            for w in 0..n {
                let b = if w == 0 { bits - 32 * (n as u32 - 1) } else { 32 };
                out.push(FieldSpec { name: format!("f{i}[{w}]"), bits: b as u8, kind });
            }
        }
        Schema { fields: out }
    }

    fn full(bits: u32) -> u128 {
        if bits == 128 { u128::MAX } else { (1u128 << bits) - 1 }
    }

    /// `value`/`mask` of a `bits`-wide field as per-word ternaries.
    fn split(value: u128, mask: u128, bits: u32, exact: bool) -> Vec<FieldMatch> {
        let n = words(bits);
        (0..n)
            .map(|w| {
                let sh = 32 * (n - 1 - w);
                let wb = if w == 0 { bits - 32 * (n as u32 - 1) } else { 32 };
                let (v, m) = ((value >> sh) as u32, (mask >> sh) as u32 & width_mask(wb as u8));
                if exact && m == width_mask(wb as u8) {
                    FieldMatch::exact(v & m)
                } else {
                    FieldMatch::ternary(v, m)
                }
            })
            .collect()
    }

    /// One field's match from random draws: values from a small pool so
    /// that rules overlap; `sel` picks wildcard / specific forms.
    fn field(bits: u32, kind: MatchKind, pool: u128, sel: u32, len_draw: u32, lo_hi: (u32, u32)) -> Vec<FieldMatch> {
        let f = full(bits);
        let v = pool & f;
        match kind {
            MatchKind::Exact => split(v, f, bits, true),
            MatchKind::Optional if sel % 3 == 0 => split(0, 0, bits, false),
            MatchKind::Optional => split(v, f, bits, true),
            MatchKind::Lpm => {
                let lens = [0, 1, 8, 16, 31, 32, 33, 48, 64, 95, 96, 127, 128];
                let len = lens[len_draw as usize % lens.len()].min(bits);
                let m = f & !full(bits - len);
                split(v & m, m, bits, false)
            }
            MatchKind::Ternary => {
                // A prefix, a wildcard, or a mask with a few holes (the trie
                // expands those; more holes would be refused).
                let m = match sel % 4 {
                    0 => 0,
                    1 => f,
                    2 => f & !(((len_draw as u128) & 0x7) << (bits.saturating_sub(8) / 2)),
                    _ => f & !full(bits - len_draw % (bits + 1)),
                };
                split(v & m, m, bits, false)
            }
            MatchKind::Range => {
                let w = width_mask(bits as u8);
                let (a, b) = (lo_hi.0 & w, lo_hi.1 & w);
                vec![FieldMatch::range(a.min(b), a.max(b))]
            }
        }
    }

    pub(super) fn rules<const N: usize>(fields: &'static [(u32, MatchKind)], max: usize) -> impl Strategy<Value = Vec<Rule<N>>> {
        let pools = vec![0u128, 1, 0xfe80 << 112, (0xfe80u128 << 112) | 0xdead_beef, u128::MAX, 0x2001_0db8u128 << 96, 80, 0x8000_0000];
        let one = prop::collection::vec(
            (prop::sample::select(pools), any::<u32>(), any::<u32>(), prop::sample::select(vec![0u32, 1, 79, 80, 1023, 65535, u32::MAX]), prop::sample::select(vec![0u32, 80, 1024, 65534, u32::MAX])),
            fields.len(),
        )
        .prop_map(move |draws| {
            let mut fm = Vec::new();
            for (&(bits, kind), &(pool, sel, len, a, b)) in fields.iter().zip(&draws) {
                fm.extend(field(bits, kind, pool, sel, len, (a, b)));
            }
            Rule::<N>::new(&fm, 0, 0)
        });
        prop::collection::vec(one, 0..max)
    }

    /// Keys at rules' word bounds, next to them, and arbitrary.
    pub(super) fn keys<const N: usize>(set: &RuleSet<N>, seeds: &[(u32, u32)]) -> Vec<Key<N>> {
        let nw = set.schema.len();
        seeds
            .iter()
            .map(|&(a, b)| {
                let mut k = [0u32; N];
                let base = (!set.is_empty()).then(|| &set.rules[a as usize % set.len()]);
                for w in 0..nw {
                    let bits = set.schema.fields[w].bits;
                    let wm = width_mask(bits);
                    let h = a.wrapping_mul(0x9e37_79b9).wrapping_add(b.rotate_left(w as u32 * 5));
                    k[w] = match base {
                        Some(r) if h % 8 != 0 => {
                            let fm = r.fields[w];
                            let (lo, hi) = fm.as_range(bits).unwrap_or((fm.lo & fm.mask, (fm.lo & fm.mask) | (!fm.mask & wm)));
                            match (h >> 4) % 6 {
                                0 => lo,
                                1 => hi.min(wm),
                                2 => lo.wrapping_sub(1) & wm,
                                3 => hi.wrapping_add(1) & wm,
                                4 => (fm.lo & fm.mask) | (h & !fm.mask & wm),
                                _ => lo + (hi.min(wm) - lo) / 2,
                            }
                        }
                        _ => h & wm,
                    };
                }
                Key(k)
            })
            .collect()
    }

    /// The partitioned tree over `set` under `ops` (insert, delete,
    /// modify: the rule at a position replaced) of rules `pick(i)`,
    /// against the oracle after every step, by every path.
    pub(super) fn churn<const N: usize>(
        set: &RuleSet<N>,
        cfg: &PTreeConfig,
        ops: &[(u8, usize, usize)],
        pick: impl Fn(usize) -> Option<Rule<N>>,
        seeds: &[(u32, u32)],
    ) -> Result<(), TestCaseError> {
        let mut p = PTree::build(set, cfg).unwrap();
        let mut rules = set.rules.clone();
        for &(op, at, from) in ops {
            let Some(r) = pick(from) else { return Ok(()) };
            if op == 2 && !rules.is_empty() {
                update_both(&mut p, &mut rules, false, at, r);
                update_both(&mut p, &mut rules, true, at, r);
            } else {
                update_both(&mut p, &mut rules, op == 0, at, r);
            }
            prop_assert_eq!(&p.rule_set().rules, &rules);
            prop_assert_eq!(p.check_blocks(), Ok(()));
            let now = RuleSet::new(set.schema.clone(), rules.clone());
            ptree_agrees(&p, &now, &keys(&now, seeds))?;
        }
        Ok(())
    }

    pub(super) fn check<const N: usize>(set: &RuleSet<N>, keys: &[Key<N>], trie: &TrieConfig, dtree: &DTreeConfig) {
        let lin = Linear::new(set);
        let want: Vec<Option<u32>> = keys.iter().map(|k| lin.classify(k)).collect();
        let mut built: Vec<(&str, Box<dyn MemoryWalk<N>>)> = vec![("dtree", Box::new(DTree::build(set, dtree).unwrap()))];
        // The partitioned tree on the best kernels, the AVX2 ones and the
        // scalar ones, with the decision tree's small buckets so it branches.
        for (name, simd, avx512) in [("ptree", true, true), ("ptree avx2", true, false), ("ptree scalar", false, false)] {
            let cfg = PTreeConfig { bucket: dtree.bucket, simd, avx512, ..Default::default() };
            built.push((name, Box::new(PTree::build(set, &cfg).unwrap())));
        }
        match Trie::build(set, trie) {
            Ok(t) => built.push(("trie", Box::new(t))),
            Err(e) => assert!(matches!(e, super::super::BuildError::OverBudget { .. }), "{e}"),
        }
        let mut out = vec![0i32; keys.len()];
        let want_i: Vec<i32> = want.iter().map(|w| w.map_or(-1, |r| r as i32)).collect();
        let mut acc = Vec::new();
        for (name, c) in &built {
            for (k, w) in keys.iter().zip(&want) {
                assert_eq!(c.classify(k), *w, "{name} on {k:?}");
                acc.clear();
                assert_eq!(c.walk(k, &mut acc), *w, "{name} walk on {k:?}");
            }
            c.classify_batch(keys, &mut out);
            assert_eq!(out, want_i, "{name} batch");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn wide_12_word_keys_trie_dtree_and_ptree_equal_the_oracle(
        rules in wide::rules::<16>(wide::UPF_LIKE, 40),
        seeds in prop::collection::vec(any::<(u32, u32)>(), 1..150),
        stride in 2u8..=8,
        bucket in 1usize..6,
    ) {
        let set = RuleSet::new(wide::schema(wide::UPF_LIKE), rules);
        prop_assert_eq!(set.schema.len(), 12);
        let keys = wide::keys(&set, &seeds);
        wide::check(&set, &keys, &TrieConfig { stride, max_bytes: 1 << 20 }, &DTreeConfig { bucket, ..Default::default() });
    }

    #[test]
    fn wide_keys_with_a_folded_field_equal_the_oracle(
        rules in wide::rules::<16>(wide::FOLDED, 40),
        seeds in prop::collection::vec(any::<(u32, u32)>(), 1..150),
        bucket in 1usize..6,
    ) {
        let set = RuleSet::new(wide::schema(wide::FOLDED), rules);
        prop_assert_eq!(set.schema.len(), 11);
        let keys = wide::keys(&set, &seeds);
        wide::check(&set, &keys, &TrieConfig { stride: 8, max_bytes: 1 << 20 }, &DTreeConfig { bucket, ..Default::default() });
    }

    #[test]
    fn wide_24_word_keys_trie_dtree_and_ptree_equal_the_oracle(
        rules in wide::rules::<32>(wide::SWITCH_LIKE, 40),
        seeds in prop::collection::vec(any::<(u32, u32)>(), 1..150),
        stride in 2u8..=8,
        bucket in 1usize..6,
    ) {
        let set = RuleSet::new(wide::schema(wide::SWITCH_LIKE), rules);
        prop_assert_eq!(set.schema.len(), 24);
        let keys = wide::keys(&set, &seeds);
        wide::check(&set, &keys, &TrieConfig { stride, max_bytes: 1 << 20 }, &DTreeConfig { bucket, ..Default::default() });
    }

    #[test]
    fn wide_ptree_updates_equal_the_oracle_after_every_step(
        rules in wide::rules::<16>(wide::UPF_LIKE, 30),
        more in wide::rules::<16>(wide::UPF_LIKE, 12),
        ops in prop::collection::vec((0u8..3, any::<usize>(), any::<usize>()), 1..20),
        seeds in prop::collection::vec(any::<(u32, u32)>(), 1..60),
        max_delta in 0usize..6,
        simd in any::<bool>(),
        wide_leaves in 0usize..4,
    ) {
        let schema = wide::schema(wide::UPF_LIKE);
        let set = RuleSet::new(schema.clone(), rules.clone());
        let cfg = PTreeConfig { bucket: 2, simd, max_delta, wide_leaves: Some(wide_leaves), ..Default::default() };
        wide::churn(&set, &cfg, &ops, |i| more.get(i % more.len().max(1)).or(rules.get(i % rules.len().max(1))).copied(), &seeds)?;
    }

    #[test]
    fn wide_24_word_ptree_updates_equal_the_oracle_after_every_step(
        rules in wide::rules::<32>(wide::SWITCH_LIKE, 30),
        more in wide::rules::<32>(wide::SWITCH_LIKE, 12),
        ops in prop::collection::vec((0u8..3, any::<usize>(), any::<usize>()), 1..20),
        seeds in prop::collection::vec(any::<(u32, u32)>(), 1..60),
        wide_leaves in 0usize..4,
    ) {
        let set = RuleSet::new(wide::schema(wide::SWITCH_LIKE), rules.clone());
        let cfg = PTreeConfig { bucket: 2, max_delta: 2, wide_leaves: Some(wide_leaves), ..Default::default() };
        wide::churn(&set, &cfg, &ops, |i| more.get(i % more.len().max(1)).or(rules.get(i % rules.len().max(1))).copied(), &seeds)?;
    }

    #[test]
    fn wide_dtree_updates_equal_the_oracle(
        rules in wide::rules::<16>(wide::UPF_LIKE, 30),
        ops in prop::collection::vec((any::<bool>(), any::<usize>(), any::<usize>()), 1..20),
        seeds in prop::collection::vec(any::<(u32, u32)>(), 1..80),
    ) {
        let set = RuleSet::new(wide::schema(wide::UPF_LIKE), rules.clone());
        let mut d = DTree::build(&set, &DTreeConfig { bucket: 2, ..Default::default() }).unwrap();
        let mut cur = rules.clone();
        for (ins, at, from) in ops {
            if (ins || cur.is_empty()) && !rules.is_empty() {
                let at = at % (cur.len() + 1);
                let r = rules[from % rules.len()];
                d.insert(at, r).unwrap();
                cur.insert(at, r);
            } else if !cur.is_empty() {
                let at = at % cur.len();
                d.delete(at).unwrap();
                cur.remove(at);
            }
        }
        let now = RuleSet::new(wide::schema(wide::UPF_LIKE), cur);
        let lin = Linear::new(&now);
        for k in wide::keys(&now, &seeds) {
            prop_assert_eq!(d.classify(&k), lin.classify(&k));
        }
    }
}

#[test]
fn wide_structures_build_by_name_and_an_unknown_name_is_refused() {
    use super::{build_structure_n, AnyStructure};
    use crate::rules::AnyRuleSet;
    let schema = wide::schema(wide::SWITCH_LIKE);
    let n = schema.len();
    // Two rules: word 23 exact 7, else everything; the second matches all.
    let mut lo = vec![0u32; 2 * n];
    let mut hi = vec![0u32; 2 * n];
    let mut mask = vec![0u32; 2 * n];
    (lo[n - 1], hi[n - 1], mask[n - 1]) = (7, 7, u32::MAX);
    let any = AnyRuleSet::from_words("t", schema, &lo, &hi, &mask).unwrap();
    for algo in super::WIDE_ALGORITHMS {
        if *algo == "exact" {
            // A hash table cannot hold a catch-all beside an exact rule: refused, with the reason.
            let err = AnyStructure::build(algo, &any, &BuildConfig::default()).err().unwrap().to_string();
            assert!(err.contains("not an exact match"), "{err}");
            continue;
        }
        let s = AnyStructure::build(algo, &any, &BuildConfig::default()).unwrap();
        assert_eq!(s.width(), 32);
        let mut keys = vec![0u32; 3 * n];
        keys[n - 1] = 7;
        keys[2 * n - 1] = 8;
        let mut out = [9i32; 3];
        s.classify_words(&keys, n, &mut out);
        assert_eq!(out, [0, 1, 1], "{algo}");
    }
    // Exact rules only (word 23 = 7, then 8): the hash table builds by name and answers like the rest.
    (lo[2 * n - 1], hi[2 * n - 1], mask[2 * n - 1]) = (8, 8, u32::MAX);
    let exact = AnyRuleSet::from_words("t", wide::schema(wide::SWITCH_LIKE), &lo, &hi, &mask).unwrap();
    let s = AnyStructure::build("exact", &exact, &BuildConfig::default()).unwrap();
    let mut keys = vec![0u32; 3 * n];
    (keys[n - 1], keys[2 * n - 1], keys[3 * n - 1]) = (7, 8, 9);
    let mut out = [9i32; 3];
    s.classify_words(&keys, n, &mut out);
    assert_eq!(out, [0, 1, -1]);
    let AnyRuleSet::W32(set) = any else { unreachable!() };
    assert!(build_structure_n("rte_acl", &set, &BuildConfig::default()).err().unwrap().to_string().contains("unknown classifier"));
}

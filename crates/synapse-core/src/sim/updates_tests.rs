//! Rule updates under traffic: the versioned oracle sees no stale or wrong
//! answer under churn with either invalidation, catches a PMU left stale,
//! and exact invalidation drops exactly the cached keys an entry covers.

use super::*;
use crate::sim::config::{Generate, Rules, Traffic};
use proptest::prelude::*;

pub(super) fn cfg(algo: Algo, invalidate: Invalidate, churn: f64, seed: u64) -> Config {
    let mut c = Config {
        duration_ns: 200_000.0,
        seed,
        ..Config::default()
    };
    c.elu.algo = algo;
    c.elu.lookup_slots = 64;
    c.elu.orb_entries = 128;
    c.hbm.bank_busy_ns = 0.0;
    c.pmus.block_size = 64;
    c.traffic = Traffic::Flows {
        dist: "caida2019".into(),
        flows: 400,
        mean_pkt_bytes: 800.0,
        flow_duration_ns: 40_000.0,
        profile: "uniform".into(),
        max_bytes: 1e6,
        nomatch_share: 0.0,
    };
    c.tables[0].rules = Rules::Generate {
        generate: Generate {
            kind: "acl".into(),
            count: 200,
            seed: 7,
        },
    };
    c.update_engine.invalidate = invalidate;
    c.update_engine.swap_ns = 200.0;
    // The partitioned tree at the decision tree's cost per operation, so
    // its engine keeps up with the churn (these tests are about answers).
    c.update_engine.ptree_op_ns = c.update_engine.dtree_op_ns;
    if churn > 0.0 {
        c.updates.push(Scheduled {
            at_ns: 20_000.0,
            churn_per_s: churn,
            seed,
            ..Scheduled::default()
        });
    }
    c
}

/// Runs to the end of the scenario (or on from now), then on (traffic and
/// updates still coming) until nothing is in flight at a check every
/// 50 µs, so every update and every PHV is decided, and ends the run
/// ([`Simulator::drain`]); fails when PHVs are still in flight after 5 ms.
pub(super) fn drain(s: &mut Simulator) -> (Invariants, UpdateStats) {
    let mut t = s.now_ns().max(s.config.duration_ns);
    s.run_until_ns(t);
    let mut empty = false;
    for _ in 0..100 {
        t += 50_000.0;
        s.run_until_ns(t);
        if s.check_invariants().in_flight == 0 {
            empty = true;
            break;
        }
    }
    assert!(empty, "did not drain in 5 ms: {:?}", s.check_invariants());
    let d = s.drain();
    assert!(d.drained, "did not drain: {d:?} {:?}", s.check_invariants());
    (s.check_invariants(), s.update_stats())
}

fn run_drained(c: Config) -> (Simulator, Invariants, UpdateStats) {
    let mut s = Simulator::new(c).unwrap();
    let (inv, st) = drain(&mut s);
    (s, inv, st)
}

#[test]
fn churn_gives_no_stale_or_wrong_answer_on_every_structure_and_invalidation() {
    for algo in [Algo::Trie, Algo::Dtree, Algo::Ptree, Algo::Linear] {
        for inv in [Invalidate::Exact, Invalidate::Flush] {
            let (_, i, st) = run_drained(cfg(algo, inv, 1e6, 3));
            assert!(st.committed > 50, "{algo:?} {inv:?}: {st:?}");
            assert!(st.invalidated > 0, "{algo:?} {inv:?}: nothing invalidated");
            assert_eq!(st.stale_answers, 0, "{algo:?} {inv:?}");
            assert_eq!(i.wrong_action, 0, "{algo:?} {inv:?}");
            assert_eq!(i.lost, 0);
            assert_eq!(i.duplicates, 0);
        }
    }
}

#[test]
fn a_pmu_left_stale_is_caught_by_the_versioned_oracle() {
    let (_, i, st) = run_drained(cfg(Algo::Dtree, Invalidate::None, 1e6, 3));
    assert!(st.committed > 50);
    assert!(st.stale_answers > 0, "{st:?}");
    assert_eq!(i.wrong_action, 0);
}

#[test]
fn exact_invalidation_drops_exactly_the_covered_keys_a_flush_drops_all() {
    for mode in [Invalidate::Exact, Invalidate::Flush] {
        let mut s = Simulator::new(cfg(Algo::Trie, mode, 0.0, 5)).unwrap();
        s.run_until_ns(100_000.0);
        // An entry covering a cached key's /8 source: count what it covers.
        let cached: Vec<Key> = s
            .pmus
            .iter()
            .flat_map(|p| p.cam.keys_by_recency())
            .collect();
        assert!(cached.len() > 20);
        let k = cached[0];
        let src = format!(
            "{}.{}.{}.{}/8",
            k.0[0] >> 24,
            (k.0[0] >> 16) & 255,
            (k.0[0] >> 8) & 255,
            k.0[0] & 255
        );
        let line = format!("insert 0 {src} * * * *");
        let set = parse_ops::<8>(&line, "t", 1, &crate::rules::Schema::five_tuple()).unwrap();
        let Op::Insert { rule, .. } = set[0] else {
            panic!()
        };
        let covered = cached.iter().filter(|c| rule.matches(c)).count() as u64;
        assert!(
            covered >= 1 && covered < cached.len() as u64,
            "{covered} of {}",
            cached.len()
        );
        s.request_updates("", &[line]).unwrap();
        s.run_until_ns(150_000.0);
        let st = s.update_stats();
        assert_eq!(st.committed, 1);
        let expect = if mode == Invalidate::Exact {
            covered
        } else {
            cached.len() as u64
        };
        assert_eq!(st.invalidated, expect, "{mode:?}");
        let (_, i, st) = {
            let mut t = s.now_ns();
            for _ in 0..20 {
                t += 50_000.0;
                s.run_until_ns(t);
            }
            ((), s.check_invariants(), s.update_stats())
        };
        assert_eq!(st.stale_answers, 0);
        assert_eq!(i.wrong_action, 0);
        assert!(st.latency_ns[0] > 0.0);
    }
}

#[test]
fn the_new_entry_answers_the_keys_it_covers_after_the_commit() {
    let mut s = Simulator::new(cfg(Algo::Dtree, Invalidate::Exact, 0.0, 9)).unwrap();
    s.run_until_ns(50_000.0);
    // Top priority, catches everything: every later answer is its id.
    s.request_updates("acl", &["insert 0 * * * * *".into(), "default".into()])
        .unwrap();
    s.run_until_ns(60_000.0);
    assert_eq!(s.update_stats().committed, 2);
    assert!(s.tables[0].oracle.iter().all(|&m| m == Some(FIRST_NEW_ID)));
    s.run_until_ns(200_000.0);
    let i = s.check_invariants();
    assert_eq!(i.wrong_action, 0);
    assert_eq!(s.update_stats().stale_answers, 0);
    // Deleting it brings the old answers back (by their stable ids).
    s.request_updates("acl", &["delete 0".into()]).unwrap();
    s.run_until_ns(210_000.0);
    assert!(s.tables[0].oracle.iter().all(|&m| m != Some(FIRST_NEW_ID)));
    assert!(s.tables[0]
        .oracle
        .iter()
        .any(|&m| m.is_some_and(|x| x < FIRST_NEW_ID)));
}

#[test]
fn bad_operations_name_their_line() {
    let sc = crate::rules::Schema::five_tuple();
    let e = parse_ops::<8>("# c\ninsert 0 * * * * *\ndelete x\n", "ops.txt", 1, &sc).unwrap_err();
    assert!(e.starts_with("ops.txt:3: expected a position"), "{e}");
    let e = parse_ops::<8>("insert 0 * *\n", "ops.txt", 1, &sc).unwrap_err();
    assert!(e.starts_with("ops.txt:1: expected 5 fields"), "{e}");
    let e = parse_ops::<8>("insert 0 1.2.3/8 * * * *\n", "ops.txt", 1, &sc).unwrap_err();
    assert!(e.starts_with("ops.txt:1: field src"), "{e}");
    let e = parse_ops::<8>("frobnicate\n", "ops.txt", 1, &sc).unwrap_err();
    assert!(e.starts_with("ops.txt:1: expected `insert"), "{e}");
    let ok = parse_ops::<8>(
        "insert 3 10.0.0.0/8 * 80 0..1023 6&&&255\nmodify 1\ndefault\n",
        "o",
        1,
        &sc,
    )
    .unwrap();
    assert_eq!(ok.len(), 3);
    let Op::Insert { pos, rule } = ok[0] else {
        panic!()
    };
    assert_eq!(pos, 3);
    assert!(rule.matches(&Key::five_tuple(0x0a01_0203, 9, 80, 443, 6)));
    assert!(!rule.matches(&Key::five_tuple(0x0a01_0203, 9, 80, 2000, 6)));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]
    #[test]
    fn churn_at_any_rate_and_seed_stays_consistent(seed in 1u64..1000, rate in prop::sample::select(vec![1e4, 1e5, 1e6, 5e6]), algo in prop::sample::select(vec![Algo::Dtree, Algo::Ptree, Algo::Trie]), flush: bool) {
        let inv = if flush { Invalidate::Flush } else { Invalidate::Exact };
        let (_, i, st) = run_drained(cfg(algo, inv, rate, seed));
        prop_assert_eq!(st.stale_answers, 0);
        prop_assert_eq!(i.wrong_action, 0);
        prop_assert_eq!(i.lost, 0);
    }
}

/// The case proptest found: at 5e6 updates/s a delete removed an entry that
/// covered a whole decision-tree leaf, whose build had dropped the entries
/// below it; they answered nothing until the fix rebuilt such a leaf.
#[test]
fn dtree_churn_that_deletes_a_covering_entry_stays_consistent() {
    let (_, i, st) = run_drained(cfg(Algo::Dtree, Invalidate::Exact, 5e6, 840));
    assert!(st.committed > 1000);
    assert_eq!((st.stale_answers, i.wrong_action, i.lost), (0, 0, 0));
}

/// The partitioned tree updated in place under fast churn: deletes of
/// entries that covered leaves (the entries dropped below them go back
/// into the leaves); charged `ptree_op_ns` per operation, no replica
/// beside it, and no fold-in: churn that keeps the table's size reuses
/// the blocks its leaves leave behind, so the tree is never written whole.
#[test]
fn ptree_churn_in_place_stays_consistent() {
    for seed in [840, 3] {
        let c = cfg(Algo::Ptree, Invalidate::Exact, 5e6, seed);
        let op_ns = c.update_engine.ptree_op_ns;
        let (_, i, st) = run_drained(c);
        assert!(st.committed > 500, "{st:?}");
        assert_eq!((st.stale_answers, i.wrong_action, i.lost), (0, 0, 0));
        // In place: no replica beside it; every operation charged, no
        // fold-in (no tree's bytes at build_gbps, no swap_ns) on top.
        assert_eq!(st.extra_bytes_peak, 0);
        assert_eq!(st.fold_ins, 0, "{st:?}");
        assert!(st.build_ns >= op_ns * st.committed as f64 && st.build_ns <= op_ns * st.requested as f64, "{st:?}");
    }
}

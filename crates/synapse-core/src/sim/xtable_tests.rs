//! Program consistency across tables: a transaction over two tables is one
//! version, PHVs in flight across its flip get the old answer at both, the
//! cross-table check counts mixed versions in per-table mode (so it can
//! fail) and none in program mode, under churn too.

use super::*;
use crate::sim::config::{Edge, Generate, Rules, Table as TableCfg};

/// Two tables in a row (every PHV visits `acl` then `fw`); `acl` is much
/// larger, so its replica takes far longer to build than `fw`'s.
fn cfg2(
    consistency: Consistency,
    algo: Algo,
    invalidate: Invalidate,
    churn: f64,
    seed: u64,
) -> Config {
    let table = |name: &str, count: u32, rseed: u64, pmus: Vec<u32>| TableCfg {
        name: name.into(),
        rules: Rules::Generate {
            generate: Generate {
                kind: "acl".into(),
                count,
                seed: rseed,
            },
        },
        pmus,
        ..TableCfg::default()
    };
    // The one-table churn tests' set-up (flows, ELU, HBM, update engine),
    // over two tables in a row.
    let mut c = super::super::tests::cfg(algo, invalidate, 0.0, seed);
    c.duration_ns = 600_000.0;
    c.tables = vec![
        table("acl", 150, 7, vec![0, 1]),
        table("fw", 30, 8, vec![2, 3]),
    ];
    c.edges = vec![Edge {
        src: "acl".into(),
        dst: "fw".into(),
        p: 1.0,
    }];
    c.pmus.count = 4;
    c.update_engine.consistency = consistency;
    if churn > 0.0 {
        c.updates.push(Scheduled {
            at_ns: 20_000.0,
            churn_per_s: churn,
            churn_tables: vec!["acl".into(), "fw".into()],
            seed,
            ..Scheduled::default()
        });
    }
    c
}

use super::super::tests::drain;

/// Both tables get a top-priority catch-all in one transaction: every
/// answer of both changes.
fn catch_all_transaction(s: &mut Simulator) {
    let all = vec!["insert 0 * * * * *".to_string()];
    s.request_transaction(&[("acl".into(), all.clone()), ("fw".into(), all)])
        .unwrap();
}

#[test]
fn a_transaction_across_two_tables_flips_once_and_phvs_in_flight_keep_the_old_version_at_both() {
    let mut c = cfg2(Consistency::Program, Algo::Trie, Invalidate::Exact, 0.0, 3);
    c.update_engine.swap_ns = 5_000.0;
    let mut s = Simulator::new(c).unwrap();
    s.run_until_ns(50_000.0);
    catch_all_transaction(&mut s);
    // Prepared beside the old structures: nothing visible before the flip.
    s.run_until_ns(52_000.0);
    let st = s.update_stats();
    assert_eq!(st.flips, 0, "{st:?}");
    let old_bytes = st.structure_bytes;
    assert!(s
        .tables
        .iter()
        .all(|t| t.oracle.iter().all(|&m| m != Some(FIRST_NEW_ID))));
    s.run_until_ns(120_000.0);
    let st = s.update_stats();
    assert_eq!((st.flips, st.batches, st.committed), (1, 2, 2), "{st:?}");
    // Both tables answer the new entry from the flip on.
    for t in &s.tables {
        assert!(
            t.oracle.iter().all(|&m| m == Some(FIRST_NEW_ID)),
            "{}",
            t.name
        );
    }
    // Flip, then retire once the PHVs stamped before it were out.
    assert_eq!(st.retire_latency_ns.len(), 2);
    assert!(st.retire_latency_ns[0] > st.latency_ns[0], "{st:?}");
    // The old structures of both tables were kept beside the new ones.
    assert!(
        old_bytes > 0 && st.extra_bytes_peak >= old_bytes,
        "{old_bytes} {st:?}"
    );
    let (i, st) = drain(&mut s);
    // PHVs stamped before the flip looked up after it and got the old
    // answers (each checked against its stamped version: none stale).
    assert!(st.old_version_answers > 0, "{st:?}");
    assert_eq!(st.stale_answers, 0);
    assert_eq!(i.wrong_action, 0);
    assert_eq!((i.lost, i.duplicates), (0, 0));
    assert!(st.checked_phvs > 1000, "{st:?}");
    assert_eq!(
        (st.mixed_version_phvs, st.mixed_unresolved),
        (0, 0),
        "{st:?}"
    );
}

#[test]
fn the_same_transaction_mixes_versions_per_table_and_never_per_program() {
    // One transaction: exact entries for 40 flows on top of acl (its trie
    // stays large: a long build) and a catch-all on top of fw (a tiny
    // one). Per table, each commits its part on its own: fw's is in force
    // long before acl's, and those flows' PHVs between see the old acl and
    // the new fw. Per program, both flip at once.
    for consistency in [Consistency::Table, Consistency::Program] {
        let mut s =
            Simulator::new(cfg2(consistency, Algo::Trie, Invalidate::Exact, 0.0, 3)).unwrap();
        s.run_until_ns(50_000.0);
        let exact: Vec<String> = s.tables[0].keys[..40]
            .iter()
            .map(|k| {
                format!(
                    "insert 0 {} {} {} {} {}",
                    k.0[0], k.0[1], k.0[2], k.0[3], k.0[4]
                )
            })
            .collect();
        s.request_transaction(&[
            ("acl".into(), exact),
            ("fw".into(), vec!["insert 0 * * * * *".into()]),
        ])
        .unwrap();
        let (i, st) = drain(&mut s);
        assert_eq!(st.committed, 41);
        assert!(st.checked_phvs > 1000, "{st:?}");
        if consistency == Consistency::Table {
            assert_eq!(st.flips, 0);
            assert!(st.mixed_version_phvs > 10, "{st:?}");
        } else {
            assert_eq!(st.flips, 1);
            assert_eq!(st.mixed_version_phvs, 0, "{st:?}");
        }
        assert_eq!(st.mixed_unresolved, 0);
        // Each table alone is consistent either way.
        assert_eq!(st.stale_answers, 0);
        assert_eq!(i.wrong_action, 0);
    }
}

#[test]
fn churn_over_two_tables_never_mixes_versions_in_program_mode() {
    for algo in [Algo::Trie, Algo::Dtree] {
        for inv in [Invalidate::Exact, Invalidate::Flush] {
            let mut s = Simulator::new(cfg2(Consistency::Program, algo, inv, 1e6, 5)).unwrap();
            let (i, st) = drain(&mut s);
            let at = format!("{algo:?} {inv:?}: {st:?}");
            assert!(st.flips > 3 && st.committed > 50, "{at}");
            assert!(st.checked_phvs > 1000, "{at}");
            assert_eq!(st.mixed_version_phvs, 0, "{at}");
            assert_eq!(st.mixed_unresolved, 0, "{at}");
            assert_eq!(st.stale_answers, 0, "{at}");
            assert_eq!(i.wrong_action, 0, "{at}");
            assert_eq!((i.lost, i.duplicates), (0, 0), "{at}");
            assert_eq!(st.retire_latency_ns.len() as u64, st.committed, "{at}");
        }
    }
}

#[test]
fn churn_over_two_tables_mixes_versions_per_table() {
    let mut s = Simulator::new(cfg2(
        Consistency::Table,
        Algo::Trie,
        Invalidate::Exact,
        1e6,
        5,
    ))
    .unwrap();
    let (i, st) = drain(&mut s);
    assert!(st.mixed_version_phvs > 0, "{st:?}");
    assert_eq!(st.stale_answers, 0);
    assert_eq!(i.wrong_action, 0);
}

#[test]
fn cached_entries_left_untouched_at_the_flip_are_caught() {
    // `none` re-tags every cached entry, changed or not: PHVs of the new
    // version hit answers of the old one.
    let mut s = Simulator::new(cfg2(
        Consistency::Program,
        Algo::Trie,
        Invalidate::None,
        0.0,
        3,
    ))
    .unwrap();
    s.run_until_ns(50_000.0);
    catch_all_transaction(&mut s);
    let (i, st) = drain(&mut s);
    assert!(st.stale_answers > 0, "{st:?}");
    assert_eq!(i.wrong_action, 0);
}

#[test]
fn a_transaction_naming_a_bad_line_or_table_is_refused_whole() {
    let mut s = Simulator::new(cfg2(
        Consistency::Program,
        Algo::Trie,
        Invalidate::Exact,
        0.0,
        3,
    ))
    .unwrap();
    let e = s
        .request_transaction(&[
            ("acl".into(), vec!["delete 1".into()]),
            ("fw".into(), vec!["delete 1".into(), "remove 2".into()]),
        ])
        .unwrap_err();
    assert!(e.0.starts_with("updates:2: expected"), "{e}");
    let e = s
        .request_transaction(&[
            ("acl".into(), vec!["delete 1".into()]),
            ("nat".into(), vec![]),
        ])
        .unwrap_err();
    assert!(e.0.contains("no table named \"nat\""), "{e}");
    assert_eq!(s.update_stats().requested, 0);
    let mut c = cfg2(Consistency::Program, Algo::Trie, Invalidate::Exact, 0.0, 3);
    c.updates.push(Scheduled {
        transaction: [(
            "fw".to_string(),
            vec!["delete 0".to_string(), "insert 0 *".to_string()],
        )]
        .into(),
        ..Scheduled::default()
    });
    let e = Simulator::new(c).err().unwrap();
    assert!(
        e.0.starts_with("updates.0.transaction.fw:1: expected 5 fields"),
        "{e}"
    );
}

//! A PMU joining a table, cold and warm (`join.rs`), cycle by cycle: which
//! keys move, when they are served, what the copy costs.

use super::*;
use crate::hw::pmu;
use crate::sim::config::{Join, Table as TableCfg};
use source::{keys_for, Replay};

const FLOWS: u32 = 64;
/// Cycles between packets (0.1 Mpps at 4 ns): every lookup ends before the next.
const GAP: Cycle = 2500;

fn config(join: Join) -> Config {
    let mut c = Config {
        tables: vec![TableCfg { name: "t".into(), pmus: vec![0, 1], ..TableCfg::default() }],
        pmus: pmu::Config { count: 3, ..Default::default() },
        ..Config::default()
    };
    c.vmu.vnodes = 8;
    c.vmu.join = join;
    c
}

/// Every flow once (all cached: 64 keys, 256 entries a PMU), then every
/// flow again in `order`, one packet per GAP cycles.
fn sim(join: Join, order: &[u32]) -> Simulator {
    let set = crate::workload::rulegen::generate(&crate::workload::seed::Params::builtin("acl").unwrap(), 20, 1);
    let keys = vec![keys_for(&set, FLOWS as usize, 2)];
    let seq: Vec<u32> = (0..FLOWS).chain(order.iter().copied()).collect();
    Simulator::build(config(join), vec![set], keys, Box::new(Replay::new(seq, 0.1))).unwrap()
}

/// Per flow, its PMU before and after PMU 2 joins.
fn owners() -> Vec<(u16, u16)> {
    let mut s = sim(Join::Cold, &[]);
    let t = &s.tables[0];
    let before: Vec<u16> = t.lut_index.iter().map(|&i| t.vmu.route_index(i as usize)).collect();
    s.assign("t", &[0, 1, 2]).unwrap();
    let t = &s.tables[0];
    before.into_iter().zip(t.lut_index.iter().map(|&i| t.vmu.route_index(i as usize))).collect()
}

/// Runs phase 1, joins PMU 2 `lead` cycles before phase 2's first packet,
/// runs phase 2 and returns (join cycle, phase-2 counters).
fn run(s: &mut Simulator, lead: Cycle) -> (Cycle, Counters) {
    let a = FLOWS as Cycle * GAP;
    s.run_until_ns(((a - lead) * 4) as f64);
    let j = s.now();
    let p1 = s.totals()[0].clone();
    assert_eq!((p1.processed, p1.misses), (FLOWS as u64, FLOWS as u64));
    s.assign("t", &[0, 1, 2]).unwrap();
    s.run_until_ns(((2 * FLOWS as Cycle + 2) * GAP * 4) as f64);
    let t = s.totals()[0].clone();
    let mut d = t.clone();
    d.processed -= p1.processed;
    d.hits -= p1.hits;
    d.misses -= p1.misses;
    d.lat_sum -= p1.lat_sum;
    (j, d)
}

#[test]
fn a_warm_join_copies_the_cached_keys_of_the_moved_slots_and_they_hit() {
    let own = owners();
    let moved: Vec<u32> = (0..FLOWS).filter(|&f| own[f as usize].1 == 2).collect();
    assert!(moved.len() > 8 && moved.len() < 40, "{} of {FLOWS} flows move", moved.len());
    assert!(own.iter().all(|&(b, a)| a == b || a == 2), "only PMU 2 gains keys");
    let all: Vec<u32> = (0..FLOWS).collect();

    let mut cold = sim(Join::Cold, &all);
    let (_, c) = run(&mut cold, 1000);
    assert_eq!((c.processed, c.misses), (FLOWS as u64, moved.len() as u64), "cold: each moved key misses once");
    assert_eq!(cold.warm_copied, 0);

    let mut warm = sim(Join::Warm, &all);
    let (_, w) = run(&mut warm, 1000);
    assert_eq!((w.processed, w.misses), (FLOWS as u64, 0), "warm: every key hits");
    assert_eq!((warm.warm_joins, warm.warm_copied), (1, moved.len() as u64));
    // PMU 2 holds exactly the moved keys; the old owners keep theirs.
    let keys = &warm.tables[0].keys;
    let mut want: Vec<Key> = moved.iter().map(|&f| keys[f as usize]).collect();
    let mut got = warm.pmus[2].cam.keys_by_recency();
    want.sort_unstable_by_key(|k| k.0);
    got.sort_unstable_by_key(|k| k.0);
    assert_eq!(got, want);
    assert_eq!(warm.pmus[0].cam.len() + warm.pmus[1].cam.len(), FLOWS);
    // Phase 2 was all hits at 6 cycles (the copy was done long before).
    assert_eq!(w.lat_sum, 6 * FLOWS as u64);
    assert!(warm.check_invariants().ok());
}

#[test]
fn the_new_pmu_serves_once_the_last_copy_is_written() {
    // Phase 2 starts with a moved flow, 2 cycles after the join: the copy
    // of n entries takes the bus for n cycles from the join, the new PMU
    // issues from the cycle after the last, and the request (at the PMU 3
    // cycles after arrival) waits until then; then it hits.
    let own = owners();
    let first = (0..FLOWS).find(|&f| own[f as usize].1 == 2).unwrap();
    let n = own.iter().filter(|o| o.1 == 2).count() as Cycle;
    let mut s = sim(Join::Warm, &[first]);
    let (j, d) = run(&mut s, 2);
    let a = FLOWS as Cycle * GAP;
    assert_eq!(j, a - 2);
    assert_eq!((d.processed, d.misses), (1, 0));
    let wait = (j + n + 1).saturating_sub(a + 3);
    assert!(wait > 0);
    assert_eq!(d.lat_sum, 6 + wait, "n = {n}");
}

#[test]
fn an_old_owner_serves_nothing_while_it_reads_out_its_copies() {
    // Phase 2 starts with a flow that stays on the old owner sending more
    // copies: its search port reads out one a cycle (II_c = 1) from the
    // join, so the request waits for the last read. A cold join costs it
    // nothing.
    let own = owners();
    let sends = |p: u16| own.iter().filter(|&&o| o == (p, 2)).count() as Cycle;
    let o = if sends(0) >= sends(1) { 0 } else { 1 };
    let first = (0..FLOWS).find(|&f| own[f as usize] == (o, o)).unwrap();
    let sent = sends(o);
    let a = FLOWS as Cycle * GAP;
    let mut s = sim(Join::Warm, &[first]);
    let (j, d) = run(&mut s, 2);
    let wait = (j + sent).saturating_sub(a + 3);
    assert!(wait > 0, "PMU {o} sends {sent}");
    assert_eq!((d.processed, d.misses, d.lat_sum), (1, 0, 6 + wait));
    let mut s = sim(Join::Cold, &[first]);
    let (_, d) = run(&mut s, 2);
    assert_eq!((d.processed, d.misses, d.lat_sum), (1, 0, 6));
}

#[test]
fn a_warm_join_holds_the_bus_one_cycle_per_copy() {
    // The copies cross the PMU → ELU bus in a burst from the join: a miss
    // queued meanwhile waits until the n copies have crossed it.
    let n = owners().iter().filter(|o| o.1 == 2).count() as Cycle;
    let j = FLOWS as Cycle * GAP - 2;
    for join in [Join::Cold, Join::Warm] {
        let mut s = sim(join, &[]);
        s.run_until_ns((j * 4) as f64);
        assert_eq!(s.now(), j);
        s.assign("t", &[0, 1, 2]).unwrap();
        if join == Join::Cold {
            assert!(s.bus.can_send(j, 0));
        } else {
            assert!(!s.bus.can_send(j + n - 1, 0) && s.bus.can_send(j + n, 0), "n = {n}");
        }
    }
}

#[test]
fn a_join_before_any_traffic_is_the_same_cold_or_warm() {
    // Nothing cached, nothing to copy: a warm join at cycle 0 changes no
    // result (so scenarios that only place PMUs at start are unchanged).
    let all: Vec<u32> = (0..FLOWS).collect();
    let mut r = Vec::new();
    for join in [Join::Cold, Join::Warm] {
        let mut s = sim(join, &all);
        s.assign("t", &[0, 1, 2]).unwrap();
        s.run_until_ns(((2 * FLOWS as Cycle + 2) * GAP * 4) as f64);
        assert_eq!(s.warm_copied, 0);
        r.push(format!("{:?}", s.totals()));
    }
    assert_eq!(r[0], r[1]);
}

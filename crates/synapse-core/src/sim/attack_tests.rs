//! Attack traffic (`workload/attack.rs`) through the whole simulator:
//! attack PHVs counted apart, answered right; and the defences against
//! cache flooding (`hw/admit.rs`, `hw/ratelimit.rs`).

use super::*;
use crate::hw::admit;
use crate::workload::attack::{Attack, Kind};

/// 300 µs of 400 flows over 300 ACL rules, 2 PMUs of 64 entries.
fn run(attack: Option<Attack>, defence: config::Defence) -> Simulator {
    let mut s = Simulator::new(config(attack, defence)).unwrap();
    s.run_until_ns(300_000.0);
    assert!(s.drain().drained);
    let inv = s.check_invariants();
    assert!(inv.ok(), "{inv:?}");
    s
}

fn config(attack: Option<Attack>, defence: config::Defence) -> Config {
    Config {
        duration_ns: 300_000.0,
        tables: vec![config::Table {
            name: "acl".into(),
            pmus: vec![0, 1],
            rules: config::Rules::Generate { generate: config::Generate { kind: "acl".into(), count: 300, seed: 7 } },
            ..Default::default()
        }],
        pmus: crate::hw::pmu::Config { count: 2, block_size: 64, ..Default::default() },
        traffic: config::Traffic::Flows {
            dist: "caida2019".into(),
            flows: 400,
            mean_pkt_bytes: 800.0,
            flow_duration_ns: 60_000.0,
            profile: "uniform".into(),
            max_bytes: 1e6,
            nomatch_share: 0.0,
        },
        attack,
        defence,
        ..Config::default()
    }
}

fn attack(kind: Kind, share: f64) -> Option<Attack> {
    Some(Attack { share, kind, ..Attack::default() })
}

/// The legitimate class is exactly the traffic of the run without attack
/// (same arrivals), the two classes add up to the whole, every PHV gets
/// the oracle's answer (checked in `run`), and the attack's keys behave
/// as their kind says: random and no-match keys never repeat, so they
/// never hit; a scan of 1.1 × the PMU entries seldom hits under LRU.
#[test]
fn attack_phvs_are_counted_apart() {
    let base = run(attack(Kind::Random, 0.0), Default::default());
    let [l0, a0] = base.class_summary().unwrap();
    assert_eq!(a0.arrived, 0);
    assert_eq!(l0.arrived, base.check_invariants().created);
    assert!(run(None, Default::default()).class_summary().is_none());
    for kind in [Kind::Random, Kind::Nomatch, Kind::Scan] {
        let s = run(attack(kind, 0.3), Default::default());
        let [l, a] = s.class_summary().unwrap();
        let inv = s.check_invariants();
        assert_eq!(l.arrived, l0.arrived, "{kind:?}");
        let share = a.arrived as f64 / (a.arrived + l.arrived) as f64;
        assert!((share - 0.3).abs() < 0.01, "{kind:?}: {share}");
        assert_eq!((l.arrived + a.arrived, l.dropped + a.dropped, l.exited + a.exited), (inv.created, inv.dropped, inv.exited));
        let t = &s.totals()[0];
        assert_eq!((l.hits + a.hits, l.misses + a.misses), (t.hits, t.misses));
        match kind {
            Kind::Random | Kind::Nomatch => assert_eq!(a.hits, 0, "{kind:?}"),
            // Not 0: a fill lands an ELU walk after its miss, so fewer
            // than the cycle's keys enter the CAM between a key's fill
            // and its next lookup when walks are slow.
            Kind::Scan => assert!(a.hit_rate < 0.3 * l.hit_rate, "{} vs {}", a.hit_rate, l.hit_rate),
        }
        // The attack costs the legitimate traffic hits.
        assert!(l.hit_rate < l0.hit_rate, "{kind:?}: {} vs {}", l.hit_rate, l0.hit_rate);
    }
}

/// The doorkeeper keeps never-repeating keys out of the CAMs: under a
/// random flood the legitimate hit rate is higher than with plain LRU.
#[test]
fn doorkeeper_protects_the_legitimate_hit_rate() {
    let dk = config::Defence { admission: admit::Config { policy: admit::Policy::Doorkeeper, ..Default::default() }, ..Default::default() };
    for kind in [Kind::Random, Kind::Nomatch] {
        let lru = run(attack(kind, 0.4), Default::default()).class_summary().unwrap()[0].hit_rate;
        let s = run(attack(kind, 0.4), dk.clone());
        let def = s.class_summary().unwrap()[0].hit_rate;
        assert!(def > lru + 0.02, "{kind:?}: doorkeeper {def} vs LRU {lru}");
        assert!(s.defence_counters().0 > 0);
    }
}

/// The miss-rate limit bounds what a table sends to the ELU: at most
/// rate × time + burst over the run, and the run still ends with every
/// PHV answered right (`run`).
#[test]
fn miss_rate_limit_bounds_elu_requests() {
    let d = config::Defence { miss_rate_mpps: 5.0, miss_burst: 8, ..Default::default() };
    let free = run(attack(Kind::Random, 0.3), Default::default());
    let s = run(attack(Kind::Random, 0.3), d);
    let sent = s.totals()[0].elu_requests;
    let bound = 5.0 * s.now_ns() / 1000.0 + 8.0;
    assert!((sent as f64) <= bound, "{sent} > {bound}");
    assert!(free.totals()[0].elu_requests as f64 > 5.0 * 300.0, "the limit must bind in this test");
    assert!(s.defence_counters().1[0] > 0);
}


/// The shed gate in front of the ELU (doorkeeper + `shed_backlog`) under
/// a random flood: attack misses are shed (counted per table, and as drops
/// of their class), the legitimate p99 latency falls against the
/// doorkeeper alone, every PHV is answered right or dropped (`run`), and
/// the per-PHV arrival record holds exactly the PHVs in flight.
#[test]
fn shed_gate_keeps_attack_misses_from_queueing_ahead() {
    let dk = config::Defence { admission: admit::Config { policy: admit::Policy::Doorkeeper, ..Default::default() }, ..Default::default() };
    let gate = config::Defence { shed_backlog: 8, shed_all_backlog: 16, ..dk.clone() };
    let plain = run(attack(Kind::Random, 0.3), dk).class_summary().unwrap()[0].clone();
    let s = run(attack(Kind::Random, 0.3), gate);
    let [l, a] = s.class_summary().unwrap();
    let (_, _, shed) = s.defence_counters();
    assert!(a.shed > 0 && l.shed + a.shed == shed[0], "{l:?} {a:?} {shed:?}");
    assert!(l.dropped >= l.shed && a.dropped >= a.shed);
    let (fa, fl) = (a.shed as f64 / a.arrived as f64, l.shed as f64 / l.arrived as f64);
    assert!(fa > 5.0 * fl, "the gate sheds the attack's keys, not the flows': {fa} vs {fl}");
    assert!(l.p99_latency_ns < plain.p99_latency_ns, "{} vs {}", l.p99_latency_ns, plain.p99_latency_ns);
    assert_eq!(s.legit.as_ref().unwrap().held(), 0, "drained: no PHV in flight");
}

/// The arrival record of the classes is bounded: mid-run it holds the PHVs
/// in flight, not one entry per PHV of the run.
#[test]
fn class_arrivals_are_held_only_while_in_flight() {
    let mut s = Simulator::new(config(attack(Kind::Random, 0.3), Default::default())).unwrap();
    for t in [50_000.0, 150_000.0, 250_000.0] {
        s.run_until_ns(t);
        let inv = s.check_invariants();
        assert_eq!(s.legit.as_ref().unwrap().held() as u64, inv.in_flight, "at {t} ns");
        assert!(inv.created > 10 * inv.in_flight);
    }
}

/// The shed gate's second filter (`admission.repeats`) under a scan of
/// 1.1 × the PMU entries: the scan's keys come back, pass the first filter
/// as seen and, without it, reach the ELU at every lap; with it each key's
/// misses after its second are shed, so the ELU walks fewer misses and
/// sheds fewer legitimate ones, and more legitimate PHVs leave.
#[test]
fn repeats_filter_sheds_a_scans_returning_keys() {
    let dk = admit::Config { policy: admit::Policy::Doorkeeper, ..Default::default() };
    let gate = config::Defence { admission: dk.clone(), shed_backlog: 8, shed_all_backlog: 16, ..Default::default() };
    let rep = config::Defence { admission: admit::Config { repeats: true, ..dk }, ..gate.clone() };
    let a = run(attack(Kind::Scan, 0.3), gate);
    let b = run(attack(Kind::Scan, 0.3), rep);
    let ([la, aa], [lb, ab]) = (a.class_summary().unwrap(), b.class_summary().unwrap());
    assert!(ab.shed > aa.shed, "attack shed {} vs {}", ab.shed, aa.shed);
    assert!(b.totals()[0].elu_requests < a.totals()[0].elu_requests);
    assert!(lb.shed < la.shed && lb.exited > la.exited, "{lb:?} vs {la:?}");
}

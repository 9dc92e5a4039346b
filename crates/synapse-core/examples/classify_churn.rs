//! Lookups under update churn on a generated set, for quick measurements:
//! `cargo run --release -p synapse-core --example classify_churn -- KIND N RATE SECS [KEY=VALUE..]`
//! (`CHURN=near`: deleted rules of the set put back at their own priority;
//! `CHURN=rank`: new rules, siblings of the set's, at their parent's rank;
//! default `uniform`: copies at random positions)
//! (`synapse bench classify --updates-per-s` is the user's command; RATE 0:
//! the static tree only, with its bytes per rule and build time). After
//! the churn it also measures, without updates, the lookups of the tree as
//! the churn left it and of a tree built afresh from the same rules: what
//! the in-place structure lost, against what the set's change costs any
//! tree, and what a lookup reads in each (`PTree::lookup_profile`: trees,
//! levels, leaf blocks, rules compared, lines).
use synapse_core::classify::partition::PTree;
use synapse_core::classify::{churn, BuildConfig};
use synapse_core::rules::Key;
use synapse_core::workload::{rulegen, seed::Params, tracegen};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let kind = a.get(1).map_or("acl", |s| s.as_str());
    let n: usize = a.get(2).map_or(10_000, |s| s.parse().unwrap());
    let rate: f64 = a.get(3).map_or(1e6, |s| s.parse().unwrap());
    let secs: f64 = a.get(4).map_or(1.0, |s| s.parse().unwrap());
    let set = rulegen::generate(&Params::builtin(kind).unwrap(), n, 1);
    let keys: Vec<Key> = tracegen::generate(&set, 100_000, tracegen::Pareto::new(1.0, 0.1).unwrap(), 2).iter().map(|e| e.key).collect();
    let mut cfg = BuildConfig::default();
    for kv in a.iter().skip(5) {
        let (k, v) = kv.split_once('=').expect("KEY=VALUE");
        cfg.set(k, v).unwrap();
    }
    let placement: churn::Placement = std::env::var("CHURN").unwrap_or("uniform".into()).parse().unwrap();
    let show = |what: &str, rep: &churn::ChurnReport| {
        println!(
            "{kind} {n} {what}: {:.2} M lookups/s, {:.3} M updates/s sustained (capacity {:.3} M/s), p50 {:.2} us p99 {:.2} us p99.9 {:.1} us max {:.0} us, wrong {}/{}{}",
            rep.lookups_per_s() / 1e6,
            rep.updates_per_s() / 1e6,
            rep.update_capacity_per_s() / 1e6,
            rep.update_latency_us_p50,
            rep.update_latency_us_p99,
            rep.update_latency_us_p999,
            rep.update_latency_us_max,
            rep.wrong,
            rep.checked,
            if rep.saturated { format!(", saturated ({} updates owed)", rep.updates_owed) } else { String::new() }
        );
    };
    let profile = |what: &str, t: &PTree| {
        let p = t.lookup_profile(&keys);
        println!(
            "  {what} per lookup: {:.2} trees, {:.2} levels, {:.2} blocks, {:.1} rules compared, {:.1} block lines, {:.0} lines per group of 16; \
             {} lines and {} leaves read in all, {} KiB of blocks",
            p.trees, p.levels, p.blocks, p.lanes, p.lines, p.group_lines, p.distinct_lines, p.distinct_leaves, p.row_bytes >> 10
        );
    };
    let mut t = PTree::build(&set, &cfg.ptree).unwrap();
    let st = t.stats();
    println!(
        "{kind} {n} built: {:.1} bytes per rule, build {:.1} ms, {} rules in the side leaf, {} leaf rule items",
        st.bytes as f64 / n as f64,
        st.build_time.as_secs_f64() * 1e3,
        st.side,
        st.items
    );
    // Warm (caches, clock, page faults of the output) before the first
    // measurement, as every later tree is by the one before it.
    churn::static_rate(&t, &keys, secs / 4.0);
    show("static", &churn::run(&mut t, &set, &keys, 0.0, secs, 7, placement));
    profile("static", &t);
    println!("  whole-trace batch passes (as bench classify), no updates: {:.2} M lookups/s", churn::static_rate(&t, &keys, secs) / 1e6);
    if rate == 0.0 {
        return; // the static structure only: its lookups, bytes and build time
    }
    show(&format!("rate {rate:e} ({placement:?})"), &churn::run(&mut t, &set, &keys, rate, secs, 7, placement));
    let (ins, above) = t.inserts_above_best();
    println!("  inserts into a tree: {ins}, above its best rule: {above} ({:.1} %)", 100.0 * above as f64 / ins.max(1) as f64);
    let now = t.rule_set();
    show("after the churn, no updates", &churn::run(&mut t, &now, &keys, 0.0, secs, 7, placement));
    profile("after the churn", &t);
    println!("  whole-trace batch passes (as bench classify), no updates: {:.2} M lookups/s", churn::static_rate(&t, &keys, secs) / 1e6);
    // The churned tree's two differences from a fresh build apart: its
    // blocks laid out again (layout only), and a fresh build readied for
    // updates (the rank look-up per answer only).
    t.compact_blocks();
    println!("  after the churn, compacted: {:.2} M lookups/s (whole-trace passes)", churn::static_rate(&t, &keys, secs) / 1e6);
    let plain = PTree::build(&now, &cfg.ptree).unwrap();
    let mut ranked = PTree::build(&now, &cfg.ptree).unwrap();
    ranked.prepare_updates();
    // Interleaved short rounds, medians (a loaded machine moves either).
    let (mut a, mut b, mut q) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..11 {
        a.push(churn::static_rate(&plain, &keys, secs / 8.0));
        b.push(churn::static_rate(&ranked, &keys, secs / 8.0));
        q.push(b[b.len() - 1] / a[a.len() - 1]);
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "  built afresh: {:.2}, readied for updates: {:.2} M lookups/s, ratio {:.3} (whole-trace passes, medians of 11 interleaved rounds)",
        med(&mut a) / 1e6,
        med(&mut b) / 1e6,
        med(&mut q)
    );
    drop((plain, ranked));
    let mut fresh = PTree::build(&now, &cfg.ptree).unwrap();
    show("its rules built afresh", &churn::run(&mut fresh, &now, &keys, 0.0, secs, 7, placement));
    profile("built afresh", &fresh);
    println!("  whole-trace batch passes (as bench classify), no updates: {:.2} M lookups/s", churn::static_rate(&fresh, &keys, secs) / 1e6);
}

//! Building a [`Simulator`] from a [`Config`]: the rule sets, the traffic,
//! the ELU's structures, the VMUs and the PMUs given to each table.

use super::*;

/// Builds the ELU's structure for a rule set through the classifier
/// registry (`elu.algo`: the trie, the decision tree, the partitioned tree
/// or the linear scan), with the scenario's `elu.build` parameters.
pub(super) fn build_walker<const N: usize>(
    algo: Algo,
    set: &RuleSet<N>,
    table: &str,
    build: &crate::classify::BuildConfig,
) -> Result<Box<dyn MemoryWalk<N> + Send>, SimError> {
    Ok(structure(algo, set, table, build)?)
}

/// The structure [`build_walker`] wraps.
fn structure<const N: usize>(
    algo: Algo,
    set: &RuleSet<N>,
    table: &str,
    build: &crate::classify::BuildConfig,
) -> Result<Box<dyn crate::classify::Structure<N>>, SimError> {
    let name = match algo {
        Algo::Trie => "trie",
        Algo::Linear => "linear",
        Algo::Dtree => "dtree",
        Algo::Ptree => "ptree",
    };
    let s = crate::classify::build_structure_n(name, set, build).map_err(|e| match e {
        // One line that says what to do in a scenario (the classify
        // command's advice names its own build parameters).
        crate::classify::BuildError::OverBudget {
            what,
            key,
            bytes,
            budget,
        } => {
            // The partitioned tree fits where the others explode (its
            // default budget is 512 MiB); past that, the decision tree.
            let other = if name == "ptree" { "dtree" } else { "ptree" };
            SimError(format!(
                "config: table {table:?}: the ELU's {what} needs more than its memory budget of \
                 {budget} bytes (stopped at {bytes}) for these {} rules; use another structure: \
                 --set elu.algo={other} (or raise elu.build.{key})",
                set.rules.len()
            ))
        }
        e => SimError(format!(
            "config: table {table:?}: building the ELU's {name}: {e}"
        )),
    })?;
    Ok(s)
}

/// Whether [`build_walker`] reuses the structures of earlier simulators of
/// this process ([`reuse_structures`]).
static REUSE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Structures built while reuse is on: (algo, build parameters, rule set,
/// the structure), the most recent last. Type-erased: a `static` cannot be
/// generic over the key width.
type Built = (Algo, crate::classify::BuildConfig, Box<dyn std::any::Any + Send + Sync>);
static BUILT: std::sync::Mutex<Vec<Built>> = std::sync::Mutex::new(Vec::new());

/// Structures kept at most (a trie may take up to its budget, 256 MiB).
const BUILT_KEEP: usize = 4;

/// Lets every simulator built after this in the process share the lookup
/// structure of an earlier one built from the same rule set, algorithm and
/// build parameters, instead of building it again (`false`: each builds its
/// own, and the kept ones are freed). A sweep's points differ in PMUs and
/// load, not rules: building the structure is most of a fast point's cost.
/// A structure is only read during a run (rule updates build their own), so
/// the runs are the same, bit for bit.
pub fn reuse_structures(on: bool) {
    REUSE.store(on, std::sync::atomic::Ordering::Relaxed);
    if !on {
        BUILT.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// A structure shared between simulators (see [`reuse_structures`]).
struct Shared<const N: usize>(std::sync::Arc<dyn crate::classify::Structure<N>>);

impl<const N: usize> Classifier<N> for Shared<N> {
    fn classify(&self, key: &Key<N>) -> Match {
        self.0.classify(key)
    }
}

impl<const N: usize> MemoryWalk<N> for Shared<N> {
    fn walk(&self, key: &Key<N>, accesses: &mut Vec<crate::classify::MemAccess>) -> Match {
        self.0.walk(key, accesses)
    }
    fn memory_bytes(&self) -> u64 {
        self.0.memory_bytes()
    }
    fn warm(&self, keys: &[Key<N>]) {
        self.0.warm(keys)
    }
}

/// [`build_walker`], or the structure an earlier simulator built from the
/// same inputs when [`reuse_structures`] is on.
fn walker_reused<const N: usize>(
    algo: Algo,
    set: &RuleSet<N>,
    table: &str,
    build: &crate::classify::BuildConfig,
) -> Result<Box<dyn MemoryWalk<N> + Send>, SimError> {
    if !REUSE.load(std::sync::atomic::Ordering::Relaxed) {
        return build_walker(algo, set, table, build);
    }
    type Entry<const N: usize> = (RuleSet<N>, std::sync::Arc<dyn crate::classify::Structure<N>>);
    {
        let built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
        for (a, b, e) in built.iter() {
            if let Some((s, st)) = e.downcast_ref::<Entry<N>>() {
                if *a == algo && b == build && s == set {
                    return Ok(Box::new(Shared(st.clone())));
                }
            }
        }
    }
    let st: std::sync::Arc<dyn crate::classify::Structure<N>> = std::sync::Arc::from(structure(algo, set, table, build)?);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if built.len() >= BUILT_KEEP {
        built.remove(0);
    }
    built.push((algo, build.clone(), Box::new((set.clone(), st.clone()))));
    Ok(Box::new(Shared(st)))
}

impl Simulator {
    /// Builds a simulator from a JSON configuration (see [`Config`]).
    pub fn from_json(json: &str) -> Result<Simulator, SimError> {
        let c: Config = serde_json::from_str(json).map_err(|e| SimError(format!("config: {e}")))?;
        Simulator::new(c)
    }

    /// Builds the rule sets, the traffic and the hardware of `config`.
    pub fn new(config: Config) -> Result<Simulator, SimError> {
        let mut sets = Vec::new();
        for t in &config.tables {
            let set = match &t.rules {
                config::Rules::Path { path } => {
                    let text = std::fs::read_to_string(path)
                        .map_err(|e| SimError(format!("{path}: {e}")))?;
                    crate::rules::classbench::parse_rules(&text, path)
                        .map_err(|e| SimError(e.to_string()))?
                }
                config::Rules::Generate { generate } => {
                    let params = crate::workload::seed::Params::builtin(&generate.kind).ok_or_else(|| {
                        SimError(format!("config: table {:?}: unknown rule type {:?} (expected acl, fw or ipc)", t.name, generate.kind))
                    })?;
                    crate::workload::rulegen::generate(
                        &params,
                        generate.count as usize,
                        generate.seed,
                    )
                }
            };
            sets.push(set);
        }
        let dur_ps = (config.duration_ns * 1000.0) as u64;
        let (src, flow_keys): (Source, Vec<Vec<Key>>) = match &config.traffic {
            config::Traffic::Flows {
                dist,
                flows,
                mean_pkt_bytes,
                flow_duration_ns,
                profile,
                max_bytes,
                nomatch_share,
            } => {
                use crate::workload::{flowsize::FlowSizeDist, profile::Profile, traffic};
                let terr = |e: String| SimError(format!("config: traffic: {e}"));
                let mut d = FlowSizeDist::from_spec(dist).map_err(|e| terr(e.to_string()))?;
                if *max_bytes > 0.0 {
                    d = d.truncated(*max_bytes).map_err(|e| terr(e.to_string()))?;
                }
                let prof = Profile::builtin(profile).map_err(|e| terr(e.to_string()))?;
                let tc = traffic::TrafficConfig {
                    dist: d,
                    flows: *flows,
                    duration_ps: dur_ps.max(1),
                    flow_duration_ps: ((*flow_duration_ns * 1000.0) as u64).max(1),
                    mean_pkt_bytes: *mean_pkt_bytes,
                    profile: Some(prof),
                    seed: config.seed,
                };
                let mut src = Source::Flows(traffic::Traffic::new(&tc).map_err(|e| terr(e.to_string()))?);
                if !(0.0..=1.0).contains(nomatch_share) {
                    return Err(terr(format!("nomatch_share must be in [0, 1], found {nomatch_share}")));
                }
                let keys = sets
                    .iter()
                    .zip(&config.tables)
                    .enumerate()
                    .map(|(i, (s, t))| {
                        source::keys_with_nomatch(s, *flows as usize, config.seed ^ (0x1000 + i as u64), *nomatch_share)
                            .map_err(|e| terr(format!("nomatch_share: table {:?}: {e}", t.name)))
                    })
                    .collect::<Result<Vec<Vec<Key>>, _>>()?;
                let mut keys = keys;
                if let Some(a) = &config.attack {
                    src = attack_source(&config, a, &tc, &sets, &mut keys, src)?;
                }
                (src, keys)
            }
            config::Traffic::Trace { .. } if config.attack.is_some() => {
                return err("config: attack: needs flow traffic (traffic.kind = \"flows\"), not a trace");
            }
            config::Traffic::Trace { path, rate_mpps } => {
                let text =
                    std::fs::read_to_string(path).map_err(|e| SimError(format!("{path}: {e}")))?;
                let trace = crate::rules::classbench::parse_trace(&text, path)
                    .map_err(|e| SimError(e.to_string()))?;
                let mut ids = std::collections::HashMap::new();
                let mut keys = Vec::new();
                let flows: Vec<u32> = trace
                    .iter()
                    .map(|e| {
                        *ids.entry(e.key).or_insert_with(|| {
                            keys.push(e.key);
                            keys.len() as u32 - 1
                        })
                    })
                    .collect();
                (
                    Source::Replay(source::Replay::new(flows, *rate_mpps)),
                    vec![keys; sets.len()],
                )
            }
        };
        let legit_flows = match (&config.attack, &config.traffic) {
            (Some(_), config::Traffic::Flows { flows, .. }) => Some(*flows),
            _ => None,
        };
        // An attack aimed at one table: its PHVs enter there.
        let attack_entry = match config.attack.as_ref().and_then(|a| a.table.as_ref()) {
            Some(n) => match config.tables.iter().position(|t| &t.name == n) {
                Some(i) => Some(i as u16),
                None => return err(format!("config: attack: table {n:?} is not a table of the scenario")),
            },
            None => None,
        };
        let mut sim = Simulator::build(config, sets, flow_keys, src)?;
        if let Some(legit_flows) = legit_flows {
            sim.legit = Some(Box::new(stats::Classes { legit_flows, attack_entry, ..Default::default() }));
        }
        Ok(sim)
    }
}

/// The legitimate flows `legit` with `a`'s attack packets mixed in
/// (`workload/attack.rs`); each table's attack keys are appended to its
/// flow keys (attack flow ids start at `traffic.flows`). Random and
/// no-match keys are drawn for every attack packet of the run (the
/// legitimate packets before `duration_ns`, counted on a copy of the
/// generator, times the attack's ratio); a scan's for `scan_factor` × the
/// PMU entries of the table holding most.
fn attack_source(
    config: &Config,
    a: &crate::workload::attack::Attack,
    tc: &crate::workload::traffic::TrafficConfig,
    sets: &[RuleSet],
    keys: &mut [Vec<Key>],
    legit: Source,
) -> Result<Source, SimError> {
    use crate::workload::attack;
    let aerr = |e: String| SimError(format!("config: attack: {e}"));
    a.check().map_err(aerr)?;
    let dur_ps = tc.duration_ps;
    let n_legit = crate::workload::traffic::Traffic::new(tc)
        .map_err(|e| aerr(e.to_string()))?
        .take_while(|x| x.t_ps < dur_ps)
        .count() as u64;
    let packets = (n_legit as f64 * a.ratio()).ceil() as u64 + 1;
    let capacity = config.tables.iter().map(|t| t.pmus.len() as u64).max().unwrap_or(0) * config.pmus.block_size as u64;
    let pool = a.pool(packets, capacity);
    if tc.flows as u64 + pool as u64 >= u32::MAX as u64 {
        return Err(aerr(format!("{pool} attack keys and {} flows do not fit 32-bit flow ids", tc.flows)));
    }
    for (i, (set, k)) in sets.iter().zip(keys.iter_mut()).enumerate() {
        let t = &config.tables[i];
        let seed = config.seed ^ (0xa77a_c000 + i as u64);
        let more = if a.kind == attack::Kind::Scan {
            // The table's VMU as `build` makes it: each PMU gets its share.
            let mut vmu = Vmu::new(i as u16, set.schema.len().max(1), t.lookup_bits, config.vmu.vnodes, t.phv_fifo, config.seed as u32 ^ i as u32);
            let pmus: Vec<u16> = t.pmus.iter().map(|&p| p as u16).collect();
            for &p in &pmus {
                vmu.add_pmu(p);
            }
            attack::scan_keys(set, &pmus, |key| vmu.route(key), pool, seed)
        } else {
            attack::attack_keys(set, a.kind, pool, seed)
        }
        .map_err(|e| aerr(format!("table {:?}: {e}", t.name)))?;
        k.extend(more);
    }
    Ok(Source::Mixed(Box::new(attack::Mix::new(legit, a, tc.flows, pool as u32))))
}

impl<const N: usize> Simulator<N> {
    /// Builds from explicit rule sets, per-table flow keys and an arrival
    /// stream (tests and embedding); the config's rules and traffic are ignored.
    pub fn build(
        config: Config,
        sets: Vec<RuleSet<N>>,
        flow_keys: Vec<Vec<Key<N>>>,
        source: impl Into<Source>,
    ) -> Result<Simulator<N>, SimError> {
        let source = source.into();
        if config.tables.is_empty() {
            return err("config: at least one table is needed");
        }
        if !(config.clock_mhz > 0.0) || !(config.window_ns > 0.0) {
            return err("config: clock_mhz and window_ns must be > 0");
        }
        if config.pmus.count > u16::MAX as u32 - 1 {
            return err("config: pmus.count too large");
        }
        let n = config.tables.len();
        if sets.len() != n || flow_keys.len() != n {
            return err(format!("config: {n} tables but {} rule sets and {} flow key lists", sets.len(), flow_keys.len()));
        }
        for (t, set) in config.tables.iter().zip(&sets) {
            if set.schema.len() > N {
                return err(format!("config: table {:?}: key of {} words in a simulator of {N}-word keys", t.name, set.schema.len()));
            }
        }
        let idx = |name: &str| -> Result<u16, SimError> {
            config
                .tables
                .iter()
                .position(|t| t.name == name)
                .map(|i| i as u16)
                .ok_or_else(|| SimError(format!("config: no table named {name:?}")))
        };
        for (i, t) in config.tables.iter().enumerate() {
            if config.tables[..i].iter().any(|u| u.name == t.name) {
                return err(format!("config: table name {:?} used twice", t.name));
            }
        }
        let edges: Vec<(u16, u16, f64)> = config
            .edges
            .iter()
            .map(|e| Ok((idx(&e.src)?, idx(&e.dst)?, e.p)))
            .collect::<Result<_, SimError>>()?;
        let entry: Vec<(u16, f64)> = if config.entry.is_empty() {
            vec![(0, 1.0)]
        } else {
            config
                .entry
                .iter()
                .map(|(k, v)| Ok((idx(k)?, *v)))
                .collect::<Result<_, SimError>>()?
        };
        let cfg = Cfg::new(n, &edges, &entry).map_err(|e| SimError(format!("config: {e}")))?;
        let pmu_count = config.pmus.count as usize;
        let mut pmus: Vec<Pmu<N>> = (0..pmu_count)
            .map(|i| Pmu::new(i as u16, &config.pmus))
            .collect();
        let adm = &config.defence.admission;
        if adm.policy == crate::hw::admit::Policy::Doorkeeper {
            for p in &mut pmus {
                p.admit = Some(crate::hw::admit::Doorkeeper::new(adm, config.pmus.block_size));
            }
        }
        if config.defence.shed_backlog > 0 && adm.policy != crate::hw::admit::Policy::Doorkeeper {
            return err("config: defence.shed_backlog needs defence.admission.policy = \"doorkeeper\" (its filter tells first-time keys)".to_string());
        }
        let slru = config.defence.slru_protected;
        if !(0.0..1.0).contains(&slru) {
            return err(format!("config: defence.slru_protected must be in [0, 1), found {slru}"));
        }
        if slru > 0.0 {
            let prot = ((config.pmus.block_size as f64 * slru).floor() as u32).max(1);
            for p in &mut pmus {
                p.cam.set_slru(prot);
            }
        }
        if !(config.defence.miss_rate_mpps >= 0.0 && config.defence.miss_rate_mpps.is_finite()) {
            return err(format!("config: defence.miss_rate_mpps must be >= 0, found {}", config.defence.miss_rate_mpps));
        }
        let mut walkers = Vec::new();
        let mut tables = Vec::new();
        for (i, (t, set)) in config.tables.iter().zip(&sets).enumerate() {
            let keys = flow_keys[i].clone();
            let lin = Linear::new(set);
            let oracle: Vec<Match> = keys.iter().map(|k| lin.classify(k)).collect();
            walkers.push(walker_reused(config.elu.algo, set, &t.name, &config.elu.build)?);
            let words = set.schema.len().max(1);
            let mut vmu = Vmu::new(
                i as u16,
                words,
                t.lookup_bits,
                config.vmu.vnodes,
                t.phv_fifo,
                config.seed as u32 ^ i as u32,
            );
            let mut members = Vec::new();
            for &p in &t.pmus {
                if p as usize >= pmu_count {
                    return err(format!(
                        "config: table {:?} names PMU {p}, but pmus.count is {pmu_count}",
                        t.name
                    ));
                }
                if !pmus[p as usize].is_free() {
                    return err(format!("config: PMU {p} is given to two tables"));
                }
                pmus[p as usize].associate(i as u16);
                vmu.add_pmu(p as u16);
                members.push(p as u16);
            }
            let lut_index = keys.iter().map(|k| vmu.index(k) as u32).collect();
            tables.push(Table {
                name: t.name.clone(),
                vmu,
                lut_index,
                input: Fifo::new(config.pipeline.stage_fifo.max(1) as usize, Phv { id: 0, flow: 0, arrived: 0 }),
                keys,
                oracle,
                members,
                pending: None,
                release_free: 0,
                blocked: false,
                stall_from: 0,
                win: Counters::default(),
                total: Counters::default(),
                edges: vec![0; n + 1],
                hbm_seen: 0,
                reordered_seen: 0,
                defaults: 0,
            });
        }
        let cycle_ps = 1e6 / config.clock_mhz;
        let window = ((config.window_ns * 1000.0 / cycle_ps).round() as Cycle).max(1);
        let mut sim = Simulator {
            clock: crate::hw::PsClock::new(cycle_ps),
            now: 0,
            net: Network::new(config.interconnect.clone(), pmu_count),
            bus: SharedBus::new(1),
            bus_rr: 0,
            direct: VecDeque::new(),
            elu: Elu::new(config.elu.clone(), n, config.clock_mhz),
            hbm: Hbm::new(config.hbm.clone()),
            engine: Engine::new(),
            cfg,
            source,
            next_arrival: None,
            rng: Pcg64::seed_from_u64(config.seed ^ 0xC0FFEE),
            stage_fifo: config.pipeline.stage_fifo.max(1) as usize,
            vmu_latency: config.vmu.latency_cycles as Cycle
                + config.interconnect.latency_cycles as Cycle,
            window,
            window_end: window,
            rows: Vec::new(),
            edge_rows: Vec::new(),
            created: 0,
            dropped: 0,
            exited_bits: Vec::new(),
            duplicates: 0,
            wrong_action: 0,
            keys_done: 0,
            busy_cycles: 0,
            fast: true,
            lean_arrivals: true,
            any_blocked: false,
            lookup_done: false,
            other_wake: 0,
            wake: 0,
            draining: false,
            fed: false,
            isolated: edges.is_empty(),
            until: 0,
            routes: None,
            learned: Vec::new(),
            sets,
            updates: None,
            ended: false,
            rec: None,
            legit: None,
            limit: (config.defence.miss_rate_mpps > 0.0).then(|| {
                crate::hw::ratelimit::MissLimit::new(n, config.defence.miss_rate_mpps, config.defence.miss_burst, config.clock_mhz)
            }),
            shed_first: config.defence.shed_backlog,
            shed_all: config.defence.shed_all_backlog,
            shed: vec![0; n],
            warm_joins: 0,
            warm_copied: 0,
            tables,
            walkers,
            pmu_wake: vec![0; pmus.len()],
            pmu_min_wake: 0,
            pmu_active: active_all(pmus.len()),
            pmu_qm: vec![0; pmus.len().div_ceil(64)],
            pmus,
            config,
        };
        sim.pull_arrival();
        if !sim.config.updates.is_empty() {
            sim.schedule_updates()?;
        }
        Ok(sim)
    }
}

/// A bit set with the first `n` bits set.
pub(super) fn active_all(n: usize) -> Vec<u64> {
    let mut v = vec![u64::MAX; n.div_ceil(64)];
    if n % 64 != 0 {
        *v.last_mut().unwrap() = (1u64 << (n % 64)) - 1;
    }
    v
}

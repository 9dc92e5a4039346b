//! The simulator's configuration tree (JSON via serde; unknown keys are
//! errors). It mirrors the component tree; the Python side validates the same
//! tree with pydantic first and documents every field.

use crate::hw::{elu, hbm, interconnect, pmu};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub seed: u64,
    pub clock_mhz: f64,
    pub window_ns: f64,
    pub duration_ns: f64,
    /// After the run, how long the drain ([`super::Simulator::drain`]) may
    /// simulate on with arrivals stopped until every PHV has exited or been
    /// dropped; past it the run failed (PHVs stuck or too slow to leave).
    pub drain_ns: f64,
    pub tables: Vec<Table>,
    pub edges: Vec<Edge>,
    /// Share of arriving PHVs entering each table; empty = the first table.
    pub entry: BTreeMap<String, f64>,
    pub pmus: pmu::Config,
    pub vmu: Vmu,
    pub pipeline: Pipeline,
    pub interconnect: interconnect::Config,
    pub elu: elu::Config,
    pub hbm: hbm::Timing,
    pub traffic: Traffic,
    /// Rule updates while traffic flows (`sim/updates.rs`): the schedule
    /// (`[[updates]]`) and the update engine's costs (`[update_engine]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub updates: Vec<super::updates::Scheduled>,
    #[serde(skip_serializing_if = "super::updates::UpdatesConfig::is_default")]
    pub update_engine: super::updates::UpdatesConfig,
    /// Attack traffic mixed into the flows (`workload/attack.rs`); its
    /// PHVs are counted apart from the legitimate ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attack: Option<crate::workload::attack::Attack>,
    /// Defences against cache flooding (`hw/admit.rs`, the ELU's per-table
    /// miss-rate limit); all off by default.
    #[serde(skip_serializing_if = "Defence::is_default")]
    pub defence: Defence,
}

/// Defences against cache flooding (paper §8). Each is off by default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Defence {
    /// Admission of ELU fills into the PMUs' CAMs.
    pub admission: crate::hw::admit::Config,
    /// Misses each table may send to the ELU, millions per second (a token
    /// bucket per table); 0 = no limit. Misses over it wait in their PMU's
    /// Q_m, so a flooded table holds back only itself.
    pub miss_rate_mpps: f64,
    /// Burst of the miss-rate limit's token bucket, misses.
    pub miss_burst: u32,
    /// The ELU's shed gate (`sim/phases.rs`, phase 5): a miss at the head
    /// of a PMU's Q_m whose key the PMU's doorkeeper has not seen (a
    /// first-time key) is dropped ("shed") while the ELU holds at least
    /// this many misses (miss queue + ORB); 0 = never. Needs
    /// `admission.policy = "doorkeeper"` (its filter tells first-time keys).
    pub shed_backlog: u32,
    /// Any miss at the head of a Q_m is shed while the ELU holds at least
    /// this many misses (a bounded ELU backlog); 0 = never.
    pub shed_all_backlog: u32,
    /// Segmented LRU in the PMUs' CAMs (`hw/cam.rs`): the share of a CAM's
    /// entries in its protected segment, in (0, 1); 0 = plain LRU.
    pub slru_protected: f64,
}

impl Defence {
    pub fn is_default(&self) -> bool {
        *self == Defence::default()
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            seed: 1,
            clock_mhz: 250.0,
            window_ns: 10_000.0,
            duration_ns: 1_000_000.0,
            drain_ns: 1_000_000.0,
            tables: vec![Table::default()],
            edges: Vec::new(),
            entry: BTreeMap::new(),
            pmus: pmu::Config::default(),
            vmu: Vmu::default(),
            pipeline: Pipeline::default(),
            interconnect: interconnect::Config::default(),
            elu: elu::Config::default(),
            hbm: hbm::Timing::default(),
            traffic: Traffic::default(),
            updates: Vec::new(),
            update_engine: Default::default(),
            attack: None,
            defence: Defence::default(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Table {
    pub name: String,
    pub rules: Rules,
    /// N of the 2^N-entry VMU lookup table.
    pub lookup_bits: u32,
    /// PMU ids owned at the start.
    pub pmus: Vec<u32>,
    /// The VMU's PHV buffer (waiting FIFO), PHVs.
    pub phv_fifo: u32,
}

impl Default for Table {
    fn default() -> Table {
        Table {
            name: "acl".into(),
            rules: Rules::Generate {
                generate: Generate::default(),
            },
            lookup_bits: 10,
            pmus: vec![0, 1, 2, 3],
            phv_fifo: 256,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Rules {
    Path { path: String },
    Generate { generate: Generate },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Generate {
    #[serde(rename = "type")]
    pub kind: String,
    pub count: u32,
    pub seed: u64,
}

impl Default for Generate {
    fn default() -> Generate {
        Generate {
            kind: "acl".into(),
            count: 1000,
            seed: 1,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edge {
    pub src: String,
    pub dst: String,
    pub p: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Vmu {
    /// Cycles from a key entering the VMU to its request leaving (lookup3
    /// hash and the lookup-table BRAM read).
    pub latency_cycles: u32,
    /// Points per PMU on the consistent-hashing ring. The paper's ring has
    /// one per PMU (its BST holds the PMUs); more points balance the load.
    pub vnodes: u32,
    /// How a PMU joins a table that already has PMUs: `cold` (its share
    /// of the keys misses to the ELU) or `warm` (the entries it inherits
    /// are copied from the PMUs that held them first, `sim/join.rs`).
    pub join: Join,
}

/// How a PMU joining a table gets the keys the ring moves to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Join {
    /// It starts empty; each moved key misses once (the paper's model).
    #[default]
    Cold,
    /// The old owners send it their cached entries for the moved
    /// lookup-table slots over the PMU → ELU bus, and it serves once they
    /// are written.
    Warm,
}

impl Default for Vmu {
    fn default() -> Vmu {
        Vmu {
            latency_cycles: 2,
            vnodes: 1,
            join: Join::Cold,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Pipeline {
    /// Input FIFO of each table, PHVs. At an entry table a full FIFO drops
    /// the arriving packet (counted); between tables it back-pressures.
    pub stage_fifo: u32,
}

impl Default for Pipeline {
    fn default() -> Pipeline {
        Pipeline { stage_fifo: 64 }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Traffic {
    Flows {
        #[serde(default = "default_dist")]
        dist: String,
        #[serde(default = "default_flows")]
        flows: u32,
        #[serde(default = "default_pkt")]
        mean_pkt_bytes: f64,
        #[serde(default = "default_flow_duration")]
        flow_duration_ns: f64,
        #[serde(default = "default_profile")]
        profile: String,
        /// Largest flow size drawn, bytes (the CAIDA tail reaches 10 GB);
        /// 0 = no limit.
        #[serde(default = "default_max_bytes")]
        max_bytes: f64,
        /// Share of the flows whose key at a table matches none of its
        /// rules but catch-alls (chosen per table): their lookups end at a
        /// catch-all rule or, in a set without one, the default action.
        #[serde(default)]
        nomatch_share: f64,
    },
    Trace {
        path: String,
        #[serde(default = "default_rate")]
        rate_mpps: f64,
    },
}

fn default_dist() -> String {
    "caida2019".into()
}
fn default_flows() -> u32 {
    1_200
}
fn default_pkt() -> f64 {
    800.0
}
fn default_flow_duration() -> f64 {
    250_000.0
}
fn default_profile() -> String {
    "uniform".into()
}
fn default_max_bytes() -> f64 {
    1e7
}
fn default_rate() -> f64 {
    100.0
}

impl Default for Traffic {
    fn default() -> Traffic {
        Traffic::Flows {
            dist: default_dist(),
            flows: default_flows(),
            mean_pkt_bytes: default_pkt(),
            flow_duration_ns: default_flow_duration(),
            profile: default_profile(),
            max_bytes: default_max_bytes(),
            nomatch_share: 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_round_trip_and_unknown_keys_fail() {
        let c = Config::default();
        let j = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Config>(&j).unwrap(), c);
        let e = serde_json::from_str::<Config>(r#"{"pmus": {"count": 4, "blocksize": 2}}"#)
            .unwrap_err();
        assert!(e.to_string().contains("blocksize"), "{e}");
        let c: Config = serde_json::from_str(
            r#"{"pmus": {"count": 4}, "traffic": {"kind": "trace", "path": "t"}}"#,
        )
        .unwrap();
        assert_eq!(c.pmus.count, 4);
        assert_eq!(c.pmus.block_size, 256);
        assert!(matches!(c.traffic, Traffic::Trace { rate_mpps, .. } if rate_mpps == 100.0));
        // The ELU structures' build parameters: a table per structure,
        // unknown keys refused at every level.
        let c: Config =
            serde_json::from_str(r#"{"elu": {"build": {"trie": {"stride": 4}, "dtree": {"facl": {"dt_layers": 12}}}}}"#).unwrap();
        assert_eq!((c.elu.build.trie.stride, c.elu.build.dtree.facl.dt_layers), (4, 12));
        assert_eq!(c.elu.build.trie.max_bytes, crate::classify::trie::TrieConfig::default().max_bytes);
        for bad in [r#"{"elu": {"build": {"tree": {}}}}"#, r#"{"elu": {"build": {"ptree": {"buckets": 3}}}}"#,
                    r#"{"elu": {"build": {"dtree": {"facl": {"layers": 3}}}}}"#] {
            let e = serde_json::from_str::<Config>(bad).unwrap_err().to_string();
            assert!(e.contains("unknown field"), "{bad}: {e}");
        }
    }
}

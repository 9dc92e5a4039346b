//! Optional recorder of a whole VMT cluster (every table's VMU, the
//! VMT → PMU interconnect, every PMU and the PMU → ELU bus) in a full
//! simulation, to replay its boundary into the RTL cluster
//! (`hw/rtl/synapse_cluster.v`) and check the RTL against what the
//! simulator did inside, cycle by cycle.
//!
//! The cluster's inputs are what lies outside it: the PHV at the head of
//! each table's stage FIFO when its request producer looks (phase 7), the
//! next stage refusing a release (a full stage FIFO), the ELU's replies
//! (phase 2) and whether its miss queue has room (phase 5). Its observed
//! outputs are every request a VMU sent (and so which table won a channel),
//! every key sent straight to the ELU, every response a PMU gave, every miss
//! the bus carried (and so the round robin's choice) and every release.
//! [`ClusterLog::to_json`] lists them with their cycles; the co-simulation
//! (`python/synapse_vmt/hw/cosim.py`) turns them into per-cycle rows.
//!
//! The hooks ride on the PMU recorder's (`record.rs`): a run without a
//! recorder does exactly what it did before.

use super::*;
use serde_json::{json, Value};

/// One recorded event of the cluster.
#[derive(Clone, Copy, Debug)]
enum Ev<const N: usize> {
    /// Table `t`'s stage FIFO presents a PHV (its key's lookup-table index).
    Phv { t: u16, index: u32, key: Key<N> },
    /// Table `t` sent a request (tag) to PMU `pmu`.
    Req { t: u16, pmu: u16, tag: u64 },
    /// Table `t` sent its key straight to the ELU (no PMU for it).
    Direct { t: u16, tag: u64 },
    Rsp { pmu: u16, r: Response },
    /// The ELU's reply, to PMU `pmu` (a fill) or to the VMU (none).
    Fill { pmu: Option<u16>, t: u16, tag: u64, key: Key<N>, action: Match },
    /// The ELU's miss queue had room at phase 5.
    EluReady,
    /// The bus carried a miss from source `src` (a PMU, or the PMU count
    /// for the VMUs' direct path).
    Bus { src: u16, t: u16, tag: u64, key: Key<N> },
    Rel { t: u16, tag: u64, action: Match, via_miss: bool },
    /// The next stage could not take table `t`'s answered head.
    Stall { t: u16 },
    Ctl { pmu: u16, op: u8, tbl: u16, next_v: bool },
}

/// The events of a cluster, in the order the simulator made them.
#[derive(Clone, Debug)]
pub struct ClusterLog<const N: usize> {
    events: Vec<(Cycle, Ev<N>)>,
    /// VMU + interconnect latency: a request made at `c` is usable at `c + latency`.
    latency: Cycle,
    /// Per table, PHVs released so far (the next release's tag).
    released: Vec<u64>,
    /// Per table, the lookup table at the start (PMU per entry, `INVALID`).
    lut: Vec<Vec<u16>>,
    lut_bits: Vec<u32>,
    phv_fifo: Vec<u32>,
    /// Per PMU, its table at the start (none: free).
    assoc: Vec<Option<u16>>,
}

fn key_hex<const N: usize>(k: &Key<N>) -> String {
    let mut s = String::with_capacity(8 * N);
    for w in k.0.iter().rev() {
        s.push_str(&format!("{w:08x}"));
    }
    s
}

fn act(a: Match) -> i64 {
    a.map_or(-1, |x| x as i64)
}

impl<const N: usize> ClusterLog<N> {
    #[inline]
    pub(super) fn phv(&mut self, now: Cycle, t: usize, index: u32, key: Key<N>) {
        self.events.push((now, Ev::Phv { t: t as u16, index, key }));
    }
    #[inline]
    pub(super) fn req(&mut self, pmu: usize, r: &Request) {
        self.events.push((r.at - self.latency, Ev::Req { t: r.table, pmu: pmu as u16, tag: r.tag }));
    }
    #[inline]
    pub(super) fn direct(&mut self, now: Cycle, t: usize, tag: u64) {
        self.events.push((now, Ev::Direct { t: t as u16, tag }));
    }
    #[inline]
    pub(super) fn rsp(&mut self, pmu: usize, now: Cycle, r: &Response) {
        self.events.push((now, Ev::Rsp { pmu: pmu as u16, r: *r }));
    }
    #[inline]
    pub(super) fn fill(&mut self, now: Cycle, m: &MissRequest<N>, action: Match) {
        self.events.push((now, Ev::Fill { pmu: m.pmu, t: m.table, tag: m.tag, key: m.key, action }));
    }
    #[inline]
    pub(super) fn elu_ready(&mut self, now: Cycle) {
        self.events.push((now, Ev::EluReady));
    }
    #[inline]
    pub(super) fn bus(&mut self, now: Cycle, src: usize, m: &MissRequest<N>) {
        self.events.push((now, Ev::Bus { src: src as u16, t: m.table, tag: m.tag, key: m.key }));
    }
    #[inline]
    pub(super) fn rel(&mut self, now: Cycle, t: usize, action: Match, via_miss: bool) {
        let tag = self.released[t];
        self.released[t] += 1;
        self.events.push((now, Ev::Rel { t: t as u16, tag, action, via_miss }));
    }
    #[inline]
    pub(super) fn stall(&mut self, now: Cycle, t: usize) {
        self.events.push((now, Ev::Stall { t: t as u16 }));
    }
    #[inline]
    pub(super) fn ctl(&mut self, pmu: usize, now: Cycle, op: u8, tbl: u16, next_v: bool) {
        self.events.push((now, Ev::Ctl { pmu: pmu as u16, op, tbl, next_v }));
    }

    /// The recording as JSON: the cluster's shape and start state
    /// (`luts`: per table, the PMU of each lookup-table entry, -1 invalid;
    /// `assoc`: per PMU its table or -1) and `events`, each `[cycle, kind,
    /// fields...]` (keys as hex, word 0 last; actions -1 for none; tags
    /// whole).
    pub fn to_json(&self) -> Value {
        let ev: Vec<Value> = self
            .events
            .iter()
            .map(|&(c, e)| match e {
                Ev::Phv { t, index, key } => json!([c, "phv", t, index, key_hex(&key)]),
                Ev::Req { t, pmu, tag } => json!([c, "req", t, pmu, tag]),
                Ev::Direct { t, tag } => json!([c, "direct", t, tag]),
                Ev::Rsp { pmu, r } => match r {
                    Response::Hit { table, tag, action, compared } => {
                        json!([c, "rsp", pmu, 1, table, tag, act(action), compared])
                    }
                    Response::Miss { table, tag, compared } => json!([c, "rsp", pmu, 2, table, tag, -1, compared]),
                    Response::Fill { table, tag, action } => json!([c, "rsp", pmu, 3, table, tag, act(action), 0]),
                    // (A run with a shed gate is not recorded: record_cluster.)
                    Response::Shed { table, tag } => json!([c, "rsp", pmu, 4, table, tag, -1, 0]),
                },
                Ev::Fill { pmu, t, tag, key, action } => json!([
                    c,
                    "fill",
                    pmu.map_or(-1, |p| p as i64),
                    t,
                    tag,
                    key_hex(&key),
                    act(action)
                ]),
                Ev::EluReady => json!([c, "elu_ready"]),
                Ev::Bus { src, t, tag, key } => json!([c, "bus", src, t, tag, key_hex(&key)]),
                Ev::Rel { t, tag, action, via_miss } => json!([c, "rel", t, tag, act(action), via_miss as u8]),
                Ev::Stall { t } => json!([c, "stall", t]),
                Ev::Ctl { pmu, op, tbl, next_v } => json!([c, "ctl", pmu, op, tbl, next_v as u8]),
            })
            .collect();
        let luts: Vec<Vec<i64>> = self
            .lut
            .iter()
            .map(|l| l.iter().map(|&p| if p == INVALID { -1 } else { p as i64 }).collect())
            .collect();
        json!({
            "latency": self.latency,
            "lut_bits": self.lut_bits,
            "phv_fifo": self.phv_fifo,
            "luts": luts,
            "assoc": self.assoc.iter().map(|a| a.map_or(-1, |t| t as i64)).collect::<Vec<_>>(),
            "events": ev,
        })
    }
}

impl<const N: usize> Simulator<N> {
    /// Records the whole cluster from now on (before the first cycle; no
    /// rule updates, miss-rate limit or explicit routes, whose effects are
    /// not ports of the RTL cluster).
    pub fn record_cluster(&mut self) -> Result<(), SimError> {
        if self.now != 0 {
            return err(format!("record_cluster: before cycle 0 (now {})", self.now));
        }
        if self.updates.is_some() || self.limit.is_some() || self.routes.is_some() {
            return err("record_cluster: a run with rule updates, a miss-rate limit or explicit routes cannot be recorded");
        }
        if self.shed_first | self.shed_all != 0 {
            return err("record_cluster: a run with a shed gate (defence.shed_*) cannot be recorded");
        }
        let mut assoc = Vec::with_capacity(self.pmus.len());
        for p in &self.pmus {
            assoc.push(match p.state() {
                State::Free => None,
                State::Associated { table } => Some(table),
                State::Transient { .. } => return err("record_cluster: a PMU is transient"),
            });
        }
        let log = ClusterLog {
            events: Vec::new(),
            latency: self.vmu_latency,
            released: vec![0; self.tables.len()],
            lut: self
                .tables
                .iter()
                .map(|t| (0..t.vmu.lut.len()).map(|i| t.vmu.lut.get(i)).collect())
                .collect(),
            lut_bits: self.tables.iter().map(|t| t.vmu.lut.bits).collect(),
            phv_fifo: self.config.tables.iter().map(|t| t.phv_fifo).collect(),
            assoc,
        };
        self.rec = Some(Box::new(PmuRecording {
            pmu: usize::MAX,
            events: Vec::new(),
            cluster: Some(Box::new(log)),
        }));
        Ok(())
    }

    /// Phase 7: the head of table `ti`'s stage FIFO, seen by its request producer.
    pub(super) fn rec_phv(&mut self, now: Cycle, ti: usize) {
        let t = &self.tables[ti];
        if let (Some(phv), Some(c)) = (t.input.front(), self.rec.as_deref_mut().and_then(|r| r.cluster.as_deref_mut())) {
            c.phv(now, ti, t.lut_index[phv.flow as usize], t.keys[phv.flow as usize]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default scenario with two tables on 4 PMUs (two each), 2 channels.
    fn two_tables() -> Config {
        let mut c = Config {
            duration_ns: 200_000.0,
            ..Config::default()
        };
        c.pmus.count = 4;
        c.interconnect.channels = 2;
        let mut b = c.tables[0].clone();
        b.name = "b".into();
        c.tables[0].pmus = vec![0, 2];
        b.pmus = vec![1, 3];
        c.tables.push(b);
        c.entry = [("acl".to_string(), 0.5), ("b".to_string(), 0.5)].into_iter().collect();
        c
    }

    #[test]
    fn recording_a_cluster_changes_nothing_and_sees_every_channel_grant() {
        let c = two_tables();
        let mut a = Simulator::new(c.clone()).unwrap();
        let mut b = Simulator::new(c).unwrap();
        b.record_cluster().unwrap();
        a.run_until(40_000);
        b.run_until(40_000);
        assert_eq!(format!("{:?}", a.totals()), format!("{:?}", b.totals()));
        let j = b.take_recording().unwrap().cluster.unwrap().to_json();
        let ev = j["events"].as_array().unwrap();
        let count = |k: &str| ev.iter().filter(|e| e[1] == k).count();
        // Every PHV a request producer took was sent to a PMU or the ELU,
        // every response and release is there, and the recorded PHVs
        // match the requests (each request is preceded by its PHV).
        let (reqs, rels, phvs) = (count("req") + count("direct"), count("rel"), count("phv"));
        assert!(reqs > 500 && rels > 400 && phvs >= reqs, "{reqs} {rels} {phvs}");
        let lookups = ev.iter().filter(|e| e[1] == "rsp" && e[3] != 3).count();
        assert!(lookups <= count("req") && lookups + 64 >= count("req"), "{lookups}");
        // A channel carries one request per cycle.
        let mut per: std::collections::HashSet<(u64, u64)> = Default::default();
        for e in ev.iter().filter(|e| e[1] == "req") {
            let ch = e[3].as_u64().unwrap() * 2 / 4;
            assert!(per.insert((e[0].as_u64().unwrap(), ch)), "two grants on a channel: {e}");
        }
    }
}

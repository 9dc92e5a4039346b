//! Attack traffic: cache flooding (paper §8: "malicious actors can generate
//! high rates of anomalous packets, causing a high cache miss rate").
//!
//! A share of the offered load is attack packets, interleaved with the
//! legitimate flows ([`Mix`]). Attack packets carry flow ids from
//! `legit_flows` on, so the simulator tells them apart; their keys come
//! from [`attack_keys`]:
//! - `random`: a key never seen before per packet, uniform over the fields'
//!   widths (spoofed 5-tuples: most fall to a catch-all rule, some match a
//!   named rule);
//! - `nomatch`: a new key per packet that matches no rule but catch-alls
//!   (as `traffic.nomatch_share`'s keys);
//! - `scan`: a cycle through `scan_factor` × the table's PMU capacity
//!   distinct random keys, the worst case of LRU (each key is evicted just
//!   before it comes back).
//!
//! No randomness is drawn for the timing: after each legitimate packet at
//! `t` (the next one at `t'`), the attack's credit grows by
//! `share / (1 - share)` and its whole packets are spread evenly over
//! `(t, t')`, from the first legitimate packet at or after `start_ns` on.
//! The legitimate arrivals are those of the same run without attack, bit
//! for bit.

use super::traffic::Arrival;
use crate::rules::{width_mask, Key, RuleSet, MAX_FIELDS};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};
use std::collections::{HashSet, VecDeque};

/// What the attacker sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Random,
    Nomatch,
    Scan,
}

/// The `[attack]` table of a scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Attack {
    /// Share of the offered packets that are attack packets, in [0, 1).
    pub share: f64,
    pub kind: Kind,
    /// `scan`: distinct keys per table, as a multiple of the PMU entries
    /// the table holds at the start.
    pub scan_factor: f64,
    /// Simulated time the attack starts at, ns (before it, no attack
    /// packet): a closed loop sees the misses rise.
    pub start_ns: f64,
    /// The table attack PHVs enter (a flood aimed at one table); `None`:
    /// the scenario's entry distribution, as the legitimate PHVs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
}

impl Default for Attack {
    fn default() -> Attack {
        Attack {
            share: 0.0,
            kind: Kind::Random,
            scan_factor: 1.1,
            start_ns: 0.0,
            table: None,
        }
    }
}

impl Attack {
    pub fn check(&self) -> Result<(), String> {
        if !(0.0..1.0).contains(&self.share) {
            return Err(format!("share must be in [0, 1), found {}", self.share));
        }
        if !(self.scan_factor > 0.0 && self.scan_factor.is_finite()) {
            return Err(format!("scan_factor must be > 0, found {}", self.scan_factor));
        }
        if !(self.start_ns >= 0.0 && self.start_ns.is_finite()) {
            return Err(format!("start_ns must be >= 0, found {}", self.start_ns));
        }
        Ok(())
    }

    /// Attack packets per legitimate one.
    pub fn ratio(&self) -> f64 {
        self.share / (1.0 - self.share)
    }

    /// Distinct attack keys a table needs, for `packets` attack packets
    /// and a table of `capacity` PMU entries.
    pub fn pool(&self, packets: u64, capacity: u64) -> usize {
        match self.kind {
            Kind::Random | Kind::Nomatch => packets as usize,
            Kind::Scan => ((self.scan_factor * capacity as f64).ceil() as usize).max(1),
        }
    }
}

/// `n` distinct attack keys of kind `kind` for `set` (for `scan`, the
/// cycle's keys): uniform over the fields' widths, and for `nomatch`
/// matching no rule but catch-alls.
pub fn attack_keys(set: &RuleSet, kind: Kind, n: usize, seed: u64) -> Result<Vec<Key>, String> {
    if kind == Kind::Nomatch && !set.is_empty() {
        return super::tracegen::nomatch_keys(set, n, seed);
    }
    let mut draw = Draw::new(set, n, seed)?;
    Ok((0..n).map(|_| draw.next_key()).collect())
}

/// `n` distinct random keys for a scan of a table whose VMU sends key `k`
/// to PMU `route(k)` among `pmus`: each PMU gets its share of the cycle
/// (`ceil(n / pmus)` keys, in turn), so every PMU sees more distinct keys
/// than it holds, whatever the consistent-hashing ring's balance.
pub fn scan_keys(set: &RuleSet, pmus: &[u16], route: impl Fn(&Key) -> u16, n: usize, seed: u64) -> Result<Vec<Key>, String> {
    if pmus.is_empty() {
        return attack_keys(set, Kind::Random, n, seed);
    }
    let q = n.div_ceil(pmus.len());
    let mut draw = Draw::new(set, q * pmus.len(), seed)?;
    let mut per: Vec<Vec<Key>> = vec![Vec::new(); pmus.len()];
    let mut tries = 0usize;
    while per.iter().any(|v| v.len() < q) {
        let k = draw.next_key();
        let Some(i) = pmus.iter().position(|&p| p == route(&k)) else { continue };
        if per[i].len() < q {
            per[i].push(k);
        }
        tries += 1;
        if tries > 10_000 * q * pmus.len() {
            return Err("a PMU of the table gets no scan keys (its lookup-table share is empty)".into());
        }
    }
    Ok((0..q).flat_map(|j| per.iter().map(move |v| v[j])).take(n).collect())
}

/// Distinct keys uniform over a rule set's field widths.
struct Draw {
    rng: Pcg64,
    w: [u8; MAX_FIELDS],
    seen: HashSet<[u32; MAX_FIELDS]>,
}

impl Draw {
    fn new(set: &RuleSet, n: usize, seed: u64) -> Result<Draw, String> {
        let mut w = [32u8; MAX_FIELDS];
        if !set.is_empty() {
            w = [0; MAX_FIELDS];
            for (i, f) in set.schema.fields.iter().enumerate().take(MAX_FIELDS) {
                w[i] = f.bits;
            }
        }
        let space: f64 = w.iter().map(|&b| b as f64).sum::<f64>().exp2();
        if (n as f64) > space / 2.0 {
            return Err(format!("{n} distinct attack keys do not fit keys of {} bits", space.log2()));
        }
        Ok(Draw { rng: Pcg64::seed_from_u64(seed), w, seen: HashSet::with_capacity(n) })
    }

    fn next_key(&mut self) -> Key {
        loop {
            let mut k = [0u32; MAX_FIELDS];
            for (f, &b) in self.w.iter().enumerate() {
                k[f] = self.rng.gen::<u32>() & width_mask(b);
            }
            if self.seen.insert(k) {
                return Key(k);
            }
        }
    }
}

/// Legitimate arrivals with attack packets interleaved (see the module
/// doc). Attack packet `j` is flow `legit_flows + j % pool`.
pub struct Mix<I> {
    legit: I,
    next: Option<Arrival>,
    ratio: f64,
    start_ps: u64,
    credit: f64,
    queue: VecDeque<Arrival>,
    legit_flows: u32,
    pool: u32,
    j: u64,
}

impl<I: Iterator<Item = Arrival>> Mix<I> {
    pub fn new(mut legit: I, attack: &Attack, legit_flows: u32, pool: u32) -> Mix<I> {
        let next = legit.next();
        Mix {
            legit,
            next,
            ratio: attack.ratio(),
            start_ps: (attack.start_ns * 1000.0) as u64,
            credit: 0.0,
            queue: VecDeque::new(),
            legit_flows,
            pool: pool.max(1),
            j: 0,
        }
    }
}

impl<I: Iterator<Item = Arrival>> Iterator for Mix<I> {
    type Item = Arrival;
    fn next(&mut self) -> Option<Arrival> {
        if let Some(a) = self.queue.pop_front() {
            return Some(a);
        }
        let a = self.next.take()?;
        self.next = self.legit.next();
        if a.t_ps >= self.start_ps {
            self.credit += self.ratio;
        }
        let m = self.credit.floor();
        self.credit -= m;
        let m = m as u64;
        if m > 0 {
            // Spread over (t, t'); after the last legitimate packet, at t.
            let gap = self.next.map_or(0, |b| b.t_ps - a.t_ps) as f64;
            for i in 0..m {
                let t = a.t_ps + (gap * (i + 1) as f64 / (m + 1) as f64) as u64;
                let flow = self.legit_flows + (self.j % self.pool as u64) as u32;
                self.j += 1;
                self.queue.push_back(Arrival { t_ps: t, flow });
            }
        }
        Some(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legit(n: u32) -> impl Iterator<Item = Arrival> {
        (0..n).map(|i| Arrival { t_ps: 1000 * i as u64, flow: i % 7 })
    }

    /// The share of the mix is the configured one, the legitimate arrivals
    /// are unchanged and in order, time never goes back, and attack flows
    /// count up from `legit_flows` (each once while the pool lasts).
    #[test]
    fn mix_keeps_the_legitimate_arrivals_and_adds_the_share() {
        for share in [0.0, 0.1, 0.3, 0.5] {
            let a = Attack { share, ..Attack::default() };
            let v: Vec<Arrival> = Mix::new(legit(10_000), &a, 100, 1 << 20).collect();
            let l: Vec<Arrival> = v.iter().copied().filter(|x| x.flow < 100).collect();
            assert_eq!(l, legit(10_000).collect::<Vec<_>>());
            let att: Vec<u32> = v.iter().filter(|x| x.flow >= 100).map(|x| x.flow).collect();
            let want = 10_000.0 * share / (1.0 - share);
            assert!((att.len() as f64 - want).abs() <= 1.0, "{share}: {} vs {want}", att.len());
            assert!(att.iter().enumerate().all(|(j, &f)| f == 100 + j as u32));
            assert!(v.windows(2).all(|w| w[0].t_ps <= w[1].t_ps));
        }
        // Nothing before start_ns (legitimate packets every 1000 ps).
        let a = Attack { share: 0.5, start_ns: 5.0, ..Attack::default() };
        let v: Vec<Arrival> = Mix::new(legit(10), &a, 7, 100).collect();
        assert!(v.iter().filter(|x| x.flow >= 7).all(|x| x.t_ps >= 5000));
        assert_eq!(v.iter().filter(|x| x.flow >= 7).count(), 5);
        // A scan pool of 3 cycles.
        let a = Attack { share: 0.5, ..Attack::default() };
        let f: Vec<u32> = Mix::new(legit(8), &a, 7, 3).filter(|x| x.flow >= 7).map(|x| x.flow).collect();
        assert_eq!(f, vec![7, 8, 9, 7, 8, 9, 7, 8]);
    }

    #[test]
    fn attack_keys_are_distinct_and_nomatch_keys_match_no_named_rule() {
        let set = crate::workload::rulegen::generate(&crate::workload::seed::Params::builtin("acl").unwrap(), 200, 1);
        let k = attack_keys(&set, Kind::Random, 5000, 3).unwrap();
        assert_eq!(k.iter().collect::<HashSet<_>>().len(), 5000);
        assert_eq!(k, attack_keys(&set, Kind::Random, 5000, 3).unwrap());
        let w: Vec<u8> = set.schema.fields.iter().map(|f| f.bits).collect();
        let nm = attack_keys(&set, Kind::Nomatch, 500, 3).unwrap();
        for key in &nm {
            assert!(set.rules.iter().filter(|r| !super::super::tracegen::matches_all(r, &w)).all(|r| !r.matches(key)));
        }
        assert!(Attack { share: 1.0, ..Attack::default() }.check().is_err());
    }
}

//! Header traces in the manner of ClassBench's `trace_generator` (Taylor &
//! Turner, ClassBench technical report WUCSE-2004-28, §6): pick a rule
//! uniformly, take a random corner of it (each field at its low or its high
//! end), and repeat that header a Pareto-distributed number of times for
//! locality of reference. The Pareto CDF is `D(x) = 1 - (b/x)^a`;
//! ClassBench's examples: no locality `a=1, b=0`, low `a=1, b=0.0001`,
//! high `a=1, b=1`.
//!
//! Each header records the index of the rule it came from, so the first
//! matching rule is that one or an earlier one.
//!
//! [`flow_keys`] gives the simulator's traffic flows their keys the same
//! way, but with points spread through the rule rather than on its corners
//! so that many distinct flows can share one rule.

use crate::rules::classbench::TraceEntry;
use crate::rules::{width_mask, Key, Rule, RuleSet, MAX_FIELDS};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use std::collections::HashSet;

/// Locality of reference: the Pareto parameters of ClassBench's
/// `trace_generator <a> <b>`.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Pareto {
    pub a: f64,
    pub b: f64,
}

impl Default for Pareto {
    /// ClassBench's commonly used setting (`a=1, b=0.1`).
    fn default() -> Pareto {
        Pareto { a: 1.0, b: 0.1 }
    }
}

impl Pareto {
    /// ClassBench accepts `a` and `b` in 0..1.
    pub fn new(a: f64, b: f64) -> Result<Pareto, String> {
        if !(a > 0.0 && a <= 1.0) {
            return Err(format!("Pareto a must be in (0, 1], found {a}"));
        }
        if !(0.0..=1.0).contains(&b) {
            return Err(format!("Pareto b must be in [0, 1], found {b}"));
        }
        Ok(Pareto { a, b })
    }

    /// How many times a header repeats: `ceil(b / u^(1/a))`, at least 1.
    pub fn copies<R: Rng>(&self, rng: &mut R) -> u64 {
        if self.b <= 0.0 {
            return 1;
        }
        let u: f64 = 1.0 - rng.gen::<f64>(); // in (0, 1]
        let x = (self.b / u.powf(1.0 / self.a)).ceil();
        if x.is_finite() && x >= 1.0 { x.min(1e12) as u64 } else { 1 }
    }
}

/// Field widths of the rule set's schema (for the 5-tuple 32, 32, 16, 16, 8).
fn widths(set: &RuleSet) -> [u8; MAX_FIELDS] {
    let mut w = [0u8; MAX_FIELDS];
    for (i, f) in set.schema.fields.iter().enumerate().take(MAX_FIELDS) {
        w[i] = f.bits;
    }
    w
}

/// Consecutive matching draws after which [`nomatch_keys`] gives up.
const NOMATCH_TRIES: usize = 10_000;

/// Whether `r` matches every key of fields `w` wide (a catch-all rule,
/// such as the all-wildcard rule ending most ClassBench sets).
pub fn matches_all(r: &Rule, w: &[u8]) -> bool {
    r.fields.iter().zip(w).all(|(f, &bits)| f.is_any() || f.as_range(bits).is_some_and(|(lo, hi)| lo == 0 && hi >= width_mask(bits)))
}

/// `n` keys that match no rule of `set` but its catch-all rules
/// ([`matches_all`]): the traffic a table's default serves (flows the rules
/// do not name). A set ending in a catch-all answers them with it, its own
/// default; one without, with the table's default action (no match). Each
/// key is uniform over the fields' widths, drawn again while another rule
/// matches it. Refused when [`NOMATCH_TRIES`] draws in a row all match
/// (rules covering nearly every key).
pub fn nomatch_keys(set: &RuleSet, n: usize, seed: u64) -> Result<Vec<Key>, String> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let w = widths(set);
    let named: Vec<&Rule> = set.rules.iter().filter(|r| !matches_all(r, &w)).collect();
    let mut out = Vec::with_capacity(n);
    let mut tries = 0;
    while out.len() < n {
        let mut k = [0u32; MAX_FIELDS];
        for f in 0..set.schema.len().min(MAX_FIELDS) {
            k[f] = rng.gen::<u32>() & width_mask(w[f]);
        }
        let key = Key(k);
        if named.iter().any(|r| r.matches(&key)) {
            tries += 1;
            if tries >= NOMATCH_TRIES {
                return Err(format!(
                    "{NOMATCH_TRIES} random keys in a row all match a rule: the rules leave no key to their default"
                ));
            }
        } else {
            tries = 0;
            out.push(key);
        }
    }
    Ok(out)
}

/// One field value inside `f`: its low or high end (`corner`) or a uniform
/// point. Ternaries that are not ranges get random don't-care bits.
fn point<R: Rng>(f: &crate::rules::FieldMatch, bits: u8, corner: bool, rng: &mut R) -> u32 {
    if bits == 0 {
        return 0;
    }
    let w = width_mask(bits);
    match f.as_range(bits) {
        Some((lo, hi)) => {
            let hi = hi.min(w);
            if corner {
                if rng.gen::<bool>() { hi } else { lo }
            } else {
                rng.gen_range(lo..=hi)
            }
        }
        None => {
            let free = w & !f.mask;
            let r = if corner { if rng.gen::<bool>() { free } else { 0 } } else { rng.gen::<u32>() & free };
            (f.lo & f.mask & w) | r
        }
    }
}

/// A header inside `rule` at a random corner (ClassBench's `random_corner`),
/// for a rule over a schema with the given field widths.
pub fn header_in_rule_with<R: Rng>(rule: &Rule, widths: &[u8; MAX_FIELDS], rng: &mut R) -> Key {
    let mut k = [0u32; MAX_FIELDS];
    for i in 0..MAX_FIELDS {
        k[i] = point(&rule.fields[i], widths[i], true, rng);
    }
    Key(k)
}

/// A 5-tuple header inside a ClassBench rule at a random corner.
pub fn header_in_rule<R: Rng>(rule: &Rule, rng: &mut R) -> Key {
    header_in_rule_with(rule, &[32, 32, 16, 16, 8, 0, 0, 0], rng)
}

/// The flags word of a header from a rule's flags at a random corner.
fn flags_in_rule<R: Rng>(rule: &Rule, rng: &mut R) -> u32 {
    match rule.flags {
        Some(f) => {
            let v = (f.value & f.mask) as u32;
            if rng.gen::<bool>() { v | !(f.mask as u32) } else { v }
        }
        None => 0,
    }
}

/// A trace of exactly `packets` headers (the last burst is cut short).
/// Deterministic for a given `seed`. An empty rule set gives no headers.
pub fn generate(set: &RuleSet, packets: usize, pareto: Pareto, seed: u64) -> Vec<TraceEntry> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut out = Vec::with_capacity(packets);
    if set.is_empty() {
        return out;
    }
    let w = widths(set);
    while out.len() < packets {
        let i = rng.gen_range(0..set.len());
        let r = &set.rules[i];
        let key = header_in_rule_with(r, &w, &mut rng);
        let flags = flags_in_rule(r, &mut rng);
        let n = pareto.copies(&mut rng).min((packets - out.len()) as u64);
        let e = TraceEntry { key, flags, rule: Some(i as u32) };
        out.extend(std::iter::repeat_n(e, n as usize));
    }
    out
}

/// `n` flow keys with the rule each was drawn from: a rule is picked
/// uniformly and gives a Pareto-distributed number of flows (ClassBench's
/// burst skew, `a=1, b=0.1`), each a uniform point inside the rule.
/// Keys are distinct unless the rules cannot hold `n` distinct keys.
pub fn flow_keys(set: &RuleSet, n: usize, seed: u64) -> Vec<(Key, u32)> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut out = Vec::with_capacity(n);
    if set.is_empty() {
        return out;
    }
    let w = widths(set);
    let pareto = Pareto::default();
    let mut seen = HashSet::with_capacity(n);
    let mut misses = 0usize;
    while out.len() < n {
        let i = rng.gen_range(0..set.len());
        let r = &set.rules[i];
        let burst = pareto.copies(&mut rng).min((n - out.len()) as u64);
        for _ in 0..burst {
            let mut k = [0u32; MAX_FIELDS];
            for f in 0..MAX_FIELDS {
                k[f] = point(&r.fields[f], w[f], false, &mut rng);
            }
            let key = Key(k);
            // Give up on distinctness only after many collisions in a row.
            if seen.insert(key) || misses > 64 + 4 * n {
                out.push((key, i as u32));
            } else {
                misses += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{linear::Linear, Classifier};
    use crate::workload::{rulegen, seed::Params};

    #[test]
    fn every_header_matches_its_rule_or_an_earlier_one() {
        let set = rulegen::generate(&Params::builtin("ipc").unwrap(), 1000, 4);
        let trace = generate(&set, 5000, Pareto::default(), 9);
        assert_eq!(trace.len(), 5000);
        let lin = Linear::new(&set);
        for e in &trace {
            let r = e.rule.unwrap() as usize;
            assert!(set.rules[r].matches(&e.key));
            assert!(lin.classify(&e.key).unwrap() as usize <= r);
        }
        assert_eq!(trace, generate(&set, 5000, Pareto::default(), 9));
    }

    #[test]
    fn headers_are_rule_corners() {
        let set = rulegen::generate(&Params::builtin("acl").unwrap(), 200, 1);
        let trace = generate(&set, 2000, Pareto { a: 1.0, b: 0.0 }, 2);
        for e in &trace {
            let r = &set.rules[e.rule.unwrap() as usize];
            for (i, bits) in [32u8, 32, 16, 16, 8].iter().enumerate() {
                let (lo, hi) = r.fields[i].as_range(*bits).unwrap();
                assert!(e.key.0[i] == lo || e.key.0[i] == hi);
            }
        }
    }

    #[test]
    fn pareto_bursts_follow_the_cdf() {
        // P(copies > x) = (b/x)^a for x >= b; with a=1, b=1: P(>1) = 1/2... ceil shifts it:
        // copies = ceil(1/u) > k  <=>  u < 1/k, so P(copies > k) = 1/k.
        let p = Pareto { a: 1.0, b: 1.0 };
        let mut rng = Pcg64::seed_from_u64(5);
        let n = 200_000;
        let c: Vec<u64> = (0..n).map(|_| p.copies(&mut rng)).collect();
        for k in [1u64, 2, 4, 10] {
            let share = c.iter().filter(|&&x| x > k).count() as f64 / n as f64;
            assert!((share - 1.0 / k as f64).abs() < 0.01, "P(>{k}) = {share}");
        }
        let none = Pareto { a: 1.0, b: 0.0 };
        assert_eq!(none.copies(&mut rng), 1);
        assert!(Pareto::new(0.0, 0.5).is_err() && Pareto::new(1.0, 1.5).is_err());
    }

    #[test]
    fn flow_keys_are_distinct_and_inside_their_rules() {
        let set = rulegen::generate(&Params::builtin("fw").unwrap(), 500, 3);
        let keys = flow_keys(&set, 10_000, 1);
        assert_eq!(keys.len(), 10_000);
        let distinct: HashSet<Key> = keys.iter().map(|k| k.0).collect();
        assert_eq!(distinct.len(), 10_000);
        for (k, r) in &keys {
            assert!(set.rules[*r as usize].matches(k));
        }
        assert_eq!(keys, flow_keys(&set, 10_000, 1));
    }
}

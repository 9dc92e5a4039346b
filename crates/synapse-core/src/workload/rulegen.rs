//! Synthetic filter sets in the manner of ClassBench's `db_generator`
//! (Taylor & Turner, ClassBench technical report WUCSE-2004-28, §5), driven
//! by a seed file ([`Params`]): the built-in `acl`, `fw` and `ipc` types use
//! ClassBench's acl1, fw1 and ipc1 seeds.
//!
//! Per filter, as db_generator does: a protocol from `-prots`, its flags from
//! `-flags`, a port-pair class from that protocol's distribution, the ports
//! of that class (WC, HI, LO, or drawn from `-spar`/`-dpar`/`-spem`/`-dpem`),
//! and a prefix-length pair from the class's joint distribution (total
//! length, then source length given the total). Then the addresses: the
//! source prefixes are laid out as a binary trie whose shape follows
//! `-sskew` (one or two children per level, and how unevenly two children
//! split the filters) under the nesting limit `-snest`; destination prefixes
//! follow their filter's source path while `-pcorr` says the two stay
//! correlated, and otherwise a trie shaped by `-dskew`/`-dnest`. This is
//! what makes generated filters share prefixes the way real ones do.
//!
//! As with db_generator's `-b` switch, a set larger than the seed's
//! `-scale` gets its address tries widened ([`scale_skew`]), though in
//! proportion to the size rather than exponentially (see [`generate`]).
//! Prefix-length smoothing is optional ([`generate_smoothed`]); there is no
//! scope bias (db_generator's scope parameters at 0). Where db_generator
//! returns fewer filters than asked after removing duplicates, we draw a
//! larger batch so that the count is exact whenever the seed can make that
//! many distinct filters. Filters are finally ordered from most to least
//! specific, so no filter comes after one that contains it (db_generator
//! orders nested filters too).

use super::seed::{Params, PortClass, PortRange, Skew, PPC};
use crate::rules::{FieldMatch, Flags, Rule, RuleSet, Schema};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use std::collections::HashSet;

/// Picks an index with probability proportional to `weights`; `None` when
/// no weight is positive.
pub(crate) fn pick<R: Rng>(rng: &mut R, weights: impl Iterator<Item = f64> + Clone) -> Option<usize> {
    let total: f64 = weights.clone().filter(|w| *w > 0.0).sum();
    if total <= 0.0 {
        return None;
    }
    let mut u = rng.gen::<f64>() * total;
    let mut last = None;
    for (i, w) in weights.enumerate() {
        if w <= 0.0 {
            continue;
        }
        last = Some(i);
        if u < w {
            return Some(i);
        }
        u -= w;
    }
    last
}

/// A filter being built: its application part first, addresses later.
#[derive(Clone, Copy, Debug)]
struct Spec {
    proto: u8,
    flags: Option<Flags>,
    sp: (u16, u16),
    dp: (u16, u16),
    slen: u8,
    dlen: u8,
    sa: u32,
    da: u32,
}

fn ports<R: Rng>(rng: &mut R, class: PortClass, ar: &[PortRange], em: &[PortRange]) -> (u16, u16) {
    let from = |rng: &mut R, list: &[PortRange]| {
        let i = pick(rng, list.iter().map(|r| r.prob)).expect("checked when the seed was parsed");
        (list[i].lo, list[i].hi)
    };
    match class {
        PortClass::Wc => (0, 65535),
        PortClass::Hi => (1024, 65535),
        PortClass::Lo => (0, 1023),
        PortClass::Ar => from(rng, ar),
        PortClass::Em => from(rng, em),
    }
}

/// db_generator's smoothing (its `smoothness` parameter, 0..64): each
/// spike of the prefix-length distribution spreads binomially, the total
/// length by `Binomial(2r, 1/2) - r` and the source length by
/// `Binomial(2 floor(r/2), 1/2) - floor(r/2)` plus its share of the change
/// in total. Applied per draw rather than to the table; 0 keeps the seed's
/// spikes exactly.
fn smooth<R: Rng>(rng: &mut R, slen: u8, total: u8, r: u32) -> (u8, u8) {
    if r == 0 {
        return (slen, total - slen);
    }
    let mut bin = |n: u32| (0..n).filter(|_| rng.gen::<bool>()).count() as i32;
    let t2 = (total as i32 + bin(2 * r) - r as i32).clamp(0, 64);
    let dt = t2 - total as i32;
    let k = (r / 2) as i32;
    let s2 = slen as i32 + bin(dt.unsigned_abs()) * dt.signum() + bin(2 * k as u32) - k;
    let s2 = s2.clamp((t2 - 32).max(0), t2.min(32));
    (s2 as u8, (t2 - s2) as u8)
}

fn application<R: Rng>(p: &Params, smoothness: u32, rng: &mut R) -> Spec {
    let pi = pick(rng, p.prots.iter().map(|x| x.prob)).expect("checked when the seed was parsed");
    let prot = &p.prots[pi];
    let flags = if p.flags.is_empty() {
        None
    } else {
        Some(match p.flags.iter().find(|(proto, _)| *proto == prot.proto) {
            Some((_, list)) => list[pick(rng, list.iter().map(|x| x.1)).unwrap_or(0)].0,
            None => Flags { value: 0, mask: 0 },
        })
    };
    let k = pick(rng, prot.ppc.iter().copied()).expect("checked when the seed was parsed");
    let (sc, dc) = PPC[k];
    let sp = ports(rng, sc, &p.spar, &p.spem);
    let dp = ports(rng, dc, &p.dpar, &p.dpem);
    let lens = &p.prefix[k];
    let t = &lens[pick(rng, lens.iter().map(|t| t.prob)).expect("checked when the seed was parsed")];
    let slen = t.src[pick(rng, t.src.iter().map(|s| s.1)).expect("checked when the seed was parsed")].0;
    let (slen, dlen) = smooth(rng, slen, t.total, smoothness);
    Spec { proto: prot.proto, flags, sp, dp, slen, dlen, sa: 0, da: 0 }
}

/// Address of the child `bit` of the trie node at `lev` whose address is `addr`.
fn child(addr: u32, lev: u8, bit: u32) -> u32 {
    addr | (bit << (31 - lev as u32))
}

/// How a trie node passes its unassigned filters to its children
/// (db_generator's `add_node` / `finish_node`): returns the lists for
/// child 0 and child 1. `heavy` is the child that gets the larger share.
#[allow(clippy::too_many_arguments)]
fn split<R: Rng>(
    rng: &mut R,
    list: Vec<usize>,
    len: &dyn Fn(usize) -> u8,
    lev: u8,
    at_nest_limit: bool,
    heavy: u32,
    skew: Skew,
) -> [Vec<usize>; 2] {
    let mut out = [Vec::new(), Vec::new()];
    let lev1 = lev + 1;
    let h = heavy as usize;
    if list.len() > 1 && at_nest_limit && lev < 31 && list.iter().any(|&q| len(q) == lev1) {
        // At the nesting limit: the prefixes ending at the next level all
        // go to one side so that no path gains another nested prefix.
        let (nest, other): (Vec<usize>, Vec<usize>) = list.into_iter().partition(|&q| len(q) == lev1);
        if nest.len() > other.len() {
            out[h] = nest;
            out[1 - h] = other;
        } else {
            out[1 - h] = nest;
            out[h] = other;
        }
    } else if list.len() == 1 || rng.gen::<f64>() < skew.p_one {
        out[h] = list;
    } else {
        // Two children: the heavy one holds n / (2 - skew) filters.
        let n = list.len();
        let hvy = ((n as f64) / (2.0 - skew.skew)).floor() as usize;
        let lite = n - hvy.min(n);
        let mut list = list;
        let rest = list.split_off(lite);
        out[1 - h] = list;
        out[h] = rest;
    }
    out
}

struct Trees<'a, R: Rng> {
    rng: &'a mut R,
    p: &'a Params,
    specs: &'a mut [Spec],
}

impl<R: Rng> Trees<'_, R> {
    /// Source trie (db_generator's `sbintree::add_node`).
    fn source(&mut self, lev: u8, addr: u32, list: Vec<usize>, nest: u32) {
        let mut rest = Vec::with_capacity(list.len());
        let mut placed = false;
        for q in list {
            if self.specs[q].slen == lev {
                self.specs[q].sa = addr;
                placed = true;
            } else {
                rest.push(q);
            }
        }
        if rest.is_empty() || lev >= 32 {
            return;
        }
        let nest = nest + placed as u32;
        let heavy = self.rng.gen_range(0..2u32);
        let specs = &*self.specs;
        let len = |q: usize| specs[q].slen;
        let at_limit = nest + 1 >= self.p.snest;
        let [l0, l1] = split(self.rng, rest, &len, lev, at_limit, heavy, self.p.sskew[lev as usize]);
        for (bit, l) in [(0, l0), (1, l1)] {
            if !l.is_empty() {
                self.source(lev + 1, child(addr, lev, bit), l, nest);
            }
        }
    }

    /// Destination trie (after db_generator's `dbintree`): `corr` filters
    /// still follow their source address; `free` ones are spread by the
    /// destination skew.
    fn dest(&mut self, lev: u8, addr: u32, corr: Vec<usize>, free: Vec<usize>, nest: u32) {
        let mut placed = false;
        let mut keep = |v: Vec<usize>, specs: &mut [Spec]| {
            v.into_iter()
                .filter(|&q| {
                    let done = specs[q].dlen == lev;
                    if done {
                        specs[q].da = addr;
                        placed = true;
                    }
                    !done
                })
                .collect::<Vec<_>>()
        };
        let corr = keep(corr, self.specs);
        let mut free = keep(free, self.specs);
        if (corr.is_empty() && free.is_empty()) || lev >= 32 {
            return;
        }
        let nest = nest + placed as u32;
        let lev1 = lev + 1;
        let at_limit = nest + 1 >= self.p.dnest;
        let ends_next = corr.iter().chain(free.iter()).any(|&q| self.specs[q].dlen == lev1);
        let mut next_corr = [Vec::new(), Vec::new()];
        let mut stub = [Vec::new(), Vec::new()];
        if at_limit && ends_next && corr.len() + free.len() > 1 && lev < 31 {
            // Nesting limit: stop following the source here.
            free.extend(corr);
        } else {
            for q in corr {
                let s = self.specs[q];
                if s.slen <= lev {
                    free.push(q); // source prefix exhausted
                    continue;
                }
                let bit = (s.sa >> (31 - lev as u32)) & 1;
                if s.slen > lev1 && self.rng.gen::<f64>() <= self.p.pcorr[lev1 as usize] {
                    next_corr[bit as usize].push(q);
                } else {
                    // Correlation breaks: take the other branch.
                    stub[1 - bit as usize].push(q);
                }
            }
        }
        let w0 = next_corr[0].len() + stub[0].len();
        let w1 = next_corr[1].len() + stub[1].len();
        let heavy = match w0.cmp(&w1) {
            std::cmp::Ordering::Greater => 0,
            std::cmp::Ordering::Less => 1,
            std::cmp::Ordering::Equal => self.rng.gen_range(0..2u32),
        };
        let spread = if free.is_empty() {
            [Vec::new(), Vec::new()]
        } else {
            let specs = &*self.specs;
            let len = |q: usize| specs[q].dlen;
            split(self.rng, free, &len, lev, at_limit, heavy, self.p.dskew[lev as usize])
        };
        let [c0, c1] = next_corr;
        let [s0, s1] = stub;
        let [f0, f1] = spread;
        for (bit, c, mut f, s) in [(0, c0, f0, s0), (1, c1, f1, s1)] {
            f.extend(s);
            if !c.is_empty() || !f.is_empty() {
                self.dest(lev1, child(addr, lev, bit), c, f, nest);
            }
        }
    }
}

fn to_rule(s: &Spec) -> Rule {
    let proto = if s.proto == 0 { FieldMatch::ternary(0, 0) } else { FieldMatch::ternary(s.proto as u32, 0xff) };
    let mut r = Rule::new(
        &[
            FieldMatch::prefix(s.sa, s.slen, 32),
            FieldMatch::prefix(s.da, s.dlen, 32),
            FieldMatch::range(s.sp.0 as u32, s.sp.1 as u32),
            FieldMatch::range(s.dp.0 as u32, s.dp.1 as u32),
            proto,
        ],
        0,
        0,
    );
    r.flags = s.flags;
    r
}

/// Widens the top of an address trie for a set `factor` times larger than
/// the seed's (db_generator's `-b` switch, `scale_skew`): levels from the
/// root down are made fully two-way and unskewed until the factor is spent,
/// so a large set spreads over more address space instead of piling up
/// duplicates under the seed's few paths.
fn scale_skew(skew: &mut [Skew; 33], factor: f64) {
    let mut target = factor;
    for s in skew.iter_mut().take(32) {
        if target <= 0.0 {
            return;
        }
        let node = 2.0 * ((1.0 - s.p_two) + s.skew * s.p_two);
        if node <= target {
            target -= node;
            *s = Skew { p_one: 0.0, p_two: 1.0, skew: 0.0 };
        } else if node - 2.0 * s.skew > target {
            let p2 = ((node - target) / 2.0 - 1.0) / (s.skew - 1.0);
            *s = Skew { p_one: 1.0 - p2, p_two: p2, skew: s.skew };
            return;
        } else {
            *s = Skew { p_one: 0.0, p_two: 1.0, skew: (2.0 * s.skew - target) / 2.0 };
            return;
        }
    }
}

/// One batch of `n` filters: applications, then both address tries.
fn batch<R: Rng>(p: &Params, n: usize, smoothness: u32, rng: &mut R) -> Vec<Spec> {
    let mut specs: Vec<Spec> = (0..n).map(|_| application(p, smoothness, rng)).collect();
    let all: Vec<usize> = (0..n).collect();
    let mut t = Trees { rng, p, specs: &mut specs };
    t.source(0, 0, all.clone(), 0);
    t.dest(0, 0, all, Vec::new(), 0);
    specs
}

/// How specific a rule is, most specific first: longer prefixes, then
/// narrower port ranges, then a specified protocol. A rule that contains
/// another always sorts after it.
fn specificity(r: &Rule) -> (std::cmp::Reverse<u32>, u32, u32, std::cmp::Reverse<u32>) {
    let plen = |f: &FieldMatch| f.prefix_len(32).unwrap_or(32) as u32;
    let width = |f: &FieldMatch| f.hi - f.lo;
    (
        std::cmp::Reverse(plen(&r.fields[0]) + plen(&r.fields[1])),
        width(&r.fields[2]),
        width(&r.fields[3]),
        std::cmp::Reverse(r.fields[4].mask),
    )
}

/// Generates `count` distinct filters from a seed's parameters;
/// deterministic for a given `seed`. Returns fewer only when the seed
/// cannot make `count` distinct filters.
pub fn generate(p: &Params, count: usize, seed: u64) -> RuleSet {
    generate_smoothed(p, count, seed, 0)
}

/// [`generate`] with db_generator's prefix-length smoothing `smoothness`
/// (0..=64; ClassBench's published sets used small values such as 2).
pub fn generate_smoothed(p: &Params, count: usize, seed: u64, smoothness: u32) -> RuleSet {
    let smoothness = smoothness.min(64);
    let scaled;
    let mut p = p;
    if count as f64 > p.scale as f64 && p.scale > 0 {
        let mut q = p.clone();
        // db_generator spends `count / scale` here, which spreads the trie
        // exponentially in the set size (a 100K acl set would share no
        // prefixes); we spend 2 log2 of it, which balances log2(factor)
        // levels: a set `factor` times larger gets about `factor` times the
        // leaves, and keeps the seed's sharing below them.
        let factor = 2.0 * (count as f64 / p.scale as f64).log2();
        scale_skew(&mut q.sskew, factor);
        scale_skew(&mut q.dskew, factor);
        scaled = q;
        p = &scaled;
    }
    let mut rng = Pcg64::seed_from_u64(seed);
    // All rules come from one batch, so they share one pair of tries and
    // its nesting limits hold. When removing duplicates leaves too few, the
    // batch is drawn again, larger, and the first `count` distinct rules
    // (in drawing order) are kept; dropping rules never deepens nesting.
    let mut draw = count;
    let mut rules: Vec<Rule> = Vec::new();
    for _ in 0..8 {
        let mut seen: HashSet<[FieldMatch; 5]> = HashSet::with_capacity(draw);
        let mut got = Vec::with_capacity(count);
        let mut distinct = 0usize;
        for s in batch(p, draw, smoothness, &mut rng) {
            let r = to_rule(&s);
            if seen.insert(r.fields[..5].try_into().unwrap()) {
                distinct += 1;
                if got.len() < count {
                    got.push(r);
                }
            }
        }
        if got.len() > rules.len() {
            rules = got;
        }
        if rules.len() >= count || distinct == 0 {
            break;
        }
        draw = ((draw as f64) * (count as f64 / distinct as f64) * 1.05).ceil() as usize + 1;
    }
    rules.sort_by_key(specificity);
    let n = rules.len() as u32;
    for (i, r) in rules.iter_mut().enumerate() {
        r.priority = n - i as u32;
        r.action = i as u32;
    }
    RuleSet::new(Schema::five_tuple(), rules)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::classbench::{format_rules, parse_rules};

    #[test]
    fn deterministic_exact_count_and_no_duplicates() {
        let p = Params::builtin("acl").unwrap();
        let a = format_rules(&generate(&p, 2000, 7)).unwrap();
        assert_eq!(a, format_rules(&generate(&p, 2000, 7)).unwrap());
        assert_ne!(a, format_rules(&generate(&p, 2000, 8)).unwrap());
        let set = parse_rules(&a, "gen").unwrap();
        assert_eq!(set.len(), 2000);
        let distinct: HashSet<_> = set.rules.iter().map(|r| r.fields).collect();
        assert_eq!(distinct.len(), 2000);
    }

    #[test]
    fn prefix_lengths_come_from_the_ppc_distribution() {
        // Every generated (class, slen, dlen) must be one the seed allows.
        for kind in ["acl", "fw", "ipc"] {
            let p = Params::builtin(kind).unwrap();
            let set = generate(&p, 3000, 1);
            for r in &set.rules {
                let s = r.fields[0].prefix_len(32).unwrap();
                let d = r.fields[1].prefix_len(32).unwrap();
                let (sp, dp) = (r.fields[2], r.fields[3]);
                let cls = (PortClass::of(sp.lo, sp.hi), PortClass::of(dp.lo, dp.hi));
                let ok = PPC.iter().enumerate().filter(|(_, c)| **c == cls).any(|(k, _)| {
                    p.prefix[k].iter().any(|t| t.total == s + d && t.src.iter().any(|x| x.0 == s && x.1 > 0.0))
                });
                assert!(ok, "{kind}: {s}/{d} not allowed for {cls:?}");
            }
        }
    }

    #[test]
    fn nested_rules_come_first() {
        let set = generate(&Params::builtin("fw").unwrap(), 1500, 3);
        let contains = |a: &Rule, b: &Rule| {
            (0..5).all(|i| {
                let (x, y) = (a.fields[i].as_range(if i < 2 { 32 } else if i < 4 { 16 } else { 8 }), b.fields[i].as_range(if i < 2 { 32 } else if i < 4 { 16 } else { 8 }));
                let (x, y) = (x.unwrap(), y.unwrap());
                x.0 <= y.0 && y.1 <= x.1
            })
        };
        for i in (0..set.len()).step_by(7) {
            for j in i + 1..set.len() {
                assert!(!contains(&set.rules[i], &set.rules[j]), "rule {i} contains later rule {j}");
            }
        }
    }

    #[test]
    fn smoothing_spreads_prefix_lengths_around_the_spikes() {
        let p = Params::builtin("acl").unwrap();
        let pairs = |set: &RuleSet| {
            let v: Vec<(u8, u8)> = set.rules.iter().map(|r| (r.fields[0].prefix_len(32).unwrap(), r.fields[1].prefix_len(32).unwrap())).collect();
            let mean = v.iter().map(|&(a, b)| (a + b) as f64).sum::<f64>() / v.len() as f64;
            (v.into_iter().collect::<HashSet<_>>().len(), mean)
        };
        assert_eq!(generate_smoothed(&p, 500, 1, 0), generate(&p, 500, 1));
        let (n0, m0) = pairs(&generate(&p, 4000, 1));
        let (n4, m4) = pairs(&generate_smoothed(&p, 4000, 1, 4));
        assert!(n4 > 2 * n0, "{n4} distinct pairs smoothed vs {n0}");
        assert!((m4 - m0).abs() < 3.0, "mean total length {m4} vs {m0}");
    }

    /// Most distinct prefixes of field `f` on one root-to-leaf path.
    fn max_nesting(set: &RuleSet, f: usize) -> usize {
        let ps: HashSet<(u32, u8)> = set.rules.iter().map(|r| (r.fields[f].lo, r.fields[f].prefix_len(32).unwrap())).collect();
        ps.iter()
            .map(|&(v, l)| (0..=l).filter(|&m| ps.contains(&(v & crate::rules::prefix_mask(m, 32), m))).count())
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn nesting_stays_within_the_seed_limits() {
        for kind in ["acl", "fw", "ipc"] {
            let p = Params::builtin(kind).unwrap();
            for (n, seed) in [(600, 1), (3000, 2)] {
                let set = generate(&p, n, seed);
                let (s, d) = (max_nesting(&set, 0), max_nesting(&set, 1));
                assert!(s <= p.snest as usize && d <= p.dnest as usize, "{kind} {n}: nesting {s}/{d}");
                assert!(s >= 2 && d >= 2, "{kind} {n}: no nesting at all ({s}/{d})");
            }
        }
    }

    #[test]
    fn addresses_share_prefixes() {
        // The trie makes rules share address prefixes: far fewer distinct
        // /8s than rules with a source prefix of at least 8 bits.
        let set = generate(&Params::builtin("acl").unwrap(), 5000, 2);
        let long: Vec<u32> = set.rules.iter().filter(|r| r.fields[0].prefix_len(32).unwrap() >= 8).map(|r| r.fields[0].lo >> 24).collect();
        let distinct: HashSet<u32> = long.iter().copied().collect();
        assert!(long.len() > 1000 && distinct.len() * 20 < long.len(), "{} /8s for {} rules", distinct.len(), long.len());
    }
}

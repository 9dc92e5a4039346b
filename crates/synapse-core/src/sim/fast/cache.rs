//! The PMUs' caches in miniature: one LRU per PMU holding `R·B` of the
//! sampled keys (SHARDS' miniature simulation, Waldspurger et al., ATC '17:
//! a cache fed with the keys a spatial hash samples at rate R behaves as
//! the full cache of B entries fed with every key). Same semantics as the
//! CAM (`hw::cam`): a lookup that hits makes the key the most recent; a miss
//! changes nothing until the fill, which inserts the key as the most recent
//! entry (evicting the least recent when full) when the ELU's answer comes
//! back.
//!
//! Large flows are kept here lazily: their hits are not looked up one by
//! one. Each entry carries the stamp of its last touch (a lookup or fill,
//! in processing order); a key whose later touches were not looked up
//! (a large flow's hits, `fast::Elephants`) has a stamp older than its
//! true one. Only the eviction needs the true order: before the least
//! recent entry is evicted, the caller is asked for its true stamp and,
//! when it is later, the entry moves to its place by stamp (walking from
//! the most recent end: a large flow was touched recently) and the next
//! least recent is asked. The cache evicts exactly what an LRU fed with
//! every touch would (the `lazy_touches_evict_as_every_touch` test).

const NIL: u32 = u32::MAX;

/// The miniature caches of one table's PMUs, over the table's key ids.
pub(super) struct MiniCaches {
    prev: Vec<u32>,
    next: Vec<u32>,
    inside: Vec<bool>,
    head: Vec<u32>,
    tail: Vec<u32>,
    len: Vec<u32>,
    cap: u32,
    /// Per key: the stamp of its last touch as the cache saw it.
    stamp: Vec<u128>,
}

impl MiniCaches {
    pub(super) fn new(keys: usize, pmus: usize, cap: u32) -> MiniCaches {
        MiniCaches {
            prev: vec![NIL; keys],
            next: vec![NIL; keys],
            inside: vec![false; keys],
            head: vec![NIL; pmus],
            tail: vec![NIL; pmus],
            len: vec![0; pmus],
            cap,
            stamp: vec![0; keys],
        }
    }

    fn unlink(&mut self, p: usize, k: u32) {
        let (pr, nx) = (self.prev[k as usize], self.next[k as usize]);
        if pr == NIL { self.head[p] = nx } else { self.next[pr as usize] = nx }
        if nx == NIL { self.tail[p] = pr } else { self.prev[nx as usize] = pr }
    }

    fn push_front(&mut self, p: usize, k: u32) {
        self.prev[k as usize] = NIL;
        self.next[k as usize] = self.head[p];
        if self.head[p] != NIL {
            self.prev[self.head[p] as usize] = k;
        }
        self.head[p] = k;
        if self.tail[p] == NIL {
            self.tail[p] = k;
        }
    }

    /// A CAM search of key `k` in PMU `p` at stamp `now` (stamps rise
    /// from call to call): a hit becomes the most recent.
    #[inline]
    pub(super) fn lookup(&mut self, p: usize, k: u32, now: u128) -> bool {
        if !self.inside[k as usize] {
            return false;
        }
        self.stamp[k as usize] = now;
        if self.head[p] != k {
            self.unlink(p, k);
            self.push_front(p, k);
        }
        true
    }

    /// Whether key `k` is cached.
    #[cfg(test)]
    pub(super) fn holds(&self, k: u32) -> bool {
        self.inside[k as usize]
    }

    /// The ELU's answer for key `k` fills PMU `p` at stamp `now`. Before
    /// evicting, `touched(v)` gives the true last touch of the least recent
    /// entry `v` when it is later than the cache knows (a lazy key), and
    /// the entry moves to its place. Returns the evicted key.
    pub(super) fn fill(&mut self, p: usize, k: u32, now: u128, touched: &mut dyn FnMut(u32) -> Option<u128>) -> Option<u32> {
        if self.cap == 0 {
            return None;
        }
        if self.inside[k as usize] {
            self.stamp[k as usize] = now;
            if self.head[p] != k {
                self.unlink(p, k);
                self.push_front(p, k);
            }
            return None;
        }
        let mut evicted = None;
        if self.len[p] >= self.cap {
            loop {
                let v = self.tail[p];
                match touched(v) {
                    Some(s) if s > self.stamp[v as usize] => {
                        self.stamp[v as usize] = s;
                        self.unlink(p, v);
                        self.insert_by_stamp(p, v);
                    }
                    _ => break,
                }
            }
            let v = self.tail[p];
            self.unlink(p, v);
            self.inside[v as usize] = false;
            self.len[p] -= 1;
            evicted = Some(v);
        }
        self.inside[k as usize] = true;
        self.stamp[k as usize] = now;
        self.len[p] += 1;
        self.push_front(p, k);
        evicted
    }

    /// Puts unlinked key `k` before the first entry (from the most recent)
    /// with an older stamp.
    fn insert_by_stamp(&mut self, p: usize, k: u32) {
        let s = self.stamp[k as usize];
        let mut at = self.head[p];
        while at != NIL && self.stamp[at as usize] > s {
            at = self.next[at as usize];
        }
        if at == NIL {
            // The oldest: the new tail.
            let t = self.tail[p];
            self.prev[k as usize] = t;
            self.next[k as usize] = NIL;
            if t == NIL { self.head[p] = k } else { self.next[t as usize] = k }
            self.tail[p] = k;
            return;
        }
        let pr = self.prev[at as usize];
        self.prev[k as usize] = pr;
        self.next[k as usize] = at;
        self.prev[at as usize] = k;
        if pr == NIL { self.head[p] = k } else { self.next[pr as usize] = k }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::cam::{Cam, Lookup};
    use crate::rules::Key;
    use rand::{Rng, SeedableRng};

    /// The same lookups and fills as the CAM model, the same answers.
    #[test]
    fn behaves_as_the_cam() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(1);
        let mut m = MiniCaches::new(500, 2, 37);
        let mut cams: Vec<Cam<8>> = (0..2).map(|_| Cam::new(37)).collect();
        for _ in 0..100_000 {
            let p = rng.gen_range(0..2);
            // Keys of PMU p: p, p+2, ...
            let k = rng.gen_range(0..250) * 2 + p as u32;
            let key = Key([k, 0, 0, 0, 0, 0, 0, 0]);
            if rng.gen_bool(0.7) {
                let want = matches!(cams[p].lookup(&key).0, Lookup::Hit { .. });
                assert_eq!(m.lookup(p, k, 0), want);
            } else {
                cams[p].insert(key, Some(1));
                m.fill(p, k, 0, &mut |_| None);
            }
        }
    }

    /// A stream of lookups and fills, where the hot keys' hits are not
    /// looked up but only reported when the cache asks (`touched`), evicts
    /// and answers exactly as a cache given every lookup.
    #[test]
    fn lazy_touches_evict_as_every_touch() {
        for seed in 0..20u64 {
            let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
            let (keys, cap, hot) = (300u32, 24u32, 6u32);
            let mut full = MiniCaches::new(keys as usize, 1, cap);
            let mut lazy = MiniCaches::new(keys as usize, 1, cap);
            // Per hot key: the stamps of the hits the lazy cache skipped.
            let mut skipped: Vec<Vec<u128>> = vec![Vec::new(); hot as usize];
            for step in 1..20_000u128 {
                // Hot keys (0..hot) are most of the references.
                let k = if rng.gen_bool(0.6) { rng.gen_range(0..hot) } else { rng.gen_range(0..keys) };
                if rng.gen_bool(0.8) {
                    let want = full.lookup(0, k, step);
                    if k < hot && lazy.holds(k) {
                        skipped[k as usize].push(step);
                        assert!(want, "seed {seed} step {step}: a lazy hit the full cache misses");
                    } else {
                        assert_eq!(lazy.lookup(0, k, step), want, "seed {seed} step {step}");
                    }
                } else {
                    let a = full.fill(0, k, step, &mut |_| None);
                    let b = lazy.fill(0, k, step, &mut |v| if v < hot { skipped[v as usize].last().copied() } else { None });
                    assert_eq!(a, b, "seed {seed} step {step}: evicted");
                    if let Some(v) = b.filter(|&v| v < hot) {
                        skipped[v as usize].clear();
                    }
                }
            }
        }
    }
}

//! The PMUs' caches in miniature: one LRU per PMU holding `R·B` of the
//! sampled keys (SHARDS' miniature simulation, Waldspurger et al., ATC '17:
//! a cache fed with the keys a spatial hash samples at rate R behaves as
//! the full cache of B entries fed with every key). Same semantics as the
//! CAM (`hw::cam`): a lookup that hits makes the key the most recent; a miss
//! changes nothing until the fill, which inserts the key as the most recent
//! entry (evicting the least recent when full) when the ELU's answer comes
//! back.

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

    /// A CAM search of key `k` in PMU `p`: a hit becomes the most recent.
    #[inline]
    pub(super) fn lookup(&mut self, p: usize, k: u32) -> bool {
        if !self.inside[k as usize] {
            return false;
        }
        if self.head[p] != k {
            self.unlink(p, k);
            self.push_front(p, k);
        }
        true
    }

    /// The ELU's answer for key `k` fills PMU `p`.
    pub(super) fn fill(&mut self, p: usize, k: u32) {
        if self.cap == 0 {
            return;
        }
        if self.inside[k as usize] {
            if self.head[p] != k {
                self.unlink(p, k);
                self.push_front(p, k);
            }
            return;
        }
        if self.len[p] >= self.cap {
            let v = self.tail[p];
            self.unlink(p, v);
            self.inside[v as usize] = false;
            self.len[p] -= 1;
        }
        self.inside[k as usize] = true;
        self.len[p] += 1;
        self.push_front(p, k);
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
                assert_eq!(m.lookup(p, k), want);
            } else {
                cams[p].insert(key, Some(1));
                m.fill(p, k);
            }
        }
    }
}

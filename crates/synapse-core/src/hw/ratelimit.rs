//! Per-table miss-rate limit into the ELU: a defence against cache
//! flooding (paper §8), so that one flooded table cannot take the shared
//! ELU from the tables beside it.
//!
//! A token bucket per table in front of the PMU → ELU bus, kept as the
//! generic cell rate algorithm (GCRA, ITU-T I.371): each table has a
//! theoretical arrival time `tat`; a miss may cross at `now` when
//! `tat − (burst − 1) · interval ≤ now`, and then `tat = max(tat, now) + interval`.
//! That is a bucket of `burst` tokens refilled one per `interval` cycles.
//! A miss over the limit waits in its PMU's Q_m (the bus serves the other
//! PMUs meanwhile); the back-pressure reaches only its own table.

use super::Cycle;

/// The token buckets of every table.
#[derive(Clone, Debug)]
pub struct MissLimit {
    /// Cycles per token.
    interval: f64,
    /// How far `tat` may run ahead of now, cycles: `(burst − 1) · interval`.
    depth: f64,
    tat: Vec<f64>,
    /// Misses held back (per table), counted once per cycle they waited
    /// at the head of the bus's round robin.
    pub held: Vec<u64>,
}

impl MissLimit {
    /// `rate_mpps` misses per µs per table at a `clock_mhz` clock, `burst`
    /// at once.
    pub fn new(tables: usize, rate_mpps: f64, burst: u32, clock_mhz: f64) -> MissLimit {
        let interval = clock_mhz / rate_mpps;
        MissLimit {
            interval,
            depth: (burst.max(1) - 1) as f64 * interval,
            tat: vec![0.0; tables],
            held: vec![0; tables],
        }
    }

    /// Whether table `t` may send a miss at `now` (without taking a token).
    #[inline]
    pub fn allows(&self, t: usize, now: Cycle) -> bool {
        self.tat[t] - self.depth <= now as f64
    }

    /// Table `t` sends a miss at `now` (call after [`MissLimit::allows`]).
    #[inline]
    pub fn take(&mut self, t: usize, now: Cycle) {
        self.tat[t] = self.tat[t].max(now as f64) + self.interval;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 50 misses/µs at 250 MHz: one per 5 cycles, a burst of 2. At cycle
    /// 0 two go at once, the third waits for cycle 5 (4 is one cycle too
    /// early), and a table's tokens are its own.
    #[test]
    fn bucket_refills_one_token_per_interval() {
        let mut l = MissLimit::new(2, 50.0, 2, 250.0);
        assert!(l.allows(0, 0));
        l.take(0, 0);
        assert!(l.allows(0, 0));
        l.take(0, 0);
        assert!(!l.allows(0, 0));
        assert!(!l.allows(0, 4));
        assert!(l.allows(0, 5));
        assert!(l.allows(1, 0), "another table's bucket is full");
        l.take(0, 5);
        assert!(!l.allows(0, 9) && l.allows(0, 10));
        // Idle time refills up to the burst only.
        assert!(l.allows(0, 1000));
        l.take(0, 1000);
        l.take(0, 1000);
        assert!(!l.allows(0, 1000));
    }

    /// Over a long run with a miss offered every cycle, the rate sent is
    /// the limit.
    #[test]
    fn long_run_rate_is_the_limit() {
        let mut l = MissLimit::new(1, 10.0, 4, 250.0);
        let sent = (0..250_000u64).filter(|&c| {
            let ok = l.allows(0, c);
            if ok {
                l.take(0, c);
            }
            ok
        }).count();
        // 1 ms at 10 misses/µs: 10,000 (+ the first burst).
        assert!((10_000..=10_004).contains(&sent), "{sent}");
    }
}

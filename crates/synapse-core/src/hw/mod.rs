//! The hardware components of Synapse, one file each, after §4 of the paper:
//! [`cam`] (the PMU's fully associative cache), [`pmu`], [`vmu`], [`elu`],
//! [`hbm`] (off-chip memory) and [`interconnect`]. Each keeps its timing
//! parameters in one struct and the next cycle each port is free; time comes
//! in as an argument (`now: Cycle`). The simulator (`crate::sim`) wires them.

pub mod admit;
pub mod cam;
pub mod elu;
pub mod harness;
pub mod hbm;
pub mod interconnect;
pub mod pmu;
pub mod ratelimit;
pub mod fifo;
pub mod vmu;

/// A cycle of the pipeline clock (default 250 MHz, 4 ns).
pub type Cycle = u64;

/// `x.ceil().max(0.0) as Cycle`, without the libm call `ceil` compiles to
/// on the baseline x86-64 target (it was ~2% of simulator time when
/// converting every arrival and memory completion to cycles). Equal for
/// every x below 2^63, NaN and negatives included (both give 0).
#[inline]
pub fn ceil_cycles(x: f64) -> Cycle {
    let t = x as i64;
    let c = if (t as f64) < x { t + 1 } else { t };
    c.max(0) as Cycle
}

/// Conversions between picoseconds and cycles of a clock of `ps` ps, as
/// `(cycle as f64 * ps) as u64` and `ceil_cycles(t_ps as f64 / ps - 1e-9)`,
/// in integers when the period is a whole number of at most 1 µs (250 MHz:
/// 4,000 ps) and the cycle is below 2^32; the same values (see
/// `PsClock::ceil`), fewer instructions on the memory read path.
#[derive(Clone, Copy, Debug)]
pub struct PsClock {
    ps: f64,
    /// The period if it is a whole number of ps in 1..=1e6, else 0.
    int: u64,
}

impl PsClock {
    pub fn new(ps: f64) -> PsClock {
        let int = if ps >= 1.0 && ps <= 1e6 && ps.fract() == 0.0 { ps as u64 } else { 0 };
        PsClock { ps, int }
    }
    /// The period, ps.
    #[inline]
    pub fn ps(&self) -> f64 {
        self.ps
    }
    /// The start of cycle `c`, in ps.
    #[inline]
    pub fn to_ps(&self, c: Cycle) -> u64 {
        // c * int < 2^32 * 1e6 < 2^53: the float product is exact too.
        if self.int != 0 && c < 1 << 32 {
            return c * self.int;
        }
        // `as i64`: one instruction, the same value for times below 2^63 ps.
        (c as f64 * self.ps) as i64 as u64
    }
    /// The first cycle starting at or after `t_ps` (less 1e-9 cycle, which
    /// absorbs the float error of a time computed from cycles).
    ///
    /// The integer path is `ceil(t / P)`: with `t = kP + r`, `k < 2^32`, the
    /// float quotient is `k` exactly when `r = 0` (less 1e-9 it rounds to
    /// at most `k`, above `k - 1`) and otherwise at least `k + 1/P` less
    /// half an ulp (≤ 2^-22 below 2^32), which stays above `k` after the
    /// 1e-9 as `1/P ≥ 1e-6` exceeds an ulp plus 1e-9.
    #[inline]
    pub fn ceil(&self, t_ps: u64) -> Cycle {
        if self.int != 0 && t_ps >> 32 < self.int {
            return t_ps.div_ceil(self.int);
        }
        ceil_cycles((t_ps as f64 / self.ps) - 1e-9)
    }
}

/// A small, fast, deterministic hasher for keys in on-chip maps (the CAM's
/// key → slot index). Not a model of hardware; hardware compares in parallel.
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

impl std::hash::Hasher for FastHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // Eight bytes per step: a Key hashes as one byte slice, and a loop
        // per byte was a visible share of the simulator's time.
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.write_u64(u64::from_le_bytes(c.try_into().unwrap()));
        }
        for &b in chunks.remainder() {
            self.write_u64(b as u64);
        }
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64)
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64)
    }
}

pub type FastBuild = std::hash::BuildHasherDefault<FastHasher>;

#[cfg(test)]
mod tests {
    #[test]
    fn ps_clock_integer_paths_match_the_float_formulas() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(9);
        for mhz in [250.0, 200.0, 1.0, 1000.0, 300.0, 125.0, 322.265625, 0.5] {
            let ps = 1e6 / mhz;
            let c = super::PsClock::new(ps);
            let mut cycles: Vec<u64> = (0..2000u64).chain([(1 << 32) - 1, 1 << 32]).collect();
            cycles.extend((0..20_000).map(|_| rng.gen_range(0..1u64 << 34)));
            for k in cycles {
                assert_eq!(c.to_ps(k), (k as f64 * ps) as i64 as u64, "{mhz} {k}");
                let t = c.to_ps(k);
                for t in [t, t + 1, t.saturating_sub(1), t + rng.gen_range(0..(ps as u64).max(1) + 1)] {
                    let want = super::ceil_cycles((t as f64 / ps) - 1e-9);
                    assert_eq!(c.ceil(t), want, "{mhz} {t}");
                }
            }
        }
    }

    #[test]
    fn ceil_cycles_is_ceil() {
        let xs = [-1e-9, -0.5, -0.0, 0.0, 1e-9, 0.5, 1.0, 1.0 - 1e-12, 2.5, 1e15 + 0.5, 4.0e12 / 3.0, f64::NAN];
        for x in xs {
            assert_eq!(super::ceil_cycles(x), x.ceil().max(0.0) as u64, "{x}");
        }
        for i in 0..100_000u64 {
            let x = i as f64 * 1000.0 / 4000.0 - 1e-9;
            assert_eq!(super::ceil_cycles(x), x.ceil().max(0.0) as u64, "{x}");
        }
    }
}

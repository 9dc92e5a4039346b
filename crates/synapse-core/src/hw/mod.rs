//! The hardware components of Synapse, one file each, after §4 of the paper:
//! [`cam`] (the PMU's fully associative cache), [`pmu`], [`vmu`], [`elu`],
//! [`hbm`] (off-chip memory) and [`interconnect`]. Each keeps its timing
//! parameters in one struct and the next cycle each port is free; time comes
//! in as an argument (`now: Cycle`). The simulator (`crate::sim`) wires them.

pub mod cam;
pub mod elu;
pub mod harness;
pub mod hbm;
pub mod interconnect;
pub mod pmu;
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

//! The hardware components of Synapse, one file each, after §4 of the paper:
//! [`cam`] (the PMU's fully associative cache), [`pmu`], [`vmu`], [`elu`],
//! [`hbm`] (off-chip memory) and [`interconnect`]. Each keeps its timing
//! parameters in one struct and the next cycle each port is free; time comes
//! in as an argument (`now: Cycle`). The simulator (`crate::sim`) wires them.

pub mod cam;
pub mod elu;
pub mod hbm;
pub mod interconnect;
pub mod pmu;
pub mod vmu;

/// A cycle of the pipeline clock (default 250 MHz, 4 ns).
pub type Cycle = u64;

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

//! The two inner loops of [`super::partition::PTree`], each as a scalar
//! function and an AVX2 one (`std::arch`), chosen once at build time with
//! `is_x86_feature_detected!` so the same binary runs on any x86-64 (and
//! the scalar code everywhere else).
//!
//! * **Leaf block**: eight rules side by side (structure of arrays: one row of
//!   eight lower bounds and one of eight upper bounds per field, then a row
//!   of rule indices). A key is tested against all eight in one pass,
//!   branch-free; the answer is a bit per lane.
//! * **Node**: up to [`NODE_THRESHOLDS`] sorted thresholds on one field in
//!   one 64-byte line; the child is the number of thresholds below the key.

/// Rules per leaf block (one AVX2 register of 32-bit lanes).
pub const LANES: usize = 8;
/// Thresholds per node: 14, so a node's thresholds, child base and header
/// fill one 64-byte cache line (and one HBM burst).
pub const NODE_THRESHOLDS: usize = 14;
/// Thresholds are stored with the sign bit flipped so AVX2's signed
/// compare orders them as unsigned.
pub const BIAS: u32 = 0x8000_0000;

/// One row of a leaf block: a bound (or rule index) per lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(32))]
pub struct Row(pub [u32; LANES]);

/// A row that no key satisfies as lower bound (with [`EMPTY_HI`] as upper).
pub const EMPTY_LO: u32 = 1;
pub const EMPTY_HI: u32 = 0;

/// A tree node: one cache line.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub struct Node {
    /// Inner: sorted thresholds `^ BIAS`, unused ones `u32::MAX ^ BIAS`
    /// (no key is above them). Leaf: `th[0]` = its first (best) rule
    /// index or `u32::MAX` when empty, `th[1]` = its number of blocks.
    pub th: [u32; NODE_THRESHOLDS],
    /// Inner: index of child 0 (children are contiguous). Leaf: first block.
    pub base: u32,
    /// Bit 31: leaf. Bits 0..8: the field an inner node tests.
    pub info: u32,
}

pub const LEAF: u32 = 1 << 31;

impl Node {
    #[inline(always)]
    pub fn is_leaf(&self) -> bool {
        self.info & LEAF != 0
    }
    #[inline(always)]
    pub fn field(&self) -> usize {
        (self.info & 0xff) as usize
    }
}

/// Number of thresholds of `n` below `k` (scalar).
#[inline(always)]
pub fn below_scalar(n: &Node, k: u32) -> u32 {
    let kb = k ^ BIAS;
    let mut c = 0;
    for &t in &n.th {
        c += ((t as i32) < (kb as i32)) as u32;
    }
    c
}

/// Lanes of the block `rows` (2 * NF + 1 rows) that `key` matches (scalar).
#[inline(always)]
pub fn block_scalar<const NF: usize>(rows: &[Row], key: &[u32; 8]) -> u32 {
    let mut m = (1u32 << LANES) - 1;
    for f in 0..NF {
        let (lo, hi, k) = (&rows[2 * f].0, &rows[2 * f + 1].0, key[f]);
        let mut b = 0;
        for l in 0..LANES {
            b |= (((lo[l] <= k) & (k <= hi[l])) as u32) << l;
        }
        m &= b;
    }
    m
}

#[cfg(target_arch = "x86_64")]
pub mod avx2 {
    use super::{Node, Row, BIAS, LANES};
    use std::arch::x86_64::*;

    /// [`super::below_scalar`] with two 8-lane compares.
    #[inline]
    #[target_feature(enable = "avx2,popcnt")]
    pub fn below(n: &Node, k: u32) -> u32 {
        // SAFETY: a Node is 64 bytes, 64-aligned: two aligned 32-byte loads.
        unsafe {
            let kv = _mm256_set1_epi32((k ^ BIAS) as i32);
            let p = n as *const Node as *const __m256i;
            let a = _mm256_cmpgt_epi32(kv, _mm256_load_si256(p));
            let b = _mm256_cmpgt_epi32(kv, _mm256_load_si256(p.add(1)));
            let m = _mm256_movemask_ps(_mm256_castsi256_ps(a)) as u32 | (_mm256_movemask_ps(_mm256_castsi256_ps(b)) as u32) << 8;
            (m & 0x3fff).count_ones()
        }
    }

    /// [`super::block_scalar`]: per field, `max(k, lo) == k` and
    /// `min(k, hi) == k` (AVX2 has no unsigned compare).
    #[inline]
    #[target_feature(enable = "avx2")]
    pub fn block<const NF: usize>(rows: &[Row], key: &[u32; 8]) -> u32 {
        debug_assert!(rows.len() >= 2 * NF);
        // SAFETY: rows holds at least 2 * NF aligned 32-byte rows.
        unsafe {
            let p = rows.as_ptr() as *const __m256i;
            let mut acc = _mm256_set1_epi32(-1);
            for f in 0..NF {
                let kv = _mm256_set1_epi32(key[f] as i32);
                let lo = _mm256_load_si256(p.add(2 * f));
                let hi = _mm256_load_si256(p.add(2 * f + 1));
                let ge = _mm256_cmpeq_epi32(_mm256_max_epu32(kv, lo), kv);
                let le = _mm256_cmpeq_epi32(_mm256_min_epu32(kv, hi), kv);
                acc = _mm256_and_si256(acc, _mm256_and_si256(ge, le));
            }
            _mm256_movemask_ps(_mm256_castsi256_ps(acc)) as u32 & ((1 << LANES) - 1)
        }
    }
}

/// Whether this CPU runs the AVX2 kernels.
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("popcnt")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Hints the cache to fetch the line at `p` (no effect off x86-64).
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn node(th: &[u32]) -> Node {
        let mut n = Node { th: [u32::MAX ^ BIAS; NODE_THRESHOLDS], base: 7, info: 3 };
        for (i, &t) in th.iter().enumerate() {
            n.th[i] = t ^ BIAS;
        }
        n
    }

    proptest! {
        #[test]
        fn node_and_block_kernels_agree_with_plain_comparisons(
            mut th in proptest::collection::vec(any::<u32>(), 0..=NODE_THRESHOLDS),
            k in any::<u32>(),
            bounds in proptest::collection::vec((any::<u32>(), any::<u32>()), 5 * LANES),
            key in proptest::array::uniform8(any::<u32>()),
            pick in proptest::collection::vec(any::<bool>(), 5 * LANES),
        ) {
            th.sort_unstable();
            let n = node(&th);
            let want = th.iter().filter(|&&t| t < k).count() as u32;
            prop_assert_eq!(below_scalar(&n, k), want);
            // Rows with some bounds around the key so lanes do match.
            let mut rows = vec![Row([0; LANES]); 11];
            let mut want = (1u32 << LANES) - 1;
            for f in 0..5 {
                for l in 0..LANES {
                    let (mut lo, mut hi) = bounds[f * LANES + l];
                    if pick[f * LANES + l] {
                        lo = key[f].saturating_sub(lo % 3);
                        hi = key[f].saturating_add(hi % 3);
                    }
                    rows[2 * f].0[l] = lo;
                    rows[2 * f + 1].0[l] = hi;
                    if !(lo <= key[f] && key[f] <= hi) {
                        want &= !(1 << l);
                    }
                }
            }
            prop_assert_eq!(block_scalar::<5>(&rows, &key), want);
            #[cfg(target_arch = "x86_64")]
            if has_avx2() {
                // SAFETY: the CPU has AVX2 (checked above).
                prop_assert_eq!(unsafe { avx2::below(&n, k) }, below_scalar(&n, k));
                prop_assert_eq!(unsafe { avx2::block::<5>(&rows, &key) }, want);
                prop_assert_eq!(unsafe { avx2::block::<2>(&rows, &key) }, block_scalar::<2>(&rows, &key));
            }
        }
    }
}

//! The two inner loops of [`super::partition::PTree`], each as a scalar
//! function, an AVX2 one and an AVX-512 one (`std::arch`), chosen once at
//! build time with `is_x86_feature_detected!` so the same binary runs on
//! any x86-64 (and the scalar code everywhere else).
//!
//! * **Leaf block**: eight rules side by side (structure of arrays: one row of
//!   eight lower bounds and one of eight upper bounds per field, then a row
//!   of rule indices). A key is tested against all eight in one pass,
//!   branch-free; the answer is a bit per lane.
//! * **Node**: up to [`NODE_THRESHOLDS`] sorted thresholds on one field in
//!   one 64-byte line; the child is the number of thresholds below the key.

/// Rules per leaf block (one AVX2 register of 32-bit lanes).
pub const LANES: usize = 8;
/// Threshold slots per node: 14, so a node's slots, child base and header
/// fill one 64-byte cache line (and one HBM burst).
pub const NODE_SLOTS: usize = 14;
/// Thresholds an inner node uses: 12; a leaf keeps its rule and block
/// counts in the last two slots, its 12 thresholds above every key.
pub const NODE_THRESHOLDS: usize = 12;
/// Thresholds are stored with the sign bit flipped so AVX2's signed
/// compare orders them as unsigned.
pub const BIAS: u32 = 0x8000_0000;

/// One row of a leaf block: a bound (or rule index) per lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(32))]
pub struct Row(pub [u32; LANES]);

/// Leaf words are stored (and keys packed) *biased*: a 32-bit word with its
/// sign bit flipped, a pair of 16-bit fields with each half's sign bit
/// flipped, so that AVX2's signed compares (`cmpgt`) order them as unsigned
/// and a bound test is two compares and an or.
pub const PAIR_BIAS: u32 = 0x8000_8000;

/// The bias of a word: [`BIAS`], or [`PAIR_BIAS`] for a pair of 16-bit fields.
#[inline(always)]
pub fn bias(pair: bool) -> u32 {
    if pair {
        PAIR_BIAS
    } else {
        BIAS
    }
}

/// A (low, high) row pair that no key satisfies, biased (a low bound above
/// the high one, in both halves of a pair).
#[inline(always)]
pub fn empty_bounds(pair: bool) -> (u32, u32) {
    if pair {
        (0x7fff_7fff, 0x8000_8000)
    } else {
        (0x7fff_ffff, 0x8000_0000)
    }
}

/// A folded field's (at most 8 bits) bounds as the low half of an index-row
/// entry: the low bound and the complemented high bound, each a biased
/// byte, so the lane fails when either byte is above the key's
/// ([`fold_key`]): `lo > k` or `!hi > !k`.
#[inline(always)]
pub fn fold_bounds(lo: u32, hi: u32) -> u32 {
    (lo & 0xff ^ 0x80) | (!hi & 0xff ^ 0x80) << 8
}

/// A key's folded field as [`fold_bounds`] compares it; its upper two
/// bytes (the entry's rule index) the largest byte, never below.
#[inline(always)]
pub fn fold_key(k: u32) -> u32 {
    (k & 0xff ^ 0x80) | (!k & 0xff ^ 0x80) << 8 | 0x7f7f_0000
}

/// An unused lane of a folded index row: rule 0xffff, bounds no key meets.
pub const FOLD_EMPTY: u32 = 0xffff_7f7f;

/// A tree node: one cache line.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub struct Node {
    /// Inner: sorted thresholds `^ BIAS`, unused ones `u32::MAX ^ BIAS`
    /// (no key is above them). Leaf: the first [`NODE_THRESHOLDS`] unused,
    /// then its first (best) rule index (`u32::MAX` when empty) and its
    /// number of blocks.
    pub th: [u32; NODE_SLOTS],
    /// Inner: index of child 0 (children are contiguous). Leaf: its own
    /// index, so a step from a leaf stays there without a test.
    pub base: u32,
    /// Bit 31: inner ([`INNER`]; set in inner nodes so a batch step learns
    /// whether any lane is still inside with one `or`). Bits 0..5: the
    /// key word an inner node tests (keys of up to 32 words). A leaf's
    /// bits 5..31: its first block (its word bits 0, a word every key has).
    pub info: u32,
}

pub const INNER: u32 = 1 << 31;
/// The bits of [`Node::info`] naming an inner node's key word.
const FIELD_BITS: u32 = 5;

impl Node {
    #[inline(always)]
    pub fn is_leaf(&self) -> bool {
        self.info & INNER == 0
    }
    #[inline(always)]
    pub fn field(&self) -> usize {
        (self.info & ((1 << FIELD_BITS) - 1)) as usize
    }
    /// A leaf's first block.
    #[inline(always)]
    pub fn first_block(&self) -> usize {
        ((self.info & !INNER) >> FIELD_BITS) as usize
    }
    /// A leaf's best rule (`u32::MAX` when empty).
    #[inline(always)]
    pub fn first_rule(&self) -> u32 {
        self.th[NODE_SLOTS - 2]
    }
    /// A leaf's number of blocks.
    #[inline(always)]
    pub fn blocks(&self) -> usize {
        self.th[NODE_SLOTS - 1] as usize
    }
    /// The leaf at `idx` of `blocks` blocks from `first_block`, whose best
    /// rule is `first_rule`.
    pub fn leaf(idx: u32, first_block: u32, blocks: u32, first_rule: u32) -> Node {
        let mut th = [u32::MAX ^ BIAS; NODE_SLOTS];
        th[NODE_SLOTS - 2] = first_rule;
        th[NODE_SLOTS - 1] = blocks;
        debug_assert!(first_block < INNER >> FIELD_BITS, "block {first_block} past the node's field");
        Node { th, base: idx, info: first_block << FIELD_BITS }
    }
}

/// Number of thresholds of `n` below the key `kb`, given biased (`k ^ BIAS`,
/// as the batch path stores its keys) (scalar).
#[inline(always)]
pub fn below_scalar(n: &Node, kb: u32) -> u32 {
    let mut c = 0;
    for &t in &n.th[..NODE_THRESHOLDS] {
        c += ((t as i32) < (kb as i32)) as u32;
    }
    c
}

/// Lanes of the block `rows` (2 * NW + 1 rows) that the packed, biased key
/// `key` matches (scalar). Word `w` is one 32-bit field, or when bit `w` of
/// `pairs` is set two 16-bit fields side by side, each compared alone (see
/// [`PAIR_BIAS`]). With `fold`, row `2 * NW` (the index row) also holds a
/// folded field, tested byte-wise against the key's last word
/// ([`fold_bounds`]; `key[7]` for the 8-word key).
#[inline(always)]
pub fn block_scalar<const NW: usize, const K: usize>(rows: &[Row], key: &[u32; K], pairs: u32, fold: bool) -> u32 {
    block_scalar_n(rows, key, NW, pairs, fold)
}

/// [`block_scalar`] at a run-time word count `nw` (keys of more than 8
/// leaf words, which have no kernel of their own).
#[inline(always)]
pub fn block_scalar_n<const K: usize>(rows: &[Row], key: &[u32; K], nw: usize, pairs: u32, fold: bool) -> u32 {
    let mut m = (1u32 << LANES) - 1;
    if fold {
        let (r, k) = (&rows[2 * nw].0, key[K - 1]);
        for l in 0..LANES {
            if (0..4).any(|i| (r[l] >> (8 * i)) as i8 > (k >> (8 * i)) as i8) {
                m &= !(1 << l);
            }
        }
    }
    for w in 0..nw {
        let (lo, hi, k) = (&rows[2 * w].0, &rows[2 * w + 1].0, key[w]);
        let mut b = 0;
        if pairs >> w & 1 == 0 {
            for l in 0..LANES {
                b |= ((((lo[l] as i32) <= (k as i32)) & ((k as i32) <= (hi[l] as i32))) as u32) << l;
            }
        } else {
            let (kh, kl) = ((k >> 16) as i16, k as i16);
            for l in 0..LANES {
                let (lh, ll, hh, hl) = ((lo[l] >> 16) as i16, lo[l] as i16, (hi[l] >> 16) as i16, hi[l] as i16);
                let ok = (lh <= kh) & (kh <= hh) & (ll <= kl) & (kl <= hl);
                b |= (ok as u32) << l;
            }
        }
        m &= b;
    }
    m
}

/// A five-tuple key (source, destination, the two ports, protocol) as a
/// batch lane keeps it: `kk` every field biased (nodes compare it as is),
/// `pk` the leaf words: the addresses biased, the ports paired, the
/// protocol folded (the last word: 7 of the 8-word key).
#[inline(always)]
pub fn prep5_scalar<const N: usize>(k: &crate::rules::Key<N>, kk: &mut [u32; N], pk: &mut [u32; N]) {
    *kk = k.0.map(|x| x ^ BIAS);
    *pk = *kk;
    pk[2] = pack(k.0[2], k.0[3]) ^ PAIR_BIAS;
    pk[N - 1] = fold_key(k.0[4]);
}

/// Packs two 16-bit values into one word (unbiased) as [`block_scalar`]
/// reads it once biased.
#[inline(always)]
pub fn pack(a: u32, b: u32) -> u32 {
    a << 16 | (b & 0xffff)
}

#[cfg(target_arch = "x86_64")]
pub mod avx2 {
    use super::{Node, Row, BIAS, LANES, NODE_THRESHOLDS, PAIR_BIAS};
    use std::arch::x86_64::*;

    /// [`super::prep5_scalar`] with vector ops: the biased key in one xor,
    /// the leaf words in one byte shuffle (the ports' low halves side by
    /// side) and one xor; the folded protocol, a byte spread with a
    /// multiply: `p ^ 0x80`, `p ^ 0x7f` (= `!p ^ 0x80`), then two 0x7f.
    /// Words 3 to 6 of `pk` are left as they are (no five-tuple kernel
    /// reads them).
    #[inline]
    #[target_feature(enable = "avx2")]
    pub fn prep5<const N: usize>(k: &crate::rules::Key<N>, kk: &mut [u32; N], pk: &mut [u32; N]) {
        if N != 8 {
            // Wider keys take the generic path (the five-tuple kernels run
            // on the 8-word key).
            return super::prep5_scalar(k, kk, pk);
        }
        // SAFETY: a Key and the lanes' arrays are eight u32s here (unaligned
        // loads and stores).
        unsafe {
            let v = _mm256_loadu_si256(k.0.as_ptr() as *const __m256i);
            _mm256_storeu_si256(kk.as_mut_ptr() as *mut __m256i, _mm256_xor_si256(v, _mm256_set1_epi32(BIAS as i32)));
            let shuf = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 12, 13, 8, 9, -1, -1, -1, -1);
            let x = _mm_xor_si128(_mm_shuffle_epi8(_mm256_castsi256_si128(v), shuf), _mm_setr_epi32(BIAS as i32, BIAS as i32, PAIR_BIAS as i32, 0));
            _mm_storeu_si128(pk.as_mut_ptr() as *mut __m128i, x);
            pk[7] = (k.0[4] & 0xff) * 0x0101 ^ 0x7f7f_7f80;
        }
    }

    /// [`super::below_scalar`] (key biased) with two 8-lane compares.
    #[inline]
    #[target_feature(enable = "avx2,popcnt")]
    pub fn below(n: &Node, kb: u32) -> u32 {
        // SAFETY: a Node is 64 bytes, 64-aligned: two aligned 32-byte loads.
        unsafe {
            let kv = _mm256_set1_epi32(kb as i32);
            let p = n as *const Node as *const __m256i;
            let a = _mm256_cmpgt_epi32(kv, _mm256_load_si256(p));
            let b = _mm256_cmpgt_epi32(kv, _mm256_load_si256(p.add(1)));
            let m = _mm256_movemask_ps(_mm256_castsi256_ps(a)) as u32 | (_mm256_movemask_ps(_mm256_castsi256_ps(b)) as u32) << 8;
            (m & ((1 << NODE_THRESHOLDS) - 1)).count_ones()
        }
    }

    /// [`super::block_scalar`]: per word, a lane fails when `lo > k` or
    /// `k > hi` (signed compares of the biased words, in 16-bit lanes for a
    /// pair of fields, where either half failing fails the lane; in bytes
    /// for the folded field); the matching lanes are those that never
    /// failed.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub fn block<const NW: usize, const K: usize>(rows: &[Row], key: &[u32; K], pairs: u32, fold: bool) -> u32 {
        block_n(rows, key, NW, pairs, fold)
    }

    /// [`block`] at a run-time word count `nw`.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub fn block_n<const K: usize>(rows: &[Row], key: &[u32; K], nw: usize, pairs: u32, fold: bool) -> u32 {
        assert!(rows.len() > 2 * nw);
        // SAFETY: rows holds at least 2 * nw + 1 aligned 32-byte rows.
        unsafe {
            let p = rows.as_ptr() as *const __m256i;
            let mut fail = if fold {
                _mm256_cmpgt_epi8(_mm256_load_si256(p.add(2 * nw)), _mm256_set1_epi32(key[K - 1] as i32))
            } else {
                _mm256_setzero_si256()
            };
            for w in 0..nw {
                let kv = _mm256_set1_epi32(key[w] as i32);
                let lo = _mm256_load_si256(p.add(2 * w));
                let hi = _mm256_load_si256(p.add(2 * w + 1));
                let f = if pairs >> w & 1 == 0 {
                    _mm256_or_si256(_mm256_cmpgt_epi32(lo, kv), _mm256_cmpgt_epi32(kv, hi))
                } else {
                    _mm256_or_si256(_mm256_cmpgt_epi16(lo, kv), _mm256_cmpgt_epi16(kv, hi))
                };
                fail = _mm256_or_si256(fail, f);
            }
            let ok = _mm256_cmpeq_epi32(fail, _mm256_setzero_si256());
            _mm256_movemask_ps(_mm256_castsi256_ps(ok)) as u32 & ((1 << LANES) - 1)
        }
    }
}

/// The kernels again with AVX-512 (F, VL): a node's twelve thresholds
/// in one 16-lane compare into a mask register, and a block's bound tests
/// chained through masks (`vpcmpd` with a mask operand) instead of vector
/// ors and a final compare and movemask. Fewer instructions per step; the
/// layout is the AVX2 one, so one build serves both. BW is not enabled on
/// purpose: with it the compiler turns the 16-bit and byte compares into
/// mask-register ones and back to vectors (`vpmovm2w`), which made the
/// batch 10-20 % slower on AMD's Zen cores than the AVX2 kernels.
#[cfg(target_arch = "x86_64")]
pub mod avx512 {
    use super::{Node, Row, NODE_THRESHOLDS};
    use std::arch::x86_64::*;

    /// [`super::below_scalar`] (key biased) with one masked 16-lane compare.
    #[inline]
    #[target_feature(enable = "avx512f,popcnt")]
    pub fn below(n: &Node, kb: u32) -> u32 {
        // SAFETY: a Node is one 64-byte, 64-aligned line.
        unsafe {
            let th = _mm512_load_si512(n as *const Node as *const _);
            let m = _mm512_mask_cmplt_epi32_mask((1 << NODE_THRESHOLDS) - 1, th, _mm512_set1_epi32(kb as i32));
            (m as u32).count_ones()
        }
    }

    /// [`super::block_scalar`]: the lanes still in the mask after every
    /// `lo <= k <= hi` (32-bit words, as masked compares), every pair of
    /// 16-bit fields and the folded byte field (vector compares whose
    /// lanes must be all zero: `vptestnmd`).
    #[inline]
    #[target_feature(enable = "avx512f,avx512vl,avx2")]
    pub fn block<const NW: usize, const K: usize>(rows: &[Row], key: &[u32; K], pairs: u32, fold: bool) -> u32 {
        block_n(rows, key, NW, pairs, fold)
    }

    /// [`block`] at a run-time word count `nw`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512vl,avx2")]
    pub fn block_n<const K: usize>(rows: &[Row], key: &[u32; K], nw: usize, pairs: u32, fold: bool) -> u32 {
        assert!(rows.len() > 2 * nw);
        // SAFETY: rows holds at least 2 * nw + 1 aligned 32-byte rows.
        unsafe {
            let p = rows.as_ptr() as *const __m256i;
            let mut ok: __mmask8 = 0xff;
            if fold {
                let f = _mm256_cmpgt_epi8(_mm256_load_si256(p.add(2 * nw)), _mm256_set1_epi32(key[K - 1] as i32));
                ok = _mm256_testn_epi32_mask(f, f);
            }
            for w in 0..nw {
                let kv = _mm256_set1_epi32(key[w] as i32);
                let lo = _mm256_load_si256(p.add(2 * w));
                let hi = _mm256_load_si256(p.add(2 * w + 1));
                if pairs >> w & 1 == 0 {
                    ok = _mm256_mask_cmple_epi32_mask(ok, lo, kv);
                    ok = _mm256_mask_cmple_epi32_mask(ok, kv, hi);
                } else {
                    let f = _mm256_or_si256(_mm256_cmpgt_epi16(lo, kv), _mm256_cmpgt_epi16(kv, hi));
                    ok = _mm256_mask_testn_epi32_mask(ok, f, f);
                }
            }
            ok as u32
        }
    }
}

/// Whether this CPU runs the AVX-512 kernels.
pub fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        has_avx2()
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
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

    /// Rows and key biased as the kernels read them (rows 0..10: five words).
    fn biased(rows: &[Row], key: &[u32; 8], pairs: u32) -> (Vec<Row>, [u32; 8]) {
        let mut r = rows.to_vec();
        let mut k = *key;
        for w in 0..5 {
            let b = bias(pairs >> w & 1 == 1);
            for l in 0..LANES {
                r[2 * w].0[l] ^= b;
                r[2 * w + 1].0[l] ^= b;
            }
            k[w] ^= b;
        }
        (r, k)
    }

    fn node(th: &[u32]) -> Node {
        let mut n = Node { th: [u32::MAX ^ BIAS; NODE_SLOTS], base: 7, info: INNER | 3 };
        // The leaf slots hold anything; inner nodes ignore them.
        n.th[NODE_SLOTS - 1] = 0x0123_4567;
        for (i, &t) in th.iter().enumerate() {
            n.th[i] = t ^ BIAS;
        }
        n
    }

    proptest! {
        #[test]
        fn the_vector_key_prep_packs_as_the_scalar_one(k in proptest::array::uniform8(any::<u32>())) {
            let key = crate::rules::Key(k);
            let (mut kk, mut pk) = ([0u32; 8], [0u32; 8]);
            prep5_scalar(&key, &mut kk, &mut pk);
            #[cfg(target_arch = "x86_64")]
            if has_avx2() {
                let (mut vk, mut vp) = ([0u32; 8], [0u32; 8]);
                // SAFETY: the CPU has AVX2 (checked above).
                unsafe { avx2::prep5(&key, &mut vk, &mut vp) };
                prop_assert_eq!(vk, kk);
                // The words the five-tuple kernels read.
                for w in [0, 1, 2, 7] {
                    prop_assert_eq!(vp[w], pk[w], "word {}", w);
                }
            }
        }
    }

    proptest! {
        #[test]
        fn node_and_block_kernels_agree_with_plain_comparisons(
            mut th in proptest::collection::vec(any::<u32>(), 0..=NODE_THRESHOLDS),
            k in any::<u32>(),
            bounds in proptest::collection::vec((any::<u32>(), any::<u32>()), 5 * LANES),
            key in proptest::array::uniform8(any::<u32>()),
            pick in proptest::collection::vec(any::<bool>(), 5 * LANES),
            folded in proptest::collection::vec((any::<u8>(), any::<u8>()), LANES),
            kp in any::<u8>(),
        ) {
            th.sort_unstable();
            let n = node(&th);
            let want = th.iter().filter(|&&t| t < k).count() as u32;
            prop_assert_eq!(below_scalar(&n, k ^ BIAS), want);
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
            let (r0, k0) = biased(&rows, &key, 0);
            prop_assert_eq!(block_scalar::<5, 8>(&r0, &k0, 0, false), want);
            // Words 1 and 3 as pairs of 16-bit fields: each half alone.
            let mut want_pairs = (1u32 << LANES) - 1;
            for w in 0..5 {
                for l in 0..LANES {
                    let (lo, hi, k) = (rows[2 * w].0[l], rows[2 * w + 1].0[l], key[w]);
                    let ok = if w % 2 == 1 {
                        (lo >> 16..=hi >> 16).contains(&(k >> 16)) && (lo & 0xffff..=hi & 0xffff).contains(&(k & 0xffff))
                    } else {
                        (lo..=hi).contains(&k)
                    };
                    if !ok {
                        want_pairs &= !(1 << l);
                    }
                }
            }
            let (r1, k1) = biased(&rows, &key, 0b01010);
            prop_assert_eq!(block_scalar::<5, 8>(&r1, &k1, 0b01010, false), want_pairs);
            let (r2, k2) = biased(&rows, &key, 0b10);
            // An empty lane matches no key.
            let mut re = r1.clone();
            for w in 0..5 {
                let (lo, hi) = empty_bounds(0b01010 >> w & 1 == 1);
                re[2 * w].0[3] = lo;
                re[2 * w + 1].0[3] = hi;
            }
            prop_assert_eq!(block_scalar::<5, 8>(&re, &k1, 0b01010, false), want_pairs & !(1 << 3));
            // A folded byte field in the index row (row 10): a lane also
            // needs lo <= kp <= hi; an unused lane never matches.
            let mut rf = r0.clone();
            let mut kf = k0;
            kf[7] = fold_key(kp as u32);
            let mut want_fold = want;
            for (l, &(lo, hi)) in folded.iter().enumerate() {
                rf[10].0[l] = (l as u32) << 16 | fold_bounds(lo as u32, hi as u32);
                if !(lo <= kp && kp <= hi) {
                    want_fold &= !(1 << l);
                }
            }
            rf[10].0[5] = FOLD_EMPTY;
            want_fold &= !(1 << 5);
            prop_assert_eq!(block_scalar::<5, 8>(&rf, &kf, 0, true), want_fold);
            #[cfg(target_arch = "x86_64")]
            if has_avx2() {
                // SAFETY: the CPU has AVX2 (checked above).
                prop_assert_eq!(unsafe { avx2::block::<5, 8>(&rf, &kf, 0, true) }, want_fold);
            }
            #[cfg(target_arch = "x86_64")]
            if has_avx512() {
                // SAFETY: the CPU has AVX-512 F/VL (checked above).
                unsafe {
                    prop_assert_eq!(avx512::below(&n, k ^ BIAS), below_scalar(&n, k ^ BIAS));
                    prop_assert_eq!(avx512::block::<5, 8>(&rf, &kf, 0, true), want_fold);
                    prop_assert_eq!(avx512::block::<5, 8>(&r0, &k0, 0, false), want);
                    prop_assert_eq!(avx512::block::<5, 8>(&r1, &k1, 0b01010, false), want_pairs);
                    prop_assert_eq!(avx512::block::<5, 8>(&re, &k1, 0b01010, false), want_pairs & !(1 << 3));
                    prop_assert_eq!(avx512::block::<2, 8>(&r2, &k2, 0b10, false), block_scalar::<2, 8>(&r2, &k2, 0b10, false));
                }
            }
            #[cfg(target_arch = "x86_64")]
            if has_avx2() {
                // SAFETY: the CPU has AVX2 (checked above).
                prop_assert_eq!(unsafe { avx2::below(&n, k ^ BIAS) }, below_scalar(&n, k ^ BIAS));
                prop_assert_eq!(unsafe { avx2::block::<5, 8>(&r0, &k0, 0, false) }, want);
                prop_assert_eq!(unsafe { avx2::block::<5, 8>(&r1, &k1, 0b01010, false) }, want_pairs);
                prop_assert_eq!(unsafe { avx2::block::<5, 8>(&re, &k1, 0b01010, false) }, want_pairs & !(1 << 3));
                prop_assert_eq!(unsafe { avx2::block::<2, 8>(&r2, &k2, 0b10, false) }, block_scalar::<2, 8>(&r2, &k2, 0b10, false));
            }
        }
    }
}

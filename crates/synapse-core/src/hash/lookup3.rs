//! Bob Jenkins' lookup3 (2006, public domain): `hashword` over 32-bit words and
//! `hashlittle` over bytes. Follows §4.1 and Appendix D of the Synapse paper:
//! the VMU hashes each key with lookup3 into its 2^N-entry lookup table.
//!
//! A port of the reference `lookup3.c`; the tests use the vectors printed by
//! its `driver5`.

use crate::rules::Key;

#[inline(always)]
fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

#[inline(always)]
fn final_(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(14));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(11));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(25));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(16));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(4));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(14));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(24));
}

/// `hashword(k, length, initval)` of the reference: hashes 32-bit words.
pub fn hashword(k: &[u32], initval: u32) -> u32 {
    let init = 0xdeadbeefu32
        .wrapping_add((k.len() as u32) << 2)
        .wrapping_add(initval);
    let (mut a, mut b, mut c) = (init, init, init);
    let mut k = k;
    while k.len() > 3 {
        a = a.wrapping_add(k[0]);
        b = b.wrapping_add(k[1]);
        c = c.wrapping_add(k[2]);
        mix(&mut a, &mut b, &mut c);
        k = &k[3..];
    }
    match k.len() {
        3 => {
            c = c.wrapping_add(k[2]);
            b = b.wrapping_add(k[1]);
            a = a.wrapping_add(k[0]);
        }
        2 => {
            b = b.wrapping_add(k[1]);
            a = a.wrapping_add(k[0]);
        }
        1 => a = a.wrapping_add(k[0]),
        _ => return c,
    }
    final_(&mut a, &mut b, &mut c);
    c
}

/// `hashlittle(key, length, initval)` of the reference: hashes bytes, reading
/// them as little-endian words (the result does not depend on alignment).
pub fn hashlittle(key: &[u8], initval: u32) -> u32 {
    let init = 0xdeadbeefu32
        .wrapping_add(key.len() as u32)
        .wrapping_add(initval);
    let (mut a, mut b, mut c) = (init, init, init);
    let word = |s: &[u8]| -> u32 {
        // Up to 4 bytes, little-endian, missing high bytes zero (the
        // reference's masked reads of the last block).
        s.iter()
            .enumerate()
            .fold(0u32, |w, (i, &x)| w | (x as u32) << (8 * i))
    };
    let mut k = key;
    while k.len() > 12 {
        a = a.wrapping_add(word(&k[0..4]));
        b = b.wrapping_add(word(&k[4..8]));
        c = c.wrapping_add(word(&k[8..12]));
        mix(&mut a, &mut b, &mut c);
        k = &k[12..];
    }
    if k.is_empty() {
        return c;
    }
    a = a.wrapping_add(word(&k[..k.len().min(4)]));
    if k.len() > 4 {
        b = b.wrapping_add(word(&k[4..k.len().min(8)]));
    }
    if k.len() > 8 {
        c = c.wrapping_add(word(&k[8..]));
    }
    final_(&mut a, &mut b, &mut c);
    c
}

/// The VMU's hash of a key: lookup3 over its first `words` 32-bit fields.
#[inline]
pub fn hash_key<const N: usize>(key: &Key<N>, words: usize, seed: u32) -> u32 {
    hashword(&key.0[..words], seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_driver5_vectors() {
        assert_eq!(hashlittle(b"", 0), 0xdeadbeef);
        assert_eq!(hashlittle(b"", 0xdeadbeef), 0xbd5b7dde);
        let s = b"Four score and seven years ago";
        assert_eq!(hashlittle(s, 0), 0x17770551);
        assert_eq!(hashlittle(s, 1), 0xcd628161);
    }

    #[test]
    fn hashword_equals_hashlittle_on_whole_words() {
        // The reference promises this on little-endian machines.
        for n in 0..10u32 {
            let words: Vec<u32> = (0..n)
                .map(|i| i.wrapping_mul(0x9e37_79b9) ^ 0x5555)
                .collect();
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            for seed in [0, 1, 0xdeadbeef] {
                assert_eq!(hashword(&words, seed), hashlittle(&bytes, seed), "n={n}");
            }
        }
    }

    #[test]
    fn every_tail_length_is_hashed_and_differs() {
        let data: Vec<u8> = (0..40).collect();
        let hs: Vec<u32> = (0..=40).map(|n| hashlittle(&data[..n], 7)).collect();
        let mut sorted = hs.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), hs.len());
    }
}

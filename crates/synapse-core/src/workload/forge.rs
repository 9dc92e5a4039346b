//! Attack frames for P4 programs (`[attack]` of `synapse run --p4`,
//! python/synapse_vmt/p4/attack.py): each traffic class's frame is built once
//! as a template (by the Python frame builder, with the class's fixed
//! fields), and an attack frame is that template with its drawn fields
//! written at their known offsets and its IPv4 and UDP/TCP checksums
//! recomputed. Why: building every one-off attack frame with dpkt cost most
//! of an attack frame's preparation.
//!
//! Frames are Ethernet II + IPv4 without options: `plain` is IPv4 then UDP
//! or TCP; `gtpu` is IPv4, UDP, an 8-byte GTP-U header, then an inner IPv4
//! and UDP or TCP. A class has two templates, UDP and TCP: its protocol
//! field (`ipv4.proto`, or `inner.proto` for GTP-U) picks one (6: TCP), as
//! the frame builder does.

use std::collections::HashSet;

use rand::{Rng, SeedableRng};

use crate::program::hash::{csum16, fold16, ones_sum};
use rand_pcg::Pcg64;

/// The frame's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Plain,
    Gtpu,
}

/// Where a field of the frame builder lives: (byte offset, bytes), or None
/// where the layout ignores it (`ipv4.proto` of a GTP-U frame: always UDP).
pub fn field_at(layout: Layout, name: &str) -> Result<Option<(usize, usize)>, String> {
    Ok(Some(match (layout, name) {
        (_, "eth.dst") => (0, 6),
        (_, "eth.src") => (6, 6),
        (_, "ipv4.ttl") => (22, 1),
        (Layout::Plain, "ipv4.proto") => (23, 1),
        (Layout::Gtpu, "ipv4.proto") => return Ok(None),
        (_, "ipv4.src") => (26, 4),
        (_, "ipv4.dst") => (30, 4),
        (_, "l4.sport") => (34, 2),
        (_, "l4.dport") => (36, 2),
        (Layout::Gtpu, "gtpu.teid") => (46, 4),
        (Layout::Gtpu, "inner.proto") => (59, 1),
        (Layout::Gtpu, "inner.src") => (62, 4),
        (Layout::Gtpu, "inner.dst") => (66, 4),
        (Layout::Gtpu, "inner.sport") => (70, 2),
        (Layout::Gtpu, "inner.dport") => (72, 2),
        _ => return Err(format!("{name}: not a field of a {layout:?} frame")),
    }))
}

/// One match of an entry on a key field, as the frame builder's draw reads
/// it: exact gives `value`; lpm and ternary `value` with the bits outside
/// `mask` random; range any value in `[lo, hi]`.
#[derive(Clone, Copy, Debug)]
pub enum EntryMatch {
    Exact(u64),
    Masked { value: u64, mask: u64, width: u32 },
    Range(u64, u64),
}

/// How a field's value is drawn for each frame.
#[derive(Clone, Debug)]
pub enum Draw {
    Fixed(u64),
    /// Uniform in `[lo, hi]`.
    Range(u64, u64),
    /// From the entry drawn for this frame from table `table` (one entry
    /// per table and frame, shared by the class's fields naming it), at its
    /// key field `key`.
    Entry { table: usize, key: usize },
    /// Forged: uniform over `bits` bits, drawn again while it matches one
    /// of `rows` (lo, hi, mask: matched when lo <= v & mask <= hi) — the
    /// entries' rows for `nomatch`, none for `random` and `scan`.
    Forged { bits: u32, rows: Vec<(u64, u64, u64)> },
}

/// A traffic class the attacker forges.
#[derive(Clone, Debug)]
pub struct Class {
    /// Its name, for errors.
    pub name: String,
    pub layout: Layout,
    /// The frame with UDP (`[0]`) and with TCP (`[1]`), the class's fixed fields set.
    pub templates: [Vec<u8>; 2],
    /// (field name, its draw); the protocol field included.
    pub fields: Vec<(String, Draw)>,
    /// Per table its entries, each its matches on the key fields `Draw::Entry` names.
    pub tables: Vec<Vec<Vec<EntryMatch>>>,
    /// Its share of the attack frames (normalised over the classes).
    pub share: f64,
}

/// Recompute the checksums of the IPv4 header at `ip` and of its UDP or
/// TCP segment (up to the IP total length), as the frame builder (dpkt)
/// does: the segment's only for protocols 6 and 17 (another protocol
/// carries the UDP template with a sum of 0), and a UDP sum of 0 sent as 0xffff.
fn checksums(f: &mut [u8], ip: usize) {
    let total = usize::from(u16::from_be_bytes([f[ip + 2], f[ip + 3]]));
    let proto = f[ip + 9];
    let l4 = ip + 20;
    let at = match proto {
        6 => Some(l4 + 16),
        17 => Some(l4 + 6),
        _ => {
            // the UDP template's: dpkt leaves the sum 0 under another protocol
            f[l4 + 6] = 0;
            f[l4 + 7] = 0;
            None
        }
    };
    if let Some(at) = at {
        f[at] = 0;
        f[at + 1] = 0;
        let seg = &f[l4..ip + total];
        // the pseudo-header (addresses, protocol, length), then the segment
        let pseudo = ones_sum(&f[ip + 12..ip + 20]) + u64::from(proto) + seg.len() as u64;
        let mut c = fold16(pseudo + ones_sum(seg));
        if proto == 17 && c == 0 {
            c = 0xffff;
        }
        f[at..at + 2].copy_from_slice(&c.to_be_bytes());
    }
    f[ip + 10] = 0;
    f[ip + 11] = 0;
    let c = csum16(&f[ip..ip + 20]);
    f[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
}

/// The class's frame with `values` (one per field of `c.fields`) written in.
pub fn build(c: &Class, values: &[u64]) -> Result<Vec<u8>, String> {
    let proto = if c.layout == Layout::Gtpu { "inner.proto" } else { "ipv4.proto" };
    let tcp = c.fields.iter().zip(values).any(|((n, _), &v)| n == proto && v == 6);
    let mut f = c.templates[usize::from(tcp)].clone();
    for ((name, _), &v) in c.fields.iter().zip(values) {
        if let Some((at, n)) = field_at(c.layout, name)? {
            if at + n > f.len() {
                return Err(format!("{name}: past the end of the template ({} bytes)", f.len()));
            }
            f[at..at + n].copy_from_slice(&v.to_be_bytes()[8 - n..]);
        }
    }
    if c.layout == Layout::Gtpu {
        checksums(&mut f, 50); // the inner packet first: the outer UDP sum covers it
    }
    checksums(&mut f, 14);
    Ok(f)
}

fn bits(rng: &mut Pcg64, n: u32) -> u64 {
    if n == 0 {
        0
    } else {
        rng.gen::<u64>() >> (64 - n.min(64))
    }
}

fn from_entry(m: EntryMatch, rng: &mut Pcg64) -> u64 {
    match m {
        EntryMatch::Exact(v) => v,
        EntryMatch::Masked { value, mask, width } => value | (bits(rng, width) & !mask),
        EntryMatch::Range(lo, hi) => rng.gen_range(lo..=hi),
    }
}

/// `n` distinct attack frames, none among `legit`, the classes in turn by
/// their shares (no randomness in the turn); the same frames for the same
/// `seed`. Errors when the forged bits cannot make `n` distinct frames.
pub fn forge(classes: &[Class], n: usize, seed: u64, legit: &HashSet<Vec<u8>>) -> Result<Vec<Vec<u8>>, String> {
    if classes.is_empty() {
        return Err("no class to forge".into());
    }
    for c in classes {
        if c.templates.iter().any(|t| t.len() < if c.layout == Layout::Gtpu { 78 } else { 42 }) {
            return Err("a template is shorter than its headers".into());
        }
        for (name, d) in &c.fields {
            field_at(c.layout, name)?;
            match d {
                Draw::Range(lo, hi) if lo > hi => return Err(format!("{name}: range [{lo}, {hi}]")),
                Draw::Entry { table, key } => {
                    let ents = c.tables.get(*table).ok_or_else(|| format!("{name}: no table {table}"))?;
                    if ents.is_empty() || ents.iter().any(|e| *key >= e.len()) {
                        return Err(format!("{name}: table {table} has no entries or no key {key}"));
                    }
                }
                _ => {}
            }
        }
    }
    let total: f64 = classes.iter().map(|c| c.share).sum();
    let shares: Vec<f64> = classes.iter().map(|c| c.share / total).collect();
    let mut credit = vec![0.0; classes.len()];
    let mut rng = Pcg64::seed_from_u64(seed ^ 0x6174_7461_636b_0000); // "attack"
    let mut seen: HashSet<Vec<u8>> = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    let mut tries = 0usize;
    let mut values = Vec::new();
    let mut picked: Vec<Option<usize>> = Vec::new();
    while out.len() < n {
        for (c, s) in credit.iter_mut().zip(&shares) {
            *c += s;
        }
        // the first class of the largest credit, as numpy's argmax
        let k = (0..credit.len()).fold(0, |b, i| if credit[i] > credit[b] { i } else { b });
        credit[k] -= 1.0;
        let c = &classes[k];
        loop {
            values.clear();
            picked.clear();
            picked.resize(c.tables.len(), None);
            for (_, d) in &c.fields {
                values.push(match d {
                    Draw::Fixed(v) => *v,
                    Draw::Range(lo, hi) => rng.gen_range(*lo..=*hi),
                    Draw::Entry { table, key } => {
                        let ents = &c.tables[*table];
                        let e = *picked[*table].get_or_insert_with(|| rng.gen_range(0..ents.len()));
                        from_entry(ents[e][*key], &mut rng)
                    }
                    Draw::Forged { bits: b, rows } => loop {
                        let v = bits(&mut rng, *b);
                        if !rows.iter().any(|&(lo, hi, mask)| (lo..=hi).contains(&(v & mask))) {
                            break v;
                        }
                    },
                });
            }
            let f = build(c, &values)?;
            tries += 1;
            if !legit.contains(&f) && !seen.contains(&f) {
                seen.insert(f.clone());
                out.push(f);
                break;
            }
            if tries > 20 * n + 1000 {
                return Err(format!("class {:?} cannot make {n} distinct attack frames (too few forged bits)", c.name));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A UDP frame as a reference builder writes it: every checksum from scratch.
    fn udp_frame(src: u32, dst: u32, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12] = 8;
        let udp_len = 8 + payload.len();
        let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0];
        ip[2..4].copy_from_slice(&((20 + udp_len) as u16).to_be_bytes());
        ip.extend_from_slice(&src.to_be_bytes());
        ip.extend_from_slice(&dst.to_be_bytes());
        let ipsum = csum16(&ip);
        ip[10..12].copy_from_slice(&ipsum.to_be_bytes());
        let mut udp = Vec::new();
        udp.extend_from_slice(&sport.to_be_bytes());
        udp.extend_from_slice(&dport.to_be_bytes());
        udp.extend_from_slice(&(udp_len as u16).to_be_bytes());
        udp.extend_from_slice(&[0, 0]);
        udp.extend_from_slice(payload);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&src.to_be_bytes());
        pseudo.extend_from_slice(&dst.to_be_bytes());
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&(udp_len as u16).to_be_bytes());
        let mut c = csum16(&[pseudo, udp.clone()].concat()); // one buffer: the sum as RFC 768 states it
        if c == 0 {
            c = 0xffff;
        }
        udp[6..8].copy_from_slice(&c.to_be_bytes());
        f.extend(ip);
        f.extend(udp);
        f
    }

    fn class(fields: Vec<(String, Draw)>) -> Class {
        let t = udp_frame(0, 0, 0, 0, &[7; 32]);
        Class { name: "c".into(), layout: Layout::Plain, templates: [t.clone(), t], fields, tables: vec![], share: 1.0 }
    }

    #[test]
    fn patched_frame_equals_one_built_from_scratch() {
        let mut rng = Pcg64::seed_from_u64(3);
        let names = ["ipv4.src", "ipv4.dst", "l4.sport", "l4.dport"];
        let c = class(names.iter().map(|n| (n.to_string(), Draw::Fixed(0))).collect());
        for _ in 0..200 {
            let v: Vec<u64> = vec![rng.gen::<u32>().into(), rng.gen::<u32>().into(), rng.gen::<u16>().into(), rng.gen::<u16>().into()];
            let want = udp_frame(v[0] as u32, v[1] as u32, v[2] as u16, v[3] as u16, &[7; 32]);
            assert_eq!(build(&c, &v).unwrap(), want);
        }
    }

    #[test]
    fn frames_are_distinct_new_seeded_and_miss_the_rows_for_nomatch() {
        let rows = vec![(0x0a00_0000, 0x0a00_00ff, 0xffff_ff00), (5, 5, 0xffff_ffff)];
        let fields = vec![
            ("ipv4.dst".to_string(), Draw::Forged { bits: 32, rows: rows.clone() }),
            ("l4.dport".to_string(), Draw::Range(10, 20)),
        ];
        let c = class(fields);
        let legit: HashSet<Vec<u8>> = [build(&c, &[1, 10]).unwrap()].into();
        let a = forge(&[c.clone()], 2000, 7, &legit).unwrap();
        assert_eq!(a, forge(&[c.clone()], 2000, 7, &legit).unwrap());
        assert_ne!(a, forge(&[c], 2000, 8, &legit).unwrap());
        let distinct: HashSet<&Vec<u8>> = a.iter().collect();
        assert_eq!(distinct.len(), a.len());
        for f in &a {
            assert!(!legit.contains(f));
            let dst = u64::from(u32::from_be_bytes(f[30..34].try_into().unwrap()));
            assert!(!rows.iter().any(|&(lo, hi, m)| (lo..=hi).contains(&(dst & m))));
            let dport = u16::from_be_bytes([f[36], f[37]]);
            assert!((10..=20).contains(&dport));
        }
    }

    #[test]
    fn too_few_bits_is_an_error() {
        let c = class(vec![("ipv4.ttl".to_string(), Draw::Forged { bits: 2, rows: vec![] })]);
        assert!(forge(&[c], 10, 1, &HashSet::new()).is_err());
    }
}

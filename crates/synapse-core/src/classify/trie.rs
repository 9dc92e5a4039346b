//! Follows §4.3 of the Synapse paper: the ELU's multibit hierarchical trie,
//! built by the control plane with
//! - **rule expansion**: every field that is not a prefix (port ranges,
//!   non-prefix ternaries) becomes a set of equivalent prefixes, and
//! - **spine pruning** (a set-pruning trie): rules with a shorter prefix are
//!   copied into every deeper subtrie they cover, so a lookup goes from the
//!   root straight down to its answer and never backtracks.
//!
//! The trie consumes the key field after field (schema order), `stride` bits
//! per node; a field's last chunk may be narrower. Bits that no remaining
//! rule looks at are skipped, so wildcard fields cost nothing. Every entry of
//! a node is 8 bytes and either points to a child node (and says which key
//! bits index it), returns a rule, or returns "no match" (leaf pushing).
//!
//! **Horizontal partitioning**: level `i` of the trie is its own array, meant
//! for its own memory bank, so that different lookups pipeline over the banks
//! while each lookup makes exactly one dependent read per level
//! ([`MemoryWalk`]). Identical subtries on the same level are stored once
//! (the parent entries share a pointer); nothing is shared across levels, so
//! the bank of every node is fixed at build time as the paper requires.
//!
//! Set pruning can explode on multi-field sets (a wildcard source copies the
//! destination subtrie under every source prefix). The build counts the
//! bytes it creates and stops with [`BuildError::OverBudget`] instead of
//! exhausting memory.
//!
//! Updates: any insert or delete rebuilds the trie. A rule's copies are
//! spread over every path it covers and subtries are shared, so there is no
//! local edit; the control plane builds the new trie beside the old one and
//! swaps them (ping-pong), as an FPGA would.

use super::{BuildError, Classifier, Match, MemAccess, MemoryWalk};
use crate::rules::{prefix_mask, width_mask, FieldMatch, Key, Rule, RuleSet, Schema, MAX_FIELDS};
use std::collections::HashMap;
use std::time::Duration;

/// Build parameters of the trie.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrieConfig {
    /// Key bits consumed per node (1..=16); a node has `2^stride` entries.
    pub stride: u8,
    /// Most bytes the trie (and the build's bookkeeping) may take.
    pub max_bytes: u64,
}

impl Default for TrieConfig {
    fn default() -> Self {
        TrieConfig { stride: 8, max_bytes: 256 << 20 }
    }
}

/// Bytes of one trie entry in memory.
pub const ENTRY_BYTES: u32 = 8;
/// Most prefixes one non-prefix ternary field may expand into.
const MAX_TERNARY_EXPANSION: usize = 1 << 12;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Child = 0,
    Found = 1,
    Miss = 2,
}

/// One 8-byte entry: a child pointer with the key bits that index it
/// (`field`, `shift`, `stride`), a rule (`next` is its index), or a miss.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(C)]
struct Entry {
    next: u32,
    kind: Kind,
    field: u8,
    shift: u8,
    stride: u8,
}

impl Entry {
    const MISS: Entry = Entry { next: 0, kind: Kind::Miss, field: 0, shift: 0, stride: 0 };
    fn found(rule: u32) -> Entry {
        Entry { next: rule, kind: Kind::Found, field: 0, shift: 0, stride: 0 }
    }
}

/// Build statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct TrieStats {
    pub rules: usize,
    pub stride: u8,
    /// Wall time of the build, measured by the caller of [`Trie::build`].
    pub build_time: Duration,
    pub nodes: usize,
    /// Nodes per level (level `i` = memory bank `i`).
    pub nodes_per_level: Vec<usize>,
    /// Bytes per level.
    pub bytes_per_level: Vec<u64>,
    pub bytes: u64,
    /// Prefix rules after rule expansion, over original rules.
    pub expansion: f64,
    /// Most levels a lookup reads.
    pub max_depth: usize,
    /// Levels read by a lookup, averaged over uniformly random keys.
    pub mean_depth: f64,
}

/// A multibit set-pruning trie over keys of `N` words.
pub struct Trie<const N: usize = MAX_FIELDS> {
    /// All levels back to back; level `i` starts at `level_base[i]`.
    entries: Vec<Entry>,
    level_base: Vec<u32>,
    /// The root pointer (a register in hardware, not a memory read).
    root: Entry,
    stats: TrieStats,
    rules: Vec<Rule<N>>,
    schema: Schema,
    config: TrieConfig,
}

/// One expanded prefix of the field being consumed, of rule `rule`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Elem {
    rule: u32,
    value: u32,
    len: u8,
}

/// The prefixes equivalent to one field of a rule (rule expansion).
pub fn expand_field(fm: &FieldMatch, bits: u8) -> Result<Vec<(u32, u8)>, String> {
    let w = width_mask(bits);
    if let Some(len) = fm.prefix_len(bits) {
        return Ok(vec![(fm.lo & prefix_mask(len, bits), len)]);
    }
    if let Some((lo, hi)) = fm.as_range(bits) {
        return Ok(range_to_prefixes(lo, hi.min(w), bits));
    }
    // A non-prefix ternary: enumerate the don't-care bits above the lowest
    // cared-for bit; each choice is one prefix.
    if fm.lo != fm.hi {
        return Err(format!("a range under a partial mask ({fm:?}) cannot be expanded"));
    }
    let m = fm.mask & w;
    let low = m.trailing_zeros() as u8; // m != 0 here: mask 0 is a prefix
    let len = bits - low;
    let holes: Vec<u32> = (low..bits).filter(|&b| m & (1 << b) == 0).map(|b| 1u32 << b).collect();
    if (1usize << holes.len()) > MAX_TERNARY_EXPANSION {
        return Err(format!("ternary mask {:#x} expands into 2^{} prefixes", fm.mask, holes.len()));
    }
    let mut out = Vec::with_capacity(1 << holes.len());
    for choice in 0u32..(1 << holes.len()) {
        let mut v = fm.lo & m;
        for (i, h) in holes.iter().enumerate() {
            if choice & (1 << i) != 0 {
                v |= h;
            }
        }
        out.push((v, len));
    }
    out.sort_unstable();
    Ok(out)
}

/// The minimal set of prefixes covering `lo..=hi` in a `bits`-wide field.
pub fn range_to_prefixes(lo: u32, hi: u32, bits: u8) -> Vec<(u32, u8)> {
    let mut out = Vec::new();
    let (mut lo, hi) = (lo as u64, hi as u64);
    while lo <= hi {
        // The largest aligned block starting at lo that stays within hi.
        let mut size = if lo == 0 { 1u64 << bits } else { 1u64 << lo.trailing_zeros().min(bits as u32) };
        while lo + size - 1 > hi {
            size >>= 1;
        }
        out.push((lo as u32, bits - size.trailing_zeros() as u8));
        lo += size;
    }
    out
}

struct Builder {
    widths: Vec<u8>,
    /// Expanded prefixes of rule r, field f: `prefixes[r * nf + f]`.
    prefixes: Vec<Vec<(u32, u8)>>,
    /// `tail_wild[r * (nf + 1) + f]`: fields f.. of rule r are all wildcards.
    tail_wild: Vec<bool>,
    stride: u8,
    levels: Vec<Vec<Entry>>,
    memo: HashMap<(u16, u8, u8, Vec<Elem>), Entry>,
    memo_bytes: u64,
    bytes: u64,
    budget: u64,
}

impl Builder {
    fn nf(&self) -> usize {
        self.widths.len()
    }

    fn over_budget(&self) -> Result<(), BuildError> {
        if self.bytes > self.budget || self.memo_bytes > self.budget {
            return Err(BuildError::OverBudget {
                what: "trie",
                key: "trie.max_bytes",
                bytes: self.bytes.max(self.memo_bytes),
                budget: self.budget,
            });
        }
        Ok(())
    }

    /// Starts field `f`: the expanded prefixes of every rule left, in order.
    fn enter_field(&self, rules: impl Iterator<Item = u32>, f: usize) -> Vec<Elem> {
        let nf = self.nf();
        let mut out = Vec::new();
        for r in rules {
            for &(value, len) in &self.prefixes[r as usize * nf + f] {
                out.push(Elem { rule: r, value, len });
            }
        }
        out
    }

    /// Builds the subtrie for the rules `elems` (priority order) at field
    /// `f`, bit `b`, placed at `level`; returns the entry pointing to it.
    fn node(&mut self, level: usize, mut f: usize, mut b: u8, mut elems: Vec<Elem>) -> Result<Entry, BuildError> {
        let nf = self.nf();
        loop {
            let Some(first) = elems.first() else { return Ok(Entry::MISS) };
            let covers = |e: &Elem| e.len <= b && self.tail_wild[e.rule as usize * (nf + 1) + f + 1];
            if covers(first) {
                return Ok(Entry::found(first.rule));
            }
            // Nothing after a rule that covers the rest of the key can win.
            if let Some(i) = elems.iter().position(covers) {
                elems.truncate(i + 1);
            }
            if b < self.widths[f] && elems.iter().any(|e| e.len > b) {
                break;
            }
            // Every rule left is satisfied on this field: go to the next one.
            let mut rules: Vec<u32> = elems.iter().map(|e| e.rule).collect();
            rules.dedup();
            f += 1;
            b = 0;
            elems = self.enter_field(rules.into_iter(), f);
        }
        let s = self.stride.min(self.widths[f] - b);
        let shift = self.widths[f] - b - s;
        let key = (level as u16, f as u8, b, elems);
        if let Some(&e) = self.memo.get(&key) {
            return Ok(e);
        }
        let elems = key.3;
        let mut children = Vec::with_capacity(1 << s);
        let mut child = Vec::new();
        for v in 0u32..(1 << s) {
            child.clear();
            for e in &elems {
                // Bits of the prefix that fall in this chunk must equal v's.
                let t = (e.len.min(b + s).saturating_sub(b)) as u32;
                let chunk = (e.value >> shift) & width_mask(s);
                if t == 0 || chunk >> (s as u32 - t) == v >> (s as u32 - t) {
                    child.push(*e);
                }
            }
            children.push(self.node(level + 1, f, b + s, child.clone())?);
        }
        while self.levels.len() <= level {
            self.levels.push(Vec::new());
        }
        let at = self.levels[level].len() as u32;
        self.levels[level].extend_from_slice(&children);
        self.bytes += (children.len() as u64) * ENTRY_BYTES as u64;
        let e = Entry { next: at, kind: Kind::Child, field: f as u8, shift, stride: s };
        self.memo_bytes += (elems.len() * std::mem::size_of::<Elem>() + 48) as u64;
        self.memo.insert((level as u16, f as u8, b, elems), e);
        self.over_budget()?;
        Ok(e)
    }
}

impl<const N: usize> Trie<N> {
    /// Builds the trie of `set` (rule expansion, then set pruning).
    pub fn build(set: &RuleSet<N>, config: &TrieConfig) -> Result<Trie<N>, BuildError> {
        let start = std::time::Instant::now();
        if !(1..=16).contains(&config.stride) {
            return Err(BuildError::BadConfig(format!("trie stride must be 1..16, got {}", config.stride)));
        }
        let widths: Vec<u8> = set.schema.fields.iter().map(|f| f.bits).collect();
        let nf = widths.len();
        let mut prefixes = Vec::with_capacity(set.len() * nf);
        let mut tail_wild = Vec::with_capacity(set.len() * (nf + 1));
        let mut expanded = 0f64;
        for (i, r) in set.rules.iter().enumerate() {
            let mut product = 1f64;
            for (f, &w) in widths.iter().enumerate() {
                let p = expand_field(&r.fields[f], w)
                    .map_err(|m| BuildError::Unsupported(format!("rule {i}, field {f}: {m}")))?;
                product *= p.len() as f64;
                prefixes.push(p);
            }
            expanded += product;
            let base = prefixes.len() - nf;
            let mut wild = vec![true; nf + 1];
            for f in (0..nf).rev() {
                wild[f] = wild[f + 1] && prefixes[base + f] == [(0, 0)];
            }
            tail_wild.extend(wild);
        }
        let mut b = Builder {
            widths,
            prefixes,
            tail_wild,
            stride: config.stride,
            levels: Vec::new(),
            memo: HashMap::new(),
            memo_bytes: 0,
            bytes: 0,
            budget: config.max_bytes,
        };
        let root = if nf == 0 {
            if set.is_empty() { Entry::MISS } else { Entry::found(0) }
        } else {
            let elems = b.enter_field(0..set.len() as u32, 0);
            b.node(0, 0, 0, elems)?
        };
        drop(std::mem::take(&mut b.memo));
        // Lay the levels back to back and turn level-relative child
        // pointers into absolute ones for the software lookup.
        let mut level_base = Vec::with_capacity(b.levels.len() + 1);
        let mut entries = Vec::with_capacity((b.bytes / ENTRY_BYTES as u64) as usize);
        for lv in &b.levels {
            level_base.push(entries.len() as u32);
            entries.extend_from_slice(lv);
        }
        level_base.push(entries.len() as u32);
        for (i, lv) in b.levels.iter().enumerate() {
            for j in 0..lv.len() {
                let e = &mut entries[level_base[i] as usize + j];
                if e.kind == Kind::Child {
                    e.next += level_base[i + 1];
                }
            }
        }
        let mut root = root;
        if root.kind == Kind::Child {
            root.next += level_base[0];
        }
        let mut trie = Trie {
            entries,
            level_base,
            root,
            stats: TrieStats {
                rules: set.len(),
                stride: config.stride,
                build_time: Duration::ZERO,
                nodes: 0,
                nodes_per_level: Vec::new(),
                bytes_per_level: b.levels.iter().map(|l| l.len() as u64 * ENTRY_BYTES as u64).collect(),
                bytes: b.bytes,
                expansion: if set.is_empty() { 1.0 } else { expanded / set.len() as f64 },
                max_depth: 0,
                mean_depth: 0.0,
            },
            rules: set.rules.clone(),
            schema: set.schema.clone(),
            config: *config,
        };
        trie.measure_shape();
        trie.stats.build_time = start.elapsed();
        Ok(trie)
    }

    /// Counts nodes per level and the lookup depth: the mass of uniformly
    /// random keys flows from the root down the (level-ordered) entries.
    fn measure_shape(&mut self) {
        let levels = self.level_base.len() - 1;
        let mut mass = vec![0f64; self.entries.len()];
        // Node starts per level: a child pointer names a node's first entry.
        let mut node_size: HashMap<u32, u8> = HashMap::new();
        let (mut max_depth, mut mean) = (0usize, 0f64);
        let mut visit = |e: Entry, m: f64, depth: usize, mass: &mut Vec<f64>, node_size: &mut HashMap<u32, u8>| {
            match e.kind {
                Kind::Child => {
                    node_size.insert(e.next, e.stride);
                    let share = m / (1u64 << e.stride) as f64;
                    for v in 0..(1usize << e.stride) {
                        mass[e.next as usize + v] += share;
                    }
                }
                _ => {
                    max_depth = max_depth.max(depth);
                    mean += m * depth as f64;
                }
            }
        };
        visit(self.root, 1.0, 0, &mut mass, &mut node_size);
        for lv in 0..levels {
            for i in self.level_base[lv]..self.level_base[lv + 1] {
                let e = self.entries[i as usize];
                visit(e, mass[i as usize], lv + 1, &mut mass, &mut node_size);
            }
        }
        let mut per_level = vec![0usize; levels];
        for &start in node_size.keys() {
            let lv = self.level_base.partition_point(|&b| b <= start) - 1;
            per_level[lv] += 1;
        }
        self.stats.nodes = node_size.len();
        self.stats.nodes_per_level = per_level;
        self.stats.max_depth = max_depth;
        self.stats.mean_depth = mean;
    }

    pub fn stats(&self) -> &TrieStats {
        &self.stats
    }

    /// Records the build's wall time (measured by the caller, so that the
    /// library itself never has to be trusted with a clock).
    pub fn set_build_time(&mut self, t: Duration) {
        self.stats.build_time = t;
    }

    /// Inserts `rule` at priority position `pos` (0 = highest). Rebuilds:
    /// see the module documentation for why the trie has no local update.
    pub fn insert(&mut self, pos: usize, rule: Rule<N>) -> Result<(), BuildError> {
        let mut rules = self.rules.clone();
        rules.insert(pos.min(rules.len()), rule);
        *self = Trie::build(&RuleSet::new(self.schema.clone(), rules), &self.config)?;
        Ok(())
    }

    /// Deletes the rule at position `pos`. Rebuilds (see [`Trie::insert`]).
    pub fn delete(&mut self, pos: usize) -> Result<(), BuildError> {
        if pos >= self.rules.len() {
            return Err(BuildError::BadConfig(format!("no rule {pos} to delete ({} rules)", self.rules.len())));
        }
        let mut rules = self.rules.clone();
        rules.remove(pos);
        *self = Trie::build(&RuleSet::new(self.schema.clone(), rules), &self.config)?;
        Ok(())
    }
}

impl<const N: usize> Classifier<N> for Trie<N> {
    #[inline]
    fn classify(&self, key: &Key<N>) -> Match {
        let mut e = self.root;
        loop {
            match e.kind {
                Kind::Child => {
                    let v = (key.0[e.field as usize] >> e.shift) & ((1u32 << e.stride) - 1);
                    e = self.entries[(e.next + v) as usize];
                }
                Kind::Found => return Some(e.next),
                Kind::Miss => return None,
            }
        }
    }

    fn classify_batch(&self, keys: &[Key<N>], out: &mut [i32]) {
        // Walk several keys in lockstep so their independent reads overlap.
        const LANES: usize = 8;
        let mut kc = keys.chunks_exact(LANES);
        let mut oc = out.chunks_exact_mut(LANES);
        for (ks, os) in (&mut kc).zip(&mut oc) {
            let mut e = [self.root; LANES];
            loop {
                let mut live = false;
                for l in 0..LANES {
                    if e[l].kind == Kind::Child {
                        let v = (ks[l].0[e[l].field as usize] >> e[l].shift) & ((1u32 << e[l].stride) - 1);
                        e[l] = self.entries[(e[l].next + v) as usize];
                        live = true;
                    }
                }
                if !live {
                    break;
                }
            }
            for l in 0..LANES {
                os[l] = if e[l].kind == Kind::Found { e[l].next as i32 } else { -1 };
            }
        }
        for (k, o) in kc.remainder().iter().zip(oc.into_remainder()) {
            *o = self.classify(k).map_or(-1, |r| r as i32);
        }
    }
}

impl<const N: usize> MemoryWalk<N> for Trie<N> {
    /// One read of one 8-byte entry per level, level `i` in bank `i`.
    fn walk(&self, key: &Key<N>, accesses: &mut Vec<MemAccess>) -> Match {
        let mut e = self.root;
        let mut level = 0usize;
        loop {
            match e.kind {
                Kind::Child => {
                    let v = (key.0[e.field as usize] >> e.shift) & ((1u32 << e.stride) - 1);
                    let at = e.next + v;
                    accesses.push(MemAccess {
                        bank: level as u16,
                        addr: (at - self.level_base[level]) as u64 * ENTRY_BYTES as u64,
                        bytes: ENTRY_BYTES,
                    });
                    e = self.entries[at as usize];
                    level += 1;
                }
                Kind::Found => return Some(e.next),
                Kind::Miss => return None,
            }
        }
    }
    fn memory_bytes(&self) -> u64 {
        self.stats.bytes
    }
    fn warm(&self, keys: &[Key<N>]) {
        // Every walk one level a step: the loads of a step are independent.
        // Each step's entries are asked for first, all of them, then read:
        // the reads of a step then overlap however many there are (not as
        // many as the CPU looks ahead past the loop's other instructions).
        let mut at = vec![self.root; keys.len()];
        let mut ix = vec![0u32; keys.len()];
        let mut live = true;
        while live {
            live = false;
            for ((e, key), i) in at.iter().zip(keys).zip(ix.iter_mut()) {
                if e.kind == Kind::Child {
                    *i = e.next + ((key.0[e.field as usize] >> e.shift) & ((1u32 << e.stride) - 1));
                    super::simd::prefetch(self.entries.as_ptr().wrapping_add(*i as usize));
                }
            }
            for (e, &i) in at.iter_mut().zip(&ix) {
                if e.kind == Kind::Child {
                    *e = self.entries[i as usize];
                    live = true;
                }
            }
        }
    }
}

impl<const N: usize> super::Structure<N> for Trie<N> {
    fn stats(&self) -> Vec<(&'static str, String)> {
        let s = &self.stats;
        let per_rule = if s.rules == 0 { 0.0 } else { s.bytes as f64 / s.rules as f64 };
        vec![
            ("rules", s.rules.to_string()),
            ("stride", s.stride.to_string()),
            ("node bytes", format!("{} (2^stride entries of {ENTRY_BYTES} bytes; narrower at a field's end)", (ENTRY_BYTES as u64) << s.stride)),
            ("build_ms", format!("{:.1}", s.build_time.as_secs_f64() * 1e3)),
            ("nodes", s.nodes.to_string()),
            ("levels (banks)", s.nodes_per_level.len().to_string()),
            ("nodes per level", format!("{:?}", s.nodes_per_level)),
            ("bytes", s.bytes.to_string()),
            ("bytes per rule", format!("{per_rule:.1}")),
            ("expansion", format!("{:.2}", s.expansion)),
            ("max depth", s.max_depth.to_string()),
            ("mean depth", format!("{:.2}", s.mean_depth)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::linear::Linear;
    use crate::rules::Schema;

    #[test]
    fn ranges_expand_to_minimal_prefixes() {
        assert_eq!(range_to_prefixes(0, 65535, 16), vec![(0, 0)]);
        assert_eq!(range_to_prefixes(80, 80, 16), vec![(80, 16)]);
        // 1024..65535 is 1024/6, 2048/5, 4096/4, 8192/3, 16384/2, 32768/1.
        assert_eq!(range_to_prefixes(1024, 65535, 16).len(), 6);
        // The worst 16-bit range needs 30 prefixes.
        assert_eq!(range_to_prefixes(1, 65534, 16).len(), 30);
        // bit 0 set, bit 2 clear, six free bits above bit 0: 64 values.
        let fm = FieldMatch::ternary(0x01, 0x05);
        let t = expand_field(&fm, 8).unwrap();
        assert_eq!(t.len(), 64);
        assert!(t.iter().all(|&(v, l)| l == 8 && fm.matches(v)));
    }

    fn set(rules: Vec<Rule>) -> RuleSet {
        RuleSet::new(Schema::five_tuple(), rules)
    }

    #[test]
    fn lookup_reads_one_entry_per_level_in_its_own_bank() {
        let r = |s: u32, sl: u8, d: u32| {
            Rule::new(&[FieldMatch::prefix(s, sl, 32), FieldMatch::ANY, FieldMatch::ANY, FieldMatch::range(d, d), FieldMatch::ANY], 0, 0)
        };
        let set = set(vec![r(0x0a00_0000, 8, 80), r(0, 0, 443)]);
        let t = Trie::build(&set, &TrieConfig { stride: 8, ..Default::default() }).unwrap();
        let mut acc = Vec::new();
        // 10.x.x.x port 80: one src byte, then two dport bytes.
        assert_eq!(t.walk(&Key::five_tuple(0x0a01_0101, 0, 0, 80, 6), &mut acc), Some(0));
        assert_eq!(acc.iter().map(|a| a.bank).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert!(acc.iter().all(|a| a.bytes == ENTRY_BYTES));
        // The rule with a wildcard source was pushed under 10/8 too.
        assert_eq!(t.classify(&Key::five_tuple(0x0a01_0101, 0, 0, 443, 6)), Some(1));
        assert_eq!(t.classify(&Key::five_tuple(0x0b01_0101, 0, 0, 443, 6)), Some(1));
        assert_eq!(t.classify(&Key::five_tuple(0x0b01_0101, 0, 0, 80, 6)), None);
        assert_eq!(t.stats().max_depth, 3);
        let lin = Linear::new(&set);
        for k in [Key::five_tuple(0x0a00_0000, 0, 0, 80, 0), Key::five_tuple(0xffff_ffff, 9, 9, 443, 9)] {
            assert_eq!(t.classify(&k), lin.classify(&k));
        }
    }

    #[test]
    fn warming_walks_every_key_to_its_end_and_changes_no_walk() {
        // Walks ending at depths 1 (a miss under 11/8), 3 (10/8 then the
        // port) and at the root's miss, side by side, then each walked.
        let r = |s: u32, sl: u8, d: u32| {
            Rule::new(&[FieldMatch::prefix(s, sl, 32), FieldMatch::ANY, FieldMatch::ANY, FieldMatch::range(d, d), FieldMatch::ANY], 0, 0)
        };
        let set = set(vec![r(0x0a00_0000, 8, 80), r(0x0c00_0000, 8, 443)]);
        let t = Trie::build(&set, &TrieConfig { stride: 8, ..Default::default() }).unwrap();
        let keys = [
            Key::five_tuple(0x0a01_0101, 0, 0, 80, 6),
            Key::five_tuple(0x0b01_0101, 0, 0, 80, 6),
            Key::five_tuple(0x0c00_0000, 1, 2, 443, 17),
            Key::five_tuple(0x0a01_0101, 0, 0, 81, 6),
        ];
        let before: Vec<_> = keys.iter().map(|k| { let mut a = Vec::new(); (t.walk(k, &mut a), a) }).collect();
        t.warm(&keys);
        t.warm(&[]);
        let after: Vec<_> = keys.iter().map(|k| { let mut a = Vec::new(); (t.walk(k, &mut a), a) }).collect();
        assert_eq!(before, after);
        let lin = Linear::new(&set);
        assert_eq!(after.iter().map(|w| w.0).collect::<Vec<_>>(), keys.iter().map(|k| lin.classify(k)).collect::<Vec<_>>());
    }

    #[test]
    fn over_budget_is_a_clean_error() {
        // Wildcard-source rules over distinct destinations, plus distinct
        // sources: set pruning copies every destination under every source.
        let mut rules = Vec::new();
        for i in 0..200u32 {
            rules.push(Rule::new(&[FieldMatch::prefix(i << 20, 12, 32), FieldMatch::ANY, FieldMatch::range(1, 65534)], 0, 0));
            rules.push(Rule::new(&[FieldMatch::ANY, FieldMatch::prefix(i << 16, 16, 32), FieldMatch::range(1, 65534)], 0, 0));
        }
        let e = Trie::build(&set(rules), &TrieConfig { stride: 4, max_bytes: 1 << 20 }).err().unwrap();
        assert!(matches!(e, BuildError::OverBudget { budget: 1048576, .. }), "{e}");
        assert!(e.to_string().contains("budget"), "{e}");
    }

    #[test]
    fn bad_stride_is_refused() {
        assert!(Trie::build(&set(vec![]), &TrieConfig { stride: 0, ..Default::default() }).is_err());
        assert!(Trie::build(&set(vec![]), &TrieConfig { stride: 17, ..Default::default() }).is_err());
    }
}

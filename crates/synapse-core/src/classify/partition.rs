//! A partitioned multi-way decision tree ("ptree"): the software classifier
//! that competes with DPDK's rte_acl, and an HBM-shaped walk for the ELU.
//!
//! **Partition (CutSplit).** Rules are grouped by which address fields they
//! are *small* on (a range at most `2^(bits/2)` wide); each group gets its
//! own tree, so a rule wildcarded on the source never replicates across
//! source cuts. Tiny groups join the group of rules small on nothing. A
//! lookup walks the trees in order of their best rule and skips a tree
//! whose best rule cannot beat the answer so far.
//!
//! **Nodes sized to a line.** An inner node holds up to 14 sorted
//! thresholds on one field in one 64-byte line (one cache line, one HBM
//! burst): the child is the number of thresholds below the key, found with
//! two AVX2 compares. Up to 15 children per node make the trees 3-4 levels
//! deep where a binary split tree (HyperSplit) is 15-20: fewer dependent
//! reads per lookup. Thresholds are chosen at quantiles of the rules' edges
//! in the node's box, on the field that gives the smallest largest child
//! while replication stays under `spfac` (up to 2 where that cut would
//! leave most rules in one child).
//!
//! **Leaves in SIMD blocks.** A leaf holds at most `bucket` rules in priority
//! order, eight per block as a structure of arrays (low bounds, high bounds,
//! rule index); one AVX2 pass tests a key against eight rules and the
//! first set lane is the best match ([`super::simd`]).
//!
//! **Batches.** [`Classifier::classify_batch`] walks groups of keys down a
//! tree in lockstep and prefetches each next node and leaf, so the memory
//! latencies of independent keys overlap (what rte_acl does with its
//! multi-trie walk).
//!
//! Rules with a non-contiguous ternary field (not a range) are kept aside
//! and searched linearly; ClassBench sets have none.
//!
//! **The side leaf.** A rule whose box reaches more than `wide_leaves`
//! leaves of its tree (on firewall sets, rules wildcarded on both
//! addresses: up to thousands of leaves) is built into none: the trees are
//! built again without those rules, which go to a small tree of their own
//! (walked last, its blocks tested only while they can beat a lane's match
//! so far), cut on the fields where they are not wildcards (ports,
//! protocol): a lookup there tests a leaf of a few of them, not all. An
//! insert that would reach as many goes there too, so an update writes at
//! most `wide_leaves` leaves of a tree, or the few of the side leaf's.
//!
//! **Updates** ([`PTree::insert`], [`PTree::delete`]; positions as in
//! [`super::dtree::DTree`]) write the trees in place. The first one gives
//! every rule a priority *key* spread over a key space (the lanes hold
//! keys, in the same order as the positions), so an insert takes a free
//! key between its neighbours' and no other rule's changes; a rank table
//! (per 32 keys their bits and a count in one word) turns the key a lookup
//! finds into the rule's current position in one load of it and a
//! popcount. An insert writes
//! its lane, in key order, into the leaves its box reaches; a delete takes
//! it out of them (no tombstones, no delta: the leaves are always exact).
//! Within a leaf's own blocks a lane goes in or out by moving the lanes
//! after it; a leaf that outgrows them moves to a *hole* (blocks another
//! leaf left, kept by size) or to new ones at the end, so no update copies
//! the structure: the blocks are compacted (one pass) only when more are
//! unused than used.
//! When neighbouring keys meet, a window of keys around them is spread
//! again (amortised, as in an order-maintenance list).

use super::simd::{self, Node, Row, BIAS, INNER, LANES, NODE_SLOTS, NODE_THRESHOLDS};
use super::{BuildError, Classifier, Match, MemAccess, MemoryWalk};
use crate::rules::{width_mask, Key, MatchKind, Rule, RuleSet, MAX_FIELDS};
use std::time::Duration;

/// Build parameters of the partitioned tree.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PTreeConfig {
    /// Most rules in a leaf.
    pub bucket: usize,
    /// Deepest node; a node this deep becomes a leaf whatever its size.
    pub max_depth: usize,
    /// A node's children may hold up to `spfac` times its rules in total.
    pub spfac: f64,
    /// Most bytes the structure may take.
    pub max_bytes: u64,
    /// Use the AVX2 kernels when the CPU has them (else scalar).
    pub simd: bool,
    /// With `simd`, the AVX-512 kernels when the CPU has them (else AVX2):
    /// off, an AVX-512 CPU measures the AVX2 path (AVX2-only machines).
    pub avx512: bool,
    /// Most trees: the smallest partitions join the catch-all one beyond.
    pub max_trees: usize,
    /// Sets of at most this many rules also get two and one trees with more
    /// replication (spfac 2 and 4), kept when the estimated lookup cost is
    /// at most 0.9x the partitioned one's (0: never; [`PTree::build`]).
    pub small: usize,
    /// Unused leaf blocks (holes no growing leaf has taken yet) tolerated
    /// before the blocks are compacted: `max(max_delta, blocks in use)`.
    pub max_delta: usize,
    /// A rule whose box reaches more than this many leaves of its tree is
    /// kept out of the trees, in the side leaf (searched after them, in
    /// priority order): an update of it writes one leaf, not thousands
    /// (0: never). `None`, the default: [`AUTO_WIDE`] when the build finds
    /// the rules past it make most of the leaf lane writes and are few
    /// (gen fw1 10K), else never.
    pub wide_leaves: Option<usize>,
}

impl Default for PTreeConfig {
    fn default() -> Self {
        PTreeConfig { bucket: 32, max_depth: 16, spfac: 1.2, max_bytes: 512 << 20, simd: true, avx512: true, max_trees: 4, small: 16384, max_delta: 64, wide_leaves: None }
    }
}

/// Build statistics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PTreeStats {
    pub rules: usize,
    pub trees: usize,
    pub inner_nodes: usize,
    pub leaves: usize,
    /// Leaf rule items (a rule counts once per leaf holding it).
    pub items: usize,
    pub blocks: usize,
    pub max_depth: usize,
    /// Rules searched linearly (non-range ternaries).
    pub odd: usize,
    /// Rules in the side leaf (`wide_leaves`).
    pub side: usize,
    pub bytes: u64,
    pub build_time: Duration,
    pub avx2: bool,
    pub avx512: bool,
}

#[derive(Clone, Copy, Debug)]
struct Tree {
    root: u32,
    /// Inner levels on its deepest path: the lockstep walk takes this many
    /// steps, a lane at a leaf staying there.
    depth: u32,
    /// Index of the tree's best rule: a key already matched at or above it
    /// skips the tree.
    min_prio: u32,
    /// The address fields its rules are small on (the partition's key; bit
    /// `i` for the `i`-th field cut on, so any key width fits):
    /// where a fold-in puts a rule small on the same ones.
    mask: u8,
    /// The side leaf: the tree of the wide rules, walked last (one leaf
    /// when an update made it).
    side: bool,
    /// Its leaves tested a pass at a time (`batch_fn`): chosen at the
    /// build where its lanes test many blocks ([`PTree::choose_passes`]).
    passes: bool,
}

/// A rule's box: per key word its (low, high) bounds.
type Box_<const N: usize> = [(u32, u32); N];
/// Leaves built so far by their rules: the first block.
type Leaves = std::collections::HashMap<Vec<u32>, u32>;

/// A set's rules as boxes, computed once for every build candidate.
struct Boxes<const N: usize> {
    /// Bits of each field.
    widths: Vec<u8>,
    /// Per rule its box; an empty box (a rule that is not one, or matches
    /// nothing) matches nothing.
    boxes: Vec<Box_<N>>,
    /// The rules that are boxes.
    slots: Vec<u32>,
    /// Rules that are not a box (index, rule), searched linearly.
    odd: Vec<(u32, Rule<N>)>,
}

impl<const N: usize> Boxes<N> {
    fn new(set: &RuleSet<N>) -> Self {
        let widths: Vec<u8> = set.schema.fields.iter().map(|f| f.bits).collect();
        let mut b = Boxes { boxes: Vec::with_capacity(set.len()), slots: Vec::new(), odd: Vec::new(), widths: Vec::new() };
        for (i, r) in set.rules.iter().enumerate() {
            match rule_box(r, &widths) {
                Ok(Some(bx)) => {
                    b.boxes.push(bx);
                    b.slots.push(i as u32);
                }
                Ok(None) => b.boxes.push([(0, 0); N]),
                Err(()) => {
                    b.odd.push((i as u32, *r));
                    b.boxes.push([(0, 0); N]);
                }
            }
        }
        b.widths = widths;
        b
    }
}

/// The partitioned multi-way decision tree.
pub struct PTree<const N: usize = MAX_FIELDS> {
    nf: usize,
    /// Leaf words: a field, or two fields of at most 16 bits packed
    /// (`pairs` bit set) so a block compares them in one row pair.
    words: Vec<(usize, Option<usize>)>,
    pairs: u32,
    /// A field of at most 8 bits folded into the blocks' index row (the
    /// protocol of a five-tuple): each lane's index in its upper 16 bits,
    /// the field's low bound and complemented high bound as two biased
    /// bytes below, so one byte-wise compare tests it ([`simd::fold_bounds`]):
    /// 7 rows per five-tuple block, not 9.
    fold: Option<usize>,
    /// The rule ids in a row of their own after the index row (`fold` on a
    /// set of 65,535 rules or more, whose ids do not fit beside the folded
    /// bounds): 8 rows per five-tuple block, 256 bytes, still fewer than
    /// unfolded and four whole lines.
    wide: bool,
    /// Per word: (field a, field b, shift of a, mask of b, bias): the packed
    /// word is `(key[a] << shift | key[b] & mask) ^ bias`.
    packing: [(u8, u8, u32, u32, u32); N],
    config: PTreeConfig,
    nodes: Vec<Node>,
    /// Leaf blocks, `2 * words + 1` rows each: (low, high) per word, then
    /// the rule indices (`u32::MAX` in unused lanes).
    rows: Vec<Row>,
    trees: Vec<Tree>,
    /// Rules that are not a box (index, rule), searched linearly.
    odd: Vec<(u32, Rule<N>)>,
    avx2: bool,
    /// The AVX-512 kernels (the CPU has AVX-512 F and VL).
    avx512: bool,
    stats: PTreeStats,
    /// The built set, by rule id (the position at the build), and per id
    /// its tree (`u32::MAX`: none): what the first update starts from.
    set: RuleSet<N>,
    tree_of: Vec<u32>,
    /// Per rule id that covered a leaf's whole box, the rules the build
    /// dropped after it there (`fill`: they could not win); they go back
    /// into the leaves when it is deleted.
    shadow: std::collections::HashMap<u32, Vec<u32>>,
    /// The parameters asked for (`config` may be a replicated variant).
    asked: PTreeConfig,
    /// None until the first update: answers are the rule ids as stored.
    upd: Option<Box<Updates<N>>>,
    /// What the ELU's memory holds ([`Image`]): built on the first walk,
    /// read by the walk alone.
    image: std::sync::OnceLock<Image<N>>,
}

/// The trees as the ELU's memory holds them, at the addresses the walk
/// charges: the nodes (64-byte lines from address 0), then the leaf blocks,
/// then the rules searched linearly. The walk ([`MemoryWalk::walk`]) reads
/// only this (and the rank table after updates), so its answer is what the
/// memory gives: a fault there is a wrong answer, not just wrong timing.
/// Built from the software trees on the first walk; an update writes the
/// leaves it changed to both; a compaction builds it again.
struct Image<const N: usize> {
    nodes: Vec<Node>,
    rows: Vec<Row>,
    odd: Vec<(u32, Rule<N>)>,
}

/// The updates in place ([`PTree::insert`], [`PTree::delete`]): every rule
/// by a slot, its priority key, and the rank table that turns the key a
/// lookup finds into the rule's current position.
#[derive(Clone, Debug)]
struct Updates<const N: usize> {
    /// Keys are below this (below the 16-bit empty id when ids sit beside
    /// the folded protocol); a multiple of 64.
    space: u32,
    /// The rank table: per 32 keys one word, their bits in use (low half)
    /// and the keys in use before them within their run of 64 words (high
    /// half); per run those before it (`hi`, `space / 512` bytes, stays in
    /// L1). A key's rank is one load of the table, one of `hi` and a
    /// popcount; an update adds to at most 63 + `space / 2048` counters.
    ranks: Vec<u64>,
    hi: Vec<u32>,
    /// Per key its slot (`u32::MAX`: none).
    slot_of: Vec<u32>,
    slots: Vec<Slot<N>>,
    free: Vec<u32>,
    live: usize,
    /// Per slot the rules the build dropped below it where it covered a
    /// leaf's whole box (slot, generation): they go back into the leaves
    /// when it is deleted.
    shadow: std::collections::HashMap<u32, Vec<(u32, u32)>>,
    /// Per block: the blocks of the allocation starting there (0: none),
    /// and the leaves using it (a leaf shared by others is copied before
    /// it is written).
    cap: Vec<u32>,
    refs: Vec<u32>,
    /// Per capacity (in blocks), the first blocks of the allocations no
    /// leaf uses: the next leaf that grows takes one ([`PTree::alloc`]),
    /// so the blocks left behind are reused where they lie instead of
    /// compacted away.
    holes: Vec<Vec<u32>>,
    /// Updates since the last compaction; blocks no leaf uses (those in
    /// `holes`); compactions so far.
    since: usize,
    garbage: usize,
    compactions: usize,
    /// Inserts into a tree (not the side leaf) so far, and those placed
    /// above the tree's best rule then (each lowers its best rule: fewer
    /// lookups skip the tree).
    inserts: usize,
    above: usize,
    widths: Vec<u8>,
    /// The fields the partition cuts on (where a new rule's tree is found).
    cut: Vec<usize>,
    /// A lane no key meets, as its column of a block.
    empty: Lane<N>,
    /// Buffers an update reuses, so none allocates: the leaves a box
    /// reaches and the walk's stack, a leaf's lanes, the leaves written,
    /// a block built for one lane, the first blocks a spread rewrote.
    reach: Vec<u32>,
    stack: Vec<u32>,
    lanes: Vec<Lane<N>>,
    dirty: Vec<u32>,
    block: Vec<Row>,
    seen: Vec<(u32, u32)>,
}

/// A rule as an update sees it: the rule, its box (`Err`: not a range,
/// searched aside), its tree, its key (`u32::MAX`: the slot is free) and
/// a generation that a delete moves on (so a stale shadow entry is known).
#[derive(Clone, Debug)]
struct Slot<const N: usize> {
    rule: Rule<N>,
    bx: Result<Option<Box_<N>>, ()>,
    tree: u32,
    key: u32,
    gen: u32,
}

/// One lane of a leaf block: its word in each row (at most `2 N + 2`
/// rows: 24 words for the 8-word key).
#[derive(Clone, Copy, Debug)]
struct Lane<const N: usize>([[u32; N]; 3]);

impl<const N: usize> Lane<N> {
    const ZERO: Self = Lane([[0; N]; 3]);
}

impl<const N: usize> std::ops::Index<usize> for Lane<N> {
    type Output = u32;
    #[inline(always)]
    fn index(&self, r: usize) -> &u32 {
        &self.0.as_flattened()[r]
    }
}

impl<const N: usize> std::ops::IndexMut<usize> for Lane<N> {
    #[inline(always)]
    fn index_mut(&mut self, r: usize) -> &mut u32 {
        &mut self.0.as_flattened_mut()[r]
    }
}

impl<const N: usize> Updates<N> {
    /// The number of keys in use below `k`: a rule's current position.
    #[inline(always)]
    fn rank(&self, k: u32) -> u32 {
        if k >= self.space {
            return self.live as u32;
        }
        let w = (k >> 5) as usize;
        let e = self.ranks[w];
        self.hi[w >> 6] + (e >> 32) as u32 + (e & ((1u64 << (k & 31)) - 1)).count_ones()
    }

    /// Whether key `k` is in use.
    #[cfg(test)]
    fn used(&self, k: u32) -> bool {
        self.ranks[(k >> 5) as usize] >> (k & 31) & 1 == 1
    }

    /// Sets or clears key `k`'s bit; the counters are left to the caller
    /// ([`Updates::mark`], [`Updates::recount_words`]).
    #[inline]
    fn set_bit(&mut self, k: u32, on: bool) {
        let (w, b) = ((k >> 5) as usize, 1u64 << (k & 31));
        self.ranks[w] = if on { self.ranks[w] | b } else { self.ranks[w] & !b };
    }

    /// [`Updates::rank`] of a key below `space` without checks: the batch
    /// path's, once per answer.
    ///
    /// # Safety
    /// `k < self.space`.
    #[inline(always)]
    unsafe fn rank_below(&self, k: u32) -> u32 {
        debug_assert!(k < self.space, "rank_below({k}) past the key space {}", self.space);
        let w = (k >> 5) as usize;
        let e = *self.ranks.get_unchecked(w);
        *self.hi.get_unchecked(w >> 6) + (e >> 32) as u32 + (e & ((1u64 << (k & 31)) - 1)).count_ones()
    }

    /// Marks key `k` used (`d` 1) or free (`d` -1).
    fn mark(&mut self, k: u32, d: i32) {
        let w = (k >> 5) as usize;
        self.ranks[w] ^= 1 << (k & 31);
        let end = (((w >> 6) + 1) * 64).min(self.ranks.len());
        // The count in the high half (never below 0, so no borrow).
        let step = ((d as i64) << 32) as u64;
        for x in &mut self.ranks[w + 1..end] {
            *x = x.wrapping_add(step);
        }
        for x in &mut self.hi[(w >> 6) + 1..] {
            *x = x.wrapping_add(d as u32);
        }
    }

    /// The counters from the bits.
    fn recount(&mut self) {
        self.recount_words(0, self.ranks.len());
    }

    /// The counters of words `[a, b)` from their bits, where the words
    /// before `a` are counted right and the keys in use in `[a, b)` are as
    /// many as before (a spread window: the counters after it stay).
    fn recount_words(&mut self, a: usize, b: usize) {
        let mut run = self.hi[a >> 6] + (self.ranks[a] >> 32) as u32;
        for w in a..b.min(self.ranks.len()) {
            if w % 64 == 0 {
                self.hi[w / 64] = run;
            }
            let bits = self.ranks[w] as u32;
            self.ranks[w] = ((run - self.hi[w / 64]) as u64) << 32 | bits as u64;
            run += bits.count_ones();
        }
    }

    /// The key at position `p` (< `live`).
    fn select(&self, p: u32) -> u32 {
        let s = self.hi.partition_point(|&h| h <= p) - 1;
        let r = p - self.hi[s];
        let run = &self.ranks[s * 64..((s + 1) * 64).min(self.ranks.len())];
        let w = s * 64 + run.partition_point(|&c| (c >> 32) as u32 <= r) - 1;
        let mut b = self.ranks[w] as u32;
        for _ in 0..r - (self.ranks[w] >> 32) as u32 {
            b &= b - 1;
        }
        (w as u32) << 5 | b.trailing_zeros()
    }

    /// The keys in use in `[s, e)`, in order.
    fn keys_in(&self, s: u32, e: u32) -> Vec<u32> {
        let mut v = Vec::new();
        for w in (s >> 5) as usize..(e as usize).div_ceil(32) {
            let mut b = self.ranks[w] as u32;
            while b != 0 {
                let k = (w as u32) << 5 | b.trailing_zeros();
                b &= b - 1;
                if k >= s && k < e {
                    v.push(k);
                }
            }
        }
        v
    }

    fn bytes(&self) -> u64 {
        (self.ranks.len() * 8 + self.hi.len() * 4) as u64
    }

    /// A leaf lets go of the allocation at block `fb`; the last one to
    /// leaves it a hole for [`PTree::alloc`].
    fn release(&mut self, fb: usize) {
        self.refs[fb] -= 1;
        if self.refs[fb] == 0 {
            let c = self.cap[fb] as usize;
            self.garbage += c;
            if self.holes.len() <= c {
                self.holes.resize_with(c + 1, Vec::new);
            }
            self.holes[c].push(fb as u32);
        }
    }
}

/// What lookups read, per lookup unless said ([`PTree::lookup_profile`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LookupProfile {
    /// Trees walked, inner nodes read, leaf blocks read, rule lanes in use
    /// among them (the rules compared), 64-byte lines of the blocks read,
    /// rank table look-ups (after updates).
    pub trees: f64,
    pub levels: f64,
    pub blocks: f64,
    pub lanes: f64,
    pub lines: f64,
    pub rank: f64,
    /// Distinct lines (nodes and blocks) per group of the batch path.
    pub group_lines: f64,
    /// Over all the keys: distinct lines and leaves read (the working set),
    /// and the bytes of the leaf blocks.
    pub distinct_lines: usize,
    pub distinct_leaves: usize,
    pub row_bytes: usize,
}

/// A step of one key's walk ([`PTree::walk_key`]): a tree entered, a
/// node read, a leaf block tested (tree, block).
enum Step {
    Tree(usize),
    Node(u32),
    Block(usize, usize),
}

/// Banks the memory walk spreads the structure over (by 64-byte line).
pub const WALK_BANKS: u64 = 32;

/// The pairs of the five-tuple's words: the ports.
const FIVE_TUPLE_PAIRS: u32 = 0b0100;
/// The five-tuple's words: source, destination, the ports as a pair; the
/// protocol is folded into the index row.
const FIVE_TUPLE_WORDS: [(usize, Option<usize>); 3] = [(0, None), (1, None), (2, Some(3))];

/// Lookups per group walked in lockstep by the batch path.
const GROUP: usize = 16;

/// Most bytes per rule a build candidate with fewer trees may take
/// ([`PTree::build`]).
const GROW: u64 = 1024;

/// Leaf blocks per walk of a tree (sample keys) above which its leaves
/// are tested a pass at a time ([`PTree::choose_passes`]).
const PASS_BLOCKS: f64 = 1.5;

/// The side leaf's bound when the build chooses it (`wide_leaves: None`).
pub const AUTO_WIDE: usize = 64;
/// ... and when at most one rule in this many would go there.
const AUTO_WIDE_FEW: usize = 50;
/// A cut whose largest child keeps more than this share of a node's rules
/// is tried again with replication up to `STUCK_SPFAC` ([`PTree::fill`]).
const STUCK: f64 = 0.6;
const STUCK_SPFAC: f64 = 2.0;
/// Beyond this many rules the build tries one candidate, not two
/// ([`PTree::build`]).
const LARGE: usize = 4096;

impl<const N: usize> PTree<N> {
    /// Builds the partitioned tree; on a set of at most `small` rules whose
    /// lookups walk several trees also two and one trees with more
    /// replication, and
    /// keeps the one whose lookups cost clearly less (instructions, weighed
    /// by size for cache misses); else the partition with smaller leaves
    /// when that costs less. Each builds in milliseconds on 1K rules.
    /// Fewer trees win on firewall-like sets (rules wildcarded on one
    /// address or the other), where the partition makes most lookups walk
    /// three trees.
    ///
    /// A build over its budget is tried again with half the depth, down to
    /// 2: replication compounds level by level where rules are wildcarded
    /// on many fields independently (the P4 ACLs' generated entries: about
    /// half of UPF's generated 10K `acls` wildcard any given field), and a
    /// shallower tree with larger leaves fits (that set: 4.2 KB per rule at
    /// depth 8, 60x the linear scan's lookups). A set that fits is built as
    /// asked.
    pub fn build(set: &RuleSet<N>, config: &PTreeConfig) -> Result<Self, BuildError> {
        let start = std::time::Instant::now();
        let err = match Self::build_deep(set, config) {
            Err(e @ BuildError::OverBudget { .. }) => e,
            r => return r,
        };
        let mut depth = config.max_depth / 2;
        while depth >= 2 {
            if let Ok(mut t) = Self::build_deep(set, &PTreeConfig { max_depth: depth, ..*config }) {
                t.stats.build_time = start.elapsed();
                return Ok(PTree { asked: *config, ..t });
            }
            depth /= 2;
        }
        Err(err)
    }

    /// [`PTree::build`] at `config`'s depth.
    fn build_deep(set: &RuleSet<N>, config: &PTreeConfig) -> Result<Self, BuildError> {
        let start = std::time::Instant::now();
        let boxes = Boxes::new(set);
        let t = Self::build_one(set, config, &boxes)?;
        // Large sets keep the block-by-block leaf loop (`choose_passes`).
        if set.len() > config.small {
            return Ok(PTree { set: set.clone(), ..t });
        }
        let keys = sample_keys(set, 512);
        let (cost, walked) = t.cost(&keys);
        // A structure far beyond the L2 cache pays in misses part of what
        // it saves in instructions, hence a weight on its size (per 64 MiB:
        // the batch walk's prefetches hide most of an L3 hit; one tree of
        // 1-2.5 MB ran ~30% faster than the partition on the fw 1K sets,
        // one of 5 MB ~1.5x on the ipc 10K set).
        let weigh = |t: &Self, cost: f64| cost * (1.0 + t.stats.bytes as f64 / (64u64 << 20) as f64);
        let mut pick = t;
        let mut pick_cost = weigh(&pick, cost);
        let mut narrow = *config;
        // Only when lookups walk more than one tree can fewer trees pay
        // (acl sets walk ~1.05: they keep their compact partition). Two
        // trees with some replication (firewall sets: rules wildcarded on
        // one address or the other), then one tree with more; the cheaper
        // one wins if it costs clearly less. Each may take at most `GROW`
        // bytes per rule: a build past that stops early (build time), and
        // memory stays under a tenth of rte_acl's multi-trie on the sets
        // where this pays (2-27 KB per rule on ClassBench fw and ipc sets).
        if pick.trees.len() > 1 && walked >= 1.2 {
            let cap = (set.len() as u64 * GROW).min(config.max_bytes);
            let base = pick_cost;
            // On a larger set one candidate (build time): one tree when
            // the partition's lookups mostly walk one (ipc sets), else its
            // replication explodes (gen fw 10K: 67 MB, half a second to
            // build) and two trees it is, with leaves of 24 and replication
            // up to 3 (no second build with smaller leaves follows there).
            // On gen fw 10K leaves of 24 ran 1.18x the lookups/s of leaves
            // of 32 at 158 B/rule, not 121 (blocks from L2 cost more than
            // the estimate below says), and spfac 3 1.08x that of 2 at 192
            // B/rule (its leaves take about 60 % of a lookup's time, its
            // walk the rest: fewer rules per leaf, fewer blocks tested).
            let tries: &[(usize, f64, usize)] = match set.len() > LARGE {
                false => &[(2, 2.0, config.bucket), (1, 4.0, config.bucket)],
                true if walked < 1.4 => &[(1, 4.0, config.bucket)],
                true => &[(2, 3.0, config.bucket.min(24))],
            };
            for &(trees, spfac, bucket) in tries {
                let c = PTreeConfig { max_trees: trees, spfac: config.spfac.max(spfac), max_bytes: cap, bucket, ..*config };
                if let Ok(a) = Self::build_one(set, &c, &boxes) {
                    let ac = weigh(&a, a.cost(&keys).0);
                    if ac <= 0.9 * base && ac < pick_cost {
                        pick = PTree { asked: *config, ..a };
                        pick_cost = ac;
                        // And that many trees with smaller leaves (below).
                        narrow = c;
                    }
                }
            }
        }
        // Then the pick with smaller leaves and more replication: fewer
        // blocks tested per lookup for a few more nodes (gen acl 1K: 1.2-1.3x
        // the lookups/s at 43 -> 53-66 B/rule; one tree of gen ipc 1K: ~1.3x).
        // At most 1.5x its bytes: the structure's small size is one of its
        // goals (acl1_1k's leaves of 24 would take 1.8x for ~10 %).
        // Not on larger sets: build time, for a few per cent, except with
        // keys past 8 words, leaves of one block: a block is then 9-16
        // lines, and leaves of 32 test two of them per lookup (the switch
        // program's IPv6 ACLs, 13 and 15 words, gen 10K: 1.2x the lookups/s
        // at 1.2x the bytes; leaves of 16 gained 1.05x).
        let cap = pick.stats.bytes * 3 / 2;
        let buckets: &[usize] = match (set.len() > LARGE, N > 8) {
            (false, _) => &[24, 16],
            (true, true) => &[LANES],
            (true, false) => &[],
        };
        for &bucket in buckets {
            let c = PTreeConfig { bucket: bucket.min(narrow.bucket), spfac: narrow.spfac.max(4.0), ..narrow };
            if c == narrow {
                continue;
            }
            let c = PTreeConfig { max_bytes: cap.min(narrow.max_bytes), ..c };
            // Past the cap the build stops (smaller leaves only take more).
            // There the first size may still fit with the pick's own
            // replication (acl1_1k: 44 -> 48 B/rule, 1.2x the lookups/s;
            // its leaves of 16 would pass a tenth of rte_acl's bytes), and
            // then no smaller ones are tried.
            let (a, more) = match Self::build_one(set, &c, &boxes) {
                Ok(a) => (a, true),
                Err(_) if bucket == buckets[0] && narrow.spfac < c.spfac => match Self::build_one(set, &PTreeConfig { spfac: narrow.spfac, ..c }, &boxes) {
                    Ok(a) => (a, false),
                    Err(_) => break,
                },
                Err(_) => break,
            };
            let ac = weigh(&a, a.cost(&keys).0);
            // Leaves of 16 only after leaves of 24 paid at under 1.2x the
            // bytes (build time: gen acl 1K's 16 would be over the cap).
            let go_on = more && ac < pick_cost && a.stats.bytes * 5 <= cap * 4;
            if ac < pick_cost {
                pick = PTree { asked: *config, ..a };
                pick_cost = ac;
            }
            if !go_on {
                break;
            }
        }
        pick.choose_passes(&keys);
        pick.set = set.clone();
        pick.stats.build_time = start.elapsed();
        Ok(pick)
    }

    /// Marks the trees whose walks over `keys` test more than
    /// `PASS_BLOCKS` leaf blocks on average: the batch path tests their
    /// leaves a pass at a time, a block of every lane per pass, without a
    /// branch per lane on whether a block matched (a mispredict where
    /// lanes stop at different blocks: gen fw 10K's first tree, 1.8
    /// blocks per walk, 1.1x the lookups/s). Where most lanes test one
    /// block the passes' overhead costs more than the branches (acl1_1k,
    /// 1.4 blocks per walk: 0.66x). Not on sets past `small`: there the
    /// leaves' misses weigh more than the branches (gen ipc 100K: 1.23x
    /// the instructions for 0.64x the mispredicts, no faster).
    fn choose_passes(&mut self, keys: &[Key<N>]) {
        // per tree: walks, leaf blocks tested
        let mut walks = vec![(0u32, 0u32); self.trees.len()];
        for key in keys {
            self.walk_key(key, |s| match s {
                Step::Tree(t) => walks[t].0 += 1,
                Step::Block(t, _) => walks[t].1 += 1,
                Step::Node(_) => {}
            });
        }
        for (tree, &(n, b)) in self.trees.iter_mut().zip(&walks) {
            tree.passes = b as f64 > PASS_BLOCKS * n.max(1) as f64;
        }
    }

    /// Estimated lookup cost over `keys` (instructions of the batch path,
    /// roughly): per tree walked a fixed part, per inner node and per leaf
    /// block tested their share; and the trees walked per lookup.
    fn cost(&self, keys: &[Key<N>]) -> (f64, f64) {
        let stride = self.stride();
        let (mut c, mut walked) = (0u64, 0u64);
        for key in keys {
            let pk = self.pack_key(key);
            let mut best = self.odd_best(key);
            for tree in &self.trees {
                if tree.min_prio >= best {
                    continue;
                }
                // Setting a tree up for a group and the branches a walk
                // by some lanes only costs (mispredicted).
                c += 40;
                walked += 1;
                let mut i = tree.root;
                while !self.nodes[i as usize].is_leaf() {
                    let n = &self.nodes[i as usize];
                    i = n.base + simd::below_scalar(n, key.0[n.field()] ^ BIAS);
                    c += 22;
                }
                let n = &self.nodes[i as usize];
                for b in n.first_block()..n.first_block() + n.blocks() {
                    let blk = &self.rows[b * stride..(b + 1) * stride];
                    if self.id_of(blk, 0) >= best {
                        break;
                    }
                    c += 34;
                    let m = self.test_block(blk, &pk);
                    if m != 0 {
                        best = best.min(self.id_of(blk, m.trailing_zeros() as usize));
                        break;
                    }
                }
            }
        }
        let n = keys.len().max(1) as f64;
        (c as f64 / n, walked as f64 / n)
    }

    /// One candidate: the trees, then, when some rules reach more than
    /// `wide_leaves` leaves of theirs, the trees again without them and
    /// those rules in the side leaf (one rebuild, not iterated).
    fn build_one(set: &RuleSet<N>, config: &PTreeConfig, bx: &Boxes<N>) -> Result<Self, BuildError> {
        let start = std::time::Instant::now();
        let t = Self::build_trees(set, config, bx, &[])?;
        let k = config.wide_leaves.unwrap_or(AUTO_WIDE);
        if k == 0 {
            return Ok(t);
        }
        // the same test an insert makes (`tree_for`), stopping at the (k + 1)-th leaf
        let mut stack = Vec::new();
        let wide: Vec<u32> = (bx.slots.iter().copied())
            .filter(|&s| {
                let tr = t.tree_of[s as usize];
                tr != u32::MAX && t.reaches_over(t.trees[tr as usize].root, &bx.boxes[s as usize], k, &mut stack)
            })
            .collect();
        if wide.is_empty() {
            return Ok(t);
        }
        if config.wide_leaves.is_none() {
            // Chosen per set: the side leaf costs lookups (one more leaf
            // walked: gen fw1 1K 0.5x, ipc1 1K 0.85x), so only where the
            // wide rules are few and their lanes most of what an update
            // writes (gen fw1 10K: 90 rules, updates 2.3x as fast).
            if wide.len() * AUTO_WIDE_FEW > bx.slots.len() {
                return Ok(t);
            }
            let mut items = 0usize;
            for &s in &wide {
                let root = t.trees[t.tree_of[s as usize] as usize].root;
                t.walk_reached(root, &bx.boxes[s as usize], &mut stack, |_| {
                    items += 1;
                    true
                });
            }
            if 2 * items <= t.stats.items {
                return Ok(t);
            }
        }
        let mut t = Self::build_trees(set, config, bx, &wide)?;
        t.stats.build_time = start.elapsed();
        Ok(t)
    }

    /// The trees over the box rules but `aside` (ascending), which go to
    /// the side leaf.
    fn build_trees(set: &RuleSet<N>, config: &PTreeConfig, bx: &Boxes<N>, aside: &[u32]) -> Result<Self, BuildError> {
        let start = std::time::Instant::now();
        if config.bucket == 0 || config.spfac < 1.0 || config.max_depth == 0 {
            return Err(BuildError::BadConfig(format!(
                "ptree needs bucket >= 1, spfac >= 1, max_depth >= 1 (got {}, {}, {})",
                config.bucket, config.spfac, config.max_depth
            )));
        }
        let nf = set.schema.len();
        let widths = &bx.widths;
        // Fields of at most 16 bits pair up into one word.
        let mut words: Vec<(usize, Option<usize>)> = Vec::new();
        let mut pending: Option<usize> = None;
        for f in 0..nf {
            if widths[f] > 16 {
                words.push((f, None));
            } else if let Some(a) = pending.take() {
                words.push((a, Some(f)));
            } else {
                pending = Some(f);
            }
        }
        if let Some(a) = pending {
            words.push((a, None));
        }
        let fold = match words.last() {
            Some(&(f, None)) if widths[f] <= 8 && words.len() > 1 => {
                words.pop();
                Some(f)
            }
            _ => None,
        };
        let pairs = words.iter().enumerate().filter(|(_, w)| w.1.is_some()).fold(0u32, |m, (i, _)| m | 1 << i);
        let mut packing = [(0u8, 0u8, 0u32, 0u32, 0u32); N];
        for (w, &(a, b)) in words.iter().enumerate() {
            packing[w] = match b {
                None => (a as u8, a as u8, 0, 0, BIAS),
                Some(b) => (a as u8, b as u8, 16, 0xffff, simd::PAIR_BIAS),
            };
        }
        let mut t = PTree {
            nf,
            words,
            pairs,
            fold,
            wide: fold.is_some() && set.len() >= 0xffff,
            packing,
            config: *config,
            nodes: Vec::new(),
            rows: Vec::new(),
            trees: Vec::new(),
            odd: Vec::new(),
            avx2: config.simd && simd::has_avx2(),
            avx512: config.simd && config.avx512 && simd::has_avx512(),
            stats: PTreeStats::default(),
            // The rules only for the pick (`build`): a candidate's copy
            // would be written, and dropped, for nothing.
            set: RuleSet::new(set.schema.clone(), Vec::new()),
            tree_of: vec![u32::MAX; set.len()],
            shadow: Default::default(),
            asked: *config,
            upd: None,
            image: std::sync::OnceLock::new(),
        };
        let (boxes, slots) = (&bx.boxes[..], &bx.slots[..]);
        t.odd = bx.odd.clone();
        // CutSplit partition on the first two address fields.
        let cut_fields: Vec<usize> =
            (0..nf).filter(|&f| set.schema.fields[f].kind == MatchKind::Lpm && widths[f] >= 8).take(2).collect();
        let mut groups: Vec<(u8, Vec<u32>)> = Vec::new();
        for &s in slots {
            if aside.binary_search(&s).is_ok() {
                continue;
            }
            let bx = &boxes[s as usize];
            let mut small = 0u8;
            for (i, &f) in cut_fields.iter().enumerate() {
                if ((bx[f].1 - bx[f].0) as u64) < 1u64 << (widths[f] / 2) {
                    small |= 1 << i;
                }
            }
            match groups.iter_mut().find(|(m, _)| *m == small) {
                Some((_, v)) => v.push(s),
                None => groups.push((small, vec![s])),
            }
        }
        // Groups too small to pay for a tree walk join the catch-all group
        // (rules small on nothing), and so do the smallest beyond `max_trees`.
        if !groups.iter().any(|(m, _)| *m == 0) {
            groups.push((0, Vec::new()));
        }
        groups.sort_by_key(|(m, v)| (*m != 0, v.len()));
        let floor = (slots.len() / 32).max(config.bucket);
        while groups.len() > 1 && (groups.len() > config.max_trees.max(1) || groups[1].1.len() < floor) {
            let (_, v) = groups.remove(1);
            groups[0].1.extend(v);
        }
        groups.retain(|(_, v)| !v.is_empty());
        for (_, v) in &mut groups {
            v.sort_unstable();
        }
        groups.sort_by_key(|(_, v)| v[0]);
        let full = {
            let mut b = [(0u32, 0u32); N];
            for f in 0..nf {
                b[f] = (0, width_mask(widths[f]));
            }
            b
        };
        let mut max_depth = 0;
        let mut leaves = std::collections::HashMap::new();
        // Block 0 matches nothing: empty leaves point at it, so the batch
        // path reads a block from every leaf without a test.
        t.nodes.push(empty_leaf());
        t.make_leaf(0, Vec::new(), &boxes, &mut leaves)?;
        t.nodes.clear();
        for (mask, v) in groups {
            let root = t.nodes.len() as u32;
            t.nodes.push(empty_leaf());
            let d = t.fill(root, v.clone(), full, 0, &boxes, &mut leaves)?;
            for &s in &v {
                t.tree_of[s as usize] = t.trees.len() as u32;
            }
            t.trees.push(Tree { root, depth: d as u32, min_prio: v[0], mask, side: false, passes: false });
            max_depth = max_depth.max(d);
        }
        if !aside.is_empty() {
            let root = t.nodes.len() as u32;
            t.nodes.push(empty_leaf());
            // A tree of their own, not one leaf: cut on the fields where
            // they are not wildcards (ports, protocol), a lookup that
            // reaches it tests a leaf of a few of them, not all (gen fw
            // 10K: 90 rules, 6.8 -> 1.6 blocks per walk of it), and an
            // update there still writes only the few leaves it has.
            let d = t.fill(root, aside.to_vec(), full, 0, boxes, &mut leaves)?;
            for &s in aside {
                t.tree_of[s as usize] = t.trees.len() as u32;
            }
            t.trees.push(Tree { root, depth: d as u32, min_prio: aside[0], mask: 0, side: true, passes: false });
            max_depth = max_depth.max(d);
        }
        let leaves = t.nodes.iter().filter(|n| n.is_leaf()).count();
        t.stats = PTreeStats {
            rules: set.len(),
            trees: t.trees.len(),
            inner_nodes: t.nodes.len() - leaves,
            leaves,
            items: 0,
            blocks: t.rows.len() / t.stride(),
            max_depth,
            odd: t.odd.len(),
            side: aside.len(),
            bytes: t.bytes(),
            build_time: start.elapsed(),
            avx2: t.avx2,
            avx512: t.avx512,
        };
        let s = t.stride();
        let empty = if t.fold.is_some() && !t.wide { simd::FOLD_EMPTY } else { u32::MAX };
        t.stats.items = t.rows.chunks(s).map(|b| b[s - 1].0.iter().filter(|&&x| x != empty).count()).sum();
        for v in t.shadow.values_mut() {
            v.sort_unstable();
            v.dedup();
        }
        Ok(t)
    }

    /// The lanes of leaf block `blk` that the packed key `pk` matches
    /// (scalar, for the cost model and the memory walk).
    fn test_block(&self, blk: &[Row], pk: &[u32; N]) -> u32 {
        match self.words.len() {
            3 => simd::block_scalar::<3, N>(blk, pk, self.pairs, self.fold.is_some()),
            nw => simd::block_scalar_n(blk, pk, nw, self.pairs, self.fold.is_some()),
        }
    }

    /// The memory image of the trees ([`Image`]), built on first use.
    fn image(&self) -> &Image<N> {
        self.image.get_or_init(|| Image { nodes: self.nodes.clone(), rows: self.rows.clone(), odd: self.odd.clone() })
    }

    /// A fault in the ELU's memory, for tests (the walk reads the image,
    /// `classify` the software trees): `f` rewrites each node line.
    #[cfg(test)]
    pub(crate) fn corrupt_nodes(&mut self, f: impl FnMut(&mut Node)) {
        self.image();
        self.image.get_mut().unwrap().nodes.iter_mut().for_each(f);
    }

    /// Rows per leaf block.
    fn stride(&self) -> usize {
        block_layout(self.words.len(), self.fold.is_some(), self.wide).0
    }

    fn bytes(&self) -> u64 {
        (self.nodes.len() * std::mem::size_of::<Node>() + self.rows.len() * std::mem::size_of::<Row>()) as u64
            + self.odd.len() as u64 * super::linear::RULE_BYTES as u64
    }

    pub fn stats(&self) -> &PTreeStats {
        &self.stats
    }

    /// Bits of each field of the built set (for `rule_box`).
    fn widths(&self) -> Vec<u8> {
        self.set.schema.fields.iter().map(|f| f.bits).collect()
    }

    /// Rules now (after updates).
    pub fn len(&self) -> usize {
        self.upd.as_ref().map_or(self.set.len(), |u| u.live)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Updates since the last compaction, and leaf blocks no leaf uses
    /// (left behind by leaves that grew or were copied).
    pub fn pending(&self) -> (usize, usize) {
        self.upd.as_ref().map_or((0, 0), |u| (u.since, u.garbage))
    }

    /// The rule set as it is now (after updates), in priority order.
    pub fn rule_set(&self) -> RuleSet<N> {
        let Some(u) = &self.upd else {
            return self.set.clone();
        };
        let rules = u.keys_in(0, u.space).into_iter().map(|k| u.slots[u.slot_of[k as usize] as usize].rule).collect();
        RuleSet::new(self.set.schema.clone(), rules)
    }

    /// Whether the trees can take updates in place: rows to write and a
    /// tree to write a rule into, and room in the key space.
    fn in_place(&self) -> bool {
        !self.words.is_empty() && !self.trees.is_empty() && self.len() + 1 < self.key_space() as usize
    }

    fn key_space(&self) -> u32 {
        if self.fold.is_some() && !self.wide {
            // Below 0xffff, an empty lane's id.
            0xffc0
        } else {
            (self.set.len().max(self.len()) as u64 * 8).clamp(1 << 16, 1 << 31).next_multiple_of(4096) as u32
        }
    }

    /// The lane layout: the row of a lane's id, its shift.
    #[inline(always)]
    fn id_row(&self) -> (usize, u32) {
        let (_, idr, sh) = block_layout(self.words.len(), self.fold.is_some(), self.wide);
        (idr, sh)
    }

    fn lane_key(&self, w: &Lane<N>) -> u32 {
        let (idr, sh) = self.id_row();
        w[idr] >> sh
    }

    fn set_lane_key(&self, w: &mut Lane<N>, k: u32) {
        let (idr, sh) = self.id_row();
        if self.wide {
            w[idr] = k;
            w[idr - 1] = if self.fold.is_some() { k << 16 | w[idr - 1] & 0xffff } else { k };
        } else if sh == 16 {
            w[idr] = k << 16 | w[idr] & 0xffff;
        } else {
            w[idr] = k;
        }
    }

    /// The first update: every rule id (its position at the build) becomes
    /// a key spread over the key space, so an insert finds a free key
    /// between its neighbours' and no other rule's changes. One pass over
    /// the blocks.
    fn start_updates(&mut self) {
        if self.upd.is_some() {
            return;
        }
        let n = self.set.len();
        let space = self.key_space();
        let keys: Vec<u32> = (0..n as u64).map(|i| ((2 * i + 1) * space as u64 / (2 * n as u64)) as u32).collect();
        let stride = self.stride();
        let (idr, sh) = self.id_row();
        let mut col = Lane::ZERO;
        for b in 0..self.rows.len() / stride {
            for l in 0..LANES {
                let id = self.rows[b * stride + idr].0[l] >> sh;
                if id as usize >= n {
                    continue; // an empty lane
                }
                for r in 0..stride {
                    col[r] = self.rows[b * stride + r].0[l];
                }
                self.set_lane_key(&mut col, keys[id as usize]);
                for r in 0..stride {
                    self.rows[b * stride + r].0[l] = col[r];
                }
            }
        }
        let map = |x: u32| if (x as usize) < n { keys[x as usize] } else { x };
        let blocks = self.rows.len() / stride;
        let (mut cap, mut refs) = (vec![0u32; blocks], vec![0u32; blocks]);
        for nd in &mut self.nodes {
            if nd.is_leaf() {
                *nd = Node::leaf(nd.base, nd.first_block() as u32, nd.blocks() as u32, map(nd.first_rule()));
                if nd.blocks() > 0 {
                    cap[nd.first_block()] = nd.blocks() as u32;
                    refs[nd.first_block()] += 1;
                }
            }
        }
        for t in &mut self.trees {
            t.min_prio = map(t.min_prio);
        }
        for o in &mut self.odd {
            o.0 = map(o.0);
        }
        let widths = self.widths();
        let cut = (0..self.nf).filter(|&f| self.set.schema.fields[f].kind == MatchKind::Lpm && widths[f] >= 8).take(2).collect();
        let words = (space / 32) as usize;
        let mut u = Updates {
            space,
            ranks: vec![0; words],
            hi: vec![0; words.div_ceil(64)],
            slot_of: vec![u32::MAX; space as usize],
            slots: Vec::with_capacity(n),
            free: Vec::new(),
            live: n,
            shadow: Default::default(),
            cap,
            refs,
            holes: Vec::new(),
            since: 0,
            garbage: 0,
            compactions: 0,
            inserts: 0,
            above: 0,
            widths,
            cut,
            empty: Lane::ZERO,
            reach: Vec::new(),
            stack: Vec::new(),
            lanes: Vec::new(),
            dirty: Vec::new(),
            block: Vec::new(),
            seen: Vec::new(),
        };
        for (id, r) in self.set.rules.iter().enumerate() {
            let k = keys[id];
            u.set_bit(k, true);
            u.slot_of[k as usize] = id as u32;
            u.slots.push(Slot { rule: *r, bx: rule_box(r, &u.widths), tree: self.tree_of[id], key: k, gen: 0 });
        }
        u.recount();
        for (&k, v) in &self.shadow {
            u.shadow.insert(k, v.iter().map(|&s| (s, 0)).collect());
        }
        let mut tmp = Vec::new();
        push_block::<N>(&self.words, self.fold, self.wide, &mut tmp, &[]);
        for (r, row) in tmp.iter().enumerate() {
            u.empty[r] = row.0[0];
        }
        self.upd = Some(Box::new(u));
        self.image = std::sync::OnceLock::new();
        // Room for the leaves that grow before holes are left to reuse:
        // growing the rows past their capacity copies them all.
        self.rows.reserve(self.rows.len() / 2);
    }

    /// The tree a new rule of box `bx` goes to: the partition's for the
    /// address fields it is small on, else one whose are a subset.
    fn tree_for(&mut self, u: &mut Updates<N>, bx: &Box_<N>) -> u32 {
        let mut small = 0u8;
        for (i, &f) in u.cut.iter().enumerate() {
            if ((bx[f].1 - bx[f].0) as u64) < 1u64 << (u.widths[f] / 2) {
                small |= 1 << i;
            }
        }
        let trees = || (0..self.trees.len()).filter(|&i| !self.trees[i].side);
        let tree = (trees().find(|&i| self.trees[i].mask == small))
            .or_else(|| trees().find(|&i| self.trees[i].mask & !small == 0))
            .unwrap_or(0) as u32;
        // A rule that would reach many of its leaves goes to the side leaf.
        let k = match self.asked.wide_leaves {
            Some(k) => k,
            // auto: the bound the build used, if it made a side leaf
            None if self.trees.iter().any(|t| t.side) => AUTO_WIDE,
            None => 0,
        };
        if k > 0 && !self.trees[tree as usize].side && self.reaches_over(self.trees[tree as usize].root, bx, k, &mut u.stack) {
            return self.side_tree();
        }
        tree
    }

    /// The side leaf's tree, made (empty, walked last) when the build left
    /// none.
    fn side_tree(&mut self) -> u32 {
        if let Some(i) = self.trees.iter().position(|t| t.side) {
            return i as u32;
        }
        let root = self.nodes.len() as u32;
        self.nodes.push(Node::leaf(root, 0, 0, u32::MAX));
        self.trees.push(Tree { root, depth: 0, min_prio: u32::MAX, mask: 0, side: true, passes: false });
        // The memory image is made again on the next walk (it lacks the node).
        self.image = std::sync::OnceLock::new();
        (self.trees.len() - 1) as u32
    }

    /// Edits leaf `i`'s lanes (in key order) with `edit` (false: nothing
    /// changed) and writes them back: in place when the leaf owns its
    /// blocks and they have room, else into new blocks at the end (one
    /// block of room more). Returns the allocation written.
    fn edit_leaf(&mut self, u: &mut Updates<N>, i: u32, lanes: &mut Vec<Lane<N>>, edit: impl FnOnce(&mut Vec<Lane<N>>) -> bool) -> Option<usize> {
        let stride = self.stride();
        let n = self.nodes[i as usize];
        let fb = n.first_block();
        lanes.clear();
        let ek = self.lane_key(&u.empty);
        for b in fb..fb + n.blocks() {
            for l in 0..LANES {
                let mut w = Lane::ZERO;
                for r in 0..stride {
                    w[r] = self.rows[b * stride + r].0[l];
                }
                if self.lane_key(&w) != ek {
                    lanes.push(w);
                }
            }
        }
        if !edit(lanes) {
            return None;
        }
        // A leaf holds a reference to its allocation while it has blocks
        // (an empty one points at none: the build's empty leaves point
        // where the next leaf's blocks begin).
        let need = lanes.len().div_ceil(LANES);
        let owned = n.blocks() > 0 && u.refs[fb] == 1;
        let (at, clear) = if need == 0 {
            if n.blocks() > 0 {
                u.release(fb);
            }
            (0, 0)
        } else if owned && u.cap[fb] as usize >= need {
            (fb, n.blocks().max(need))
        } else {
            if n.blocks() > 0 {
                u.release(fb);
            }
            (self.alloc(u, need + 1), need)
        };
        for j in 0..clear * LANES {
            let w = lanes.get(j).unwrap_or(&u.empty);
            let (b, l) = (at + j / LANES, j % LANES);
            for r in 0..stride {
                self.rows[b * stride + r].0[l] = w[r];
            }
        }
        let first = lanes.first().map_or(u32::MAX, |w| self.lane_key(w));
        self.nodes[i as usize] = Node::leaf(n.base, at as u32, need as u32, first);
        Some(at)
    }

    /// Writes lane `w` of key `key` into leaf `i` in key order (`w` None:
    /// takes key `key`'s lane out) by moving the lanes after it one place
    /// within the leaf's own blocks, row by row: no copy of the leaf. The
    /// lanes are packed (the empty ones after them). Some(false): nothing to
    /// change; None: the leaf shares its blocks, has no room left, or would
    /// be emptied ([`PTree::edit_leaf`] does those).
    fn shift_lane(&mut self, u: &Updates<N>, i: u32, key: u32, w: Option<&Lane<N>>) -> Option<bool> {
        let n = self.nodes[i as usize];
        let (fb, nb) = (n.first_block(), n.blocks());
        if nb == 0 || u.refs[fb] != 1 {
            return None;
        }
        let stride = self.stride();
        let (idr, sh) = self.id_row();
        let ek = self.lane_key(&u.empty);
        let base = |j: usize| (fb + j / LANES) * stride;
        // The lanes are packed in key order and an empty lane's key is above
        // every rule's: the lanes in use and the key's place, by bisection.
        let key_at = |j: usize| self.rows[base(j) + idr].0[j % LANES] >> sh;
        let (mut lo, mut hi) = (0, nb * LANES);
        while lo < hi {
            let m = (lo + hi) / 2;
            if key_at(m) < ek { lo = m + 1 } else { hi = m }
        }
        let mut count = lo;
        let (mut lo, mut hi) = (0, count);
        while lo < hi {
            let m = (lo + hi) / 2;
            if key_at(m) < key { lo = m + 1 } else { hi = m }
        }
        let p = lo;
        let hit = p < count && key_at(p) == key;
        match w {
            Some(w) => {
                if hit {
                    return Some(false);
                }
                if count + 1 > u.cap[fb] as usize * LANES {
                    return None;
                }
                if count == nb * LANES {
                    // A block of the room taken: its lanes made empty (a
                    // reused hole holds what it held).
                    for r in 0..stride {
                        self.rows[(fb + nb) * stride + r].0 = [u.empty[r]; LANES];
                    }
                }
                self.move_lanes(fb, p, count, true);
                for r in 0..stride {
                    self.rows[base(p) + r].0[p % LANES] = w[r];
                }
                count += 1;
            }
            None => {
                if !hit {
                    return Some(false);
                }
                if count == 1 {
                    return None;
                }
                self.move_lanes(fb, p, count, false);
                for r in 0..stride {
                    self.rows[base(count - 1) + r].0[(count - 1) % LANES] = u.empty[r];
                }
                count -= 1;
            }
        }
        let first = self.rows[fb * stride + idr].0[0] >> sh;
        self.nodes[i as usize] = Node::leaf(n.base, fb as u32, count.div_ceil(LANES) as u32, first);
        Some(true)
    }

    /// Moves the lanes `[p, count)` of the leaf whose blocks start at `fb`
    /// one place up (`up`: to `[p + 1, count]`) or lanes `[p + 1, count)`
    /// one place down (to `[p, count - 1)`), a row's lanes within a block
    /// in one copy and one lane across each block boundary.
    fn move_lanes(&mut self, fb: usize, p: usize, count: usize, up: bool) {
        let stride = self.stride();
        let rows = &mut self.rows[fb * stride..];
        if up {
            let (bp, bc) = (p / LANES, count / LANES);
            for b in (bp..=bc).rev() {
                let lo = if b == bp { p % LANES } else { 0 };
                let hi = if b == bc { count % LANES } else { LANES - 1 };
                for r in 0..stride {
                    rows[b * stride + r].0.copy_within(lo..hi, lo + 1);
                    if b > bp {
                        rows[b * stride + r].0[0] = rows[(b - 1) * stride + r].0[LANES - 1];
                    }
                }
            }
        } else if p + 1 < count {
            let (bp, bl) = (p / LANES, (count - 1) / LANES);
            for b in bp..=bl {
                let lo = if b == bp { p % LANES } else { 0 };
                let hi = if b == bl { (count - 1) % LANES } else { LANES - 1 };
                for r in 0..stride {
                    rows[b * stride + r].0.copy_within(lo + 1..hi + 1, lo);
                    if b < bl {
                        rows[b * stride + r].0[LANES - 1] = rows[(b + 1) * stride + r].0[0];
                    }
                }
            }
        }
    }

    /// The first block of `c` blocks for a leaf (one reference): a hole of
    /// that size; else one of up to twice it, whole (the rest is room); else
    /// the front of a larger one (the rest stays a hole); else new blocks
    /// at the end. A leaf only ever asks for two blocks or more, so no hole
    /// left is too small to be taken.
    fn alloc(&mut self, u: &mut Updates<N>, c: usize) -> usize {
        let stride = self.stride();
        let fit = (c..u.holes.len().min(2 * c + 1)).find(|&k| !u.holes[k].is_empty());
        if let Some(k) = fit {
            let at = u.holes[k].pop().unwrap() as usize;
            u.garbage -= k;
            u.refs[at] = 1;
            return at;
        }
        if let Some(k) = (2 * c + 1..u.holes.len()).find(|&k| !u.holes[k].is_empty()) {
            let at = u.holes[k].pop().unwrap() as usize;
            u.garbage -= c;
            (u.cap[at], u.refs[at]) = (c as u32, 1);
            (u.cap[at + c], u.refs[at + c]) = ((k - c) as u32, 0);
            u.holes[k - c].push((at + c) as u32);
            return at;
        }
        let at = self.rows.len() / stride;
        for _ in 0..c {
            push_block::<N>(&self.words, self.fold, self.wide, &mut self.rows, &[]);
        }
        u.cap.resize(at + c, 0);
        u.refs.resize(at + c, 0);
        u.cap[at] = c as u32;
        u.refs[at] = 1;
        at
    }

    /// Writes rule `slot`'s lane into the leaves its box reaches in its
    /// tree that do not hold it yet.
    fn add_lanes(&mut self, u: &mut Updates<N>, slot: u32, dirty: &mut Vec<u32>) {
        let s = &u.slots[slot as usize];
        let (Ok(Some(bx)), key, tree) = (s.bx, s.key, s.tree as usize) else { return };
        u.block.clear();
        push_block(&self.words, self.fold, self.wide, &mut u.block, &[(key, &bx)]);
        let mut w = Lane::ZERO;
        for (r, row) in u.block.iter().enumerate() {
            w[r] = row.0[0];
        }
        let t = &mut self.trees[tree];
        t.min_prio = t.min_prio.min(key);
        let (idr, sh) = self.id_row();
        let mut lanes = std::mem::take(&mut u.lanes);
        let mut reach = std::mem::take(&mut u.reach);
        self.reach_into(self.trees[tree].root, &bx, &mut reach, &mut u.stack);
        for &i in &reach {
            let wrote = self.shift_lane(u, i, key, Some(&w)).unwrap_or_else(|| {
                self.edit_leaf(u, i, &mut lanes, |v| {
                    let p = v.partition_point(|x| (x[idr] >> sh) < key);
                    if v.get(p).is_some_and(|x| (x[idr] >> sh) == key) {
                        return false;
                    }
                    v.insert(p, w);
                    true
                })
                .is_some()
            });
            if wrote {
                dirty.push(i);
            }
        }
        (u.lanes, u.reach) = (lanes, reach);
    }

    /// Takes rule `slot`'s lanes out of the leaves its box reaches.
    fn remove_lanes(&mut self, u: &mut Updates<N>, slot: u32, dirty: &mut Vec<u32>) {
        let s = &u.slots[slot as usize];
        let (Ok(Some(bx)), key, tree) = (s.bx, s.key, s.tree as usize) else { return };
        let (idr, sh) = self.id_row();
        let mut lanes = std::mem::take(&mut u.lanes);
        let mut reach = std::mem::take(&mut u.reach);
        self.reach_into(self.trees[tree].root, &bx, &mut reach, &mut u.stack);
        for &i in &reach {
            let wrote = self.shift_lane(u, i, key, None).unwrap_or_else(|| {
                self.edit_leaf(u, i, &mut lanes, |v| match v.iter().position(|x| (x[idr] >> sh) == key) {
                    Some(p) => {
                        v.remove(p);
                        true
                    }
                    None => false,
                })
                .is_some()
            });
            if wrote {
                dirty.push(i);
            }
        }
        (u.lanes, u.reach) = (lanes, reach);
    }

    /// A key for a rule inserted at position `pos`: between its
    /// neighbours' keys; when they are adjacent, the keys of the smallest
    /// aligned window around them that is at most half full are spread
    /// evenly (and their lanes rewritten), so the cost is amortised over
    /// the inserts that filled it. None: the key space is full.
    fn free_key(&mut self, u: &mut Updates<N>, pos: u32, dirty: &mut Vec<u32>) -> Option<u32> {
        let a = if pos > 0 { u.select(pos - 1) as i64 } else { -1 };
        let b = if (pos as usize) < u.live { u.select(pos) as i64 } else { u.space as i64 };
        if b - a >= 2 {
            return Some((a + (b - a) / 2) as u32);
        }
        let c = a.max(0) as u32;
        // The smallest window first: a spread rewrites the lanes of every
        // rule in it, and 16 keys (2-3 rules at the set's density) made
        // updates 1.1x as fast as 64 (classify_updates acl 10000).
        let mut w = 16u32;
        let (s, e, olds) = loop {
            let s = c / w * w;
            let e = (s + w).min(u.space);
            let count = u.rank(e) - u.rank(s);
            let top = s == 0 && e == u.space;
            if 2 * (count + 1) <= e - s || (top && count + 1 <= e - s) {
                break (s, e, u.keys_in(s, e));
            }
            if top {
                return None;
            }
            w *= 2;
        };
        // The new rule's place among them, and every key spread evenly.
        let j = olds.partition_point(|&k| (k as i64) <= a);
        let m = olds.len() as u64 + 1;
        let spread: Vec<u32> = (0..m).map(|i| s + ((2 * i + 1) * (e - s) as u64 / (2 * m)) as u32).collect();
        let news: Vec<u32> = (0..olds.len()).map(|i| spread[if i < j { i } else { i + 1 }]).collect();
        let slots: Vec<u32> = olds.iter().map(|&k| u.slot_of[k as usize]).collect();
        for &k in &olds {
            u.set_bit(k, false);
            u.slot_of[k as usize] = u32::MAX;
        }
        for (&k, &sl) in news.iter().zip(&slots) {
            u.set_bit(k, true);
            u.slot_of[k as usize] = sl;
            u.slots[sl as usize].key = k;
        }
        // The window keeps its count: only its own words' counters change.
        u.recount_words((s >> 5) as usize, (e as usize).div_ceil(32));
        let remap = |k: u32| if k >= s && k < e { olds.binary_search(&k).map_or(k, |i| news[i]) } else { k };
        // The lanes of their leaves, each allocation once: only the rows
        // that hold a lane's key are read and written.
        let stride = self.stride();
        let (idr, _) = self.id_row();
        let id_rows = if self.wide { idr - 1..idr + 1 } else { idr..idr + 1 };
        // Every leaf their boxes reach, in order (the leaves written), and
        // each allocation among them once (a leaf reached twice, or leaves
        // sharing their blocks, are remapped once).
        let (mut all, mut one, mut firsts) = (std::mem::take(&mut u.reach), Vec::new(), std::mem::take(&mut u.seen));
        all.clear();
        firsts.clear();
        for &sl in &slots {
            let st = &u.slots[sl as usize];
            let Ok(Some(bx)) = st.bx else { continue };
            self.reach_into(self.trees[st.tree as usize].root, &bx, &mut one, &mut u.stack);
            all.extend_from_slice(&one);
        }
        for &i in &all {
            let n = self.nodes[i as usize];
            if n.blocks() > 0 {
                firsts.push((n.first_block() as u32, n.blocks() as u32));
            }
        }
        // The most blocks a leaf uses of each allocation.
        firsts.sort_unstable_by_key(|&(fb, nb)| (fb, !nb));
        firsts.dedup_by_key(|x| x.0);
        for &(fb, nb) in &firsts {
            let (fb, nb) = (fb as usize, nb as usize);
            let mut col = Lane::ZERO;
            for b in fb..fb + nb {
                for l in 0..LANES {
                    for r in id_rows.clone() {
                        col[r] = self.rows[b * stride + r].0[l];
                    }
                    let k = self.lane_key(&col);
                    let nk = remap(k);
                    if nk != k {
                        self.set_lane_key(&mut col, nk);
                        for r in id_rows.clone() {
                            self.rows[b * stride + r].0[l] = col[r];
                        }
                    }
                }
            }
        }
        for &i in &all {
            // Its best key read back.
            let n = self.nodes[i as usize];
            let first = if n.blocks() > 0 { self.id_of(&self.rows[n.first_block() * stride..], 0) } else { u32::MAX };
            self.nodes[i as usize] = Node::leaf(n.base, n.first_block() as u32, n.blocks() as u32, first);
            dirty.push(i);
        }
        (u.reach, u.seen) = (all, firsts);
        for o in &mut self.odd {
            o.0 = remap(o.0);
        }
        // A tree's best key in the window moves with its rule (the spread
        // keeps the keys' order); one that is no rule's any more (it
        // cannot be: [`PTree::delete`] keeps them exact) would take the
        // window's start, which bounds it.
        for t in &mut self.trees {
            if t.min_prio >= s && t.min_prio < e {
                t.min_prio = olds.binary_search(&t.min_prio).map_or(s, |i| news[i]);
            }
        }
        Some(spread[j])
    }

    /// Inserts `rule` at priority position `pos` (0 = highest; later rules
    /// move down one): a key between its neighbours', its lane written
    /// into the leaves its box reaches.
    pub fn insert(&mut self, pos: usize, rule: Rule<N>) -> Result<(), BuildError> {
        if pos > self.len() {
            return Err(BuildError::BadConfig(format!("cannot insert at {pos}: only {} rules", self.len())));
        }
        if !self.in_place() {
            return self.rebuild_with(|v| v.insert(pos, rule));
        }
        self.start_updates();
        let mut u = self.upd.take().expect("updates");
        let mut dirty = std::mem::take(&mut u.dirty);
        dirty.clear();
        let Some(key) = self.free_key(&mut u, pos as u32, &mut dirty) else {
            self.upd = Some(u);
            return self.rebuild_with(|v| v.insert(pos, rule));
        };
        let bx = rule_box(&rule, &u.widths);
        let tree = match bx {
            Ok(Some(b)) => self.tree_for(&mut u, &b),
            _ => u32::MAX,
        };
        let slot = match u.free.pop() {
            Some(s) => {
                let g = u.slots[s as usize].gen;
                u.slots[s as usize] = Slot { rule, bx, tree, key, gen: g };
                s
            }
            None => {
                u.slots.push(Slot { rule, bx, tree, key, gen: 0 });
                (u.slots.len() - 1) as u32
            }
        };
        if (tree as usize) < self.trees.len() && !self.trees[tree as usize].side {
            u.inserts += 1;
            u.above += (key < self.trees[tree as usize].min_prio) as usize;
        }
        u.mark(key, 1);
        u.slot_of[key as usize] = slot;
        u.live += 1;
        if bx.is_err() {
            let at = self.odd.partition_point(|o| o.0 < key);
            self.odd.insert(at, (key, rule));
        }
        self.add_lanes(&mut u, slot, &mut dirty);
        self.finish_update(u, dirty);
        Ok(())
    }

    /// Deletes the rule at priority position `pos` (later rules move up):
    /// its lanes taken out of the leaves its box reaches; rules the build
    /// had dropped below it where it covered a leaf written back there.
    pub fn delete(&mut self, pos: usize) -> Result<(), BuildError> {
        if pos >= self.len() {
            return Err(BuildError::BadConfig(format!("no rule {pos} to delete ({} rules)", self.len())));
        }
        if !self.in_place() {
            return self.rebuild_with(|v| {
                v.remove(pos);
            });
        }
        self.start_updates();
        let mut u = self.upd.take().expect("updates");
        let mut dirty = std::mem::take(&mut u.dirty);
        dirty.clear();
        let key = u.select(pos as u32);
        let slot = u.slot_of[key as usize];
        self.remove_lanes(&mut u, slot, &mut dirty);
        if u.slots[slot as usize].bx.is_err() {
            if let Ok(i) = self.odd.binary_search_by_key(&key, |o| o.0) {
                self.odd.remove(i);
            }
        }
        u.mark(key, -1);
        u.slot_of[key as usize] = u32::MAX;
        u.live -= 1;
        let s = &mut u.slots[slot as usize];
        s.key = u32::MAX;
        s.gen = s.gen.wrapping_add(1);
        u.free.push(slot);
        if let Some(dropped) = u.shadow.remove(&slot) {
            for (d, g) in dropped {
                let s = &u.slots[d as usize];
                if s.gen == g && s.key != u32::MAX {
                    self.add_lanes(&mut u, d, &mut dirty);
                }
            }
        }
        // The tree's best rule gone: its best key read again from its
        // leaves (one walk of that tree), so lookups keep skipping it
        // where they did.
        let tree = u.slots[slot as usize].tree;
        if (tree as usize) < self.trees.len() && self.trees[tree as usize].min_prio == key {
            self.trees[tree as usize].min_prio = self.tree_best(tree as usize);
        }
        self.finish_update(u, dirty);
        Ok(())
    }

    /// After an update: the memory image follows the leaves written, and
    /// past the bound (more blocks unused than used) the blocks are
    /// compacted.
    fn finish_update(&mut self, mut u: Box<Updates<N>>, dirty: Vec<u32>) {
        u.since += 1;
        let stride = self.stride();
        if let Some(img) = self.image.get_mut() {
            img.rows.resize(self.rows.len(), Row([0; LANES]));
            for &i in &dirty {
                let n = self.nodes[i as usize];
                img.nodes[i as usize] = n;
                let (a, c) = (n.first_block(), (u.cap[n.first_block()] as usize).max(n.blocks()));
                img.rows[a * stride..(a + c) * stride].copy_from_slice(&self.rows[a * stride..(a + c) * stride]);
            }
            img.odd.clone_from(&self.odd);
        }
        u.dirty = dirty;
        let due = u.garbage > self.compact_bound(&u);
        self.upd = Some(u);
        if due {
            self.compact();
        }
    }

    /// Unused leaf blocks tolerated before a compaction:
    /// `max(max_delta, blocks in use)`. The holes are reused by the leaves
    /// that grow, so churn that keeps the set's size and shape stays
    /// below it: the rows at most twice what the leaves use.
    fn compact_bound(&self, u: &Updates<N>) -> usize {
        let blocks = self.rows.len() / self.stride();
        self.asked.max_delta.max(blocks - u.garbage)
    }

    /// The best key of tree `ti`: the least of its leaves' first keys.
    fn tree_best(&self, ti: usize) -> u32 {
        let mut best = u32::MAX;
        let mut stack = vec![self.trees[ti].root];
        while let Some(i) = stack.pop() {
            let n = self.nodes[i as usize];
            if n.is_leaf() {
                best = best.min(n.first_rule());
            } else {
                stack.extend((0..=NODE_THRESHOLDS as u32).filter(|&c| c == 0 || n.th[c as usize - 1] != u32::MAX ^ BIAS).map(|c| n.base + c));
            }
        }
        best
    }

    /// Copies every leaf's blocks into fresh rows (shared leaves stay
    /// shared, no room kept), so the blocks left behind by leaves that
    /// grew are freed, and sets every tree's best key exactly again. One
    /// pass over the blocks, every `max(max_delta, rules / 4)` updates.
    fn compact(&mut self) {
        let Some(mut u) = self.upd.take() else { return };
        let stride = self.stride();
        let mut rows: Vec<Row> = self.rows[..stride].to_vec();
        let mut moved = std::collections::HashMap::new();
        for nd in &mut self.nodes {
            if nd.is_leaf() && nd.blocks() > 0 {
                let (fb, nb) = (nd.first_block(), nd.blocks());
                let at = *moved.entry(fb).or_insert_with(|| {
                    let at = rows.len() / stride;
                    rows.extend_from_slice(&self.rows[fb * stride..(fb + nb) * stride]);
                    at
                });
                *nd = Node::leaf(nd.base, at as u32, nb as u32, nd.first_rule());
            } else if nd.is_leaf() {
                *nd = Node::leaf(nd.base, 0, 0, u32::MAX);
            }
        }
        self.rows = rows;
        let blocks = self.rows.len() / stride;
        u.cap = vec![0; blocks];
        u.refs = vec![0; blocks];
        for nd in &self.nodes {
            if nd.is_leaf() && nd.blocks() > 0 {
                u.cap[nd.first_block()] = nd.blocks() as u32;
                u.refs[nd.first_block()] += 1;
            }
        }
        for ti in 0..self.trees.len() {
            self.trees[ti].min_prio = self.tree_best(ti);
        }
        u.holes.clear();
        u.since = 0;
        u.garbage = 0;
        u.compactions += 1;
        self.upd = Some(u);
        self.image = std::sync::OnceLock::new();
        self.stats.rules = self.len();
        self.stats.bytes = self.bytes();
        self.stats.blocks = blocks;
    }

    /// Builds the tree again from the rules now, changed by `change` (a
    /// set the trees cannot take in place: no words, no tree, or the key
    /// space full); on an error the tree stays as it was.
    fn rebuild_with(&mut self, change: impl FnOnce(&mut Vec<Rule<N>>)) -> Result<(), BuildError> {
        let mut set = self.rule_set();
        change(&mut set.rules);
        *self = Self::build(&set, &self.asked)?;
        Ok(())
    }

    /// The leaves under `root` that a rule's box reaches: down every child
    /// whose range the box overlaps (where an update writes or removes the
    /// rule's lanes).
    fn leaves_reached(&self, root: u32, bx: &Box_<N>) -> Vec<u32> {
        let mut leaves = Vec::new();
        self.reach_into(root, bx, &mut leaves, &mut Vec::new());
        leaves
    }

    /// [`PTree::leaves_reached`] into `leaves` (cleared), with `stack` as
    /// the walk's: an update's reused buffers.
    fn reach_into(&self, root: u32, bx: &Box_<N>, leaves: &mut Vec<u32>, stack: &mut Vec<u32>) {
        leaves.clear();
        self.walk_reached(root, bx, stack, |i| {
            leaves.push(i);
            true
        });
    }

    /// Whether a box reaches more than `k` leaves under `root` (the walk
    /// stops at the `k + 1`-th).
    fn reaches_over(&self, root: u32, bx: &Box_<N>, k: usize, stack: &mut Vec<u32>) -> bool {
        let mut c = 0;
        self.walk_reached(root, bx, stack, |_| {
            c += 1;
            c <= k
        });
        c > k
    }

    /// Calls `leaf` on each leaf under `root` the box reaches, in the order
    /// [`PTree::leaves_reached`] lists them, until it returns false.
    fn walk_reached(&self, root: u32, bx: &Box_<N>, stack: &mut Vec<u32>, mut leaf: impl FnMut(u32) -> bool) {
        stack.clear();
        stack.push(root);
        while let Some(i) = stack.pop() {
            let n = self.nodes[i as usize];
            if n.is_leaf() {
                if !leaf(i) {
                    return;
                }
                continue;
            }
            let f = n.field();
            let (a, b) = (simd::below_scalar(&n, bx[f].0 ^ BIAS), simd::below_scalar(&n, bx[f].1 ^ BIAS));
            stack.extend((a..=b).map(|c| n.base + c));
        }
    }

    /// Per rule of the built set, the leaves its box reaches in its tree
    /// (0: searched linearly, or matching nothing): the leaves an update
    /// of that rule writes.
    pub fn leaves_per_rule(&self) -> Vec<usize> {
        let widths = self.widths();
        (self.set.rules.iter().zip(&self.tree_of))
            .map(|(r, &t)| match rule_box(r, &widths) {
                Ok(Some(bx)) if t != u32::MAX => self.leaves_reached(self.trees[t as usize].root, &bx).len(),
                _ => 0,
            })
            .collect()
    }

    /// Whether `inserts` more inserts and `deletes` more deletes may
    /// compact the blocks (the ELU then writes the structure whole): when
    /// the blocks unused, plus one per update, pass the bound.
    pub fn folds_in(&self, inserts: usize, deletes: usize) -> bool {
        self.upd.as_ref().is_some_and(|u| u.garbage + inserts + deletes > self.compact_bound(u))
    }

    /// The block accounting after updates, for tests: each leaf with
    /// blocks within its allocation, counted in its references; the holes
    /// and the allocations in use apart (no leaf's blocks reused while it
    /// holds them), the holes' blocks counted as the unused ones.
    #[cfg(test)]
    pub(crate) fn check_blocks(&self) -> Result<(), String> {
        let Some(u) = &self.upd else { return Ok(()) };
        let blocks = self.rows.len() / self.stride();
        let mut owner = vec![u32::MAX; blocks];
        let mut refs = std::collections::HashMap::<usize, u32>::new();
        for (i, nd) in self.nodes.iter().enumerate().filter(|(_, n)| n.is_leaf() && n.blocks() > 0) {
            let fb = nd.first_block();
            if (u.cap[fb] as usize) < nd.blocks() {
                return Err(format!("leaf {i}: {} blocks in an allocation of {} at {fb}", nd.blocks(), u.cap[fb]));
            }
            *refs.entry(fb).or_default() += 1;
        }
        for (&fb, &r) in &refs {
            if u.refs[fb] != r {
                return Err(format!("allocation at {fb}: {} references counted, {r} leaves", u.refs[fb]));
            }
            for b in fb..fb + u.cap[fb] as usize {
                if owner[b] != u32::MAX {
                    return Err(format!("block {b} in the allocations at {} and {fb}", owner[b]));
                }
                owner[b] = fb as u32;
            }
        }
        let mut unused = 0;
        for (c, hs) in u.holes.iter().enumerate() {
            for &h in hs {
                if u.cap[h as usize] as usize != c || u.refs[h as usize] != 0 {
                    return Err(format!("hole at {h} of {c} blocks: cap {}, refs {}", u.cap[h as usize], u.refs[h as usize]));
                }
                for b in h as usize..h as usize + c {
                    if owner[b] != u32::MAX {
                        return Err(format!("block {b} of the hole at {h} in use by the allocation at {}", owner[b]));
                    }
                    owner[b] = h;
                }
                unused += c;
            }
        }
        if unused != u.garbage {
            return Err(format!("{unused} blocks in holes, {} counted unused", u.garbage));
        }
        Ok(())
    }

    /// What lookups of `keys` read, walked as the batch path walks them
    /// (trees skipped by their best rule, a leaf's blocks as far as they
    /// can beat the match so far), counted per lookup: for comparing the
    /// tree under churn with a fresh build of its rules (`classify_churn`).
    pub fn lookup_profile(&self, keys: &[Key<N>]) -> LookupProfile {
        let stride = self.stride();
        let block_bytes = stride * std::mem::size_of::<Row>();
        let rows_at = self.rows.as_ptr() as usize;
        let mut p = LookupProfile::default();
        let mut lines = std::collections::HashSet::new();
        let mut group = std::collections::HashSet::new();
        let mut leaves = std::collections::HashSet::new();
        let empty = if self.fold.is_some() && !self.wide { simd::FOLD_EMPTY >> 16 } else { u32::MAX };
        for (x, key) in keys.iter().enumerate() {
            if x % GROUP == 0 {
                p.group_lines += group.len() as f64;
                group.clear();
            }
            self.walk_key(key, |s| match s {
                Step::Tree(_) => p.trees += 1.0,
                Step::Node(i) => {
                    lines.insert(usize::MAX - i as usize);
                    group.insert(usize::MAX - i as usize);
                    if self.nodes[i as usize].is_leaf() {
                        leaves.insert(i);
                    } else {
                        p.levels += 1.0;
                    }
                }
                Step::Block(_, b) => {
                    p.blocks += 1.0;
                    let a = rows_at + b * block_bytes;
                    for l in a / 64..(a + block_bytes).div_ceil(64) {
                        p.lines += 1.0;
                        lines.insert(l);
                        group.insert(l);
                    }
                    let blk = &self.rows[b * stride..(b + 1) * stride];
                    p.lanes += (0..LANES).filter(|&l| self.id_of(blk, l) != empty).count() as f64;
                }
            });
            p.rank += self.upd.is_some() as u32 as f64;
        }
        p.group_lines += group.len() as f64;
        let n = keys.len().max(1) as f64;
        for v in [&mut p.trees, &mut p.levels, &mut p.blocks, &mut p.lanes, &mut p.lines, &mut p.rank] {
            *v /= n;
        }
        p.group_lines /= (n / GROUP as f64).ceil();
        p.distinct_lines = lines.len();
        p.distinct_leaves = leaves.len();
        p.row_bytes = self.rows.len() * std::mem::size_of::<Row>();
        p
    }

    /// One key's walk as the batch path makes it, told to `on` step by
    /// step: the trees in order, each skipped when its best rule cannot
    /// beat the match so far; in a tree its nodes from the root to a leaf
    /// (the leaf too), then the leaf's blocks until one matches or cannot
    /// win (the first always, unless the tree tests a pass at a time).
    fn walk_key(&self, key: &Key<N>, mut on: impl FnMut(Step)) {
        let stride = self.stride();
        let pk = self.pack_key(key);
        let mut best = self.odd_best(key);
        for (t, tree) in self.trees.iter().enumerate() {
            if tree.min_prio >= best {
                continue;
            }
            on(Step::Tree(t));
            let mut i = tree.root;
            loop {
                on(Step::Node(i));
                let n = &self.nodes[i as usize];
                if n.is_leaf() {
                    break;
                }
                i = n.base + simd::below_scalar(n, key.0[n.field()] ^ BIAS);
            }
            let n = &self.nodes[i as usize];
            for b in n.first_block()..n.first_block() + n.blocks().max(1) {
                let blk = &self.rows[b * stride..(b + 1) * stride];
                if (tree.passes || b > n.first_block()) && self.id_of(blk, 0) >= best {
                    break;
                }
                on(Step::Block(t, b));
                let m = self.test_block(blk, &pk);
                if m != 0 {
                    best = best.min(self.id_of(blk, m.trailing_zeros() as usize));
                    break;
                }
            }
        }
    }

    /// Readies the tree for in-place updates ahead of the first (the rule
    /// ids spread over the key space, the rank table made): the state every
    /// tree that has taken an update is in, without any change of rules.
    pub fn prepare_updates(&mut self) {
        if self.in_place() {
            self.start_updates();
        }
    }

    /// Copies the leaf blocks into fresh rows in node order, as a
    /// compaction does (after updates; else nothing to do): the blocks
    /// that churn scattered laid out again.
    pub fn compact_blocks(&mut self) {
        self.compact();
    }

    /// Compactions of the leaf blocks since the first update.
    pub fn compactions(&self) -> usize {
        self.upd.as_ref().map_or(0, |u| u.compactions)
    }

    /// Inserts into a tree (not the side leaf) since updates began, and
    /// those placed above that tree's best rule as it was then (each one
    /// lowers it: how few it takes for lookups to stop skipping a tree).
    pub fn inserts_above_best(&self) -> (usize, usize) {
        self.upd.as_ref().map_or((0, 0), |u| (u.inserts, u.above))
    }

    /// Builds the subtree at `idx` for `slots` (ascending rule indices, all
    /// overlapping `bx`); returns its depth.
    fn fill(&mut self, idx: u32, mut slots: Vec<u32>, bx: Box_<N>, depth: usize, boxes: &[Box_<N>], leaves: &mut Leaves) -> Result<usize, BuildError> {
        let nf = self.nf;
        // Nothing after a rule covering the whole box can win there (until
        // that rule is deleted: `shadow`).
        if let Some(i) = slots.iter().position(|&s| (0..nf).all(|f| boxes[s as usize][f].0 <= bx[f].0 && bx[f].1 <= boxes[s as usize][f].1)) {
            if i + 1 < slots.len() {
                self.shadow.entry(slots[i]).or_default().extend_from_slice(&slots[i + 1..]);
            }
            slots.truncate(i + 1);
        }
        if slots.len() <= self.config.bucket || depth >= self.config.max_depth {
            self.make_leaf(idx, slots, boxes, leaves)?;
            return Ok(depth);
        }
        // A cut whose largest child keeps most of the rules makes little
        // progress: acl sets' trees went 80 -> 58 -> 48 -> 42 rules a level,
        // ten levels deep. There a little more replication buys a real cut
        // (gen acl 10K: ~20 % fewer instructions per lookup, 60 -> 73 B/rule).
        let mut pick = self.choose(&slots, &bx, boxes, self.config.spfac);
        if pick.as_ref().map_or(true, |p| p.0 as f64 > STUCK * slots.len() as f64) {
            if let Some(q) = self.choose(&slots, &bx, boxes, self.config.spfac.max(STUCK_SPFAC)) {
                if pick.as_ref().map_or(true, |p| q.0 < p.0) {
                    pick = Some(q);
                }
            }
        }
        let Some((_, f, th)) = pick else {
            self.make_leaf(idx, slots, boxes, leaves)?;
            return Ok(depth);
        };
        // Neighbouring children whose rules together fill at most one block
        // become one child: fewer nodes, fuller blocks.
        let meets = |s: u32, lo: u32, hi: u32| boxes[s as usize][f].0 <= hi && lo <= boxes[s as usize][f].1;
        let child_of = |lo: u32, hi: u32| -> Vec<u32> { slots.iter().copied().filter(|&s| meets(s, lo, hi)).collect() };
        let mut kept: Vec<u32> = Vec::with_capacity(th.len());
        let mut lo = bx[f].0;
        for (i, &t) in th.iter().enumerate() {
            let next_hi = th.get(i + 1).copied().unwrap_or(bx[f].1);
            if slots.iter().filter(|&&s| meets(s, lo, next_hi)).nth(LANES).is_some() {
                kept.push(t);
                lo = t + 1;
            }
        }
        let th = kept;
        if th.is_empty() {
            self.make_leaf(idx, slots, boxes, leaves)?;
            return Ok(depth);
        }
        let base = self.nodes.len() as u32;
        let nc = th.len() + 1;
        self.nodes.extend(std::iter::repeat(empty_leaf()).take(nc));
        let mut node = Node { th: [u32::MAX ^ BIAS; NODE_SLOTS], base, info: INNER | f as u32 };
        for (i, &x) in th.iter().enumerate() {
            node.th[i] = x ^ BIAS;
        }
        self.nodes[idx as usize] = node;
        self.check_budget()?;
        let mut deepest = depth;
        for c in 0..nc {
            let lo = if c == 0 { bx[f].0 } else { th[c - 1] + 1 };
            let hi = if c == th.len() { bx[f].1 } else { th[c] };
            let mut cb = bx;
            cb[f] = (lo, hi);
            let child = child_of(lo, hi);
            deepest = deepest.max(self.fill(base + c as u32, child, cb, depth + 1, boxes, leaves)?);
        }
        Ok(deepest)
    }

    /// The largest child, field and thresholds (ascending, strictly inside
    /// the box) whose largest child is smallest, with total replication
    /// within `spfac`.
    fn choose(&self, slots: &[u32], bx: &Box_<N>, boxes: &[Box_<N>], spfac: f64) -> Option<(usize, usize, Vec<u32>)> {
        let n = slots.len();
        let mut best: Option<((usize, usize), usize, Vec<u32>)> = None;
        let (mut lows, mut highs) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut pts = Vec::with_capacity(2 * n);
        for f in 0..self.nf {
            let (blo, bhi) = bx[f];
            if blo == bhi {
                continue;
            }
            // The rules' bounds inside the box, each sorted (those at its
            // edges only counted: wildcards cost no sorting): a child
            // [lo, hi] holds the rules with a low bound <= hi less those
            // with a high bound < lo (two binary searches, not a pass).
            lows.clear();
            highs.clear();
            for &s in slots {
                let (l, h) = boxes[s as usize][f];
                if l > blo {
                    lows.push(l);
                }
                if h < bhi {
                    highs.push(h);
                }
            }
            if lows.is_empty() && highs.is_empty() {
                continue;
            }
            let at_lo = n - lows.len();
            lows.sort_unstable();
            highs.sort_unstable();
            // Candidate thresholds: every rule edge inside the box (below a
            // low bound, at a high one), merged in order.
            pts.clear();
            let (mut i, mut j, ln, hn) = (0, 0, lows.len(), highs.len());
            while i < ln || j < hn {
                let x = if j >= hn || (i < ln && lows[i] - 1 <= highs[j]) {
                    i += 1;
                    lows[i - 1] - 1
                } else {
                    j += 1;
                    highs[j - 1]
                };
                if pts.last() != Some(&x) {
                    pts.push(x);
                }
            }
            // Children of about half a bucket, at most a node's worth;
            // fewer when replication is over budget.
            let mut k = NODE_THRESHOLDS.min(pts.len()).min((2 * n).div_ceil(self.config.bucket).max(2) - 1);
            while k >= 1 {
                let mut th: Vec<u32> = (0..k).map(|i| pts[((i + 1) * pts.len()) / (k + 1)]).collect();
                th.dedup();
                let (mut total, mut max) = (0usize, 0usize);
                for c in 0..=th.len() {
                    let lo = if c == 0 { blo } else { th[c - 1] + 1 };
                    let hi = if c == th.len() { bhi } else { th[c] };
                    let m = at_lo + lows.partition_point(|&l| l <= hi) - highs.partition_point(|&h| h < lo);
                    total += m;
                    max = max.max(m);
                }
                if (total as f64) <= spfac * n as f64 && max < n {
                    let cost = (max, total);
                    if best.as_ref().map_or(true, |b| cost < b.0) {
                        best = Some((cost, f, th));
                    }
                    break;
                }
                k /= 2;
            }
        }
        best.map(|(c, f, th)| (c.0, f, th))
    }

    /// Makes `idx` a leaf of `slots`; leaves with the same rules share
    /// their blocks.
    fn make_leaf(&mut self, idx: u32, slots: Vec<u32>, boxes: &[Box_<N>], leaves: &mut Leaves) -> Result<(), BuildError> {
        let stride = self.stride();
        let first_block = match leaves.get(&slots) {
            Some(&b) => b,
            None => {
                let first = (self.rows.len() / stride) as u32;
                let empty = [];
                let chunks = if slots.is_empty() && self.rows.is_empty() { vec![&empty[..]] } else { slots.chunks(LANES).collect() };
                for chunk in chunks {
                    let lanes: Vec<(u32, &Box_<N>)> = chunk.iter().map(|&s| (s, &boxes[s as usize])).collect();
                    push_block(&self.words, self.fold, self.wide, &mut self.rows, &lanes);
                }
                leaves.insert(slots.clone(), first);
                first
            }
        };
        let first_rule = slots.first().copied().unwrap_or(u32::MAX);
        self.nodes[idx as usize] = Node::leaf(idx, first_block, slots.len().div_ceil(LANES) as u32, first_rule);
        self.check_budget()
    }

    fn check_budget(&self) -> Result<(), BuildError> {
        let b = self.bytes();
        if b > self.config.max_bytes {
            return Err(BuildError::OverBudget { what: "partitioned tree", key: "ptree.max_bytes", bytes: b, budget: self.config.max_bytes });
        }
        Ok(())
    }

    /// The best (smallest) rule index among the odd rules matching `key`.
    #[inline]
    fn odd_best(&self, key: &Key<N>) -> u32 {
        self.odd.iter().find(|(_, r)| r.matches(key)).map_or(u32::MAX, |(i, _)| *i)
    }

    /// The key's leaf words, biased, as the blocks store the rules'.
    #[inline(always)]
    fn pack_key(&self, key: &Key<N>) -> [u32; N] {
        let mut p = [0u32; N];
        for (w, &(a, b)) in self.words.iter().enumerate() {
            p[w] = match b {
                None => key.0[a] ^ BIAS,
                Some(b) => simd::pack(key.0[a], key.0[b]) ^ simd::PAIR_BIAS,
            };
        }
        if let Some(f) = self.fold {
            p[N - 1] = simd::fold_key(key.0[f]);
        }
        p
    }

    /// The rule index in lane `l` of the block `blk` (matched lanes only).
    #[inline(always)]
    fn id_of(&self, blk: &[Row], l: usize) -> u32 {
        let (_, idr, sh) = block_layout(self.words.len(), self.fold.is_some(), self.wide);
        blk[idr].0[l] >> sh
    }

    /// [`Self::pack_key`] without branches, from the word table.
    #[inline(always)]
    fn pack_key_n<const NW: usize>(&self, key: &Key<N>) -> [u32; N] {
        let mut p = [0u32; N];
        for w in 0..NW {
            let (a, b, sh, mask, bias) = self.packing[w];
            p[w] = (key.0[a as usize] << sh | key.0[b as usize] & mask) ^ bias;
        }
        if let Some(f) = self.fold {
            p[N - 1] = simd::fold_key(key.0[f]);
        }
        p
    }

    /// The five-tuple's batch on the widest kernels the CPU has.
    fn five_tuple<const G: usize, const WIDE: bool, const P: bool>(&self, keys: &[Key<N>], out: &mut [i32]) {
        #[cfg(target_arch = "x86_64")]
        if self.avx512 {
            // SAFETY: avx512 is set only when the CPU has AVX-512 F/VL.
            unsafe { batch_avx512::<N, 3, G, FIVE_TUPLE_PAIRS, false, WIDE, P>(self, keys, out) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: avx2 is set only when the CPU has AVX2.
            unsafe { batch_avx2::<N, 3, G, FIVE_TUPLE_PAIRS, false, WIDE, P>(self, keys, out) };
            return;
        }
        // SAFETY: the scalar kernels need nothing.
        unsafe { batch_scalar::<N, 3, G, FIVE_TUPLE_PAIRS, false, WIDE, P>(self, keys, out) };
    }

    fn classify_scalar_or_simd<const G: usize>(&self, keys: &[Key<N>], out: &mut [i32]) {
        // Trees tested a pass at a time ([`Self::choose_passes`]) have
        // their own build of the batch: without them the batch is the
        // block-by-block loop alone, its code as if passes did not exist.
        if G > 1 && self.trees.iter().any(|t| t.passes) {
            self.classify_with::<G, true>(keys, out)
        } else {
            self.classify_with::<G, false>(keys, out)
        }
    }

    fn classify_with<const G: usize, const P: bool>(&self, keys: &[Key<N>], out: &mut [i32]) {
        // The five-tuple's words (source, destination, the two ports as a
        // pair, protocol) with their pairs known at compile time.
        if N == MAX_FIELDS && self.words[..] == FIVE_TUPLE_WORDS && self.fold == Some(4) {
            if self.wide {
                self.five_tuple::<G, true, P>(keys, out)
            } else {
                self.five_tuple::<G, false, P>(keys, out)
            }
            return;
        }
        macro_rules! go {
            ($($nf:literal)*) => {
                match self.words.len() {
                    $(n if n == $nf || ($nf == 0 && n > 8) => {
                        #[cfg(target_arch = "x86_64")]
                        if self.avx512 {
                            // SAFETY: avx512 is set only when the CPU has AVX-512 F/VL.
                            unsafe { batch_avx512::<N, $nf, G, 0, true, false, P>(self, keys, out) };
                            return;
                        }
                        #[cfg(target_arch = "x86_64")]
                        if self.avx2 {
                            // SAFETY: avx2 is set only when the CPU has AVX2.
                            unsafe { batch_avx2::<N, $nf, G, 0, true, false, P>(self, keys, out) };
                            return;
                        }
                        // SAFETY: the scalar kernels need nothing.
                        unsafe { batch_scalar::<N, $nf, G, 0, true, false, P>(self, keys, out) }
                    })*
                    _ => unreachable!("a word count is one of the arms"),
                }
            };
        }
        // Up to 8 leaf words with a kernel each; none or more (keys wider
        // than the 5-tuple's) at a run-time count (`NW` 0).
        go!(0 1 2 3 4 5 6 7 8)
    }
}

/// A leaf block of `nw` words (`push_block`): its rows, and the row and
/// shift of a lane's rule id (beside a folded field's bounds, or alone).
#[inline(always)]
const fn block_layout(nw: usize, fold: bool, wide: bool) -> (usize, usize, u32) {
    match (wide, fold) {
        (true, _) => (2 * nw + 2, 2 * nw + 1, 0),
        (false, true) => (2 * nw + 1, 2 * nw, 16),
        (false, false) => (2 * nw + 1, 2 * nw, 0),
    }
}

/// Appends one block of up to [`LANES`] rules (index, box) to `rows` in
/// the layout the kernels read: per word a row of low and a row of high
/// bounds (biased), then the index row (with the folded field's bounds when
/// there is one), then with `wide` the ids alone; unused lanes meet no key.
fn push_block<const N: usize>(words: &[(usize, Option<usize>)], fold: Option<usize>, wide: bool, rows: &mut Vec<Row>, lanes: &[(u32, &Box_<N>)]) {
    let (nw, at) = (words.len(), rows.len());
    for &(_, b) in words {
        // A lane no key meets (both halves of a pair).
        let (lo, hi) = simd::empty_bounds(b.is_some());
        rows.push(Row([lo; LANES]));
        rows.push(Row([hi; LANES]));
    }
    rows.push(Row([if fold.is_some() { simd::FOLD_EMPTY } else { u32::MAX }; LANES]));
    if wide {
        rows.push(Row([u32::MAX; LANES]));
    }
    for (l, &(s, bx)) in lanes.iter().enumerate() {
        for (w, &(a, b)) in words.iter().enumerate() {
            let (lo, hi) = match b {
                None => bx[a],
                Some(b) => (simd::pack(bx[a].0, bx[b].0), simd::pack(bx[a].1, bx[b].1)),
            };
            let bias = simd::bias(b.is_some());
            rows[at + 2 * w].0[l] = lo ^ bias;
            rows[at + 2 * w + 1].0[l] = hi ^ bias;
        }
        rows[at + 2 * nw].0[l] = match fold {
            Some(f) => s << 16 | simd::fold_bounds(bx[f].0, bx[f].1),
            None => s,
        };
        if wide {
            rows[at + 2 * nw + 1].0[l] = s;
        }
    }
}

/// A rule's box (field widths `widths`): none when it matches nothing (a
/// range beyond the field), an error when a field is not a range.
fn rule_box<const N: usize>(r: &Rule<N>, widths: &[u8]) -> Result<Option<Box_<N>>, ()> {
    let mut bx = [(0u32, 0u32); N];
    for (f, &w) in widths.iter().enumerate() {
        let (lo, hi) = r.fields[f].as_range(w).ok_or(())?;
        let hi = hi.min(width_mask(w));
        if lo > hi {
            return Ok(None);
        }
        bx[f] = (lo, hi);
    }
    Ok(Some(bx))
}

/// Up to `n` keys inside the set's rules (a point drawn in every field of
/// rules spread over the set), deterministic: the lookups the cost model
/// weighs when no trace is at hand.
fn sample_keys<const N: usize>(set: &RuleSet<N>, n: usize) -> Vec<Key<N>> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut keys = Vec::with_capacity(n);
    if set.is_empty() {
        return keys;
    }
    for i in 0..n {
        let r = &set.rules[i * set.len() / n];
        let mut k = Key([0; N]);
        for (f, field) in set.schema.fields.iter().enumerate() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (lo, hi) = r.fields[f].as_range(field.bits).unwrap_or((0, width_mask(field.bits)));
            let hi = hi.min(width_mask(field.bits)).max(lo);
            k.0[f] = (lo as u64 + x % (hi as u64 - lo as u64 + 1)) as u32;
        }
        keys.push(k);
    }
    keys
}

fn empty_leaf() -> Node {
    Node::leaf(0, 0, 0, u32::MAX)
}

/// `$body` sixteen times with `$j` bound to 0, 1, .., 15 (constants, so
/// the indices they make need no arithmetic).
macro_rules! seq16 {
    ($j:ident => $body:expr) => {
        seq16!(@ $j => $body; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (@ $j:ident => $body:expr; $($n:literal)*) => {
        $({
            let $j: usize = $n;
            $body;
        })*
    };
}

/// The batch lookup, written once and compiled three times: with the
/// scalar kernels, and inside an AVX2 and an AVX-512 function with their
/// kernels (so they inline). `$prep` packs a five-tuple key for a lane.
macro_rules! batch_fn {
    ($(#[$attr:meta])* fn $name:ident, $below:expr, $block:expr, $block_n:expr, $prep:expr) => {
        $(#[$attr])*
        unsafe fn $name<const N: usize, const NW: usize, const GROUP: usize, const PAIRS: u32, const DYN: bool, const WIDE: bool, const PASSES: bool>(t: &PTree<N>, keys: &[Key<N>], out: &mut [i32]) {
            let nodes = &t.nodes[..];
            let rows = &t.rows[..];
            let pairs = if DYN { t.pairs } else { PAIRS };
            // Five-tuple (not DYN): the protocol is folded.
            let fold = if DYN { t.fold.is_some() } else { true };
            // A lane's rule id: row `idr` of its block, shifted by `sh`.
            // NW 0: the leaf words counted at run time (more than 8).
            let nw = if NW == 0 { t.words.len() } else { NW };
            let (stride, idr, sh) = block_layout(nw, fold, if DYN { t.wide } else { WIDE });
            // Per lane its key biased (nodes compare it as is) and packed
            // into leaf words.
            let mut kk = [[0u32; N]; GROUP];
            let mut pk = [[0u32; N]; GROUP];
            let mut cur = [0u32; GROUP];
            let every: [u8; GROUP] = core::array::from_fn(|l| l as u8);
            for (ks, os) in keys.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
                // A short last group repeats its last key: every loop below
                // runs over the whole group, unrolled and without checks.
                let g = ks.len();
                // SAFETY: l.min(g - 1) < g = ks.len(); a full group's l < g.
                macro_rules! prep {
                    ($l:expr, $k:expr) => {{
                        let (l, k) = ($l, $k);
                        if DYN {
                            kk[l] = k.0.map(|x| x ^ BIAS);
                            pk[l] = if NW == 0 { t.pack_key(k) } else { t.pack_key_n::<NW>(k) };
                        } else {
                            $prep(k, kk.get_unchecked_mut(l), pk.get_unchecked_mut(l));
                        }
                    }};
                }
                if GROUP == 16 && g == GROUP {
                    seq16!(l => prep!(l, ks.get_unchecked(l)));
                } else {
                    for l in 0..GROUP {
                        prep!(l, ks.get_unchecked(l.min(g - 1)));
                    }
                }
                let mut best = [u32::MAX; GROUP];
                if !t.odd.is_empty() {
                    for l in 0..GROUP {
                        best[l] = t.odd_best(&ks[l.min(g - 1)]);
                    }
                }
                // Until a lane matches, every lane walks each tree (the
                // first tree, mostly the only one).
                let mut fresh = t.odd.is_empty();
                for tree in &t.trees {
                    // The lanes that walk it: all, or those whose best
                    // match so far is worse than the tree's best rule
                    // (listed without branches).
                    let mut act = every;
                    let na = if fresh {
                        GROUP
                    } else {
                        let mut na = 0;
                        for l in 0..GROUP {
                            act[na] = l as u8;
                            na += (best[l] > tree.min_prio) as usize;
                        }
                        na
                    };
                    fresh = false;
                    if na == 0 {
                        continue;
                    }
                    // SAFETY (every unchecked index below): node and block
                    // indices come from the build (children, leaves' blocks,
                    // block 0), lanes from `act` (< GROUP), j < na <= GROUP.
                    for j in 0..na {
                        *cur.get_unchecked_mut(j) = tree.root;
                    }
                    // A lane's step: a leaf is its own only child; the
                    // load of the child's word tells whether it is inner
                    // and brings its line in.
                    macro_rules! step {
                        ($j:expr, $l:expr, $inner:ident) => {{
                            let n = nodes.get_unchecked(*cur.get_unchecked($j) as usize);
                            let c = n.base + $below(n, *kk.get_unchecked($l).get_unchecked(n.field()));
                            *cur.get_unchecked_mut($j) = c;
                            $inner |= nodes.get_unchecked(c as usize).info;
                        }};
                    }
                    // Down the tree in lockstep, without branches per lane:
                    // a lane at a leaf stays there; the walk stops when
                    // every lane is at a leaf.
                    for _ in 0..tree.depth {
                        let mut inner = 0;
                        if GROUP == 16 && na == GROUP {
                            // Every lane, in lane order, unrolled: lane
                            // indices are constants.
                            seq16!(j => step!(j, j, inner));
                        } else if na == GROUP {
                            for j in 0..GROUP {
                                step!(j, j, inner);
                            }
                        } else {
                            for j in 0..na {
                                step!(j, *act.get_unchecked(j) as usize, inner);
                            }
                        }
                        if inner & INNER == 0 {
                            break;
                        }
                    }
                    for j in 0..na {
                        simd::prefetch(rows.as_ptr().wrapping_add(nodes.get_unchecked(*cur.get_unchecked(j) as usize).first_block() * stride));
                    }
                    // Each lane's leaf, block by block in priority order,
                    // as far as a block could beat its best match so far
                    // (a block's first lane is its best rule); the first
                    // block always (an empty leaf's is block 0, which
                    // matches nothing).
                    if PASSES && tree.passes {
                        // A pass tests one block of every lane still
                        // searching, then keeps the lanes whose block
                        // missed and whose leaf has another: no branch per
                        // lane on whether a block matched, and a pass's
                        // blocks load side by side. A lane whose block
                        // cannot win (the first too: in a later tree most
                        // lanes have matched better) tests block 0, which
                        // matches nothing. Only in the batch's build with
                        // PASSES: without it the loop below compiles as
                        // if this one did not exist.
                        let mut lv = every;
                        let (mut nl, mut k) = (na, 0usize);
                        while nl > 0 {
                            let mut n2 = 0;
                            for q in 0..nl {
                                let j = *lv.get_unchecked(q) as usize;
                                let l = *act.get_unchecked(j) as usize;
                                let n = nodes.get_unchecked(*cur.get_unchecked(j) as usize);
                                let (key, bl) = (pk.get_unchecked(l), best.get_unchecked_mut(l));
                                let at = (n.first_block() + k) * stride;
                                let can = *rows.get_unchecked(at + idr).0.get_unchecked(0) >> sh < *bl;
                                let at = if can { at } else { 0 };
                                let blk = rows.get_unchecked(at..at + stride);
                                let m = if NW == 0 { $block_n(blk, key, nw, pairs, fold) } else { $block(blk, key, pairs, fold) };
                                let hit = *blk.get_unchecked(idr).0.get_unchecked((m.trailing_zeros() & (LANES as u32 - 1)) as usize) >> sh;
                                *bl = (*bl).min(if m != 0 { hit } else { u32::MAX });
                                *lv.get_unchecked_mut(n2) = j as u8;
                                n2 += (can & (m == 0) & (k + 1 < n.blocks())) as usize;
                            }
                            nl = n2;
                            k += 1;
                        }
                        continue;
                    }
                    for j in 0..na {
                        let l = *act.get_unchecked(j) as usize;
                        let n = nodes.get_unchecked(*cur.get_unchecked(j) as usize);
                        let (key, bl) = (pk.get_unchecked(l), best.get_unchecked_mut(l));
                        let (first, nb) = (n.first_block() * stride, n.blocks().max(1));
                        for b in 0..nb {
                            let blk = rows.get_unchecked(first + b * stride..first + (b + 1) * stride);
                            let id = blk.get_unchecked(idr).0.as_ptr();
                            if b > 0 && *id >> sh >= *bl {
                                break;
                            }
                            let m = if NW == 0 { $block_n(blk, key, nw, pairs, fold) } else { $block(blk, key, pairs, fold) };
                            if m != 0 {
                                *bl = (*bl).min(*id.add(m.trailing_zeros() as usize) >> sh);
                                break;
                            }
                        }
                    }
                }
                match &t.upd {
                    None => {
                        // u32::MAX (no match) is -1 as it is.
                        for (o, &b) in os.iter_mut().zip(&best) {
                            *o = b as i32;
                        }
                    }
                    Some(u) => {
                        // After updates: the key's rank is its position.
                        ranks(u, &best[..g], os);
                    }
                }
            }
        }
    };
}

/// The positions of the keys `best` (u32::MAX: none, -1) after updates:
/// a rank each (no match: the rank of key 0, dropped without a branch).
/// Without checks or branches: the rank per answer is what a tree that
/// has taken updates does beyond a fresh build reading the same lines.
#[inline(always)]
fn ranks<const N: usize>(u: &Updates<N>, best: &[u32], os: &mut [i32]) {
    for (o, &b) in os.iter_mut().zip(best) {
        // SAFETY: a key from a leaf lane is below the key space, and so is 0.
        let r = unsafe { u.rank_below(if b == u32::MAX { 0 } else { b }) } as i32;
        *o = if b == u32::MAX { -1 } else { r };
    }
}

batch_fn!(#[inline(never)] fn batch_scalar, simd::below_scalar, simd::block_scalar::<NW, N>, simd::block_scalar_n::<N>, simd::prep5_scalar);
#[cfg(target_arch = "x86_64")]
batch_fn!(#[target_feature(enable = "avx2,popcnt")] #[inline(never)] fn batch_avx2, simd::avx2::below, simd::avx2::block::<NW, N>, simd::avx2::block_n::<N>, simd::avx2::prep5);
#[cfg(target_arch = "x86_64")]
batch_fn!(#[target_feature(enable = "avx512f,avx512vl,avx2,popcnt")] #[inline(never)] fn batch_avx512, simd::avx512::below, simd::avx512::block::<NW, N>, simd::avx512::block_n::<N>, simd::avx2::prep5);

impl<const N: usize> Classifier<N> for PTree<N> {
    fn classify(&self, key: &Key<N>) -> Match {
        let mut out = [0i32; 1];
        self.classify_scalar_or_simd::<1>(std::slice::from_ref(key), &mut out);
        (out[0] >= 0).then_some(out[0] as u32)
    }

    fn classify_batch(&self, keys: &[Key<N>], out: &mut [i32]) {
        let n = keys.len().min(out.len());
        self.classify_scalar_or_simd::<GROUP>(&keys[..n], &mut out[..n]);
    }
}

impl<const N: usize> MemoryWalk<N> for PTree<N> {
    /// Per tree not skipped: one 64-byte read per node on the path (the
    /// reads are dependent), then one read per leaf block searched (the
    /// block's rows, contiguous). Nodes, then blocks, lie in one array
    /// interleaved over [`WALK_BANKS`] banks by 64-byte line, as a memory
    /// controller maps addresses.
    fn walk(&self, key: &Key<N>, accesses: &mut Vec<MemAccess>) -> Match {
        let img = self.image();
        let stride = self.stride();
        let pk = self.pack_key(key);
        let block_bytes = (stride * std::mem::size_of::<Row>()) as u32;
        let rows_at = (img.nodes.len() * std::mem::size_of::<Node>()) as u64;
        // The rules searched linearly, after the blocks, one read each as
        // far as the first that matches.
        let odd_at = rows_at + (img.rows.len() * std::mem::size_of::<Row>()) as u64;
        let mut best = u32::MAX;
        for (j, (i, r)) in img.odd.iter().enumerate() {
            let addr = odd_at + j as u64 * super::linear::RULE_BYTES as u64;
            accesses.push(MemAccess { bank: (addr / 64 % WALK_BANKS) as u16, addr, bytes: super::linear::RULE_BYTES });
            if r.matches(key) {
                best = *i;
                break;
            }
        }
        for tree in &self.trees {
            if tree.min_prio >= best {
                continue;
            }
            let mut i = tree.root;
            loop {
                accesses.push(MemAccess { bank: (i as u64 % WALK_BANKS) as u16, addr: i as u64 * 64, bytes: 64 });
                let n = &img.nodes[i as usize];
                if n.is_leaf() {
                    break;
                }
                i = n.base + simd::below_scalar(n, key.0[n.field()] ^ BIAS);
            }
            let n = &img.nodes[i as usize];
            for b in n.first_block()..n.first_block() + n.blocks() {
                let blk = &img.rows[b * stride..(b + 1) * stride];
                if self.id_of(blk, 0) >= best {
                    break;
                }
                let addr = rows_at + (b * stride * 32) as u64;
                accesses.push(MemAccess { bank: (addr / 64 % WALK_BANKS) as u16, addr, bytes: block_bytes });
                let m = self.test_block(blk, &pk);
                if m != 0 {
                    best = best.min(self.id_of(blk, m.trailing_zeros() as usize));
                    break;
                }
            }
        }
        let Some(u) = &self.upd else {
            return (best != u32::MAX).then_some(best);
        };
        // After updates: the key's rank, one read of the rank table (after
        // the rules searched linearly).
        if best == u32::MAX {
            return None;
        }
        let addr = odd_at + (img.odd.len() * super::linear::RULE_BYTES as usize) as u64 + (best as u64 >> 5) * 8;
        accesses.push(MemAccess { bank: (addr / 64 % WALK_BANKS) as u16, addr, bytes: 8 });
        Some(u.rank(best))
    }

    /// After updates, also the rank table.
    fn memory_bytes(&self) -> u64 {
        self.bytes() + self.upd.as_ref().map_or(0, |u| u.bytes())
    }
}

impl<const N: usize> super::Structure<N> for PTree<N> {
    fn stats(&self) -> Vec<(&'static str, String)> {
        let s = &self.stats;
        let per_rule = if s.rules == 0 { 0.0 } else { s.bytes as f64 / s.rules as f64 };
        vec![
            ("rules", s.rules.to_string()),
            ("build_ms", format!("{:.1}", s.build_time.as_secs_f64() * 1e3)),
            ("trees", s.trees.to_string()),
            ("inner nodes", s.inner_nodes.to_string()),
            ("leaves", s.leaves.to_string()),
            ("leaf rule items", s.items.to_string()),
            ("leaf blocks", s.blocks.to_string()),
            ("max depth", s.max_depth.to_string()),
            ("rules searched linearly", s.odd.to_string()),
            ("rules in the side leaf", s.side.to_string()),
            ("bytes", s.bytes.to_string()),
            ("bytes per rule", format!("{per_rule:.1}")),
            ("kernels", if s.avx512 { "avx512".into() } else if s.avx2 { "avx2".into() } else { "scalar".into() }),
            ("updates since compaction", self.pending().0.to_string()),
            ("unused blocks", self.pending().1.to_string()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::linear::Linear;
    use crate::rules::{FieldMatch, Schema};

    fn rule(src: (u32, u8), dst: (u32, u8), dport: (u32, u32)) -> Rule {
        Rule::new(
            &[FieldMatch::prefix(src.0, src.1, 32), FieldMatch::prefix(dst.0, dst.1, 32), FieldMatch::ANY, FieldMatch::range(dport.0, dport.1), FieldMatch::ANY],
            0,
            0,
        )
    }

    #[test]
    fn wide_nodes_shallow_trees_and_every_kernel_equals_the_oracle() {
        let mut rules = Vec::new();
        for i in 0..600u32 {
            rules.push(rule((0x0a00_0000 | (i * 7919) << 8, 24), (0xc0a8_0000 | i, 32), (i * 10 % 60000, i * 10 % 60000 + 50)));
        }
        for i in 0..50u32 {
            rules.push(rule((0, 0), (i << 24, 8), (0, 65535)));
        }
        rules.push(rule((0, 0), (0, 0), (0, 65535)));
        let set = RuleSet::new(Schema::five_tuple(), rules);
        let lin = Linear::new(&set);
        let keys: Vec<Key> = (0..3000u32)
            .map(|i| Key::five_tuple(0x0a00_0005 | ((i % 700) * 7919) << 8, 0xc0a8_0000 | (i % 650), 0, (i * 10 % 60000 + i % 70) as u16, 6))
            .collect();
        // Scalar, AVX2 and AVX-512 kernels (those the CPU has).
        for (simd, avx512) in [(false, false), (true, false), (true, true)] {
            let t = PTree::build(&set, &PTreeConfig { simd, avx512, ..Default::default() }).unwrap();
            assert_eq!((t.stats().avx2, t.stats().avx512), (simd && simd::has_avx2(), simd && avx512 && simd::has_avx512()));
            assert!(t.stats().max_depth <= 4, "depth {}", t.stats().max_depth);
            assert!(t.stats().trees >= 2);
            let mut out = vec![0; keys.len()];
            t.classify_batch(&keys, &mut out);
            let mut acc = Vec::new();
            for (k, o) in keys.iter().zip(&out) {
                let w = lin.classify(k);
                assert_eq!(*o, w.map_or(-1, |r| r as i32));
                assert_eq!(t.classify(k), w);
                acc.clear();
                assert_eq!(t.walk(k, &mut acc), w);
                assert!(acc.len() <= 3 * (t.stats().max_depth + 2), "{} reads", acc.len());
            }
        }
    }

    #[test]
    fn a_set_of_65535_rules_or_more_keeps_the_folded_protocol_with_ids_in_a_row_of_their_own() {
        use crate::workload::{rulegen, seed::Params};
        let set = rulegen::generate(&Params::builtin("fw").unwrap(), 70_000, 3);
        let keys = sample_keys(&set, 1500);
        for (simd, avx512) in [(false, false), (true, false), (true, true)] {
            let mut t = PTree::build(&set, &PTreeConfig { simd, avx512, ..Default::default() }).unwrap();
            assert!(t.wide && t.fold.is_some() && t.stride() == 8, "stride {}", t.stride());
            // Ids past 65,535 answer (the trace reaches the whole set).
            let mut out = vec![0; keys.len()];
            for round in 0..2 {
                let lin = Linear::new(&t.rule_set());
                t.classify_batch(&keys, &mut out);
                let mut acc = Vec::new();
                for (k, o) in keys.iter().zip(&out) {
                    let w = lin.classify(k);
                    assert_eq!(*o, w.map_or(-1, |r| r as i32), "round {round}");
                    acc.clear();
                    assert_eq!(t.walk(k, &mut acc), w);
                }
                assert!(out.iter().any(|&o| o > 0xffff));
                // Then after updates in place (keys in a row of their own).
                for i in 0..40 {
                    let at = (i * 1733 + 66_000) % t.len();
                    let r = t.rule_set().rules[at];
                    t.delete(at).unwrap();
                    if i % 2 == 0 {
                        t.insert(at / 2, r).unwrap();
                    }
                }
                assert!(t.pending().0 > 0 && t.upd.as_ref().is_some_and(|u| u.space > 0xffff));
            }
        }
    }

    #[test]
    fn a_small_firewall_set_gets_fewer_cheaper_trees_and_an_acl_set_keeps_its_partition() {
        use crate::workload::{rulegen, seed::Params};
        for (kind, fewer) in [("fw", true), ("acl", false)] {
            let set = rulegen::generate(&Params::builtin(kind).unwrap(), 1000, 1);
            let t = PTree::build(&set, &PTreeConfig::default()).unwrap();
            let parts = PTree::build(&set, &PTreeConfig { small: 0, ..Default::default() }).unwrap();
            let keys = sample_keys(&set, 2048);
            assert_eq!(t.stats().trees < parts.stats().trees, fewer, "{kind}: {} trees", t.stats().trees);
            if fewer {
                assert!(t.cost(&keys).0 <= 0.8 * parts.cost(&keys).0);
                assert!(parts.stats().trees > t.stats().trees);
            } else {
                // Its partition, maybe with smaller leaves (cheaper by the
                // same cost model).
                assert_eq!(t.stats().trees, parts.stats().trees);
                assert!(t.cost(&keys).0 <= parts.cost(&keys).0);
            }
            let lin = Linear::new(&set);
            let mut out = vec![0; keys.len()];
            t.classify_batch(&keys, &mut out);
            for (k, o) in keys.iter().zip(&out) {
                assert_eq!(*o, lin.classify(k).map_or(-1, |r| r as i32));
            }
        }
    }

    #[test]
    fn leaves_tested_a_pass_at_a_time_answer_as_block_by_block() {
        use crate::workload::{rulegen, seed::Params};
        // Firewall rules (leaves of several blocks; later trees whose
        // leaves mostly cannot beat the match so far), as the build picks
        // them and as its partition, fresh and after updates in place.
        let set = rulegen::generate(&Params::builtin("fw").unwrap(), 1000, 3);
        for config in [PTreeConfig::default(), PTreeConfig { small: 0, bucket: 48, ..Default::default() }] {
            let mut t = PTree::build(&set, &config).unwrap();
            let mut now = set.rules.clone();
            for round in 0..2 {
                for passes in [false, true] {
                    for tree in &mut t.trees {
                        tree.passes = passes;
                    }
                    check(&t, &now, &format!("round {round}, passes {passes}"));
                }
                for i in 0..30 {
                    let at = (i * 37) % now.len();
                    let r = now.remove(at);
                    t.delete(at).unwrap();
                    if i % 3 != 0 {
                        now.insert(at / 2, r);
                        t.insert(at / 2, r).unwrap();
                    }
                }
            }
        }
    }

    #[test]
    fn deleting_a_rule_that_covered_leaves_finds_the_rules_below_it_again() {
        // Rule 0 covers everything: the build drops every rule below it.
        let mut rules = vec![rule((0, 0), (0, 0), (0, 65535))];
        for i in 0..40u32 {
            rules.push(rule((i << 24, 8), (0, 0), (i, i)));
        }
        let set = RuleSet::new(Schema::five_tuple(), rules.clone());
        let mut t = PTree::build(&set, &PTreeConfig { bucket: 4, ..Default::default() }).unwrap();
        let k = Key::five_tuple(7 << 24, 1, 0, 7, 6);
        assert_eq!(t.classify(&k), Some(0));
        t.delete(0).unwrap();
        // The dropped rules are back in the leaves.
        assert_eq!(t.classify(&k), Some(7));
        let mut acc = Vec::new();
        assert_eq!(t.walk(&k, &mut acc), Some(7));
        rules.remove(0);
        let lin = Linear::new(&RuleSet::new(Schema::five_tuple(), rules));
        for i in 0..200u32 {
            let k = Key::five_tuple(i << 22, i, 0, (i % 50) as u16, 6);
            assert_eq!(t.classify(&k), lin.classify(&k), "key {i}");
        }
    }

    /// The tree's answers against the oracle over `now`, by every path.
    fn check(t: &PTree, now: &[Rule], what: &str) {
        let keys = sample_keys(&RuleSet::new(Schema::five_tuple(), now.to_vec()), 300);
        check_keys(t, now, &keys, what);
    }

    /// [`check`] on the given keys.
    fn check_keys(t: &PTree, now: &[Rule], keys: &[Key], what: &str) {
        let lin = Linear::new(&RuleSet::new(Schema::five_tuple(), now.to_vec()));
        let mut out = vec![0; keys.len()];
        t.classify_batch(keys, &mut out);
        let mut acc = Vec::new();
        for (k, o) in keys.iter().zip(&out) {
            let w = lin.classify(k);
            assert_eq!(*o, w.map_or(-1, |r| r as i32), "{what}: batch {k:?}");
            assert_eq!(t.classify(k), w, "{what}: classify {k:?}");
            acc.clear();
            assert_eq!(t.walk(k, &mut acc), w, "{what}: walk {k:?}");
        }
        assert_eq!(t.rule_set().rules, now, "{what}");
    }

    #[test]
    fn a_delete_takes_the_lanes_out_and_a_lookup_after_updates_reads_one_word_more() {
        let rules: Vec<Rule> = (0..200u32).map(|i| rule((i << 24, 8), (i << 8, 24), (i, i + 10))).collect();
        let set = RuleSet::new(Schema::five_tuple(), rules.clone());
        let mut t = PTree::build(&set, &PTreeConfig::default()).unwrap();
        let k = Key::five_tuple(3 << 24, 3 << 8, 0, 5, 6);
        let mut before = Vec::new();
        assert_eq!(t.walk(&k, &mut before), Some(3));
        let items = |t: &PTree| {
            let s = t.stride();
            let (idr, sh) = t.id_row();
            let empty = t.lane_key(&t.upd.as_ref().unwrap().empty);
            let mut n = 0;
            for nd in t.nodes.iter().filter(|n| n.is_leaf()) {
                for b in nd.first_block()..nd.first_block() + nd.blocks() {
                    n += (0..LANES).filter(|&l| t.rows[b * s + idr].0[l] >> sh != empty).count();
                }
            }
            n
        };
        t.delete(100).unwrap();
        let n = items(&t);
        t.delete(3).unwrap();
        // Rule 3's lane is gone (it sat in one leaf): no tombstone left.
        assert_eq!(items(&t), n - 1);
        let mut after = Vec::new();
        // Rule 3 is gone; its key matches no other rule; one read more
        // (the rank table) after the same path.
        assert_eq!(t.walk(&k, &mut after), None);
        assert_eq!(after.len(), before.len() + 1);
        let mut now = rules;
        now.remove(100);
        now.remove(3);
        check(&t, &now, "after deletes");
        assert_eq!(t.memory_bytes(), t.bytes() + t.upd.as_ref().unwrap().bytes());
    }

    #[test]
    fn the_lookup_profile_counts_the_reads_the_memory_walk_makes() {
        let rules: Vec<Rule> = (0..200u32).map(|i| rule((i << 24, 8), (i << 8, 24), (i, i + 10))).collect();
        let set = RuleSet::new(Schema::five_tuple(), rules);
        let mut t = PTree::build(&set, &PTreeConfig::default()).unwrap();
        // Key i matches rule i alone.
        let keys: Vec<Key> = (0..200u32).map(|i| Key::five_tuple(i << 24, i << 8, 0, (i + 5) as u16, 6)).collect();
        let block_bytes = t.stride() * std::mem::size_of::<Row>();
        for k in &keys {
            let p = t.lookup_profile(std::slice::from_ref(k));
            let mut acc = Vec::new();
            assert!(t.walk(k, &mut acc).is_some());
            let rows_at = (t.image().nodes.len() * std::mem::size_of::<Node>()) as u64;
            let nodes = acc.iter().filter(|a| a.addr < rows_at).count();
            let blocks = acc.iter().filter(|a| a.addr >= rows_at && a.bytes as usize == block_bytes).count();
            assert_eq!((p.trees + p.levels, p.blocks), (nodes as f64, blocks as f64), "{k:?}");
            // Each block read in whole lines, its lanes in use at least the rule matched.
            assert!(p.lines >= p.blocks * (block_bytes / 64) as f64 && p.lines <= p.blocks * (block_bytes.div_ceil(64) + 1) as f64, "{p:?}");
            assert!(p.lanes >= 1.0 && p.lanes <= p.blocks * LANES as f64, "{p:?}");
            assert_eq!((p.rank, p.distinct_leaves), (0.0, p.trees as usize), "{p:?}");
        }
        // Readied for updates: the same reads, and a rank look-up per answer.
        let before = t.lookup_profile(&keys);
        t.prepare_updates();
        let after = t.lookup_profile(&keys);
        assert_eq!(after.rank, 1.0);
        // (the lines of a group and the distinct ones depend on where the
        // allocator put the rows, so on the run: not compared)
        assert_eq!((after.trees, after.levels, after.blocks, after.lanes, after.lines, after.distinct_leaves, after.row_bytes),
                   (before.trees, before.levels, before.blocks, before.lanes, before.lines, before.distinct_leaves, before.row_bytes));
        check(&t, &set.rules, "readied for updates");
        // Compacted: the same reads again.
        t.compact_blocks();
        let c = t.lookup_profile(&keys);
        assert_eq!((c.trees, c.levels, c.blocks, c.lanes, c.rank, c.distinct_leaves), (after.trees, after.levels, after.blocks, after.lanes, after.rank, after.distinct_leaves));
        check(&t, &set.rules, "compacted");
    }

    #[test]
    fn inserts_at_one_place_spread_the_keys_and_compaction_frees_the_blocks() {
        let rules: Vec<Rule> = (0..300u32).map(|i| rule((i << 24, 8), (i << 8, 24), (i, i + 10))).collect();
        let set = RuleSet::new(Schema::five_tuple(), rules.clone());
        let mut t = PTree::build(&set, &PTreeConfig { max_delta: 4, ..Default::default() }).unwrap();
        let nodes = t.nodes.len();
        let mut now = rules;
        let mut spread = false;
        // 60 rules inserted at the same position: its neighbours' keys
        // meet after a few and windows of keys are spread again.
        for i in 0..60u32 {
            let r = rule(((i * 7) << 24, 8 + (i % 3) as u8 * 8), (0, (i % 2) as u8 * 4), (i, i + 100));
            t.insert(150, r).unwrap();
            now.insert(150, r);
            let u = t.upd.as_ref().expect("updated in place, not built again");
            let keys = u.keys_in(0, u.space);
            assert_eq!(keys.len(), now.len());
            spread |= keys.windows(2).any(|w| w[1] - w[0] == 1);
            check(&t, &now, &format!("after {} inserts", i + 1));
        }
        assert!(spread, "neighbouring keys met");
        // Deletes and inserts elsewhere; every max(4, rules / 4) updates the
        // blocks are compacted (none left unused).
        let mut compacted = false;
        for i in 0..200u32 {
            let at = (i as usize * 37) % now.len();
            if i % 2 == 0 {
                t.delete(at).unwrap();
                now.remove(at);
            } else {
                let r = rule(((i * 5) << 24, 8), (0, 0), (i, i + 3));
                t.insert(at, r).unwrap();
                now.insert(at, r);
            }
            assert!(t.upd.is_some() && t.nodes.len() == nodes, "in place");
            compacted |= t.pending() == (0, 0);
            if i % 10 == 0 {
                check(&t, &now, &format!("after {} churn", i + 1));
            }
        }
        assert!(compacted);
        check(&t, &now, "at the end");
    }

    /// Churn that keeps the set's size: the leaves that grow take the holes
    /// others left, so the blocks are never compacted (no update copies
    /// the structure) and the rows stay within twice the blocks in use,
    /// with the answers the oracle's at the end.
    #[test]
    fn churn_reuses_the_holes_and_never_compacts() {
        use crate::workload::{rulegen, seed::Params};
        for kind in ["acl", "fw"] {
            let set = rulegen::generate(&Params::builtin(kind).unwrap(), 1_000, 3);
            let mut t = PTree::build(&set, &PTreeConfig { wide_leaves: Some(64), ..Default::default() }).unwrap();
            let mut now = set.rules.clone();
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            for i in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let n = now.len();
                if n > 1_000 || (n == 1_000 && i % 2 == 0) {
                    t.delete(x as usize % n).unwrap();
                    now.remove(x as usize % n);
                } else {
                    let r = set.rules[(x >> 32) as usize % set.len()];
                    t.insert(x as usize % (n + 1), r).unwrap();
                    now.insert(x as usize % (n + 1), r);
                }
            }
            assert_eq!(t.check_blocks(), Ok(()), "{kind}");
            assert_eq!(t.compactions(), 0, "{kind}");
            let (_, unused) = t.pending();
            let blocks = t.rows.len() / t.stride();
            assert!(2 * unused <= blocks, "{kind}: {unused} of {blocks} blocks unused");
            check(&t, &now, kind);
        }
    }

    /// The wide rules (wildcards on both addresses, differing in ports and
    /// protocol) make a tree of their own: no leaf of it holds them all,
    /// and every kernel, the single-key path and the memory walk answer as
    /// the oracle, fresh and after inserts and deletes there.
    #[test]
    fn the_side_leaf_is_a_tree_cut_where_its_rules_are_not_wildcards() {
        use crate::workload::{rulegen, seed::Params};
        let set = rulegen::generate(&Params::builtin("fw").unwrap(), 1_000, 3);
        let keys = sample_keys(&set, 3000);
        for (simd, avx512) in [(false, false), (true, false), (true, true)] {
            let mut t = PTree::build(&set, &PTreeConfig { simd, avx512, wide_leaves: Some(64), ..Default::default() }).unwrap();
            let side = *t.trees.last().unwrap();
            let aside = t.stats().side;
            assert!(side.side && side.depth >= 1 && aside > 2 * LANES, "side depth {} of {aside} rules", side.depth);
            let leaves: Vec<u32> = t.leaves_reached(side.root, &[(0, u32::MAX); MAX_FIELDS]);
            let most = leaves.iter().map(|&i| t.nodes[i as usize].blocks()).max().unwrap();
            assert!(leaves.len() > 1 && most * LANES < aside, "{} leaves, {most} blocks at most", leaves.len());
            let wide: Vec<usize> = (0..set.len()).filter(|&i| t.tree_of[i] as usize == t.trees.len() - 1).collect();
            let mut now = set.rules.clone();
            for round in 0..3 {
                check_keys(&t, &now, &keys, &format!("round {round}"));
                // wide rules in again at other places, and one out
                for (j, &i) in wide.iter().skip(8 * round).take(8).enumerate() {
                    let r = set.rules[i];
                    t.insert((i * 7 + j) % now.len(), r).unwrap();
                    now.insert((i * 7 + j) % now.len(), r);
                }
                t.delete(now.len() - 1).unwrap();
                now.pop();
            }
        }
    }

    #[test]
    fn a_rule_reaches_every_leaf_that_holds_it_and_a_wildcard_reaches_its_whole_tree() {
        use crate::workload::{rulegen, seed::Params};
        let set = rulegen::generate(&Params::builtin("fw").unwrap(), 600, 4);
        let t = PTree::build(&set, &PTreeConfig::default()).unwrap();
        let reach = t.leaves_per_rule();
        assert_eq!(reach.len(), set.len());
        // Leaves holding each rule, counted from the blocks (a leaf per
        // distinct allocation it points at, so shared blocks count once per leaf).
        let s = t.stride();
        let mut held = vec![0usize; set.len()];
        for nd in t.nodes.iter().filter(|n| n.is_leaf()) {
            let mut ids = std::collections::HashSet::new();
            for b in nd.first_block()..nd.first_block() + nd.blocks() {
                for l in 0..LANES {
                    ids.insert(t.id_of(&t.rows[b * s..], l));
                }
            }
            for id in ids.into_iter().filter(|&i| (i as usize) < set.len()) {
                held[id as usize] += 1;
            }
        }
        for (i, (&r, &h)) in reach.iter().zip(&held).enumerate() {
            assert!(r >= h && (r > 0) == (t.tree_of[i] != u32::MAX), "rule {i}: reaches {r} leaves, held by {h}");
        }
        // The widest rule reaches every leaf of its tree.
        let leaves_of = |root: u32| t.leaves_reached(root, &[(0, u32::MAX); MAX_FIELDS]).len();
        let widest = (0..set.len()).max_by_key(|&i| reach[i]).unwrap();
        assert!(reach[widest] <= leaves_of(t.trees[t.tree_of[widest] as usize].root));
        let all = RuleSet::new(set.schema.clone(), vec![rule((0, 0), (0, 0), (0, 65535))]);
        let one = PTree::build(&all, &PTreeConfig::default()).unwrap();
        assert_eq!(one.leaves_per_rule(), vec![leaves_of_tree(&one)]);
    }

    #[test]
    fn the_side_leaf_test_stops_early_and_agrees_with_the_leaves_reached() {
        use crate::workload::{rulegen, seed::Params};
        let set = rulegen::generate(&Params::builtin("fw").unwrap(), 1_000, 3);
        let t = PTree::build(&set, &PTreeConfig::default()).unwrap();
        let widths = t.widths();
        let mut stack = Vec::new();
        let mut checked = 0;
        for (r, &tr) in set.rules.iter().zip(&t.tree_of) {
            let (Ok(Some(bx)), true) = (rule_box(r, &widths), tr != u32::MAX) else { continue };
            let root = t.trees[tr as usize].root;
            let all = t.leaves_reached(root, &bx);
            let mut into = vec![7, 7];
            t.reach_into(root, &bx, &mut into, &mut stack);
            assert_eq!(into, all);
            for k in [0, 1, all.len().saturating_sub(1), all.len(), all.len() + 1, 64] {
                assert_eq!(t.reaches_over(root, &bx, k, &mut stack), all.len() > k, "k {k} of {}", all.len());
            }
            checked += (all.len() > 1) as usize;
        }
        assert!(checked > 10, "{checked} rules reach two leaves or more");
    }

    #[test]
    fn a_lane_moved_across_blocks_lands_where_a_lane_by_lane_copy_puts_it() {
        use crate::workload::{rulegen, seed::Params};
        let set = rulegen::generate(&Params::builtin("acl").unwrap(), 200, 1);
        let mut t = PTree::build(&set, &PTreeConfig::default()).unwrap();
        let stride = t.stride();
        // Four blocks of distinct words to move lanes within.
        t.rows = (0..4 * stride).map(|r| Row(std::array::from_fn(|l| (r * LANES + l) as u32))).collect();
        let lane = |rows: &[Row], j: usize| -> Vec<u32> { (0..stride).map(|r| rows[(j / LANES) * stride + r].0[j % LANES]).collect() };
        for count in 1..4 * LANES {
            for p in 0..count {
                for up in [true, false] {
                    let before = t.rows.clone();
                    t.move_lanes(0, p, count, up);
                    for j in 0..4 * LANES {
                        let want = match (up, j) {
                            (true, j) if j > p && j <= count => lane(&before, j - 1),
                            (false, j) if j >= p && j + 1 < count => lane(&before, j + 1),
                            _ => lane(&before, j),
                        };
                        assert_eq!(lane(&t.rows, j), want, "p {p} count {count} up {up} lane {j}");
                    }
                    t.rows = before;
                }
            }
        }
    }

    fn leaves_of_tree(t: &PTree) -> usize {
        t.leaves_reached(t.trees[0].root, &[(0, u32::MAX); MAX_FIELDS]).len()
    }

    #[test]
    fn the_rank_table_counts_and_selects_as_a_sorted_list() {
        // 50 rules: one run of counters; 1,000: many (a count per 2,048 keys).
        for n in [50u32, 1000] {
            let rules: Vec<Rule> = (0..n).map(|i| rule((i << 20, 12), (0, 0), (i, i))).collect();
            let mut t = PTree::build(&RuleSet::new(Schema::five_tuple(), rules), &PTreeConfig::default()).unwrap();
            t.start_updates();
            let u = t.upd.as_mut().unwrap();
            assert!(n < 1000 || u.hi.len() > 2, "space {}", u.space);
            let mut x = 0x9e37_79b9u64;
            for step in 0..3000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = (x % u.space as u64) as u32;
                let used = u.used(k);
                u.mark(k, if used { -1 } else { 1 });
                u.live = if used { u.live - 1 } else { u.live + 1 };
                if step % 7 == 0 {
                    // Counting a window again from its bits keeps every count.
                    let a = (x >> 40) as usize % u.ranks.len();
                    let before = (u.ranks.clone(), u.hi.clone());
                    u.recount_words(a, a + 1 + (x >> 50) as usize % 200);
                    assert_eq!((u.ranks.clone(), u.hi.clone()), before);
                }
                let keys = u.keys_in(0, u.space);
                assert_eq!(keys.len(), u.live);
                for q in [k, (x >> 24) as u32 % u.space] {
                    let p = keys.partition_point(|&y| y < q);
                    assert_eq!(u.rank(q) as usize, p);
                    assert_eq!(unsafe { u.rank_below(q) } as usize, p);
                }
                assert_eq!(u.rank(u.space) as usize, u.live);
                if !keys.is_empty() {
                    let i = (x >> 20) as usize % keys.len();
                    assert_eq!(u.select(i as u32), keys[i]);
                }
            }
        }
    }

    #[test]
    fn a_build_over_its_budget_is_made_shallower_and_stays_exact() {
        use crate::workload::{rulegen, seed::Params};
        let set = rulegen::generate(&Params::builtin("fw").unwrap(), 1_000, 2);
        let full = PTree::build(&set, &PTreeConfig { small: 0, ..Default::default() }).unwrap();
        let cfg = PTreeConfig { small: 0, max_bytes: full.stats().bytes - 1, ..Default::default() };
        let t = PTree::build(&set, &cfg).unwrap();
        assert!(t.stats().bytes < full.stats().bytes && t.stats().max_depth < full.stats().max_depth);
        assert!(t.stats().max_depth <= 8, "depth {}", t.stats().max_depth);
        let lin = Linear::new(&set);
        let keys = sample_keys(&set, 2000);
        let mut out = vec![0; keys.len()];
        t.classify_batch(&keys, &mut out);
        for (k, o) in keys.iter().zip(&out) {
            assert_eq!(*o, lin.classify(k).map_or(-1, |r| r as i32));
        }
    }

    #[test]
    fn a_non_range_ternary_is_searched_aside_and_budget_refuses() {
        let mut odd = rule((0, 0), (0, 0), (0, 65535));
        odd.fields[4] = FieldMatch::ternary(0x04, 0x0c);
        let set = RuleSet::new(Schema::five_tuple(), vec![rule((1 << 24, 8), (0, 0), (80, 80)), odd]);
        let t = PTree::build(&set, &PTreeConfig::default()).unwrap();
        assert_eq!(t.stats().odd, 1);
        assert_eq!(t.classify(&Key::five_tuple(1 << 24, 0, 0, 80, 0)), Some(0));
        assert_eq!(t.classify(&Key::five_tuple(0, 0, 0, 80, 0x05)), Some(1));
        assert_eq!(t.classify(&Key::five_tuple(0, 0, 0, 80, 0x08)), None);
        let tight = PTreeConfig { max_bytes: 64, ..Default::default() };
        assert!(matches!(PTree::build(&set, &tight), Err(BuildError::OverBudget { .. })));
    }
}

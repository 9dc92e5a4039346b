//! A decision-tree classifier in the style of FACL (Jia et al., "FACL: A
//! Flexible and High-Performance ACL engine on FPGA-based SmartNIC"), the
//! ELU's alternative to the trie.
//!
//! **Builder (CutSplit-like).** Rules are first partitioned by which address
//! fields they are *small* on (a range at most `2^(bits/2)` wide), as
//! CutSplit does, and each subset gets its own tree. A tree starts with
//! *cuts* (FACL node ops `src/dst IP (cut)`: `next = base + key[start:end]`,
//! at most 128 children) on the fields its rules are small on, while the
//! replication stays under `spfac`; below the cuts it *splits*
//! (HyperSplit: `next = base + (key > value)`), choosing the field and
//! threshold that minimise the larger side. A node with at most `bucket`
//! rules becomes a leaf searched linearly. A lookup walks every tree and
//! keeps the highest-priority answer (FACL's reorder engine).
//!
//! **Hardware mapping (FACL §III-E).** Tree nodes are placed on the layers of
//! the pipelined DT engines with FACL's greedy Algorithm 1 (deepest leaf
//! first; siblings adjacent in one layer; a child placed in a layer not
//! after its parent's costs a recirculation). Leaf rules are packed onto the
//! `m` parallel linear-search engines back to back (FACL Fig. 6b): a leaf
//! starting at slot `o` is read at row `o / m` with `ram_id = o % m`, engines
//! below `ram_id` reading the next row, so no slot is wasted on alignment.
//! [`FaclStats`] reports layers used, recirculations and memory per layer.
//!
//! **Updates.** Inserting a rule walks down the nodes its ranges overlap and
//! adds it to those leaves (a full leaf moves to free space and its parent's
//! pointer changes, FACL §III-F2); a leaf grown past `4 * bucket` is rebuilt
//! locally into a subtree. Deleting a rule removes it from its leaves. No
//! change forces a full rebuild; a rebuild does give a better tree after
//! many updates (leaves are never merged back, moved leaves leave holes).

use super::{BuildError, Classifier, Match, MemAccess, MemoryWalk};
use crate::rules::{width_mask, FieldMatch, Key, MatchKind, Rule, RuleSet, Schema, MAX_FIELDS};
use std::sync::OnceLock;
use std::time::Duration;

/// Parameters of FACL's classification module (CFM).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FaclConfig {
    /// DT engines chained one after the other.
    pub dt_modules: usize,
    /// Layers (pipeline stages) per DT engine; FACL builds DT-20.
    pub dt_layers: usize,
    /// Node slots per layer (4K: one URAM of 72-bit words).
    pub layer_nodes: usize,
    /// Parallel linear-search engines per LS module (LS-8).
    pub ls_engines: usize,
    /// Rule slots per engine (8K).
    pub ls_depth: usize,
    /// LS modules.
    pub ls_modules: usize,
}

impl Default for FaclConfig {
    /// The paper's FACL-on-PANIC: 4 x DT-20(4K), 3 x LS-8(8K).
    fn default() -> Self {
        FaclConfig { dt_modules: 4, dt_layers: 20, layer_nodes: 4096, ls_engines: 8, ls_depth: 8192, ls_modules: 3 }
    }
}

/// Build parameters of the decision tree.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DTreeConfig {
    /// Most rules in a leaf (linear search there).
    pub bucket: usize,
    /// Deepest node; a node this deep becomes a leaf whatever its size.
    pub max_depth: usize,
    /// Cuts may replicate rules up to `spfac` times the node's rule count.
    pub spfac: f64,
    /// Most bits one cut consumes (FACL limits a node to 128 children).
    pub max_cut_bits: u8,
    /// Most bytes the software structure may take.
    pub max_bytes: u64,
    pub facl: FaclConfig,
}

impl Default for DTreeConfig {
    fn default() -> Self {
        DTreeConfig { bucket: 8, max_depth: 40, spfac: 4.0, max_cut_bits: 7, max_bytes: 512 << 20, facl: FaclConfig::default() }
    }
}

/// Above this size (about a core's L2 cache) batches walk keys in lockstep.
const LOCKSTEP_BYTES: u64 = 1 << 20;

/// Bytes of a DT node in FACL's encoding: 4-bit op, 32-bit address,
/// 32-bit value = 68 bits, one 72-bit URAM word.
pub const NODE_BYTES: u32 = 9;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
enum Op {
    /// `next = base + ((key[field] >> shift) & (2^bits - 1))`; stored with
    /// `count = 2^bits - 1` and `value = u32::MAX`.
    Cut,
    /// `next = base + (key[field] > value)`; stored with `count = 0`.
    Split,
    /// Rules `base .. base + count` (room for `value`).
    Leaf,
}

#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Node {
    op: Op,
    field: u8,
    shift: u8,
    bits: u8,
    value: u32,
    base: u32,
    count: u32,
}

impl Node {
    const EMPTY: Node = Node { op: Op::Leaf, field: 0, shift: 0, bits: 0, value: 0, base: 0, count: 0 };
    fn children(&self) -> std::ops::Range<u32> {
        match self.op {
            Op::Cut => self.base..self.base + (1 << self.bits),
            Op::Split => self.base..self.base + 2,
            Op::Leaf => 0..0,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Tree {
    root: u32,
    /// No rule of the tree has a smaller priority index (a lower bound).
    min_prio: u32,
    /// Which address fields its rules are small on (bit f = field f).
    small: u32,
}

type Box_<const N: usize> = [(u32, u32); N];

/// Where Algorithm 1 and the LS packing put the structure.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaclStats {
    /// Algorithm 1 placed every node (else: not enough room, see `error`).
    pub fits: bool,
    pub error: Option<String>,
    /// Layers holding at least one node, of `dt_modules * dt_layers`.
    pub layers_used: usize,
    pub nodes_per_layer: Vec<usize>,
    pub bytes_per_layer: Vec<u64>,
    /// Parent-to-child edges going to a layer not after the parent's.
    pub recirculating_edges: usize,
    /// Most recirculations on one root-to-leaf path.
    pub max_recirculations: usize,
    /// Leaves reached only after at least one recirculation.
    pub leaves_recirculating: usize,
    /// Rule items in the leaves, their packed LS rows and bytes.
    pub ls_items: usize,
    pub ls_rows: usize,
    pub ls_bytes: u64,
    /// Bytes the aligned placement (FACL Fig. 6a) would need.
    pub ls_bytes_aligned: u64,
    /// LS capacity is enough for the packed items.
    pub ls_fits: bool,
}

/// Build statistics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DTreeStats {
    pub rules: usize,
    pub trees: usize,
    pub inner_nodes: usize,
    pub leaves: usize,
    /// Leaf rule items (rules counted once per leaf that holds them).
    pub items: usize,
    pub max_depth: usize,
    /// Sum over trees of their depth (FACL Table III).
    pub depth_sum: usize,
    /// Bytes of the software structure.
    pub bytes: u64,
    /// Bytes in FACL's layout: DT nodes plus packed LS items.
    pub hw_bytes: u64,
    pub build_time: Duration,
    pub facl: FaclStats,
}

/// A FACL-style decision-tree classifier over keys of `N` words.
pub struct DTree<const N: usize = MAX_FIELDS> {
    nf: usize,
    widths: Vec<u8>,
    config: DTreeConfig,
    nodes: Vec<Node>,
    /// Leaf rule items, `stride` words each: priority, then (lo, hi, mask)
    /// per field.
    items: Vec<u32>,
    stride: usize,
    trees: Vec<Tree>,
    /// Every rule ever added, by slot: the rule, its bounding box, whether
    /// the box is exact (no partial-mask field), its tree.
    rules: Vec<Rule<N>>,
    boxes: Vec<Box_<N>>,
    exact: Vec<bool>,
    slot_tree: Vec<u32>,
    /// Slots in priority order (the rule set as it is now).
    order: Vec<u32>,
    /// Per node: (DT layer, address in layer); per leaf also its LS row.
    place: Vec<(u16, u32)>,
    leaf_row: Vec<u32>,
    /// What the ELU's memory holds, in that layout ([`Image`]): built on
    /// the first walk after a change, read by the walk alone.
    image: OnceLock<Image>,
    schema: Schema,
    stats: DTreeStats,
    /// Address fields that CutSplit partitions on and may cut.
    cut_fields: Vec<usize>,
}

/// The trees as the ELU's memory holds them (FACL's layout): DT nodes by
/// memory slot, the slots of a layer back to back (a node's slot is its
/// layer's first slot plus its address there; without a placement, its
/// index), an inner node's `base` the slot of its first child (siblings
/// lie side by side in one layer, Algorithm 1), a leaf's `base` its first
/// item in the packed LS rows; and the LS items in that packing. The walk
/// ([`MemoryWalk::walk`]) reads only this, at the addresses it charges, so
/// its answer is what the memory layout gives: a placement or packing
/// fault shows up as a wrong answer, not just wrong timing.
struct Image {
    /// Per slot: the node and its (DT layer, address in the layer).
    dt: Vec<(Node, u16, u32)>,
    /// Per tree, its root's slot.
    roots: Vec<u32>,
    /// The LS items, `stride` words each, packed in leaf order.
    ls: Vec<u32>,
}

/// The smallest range covering what `fm` matches, and whether it is exact.
fn bounding(fm: &FieldMatch, bits: u8) -> ((u32, u32), bool) {
    let w = width_mask(bits);
    match fm.as_range(bits) {
        Some((lo, hi)) => ((lo, hi.min(w)), true),
        None => {
            let v = fm.lo & fm.mask & w;
            ((v, v | (!fm.mask & w)), false)
        }
    }
}

fn intersects<const N: usize>(a: &Box_<N>, b: &Box_<N>, nf: usize) -> bool {
    (0..nf).all(|f| a[f].0 <= b[f].1 && b[f].0 <= a[f].1)
}

fn covers<const N: usize>(rule: &Box_<N>, bx: &Box_<N>, nf: usize) -> bool {
    (0..nf).all(|f| rule[f].0 <= bx[f].0 && bx[f].1 <= rule[f].1)
}

impl<const N: usize> DTree<N> {
    /// Builds the trees of `set` and maps them onto FACL's engines.
    pub fn build(set: &RuleSet<N>, config: &DTreeConfig) -> Result<DTree<N>, BuildError> {
        let start = std::time::Instant::now();
        if config.bucket == 0 || config.max_cut_bits == 0 || config.max_cut_bits > 16 || config.spfac < 1.0 {
            return Err(BuildError::BadConfig(format!(
                "dtree needs bucket >= 1, max_cut_bits 1..16, spfac >= 1 (got {}, {}, {})",
                config.bucket, config.max_cut_bits, config.spfac
            )));
        }
        let f = &config.facl;
        if f.dt_modules * f.dt_layers == 0 || f.layer_nodes == 0 || f.ls_engines == 0 {
            return Err(BuildError::BadConfig("facl: dt_modules, dt_layers, layer_nodes, ls_engines must be >= 1".into()));
        }
        let nf = set.schema.len();
        let widths: Vec<u8> = set.schema.fields.iter().map(|f| f.bits).collect();
        let cut_fields: Vec<usize> = (0..nf)
            .filter(|&f| set.schema.fields[f].kind == MatchKind::Lpm && widths[f] >= 8)
            .take(2)
            .collect();
        let mut t = DTree {
            nf,
            widths,
            config: *config,
            nodes: Vec::new(),
            items: Vec::new(),
            stride: 1 + 3 * nf,
            trees: Vec::new(),
            rules: Vec::new(),
            boxes: Vec::new(),
            exact: Vec::new(),
            slot_tree: Vec::new(),
            order: Vec::new(),
            place: Vec::new(),
            leaf_row: Vec::new(),
            image: OnceLock::new(),
            schema: set.schema.clone(),
            stats: DTreeStats::default(),
            cut_fields,
        };
        let mut subsets: Vec<(u32, Vec<u32>)> = Vec::new();
        let full = t.full_box();
        for r in &set.rules {
            let slot = t.add_slot(r);
            t.order.push(slot);
            // A rule whose range lies outside its field's width matches no
            // key: it keeps its priority but joins no tree.
            if !intersects(&t.boxes[slot as usize], &full, nf) {
                continue;
            }
            let small = t.small_mask(slot);
            match subsets.iter_mut().find(|(s, _)| *s == small) {
                Some((_, v)) => v.push(slot),
                None => subsets.push((small, vec![slot])),
            }
        }
        let prio = t.prio_map();
        // The subset holding the highest-priority rule first: the trees after
        // it are skipped once a key has matched a rule above their best.
        subsets.sort_by_key(|(_, v)| v[0]);
        for (small, slots) in subsets {
            let tree = t.trees.len() as u32;
            for &s in &slots {
                t.slot_tree[s as usize] = tree;
            }
            let root = t.nodes.len() as u32;
            t.nodes.push(Node::EMPTY);
            t.trees.push(Tree { root, min_prio: slots[0], small });
            let bx = t.full_box();
            t.fill(root, slots, bx, 0, true, small, &prio)?;
        }
        t.remap();
        t.stats.build_time = start.elapsed();
        Ok(t)
    }

    fn full_box(&self) -> Box_<N> {
        let mut bx = [(0u32, 0u32); N];
        for f in 0..self.nf {
            bx[f] = (0, width_mask(self.widths[f]));
        }
        bx
    }

    fn add_slot(&mut self, r: &Rule<N>) -> u32 {
        let mut bx = [(0u32, 0u32); N];
        let mut exact = true;
        for f in 0..self.nf {
            let (b, e) = bounding(&r.fields[f], self.widths[f]);
            bx[f] = b;
            exact &= e;
        }
        self.rules.push(*r);
        self.boxes.push(bx);
        self.exact.push(exact);
        self.slot_tree.push(0);
        (self.rules.len() - 1) as u32
    }

    /// CutSplit's partition: bit f set when the rule is small on field f.
    fn small_mask(&self, slot: u32) -> u32 {
        let bx = &self.boxes[slot as usize];
        let mut m = 0u32;
        for &f in &self.cut_fields {
            let size = (bx[f].1 - bx[f].0) as u64 + 1;
            if size <= 1u64 << (self.widths[f] / 2) {
                m |= 1 << f;
            }
        }
        m
    }

    fn bytes(&self) -> u64 {
        (self.nodes.len() * std::mem::size_of::<Node>() + self.items.len() * 4) as u64
    }

    fn check_budget(&self) -> Result<(), BuildError> {
        let b = self.bytes();
        if b > self.config.max_bytes {
            return Err(BuildError::OverBudget { what: "decision tree", key: "dtree.max_bytes", bytes: b, budget: self.config.max_bytes });
        }
        Ok(())
    }

    fn push_item(&mut self, slot: u32, prio: u32) {
        self.items.push(prio);
        let r = self.rules[slot as usize];
        for f in 0..self.nf {
            let fm = r.fields[f];
            let w = width_mask(self.widths[f]);
            // Exact fields are stored as ranges, the others as value/mask.
            if self.exact[slot as usize] || fm.as_range(self.widths[f]).is_some() {
                let (lo, hi) = bounding(&fm, self.widths[f]).0;
                self.items.extend_from_slice(&[lo, hi, w]);
            } else {
                self.items.extend_from_slice(&[fm.lo & fm.mask, fm.lo & fm.mask, fm.mask]);
            }
        }
    }

    fn make_leaf(&mut self, idx: u32, slots: &[u32], prio: impl Fn(u32) -> u32) -> Result<(), BuildError> {
        let base = (self.items.len() / self.stride) as u32;
        for &s in slots {
            self.push_item(s, prio(s));
        }
        let n = slots.len() as u32;
        self.nodes[idx as usize] = Node { op: Op::Leaf, field: 0, shift: 0, bits: 0, value: n, base, count: n };
        self.check_budget()
    }

    /// Builds the subtree at node `idx` for `slots` (priority order, all
    /// overlapping `bx`).
    fn fill(&mut self, idx: u32, mut slots: Vec<u32>, bx: Box_<N>, depth: usize, cutting: bool, small: u32, prio_of: &[u32]) -> Result<(), BuildError> {
        let nf = self.nf;
        // Nothing after a rule that covers the whole box can win.
        if let Some(i) = slots.iter().position(|&s| self.exact[s as usize] && covers(&self.boxes[s as usize], &bx, nf)) {
            slots.truncate(i + 1);
        }
        if slots.len() <= self.config.bucket || depth >= self.config.max_depth {
            return self.make_leaf(idx, &slots, |s| prio_of[s as usize]);
        }
        if cutting {
            if let Some((f, k, lo, log_w)) = self.choose_cut(&slots, &bx, small) {
                let shift = log_w - k;
                let base = self.nodes.len() as u32;
                self.nodes.extend(std::iter::repeat(Node::EMPTY).take(1 << k));
                // value = MAX and count = the cut mask make the branch-free step
                // of `leaf_of` read bits; a split has mask 0 and compares.
                self.nodes[idx as usize] =
                    Node { op: Op::Cut, field: f as u8, shift: shift as u8, bits: k as u8, value: u32::MAX, base, count: (1 << k) - 1 };
                for c in 0..(1u64 << k) {
                    let mut cb = bx;
                    let clo = lo as u64 + (c << shift);
                    cb[f] = (clo as u32, (clo + (1u64 << shift) - 1) as u32);
                    let child: Vec<u32> = slots.iter().copied().filter(|&s| intersects(&self.boxes[s as usize], &cb, nf)).collect();
                    self.fill(base + c as u32, child, cb, depth + 1, true, small, prio_of)?;
                }
                return Ok(());
            }
        }
        let Some((f, t)) = self.choose_split(&slots, &bx) else {
            return self.make_leaf(idx, &slots, |s| prio_of[s as usize]);
        };
        let base = self.nodes.len() as u32;
        self.nodes.extend([Node::EMPTY; 2]);
        self.nodes[idx as usize] = Node { op: Op::Split, field: f as u8, shift: 0, bits: 1, value: t, base, count: 0 };
        let (mut lb, mut rb) = (bx, bx);
        lb[f].1 = t;
        rb[f].0 = t + 1;
        let left: Vec<u32> = slots.iter().copied().filter(|&s| self.boxes[s as usize][f].0 <= t).collect();
        let right: Vec<u32> = slots.iter().copied().filter(|&s| self.boxes[s as usize][f].1 > t).collect();
        drop(slots);
        self.fill(base, left, lb, depth + 1, false, small, prio_of)?;
        self.fill(base + 1, right, rb, depth + 1, false, small, prio_of)?;
        self.check_budget()
    }

    /// Priority index by slot (`u32::MAX` for deleted slots).
    fn prio_map(&self) -> Vec<u32> {
        let mut p = vec![u32::MAX; self.rules.len()];
        for (i, &s) in self.order.iter().enumerate() {
            p[s as usize] = i as u32;
        }
        p
    }

    /// The cut with the most children whose replication stays within
    /// `spfac`: (field, bits, box low, log2 of box width).
    fn choose_cut(&self, slots: &[u32], bx: &Box_<N>, small: u32) -> Option<(usize, u32, u32, u32)> {
        let n = slots.len() as f64;
        let mut best: Option<(usize, u32, u32, u32, u64)> = None;
        for &f in &self.cut_fields {
            if small & (1 << f) == 0 {
                continue;
            }
            let (lo, hi) = bx[f];
            let width = (hi - lo) as u64 + 1;
            let log_w = width.trailing_zeros();
            let floor = (self.widths[f] / 2) as u32;
            if log_w <= floor {
                continue;
            }
            let max_k = (self.config.max_cut_bits as u32).min(log_w - floor);
            for k in (1..=max_k).rev() {
                let shift = log_w - k;
                let mut total = 0u64;
                for &s in slots {
                    let (rl, rh) = self.boxes[s as usize][f];
                    let (a, b) = (rl.max(lo) - lo, rh.min(hi) - lo);
                    total += ((b >> shift) - (a >> shift)) as u64 + 1;
                }
                if (total + (1u64 << k)) as f64 <= self.config.spfac * n {
                    if best.map_or(true, |b| k > b.1 || (k == b.1 && total < b.4)) {
                        best = Some((f, k, lo, log_w, total));
                    }
                    break;
                }
            }
        }
        best.map(|(f, k, lo, lw, _)| (f, k, lo, lw))
    }

    /// HyperSplit: the (field, threshold) minimising the larger side.
    fn choose_split(&self, slots: &[u32], bx: &Box_<N>) -> Option<(usize, u32)> {
        let n = slots.len();
        let mut best: Option<((usize, usize), usize, u32)> = None;
        let mut los = Vec::with_capacity(n);
        let mut his = Vec::with_capacity(n);
        for f in 0..self.nf {
            let (blo, bhi) = bx[f];
            if blo == bhi {
                continue;
            }
            los.clear();
            his.clear();
            for &s in slots {
                let (l, h) = self.boxes[s as usize][f];
                los.push(l.max(blo));
                his.push(h.min(bhi));
            }
            los.sort_unstable();
            his.sort_unstable();
            let cands = los.iter().filter(|&&l| l > blo).map(|&l| l - 1).chain(his.iter().copied().filter(|&h| h < bhi));
            for t in cands {
                let left = los.partition_point(|&l| l <= t);
                let right = n - his.partition_point(|&h| h <= t);
                let cost = (left.max(right), left + right);
                if best.map_or(true, |b| cost < b.0) {
                    best = Some((cost, f, t));
                }
            }
        }
        best.filter(|b| b.0 .0 < n).map(|b| (b.1, b.2))
    }

    #[inline(always)]
    fn item_matches(&self, i: usize, key: &Key<N>) -> bool {
        let it = &self.items[i * self.stride + 1..(i + 1) * self.stride];
        for f in 0..self.nf {
            let x = key.0[f] & it[3 * f + 2];
            if x < it[3 * f] || x > it[3 * f + 1] {
                return false;
            }
        }
        true
    }

    #[inline(always)]
    fn leaf_of(&self, root: u32, key: &Key<N>) -> &Node {
        let mut n = &self.nodes[root as usize];
        // One step serves both inner ops without a data-dependent branch:
        // a cut adds its key bits (and `key > MAX` is false), a split adds
        // its comparison (its mask is 0).
        while n.op != Op::Leaf {
            let k = key.0[n.field as usize];
            n = &self.nodes[(n.base + ((k >> n.shift) & n.count) + (k > n.value) as u32) as usize];
        }
        n
    }

    /// Best priority index in a leaf below `best`, else `best`.
    #[inline(always)]
    fn search_leaf(&self, leaf: &Node, key: &Key<N>, best: u32) -> u32 {
        match self.nf {
            5 => self.search_leaf_n::<5>(leaf, key, best),
            _ => {
                for i in leaf.base as usize..(leaf.base + leaf.count) as usize {
                    let p = self.items[i * self.stride];
                    if p >= best {
                        break;
                    }
                    if self.item_matches(i, key) {
                        return p;
                    }
                }
                best
            }
        }
    }

    /// [`DTree::search_leaf`] for `NF` fields, unrolled by the compiler.
    #[inline(always)]
    fn search_leaf_n<const NF: usize>(&self, leaf: &Node, key: &Key<N>, best: u32) -> u32 {
        let s = 1 + 3 * NF;
        let start = leaf.base as usize * s;
        let items = &self.items[start..start + leaf.count as usize * s];
        for it in items.chunks_exact(s) {
            let p = it[0];
            if p >= best {
                break;
            }
            let mut ok = true;
            for f in 0..NF {
                let x = key.0[f] & it[3 * f + 3];
                ok &= (x >= it[3 * f + 1]) & (x <= it[3 * f + 2]);
            }
            if ok {
                return p;
            }
        }
        best
    }

    pub fn stats(&self) -> &DTreeStats {
        &self.stats
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The rule set as it is now (after updates), in priority order.
    pub fn rule_set(&self) -> RuleSet<N> {
        RuleSet::new(self.schema.clone(), self.order.iter().map(|&s| self.rules[s as usize]).collect())
    }

    /// Visits the leaves of `tree` whose boxes overlap `slot`'s box.
    fn leaves_overlapping(&self, slot: u32, tree: usize) -> Vec<(u32, Box_<N>, usize)> {
        let rb = self.boxes[slot as usize];
        let mut out = Vec::new();
        if !intersects(&rb, &self.full_box(), self.nf) || tree >= self.trees.len() {
            return out;
        }
        let mut stack = vec![(self.trees[tree].root, self.full_box(), 0usize)];
        while let Some((idx, bx, depth)) = stack.pop() {
            let n = self.nodes[idx as usize];
            match n.op {
                Op::Leaf => out.push((idx, bx, depth)),
                Op::Split => {
                    let f = n.field as usize;
                    if rb[f].0 <= n.value {
                        let mut b = bx;
                        b[f].1 = n.value;
                        stack.push((n.base, b, depth + 1));
                    }
                    if rb[f].1 > n.value {
                        let mut b = bx;
                        b[f].0 = n.value + 1;
                        stack.push((n.base + 1, b, depth + 1));
                    }
                }
                Op::Cut => {
                    let f = n.field as usize;
                    let (lo, hi) = bx[f];
                    let (a, b) = (rb[f].0.max(lo), rb[f].1.min(hi));
                    if a > b {
                        continue;
                    }
                    for c in ((a - lo) >> n.shift)..=((b - lo) >> n.shift) {
                        let mut cb = bx;
                        let clo = lo as u64 + ((c as u64) << n.shift);
                        cb[f] = (clo as u32, (clo + (1u64 << n.shift) - 1) as u32);
                        stack.push((n.base + c, cb, depth + 1));
                    }
                }
            }
        }
        out
    }

    /// Inserts `rule` at priority position `pos` (0 = highest; later rules
    /// move down one), without rebuilding the trees.
    pub fn insert(&mut self, pos: usize, rule: Rule<N>) -> Result<(), BuildError> {
        if pos > self.order.len() {
            return Err(BuildError::BadConfig(format!("cannot insert at {pos}: only {} rules", self.order.len())));
        }
        let pos = pos as u32;
        let slot = self.add_slot(&rule);
        for i in 0..self.items.len() / self.stride {
            let p = &mut self.items[i * self.stride];
            if *p >= pos {
                *p += 1;
            }
        }
        for t in &mut self.trees {
            if t.min_prio >= pos {
                t.min_prio += 1;
            }
        }
        self.order.insert(pos as usize, slot);
        let small = self.small_mask(slot);
        let tree = match self.trees.iter().position(|t| t.small == small) {
            Some(t) => t,
            None => {
                let root = self.nodes.len() as u32;
                self.nodes.push(Node { op: Op::Leaf, ..Node::EMPTY });
                self.trees.push(Tree { root, min_prio: pos, small });
                self.trees.len() - 1
            }
        };
        self.slot_tree[slot as usize] = tree as u32;
        if !intersects(&self.boxes[slot as usize], &self.full_box(), self.nf) {
            self.remap();
            return Ok(());
        }
        self.trees[tree].min_prio = self.trees[tree].min_prio.min(pos);
        for (leaf, bx, depth) in self.leaves_overlapping(slot, tree) {
            self.leaf_insert(leaf, slot, pos, bx, depth, small)?;
        }
        self.remap();
        Ok(())
    }

    fn leaf_insert(&mut self, leaf: u32, slot: u32, pos: u32, bx: Box_<N>, depth: usize, small: u32) -> Result<(), BuildError> {
        let n = self.nodes[leaf as usize];
        let limit = 4 * self.config.bucket;
        if n.count as usize >= limit && depth < self.config.max_depth {
            // Rebuild the overgrown leaf as a subtree, in place.
            let prio = self.prio_map();
            let mut slots: Vec<u32> =
                (n.base..n.base + n.count).map(|i| self.order[self.items[i as usize * self.stride] as usize]).collect();
            slots.push(slot);
            slots.sort_by_key(|&s| prio[s as usize]);
            slots.dedup();
            return self.fill(leaf, slots, bx, depth, false, small, &prio);
        }
        let s = self.stride;
        if n.count == n.value {
            // Full: move the leaf to free space with room to grow.
            let base = (self.items.len() / s) as u32;
            let old = self.items[n.base as usize * s..(n.base + n.count) as usize * s].to_vec();
            self.items.extend_from_slice(&old);
            let cap = (n.count * 2).max(4);
            self.items.resize((base + cap) as usize * s, 0);
            let node = &mut self.nodes[leaf as usize];
            node.base = base;
            node.value = cap;
        }
        let n = self.nodes[leaf as usize];
        let at = (n.base..n.base + n.count).find(|&i| self.items[i as usize * s] > pos).unwrap_or(n.base + n.count);
        let end = (n.base + n.count) as usize * s;
        self.items.copy_within(at as usize * s..end, at as usize * s + s);
        let saved = self.items.split_off(at as usize * s);
        self.push_item(slot, pos);
        self.items.extend_from_slice(&saved[s..]);
        self.nodes[leaf as usize].count += 1;
        self.check_budget()
    }

    /// Deletes the rule at priority position `pos` (later rules move up).
    pub fn delete(&mut self, pos: usize) -> Result<(), BuildError> {
        if pos >= self.order.len() {
            return Err(BuildError::BadConfig(format!("no rule {pos} to delete ({} rules)", self.order.len())));
        }
        let slot = self.order.remove(pos);
        let pos = pos as u32;
        let s = self.stride;
        let tree = self.slot_tree[slot as usize] as usize;
        // A leaf the rule covered whole dropped every rule below it at its
        // build (`fill`: they could not win there); without the rule they
        // can, so such a leaf is built again from the tree's rules.
        let mut uncovered = Vec::new();
        for (leaf, bx, depth) in self.leaves_overlapping(slot, tree) {
            let n = self.nodes[leaf as usize];
            if let Some(i) = (n.base..n.base + n.count).find(|&i| self.items[i as usize * s] == pos) {
                let (i, end) = (i as usize * s, (n.base + n.count) as usize * s);
                self.items.copy_within(i + s..end, i);
                self.nodes[leaf as usize].count -= 1;
                if self.exact[slot as usize] && covers(&self.boxes[slot as usize], &bx, self.nf) {
                    uncovered.push((leaf, bx, depth));
                }
            }
        }
        for i in 0..self.items.len() / s {
            let p = &mut self.items[i * s];
            if *p > pos && *p != u32::MAX {
                *p -= 1;
            }
        }
        for t in &mut self.trees {
            if t.min_prio > pos {
                t.min_prio -= 1;
            }
        }
        if !uncovered.is_empty() {
            let prio = self.prio_map();
            let small = self.trees[tree].small;
            for (leaf, bx, depth) in uncovered {
                // `order` is priority order.
                let slots: Vec<u32> = self
                    .order
                    .iter()
                    .copied()
                    .filter(|&o| self.slot_tree[o as usize] as usize == tree && intersects(&self.boxes[o as usize], &bx, self.nf))
                    .collect();
                self.fill(leaf, slots, bx, depth, false, small, &prio)?;
            }
        }
        self.remap();
        Ok(())
    }

    /// Maps the trees onto FACL's DT layers (Algorithm 1) and packs the
    /// leaves onto the LS engines; refreshes the statistics.
    fn remap(&mut self) {
        self.image = OnceLock::new();
        let fc = self.config.facl;
        let layers = fc.dt_modules * fc.dt_layers;
        let nn = self.nodes.len();
        let mut parent = vec![u32::MAX; nn];
        let mut depth = vec![0usize; nn];
        let mut reachable = Vec::new();
        let (mut inner, mut leaves, mut items, mut max_depth, mut depth_sum) = (0, 0, 0, 0, 0);
        for t in &self.trees {
            let mut tree_depth = 0;
            let mut stack = vec![t.root];
            while let Some(i) = stack.pop() {
                reachable.push(i);
                let n = self.nodes[i as usize];
                if n.op == Op::Leaf {
                    leaves += 1;
                    items += n.count as usize;
                    tree_depth = tree_depth.max(depth[i as usize]);
                } else {
                    inner += 1;
                }
                for c in n.children() {
                    parent[c as usize] = i;
                    depth[c as usize] = depth[i as usize] + 1;
                    stack.push(c);
                }
            }
            max_depth = max_depth.max(tree_depth);
            depth_sum += tree_depth;
        }
        // Algorithm 1.
        let mut spare = vec![fc.layer_nodes; layers];
        let mut place = vec![(u16::MAX, 0u32); nn];
        let mut error = None;
        if reachable.len() > fc.layer_nodes * layers {
            error = Some(format!("{} nodes exceed the {} node slots of the DT layers", reachable.len(), fc.layer_nodes * layers));
        }
        'trees: for t in &self.trees {
            if error.is_some() {
                break;
            }
            let Some(y) = (0..layers).find(|&y| spare[y] >= 1) else {
                error = Some("no layer has room for a tree root".into());
                break;
            };
            place[t.root as usize] = (y as u16, (fc.layer_nodes - spare[y]) as u32);
            spare[y] -= 1;
            let mut tree_leaves: Vec<u32> = Vec::new();
            let mut stack = vec![t.root];
            while let Some(i) = stack.pop() {
                let n = self.nodes[i as usize];
                if n.op == Op::Leaf {
                    tree_leaves.push(i);
                }
                stack.extend(n.children());
            }
            // Deepest leaf first.
            tree_leaves.sort_by_key(|&l| std::cmp::Reverse(depth[l as usize]));
            for &l0 in &tree_leaves {
                if place[l0 as usize].0 != u16::MAX {
                    continue;
                }
                let mut path = vec![l0];
                let mut r0 = parent[l0 as usize];
                while place[r0 as usize].0 == u16::MAX {
                    path.push(r0);
                    r0 = parent[r0 as usize];
                }
                let mut x = r0;
                while let Some(next) = path.pop() {
                    let kids = self.nodes[x as usize].children();
                    let d = kids.len();
                    let start = place[x as usize].0 as usize + 1;
                    let Some(y) = (0..layers).map(|c| (start + c) % layers).find(|&y| spare[y] >= d) else {
                        error = Some(format!("no layer has {d} adjacent free slots for the children of a node"));
                        break 'trees;
                    };
                    let at = fc.layer_nodes - spare[y];
                    for (j, c) in kids.enumerate() {
                        place[c as usize] = (y as u16, (at + j) as u32);
                    }
                    spare[y] -= d;
                    x = next;
                }
            }
        }
        let fits = error.is_none();
        let mut facl = FaclStats { fits, error, ..Default::default() };
        let (mut rec_edges, mut max_rec, mut leaves_rec) = (0, 0, 0);
        if fits {
            let mut rec = vec![0usize; nn];
            for t in &self.trees {
                let mut stack = vec![t.root];
                while let Some(i) = stack.pop() {
                    let n = self.nodes[i as usize];
                    if n.op == Op::Leaf && rec[i as usize] > 0 {
                        leaves_rec += 1;
                    }
                    max_rec = max_rec.max(rec[i as usize]);
                    for c in n.children() {
                        let wraps = place[c as usize].0 <= place[i as usize].0;
                        rec_edges += wraps as usize;
                        rec[c as usize] = rec[i as usize] + wraps as usize;
                        stack.push(c);
                    }
                }
            }
            facl.nodes_per_layer = spare.iter().map(|&s| fc.layer_nodes - s).collect();
            facl.bytes_per_layer = facl.nodes_per_layer.iter().map(|&n| n as u64 * NODE_BYTES as u64).collect();
            facl.layers_used = facl.nodes_per_layer.iter().filter(|&&n| n > 0).count();
        } else {
            // Not placed: a node's bank is its depth, its address its index.
            for &i in &reachable {
                place[i as usize] = (depth[i as usize] as u16, i);
            }
        }
        facl.recirculating_edges = rec_edges;
        facl.max_recirculations = max_rec;
        facl.leaves_recirculating = leaves_rec;
        // Packed LS placement, leaves in tree order.
        let m = fc.ls_engines;
        let mut leaf_row = vec![u32::MAX; nn];
        let (mut off, mut aligned_rows) = (0usize, 0usize);
        for &i in &reachable {
            let n = self.nodes[i as usize];
            if n.op == Op::Leaf && n.count > 0 {
                leaf_row[i as usize] = off as u32;
                off += n.count as usize;
                aligned_rows += (n.count as usize).div_ceil(m);
            }
        }
        let item_bytes = self.item_bytes() as u64;
        facl.ls_items = off;
        facl.ls_rows = off.div_ceil(m);
        facl.ls_bytes = (facl.ls_rows * m) as u64 * item_bytes;
        facl.ls_bytes_aligned = (aligned_rows * m) as u64 * item_bytes;
        facl.ls_fits = facl.ls_rows <= fc.ls_depth * fc.ls_modules;
        self.place = place;
        self.leaf_row = leaf_row;
        let dt_bytes = reachable.len() as u64 * NODE_BYTES as u64;
        self.stats = DTreeStats {
            rules: self.order.len(),
            trees: self.trees.len(),
            inner_nodes: inner,
            leaves,
            items,
            max_depth,
            depth_sum,
            bytes: self.bytes(),
            hw_bytes: dt_bytes + facl.ls_bytes,
            build_time: self.stats.build_time,
            facl,
        };
    }

    /// The memory image of the trees ([`Image`]), from the software
    /// nodes, the placement (`place`) and the LS packing (`leaf_row`).
    fn build_image(&self) -> Image {
        let mut reachable = Vec::new();
        for t in &self.trees {
            let mut stack = vec![t.root];
            while let Some(i) = stack.pop() {
                reachable.push(i);
                stack.extend(self.nodes[i as usize].children());
            }
        }
        let slot: Vec<u32> = if self.stats.facl.fits {
            let mut used = vec![0u32; self.config.facl.dt_modules * self.config.facl.dt_layers];
            for &i in &reachable {
                let (y, a) = self.place[i as usize];
                used[y as usize] = used[y as usize].max(a + 1);
            }
            let mut first = vec![0u32; used.len()];
            for y in 1..used.len() {
                first[y] = first[y - 1] + used[y - 1];
            }
            let mut slot = vec![u32::MAX; self.nodes.len()];
            for &i in &reachable {
                let (y, a) = self.place[i as usize];
                slot[i as usize] = first[y as usize] + a;
            }
            slot
        } else {
            (0..self.nodes.len() as u32).collect()
        };
        let n_slots = reachable.iter().map(|&i| slot[i as usize] + 1).max().unwrap_or(0) as usize;
        let mut dt = vec![(Node::EMPTY, 0u16, 0u32); n_slots];
        let s = self.stride;
        let mut ls = vec![0u32; self.stats.facl.ls_items * s];
        for &i in &reachable {
            let mut n = self.nodes[i as usize];
            if n.op == Op::Leaf {
                if n.count > 0 {
                    let (from, to) = (n.base as usize * s, self.leaf_row[i as usize] as usize * s);
                    ls[to..to + n.count as usize * s].copy_from_slice(&self.items[from..from + n.count as usize * s]);
                }
                n.base = self.leaf_row[i as usize];
            } else {
                n.base = slot[n.base as usize];
            }
            let (y, a) = self.place[i as usize];
            dt[slot[i as usize] as usize] = (n, y, a);
        }
        Image { dt, roots: self.trees.iter().map(|t| slot[t.root as usize]).collect(), ls }
    }

    fn image(&self) -> &Image {
        self.image.get_or_init(|| self.build_image())
    }

    /// A fault in the ELU's memory, for tests (the walk reads the image,
    /// `classify` the software trees): `f` rewrites each rule item of the
    /// LS rows (priority, then low, high, mask per field).
    #[cfg(test)]
    pub(crate) fn corrupt_ls_items(&mut self, mut f: impl FnMut(&mut [u32])) {
        self.image();
        let s = self.stride;
        self.image.get_mut().unwrap().ls.chunks_exact_mut(s).for_each(&mut f);
    }

    /// Bytes of one LS rule item: low and high bound per field plus a
    /// 17-bit rule id, rounded up to whole bytes.
    pub fn item_bytes(&self) -> u32 {
        let bits: u32 = self.widths.iter().map(|&w| 2 * w as u32).sum::<u32>() + 17;
        bits.div_ceil(8)
    }

    /// Records the build's wall time as measured by the caller.
    pub fn set_build_time(&mut self, t: Duration) {
        self.stats.build_time = t;
    }
}

impl<const N: usize> Classifier<N> for DTree<N> {
    #[inline]
    fn classify(&self, key: &Key<N>) -> Match {
        let mut best = u32::MAX;
        for t in &self.trees {
            if t.min_prio >= best {
                continue;
            }
            let leaf = self.leaf_of(t.root, key);
            best = self.search_leaf(leaf, key, best);
        }
        (best != u32::MAX).then_some(best)
    }

    fn classify_batch(&self, keys: &[Key<N>], out: &mut [i32]) {
        // A structure that fits in the caches runs fastest one key at a
        // time; a larger one gains from overlapping the misses of a group.
        if self.stats.bytes < LOCKSTEP_BYTES {
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                *o = self.classify(k).map_or(-1, |r| r as i32);
            }
            return;
        }
        // Walk a group of keys down each tree in lockstep so that their
        // independent node reads overlap in the memory system.
        const LANES: usize = 8;
        let mut kc = keys.chunks_exact(LANES);
        let mut oc = out.chunks_exact_mut(LANES);
        for (ks, os) in (&mut kc).zip(&mut oc) {
            let mut best = [u32::MAX; LANES];
            for t in &self.trees {
                let mut n = [&self.nodes[t.root as usize]; LANES];
                loop {
                    let mut live = false;
                    for l in 0..LANES {
                        let x = n[l];
                        if x.op != Op::Leaf {
                            let k = ks[l].0[x.field as usize];
                            n[l] = &self.nodes[(x.base + ((k >> x.shift) & x.count) + (k > x.value) as u32) as usize];
                            live = true;
                        }
                    }
                    if !live {
                        break;
                    }
                }
                for l in 0..LANES {
                    if t.min_prio < best[l] {
                        best[l] = self.search_leaf(n[l], &ks[l], best[l]);
                    }
                }
            }
            for l in 0..LANES {
                os[l] = if best[l] == u32::MAX { -1 } else { best[l] as i32 };
            }
        }
        for (k, o) in kc.remainder().iter().zip(oc.into_remainder()) {
            *o = self.classify(k).map_or(-1, |r| r as i32);
        }
    }
}

impl<const N: usize> MemoryWalk<N> for DTree<N> {
    /// Every tree is walked (the hardware searches them all): one node read
    /// per level from the node's DT layer (bank = layer), then one parallel
    /// LS read per `ls_engines` rules of the leaf from bank `layers`; an
    /// empty leaf skips the linear search (FACL §III-F3).
    fn walk(&self, key: &Key<N>, accesses: &mut Vec<MemAccess>) -> Match {
        let fc = self.config.facl;
        let ls_bank = (fc.dt_modules * fc.dt_layers) as u16;
        let m = fc.ls_engines as u64;
        let ib = self.item_bytes() as u64;
        let img = self.image();
        let s = self.stride;
        let mut best = u32::MAX;
        for &root in &img.roots {
            let mut i = root;
            loop {
                let (n, layer, addr) = img.dt[i as usize];
                accesses.push(MemAccess { bank: layer, addr: addr as u64 * NODE_BYTES as u64, bytes: NODE_BYTES });
                match n.op {
                    Op::Cut => i = n.base + ((key.0[n.field as usize] >> n.shift) & ((1u32 << n.bits) - 1)),
                    Op::Split => i = n.base + (key.0[n.field as usize] > n.value) as u32,
                    Op::Leaf => {
                        if n.count > 0 {
                            let start = n.base as u64;
                            let (r0, r1) = (start / m, (start + n.count as u64 - 1) / m + 1);
                            for row in r0..r1 {
                                accesses.push(MemAccess { bank: ls_bank, addr: row * m * ib, bytes: (m * ib) as u32 });
                            }
                            // The items these rows hold, in priority order:
                            // the first that matches is the leaf's answer.
                            let items = &img.ls[n.base as usize * s..(n.base + n.count) as usize * s];
                            for it in items.chunks_exact(s) {
                                if it[0] >= best {
                                    break;
                                }
                                if (0..self.nf).all(|f| {
                                    let x = key.0[f] & it[3 * f + 3];
                                    x >= it[3 * f + 1] && x <= it[3 * f + 2]
                                }) {
                                    best = it[0];
                                    break;
                                }
                            }
                        }
                        break;
                    }
                }
            }
        }
        (best != u32::MAX).then_some(best)
    }
    fn memory_bytes(&self) -> u64 {
        self.stats.hw_bytes
    }
}

impl<const N: usize> super::Structure<N> for DTree<N> {
    fn stats(&self) -> Vec<(&'static str, String)> {
        let s = &self.stats;
        let f = &s.facl;
        let per_rule = |b: u64| if s.rules == 0 { "0".to_string() } else { format!("{:.1}", b as f64 / s.rules as f64) };
        vec![
            ("rules", s.rules.to_string()),
            ("build_ms", format!("{:.1}", s.build_time.as_secs_f64() * 1e3)),
            ("trees", s.trees.to_string()),
            ("inner nodes", s.inner_nodes.to_string()),
            ("leaves", s.leaves.to_string()),
            ("leaf rule items", s.items.to_string()),
            ("max depth", s.max_depth.to_string()),
            ("depth sum (trees)", s.depth_sum.to_string()),
            ("bytes (software)", s.bytes.to_string()),
            ("bytes per rule (software)", per_rule(s.bytes)),
            ("bytes (FACL layout)", s.hw_bytes.to_string()),
            ("bytes per rule (FACL layout)", per_rule(s.hw_bytes)),
            ("FACL DT mapping", if f.fits { "fits".into() } else { format!("fails: {}", f.error.clone().unwrap_or_default()) }),
            ("DT layers used", f.layers_used.to_string()),
            ("DT nodes per layer", {
                let used = f.nodes_per_layer.iter().rposition(|&n| n > 0).map_or(0, |i| i + 1);
                format!("{:?} (then empty, of {})", &f.nodes_per_layer[..used], f.nodes_per_layer.len())
            }),
            ("recirculating edges", f.recirculating_edges.to_string()),
            ("max recirculations", f.max_recirculations.to_string()),
            ("leaves after recirculation", f.leaves_recirculating.to_string()),
            ("LS rows (packed)", f.ls_rows.to_string()),
            ("LS bytes packed / aligned", format!("{} / {}", f.ls_bytes, f.ls_bytes_aligned)),
            ("LS fits", f.ls_fits.to_string()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::linear::Linear;

    fn r(src: (u32, u8), dst: (u32, u8), dport: (u32, u32)) -> Rule {
        Rule::new(
            &[FieldMatch::prefix(src.0, src.1, 32), FieldMatch::prefix(dst.0, dst.1, 32), FieldMatch::ANY, FieldMatch::range(dport.0, dport.1), FieldMatch::ANY],
            0,
            0,
        )
    }

    #[test]
    fn cuts_then_splits_and_matches_the_oracle() {
        let mut rules = Vec::new();
        for i in 0..64u32 {
            rules.push(r((0x0a00_0000 | i << 8, 24), (0xc0a8_0000 | i, 32), (i * 10, i * 10 + 50)));
        }
        rules.push(r((0, 0), (0, 0), (0, 65535)));
        let set = RuleSet::new(Schema::five_tuple(), rules);
        let cfg = DTreeConfig { bucket: 4, ..Default::default() };
        let t = DTree::build(&set, &cfg).unwrap();
        assert!(t.nodes.iter().any(|n| n.op == Op::Cut));
        assert!(t.nodes.iter().any(|n| n.op == Op::Split));
        assert_eq!(t.stats().trees, 2, "small-small rules and the default rule");
        let lin = Linear::new(&set);
        for i in 0..70u32 {
            let k = Key::five_tuple(0x0a00_0005 | i << 8, 0xc0a8_0000 | i, 0, (i * 10 + 20) as u16, 6);
            assert_eq!(t.classify(&k), lin.classify(&k), "key {i}");
        }
        assert!(t.stats().facl.fits);
        assert_eq!(t.stats().facl.recirculating_edges, 0);
    }

    #[test]
    fn algorithm_1_places_siblings_adjacent_and_recirculates_when_short_of_layers() {
        let mut rules = Vec::new();
        for i in 0..200u32 {
            rules.push(r((i << 24, 8), (0, 0), (i, i)));
        }
        let set = RuleSet::new(Schema::five_tuple(), rules);
        let few = FaclConfig { dt_modules: 1, dt_layers: 3, layer_nodes: 4096, ..Default::default() };
        let t = DTree::build(&set, &DTreeConfig { bucket: 2, facl: few, ..Default::default() }).unwrap();
        let f = &t.stats().facl;
        assert!(f.fits, "{:?}", f.error);
        assert!(t.stats().max_depth >= 3);
        assert!(f.max_recirculations >= 1 && f.leaves_recirculating >= 1);
        for n in &t.nodes {
            let kids: Vec<_> = n.children().map(|c| t.place[c as usize]).collect();
            for w in kids.windows(2) {
                assert_eq!(w[0].0, w[1].0, "siblings share a layer");
                assert_eq!(w[0].1 + 1, w[1].1, "siblings are adjacent");
            }
        }
        // Too little room: a clean failure, and lookups still work.
        let tiny = FaclConfig { dt_modules: 1, dt_layers: 2, layer_nodes: 8, ..Default::default() };
        let t = DTree::build(&set, &DTreeConfig { bucket: 2, facl: tiny, ..Default::default() }).unwrap();
        assert!(!t.stats().facl.fits);
        let k = Key::five_tuple(7 << 24, 0, 0, 7, 0);
        assert_eq!(t.classify(&k), Some(7));
        let mut acc = Vec::new();
        assert_eq!(t.walk(&k, &mut acc), Some(7));
        assert!(acc.len() >= 2);
    }

    #[test]
    fn a_range_beyond_the_field_width_matches_nothing_and_breaks_nothing() {
        let mut bad = r((0, 0), (0, 0), (0, 0));
        bad.fields[3] = FieldMatch::range(70_000, 80_000);
        let good = r((0, 0), (0, 0), (80, 80));
        let set = RuleSet::new(Schema::five_tuple(), vec![bad, good]);
        let mut t = DTree::build(&set, &DTreeConfig::default()).unwrap();
        assert_eq!(t.classify(&Key::five_tuple(1, 2, 3, 80, 6)), Some(1));
        t.insert(0, bad).unwrap();
        t.delete(1).unwrap();
        assert_eq!(t.classify(&Key::five_tuple(1, 2, 3, 80, 6)), Some(1));
        let trie = crate::classify::trie::Trie::build(&set, &Default::default()).unwrap();
        assert_eq!(trie.classify(&Key::five_tuple(1, 2, 3, 80, 6)), Some(1));
    }

    #[test]
    fn packed_ls_placement_saves_slots() {
        let mut rules = Vec::new();
        for i in 0..300u32 {
            rules.push(r((i << 20, 12), ((i % 7) << 28, 4), (i % 5, 100 + i % 9)));
        }
        let set = RuleSet::new(Schema::five_tuple(), rules);
        let t = DTree::build(&set, &DTreeConfig { bucket: 5, ..Default::default() }).unwrap();
        let f = &t.stats().facl;
        assert_eq!(f.ls_items, t.stats().items);
        assert_eq!(f.ls_rows, f.ls_items.div_ceil(8));
        assert!(f.ls_bytes <= f.ls_bytes_aligned);
        assert_eq!(t.item_bytes(), 29);
    }

    #[test]
    fn the_walk_answers_from_the_memory_image_placed_or_not() {
        let rules: Vec<Rule> =
            (0..300u32).map(|i| r(((i * 37) << 20, 12 + (i % 8) as u8), ((i * 11) << 24, (i % 9) as u8), (i * 3, i * 3 + 40))).collect();
        let set = RuleSet::new(Schema::five_tuple(), rules);
        let lin = Linear::new(&set);
        let keys: Vec<Key> = (0..4000u32)
            .map(|i| Key::five_tuple(((i % 300) * 37) << 20 | i, ((i % 300) * 11) << 24 | i >> 3, 0, (i % 950) as u16, 6))
            .collect();
        let tiny = FaclConfig { dt_modules: 1, dt_layers: 2, layer_nodes: 8, ..Default::default() };
        for (facl, fits) in [(FaclConfig::default(), true), (tiny, false)] {
            let mut t = DTree::build(&set, &DTreeConfig { bucket: 4, facl, ..Default::default() }).unwrap();
            assert_eq!(t.stats().facl.fits, fits);
            let mut acc = Vec::new();
            for k in &keys {
                assert_eq!(t.walk(k, &mut acc), lin.classify(k), "{k:?}");
            }
            // A fault in the memory: every inner node of the image sends a
            // key to its first child. The walk answers wrong where
            // `classify` (the software trees) stays right.
            t.image();
            for (n, _, _) in &mut t.image.get_mut().unwrap().dt {
                n.bits = 0;
                n.value = u32::MAX;
            }
            let wrong = keys.iter().filter(|k| t.walk(k, &mut acc) != lin.classify(k)).count();
            assert!(wrong > 100, "{wrong} wrong walks");
            assert!(keys.iter().all(|k| t.classify(k) == lin.classify(k)));
        }
    }

    #[test]
    fn updates_match_the_oracle_on_the_new_set() {
        let mut rules = Vec::new();
        for i in 0..100u32 {
            rules.push(r(((i * 37) << 22, 10), ((i * 11) << 24, 8), (i * 3, i * 3 + 400)));
        }
        let set = RuleSet::new(Schema::five_tuple(), rules.clone());
        let mut t = DTree::build(&set, &DTreeConfig { bucket: 2, ..Default::default() }).unwrap();
        let mut cur = rules;
        for i in 0..60u32 {
            let rule = r(((i * 53) << 22, 10 + (i % 3) as u8), (0, (i % 2) as u8 * 4), (i, i + 90));
            let pos = (i as usize * 7) % (cur.len() + 1);
            t.insert(pos, rule).unwrap();
            cur.insert(pos, rule);
            if i % 3 == 0 {
                let d = (i as usize * 13) % cur.len();
                t.delete(d).unwrap();
                cur.remove(d);
            }
        }
        assert_eq!(t.rule_set().rules, cur);
        let lin = Linear::new(&RuleSet::new(Schema::five_tuple(), cur.clone()));
        for i in 0..3000u32 {
            let k = Key::five_tuple(i.wrapping_mul(0x9e37_79b9), i.wrapping_mul(0x85eb_ca6b) >> (i % 5), 0, (i % 500) as u16, 6);
            assert_eq!(t.classify(&k), lin.classify(&k), "key {i}");
        }
        assert!(t.insert(cur.len() + 1, cur[0]).is_err());
        assert!(t.delete(cur.len()).is_err());
    }
}

//! Route interning: what the routed simulator replays, deduplicated.
//!
//! A packet's **route** is its sequence of visits of simulated tables, each
//! `(table, key)`. Per simulated table the distinct keys are interned (a key
//! gets the next id the first time it is seen) with the entry the executor
//! matched for it, which the simulator's oracle invariant checks; per route
//! its hops `(table, key id)` are interned the same way. Two packets with the
//! same visits and keys share a route whatever their bytes (IP id, TCP
//! sequence, TTL), so memory grows with the distinct keys and routes, never
//! with the number of packets. Ids are dense and in first-seen order:
//! [`Interner::keys`] and [`Interner::routes`] are append-only, and a
//! consumer (the simulator) takes what was added since it last looked.
//!
//! Keys and hops are stored flat and hashed in place (`hashbrown`'s
//! `HashTable` holds only ids), so a lookup allocates nothing.
//!
//! Most packets repeat a packet seen before: the same tables, keys and
//! matched entries. Such a packet is found with one hash of its whole
//! visit sequence (its **signature**: per visit table, key width, entry,
//! key words) and one probe, without interning its keys one by one; a
//! signature seen for the first time is interned key by key and
//! remembered with its route and its entry conflicts (a key's kept entry
//! never changes, so neither does a signature's count of them). Signatures
//! are as many as the distinct (keys, entries) sequences: bounded as the
//! keys and routes are.

use super::Visits;
use hashbrown::HashTable;

/// FxHash-style mixing of 32-bit words (the table's top bits matter: a
/// final fold spreads the multiply's high bits down).
#[inline]
fn hash_words(words: impl Iterator<Item = u32>) -> u64 {
    let mut h: u64 = 0;
    for w in words {
        h = (h.rotate_left(5) ^ w as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    h ^ (h >> 29)
}

/// The distinct keys of one simulated table.
#[derive(Default)]
struct Keys {
    words: usize,
    flat: Vec<u32>,
    expected: Vec<i32>,
    index: HashTable<u32>,
}

impl Keys {
    fn key(&self, id: u32) -> &[u32] {
        let w = self.words;
        &self.flat[id as usize * w..(id as usize + 1) * w]
    }

    /// The key's id (new keys get the next) and whether it is new.
    fn intern(&mut self, key: &[u32], entry: i32) -> (u32, bool) {
        let h = hash_words(key.iter().copied());
        let (flat, w) = (&self.flat, self.words);
        if let Some(&id) = self.index.find(h, |&id| &flat[id as usize * w..(id as usize + 1) * w] == key) {
            return (id, false);
        }
        let id = self.expected.len() as u32;
        self.flat.extend_from_slice(key);
        self.expected.push(entry);
        let (flat, w) = (&self.flat, self.words);
        self.index.insert_unique(h, id, |&i| hash_words(flat[i as usize * w..(i as usize + 1) * w].iter().copied()));
        (id, true)
    }
}

/// Interned keys and routes (see the module doc).
pub struct Interner {
    /// Per keyed table of the program: its simulator index (None: visits
    /// of it are counted by the caller but not simulated).
    sim_of: Vec<Option<u16>>,
    /// Per keyed table of the program: its key's words.
    key_words: Vec<usize>,
    /// Per simulated table.
    keys: Vec<Keys>,
    /// Route r's hops are `start[r]..start[r + 1]` of `hop_table`/`hop_key`.
    start: Vec<u32>,
    hop_table: Vec<u16>,
    hop_key: Vec<u32>,
    index: HashTable<u32>,
    /// The current packet's hops.
    scratch: Vec<(u16, u32)>,
    /// Signatures seen (see the module doc): each with its route (None: no
    /// simulated hop) and its conflicts. Allocated once per new signature,
    /// never per packet.
    sigs: hashbrown::HashMap<Box<[u32]>, (Option<u32>, u32)>,
    /// The current packet's signature.
    sig: Vec<u32>,
    /// Visits whose key an earlier visit had with another matched entry
    /// (the first one is kept: a program without state matches a key the
    /// same way every time).
    pub conflicts: u64,
}

impl Interner {
    /// `key_words[t]`: words of keyed table t's key; `sim_of[t]`: its
    /// simulator index, dense from 0 (None: not simulated).
    pub fn new(key_words: Vec<usize>, sim_of: Vec<Option<u16>>) -> Result<Interner, String> {
        if key_words.len() != sim_of.len() {
            return Err("interner: key_words and sim_of differ in length".into());
        }
        let n = sim_of.iter().flatten().count();
        let mut keys: Vec<Keys> = (0..n).map(|_| Keys::default()).collect();
        let mut seen = vec![false; n];
        for (t, s) in sim_of.iter().enumerate() {
            if let Some(s) = *s {
                let Some(k) = keys.get_mut(s as usize) else {
                    return Err(format!("interner: table {t}'s simulator index {s} is not below {n}"));
                };
                if std::mem::replace(&mut seen[s as usize], true) {
                    return Err(format!("interner: simulator index {s} given twice"));
                }
                k.words = key_words[t];
            }
        }
        Ok(Interner {
            sim_of,
            key_words,
            keys,
            start: vec![0],
            hop_table: Vec::new(),
            hop_key: Vec::new(),
            index: HashTable::new(),
            scratch: Vec::new(),
            sigs: hashbrown::HashMap::new(),
            sig: Vec::new(),
            conflicts: 0,
        })
    }

    /// Signatures remembered (distinct visit sequences with their entries).
    pub fn n_signatures(&self) -> usize {
        self.sigs.len()
    }

    /// Packet `p` of `v`: its route (None: it visited no simulated table).
    pub fn intern(&mut self, v: &Visits, p: usize) -> Result<Option<u32>, String> {
        // The signature: per visit (table, key width) in one word, the entry, the key.
        self.sig.clear();
        for i in v.of_packet(p) {
            let key = v.key(i);
            self.sig.push(v.table[i] as u32 | (key.len() as u32) << 16);
            self.sig.push(v.entry[i] as u32);
            self.sig.extend_from_slice(key);
        }
        if let Some(&(r, conflicts)) = self.sigs.get(self.sig.as_slice()) {
            self.conflicts += conflicts as u64;
            return Ok(r);
        }
        let before = self.conflicts;
        let r = self.intern_hops(v, p)?;
        self.sigs.insert(self.sig.as_slice().into(), (r, (self.conflicts - before) as u32));
        Ok(r)
    }

    /// Packet `p` of `v`, key by key: its route (None: no simulated hop).
    fn intern_hops(&mut self, v: &Visits, p: usize) -> Result<Option<u32>, String> {
        self.scratch.clear();
        for i in v.of_packet(p) {
            let t = v.table[i] as usize;
            let Some(&sim) = self.sim_of.get(t) else {
                return Err(format!("visit of keyed table {t} of {}", self.sim_of.len()));
            };
            let key = v.key(i);
            if key.len() != self.key_words[t] {
                return Err(format!("visit of table {t}: key of {} words, expected {}", key.len(), self.key_words[t]));
            }
            let Some(s) = sim else { continue };
            let keys = &mut self.keys[s as usize];
            let (id, new) = keys.intern(key, v.entry[i]);
            if !new && keys.expected[id as usize] != v.entry[i] {
                self.conflicts += 1;
            }
            self.scratch.push((s, id));
        }
        if self.scratch.is_empty() {
            return Ok(None);
        }
        let h = hash_words(self.scratch.iter().flat_map(|&(t, k)| [t as u32, k]));
        let (start, ht, hk, hops) = (&self.start, &self.hop_table, &self.hop_key, &self.scratch);
        let same = |&r: &u32| {
            let (a, b) = (start[r as usize] as usize, start[r as usize + 1] as usize);
            b - a == hops.len() && hops.iter().zip(a..b).all(|(&(t, k), j)| ht[j] == t && hk[j] == k)
        };
        if let Some(&r) = self.index.find(h, same) {
            return Ok(Some(r));
        }
        let r = self.start.len() as u32 - 1;
        for &(t, k) in &self.scratch {
            self.hop_table.push(t);
            self.hop_key.push(k);
        }
        self.start.push(self.hop_table.len() as u32);
        let (start, ht, hk) = (&self.start, &self.hop_table, &self.hop_key);
        self.index.insert_unique(h, r, |&r| {
            let (a, b) = (start[r as usize] as usize, start[r as usize + 1] as usize);
            hash_words((a..b).flat_map(|j| [ht[j] as u32, hk[j]]))
        });
        Ok(Some(r))
    }

    /// Simulated tables.
    pub fn tables(&self) -> usize {
        self.keys.len()
    }

    /// Simulated table `s`: its key words, its keys (flat, `words` each) and
    /// per key the matched entry (-1: a miss).
    pub fn keys(&self, s: usize) -> (usize, &[u32], &[i32]) {
        let k = &self.keys[s];
        (k.words, &k.flat, &k.expected)
    }

    /// Key `id` of simulated table `s`.
    pub fn key(&self, s: usize, id: u32) -> &[u32] {
        self.keys[s].key(id)
    }

    /// Route starts (one more than routes), hop tables and hop key ids.
    pub fn routes(&self) -> (&[u32], &[u16], &[u32]) {
        (&self.start, &self.hop_table, &self.hop_key)
    }

    pub fn n_routes(&self) -> usize {
        self.start.len() - 1
    }

    /// Bytes held (keys, hops and their indexes): grows with distinct keys
    /// and routes only.
    pub fn memory_bytes(&self) -> usize {
        let keys: usize = self.keys.iter().map(|k| k.flat.capacity() * 4 + k.expected.capacity() * 4 + k.index.capacity() * 5).sum();
        let sigs = self.sigs.keys().map(|k| k.len() * 4).sum::<usize>()
            + self.sigs.capacity() * (std::mem::size_of::<(Box<[u32]>, (Option<u32>, u32))>() + 1);
        keys + sigs + self.start.capacity() * 4 + self.hop_table.capacity() * 2 + self.hop_key.capacity() * 4 + self.index.capacity() * 5
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Visits of packets given as lists of (table, entry, key).
    fn visits(pkts: &[&[(u16, i32, &[u32])]]) -> Visits {
        let mut v = Visits::new();
        for p in pkts {
            for &(t, e, k) in *p {
                v.push(t, e, 0, k);
            }
            v.end_packet();
        }
        v
    }

    #[test]
    fn routes_and_keys_are_deduplicated_in_first_seen_order() {
        // Tables: 0 (1 word, simulated as 1), 1 (2 words, not simulated), 2 (1 word, simulated as 0).
        let mut i = Interner::new(vec![1, 2, 1], vec![Some(1), None, Some(0)]).unwrap();
        let v = visits(&[
            &[(0, 3, &[10]), (1, 0, &[1, 2]), (2, -1, &[7])],
            &[(0, 3, &[10]), (2, -1, &[7])], // the same route (table 1 is not simulated)
            &[(1, 0, &[1, 2])],              // no simulated hop
            &[(2, 0, &[8])],
            &[(0, 3, &[10]), (2, -1, &[7]), (0, 4, &[11])],
        ]);
        let got: Vec<Option<u32>> = (0..5).map(|p| i.intern(&v, p).unwrap()).collect();
        assert_eq!(got, vec![Some(0), Some(0), None, Some(1), Some(2)]);
        assert_eq!(i.keys(0), (1, &[7, 8][..], &[-1, 0][..]));
        assert_eq!(i.keys(1), (1, &[10, 11][..], &[3, 4][..]));
        let (s, t, k) = i.routes();
        assert_eq!(s, &[0, 2, 3, 6]);
        assert_eq!(t, &[1, 0, 0, 1, 0, 1]);
        assert_eq!(k, &[0, 0, 1, 0, 0, 1]);
        assert_eq!(i.conflicts, 0);
        // The same key with another entry: counted, the first kept.
        let v = visits(&[&[(0, 5, &[10])]]);
        assert_eq!(i.intern(&v, 0).unwrap(), Some(3));
        assert_eq!(i.conflicts, 1);
        assert_eq!(i.keys(1).2, &[3, 4]);
        // A key of the wrong width, a table the program does not have.
        assert!(i.intern(&visits(&[&[(1, 0, &[1])]]), 0).is_err());
        assert!(i.intern(&visits(&[&[(3, 0, &[1])]]), 0).is_err());
    }

    #[test]
    fn memory_depends_on_distinct_routes_not_on_repetition() {
        // 64 flows over 3 tables; 1x and 50x the packets intern the same.
        let run = |reps: usize| {
            let mut i = Interner::new(vec![1, 1, 2], vec![Some(0), Some(1), Some(2)]).unwrap();
            let mut v = Visits::new();
            for _ in 0..reps {
                for f in 0..64u32 {
                    v.clear();
                    v.push(0, (f % 4) as i32, 1, &[f / 4]);
                    v.push(1, -1, 0, &[f % 8]);
                    if f % 2 == 0 {
                        v.push(2, 0, 2, &[f, 9]);
                    }
                    v.end_packet();
                    i.intern(&v, 0).unwrap();
                }
            }
            (i.n_routes(), (0..3).map(|s| i.keys(s).2.len()).collect::<Vec<_>>(), i.memory_bytes())
        };
        let once = run(1);
        assert_eq!((once.0, once.1.clone()), (64, vec![16, 8, 32]));
        assert_eq!(run(50), once);
    }

    #[test]
    fn signatures_give_what_key_by_key_interning_gives() {
        // Packets drawn from a small pool (so most repeat), some visiting a
        // table twice, some with a key's entry differing from its first:
        // routes, keys and conflicts equal those of interning every packet
        // key by key (the path without signatures).
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        let map = || Interner::new(vec![1, 2, 1], vec![Some(0), None, Some(1)]).unwrap();
        let (mut fast, mut slow) = (map(), map());
        let pool: Vec<Vec<(u16, i32, Vec<u32>)>> = (0..40)
            .map(|_| {
                (0..rng.gen_range(0..4))
                    .map(|_| {
                        let t = rng.gen_range(0..3u16);
                        let key = (0..if t == 1 { 2 } else { 1 }).map(|_| rng.gen_range(0..5u32)).collect();
                        (t, rng.gen_range(-1..2), key)
                    })
                    .collect()
            })
            .collect();
        let mut v = Visits::new();
        for _ in 0..2000 {
            v.clear();
            for (t, e, k) in &pool[rng.gen_range(0..pool.len())] {
                v.push(*t, *e, 0, k);
            }
            v.end_packet();
            assert_eq!(fast.intern(&v, 0).unwrap(), slow.intern_hops(&v, 0).unwrap());
        }
        assert!(slow.conflicts > 0 && fast.n_signatures() <= pool.len());
        assert_eq!(fast.conflicts, slow.conflicts);
        assert_eq!(fast.routes(), slow.routes());
        assert_eq!((fast.keys(0), fast.keys(1)), (slow.keys(0), slow.keys(1)));
    }

    #[test]
    fn bad_table_maps_are_refused() {
        assert!(Interner::new(vec![1], vec![Some(1)]).is_err());
        assert!(Interner::new(vec![1, 1], vec![Some(0), Some(0)]).is_err());
        assert!(Interner::new(vec![1], vec![]).is_err());
    }
}

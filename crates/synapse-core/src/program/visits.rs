//! What the executor reports of a batch of packets, columnar.
//!
//! One **visit** is one lookup of a keyed table by one packet: the table
//! (its index among the program's keyed tables), the key the packet built
//! there (u32 words, most significant first: a field of `w` bits is
//! `ceil(w / 32)` words, as `synapse_vmt.p4.keys` lays keys out), the entry
//! it matched (its position in the table's entries in match order, or a
//! miss) and the action it ran. A packet's visits are contiguous and in the
//! order it made them; the batch is append-only until [`Visits::clear`], so
//! a consumer (route interning, counters) reads it after each batch and the
//! executor reuses the buffers: memory is bounded by the batch, never by
//! the capture.

/// A batch of packets' visits (see the module doc).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Visits {
    /// Per visit: keyed table index, matched entry (`-1`: miss), action id.
    pub table: Vec<u16>,
    pub entry: Vec<i32>,
    pub action: Vec<u32>,
    /// Visit `i`'s key is `key_words[key_start[i]..key_start[i + 1]]`
    /// (`key_start` has one element more than there are visits).
    pub key_start: Vec<u32>,
    pub key_words: Vec<u32>,
    /// Packet `p`'s visits are `pkt_start[p]..pkt_start[p + 1]` (one
    /// element more than there are packets).
    pub pkt_start: Vec<u32>,
}

impl Visits {
    pub fn new() -> Self {
        Visits { key_start: vec![0], pkt_start: vec![0], ..Default::default() }
    }

    /// Empties the batch, keeping the buffers' capacity.
    pub fn clear(&mut self) {
        self.table.clear();
        self.entry.clear();
        self.action.clear();
        self.key_words.clear();
        self.key_start.clear();
        self.key_start.push(0);
        self.pkt_start.clear();
        self.pkt_start.push(0);
    }

    /// Appends one visit of the current (not yet ended) packet.
    #[inline]
    pub fn push(&mut self, table: u16, entry: i32, action: u32, key: &[u32]) {
        self.key_words.extend_from_slice(key);
        self.close(table, entry, action);
    }

    /// Records a visit whose key its maker wrote straight into
    /// `key_words` (the words after the last visit's key), so a lookup
    /// reads the key where the visit keeps it, with no second copy.
    #[inline]
    pub fn close(&mut self, table: u16, entry: i32, action: u32) {
        self.table.push(table);
        self.entry.push(entry);
        self.action.push(action);
        self.key_start.push(self.key_words.len() as u32);
    }

    /// The key words written since the last visit (the open visit's key).
    #[inline]
    pub fn open_key(&self) -> &[u32] {
        let at = *self.key_start.last().unwrap_or(&0) as usize;
        &self.key_words[at..]
    }

    /// Ends the current packet (its visits are those pushed since the last end).
    pub fn end_packet(&mut self) {
        self.pkt_start.push(self.table.len() as u32);
    }

    pub fn packets(&self) -> usize {
        self.pkt_start.len() - 1
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The visits of packet `p`, as a range of visit indices.
    pub fn of_packet(&self, p: usize) -> std::ops::Range<usize> {
        self.pkt_start[p] as usize..self.pkt_start[p + 1] as usize
    }

    /// The key of visit `i`.
    pub fn key(&self, i: usize) -> &[u32] {
        &self.key_words[self.key_start[i] as usize..self.key_start[i + 1] as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_and_keys_are_delimited_and_clear_keeps_nothing() {
        let mut v = Visits::new();
        v.push(0, 3, 1, &[10, 11]);
        v.push(2, -1, 0, &[7]);
        v.end_packet();
        v.end_packet(); // a packet that visited no keyed table
        v.push(1, 0, 2, &[1, 2, 3]);
        v.end_packet();
        assert_eq!(v.packets(), 3);
        assert_eq!(v.of_packet(0), 0..2);
        assert_eq!(v.of_packet(1), 2..2);
        assert_eq!(v.of_packet(2), 2..3);
        assert_eq!(v.key(1), &[7]);
        assert_eq!(v.key(2), &[1, 2, 3]);
        // a key written in place, then closed, is the visit's key
        v.key_words.extend([4, 5]);
        assert_eq!(v.open_key(), &[4, 5]);
        v.close(3, 1, 7);
        v.end_packet();
        assert_eq!((v.key(3), v.table[3], v.entry[3], v.action[3], v.of_packet(3)), (&[4, 5][..], 3, 1, 7, 3..4));
        assert_eq!(v.open_key(), &[] as &[u32]);
        v.clear();
        assert_eq!((v.packets(), v.len()), (0, 0));
        assert_eq!(v, Visits::new());
    }
}

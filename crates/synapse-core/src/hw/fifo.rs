//! A FIFO of `Copy` entries for the hardware queues (Q_r, Q_p, Q_m,
//! the CAM pipeline, the VMU's PHV window, the stage FIFOs).
//!
//! Their depths are configured, so a buffer sized once to the next power of
//! two never grows in steady state, and a slot is found with a mask instead
//! of `VecDeque`'s wrap test. It still grows (doubling) when more is pushed,
//! as a queue whose bound is not static (Q_p also takes ELU fills) may be.

/// A FIFO of `T`: push at the back, pop at the front, index from the front.
#[derive(Clone, Debug)]
pub struct Fifo<T: Copy> {
    buf: Vec<T>,
    /// `buf.len() - 1` (`buf.len()` is a power of two).
    mask: usize,
    head: usize,
    len: usize,
}

impl<T: Copy> Fifo<T> {
    /// A FIFO holding `cap` entries before it grows; `fill` is a value
    /// for the empty slots (never read).
    pub fn new(cap: usize, fill: T) -> Fifo<T> {
        let n = cap.max(1).next_power_of_two();
        Fifo {
            buf: vec![fill; n],
            mask: n - 1,
            head: 0,
            len: 0,
        }
    }
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    #[inline]
    pub fn front(&self) -> Option<&T> {
        if self.len == 0 {
            None
        } else {
            Some(self.slot(self.head))
        }
    }
    #[inline]
    pub fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let x = *self.slot(self.head);
        self.head = (self.head + 1) & self.mask;
        self.len -= 1;
        Some(x)
    }
    #[inline]
    pub fn push_back(&mut self, x: T) {
        if self.len == self.buf.len() {
            self.grow();
        }
        let i = self.head + self.len;
        *self.slot_mut(i) = x;
        self.len += 1;
    }
    /// The `i`-th entry from the front.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        (i < self.len).then(|| self.slot(self.head + i))
    }
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        (i < self.len).then(|| self.slot_mut(self.head + i))
    }
    /// Inserts `x` at position `i` from the front (`i <= len`), moving
    /// the entries behind it back by one.
    pub fn insert(&mut self, i: usize, x: T) {
        assert!(i <= self.len, "fifo insert at {i} of {} entries", self.len);
        self.push_back(x);
        let mut j = self.len - 1;
        while j > i {
            let prev = *self.slot(self.head + j - 1);
            *self.slot_mut(self.head + j) = prev;
            j -= 1;
        }
        *self.slot_mut(self.head + i) = x;
    }
    pub fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        (0..self.len).map(move |i| self.slot(self.head + i))
    }

    /// The buffer slot of position `i` (wrapped by the mask).
    #[inline]
    fn slot(&self, i: usize) -> &T {
        // SAFETY: `mask == buf.len() - 1` (a power of two, at least 1 slot:
        // set together in `new` and `grow`), so `i & mask < buf.len()`.
        // The bounds check would be a compare and a branch on every queue
        // access of the simulator's hot path.
        unsafe { self.buf.get_unchecked(i & self.mask) }
    }
    #[inline]
    fn slot_mut(&mut self, i: usize) -> &mut T {
        // SAFETY: as in `slot`.
        unsafe { self.buf.get_unchecked_mut(i & self.mask) }
    }

    #[cold]
    fn grow(&mut self) {
        let n = self.buf.len();
        let mut buf = vec![self.buf[0]; 2 * n];
        for (i, x) in buf.iter_mut().take(self.len).enumerate() {
            *x = self.buf[(self.head + i) & self.mask];
        }
        self.buf = buf;
        self.mask = 2 * n - 1;
        self.head = 0;
    }
}

impl<T: Copy> std::ops::Index<usize> for Fifo<T> {
    type Output = T;
    #[inline]
    fn index(&self, i: usize) -> &T {
        assert!(i < self.len, "fifo index {i} out of {} entries", self.len);
        self.slot(self.head + i)
    }
}

impl<T: Copy> std::ops::IndexMut<usize> for Fifo<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        assert!(i < self.len, "fifo index {i} out of {} entries", self.len);
        self.slot_mut(self.head + i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::VecDeque;

    #[test]
    fn behaves_as_a_vecdeque_through_wraps_and_growth() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        let mut r: Fifo<u64> = Fifo::new(3, 0);
        let mut q: VecDeque<u64> = VecDeque::new();
        for step in 0..20_000u64 {
            match rng.gen_range(0..11) {
                10 => {
                    let i = rng.gen_range(0..=q.len());
                    r.insert(i, step);
                    q.insert(i, step);
                }
                0..=4 => {
                    r.push_back(step);
                    q.push_back(step);
                }
                5..=7 => assert_eq!(r.pop_front(), q.pop_front()),
                8 if !q.is_empty() => {
                    let i = rng.gen_range(0..q.len());
                    r[i] += 1;
                    q[i] += 1;
                    assert_eq!(r.get(i), q.get(i));
                }
                _ => {
                    assert_eq!(r.get(q.len()), None);
                    assert!(r.iter().eq(q.iter()));
                }
            }
            assert_eq!((r.len(), r.front()), (q.len(), q.front()));
        }
        r.clear();
        assert!(r.is_empty() && r.pop_front().is_none());
    }
}

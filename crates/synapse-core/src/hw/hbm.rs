//! Off-chip memory: an HBM model with pseudo-channels and banks.
//!
//! Follows §4.3 and §6 of the Synapse paper (Alveo U50: two HBM stacks, the
//! ELU exposing one pseudo-channel). An access goes to one bank of one
//! pseudo-channel: it starts when the bank is free and its data arrive
//! `latency + bytes / peak bandwidth` later. A bank stays busy `bank_busy`
//! (row cycle, tRC) after an access starts. The channel's data bus is a
//! bandwidth budget: every access spends `bytes / peak` of bus time from
//! when it is issued, so the bus only delays accesses when the issue rate
//! exceeds the peak bandwidth (a controller reorders around busy banks, so
//! an access waiting for its bank does not hold the bus for later ones). Reads are charged in whole `bytes_per_access`
//! bursts. Times are kept in picoseconds so sub-cycle transfers add up right.

use serde::{Deserialize, Serialize};

/// HBM timing and geometry. Defaults: one pseudo-channel of the U50's HBM2
/// (460 GB/s over 32 pseudo-channels = 14.4 GB/s each), 16 banks, 32-byte
/// bursts (256-bit AXI port), ~100 ns load latency seen from the fabric,
/// tRC ~ 48 ns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timing {
    pub pseudo_channels: u32,
    pub banks: u32,
    pub latency_ns: f64,
    pub bytes_per_access: u32,
    /// Peak bandwidth of one pseudo-channel, GB/s (= bytes per ns).
    pub peak_gbps: f64,
    /// Row cycle: how long a bank is busy after an access starts.
    pub bank_busy_ns: f64,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            pseudo_channels: 1,
            banks: 16,
            latency_ns: 100.0,
            bytes_per_access: 32,
            peak_gbps: 14.4,
            bank_busy_ns: 48.0,
        }
    }
}

pub struct Hbm {
    t: Timing,
    latency_ps: u64,
    bank_busy_ps: u64,
    bank_free_ps: Vec<u64>,
    chan_free_ps: Vec<u64>,
    /// Power-of-two channels and banks: `locate` finds a bank with masks
    /// and a shift; `pc_mask + 1` and `bank_mask + 1` are the counts.
    pow2: bool,
    pc_mask: usize,
    pc_bits: u32,
    bank_mask: usize,
    /// One burst (`bytes_per_access`) and its transfer time, the usual
    /// read: not recomputed in floating point every time.
    burst: u64,
    burst_ps: u64,
    /// `burst` is a power of two: whole bursts by a mask (`is_power_of_two`
    /// is a dozen instructions on the baseline x86-64 target, no popcnt).
    burst_pow2: bool,
    /// Bytes read since the start.
    pub bytes_read: u64,
    pub accesses: u64,
}

impl Hbm {
    pub fn new(t: Timing) -> Hbm {
        let pcs = t.pseudo_channels.max(1) as usize;
        let banks = t.banks.max(1) as usize;
        let burst = t.bytes_per_access.max(1) as u64;
        let mut h = Hbm {
            latency_ps: (t.latency_ns * 1000.0).round() as u64,
            bank_busy_ps: (t.bank_busy_ns * 1000.0).round() as u64,
            bank_free_ps: vec![0; pcs * banks],
            chan_free_ps: vec![0; pcs],
            pow2: pcs.is_power_of_two() && banks.is_power_of_two(),
            pc_mask: pcs - 1,
            pc_bits: pcs.trailing_zeros(),
            bank_mask: banks - 1,
            burst,
            burst_ps: 0,
            burst_pow2: burst.is_power_of_two(),
            t,
            bytes_read: 0,
            accesses: 0,
        };
        h.burst_ps = h.transfer_ps(burst);
        h
    }

    pub fn timing(&self) -> &Timing {
        &self.t
    }

    /// The (pseudo-channel, bank) a structure's logical bank lands in:
    /// logical banks are spread over channels first, then banks.
    #[inline]
    pub fn locate(&self, bank: u16) -> (usize, usize) {
        let b = bank as usize;
        if self.pow2 {
            // The usual sizes: masks and shifts, not three divisions a read.
            return (b & self.pc_mask, (b >> self.pc_bits) & self.bank_mask);
        }
        let (pcs, banks) = (self.pc_mask + 1, self.bank_mask + 1);
        (b % pcs, (b / pcs) % banks)
    }

    /// Bytes actually moved for a read of `bytes`: whole bursts.
    #[inline]
    pub fn charged(&self, bytes: u32) -> u64 {
        let bpa = self.burst;
        let b = bytes.max(1) as u64;
        if self.burst_pow2 {
            return (b + bpa - 1) & !(bpa - 1);
        }
        b.div_ceil(bpa) * bpa
    }

    /// Time on the channel's data bus of a read charged `charged` bytes.
    fn transfer_ps(&self, charged: u64) -> u64 {
        // ceil_cycles: `ceil() as u64` without a libm call (same value
        // below 2^63; a zero peak rate gives infinity, kept as before).
        let x = charged as f64 * 1000.0 / self.t.peak_gbps;
        if x < 9.0e18 {
            super::ceil_cycles(x)
        } else {
            x.ceil() as u64
        }
    }

    /// Issues a read at `now_ps`; returns when its last byte arrives.
    #[inline]
    pub fn read(&mut self, now_ps: u64, bank: u16, bytes: u32) -> u64 {
        self.read_charged(now_ps, bank, bytes).0
    }

    /// [`Hbm::read`], also returning the bytes charged ([`Hbm::charged`]),
    /// which the ELU counts per table. (Inlined into the ELU's read issue:
    /// a call cost a fifth of it.)
    #[inline(always)]
    pub fn read_charged(&mut self, now_ps: u64, bank: u16, bytes: u32) -> (u64, u64) {
        // The bank's index in bank_free_ps: channel-major.
        let (c, k) = self.locate(bank);
        let bi = c * (self.bank_mask + 1) + k;
        let charged = self.charged(bytes);
        let start = now_ps.max(self.bank_free_ps[bi]);
        self.bank_free_ps[bi] = start + self.bank_busy_ps;
        let transfer_ps = if charged == self.burst { self.burst_ps } else { self.transfer_ps(charged) };
        // Bus budget: the channel's virtual clock advances by the transfer.
        self.chan_free_ps[c] = self.chan_free_ps[c].max(now_ps) + transfer_ps;
        let done = (start + self.latency_ps + transfer_ps).max(self.chan_free_ps[c]);
        self.bytes_read += charged;
        self.accesses += 1;
        (done, charged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hbm() -> Hbm {
        Hbm::new(Timing {
            pseudo_channels: 2,
            banks: 4,
            latency_ns: 100.0,
            bytes_per_access: 32,
            peak_gbps: 16.0, // 32 B take 2 ns
            bank_busy_ns: 50.0,
        })
    }

    /// The mask paths of `locate` and `charged` against the plain formulas.
    #[test]
    fn power_of_two_shortcuts_match_the_divisions() {
        for (pcs, banks, bpa) in [(1, 16, 32), (2, 4, 64), (4, 8, 1), (3, 5, 24), (8, 2, 48)] {
            let h = Hbm::new(Timing {
                pseudo_channels: pcs,
                banks,
                bytes_per_access: bpa,
                ..Timing::default()
            });
            let (p, n, a) = (pcs as usize, banks as usize, bpa as u64);
            for bank in 0..300u16 {
                let b = bank as usize;
                assert_eq!(h.locate(bank), (b % p, (b / p) % n), "{pcs} {banks} {bank}");
            }
            for bytes in 0..300u32 {
                let want = (bytes.max(1) as u64).div_ceil(a) * a;
                assert_eq!(h.charged(bytes), want, "{bpa} {bytes}");
            }
        }
    }

    /// `read`'s bank index (masks, or `locate`) is `locate`'s, channel-major,
    /// and a burst's cached transfer time is the computed one.
    #[test]
    fn read_finds_the_bank_locate_names() {
        for (pcs, banks, bpa) in [(1, 16, 32), (2, 4, 64), (4, 8, 1), (3, 5, 24), (8, 2, 48)] {
            let t = Timing { pseudo_channels: pcs, banks, bytes_per_access: bpa, ..Timing::default() };
            for bank in 0..100u16 {
                let mut h = Hbm::new(t.clone());
                h.read(1, bank, bpa);
                let (c, b) = h.locate(bank);
                let busy: Vec<usize> = (0..h.bank_free_ps.len()).filter(|&i| h.bank_free_ps[i] != 0).collect();
                assert_eq!(busy, vec![c * banks as usize + b], "{pcs} {banks} {bank}");
                assert_eq!(h.burst_ps, h.transfer_ps(h.charged(bpa)));
            }
        }
    }

    #[test]
    fn single_read_latency_plus_transfer_and_bursts_rounded_up() {
        let mut h = hbm();
        assert_eq!(h.read(0, 0, 32), 102_000);
        assert_eq!(h.charged(33), 64);
        assert_eq!(h.read(1_000_000, 1, 33), 1_000_000 + 100_000 + 4_000);
        assert_eq!(h.bytes_read, 96);
    }

    #[test]
    fn same_bank_waits_for_row_cycle_other_bank_does_not() {
        let mut h = hbm();
        h.read(0, 0, 32);
        // Logical bank 2 is channel 0, bank 1: free; logical bank 0 again waits 50 ns.
        assert_eq!(h.locate(2), (0, 1));
        let other = h.read(0, 2, 32);
        assert_eq!(other, 102_000, "a free bank: not delayed");
        let again = h.read(0, 0, 32);
        assert_eq!(again, 50_000 + 100_000 + 2_000);
        // One ps before the bank frees is still blocked.
        let mut h = hbm();
        h.read(0, 0, 32);
        assert_eq!(h.read(49_999, 0, 32), 152_000);
        let mut h = hbm();
        h.read(0, 0, 32);
        assert_eq!(h.read(50_000, 0, 32), 152_000);
        assert_eq!(h.read(100_001, 0, 32), 202_001);
    }

    #[test]
    fn a_read_waiting_for_its_bank_does_not_hold_the_bus() {
        let mut h = hbm();
        h.read(0, 0, 32);
        assert_eq!(h.read(0, 0, 32), 152_000);
        // Issued after the delayed one, to a free bank: unaffected.
        assert_eq!(h.read(1_000, 1, 32), 103_000);
    }

    #[test]
    fn many_banks_saturate_at_peak_bandwidth() {
        let mut h = Hbm::new(Timing {
            pseudo_channels: 1,
            banks: 16,
            bank_busy_ns: 0.0,
            ..Timing::default()
        });
        let mut last = 0;
        for i in 0..10_000u32 {
            last = h.read(0, (i % 16) as u16, 32);
        }
        let gbps = h.bytes_read as f64 / (last as f64 / 1000.0);
        assert!((gbps - 14.4).abs() < 0.2, "{gbps}");
    }
}

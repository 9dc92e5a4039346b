//! A meter cell as BMv2 runs it (`src/bm_sim/meters.cpp`): an N-rate,
//! N+1-colour marker; P4's meters are two-rate three-colour markers
//! (GREEN 0, YELLOW 1, RED 2).
//!
//! Rates are set smallest first (CIR, then PIR), each in units (bytes or
//! packets) per microsecond with a burst in units, as simple_switch_CLI's
//! `meter_set_rates` writes them; every bucket starts full. A packet
//! refills each bucket by the tokens accrued since time 0 —
//! `floor(now_us * rate)`, always from time 0 so no rounding accumulates —
//! then, from the highest rate down, takes its units: the first bucket
//! short of them gives the colour and the buckets below it are left as
//! they were; GREEN if all had enough. A meter without rates marks every
//! packet GREEN. The control plane's twin is `synapse_vmt.p4.externs.Meter`.

/// GREEN, YELLOW, RED.
pub type Color = u32;
pub const GREEN: Color = 0;

#[derive(Clone, Debug, PartialEq)]
struct Rate {
    /// Units per microsecond.
    info_rate: f64,
    burst: u64,
    tokens: u64,
    tokens_last: u64,
    color: Color,
}

/// One meter cell (see the module doc).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Meter {
    packets: bool,
    /// Highest rate first; empty: not configured.
    rates: Vec<Rate>,
}

/// Rates that decrease (BMv2's `INVALID_INFO_RATE_VALUE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecreasingRates;

impl Meter {
    /// A meter of packets (`packets`) or of bytes, without rates.
    pub fn new(packets: bool) -> Self {
        Meter { packets, rates: Vec::new() }
    }

    pub fn is_configured(&self) -> bool {
        !self.rates.is_empty()
    }

    /// Sets the rates, smallest first: `(units per microsecond, burst)`.
    pub fn set_rates(&mut self, rates: &[(f64, u64)]) -> Result<(), DecreasingRates> {
        if rates.windows(2).any(|w| w[0].0 > w[1].0) {
            return Err(DecreasingRates);
        }
        self.rates = rates
            .iter()
            .enumerate()
            .rev()
            .map(|(i, &(info_rate, burst))| Rate { info_rate, burst, tokens: burst, tokens_last: 0, color: i as Color + 1 })
            .collect();
        Ok(())
    }

    /// The colour of a packet of `bytes` bytes (its length at ingress)
    /// arriving `now_us` microseconds after time 0.
    pub fn execute(&mut self, bytes: u64, now_us: u64) -> Color {
        let units = if self.packets { 1 } else { bytes };
        for r in &mut self.rates {
            // BMv2: static_cast<uint64_t>(micros_since_init * info_rate)
            let since = (now_us as f64 * r.info_rate) as u64;
            r.tokens = (r.tokens + since.saturating_sub(r.tokens_last)).min(r.burst);
            r.tokens_last = since;
            if r.tokens < units {
                return r.color;
            }
            r.tokens -= units;
        }
        GREEN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unconfigured_meters_mark_green() {
        let mut m = Meter::new(false);
        assert!(!m.is_configured());
        assert!((0..100).all(|t| m.execute(1500, t) == GREEN));
    }

    #[test]
    fn two_rate_three_colour_as_bmv2() {
        // packets: CIR 1 per 10 us (burst 2), PIR 1 per 5 us (burst 3)
        let mut m = Meter::new(true);
        m.set_rates(&[(0.1, 2), (0.2, 3)]).unwrap();
        // at t=0 the buckets hold 2 (CIR) and 3 (PIR): 2 green, then the CIR
        // bucket is empty (yellow), then the PIR one too (red)
        let colors: Vec<Color> = (0..4).map(|_| m.execute(0, 0)).collect();
        assert_eq!(colors, [0, 0, 1, 2]);
        // 10 us later: PIR accrued 2 tokens (had 0), CIR 1 (had 0)
        let colors: Vec<Color> = (0..3).map(|_| m.execute(0, 10)).collect();
        assert_eq!(colors, [0, 1, 2]);
        // a red packet takes nothing from the CIR bucket below it
        let mut m = Meter::new(true);
        m.set_rates(&[(0.1, 1), (0.2, 1)]).unwrap();
        assert_eq!(m.execute(0, 0), 0);
        assert_eq!(m.execute(0, 0), 2);
        assert_eq!(m.execute(0, 5), 1); // PIR refilled by 1, CIR not yet
    }

    #[test]
    fn byte_meters_count_the_ingress_length_and_bursts_cap_the_buckets() {
        let mut m = Meter::new(false);
        m.set_rates(&[(1.0, 1000), (2.0, 2000)]).unwrap();
        assert_eq!(m.execute(1000, 0), 0);
        assert_eq!(m.execute(1, 0), 1); // CIR bucket empty
        // a long idle time refills to the bursts, not beyond
        assert_eq!(m.execute(1000, 1_000_000), 0);
        assert_eq!(m.execute(1, 1_000_000), 1);
    }

    #[test]
    fn decreasing_rates_are_refused() {
        assert_eq!(Meter::new(true).set_rates(&[(2.0, 1), (1.0, 1)]), Err(DecreasingRates));
    }
}

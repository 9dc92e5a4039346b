//! Flow-size distributions: empirical CDFs sampled by inverse transform.
//!
//! Follows §6 of the Synapse paper ("Traffic Generation"): flow sizes are
//! sampled from the flow-size distribution of real CAIDA traces. A
//! [`FlowSizeDist`] is a list of points `(bytes, cumulative fraction)`; the
//! first point carries an atom (`P(B = bytes₀) = cum₀`), and between points the
//! size is log-uniform (the CDF is linear in `ln bytes`), which is how
//! flow-size CDFs are drawn and keeps the heavy tail smooth without
//! inventing sizes past the largest one seen.
//!
//! The built-ins ([`FlowSizeDist::builtin`]) come from CAIDA's anonymized
//! passive traces (Equinix monitors) as processed with Zeek; see
//! [`super::caida`] and `scripts/caida_cdf.py`.

use rand::Rng;

use super::caida;

/// Names accepted by [`FlowSizeDist::builtin`].
pub const BUILTINS: &[&str] = &["caida2019", "caida2018"];

/// Why a list of CDF points is not a distribution.
#[derive(Clone, PartialEq, Debug, thiserror::Error)]
pub enum DistError {
    #[error("a flow-size CDF needs at least one point")]
    Empty,
    #[error("point {index}: bytes {bytes} must be finite and > 0")]
    BadBytes { index: usize, bytes: f64 },
    #[error("point {index}: bytes {bytes} must be greater than the previous point's {prev}")]
    BytesNotIncreasing { index: usize, bytes: f64, prev: f64 },
    #[error("point {index}: cumulative fraction {cum} must be in [0, 1]")]
    BadFraction { index: usize, cum: f64 },
    #[error("point {index}: cumulative fraction {cum} is below the previous point's {prev}")]
    FractionDecreasing { index: usize, cum: f64, prev: f64 },
    #[error("the last cumulative fraction is {0}, expected 1")]
    NotEndingAtOne(f64),
    #[error("truncation at {0} bytes leaves no probability mass")]
    EmptyTruncation(f64),
    #[error("unknown flow-size distribution {0:?}; expected one of: caida2019, caida2018")]
    Unknown(String),
    #[error("bad flow-size distribution spec {0:?}; expected NAME or NAME:MAX_BYTES (e.g. caida2019:1e7)")]
    BadSpec(String),
}

/// An empirical flow-size distribution in bytes.
#[derive(Clone, PartialEq, Debug)]
pub struct FlowSizeDist {
    bytes: Vec<f64>,
    ln_bytes: Vec<f64>,
    cum: Vec<f64>,
}

/// Packets a flow of `bytes` sends when packets carry `mean_pkt_bytes` on average:
/// `ceil(bytes / mean_pkt_bytes)`, at least one.
#[inline]
pub fn packets(bytes: f64, mean_pkt_bytes: f64) -> u64 {
    ((bytes / mean_pkt_bytes).ceil() as u64).max(1)
}

impl FlowSizeDist {
    /// A distribution from `(bytes, cumulative fraction)` points: bytes finite,
    /// positive and strictly increasing; fractions in [0, 1], non-decreasing,
    /// the last one 1 (within 1e-9).
    pub fn from_points(points: Vec<(f64, f64)>) -> Result<Self, DistError> {
        if points.is_empty() {
            return Err(DistError::Empty);
        }
        let mut bytes = Vec::with_capacity(points.len());
        let mut cum = Vec::with_capacity(points.len());
        for (index, &(b, c)) in points.iter().enumerate() {
            if !(b.is_finite() && b > 0.0) {
                return Err(DistError::BadBytes { index, bytes: b });
            }
            if !(0.0..=1.0).contains(&c) {
                return Err(DistError::BadFraction { index, cum: c });
            }
            if let (Some(&pb), Some(&pc)) = (bytes.last(), cum.last()) {
                if b <= pb {
                    return Err(DistError::BytesNotIncreasing {
                        index,
                        bytes: b,
                        prev: pb,
                    });
                }
                if c < pc {
                    return Err(DistError::FractionDecreasing {
                        index,
                        cum: c,
                        prev: pc,
                    });
                }
            }
            bytes.push(b);
            cum.push(c);
        }
        let last = *cum.last().unwrap();
        if (last - 1.0).abs() > 1e-9 {
            return Err(DistError::NotEndingAtOne(last));
        }
        *cum.last_mut().unwrap() = 1.0;
        let ln_bytes = bytes.iter().map(|b| b.ln()).collect();
        Ok(Self {
            bytes,
            ln_bytes,
            cum,
        })
    }

    /// A built-in distribution by name (see [`BUILTINS`]): `caida2019` or
    /// `caida2018`, TCP and UDP flows of the CAIDA trace mixed by their counts.
    pub fn builtin(name: &str) -> Result<Self, DistError> {
        let points = match name {
            "caida2019" => caida::CAIDA2019,
            "caida2018" => caida::CAIDA2018,
            _ => return Err(DistError::Unknown(name.to_string())),
        };
        Self::from_points(points.to_vec())
    }

    /// A built-in by spec: `name` or `name:max_bytes` (e.g. `caida2019:1e7`,
    /// the distribution truncated at 10 MB; see [`FlowSizeDist::truncated`]).
    pub fn from_spec(spec: &str) -> Result<Self, DistError> {
        match spec.split_once(':') {
            None => Self::builtin(spec),
            Some((name, max)) => {
                let m: f64 = max
                    .trim()
                    .parse()
                    .map_err(|_| DistError::BadSpec(spec.to_string()))?;
                if !(m.is_finite() && m > 0.0) {
                    return Err(DistError::BadSpec(spec.to_string()));
                }
                Self::builtin(name)?.truncated(m)
            }
        }
    }

    /// The `(bytes, cumulative fraction)` points.
    pub fn points(&self) -> Vec<(f64, f64)> {
        self.bytes
            .iter()
            .copied()
            .zip(self.cum.iter().copied())
            .collect()
    }

    /// Smallest and largest flow size.
    pub fn range(&self) -> (f64, f64) {
        (self.bytes[0], *self.bytes.last().unwrap())
    }

    /// The distribution conditioned on `bytes <= max_bytes`: cuts an
    /// elephant tail that would otherwise dominate a short simulation.
    pub fn truncated(&self, max_bytes: f64) -> Result<Self, DistError> {
        let top = self.cdf(max_bytes);
        if top.is_nan() || top <= 0.0 {
            return Err(DistError::EmptyTruncation(max_bytes));
        }
        let mut pts: Vec<(f64, f64)> = self
            .points()
            .into_iter()
            .filter(|&(b, _)| b < max_bytes)
            .map(|(b, c)| (b, c / top))
            .collect();
        if max_bytes >= self.range().1 {
            return Ok(self.clone());
        }
        pts.push((max_bytes, 1.0));
        Self::from_points(pts)
    }

    /// P(B <= bytes).
    pub fn cdf(&self, bytes: f64) -> f64 {
        if bytes < self.bytes[0] {
            return 0.0;
        }
        // First point strictly above `bytes`; the segment is [k-1, k].
        let k = self.bytes.partition_point(|&b| b <= bytes);
        if k == self.bytes.len() {
            return 1.0;
        }
        let (c0, c1) = (self.cum[k - 1], self.cum[k]);
        let f = (bytes.ln() - self.ln_bytes[k - 1]) / (self.ln_bytes[k] - self.ln_bytes[k - 1]);
        c0 + (c1 - c0) * f
    }

    /// The size at cumulative fraction `u` in [0, 1] (inverse CDF, log-linear
    /// between points).
    #[inline]
    pub fn quantile(&self, u: f64) -> f64 {
        // First point whose fraction reaches u; u at or below the first
        // fraction falls on the atom at the smallest size.
        let k = self.cum.partition_point(|&c| c < u);
        if k == 0 {
            return self.bytes[0];
        }
        if k == self.cum.len() {
            return *self.bytes.last().unwrap();
        }
        let (c0, c1) = (self.cum[k - 1], self.cum[k]);
        let f = (u - c0) / (c1 - c0); // c1 >= u > c0, so c1 > c0
        (self.ln_bytes[k - 1] + f * (self.ln_bytes[k] - self.ln_bytes[k - 1])).exp()
    }

    /// One flow size in bytes.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        self.quantile(rng.gen::<f64>())
    }

    /// Mean flow size in bytes (exact for the log-linear interpolation).
    pub fn mean_bytes(&self) -> f64 {
        let mut m = self.cum[0] * self.bytes[0];
        for k in 1..self.bytes.len() {
            let (b0, b1) = (self.bytes[k - 1], self.bytes[k]);
            let p = self.cum[k] - self.cum[k - 1];
            // Log-uniform on [b0, b1]: mean (b1 - b0) / ln(b1 / b0).
            m += p * (b1 - b0) / (self.ln_bytes[k] - self.ln_bytes[k - 1]);
        }
        m
    }

    /// Expected packets per flow, E[ceil(B / mean_pkt_bytes)] (at least 1 each).
    /// Exact band by band; a segment spanning more than 4096 packet sizes uses
    /// E[B]/m + 1/2 over that segment, off by well under one packet in thousands.
    pub fn mean_packets(&self, mean_pkt_bytes: f64) -> f64 {
        let m = mean_pkt_bytes;
        let mut e = self.cum[0] * packets(self.bytes[0], m) as f64;
        for k in 1..self.bytes.len() {
            let (b0, b1) = (self.bytes[k - 1], self.bytes[k]);
            let (c0, c1) = (self.cum[k - 1], self.cum[k]);
            let p = c1 - c0;
            if p == 0.0 {
                continue;
            }
            let (l0, l1) = (self.ln_bytes[k - 1], self.ln_bytes[k]);
            let seg_cdf = |x: f64| (x.ln() - l0) / (l1 - l0); // within the segment, 0..1
            let first = (b0 / m).floor() as u64 + 1;
            let last = ((b1 / m).ceil() as u64).max(first);
            if last - first > 4096 {
                let mean = (b1 - b0) / (l1 - l0);
                e += p * (mean / m + 0.5);
                continue;
            }
            for n in first..=last {
                let lo = b0.max((n - 1) as f64 * m);
                let hi = b1.min(n as f64 * m);
                if hi > lo {
                    e += p * (seg_cdf(hi) - seg_cdf(lo)) * n as f64;
                }
            }
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64;

    /// Kolmogorov–Smirnov distance between samples and a CDF (with atoms:
    /// the left limit is read just below each sample value).
    pub(crate) fn ks(samples: &mut [f64], cdf: impl Fn(f64) -> f64) -> f64 {
        samples.sort_by(f64::total_cmp);
        let n = samples.len() as f64;
        let mut d: f64 = 0.0;
        let mut i = 0;
        while i < samples.len() {
            let x = samples[i];
            let before = i as f64 / n;
            while i < samples.len() && samples[i] == x {
                i += 1;
            }
            let after = i as f64 / n;
            d = d
                .max((after - cdf(x)).abs())
                .max((before - cdf(x * (1.0 - 1e-12))).abs());
        }
        d
    }

    #[test]
    fn builtins_load_and_are_heavy_tailed() {
        for name in BUILTINS {
            let d = FlowSizeDist::builtin(name).unwrap();
            let (lo, hi) = d.range();
            assert!(lo >= 1.0 && hi > 1e9, "{name}: range {lo}..{hi}");
            // Heavy tail: the mean is far above the median.
            assert!(d.mean_bytes() > 50.0 * d.quantile(0.5), "{name}");
            assert!(d.points().len() < 500);
        }
        assert!(matches!(
            FlowSizeDist::builtin("caida2014"),
            Err(DistError::Unknown(_))
        ));
    }

    #[test]
    fn sampler_reproduces_the_cdf() {
        // KS distance of 100K samples; the 1% critical value is 1.63/sqrt(n) = 0.0052.
        for name in BUILTINS {
            let d = FlowSizeDist::builtin(name).unwrap();
            let mut rng = Pcg64::seed_from_u64(7);
            let mut s: Vec<f64> = (0..100_000).map(|_| d.sample(&mut rng)).collect();
            let dist = ks(&mut s, |x| d.cdf(x));
            assert!(dist < 0.0052, "{name}: KS {dist}");
        }
    }

    #[test]
    fn sampler_hits_the_given_points() {
        // Two points: an atom of 0.5 at 100 B, then log-uniform up to 10 000 B.
        let d = FlowSizeDist::from_points(vec![(100.0, 0.5), (10_000.0, 1.0)]).unwrap();
        assert_eq!(d.quantile(0.25), 100.0);
        assert!((d.quantile(0.75) - 1000.0).abs() < 1e-9);
        assert!((d.cdf(1000.0) - 0.75).abs() < 1e-12);
        assert_eq!(d.cdf(99.0), 0.0);
        assert_eq!(d.cdf(10_000.0), 1.0);
        let mut rng = Pcg64::seed_from_u64(1);
        let n = 200_000;
        let at_atom = (0..n).filter(|_| d.sample(&mut rng) == 100.0).count() as f64 / n as f64;
        assert!((at_atom - 0.5).abs() < 0.005, "{at_atom}");
    }

    #[test]
    fn means_match_sample_means() {
        let d =
            FlowSizeDist::from_points(vec![(100.0, 0.1), (1500.0, 0.6), (60_000.0, 1.0)]).unwrap();
        let mut rng = Pcg64::seed_from_u64(3);
        let n = 400_000;
        let (mut sb, mut sp) = (0.0, 0.0);
        for _ in 0..n {
            let b = d.sample(&mut rng);
            sb += b;
            sp += packets(b, 1000.0) as f64;
        }
        let (mb, mp) = (sb / n as f64, sp / n as f64);
        assert!(
            (mb / d.mean_bytes() - 1.0).abs() < 0.01,
            "{mb} vs {}",
            d.mean_bytes()
        );
        assert!(
            (mp / d.mean_packets(1000.0) - 1.0).abs() < 0.01,
            "{mp} vs {}",
            d.mean_packets(1000.0)
        );
    }

    #[test]
    fn truncation_conditions_on_max() {
        let d = FlowSizeDist::builtin("caida2019").unwrap();
        let t = d.truncated(1e6).unwrap();
        assert_eq!(t.range().1, 1e6);
        let top = d.cdf(1e6);
        for x in [10.0, 1e3, 5e4, 9e5] {
            assert!((t.cdf(x) - d.cdf(x) / top).abs() < 1e-12);
        }
        assert!(t.mean_bytes() < d.mean_bytes());
        assert_eq!(d.truncated(1e12).unwrap(), d);
        assert!(d.truncated(0.5).is_err());
        assert_eq!(FlowSizeDist::from_spec("caida2019:1e6").unwrap(), t);
        assert_eq!(FlowSizeDist::from_spec("caida2019").unwrap(), d);
        for bad in ["caida2019:", "caida2019:x", "caida2019:-5", "nope:1e6"] {
            assert!(FlowSizeDist::from_spec(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_points_are_rejected() {
        let cases: Vec<(Vec<(f64, f64)>, &str)> = vec![
            (vec![], "at least one point"),
            (vec![(0.0, 1.0)], "point 0: bytes 0"),
            (vec![(f64::NAN, 1.0)], "point 0: bytes NaN"),
            (
                vec![(10.0, 0.5), (10.0, 1.0)],
                "point 1: bytes 10 must be greater",
            ),
            (
                vec![(10.0, 0.5), (20.0, 0.4), (30.0, 1.0)],
                "point 1: cumulative fraction 0.4 is below",
            ),
            (vec![(10.0, 1.5)], "point 0: cumulative fraction 1.5"),
            (
                vec![(10.0, 0.5), (20.0, 0.9)],
                "last cumulative fraction is 0.9",
            ),
        ];
        for (pts, want) in cases {
            let e = FlowSizeDist::from_points(pts.clone())
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{pts:?}: {e}");
        }
    }

    proptest::proptest! {
        /// Any list of points is either rejected with an error or gives a
        /// distribution whose quantile is monotone, inside its range, and
        /// inverts its CDF.
        #[test]
        fn random_points_never_panic(pts in proptest::collection::vec((-10.0f64..1e7, -0.5f64..1.5), 0..12),
                                     us in proptest::collection::vec(0.0f64..=1.0, 1..20)) {
            if let Ok(d) = FlowSizeDist::from_points(pts) {
                let (lo, hi) = d.range();
                let mut us = us;
                us.sort_by(f64::total_cmp);
                let mut prev = 0.0;
                for u in us {
                    let b = d.quantile(u);
                    proptest::prop_assert!(b >= lo && b <= hi * (1.0 + 1e-12) && b >= prev * (1.0 - 1e-12));
                    proptest::prop_assert!(d.cdf(b) >= u - 1e-9);
                    prev = b;
                }
                proptest::prop_assert!(d.mean_packets(100.0) >= 1.0);
            }
        }
    }
}

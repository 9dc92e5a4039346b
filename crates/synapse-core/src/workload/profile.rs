//! Time-varying flow arrival rates: a piecewise-linear density over the run.
//!
//! The Synapse paper's Fig. 8 drives the runtime optimizer with "4 different
//! traffic profiles with varying flow arrival rates". A [`Profile`] is a list
//! of `(t_fraction, weight)` points from `t = 0` to `t = 1` (fractions of the
//! run); the flow arrival rate is proportional to the weight, linear between
//! points. Two points at the same `t` make a step. Flow start times are drawn
//! from the normalised density by inverse transform, so the number of active
//! flows — and with it the cache capacity a table needs — follows the shape.

/// Names accepted by [`Profile::builtin`]: `flat` and the four Fig. 8 shapes.
pub const BUILTINS: &[&str] = &["flat", "step", "ramp", "diurnal", "burst"];

/// The four shapes of the Fig. 8 experiment (capacity needed rises and falls).
pub const FIG8: &[&str] = &["step", "ramp", "diurnal", "burst"];

/// Why a list of points is not a profile.
#[derive(Clone, PartialEq, Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("a profile needs at least two points, from t = 0 to t = 1")]
    TooFew,
    #[error("point {index}: t {t} must be in [0, 1] and not below the previous point's")]
    BadTime { index: usize, t: f64 },
    #[error("the first point must be at t = 0 and the last at t = 1")]
    BadEnds,
    #[error("point {index}: weight {w} must be finite and >= 0")]
    BadWeight { index: usize, w: f64 },
    #[error("all weights are zero: no flow could start")]
    ZeroArea,
    #[error("unknown traffic profile {0:?}; expected one of: flat, step, ramp, diurnal, burst")]
    Unknown(String),
}

/// A piecewise-linear flow arrival density over the run, `t` in [0, 1].
#[derive(Clone, PartialEq, Debug)]
pub struct Profile {
    t: Vec<f64>,
    w: Vec<f64>,
    /// Area under the weights from 0 to t[i].
    area: Vec<f64>,
}

impl Profile {
    /// A profile from `(t_fraction, weight)` points.
    pub fn from_points(points: Vec<(f64, f64)>) -> Result<Self, ProfileError> {
        if points.len() < 2 {
            return Err(ProfileError::TooFew);
        }
        let mut prev = 0.0;
        for (index, &(t, w)) in points.iter().enumerate() {
            if !(t.is_finite() && (0.0..=1.0).contains(&t) && t >= prev) {
                return Err(ProfileError::BadTime { index, t });
            }
            if !(w.is_finite() && w >= 0.0) {
                return Err(ProfileError::BadWeight { index, w });
            }
            prev = t;
        }
        if points[0].0 != 0.0 || points.last().unwrap().0 != 1.0 {
            return Err(ProfileError::BadEnds);
        }
        let (t, w): (Vec<f64>, Vec<f64>) = points.into_iter().unzip();
        let mut area = vec![0.0; t.len()];
        for i in 1..t.len() {
            area[i] = area[i - 1] + 0.5 * (w[i - 1] + w[i]) * (t[i] - t[i - 1]);
        }
        let total = *area.last().unwrap();
        if total.is_nan() || total <= 0.0 {
            return Err(ProfileError::ZeroArea);
        }
        Ok(Self { t, w, area })
    }

    /// A built-in profile by name (see [`BUILTINS`]):
    /// - `flat` (alias `uniform`): constant (the paper's uniform flow starts);
    /// - `step`: 1×, then 3× in the middle third, then 1× again;
    /// - `ramp`: rises linearly from 1× to 4× over 3/4 of the run, falls back by the end;
    /// - `diurnal`: 1 + 0.75·sin(2πt), one day compressed into the run (peak 7× the trough);
    /// - `burst`: 1× with two short 4× bursts, at 20–30 % and 60–65 % of the run.
    pub fn builtin(name: &str) -> Result<Self, ProfileError> {
        let pts = match name {
            "flat" | "uniform" => vec![(0.0, 1.0), (1.0, 1.0)],
            "step" => vec![
                (0.0, 1.0),
                (1.0 / 3.0, 1.0),
                (1.0 / 3.0, 3.0),
                (2.0 / 3.0, 3.0),
                (2.0 / 3.0, 1.0),
                (1.0, 1.0),
            ],
            "ramp" => vec![(0.0, 1.0), (0.75, 4.0), (1.0, 1.0)],
            "diurnal" => (0..=48)
                .map(|i| {
                    let t = i as f64 / 48.0;
                    (t, 1.0 + 0.75 * (2.0 * std::f64::consts::PI * t).sin())
                })
                .collect(),
            "burst" => vec![
                (0.0, 1.0),
                (0.2, 1.0),
                (0.2, 4.0),
                (0.3, 4.0),
                (0.3, 1.0),
                (0.6, 1.0),
                (0.6, 4.0),
                (0.65, 4.0),
                (0.65, 1.0),
                (1.0, 1.0),
            ],
            _ => return Err(ProfileError::Unknown(name.to_string())),
        };
        Self::from_points(pts)
    }

    /// The `(t_fraction, weight)` points.
    pub fn points(&self) -> Vec<(f64, f64)> {
        self.t.iter().copied().zip(self.w.iter().copied()).collect()
    }

    /// Normalised density at run fraction `x` (mean 1 over [0, 1]); at a step,
    /// the value after it.
    pub fn density(&self, x: f64) -> f64 {
        let total = *self.area.last().unwrap();
        let x = x.clamp(0.0, 1.0);
        let k = self.t.partition_point(|&t| t <= x); // first point after x
        if k == self.t.len() {
            return *self.w.last().unwrap() / total;
        }
        let (t0, t1, w0, w1) = (self.t[k - 1], self.t[k], self.w[k - 1], self.w[k]);
        (w0 + (w1 - w0) * (x - t0) / (t1 - t0)) / total
    }

    /// Peak of the normalised density: the peak rate over the mean rate.
    pub fn peak(&self) -> f64 {
        let total = *self.area.last().unwrap();
        self.w.iter().copied().fold(0.0, f64::max) / total
    }

    /// Fraction of flows starting before run fraction `x`.
    pub fn cdf(&self, x: f64) -> f64 {
        let total = *self.area.last().unwrap();
        let x = x.clamp(0.0, 1.0);
        let k = self.t.partition_point(|&t| t <= x);
        if k == self.t.len() {
            return 1.0;
        }
        let (t0, t1, w0, w1) = (self.t[k - 1], self.t[k], self.w[k - 1], self.w[k]);
        let s = x - t0;
        (self.area[k - 1] + w0 * s + 0.5 * (w1 - w0) / (t1 - t0) * s * s) / total
    }

    /// The run fraction at which a fraction `u` of flows have started.
    #[inline]
    pub fn quantile(&self, u: f64) -> f64 {
        let target = u.clamp(0.0, 1.0) * *self.area.last().unwrap();
        // First point whose area reaches the target; segments of zero area
        // (steps, zero weights) are skipped by the strict comparison.
        let k = self
            .area
            .partition_point(|&a| a < target)
            .clamp(1, self.t.len() - 1);
        let (t0, t1, w0, w1) = (self.t[k - 1], self.t[k], self.w[k - 1], self.w[k]);
        if t1 <= t0 {
            return t0;
        }
        let a = target - self.area[k - 1];
        // Solve w0·s + (w1 - w0)/(2L)·s² = a for s, in the form that stays
        // stable when the slope is zero or negative.
        let half_slope = 0.5 * (w1 - w0) / (t1 - t0);
        let disc = (w0 * w0 + 4.0 * half_slope * a).max(0.0);
        let denom = w0 + disc.sqrt();
        let s = if denom > 0.0 { 2.0 * a / denom } else { 0.0 };
        (t0 + s).clamp(t0, t1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64;

    #[test]
    fn builtins_are_normalised_and_vary() {
        for name in BUILTINS {
            let p = Profile::builtin(name).unwrap();
            // Mean density 1 (trapezoid rule on a fine grid).
            let n = 100_000;
            let mean: f64 = (0..n)
                .map(|i| p.density((i as f64 + 0.5) / n as f64))
                .sum::<f64>()
                / n as f64;
            assert!((mean - 1.0).abs() < 1e-3, "{name}: mean density {mean}");
            assert!((p.cdf(1.0) - 1.0).abs() < 1e-12);
            if *name != "flat" {
                assert!(p.peak() > 1.5, "{name}: peak {}", p.peak());
            }
        }
        assert!(matches!(
            Profile::builtin("square"),
            Err(ProfileError::Unknown(_))
        ));
    }

    #[test]
    fn quantile_inverts_cdf() {
        for name in BUILTINS {
            let p = Profile::builtin(name).unwrap();
            for i in 0..=1000 {
                let u = i as f64 / 1000.0;
                let x = p.quantile(u);
                assert!(
                    (p.cdf(x) - u).abs() < 1e-9,
                    "{name}: u {u} -> x {x} -> {}",
                    p.cdf(x)
                );
            }
        }
    }

    #[test]
    fn sampled_starts_follow_the_density() {
        // Histogram of 200K starts in 20 bins against the integrated density.
        let bins = 20;
        for name in BUILTINS {
            let p = Profile::builtin(name).unwrap();
            let mut rng = Pcg64::seed_from_u64(11);
            let n = 200_000;
            let mut h = vec![0usize; bins];
            for _ in 0..n {
                let x = p.quantile(rng.gen());
                h[((x * bins as f64) as usize).min(bins - 1)] += 1;
            }
            for (b, &c) in h.iter().enumerate() {
                let want = p.cdf((b + 1) as f64 / bins as f64) - p.cdf(b as f64 / bins as f64);
                let got = c as f64 / n as f64;
                let sd = (want * (1.0 - want) / n as f64).sqrt();
                assert!(
                    (got - want).abs() < 5.0 * sd + 1e-9,
                    "{name} bin {b}: {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn step_profile_is_three_times_denser_in_the_middle() {
        let p = Profile::builtin("step").unwrap();
        assert!((p.density(0.5) / p.density(0.1) - 3.0).abs() < 1e-12);
        assert!((p.cdf(2.0 / 3.0) - p.cdf(1.0 / 3.0) - 0.6).abs() < 1e-12);
    }

    #[test]
    fn bad_points_are_rejected() {
        let cases: Vec<(Vec<(f64, f64)>, &str)> = vec![
            (vec![(0.0, 1.0)], "at least two points"),
            (vec![(0.0, 1.0), (0.5, 1.0)], "first point must be at t = 0"),
            (
                vec![(0.0, 1.0), (0.6, 1.0), (0.4, 1.0), (1.0, 1.0)],
                "point 2: t 0.4",
            ),
            (vec![(0.0, 1.0), (1.0, -1.0)], "point 1: weight -1"),
            (vec![(0.0, 0.0), (1.0, 0.0)], "all weights are zero"),
        ];
        for (pts, want) in cases {
            let e = Profile::from_points(pts.clone()).unwrap_err().to_string();
            assert!(e.contains(want), "{pts:?}: {e}");
        }
    }

    proptest::proptest! {
        /// Any list of points is rejected or gives a profile whose quantile
        /// stays in [0, 1], is monotone and inverts the CDF.
        #[test]
        fn random_profiles_never_panic(mid in proptest::collection::vec((0.0f64..1.0, -1.0f64..5.0), 0..8),
                                       w0 in -1.0f64..5.0, w1 in -1.0f64..5.0) {
            let mut mid = mid;
            mid.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut pts = vec![(0.0, w0)];
            pts.extend(mid);
            pts.push((1.0, w1));
            if let Ok(p) = Profile::from_points(pts) {
                let mut prev = 0.0;
                for i in 0..=100 {
                    let u = i as f64 / 100.0;
                    let x = p.quantile(u);
                    proptest::prop_assert!((0.0..=1.0).contains(&x) && x >= prev - 1e-12);
                    proptest::prop_assert!((p.cdf(x) - u).abs() < 1e-6, "u {} x {} cdf {}", u, x, p.cdf(x));
                    prev = x;
                }
            }
        }
    }
}

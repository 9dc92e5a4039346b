"""The capacity model of a VMT: the Universal Scalability Law (paper §5 and Appendix C).

The throughput X of a table holding ``n`` PMUs, as a function of the load λ
offered to it, is modelled as::

    X(λ; n) = λ / (1 + σ(n)(λ − 1) + κ(n) λ(λ − 1)),   σ(n) = a_σ n + b_σ,   κ(n) = a_κ n + b_κ

Note: the paper's printed equation (5) is garbled (a bracket closes early and
the κ term ends up added outside the fraction). This is the standard USL form
(Gunther), with the load λ in the place of the concurrency N; it is the form
the paper's Fig. 10 curves have: linear at low load, a peak, then retrograde
throughput when misses queue up.

Units. The form pins X(1) = 1, so λ must be in a fixed unit: here λ and X are
in units of ``unit_mpps`` Mpps (default 1 Mpps, the unit counters are
converted to in :mod:`synapse_vmt.opt.counters`). Methods take and return
Mpps; the conversion happens inside.

Capacity. For σ < 1 and κ > 0, dX/dλ = 0 gives the peak in closed form::

    λ* = sqrt((1 − σ) / κ),   C = X(λ*) = λ* / (2(1 − σ) + (σ − κ) λ*)

(with κ = 0 the curve rises to 1/σ; with σ = κ = 0 it never saturates). σ(n)
and κ(n) are clamped to [0, SIGMA_MAX] and [0, ∞), and a fitted model holds
them constant above the largest PMU count it saw (``n_max``): the linear forms
would otherwise cross zero and promise unbounded capacity.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.optimize import least_squares

SIGMA_MAX = 0.999
UNBOUNDED = 1e12  # capacity (Mpps) reported when the curve never saturates


@dataclass(frozen=True)
class Usl:
    a_sigma: float
    b_sigma: float
    a_kappa: float
    b_kappa: float
    unit_mpps: float = 1.0
    # Largest PMU count the model was fitted on: beyond it σ and κ stay at
    # their values there (the linear forms would otherwise run to zero and
    # promise unbounded capacity). Below the fitted range they extrapolate,
    # which is conservative since σ and κ fall as n grows.
    n_max: float | None = None

    def _n(self, n) -> np.ndarray:
        n = np.asarray(n, dtype=float)
        return n if self.n_max is None else np.minimum(n, self.n_max)

    def sigma(self, n) -> np.ndarray:
        return np.clip(self.a_sigma * self._n(n) + self.b_sigma, 0.0, SIGMA_MAX)

    def kappa(self, n) -> np.ndarray:
        return np.clip(self.a_kappa * self._n(n) + self.b_kappa, 0.0, None)

    def throughput(self, load_mpps, n) -> np.ndarray:
        """X(λ; n) in Mpps for an offered load in Mpps."""
        lam = np.asarray(load_mpps, dtype=float) / self.unit_mpps
        s, k = self.sigma(n), self.kappa(n)
        return self.unit_mpps * lam / (1 + s * (lam - 1) + k * lam * (lam - 1))

    def peak(self, n) -> tuple[np.ndarray, np.ndarray]:
        """(λ*, C): the load at which throughput peaks and the peak, both Mpps."""
        s, k = np.broadcast_arrays(self.sigma(n), self.kappa(n))
        s, k = s.astype(float), k.astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = np.where(k > 0, np.sqrt((1 - s) / np.where(k > 0, k, 1.0)), np.inf)
            c = np.where(k > 0, lam / (2 * (1 - s) + (s - k) * lam), np.where(s > 0, 1 / np.where(s > 0, s, 1.0), np.inf))
        c = np.minimum(c * self.unit_mpps, UNBOUNDED)
        return lam * self.unit_mpps, c

    def capacity(self, n) -> np.ndarray:
        """C(n) = max over λ of X(λ; n), in Mpps."""
        return self.peak(n)[1]

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(d: dict, where: str = "usl") -> Usl:
        from synapse_vmt.errors import UserError

        need = {"a_sigma", "b_sigma", "a_kappa", "b_kappa"}
        if not isinstance(d, dict) or not need <= set(d) or not set(d) <= need | {"unit_mpps", "n_max"}:
            raise UserError(f"{where}: expected an object with a_sigma, b_sigma, a_kappa, b_kappa (and optional unit_mpps, n_max)")
        try:
            vals = {k: (None if v is None and k == "n_max" else float(v)) for k, v in d.items()}
        except (TypeError, ValueError):
            raise UserError(f"{where}: expected numbers") from None
        if vals.get("unit_mpps", 1.0) <= 0:
            raise UserError(f"{where}: expected unit_mpps > 0")
        return Usl(**vals)


@dataclass(frozen=True)
class Fit:
    """A fitted model and how well it fits its samples (throughput in Mpps)."""

    usl: Usl
    r2: float
    rmse_mpps: float
    samples: int
    pmu_counts: tuple[int, ...]


def fit(load_mpps, throughput_mpps, pmus, unit_mpps: float = 1.0) -> Fit:
    """Least-squares fit of the four USL parameters to (load, throughput, n) samples.

    σ and κ are parametrised by their values at the smallest and largest PMU
    count in the data (bounded to [0, SIGMA_MAX] and [0, ∞)), so the fitted
    lines are valid over the data's range; with one PMU count only, σ and κ
    are constants (a_σ = a_κ = 0)."""
    lam = np.asarray(load_mpps, dtype=float) / unit_mpps
    x = np.asarray(throughput_mpps, dtype=float) / unit_mpps
    n = np.asarray(pmus, dtype=float)
    if not (len(lam) == len(x) == len(n)) or len(lam) < 2:
        raise ValueError("need at least two (load, throughput, pmus) samples of equal length")
    lo, hi = float(n.min()), float(n.max())
    span = hi - lo
    t = (n - lo) / span if span > 0 else np.zeros_like(n)

    def unpack(p):
        s_lo, s_hi, k_lo, k_hi = p
        return s_lo + (s_hi - s_lo) * t, k_lo + (k_hi - k_lo) * t

    def resid(p):
        s, k = unpack(p)
        return lam / (1 + s * (lam - 1) + k * lam * (lam - 1)) - x

    # Start from a pure-contention curve whose ceiling 1/σ is the best throughput seen.
    s0 = min(max(1.0 / max(x.max(), 1e-9), 1e-6), 0.5)
    k0 = s0 / max(lam.max(), 1.0) * 0.1
    p0 = np.array([s0, s0, k0, k0])
    res = least_squares(
        resid, p0, bounds=([0, 0, 0, 0], [SIGMA_MAX, SIGMA_MAX, np.inf, np.inf]), x_scale="jac", method="trf"
    )
    s_lo, s_hi, k_lo, k_hi = res.x
    if span > 0:
        a_s, a_k = (s_hi - s_lo) / span, (k_hi - k_lo) / span
    else:
        a_s = a_k = 0.0
    usl = Usl(float(a_s), float(s_lo - a_s * lo), float(a_k), float(k_lo - a_k * lo), float(unit_mpps), hi)
    pred = usl.throughput(load_mpps, n)
    obs = np.asarray(throughput_mpps, dtype=float)
    ss_res = float(np.sum((obs - pred) ** 2))
    ss_tot = float(np.sum((obs - obs.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    return Fit(usl, r2, float(np.sqrt(ss_res / len(obs))), len(obs), tuple(sorted({int(v) for v in n})))

"""Fig. 10 (paper Appendix C): a VMT's throughput against offered load for 3, 4 and 5 PMUs, with the fitted USL.

Samples are per statistics window (10 µs): PHVs arrived (offered load) and
processed (throughput) by the table, in Mpps, from simulator runs at a range
of traffic levels for each PMU count; the first part of every run (flows
starting, caches cold) is discarded. One USL model with σ and κ linear in the
PMU count is fitted to all samples (:mod:`.usl`; the paper's printed eq. (5)
is garbled, this is the standard form), and its goodness of fit is reported
overall and per PMU count.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from synapse_vmt.errors import atomic_write
from synapse_vmt.report import save_png, write_json
from synapse_vmt.figures.simexp import Setup, SimFactory, calibrate, core_factory

PMU_COUNTS = [3, 4, 5]
FLOWS = [500, 1000, 2000, 3000, 4000, 5000, 6000, 8000, 12000, 16000]
QUICK_FLOWS = [2000, 4000, 8000]


def r2_rmse(obs: np.ndarray, pred: np.ndarray) -> tuple[float, float]:
    ss_res = float(np.sum((obs - pred) ** 2))
    ss_tot = float(np.sum((obs - obs.mean()) ** 2))
    return (1 - ss_res / ss_tot if ss_tot > 0 else float("nan")), float(np.sqrt(ss_res / max(len(obs), 1)))


def run(out: Path, quick: bool = False, seed: int = 1, factory: SimFactory = core_factory) -> dict:
    setup = Setup(seed=seed)
    flows = QUICK_FLOWS if quick else FLOWS
    duration, warmup = (700_000.0, 300_000.0) if quick else (1_500_000.0, 400_000.0)
    f, per_n = calibrate(factory, setup, PMU_COUNTS, flows, duration, warmup)
    u = f.usl
    per = {}
    rows = []
    for n, s in per_n.items():
        r2, rmse = r2_rmse(s.throughput_mpps, u.throughput(s.load_mpps, n))
        lam, cap = u.peak(n)
        per[str(n)] = {
            "samples": len(s),
            "r2": r2,
            "rmse_mpps": rmse,
            "sigma": float(u.sigma(n)),
            "kappa": float(u.kappa(n)),
            "capacity_mpps": float(cap),
            "peak_load_mpps": float(lam),
            "max_throughput_seen_mpps": float(s.throughput_mpps.max()) if len(s) else 0.0,
        }
        rows += [{"pmus": n, "load_mpps": a, "throughput_mpps": b} for a, b in zip(s.load_mpps, s.throughput_mpps)]
    summary = {
        "figure": "fig10",
        "model": "X(λ; n) = λ / (1 + σ(n)(λ − 1) + κ(n) λ(λ − 1)), σ(n) = a_sigma·n + b_sigma, κ(n) = a_kappa·n + b_kappa; λ, X in Mpps (unit_mpps)",
        "fit": {**u.to_json(), "r2": f.r2, "rmse_mpps": f.rmse_mpps, "samples": f.samples},
        "per_pmus": per,
        "pmu_counts": PMU_COUNTS,
        "flows": flows,
        "setup": {"block_size": setup.block_size, "rules": setup.rules, "window_ns": setup.window_ns, "duration_ns": duration, "warmup_ns": warmup},
        "seed": seed,
    }
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / "fig10.csv") as fh:
        w = csv.DictWriter(fh, ["pmus", "load_mpps", "throughput_mpps"])
        w.writeheader()
        w.writerows(rows)
    plot(per_n, u, summary, out / "fig10.png")
    write_json(out / "summary.json", summary)
    return summary


def plot(per_n, u, summary, path: Path) -> None:
    from synapse_vmt.report import pyplot

    plt = pyplot()

    fig, axes = plt.subplots(1, len(per_n), figsize=(4 * len(per_n), 3.4), sharey=True)
    top = max((float(s.load_mpps.max()) for s in per_n.values() if len(s)), default=1.0)
    grid = np.linspace(0, top * 1.05, 300)
    for ax, (n, s) in zip(np.atleast_1d(axes), per_n.items()):
        ax.scatter(s.load_mpps, s.throughput_mpps, s=6, alpha=0.4, label="windows (10 µs)")
        ax.plot(grid, u.throughput(grid, n), "r-", lw=1.5, label="USL fit")
        ax.set_title(f"({'abc'[list(per_n).index(n)]}) {n} PMUs, R² = {summary['per_pmus'][str(n)]['r2']:.3f}")
        ax.set_xlabel("offered load (Mpps)")
    np.atleast_1d(axes)[0].set_ylabel("throughput (Mpps)")
    np.atleast_1d(axes)[0].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    save_png(fig, path)

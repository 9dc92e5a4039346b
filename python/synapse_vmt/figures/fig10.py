"""Fig. 10 (paper Appendix C): a VMT's throughput against offered load for 3, 4 and 5 PMUs, with the fitted USL.

Samples are per statistics window (10 µs): PHVs arrived (offered load) and
processed (throughput) by the table, in Mpps, from simulator runs at a range
of traffic levels for each PMU count; the first part of every run (flows
starting, caches cold) is discarded. One USL model with σ and κ linear in the
PMU count is fitted to all samples (:mod:`.usl`; the paper's printed eq. (5)
is garbled, this is the standard form), and its goodness of fit is reported
overall and per PMU count. Every (PMUs, traffic level) runs for several
traffic seeds through the sweep machinery (:mod:`synapse_vmt.sweep`); the
plot shows each level's mean over the seeds with its 95 % t-interval, and the
interval of the capacity that each seed's own fit gives.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from synapse_vmt.errors import atomic_write
from synapse_vmt.figures.common import QUICK_SEEDS, SEEDS, mean_ci, seed_list, sweep_points
from synapse_vmt.figures.simexp import SimFactory, Setup, collect
from synapse_vmt.opt.counters import Samples, usl_samples
from synapse_vmt.opt.usl import fit

PMU_COUNTS = [3, 4, 5]
FLOWS = [500, 1000, 2000, 3000, 4000, 5000, 6000, 8000, 12000, 16000]
QUICK_FLOWS = [2000, 4000, 8000]


def r2_rmse(obs: np.ndarray, pred: np.ndarray) -> tuple[float, float]:
    ss_res = float(np.sum((obs - pred) ** 2))
    ss_tot = float(np.sum((obs - obs.mean()) ** 2))
    return (1 - ss_res / ss_tot if ss_tot > 0 else float("nan")), float(np.sqrt(ss_res / max(len(obs), 1)))


def sweep_samples(setup: Setup, flows: list[int], duration: float, warmup: float, seeds: list[int], out: Path,
                  workers: int | None = None, ray: str | None = None, quiet: bool = True) -> dict[int, dict[tuple[int, int], Samples]]:
    """Per seed and (PMUs, flows): the windows after the warm-up, run as a
    sweep (every core or Ray; resumable in ``out``). The same samples as
    :func:`.simexp.collect` gives in this process (a window's ``t_ns`` is its end)."""
    from synapse_vmt.sweep import _flatten, read_windows

    base = setup.config([], 0, duration)
    base.pop("seed")
    pts = [{"tables.0.pmus": list(range(n)), "traffic.flows": f} for n in PMU_COUNTS for f in flows]
    g, _ = sweep_points(pts, _flatten(base), seeds, out, workers, ray, quiet, windows=True)
    per: dict[int, dict[tuple[int, int], Samples]] = {s: {} for s in seeds}
    for p in g.points:
        w = read_windows(out, p).to_pydict()
        keep = np.asarray(w["t_ns"], float) > warmup
        cols = {k: np.asarray(v)[keep] for k, v in w.items() if k != "table_name"}
        per[p.seed][(len(p.overrides["tables.0.pmus"]), p.overrides["traffic.flows"])] = usl_samples(cols, setup.window_ns, 1)[0]
    return per


def run(out: Path, quick: bool = False, seed: int = 1, factory: SimFactory | None = None, seeds: int | None = None,
        workers: int | None = None, ray: str | None = None, quiet: bool = True) -> dict:
    """Fig. 10 over ``seeds`` seeds (default 5, 2 with ``quick``) from ``seed``
    on: the simulator through the sweep machinery, or ``factory`` (a test
    double) in this process. The seed is the traffic's; the rule set stays."""
    setup = Setup(seed=seed)
    flows = QUICK_FLOWS if quick else FLOWS
    duration, warmup = (700_000.0, 300_000.0) if quick else (1_500_000.0, 400_000.0)
    seeds_ = seed_list(seed, seeds or (QUICK_SEEDS if quick else SEEDS))
    if factory is None:
        per_seed = sweep_samples(setup, flows, duration, warmup, seeds_, out / "sweep", workers, ray, quiet)
    else:
        def double(s: int):
            return lambda cfg: factory({**cfg, "seed": s})

        per_seed = {s: {(n, f): collect(double(s), setup, n, f, duration, warmup) for n in PMU_COUNTS for f in flows}
                    for s in seeds_}
    per_n: dict[int, Samples] = {}
    for n in PMU_COUNTS:
        s = Samples.empty()
        for by in per_seed.values():
            for f in flows:
                s = s.extend(by[(n, f)])
        per_n[n] = s
    alls = Samples.empty()
    for s in per_n.values():
        alls = alls.extend(s)
    f = fit(alls.load_mpps, alls.throughput_mpps, alls.pmus)
    u = f.usl
    # The capacity each seed alone gives: its spread is the figure's uncertainty.
    cap_seed: dict[int, list[float]] = {n: [] for n in PMU_COUNTS}
    for by in per_seed.values():
        one = Samples.empty()
        for v in by.values():
            one = one.extend(v)
        fs = fit(one.load_mpps, one.throughput_mpps, one.pmus).usl
        for n in PMU_COUNTS:
            cap_seed[n].append(float(fs.peak(n)[1]))
    # Per (PMUs, flows): each seed's mean load and throughput over its windows.
    levels = []
    for n in PMU_COUNTS:
        for fl in flows:
            ld = [float(by[(n, fl)].load_mpps.mean()) for by in per_seed.values() if len(by[(n, fl)])]
            th = [float(by[(n, fl)].throughput_mpps.mean()) for by in per_seed.values() if len(by[(n, fl)])]
            (lm, llo, lhi), (tm, tlo, thi) = mean_ci(ld), mean_ci(th)
            levels.append({"pmus": n, "flows": fl, "seeds": len(ld), "load_mpps": lm, "load_mpps_lo": llo,
                           "load_mpps_hi": lhi, "throughput_mpps": tm, "throughput_mpps_lo": tlo,
                           "throughput_mpps_hi": thi})
    per = {}
    rows = []
    for n, s in per_n.items():
        r2, rmse = r2_rmse(s.throughput_mpps, u.throughput(s.load_mpps, n))
        lam, cap = u.peak(n)
        cm, clo, chi = mean_ci(cap_seed[n])
        per[str(n)] = {
            "samples": len(s),
            "r2": r2,
            "rmse_mpps": rmse,
            "sigma": float(u.sigma(n)),
            "kappa": float(u.kappa(n)),
            "capacity_mpps": float(cap),
            "peak_load_mpps": float(lam),
            "max_throughput_seen_mpps": float(s.throughput_mpps.max()) if len(s) else 0.0,
            "capacity_per_seed_mpps": {"mean": cm, "lo": clo, "hi": chi, "values": cap_seed[n]},
        }
    for sd, by in per_seed.items():
        for (n, fl), s in by.items():
            rows += [{"seed": sd, "pmus": n, "flows": fl, "load_mpps": a, "throughput_mpps": b}
                     for a, b in zip(s.load_mpps, s.throughput_mpps)]
    summary = {
        "figure": "fig10",
        "model": "X(λ; n) = λ / (1 + σ(n)(λ − 1) + κ(n) λ(λ − 1)), σ(n) = a_sigma·n + b_sigma, κ(n) = a_kappa·n + b_kappa; λ, X in Mpps (unit_mpps)",
        "fit": {**u.to_json(), "r2": f.r2, "rmse_mpps": f.rmse_mpps, "samples": f.samples},
        "per_pmus": per,
        "levels": levels,
        "interval": "95 % Student t over the seeds",
        "pmu_counts": PMU_COUNTS,
        "flows": flows,
        "setup": {"block_size": setup.block_size, "rules": setup.rules, "window_ns": setup.window_ns, "duration_ns": duration, "warmup_ns": warmup},
        "seed": seed,
        "seeds": seeds_,
    }
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / "fig10.csv") as fh:
        w = csv.DictWriter(fh, ["seed", "pmus", "flows", "load_mpps", "throughput_mpps"])
        w.writeheader()
        w.writerows(rows)
    plot(per_n, u, summary, out / "fig10.png")
    from synapse_vmt.report import write_json

    write_json(out / "summary.json", summary)
    return summary


def plot(per_n, u, summary, path: Path) -> None:
    from synapse_vmt.report import pyplot, save_png

    plt = pyplot()

    fig, axes = plt.subplots(1, len(per_n), figsize=(4 * len(per_n), 3.4), sharey=True)
    top = max((float(s.load_mpps.max()) for s in per_n.values() if len(s)), default=1.0)
    grid = np.linspace(0, top * 1.05, 300)
    for ax, (n, s) in zip(np.atleast_1d(axes), per_n.items()):
        ax.scatter(s.load_mpps, s.throughput_mpps, s=6, alpha=0.3, label="windows (10 µs)")
        lv = [x for x in summary["levels"] if x["pmus"] == n and x["seeds"]]
        ax.errorbar([x["load_mpps"] for x in lv], [x["throughput_mpps"] for x in lv],
                    xerr=[[x["load_mpps"] - x["load_mpps_lo"] for x in lv], [x["load_mpps_hi"] - x["load_mpps"] for x in lv]],
                    yerr=[[x["throughput_mpps"] - x["throughput_mpps_lo"] for x in lv],
                          [x["throughput_mpps_hi"] - x["throughput_mpps"] for x in lv]],
                    fmt="ks", ms=4, capsize=3, lw=1, label=f"mean of {len(summary['seeds'])} seeds, 95 %")
        ax.plot(grid, u.throughput(grid, n), "r-", lw=1.5, label="USL fit")
        c = summary["per_pmus"][str(n)]["capacity_per_seed_mpps"]
        ax.axhspan(c["lo"], c["hi"], color="r", alpha=0.1, label="capacity, 95 % over seeds")
        ax.set_title(f"({'abc'[list(per_n).index(n)]}) {n} PMUs, R² = {summary['per_pmus'][str(n)]['r2']:.3f}")
        ax.set_xlabel("offered load (Mpps)")
    np.atleast_1d(axes)[0].set_ylabel("throughput (Mpps)")
    np.atleast_1d(axes)[0].legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    save_png(fig, path)

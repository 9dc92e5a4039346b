"""Fig. 9 (paper Appendix B): runtime-OPT solve time against CFG size.

The paper times Gurobi on the CFGs of NetHCF.p4, UPF.p4 and switch.p4 (a few
milliseconds). Here: the UPF program's CFG (10 tables, from p4c's BMv2 JSON,
shipped as ``synapse_vmt/data/upf-cfg.json``) and synthetic CFGs shaped like
a large switch pipeline (:mod:`.synthetic`) from 5 to 200 tables, each with
N = 2 PMUs per table to share and a random USL curve per table; solved by the
fast solver and the HiGHS MILP, the median wall time of several solves per
size. The solvers' answers are checked against each other on every instance.
"""

from __future__ import annotations

import csv
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from synapse_vmt.errors import atomic_write
from synapse_vmt.report import save_png, write_json
from synapse_vmt.opt import fast, milp
from synapse_vmt.opt.problem import Problem
from synapse_vmt.opt.synthetic import random_usl, switch_like_problem

SIZES = [5, 10, 20, 50, 100, 150, 200]
QUICK_SIZES = [5, 10]
PMUS_PER_TABLE = 2
SOLVERS = {"fast": fast.solve, "milp": milp.solve}


def upf_problem(rng: np.random.Generator) -> Problem:
    from synapse_vmt import data
    from synapse_vmt.p4.cfg import load_cfg

    cfg = load_cfg(data.path("upf-cfg.json"))
    e, P = cfg.routing()
    N = PMUS_PER_TABLE * len(cfg.tables)
    cap = np.array([random_usl(rng).capacity(np.arange(N + 1)) for _ in cfg.tables])
    return Problem(cfg.names, e, P, cap, N, 1)


def time_solver(solve, problem: Problem, repeats: int) -> tuple[list[float], object]:
    """Wall times (ms) of ``repeats`` solves, each on a fresh copy: the visit
    ratios are part of the solve; validating the input (the copy) is not."""
    times, answer = [], None
    copies = [replace(problem, _visits=None) for _ in range(repeats)]
    for p in copies:
        t0 = time.perf_counter()
        answer = solve(p)
        times.append((time.perf_counter() - t0) * 1e3)
    return times, answer


def run(out: Path, quick: bool = False, seed: int = 1) -> dict:
    sizes = QUICK_SIZES if quick else SIZES
    reps = {"fast": 5 if quick else 50, "milp": 1 if quick else 3}
    rng = np.random.default_rng(seed)
    cases: list[tuple[str, Problem]] = [("upf", upf_problem(rng))]
    cases += [("switch-like", switch_like_problem(T, PMUS_PER_TABLE * T, rng)) for T in sizes]
    rows, med, checks = [], {s: {} for s in SOLVERS}, []
    upf = {}
    for kind, prob in cases:
        T = len(prob.names)
        if kind == "upf":
            upf_tables = T
        answers = {}
        for name, solve in SOLVERS.items():
            times, answers[name] = time_solver(solve, prob, reps[name])
            m = float(np.median(times))
            if kind == "upf":
                upf[name] = m
            else:
                med[name][str(T)] = m
            rows += [{"cfg": kind, "tables": T, "solver": name, "ms": t} for t in times]
        a, b = answers["fast"], answers["milp"]
        agree = abs(a.throughput_mpps - b.throughput_mpps) <= 1e-6 * max(1.0, b.throughput_mpps) and a.used == b.used
        checks.append({"cfg": kind, "tables": T, "agree": bool(agree),
                       "throughput_mpps": {"fast": float(a.throughput_mpps), "milp": float(b.throughput_mpps)},
                       "pmus_used": {"fast": int(a.used), "milp": int(b.used)}})
    summary = {
        "figure": "fig9",
        "what": "median solve time (ms) per solver and CFG size (tables); switch-like synthetic CFGs, N = 2 PMUs per table",
        "sizes": sizes,
        "median_ms": med,
        "upf": {"tables": upf_tables, "median_ms": upf},
        "repeats": reps,
        "seed": seed,
        "solvers_agree": all(c["agree"] for c in checks),
        "checks": checks,
    }
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / "fig9.csv") as f:
        w = csv.DictWriter(f, ["cfg", "tables", "solver", "ms"])
        w.writeheader()
        w.writerows(rows)
    plot(summary, out / "fig9.png")
    write_json(out / "summary.json", summary)
    bad = [c for c in checks if not c["agree"]]
    if bad:
        raise RuntimeError(f"solvers disagree on {len(bad)} instance(s), e.g. {bad[0]} (see {out / 'summary.json'})")
    return summary


def plot(summary: dict, path: Path) -> None:
    from synapse_vmt.report import pyplot

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for name, style in (("fast", "o-"), ("milp", "s--")):
        xs = [int(k) for k in summary["median_ms"][name]]
        ax.plot(xs, list(summary["median_ms"][name].values()), style, label=f"{name} (switch-like)")
        ax.plot([summary["upf"]["tables"]], [summary["upf"]["median_ms"][name]], "k*", ms=10)
    ax.annotate("UPF.p4", (summary["upf"]["tables"], summary["upf"]["median_ms"]["milp"]), textcoords="offset points", xytext=(6, 4))
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax.set_yscale("log")
    ax.set_xlabel("CFG size (tables)")
    ax.set_ylabel("median solve time (ms)")
    ax.set_title("Runtime OPT execution time vs CFG size")
    ax.legend()
    fig.tight_layout()
    save_png(fig, path)

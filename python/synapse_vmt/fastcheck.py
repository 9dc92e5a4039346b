"""The fast mode beside the exact engine: both run on one scenario, and each
summary figure's error and whether the fast interval holds the exact value
(``synapse bench fast``, ``tests/test_fast_mode.py``, docs/fast-mode.md).

The bounds the fast mode is held to (:data:`BOUNDS`) are per figure: hit
rate absolute, the others relative to the exact value. On an overloaded
run (the ELU falls behind: drops, a backlog; :func:`overloaded`) the fast
run says so itself, models the throughput and drops from the share of the
misses its ELU windows serve, within the wider :data:`OVERLOAD_BOUNDS`, and
gives its latencies only as what is certain.
"""

from __future__ import annotations

import time
from typing import Any

from synapse_vmt.sim import Simulation, finish

#: (figure, kind, bound): |fast - exact| <= bound (``abs``) or
#: <= bound * |exact| (``rel``).
BOUNDS = (
    ("hit_rate", "abs", 0.01),
    ("throughput_mpps", "rel", 0.03),
    ("mean_latency_ns", "rel", 0.10),
    ("p99_latency_ns", "rel", 0.25),
    ("hbm_gbps", "rel", 0.10),
)


#: The bounds on an overloaded run (the model's error on the validation
#: suite's overloaded points, docs/fast-mode.md): what the fast mode models
#: there. Its latencies are not (their intervals: 0 to the drain's end).
OVERLOAD_BOUNDS = (
    ("hit_rate", "abs", 0.03),
    ("throughput_mpps", "rel", 0.20),
    ("hbm_gbps", "rel", 0.20),
)

#: The same on a P4 program (the UPF's overloaded points, several tables
#: sharing the ELU: their served shares differ more from the exact run's).
PROGRAM_OVERLOAD_BOUNDS = (
    ("hit_rate", "abs", 0.12),
    ("throughput_mpps", "rel", 0.35),
)

#: Differences too small to judge relatively: |fast - exact| at most this
#: counts as within the bound (a table reading under 1 MB/s of HBM).
ABS_FLOOR = {"hbm_gbps": 0.001}


def run_exact(scn, clock=time.perf_counter, whole: bool = False) -> tuple[dict, float]:
    """The exact run's summary (over the duration, then drained) and its
    time by ``clock`` (wall time by default; ``time.thread_time`` counts
    the CPU time of this thread, which both engines run on, unaffected by
    other jobs taking the core). ``whole``: the duration in one call, as the
    fast mode runs (by default in :meth:`Simulation.run`'s 100 chunks, for a
    progress bar: a tenth more CPU on the built-in scenario, not the
    engine's). The summary is the same either way."""
    sim = Simulation(scn)
    t0 = clock()
    summ = sim.run(chunk_ns=sim.duration_ns if whole else None)
    took = clock() - t0
    summ["invariants"] = finish(sim)
    return summ, took


def run_fast(scn, clock=time.perf_counter) -> tuple[dict, float]:
    """The fast run's summary and its time by ``clock`` (as :func:`run_exact`)."""
    sim = Simulation(scn)
    t0 = clock()
    summ = sim.run_fast()
    return summ, clock() - t0


#: A program run's settings :func:`program_pair` takes (``simrun.run_program``'s).
PROGRAM_SETTINGS = ("pmus", "block_size", "window_ns", "seed", "overrides")


def program_pair(kw: dict, fast: dict | None = None, clock=time.perf_counter, pr=None) -> tuple[dict, float, dict, float]:
    """A program run (``simrun.load_scenario``'s keywords, generated
    traffic) in both engines on the same prepared program: the exact
    summary over the duration (then drained: ``invariants``) and its time,
    the fast summary and its time (each by ``clock``, as :func:`run_exact`).
    ``pr``: the program already prepared (``simrun.prepare``) from ``kw``."""
    from synapse_vmt.p4 import simrun

    pr = pr or simrun.prepare(kw["program"], kw.get("entries_file"), traffic=kw["traffic"],
                        duration_ns=kw.get("duration_ns"), seed=kw.get("seed", 1))
    opts = {k: kw[k] for k in PROGRAM_SETTINGS if k in kw and k != "pmus"}
    pmus = int(kw.get("pmus", 16))
    sim = simrun.build_sim(pr, simrun.even_split(pr.routes.tables, pmus), pmus, **opts)
    t0 = clock()
    sim.run_until(pr.duration_ns)
    took = clock() - t0
    exact = simrun.program_summary(pr, sim)
    exact["invariants"] = finish(sim)
    t0 = clock()
    fast_s, _ = simrun.fast_program(pr, pmus, fast=fast, **opts)
    return exact, took, fast_s, clock() - t0


def compare(exact: dict, fast: dict, bounds=BOUNDS) -> list[dict[str, Any]]:
    """A row per (table, figure of ``bounds``): exact, fast, its interval,
    the error (absolute for the hit rate, relative otherwise), the bound,
    whether the error is within it and whether the interval holds the exact
    value."""
    rows = []
    for name, e in exact["tables"].items():
        if "hit_rate" not in e:
            continue  # a program's table the simulator leaves out
        f = fast["tables"][name]
        for k, kind, bound in bounds:
            x, y = float(e[k]), float(f[k])
            lo, hi = f["interval"][k]
            err = y - x if kind == "abs" else ((y - x) / x if x else 0.0)
            rows.append({"table": name, "figure": k, "exact": x, "fast": y, "lo": lo, "hi": hi,
                         "error": err, "kind": kind, "bound": bound,
                         "within": abs(err) <= bound or abs(y - x) <= ABS_FLOOR.get(k, 0.0),
                         "covered": lo <= x <= hi})
    return rows


def overloaded(exact: dict) -> bool:
    """Whether the exact run is overloaded: it dropped more than 1 % of its
    keys, or fell more than 3 % behind its offered load."""
    for t in exact["tables"].values():
        if "drops" not in t:
            continue
        if t["drops"] > 0.01 * max(t["keys"], 1) or t["throughput_mpps"] < 0.97 * t["offered_mpps"]:
            return True
    return False

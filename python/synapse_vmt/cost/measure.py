"""Measure our software tables and fit the CPU model (``synapse reproduce cpu-model``).

For each table kind the seed models (exact, lpm, ternary), build a table of
``n`` entries with one of our structures (:class:`synapse_vmt._core.CostTable`:
the exact-match hash table, the trie, the linear search; the decision tree is
measured beside the linear search for comparison), look up keys that hit it,
and convert the thread's CPU time to cycles per lookup with the clock in
``params.toml``. CPU time, not wall time, so other processes on the machine do
not inflate it; each point is the median of ``rounds`` runs, each at least
``min_s`` seconds long.

The fits are the seed's forms (:mod:`.cpu`) with their redundant scales fixed
(``q = 1`` in ``p ln(q n) + r``, ``t = 1`` in ``s / (t n + u) + v``); the
error reported is the RMS relative error of the curve at the measured points.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import curve_fit

from synapse_vmt import _core
from synapse_vmt.cost import cpu
from synapse_vmt.cost.params import Params

#: series name -> (table kind, structure, largest n measured)
SERIES = {
    "exact": ("exact", "exact", 10_000_000),
    "lpm": ("lpm", "trie", 1_000_000),
    "ternary": ("ternary", "linear", 100_000),
    "ternary-dtree": ("ternary", "dtree", 100_000),
}
#: Trie memory budget: a point whose trie would exceed it is skipped (listed).
TRIE_BUDGET = 1 << 30


def grid(lo: int = 10, hi: int = 10_000_000) -> list[int]:
    """1-2-5 steps per decade from ``lo`` to ``hi``."""
    out, d = [], 1
    while d <= hi:
        out += [m * d for m in (1, 2, 5) if lo <= m * d <= hi]
        d *= 10
    return out


@dataclass
class Point:
    series: str
    n: int
    cycles: float
    bytes: int
    build_s: float


def time_lookups(table, clock_hz: float, min_s: float, rounds: int) -> float:
    """Median cycles per lookup over ``rounds`` runs of at least ``min_s`` CPU seconds."""
    n = 1024
    while True:
        t0 = time.thread_time()
        table.run(n)
        dt = time.thread_time() - t0
        if dt >= min_s:
            break
        n = int(n * min(max(2 * min_s / max(dt, 1e-6), 2.0), 64.0))
    times = [dt]
    for _ in range(rounds - 1):
        t0 = time.thread_time()
        table.run(n)
        times.append(time.thread_time() - t0)
    return float(np.median(times)) * clock_hz / n


def measure_series(series: str, ns: list[int], p: Params, seed: int = 1, min_s: float = 0.05,
                   rounds: int = 3, on_point=None) -> tuple[list[Point], list[int]]:
    """Measures one series at every ``n``; returns (points, skipped n)."""
    kind, algo, _ = SERIES[series]
    cfg = {"trie.max_bytes": str(TRIE_BUDGET)} if algo == "trie" else None
    points, skipped = [], []
    for n in ns:
        t0 = time.perf_counter()
        try:
            table = _core.CostTable(kind, algo, n, seed=seed, config=cfg)
        except MemoryError:
            skipped.append(n)
            continue
        build_s = time.perf_counter() - t0
        c = time_lookups(table, p.cpu.clock_hz.value, min_s, rounds)
        points.append(Point(series, n, c, table.bytes, build_s))
        del table
        if on_point:
            on_point(points[-1])
    return points, skipped


def _rms_rel(pred: np.ndarray, meas: np.ndarray) -> float:
    return float(np.sqrt(np.mean(((pred - meas) / meas) ** 2)))


def fit_series(series: str, points: list[Point], p: Params) -> dict:
    """Fits the seed's form of ``series`` to its points: the parameters, the
    RMS relative error, and which points each piece used."""
    n = np.array([q.n for q in points], float)
    c = np.array([q.cycles for q in points], float)
    out: dict = {"points": len(points)}
    if series in ("lpm", "ternary-dtree") or series == "exact":
        in_cache = np.array([q.bytes for q in points]) < p.cpu.l3_bytes.value if series == "exact" else np.ones(len(n), bool)
        if in_cache.sum() >= 2:
            (pp, rr), _ = curve_fit(lambda x, a, b: cpu.log_form(x, a, 1.0, b), n[in_cache], c[in_cache], p0=(5.0, 20.0),
                                     sigma=c[in_cache])
            out.update(p=float(pp), q=1.0, r=float(rr))
            out["log_error"] = _rms_rel(cpu.log_form(n[in_cache], pp, 1.0, rr), c[in_cache])
            out["log_points"] = int(in_cache.sum())
        if series == "exact":
            beyond = ~in_cache
            out["hyperbolic_points"] = int(beyond.sum())
            if beyond.sum() >= 3:
                # s < 0 (the cost rises towards v), u >= 0, and u, v bounded so the
                # hyperbola cannot flatten into a line that extrapolates anywhere; start from the
                # curve through the first and last points beyond the cache.
                nb, cb = n[beyond], c[beyond]
                v0 = float(cb.max()) * 1.2
                u0 = float(nb.min())
                s0 = (float(cb[0]) - v0) * (nb[0] + u0)
                try:
                    (s, u, v), _ = curve_fit(lambda x, s, u, v: cpu.hyperbolic_form(x, s, 1.0, u, v), nb, cb,
                                             p0=(s0, u0, v0), sigma=cb, bounds=([-np.inf, 0.0, 0.0], [0.0, 10 * nb.max(), 10 * cb.max()]),
                                             maxfev=20000)
                    out.update(s=float(s), t=1.0, u=float(u), v=float(v))
                    out["hyperbolic_error"] = _rms_rel(cpu.hyperbolic_form(nb, s, 1.0, u, v), cb)
                except (RuntimeError, ValueError) as e:  # no convergence: say so, keep the file's values
                    out["hyperbolic_error"] = None
                    out["hyperbolic_note"] = f"fit did not converge: {e}"
            pred = cpu.exact_cycles(n, {**p.cpu.fit.exact.values(), **{k: out[k] for k in "pqrstuv" if k in out}}, in_cache)
            out["error"] = _rms_rel(pred, c)
        else:
            out["error"] = out.get("log_error")
    else:  # ternary: the linear search
        (a, b), _ = curve_fit(cpu.linear_form, n, c, p0=(1.0, 10.0), sigma=c)
        out.update(a=float(a), b=float(b), error=_rms_rel(cpu.linear_form(n, a, b), c))
    return out

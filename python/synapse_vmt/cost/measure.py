"""Measure our software tables and fit the CPU model (``synapse reproduce cpu-model``).

For each table kind the seed models (exact, lpm, ternary), build a table of
``n`` entries with one of our structures (:class:`synapse_vmt._core.CostTable`:
the exact-match hash table, the trie, the linear search; the decision tree is
measured beside the linear search for comparison), look up keys that hit it,
and convert the thread's CPU time to cycles per lookup with the measured
clock. CPU time, not wall time, so other processes on the machine do
not inflate it; each point is the median of ``rounds`` runs, each at least
``min_s`` seconds long.

CPU seconds become cycles with the clock measured on the host
(:func:`synapse_vmt.cost.machine.measure_clock`), and the per-packet base is
measured beside the tables (:func:`measure_base`). The fits are the seed's
forms (:mod:`.cpu`) with their redundant scales fixed (``q = 1`` in
``p ln(q n) + r``, ``t = 1`` in ``s / (t n + u)``); every fitted piece reports
its RMS relative error, R² and leave-one-out error.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.optimize import OptimizeWarning, curve_fit

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
    """Median cycles per call of ``table.run`` (a lookup, or a packet) over
    ``rounds`` runs of at least ``min_s`` CPU seconds each."""
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


def measure_base(clock_hz: float, min_s: float = 0.05, rounds: int = 3, seed: int = 1) -> float:
    """Cycles per packet of the work besides table lookups (``_core.PacketBase``:
    parse a 64-byte frame's headers into the 5-tuple, hash it, write the frame out)."""
    return time_lookups(_core.PacketBase(4096, seed), clock_hz, min_s, rounds)


def measure_series(series: str, ns: list[int], p: Params, seed: int = 1, min_s: float = 0.05,
                   rounds: int = 3, on_point=None, clock_hz: float | None = None) -> tuple[list[Point], list[int]]:
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
        c = time_lookups(table, clock_hz or p.cpu.clock_hz.value, min_s, rounds)
        points.append(Point(series, n, c, table.bytes, build_s))
        del table
        if on_point:
            on_point(points[-1])
    return points, skipped


def _rms_rel(pred: np.ndarray, meas: np.ndarray) -> float:
    return float(np.sqrt(np.mean(((pred - meas) / meas) ** 2)))


def _r2(pred: np.ndarray, meas: np.ndarray) -> float:
    """R² of ``pred`` against ``meas`` (1 - SS_res / SS_tot); NaN with fewer than 3 points."""
    if len(meas) < 3:
        return float("nan")
    ss_tot = float(np.sum((meas - meas.mean()) ** 2))
    return 1.0 - float(np.sum((meas - pred) ** 2)) / ss_tot if ss_tot > 0 else float("nan")


def quality(fit, x: np.ndarray, y: np.ndarray, prefix: str = "") -> dict:
    """How well a form fits: ``fit(x, y) -> predict`` (a function of n), its
    RMS relative error and R² on the points, and its leave-one-out RMS
    relative error (each point predicted by the form fitted without it: the
    error to expect on a point not measured). NaN where a fit fails."""
    pred = fit(x, y)(x)
    loo = []
    if len(x) >= 3:
        for i in range(len(x)):
            keep = np.arange(len(x)) != i
            try:
                loo.append(float(fit(x[keep], y[keep])(x[i:i + 1])[0]))
            except (RuntimeError, ValueError):
                loo.append(float("nan"))
    loo_err = _rms_rel(np.array(loo), y) if len(loo) else float("nan")
    return {f"{prefix}error": _rms_rel(pred, y), f"{prefix}r2": _r2(pred, y), f"{prefix}loo_error": loo_err,
            f"{prefix}points": int(len(x))}


def _fit_log(x: np.ndarray, y: np.ndarray):
    (pp, rr), _ = curve_fit(lambda n, a, b: cpu.log_form(n, a, 1.0, b), x, y, p0=(5.0, 20.0), sigma=y)
    return pp, rr


def _fit_beyond(x: np.ndarray, y: np.ndarray, nb: float, at: float):
    """s, u of the piece beyond L3 that starts at ``at`` cycles at ``nb`` entries:
    ``at + s/(n+u) - s/(nb+u)``, s < 0 (the cost rises with n), u >= 0."""
    def form(n, s, u):
        return at + s / (n + u) - s / (nb + u)
    u0 = float(x.min())
    s0 = -(float(y.max()) - at) * (nb + u0) * 2.0
    with warnings.catch_warnings():  # two points determine two parameters: no covariance, as expected
        warnings.simplefilter("ignore", OptimizeWarning)
        (s, u), _ = curve_fit(form, x, y, p0=(min(s0, -1.0), u0), sigma=y,
                              bounds=([-np.inf, 0.0], [0.0, 10 * float(x.max())]), maxfev=20000)
    return s, u


def fit_series(series: str, points: list[Point], p: Params) -> dict:
    """Fits the seed's form of ``series`` to its points: the parameters and,
    per fitted piece, its RMS relative error, R² and leave-one-out error
    (:func:`quality`). For exact tables the piece beyond L3 starts where the
    log piece ends (at ``boundary_n``, the entries at which the measured
    footprint reaches L3)."""
    n = np.array([q.n for q in points], float)
    c = np.array([q.cycles for q in points], float)
    out: dict = {"points": len(points)}
    if series == "ternary":  # the linear search
        (a, b), _ = curve_fit(cpu.linear_form, n, c, p0=(1.0, 10.0), sigma=c)
        out.update(a=float(a), b=float(b))

        def lin(x, y):
            (a_, b_), _ = curve_fit(cpu.linear_form, x, y, p0=(1.0, 10.0), sigma=y)
            return lambda m: cpu.linear_form(m, a_, b_)

        out.update(quality(lin, n, c))
        return out
    in_cache = np.ones(len(n), bool)
    if series == "exact":
        nbytes = np.array([q.bytes for q in points], float)
        in_cache = nbytes < p.cpu.l3_bytes.value
        out["boundary_n"] = float(p.cpu.l3_bytes.value / np.median(nbytes / n))

    def log_fit(x, y):
        a_, b_ = _fit_log(x, y)
        return lambda m: cpu.log_form(m, a_, 1.0, b_)

    if in_cache.sum() >= 2:
        pp, rr = _fit_log(n[in_cache], c[in_cache])
        out.update(p=float(pp), q=1.0, r=float(rr))
        out.update(quality(log_fit, n[in_cache], c[in_cache], "log_" if series == "exact" else ""))
    if series != "exact":
        return out
    beyond = ~in_cache
    out["hyperbolic_points"] = int(beyond.sum())
    if beyond.sum() >= 2 and "p" in out:  # two parameters: two points determine them (no leave-one-out then)
        nb = out["boundary_n"]
        at = float(cpu.log_form(nb, out["p"], 1.0, out["r"]))

        def beyond_fit(x, y):
            s_, u_ = _fit_beyond(x, y, nb, at)
            return lambda m: at + s_ / (m + u_) - s_ / (nb + u_)

        try:
            s, u = _fit_beyond(n[beyond], c[beyond], nb, at)
            out.update(s=float(s), t=1.0, u=float(u))
            out.update(quality(beyond_fit, n[beyond], c[beyond], "hyperbolic_"))
        except (RuntimeError, ValueError) as e:  # no convergence: say so, keep the file's values
            out["hyperbolic_error"] = None
            out["hyperbolic_note"] = f"fit did not converge: {e}"
    if "p" in out:
        f = {**p.cpu.fit.exact.values(), **{k: out[k] for k in "pqrstu" if k in out}}
        pred = cpu.exact_cycles(n, f, out["boundary_n"])
        out["error"], out["r2"] = _rms_rel(pred, c), _r2(pred, c)
    return out

"""The static oracle, built independently of any controller (paper §6, Fig. 8:
"an oracle provisions the needed number of entries and keeps them fixed").

The baseline that ``synapse reproduce fig8`` and ``reproduce upf`` compare the
closed loop with: the cheapest fixed allocation of PMUs that carries the
traffic's peak. It uses nothing the controller under test measured or learnt:

1. **The true offered load** per table and control period, from the traffic
   model itself (the arrival times the generator draws for the run's seed,
   and the route, i.e. the tables, each packet visits): :func:`offered`.
2. **Per-table sweeps** with the exact simulator: the run's own traffic with
   every table held at ``k`` PMUs, for ``k = 1..K`` (a table's cache sees
   only its own keys, so one run gives every table's point at ``k``; the
   pool is enlarged for the sweep when ``k`` x tables exceeds it). Each run
   gives each table's miss ratio per period at ``k`` PMUs, and whether the
   run kept up with its load (:func:`kept_up`).
3. **The cheapest split meeting the peak**, solved with HiGHS
   (:func:`cheapest_split`): one count per table, at most the pool, such that
   in every period the misses the split sends to the shared ELU (true offered
   load x the swept miss ratio, summed over tables) stay within a bound;
   fewest PMUs, then least peak ELU load.
4. **Checked by simulation**: every split runs on the exact simulator. The
   ELU's bound is bracketed by runs (the highest predicted load of a run
   that kept up, the lowest one a run fell behind at) and bisected, a split
   solved and simulated each round; then, from the cheapest split that kept
   up, one PMU fewer at a time while a run still keeps up. If no split of the
   pool has kept up, the split with the least predicted peak ELU load is
   simulated, and from the best run one PMU is added (or, with the pool used
   up, moved) where the model predicts the most relief, while that carries
   more.

The oracle is the cheapest allocation of the pool whose run kept up; when
none did, the run that carried the most (``carries_peak = False``). A single
table (Fig. 8) needs no model: every static allocation is one of the sweep's
runs, and the oracle is the fewest PMUs whose run kept up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import highspy
import numpy as np

from synapse_vmt.opt.controller import checked_so_far, concat

#: A run keeps up when it drops nothing and, at its end, at least this share
#: of its PHVs has left the pipeline (the rest in flight). The PHV FIFOs are
#: finite, so a load the tables do not carry ends in drops; a backlog that
#: has not reached them yet shows as PHVs in flight.
KEEP_UP = 0.99


@dataclass
class Run:
    """A static run's counts per control period (rows) and table (columns)."""

    alloc: np.ndarray  # PMUs per table
    lookups: np.ndarray
    misses: np.ndarray
    arrived: np.ndarray
    processed: np.ndarray
    drops: np.ndarray
    exits: np.ndarray  # per period: PHVs leaving the pipeline
    period_ns: float
    created: int = 0  # PHVs that entered the pipeline over the run
    lat_sum: np.ndarray | None = None  # per period and table: mean per-key latency x lookups (ns)

    @property
    def mean_latency_ns(self) -> float:
        """Mean per-key match latency over the run, all tables."""
        n = float(self.lookups.sum())
        return float(self.lat_sum.sum()) / n if self.lat_sum is not None and n > 0 else float("nan")

    @property
    def throughput_mpps(self) -> float:
        """PHVs leaving the pipeline per second, over the run."""
        return float(self.exits.sum()) * 1e3 / (len(self.exits) * self.period_ns)

    @property
    def miss_ratio(self) -> np.ndarray:
        return np.where(self.lookups > 0, self.misses / np.maximum(self.lookups, 1.0), 0.0)

    @property
    def behind(self) -> np.ndarray:
        """Per period: some table dropped PHVs."""
        return (self.drops > 0).any(axis=1)


def kept_up(run: Run) -> bool:
    return bool(not run.behind.any() and run.exits.sum() >= KEEP_UP * run.created)


def period_counts(w: dict, e: dict, T: int, period_ns: float, periods: int, alloc) -> Run:
    """Per-period, per-table sums of the window counters of a whole run."""
    t = np.asarray(w["t_ns"], dtype=float)
    k = np.clip(np.floor((t - 1e-6) / period_ns).astype(np.int64), 0, periods - 1)
    tab = np.asarray(w["table"], dtype=np.int64)

    def total(col: str) -> np.ndarray:
        out = np.zeros((periods, T))
        if col in w:
            np.add.at(out, (k, tab), np.asarray(w[col], dtype=float))
        return out

    hits, misses = total("hits"), total("misses")
    lat = np.zeros((periods, T))
    if "lat_mean_ns" in w:
        np.add.at(lat, (k, tab), np.nan_to_num(np.asarray(w["lat_mean_ns"], dtype=float))
                  * (np.asarray(w["hits"], dtype=float) + np.asarray(w["misses"], dtype=float)))
    out = np.asarray(e["dst"]) < 0
    ke = np.clip(np.floor((np.asarray(e["t_ns"], dtype=float)[out] - 1e-6) / period_ns).astype(np.int64), 0, periods - 1)
    exits = np.bincount(ke, weights=np.asarray(e["count"], dtype=float)[out], minlength=periods)
    return Run(np.asarray(alloc, dtype=np.int64), hits + misses, misses, total("arrived"), total("processed"),
               total("drops"), exits, period_ns, lat_sum=lat)


def run_static(sim, T: int, period_ns: float, duration_ns: float, alloc) -> Run:
    """Runs ``sim`` (a static allocation) to ``duration_ns``, a period at a
    time; the simulator's invariants must hold."""
    periods = int(round(duration_ns / period_ns))
    ws, es = [], []
    for p in range(periods):
        sim.run_until((p + 1) * period_ns)
        ws.append(sim.windows())
        es.append(sim.edges())
    inv = checked_so_far(sim, f"static oracle, run of {list(alloc)} PMUs")
    r = period_counts(concat(ws), concat(es), T, period_ns, periods, alloc)
    r.created = int(inv["created"])
    return r


def offered(t_ps: np.ndarray, visits: np.ndarray, period_ns: float, duration_ns: float) -> np.ndarray:
    """The true offered load (Mpps) per period and table: packets arriving at
    ``t_ps``, each visiting table ``j`` ``visits[i, j]`` times (a (packets, T)
    array, or (packets,) for a single table)."""
    periods = int(round(duration_ns / period_ns))
    k = np.clip((np.asarray(t_ps, dtype=np.float64) / 1000.0 // period_ns).astype(np.int64), 0, periods - 1)
    v = np.asarray(visits, dtype=float)
    if v.ndim == 1:
        v = v[:, None]
    out = np.zeros((periods, v.shape[1]))
    np.add.at(out, k, v)
    return out * 1e3 / period_ns


def route_visits(route_start: np.ndarray, hop_table: np.ndarray, T: int) -> np.ndarray:
    """(routes, T): how many times each route visits each table."""
    R = len(route_start) - 1
    out = np.zeros((R, T))
    for r in range(R):
        np.add.at(out[r], hop_table[route_start[r]:route_start[r + 1]].astype(np.int64), 1.0)
    return out


def cheapest_split(load: np.ndarray, total: int, cap_mpps: float | None, min_pmus: int = 1) -> tuple[np.ndarray, bool]:
    """One PMU count per table from ``load[k, p, j]`` (the ELU load, Mpps, that
    table ``j`` at ``k + min_pmus`` PMUs sends in period ``p``), solved with
    HiGHS: the fewest PMUs (at most ``total``) whose summed load stays within
    ``cap_mpps`` in every period, then the least peak load among them. When no
    split stays within it (or ``cap_mpps`` is None): the split of at most
    ``total`` PMUs with the least peak load, then the fewest PMUs.
    Returns (counts, met the cap)."""
    K, P, T = load.shape
    counts = np.arange(K) + min_pmus
    inf = highspy.kHighsInf

    def model(cap: float | None, z_max: float | None):
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("log_to_console", False)
        h.setOptionValue("mip_rel_gap", 0.0)
        h.setOptionValue("threads", 1)
        x = [[h.addBinary() for _ in range(K)] for _ in range(T)]
        z = h.addVariable(lb=0.0, ub=inf)
        for j in range(T):
            h.addConstr(sum(x[j]) == 1)
        pmus = sum(float(counts[k]) * x[j][k] for j in range(T) for k in range(K))
        h.addConstr(pmus <= float(total))
        for p in range(P):
            elu = sum(float(load[k, p, j]) * x[j][k] for j in range(T) for k in range(K) if load[k, p, j] != 0.0)
            if isinstance(elu, (int, float)):
                continue
            h.addConstr(elu - z <= 0.0)
            if cap is not None:
                h.addConstr(elu <= float(cap))
        if z_max is not None:
            h.addConstr(z <= float(z_max))
        return h, x, z, pmus

    def solve(h, objective) -> bool:
        h.minimize(objective)
        return h.getModelStatus() == highspy.HighsModelStatus.kOptimal

    def decode(h, x) -> np.ndarray:
        return np.array([counts[int(np.argmax([h.val(v) for v in row]))] for row in x], dtype=np.int64)

    if cap_mpps is not None:
        h, x, z, pmus = model(cap_mpps, None)
        if solve(h, pmus):
            n = decode(h, x)
            # among the fewest PMUs, the least peak ELU load
            h2, x2, z2, pmus2 = model(cap_mpps, None)
            h2.addConstr(pmus2 <= float(n.sum()))
            if solve(h2, z2):
                n = decode(h2, x2)
            return n, True
    h, x, z, pmus = model(None, None)
    if not solve(h, z):
        raise RuntimeError("static oracle: HiGHS found no split (a pool smaller than one PMU per table?)")
    zbest = h.val(z)
    h2, x2, z2, pmus2 = model(None, zbest * (1 + 1e-9) + 1e-9)
    if solve(h2, pmus2):
        return decode(h2, x2), False
    return decode(h, x), False


@dataclass
class Oracle:
    """What the oracle chose and why."""

    counts: dict[str, int]
    carries_peak: bool  # its run kept up in every period
    peak_offered_mpps: dict[str, float]  # the traffic model's per-table peak over control periods
    elu_cap_mpps: float | None  # the ELU load bound the split met (None: single table, no model)
    runs: dict[str, Run] = field(default_factory=dict)  # the sweep's and the checks' runs, by allocation
    rounds: int = 0  # split, simulate, lower the bound: how many times

    def to_json(self) -> dict:
        return {
            "pmus": self.counts,
            "carries_peak": self.carries_peak,
            "peak_offered_mpps": self.peak_offered_mpps,
            "elu_cap_mpps": self.elu_cap_mpps,
            "rounds": self.rounds,
            "sweep": {k: {"kept_up": kept_up(r), "throughput_mpps": r.throughput_mpps, "drops": int(r.drops.sum()),
                          "mean_latency_ns": r.mean_latency_ns, "pmus": r.alloc.tolist()} for k, r in self.runs.items()},
        }


def search(names: list[str], total: int, offered_mpps: np.ndarray, simulate: Callable[[np.ndarray, int], Run],
           max_k: int | None = None, min_pmus: int = 1, rounds: int = 4, descent: int = 3,
           max_runs: int = 40) -> Oracle:
    """The cheapest static split carrying ``offered_mpps`` (periods x tables,
    from :func:`offered`). ``simulate(counts, pool)`` runs the static
    allocation ``counts`` (PMUs per table) with ``pool`` PMUs in the system
    and returns its :class:`Run`. ``rounds``: at most so many splits solved
    and simulated; ``descent``: tables tried per step of the descent."""
    T = len(names)
    K = min(max_k or total, total - (T - 1) * min_pmus)
    peak = {n: float(offered_mpps[:, j].max()) for j, n in enumerate(names)}
    runs: dict[str, Run] = {}

    def run(counts: np.ndarray, pool: int) -> Run:
        key = ",".join(map(str, counts))
        if key not in runs:
            runs[key] = simulate(np.asarray(counts, dtype=np.int64), pool)
        return runs[key]

    sweep = [run(np.full(T, k), max(total, k * T)) for k in range(min_pmus, K + 1)]
    cap, done = None, 0
    if T > 1:
        # ELU load of table j at count k in period p: the true offered load times the swept miss ratio
        load = np.stack([offered_mpps * r.miss_ratio for r in sweep])  # (K, P, T)

        def elu(counts: np.ndarray) -> np.ndarray:  # per period, predicted
            return load[np.asarray(counts) - min_pmus, :, np.arange(T)].sum(axis=0)

        # What the ELU carries lies between `lo`, the highest predicted peak of a run that
        # kept up, and `hi`, the lowest load a run fell behind at (its highest predicted load
        # up to its first drop): both from simulated runs only.
        lo, hi = None, np.inf

        def learn(r: Run) -> None:
            nonlocal lo, hi
            e = elu(r.alloc)
            if kept_up(r):
                lo = max(lo or 0.0, float(e.max()))
            elif r.behind.any():
                hi = min(hi, float(e[: int(np.argmax(r.behind)) + 1].max()))

        for r in sweep:
            learn(r)
        # Bisect the ELU bound between them: at each bound, the cheapest split the model
        # allows, simulated. A split that keeps up (or none in the pool under the bound)
        # sends the search higher; one that falls behind brings `hi` down. (Runs can
        # contradict the model: a bracket with hi <= lo says nothing, and is dropped.)
        if lo is not None and hi <= lo:
            hi = np.inf
        cap, a = lo, lo
        while a is not None and done < rounds:
            counts, met = cheapest_split(load, total, cap, min_pmus)
            if met:
                done += 1
                r = run(counts, total)
                learn(r)
            if not met or kept_up(r):
                a = cap
            if not np.isfinite(hi) or hi - a <= 0.01 * a:
                break
            cap = 0.5 * (a + hi)

        def in_pool() -> list[Run]:
            return [r for r in runs.values() if r.alloc.sum() <= total]

        def ranked(r: Run) -> tuple:
            return (kept_up(r), r.throughput_mpps, -int(r.alloc.sum()))

        if not any(kept_up(r) for r in in_pool()):
            # Nothing in the pool kept up yet: the split with the least predicted peak ELU
            # load, then (while that improves what the best run carries) one PMU more from
            # the pool, or one PMU moved, where the model predicts the most relief.
            done += 1
            run(cheapest_split(load, total, None, min_pmus)[0], total)
            eye = np.eye(T, dtype=np.int64)
            while len(runs) < max_runs:
                best = max(in_pool(), key=ranked)
                if kept_up(best):
                    break
                n = best.alloc
                give = min((j for j in range(T) if n[j] > min_pmus), default=None,
                           key=lambda j: float(elu(n - eye[j]).max()))
                steps = [n + eye[j] for j in range(T) if n[j] < K] if n.sum() < total else \
                    [n - eye[give] + eye[j] for j in range(T) if j != give and n[j] < K] if give is not None else []
                steps = sorted(steps, key=lambda c: float(elu(c).max()))[:descent]
                tried = [run(c, total) for c in steps if ",".join(map(str, c)) not in runs]
                if not tried or max(ranked(r) for r in tried) <= ranked(best):
                    break
        # Then one PMU fewer at a time from the cheapest split that kept up, while a run
        # still keeps up, trying the tables whose loss the model predicts to cost the least first.
        good = [r for r in in_pool() if kept_up(r)]
        if good:
            counts = min(good, key=lambda r: int(r.alloc.sum())).alloc
            while len(runs) < max_runs:
                cands = sorted((j for j in range(T) if counts[j] > min_pmus),
                               key=lambda j: float(elu(counts - np.eye(T, dtype=np.int64)[j]).max()))
                for j in cands[:descent]:
                    c = counts - np.eye(T, dtype=np.int64)[j]
                    if kept_up(run(c, total)):
                        counts = c
                        break
                else:
                    break
    # The cheapest allocation of the pool that kept up among all that ran; if none did, the one
    # that carried the most.
    fit = [r for r in runs.values() if r.alloc.sum() <= total]
    ok = [r for r in fit if kept_up(r)]
    best = min(ok, key=lambda r: (int(r.alloc.sum()), -r.throughput_mpps)) if ok else \
        max(fit, key=lambda r: (r.throughput_mpps, -int(r.alloc.sum())))
    return Oracle(dict(zip(names, (int(c) for c in best.alloc))), bool(ok), peak, cap, runs, done)

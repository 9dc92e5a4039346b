"""``synapse reproduce upf``: elastic PMU sharing across the tables of a real
program (paper §2, Fig. 1: the UPF's uplink and downlink paths).

ONF's UP4 (shipped in the package) with coherent entries
(:mod:`synapse_vmt.p4.upf`), under generated traffic whose uplink/downlink
mix shifts over the run (uplink-heavy, then downlink-heavy); every keyed table
the packets visit is a VMT drawing PMUs from one pool of ``N``. Three
schemes over the same seeded traffic:

- **closed loop**: the runtime controller (:class:`~synapse_vmt.opt.controller.Controller`
  with a miss-volume model, :class:`MissAware`) starting from the even
  split, re-solving every period and moving PMUs;
- **static oracle** (:mod:`synapse_vmt.opt.oracle`), built without the
  closed loop: the traffic model's true load per table, per-table sweeps of
  PMU counts on the exact simulator, and the cheapest split of the pool that
  carries the run (searched with HiGHS and checked by simulation), fixed for
  the whole run;
- **even split**: the pool dealt evenly over the tables, fixed.

The model: all tables' misses go to one shared ELU, so a table's PMUs are
worth the ELU requests they save. Where each table's miss ratio against its
PMU count comes from (``--curves``):

- ``mrc``: the online sampled miss-ratio curve of each
  table's live key stream (:mod:`synapse_vmt.opt.mrcfeed`: every batch of
  arrivals the simulator takes is pushed into per-table SHARDS curves that
  model the VMU's sharding over the PMU ids the table would hold at each
  count, each PMU's LRU and the early-miss fill latency), read at every
  solve: the miss ratio at every PMU count is
  known, without calibration. The target is then the exact optimum
  (:func:`optimal_misses`, a dynamic program: a sampled curve has cliffs
  the greedy misses) of the predicted ELU load plus ``theta_mpps``
  (:data:`MRC_THETA_MPPS`) per PMU held: a PMU is held where it saves that
  much of the ELU's requests (``--rule theta``). ``--rule budget``
  (:mod:`synapse_vmt.opt.countrule`) counts by the ELU time a table's last
  PMU saves instead, its misses weighed by the table's bytes per miss,
  against add/release budgets. With warm joins the first decision is taken
  :data:`FIRST_DECISION_NS` into the run (:meth:`MissAware.step`), not
  after a period of the even split: the caches are nearly empty then, and
  a PMU needed later joins warm.
- ``calibration`` (the default): calibration runs (the pool split evenly at one, two,
  three PMUs per table, flat traffic at the run's flow density) give each
  table's miss ratio against its PMU count (:func:`miss_curves`), corrected
  online in warm periods, and the ELU's capacity (the request rate it
  sustains, :func:`elu_capacity`); PMUs are added greedily
  (:func:`greedy_misses`) only while the predicted ELU load is above
  ``elu_utilization`` x that capacity. Short calibration runs are dominated
  by compulsory misses: with seed 1 the ACL's curve came out flat, and it
  got no PMUs.

The control law, every period (:meth:`MissAware.solve`):

1. *Load*: each table's measured load, extrapolated one period ahead when
   it rises (load + its rise; a falling load is taken as it is), times the
   headroom. A ramp's first decisions otherwise gave PMUs back and took them
   again a period later, cold, at a higher load.
2. *Target*: the allocation of the curves' source above
   (:meth:`MissAware.allocate`).
3. *Count*: grows to that target at once; gives back at most
   ``max_release`` PMUs a period, none while a table is behind (its load is
   then throttled by backpressure), except PMUs that save nothing
   (:meth:`MissAware.useful`: a table that already never misses, e.g. a
   one-key table's second PMU). With ``elu_release`` (hysteresis, off by
   default) PMUs go back only while the predicted ELU load stays under that
   fraction of capacity without them.
4. *No churn*: moving a PMU costs both tables cold caches (keys rehash over
   the table's PMUs), so a proposal that moves PMUs must cut the predicted
   ELU load by ``min_improvement`` against the nearest allocation that moves
   none: the held one grown from the free pool (and from PMUs that save
   nothing) while the ELU is over its target, or shrunk where PMUs save the
   least (while the ELU stays under its target without them).
5. A table behind gets one more PMU from the free pool: the model
   under-predicts the ELU load then.

With calibrated curves, each warm period (the table held the same PMUs
through it and the one before) corrects them online
(:meth:`MissAware.correct_curves`), and per-table USL curves (fig8's
single-table method) are fitted too and reported, but misplace PMUs here:
backpressure from the saturated ELU makes every upstream table look short
of capacity.

Optionally (``slo_latency_ns`` / ``hit_rate_floor``) the closed loop also
holds a per-table service target; the run then reports what the target costs
in PMU-time against the throughput-only loop.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from synapse_vmt.errors import UserError, atomic_write
from synapse_vmt.figures.simexp import Recording
from synapse_vmt.mrc import Sampling
from synapse_vmt.opt import countrule, oracle, placement
from synapse_vmt.opt.controller import Controller, Settings, observe
from synapse_vmt.opt.counters import Samples, estimate, usl_samples
from synapse_vmt.opt.mrcfeed import OnlineMrc
from synapse_vmt.opt.usl import Usl, fit
from synapse_vmt.p4 import gentraffic, simrun, upf
from synapse_vmt.report import save_png, write_json
from synapse_vmt.sim import finish_checked


#: Where the closed loop's miss curves come from (``--curves``).
CURVE_SOURCES = ("mrc", "calibration")
#: The PMUs' block size in these runs (simrun.build_sim's default).
BLOCK = 256
#: With the live curves: a PMU is added while it saves at least this many
#: Mpps of ELU requests at the provisioned load.
MRC_THETA_MPPS = 0.25
#: The count rules of the live-curve loop (``--rule``): ``theta`` (a PMU is
#: held where it saves MRC_THETA_MPPS of ELU requests) or ``budget``
#: (:mod:`synapse_vmt.opt.countrule`: where it saves BUDGET_RELEASE of the
#: ELU's time, added where it saves BUDGET_ADD).
RULES = ("theta", "budget")
BUDGET_ADD = 0.03
BUDGET_RELEASE = 0.015
#: With warm joins and the live curves, the first decision this far into the run (either rule).
FIRST_DECISION_NS = 20_000.0


def plan(quick: bool) -> dict:
    if quick:
        return {"flows": 3200, "duration": 1_200_000.0, "period": 100_000.0, "pmus": 16, "sessions": 1000,
                "cal_per_table": [1, 2, 3], "cal_duration": 300_000.0, "cal_warmup": 100_000.0}
    # the same flow density as --quick (flows per µs), over a longer run
    return {"flows": 10_600, "duration": 4_000_000.0, "period": 100_000.0, "pmus": 16, "sessions": 1000,
            "cal_per_table": [1, 2, 3, 4], "cal_duration": 600_000.0, "cal_warmup": 200_000.0}


def per_period(w: dict, period_ns: float, T: int) -> dict:
    """Per control period: mean per-key latency, hit rate and PMUs per table."""
    t = np.asarray(w["t_ns"], dtype=float)
    k = np.floor((t - 1e-6) / period_ns).astype(np.int64)
    tab = np.asarray(w["table"], dtype=np.int64)
    n = np.asarray(w["hits"], dtype=float) + np.asarray(w["misses"], dtype=float)
    lat = np.nan_to_num(np.asarray(w["lat_mean_ns"], dtype=float))
    P = int(k.max()) + 1 if len(k) else 0
    lat_sum = np.bincount(k, weights=lat * n, minlength=P)
    cnt = np.bincount(k, weights=n, minlength=P)
    hits = np.bincount(k, weights=np.asarray(w["hits"], dtype=float), minlength=P)
    pm = np.zeros((P, T))
    nw = np.zeros((P, T))
    np.add.at(pm, (k, tab), np.asarray(w["pmus"], dtype=float))
    np.add.at(nw, (k, tab), 1.0)
    return {
        "t_ms": ((np.arange(P) + 1) * period_ns / 1e6).tolist(),
        "mean_latency_ns": (lat_sum / np.maximum(cnt, 1)).tolist(),
        "hit_rate": (hits / np.maximum(cnt, 1)).tolist(),
        "pmus": (pm / np.maximum(nw, 1)).tolist(),
        "lat_total": float(lat_sum.sum()),
        "lookups": float(cnt.sum()),
    }


def table_stats(w: dict, names: list[str]) -> dict:
    """Per table over the run: lookups, miss ratio, mean per-key latency and
    mean PMUs held (where a scheme's latency comes from)."""
    T = len(names)
    tab = np.asarray(w["table"], dtype=np.int64)
    hits, misses = np.asarray(w["hits"], dtype=float), np.asarray(w["misses"], dtype=float)
    n = hits + misses
    lat = np.nan_to_num(np.asarray(w["lat_mean_ns"], dtype=float))
    look = np.bincount(tab, weights=n, minlength=T)
    miss = np.bincount(tab, weights=misses, minlength=T)
    lat_sum = np.bincount(tab, weights=lat * n, minlength=T)
    pm = np.bincount(tab, weights=np.asarray(w["pmus"], dtype=float), minlength=T) / np.maximum(np.bincount(tab, minlength=T), 1)
    return {x: {"lookups": int(look[j]), "miss_ratio": float(miss[j] / max(look[j], 1.0)),
                "mean_latency_ns": float(lat_sum[j] / max(look[j], 1.0)), "pmus": float(pm[j])} for j, x in enumerate(names)}


def miss_curves(points: dict[tuple[str, int], float], names: list[str], N: int) -> np.ndarray:
    """Per table, the miss ratio at 0..N PMUs from calibration points: linear
    between measured counts, a power law beyond the last, never rising."""
    out = np.ones((len(names), N + 1))
    for j, n in enumerate(names):
        ks = sorted(k for (t, k) in points if t == n)
        if not ks:
            continue
        ms = [points[(n, k)] for k in ks]
        b = 1.0
        if len(ks) >= 2 and ms[-1] > 0 and ms[-2] > 0:
            b = max(0.0, np.log(ms[-2] / ms[-1]) / np.log(ks[-1] / ks[-2]))
        for c in range(1, N + 1):
            out[j, c] = np.interp(c, ks, ms) if c <= ks[-1] else ms[-1] * (ks[-1] / c) ** b
        out[j] = np.minimum.accumulate(out[j])
    return out


def greedy_misses(load_mpps: np.ndarray, curves: np.ndarray, total: int, min_pmus: int = 1, theta_mpps: float = 0.25,
                  elu_target_mpps: float | None = None, measured: np.ndarray | None = None,
                  start: np.ndarray | None = None) -> np.ndarray:
    """PMUs one at a time to the table whose miss volume (load x miss ratio)
    falls most, while a PMU still saves ``theta_mpps`` of ELU requests and,
    given ``elu_target_mpps``, while the predicted ELU load (the summed miss
    volume) is above it: PMUs are added only while the shared ELU would be
    near saturation. ``start``: the allocation to grow from (default
    ``min_pmus`` each)."""
    T = len(load_mpps)
    n = np.full(T, min_pmus, dtype=np.int64) if start is None else np.maximum(np.asarray(start, dtype=np.int64), min_pmus)
    rows = np.arange(T)
    while n.sum() < total:
        if elu_target_mpps is not None and float(np.sum(load_mpps * curves[rows, n])) <= elu_target_mpps:
            break
        nxt = np.minimum(n + 1, curves.shape[1] - 1)
        gain = load_mpps * (curves[rows, n] - curves[rows, nxt])
        j = int(np.argmax(gain))
        if gain[j] < theta_mpps:
            if elu_target_mpps is None:
                break
            # The ELU is still over its target but the curves promise nothing
            # more. Where a curve was never measured at the next count (it is
            # extrapolated there), the PMU goes to the largest miss volume
            # per PMU, and the period's counters then correct that table's
            # curve; a measured flat curve gets no more PMUs.
            unknown = np.ones_like(n, dtype=bool) if measured is None else ~measured[rows, nxt]
            vol = np.where((n < curves.shape[1] - 1) & unknown, load_mpps * curves[rows, n] / n.clip(1), -1.0)
            j = int(np.argmax(vol))
            if vol[j] < theta_mpps:
                break
        n[j] += 1
    return n


def optimal_misses(load_mpps: np.ndarray, curves: np.ndarray, total: int, min_pmus: int = 1, theta_mpps: float = 0.0,
                   start: np.ndarray | None = None) -> np.ndarray:
    """The allocation of at most ``total`` PMUs (at least ``start``, default
    ``min_pmus``, per table) that minimizes the predicted ELU load (the
    summed miss volume, load x miss ratio) plus ``theta_mpps`` per PMU held:
    a PMU is worth holding when it saves at least ``theta_mpps`` of ELU
    requests. Exact for any curves (a dynamic program over tables and
    counts, O(T·N²)), where the greedy (:func:`greedy_misses`) is exact only
    for convex ones: a sampled curve of a table whose working set fits two
    PMUs but not one drops at the second PMU, not the first. On a tie, the
    fewest PMUs."""
    load = np.asarray(load_mpps, dtype=float)
    T, K = curves.shape[0], curves.shape[1] - 1
    lo = np.full(T, min_pmus, dtype=np.int64) if start is None else np.maximum(np.asarray(start, dtype=np.int64), min_pmus)
    lo = np.minimum(lo, K)
    if lo.sum() > total:
        return lo
    ks = np.arange(K + 1)
    price = load[:, None] * curves + theta_mpps * ks[None, :]
    price[ks[None, :] < lo[:, None]] = np.inf
    return countrule.separable_min(price, total)


def elu_capacity(rates_mpps: list[float]) -> float:
    """The ELU's capacity (miss requests it serves per µs) from the
    calibration windows' total ELU request rates: the rate it sustains when
    saturated (a high quantile, robust to one odd window)."""
    return float(np.quantile(rates_mpps, 0.95)) if rates_mpps else float("inf")


class MissAware(Controller):
    """The closed loop with a miss-volume model in place of per-table USL
    curves: the tables share one ELU, so PMUs go where they cut the most ELU
    requests for the measured per-table loads (the loads move with the mix),
    and only while the ELU would otherwise be near saturation
    (``elu_target_mpps``: a fraction ``elu_utilization`` of its measured
    capacity). Each period corrects the calibration curves online: a table
    that held the same PMUs all period updates its miss ratio at that count
    from the period's hits and misses (:meth:`correct_curves`)."""

    curves: np.ndarray = None  # set after construction (or read from `feed` at every solve)
    feed: object = None  # opt.mrcfeed.OnlineMrc: the curves of the live key streams, in place of calibrated ones
    theta_mpps: float = 0.5
    elu_target_mpps: float | None = None  # the band's top: PMUs are added while the predicted ELU load is above it
    elu_release_mpps: float | None = None  # the band's bottom: PMUs go back only while the load stays under it
    min_lookups: int = 500  # a period's estimate of a miss ratio needs this many lookups
    blend: float = 0.5  # weight of the new period's miss ratio

    max_release: int = 2  # PMUs given back to the pool per period at most (adding is not limited)
    measured: np.ndarray | None = None  # (table, PMU count): the curve there was measured in a period
    warm: dict | None = None  # per table, the PMU count it held through the last period
    trend: bool = True  # provision for the next period's load, extrapolated linearly when it rises
    prev_offered: np.ndarray | None = None
    flat_miss_ratio: float = 1e-3  # a table missing at most this often needs no more PMUs (see useful())
    min_improvement: float = 0.05  # a re-placement must cut the predicted ELU load by this fraction
    # The count rule with the live curves (RULES): "theta" (optimal_misses at theta_mpps per PMU) or
    # "budget" (opt/countrule.py: a PMU's worth in ELU time against add/release budgets).
    rule: str = "theta"
    add_budget: float = BUDGET_ADD
    release_budget: float = BUDGET_RELEASE
    first_decision_ns: float | None = None  # a decision this far into the first period (None: none)
    bytes_per_miss: np.ndarray | None = None  # per table, measured (countrule.bytes_per_miss)
    early: bool = False  # the decision inside the first period is being taken
    early_done: bool = False

    def step(self, t_end: float | None = None, parts=None):
        if self.first_decision_ns is None or self.history or self.early_done:
            return super().step(t_end, parts)
        # The first period's early decision: the caches are nearly empty, so giving
        # PMUs back costs next to nothing, and the even split is not held for a period.
        t_end = self.sim.now_ns() + self.settings.period_ns
        self.sim.run_until(self.first_decision_ns)
        w, e = self.sim.windows(), self.sim.edges()
        tr = estimate(w, e, len(self.names), self.settings.window_ns)
        self.learn(w, tr)
        self.early = True
        self.apply({x: int(k) for x, k in zip(self.names, self.solve(tr).pmus)})
        self.early, self.early_done = False, True
        self.prev_offered = None  # the next period's trend starts from its own load
        return super().step(t_end, ([w], [e]))

    def solve(self, tr):
        from types import SimpleNamespace

        if self.feed is not None:
            # the live key streams' curves, as they are now, each count sharded over the PMUs
            # the table would hold at it: every count is known
            self.feed.follow(self.sim.pmu_states())
            self.curves = self.feed.miss_curves()
            self.measured = np.ones(self.curves.shape, dtype=bool)
        off = np.asarray(tr.offered_mpps, dtype=float)
        if self.trend:
            # the next period's load: a rising load keeps rising (linear), a falling one is taken as it is
            prev = self.prev_offered if self.prev_offered is not None else np.zeros_like(off)
            self.prev_offered = off
            off = off + np.maximum(0.0, off - prev)
        load = off * self.settings.headroom
        if not hasattr(self, "decisions"):
            self.decisions = []
        if self.rule == "budget":
            return SimpleNamespace(pmus=self.solve_budget(load, tr))
        if self.measured is None:
            self.measured = np.zeros(self.curves.shape, dtype=bool)
        n = self.allocate(load, self.total_pmus)
        have = placement.current_sets(self.sim.pmu_states(), self.names)
        held = np.array([len(have[x]) for x in self.names])
        rows = np.arange(len(n))
        # Overloaded (a table processed clearly less than arrived): the loads
        # seen are throttled by backpressure, so nothing is given back (PMUs
        # may still move between tables).
        behind = np.asarray(tr.processed_mpps) < self.settings.behind * np.asarray(tr.offered_mpps)
        if self.early:
            behind[:] = False  # the pipeline is still filling
        # Hysteresis on the predicted ELU load: PMUs are added while it is
        # above the band's top (`elu_target_mpps`, the greedy above) but go
        # back only while it stays under the band's bottom without them
        # (`elu_release_mpps`), at most `max_release` a period (a dip would
        # otherwise cost cold caches when the load returns); inside the band
        # the count is held.
        release = 0 if behind.any() else self.total_pmus if self.early else self.max_release
        if behind.any() and n.sum() < held.sum():
            # ... but PMUs that save nothing may go whatever the load (their curve is flat)
            release = int(min(self.max_release, held.sum() - self.useful(held).sum()))
        if self.elu_release_mpps is not None and release:
            g_lo = greedy_misses(load, self.curves, self.total_pmus, self.settings.min_pmus, self.theta_mpps,
                                 self.elu_release_mpps, self.measured)
            release = int(np.clip(held.sum() - g_lo.sum(), 0, release))
        last = self.curves.shape[1] - 1
        while n.sum() < min(self.total_pmus, held.sum() - release):
            # kept by the tables that hold them (no move), largest miss volume first
            vol = load * self.curves[rows, np.minimum(n, last)]
            j = int(np.argmax(np.where(n < held, vol + 1e-9, -1.0)))
            n[j] += 1
        # Moving PMUs costs cold caches: a proposal that moves PMUs between
        # tables must be predicted to cut the ELU load by more than
        # `min_improvement` against the nearest allocation of the same count
        # that moves none (no churn between near-equal allocations): the held
        # one grown from the free pool while the ELU is predicted over its
        # target (a PMU joining from the pool takes none from another table),
        # or shrunk where PMUs save the least.
        if held.sum() > 0 and held.max() < self.curves.shape[1]:
            vol = lambda k: float(np.sum(load * self.curves[rows, np.maximum(k, 1)]))  # noqa: E731
            target = np.inf if self.elu_target_mpps is None else self.elu_target_mpps
            if n.sum() >= held.sum() and vol(held) > target:
                # held, it still grows from the free pool (and from PMUs that save nothing)
                alt = self.allocate(load, int(n.sum()), start=self.useful(held))
            else:
                # a release: the PMUs go from the tables that lose the least (nothing moves), down to the
                # proposal's count, or while the held allocation stays under the target without them
                alt = held.copy()
                floor = n.sum() if n.sum() < held.sum() else held.sum() - release
                while alt.sum() > floor:
                    # the least predicted loss; on a tie the smaller miss volume (fewer keys cached to lose)
                    m_now = self.curves[rows, np.minimum(alt, last)]
                    loss = np.where(alt > self.settings.min_pmus,
                                    load * (self.curves[rows, np.clip(alt - 1, 0, last)] - m_now) + 1e-6 * load * m_now, np.inf)
                    j = int(np.argmin(loss))
                    if n.sum() >= held.sum() and vol(alt) + loss[j] > target:
                        break
                    alt[j] -= 1
            if vol(alt) - vol(n) <= self.min_improvement * vol(alt):
                n = alt
        self.one_more_if_behind(n, behind, load * self.curves[rows, np.minimum(n, last)])
        vol = lambda k: float(np.sum(load * self.curves[rows, np.clip(k, 1, last)]))  # noqa: E731
        self.decisions.append({"t_ns": float(self.sim.now_ns()), "held": held.tolist(), "target": n.tolist(),
                               "elu_pred_held_mpps": vol(held), "elu_pred_target_mpps": vol(n), "behind": bool(behind.any())})
        return SimpleNamespace(pmus=n)

    def one_more_if_behind(self, n: np.ndarray, behind: np.ndarray, vol: np.ndarray) -> None:
        """A table behind (throttled) says the model under-predicts the ELU
        load: one more PMU from the free pool to the largest ``vol`` (miss
        volume, or ELU share) per PMU among the tables behind, whatever the
        curves promise (in place)."""
        if behind.any() and n.sum() < self.total_pmus:
            v = np.where(behind & (n < self.curves.shape[1] - 1), vol / n.clip(1), -1.0)
            j = int(np.argmax(v))
            if v[j] > 0:
                n[j] += 1

    def solve_budget(self, load: np.ndarray, tr) -> np.ndarray:
        """The ``budget`` rule (:mod:`synapse_vmt.opt.countrule`): each
        table's PMUs by the ELU time its last one saves, against the add and
        release budgets. At most ``max_release`` PMUs go back a period and
        none while a table is behind (a leaving PMU's keys miss again at the
        others), except in the first period's early decision, when the caches
        are nearly empty."""
        have = placement.current_sets(self.sim.pmu_states(), self.names)
        held = np.array([len(have[x]) for x in self.names])
        if self.bytes_per_miss is None:
            self.bytes_per_miss = np.full(len(held), 64.0)
        cost = countrule.elu_cost(load, self.curves, self.bytes_per_miss)
        n = countrule.budget_counts(cost, held, self.total_pmus, self.add_budget, self.release_budget,
                                    self.settings.min_pmus)
        behind = np.asarray(tr.processed_mpps) < self.settings.behind * np.asarray(tr.offered_mpps)
        if self.early:
            behind[:] = False  # the pipeline is still filling
        else:
            keep = held.sum() - (0 if behind.any() else self.max_release)
            last = cost.shape[1] - 1
            while n.sum() < min(keep, self.total_pmus):
                # the release that loses the most ELU time is undone first
                loss = np.where(n < held, cost[np.arange(len(n)), np.clip(n - 1, 0, last)] - cost[np.arange(len(n)), n], -np.inf)
                n[int(np.argmax(loss))] += 1
        self.one_more_if_behind(n, behind, cost[np.arange(len(n)), np.minimum(n, cost.shape[1] - 1)])
        self.decisions.append({"t_ns": float(self.sim.now_ns()), "held": held.tolist(), "target": n.tolist(),
                               "elu_share_held": float(cost[np.arange(len(n)), np.minimum(held, cost.shape[1] - 1)].sum()),
                               "elu_share_target": float(cost[np.arange(len(n)), n].sum()), "behind": bool(behind.any())})
        return n

    def allocate(self, load: np.ndarray, total: int, start: np.ndarray | None = None) -> np.ndarray:
        """The target for ``load``: with the live curves (``feed``), the
        exact optimum of :func:`optimal_misses`; with calibrated ones, the
        greedy of :func:`greedy_misses` (PMUs while the ELU is over its
        target, exploring counts never measured)."""
        if self.feed is not None:
            return optimal_misses(load, self.curves, total, self.settings.min_pmus, self.theta_mpps, start)
        return greedy_misses(load, self.curves, total, self.settings.min_pmus, self.theta_mpps, self.elu_target_mpps,
                             self.measured, start=start)

    def useful(self, held: np.ndarray) -> np.ndarray:
        """``held`` without the PMUs that save nothing: a table's PMUs beyond
        the count at which it already misses (next to) never, e.g. a one-key
        table's second PMU. Their leaving costs no cold cache worth the name,
        so they are as good as free PMUs to re-place. (A curve that is merely
        flat is no proof: calibration runs are short and dominated by
        compulsory misses, and flat there for tables that reuse keys.)"""
        out = np.asarray(held, dtype=np.int64).copy()
        last = self.curves.shape[1] - 1
        for j in range(len(out)):
            while out[j] > self.settings.min_pmus and self.curves[j, min(out[j] - 1, last)] <= self.flat_miss_ratio:
                out[j] -= 1
        return out

    def learn(self, w: dict, tr) -> None:
        if self.feed is None:
            self.correct_curves(w)
        elif self.rule == "budget":
            self.bytes_per_miss = countrule.bytes_per_miss(w, len(self.names), self.bytes_per_miss)

    def correct_curves(self, w: dict) -> None:
        """Miss ratio per table at the PMU count it held throughout the period,
        blended into its curve; the curve stays non-increasing in PMUs. The
        table must have held that count through the previous period too: the
        first period of a run, or the one after a table's PMUs changed, starts
        from cold caches, whose compulsory misses would flatten the curve
        (the run's first period raised sessions_uplink's miss ratio at two
        PMUs above its one-PMU value)."""
        tab = np.asarray(w["table"], dtype=np.int64)
        held = np.asarray(w["pmus"], dtype=np.int64)
        hits, misses = np.asarray(w["hits"], dtype=float), np.asarray(w["misses"], dtype=float)
        prev = self.warm if self.warm is not None else {}
        self.warm = {}
        for j in range(self.curves.shape[0]):
            m = tab == j
            if not m.any() or held[m].min() != held[m].max() or held[m][0] < 1:
                continue
            n, look = int(held[m][0]), float(hits[m].sum() + misses[m].sum())
            self.warm[j] = n
            if prev.get(j) != n or look < self.min_lookups or n >= self.curves.shape[1]:
                continue
            c = self.curves[j]
            if self.measured is None:
                self.measured = np.zeros(self.curves.shape, dtype=bool)
            self.measured[j, n] = True
            c[n] = (1 - self.blend) * c[n] + self.blend * float(misses[m].sum()) / look
            c[n + 1:] = np.minimum(c[n + 1:], c[n])
            c[1:n] = np.maximum(c[1:n], c[n])


def true_offered(pr, T: int, period_ns: float, duration_ns: float) -> np.ndarray:
    """Per period and table, the load the traffic model offers (Mpps): its
    arrivals over the run, each counted at every table its route visits."""
    t, r = pr.feeder_factory()(int(duration_ns * 1000) + 1)
    visits = oracle.route_visits(pr.routes.route_start, pr.routes.hop_table, T)
    return oracle.offered(t, visits[np.asarray(r, dtype=np.int64)], period_ns, duration_ns)


def static_oracle(pr, names: list[str], N: int, period_ns: float, duration_ns: float, make) -> oracle.Oracle:
    """:func:`synapse_vmt.opt.oracle.search` on a program run; ``make(alloc,
    pool)`` builds a simulator holding the PMU ids ``alloc`` of ``pool``."""
    T = len(names)
    off = true_offered(pr, T, period_ns, duration_ns)

    def simulate(counts: np.ndarray, pool: int) -> oracle.Run:
        alloc = placement.initial(pool, 4, dict(zip(names, (int(c) for c in counts))))
        return oracle.run_static(make(alloc, pool), T, period_ns, duration_ns, counts)

    return oracle.search(names, N, off, simulate)


def calibrate(pl: dict, program: str, entries: Path, traffic, names: list[str], N: int, window: float, seed: int):
    """The calibration runs of ``--curves calibration``: the pool split
    evenly at ``pl["cal_per_table"]`` PMUs per table, flat traffic at the
    run's flow density at two load levels. Returns the pooled USL fit, a USL
    per table, each table's miss curve (:func:`miss_curves`) and the ELU's
    capacity (:func:`elu_capacity`)."""
    T = len(names)
    # Calibration: the pool split evenly at several sizes, flat traffic.
    flat = gentraffic.TrafficSpec([gentraffic.TrafficClass(c.name, c.share, "flat", c.frame, c.fields) for c in traffic.classes],
                                  traffic.flows, traffic.dist, traffic.max_bytes, traffic.flow_duration_ns, traffic.mean_pkt_bytes)
    samples = Samples.empty()
    per_table = {n: Samples.empty() for n in names}
    miss_pts: dict[tuple[str, int], float] = {}
    elu_rates: list[float] = []  # per calibration window: all tables' ELU requests, Mpps
    for n_cal in (k * T for k in pl["cal_per_table"]):
        for scale in (1.0, 2.5):
            # the run's flow density (flows per µs: new flows bring compulsory misses), at two load levels
            n_flows = int(flat.flows * pl["cal_duration"] / pl["duration"] * scale)
            spec = gentraffic.TrafficSpec(flat.classes, n_flows, flat.dist, flat.max_bytes, flat.flow_duration_ns,
                                          flat.mean_pkt_bytes)
            cal = simrun.prepare(program, str(entries), traffic=spec, duration_ns=pl["cal_duration"], seed=seed + 7)
            s = simrun.build_sim(cal, simrun.even_split(cal.routes.tables, n_cal), max(N, n_cal), window_ns=window, seed=seed)
            s.run_until(pl["cal_warmup"])
            s.windows(), s.edges()
            s.run_until(pl["cal_duration"])
            cw = s.windows()
            ctab = np.asarray(cw["table"], dtype=np.int64)
            _, wi = np.unique(np.asarray(cw["t_ns"]), return_inverse=True)
            elu_rates += (np.bincount(wi, weights=np.asarray(cw["elu_requests"], dtype=float)) * 1e3 / window).tolist()
            for j, name in enumerate(cal.routes.tables):
                m = ctab == j
                h, mi = float(np.sum(np.asarray(cw["hits"])[m])), float(np.sum(np.asarray(cw["misses"])[m]))
                held = int(round(float(np.mean(np.asarray(cw["pmus"])[m])))) if m.any() else 0
                if h + mi > 0 and held > 0:
                    key = (name, held)
                    miss_pts[key] = max(miss_pts.get(key, 0.0), mi / (h + mi))
            for name, smp in zip(cal.routes.tables, usl_samples(cw, window, len(cal.routes.tables))):
                samples = samples.extend(smp)
                if name in per_table:
                    per_table[name] = per_table[name].extend(smp)
    # One USL per table (their working sets differ: four tunnel peers against
    # a key per flow); the pooled fit where a table's samples span too little.
    # A table that kept up in every calibration window (a handful of keys, all
    # cached) never limits the flow: an unbounded curve, so PMUs go elsewhere.
    fitres = fit(samples.load_mpps, samples.throughput_mpps, samples.pmus)
    models = {}
    for n in names:
        smp = per_table[n]
        behind = np.sum(smp.throughput_mpps < 0.97 * smp.load_mpps) if len(smp) else 0
        ok = len(smp) >= 20 and len(set(smp.pmus.tolist())) >= 2
        if behind < 3:
            models[n] = Usl(0.0, 0.0, 0.0, 0.0)
        else:
            models[n] = fit(smp.load_mpps, smp.throughput_mpps, smp.pmus).usl if ok else fitres.usl
    return fitres, models, miss_curves(miss_pts, names, N), elu_capacity(elu_rates)


def setup(out: Path, quick: bool, seed: int, pmus: int | None = None):
    """The run's plan (:func:`plan`, ``pmus`` overriding its pool), UP4,
    its entries (written to ``out/entries.txt``), traffic and prepared run:
    ``(plan, program, entries, traffic, prepared)``."""
    import tomllib

    pl = plan(quick)
    if pmus is not None:
        pl["pmus"] = int(pmus)
    out.mkdir(parents=True, exist_ok=True)
    entries = out / "entries.txt"
    with atomic_write(entries) as fh:
        fh.write("\n".join(upf.entries_cli(pl["sessions"], seed)) + "\n")
    doc = tomllib.loads(upf.scenario(flows=pl["flows"], duration_ns=pl["duration"], pmus=pl["pmus"]))
    traffic = gentraffic.parse_spec(doc["traffic"], "upf: [traffic]")
    program = simrun.resolve_program("builtin:up4")
    pr = simrun.prepare(program, str(entries), traffic=traffic, duration_ns=pl["duration"], seed=seed)
    return pl, program, entries, traffic, pr


def run(out: Path, quick: bool = False, seed: int = 1, slo_latency_ns: float | None = None,
        hit_rate_floor: float | None = None, headroom: float = 1.3, pmus: int | None = None,
        elu_utilization: float = 1.0, elu_release: float | None = None, curve_source: str = "calibration",
        mrc_sampling: Sampling | None = None, theta_mpps: float | None = None, join: str = "cold",
        rule: str = "theta", first_decision_ns: float | None = None) -> dict:
    """``curve_source``: ``mrc`` (the live key streams' sampled curves,
    :mod:`synapse_vmt.opt.mrcfeed`; no calibration run) or ``calibration``
    (calibration runs at start, corrected online; :func:`calibrate`).
    ``join``: how a PMU joins a table in every run (``vmu.join``; the
    static runs place theirs at start, where cold and warm are the same).
    With ``mrc``: ``rule``, the count rule (:data:`RULES`), and
    ``first_decision_ns``, a decision that far into the first period (None:
    :data:`FIRST_DECISION_NS` with warm joins, none with cold ones, where
    growing back from a lean start costs cold misses; 0: none)."""
    if curve_source not in CURVE_SOURCES:
        raise UserError(f"--curves {curve_source}: expected one of {', '.join(CURVE_SOURCES)}")
    if rule not in RULES:
        raise UserError(f"--rule {rule}: expected one of {', '.join(RULES)}")
    if first_decision_ns is None:
        first_decision_ns = FIRST_DECISION_NS if join == "warm" and curve_source == "mrc" else 0.0
    pl, program, entries, traffic, pr = setup(out, quick, seed, pmus)
    names = pr.routes.tables
    T, N = len(names), pl["pmus"]
    window = 10_000.0

    def make(alloc: dict[str, list[int]], pool: int = N):
        return Recording(simrun.build_sim(pr, alloc, pool, window_ns=window, seed=seed, overrides={"vmu": {"join": join}}))

    if curve_source == "calibration":
        fitres, models, curves, elu_cap = calibrate(pl, program, entries, traffic, names, N, window, seed)
        elu_target = elu_utilization * elu_cap
    else:
        # the curves come from the live key streams (opt/mrcfeed.py), no calibration run
        # and no ELU capacity: a PMU is added wherever it saves theta_mpps of ELU requests (target 0)
        fitres, models, curves = None, {n: Usl(0.0, 0.0, 0.0, 0.0) for n in names}, np.ones((T, N + 1))
        elu_cap, elu_target = None, 0.0
    settings = Settings(period_ns=pl["period"], window_ns=window, headroom=headroom)
    even = simrun.even_split(names, N)

    def loop(st: Settings):
        # starts from the even split (what a static deployment would hold)
        sim = make(even)
        ctl = MissAware(sim, dict(models), N, st)
        ctl.curves = curves.copy()  # corrected online, per run
        if curve_source == "mrc":
            ctl.feed = OnlineMrc(sim, N, BLOCK, mrc_sampling)
            ctl.theta_mpps = MRC_THETA_MPPS if theta_mpps is None else theta_mpps
            ctl.rule = rule
            ctl.first_decision_ns = first_decision_ns or None
        elif theta_mpps is not None:
            ctl.theta_mpps = theta_mpps
        ctl.elu_target_mpps = elu_target
        ctl.elu_release_mpps = None if elu_release is None or elu_cap is None else min(elu_release, elu_utilization) * elu_cap
        hist = ctl.run(pl["duration"])
        return sim, ctl, hist

    sim_l, ctl, hist_l = loop(settings)
    # The static oracle, independent of the closed loop: the traffic model's true per-table load per
    # period, per-table sweeps of PMU counts with the exact simulator, the cheapest split carrying the
    # peak (HiGHS), checked by simulation (opt/oracle.py).
    orc = static_oracle(pr, names, N, pl["period"], pl["duration"], lambda alloc, pool: make(alloc, pool))
    fixed = orc.counts

    sim_s = make(placement.initial(N, 4, fixed))
    hist_s = observe(sim_s, T, settings, pl["duration"])
    sim_e = make(even)
    hist_e = observe(sim_e, T, settings, pl["duration"])
    runs = {"closed_loop": (sim_l, hist_l), "static": (sim_s, hist_s), "even_split": (sim_e, hist_e)}
    if slo_latency_ns is not None or hit_rate_floor is not None:
        st = Settings(period_ns=pl["period"], window_ns=window, headroom=headroom, slo_latency_ns=slo_latency_ns,
                      hit_rate_floor=hit_rate_floor)
        sim_t, _, hist_t = loop(st)
        runs["closed_loop_slo"] = (sim_t, hist_t)

    hists_l = {n: sim_l.latency_histogram(n) for n in names}  # the report's, before the drain below
    series, stats = {}, {}
    for k, (sim, hist) in runs.items():
        pp = per_period(sim.all_windows(), pl["period"], T)
        thr = float(np.mean([p.throughput_mpps for p in hist]))
        pmu_time = float(np.sum([p.active_pmus for p in hist]) * pl["period"])
        series[k] = {"t_ms": [p.t_ns / 1e6 for p in hist], "input_mpps": [p.input_mpps for p in hist],
                     "throughput_mpps": [p.throughput_mpps for p in hist], "hit_rate": pp["hit_rate"][:len(hist)],
                     "mean_latency_ns": pp["mean_latency_ns"][:len(hist)], "pmus": [p.pmus.tolist() for p in hist],
                     "active_pmus": [p.active_pmus for p in hist]}
        stats[k] = {"throughput_mpps": thr, "pmu_time_ms": pmu_time / 1e6,
                    "mean_latency_ns": pp["lat_total"] / max(pp["lookups"], 1.0),
                    "hit_rate": float(np.nanmean([p.hit_rate for p in hist])), "drops": int(sum(p.drops for p in hist)),
                    "per_table": table_stats(sim.all_windows(), names)}
        # measured over the run; then it must end drained with every invariant held
        stats[k]["invariants"] = finish_checked(sim, k)
    st_s = stats["static"]
    summary = {
        "figure": "upf",
        "closed_loop": {"throughput_ratio_vs_static": stats["closed_loop"]["throughput_mpps"] / st_s["throughput_mpps"],
                        "pmu_time_ratio_vs_static": stats["closed_loop"]["pmu_time_ms"] / st_s["pmu_time_ms"],
                        "mean_latency_ns": stats["closed_loop"]["mean_latency_ns"]},
        "even_split": {"throughput_ratio_vs_static": stats["even_split"]["throughput_mpps"] / st_s["throughput_mpps"],
                       "mean_latency_ns": stats["even_split"]["mean_latency_ns"]},
        "static": {"mean_latency_ns": st_s["mean_latency_ns"], "pmus": fixed, "oracle": orc.to_json()},
        "schemes": stats,
        "tables": names,
        "unsimulated_tables": pr.routes.unsimulated,
        "curve_source": curve_source,
        "join": join,
        "rule": rule if curve_source == "mrc" else None,
        "first_decision_ns": first_decision_ns if curve_source == "mrc" else None,
        "model": None if fitres is None else {**fitres.usl.to_json(), "r2": fitres.r2, "rmse_mpps": fitres.rmse_mpps},
        "models": {n: m.to_json() for n, m in models.items()},
        # calibration: the calibrated curves; mrc: the live streams' curves at the run's end
        "miss_curves": {n: (curves if ctl.feed is None else ctl.feed.miss_curves())[j, :9].tolist() for j, n in enumerate(names)},
        "mrc": None if ctl.feed is None else {"sampling": str(ctl.feed.sampling), "block_size": BLOCK, "tables": ctl.feed.stats()},
        "miss_curves_corrected": {n: ctl.curves[j, :9].tolist() for j, n in enumerate(names)},
        "elu": {"capacity_mpps": elu_cap, "utilization_target": elu_utilization, "target_mpps": elu_target,
                "utilization_release": elu_release},
        "settings": {"pmus_total": N, "period_ns": pl["period"], "duration_ns": pl["duration"], "flows": pl["flows"],
                     "sessions": pl["sessions"], "headroom": headroom, "seed": seed,
                     "slo_latency_ns": slo_latency_ns, "hit_rate_floor": hit_rate_floor, "elu_utilization": elu_utilization, "elu_release": elu_release},
    }
    cl, ev = stats["closed_loop"], stats["even_split"]
    summary["closed_loop_decisions"] = getattr(ctl, "decisions", [])
    summary["done_when"] = {
        "throughput_within_5pct": summary["closed_loop"]["throughput_ratio_vs_static"] >= 0.95,
        "less_pmu_time": summary["closed_loop"]["pmu_time_ratio_vs_static"] < 1.0,
        # more than noise in throughput (0.5 %), or a lower mean latency
        "beats_even_split": cl["throughput_mpps"] > 1.005 * ev["throughput_mpps"] or cl["mean_latency_ns"] < ev["mean_latency_ns"],
    }
    if "closed_loop_slo" in stats:
        sl = stats["closed_loop_slo"]
        summary["closed_loop_slo"] = {"pmu_time_ratio_vs_closed_loop": sl["pmu_time_ms"] / cl["pmu_time_ms"],
                                      "pmu_time_ratio_vs_static": sl["pmu_time_ms"] / st_s["pmu_time_ms"],
                                      "throughput_ratio_vs_static": sl["throughput_mpps"] / st_s["throughput_mpps"],
                                      "mean_latency_ns": sl["mean_latency_ns"], "hit_rate": sl["hit_rate"]}
    with atomic_write(out / "upf.csv") as fh:
        w = csv.writer(fh)
        w.writerow(["scheme", "t_ms", "input_mpps", "throughput_mpps", "hit_rate", "mean_latency_ns", "active_pmus"] + [f"pmus:{n}" for n in names])
        for k, s in series.items():
            for i in range(len(s["t_ms"])):
                w.writerow([k, s["t_ms"][i], s["input_mpps"][i], s["throughput_mpps"][i], s["hit_rate"][i], s["mean_latency_ns"][i],
                            s["active_pmus"][i], *s["pmus"][i]])
    plot(series, names, out / "upf.png")
    write_json(out / "summary.json", summary)
    # the closed loop's own run files, and the report over them (synapse_vmt.view)
    from synapse_vmt import report, view

    report.write_windows_csv(out / "windows.csv", sim_l.all_windows(), names, window)
    report.write_edges_csv(out / "edges.csv", sim_l.all_edges(), names)
    view.finish_run(out, kind="reproduce upf", window_ns=window, sim=sim_l, hists=hists_l, cfg=program)
    return summary


def plot(series: dict, names: list[str], path: Path) -> None:
    from synapse_vmt.report import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(2, 3, figsize=(15, 7.5))
    colors = {"closed_loop": "r", "static": "b", "even_split": "g", "closed_loop_slo": "m"}
    for k, s in series.items():
        c = colors.get(k, "k")
        ax[0, 0].plot(s["t_ms"], s["throughput_mpps"], c, label=k)
        ax[0, 1].plot(s["t_ms"], s["hit_rate"], c, label=k)
        ax[0, 2].plot(s["t_ms"], s["mean_latency_ns"], c, label=k)
        ax[1, 0].plot(s["t_ms"], s["active_pmus"], c, label=k)
    s0 = series["static"]
    ax[0, 0].plot(s0["t_ms"], s0["input_mpps"], color="grey", ls=":", label="input")
    for panel, key in ((ax[1, 1], "closed_loop"), (ax[1, 2], "closed_loop_slo" if "closed_loop_slo" in series else "static")):
        pm = np.array(series[key]["pmus"])
        if pm.size:
            panel.stackplot(series[key]["t_ms"], pm.T, labels=[n.split(".")[-1] for n in names])
        panel.set(title=f"PMUs per table ({key})", xlabel="time (ms)", ylabel="PMUs")
    ax[1, 1].legend(fontsize=6, loc="upper left")
    ax[0, 0].set(title="Throughput", ylabel="Mpps")
    ax[0, 1].set(title="Hit rate (all tables)", ylim=(0, 1.02))
    ax[0, 2].set(title="Mean per-key latency", ylabel="ns")
    ax[1, 0].set(title="Active PMUs", xlabel="time (ms)")
    for a in ax.flat:
        a.grid(alpha=0.3)
    ax[0, 0].legend(fontsize=7)
    fig.tight_layout()
    save_png(fig, path)


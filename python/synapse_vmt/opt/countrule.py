"""The count rule of the MRC-fed closed loop (``reproduce upf --curves mrc
--rule budget``): how many PMUs each table holds, from the worth of its
last PMU in ELU time.

All tables' misses go to one shared ELU, which reads at most about
:data:`ELU_BYTES_PER_US` bytes per µs (docs/explanation/fidelity.md, "Why:
the system sits at the shared ELU's knee"), and a table's miss reads the
same bytes every time (its walk: 32 B for a four-peer tunnel table, 256 B
for the uplink sessions). So a table's misses do not cost the ELU alike,
and the PMU-count rule weighs them by what they cost:

- the **worth** of table j's k-th PMU is the ELU time it saves per µs,
  ``load_j x (m_j(k-1) - m_j(k)) x bytes_j / ELU_BYTES_PER_US``: the
  misses it saves (its online sampled miss-ratio curve ``m_j`` at k against
  k-1, times the table's load) times the ELU time one of them takes;
- it is judged against a **budget**: the share of the ELU's time one PMU
  must save to be worth holding. A PMU that saves 3 % of the ELU's time
  (about 3 % of the queueing the ELU would add near its knee) is worth more
  than it costs; one that saves 0.1 % of it (a flat curve) is not.
- **hysteresis**: a PMU the table holds is kept while it saves at least
  ``release`` of the ELU; one it does not hold yet is added only if it saves
  ``add`` (> ``release``). A table whose worth sits between the two keeps
  its count, so a curve that wavers around one budget does not move PMUs
  back and forth (each move costs the caches).

:func:`budget_counts` is the exact optimum of that rule over the pool (a
dynamic program over tables and counts: a sampled curve has cliffs, e.g. a
working set that fits two PMUs but not one, where a greedy per-PMU test
stops too early). The objective: predicted ELU time (the summed worth left
on the table) plus each PMU's budget, ``release`` for those held and
``add`` for those added. For convex curves it is the per-PMU test above.
"""

from __future__ import annotations

import numpy as np

#: The ELU's read bandwidth, bytes per µs (measured: the windows past the
#: knee read a median 2,000-2,053 B/µs; fidelity.md).
ELU_BYTES_PER_US = 2000.0


def elu_cost(load_mpps: np.ndarray, curves: np.ndarray, bytes_per_miss: np.ndarray) -> np.ndarray:
    """Per table and PMU count 0..K (``curves``' columns): the share of the
    ELU's time the table's misses take (1.0: the whole ELU)."""
    per_miss_us = np.asarray(bytes_per_miss, dtype=float) / ELU_BYTES_PER_US
    return np.asarray(load_mpps, dtype=float)[:, None] * np.asarray(curves, dtype=float) * per_miss_us[:, None]


def objective(counts: np.ndarray, cost: np.ndarray, held: np.ndarray, add: float, release: float) -> float:
    """What :func:`budget_counts` minimizes for ``counts``: the ELU share of
    the misses left plus each PMU's budget (``release`` up to what the table
    holds, ``add`` beyond)."""
    k = np.asarray(counts, dtype=np.int64)
    h = np.asarray(held, dtype=np.int64)
    rows = np.arange(len(k))
    return float(cost[rows, k].sum() + release * np.minimum(k, h).sum() + add * np.maximum(k - h, 0).sum())


def budget_counts(cost: np.ndarray, held: np.ndarray, total: int, add: float, release: float,
                  min_pmus: int = 1) -> np.ndarray:
    """The counts (at least ``min_pmus`` a table, at most ``total`` in all)
    minimizing :func:`objective`: a PMU is kept while the ELU share it saves
    (``cost[j, k-1] - cost[j, k]``, from :func:`elu_cost`) is at least
    ``release``, added while it is at least ``add``. Exact (a dynamic
    program, O(T·N²)); on a tie the fewest PMUs, then the lower tables'
    counts."""
    cost = np.asarray(cost, dtype=float)
    T, K = cost.shape[0], cost.shape[1] - 1
    held = np.asarray(held, dtype=np.int64)
    lo = min(min_pmus, K)
    if lo * T > total:
        return np.full(T, lo, dtype=np.int64)
    ks = np.arange(K + 1)
    price = cost + release * np.minimum(ks[None, :], held[:, None]) + add * np.maximum(ks[None, :] - held[:, None], 0)
    price[:, :lo] = np.inf
    return separable_min(price, total)


def separable_min(price: np.ndarray, total: int) -> np.ndarray:
    """The counts ``k_j`` with ``sum k_j <= total`` minimizing
    ``sum price[j, k_j]`` (``inf``: a count not allowed), by dynamic
    programming over tables and counts (O(T·N²)); on a tie the fewest in
    all, then the smallest count for the later tables. Every table must
    allow a count that fits."""
    T, K = price.shape[0], price.shape[1] - 1
    best = np.full(total + 1, np.inf)
    best[0] = 0.0
    pick = np.zeros((T, total + 1), dtype=np.int64)
    for j in range(T):
        new = np.full(total + 1, np.inf)
        for c in np.flatnonzero(np.isfinite(best)):
            for k in range(0, min(K, total - int(c)) + 1):
                v = best[c] + price[j, k]
                if v < new[c + k] - 1e-12:
                    new[c + k], pick[j, c + k] = v, k
        best = new
    c = int(np.argmin(best + 1e-12 * np.arange(total + 1)))
    n = np.zeros(T, dtype=np.int64)
    for j in range(T - 1, -1, -1):
        n[j] = pick[j, c]
        c -= int(n[j])
    return n


def bytes_per_miss(w: dict, T: int, prev: np.ndarray | None = None) -> np.ndarray:
    """Per table, the HBM bytes one of its misses reads, from a span of
    windows (``hbm_bytes`` over ``elu_requests``); a table with no miss in
    the span keeps ``prev`` (at first: the mean of the tables seen)."""
    tab = np.asarray(w["table"], dtype=np.int64)
    b = np.bincount(tab, weights=np.asarray(w["hbm_bytes"], dtype=float), minlength=T)
    r = np.bincount(tab, weights=np.asarray(w["elu_requests"], dtype=float), minlength=T)
    out = np.full(T, np.nan) if prev is None else np.array(prev, dtype=float)
    ok = r > 0
    out[ok] = b[ok] / r[ok]
    if np.isnan(out).any():
        out[np.isnan(out)] = float(np.nanmean(out)) if ok.any() else 64.0
    return out


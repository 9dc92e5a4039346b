"""Window counters -> the optimizer's model of the traffic (paper §5, Appendix C).

The simulator (like the hardware) reports, per statistics window (default
10 µs) and per table, the PHVs that arrived and were processed and the PMUs
the table held, plus per-window counts of PHVs leaving table i for table j
(``dst = -1``: leaving the pipeline). Column names follow
``docs/simulator-api.md``: ``windows()`` and ``edges()`` return dicts of
equal-length numpy columns.

Units: rates are in Mpps (millions of PHVs per second), the unit the USL
model (:mod:`synapse_vmt.opt.usl`) is fitted in. A window of ``w`` ns in which
``k`` PHVs arrived is an offered load of ``1e3 * k / w`` Mpps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Columns = dict[str, np.ndarray]

EXIT = -1


def rate_mpps(count: np.ndarray | float, window_ns: float) -> np.ndarray:
    """PHVs counted in a window of ``window_ns`` -> Mpps."""
    return np.asarray(count, dtype=float) * 1e3 / window_ns


def window_length_ns(windows: Columns, default: float | None = None) -> float:
    """The window length, from the spacing of the window end times."""
    t = np.unique(np.asarray(windows["t_ns"], dtype=float))
    if len(t) >= 2:
        return float(np.min(np.diff(t)))
    if default is None:
        raise ValueError("one window only: pass window_ns")
    return default


def routing_matrix(
    edges: Columns, n_tables: int, prior: np.ndarray | None = None, min_count: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """P[i, j] = share of PHVs leaving table i that went to table j (the rest
    left the pipeline), and the number of PHVs that left each table.

    A table that fewer than ``min_count`` PHVs left has no measured row; it
    keeps the ``prior`` row (e.g. the CFG file's) or zeros."""
    src = np.asarray(edges["src"], dtype=np.int64)
    dst = np.asarray(edges["dst"], dtype=np.int64)
    cnt = np.asarray(edges["count"], dtype=float)
    if len(src) and (src.min() < 0 or src.max() >= n_tables or dst.min() < EXIT or dst.max() >= n_tables):
        raise ValueError(f"edge rows name tables outside 0..{n_tables - 1}")
    left = np.bincount(src, weights=cnt, minlength=n_tables)
    inner = dst >= 0
    flows = np.zeros((n_tables, n_tables))
    np.add.at(flows, (src[inner], dst[inner]), cnt[inner])
    P = np.zeros((n_tables, n_tables)) if prior is None else np.array(prior, dtype=float)
    ok = left >= min_count
    P[ok] = flows[ok] / left[ok, None]
    return P, left


@dataclass
class Traffic:
    """What the optimizer needs to know about the traffic over a span of windows."""

    entry: np.ndarray  # share of external arrivals entering each table
    P: np.ndarray  # routing matrix
    offered_mpps: np.ndarray  # mean arrival rate at each table
    processed_mpps: np.ndarray  # mean processing rate of each table
    input_mpps: float  # external arrival rate into the pipeline (the max-flow source)
    span_ns: float  # time covered


def estimate(
    windows: Columns,
    edges: Columns,
    n_tables: int,
    window_ns: float,
    prior_P: np.ndarray | None = None,
    prior_entry: np.ndarray | None = None,
) -> Traffic:
    """Routing matrix, entry shares and rates from window and edge rows.

    PHVs entering table j from outside the pipeline are the PHVs that arrived
    at j minus those that other tables sent to j."""
    tab = np.asarray(windows["table"], dtype=np.int64)
    arrived = np.bincount(tab, weights=np.asarray(windows["arrived"], dtype=float), minlength=n_tables)
    processed = np.bincount(tab, weights=np.asarray(windows["processed"], dtype=float), minlength=n_tables)
    n_windows = len(np.unique(np.asarray(windows["t_ns"], dtype=float)))
    span = max(n_windows, 1) * window_ns
    P, _ = routing_matrix(edges, n_tables, prior_P)
    dst = np.asarray(edges["dst"], dtype=np.int64)
    inner = dst >= 0
    internal = np.bincount(dst[inner], weights=np.asarray(edges["count"], dtype=float)[inner], minlength=n_tables)
    external = np.clip(arrived - internal, 0.0, None)
    total = external.sum()
    if total > 0:
        entry = external / total
    else:
        entry = np.zeros(n_tables) if prior_entry is None else np.array(prior_entry, dtype=float)
    return Traffic(
        entry=entry,
        P=P,
        offered_mpps=rate_mpps(arrived, span),
        processed_mpps=rate_mpps(processed, span),
        input_mpps=float(rate_mpps(total, span)),
        span_ns=span,
    )


@dataclass
class Samples:
    """(offered load, throughput, PMUs) points of one table, one per window."""

    load_mpps: np.ndarray
    throughput_mpps: np.ndarray
    pmus: np.ndarray

    def __len__(self) -> int:
        return len(self.load_mpps)

    def extend(self, other: Samples) -> Samples:
        return Samples(
            np.concatenate([self.load_mpps, other.load_mpps]),
            np.concatenate([self.throughput_mpps, other.throughput_mpps]),
            np.concatenate([self.pmus, other.pmus]),
        )

    @staticmethod
    def empty() -> Samples:
        return Samples(np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64))


def usl_samples(windows: Columns, window_ns: float, n_tables: int, min_arrived: float = 1.0) -> list[Samples]:
    """Per table, the (load, throughput, PMU count) of every window in which at
    least ``min_arrived`` PHVs arrived (idle windows say nothing about capacity)."""
    tab = np.asarray(windows["table"], dtype=np.int64)
    arrived = np.asarray(windows["arrived"], dtype=float)
    processed = np.asarray(windows["processed"], dtype=float)
    pmus = np.asarray(windows["pmus"], dtype=np.int64)
    out = []
    for j in range(n_tables):
        m = (tab == j) & (arrived >= min_arrived)
        out.append(Samples(rate_mpps(arrived[m], window_ns), rate_mpps(processed[m], window_ns), pmus[m]))
    return out


def warm_samples(sim, warmup_ns: float, end_ns: float, window_ns: float, n_tables: int = 1) -> list[Samples]:
    """Runs ``sim`` to ``warmup_ns`` and drops those counters (flows still
    starting, caches cold), then on to ``end_ns``: per table, the USL samples
    of the warm windows (a calibration run)."""
    sim.run_until(warmup_ns)
    sim.windows(), sim.edges()
    sim.run_until(end_ns)
    return usl_samples(sim.windows(), window_ns, n_tables)

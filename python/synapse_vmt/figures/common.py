"""Shared pieces of the figure sweeps: run one scenario point, summarise its
latency distribution, write the outputs."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from synapse_vmt.scenario import Scenario, load
from synapse_vmt.sim import Simulation


def hist_quantiles(edges: np.ndarray, counts: np.ndarray, qs=(0.05, 0.25, 0.5, 0.75, 0.95)) -> list[float]:
    """Quantiles of a bucketed histogram (bucket midpoints)."""
    n = counts.sum()
    if n == 0:
        return [float("nan")] * len(qs)
    cum = np.cumsum(counts)
    out = []
    for q in qs:
        b = int(np.searchsorted(cum, max(1, int(np.ceil(q * n)))))
        lo, hi = edges[b], edges[b + 1]
        out.append(float(lo if hi - lo <= edges[1] - edges[0] + 1e-9 else (lo + hi) / 2))
    return out


def run_point(scn: Scenario, table: str | None = None) -> dict[str, Any]:
    """Runs one scenario to its end; returns the table's summary plus
    latency quantiles and the simulation speed."""
    sim = Simulation(scn)
    summ = sim.run()
    inv = sim.check_invariants()
    if not inv["ok"]:
        raise RuntimeError(f"simulator invariant violated: {inv}")
    name = table or sim.table_names()[0]
    t = dict(summ["tables"][name])
    e, c = sim.latency_histogram(name)
    for q, v in zip(("p05", "p25", "p50", "p75", "p95"), hist_quantiles(e, c)):
        t[f"lat_{q}_ns"] = v
    t["sim_keys_per_s"] = summ["sim_keys_per_s"]
    return t


def scenario(overrides: list[str]) -> Scenario:
    return load(None, overrides)


def monotone(xs: list[float], increasing: bool, tol: float = 0.0) -> bool:
    """Whether a sequence rises (or falls), allowing `tol` of noise per step."""
    pairs = zip(xs, xs[1:])
    return all((b >= a - tol) if increasing else (b <= a + tol) for a, b in pairs)


def progress_runner(total: int, quiet: bool) -> tuple[Any, Callable[[str], None]]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    prog = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True, quiet=quiet), transient=True, disable=quiet)
    task = prog.add_task("points", total=total)

    def step(desc: str) -> None:
        prog.update(task, advance=1, description=desc)

    return prog, step

"""Shared pieces of the simulator figures: run a figure's points × seeds
through the sweep machinery (:mod:`synapse_vmt.sweep`) and reduce the seeds
to a mean and a 95 % t-interval per point; or run one point in this process
with a progress bar (figures that drive the simulator step by step)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typing import Callable

from synapse_vmt.scenario import Scenario, load
from synapse_vmt.sweep import QUANTILES, build_grid, hist_quantiles, mean_ci, run

#: Seeds per point: the full figures and ``--quick``.
SEEDS, QUICK_SEEDS = 5, 2


def seed_list(first: int, n: int) -> list[int]:
    return list(range(first, first + n))


def sweep_points(points: list[dict[str, Any]], fixed: dict[str, Any], seeds: list[int], out: Path,
                 workers: int | None = None, ray: str | None = None, quiet: bool = False, windows: bool = False,
                 fast: bool = False):
    """Runs ``points`` × ``seeds`` (resumable, in ``out``); returns the grid and
    the results' rows. A failed point stops the figure: it cannot be drawn.
    ``fast``: in the fast mode (docs/fast-mode.md)."""
    g = build_grid(points, fixed=fixed, seeds=seeds, windows=windows, fast=fast)
    r = run(g, out, workers=workers, ray=ray, quiet=quiet)
    rows = r["results"].to_pylist()
    bad = [x for x in rows if x["error"]]
    if bad:
        raise RuntimeError(f"{len(bad)} of {len(rows)} points failed, the first: {bad[0]['error']} (see {out}/points)")
    return g, rows


def over_seeds(rows: list[dict[str, Any]], keys: list[str], metrics: list[str]) -> list[dict[str, Any]]:
    """One row per distinct ``keys`` (in order of first appearance): each
    metric's mean over the seeds, and ``METRIC_lo``/``METRIC_hi`` its 95 %
    t-interval, and ``seeds``, how many there were."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    out = []
    for key, rs in groups.items():
        a: dict[str, Any] = dict(zip(keys, key))
        a["seeds"] = len(rs)
        for m in metrics:
            a[m], a[f"{m}_lo"], a[f"{m}_hi"] = mean_ci([r[m] for r in rs])
        out.append(a)
    return out


def monotone(xs: list[float], increasing: bool, tol: float = 0.0) -> bool:
    """Whether a sequence rises (or falls), allowing `tol` of noise per step."""
    pairs = zip(xs, xs[1:])
    return all((b >= a - tol) if increasing else (b <= a + tol) for a, b in pairs)


def errbar(rows: list[dict], m: str) -> list[list[float]]:
    """matplotlib's ``yerr`` for a metric's interval around its mean."""
    return [[r[m] - r[f"{m}_lo"] for r in rows], [r[f"{m}_hi"] - r[m] for r in rows]]


def run_point(scn: Scenario, table: str | None = None) -> dict[str, Any]:
    """Runs one scenario to its end in this process; returns the table's
    summary plus latency quantiles and the simulation speed."""
    from synapse_vmt.sim import Simulation, finish_checked

    sim = Simulation(scn)
    summ = sim.run()
    name = table or sim.table_names()[0]
    t = dict(summ["tables"][name])
    e, c = sim.latency_histogram(name)
    for (col, _), v in zip(QUANTILES, hist_quantiles(e, c, [q for _, q in QUANTILES])):
        t[col] = v
    t["sim_keys_per_s"] = summ["sim_keys_per_s"]
    finish_checked(sim)  # measured over the duration; then it must end drained
    return t


def scenario(overrides: list[str]) -> Scenario:
    return load(None, overrides)


def progress_runner(total: int, quiet: bool) -> tuple[Any, Callable[[str], None]]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    prog = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True, quiet=quiet), transient=True, disable=quiet)
    task = prog.add_task("points", total=total)

    def step(desc: str) -> None:
        prog.update(task, advance=1, description=desc)

    return prog, step

"""Sweeps: many simulations of one scenario, overrides × seeds, on every core or on a Ray cluster.

A grid file (TOML) names a base scenario, the seeds, and the points, either
as every combination of some overrides (``[grid]``) or as a list
(``[[points]]``); both together give every listed point × every combination::

    scenario = "base.toml"          # optional; the built-in scenario otherwise
    seeds = [1, 2, 3, 4, 5]         # optional; the scenario's seed otherwise
    windows = false                 # optional; keep each point's per-window rows
    mode = "exact"                  # optional; "fast": every point in the fast mode (docs/fast-mode.md)
    [set]                           # optional; the same overrides for every point
    duration_ns = 500000
    [grid]                          # every combination of these overrides
    "pmus.count" = [2, 4, 8]
    "pmus.block_size" = [64, 256]

Every override goes through the scenario's own ``--set`` handling
(:func:`synapse_vmt.scenario.load`), and every point is validated before
anything runs, so a bad key or value stops the sweep with one line naming the
grid file and line.

A point is one (overrides, seed) pair; its id is a hash of its whole
effective scenario (base, overrides and seed), so a rerun skips the points
whose ``points/<id>/summary.json`` exists, and editing the base scenario
reruns everything. The driver validates each point and ships its simulator
config (a small JSON tree) to a worker, which returns the summary (and, if
asked, its window rows); only the driver writes files, so a Ray cluster
needs no shared file system (except for rule or trace files a scenario names
by path). A point that fails is recorded with its error and retried on the
next run; the others go on.

``results.parquet`` has a row per (point, seed, table): a column per varied
override, ``seed``, ``point`` (the id), ``table``, ``error`` (null when the
point ran) and the table's summary figures; rows follow the grid's order, and
nothing in them depends on the machine (no wall times), so the same grid
gives the same file, bit for bit, on a local pool or on Ray.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import os
import re
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from synapse_vmt.errors import TomlLines as _Lines
from synapse_vmt.errors import UserError, read_text, read_toml

#: Top-level keys a grid file may have.
GRID_KEYS = ("scenario", "seeds", "windows", "mode", "set", "grid", "points")

#: Latency quantiles added to every table's summary figures.
QUANTILES = (("lat_p05_ns", 0.05), ("lat_p25_ns", 0.25), ("lat_p50_ns", 0.5), ("lat_p75_ns", 0.75), ("lat_p95_ns", 0.95))


@dataclass(frozen=True)
class Point:
    """One simulation: the varied overrides (dotted key → value), the seed,
    the effective simulator config and its hash."""

    overrides: dict[str, Any]
    seed: int
    config: dict[str, Any] = field(repr=False, compare=False)
    id: str = ""


@dataclass
class Grid:
    """The validated points of a sweep, in the grid's order."""

    points: list[Point]
    #: The varied override keys (the Parquet's override columns), in order.
    keys: list[str]
    windows: bool = False
    source: str = "<grid>"


# ---------------------------------------------------------------- grid files


def toml_literal(v: Any) -> str:
    """A value as a TOML literal, for the scenario's ``key=value`` overrides."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_literal(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_literal(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"no TOML literal for {type(v).__name__}")


#: Tables an override replaces whole rather than key by key: a table's rules
#: are either generated or a file, so ``{path = ...}`` must replace ``generate``.
WHOLE = ("rules",)


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    """``{"pmus": {"count": 2}}`` (TOML's bare dotted keys) → ``{"pmus.count": 2}``."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and k not in WHOLE:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _scenario_source(base: str | None) -> str:
    return "<default scenario>" if base is None else str(base)


def load_grid(path: str | Path, fast: bool = False) -> Grid:
    """Reads and validates a grid file; every point's scenario is built here.
    ``fast`` (or ``mode = "fast"`` in the file): every point in the fast mode."""
    source = str(path)
    text = read_text(path)
    tree = read_toml(path)
    where = _Lines(text)

    def fail(line: int, msg: str) -> UserError:
        return UserError(f"{source}:{line}: {msg}")

    for k in tree:
        if k not in GRID_KEYS:
            raise fail(where.key(k), f"{k}: unknown key, expected one of {', '.join(GRID_KEYS)}")
    scenario = tree.get("scenario")
    if scenario is not None:
        if not isinstance(scenario, str):
            raise fail(where.key("scenario"), "scenario: expected a file name (a string)")
        if not Path(scenario).is_absolute():
            scenario = str(Path(path).resolve().parent / scenario)
    seeds = tree.get("seeds")
    if seeds is not None and not (isinstance(seeds, list) and seeds and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)):
        raise fail(where.key("seeds"), "seeds: expected a non-empty list of integers >= 0")
    windows = tree.get("windows", False)
    if not isinstance(windows, bool):
        raise fail(where.key("windows"), "windows: expected true or false")
    mode = tree.get("mode", "exact")
    if mode not in ("exact", "fast"):
        raise fail(where.key("mode"), "mode: expected \"exact\" or \"fast\"")
    fast = fast or mode == "fast"
    fixed = tree.get("set", {})
    grid = tree.get("grid", {})
    points = tree.get("points", [])
    for name, v in (("set", fixed), ("grid", grid)):
        if not isinstance(v, dict):
            raise fail(where.key(name), f"{name}: expected a table ([{name}])")
    if not (isinstance(points, list) and all(isinstance(p, dict) for p in points)):
        raise fail(where.key("points"), "points: expected a list of tables ([[points]])")
    fixed, grid = _flatten(fixed), _flatten(grid)
    for k, vs in grid.items():
        if not isinstance(vs, list) or not vs:
            raise fail(where.key(k, "grid"), f"grid.{k}: expected a non-empty list of values")
    listed = [_flatten(p) for p in points] or [{}]
    combos = [dict(zip(grid, vs)) for vs in itertools.product(*grid.values())] if grid else [{}]
    for k in grid:
        if k == "seed":
            raise fail(where.key(k, "grid"), "grid.seed: vary the seed with seeds = [...]")
    rows = []
    for i, p in enumerate(listed):
        if "seed" in p:
            raise fail(where.key("seed", "points", i), "points.seed: vary the seed with seeds = [...]")
        for c in combos:
            both = set(p) & set(c)
            if both:
                k = sorted(both)[0]
                raise fail(where.key(k, "points", i), f"points.{k}: also in [grid]")
            rows.append((i, {**p, **c}))
    keys = list(dict.fromkeys([*[k for p in listed for k in p], *grid]))

    def line_of(k: str, i: int) -> int:
        if k in grid:
            return where.key(k, "grid")
        if k in fixed:
            return where.key(k, "set")
        return where.key(k, "points", i) if points else where.key(k)

    try:
        return build_grid(rows, fixed, seeds, scenario, windows, keys, source=source, line_of=line_of, fast=fast)
    except _PointError as e:
        raise fail(e.line, e.msg) from None


class _PointError(Exception):
    def __init__(self, line: int, msg: str):
        self.line, self.msg = line, msg


def build_grid(rows: Iterable[tuple[int, dict[str, Any]] | dict[str, Any]], fixed: dict[str, Any] | None = None,
               seeds: list[int] | None = None, scenario: str | Path | None = None, windows: bool = False,
               keys: list[str] | None = None, source: str = "<grid>",
               line_of: Callable[[str, int], int] | None = None, fast: bool = False) -> Grid:
    """The points of ``rows`` (override dicts) × ``seeds`` on top of the base
    scenario and the ``fixed`` overrides, each validated as ``--set`` would be.
    ``fast``: each point runs in the fast mode (its config carries the
    scenario's ``[fast]`` table, so its id differs from the exact point's).
    From Python: ``build_grid([{"pmus.count": 2}, {"pmus.count": 4}], seeds=[1, 2])``."""
    from synapse_vmt.scenario import load

    fixed = dict(fixed or {})
    rows = [r if isinstance(r, tuple) else (i, r) for i, r in enumerate(rows)]
    if keys is None:
        keys = list(dict.fromkeys(k for _, r in rows for k in r))
    base = _scenario_source(scenario)
    load(scenario)  # the base scenario's own errors name its file, not the grid
    points: list[Point] = []
    for i, r in rows:
        ovr = {**fixed, **r}
        strs = [f"{k}={toml_literal(v)}" for k, v in ovr.items()]
        try:
            scn = load(scenario, strs)
        except UserError as e:
            # The first override whose addition breaks the scenario is the one to
            # blame (there is one: the base scenario alone loaded).
            bad = next(iter(ovr))
            for n in range(1, len(strs) + 1):
                try:
                    load(scenario, strs[:n])
                except UserError:
                    bad = list(ovr)[n - 1]
                    break
            msg = str(e).removeprefix(f"{base}: ").removeprefix("--set ")
            what = f"{bad} = {toml_literal(ovr[bad])}: {msg}"
            if line_of is None:
                raise UserError(f"{source}: {what}") from None
            raise _PointError(line_of(bad, i), what) from None
        cfg0 = scn.sim_config()
        if fast:
            cfg0["fast"] = scn.fast.model_dump()
        for s in ([scn.seed] if seeds is None else seeds):
            cfg = {**cfg0, "seed": s}  # a validated int: as --set seed=s would give
            pid = hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:16]
            points.append(Point({k: r.get(k) for k in keys}, s, cfg, pid))
    return Grid(points, keys, windows, source)


# ---------------------------------------------------------------- one point (runs in a worker)


def hist_quantiles(edges, counts, qs) -> list[float]:
    """Quantiles of a bucketed latency histogram: the bucket's low edge for a
    unit-width bucket (exact there), its midpoint for the wider ones."""
    import numpy as np

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


def simulate(config: dict[str, Any], windows: bool = False) -> dict[str, Any]:
    """Runs one simulator config to its end (in a worker process or Ray task).
    Returns ``{"summary": ..., "windows": columns or None, "error": None}``, or
    the error's text: a failing point never raises."""
    try:
        from synapse_vmt import _core
        from synapse_vmt.sim import Simulation, finish_checked

        # A grid's points mostly share their rule sets: building the lookup
        # structure once per worker, not per point, is most of a fast
        # point's cost (the runs are the same, bit for bit).
        _core.reuse_structures(True)
        t0 = time.perf_counter()
        sim = Simulation(config)
        if "fast" in config:
            summ = sim.run_fast()
            summ.pop("windows", None)
            for t in summ["tables"].values():
                # Intervals as plain columns of results.parquet.
                for k, (lo, hi) in t.pop("interval").items():
                    t[f"{k}_lo"], t[f"{k}_hi"] = lo, hi
            summ["warnings"] = sim.warnings
            summ["wall_s"] = time.perf_counter() - t0
            return {"summary": summ, "windows": None, "error": None}
        summ = sim.run()
        for name, t in summ["tables"].items():
            e, c = sim.latency_histogram(name)
            for (col, _), v in zip(QUANTILES, hist_quantiles(e, c, [q for _, q in QUANTILES])):
                t[col] = v
        w = None
        if windows:
            w = {k: v for k, v in sim.all_windows().items()}
            w["table_name"] = [sim.table_names()[int(j)] for j in w["table"]] if "table" in w else []
        # Measured over the duration; then the run must end drained.
        summ["invariants"] = finish_checked(sim)
        summ["warnings"] = sim.warnings
        summ["wall_s"] = time.perf_counter() - t0
        return {"summary": summ, "windows": w, "error": None}
    except Exception as e:  # noqa: BLE001 - recorded, not raised: one bad point must not stop a sweep
        return {"summary": None, "windows": None, "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc()}


# ---------------------------------------------------------------- running


def _point_dir(out: Path, p: Point) -> Path:
    return out / "points" / p.id


def is_done(out: Path, p: Point) -> bool:
    return (_point_dir(out, p) / "summary.json").is_file()


def _record(out: Path, p: Point, res: dict[str, Any]) -> None:
    """Writes a point's files (driver side). summary.json last: it marks the point done."""
    from synapse_vmt.report import write_json

    d = _point_dir(out, p)
    d.mkdir(parents=True, exist_ok=True)
    meta = {"id": p.id, "overrides": p.overrides, "seed": p.seed}
    write_json(d / "scenario.json", p.config)
    if res["error"] is not None:
        write_json(d / "error.json", {**meta, "error": res["error"], "traceback": res.get("traceback", "")})
        return
    if (d / "error.json").exists():
        (d / "error.json").unlink()
    if res.get("windows") is not None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        tmp = d / ".windows.parquet.tmp"
        pq.write_table(pa.table({k: list(v) if isinstance(v, list) else v for k, v in res["windows"].items()}), tmp)
        os.replace(tmp, d / "windows.parquet")
    write_json(d / "summary.json", {**meta, **res["summary"]})


def _pool(workers: int) -> ProcessPoolExecutor:
    """A process pool; spawned, not forked: a fork would copy the driver's
    threads (rich's refresh thread, Ray's) half-way through what they do."""
    import multiprocessing as mp

    return ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _kill_half_started(e: BaseException) -> None:
    """Stops the processes of a Ray node whose start-up raised: the node is
    not Ray's global node yet, so ``ray.shutdown()`` cannot reach them."""
    tb = e.__traceback__
    while tb is not None:
        node = tb.tb_frame.f_locals.get("self")
        if type(node).__name__ == "Node" and hasattr(node, "kill_all_processes"):
            node.kill_all_processes(check_alive=False, allow_graceful=False, wait=True)
            return
        tb = tb.tb_next


def _ray_init(address: str, workers: int | None):
    try:
        import ray
    except ImportError:
        raise UserError("--ray: Ray is not installed; pip install 'synapse-vmt[ray]'") from None
    if not ray.is_initialized():
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        # A local instance's node now and then fails to start within one of
        # Ray's fixed waits (the raylet's 30 s registration, the GCS port
        # file; seen on a loaded 2-core machine): stop what was started, so
        # no orphaned Ray processes stay, and try again, three times at most.
        for attempt in (1, 2, 3):
            try:
                if address == "local":
                    ray.init(num_cpus=workers or default_workers(), **kw)
                else:
                    ray.init(address=address, **kw)
                break
            except Exception as e:  # Ray raises a bare Exception when its node does not start
                _kill_half_started(e)
                ray.shutdown()
                msg = str(e).strip()
                first = msg.splitlines()[0] if msg else type(e).__name__
                if address == "local" and "timed out" in msg.lower() and attempt < 3:
                    continue
                if isinstance(e, (ConnectionError, RuntimeError, ValueError)):  # no cluster there, a bad address
                    raise UserError(f"--ray {address}: cannot connect to a Ray cluster: {first}") from None
                raise UserError(f"--ray {address}: Ray did not start: {first}") from None
    return ray


def run(grid: Grid, out: str | Path, workers: int | None = None, ray: str | None = None, quiet: bool = False,
        on_point: Callable[[Point, dict], None] | None = None, pool: ProcessPoolExecutor | None = None) -> dict[str, Any]:
    """Runs every unfinished point of ``grid`` and writes ``out/results.parquet``.

    ``workers``: processes of the local pool (default: every core; 1 runs in
    this process). ``ray``: ``"auto"`` (a running cluster), an address, or
    ``"local"`` (start a local Ray instance with ``workers`` CPUs). ``pool``:
    an already started process pool to use instead (``workers`` is then ignored). Returns
    ``{"ran", "skipped", "failed", "points", "wall_s", "results"}``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    todo: dict[str, Point] = {}
    for p in grid.points:
        if not is_done(out, p):
            todo.setdefault(p.id, p)
    skipped = len({p.id for p in grid.points}) - len(todo)
    failed = 0
    t0 = time.perf_counter()
    prog, step = _progress(len(todo), quiet)

    def done(p: Point, res: dict) -> None:
        nonlocal failed
        _record(out, p, res)
        failed += res["error"] is not None
        if on_point:
            on_point(p, res)
        step(p, res)

    with prog:
        pending = list(todo.values())
        if ray is not None:
            r = _ray_init(ray, workers)
            task = r.remote(num_cpus=1)(simulate)
            # A bounded number in flight: the driver holds a few refs per CPU
            # of the cluster, not one per point of a million-point sweep.
            window = max(2, 2 * int(r.cluster_resources().get("CPU", 1)))
            queue = iter(pending)
            refs: dict = {}
            while True:
                for p in itertools.islice(queue, window - len(refs)):
                    refs[task.remote(p.config, grid.windows)] = p
                if not refs:
                    break
                ready, _ = r.wait(list(refs), num_returns=1)
                for ref in ready:
                    done(refs.pop(ref), r.get(ref))
        elif pool is None and ((workers or default_workers()) == 1 or len(pending) <= 1):
            for p in pending:
                done(p, simulate(p.config, grid.windows))
        else:
            with contextlib.nullcontext(pool) if pool else _pool(workers or default_workers()) as ex:
                futs = {ex.submit(simulate, p.config, grid.windows): p for p in pending}
                while futs:
                    ready, _ = wait(list(futs), return_when=FIRST_COMPLETED)
                    for f in ready:
                        done(futs.pop(f), f.result())
    wall = time.perf_counter() - t0
    table = results_table(grid, out)
    write_results(table, out / "results.parquet")
    return {"ran": len(todo), "skipped": skipped, "failed": failed, "points": len(grid.points), "wall_s": wall,
            "results": table}


def _progress(total: int, quiet: bool):
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    prog = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                    TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.description}"),
                    console=Console(stderr=True, quiet=quiet), transient=True, disable=quiet)
    task = prog.add_task("", total=total, rate="")
    t0 = time.perf_counter()
    n = 0

    def step(p: Point, res: dict) -> None:
        nonlocal n
        n += 1
        what = ", ".join(f"{k}={v}" for k, v in p.overrides.items())
        status = "FAILED " if res["error"] else ""
        prog.update(task, advance=1, description=f"{status}{what} seed={p.seed}",
                    rate=f"{n / max(time.perf_counter() - t0, 1e-9):.2f} points/s")

    return prog, step


# ---------------------------------------------------------------- results


def results_table(grid: Grid, out: Path):
    """A row per (point, seed, table) from the points' files, in grid order."""
    import pyarrow as pa

    rows: list[dict[str, Any]] = []
    figures: list[str] = []
    for p in grid.points:
        d = _point_dir(Path(out), p)
        head = {**{k: p.overrides.get(k) for k in grid.keys}, "seed": p.seed, "point": p.id}
        if (d / "summary.json").is_file():
            s = json.loads((d / "summary.json").read_text())
            for name, t in s["tables"].items():
                nums = {k: v for k, v in t.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
                figures += [k for k in nums if k not in figures]
                rows.append({**head, "table": name, "error": None, **nums})
        else:
            err = "not run"
            if (d / "error.json").is_file():
                err = json.loads((d / "error.json").read_text())["error"]
            rows.append({**head, "table": None, "error": err})
    cols = [*grid.keys, "seed", "point", "table", "error", *figures]
    data = {}
    for c in cols:
        vals = [r.get(c) for r in rows]
        if c in figures:
            # Integers stay integers unless a column mixes in floats.
            isf = any(isinstance(v, float) for v in vals)
            data[c] = pa.array([None if v is None else (float(v) if isf else int(v)) for v in vals],
                               pa.float64() if isf else pa.int64())
        elif c in ("point", "table", "error"):
            data[c] = pa.array(vals, pa.string())
        elif c == "seed":
            data[c] = pa.array(vals, pa.int64())
        else:
            try:
                data[c] = pa.array(vals)
            except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed types: show them as text
                data[c] = pa.array([None if v is None else toml_literal(v) for v in vals], pa.string())
    return pa.table(data)


def write_results(table, path: Path) -> None:
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def read_windows(out: str | Path, p: Point):
    """A point's per-window rows (``windows = true``) as a pyarrow table."""
    import pyarrow.parquet as pq

    return pq.read_table(_point_dir(Path(out), p) / "windows.parquet")


# ---------------------------------------------------------------- statistics over seeds


def mean_ci(values, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and the two ends of its ``level`` t-interval (Student's t over the
    seeds); with one value the interval is that value."""
    import numpy as np
    from scipy import stats

    x = np.asarray([v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))], float)
    if len(x) == 0:
        return (math.nan, math.nan, math.nan)
    m = float(x.mean())
    if len(x) < 2:
        return (m, m, m)
    h = float(stats.t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return (m, m - h, m + h)


# ---------------------------------------------------------------- scaling


def bench(grid: Grid, out: str | Path, workers: int = 2, rounds: int = 3, quiet: bool = True) -> dict[str, Any]:
    """Points per second on ``grid`` with 1 and ``workers`` local processes and
    on a local Ray instance with ``workers`` CPUs. All three are started and
    warmed up (imports, a tiny simulation per worker) first, their start-up
    timed apart; then ``rounds`` rounds run the grid on each in turn, on a
    fresh directory each time, so that a burst of other load on the machine
    hits all three alike; the median round counts. Also checks that every
    ``results.parquet`` is identical."""
    import shutil
    import statistics

    out = Path(out)
    tiny = build_grid([{}], fixed={"duration_ns": 20_000, "tables.0.rules.generate.count": 20, "traffic.flows": 50},
                      seeds=[1]).points[0].config
    with contextlib.ExitStack() as stack:
        setups: list[tuple[str, dict[str, Any], float]] = []
        for w in sorted({1, workers}):
            t0 = time.perf_counter()
            ex = stack.enter_context(_pool(w))
            list(ex.map(simulate, [tiny] * (2 * w)))  # start every worker and import everything
            setups.append((f"{w} local worker{'s' if w > 1 else ''}", {"pool": ex}, time.perf_counter() - t0))
        t0 = time.perf_counter()
        r = _ray_init("local", workers)
        stack.callback(r.shutdown)
        task = r.remote(num_cpus=1)(simulate)
        r.get([task.remote(tiny) for _ in range(2 * workers)])
        setups.append((f"Ray local, {workers} CPUs", {"ray": "local", "workers": workers}, time.perf_counter() - t0))
        walls: dict[str, list[float]] = {name: [] for name, _, _ in setups}
        files = []
        for k in range(rounds):
            for j, (name, kw, _) in enumerate(setups):
                d = out / f"run{j}"
                shutil.rmtree(d, ignore_errors=True)
                res = run(grid, d, quiet=quiet, **kw)
                if res["failed"]:
                    raise RuntimeError(f"{name}: {res['failed']} points failed (see {d}/points)")
                walls[name].append(res["wall_s"])
                files.append((d / "results.parquet").read_bytes())
    runs = []
    for (name, kw, start), w in zip(setups, walls.values()):
        med = statistics.median(w)
        runs.append({"run": name, "workers": kw.get("workers") or kw["pool"]._max_workers, "wall_s": med,
                     "wall_s_rounds": w, "points_per_s": len(grid.points) / med, "start_s": start})
    for x in runs:
        x["ratio_to_1_worker"] = x["points_per_s"] / runs[0]["points_per_s"]
    return {"points": len(grid.points), "rounds": rounds, "identical_results": all(f == files[0] for f in files),
            "runs": runs}

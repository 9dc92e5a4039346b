"""``synapse sweep GRID.toml -o DIR``: a grid of scenario overrides × seeds,
on every local core or on a Ray cluster (the grid format and the results:
:mod:`synapse_vmt.sweep`, docs/how-to/sweeps.md). ``--bench`` measures points per
second on a fixed small grid with 1 and 2 local workers and on a local Ray
instance."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("sweep")
@click.argument("grid", required=False, type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(file_okay=False), default=None,
              help="Output directory (results.parquet, points/<id>/); default results/sweep.")
@click.option("-w", "--workers", type=click.IntRange(min=1), default=None,
              help="Local worker processes (default: every core); the CPUs of a --ray local instance.")
@click.option("--ray", "ray_address", metavar="auto|ADDRESS|local", default=None,
              help="Run on Ray: 'auto' (a running cluster), its ADDRESS, or 'local' (start one here).")
@click.option("--bench", is_flag=True,
              help="Measure points/s with 1 and 2 workers and local Ray (2 CPUs) on GRID or a built-in one.")
@click.option("--fast", is_flag=True, help="Every point in the fast mode (as mode = \"fast\" in GRID; docs/fast-mode.md).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or summary line.")
def sweep(grid: str | None, output: str | None, workers: int | None, ray_address: str | None, bench: bool,
          fast: bool, quiet: bool) -> None:
    """Run every point of GRID (a TOML file: overrides × seeds) and write
    DIR/results.parquet, each point's DIR/points/<id>/summary.json and
    DIR/report.html (tables x points).
    Finished points are skipped on a rerun; a failing point is recorded
    with its error and the others go on (exit status 1 if any failed)."""
    from synapse_vmt import sweep as sw
    from synapse_vmt.errors import UserError

    if bench:
        _bench(Path(output or "results/sweep-bench"), grid, quiet)
        return
    if grid is None:
        raise UserError("sweep: expected a GRID file (or --bench)")
    g = sw.load_grid(grid, fast=fast)
    out = Path(output or "results/sweep")
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a directory")
    r = sw.run(g, out, workers=workers, ray=ray_address, quiet=quiet)
    from synapse_vmt import view
    from synapse_vmt.view import rundir

    rundir.write_run_json(out / "run.json", "sweep", 0.0, grid=str(grid))
    view.write_report([out])
    if not quiet:
        click.echo(f"{r['points']} points: ran {r['ran']} in {r['wall_s']:.1f} s, skipped {r['skipped']} already done, "
                   f"{r['failed']} failed → {out / 'results.parquet'}")
    if r["failed"]:
        t = r["results"]
        for pid, err in sorted({(p, e) for p, e in zip(t["point"].to_pylist(), t["error"].to_pylist()) if e}):
            click.echo(f"failed {pid}: {err}", err=True)
        raise SystemExit(1)


#: The --bench grid: the default scenario's load (about 30 Mpps) for 6 ms,
#: about 180,000 keys and half a second of one core a point, eight seeds:
#: points alike in cost.
BENCH_SET = {"duration_ns": 6_000_000, "traffic.flows": 7200, "traffic.flow_duration_ns": 3_000_000}
BENCH_SEEDS = list(range(1, 9))


def _bench(out: Path, grid: str | None, quiet: bool) -> None:
    """Points/s with 1 and 2 local workers and on local Ray with 2 CPUs (warm
    workers, median of 3 interleaved rounds), their ratio to one worker, and
    whether the results agree."""
    import json
    import os
    import platform

    from synapse_vmt import sweep as sw

    g = sw.load_grid(grid) if grid else sw.build_grid([{}], fixed=BENCH_SET, seeds=BENCH_SEEDS)
    load = os.getloadavg()[0]  # other jobs on the machine skew every ratio: say how busy it was
    res = sw.bench(g, out, workers=2, quiet=quiet)
    res.update({"cpu": _cpu_name(), "cores": sw.default_workers(), "python": platform.python_version(),
                "load_average_before": load, "load_average_after": os.getloadavg()[0]})
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(res, indent=2) + "\n")
    click.echo(f"{res['points']} points on {res['cpu']} ({res['cores']} cores), load average {load:.1f} before, "
               f"{res['load_average_after']:.1f} after; "
               f"results identical: {res['identical_results']}")
    for x in res["runs"]:
        rounds = ", ".join(f"{w:.1f}" for w in x["wall_s_rounds"])
        click.echo(f"  {x['run']:<18} {x['points_per_s']:6.3f} points/s  (median of {rounds} s; start-up {x['start_s']:4.1f} s)"
                   f"  {x['ratio_to_1_worker']:5.2f}x one worker")
    click.echo(f"wrote {out / 'bench.json'}")


def _cpu_name() -> str:
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown CPU"

"""``synapse sweep GRID.toml -o DIR``: a grid of scenario overrides × seeds,
on every local core or on a Ray cluster (the grid format and the results:
:mod:`synapse_vmt.sweep`, README "Sweeps"). ``--bench`` measures points per
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
              help="Measure points/s with 1 and 2 workers and local Ray (2 CPUs) on a small built-in grid.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or table.")
def sweep(grid: str | None, output: str | None, workers: int | None, ray_address: str | None, bench: bool,
          quiet: bool) -> None:
    """Run every point of GRID (a TOML file: overrides × seeds) and write
    DIR/results.parquet and each point's DIR/points/<id>/summary.json.
    Finished points are skipped on a rerun; a failing point is recorded
    with its error and the others go on (exit status 1 if any failed)."""
    from synapse_vmt import sweep as sw
    from synapse_vmt.errors import UserError

    if bench:
        _bench(Path(output or "results/sweep-bench"), grid, quiet)
        return
    if grid is None:
        raise UserError("sweep: expected a GRID file (or --bench)")
    g = sw.load_grid(grid)
    out = Path(output or "results/sweep")
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a directory")
    r = sw.run(g, out, workers=workers, ray=ray_address, quiet=quiet)
    if not quiet:
        click.echo(f"{r['points']} points: ran {r['ran']} in {r['wall_s']:.1f} s, skipped {r['skipped']} already done, "
                   f"{r['failed']} failed → {out / 'results.parquet'}")
    if r["failed"]:
        t = r["results"]
        for pid, err in sorted({(p, e) for p, e in zip(t["point"].to_pylist(), t["error"].to_pylist()) if e}):
            click.echo(f"failed {pid}: {err}", err=True)
        raise SystemExit(1)


#: The --bench grid: 8 short points, alike in cost (one size, eight seeds).
BENCH_SET = {"duration_ns": 300_000, "traffic.flows": 1000, "traffic.flow_duration_ns": 300_000}


def _bench(out: Path, grid: str | None, quiet: bool) -> None:
    """Points/s with 1 and 2 local workers and on local Ray with 2 CPUs, each
    on a fresh directory, and the ratio to one worker; checks the three
    results.parquet files are identical."""
    import json
    import platform
    import shutil

    from synapse_vmt import sweep as sw

    g = sw.load_grid(grid) if grid else sw.build_grid([{}], fixed=BENCH_SET, seeds=list(range(1, 9)))
    runs = [("1 worker", 1, None), ("2 workers", 2, None), ("Ray local, 2 CPUs", 2, "local")]
    rows = []
    files = []
    for name, w, ray in runs:
        d = out / name.split(",")[0].replace(" ", "-").lower()
        shutil.rmtree(d, ignore_errors=True)
        r = sw.run(g, d, workers=w, ray=ray, quiet=quiet)
        rows.append((name, len(g.points) / r["wall_s"], r["wall_s"]))
        files.append((d / "results.parquet").read_bytes())
    base = rows[0][1]
    cpu = _cpu_name()
    res = {"cpu": cpu, "cores": sw.default_workers(), "python": platform.python_version(), "points": len(g.points),
           "identical_results": all(f == files[0] for f in files),
           "runs": [{"run": n, "points_per_s": pps, "wall_s": wall, "ratio_to_1_worker": pps / base} for n, pps, wall in rows]}
    (out / "bench.json").write_text(json.dumps(res, indent=2) + "\n")
    click.echo(f"{len(g.points)} points on {cpu} ({res['cores']} cores); results identical: {res['identical_results']}")
    for n, pps, wall in rows:
        click.echo(f"  {n:<18} {pps:6.3f} points/s  ({wall:5.1f} s)  {pps / base:5.2f}x one worker")


def _cpu_name() -> str:
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown CPU"

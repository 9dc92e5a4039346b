"""``synapse run``: simulate a scenario and write its results.

Writes ``windows.csv`` (per window and table), ``edges.csv`` (routing
counts), ``run.png`` (hit rate, latency distribution, HBM bandwidth,
throughput), ``scenario.json`` (the effective configuration) and
``summary.json`` shaped ``{"tables": {NAME: {...}}, "sim_keys_per_s": ...}``.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from synapse_vmt import report
from synapse_vmt.errors import UserError
from synapse_vmt.scenario import load
from synapse_vmt.sim import Simulation


def run_scenario(scn, out: Path, quiet: bool = False) -> dict:
    """Runs a validated scenario and writes every output file; returns the summary."""
    sim = Simulation(scn)
    names = sim.table_names()
    con = Console(stderr=True, quiet=quiet)
    with Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.fields[t]:.0f}/{task.total:.0f} µs"),
                  TimeElapsedColumn(), console=con, transient=True, disable=quiet) as prog:
        task = prog.add_task("sim", total=scn.duration_ns / 1e3, t=0.0)
        summary = sim.run(progress=lambda t, end: prog.update(task, completed=t / 1e3, t=t / 1e3))
    inv = sim.check_invariants()
    if not inv["ok"]:
        raise RuntimeError(f"simulator invariant violated: {inv}")
    summary["invariants"] = inv
    w = sim.all_windows()
    report.write_windows_csv(out / "windows.csv", w, names, scn.window_ns)
    report.write_edges_csv(out / "edges.csv", sim.all_edges(), names)
    hists = {n: sim.latency_histogram(n) for n in names}
    report.plot_run(out / "run.png", w, names, scn.window_ns, hists)
    report.write_json(out / "scenario.json", scn.sim_config())
    report.write_json(out / "summary.json", summary)
    return summary


@click.command("run")
@click.argument("scenario", required=False, type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(file_okay=False), default="results/default", show_default=True,
              help="Output directory.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a scenario field, e.g. --set pmus.count=4 (repeatable).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or table.")
def run(scenario: str | None, output: str, overrides: tuple[str, ...], quiet: bool) -> None:
    """Simulate SCENARIO (a TOML file; the built-in default if omitted) and
    write per-window metrics, plots and summary.json to the output directory."""
    scn = load(scenario, overrides)
    out = Path(output)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a directory")
    summary = run_scenario(scn, out, quiet)
    if quiet:
        return
    t = Table(title=f"synapse run → {out}")
    for c in ["table", "hit rate", "mean lat (ns)", "p99 lat (ns)", "HBM GB/s", "offered Mpps", "thr. Mpps", "keys"]:
        t.add_column(c, justify="right")
    for name, s in summary["tables"].items():
        t.add_row(name, f"{s['hit_rate']:.3f}", f"{s['mean_latency_ns']:.1f}", f"{s['p99_latency_ns']:.1f}",
                  f"{s['hbm_gbps']:.3f}", f"{s['offered_mpps']:.2f}", f"{s['throughput_mpps']:.2f}", str(s["keys"]))
    con = Console()
    con.print(t)
    con.print(f"simulated {summary['sim_time_ns'] / 1e3:.0f} µs at {summary['sim_keys_per_s'] / 1e6:.2f} M keys/s")

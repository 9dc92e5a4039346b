"""``synapse run``: simulate a scenario and write its results.

Writes ``windows.csv`` (per window and table), ``edges.csv`` (routing
counts), ``run.png`` (hit rate, latency distribution, HBM bandwidth,
throughput), ``scenario.json`` (the effective configuration),
``summary.json`` shaped ``{"tables": {NAME: {...}}, "sim_keys_per_s": ...}``
and the report (``report.html`` with ``latency.csv`` and ``run.json``:
:mod:`synapse_vmt.view`).

The summary covers the scenario's duration; the run then ends drained
(:func:`synapse_vmt.sim.finish`): PHVs still in flight after ``drain_ns``
are a failure (printed, exit status 1, files written), and tables without a
PMU are a warning printed before the run (``summary.json``: ``warnings``).
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
from synapse_vmt.sim import Simulation, failure, fast_windows

EXIT_FAILED = 1


def warn(msg: str) -> None:
    """A warning line on stderr (printed even with --quiet)."""
    click.secho(f"synapse: warning: {msg}", fg="yellow", err=True)


def info(msg: str) -> None:
    """An information line on stderr."""
    click.echo(f"synapse: {msg}", err=True)


def check_finished(summary: dict) -> None:
    """After the output files are written: a run that did not end well
    (PHVs in flight after the drain) is reported and exits with status 1;
    any other broken invariant is a simulator bug (an exception)."""
    inv = summary["invariants"]
    msg = failure(inv)
    if msg is None:
        return
    if inv.get("drained", True) and inv.get("in_flight", 0) == 0:
        raise RuntimeError(msg)
    click.secho(f"synapse: run failed: {msg}", fg="red", err=True)
    raise SystemExit(EXIT_FAILED)


def run_scenario(scn, out: Path, quiet: bool = False) -> dict:
    """Runs a validated scenario and writes every output file; returns the
    summary (its ``invariants`` say whether the run drained: see
    :func:`check_finished`)."""
    sim = Simulation(scn)
    names = sim.table_names()
    for w in sim.warnings:
        warn(w)
    con = Console(stderr=True, quiet=quiet)
    with Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.fields[t]:.0f}/{task.total:.0f} µs"),
                  TimeElapsedColumn(), console=con, transient=True, disable=quiet) as prog:
        task = prog.add_task("sim", total=scn.duration_ns / 1e3, t=0.0)
        summary = sim.run(progress=lambda t, end: prog.update(task, completed=t / 1e3, t=t / 1e3))
    # Measured over the scenario's duration, before the drain.
    hists = {n: sim.latency_histogram(n) for n in names}
    w = sim.all_windows()
    summary["invariants"] = sim.finish()
    summary["warnings"] = sim.warnings
    if scn.updates:
        summary["updates"] = sim.update_stats()
    report.write_windows_csv(out / "windows.csv", w, names, scn.window_ns)
    report.write_edges_csv(out / "edges.csv", sim.all_edges(), names)
    report.plot_run(out / "run.png", w, names, scn.window_ns, hists)
    report.write_json(out / "scenario.json", scn.sim_config())
    report.write_json(out / "summary.json", summary)
    from synapse_vmt import view

    view.finish_run(out, kind="run", window_ns=scn.window_ns, sim=sim, hists=hists)
    return summary


def run_fast(scn, out: Path) -> dict:
    """The fast mode (docs/fast-mode.md): ``summary.json`` with the exact
    run's keys, an ``interval`` per figure and the sampling record,
    ``scenario.json``, and ``report.html`` over its estimated windows
    (``windows.csv``: per window arrivals, hits, misses, HBM bytes and PMUs;
    no per-window latency, which the fast mode does not estimate: empty)."""
    sim = Simulation(scn)
    before = len(sim.warnings)
    for w in sim.warnings:
        warn(w)
    summary = sim.run_fast()
    for w in sim.warnings[before:]:
        warn(w)
    summary["warnings"] = sim.warnings
    report.write_json(out / "scenario.json", scn.sim_config())
    report.write_json(out / "summary.json", {k: v for k, v in summary.items() if k != "windows"})
    w = fast_windows(summary)
    if w and len(w["t_ns"]):
        import numpy as np

        from synapse_vmt import view

        nan = np.full(len(w["t_ns"]), np.nan)
        report.write_windows_csv(out / "windows.csv", {**w, "lat_mean_ns": nan, "lat_p99_ns": nan},
                                 sim.table_names(), scn.window_ns)
        view.finish_run(out, kind="fast", window_ns=scn.window_ns)
    return summary


@click.command("run")
@click.argument("scenario", required=False, type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(file_okay=False), default="results/default", show_default=True,
              help="Output directory.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a scenario field, e.g. --set pmus.count=4 (repeatable).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or table.")
@click.option("--mode", type=click.Choice(["exact", "fast"]), default="exact", show_default=True,
              help="exact: the cycle-level engine; fast: sampled estimates with intervals, for sweeps (docs/fast-mode.md).")
@click.option("--fast", "fast_flag", is_flag=True, help="Same as --mode fast.")
@click.option("--p4", "p4", type=click.Path(dir_okay=False), metavar="PROG.json",
              help="Run a P4 program (p4c BMv2 JSON, or builtin:up4): every keyed table a VMT from one PMU pool.")
@click.option("--entries", "entries_file", type=click.Path(dir_okay=False), help="Table entries for --p4 (CLI commands or runtime JSON).")
@click.option("--pcap", type=click.Path(dir_okay=False), help="Packets for --p4 (pcap or pcapng), replayed at --rate-mpps.")
@click.option("--traffic", "traffic_file", type=click.Path(dir_okay=False),
              help="Generated packets for --p4: a TOML file with a [traffic] table (traffic classes, as in a program scenario).")
@click.option("--rate-mpps", type=click.FloatRange(min=1e-6), default=50.0, show_default=True, help="Replay rate of --pcap.")
@click.option("--pmus", type=click.IntRange(min=1), default=16, show_default=True, help="PMU pool of --p4, split evenly over the tables.")
@click.option("--duration-ns", type=click.FloatRange(min=1.0), help="Simulated time of --p4 (default: the capture plus a drain).")
@click.option("--drain-ns", type=click.FloatRange(min=0.0),
              help="--p4: how long the run may go on after the last arrival until every PHV has left (default 1e6; "
                   "a scenario's drain_ns).")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of --p4 runs.")
@click.option("--timestamps", is_flag=True, help="Replay --pcap at its own timestamps instead of --rate-mpps.")
@click.option("--ingress-port", default="0", show_default=True, metavar="N|interface",
              help="standard_metadata.ingress_port of --pcap's packets: a port, or 'interface' (pcapng's interface id).")
@click.option("--out-pcap", type=click.Path(file_okay=False), metavar="DIR",
              help="Write the program's output packets of --pcap to DIR, one pcap per egress port.")
@click.option("--engine", type=click.Choice(["rust", "python"]), default="rust", show_default=True,
              help="Executor of --pcap's packets: the compiled program in Rust, or the Python interpreter (the oracle).")
@click.option("--codegen", type=click.Choice(["auto", "on", "off"]), default="off", show_default=True,
              help="--pcap through the program's generated code, built with cargo and cached (auto: when it can, "
                   "else the Rust executor; on: an error when it cannot), checked against the executor first.")
@click.option("--stop-at-truncated", is_flag=True,
              help="A --pcap cut short ends the run at its last complete packet with a warning (default: an error).")
def run(scenario: str | None, output: str, overrides: tuple[str, ...], quiet: bool, mode: str, fast_flag: bool, p4: str | None,
        entries_file: str | None, pcap: str | None, traffic_file: str | None, rate_mpps: float, pmus: int, duration_ns: float | None,
        drain_ns: float | None, seed: int, timestamps: bool, ingress_port: str, out_pcap: str | None, stop_at_truncated: bool,
        engine: str, codegen: str) -> None:
    """Simulate SCENARIO (a TOML file; the built-in default if omitted) and
    write per-window metrics, plots and summary.json to the output directory.

    With --p4 (or a scenario with a [program] table) a P4 program runs: its
    packets through the program's parser and tables (the interpreter), every
    keyed table a VMT; summary.json adds per table lookups, matched, actions."""
    out = Path(output)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a directory")
    fast = fast_flag or mode == "fast"
    if p4 is not None or (scenario and _is_program_scenario(scenario)):
        from synapse_vmt.p4 import simrun

        if p4 is not None:
            traffic = simrun.load_traffic(traffic_file) if traffic_file else None
            kw = {"program": simrun.resolve_program(p4), "entries_file": entries_file, "pcap": pcap, "traffic": traffic,
                  "rate_mpps": rate_mpps, "pmus": pmus, "duration_ns": duration_ns, "seed": seed,
                  "overrides": {} if drain_ns is None else {"drain_ns": drain_ns},
                  "timestamps": timestamps, "ingress_port": simrun.parse_ingress_port(ingress_port, "--ingress-port"),
                  "out_pcap": out_pcap, "stop_at_truncated": stop_at_truncated, "engine": engine, "codegen": codegen}
            if scenario:
                raise UserError("run: give either SCENARIO or --p4, not both")
        else:
            kw = simrun.load_scenario(scenario)
        if fast:
            fc = simrun.load_fast(scenario if p4 is None else None, overrides)
            s = simrun.run_program_fast(out, **kw, fast=fc, warn=warn)
            if not quiet:
                _print_fast(s, out)
            return
        s = simrun.run_program(out, **kw, quiet=quiet, warn=warn, info=None if quiet else info)
        if not quiet:
            _print_program(s, out)
        check_finished(s)
        return
    scn = load(scenario, overrides)
    if fast:
        out.mkdir(parents=True, exist_ok=True)
        summary = run_fast(scn, out)
        if not quiet:
            _print_fast(summary, out)
        return
    summary = run_scenario(scn, out, quiet)
    if quiet:
        check_finished(summary)
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
    _print_invariants(con, summary["invariants"])
    check_finished(summary)


def _print_fast(summary: dict, out: Path) -> None:
    """The fast run's table: each figure with its interval."""
    t = Table(title=f"synapse run --mode fast → {out}")
    cols = [("hit rate", "hit_rate", "{:.4f}"), ("mean lat (ns)", "mean_latency_ns", "{:.1f}"),
            ("p99 lat (ns)", "p99_latency_ns", "{:.0f}"), ("HBM GB/s", "hbm_gbps", "{:.3f}"),
            ("thr. Mpps", "throughput_mpps", "{:.2f}")]
    t.add_column("table")
    for c, _, _ in cols:
        t.add_column(c, justify="right")
    for name, s in summary["tables"].items():
        if "interval" not in s:
            continue  # a program's table the simulator leaves out
        iv = s["interval"]
        t.add_row(name, *[f"{f.format(s[k])} [{f.format(iv[k][0])}, {f.format(iv[k][1])}]" for _, k, f in cols])
    con = Console()
    con.print(t)
    f = summary["fast"]
    con.print(f"fast mode: {f['sampled_flows']} of {f['flows']} flows sampled, {f['elu_windows']} ELU windows, "
              f"{summary['sim_keys_per_s'] / 1e6:.1f} M keys/s ({summary['wall_s']:.3f} s)")


def _print_invariants(con: Console, inv: dict) -> None:
    """The invariants in one line: drained (and in how long) or PHVs in flight."""
    end = (f"drained in {inv['drain_ns'] / 1e3:.1f} µs" if inv.get("drained")
           else f"[red]{inv['in_flight']} PHVs in flight after the drain[/red]")
    # a program run names the simulator's drops apart from the program's (P4) drops
    dropped = (f"{inv['dropped']} dropped" if "dropped" in inv
               else f"{inv.get('fifo_overflows', 0)} input-FIFO overflows")
    con.print(f"invariants: {inv['created']} PHVs, {inv['exited']} exited, {dropped}; "
              f"{inv['wrong_action']} wrong, {inv['lost']} lost; {end}")


def _is_program_scenario(path: str) -> bool:
    import tomllib

    try:
        return "program" in tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return False  # the scenario loader reports it


def _print_program(s: dict, out: Path) -> None:
    t = Table(title=f"synapse run --p4 → {out}")
    for c in ["table", "lookups", "matched", "hit rate", "mean lat (ns)", "thr. Mpps", "top action"]:
        t.add_column(c, justify="right")
    for name, r in s["tables"].items():
        top = max(r["actions"].items(), key=lambda kv: kv[1])[0].split(".")[-1] if r["actions"] else ""
        if r.get("simulated"):
            t.add_row(name.split(".", 1)[-1], str(r["lookups"]), str(r["matched"]), f"{r['hit_rate']:.3f}", f"{r['mean_latency_ns']:.1f}",
                      f"{r['throughput_mpps']:.2f}", top)
        else:
            t.add_row(name.split(".", 1)[-1], str(r["lookups"]), str(r["matched"]), "-", "-", "-", top)
    con = Console()
    con.print(t)
    for k in ("synthesized_fields", "fallback_branches", "parser_rejects", "unsimulated_tables"):
        if s.get(k):
            con.print(f"{k}: " + ", ".join(f"{a}={b}" for a, b in s[k].items()))
    drops = s.get("p4_drops", {})
    con.print(f"{s['packets']} packets, {s['routes']} routes; P4 drops {drops.get('total', 0)}"
              + (f" ({', '.join(f'{k} {v}' for k, v in drops.get('by_reason', {}).items())})" if drops.get("by_reason") else ""))
    _print_invariants(con, s["invariants"])

"""The CPU model fitted on this machine (``synapse reproduce cpu-model``), as
the seed (``p4-target-properties.txt``) fits its model on its Xeon: the clock
and the per-packet base measured here (:mod:`synapse_vmt.cost.machine`,
:func:`synapse_vmt.cost.measure.measure_base`), our software tables measured
over 10 to 10^7 entries on one core (:mod:`synapse_vmt.cost.measure`), the
seed's forms fitted, the points and the curves plotted with the L3 size
marked.

Writes ``cpu_model.csv`` (series, n, cycles, bytes, build_s),
``cpu_model.png``, ``params-fit.toml`` (a whole parameter file for
``synapse cost --params``: this machine's fingerprint, clock, base, L3 and
fits, each fit's source with its R² and leave-one-out error; the ASIC and
Synapse sections as built in) and ``summary.json`` (machine, base, fits with
their errors, skipped points).
"""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path

import numpy as np

from synapse_vmt.cost import cpu, machine, measure
from synapse_vmt.cost.params import DEFAULT, Param, Params, default_params
from synapse_vmt.errors import atomic_write
from synapse_vmt.report import pyplot, save_png, write_json


def _grid(series: str, quick: bool) -> list[int]:
    hi = measure.SERIES[series][2]
    return measure.grid(10, min(hi, 10_000 if quick else hi))


def _progress(total: int, quiet: bool):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    prog = Progress(TextColumn("measuring"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("{task.description}"), console=Console(stderr=True, quiet=quiet), transient=True,
                    disable=quiet)
    task = prog.add_task("", total=total)
    return prog, lambda desc: prog.update(task, advance=1, description=desc)


def run(out: Path, quick: bool, quiet: bool = False, p: Params | None = None) -> dict:
    p = p or default_params()
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    min_s = 0.01 if quick else 0.1
    m = machine.fingerprint(machine.measure_clock(min_s=min_s))
    # The fits see this machine's L3 (where the exact table's pieces meet)
    if m["l3_bytes"]:
        p = p.model_copy(update={"cpu": p.cpu.model_copy(update={"l3_bytes": Param(value=m["l3_bytes"], source="sysfs")})})
    base = measure.measure_base(m["clock_hz"], min_s=min_s)
    grids = {s: _grid(s, quick) for s in measure.SERIES}
    prog, step = _progress(sum(len(g) for g in grids.values()), quiet)
    points, skipped, fits = [], {}, {}
    with prog:
        for s, ns in grids.items():
            pts, sk = measure.measure_series(s, ns, p, min_s=min_s, rounds=3, clock_hz=m["clock_hz"],
                                             on_point=lambda q: step(f"{q.series} n={q.n}"))
            for _ in sk:
                step(f"{s}: skipped")
            points += pts
            skipped[s] = sk
            fits[s] = measure.fit_series(s, pts, p)
    _write_csv(out / "cpu_model.csv", points)
    _plot(out / "cpu_model.png", points, fits, p, m)
    summary = {"machine": m, "base_cycles": base, "fits": fits, "skipped": skipped,
               "measure_s": time.perf_counter() - t0, "quick": quick}
    with atomic_write(out / "params-fit.toml") as f:
        f.write(params_toml(fits, m, base, quick))
    write_json(out / "summary.json", summary)
    return summary


def _pct(x) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.1%}"


def _r2(x) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.3f}"


def params_toml(fits: dict, m: dict, base: float, quick: bool = False) -> str:
    """A whole parameter file: this machine's [cpu] numbers, fingerprint and
    fits; the rest (ASIC, Synapse) as built in."""
    day = time.strftime("%Y-%m-%d")
    who = f"synapse reproduce cpu-model{' --quick' if quick else ''}, {m['cpu']} ({m['simd']}), {day}"
    built_in = DEFAULT.read_text()
    keep = {k: line for line in built_in.splitlines() for k in ("action_bytes", "entry_overhead_bytes", "table_overhead_bytes")
            if line.startswith(f"{k} =")}
    cpuinfo = f"{m['cpuinfo_mhz']:.0f} MHz" if m.get("cpuinfo_mhz") else "not available"
    lines = [
        f"# Written by {who}.",
        "[cpu]",
        f'base_cycles = {{ value = {base:.4g}, source = "{who}: cycles per packet of the work besides lookups (parse a 64 B '
        f'frame into the 5-tuple, hash it, write it out; no NIC I/O, which the seed\'s 146 cycles include)" }}',
        keep["action_bytes"], keep["entry_overhead_bytes"], keep["table_overhead_bytes"],
        f'l3_bytes = {{ value = {m["l3_bytes"] or 0}, source = "{who}: sysfs, L3 of CPU 0" }}',
        f'clock_hz = {{ value = {m["clock_hz"]:.6g}, source = "{who}: measured (dependent adds, one cycle each, over '
        f'thread CPU time); /proc/cpuinfo said {cpuinfo}" }}',
        "",
        "[cpu.machine]",
        f'cpu = "{m["cpu"]}"',
        f'simd = "{m["simd"]}"',
        f'l2_bytes = {m["l2_bytes"] or 0}',
        f'l3_bytes = {m["l3_bytes"] or 0}',
        f'clock_hz = {m["clock_hz"]:.6g}',
        f'source = "{who}"',
        "",
    ]
    for series, keys in [("exact", "pqrstu"), ("lpm", "pqr"), ("ternary", "ab")]:
        f = fits.get(series, {})
        lines.append(f"[cpu.fit.{series}]")
        kept = getattr(default_params().cpu.fit, series)
        for k in keys:
            if k not in f:  # this run measured nothing that fits it (e.g. no table beyond L3): the built-in value
                old = getattr(kept, k)
                lines.append(f'{k} = {{ value = {old.value:.6g}, source = "not fitted by {who} (no points for it); '
                             f'kept: {old.source}" }}')
                continue
            piece = "hyperbolic_" if series == "exact" and k in "stu" else "log_" if series == "exact" else ""
            if k in "qt":
                how = "fixed: the form has one redundant scale"
            else:
                how = (f"fitted over {f.get(f'{piece}points', f['points'])} points: RMS relative error "
                       f"{_pct(f.get(f'{piece}error'))}, R² {_r2(f.get(f'{piece}r2'))}, leave-one-out error "
                       f"{_pct(f.get(f'{piece}loo_error'))}")
            lines.append(f'{k} = {{ value = {f[k]:.6g}, source = "{who}: {how}" }}')
        lines.append("")
    return "\n".join(lines) + "\n" + built_in[built_in.index("# Intel Tofino"):]


def _write_csv(path: Path, points) -> None:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["series", "n", "cycles", "bytes", "build_s"])
    for q in points:
        w.writerow([q.series, q.n, f"{q.cycles:.4g}", q.bytes, f"{q.build_s:.4g}"])
    with atomic_write(path) as f:
        f.write(buf.getvalue())


def _plot(path: Path, points, fits: dict, p: Params, m: dict) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    colors = {"exact": "tab:blue", "lpm": "tab:green", "ternary": "tab:red", "ternary-dtree": "tab:orange"}
    for s, col in colors.items():
        pts = [q for q in points if q.series == s]
        if not pts:
            continue
        n = np.array([q.n for q in pts], float)
        c = np.array([q.cycles for q in pts], float)
        f = fits.get(s, {})
        err, r2 = f.get("error"), f.get("r2")
        loo = f.get("loo_error", f.get("log_loo_error"))
        label = f"{s} ({measure.SERIES[s][1]})" + (f": RMS rel. error {_pct(err)}, R² {_r2(r2)}, leave-one-out {_pct(loo)}"
                                                  if err is not None else "")
        ax.plot(n, c, "o", color=col, ms=4, label=label)
        x = np.geomspace(n.min(), n.max(), 200)
        if s == "ternary" and "a" in f:
            ax.plot(x, cpu.linear_form(x, f["a"], f["b"]), "-", color=col, lw=1)
        elif s == "exact" and "p" in f:
            # The cache boundary in n: where the measured footprint crosses L3; the pieces meet there.
            nb = f["boundary_n"]
            inside = x < nb
            ax.plot(x[inside], cpu.log_form(x[inside], f["p"], f["q"], f["r"]), "-", color=col, lw=1)
            if "s" in f and (~inside).any():
                ax.plot(x[~inside], cpu.exact_cycles(x[~inside], f, nb), "--", color=col, lw=1)
            ax.axvline(nb, color=col, ls=":", lw=0.8)
            ax.text(nb, c.min(), " L3 full", color=col, fontsize=7, rotation=90, va="bottom")
        elif "p" in f:
            ax.plot(x, cpu.log_form(x, f["p"], f["q"], f["r"]), "-", color=col, lw=1)
    ax.set(xscale="log", yscale="log", xlabel="table entries n", ylabel="CPU cycles per lookup (one core)",
           title=f"Software table cost on {m['cpu']} ({m['simd']}, {m['clock_hz'] / 1e9:.2f} GHz measured): "
                 "measured (dots), seed's model forms fitted (lines)")
    ax.title.set_fontsize(8)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    save_png(fig, path)

"""The CPU model fitted on this machine (``synapse reproduce cpu-model``), as
the seed (``p4-target-properties.txt``) fits its model on its Xeon: our
software tables measured over 10 to 10^7 entries on one core
(:mod:`synapse_vmt.cost.measure`), the seed's forms fitted, the points and the
curves plotted with the L3 size marked.

Writes ``cpu_model.csv`` (series, n, cycles, bytes, build_s),
``cpu_model.png``, ``params-fit.toml`` (the fitted ``[cpu.fit.*]`` sections,
with their sources and errors, ready for ``cost/params.toml``) and
``summary.json`` (machine, fits with errors, skipped points).
"""

from __future__ import annotations

import csv
import io
import platform
import time
from pathlib import Path

import numpy as np

from synapse_vmt.cost import cpu, measure
from synapse_vmt.cost.params import Params, default_params
from synapse_vmt.errors import atomic_write
from synapse_vmt.report import pyplot, save_png, write_json


def machine() -> dict:
    """CPU model name, SIMD level and core count, from /proc/cpuinfo."""
    name, flags = platform.processor() or "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and name in ("unknown", "", platform.processor()):
                name = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    simd = next((s for s in ("avx512f", "avx2", "avx", "sse4_2") if s in flags), "scalar")
    import os

    return {"cpu": name, "simd": simd.upper().replace("F", "") if simd == "avx512f" else simd.upper(), "cores": os.cpu_count()}


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
    grids = {s: _grid(s, quick) for s in measure.SERIES}
    prog, step = _progress(sum(len(g) for g in grids.values()), quiet)
    points, skipped, fits = [], {}, {}
    t0 = time.perf_counter()
    with prog:
        for s, ns in grids.items():
            pts, sk = measure.measure_series(s, ns, p, min_s=0.01 if quick else 0.1, rounds=3,
                                             on_point=lambda q: step(f"{q.series} n={q.n}"))
            for _ in sk:
                step(f"{s}: skipped")
            points += pts
            skipped[s] = sk
            fits[s] = measure.fit_series(s, pts, p)
    _write_csv(out / "cpu_model.csv", points)
    _plot(out / "cpu_model.png", points, fits, p)
    summary = {"machine": {**machine(), "clock_hz": p.cpu.clock_hz.value, "l3_bytes": p.cpu.l3_bytes.value},
               "fits": fits, "skipped": skipped, "measure_s": time.perf_counter() - t0, "quick": quick}
    with atomic_write(out / "params-fit.toml") as f:
        f.write(params_toml(fits, summary["machine"]))
    write_json(out / "summary.json", summary)
    return summary


def params_toml(fits: dict, m: dict) -> str:
    """The [cpu.fit.*] sections of params.toml for these fits."""
    day = time.strftime("%Y-%m-%d")
    lines = []
    for series, keys in [("exact", "pqrstuv"), ("lpm", "pqr"), ("ternary", "ab")]:
        f = fits.get(series, {})
        lines.append(f"[cpu.fit.{series}]")
        for k in keys:
            if k not in f:
                continue
            piece = "hyperbolic" if series == "exact" and k in "stuv" else "log" if series != "ternary" else ""
            err = f.get(f"{piece}_error" if piece else "error")
            fixed = (k == "q") or (k == "t")
            how = "fixed: the form has one redundant scale" if fixed else \
                f"fitted over {f.get(f'{piece}_points', f['points'])} points, RMS relative error {err:.1%}" if err is not None else "fitted"
            lines.append(f'{k} = {{ value = {f[k]:.6g}, source = "synapse reproduce cpu-model, {m["cpu"]} ({m["simd"]}), {day}: {how}" }}')
        lines.append("")
    return "\n".join(lines)


def _write_csv(path: Path, points) -> None:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["series", "n", "cycles", "bytes", "build_s"])
    for q in points:
        w.writerow([q.series, q.n, f"{q.cycles:.4g}", q.bytes, f"{q.build_s:.4g}"])
    with atomic_write(path) as f:
        f.write(buf.getvalue())


def _plot(path: Path, points, fits: dict, p: Params) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    colors = {"exact": "tab:blue", "lpm": "tab:green", "ternary": "tab:red", "ternary-dtree": "tab:orange"}
    l3 = p.cpu.l3_bytes.value
    for s, col in colors.items():
        pts = [q for q in points if q.series == s]
        if not pts:
            continue
        n = np.array([q.n for q in pts], float)
        c = np.array([q.cycles for q in pts], float)
        f = fits.get(s, {})
        err = f.get("error")
        label = f"{s} ({measure.SERIES[s][1]})" + (f", fit error {err:.0%}" if err is not None else "")
        ax.plot(n, c, "o", color=col, ms=4, label=label)
        x = np.geomspace(n.min(), n.max(), 200)
        if s == "ternary" and "a" in f:
            ax.plot(x, cpu.linear_form(x, f["a"], f["b"]), "-", color=col, lw=1)
        elif s == "exact" and "p" in f:
            # The cache boundary in n: where the measured footprint crosses L3.
            b = np.array([q.bytes for q in pts], float)
            per = float(np.median(b / n))
            inside = x * per < l3
            ax.plot(x[inside], cpu.log_form(x[inside], f["p"], f["q"], f["r"]), "-", color=col, lw=1)
            if "s" in f and (~inside).any():
                ax.plot(x[~inside], cpu.hyperbolic_form(x[~inside], f["s"], f["t"], f["u"], f["v"]), "--", color=col, lw=1)
            ax.axvline(l3 / per, color=col, ls=":", lw=0.8)
            ax.text(l3 / per, ax.get_ylim()[0] if False else c.min(), " L3 full", color=col, fontsize=7, rotation=90, va="bottom")
        elif "p" in f:
            ax.plot(x, cpu.log_form(x, f["p"], f["q"], f["r"]), "-", color=col, lw=1)
    m = machine()
    ax.set(xscale="log", yscale="log", xlabel="table entries n", ylabel="CPU cycles per lookup (one core)",
           title=f"Software table cost on {m['cpu']} ({m['simd']}): measured (dots), seed's model forms fitted (lines)")
    ax.title.set_fontsize(8)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    save_png(fig, path)

"""A run you can see: ``DIR/report.html`` from a run's output files.

- :mod:`.rundir` reads a run directory (the file contract: any command that
  writes those files gets a report) and writes the files the report needs
  beyond a run's own (``latency.csv``, ``cfg.json``, ``run.json``);
- :mod:`.layout` places the program's table graph;
- :mod:`.figures` draws the figures (Plotly), :mod:`.page` assembles the
  self-contained HTML page (Plotly's JavaScript embedded: it opens offline);
- :mod:`.sweep` is the page of a sweep (tables x points), :mod:`.live` the
  live view and Prometheus metrics of ``synapse serve --sim``.

Entry points: :func:`finish_run` (the one call at the end of a run),
:func:`write_report` (``synapse report DIR [DIR2]``).
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np

from synapse_vmt.errors import UserError, atomic_write
from synapse_vmt.view import rundir
from synapse_vmt.view.rundir import Run, load

__all__ = ["finish_run", "write_report", "single_page", "compare_page", "load", "Run"]


def finish_run(out: str | Path, *, kind: str, window_ns: float, sim=None, hists=None, cfg=None, **meta) -> Path:
    """After a run has written its files to ``out``: write the report's own
    inputs (``latency.csv`` from ``hists``, per table ``(edges, counts)`` as
    measured over the run's duration, by default ``sim``'s histograms now; ``cfg.json`` from
    ``cfg``: a BMv2 JSON path or a :class:`~synapse_vmt.p4.cfg.Cfg`,
    ``scenario.json`` from ``sim``'s config when the run wrote none, and
    ``run.json``), then ``out/report.html`` from the directory."""
    out = Path(out)
    if hists is None and sim is not None:
        hists = {n: sim.latency_histogram(n) for n in sim.table_names()}
    if hists is not None:
        rundir.write_latency_csv(out / "latency.csv", hists)
    if sim is not None:
        if not (out / "scenario.json").exists() and hasattr(sim, "config_json"):  # a P4 run: its simulator's config
            from synapse_vmt.report import write_json

            write_json(out / "scenario.json", json.loads(sim.config_json()))
    if cfg is not None:
        if isinstance(cfg, (str, Path)):
            from synapse_vmt.p4.bmv2 import read_bmv2

            cfg = read_bmv2(str(cfg))
        cfg.save(out / "cfg.json")
    rundir.write_run_json(out / "run.json", kind, window_ns, **meta)
    return write_report([out], out / "report.html")


def write_report(dirs: list[str | Path], path: str | Path | None = None) -> Path:
    """``report.html`` of one run directory, or of two side by side; a sweep's
    directory (``results.parquet``) gets the sweep page."""
    dirs = [Path(d) for d in dirs]
    if len(dirs) not in (1, 2):
        raise UserError("report: expected one or two run directories")
    if len(dirs) == 1 and (dirs[0] / "results.parquet").is_file() and not (dirs[0] / "windows.csv").is_file():
        from synapse_vmt.view.sweep import sweep_page

        text = sweep_page(dirs[0])
    elif len(dirs) == 1:
        text = single_page(load(dirs[0]))
    else:
        text = compare_page(load(dirs[0]), load(dirs[1]))
    path = Path(path) if path is not None else dirs[0] / "report.html"
    with atomic_write(path) as f:
        f.write(text)
    return path


# ---------------------------------------------------------------- one run

from synapse_vmt.view import figures as F  # noqa: E402
from synapse_vmt.view.page import Section, render, table_html  # noqa: E402


def facts(run: Run) -> str:
    """The header's key facts (the live view refreshes them)."""
    return _facts(run)


def _facts(run: Run) -> str:
    span = run.windows * run.window_ns
    inv = run.invariants
    ok = all(v.get("ok", v.get("wrong_action", 0) == 0 and v.get("lost", 0) == 0) for v in inv.values()) if inv else None
    status = "-" if ok is None else ('<span class="ok">hold</span>' if ok else '<span class="bad">VIOLATED</span>')
    b = run.bottleneck
    items = [f"<b>{len(run.names)}</b> tables simulated" + (f" of {len(run.graph_nodes)} drawn" if len(run.graph_nodes) != len(run.names) else ""),
             (f"the last <b>{F.fmt_ns(span)}</b> of {F.fmt_ns(float(run.t_ns[-1]))} simulated ({run.windows} windows of {F.fmt_ns(run.window_ns)})"
              if "live" in run.kind else f"<b>{F.fmt_ns(span)}</b> simulated in {run.windows} windows of {F.fmt_ns(run.window_ns)}"
              + (f", drawn in bins of {run.bin_windows}" if run.bin_windows > 1 else "")),
             f"invariants: {status}"]
    if b:
        t = run.tables[b]
        items.append(f'bottleneck: <b style="color:#d62728">{html.escape(b)}</b> ({t["lookup_time_share"]:.0%} of lookup time, '
                     f"p99 {F.fmt_ns(t['p99_latency_ns'])}, hit rate {t['hit_rate']:.3f})")
    return '<p class="facts">' + "".join(f"<span>{x}</span>" for x in items) + "</p>"


def _header(run: Run, title: str) -> str:
    cmd = html.escape(run.command or "(not recorded)")
    return (f"<h1>{html.escape(title)}</h1><p class=\"note\">{html.escape(run.kind)} · <code>{html.escape(str(run.path))}</code></p>"
            f"<p>command: <code>{cmd}</code></p><div id=\"facts\">{_facts(run)}</div>")


def tables_html(run: Run) -> str:
    order = run.by_load
    rows = []
    for n in order:
        t = run.tables[n]
        rows.append([html.escape(n), f"{t['lookups']:,}", F.fmt(t["hit_rate"]), F.fmt(t["offered_mpps"]), F.fmt(t["throughput_mpps"]),
                     F.fmt_ns(t["mean_latency_ns"]), F.fmt_ns(t["p50_latency_ns"]), F.fmt_ns(t["p99_latency_ns"]),
                     F.fmt(t["hbm_gbps"]), f"{t['pmus_mean']:.3g}", f"{t['lookup_time_share']:.1%}"])
    hl = {order.index(run.bottleneck)} if run.bottleneck else set()
    return table_html(["table", "lookups", "hit rate", "offered Mpps", "thr. Mpps", "mean lat.", "p50", "p99", "HBM GB/s",
                       "PMUs", "lookup time"], rows, hl)


def invariants_html(inv: dict[str, dict]) -> str:
    if not inv:
        return "<p>no invariants recorded (summary.json has none)</p>"
    keys = list(dict.fromkeys(k for v in inv.values() for k in v))
    rows = []
    for k in keys:
        cells = []
        for v in inv.values():
            x = v.get(k, "")
            bad = (k in ("lost", "duplicates", "wrong_action", "stale_answers", "wrong_version_routes") and x not in (0, "")) or (k == "ok" and x is False)
            cells.append(f'<span class="bad">{x}</span>' if bad else html.escape(str(x)))
        rows.append([html.escape(k), *cells])
    return table_html(["check", *inv.keys()], rows)


def config_html(run: Run) -> str:
    parts = []
    if run.config:
        parts.append("<details open><summary>simulator configuration (scenario.json)</summary>"
                     f"<pre>{html.escape(json.dumps(run.config, indent=1))}</pre></details>")
    s = {k: v for k, v in run.summary.items() if k not in ("tables", "closed_loop_decisions", "schemes", "invariants")}
    if s:
        parts.append("<details><summary>run summary (summary.json, without the per-table part)</summary>"
                     f"<pre>{html.escape(json.dumps(s, indent=1, default=str))}</pre></details>")
    return "".join(parts) or "<p>no configuration recorded</p>"


GRAPH_NOTE = ("Tables as nodes (size: lookups), control flow left to right in rows (a row continues in the next, as text does); "
              "edge width: PHVs that took the edge (edges.csv), dotted: a program edge no PHV took. "
              "The buttons colour the nodes; hover a node for its numbers, an edge's middle for its PHVs. "
              "Bottleneck: the table whose keys spent the most time in lookups (keys × mean latency).")
HEAT_NOTE = ("One row per table, the most offered PHVs at the top; one column per statistics window. "
             "Latencies on a log colour scale; grey: no row for that table in that window. Hover for the values.")


def sections(run: Run) -> list[Section]:
    hidden = ""
    if run.graph_hidden:
        hidden = (f"<details><summary>{len(run.graph_hidden)} more tables of the program, which no packet visited "
                  "(not drawn)</summary><p>" + ", ".join(html.escape(n) for n in run.graph_hidden) + "</p></details>")
    out = [Section("graph", "The program's table graph", F.graph_figure(run), html=hidden, note=GRAPH_NOTE),
           Section("heatmap", "Per-table time series", F.heatmap_figure(run), note=HEAT_NOTE + (
               f" This run's {run.windows} windows are drawn in bins of {run.bin_windows}: a column is a bin "
               "(counters summed, latencies and PMUs averaged), hover for its windows' smallest and largest values."
               if run.bin_windows > 1 else ""))]
    if run.closed_loop:
        out.append(Section("pmus", "PMU allocation over time", F.pmu_figure(run),
                           note="PMUs held per table (stacked); triangles: the controller's decisions that moved PMUs, hover for what each changed."))
    if run.schemes:
        out.append(Section("schemes", "Schemes compared (upf.csv)", F.schemes_figure(run),
                           note="The closed loop (the tables above) against the static oracle and the even split, per control period."))
    if run.latency:
        out.append(Section("cdf", "Per-key latency distributions", F.cdf_figure([("", run)]),
                           note=f"CDF per table (log x); the {F.TOP_LINES} tables with the most lookup time drawn, click the legend for the others."))
        out.append(Section("latmap", "Where each table's keys wait", F.latency_heatmap(run),
                           note="Share of each table's keys per latency bucket (log colour): a tail of keys waiting on the ELU shows as a second bright band."))
    out.append(Section("tables", "Tables", html=tables_html(run), note="Run totals per table, the most offered PHVs first; the bottleneck highlighted."))
    out.append(Section("invariants", "Invariants", html=invariants_html(run.invariants),
                       note="Every PHV left once with the linear oracle's action (check_invariants)."))
    out.append(Section("config", "Configuration", html=config_html(run)))
    return out


def single_page(run: Run, live_interval_ms: int | None = None, embed_js: bool = True) -> str:
    return render(f"Synapse report: {run.path}", _header(run, "Synapse run report"), sections(run), live_interval_ms, embed_js)


# ---------------------------------------------------------------- two runs


def _delta_values(a: Run, b: Run) -> dict[str, dict[str, float]]:
    out = {}
    for n in a.names:
        if n not in b.tables:
            continue
        ta, tb = a.tables[n], b.tables[n]
        r = {}
        for k in ("hit_rate", "throughput_mpps", "hbm_gbps", "pmus_mean"):
            r[k] = tb[k] - ta[k]
        for k in ("p99_latency_ns", "mean_latency_ns"):
            r[k] = float(np.log2(tb[k] / ta[k])) if ta[k] > 0 and tb[k] > 0 else float("nan")
        out[n] = r
    return out


DELTA_COLORS = [
    ("p99_latency_ns", "p99 latency, log2(B/A)", "", False),
    ("mean_latency_ns", "mean latency, log2(B/A)", "", False),
    ("hit_rate", "hit rate, B − A", "", False),
    ("throughput_mpps", "throughput, B − A", "Mpps", False),
    ("hbm_gbps", "HBM, B − A", "GB/s", False),
    ("pmus_mean", "PMUs, B − A", "", False),
]


def _diverging(fig) -> None:
    """Centre every colouring of the delta graph on zero (blue: B lower, red: B higher)."""
    tr = next(t for t in fig.data if t.name == "tables")
    c = np.asarray(tr.marker.color, dtype=float)
    m = float(np.nanmax(np.abs(c))) if np.isfinite(c).any() else 1.0
    tr.marker.update(cmin=-max(m, 1e-9), cmax=max(m, 1e-9), colorscale="RdBu_r", cmid=None)
    for btn in fig.layout.updatemenus[0].buttons:
        cc = np.asarray(btn.args[0]["marker.color"][0], dtype=float)
        mm = float(np.nanmax(np.abs(cc))) if np.isfinite(cc).any() else 1.0
        btn.args[0].update({"marker.cmin": [-max(mm, 1e-9)], "marker.cmax": [max(mm, 1e-9)], "marker.colorscale": ["RdBu_r"]})


def compare_html(a: Run, b: Run) -> str:
    rows = []
    order = [n for n in a.by_load if n in b.tables] + [n for n in b.by_load if n not in a.tables]
    for n in order:
        ta, tb = a.tables.get(n), b.tables.get(n)

        def cell(k, f):
            if ta is None or tb is None:
                return f(ta[k]) if ta else "", f(tb[k]) if tb else ""
            return f(ta[k]), f(tb[k])

        row = [html.escape(n)]
        for k, f in (("hit_rate", F.fmt), ("throughput_mpps", F.fmt), ("p99_latency_ns", F.fmt_ns), ("mean_latency_ns", F.fmt_ns),
                     ("pmus_mean", lambda v: f"{v:.3g}")):
            x, y = cell(k, f)
            row += [x, y]
            if ta and tb and np.isfinite(ta[k]) and np.isfinite(tb[k]):
                d = tb[k] - ta[k]
                if k.endswith("_ns"):
                    row.append(f"{tb[k] / ta[k]:.3g}×" if ta[k] > 0 else "-")
                else:
                    row.append(f"{d:+.3g}")
            else:
                row.append("only in " + ("A" if ta else "B"))
        rows.append(row)
    head = ["table"]
    for t in ("hit rate", "thr. Mpps", "p99", "mean lat.", "PMUs"):
        head += [f"{t} A", "B", "Δ"]
    return table_html(head, rows)


def _config_diff(a: dict, b: dict, prefix: str = "") -> list[tuple[str, object, object]]:
    out = []
    for k in dict.fromkeys([*a, *b]):
        x, y = a.get(k, "(absent)"), b.get(k, "(absent)")
        if isinstance(x, dict) and isinstance(y, dict):
            out += _config_diff(x, y, f"{prefix}{k}.")
        elif x != y:
            out.append((f"{prefix}{k}", x, y))
    return out


def compare_page(a: Run, b: Run) -> str:
    head = (f"<h1>Synapse: two runs compared</h1>"
            f"<p>A: <code>{html.escape(str(a.path))}</code> ({html.escape(a.kind)}): <code>{html.escape(a.command or '-')}</code><br>"
            f"B: <code>{html.escape(str(b.path))}</code> ({html.escape(b.kind)}): <code>{html.escape(b.command or '-')}</code></p>"
            f"<div class=\"cols\"><div><b>A</b>{_facts(a)}</div><div><b>B</b>{_facts(b)}</div></div>")
    secs = []
    both = Run(**{**a.__dict__, "graph_nodes": list(dict.fromkeys([*a.graph_nodes, *b.graph_nodes])),
                  "graph_edges": {**{e: 0.0 for e in b.graph_edges}, **a.graph_edges}})
    g = F.graph_figure(both, color="p99_latency_ns", values=_delta_values(a, b), color_options=DELTA_COLORS)
    _diverging(g)
    secs.append(Section("graph", "Where B differs from A", g,
                        note="A's graph (edge widths: A's PHVs), nodes coloured by B against A: red where B is higher. "
                             "Latency as log2(B/A): +1 is twice as slow. The bottleneck ring is A's."))
    secs.append(Section("diff", "Per table: A, B and the difference", html=compare_html(a, b)))
    order = a.by_load + [n for n in b.by_load if n not in a.tables]
    rng = F.grid_ranges([a, b])
    secs.append(Section("heat-a", "Per-table time series: A", F.heatmap_figure(a, order, rng), note="Rows in A's load order; colour ranges shared with B."))
    secs.append(Section("heat-b", "Per-table time series: B", F.heatmap_figure(b, order, rng)))
    if a.latency and b.latency:
        secs.append(Section("cdf", "Latency distributions: A solid, B dashed", F.cdf_figure([("A", a), ("B", b)])))
    diff = _config_diff(a.config, b.config)
    secs.append(Section("config", "Configuration differences",
                        html=table_html(["key", "A", "B"], [[html.escape(k), html.escape(json.dumps(x)), html.escape(json.dumps(y))] for k, x, y in diff])
                        if diff else "<p>the two simulator configurations are the same</p>"))
    inv = {f"A {k}": v for k, v in a.invariants.items()} | {f"B {k}": v for k, v in b.invariants.items()}
    secs.append(Section("invariants", "Invariants", html=invariants_html(inv)))
    return render("Synapse: two runs compared", head, secs)

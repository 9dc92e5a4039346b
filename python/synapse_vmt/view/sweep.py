"""The report of a sweep (``synapse sweep -o DIR``): tables x points.

Read from ``DIR/results.parquet`` (a row per point, seed and table;
:mod:`synapse_vmt.sweep`) and ``DIR/run.json`` (the command line): the
points with their overrides and status, and per figure a heatmap with a row
per table (the most offered PHVs at the top) and a column per point, in the
grid's order, so a change of PMU count or block size reads left to right.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from synapse_vmt.errors import UserError
from synapse_vmt.view import figures as F
from synapse_vmt.view.page import Section, render, table_html

#: (column of results.parquet, title, unit, log colour)
FIGURES = [
    ("hit_rate", "hit rate", "", False),
    ("throughput_mpps", "throughput", "Mpps", False),
    ("lat_p50_ns", "p50 latency", "ns", True),
    ("p99_latency_ns", "p99 latency", "ns", True),
    ("mean_latency_ns", "mean latency", "ns", True),
    ("hbm_gbps", "HBM bandwidth", "GB/s", False),
]


def _read(d: Path) -> dict[str, list]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(d / "results.parquet").to_pydict()
    except (OSError, pa.ArrowInvalid) as e:
        raise UserError(f"{d / 'results.parquet'}: cannot read ({e})") from None


def sweep_page(d: Path) -> str:
    t = _read(d)
    meta = json.loads((d / "run.json").read_text()) if (d / "run.json").is_file() else {}
    fixed = {"seed", "point", "table", "error"}
    # the override columns come first in results.parquet, up to "seed"
    keys = list(t)[:list(t).index("seed")]
    n = len(t["point"])
    points: dict[tuple[str, int], dict] = {}
    for i in range(n):
        p = points.setdefault((t["point"][i], t["seed"][i]), {"label": ", ".join(f"{k}={t[k][i]}" for k in keys) + f", seed {t['seed'][i]}",
                                                              "error": t["error"][i], "tables": {}})
        if t["table"][i] is not None:
            p["tables"][t["table"][i]] = {c: t[c][i] for c in t if c not in fixed}
    cols = list(points)
    load: dict[str, float] = {}
    for p in points.values():
        for name, r in p["tables"].items():
            load[name] = load.get(name, 0.0) + float(r.get("offered_mpps") or 0.0)
    tables = sorted(load, key=lambda x: (-load[x], x))
    rows = [[html.escape(points[c]["label"]), html.escape(c[0]),
             '<span class="bad">' + html.escape(points[c]["error"]) + "</span>" if points[c]["error"] else '<span class="ok">ran</span>']
            for c in cols]
    head = (f"<h1>Synapse sweep report</h1><p class=\"note\">sweep · <code>{html.escape(str(d))}</code></p>"
            f"<p>command: <code>{html.escape(meta.get('command') or '(not recorded)')}</code></p>"
            f'<p class="facts"><span><b>{len(cols)}</b> points</span><span><b>{len(tables)}</b> tables</span>'
            f"<span><b>{sum(1 for c in cols if points[c]['error'])}</b> failed</span></p>")
    secs = []
    if tables:
        secs.append(Section("points", "Tables x points", _heatmaps(points, cols, tables),
                            note="A row per table (the most offered PHVs at the top), a column per point in the grid's order; hover for the values."))
    secs.append(Section("list", "Points", html=table_html(["overrides", "point", "status"], rows),
                        note="Each point's files: points/&lt;point&gt;/ (summary.json, scenario.json)."))
    return render(f"Synapse sweep: {d}", head, secs)


def _heatmaps(points: dict, cols: list, tables: list[str]) -> go.Figure:
    figs = [f for f in FIGURES if any(f[0] in r for p in points.values() for r in p["tables"].values())]
    fig = make_subplots(rows=len(figs), cols=1, shared_xaxes=True, vertical_spacing=0.35 / len(figs),
                        subplot_titles=[f"{t} ({u})" if u else t for _, t, u, _ in figs])
    x = [points[c]["label"] for c in cols]
    lab = F.labels(tables)
    y = [lab[n] for n in tables]
    for i, (key, title, unit, log) in enumerate(figs):
        g = np.array([[float(points[c]["tables"].get(n, {}).get(key) or np.nan) for c in cols] for n in tables])
        z, lo, hi = F._scale(g, log)
        bar = dict(len=0.9 / len(figs), y=1 - (i + 0.5) / len(figs), yanchor="middle", thickness=12)
        if log:
            tv, tt = F._log_ticks(lo, hi, unit)
            bar.update(tickvals=tv, ticktext=tt)
        fig.add_trace(go.Heatmap(z=F._r4(z), x=x, y=y, zmin=lo, zmax=hi, colorscale=F.COLORSCALES.get(key, "YlOrRd"),
                                 colorbar=bar, customdata=F._r4(g),
                                 hovertemplate=f"%{{y}}<br>%{{x}}<br>{title}: %{{customdata:.4g}} {unit}<extra></extra>"), row=i + 1, col=1)
    fig.update_yaxes(autorange="reversed", tickmode="array", tickvals=y, ticktext=y)
    per = 60 + 15 * len(tables)
    fig.update_layout(font=F.FONT, height=per * len(figs) + 200, margin=dict(l=10, r=10, t=40, b=160), plot_bgcolor="#f4f4f4")
    fig.update_xaxes(tickangle=-30, tickfont=dict(size=10))
    return fig

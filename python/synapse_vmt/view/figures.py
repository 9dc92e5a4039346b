"""The report's interactive figures (Plotly), built from a :class:`~synapse_vmt.view.rundir.Run`.

Every figure reads at 100 tables: per-table views are rows of heatmaps
(tables sorted by load, one row each, every row labelled) rather than one
line per table; line plots show the heaviest tables and keep the others a
legend click away.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from synapse_vmt.view.layout import layout
from synapse_vmt.view.rundir import METRICS, Run

FONT = dict(family="DejaVu Sans, Arial, sans-serif", size=12)
#: Lines drawn (the rest: a legend click away).
TOP_LINES = 10


# ---------------------------------------------------------------- formatting


def fmt_ns(v: float) -> str:
    if v is None or not np.isfinite(v):
        return "-"
    if v < 1e3:
        return f"{v:.3g} ns"
    if v < 1e6:
        return f"{v / 1e3:.3g} µs"
    return f"{v / 1e6:.3g} ms"


def fmt(v: float, unit: str = "", digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "-"
    if unit == "ns":
        return fmt_ns(v)
    return f"{v:.{digits}g}{' ' + unit if unit else ''}"


def labels(names: list[str]) -> dict[str, str]:
    """Short labels: the name after its last dot, unless two tables share it."""
    last = [n.rsplit(".", 1)[-1] for n in names]
    return {n: (s if last.count(s) == 1 else n) for n, s in zip(names, last)}


def _log_ticks(lo: float, hi: float, unit: str) -> tuple[list[float], list[str]]:
    """Colour-bar ticks for a log10 scale between lo and hi: 1-2-5 per decade,
    else 1-3, else decades (at most 4 ticks where that suffices: the bars are narrow)."""
    for ms in ((1, 2, 5), (1, 3), (1,)):
        vals = [math.log10(m) + e for e in range(int(math.floor(lo)) - 1, int(math.ceil(hi)) + 1) for m in ms]
        vals = [x for x in vals if lo - 1e-9 <= x <= hi + 1e-9]
        if len(vals) <= 4 or ms == (1,):
            return vals, [fmt(10 ** x, unit) for x in vals]
    return [], []


def _scale(values: np.ndarray, log: bool) -> tuple[np.ndarray, float, float]:
    """(colour values, cmin, cmax): log10 for latencies."""
    v = np.asarray(values, dtype=float)
    if log:
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(v > 0, np.log10(np.maximum(v, 1e-12)), np.nan)
    fin = v[np.isfinite(v)]
    if not len(fin):
        return v, 0.0, 1.0
    lo, hi = float(fin.min()), float(fin.max())
    if hi - lo < 1e-9:  # one value: a range around it (not below 0 for a count or a rate)
        pad = 0.5 if log else max(abs(lo) * 0.1, 0.5)
        lo, hi = (lo - pad if log or lo < 0 else max(lo - pad, 0.0)), hi + pad
    return v, lo, hi


COLORSCALES = {"hit_rate": "RdYlGn", "throughput_mpps": "Blues", "lat_p50_ns": "YlOrRd", "lat_p99_ns": "YlOrRd",
               "lat_mean_ns": "YlOrRd", "hbm_gbps": "Purples", "pmus": "Greens", "offered_mpps": "Blues",
               "lookup_time_share": "Reds"}


def _r4(a) -> np.ndarray:
    """Four significant digits (NaN stays NaN; Plotly writes it as null): the JSON stays small."""
    a = np.asarray(a, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        mag = np.where(np.isfinite(a) & (a != 0), np.floor(np.log10(np.abs(np.where(a == 0, 1, a)))), 0)
        return np.round(a / 10 ** (mag - 3)) * 10 ** (mag - 3)


#: hover formats per unit (Plotly's d3 formats)
HOVER = {"": ":.4g", "ns": ":.4g", "Mpps": ":.4g", "GB/s": ":.4g"}


def _round(a: np.ndarray) -> list:
    """Four significant digits, NaN as null: the figure's JSON stays small."""
    a = np.asarray(a, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        mag = np.where(np.isfinite(a) & (a != 0), np.floor(np.log10(np.abs(np.where(a == 0, 1, a)))), 0)
        r = np.round(a / 10 ** (mag - 3)) * 10 ** (mag - 3)
    return [None if not np.isfinite(x) else float(f"{x:.4g}") for x in r.ravel()] if a.ndim == 1 else [_round(row) for row in a]


# ---------------------------------------------------------------- the table graph

#: Node colourings of the graph, switched by its buttons: (key in Run.tables, title, unit, log).
NODE_COLORS = [
    ("hit_rate", "hit rate", "", False),
    ("p99_latency_ns", "p99 latency", "ns", True),
    ("mean_latency_ns", "mean latency", "ns", True),
    ("throughput_mpps", "throughput", "Mpps", False),
    ("hbm_gbps", "HBM bandwidth", "GB/s", False),
    ("pmus_mean", "PMUs held (mean)", "", False),
    ("lookup_time_share", "share of lookup time", "", False),
]
_NODE_SCALE = {"p99_latency_ns": "YlOrRd", "mean_latency_ns": "YlOrRd", "pmus_mean": "Greens"}


def node_hover(run: Run, n: str) -> str:
    t = run.tables.get(n)
    if t is None:
        return f"<b>{n}</b><br>no packet visited this table"
    if t["lookups"] == 0:
        return f"<b>{n}</b><br>no key looked up (yet)"
    lines = [f"<b>{n}</b>",
             f"lookups {t['lookups']:,}   hit rate {fmt(t['hit_rate'])}",
             f"offered {fmt(t['offered_mpps'], 'Mpps')} → processed {fmt(t['throughput_mpps'], 'Mpps')}",
             f"latency mean {fmt_ns(t['mean_latency_ns'])}, p50 {fmt_ns(t['p50_latency_ns'])}, p99 {fmt_ns(t['p99_latency_ns'])}",
             f"HBM {fmt(t['hbm_gbps'], 'GB/s')}   PMUs {t['pmus_mean']:.3g} (max {t['pmus_max']})",
             f"share of the pipeline's lookup time {t['lookup_time_share']:.1%}"]
    extra = run.summary.get("tables")
    if isinstance(extra, dict) and isinstance(extra.get(n), dict):
        x = extra[n]
        if "matched" in x:
            lines.append(f"entries matched {x['matched']:,}" + (f", distinct keys {x['distinct_keys']:,}" if "distinct_keys" in x else ""))
        acts = x.get("actions")
        if isinstance(acts, dict) and acts:
            top = sorted(acts.items(), key=lambda kv: -kv[1])[:3]
            lines.append("actions " + ", ".join(f"{(a or '(none)').rsplit('.', 1)[-1]} {c:,}" for a, c in top))
    if n == run.bottleneck:
        lines.append("<b>bottleneck</b>: the most key-time in lookups")
    return "<br>".join(lines)


def _node_color_args(vals: np.ndarray, key: str, title: str, unit: str, log: bool) -> dict:
    c, lo, hi = _scale(vals, log)
    bar: dict = {"title": {"text": title + (f" ({unit})" if unit and not log else ""), "side": "right"}}
    if log:
        tv, tt = _log_ticks(lo, hi, unit)
        bar.update(tickvals=tv, ticktext=tt)
    if key == "hit_rate":
        lo, hi = min(lo, 1.0), 1.0
    c = np.array([np.nan if v is None else v for v in _round(c)], dtype=float)  # NaN, not None: Plotly's validator takes numbers
    return {"color": c, "cmin": lo, "cmax": hi, "colorscale": _NODE_SCALE.get(key, COLORSCALES.get(key, "Viridis")),
            "colorbar": bar}


def graph_figure(run: Run, color: str = "hit_rate", values: dict[str, dict[str, float]] | None = None,
                 color_options=None, title: str | None = None) -> go.Figure:
    """Tables as nodes (size by lookups), the control flow as edges (width by
    the PHVs that took each), nodes coloured by a per-table figure that the
    buttons switch, the bottleneck ringed. ``values``: per table the figures
    to colour by (default: the run's own); ``color_options``: the buttons
    (default :data:`NODE_COLORS`)."""
    opts = color_options or NODE_COLORS
    values = values if values is not None else run.tables
    nodes = run.graph_nodes
    lay = layout(nodes, list(run.graph_edges))
    lab = labels(nodes)
    fig = go.Figure()
    # edges: one trace per width class (Plotly draws a trace at one width)
    counts = np.array(list(run.graph_edges.values()) or [0.0])
    cmax = max(float(counts.max()), 1.0)
    out_of: dict[str, float] = {}
    for (s, _), c in run.graph_edges.items():
        out_of[s] = out_of.get(s, 0.0) + c
    classes: dict[int, tuple[list, list]] = {}
    mid_x, mid_y, mid_text = [], [], []
    for (s, t), c in run.graph_edges.items():
        xs, ys = lay.path(s, t)
        k = -1 if c <= 0 else int(round(8 * math.sqrt(c / cmax)))
        cx, cy = classes.setdefault(k, ([], []))
        cx += [*xs, None]
        cy += [*ys, None]
        m = len(xs) // 2
        mid_x.append(xs[m])
        mid_y.append(ys[m])
        share = f" ({c / out_of[s]:.1%} of {lab[s]}'s)" if out_of.get(s) else ""
        mid_text.append(f"{lab[s]} → {lab[t]}<br>{int(c):,} PHVs{share}" if c > 0 else f"{lab[s]} → {lab[t]}<br>no PHV (program edge)")
    for k in sorted(classes):
        cx, cy = classes[k]
        fig.add_trace(go.Scatter(x=cx, y=cy, mode="lines", hoverinfo="skip", showlegend=False,
                                 line=dict(width=0.8 if k < 0 else 1 + 1.2 * k, color="#bbbbbb" if k < 0 else "rgba(60,90,140,0.55)",
                                           dash="dot" if k < 0 else "solid")))
    fig.add_trace(go.Scatter(x=mid_x, y=mid_y, mode="markers", marker=dict(size=10, opacity=0), hovertext=mid_text,
                             hoverinfo="text", showlegend=False, name="edges"))
    # a table no key reached (yet) is drawn grey
    seen = [n for n in nodes if n in values and (n not in run.tables or run.tables[n]["lookups"] > 0)]
    unseen = [n for n in nodes if n not in seen]
    if unseen:
        fig.add_trace(go.Scatter(x=[lay.pos[n][0] for n in unseen], y=[lay.pos[n][1] for n in unseen], mode="markers+text",
                                 marker=dict(size=10, color="#dddddd", line=dict(color="#999999", width=1)),
                                 text=[lab[n] for n in unseen], textposition="bottom center", textfont=dict(size=10, color="#888888"),
                                 hovertext=[node_hover(run, n) for n in unseen], hoverinfo="text", showlegend=False, name="unvisited"))
    load = np.array([run.tables[n]["lookups"] if n in run.tables else 0 for n in seen], dtype=float)
    size = 14 + 22 * np.sqrt(load / max(load.max(), 1.0)) if len(load) else []
    key, ttl, unit, log = next(o for o in opts if o[0] == color)
    col = _node_color_args(np.array([values[n].get(key, np.nan) for n in seen], dtype=float), key, ttl, unit, log)
    node_trace = len(fig.data)
    fig.add_trace(go.Scatter(
        x=[lay.pos[n][0] for n in seen], y=[lay.pos[n][1] for n in seen], mode="markers+text", name="tables",
        marker=dict(size=list(size), line=dict(color="#333333", width=1), showscale=True, **col),
        text=[lab[n] for n in seen], textposition=["top center" if lay.layer[n] % 2 == 0 else "bottom center" for n in seen],
        textfont=dict(size=11), hovertext=[node_hover(run, n) for n in seen], hoverinfo="text", showlegend=False))
    b = run.bottleneck
    if b is not None and b in lay.pos:
        x, y = lay.pos[b]
        fig.add_trace(go.Scatter(x=[x], y=[y], mode="markers", hoverinfo="skip", showlegend=False, name="bottleneck",
                                 marker=dict(size=float(size[seen.index(b)]) + 16 if b in seen else 30, symbol="circle-open",
                                             color="#d62728", line=dict(width=3))))
        fig.add_annotation(x=x, y=y, text=f"bottleneck: {lab[b]}", showarrow=True, arrowhead=2, ax=40, ay=-38,
                           font=dict(color="#d62728", size=12), bgcolor="rgba(255,255,255,0.85)")
    buttons = []
    for k, t, u, lg in opts:
        a = _node_color_args(np.array([values[n].get(k, np.nan) for n in seen], dtype=float), k, t, u, lg)
        buttons.append(dict(label=t, method="restyle",
                            args=[{f"marker.{f}": [v] for f, v in a.items() if f != "colorbar"}
                                  | {"marker.colorbar.title.text": [a["colorbar"]["title"]["text"]],
                                     "marker.colorbar.tickvals": [a["colorbar"].get("tickvals")],
                                     "marker.colorbar.ticktext": [a["colorbar"].get("ticktext")]}, [node_trace]]))
    px_h = max(260, int(70 * (lay.height + 1.5)))
    fig.update_layout(
        font=FONT, height=px_h + 90, margin=dict(l=20, r=20, t=60 if title else 50, b=20), plot_bgcolor="white",
        title=title, hoverlabel=dict(align="left"),
        xaxis=dict(visible=False, range=[-0.7, lay.per_row - 0.3]),
        yaxis=dict(visible=False, autorange="reversed"),
        updatemenus=[dict(type="buttons", direction="right", x=0.0, y=1.0, xanchor="left", yanchor="bottom", pad=dict(t=4, b=4),
                          buttons=buttons, active=[o[0] for o in opts].index(color), showactive=True, font=dict(size=11))])
    return fig


# ---------------------------------------------------------------- per-table time series


def heatmap_figure(run: Run, order: list[str] | None = None, ranges: dict | None = None, title: str | None = None) -> go.Figure:
    """Small multiples of table x time heatmaps, one per metric of
    :data:`METRICS`, sharing their rows (tables, the heaviest load at the top)."""
    order = order or run.by_load
    rows = [run.names.index(n) if n in run.names else -1 for n in order]
    lab = labels(order)
    ylab = [lab[n] for n in order]
    mets = [m for m in METRICS if np.isfinite(run.grid[m[0]]).any()]
    fig = make_subplots(rows=1, cols=len(mets), shared_yaxes=True, horizontal_spacing=0.012,
                        subplot_titles=[f"{t} ({u})" if u else t for _, t, u, _ in mets])
    x = _r4(run.t_ns / 1e3)
    T = len(order)
    w = 1.0 / len(mets)
    row_px = 15 if T <= 50 else 11
    plot_px = 40 + row_px * T  # the plot area's height: colour bars sit a fixed distance under it
    binned = run.bin_windows > 1
    for i, (key, t, unit, log) in enumerate(mets):
        g = np.full((T, len(run.t_ns)), np.nan)
        lo_w, hi_w = g.copy(), g.copy()  # a bin's smallest and largest window
        for r, j in enumerate(rows):
            if j >= 0:
                g[r] = run.grid[key][j]
                if binned:
                    lo_w[r], hi_w[r] = run.grid_lo[key][j], run.grid_hi[key][j]
        z, lo, hi = _scale(g, log)
        if ranges and key in ranges:
            lo, hi = ranges[key]
        if key == "hit_rate":
            lo, hi = min(lo, 1.0), 1.0
        bar: dict = dict(orientation="h", x=(i + 0.5) * w, xanchor="center", y=-48 / plot_px, yanchor="top", len=w * 0.85,
                         thickness=10, tickfont=dict(size=10))
        if log:
            tv, tt = _log_ticks(lo, hi, unit)
            bar.update(tickvals=tv, ticktext=tt)
        if binned:  # a column is a bin of windows: its figure, and its windows' range (a spike shows on hover)
            cd = np.stack([_r4(g), _r4(lo_w), _r4(hi_w)], axis=-1)
            hov = (f"%{{y}}<br>bin ending at t = %{{x}} µs ({run.bin_windows} windows)<br>{t}: %{{customdata[0]{HOVER[unit]}}} {unit}"
                   f"<br>windows from %{{customdata[1]{HOVER[unit]}}} to %{{customdata[2]{HOVER[unit]}}}<extra></extra>")
        else:
            cd, hov = _r4(g), f"%{{y}}<br>t = %{{x}} µs<br>{t}: %{{customdata{HOVER[unit]}}} {unit}<extra></extra>"
        fig.add_trace(go.Heatmap(
            z=_r4(z), x=x, y=ylab, zmin=lo, zmax=hi, colorscale=COLORSCALES[key], colorbar=bar, customdata=cd,
            hovertemplate=hov), row=1, col=i + 1)
        fig.update_xaxes(title_text="time (µs)", title_font=dict(size=11), tickfont=dict(size=10), row=1, col=i + 1)
    fig.update_yaxes(autorange="reversed", tickmode="array", tickvals=ylab, ticktext=ylab, tickfont=dict(size=11 if T <= 50 else 9))
    fig.update_yaxes(showticklabels=True, row=1, col=1)
    top = 70 if title else 40
    fig.update_layout(font=FONT, height=plot_px + top + 100, margin=dict(l=10, r=10, t=top, b=100),
                      title=title, plot_bgcolor="#f4f4f4")
    fig.update_annotations(font_size=12)
    return fig


def grid_ranges(runs: list[Run]) -> dict[str, tuple[float, float]]:
    """Colour ranges common to several runs (for side-by-side heatmaps)."""
    out = {}
    for key, _, _, log in METRICS:
        vals = np.concatenate([_scale(r.grid[key], log)[0].ravel() for r in runs])
        fin = vals[np.isfinite(vals)]
        if len(fin):
            out[key] = (float(fin.min()), float(max(fin.max(), fin.min() + 1e-9)))
    return out


# ---------------------------------------------------------------- PMU allocation (closed loop)


def pmu_figure(run: Run, top: int = 12) -> go.Figure:
    """PMUs held per table over time (stacked), the controller's decisions on hover."""
    t = run.t_ns / 1e3
    pm = np.nan_to_num(run.grid["pmus"])
    order = sorted(range(len(run.names)), key=lambda j: (-pm[j].sum(), run.names[j]))
    lab = labels(run.names)
    fig = go.Figure()
    shown = order[:top] if len(order) > top + 1 else order
    for j in shown:
        fig.add_trace(go.Scatter(x=_round(t), y=_round(pm[j]), name=lab[run.names[j]], stackgroup="pmus", mode="lines",
                                 line=dict(width=0.5), hovertemplate=f"{lab[run.names[j]]}: %{{y}} PMUs at %{{x}} µs<extra></extra>"))
    rest = [j for j in order if j not in shown]
    if rest:
        fig.add_trace(go.Scatter(x=_round(t), y=_round(pm[rest].sum(axis=0)), name=f"{len(rest)} others", stackgroup="pmus",
                                 mode="lines", line=dict(width=0.5, color="#aaaaaa")))
    if run.decisions:
        xs, ys, txt = [], [], []
        tot = pm.sum(axis=0)
        for d in run.decisions:
            ch = [f"{lab.get(n, n)} {d['held'][n]} → {d['target'][n]}" for n in d["target"] if d["target"][n] != d["held"].get(n)]
            if not ch:  # a period that kept the allocation: no mark
                continue
            xs.append(d["t_ns"] / 1e3)
            k = int(np.clip(np.searchsorted(run.t_ns, d["t_ns"]), 0, max(len(tot) - 1, 0)))
            ys.append(float(tot[k]) + 0.3 if len(tot) else 0.0)
            body = "<br>".join(ch)
            txt.append(f"<b>decision at {d['t_ns'] / 1e3:.4g} µs</b><br>{body}" + (f"<br><i>{d['note']}</i>" if d.get("note") else ""))
        fig.add_trace(go.Scatter(x=_round(np.array(xs)), y=ys, mode="markers", name="controller decisions",
                                 marker=dict(symbol="triangle-down", size=9, color="#d62728"), hovertext=txt, hoverinfo="text"))
    fig.update_layout(font=FONT, height=420, margin=dict(l=60, r=20, t=30, b=50), xaxis_title="time (µs)",
                      yaxis_title="PMUs held", hoverlabel=dict(align="left"), legend=dict(font=dict(size=10)))
    return fig


# ---------------------------------------------------------------- latency distributions


def _cdf(hist) -> tuple[np.ndarray, np.ndarray]:
    _, hi, c = hist
    return hi, np.cumsum(c) / max(c.sum(), 1)  # at each bucket's high edge: the keys at or under it


def cdf_figure(runs: list[tuple[str, Run]], top: int = TOP_LINES) -> go.Figure:
    """Per-table CDF of per-key latency (log x); the ``top`` tables with the
    most lookup time (keys x mean latency) drawn, the rest in the legend.
    Several runs: one dash style each."""
    fig = go.Figure()
    base = runs[0][1]
    order = [n for n in base.by_load if n in base.latency]
    show = set(sorted(order, key=lambda n: (-base.tables[n]["lookup_time_ns"], n))[:top])
    lab = labels(order)
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
    # distinct colours for the drawn lines first
    colour = {n: i for i, n in enumerate([n for n in order if n in show] + [n for n in order if n not in show])}
    for ri, (name, run) in enumerate(runs):
        for n in order:
            i = colour[n]
            if n not in run.latency:
                continue
            x, y = _cdf(run.latency[n])
            fig.add_trace(go.Scatter(
                x=_round(x), y=_round(y), mode="lines", line_shape="hv", name=lab[n] + (f" ({name})" if len(runs) > 1 else ""),
                legendgroup=n, visible=True if n in show else "legendonly",
                line=dict(color=palette[i % len(palette)], dash=["solid", "dash"][ri % 2], width=1.6),
                hovertemplate=f"{lab[n]}{' (' + name + ')' if len(runs) > 1 else ''}: %{{y:.3f}} of keys ≤ %{{x:.4g}} ns<extra></extra>"))
    fig.update_layout(font=FONT, height=440, margin=dict(l=60, r=20, t=30, b=50),
                      xaxis=dict(type="log", title="per-key latency (ns)"), yaxis=dict(title="fraction of keys"),
                      legend=dict(font=dict(size=10), title=dict(text="click to show/hide")))
    return fig


def latency_heatmap(run: Run, order: list[str] | None = None) -> go.Figure:
    """Table x latency bucket: the share of each table's keys per bucket (log
    colour), so a tail of slow keys shows at any number of tables."""
    order = [n for n in (order or run.by_load) if n in run.latency]
    # the buckets partition the latency axis: every low and high edge, columns between neighbours
    edges = sorted({float(v) for n in order for v in (*run.latency[n][0], *run.latency[n][1])})
    col = {v: i for i, v in enumerate(edges)}
    z = np.full((len(order), max(len(edges) - 1, 1)), np.nan)
    for r, n in enumerate(order):
        lo, _, c = run.latency[n]
        for v, k in zip(lo, c):
            z[r, col[float(v)]] = k / max(run.latency[n][2].sum(), 1)
    edges = [max(e, 1.0) for e in edges]  # a 0 ns low edge on a log axis: 1 ns
    lab = labels(order)
    y = [lab[n] for n in order]
    zl, lo_, hi_ = _scale(z, True)
    lo_ = max(lo_, -5.0)
    tv, tt = _log_ticks(lo_, hi_, "")
    fig = go.Figure(go.Heatmap(
        z=_r4(zl), x=edges, y=y, zmin=lo_, zmax=hi_, colorscale="Viridis",
        colorbar=dict(title=dict(text="share of keys", side="right"), tickvals=tv, ticktext=[f"{10 ** v:.0e}" for v in tv], thickness=12),
        customdata=_r4(z), hovertemplate="%{y}: %{customdata:.3%} of keys at %{x:.4g} ns<extra></extra>"))
    T = len(order)
    fig.update_layout(font=FONT, height=130 + (15 if T <= 50 else 11) * T, margin=dict(l=10, r=10, t=30, b=60),
                      xaxis=dict(title="per-key latency (ns)", type="log"),
                      yaxis=dict(autorange="reversed", tickmode="array", tickvals=y, ticktext=y, tickfont=dict(size=11 if T <= 50 else 9)),
                      plot_bgcolor="#f4f4f4")
    return fig


# ---------------------------------------------------------------- reproduce upf: the schemes


def schemes_figure(run: Run) -> go.Figure:
    panels = [("throughput_mpps", "throughput (Mpps)"), ("mean_latency_ns", "mean per-key latency (ns)"),
              ("active_pmus", "active PMUs")]
    fig = make_subplots(rows=1, cols=3, subplot_titles=[p[1] for p in panels], horizontal_spacing=0.06)
    colors = {"closed_loop": "#d62728", "static": "#1f77b4", "even_split": "#2ca02c", "closed_loop_slo": "#9467bd"}
    for k, s in run.schemes.items():
        for i, (col, _) in enumerate(panels):
            if col in s:
                fig.add_trace(go.Scatter(x=_round(s["t_ms"] * 1e3), y=_round(s[col]), name=k, legendgroup=k, showlegend=i == 0,
                                         line=dict(color=colors.get(k, "#333333"))), row=1, col=i + 1)
    fig.update_xaxes(title_text="time (µs)")
    fig.update_layout(font=FONT, height=360, margin=dict(l=50, r=20, t=40, b=50))
    return fig

"""Results to files: per-window CSV and PNG plots (matplotlib, Agg)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from synapse_vmt.errors import atomic_write


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend, imported on first use so
    that commands which draw nothing start fast."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt

WINDOW_COLUMNS = [
    "t_ns", "table", "arrived", "processed", "hits", "misses", "elu_requests", "hbm_bytes",
    "lat_mean_ns", "lat_p50_ns", "lat_p99_ns", "sojourn_mean_ns", "pmus", "cam_compares", "stalls", "drops", "fifo_max", "reordered",
]


def derived(w: dict[str, np.ndarray], window_ns: float) -> dict[str, np.ndarray]:
    """Per-row hit rate, HBM GB/s, offered and processed Mpps."""
    looked = w["hits"] + w["misses"]
    with np.errstate(invalid="ignore", divide="ignore"):
        hit = np.where(looked > 0, w["hits"] / np.maximum(looked, 1), np.nan)
    return {
        "hit_rate": hit,
        "hbm_gbps": w["hbm_bytes"] / window_ns,
        "offered_mpps": w["arrived"] / window_ns * 1e3,
        "throughput_mpps": w["processed"] / window_ns * 1e3,
    }


DERIVED_COLUMNS = ["hit_rate", "hbm_gbps", "offered_mpps", "throughput_mpps"]
EDGE_COLUMNS = ["t_ns", "src", "dst", "count"]


def table_grid(w: dict[str, np.ndarray], n_tables: int, window_ns: float) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Window rows as per-table time series: (window ends, metric -> array of
    shape (tables, windows)), NaN where a table has no row in a window.
    Metrics: hit_rate, throughput_mpps, offered_mpps, lat_mean_ns,
    lat_p50_ns (NaN without the column), lat_p99_ns, hbm_gbps, pmus."""
    t = np.asarray(w["t_ns"], dtype=float)
    t_ns = np.unique(t)
    ti = np.asarray(w["table"], dtype=np.int64)
    wi = np.searchsorted(t_ns, t)
    f = {k: np.asarray(v, dtype=float) for k, v in w.items() if k != "table"}
    looked = f["hits"] + f["misses"]

    def put(values: np.ndarray) -> np.ndarray:
        g = np.full((n_tables, len(t_ns)), np.nan)
        g[ti, wi] = values
        return g

    with np.errstate(invalid="ignore", divide="ignore"):
        return t_ns, {
            "hit_rate": put(np.where(looked > 0, f["hits"] / np.maximum(looked, 1), np.nan)),
            "throughput_mpps": put(f["processed"] / window_ns * 1e3),
            "offered_mpps": put(f["arrived"] / window_ns * 1e3),
            "lat_mean_ns": put(f["lat_mean_ns"]),
            "lat_p50_ns": put(f["lat_p50_ns"]) if "lat_p50_ns" in f else np.full((n_tables, len(t_ns)), np.nan),
            "lat_p99_ns": put(f["lat_p99_ns"]),
            "hbm_gbps": put(f["hbm_bytes"] / window_ns),
            "pmus": put(f["pmus"]),
        }


def window_columns(w: dict[str, np.ndarray]) -> list[str]:
    """windows.csv's header: the :data:`WINDOW_COLUMNS` entries the rows have
    (a simulator without one, e.g. ``lat_p50_ns``, leaves it out), then the derived ones."""
    return [c for c in WINDOW_COLUMNS if not w or c in w] + DERIVED_COLUMNS


def window_rows(w: dict[str, np.ndarray], names: list[str], window_ns: float):
    """The rows of windows.csv (after its header, :func:`window_columns`) for a batch of windows."""
    if not w or not len(w["t_ns"]):
        return
    d = derived(w, window_ns)
    have = [c for c in WINDOW_COLUMNS if c in w]
    for i in range(len(w["t_ns"])):
        row: list[Any] = []
        for c in have:
            v = w[c][i]
            row.append(names[int(v)] if c == "table" else (f"{v:.6g}" if isinstance(v, (float, np.floating)) else int(v)))
        row += [f"{d[c][i]:.6g}" for c in DERIVED_COLUMNS]
        yield row


def edge_rows(e: dict[str, np.ndarray], names: list[str]):
    """The rows of edges.csv (after its header, EDGE_COLUMNS) for a batch of routing counts."""
    for i in range(len(e.get("t_ns", []))):
        dst = int(e["dst"][i])
        yield [f"{e['t_ns'][i]:.6g}", names[int(e["src"][i])], "exit" if dst < 0 else names[dst], int(e["count"][i])]


def write_windows_csv(path: str | Path, w: dict[str, np.ndarray], names: list[str], window_ns: float) -> None:
    buf = io.StringIO()
    wr = csv.writer(buf)
    wr.writerow(window_columns(w))
    wr.writerows(window_rows(w, names, window_ns))
    with atomic_write(path) as f:
        f.write(buf.getvalue())


def write_edges_csv(path: str | Path, e: dict[str, np.ndarray], names: list[str]) -> None:
    buf = io.StringIO()
    wr = csv.writer(buf)
    wr.writerow(EDGE_COLUMNS)
    wr.writerows(edge_rows(e, names))
    with atomic_write(path) as f:
        f.write(buf.getvalue())


def write_json(path: str | Path, obj: Any) -> None:
    with atomic_write(path) as f:
        json.dump(obj, f, indent=2, sort_keys=False)
        f.write("\n")


def write_rows(path: str | Path, rows: list[dict[str, Any]]) -> None:
    """A CSV with a column per key of the first row."""
    with atomic_write(path) as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def save_png(fig, path: str | Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    pyplot().close(fig)
    with atomic_write(path, "wb") as f:
        f.write(buf.getvalue())


#: More tables than this: run.png shows heatmaps (a row per table), not a line per table.
LINES_UP_TO = 8


def plot_run(path: str | Path, w: dict[str, np.ndarray], names: list[str], window_ns: float,
             hists: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """Hit rate, latency distribution, HBM bandwidth and throughput over time;
    with more than :data:`LINES_UP_TO` tables, :func:`plot_run_many`."""
    if len(names) > LINES_UP_TO and w and len(w["t_ns"]):
        plot_run_many(path, w, names, window_ns, hists)
        return
    plt = pyplot()
    fig, ax = plt.subplots(2, 2, figsize=(11, 7))
    d = derived(w, window_ns) if w and len(w["t_ns"]) else None
    for ti, name in enumerate(names):
        if d is None:
            break
        m = w["table"] == ti
        t_us = w["t_ns"][m] / 1e3
        ax[0, 0].plot(t_us, d["hit_rate"][m], label=name)
        ax[1, 0].plot(t_us, d["hbm_gbps"][m], label=name)
        ax[1, 1].plot(t_us, d["throughput_mpps"][m], label=f"{name} processed")
        ax[1, 1].plot(t_us, d["offered_mpps"][m], ls="--", alpha=0.6, label=f"{name} offered")
    for name, (edges, counts) in hists.items():
        if len(counts) and counts.sum() > 0:
            mids = (edges[:-1] + edges[1:]) / 2
            ax[0, 1].step(mids, counts / counts.sum(), where="mid", label=name)
    ax[0, 0].set(title="Hit rate", xlabel="time (µs)", ylim=(0, 1.02))
    ax[0, 1].set(title="Per-key latency distribution", xlabel="latency (ns)", ylabel="fraction of keys", xscale="log")
    ax[1, 0].set(title="HBM bandwidth", xlabel="time (µs)", ylabel="GB/s")
    ax[1, 1].set(title="Throughput", xlabel="time (µs)", ylabel="Mpps")
    for a in ax.flat:
        a.grid(alpha=0.3)
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path)


def plot_run_many(path: str | Path, w: dict[str, np.ndarray], names: list[str], window_ns: float,
                  hists: dict[str, tuple[np.ndarray, np.ndarray]], top: int = 8) -> None:
    """A run of many tables (a P4 program): table x time heatmaps of hit rate,
    p99 latency, throughput, HBM bandwidth and PMUs held (a row per table, the
    most offered PHVs at the top), and the latency distribution of the
    ``top`` tables with the most lookup time plus all the others pooled."""
    from matplotlib.colors import LogNorm

    plt = pyplot()
    t_ns, g = table_grid(w, len(names), window_ns)
    tab = np.asarray(w["table"], dtype=np.int64)
    arrived = np.bincount(tab, weights=np.asarray(w["arrived"], dtype=float), minlength=len(names))
    order = sorted(range(len(names)), key=lambda j: (-arrived[j], names[j]))
    short = [n.rsplit(".", 1)[-1] for n in names]
    T = len(names)
    fig, ax = plt.subplots(2, 3, figsize=(17, 4.5 + 0.26 * T), layout="constrained")
    ext = [t_ns[0] / 1e3 - window_ns / 2e3, t_ns[-1] / 1e3 + window_ns / 2e3, T - 0.5, -0.5]
    step = 1 if T <= 50 else int(np.ceil(T / 50))
    panels = [(ax[0, 0], "hit_rate", "hit rate", dict(cmap="RdYlGn", vmin=0, vmax=1)),
              (ax[0, 1], "lat_p99_ns", "p99 latency (ns)", dict(cmap="YlOrRd", norm="log")),
              (ax[1, 0], "throughput_mpps", "throughput (Mpps)", dict(cmap="Blues")),
              (ax[1, 1], "hbm_gbps", "HBM bandwidth (GB/s)", dict(cmap="Purples")),
              (ax[1, 2], "pmus", "PMUs held", dict(cmap="Greens"))]
    for a, key, title, kw in panels:
        z = g[key][order]
        if kw.get("norm") == "log":
            pos = z[np.isfinite(z) & (z > 0)]
            kw = {**kw, "norm": LogNorm(vmin=pos.min(), vmax=max(pos.max(), pos.min() * 10)) if len(pos) else None}
        im = a.imshow(np.ma.masked_invalid(z), aspect="auto", interpolation="nearest", extent=ext, **kw)
        a.set_facecolor("#e8e8e8")
        fig.colorbar(im, ax=a, fraction=0.05, pad=0.01)
        a.set_title(title)
        a.set_xlabel("time (µs)")
        a.set_yticks(range(0, T, step))
        a.set_yticklabels([short[order[i]] for i in range(0, T, step)] if a in (ax[0, 0], ax[1, 0]) else [], fontsize=7)
    a = ax[0, 2]
    key_time = {n: float(np.sum(c * (e[:-1] + e[1:]) / 2)) for n, (e, c) in hists.items() if len(c)}
    tops = sorted(key_time, key=lambda n: -key_time[n])[:top]
    pooled, pooled_edges = np.zeros(0), np.zeros(1)
    for n, (e, c) in hists.items():
        if not len(c) or c.sum() == 0:
            continue
        if n in tops:
            a.step(e[1:], np.cumsum(c) / c.sum(), where="post", label=n.rsplit(".", 1)[-1])
        else:  # histograms share their bucket edges and end at their last non-empty bucket
            if len(c) > len(pooled):
                pooled, pooled_edges = np.pad(pooled, (0, len(c) - len(pooled))), np.asarray(e)
            pooled[:len(c)] += c
    if pooled.sum() > 0:
        a.step(pooled_edges[1:], np.cumsum(pooled) / pooled.sum(), where="post", color="grey", ls="--",
               label=f"{len(hists) - len(tops)} others (pooled)")
    a.set(title=f"Per-key latency CDF: the {len(tops)} tables with most lookup time", xlabel="latency (ns)", xscale="log",
          ylabel="fraction of keys")
    a.grid(alpha=0.3)
    a.legend(fontsize=7, loc="lower right")
    save_png(fig, path)

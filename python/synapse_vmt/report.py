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
    "lat_mean_ns", "lat_p99_ns", "sojourn_mean_ns", "pmus", "cam_compares", "stalls", "drops", "fifo_max", "reordered",
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
PLOT_COLUMNS = ["t_ns", "table", "hits", "misses", "hbm_bytes", "arrived", "processed"]  # what plot_run reads


def window_rows(w: dict[str, np.ndarray], names: list[str], window_ns: float):
    """The rows of windows.csv (after its header, WINDOW_COLUMNS + DERIVED_COLUMNS) for a batch of windows."""
    if not w or not len(w["t_ns"]):
        return
    d = derived(w, window_ns)
    for i in range(len(w["t_ns"])):
        row: list[Any] = []
        for c in WINDOW_COLUMNS:
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
    wr.writerow(WINDOW_COLUMNS + DERIVED_COLUMNS)
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


def plot_run(path: str | Path, w: dict[str, np.ndarray], names: list[str], window_ns: float,
             hists: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """Hit rate, latency distribution, HBM bandwidth and throughput over time."""
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
    many = len(names) > 8  # a P4 program's tables: one small legend, not four huge ones
    for a in ax.flat:
        a.grid(alpha=0.3)
        if a.get_legend_handles_labels()[0] and (not many or a is ax[0, 0]):
            a.legend(fontsize=4 if many else 8, ncol=3 if many else 1)
    fig.tight_layout()
    save_png(fig, path)

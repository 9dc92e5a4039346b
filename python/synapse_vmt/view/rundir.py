"""A run's output directory, read back: the one input of every report.

The report is a function of these files, so any command that writes them
(``run``, ``run --p4``, ``reproduce upf``, a point of a sweep; a new run
mode, such as a fast engine's, by calling :func:`synapse_vmt.view.finish_run`)
gets a report, and ``synapse report DIR`` rebuilds it later:

============== ======== ==========================================================
file           needed   what the report takes from it
============== ======== ==========================================================
windows.csv    yes      per (window, table): ``t_ns``, ``table``, ``arrived``,
                        ``processed``, ``hits``, ``misses``, ``hbm_bytes``,
                        ``lat_mean_ns``, ``lat_p99_ns``, ``pmus``; ``lat_p50_ns``
                        when there (:data:`synapse_vmt.report.WINDOW_COLUMNS`)
edges.csv      no       PHVs per (window, src, dst): the graph's edge widths
latency.csv    no       per table its latency histogram (``table, lo_ns, hi_ns,
                        count``, non-empty buckets): CDFs and p50/p99
cfg.json       no       the program's table graph (``synapse p4 cfg``'s format)
scenario.json  no       the simulator config: shown, and its ``tables``/``edges``
                        are the graph when there is no cfg.json
summary.json   no       invariants (``invariants``, or per scheme), a P4 run's
                        per-table counters (hover), a closed loop's decisions
                        (``closed_loop_decisions``)
run.json       no       ``kind``, ``command`` (the command line), ``window_ns``
upf.csv        no       ``reproduce upf``: the schemes side by side over time
============== ======== ==========================================================

Per-table figures are recomputed here from the windows (not read from the
summary), so every kind of run is summarised the same way.
"""

from __future__ import annotations

import csv
import json
from array import array
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from synapse_vmt import cmdline
from synapse_vmt.errors import UserError, atomic_write

RUN_FORMAT = "synapse-run"

#: The per-(table, window) metrics of the report, in display order:
#: (key, title, unit, log colour scale).
METRICS = [
    ("hit_rate", "hit rate", "", False),
    ("throughput_mpps", "throughput", "Mpps", False),
    ("lat_p50_ns", "p50 latency", "ns", True),
    ("lat_p99_ns", "p99 latency", "ns", True),
    ("hbm_gbps", "HBM bandwidth", "GB/s", False),
    ("pmus", "PMUs held", "", False),
]


# ---------------------------------------------------------------- writing the extra files


def write_latency_csv(path: Path, hists: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """Per table its latency histogram's non-empty buckets."""
    with atomic_write(path) as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["table", "lo_ns", "hi_ns", "count"])
        for name, (edges, counts) in hists.items():
            for b in np.flatnonzero(np.asarray(counts) > 0):
                w.writerow([name, f"{edges[b]:.6g}", f"{edges[b + 1]:.6g}", int(counts[b])])


def write_run_json(path: Path, kind: str, window_ns: float, **extra) -> None:
    from synapse_vmt.report import write_json

    write_json(path, {"format": RUN_FORMAT, "version": 1, "kind": kind, "command": cmdline.text(),
                      "window_ns": float(window_ns), **extra})


# ---------------------------------------------------------------- reading


@dataclass
class Run:
    """What the report shows of one run directory."""

    path: Path
    kind: str
    command: str
    window_ns: float
    names: list[str]  # tables with window rows, in the file's first-seen order
    t_ns: np.ndarray  # window ends
    grid: dict[str, np.ndarray]  # metric -> (len(names), len(t_ns)); NaN where a table had no row
    tables: dict[str, dict]  # per table of ``names``: run totals and figures
    graph_nodes: list[str]  # every table the graph shows (the program's, in its order)
    graph_edges: dict[tuple[str, str], float]  # (src, dst) -> PHVs that took it (0: a program edge no PHV took)
    graph_hidden: list[str] = field(default_factory=list)  # a large program's tables no packet visited (not drawn)
    latency: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)  # lo, hi, count
    summary: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    invariants: dict[str, dict] = field(default_factory=dict)  # label -> check_invariants()
    decisions: list[dict] = field(default_factory=list)  # {t_ns, held: {table: n}, target: {table: n}, note}
    schemes: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # upf.csv: scheme -> column -> values

    @property
    def by_load(self) -> list[str]:
        """Tables, the most offered PHVs first (ties: name)."""
        return sorted(self.names, key=lambda n: (-self.tables[n]["arrived"], n))

    @property
    def bottleneck(self) -> str | None:
        """The table whose keys spent the most time in lookups (keys x mean
        latency): where a PMU or a faster ELU path buys the most."""
        cand = [n for n in self.names if self.tables[n]["lookup_time_ns"] > 0]
        return max(cand, key=lambda n: (self.tables[n]["lookup_time_ns"], n)) if cand else None

    @property
    def closed_loop(self) -> bool:
        return bool(self.decisions) or any(
            np.nanmax(r) != np.nanmin(r) for r in self.grid["pmus"] if np.isfinite(r).any())


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: not a JSON file the report can read ({e})") from None


def _read_csv(path: Path, numeric: bool = False) -> dict[str, list]:
    """A CSV file's columns by header name. With ``numeric``, every column
    but ``table`` becomes floats (empty: nan) as the rows are read, and the
    table names are shared: a long run's windows.csv then costs 8 bytes a
    value instead of a string object per field."""
    try:
        with path.open(newline="") as f:
            rows = csv.reader(f)
            head = next(rows, None)
            if not head:
                raise UserError(f"{path}:1: expected a header line")
            cols: dict[str, list] = {h: (array("d") if numeric and h != "table" else []) for h in head}
            put = [cols[h] for h in head]
            conv = [numeric and h != "table" for h in head]
            names: dict[str, str] = {}
            for i, r in enumerate(rows, 2):
                if len(r) != len(head):
                    raise UserError(f"{path}:{i}: expected {len(head)} fields, found {len(r)}")
                for h, c, v, num in zip(head, put, r, conv):
                    if not num:
                        c.append(names.setdefault(v, v) if numeric else v)
                        continue
                    try:
                        c.append(float(v) if v != "" else np.nan)
                    except ValueError as e:
                        raise UserError(f"{path}: column {h}: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read ({e})") from None
    return cols


def _floats(path: Path, cols: dict[str, list[str]], name: str) -> np.ndarray:
    try:
        return np.array([float(v) if v != "" else np.nan for v in cols[name]], dtype=float)
    except ValueError as e:
        raise UserError(f"{path}: column {name}: {e}") from None


NEEDED = ("t_ns", "table", "arrived", "processed", "hits", "misses", "hbm_bytes", "lat_mean_ns", "lat_p99_ns", "pmus")


def load(path: str | Path) -> Run:
    """Reads a run directory (see the module doc); a missing windows.csv or a
    malformed file is a :class:`UserError` naming it."""
    d = Path(path)
    wpath = d / "windows.csv"
    if not d.is_dir():
        raise UserError(f"{d}: no such run directory")
    if not wpath.is_file():
        raise UserError(f"{d}: no windows.csv: not a run's output directory (synapse run -o DIR writes one)")
    cols = _read_csv(wpath, numeric=True)
    missing = [c for c in NEEDED if c not in cols]
    if missing:
        raise UserError(f"{wpath}:1: missing column(s) {', '.join(missing)}")
    meta = _read_json(d / "run.json") if (d / "run.json").is_file() else {}
    summary = _read_json(d / "summary.json") if (d / "summary.json").is_file() else {}
    config = _read_json(d / "scenario.json") if (d / "scenario.json").is_file() else {}
    names = list(dict.fromkeys(cols["table"]))
    num = {c: np.array(cols[c], dtype=float) for c in cols if c != "table"}
    t_all = num["t_ns"]
    t_ns = np.unique(t_all)
    window_ns = float(meta.get("window_ns") or config.get("window_ns") or (np.min(np.diff(t_ns)) if len(t_ns) > 1 else t_ns[0] if len(t_ns) else 1.0))
    idx = {n: i for i, n in enumerate(names)}
    return build(d, names, [idx[x] for x in cols["table"]], num, t_ns, window_ns, meta=meta, summary=summary,
                 config=config, edges=_edges(d), latency=_latency(d), cfg=_cfg(d))


def build(d: Path, names: list[str], table_idx, num: dict[str, np.ndarray], t_ns: np.ndarray, window_ns: float, *,
          meta: dict, summary: dict, config: dict, edges: dict[tuple[str, str], float],
          latency: dict, cfg: dict | None) -> Run:
    """A :class:`Run` from window columns (``num``: name -> values, ``table_idx``
    per row): shared by :func:`load` and the live view (windows in memory)."""
    from synapse_vmt.report import table_grid

    T, W = len(names), len(t_ns)
    ti = np.asarray(table_idx, dtype=np.int64)
    looked = num["hits"] + num["misses"]
    _, grid = table_grid({**num, "table": ti}, T, window_ns)
    span_ns = W * window_ns
    tables: dict[str, dict] = {}
    for j, n in enumerate(names):
        m = ti == j
        lk = float(looked[m].sum())
        lat = np.nan_to_num(num["lat_mean_ns"][m])
        hist = latency.get(n)
        if hist is not None and hist[2].sum() > 0:
            p50, p99 = quantiles(hist, (0.5, 0.99))
        else:  # no histogram: the windows' own figures (p99: the worst window)
            p50s = num["lat_p50_ns"][m] if "lat_p50_ns" in num else np.zeros(0)
            p99s = num["lat_p99_ns"][m]
            p50 = float(np.median(p50s[np.isfinite(p50s)])) if np.isfinite(p50s).any() else float("nan")
            p99 = float(np.max(p99s[np.isfinite(p99s)])) if np.isfinite(p99s).any() else float("nan")
        mean_lat = float((lat * looked[m]).sum() / lk) if lk else float("nan")
        tables[n] = {
            "arrived": int(num["arrived"][m].sum()), "processed": int(num["processed"][m].sum()), "lookups": int(lk),
            "hit_rate": float(num["hits"][m].sum() / lk) if lk else float("nan"),
            "offered_mpps": float(num["arrived"][m].sum() / span_ns * 1e3) if span_ns else float("nan"),
            "throughput_mpps": float(num["processed"][m].sum() / span_ns * 1e3) if span_ns else float("nan"),
            "mean_latency_ns": mean_lat, "p50_latency_ns": p50, "p99_latency_ns": p99,
            "hbm_gbps": float(num["hbm_bytes"][m].sum() / span_ns) if span_ns else float("nan"),
            "pmus_mean": float(np.mean(num["pmus"][m])) if m.any() else 0.0,
            "pmus_max": int(np.max(num["pmus"][m])) if m.any() else 0,
            "lookup_time_ns": float((lat * looked[m]).sum()),
        }
    total = sum(t["lookup_time_ns"] for t in tables.values())
    for t in tables.values():
        t["lookup_time_share"] = t["lookup_time_ns"] / total if total else 0.0
    nodes, gedges = _graph(names, config, cfg, edges)
    hidden = [t["name"] for t in cfg["tables"] if t["name"] not in set(nodes)] if cfg is not None else []
    return Run(path=d, kind=str(meta.get("kind") or _guess_kind(d, summary, cfg)), command=str(meta.get("command") or ""),
               window_ns=window_ns, names=names, t_ns=t_ns, grid=grid, tables=tables, graph_nodes=nodes, graph_edges=gedges,
               graph_hidden=hidden,
               latency=latency, summary=summary, config=config, invariants=_invariants(summary),
               decisions=_decisions(summary), schemes=_schemes(d))


def quantiles(hist: tuple[np.ndarray, np.ndarray, np.ndarray], qs) -> list[float]:
    """Quantiles of a bucketed histogram, as :func:`synapse_vmt.sweep.hist_quantiles` reads them."""
    from synapse_vmt.sweep import hist_quantiles

    lo, hi, c = hist
    # the non-empty buckets only: an edge list with a zero-count gap bucket between neighbours
    edges = np.empty(2 * len(lo))
    edges[0::2], edges[1::2] = lo, hi
    counts = np.zeros(2 * len(lo) - 1)
    counts[0::2] = c
    return hist_quantiles(edges, counts, list(qs))


def _guess_kind(d: Path, summary: dict, cfg: dict | None) -> str:
    if summary.get("figure"):
        return f"reproduce {summary['figure']}"
    return "run --p4" if cfg is not None or "routes" in summary else "run"


def _edges(d: Path) -> dict[tuple[str, str], float]:
    p = d / "edges.csv"
    if not p.is_file():
        return {}
    cols = _read_csv(p)
    if not {"src", "dst", "count"} <= set(cols):
        raise UserError(f"{p}:1: expected columns t_ns, src, dst, count")
    out: dict[tuple[str, str], float] = {}
    for s, t, c in zip(cols["src"], cols["dst"], _floats(p, cols, "count")):
        out[(s, t)] = out.get((s, t), 0.0) + c
    return out


def _latency(d: Path) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    p = d / "latency.csv"
    if not p.is_file():
        return {}
    cols = _read_csv(p)
    lo, hi, c = (_floats(p, cols, k) for k in ("lo_ns", "hi_ns", "count"))
    out = {}
    tab = np.array(cols["table"], dtype=object)
    for n in dict.fromkeys(cols["table"]):
        m = tab == n
        o = np.argsort(lo[m], kind="stable")
        out[n] = (lo[m][o], hi[m][o], c[m][o])
    return out


def _cfg(d: Path) -> dict | None:
    p = d / "cfg.json"
    if not p.is_file():
        return None
    from synapse_vmt.p4.cfg import cfg_from_json

    return cfg_from_json(_read_json(p), str(p)).to_json()


def _graph(names: list[str], config: dict, cfg: dict | None, seen: dict[tuple[str, str], float]):
    """The graph's nodes and edges: the program's (cfg.json, else the
    scenario's tables and edges) with the PHV counts of edges.csv. A program
    of more than :data:`ALL_TABLES_UP_TO` tables shows the tables the run
    visited, its edges folded over the others."""
    if cfg is not None:
        nodes = [t["name"] for t in cfg["tables"]]
        prog = [(e["src"], e["dst"]) for e in cfg["edges"]]
    else:
        nodes = [t.get("name", "") for t in config.get("tables", [])]
        prog = [(e["src"], e["dst"]) for e in config.get("edges", [])]
    nodes = list(dict.fromkeys([*nodes, *names]))
    if len(nodes) > ALL_TABLES_UP_TO:
        # the program's edges between visited tables: paths through unvisited ones, drawn when PHVs took them
        nodes = [n for n in nodes if n in set(names)]
        prog = []
    edges = {e: 0.0 for e in prog if e[0] in nodes and e[1] in nodes}
    for (s, t), c in seen.items():
        if s in nodes and t in nodes:
            edges[(s, t)] = edges.get((s, t), 0.0) + c
    return nodes, edges


#: Larger programs show only the tables a run visited.
ALL_TABLES_UP_TO = 40


def _invariants(summary: dict) -> dict[str, dict]:
    if isinstance(summary.get("invariants"), dict):
        return {"run": summary["invariants"]}
    schemes = summary.get("schemes")
    if isinstance(schemes, dict):
        return {k: v["invariants"] for k, v in schemes.items() if isinstance(v, dict) and "invariants" in v}
    return {}


def _decisions(summary: dict) -> list[dict]:
    """The closed loop's decisions as ``{t_ns, held, target}`` per table name."""
    raw = summary.get("closed_loop_decisions")
    names = summary.get("tables")
    if not raw or not isinstance(names, list):
        return []
    out = []
    for d in raw:
        rec = {"t_ns": float(d["t_ns"]), "held": dict(zip(names, d["held"])), "target": dict(zip(names, d["target"]))}
        notes = []
        if "elu_pred_held_mpps" in d:
            notes.append(f"predicted ELU load {d['elu_pred_held_mpps']:.3g} Mpps held, {d['elu_pred_target_mpps']:.3g} Mpps target")
        if d.get("behind"):
            notes.append("a table was behind (throttled)")
        rec["note"] = "; ".join(notes)
        out.append(rec)
    return out


def _schemes(d: Path) -> dict[str, dict[str, np.ndarray]]:
    p = d / "upf.csv"
    if not p.is_file():
        return {}
    cols = _read_csv(p)
    sch = np.array(cols.pop("scheme"), dtype=object)
    num = {c: _floats(p, cols, c) for c in cols}
    return {k: {c: v[sch == k] for c, v in num.items()} for k in dict.fromkeys(sch.tolist())}

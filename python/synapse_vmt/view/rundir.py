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
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from synapse_vmt import cmdline
from synapse_vmt.errors import UserError, atomic_write
from synapse_vmt.view.bins import OutOfOrder, WindowBins

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
    t_ns: np.ndarray  # window ends (a long run: each bin's last window end, view/bins.py)
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
    windows: int = 0  # statistics windows of the run
    bin_windows: int = 1  # windows per column of ``t_ns``/``grid`` (1 up to view.bins.CAP windows)
    grid_lo: dict[str, np.ndarray] = field(default_factory=dict)  # per metric the smallest window of each column's
    grid_hi: dict[str, np.ndarray] = field(default_factory=dict)  # and the largest

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
        lo, hi = self.grid_lo.get("pmus", self.grid["pmus"]), self.grid_hi.get("pmus", self.grid["pmus"])
        return bool(self.decisions) or any(
            np.nanmax(h) != np.nanmin(lw) for lw, h in zip(lo, hi) if np.isfinite(h).any())


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: not a JSON file the report can read ({e})") from None


def _read_csv(path: Path) -> dict[str, list[str]]:
    """A small CSV file's columns by header name (windows.csv and edges.csv,
    which grow with the run, are streamed instead)."""
    cols: dict[str, list[str]] = {}
    for head, _, r in _rows(path):
        if not cols:
            cols = {h: [] for h in head}
        for h, v in zip(head, r):
            cols[h].append(v)
    return cols or {h: [] for h in _header(path)}


def _floats(path: Path, cols: dict[str, list[str]], name: str) -> np.ndarray:
    try:
        return np.array([float(v) if v != "" else np.nan for v in cols[name]], dtype=float)
    except ValueError as e:
        raise UserError(f"{path}: column {name}: {e}") from None


NEEDED = ("t_ns", "table", "arrived", "processed", "hits", "misses", "hbm_bytes", "lat_mean_ns", "lat_p99_ns", "pmus")
#: windows.csv rows read and folded at a time
CHUNK = 8192


@contextmanager
def _csv(path: Path):
    """(header, remaining rows) of an open CSV file; an unreadable file or a
    missing header is a :class:`UserError` naming it."""
    try:
        with path.open(newline="") as f:
            rows = csv.reader(f)
            head = next(rows, None)
            if not head:
                raise UserError(f"{path}:1: expected a header line")
            yield head, rows
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read ({e})") from None


def _rows(path: Path):
    """(header, line number, row) of a CSV file, streamed; a row of another
    width than the header is a :class:`UserError` naming its line."""
    with _csv(path) as (head, rows):
        for i, r in enumerate(rows, 2):
            if len(r) != len(head):
                raise UserError(f"{path}:{i}: expected {len(head)} fields, found {len(r)}")
            yield head, i, r


def _header(path: Path) -> list[str]:
    with _csv(path) as (head, _):
        return head


def _fold_windows(path: Path, head: list[str], names: dict[str, int], ends: np.ndarray | None = None) -> WindowBins:
    """windows.csv folded into :class:`WindowBins`, :data:`CHUNK` rows at a
    time (the file is never held whole); ``names`` gets each table's index in
    first-seen order. Raises :class:`OutOfOrder` (without ``ends``) on a row
    earlier than the window before it."""
    bins = WindowBins(ends=ends)
    num = [h for h in head if h != "table"]
    at = {h: head.index(h) for h in head}
    tcol = at["table"]
    buf: list[list[str]] = []

    def flush():
        cols = {}
        for h in num:
            k = at[h]
            try:
                cols[h] = np.array([float(r[k]) if r[k] != "" else np.nan for r in buf], dtype=float)
            except ValueError as e:
                raise UserError(f"{path}: column {h}: {e}") from None
        tab = np.array([names.setdefault(r[tcol], len(names)) for r in buf], dtype=np.int64)
        bins.add(cols.pop("t_ns"), tab, cols)
        buf.clear()

    for _, _, r in _rows(path):
        buf.append(r)
        if len(buf) == CHUNK:
            flush()
    if buf:
        flush()
    return bins


def _window_ends(path: Path, head: list[str]) -> np.ndarray:
    """Every distinct window end of windows.csv, sorted (for a file whose rows are not in time order)."""
    k = head.index("t_ns")
    ends = np.zeros(0)
    buf: list[float] = []
    for _, _, r in _rows(path):
        try:
            buf.append(float(r[k]) if r[k] != "" else np.nan)
        except ValueError as e:
            raise UserError(f"{path}: column t_ns: {e}") from None
        if len(buf) == CHUNK:
            ends, buf = np.union1d(ends, buf), []
    return np.union1d(ends, buf)


def load(path: str | Path) -> Run:
    """Reads a run directory (see the module doc); a missing windows.csv or a
    malformed file is a :class:`UserError` naming it. windows.csv is streamed
    into at most :data:`~synapse_vmt.view.bins.CAP` bins per table: a run of
    any length costs the same memory."""
    d = Path(path)
    wpath = d / "windows.csv"
    if not d.is_dir():
        raise UserError(f"{d}: no such run directory")
    if not wpath.is_file():
        raise UserError(f"{d}: no windows.csv: not a run's output directory (synapse run -o DIR writes one)")
    head = _header(wpath)
    missing = [c for c in NEEDED if c not in head]
    if missing:
        raise UserError(f"{wpath}:1: missing column(s) {', '.join(missing)}")
    names: dict[str, int] = {}
    try:
        bins = _fold_windows(wpath, head, names)
    except OutOfOrder:  # rows not in time order: every window end first, then the rows into their bins
        names.clear()
        bins = _fold_windows(wpath, head, names, ends=_window_ends(wpath, head))
    meta = _read_json(d / "run.json") if (d / "run.json").is_file() else {}
    summary = _read_json(d / "summary.json") if (d / "summary.json").is_file() else {}
    config = _read_json(d / "scenario.json") if (d / "scenario.json").is_file() else {}
    ends = bins.ends_ns()
    window_ns = float(meta.get("window_ns") or config.get("window_ns") or bins.step_ns() or (ends[0] if len(ends) else 1.0))
    return build(d, list(names), bins, window_ns, meta=meta, summary=summary, config=config, edges=_edges(d),
                 latency=_latency(d), cfg=_cfg(d))


def build(d: Path, names: list[str], bins: WindowBins, window_ns: float, *, meta: dict, summary: dict, config: dict,
          edges: dict[tuple[str, str], float], latency: dict, cfg: dict | None) -> Run:
    """A :class:`Run` from window rows folded into bins (table ``j`` of
    ``bins``: ``names[j]``): shared by :func:`load` and the live view
    (windows in memory)."""
    grid, lo, hi = bins.grid(window_ns)
    T = len(names)
    if bins.tables < T:  # a table named but without rows (yet)
        grid, lo, hi = ({k: np.vstack([v, np.full((T - v.shape[0], v.shape[1]), np.nan)]) for k, v in g.items()}
                        for g in (grid, lo, hi))
    span_ns = bins.windows * window_ns
    tables: dict[str, dict] = {}
    for j, n in enumerate(names):
        b = bins.table(j)
        looked = b["hits"] + b["misses"]
        lk = float(looked.sum())
        hist = latency.get(n)
        if hist is not None and hist[2].sum() > 0:
            p50, p99 = quantiles(hist, (0.5, 0.99))
        else:  # no histogram: the windows' own figures (p50: the median window, over bins the median bin; p99: the worst window)
            p50s, p99s = b["lat_p50_ns"], b["lat_p99_ns_max"]
            p50 = float(np.median(p50s[np.isfinite(p50s)])) if np.isfinite(p50s).any() else float("nan")
            p99 = float(np.max(p99s[np.isfinite(p99s)])) if np.isfinite(p99s).any() else float("nan")
        rows = float(b["rows"].sum())
        mean_lat = float(b["lookup_time"].sum() / lk) if lk else float("nan")
        tables[n] = {
            "arrived": int(b["arrived"].sum()), "processed": int(b["processed"].sum()), "lookups": int(lk),
            "hit_rate": float(b["hits"].sum() / lk) if lk else float("nan"),
            "offered_mpps": float(b["arrived"].sum() / span_ns * 1e3) if span_ns else float("nan"),
            "throughput_mpps": float(b["processed"].sum() / span_ns * 1e3) if span_ns else float("nan"),
            "mean_latency_ns": mean_lat, "p50_latency_ns": p50, "p99_latency_ns": p99,
            "hbm_gbps": float(b["hbm_bytes"].sum() / span_ns) if span_ns else float("nan"),
            "pmus_mean": float(b["pmus/sum"].sum() / rows) if rows else 0.0,
            "pmus_max": int(np.max(b["pmus_max"])) if rows else 0,
            "lookup_time_ns": float(b["lookup_time"].sum()),
        }
    total = sum(t["lookup_time_ns"] for t in tables.values())
    for t in tables.values():
        t["lookup_time_share"] = t["lookup_time_ns"] / total if total else 0.0
    nodes, gedges = _graph(names, config, cfg, edges)
    hidden = [t["name"] for t in cfg["tables"] if t["name"] not in set(nodes)] if cfg is not None else []
    return Run(path=d, kind=str(meta.get("kind") or _guess_kind(d, summary, cfg)), command=str(meta.get("command") or ""),
               window_ns=window_ns, names=names, t_ns=bins.ends_ns(), grid=grid, tables=tables, graph_nodes=nodes,
               graph_edges=gedges, graph_hidden=hidden, latency=latency, summary=summary, config=config,
               invariants=_invariants(summary), decisions=_decisions(summary), schemes=_schemes(d),
               windows=bins.windows, bin_windows=bins.k, grid_lo=lo, grid_hi=hi)


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
    head = _header(p)
    if not {"src", "dst", "count"} <= set(head):
        raise UserError(f"{p}:1: expected columns t_ns, src, dst, count")
    ks, kt, kc = (head.index(h) for h in ("src", "dst", "count"))
    out: dict[tuple[str, str], float] = {}
    for _, _, r in _rows(p):  # streamed: a long run's edges.csv is never held whole
        try:
            c = float(r[kc]) if r[kc] != "" else np.nan
        except ValueError as e:
            raise UserError(f"{p}: column count: {e}") from None
        out[(r[ks], r[kt])] = out.get((r[ks], r[kt]), 0.0) + c
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

"""Miss-ratio curves: each table's hit rate at every (PMU count, block size)
from one pass over its key stream (``synapse mrc``).

The per-key work runs in Rust (``crates/synapse-core/src/sim/mrc.rs``:
Mattson's stack distances per PMU with a Fenwick tree, the VMU's sharding,
the fill latency of early-miss PMUs, SHARDS sampling); this module picks the
key streams, writes ``mrc.csv`` and the plot, and measures the curves
against the exact engine (:func:`validate`).

Key streams: a ClassBench scenario's are the exact run's arrivals (the same
generator and seed), each PHV routed through the CFG with draws of its own; a
P4 program's (a program scenario or ``--p4``) come from the routed simulator
it would run: each arrival visits its route's tables with its key at each
(:func:`program_curves`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from synapse_vmt import _core
from synapse_vmt.errors import UserError

#: The grid unless told otherwise: 1 to 16 PMUs, blocks of 16 to 2048 entries.
DEFAULT_PMUS = list(range(1, 17))
DEFAULT_BLOCKS = [16, 32, 64, 128, 256, 512, 1024, 2048]


@dataclass
class Sampling:
    """``exact``, ``rate:R`` (SHARDS fixed rate, 0 < R <= 1) or ``size:N``
    (SHARDS fixed size: at most N keys tracked per table)."""

    kind: str = "exact"
    value: float = 0.0

    @staticmethod
    def parse(text: str) -> "Sampling":
        m = re.fullmatch(r"\s*(exact|rate|size)\s*(?::\s*([0-9.eE+-]+))?\s*", text)
        if not m or (m.group(1) != "exact") != (m.group(2) is not None):
            raise UserError(f"--sampling {text}: expected exact, rate:R (0 < R <= 1) or size:N (N >= 1)")
        kind, v = m.group(1), float(m.group(2) or 0)
        if (kind == "rate" and not 0 < v <= 1) or (kind == "size" and v < 1):
            raise UserError(f"--sampling {text}: expected exact, rate:R (0 < R <= 1) or size:N (N >= 1)")
        return Sampling(kind, v)

    def __str__(self) -> str:
        return self.kind if self.kind == "exact" else f"{self.kind}:{self.value:g}"


def parse_ints(text: str, what: str) -> list[int]:
    """``1-8``, ``1,2,4,8`` or a mix (``1-4,8,16``), each >= 1."""
    out: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise UserError(f"{what} {text}: expected numbers and ranges such as 1-8,16")
        a, b = int(m.group(1)), int(m.group(2) or m.group(1))
        if a < 1 or b < a:
            raise UserError(f"{what} {text}: {part.strip()}: expected numbers >= 1, ranges low-high")
        out += range(a, b + 1)
    return sorted(set(out))


@dataclass
class Curves:
    """One run's curves: per table and grid point the hit rate."""

    rows: dict[str, np.ndarray]
    stats: dict[str, dict]
    block_size: int  # the scenario's own block size
    pmus: dict[str, int] = field(default_factory=dict)  # per table, the PMUs the scenario gives it

    def hit_rate(self, table: str, pmus: int, block: int) -> float:
        r = self.rows
        m = (np.asarray(r["table"]) == table) & (r["pmus"] == pmus) & (r["block_size"] == block)
        if not m.any():
            raise KeyError((table, pmus, block))
        return float(r["hit_rate"][m][0])

    def tables(self) -> list[str]:
        return list(dict.fromkeys(self.rows["table"]))


def scenario_curves(scn_path, overrides: tuple[str, ...] | list[str], pmus: list[int], blocks: list[int],
                    sampling: Sampling, shadow: bool = True) -> Curves:
    """Curves of a ClassBench scenario (a TOML file or None: the built-in
    one, with ``--set`` overrides). Tables that name no PMUs take them as
    the scenario's even split would with ``max(pmus)`` per table, so that a
    table of n PMUs holds the ids an exact run with n per table gives it."""
    import json

    from synapse_vmt.scenario import load

    scn = load(scn_path, list(overrides))
    own = {t.name: len(t.pmus) for t in scn.tables if t.pmus is not None}
    if not own:
        scn = load(scn_path, [*overrides, f"pmus.count={max(pmus) * len(scn.tables)}"])
    cfg = scn.sim_config()
    try:
        m = _core.mrc_run(json.dumps(cfg), pmus, blocks, sampling.kind, sampling.value, shadow)
    except ValueError as e:
        raise UserError(str(e)) from None
    base = load(scn_path, list(overrides)).sim_config()
    return Curves(m.rows(), m.stats(), int(cfg["pmus"]["block_size"]), {t["name"]: len(t["pmus"]) for t in base["tables"]})


def program_curves(kw: dict[str, Any], pmus: list[int], blocks: list[int], sampling: Sampling, shadow: bool = True,
                   chunk_ns: float = 20_000.0) -> Curves:
    """Curves of a P4 program run (the keyword arguments of
    :func:`synapse_vmt.p4.simrun.run_program`): the routed simulator it would
    build, its arrivals pushed batch by batch into the curves instead of
    being simulated."""
    from synapse_vmt.p4 import simrun

    args = {k: kw[k] for k in ("pcap", "traffic", "duration_ns", "rate_mpps", "seed") if k in kw}
    pr = simrun.prepare(kw["program"], kw.get("entries_file"), **args)
    if not pr.routes.tables:
        raise UserError(f"{kw['program']}: no packet visits a keyed table; no curve to draw")
    pool = int(kw.get("pmus", 16))
    split = simrun.even_split(pr.routes.tables, max(pool, max(pmus) * len(pr.routes.tables)))
    block = int(kw.get("block_size", 256))
    sim = simrun.build_sim(pr, split, max(pool, max(pmus) * len(pr.routes.tables)), block_size=block,
                           window_ns=kw.get("window_ns", 10_000.0), seed=kw.get("seed", 1), overrides=kw.get("overrides"))
    m = _core.mrc_routed(sim.core, pmus, blocks, sampling.kind, sampling.value, shadow)
    t = 0.0
    while t < pr.duration_ns:
        t = min(pr.duration_ns, t + chunk_ns)
        ts, rs = sim.feeder(int(t * 1000) + 1)
        if len(ts):
            _core.mrc_push(m, sim.core, np.ascontiguousarray(ts, dtype=np.uint64), np.ascontiguousarray(rs, dtype=np.uint32))
    own = {name: len(v) for name, v in simrun.even_split(pr.routes.tables, pool).items()}
    return Curves(m.rows(), m.stats(), block, own)


def write_csv(path: Path, c: Curves) -> None:
    rows = [{"table": t, "pmus": int(p), "block_size": int(b), "hit_rate": f"{h:.6f}"}
            for t, p, b, h in zip(c.rows["table"], c.rows["pmus"], c.rows["block_size"], c.rows["hit_rate"])]
    from synapse_vmt.report import write_rows

    write_rows(path, rows)


def plot(path: Path, c: Curves, title: str = "") -> None:
    """Hit rate against VMT capacity (PMUs × block size), a line per block
    size, a panel per table."""
    from synapse_vmt import report

    plt = report.pyplot()
    names = c.tables()
    cols = min(3, len(names))
    nrow = (len(names) + cols - 1) // cols
    fig, axs = plt.subplots(nrow, cols, figsize=(5 * cols, 3.6 * nrow), squeeze=False)
    r = c.rows
    tab = np.asarray(r["table"])
    for a, name in zip(axs.flat, names):
        for b in sorted(set(r["block_size"].tolist())):
            m = (tab == name) & (r["block_size"] == b)
            cap = r["pmus"][m] * b
            o = np.argsort(cap)
            a.plot(cap[o], r["hit_rate"][m][o], "o-", ms=3, label=f"block {b}")
        a.set(title=name, xlabel="VMT capacity (entries)", ylabel="hit rate", xscale="log", ylim=(0, 1.02))
        a.grid(alpha=0.3)
    for a in list(axs.flat)[len(names):]:
        a.axis("off")
    axs.flat[0].legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    report.save_png(fig, path)


def validate(c: Curves, exact_run, pmus: list[int]) -> list[dict]:
    """The curves against the exact engine: for each PMU count of ``pmus``,
    ``exact_run(n)`` runs the exact engine with ``n`` PMUs per table and returns
    ``{table: (pmus held, hit rate)}``; a row per table with both hit rates
    at the scenario's block size and their difference."""
    out = []
    for n in pmus:
        for table, (held, exact) in exact_run(n).items():
            if held < 1:
                continue
            curve = c.hit_rate(table, held, c.block_size)
            out.append({"table": table, "pmus": held, "block_size": c.block_size, "exact_hit_rate": exact,
                        "curve_hit_rate": curve, "difference": curve - exact})
    return out


def scenario_exact(scn_path, overrides: tuple[str, ...] | list[str]):
    """``exact_run`` of :func:`validate` for a ClassBench scenario: ``n``
    PMUs per table (tables that name their PMUs keep them)."""
    from synapse_vmt.scenario import load
    from synapse_vmt.sim import Simulation

    def run(n: int) -> dict[str, tuple[int, float]]:
        scn = load(scn_path, list(overrides))
        scn = load(scn_path, [*overrides, f"pmus.count={max(n * len(scn.tables), scn.pmus.count if any(t.pmus for t in scn.tables) else 0)}"])
        s = Simulation(scn).run()
        return {t["name"]: (len(t["pmus"]), s["tables"][t["name"]]["hit_rate"]) for t in scn.sim_config()["tables"]}

    return run


def program_exact(kw: dict[str, Any], tables_of: int):
    """``exact_run`` of :func:`validate` for a P4 program: the pool is
    ``n`` PMUs per table, split evenly as ``run --p4`` does."""
    import tempfile

    from synapse_vmt.p4 import simrun

    def run(n: int) -> dict[str, tuple[int, float]]:
        with tempfile.TemporaryDirectory() as d:
            s = simrun.run_program(d, **{**kw, "pmus": n * tables_of})
        split = {}
        for name, row in s["tables"].items():
            if row.get("simulated"):
                split[name] = (n, row["hit_rate"])
        return split

    return run

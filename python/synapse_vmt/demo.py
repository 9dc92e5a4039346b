"""The interim main job, ``synapse run``: until the simulator lands, it
generates a built-in rule set and a trace, classifies the trace with the
linear oracle and writes a summary. The simulator replaces this command by
swapping the one ``run`` entry in ``commands.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np
from rich.console import Console
from rich.table import Table

from synapse_vmt import _core
from synapse_vmt.errors import atomic_write
from synapse_vmt.rules_cli import check, classify_timed


@click.command("run")
@click.option("-o", "--output", type=click.Path(file_okay=False), default="results/default", show_default=True,
              help="Output directory.")
@click.option("--type", "kind", type=click.Choice(["acl", "fw", "ipc"]), default="acl", show_default=True,
              help="Built-in rule-set type.")
@click.option("--rules", "count", type=click.IntRange(min=1), default=10_000, show_default=True, help="Rules.")
@click.option("--packets", type=click.IntRange(min=1), default=100_000, show_default=True, help="Trace headers.")
@click.option("--seed", type=click.IntRange(min=0), default=1, show_default=True, help="Random seed.")
def run(output: str, kind: str, count: int, packets: int, seed: int) -> None:
    """Main job (for now): generate a rule set and a trace, classify the
    trace with the linear oracle, print and save a summary."""
    out = Path(output)
    con = Console()
    with con.status("generating rules and trace"):
        rs = _core.RuleSet.generate(kind, count, seed)
        tr = _core.Trace.generate(rs, packets, seed)
    with atomic_write(out / "rules.txt") as f:
        f.write(rs.format())
    with atomic_write(out / "trace.txt") as f:
        f.write(tr.format())
    clf = _core.Classifier(rs, "linear")
    res, dt = classify_timed(clf, tr, work=len(rs) * len(tr))
    wrong = check(res, tr)
    hit = np.bincount(res[res >= 0], minlength=len(rs))
    stats = rs.stats()
    summary = {
        "rule_set": {"type": kind, "rules": len(rs), "seed": seed, "unique_src": stats["unique_src"],
                     "unique_dst": stats["unique_dst"]},
        "trace": {"headers": len(tr), "pareto": [1.0, 0.1], "seed": seed},
        "classify": {
            "algo": "linear",
            "wrong": wrong,
            "matched": int(np.count_nonzero(res >= 0)),
            "rules_hit": int(np.count_nonzero(hit)),
            "top_rule_share": float(hit.max() / len(tr)),
            "mean_match_index": float(res[res >= 0].mean()),
        },
        # Wall-clock figures differ run to run; everything above is seeded.
        "timing": {"classify_s": dt, "lookups_per_s": len(tr) / dt if dt > 0 else None},
        "files": {"rules": "rules.txt", "trace": "trace.txt"},
    }
    with atomic_write(out / "summary.json") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    t = Table(title=f"synapse run: {kind} set, linear classifier", title_justify="left")
    t.add_column("")
    t.add_column("value", justify="right")
    rows = [
        ("rules", f"{len(rs)}"),
        ("headers", f"{len(tr)}"),
        ("matched", f"{summary['classify']['matched']}"),
        ("wrong (ClassBench measure)", f"{wrong}"),
        ("rules hit", f"{summary['classify']['rules_hit']}"),
        ("mean index of matching rule", f"{summary['classify']['mean_match_index']:.1f}"),
        ("lookups/s (linear)", f"{len(tr) / dt:,.0f}" if dt > 0 else "-"),
    ]
    for r in rows:
        t.add_row(*r)
    con.print(t)
    click.echo(f"wrote {out / 'summary.json'}, rules.txt, trace.txt")

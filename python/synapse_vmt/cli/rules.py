"""Rule sets and header traces on the command line.

``synapse rules gen`` makes a ClassBench-style set (built-in acl/fw/ipc seeds or
any ClassBench parameter file), ``synapse rules stats`` prints its
distributions (beside other sets' for comparison), ``synapse trace gen``
draws headers from a set, and ``synapse classify`` runs a classifier over a
trace and checks it by ClassBench's measure. Rust does the parsing,
generating and classifying; this module reads and writes files and prints.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from synapse_vmt import _core
from synapse_vmt.errors import UserError, atomic_write, read_text

PROTOCOL_NAMES = {"*": "any", "1": "icmp", "6": "tcp", "17": "udp", "47": "gre", "50": "esp", "51": "ah"}


def settings_of(settings: tuple[str, ...]) -> dict[str, str]:
    """A classifier's ``--set KEY=VALUE`` options as its settings."""
    config = {}
    for s in settings:
        key, eq, value = s.partition("=")
        if not eq:
            raise UserError(f"--set: expected KEY=VALUE, found {s!r}")
        config[key.strip()] = value.strip()
    return config


def _load(parse, path: str | Path, empty: str):
    """Parse a file with a Rust parser; a malformed or empty file is a UserError."""
    try:
        parsed = parse(read_text(path), str(path))
    except _core.ParseError as e:
        raise UserError(str(e)) from None
    if len(parsed) == 0:
        raise UserError(f"{path}: {empty}")
    return parsed


def load_rules(path: str | Path) -> _core.RuleSet:
    """Parse a ClassBench filter file."""
    return _load(_core.RuleSet.parse, path, "no rules (expected ClassBench filter lines '@src/len dst/len ...')")


def load_trace(path: str | Path) -> _core.Trace:
    """Parse a ClassBench header trace."""
    return _load(_core.Trace.parse, path, "no headers (expected lines 'src dst sport dport proto [flags [rule]]')")


def generate_rules(kind: str, count: int, seed: int, seed_file: str | None = None,
                   smoothness: int = 0) -> _core.RuleSet:
    """Generate a set from a built-in type or a ClassBench parameter file."""
    if seed_file is None:
        return _core.RuleSet.generate(kind, count, seed, smoothness=smoothness)
    try:
        return _core.RuleSet.generate(kind, count, seed, read_text(seed_file), str(seed_file), smoothness)
    except _core.ParseError as e:
        raise UserError(str(e)) from None


def check(results: np.ndarray, trace: _core.Trace) -> int | None:
    """Wrong results by ClassBench's measure (no match, or a match after the
    rule the header was drawn from); None when the trace has no rule column."""
    drawn = trace.rules()
    if drawn is None:
        return None
    return int(np.count_nonzero((results < 0) | (results > drawn)))


def classify_timed(clf: _core.Classifier, tr: _core.Trace, work: int) -> tuple[np.ndarray, float]:
    """Classify the whole trace, timing only the Rust batch calls. Long jobs
    (``work``: rules x headers, the linear scan's cost) go in chunks behind
    a progress bar."""
    n = len(tr)
    chunks = 1 if work < 2e9 else min(100, n)
    bounds = np.linspace(0, n, chunks + 1, dtype=np.int64)
    parts, dt = [], 0.0
    with Progress(transient=True, disable=chunks == 1) as bar:
        task = bar.add_task(f"classifying {n} headers ({clf.algo})", total=n)
        for a, b in zip(bounds[:-1], bounds[1:]):
            t0 = time.perf_counter()
            parts.append(clf.classify(tr, int(a), int(b)))
            dt += time.perf_counter() - t0
            bar.update(task, completed=int(b))
    return np.concatenate(parts), dt


@click.group()
def rules() -> None:
    """Generate rule sets and print their statistics."""


@rules.command("gen")
@click.option("--type", "kind", type=click.Choice(["acl", "fw", "ipc"]), default="acl", show_default=True,
              help="Built-in seed (ClassBench's acl1, fw1, ipc1).")
@click.option("--count", type=click.IntRange(min=1), default=1000, show_default=True, help="Rules to generate.")
@click.option("--seed", type=click.IntRange(min=0), default=1, show_default=True, help="Random seed.")
@click.option("--seed-file", type=click.Path(dir_okay=False), default=None,
              help="A ClassBench parameter file to use instead of the built-in type.")
@click.option("--smoothness", type=click.IntRange(0, 64), default=0, show_default=True,
              help="db_generator's prefix-length smoothing: spread each spike binomially (0: the seed's spikes).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True, help="Output rule file.")
def rules_gen(kind: str, count: int, seed: int, seed_file: str | None, smoothness: int, output: str) -> None:
    """Generate a ClassBench-style rule set (ClassBench-ng format, with flags)."""
    rs = generate_rules(kind, count, seed, seed_file, smoothness)
    with atomic_write(output) as f:
        f.write(rs.format())
    src = seed_file or f"built-in {kind}"
    note = "" if len(rs) == count else f" (the seed cannot make {count} distinct rules)"
    click.echo(f"wrote {len(rs)} rules from {src} (seed {seed}) to {output}{note}")


def _shares(counts: dict[str, int], total: int) -> dict[str, float]:
    return {k: v / total for k, v in counts.items()} if total else {}


def _pct(x: float | None) -> str:
    return "" if x is None or x == 0 else f"{100 * x:5.1f}%"


@rules.command("stats")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--top", type=click.IntRange(min=1), default=12, show_default=True,
              help="Prefix-length pairs to list.")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON instead of tables.")
def rules_stats(files: tuple[str, ...], top: int, as_json: bool) -> None:
    """Print protocol, port-class, prefix-length and flag distributions of
    one or more rule sets, side by side (shares of each set's rules)."""
    stats = [load_rules(f).stats() for f in files]
    if as_json:
        click.echo(json.dumps({f: s for f, s in zip(files, stats)}, indent=1))
        return
    names = [Path(f).name for f in files]
    con = Console()

    def table(title: str, key: str, rows: list[tuple[str, list[float | None]]]) -> None:
        t = Table(title=title, title_justify="left")
        t.add_column(key)
        for n in names:
            t.add_column(n, justify="right")
        for label, vals in rows:
            t.add_row(label, *[_pct(v) for v in vals])
        con.print(t)

    t = Table(title="Rule sets", title_justify="left")
    for c in ["", "rules", "unique src", "unique dst", "unique pairs"]:
        t.add_column(c, justify="right" if c else "left")
    for n, s in zip(names, stats):
        t.add_row(n, str(s["rules"]), str(s["unique_src"]), str(s["unique_dst"]), str(s["unique_pairs"]))
    con.print(t)

    def dist(field: str) -> list[dict[str, float]]:
        return [_shares(dict(s[field]), s["rules"]) for s in stats]

    def rows_of(d: list[dict[str, float]], order: list[str] | None = None) -> list[tuple[str, list]]:
        keys = order or sorted({k for x in d for k in x}, key=lambda k: -max(x.get(k, 0) for x in d))
        return [(k, [x.get(k) for x in d]) for k in keys]

    protos = dist("protocols")
    table("Protocols", "protocol", [(f"{k} ({PROTOCOL_NAMES.get(k, '?')})", v) for k, v in rows_of(protos)])
    classes = ["wc", "hi", "lo", "ar", "em"]
    sp, dp = dist("sport"), dist("dport")
    t = Table(title="Port classes (WC any, HI 1024:65535, LO 0:1023, AR range, EM exact)", title_justify="left")
    t.add_column("class")
    for n in names:
        t.add_column(f"{n} sport", justify="right")
        t.add_column(f"{n} dport", justify="right")
    for c in classes:
        t.add_row(c.upper(), *[p for a, b in zip(sp, dp) for p in (_pct(a.get(c)), _pct(b.get(c)))])
    con.print(t)
    table("Port-pair classes", "sport_dport", rows_of(dist("ppc")))
    pairs = [_shares({f"{a}/{b}": n for a, b, n in s["prefix_pairs"]}, s["rules"]) for s in stats]
    table(f"Prefix-length pairs (src/dst), top {top}", "src/dst", rows_of(pairs)[:top])
    t = Table(title="Prefix lengths (marginals)", title_justify="left")
    t.add_column("len", justify="right")
    for n in names:
        t.add_column(f"{n} src", justify="right")
        t.add_column(f"{n} dst", justify="right")
    for length in range(33):
        vals = [(s["src_len"][length] / s["rules"], s["dst_len"][length] / s["rules"]) for s in stats]
        if any(a >= 0.005 or b >= 0.005 for a, b in vals):
            t.add_row(str(length), *[_pct(x) for ab in vals for x in ab])
    con.print(t)
    table("Flags (value/mask)", "flags", rows_of(dist("flags")))


@click.group()
def trace() -> None:
    """Generate header traces."""


@trace.command("gen")
@click.option("--rules", "rules_file", type=click.Path(dir_okay=False), required=True, help="ClassBench rule file.")
@click.option("--packets", type=click.IntRange(min=1), default=100_000, show_default=True, help="Headers to generate.")
@click.option("--seed", type=click.IntRange(min=0), default=1, show_default=True, help="Random seed.")
@click.option("--pareto", type=(float, float), default=(1.0, 0.1), show_default=True, metavar="A B",
              help="Locality: Pareto a in (0,1], b in [0,1] (ClassBench: 1 0 none, 1 1 high).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True, help="Output trace file.")
def trace_gen(rules_file: str, packets: int, seed: int, pareto: tuple[float, float], output: str) -> None:
    """Generate headers inside the rules as ClassBench's trace_generator does
    (rule corners, Pareto bursts); each line ends with the rule it came from."""
    rs = load_rules(rules_file)
    try:
        tr = _core.Trace.generate(rs, packets, seed, *pareto)
    except ValueError as e:
        raise UserError(f"--pareto: {e}") from None
    with atomic_write(output) as f:
        f.write(tr.format())
    click.echo(f"wrote {len(tr)} headers from {len(rs)} rules (seed {seed}, pareto {pareto[0]} {pareto[1]}) to {output}")


@click.command("classify")
@click.option("--rules", "rules_file", type=click.Path(dir_okay=False), required=True, help="ClassBench rule file.")
@click.option("--trace", "trace_file", type=click.Path(dir_okay=False), required=True, help="ClassBench trace file.")
@click.option("--algo", type=click.Choice(_core.algorithms()), default="linear", show_default=True,
              help="Classifier.")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write the first matching rule (0-based, -1 for none) per trace line.")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="Build parameter, repeatable: trie.stride, trie.max_bytes, dtree.bucket, "
                   "dtree.max_bytes, facl.dt_layers, ...")
def classify(rules_file: str, trace_file: str, algo: str, out: str | None, settings: tuple[str, ...]) -> None:
    """Classify every header of a trace and report lookups per second. When
    the trace has the rule column, count wrong results by ClassBench's
    measure (no match, or a match after the header's rule); exit status 1
    if there are any."""
    rs = load_rules(rules_file)
    tr = load_trace(trace_file)
    config = settings_of(settings)
    try:
        clf = _core.Classifier(rs, algo, config)
    except ValueError as e:
        raise UserError(f"{rules_file}: {algo}: {e}") from None
    res, dt = classify_timed(clf, tr, work=len(rs) * len(tr))
    if out is not None:
        with atomic_write(out) as f:
            f.write("\n".join(res.astype(str)) + "\n")
    rate = len(tr) / dt if dt > 0 else float("inf")
    click.echo(f"{algo}: {len(tr)} headers, {len(rs)} rules, {dt:.3f} s, {rate:,.0f} lookups/s")
    for name, value in clf.stats():
        click.echo(f"  {name}: {value}")
    wrong = check(res, tr)
    if wrong is None:
        click.echo("trace has no rule column: results not checked")
    else:
        click.echo(f"wrong results (ClassBench measure): {wrong} of {len(tr)}")
        if wrong:
            raise SystemExit(1)

"""``synapse bench``: measured rates of the data plane's structures on the
user's own files.

``synapse bench classify`` builds one classifier over a ClassBench rule file
and classifies a header trace in repeated batch passes on one core for about
``--secs`` seconds (the loop runs in Rust; Python only times it), then prints
lookups per second, bytes and bytes per rule, and the build time. The answers
of one pass are checked against the linear oracle's on a sample first, so a
fast wrong structure cannot report a rate. ``scripts/bench_classify.sh``
compares these rates with DPDK's rte_acl.
"""

from __future__ import annotations

import json

import click
import numpy as np

from synapse_vmt import _core
from synapse_vmt.cli.rules import load_rules, load_trace
from synapse_vmt.errors import UserError


def _config(settings: tuple[str, ...]) -> dict[str, str]:
    config = {}
    for s in settings:
        key, eq, value = s.partition("=")
        if not eq:
            raise UserError(f"--set: expected KEY=VALUE, found {s!r}")
        config[key.strip()] = value.strip()
    return config


def bench_classifier(rs: _core.RuleSet, tr: _core.Trace, algo: str, secs: float,
                     config: dict[str, str] | None = None, check: int = 2000) -> dict:
    """Build `algo` over `rs`, check it against the linear oracle on the first
    `check` headers, and rate it over `tr` for about `secs` seconds. Returns
    the JSON record of ``synapse bench classify``."""
    clf = _core.Classifier(rs, algo, config or {})
    n = len(tr)
    if check and algo != "linear":
        stop = min(check, n)
        want = _core.Classifier(rs, "linear").classify(tr, 0, stop)
        got = clf.classify(tr, 0, stop)
        bad = np.flatnonzero(got != want)
        if bad.size:
            i = int(bad[0])
            raise UserError(f"{algo} differs from the linear oracle on header {i + 1}: {got[i]} != {want[i]}")
    # A linear scan of a large set is slow: rate it on fewer headers.
    stop = min(n, max(64, 2_000_000 // max(len(rs), 1))) if algo == "linear" else n
    # One pass to warm the caches and size the passes, then at least `secs`.
    t1 = clf.time_batches(tr, 1, 0, stop)
    passes = max(1, int(secs / max(t1, 1e-9)))
    t = clf.time_batches(tr, passes, 0, stop)
    lookups = passes * stop
    nbytes = clf.memory_bytes()
    return {
        "algo": algo,
        "rules": len(rs),
        "lookups_per_s": lookups / t if t > 0 else float("inf"),
        "bytes": nbytes,
        "bytes_per_rule": nbytes / max(len(rs), 1),
        "build_s": clf.build_s,
    }


@click.group("bench")
def bench() -> None:
    """Measure the data plane's structures on your own inputs."""


@bench.command("classify")
@click.option("--rules", "rules_file", type=click.Path(dir_okay=False), required=True, help="ClassBench rule file.")
@click.option("--trace", "trace_file", type=click.Path(dir_okay=False), required=True, help="ClassBench trace file.")
@click.option("--algo", type=click.Choice(_core.algorithms()), default="ptree", show_default=True,
              help="Classifier.")
@click.option("--secs", type=click.FloatRange(min=0.0), default=1.0, show_default=True,
              help="Seconds of repeated batch passes over the trace.")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="Build parameter, repeatable: ptree.bucket, trie.stride, dtree.bucket, ...")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_classify(rules_file: str, trace_file: str, algo: str, secs: float, settings: tuple[str, ...],
                   as_json: bool) -> None:
    """Lookups per second of one classifier over a trace (batched, one core),
    its bytes per rule and build time."""
    rs = load_rules(rules_file)
    tr = load_trace(trace_file)
    try:
        rec = bench_classifier(rs, tr, algo, secs, _config(settings))
    except ValueError as e:
        raise UserError(f"{rules_file}: {algo}: {e}") from None
    if as_json:
        click.echo(json.dumps(rec))
        return
    click.echo(f"{algo}: {rec['rules']} rules, {rec['lookups_per_s'] / 1e6:.2f} M lookups/s, "
               f"{rec['bytes']} bytes ({rec['bytes_per_rule']:.1f} per rule), built in {rec['build_s'] * 1e3:.1f} ms")


@bench.command("p4rt")
@click.option("--p4", "program", type=click.Path(dir_okay=False), required=True,
              help="p4c BMv2 JSON the server loads (e.g. up4-bmv2.json)")
@click.option("--table", help="table written (default: the writable table with the widest key)")
@click.option("--entries", default=20_000, show_default=True, type=click.IntRange(min=1),
              help="entries inserted, then deleted, in batched Writes")
@click.option("--batch", default=1000, show_default=True, type=click.IntRange(min=1), help="updates per batched Write")
@click.option("--singles", default=2000, show_default=True, type=click.IntRange(min=1),
              help="Writes of one insert each")
@click.option("--traffic", default=0.0, show_default=True, type=click.FloatRange(min=0.0),
              help="the server's background lookups per second per table (serve --traffic)")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_p4rt_cmd(program: str, table: str | None, entries: int, batch: int, singles: int, traffic: float,
                   as_json: bool) -> None:
    """Write throughput of `synapse serve` (its own process, loopback) with a
    raw gRPC client whose requests are serialised before timing."""
    from synapse_vmt.p4rt.bench import bench_p4rt

    rec = bench_p4rt(program, table, entries, batch, singles, traffic=traffic)
    if as_json:
        click.echo(json.dumps(rec))
        return
    click.echo(f"{rec['table']}: batched ({batch}/Write) {rec['batched_inserts_per_s']:,.0f} inserts/s, "
               f"{rec['batched_deletes_per_s']:,.0f} deletes/s; single Writes {rec['single_writes_per_s']:,.0f}/s "
               f"(p50 {rec['single_p50_ms']:.2f} ms, p99 {rec['single_p99_ms']:.2f} ms)")

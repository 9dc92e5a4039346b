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


# ---- synapse bench p4: the streaming path ----------------------------------------

def bench_p4_stream(program: str, entries: str | None, pcap: str, rate_mpps: float = 50.0, pmus: int = 16,
                    engine: str = "rust") -> dict:
    """``run --p4`` end to end on a capture (read, execute, intern, simulate,
    drain): packets per second of the whole path and of the cycle simulator
    alone (its share of the wall time), the interned routes and bytes, and
    this process's peak resident memory. Run it in a fresh process per
    capture: the peak is the process's."""
    import resource
    import tempfile

    from synapse_vmt.p4 import simrun

    with tempfile.TemporaryDirectory() as d:
        s = simrun.run_capture(d, program=simrun.resolve_program(program), entries_file=entries, pcap=pcap,
                               rate_mpps=rate_mpps, pmus=pmus, engine=engine)
    st = s["stream"]
    n = s["packets"]
    return {
        "pcap": pcap,
        "packets": n,
        "routes": s["routes"],
        "interner_bytes": st["interner_bytes"],
        "executor": engine,
        # per CPU second (the host may be shared: wall time is not the program's)
        "end_to_end_packets_per_cpu_s": n / st["cpu_s"] if st["cpu_s"] > 0 else float("inf"),
        "sim_packets_per_cpu_s": n / st["sim_cpu_s"] if st["sim_cpu_s"] > 0 else float("inf"),
        "end_to_end_packets_per_s": st["packets_per_s"],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "drained": st["drained"],
    }


def bench_p4_standin(pcap: str) -> dict:
    """The streaming machinery alone (capture reader, route interning,
    counters) under the stand-in executor (``program::standin``, keys cut at
    fixed offsets): packets per second."""
    import time

    t, c = time.perf_counter(), time.process_time()
    r = _core.stream_standin(pcap, 50.0)
    dt, dc = time.perf_counter() - t, time.process_time() - c
    return {"pcap": pcap, "packets": r["packets"], "routes": r["routes"], "executor": "stand-in",
            "packets_per_cpu_s": r["packets"] / dc if dc > 0 else float("inf"),
            "packets_per_s": r["packets"] / dt if dt > 0 else float("inf")}


@bench.command("p4")
@click.option("--program", default="builtin:up4", show_default=True, help="P4 program (BMv2 JSON) or builtin:up4.")
@click.option("--entries", "entries_file", type=click.Path(dir_okay=False), help="Table entries.")
@click.option("--pcap", type=click.Path(dir_okay=False), required=True,
              help="Capture (scripts/gen_p4_capture.py makes large ones).")
@click.option("--rate-mpps", type=click.FloatRange(min=1e-6), default=50.0, show_default=True)
@click.option("--pmus", type=click.IntRange(min=1), default=16, show_default=True)
@click.option("--engine", type=click.Choice(["rust", "python"]), default="rust", show_default=True,
              help="The stream's executor: the compiled program, or the interpreter.")
@click.option("--standin", is_flag=True, help="Rate the reader and interner alone, under the stand-in executor.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_p4(program: str, entries_file: str | None, pcap: str, rate_mpps: float, pmus: int, engine: str, standin: bool,
             as_json: bool) -> None:
    """Rate ``run --p4`` on a capture: end to end and the cycle simulator's
    own share, with peak memory (docs/program-layer-streaming.md)."""
    r = bench_p4_standin(pcap) if standin else bench_p4_stream(program, entries_file, pcap, rate_mpps, pmus, engine)
    if as_json:
        click.echo(json.dumps(r))
        return
    for k, v in r.items():
        click.echo(f"{k:>26}: {v:,.1f}" if isinstance(v, float) else f"{k:>26}: {v}")

"""``synapse bench``: measured rates of the data plane's structures on the
user's own files.

``synapse bench p4`` rates a compiled P4 program on a capture (see
:func:`bench_program`); with ``--end-to-end``, ``run --p4`` on it
(:func:`bench_p4_stream`).

``synapse bench fast`` runs a scenario in the exact engine and in the fast
mode side by side and prints both keys/s and the fast mode's error per
figure (docs/fast-mode.md).

``synapse bench classify`` builds one classifier over a ClassBench rule file
and classifies a header trace in repeated batch passes on one core for about
``--secs`` seconds (the loop runs in Rust; Python only times it), then prints
lookups per second, bytes and bytes per rule, and the build time. The answers
of one pass are checked against the linear oracle's on a sample first, so a
fast wrong structure cannot report a rate. ``scripts/bench_classify.sh``
compares these rates with DPDK's rte_acl. With ``--updates-per-s R`` the
same lookups then run under random churn at R updates per second (random
deletes, and inserts placed as ``--churn`` says: ``uniform``, copies of the
set's rules at random positions, ``near``, deleted rules of the set put
back at their own priority, or ``rank``, new rules (a rule of the set with
a sibling address prefix, as specific) at their parent's place in the set's
order; on the same thread; ``classify::churn``): the
record adds the lookup rate under churn and its ratio to two static rates
(the original set's, and a fresh build's of the rules as the churn left
them), the updates sustained, their latency, and the answers that differed
from the oracle (``wrong``) on a sample of every batch.
"""

from __future__ import annotations

import json

import click
import numpy as np

from synapse_vmt import _core
from synapse_vmt.cli.rules import load_rules, load_trace, settings_of
from synapse_vmt.errors import UserError


#: Classifiers updated in place (``--updates-per-s``).
INCREMENTAL = ("dtree", "ptree")


#: Where the churn's inserts go (``classify::churn::Placement``).
CHURN = ("uniform", "near", "rank")


def bench_churn(rs: _core.RuleSet, tr: _core.Trace, algo: str, secs: float, rate: float,
                config: dict[str, str] | None = None, seed: int = 1, churn: str = "uniform") -> dict:
    """Lookups of `tr` by `algo` under random updates at `rate` per second
    (``classify::churn``), inserts placed as `churn` says: the fields
    ``--updates-per-s`` adds to the record."""
    if algo not in INCREMENTAL:
        raise UserError(f"--updates-per-s: {algo} is not updated in place (expected one of: {', '.join(INCREMENTAL)})")
    r = json.loads(_core.classify_churn(rs, tr, algo, config or {}, rate, secs, seed, churn))
    clock = r["lookup_s"] + r["update_s"]
    churn_lookups = r["lookups"] / r["lookup_s"] if r["lookup_s"] > 0 else 0.0
    return {
        "churn": r["churn"],
        "updates_offered_per_s": rate,
        "updates_per_s": r["updates"] / clock if clock > 0 else 0.0,
        "update_capacity_per_s": r["updates"] / r["update_s"] if r["update_s"] > 0 else float("inf"),
        "update_latency_us_p50": r["update_latency_us_p50"],
        "update_latency_us_p99": r["update_latency_us_p99"],
        "update_latency_us_p999": r["update_latency_us_p999"],
        "update_latency_us_max": r["update_latency_us_max"],
        "updates": r["updates"],
        # Offered above the update path's capacity: the updates still owed
        # at the end (the loop makes at most a catch-up group between batches).
        "updates_owed": r["updates_owed"],
        "saturated": r["saturated"],
        "churn_lookups_per_s": churn_lookups,
        "fresh_lookups_per_s": r["fresh_lookups_per_s"],
        "churn_lookup_ratio_fresh": churn_lookups / r["fresh_lookups_per_s"] if r["fresh_lookups_per_s"] > 0 else 0.0,
        "checked": r["checked"],
        "wrong": r["wrong"],
    }


def bench_classifier(rs: _core.RuleSet, tr: _core.Trace, algo: str, secs: float,
                     config: dict[str, str] | None = None, check: int = 2000, updates_per_s: float = 0.0,
                     churn: str = "uniform") -> dict:
    """Build `algo` over `rs`, check it against the linear oracle on the first
    `check` headers, and rate it over `tr` for about `secs` seconds (and,
    with `updates_per_s`, under that churn, placed as `churn` says:
    :func:`bench_churn`). Returns
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
    rec = {
        "algo": algo,
        "rules": len(rs),
        "lookups_per_s": lookups / t if t > 0 else float("inf"),
        "bytes": nbytes,
        "bytes_per_rule": nbytes / max(len(rs), 1),
        "build_s": clf.build_s,
    }
    if updates_per_s > 0:
        rec.update(bench_churn(rs, tr, algo, secs, updates_per_s, config, churn=churn))
        rec["churn_lookup_ratio"] = rec["churn_lookups_per_s"] / rec["lookups_per_s"]
    return rec


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
@click.option("--updates-per-s", "updates_per_s", type=click.FloatRange(min=0.0), default=0.0,
              help="Then the lookups again under random inserts and deletes at this rate (dtree, ptree; "
                   "both updated in place).")
@click.option("--churn", type=click.Choice(CHURN), default="uniform", show_default=True,
              help="With --updates-per-s, where inserts go: copies of the set's rules at uniformly random "
                   "positions (uniform), deleted rules of the set back at their own priority (near), or new "
                   "rules, siblings of the set's, at their parent's place in its order (rank).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_classify(rules_file: str, trace_file: str, algo: str, secs: float, settings: tuple[str, ...],
                   updates_per_s: float, churn: str, as_json: bool) -> None:
    """Lookups per second of one classifier over a trace (batched, one core),
    its bytes per rule and build time; with --updates-per-s, also under
    update churn."""
    rs = load_rules(rules_file)
    tr = load_trace(trace_file)
    try:
        rec = bench_classifier(rs, tr, algo, secs, settings_of(settings), updates_per_s=updates_per_s, churn=churn)
    except ValueError as e:
        raise UserError(f"{rules_file}: {algo}: {e}") from None
    if as_json:
        click.echo(json.dumps(rec))
        return
    click.echo(f"{algo}: {rec['rules']} rules, {rec['lookups_per_s'] / 1e6:.2f} M lookups/s, "
               f"{rec['bytes']} bytes ({rec['bytes_per_rule']:.1f} per rule), built in {rec['build_s'] * 1e3:.1f} ms")
    if updates_per_s > 0:
        click.echo(f"  under {updates_per_s:,.0f} updates/s offered ({churn}): {rec['updates_per_s']:,.0f} updates/s sustained "
                   f"(capacity {rec['update_capacity_per_s']:,.0f}/s; latency p50 {rec['update_latency_us_p50']:.2f} us, "
                   f"p99 {rec['update_latency_us_p99']:.2f} us), {rec['churn_lookups_per_s'] / 1e6:.2f} M lookups/s "
                   f"({rec['churn_lookup_ratio']:.2f}x the original set's static rate, "
                   f"{rec['churn_lookup_ratio_fresh']:.2f}x a fresh build's of the rules left), "
                   f"wrong {rec['wrong']} of {rec['checked']} checked")
        if rec["saturated"]:
            click.echo(f"  saturated: the offered rate is above the update path's capacity "
                       f"({rec['updates_owed']:,} updates owed at the end)")


@bench.command("fast")
@click.argument("scenario", required=False, type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a scenario field (repeatable).")
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True,
              help="Interleaved rounds of exact then fast; the median wall times count.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_fast(scenario: str | None, overrides: tuple[str, ...], rounds: int, as_json: bool) -> None:
    """Keys/s of the exact engine and of the fast mode on one scenario, side
    by side (interleaved rounds, one core), their ratio, and the fast mode's
    error on each summary figure against the exact run (docs/fast-mode.md).
    Times are the CPU time of the thread both run on (on a shared machine,
    wall time also counts the other jobs' turns on the core), each engine's
    one call over the duration from a simulator just built."""
    import statistics
    import time

    from synapse_vmt import fastcheck
    from synapse_vmt.scenario import load

    scn = load(scenario, overrides)
    walls: dict[str, list[float]] = {"exact": [], "fast": []}
    for _ in range(rounds):
        # The exact run in one call, as the fast one: not its progress chunks.
        exact, we = fastcheck.run_exact(scn, clock=time.thread_time, whole=True)
        fast, wf = fastcheck.run_fast(scn, clock=time.thread_time)
        walls["exact"].append(we)
        walls["fast"].append(wf)
    keys = sum(t["keys"] for t in exact["tables"].values())
    med = {m: statistics.median(w) for m, w in walls.items()}
    rec = {"scenario": scenario or "default", "overrides": list(overrides), "rounds": rounds, "keys": keys,
           "exact_wall_s": med["exact"], "fast_wall_s": med["fast"],
           "exact_keys_per_s": keys / med["exact"], "fast_keys_per_s": keys / med["fast"],
           "speedup": med["exact"] / med["fast"], "overloaded": fastcheck.overloaded(exact),
           "errors": fastcheck.compare(exact, fast)}
    if as_json:
        click.echo(json.dumps(rec))
        return
    click.echo(f"{rec['scenario']} {' '.join(overrides)}: {keys} keys; exact {rec['exact_keys_per_s'] / 1e6:.2f} M keys/s, "
               f"fast {rec['fast_keys_per_s'] / 1e6:.1f} M keys/s: {rec['speedup']:.1f}x (median of {rounds} rounds)"
               + ("; overloaded: the fast mode models its throughput and drops, not its latencies" if rec["overloaded"] else ""))
    for r in rec["errors"]:
        err = f"{r['error']:+.4f}" if r["kind"] == "abs" else f"{100 * r['error']:+.1f} %"
        click.echo(f"  {r['table']:>10} {r['figure']:>16}: exact {r['exact']:10.4f} fast {r['fast']:10.4f} "
                   f"[{r['lo']:.4f}, {r['hi']:.4f}] {err:>9} {'ok' if r['within'] else 'OUT OF BOUND'}"
                   f"{'' if r['covered'] else ', exact outside interval'}")


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
@click.option("--window", default=16, show_default=True, type=click.IntRange(min=1),
              help="single Writes in flight at once in the pipelined phase")
@click.option("--transport", type=click.Choice(["rust", "grpc"]), default="rust", show_default=True,
              help="the server's --transport")
@click.option("--client", type=click.Choice(["rust", "python"]), default=None,
              help="the benchmark's gRPC client: HTTP/2 in the extension (h2), or Python's grpcio  [default: rust]")
@click.option("--client-spin-us", default=150, show_default=True, type=click.IntRange(min=0),
              help="the Rust client polls its socket this long before it sleeps waiting for an answer (0: never)")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_p4rt_cmd(program: str, table: str | None, entries: int, batch: int, singles: int, traffic: float,
                   window: int, transport: str, client: str | None, client_spin_us: int, as_json: bool) -> None:
    """Write throughput of `synapse serve` (its own process, loopback) with a
    raw gRPC client whose requests are serialised before timing."""
    from synapse_vmt.p4rt.bench import bench_p4rt

    rec = bench_p4rt(program, table, entries, batch, singles, traffic=traffic, transport=transport, window=window,
                     client=client, client_spin_us=client_spin_us)
    if as_json:
        click.echo(json.dumps(rec))
        return
    click.echo(f"{rec['table']}: batched ({batch}/Write) {rec['batched_inserts_per_s']:,.0f} inserts/s, "
               f"{rec['batched_deletes_per_s']:,.0f} deletes/s; single Writes {rec['single_writes_per_s']:,.0f}/s "
               f"(p50 {rec['single_p50_ms']:.2f} ms, p99 {rec['single_p99_ms']:.2f} ms), "
               f"{rec['single_writes_pipelined_per_s']:,.0f}/s with {window} in flight; "
               f"empty RPCs {rec['empty_rpcs_per_s']:,.0f}/s ({rec['client']} client)")
    if "server_cpu_us_per_insert" in rec:
        click.echo(f"server CPU per insert {rec['server_cpu_us_per_insert']:.1f} µs, per delete "
                   f"{rec['server_cpu_us_per_delete']:.1f} µs, per single Write {rec['server_cpu_us_per_single']:.0f} µs "
                   f"({rec['server_cpu_us_per_pipelined_single']:.0f} µs in flight), per empty RPC "
                   f"{rec['server_cpu_us_per_empty_rpc']:.0f} µs")


def bench_program(program: str, entries_file: str | None, pcap: str, rounds: int = 5, ingress_port: int = 0,
                  python_packets: int = 0, check: int = 2000, limit: int | None = None) -> dict:
    """The functional rate of PROGRAM (parse, tables, actions, deparse; no
    timing model) on the frames of ``pcap``, run by the compiled program in
    Rust on one core: each round is one pass over the capture, timed in CPU
    time of the running thread (and wall time); the median round is
    reported. The first ``check`` packets are compared with the Python
    interpreter first (but those either of them guessed), so a fast wrong
    executor cannot report a rate. With
    ``python_packets``, the interpreter's rate on that many packets is
    measured in rounds interleaved with Rust's. Returns the JSON record of
    ``synapse bench p4``."""
    import itertools
    import os
    import statistics
    import time

    from synapse_vmt.p4.engine import NO_ACTION, RustProgram, pack
    from synapse_vmt.p4.entries import load_entries
    from synapse_vmt.p4.interp import Program
    from synapse_vmt.p4.parser import read_packets
    from synapse_vmt.p4.simrun import resolve_program

    program = resolve_program(program)
    prog = Program.load(program)
    ents = load_entries(entries_file or os.devnull, program)
    rp = RustProgram(prog, ents)
    frames = list(itertools.islice(read_packets(pcap), limit))
    if not frames:
        raise UserError(f"{pcap}: no packets")
    data, offsets = pack(frames)
    if check:
        sample = frames[:check]
        tr = prog.run(sample, ents, ingress_port=ingress_port)
        c = rp.core.run_batch(*pack(sample), ingress_port, False)
        ps, ks = c["pkt_start"], c["key_start"]
        for i in range(len(sample)):
            if c["inexact"][i] or tr.packet_guessed[i]:
                continue  # the executor guessed, or the interpreter did (a fallback branch, a drawn field)
            lo, hi = int(tr.pkt_start[i]), int(tr.pkt_start[i + 1])
            want = [(int(tr.step_table[j]), int(tr.step_entry[j]), int(tr.step_action[j]), tuple(tr.key_words(j))) for j in range(lo, hi)]
            got = [(int(c["table"][j]), int(c["entry"][j]), -1 if c["action"][j] == NO_ACTION else int(c["action"][j]),
                    tuple(c["key_words"][ks[j]:ks[j + 1]].tolist())) for j in range(int(ps[i]), int(ps[i + 1]))]
            if want != got or bool(tr.dropped[i]) != bool(c["dropped"][i]):
                raise UserError(f"{pcap}: packet {i + 1}: the executor differs from the interpreter ({got} != {want})")
    rust_cpu, rust_wall, py_cpu = [], [], []
    py_frames = frames[:python_packets]
    rp.core.time_batch(data, offsets, 1, ingress_port, True)  # warm the caches
    for _ in range(rounds):
        t0, w0 = time.thread_time(), time.perf_counter()
        rp.core.time_batch(data, offsets, 1, ingress_port, True)
        rust_cpu.append(time.thread_time() - t0)
        rust_wall.append(time.perf_counter() - w0)
        if py_frames:
            t0 = time.thread_time()
            prog.run(py_frames, ents, ingress_port=ingress_port, frame_cache=0)
            py_cpu.append(time.thread_time() - t0)
    n = len(frames)
    rec = {
        "program": program,
        "packets": n,
        "rounds": rounds,
        "packets_per_s": n / statistics.median(rust_cpu),
        "packets_per_s_wall": n / statistics.median(rust_wall),
        "lookup_structures": dict(rp.core.lookup_structures),
        "inexact_packets": int(rp.core.packets[1]),
    }
    if rp.core.learn_stats():
        # Data-plane table writes (docs/p4-stateful.md): the rounds above ran with the flows already
        # learned; here each round is one pass of a fresh executor on the capture's own clock, learning
        # every new key on its miss and aging entries out as their time comes.
        import numpy as np

        from synapse_vmt.p4.parser import read_frames

        ts = np.array([t for t, _ in itertools.islice(read_frames(pcap), n)], dtype=np.float64)
        times = np.round((ts - ts[0]) * 1e12).astype(np.uint64)
        w_cpu, writes = [], {}
        for _ in range(rounds):
            fresh = RustProgram(prog, ents)
            t0 = time.thread_time()
            fresh.core.time_batch(data, offsets, 1, ingress_port, True, times)
            w_cpu.append(time.thread_time() - t0)
            writes = {k: dict(v) for k, v in fresh.core.learn_stats().items()}
        total = sum(v["adds"] + v["expired"] for v in writes.values())
        rec["learned"] = writes
        rec["table_writes"] = total
        rec["table_writes_per_s"] = total / statistics.median(w_cpu)
        rec["learning_pass_packets_per_s"] = n / statistics.median(w_cpu)
    if py_cpu:
        rec["python_packets_per_s"] = len(py_frames) / statistics.median(py_cpu)
        rec["speedup"] = rec["packets_per_s"] / rec["python_packets_per_s"]
    return rec


# ---- synapse bench p4 --end-to-end and --standin: the streaming path -----------

def bench_p4_stream(program: str, entries: str | None, pcap: str, rate_mpps: float = 50.0, pmus: int = 16,
                    engine: str = "rust", threads: int = 2) -> dict:
    """``run --p4`` end to end on a capture (read, execute, intern, simulate,
    drain): packets per second of the whole path (wall clock and per CPU
    second of the process) and of the cycle simulator alone (its run_until
    calls' CPU), the CPU seconds per stage, the interned routes and bytes,
    and this process's peak resident memory. Run it in a fresh process per
    capture: the peak is the process's."""
    import resource
    import tempfile

    from synapse_vmt.p4 import simrun

    with tempfile.TemporaryDirectory() as d:
        s = simrun.run_capture(d, program=simrun.resolve_program(program), entries_file=entries, pcap=pcap,
                               rate_mpps=rate_mpps, pmus=pmus, engine=engine, threads=threads)
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
        "sim_packets_per_s": n / st["sim_wall_s"] if st["sim_wall_s"] > 0 else float("inf"),
        # wall-clock end to end over the simulator's own rate (its CPU): 1 when the run is
        # limited by the cycle simulator alone
        "end_to_end_over_sim": st["packets_per_s"] * st["sim_cpu_s"] / n if n else 0.0,
        "threads": threads,
        "wall_s": st["wall_s"],
        "cpu_s": st["cpu_s"],
        "stages_cpu_s": st["stages_cpu_s"],
        # the wall time two idle cores would take: the busier of the two threads' CPU (the
        # simulator's thread: sync, simulate, python; the other: read, execute, intern, output)
        "two_core_bound_s": _two_core_bound(st["stages_cpu_s"]),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "drained": st["drained"],
    }


def _two_core_bound(st: dict) -> float:
    main = st["sync"] + st["simulate"] + st["python"]
    side = st["read"] + st["execute"] + st["intern"] + st["output"]
    return max(main, side)


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
@click.argument("program", default="builtin:up4")
@click.option("--entries", "entries_file", type=click.Path(dir_okay=False), help="table entries (simple_switch_CLI or runtime JSON)")
@click.option("--pcap", type=click.Path(dir_okay=False), required=True,
              help="the frames (pcap or pcapng; `synapse p4 capture` or scripts/gen_p4_capture.py writes one)")
@click.option("--rounds", type=click.IntRange(min=1), default=5, show_default=True, help="passes over the capture; the median is reported")
@click.option("--ingress-port", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--python", "python_packets", type=click.IntRange(min=0), default=0,
              help="also rate the Python interpreter on this many packets, in rounds interleaved with Rust's")
@click.option("--limit", type=click.IntRange(min=1), help="only the first N packets of the capture")
@click.option("--end-to-end", is_flag=True,
              help="rate `run --p4` on the capture instead (streamed: read, execute, intern, simulate, drain), "
                   "with the cycle simulator's share and peak memory")
@click.option("--rate-mpps", type=click.FloatRange(min=1e-6), default=50.0, show_default=True, help="--end-to-end: replay rate")
@click.option("--pmus", type=click.IntRange(min=1), default=16, show_default=True, help="--end-to-end: PMU pool")
@click.option("--engine", type=click.Choice(["rust", "python"]), default="rust", show_default=True,
              help="--end-to-end: the stream's executor, the compiled program or the interpreter")
@click.option("--threads", type=click.IntRange(1, 2), default=2, show_default=True,
              help="--end-to-end: 2 reads and executes the next period while the simulator runs this one; 1 alternates")
@click.option("--standin", is_flag=True, help="rate the capture reader and route interner alone, under the stand-in executor")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_p4(program: str, entries_file: str | None, pcap: str, rounds: int, ingress_port: int, python_packets: int,
             limit: int | None, end_to_end: bool, rate_mpps: float, pmus: int, engine: str, threads: int,
             standin: bool, as_json: bool) -> None:
    """Packets per second of PROGRAM (p4c BMv2 JSON, or builtin:up4) run by
    the compiled executor on one core: parse, tables, actions and deparse
    of every frame of the capture, no timing model. CPU time of the running
    thread (the machine may be shared), median of the rounds. With
    --end-to-end: `run --p4` on the capture, per CPU second, and the cycle
    simulator's own share (docs/program-layer-streaming.md)."""
    if standin or end_to_end:
        rec = bench_p4_standin(pcap) if standin else bench_p4_stream(program, entries_file, pcap, rate_mpps, pmus, engine, threads)
        if as_json:
            click.echo(json.dumps(rec))
            return
        for k, v in rec.items():
            if isinstance(v, dict):
                v = ", ".join(f"{a} {b:.2f}" for a, b in v.items())
            click.echo(f"{k:>30}: {v:,.1f}" if isinstance(v, float) else f"{k:>30}: {v}")
        return
    rec = bench_program(program, entries_file, pcap, rounds, ingress_port, python_packets, limit=limit)
    if as_json:
        click.echo(json.dumps(rec))
        return
    line = (f"{rec['program']}: {rec['packets']} packets, {rec['packets_per_s'] / 1e6:.2f} M packets/s "
            f"(CPU time; {rec['packets_per_s_wall'] / 1e6:.2f} M/s wall), median of {rec['rounds']} rounds")
    if "table_writes_per_s" in rec:
        line += (f"; learning pass (fresh tables): {rec['learning_pass_packets_per_s'] / 1e6:.2f} M packets/s, "
                 f"{rec['table_writes']} entries added or aged out, {rec['table_writes_per_s'] / 1e6:.2f} M data-plane writes/s")
    if "python_packets_per_s" in rec:
        line += f"; interpreter {rec['python_packets_per_s'] / 1e3:.1f} k packets/s ({rec['speedup']:.0f}x)"
    click.echo(line)
    kinds: dict[str, int] = {}
    for s in rec["lookup_structures"].values():
        kinds[s] = kinds.get(s, 0) + 1
    click.echo("  keyed tables by lookup structure: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))

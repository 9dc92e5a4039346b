"""``synapse run --p4 --pcap``, streamed: the Rust capture reader against
dpkt-written files (pcap in µs and ns, pcapng, gzip) and broken ones, route
interning against a Python reference over the interpreter's visits, the
streamed run's per-table counters against the interpreter run over every
packet (the old path's counters), and memory that does not grow with
repetition (interned routes and keys counted, not timed)."""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path

import dpkt
import numpy as np
import pytest
from click.testing import CliRunner

from synapse_vmt import _core
from synapse_vmt.cli import main
from synapse_vmt.errors import UserError
from synapse_vmt.p4 import simrun
from synapse_vmt.p4.entries import load_entries
from synapse_vmt.p4.interp import Program
from synapse_vmt.p4.parser import read_packets
from test_p4_interp import DATA, PACKETS

ROUTER, ROUTER_ENT = DATA / "router.json", DATA / "router-entries.txt"


def _frames(stream) -> tuple[list[bytes], list[int]]:
    """Every frame of a stream and its arrival time (ps), read to the end."""
    out, ts = [], []
    while stream.read(1 << 63, 1000):
        buf, start, t, _ = stream.held()
        b = buf.tobytes()
        out += [b[start[i]:start[i + 1]] for i in range(len(start) - 1)]
        ts += t.tolist()
        # run the held batch as packets that visited nothing
        n = len(start) - 1
        z = np.zeros(0, np.uint32)
        stream.run_held(np.zeros(0, np.uint16), np.zeros(0, np.int32), z, np.zeros(1, np.uint32), z,
                        np.zeros(n + 1, np.uint32), np.zeros(n, bool), np.zeros(n, np.uint32), np.zeros(n, np.uint32))
    return out, ts


def _write(path: Path, kind: str, pkts: list[bytes], ts: list[float]) -> None:
    raw = path.with_suffix("") if kind.endswith("gz") else path
    with open(raw, "wb") as f:
        w = dpkt.pcapng.Writer(f) if kind.startswith("pcapng") else dpkt.pcap.Writer(f, nano=kind.startswith("nano"))
        for p, t in zip(pkts, ts):
            w.writepkt(p, ts=t)
    if kind.endswith("gz"):
        path.write_bytes(gzip.compress(raw.read_bytes()))


@pytest.mark.parametrize("kind", ["pcap", "nano", "pcapng", "pcap-gz", "pcapng-gz"])
def test_reader_reads_dpkt_files(tmp_path, kind):
    pkts = [p for p, *_ in PACKETS]
    ts = [100.0 + 0.25 * i for i in range(len(pkts))]
    f = tmp_path / ("a.pcapng" if "ng" in kind else "a.pcap")
    if kind.endswith("gz"):
        f = f.with_name(f.name + ".gz")
    _write(f, kind, pkts, ts)
    s = _core.CaptureStream(str(f), [1], None)
    got, t = _frames(s)
    assert got == pkts
    assert t == [int(round((x - ts[0]) * 1e12)) for x in ts]  # at the capture's timestamps
    assert s.done and s.progress()[2] == len(pkts)
    # a fixed-rate replay spaces them 1/rate apart
    got, t = _frames(_core.CaptureStream(str(f), [1], 40.0))
    assert t == [int(i * 25_000.0) for i in range(len(pkts))]


def test_reader_big_endian_pcap(tmp_path):
    f = tmp_path / "be.pcap"
    body = struct.pack(">IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for i, p in enumerate([b"x" * 60, b"y" * 70]):
        body += struct.pack(">IIII", 5, 10 * i, len(p), len(p)) + p
    f.write_bytes(body)
    got, t = _frames(_core.CaptureStream(str(f), [1], None))
    assert got == [b"x" * 60, b"y" * 70] and t == [0, 10_000_000]


@pytest.mark.parametrize("cut, stop, want", [
    (-5, False, r"a\.pcap: packet 12: truncated capture"),
    (-5, True, None),
    ("corrupt", False, r"a\.pcap: packet 12: "),
    ("garbage", False, r"a\.pcap: expected a pcap or pcapng capture"),
])
def test_run_refuses_broken_captures_with_one_line(tmp_path, cut, stop, want):
    f = tmp_path / "a.pcap"
    _write(f, "pcap", [p for p, *_ in PACKETS], [1.0 + i for i in range(len(PACKETS))])
    raw = f.read_bytes()
    if cut == "corrupt":  # the last record's length: far past the end
        off = len(raw) - len(PACKETS[-1][0]) - 16
        raw = raw[:off + 8] + struct.pack("<I", 0x0FFF_FFFF) + raw[off + 12:]
    elif cut == "garbage":
        raw = b"not a capture" * 10
    else:
        raw = raw[:cut]
    f.write_bytes(raw)
    out = tmp_path / "out"
    args = ["run", "--p4", str(ROUTER), "--entries", str(ROUTER_ENT), "--pcap", str(f), "-o", str(out), "-q", "--pmus", "4"]
    r = CliRunner().invoke(main, args + (["--stop-at-truncated"] if stop else []))
    if want is None:
        assert r.exit_code == 0, r.output
        s = json.loads((out / "summary.json").read_text())
        assert s["packets"] == len(PACKETS) - 1 and "packet 12: truncated" in s["stream"]["warning"]
        return
    assert r.exit_code == 2, r.output
    import re

    assert re.search(want, r.output) and r.output.count("\n") <= 2 and "Traceback" not in r.output, r.output
    assert not (out / "summary.json").exists()


def _reference(prog: Program, frames: list[bytes], ent) -> tuple[int, list[int], dict]:
    """Distinct routes (visit sequences with keys) and keys per table, and
    the interpreter's counters, over every packet at once (the old path)."""
    tr = prog.run(frames, ent, seed=1, frame_cache=0)
    routes = set()
    keys: list[set] = [set() for _ in tr.tables]
    for i in range(tr.n_packets):
        lo, hi = int(tr.pkt_start[i]), int(tr.pkt_start[i + 1])
        hops = tuple((int(tr.step_table[j]), tr.step_keys[j]) for j in range(lo, hi))
        for t, k in hops:
            keys[t].add(k)
        if hops:
            routes.add(hops)
    return len(routes), [len(k) for k in keys], tr


@pytest.mark.parametrize("program, entries, pcap", [
    (str(ROUTER), str(ROUTER_ENT), str(DATA / "router.pcap")),
    ("builtin:up4", str(DATA / "upf-entries.txt"), str(DATA / "upf-sample.pcap")),
])
def test_streamed_counters_equal_the_interpreters(tmp_path, program, entries, pcap):
    program = simrun.resolve_program(program)
    prog = Program.load(program)
    ent = load_entries(entries, program)
    frames = list(read_packets(pcap)) * 5
    f = tmp_path / "x.pcap"
    _write(f, "pcap", frames, [1.0 + 1e-6 * i for i in range(len(frames))])
    s = simrun.run_program(tmp_path / "out", program=program, entries_file=entries, pcap=str(f), pmus=8, engine="python")
    n_routes, n_keys, tr = _reference(prog, frames, ent)
    want = {k: v for k, v in tr.counters().items() if v["lookups"] > 0}
    assert {k: {f: r[f] for f in ("lookups", "matched", "actions")} for k, r in s["tables"].items()} == want
    assert s["packets"] == len(frames)
    assert s["parser_rejects"] == dict(sorted(tr.parser_rejects.items()))
    assert s["p4_drops"]["total"] == int(tr.dropped.sum())
    # route interning against the Python reference
    assert s["routes"] == n_routes
    for t, spec in enumerate(tr.tables):
        if spec.name in s["tables"]:
            assert s["tables"][spec.name]["distinct_keys"] == n_keys[t], spec.name
    # a drained end: every simulated lookup replayed, nothing in flight
    inv = s["invariants"]
    assert inv["ok"] and inv["in_flight"] == 0 and inv["wrong_action"] == 0 and s["stream"]["drained"]
    assert inv["fifo_overflows"] == 0 and "dropped" not in inv
    for name, r in s["tables"].items():
        assert r["simulated"] and r["keys"] == r["lookups"], name


def test_interned_state_does_not_grow_with_repetition(tmp_path):
    """UPF's sample flows repeated 2x and 20x, every frame different (outer
    IP id and TTL): the same routes, keys and interner bytes. (UPF: no
    random fallback branch, so a flow's route is one.)"""
    up4 = simrun.resolve_program("builtin:up4")
    ent = load_entries(DATA / "upf-entries.txt", up4)
    base = list(read_packets(DATA / "upf-sample.pcap"))

    def run(reps: int) -> dict:
        frames = []
        for r in range(reps):
            for p in base:
                b = bytearray(p)
                if len(b) >= 23 and b[12:14] == b"\x08\x00":
                    b[18:20] = struct.pack(">H", r)
                    b[22] = 64 - r
                frames.append(bytes(b))
        f = tmp_path / f"r{reps}.pcap"
        _write(f, "pcap", frames, [1.0 + 1e-6 * i for i in range(len(frames))])
        prog = Program.load(up4)
        s = _core.CaptureStream(str(f), [sp.words for sp in prog.tables], 50.0, drop_reasons=simrun.InterpExec.REASONS)
        exe = simrun.InterpExec(prog, ent, 1)
        exe.fill(s, 1 << 63)
        c = s.counters()
        return {k: c[k] for k in ("routes", "keys", "interner_bytes")}, c["packets"]

    a, na = run(2)
    b, nb = run(20)
    assert nb == 10 * na and a == b and a["routes"] > 0


def test_ingress_port_and_timestamps(tmp_path):
    f = tmp_path / "a.pcapng"
    _write(f, "pcapng", [p for p, *_ in PACKETS], [1.0 + 0.001 * i for i in range(len(PACKETS))])
    out = tmp_path / "o"
    r = CliRunner().invoke(main, ["run", "--p4", str(ROUTER), "--entries", str(ROUTER_ENT), "--pcap", str(f), "-o", str(out),
                                  "-q", "--pmus", "4", "--timestamps", "--ingress-port", "interface"])
    assert r.exit_code == 0, r.output
    s = json.loads((out / "summary.json").read_text())
    assert s["stream"]["clock"] == "timestamps" and s["stream"]["ingress_port"] == "interface"
    assert s["sim_time_ns"] >= 11 * 1e6  # 12 packets 1 ms apart
    r = CliRunner().invoke(main, ["run", "--p4", str(ROUTER), "--pcap", str(f), "-o", str(out), "-q", "--ingress-port", "x"])
    assert r.exit_code == 2 and "--ingress-port: expected a port number" in r.output
    with pytest.raises(UserError, match="output packets need the compiled program"):
        simrun.run_program(out, program=str(ROUTER), entries_file=str(ROUTER_ENT), pcap=str(f), out_pcap=str(tmp_path / "pc"),
                           engine="python")


def test_out_pcap_equals_bmv2s_output(tmp_path):
    """--out-pcap on the router capture (the compiled program's executor): one
    pcap per egress port, the same frames simple_switch sent on each port
    (tests/data/p4/goldens/router, recorded from BMv2), and its drops."""
    gold = json.loads((DATA / "goldens" / "router" / "golden.json").read_text())
    out, pc = tmp_path / "o", tmp_path / "pcaps"
    r = CliRunner().invoke(main, ["run", "--p4", str(ROUTER), "--entries", str(ROUTER_ENT), "--pcap", str(DATA / "router.pcap"),
                                  "-o", str(out), "-q", "--pmus", "4", "--out-pcap", str(pc)])
    assert r.exit_code == 0, r.output
    s = json.loads((out / "summary.json").read_text())
    assert sorted(p.name for p in pc.iterdir()) == sorted(f"port-{p}.pcap" for p in gold["output"])
    for port, o in gold["output"].items():
        assert list(read_packets(pc / f"port-{port}.pcap")) == list(read_packets(DATA / "goldens" / "router" / o["pcap"])), port
    assert s["out_pcap"]["per_port"] == {p: o["packets"] for p, o in gold["output"].items()}
    assert s["p4_drops"]["total"] == s["out_pcap"]["dropped"] == gold["drops"]["ingress"]
    # the compiled program names its drops by pipeline, as BMv2 counts them
    assert s["p4_drops"]["by_reason"] == {"ingress": gold["drops"]["ingress"]}


@pytest.mark.parametrize("program, entries, pcap", [
    (str(ROUTER), str(ROUTER_ENT), str(DATA / "router.pcap")),
    ("builtin:up4", str(DATA / "upf-entries.txt"), str(DATA / "upf-sample.pcap")),
])
def test_streamed_counters_equal_the_executors_own(tmp_path, program, entries, pcap):
    """The compiled program as the stream's executor (the default): the
    per-table counts, parser errors and drops equal the executor's own run
    over every packet at once (engine.RustProgram)."""
    from synapse_vmt.p4.engine import RustProgram

    program = simrun.resolve_program(program)
    s = simrun.run_program(tmp_path / "a", program=program, entries_file=entries, pcap=pcap, pmus=8)
    tr = RustProgram(Program.load(program), load_entries(entries, program)).run(list(read_packets(pcap)))
    want = {k: v for k, v in tr.counters().items() if v["lookups"] > 0}
    assert {k: {f: r[f] for f in ("lookups", "matched", "actions")} for k, r in s["tables"].items()} == want
    assert s["parser_rejects"] == dict(sorted(tr.parser_rejects.items()))
    assert s["p4_drops"]["total"] == int(tr.dropped.sum()) and s["stream"]["engine"] == "rust"
    assert s["invariants"]["ok"] and s["stream"]["drained"]


def test_both_engines_stream_the_same_upf_counts(tmp_path):
    """UPF (nothing synthesized, no fallback branch): the compiled program and
    the interpreter as the stream's executor give the same counts and routes."""
    program, entries, pcap = simrun.resolve_program("builtin:up4"), str(DATA / "upf-entries.txt"), str(DATA / "upf-sample.pcap")
    a = simrun.run_program(tmp_path / "a", program=program, entries_file=entries, pcap=pcap, pmus=8, engine="rust")
    b = simrun.run_program(tmp_path / "b", program=program, entries_file=entries, pcap=pcap, pmus=8, engine="python")
    pick = lambda s: ({k: {f: r[f] for f in ("lookups", "matched", "actions", "distinct_keys")} for k, r in s["tables"].items()},  # noqa: E731
                      s["parser_rejects"], s["p4_drops"], s["routes"], s["packets"])
    assert pick(a) == pick(b) and a["p4_drops"]["by_reason"] == {"ingress": 1}


def test_generated_traffic_names_p4_drops_apart_from_fifo_overflows(tmp_path):
    """Generated traffic (one frame per flow) keeps working: P4 drops per
    reason, weighted by the flows' packets, and the simulator's FIFO
    overflows under their own name."""
    tf = tmp_path / "t.toml"
    # 10.x is routed; 11.x misses the LPM table and is dropped at the end of ingress
    tf.write_text('[traffic]\nflows = 40\n[[traffic.classes]]\nframe = "ipv4-udp"\n'
                  '[traffic.classes.fields]\n"ipv4.dst" = {range = ["10.0.0.0", "11.255.255.255"]}\n')
    s = simrun.run_program(tmp_path / "o", program=str(ROUTER), entries_file=str(ROUTER_ENT),
                           traffic=simrun.load_traffic(str(tf)), duration_ns=50_000.0, pmus=4)
    lpm = s["tables"]["MyIngress.ipv4_lpm"]
    assert s["p4_drops"]["by_reason"].get("ingress", 0) >= lpm["actions"].get("MyIngress.drop", 0) > 0
    assert s["p4_drops"]["total"] == sum(s["p4_drops"]["by_reason"].values())
    assert "fifo_overflows" in s["invariants"] and "dropped" not in s["invariants"]


# Timings differ from run to run; everything else of a run is its results.
_TIMINGS = ("wall_s", "cpu_s", "packets_per_s", "sim_wall_s", "sim_cpu_s", "stages_cpu_s", "threads")


@pytest.mark.parametrize("program, entries, pcap", [
    (str(ROUTER), str(ROUTER_ENT), str(DATA / "router.pcap")),
    ("builtin:up4", str(DATA / "upf-entries.txt"), str(DATA / "upf-sample.pcap")),
])
def test_two_threads_give_the_one_thread_results(tmp_path, program, entries, pcap):
    """With threads 2 the next period's packets are read and executed while
    the simulator runs the current one: the simulator is handed the same
    stream, so summary.json, windows.csv and edges.csv equal the one-thread
    run's bit for bit (but for the timings). At 2 Mpps a 500 µs period holds
    1,000 packets: the capture spans several periods, each overlapped."""
    base = list(read_packets(pcap))
    frames = (base * (3000 // len(base) + 1))[:3000]
    f = tmp_path / "x.pcap"
    _write(f, "pcap", frames, [1.0 + 1e-6 * i for i in range(len(frames))])
    runs = {}
    for threads in (1, 2):
        out = tmp_path / f"t{threads}"
        s = simrun.run_capture(out, program=simrun.resolve_program(program), entries_file=entries, pcap=str(f),
                               rate_mpps=2.0, pmus=8, discover=500, threads=threads)
        assert s["stream"]["threads"] == threads
        stages = s["stream"]["stages_cpu_s"]
        assert set(stages) == {"read", "execute", "intern", "output", "sync", "simulate", "python"}
        assert stages["execute"] > 0 and stages["simulate"] > 0
        doc = json.loads((out / "summary.json").read_text())
        for k in _TIMINGS:
            doc["stream"].pop(k)
        for k in ("wall_s", "sim_keys_per_s"):  # the simulator's own timings
            doc.pop(k)
        runs[threads] = (doc, (out / "windows.csv").read_bytes(), (out / "edges.csv").read_bytes())
    assert runs[1][0]["packets"] == 3000 and runs[1][0]["routes"] > 0
    assert runs[2] == runs[1]


def test_arrivals_held_do_not_grow_with_the_capture(tmp_path):
    """What the stream holds for the simulator between two syncs is one
    control period's arrivals, whatever the capture's length: 1x and 4x the
    packets hold the same peak (at 2 Mpps, 1,000 packets a 500 µs period),
    with the read-ahead thread running."""
    base = list(read_packets(DATA / "router.pcap"))
    got = {}
    for n in (2000, 8000):
        frames = (base * (n // len(base) + 1))[:n]
        f = tmp_path / f"n{n}.pcap"
        _write(f, "pcap", frames, [1.0 + 1e-6 * i for i in range(n)])
        s = simrun.run_capture(tmp_path / f"o{n}", program=str(ROUTER), entries_file=str(ROUTER_ENT), pcap=str(f),
                               rate_mpps=2.0, pmus=4, discover=200)
        assert s["packets"] == n
        got[n] = s["stream"]["pending_peak"]
    assert got[2000] == got[8000] and 0 < got[2000] <= 1001


def test_bench_end_to_end_reports_stages_within_the_process_cpu(tmp_path):
    """`bench p4 --end-to-end --json`: the per-stage CPU seconds are parts of
    the process's CPU time (each measured on its own thread), and the
    two-core bound is the busier thread's share, at most their sum."""
    r = CliRunner().invoke(main, ["bench", "p4", str(ROUTER), "--entries", str(ROUTER_ENT), "--pcap",
                                  str(DATA / "router.pcap"), "--end-to-end", "--json", "--rate-mpps", "2", "--pmus", "4"])
    assert r.exit_code == 0, r.output
    rec = json.loads(r.output)
    st = rec["stages_cpu_s"]
    assert rec["threads"] == 2 and all(v >= 0 for v in st.values())
    assert sum(st.values()) <= rec["cpu_s"] * 1.01 + 0.01
    assert max(st["simulate"], st["execute"]) <= rec["two_core_bound_s"] <= sum(st.values()) + 1e-9


def test_codegen_on_gives_the_counts_of_off(tmp_path):
    """``--codegen on`` (the program's generated code, built with cargo into
    the user's cache or taken from it, loaded and checked against the
    executor) and ``--codegen off`` give the same summary but for which ran;
    a program the generator does not take is an error with ``on`` and one
    info line with ``auto``."""
    import shutil

    if shutil.which("cargo") is None:
        pytest.skip("cargo is not on PATH: generated code needs a Rust toolchain")
    pcap = str(DATA / "router.pcap")
    runs = {}
    for mode in ("off", "on"):
        lines = []
        runs[mode] = simrun.run_program(tmp_path / mode, program=str(ROUTER), entries_file=str(ROUTER_ENT), pcap=pcap,
                                        pmus=4, codegen=mode, info=lines.append)
        assert runs[mode]["stream"]["generated_code"] == (mode == "on"), lines
    drop = lambda s: {k: v for k, v in s.items() if k != "stream" and not k.endswith("_s")}  # times  # noqa: E731
    assert drop(runs["on"]) == drop(runs["off"])
    # a second program of the generator's subset: its own module, the same counts
    r3 = {m: simrun.run_program(tmp_path / f"r3-{m}", program=str(DATA / "route3.json"),
                                entries_file=str(DATA / "route3-entries.txt"), pcap=pcap, pmus=4, codegen=m)
          for m in ("off", "on")}
    assert r3["on"]["stream"]["generated_code"] and drop(r3["on"]) == drop(r3["off"])
    # route3-edge (advance, the IPv4 checksum) too
    edge = {m: simrun.run_program(tmp_path / f"edge-{m}", program=str(DATA / "route3-edge.json"),
                                  entries_file=str(DATA / "route3-edge-entries.txt"), pcap=str(DATA / "route3-edge.pcap"),
                                  pmus=4, codegen=m)
            for m in ("off", "on")}
    assert edge["on"]["stream"]["generated_code"] and drop(edge["on"]) == drop(edge["off"])
    # heavyhitter's hashes and register writes are outside the subset (codegen::unsupported names why)
    other, ent = str(DATA / "heavyhitter.json"), str(DATA / "heavyhitter-entries.txt")
    pcap = str(DATA / "heavyhitter.pcap")
    with pytest.raises(UserError, match="--codegen on: no generated code for this program"):
        simrun.run_program(tmp_path / "x", program=other, entries_file=ent, pcap=pcap, pmus=4, codegen="on")
    lines = []
    s = simrun.run_program(tmp_path / "y", program=other, entries_file=ent, pcap=pcap, pmus=4, codegen="auto",
                           info=lines.append)
    assert not s["stream"]["generated_code"] and len(lines) == 1 and "running the interpreter" in lines[0]

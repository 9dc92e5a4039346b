"""The Rust executor of compiled P4 programs against the Python interpreter
(the oracle), packet by packet, on every shipped program: visits (table,
key, entry, action), drops and parser errors must be equal.

Frames: random valid header chains built from each program's own parser
(tests/p4frames.py), the same cut short or with bytes changed, generated
traffic that hits the entries, and the recorded captures. Where the
executor reports a packet inexact (a synthesized field or a fallback
branch), only the visits before that point are compared, and the
interpreter must have guessed on that packet too (Trace.packet_guessed).
The output packets are compared with BMv2's own (the goldens)."""

from __future__ import annotations

import gzip
import json
import os
import random
from pathlib import Path

import numpy as np
import pytest

from p4frames import mutants, parser_frames, truncations
from synapse_vmt.errors import UserError
from synapse_vmt.p4.engine import NO_ACTION, RustProgram
from synapse_vmt.p4.entries import load_entries
from synapse_vmt.p4.interp import Program
from synapse_vmt.p4.parser import read_packets

DATA = Path(__file__).parent / "data" / "p4"


def visits(tr, i):
    lo, hi = int(tr.pkt_start[i]), int(tr.pkt_start[i + 1])
    return [(int(tr.step_table[j]), int(tr.step_entry[j]), int(tr.step_action[j]), tuple(tr.key_words(j))) for j in range(lo, hi)]


def rust_visits(c, i):
    lo, hi = int(c["pkt_start"][i]), int(c["pkt_start"][i + 1])
    ks = c["key_start"]
    return [(int(c["table"][j]), int(c["entry"][j]), -1 if c["action"][j] == NO_ACTION else int(c["action"][j]),
             tuple(c["key_words"][ks[j]:ks[j + 1]].tolist())) for j in range(lo, hi)]


def differential(program: str, ents: dict, frames: list[bytes], oracle_guesses: bool = False) -> dict:
    """Runs ``frames`` through both engines and asserts they agree packet by
    packet; returns what was compared. A packet the executor reports inexact
    is compared up to that point, and the interpreter must have guessed on
    it too (a fallback branch or a synthesized field). A packet on which
    only the interpreter guessed (``oracle_guesses``: a construct the
    executor computes and the interpreter does not, such as ``valid_union``)
    is left out."""
    prog = Program.load(program)
    rp = RustProgram(prog, ents)
    tr = prog.run(frames, ents, seed=1)
    c = rp.columns(frames)
    names = rp.core.error_names
    stats = {"packets": len(frames), "exact": 0, "inexact": 0, "oracle_guessed": 0, "visits": 0, "matched": 0}
    for i in range(len(frames)):
        py, ru = visits(tr, i), rust_visits(c, i)
        guessed = tr.packet_guessed[i]
        if c["inexact"][i]:
            assert guessed, (i, frames[i].hex(), "the executor is inexact where the interpreter did not guess")
            k = int(c["exact_visits"][i])
            assert py[:k] == ru[:k], (i, frames[i].hex(), py, ru)
            stats["inexact"] += 1
            stats["visits"] += k
            stats["matched"] += sum(1 for v in ru[:k] if v[1] >= 0)
            continue
        if guessed:
            stats["oracle_guessed"] += 1
            continue
        assert py == ru, (i, frames[i].hex(), py, ru)
        assert bool(tr.dropped[i]) == bool(c["dropped"][i]), (i, frames[i].hex())
        err = int(c["parser_error"][i])
        assert tr.packet_errors[i] == (names.get(err, f"error {err}") if err else ""), (i, frames[i].hex())
        stats["exact"] += 1
        stats["visits"] += len(ru)
        stats["matched"] += sum(1 for v in ru if v[1] >= 0)
    if not oracle_guesses:
        assert stats["oracle_guessed"] == 0, stats
    return stats


def program_frames(program: str, ents: dict, seed: int, n: int) -> list[bytes]:
    """Valid chains from the parser, then as many cut short and mutated."""
    desc = RustProgram(Program.load(program), ents).description
    rng = random.Random(seed)
    fr = parser_frames(desc, rng, n)
    return fr + truncations(fr, rng, n // 3) + mutants(fr, rng, n // 3)


# ---- the shipped programs -----------------------------------------------------------

def test_router_agrees_with_the_interpreter():
    prog = str(DATA / "router.json")
    ents = load_entries(DATA / "router-entries.txt", prog)
    rec = list(read_packets(DATA / "router.pcap"))  # hand-checked packets that hit the entries
    frames = rec + mutants(rec, random.Random(1), 1000) + program_frames(prog, ents, 1, 1500)
    s = differential(prog, ents, frames)
    # hdr.u.isValid() in egress: both compute it (false: the union's member is never extracted, as BMv2
    # has it), so every packet is compared, none guessed by either
    assert s["exact"] == len(frames) > 2000 and s["oracle_guessed"] == 0 and s["inexact"] == 0
    assert s["matched"] > 300


def test_route3_agrees_with_the_interpreter():
    from synapse_vmt.p4.bmv2 import read_program
    from synapse_vmt.p4.capture import frames as capture_frames
    from synapse_vmt.p4.simrun import load_traffic

    prog = str(DATA / "route3.json")
    ents = load_entries(DATA / "route3-entries.txt", prog)
    spec = load_traffic(str(DATA / "route3-traffic.toml"))
    spec.flows = 500
    frames = list(capture_frames(spec, read_program(prog), ents, 2000, seed=4)) + program_frames(prog, ents, 2, 600)
    s = differential(prog, ents, frames)
    assert s["inexact"] == 0 and s["exact"] == len(frames)
    assert s["matched"] > 3 * 2000 * 0.9  # the capture hits its routes, next hops and ACL


@pytest.mark.parametrize("name", ["route3-edge", "heavyhitter"])
def test_edge_case_and_stateful_programs_agree_with_the_interpreter(name):
    """route3-edge (IPv4 options, fragments, VLAN, IPv6, ARP, GRE/SCTP/OSPF, frames cut at every header)
    and heavyhitter (registers, hashes, meters, clones: its hash- and register-derived keys run, not guessed)."""
    prog = str(DATA / f"{name}.json")
    ents = load_entries(DATA / f"{name}-entries.txt", prog)
    rec = list(read_packets(DATA / f"{name}.pcap"))
    s = differential(prog, ents, rec + mutants(rec, random.Random(6), 600) + program_frames(prog, ents, 6, 600))
    assert s["inexact"] == 0 and s["matched"] > 300


def test_upf_agrees_with_the_interpreter():
    from synapse_vmt.p4 import gentraffic
    from synapse_vmt.p4.bmv2 import read_program
    from synapse_vmt.p4.simrun import load_scenario, resolve_program

    prog = resolve_program("builtin:up4")
    root = Path(__file__).parent.parent
    # the example's entries with its scenario's uplink (GTP-U) and downlink traffic
    ents = load_entries(root / "examples/upf/entries.txt", prog)
    sc = load_scenario(str(root / "examples/upf/scenario.toml"))
    sc["traffic"].flows = 600
    flows, _ = gentraffic.class_frames(sc["traffic"], read_program(prog), ents, seed=3)
    s = differential(prog, ents, flows + mutants(flows, random.Random(3), 600) + program_frames(prog, ents, 3, 1200))
    assert s["inexact"] == 0 and s["matched"] > 600 * 6
    # the tests' entries with the recorded sample (uplink hit, uplink miss, downlink) and its mutants
    ents = load_entries(DATA / "upf-entries.txt", prog)
    rec = list(read_packets(DATA / "upf-sample.pcap"))
    s = differential(prog, ents, rec + mutants(rec, random.Random(4), 900))
    assert s["inexact"] == 0 and s["matched"] > 900


@pytest.fixture
def switch(shared_data, tmp_path_factory):
    from click.testing import CliRunner

    from synapse_vmt.cli import main

    prog = str(shared_data / "p4" / "switch-p416.json")
    out = tmp_path_factory.mktemp("sw") / "sw.txt"
    r = CliRunner().invoke(main, ["p4", "entries", "gen", prog, "--count", "10", "--seed", "2", "-o", str(out)])
    assert r.exit_code == 0, r.output
    return prog, load_entries(out, prog)


def test_switch_agrees_with_the_interpreter(switch):
    from synapse_vmt.p4 import gentraffic
    from synapse_vmt.p4.bmv2 import read_program
    from synapse_vmt.p4.simrun import load_traffic

    prog, ents = switch
    spec = load_traffic(str(Path(__file__).parent.parent / "examples/switch/traffic.toml"))
    spec.flows = 150
    flows, _ = gentraffic.class_frames(spec, read_program(prog), ents, seed=5)
    frames = flows + program_frames(prog, ents, 5, 450)
    s = differential(prog, ents, frames)
    # the switch hashes (unsupported): packets keying on a hash are compared up to that table
    assert s["exact"] > 200 and s["visits"] > 200 * 10


# ---- exactness, engines, bad input ----------------------------------------------------

def test_executor_and_interpreter_report_the_same_summary_on_exact_runs():
    prog = str(DATA / "route3.json")
    ents = load_entries(DATA / "route3-entries.txt", prog)
    frames = program_frames(prog, ents, 7, 300)
    a = Program.load(prog).run(frames, ents).summary()
    b = RustProgram(Program.load(prog), ents).run(frames).summary()
    assert a == b


def test_cli_interp_engines_agree_on_exact_counts(tmp_path):
    from click.testing import CliRunner

    from synapse_vmt.cli import main

    args = ["p4", "interp", str(DATA / "route3.json"), "--entries", str(DATA / "route3-entries.txt"), "--json"]
    pcap = tmp_path / "r.pcap"
    r = CliRunner().invoke(main, ["p4", "capture", str(DATA / "route3.json"), "--entries", str(DATA / "route3-entries.txt"),
                                  "--traffic", str(DATA / "route3-traffic.toml"), "--count", "300", "-o", str(pcap)])
    assert r.exit_code == 0, r.output
    out = {e: json.loads(CliRunner().invoke(main, args + ["--pcap", str(pcap), "--engine", e]).output) for e in ("rust", "python")}
    assert out["rust"] == out["python"]
    assert out["rust"]["tables"]["Route3Ingress.acl"]["lookups"] == 300


def test_unsupported_constructs_are_named():
    prog = Program.load(DATA / "router.json")
    rp = RustProgram(prog, load_entries(DATA / "router-entries.txt", DATA / "router.json"))
    assert rp.core.unsupported == []  # its register_read and counter run
    doc = json.loads((DATA / "router.json").read_text())
    doc["header_unions"] = []  # a union the program does not declare: its validity is a fallback branch
    rp = RustProgram(Program(doc, "undeclared.json"), {})
    assert any("valid_union" in u for u in rp.core.unsupported)


def test_a_union_is_valid_when_a_member_is_both_engines(tmp_path):
    """router.json with ``magic`` joined to its header union ``u``: a packet
    whose parser extracts magic has ``hdr.u.isValid()`` true (egress visits
    color_tbl), the others false; the interpreter and the executor agree
    packet by packet, neither guessing."""
    from test_p4_interp import PACKETS

    doc = json.loads((DATA / "router.json").read_text())
    magic = next(h["id"] for h in doc["headers"] if h["name"] == "magic")
    doc["header_unions"][0]["header_ids"].insert(0, magic)
    p = tmp_path / "union.json"
    p.write_text(json.dumps(doc))
    ents = load_entries(DATA / "router-entries.txt", str(p))
    frames = [f for f, *_ in PACKETS]
    frames += mutants(frames, random.Random(2), 300)
    s = differential(str(p), ents, frames)
    assert s["exact"] == len(frames)
    tr = Program.load(p).run(frames[:len(PACKETS)], ents)
    egress = [i for i in range(len(PACKETS)) if any(st.table.startswith("MyEgress.") for st in tr.packet(i))]
    with_ct = [i for i in egress if any(st.table == "MyEgress.color_tbl" for st in tr.packet(i))]
    assert with_ct == [11]  # the one forwarded packet whose parser extracted magic


def test_malformed_description_is_one_line(tmp_path):
    doc = json.loads((DATA / "route3.json").read_text())
    # an action primitive assigning an expression with an operator BMv2 does not have
    doc["actions"][2]["primitives"][0]["parameters"][1] = {"type": "expression", "value": {"op": "@@", "left": None, "right": None}}
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    rp = RustProgram(Program.load(p), {})
    assert any("@@" in u for u in rp.core.unsupported)  # compiled as the interpreter does: a synthesized field
    # a primitive with malformed parameters: one line naming the action and the primitive
    doc["actions"][2]["primitives"][0]["parameters"] = [{"type": "field", "value": ["nope", "x"]}]
    p.write_text(json.dumps(doc))
    with pytest.raises(UserError) as e:
        RustProgram(Program.load(p), {})
    assert "\n" not in str(e.value) and str(p) in str(e.value)


def test_capture_frames_differ_and_carry_valid_checksums():
    import dpkt

    from synapse_vmt.p4.bmv2 import read_program
    from synapse_vmt.p4.capture import frames as capture_frames
    from synapse_vmt.p4.simrun import load_traffic

    prog = str(DATA / "route3.json")
    ents = load_entries(DATA / "route3-entries.txt", prog)
    spec = load_traffic(str(DATA / "route3-traffic.toml"))
    spec.flows = 20
    fr = list(capture_frames(spec, read_program(prog), ents, 400, seed=1))
    assert len(set(fr)) == 400  # every frame differs though there are 20 flows
    assert fr == list(capture_frames(spec, read_program(prog), ents, 400, seed=1))
    for f in fr:
        ip = dpkt.ethernet.Ethernet(f).data
        raw = bytes(ip)
        # the IPv4 header checksum verifies (ones' complement sum of the header is 0xffff)
        s = sum(int.from_bytes(raw[i:i + 2], "big") for i in range(0, 20, 2))
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        assert s == 0xFFFF
        if isinstance(ip.data, dpkt.tcp.TCP):
            seg = bytes(ip.data)
            ph = ip.src + ip.dst + bytes([0, 6]) + len(seg).to_bytes(2, "big")
            data = ph + seg + (b"\0" if len(seg) % 2 else b"")
            s = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
            while s >> 16:
                s = (s & 0xFFFF) + (s >> 16)
            assert s == 0xFFFF
    assert os.path.exists(DATA / "route3-traffic.toml")


def test_the_benchmarks_description_is_the_compiled_program():
    """crates/synapse-core/benches/scenarios/route3-program.json is what `synapse p4 compile` writes today."""
    committed = json.loads((DATA.parent.parent.parent / "crates/synapse-core/benches/scenarios/route3-program.json").read_text())
    fresh = RustProgram.load(str(DATA / "route3.json"), str(DATA / "route3-entries.txt")).description
    committed.pop("source")
    fresh = json.loads(json.dumps(fresh))
    fresh.pop("source")
    assert committed == fresh


def test_the_native_routers_description_is_the_compiled_program():
    """tests/data/p4/router-desc.json, which synapse-core's native::Router test reads, is the router's description today."""
    committed = json.loads((DATA / "router-desc.json").read_text())
    fresh = json.loads(json.dumps(RustProgram.load(str(DATA / "router.json"), str(DATA / "router-entries.txt")).description))
    committed.pop("source")
    fresh.pop("source")
    assert committed == fresh


def test_bench_p4_checks_against_the_interpreter_then_rates(tmp_path):
    from synapse_vmt.cli.bench import bench_program
    from synapse_vmt.p4.capture import write_pcap

    prog = str(DATA / "route3.json")
    ents = load_entries(DATA / "route3-entries.txt", prog)
    pcap = tmp_path / "f.pcap"
    write_pcap(str(pcap), iter(program_frames(prog, ents, 9, 200)))
    rec = bench_program(prog, str(DATA / "route3-entries.txt"), str(pcap), rounds=1, python_packets=50)
    assert rec["packets"] == len(program_frames(prog, ents, 9, 200)) and rec["packets_per_s"] > 0
    assert rec["speedup"] > 0 and rec["lookup_structures"]["Route3Ingress.ipv4_lpm"] == "lpm trie"


def test_bench_p4_skips_the_packets_the_interpreter_guessed():
    """router.pcap's packet 7 takes the interpreter's random hdr.u.isValid() branch
    (the executor computes it): the check skips it instead of refusing the program."""
    from synapse_vmt.cli.bench import bench_program

    rec = bench_program(str(DATA / "router.json"), str(DATA / "router-entries.txt"), str(DATA / "router.pcap"), rounds=1)
    assert rec["packets"] == 12 and rec["packets_per_s"] > 0


# ---- output packets against BMv2 (tests/data/p4/goldens: simple_switch's own output pcaps) ----

GOLDENS = DATA / "goldens"


def outputs_by_port(name: str, tmp: Path | None = None) -> tuple[dict[str, list[bytes]], dict[str, list[bytes]]]:
    """(the executor's, BMv2's) output frames per egress port for golden ``name``, run with the
    simple_switch options it was recorded with."""
    from synapse_vmt.p4.externs import SwitchOptions

    g = json.loads((GOLDENS / name / "golden.json").read_text())
    root = DATA.parent.parent.parent
    prog = root / g["inputs"]["program"]["path"]
    if not prog.exists():
        pytest.skip(f"{g['inputs']['program']['path']} not found (the program is in ../shared only)")
    if prog.suffix == ".gz":
        (tmp / prog.stem).write_bytes(gzip.decompress(prog.read_bytes()))
        prog = tmp / prog.stem
    o = g["options"]
    rp = RustProgram(Program.load(prog), load_entries(root / g["inputs"]["entries"]["path"], prog),
                     options=SwitchOptions(priority_queues=o["priority_queues"], drop_port=o["drop_port"]))
    c = rp.columns(read_packets(root / g["inputs"]["pcap"]["path"]), ingress_port=o["ingress_port"], outputs=True)
    ours: dict[str, list[bytes]] = {}
    for i, port in enumerate(c["out_port"].tolist()):
        ours.setdefault(str(port), []).append(bytes(c["out_bytes"][c["out_start"][i]:c["out_start"][i + 1]]))
    theirs = {p: list(read_packets(GOLDENS / name / o["pcap"])) for p, o in g["output"].items()}
    return ours, theirs


@pytest.mark.parametrize("name", ["router", "route3-edge", "heavyhitter", "upf-sample", "switch", "switch-pq8"])
def test_output_packets_equal_bmv2s(name, tmp_path):
    """Every frame BMv2 sent, on the same port, in order, byte for byte: the deparser, the
    checksums it updates (csum16), I2E clones to a mirroring session (heavyhitter), UPF's
    GTP-U encapsulation through its action selector, the switch program's rewrites. With
    8 priority queues simple_switch sends the frames of each port in an order that depends
    on how full its queues are during the replay, so there the frames are compared as a
    multiset."""
    ours, theirs = outputs_by_port(name, tmp_path)
    if name == "switch-pq8":
        ours, theirs = ({p: sorted(f) for p, f in d.items()} for d in (ours, theirs))
    assert ours == theirs

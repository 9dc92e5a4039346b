"""The Rust executor against the interpreter (the oracle) on programs whose
externs run: every visit (table, key, entry, action) and what the externs
did (drops, copies, ports, counters, meters, registers, digests) agree, on
the hand-written stateful program, UPF and the switch program."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from p4stateful import program  # noqa: E402
from test_p4_switch import ENTRIES, frame  # noqa: E402

from synapse_vmt.p4.engine import RustProgram  # noqa: E402
from synapse_vmt.p4.entries import load_entries  # noqa: E402
from synapse_vmt.p4.externs import SwitchOptions  # noqa: E402
from synapse_vmt.p4.interp import Program  # noqa: E402

DATA = Path(__file__).parent / "data" / "p4"


def same(a, b) -> None:
    """Both engines' traces agree in every visit and every extern count."""
    assert a.n_packets == b.n_packets
    assert a.pkt_start.tolist() == b.pkt_start.tolist()
    assert a.step_table.tolist() == b.step_table.tolist()
    assert a.step_entry.tolist() == b.step_entry.tolist()
    assert a.step_action.tolist() == b.step_action.tolist()
    assert a.step_keys == b.step_keys
    assert a.dropped.tolist() == b.dropped.tolist()
    sa, sb = a.summary(), b.summary()
    for k in ("drops", "copies", "out_ports", "counters", "direct_counters", "digests", "meter_colors", "registers",
              "synthesized_fields", "fallback_branches", "parser_rejects"):
        assert sa[k] == sb[k], k


def stateful_packets(rng: random.Random, n: int) -> list[tuple[int, bytes]]:
    """Packets to every destination and special port of the test entries, at increasing times."""
    out, t = [], 0
    for _ in range(n):
        t += rng.choice([0, 1_000_000, 7_000_000, 250_000_000])  # ps
        dst = rng.choice(["10.0.0.1", "20.1.1.1", "30.1.1.1", "40.1.1.1", "50.1.1.1", "60.0.0.1"])
        out.append((t, frame(dst, sport=rng.randrange(1, 200), dport=rng.choice([80, 1000, 2000, 3000, 4000]),
                             src=f"192.168.0.{rng.randrange(1, 4)}", bad_checksum=rng.random() < 0.05)))
    return out


@pytest.mark.parametrize("queues", [1, 8])
def test_stateful_program_both_engines_agree(tmp_path, queues):
    f = tmp_path / "e.txt"
    rates = "".join(f"meter_set_rates flow_meter {i} 0.001:2 0.002:3\n" for i in range(0, 64, 3))
    f.write_text(ENTRIES + rates + "table_add flows do_digest 7 =>\ntable_add flows NoAction 12 =>\n"
                 + "meter_set_rates ingress.flows_meter 1 0.0005:1 0.001:2\nregister_write flow_count 5 3\n")
    ents = load_entries(f, DATA / "stateful.json")
    prog = Program(program(), "stateful.json")
    pk = stateful_packets(random.Random(queues), 400)
    opts = SwitchOptions(priority_queues=queues)
    a = prog.run(pk, ents, seed=9, options=opts)
    b = RustProgram(prog, ents, seed=9, options=opts).run(pk)
    same(a, b)
    x = a.externs
    # the run exercises every extern: clones both ways, resubmit, recirculate, replicas, meters' colours, drops
    assert set(x.copies) == {"ingress_clone", "egress_clone", "resubmit", "recirculate", "replication"}
    assert all(c > 0 for c in x.meter_colors["flow_meter"])
    assert "egress: mark_to_drop" in x.drops and ("Priority out of range" in x.drops) == (queues == 1)


def test_upf_both_engines_agree(shared_data):
    from synapse_vmt.p4 import gentraffic, simrun
    from synapse_vmt.p4.bmv2 import read_program

    kw = simrun.load_scenario(str(Path(__file__).parent.parent / "examples" / "upf" / "scenario.toml"))
    prog_path = kw["program"]
    ents = load_entries(kw["entries_file"], prog_path)
    frames, _ = gentraffic.class_frames(kw["traffic"], read_program(prog_path), ents, 1)
    frames = frames[:1500]
    prog = Program.load(prog_path)
    a = prog.run(frames, ents, seed=1)
    b = RustProgram(prog, ents, seed=1).run(frames)
    same(a, b)
    assert a.synthesized_fields == {} and a.fallback_branches == {}
    # routes_v4 is an action-selector table: its groups of two next hops spread the flows
    acts = a.counters()["PreQosPipe.Routing.routes_v4"]
    assert acts["matched"] == acts["lookups"] > 0


def test_switch_program_both_engines_agree(shared_data, tmp_path):
    from click.testing import CliRunner

    from synapse_vmt.cli import main
    from test_p4_interp import PACKETS, _mutants, upf_downlink

    prog_path = shared_data / "p4" / "switch-p416.json"
    out = tmp_path / "sw.txt"
    r = CliRunner().invoke(main, ["p4", "entries", "gen", str(prog_path), "--count", "10", "--seed", "2", "-o", str(out)])
    assert r.exit_code == 0, r.output
    ents = load_entries(out, prog_path)
    prog = Program.load(prog_path)
    pk = _mutants(4, 300) + [upf_downlink(), PACKETS[1][0], PACKETS[6][0]]
    a = prog.run(pk, ents, seed=3)
    b = RustProgram(prog, ents, seed=3).run(pk)
    same(a, b)
    assert (a.synthesized_fields, a.fallback_branches) == ({}, {})


def test_heavyhitter_program_both_engines_agree():
    """The BMv2-golden heavy-hitter program (hashes, meters, registers, counters, an I2E clone) with
    its capture's arrival times."""
    from synapse_vmt.p4.parser import read_frames

    prog_path = DATA / "heavyhitter.json"
    ents = load_entries(DATA / "heavyhitter-entries.txt", prog_path)
    pk = [(round(ts * 1e12), b) for ts, b in read_frames(DATA / "heavyhitter.pcap")]
    prog = Program.load(prog_path)
    a = prog.run(pk, ents, seed=1)
    b = RustProgram(prog, ents, seed=1).run(pk)
    same(a, b)
    assert a.externs.copies == {"ingress_clone": 80} and a.externs.drops["ingress: mark_to_drop"] > 0

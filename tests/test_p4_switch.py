"""simple_switch's externs and packet flow in the interpreter, on the
hand-written stateful program (tests/p4stateful.py: what it does is in its
doc). Every expectation is worked out by hand from BMv2's source
(simple_switch.cpp, primitives.cpp, meters.cpp, action_profile.cpp); the
hash values come from synapse_vmt.p4.hashes, itself checked against BMv2's
test vectors (test_p4_hashes.py)."""

from __future__ import annotations

from pathlib import Path

import dpkt
import pytest

from p4stateful import program
from synapse_vmt.p4.entries import load_entries
from synapse_vmt.p4.externs import SwitchOptions
from synapse_vmt.p4.hashes import hasher, pack_bits
from synapse_vmt.p4.interp import Program

DATA = Path(__file__).parent / "data" / "p4"

ENTRIES = """\
act_prof_create_member route_sel set_port 1
act_prof_create_member route_sel set_port 2
act_prof_create_member route_sel set_port 3
act_prof_create_member route_sel set_port 10
act_prof_create_member route_sel set_port 12
act_prof_create_member route_sel set_port 13
act_prof_create_group route_sel
act_prof_add_member_to_group route_sel 5 0
act_prof_add_member_to_group route_sel 0 0
act_prof_add_member_to_group route_sel 4 0
table_indirect_add_with_group route 10.0.0.0/8 => 0
table_indirect_add route 20.0.0.0/8 => 1
table_indirect_add route 30.0.0.0/8 => 2
table_indirect_add route 40.0.0.0/8 => 3
table_indirect_add route 50.0.0.0/8 => 0
table_add special do_clone 1000 => 5
table_add special do_mcast 2000 => 7
table_add special do_resubmit 3000 =>
table_add special set_prio 4000 => 3
table_add eg mark 1 =>
table_add eg e_clone 2 => 6
table_add eg e_recirc 3 =>
table_add eg e_drop 10 =>
table_add heavy drop 2 =>
mirroring_add 5 9
mirroring_add 6 8
mc_mgrp_create 7
mc_node_create 100 5 4
mc_node_create 200 6
mc_node_associate 7 1
mc_node_associate 7 0
"""


def frame(dst: str, sport: int = 1234, dport: int = 80, src: str = "192.168.0.1", bad_checksum: bool = False) -> bytes:
    u = dpkt.udp.UDP(sport=sport, dport=dport, data=b"x" * 10)
    ip = dpkt.ip.IP(src=bytes(map(int, src.split("."))), dst=bytes(map(int, dst.split("."))), p=17, ttl=64, data=u)
    ip.len = 20 + len(bytes(u))
    raw = bytes(ip)
    if bad_checksum:
        raw = raw[:10] + bytes([raw[10] ^ 0xFF]) + raw[11:]
    return bytes(dpkt.ethernet.Ethernet(dst=b"\x02" * 6, src=b"\x04" * 6, type=0x0800)) + raw


def ip(s: str) -> int:
    return int.from_bytes(bytes(map(int, s.split("."))), "big")


def flow_idx(src: str, dst: str, sport: int, dport: int) -> int:
    """The program's idx: crc16 over src, dst, proto, sport, dport, mod 64."""
    buf = pack_bits([(ip(src), 32), (ip(dst), 32), (17, 8), (sport, 16), (dport, 16)])
    return hasher("crc16")(buf) % 64


@pytest.fixture(scope="module")
def prog() -> Program:
    return Program(program(), "stateful.json")


@pytest.fixture
def ents(tmp_path):
    def load(extra: str = ""):
        f = tmp_path / "e.txt"
        f.write_text(ENTRIES + extra)
        return load_entries(f, DATA / "stateful.json")
    return load


def visits(tr, i):
    return [(s.table, s.key) for s in tr.packet(i)]


def test_committed_json_is_the_builders():
    import json
    assert json.loads((DATA / "stateful.json").read_text()) == program()


def test_hash_register_counter_and_direct_counter(prog, ents):
    idx = flow_idx("192.168.0.1", "50.1.1.1", 1234, 80)
    e = ents(f"table_add flows NoAction {idx} =>\n")
    f = frame("50.1.1.1")
    tr = prog.run([f] * 5, e)
    # flows is keyed on the hash
    assert [k for t, k in visits(tr, 0) if t == "ingress.flows"] == [(idx,)]
    # the register counts 1..5; heavy (count > 3) sees the 4th and 5th packets
    assert tr.registers["flow_count"][idx] == 5 and sum(tr.registers["flow_count"]) == 5
    assert [any(t == "ingress.heavy" for t, _ in visits(tr, i)) for i in range(5)] == [False, False, False, True, True]
    x = tr.externs
    assert x.counters == {"pkt_counter": {idx: [5, 5 * len(f)]}}  # bytes: the ingress length
    assert x.direct == {"ingress.flows": {0: [5, 5 * len(f)]}}  # the entry's hits
    assert x.out_ports == {1: 5} and x.drops == {}


def test_meter_marks_red_and_heavy_drops(prog, ents):
    idx = flow_idx("192.168.0.1", "50.1.1.1", 1234, 80)
    # packets meter, rates far below the traffic: bursts of 1 (CIR) and 2 (PIR) tokens at t = 0
    e = ents(f"meter_set_rates flow_meter {idx} 0.000001:1 0.000002:2\n")
    tr = prog.run([(0, frame("50.1.1.1"))] * 5, e)
    # colours GREEN, YELLOW (CIR bucket empty), RED, RED, RED
    assert tr.externs.meter_colors["flow_meter"] == [1, 1, 3]
    # heavy is applied from the 4th packet (count > 3), keyed on the colour: RED (2) -> drop, no routing
    assert [k for i in range(5) for t, k in visits(tr, i) if t == "ingress.heavy"] == [(2,), (2,)]
    assert [any(t == "ingress.route" for t, _ in visits(tr, i)) for i in range(5)] == [True] * 3 + [False] * 2
    assert tr.externs.drops == {"ingress: mark_to_drop": 2} and tr.dropped.tolist() == [False] * 3 + [True] * 2
    # refilled after 1 s: PIR 2 tokens, CIR 1: green again
    tr = prog.run([(0, frame("50.1.1.1"))] * 3 + [(10**12, frame("50.1.1.1"))], e)
    assert tr.externs.meter_colors["flow_meter"] == [2, 1, 1]


def test_unconfigured_meter_and_direct_meter_are_green(prog, ents):
    idx = flow_idx("192.168.0.1", "50.1.1.1", 1234, 80)
    tr = prog.run([frame("50.1.1.1")] * 3, ents(f"table_add flows NoAction {idx} =>\n"))
    assert tr.externs.meter_colors == {"flow_meter": [3, 0, 0], "ingress.flows_meter": [3, 0, 0]}
    # the direct meter's rates name the entry by its handle
    tr = prog.run([frame("50.1.1.1")] * 3, ents(f"table_add flows NoAction {idx} =>\nmeter_set_rates ingress.flows_meter 0 "
                                                 "0.000001:1 0.000001:1\n"))
    assert tr.externs.meter_colors["ingress.flows_meter"] == [1, 0, 2]


def test_selector_picks_by_hash_in_member_handle_order(prog, ents):
    e = ents()
    sports = list(range(1000, 1060))
    tr = prog.run([frame("10.0.0.1", sport=s) for s in sports], e)
    members = [1, 12, 13]  # group 0 = members {5, 0, 4} in handle order 0, 4, 5: ports 1, 12, 13
    want = [members[(hasher("crc16")(pack_bits([(ip("192.168.0.1"), 32), (s, 16)])) & 0xFFFFFFFF) % 3] for s in sports]
    got = [next(k[0] for t, k in visits(tr, i) if t == "egress.eg") for i in range(len(sports))]
    assert got == want and set(got) == {1, 12, 13}
    assert tr.counters()["ingress.route"]["actions"] == {"ingress.set_port": len(sports)}


def test_ingress_clone_goes_to_the_session_port_with_its_instance_type(prog, ents):
    tr = prog.run([frame("50.1.1.1", dport=1000)], ents())
    eg = [(t, k) for t, k in visits(tr, 0) if t.startswith("egress")]
    # BMv2 enqueues the clone (session 5 -> port 9, instance 1) before the original (port 1, instance 0)
    assert eg == [("egress.eg", (9,)), ("egress.inst", (1, 0, 0)), ("egress.eg", (1,)), ("egress.inst", (0, 0, 0))]
    assert tr.externs.copies == {"ingress_clone": 1} and tr.externs.out_ports == {9: 1, 1: 1}
    # an unconfigured session clones nothing
    tr = prog.run([frame("50.1.1.1", dport=1000)], ents("mirroring_delete 5\n"))
    assert tr.externs.copies == {} and tr.externs.out_ports == {1: 1}


def test_multicast_replicas_in_node_order_with_their_rid(prog, ents):
    tr = prog.run([frame("20.1.1.1", dport=2000)], ents())
    inst = [k for t, k in visits(tr, 0) if t == "egress.inst"]
    ports = [k[0] for t, k in visits(tr, 0) if t == "egress.eg"]
    # node 1 (rid 200: port 6) was associated first, then node 0 (rid 100: ports 4, 5 ascending)
    assert ports == [6, 4, 5] and inst == [(5, 200, 0), (5, 100, 0), (5, 100, 0)]
    assert tr.externs.copies == {"replication": 3} and tr.externs.out_ports == {4: 1, 5: 1, 6: 1}
    # an unknown group: no replica
    tr = prog.run([frame("20.1.1.1", dport=2000)], ents("mc_mgrp_destroy 7\n"))
    assert tr.externs.drops == {"multicast group without replicas": 1} and tr.dropped.tolist() == [True]


def test_resubmit_runs_ingress_again_with_its_field_list(prog, ents):
    idx = flow_idx("192.168.0.1", "50.1.1.1", 1234, 3000)
    tr = prog.run([frame("50.1.1.1", dport=3000)], ents())
    v = visits(tr, 0)
    # first pass: special (do_resubmit), nothing forwarded; second pass (instance 6, pass = 1 kept):
    # seen_again, then egress as a normal packet (BMv2 sets instance_type 0 before enqueueing)
    assert [t for t, _ in v] == ["ingress.flows", "ingress.route", "ingress.special", "ingress.flows", "ingress.route",
                                 "ingress.seen_again", "egress.eg", "egress.inst"]
    assert v[5] == ("ingress.seen_again", (1, 6)) and v[7] == ("egress.inst", (0, 0, 0))
    assert tr.registers["flow_count"][idx] == 2  # both ingress passes ran the register update
    assert tr.externs.copies == {"resubmit": 1} and tr.externs.out_ports == {1: 1}


def test_egress_clone_and_recirculation_with_checksum_update(prog, ents):
    tr = prog.run([frame("20.1.1.1", src="192.168.0.2"), frame("30.1.1.1")], ents())
    # port 2: e_clone(6) -> a copy to port 8 (instance 2) after the original leaves egress
    assert [(t, k) for t, k in visits(tr, 0) if t.startswith("egress")] == [
        ("egress.eg", (2,)), ("egress.inst", (0, 0, 0)), ("egress.eg", (8,)), ("egress.inst", (2, 0, 0))]
    # port 3: e_recirc (pass = 2, ttl - 1): the deparsed bytes come back to ingress (instance 4) with a
    # checksum the deparser updated (checksum_error 0), pass 2 kept: seen_again, then egress skips eg
    v = visits(tr, 1)
    assert [t for t, _ in v] == ["ingress.flows", "ingress.route", "ingress.special", "egress.eg", "egress.inst",
                                 "ingress.flows", "ingress.route", "ingress.seen_again", "egress.inst"]
    assert v[4] == ("egress.inst", (0, 0, 0)) and v[7] == ("ingress.seen_again", (2, 4)) and v[8] == ("egress.inst", (0, 0, 0))
    assert tr.externs.copies == {"egress_clone": 1, "recirculate": 1}
    assert tr.externs.out_ports == {2: 1, 8: 1, 3: 1}


def test_parser_verifies_the_ipv4_checksum(prog, ents):
    tr = prog.run([frame("50.1.1.1", bad_checksum=True), frame("50.1.1.1")], ents())
    assert [k for i in range(2) for t, k in visits(tr, i) if t == "egress.inst"] == [(0, 0, 1), (0, 0, 0)]


def test_egress_drop_and_priority_queues(prog, ents):
    tr = prog.run([frame("40.1.1.1"), frame("50.1.1.1", dport=4000)], ents())
    # port 10: e_drop in egress; priority 3 with simple_switch's default single queue: dropped at enqueue
    assert tr.externs.drops == {"egress: mark_to_drop": 1, "Priority out of range": 1}
    assert tr.dropped.tolist() == [True, True]
    assert not any(t.startswith("egress") for t, _ in visits(tr, 1))
    tr = prog.run([frame("50.1.1.1", dport=4000)], ents(), options=SwitchOptions(priority_queues=8))
    assert tr.externs.drops == {} and tr.externs.out_ports == {1: 1}


def test_digest_records_its_learn_list(prog, ents):
    idx = flow_idx("192.168.0.1", "50.1.1.1", 1234, 80)
    tr = prog.run([frame("50.1.1.1")] * 2, ents(f"table_add flows do_digest {idx} =>\n"))
    assert tr.externs.digests == [("digest_t", (ip("192.168.0.1"), 1)), ("digest_t", (ip("192.168.0.1"), 2))]
    assert tr.summary()["digests"] == {"digest_t": 2}


def test_register_write_in_the_entries_file_sets_the_start_value(prog, ents):
    idx = flow_idx("192.168.0.1", "50.1.1.1", 1234, 80)
    tr = prog.run([frame("50.1.1.1")], ents(f"register_write flow_count {idx} 10\n"))
    assert tr.registers["flow_count"][idx] == 11
    assert any(t == "ingress.heavy" for t, _ in visits(tr, 0))


def test_stateful_runs_are_not_served_from_the_frame_cache(prog, ents):
    f = frame("50.1.1.1")
    a = prog.run([f] * 6, ents())
    b = prog.run([f] * 6, ents(), frame_cache=0)
    assert a.step_keys == b.step_keys and a.registers == b.registers
    assert len({len(a.packet(i)) for i in range(6)}) == 2  # the register changes the path (heavy from the 4th)

"""The P4 interpreter on hand-written programs, entries and packets whose
paths and counts are worked out by hand in the comments (oracle: the P4
semantics applied by hand), and on UPF with GTP-U packets."""

from __future__ import annotations

import random
import socket
import struct
from dataclasses import dataclass, field
from pathlib import Path

import dpkt
import numpy as np
import pytest

from synapse_vmt.errors import UserError
from synapse_vmt.p4.exprs import Codegen, Phv, Unsupported, tcm
from synapse_vmt.p4.interp import Program, encode_words
from synapse_vmt.p4.parser import read_packets

DATA = Path(__file__).parent / "data" / "p4"


# Stand-ins with the shape of entries.py's data model (contracts.md); the
# interpreter only reads these attributes.
@dataclass
class M:
    kind: str
    value: int = 0
    mask: int | None = None
    prefix_len: int | None = None
    lo: int | None = None
    hi: int | None = None


@dataclass
class E:
    table: str
    matches: dict
    action: str
    params: dict = field(default_factory=dict)
    priority: int | None = None
    source: str = "test"


@dataclass
class TE:
    table: str
    entries: list
    default: tuple | None = None


def ip(s: str) -> int:
    return struct.unpack("!I", socket.inet_aton(s))[0]


def router_entries() -> dict:
    return {
        "MyIngress.ipv4_lpm": TE("MyIngress.ipv4_lpm", [  # longest prefix first
            E("MyIngress.ipv4_lpm", {"ipv4.dstAddr": M("lpm", ip("10.1.0.0"), prefix_len=16)}, "MyIngress.set_nhop", {"nhop": 5, "port": 3}),
            E("MyIngress.ipv4_lpm", {"ipv4.dstAddr": M("lpm", ip("10.0.0.0"), prefix_len=8)}, "set_nhop", {"nhop": 7, "port": 4}),
        ]),
        "MyIngress.acl": TE("MyIngress.acl", [
            E("MyIngress.acl", {"scalars.l4_dport": M("ternary", 53, 0xFFFF), "ipv4.protocol": M("ternary", 17, 0xFF),
                                "udp.srcPort": M("range", lo=0, hi=1023), "udp.$valid$": M("exact", 1)}, "MyIngress.deny"),
            # matched by the P4Runtime name of the key (meta.l4_dport omitted: wildcard)
            E("MyIngress.acl", {"hdr.ipv4.protocol": M("ternary", 17, 0xFF), "hdr.udp.srcPort": M("range", lo=0, hi=65535),
                                "hdr.udp.$valid$": M("exact", 1)}, "MyIngress.permit"),
        ]),
        "MyIngress.nhop_tbl": TE("MyIngress.nhop_tbl", [
            E("MyIngress.nhop_tbl", {"scalars.nhop": M("exact", 5)}, "MyIngress.set_dmac", {"dmac": 0x001122334455}),
            E("MyIngress.nhop_tbl", {"scalars.nhop": M("exact", 7)}, "MyIngress.set_tag", {"v": 9}),
        ]),
        "MyEgress.color_tbl": TE("MyEgress.color_tbl", [
            E("MyEgress.color_tbl", {"scalars.color": M("exact", 2)}, "MyIngress.set_tag", {"v": 1}),
        ]),
        "MyEgress.port_tbl": TE("MyEgress.port_tbl", [
            E("MyEgress.port_tbl", {"standard_metadata.egress_port": M("exact", 3)}, "NoAction"),
        ]),
    }


def eth(payload: bytes, etype: int = 0x0800) -> bytes:
    return bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=etype, data=payload))


def ipv4(dst: str, proto: int, payload: bytes = b"", ttl: int = 64, ihl: int = 5) -> bytes:
    h = dpkt.ip.IP(src=socket.inet_aton("1.2.3.4"), dst=socket.inet_aton(dst), p=proto, ttl=ttl, data=payload)
    raw = bytes(h)
    if ihl != 5:  # only the ihl nibble changes: the parser must reject it through verify()
        raw = bytes([0x40 | ihl]) + raw[1:]
    return raw


def udp(sport: int, dport: int, payload: bytes = b"\x00" * 8) -> bytes:
    u = dpkt.udp.UDP(sport=sport, dport=dport, data=payload)
    u.ulen = 8 + len(payload)
    return bytes(u)


def vlan(n: int, inner_type: int = 0x0800) -> bytes:
    tags = b""
    for i in range(n):
        tags += struct.pack("!HH", 100 + i, 0x8100 if i < n - 1 else inner_type)
    return tags


# The packets and, by hand, what router.p4 does with each (ingress then egress).
L, A, N, CT, PT = "MyIngress.ipv4_lpm", "MyIngress.acl", "MyIngress.nhop_tbl", "MyEgress.color_tbl", "MyEgress.port_tbl"
PACKETS = [
    # 0: 10.1.2.3 hits the /16 (nhop 5, port 3, ttl 64->63); acl entry 0 (dport 53, sport 1000 <= 1023): deny = drop + exit
    (eth(ipv4("10.1.2.3", 17, udp(1000, 53))), [(L, 0, "MyIngress.set_nhop"), (A, 0, "MyIngress.deny")], True, None),
    # 1: dport 80: acl entry 1 permit -> __HIT__ -> nhop 5: set_dmac; egress port 3
    (eth(ipv4("10.1.2.3", 17, udp(2000, 80))), [(L, 0, "MyIngress.set_nhop"), (A, 1, "MyIngress.permit"), (N, 0, "MyIngress.set_dmac")], False, None),
    # 2: ttl 1 -> 0 after set_nhop (the /8: nhop 7): the ttl conditional drops it before the acl
    (eth(ipv4("10.9.9.9", 6, b"\x00" * 20, ttl=1)), [(L, 1, "MyIngress.set_nhop")], True, None),
    # 3: no prefix: the default action drop, next_tables[drop] = end
    (eth(ipv4("11.0.0.1", 17, udp(1, 2))), [(L, -1, "MyIngress.drop")], True, None),
    # 4: ARP: no ipv4, node_1 false -> keyless drop table, no keyed table
    (eth(b"\x00" * 28, etype=0x0806), [], True, None),
    # 5: one VLAN tag; /8 (nhop 7, port 4); tcp is not udp: acl keys udp.$valid$ = 0, dport 0 -> no entry -> __MISS__ -> end
    (eth(vlan(1) + ipv4("10.0.0.1", 6, b"\x00" * 20), etype=0x8100), [(L, 1, "MyIngress.set_nhop"), (A, -1, "MyIngress.permit")], False, None),
    # 6: two VLAN tags, udp sport 5000: acl entry 1 -> nhop 7: set_tag; egress port 4: port_tbl misses
    (eth(vlan(2) + ipv4("10.0.0.1", 17, udp(5000, 9999)), etype=0x8100), [(L, 1, "MyIngress.set_nhop"), (A, 1, "MyIngress.permit"), (N, 1, "MyIngress.set_tag")], False, None),
    # 7: three tags overflow the 2-element stack: rejected, ipv4 never extracted -> keyless drop
    (eth(vlan(3) + ipv4("10.0.0.1", 17, udp(1, 2)), etype=0x8100), [], True, "StackOutOfBounds"),
    # 8: ihl 6 fails verify() after ipv4 was extracted: the packet still runs; 12/8 misses -> drop
    (eth(ipv4("12.0.0.1", 17, udp(1, 2), ihl=6)), [(L, -1, "MyIngress.drop")], True, "BadIhl"),
    # 9: cut inside the ipv4 header: PacketTooShort, no ipv4 -> keyless drop
    (eth(ipv4("10.1.2.3", 17, udp(1, 2)))[:24], [], True, "PacketTooShort"),
    # 10: payload 0xa3: lookahead 4 bits = 0xa -> magic, 0xa3 & 0xfe == 0xa2 accepts; dport 53 sport 100: deny
    (eth(ipv4("10.1.0.9", 17, udp(100, 53, b"\xa3" + b"\x00" * 7))), [(L, 0, "MyIngress.set_nhop"), (A, 0, "MyIngress.deny")], True, None),
    # 11: payload 0xa7 matches no transition of parse_magic (no default): NoMatch, runs on: permit -> nhop 5
    (eth(ipv4("10.1.0.9", 17, udp(100, 54, b"\xa7" + b"\x00" * 7))), [(L, 0, "MyIngress.set_nhop"), (A, 1, "MyIngress.permit"), (N, 0, "MyIngress.set_dmac")], False, "NoMatch"),
]


@pytest.fixture(scope="module")
def router() -> Program:
    return Program.load(DATA / "router.json")


def ingress_steps(trace, i):
    return [(s.table, s.entry, s.action) for s in trace.packet(i) if s.table.startswith("MyIngress.")]


def test_router_paths_by_hand(router):
    tr = router.run([p for p, *_ in PACKETS], router_entries(), seed=1)
    assert tr.n_packets == len(PACKETS)
    for i, (_, path, dropped, err) in enumerate(PACKETS):
        assert ingress_steps(tr, i) == path, f"packet {i}"
        assert bool(tr.dropped[i]) == dropped, f"packet {i}"
        egress = [s.table for s in tr.packet(i) if s.table.startswith("MyEgress.")]
        if dropped:
            assert egress == [], f"packet {i}: a dropped packet skips egress"
        else:  # hdr.u.isValid() is false (u.a is never extracted, as BMv2 has it): port_tbl only
            assert egress == [PT], f"packet {i}"
    assert tr.parser_rejects == {"StackOutOfBounds": 1, "BadIhl": 1, "PacketTooShort": 1, "NoMatch": 1}


def test_router_counters_and_synthesized(router):
    tr = router.run([p for p, *_ in PACKETS], router_entries(), seed=3)
    c = tr.counters()
    assert c[L] == {"lookups": 9, "matched": 7, "actions": {"MyIngress.set_nhop": 7, "MyIngress.drop": 2}}
    assert c[A] == {"lookups": 6, "matched": 5, "actions": {"MyIngress.deny": 2, "MyIngress.permit": 4}}
    assert c[N] == {"lookups": 3, "matched": 3, "actions": {"MyIngress.set_dmac": 2, "MyIngress.set_tag": 1}}
    # 4 packets reach egress (1, 5, 6, 11): hdr.u.isValid() is false for each (the union's member is
    # never extracted), so color_tbl is not visited, as in BMv2; nothing is guessed or skipped
    assert tr.fallback_branches == {} and tr.synthesized_fields == {} and tr.unsupported == []
    assert c[CT]["lookups"] == 0
    assert c[PT]["lookups"] == 4
    # egress_port = egress_spec: packets 1 and 11 go to port 3 (an entry), 5 and 6 to port 4 (none)
    assert c[PT]["matched"] == 2
    assert tr.registers == {"colors": [0]}


def _router_without_union():
    """router.json with its header union undeclared: hdr.u.isValid() cannot be evaluated (a fallback branch)."""
    import json

    doc = json.loads((DATA / "router.json").read_text())
    doc["header_unions"] = []
    return Program(doc, "no-union.json")


def test_router_fallback_is_seeded():
    router = _router_without_union()
    pk = [p for p, *_ in PACKETS] * 20
    a = router.run(pk, router_entries(), seed=7)
    b = router.run(pk, router_entries(), seed=7)
    assert a.step_table.tolist() == b.step_table.tolist()
    assert list(a.fallback_branches) == ["node_e1 (hdr.u.isValid())"] and sum(a.fallback_branches.values()) == 80
    assert a.unsupported == ["conditional node_e1: valid_union() of a non-union"]
    n_ct = [router.run(pk, router_entries(), seed=s).counters()[CT]["lookups"] for s in range(6)]
    assert len(set(n_ct)) > 1  # the seed decides the fallback branches
    assert all(0 < n < 80 for n in n_ct)  # 80 packets reach egress; about half take each branch


def test_router_actions_write_fields(router):
    """Action effects visible in later keys: set_nhop's nhop and port, ttl decrement, set_dmac's tag."""
    tr = router.run([PACKETS[1][0], PACKETS[6][0]], router_entries(), seed=0)
    steps = tr.packet(0)
    assert steps[2].key == (5,)  # nhop_tbl keyed on the nhop set_nhop wrote
    assert steps[-1].table == PT and steps[-1].key == (3,)  # egress_port = egress_spec = 3
    steps = tr.packet(1)
    assert steps[1].key == (9999, 17, 5000, 1)  # l4_dport set by the parser from udp.dstPort
    assert steps[-1].key == (4,)


def test_key_words_layout(router):
    tr = router.run([PACKETS[1][0]], router_entries())
    acl = [j for j in range(len(tr.step_table)) if tr.tables[tr.step_table[j]].name == A][0]
    assert tr.key_words(acl) == [80, 17, 2000, 1]
    spec = tr.tables[0]
    assert encode_words(spec, (0x0A010203,)) == [0x0A010203]
    from synapse_vmt.p4.interp import KeySpec, TableSpec

    wide = TableSpec("w", "ingress", (KeySpec("a.b", 48, "exact", "b"), KeySpec("a.c", 9, "exact", "c")))
    assert encode_words(wide, (0x112233445566, 0x1FF)) == [0x1122, 0x33445566, 0x1FF]
    pkt, words, entry = tr.table_keys(A)
    assert pkt.tolist() == [0] and words.tolist() == [[80, 17, 2000, 1]] and entry.tolist() == [1]


def test_no_entries_all_miss(router):
    tr = router.run([PACKETS[1][0]], {})
    assert ingress_steps(tr, 0) == [(L, -1, "MyIngress.drop")]


def test_unknown_table_and_action_are_one_line_errors(router):
    with pytest.raises(UserError, match="expected a table"):
        router.run([], {"nope": TE("nope", [])})
    bad = router_entries()
    bad["MyIngress.nhop_tbl"].entries[0].action = "MyIngress.deny"
    with pytest.raises(UserError, match="expected an action of table MyIngress.nhop_tbl"):
        router.run([], bad)
    bad = router_entries()
    bad["MyIngress.nhop_tbl"].entries[0].params = {}
    with pytest.raises(UserError, match="parameter 'dmac'"):
        router.run([], bad)


# ---- expressions: compiled code against a direct tree evaluator -------------

def _phv() -> Phv:
    doc = {"header_types": [{"name": "t", "fields": [["a", 8, False], ["b", 16, False], ["c", 32, False]]}],
           "headers": [{"name": "h", "header_type": "t", "metadata": False}]}
    return Phv.from_doc(doc, "x.json")


def _eval(e, env, ad):
    """Second implementation: BMv2 expression semantics on a dict."""
    t, v = e["type"], e["value"]
    if t == "field":
        return env[v[1]]
    if t == "hexstr":
        return int(v, 16)
    if t == "runtime_data":
        return ad[v]
    if t == "bool":
        return v
    op, lf, rt = v["op"], v.get("left"), v.get("right")
    r = _eval(rt, env, ad)
    if op == "~":
        return ~r
    if op == "not":
        return not r
    if op == "d2b":
        return r != 0
    if op == "b2d":
        return int(bool(r))
    if op == "?:":
        return _eval(lf, env, ad) if _eval(v["cond"], env, ad) else r
    lv = _eval(lf, env, ad)
    return {"+": lambda: lv + r, "-": lambda: lv - r, "*": lambda: lv * r, "&": lambda: lv & r, "|": lambda: lv | r,
            "^": lambda: lv ^ r, "<<": lambda: lv << r, ">>": lambda: lv >> r, "==": lambda: lv == r, "!=": lambda: lv != r,
            "<": lambda: lv < r, ">": lambda: lv > r, "<=": lambda: lv <= r, ">=": lambda: lv >= r,
            "and": lambda: bool(lv) and bool(r), "or": lambda: bool(lv) or bool(r)}[op]()


def _rand_expr(rng, depth):
    if depth == 0 or rng.random() < 0.3:
        k = rng.randrange(3)
        if k == 0:
            return {"type": "field", "value": ["h", rng.choice("abc")]}
        if k == 1:
            return {"type": "runtime_data", "value": rng.randrange(2)}
        # small values, masks that may or may not cover an operand, and negative constants
        return {"type": "hexstr", "value": hex(rng.choice([rng.randrange(0, 40), 0xFF, 0xFFFF, 0x0FF0, 0xFFFFFFFF,
                                                            (1 << 64) - 1, 7, -rng.randrange(1, 9)]))}
    op = rng.choice(["+", "-", "*", "&", "|", "^", "<<", ">>", "~", "?:", "cmp"])
    if op == "~":
        return {"type": "expression", "value": {"op": "~", "left": None, "right": _rand_expr(rng, depth - 1)}}
    if op in ("<<", ">>"):
        return {"type": "expression", "value": {"op": op, "left": _rand_expr(rng, depth - 1), "right": {"type": "hexstr", "value": hex(rng.randrange(8))}}}
    if op in ("?:", "cmp"):
        c = {"type": "expression", "value": {"op": rng.choice(["==", "!=", "<", ">", "<=", ">="]), "left": _rand_expr(rng, depth - 1), "right": _rand_expr(rng, depth - 1)}}
        if rng.random() < 0.5:
            c = {"type": "expression", "value": {"op": rng.choice(["and", "or"]), "left": c,
                                                 "right": {"type": "expression", "value": {"op": "not", "left": None, "right": {"type": "expression", "value": {"op": "d2b", "left": None, "right": _rand_expr(rng, 0)}}}}}}
        if op == "cmp":
            return {"type": "expression", "value": {"op": "b2d", "left": None, "right": c}}
        return {"type": "expression", "value": {"op": "?:", "left": _rand_expr(rng, depth - 1), "right": _rand_expr(rng, depth - 1), "cond": c}}
    return {"type": "expression", "value": {"op": op, "left": _rand_expr(rng, depth - 1), "right": _rand_expr(rng, depth - 1)}}


def test_compiled_expressions_match_tree_evaluator():
    phv = _phv()
    cg = Codegen(phv)
    rng = random.Random(11)
    dst = phv.slot[("h", "b")]
    for _ in range(1500):
        e = _rand_expr(rng, 4)
        src = cg.assign(dst, cg.expr(e))
        ns: dict = {}
        exec(f"def f(p, a):\n    {src}\n", ns)
        for _ in range(5):
            env = {"a": rng.randrange(256), "b": rng.randrange(1 << 16), "c": rng.randrange(1 << 32)}
            ad = (rng.randrange(1 << 16), rng.randrange(1 << 16))
            p = phv.template()
            for f in "abc":
                p[phv.slot[("h", f)]] = env[f]
            ns["f"](p, ad)
            # assignment truncates to the destination's 16 bits (two's complement for negatives)
            assert p[dst] == int(_eval(e, env, ad)) & 0xFFFF, e


def test_unsupported_expression_is_named():
    cg = Codegen(_phv())
    with pytest.raises(Unsupported, match="valid_union"):
        cg.expr({"type": "expression", "value": {"op": "valid_union", "left": None, "right": {"type": "header_union", "value": "u"}}})


# ---- pcap reading --------------------------------------------------------

def _write_pcap(path, pkts, ng=False):
    with open(path, "wb") as f:
        w = dpkt.pcapng.Writer(f) if ng else dpkt.pcap.Writer(f)
        for i, p in enumerate(pkts):
            w.writepkt(p, ts=1.0 + i)


@pytest.mark.parametrize("ng", [False, True])
def test_read_pcap_and_pcapng(tmp_path, ng):
    pk = [p for p, *_ in PACKETS]
    f = tmp_path / ("a.pcapng" if ng else "a.pcap")
    _write_pcap(f, pk, ng)
    assert list(read_packets(f)) == pk
    from synapse_vmt.p4.parser import read_frames

    ts = [t for t, _ in read_frames(f)]
    assert ts == pytest.approx([1.0 + i for i in range(len(pk))])


def test_truncated_pcap_names_the_packet(tmp_path):
    pk = [p for p, *_ in PACKETS[:3]]
    f = tmp_path / "a.pcap"
    _write_pcap(f, pk)
    raw = f.read_bytes()
    (tmp_path / "cut.pcap").write_bytes(raw[:-10])
    with pytest.raises(UserError, match=r"cut\.pcap: packet 3: "):
        list(read_packets(tmp_path / "cut.pcap"))
    (tmp_path / "junk.pcap").write_bytes(b"hello world, not a capture")
    with pytest.raises(UserError, match=r"junk\.pcap: "):
        list(read_packets(tmp_path / "junk.pcap"))


# ---- UPF ---------------------------------------------------------------------

N3 = "192.168.0.2"
UE = "10.250.0.7"


def gtpu(teid: int, inner: bytes) -> bytes:
    return struct.pack("!BBHI", 0x30, 0xFF, len(inner), teid) + inner


def upf_uplink(teid: int, dport: int = 80) -> bytes:
    inner = ipv4("8.8.8.8", 17, udp(40000, dport))
    inner = bytes([inner[0]]) + inner[1:12] + socket.inet_aton(UE) + inner[16:]  # src = the UE
    return eth(ipv4(N3, 17, udp(2152, 2152, gtpu(teid, inner))))


def upf_downlink(dport: int = 5000) -> bytes:
    return eth(ipv4(UE, 17, udp(443, dport)))


def upf_entries() -> dict:
    t = "PreQosPipe."
    return {
        t + "my_station": TE(t + "my_station", [E(t + "my_station", {"ethernet.dst_addr": M("exact", 0x040404040404)}, "NoAction")]),
        t + "interfaces": TE(t + "interfaces", [
            # N3 (access side): uplink, direction 1; the UE pool (core side): downlink, direction 2
            E(t + "interfaces", {"ipv4.dst_addr": M("lpm", ip(N3), prefix_len=32)}, t + "set_source_iface", {"src_iface": 1, "direction": 1, "slice_id": 0}),
            E(t + "interfaces", {"ipv4.dst_addr": M("lpm", ip("10.250.0.0"), prefix_len=16)}, t + "set_source_iface", {"src_iface": 2, "direction": 2, "slice_id": 0}),
        ]),
        t + "sessions_uplink": TE(t + "sessions_uplink", [
            E(t + "sessions_uplink", {"ipv4.dst_addr": M("exact", ip(N3)), "scalars.userMetadata.teid": M("exact", 1234)}, t + "set_session_uplink", {"session_meter_idx": 0}),
        ]),
        t + "sessions_downlink": TE(t + "sessions_downlink", [
            E(t + "sessions_downlink", {"ipv4.dst_addr": M("exact", ip(UE))}, t + "set_session_downlink", {"tunnel_peer_id": 1, "session_meter_idx": 0}),
        ]),
    }


@pytest.fixture
def upf(shared_data):
    return Program.load(shared_data / "p4" / "up4-bmv2.json")


def test_upf_uplink_and_downlink_paths(upf):
    pk = [upf_uplink(1234), upf_uplink(999), upf_downlink()]
    try:
        tr = upf.run(pk, upf_entries())
    except UserError as e:  # the session actions' parameter names are the program's
        pytest.fail(str(e))
    up, up_miss, down = (tr.path(i) for i in range(3))
    t = "PreQosPipe."
    assert up[:3] == [t + "my_station", t + "interfaces", t + "sessions_uplink"]
    assert t + "sessions_downlink" not in up
    assert tr.packet(0)[2].entry == 0 and tr.packet(0)[2].key == (ip(N3), 1234)
    assert tr.packet(1)[2].entry == -1  # unknown TEID: the default action
    assert down[:3] == [t + "my_station", t + "interfaces", t + "sessions_downlink"]
    assert t + "sessions_uplink" not in down
    assert tr.packet(2)[2].entry == 0
    assert tr.parser_rejects == {}


def test_upf_speed_smoke(upf):
    """Not a timing test (see `synapse p4 interp`): a batch of mixed packets runs and counts add up."""
    pk = [upf_uplink(1234), upf_downlink(), upf_uplink(7)] * 200
    tr = upf.run(pk, upf_entries())
    c = tr.counters()
    assert c["PreQosPipe.my_station"]["lookups"] == 600
    assert c["PreQosPipe.sessions_uplink"]["lookups"] == 400
    assert c["PreQosPipe.sessions_uplink"]["matched"] == 200
    assert c["PreQosPipe.sessions_downlink"]["matched"] == 200


# ---- with the entries reader and the CLI ----------------------------------------

def test_entries_file_gives_the_hand_checked_trace(router):
    """router-entries.txt (simple_switch_CLI) loaded by entries.py runs exactly as the stand-ins above."""
    from synapse_vmt.p4.entries import load_entries

    got = load_entries(DATA / "router-entries.txt", DATA / "router.json")
    pk = [p for p, *_ in PACKETS]
    a = router.run(pk, got, seed=5)
    b = router.run(pk, router_entries(), seed=5)
    assert a.step_table.tolist() == b.step_table.tolist()
    assert a.step_action.tolist() == b.step_action.tolist()
    assert a.step_keys == b.step_keys
    # entry indices follow each loader's match order: compare the entries themselves
    for j in range(len(a.step_table)):
        ta = a.tables[a.step_table[j]].name
        ea, eb = a.step_entry[j], b.step_entry[j]
        assert (ea < 0) == (eb < 0)
        if ea >= 0:
            assert got[ta].entries[ea].action.split(".")[-1] == router_entries()[ta].entries[eb].action.split(".")[-1]
            assert got[ta].entries[ea].params == router_entries()[ta].entries[eb].params


def test_cli_interp_json_counts(tmp_path):
    import json

    from click.testing import CliRunner

    from synapse_vmt.cli import main

    f = tmp_path / "a.pcapng"
    _write_pcap(f, [p for p, *_ in PACKETS], ng=True)
    # the interpreter's run (the default engine, Rust, evaluates hdr.u.isValid(): no fallback branch there)
    r = CliRunner().invoke(main, ["p4", "interp", str(DATA / "router.json"), "--entries", str(DATA / "router-entries.txt"),
                                  "--pcap", str(f), "--json", "--engine", "python"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.output)
    assert s["packets"] == 12 and s["dropped"] == 8
    assert s["tables"][L] == {"lookups": 9, "matched": 7, "actions": {"MyIngress.set_nhop": 7, "MyIngress.drop": 2}}
    assert s["tables"][A]["actions"] == {"MyIngress.deny": 2, "MyIngress.permit": 4}
    assert s["parser_rejects"] == {"BadIhl": 1, "NoMatch": 1, "PacketTooShort": 1, "StackOutOfBounds": 1}
    assert s["fallback_branches"] == {}  # hdr.u.isValid() is evaluated (false, as BMv2 has it)
    r = CliRunner().invoke(main, ["p4", "interp", str(DATA / "router.json"), "--entries", str(DATA / "router-entries.txt"), "--pcap", str(f),
                                  "--engine", "python"])
    assert r.exit_code == 0 and "fallback branches: none" in r.output and "not executed" not in r.output
    assert "packets out per port: 3=2, 4=2" in r.output
    r = CliRunner().invoke(main, ["p4", "interp", str(DATA / "router.json"), "--pcap", str(f), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["dropped"] == 12  # no entries: every lpm lookup misses -> drop
    steps = tmp_path / "steps.csv"
    r = CliRunner().invoke(main, ["p4", "interp", str(DATA / "router.json"), "--entries", str(DATA / "router-entries.txt"),
                                  "--pcap", str(f), "--steps", str(steps)])
    assert r.exit_code == 0, r.output
    import csv

    rows = list(csv.DictReader(steps.read_text().splitlines()))
    got = [(r["table"], int(r["entry"]) >= 0, r["action"]) for r in rows if r["packet"] == "1"][:3]
    assert got == [(L, True, "MyIngress.set_nhop"), (A, True, "MyIngress.permit"), (N, True, "MyIngress.set_dmac")]
    assert [r["key"] for r in rows if r["packet"] == "1" and r["table"] == A] == ["0x50 0x11 0x7d0 0x1"]
    assert sum(1 for r in rows if r["table"] == L) == 9


def test_cli_interp_corrupt_pcap_exits_2(tmp_path):
    from click.testing import CliRunner

    from synapse_vmt.cli import main

    f = tmp_path / "a.pcap"
    _write_pcap(f, [p for p, *_ in PACKETS[:4]])
    f.write_bytes(f.read_bytes()[:-5])
    r = CliRunner().invoke(main, ["p4", "interp", str(DATA / "router.json"), "--pcap", str(f)])
    assert r.exit_code == 2
    assert r.output.strip().count("\n") == 0 and f"{f}: packet 4: " in r.output


def test_upf_full_paths_with_entries_file(upf, shared_data):
    """tests/data/p4/upf-entries.txt: uplink is decapsulated before routing (routes_v4 keys on
    the inner destination, the ACL sees the UE as source); downlink is encapsulated towards
    tunnel peer 1 (routes_v4 keys on the peer 192.168.0.9, the ACL sees N3 as source)."""
    from synapse_vmt.p4.entries import load_entries

    ents = load_entries(DATA / "upf-entries.txt", shared_data / "p4" / "up4-bmv2.json")
    tr = upf.run([upf_uplink(1234), upf_uplink(999), upf_downlink()], ents)

    def short(i):
        return [(s.table.split(".")[-1], s.entry, s.action.split(".")[-1]) for s in tr.packet(i)]

    assert short(0) == [("my_station", 0, "NoAction"), ("interfaces", 0, "set_source_iface"),
                        ("sessions_uplink", 0, "set_session_uplink"), ("applications", -1, "set_app_id"),
                        ("terminations_uplink", 0, "uplink_term_fwd"), ("routes_v4", 0, "route"), ("acls", 0, "NoAction")]
    assert tr.packet(0)[5].key == (ip("8.8.8.8"),)
    assert tr.packet(0)[6].key[5:8] == (ip(UE), ip("8.8.8.8"), 17)
    # unknown TEID: the default do_drop ends ingress (exit) and drops
    assert short(1) == [("my_station", 0, "NoAction"), ("interfaces", 0, "set_source_iface"), ("sessions_uplink", -1, "do_drop")]
    assert tr.dropped.tolist() == [False, True, False]
    assert short(2) == [("my_station", 0, "NoAction"), ("interfaces", 1, "set_source_iface"),
                        ("sessions_downlink", 0, "set_session_downlink"), ("tunnel_peers", 0, "load_tunnel_param"),
                        ("applications", -1, "set_app_id"), ("terminations_downlink", 0, "downlink_term_fwd"),
                        ("routes_v4", 0, "route"), ("acls", 0, "NoAction")]
    assert tr.packet(2)[6].key == (ip("192.168.0.9"),)
    assert tr.packet(2)[7].key[5:7] == (ip(N3), ip("192.168.0.9"))


def _egress_variant(prims, **objects):
    import copy
    import json

    doc = json.loads((DATA / "router.json").read_text())
    doc = copy.deepcopy(doc)
    doc.update(objects)
    for a in doc["actions"]:
        if a["name"] == "MyEgress.read_color":
            a["primitives"] = prims
    # egress always goes through read_color (the conditional becomes "true")
    doc["pipelines"][1]["conditionals"][0]["expression"] = {"type": "bool", "value": True}
    return Program(doc, "variant.json")


F_ = lambda h, f: {"type": "field", "value": [h, f]}  # noqa: E731
# an extern the interpreter does not know: it writes tag, which is then synthesized
REG = {"op": "my_extern", "parameters": [F_("scalars", "tag"), {"type": "hexstr", "value": "0x0"}]}


def test_synthesized_mark_follows_assignments():
    """An unknown extern writes tag; color = tag carries the mark: color_tbl's key is drawn from its entries."""
    prog = _egress_variant([REG, {"op": "assign", "parameters": [F_("scalars", "color"), F_("scalars", "tag")]}])
    tr = prog.run([PACKETS[1][0], PACKETS[6][0]], router_entries())
    c = tr.counters()[CT]
    assert c == {"lookups": 2, "matched": 2, "actions": {"MyIngress.set_tag": 2}}
    assert tr.synthesized_fields == {"scalars.color": 2}
    assert tr.fallback_branches == {}


def test_overwritten_synthesized_field_is_computed_again():
    """tag = 2 after the unknown extern overwrites the synthesized value: color = tag = 2 is computed, not drawn."""
    two = {"type": "hexstr", "value": "0x02"}
    prog = _egress_variant([REG, {"op": "assign", "parameters": [F_("scalars", "tag"), two]},
                           {"op": "assign", "parameters": [F_("scalars", "color"), F_("scalars", "tag")]}])
    tr = prog.run([PACKETS[1][0]], router_entries())
    assert tr.counters()[CT]["matched"] == 1 and tr.step_keys[-2] == (2,)
    assert tr.synthesized_fields == {}
    # and color = tag + 1 = 3 misses: no entry for it, nothing drawn
    prog = _egress_variant([REG, {"op": "assign", "parameters": [F_("scalars", "tag"), two]},
                           {"op": "assign", "parameters": [F_("scalars", "color"), {"type": "expression", "value": {
                               "op": "+", "left": F_("scalars", "tag"), "right": {"type": "hexstr", "value": "0x1"}}}]}])
    tr = prog.run([PACKETS[1][0]], router_entries())
    assert tr.counters()[CT] == {"lookups": 1, "matched": 0, "actions": {"NoAction": 1}}


def test_meter_is_green_as_an_unconfigured_bmv2_meter():
    """execute_meter writes GREEN (0), what BMv2 gives without meter rates: computed, not synthesized."""
    meter = {"op": "execute_meter", "parameters": [{"type": "meter_array", "value": "m"}, {"type": "hexstr", "value": "0x0"}, F_("scalars", "color")]}
    prog = _egress_variant([{"op": "assign", "parameters": [F_("scalars", "color"), {"type": "hexstr", "value": "0x02"}]}, meter],
                           meter_arrays=[{"name": "m", "id": 0, "is_direct": False, "size": 4, "rate_count": 2, "type": "bytes"}])
    tr = prog.run([PACKETS[1][0]], router_entries())
    assert tr.step_keys[-2] == (0,) and tr.counters()[CT]["matched"] == 0
    assert tr.synthesized_fields == {} and "execute_meter" not in tr.unsupported


def test_conditional_on_a_synthesized_field_is_a_fallback_branch():
    """if (tag == 7) after an unknown extern wrote tag: the run cannot evaluate it, so it is a named fallback."""
    prog = _egress_variant([REG])
    doc = prog.doc
    doc["pipelines"][1]["conditionals"][0]["expression"] = {"type": "expression", "value": {
        "op": "==", "left": F_("scalars", "tag"), "right": {"type": "hexstr", "value": "0x7"}}}
    doc["pipelines"][1]["conditionals"][0]["true_next"] = "MyEgress.port_tbl"
    doc["pipelines"][1]["init_table"] = "tbl_read_color"
    doc["pipelines"][1]["tables"][0]["next_tables"] = {"MyEgress.read_color": "node_e1"}
    doc["pipelines"][1]["tables"][0]["base_default_next"] = "node_e1"
    doc["pipelines"][1]["conditionals"][0]["false_next"] = None
    prog = Program(doc, "variant2.json")
    tr = prog.run([PACKETS[1][0]] * 40, router_entries(), seed=2)
    assert tr.fallback_branches == {"node_e1 (hdr.u.isValid())": 40}
    n = tr.counters()[PT]["lookups"]
    assert 0 < n < 40  # each packet takes either branch
    # without the extern the same comparison is evaluated: tag = 82 (set_dmac), never 7
    doc["actions"] = [a if a["name"] != "MyEgress.read_color" else {**a, "primitives": []} for a in doc["actions"]]
    tr = Program(doc, "variant3.json").run([PACKETS[1][0]] * 40, router_entries(), seed=2)
    assert tr.fallback_branches == {} and tr.counters()[PT]["lookups"] == 0


def _mutants(seed, n):
    rng = random.Random(seed)
    base = [p for p, *_ in PACKETS] + [upf_uplink(1234), upf_downlink()]
    out = []
    for _ in range(n):
        b = bytearray(rng.choice(base))
        for _ in range(rng.randrange(1, 6)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        if rng.random() < 0.3:
            b = b[: rng.randrange(len(b) + 1)]
        out.append(bytes(b))
    return out + [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 80))) for _ in range(n // 10)]


def _check_against_entries_oracle(tr, ents):
    """Every lookup's entry is the one entries.py's linear oracle (TableEntries.lookup) gives for its key."""
    n = 0
    for j in range(len(tr.step_table)):
        spec = tr.tables[tr.step_table[j]]
        te = ents.get(spec.name)
        if te is None:
            assert tr.step_entry[j] == -1
            continue
        want = te.lookup(dict(zip((k.field for k in spec.key), tr.step_keys[j])))
        got = tr.step_entry[j]
        assert (want is None and got == -1) or (got >= 0 and te.entries[got] is want), (spec.name, tr.step_keys[j])
        n += 1
    return n


def test_mutated_packets_never_fail_and_match_the_entries_oracle(router):
    from synapse_vmt.p4.entries import load_entries

    ents = load_entries(DATA / "router-entries.txt", DATA / "router.json")
    tr = router.run(_mutants(1, 3000), ents, seed=1)
    assert tr.n_packets == 3300
    assert _check_against_entries_oracle(tr, ents) > 3000
    assert set(tr.parser_rejects) <= {"BadIhl", "NoMatch", "PacketTooShort", "StackOutOfBounds"}


def test_upf_mutated_packets_match_the_entries_oracle(upf, shared_data):
    from synapse_vmt.p4.entries import load_entries

    ents = load_entries(DATA / "upf-entries.txt", shared_data / "p4" / "up4-bmv2.json")
    tr = upf.run(_mutants(2, 3000), ents, seed=1)
    assert _check_against_entries_oracle(tr, ents) > 3000
    assert tr.counters()["PreQosPipe.sessions_uplink"]["matched"] > 0
    # UPF's meters, counters, clone and digest run: nothing is synthesized or guessed
    assert (tr.synthesized_fields, tr.fallback_branches, tr.unsupported) == ({}, {}, [])


def test_switch_generated_entries_match_the_entries_oracle(shared_data, tmp_path):
    """The 123-table switch program with generated entries: no failure, every lookup agrees with the oracle."""
    from click.testing import CliRunner

    from synapse_vmt.cli import main
    from synapse_vmt.p4.entries import load_entries

    prog_path = shared_data / "p4" / "switch-p416.json"
    out = tmp_path / "sw.txt"
    r = CliRunner().invoke(main, ["p4", "entries", "gen", str(prog_path), "--count", "10", "--seed", "2", "-o", str(out)])
    assert r.exit_code == 0, r.output
    ents = load_entries(out, prog_path)
    sw = Program.load(prog_path)
    tr = sw.run(_mutants(3, 400) + [upf_downlink(), PACKETS[1][0], PACKETS[6][0]], ents, seed=1)
    assert _check_against_entries_oracle(tr, ents) > 400 * 20
    # every extern of the switch runs (hashes, random, counters, meters, clones): nothing is synthesized or guessed
    assert (tr.synthesized_fields, tr.fallback_branches, tr.unsupported) == ({}, {}, [])


def test_committed_captures_are_the_tests_packets():
    """tests/data/p4/*.pcap (used by the docs' examples) hold exactly the frames built here."""
    assert list(read_packets(DATA / "router.pcap")) == [p for p, *_ in PACKETS]
    assert list(read_packets(DATA / "upf-sample.pcap")) == [upf_uplink(1234), upf_uplink(999), upf_downlink()]


@pytest.mark.parametrize("prim, before, after", [
    # P4_14-style primitives; the field h.b is 16 bits wide (results wrap)
    ({"op": "add", "parameters": [F_("h", "b"), F_("h", "a"), {"type": "hexstr", "value": "0x10"}]}, {"a": 5, "b": 0}, {"b": 21}),
    ({"op": "subtract", "parameters": [F_("h", "b"), F_("h", "a"), {"type": "hexstr", "value": "0x10"}]}, {"a": 5, "b": 0}, {"b": 0xFFF5}),
    ({"op": "bit_xor", "parameters": [F_("h", "b"), F_("h", "c"), {"type": "hexstr", "value": "0xff"}]}, {"c": 0x12345678}, {"b": 0x5687}),
    ({"op": "shift_left", "parameters": [F_("h", "b"), F_("h", "a"), {"type": "hexstr", "value": "0xc"}]}, {"a": 0x1F}, {"b": 0xF000}),
    ({"op": "add_to_field", "parameters": [F_("h", "a"), {"type": "hexstr", "value": "0x5"}]}, {"a": 254}, {"a": 3}),
    ({"op": "subtract_from_field", "parameters": [F_("h", "a"), {"type": "hexstr", "value": "0x1"}]}, {"a": 0}, {"a": 255}),
    ({"op": "modify_field", "parameters": [F_("h", "b"), {"type": "hexstr", "value": "0xabcd"}, {"type": "hexstr", "value": "0x0ff0"}]}, {"b": 0x1234}, {"b": 0x1BC4}),
    ({"op": "assign", "parameters": [F_("h", "c"), {"type": "expression", "value": {"op": "two_comp_mod", "left": {"type": "hexstr", "value": "-0x1"}, "right": {"type": "hexstr", "value": "0x8"}}}]}, {}, {"c": 0xFFFFFFFF}),
    ({"op": "remove_header", "parameters": [{"type": "header", "value": "h"}]}, {"a": 1}, {"$valid$": 0, "a": 1}),
])
def test_primitives(prim, before, after):
    phv = _phv()
    cg = Codegen(phv)
    ns: dict = {"_tcm": tcm}
    exec("def f(p, a, T):\n" + "\n".join("    " + ln for ln in cg.primitive(prim)) + "\n", ns)
    p = phv.template()
    p[phv.slot[("h", "$valid$")]] = 1
    for k, v in before.items():
        p[phv.slot[("h", k)]] = v
    ns["f"](p, (), set())
    for k, v in after.items():
        assert p[phv.slot[("h", k)]] == v, k


def test_key_fields_of_an_invalid_header_are_zero():
    """Egress removes ipv4 then color_tbl keys on ipv4.ttl: 0, not the last ttl (63)."""
    import json

    doc = json.loads((DATA / "router.json").read_text())
    for a in doc["actions"]:
        if a["name"] == "MyEgress.read_color":
            a["primitives"] = [{"op": "remove_header", "parameters": [{"type": "header", "value": "ipv4"}]}]
    doc["pipelines"][1]["conditionals"][0]["expression"] = {"type": "bool", "value": True}
    ct = doc["pipelines"][1]["tables"][1]
    ents = {k: v for k, v in router_entries().items() if k != CT}
    ct["key"] = [{"match_type": "exact", "name": "ttl", "target": ["ipv4", "ttl"], "mask": None}]
    tr = Program(doc, "v.json").run([PACKETS[1][0]], ents)
    assert tr.packet(0)[-2].table == CT and tr.packet(0)[-2].key == (0,)
    ct["key"] = [{"match_type": "exact", "name": "ttl", "target": ["ipv4", "$valid$"], "mask": None}]
    tr = Program(doc, "v.json").run([PACKETS[1][0]], ents)
    assert tr.packet(0)[-2].key == (0,)
    doc["actions"] = [a if a["name"] != "MyEgress.read_color" else {**a, "primitives": []} for a in doc["actions"]]
    ct["key"] = [{"match_type": "exact", "name": "ttl", "target": ["ipv4", "ttl"], "mask": None}]
    tr = Program(doc, "v.json").run([PACKETS[1][0]], ents)
    assert tr.packet(0)[-2].key == (63,)  # valid: the decremented ttl


def test_parser_constructs_it_cannot_run_are_named():
    import json

    doc = json.loads((DATA / "router.json").read_text())
    states = doc["parsers"][0]["parse_states"]
    # an (unconfigured, so empty) value set before ipv4's transitions: it matches nothing
    states[2]["transitions"].insert(0, {"type": "parse_vset", "value": "pvs", "mask": None, "next_state": None})
    # udp parsing uses an op the interpreter does not know: packets reaching it are rejected by that name
    states[3]["parser_ops"].append({"op": "extract_VL", "parameters": []})
    prog = Program(doc, "v.json")
    tr = prog.run([PACKETS[1][0], PACKETS[2][0]], router_entries())
    assert tr.parser_rejects == {"Unsupported:parse_udp": 1}
    assert "parse_vset pvs (empty)" in tr.unsupported
    assert any(u.startswith("parser state parse_udp") for u in tr.unsupported)
    assert ingress_steps(tr, 1) == PACKETS[2][1]  # tcp never reaches parse_udp: unchanged


@pytest.mark.parametrize("which", ["router", "upf"])
def test_frame_cache_gives_the_same_trace(which, request):
    """Repeated frames copied from the cache: the same trace as running every frame."""
    rng = random.Random(4)
    if which == "router":  # its union undeclared: a fallback branch the cache must replay as drawn
        prog, ents, base = _router_without_union(), router_entries(), [p for p, *_ in PACKETS]
    else:
        from synapse_vmt.p4.entries import load_entries

        shared = request.getfixturevalue("shared_data")
        prog = request.getfixturevalue("upf")
        ents = load_entries(DATA / "upf-entries.txt", shared / "p4" / "up4-bmv2.json")
        base = [upf_uplink(1234), upf_uplink(999), upf_downlink(), upf_downlink(6000)]
    pk = [rng.choice(base) for _ in range(600)]
    a = prog.run(pk, ents, seed=9)
    b = prog.run(pk, ents, seed=9, frame_cache=0)
    c = prog.run(pk, ents, seed=9, frame_cache=2)  # a cache that keeps starting over
    for t in (a, c):
        assert t.step_table.tolist() == b.step_table.tolist()
        assert t.step_entry.tolist() == b.step_entry.tolist()
        assert t.step_action.tolist() == b.step_action.tolist()
        assert t.step_keys == b.step_keys and t.pkt_start.tolist() == b.pkt_start.tolist()
        assert t.dropped.tolist() == b.dropped.tolist()
        assert (t.parser_rejects, t.synthesized_fields, t.fallback_branches) == (b.parser_rejects, b.synthesized_fields, b.fallback_branches)
    if which == "router":
        assert sum(b.fallback_branches.values()) > 50 and b.parser_rejects


def test_frame_cache_replays_synthesized_fields():
    prog = _egress_variant([REG, {"op": "assign", "parameters": [F_("scalars", "color"), F_("scalars", "tag")]}])
    pk = [PACKETS[1][0], PACKETS[6][0], PACKETS[11][0]] * 30
    a, b = prog.run(pk, router_entries()), prog.run(pk, router_entries(), frame_cache=0)
    assert a.synthesized_fields == b.synthesized_fields == {"scalars.color": 90}
    assert a.step_keys == b.step_keys and a.step_entry.tolist() == b.step_entry.tolist()


def test_const_entries_of_the_program_are_used(tmp_path):
    """A table with const entries in the JSON (BMv2 'entries') matches them with no entries file (CLI)."""
    import json

    from click.testing import CliRunner

    from synapse_vmt.cli import main

    doc = json.loads((DATA / "router.json").read_text())
    lpm = doc["pipelines"][0]["tables"][2]
    assert lpm["name"] == L
    lpm["entries"] = [{"match_key": [{"match_type": "lpm", "key": "0x0a000000", "prefix_length": 8}],
                       "action_entry": {"action_id": 1, "action_data": ["0x7", "0x4"]}, "priority": 1}]
    prog_path = tmp_path / "const.json"
    prog_path.write_text(json.dumps(doc))
    pcap = tmp_path / "a.pcap"
    _write_pcap(pcap, [PACKETS[2][0], PACKETS[3][0]])
    r = CliRunner().invoke(main, ["p4", "interp", str(prog_path), "--pcap", str(pcap), "--json"])
    assert r.exit_code == 0, r.output
    # 10.9.9.9 hits the const 10/8 entry (ttl 1 -> 0: dropped by the conditional); 11.0.0.1 misses
    assert json.loads(r.output)["tables"][L] == {"lookups": 2, "matched": 1, "actions": {"MyIngress.set_nhop": 1, "MyIngress.drop": 1}}


def test_malformed_programs_are_one_line_errors():
    """Random damage to router.json (a key removed, a value of the wrong type): the program
    compiles and runs, or fails with one UserError line naming the place; never another exception."""
    import copy
    import json

    base = json.loads((DATA / "router.json").read_text())

    def paths(o, pre=()):
        yield pre
        if isinstance(o, dict):
            for k, v in o.items():
                yield from paths(v, pre + (k,))
        elif isinstance(o, list):
            for i, v in enumerate(o):
                yield from paths(v, pre + (i,))

    where = [p for p in paths(base) if p]
    rng = random.Random(8)
    pk = [p for p, *_ in PACKETS]
    n_err = 0
    for _ in range(400):
        doc = copy.deepcopy(base)
        pth = rng.choice(where)
        par = doc
        for k in pth[:-1]:
            par = par[k]
        if rng.random() < 0.3:
            par.pop(pth[-1])  # dict or list
        else:
            par[pth[-1]] = rng.choice([None, 1, -5, True, "x", "0x" + "f" * 40, [], {}, [None], {"op": "?"},
                                       {"type": "field", "value": ["nope", "x"]}])
        try:
            Program(doc, "bad.json").run(pk, router_entries() if rng.random() < 0.5 else {})
        except UserError as e:
            assert "\n" not in str(e) and ": " in str(e)
            n_err += 1
    assert n_err > 100


def test_table_keys_equal_key_words(upf, shared_data):
    """The vectorised per-table word arrays equal encode_words step by step (48-bit MACs split in two words)."""
    from synapse_vmt.p4.entries import load_entries

    ents = load_entries(DATA / "upf-entries.txt", shared_data / "p4" / "up4-bmv2.json")
    tr = upf.run(_mutants(5, 300) + [upf_uplink(1234), upf_downlink()] * 5, ents)
    for ti, spec in enumerate(tr.tables):
        pkt, words, entry = tr.table_keys(spec.name)
        sel = [j for j in range(len(tr.step_table)) if tr.step_table[j] == ti]
        assert words.shape == (len(sel), spec.words)
        assert words.tolist() == [tr.key_words(j) for j in sel]
        assert pkt.tolist() == [int(np.searchsorted(tr.pkt_start, j, side="right") - 1) for j in sel]
        assert entry.tolist() == [int(tr.step_entry[j]) for j in sel]
    assert tr.table_keys("PreQosPipe.Acl.acls")[1].shape[1] == 1 + 1 + 2 + 2 + 1 + 1 + 1 + 1 + 1 + 1


def test_vectorised_match_equals_scan_and_oracle(shared_data):
    """Tables with many entries are matched on u32 words with numpy: same first match as the
    Python scan and as entries.py's linear oracle, for keys drawn to hit entries and random keys."""
    from synapse_vmt.p4.bmv2 import read_program
    from synapse_vmt.p4.entries import TableEntries, sample_key
    from synapse_vmt.p4.entrygen import gen_table
    from synapse_vmt.p4.interp import VECTOR_ROWS, _match_row, first_match

    for prog_name, tables in (("up4-bmv2.json", ["PreQosPipe.Acl.acls", "PreQosPipe.applications", "PreQosPipe.interfaces"]),
                              ("switch-p416.json", ["ipv6_racl", "ipv6_fib_lpm", "mac_acl"])):
        path = shared_data / "p4" / prog_name
        prog = read_program(path)
        interp = Program.load(path)
        for name in tables:
            t = prog.tables[name]
            spec = interp.tables[[s.name for s in interp.tables].index(name)]
            ents = gen_table(t, 300, seed=3)
            assert len(ents) > VECTOR_ROWS
            te = TableEntries(name, ents)
            rows = []
            for e in ents:
                r = [_match_row(e.matches.get(k.field), k, name) for k in spec.key]
                rows.append((tuple(x[0] for x in r), tuple(x[1] for x in r), tuple(x[2] for x in r)))
            idx = list(range(len(ents)))
            vec = first_match(spec, rows, idx, -1)
            scan = first_match(spec, rows[:VECTOR_ROWS], idx[:VECTOR_ROWS], -1)  # python path on a prefix
            rng = random.Random(1)
            keys = [sample_key(rng.choice(ents), t, rng) for _ in range(300)]
            keys += [{k.field: rng.getrandbits(k.width) for k in spec.key} for _ in range(100)]
            for kv in keys:
                k = tuple(kv[f.field] for f in spec.key)
                want = te.lookup(kv)
                got = vec(k)
                assert (got == -1 and want is None) or ents[got] is want, (name, k)
                # the scan over the first VECTOR_ROWS entries agrees where its answer lies in that prefix
                s = scan(k)
                assert s == (got if 0 <= got < VECTOR_ROWS else -1)


def test_key_words_follow_keys_layout(upf, shared_data):
    """Trace.key_words and keys.py's KeyLayout.encode give the same words for every UPF lookup."""
    from synapse_vmt.p4.bmv2 import read_bmv2
    from synapse_vmt.p4.entries import load_entries
    from synapse_vmt.p4.keys import KeyLayout

    cfg = read_bmv2(shared_data / "p4" / "up4-bmv2.json")
    layouts = {t.name: KeyLayout.from_table(t) for t in cfg.tables}
    assert [t.name for t in cfg.tables] == [t.name for t in upf.tables]
    ents = load_entries(DATA / "upf-entries.txt", shared_data / "p4" / "up4-bmv2.json")
    tr = upf.run(_mutants(6, 200) + [upf_uplink(1234), upf_downlink()], ents)
    for j in range(len(tr.step_table)):
        spec = tr.tables[tr.step_table[j]]
        values = dict(zip((k.field for k in spec.key), tr.step_keys[j]))
        assert layouts[spec.name].encode(values) == tr.key_words(j)


@pytest.mark.parametrize("damage, place", [
    # p4c flattens a metadata struct into `scalars`, yet may still name it as a header
    # (NetHCF: `assign_header(tmp, meta)`): the error names the action, the primitive and its P4 line
    (lambda d: d["actions"][2]["primitives"].append(
        {"op": "assign_header", "parameters": [{"type": "header", "value": "ethernet"}, {"type": "header", "value": "meta"}],
         "source_info": {"filename": "router.p4", "line": 41, "source_fragment": "meta"}}),
     "action MyIngress.drop, primitive 1 (assign_header, router.p4:41 'meta'): expected a known header, found 'meta'"),
    (lambda d: d["pipelines"][0]["conditionals"][0]["expression"]["value"].update(
        right={"type": "field", "value": ["meta", "x"]}),
     "pipelines[0].conditionals[0] (node_1): expected a known field, found meta.x"),
    (lambda d: d["parsers"][0]["parse_states"][0]["transition_key"][0].update(value=["meta", "x"]),
     "parsers[0].parse_states[0] (start): expected a known field, found meta.x"),
])
def test_unknown_names_say_where(damage, place):
    """A name the program does not declare is one line naming the action and primitive
    (with p4c's source line), the conditional or the parser state it came from."""
    import json

    doc = json.loads((DATA / "router.json").read_text())
    damage(doc)
    with pytest.raises(UserError) as e:
        Program(doc, "router.json")
    assert str(e.value) == f"router.json: {place}"

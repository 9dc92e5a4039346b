"""Table entries: simple_switch_CLI commands and the tutorials' runtime JSON,
validated against a program; ``synapse p4 entries gen`` / ``check``."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from synapse_vmt.cli import main
from synapse_vmt.errors import UserError
from synapse_vmt.p4.bmv2 import read_program
from synapse_vmt.p4.entries import PRIO_MAX, Match, load_entries, parse_value
from synapse_vmt.p4.entrygen import gen_table

HEADER_TYPES = [
    {"name": "eth_t", "id": 0, "fields": [["dst", 48, False], ["src", 48, False], ["type", 16, False]]},
    {"name": "ip_t", "id": 1, "fields": [["src", 32, False], ["dst", 32, False], ["proto", 8, False]]},
    {"name": "ip6_t", "id": 2, "fields": [["dst", 128, False]]},
    {"name": "l4_t", "id": 3, "fields": [["sport", 16, False], ["dport", 16, False]]},
    {"name": "meta_t", "id": 4, "fields": [["port", 9, False], ["flag", 1, False]]},
]
HEADERS = [{"name": n, "header_type": f"{t}_t"} for n, t in [("eth", "eth"), ("ipv4", "ip"), ("ipv6", "ip6"), ("l4", "l4"), ("meta", "meta")]]
ACTIONS = [
    {"name": "NoAction", "id": 0, "runtime_data": []},
    {"name": "ingress.set_port", "id": 1, "runtime_data": [{"name": "port", "bitwidth": 9}]},
    {"name": "ingress.set_nhop", "id": 2, "runtime_data": [{"name": "nhop", "bitwidth": 16}, {"name": "dmac", "bitwidth": 48}]},
    {"name": "ingress.drop", "id": 3, "runtime_data": []},
    {"name": "ingress.permit", "id": 4, "runtime_data": []},
    {"name": "ingress.deny", "id": 5, "runtime_data": [{"name": "reason", "bitwidth": 4}]},
    {"name": "NoAction", "id": 6, "runtime_data": []},  # p4c repeats names; tables list theirs by id
]


def _table(name, key, action_ids, default=None, const=False, size=64):
    return {
        "name": name,
        "key": [{"match_type": m, "name": n, "target": t, "mask": None} for m, n, t in key],
        "max_size": size,
        "action_ids": action_ids,
        "actions": [next(a["name"] for a in ACTIONS if a["id"] == i) for i in action_ids],
        "next_tables": {str(i): None for i in action_ids},
        "base_default_next": None,
        "default_entry": None
        if default is None
        else {"action_id": default[0], "action_const": const, "action_data": default[1], "action_entry_const": const},
    }


PROGRAM = {
    "header_types": HEADER_TYPES,
    "headers": HEADERS,
    "actions": ACTIONS,
    "pipelines": [
        {
            "name": "ingress",
            "init_table": "ingress.fwd",
            "tables": [
                _table("ingress.fwd", [("exact", "hdr.eth.dst", ["eth", "dst"])], [1, 0], (0, [])),
                _table("ingress.route", [("lpm", "hdr.ipv4.dst", ["ipv4", "dst"])], [2, 3], (3, []), const=True),
                _table("ingress.route6", [("lpm", "hdr.ipv6.dst", ["ipv6", "dst"])], [2, 3], (2, ["0x7", "0x1"])),
                _table(
                    "ingress.acl",
                    [
                        ("ternary", "hdr.ipv4.src", ["ipv4", "src"]),
                        ("exact", "hdr.ipv4.proto", ["ipv4", "proto"]),
                        ("range", "hdr.l4.dport", ["l4", "dport"]),
                        ("optional", "meta.flag", ["meta", "flag"]),
                    ],
                    [4, 5, 6],
                    size=4,
                ),
                {
                    **_table("ingress.ecmp", [("exact", "meta.port", ["meta", "port"])], [2, 3]),
                    "type": "indirect_ws",
                    "action_profile": "ingress.ecmp_selector",
                },
            ],
            "conditionals": [],
        }
    ],
}

CLI = """\
# a comment, then a blank line

table_add fwd set_port 00:11:22:33:44:55 => 7   # MAC key, decimal param
table_add ingress.fwd ingress.set_port 0x0a0b0c0d0e0f => 0x1ff
table_set_default fwd set_port 3
mirroring_add 5 1
table_add route set_nhop 10.0.0.0/8 => 12 aa:bb:cc:dd:ee:ff
table_add route set_nhop 10.1.2.0/24 => 13 0x1
table_add route6 drop 2001:db8::/32 =>
table_add acl permit 10.0.0.0&&&255.0.0.0 6 80->80 1&&&1 => 20
table_add acl deny 0&&&0 17 0->65535 0&&&0 => 5 10
table_add acl permit 10.1.0.0&&&0xffff0000 6 1024->65535 0 => 20
"""

JSON = {
    "target": "bmv2",
    "table_entries": [
        {"table": "ingress.fwd", "match": {"hdr.eth.dst": "00:11:22:33:44:55"}, "action_name": "ingress.set_port", "action_params": {"port": 7}},
        {"table": "ingress.fwd", "match": {"eth.dst": 0x0A0B0C0D0E0F}, "action_name": "set_port", "action_params": {"port": "0x1ff"}},
        {"table": "fwd", "default_action": True, "action_name": "set_port", "action_params": {"port": 3}},
        {"table": "route", "match": {"hdr.ipv4.dst": ["10.0.0.0", 8]}, "action_name": "set_nhop", "action_params": {"nhop": 12, "dmac": "aa:bb:cc:dd:ee:ff"}},
        {"table": "route", "match": {"hdr.ipv4.dst": ["10.1.2.0", 24]}, "action_name": "set_nhop", "action_params": {"dmac": 1, "nhop": 13}},
        {"table": "route6", "match": {"hdr.ipv6.dst": ["2001:db8::", 32]}, "action_name": "drop", "action_params": {}},
        # P4Runtime priorities: larger wins (the CLI's 20 and 10 reversed).
        {"table": "acl", "match": {"hdr.ipv4.src": ["10.0.0.0", "255.0.0.0"], "hdr.ipv4.proto": 6, "hdr.l4.dport": [80, 80], "meta.flag": 1},
         "action_name": "permit", "action_params": {}, "priority": 5},
        {"table": "acl", "match": {"hdr.ipv4.proto": 17}, "action_name": "deny", "action_params": {"reason": 5}, "priority": 15},
        {"table": "acl", "match": {"hdr.ipv4.src": ["10.1.0.0", "0xffff0000"], "hdr.ipv4.proto": 6, "hdr.l4.dport": [1024, 65535], "meta.flag": 0},
         "action_name": "permit", "action_params": {}, "priority": 5},
    ],
}


@pytest.fixture
def prog(tmp_path):
    p = tmp_path / "prog.json"
    p.write_text(json.dumps(PROGRAM))
    return p


def write(tmp_path, text, name="e.txt"):
    p = tmp_path / name
    p.write_text(text if isinstance(text, str) else json.dumps(text, indent=1))
    return p


def test_values_in_the_cli_notations():
    assert parse_value("10") == 10 and parse_value("0x1F") == 31 and parse_value("0b101") == 5 and parse_value("010") == 10
    assert parse_value("10.0.1.1") == 0x0A000101
    assert parse_value("08:00:00:00:01:11") == 0x080000000111
    assert parse_value("2001:db8::1") == int(ipaddress.IPv6Address("2001:db8::1"))
    assert parse_value(7) == 7
    for bad in ["", "1.2.3", "256.1.1.1", "zz", "-1", True, None, "1:2:3:4:5:6:7:8:9"]:
        with pytest.raises(ValueError):
            parse_value(bad)


def test_cli_file(tmp_path, prog):
    got = load_entries(write(tmp_path, CLI), prog)
    assert list(got) == ["ingress.fwd", "ingress.route", "ingress.route6", "ingress.acl", "ingress.ecmp"]
    fwd = got["ingress.fwd"]
    assert [(e.matches["eth.dst"].value, e.params) for e in fwd.entries] == [
        (0x001122334455, {"port": 7}),
        (0x0A0B0C0D0E0F, {"port": 0x1FF}),
    ]
    assert fwd.default == ("ingress.set_port", {"port": 3})
    assert fwd.entries[0].source.endswith("e.txt:3") and fwd.entries[0].priority is None
    route = got["ingress.route"]
    # lpm: longest prefix first
    assert [(e.matches["ipv4.dst"].prefix_len, e.params["nhop"]) for e in route.entries] == [(24, 13), (8, 12)]
    assert route.entries[1].matches["ipv4.dst"] == Match("lpm", 0x0A000000, 0xFF000000, 8)
    assert route.default == ("ingress.drop", {})  # the program's const default
    assert got["ingress.route6"].entries[0].matches["ipv6.dst"].mask == ((1 << 32) - 1) << 96
    assert got["ingress.route6"].default == ("ingress.set_nhop", {"nhop": 7, "dmac": 1})
    acl = got["ingress.acl"].entries
    # BMv2 CLI: priority 5 beats 20; equal priorities keep file order; stored as PRIO_MAX - p.
    assert [e.source.rsplit(":", 1)[1] for e in acl] == ["11", "10", "12"]
    assert [e.priority for e in acl] == [PRIO_MAX - 10, PRIO_MAX - 20, PRIO_MAX - 20]
    assert acl[0].matches["ipv4.src"] == Match("ternary", 0, 0)
    assert acl[0].matches["l4.dport"] == Match("range", 0, lo=0, hi=65535)
    assert acl[0].params == {"reason": 5}
    assert acl[1].matches["meta.flag"] == Match("optional", 1, 1)
    assert acl[2].matches["meta.flag"] == Match("optional", 0, 1)
    # the linear oracle: first entry in match order that matches
    pkt = {"ipv4.src": 0x0A010203, "ipv4.proto": 6, "l4.dport": 80, "meta.flag": 1}
    assert got["ingress.acl"].lookup(pkt) is acl[1]
    assert got["ingress.acl"].lookup({**pkt, "l4.dport": 8080, "meta.flag": 0}) is acl[2]
    assert got["ingress.acl"].lookup({**pkt, "proto": 1, "ipv4.proto": 1}) is None


INDIRECT = """\
table_indirect_create_member ecmp set_nhop 1 00:00:00:00:00:01
act_prof_create_member ecmp_selector set_nhop 2 00:00:00:00:00:02
table_indirect_create_member ingress.ecmp drop
act_prof_create_group ingress.ecmp_selector
table_indirect_create_group ecmp
table_indirect_add_member_to_group ecmp 1 0
act_prof_add_member_to_group ecmp_selector 0 0
table_indirect_add_member_to_group ecmp 2 1
table_indirect_add ecmp 5 => 0
table_indirect_add_with_group ecmp 6 => 0
table_indirect_add ecmp 7 => 2
table_indirect_set_default_with_group ecmp 1
act_prof_create_member ecmp_selector set_nhop 3 00:00:00:00:00:03
act_prof_add_member_to_group ecmp_selector 3 0
"""


def test_action_profile_members_and_groups(tmp_path, prog):
    got = load_entries(write(tmp_path, INDIRECT), prog)["ingress.ecmp"]
    assert [(e.matches["meta.port"].value, e.action, e.params, e.handle) for e in got.entries] == [
        (5, "ingress.set_nhop", {"nhop": 1, "dmac": 1}, 0),
        (6, "ingress.set_nhop", {"nhop": 1, "dmac": 1}, 1),  # group 0's members in handle order: 0, 1, then 3
        (7, "ingress.drop", {}, 2),
    ]
    nh = [("ingress.set_nhop", {"nhop": i, "dmac": i}) for i in (1, 2, 3)]
    # a member added to the group after the entry was written still counts, as in BMv2
    assert got.entries[1].group == (nh[0], nh[1], nh[2])
    assert got.entries[0].group is None and got.entries[2].group is None
    assert got.default == ("ingress.drop", {})
    assert got.default_group == (("ingress.drop", {}),)


def _view(got):
    """Entries as comparable tuples, priorities as ranks (the formats number them differently)."""
    out = {}
    for n, te in got.items():
        out[n] = (
            [(tuple(sorted((f, m) for f, m in e.matches.items())), e.action, tuple(sorted(e.params.items()))) for e in te.entries],
            te.default,
        )
    return out


def test_json_file_loads_the_same_entries_as_the_cli_file(tmp_path, prog):
    a = load_entries(write(tmp_path, CLI), prog)
    b = load_entries(write(tmp_path, JSON, "e.json"), prog)
    assert _view(a) == _view(b)
    assert b["ingress.acl"].entries[0].source.endswith("e.json#entry 7")


# (text, expected message part, line) -- one per kind of mistake.
CLI_ERRORS = [
    ("table_add nope set_port 1 => 1", "unknown table 'nope'", 1),
    ("\ntable_add fwd frob 1 => 1", "action 'frob' is not an action of table ingress.fwd", 2),
    ("table_add fwd drop 1 =>", "action 'drop' is not an action of table ingress.fwd", 1),
    ("table_add fwd set_port 1 => 1 2", "takes 1 parameters (port:9), found 2", 1),
    ("table_add fwd set_port 1 =>", "takes 1 parameters (port:9), found 0", 1),
    ("table_add fwd set_port 1 2 => 1", "has 1 key fields (eth.dst:exact), found 2", 1),
    ("table_add fwd set_port 1 1", "expected '=>'", 1),
    ("table_add fwd set_port 0x1000000000000 => 1", "does not fit in 48 bits", 1),
    ("table_add fwd set_port 1 => 512", "parameter port of ingress.set_port: value 512 does not fit in 9 bits", 1),
    ("table_add route set_nhop 10.0.0.0/33 => 1 1", "prefix length in 0..32", 1),
    ("table_add route set_nhop 10.0.0.x/8 => 1 1", "expected a number", 1),
    ("table_add acl permit 1&&&1 6 80->80 1 =>", "expected a priority", 1),
    ("table_add acl permit 1&&&1 6 90->80 1 => 3", "LO <= HI", 1),
    ("table_add acl permit 1&&&1 6 80 1&&&0x1 => 3", None, None),  # a bare range value is LO=HI: fine
    ("table_add acl permit 1&&&1 6 80->80 1&&&3 => 3", "does not fit in 1 bits", 1),
    ("table_add route drop 10.0.0.0/8 => 4", "takes 0 parameters", 1),
    ("table_add fwd set_port 5 => 1\n# again\ntable_add fwd set_port 0x5 => 2", "duplicate key in table ingress.fwd (first written at", 3),
    ("table_set_default route drop", "default action of table ingress.route is const", 1),
    ("\n".join(f"table_add acl permit 0&&&0 6 {i}->{i} 0 => {i}" for i in range(5)), "table ingress.acl is full (max_size 4)", 5),
    ("table_delete fwd 0", "table_delete is not supported here", 1),
    ("tabel_add fwd set_port 1 => 1", "unknown command 'tabel_add'", 1),
    ("table_indirect_create_member fwd set_port 1", "table ingress.fwd is not an indirect table", 1),
    ("table_add ecmp drop 1 =>", "table_add on table ingress.ecmp, an indirect table (action profile ingress.ecmp_selector): "
     "simple_switch_CLI refuses it (WRONG_TABLE_TYPE)", 1),
    ("table_set_default ecmp drop", "refuses it (WRONG_TABLE_TYPE)", 1),
    ("act_prof_create_member ecmp_selector drop\nact_prof_create_group ecmp_selector\n"
     "act_prof_add_member_to_group ecmp_selector 0 0\nact_prof_add_member_to_group ecmp_selector 0 0",
     "member 0 is already in group 0", 4),
    ("mc_node_associate 1 0", "expected a multicast group created with mc_mgrp_create, found 1", 1),
    ("mc_mgrp_create 1\nmc_node_associate 1 0", "expected a node handle created with mc_node_create, found 0", 2),
    ("mirroring_add 40000 1", "mirror id in 0..32767", 1),
    ("table_indirect_create_member ecmp drop\ntable_indirect_add ecmp 1 => 1", "member handle of action profile ingress.ecmp_selector (0..0), found '1'", 2),
    ("act_prof_create_group ecmp_selector\ntable_indirect_add_with_group ecmp 1 => 0", "group 0 of action profile ingress.ecmp_selector has no members", 2),
    ("act_prof_create_member nope drop", "unknown action profile 'nope'", 1),
    ("table_indirect_create_member ecmp set_port 1", "not an action of table ingress.ecmp", 1),
]


@pytest.mark.parametrize("text,msg,line", CLI_ERRORS)
def test_cli_errors_name_file_and_line(tmp_path, prog, text, msg, line):
    p = write(tmp_path, text)
    if msg is None:
        load_entries(p, prog)
        return
    with pytest.raises(UserError) as ei:
        load_entries(p, prog)
    s = str(ei.value)
    assert s.startswith(f"{p}:{line}: ") and msg in s and "\n" not in s
    r = CliRunner().invoke(main, ["p4", "entries", "check", str(prog), str(p)])
    assert r.exit_code == 2 and f"{p}:{line}: " in r.output


def _j(**kw):
    e = {"table": "ingress.fwd", "match": {"hdr.eth.dst": 1}, "action_name": "set_port", "action_params": {"port": 1}}
    e.update(kw)
    return e


ACL = {"table": "acl", "match": {"hdr.ipv4.proto": 6}, "action_name": "permit", "action_params": {}}
JSON_ERRORS = [
    ([_j(table="nope")], "unknown table 'nope'", 0),
    ([_j(), _j(match={"hdr.eth.src": 1})], "has no key field 'hdr.eth.src' (its fields: hdr.eth.dst)", 1),
    ([_j(action_name="frob")], "action 'frob' is not an action", 0),
    ([_j(action_params={"port": 1, "x": 2})], "has no parameter 'x'", 0),
    ([_j(action_params={})], "takes 1 parameters, missing port", 0),
    ([_j(match={"hdr.eth.dst": "1.2.3.4.5"})], "expected a number", 0),
    ([_j(action_params={"port": 600})], "does not fit in 9 bits", 0),
    ([_j(match={})], "missing exact field 'hdr.eth.dst'", 0),
    ([_j(match={"hdr.eth.dst": [1, 2]})], "expected a single value", 0),
    ([ACL], "expected a priority", 0),
    ([{**ACL, "priority": 0}], "priority in 1..", 0),
    ([{**ACL, "match": {"hdr.ipv4.proto": 6, "hdr.l4.dport": [1, 2, 3]}, "priority": 1}], "expected [lo, hi]", 0),
    ([_j(), _j(action_params={"port": 2})], "duplicate key in table ingress.fwd", 1),
    ([_j(priority=3)], "takes no priority", 0),
    ([_j(extra=1)], "unknown keys ['extra']", 0),
]


@pytest.mark.parametrize("entries,msg,idx", JSON_ERRORS)
def test_json_errors_name_file_and_entry(tmp_path, prog, entries, msg, idx):
    p = write(tmp_path, {"table_entries": entries}, "e.json")
    with pytest.raises(UserError) as ei:
        load_entries(p, prog)
    s = str(ei.value)
    assert s.startswith(f"{p}: entry {idx}: ") and msg in s and "\n" not in s
    r = CliRunner().invoke(main, ["p4", "entries", "check", str(prog), str(p)])
    assert r.exit_code == 2 and f"{p}: entry {idx}: " in r.output


def test_bad_json_and_bad_shape(tmp_path, prog):
    with pytest.raises(UserError, match=r"e\.json:2: not valid JSON"):
        load_entries(write(tmp_path, '{"table_entries": [\n oops]}', "e.json"), prog)
    with pytest.raises(UserError, match='a list "table_entries"'):
        load_entries(write(tmp_path, '{"entries": []}', "e.json"), prog)


def test_check_process_exit_2(tmp_path, prog):
    p = write(tmp_path, "table_add nope x 1 => 1")
    r = subprocess.run([sys.executable, "-m", "synapse_vmt.cli", "p4", "entries", "check", str(prog), str(p)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and f"{p}:1: unknown table" in r.stderr


def test_gen_small_program_round_trip(tmp_path, prog):
    out = tmp_path / "gen.txt"
    r = CliRunner().invoke(main, ["p4", "entries", "gen", str(prog), "--count", "50", "--seed", "3", "-o", str(out)])
    assert r.exit_code == 0, r.output
    got = load_entries(out, prog)
    p = read_program(prog)
    for name, te in got.items():
        want = gen_table(p.tables[name], 50, 3)
        # what was generated is what loads back, in the same match order
        assert [(e.matches, e.action, e.params, e.priority) for e in te.entries] == [
            (e.matches, e.action, e.params, e.priority) for e in want
        ]
    assert len(got["ingress.acl"].entries) == 4  # max_size
    assert len(got["ingress.fwd"].entries) == 50
    # same seed, same file; another seed, another file
    again = tmp_path / "again.txt"
    CliRunner().invoke(main, ["p4", "entries", "gen", str(prog), "--count", "50", "--seed", "3", "-o", str(again)])
    assert again.read_text() == out.read_text()
    other = tmp_path / "other.txt"
    CliRunner().invoke(main, ["p4", "entries", "gen", str(prog), "--table", "fwd", "--count", "50", "--seed", "4", "-o", str(other)])
    assert other.read_text() != out.read_text() and "ingress.route" not in other.read_text()


@pytest.mark.parametrize("name", ["up4-bmv2.json", "switch-p416.json"])
def test_gen_populates_every_table_of_the_real_programs(shared_data, tmp_path, name):
    path = shared_data / "p4" / name
    prog = read_program(path)
    out = tmp_path / "e.txt"
    r = CliRunner().invoke(main, ["p4", "entries", "gen", str(path), "--count", "64", "--seed", "1", "-o", str(out)])
    assert r.exit_code == 0, r.output
    got = load_entries(out, prog)
    assert set(got) == set(prog.tables)
    for n, te in got.items():
        t = prog.tables[n]
        assert 0 < len(te.entries) <= min(64, t.info.max_size), n
        assert len({e.key() for e in te.entries}) == len(te.entries)
        for e in te.entries:
            assert t.action(e.action) is not None
    r = CliRunner().invoke(main, ["p4", "entries", "check", str(path), str(out)])
    assert r.exit_code == 0 and f"in {len(prog.tables)} of {len(prog.tables)} tables" in r.output


def test_docs_cli_example_loads_for_upf(shared_data, tmp_path):
    """The simple_switch_CLI example of docs/reference/file-formats.md loads as the page says."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "reference" / "file-formats.md").read_text()
    block = text.split("# for the UPF program (builtin:up4)\n", 1)[1].split("```", 1)[0]
    got = load_entries(write(tmp_path, block), shared_data / "p4" / "up4-bmv2.json")
    app = got["PreQosPipe.applications"].entries[0]
    assert app.params == {"app_id": 7} and app.priority == PRIO_MAX - 10
    assert app.matches["scalars.userMetadata.inet_l4_port"] == Match("range", 80, lo=80, hi=80)
    assert app.matches["scalars.userMetadata.inet_addr"] == Match("lpm", 0x0A000000, 0xFF000000, 8)
    assert got["PreQosPipe.sessions_downlink"].entries[0].params == {"tunnel_peer_id": 3, "session_meter_idx": 42}
    assert got["PreQosPipe.tunnel_peers"].default == ("NoAction", {})


def _spec(key, actions=(2, 3), size=100000, kind="simple"):
    """A TableSpec of the test program's headers with the given key."""
    doc = {**PROGRAM, "pipelines": [{"name": "ingress", "init_table": "t", "conditionals": [],
                                     "tables": [_table("t", key, list(actions), size=size)]}]}
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "p.json"
        p.write_text(json.dumps(doc))
        return read_program(p).tables["t"]


def _share(xs, v):
    return sum(1 for x in xs if x == v) / len(xs)


def test_gen_lpm_prefix_mix_follows_the_bgp_table():
    from synapse_vmt.p4.entrygen import BGP_V4, BGP_V6

    v4 = gen_table(_spec([("lpm", "d", ["ipv4", "dst"])]), 4000, 1)
    lens = [e.matches["ipv4.dst"].prefix_len for e in v4]
    assert len(v4) == 4000
    for L in (24, 22, 23, 16):
        assert abs(_share(lens, L) - BGP_V4[L] / sum(BGP_V4.values())) < 0.03, L
    assert max(lens) == 24 and lens == sorted(lens, reverse=True)  # match order: longest first
    v6 = gen_table(_spec([("lpm", "d", ["ipv6", "dst"])]), 4000, 1)
    lens6 = [e.matches["ipv6.dst"].prefix_len for e in v6]
    for L in (48, 32, 64):
        assert abs(_share(lens6, L) - BGP_V6[L] / sum(BGP_V6.values())) < 0.03, L
    for e in v4 + v6:  # no bits past the prefix
        m = next(iter(e.matches.values()))
        assert m.value & ~m.mask == 0


def test_gen_ternary_and_range_in_classbench_manner():
    from synapse_vmt.p4.entrygen import DPORT_MIX, SPORT_MIX

    t = _spec([("ternary", "src", ["ipv4", "src"]), ("ternary", "proto", ["ipv4", "proto"]),
               ("range", "sport", ["l4", "sport"]), ("range", "dport", ["l4", "dport"])], actions=(4, 5))
    es = gen_table(t, 3000, 2)
    assert len(es) == 3000
    prios = [e.priority for e in es]
    assert len(set(prios)) == len(prios) and prios == sorted(prios, reverse=True)
    for e in es:
        m = e.matches["ipv4.src"]
        assert m.mask == 0 or m.mask >> (32 - bin(m.mask).count("1")) == (1 << bin(m.mask).count("1")) - 1  # a prefix mask
    protos = [e.matches["ipv4.proto"] for e in es]
    assert {p.value for p in protos if p.mask} <= {1, 6, 17}
    assert abs(_share([p.value for p in protos if p.mask], 6) - 0.87) < 0.04

    def cls(m):
        if (m.lo, m.hi) == (0, 65535):
            return "WC"
        if m.lo == m.hi:
            return "EM"
        return {(1024, 65535): "HI", (0, 1023): "LO"}.get((m.lo, m.hi), "AR")

    # The port classes on a table whose exact host field keeps entries distinct
    # (above, dropping repeated rules thins the commonest combinations).
    ports = gen_table(_spec([("exact", "dst", ["ipv4", "dst"]), ("range", "sport", ["l4", "sport"]),
                             ("range", "dport", ["l4", "dport"])], actions=(4, 5)), 3000, 2)
    for f, mix in (("l4.sport", SPORT_MIX), ("l4.dport", DPORT_MIX)):
        c = [cls(e.matches[f]) for e in ports]
        for name, share in zip(("WC", "HI", "LO", "AR", "EM"), mix):
            assert abs(_share(c, name) - share) < 0.04, (f, name)
    # specific entries come first: the first tenth matches more bits than the last tenth
    bits = [sum(bin(m.mask or 0).count("1") for m in e.matches.values() if m.kind == "ternary") for e in es]
    assert sum(bits[:300]) > sum(bits[-300:])


def test_gen_respects_max_size_and_key_space_and_is_deterministic():
    small = _spec([("exact", "flag", ["meta", "flag"])])
    assert sorted(e.matches["meta.flag"].value for e in gen_table(small, 10, 1)) == [0, 1]
    capped = _spec([("exact", "dst", ["eth", "dst"])], size=7)
    assert len(gen_table(capped, 100, 1)) == 7
    ports = _spec([("exact", "port", ["meta", "port"]), ("exact", "flag", ["meta", "flag"])])
    es = gen_table(ports, 5000, 1)
    assert len(es) == 1024 and len({e.key() for e in es}) == 1024  # 10 bits of key: all of them
    a = gen_table(_spec([("lpm", "d", ["ipv4", "dst"])]), 100, 9)
    b = gen_table(_spec([("lpm", "d", ["ipv4", "dst"])]), 100, 9)
    c = gen_table(_spec([("lpm", "d", ["ipv4", "dst"])]), 100, 10)
    assert [(e.matches, e.action, e.params) for e in a] == [(e.matches, e.action, e.params) for e in b]
    assert [e.matches for e in a] != [e.matches for e in c]


def test_gen_one_table_gives_the_lines_of_the_full_run(tmp_path, prog):
    full, one = tmp_path / "full.txt", tmp_path / "one.txt"
    CliRunner().invoke(main, ["p4", "entries", "gen", str(prog), "--count", "20", "--seed", "5", "-o", str(full)])
    CliRunner().invoke(main, ["p4", "entries", "gen", str(prog), "--table", "route", "--count", "20", "--seed", "5", "-o", str(one)])
    pick = [ln for ln in full.read_text().splitlines() if ln.startswith("table_add ingress.route ")]
    assert pick and pick == [ln for ln in one.read_text().splitlines() if ln.startswith("table_add")]


def test_const_entries_of_the_program(tmp_path):
    import copy

    doc = copy.deepcopy(PROGRAM)
    acl = doc["pipelines"][0]["tables"][3]
    assert acl["name"] == "ingress.acl"
    acl["entries"] = [
        {"match_key": [{"match_type": "ternary", "key": "0x0a000000", "mask": "0xff000000"}, {"match_type": "exact", "key": "0x06"},
                       {"match_type": "range", "start": "0x0050", "end": "0x0050"}, {"match_type": "optional", "key": "0x01", "mask": "0x01"}],
         "action_entry": {"action_id": 5, "action_data": ["0x3"]}, "priority": 2},
        {"match_key": [{"match_type": "ternary", "key": "0x00000000", "mask": "0x00000000"}, {"match_type": "exact", "key": "0x11"},
                       {"match_type": "range", "start": "0x0000", "end": "0xffff"}, {"match_type": "optional", "key": "0x00", "mask": "0x00"}],
         "action_entry": {"action_id": 4, "action_data": []}, "priority": 1},
    ]
    p = write(tmp_path, doc, "prog.json")
    got = load_entries(write(tmp_path, "table_add fwd set_port 1 => 1"), p)["ingress.acl"].entries
    # BMv2: priority 1 beats 2
    assert [(e.action, e.params) for e in got] == [("ingress.permit", {}), ("ingress.deny", {"reason": 3})]
    assert got[1].matches == {"ipv4.src": Match("ternary", 0x0A000000, 0xFF000000), "ipv4.proto": Match("exact", 6),
                              "l4.dport": Match("range", 80, lo=80, hi=80), "meta.flag": Match("optional", 1, 1)}
    assert got[0].source == f"{p}: table ingress.acl entries[1]"
    assert gen_table(read_program(p).tables["ingress.acl"], 10, 1) == []
    e = write(tmp_path, "table_add acl permit 0&&&0 6 1->1 0 => 1")
    with pytest.raises(UserError, match=rf"^{e}:1: table ingress.acl has const entries"):
        load_entries(e, p)
    acl["entries"][0]["action_entry"]["action_data"] = []
    p = write(tmp_path, doc, "prog.json")
    with pytest.raises(UserError, match=r"table ingress.acl entries\[0\]: action ingress.deny .* takes 1 parameters"):
        load_entries(e, p)


@pytest.mark.parametrize("name", ["up4-bmv2.json", "switch-p416.json"])
def test_keys_sampled_from_entries_hit_them(shared_data, name):
    import random

    from synapse_vmt.p4.entries import sample_key

    prog = read_program(shared_data / "p4" / name)
    rng = random.Random(1)
    for t in prog.tables.values():
        es = gen_table(t, 30, 1)
        for e in es:
            k = sample_key(e, t, rng)
            assert e.matches_key(k), (t.name, e)
            assert all(v >> kf.width == 0 for (kf, _), v in zip(t.match_fields, k.values()))


def test_gen_entries_on_an_invalid_header_match_its_fields_as_zero():
    t = _spec([("exact", "v", ["ipv4", "$valid$"]), ("exact", "d", ["ipv4", "dst"]), ("ternary", "s", ["ipv4", "src"])])
    es = gen_table(t, 200, 1)
    invalid = [e for e in es if e.matches["ipv4.$valid$"].value == 0]
    assert invalid and len(invalid) < len(es)
    for e in invalid:
        assert e.matches["ipv4.dst"] == Match("exact", 0) and e.matches["ipv4.src"].mask == 0
    assert any(e.matches["ipv4.dst"].value != 0 for e in es if e not in invalid)


@pytest.mark.parametrize("name", ["up4-bmv2.json", "switch-p416.json"])
def test_gen_json_loads_the_same_entries_as_gen_cli(shared_data, tmp_path, name):
    path = shared_data / "p4" / name
    a, b = tmp_path / "e.txt", tmp_path / "e.json"
    for out, fmt in ((a, "cli"), (b, "json")):
        r = CliRunner().invoke(main, ["p4", "entries", "gen", str(path), "--count", "40", "--seed", "2", "--format", fmt, "-o", str(out)])
        assert r.exit_code == 0, r.output
    prog = read_program(path)
    x, y = load_entries(a, prog), load_entries(b, prog)
    for n in prog.tables:
        assert [(e.matches, e.action, e.params, e.priority) for e in x[n].entries] == [
            (e.matches, e.action, e.params, e.priority) for e in y[n].entries
        ], n


def test_gen_tables_with_the_same_key_name_share_hosts():
    a = gen_table(_spec([("exact", "ue_addr", ["ipv4", "dst"])]), 200, 1)
    # another field under the same P4Runtime name (as UPF's sessions and terminations tables)
    b = gen_table(_spec([("exact", "ue_addr", ["ipv4", "src"]), ("exact", "p", ["ipv4", "proto"])]), 200, 1)
    c = gen_table(_spec([("exact", "n3_addr", ["ipv4", "dst"])]), 200, 1)
    da, db, dc = ({e.matches[f].value for e in x} for x, f in ((a, "ipv4.dst"), (b, "ipv4.src"), (c, "ipv4.dst")))
    assert min(da) > 1 << 24 and min(dc) > 1 << 24  # addresses, not small ids
    assert len(da & db) / len(da) > 0.3  # about half: both draw from one population of 2 * 200 + 16
    assert len(da & dc) / len(da) < 0.05  # another key name, another population


def test_mangled_files_are_one_line_errors_never_tracebacks(tmp_path, prog):
    """Random token swaps in the CLI file and random values in the JSON file:
    each load succeeds or raises a one-line UserError."""
    import random

    rng = random.Random(0)
    toks = CLI.split() + ["=>", "&&&", "->", "/", "0x", "::", "1.2.3.4", "-1", "9" * 30, "#", "a/b", "1->", "&&&1", "0b2"]
    vals = [None, True, -1, "x", [], {}, [1], [1, 2, 3], "1.2.3.4", 2**200, 1.5, {"a": 1}]
    p = prog
    errors = 0
    for i in range(600):
        if i % 2:
            lines = CLI.splitlines()
            j = rng.randrange(len(lines))
            t = lines[j].split() or ["x"]
            t[rng.randrange(len(t))] = rng.choice(toks)
            lines[j] = " ".join(t)
            f = write(tmp_path, "\n".join(lines))
        else:
            doc = json.loads(json.dumps(JSON))
            e = rng.choice(doc["table_entries"])
            k = rng.choice(["table", "match", "action_name", "action_params", "priority", "default_action"])
            inner = e.get(k) if k in ("match", "action_params") else None
            if inner and rng.random() < 0.7:
                inner[rng.choice(list(inner))] = rng.choice(vals)
            else:
                e[k] = rng.choice(vals)
            f = write(tmp_path, doc, "e.json")
        try:
            load_entries(f, p)
        except UserError as ex:
            errors += 1
            assert "\n" not in str(ex) and str(ex).startswith(str(f))
    assert errors > 200  # most mangled files are wrong


def test_json_action_profile_members_and_groups_as_p4runtime_writes_them(tmp_path, prog):
    nh = lambda i: {"nhop": i, "dmac": f"00:00:00:00:00:0{i}"}  # noqa: E731
    doc = {
        "action_profile_members": [
            {"action_profile": "ecmp_selector", "member_id": 30, "action_name": "set_nhop", "action_params": nh(1)},
            {"action_profile": "ecmp_selector", "member_id": 10, "action_name": "set_nhop", "action_params": nh(2)},
            {"action_profile": "ecmp_selector", "member_id": 20, "action_name": "drop", "action_params": {}},
        ],
        "action_profile_groups": [{"action_profile": "ecmp_selector", "group_id": 7, "members": [20, 30]}],
        "table_entries": [
            {"table": "ecmp", "match": {"meta.port": 5}, "member_id": 10},
            {"table": "ecmp", "match": {"meta.port": 6}, "group_id": 7},
            {"table": "ecmp", "default_action": True, "group_id": 7},
        ],
    }
    got = load_entries(write(tmp_path, json.dumps(doc), "e.json"), prog)["ingress.ecmp"]
    assert [(e.action, e.params, e.group) for e in got.entries] == [
        ("ingress.set_nhop", {"nhop": 2, "dmac": 2}, None),
        # a group's members in the order they were written (BMv2's member handles): 30 before 20
        ("ingress.set_nhop", {"nhop": 1, "dmac": 1}, (("ingress.set_nhop", {"nhop": 1, "dmac": 1}), ("ingress.drop", {}))),
    ]
    assert got.default_group == (("ingress.set_nhop", {"nhop": 1, "dmac": 1}), ("ingress.drop", {}))
    bad = [
        ({"table_entries": [{"table": "ecmp", "match": {"meta.port": 5}, "action_name": "drop"}]}, "expected \"member_id\" or \"group_id\""),
        ({"table_entries": [{"table": "ecmp", "match": {"meta.port": 5}, "member_id": 1}]}, "expected a member_id of action profile"),
        ({"table_entries": [{"table": "fwd", "match": {"eth.dst": 1}, "member_id": 1}]}, "has no action profile"),
        ({"action_profile_groups": [{"action_profile": "ecmp_selector", "group_id": 1, "members": [4]}], "table_entries": []},
         "a non-empty list of distinct member_ids"),
    ]
    for d, msg in bad:
        with pytest.raises(UserError, match=msg):
            load_entries(write(tmp_path, json.dumps(d), "b.json"), prog)


def test_cli_sliced_keys_are_read_at_the_full_fields_width(tmp_path):
    """simple_switch_CLI reads a match on ipv4.srcAddr[31:24] as a 32-bit value and mask ANDed with 0xff000000."""
    t = _table("t", [("ternary", "ipv4.src[31:24]", ["ipv4", "src"])], [0])
    t["key"][0]["mask"] = "0xff000000"
    doc = {**PROGRAM, "pipelines": [{"name": "ingress", "init_table": "t", "conditionals": [], "tables": [t]}]}
    p = tmp_path / "p.json"
    p.write_text(json.dumps(doc))
    prog = read_program(p)
    got = load_entries(write(tmp_path, "table_add t NoAction 0x0b000000&&&0xff000000 => 1\n"
                                       "table_add t NoAction 11.2.3.4&&&255.0.0.0 => 2\n"), prog)
    assert [(e.matches["ipv4.src"].value, e.matches["ipv4.src"].mask) for e in got["t"].entries] == [(11, 0xFF), (11, 0xFF)]
    assert got.warnings == [f"{tmp_path / 'e.txt'}:2: field ipv4.src: bits outside the key's slice 0xff000000 are ignored, "
                            "as simple_switch_CLI does: it reads values and masks at the full field's 32 bits "
                            "(a slice value v is written v << 24)"]
    # the slice-width form BMv2 reads as bits below the slice: a wildcard, with a warning
    got = load_entries(write(tmp_path, "table_add t NoAction 11&&&0xff => 1\n"), prog)
    assert (got["t"].entries[0].matches["ipv4.src"].value, got["t"].entries[0].matches["ipv4.src"].mask) == (0, 0)
    assert len(got.warnings) == 1
    # entries gen writes the full-width form, which loads back to the same slice match
    from synapse_vmt.p4.entries import format_cli
    line = format_cli(prog.tables["t"], load_entries(write(tmp_path, "table_add t NoAction 0x0b000000&&&0xff000000 => 1\n"),
                                                      prog)["t"].entries)[0]
    assert line == "table_add t NoAction 11.0.0.0&&&0xff000000 => 1"


def test_blank_lines_are_warned_about_as_simple_switch_cli_repeats_the_command(tmp_path, prog):
    got = load_entries(write(tmp_path, "# members\n\nact_prof_create_member ecmp_selector drop\n\n   \n"
                                       "table_indirect_add ecmp 5 => 0\n"), prog)
    assert got.warnings == [
        f"{tmp_path / 'e.txt'}:4: blank line: simple_switch_CLI runs the previous command again here "
        "(act_prof_create_member ecmp_selector drop, line 3); Synapse skips it",
        f"{tmp_path / 'e.txt'}:5: blank line: simple_switch_CLI runs the previous command again here "
        "(act_prof_create_member ecmp_selector drop, line 3); Synapse skips it",
    ]
    assert len(got["ingress.ecmp"].entries) == 1


def test_switch_configuration_commands(tmp_path):
    from p4stateful import program

    doc = program()
    doc["calculations"][0]["algo"] = "crc16_custom"
    p = tmp_path / "s.json"
    p.write_text(json.dumps(doc))
    got = load_entries(write(tmp_path, "mirroring_add 5 9\nmirroring_add_mc 5 3\nmc_mgrp_create 3\nmc_node_create 1 7 2 | \n"
                                       "mc_node_create 2 4\nmc_node_associate 3 1\nmc_node_associate 3 0\n"
                                       "meter_array_set_rates flow_meter 0.5:10 1:20\nmeter_set_rates flow_meter 3 0.1:1 0.2:2\n"
                                       "register_write flow_count 2 77\nset_crc16_parameters calc_flow 0x1021 0xffff 0 false false\n"
                                       "set_queue_depth 64\nregister_read flow_count 2\n"), p)
    sw = got.switch
    assert sw.mirroring == {5: (9, 3)}
    assert sw.mc_groups == {3: [(4, 2), (2, 1), (7, 1)]}
    assert sw.meter_rates == {"flow_meter": {None: [(0.5, 10), (1.0, 20)], 3: [(0.1, 1), (0.2, 2)]}}
    assert sw.registers == {"flow_count": {2: 77}}
    assert sw.crc_params["calc_flow"].poly == 0x1021 and not sw.crc_params["calc_flow"].refin
    for text, msg in [("meter_set_rates flow_meter 0 2:1 1:1", "smallest first"),
                      ("meter_set_rates flow_meter 64 1:1 2:1", "index of meter flow_meter in 0..63"),
                      ("meter_set_rates flow_meter 0 1:1", "expected 2 rates"),
                      ("register_write flow_count 1 0x100000000", "does not fit in register flow_count's 32 bits"),
                      ("set_crc16_parameters calc_cksum 1 2 3 true true", "expected a crc16_custom calculation"),
                      ("mc_node_create 1 2 | 3", "LAG members are not modelled")]:
        with pytest.raises(UserError, match=msg):
            load_entries(write(tmp_path, text + "\n"), p)

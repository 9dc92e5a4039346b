"""scripts/bmv2_goldens.py's reading of simple_switch's log and simple_switch_CLI's answers, on a
real log excerpt (tests/data/p4/bmv2-log-excerpt.txt: packets of three recorded goldens, cut from
simple_switch's own log) whose counts are worked out by hand in the comments; CI has no BMv2, so
this is the part of the recording that CI can check."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bmv2_goldens", ROOT / "scripts" / "bmv2_goldens.py")
bg = importlib.util.module_from_spec(_spec)
sys.modules["bmv2_goldens"] = bg  # dataclasses look their module up there
_spec.loader.exec_module(bg)

EXCERPT = ROOT / "tests" / "data" / "p4" / "bmv2-log-excerpt.txt"


def test_log_excerpt_by_hand():
    inst, other = bg.parse_log(EXCERPT)
    # router.json packets 0, 5, 9; heavyhitter.json packets 130 and 147 with their clones (copy 1);
    # switch-p416.json packet 500, dropped for its queue priority
    assert sorted(inst) == [(0, 0), (5, 0), (9, 0), (130, 0), (130, 1), (147, 0), (147, 1), (500, 0)]
    # router 0: /16 route, then acl entry 1 (deny: mark_to_drop + exit)
    assert inst[(0, 0)].visits == [["MyIngress.ipv4_lpm", 1, "MyIngress.set_nhop"], ["MyIngress.acl", 1, "MyIngress.deny"]]
    assert inst[(0, 0)].fate == "drop-ingress"
    # router 5: TCP under a VLAN tag: /8 route, the acl misses (default permit), egress port 4 misses port_tbl
    assert inst[(5, 0)].visits == [["MyIngress.ipv4_lpm", 0, "MyIngress.set_nhop"], ["MyIngress.acl", -1, "MyIngress.permit"],
                                   ["MyEgress.port_tbl", -1, "NoAction"]]
    assert (inst[(5, 0)].egress_port, inst[(5, 0)].fate) == (4, "tx:4")
    # router 9: cut inside IPv4: PacketTooShort, no ipv4 -> the keyless drop table
    assert (inst[(9, 0)].parser_error, inst[(9, 0)].visits) == ("PacketTooShort", [["tbl_drop", -1, "MyIngress.drop"]])
    # heavyhitter 130: a heavy flow, green: cloned (I2E) to port 7, itself to port 1; the copy runs egress only
    assert inst[(130, 0)].events == ["clone_i2e"] and inst[(130, 0)].fate == "tx:1"
    assert [v[0] for v in inst[(130, 1)].visits] == ["tbl_mon_mark", "MyEgress.port_stats"] and inst[(130, 1)].fate == "tx:7"
    # heavyhitter 147: red: policed (drop, exit) after the clone; the copy still leaves on port 7
    assert [v[0] for v in inst[(147, 0)].visits][-2:] == ["tbl_police", "tbl_act"] and inst[(147, 0)].fate == "drop-ingress"
    assert inst[(147, 1)].fate == "tx:7"
    # switch 500: queued for egress with a priority the single queue does not have: no egress, no fate line
    assert inst[(500, 0)].egress_port is not None and not inst[(500, 0)].egress_started and inst[(500, 0)].fate is None
    assert other["priority_out_of_range"] == 1

    s = bg.summarize(inst, other, n_in=6)
    assert s["received"] == 6 and s["instances"] == 8
    assert s["drops"] == {"ingress": 3, "priority_out_of_range": 1, "queue": 0}
    assert s["transmitted"] == {"1": 1, "4": 1, "7": 2}
    assert s["copies"] == {"clone_i2e": 2} and s["parser_errors"] == {"PacketTooShort": 1}
    assert s["tables"]["MyIngress.ipv4_lpm"] == {"lookups": 2, "matched": 2, "actions": {"MyIngress.set_nhop": 2}}
    assert s["tables"]["MyIngress.acl"] == {"lookups": 2, "matched": 1, "actions": {"MyIngress.deny": 1, "MyIngress.permit": 1}}
    # port_stats: 130 and both copies (147 was dropped in ingress); ports 1 and 7 hold entries
    assert s["tables"]["MyEgress.port_stats"] == {"lookups": 3, "matched": 3, "actions": {"MyEgress.count_port": 3}}


def test_cli_report_refusals_and_blank_lines(tmp_path):
    run = bg.Run(tmp_path, [], [
        (1, "# a comment", "*** Unknown syntax: # a comment\n"),
        (2, "", "*** Unknown syntax: # a comment\n"),  # a blank after a comment repeats the comment: not an entry
        (3, "table_add routes_v4 route 0.0.0.0/0 => 1", "Adding entry to lpm match table routes_v4\n"
                                                        "Invalid table operation (WRONG_TABLE_TYPE)\n"),
        (4, "table_indirect_create_member t a =>", "Member has been created with handle 0\n"),
        (5, "", "Member has been created with handle 1\n"),  # the blank line creates a second member
        (6, "table_add t a 1 2 =>", "Error: Table has 1 match fields but 2 were given\n"),
    ], wait=2, frames=0)
    r = bg.cli_report(run)
    assert r["lines"] == 6
    assert r["blank_lines_repeating"] == [5]
    assert [(x["line"], x["error"]) for x in r["refused"]] == [
        (3, "Invalid table operation (WRONG_TABLE_TYPE)"), (6, "Error: Table has 1 match fields but 2 were given")]


def test_frames_digest_is_length_prefixed():
    """Two frames and their concatenation as one frame hash apart (the length is part of the digest)."""
    assert bg.frames_digest([b"ab", b"c"]) != bg.frames_digest([b"abc"])
    assert bg.frames_digest([]) == bg.frames_digest([])

"""A small stateful v1model program in p4c's BMv2 JSON conventions, written
by hand for the extern tests (`python tests/p4stateful.py` rewrites
tests/data/p4/stateful.json from it).

What it does, per packet (Ethernet / IPv4 / UDP):

ingress
  ``tbl_compute`` (keyless): ``idx = crc16(src, dst, proto, sport, dport) % 64``;
  ``count = flow_count[idx] + 1`` written back (a register); ``pkt_counter[idx]``
  counted; ``color = flow_meter[idx]`` (a packets meter);
  ``flows`` (exact ``idx``; a direct counter and a direct meter writing ``dcolor``):
  ``NoAction`` or ``do_digest`` (learn list ``digest_t``: src, count);
  if ``count > 3``: ``heavy`` (exact ``color``): ``drop`` (and no routing) or ``NoAction``;
  ``route`` (lpm dst, behind action selector ``route_sel``: crc16 of src, sport):
  ``set_port(port)`` or ``drop``;
  if ``pass == 0``: ``special`` (exact udp dport): ``do_clone(session)`` (I2E,
  field list 1 = ``pass``), ``do_mcast(grp)``, ``do_resubmit`` (``pass = 1``,
  field list 1), ``NoAction``; else ``seen_again`` (exact ``pass``).
egress
  if ``pass != 2``: ``eg`` (exact egress_port): ``mark`` (ttl - 1),
  ``e_drop``, ``e_clone(session)`` (E2E), ``e_recirc`` (``pass = 2``, ttl - 1,
  recirculate with field list 1), ``NoAction``;
  ``inst`` (exact instance_type, egress_rid, checksum_error; no entries):
  every egress pass leaves them in the trace.
The IPv4 checksum is verified by the parser and updated by the deparser (csum16).
"""

from __future__ import annotations

import json
from pathlib import Path


def F(h, f):
    return {"type": "field", "value": [h, f]}


def H(v, bw=None):
    out = {"type": "hexstr", "value": hex(v)}
    if bw is not None:
        out["bitwidth"] = bw
    return out


def E(op, left, right):
    return {"type": "expression", "value": {"op": op, "left": left, "right": right}}


def RD(i):
    return {"type": "runtime_data", "value": i}


def prim(op, *params):
    return {"op": op, "parameters": list(params)}


STD = [["ingress_port", 9], ["egress_spec", 9], ["egress_port", 9], ["instance_type", 32], ["packet_length", 32],
       ["enq_timestamp", 32], ["enq_qdepth", 19], ["deq_timedelta", 32], ["deq_qdepth", 19],
       ["ingress_global_timestamp", 48], ["egress_global_timestamp", 48], ["mcast_grp", 16], ["egress_rid", 16],
       ["checksum_error", 1], ["parser_error", 32], ["priority", 3], ["_padding", 3]]
IPV4 = [["version", 4], ["ihl", 4], ["diffserv", 8], ["totalLen", 16], ["identification", 16], ["flags", 3],
        ["fragOffset", 13], ["ttl", 8], ["protocol", 8], ["hdrChecksum", 16], ["srcAddr", 32], ["dstAddr", 32]]
M = "scalars"


def _table(tid, name, key, actions, next_, default=0, **kw):
    t = {"name": name, "id": tid, "key": key, "match_type": kw.pop("match_type", "exact"), "type": "simple",
         "max_size": 64, "with_counters": False, "support_timeout": False, "direct_meters": None,
         "action_ids": [a for a, _ in actions], "actions": [n for _, n in actions], "base_default_next": next_,
         "next_tables": {n: next_ for _, n in actions},
         "default_entry": {"action_id": default, "action_const": False, "action_data": [], "action_entry_const": False}}
    t.update(kw)
    return t


def _key(h, f, kind="exact"):
    return {"match_type": kind, "name": f"{h}.{f}", "target": [h, f], "mask": None}


def program() -> dict:
    md = [["userMetadata.idx", 16], ["userMetadata.count", 32], ["userMetadata.color", 8], ["userMetadata.dcolor", 8],
          ["userMetadata.pass", 8]]
    header_types = [
        {"name": "scalars_0", "id": 0, "fields": [[n, w, False] for n, w in md]},
        {"name": "standard_metadata", "id": 1, "fields": [[n, w, False] for n, w in STD]},
        {"name": "ethernet_t", "id": 2, "fields": [["dstAddr", 48, False], ["srcAddr", 48, False], ["etherType", 16, False]]},
        {"name": "ipv4_t", "id": 3, "fields": [[n, w, False] for n, w in IPV4]},
        {"name": "udp_t", "id": 4, "fields": [["srcPort", 16, False], ["dstPort", 16, False], ["length_", 16, False],
                                              ["checksum", 16, False]]},
    ]
    headers = [
        {"name": M, "id": 0, "header_type": "scalars_0", "metadata": True, "pi_omit": True},
        {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata", "metadata": True, "pi_omit": True},
        {"name": "ethernet", "id": 2, "header_type": "ethernet_t", "metadata": False, "pi_omit": True},
        {"name": "ipv4", "id": 3, "header_type": "ipv4_t", "metadata": False, "pi_omit": True},
        {"name": "udp", "id": 4, "header_type": "udp_t", "metadata": False, "pi_omit": True},
    ]
    sm = "standard_metadata"
    aliases = [[f"queueing_metadata.{f}", [sm, f]] for f in ("enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth")]
    aliases += [[f"intrinsic_metadata.{f}", [sm, f]] for f in
                ("ingress_global_timestamp", "egress_global_timestamp", "mcast_grp", "egress_rid", "priority")]
    parsers = [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
        {"name": "start", "id": 0, "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "ethernet"}]}],
         "transition_key": [F("ethernet", "etherType")],
         "transitions": [{"type": "hexstr", "value": "0x0800", "mask": None, "next_state": "parse_ipv4"},
                         {"type": "default", "value": None, "mask": None, "next_state": None}]},
        {"name": "parse_ipv4", "id": 1, "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "ipv4"}]}],
         "transition_key": [F("ipv4", "protocol")],
         "transitions": [{"type": "hexstr", "value": "0x11", "mask": None, "next_state": "parse_udp"},
                         {"type": "default", "value": None, "mask": None, "next_state": None}]},
        {"name": "parse_udp", "id": 2, "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "udp"}]}],
         "transition_key": [], "transitions": [{"type": "default", "value": None, "mask": None, "next_state": None}]},
    ]}]
    flow_in = [F("ipv4", "srcAddr"), F("ipv4", "dstAddr"), F("ipv4", "protocol"), F("udp", "srcPort"), F("udp", "dstPort")]
    calcs = [
        {"name": "calc_flow", "id": 0, "algo": "crc16", "input": flow_in},
        {"name": "calc_cksum", "id": 1, "algo": "csum16", "input": [F("ipv4", n) for n, _ in IPV4 if n != "hdrChecksum"]},
    ]
    valid_ipv4 = {"type": "expression", "value": {"op": "d2b", "left": None, "right": F("ipv4", "$valid$")}}
    checksums = [{"name": "cksum", "id": 0, "target": ["ipv4", "hdrChecksum"], "type": "generic", "calculation": "calc_cksum",
                  "verify": True, "update": True, "if_cond": valid_ipv4}]
    actions = [
        {"name": "NoAction", "id": 0, "runtime_data": [], "primitives": []},
        {"name": "ingress.compute", "id": 1, "runtime_data": [], "primitives": [
            prim("modify_field_with_hash_based_offset", F(M, "userMetadata.idx"), H(0), {"type": "calculation", "value": "calc_flow"},
                 H(64)),
            prim("register_read", F(M, "userMetadata.count"), {"type": "register_array", "value": "flow_count"},
                 F(M, "userMetadata.idx")),
            prim("assign", F(M, "userMetadata.count"),
                 E("&", E("+", F(M, "userMetadata.count"), H(1)), H(0xFFFFFFFF))),
            prim("register_write", {"type": "register_array", "value": "flow_count"}, F(M, "userMetadata.idx"),
                 F(M, "userMetadata.count")),
            prim("count", {"type": "counter_array", "value": "pkt_counter"}, F(M, "userMetadata.idx")),
            prim("execute_meter", {"type": "meter_array", "value": "flow_meter"}, F(M, "userMetadata.idx"),
                 F(M, "userMetadata.color")),
        ]},
        {"name": "ingress.set_port", "id": 2, "runtime_data": [{"name": "port", "bitwidth": 9}],
         "primitives": [prim("assign", F(sm, "egress_spec"), RD(0))]},
        {"name": "ingress.drop", "id": 3, "runtime_data": [], "primitives": [prim("mark_to_drop", {"type": "header", "value": sm})]},
        {"name": "ingress.do_clone", "id": 4, "runtime_data": [{"name": "session", "bitwidth": 32}],
         "primitives": [prim("clone_ingress_pkt_to_egress", RD(0), H(1))]},
        {"name": "ingress.do_mcast", "id": 5, "runtime_data": [{"name": "grp", "bitwidth": 16}],
         "primitives": [prim("assign", F(sm, "mcast_grp"), RD(0))]},
        {"name": "ingress.do_resubmit", "id": 6, "runtime_data": [],
         "primitives": [prim("assign", F(M, "userMetadata.pass"), H(1)), prim("resubmit", H(1))]},
        {"name": "ingress.do_digest", "id": 7, "runtime_data": [], "primitives": [prim("generate_digest", H(1), H(1))]},
        {"name": "egress.mark", "id": 8, "runtime_data": [],
         "primitives": [prim("assign", F("ipv4", "ttl"), E("&", E("+", F("ipv4", "ttl"), H(0xFF)), H(0xFF)))]},
        {"name": "egress.e_drop", "id": 9, "runtime_data": [], "primitives": [prim("mark_to_drop", {"type": "header", "value": sm})]},
        {"name": "egress.e_clone", "id": 10, "runtime_data": [{"name": "session", "bitwidth": 32}],
         "primitives": [prim("clone_egress_pkt_to_egress", RD(0), H(1))]},
        {"name": "egress.e_recirc", "id": 11, "runtime_data": [],
         "primitives": [prim("assign", F(M, "userMetadata.pass"), H(2)),
                        prim("assign", F("ipv4", "ttl"), E("&", E("+", F("ipv4", "ttl"), H(0xFF)), H(0xFF))),
                        prim("recirculate", H(1))]},
        {"name": "ingress.set_prio", "id": 12, "runtime_data": [{"name": "prio", "bitwidth": 3}],
         "primitives": [prim("assign", F(sm, "priority"), RD(0))]},
    ]
    ingress = {"name": "ingress", "id": 0, "init_table": "tbl_compute", "action_profiles": [
        {"name": "route_sel", "id": 0, "max_size": 64,
         "selector": {"algo": "crc16", "input": [F("ipv4", "srcAddr"), F("udp", "srcPort")]}}],
        "tables": [
            _table(0, "tbl_compute", [], [(1, "ingress.compute")], "ingress.flows", default=1),
            _table(1, "ingress.flows", [_key(M, "userMetadata.idx")], [(0, "NoAction"), (7, "ingress.do_digest")], "node_heavy",
                   with_counters=True, direct_meters="ingress.flows_meter"),
            dict(_table(2, "ingress.heavy", [_key(M, "userMetadata.color")], [(3, "ingress.drop"), (0, "NoAction")],
                        "ingress.route", default=0), next_tables={"ingress.drop": "node_pass", "NoAction": "ingress.route"}),
            dict(_table(3, "ingress.route", [_key("ipv4", "dstAddr", "lpm")], [(2, "ingress.set_port"), (3, "ingress.drop")],
                        "node_pass", default=3, match_type="lpm"), type="indirect_ws", action_profile="route_sel"),
            _table(4, "ingress.special", [_key("udp", "dstPort")],
                   [(4, "ingress.do_clone"), (5, "ingress.do_mcast"), (6, "ingress.do_resubmit"), (12, "ingress.set_prio"),
                    (0, "NoAction")], None),
            _table(5, "ingress.seen_again", [_key(M, "userMetadata.pass"), _key(sm, "instance_type")], [(0, "NoAction")], None),
        ],
        "conditionals": [
            {"name": "node_heavy", "id": 0, "expression": E(">", F(M, "userMetadata.count"), H(3)),
             "true_next": "ingress.heavy", "false_next": "ingress.route"},
            {"name": "node_pass", "id": 1, "expression": E("==", F(M, "userMetadata.pass"), H(0)),
             "true_next": "ingress.special", "false_next": "ingress.seen_again"},
        ]}
    # a selector table's actions come from its profile: p4c gives the table no default action then
    ingress["tables"][3]["default_entry"] = {"action_id": 3, "action_const": False, "action_data": [], "action_entry_const": False}
    egress = {"name": "egress", "id": 1, "init_table": "node_e", "action_profiles": [], "tables": [
        _table(6, "egress.eg", [_key(sm, "egress_port")],
               [(8, "egress.mark"), (9, "egress.e_drop"), (10, "egress.e_clone"), (11, "egress.e_recirc"), (0, "NoAction")],
               "egress.inst"),
        _table(7, "egress.inst", [_key(sm, "instance_type"), _key(sm, "egress_rid"), _key(sm, "checksum_error")],
               [(0, "NoAction")], None),
    ], "conditionals": [
        {"name": "node_e", "id": 2, "expression": E("!=", F(M, "userMetadata.pass"), H(2)),
         "true_next": "egress.eg", "false_next": "egress.inst"},
    ]}
    return {
        "header_types": header_types, "headers": headers, "header_stacks": [], "header_union_types": [],
        "header_unions": [], "header_union_stacks": [],
        "field_lists": [{"id": 1, "name": "fl", "elements": [F(M, "userMetadata.pass")]}],
        "errors": [["NoError", 0], ["PacketTooShort", 1], ["NoMatch", 2], ["StackOutOfBounds", 3], ["HeaderTooShort", 4],
                   ["ParserTimeout", 5], ["ParserInvalidArgument", 6]],
        "enums": [], "parsers": parsers, "parse_vsets": [],
        "deparsers": [{"name": "deparser", "id": 0, "order": ["ethernet", "ipv4", "udp"], "primitives": []}],
        "meter_arrays": [
            {"name": "flow_meter", "id": 0, "is_direct": False, "size": 64, "rate_count": 2, "type": "packets"},
            {"name": "ingress.flows_meter", "id": 1, "is_direct": True, "rate_count": 2, "type": "packets",
             "size": 64, "binding": "ingress.flows", "result_target": [M, "userMetadata.dcolor"]},
        ],
        "counter_arrays": [
            {"name": "pkt_counter", "id": 0, "is_direct": False, "size": 64},
            {"name": "ingress.flows_counter", "id": 1, "is_direct": True, "binding": "ingress.flows"},
        ],
        "register_arrays": [{"name": "flow_count", "id": 0, "size": 64, "bitwidth": 32}],
        "calculations": calcs,
        "learn_lists": [{"id": 1, "name": "digest_t", "elements": [F("ipv4", "srcAddr"), F(M, "userMetadata.count")]}],
        "actions": actions, "pipelines": [ingress, egress], "checksums": checksums, "force_arith": [],
        "extern_instances": [], "field_aliases": aliases,
        "program": "stateful.p4", "__meta__": {"version": [2, 23], "compiler": "hand-written (tests/p4stateful.py)"},
    }


if __name__ == "__main__":
    out = Path(__file__).parent / "data" / "p4" / "stateful.json"
    out.write_text(json.dumps(program(), indent=1) + "\n")
    print(f"wrote {out}")

"""``synapse p4 cfg``: BMv2 JSON -> tables and folded CFG."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from synapse_vmt.errors import UserError
from synapse_vmt.p4 import load_cfg, read_bmv2

HEADER_TYPES = [
    {"name": "eth_t", "id": 0, "fields": [["dst", 48, False], ["src", 48, False], ["type", 16, False]]},
    {"name": "ip_t", "id": 1, "fields": [["src", 32, False], ["dst", 32, False], ["proto", 8, False]]},
    {"name": "meta_t", "id": 2, "fields": [["flag", 1, False], ["port", 9, False]]},
]
HEADERS = [
    {"name": "eth", "header_type": "eth_t"},
    {"name": "ip", "header_type": "ip_t"},
    {"name": "scalars", "header_type": "meta_t"},
]


def table(name, key, next_tables, base_default_next=None, max_size=64):
    return {
        "name": name,
        "key": [{"match_type": m, "target": t, "mask": None} for m, t in key],
        "max_size": max_size,
        "next_tables": next_tables,
        "base_default_next": base_default_next,
    }


def program(tables, conds, init, egress=None):
    pipes = [{"name": "ingress", "init_table": init, "tables": tables, "conditionals": conds}]
    if egress is not None:
        pipes.append(egress)
    return {"header_types": HEADER_TYPES, "headers": HEADERS, "pipelines": pipes, "program": "t.p4"}


# init: tbl_init (keyless) -> node_1 ? acl : tbl_x -> fwd
# acl (hit -> fwd, miss -> exit); fwd has two actions, both to exit.
SMALL = program(
    tables=[
        table("tbl_init", [], {"init": "node_1"}, "node_1"),
        table("acl", [("ternary", ["ip", "src"]), ("exact", ["ip", "proto"])], {"__HIT__": "fwd", "__MISS__": None}),
        table("tbl_x", [], {"x": "fwd"}, "fwd"),
        table("fwd", [("lpm", ["ip", "dst"])], {"set": None, "drop": None}, None, max_size=1024),
    ],
    conds=[{"name": "node_1", "true_next": "acl", "false_next": "tbl_x"}],
    init="tbl_init",
)


def write(tmp_path, doc, name="p.json"):
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return p


def test_small_program_folds_keyless_tables_and_conditionals(tmp_path):
    cfg = read_bmv2(write(tmp_path, SMALL))
    assert cfg.names == ["acl", "fwd"]
    acl = cfg.tables[0]
    assert [(k.field, k.width, k.match) for k in acl.key] == [("ip.src", 32, "ternary"), ("ip.proto", 8, "exact")]
    assert acl.key_bits == 40 and cfg.tables[1].max_size == 1024
    assert cfg.entry == {"acl": 0.5, "fwd": 0.5}
    assert [(e.src, e.dst, e.p) for e in cfg.edges] == [("acl", "fwd", 0.5)]


def test_next_pipeline_follows_the_end_of_ingress(tmp_path):
    egress = {
        "name": "egress",
        "init_table": "tbl_e",
        "tables": [table("tbl_e", [], {"e": "out"}, "out"), table("out", [("exact", ["scalars", "port"])], {"a": None})],
        "conditionals": [],
    }
    cfg = read_bmv2(write(tmp_path, program(SMALL["pipelines"][0]["tables"], SMALL["pipelines"][0]["conditionals"], "tbl_init", egress)))
    assert cfg.names == ["acl", "fwd", "out"]
    got = {(e.src, e.dst): e.p for e in cfg.edges}
    # acl: hit -> fwd (0.5), miss -> end of ingress -> egress.out (0.5); fwd always ends ingress.
    assert got == {("acl", "fwd"): 0.5, ("acl", "out"): 0.5, ("fwd", "out"): 1.0}
    assert cfg.tables[2].pipeline == "egress"


def test_valid_match_and_masked_field_widths(tmp_path):
    doc = program(
        [
            {
                "name": "t",
                "key": [
                    {"match_type": "valid", "target": "ip"},
                    {"match_type": "exact", "target": ["eth", "type"], "mask": "0x0ff0"},
                    {"match_type": "exact", "target": ["ip", "$valid$"], "mask": None},
                ],
                "max_size": 8,
                "next_tables": {"a": None},
            }
        ],
        [],
        "t",
    )
    cfg = read_bmv2(write(tmp_path, doc))
    assert [k.width for k in cfg.tables[0].key] == [1, 8, 1]
    assert cfg.entry == {"t": 1.0} and cfg.edges == []


def _mutate(f):
    d = copy.deepcopy(SMALL)
    f(d)
    return d


def _cycle(d):
    d["pipelines"][0]["tables"][2]["next_tables"] = {"x": "node_1"}


BAD = [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    (json.dumps({"pipelines": []}), 'expected a list "header_types"'),
    (_mutate(lambda d: d["pipelines"][0]["tables"][1]["key"][0].update(target=["ip", "nope"])), "a field of header 'ip', found 'nope'"),
    (_mutate(lambda d: d["pipelines"][0]["tables"][1]["key"][0].update(target=["tcp", "sport"])), "a known header, found 'tcp'"),
    (_mutate(lambda d: d["pipelines"][0]["tables"][1]["key"][0].update(match_type="fuzzy")), "found 'fuzzy'"),
    (_mutate(lambda d: d["pipelines"][0]["conditionals"][0].update(true_next="ghost")), "named 'ghost'"),
    (_mutate(lambda d: d["pipelines"][0]["tables"][1].pop("next_tables")), '"next_tables"'),
    (_mutate(lambda d: d["headers"][0].update(header_type="nope_t")), "a known header_type"),
    (_mutate(_cycle), "on a cycle"),
]


@pytest.mark.parametrize("doc,msg", BAD)
def test_bad_programs_are_one_line_errors(tmp_path, doc, msg):
    p = write(tmp_path, doc)
    with pytest.raises(UserError, match=None) as ei:
        read_bmv2(p)
    text = str(ei.value)
    assert msg in text and str(p) in text and "\n" not in text


def test_cli_error_exit_2_and_nothing_written(tmp_path):
    p = write(tmp_path, BAD[3][0])
    out = tmp_path / "cfg.json"
    r = subprocess.run([sys.executable, "-m", "synapse_vmt.cli", "p4", "cfg", str(p), "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "synapse: error:" in r.stderr
    assert not out.exists()


def test_cli_writes_a_cfg_that_loads_back(tmp_path):
    p = write(tmp_path, SMALL)
    out = tmp_path / "cfg.json"
    r = subprocess.run([sys.executable, "-m", "synapse_vmt.cli", "p4", "cfg", str(p), "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "acl -> fwd" in r.stdout and "tbl_" not in r.stdout
    back = load_cfg(out)
    assert back.to_json() == read_bmv2(p).to_json()


def test_upf_program(shared_data):
    cfg = read_bmv2(shared_data / "p4" / "up4-bmv2.json")
    names = cfg.names
    assert len(names) == 10 and not any(n.split(".")[-1].startswith("tbl_") for n in names)
    assert "PreQosPipe.Acl.acls" in names and "PreQosPipe.applications" in names
    acls = cfg.tables[names.index("PreQosPipe.Acl.acls")]
    assert len(acls.key) == 10 and all(k.match == "ternary" for k in acls.key)
    assert acls.key[0].field == "standard_metadata.ingress_port" and acls.key[0].width == 9
    edges = {(e.src, e.dst) for e in cfg.edges}
    # Paths in the UPF control block (main.p4): downlink sessions look up the tunnel peer;
    # both session tables lead to the application filter; routing always ends in the ACL.
    for src, dst in [
        ("my_station", "interfaces"),
        ("interfaces", "sessions_uplink"),
        ("interfaces", "sessions_downlink"),
        ("sessions_downlink", "tunnel_peers"),
        ("tunnel_peers", "applications"),
        ("sessions_uplink", "applications"),
        ("applications", "terminations_uplink"),
        ("Routing.routes_v4", "Acl.acls"),
    ]:
        assert (f"PreQosPipe.{src}", f"PreQosPipe.{dst}") in edges
    assert not any(s == "PreQosPipe.Acl.acls" for s, _ in edges)  # the ACL is last
    e, P = cfg.routing()
    assert (P.sum(axis=1) <= 1 + 1e-12).all() and e.sum() <= 1 + 1e-12

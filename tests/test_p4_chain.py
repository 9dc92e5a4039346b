"""What one command writes, the next reads: ``synapse p4 cfg`` -> ``synapse opt
solve`` -> ``synapse run`` on the real programs, and the CFG's probabilities
stay within [0, 1] however many branches are summed."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from synapse_vmt.p4 import load_cfg, read_bmv2


def _cli(*args, cwd=None):
    r = subprocess.run([sys.executable, "-m", "synapse_vmt.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_nine_equal_branches_sum_to_one_not_more(tmp_path):
    # Nine actions all leading to the same table: adding 1/9 nine times in
    # floating point gives 1.0000000000000002, which the CFG reader rejects.
    assert sum([1 / 9] * 9) > 1  # the trap this guards against
    acts = {f"a{i}": "u" for i in range(9)}
    doc = {
        "header_types": [{"name": "h_t", "fields": [["f", 8, False]]}],
        "headers": [{"name": "h", "header_type": "h_t"}],
        "pipelines": [
            {
                "name": "ingress",
                "init_table": "t",
                "tables": [
                    {"name": "t", "key": [{"match_type": "exact", "target": ["h", "f"]}], "max_size": 4, "next_tables": acts},
                    {"name": "u", "key": [{"match_type": "exact", "target": ["h", "f"]}], "max_size": 4, "next_tables": {"x": None}},
                ],
                "conditionals": [],
            }
        ],
    }
    p = tmp_path / "p.json"
    p.write_text(json.dumps(doc))
    cfg = read_bmv2(p)
    assert [(e.src, e.dst, e.p) for e in cfg.edges] == [("t", "u", 1.0)]
    out = tmp_path / "cfg.json"
    cfg.save(out)
    assert load_cfg(out).edges == cfg.edges


def _scenario_toml(cfg: dict, alloc: dict, rules: int) -> str:
    """A scenario running the CFG's tables with the PMUs the solver gave them."""
    lines = ["duration_ns = 20000.0", "window_ns = 5000.0", "[traffic]", "flows = 200", ""]
    tables, nxt = [], 0
    for t in cfg["tables"]:
        k = alloc["tables"][t["name"]]["pmus"]
        tables.append((t["name"], list(range(nxt, nxt + k))))
        nxt += k
    lines += ["[pmus]", f"count = {nxt}", ""]
    for n, pmus in tables:
        lines += ["[[tables]]", f"name = {json.dumps(n)}", f"pmus = {pmus}", "[tables.rules.generate]", f"count = {rules}", ""]
    for e in cfg["edges"]:
        lines += ["[[edges]]", f"src = {json.dumps(e['src'])}", f"dst = {json.dumps(e['dst'])}", f"p = {e['p']!r}", ""]
    lines.append("[entry]")
    lines += [f"{json.dumps(n)} = {s!r}" for n, s in cfg["entry"].items()]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name", ["up4-bmv2.json", "switch-p416.json"])
def test_cfg_solve_run_chain(shared_data, tmp_path, name):
    prog = shared_data / "p4" / name
    _cli("p4", "cfg", prog, "-o", tmp_path / "cfg.json")
    cfg = json.loads((tmp_path / "cfg.json").read_text())
    ps = [e["p"] for e in cfg["edges"]] + list(cfg["entry"].values())
    assert all(0 < p <= 1 for p in ps)
    for t in cfg["tables"]:
        assert math.fsum(e["p"] for e in cfg["edges"] if e["src"] == t["name"]) <= 1
    assert math.fsum(cfg["entry"].values()) <= 1
    n = len(cfg["tables"])
    problem = {"cfg": "cfg.json", "pmus": 2 * n, "min_pmus": 1, "capacity": {"default": {"mpps": [0, 100, 180, 250]}}}
    (tmp_path / "problem.json").write_text(json.dumps(problem))
    alloc = json.loads(_cli("opt", "solve", tmp_path / "problem.json", "--json"))["fast"]
    assert alloc["throughput_mpps"] > 0 and alloc["pmus_used"] <= 2 * n
    (tmp_path / "scn.toml").write_text(_scenario_toml(cfg, alloc, rules=50))
    if n <= 20:
        _cli("run", tmp_path / "scn.toml", "-o", tmp_path / "out", "-q")
        summary = json.loads((tmp_path / "out" / "summary.json").read_text())
        inv = summary["invariants"]
    else:
        # The same scenario through the simulator `synapse run` drives, without
        # its per-table plots (123 panels take ~20 s to draw).
        from synapse_vmt.scenario import load
        from synapse_vmt.sim import Simulation

        sim = Simulation(load(tmp_path / "scn.toml"))
        summary = sim.run()
        inv = sim.finish()
    assert set(summary["tables"]) == {t["name"] for t in cfg["tables"]}
    assert inv["ok"] and inv["created"] > 0 and inv["lost"] == 0 and inv["wrong_action"] == 0
    # PHVs entered the tables the CFG's entry names
    assert all(summary["tables"][t]["keys"] > 0 for t in cfg["entry"])

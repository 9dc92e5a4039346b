"""Rule updates while traffic flows (issue 9 part C): the ``[[updates]]``
schedule of a scenario, the batch API, bad schedule files, and
``synapse reproduce updates --quick``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from synapse_vmt.cli import main
from synapse_vmt.errors import UserError
from synapse_vmt.scenario import load
from synapse_vmt.sim import Simulation

BASE = """
duration_ns = 150000.0
[[tables]]
name = "acl"
rules = { generate = { type = "acl", count = 200, seed = 3 } }
[elu]
algo = "dtree"
[traffic]
flows = 300
flow_duration_ns = 40000.0
"""


def write(tmp_path, text, ops=None):
    if ops is not None:
        (tmp_path / "ops.txt").write_text(ops)
    p = tmp_path / "s.toml"
    p.write_text(BASE + text)
    return p


def test_a_scheduled_file_of_operations_commits_and_answers_stay_consistent(tmp_path):
    ops = "# top entry catching everything, then a default change\ninsert 0 * * * * *\ndefault\nmodify 5\ndelete 7\n"
    p = write(tmp_path, '[[updates]]\nat_ns = 60000.0\nfile = "ops.txt"\n', ops)
    scn = load(p)
    assert scn.updates[0].file == str(tmp_path / "ops.txt")  # relative to the scenario
    sim = Simulation(scn)
    sim.run()
    u = sim.update_stats()
    assert u["requested"] == 4 and u["committed"] == 4 and u["rejected"] == 0
    # The catch-all entry made every cached key stale: exact invalidation
    # dropped them all.
    assert u["invalidated"] > 0
    inv = sim.finish()
    assert inv["ok"] and inv["stale_answers"] == 0 and inv["wrong_action"] == 0
    assert u["latency_ns_p50"] > 0


def test_run_writes_the_update_counters_and_invariants(tmp_path):
    p = write(tmp_path, '[[updates]]\nat_ns = 30000.0\nchurn_per_s = 1e6\n[update_engine]\ninvalidate = "flush"\n')
    r = CliRunner().invoke(main, ["run", str(p), "-o", str(tmp_path / "out"), "-q"])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["updates"]["committed"] > 50
    assert s["invariants"]["stale_answers"] == 0 and s["invariants"]["wrong_action"] == 0
    cfg = json.loads((tmp_path / "out" / "scenario.json").read_text())
    assert cfg["update_engine"]["invalidate"] == "flush"


def test_the_partitioned_tree_is_updated_in_place_without_folding_in(tmp_path):
    # 200 entries under fast churn that keeps their number: the leaves that
    # grow take the blocks others left, so the tree is never written whole.
    p = write(tmp_path, '[[updates]]\nat_ns = 30000.0\nchurn_per_s = 3e6\n')
    text = p.read_text().replace('algo = "dtree"', 'algo = "ptree"')
    p.write_text(text)
    sim = Simulation(load(p))
    sim.run()
    u = sim.update_stats()
    assert u["committed"] > 100 and u["extra_bytes_peak"] == 0  # in place: no replica
    assert u["fold_ins"] == 0 and u["batches"] > 0
    inv = sim.finish()
    assert inv["ok"] and inv["stale_answers"] == 0 and inv["wrong_action"] == 0


def test_invalidation_off_is_caught_as_stale_answers(tmp_path):
    p = write(tmp_path, '[[updates]]\nat_ns = 30000.0\nchurn_per_s = 1e6\n[update_engine]\ninvalidate = "none"\n')
    sim = Simulation(load(p))
    sim.run()
    inv = sim.check_invariants()
    assert inv["stale_answers"] > 0 and not inv["ok"]


def test_the_batch_api_applies_updates_between_runs(tmp_path):
    sim = Simulation(load(write(tmp_path, "")))
    sim.run_until(50_000.0)
    assert sim.request_updates("acl", ["insert 0 10.0.0.0/8 * * * *", "delete 3", "delete 100000"]) == 3
    sim.run_until(150_000.0)
    u = sim.update_stats()
    assert u["committed"] == 2 and u["rejected"] == 1  # no entry 100000
    with pytest.raises(UserError, match=r"^updates:1: expected"):
        sim.request_updates("acl", ["remove 3"])
    with pytest.raises(UserError, match="no table named"):
        sim.request_updates("nat", ["delete 3"])
    assert sim.finish()["ok"]


@pytest.mark.parametrize("ops,line,msg", [
    ("delete 1\ninsert x * * * * *\n", 2, "expected a position"),
    ("\n\ninsert 0 * *\n", 3, "expected 5 fields"),
    ("insert 0 300.0.0.0/8 * * * *\n", 1, "field src"),
    ("modify\n", 1, "expected `insert POS FIELDS...`"),
])
def test_a_malformed_schedule_file_is_one_line_with_file_and_line_exit_2(tmp_path, ops, line, msg):
    p = write(tmp_path, '[[updates]]\nat_ns = 1000.0\nfile = "ops.txt"\n', ops)
    r = CliRunner().invoke(main, ["run", str(p), "-o", str(tmp_path / "out"), "-q"])
    assert r.exit_code == 2, r.output
    f = tmp_path / "ops.txt"
    out = r.output.strip()
    assert f"{f}:{line}: " in out and msg in out and len(out.splitlines()) == 1, out
    assert not (tmp_path / "out" / "summary.json").exists()


def test_bad_schedule_keys_name_the_key(tmp_path):
    p = write(tmp_path, '[[updates]]\nat_ns = 1000.0\nchurn = 5\n')
    with pytest.raises(UserError, match=r"updates\.0\.churn: unknown key"):
        load(p)
    p = write(tmp_path, '[[updates]]\ntable = "nat"\nchurn_per_s = 5.0\n')
    with pytest.raises(UserError, match="no table named 'nat'"):
        load(p)


def test_reproduce_updates_quick(tmp_path, monkeypatch):
    from synapse_vmt.figures import updates as f

    # Smaller still than --quick: the test checks the pipeline, not numbers.
    monkeypatch.setattr(f, "plan", lambda quick: {"duration": 400_000.0, "warmup": 50_000.0, "rules": 100, "flows": 300})
    r = CliRunner().invoke(main, ["reproduce", "updates", "-o", str(tmp_path), "--quick", "-q"])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "summary.json").read_text())
    assert set(s["churn"]) == {"100", "10000", "1e+06"}
    for rate, v in s["churn"].items():
        assert set(v) == {"stale_answers", "wrong_action", "update_latency_us_p50", "update_latency_us_p99",
                          "updates_per_s", "hit_rate", "throughput_mpps"}
        assert v["stale_answers"] == 0 and v["wrong_action"] == 0
    assert s["churn"]["1e+06"]["updates_per_s"] > s["churn"]["10000"]["updates_per_s"]
    # Every structure's modes, the partitioned tree's in place among them,
    # answer as the versioned oracle at every rate.
    assert {"trie_exact", "dtree_exact", "ptree_exact"} <= set(s["modes"])
    for name, m in s["modes"].items():
        for k, v in m.items():
            assert v["stale_answers"] == 0 and v["wrong_action"] == 0, (name, k)
        assert m["1e+06"]["committed"] > 0, name
    assert (tmp_path / "updates.png").stat().st_size > 0 and (tmp_path / "updates.csv").exists()
    # Consistency across two tables: per program never mixed, all decided.
    c = s["consistency"]
    assert set(c) == {"table", "program"} and set(c["program"]) == set(s["churn"])
    for v in c["program"].values():
        assert v["mixed_version_phvs"] == 0 and v["mixed_unresolved"] == 0 and v["stale_answers"] == 0
    assert sum(v["mixed_version_phvs"] for v in c["table"].values()) > 0
    assert (tmp_path / "consistency.png").stat().st_size > 0

"""Per-packet consistency across tables (issue 9, item 2): update
transactions over two tables from the scenario and the Python API,
``consistency = "program"`` against per-table commits, checked by the
versioned oracle's ``mixed_version_phvs``; bad transactions are one-line
``FILE:LINE`` errors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from synapse_vmt.cli import main
from synapse_vmt.errors import UserError
from synapse_vmt.scenario import load
from synapse_vmt.sim import Simulation

# acl (150 rules: a long replica build) feeds fw (30 rules: a short one).
BASE = """
duration_ns = 700000.0
[[tables]]
name = "acl"
pmus = [0, 1]
rules = { generate = { type = "acl", count = 150, seed = 7 } }
[[tables]]
name = "fw"
pmus = [2, 3]
rules = { generate = { type = "acl", count = 30, seed = 8 } }
[[edges]]
src = "acl"
dst = "fw"
p = 1.0
[pmus]
count = 4
[traffic]
flows = 400
flow_duration_ns = 40000.0
"""


def write(tmp_path, text):
    p = tmp_path / "s.toml"
    p.write_text(BASE + text)
    return p


CHURN = '[[updates]]\nat_ns = 20000.0\nchurn_per_s = 1e6\nuntil_ns = 300000.0\nchurn_tables = ["acl", "fw"]\n'


@pytest.mark.parametrize("consistency", ["table", "program"])
def test_two_table_churn_mixes_versions_only_per_table(tmp_path, consistency):
    p = write(tmp_path, CHURN + f'[update_engine]\nconsistency = "{consistency}"\n')
    r = CliRunner().invoke(main, ["run", str(p), "-o", str(tmp_path / "out"), "-q"])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    u, inv = s["updates"], s["invariants"]
    assert u["committed"] > 100 and u["checked_phvs"] > 1000
    assert inv["stale_answers"] == 0 and inv["wrong_action"] == 0 and inv["lost"] == 0
    if consistency == "program":
        assert u["flips"] > 0 and u["mixed_version_phvs"] == 0 and inv["ok"]
        # The old version is kept past the flip until its PHVs are out.
        assert u["retire_latency_ns_p50"] >= u["latency_ns_p50"] > 0
        assert u["extra_bytes_peak"] > 0
    else:
        assert u["flips"] == 0 and u["mixed_version_phvs"] > 0 and inv["ok"]


def test_a_transaction_from_the_api_is_one_version(tmp_path):
    for consistency, mixed in [("table", True), ("program", False)]:
        sim = Simulation(load(write(tmp_path, f'[update_engine]\nconsistency = "{consistency}"\n')))
        sim.run_until(50_000.0)
        # Exact entries for the flows on top of acl (a long build), a
        # catch-all on top of fw (a short one), in one transaction.
        keys = [f"insert 0 {ip} * * * *" for ip in ("0.0.0.0/2", "64.0.0.0/2")]
        assert sim.request_transaction({"acl": keys, "fw": ["insert 0 * * * * *"]}) == 3
        sim.run_until(400_000.0)
        u = sim.update_stats()
        assert u["committed"] == 3 and u["checked_phvs"] > 1000
        assert (u["mixed_version_phvs"] > 0) == mixed, (consistency, u)
        if not mixed:  # PHVs in flight across the flip kept the old answers
            assert u["old_version_answers"] > 0 and u["flips"] == 1
        assert sim.check_invariants()["stale_answers"] == 0
        with pytest.raises(UserError, match="no table named 'nat'|no table named \"nat\""):
            sim.request_transaction({"acl": ["delete 1"], "nat": ["delete 1"]})


def test_a_scheduled_transaction_commits_both_tables_at_one_flip(tmp_path):
    p = write(tmp_path, """[[updates]]
at_ns = 50000.0
[updates.transaction]
acl = ["insert 0 * * * * *", "delete 5"]
fw = ["default"]
[update_engine]
consistency = "program"
""")
    sim = Simulation(load(p))
    sim.run()
    u = sim.update_stats()
    assert (u["committed"], u["flips"], u["batches"], u["mixed_version_phvs"]) == (3, 1, 2, 0)
    # One request -> flip latency for all three (the slower table's build).
    assert u["latency_ns_p50"] == u["latency_ns_max"] > 0
    assert sim.finish()["ok"]


@pytest.mark.parametrize("text,line,msg", [
    ('[[updates]]\nat_ns = 1.0\n[updates.transaction]\nacl = ["delete 1"]\nfw = [\n  "delete 2",\n  "insert 0 * *",\n]\n',
     7, "expected 5 fields"),
    ('[[updates]]\nops = ["delete 1"]\n[[updates]]\ntransaction = { fw = ["remove 3"] }\n', 4, "expected `insert"),
])
def test_a_bad_transaction_operation_is_one_line_with_file_and_line_exit_2(tmp_path, text, line, msg):
    p = write(tmp_path, text)
    r = CliRunner().invoke(main, ["run", str(p), "-o", str(tmp_path / "out"), "-q"])
    assert r.exit_code == 2, r.output
    out = r.output.strip()
    at = BASE.count("\n") + line  # the scenario is BASE + text
    assert f"{p}:{at}: " in out and msg in out and len(out.splitlines()) == 1, out
    assert not (tmp_path / "out" / "summary.json").exists()


def test_bad_transaction_keys_are_named(tmp_path):
    with pytest.raises(UserError, match="no table named 'nat'"):
        load(write(tmp_path, '[[updates]]\ntransaction = { nat = ["delete 1"] }\n'))
    with pytest.raises(UserError, match="no table named 'nat'"):
        load(write(tmp_path, '[[updates]]\nchurn_per_s = 5.0\nchurn_tables = ["acl", "nat"]\n'))
    with pytest.raises(UserError, match=r"update_engine\.consistency"):
        load(write(tmp_path, '[update_engine]\nconsistency = "global"\n'))

"""Cache flooding (docs/flood.md): attack PHVs counted apart from the
legitimate ones, the [attack] / [defence] settings, and
``synapse reproduce flood --quick``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from synapse_vmt.cli import main
from synapse_vmt.errors import UserError
from synapse_vmt.scenario import load
from synapse_vmt.sim import Simulation, finish_checked

BASE = ["duration_ns=200000", "traffic.flows=240"]


def _run(extra: list[str]) -> dict:
    sim = Simulation(load(None, BASE + extra))
    s = sim.run()
    s["invariants"] = finish_checked(sim)
    return s


def test_attack_phvs_are_counted_apart_from_the_legitimate_ones():
    """The legitimate class of an attacked run is the attack-free run's
    traffic (same arrivals), the classes add up to every PHV, random keys
    never repeat (no attack hit), and every answer is the oracle's."""
    base = _run(["attack.share=0"])
    hit = _run(["attack.share=0.3"])
    assert base["attack"]["arrived"] == 0
    assert hit["legit"]["arrived"] == base["legit"]["arrived"] == base["invariants"]["created"]
    a = hit["attack"]["arrived"] / (hit["attack"]["arrived"] + hit["legit"]["arrived"])
    assert a == pytest.approx(0.3, abs=0.01)
    inv = hit["invariants"]
    assert hit["legit"]["arrived"] + hit["attack"]["arrived"] == inv["created"]
    assert hit["legit"]["dropped"] + hit["attack"]["dropped"] == inv["dropped"]
    assert hit["attack"]["hits"] == 0
    assert inv["wrong_action"] == 0
    # Without [attack] the summary has no classes.
    assert "legit" not in _run([])


@pytest.mark.parametrize("setting, msg", [
    ("attack.share=1.0", "attack.share"),
    ("attack.kind=flood", "attack.kind"),
    ("defence.admission.policy=lfu", "defence.admission.policy"),
    ("defence.miss_rate_mpps=-1", "defence.miss_rate_mpps"),
    # The shed gate tells first-time keys by the doorkeeper's filter.
    ("defence.shed_backlog=8", "doorkeeper"),
    ("defence.shed_all_backlog=-1", "defence.shed_all_backlog"),
])
def test_bad_attack_and_defence_settings_are_refused(setting, msg):
    with pytest.raises(UserError, match=msg):
        load(None, [setting])


def test_defaults_leave_the_simulator_tree_unchanged():
    """No [attack], no [defence]: the JSON the simulator takes has neither
    key (the simgolden runs are unchanged)."""
    d = load(None, []).sim_config()
    assert "attack" not in d and "defence" not in d
    d = load(None, ["defence.admission.policy=doorkeeper"]).sim_config()
    assert d["defence"]["admission"]["policy"] == "doorkeeper"


def test_reproduce_flood_quick(tmp_path):
    r = CliRunner().invoke(main, ["reproduce", "flood", "-o", str(tmp_path), "--quick", "-q"])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "summary.json").read_text())
    keys = {"scenario", "defence", "attack_share", "legit_throughput_ratio", "legit_p99_ratio", "wrong_action"}
    assert s["runs"] and all(keys <= set(run) for run in s["runs"])
    assert {r["defence"] for r in s["runs"]} >= {"none", "shed+bound"}
    assert {r["scenario"] for r in s["runs"]} == {"acl", "upf"}
    assert all(r["wrong_action"] == 0 for r in s["runs"])
    for name in ("acl", "upf"):
        runs = [r for r in s["runs"] if r["scenario"] == name]
        base = next(r for r in runs if r["defence"] == "none" and r["attack_share"] == 0)
        assert base["legit_throughput_ratio"] == 1.0 and base["legit_p99_ratio"] == 1.0
        # The attack costs plain LRU's legitimate traffic: more latency or
        # less throughput (here the ELU walks every attack key).
        hit = next(r for r in runs if r["defence"] == "none" and r["attack_share"] > 0)
        assert hit["legit_p99_ratio"] > 1.0 or hit["legit_throughput_ratio"] < 1.0
        assert hit["attack_hit_rate"] == 0.0
        # The shed gate (doorkeeper + shed of first-time keys + a bounded
        # ELU backlog) keeps the targets at 30 %: >= 90 % of the
        # throughput (shed legitimate PHVs count as lost), p99 within 2x,
        # and it sheds the attack's misses rather than the flows'.
        gate = next(r for r in runs if r["defence"] == "shed+bound" and r["attack_share"] == 0.3)
        assert gate["legit_throughput_ratio"] >= 0.9 and gate["legit_p99_ratio"] <= 2.0, gate
        assert gate["legit_p99_ratio"] < hit["legit_p99_ratio"]
        assert gate["attack_shed"] > gate["legit_shed"] > 0
        assert gate["legit_drops"] >= gate["legit_shed"]
    assert (tmp_path / "flood.png").stat().st_size > 0 and (tmp_path / "flood.csv").exists()


@pytest.mark.parametrize("prev, cur, prev_held, flagged", [
    # Misses x3, hits flat: flooded, held at its 2 PMUs (the solver wanted 5).
    ([[1000, 100], [500, 50]], [[1000, 300], [500, 50]], [2, 3], [0]),
    # The same after the table lost PMUs (3 -> 2): its own misses; not held.
    ([[1000, 100], [500, 50]], [[1000, 300], [500, 50]], [3, 2], []),
    # Misses x3 with hits x2: more traffic, not a flood; the target stands.
    ([[1000, 100], [500, 50]], [[2000, 300], [500, 50]], [2, 3], []),
    # Misses x1.2: under the rise.
    ([[1000, 100], [500, 50]], [[1000, 120], [500, 50]], [2, 3], []),
])
def test_flood_guard_holds_a_flooded_table(prev, cur, prev_held, flagged):
    import numpy as np

    from synapse_vmt.opt.controller import flood_guard

    held, target = np.array([2, 3]), np.array([5, 1])
    out, got = flood_guard((np.array(prev, float), np.array(prev_held)), np.array(cur, float), held, target, 1.5)
    assert got == flagged
    want = target.copy()
    for j in flagged:
        want[j] = min(target[j], held[j])
    assert list(out) == list(want)
    assert flood_guard(None, np.array(cur, float), held, target, 1.5)[1] == []


def test_fast_mode_refuses_defences(tmp_path):
    """The fast mode models plain LRU and no gate: a [defence] runs in the
    exact engine only (one line, exit 2), never silently ignored."""
    r = CliRunner().invoke(main, ["run", "--fast", "-q", "-o", str(tmp_path), "--set", "duration_ns=20000",
                                  "--set", "defence.admission.policy=doorkeeper", "--set", "defence.shed_backlog=8"])
    assert r.exit_code == 2 and "[defence] runs in the exact engine only" in r.output, r.output

"""`synapse sweep`: grid files (good and bad), points against single runs,
resuming, failing points, and the same Parquet from a local pool and from Ray."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
import requires

from synapse_vmt import sweep as sw
from synapse_vmt.errors import UserError
from synapse_vmt.scenario import load
from synapse_vmt.sim import Simulation

#: A small, quick scenario for every point.
SMALL = {"duration_ns": 40_000, "tables.0.rules.generate.count": 20, "traffic.flows": 150}

GRID = """
seeds = [1, 2]
[set]
duration_ns = 40000
"tables.0.rules.generate.count" = 20
traffic.flows = 150
[grid]
"pmus.count" = [2, 4]
"pmus.block_size" = [64, 256]
"""


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "synapse_vmt.cli", *args], capture_output=True, text=True, **kw)


def test_grid_is_every_combination_times_seeds_in_file_order(tmp_path):
    (tmp_path / "g.toml").write_text(GRID)
    g = sw.load_grid(tmp_path / "g.toml")
    assert g.keys == ["pmus.count", "pmus.block_size"]
    got = [(p.overrides["pmus.count"], p.overrides["pmus.block_size"], p.seed) for p in g.points]
    assert got == [(c, b, s) for c in (2, 4) for b in (64, 256) for s in (1, 2)]
    # Each point's config is what `synapse run --set ...` would build.
    p = g.points[5]
    want = load(None, ["duration_ns=40000", "tables.0.rules.generate.count=20", "traffic.flows=150",
                       "pmus.count=4", "pmus.block_size=64", "seed=2"]).sim_config()
    assert p.config == want
    assert len({p.id for p in g.points}) == 8


def test_points_list_and_grid_combine_and_the_base_scenario_counts(tmp_path):
    (tmp_path / "base.toml").write_text("seed = 7\nduration_ns = 40000.0\n[pmus]\ncount = 3\n")
    (tmp_path / "g.toml").write_text(
        'scenario = "base.toml"\n'
        '[[points]]\n"traffic.flows" = 100\n'
        '[[points]]\ntraffic.flows = 200\n"elu.algo" = "dtree"\n'
        '[grid]\n"pmus.block_size" = [64, 128]\n')
    g = sw.load_grid(tmp_path / "g.toml")
    assert g.keys == ["traffic.flows", "elu.algo", "pmus.block_size"]
    assert [(p.overrides["traffic.flows"], p.overrides["elu.algo"], p.overrides["pmus.block_size"], p.seed) for p in g.points] == [
        (100, None, 64, 7), (100, None, 128, 7), (200, "dtree", 64, 7), (200, "dtree", 128, 7)]
    assert all(p.config["pmus"]["count"] == 3 for p in g.points)
    # The id is the effective scenario's: a change in the base file changes every id.
    (tmp_path / "base.toml").write_text("seed = 7\nduration_ns = 50000.0\n[pmus]\ncount = 3\n")
    assert not {p.id for p in g.points} & {p.id for p in sw.load_grid(tmp_path / "g.toml").points}


@pytest.mark.parametrize(
    "text, line, message",
    [
        ('seeds = [1]\nsed = 3\n', 2, "sed: unknown key"),
        ('seeds = [1]\n\n[sweep]\nx = 1\n', 3, "sweep: unknown key"),
        ('[grid.pmus]\ncount = [2, 4]\nblok = [1]\n', 3, "pmus.blok = 1: pmus.blok: unknown key"),
        ('seeds = [1]\n[grid]\n"pmus.count" = [2, 4\n', 3, ""),
        ('seeds = [1]\n[grid]\n"pmus.count" = [2, 4]\n"pmus.cout" = [1]\n', 4, "pmus.cout = 1: pmus.cout: unknown key"),
        ('[grid]\n"pmus.count" = [2, "many"]\n', 2, 'pmus.count = "many": pmus.count'),
        ('[grid]\n"pmus.count" = 4\n', 2, "grid.pmus.count: expected a non-empty list"),
        ('seeds = [1, -2]\n', 1, "seeds: expected a non-empty list of integers"),
        ('[set]\nduration_ns = 1000\n\n[[points]]\n"pmus.count" = 2\n[[points]]\n"pmus.count" = -1\n', 7, "pmus.count = -1"),
        ('[grid]\n"tables.3.name" = ["x"]\n', 2, "tables.3: expected an index below 1"),
        ('[grid]\nseed = [1, 2]\n', 2, "seeds = [...]"),
        ('scenario = "missing.toml"\n', 1, "missing.toml: no such file"),
    ],
)
def test_bad_grid_is_one_line_naming_file_and_line(tmp_path, text, line, message):
    p = tmp_path / "g.toml"
    p.write_text(text)
    with pytest.raises(UserError) as e:
        sw.load_grid(p)
    msg = str(e.value)
    assert "\n" not in msg
    if "no such file" in message:
        assert message in msg
    else:
        assert msg.startswith(f"{p}:{line}: ") and message in msg, msg


def test_build_grid_from_python_names_the_bad_override():
    with pytest.raises(UserError, match=r"^<grid>: pmus\.count = -1: pmus\.count: "):
        sw.build_grid([{"pmus.count": 2}, {"pmus.count": -1}], fixed={"duration_ns": 1000})


def test_bad_grid_from_the_cli_exits_2_and_writes_nothing(tmp_path):
    (tmp_path / "g.toml").write_text('[grid]\n"pmus.nope" = [1]\n')
    r = _cli("sweep", str(tmp_path / "g.toml"), "-o", str(tmp_path / "out"))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"synapse: error: {tmp_path / 'g.toml'}:2: pmus.nope = 1: pmus.nope: unknown key"]
    assert not (tmp_path / "out").exists()


def test_sweep_rows_match_single_runs_and_a_rerun_skips_finished_points(tmp_path):
    g = sw.build_grid([{"pmus.count": 2}, {"pmus.count": 4}], fixed=SMALL, seeds=[1, 3])
    r = sw.run(g, tmp_path, workers=2, quiet=True)
    assert (r["ran"], r["skipped"], r["failed"]) == (4, 0, 0)
    t = pq.read_table(tmp_path / "results.parquet")
    assert t.column_names[:5] == ["pmus.count", "seed", "point", "table", "error"]
    assert t.num_rows == 4 and t["table"].to_pylist() == ["acl"] * 4
    # The oracle: the same point run directly through the Python API.
    for row in t.to_pylist():
        ovr = [f"{k}={v}" for k, v in SMALL.items()] + [f"pmus.count={row['pmus.count']}", f"seed={row['seed']}"]
        sim = Simulation(load(None, ovr))
        want = sim.run()["tables"]["acl"]
        for k in ("hit_rate", "mean_latency_ns", "p99_latency_ns", "hbm_gbps", "throughput_mpps", "keys"):
            assert row[k] == want[k], k
        s = json.loads((tmp_path / "points" / row["point"] / "summary.json").read_text())
        assert s["seed"] == row["seed"] and s["overrides"] == {"pmus.count": row["pmus.count"]}
    # Seeds differ: the traffic does.
    assert len({r["keys"] for r in t.to_pylist()}) > 1
    before = (tmp_path / "results.parquet").read_bytes()
    r2 = sw.run(g, tmp_path, workers=2, quiet=True)
    assert (r2["ran"], r2["skipped"]) == (0, 4)
    assert (tmp_path / "results.parquet").read_bytes() == before
    # A grown grid runs only its new points.
    g3 = sw.build_grid([{"pmus.count": 2}, {"pmus.count": 4}, {"pmus.count": 6}], fixed=SMALL, seeds=[1, 3])
    assert sw.run(g3, tmp_path, workers=1, quiet=True)["ran"] == 2


def test_a_failing_point_is_recorded_and_the_others_run(tmp_path):
    # A rules file that exists when the grid is read but not when the point runs.
    rules = tmp_path / "rules.txt"
    from synapse_vmt import _core

    rules.write_text(_core.RuleSet.generate("acl", 20, 1).format())
    g = sw.build_grid([{"tables.0.rules": {"path": str(rules)}}, {"pmus.count": 4}], fixed=SMALL, seeds=[1])
    rules.unlink()
    r = sw.run(g, tmp_path / "out", workers=2, quiet=True)
    assert (r["ran"], r["failed"]) == (2, 1)
    rows = pq.read_table(tmp_path / "out" / "results.parquet").to_pylist()
    assert rows[0]["error"] and "rules.txt" in rows[0]["error"] and rows[0]["table"] is None and rows[0]["hit_rate"] is None
    assert rows[1]["error"] is None and rows[1]["keys"] > 0
    # A rerun retries the failed point only.
    rules.write_text(_core.RuleSet.generate("acl", 20, 1).format())
    r = sw.run(g, tmp_path / "out", workers=1, quiet=True)
    assert (r["ran"], r["skipped"], r["failed"]) == (1, 1, 0)
    assert pq.read_table(tmp_path / "out" / "results.parquet")["error"].null_count == 2


def test_cli_sweep_writes_results_and_exits_1_on_a_failed_point(tmp_path):
    (tmp_path / "g.toml").write_text(GRID.replace("[2, 4]", "[2]").replace("[64, 256]", "[64]"))
    r = _cli("sweep", str(tmp_path / "g.toml"), "-o", str(tmp_path / "out"), "-w", "2")
    assert r.returncode == 0, r.stderr
    assert "2 points: ran 2" in r.stdout
    t = pq.read_table(tmp_path / "out" / "results.parquet")
    assert t.num_rows == 2 and t["seed"].to_pylist() == [1, 2]
    # A rules file that is not there passes validation (paths are the
    # simulator's to open) and fails its point only; `rules` is replaced whole.
    (tmp_path / "g.toml").write_text(
        GRID.replace('"pmus.block_size" = [64, 256]', "").replace("seeds = [1, 2]", "seeds = [1]")
        + f'[[points]]\ntables.0.rules = {{ path = "{tmp_path / "nope.txt"}" }}\n[[points]]\n"pmus.block_size" = 64\n')
    r = _cli("sweep", str(tmp_path / "g.toml"), "-o", str(tmp_path / "out2"), "-w", "2")
    assert r.returncode == 1, r.stderr
    rows = pq.read_table(tmp_path / "out2" / "results.parquet").to_pylist()
    assert len(rows) == 4 and [x["error"] is None for x in rows] == [False, False, True, True]
    assert "nope.txt" in rows[0]["error"] and "nope.txt" in r.stderr




def _ray():
    return requires.module("ray", "pip install '.[ray]'")


@pytest.mark.slow
def test_local_pool_and_ray_give_the_same_parquet_bit_for_bit(tmp_path):
    """The issue's done-when: a 2×2×5-seed grid, locally and on a local Ray instance."""
    rayi = _ray()
    (tmp_path / "g.toml").write_text(GRID.replace("seeds = [1, 2]", "seeds = [1, 2, 3, 4, 5]"))
    g = sw.load_grid(tmp_path / "g.toml")
    assert len(g.points) == 20
    sw.run(g, tmp_path / "pool", workers=2, quiet=True)
    try:
        sw.run(g, tmp_path / "ray", workers=2, ray="local", quiet=True)
    finally:
        rayi.shutdown()
    a = (tmp_path / "pool" / "results.parquet").read_bytes()
    assert a == (tmp_path / "ray" / "results.parquet").read_bytes()
    t = pq.read_table(tmp_path / "pool" / "results.parquet")
    assert t.num_rows == 20 and t["error"].null_count == 20


def test_mean_ci_is_the_student_t_interval():
    m, lo, hi = sw.mean_ci([1, 2, 3, 4, 5])
    h = 2.7764451051977987 * (2.5 ** 0.5) / 5 ** 0.5  # t(0.975, 4 dof) · s / √n
    assert m == 3 and lo == pytest.approx(3 - h) and hi == pytest.approx(3 + h)
    assert sw.mean_ci([4.0]) == (4.0, 4.0, 4.0)


def test_fig10_samples_through_the_sweep_equal_the_in_process_ones(tmp_path):
    import numpy as np

    from synapse_vmt.figures import fig10
    from synapse_vmt.figures.simexp import Setup, collect, core_factory

    setup = Setup(rules=50)
    per = fig10.sweep_samples(setup, [400], 120_000.0, 50_000.0, [2], tmp_path, workers=2)
    for n in fig10.PMU_COUNTS:
        want = collect(lambda c: core_factory({**c, "seed": 2}), setup, n, 400, 120_000.0, 50_000.0)
        got = per[2][(n, 400)]
        assert len(want) > 3
        np.testing.assert_array_equal(got.load_mpps, want.load_mpps)
        np.testing.assert_array_equal(got.throughput_mpps, want.throughput_mpps)
        np.testing.assert_array_equal(got.pmus, want.pmus)


@pytest.mark.parametrize("timeout", [
    Exception("The current node timed out during startup (forced by the test)"),
    RuntimeError("Timed out waiting for file /tmp/ray/session_x/gcs_server_port_0 (forced by the test)"),
])
def test_a_local_ray_start_that_times_out_is_cleaned_up_and_retried(monkeypatch, timeout):
    """Ray's node now and then times out in one of its fixed waits (the
    raylet's registration, the GCS port file): the half-started processes
    are stopped (no orphan, no ResourceWarning under -W error) and another
    start is made."""
    ray = _ray()
    import ray._private.node as node

    orig = node.Node.start_ray_processes
    first: list = []
    starts = []

    def first_times_out(self):
        orig(self)
        starts.append(self)
        if len(starts) == 1:
            first.extend(p.process for ps in self.all_processes.values() for p in ps)
            raise timeout

    monkeypatch.setattr(node.Node, "start_ray_processes", first_times_out)
    ray.shutdown()
    try:
        r = sw._ray_init("local", 1)
        assert len(starts) == 2 and r.is_initialized()
        assert first and all(p.poll() is not None for p in first), "the first node's processes were left running"
    finally:
        ray.shutdown()

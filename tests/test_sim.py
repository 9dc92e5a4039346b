"""The simulator from Python: scenario validation and overrides, the
Simulation wrapper against the contract, and `synapse run` end to end."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from synapse_vmt.errors import UserError
from synapse_vmt.scenario import Scenario, load
from synapse_vmt.sim import Simulation

SMALL = [
    "duration_ns=60000",
    "tables.0.rules.generate.count=20",
    "traffic.flows=200",
    "elu.lookup_slots=32",
]


@pytest.mark.parametrize(
    "overrides, check",
    [
        (["pmus.count=4", "pmus.block_size=256"], lambda s: (s.pmus.count, s.pmus.block_size) == (4, 256)),
        (["hbm.latency_ns=80.5"], lambda s: s.hbm.latency_ns == 80.5),
        (["interconnect.kind=crossbar"], lambda s: s.interconnect.kind == "crossbar"),
        (["interconnect.kind='bus'"], lambda s: s.interconnect.kind == "bus"),
        (["tables.0.pmus=[0, 2]"], lambda s: s.tables[0].pmus == [0, 2]),
        (["traffic.flows=10", "traffic.dist=caida2018"], lambda s: s.traffic.flows == 10 and s.traffic.dist == "caida2018"),
        (["traffic.dist='caida2019:1e6'"], lambda s: s.traffic.dist == "caida2019:1e6"),
        (["elu.algo=dtree"], lambda s: s.elu.algo == "dtree"),
        (["vmu.join=warm"], lambda s: s.vmu.join == "warm"),
    ],
)
def test_overrides_coerce_types(overrides, check):
    assert check(load(None, overrides))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["pmus.cout=4"], "pmus.cout: unknown key"),
        (["pmus.count=many"], "pmus.count"),
        (["pmus.count=-1"], "pmus.count"),
        (["interconnect.kind=mesh"], "interconnect.kind"),
        (["elu.algo=hicuts"], "elu.algo"),
        (["traffic.dist=caida2020"], "traffic.dist"),
        (["tables.3.name=x"], "tables.3: expected an index below 1"),
        (["pmus.count"], "expected key=value"),
        (["pmus.count=2", "tables.0.pmus=[5]"], "names PMU 5"),
        (["pmus.count.x=1"], "pmus.count: Input should be a valid integer"),
    ],
)
def test_bad_overrides_name_the_key(overrides, message):
    with pytest.raises(UserError, match=message.replace("[", r"\[").replace(".", r"\.")):
        load(None, overrides)


def test_toml_file_unknown_key_names_file_line_and_key(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('duration_ns = 1000.0\n[pmus]\ncount = 2\nblok = 3\n')
    with pytest.raises(UserError, match=r"s\.toml:4: pmus\.blok: unknown key"):
        load(p)
    # a bad value in the second [[tables]] is found there, a top-level key before any header
    p.write_text('duration_ns = 1000.0\n[[tables]]\nname = "a"\nlookup_bits = 8\n[[tables]]\nname = "b"\n'
                 'lookup_bits = 0\n')
    with pytest.raises(UserError, match=r"s\.toml:7: tables\.1\.lookup_bits: Input should be greater"):
        load(p)
    p.write_text('[pmus]\ncount = 2\n[vmu]\nduration_ns = 1000.0\n')
    with pytest.raises(UserError, match=r"s\.toml:4: vmu\.duration_ns: unknown key"):
        load(p)
    # a key set by --set, or left to its default, has no line in the file
    p.write_text('duration_ns = 1000.0\n[pmus]\ncount = 2\n')
    with pytest.raises(UserError, match=r"s\.toml: pmus\.count: Input should be a valid integer"):
        load(p, ["pmus.count=x"])
    p.write_text("duration_ns = = 3\n")
    with pytest.raises(UserError, match=r"s\.toml"):
        load(p)


def test_auto_pmus_split_evenly_and_rust_accepts_the_tree():
    s = load(None, ["pmus.count=5"])
    s.tables.append(s.tables[0].model_copy(update={"name": "fwd"}))
    cfg = s.sim_config()
    assert cfg["tables"][0]["pmus"] == [0, 2, 4] and cfg["tables"][1]["pmus"] == [1, 3]
    from synapse_vmt import _core

    # The Rust side fills the same defaults: a default scenario and the core's
    # default config agree field by field on the shared part.
    core = json.loads(_core.default_sim_config())
    mine = Scenario().sim_config()
    for section in ("pmus", "vmu", "pipeline", "interconnect", "elu", "hbm"):
        assert mine[section] == core[section], section


def test_simulation_contract_windows_edges_assign_invariants():
    scn = load(None, SMALL + ["pmus.count=4"])
    sim = Simulation(scn)
    sim.run_until(30_000)
    w = sim.windows()
    assert list(w["t_ns"]) == [10_000.0, 20_000.0, 30_000.0]
    for col in ["table", "arrived", "processed", "hits", "misses", "elu_requests", "hbm_bytes", "lat_mean_ns",
                "lat_p99_ns", "pmus", "cam_compares", "stalls", "drops", "fifo_max"]:
        assert isinstance(w[col], np.ndarray) and len(w[col]) == 3, col
    assert (w["pmus"] == 4).all()
    e = sim.edges()
    assert set(e) == {"t_ns", "src", "dst", "count"} and (e["dst"] == -1).all()
    assert e["count"].sum() == w["processed"].sum()
    sim.assign("acl", [0, 1])
    states = {p["id"]: p["state"] for p in sim.pmu_states()}
    assert states[0] == "associated" and states[2] in ("transient", "free")
    with pytest.raises(UserError, match="PMU 9"):
        sim.assign("acl", [9])
    sim.run_until(60_000)
    w2 = sim.windows()
    assert list(w2["t_ns"]) == [40_000.0, 50_000.0, 60_000.0]
    assert (w2["pmus"] == 2).all()
    inv = sim.check_invariants()
    # mid-run: nothing lost so far, but not ok while PHVs are in flight
    assert inv["lost"] == 0 and inv["created"] > 0 and inv["ok"] == (inv["in_flight"] == 0)
    s = sim.summary()
    assert set(s["tables"]["acl"]) >= {"hit_rate", "mean_latency_ns", "p99_latency_ns", "hbm_gbps", "offered_mpps",
                                       "throughput_mpps", "keys"}
    edges, counts = sim.latency_histogram("acl")
    # One entry per answered key: released ones plus answered ones still waiting in order.
    assert len(edges) == len(counts) + 1
    assert s["tables"]["acl"]["keys"] <= counts.sum() <= s["tables"]["acl"]["keys"] + inv["in_flight"]
    fin = sim.finish()
    assert fin["ok"] and fin["drained"] and fin["in_flight"] == 0 and fin["stuck"] == {}
    assert fin["exited"] + fin["dropped"] == fin["created"]


def test_a_warm_join_misses_less_than_a_cold_one_after_it():
    # PMU 2 joins mid-run: cold, the keys the ring moves to it miss once
    # each; warm, their old owners copy them first.
    misses = {}
    for join in ("cold", "warm"):
        sim = Simulation(load(None, SMALL + ["pmus.count=4", "tables.0.pmus=[0, 1]", "vmu.vnodes=8", f"vmu.join={join}"]))
        sim.run_until(30_000)
        sim.assign("acl", [0, 1, 2])
        sim.run_until(40_000)
        w = sim.windows()
        misses[join] = int(w["misses"][-1])
        assert sim.finish()["ok"]
    assert misses["warm"] < misses["cold"], misses


def test_synapse_run_writes_summary_csv_and_plot(tmp_path):
    out = tmp_path / "r"
    args = [sys.executable, "-m", "synapse_vmt.cli", "run", "-q", "-o", str(out)]
    for o in SMALL:
        args += ["--set", o]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    t = summary["tables"]["acl"]
    assert set(t) >= {"hit_rate", "mean_latency_ns", "p99_latency_ns", "hbm_gbps", "offered_mpps", "throughput_mpps", "keys"}
    assert summary["sim_keys_per_s"] > 0 and summary["invariants"]["ok"]
    lines = (out / "windows.csv").read_text().splitlines()
    assert lines[0].startswith("t_ns,table,arrived") and len(lines) == 1 + 6
    assert (out / "run.png").read_bytes()[:4] == b"\x89PNG"


def test_synapse_run_bad_key_is_one_line_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "synapse_vmt.cli", "run", "-o", str(tmp_path / "x"), "--set", "pmus.nope=1"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["synapse: error: <default scenario>: pmus.nope: unknown key"]
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("fig, n_points", [("fig7", 8), ("fig6", 24)])
def test_reproduce_quick_writes_outputs_and_the_paper_shapes_hold(tmp_path, fig, n_points):
    out = tmp_path / fig
    r = subprocess.run([sys.executable, "-m", "synapse_vmt.cli", "reproduce", fig, "--quick", "-q", "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert len(s["points"]) == n_points
    # Each point is a mean over --quick's 2 seeds, inside its 95 % interval.
    assert s["seeds"] == [1, 2] and all(p["seeds"] == 2 and p["hit_rate_lo"] <= p["hit_rate"] <= p["hit_rate_hi"]
                                        for p in s["points"])
    failed = [k for k, v in s["checks"].items() if not v]
    assert not failed, failed
    assert len((out / f"{fig}.csv").read_text().splitlines()) == n_points + 1
    assert (out / f"{fig}.png").read_bytes()[:4] == b"\x89PNG"


def test_rules_file_and_header_trace_replay(tmp_path):
    from synapse_vmt import _core

    rs = _core.RuleSet.generate("fw", 200, 3)
    tr = _core.Trace.generate(rs, 3000, 3)
    (tmp_path / "rules.txt").write_text(rs.format())
    (tmp_path / "trace.txt").write_text(tr.format())
    (tmp_path / "s.toml").write_text(
        'duration_ns = 40000.0\n'
        '[[tables]]\nname = "fw"\nrules = { path = "rules.txt" }\n'
        '[traffic]\nkind = "trace"\npath = "trace.txt"\nrate_mpps = 50.0\n'
    )
    scn = load(tmp_path / "s.toml")
    sim = Simulation(scn)
    s = sim.run()
    inv = sim.check_invariants()
    assert inv["created"] == 2000  # 50 Mpps for 40 µs
    assert s["tables"]["fw"]["keys"] + inv["in_flight"] + inv["dropped"] == 2000
    fin = sim.finish()
    assert fin["ok"] and fin["exited"] + fin["dropped"] == 2000
    (tmp_path / "s.toml").write_text('[traffic]\nkind = "trace"\npath = "missing.txt"\n')
    with pytest.raises(UserError, match="missing.txt"):
        Simulation(load(tmp_path / "s.toml"))


MIX_TOML = """
duration_ns = 400000.0
[[tables]]
name = "a"
rules = {generate = {type = "acl", count = 50, seed = 1}}
[[tables]]
name = "b"
rules = {generate = {type = "acl", count = 50, seed = 2}}
[entry]
a = 0.8
b = 0.2
[[mix]]
at_ns = 200000.0
entry = {a = 0.1, b = 0.9}
[traffic]
flows = 2000
"""


def _arrived(w, t0, t1):
    """Arrivals per table (0, 1) in the windows ending in (t0, t1]."""
    m = (w["t_ns"] > t0) & (w["t_ns"] <= t1)
    return [int(w["arrived"][m & (w["table"] == j)].sum()) for j in (0, 1)]


def test_mix_shifts_the_traffic_between_tables_at_its_time(tmp_path):
    """``[[mix]]``: arrivals split by the entry shares before the shift and by
    the mix's after it (binomial: 5 sigma), the same with the run chunked
    differently, and every PHV still gets the oracle's action."""
    p = tmp_path / "mix.toml"
    p.write_text(MIX_TOML)
    runs = []
    for chunk in (10_000.0, 130_000.0):
        sim = Simulation(load(p))
        sim.run(chunk_ns=chunk)
        assert sim.finish()["ok"]
        runs.append(sim.all_windows())
    w = runs[0]
    for (t0, t1), share in (((0.0, 200_000.0), 0.8), ((200_000.0, 400_000.0), 0.1)):
        a, b = _arrived(w, t0, t1)
        n = a + b
        assert n > 2000
        assert abs(a - share * n) < 5 * np.sqrt(n * share * (1 - share)), (t0, a, b)
    # the shift lands at its time, not at a chunk boundary: same counts
    assert np.array_equal(runs[0]["arrived"], runs[1]["arrived"])


def test_mix_errors_name_the_table_and_set_entry_checks():
    with pytest.raises(UserError, match="mix at 5.0 ns: no table named 'x'"):
        load(None, ["mix=[{at_ns = 5.0, entry = {x = 1.0}}]"])
    with pytest.raises(UserError, match="positive sum"):
        load(None, ["mix=[{at_ns = 5.0, entry = {acl = 0.0}}]"])
    sim = Simulation(load(None, SMALL))
    with pytest.raises(ValueError, match="no table named"):
        sim.core.set_entry({"nope": 1.0})
    # a dict config's mix is applied by the wrapper, not passed to Rust
    cfg = load(None, SMALL).sim_config() | {"mix": [{"at_ns": 0.0, "entry": {"acl": 1.0}}]}
    s = Simulation(cfg)
    s.run_until(30_000.0)
    assert s.finish()["ok"] and s.check_invariants()["created"] > 0


def test_phvs_in_flight_are_never_ok_and_a_run_ends_drained():
    """Stopped mid-traffic, PHVs are in flight and the invariants are not ok
    (they used to be); the drain stops the arrivals and runs on until every
    PHV left: then ok, with created = exited + dropped."""
    sim = Simulation(load(None, SMALL))
    sim.run_until(30_000.0)
    inv = sim.check_invariants()
    assert inv["in_flight"] > 0 and inv["lost"] == 0 and not inv["ok"], inv
    created = inv["created"]
    fin = sim.finish()
    assert fin["drained"] and fin["ok"] and fin["in_flight"] == 0 and fin["stuck"] == {}, fin
    assert fin["created"] == created  # no arrival after the drain began
    assert fin["exited"] + fin["dropped"] == created
    assert 0 < fin["drain_ns"] < 100_000.0


# One table without PMUs behind a very slow ELU (a linear scan of 2000 rules
# per key): its PHVs cannot leave within a 2 µs drain.
SLOW = ["duration_ns=30000", "drain_ns=2000", "pmus.count=1", "tables.0.rules.generate.count=2000",
        "tables.0.pmus=[]", "elu.algo=linear", "traffic.flows=400"]


def test_phvs_stuck_after_the_drain_limit_fail_the_run_naming_the_table(tmp_path):
    """`synapse run` says before the run which tables have no PMU, and a run
    whose PHVs are still in flight after drain_ns fails (exit 1) naming the
    table they are in, with summary.json written (drained false)."""
    out = tmp_path / "r"
    args = [sys.executable, "-m", "synapse_vmt.cli", "run", "-o", str(out)]
    for o in SLOW:
        args += ["--set", o]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    err = r.stderr.splitlines()
    assert err[0] == "synapse: warning: 1 table without a PMU (ELU only, no cache): acl", r.stderr
    assert any(ln.startswith("synapse: run failed: not drained:") and " at acl " in ln for ln in err), r.stderr
    s = json.loads((out / "summary.json").read_text())
    inv = s["invariants"]
    assert f"{inv['in_flight']} PHVs in flight after the drain" in " ".join(r.stdout.split())
    assert not inv["ok"] and not inv["drained"] and inv["stuck"] == {"acl": inv["in_flight"]} and inv["in_flight"] > 0
    assert s["warnings"] == ["1 table without a PMU (ELU only, no cache): acl"]
    # with time enough to drain, the same run passes
    r = subprocess.run(args + ["--set", "drain_ns=1e8", "-q"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "summary.json").read_text())["invariants"]["drained"]


def test_fewer_pmus_than_tables_is_said_before_the_run():
    scn = load(None, SMALL + ["pmus.count=2", "tables=[{name = 'a'}, {name = 'b'}, {name = 'c'}]"])
    sim = Simulation(scn)
    assert sim.warnings == ["2 PMUs for 3 tables: 1 table without a PMU (ELU only, no cache): c"]
    assert Simulation(load(None, SMALL)).warnings == []


@pytest.mark.parametrize("algo, setting, value", [("trie", "trie.stride", 4), ("dtree", "dtree.bucket", 2),
                                                  ("dtree", "dtree.facl.ls_engines", 5), ("ptree", "ptree.bucket", 8)])
def test_elu_build_settings_reach_the_simulators_structures(algo, setting, value):
    """``[elu.build]``: the simulator builds its ELU structure with the
    scenario's parameters (it used to take the defaults): its bytes equal the
    same structure's built alone with that setting (the classifier API), not
    the default's; a narrower trie stride makes every lookup read more levels."""
    from synapse_vmt import _core

    base = SMALL + [f"elu.algo={algo}", "tables.0.rules.generate.count=300", "pmus.block_size=16"]
    rules = _core.RuleSet.generate("acl", 300, 1)

    def run(extra):
        sim = Simulation(load(None, base + extra))
        s = sim.run()
        assert sim.finish()["ok"]
        w = sim.all_windows()
        return s["tables"]["acl"]["elu_bytes"], w["hbm_bytes"].sum() / w["elu_requests"].sum()

    (got, per_lookup), (dflt, per_lookup0) = run([f"elu.build.{setting}={value}"]), run([])
    key = setting.replace("dtree.facl.", "facl.")  # the classifier API's dotted names
    assert got == _core.Classifier(rules, algo, {key: str(value)}).memory_bytes()
    assert dflt == _core.Classifier(rules, algo).memory_bytes() != got
    if setting == "trie.stride":
        # one read per level: 8-bit strides consume the key in half the levels of 4-bit ones
        assert per_lookup > 1.5 * per_lookup0, (per_lookup, per_lookup0)


@pytest.mark.parametrize("setting, msg", [
    ("elu.build.trie.stride=0", "elu.build.trie.stride: Input should be greater than or equal to 1"),
    ("elu.build.tree.stride=4", "elu.build.tree: unknown key"),
    ("elu.build.dtree.facl.layers=4", "elu.build.dtree.facl.layers: unknown key"),
    ("elu.build.ptree.spfac=0.5", "elu.build.ptree.spfac: Input should be greater than or equal to 1"),
])
def test_elu_build_settings_are_validated(setting, msg):
    with pytest.raises(UserError) as e:
        load(None, [setting])
    assert str(e.value) == f"<default scenario>: {msg}"


def _rules_without_catch_alls(path, count=300, seed=1):
    """A generated ACL set less its all-wildcard rules, as a ClassBench file."""
    from synapse_vmt import _core

    lines = _core.RuleSet.generate("acl", count, seed).format().splitlines()
    kept = [ln for ln in lines if not ln.startswith("@0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00")]
    path.write_text("\n".join(kept) + "\n")
    return len(kept)


def test_nomatch_share_sends_a_share_of_the_flows_to_the_default_action(tmp_path):
    """``traffic.nomatch_share``: flows keyed to match no rule are answered with
    the default action, checked against the oracle (invariants ok, every
    structure); without the share every key lies inside a rule (0 defaults)."""
    _rules_without_catch_alls(tmp_path / "acl.rules")
    base = ["duration_ns=100000", f"tables.0.rules={{path = '{tmp_path / 'acl.rules'}'}}", "traffic.flows=1000",
            "pmus.block_size=32"]
    out = {}
    for algo in ("trie", "ptree"):
        for share in (0.0, 0.3):
            sim = Simulation(load(None, base + [f"elu.algo={algo}", f"traffic.nomatch_share={share}"]))
            s = sim.run()["tables"]["acl"]
            inv = sim.finish()
            assert inv["ok"] and inv["wrong_action"] == 0, (algo, share, inv)
            out[algo, share] = (s["default_answers"], s["keys"])
    for algo in ("trie", "ptree"):
        assert out[algo, 0.0][0] == 0
        d, keys = out[algo, 0.3]
        assert 0 < d < keys, (algo, d, keys)


@pytest.mark.parametrize("value, msg", [("1.5", "Input should be less than or equal to 1"),
                                        ("-0.1", "Input should be greater than or equal to 0")])
def test_nomatch_share_is_a_share(value, msg):
    with pytest.raises(UserError, match=f"traffic.nomatch_share: {msg}"):
        load(None, [f"traffic.nomatch_share={value}"])

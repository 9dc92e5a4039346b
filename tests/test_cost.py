"""Cost models (``synapse cost``, ``synapse reproduce cpu-model``): fits that
recover known parameters, Tofino blocks counted by hand, the PMU search
against the simulator, and the commands end to end."""

from __future__ import annotations

import copy
import json
import math
import re

import numpy as np
import pytest
from click.testing import CliRunner

from synapse_vmt import _core
from synapse_vmt.cli import main
from synapse_vmt.cost import asic, cpu, measure, vmt
from synapse_vmt.cost.params import Param, default_params, load_params
from synapse_vmt.errors import UserError
from test_p4_cfg import SMALL, table, write

P = default_params()


def _points(series, ns, f, nbytes):
    return [measure.Point(series, int(n), float(f(n)), int(nbytes(n)), 0.0) for n in ns]


L3_SMALL = Param(value=2**25, source="a 32 MiB L3 for the synthetic fits")
P_FIT = P.model_copy(update={"cpu": P.cpu.model_copy(update={"l3_bytes": L3_SMALL})})


def test_fits_recover_the_seed_forms():
    ns = np.array(measure.grid(10, 10_000_000), float)
    l3 = P_FIT.cpu.l3_bytes.value
    per = 64.0  # bytes per entry: L3 full at n = l3/64 (524288)
    true = dict(p=6.0, q=1.0, r=40.0, s=-3.0e8, t=1.0, u=2.0e6)
    inside = ns * per < l3
    pts = _points("exact", ns, lambda n: float(cpu.exact_cycles(n, true, l3 / per)), lambda n: n * per)
    f = measure.fit_series("exact", pts, P_FIT)
    assert f["boundary_n"] == pytest.approx(l3 / per)
    assert f["log_points"] == inside.sum() and f["hyperbolic_points"] == (~inside).sum()
    assert f["p"] == pytest.approx(6.0, rel=1e-3) and f["r"] == pytest.approx(40.0, rel=1e-3)
    assert f["s"] == pytest.approx(-3.0e8, rel=1e-2) and f["u"] == pytest.approx(2.0e6, rel=1e-2)
    assert f["error"] < 1e-3 and f["r2"] > 0.999
    lin = _points("ternary", ns[:9], lambda n: 1.5 * n + 30.0, lambda n: n)
    g = measure.fit_series("ternary", lin, P_FIT)
    assert (g["a"], g["b"]) == (pytest.approx(1.5), pytest.approx(30.0))
    # Noise shows up as error, not as a perfect fit.
    rng = np.random.default_rng(1)
    noisy = [measure.Point(q.series, q.n, q.cycles * (1 + 0.1 * rng.standard_normal()), q.bytes, 0) for q in lin]
    assert measure.fit_series("ternary", noisy, P_FIT)["error"] > 0.02


@pytest.mark.parametrize("series, form", [
    ("ternary", lambda n: 1.5 * n + 30.0),
    ("lpm", lambda n: 8.0 * np.log(n) + 5.0),
    ("ternary-dtree", lambda n: 3.0 * np.log(n) + 20.0),
])
def test_every_fit_reports_r2_and_leave_one_out_error(series, form):
    """R² and the leave-one-out error, recomputed here by refitting without each point."""
    rng = np.random.default_rng(3)
    ns = np.array(measure.grid(10, 100_000), float)
    y = np.array([form(n) for n in ns]) * (1 + 0.05 * rng.standard_normal(len(ns)))
    pts = [measure.Point(series, int(n), float(c), int(n), 0.0) for n, c in zip(ns, y)]
    f = measure.fit_series(series, pts, P_FIT)
    pred = cpu.linear_form(ns, f["a"], f["b"]) if series == "ternary" else cpu.log_form(ns, f["p"], 1.0, f["r"])
    assert f["r2"] == pytest.approx(1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2))
    loo = []
    for i in range(len(ns)):
        rest = [q for j, q in enumerate(pts) if j != i]
        g = measure.fit_series(series, rest, P_FIT)
        loo.append(float(cpu.linear_form(ns[i], g["a"], g["b"]) if series == "ternary" else cpu.log_form(ns[i], g["p"], 1.0, g["r"])))
    want = float(np.sqrt(np.mean(((np.array(loo) - y) / y) ** 2)))
    assert f["loo_error"] == pytest.approx(want, rel=1e-6)
    assert f["loo_error"] >= f["error"]  # a point the fit did not see is predicted worse


def test_exact_pieces_meet_at_the_l3_boundary():
    """For every key width the exact table's cost is continuous where its footprint fills L3."""
    for key_bytes in (4, 13, 16, 40):
        nb = cpu.boundary_entries(key_bytes, P)
        assert float(cpu.exact_footprint(nb, key_bytes, P)) == pytest.approx(P.cpu.l3_bytes.value)
        below = cpu.table_cycles("exact", int(nb * (1 - 1e-6)), key_bytes, P)
        above = cpu.table_cycles("exact", int(nb * (1 + 1e-6)) + 1, key_bytes, P)
        assert above == pytest.approx(below, rel=1e-3), key_bytes
        assert cpu.table_cycles("exact", int(4 * nb), key_bytes, P) > above  # and it rises beyond


def test_asic_blocks_by_hand():
    # 1024 exact entries of a 48-bit key: 48+12 = 60 bits, two per 128-bit
    # word; 1024/0.8 = 1280 slots -> 640 words -> 1 block, but one block per
    # hash way: 4; 32-bit action data: four per word -> 256 words -> 1 block.
    c = asic.table_cost("exact", 1024, 48, 32, P)
    assert (c.sram_blocks, c.tcam_blocks, c.memory) == (4 + 1, 0, "sram")
    # Narrow entries: an 8-bit key (20 bits with overhead) would fit six to a
    # word, but a word holds at most five: 40,000 / 0.8 = 50,000 slots / 5 =
    # 10,000 words -> 10 blocks (six to a word: 9); 4-bit action data: five
    # to a word (not 32): 8,000 words -> 8 blocks.
    n = asic.table_cost("exact", 40_000, 8, 4, P)
    assert n.sram_blocks == 10 + 8
    # One entry still takes a block per hash way.
    assert asic.table_cost("exact", 1, 16, 0, P).sram_blocks == 4
    # A 233-bit ternary key: 6 slices of 44 bits x 2 rows of 512 = 12 TCAM
    # blocks; the overhead words (12 bits, 10 per word) -> 103 words -> 1 block.
    t = asic.table_cost("ternary", 1024, 233, 0, P)
    assert (t.sram_blocks, t.tcam_blocks) == (1, 12)
    # A 200-bit exact key takes two words per entry.
    w = asic.table_cost("exact", 4096, 200, 0, P)
    assert w.sram_blocks == math.ceil(2 * math.ceil(4096 / 0.8) / 1024)
    assert asic.capacity(P) == (960, 288)
    assert asic.table_capacity(P) == (12 * 16, 12 * 8)


def test_asic_per_stage_table_limits():
    small_exact = asic.table_cost("exact", 100, 32, 8, P)
    small_ternary = asic.table_cost("ternary", 100, 40, 8, P)  # one 44-bit slice: one TCAM block
    # 97 small ternary tables: blocks to spare, but 12 stages hold 96 ternary tables
    assert asic.stage_tables([small_ternary] * 97, P) == (97, 97)
    assert 97 * small_ternary.tcam_blocks <= asic.capacity(P)[1]
    # a table over two stages' SRAM takes a table in each: 193 logical tables from 191 + one spanning 2
    big = asic.table_cost("exact", 150_000, 32, 8, P)  # 92 + 30 blocks: more than one stage holds
    assert asic.stages_spanned(big, P) == 2
    assert asic.stage_tables([small_exact] * 191 + [big], P)[0] == 193 > asic.table_capacity(P)[0]


def test_cpu_model_pieces():
    assert cpu.kind_of(["exact", "lpm"]) == "lpm"
    assert cpu.kind_of(["lpm", "range"]) == "ternary"
    assert cpu.kind_of(["exact"]) == "exact"
    small, huge = cpu.table_cycles("exact", 100, 16, P), cpu.table_cycles("exact", 10**8, 16, P)
    assert huge > small  # beyond L3 the hyperbolic piece takes over
    assert cpu.table_cycles("ternary", 2000, 16, P) > cpu.table_cycles("ternary", 1000, 16, P)


def test_params_file_errors(tmp_path):
    good = (load_params.__globals__["DEFAULT"]).read_text()
    bad = tmp_path / "p.toml"
    bad.write_text(good.replace("[synapse]", "[synapse]\nfoo = { value = 1, source = \"x y z\" }"))
    with pytest.raises(UserError, match=r"p\.toml: synapse\.foo"):
        load_params(bad)
    bad.write_text(re.sub(r"base_cycles = \{ value = ([^,]+), source = ", r"base_cycles = { value = \1, nosource = ", good))
    assert bad.read_text() != good
    with pytest.raises(UserError, match=r"p\.toml: cpu\.base_cycles"):
        load_params(bad)
    bad.write_text("[cpu\n")
    with pytest.raises(UserError, match=r"p\.toml"):
        load_params(bad)


def test_cost_tables_hit_and_agree():
    for kind, algo in [("exact", "exact"), ("lpm", "trie"), ("ternary", "linear")]:
        t = _core.CostTable(kind, algo, 300, seed=3, keys=2000)
        assert t.run(2000) == 2000, kind  # keys are drawn from the entries
        assert t.bytes > 0
    lin = _core.CostTable("ternary", "linear", 500, seed=2, keys=4000)
    dt = _core.CostTable("ternary", "dtree", 500, seed=2, keys=4000)
    assert lin.run(4000) == dt.run(4000)
    with pytest.raises(MemoryError):
        _core.CostTable("lpm", "trie", 2000, config={"trie.max_bytes": "1000"})
    with pytest.raises(ValueError, match="unknown table kind"):
        _core.CostTable("hash", "exact", 10)


def test_hbm_bytes_are_the_elu_structure_over_the_entries(tmp_path):
    from synapse_vmt.p4.bmv2 import read_program
    from synapse_vmt.p4.entrygen import gen_table

    doc = _small_with_actions()
    doc["pipelines"][0]["tables"].append(table("ex", [("exact", ["ip", "src"]), ("exact", ["ip", "proto"])], {"drop": None}))
    doc["pipelines"][0]["tables"][-1]["action_ids"] = [1]
    prog = read_program(write(tmp_path, doc))
    ex = prog.tables["ex"]
    ents = gen_table(ex, 500, 3)
    got, algo = vmt.hbm_bytes(ex, ents)
    # 2 words + rule: 12-byte records, 5 per 64-byte line; 2n slots.
    assert algo == "exact" and got == (1 << math.ceil(math.log2(math.ceil(2 * len(ents) / 5)))) * 64
    fwd = prog.tables["fwd"]
    got, algo = vmt.hbm_bytes(fwd, gen_table(fwd, 300, 3))
    assert algo == "trie" and got > 0
    assert vmt.hbm_bytes(fwd, []) == (0, "trie")
    assert vmt.elu_structure(["exact", "ternary"]) == "dtree"


def test_pmu_search_is_the_fewest_that_meet_the_target():
    got, top = vmt.pmus_needed(60.0, 0.9, None, 256, 16)
    assert got is not None and top.pmus == 16
    assert got.hit_rate >= min(0.9, top.hit_rate - 0.005)
    if got.pmus > 1:
        flows = max(1, round(vmt.quantize_rate(60.0) / vmt._mpps_per_flow(256)))
        below = vmt._simulate(got.pmus - 1, flows, 256)
        assert below.hit_rate < min(0.9, top.hit_rate - 0.005) or below.carried < min(0.99, top.carried - 0.005)
    assert vmt.quantize_rate(60.0) >= 60.0 > vmt.quantize_rate(60.0) / vmt.RATE_STEP


def _small_with_actions():
    doc = copy.deepcopy(SMALL)
    doc["actions"] = [{"name": "set", "id": 0, "runtime_data": [{"name": "port", "bitwidth": 9}]},
                      {"name": "drop", "id": 1, "runtime_data": []}]
    for t in doc["pipelines"][0]["tables"]:
        t["action_ids"] = [0, 1] if t["name"] == "fwd" else [1]
    return doc


def test_cost_command_json(tmp_path):
    prog = write(tmp_path, _small_with_actions())
    r = CliRunner().invoke(main, ["cost", str(prog), "--json", "--no-pmus", "-o", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert set(res["tables"]) == {"acl", "fwd"}
    fwd = res["tables"]["fwd"]
    assert fwd["kind"] == "lpm" and fwd["entries"] == 1024 and fwd["action_bits"] == 9
    for k in ("cpu_cycles_per_packet", "asic_sram_blocks", "asic_tcam_blocks", "synapse_pmus", "hbm_bytes"):
        assert k in fwd
    tot = res["total"]
    assert tot["asic_tcam_blocks"] == sum(t["asic_tcam_blocks"] for t in res["tables"].values())
    visits = {n: t["visits"] for n, t in res["tables"].items()}
    assert visits == {"acl": pytest.approx(0.5), "fwd": pytest.approx(0.75)}
    base = P.cpu.base_cycles.value
    assert tot["cpu_cycles_per_packet"] == pytest.approx(base + sum(t["visits"] * t["cpu_cycles_per_packet"] for t in res["tables"].values()))
    assert res["fits_asic"] is True
    for f in ("cost.json", "cost.csv", "cost.png"):
        assert (tmp_path / "out" / f).stat().st_size > 0


def test_cost_command_with_pmus(tmp_path):
    prog = write(tmp_path, _small_with_actions())
    r = CliRunner().invoke(main, ["cost", str(prog), "--json", "--rate-mpps", "40"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert all(t["synapse_pmus"] >= 1 for t in res["tables"].values())
    assert res["total"]["synapse_pmus"] == sum(t["synapse_pmus"] for t in res["tables"].values())


@pytest.mark.parametrize("args,msg", [
    (["--rate-mpps", "0"], "--rate-mpps"),
    (["--params", "/nonexistent.toml"], "nonexistent.toml"),
])
def test_cost_command_bad_input(tmp_path, args, msg):
    prog = write(tmp_path, _small_with_actions())
    r = CliRunner().invoke(main, ["cost", str(prog), "--no-pmus", *args])
    assert r.exit_code == 2 and msg in r.output
    r = CliRunner().invoke(main, ["cost", str(tmp_path / "missing.json")])
    assert r.exit_code == 2


@pytest.mark.parametrize("name", ["up4-bmv2.json", "switch-p416.json"])
def test_cost_on_real_programs(shared_data, name):
    from synapse_vmt.cost.program import program_cost

    res = program_cost(shared_data / "p4" / name, P, 100.0, pmus=False)
    n = {"up4-bmv2.json": 10, "switch-p416.json": 123}[name]
    assert len(res["tables"]) == n
    assert res["total"]["asic_sram_blocks"] > 0 and res["total"]["cpu_mpps_per_core"] > 0
    acl = [t for t in res["tables"].values() if t["kind"] == "ternary"]
    assert acl and all(t["asic_tcam_blocks"] > 0 for t in acl)


def test_reproduce_cpu_model_small(tmp_path, monkeypatch):
    from synapse_vmt.cost import machine
    from synapse_vmt.figures import cpu_model

    monkeypatch.setattr(measure, "SERIES", {k: (a, b, 200) for k, (a, b, _) in measure.SERIES.items()})
    s = cpu_model.run(tmp_path, quick=True, quiet=True)
    assert set(s["fits"]) == set(measure.SERIES)
    m = s["machine"]
    assert m["simd"] and s["fits"]["ternary"]["a"] > 0
    for f in s["fits"].values():
        assert "r2" in f and "loo_error" in f or "log_r2" in f
    # the clock and the base are this host's, measured
    assert m["clock_hz"] != P.cpu.clock_hz.value and 0 < s["base_cycles"] != P.cpu.base_cycles.value
    if m["cpuinfo_mhz"]:
        assert 0.5 < m["clock_hz"] / (m["cpuinfo_mhz"] * 1e6) < 2.0
    # params-fit.toml is a whole parameter file for --params, with this machine's fingerprint
    p = load_params(tmp_path / "params-fit.toml")
    assert p.cpu.base_cycles.value == pytest.approx(s["base_cycles"], rel=1e-3)
    assert p.cpu.clock_hz.value == pytest.approx(m["clock_hz"], rel=1e-5)
    assert machine.differences(p.cpu.machine.fingerprint(), m) == []
    text = (tmp_path / "params-fit.toml").read_text()
    assert "[cpu.fit.exact]" in text and "R²" in text and "leave-one-out error" in text
    rows = (tmp_path / "cpu_model.csv").read_text().splitlines()
    assert len(rows) == 1 + 4 * len(measure.grid(10, 200))


def test_the_clock_is_measured_not_read():
    """A loop of known cycles against /proc/cpuinfo's clock: the same rate within
    a factor that boost and a loaded host allow (an add chain the core folds, or a
    wrong cycle count per iteration, is off by several times)."""
    from synapse_vmt.cost import machine

    hz = machine.measure_clock(min_s=0.02, rounds=3)
    mhz = machine.fingerprint(hz)["cpuinfo_mhz"]
    if mhz:
        assert 0.5 < hz / (mhz * 1e6) < 2.0
    assert 2e8 < hz < 8e9


def test_cost_warns_when_the_model_was_fitted_on_another_machine(tmp_path, monkeypatch):
    from synapse_vmt.cost import machine

    prog = write(tmp_path, _small_with_actions())
    here = {**P.cpu.machine.fingerprint()}
    monkeypatch.setattr(machine, "fingerprint", lambda clock_hz=None: dict(here))
    r = CliRunner().invoke(main, ["cost", str(prog), "--json", "--no-pmus"])
    assert r.exit_code == 0 and "warning" not in r.stderr, r.stderr
    assert json.loads(r.stdout)["cpu_model_machine"]["differences"] == []
    here.update(cpu="Some Other CPU", l3_bytes=8 << 20)
    r = CliRunner().invoke(main, ["cost", str(prog), "--json", "--no-pmus"])
    assert r.exit_code == 0
    assert "warning: the CPU model was fitted on another machine" in r.stderr and "Some Other CPU" in r.stderr
    diff = json.loads(r.stdout)["cpu_model_machine"]["differences"]
    assert len(diff) == 2 and diff[0].startswith("cpu:") and diff[1].startswith("l3_bytes:")


def test_cost_command_counts_an_entries_file(tmp_path):
    prog = write(tmp_path, _small_with_actions())
    ents = tmp_path / "e.txt"
    r = CliRunner().invoke(main, ["p4", "entries", "gen", str(prog), "--table", "fwd", "--count", "300", "--seed", "2",
                                  "-o", str(ents)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["cost", str(prog), "--entries", str(ents), "--json", "--no-pmus"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res["tables"]["fwd"]["entries"] == 300 and res["tables"]["acl"]["entries"] == 0
    ents.write_text("table_add nosuch set 1 => 2\n")
    r = CliRunner().invoke(main, ["cost", str(prog), "--entries", str(ents), "--no-pmus"])
    assert r.exit_code == 2 and "e.txt:1" in r.output

"""RTL (python/synapse_vmt/hw/rtl) against the Rust model, cycle for cycle.

A short co-simulation of each unit runs everywhere iverilog and cocotb are
installed (CI installs both); the long one runs with SYNAPSE_COSIM_LONG=1
(``SYNAPSE_COSIM_LONG=1 pytest -m cosim_long``).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from synapse_vmt import _core
from synapse_vmt.hw import cosim

import requires



@pytest.fixture(autouse=True)
def _tools():
    """iverilog and cocotb: skip without them, fail under CI (requires.py)."""
    requires.tool(cosim.have_tools())


LONG = os.environ.get("SYNAPSE_COSIM_LONG") == "1"


@pytest.mark.parametrize("profile", sorted(cosim.PMU_PROFILES))
def test_pmu_rtl_matches_the_model(profile):
    r = cosim.cosim_pmu(profile, cycles=1500, seed=3)
    assert r.ok, r.mismatches
    assert r.compared > 500


def test_pmu_rtl_matches_the_model_on_a_stream_recorded_from_synapse_run():
    r = cosim.cosim_recorded(cycles=1500, seed=2)
    assert r.ok, r.mismatches
    assert r.compared > 200


def test_a_recorded_stream_cut_too_short_is_refused():
    from synapse_vmt.scenario import load

    cfg = json.dumps(load(None, []).sim_config())
    stim, _, info = _core.pmu_record(cfg, 0, 250_000, 3000, cosim.RECORD_MAX_GAP)
    assert info["differ_from_sim"] == 0 and stim["req_valid"].sum() > 100
    with pytest.raises(ValueError, match="fill with no miss outstanding"):
        _core.pmu_record(cfg, 0, 250_000, 3000, 1)


@pytest.mark.parametrize("profile", sorted(cosim.ORB_PROFILES))
def test_orb_rtl_matches_the_model(profile):
    r = cosim.cosim_orb(profile, cycles=1500, seed=3)
    assert r.ok, r.mismatches
    assert r.compared > 50


@pytest.mark.parametrize("profile", sorted(cosim.VMU_PROFILES))
def test_vmu_rtl_matches_the_model(profile):
    r = cosim.cosim_vmu(profile, cycles=1500, seed=3)
    assert r.ok, r.mismatches
    assert r.compared > 200


def test_pmu_233_bit_keys():
    r = cosim.cosim_pmu("corner", cycles=800, seed=5, key_bits=233)
    assert r.ok, r.mismatches


def test_a_changed_response_or_a_late_one_is_caught():
    cfg, gen = cosim.PMU_PROFILES["random"]
    cfg = dict(cfg, count=1, clock_ratio=1.0)
    gen = dict(gen, cycles=400, seed=2, key_bits=104)
    stim, model = _core.pmu_generate(json.dumps(cfg), json.dumps(gen))
    # The replay of the stimulus alone gives the generator's outputs.
    again = _core.pmu_run(json.dumps(cfg), 104, stim)
    assert all(np.array_equal(again[k], model[k]) for k in model)
    hits = np.flatnonzero(model["rsp_kind"] == 1)
    wrong = {k: v.copy() for k, v in model.items()}
    wrong["rsp_act"][hits[3]] += 1
    r = cosim.compare_pmu(cfg, 104, stim, wrong, fill_slots=32)
    assert not r.ok and f"cycle {hits[3]}:" in r.mismatches[0]
    late = {k: v.copy() for k, v in model.items()}
    for k in ("rsp_kind", "rsp_tag", "rsp_tbl", "rsp_act", "rsp_cmp"):
        late[k][1:] = model[k][:-1]
    assert not cosim.compare_pmu(cfg, 104, stim, late, fill_slots=32).ok


@pytest.mark.cosim_long
@pytest.mark.skipif(not LONG, reason="long co-simulation: set SYNAPSE_COSIM_LONG=1")
@pytest.mark.parametrize("unit", ["pmu", "vmu", "orb", "cluster"])
def test_long_cosim(unit):
    for r in cosim.run(unit, cycles=50_000, seed=11):
        assert r.ok, (r.profile, r.mismatches)


#: RTL mutants of the pipelined PMU (what it must get right beyond the
#: single-cycle design), each of which the co-simulation must catch.
PMU_MUTANTS = {
    "the victim ignores last cycle's touches": ("wire pend = px1 | px2;", "wire pend = 1'b0;"),
    "a lookup hit does not touch the LRU": ("px2 <= issue && lm;", "px2 <= 1'b0;"),
    "a slot the fill overwrote still hits": ("assign o_hit = s_m && !s_w;", "assign o_hit = s_m;"),
    "the fill's key is not forwarded to the lookup": ("wire l_hit = s_fk | any_hit;", "wire l_hit = any_hit;"),
    "ages ignore the lookup touch": ("synapse_lt #(.W(AW)) lt2 (.a(age), .b(a2), .y(c2));", "assign c2 = 1'b0;"),
    "a touch on both x1 and x2 ages the others twice": ("assign o_a2 = (px2 && !px1) ? age", "assign o_a2 = px2 ? age"),
    "the slot x1 ignores the lookup's other touch": ("assign y[0] = is_x1 ? h2x :", "assign y[0] = is_x1 ? 1'b0 :"),
    "the victim ignores a pending slot of age N-2": ("(v3 & g1 & g2)", "(v3 & g1)"),
    "Q_p room ignores this cycle's fill": ("(!fill_valid && !ret_v) ? qp_base < QP", "(!ret_v) ? qp_base < QP"),
}


@pytest.mark.parametrize("name", sorted(PMU_MUTANTS))
def test_every_pmu_rtl_mutant_fails_the_cosimulation(name, tmp_path, monkeypatch):
    old, new = PMU_MUTANTS[name]
    src = (cosim.RTL_DIR / "synapse_pmu.v").read_text()
    assert src.count(old) == 1, f"mutant {name!r} no longer applies to the RTL"
    (tmp_path / "synapse_pmu.v").write_text(src.replace(old, new))
    monkeypatch.setattr(cosim, "RTL_DIR", tmp_path)
    caught = [p for p in ("corner", "collide") if not cosim.cosim_pmu(p, cycles=1500, seed=3).ok]
    assert caught, f"no profile tells the mutant ({name}) from the model"


def test_a_vmu_that_does_not_forward_a_cpu_write_to_its_read_fails_the_cosimulation(tmp_path, monkeypatch):
    """The VMU reads its table (a BRAM) a cycle ahead: a CPU write to the
    entry being read must reach the PHV that needs it, as in the model."""
    old = "wire [PMU_W:0] route = fwd ? fwd_data : rd;"
    src = (cosim.RTL_DIR / "synapse_vmu.v").read_text()
    assert src.count(old) == 1
    (tmp_path / "synapse_vmu.v").write_text(src.replace(old, "wire [PMU_W:0] route = rd;"))
    monkeypatch.setattr(cosim, "RTL_DIR", tmp_path)
    assert not cosim.cosim_vmu("direct", cycles=1500, seed=3).ok


@pytest.mark.parametrize("pmus", [4, 8])
@pytest.mark.parametrize("profile", cosim.CLUSTER_PROFILES)
def test_cluster_rtl_matches_the_simulator_on_a_recorded_run(profile, pmus):
    """VMUs, the segmented-channel interconnect, N PMUs and the bus, replayed
    from a recorded `synapse run`: every request (which table won a
    channel), response, miss on the bus and release on the simulator's cycle."""
    r = cosim.cosim_cluster(profile, pmus, cycles=CLUSTER_ROWS, seed=2)
    assert r.ok, r.mismatches
    assert r.compared > 200


#: Rows of the cluster co-simulations in CI (after the lookup tables' preload).
CLUSTER_ROWS = 1500


def test_the_tables_profile_makes_channel_conflicts_and_direct_keys():
    """The multi-table recording reaches what the cluster arbitrates: two
    tables wanting one channel in a cycle (one waits), and keys of the table
    without PMUs on the bus's direct source."""
    cfg = cosim.cluster_config("tables", 4, 16, 2)
    rec = json.loads(_core.cluster_record(json.dumps(cfg), CLUSTER_ROWS))
    ev = rec["events"]
    # A conflict: a table's PHV, routed to PMU p, not sent in a cycle in
    # which another table sent to a PMU on p's channel (PMUs 0, 1 are on
    # channel 0, PMUs 2, 3 on channel 1).
    chan = lambda p: p * 2 // 4  # noqa: E731
    sent: dict[int, dict[int, int]] = {}
    for e in ev:
        if e[1] == "req":
            sent.setdefault(e[0], {})[e[2]] = e[3]
    lost = [e for e in ev if e[1] == "phv" and e[2] not in sent.get(e[0], {}) and rec["luts"][e[2]][e[3]] >= 0
            and any(chan(q) == chan(rec["luts"][e[2]][e[3]]) for q in sent.get(e[0], {}).values())]
    assert len(lost) >= 3, lost
    assert sum(e[1] == "bus" and e[2] == 4 for e in ev) > 20, "direct keys on the bus"
    assert len({e[3] for e in ev if e[1] == "req"}) == 4


#: RTL mutants of the cluster, each of which the co-simulation must catch.
CLUSTER_MUTANTS = {
    "a fixed table priority on a channel": ("pos_b < pos_a", "j < i"),
    "a channel segment off by one": ("if (p == q) chan = (q * CH) / NP;", "if (p == q) chan = ((q + 1) * CH) / NP;"),
    "the bus's round robin restarts at PMU 0": ("mask[i] <= pk[NP];", "mask[i] <= 1'b1;"),
    "a request reaches its PMU a cycle early": ("localparam LS = LAT - 1;", "localparam LS = LAT - 2;"),
}
#: ... and of a VMU inside the cluster (synapse_vmu.v).
CLUSTER_VMU_MUTANTS = {
    "a release frees its window slot in its own cycle": ("wire room = !full_r;", "wire room = !full_r || rel_valid;"),
    "a request refused a channel still takes its window slot": ("? t1 : t0;", "|| want ? t1 : t0;"),
    "a table entry's no-PMU bit is not stored with it": ("wire [PMU_W:0] lut_row = {lut_data == INVALID, lut_data};",
                                                         "wire [PMU_W:0] lut_row = {1'b0, lut_data};"),
}


@pytest.mark.parametrize("name", sorted(CLUSTER_MUTANTS) + sorted(CLUSTER_VMU_MUTANTS))
def test_every_cluster_rtl_mutant_fails_the_cosimulation(name, tmp_path):
    f = "synapse_cluster.v" if name in CLUSTER_MUTANTS else "synapse_vmu.v"
    old, new = {**CLUSTER_MUTANTS, **CLUSTER_VMU_MUTANTS}[name]
    for v in cosim.RTL_DIR.glob("*.v"):
        (tmp_path / v.name).write_text(v.read_text())
    src = (cosim.RTL_DIR / f).read_text()
    assert src.count(old) == 1, f"mutant {name!r} no longer applies to the RTL"
    (tmp_path / f).write_text(src.replace(old, new))
    r = cosim.cosim_cluster("tables", 4, cycles=CLUSTER_ROWS, seed=2, rtl_dir=tmp_path)
    assert not r.ok, f"the co-simulation does not tell the mutant ({name}) from the model"


@pytest.mark.parametrize("profile", sorted(cosim.ADMIT_PROFILES))
def test_admit_rtl_matches_the_model(profile):
    """The doorkeeper (synapse_admit.v) against hw/admit.rs: every answer
    (admitted / seen, the filter's clear) on its cycle."""
    r = cosim.cosim_admit(profile, cycles=3000, seed=3)
    assert r.ok, r.mismatches
    assert r.compared > 1500


def test_the_admit_profiles_reach_clears_refusals_and_back_to_back_repeats():
    """What the churn profile must exercise for its mutants to show: filter
    clears, refused fills and first-seen keys, admitted repeats, and an
    operation on a key the previous cycle's operation recorded (the
    forwarding of a write that lands after the read)."""
    entries, adm, gen = cosim.ADMIT_PROFILES["churn"]
    rng = np.random.default_rng(3)
    pool = rng.integers(0, 1 << 32, size=(gen["keys"], 8), dtype=np.uint64).astype(np.uint32)
    op = rng.integers(1, 3, size=2000).astype(np.int64)
    keys = pool[rng.integers(0, gen["keys"], size=2000)]
    m = _core.admit_replay(json.dumps(dict(adm, policy="doorkeeper")), entries, op, np.ones(2000, np.int64),
                           np.ascontiguousarray(keys))
    assert m["clear"].sum() > 10 and 0 < m["yes"].sum() < 2000
    rec = m["yes"] == 0
    same = (m["h0"][1:] == m["h0"][:-1]) & rec[:-1]
    assert (same & (m["yes"][1:] == 1)).sum() > 5


#: RTL mutants of the doorkeeper, each of which the co-simulation must catch.
ADMIT_MUTANTS = {
    "the last write is not forwarded to the next read": (
        "wire b0 = (older && (a_b0 || fv0)) || fw0;", "wire b0 = older && (a_b0 || fv0);"),
    "the write before last is not forwarded": (
        "wire b1 = (older && (a_b1 || fv1)) || fw1;", "wire b1 = (older && a_b1) || fw1;"),
    "a clear by the write before last is not forwarded": ("wire older = !v_clear;", "wire older = 1'b1;"),
    "a clear is not forwarded": ("wire contains = !w_clear && b0 && b1;", "wire contains = b0 && b1;"),
    "the filter clears a record late": ("wire clear = rec && recorded == RESET_AFTER - 1;",
                                        "wire clear = rec && recorded == RESET_AFTER;"),
    "a fill into a CAM with room is refused": ("(a_op == 2'd1 && (!a_full || contains))", "(a_op == 2'd1 && contains)"),
    "a rewritten word drops the last write's bit": (
        "| (w_rec && wa(w_h0) == wa(a_h0) ? one(w_h0) : z) | one(a_h0);", "| one(a_h0);"),
    "a rewritten word drops the bit of the write before last": (
        "(a_v1 ? a_d1 : z) | (v_rec && wa(v_h1) == wa(a_h1) ? one(v_h1) : z);", "(a_v1 ? a_d1 : z);"),
    "a rewritten word drops the bits read": ("(a_v0 ? a_d0 : z)", "z"),
    "a rewritten word keeps the bits of a word not valid": ("(a_v1 ? a_d1 : z)", "a_d1"),
    "a word rewritten after a pending clear keeps its old bits": (
        "wire keep = older && !w_clear;", "wire keep = older;"),
    "a clear leaves the words valid": (
        "if (w_clear) begin\n                valid0 <= 0;", "if (w_clear) begin\n                valid0 <= valid0;"),
}


@pytest.mark.parametrize("name", sorted(ADMIT_MUTANTS))
def test_every_admit_rtl_mutant_fails_the_cosimulation(name, tmp_path):
    old, new = ADMIT_MUTANTS[name]
    src = (cosim.RTL_DIR / "synapse_admit.v").read_text()
    assert src.count(old) == 1, f"mutant {name!r} no longer applies to the RTL"
    (tmp_path / "synapse_admit.v").write_text(src.replace(old, new))
    caught = [p for p in cosim.ADMIT_PROFILES if not cosim.cosim_admit(p, cycles=1500, seed=3, rtl_dir=tmp_path).ok]
    assert caught, f"no profile tells the mutant ({name}) from the model"

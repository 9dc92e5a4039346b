"""Co-simulation of the RTL (``rtl/*.v``) against the Rust model.

The model makes the stimulus: a closed-loop run of one unit with a fake ELU
(``_core.pmu_generate``), whose per-cycle inputs are replayed into the RTL
by cocotb under Icarus Verilog (``tb.py``). Every cycle's outputs are
compared: each response's presence, fields and cycle, each miss sent to the
ELU, Q_r's ready and the state machine. Nothing is tolerated: a difference
is a failure, reported at its first cycle.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from synapse_vmt.errors import UserError

RTL_DIR = Path(__file__).resolve().parent / "rtl"

#: Stimulus profiles: model parameters (``pmu.Config``) and generator knobs
#: (``harness::PmuGen``). ``random`` is a loaded cache; ``corner`` a tiny CAM
#: (LRU churn on every miss), queues of two that fill and stall, bursty
#: back-pressure from the VMU and the ELU bus, and frequent reassignment
#: (leave / re-leave while transient); ``slow`` a CAM with II_c = 2, τ_c = 5;
#: ``collide`` fills in the cycle of a lookup of the same or the evicted key.
PMU_PROFILES: dict[str, tuple[dict, dict]] = {
    "random": (
        dict(block_size=16, latency_cycles=2, ii_cycles=1, q_r=8, q_p=8, q_m=8),
        dict(keys=40, tables=3, p_req=0.8, p_ctl=0.002),
    ),
    "corner": (
        dict(block_size=4, latency_cycles=3, ii_cycles=1, q_r=2, q_p=2, q_m=2),
        dict(keys=7, tables=2, p_req=0.9, p_rsp_ready=0.5, p_mq_ready=0.4, burst=16,
             elu_lat=[1, 60], elu_cap=6, p_ctl=0.02),
    ),
    "slow": (
        dict(block_size=8, latency_cycles=5, ii_cycles=2, q_r=4, q_p=4, q_m=3),
        dict(keys=14, tables=2, p_req=0.6, p_ctl=0.005),
    ),
    # Same-cycle collisions: requests over a few keys and an ELU answering
    # within 1-3 cycles, so a fill often lands in the cycle a lookup of its
    # own key, or of the key it evicts, issues (at a request rate that
    # leaves Q_p room: a full one holds the issue in every fill's cycle).
    "collide": (
        dict(block_size=4, latency_cycles=2, ii_cycles=1, q_r=8, q_p=8, q_m=8),
        dict(keys=6, tables=1, p_req=0.6, p_rsp_ready=1.0, p_mq_ready=1.0, elu_lat=[1, 3], elu_cap=8,
             p_ctl=0.0),
    ),
    # Keys in the order of a ClassBench trace (high Pareto locality) from a
    # generated ACL set; the ELU answers with the rule the oracle matched.
    "trace": (
        dict(block_size=32, latency_cycles=2, ii_cycles=1, q_r=8, q_p=8, q_m=8),
        dict(tables=1, p_req=0.9, p_ctl=0.0, elu_lat=[10, 60]),
    ),
}


def classbench_stream(packets: int, seed: int, rules: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """Keys of a ClassBench trace as 104-bit 5-tuples (src | dst << 32 |
    sport << 64 | dport << 80 | proto << 96, as (n, 8) uint32 words) and the
    index of the rule each matches (the linear oracle; -1 for none)."""
    from synapse_vmt import _core

    rs = _core.RuleSet.generate("acl", rules, seed)
    tr = _core.Trace.generate(rs, packets, seed, 1.0, 1.0)
    k = tr.keys().astype(np.uint32)
    w = np.zeros((len(k), 8), np.uint32)
    w[:, 0], w[:, 1] = k[:, 0], k[:, 1]
    w[:, 2] = (k[:, 2] & 0xFFFF) | ((k[:, 3] & 0xFFFF) << 16)
    w[:, 3] = k[:, 4] & 0xFF
    acts = _core.Classifier(rs, "linear").classify(tr).astype(np.int64)
    return w, acts


#: ORB profiles: (orb_entries, lookup_slots, generator knobs ``harness::OrbGen``).
#: ``full``: a small ORB that fills (the miss queue waits) with few lookup
#: slots and long, scattered lookups, so replies wait at the commit pointer.
ORB_PROFILES: dict[str, tuple[int, int, dict]] = {
    "random": (8, 4, dict(p_miss=0.5, lat=[1, 30])),
    "full": (4, 2, dict(p_miss=0.9, lat=[1, 60])),
    "wide": (16, 16, dict(p_miss=0.8, lat=[1, 6])),
}


#: VMU profiles: (lookup bits, PHV window, generator knobs ``harness::VmuGen``).
#: ``full``: a window of 4 with a slow next stage and a busy interconnect;
#: ``direct``: most entries invalid, so keys go to the ELU and park at once.
VMU_PROFILES: dict[str, tuple[int, int, dict]] = {
    "random": (5, 8, dict()),
    "full": (3, 4, dict(p_rel_ready=0.4, p_req_ready=0.5, p_phv=0.9, fill_lat=[5, 80])),
    "direct": (6, 16, dict(p_invalid=0.6, p_lut=0.1, p_hit=0.3)),
}
VMU_PORTS = 2


@dataclass
class CosimResult:
    unit: str
    profile: str
    cycles: int
    compared: int = 0
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches


def have_tools() -> str | None:
    """Why a co-simulation cannot run here, or None."""
    if shutil.which("iverilog") is None or shutil.which("vvp") is None:
        return "iverilog (Icarus Verilog) is not installed"
    try:
        import cocotb_tools.runner  # noqa: F401
    except ImportError:
        return "cocotb is not installed (pip install 'synapse-vmt[hw]')"
    return None


def key_ints(words: np.ndarray) -> list[int]:
    """(n, 8) uint32 key words, word 0 lowest → Python ints."""
    out = []
    for row in words.astype(np.uint64):
        v = 0
        for i, w in enumerate(row):
            v |= int(w) << (32 * i)
        out.append(v)
    return out


#: RTL files a top instantiates besides its own.
RTL_DEPS = {"synapse_cluster": ["synapse_pmu", "synapse_vmu"]}


def _simulate(top: str, params: dict, inputs: dict, outputs: list[str], late: list[str],
              workdir: Path, reset: dict | None = None, rtl_dir: Path | None = None,
              packed: bool = False) -> dict[str, list[int]]:
    from cocotb_tools.runner import get_runner

    runner = get_runner("icarus")
    build = workdir / "build"
    rtl_dir = rtl_dir or RTL_DIR
    runner.build(
        sources=[rtl_dir / f"{m}.v" for m in [top, *RTL_DEPS.get(top, [])]],
        hdl_toplevel=top,
        parameters=params,
        build_dir=build,
        always=True,
        timescale=("1ns", "1ps"),
        log_file=workdir / "build.log",
    )
    stim = workdir / "stim.json"
    out = workdir / "out.json"
    stim.write_text(json.dumps({"inputs": inputs, "outputs": outputs, "late": late, "reset": reset or {},
                                 "packed": packed}))
    runner.test(
        test_module="synapse_vmt.hw.tb",
        hdl_toplevel=top,
        build_dir=build,
        test_dir=workdir,
        extra_env={"SYNAPSE_COSIM_IN": str(stim), "SYNAPSE_COSIM_OUT": str(out)},
        log_file=workdir / "sim.log",
    )
    if not out.exists():
        tail = (workdir / "sim.log").read_text()[-2000:] if (workdir / "sim.log").exists() else ""
        raise RuntimeError(f"the RTL simulation wrote no outputs:\n{tail}")
    return json.loads(out.read_text())


class _Diff:
    def __init__(self, res: CosimResult, limit: int = 10):
        self.res, self.limit = res, limit

    def check(self, cycle: int, what: str, model, rtl) -> bool:
        if model == rtl:
            return True
        if len(self.res.mismatches) < self.limit:
            self.res.mismatches.append(f"cycle {cycle}: {what}: model {model}, rtl {rtl}")
        elif len(self.res.mismatches) == self.limit:
            self.res.mismatches.append("... (more differences not listed)")
        return False


def cosim_pmu(profile: str = "random", cycles: int = 2000, seed: int = 1, key_bits: int = 104,
              keep: Path | None = None) -> CosimResult:
    """Generates a PMU stimulus with the model and replays it into the RTL."""
    from synapse_vmt import _core

    if profile not in PMU_PROFILES:
        raise UserError(f"unknown PMU profile {profile!r} (expected one of {sorted(PMU_PROFILES)})")
    cfg, gen = PMU_PROFILES[profile]
    gen = dict(gen, cycles=cycles, seed=seed, key_bits=key_bits, tag_bits=16)
    cfg = dict(cfg, count=1, clock_ratio=1.0)
    if profile == "trace":
        keys, acts = classbench_stream(max(cycles, 1000), seed)
        stim, model = _core.pmu_generate(json.dumps(cfg), json.dumps(gen), keys, acts)
    else:
        stim, model = _core.pmu_generate(json.dumps(cfg), json.dumps(gen))
    return compare_pmu(cfg, key_bits, stim, model, profile, keep, fill_slots=gen.get("elu_cap", 16) + cfg["q_m"])


def compare_pmu(cfg: dict, key_bits: int, stim: dict, model: dict, profile: str = "stream",
                keep: Path | None = None, fill_slots: int = 64) -> CosimResult:
    """Replays ``stim`` into the RTL PMU and compares with ``model`` outputs."""
    if cfg["latency_cycles"] < 2 or cfg["block_size"] < 4:
        raise UserError(f"the PMU RTL needs tau_c >= 2 (its pipeline: search, then read) and at least "
                        f"4 entries; got tau_c = {cfg['latency_cycles']}, {cfg['block_size']} entries")
    n = len(stim["ctl_op"])
    params = dict(N=cfg["block_size"], KEY_W=key_bits, TAG_W=16, TBL_W=8, ACT_W=32,
                  TAU=cfg["latency_cycles"], II=cfg["ii_cycles"], QR=cfg["q_r"], QP=cfg["q_p"],
                  QM=cfg["q_m"], FILL_SLOTS=fill_slots)
    ints = lambda k: [int(x) for x in stim[k]]  # noqa: E731
    fact = ints("fill_act")
    inputs = {
        "ctl_op": ints("ctl_op"), "ctl_tbl": ints("ctl_tbl"), "ctl_next_v": ints("ctl_next_v"),
        "req_valid": ints("req_valid"), "req_tbl": ints("req_tbl"), "req_tag": ints("req_tag"),
        "req_key": key_ints(stim["req_key"]),
        "fill_valid": ints("fill_valid"), "fill_tbl": ints("fill_tbl"), "fill_tag": ints("fill_tag"),
        "fill_key": key_ints(stim["fill_key"]),
        "fill_act_v": [int(a >= 0) for a in fact], "fill_act": [max(a, 0) for a in fact],
        "rsp_ready": ints("rsp_ready"), "mq_ready": ints("mq_ready"),
    }
    outputs = ["req_ready", "rsp_valid", "rsp_kind", "rsp_tbl", "rsp_tag", "rsp_act_v", "rsp_act",
               "rsp_cmp", "mq_valid", "mq_tbl", "mq_tag", "mq_key"]
    late = ["state", "state_tbl", "overflow"]
    work = Path(tempfile.mkdtemp(prefix="synapse-cosim-")) if keep is None else keep
    try:
        rtl = _simulate("synapse_pmu", params, inputs, outputs, late, work)
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    res = CosimResult("pmu", profile, n)
    d = _Diff(res)
    mkey = key_ints(model["mq_key"])
    for c in range(n):
        d.check(c, "Q_r ready", int(model["req_ready"][c]), rtl["req_ready"][c])
        kind = int(model["rsp_kind"][c])
        if d.check(c, "response valid", int(kind != 0), rtl["rsp_valid"][c]) and kind:
            res.compared += 1
            ract = rtl["rsp_act"][c] if rtl["rsp_act_v"][c] else -1
            got = (rtl["rsp_kind"][c], rtl["rsp_tbl"][c], rtl["rsp_tag"][c], ract, rtl["rsp_cmp"][c])
            want = (kind, int(model["rsp_tbl"][c]), int(model["rsp_tag"][c]), int(model["rsp_act"][c]),
                    int(model["rsp_cmp"][c]))
            d.check(c, "response (kind, table, tag, action, compared)", want, got)
        mv = int(model["mq_valid"][c])
        if d.check(c, "miss valid", mv, rtl["mq_valid"][c]) and mv:
            res.compared += 1
            d.check(c, "miss (table, tag, key)",
                    (int(model["mq_tbl"][c]), int(model["mq_tag"][c]), mkey[c]),
                    (rtl["mq_tbl"][c], rtl["mq_tag"][c], rtl["mq_key"][c]))
        st = int(model["state"][c])
        d.check(c, "state", (st, int(model["state_tbl"][c]) if st else 0),
                (rtl["state"][c], rtl["state_tbl"][c] if rtl["state"][c] else 0))
    d.check(n, "Q_p overflow flag", 0, rtl["overflow"][-1] if rtl["overflow"] else 0)
    return res


#: Idle stretches of a recorded stream longer than this are cut (the default
#: scenario's PMUs are lightly loaded: most cycles are idle). Every replay is
#: checked against the simulator's own responses, so a cut that changed
#: anything is reported (a cut of 1 makes fills overtake their misses).
RECORD_MAX_GAP = 4


def cosim_recorded(cycles: int = 2000, seed: int = 1, pmu: int = 0, scenario: str | None = None,
                   keep: Path | None = None) -> CosimResult:
    """PMU ``pmu``'s inputs recorded from the full simulator running
    ``synapse run``'s scenario (the default one unless ``scenario``),
    replayed into the model's PMU and the RTL. The replay must also give the
    responses the simulator's PMU gave, on the same cycles."""
    from synapse_vmt import _core
    from synapse_vmt.scenario import load

    cfg = load(scenario, [f"seed={seed}"]).sim_config()
    sim_cycles = int(cfg["duration_ns"] * cfg["clock_mhz"] / 1000)
    stim, model, info = _core.pmu_record(json.dumps(cfg), pmu, sim_cycles, cycles, RECORD_MAX_GAP)
    keys = key_ints(stim["req_key"]) + key_ints(stim["fill_key"])
    key_bits = max(1, max(k.bit_length() for k in keys))
    elu = cfg.get("elu", {})
    res = compare_pmu(json.loads(info["config"]), key_bits, stim, model, "recorded", keep,
                      fill_slots=elu.get("miss_queue", 64) + elu.get("orb_entries", 64))
    if info["differ_from_sim"]:
        res.mismatches.append(f"the model's replay differs from the simulator's PMU {pmu} on "
                              f"{info['differ_from_sim']} cycles")
    return res


def cosim_orb(profile: str = "random", cycles: int = 2000, seed: int = 1, key_bits: int = 104,
              keep: Path | None = None) -> CosimResult:
    """Generates an ORB stimulus with the model and replays it into the RTL."""
    from synapse_vmt import _core

    if profile not in ORB_PROFILES:
        raise UserError(f"unknown ORB profile {profile!r} (expected one of {sorted(ORB_PROFILES)})")
    entries, slots, gen = ORB_PROFILES[profile]
    gen = dict(gen, cycles=cycles, seed=seed, key_bits=key_bits, tag_bits=16)
    stim, model = _core.orb_generate(entries, slots, json.dumps(gen))
    return compare_orb(entries, slots, key_bits, stim, model, profile, keep)


def compare_orb(entries: int, slots: int, key_bits: int, stim: dict, model: dict,
                profile: str = "stream", keep: Path | None = None) -> CosimResult:
    n = len(stim["in_valid"])
    params = dict(N=entries, SLOTS=slots, KEY_W=key_bits, TAG_W=16, TBL_W=8, ACT_W=32)
    ints = lambda k: [int(x) for x in stim[k]]  # noqa: E731
    dact = ints("done_act")
    inputs = {
        "in_valid": ints("in_valid"), "in_tbl": ints("in_tbl"), "in_tag": ints("in_tag"),
        "in_key": key_ints(stim["in_key"]),
        "done_valid": ints("done_valid"), "done_slot": ints("done_slot"),
        "done_act_v": [int(a >= 0) for a in dact], "done_act": [max(a, 0) for a in dact],
    }
    outputs = ["in_ready", "iss_valid", "iss_slot", "cm_valid", "cm_tbl", "cm_tag", "cm_key",
               "cm_act_v", "cm_act"]
    work = Path(tempfile.mkdtemp(prefix="synapse-cosim-")) if keep is None else keep
    try:
        rtl = _simulate("synapse_orb", params, inputs, outputs, [], work)
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    res = CosimResult("orb", profile, n)
    d = _Diff(res)
    mkey = key_ints(model["cm_key"])
    for c in range(n):
        d.check(c, "ORB ready", int(model["in_ready"][c]), rtl["in_ready"][c])
        iv = int(model["iss_valid"][c])
        if d.check(c, "issue valid", iv, rtl["iss_valid"][c]) and iv:
            d.check(c, "issued entry", int(model["iss_slot"][c]), rtl["iss_slot"][c])
        cv = int(model["cm_valid"][c])
        if d.check(c, "reply valid", cv, rtl["cm_valid"][c]) and cv:
            res.compared += 1
            ract = rtl["cm_act"][c] if rtl["cm_act_v"][c] else -1
            d.check(c, "reply (table, tag, key, action)",
                    (int(model["cm_tbl"][c]), int(model["cm_tag"][c]), mkey[c], int(model["cm_act"][c])),
                    (rtl["cm_tbl"][c], rtl["cm_tag"][c], rtl["cm_key"][c], ract))
    return res


def cosim_vmu(profile: str = "random", cycles: int = 2000, seed: int = 1,
              keep: Path | None = None) -> CosimResult:
    """Generates a VMU stimulus with the model and replays it into the RTL."""
    from synapse_vmt import _core

    if profile not in VMU_PROFILES:
        raise UserError(f"unknown VMU profile {profile!r} (expected one of {sorted(VMU_PROFILES)})")
    bits, fifo, gen = VMU_PROFILES[profile]
    gen = dict(gen, cycles=cycles, seed=seed)
    stim, model = _core.vmu_generate(bits, fifo, json.dumps(gen))
    return compare_vmu(bits, fifo, stim, model, profile, keep)


def compare_vmu(bits: int, fifo: int, stim: dict, model: dict, profile: str = "stream",
                keep: Path | None = None) -> CosimResult:
    n = len(stim["phv_valid"])
    tw, aw = 32, 32
    params = dict(BITS=bits, FIFO=fifo, PMU_W=16, TAG_W=tw, ACT_W=aw, PORTS=VMU_PORTS)
    ints = lambda k: [int(x) for x in stim[k]]  # noqa: E731

    def pack(name: str, width: int, f=lambda x: x) -> list[int]:
        cols = [ints(f"rsp{p}_{name}") for p in range(VMU_PORTS)]
        return [sum(f(cols[p][c]) << (p * width) for p in range(VMU_PORTS)) for c in range(n)]

    inputs = {
        # The table is read a cycle ahead: the hash the next cycle presents.
        "phv_valid": ints("phv_valid"), "phv_hash_next": ints("phv_hash")[1:] + [0],
        "req_ready": ints("req_ready"), "rel_ready": ints("rel_ready"),
        "lut_we": ints("lut_we"), "lut_addr": ints("lut_addr"), "lut_data": ints("lut_data"),
        "rsp_valid": pack("valid", 1), "rsp_miss": pack("miss", 1),
        "rsp_tag": pack("tag", tw),
        "rsp_act_v": pack("act", 1, lambda a: int(a >= 0)),
        "rsp_act": pack("act", aw, lambda a: max(a, 0)),
    }
    outputs = ["phv_ready", "req_valid", "req_pmu", "req_tag", "direct_valid", "direct_tag",
               "rel_valid", "rel_tag", "rel_act_v", "rel_act", "rel_via"]
    work = Path(tempfile.mkdtemp(prefix="synapse-cosim-")) if keep is None else keep
    try:
        rtl = _simulate("synapse_vmu", params, inputs, outputs, [], work,
                        reset={"phv_hash_next": int(stim["phv_hash"][0]) if n else 0})
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    res = CosimResult("vmu", profile, n)
    d = _Diff(res)
    m = {k: [int(x) for x in v] for k, v in model.items()}
    for c in range(n):
        d.check(c, "PHV taken", m["phv_ready"][c], rtl["phv_ready"][c])
        if d.check(c, "request valid", m["req_valid"][c], rtl["req_valid"][c]) and m["req_valid"][c]:
            res.compared += 1
            d.check(c, "request (pmu, tag)", (m["req_pmu"][c], m["req_tag"][c]),
                    (rtl["req_pmu"][c], rtl["req_tag"][c]))
        if d.check(c, "direct valid", m["direct_valid"][c], rtl["direct_valid"][c]) and m["direct_valid"][c]:
            res.compared += 1
            d.check(c, "direct tag", m["direct_tag"][c], rtl["direct_tag"][c])
        if d.check(c, "release valid", m["rel_valid"][c], rtl["rel_valid"][c]) and m["rel_valid"][c]:
            res.compared += 1
            ract = rtl["rel_act"][c] if rtl["rel_act_v"][c] else -1
            d.check(c, "release (tag, action, via miss)", (m["rel_tag"][c], m["rel_act"][c], m["rel_via"][c]),
                    (rtl["rel_tag"][c], ract, rtl["rel_via"][c]))
    return res


#: Doorkeeper profiles: (CAM entries, ``[defence.admission]``, generator
#: knobs: distinct keys drawn, the share of cycles with an operation, the
#: share of those that are the shed gate's questions, the share of fills into
#: a full CAM; ``dlog``: the RTL's words per bank, 2^DLOG, when not its
#: default 64). ``random``: the defaults (32 bits per entry); ``churn``: a
#: small filter over few keys cleared every 16 records, so answers depend on
#: the clear and on back-to-back operations on the same bits (the
#: forwarding); ``words``: the same filter in 4 words of 16 bits, so that
#: back-to-back records rewrite the same word and a word rewritten after a
#: clear must lose its old bits.
ADMIT_PROFILES: dict[str, tuple[int, dict, dict]] = {
    "random": (64, dict(bits_per_entry=32, reset_factor=4), dict(keys=600, p_op=0.7, p_seen=0.4, p_full=0.8)),
    "churn": (4, dict(bits_per_entry=16, reset_factor=4), dict(keys=24, p_op=0.9, p_seen=0.5, p_full=0.9)),
    "words": (4, dict(bits_per_entry=16, reset_factor=4), dict(keys=24, p_op=0.9, p_seen=0.5, p_full=0.9, dlog=2)),
}
#: Cycles from an operation to its answer (synapse_admit.v: read, then decide).
ADMIT_LATENCY = 2


def admit_params(entries: int, adm: dict) -> dict:
    """synapse_admit.v's parameters for a doorkeeper (hw/admit.rs's sizes)."""
    bits = max(64, 1 << max(0, (adm["bits_per_entry"] * entries - 1).bit_length()))
    reset = max(1, adm["reset_factor"] * entries)
    return dict(LOG=bits.bit_length() - 1, RESET_AFTER=reset, CNT_W=max(1, reset.bit_length()))


def cosim_admit(profile: str = "random", cycles: int = 2000, seed: int = 1, keep: Path | None = None,
                rtl_dir: Path | None = None) -> CosimResult:
    """A random stream of fills and shed-gate questions through the model's
    doorkeeper (``_core.admit_replay``, hw/admit.rs), replayed into
    synapse_admit.v: every cycle's answer (presence, admitted/seen, the
    filter's clear) must be the model's, ``ADMIT_LATENCY`` cycles later."""
    from synapse_vmt import _core

    if profile not in ADMIT_PROFILES:
        raise UserError(f"unknown doorkeeper profile {profile!r} (expected one of {sorted(ADMIT_PROFILES)})")
    entries, adm, gen = ADMIT_PROFILES[profile]
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 1 << 32, size=(gen["keys"], 8), dtype=np.uint64).astype(np.uint32)
    pool[:, 4:] = 0
    op = np.where(rng.random(cycles) < gen["p_op"], np.where(rng.random(cycles) < gen["p_seen"], 2, 1), 0)
    full = (rng.random(cycles) < gen["p_full"]).astype(np.int64)
    keys = pool[rng.integers(0, gen["keys"], size=cycles)]
    model = _core.admit_replay(json.dumps(dict(adm, policy="doorkeeper")), entries, op.astype(np.int64), full,
                               np.ascontiguousarray(keys))
    params = admit_params(entries, adm)
    if "dlog" in gen:
        params["DLOG"] = gen["dlog"]
    inputs = {"op": op.tolist(), "full": full.tolist(), "h0": model["h0"].tolist(), "h1": model["h1"].tolist()}
    work = Path(tempfile.mkdtemp(prefix="synapse-cosim-")) if keep is None else keep
    try:
        rtl = _simulate("synapse_admit", params, inputs, ["ans_valid", "ans_yes", "ans_clear"], [], work,
                        rtl_dir=rtl_dir)
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    res = CosimResult("admit", profile, cycles)
    d = _Diff(res)
    for c in range(cycles):
        i = c - ADMIT_LATENCY  # the operation answered in cycle c
        v = int(i >= 0 and op[i] != 0)
        if d.check(c, "answer valid", v, rtl["ans_valid"][c]) and v:
            res.compared += 1
            d.check(c, f"answer to op {int(op[i])} of cycle {i} (yes, clear)",
                    (int(model["yes"][i]), int(model["clear"][i])), (rtl["ans_yes"][c], rtl["ans_clear"][c]))
    return res


#: Cluster profiles, each a change to ``synapse run``'s scenario: ``default``
#: is one table on every PMU (CH = 4 channels); ``tables`` three tables on 2
#: channels: two share the PMUs so that both send on one channel in a cycle
#: (the arbitration), the third has none, so its keys go to the ELU by the
#: VMU's direct path (the bus's last source). PMUs get ``entries`` entries,
#: the VMU a 64-entry table and a 32-PHV window (Icarus time).
CLUSTER_PROFILES = ("default", "tables")

#: Stretches of a cluster recording with no event longer than this are cut
#: (keeping the cycle mod the table count: the table order depends on it).
CLUSTER_MAX_GAP = 12


def cluster_config(profile: str, pmus: int, entries: int, seed: int, scenario: str | None = None) -> dict:
    """The simulator config a cluster recording runs."""
    from synapse_vmt.scenario import load

    if profile not in CLUSTER_PROFILES:
        raise UserError(f"unknown cluster profile {profile!r} (expected one of {list(CLUSTER_PROFILES)})")
    if pmus < 2:
        raise UserError(f"--pmus {pmus}: a cluster needs at least 2 PMUs")
    cfg = load(scenario, [f"seed={seed}"]).sim_config()
    cfg["pmus"].update(count=pmus, block_size=entries, clock_ratio=1.0)
    t0 = dict(cfg["tables"][0], lookup_bits=6, phv_fifo=32)
    if profile == "default":
        cfg["tables"] = [dict(t0, pmus=list(range(pmus)))]
    else:
        rules = t0["rules"]
        gen = dict(rules.get("generate", {"type": "acl", "count": 1000}), seed=2)
        cfg["tables"] = [dict(t0, name="acl", pmus=list(range(0, pmus, 2))),
                         dict(t0, name="fw", pmus=list(range(1, pmus, 2)), rules={"generate": gen}),
                         dict(t0, name="nat", pmus=[], rules={"generate": dict(gen, seed=3)})]
        cfg["entry"] = {"acl": 0.45, "fw": 0.45, "nat": 0.1}
        cfg["edges"] = []
        cfg["interconnect"]["channels"] = 2
        # Load: flows arriving 10x faster than the default and an ELU that
        # keeps up (more lookups in flight, faster memory), so that tables
        # request in the same cycle and Q_m / the direct queue wait for the bus.
        cfg["duration_ns"] = 100_000.0
        cfg["traffic"]["flows"] = 3000
        cfg["elu"]["lookup_slots"] = 64
        cfg["hbm"].update(latency_ns=10.0, pseudo_channels=8, bank_busy_ns=4.0)
    return cfg


def cosim_cluster(profile: str = "default", pmus: int = 4, cycles: int = 2000, seed: int = 1,
                  entries: int = 16, scenario: str | None = None, keep: Path | None = None,
                  rtl_dir: Path | None = None) -> CosimResult:
    """The whole cluster recorded from the full simulator running ``synapse
    run``'s scenario (``cluster_config``), its boundary replayed into the RTL
    cluster, and everything the simulator did inside compared, every cycle:
    each table's request (PMU, tag: so which table won a channel) or direct
    key, each PMU's response, each miss on the bus (source: the round robin,
    table, tag, key), each release. ``rtl_dir`` replaces the RTL (mutants)."""
    from synapse_vmt import _core

    cfg = cluster_config(profile, pmus, entries, seed, scenario)
    sim_cycles = int(cfg["duration_ns"] * cfg["clock_mhz"] / 1000)
    rec = json.loads(_core.cluster_record(json.dumps(cfg), sim_cycles))
    return compare_cluster(cfg, rec, cycles, f"{profile}/{pmus}", keep, rtl_dir)


def compare_cluster(cfg: dict, rec: dict, rows: int, profile: str, keep: Path | None = None,
                    rtl_dir: Path | None = None) -> CosimResult:
    pc, nt, np_ = cfg["pmus"], len(cfg["tables"]), cfg["pmus"]["count"]
    lat = rec["latency"]
    if pc["latency_cycles"] < 2 or pc["block_size"] < 4 or lat < 2:
        raise UserError("the cluster RTL needs tau_c >= 2, at least 4 entries and a VMU + interconnect "
                        f"latency of at least 2 cycles (got {pc['latency_cycles']}, {pc['block_size']}, {lat})")
    bits = rec["lut_bits"][0]
    fifo = rec["phv_fifo"][0]
    if len(set(rec["lut_bits"])) != 1 or len(set(rec["phv_fifo"])) != 1 or fifo & (fifo - 1):
        raise UserError("the cluster RTL needs one lookup-table size and one power-of-two PHV window for all tables")
    tmask = (1 << 16) - 1
    # Rows: the lookup tables are written first (one entry a cycle per
    # table), then the recorded cycles, idle stretches cut.
    pre = -(-(1 << bits) // nt) * nt
    evs = sorted(rec["events"], key=lambda e: e[0])
    row_of: dict[int, int] = {}
    last, row = 0, pre
    for e in evs:
        c = e[0]
        if c not in row_of:
            d = c - last
            row += d if d <= CLUSTER_MAX_GAP else CLUSTER_MAX_GAP + (d - CLUSTER_MAX_GAP) % nt
            row_of[c], last = row, c
    n = min(pre + rows, (row + 1) if evs else pre + 1)
    z = lambda: [0] * n  # noqa: E731
    zt = lambda: [[0] * n for _ in range(nt)]  # noqa: E731
    zp = lambda: [[0] * n for _ in range(np_)]  # noqa: E731
    i_phv, i_hash, i_key, i_rel = zt(), zt(), zt(), [[1] * n for _ in range(nt)]
    i_lwe, i_laddr, i_ldata = zt(), zt(), zt()
    i_ctl, i_ctbl = zp(), zp()
    i_elu, i_fv, i_fdst, i_ftbl, i_ftag, i_fkey, i_fav, i_fact = z(), z(), z(), z(), z(), z(), z(), z()
    for t, lut in enumerate(rec["luts"]):
        for a, p in enumerate(lut):
            i_lwe[t][a], i_laddr[t][a], i_ldata[t][a] = 1, a, p & 0xFFFF
    for p, t in enumerate(rec["assoc"]):
        if t >= 0:
            i_ctl[p][pre], i_ctbl[p][pre] = 1, t
    # What the simulator did: (row, what) -> value.
    want: dict[tuple, tuple] = {}
    for e in evs:
        r, k = row_of[e[0]], e[1]
        if r >= n:
            break
        if k == "phv":
            t = e[2]
            i_phv[t][r], i_hash[t][r], i_key[t][r] = 1, e[3], int(e[4], 16)
        elif k == "stall":
            i_rel[e[2]][r] = 0
        elif k == "elu_ready":
            i_elu[r] = 1
        elif k == "fill":
            i_fv[r], i_fdst[r], i_ftbl[r], i_ftag[r] = 1, (e[2] if e[2] >= 0 else np_), e[3], e[4] & tmask
            i_fkey[r], i_fav[r], i_fact[r] = int(e[5], 16), int(e[6] >= 0), max(e[6], 0)
        elif k == "ctl":
            raise UserError(f"cycle {e[0]}: a PMU was reassigned during the recording (not a port of the "
                            "RTL cluster: the VMU's table would be rewritten at once)")
        elif k == "req":
            want[(r, "req", e[2])] = (e[3], e[4] & tmask)
        elif k == "direct":
            want[(r, "direct", e[2])] = (e[3] & tmask,)
        elif k == "rsp":
            want[(r, "rsp", e[2])] = (e[3], e[4], e[5] & tmask, e[6])
        elif k == "bus":
            want[(r, "bus")] = (e[2], e[3], e[4] & tmask, int(e[5], 16))
        elif k == "rel":
            want[(r, "rel", e[2])] = (e[3] & tmask, e[4], e[5])
    # The VMU reads its table a cycle ahead: each row carries the next
    # row's hash (the same one again when the next row has no PHV).
    i_hnext = [[0] * n for _ in range(nt)]
    for t in range(nt):
        h = 0
        for r in range(n - 1, -1, -1):
            if r + 1 < n and i_phv[t][r + 1]:
                h = i_hash[t][r + 1]
            i_hnext[t][r] = h
    keys = [k for t in range(nt) for k in i_key[t]] + i_fkey + [w[3] for w in want.values() if len(w) == 4 and
                                                                isinstance(w[3], int) and w[3] > 0xFFFFFFFF]
    key_bits = max(32, max(k.bit_length() for k in keys))
    elu = cfg.get("elu", {})
    params = dict(NP=np_, NT=nt, CH=min(cfg["interconnect"]["channels"], np_), LAT=lat,
                  ENTRIES=pc["block_size"], KEY_W=key_bits, TAG_W=16, TBL_W=8, ACT_W=32,
                  TAU=pc["latency_cycles"], II=pc["ii_cycles"], QR=pc["q_r"], QP=pc["q_p"], QM=pc["q_m"],
                  FILL_SLOTS=elu.get("miss_queue", 64) + elu.get("orb_entries", 64), BITS=bits, FIFO=fifo,
                  DQ=64)
    if cfg["interconnect"].get("kind", "segmented") != "segmented":
        raise UserError("the cluster RTL is the segmented-channel interconnect")

    def pack(cols: list[list[int]], w: int) -> list[int]:
        return [sum(col[r] << (w * i) for i, col in enumerate(cols)) for r in range(n)]

    inputs = {
        "phv_valid": pack(i_phv, 1), "phv_hash_next": pack(i_hnext, 32), "phv_key": pack(i_key, key_bits),
        "rel_ready": pack(i_rel, 1), "lut_we": pack(i_lwe, 1), "lut_addr": pack(i_laddr, bits),
        "lut_data": pack(i_ldata, 16), "ctl_op": pack(i_ctl, 2), "ctl_tbl": pack(i_ctbl, 8),
        "ctl_next_v": pack([[1] * n] * np_, 1),
        "elu_ready": i_elu, "fill_valid": i_fv, "fill_dst": i_fdst, "fill_tbl": i_ftbl, "fill_tag": i_ftag,
        "fill_key": i_fkey, "fill_act_v": i_fav, "fill_act": i_fact,
    }
    outputs = ["phv_ready", "req_valid", "req_pmu", "req_tag", "direct_valid", "direct_tag",
               "rsp_valid", "rsp_kind", "rsp_tbl", "rsp_tag", "rsp_act_v", "rsp_act",
               "mq_valid", "mq_src", "mq_tbl", "mq_tag", "mq_key",
               "rel_valid", "rel_tag", "rel_act_v", "rel_act", "rel_via"]
    work = Path(tempfile.mkdtemp(prefix="synapse-cosim-")) if keep is None else keep
    try:
        rtl = _simulate("synapse_cluster", params, inputs, outputs, ["overflow"], work,
                        reset={"phv_hash_next": inputs["phv_hash_next"][0]}, rtl_dir=rtl_dir, packed=True)
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    res = CosimResult("cluster", profile, n - pre)
    d = _Diff(res)
    f = lambda name, r, i, w: (rtl[name][r] >> (i * w)) & ((1 << w) - 1)  # noqa: E731
    back = {r: c for c, r in row_of.items()}
    for r in range(pre, n):
        cyc = f"{r - pre} (simulator cycle {back.get(r, '-')})"
        for t in range(nt):
            w = want.get((r, "req", t))
            wd = want.get((r, "direct", t))
            d.check(cyc, f"table {t} PHV taken", int(w is not None or wd is not None), f("phv_ready", r, t, 1))
            if d.check(cyc, f"table {t} request valid", int(w is not None), f("req_valid", r, t, 1)) and w:
                res.compared += 1
                d.check(cyc, f"table {t} request (pmu, tag)", w, (f("req_pmu", r, t, 16), f("req_tag", r, t, 16)))
            if d.check(cyc, f"table {t} direct valid", int(wd is not None), f("direct_valid", r, t, 1)) and wd:
                res.compared += 1
                d.check(cyc, f"table {t} direct tag", wd, (f("direct_tag", r, t, 16),))
            w = want.get((r, "rel", t))
            if d.check(cyc, f"table {t} release valid", int(w is not None), f("rel_valid", r, t, 1)) and w:
                res.compared += 1
                ract = f("rel_act", r, t, 32) if f("rel_act_v", r, t, 1) else -1
                d.check(cyc, f"table {t} release (tag, action, via miss)", w,
                        (f("rel_tag", r, t, 16), ract, f("rel_via", r, t, 1)))
        for p in range(np_):
            w = want.get((r, "rsp", p))
            if d.check(cyc, f"PMU {p} response valid", int(w is not None), f("rsp_valid", r, p, 1)) and w:
                res.compared += 1
                ract = f("rsp_act", r, p, 32) if f("rsp_act_v", r, p, 1) else -1
                d.check(cyc, f"PMU {p} response (kind, table, tag, action)", w,
                        (f("rsp_kind", r, p, 2), f("rsp_tbl", r, p, 8), f("rsp_tag", r, p, 16), ract))
        w = want.get((r, "bus"))
        if d.check(cyc, "bus valid", int(w is not None), rtl["mq_valid"][r]) and w:
            res.compared += 1
            d.check(cyc, "bus (source, table, tag, key)", w,
                    (rtl["mq_src"][r], rtl["mq_tbl"][r], rtl["mq_tag"][r], rtl["mq_key"][r]))
    d.check(n - pre, "overflow flag (Q_r credit, direct queue, PMU Q_p)", 0,
            rtl["overflow"][-1] if rtl["overflow"] else 0)
    return res


def stimulus_digest(stim: dict) -> str:
    h = hashlib.sha256()
    for k in sorted(stim):
        h.update(k.encode())
        h.update(np.ascontiguousarray(stim[k]).tobytes())
    return h.hexdigest()[:16]


def run(unit: str = "pmu", cycles: int = 2000, seed: int = 1, pmus: tuple[int, ...] = (4, 8)) -> list[CosimResult]:
    """Every profile of ``unit`` (``synapse hw cosim``)."""
    why = have_tools()
    if why:
        raise UserError(f"cannot co-simulate: {why}")
    os.environ.setdefault("COCOTB_REDUCED_LOG_FMT", "1")
    if unit == "pmu":
        return [cosim_pmu(p, cycles, seed + i) for i, p in enumerate(PMU_PROFILES)] + [
            cosim_recorded(cycles, seed)]
    if unit == "vmu":
        return [cosim_vmu(p, cycles, seed + i) for i, p in enumerate(VMU_PROFILES)]
    if unit == "orb":
        return [cosim_orb(p, cycles, seed + i) for i, p in enumerate(ORB_PROFILES)]
    if unit == "cluster":
        return [cosim_cluster(p, n, cycles, seed) for n in pmus for p in CLUSTER_PROFILES]
    if unit == "admit":
        return [cosim_admit(p, cycles, seed + i) for i, p in enumerate(ADMIT_PROFILES)]
    raise UserError(f"unknown unit {unit!r} (expected pmu, vmu, orb, cluster or admit)")

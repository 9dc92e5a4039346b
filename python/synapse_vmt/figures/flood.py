"""``synapse reproduce flood``: cache flooding (paper §8) and its defences.

Two scenarios carry their legitimate flows while a share of the offered
packets (0 to 50 %) is attack traffic (``[attack]``,
``crates/synapse-core/src/workload/attack.rs``): never-repeating random
keys, new keys matching no rule, or a scan of 1.1 × the PMU entries. The
scenarios: ``acl``, the default one (one ACL table); ``upf``, the UPF
program's control-flow graph in the traffic model (its 10 tables, entry
shares and edge probabilities from p4c's BMv2 JSON,
``synapse_vmt/data/upf-cfg.json``; each table a generated rule set, two
PMUs each, all sharing the ELU; half ACL's flows). Each share runs with no defence (plain
LRU, ``"none"``) and with each defence (``[defence]``): the doorkeeper
admission of PMU fills (``hw/admit.rs``), segmented LRU in the CAMs
(``slru``, ``hw/cam.rs``), the per-table miss-rate limit
into the ELU (``hw/ratelimit.rs``; set at twice the scenario's no-attack
miss rate), both, the doorkeeper with the ELU's shed gate for first-time
keys (``shed``: ``shed_backlog`` = the ELU's lookup slots), and that with
a bounded ELU backlog for every miss (``shed+bound``: ``shed_all_backlog``
= twice the slots). Per run, the legitimate PHVs' figures only (the
simulator counts attack PHVs apart): throughput (shed PHVs count as lost)
and p99 latency as ratios against the same scenario with no attack and no
defence, hit rate, drops and sheds, and the oracle's wrong answers over
every PHV (must be 0). ``no_attack_cost`` is each defence's hit-rate loss
and p99 ratio on the attack-free (CAIDA-like) traffic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synapse_vmt.report import save_png, write_json, write_rows
from synapse_vmt.scenario import Scenario

DEFENCES = ["none", "doorkeeper", "slru", "ratelimit", "doorkeeper+ratelimit", "shed", "shed+bound", "shed+scan"]
#: Segmented LRU's protected share of a CAM (``[defence] slru_protected``):
#: the usual 80 % (Karedla et al.; TinyLFU's W-TinyLFU main cache).
SLRU_PROTECTED = 0.8
KINDS = ["random", "nomatch", "scan"]
SCENARIOS = ["acl", "upf"]
#: The shed gate's thresholds, in ELU misses held: first-time keys while the
#: ELU holds its lookup slots' worth (8, `elu.lookup_slots`: a first-time
#: key then never waits for a slot), every key at twice that.
SHED_BACKLOG = 8
SHED_ALL_BACKLOG = 16
#: The doorkeeper judges fills only while the ELU holds its lookup slots'
#: worth of misses (``admission.judge_backlog``): with no attack the ELU is
#: rarely that busy, so new flows' keys are cached at first sight.
JUDGE_BACKLOG = 8
#: ``shed+scan``, the scan-resistant gate: the doorkeeper's second filter
#: (``admission.repeats``: a key's misses after its second in a window are
#: shed under load, so a scan the CAM cannot hold costs one ELU walk per key
#: per window), segmented LRU with half of each CAM protected (a scan's
#: keys evict each other in probation), the first-time threshold at 12 (the
#: scan no longer fills the ELU, so fewer new legitimate flows need shedding)
#: and the bound at 16.
SCAN_SHED_BACKLOG = 12
SCAN_SLRU_PROTECTED = 0.5


def plan(quick: bool) -> dict[str, Any]:
    if quick:
        return {"duration": 300_000.0, "flows": 360, "flow_duration": 250_000.0, "shares": [0.0, 0.3],
                "defences": ["none", "shed+bound", "shed+scan"], "kinds": ["random"], "scenarios": SCENARIOS}
    return {"duration": 1_000_000.0, "flows": 1_200, "flow_duration": 250_000.0,
            "shares": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5], "defences": DEFENCES, "kinds": KINDS, "scenarios": SCENARIOS}


def upf_tables() -> dict[str, Any]:
    """The UPF program's CFG (p4c's BMv2 JSON of UP4, ``data/upf-cfg.json``)
    as traffic-model tables: each a generated rule set (its own seed), two
    PMUs per table, the CFG's entry shares and edge probabilities."""
    import json

    from synapse_vmt import data

    cfg = json.loads(Path(data.path("upf-cfg.json")).read_text())

    def short(n: str) -> str:
        return n.removeprefix("PreQosPipe.")

    tables = [{"name": short(t["name"]), "rules": {"generate": {"count": 256, "seed": i + 1}}}
              for i, t in enumerate(cfg["tables"])]
    return {
        "tables": tables,
        "entry": {short(k): v for k, v in cfg["entry"].items()},
        "edges": [{"src": short(e["src"]), "dst": short(e["dst"]), "p": e["p"]} for e in cfg["edges"]],
        "pmus": {"count": 2 * len(tables)},
    }


def defence_table(defence: str, limit_mpps: float) -> dict[str, Any]:
    """The ``[defence]`` table of a defence's name."""
    dfn: dict[str, Any] = {}
    if "doorkeeper" in defence or "shed" in defence:
        dfn["admission"] = {"policy": "doorkeeper"}
    if "doorkeeper" in defence or defence == "shed+scan":
        dfn["admission"]["judge_backlog"] = JUDGE_BACKLOG
    if "ratelimit" in defence:
        dfn["miss_rate_mpps"] = limit_mpps
        dfn["miss_burst"] = 64
    if "shed" in defence:
        dfn["shed_backlog"] = SHED_BACKLOG
    if "bound" in defence:
        dfn["shed_all_backlog"] = SHED_ALL_BACKLOG
    if defence == "slru":
        dfn["slru_protected"] = SLRU_PROTECTED
    if defence == "shed+scan":
        dfn["admission"]["repeats"] = True
        dfn.update(shed_backlog=SCAN_SHED_BACKLOG, shed_all_backlog=SHED_ALL_BACKLOG,
                   slru_protected=SCAN_SLRU_PROTECTED)
    return dfn


def scenario(p: dict[str, Any], share: float, kind: str, defence: str, limit_mpps: float, seed: int,
             name: str = "acl") -> Scenario:
    d: dict[str, Any] = {
        "seed": seed,
        "duration_ns": p["duration"],
        # UPF: half the flows (with as many as ACL's, the 10 tables' misses
        # keep the ELU near saturation with no attack).
        "traffic": {"kind": "flows", "flows": p["flows"] // (2 if name == "upf" else 1),
                    "flow_duration_ns": p["flow_duration"]},
        # Share 0 still counts the legitimate PHVs apart (the baseline).
        "attack": {"share": share, "kind": kind},
    }
    if name == "upf":
        d.update(upf_tables())
    dfn = defence_table(defence, limit_mpps)
    if dfn:
        d["defence"] = dfn
    return Scenario.model_validate(d)


def run_point(scn: Scenario) -> dict[str, Any]:
    from synapse_vmt.sim import Simulation, finish_checked

    sim = Simulation(scn)
    s = sim.run()
    return point_figures(s, finish_checked(sim, "flood"))


#: The UPF P4 program (``builtin:up4``, ``synapse_vmt.p4.upf`` entries) run
#: on packets (``synapse run --p4``), flat uplink/downlink traffic, 16 PMUs.
#: The attacker forges the uplink's GTP-U frames to the UPF's N3 address
#: (kept) with random TEIDs and UE addresses, and downlink frames to random
#: UE addresses (``[attack] keep = ["uplink:ipv4.dst"]``).
P4_DEFENCES = ["none", "doorkeeper", "slru", "shed", "shed+bound", "shed+scan"]
P4_ATTACK = {"keep": ["uplink:ipv4.dst"]}


def p4_plan(quick: bool) -> dict[str, Any]:
    if quick:
        return {"duration": 300_000.0, "flows": 1_000, "sessions": 1_000, "pmus": 16, "shares": [0.0, 0.3],
                "defences": ["none", "shed+bound", "shed+scan"], "kinds": ["random", "scan"]}
    return {"duration": 1_000_000.0, "flows": 2_000, "sessions": 1_000, "pmus": 16,
            "shares": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5], "defences": P4_DEFENCES, "kinds": KINDS}


def p4_points(out: Path, quick: bool, seed: int, progress=None):
    """(kind, defence, share, figures) of the UPF P4 program under attack."""
    import tomllib

    from synapse_vmt.errors import atomic_write
    from synapse_vmt.p4 import attack as atk
    from synapse_vmt.p4 import gentraffic, simrun, upf
    from synapse_vmt.sim import finish_checked

    q = p4_plan(quick)
    entries = out / "upf-entries.txt"
    with atomic_write(entries) as fh:
        fh.write("\n".join(upf.entries_cli(q["sessions"], seed)) + "\n")
    doc = tomllib.loads(upf.scenario(flows=q["flows"], duration_ns=q["duration"], pmus=q["pmus"], shift=False))
    program = simrun.resolve_program("builtin:up4")
    names = [c["name"] for c in doc["traffic"]["classes"]]
    for kind in q["kinds"]:
        for share in q["shares"]:
            traffic = gentraffic.parse_spec(doc["traffic"], "flood upf-p4: [traffic]")
            traffic.attack = atk.parse(dict(P4_ATTACK, share=share, kind=kind), "flood upf-p4: [attack]", names)
            pr = simrun.prepare(program, str(entries), traffic=traffic, duration_ns=q["duration"], seed=seed,
                                pmus=q["pmus"])
            for defence in q["defences"]:
                if share == 0 and kind != q["kinds"][0]:
                    continue
                if progress:
                    progress(f"upf-p4 {kind} {defence} {share:g}")
                dfn = defence_table(defence, 0.0)
                sim = simrun.build_sim(pr, simrun.even_split(pr.routes.tables, q["pmus"]), q["pmus"], seed=seed,
                                       overrides={"defence": dfn} if dfn else None)
                sim.run_until(pr.duration_ns)
                s = sim.summary()
                inv = finish_checked(sim, f"flood upf-p4 {kind} {defence} {share:g}")
                yield kind, defence, share, point_figures(s, inv)


def point_figures(s: dict[str, Any], inv: dict[str, Any]) -> dict[str, Any]:
    """A run's legitimate (and attack) figures from its summary and invariants."""
    legit, attack = s["legit"], s["attack"]
    return {
        "legit_hit_rate": legit["hit_rate"],
        "legit_throughput_mpps": legit["throughput_mpps"],
        "legit_mean_latency_ns": legit["mean_latency_ns"],
        "legit_p99_latency_ns": legit["p99_latency_ns"],
        "legit_drops": int(legit["dropped"]),
        "legit_shed": int(legit["shed"]),
        "legit_arrived": int(legit["arrived"]),
        "attack_arrived": int(attack["arrived"]),
        "attack_shed": int(attack["shed"]),
        "attack_hit_rate": attack["hit_rate"],
        "legit_misses": int(legit["misses"]),
        "wrong_action": int(inv["wrong_action"]),
    }


#: The closed-loop study: two ACL tables sharing 8 PMUs (each PMU a slow
#: CAM, II_c = 16, so a table's PMU count sets its capacity and the optimizer
#: has a reason to move them), half the flows each; from the middle of the
#: run a flood of random keys aimed at ``aclb`` (30 % of the offered packets).
CONTROL_TABLES = ("acla", "aclb")
CONTROL_TARGET = "aclb"


def control_plan(quick: bool) -> dict[str, Any]:
    if quick:
        return {"duration": 1_200_000.0, "flows": 3_000, "period": 100_000.0, "share": 0.3,
                "cal_counts": (2, 4, 6), "cal_scales": (1.0, 2.0), "cal_ns": 100_000.0}
    return {"duration": 3_000_000.0, "flows": 8_000, "period": 100_000.0, "share": 0.3,
            "cal_counts": (1, 2, 4, 6, 8), "cal_scales": (0.5, 1.0, 2.0), "cal_ns": 200_000.0}


def control_scenario(c: dict[str, Any], seed: int, attack: bool | None) -> Scenario:
    d: dict[str, Any] = {
        "seed": seed,
        "duration_ns": c["duration"],
        "pmus": {"count": 8, "ii_cycles": 16},
        "tables": [{"name": n, "rules": {"generate": {"type": "acl", "count": 300, "seed": 3 + i}}}
                   for i, n in enumerate(CONTROL_TABLES)],
        "entry": {n: 0.5 for n in CONTROL_TABLES},
        "traffic": {"kind": "flows", "flows": c["flows"], "max_bytes": 1e6},
    }
    if attack is not None:  # share 0 still counts the legitimate PHVs apart (the baseline)
        d["attack"] = {"share": c["share"] if attack else 0.0, "kind": "random", "start_ns": c["duration"] / 2,
                       "table": CONTROL_TARGET}
    return Scenario.model_validate(d)


def control_run(c: dict[str, Any], seed: int, models: dict, attack: bool, guard: bool) -> dict[str, Any]:
    """One closed loop (``opt.controller.Controller``, the fast solver) over
    the two-table scenario: the legitimate figures, the PMUs each table held
    per period, the PMUs moved, and the periods the flood guard held a table."""
    import json

    import numpy as np

    from synapse_vmt import _core
    from synapse_vmt.opt.controller import Controller, Settings
    from synapse_vmt.sim import finish_checked

    scn = control_scenario(c, seed, attack)
    sim = _core.Simulator(json.dumps(scn.sim_config()))
    st = Settings(period_ns=c["period"], window_ns=float(scn.window_ns), headroom=1.3, solver="fast",
                  settle_periods=3, flood_guard=guard)
    ctl = Controller(sim, models, int(scn.pmus.count), st)
    loop = ctl.run(c["duration"])
    s = sim.summary()
    inv = finish_checked(sim, "flood controller")
    names = ctl.names
    j = names.index(CONTROL_TARGET)
    targets = np.array([p.target for p in loop])
    start = c["duration"] / 2
    before = [int(p.target[j]) for p in loop if p.t_ns <= start]
    after = [int(p.target[j]) for p in loop if p.t_ns > start]
    moved = int(np.abs(np.diff(targets, axis=0)).sum() // 2) if len(targets) > 1 else 0
    legit = s["legit"]
    return {
        "attack": attack, "flood_guard": guard,
        "legit_throughput_mpps": legit["throughput_mpps"],
        "legit_p99_latency_ns": legit["p99_latency_ns"],
        "legit_hit_rate": legit["hit_rate"],
        "legit_drops": int(legit["dropped"]),
        "pmus_moved": moved,
        "target_pmus_before_attack": before[-1] if before else None,
        "target_pmus_max_after_attack": max(after) if after else None,
        "target_pmus_per_period": [int(x) for x in targets[:, j]],
        "flooded_periods": sum(1 for p in loop if CONTROL_TARGET in p.flooded),
        "wrong_action": int(inv["wrong_action"]),
    }


def control_study(quick: bool, seed: int = 1, progress=None) -> dict[str, Any]:
    """The closed loop with and without ``Settings.flood_guard``, with no
    attack and under the flood aimed at ``aclb`` (docs/flood.md,
    "Optimizer guard"). The capacity models are calibrated on the
    attack-free scenario (``synapse serve``'s calibration); ratios are
    against the same loop with no attack."""
    from synapse_vmt.opt.simopt import OptConfig, calibrate

    c = control_plan(quick)
    oc = OptConfig(cal_counts=c["cal_counts"], cal_scales=c["cal_scales"], cal_ns=c["cal_ns"])
    models, _ = calibrate(control_scenario(c, seed, None), oc)
    runs = []
    for attack in (False, True):
        for guard in (False, True):
            if progress:
                progress(f"controller attack={attack} flood_guard={guard}")
            runs.append(control_run(c, seed, models, attack, guard))
    for r in runs:
        base = next(x for x in runs if not x["attack"] and x["flood_guard"] == r["flood_guard"])
        r["legit_throughput_ratio"] = r["legit_throughput_mpps"] / base["legit_throughput_mpps"]
        r["legit_p99_ratio"] = r["legit_p99_latency_ns"] / base["legit_p99_latency_ns"]
    return {"scenario": "two ACL tables, 8 PMUs (II_c = 16); flood of random keys aimed at aclb from mid-run",
            "attacked_table": CONTROL_TARGET, "attack_share": c["share"], "period_ns": c["period"],
            "duration_ns": c["duration"], "runs": runs}


def run(out: Path, quick: bool, seed: int = 1, progress=None) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    p = plan(quick)
    rows: list[dict[str, Any]] = []
    baselines: dict[str, Any] = {}
    limits: dict[str, float] = {}
    cost: dict[str, dict[str, Any]] = {}
    for name in p["scenarios"]:
        base = run_point(scenario(p, 0.0, "random", "none", 0.0, seed, name))
        baselines[name] = base
        # The limit: twice the scenario's legitimate miss rate with no attack.
        limit = limits[name] = max(1.0, 2.0 * base["legit_misses"] / p["duration"] * 1e3)
        for kind in p["kinds"]:
            for defence in p["defences"]:
                for share in p["shares"]:
                    if progress:
                        progress(f"{name} {kind} {defence} {share:g}")
                    # With no attack the kind changes nothing: run each defence once.
                    same = next((r for r in rows if r["scenario"] == name and r["defence"] == defence
                                 and share == 0 == r["attack_share"]), None)
                    r = base if (share == 0 and defence == "none") else same if same else run_point(
                        scenario(p, share, kind, defence, limit, seed, name))
                    r = {k: v for k, v in r.items() if k in base}
                    rows.append({
                        "scenario": name, "kind": kind, "defence": defence, "attack_share": share,
                        "legit_throughput_ratio": r["legit_throughput_mpps"] / base["legit_throughput_mpps"],
                        "legit_p99_ratio": r["legit_p99_latency_ns"] / base["legit_p99_latency_ns"],
                        **r,
                    })
        cost[name] = {d: {"hit_rate_loss": base["legit_hit_rate"] - r["legit_hit_rate"],
                          "p99_ratio": r["legit_p99_ratio"], "throughput_ratio": r["legit_throughput_ratio"]}
                      for d in p["defences"]
                      for r in [next(x for x in rows if x["scenario"] == name and x["defence"] == d
                                     and x["attack_share"] == 0)]}
    # The UPF P4 program on packets: ratios against its own no-attack, no-defence run.
    p4base = None
    for kind, defence, share, r in p4_points(out, quick, seed, progress):
        if share == 0 and defence == "none":
            p4base = baselines["upf-p4"] = r
        rows.append({
            "scenario": "upf-p4", "kind": kind, "defence": defence, "attack_share": share,
            "legit_throughput_ratio": r["legit_throughput_mpps"] / p4base["legit_throughput_mpps"],
            "legit_p99_ratio": r["legit_p99_latency_ns"] / p4base["legit_p99_latency_ns"],
            **r,
        })
    # With no attack the kind changes nothing: each defence ran once (the first kind); copy it to the others.
    for kind in p4_plan(quick)["kinds"][1:]:
        rows.extend(dict(r, kind=kind) for r in list(rows) if r["scenario"] == "upf-p4" and r["attack_share"] == 0
                    and r["kind"] == p4_plan(quick)["kinds"][0])
    rows.sort(key=lambda r: (["acl", "upf", "upf-p4"].index(r["scenario"]), KINDS.index(r["kind"]),
                             DEFENCES.index(r["defence"]), r["attack_share"]))
    cost["upf-p4"] = {r["defence"]: {"hit_rate_loss": p4base["legit_hit_rate"] - r["legit_hit_rate"],
                                     "p99_ratio": r["legit_p99_ratio"], "throughput_ratio": r["legit_throughput_ratio"]}
                      for r in rows if r["scenario"] == "upf-p4" and r["attack_share"] == 0
                      and r["kind"] == p4_plan(quick)["kinds"][0]}
    controller = control_study(quick, seed, progress)
    summary = {
        "runs": rows,
        "controller": controller,
        "baseline": baselines,
        "miss_rate_limit_mpps": limits,
        "shed_backlog": SHED_BACKLOG,
        "shed_all_backlog": SHED_ALL_BACKLOG,
        "no_attack_cost": cost,
        "quick": quick,
    }
    write_rows(out / "flood.csv", rows)
    plot(out / "flood.png", rows)
    write_json(out / "summary.json", summary)
    return summary


def plot(path: Path, rows: list[dict[str, Any]]) -> None:
    from synapse_vmt.report import pyplot

    plt = pyplot()
    panels = list(dict.fromkeys((r["scenario"], r["kind"]) for r in rows))
    fig, ax = plt.subplots(len(panels), 3, figsize=(14, 3.2 * len(panels)), squeeze=False)
    for i, (name, kind) in enumerate(panels):
        for d in dict.fromkeys(r["defence"] for r in rows):
            pts = [r for r in rows if r["scenario"] == name and r["kind"] == kind and r["defence"] == d]
            xs = [r["attack_share"] for r in pts]
            for a, m in zip(ax[i], ["legit_throughput_ratio", "legit_p99_ratio", "legit_hit_rate"]):
                a.plot(xs, [r[m] for r in pts], "o-", ms=3, label=d)
        for a, t in zip(ax[i], ["legit throughput / no attack", "legit p99 / no attack", "legit hit rate"]):
            a.set_title(f"{name}, {kind}: {t}", fontsize=9)
        ax[i][0].axhline(0.9, color="grey", ls=":", lw=0.8)
        ax[i][1].axhline(2.0, color="grey", ls=":", lw=0.8)
        ax[i][1].set_yscale("log")
    for a in ax[-1]:
        a.set_xlabel("attack share of offered packets")
    ax[0][0].legend(fontsize=7)
    save_png(fig, path)

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
admission of PMU fills (``hw/admit.rs``), the per-table miss-rate limit
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

DEFENCES = ["none", "doorkeeper", "ratelimit", "doorkeeper+ratelimit", "shed", "shed+bound"]
KINDS = ["random", "nomatch", "scan"]
SCENARIOS = ["acl", "upf"]
#: The shed gate's thresholds, in ELU misses held: first-time keys while the
#: ELU holds its lookup slots' worth (8, `elu.lookup_slots`: a first-time
#: key then never waits for a slot), every key at twice that.
SHED_BACKLOG = 8
SHED_ALL_BACKLOG = 16


def plan(quick: bool) -> dict[str, Any]:
    if quick:
        return {"duration": 300_000.0, "flows": 360, "flow_duration": 250_000.0, "shares": [0.0, 0.3],
                "defences": ["none", "shed+bound"], "kinds": ["random"], "scenarios": SCENARIOS}
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
    if "ratelimit" in defence:
        dfn["miss_rate_mpps"] = limit_mpps
        dfn["miss_burst"] = 64
    if "shed" in defence:
        dfn["shed_backlog"] = SHED_BACKLOG
    if "bound" in defence:
        dfn["shed_all_backlog"] = SHED_ALL_BACKLOG
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
    inv = finish_checked(sim, "flood")
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
    summary = {
        "runs": rows,
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

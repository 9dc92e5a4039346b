"""``synapse reproduce flood``: cache flooding (paper §8) and its defences.

The default ACL scenario carries its legitimate flows while a share of the
offered packets (0 to 50 %) is attack traffic (``[attack]``,
``crates/synapse-core/src/workload/attack.rs``): never-repeating random
keys, or a scan of 1.1 × the PMU entries. Each share runs with no defence
(plain LRU, ``"none"``) and with each defence (``[defence]``): the
doorkeeper admission of PMU fills (``hw/admit.rs``), the per-table
miss-rate limit into the ELU (``hw/ratelimit.rs``; set at twice the
table's no-attack miss rate), and both. Per run, the legitimate PHVs'
figures only (the simulator counts attack PHVs apart): throughput and p99
latency as ratios against the same scenario with no attack and no
defence, hit rate, drops, and the oracle's wrong answers over every PHV
(must be 0). ``no_attack_cost`` is each defence's hit-rate loss on the
attack-free (CAIDA-like) traffic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synapse_vmt.report import save_png, write_json, write_rows
from synapse_vmt.scenario import Scenario

DEFENCES = ["none", "doorkeeper", "ratelimit", "doorkeeper+ratelimit"]


def plan(quick: bool) -> dict[str, Any]:
    if quick:
        return {"duration": 300_000.0, "flows": 360, "flow_duration": 250_000.0, "shares": [0.0, 0.3],
                "defences": ["none", "doorkeeper"], "kinds": ["random"]}
    return {"duration": 1_000_000.0, "flows": 1_200, "flow_duration": 250_000.0,
            "shares": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5], "defences": DEFENCES, "kinds": ["random", "scan"]}


def scenario(p: dict[str, Any], share: float, kind: str, defence: str, limit_mpps: float, seed: int) -> Scenario:
    d: dict[str, Any] = {
        "seed": seed,
        "duration_ns": p["duration"],
        "traffic": {"kind": "flows", "flows": p["flows"], "flow_duration_ns": p["flow_duration"]},
        # Share 0 still counts the legitimate PHVs apart (the baseline).
        "attack": {"share": share, "kind": kind},
    }
    dfn: dict[str, Any] = {}
    if "doorkeeper" in defence:
        dfn["admission"] = {"policy": "doorkeeper"}
    if "ratelimit" in defence:
        dfn["miss_rate_mpps"] = limit_mpps
        dfn["miss_burst"] = 64
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
        "legit_arrived": int(legit["arrived"]),
        "attack_arrived": int(attack["arrived"]),
        "attack_hit_rate": attack["hit_rate"],
        "legit_misses": int(legit["misses"]),
        "wrong_action": int(inv["wrong_action"]),
    }


def run(out: Path, quick: bool, seed: int = 1, progress=None) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    p = plan(quick)
    base = run_point(scenario(p, 0.0, "random", "none", 0.0, seed))
    # The limit: twice the table's legitimate miss rate with no attack.
    limit = max(1.0, 2.0 * base["legit_misses"] / p["duration"] * 1e3)
    rows: list[dict[str, Any]] = []
    for kind in p["kinds"]:
        for defence in p["defences"]:
            for share in p["shares"]:
                if progress:
                    progress(f"acl {kind} {defence} {share:g}")
                r = base if (share == 0 and defence == "none") else run_point(
                    scenario(p, share, kind, defence, limit, seed))
                rows.append({
                    "scenario": "acl", "kind": kind, "defence": defence, "attack_share": share,
                    "legit_throughput_ratio": r["legit_throughput_mpps"] / base["legit_throughput_mpps"],
                    "legit_p99_ratio": r["legit_p99_latency_ns"] / base["legit_p99_latency_ns"],
                    **r,
                })
    cost = {d: base["legit_hit_rate"] - next(r["legit_hit_rate"] for r in rows
                                              if r["defence"] == d and r["attack_share"] == 0)
            for d in p["defences"]}
    summary = {
        "runs": rows,
        "baseline": {"scenario": "acl", **base},
        "miss_rate_limit_mpps": limit,
        "no_attack_cost": {d: {"hit_rate_loss": c} for d, c in cost.items()},
        "quick": quick,
    }
    write_rows(out / "flood.csv", rows)
    plot(out / "flood.png", rows)
    write_json(out / "summary.json", summary)
    return summary


def plot(path: Path, rows: list[dict[str, Any]]) -> None:
    from synapse_vmt.report import pyplot

    plt = pyplot()
    kinds = sorted({r["kind"] for r in rows})
    fig, ax = plt.subplots(len(kinds), 3, figsize=(14, 3.6 * len(kinds)), squeeze=False)
    for i, kind in enumerate(kinds):
        for d in dict.fromkeys(r["defence"] for r in rows):
            pts = [r for r in rows if r["kind"] == kind and r["defence"] == d]
            xs = [r["attack_share"] for r in pts]
            for a, m in zip(ax[i], ["legit_throughput_ratio", "legit_p99_ratio", "legit_hit_rate"]):
                a.plot(xs, [r[m] for r in pts], "o-", label=d)
        for a, t in zip(ax[i], ["legit throughput / no attack", "legit p99 latency / no attack", "legit hit rate"]):
            a.set_title(f"{t} ({kind})")
            a.set_xlabel("attack share of offered packets")
        ax[i][0].axhline(0.9, color="grey", ls=":", lw=0.8)
        ax[i][1].axhline(2.0, color="grey", ls=":", lw=0.8)
        ax[i][0].legend(fontsize=7)
    save_png(fig, path)

"""``synapse reproduce updates``: rule updates while traffic flows (issue 9).

One ACL table of generated rules behind 8 PMUs carries its load (the default
scenario's flows) while random churn inserts, deletes and modifies entries
at 10², 10⁴ and 10⁶ updates/s (``[[updates]]`` with ``churn_per_s``; the
engine in ``crates/synapse-core/src/sim/updates.rs``). Three ways to apply
them are run over the same seeded traffic and churn:

- **trie**: the trie (the default ELU structure) rebuilt beside the old one
  and swapped (the replica swap t4p4s measures), its write time charged in
  simulated time (its bytes at ``build_gbps`` plus ``swap_ns``);
- **dtree**: the decision tree updated in place (FACL), ``dtree_op_ns``
  per operation;
- **ptree**: the partitioned tree updated in place (inserts into a small
  delta beside the trees, deletes as tombstones in the leaf blocks, folded
  into the trees in place past their bound), ``ptree_op_ns`` per
  operation, a fold-in charged as a replica write;

the trie and the decision tree each with **exact** invalidation (the PMUs
drop exactly the cached keys a changed entry covers) and **flush** (every
PMU of the table clears its CAM); the partitioned tree with exact
invalidation.
``summary.json``'s ``churn`` table is the trie with exact invalidation.

Per rate: stale and wrong answers counted by the versioned oracle (both
must be 0), update latency (request → every PMU consistent), committed
updates per second, hit rate and throughput; plus each mode's sustained
update rate (offered far beyond it: what the engine commits per second,
batching what waits) and the no-churn baseline. t4p4s's measured figures
(``t4p4s-writable-table-entries``: change method 3.39 k updates/s at
322 µs median latency; pointer method 1.73 M/s at 26.5 µs; digest method
4.1 k/s at 65.3 µs) are set beside them.

**Consistency across tables** (``consistency`` in ``summary.json``,
``consistency.png``): two tables in a row (``acl`` with the plan's rules
feeding ``fw`` with a tenth of them) under churn whose every event is one
transaction touching the same flow in both tables (``churn_tables``), at
the same rates, with each table committing on its own (``table``) or one
program version per PHV (``program``: two-phase, version tags;
``sim/xtable.rs``). Per point: PHVs whose answers came from different
versions (``mixed_version_phvs``, of ``checked_phvs``; must be 0 for
``program``), request → flip and request → retire latency, structure bytes
held beside the ones in force (peak and mean), hit rate, throughput and
latency. Churn stops at the plan's duration; the run goes on until every
update is in force, so every PHV's check is decided.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synapse_vmt.report import save_png, write_json, write_rows
from synapse_vmt.scenario import Scenario

RATES = [1e2, 1e4, 1e6]
#: Offered far beyond any engine's capacity: what is committed is the
#: sustained rate.
SATURATE = 1e8
MODES = {
    "trie_exact": ("trie", "exact"),
    "trie_flush": ("trie", "flush"),
    "dtree_exact": ("dtree", "exact"),
    "dtree_flush": ("dtree", "flush"),
    "ptree_exact": ("ptree", "exact"),
}
#: The mode of ``summary.json``'s ``churn`` table: the default ELU
#: structure (the trie) with exact invalidation.
MAIN = "trie_exact"
#: t4p4s (DPDK software switch), 700 B packets, one update per packet.
T4P4S = {
    "change_method": {"updates_per_s": 3.39e3, "latency_us_p50": 322.0},
    "pointer_method": {"updates_per_s": 1.73e6, "latency_us_p50": 26.5},
    "digest_method": {"updates_per_s": 4.1e3, "latency_us_p50": 65.3},
}


def plan(quick: bool) -> dict[str, float]:
    if quick:
        return {"duration": 700_000.0, "warmup": 150_000.0, "rules": 500, "flows": 800}
    return {"duration": 2_000_000.0, "warmup": 250_000.0, "rules": 1000, "flows": 1200}


def scenario(p: dict[str, float], algo: str, invalidate: str, rate: float, seed: int) -> Scenario:
    d: dict[str, Any] = {
        "seed": seed,
        "duration_ns": p["duration"],
        "tables": [{"name": "acl", "rules": {"generate": {"type": "acl", "count": int(p["rules"]), "seed": seed}}}],
        "elu": {"algo": algo},
        "traffic": {"kind": "flows", "flows": int(p["flows"]), "flow_duration_ns": p["warmup"]},
        "update_engine": {"invalidate": invalidate},
    }
    if rate > 0:
        d["updates"] = [{"at_ns": p["warmup"], "churn_per_s": rate, "seed": seed}]
    return Scenario.model_validate(d)


def run_point(scn: Scenario) -> dict[str, Any]:
    from synapse_vmt.sim import Simulation, failure

    sim = Simulation(scn)
    s = sim.run()["tables"]["acl"]
    u = sim.update_stats()
    inv = sim.finish()  # measured over the duration; every answer checked to the end
    if not inv["drained"]:
        raise RuntimeError(failure(inv))
    rate = scn.updates[0].churn_per_s if scn.updates else 0.0
    # Committed per second of churn; a rate too low for the run to see
    # many requests counts over the time its requests took to come.
    churn_s = (scn.duration_ns - scn.updates[0].at_ns) * 1e-9 if scn.updates else 1.0
    if rate > 0:
        churn_s = max(churn_s, u["requested"] / rate)
    return {
        "stale_answers": int(inv["stale_answers"]),
        "wrong_action": int(inv["wrong_action"]),
        "lost": int(inv["lost"]),
        "update_latency_us_p50": u["latency_ns_p50"] / 1e3,
        "update_latency_us_p99": u["latency_ns_p99"] / 1e3,
        "updates_per_s": u["committed"] / churn_s if rate > 0 else 0.0,
        "build_us_per_batch": u["build_ns"] / 1e3 / max(u["batches"], 1),
        "requested": int(u["requested"]),
        "committed": int(u["committed"]),
        "batches": int(u["batches"]),
        "invalidated": int(u["invalidated"]),
        "uncached_fills": int(u["uncached_fills"]),
        "hit_rate": s["hit_rate"],
        "throughput_mpps": s["throughput_mpps"],
        "mean_latency_ns": s["mean_latency_ns"],
        "p99_latency_ns": s["p99_latency_ns"],
        "wall_s": sim.wall_s,
    }


CONSISTENCY = ["table", "program"]
#: Run on after the churn stops, so every update commits (ns).
DRAIN_NS = 2_500_000.0


def scenario2(p: dict[str, float], consistency: str, rate: float, seed: int) -> Scenario:
    gen = lambda n, s: {"generate": {"type": "acl", "count": int(n), "seed": s}}  # noqa: E731
    d: dict[str, Any] = {
        "seed": seed,
        "duration_ns": p["duration"] + DRAIN_NS,
        "tables": [{"name": "acl", "rules": gen(p["rules"], seed)},
                   {"name": "fw", "rules": gen(max(p["rules"] // 10, 10), seed + 1)}],
        "edges": [{"src": "acl", "dst": "fw", "p": 1.0}],
        "traffic": {"kind": "flows", "flows": int(p["flows"]), "flow_duration_ns": p["warmup"]},
        "update_engine": {"consistency": consistency},
    }
    if rate > 0:
        d["updates"] = [{"at_ns": p["warmup"], "until_ns": p["duration"], "churn_per_s": rate,
                         "churn_tables": ["acl", "fw"], "seed": seed}]
    return Scenario.model_validate(d)


def run_consistency(scn: Scenario) -> dict[str, Any]:
    from synapse_vmt.sim import Simulation, failure

    sim = Simulation(scn)
    tables = sim.run()["tables"]
    u = sim.update_stats()
    inv = sim.finish()
    if not inv["drained"]:
        raise RuntimeError(failure(inv))
    mean = lambda k: sum(t[k] for t in tables.values()) / len(tables)  # noqa: E731
    return {
        "mixed_version_phvs": int(u["mixed_version_phvs"]),
        "checked_phvs": int(u["checked_phvs"]),
        "mixed_unresolved": int(u["mixed_unresolved"]),
        "stale_answers": int(inv["stale_answers"]),
        "wrong_action": int(inv["wrong_action"]),
        "committed": int(u["committed"]),
        "flips": int(u["flips"]),
        "update_latency_us_p50": u["latency_ns_p50"] / 1e3,
        "update_latency_us_p99": u["latency_ns_p99"] / 1e3,
        "retire_latency_us_p50": u["retire_latency_ns_p50"] / 1e3,
        "retire_latency_us_p99": u["retire_latency_ns_p99"] / 1e3,
        "extra_mb_peak": u["extra_bytes_peak"] / 1e6,
        "extra_mb_mean": u["extra_bytes_mean"] / 1e6,
        "structure_mb": u["structure_bytes"] / 1e6,
        "old_version_answers": int(u["old_version_answers"]),
        "uncached_fills": int(u["uncached_fills"]),
        "hit_rate": mean("hit_rate"),
        "throughput_mpps": min(t["throughput_mpps"] for t in tables.values()),
        "mean_latency_ns": mean("mean_latency_ns"),
        "wall_s": sim.wall_s,
    }


def run(out: Path, quick: bool, seed: int = 1, progress=None) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    p = plan(quick)
    modes: dict[str, dict[str, Any]] = {}
    rows = []
    for name, (algo, inv) in MODES.items():
        m: dict[str, Any] = {}
        for rate in [0.0, *RATES, SATURATE]:
            if progress:
                progress(f"{name} {rate:g}/s")
            r = run_point(scenario(p, algo, inv, rate, seed))
            key = "baseline" if rate == 0 else "sustained" if rate == SATURATE else f"{rate:g}"
            m[key] = r
            rows.append({"mode": name, "churn_per_s": rate, **r})
        modes[name] = m
    cons: dict[str, dict[str, Any]] = {}
    crows = []
    for c in CONSISTENCY:
        cons[c] = {}
        for rate in RATES:
            if progress:
                progress(f"consistency {c} {rate:g}/s")
            r = run_consistency(scenario2(p, c, rate, seed))
            cons[c][f"{rate:g}"] = r
            crows.append({"consistency": c, "churn_per_s": rate, **r})
    main = modes[MAIN]
    summary = {
        "churn": {k: {f: main[k][f] for f in ("stale_answers", "wrong_action", "update_latency_us_p50",
                                              "update_latency_us_p99", "updates_per_s", "hit_rate",
                                              "throughput_mpps")}
                  for k in (f"{r:g}" for r in RATES)},
        "baseline": {f: main["baseline"][f] for f in ("hit_rate", "throughput_mpps")},
        "sustained_updates_per_s": {n: m["sustained"]["updates_per_s"] for n, m in modes.items()},
        "modes": modes,
        "t4p4s": T4P4S,
        "consistency": cons,
        "plan": p,
        "seed": seed,
    }
    write_rows(out / "updates.csv", rows)
    write_rows(out / "consistency.csv", crows)
    write_json(out / "summary.json", summary)
    plot(out / "updates.png", modes)
    plot_consistency(out / "consistency.png", cons)
    return summary


def plot_consistency(path: Path, cons: dict[str, dict[str, Any]]) -> None:
    from synapse_vmt.report import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(1, 4, figsize=(17, 3.8))
    xs = RATES
    for c, m in cons.items():
        pts = [m[f"{r:g}"] for r in xs]
        ax[0].plot(xs, [q["mixed_version_phvs"] / max(q["checked_phvs"], 1) for q in pts], "o-", label=c)
        ax[1].plot(xs, [q["hit_rate"] for q in pts], "o-", label=f"{c} hit rate")
        ax[1].plot(xs, [q["throughput_mpps"] / 20.0 for q in pts], "x--", label=f"{c} Mpps / 20")
        ax[2].plot(xs, [max(q["update_latency_us_p50"], 1e-3) for q in pts], "o-", label=f"{c} flip p50")
        ax[2].plot(xs, [max(q["retire_latency_us_p50"], 1e-3) for q in pts], "x--", label=f"{c} retire p50")
        ax[3].plot(xs, [q["extra_mb_mean"] for q in pts], "o-", label=f"{c} mean")
        ax[3].plot(xs, [q["extra_mb_peak"] for q in pts], "x--", label=f"{c} peak")
    for a, t in zip(ax, ["PHVs with answers of mixed versions", "hit rate, throughput",
                         "update latency (µs)", "extra structure MB held"]):
        a.set_xscale("log")
        a.set_xlabel("churn (transactions/s over 2 tables)")
        a.set_title(t)
        a.legend(fontsize=7)
    ax[2].set_yscale("log")
    save_png(fig, path)


def plot(path: Path, modes: dict[str, dict[str, Any]]) -> None:
    from synapse_vmt.report import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(1, 4, figsize=(17, 3.8))
    xs = RATES
    for name, m in modes.items():
        pts = [m[f"{r:g}"] for r in xs]
        ax[0].plot(xs, [q["hit_rate"] for q in pts], "o-", label=name)
        ax[1].plot(xs, [q["throughput_mpps"] for q in pts], "o-", label=name)
        ax[2].plot(xs, [max(q["update_latency_us_p50"], 1e-3) for q in pts], "o-", label=f"{name} p50")
        ax[2].plot(xs, [max(q["update_latency_us_p99"], 1e-3) for q in pts], "x--", label=f"{name} p99")
        ax[3].bar(name, m["sustained"]["updates_per_s"])
        ax[0].axhline(m["baseline"]["hit_rate"], ls=":", lw=0.8, color=ax[0].lines[-1].get_color())
    for k, v in T4P4S.items():
        ax[2].axhline(v["latency_us_p50"], color="grey", ls=":", lw=0.8)
        ax[2].text(xs[0], v["latency_us_p50"], f"t4p4s {k.split('_')[0]}", fontsize=7, va="bottom")
        ax[3].bar(f"t4p4s\n{k.split('_')[0]}", v["updates_per_s"], color="grey")
    for a, t in zip(ax[:3], ["hit rate (dotted: no churn)", "throughput (Mpps)", "update latency (µs)"]):
        a.set_xscale("log")
        a.set_xlabel("churn (updates/s)")
        a.set_title(t)
    ax[2].set_yscale("log")
    ax[3].set_yscale("log")
    ax[3].set_title("sustained updates/s")
    ax[3].tick_params(axis="x", labelsize=7, rotation=30)
    ax[0].legend(fontsize=7)
    ax[2].legend(fontsize=6)
    save_png(fig, path)

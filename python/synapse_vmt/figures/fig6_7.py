"""The paper's simulator figures.

- **Fig. 6**: hit rate, per-key latency (box plots) and HBM bandwidth against
  VMT capacity (the sum of its PMUs' block sizes) for block sizes 64, 128,
  256 and 512, under the CAIDA 2019 and 2018 flow-size distributions.
- **Fig. 7**: throughput and HBM bandwidth against offered load for a VMT of
  3, 4 and 5 PMUs of 256 entries; load is raised by adding flows (§6).

Each writes ``figN.csv``, ``figN.png`` and ``summary.json`` (the points plus
the shape checks the paper's text states), ``--quick`` being a smaller sweep
for tests.
"""

from __future__ import annotations

from pathlib import Path

import click

from synapse_vmt.figures.common import monotone, progress_runner, run_point, scenario

BLOCKS = [64, 128, 256, 512]
DISTS = ["caida2019", "caida2018"]

#: Fig. 6 workload: one ACL table of 1000 rules; the load and working set are
#: set by the flows, which stay active for the whole run.
FIG6_BASE = [
    "tables.0.rules.generate.count=1000",
    "tables.0.lookup_bits=10",
    "traffic.mean_pkt_bytes=800",
]


def _fig6_grid(quick: bool) -> tuple[list[int], list[str]]:
    # 3000 flows over 1 ms (about 64 Mpps, below the ELU's saturation): a
    # working set of the order of the capacities swept.
    if quick:
        return [512, 1024, 2048], ["duration_ns=500000", "traffic.flows=1500", "traffic.flow_duration_ns=500000"]
    return [512, 1024, 1536, 2048, 3072, 4096], ["duration_ns=1000000", "traffic.flows=3000",
                                                 "traffic.flow_duration_ns=1000000"]


def fig6(out: Path, quick: bool, quiet: bool = False) -> dict:
    from synapse_vmt import report  # matplotlib: loaded only when a figure is made

    caps, load_ovr = _fig6_grid(quick)
    points = [(d, b, c) for d in DISTS for b in BLOCKS for c in caps if c >= b]
    rows = []
    prog, step = progress_runner(len(points), quiet)
    with prog:
        for d, b, c in points:
            scn = scenario(FIG6_BASE + load_ovr + [f"traffic.dist={d}", f"pmus.block_size={b}", f"pmus.count={c // b}"])
            r = run_point(scn)
            rows.append({"dist": d, "block_size": b, "capacity": c, "pmus": c // b, **r})
            step(f"fig6 {d} block {b} capacity {c}")
    cols = ["dist", "block_size", "capacity", "pmus", "hit_rate", "mean_latency_ns", "lat_p05_ns", "lat_p25_ns",
            "lat_p50_ns", "lat_p75_ns", "lat_p95_ns", "p99_latency_ns", "hbm_gbps", "offered_mpps",
            "throughput_mpps", "keys"]
    _write_csv(out / "fig6.csv", rows, cols)
    checks = {}
    for d in DISTS:
        for b in BLOCKS:
            s = sorted((r for r in rows if r["dist"] == d and r["block_size"] == b), key=lambda r: r["capacity"])
            if len(s) < 2:
                continue
            checks[f"{d}/block{b}: hit rate rises with capacity"] = monotone([r["hit_rate"] for r in s], True, 0.01)
            checks[f"{d}/block{b}: mean latency falls with capacity"] = monotone(
                [r["mean_latency_ns"] for r in s], False, 0.05 * s[0]["mean_latency_ns"])
            checks[f"{d}/block{b}: HBM bandwidth falls with capacity"] = monotone(
                [r["hbm_gbps"] for r in s], False, 0.05 * max(r["hbm_gbps"] for r in s))
        for c in caps:
            s = sorted((r for r in rows if r["dist"] == d and r["capacity"] == c), key=lambda r: r["block_size"])
            if len(s) >= 2:
                checks[f"{d}/capacity{c}: smaller blocks have a lower hit rate"] = s[0]["hit_rate"] <= s[-1]["hit_rate"] + 0.005
    _plot_fig6(out / "fig6.png", rows, caps)
    summary = {"figure": "fig6", "quick": quick, "points": rows, "checks": checks,
               "all_checks_pass": all(checks.values())}
    report.write_json(out / "summary.json", summary)
    return summary


def _plot_fig6(path: Path, rows: list[dict], caps: list[int]) -> None:
    from synapse_vmt import report

    plt = report.pyplot()
    fig, ax = plt.subplots(3, 2, figsize=(12, 11))
    width = 0.8 / len(BLOCKS)
    for j, d in enumerate(DISTS):
        for k, b in enumerate(BLOCKS):
            s = sorted((r for r in rows if r["dist"] == d and r["block_size"] == b), key=lambda r: r["capacity"])
            if not s:
                continue
            xs = [caps.index(r["capacity"]) for r in s]
            ax[0, j].plot(xs, [r["hit_rate"] for r in s], "o-", label=f"block {b}")
            stats = [{"med": r["lat_p50_ns"], "q1": r["lat_p25_ns"], "q3": r["lat_p75_ns"], "whislo": r["lat_p05_ns"],
                      "whishi": r["lat_p95_ns"], "mean": r["mean_latency_ns"], "fliers": []} for r in s]
            pos = [x - 0.4 + width * (k + 0.5) for x in xs]
            bp = ax[1, j].bxp(stats, positions=pos, widths=width * 0.9, showmeans=True, patch_artist=True,
                              manage_ticks=False)
            for patch in bp["boxes"]:
                patch.set_facecolor(f"C{k}")
                patch.set_alpha(0.6)
            ax[2, j].plot(xs, [r["hbm_gbps"] for r in s], "o-", label=f"block {b}")
        for i, (title, ylab) in enumerate([("Hit rate", "hit rate"), ("Per-key latency (5/25/50/75/95 %, mean ▲)", "ns"),
                                           ("HBM bandwidth", "GB/s")]):
            a = ax[i, j]
            a.set_title(f"{title} — {d}")
            a.set_ylabel(ylab)
            a.set_xticks(range(len(caps)), [str(c) for c in caps])
            a.set_xlabel("VMT capacity (entries)")
            a.grid(alpha=0.3)
        ax[1, j].set_yscale("log")
        ax[0, j].legend(fontsize=8)
        ax[2, j].legend(fontsize=8)
    fig.tight_layout()
    report.save_png(fig, path)


#: Fig. 7 workload: a VMT of n PMUs of 256 entries, load raised by flows.
#: Eight ring points per PMU: with the paper's single point, the fifth PMU of
#: this seed owns 2 of the 1024 lookup-table entries, so 4 and 5 PMUs give
#: the same curve (Fig. 6 keeps the single point: that imbalance is what
#: makes small blocks lose at equal capacity).
FIG7_BASE = [
    "tables.0.rules.generate.count=1000",
    "pmus.block_size=256",
    "traffic.dist=caida2019",
    "vmu.vnodes=8",
]


def _fig7_grid(quick: bool) -> tuple[list[int], list[int], list[str]]:
    load = ["duration_ns=1000000", "traffic.flow_duration_ns=1000000"]
    if quick:
        return [3, 5], [500, 2000, 4000, 12000], load
    return [3, 4, 5], [250, 500, 1000, 2000, 3000, 4000, 5000, 6000, 8000, 12000, 16000], load


def fig7(out: Path, quick: bool, quiet: bool = False) -> dict:
    from synapse_vmt import report  # matplotlib: loaded only when a figure is made

    ns, flows, load_ovr = _fig7_grid(quick)
    rows = []
    prog, step = progress_runner(len(ns) * len(flows), quiet)
    with prog:
        for n in ns:
            for f in flows:
                scn = scenario(FIG7_BASE + load_ovr + [f"pmus.count={n}", f"traffic.flows={f}"])
                r = run_point(scn)
                rows.append({"pmus": n, "flows": f, **r})
                step(f"fig7 {n} PMUs {f} flows")
    cols = ["pmus", "flows", "offered_mpps", "throughput_mpps", "hit_rate", "hbm_gbps", "mean_latency_ns",
            "p99_latency_ns", "drops", "keys"]
    _write_csv(out / "fig7.csv", rows, cols)
    checks = {}
    peaks = {}
    for n in ns:
        s = [r for r in rows if r["pmus"] == n]
        thr = [r["throughput_mpps"] for r in s]
        k = max(range(len(thr)), key=thr.__getitem__)
        peaks[n] = thr[k]
        checks[f"{n} PMUs: throughput follows the offered load at low load"] = (
            abs(s[0]["throughput_mpps"] - s[0]["offered_mpps"]) <= 0.1 * s[0]["offered_mpps"] + 0.05)
        checks[f"{n} PMUs: throughput saturates then declines"] = 0 < k < len(thr) - 1 and thr[-1] < 0.95 * thr[k]
        checks[f"{n} PMUs: HBM bandwidth rises with load"] = s[-1]["hbm_gbps"] > s[0]["hbm_gbps"]
    checks["saturation throughput grows with PMUs"] = monotone([peaks[n] for n in ns], True, 0.02 * max(peaks.values()))
    _plot_fig7(out / "fig7.png", rows, ns)
    summary = {"figure": "fig7", "quick": quick, "points": rows, "peak_throughput_mpps": peaks, "checks": checks,
               "all_checks_pass": all(checks.values())}
    report.write_json(out / "summary.json", summary)
    return summary


def _plot_fig7(path: Path, rows: list[dict], ns: list[int]) -> None:
    from synapse_vmt import report

    plt = report.pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
    for n in ns:
        s = [r for r in rows if r["pmus"] == n]
        x = [r["offered_mpps"] for r in s]
        ax[0].plot(x, [r["throughput_mpps"] for r in s], "o-", label=f"{n} PMUs × 256")
        ax[1].plot(x, [r["hbm_gbps"] for r in s], "o-", label=f"{n} PMUs × 256")
    ax[0].set(title="(a) VMT throughput", xlabel="input rate (Mpps)", ylabel="throughput (Mpps)")
    ax[1].set(title="(b) External memory bandwidth", xlabel="input rate (Mpps)", ylabel="GB/s")
    for a in ax:
        a.grid(alpha=0.3)
        a.legend()
    fig.tight_layout()
    report.save_png(fig, path)


def _write_csv(path: Path, rows: list[dict], cols: list[str]) -> None:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(cols)
    for r in rows:
        w.writerow([f"{r[c]:.6g}" if isinstance(r[c], float) else r[c] for c in cols])
    from synapse_vmt.errors import atomic_write

    with atomic_write(path) as f:
        f.write(buf.getvalue())


def _command(name: str, fn, doc: str) -> click.Command:
    @click.command(name, help=doc)
    @click.option("-o", "--output", type=click.Path(file_okay=False), default=f"results/{name}", show_default=True,
                  help="Output directory.")
    @click.option("--quick", is_flag=True, help="A smaller sweep (for tests).")
    @click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
    def cmd(output: str, quick: bool, quiet: bool) -> None:
        s = fn(Path(output), quick, quiet)
        if not quiet:
            for k, v in s["checks"].items():
                click.echo(f"{'ok  ' if v else 'FAIL'} {k}")
            click.echo(f"wrote {output}/{name}.csv, {name}.png, summary.json")

    return cmd


COMMANDS = [
    _command("fig6", fig6, "Fig. 6: hit rate, latency and HBM bandwidth vs VMT capacity for block sizes 64-512."),
    _command("fig7", fig7, "Fig. 7: throughput and HBM bandwidth vs offered load for 3, 4, 5 PMUs of 256."),
]

"""The paper's simulator figures.

- **Fig. 6**: hit rate, per-key latency (box plots) and HBM bandwidth against
  VMT capacity (the sum of its PMUs' block sizes) for block sizes 64, 128,
  256 and 512, under the CAIDA 2019 and 2018 flow-size distributions.
- **Fig. 7**: throughput and HBM bandwidth against offered load for a VMT of
  3, 4 and 5 PMUs of 256 entries; load is raised by adding flows (§6).

Each point runs for several seeds through the sweep machinery
(:mod:`synapse_vmt.sweep`, resumable, on every core or on Ray; per seed in
``sweep/results.parquet``). Each writes ``figN.csv``, ``figN.png`` and
``summary.json``: per point the mean over the seeds and its 95 % t-interval
(``METRIC_lo``, ``METRIC_hi``), and the shape checks the paper's text states,
on the means. ``--quick`` is a smaller sweep with fewer seeds, for tests.

``--fast`` draws the figure from fast-mode points (docs/fast-mode.md; per
seed in ``sweep-fast/results.parquet``) and runs every K-th point
(``--exact-every K``) in the exact engine too (``sweep/``, shared with the
exact figure's runs): those are overlaid as markers, written to
``figN-exact.csv``, and each one's fast − exact difference goes in
``summary.json`` (``agreement``), so a reader sees where the two agree.
"""

from __future__ import annotations

from pathlib import Path

import click

from synapse_vmt.figures.common import QUICK_SEEDS, SEEDS, errbar, monotone, over_seeds, seed_list, sweep_points

BLOCKS = [64, 128, 256, 512]
DISTS = ["caida2019", "caida2018"]

#: Fig. 6 workload: one ACL table of 1000 rules; the load and working set are
#: set by the flows, which stay active for the whole run.
FIG6_BASE = {
    "tables.0.rules.generate.count": 1000,
    "tables.0.lookup_bits": 10,
    "traffic.mean_pkt_bytes": 800,
}

#: Per-point figures averaged over the seeds (each also gets a 95 % interval).
FIG6_METRICS = ["hit_rate", "mean_latency_ns", "lat_p05_ns", "lat_p25_ns", "lat_p50_ns", "lat_p75_ns", "lat_p95_ns",
                "p99_latency_ns", "hbm_gbps", "offered_mpps", "throughput_mpps", "keys"]
FIG7_METRICS = ["offered_mpps", "throughput_mpps", "hit_rate", "hbm_gbps", "mean_latency_ns", "p99_latency_ns",
                "drops", "keys"]


def _fig6_grid(quick: bool) -> tuple[list[int], dict]:
    # 3000 flows over 1 ms (about 64 Mpps, below the ELU's saturation): a
    # working set of the order of the capacities swept.
    if quick:
        return [512, 1024, 2048], {"duration_ns": 500000, "traffic.flows": 1500, "traffic.flow_duration_ns": 500000}
    return [512, 1024, 1536, 2048, 3072, 4096], {"duration_ns": 1000000, "traffic.flows": 3000,
                                                 "traffic.flow_duration_ns": 1000000}


def _cols(keys: list[str], metrics: list[str]) -> list[str]:
    return [*keys, "seeds", *[c for m in metrics for c in (m, f"{m}_lo", f"{m}_hi")]]


#: ``--exact-every`` with ``--fast`` when not given: a third of the points.
EXACT_EVERY = 3


def _run(points: list[dict], fixed: dict, seeds: list[int], out: Path, workers, ray, quiet: bool, fast: bool,
         exact_every: int | None) -> tuple[list[dict], list[dict] | None]:
    """The figure's points × seeds: in the exact engine (``out/sweep``), or,
    ``fast``, every point in the fast mode (``out/sweep-fast``) and every
    ``exact_every``-th in the exact engine too (``out/sweep``; 0: none).
    Returns the rows to draw and the exact rows to overlay (``None``: not
    fast)."""
    if not fast:
        return sweep_points(points, fixed, seeds, out / "sweep", workers, ray, quiet)[1], None
    _, res = sweep_points(points, fixed, seeds, out / "sweep-fast", workers, ray, quiet, fast=True)
    k = EXACT_EVERY if exact_every is None else exact_every
    some = points[::k] if k > 0 else []
    exact = sweep_points(some, fixed, seeds, out / "sweep", workers, ray, quiet)[1] if some else []
    return res, exact


def _agreement(rows: list[dict], exact: list[dict], keys: list[str], metrics: list[str]) -> list[dict]:
    """Per overlaid exact point: each metric's exact and fast means (over
    the seeds) and the difference (absolute for the hit rate, relative to
    the exact value otherwise)."""
    fast = {tuple(r[k] for k in keys): r for r in rows}
    out = []
    for e in exact:
        f = fast[tuple(e[k] for k in keys)]
        a: dict = {k: e[k] for k in keys}
        for m in metrics:
            x, y = e[m], f[m]
            err = y - x if m == "hit_rate" else ((y - x) / x if x else 0.0)
            a[m] = {"exact": x, "fast": y, "error": err}
        out.append(a)
    return out


FIG6_KEYS = ["dist", "block_size", "capacity", "pmus"]


def _fig6_rows(res: list[dict]) -> list[dict]:
    for r in res:
        r["dist"], r["block_size"] = r["traffic.dist"], r["pmus.block_size"]
        r["pmus"], r["capacity"] = r["pmus.count"], r["pmus.count"] * r["pmus.block_size"]
    return over_seeds(res, FIG6_KEYS, FIG6_METRICS)


def fig6(out: Path, quick: bool, quiet: bool = False, seeds: int | None = None, seed: int = 1,
         workers: int | None = None, ray: str | None = None, fast: bool = False, exact_every: int | None = None) -> dict:
    from synapse_vmt import report  # matplotlib: loaded only when a figure is made

    caps, load_ovr = _fig6_grid(quick)
    pts = [(d, b, c) for d in DISTS for b in BLOCKS for c in caps if c >= b]
    seeds_ = seed_list(seed, seeds or (QUICK_SEEDS if quick else SEEDS))
    res, ex = _run([{"traffic.dist": d, "pmus.block_size": b, "pmus.count": c // b} for d, b, c in pts],
                   {**FIG6_BASE, **load_ovr}, seeds_, out, workers, ray, quiet, fast, exact_every)
    rows = _fig6_rows(res)
    exact = _fig6_rows(ex) if ex is not None else None
    _write_csv(out / "fig6.csv", rows, _cols(FIG6_KEYS, FIG6_METRICS))
    if exact is not None:
        _write_csv(out / "fig6-exact.csv", exact, _cols(FIG6_KEYS, FIG6_METRICS))
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
    _plot_fig6(out / "fig6.png", rows, caps, exact)
    summary = {"figure": "fig6", "quick": quick, "seeds": seeds_, "interval": "95 % Student t over the seeds",
               "points": rows, "checks": checks, "all_checks_pass": all(checks.values()),
               **_mode_record(out, rows, exact, FIG6_KEYS, FIG6_METRICS)}
    report.write_json(out / "summary.json", summary)
    return summary


def _mode_record(out: Path, rows: list[dict], exact: list[dict] | None, keys: list[str], metrics: list[str]) -> dict:
    """The summary's record of how the points ran: exact, or fast with the
    overlaid exact points and their agreement."""
    if exact is None:
        return {"mode": "exact", "per_seed": str(out / "sweep" / "results.parquet")}
    return {"mode": "fast", "per_seed": str(out / "sweep-fast" / "results.parquet"),
            "exact_per_seed": str(out / "sweep" / "results.parquet"), "exact_points": exact,
            "agreement": _agreement(rows, exact, keys, metrics)}


def _plot_fig6(path: Path, rows: list[dict], caps: list[int], exact: list[dict] | None = None) -> None:
    from synapse_vmt import report

    plt = report.pyplot()
    fig, ax = plt.subplots(3, 2, figsize=(12, 11))
    width = 0.8 / len(BLOCKS)
    n_seeds = max((r["seeds"] for r in rows), default=1)
    for j, d in enumerate(DISTS):
        for k, b in enumerate(BLOCKS):
            s = sorted((r for r in rows if r["dist"] == d and r["block_size"] == b), key=lambda r: r["capacity"])
            if not s:
                continue
            xs = [caps.index(r["capacity"]) for r in s]
            ax[0, j].errorbar(xs, [r["hit_rate"] for r in s], yerr=errbar(s, "hit_rate"), fmt="o-", capsize=3,
                              label=f"block {b}")
            # Boxes: the seeds' mean quantiles; the bar on the mean (▲) is its interval.
            stats = [{"med": r["lat_p50_ns"], "q1": r["lat_p25_ns"], "q3": r["lat_p75_ns"], "whislo": r["lat_p05_ns"],
                      "whishi": r["lat_p95_ns"], "mean": r["mean_latency_ns"], "fliers": []} for r in s]
            pos = [x - 0.4 + width * (k + 0.5) for x in xs]
            bp = ax[1, j].bxp(stats, positions=pos, widths=width * 0.9, showmeans=True, patch_artist=True,
                              manage_ticks=False)
            ax[1, j].errorbar(pos, [r["mean_latency_ns"] for r in s], yerr=errbar(s, "mean_latency_ns"), fmt="none",
                              ecolor="crimson", capsize=3, lw=1.6, zorder=5)
            for patch in bp["boxes"]:
                patch.set_facecolor(f"C{k}")
                patch.set_alpha(0.6)
            ax[2, j].errorbar(xs, [r["hbm_gbps"] for r in s], yerr=errbar(s, "hbm_gbps"), fmt="o-", capsize=3,
                              label=f"block {b}")
            e = sorted((r for r in exact or [] if r["dist"] == d and r["block_size"] == b), key=lambda r: r["capacity"])
            if e:
                xe = [caps.index(r["capacity"]) for r in e]
                lab = "exact engine" if k == 0 else None
                ax[0, j].plot(xe, [r["hit_rate"] for r in e], "x", color=f"C{k}", ms=10, mew=2, label=lab)
                ax[1, j].plot([x - 0.4 + width * (k + 0.5) for x in xe], [r["mean_latency_ns"] for r in e], "x",
                              color="black", ms=9, mew=2, zorder=6, label=lab)
                ax[2, j].plot(xe, [r["hbm_gbps"] for r in e], "x", color=f"C{k}", ms=10, mew=2, label=lab)
        for i, (title, ylab) in enumerate([("Hit rate", "hit rate"), ("Per-key latency (5/25/50/75/95 %; mean ▲, its 95 % in red)", "ns"),
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
    fig.suptitle(f"mean over {n_seeds} seeds, bars: 95 % interval" + _fast_note(exact))
    fig.tight_layout()
    report.save_png(fig, path)


def _fast_note(exact: list[dict] | None) -> str:
    return "" if exact is None else "; lines: fast mode, × markers: the exact engine on those points"


#: Fig. 7 workload: a VMT of n PMUs of 256 entries, load raised by flows.
#: Eight ring points per PMU: with the paper's single point, the fifth PMU of
#: this seed owns 2 of the 1024 lookup-table entries, so 4 and 5 PMUs give
#: the same curve (Fig. 6 keeps the single point: that imbalance is what
#: makes small blocks lose at equal capacity).
FIG7_BASE = {
    "tables.0.rules.generate.count": 1000,
    "pmus.block_size": 256,
    "traffic.dist": "caida2019",
    "vmu.vnodes": 8,
}


def _fig7_grid(quick: bool) -> tuple[list[int], list[int], dict]:
    load = {"duration_ns": 1000000, "traffic.flow_duration_ns": 1000000}
    if quick:
        return [3, 5], [500, 2000, 4000, 12000], load
    return [3, 4, 5], [250, 500, 1000, 2000, 3000, 4000, 5000, 6000, 8000, 12000, 16000], load


def _fig7_rows(res: list[dict]) -> list[dict]:
    for r in res:
        r["pmus"], r["flows"] = r["pmus.count"], r["traffic.flows"]
    return over_seeds(res, ["pmus", "flows"], FIG7_METRICS)


def fig7(out: Path, quick: bool, quiet: bool = False, seeds: int | None = None, seed: int = 1,
         workers: int | None = None, ray: str | None = None, fast: bool = False, exact_every: int | None = None) -> dict:
    from synapse_vmt import report  # matplotlib: loaded only when a figure is made

    ns, flows, load_ovr = _fig7_grid(quick)
    seeds_ = seed_list(seed, seeds or (QUICK_SEEDS if quick else SEEDS))
    res, ex = _run([{"pmus.count": n, "traffic.flows": f} for n in ns for f in flows],
                   {**FIG7_BASE, **load_ovr}, seeds_, out, workers, ray, quiet, fast, exact_every)
    rows = _fig7_rows(res)
    exact = _fig7_rows(ex) if ex is not None else None
    _write_csv(out / "fig7.csv", rows, _cols(["pmus", "flows"], FIG7_METRICS))
    if exact is not None:
        _write_csv(out / "fig7-exact.csv", exact, _cols(["pmus", "flows"], FIG7_METRICS))
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
    _plot_fig7(out / "fig7.png", rows, ns, exact)
    summary = {"figure": "fig7", "quick": quick, "seeds": seeds_, "interval": "95 % Student t over the seeds",
               "points": rows, "peak_throughput_mpps": peaks, "checks": checks, "all_checks_pass": all(checks.values()),
               **_mode_record(out, rows, exact, ["pmus", "flows"], FIG7_METRICS)}
    report.write_json(out / "summary.json", summary)
    return summary


def _plot_fig7(path: Path, rows: list[dict], ns: list[int], exact: list[dict] | None = None) -> None:
    from synapse_vmt import report

    plt = report.pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
    n_seeds = max((r["seeds"] for r in rows), default=1)
    for n in ns:
        s = [r for r in rows if r["pmus"] == n]
        x = [r["offered_mpps"] for r in s]
        xerr = errbar(s, "offered_mpps")
        ax[0].errorbar(x, [r["throughput_mpps"] for r in s], yerr=errbar(s, "throughput_mpps"), xerr=xerr, fmt="o-",
                       capsize=3, label=f"{n} PMUs × 256")
        ax[1].errorbar(x, [r["hbm_gbps"] for r in s], yerr=errbar(s, "hbm_gbps"), xerr=xerr, fmt="o-", capsize=3,
                       label=f"{n} PMUs × 256")
        e = [r for r in exact or [] if r["pmus"] == n]
        if e:
            c = ax[0].lines[-1].get_color()
            xe = [r["offered_mpps"] for r in e]
            ax[0].plot(xe, [r["throughput_mpps"] for r in e], "x", color=c, ms=10, mew=2, label=f"{n} PMUs: exact engine")
            ax[1].plot(xe, [r["hbm_gbps"] for r in e], "x", color=c, ms=10, mew=2, label=f"{n} PMUs: exact engine")
    ax[0].set(title="(a) VMT throughput", xlabel="input rate (Mpps)", ylabel="throughput (Mpps)")
    ax[1].set(title="(b) External memory bandwidth", xlabel="input rate (Mpps)", ylabel="GB/s")
    for a in ax:
        a.grid(alpha=0.3)
        a.legend()
    fig.suptitle(f"mean over {n_seeds} seeds, bars: 95 % interval" + _fast_note(exact))
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


#: The figures whose fast − exact difference the command prints per overlaid point.
AGREE_SHOWN = ("hit_rate", "mean_latency_ns", "throughput_mpps", "hbm_gbps")


def _command(name: str, fn, doc: str) -> click.Command:
    @click.command(name, help=doc)
    @click.option("-o", "--output", type=click.Path(file_okay=False), default=f"results/{name}", show_default=True,
                  help="Output directory.")
    @click.option("--quick", is_flag=True, help="A smaller sweep (for tests).")
    @click.option("--seeds", type=click.IntRange(min=1), default=None,
                  help=f"Seeds per point (default {SEEDS}, {QUICK_SEEDS} with --quick): mean and 95 % interval.")
    @click.option("--seed", default=1, show_default=True, help="The first seed.")
    @click.option("-w", "--workers", type=click.IntRange(min=1), default=None, help="Local worker processes (default: every core).")
    @click.option("--ray", metavar="auto|ADDRESS|local", default=None, help="Run the points on Ray (see synapse sweep).")
    @click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
    @click.option("--fast", is_flag=True, help="Every point in the fast mode, the exact engine's overlaid (docs/fast-mode.md).")
    @click.option("--exact-every", type=click.IntRange(min=0), default=None, metavar="K",
                  help=f"With --fast: every K-th point also in the exact engine, drawn as markers (default {EXACT_EVERY}; 0: none).")
    def cmd(output: str, quick: bool, seeds: int | None, seed: int, workers: int | None, ray: str | None,
            quiet: bool, fast: bool, exact_every: int | None) -> None:
        from synapse_vmt.errors import UserError

        if exact_every is not None and not fast:
            raise UserError("--exact-every: goes with --fast")
        s = fn(Path(output), quick, quiet, seeds=seeds, seed=seed, workers=workers, ray=ray, fast=fast,
               exact_every=exact_every)
        if not quiet:
            for k, v in s["checks"].items():
                click.echo(f"{'ok  ' if v else 'FAIL'} {k}")
            for a in s.get("agreement", []):
                what = ", ".join(f"{k}={v}" for k, v in a.items() if not isinstance(v, dict))
                errs = ", ".join(f"{m} {v['error']:+.4f}" if m == "hit_rate" else f"{m} {100 * v['error']:+.1f} %"
                                 for m, v in a.items() if isinstance(v, dict) and m in AGREE_SHOWN)
                click.echo(f"fast vs exact at {what}: {errs}")
            per_seed = "sweep-fast/results.parquet, exact: sweep/results.parquet" if fast else "sweep/results.parquet"
            extra = f", {name}-exact.csv" if fast else ""
            click.echo(f"wrote {output}/{name}.csv{extra}, {name}.png, summary.json (seeds {s['seeds']}; per seed: {per_seed})")

    return cmd


COMMANDS = [
    _command("fig6", fig6, "Fig. 6: hit rate, latency and HBM bandwidth vs VMT capacity for block sizes 64-512."),
    _command("fig7", fig7, "Fig. 7: throughput and HBM bandwidth vs offered load for 3, 4, 5 PMUs of 256."),
]

"""``synapse reproduce FIGURE -o DIR``: regenerate the paper's figures.

The figures themselves live in :mod:`synapse_vmt.figures` (one module per
figure); this module holds their click commands. Every command takes
``-o DIR`` and ``--quick`` and writes CSV, PNG and ``summary.json``. Heavy
imports (solvers, simulator, matplotlib) happen inside the commands so that
``synapse --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import click


@click.group("reproduce")
def reproduce() -> None:
    """Reproduce the paper's figures (CSV, PNG and summary.json in DIR)."""


_out = click.option("-o", "--output", "out", required=True, type=click.Path(file_okay=False), help="output directory")
_quick = click.option("--quick", is_flag=True, help="a small version (for tests)")
_seed = click.option("--seed", default=1, show_default=True, help="random seed")


@click.command("fig9")
@_out
@_quick
@_seed
def fig9(out: str, quick: bool, seed: int) -> None:
    """Solve time of the allocation solvers against CFG size (paper Fig. 9)."""
    from synapse_vmt.figures import fig9 as f

    s = f.run(Path(out), quick, seed)
    for name, per in s["median_ms"].items():
        click.echo(f"{name:>5}: " + "  ".join(f"{t} tables {ms:.3g} ms" for t, ms in per.items()))
    click.echo("  UPF (10 tables): " + "  ".join(f"{k} {v:.3g} ms" for k, v in s["upf"]["median_ms"].items()))
    click.echo(f"wrote {out}/summary.json, fig9.csv, fig9.png")



@click.command("fig10")
@_out
@_quick
@_seed
@click.option("--seeds", type=click.IntRange(min=1), default=None,
              help="Traffic seeds from --seed on (default 5, 2 with --quick): mean and 95 % interval.")
@click.option("-w", "--workers", type=click.IntRange(min=1), default=None, help="Local worker processes (default: every core).")
@click.option("--ray", metavar="auto|ADDRESS|local", default=None, help="Run the points on Ray (see synapse sweep).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def fig10(out: str, quick: bool, seed: int, seeds: int | None, workers: int | None, ray: str | None, quiet: bool) -> None:
    """VMT throughput vs offered load for 3, 4, 5 PMUs from the simulator, with the fitted USL (paper Fig. 10)."""
    from synapse_vmt.figures import fig10 as f

    s = f.run(Path(out), quick, seed, seeds=seeds, workers=workers, ray=ray, quiet=quiet)
    fit = s["fit"]
    click.echo(f"USL fit: R² {fit['r2']:.3f}, RMSE {fit['rmse_mpps']:.3g} Mpps over {fit['samples']} windows, seeds {s['seeds']}")
    for n, d in s["per_pmus"].items():
        c = d["capacity_per_seed_mpps"]
        click.echo(f"  {n} PMUs: capacity {d['capacity_mpps']:.4g} Mpps at {d['peak_load_mpps']:.4g} Mpps offered, R² {d['r2']:.3f}; "
                   f"per seed {c['mean']:.4g} Mpps (95 % {c['lo']:.4g}..{c['hi']:.4g})")
    click.echo(f"wrote {out}/summary.json, fig10.csv, fig10.png")


@click.command("fig8")
@_out
@_quick
@_seed
@click.option("--period-ns", type=float, default=None, help="control period in simulated ns (default 1 ms; 0.5 ms with --quick)")
@click.option("--headroom", type=float, default=1.3, show_default=True, help="provision for this multiple of the measured input rate")
@click.option("--alarm-ns", type=float, default=100_000.0, show_default=True, help="overload check between control periods (0: off)")
def fig8(out: str, quick: bool, seed: int, period_ns: float | None, headroom: float, alarm_ns: float) -> None:
    """Closed-loop runtime OPT vs a static oracle under four traffic profiles (paper Fig. 8)."""
    from synapse_vmt.errors import UserError
    from synapse_vmt.figures import fig8 as f

    if period_ns is not None and period_ns <= 0:
        raise UserError(f"--period-ns: expected a positive time, got {period_ns}")
    if headroom < 1:
        raise UserError(f"--headroom: expected a factor >= 1, got {headroom}")
    if alarm_ns < 0:
        raise UserError(f"--alarm-ns: expected a time >= 0, got {alarm_ns}")
    s = f.run(Path(out), quick, seed, period_ns=period_ns, headroom=headroom, alarm_ns=alarm_ns)
    for name, d in s["profiles"].items():
        lat = d["mean_latency_ns"]
        click.echo(f"  {name:>8}: throughput {d['throughput_ratio_vs_static']:.3f} of static, PMUs {d['mean_pmus_ratio_vs_static']:.3f} "
                   f"of static ({d['static_pmus']} held), mean latency {lat['closed_loop']:.0f} / {lat['static']:.0f} ns")
    click.echo(f"wrote {out}/summary.json, fig8.csv, fig8.png")


@click.command("cpu-model")
@_out
@_quick
@click.option("-q", "--quiet", is_flag=True, help="no progress bar")
def cpu_model(out: str, quick: bool, quiet: bool) -> None:
    """Fit the seed's CPU model (p4-target-properties) on this machine: our
    exact, LPM and ternary tables over 10 to 10^7 entries, one core."""
    from synapse_vmt.figures import cpu_model as f

    s = f.run(Path(out), quick, quiet)
    for name, fit in s["fits"].items():
        err = fit.get("error")
        params = ", ".join(f"{k}={fit[k]:.4g}" for k in "pqrstuvab" if k in fit)
        click.echo(f"{name:>14}: {params}  (RMS rel. error {'-' if err is None else f'{err:.1%}'})")
    for name, sk in s["skipped"].items():
        if sk:
            click.echo(f"{name:>14}: skipped n={sk} (over the structure's memory budget)")
    click.echo(f"wrote {out}/summary.json, cpu_model.csv, cpu_model.png, params-fit.toml")


@click.command("upf")
@_out
@_quick
@_seed
@click.option("--slo-latency-ns", type=click.FloatRange(min=0, min_open=True), default=None,
              help="also run the closed loop with this per-table mean-latency target and report its PMU cost")
@click.option("--hit-rate-floor", type=click.FloatRange(0, 1), default=None,
              help="also run the closed loop with this per-table hit-rate floor and report its PMU cost")
@click.option("--headroom", type=click.FloatRange(min=1), default=1.3, show_default=True,
              help="provision for this multiple of the measured input rate")
@click.option("--pmus", type=click.IntRange(min=10), default=None, help="the PMU pool (default 16)")
@click.option("--elu-utilization", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="with --curves calibration: the closed loop adds PMUs only while the predicted ELU load is above this "
                   "fraction of its measured capacity")
@click.option("--elu-release", type=click.FloatRange(min=0), default=None,
              help="give PMUs back only while the predicted ELU load stays under this fraction of its capacity without "
                   "them (hysteresis; default: the --elu-utilization fraction; --curves calibration only)")
@click.option("--curves", "curve_source", type=click.Choice(["calibration", "mrc"]), default="calibration", show_default=True,
              help="the closed loop's miss curves: mrc (sampled online from each table's live key stream) or calibration "
                   "(short calibration runs at start, corrected online)")
@click.option("--mrc-sampling", default="size:4096", show_default=True,
              help="with --curves mrc: exact, rate:R or size:N (SHARDS, at most N keys tracked per table)")
@click.option("--join", type=click.Choice(["cold", "warm"]), default="cold", show_default=True,
              help="how a PMU joins a table (vmu.join): cold (its keys miss to the ELU) or warm (copied from their old owners)")
@click.option("--rule", type=click.Choice(["theta", "budget"]), default="theta", show_default=True,
              help="with --curves mrc: the count rule: theta (a PMU held where it saves --theta Mpps of ELU requests) or "
                   "budget (where it saves a share of the ELU's time, weighed by each table's bytes per miss)")
@click.option("--theta", "theta_mpps", type=click.FloatRange(min=0), default=None,
              help="Mpps of ELU requests a PMU must save (default: 0.25 with --curves mrc --rule theta, 0.5 with calibration)")
@click.option("--first-decision-us", type=click.FloatRange(min=0), default=None,
              help="with --curves mrc: a decision this far into the first control period, 0 for none "
                   "(default: 20 with --join warm, none with cold)")
def upf_cmd(out: str, quick: bool, seed: int, slo_latency_ns: float | None, hit_rate_floor: float | None, headroom: float,
            pmus: int | None, elu_utilization: float, elu_release: float, curve_source: str, mrc_sampling: str,
            join: str, rule: str, theta_mpps: float | None, first_decision_us: float | None) -> None:
    """UPF (ONF UP4) with populated tables under a shifting uplink/downlink
    mix: the closed loop moving PMUs between tables vs the static oracle and
    an even split of the same pool (paper §2, Fig. 1)."""
    from synapse_vmt.errors import UserError
    from synapse_vmt.figures import upf as f
    from synapse_vmt.mrc import Sampling

    try:
        sampling = Sampling.parse(mrc_sampling)
    except UserError as e:
        raise UserError(str(e).replace("--sampling", "--mrc-sampling", 1)) from None
    s = f.run(Path(out), quick, seed, slo_latency_ns=slo_latency_ns, hit_rate_floor=hit_rate_floor, headroom=headroom, pmus=pmus,
              elu_utilization=elu_utilization, elu_release=elu_release, curve_source=curve_source,
              mrc_sampling=sampling, join=join, rule=rule, theta_mpps=theta_mpps,
              first_decision_ns=None if first_decision_us is None else first_decision_us * 1e3)
    c, e = s["closed_loop"], s["even_split"]
    click.echo(f"  closed loop: throughput {c['throughput_ratio_vs_static']:.3f} of static, PMU-time "
               f"{c['pmu_time_ratio_vs_static']:.3f} of static, mean latency {c['mean_latency_ns']:.1f} ns")
    click.echo(f"  even split:  throughput {e['throughput_ratio_vs_static']:.3f} of static, mean latency {e['mean_latency_ns']:.1f} ns")
    o = s["static"]
    click.echo(f"  static oracle: {sum(o['pmus'].values())} PMUs, mean latency {o['mean_latency_ns']:.1f} ns"
               f"{'' if o['oracle']['carries_peak'] else ' (no split of the pool carries the peak)'}")
    if "closed_loop_slo" in s:
        t = s["closed_loop_slo"]
        click.echo(f"  with target: PMU-time {t['pmu_time_ratio_vs_closed_loop']:.3f} of the closed loop, mean latency "
                   f"{t['mean_latency_ns']:.1f} ns, hit rate {t['hit_rate']:.3f}")
    click.echo(f"wrote {out}/summary.json, upf.csv, upf.png")


@click.command("updates")
@_out
@_quick
@_seed
@click.option("-q", "--quiet", is_flag=True, help="no progress lines")
def updates_cmd(out: str, quick: bool, seed: int, quiet: bool) -> None:
    """Rule updates while traffic flows: churn of 1e2, 1e4 and 1e6 updates/s
    on an ACL table (decision tree in place or trie replica swap; exact or
    flush PMU invalidation): stale/wrong answers, update latency, updates/s,
    hit rate and throughput, beside t4p4s's figures."""
    from synapse_vmt.figures import updates as f

    s = f.run(Path(out), quick, seed, progress=None if quiet else lambda d: click.echo(f"  running {d}", err=True))
    for rate, r in s["churn"].items():
        click.echo(f"  churn {float(rate):>9.0e}/s: stale {r['stale_answers']}, wrong {r['wrong_action']}, "
                   f"latency p50 {r['update_latency_us_p50']:.2f} µs p99 {r['update_latency_us_p99']:.2f} µs, "
                   f"{r['updates_per_s']:.0f} updates/s, hit rate {r['hit_rate']:.3f}, {r['throughput_mpps']:.2f} Mpps")
    for m, v in s["sustained_updates_per_s"].items():
        click.echo(f"  sustained {m}: {v:.3g} updates/s")
    click.echo(f"wrote {out}/summary.json, updates.csv, updates.png")


@click.command("flood")
@_out
@_quick
@_seed
@click.option("-q", "--quiet", is_flag=True, help="no progress lines")
def flood_cmd(out: str, quick: bool, seed: int, quiet: bool) -> None:
    """Cache flooding (paper §8): attack share 0-50 % with and without the
    defences (doorkeeper admission, per-table miss-rate limit, the ELU's
    shed gate) on the ACL scenario, the UPF CFG and the UPF P4 program:
    legitimate throughput, p99 latency, hit rate, shed PHVs, wrong answers;
    and the closed-loop optimizer with and without its flood guard."""
    from synapse_vmt.figures import flood as f

    s = f.run(Path(out), quick, seed, progress=None if quiet else lambda d: click.echo(f"  running {d}", err=True))
    for r in s["runs"]:
        click.echo(f"  {r['scenario']:>3} {r['kind']:>7} {r['defence']:>20} {r['attack_share']:.2f}: "
                   f"throughput x{r['legit_throughput_ratio']:.3f}, p99 x{r['legit_p99_ratio']:.2f}, "
                   f"hit rate {r['legit_hit_rate']:.3f}, shed {r['legit_shed']}, wrong {r['wrong_action']}")
    for r in s["controller"]["runs"]:
        click.echo(f"  controller attack={r['attack']!s:>5} flood_guard={r['flood_guard']!s:>5}: throughput "
                   f"x{r['legit_throughput_ratio']:.3f}, p99 x{r['legit_p99_ratio']:.2f}, PMUs moved {r['pmus_moved']}, "
                   f"{s['controller']['attacked_table']} PMUs {r['target_pmus_before_attack']} -> "
                   f"max {r['target_pmus_max_after_attack']}, held {r['flooded_periods']} periods")
    for name, costs in s["no_attack_cost"].items():
        for d, c in costs.items():
            click.echo(f"  {name} no attack, {d}: hit rate loss {c['hit_rate_loss']:.4f}, p99 x{c['p99_ratio']:.2f}")
    click.echo(f"wrote {out}/summary.json, flood.csv, flood.png")


def _register() -> None:
    from synapse_vmt.figures.fig6_7 import COMMANDS

    for cmd in [*COMMANDS, fig8, fig9, fig10, cpu_model, upf_cmd, updates_cmd, flood_cmd]:
        reproduce.add_command(cmd)


_register()

"""``synapse mrc [SCENARIO] -o DIR``: miss-ratio curves of every table
(:mod:`synapse_vmt.mrc`): ``DIR/mrc.csv`` (``table, pmus, block_size,
hit_rate``), ``DIR/mrc.png`` and ``DIR/summary.json``; with ``--validate``
also the exact engine's hit rate at those PMU counts beside the curve's
(``DIR/validation.csv``)."""

from __future__ import annotations

from pathlib import Path

import click

from synapse_vmt.errors import UserError


@click.command("mrc")
@click.argument("scenario", required=False, type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(file_okay=False), default="results/mrc", show_default=True,
              help="Output directory.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a scenario field (repeatable).")
@click.option("--pmus", "pmus_text", default="1-16", show_default=True, metavar="LIST",
              help="PMU counts per table: numbers and ranges, e.g. 1-8,12,16.")
@click.option("--blocks", "blocks_text", default="16,32,64,128,256,512,1024,2048", show_default=True, metavar="LIST",
              help="Block sizes (CAM entries per PMU).")
@click.option("--sampling", "sampling_text", default="exact", show_default=True, metavar="exact|rate:R|size:N",
              help="Exact stack distances, or SHARDS at a fixed rate R or with at most N keys tracked per table.")
@click.option("--no-shadow", is_flag=True, help="Plain LRU: leave out the misses of a key while its fill is on its way.")
@click.option("--validate", "validate_text", default=None, metavar="LIST",
              help="Also run the exact engine with these PMU counts per table and compare (validation.csv).")
@click.option("--p4", "p4", type=click.Path(dir_okay=False), metavar="PROG.json",
              help="A P4 program (p4c BMv2 JSON, or builtin:up4), as synapse run --p4 takes it.")
@click.option("--entries", "entries_file", type=click.Path(dir_okay=False), help="Table entries for --p4.")
@click.option("--pcap", type=click.Path(dir_okay=False), help="Packets for --p4 (pcap or pcapng).")
@click.option("--traffic", "traffic_file", type=click.Path(dir_okay=False), help="Generated packets for --p4 (a TOML [traffic] table).")
@click.option("--rate-mpps", type=click.FloatRange(min=1e-6), default=50.0, show_default=True, help="Replay rate of --pcap.")
@click.option("--duration-ns", type=click.FloatRange(min=1.0), help="Time of --p4 traffic (default: the capture plus a drain).")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of --p4 runs.")
@click.option("-q", "--quiet", is_flag=True, help="No table on the terminal.")
def mrc(scenario: str | None, output: str, overrides: tuple[str, ...], pmus_text: str, blocks_text: str, sampling_text: str,
        no_shadow: bool, validate_text: str | None, p4: str | None, entries_file: str | None, pcap: str | None,
        traffic_file: str | None, rate_mpps: float, duration_ns: float | None, seed: int, quiet: bool) -> None:
    """Miss-ratio curves of SCENARIO's tables (the built-in scenario if
    omitted; a program scenario or --p4 for a P4 program): each table's hit
    rate at every PMU count and block size from one pass over its keys, with
    the VMU's sharding over PMUs and the misses of a key while its fill is on
    its way."""
    from synapse_vmt import mrc as m
    from synapse_vmt import report
    from synapse_vmt.cli.run import _is_program_scenario

    out = Path(output)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a directory")
    pmus = m.parse_ints(pmus_text, "--pmus")
    blocks = m.parse_ints(blocks_text, "--blocks")
    sampling = m.Sampling.parse(sampling_text)
    checks = m.parse_ints(validate_text, "--validate") if validate_text else []
    program = p4 is not None or (scenario is not None and _is_program_scenario(scenario))
    if program:
        from synapse_vmt.p4 import simrun

        if p4 is not None:
            if scenario:
                raise UserError("mrc: give either SCENARIO or --p4, not both")
            kw = {"program": simrun.resolve_program(p4), "entries_file": entries_file, "pcap": pcap,
                  "traffic": simrun.load_traffic(traffic_file) if traffic_file else None, "rate_mpps": rate_mpps,
                  "duration_ns": duration_ns, "seed": seed}
        else:
            kw = simrun.load_scenario(scenario)
        if overrides:
            raise UserError("mrc: --set applies to ClassBench scenarios; a program scenario sets [sim] keys")
        c = m.program_curves(kw, pmus, blocks, sampling, shadow=not no_shadow)
        exact = m.program_exact(kw, len(c.tables())) if checks else None
        what = p4 or scenario
    else:
        c = m.scenario_curves(scenario, overrides, pmus, blocks, sampling, shadow=not no_shadow)
        exact = m.scenario_exact(scenario, overrides) if checks else None
        what = scenario or "the built-in scenario"
    rows = m.validate(c, exact, checks) if checks else []
    m.write_csv(out / "mrc.csv", c)
    m.plot(out / "mrc.png", c, f"{what}: hit rate ({sampling})")
    if rows:
        report.write_rows(out / "validation.csv", rows)
    report.write_json(out / "summary.json", {
        "source": str(what), "sampling": str(sampling), "shadow": not no_shadow, "pmus": pmus, "blocks": blocks,
        "block_size": c.block_size, "tables": c.stats, "validation": rows,
        "max_abs_difference": max((abs(r["difference"]) for r in rows), default=None)})
    if quiet:
        return
    click.echo(f"wrote {out / 'mrc.csv'} ({len(c.rows['hit_rate'])} rows), {out / 'mrc.png'}, {out / 'summary.json'}")
    for name, st in c.stats.items():
        click.echo(f"  {name}: {st['refs']} references, {st['keys']} keys, sampled at {st['rate']:.4g}")
    if rows:
        click.echo(f"exact engine vs curve at block size {c.block_size}:")
        for r in rows:
            click.echo(f"  {r['table']:>24} {r['pmus']:>3} PMUs: exact {r['exact_hit_rate']:.4f}  curve "
                       f"{r['curve_hit_rate']:.4f}  diff {r['difference']:+.4f}")

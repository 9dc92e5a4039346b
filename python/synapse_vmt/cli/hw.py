"""``synapse hw ...``: the RTL of the PMU, the VMU and the ORB: co-simulation
against the model and yosys resource estimates."""

from __future__ import annotations

import json
import sys

import click

from synapse_vmt.errors import UserError


@click.group("hw")
def hw() -> None:
    """RTL of the PMU, VMU and ORB: co-simulation and synthesis estimates."""


@hw.command("cosim")
@click.option("--unit", type=click.Choice(["pmu", "vmu", "orb", "cluster", "admit", "all"]), default="all",
              show_default=True)
@click.option("--cycles", type=click.IntRange(1), default=2000, show_default=True,
              help="cycles per stimulus profile")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--pmus", type=click.IntRange(2, 64), multiple=True,
              help="PMUs of the cluster (repeatable; default 4 and 8)")
def cosim_cmd(unit: str, cycles: int, seed: int, pmus: tuple[int, ...]) -> None:
    """Drive the RTL (Icarus Verilog, via cocotb) and the Rust model with the
    same stimulus, every profile of UNIT, and compare every response and its
    cycle. The cluster (VMUs, interconnect, PMUs, bus) replays the boundary
    of a recorded `synapse run`; the doorkeeper (admit) a random stream of
    fills and shed-gate questions. Exit 1 on any difference."""
    from synapse_vmt.hw import cosim

    units = ["pmu", "vmu", "orb", "cluster", "admit"] if unit == "all" else [unit]
    bad = 0
    total = 0
    for u in units:
        for r in cosim.run(u, cycles=cycles, seed=seed, pmus=pmus or (4, 8)):
            total += r.compared
            state = "agree" if r.ok else f"DIFFER ({len(r.mismatches)} listed)"
            click.echo(f"{r.unit} {r.profile:<7} {r.cycles} cycles, {r.compared} responses compared: {state}")
            for m in r.mismatches:
                click.echo(f"    {m}")
            bad += not r.ok
    click.echo(f"{total} responses compared; " + ("all agree" if not bad else f"{bad} runs differ"))
    if bad:
        sys.exit(1)


def _points(units: tuple[str, ...], sizes: tuple[int, ...], keys: tuple[int, ...], flow: str = "xilinx"):
    from synapse_vmt.hw import synth

    if not units and not sizes and not keys:
        return synth.DEFAULT_POINTS if flow == "xilinx" else synth.ECP5_POINTS
    units = units or ("pmu",)
    pts = []
    for u in units:
        synth.design(u, 16, 104)  # an unknown unit: one clear line
        if u == "vmu":
            pts.append(("vmu", 1024, 0))
            continue
        if u == "admit":  # the doorkeeper of a PMU of --entries entries (its key hashed upstream)
            pts.extend(("admit", n, 0) for n in sizes or (256,))
            continue
        cluster = u.startswith("cluster")
        for k in keys or ((104,) if cluster else synth.KEY_WIDTHS):
            for n in sizes or ((16,) if cluster else synth.PMU_SIZES if u == "pmu" else (64,)):
                pts.append((u, n, k))
    return pts


@hw.command("synth")
@click.option("--unit", "units", multiple=True, metavar="pmu|vmu|orb|admit|clusterN",
              help="units to synthesize (repeatable; clusterN: N PMUs of --entries entries behind the "
                   "interconnect and two VMUs; default: the table of docs/how-to/rtl.md)")
@click.option("--entries", "sizes", multiple=True, type=click.IntRange(4), help="entries (repeatable)")
@click.option("--key-bits", "keys", multiple=True, type=click.IntRange(1), help="key width (repeatable)")
@click.option("--flow", type=click.Choice(["xilinx", "ecp5"]), default="xilinx", show_default=True,
              help="xilinx: yosys synth_xilinx (UltraScale+) estimate; ecp5: yosys + nextpnr "
                   "place and route on an ECP5-85 (pip install 'synapse-vmt[hw]')")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), default="results/hw_synth.csv",
              show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print the rows as JSON")
@click.option("--no-cache", is_flag=True, help="synthesize again even if cached")
@click.option("--paths", "show_paths", is_flag=True,
              help="after the table, each point's deepest paths (xilinx flow; one per family of "
                   "first and last named nets), from the synthesis that made the row")
@click.option("--ship", is_flag=True, hidden=True,
              help="add the rows to the results shipped with the package (maintainers)")
def synth_cmd(units, sizes, keys, flow: str, csv_path: str, as_json: bool, no_cache: bool,
              show_paths: bool, ship: bool) -> None:
    """Synthesize the RTL and print LUTs, flip-flops, BRAM/URAM, logic levels
    and (ECP5 flow) post-route Fmax per design point; write the CSV.
    Without options: for --flow xilinx the PMU at 64, 128, 256 and 512
    entries with 104- and 233-bit keys, the ORB and the VMU; for --flow ecp5
    the PMU sizes that fit an ECP5-85, the ORB and the VMU. Rows come from
    the cache (yours, then the results shipped with the package) when the
    RTL, parameters, flow and tool versions match; otherwise the tools run
    (minutes per point). The xilinx flow is a yosys estimate, not vendor
    place-and-route."""
    from synapse_vmt.hw import synth

    rows = []
    pts = _points(units, sizes, keys, flow)
    for u, n, k in pts:
        if not as_json:
            click.echo(f"synthesizing {u} entries={n} key_bits={k} ({flow}) ...", err=True)
        try:
            rows.append(synth.synth_one(u, n, k, use_cache=not no_cache, flow=flow))
        except RuntimeError as e:
            raise UserError(str(e)) from None
    if ship:
        click.echo(f"updated {synth.ship(pts, flow)}", err=True)
    synth.write_csv(rows, csv_path)
    if as_json:
        click.echo(json.dumps([synth.as_dict(r) for r in rows], indent=2))
    else:
        click.echo(synth.table(rows))
        for r in rows if show_paths else []:
            click.echo(f"\n{r.unit} entries={r.entries} key_bits={r.key_bits}: deepest paths (levels: nets)")
            click.echo("\n".join(f"  {p}" for p in r.paths) if r.paths else
                       "  not kept with this row (synthesized before paths were: --no-cache)")
        what = "yosys estimates, not vendor place-and-route" if flow == "xilinx" else \
            "nextpnr post-route, ECP5-85"
        click.echo(f"wrote {csv_path} ({what})")

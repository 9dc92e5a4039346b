"""``synapse cost PROG.json``: what a P4 program costs on a CPU (t4p4s), a
switch ASIC (Tofino) and Synapse, per table and in total (models in
:mod:`synapse_vmt.cost`)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import click

from synapse_vmt.cli.p4 import program_path

from synapse_vmt.errors import UserError, atomic_write

COLUMNS = ["name", "kind", "entries", "key_bits", "action_bits", "visits", "cpu_cycles_per_packet",
           "asic_sram_blocks", "asic_tcam_blocks", "synapse_pmus", "synapse_hit_rate", "hbm_bytes", "elu_structure"]


def _entries(path: str, program: str) -> dict[str, list]:
    """Each table's entries of an entries file (either format; validated against the program)."""
    from synapse_vmt.p4.entries import load_entries

    return {name: t.entries for name, t in load_entries(path, program).items()}


def _print(res: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{res['program']} at {res['rate_mpps']:g} Mpps", title_justify="left")
    for c, j in [("table", "left"), ("kind", "left"), ("entries", "right"), ("key b", "right"), ("visits", "right"),
                 ("CPU cyc/lookup", "right"), ("SRAM blk", "right"), ("TCAM blk", "right"), ("PMUs", "right"),
                 ("hit", "right"), ("HBM bytes", "right")]:
        t.add_column(c, justify=j)  # type: ignore[arg-type]
    for name, r in res["tables"].items():
        t.add_row(name, r["kind"], str(r["entries"]), str(r["key_bits"]), f"{r['visits']:.3g}",
                  f"{r['cpu_cycles_per_packet']:.0f}", str(r["asic_sram_blocks"]), str(r["asic_tcam_blocks"]),
                  "-" if r["synapse_pmus"] is None else str(r["synapse_pmus"]),
                  "-" if r["synapse_hit_rate"] is None else f"{r['synapse_hit_rate']:.3f}",
                  "-" if r["hbm_bytes"] is None else f"{r['hbm_bytes']:,}")
    tot = res["total"]
    con = Console(width=200)
    con.print(t)
    f = res["cpu_model_machine"]["fitted"]
    con.print(f"CPU: {tot['cpu_cycles_per_packet']:.0f} cycles/packet = {tot['cpu_mpps_per_core']:.3g} Mpps per core "
              f"(model fitted on {f['cpu']} at {f['clock_hz'] / 1e9:.3g} GHz)")
    con.print(f"ASIC: {tot['asic_sram_blocks']}/{tot['asic_sram_capacity']} SRAM and {tot['asic_tcam_blocks']}/"
              f"{tot['asic_tcam_capacity']} TCAM blocks, {tot['asic_logical_tables']}/{tot['asic_logical_table_capacity']} "
              f"tables ({tot['asic_ternary_tables']}/{tot['asic_ternary_table_capacity']} ternary): "
              f"{'fits' if res['fits_asic'] else 'does NOT fit'} (capacity check, not a placement)")
    pm = "-" if tot["synapse_pmus"] is None else tot["synapse_pmus"]
    con.print(f"Synapse: {pm} PMUs of {res['pmu_block_size']} entries for hit rate {res['target_hit_rate']:g}, "
              f"HBM {tot['hbm_bytes'] / 2**20:.1f} MiB")
    if res["unmet_pmu_target"]:
        for name, why in res["unmet_pmu_target"].items():
            con.print(f"  target not met: {name}: {why}")
    if res["hbm_not_built"]:
        con.print(f"  HBM structure not built: {', '.join(res['hbm_not_built'])}")


def plot(res: dict, path: Path, top: int = 40) -> None:
    from synapse_vmt.report import pyplot, save_png

    plt = pyplot()
    rows = sorted(res["tables"].items(), key=lambda kv: -kv[1]["cpu_cycles_per_packet"] * kv[1]["visits"])[:top]
    names = [n.split(".")[-1] for n, _ in rows][::-1]
    rows = [r for _, r in rows][::-1]
    h = max(3.0, 0.22 * len(rows) + 1.2)
    fig, ax = plt.subplots(1, 3, figsize=(15, h), sharey=True)
    y = range(len(rows))
    ax[0].barh(y, [r["cpu_cycles_per_packet"] * r["visits"] for r in rows], color="tab:blue")
    ax[0].set_xlabel("CPU cycles per packet (x visit ratio)")
    ax[0].set_xscale("log")
    ax[1].barh(y, [r["asic_sram_blocks"] for r in rows], color="tab:green", label="SRAM blocks")
    ax[1].barh(y, [r["asic_tcam_blocks"] for r in rows], left=[r["asic_sram_blocks"] for r in rows], color="tab:orange",
               label="TCAM blocks")
    ax[1].set_xlabel("Tofino blocks")
    ax[1].legend(loc="lower right", fontsize=7)
    ax[2].barh(y, [(r["hbm_bytes"] or 0) / 2**20 for r in rows], color="tab:purple", label="HBM MiB")
    ax[2].set_xlabel("Synapse: HBM MiB (PMUs in labels)")
    for i, r in enumerate(rows):
        if r["synapse_pmus"] is not None:
            ax[2].text(0, i, f" {r['synapse_pmus']} PMU", va="center", fontsize=6)
    ax[0].set_yticks(list(y), names, fontsize=6)
    tot = res["total"]
    more = f" (top {top} of {len(res['tables'])} by CPU cost)" if len(res["tables"]) > top else ""
    fig.suptitle(f"{Path(res['program']).name}{more}: CPU {tot['cpu_mpps_per_core']:.3g} Mpps/core, ASIC "
                 f"{'fits' if res['fits_asic'] else 'does not fit'}, Synapse {tot['synapse_pmus']} PMUs", fontsize=9)
    save_png(fig, path)


@click.command("cost")
@click.argument("program", type=click.Path(dir_okay=False), callback=program_path)
@click.option("--entries", "entries_file", type=click.Path(dir_okay=False),
              help="table entries (simple_switch_CLI or P4 runtime JSON); default: max_size entries per table drawn as `synapse p4 entries gen` does")
@click.option("--rate-mpps", type=float, default=100.0, show_default=True, help="packet rate into the program")
@click.option("--hit-rate", type=click.FloatRange(0.0, 1.0), default=None, help="PMU target hit rate (default from params)")
@click.option("--slo-latency-ns", type=click.FloatRange(min=0.0), default=None, help="PMU target mean match latency")
@click.option("--block-size", type=click.IntRange(min=1), default=256, show_default=True, help="PMU CAM entries")
@click.option("--no-pmus", is_flag=True, help="skip the PMU search (no simulation)")
@click.option("--params", "params_file", type=click.Path(dir_okay=False), help="model constants (default: built in)")
@click.option("--json", "as_json", is_flag=True, help="print the costs as JSON")
@click.option("-o", "--output", type=click.Path(file_okay=False), help="write cost.json, cost.csv and cost.png here")
def cost(program, entries_file, rate_mpps, hit_rate, slo_latency_ns, block_size, no_pmus, params_file, as_json, output):
    """What PROGRAM (p4c BMv2 JSON) costs per table and in total: CPU cycles
    per packet (t4p4s model fitted on this machine), Tofino SRAM/TCAM blocks
    and whether it fits, Synapse PMUs and HBM bytes."""
    from synapse_vmt.cost.params import load_params
    from synapse_vmt.cost.program import program_cost

    if rate_mpps <= 0:
        raise UserError(f"--rate-mpps: expected a positive rate, got {rate_mpps}")
    p = load_params(params_file)
    counts = _entries(entries_file, program) if entries_file else None
    res = program_cost(program, p, rate_mpps, counts, hit_rate, slo_latency_ns, block_size, pmus=not no_pmus)
    diff = res["cpu_model_machine"]["differences"]
    if diff:
        f = res["cpu_model_machine"]["fitted"]
        click.echo(f"warning: the CPU model was fitted on another machine ({f['cpu']}, {f['simd']}): its cycles are that "
                   f"machine's; refit here with `synapse reproduce cpu-model -o DIR` and pass DIR/params-fit.toml as "
                   f"--params ({'; '.join(diff)})", err=True)
    if output:
        from synapse_vmt.report import write_json

        out = Path(output)
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / "cost.json", res)
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(COLUMNS)
        for r in res["tables"].values():
            w.writerow([r[c] for c in COLUMNS])
        with atomic_write(out / "cost.csv") as f:
            f.write(buf.getvalue())
        plot(res, out / "cost.png")
    if as_json:
        click.echo(json.dumps(res, indent=2))
    else:
        _print(res)
        if output:
            click.echo(f"wrote {output}/cost.json, cost.csv, cost.png")

"""The runtime optimizer's figure commands: ``synapse reproduce fig8|fig9|fig10``.

Heavy imports (solvers, simulator, matplotlib) happen inside the commands.
"""

from __future__ import annotations

from pathlib import Path

import click

_out = click.option("-o", "--output", "out", required=True, type=click.Path(file_okay=False), help="output directory")
_quick = click.option("--quick", is_flag=True, help="a small version (for tests)")
_seed = click.option("--seed", default=1, show_default=True, help="random seed")


@click.command("fig9")
@_out
@_quick
@_seed
def fig9(out: str, quick: bool, seed: int) -> None:
    """Solve time of the allocation solvers against CFG size (paper Fig. 9)."""
    from synapse_vmt.opt import fig9 as f

    s = f.run(Path(out), quick, seed)
    for name, per in s["median_ms"].items():
        click.echo(f"{name:>5}: " + "  ".join(f"{t} tables {ms:.3g} ms" for t, ms in per.items()))
    click.echo("  UPF (10 tables): " + "  ".join(f"{k} {v:.3g} ms" for k, v in s["upf"]["median_ms"].items()))
    click.echo(f"wrote {out}/summary.json, fig9.csv, fig9.png")


COMMANDS = [fig9]

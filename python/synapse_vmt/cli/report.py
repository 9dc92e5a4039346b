"""``synapse report DIR [DIR2]``: the HTML report of a run, rebuilt from its files."""

from __future__ import annotations

import click


@click.command("report")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.argument("other", required=False, type=click.Path(file_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="the HTML file (default: DIR/report.html; with DIR2: DIR2/compare.html)")
def report(run_dir: str, other: str | None, output: str | None) -> None:
    """Write the report of the run in RUN_DIR (any `synapse run`, `run --p4`,
    `reproduce upf` or `sweep` output directory) from its files. With OTHER,
    the two runs side by side with their differences (OTHER against RUN_DIR)."""
    from pathlib import Path

    from synapse_vmt.view import write_report

    dirs = [run_dir] + ([other] if other else [])
    path = output or (Path(other) / "compare.html" if other else None)
    click.echo(f"wrote {write_report(dirs, path)}")

"""``synapse p4 ...``: commands on P4 programs."""

from __future__ import annotations

import click

from synapse_vmt.p4.bmv2 import read_bmv2
from synapse_vmt.p4.cfg import Cfg


@click.group("p4")
def p4() -> None:
    """P4 programs (p4c's BMv2 JSON output)."""


def format_cfg(cfg: Cfg) -> str:
    lines = [f"{len(cfg.tables)} tables, {len(cfg.edges)} edges" + (f" ({cfg.program})" if cfg.program else "")]
    w = max(len(t.name) for t in cfg.tables)
    for t in cfg.tables:
        keys = ", ".join(f"{k.field}:{k.width} {k.match}" for k in t.key)
        lines.append(f"  table {t.name:<{w}}  size {t.max_size:>6}  key {t.key_bits:>4} b  [{keys}]")
    for name, share in cfg.entry.items():
        lines.append(f"  entry -> {name}  p={share:.4g}")
    for e in cfg.edges:
        lines.append(f"  edge  {e.src} -> {e.dst}  p={e.p:.4g}")
    return "\n".join(lines)


@p4.command("cfg")
@click.argument("program", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="write the CFG file here")
def cfg_cmd(program: str, output: str | None) -> None:
    """Print the tables and control-flow graph of PROGRAM (p4c BMv2 JSON);
    keyless compiler tables and conditionals are folded into edges."""
    cfg = read_bmv2(program)
    click.echo(format_cfg(cfg))
    if output:
        cfg.save(output)
        click.echo(f"wrote {output}")

"""``synapse opt ...``: the runtime optimizer from the command line."""

from __future__ import annotations

import json
import time

import click

from synapse_vmt.errors import UserError

# Solvers (scipy, highspy) are imported inside commands: `synapse --help` stays fast.


@click.group("opt")
def opt() -> None:
    """The runtime optimizer (allocation of PMUs to tables)."""


def format_allocation(a, ms: float) -> str:
    w = max(len(n) for n in a.names)
    lines = [f"solver {a.solver}: throughput {a.throughput_mpps:.4g} Mpps with {a.used} PMUs ({ms:.3f} ms)"]
    for name, n, f, c in zip(a.names, a.pmus, a.flows_mpps, a.capacity_mpps):
        mark = "  <- bottleneck" if name in a.bottlenecks else ""
        lines.append(f"  {name:<{w}}  pmus {n:>3}  flow {f:>10.4g} Mpps  capacity {c:>10.4g} Mpps{mark}")
    return "\n".join(lines)


@opt.command("solve")
@click.argument("problem", type=click.Path(dir_okay=False))
@click.option("--solver", type=click.Choice(["fast", "milp", "both"]), default="fast", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print the allocation as JSON")
def solve_cmd(problem: str, solver: str, as_json: bool) -> None:
    """Allocate PMUs to the tables of PROBLEM (a problem file: docs/reference/file-formats.md)
    to maximise the flow through the CFG; print the allocation and the
    predicted throughput."""
    from synapse_vmt.opt import fast, milp
    from synapse_vmt.opt.problem import Infeasible, load_problem

    solvers = {"fast": fast.solve, "milp": milp.solve}
    p = load_problem(problem)
    out = []
    for name in ["fast", "milp"] if solver == "both" else [solver]:
        t0 = time.perf_counter()
        try:
            a = solvers[name](p)
        except Infeasible as e:
            raise UserError(f"{problem}: {e}") from None
        ms = (time.perf_counter() - t0) * 1e3
        out.append((a, ms))
    if as_json:
        click.echo(json.dumps({a.solver: {**a.to_json(), "solve_ms": ms} for a, ms in out}, indent=2))
    else:
        click.echo("\n".join(format_allocation(a, ms) for a, ms in out))

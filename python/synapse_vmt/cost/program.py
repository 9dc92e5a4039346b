"""A P4 program's cost on three targets, per table and in total.

For each keyed table of a BMv2 program: its entries (from an entries file,
else ``max_size`` entries drawn as ``synapse p4 entries gen`` draws them), key and action-data widths, match
class (:func:`synapse_vmt.cost.cpu.kind_of`) and visit ratio (the share of
packets that reach it, from the program's CFG: every branch equally likely,
as ``synapse p4 cfg`` assumes). Then

- **CPU** (:mod:`.cpu`): cycles per lookup; the program's cycles per packet
  are ``base + sum(visits x cycles)``, packets/s per core ``clock / cycles``;
- **ASIC** (:mod:`.asic`): SRAM and TCAM blocks and whether the program fits;
- **Synapse** (:mod:`.vmt`): PMUs for the target hit rate at the table's rate
  (``rate x visits``) and HBM bytes of the ELU's structure built over those
  entries.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

from synapse_vmt.cost import asic, cpu, machine, vmt
from synapse_vmt.cost.params import Params
from synapse_vmt.errors import UserError
from synapse_vmt.opt.problem import visit_ratios
from synapse_vmt.p4.bmv2 import read_program
from synapse_vmt.p4.entrygen import gen_table


@dataclass
class TableCost:
    name: str
    kind: str
    entries: int
    key_bits: int
    action_bits: int
    visits: float
    cpu_cycles_per_packet: float
    asic_sram_blocks: int
    asic_tcam_blocks: int
    synapse_pmus: int | None
    synapse_hit_rate: float | None
    hbm_bytes: int | None
    elu_structure: str

    def to_json(self) -> dict:
        return asdict(self)


def cpu_model_machine(p: Params, here: dict | None = None) -> dict:
    """The machine the CPU model was fitted on, this one, and how they differ."""
    fitted = p.cpu.machine.fingerprint()
    here = here or machine.fingerprint(_clock())
    return {"fitted": fitted, "here": here, "differences": machine.differences(fitted, here)}


def _clock() -> float | None:
    try:
        return machine.measure_clock(min_s=0.02, rounds=3)
    except ValueError:  # no timed loop for this architecture: /proc/cpuinfo's figure
        return None


def program_cost(path: str | Path, p: Params, rate_mpps: float, entries: dict[str, list] | None = None,
                 hit_rate: float | None = None, latency_ns: float | None = None, block_size: int = 256,
                 pmus: bool = True, on_table=None, seed: int = 1) -> dict:
    """Costs of every keyed table of the BMv2 program at ``path`` and the totals."""
    prog = read_program(path)
    cfg = prog.cfg
    if not cfg.tables:
        raise UserError(f"{path}: the program has no keyed tables")
    # Action data an entry stores: the table's widest action.
    abits = {name: max((sum(p.width for p in a.params) for a in t.actions), default=0) for name, t in prog.tables.items()}
    e, P = cfg.routing()
    visits = visit_ratios(e, P)
    target = p.synapse.target_hit_rate.value if hit_rate is None else hit_rate
    rows = []
    costs: list[asic.AsicCost] = []
    unmet: dict[str, str] = {}
    for t, v in zip(cfg.tables, visits):
        spec = prog.tables[t.name]
        # The user's entries, else entries drawn as `synapse p4 entries gen` draws them, up to max_size.
        ents = entries.get(t.name, []) if entries is not None else gen_table(spec, t.max_size, seed)
        n = len(ents)
        kind = cpu.kind_of([k.match for k in t.key])
        key_bytes = math.ceil(t.key_bits / 8)
        a = asic.table_cost(kind, n, t.key_bits, abits.get(t.name, 0), p)
        costs.append(a)
        pt, top = vmt.pmus_needed(rate_mpps * float(v), target, latency_ns, block_size, int(p.synapse.max_pmus.value)) \
            if pmus else (None, None)
        if pmus and pt is None and top is not None:
            unmet[t.name] = (f"at {top.pmus} PMUs: hit rate {top.hit_rate:.3f}, mean latency {top.mean_latency_ns:.0f} ns, "
                             f"{top.carried:.0%} of {rate_mpps * float(v):.3g} Mpps carried (the ELU bounds a VMT's miss rate)")
        hbm, algo = vmt.hbm_bytes(spec, ents)
        rows.append(TableCost(
            name=t.name, kind=kind, entries=n, key_bits=t.key_bits, action_bits=abits.get(t.name, 0), visits=float(v),
            cpu_cycles_per_packet=cpu.table_cycles(kind, n, key_bytes, p) if n > 0 else 0.0,
            asic_sram_blocks=a.sram_blocks, asic_tcam_blocks=a.tcam_blocks,
            synapse_pmus=None if pt is None else pt.pmus, synapse_hit_rate=None if pt is None else pt.hit_rate,
            hbm_bytes=hbm, elu_structure=algo))
        if on_table:
            on_table(rows[-1])
    sram_cap, tcam_cap = asic.capacity(p)
    logical_cap, ternary_cap = asic.table_capacity(p)
    logical, ternary = asic.stage_tables(costs, p)
    cycles = p.cpu.base_cycles.value + sum(r.visits * r.cpu_cycles_per_packet for r in rows)
    sram = sum(r.asic_sram_blocks for r in rows)
    tcam = sum(r.asic_tcam_blocks for r in rows)
    unbuilt = [r.name for r in rows if r.hbm_bytes is None]
    total = {
        "cpu_cycles_per_packet": cycles,
        "cpu_mpps_per_core": p.cpu.clock_hz.value / cycles / 1e6,
        "asic_sram_blocks": sram,
        "asic_tcam_blocks": tcam,
        "asic_sram_capacity": sram_cap,
        "asic_tcam_capacity": tcam_cap,
        "asic_logical_tables": logical,
        "asic_logical_table_capacity": logical_cap,
        "asic_ternary_tables": ternary,
        "asic_ternary_table_capacity": ternary_cap,
        "synapse_pmus": sum(r.synapse_pmus or 0 for r in rows) if pmus else None,
        "hbm_bytes": sum(r.hbm_bytes or 0 for r in rows),
    }
    return {
        "program": str(path),
        "rate_mpps": rate_mpps,
        "target_hit_rate": target,
        "target_latency_ns": latency_ns,
        "pmu_block_size": block_size,
        "tables": {r.name: r.to_json() for r in rows},
        "total": total,
        "fits_asic": sram <= sram_cap and tcam <= tcam_cap and logical <= logical_cap and ternary <= ternary_cap,
        "cpu_model_machine": cpu_model_machine(p),
        "unmet_pmu_target": unmet,
        "hbm_not_built": unbuilt,
    }

"""cocotb testbench: applies a recorded stimulus to an RTL unit, cycle by cycle,
and records its outputs (imported by the simulator, not by users).

The stimulus and the output file are JSON, named by the environment
variables ``SYNAPSE_COSIM_IN`` / ``SYNAPSE_COSIM_OUT``: ``{"inputs": {port:
[value per cycle]}, "outputs": [port, ...], "late": [port, ...], "reset": {port:
value held during reset}, "packed": bool}``. Inputs
are set right after a rising edge; outputs are sampled once the cycle's
combinational logic settles (ReadOnly), so a row is what the unit shows in
that cycle before the next edge. Ports in ``late`` are registered state
sampled one cycle later (their value at the end of the cycle).
"""

from __future__ import annotations

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge


def _int(v) -> int:
    try:
        return int(v)
    except ValueError:  # X/Z: never a valid value of a port we compare
        return -(1 << 62)


def _bits(v) -> int:
    """A port packing several units' fields (the cluster's): X/Z bits read
    as 0, so that one unit's undriven field does not hide the others'."""
    s = str(v).lower().replace("x", "0").replace("z", "0")
    return int(s, 2) if s else 0


@cocotb.test()
async def replay(dut):
    with open(os.environ["SYNAPSE_COSIM_IN"]) as f:
        spec = json.load(f)
    inputs: dict[str, list[int]] = spec["inputs"]
    names_out: list[str] = spec["outputs"]
    late: list[str] = spec.get("late", [])
    read = _bits if spec.get("packed") else _int
    n = len(next(iter(inputs.values())))
    ports_in = {k: getattr(dut, k) for k in inputs}
    ports_out = {k: getattr(dut, k) for k in names_out + late}
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    # Held during reset: what the stage before presents ahead of cycle 0
    # (the VMU reads its table a cycle ahead).
    for k, p in ports_in.items():
        p.value = spec.get("reset", {}).get(k, 0)
    dut.rst.value = 1
    for _ in range(2):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    out: dict[str, list[int]] = {k: [] for k in names_out + late}
    for c in range(n + 1):
        for k, p in ports_in.items():
            p.value = inputs[k][c] if c < n else 0
        await ReadOnly()
        if c < n:
            for k in names_out:
                out[k].append(read(ports_out[k].value))
        if c > 0:
            for k in late:
                out[k].append(read(ports_out[k].value))
        await RisingEdge(dut.clk)
    with open(os.environ["SYNAPSE_COSIM_OUT"], "w") as f:
        json.dump(out, f)

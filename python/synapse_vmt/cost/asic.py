"""Switch-ASIC resources of a table (Intel Tofino), after the seed's model
``R(n, k, a) = n (R_width(k) + a)`` with ``R_width(k) = p k + q``.

- **Exact** tables live in SRAM (hash ways): an entry is its key plus
  ``exact_entry_overhead_bits``, packed into ``sram_word_bits``-bit words
  (at most ``max_entries_per_word`` to a word; wider entries take several
  words), the hash loaded to ``exact_hash_ways_fill``, and at least one
  block per hash way (``exact_hash_ways``) however few the entries.
- **Ternary, range, optional** (and **lpm**, when ``lpm_in_tcam``) tables live
  in TCAM: the key is rounded up to ``tcam_word_bits``-bit slices, each slice
  a column of ``tcam_block_entries``-entry blocks; their action pointers and
  overhead sit in SRAM.
- **Action data** of every entry (the widest action of the table) is packed
  into SRAM words, as many entries per word as fit.

A program fits when its blocks fit ``stages`` times the per-stage blocks and
its tables fit the per-stage table limits: a stage holds at most
``logical_tables_per_stage`` tables, of them at most
``ternary_tables_per_stage`` in TCAM, and a table larger than a stage's
blocks takes a table in each stage it spans (:func:`stage_tables`). This is a
capacity check, not a placement: dependencies between tables and crossbar
limits can make a program that fits by capacity fail to compile; the report
says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from synapse_vmt.cost.params import Params


@dataclass(frozen=True)
class AsicCost:
    sram_blocks: int
    tcam_blocks: int
    memory: str  # "sram" or "tcam"


def _sram_blocks_for(entries: int, bits_per_entry: int, a) -> int:
    """SRAM blocks to hold ``entries`` records of ``bits_per_entry`` bits."""
    if entries <= 0 or bits_per_entry <= 0:
        return 0
    word = int(a.sram_word_bits.value)
    if bits_per_entry <= word:
        per_word = min(word // bits_per_entry, int(a.max_entries_per_word.value))
        words = math.ceil(entries / per_word)
    else:
        words = entries * math.ceil(bits_per_entry / word)
    return math.ceil(words / int(a.sram_block_words.value))


def table_cost(kind: str, entries: int, key_bits: int, action_bits: int, p: Params) -> AsicCost:
    """Blocks one table needs; ``kind`` as :func:`synapse_vmt.cost.cpu.kind_of`."""
    a = p.asic
    tcam = kind == "ternary" or (kind == "lpm" and a.lpm_in_tcam.value >= 1)
    data = _sram_blocks_for(entries, action_bits, a)
    if not tcam:
        bits = key_bits + int(a.exact_entry_overhead_bits.value)
        slots = math.ceil(entries / a.exact_hash_ways_fill.value)
        match = max(_sram_blocks_for(slots, bits, a), int(a.exact_hash_ways.value)) if entries > 0 else 0
        return AsicCost(match + data, 0, "sram")
    slices = max(1, math.ceil(key_bits / a.tcam_word_bits.value))
    rows = math.ceil(entries / a.tcam_block_entries.value)
    # The TCAM's match address selects an overhead word in SRAM (action pointer).
    overhead = _sram_blocks_for(entries, int(a.exact_entry_overhead_bits.value), a)
    return AsicCost(data + overhead, slices * rows, "tcam")


def stages_spanned(c: AsicCost, p: Params) -> int:
    """Stages a table's blocks spread over (each holds a part of it as a table of its own)."""
    a = p.asic
    return max(1, math.ceil(c.sram_blocks / a.sram_blocks_per_stage.value), math.ceil(c.tcam_blocks / a.tcam_blocks_per_stage.value))


def stage_tables(costs: list[AsicCost], p: Params) -> tuple[int, int]:
    """(logical tables, ternary tables) the program places, counting a table once per stage it spans."""
    spans = [stages_spanned(c, p) for c in costs]
    return sum(spans), sum(s for s, c in zip(spans, costs) if c.memory == "tcam")


def table_capacity(p: Params) -> tuple[int, int]:
    """(logical tables, ternary tables) the whole pipe holds."""
    a = p.asic
    return int(a.stages.value * a.logical_tables_per_stage.value), int(a.stages.value * a.ternary_tables_per_stage.value)


def capacity(p: Params) -> tuple[int, int]:
    """(SRAM blocks, TCAM blocks) of the whole chip pipe."""
    a = p.asic
    return int(a.stages.value * a.sram_blocks_per_stage.value), int(a.stages.value * a.tcam_blocks_per_stage.value)

"""The cost models' constants (``params.toml`` beside this file), validated.

Every constant is ``{value = ..., source = "..."}``: where it comes from (the
seed paper's figures, public Tofino numbers, this machine) or how it was
fitted. An unknown key, a missing one, or a value without a source is a
:class:`~synapse_vmt.errors.UserError` naming the file and the key.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from synapse_vmt.errors import UserError

DEFAULT = Path(__file__).with_name("params.toml")


class Param(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    value: float
    source: str = Field(min_length=3)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def values(self) -> dict[str, float]:
        return {k: getattr(self, k).value for k in type(self).model_fields}


class ExactFit(_Section):
    p: Param
    q: Param
    r: Param
    s: Param
    t: Param
    u: Param


class LogFit(_Section):
    p: Param
    q: Param
    r: Param


class LinearFit(_Section):
    a: Param
    b: Param


class CpuFit(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    exact: ExactFit
    lpm: LogFit
    ternary: LinearFit


class Machine(BaseModel):
    """The machine base_cycles, clock_hz, l3_bytes and the fits were measured on."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    cpu: str
    simd: str
    l2_bytes: int | None
    l3_bytes: int | None
    clock_hz: float
    source: str = Field(min_length=3)

    def fingerprint(self) -> dict:
        return self.model_dump(exclude={"source"})


class Cpu(_Section):
    base_cycles: Param
    action_bytes: Param
    entry_overhead_bytes: Param
    table_overhead_bytes: Param
    l3_bytes: Param
    clock_hz: Param
    machine: Machine
    fit: CpuFit

    def values(self) -> dict[str, float]:  # the fits are read through .fit, the machine through .machine
        return {k: getattr(self, k).value for k in type(self).model_fields if k not in ("fit", "machine")}


class Asic(_Section):
    stages: Param
    sram_blocks_per_stage: Param
    tcam_blocks_per_stage: Param
    logical_tables_per_stage: Param
    ternary_tables_per_stage: Param
    exact_hash_ways: Param
    max_entries_per_word: Param
    sram_block_words: Param
    sram_word_bits: Param
    tcam_block_entries: Param
    tcam_word_bits: Param
    exact_entry_overhead_bits: Param
    exact_hash_ways_fill: Param
    lpm_in_tcam: Param


class Synapse(_Section):
    target_hit_rate: Param
    max_pmus: Param


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    cpu: Cpu
    asic: Asic
    synapse: Synapse


def _where(loc: tuple) -> str:
    return ".".join(str(x) for x in loc if x not in ("value", "source")) or "top level"


def load_params(path: str | Path | None = None) -> Params:
    """Reads and validates a parameter file (the built-in one by default)."""
    p = Path(path) if path else DEFAULT
    try:
        doc = tomllib.loads(p.read_text())
    except OSError as e:
        raise UserError(f"{p}: cannot read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{p}: {e}") from None
    try:
        return Params.model_validate(doc)
    except ValidationError as e:
        err = e.errors()[0]
        raise UserError(f"{p}: {_where(err['loc'])}: {err['msg']} (each constant is {{value = ..., source = \"...\"}})") from None


@lru_cache(maxsize=1)
def default_params() -> Params:
    return load_params(None)

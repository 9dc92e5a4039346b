"""Key layouts: how a P4 table's key becomes the 32-bit words Synapse matches.

A field ``w`` bits wide takes ``ceil(w / 32)`` words, most significant word
first (its first word holds the ``w % 32`` top bits when ``w`` is not a
multiple of 32); a key is its fields' words in the table's key order. Keys
are at most :data:`MAX_WORDS` words (1024 bits): a wider table is an error
naming it.

Every P4 match kind reduces, word by word, to the one test the Rust side
evaluates, ``lo <= key & mask <= hi``:

- ``exact`` v: ``lo = hi = v``, full mask;
- ``ternary`` v &&& m: ``lo = hi = v & m``, mask ``m``, each split per word;
- ``lpm`` v/len: a ternary whose mask is the top ``len`` bits (so a word
  before the prefix's end is exact, the word where it ends a prefix and the
  words after it wildcards);
- ``range`` lo..hi: ``lo``, ``hi`` with a full mask, on fields of at most
  32 bits (one word); a wider range is an error unless it is a single value
  or the whole field;
- ``optional``: exact, or a wildcard when no value is given.

A field an entry does not name is a wildcard. :meth:`KeyLayout.rule_set`
builds a :class:`synapse_vmt._core.RuleSet` of any width through
``RuleSet.from_arrays``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from synapse_vmt.errors import UserError
from synapse_vmt.p4.cfg import TableInfo

MAX_WORDS = 32
"""Most 32-bit words a key can have (the Rust side's widest key)."""

KINDS = ("exact", "lpm", "ternary", "range", "optional")
WORD = 0xFFFF_FFFF


def word_count(width: int) -> int:
    """Words of a field ``width`` bits wide."""
    return (width + 31) // 32


@dataclass(frozen=True)
class FieldSlot:
    """Where one key field sits: its first word and how many it takes."""

    name: str
    width: int
    match: str
    offset: int
    words: int

    def split(self, value: int) -> list[int]:
        """``value`` as this field's words, most significant first."""
        return [(value >> (32 * (self.words - 1 - i))) & WORD for i in range(self.words)]

    def word_bits(self) -> list[int]:
        """Bits of each word (the first one is narrower for an odd width)."""
        top = self.width - 32 * (self.words - 1)
        return [top] + [32] * (self.words - 1)


@dataclass(frozen=True)
class KeyLayout:
    """The word layout of one table's key (see the module documentation)."""

    table: str
    fields: tuple[FieldSlot, ...]

    @classmethod
    def from_table(cls, table: TableInfo) -> KeyLayout:
        """The layout of ``table``'s key; a key wider than :data:`MAX_WORDS`
        words is a :class:`UserError` naming the table."""
        slots, off = [], 0
        for k in table.key:
            n = word_count(k.width)
            slots.append(FieldSlot(k.field, k.width, k.match, off, n))
            off += n
        if off > MAX_WORDS:
            raise UserError(
                f"table {table.name}: key of {table.key_bits} bits in {len(table.key)} fields needs {off} "
                f"32-bit words, more than the supported {MAX_WORDS} ({32 * MAX_WORDS} bits)"
            )
        return cls(table.name, tuple(slots))

    @property
    def n_words(self) -> int:
        return sum(f.words for f in self.fields)

    def field(self, name: str) -> FieldSlot:
        for f in self.fields:
            if f.name == name:
                return f
        raise UserError(f"table {self.table}: no key field {name!r} (fields: {', '.join(f.name for f in self.fields)})")

    def word_bits(self) -> list[int]:
        """Bits of every key word."""
        return [b for f in self.fields for b in f.word_bits()]

    def word_kinds(self) -> list[str]:
        """The match kind of every key word (its field's)."""
        return [("ternary" if f.match not in KINDS else f.match) for f in self.fields for _ in range(f.words)]

    def encode(self, values: Mapping[str, int]) -> list[int]:
        """A key: the fields' values as words (a field not given is 0)."""
        out = [0] * self.n_words
        for name, v in values.items():
            f = self.field(name)
            if not 0 <= v < (1 << f.width):
                raise UserError(f"table {self.table}: {name} = {v:#x} does not fit in {f.width} bits")
            out[f.offset : f.offset + f.words] = f.split(v)
        return out

    def encode_many(self, rows: Iterable[Mapping[str, int]]) -> np.ndarray:
        """Keys as a uint32 array (n × n_words) for ``Classifier.classify_keys``."""
        return np.array([self.encode(r) for r in rows], dtype=np.uint32).reshape(-1, self.n_words)

    def field_words(self, name: str, kind: str | None = None, value: int | None = None, mask: int | None = None,
                    prefix_len: int | None = None, lo: int | None = None,
                    hi: int | None = None) -> list[tuple[int, int, int]]:
        """One field's match as (lo, hi, mask) per word. ``kind`` defaults to
        the field's match kind; ``value=None`` (or a zero mask / length) is a
        wildcard."""
        f = self.field(name)
        kind = kind or f.match
        full = (1 << f.width) - 1
        where = f"table {self.table}, field {name} ({kind}, {f.width} bits)"
        if kind == "range":
            if lo is None or hi is None:
                if lo is None and hi is None and value is None:
                    return [(0, 0, 0)] * f.words
                raise UserError(f"{where}: a range needs lo and hi")
            if not 0 <= lo <= hi <= full:
                raise UserError(f"{where}: expected 0 <= lo <= hi <= {full:#x}, found {lo:#x}..{hi:#x}")
            if f.words == 1:
                return [(lo, hi, WORD)]
            # Wider fields: only a single value or the whole field reduce to
            # per-word tests (no real program ranges over more than 32 bits).
            if lo == hi:
                return [(w, w, WORD) for w in f.split(lo)]
            if lo == 0 and hi == full:
                return [(0, 0, 0)] * f.words
            raise UserError(f"{where}: a range is supported on fields of at most 32 bits")
        if value is None or (kind == "optional" and mask == 0):  # entries.wildcard: optional 0 &&& 0
            return [(0, 0, 0)] * f.words
        if not 0 <= value <= full:
            raise UserError(f"{where}: value {value:#x} does not fit in {f.width} bits")
        if kind in ("exact", "optional"):
            m = full
        elif kind == "ternary":
            m = full if mask is None else mask
        elif kind == "lpm":
            n = f.width if prefix_len is None else prefix_len
            if not 0 <= n <= f.width:
                raise UserError(f"{where}: prefix length {n} not in 0..{f.width}")
            m = full ^ ((1 << (f.width - n)) - 1)
        else:
            m = full if mask is None else mask
        if not 0 <= m <= full:
            raise UserError(f"{where}: mask {m:#x} does not fit in {f.width} bits")
        out = []
        for v, mw, bits in zip(f.split(value & m), f.split(m), f.word_bits()):
            # An exact word keeps the full 32-bit mask (FieldMatch::exact).
            out.append((v, v, WORD if mw == (1 << bits) - 1 and kind in ("exact", "optional") else mw))
        return out

    def to_field_matches(self, entry: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lo, hi, mask) uint32 arrays of n_words for one entry: anything with
        ``matches``, a mapping from field name to an object with ``kind``,
        ``value``, ``mask``, ``prefix_len``, ``lo``, ``hi`` (entries.Match)."""
        words = [(0, 0, 0)] * self.n_words
        for name, m in entry.matches.items():
            f = self.field(name)
            words[f.offset : f.offset + f.words] = self.field_words(
                name, getattr(m, "kind", None), getattr(m, "value", None), getattr(m, "mask", None),
                getattr(m, "prefix_len", None), getattr(m, "lo", None), getattr(m, "hi", None))
        a = np.array(words, dtype=np.uint32).reshape(self.n_words, 3)
        return a[:, 0].copy(), a[:, 1].copy(), a[:, 2].copy()

    def rule_arrays(self, entries: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lo, hi, mask), each uint32 of shape (len(entries), n_words)."""
        lo = np.zeros((len(entries), self.n_words), dtype=np.uint32)
        hi, mask = lo.copy(), lo.copy()
        for i, e in enumerate(entries):
            lo[i], hi[i], mask[i] = self.to_field_matches(e)
        return lo, hi, mask

    def rule_set(self, lo: np.ndarray, hi: np.ndarray, mask: np.ndarray) -> Any:
        """A ``synapse_vmt._core.RuleSet`` of these arrays (row 0 wins) with
        this layout's per-word widths and kinds."""
        from synapse_vmt import _core

        try:
            return _core.RuleSet.from_arrays(lo, hi, mask, widths=self.word_bits(), kinds=self.word_kinds(),
                                             name=self.table)
        except ValueError as e:
            raise UserError(str(e)) from None

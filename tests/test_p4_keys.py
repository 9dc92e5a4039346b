"""Wide P4 keys: the word layout of python/synapse_vmt/p4/keys.py against a
big-integer reference of P4 matching, and every keyed table of the UPF and
switch programs classified by the decision tree and the trie exactly as by
the linear oracle."""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import pytest

from synapse_vmt import _core
from synapse_vmt.errors import UserError
from synapse_vmt.p4 import read_bmv2
from synapse_vmt.p4.cfg import KeyField, TableInfo
from synapse_vmt.p4.keys import MAX_WORDS, KeyLayout


@dataclass
class M:
    """A field match in the shape of entries.Match."""

    kind: str
    value: int | None = None
    mask: int | None = None
    prefix_len: int | None = None
    lo: int | None = None
    hi: int | None = None


@dataclass
class E:
    matches: dict[str, M]


def p4_matches(table: TableInfo, entry: E, values: dict[str, int]) -> bool:
    """P4 semantics on whole fields (Python integers, no words)."""
    for k in table.key:
        m = entry.matches.get(k.field)
        if m is None:
            continue
        x, full = values.get(k.field, 0), (1 << k.width) - 1
        if m.kind == "range":
            ok = m.lo <= x <= m.hi
        elif m.kind == "lpm":
            host = k.width - m.prefix_len
            ok = x >> host == m.value >> host
        elif m.kind == "ternary":
            ok = x & m.mask == m.value & m.mask
        elif m.value is None:  # optional wildcard
            ok = True
        else:
            ok = x == m.value & full
        if not ok:
            return False
    return True


def pools(table: TableInfo, rng: random.Random) -> dict[str, list[int]]:
    """A few values per field, so that entries overlap and keys hit."""
    return {k.field: [rng.getrandbits(k.width) for _ in range(4)] + [0, (1 << k.width) - 1] for k in table.key}


def random_mask(width: int, rng: random.Random) -> int:
    full = (1 << width) - 1
    c = rng.randrange(4)
    if c == 0:
        return full
    if c == 1:
        return 0
    if c == 2:  # a prefix
        return full ^ ((1 << (width - rng.randint(0, width))) - 1)
    m = full  # a few holes: the trie expands them, a random mask would be refused
    for _ in range(rng.randint(1, 3)):
        m &= ~(1 << rng.randrange(width))
    return m


def random_entry(table: TableInfo, pool: dict[str, list[int]], rng: random.Random, kinds: dict[str, str]) -> E:
    out = {}
    for k in table.key:
        kind, v = kinds.get(k.field, k.match), rng.choice(pool[k.field])
        if kind == "exact":
            out[k.field] = M("exact", v)
        elif kind == "lpm":
            n = rng.randint(0, k.width)
            out[k.field] = M("lpm", v & ~((1 << (k.width - n)) - 1), prefix_len=n)
        elif kind == "ternary":
            m = random_mask(k.width, rng)
            out[k.field] = M("ternary", v & m, mask=m)
        elif kind == "range":
            a, b = sorted((v, rng.choice(pool[k.field])))
            out[k.field] = M("range", lo=a, hi=b)
        elif kind == "optional":
            out[k.field] = M("optional", None if rng.random() < 0.3 else v)
    return E(out)


def random_values(table: TableInfo, pool: dict[str, list[int]], rng: random.Random, entries: list[E]) -> dict[str, int]:
    """Field values inside a random entry, a few fields moved off it."""
    e = rng.choice(entries) if entries and rng.random() < 0.8 else E({})
    vals = {}
    for k in table.key:
        m, noise = e.matches.get(k.field), rng.getrandbits(k.width)
        if m is None or (m.kind == "optional" and m.value is None):
            v = rng.choice(pool[k.field])
        elif m.kind == "range":
            v = rng.randint(m.lo, m.hi)
        elif m.kind == "lpm":
            v = m.value | (noise & ((1 << (k.width - m.prefix_len)) - 1))
        elif m.kind == "ternary":
            v = m.value | (noise & ~m.mask)
        else:
            v = m.value
        r = rng.random()
        if r < 0.05:
            v = noise
        elif r < 0.1:
            v = (v + rng.choice((-1, 1))) % (1 << k.width)
        vals[k.field] = v
    return vals


def first_match(table: TableInfo, entries: list[E], values: dict[str, int]) -> int:
    return next((i for i, e in enumerate(entries) if p4_matches(table, e, values)), -1)


MIXED = TableInfo("ingress.mixed", (
    KeyField("hdr.ipv6.dst", 128, "lpm"),
    KeyField("hdr.eth.src", 48, "exact"),
    KeyField("meta.l4_port", 16, "range"),
    KeyField("meta.flags", 9, "ternary"),
    KeyField("hdr.ipv6.src", 128, "ternary"),
    KeyField("meta.vrf", 32, "optional"),
    KeyField("hdr.ipv4.$valid$", 1, "exact"),
), 0)


def test_layout_is_most_significant_word_first_in_key_order():
    lay = KeyLayout.from_table(MIXED)
    assert lay.n_words == 4 + 2 + 1 + 1 + 4 + 1 + 1
    assert [f.offset for f in lay.fields] == [0, 4, 6, 7, 8, 12, 13]
    assert lay.word_bits()[:7] == [32, 32, 32, 32, 16, 32, 16]
    k = lay.encode({"hdr.eth.src": 0x0102_0304_0506, "hdr.ipv6.dst": 1 << 127 | 7})
    assert k[:7] == [0x8000_0000, 0, 0, 7, 0x0102, 0x0304_0506, 0]
    with pytest.raises(UserError, match="does not fit in 9 bits"):
        lay.encode({"meta.flags": 512})
    # An lpm ending inside the second word: word 0 exact, word 1 a prefix, the rest wildcards.
    w = lay.field_words("hdr.ipv6.dst", value=0x2001_0db8_8000 << 80, prefix_len=33)
    assert w == [(0x2001_0db8, 0x2001_0db8, 0xFFFF_FFFF), (0x8000_0000, 0x8000_0000, 0x8000_0000), (0, 0, 0), (0, 0, 0)]


def test_every_match_kind_equals_p4_semantics_through_the_binding():
    """Entries split into words and classified by Rust give the first entry
    that P4's whole-field semantics give, for all five match kinds."""
    rng = random.Random(8)
    lay = KeyLayout.from_table(MIXED)
    pool = pools(MIXED, rng)
    entries = [random_entry(MIXED, pool, rng, {}) for _ in range(120)]
    rs = lay.rule_set(*lay.rule_arrays(entries))
    assert (len(rs), rs.words) == (120, 14)
    values = [random_values(MIXED, pool, rng, entries) for _ in range(3000)]
    want = np.array([first_match(MIXED, entries, v) for v in values])
    assert 0.2 < np.mean(want >= 0) < 1.0, "keys should both hit and miss"
    keys = lay.encode_many(values)
    for algo in ("linear", "dtree", "trie"):
        got = _core.Classifier(rs, algo, {"trie.max_bytes": str(64 << 20)}).classify_keys(keys)
        assert np.array_equal(got, want), algo


def test_limits_are_errors_naming_the_table():
    wide = TableInfo("ingress.too_wide", tuple(KeyField(f"h.f{i}", 32, "exact") for i in range(MAX_WORDS + 1)), 0)
    with pytest.raises(UserError, match=r"ingress\.too_wide.*33 32-bit words"):
        KeyLayout.from_table(wide)
    z = np.zeros((2, MAX_WORDS + 1), dtype=np.uint32)
    with pytest.raises(ValueError, match=r"ingress\.too_wide"):
        _core.RuleSet.from_arrays(z, z, z, name="ingress.too_wide")
    ok = np.zeros((2, MAX_WORDS), dtype=np.uint32)
    assert _core.RuleSet.from_arrays(ok, ok, ok, name="t").words == MAX_WORDS
    lay = KeyLayout.from_table(MIXED)
    with pytest.raises(UserError, match="range is supported on fields of at most 32 bits"):
        lay.field_words("hdr.ipv6.dst", "range", lo=1, hi=5)
    # A single value or the whole field is still fine.
    assert lay.field_words("hdr.eth.src", "range", lo=7, hi=7) == [(0, 0, 0xFFFF_FFFF), (7, 7, 0xFFFF_FFFF)]
    clf = _core.Classifier(lay.rule_set(*lay.rule_arrays([])), "linear")
    with pytest.raises(ValueError, match="expected keys of 14 words"):
        clf.classify_keys(np.zeros((1, 5), dtype=np.uint32))


@pytest.mark.parametrize("program", ["up4-bmv2.json", "switch-p416.json"])
def test_every_keyed_table_dtree_and_trie_equal_linear(shared_data, program):
    """Every keyed table of a real program, filled with random entries of its
    own match kinds (plus a copy with every kind swapped in, optional
    included), on keys drawn to hit: dtree == trie == linear == P4."""
    cfg = read_bmv2(shared_data / "p4" / program)
    assert cfg.tables
    rng = random.Random(program)
    kinds = ("exact", "lpm", "ternary", "range", "optional")
    widest = 0
    for t in cfg.tables:
        lay = KeyLayout.from_table(t)
        widest = max(widest, lay.n_words)
        pool = pools(t, rng)
        # Its own kinds, then each field with a random kind (range only where P4 allows it here).
        swap = {k.field: rng.choice([x for x in kinds if x != "range" or k.width <= 32]) for k in t.key}
        for kind_map in ({}, swap):
            entries = [random_entry(t, pool, rng, kind_map) for _ in range(48)]
            table = t if not kind_map else TableInfo(t.name, tuple(KeyField(k.field, k.width, kind_map[k.field]) for k in t.key), 0)
            lay = KeyLayout.from_table(table)
            rs = lay.rule_set(*lay.rule_arrays(entries))
            values = [random_values(t, pool, rng, entries) for _ in range(200)]
            keys = lay.encode_many(values)
            want = np.array([first_match(table, entries, v) for v in values])
            lin = _core.Classifier(rs, "linear").classify_keys(keys)
            assert np.array_equal(lin, want), f"{t.name}: linear differs from P4 semantics"
            got = _core.Classifier(rs, "dtree").classify_keys(keys)
            assert np.array_equal(got, lin), f"{t.name}: dtree differs from linear"
            try:
                trie = _core.Classifier(rs, "trie", {"trie.max_bytes": str(4 << 20)})
            except ValueError as e:
                assert "memory budget" in str(e), f"{t.name}: {e}"
                continue
            assert np.array_equal(trie.classify_keys(keys), lin), f"{t.name}: trie differs from linear"
    assert widest == {"up4-bmv2.json": 12, "switch-p416.json": 24}[program]

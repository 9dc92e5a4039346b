"""The versioned table store: the target the P4Runtime server writes to.

Each table holds its entries keyed by (match, priority), the P4Runtime
identity of an entry, plus its default action. ``apply(ops, atomic)`` runs a
batch of updates and bumps the version once per batch that changed
anything; an atomic batch is applied to a copy of the tables it touches and
swapped in only when every update succeeded (P4Runtime's
ROLLBACK_ON_ERROR / DATAPLANE_ATOMIC), otherwise each update stands alone
(CONTINUE_ON_ERROR). A single lock orders writers; a lookup sees one version.

Lookups answer through Synapse's classifiers: a table's entries in match
order become a RuleSet (``p4.keys``), a ``_core.Classifier`` is built per
table version on the first lookup after a change, and ``lookup`` classifies
a batch of keys with it (direct counters count the hits). So "traffic
follows the writes" is checked against the same classifiers the simulator
uses, and a linear oracle (``TableEntries.lookup``) can check them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from synapse_vmt import _core
from synapse_vmt.p4.bmv2 import P4Program, TableSpec
from synapse_vmt.p4.entries import Entry, TableEntries, sort_entries
from synapse_vmt.p4.keys import KeyLayout

#: Classifier used for lookups (any of ``_core.algorithms()``).
DEFAULT_ALGO = "linear"


class StoreError(Exception):
    """A rejected update: ``code`` is a gRPC status name (ALREADY_EXISTS...)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def _int_key(v: int | None) -> bytes:
    if v is None:
        return b"\xff\xff"
    b = v.to_bytes((v.bit_length() + 7) // 8, "big")
    return len(b).to_bytes(2, "big") + b


_KIND_KEY = {"exact": b"\x00", "lpm": b"\x01", "ternary": b"\x02", "range": b"\x03", "optional": b"\x04"}


def key_bytes(e: Entry) -> bytes:
    """An entry's identity in its table as bytes: ``Entry.key()`` (each
    match's kind, value, mask, lo, hi, then the priority) with each int as a
    2-byte length and its shortest big-endian bytes, None as ``ffff``. The
    Rust write decoder (``_core.WriteDecoder``) builds the same bytes."""
    parts = []
    for m in e.matches.values():
        parts += (_KIND_KEY[m.kind], _int_key(m.value), _int_key(m.mask), _int_key(m.lo), _int_key(m.hi))
    parts.append(_int_key(e.priority))
    return b"".join(parts)


_LAZY_LOCK = threading.Lock()


class _Lazy:
    """An ``entry`` attribute that may be built on first use: ``src`` is
    ``(raw, kind)`` and the entry is ``decode(raw, kind)`` (the server's
    decoder on the entry's bytes: the fast write path leaves an entry
    undecoded until something reads it). Slots, not a ``__dict__``, and
    ``src`` holds no container (the garbage collector soon stops tracking
    it): a store holds one per entry."""

    __slots__ = ("entry", "src", "decode")

    def __getattr__(self, name):  # only for an attribute not set: an entry not built yet
        src = self.src
        if name != "entry" or src is None:
            raise AttributeError(name)
        e = self.decode(*src)
        with _LAZY_LOCK:  # one entry object even if two threads build it at once
            try:
                return object.__getattribute__(self, "entry")
            except AttributeError:
                self.entry = e
                return e


class Op(_Lazy):
    """One update: ``kind`` insert | modify | delete | default (set the
    default action: ``entry.action``/``entry.params``; ``entry.matches`` empty,
    or reset to the program's default when ``entry`` is None). ``metadata``
    is P4Runtime's TableEntry.metadata: the controller's, stored and read back
    as written. ``key`` (``key_bytes`` of the entry), ``src`` and ``decode``
    (in place of ``entry``, see ``_Lazy``) come from the fast write path."""

    __slots__ = ("kind", "table", "metadata", "key")

    def __init__(self, kind: str, table: str, entry: Entry | None, metadata: bytes = b"",
                 key: bytes | None = None, src: tuple | None = None, decode=None):
        self.kind, self.table, self.metadata, self.key, self.src, self.decode = kind, table, metadata, key, src, decode
        if entry is not None or src is None:
            self.entry = entry

    def __repr__(self) -> str:
        return f"Op({self.kind!r}, {self.table!r}, {self.entry!r})"


class Stored(_Lazy):
    """A stored entry: ``seq`` is its insertion order (ties in match order
    keep it), ``packets``/``bytes`` its direct counter, ``wire`` the reader's
    cache (its id index, the encoded TableEntry)."""

    __slots__ = ("seq", "packets", "bytes", "metadata", "wire")

    def __init__(self, entry: Entry | None, seq: int, packets: int = 0, bytes: int = 0, metadata: bytes = b"",
                 src: tuple | None = None, decode=None):
        self.seq, self.packets, self.bytes, self.metadata, self.src, self.decode = \
            seq, packets, bytes, metadata, src, decode
        self.wire: tuple | None = None
        if entry is not None or src is None:
            self.entry = entry


@dataclass
class _Table:
    spec: TableSpec
    size: int
    entries: dict[bytes, Stored] = field(default_factory=dict)  # by key_bytes
    default: tuple[str, dict[str, int]] | None = None
    version: int = 0
    lookups: int = 0
    hits: int = 0
    build_s: float = 0.0  # time of the last classifier build
    lookup_s: float = 0.0  # time spent classifying
    default_packets: int = 0

    def copy(self) -> _Table:
        t = _Table(self.spec, self.size, dict(self.entries), self.default, self.version)
        t.lookups, t.hits, t.build_s, t.lookup_s, t.default_packets = (
            self.lookups, self.hits, self.build_s, self.lookup_s, self.default_packets)
        return t


class TableStore:
    """Entries of every keyed table of ``prog``, versioned; ``sizes`` caps a
    table's entry count (RESOURCE_EXHAUSTED past it)."""

    def __init__(self, prog: P4Program, sizes: dict[str, int] | None = None, algo: str = DEFAULT_ALGO):
        self.prog = prog
        self.algo = algo
        self.version = 0
        self.lock = threading.RLock()
        self._seq = 0
        self._tables: dict[str, _Table] = {}
        for name, spec in prog.tables.items():
            size = (sizes or {}).get(name) or spec.info.max_size or 1024
            self._tables[name] = _Table(spec, size, default=spec.default)
        self._clf: dict[str, tuple[int, object, list[Stored], KeyLayout]] = {}

    # --- writes ---

    def apply(self, ops: list, atomic: bool = False, dry_run: bool = False,
              gone=None, decode=None, call=None) -> tuple[int, list[StoreError | None]]:
        """Apply ``ops`` in order; the store's version after, and per op None
        or the error it failed with. ``atomic``: all or nothing; ``dry_run``
        (with atomic): check every op, change nothing. ``gone(i)``, asked
        before op ``i`` (and, for an atomic batch, once more before it is
        swapped in): the client went away; the ops from there fail
        CANCELLED (so an atomic batch applies nothing, another keeps the ops
        before); ``call`` (the front end's ``_core.Call``) in place of
        ``gone``: the same, asked in Rust. ``decode``: the ops are the Rust
        write decoder's items ``(kind, table, key, entry bytes, metadata)``
        instead of ``Op``s, applied by ``_core.apply_items`` in one call (no
        Python code per update), the entry of each built by ``decode(raw,
        kind)`` when something reads it."""
        with self.lock:
            work = {}  # table name -> working copy (atomic) or the table itself
            if decode is not None:
                errs, changed, self._seq = _core.apply_items(ops, self._tables, work, atomic, self._seq, Stored,
                                                             decode, call, gone)
                if any(errs):
                    errs = [e if e is None else StoreError(*e) for e in errs]
            else:
                errs, changed = self._apply_ops(ops, work, atomic, gone)
            if atomic and (dry_run or any(e is not None for e in errs)):
                return self.version, errs
            if atomic and (gone(len(ops)) if gone is not None else call is not None and not call.is_active()):
                # cancelled after the last op: still nothing
                return self.version, [StoreError("CANCELLED", "not applied: the client went away")] * len(ops)
            if changed:
                self.version += 1
                for name, t in work.items():
                    t.version = self.version
                    self._tables[name] = t
            return self.version, errs

    def _apply_ops(self, ops: list[Op], work: dict, atomic: bool, gone) -> tuple[list[StoreError | None], bool]:
        """``apply``'s loop over ``Op``s: per op None or its error, and whether any applied."""
        errs: list[StoreError | None] = []
        changed = False
        for i, op in enumerate(ops):
            if gone is not None and gone(i):
                errs += [StoreError("CANCELLED", "not applied: the client went away")] * (len(ops) - i)
                break
            t = work.get(op.table)
            if t is None:
                t = self._tables.get(op.table)
                if t is None:
                    errs.append(StoreError("NOT_FOUND", f"no table {op.table}"))
                    continue
                t = work[op.table] = t.copy() if atomic else t
            try:
                self._apply_one(t, op)
                errs.append(None)
                changed = True
            except StoreError as e:
                errs.append(e)
        return errs, changed

    def _apply_one(self, t: _Table, op: Op) -> None:
        if op.kind == "default":
            if t.spec.default_const:
                raise StoreError("PERMISSION_DENIED", f"{t.spec.name}: the default action is const")
            t.default = t.spec.default if op.entry is None else (op.entry.action, dict(op.entry.params))
            return
        if op.src is not None:  # from the fast write path: built from its bytes when read
            e, src, dec = None, op.src, op.decode
        else:
            e, src, dec = op.entry, None, None
        self._put(t, op.kind, op.key if op.key is not None else key_bytes(op.entry), e, src, dec, op.metadata)

    def _put(self, t: _Table, kind: str, key: bytes, e: Entry | None, src, dec, metadata: bytes) -> None:
        """An insert, modify or delete of the entry with identity ``key`` (``e``, or ``src`` and ``dec``: see ``_Lazy``)."""
        entries = t.entries
        if kind == "insert":
            if key in entries:
                raise StoreError("ALREADY_EXISTS", f"{t.spec.name}: an entry with this match and priority exists")
            if len(entries) >= t.size:
                raise StoreError("RESOURCE_EXHAUSTED", f"{t.spec.name}: table full ({t.size} entries)")
            self._seq += 1
            entries[key] = Stored(e, self._seq, 0, 0, metadata, src, dec)
        elif kind == "modify":
            old = entries.get(key)
            if old is None:
                raise StoreError("NOT_FOUND", f"{t.spec.name}: no entry with this match and priority")
            entries[key] = Stored(e, old.seq, old.packets, old.bytes, metadata, src, dec)
        elif kind == "delete":
            if entries.pop(key, None) is None:
                raise StoreError("NOT_FOUND", f"{t.spec.name}: no entry with this match and priority")
        else:
            raise StoreError("INVALID_ARGUMENT", f"unknown update {kind}")

    # --- reads ---

    def table_names(self) -> list[str]:
        return list(self._tables)

    def entries(self, table: str) -> list[Stored]:
        """The table's entries in insertion order (a snapshot)."""
        with self.lock:
            return sorted(self._tables[table].entries.values(), key=lambda s: s.seq)

    def get(self, table: str, entry: Entry) -> Stored | None:
        with self.lock:
            return self._tables[table].entries.get(key_bytes(entry))

    def default(self, table: str) -> tuple[str, dict[str, int]] | None:
        return self._tables[table].default

    def snapshot(self, tables=None) -> dict[str, TableEntries]:
        """Every table's (or those named in ``tables``) entries in match order
        with its default: what the interpreter (``p4.interp.Program.run(entries=...)``) takes."""
        with self.lock:
            return {n: TableEntries(n, [s.entry for s in self._ordered(t)], t.default) for n, t in self._tables.items()
                    if tables is None or n in tables}

    def _ordered(self, t: _Table) -> list[Stored]:
        by_seq = sorted(t.entries.values(), key=lambda s: s.seq)
        order = sort_entries(t.spec, [s.entry for s in by_seq])
        pos = {id(e): i for i, e in enumerate(order)}
        return sorted(by_seq, key=lambda s: pos[id(s.entry)])

    # --- lookups through the classifiers ---

    def _classifier(self, name: str):
        t = self._tables[name]
        c = self._clf.get(name)
        if c is not None and c[0] == t.version:
            return c
        t0 = time.perf_counter()
        layout = KeyLayout.from_table(t.spec.info)
        ordered = self._ordered(t)
        rs = layout.rule_set(*layout.rule_arrays([s.entry for s in ordered]))
        clf = _core.Classifier(rs, self.algo if ordered else "linear")
        t.build_s = time.perf_counter() - t0
        c = (t.version, clf, ordered, layout)
        self._clf[name] = c
        return c

    def lookup(self, table: str, rows: list[dict[str, int]], pkt_bytes: int | list[int] = 0,
               count: bool = True) -> list[Entry | None]:
        """The entry each key (field values by ``header.field``) hits, through
        the table's classifier; hits count in the entries' direct counters
        (packets, and bytes: ``pkt_bytes`` for every key or one length per key)."""
        with self.lock:
            _, clf, ordered, layout = self._classifier(table)
            t = self._tables[table]
            t0 = time.perf_counter()
            keys = layout.encode_many(rows) if rows else np.zeros((0, layout.n_words), dtype=np.uint32)
            ids = clf.classify_keys(keys)
            t.lookup_s += time.perf_counter() - t0
            out: list[Entry | None] = []
            sizes = [pkt_bytes] * len(rows) if isinstance(pkt_bytes, int) else pkt_bytes
            for i, size in zip(ids, sizes):
                s = ordered[i] if i >= 0 else None
                if s is not None and count:
                    s.packets += 1
                    s.bytes += size
                out.append(s.entry if s is not None else None)
            if count:
                t.lookups += len(rows)
                hits = sum(1 for e in out if e is not None)
                t.hits += hits
                t.default_packets += len(rows) - hits
            return out

    def stats(self) -> dict[str, dict]:
        """Synapse's state per table: entries, version, lookups, hit rate,
        classifier build time and lookup latency per key."""
        with self.lock:
            out = {}
            for n, t in self._tables.items():
                out[n] = {
                    "entries": len(t.entries), "size": t.size, "version": t.version, "lookups": t.lookups,
                    "hits": t.hits, "hit_rate": t.hits / t.lookups if t.lookups else 0.0,
                    "classifier": self.algo, "build_us": t.build_s * 1e6,
                    "lookup_ns_per_key": t.lookup_s * 1e9 / t.lookups if t.lookups else 0.0,
                }
            return out


class Traffic:
    """Background traffic against a store: every ``period_s`` each table with
    entries gets ``rate * period_s`` lookups, a share ``hit_share`` drawn to
    hit a random current entry (``sample_key``), the rest random keys; each
    lookup is a packet whose length is drawn from the simple IMIX (64, 576
    and 1500 bytes, 7:4:1), so direct counters count bytes too. So the
    state a client reads (hit rate, lookups, direct counters) moves while it
    writes. ``stop()`` ends the thread."""

    IMIX = (64,) * 7 + (576,) * 4 + (1500,)

    def __init__(self, store: TableStore, rate: float, seed: int = 0, hit_share: float = 0.9,
                 period_s: float = 0.05):
        import random

        self.store, self.rate, self.hit_share, self.period_s = store, rate, hit_share, period_s
        self.rng = random.Random(seed)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="synapse-traffic", daemon=True)
        self.thread.start()

    def _keys(self, name: str, n: int) -> list[dict[str, int]]:
        from synapse_vmt.p4.entries import match_fields, sample_key

        spec = self.store.prog.tables[name]
        live = self.store.entries(name)
        rows = []
        for _ in range(n):
            if live and self.rng.random() < self.hit_share:
                rows.append(sample_key(self.rng.choice(live).entry, spec, self.rng))
            else:
                rows.append({kf.field: self.rng.getrandbits(kf.width) for kf, _ in match_fields(spec)})
        return rows

    def _run(self) -> None:
        n = max(1, int(self.rate * self.period_s))
        while not self._stop.wait(self.period_s):
            for name in self.store.table_names():
                if self.store._tables[name].entries:
                    self.store.lookup(name, self._keys(name, n), [self.rng.choice(self.IMIX) for _ in range(n)])

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(5)

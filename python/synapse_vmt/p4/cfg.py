"""The control-flow graph (CFG) file: logical tables, entry shares and edges.

This is the one description of a P4 program's tables that the optimizer
(:mod:`synapse_vmt.opt`) and the simulator take. ``synapse p4 cfg`` writes it
from p4c's BMv2 JSON; it can also be written by hand. Format (JSON)::

    {
      "format": "synapse-cfg", "version": 1,
      "program": "p4src/main.p4",                      # informational
      "tables": [
        {"name": "PreQosPipe.my_station", "pipeline": "ingress", "max_size": 1024,
         "key": [{"field": "ethernet.dst_addr", "width": 48, "match": "exact"}]}
      ],
      "entry": {"PreQosPipe.my_station": 0.5},         # share of arriving PHVs entering each table
      "edges": [{"src": "PreQosPipe.my_station", "dst": "PreQosPipe.interfaces", "p": 0.25}]
    }

``entry`` and ``edges`` use the same names and meaning as the simulator's
config (``docs/simulator-api.md``): ``p`` is the probability that a PHV
leaving ``src`` goes to ``dst``; what is left (1 - sum of ``p`` out of a table)
leaves the pipeline; likewise 1 - sum of ``entry`` skips every table. The
probabilities ``synapse p4 cfg`` writes are placeholders (every branch of the
program equally likely): the optimizer replaces them with the routing matrix
it measures from counters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from synapse_vmt.errors import UserError, atomic_write, read_text

FORMAT = "synapse-cfg"
VERSION = 1
MATCH_KINDS = ("exact", "lpm", "ternary", "range", "optional", "valid", "selector")


@dataclass(frozen=True)
class KeyField:
    """One field of a table's key: a header field, its width and match kind.

    A key on a slice of a field (p4c: ``hdr.ipv4.src[31:24]``, a ``mask`` in
    the BMv2 JSON) has ``width`` the slice's bits and ``slice_mask`` the
    slice's bits within the whole field of ``full_width`` bits (0 when the
    key is the whole field)."""

    field: str
    width: int
    match: str
    slice_mask: int = 0
    full_width: int = 0


@dataclass(frozen=True)
class TableInfo:
    """A logical table (a VMT): its name, key and declared size."""

    name: str
    key: tuple[KeyField, ...]
    max_size: int
    pipeline: str = ""

    @property
    def key_bits(self) -> int:
        return sum(k.width for k in self.key)


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    p: float


@dataclass
class Cfg:
    """Tables, entry shares and edges of a program's control flow (a DAG)."""

    tables: list[TableInfo]
    entry: dict[str, float]
    edges: list[Edge]
    program: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tables]

    def index(self) -> dict[str, int]:
        return {t.name: i for i, t in enumerate(self.tables)}

    def routing(self) -> tuple[np.ndarray, np.ndarray]:
        """(entry vector e, routing matrix P) in table order."""
        idx = self.index()
        e = np.zeros(len(self.tables))
        P = np.zeros((len(self.tables), len(self.tables)))
        for name, share in self.entry.items():
            e[idx[name]] += share
        for ed in self.edges:
            P[idx[ed.src], idx[ed.dst]] += ed.p
        return e, P

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "version": VERSION,
            "program": self.program,
            "tables": [
                {
                    "name": t.name,
                    "pipeline": t.pipeline,
                    "max_size": t.max_size,
                    "key": [{"field": k.field, "width": k.width, "match": k.match} for k in t.key],
                }
                for t in self.tables
            ],
            "entry": dict(self.entry),
            "edges": [{"src": e.src, "dst": e.dst, "p": e.p} for e in self.edges],
        }

    def save(self, path: str | Path) -> None:
        with atomic_write(path) as f:
            json.dump(self.to_json(), f, indent=2)
            f.write("\n")


def _expect(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise UserError(f"{where}: expected {what}")


def cfg_from_json(d: object, where: str) -> Cfg:
    """Validate a parsed CFG document; every problem is one line naming ``where``."""
    _expect(isinstance(d, dict), where, "a JSON object")
    assert isinstance(d, dict)
    known = {"format", "version", "program", "tables", "entry", "edges"}
    unknown = sorted(set(d) - known)
    _expect(not unknown, where, f"only keys {sorted(known)}, found unknown {unknown}")
    _expect(d.get("format") == FORMAT, where, f'"format": "{FORMAT}"')
    _expect(d.get("version") == VERSION, where, f'"version": {VERSION}')
    tables_raw = d.get("tables")
    _expect(isinstance(tables_raw, list) and len(tables_raw) > 0, where, '"tables": a non-empty list')
    tables: list[TableInfo] = []
    for i, t in enumerate(tables_raw):
        w = f"{where}: tables[{i}]"
        _expect(isinstance(t, dict), w, "an object")
        bad = sorted(set(t) - {"name", "pipeline", "max_size", "key"})
        _expect(not bad, w, f"keys name, pipeline, max_size, key; found unknown {bad}")
        _expect(isinstance(t.get("name"), str) and t["name"] != "", w, '"name": a non-empty string')
        ms = t.get("max_size", 0)
        _expect(isinstance(ms, int) and ms >= 0, w, '"max_size": an integer >= 0')
        keys = []
        for j, k in enumerate(t.get("key", [])):
            wk = f"{w}.key[{j}]"
            _expect(isinstance(k, dict) and set(k) == {"field", "width", "match"}, wk, "{field, width, match}")
            _expect(isinstance(k["width"], int) and k["width"] > 0, wk, "width > 0")
            _expect(k["match"] in MATCH_KINDS, wk, f"match in {list(MATCH_KINDS)}")
            keys.append(KeyField(str(k["field"]), k["width"], k["match"]))
        tables.append(TableInfo(t["name"], tuple(keys), ms, str(t.get("pipeline", ""))))
    names = [t.name for t in tables]
    dup = sorted({n for n in names if names.count(n) > 1})
    _expect(not dup, where, f"unique table names, {dup} repeated")
    known_names = set(names)

    entry_raw = d.get("entry", {})
    _expect(isinstance(entry_raw, dict), where, '"entry": an object {table: share}')
    entry: dict[str, float] = {}
    for name, share in entry_raw.items():
        _expect(name in known_names, f"{where}: entry", f"a known table, found {name!r}")
        _expect(isinstance(share, (int, float)) and 0 <= share <= 1, f"{where}: entry[{name!r}]", "a share in [0, 1]")
        entry[name] = float(share)
    _expect(sum(entry.values()) <= 1 + 1e-9, f"{where}: entry", "shares summing to <= 1")

    edges: list[Edge] = []
    out: dict[str, float] = {}
    for i, e in enumerate(d.get("edges", [])):
        w = f"{where}: edges[{i}]"
        _expect(isinstance(e, dict) and set(e) == {"src", "dst", "p"}, w, "{src, dst, p}")
        _expect(e["src"] in known_names, w, f"src a known table, found {e['src']!r}")
        _expect(e["dst"] in known_names, w, f"dst a known table, found {e['dst']!r}")
        _expect(isinstance(e["p"], (int, float)) and 0 <= e["p"] <= 1, w, "p in [0, 1]")
        edges.append(Edge(e["src"], e["dst"], float(e["p"])))
        out[e["src"]] = out.get(e["src"], 0.0) + float(e["p"])
    for name, s in out.items():
        _expect(s <= 1 + 1e-9, f"{where}: edges out of {name!r}", f"probabilities summing to <= 1, found {s:.6g}")
    return Cfg(tables, entry, edges, str(d.get("program", "")))


def load_json(path: str | Path) -> object:
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: line {e.lineno} column {e.colno}: not valid JSON ({e.msg})") from None


def load_cfg(path: str | Path) -> Cfg:
    return cfg_from_json(load_json(path), str(path))

"""Read the BMv2 JSON that p4c writes and turn it into a :class:`~synapse_vmt.p4.cfg.Cfg`.

What is read (and nothing else):

- ``header_types[].fields`` (``[name, width, signed]``) and ``headers[]``
  (``name`` -> ``header_type``), to give every key field its width;
- ``pipelines[]`` in order (ingress, then egress: BMv2 runs the next
  pipeline where one ends), each with ``init_table``,
  ``tables[]`` (``name``, ``key[]`` of ``match_type``/``target``, ``max_size``,
  ``next_tables``, ``base_default_next``) and ``conditionals[]``
  (``name``, ``true_next``, ``false_next``).

Only tables that match on something become VMTs. Keyless tables (p4c makes a
``tbl_*`` one for every action called outside a table) and conditionals only
route PHVs, so they are folded away: an edge i -> j says a PHV leaving table i
can reach table j through them. The probability on each edge assumes every
branch equally likely (each action of a table, hit/miss, each side of an
``if``); the runtime optimizer measures the real shares from counters.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from synapse_vmt.errors import UserError
from synapse_vmt.p4.cfg import Cfg, Edge, KeyField, TableInfo, load_json

EXIT = None  # a PHV leaving the last pipeline


class _Reader:
    def __init__(self, doc: object, path: str):
        self.path = path
        if not isinstance(doc, dict):
            self.fail("top level", "a JSON object (p4c BMv2 output)")
        assert isinstance(doc, dict)
        for k in ("header_types", "headers", "pipelines"):
            if not isinstance(doc.get(k), list):
                self.fail("top level", f'a list "{k}" (is this p4c BMv2 JSON?)')
        self.doc = doc
        self.widths = self._field_widths()

    def fail(self, where: str, what: str):
        raise UserError(f"{self.path}: {where}: expected {what}")

    def _field_widths(self) -> dict[str, dict[str, int]]:
        types: dict[str, dict[str, int]] = {}
        for i, ht in enumerate(self.doc["header_types"]):
            if not isinstance(ht, dict) or not isinstance(ht.get("name"), str) or not isinstance(ht.get("fields"), list):
                self.fail(f"header_types[{i}]", "an object with name and fields")
            fields = {}
            for f in ht["fields"]:
                if not isinstance(f, list) or len(f) < 2 or not isinstance(f[0], str):
                    self.fail(f"header_types[{i}] ({ht['name']})", "fields as [name, width, signed]")
                # varbit fields carry a string width; they cannot be keys.
                fields[f[0]] = f[1] if isinstance(f[1], int) else 0
            types[ht["name"]] = fields
        headers: dict[str, dict[str, int]] = {}
        for i, h in enumerate(self.doc["headers"]):
            if not isinstance(h, dict) or not isinstance(h.get("name"), str):
                self.fail(f"headers[{i}]", "an object with a name")
            t = h.get("header_type")
            if t not in types:
                self.fail(f"headers[{i}] ({h['name']})", f"a known header_type, found {t!r}")
            headers[h["name"]] = types[t]
        return headers

    def key_field(self, where: str, k: object) -> KeyField:
        if not isinstance(k, dict) or "match_type" not in k or "target" not in k:
            self.fail(where, "a key with match_type and target")
        assert isinstance(k, dict)
        kind, target = k["match_type"], k["target"]
        if kind == "valid":  # P4-14 style validity match: target is the header name
            if target not in self.widths:
                self.fail(where, f"a known header, found {target!r}")
            return KeyField(f"{target}.$valid$", 1, "exact")
        if not (isinstance(target, list) and len(target) == 2 and all(isinstance(x, str) for x in target)):
            self.fail(where, f"target [header, field], found {target!r}")
        hdr, fld = target
        if hdr not in self.widths:
            self.fail(where, f"a known header, found {hdr!r}")
        if fld == "$valid$":
            width = 1
        elif fld in self.widths[hdr]:
            width = self.widths[hdr][fld]
        else:
            self.fail(where, f"a field of header {hdr!r}, found {fld!r}")
        mask = k.get("mask")
        if isinstance(mask, str):  # a field slice: only the masked bits are matched
            try:
                width = bin(int(mask, 16)).count("1")
            except ValueError:
                self.fail(where, f"a hex mask, found {mask!r}")
        if kind not in ("exact", "lpm", "ternary", "range", "optional", "selector"):
            self.fail(where, f"a match_type among exact, lpm, ternary, range, optional; found {kind!r}")
        if width <= 0:
            self.fail(where, f"a fixed-width field, {hdr}.{fld} has none")
        return KeyField(f"{hdr}.{fld}", width, kind)

    def read(self) -> Cfg:
        pipes = self.doc["pipelines"]
        if not pipes:
            self.fail("pipelines", "at least one pipeline")
        # node name -> ("table", obj) | ("cond", obj), per pipeline
        nodes: list[dict[str, tuple[str, dict]]] = []
        real: list[TableInfo] = []
        for pi, p in enumerate(pipes):
            w = f"pipelines[{pi}]"
            if not isinstance(p, dict) or not isinstance(p.get("tables"), list):
                self.fail(w, "an object with tables and conditionals")
            pname = p.get("name", f"pipeline{pi}")
            nm: dict[str, tuple[str, dict]] = {}
            for ti, t in enumerate(p["tables"]):
                wt = f"{w}.tables[{ti}]"
                if not isinstance(t, dict) or not isinstance(t.get("name"), str):
                    self.fail(wt, "an object with a name")
                for req in ("key", "next_tables"):
                    if req not in t:
                        self.fail(f"{wt} ({t['name']})", f'a "{req}" entry')
                if not isinstance(t["key"], list) or not isinstance(t["next_tables"], dict):
                    self.fail(f"{wt} ({t['name']})", "key a list and next_tables an object")
                nm[t["name"]] = ("table", t)
                if t["key"]:
                    keys = tuple(self.key_field(f"{wt}.key[{j}] ({t['name']})", k) for j, k in enumerate(t["key"]))
                    size = t.get("max_size", 0)
                    if not isinstance(size, int) or size < 0:
                        self.fail(f"{wt} ({t['name']})", "max_size an integer >= 0")
                    real.append(TableInfo(t["name"], keys, size, pname))
            for ci, c in enumerate(p.get("conditionals", [])):
                wc = f"{w}.conditionals[{ci}]"
                if not isinstance(c, dict) or not isinstance(c.get("name"), str) or "true_next" not in c or "false_next" not in c:
                    self.fail(wc, "an object with name, true_next and false_next")
                if c["name"] in nm:
                    self.fail(wc, f"a name distinct from the tables, {c['name']!r} repeated")
                nm[c["name"]] = ("cond", c)
            nodes.append(nm)
        names = [t.name for t in real]
        if len(set(names)) != len(names):
            self.fail("pipelines", "distinct table names across pipelines")

        memo: dict[tuple[int, str | None], dict[str | None, float]] = {}
        active: set[tuple[int, str | None]] = set()

        def dist(pi: int, node: str | None) -> dict[str | None, float]:
            """Where a PHV arriving at ``node`` goes first: real table or EXIT, with probability."""
            if node is None:
                if pi + 1 < len(pipes):
                    return dist(pi + 1, pipes[pi + 1].get("init_table"))
                return {EXIT: 1.0}
            key = (pi, node)
            if key in memo:
                return memo[key]
            if node not in nodes[pi]:
                self.fail(f"pipelines[{pi}]", f"a table or conditional named {node!r}")
            if key in active:
                self.fail(f"pipelines[{pi}]", f"an acyclic control flow, {node!r} is on a cycle")
            kind, obj = nodes[pi][node]
            if kind == "table" and obj["key"]:
                return {node: 1.0}
            active.add(key)
            if kind == "cond":
                branches = [obj["true_next"], obj["false_next"]]
            else:
                branches = self.branches(obj)
            out: dict[str | None, float] = defaultdict(float)
            for b in branches:
                for tgt, pr in dist(pi, b).items():
                    out[tgt] += pr / len(branches)
            active.discard(key)
            memo[key] = dict(out)
            return memo[key]

        edges: list[Edge] = []
        pipe_of = {n: pi for pi, nm in enumerate(nodes) for n, (k, t) in nm.items() if k == "table" and t["key"]}
        for t in real:
            pi = pipe_of[t.name]
            obj = nodes[pi][t.name][1]
            out: dict[str | None, float] = defaultdict(float)
            br = self.branches(obj)
            for b in br:
                for tgt, pr in dist(pi, b).items():
                    out[tgt] += pr / len(br)
            for tgt, pr in out.items():
                if tgt is not EXIT:
                    edges.append(Edge(t.name, tgt, pr))
        entry = {k: v for k, v in dist(0, pipes[0].get("init_table")).items() if k is not EXIT}
        program = self.doc.get("program", "")
        return Cfg(real, entry, edges, program if isinstance(program, str) else "")

    @staticmethod
    def branches(t: dict) -> list[str | None]:
        """The next nodes a table can go to, one per action (or hit/miss)."""
        nt = t["next_tables"]
        if nt:
            return list(nt.values())
        return [t.get("base_default_next")]


def read_bmv2(path: str | Path) -> Cfg:
    """Parse p4c's BMv2 JSON at ``path`` into tables and a folded CFG."""
    return _Reader(load_json(path), str(path)).read()

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
The shares are summed as exact fractions and rounded once, so a table's edges
never add up to more than 1 and no ``p`` exceeds 1 (floating-point sums of
many branches used to give 1.0000000000000002, which the CFG reader rejects).

:func:`read_program` reads, besides the CFG, what a control plane needs to
write entries (:class:`TableSpec`): each keyed table's key names as P4Runtime
and the tutorials' JSON files spell them (BMv2 ``key[].name``), its actions
(``actions[]``: ``name``, ``id``, ``runtime_data`` = parameters with their
``bitwidth``; a table lists its own by ``action_ids``, since p4c gives several
actions the same name), its default entry and whether that is const.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from fractions import Fraction
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
        full, smask = width, 0
        if isinstance(mask, str):  # a field slice: only the masked bits are matched
            try:
                smask = int(mask, 16)
            except ValueError:
                self.fail(where, f"a hex mask, found {mask!r}")
            width = bin(smask).count("1")
            run = smask >> max((smask & -smask).bit_length() - 1, 0)  # the mask shifted to bit 0
            if smask >> full or run & (run + 1):
                self.fail(where, f"a mask of contiguous bits within the field's {full}, found {mask}")
            if smask == (1 << full) - 1:
                smask = 0  # the whole field
        if kind not in ("exact", "lpm", "ternary", "range", "optional", "selector"):
            self.fail(where, f"a match_type among exact, lpm, ternary, range, optional; found {kind!r}")
        if width <= 0:
            self.fail(where, f"a fixed-width field, {hdr}.{fld} has none")
        return KeyField(f"{hdr}.{fld}", width, kind, smask, full if smask else 0)

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

        memo: dict[tuple[int, str | None], dict[str | None, Fraction]] = {}
        active: set[tuple[int, str | None]] = set()

        def dist(pi: int, node: str | None) -> dict[str | None, Fraction]:
            """Where a PHV arriving at ``node`` goes first: real table or EXIT, with probability."""
            if node is None:
                if pi + 1 < len(pipes):
                    return dist(pi + 1, pipes[pi + 1].get("init_table"))
                return {EXIT: Fraction(1)}
            key = (pi, node)
            if key in memo:
                return memo[key]
            if node not in nodes[pi]:
                self.fail(f"pipelines[{pi}]", f"a table or conditional named {node!r}")
            if key in active:
                self.fail(f"pipelines[{pi}]", f"an acyclic control flow, {node!r} is on a cycle")
            kind, obj = nodes[pi][node]
            if kind == "table" and obj["key"]:
                return {node: Fraction(1)}
            active.add(key)
            if kind == "cond":
                branches = [obj["true_next"], obj["false_next"]]
            else:
                branches = self.branches(obj)
            out: dict[str | None, Fraction] = defaultdict(Fraction)
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
            out: dict[str | None, Fraction] = defaultdict(Fraction)
            br = self.branches(obj)
            for b in br:
                for tgt, pr in dist(pi, b).items():
                    out[tgt] += pr / len(br)
            for tgt, pr in _probs(out).items():
                if tgt is not EXIT:
                    edges.append(Edge(t.name, tgt, pr))
        entry = {k: v for k, v in _probs(dist(0, pipes[0].get("init_table"))).items() if k is not EXIT}
        program = self.doc.get("program", "")
        return Cfg(real, entry, edges, program if isinstance(program, str) else "")

    @staticmethod
    def branches(t: dict) -> list[str | None]:
        """The next nodes a table can go to, one per action (or hit/miss)."""
        nt = t["next_tables"]
        if nt:
            return list(nt.values())
        return [t.get("base_default_next")]


def _probs(exact: dict[str | None, Fraction]) -> dict[str | None, float]:
    """Exact shares (summing to at most 1) as floats that also sum to at most 1:
    each is rounded once, then the largest gives back the few ulps of excess
    rounding may add up to."""
    out = {k: float(v) for k, v in exact.items()}
    while out and math.fsum(out.values()) > 1.0:
        k = max(out, key=lambda x: out[x])
        out[k] = math.nextafter(out[k], 0.0)
    return out


def read_bmv2(path: str | Path) -> Cfg:
    """Parse p4c's BMv2 JSON at ``path`` into tables and a folded CFG."""
    return _Reader(load_json(path), str(path)).read()


# --- Tables as the control plane sees them: key names, actions, defaults ---


@dataclass(frozen=True)
class ActionParam:
    """One parameter of an action (BMv2 ``runtime_data``): name and width in bits."""

    name: str
    width: int


@dataclass(frozen=True)
class ActionInfo:
    """An action a table can run: its BMv2 name and id and its parameters in order."""

    name: str
    id: int
    params: tuple[ActionParam, ...]


@dataclass(frozen=True)
class TableSpec:
    """A keyed table with what entries need: the key (``info.key``, in key
    order, with ``key_names`` the P4Runtime names of the same fields), the
    actions it allows, its default action and whether that default is const.
    ``kind`` is BMv2's ``type``: ``simple``, or ``indirect``/``indirect_ws``
    for tables behind an action profile/selector (their entries are read
    here as direct ones: the action is what matters for a match table)."""

    info: TableInfo
    key_names: tuple[str, ...]
    actions: tuple[ActionInfo, ...]
    default: tuple[str, dict[str, int]] | None
    default_const: bool
    kind: str = "simple"
    #: The action profile/selector an indirect table draws its actions from
    #: (tables can share one), else None.
    action_profile: str | None = None
    #: The program's own entries (P4_16 ``const entries``; BMv2 ``entries``,
    #: raw JSON): such a table takes no entries from the control plane.
    const_entries: tuple = ()

    @property
    def name(self) -> str:
        return self.info.name

    @cached_property
    def match_type(self) -> str:
        """BMv2's table match type: ``ternary`` if any field is ternary, range
        or optional (entries then need a priority), else ``lpm`` if a field is
        lpm, else ``exact``."""
        kinds = {k.match for k in self.info.key}
        if kinds & {"ternary", "range", "optional"}:
            return "ternary"
        return "lpm" if "lpm" in kinds else "exact"

    @cached_property
    def match_fields(self) -> tuple[tuple[KeyField, str], ...]:
        """The key fields an entry gives a value for (``selector`` fields are
        hashed, not matched), each with its P4Runtime name."""
        return tuple((kf, nm) for kf, nm in zip(self.info.key, self.key_names) if kf.match != "selector")

    @property
    def needs_priority(self) -> bool:
        return self.match_type == "ternary"

    def action(self, name: str) -> ActionInfo | None:
        """The table's action called ``name``, or by an unambiguous short name
        (``set_port`` for ``PreQosPipe.Acl.set_port``)."""
        return resolve_name(name, {a.name: a for a in self.actions})


@dataclass(frozen=True)
class ExternArray:
    """A program's register, counter or meter array as the control plane
    addresses it: ``size`` cells; a register's ``bitwidth``; a meter's
    ``rate_count`` and whether it meters ``packets`` (else bytes); for a
    direct counter or meter, the table it is ``binding`` (else None)."""

    name: str
    kind: str  # register | counter | meter
    size: int = 0
    bitwidth: int = 0
    rate_count: int = 0
    packets: bool = False
    binding: str | None = None


@dataclass(frozen=True)
class StatefulArray:
    """A counter or meter array of the program as the P4Info declares it (a view of
    :class:`ExternArray`): ``direct_table`` names the table a direct one is bound
    to; ``unit`` is "bytes" or "packets" for a meter, "both" for a counter
    (BMv2 counters always count both)."""

    name: str
    size: int
    direct_table: str | None
    unit: str


@dataclass
class P4Program:
    """A p4c BMv2 program: its CFG and its keyed tables (in CFG order); the
    stateful objects the control plane configures: ``externs`` (registers,
    counters, meters by name), ``profiles`` (action profile name -> whether it
    has a selector) and ``calculations`` (name -> hash algorithm)."""

    path: str
    cfg: Cfg
    tables: dict[str, TableSpec]
    externs: dict[str, ExternArray] = field(default_factory=dict)
    profiles: dict[str, bool] = field(default_factory=dict)
    calculations: dict[str, str] = field(default_factory=dict)

    @property
    def counters(self) -> tuple[StatefulArray, ...]:
        """The counter arrays, in the program's order."""
        return tuple(StatefulArray(x.name, x.size, x.binding, "both") for x in self.externs.values() if x.kind == "counter")

    @property
    def meters(self) -> tuple[StatefulArray, ...]:
        """The meter arrays, in the program's order."""
        return tuple(StatefulArray(x.name, x.size, x.binding, "packets" if x.packets else "bytes")
                     for x in self.externs.values() if x.kind == "meter")

    def table(self, name: str) -> TableSpec | None:
        """The table ``name`` (BMv2 full name, or a short name that is unambiguous)."""
        return resolve_name(name, self.tables)


def resolve_name(name: str, by_name: dict):
    """``by_name[name]``, else the single value whose name ends with ``.name``
    (p4runtime-shell's short names); None when absent or ambiguous."""
    if name in by_name:
        return by_name[name]
    hits = [v for k, v in by_name.items() if k.endswith("." + name)]
    return hits[0] if len(hits) == 1 else None


def _hex_int(x: object) -> int | None:
    if isinstance(x, int) and not isinstance(x, bool):
        return x
    if isinstance(x, str):
        try:
            return int(x, 16)
        except ValueError:
            return None
    return None


def _read_tables(r: _Reader, cfg: Cfg) -> dict[str, TableSpec]:
    actions: dict[int, ActionInfo] = {}
    raw_actions = r.doc.get("actions", [])
    if not isinstance(raw_actions, list):
        r.fail("actions", "a list of actions")
    for i, a in enumerate(raw_actions):
        w = f"actions[{i}]"
        if not isinstance(a, dict) or not isinstance(a.get("name"), str) or not isinstance(a.get("id"), int):
            r.fail(w, "an object with name and id")
        params = []
        for j, p in enumerate(a.get("runtime_data", [])):
            if not isinstance(p, dict) or not isinstance(p.get("name"), str) or not isinstance(p.get("bitwidth"), int):
                r.fail(f"{w}.runtime_data[{j}] ({a['name']})", "an object with name and bitwidth")
            params.append(ActionParam(p["name"], p["bitwidth"]))
        actions[a["id"]] = ActionInfo(a["name"], a["id"], tuple(params))
    info = {t.name: t for t in cfg.tables}
    out: dict[str, TableSpec] = {}
    for pi, p in enumerate(r.doc["pipelines"]):
        for ti, t in enumerate(p["tables"]):
            if t["name"] not in info:
                continue
            wt = f"pipelines[{pi}].tables[{ti}] ({t['name']})"
            ids = t.get("action_ids", [])
            if not isinstance(ids, list) or not all(isinstance(x, int) and x in actions for x in ids):
                r.fail(wt, "action_ids naming actions of the program")
            tacts = tuple(actions[x] for x in ids)
            default = None
            const = False
            de = t.get("default_entry")
            if isinstance(de, dict) and de.get("action_id") in actions:
                act = actions[de["action_id"]]
                data = de.get("action_data", [])
                vals = [_hex_int(x) for x in data] if isinstance(data, list) else [None]
                if len(vals) != len(act.params) or any(v is None for v in vals):
                    r.fail(f"{wt}.default_entry", f"action_data: {len(act.params)} hex values for {act.name}")
                default = (act.name, {pa.name: v for pa, v in zip(act.params, vals)})
                const = bool(de.get("action_const")) or bool(de.get("action_entry_const"))
            names = tuple(
                k.get("name") if isinstance(k.get("name"), str) else kf.field for k, kf in zip(t["key"], info[t["name"]].key)
            )
            kind = str(t.get("type", "simple"))
            prof = t.get("action_profile") if kind != "simple" and isinstance(t.get("action_profile"), str) else None
            ents = t.get("entries") or []
            if not isinstance(ents, list):
                r.fail(f"{wt}.entries", "a list of match-action entries")
            out[t["name"]] = TableSpec(info[t["name"]], names, tacts, default, const, kind, prof, tuple(ents))
    return {n: out[n] for n in info}


def read_program(path: str | Path) -> P4Program:
    """Read p4c's BMv2 JSON at ``path``: the CFG plus every keyed table's
    key names, actions (with parameter widths) and default entry."""
    r = _Reader(load_json(path), str(path))
    cfg = r.read()
    return P4Program(str(path), cfg, _read_tables(r, cfg), *_read_objects(r))


def _read_objects(r: _Reader) -> tuple[dict[str, ExternArray], dict[str, bool], dict[str, str]]:
    """Registers, counters and meters; action profiles; calculations."""
    doc = r.doc
    ext: dict[str, ExternArray] = {}

    def items(key: str) -> list:
        v = doc.get(key) or []
        if not isinstance(v, list) or not all(isinstance(x, dict) and isinstance(x.get("name"), str) for x in v):
            r.fail(key, "a list of objects with a name")
        return v

    def num(x: dict, key: str, where: str) -> int:
        v = x.get(key, 0)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            r.fail(f"{where} ({x['name']})", f"{key} an integer >= 0")
        return v

    for i, x in enumerate(items("register_arrays")):
        w = f"register_arrays[{i}]"
        ext[x["name"]] = ExternArray(x["name"], "register", num(x, "size", w), bitwidth=num(x, "bitwidth", w))
    for i, x in enumerate(items("counter_arrays")):
        w = f"counter_arrays[{i}]"
        bind = x.get("binding") if x.get("is_direct") else None
        ext[x["name"]] = ExternArray(x["name"], "counter", num(x, "size", w), binding=bind)
    for i, x in enumerate(items("meter_arrays")):
        w = f"meter_arrays[{i}]"
        if x.get("type", "bytes") not in ("bytes", "packets"):
            r.fail(f"{w} ({x['name']})", f"type bytes or packets, found {x.get('type')!r}")
        bind = x.get("binding") if x.get("is_direct") else None
        ext[x["name"]] = ExternArray(x["name"], "meter", num(x, "size", w), rate_count=num(x, "rate_count", w),
                                     packets=x.get("type") == "packets", binding=bind)
    profiles: dict[str, bool] = {}
    for pl in doc["pipelines"]:
        for x in pl.get("action_profiles", []) or []:
            if isinstance(x, dict) and isinstance(x.get("name"), str):
                profiles[x["name"]] = "selector" in x
    calcs = {x["name"]: str(x.get("algo", "")) for x in items("calculations")}
    return ext, profiles, calcs

"""Functional interpreter of a BMv2 program: packets -> the tables each visits,
its key there, the entry it matched and the action it ran.

This is the functional front end of ``synapse run --p4``: it decides *what*
happens to every packet (P4 semantics); the Rust simulator then replays the
resulting table visits to decide *when* (timing, PMUs, misses). Running the
packets one by one in Python is acceptable here because the JSON is compiled
once (:mod:`synapse_vmt.p4.exprs`, :mod:`synapse_vmt.p4.parser`) into
generated Python functions over a flat PHV list, and table lookups are
memoised per key: ~20k+ packets/s on UPF (``synapse p4 interp`` prints the
rate; see the README).

Per packet:

1. the program's parser (``parsers[0]``) extracts headers from the frame;
   ``standard_metadata.ingress_port`` is a constant (``ingress_port``), and
   ``packet_length`` the frame length;
2. each pipeline runs in order (ingress, then egress) from its
   ``init_table``: a table builds its key from the PHV (an invalid header's
   fields read 0, a ``$valid$``/``valid`` key reads the validity bit), finds
   the first matching entry of its :class:`TableEntries` (index 0 wins; a miss
   runs the default entry — the entries file's, else the program's), runs the
   action's primitives with the entry's action data, and goes on where the
   program says: ``next_tables[__HIT__/__MISS__]`` or
   ``next_tables[action]``, else ``base_default_next``; a conditional
   evaluates its expression on the PHV;
3. after ingress, a packet whose ``egress_spec`` is the drop port (511,
   ``mark_to_drop``) and has no multicast group is dropped: egress is not run.
   ``exit`` ends the current pipeline.

What cannot be computed is named, never fatal:

- ``synthesized_fields``: a key field written by an unsupported primitive or
  extern (meters, hashes, registers, random): when a table keys on it, its
  value is drawn per flow (a hash of the table's other key values and the
  seed) from that table's entries, written into the PHV, and counted by name;
- ``fallback_branches``: a conditional whose expression cannot be evaluated
  takes either branch with the CFG's probability (1/2) from an RNG seeded by
  ``seed``;
- ``parser_rejects``: per BMv2 error name (``PacketTooShort``, ``NoMatch``,
  ...); the packet still runs, as in simple_switch.

Output (:class:`Trace`) is columnar, for the simulator: per step (one visit
of a keyed table, in packet order then visit order) ``step_table`` (index into
``Trace.tables``, the keyed tables in :func:`~synapse_vmt.p4.bmv2.read_bmv2`
order), ``step_entry`` (index into that table's ``TableEntries.entries``, -1 on
a miss), ``step_action`` (index into ``Trace.actions``) and ``step_keys``
(the key as a tuple of field values in the table's key order;
:meth:`Trace.key_words` gives the u32 word layout of ``keys.py``: a field of w
bits is ceil(w/32) words, most significant first); ``pkt_start[i]`` is packet
i's first step. :meth:`Trace.counters` gives per-table ``lookups``,
``matched`` (an entry matched, in P4's sense) and ``actions`` per name.

Entries are duck-typed on the data model of ``entries.py`` (see
docs in notes/contracts): ``TableEntries(table, entries, default)``,
``Entry(matches: {field: Match}, action, params: {name: int}, source)``,
``Match(kind, value, mask, prefix_len, lo, hi)``; a match is looked up by the
key's field name (``ipv4.dst_addr``) or by the key's ``name`` in the JSON.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from synapse_vmt.errors import UserError
from synapse_vmt.p4.cfg import load_json
from synapse_vmt.p4.exprs import DROP_PORT, Codegen, Phv, Unsupported, sat_cast, tcm, usat_cast
from synapse_vmt.p4.parser import MAX_STATES, ParserCompiler, Reject, look

MEMO_LIMIT = 1 << 20  # cached lookups per table before the cache starts over


@dataclass(frozen=True)
class KeySpec:
    field: str  # "header.field" ("header.$valid$" for validity)
    width: int
    match: str  # exact | lpm | ternary | range | optional
    name: str  # the key's "name" in the JSON (P4Runtime match field name)


@dataclass(frozen=True)
class TableSpec:
    name: str
    pipeline: str
    key: tuple[KeySpec, ...]

    @property
    def words(self) -> int:
        return sum((k.width + 31) // 32 for k in self.key)


@dataclass(frozen=True)
class Step:
    table: str
    key: tuple[int, ...]
    entry: int  # -1: miss
    action: str


@dataclass
class Trace:
    """What the program did with each packet (see the module doc)."""

    tables: list[TableSpec]
    actions: list[str]
    n_packets: int
    pkt_start: np.ndarray  # int64, n_packets + 1
    step_table: np.ndarray  # int32
    step_entry: np.ndarray  # int32
    step_action: np.ndarray  # int32
    step_keys: list[tuple[int, ...]]
    dropped: np.ndarray  # bool per packet
    synthesized_fields: dict[str, int] = field(default_factory=dict)
    fallback_branches: dict[str, int] = field(default_factory=dict)
    parser_rejects: dict[str, int] = field(default_factory=dict)
    unsupported: list[str] = field(default_factory=list)  # constructs compiled as no-ops

    def packet(self, i: int) -> list[Step]:
        lo, hi = int(self.pkt_start[i]), int(self.pkt_start[i + 1])
        return [
            Step(self.tables[self.step_table[j]].name, self.step_keys[j], int(self.step_entry[j]),
                 self.actions[self.step_action[j]] if self.step_action[j] >= 0 else "")
            for j in range(lo, hi)
        ]

    def path(self, i: int) -> list[str]:
        return [s.table for s in self.packet(i)]

    def key_words(self, step: int) -> list[int]:
        return encode_words(self.tables[self.step_table[step]], self.step_keys[step])

    def table_keys(self, table: str | int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(packet index, key words [n x words] uint32, entry index) of every lookup of ``table``."""
        ti = table if isinstance(table, int) else [t.name for t in self.tables].index(table)
        sel = np.nonzero(self.step_table == ti)[0]
        pkt = np.searchsorted(self.pkt_start, sel, side="right") - 1
        spec = self.tables[ti]
        words = np.array([encode_words(spec, self.step_keys[j]) for j in sel], dtype=np.uint32).reshape(len(sel), spec.words)
        return pkt.astype(np.int64), words, self.step_entry[sel]

    @property
    def parser_reject_count(self) -> int:
        return sum(self.parser_rejects.values())

    def counters(self) -> dict[str, dict]:
        """Per keyed table: ``lookups``, ``matched`` and ``actions`` {name: count}."""
        out: dict[str, dict] = {}
        nt = len(self.tables)
        lookups = np.bincount(self.step_table, minlength=nt)
        matched = np.bincount(self.step_table[self.step_entry >= 0], minlength=nt)
        na = len(self.actions) + 1
        pair = self.step_table.astype(np.int64) * na + (self.step_action + 1)
        uniq, cnt = np.unique(pair, return_counts=True)
        acts: dict[int, dict[str, int]] = {}
        for u, c in zip(uniq.tolist(), cnt.tolist()):
            t, a = divmod(u, na)
            acts.setdefault(t, {})[self.actions[a - 1] if a else ""] = c
        for i, t in enumerate(self.tables):
            out[t.name] = {"lookups": int(lookups[i]), "matched": int(matched[i]), "actions": acts.get(i, {})}
        return out

    def summary(self) -> dict:
        return {
            "packets": self.n_packets,
            "dropped": int(self.dropped.sum()),
            "tables": self.counters(),
            "synthesized_fields": dict(sorted(self.synthesized_fields.items())),
            "fallback_branches": dict(sorted(self.fallback_branches.items())),
            "parser_rejects": dict(sorted(self.parser_rejects.items())),
            "unsupported": sorted(self.unsupported),
        }


def encode_words(spec: TableSpec, values: tuple[int, ...]) -> list[int]:
    """Key words per the keys contract: each field ceil(w/32) u32 words, MSW first."""
    out: list[int] = []
    for k, v in zip(spec.key, values):
        n = (k.width + 31) // 32
        out.extend((v >> (32 * (n - 1 - i))) & 0xFFFFFFFF for i in range(n))
    return out


# ---- entries -----------------------------------------------------------------

def _match_row(m: object, k: KeySpec, where: str) -> tuple[int, int, int]:
    """(lo, hi, mask) such that the entry matches iff lo <= key & mask <= hi."""
    full = (1 << k.width) - 1
    if m is None:  # a don't-care field (ternary/optional/lpm left out)
        if k.match in ("exact",):
            raise UserError(f"{where}: expected a value for exact key field {k.field}")
        return 0, 0, 0
    kind = getattr(m, "kind", k.match)
    value = getattr(m, "value", None)
    mask = getattr(m, "mask", None)
    if kind in ("exact", "valid") or (kind == "optional" and mask is None):
        v = int(value) & full
        return v, v, full
    if kind == "lpm":
        plen = getattr(m, "prefix_len", None)
        plen = k.width if plen is None else int(plen)
        pm = full ^ ((1 << (k.width - plen)) - 1) if plen else 0
        return int(value) & pm, int(value) & pm, pm
    if kind in ("ternary", "optional"):
        mm = full if mask is None else int(mask) & full
        return int(value) & mm, int(value) & mm, mm
    if kind == "range":
        return int(getattr(m, "lo")), int(getattr(m, "hi")), full
    raise UserError(f"{where}: expected a match kind among exact, lpm, ternary, range, optional; found {kind!r}")


class _Action:
    __slots__ = ("id", "name", "params", "widths", "fn")

    def __init__(self, aid: int, name: str, params: list[str], widths: list[int]):
        self.id, self.name, self.params, self.widths = aid, name, params, widths
        self.fn = None


class Program:
    """A BMv2 JSON program compiled for :meth:`run`."""

    def __init__(self, doc: dict, path: str = "<program>"):
        if not isinstance(doc, dict) or not isinstance(doc.get("pipelines"), list):
            raise UserError(f"{path}: top level: expected p4c BMv2 JSON with a list \"pipelines\"")
        self.doc, self.path = doc, path
        self.phv = Phv.from_doc(doc, path)
        cg = self.cg = Codegen(self.phv)
        self.pc = ParserCompiler(cg, doc, path)
        parser_src, self.init_state = self.pc.compile(doc)

        # actions: id -> compiled function (p, a, T) returning 1 on exit
        self.actions: dict[int, _Action] = {}
        src = [parser_src]
        for i, a in enumerate(doc.get("actions", [])):
            if not isinstance(a, dict) or not isinstance(a.get("id"), int) or not isinstance(a.get("name"), str):
                raise UserError(f"{path}: actions[{i}]: expected an object with id and name")
            rd = a.get("runtime_data", [])
            act = _Action(a["id"], a["name"], [r.get("name", f"p{j}") for j, r in enumerate(rd)], [int(r.get("bitwidth", 32)) for r in rd])
            self.actions[a["id"]] = act
            src.append(f"def _a{a['id']}(p, a, T):\n{cg.action(a['name'], a.get('primitives', []))}\n")
        self.action_names = [self.actions[k].name for k in sorted(self.actions)]
        self.action_index = {k: i for i, k in enumerate(sorted(self.actions))}

        # keys and conditionals as lambdas
        self.tables: list[TableSpec] = []
        self.table_json: dict[str, tuple[int, dict]] = {}  # name -> (pipeline, json)
        self.key_fns: dict[str, str] = {}
        self.key_slots: dict[str, tuple[int, ...]] = {}
        self.cond_fns: dict[str, str | None] = {}
        self.unsupported_conds: dict[str, str] = {}
        for pi, pl in enumerate(doc["pipelines"]):
            for t in pl.get("tables", []):
                self.table_json[t["name"]] = (pi, t)
                if t.get("key"):
                    spec, code, slots = self._key(t, pl.get("name", f"pipeline{pi}"))
                    self.tables.append(spec)
                    fname = f"_k{len(self.key_fns)}"
                    self.key_fns[t["name"]] = fname
                    self.key_slots[t["name"]] = slots
                    src.append(f"def {fname}(p):\n    return ({code},)\n")
            for c in pl.get("conditionals", []):
                try:
                    expr = cg.expr(c.get("expression"))
                    fname = f"_c{len(self.cond_fns)}"
                    src.append(f"def {fname}(p, a=()):\n    return {expr}\n")
                    self.cond_fns[c["name"]] = fname
                except Unsupported as e:
                    self.cond_fns[c["name"]] = None
                    self.unsupported_conds[c["name"]] = str(e)
        self.ns: dict[str, object] = {
            "Reject": Reject, "_tcm": tcm, "_sat": sat_cast, "_usat": usat_cast,
            "_look": functools.partial(look, too_short=self.pc.errors["PacketTooShort"]),
            "U": {}, **cg.consts,
        }
        try:
            exec(compile("\n".join(src), f"<p4 {Path(path).name}>", "exec"), self.ns)
        except (SyntaxError, RecursionError) as e:  # pragma: no cover - a codegen bug, not user input
            raise RuntimeError(f"{path}: generated code does not compile: {e}") from e
        for act in self.actions.values():
            act.fn = self.ns[f"_a{act.id}"]
        sm = self.phv.slot
        self.s_ingress_port = sm.get(("standard_metadata", "ingress_port"))
        self.s_len = sm.get(("standard_metadata", "packet_length"))
        self.s_perr = sm.get(("standard_metadata", "parser_error"))
        self.s_espec = sm.get(("standard_metadata", "egress_spec"))
        self.s_eport = sm.get(("standard_metadata", "egress_port"))
        self.s_mcast = sm.get(("standard_metadata", "mcast_grp"))

    @classmethod
    def load(cls, path: str | Path) -> "Program":
        return cls(load_json(path), str(path))

    def _key(self, t: dict, pname: str) -> tuple[TableSpec, str, tuple[int, ...]]:
        specs, parts, slots = [], [], []
        for j, k in enumerate(t["key"]):
            where = f"{self.path}: table {t['name']} key[{j}]"
            kind, target = k.get("match_type"), k.get("target")
            if kind == "valid":
                h = self.phv.header(target)
                specs.append(KeySpec(f"{target}.$valid$", 1, "exact", k.get("name") or f"{target}.$valid$"))
                parts.append(f"p[{h.valid}]")
                slots.append(h.valid)
                continue
            if kind not in ("exact", "lpm", "ternary", "range", "optional", "selector"):
                raise UserError(f"{where}: expected a match_type among exact, lpm, ternary, range, optional; found {kind!r}")
            s = self.phv.field_slot(target)
            w = self.phv.widths[s]
            mask = k.get("mask")
            code = f"p[{s}]"
            if isinstance(mask, str):  # a slice: the masked bits, shifted down (as bmv2.py's width)
                m = int(mask, 16)
                tz = (m & -m).bit_length() - 1 if m else 0
                w = bin(m).count("1")
                code = f"((p[{s}] & {m}) >> {tz})"
            if w <= 0:
                raise UserError(f"{where}: expected a fixed-width field, {target} has none")
            specs.append(KeySpec(f"{target[0]}.{target[1]}", w, "exact" if kind == "selector" else kind, k.get("name") or f"{target[0]}.{target[1]}"))
            parts.append(code)
            slots.append(s)
        return TableSpec(t["name"], pname, tuple(specs)), ", ".join(parts), tuple(slots)

    # ---- binding entries ------------------------------------------------
    def _resolve_action(self, t: dict, name: str, where: str) -> _Action:
        ids = t.get("action_ids", [])
        cands = [self.actions[i] for i in ids if i in self.actions and self.actions[i].name == name]
        if not cands:
            cands = [self.actions[i] for i in ids if i in self.actions and self.actions[i].name.split(".")[-1] == name.split(".")[-1]]
        if len(cands) != 1:
            names = ", ".join(self.actions[i].name for i in ids if i in self.actions)
            raise UserError(f"{where}: expected an action of table {t['name']} ({names}), found {name!r}")
        return cands[0]

    def _adata(self, act: _Action, params: Mapping[str, int] | list | tuple | None, where: str) -> tuple[int, ...]:
        if params is None:
            params = {}
        if isinstance(params, (list, tuple)):
            vals = [int(v, 16) if isinstance(v, str) else int(v) for v in params]
        else:
            vals = []
            for p in act.params:
                if p not in params:
                    raise UserError(f"{where}: expected parameter {p!r} of action {act.name}")
                vals.append(int(params[p]))
        if len(vals) != len(act.params):
            raise UserError(f"{where}: expected {len(act.params)} parameters for action {act.name}, found {len(vals)}")
        return tuple(v & ((1 << w) - 1) for v, w in zip(vals, act.widths))

    def _next(self, t: dict, act: _Action | None, hit: bool) -> str | None:
        nt = t.get("next_tables", {}) or {}
        if "__HIT__" in nt or "__MISS__" in nt:
            key = "__HIT__" if hit else "__MISS__"
            return nt[key] if key in nt else t.get("base_default_next")
        if act is not None and act.name in nt:
            return nt[act.name]
        return t.get("base_default_next")

    def _default(self, t: dict, te: object) -> tuple[_Action | None, tuple[int, ...]]:
        d = getattr(te, "default", None) if te is not None else None
        if d is not None:
            name, params = d
            act = self._resolve_action(t, name, f"{getattr(te, 'table', t['name'])}: default action")
            return act, self._adata(act, params, f"{t['name']}: default action")
        de = t.get("default_entry")
        if isinstance(de, dict) and de.get("action_id") in self.actions:
            act = self.actions[de["action_id"]]
            return act, self._adata(act, de.get("action_data", []), f"{self.path}: table {t['name']} default_entry")
        return None, ()

    def run(self, packets: Iterable[bytes], entries: Mapping[str, object] | None = None, *,
            seed: int = 0, ingress_port: int = 0) -> Trace:
        """Interpret ``packets`` (raw frames) with ``entries`` (table name -> TableEntries)."""
        entries = dict(entries or {})
        known = set(self.table_json)
        for name in entries:
            if name not in known:
                raise UserError(f"entries: expected a table of {self.path}, found {name!r}")
        rng = random.Random(seed)
        ai = self.action_index
        steps_t: list[int] = []
        steps_e: list[int] = []
        steps_a: list[int] = []
        steps_k: list[tuple[int, ...]] = []
        synth: dict[str, int] = {}
        fallback: dict[str, int] = {}
        ns = self.ns

        pipes: list[tuple[str | None, dict]] = []
        tid = {t.name: i for i, t in enumerate(self.tables)}
        for pi, pl in enumerate(self.doc["pipelines"]):
            nodes: dict[str, object] = {}
            for t in pl.get("tables", []):
                nodes[t["name"]] = self._table_node(t, entries.get(t["name"]), tid, ai, steps_t, steps_e, steps_a, steps_k, synth, seed)
            for c in pl.get("conditionals", []):
                nodes[c["name"]] = self._cond_node(c, rng, fallback)
            pipes.append((pl.get("init_table"), nodes))
        for pi, (init, nodes) in enumerate(pipes):
            for nm, (pj, t) in self.table_json.items():
                if pj != pi:
                    continue
                for tgt in list((t.get("next_tables") or {}).values()) + [t.get("base_default_next")]:
                    if tgt is not None and tgt not in nodes:
                        raise UserError(f"{self.path}: table {nm}: expected a next node in its pipeline, found {tgt!r}")
            if init is not None and init not in nodes:
                raise UserError(f"{self.path}: pipelines[{pi}]: expected init_table among its nodes, found {init!r}")

        tmpl = self.phv.template()
        PS, init_state = ns["_PS"], self.init_state
        perr_names = self.pc.error_names
        rejects: dict[str, int] = {}
        s_port, s_len, s_perr = self.s_ingress_port, self.s_len, self.s_perr
        s_espec, s_eport, s_mcast = self.s_espec, self.s_eport, self.s_mcast
        timeout = self.pc.errors["ParserTimeout"]
        pkt_start: list[int] = []
        dropped: list[bool] = []
        n_pkts = 0
        for buf in packets:
            n_pkts += 1
            pkt_start.append(len(steps_t))
            p = tmpl[:]
            T: set[int] = set()
            if s_port is not None:
                p[s_port] = ingress_port
            if s_len is not None:
                p[s_len] = len(buf)
            st, pos, guard = init_state, 0, 0
            try:
                while st >= 0:
                    st, pos = PS[st](p, buf, pos, T)
                    guard += 1
                    if guard > MAX_STATES:
                        raise Reject(timeout)
            except Reject as r:
                code = r.args[0]
                nm = perr_names.get(code, f"error {code}")
                rejects[nm] = rejects.get(nm, 0) + 1
                if s_perr is not None:
                    p[s_perr] = code
            drop = False
            for pi, (node, nodes) in enumerate(pipes):
                while node is not None:
                    node = nodes[node](p, T)
                if pi == 0 and s_espec is not None:
                    if p[s_espec] == DROP_PORT and (s_mcast is None or p[s_mcast] == 0):
                        drop = True
                        break
                    if s_eport is not None:
                        p[s_eport] = p[s_espec]
            if not drop and s_espec is not None and len(pipes) > 1 and p[s_espec] == DROP_PORT:
                drop = True  # mark_to_drop in egress
            dropped.append(drop)
        pkt_start.append(len(steps_t))
        unsupported = sorted(self.cg.unsupported) + [f"parser state {s}" for s in self.pc.unsupported_states] + [
            f"conditional {c}: {e}" for c, e in self.unsupported_conds.items()]
        return Trace(
            tables=list(self.tables),
            actions=list(self.action_names),
            n_packets=n_pkts,
            pkt_start=np.array(pkt_start, dtype=np.int64),
            step_table=np.array(steps_t, dtype=np.int32),
            step_entry=np.array(steps_e, dtype=np.int32),
            step_action=np.array(steps_a, dtype=np.int32),
            step_keys=steps_k,
            dropped=np.array(dropped, dtype=bool),
            synthesized_fields=synth,
            fallback_branches=fallback,
            parser_rejects=rejects,
            unsupported=unsupported,
        )

    def _cond_node(self, c: dict, rng: random.Random, fallback: dict[str, int]):
        tn, fn = c.get("true_next"), c.get("false_next")
        fname = self.cond_fns.get(c["name"])
        if fname is None:
            name = c["name"]
            frag = (c.get("source_info") or {}).get("source_fragment")
            label = f"{name} ({frag})" if frag else name

            def node(p, T, _r=rng.random):
                fallback[label] = fallback.get(label, 0) + 1
                return tn if _r() < 0.5 else fn
            return node
        f = self.ns[fname]

        def node(p, T):
            return tn if f(p) else fn
        return node

    def _table_node(self, t: dict, te: object, tid: dict, ai: dict, steps_t: list, steps_e: list, steps_a: list,
                    steps_k: list, synth: dict, seed: int):
        default_act, default_data = self._default(t, te)
        miss_next = self._next(t, default_act, False)
        if not t.get("key"):
            # keyless: p4c's tbl_* for actions outside tables; only the default runs
            fn = default_act.fn if default_act else None

            def keyless(p, T, fn=fn, a=default_data, nxt=miss_next):
                if fn is not None and fn(p, a, T):
                    return None
                return nxt
            return keyless
        ti = tid[t["name"]]
        spec = self.tables[ti]
        keyf = self.ns[self.key_fns[t["name"]]]
        kslots = frozenset(self.key_slots[t["name"]])
        slot_list = self.key_slots[t["name"]]
        rows: list[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = []
        results: list[tuple] = []  # per entry: (index, action fn, adata, next, action index)
        exact_only = all(k.match == "exact" for k in spec.key)
        for ei, e in enumerate(getattr(te, "entries", []) if te is not None else []):
            where = getattr(e, "source", None) or f"{t['name']}#entry {ei}"
            ms = getattr(e, "matches", {}) or {}
            row = [_match_row(ms.get(k.field, ms.get(k.name)), k, where) for k in spec.key]
            rows.append((tuple(r[0] for r in row), tuple(r[1] for r in row), tuple(r[2] for r in row)))
            act = self._resolve_action(t, e.action, where)
            results.append((ei, act.fn, self._adata(act, getattr(e, "params", None), where), self._next(t, act, True), ai[act.id]))
        miss = (-1, default_act.fn if default_act else None, default_data, miss_next, ai[default_act.id] if default_act else -1)
        if exact_only:
            exact: dict[tuple[int, ...], tuple] = {}
            for r, res in zip(rows, results):
                exact.setdefault(r[0], res)  # first entry wins on a duplicate key

            def lookup(k):
                return exact.get(k, miss)
        else:
            memo: dict[tuple[int, ...], tuple] = {}

            def lookup(k):
                r = memo.get(k)
                if r is None:
                    r = miss
                    for (lo, hi, m), res in zip(rows, results):
                        for x, l, h, mm in zip(k, lo, hi, m):
                            if not (l <= (x & mm) <= h):
                                break
                        else:
                            r = res
                            break
                    if len(memo) >= MEMO_LIMIT:
                        memo.clear()
                    memo[k] = r
                return r

        fnames = [k.field for k in spec.key]

        def draw(p, T, k):
            """Key fields the run could not compute: drawn per flow from the entries."""
            ks = list(k)
            known = tuple(v for s, v in zip(slot_list, k) if s not in T)
            for i, s in enumerate(slot_list):
                if s in T:
                    if rows:
                        pick = rows[hash((seed, ti, i, known)) % len(rows)]
                        ks[i] = pick[0][i]
                        p[s] = ks[i]  # later tables see the same value
                    T.discard(s)
                    synth[fnames[i]] = synth.get(fnames[i], 0) + 1
            return tuple(ks)

        at, ae, aa, ak = steps_t.append, steps_e.append, steps_a.append, steps_k.append

        def node(p, T):
            k = keyf(p)
            if T and not kslots.isdisjoint(T):
                k = draw(p, T, k)
            idx, fn, a, nxt, aidx = lookup(k)
            at(ti)
            ae(idx)
            aa(aidx)
            ak(k)
            if fn is not None and fn(p, a, T):
                return None
            return nxt
        return node

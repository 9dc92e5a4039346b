"""Functional interpreter of a BMv2 program: packets -> the tables each visits,
its key there, the entry it matched and the action it ran.

This is the functional front end of ``synapse run --p4``: it decides *what*
happens to every packet (P4 semantics); the Rust simulator then replays the
resulting table visits to decide *when* (timing, PMUs, misses). Running the
packets one by one in Python is acceptable here because the JSON is compiled
once (:mod:`synapse_vmt.p4.exprs`, :mod:`synapse_vmt.p4.parser`) into
generated Python functions over a flat PHV list, and table lookups are
memoised per key; a node reached from one place is inlined into its
predecessor; and a frame already seen is not run again (its steps are
copied, unless the program's state or random numbers can change it; see
:meth:`Program.run`). CPU time on one core, externs and the switch's packet
flow included: UPF ~26k distinct frames/s, the 123-table switch program
~11k; repeated frames (generated traffic, where a flow's frames are
identical) ~320k (UPF) per second; the switch calls ``random()``, so its
repeated frames are run again (~12k/s). ``synapse p4 interp`` prints the rate.

Per packet, as BMv2 simple_switch runs it (:mod:`synapse_vmt.p4.switch`
has the packet flow: clones, resubmit, recirculation, multicast, the egress
pass, drops):

1. the program's parser (``parsers[0]``) extracts headers from the frame;
   ``standard_metadata.ingress_port`` is a constant (``ingress_port``), and
   ``packet_length`` the frame length; the checksums marked ``verify`` set
   ``checksum_error``;
2. each pipeline runs from its ``init_table``: a table builds its key from
   the PHV (a field of an invalid header is keyed as 0, a
   ``$valid$``/``valid`` key reads the validity bit; conditionals and
   actions read a removed header's last values, as BMv2), finds the first
   matching entry of its :class:`TableEntries` (index 0 wins; a miss runs
   the default entry — the entries file's, else the program's; an entry or
   default pointing at an action selector's group runs the member the
   selector's hash picks), counts a direct counter and runs a direct meter
   on a hit, runs the action's primitives with the entry's action data, and
   goes on where the program says: ``next_tables[__HIT__/__MISS__]`` or
   ``next_tables[action]``, else ``base_default_next``; a conditional
   evaluates its expression on the PHV; ``exit`` ends the current pipeline;
3. externs run (:mod:`synapse_vmt.p4.exprs`): registers, counters, meters
   (rates from the entries file; GREEN without), ``hash`` with BMv2's
   algorithms (:mod:`synapse_vmt.p4.hashes`), ``random`` from the run's
   seeded generator, clones, resubmit, recirculate, digests.

What cannot be computed is named, never fatal:

- ``synthesized_fields``: a key field written by an extern the interpreter
  does not know (or copied from one): when a table keys on it, its value is
  drawn per flow (a hash of the table's other key values and the seed) from
  that table's entries, written into the PHV, and counted by name;
- ``fallback_branches``: a conditional whose expression cannot be evaluated
  (an unsupported operator, or an operand holding a synthesized value) takes
  either branch with the CFG's probability (1/2) from an RNG seeded by
  ``seed``;
- ``parser_rejects``: per BMv2 error name (``PacketTooShort``, ``NoMatch``,
  ...); the packet still runs, as in simple_switch;
- ``unsupported``: primitives and constructs run as no-ops, by name.

Output (:class:`Trace`) is columnar, for the simulator: per step (one visit
of a keyed table, in packet order then visit order) ``step_table`` (index into
``Trace.tables``, the keyed tables in :func:`~synapse_vmt.p4.bmv2.read_bmv2`
order), ``step_entry`` (index into that table's ``TableEntries.entries``, -1 on
a miss), ``step_action`` (index into ``Trace.actions``) and ``step_keys``
(the key as a tuple of field values in the table's key order;
:meth:`Trace.key_words` gives the u32 word layout of ``keys.py``: a field of w
bits is ceil(w/32) words, most significant first); ``pkt_start[i]`` is packet
i's first step (a packet's steps include those of every copy it made:
clones, replicas, resubmitted and recirculated passes, in the order they
ran). :meth:`Trace.counters` gives per-table ``lookups``, ``matched`` (an
entry matched, in P4's sense) and ``actions`` per name; ``Trace.externs``
what the externs did (:class:`~synapse_vmt.p4.switch.Counts`) and
``Trace.registers`` the registers' final cells.

Entries are :class:`~synapse_vmt.p4.entries.TableEntries` (read only through
their attributes, so any object of that shape works): ``entries`` in match
order, each with ``matches`` {field: Match(kind, value, mask, prefix_len, lo,
hi)}, ``action``, ``params`` {name: int}, ``source``; and ``default``
(action, params). A match is looked up by the key's field name
(``ipv4.dst_addr``) or by the key's ``name`` in the JSON.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from synapse_vmt.errors import UserError
from synapse_vmt.p4.cfg import load_json
from synapse_vmt.p4.externs import SwitchConfig, SwitchOptions, choose_member
from synapse_vmt.p4.learn import Context, Learner, add_on_miss
from synapse_vmt.p4.exprs import _SLOT_RE, Codegen, Objects, Phv, Unsupported, located, sat_cast, source_of, tcm, usat_cast
from synapse_vmt.p4.hashes import pack_bits
from synapse_vmt.p4.parser import MAX_STATES, ParserCompiler, Reject, look
from synapse_vmt.p4.switch import Compiled, Counts, Flow

# what a malformed program makes the compiler trip on: reported as one line naming the place
_MALFORMED = (KeyError, TypeError, AttributeError, ValueError, IndexError, OverflowError)
_RUNTIME = _MALFORMED + (NameError, ZeroDivisionError)
MEMO_LIMIT = 1 << 20  # cached lookups per table before the cache starts over
FRAME_CACHE = 1 << 16  # distinct frames remembered by Program.run


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
    step_keys: Sequence[tuple[int, ...]]  # a list, or a lazy StepKeys from the Rust executor
    dropped: np.ndarray  # bool per packet
    # per packet: its parser error code (0: none) and the pipeline it was dropped in (-1: not dropped)
    parser_error: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint32))
    drop_pipeline: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    synthesized_fields: dict[str, int] = field(default_factory=dict)
    fallback_branches: dict[str, int] = field(default_factory=dict)
    parser_rejects: dict[str, int] = field(default_factory=dict)
    unsupported: list[str] = field(default_factory=list)  # constructs compiled as no-ops
    #: what the externs did (drops by reason, output ports, copies, counters, digests, meter colours)
    externs: Counts = field(default_factory=Counts)
    #: the register arrays' cells at the end of the run
    registers: dict[str, list[int]] = field(default_factory=dict)
    packet_errors: list[str] = field(default_factory=list)  # per packet: its parser error's name, "" for none
    packet_guessed: list[bool] = field(default_factory=list)  # per packet: it took a fallback branch or drew a field
    # the Rust executor's own key words (steps + 1 offsets into a flat uint32
    # array): read as they are instead of encoding ``step_keys`` again
    exec_key_start: np.ndarray | None = None
    exec_key_words: np.ndarray | None = None

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
        return pkt.astype(np.int64), self.key_rows(ti, sel), self.step_entry[sel]

    def key_rows(self, ti: int, sel: np.ndarray) -> np.ndarray:
        """The key words [len(sel) x words] uint32 of steps ``sel``, all of table ``ti``."""
        spec = self.tables[ti]
        if self.exec_key_words is not None:
            return self.exec_key_words[self.exec_key_start[sel].astype(np.int64)[:, None] + np.arange(spec.words)].astype(np.uint32, copy=False)
        return encode_key_rows(spec, [self.step_keys[j] for j in sel.tolist()])

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
            **self.extern_summary(),
        }

    def extern_summary(self) -> dict:
        """Drops by reason, packets out per port, copies by kind, counters
        (indirect per index, direct per table entry: packets and bytes),
        digests per learn list, meter colours and the registers' non-zero cells."""
        x = self.externs
        digests: dict[str, int] = {}
        for name, _ in x.digests:
            digests[name] = digests.get(name, 0) + 1
        return {
            "drops": dict(sorted(x.drops.items())),
            "out_ports": {str(k): v for k, v in sorted(x.out_ports.items())},
            "copies": dict(sorted(x.copies.items())),
            "counters": {n: {str(i): {"packets": c[0], "bytes": c[1]} for i, c in sorted(cs.items())}
                         for n, cs in sorted(x.counters.items())},
            "direct_counters": {n: {str(i): {"packets": c[0], "bytes": c[1]} for i, c in sorted(cs.items())}
                                for n, cs in sorted(x.direct.items())},
            "digests": dict(sorted(digests.items())),
            "meter_colors": {n: dict(zip(("green", "yellow", "red"), c)) for n, c in sorted(x.meter_colors.items()) if any(c)},
            "registers": {n: {str(i): v for i, v in enumerate(cells) if v} for n, cells in sorted(self.registers.items())
                          if any(cells)},
        }


def encode_words(spec: TableSpec, values: tuple[int, ...]) -> list[int]:
    """Key words per the keys contract: each field ceil(w/32) u32 words, MSW first."""
    out: list[int] = []
    for k, v in zip(spec.key, values):
        n = (k.width + 31) // 32
        out.extend((v >> (32 * (n - 1 - i))) & 0xFFFFFFFF for i in range(n))
    return out


def encode_key_rows(spec: TableSpec, keys: Sequence[tuple[int, ...]]) -> np.ndarray:
    """:func:`encode_words` of every key, as rows of a uint32 array: a field
    column at a time."""
    out = np.zeros((len(keys), spec.words), dtype=np.uint32)
    col = 0
    for i, k in enumerate(spec.key):
        n = (k.width + 31) // 32
        vals = [kk[i] for kk in keys]
        try:
            v = np.array(vals, dtype=np.uint64) if n <= 2 else None
        except OverflowError:  # a value past 64 bits: word by word below
            v = None
        for w in range(n):
            sh = 32 * (n - 1 - w)
            if v is not None:
                out[:, col + w] = (v >> np.uint64(sh)) & np.uint64(0xFFFFFFFF)
            else:
                out[:, col + w] = [(x >> sh) & 0xFFFFFFFF for x in vals]
        col += n
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


match_row = _match_row  # public name (simrun uses it to build the oracle's rules)

VECTOR_ROWS = 64  # tables with more entries than this are matched with numpy, a row per entry


def first_match(spec: TableSpec, rows: list[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]],
                results: list, miss: object):
    """k -> the result of the first row (lo, hi, mask per field) that ``k`` matches, else ``miss``.

    Small tables are scanned in Python; larger ones compare the key's u32
    words against every entry at once (per word ``lo <= key & mask <= hi``,
    exact for exact/lpm/ternary/optional on any width and for ranges on fields
    of at most 32 bits, the keys contract)."""
    wide_range = any(k.match == "range" and k.width > 32 for k in spec.key)
    if len(rows) <= VECTOR_ROWS or wide_range:
        def scan(k):
            for (lo, hi, m), res in zip(rows, results):
                for x, l, h, mm in zip(k, lo, hi, m):
                    if not (l <= (x & mm) <= h):
                        break
                else:
                    return res
            return miss
        return scan
    lo_w = np.array([encode_words(spec, r[0]) for r in rows], dtype=np.uint32)
    hi_w = np.array([encode_words(spec, r[1]) for r in rows], dtype=np.uint32)
    m_w = np.array([encode_words(spec, r[2]) for r in rows], dtype=np.uint32)

    narrow = all(k.width <= 32 for k in spec.key)  # the key tuple is already its words

    def vector(k):
        kw = np.array(k if narrow else encode_words(spec, k), dtype=np.uint32) & m_w
        ok = ((kw >= lo_w) & (kw <= hi_w)).all(axis=1)
        i = int(ok.argmax())
        return results[i] if ok[i] else miss
    return vector


_GROUP = object()  # marks a lookup result that is an action selector's group (its members follow)


class _Action:
    __slots__ = ("id", "name", "params", "widths", "fn", "body")

    def __init__(self, aid: int, name: str, params: list[str], widths: list[int]):
        self.id, self.name, self.params, self.widths = aid, name, params, widths
        self.fn = None
        self.body = "    pass"


class Program:
    """A BMv2 JSON program compiled for :meth:`run`."""

    def __init__(self, doc: dict, path: str = "<program>"):
        if not isinstance(doc, dict) or not isinstance(doc.get("pipelines"), list):
            raise UserError(f"{path}: top level: expected p4c BMv2 JSON with a list \"pipelines\"")
        self.doc, self.path = doc, path
        self._where = "header_types and headers"
        try:
            self.phv = Phv.from_doc(doc, path)
            self.objects = Objects.from_doc(doc)
            self._compile_code(None)
            if self.cg.synth_slots:  # again, carrying the synthesized mark through assignments
                self._compile_code(self.cg.tainted_closure())
            self._where = "calculations, checksums, field lists and action profiles"
            self.compiled = Compiled(self)
            self.cksum_fns = [(n, t, v, k, ver, upd, eval(compile(f"lambda p: {cond}", "<checksum>", "eval"), self.ns))
                              for n, t, v, k, ver, upd, cond in self.compiled.checksums]
        except _MALFORMED as e:
            raise self._malformed(e) from None

    def _malformed(self, e: Exception) -> UserError:
        what = f"{type(e).__name__}: {e}".replace("\n", " ")
        return UserError(f"{self.path}: {self._where}: expected well-formed p4c BMv2 JSON ({what})")

    def _compile_code(self, maybe_synth: set[int] | None) -> None:
        doc, path = self.doc, self.path
        cg = self.cg = Codegen(self.phv, maybe_synth, self.objects)
        self._where = "parsers"
        self.pc = ParserCompiler(cg, doc, path)
        parser_src, self.init_state = self.pc.compile(doc)

        # actions: id -> compiled function (p, a, T) returning 1 on exit
        self.actions: dict[int, _Action] = {}
        src = [parser_src]
        for i, a in enumerate(doc.get("actions", [])):
            self._where = f"actions[{i}]"
            if not isinstance(a, dict) or type(a.get("id")) is not int or a["id"] < 0 or not isinstance(a.get("name"), str):
                raise UserError(f"{path}: actions[{i}]: expected an object with an id (an integer >= 0) and a name")
            self._where = f"actions[{i}] ({a['name']})"
            rd = a.get("runtime_data", [])
            widths = [r.get("bitwidth", 32) for r in rd]
            if not all(type(w) is int and w > 0 for w in widths):
                raise UserError(f"{path}: {self._where}: expected runtime_data bitwidths as integers > 0")
            act = _Action(a["id"], a["name"], [str(r.get("name", f"p{j}")) for j, r in enumerate(rd)], widths)
            cg.n_params = len(rd)
            self.actions[a["id"]] = act
            act.body = cg.action(a["name"], a.get("primitives", []))
            src.append(f"def _a{a['id']}(p, a, T):\n{act.body}\n")
        self.action_names = [self.actions[k].name for k in sorted(self.actions)]
        self.action_index = {k: i for i, k in enumerate(sorted(self.actions))}

        # keys and conditionals as lambdas
        self.tables: list[TableSpec] = []
        self.table_json: dict[str, tuple[int, dict]] = {}  # name -> (pipeline, json)
        self.key_code: dict[str, str] = {}
        self.key_slots: dict[str, tuple[int, ...]] = {}
        self.cond_expr: dict[str, str | None] = {}
        self.unsupported_conds: dict[str, str] = {}
        cg.n_params = 0
        for pi, pl in enumerate(doc["pipelines"]):
            for ti, t in enumerate(pl.get("tables", [])):
                self._where = f"pipelines[{pi}].tables[{ti}]"
                if not isinstance(t.get("name"), str):
                    raise UserError(f"{path}: {self._where}: expected an object with a name")
                self.table_json[t["name"]] = (pi, t)
                if t.get("key"):
                    spec, code, slots = self._key(t, pl.get("name", f"pipeline{pi}"))
                    self.tables.append(spec)
                    self.key_code[t["name"]] = code
                    self.key_slots[t["name"]] = slots
            for ci, c in enumerate(pl.get("conditionals", [])):
                self._where = f"pipelines[{pi}].conditionals[{ci}]"
                if not isinstance(c.get("name"), str):
                    raise UserError(f"{path}: {self._where}: expected an object with a name")
                try:
                    self.cond_expr[c["name"]] = cg.expr(c.get("expression"))
                except UserError as e:
                    raise located(e, path, f"{self._where} ({c['name']}{source_of(c)})") from None
                except Unsupported as e:
                    self.cond_expr[c["name"]] = None
                    self.unsupported_conds[c["name"]] = str(e)
        self.ns: dict[str, object] = {
            "Reject": Reject, "_tcm": tcm, "_sat": sat_cast, "_usat": usat_cast,
            "_look": functools.partial(look, too_short=self.pc.errors["PacketTooShort"]),
            "U": {}, **cg.consts,
        }
        try:
            exec(compile("\n".join(src), f"<p4 {Path(path).name}>", "exec"), self.ns)
        except (SyntaxError, RecursionError) as e:  # a construct the code generator did not expect
            raise UserError(f"{path}: expected p4c BMv2 JSON the interpreter can compile ({type(e).__name__}: {e})") from None
        for act in self.actions.values():
            # an action without primitives is not called at all
            act.fn = None if act.body.strip() == "pass" else self.ns[f"_a{act.id}"]
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
            h = self.phv.headers[target[0]]
            if not h.metadata and target[1] != "$valid$":
                code = f"({code} if p[{h.valid}] else 0)"  # a field of an invalid header is keyed as 0
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

    def _member(self, t: dict, ei: int, action: str, params, pi: int, nid, w: str, where: str, hit: bool = True) -> tuple:
        """A group member as a lookup result (entry, fn, data, next node, action index)."""
        act = self._resolve_action(t, action, where)
        return (ei, act.fn, self._adata(act, params, where), nid(pi, self._next(t, act, hit), w), self.action_index[act.id])

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

    def run(self, packets: Iterable, entries: Mapping[str, object] | None = None, *,
            seed: int = 0, ingress_port: int = 0, frame_cache: int = FRAME_CACHE,
            table_cache: dict | None = None, options: SwitchOptions | None = None) -> Trace:
        """Interpret ``packets`` with ``entries`` (table name -> TableEntries;
        a :class:`~synapse_vmt.p4.entries.Entries` also brings its
        ``switch`` configuration: mirroring sessions, multicast groups, meter
        rates, register values). A packet is a frame (arriving at time 0) or a
        ``(time_ps, frame)`` pair: picoseconds since the run's start, the
        clock of the meters and timestamps. ``options``: simple_switch's
        options (default: the entries' ``switch.options``, else its defaults).

        A frame seen before (the same bytes) is not run again when nothing
        but the frame decides its fate (no register written by the program,
        no random number, no configured meter, no timestamp read, no
        fallback branch taken): its steps and effects are copied. ``frame_cache``
        bounds how many distinct frames are remembered (0: none).

        ``table_cache`` (a dict the caller keeps across runs): a table whose
        entries are the *same object* as in an earlier run with this cache
        reuses that run's bound rows and results instead of binding them
        again (``serve --sim`` re-runs a few frames after every write, with
        the untouched tables' entries unchanged). The caller must not mutate
        an entries object it passed."""
        config = getattr(entries, "switch", None) or SwitchConfig()
        options = options or config.options
        entries = dict(entries or {})
        for name in entries:
            if name not in self.table_json:
                raise UserError(f"entries: expected a table of {self.path}, found {name!r}")
        steps: list[tuple] = []
        synth: dict[str, int] = {}
        fallback: dict[str, int] = {}
        nd = [0]  # bumped by every fallback branch (random; a frame that took one is not cached)
        drawn: list[str] = []  # synthesized fields of the current frame (deterministic per frame: cached)
        rng = random.Random(seed)
        try:
            flow = Flow(self.compiled, self.cg.obj, config, options, seed, rng)
        except (KeyError, ValueError) as e:
            raise UserError(f"{self.path}: entries' switch configuration: {e}") from None
        self.ns.update(flow.bindings(self.cg.obj, self.doc))
        try:
            inits, N = self._bind(entries, seed, rng, steps, synth, fallback, nd, drawn, table_cache, flow)
        except _MALFORMED as e:
            raise self._malformed(e) from None

        tmpl = self.phv.template()
        PS, init_state = self.ns["_PS"], self.init_state
        perr_names = self.pc.error_names
        c = self.compiled
        s_perr, s_cerr = c.s_perr, c.s_cerr
        timeout = self.pc.errors["ParserTimeout"]
        checks = self.cksum_fns
        verify = c.verify  # (a program that never reads checksum_error needs no verification)
        hashes = flow.hash_fns
        effect = flow.effect

        def parse(p: list, buf: bytes, count: bool = True) -> int:
            st, pos, guard = init_state, 0, 0
            T: set[int] = set()
            try:
                while st >= 0:
                    st, pos = PS[st](p, buf, pos, T)
                    guard += 1
                    if guard > MAX_STATES:
                        raise Reject(timeout)
            except Reject as r:
                code = r.args[0]
                if count:
                    nm = perr_names.get(code, f"error {code}")
                    effect(("reject", nm))
                    if first_err[0] is None:
                        first_err[0], first_err[1] = nm, code
                if s_perr is not None:
                    p[s_perr] = code
            flow.ctx[1] = pos
            if verify:
                bad = False
                for _, tgt, valid, k, ver, _, cond in checks:
                    if ver and p[valid] and cond(p) and hashes[k](p) != p[tgt]:
                        bad = True
                p[s_cerr] = int(bad)
            return pos

        def pipe(pi: int, p: list) -> None:
            n = inits[pi] if pi < len(inits) else -1
            T: set[int] = set()
            while n >= 0:
                n = N[n](p, T)

        def deparse(p: list, buf: bytes, pos: int) -> bytes:
            for _, tgt, valid, k, _, update, cond in checks:
                if update and cond(p):
                    p[tgt] = hashes[k](p) & ((1 << self.phv.widths[tgt]) - 1)
            parts = [pack_bits([(p[s], w) for _, w, s in h.fields]) for h in c.deparse_order if p[h.valid]]
            return b"".join(parts) + bytes(buf[pos:])

        # a frame's fate depends on nothing but its bytes: remember it
        learners = [lr for _, lr in self._learners]
        cacheable = frame_cache and not (self.cg.obj.uses_rng or self.cg.obj.writes_registers or flow.stateful or learners)
        pkt_start: list[int] = []
        dropped: list[bool] = []
        perr: list[int] = []
        dpipe: list[int] = []
        perrs: list[str] = []
        guessed: list[bool] = []
        cache: dict[bytes, tuple] = {}
        extend = steps.extend
        t0: int | None = None
        first_err: list = [None, 0]  # the received frame's parser error, name and code (its first parse)
        try:
            for item in packets:
                if isinstance(item, tuple):
                    t_ps, buf = item
                    t0 = t_ps if t0 is None else t0
                    now_us = (int(t_ps) - t0) // 1_000_000
                else:
                    buf, now_us = item, 0
                if not isinstance(buf, bytes):
                    buf = bytes(buf)
                for lr in learners:
                    lr.age(now_us)
                start = len(steps)
                pkt_start.append(start)
                if cacheable:
                    hit = cache.get(buf)
                    if hit is not None:
                        extend(hit[0])
                        dropped.append(hit[1])
                        perrs.append(hit[4])
                        perr.append(hit[5])
                        dpipe.append(hit[6])
                        guessed.append(bool(hit[3]))
                        for e in hit[2]:
                            effect(e)
                        for f in hit[3]:
                            synth[f] += 1
                        continue
                    nd0 = nd[0]
                    if drawn:
                        drawn.clear()
                    flow.effects = []
                first_err[0], first_err[1] = None, 0
                g0, d0 = nd[0], len(drawn)
                flow.drop_pipe = None
                outs = flow.process(buf, ingress_port, now_us, tmpl, parse, pipe, deparse)
                dropped.append(outs == 0)
                perr.append(first_err[1])
                dpipe.append(flow.drop_pipe if outs == 0 and flow.drop_pipe is not None else -1)
                perrs.append(first_err[0] or "")
                guessed.append(nd[0] != g0 or len(drawn) != d0)
                if cacheable:
                    if nd[0] == nd0:
                        if len(cache) >= frame_cache:
                            cache.clear()
                        cache[buf] = (steps[start:], outs == 0, flow.effects, tuple(drawn), perrs[-1], perr[-1], dpipe[-1])
                    flow.effects = None
        except _RUNTIME as e:  # a construct of the program the interpreter cannot run on this frame
            what = f"{type(e).__name__}: {e}".replace("\n", " ")
            raise UserError(f"{self.path}: packet {len(dropped) + 1}: expected a program the interpreter can run on it ({what})") from None
        pkt_start.append(len(steps))
        unsupported = sorted(self.cg.unsupported) + [f"parser state {s}" for s in self.pc.unsupported_states] + [
            f"conditional {c}: {e}" for c, e in self.unsupported_conds.items()]
        return Trace(
            tables=list(self.tables),
            actions=list(self.action_names),
            n_packets=len(dropped),
            pkt_start=np.array(pkt_start, dtype=np.int64),
            step_table=np.fromiter((s[0] for s in steps), dtype=np.int32, count=len(steps)),
            step_entry=np.fromiter((s[1][0] for s in steps), dtype=np.int32, count=len(steps)),
            step_action=np.fromiter((s[1][4] for s in steps), dtype=np.int32, count=len(steps)),
            step_keys=[s[2] for s in steps],
            dropped=np.array(dropped, dtype=bool),
            parser_error=np.array(perr, dtype=np.uint32),
            drop_pipeline=np.array(dpipe, dtype=np.int8),
            synthesized_fields=synth,
            fallback_branches=fallback,
            parser_rejects=flow.counts.rejects,
            unsupported=unsupported,
            externs=flow.counts,
            registers={n: list(v) for n, v in flow.registers.items()},
            packet_errors=perrs,
            packet_guessed=guessed,
        )

    def learn_stats(self) -> dict[str, dict]:
        """Per add-on-miss table of the last run (:mod:`synapse_vmt.p4.learn`): adds, adds
        refused as the table was full, expiries, timer restarts, hits on learned entries, entries held."""
        return {name: lr.stats() for name, lr in getattr(self, "_learners", [])}

    def _bind(self, entries: dict, seed: int, rng: random.Random, steps: list, synth: dict, fallback: dict, nd: list,
              drawn: list, table_cache: dict | None = None, flow: Flow | None = None):
        """Generate the control flow with the entries bound: node(p, T) -> the
        next node's index, -1 at the end of the pipeline. A node reached from
        one place only is inlined into its predecessor (a chain of keyless
        tables and conditionals becomes straight-line code), so a packet makes
        a few calls per pipeline instead of one per node."""
        ids: dict[tuple[int, str], int] = {}
        for pi, pl in enumerate(self.doc["pipelines"]):
            for obj in list(pl.get("tables", [])) + list(pl.get("conditionals", [])):
                ids[(pi, obj["name"])] = len(ids)

        def nid(pi: int, name: str | None, where: str) -> int:
            if name is None:
                return -1
            if (pi, name) not in ids:
                raise UserError(f"{self.path}: {where}: expected a table or conditional of its pipeline, found {name!r}")
            return ids[(pi, name)]

        self._learners: list[tuple[str, Learner]] = []
        self.ns["_LC"] = Context()  # the actions' globals: a fresh context per run
        ns: dict[str, object] = dict(self.ns)
        ns["_S"] = steps.append
        ns["_R"] = rng.random
        tid = {t.name: i for i, t in enumerate(self.tables)}
        inits = []
        # per node: head lines, then the tail: ("go", next) | ("dyn", {nexts}) | ("if", expr, tn, fn)
        heads: dict[int, list[str]] = {}
        tails: dict[int, tuple] = {}
        for pi, pl in enumerate(self.doc["pipelines"]):
            inits.append(nid(pi, pl.get("init_table"), f"pipelines[{pi}].init_table"))
            for ti, t in enumerate(pl.get("tables", [])):
                self._where = f"pipelines[{pi}].tables[{ti}] ({t['name']})"
                n = ids[(pi, t["name"])]
                heads[n], tails[n] = self._table_src(n, pi, t, entries.get(t["name"]), tid, nid, ns, synth, seed, drawn,
                                                     table_cache, flow)
            for ci, c in enumerate(pl.get("conditionals", [])):
                self._where = f"pipelines[{pi}].conditionals[{ci}] ({c['name']})"
                n = ids[(pi, c["name"])]
                w = f"conditional {c['name']}"
                tn, fn = nid(pi, c.get("true_next"), w), nid(pi, c.get("false_next"), w)
                expr = self.cond_expr.get(c["name"])
                frag = (c.get("source_info") or {}).get("source_fragment")
                label = f"{c['name']} ({frag})" if frag else c["name"]

                def count(label=label):
                    fallback[label] = fallback.get(label, 0) + 1
                    nd[0] += 1
                ns[f"_FB{n}"] = count
                if expr is None:
                    heads[n], tails[n] = [f"_FB{n}()"], ("if", "_R() < 0.5", tn, fn)
                    continue
                synth_reads = frozenset(int(x) for x in _SLOT_RE.findall(expr)) & (self.cg.maybe_synth or set())
                if synth_reads:
                    # a synthesized operand: the value is not the program's, take the CFG's branch share
                    ns[f"_CS{n}"] = synth_reads
                    expr = f"((_FB{n}() or _R() < 0.5) if T and not _CS{n}.isdisjoint(T) else {expr})"
                heads[n], tails[n] = [], ("if", expr, tn, fn)
        preds: dict[int, int] = {}
        for n in inits:
            preds[n] = preds.get(n, 0) + 2  # an entry point is always its own function
        for n, tl in tails.items():
            succ = {tl[1]} if tl[0] == "go" else set(tl[1]) if tl[0] == "dyn" else {tl[2], tl[3]}
            for m in succ:
                preds[m] = preds.get(m, 0) + 1

        need: list[int] = [n for n in inits if n >= 0]
        done: set[int] = set()

        def cont(m: int, depth: int) -> list[str]:
            if m < 0:
                return ["return -1"]
            if preds.get(m, 0) == 1 and depth < 30:
                return emit(m, depth)
            need.append(m)
            return [f"return {m}"]

        def emit(n: int, depth: int) -> list[str]:
            lines = list(heads[n])
            tl = tails[n]
            if tl[0] == "go":
                lines += cont(tl[1], depth)
            elif tl[0] == "dyn":
                for m in tl[1]:
                    if m >= 0:
                        need.append(m)
                lines.append("return r[3]")
            else:
                lines.append(f"if {tl[1]}:")
                lines += ["    " + ln for ln in cont(tl[2], depth + 1)]
                lines.append("else:")
                lines += ["    " + ln for ln in cont(tl[3], depth + 1)]
            return lines

        src: list[str] = []
        while need:
            n = need.pop()
            if n in done:
                continue
            done.add(n)
            src.append(f"def _n{n}(p, T):\n" + "\n".join("    " + ln for ln in emit(n, 0)) + "\n")
        src.append("_N = (" + "".join(f"_n{i}, " if i in done else "None, " for i in range(len(ids))) + ")")
        text = "\n".join(src)
        # The node source depends on the program and on which actions the
        # entries use, rarely on the entries themselves: compile it once.
        codes = self.__dict__.setdefault("_node_code", {})
        code = codes.get(text)
        if code is None:
            if len(codes) >= 64:
                codes.clear()
            code = codes[text] = compile(text, f"<p4 {Path(self.path).name} nodes>", "exec")
        exec(code, ns)
        return inits, ns["_N"]

    def _table_src(self, n: int, pi: int, t: dict, te: object, tid: dict, nid, ns: dict, synth: dict, seed: int,
                   drawn: list, table_cache: dict | None = None, flow: Flow | None = None) -> tuple[list[str], tuple]:
        name = t["name"]
        w = f"table {name}"
        default_act, default_data = self._default(t, te)
        miss_next = nid(pi, self._next(t, default_act, False), w)
        ai = self.action_index
        if not t.get("key"):
            # keyless: p4c's tbl_* for actions outside tables; only the default runs, inlined
            ns[f"_D{n}"] = default_data
            body = default_act.body.split("\n") if default_act and default_act.fn is not None else []
            head = [f"a = _D{n}"] + ["return -1" if ln == "    return 1" else ln[4:] for ln in body]
            return head, ("go", miss_next)
        ti = tid[name]
        spec = self.tables[ti]
        slot_list = self.key_slots[name]
        hit = table_cache.get((pi, name)) if table_cache is not None else None
        if hit is not None and hit[0] is te:
            # the same entries object as a run before: its binding holds (the cache keeps te alive)
            _, rows, results = hit
            te_entries: list = []
        else:
            rows = []
            results = []
            te_entries = getattr(te, "entries", []) if te is not None else []
        for ei, e in enumerate(te_entries):
            where = getattr(e, "source", None) or f"{name}#entry {ei}"
            ms = getattr(e, "matches", {}) or {}
            row = [_match_row(ms.get(k.field, ms.get(k.name)), k, where) for k in spec.key]
            rows.append((tuple(r[0] for r in row), tuple(r[1] for r in row), tuple(r[2] for r in row)))
            group = getattr(e, "group", None)
            if group:
                # an action selector's group: the member is picked per packet (_SEL below)
                members = tuple(self._member(t, ei, a, ps, pi, nid, w, where) for a, ps in group)
                results.append((ei, _GROUP, members, members[0][3], members[0][4]))
                continue
            act = self._resolve_action(t, e.action, where)
            results.append((ei, act.fn, self._adata(act, getattr(e, "params", None), where), nid(pi, self._next(t, act, True), w), ai[act.id]))
        if table_cache is not None:
            table_cache[(pi, name)] = (te, rows, results)
        miss = (-1, default_act.fn if default_act else None, default_data, miss_next, ai[default_act.id] if default_act else -1)
        dgroup = getattr(te, "default_group", None) if te is not None else None
        if dgroup:
            members = tuple(self._member(t, -1, a, ps, pi, nid, w, f"{name}: default group", hit=False) for a, ps in dgroup)
            miss = (-1, _GROUP, members, members[0][3], members[0][4])
        ns[f"_MISS{n}"] = miss
        aom = add_on_miss(t, self.path)
        if aom is not None:
            # PNA add-on-miss (synapse_vmt.p4.learn): fixed entries, then learned ones, then the miss
            acts = {a.name: (a.fn, ai[a.id], a.widths, nid(pi, self._next(t, a, True), w)) for a in self.actions.values()}
            lr = Learner(aom[0], aom[1], len(rows), acts)
            self._learners.append((name, lr))
            ns[f"_LRN{n}"] = lr
        if all(k.match == "exact" for k in spec.key):
            exact: dict[tuple[int, ...], tuple] = {}
            for r, res in zip(rows, results):
                exact.setdefault(r[0], res)  # the first entry wins on a duplicate key
            ns[f"_LK{n}"] = exact.get
            look = f"_LK{n}(k, _MISS{n})" if aom is None else f"_LK{n}(k) or _LRN{n}.lookup(k) or _MISS{n}"
        else:
            memo: dict[tuple[int, ...], tuple] = {}
            first = first_match(spec, rows, results, miss)

            def scan(k, memo=memo, first=first):
                r = first(k)
                if len(memo) >= MEMO_LIMIT:
                    memo.clear()
                memo[k] = r
                return r
            ns[f"_MEMO{n}"] = memo.get
            ns[f"_SCAN{n}"] = scan
            look = f"_MEMO{n}(k) or _SCAN{n}(k)"
        fnames = [k.field for k in spec.key]

        def draw(p, T, k):
            """Key fields the run could not compute: drawn per flow from the entries."""
            ks = list(k)
            known = tuple(v for s, v in zip(slot_list, k) if s not in T)
            for i, s in enumerate(slot_list):
                if s in T:
                    if rows:
                        ks[i] = rows[hash((seed, ti, i, known)) % len(rows)][0][i]
                        p[s] = ks[i]  # later tables see the same value
                    T.discard(s)
                    synth[fnames[i]] = synth.get(fnames[i], 0) + 1
                    drawn.append(fnames[i])
            return tuple(ks)
        ns[f"_DRAW{n}"] = draw
        ns[f"_KS{n}"] = frozenset(slot_list)
        head = [
            f"k = ({self.key_code[name]},)",
            f"if T and not _KS{n}.isdisjoint(T): k = _DRAW{n}(p, T, k)",
            f"r = {look}",
        ]
        prof = t.get("action_profile")
        if any(res[1] is _GROUP for res in results) or miss[1] is _GROUP:
            sel = flow.selector_fns.get(prof) if flow is not None else None
            if sel is None:
                raise UserError(f"{self.path}: table {name}: entries point at groups, expected an action profile with a selector")
            ns[f"_SEL{n}"] = sel
            ns["_GROUP"], ns["_CHOOSE"] = _GROUP, choose_member
            head.append(f"if r[1] is _GROUP: r = _CHOOSE(r[2], _SEL{n}(p))")
        head.append(f"_S(({ti}, r, k))")
        if flow is not None and t.get("with_counters"):
            # a direct counter counts every hit, with the packet's ingress length (BMv2)
            ns[f"_DC{n}"], ns["_CTX"] = flow.effect, flow.ctx
            head.append(f"if r[0] >= 0: _DC{n}(('dc', {name!r}, r[0], _CTX[2]))")
        dm = t.get("direct_meters")
        if flow is not None and isinstance(dm, str):
            mj = next((m for m in self.doc.get("meter_arrays", []) or [] if m.get("name") == dm), None)
            if mj is None or not isinstance(mj.get("result_target"), list):
                raise UserError(f"{self.path}: table {name}: expected direct meter {dm!r} among meter_arrays, with a result_target")
            # entry (match order) -> its handle, the index meter_set_rates names
            ents = getattr(te, "entries", []) if te is not None else []
            hmap = tuple(h if h is not None else i for i, h in enumerate(getattr(e, "handle", None) for e in ents))
            ns[f"_DM{n}"], ns[f"_DH{n}"] = flow.direct_meter(dm, mj.get("type") == "packets"), hmap
            tgt = self.phv.field_slot(mj["result_target"])
            head.append(f"if r[0] >= 0: p[{tgt}] = _DM{n}(_DH{n}[r[0]]) & {(1 << self.phv.widths[tgt]) - 1}")
        if aom is not None:
            # the action's context for add_entry / restart_expire_timer, cleared after it
            head += [
                f"_LC.learner = _LRN{n}; _LC.key = k; _LC.hit = r[0] >= 0",
                "f = r[1]",
                "x = f is not None and f(p, r[2], T)",
                "_LC.learner = None",
                "if x: return -1",
            ]
        else:
            head += [
                "f = r[1]",
                "if f is not None and f(p, r[2], T): return -1",
            ]
        nexts = {res[3] for res in results} | {miss_next}
        for res in results + [miss]:
            if res[1] is _GROUP:
                nexts |= {m[3] for m in res[2]}
        return head, (("go", nexts.pop()) if len(nexts) == 1 else ("dyn", nexts))

"""Compile a p4c BMv2 program and its entries, once, into the description
the Rust executor (``crates/synapse-core/src/program/``) runs per packet.

The reading and validation are the interpreter's (:mod:`synapse_vmt.p4.interp`,
:mod:`~synapse_vmt.p4.exprs`, :mod:`~synapse_vmt.p4.parser`,
:mod:`~synapse_vmt.p4.entries`): the same PHV slots, keys, action
resolution, default entries and next-table rules, so the executor and the
interpreter (its test oracle) cannot disagree on what the JSON says. What
this module adds is the lowering: BMv2's expression objects become small
trees of arrays with the PHV slots resolved, primitives become a handful of
ops, and the entries are bound to each table as (lo, hi, mask) per key field.

The description is JSON (``serde`` on the Rust side), chosen over a packed
binary because it is read once per run, stays readable when a program
misbehaves (``synapse p4 compile -o``), and its size (a few MB for a
100k-entry table) costs milliseconds next to the run. Integers wider than
JSON's safe range (values, masks, action data, constants) are hex strings.

Format, version 1 (``"format": "synapse-p4-program"``)::

    fields    [[name, width, header]]   PHV slots in the interpreter's order (width 0: varbit)
    headers   [{name, valid, fields, metadata, union, max_bits}]
    stacks    [{name, headers, next}]   unions [{name, headers}]
    errors    {code: name} and the codes of the core parser errors
    std       standard_metadata slots (ingress_port, packet_length, ...)
    parser    {init, states: [{name, ops, key, transitions, default, reject}]}
    actions   [{name, id, params: [width], ops}]      sorted by id; the action index
    nodes     [{table ...} | {cond ...}]               every pipeline's tables, then conditionals
    pipelines [{name, init}]   deparser [header]   checksums [...]   keyed [node]

Expressions are arrays: ``["f", slot]`` a field, ``["c", "0x1f"]`` a
constant (``"-0x1"`` negative), ``["b", 0|1]``, ``["p", i]`` action data,
``["la", bit_offset, width]`` parser lookahead, ``["sf", stack, field]`` a
field of a stack's last extracted element, ``["vu", union]``,
``["lsi"|"ssi", stack]``, then ``[op, a]`` / ``[op, a, b]`` for BMv2's
operators and ``["?:", cond, a, b]``. Action and parser ops are arrays too
(``["set", slot, expr]``, ``["hdr_copy", dst, src]``, ``["valid", h, 0|1]``,
``["drop"]``, ``["exit"]``, ``["push", stack, n, front]``, ``["pop", stack, n]``,
``["extern", name, args]``, ``["synth", slot, why]``, ``["unsupported", why]``,
``["jump", i]``, ``["jz", expr, i]``; parser: ``["extract", h]``,
``["extract_stack", stack]``, ``["extract_vl", h, bits]``, ``["verify", cond, err]``,
``["advance", bits]``, ``["prim", op]``). Externs are passed through by
name with their arguments: the executor's extern dispatch decides what runs.

A construct that cannot be lowered follows the interpreter: an assignment
from an expression it cannot evaluate is ``synth`` (the field is
synthesized), a conditional is ``null`` (a fallback branch), a parser
state that cannot run rejects under ``Unsupported:<state>``; each is named
in ``unsupported``. Malformed JSON is a one-line :class:`UserError`
naming the place (action and primitive, parser state, table).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from synapse_vmt.errors import UserError
from synapse_vmt.p4.exprs import MAX_SHIFT, Unsupported, _hex
from synapse_vmt.p4.learn import add_on_miss
from synapse_vmt.p4.interp import _MALFORMED, Program, _match_row

FORMAT = "synapse-p4-program"
VERSION = 1

_ARITH = {"add": "+", "subtract": "-", "bit_and": "&", "bit_or": "|", "bit_xor": "^", "shift_left": "<<",
          "shift_right": ">>"}
_BINARY = {"+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "==", "!=", "<", "<=", ">", ">=", "and", "or"}


def _hx(v: int) -> str:
    return hex(v) if v >= 0 else "-" + hex(-v)


class _Lower:
    """Lowers one program's expressions and primitives (see the module doc)."""

    def __init__(self, prog: Program):
        self.prog = prog
        self.phv = prog.phv
        self.doc = prog.doc
        self.path = prog.path
        self.header_index = {name: i for i, name in enumerate(self.phv.headers)}
        self.stack_index = {name: i for i, name in enumerate(self.phv.stacks)}
        self.unions: dict[str, list[str]] = {}
        by_id = {h.get("id"): h.get("name") for h in self.doc.get("headers", []) if isinstance(h, dict)}
        for i, u in enumerate(self.doc.get("header_unions", []) or []):
            if not isinstance(u, dict) or not isinstance(u.get("name"), str):
                raise UserError(f"{self.path}: header_unions[{i}]: expected an object with a name and header_ids")
            try:
                self.unions[u["name"]] = [by_id[j] for j in u.get("header_ids", [])]
            except (KeyError, TypeError):
                raise UserError(f"{self.path}: header_unions[{i}] ({u['name']}): expected header_ids of known headers") from None
        self.union_index = {name: i for i, name in enumerate(self.unions)}
        self.n_params: int | None = None
        self.unsupported: set[str] = set()

    # ---- expressions -------------------------------------------------
    def header(self, name: object) -> int:
        return self.header_index[self.phv.header(name).name]

    def stack(self, name: object) -> int:
        if name not in self.stack_index:
            raise UserError(f"{self.path}: expected a known header stack, found {name!r}")
        return self.stack_index[name]  # type: ignore[index]

    def stack_field(self, v: object) -> list:
        stack, fname = v  # type: ignore[misc]
        s = self.stack(stack)
        elems = self.phv.stacks[stack]
        if not elems:
            raise UserError(f"{self.path}: expected a non-empty header stack, found {stack!r}")
        names = [f for f, _, _ in self.phv.header(elems[0]).fields]
        if fname not in names:
            raise UserError(f"{self.path}: expected a field of header stack {stack}, found {fname!r}")
        return ["sf", s, names.index(fname)]

    def expr(self, e: object, parser: bool = False) -> list:
        """The tree of BMv2 expression ``e`` (raises Unsupported as exprs.Codegen.expr does)."""
        if not isinstance(e, dict):
            raise Unsupported(f"expression {e!r}")
        t, v = e.get("type"), e.get("value")
        if t == "field":
            return ["f", self.phv.field_slot(v)]
        if t == "hexstr":
            return ["c", _hx(_hex(v))]
        if t == "bool":
            return ["b", 1 if v else 0]
        if t in ("runtime_data", "local"):
            if type(v) is not int or v < 0 or (self.n_params is not None and v >= self.n_params):
                raise UserError(f"{self.path}: expected action data 0..{(self.n_params or 0) - 1}, found {t} {v!r}")
            return ["p", v]
        if t == "lookahead":
            if not parser:
                raise Unsupported("lookahead outside the parser")
            return ["la", int(v[0]), int(v[1])]
        if t == "stack_field":
            return self.stack_field(v)
        if t == "expression":
            if isinstance(v, dict) and "op" in v:
                return self.op(v, parser)
            return self.expr(v, parser)
        raise Unsupported(f"operand type {t!r}")

    def op(self, node: dict, parser: bool) -> list:
        op, left, right = node.get("op"), node.get("left"), node.get("right")

        def sub(x: object) -> list:
            return self.expr(x, parser)

        if op in _BINARY:
            a, b = sub(left), sub(right)
            if op in ("<<", ">>") and b[0] == "c" and int(b[1], 16) > MAX_SHIFT:
                raise UserError(f"{self.path}: expected a shift by at most {MAX_SHIFT} bits, found {int(b[1], 16)}")
            return [op, a, b]
        if op in ("~", "not", "d2b", "b2d"):
            return [op, sub(right)]
        if op == "valid":
            if isinstance(right, dict) and right.get("type") == "header":
                return ["d2b", ["f", self.phv.header(right.get("value")).valid]]
            raise Unsupported("valid() of a non-header")
        if op == "valid_union":
            if isinstance(right, dict) and right.get("type") == "header_union" and right.get("value") in self.unions:
                return ["vu", self.union_index[right["value"]]]
            raise Unsupported(f"operator {op!r}")
        if op == "?:":
            return ["?:", sub(node.get("cond")), sub(left), sub(right)]
        if op in ("two_comp_mod", "sat_cast", "usat_cast"):
            return [{"two_comp_mod": "tcm", "sat_cast": "sat", "usat_cast": "usat"}[op], sub(left), sub(right)]
        if op in ("last_stack_index", "size_stack_index"):
            if isinstance(right, dict) and right.get("type") == "header_stack" and right.get("value") in self.phv.stacks:
                return ["lsi" if op == "last_stack_index" else "ssi", self.stack(right["value"])]
        raise Unsupported(f"operator {op!r}")

    # ---- primitives --------------------------------------------------
    def assign(self, slot: int, src: object, parser: bool, what: str) -> list:
        try:
            return ["set", slot, self.expr(src, parser)]
        except Unsupported as e:
            self.unsupported.add(f"{what} ({e})")
            return ["synth", slot, f"{what} ({e})"]

    def arg(self, x: object, parser: bool) -> list:
        """An extern's argument: fields, constants, headers and expressions
        resolved; any other named object (counter_array, calculation, ...) by name."""
        if not isinstance(x, dict):
            raise UserError(f"{self.path}: expected primitive parameters as objects")
        t, v = x.get("type"), x.get("value")
        if t == "field":
            return ["f", self.phv.field_slot(v)]
        if t == "header":
            return ["h", self.header(v)]
        if t in ("hexstr", "bool", "runtime_data", "local", "expression", "stack_field", "lookahead"):
            try:
                return ["e", self.expr(x, parser)]
            except Unsupported as e:
                return ["n", str(t), f"unsupported: {e}"]
        return ["n", str(t), v if isinstance(v, (str, int)) else json.dumps(v)]

    def primitive(self, prim: dict, parser: bool = False) -> list[list]:
        """The ops of one primitive (exprs.Codegen.primitive's semantics)."""
        op, params = prim.get("op"), prim.get("parameters", [])
        phv = self.phv
        if op in _ARITH and len(params) == 3 and params[0].get("type") == "field":
            slot = phv.field_slot(params[0]["value"])
            try:
                return [["set", slot, [_ARITH[op], self.expr(params[1], parser), self.expr(params[2], parser)]]]
            except Unsupported as e:
                self.unsupported.add(f"{op} ({e})")
                return [["unsupported", f"{op} ({e})"]]
        if op in ("add_to_field", "subtract_from_field") and params[0].get("type") == "field":
            slot = phv.field_slot(params[0]["value"])
            try:
                return [["set", slot, ["+" if op == "add_to_field" else "-", ["f", slot], self.expr(params[1], parser)]]]
            except Unsupported as e:
                self.unsupported.add(f"{op} ({e})")
                return [["unsupported", f"{op} ({e})"]]
        if op == "modify_field" and len(params) == 3 and params[0].get("type") == "field":
            slot = phv.field_slot(params[0]["value"])
            try:
                m = self.expr(params[2], parser)
                v = self.expr(params[1], parser)
            except Unsupported as e:
                self.unsupported.add(f"{op} ({e})")
                return [["unsupported", f"{op} ({e})"]]
            return [["set", slot, ["|", ["&", ["f", slot], ["~", m]], ["&", v, m]]]]
        if op in ("copy_header", "assign_header"):
            return [["hdr_copy", self.header(params[0]["value"]), self.header(params[1]["value"])]]
        if op in ("assign", "modify_field"):
            dst, src = params[0], params[1]
            if dst.get("type") == "header":
                if src.get("type") != "header":
                    self.unsupported.add(f"{op} (assign to a header from a non-header)")
                    return [["unsupported", f"{op} (assign to a header from a non-header)"]]
                return [["hdr_copy", self.header(dst["value"]), self.header(src["value"])]]
            if dst.get("type") == "field":
                return [self.assign(phv.field_slot(dst["value"]), src, parser, op)]
            self.unsupported.add(f"{op} (assign to {dst.get('type')})")
            return [["unsupported", f"{op} (assign to {dst.get('type')})"]]
        if op in ("add_header", "setValid"):
            return [["valid", self.header(params[0]["value"]), 1]]
        if op in ("remove_header", "setInvalid"):
            return [["valid", self.header(params[0]["value"]), 0]]
        if op in ("mark_to_drop", "drop"):
            return [["drop"]]
        if op == "exit":
            return [["exit"]]
        if op in ("push", "push_front", "pop", "pop_front"):
            stack = params[0].get("value")
            if stack not in phv.stacks:
                raise UserError(f"{self.path}: {op}: expected a known header stack, found {stack!r}")
            n = _hex(params[1].get("value"))
            if op.startswith("push"):
                return [["push", self.stack(stack), n, 1 if op == "push_front" else 0]]
            return [["pop", self.stack(stack), n]]
        if op == "_jump":
            return [["jump", int(_hex(params[0].get("value")))]]
        if op == "_jump_if_zero":
            try:
                return [["jz", self.expr(params[0], parser), int(_hex(params[1].get("value")))]]
            except Unsupported as e:
                self.unsupported.add(f"{op} ({e})")
                return [["unsupported", f"{op} ({e})"]]
        if not isinstance(op, str):
            raise UserError(f"{self.path}: expected a primitive name, found {op!r}")
        # the executor's extern dispatch decides what runs (and names what does not)
        return [["extern", op, [self.arg(x, parser) for x in params]]]

    def action_ops(self, name: str, prims: object, parser: bool = False) -> list[list]:
        if not isinstance(prims, list):
            raise UserError(f"{self.path}: action {name}: expected a list of primitives")
        out: list[list] = []
        for i, pr in enumerate(prims):
            if not isinstance(pr, dict):
                raise UserError(f"{self.path}: action {name}: primitive {i}: expected an object")
            try:
                ops = self.primitive(pr, parser)
            except Unsupported as e:
                self.unsupported.add(f"{pr.get('op')} ({e})")
                ops = [["unsupported", f"{pr.get('op')} ({e})"]]
            except (IndexError, KeyError, TypeError, AttributeError, ValueError):
                raise UserError(f"{self.path}: action {name}: primitive {i} ({pr.get('op')!r}): "
                                "expected well-formed parameters") from None
            if len(ops) != 1:
                raise UserError(f"{self.path}: action {name}: primitive {i} ({pr.get('op')!r}): expected one op")
            out.append(ops[0])  # one op per primitive: _jump offsets stay primitive indices
        return out

    # ---- parser --------------------------------------------------------
    def parser(self) -> dict:
        doc, pc = self.doc, self.prog.pc
        parsers = doc.get("parsers") or []
        if not parsers:
            return {"init": -1, "states": []}
        pr = parsers[0]
        states = pr.get("parse_states", [])
        index = {s.get("name"): i for i, s in enumerate(states)}
        out = []
        for i, st in enumerate(states):
            where = f"parsers[0].parse_states[{i}] ({st.get('name')})"
            try:
                out.append(self.state(st, index, where))
            except Unsupported as e:
                # as the interpreter: packets reaching the state are rejected under this name
                name = f"Unsupported:{st.get('name')}"
                self.unsupported.add(f"parser state {st.get('name')}: {e}")
                out.append({"name": st.get("name"), "ops": [], "key": [], "transitions": [], "default": None,
                            "reject": pc.errors.get(name, 2000 + i), "why": str(e)})
            except UserError:
                raise
            except (IndexError, KeyError, TypeError, AttributeError, ValueError):
                raise UserError(f"{self.path}: {where}: expected well-formed parser_ops, transition_key and transitions") from None
        return {"init": index[pr["init_state"]], "states": out}

    def state(self, st: dict, index: dict, where: str) -> dict:
        pc, phv = self.prog.pc, self.phv
        ops: list[list] = []
        for oi, op in enumerate(st.get("parser_ops", [])):
            w = f"{where}.parser_ops[{oi}]"
            kind, params = op.get("op"), op.get("parameters", [])
            if kind in ("extract", "extract_VL"):
                p0 = params[0]
                if p0.get("type") == "regular":
                    h = phv.header(p0.get("value"))
                    if kind == "extract":
                        if h.varbit:
                            raise Unsupported(f"varbit header {h.name}")
                        if h.bits % 8:
                            raise UserError(f"{self.path}: {w}: expected header {h.name} a whole number of bytes, it has {h.bits} bits")
                        ops.append(["extract", self.header(h.name)])
                    else:
                        if not h.varbit:
                            raise UserError(f"{self.path}: {w}: expected a header with a varbit field, {h.name} has none")
                        ops.append(["extract_vl", self.header(h.name), self.expr(params[1], parser=True)])
                elif p0.get("type") == "stack" and kind == "extract":
                    stack = p0.get("value")
                    if stack not in phv.stacks:
                        raise UserError(f"{self.path}: {w}: expected a known header stack, found {stack!r}")
                    for hname in phv.stacks[stack]:
                        h = phv.header(hname)
                        if h.varbit:
                            raise Unsupported(f"varbit header {h.name}")
                        if h.bits % 8:
                            raise UserError(f"{self.path}: {w}: expected header {h.name} a whole number of bytes, it has {h.bits} bits")
                    ops.append(["extract_stack", self.stack(stack)])
                else:
                    raise Unsupported(f"extract of {p0.get('type')!r}")
            elif kind == "set":
                if params[0].get("type") != "field":
                    raise Unsupported("set of a non-field")
                ops.append(self.assign(phv.field_slot(params[0].get("value")), params[1], True, "parser set"))
            elif kind == "verify":
                cond = self.expr(params[0], parser=True)
                err = params[1]
                if err.get("type") == "hexstr":
                    code: list = ["c", _hx(_hex(err.get("value")))]
                elif str(err.get("value")) in pc.errors:
                    code = ["c", _hx(pc.errors[str(err.get("value"))])]
                else:
                    code = self.expr(err, parser=True)
                ops.append(["verify", cond, code])
            elif kind == "advance":
                ops.append(["advance", self.expr(params[0], parser=True)])
            elif kind == "primitive":
                ops += [["prim", o] for o in self.primitive(params[0], parser=True)]
            else:
                raise Unsupported(f"parser op {kind!r}")
        key = []
        for k in st.get("transition_key", []):
            t, v = k.get("type"), k.get("value")
            if t == "field":
                s = phv.field_slot(v)
                key.append(["f", s, phv.widths[s]])
            elif t == "lookahead":
                key.append(["la", int(v[0]), int(v[1])])
            elif t == "stack_field":
                sf = self.stack_field(v)
                elem = phv.header(phv.stacks[v[0]][0])
                key.append(sf + [elem.fields[sf[2]][1]])
            else:
                raise Unsupported(f"select on {t!r}")
        total = sum((p[-1] + 7) // 8 * 8 for p in key)
        trans, default = [], None
        for ti, t in enumerate(st.get("transitions", [])):
            ns = t.get("next_state")
            nxt = -1 if ns is None else index.get(ns)
            if nxt is None:
                raise UserError(f"{self.path}: {where}.transitions[{ti}]: expected a known next_state, found {ns!r}")
            ty, val, mask = t.get("type"), t.get("value"), t.get("mask")
            if ty == "default" or (ty is None and val == "default"):
                default = nxt
                break
            if ty == "parse_vset":
                self.unsupported.add(f"parse_vset {val} (empty)")
                continue
            if ty not in ("hexstr", None):
                raise Unsupported(f"transition of type {ty!r}")
            if not key:
                raise UserError(f"{self.path}: {where}.transitions[{ti}]: expected a transition_key for a value transition")
            full = (1 << total) - 1
            m = full if mask is None else _hex(mask)
            trans.append([_hx(_hex(val) & m), _hx(m), nxt])
        return {"name": st.get("name"), "ops": ops, "key": key, "transitions": trans, "default": default, "reject": None}


def compile_program(prog: Program | str | Path, entries: Mapping[str, Any] | None = None, *, seed: int = 0,
                    options: Any = None) -> dict:
    """The description (a JSON-ready dict, see the module doc) of ``prog``
    (an interpreter :class:`Program` or a BMv2 JSON path) with ``entries``
    (table name -> TableEntries, as :func:`~synapse_vmt.p4.entries.load_entries`
    gives; None: no entries, only the program's defaults; an
    :class:`~synapse_vmt.p4.entries.Entries` also brings its switch
    configuration), the run's ``seed`` (``random()``) and simple_switch's
    ``options`` (:class:`~synapse_vmt.p4.externs.SwitchOptions`)."""
    if not isinstance(prog, Program):
        prog = Program.load(prog)
    switch = getattr(entries, "switch", None)
    entries = dict(entries or {})
    for name in entries:
        if name not in prog.table_json:
            raise UserError(f"entries: expected a table of {prog.path}, found {name!r}")
    low = _Lower(prog)
    where = ["header_types and headers"]
    try:
        d = _describe(prog, low, entries, where)
        where[0] = "externs"
        d["externs"] = _externs(prog, low, switch, seed, options)
        return d
    except _MALFORMED as e:
        what = f"{type(e).__name__}: {e}".replace("\n", " ")
        raise UserError(f"{prog.path}: {where[0]}: expected well-formed p4c BMv2 JSON ({what})") from None


def _describe(prog: Program, low: _Lower, entries: dict, where: list[str]) -> dict:
    phv, doc, path = prog.phv, prog.doc, prog.path
    header_of: dict[int, int] = {}
    headers = []
    union_of = {h: ui for ui, hs in enumerate(low.unions.values()) for h in hs}
    by_type = {ht.get("name"): ht for ht in doc.get("header_types", [])}
    for hi, (name, h) in enumerate(phv.headers.items()):
        header_of[h.valid] = hi
        for _, _, s in h.fields:
            header_of[s] = hi
        max_bits = None
        if h.varbit:
            ht = by_type.get(next(x["header_type"] for x in doc["headers"] if x["name"] == name)) or {}
            ml = ht.get("max_length")
            if not isinstance(ml, int) or ml * 8 < h.bits:
                raise UserError(f"{path}: header_types ({ht.get('name')}): expected max_length (bytes) for a varbit header")
            max_bits = ml * 8
        headers.append({"name": name, "valid": h.valid, "fields": [s for _, _, s in h.fields], "metadata": h.metadata,
                        "union": union_of.get(name), "max_bits": max_bits})
    for st, nx in phv.stack_next.items():
        header_of[nx] = -1
    fields = [[n, w, header_of.get(i, -1)] for i, (n, w) in enumerate(zip(phv.names, phv.widths))]
    stacks = [{"name": n, "headers": [low.header_index[h] for h in hs], "next": phv.stack_next[n]}
              for n, hs in phv.stacks.items()]
    unions = [{"name": n, "headers": [low.header_index[h] for h in hs]} for n, hs in low.unions.items()]
    pc = prog.pc
    errors = {
        "names": {str(c): n for c, n in sorted(pc.error_names.items())},
        **{n: pc.errors[n] for n in ("PacketTooShort", "NoMatch", "StackOutOfBounds", "HeaderTooShort", "ParserTimeout")},
    }
    sm = phv.slot
    std = {f: sm.get(("standard_metadata", f)) for f in
           ("ingress_port", "packet_length", "parser_error", "egress_spec", "egress_port", "mcast_grp")}

    where[0] = "parsers"
    parser = low.parser()

    actions = []
    for aid in sorted(prog.actions):
        a = prog.actions[aid]
        raw = next(x for x in doc.get("actions", []) if x.get("id") == aid)
        where[0] = f"action {a.name}"
        low.n_params = len(a.widths)
        actions.append({"name": a.name, "id": aid, "params": a.widths,
                        "ops": low.action_ops(a.name, raw.get("primitives", []))})
    low.n_params = 0
    aidx = prog.action_index

    ids: dict[tuple[int, str], int] = {}
    for pi, pl in enumerate(doc["pipelines"]):
        for obj in list(pl.get("tables", [])) + list(pl.get("conditionals", [])):
            ids[(pi, obj["name"])] = len(ids)

    def nid(pi: int, name: object, w: str) -> int:
        if name is None:
            return -1
        if (pi, name) not in ids:
            raise UserError(f"{path}: {w}: expected a table or conditional of its pipeline, found {name!r}")
        return ids[(pi, name)]

    keyed = {t.name: i for i, t in enumerate(prog.tables)}
    nodes: list[dict] = []
    pipelines = []
    for pi, pl in enumerate(doc["pipelines"]):
        pipelines.append({"name": pl.get("name", f"pipeline{pi}"), "init": nid(pi, pl.get("init_table"), f"pipelines[{pi}].init_table")})
        for ti, t in enumerate(pl.get("tables", [])):
            where[0] = f"pipelines[{pi}].tables[{ti}] ({t['name']})"
            nodes.append(_table(prog, pi, t, entries.get(t["name"]), keyed.get(t["name"]), nid, aidx, path))
        for ci, c in enumerate(pl.get("conditionals", [])):
            where[0] = f"pipelines[{pi}].conditionals[{ci}] ({c['name']})"
            w = f"conditional {c['name']}"
            frag = (c.get("source_info") or {}).get("source_fragment")
            try:
                expr, why = low.expr(c.get("expression")), None
            except Unsupported as e:
                expr, why = None, str(e)
                low.unsupported.add(f"conditional {c['name']}: {e}")
            nodes.append({"kind": "cond", "name": c["name"], "label": f"{c['name']} ({frag})" if frag else c["name"],
                          "expr": expr, "why": why, "true": nid(pi, c.get("true_next"), w), "false": nid(pi, c.get("false_next"), w)})

    where[0] = "deparsers"
    deparser = []
    for d in (doc.get("deparsers") or [])[:1]:
        for hname in d.get("order", []):
            deparser.append(low.header(hname))
    where[0] = "checksums"
    checksums = _checksums(low, doc)
    return {
        "format": FORMAT, "version": VERSION, "source": str(path), "program": doc.get("program", "") if isinstance(doc.get("program"), str) else "",
        "fields": fields, "headers": headers, "stacks": stacks, "unions": unions, "errors": errors, "std": std,
        "parser": parser, "actions": actions, "nodes": nodes, "pipelines": pipelines, "deparser": deparser,
        "checksums": checksums, "keyed": [ids[(_pipe(prog, t.name), t.name)] for t in prog.tables],
        "unsupported": sorted(low.unsupported),
    }


def _pipe(prog: Program, table: str) -> int:
    return prog.table_json[table][0]


def _table(prog: Program, pi: int, t: dict, te: object, keyed: int | None, nid, aidx: dict, path: str) -> dict:
    name = t["name"]
    w = f"table {name}"
    nt = t.get("next_tables", {}) or {}
    base = nid(pi, t.get("base_default_next"), w)
    acts = [prog.actions[i] for i in t.get("action_ids", []) if i in prog.actions]
    if "__HIT__" in nt or "__MISS__" in nt:
        nxt: dict = {"hit": nid(pi, nt.get("__HIT__", t.get("base_default_next")), w),
                     "miss": nid(pi, nt.get("__MISS__", t.get("base_default_next")), w)}
    else:
        nxt = {"actions": {str(aidx[a.id]): nid(pi, nt.get(a.name, t.get("base_default_next")), w) for a in acts},
               "base": base}
    default_act, default_data = prog._default(t, te)
    out: dict = {"kind": "table", "name": name, "keyed": keyed, "key": [], "entries": [], "next": nxt,
                 "default": None if default_act is None else {"a": aidx[default_act.id], "d": [_hx(v) for v in default_data]}}
    if not t.get("key"):
        return out
    spec = prog.tables[keyed]
    for j, (k, ks) in enumerate(zip(t["key"], spec.key)):
        kind, target = k.get("match_type"), k.get("target")
        if kind == "valid":
            out["key"].append({"slot": prog.phv.header(target).valid, "width": 1, "match": "exact", "valid": None,
                               "mask": None, "shift": 0, "name": ks.field})
            continue
        s = prog.phv.field_slot(target)
        mask, shift = k.get("mask"), 0
        if isinstance(mask, str):
            m = int(mask, 16)
            shift = (m & -m).bit_length() - 1 if m else 0
            if m and (m >> shift) & ((m >> shift) + 1):
                raise UserError(f"{path}: table {name} key[{j}]: expected a contiguous mask (a field slice), found {mask}")
            mask = _hx(m)
        else:
            mask = None
        h = prog.phv.headers[target[0]]
        valid = None if h.metadata or target[1] == "$valid$" else h.valid
        out["key"].append({"slot": s, "width": ks.width, "match": ks.match, "valid": valid, "mask": mask, "shift": shift,
                           "name": ks.field})
    ents = getattr(te, "entries", []) if te is not None else []

    def member(action: str, params: object, where: str) -> list:
        act = prog._resolve_action(t, action, where)
        return [aidx[act.id], [_hx(v) for v in prog._adata(act, params, where)]]

    for ei, e in enumerate(ents):
        where = getattr(e, "source", None) or f"{name}#entry {ei}"
        ms = getattr(e, "matches", {}) or {}
        row = [_match_row(ms.get(k.field, ms.get(k.name)), k, where) for k in spec.key]
        act = prog._resolve_action(t, e.action, where)
        data = prog._adata(act, getattr(e, "params", None), where)
        item = {"m": [[_hx(lo), _hx(hi), _hx(mk)] for lo, hi, mk in row], "a": aidx[act.id], "d": [_hx(v) for v in data],
                "h": getattr(e, "handle", None) if getattr(e, "handle", None) is not None else ei}
        if getattr(e, "group", None):
            # an action selector's group: its members (action, data) in the order the selector indexes
            item["g"] = [member(a, ps, where) for a, ps in e.group]
        out["entries"].append(item)
    dgroup = getattr(te, "default_group", None) if te is not None else None
    if dgroup:
        out["default_group"] = [member(a, ps, f"{name}: default group") for a, ps in dgroup]
    out["selector"] = t.get("action_profile") if any("g" in x for x in out["entries"]) or dgroup else None
    out["counters"] = bool(t.get("with_counters"))
    dm = t.get("direct_meters")
    if isinstance(dm, str):
        mj = next((m for m in prog.doc.get("meter_arrays", []) or [] if m.get("name") == dm), None)
        if mj is None or not isinstance(mj.get("result_target"), list):
            raise UserError(f"{path}: table {name}: expected direct meter {dm!r} among meter_arrays, with a result_target")
        out["meter"] = {"name": dm, "target": prog.phv.field_slot(mj["result_target"]), "packets": mj.get("type") == "packets"}
    aom = add_on_miss(t, path)
    if aom is not None:
        out["add_on_miss"] = {"profiles_us": aom[0], "max_size": aom[1]}
    return out


def _externs(prog: Program, low: _Lower, switch: Any, seed: int, options: Any) -> dict:
    """What the executor's externs and packet flow need (``synapse_vmt.p4.switch``'s
    definitions): calculations, registers, counters, meters with their rates,
    field and learn lists, selectors, the switch's configuration and options,
    and the PHV slots simple_switch reads by name."""
    from synapse_vmt.p4.externs import SwitchConfig, SwitchOptions

    switch = switch or SwitchConfig()
    options = options or switch.options or SwitchOptions()
    c = prog.compiled
    doc = prog.doc

    def inputs(items: list) -> list:
        out = []
        for x in items:
            if x[0] == "f":
                out.append(["f", x[1]])
            elif x[0] == "c":
                out.append(["c", _hx(x[1]), x[2]])
            elif x[0] == "h":
                out.append(["h", low.header(next(n for n, h in prog.phv.headers.items() if h.valid == x[2]))])
            else:
                out.append(["payload"])
        return out

    calcs = []
    for name, algo, inp in c.calcs:
        crc = switch.crc_params.get(name)
        calcs.append({"name": name, "algo": algo, "inputs": inputs(inp),
                      "crc": None if crc is None else [crc.width, _hx(crc.poly), _hx(crc.init), _hx(crc.xor_out), crc.refin, crc.refout]})
    regs = []
    for name, (k, size, bw) in sorted(prog.objects.registers.items(), key=lambda kv: kv[1][0]):
        regs.append({"name": name, "size": size, "width": bw,
                     "init": [[i, _hx(v)] for i, v in sorted(switch.registers.get(name, {}).items())]})
    sizes = {x["name"]: int(x.get("size", 0)) for x in doc.get("counter_arrays", []) or []}
    counters = [{"name": n, "size": sizes.get(n, 0)} for n, k in sorted(prog.objects.counters.items(), key=lambda kv: kv[1])]
    mj = {x["name"]: x for x in doc.get("meter_arrays", []) or []}
    meters = []
    for n, k in sorted(prog.objects.meters.items(), key=lambda kv: kv[1]):
        rates = switch.meter_rates.get(n, {})
        meters.append({"name": n, "size": int(mj[n].get("size", 0)), "packets": mj[n].get("type") == "packets",
                       "rates": [[-1 if i is None else i, [list(r) for r in rs]] for i, rs in sorted(
                           rates.items(), key=lambda kv: -1 if kv[0] is None else kv[0])]})
    meta = {
        "IngressPort": c.s_port, "PacketLength": c.s_len, "InstanceType": c.s_inst, "EgressSpec": c.s_espec,
        "EgressPort": c.s_eport, "McastGrp": c.s_mcast, "EgressRid": c.s_rid, "Priority": c.s_prio,
        "IngressTimestamp": c.s_times[0] if c.s_times else None, "EgressTimestamp": c.s_etimes[0] if c.s_etimes else None,
        "ChecksumError": c.s_cerr, "ParserError": c.s_perr,
        "CloneSession": c.regs["clone"], "CloneFieldList": c.regs["clone_fl"], "Resubmit": c.regs["resubmit"],
        "Recirculate": c.regs["recirculate"], "Learn": c.regs["learn"], "Length": c.regs["length"],
    }
    return {
        "calculations": calcs, "registers": regs, "counters": counters, "meters": meters,
        "field_lists": [[i, [["f", s] for s in slots]] for i, slots in sorted(c.field_lists.items())],
        "learn_lists": [[i, n, [["f", s] for s in slots]] for i, (n, slots) in sorted(c.learn_lists.items())],
        "selectors": [{"name": n, "algo": a, "inputs": inputs(inp)} for n, (a, inp) in sorted(c.selectors.items())],
        "mirroring": [[sid, -1 if port is None else port, -1 if grp is None else grp]
                      for sid, (port, grp) in sorted(switch.mirroring.items())],
        "mc_groups": [[g, [list(r) for r in reps]] for g, reps in sorted(switch.mc_groups.items())],
        "priority_queues": options.priority_queues, "drop_port": options.drop_port, "seed": seed,
        "meta": {k: (-1 if v is None else v) for k, v in meta.items()},
        "metadata": c.metadata, "ingress": c.ingress, "egress": -1 if c.egress is None else c.egress,
        "verify": bool(c.verify),
    }


def _checksums(low: _Lower, doc: dict) -> list[dict]:
    """Checksums the deparser updates: the calculation's inputs lowered (fields,
    constants with their width, headers, the payload), its algorithm by name."""
    calcs = {c.get("name"): c for c in doc.get("calculations", []) or [] if isinstance(c, dict)}
    out = []
    for i, ck in enumerate(doc.get("checksums", []) or []):
        if not isinstance(ck, dict):
            raise UserError(f"{low.path}: checksums[{i}]: expected an object")
        calc = calcs.get(ck.get("calculation"))
        if calc is None:
            raise UserError(f"{low.path}: checksums[{i}] ({ck.get('name')}): expected a known calculation, found {ck.get('calculation')!r}")
        inputs = []
        for x in calc.get("input", []):
            t, v = x.get("type"), x.get("value")
            if t == "field":
                inputs.append(["f", low.phv.field_slot(v)])
            elif t == "hexstr":
                inputs.append(["c", _hx(_hex(v)), int(x.get("bitwidth", 0))])
            elif t == "header":
                inputs.append(["h", low.header(v)])
            elif t == "payload":
                inputs.append(["payload"])
            else:
                raise UserError(f"{low.path}: calculations ({calc.get('name')}): expected inputs of type field, hexstr, header or payload, found {t!r}")
        cond = ck.get("if_cond")
        try:
            cond_tree = None if cond is None else low.expr(cond)
        except Unsupported as e:
            low.unsupported.add(f"checksum {ck.get('name')}: {e}")
            continue
        out.append({"name": ck.get("name"), "target": low.phv.field_slot(ck.get("target")), "algo": str(calc.get("algo")),
                    "inputs": inputs, "cond": cond_tree, "update": ck.get("update", True) is not False,
                    "verify": ck.get("verify", True) is not False})
    return out


def compile_json(program: str | Path, entries_file: str | Path | None = None) -> str:
    """The description of ``program`` with the entries in ``entries_file``
    (CLI commands or runtime JSON; None: the program's own), as JSON text."""
    import os

    from synapse_vmt.p4.entries import load_entries

    prog = Program.load(program)
    ents = load_entries(entries_file or os.devnull, program)
    return json.dumps(compile_program(prog, ents), separators=(",", ":"))

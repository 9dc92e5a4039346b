"""Compile BMv2 JSON expressions and action primitives to Python source.

The interpreter (:mod:`synapse_vmt.p4.interp`) runs every packet through the
program in Python, so the JSON is compiled once: each expression tree becomes
a Python expression over the PHV list ``p`` (one slot per header field, one
per header's validity bit), the action data list ``a`` and, in the parser,
the packet bytes. The generated code only ever contains integers and slot
numbers taken from the JSON, never its strings, and is ``exec``-ed into a
private namespace.

Arithmetic follows BMv2: values are unbounded integers (Python ints, two's
complement for negatives, as BMv2's bignums) and are truncated to the
destination field's width on assignment; p4c already emits the ``& 0xff..``
masks that make ``+``, ``-``, ``~`` and ``<<`` wrap. Signed fields are kept as
their unsigned bit pattern.

What the run cannot compute raises :class:`Unsupported`; the callers turn it
into a named count (a synthesized field, a fallback branch), never a failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from synapse_vmt.errors import UserError

MAX_SHIFT = 4096  # the widest shift compiled (a larger constant is malformed input)
DROP_PORT = 511  # BMv2 simple_switch's drop port (mark_to_drop sets egress_spec to it)


class Unsupported(Exception):
    """A construct the interpreter does not execute; the message names it."""


@dataclass
class Header:
    name: str
    fields: list[tuple[str, int, int]]  # (name, width, slot); width 0 for varbit
    valid: int  # slot of the validity bit
    metadata: bool

    @property
    def bits(self) -> int:
        return sum(w for _, w, _ in self.fields)

    @property
    def varbit(self) -> bool:
        return any(w == 0 for _, w, _ in self.fields)


@dataclass
class Phv:
    """Slot layout of the packet header vector of one program."""

    path: str
    headers: dict[str, Header] = field(default_factory=dict)
    slot: dict[tuple[str, str], int] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)  # slot -> "header.field"
    widths: list[int] = field(default_factory=list)  # slot -> bits (1 for validity)
    stacks: dict[str, list[str]] = field(default_factory=dict)  # stack -> element headers
    stack_next: dict[str, int] = field(default_factory=dict)  # stack -> slot of its next index
    unions: dict[str, list[str]] = field(default_factory=dict)  # header union -> member headers
    aliases: dict[str, int] = field(default_factory=dict)  # BMv2 field_aliases: "intrinsic_metadata.mcast_grp" -> slot
    #: The packet's own registers, as BMv2 keeps them beside the PHV
    #: (``RegisterAccess``): slot per name, never keyed or read by the program.
    regs: dict[str, int] = field(default_factory=dict)

    #: The packet registers (see ``regs``): the clone session (its id | 0x10000
    #: when a clone was asked for) and field list, the resubmit and recirculate
    #: field lists (0: none), the learn list of a digest, the packet's length
    #: as add_header/remove_header change it.
    REGS = ("clone", "clone_fl", "resubmit", "recirculate", "learn", "length")

    @classmethod
    def from_doc(cls, doc: dict, path: str) -> "Phv":
        phv = cls(path)
        types: dict[str, list] = {}
        for i, ht in enumerate(doc.get("header_types", [])):
            if not isinstance(ht, dict) or not isinstance(ht.get("name"), str) or not isinstance(ht.get("fields"), list):
                raise UserError(f"{path}: header_types[{i}]: expected an object with name and fields")
            types[ht["name"]] = ht["fields"]
        for i, h in enumerate(doc.get("headers", [])):
            if not isinstance(h, dict) or not isinstance(h.get("name"), str) or h.get("header_type") not in types:
                raise UserError(f"{path}: headers[{i}]: expected an object with a name and a known header_type")
            name = h["name"]
            valid = phv._new(f"{name}.$valid$", 1)
            fields = []
            for f in types[h["header_type"]]:
                w = f[1] if isinstance(f[1], int) else 0
                s = phv._new(f"{name}.{f[0]}", w)
                phv.slot[(name, f[0])] = s
                fields.append((f[0], w, s))
            phv.slot[(name, "$valid$")] = valid
            phv.headers[name] = Header(name, fields, valid, bool(h.get("metadata")))
        for i, st in enumerate(doc.get("header_stacks", []) or []):
            ids = st.get("header_ids", [])
            by_id = {h.get("id"): h["name"] for h in doc["headers"]}
            try:
                phv.stacks[st["name"]] = [by_id[j] for j in ids]
            except (KeyError, TypeError):
                raise UserError(f"{path}: header_stacks[{i}]: expected header_ids of known headers") from None
            phv.stack_next[st["name"]] = phv._new(f"{st['name']}.$next$", 32)
        by_id = {h.get("id"): h["name"] for h in doc.get("headers", [])}
        for i, u in enumerate(doc.get("header_unions", []) or []):
            if not isinstance(u, dict) or not isinstance(u.get("name"), str):
                raise UserError(f"{path}: header_unions[{i}]: expected an object with a name and header_ids")
            try:
                phv.unions[u["name"]] = [by_id[j] for j in u.get("header_ids", [])]
            except (KeyError, TypeError):
                raise UserError(f"{path}: header_unions[{i}] ({u['name']}): expected header_ids of known headers") from None
        for a in doc.get("field_aliases", []) or []:
            if isinstance(a, list) and len(a) == 2 and isinstance(a[1], list) and tuple(a[1]) in phv.slot:
                phv.aliases[str(a[0])] = phv.slot[tuple(a[1])]
        for r in cls.REGS:
            phv.regs[r] = phv._new(f"$reg.{r}", 32)
        return phv

    def target_field(self, name: str) -> int | None:
        """The slot simple_switch means by ``header.field`` (``intrinsic_metadata.mcast_grp``...):
        a field alias first (BMv2 gives aliases priority), else the field itself."""
        if name in self.aliases:
            return self.aliases[name]
        h, _, f = name.partition(".")
        return self.slot.get((h, f))

    def _new(self, name: str, width: int) -> int:
        self.names.append(name)
        self.widths.append(width)
        return len(self.names) - 1

    def template(self) -> list[int]:
        """A fresh PHV: every field 0, metadata headers valid."""
        t = [0] * len(self.names)
        for h in self.headers.values():
            if h.metadata:
                t[h.valid] = 1
        return t

    def field_slot(self, ref: object) -> int:
        if not (isinstance(ref, list) and len(ref) == 2 and all(isinstance(x, str) for x in ref)):
            raise UserError(f"{self.path}: expected a field reference [header, field], found {ref!r}")
        s = self.slot.get((ref[0], ref[1]))
        if s is None:
            raise UserError(f"{self.path}: expected a known field, found {ref[0]}.{ref[1]}")
        return s

    def union_siblings(self, name: str) -> list[int]:
        """The validity slots of the other members of ``name``'s header union
        (BMv2: a member made valid, by extract or setValid, invalidates them)."""
        return [self.headers[o].valid for m in self.unions.values() if name in m for o in m if o != name]

    def header(self, name: object) -> Header:
        h = self.headers.get(name) if isinstance(name, str) else None
        if h is None:
            raise UserError(f"{self.path}: expected a known header, found {name!r}")
        return h


def _hex(v: object) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        try:
            return int(v, 16) if v.lstrip("-").lower().startswith("0x") else int(v)
        except ValueError:
            pass
    raise Unsupported(f"hex value {v!r}")


def tcm(v: int, w: int) -> int:
    """two_comp_mod: ``v`` wrapped to a signed ``w``-bit value."""
    v &= (1 << w) - 1
    return v - (1 << w) if w and v >> (w - 1) else v


def sat_cast(v: int, w: int) -> int:
    lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
    return lo if v < lo else hi if v > hi else v


def usat_cast(v: int, w: int) -> int:
    hi = (1 << w) - 1
    return 0 if v < 0 else hi if v > hi else v


_SLOT_RE = re.compile(r"p\[(\d+)\]")
_ARITH_PRIMS = {"add": "+", "subtract": "-", "bit_and": "&", "bit_or": "|", "bit_xor": "^", "shift_left": "<<", "shift_right": ">>"}
_BIN = {"+": "+", "-": "-", "*": "*", "/": "//", "%": "%", "<<": "<<", ">>": ">>", "&": "&", "|": "|", "^": "^"}
_CMP = {"==": "==", "!=": "!=", "<": "<", ">": ">", "<=": "<=", ">=": ">="}

# Primitives with no effect on what a packet does here: logging, assertions,
# truncation (it only shortens the output bytes).
IGNORED = frozenset("log_msg truncate assume assert no_op".split())
# Externs that write a field the run cannot compute: (primitive, index of the written parameter).
SYNTHESIZED = {
    "modify_field_conditionally": None,
}


@dataclass
class Objects:
    """The program's stateful objects by name, numbered for the generated
    code: ``_RG{k}`` a register array's cells, ``_CT{k}``/``_MT{k}`` a counter's
    / meter's function of the index, ``_HS{k}`` a calculation's function of
    the PHV (see :class:`~synapse_vmt.p4.interp.Program`)."""

    registers: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # name -> (k, size, bitwidth)
    counters: dict[str, int] = field(default_factory=dict)
    meters: dict[str, int] = field(default_factory=dict)
    calcs: dict[str, int] = field(default_factory=dict)
    uses_rng: bool = False
    writes_registers: bool = False

    @classmethod
    def from_doc(cls, doc: dict) -> "Objects":
        o = cls()
        for k, r in enumerate(doc.get("register_arrays", []) or []):
            o.registers[r["name"]] = (k, int(r.get("size", 0)), int(r.get("bitwidth", 0)))
        o.counters = {c["name"]: k for k, c in enumerate(doc.get("counter_arrays", []) or [])}
        o.meters = {m["name"]: k for k, m in enumerate(doc.get("meter_arrays", []) or [])}
        o.calcs = {c["name"]: k for k, c in enumerate(doc.get("calculations", []) or [])}
        return o


class Codegen:
    """Turns expression trees and primitives into Python source lines.

    ``consts`` collects objects the generated code refers to by name (slot
    tuples of header stacks); ``unsupported`` the names of primitives seen
    but not executed."""

    def __init__(self, phv: Phv, maybe_synth: set[int] | None = None, objects: Objects | None = None):
        self.phv = phv
        self.obj = objects or Objects()
        self.consts: dict[str, object] = {}
        self.unsupported: set[str] = set()
        # taint tracking: slots written by an unsupported extern, and every
        # assignment's (destination, slots read), so a second compile can carry
        # the "synthesized" mark through copies (hash2 -> hash1 -> a key)
        self.synth_slots: set[int] = set()
        self.deps: list[tuple[int, frozenset[int]]] = []
        self.maybe_synth = maybe_synth
        self.n_params: int | None = None  # action data of the action being compiled (None: unchecked)
        # generated source -> an int whose set bits cover every bit the value
        # can have (known non-negative): lets redundant masks be left out
        self.bound: dict[str, int] = {}

    def tainted_closure(self) -> set[int]:
        """Slots that may hold a synthesized value: the externs' outputs and whatever is assigned from them."""
        maybe = set(self.synth_slots)
        changed = True
        while changed:
            changed = False
            for dst, reads in self.deps:
                if dst not in maybe and not reads.isdisjoint(maybe):
                    maybe.add(dst)
                    changed = True
        return maybe

    def const(self, obj: object) -> str:
        name = f"_K{len(self.consts)}"
        self.consts[name] = obj
        return name

    # ---- expressions -------------------------------------------------
    def expr(self, e: object, parser: bool = False) -> str:
        """Python source of expression ``e`` (raises Unsupported)."""
        if not isinstance(e, dict):
            raise Unsupported(f"expression {e!r}")
        t, v = e.get("type"), e.get("value")
        if t == "field":
            slot = self.phv.field_slot(v)
            return self._bounded(f"p[{slot}]", (1 << self.phv.widths[slot]) - 1 if self.phv.widths[slot] else None)
        if t == "hexstr":
            c = _hex(v)
            return self._bounded(str(c), c if c >= 0 else None)
        if t == "bool":
            return "True" if v else "False"
        if t in ("runtime_data", "local"):
            if type(v) is not int or v < 0 or (self.n_params is not None and v >= self.n_params):
                raise UserError(f"{self.phv.path}: expected action data 0..{(self.n_params or 0) - 1}, found {t} {v!r}")
            return f"a[{v}]"
        if t == "lookahead":
            if not parser:
                raise Unsupported("lookahead outside the parser")
            off, w = v
            return self._bounded(f"_look(buf, pos, {int(off)}, {int(w)})", (1 << int(w)) - 1)
        if t == "stack_field":
            stack, fname = v
            w = self.phv.widths[self.phv.field_slot([self.phv.stacks[stack][0], fname])] if self.phv.stacks.get(stack) else 0
            src = f"p[{self.stack_field(stack, fname)}[p[{self.phv.stack_next[stack]}] - 1]]"
            return self._bounded(src, (1 << w) - 1 if w else None)
        if t == "expression":
            if isinstance(v, dict) and "op" in v:
                return self.op(v, parser)
            return self.expr(v, parser)
        raise Unsupported(f"operand type {t!r}")

    def _bounded(self, src: str, bound: int | None) -> str:
        if bound is not None:
            self.bound[src] = bound
        return src

    def _bits(self, left: str, op: str, right: str) -> str:
        """``left op right`` for a bitwise/shift/add op, with redundant masks left out."""
        bl, br = self.bound.get(left), self.bound.get(right)
        if op == "&":
            # x & c with c covering every bit x can have is x
            if br is not None and right.isdigit() and bl is not None and bl & ~br == 0:
                return left
            if bl is not None and left.isdigit() and br is not None and br & ~bl == 0:
                return right
            known = [b for b in (bl, br) if b is not None]
            bound = None
            if known:
                bound = known[0] if len(known) == 1 else known[0] & known[1]
            return self._bounded(f"({left} & {right})", bound)
        if op in ("<<", ">>") and right.isdigit() and int(right) > MAX_SHIFT:
            raise UserError(f"{self.phv.path}: expected a shift by at most {MAX_SHIFT} bits, found {right}")
        src = f"({left} {_BIN[op]} {right})"
        bound = None
        if bl is not None and br is not None:
            if op == "|":
                bound = bl | br
            elif op == "^":
                bound = (1 << max(bl.bit_length(), br.bit_length())) - 1
            elif op == "+":
                bound = (1 << (bl + br).bit_length()) - 1
            elif op == ">>" and right.isdigit():
                bound = bl >> int(right)
            elif op == "<<" and right.isdigit():
                bound = bl << int(right)
        return self._bounded(src, bound)

    def stack_field(self, stack: str, fname: str) -> str:
        if stack not in self.phv.stacks:
            raise UserError(f"{self.phv.path}: expected a known header stack, found {stack!r}")
        # index -1 (nothing extracted yet) reads the last element, as good as any: BMv2 errors there
        return self.const(tuple(self.phv.field_slot([h, fname]) for h in self.phv.stacks[stack]))

    def op(self, node: dict, parser: bool) -> str:
        op, left, right = node.get("op"), node.get("left"), node.get("right")

        def sub(x: object) -> str:
            return self.expr(x, parser)

        if op in ("&", "|", "^", "+", ">>", "<<"):
            return self._bits(sub(left), op, sub(right))
        if op in _BIN:
            return f"({sub(left)} {_BIN[op]} {sub(right)})"
        if op in _CMP:
            return f"({sub(left)} {_CMP[op]} {sub(right)})"
        if op == "~":
            return f"(~{sub(right)})"
        if op in ("and", "or"):
            return f"({sub(left)} {op} {sub(right)})"
        if op == "not":
            return f"(not {sub(right)})"
        if op == "d2b":
            return f"({sub(right)} != 0)"
        if op == "b2d":
            return self._bounded(f"(1 if {sub(right)} else 0)", 1)
        if op == "valid":
            if isinstance(right, dict) and right.get("type") == "header":
                return f"(p[{self.phv.header(right.get('value')).valid}] != 0)"
            raise Unsupported("valid() of a non-header")
        if op == "valid_union":
            # BMv2: a header union is valid when one of its members is
            if isinstance(right, dict) and right.get("type") == "header_union" and right.get("value") in self.phv.unions:
                members = [f"p[{self.phv.header(h).valid}] != 0" for h in self.phv.unions[right["value"]]]
                return "(" + (" or ".join(members) or "False") + ")"
            raise Unsupported("valid_union() of a non-union")
        if op == "?:":
            lt, rt = sub(left), sub(right)
            bl, br = self.bound.get(lt), self.bound.get(rt)
            return self._bounded(f"({lt} if {sub(node.get('cond'))} else {rt})", bl | br if bl is not None and br is not None else None)
        if op in ("two_comp_mod", "sat_cast", "usat_cast"):
            fn = {"two_comp_mod": "_tcm", "sat_cast": "_sat", "usat_cast": "_usat"}[op]
            return f"{fn}({sub(left)}, {sub(right)})"
        if op in ("last_stack_index", "size_stack_index"):
            if isinstance(right, dict) and right.get("type") == "header_stack" and right.get("value") in self.phv.stacks:
                nx = self.phv.stack_next[right["value"]]
                return f"(p[{nx}] - 1)" if op == "last_stack_index" else f"p[{nx}]"
        raise Unsupported(f"operator {op!r}")

    # ---- primitives --------------------------------------------------
    def assign(self, slot: int, src: str) -> str:
        w = self.phv.widths[slot]
        if not w:
            return f"p[{slot}] = {src}"
        m = (1 << w) - 1
        b = self.bound.get(src)
        if b is not None and b & ~m == 0:  # already within the field's width
            return f"p[{slot}] = {src}"
        return f"p[{slot}] = {src} & {m}"

    def assign_lines(self, slot: int, src: str) -> list[str]:
        """``assign`` plus, where a source may be synthesized, carrying the mark to ``slot``."""
        lines = [self.assign(slot, src)]
        reads = frozenset(int(x) for x in _SLOT_RE.findall(src))
        self.deps.append((slot, reads))
        if not self.maybe_synth:
            return lines
        tainted = reads & self.maybe_synth
        if tainted:
            k = self.const(frozenset(tainted))
            lines += ["if T:", f"    if not {k}.isdisjoint(T): T.add({slot})", f"    else: T.discard({slot})"]
        elif slot in self.maybe_synth:
            lines.append(f"if T: T.discard({slot})")
        return lines

    def header_copy(self, dst: str, src: str) -> list[str]:
        d, s = self.phv.header(dst), self.phv.header(src)
        lines = [f"p[{d.valid}] = p[{s.valid}]"]
        lines += [f"p[{ds}] = p[{ss}]" for (_, _, ds), (_, _, ss) in zip(d.fields, s.fields)]
        return lines

    def set_valid(self, name: str) -> list[str]:
        h = self.phv.header(name)
        # BMv2 add_header: an invalid header becomes valid with its fields
        # zeroed, and the packet's length register gains its bytes
        zero = "; ".join(f"p[{s}] = 0" for _, _, s in h.fields) or "pass"
        grow = f"; p[{self.phv.regs['length']}] += {h.bits // 8}" if not h.metadata else ""
        others = "".join(f"; p[{o}] = 0" for o in self.phv.union_siblings(name))
        return [f"if not p[{h.valid}]:", f"    {zero}; p[{h.valid}] = 1{grow}{others}"]

    def _named(self, x: object, kind: str, table: dict, op: str):
        if not isinstance(x, dict) or x.get("type") != kind:
            raise UserError(f"{self.phv.path}: {op}: expected a {kind}, found {x!r}")
        if x.get("value") not in table:  # BMv2 would refuse the program; here it is named and skipped
            raise Unsupported(f"{kind} {x.get('value')!r} is not declared")
        return table[x["value"]]

    def _dst(self, x: object, op: str) -> int:
        if not isinstance(x, dict) or x.get("type") != "field":
            raise UserError(f"{self.phv.path}: {op}: expected a field to write, found {x!r}")
        return self.phv.field_slot(x["value"])

    def extern(self, op: str, params: list, parser: bool) -> list[str] | None:
        """Source lines of a v1model extern as simple_switch runs it
        (``targets/simple_switch/primitives.cpp``), or None if ``op`` is none."""
        regs = self.phv.regs
        if op == "count":
            k = self._named(params[0], "counter_array", self.obj.counters, op)
            return [f"_CT{k}({self.expr(params[1], parser)})"]
        if op == "execute_meter":
            k = self._named(params[0], "meter_array", self.obj.meters, op)
            dst = self._dst(params[2], op)
            return self.assign_lines(dst, f"_MT{k}({self.expr(params[1], parser)})")
        if op == "register_read":
            dst = self._dst(params[0], op)
            k, size, _ = self._named(params[1], "register_array", self.obj.registers, op)
            # out of bounds: BMv2 logs an error and leaves the field as it was
            return [f"i = {self.expr(params[2], parser)}", f"if i < {size}:"] + [
                "    " + ln for ln in self.assign_lines(dst, f"_RG{k}[i]")]
        if op == "register_write":
            k, size, bw = self._named(params[0], "register_array", self.obj.registers, op)
            self.obj.writes_registers = True
            return [f"i = {self.expr(params[1], parser)}", f"if i < {size}: _RG{k}[i] = {self.expr(params[2], parser)} & {(1 << bw) - 1}"]
        if op == "modify_field_with_hash_based_offset":
            dst = self._dst(params[0], op)
            k = self._named(params[2], "calculation", self.obj.calcs, op)
            # v = base + hash % size; a size of 0 is taken as 1 (BMv2 warns)
            return self.assign_lines(dst, f"({self.expr(params[1], parser)} + _HS{k}(p) % ({self.expr(params[3], parser)} or 1))")
        if op == "modify_field_rng_uniform":
            dst = self._dst(params[0], op)
            self.obj.uses_rng = True
            # lo > hi: BMv2 leaves the field as it was
            return [f"lo = {self.expr(params[1], parser)}", f"hi = {self.expr(params[2], parser)}", "if lo <= hi:"] + [
                "    " + ln for ln in self.assign_lines(dst, "_RNG(lo, hi)")]
        if op in ("clone_ingress_pkt_to_egress", "clone_egress_pkt_to_egress"):
            # the session id | a "clone asked for" bit, so session 0 works (BMv2's MIRROR_SESSION_ID_VALID_MASK)
            return [f"p[{regs['clone']}] = ({self.expr(params[0], parser)} & 0xFFFF) | 0x10000",
                    f"p[{regs['clone_fl']}] = {self.expr(params[1], parser)} & 0xFFFF"]
        if op in ("resubmit", "recirculate"):
            return [f"p[{regs[op]}] = {self.expr(params[0], parser)} & 0xFFFF"]
        if op == "generate_digest":
            return [f"p[{regs['learn']}] = {self.expr(params[1], parser)} & 0xFFFF"]
        # PNA data-plane table writes (synapse_vmt.p4.learn): the table's context _LC says where
        if op == "add_entry":
            if not params or params[0].get("type") != "string":
                raise UserError(f"{self.phv.path}: {op}: expected the action's name first, found {params[:1]!r}")
            data = "".join(f"{self.expr(x, parser)}, " for x in params[1:-1])
            return [f"_LC.add({params[0]['value']!r}, ({data}), {self.expr(params[-1], parser)})"]
        if op == "restart_expire_timer":
            return ["_LC.restart()"]
        if op == "set_entry_expire_time":
            return [f"_LC.restart({self.expr(params[0], parser)})"]
        return None

    def drop(self) -> list[str]:
        sm = self.phv.slot
        out = []
        if ("standard_metadata", "egress_spec") in sm:
            out.append(f"p[{sm[('standard_metadata', 'egress_spec')]}] = {DROP_PORT}")
        if ("standard_metadata", "mcast_grp") in sm:
            out.append(f"p[{sm[('standard_metadata', 'mcast_grp')]}] = 0")
        return out or ["pass"]

    def stack_shift(self, stack: str, count: int, push: bool) -> list[str]:
        elems = [self.phv.header(h) for h in self.phv.stacks[stack]]
        nx = self.phv.stack_next[stack]
        n = len(elems)
        lines = []
        order = range(n - 1, -1, -1) if push else range(n)
        for i in order:
            j = i - count if push else i + count  # element i takes element j
            d = elems[i]
            if 0 <= j < n:
                s = elems[j]
                lines.append(f"p[{d.valid}] = p[{s.valid}]")
                lines += [f"p[{ds}] = p[{ss}]" for (_, _, ds), (_, _, ss) in zip(d.fields, s.fields)]
            else:
                # P4_14 push makes the new front elements valid (zeroed); pop invalidates the tail
                lines += [f"p[{s}] = 0" for _, _, s in d.fields]
                lines.append(f"p[{d.valid}] = {1 if push else 0}")
        if push:
            lines.append(f"p[{nx}] = min(p[{nx}] + {count}, {n})")
        else:
            lines.append(f"p[{nx}] = max(p[{nx}] - {count}, 0)")
        return lines

    def primitive(self, prim: dict, parser: bool = False) -> list[str]:
        """Source lines of one primitive; ``return 1`` ends the control (exit)."""
        op, params = prim.get("op"), prim.get("parameters", [])
        if op in _ARITH_PRIMS and len(params) == 3 and params[0].get("type") == "field":
            # P4_14 arithmetic primitives: dst = a OP b
            slot = self.phv.field_slot(params[0]["value"])
            return self.assign_lines(slot, f"({self.expr(params[1], parser)} {_ARITH_PRIMS[op]} {self.expr(params[2], parser)})")
        if op in ("add_to_field", "subtract_from_field") and params[0].get("type") == "field":
            slot = self.phv.field_slot(params[0]["value"])
            sign = "+" if op == "add_to_field" else "-"
            return self.assign_lines(slot, f"(p[{slot}] {sign} {self.expr(params[1], parser)})")
        if op == "modify_field" and len(params) == 3 and params[0].get("type") == "field":
            # with a mask: only the masked bits change
            slot = self.phv.field_slot(params[0]["value"])
            m = self.expr(params[2], parser)
            return self.assign_lines(slot, f"((p[{slot}] & ~{m}) | ({self.expr(params[1], parser)} & {m}))")
        if op == "copy_header":
            return self.header_copy(params[0]["value"], params[1]["value"])
        if op in ("assign", "modify_field"):
            dst, src = params[0], params[1]
            if dst.get("type") == "header":
                if src.get("type") != "header":
                    raise Unsupported("assign to a header from a non-header")
                return self.header_copy(dst["value"], src["value"])
            if dst.get("type") == "field":
                slot = self.phv.field_slot(dst["value"])
                try:
                    return self.assign_lines(slot, self.expr(src, parser))
                except Unsupported:
                    return self.synthesize(op, slot)
            raise Unsupported(f"assign to {dst.get('type')}")
        if op == "assign_header":
            return self.header_copy(params[0]["value"], params[1]["value"])
        if op in ("add_header", "setValid"):
            return self.set_valid(params[0]["value"])
        if op in ("remove_header", "setInvalid"):
            h = self.phv.header(params[0]["value"])
            # BMv2 remove_header: the packet's length register loses the header's bytes
            return [f"if p[{h.valid}]:", f"    p[{h.valid}] = 0; p[{self.phv.regs['length']}] -= {h.bits // 8}"]
        if op in ("mark_to_drop", "drop"):
            return self.drop()
        if op == "exit":
            return ["return 1"]
        if op in ("push", "push_front", "pop", "pop_front"):
            stack = params[0].get("value")
            if stack not in self.phv.stacks:
                raise UserError(f"{self.phv.path}: {op}: expected a known header stack, found {stack!r}")
            lines = self.stack_shift(stack, _hex(params[1].get("value")), op.startswith("push"))
            if op == "push_front":  # P4_16 push_front leaves the new elements invalid
                for h in self.phv.stacks[stack][: _hex(params[1].get("value"))]:
                    lines.append(f"p[{self.phv.header(h).valid}] = 0")
            return lines
        if op in IGNORED:
            return []
        ext = self.extern(op, params, parser)
        if ext is not None:
            return ext
        if op in SYNTHESIZED and SYNTHESIZED[op] is not None:
            i = SYNTHESIZED[op]
            if i < len(params) and params[i].get("type") == "field":
                return self.synthesize(op, self.phv.field_slot(params[i]["value"]))
        # anything else: executed as a no-op, its field outputs (if any) marked synthesized
        outs = [self.phv.field_slot(x["value"]) for x in params if isinstance(x, dict) and x.get("type") == "field"]
        lines = [f"U[{op!r}] = U.get({op!r}, 0) + 1"] if isinstance(op, str) and op.isidentifier() else []
        self.unsupported.add(str(op))
        self.synth_slots.update(outs[:1])
        return lines + [f"T.add({s})" for s in outs[:1]]

    def synthesize(self, op: str, slot: int) -> list[str]:
        """The field written by ``op`` is not computed: mark it for drawing from the entries."""
        self.unsupported.add(op)
        self.synth_slots.add(slot)
        return [f"T.add({slot})"]

    def action(self, name: str, prims: list, parser: bool = False) -> str:
        """Body lines (indented 4) of a function running ``prims``. An error
        names the action, the primitive and its P4 source line."""
        body: list[str] = []
        for i, pr in enumerate(prims):
            if not isinstance(pr, dict):
                raise UserError(f"{self.phv.path}: action {name}: expected primitives as objects")
            where = f"action {name}, primitive {i} ({pr.get('op')}{source_of(pr)})"
            try:
                body += self.primitive(pr, parser)
            except Unsupported as e:
                self.unsupported.add(f"{pr.get('op')} ({e})")
            except UserError as e:
                raise located(e, self.phv.path, where) from None
            except (IndexError, KeyError, TypeError, AttributeError, ValueError):
                raise UserError(f"{self.phv.path}: {where}: expected well-formed parameters") from None
        return "\n".join("    " + ln for ln in body) or "    pass"


def source_of(node: dict) -> str:
    """``, FILE:LINE "fragment"`` from p4c's ``source_info``, or nothing."""
    si = node.get("source_info")
    if not isinstance(si, dict) or "line" not in si:
        return ""
    frag = str(si.get("source_fragment", "")).split("\n", 1)[0][:60]
    return f", {si.get('filename', '?')}:{si['line']}" + (f" {frag!r}" if frag else "")


def located(e: UserError, path: str, where: str) -> UserError:
    """``e``, raised where only the file is known, with the place in it added."""
    msg = str(e)
    rest = msg[len(path) + 2:] if msg.startswith(f"{path}: ") else msg
    return UserError(f"{path}: {where}: {rest}")

"""Table entries of a P4 program, read from the files P4 users have.

Two formats, told apart by their first non-blank character (``{`` is JSON):

(a) ``simple_switch_CLI`` commands, one per line (``#`` starts a comment)::

        table_add TABLE ACTION MATCH... => PARAMS... [PRIORITY]
        table_set_default TABLE ACTION PARAMS...

    A match is written per key field, in key order: ``V`` (exact, optional),
    ``V/LEN`` (lpm), ``V&&&MASK`` (ternary, optional), ``LO->HI`` (range).
    Values are decimal, ``0x`` hex, ``0b`` binary, IPv4 ``10.0.0.1``, IPv6
    ``2001:db8::1`` or MAC ``00:11:22:33:44:55``. Tables with a ternary, range
    or optional field need the trailing PRIORITY (BMv2: lower wins). A key
    on a slice of a field (``ipv4.srcAddr[31:24]``) is written, as
    simple_switch_CLI reads it, at the *full field's* width and ANDed with
    the slice (``0x0b000000&&&0xff000000`` for 11 in the top byte; bits
    outside the slice are dropped, with a warning).

    Tables behind an action profile or selector (BMv2 ``indirect`` /
    ``indirect_ws``) take the member and group commands:
    ``act_prof_create_member``, ``act_prof_create_group``,
    ``act_prof_add_member_to_group``, ``act_prof_remove_member_from_group``,
    ``table_indirect_add[_with_group]``, ``table_indirect_set_default[_with_group]``
    and the legacy ``table_indirect_*`` forms of the profile commands (refused
    on a profile shared by several tables, as simple_switch_CLI does).
    Handles count from 0 per profile, as BMv2 gives them; an entry pointing
    at a group carries the group's members in ascending handle
    (:attr:`Entry.group`), from which a selector picks per packet. As
    simple_switch_CLI, ``table_add`` and ``table_set_default`` on such a
    table are refused (BMv2: WRONG_TABLE_TYPE), and so is a group without
    members (EMPTY_GRP).

    What the file configures besides entries goes to :attr:`Entries.switch`
    (:class:`~synapse_vmt.p4.externs.SwitchConfig`): ``mirroring_add``,
    ``mirroring_add_mc``, ``mirroring_delete``; ``mc_mgrp_create``,
    ``mc_node_create RID PORT...``, ``mc_node_associate``,
    ``mc_node_dissociate``, ``mc_node_update``, ``mc_node_destroy``,
    ``mc_mgrp_destroy`` (LAGs are not modelled); ``meter_set_rates`` (a
    direct meter's index is an entry handle of its table) and
    ``meter_array_set_rates``; ``register_write``, ``register_reset``;
    ``set_crc16_parameters``, ``set_crc32_parameters``. Commands that only
    read or dump state, or set queue timing, are skipped;
    ``table_delete``/``table_modify`` and the like are errors.

    simple_switch_CLI runs the previous command again on a blank line (a
    repeated ``act_prof_create_member`` shifts every later member handle);
    Synapse skips blank lines and warns (:attr:`Entries.warnings`).

(b) The P4 tutorials' runtime JSON (``p4runtime_lib``)::

        {"table_entries": [{"table": T, "match": {FIELD: V | [V, LEN] | [V, MASK] | [LO, HI]},
                            "action_name": A, "action_params": {P: V}, "priority": N},
                           {"table": T, "default_action": true, "action_name": A, "action_params": {}}]}

    FIELD is the key's P4Runtime name (``hdr.ipv4.dstAddr``; BMv2's
    ``key[].name``) or its ``header.field``. As in P4Runtime, a ternary, lpm,
    range or optional field left out is a wildcard; priorities follow
    P4Runtime (higher wins) and must be >= 1. A key on a slice of a field
    takes the slice's value (``11`` for ``ipv4.srcAddr[31:24]``).

    Tables behind an action profile take, as P4Runtime writes them, members
    and groups, and entries naming one instead of an action::

        "action_profile_members": [{"action_profile": P, "member_id": N, "action_name": A, "action_params": {}}],
        "action_profile_groups": [{"action_profile": P, "group_id": G, "members": [N, ...]}],
        "table_entries": [{"table": T, "match": {...}, "group_id": G}, {"table": T, "match": {...}, "member_id": N}]

    A selector picks among a group's members in the order the members were
    written (BMv2's member handles).

Table and action names are BMv2's full names (``PreQosPipe.sessions_uplink``)
or short names when unambiguous (``sessions_uplink``).

**Priorities are normalised to P4Runtime's convention: a larger number wins.**
A CLI priority ``p`` (BMv2: smaller wins) is stored as ``PRIO_MAX - p``;
:func:`format_cli` writes it back as ``p``. Within a table
(:class:`TableEntries`) entries are in match order, index 0 first: ternary
tables by priority, then file order; lpm tables by prefix length, longest
first, then file order; exact tables in file order (their keys are unique).

Everything is checked against the program (:class:`~synapse_vmt.p4.bmv2.P4Program`):
unknown table, field or action (or an action the table does not allow),
the number of match fields and action parameters, a value wider than its
field or parameter, a missing priority, a duplicate key, more entries than
``max_size``, a const default action, entries for a table with ``const
entries`` (those are read from the program and kept). Each is a one-line
:class:`~synapse_vmt.errors.UserError` naming ``file:line`` (CLI) or
``file: entry N`` (JSON, N counted from 0 in ``table_entries``).
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from synapse_vmt.errors import UserError, read_text
from synapse_vmt.p4.bmv2 import ActionInfo, P4Program, TableSpec, read_program
from synapse_vmt.p4.cfg import KeyField
from synapse_vmt.p4.externs import SwitchConfig
from synapse_vmt.p4.hashes import CrcConfig

#: Largest priority; a CLI priority p is stored as PRIO_MAX - p (see the module doc).
PRIO_MAX = 2**31 - 1

#: CLI commands that do not change what packets do (reads, dumps, queue
#: timing, ports): skipped.
CLI_IGNORED = re.compile(
    r"^(mirroring_get|mc_dump|register_read|counter_\w+|meter_get_rates|set_queue_\w+|port_\w+|"
    r"show_\w+|get_time_\w+|switch_info|serialize_state|write_config_to_file|load_new_config_file|swap_configs|"
    r"help|greet|shell|pvs_get|table_(dump\w*|info|num_entries|show_actions|get\w*)|act_prof_(dump\w*|show\w*))$"
)
#: Entry commands of the CLI that this reader does not support (an error, not skipped).
CLI_UNSUPPORTED = re.compile(r"^(table_\w+|act_prof_\w+)$")


@dataclass(frozen=True)
class Match:
    """How one key field matches (the P4 view). Per ``kind``:

    - ``exact``: ``value``;
    - ``lpm``: ``value`` (bits past the prefix cleared), ``prefix_len``, and
      ``mask`` the prefix's mask;
    - ``ternary``: ``value & mask``, ``mask``;
    - ``range``: ``lo``, ``hi`` (inclusive), ``value == lo``;
    - ``optional``: ``value`` and ``mask`` all ones, or 0 and 0 (wildcard).
    """

    kind: str
    value: int
    mask: int | None = None
    prefix_len: int | None = None
    lo: int | None = None
    hi: int | None = None

    def matches(self, v: int) -> bool:
        """Does a packet whose field holds ``v`` match?"""
        if self.kind == "exact":
            return v == self.value
        if self.kind == "range":
            assert self.lo is not None and self.hi is not None
            return self.lo <= v <= self.hi
        assert self.mask is not None
        return v & self.mask == self.value

    def key(self) -> tuple:
        return (self.kind, self.value, self.mask, self.lo, self.hi)


def sample_value(m: Match, width: int, rng) -> int:
    """A field value that ``m`` matches, drawn with ``rng`` (a
    ``random.Random``): bits outside an lpm/ternary mask are random, a range
    gives any value in [lo, hi]."""
    if m.kind == "exact":
        return m.value
    if m.kind == "range":
        assert m.lo is not None and m.hi is not None
        return rng.randint(m.lo, m.hi)
    assert m.mask is not None
    return m.value | (rng.getrandbits(width) & ~m.mask & _full(width))


def sample_key(entry: Entry, table: TableSpec, rng) -> dict[str, int]:
    """Key field values (by ``header.field``) that hit ``entry``: traffic
    drawn from a table's entries. (A higher-priority entry may still win.)"""
    return {kf.field: sample_value(entry.matches[kf.field], kf.width, rng) for kf, _ in match_fields(table)}


def wildcard(kf: KeyField) -> Match:
    """The match-anything Match of a non-exact field (P4Runtime: field omitted)."""
    if kf.match == "lpm":
        return Match("lpm", 0, 0, 0)
    if kf.match == "range":
        return Match("range", 0, lo=0, hi=(1 << kf.width) - 1)
    return Match(kf.match, 0, 0)


@dataclass
class Entry:
    """One table entry: a Match per key field (keyed by ``header.field``, in
    key order), the action, its parameters by name, the priority (normalised:
    larger wins; None for exact and lpm tables) and where it was written."""

    table: str
    matches: dict[str, Match]
    action: str
    params: dict[str, int]
    priority: int | None
    source: str
    #: An entry pointing at an action selector's group: the group's members
    #: ``(action, params)`` in ascending member handle (the order a selector
    #: picks from); ``action``/``params`` are then the first member's.
    group: tuple[tuple[str, dict[str, int]], ...] | None = None
    #: BMv2's entry handle (the table's entries numbered from 0 in the order
    #: they were added): what ``meter_set_rates`` names for a direct meter.
    handle: int | None = None
    #: The P4Runtime member or group the entry was written with: ("member" | "group", id).
    ref: tuple[str, int] | None = None

    def matches_key(self, values: dict[str, int]) -> bool:
        """Does a packet whose key fields hold ``values`` match this entry?"""
        return all(m.matches(values[f]) for f, m in self.matches.items())

    def key(self) -> tuple:
        return tuple(m.key() for m in self.matches.values()) + (self.priority,)


@dataclass
class TableEntries:
    """A table's entries in match order (index 0 wins) and its default action
    (the file's ``table_set_default``, else the program's default entry)."""

    table: str
    entries: list[Entry] = field(default_factory=list)
    default: tuple[str, dict[str, int]] | None = None
    #: A default pointing at a selector's group (``table_indirect_set_default_with_group``):
    #: its members as :attr:`Entry.group`; ``default`` is then the first member's.
    default_group: tuple[tuple[str, dict[str, int]], ...] | None = None

    def lookup(self, values: dict[str, int]) -> Entry | None:
        """The entry a packet with these key values hits (a linear oracle)."""
        for e in self.entries:
            if e.matches_key(values):
                return e
        return None


class Entries(dict):
    """What an entries file gives a run: table name -> :class:`TableEntries`
    (every keyed table of the program, in CFG order), plus ``switch``, what
    the file configures besides entries (mirroring sessions, multicast
    groups, meter rates, register values: :class:`~synapse_vmt.p4.externs.SwitchConfig`),
    and ``warnings``, one line each naming ``file:line``."""

    def __init__(self, tables=(), switch: SwitchConfig | None = None, warnings: list[str] | None = None):
        super().__init__(tables)
        self.switch = switch if switch is not None else SwitchConfig()
        self.warnings = list(warnings or [])


# --- values ---

_MAC = re.compile(r"^[0-9a-fA-F]{1,2}([:-][0-9a-fA-F]{1,2}){5}$")
_IPV4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")


def parse_value(text: object) -> int:
    """A value as the CLI and the tutorials write it: an int, or a string in
    decimal, 0x hex, 0b binary, IPv4, IPv6 or MAC notation. ValueError if not."""
    if isinstance(text, bool):
        raise ValueError(f"a number or address, found {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"a non-negative value, found {text}")
        return text
    if not isinstance(text, str) or not text:
        raise ValueError(f"a number or address, found {text!r}")
    s = text.strip()
    if s.isdigit():  # the common case first; also takes leading zeros ("010"), as the CLI does
        return int(s)
    if s[:2] in ("0x", "0X", "0b", "0B"):
        try:
            return int(s, 0)
        except ValueError:
            raise ValueError(f"a number (decimal, 0x hex, 0b binary) or an address, found {s!r}") from None
    if _MAC.match(s):
        return int("".join(p.zfill(2) for p in re.split("[:-]", s)), 16)
    if _IPV4.match(s):
        try:
            return int(ipaddress.IPv4Address(s))
        except ValueError:
            raise ValueError(f"an IPv4 address, found {s!r}") from None
    if ":" in s:
        try:
            return int(ipaddress.IPv6Address(s))
        except ValueError:
            raise ValueError(f"an IPv6 or MAC address, found {s!r}") from None
    try:
        v = int(s, 0)
    except ValueError:
        try:  # int(.., 0) rejects leading zeros ("010"), the CLI's int() does not
            v = int(s, 10)
        except ValueError:
            raise ValueError(f"a number (decimal, 0x hex, 0b binary) or an address, found {s!r}") from None
    if v < 0:
        raise ValueError(f"a non-negative value, found {s!r}")
    return v


def _full(width: int) -> int:
    return (1 << width) - 1


def _prefix_mask(width: int, plen: int) -> int:
    return _full(width) ^ _full(width - plen)


# --- validation shared by both formats ---


def _hx(where: str, x: object) -> object:
    """A BMv2 JSON hex string as an int (other values pass, to be checked later)."""
    if isinstance(x, str):
        try:
            return int(x, 16)
        except ValueError:
            raise UserError(f"{where}: expected a hex string, found {x!r}") from None
    return x


class _Loader:
    def __init__(self, prog: P4Program, path: str):
        self.prog = prog
        self.path = path
        self.out: dict[str, TableEntries] = {
            n: TableEntries(n, [], t.default) for n, t in prog.tables.items()
        }
        self.seen: dict[str, dict[tuple, str]] = {n: {} for n in prog.tables}
        self.handles: dict[str, int] = {n: 0 for n in prog.tables}
        self.warnings: list[str] = []
        self.switch = SwitchConfig()
        for t in prog.tables.values():
            for i, raw in enumerate(t.const_entries):
                self.const_entry(t, i, raw)

    def const_entry(self, t: TableSpec, i: int, raw: object) -> None:
        """One of the program's own entries (BMv2 JSON ``entries``: hex
        strings; ``priority`` in BMv2's convention, smaller wins)."""
        where = f"{self.prog.path}: table {t.name} entries[{i}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("match_key"), list) or not isinstance(raw.get("action_entry"), dict):
            raise UserError(f"{where}: expected an object with match_key and action_entry")
        fields = match_fields(t)
        mk = raw["match_key"]
        if len(mk) != len(fields):
            raise UserError(f"{where}: expected {len(fields)} match_key items, found {len(mk)}")
        matches = {}
        for (kf, _), m in zip(fields, mk):
            if not isinstance(m, dict):
                raise UserError(f"{where}: expected match_key items as objects")
            mt = m.get("match_type")
            if mt == "valid":
                form, parts = "value", (int(bool(m.get("key"))),)
            elif mt == "lpm":
                form, parts = "lpm", (_hx(where, m.get("key")), m.get("prefix_length"))
            elif mt == "ternary" or (mt == "optional" and "mask" in m):
                form, parts = "ternary", (_hx(where, m.get("key")), _hx(where, m.get("mask")))
            elif mt == "range":
                form, parts = "range", (_hx(where, m.get("start")), _hx(where, m.get("end")))
            else:
                form, parts = "value", (_hx(where, m.get("key")),)
            matches[kf.field] = self.match(where, t, kf, (form, parts))
        ae = raw["action_entry"]
        act = next((a for a in t.actions if a.id == ae.get("action_id")), None)
        if act is None:
            raise UserError(f"{where}: expected an action_id among the table's actions")
        data = ae.get("action_data", [])
        vals = [_hx(where, x) for x in data] if isinstance(data, list) else [None]
        params = self.params(where, t, act, vals)
        prio = None
        if t.needs_priority:
            p = raw.get("priority", i + 1)
            prio = PRIO_MAX - p if isinstance(p, int) and 0 <= p < PRIO_MAX else self.priority(where, t, p, cli=True)
        e = Entry(t.name, matches, act.name, params, prio, where, handle=self.handles[t.name])
        self.handles[t.name] += 1
        self.out[t.name].entries.append(e)
        self.seen[t.name][e.key()] = where

    def table(self, where: str, name: object) -> TableSpec:
        if not isinstance(name, str):
            raise UserError(f"{where}: expected a table name, found {name!r}")
        t = self.prog.table(name)
        if t is None:
            hint = difflib.get_close_matches(name, list(self.prog.tables), n=1)
            more = f" (did you mean {hint[0]!r}?)" if hint else ""
            amb = [n for n in self.prog.tables if n.endswith("." + name)]
            if len(amb) > 1:
                more = f" (ambiguous short name: {', '.join(amb)})"
            raise UserError(f"{where}: unknown table {name!r}: not a keyed table of {self.prog.path}{more}")
        return t

    def action(self, where: str, t: TableSpec, name: object) -> ActionInfo:
        if not isinstance(name, str):
            raise UserError(f"{where}: expected an action name, found {name!r}")
        a = t.action(name)
        if a is None:
            allowed = ", ".join(x.name for x in t.actions)
            raise UserError(f"{where}: action {name!r} is not an action of table {t.name} (its actions: {allowed})")
        return a

    def params(self, where: str, t: TableSpec, a: ActionInfo, values: list[object]) -> dict[str, int]:
        if len(values) != len(a.params):
            sig = ", ".join(f"{p.name}:{p.width}" for p in a.params) or "none"
            raise UserError(
                f"{where}: action {a.name} of table {t.name} takes {len(a.params)} parameters ({sig}), found {len(values)}"
            )
        out = {}
        for p, v in zip(a.params, values):
            out[p.name] = self.value(f"{where}: parameter {p.name} of {a.name}", v, p.width)
        return out

    def value(self, what: str, v: object, width: int) -> int:
        try:
            x = parse_value(v)
        except ValueError as e:
            raise UserError(f"{what}: expected {e}") from None
        if x >> width:
            raise UserError(f"{what}: value {v} does not fit in {width} bits")
        return x

    def match(self, where: str, t: TableSpec, kf: KeyField, kind_value: tuple) -> Match:
        """Build a Match from a parsed (form, parts) pair; ``form`` is how it was written."""
        w = kf.width
        what = f"{where}: field {kf.field} ({kf.match}, {w} bits) of {t.name}"
        form, parts = kind_value
        k = kf.match
        if k in ("exact", "valid"):
            if form != "value":
                raise UserError(f"{what}: expected a single value for an exact match")
            return Match("exact", self.value(what, parts[0], w))
        if k == "lpm":
            if form == "value":  # a bare value on an lpm field: a full-length prefix
                parts, form = (parts[0], w), "lpm"
            if form != "lpm":
                raise UserError(f"{what}: expected VALUE/PREFIX_LEN")
            v = self.value(what, parts[0], w)
            plen = parts[1]
            if isinstance(plen, str):
                if not plen.isdigit():
                    raise UserError(f"{what}: expected a prefix length, found {plen!r}")
                plen = int(plen)
            if not isinstance(plen, int) or isinstance(plen, bool) or not 0 <= plen <= w:
                raise UserError(f"{what}: expected a prefix length in 0..{w}, found {parts[1]!r}")
            m = _prefix_mask(w, plen)
            return Match("lpm", v & m, m, plen)
        if k in ("ternary", "optional"):
            if form == "value":
                v = self.value(what, parts[0], w)
                return Match(k, v, _full(w))
            if form != "ternary":
                raise UserError(f"{what}: expected VALUE&&&MASK")
            v = self.value(what, parts[0], w)
            m = self.value(f"{what}: mask", parts[1], w)
            if k == "optional" and m not in (0, _full(w)):
                raise UserError(f"{what}: expected an optional match: mask 0 (any) or all ones, found {parts[1]}")
            return Match(k, v & m, m)
        if k == "range":
            if form == "value":
                parts, form = (parts[0], parts[0]), "range"
            if form != "range":
                raise UserError(f"{what}: expected LO->HI")
            lo = self.value(what, parts[0], w)
            hi = self.value(what, parts[1], w)
            if lo > hi:
                raise UserError(f"{what}: expected LO <= HI, found {parts[0]}->{parts[1]}")
            return Match("range", lo, lo=lo, hi=hi)
        raise UserError(f"{what}: match kind {k!r} is not supported for entries")

    def cli_slice(self, where: str, t: TableSpec, kf: KeyField, kind_value: tuple) -> tuple:
        """A CLI match on a key that is a slice of a field, as simple_switch_CLI
        reads it: value, mask, prefix and range at the *full field's* width,
        ANDed with the slice's bits; returned at the slice's width (the form
        :meth:`match` takes, as runtime JSON and P4Runtime write it)."""
        if not kf.slice_mask:
            return kind_value
        fw, sm = kf.full_width, kf.slice_mask
        tz = (sm & -sm).bit_length() - 1
        what = f"{where}: field {kf.field} ({kf.match}, bits {tz + kf.width - 1}..{tz} of {fw}) of {t.name}"
        form, parts = kind_value
        lost = 0

        def cut(v: object, label: str = "") -> int:
            nonlocal lost
            x = self.value(f"{what}{label}", v, fw)
            lost |= x & ~sm
            return (x & sm) >> tz

        if form == "lpm":
            plen = parts[1]
            if not (isinstance(plen, str) and plen.isdigit() and int(plen) <= fw):
                raise UserError(f"{what}: expected a prefix length in 0..{fw} (the full field's), found {plen!r}")
            m = (_prefix_mask(fw, int(plen)) & sm) >> tz
            n = bin(m).count("1")
            if m != _prefix_mask(kf.width, n):
                raise UserError(f"{what}: prefix /{plen} of the full field is not a prefix of the key's slice")
            out = ("lpm", (cut(parts[0]), n))
        elif form == "ternary":
            out = ("ternary", (cut(parts[0]), cut(parts[1], ": mask")))
        elif form == "range":
            out = ("range", (cut(parts[0]), cut(parts[1])))
        else:
            out = (form, (cut(parts[0]),))
        if lost:
            self.warnings.append(
                f"{where}: field {kf.field}: bits outside the key's slice {hex(sm)} are ignored, as simple_switch_CLI "
                f"does: it reads values and masks at the full field's {fw} bits (a slice value v is written v << {tz})")
        return out

    def priority(self, where: str, t: TableSpec, p: object, cli: bool) -> int | None:
        if not t.needs_priority:
            if p is not None and p != 0:  # P4Runtime writes 0 for "no priority"
                raise UserError(f"{where}: table {t.name} ({t.match_type}) takes no priority, found {p}")
            return None
        if p is None:
            raise UserError(
                f"{where}: table {t.name} has a ternary, range or optional field: expected a priority"
                + (" after the action parameters" if cli else ' ("priority": N)')
            )
        if isinstance(p, str):
            try:
                p = int(p, 0)
            except ValueError:
                raise UserError(f"{where}: expected an integer priority, found {p!r}") from None
        if not isinstance(p, int) or isinstance(p, bool):
            raise UserError(f"{where}: expected an integer priority, found {p!r}")
        if cli:
            if not 0 <= p < PRIO_MAX:
                raise UserError(f"{where}: expected a priority in 0..{PRIO_MAX - 1}, found {p}")
            return PRIO_MAX - p
        if not 1 <= p <= PRIO_MAX:
            raise UserError(f"{where}: expected a priority in 1..{PRIO_MAX} (P4Runtime), found {p}")
        return p

    def add(self, where: str, t: TableSpec, matches: dict[str, Match], a: ActionInfo, params: dict[str, int], prio,
            source: str | None = None):
        if t.const_entries:
            raise UserError(f"{where}: table {t.name} has const entries in the program and takes no others")
        te = self.out[t.name]
        e = Entry(t.name, matches, a.name, params, prio, source or where, handle=self.handles[t.name])
        k = e.key()
        first = self.seen[t.name].get(k)
        if first is not None:
            raise UserError(f"{where}: duplicate key in table {t.name} (first written at {first})")
        if t.info.max_size and len(te.entries) >= t.info.max_size:
            raise UserError(f"{where}: table {t.name} is full (max_size {t.info.max_size})")
        self.seen[t.name][k] = where
        self.handles[t.name] += 1
        te.entries.append(e)
        return e

    def set_default(self, where: str, t: TableSpec, a: ActionInfo, params: dict[str, int]):
        if t.default_const:
            raise UserError(f"{where}: the default action of table {t.name} is const in the program")
        self.out[t.name].default = (a.name, params)

    def finish(self) -> Entries:
        for n, te in self.out.items():
            t = self.prog.tables[n]
            te.entries = sort_entries(t, te.entries)
        return Entries(self.out, self.switch, self.warnings)


def match_fields(t: TableSpec) -> tuple[tuple[KeyField, str], ...]:
    """The key fields an entry gives a value for (selector fields are hashed,
    not matched), each with its P4Runtime name."""
    return t.match_fields


def sort_entries(t: TableSpec, entries: list[Entry]) -> list[Entry]:
    """Entries in match order (stable: ties keep file order)."""
    if t.match_type == "ternary":
        return sorted(entries, key=lambda e: -(e.priority or 0))
    if t.match_type == "lpm":
        return sorted(entries, key=lambda e: -sum(m.prefix_len or 0 for m in e.matches.values() if m.kind == "lpm"))
    return list(entries)


# --- format (a): simple_switch_CLI ---


def _cli_token(tok: str) -> tuple:
    if "&&&" in tok:
        v, m = tok.split("&&&", 1)
        return ("ternary", (v, m))
    if "->" in tok:
        lo, hi = tok.split("->", 1)
        return ("range", (lo, hi))
    if "/" in tok:
        v, plen = tok.rsplit("/", 1)
        return ("lpm", (v, plen))
    return ("value", (tok,))


class _Profile:
    """An action profile's members ((action, params) by handle; None once
    deleted) and groups (sets of member handles), numbered from 0 as BMv2
    gives handles; ``tables`` use it, ``selector`` whether it has one."""

    def __init__(self, name: str, table: TableSpec, selector: bool):
        self.name = name
        self.table = table  # a table using it: the actions members may run
        self.tables = 1
        self.selector = selector
        self.members: list[tuple[ActionInfo, dict[str, int]]] = []
        self.groups: list[set[int]] = []

    def handle(self, where: str, tok: str, what: str) -> int:
        n = len(self.members) if what == "member" else len(self.groups)
        if not tok.isdigit() or int(tok) >= n:
            raise UserError(f"{where}: expected a {what} handle of action profile {self.name} (0..{n - 1}), found {tok!r}")
        return int(tok)

    def group_members(self, g: int) -> tuple[tuple[str, dict[str, int]], ...]:
        """The group's members in ascending handle, the order BMv2's selector indexes."""
        return tuple((self.members[m][0].name, dict(self.members[m][1])) for m in sorted(self.groups[g]))


def _split_match(where: str, t: TableSpec, rest: list[str], what: str) -> tuple[list[str], list[str]]:
    if "=>" not in rest:
        raise UserError(f"{where}: expected '=>' between the match fields and the {what}")
    i = rest.index("=>")
    mtoks, ptoks = rest[:i], rest[i + 1 :]
    fields = match_fields(t)
    if len(mtoks) != len(fields):
        sig = ", ".join(f"{kf.field}:{kf.match}" for kf, _ in fields)
        raise UserError(f"{where}: table {t.name} has {len(fields)} key fields ({sig}), found {len(mtoks)} match values")
    return mtoks, ptoks


def _int(where: str, tok: str, what: str) -> int:
    try:
        v = int(tok, 0)
    except ValueError:
        raise UserError(f"{where}: expected {what} (an integer), found {tok!r}") from None
    if v < 0:
        raise UserError(f"{where}: expected {what} >= 0, found {tok}")
    return v


def _rates(where: str, toks: list[str], n: int) -> list[tuple[float, int]]:
    """``RATE:BURST`` pairs as simple_switch_CLI reads them (units per microsecond, units)."""
    if len(toks) != n:
        raise UserError(f"{where}: expected {n} rates RATE:BURST (units per microsecond : burst units), found {len(toks)}")
    out = []
    for tok in toks:
        try:
            r, b = tok.split(":")
            rate, burst = float(r), int(b)
        except ValueError:
            raise UserError(f"{where}: expected RATE:BURST (e.g. 0.0125:1500), found {tok!r}") from None
        if not (rate >= 0 and burst >= 0) or rate == float("inf"):
            raise UserError(f"{where}: expected a rate and a burst >= 0, found {tok!r}")
        out.append((rate, burst))
    for a, b in zip(out, out[1:]):
        if a[0] > b[0]:
            raise UserError(f"{where}: expected rates smallest first (committed, then peak), found {a[0]} then {b[0]}")
    return out


def _bool(where: str, tok: str) -> bool:
    if tok in ("true", "True"):
        return True
    if tok in ("false", "False"):
        return False
    return bool(_int(where, tok, "a boolean (true, false, 0 or 1)"))


_INDIRECT_HINT = ("write its entries with act_prof_create_member and table_indirect_add "
                  "(or act_prof_create_group, act_prof_add_member_to_group and table_indirect_add_with_group)")


def _load_cli(text: str, path: str, prog: P4Program) -> Entries:
    """simple_switch_CLI commands, read as simple_switch_CLI reads them (see the module doc)."""
    from synapse_vmt.p4.bmv2 import resolve_name

    ld = _Loader(prog, path)
    sw = ld.switch
    profiles: dict[str, _Profile] = {}
    for t in prog.tables.values():
        if t.action_profile is None:
            continue
        if t.action_profile in profiles:
            profiles[t.action_profile].tables += 1
        else:
            sel = prog.profiles.get(t.action_profile, t.kind == "indirect_ws")
            profiles[t.action_profile] = _Profile(t.action_profile, t, sel)
    # group entries are resolved at the end: a group's members may change after the entry is written
    pending: list[tuple[Entry | TableEntries, _Profile, int]] = []
    mc_nodes: list[tuple[int, list[int]] | None] = []  # node handle -> (rid, ports)
    mc_members: dict[int, list[int]] = {}  # group -> node handles, in association order

    def direct(where: str, t: TableSpec, cmd: str) -> None:
        if t.action_profile is not None:
            raise UserError(f"{where}: {cmd} on table {t.name}, an indirect table (action profile {t.action_profile}): "
                            f"simple_switch_CLI refuses it (WRONG_TABLE_TYPE); {_INDIRECT_HINT}")

    def profile_of_table(where: str, name: str, cmd: str, selector: bool = False) -> tuple[TableSpec, _Profile]:
        t = ld.table(where, name)
        if t.action_profile is None:
            raise UserError(f"{where}: {cmd}: table {t.name} is not an indirect table (write its entries with table_add)")
        pr = profiles[t.action_profile]
        if selector and not pr.selector:
            raise UserError(f"{where}: {cmd}: table {t.name}'s action profile {pr.name} has no selector (no groups)")
        return t, pr

    def profile(where: str, cmd: str, name: str) -> tuple[TableSpec, _Profile]:
        if cmd.startswith("table_"):  # the deprecated per-table forms
            t, pr = profile_of_table(where, name, cmd)
            if pr.tables > 1:
                raise UserError(f"{where}: {cmd}: action profile {pr.name} is shared by {pr.tables} tables; "
                                f"simple_switch_CLI refuses the legacy table_indirect_* commands there "
                                f"(use {cmd.replace('table_indirect_', 'act_prof_')} {pr.name} ...)")
            return t, pr
        pr = resolve_name(name, profiles)
        if pr is None:
            known = ", ".join(profiles) or "none"
            raise UserError(f"{where}: unknown action profile {name!r} (the program's: {known})")
        return pr.table, pr

    def extern(where: str, name: str, kind: str):
        x = resolve_name(name, {n: e for n, e in prog.externs.items() if e.kind == kind})
        if x is None:
            known = ", ".join(n for n, e in prog.externs.items() if e.kind == kind) or "none"
            raise UserError(f"{where}: unknown {kind} {name!r} (the program's: {known})")
        return x

    def index(where: str, tok: str, size: int, what: str) -> int:
        i = _int(where, tok, what)
        if i >= size:
            raise UserError(f"{where}: expected {what} in 0..{size - 1}, found {i}")
        return i

    def matches_of(where, t, mtoks):
        fields = match_fields(t)
        return {kf.field: ld.match(where, t, kf, ld.cli_slice(where, t, kf, _cli_token(tok)))
                for (kf, _), tok in zip(fields, mtoks)}

    def split_prio(where, t, ptoks, n_params, what):
        """Pop the priority off the tokens after '=>' (tables that need one)."""
        if t.needs_priority and len(ptoks) == n_params + 1:
            return ptoks[:-1], ptoks[-1]
        if t.needs_priority and len(ptoks) == n_params:
            ld.priority(where, t, None, cli=True)  # raises: missing priority
        if len(ptoks) != n_params:
            raise UserError(f"{where}: expected {what} after '=>'" + (" and a priority" if t.needs_priority else "")
                            + f", found {len(ptoks)} values")
        return ptoks, None

    last = None  # the last line with a command: simple_switch_CLI runs it again on a blank line
    for ln, raw in enumerate(text.splitlines(), 1):
        where = f"{path}:{ln}"
        if not raw.strip():
            if last is not None:
                ld.warnings.append(f"{where}: blank line: simple_switch_CLI runs the previous command again here "
                                   f"({last[1]}, line {last[0]}); Synapse skips it")
            continue
        line = raw.split("#", 1)[0].strip()
        if not line:
            last = None  # simple_switch_CLI repeats the comment: an unknown command, no effect
            continue
        last = (ln, line if len(line) <= 60 else line[:57] + "...")
        toks = line.split()
        cmd, args = toks[0], toks[1:]
        if CLI_IGNORED.match(cmd):
            continue
        if cmd == "table_set_default":
            if len(args) < 2:
                raise UserError(f"{where}: expected table_set_default TABLE ACTION PARAMS...")
            t = ld.table(where, args[0])
            direct(where, t, cmd)
            a = ld.action(where, t, args[1])
            ld.set_default(where, t, a, ld.params(where, t, a, list(args[2:])))
        elif cmd == "table_add":
            if len(args) < 2:
                raise UserError(f"{where}: expected table_add TABLE ACTION MATCH... => PARAMS... [PRIORITY]")
            t = ld.table(where, args[0])
            direct(where, t, cmd)
            a = ld.action(where, t, args[1])
            mtoks, ptoks = _split_match(where, t, args[2:], "action parameters")
            prio = None
            if t.needs_priority and len(ptoks) == len(a.params) + 1:
                ptoks, prio = ptoks[:-1], ptoks[-1]
            elif t.needs_priority and len(ptoks) == len(a.params):
                ld.priority(where, t, None, cli=True)  # raises: missing priority
            params = ld.params(where, t, a, list(ptoks))
            ld.add(where, t, matches_of(where, t, mtoks), a, params, ld.priority(where, t, prio, cli=True))
        elif cmd in ("table_indirect_create_member", "act_prof_create_member"):
            if len(args) < 2:
                raise UserError(f"{where}: expected {cmd} {'TABLE' if cmd.startswith('table') else 'PROFILE'} ACTION PARAMS...")
            t, pr = profile(where, cmd, args[0])
            a = ld.action(where, t, args[1])
            pr.members.append((a, ld.params(where, t, a, list(args[2:]))))
        elif cmd in ("table_indirect_create_group", "act_prof_create_group"):
            if len(args) != 1:
                raise UserError(f"{where}: expected {cmd} {'TABLE' if cmd.startswith('table') else 'PROFILE'}")
            pr = profile(where, cmd, args[0])[1]
            if not pr.selector:
                raise UserError(f"{where}: {cmd}: action profile {pr.name} has no selector (no groups)")
            pr.groups.append(set())
        elif cmd in ("table_indirect_add_member_to_group", "act_prof_add_member_to_group",
                     "table_indirect_remove_member_from_group", "act_prof_remove_member_from_group"):
            if len(args) != 3:
                raise UserError(f"{where}: expected {cmd} {'TABLE' if cmd.startswith('table') else 'PROFILE'} MEMBER GROUP")
            pr = profile(where, cmd, args[0])[1]
            m = pr.handle(where, args[1], "member")
            g = pr.handle(where, args[2], "group")
            if "add_member" in cmd:
                if m in pr.groups[g]:
                    raise UserError(f"{where}: member {m} is already in group {g} (BMv2: MBR_ALREADY_IN_GRP)")
                pr.groups[g].add(m)
            else:
                if m not in pr.groups[g]:
                    raise UserError(f"{where}: member {m} is not in group {g} (BMv2: MBR_NOT_IN_GRP)")
                pr.groups[g].discard(m)
        elif cmd in ("table_indirect_add", "table_indirect_add_with_group"):
            kind = "group" if cmd.endswith("group") else "member"
            if len(args) < 1:
                raise UserError(f"{where}: expected {cmd} TABLE MATCH... => {kind.upper()} [PRIORITY]")
            t, pr = profile_of_table(where, args[0], cmd, selector=kind == "group")
            mtoks, ptoks = _split_match(where, t, args[1:], f"{kind} handle")
            ptoks, prio = split_prio(where, t, ptoks, 1, f"a {kind} handle")
            h = pr.handle(where, ptoks[0], kind)
            if kind == "group" and not pr.groups[h]:
                raise UserError(f"{where}: group {h} of action profile {pr.name} has no members (BMv2: EMPTY_GRP)")
            a, params = pr.members[min(pr.groups[h])] if kind == "group" else pr.members[h]
            e = ld.add(where, t, matches_of(where, t, mtoks), a, dict(params), ld.priority(where, t, prio, cli=True))
            if kind == "group":
                pending.append((e, pr, h))
        elif cmd in ("table_indirect_set_default", "table_indirect_set_default_with_group"):
            kind = "group" if cmd.endswith("group") else "member"
            if len(args) != 2:
                raise UserError(f"{where}: expected {cmd} TABLE {kind.upper()}")
            t, pr = profile_of_table(where, args[0], cmd, selector=kind == "group")
            h = pr.handle(where, args[1], kind)
            if kind == "group" and not pr.groups[h]:
                raise UserError(f"{where}: group {h} of action profile {pr.name} has no members (BMv2: EMPTY_GRP)")
            a, params = pr.members[min(pr.groups[h])] if kind == "group" else pr.members[h]
            ld.set_default(where, t, a, dict(params))
            te = ld.out[t.name]
            te.default_group = None
            if kind == "group":
                pending.append((te, pr, h))
        elif cmd in ("mirroring_add", "mirroring_add_mc"):
            if len(args) != 2:
                raise UserError(f"{where}: expected {cmd} MIRROR_ID {'PORT' if cmd == 'mirroring_add' else 'MGRP'}")
            mid = _int(where, args[0], "a mirror id")
            if mid > 32767:  # simple_switch's MAX_MIRROR_SESSION_ID
                raise UserError(f"{where}: expected a mirror id in 0..32767, found {mid}")
            port, grp = sw.mirroring.get(mid, (None, None))
            if cmd == "mirroring_add":
                port = _int(where, args[1], "an egress port")
            else:
                grp = _int(where, args[1], "a multicast group")
            sw.mirroring[mid] = (port, grp)
        elif cmd == "mirroring_delete":
            if len(args) != 1 or _int(where, args[0], "a mirror id") not in sw.mirroring:
                raise UserError(f"{where}: expected mirroring_delete MIRROR_ID of a session added before")
            del sw.mirroring[int(args[0], 0)]
        elif cmd in ("mc_mgrp_create", "mc_mgrp_destroy"):
            if len(args) != 1:
                raise UserError(f"{where}: expected {cmd} GROUP")
            g = _int(where, args[0], "a multicast group")
            if g > 0xFFFF:
                raise UserError(f"{where}: expected a multicast group in 0..65535, found {g}")
            if cmd == "mc_mgrp_create":
                if g in mc_members:
                    raise UserError(f"{where}: multicast group {g} exists already")
                mc_members[g] = []
            elif mc_members.pop(g, None) is None:
                raise UserError(f"{where}: expected a multicast group created before, found {g}")
        elif cmd in ("mc_node_create", "mc_node_update"):
            if len(args) < 1:
                raise UserError(f"{where}: expected {cmd} {'RID' if cmd == 'mc_node_create' else 'NODE'} PORT... [| LAG...]")
            first = _int(where, args[0], "a replication id" if cmd == "mc_node_create" else "a node handle")
            ports = []
            for tok in args[1:]:
                if tok == "|":
                    if args[args.index("|") + 1:]:
                        raise UserError(f"{where}: LAG members are not modelled; expected ports only")
                    break
                ports.append(_int(where, tok, "a port"))
            if len(set(ports)) != len(ports):
                raise UserError(f"{where}: a port appears twice")
            if cmd == "mc_node_create":
                mc_nodes.append((first, sorted(ports)))
            else:
                if first >= len(mc_nodes) or mc_nodes[first] is None:
                    raise UserError(f"{where}: expected a node handle created before, found {first}")
                mc_nodes[first] = (mc_nodes[first][0], sorted(ports))
        elif cmd in ("mc_node_associate", "mc_node_dissociate"):
            if len(args) != 2:
                raise UserError(f"{where}: expected {cmd} GROUP NODE")
            g, n = _int(where, args[0], "a multicast group"), _int(where, args[1], "a node handle")
            if g not in mc_members:
                raise UserError(f"{where}: expected a multicast group created with mc_mgrp_create, found {g}")
            if n >= len(mc_nodes) or mc_nodes[n] is None:
                raise UserError(f"{where}: expected a node handle created with mc_node_create, found {n}")
            if cmd == "mc_node_associate":
                if any(n in m for m in mc_members.values()):
                    raise UserError(f"{where}: node {n} is associated with a group already")
                mc_members[g].append(n)
            elif n in mc_members[g]:
                mc_members[g].remove(n)
            else:
                raise UserError(f"{where}: node {n} is not associated with group {g}")
        elif cmd == "mc_node_destroy":
            n = _int(where, args[0] if len(args) == 1 else "", "a node handle")
            if n >= len(mc_nodes) or mc_nodes[n] is None:
                raise UserError(f"{where}: expected a node handle created before, found {n}")
            mc_nodes[n] = None
            for m in mc_members.values():
                if n in m:
                    m.remove(n)
        elif cmd in ("meter_set_rates", "meter_array_set_rates"):
            if len(args) < 1:
                raise UserError(f"{where}: expected {cmd} METER {'INDEX ' if cmd == 'meter_set_rates' else ''}RATE:BURST...")
            x = extern(where, args[0], "meter")
            if cmd == "meter_set_rates":
                if len(args) < 2:
                    raise UserError(f"{where}: expected meter_set_rates METER INDEX RATE:BURST...")
                if x.binding is not None:  # a direct meter: the index is an entry handle of its table
                    n = ld.handles.get(x.binding, 0)
                    i = index(where, args[1], n, f"an entry handle of table {x.binding}")
                else:
                    i = index(where, args[1], x.size, f"an index of meter {x.name}")
                sw.meter_rates.setdefault(x.name, {})[i] = _rates(where, args[2:], x.rate_count)
            else:
                if x.binding is not None:
                    raise UserError(f"{where}: meter_array_set_rates on direct meter {x.name}: expected meter_set_rates per entry")
                sw.meter_rates[x.name] = {None: _rates(where, args[1:], x.rate_count)}
        elif cmd in ("register_write", "register_reset"):
            x = extern(where, args[0] if args else "", "register")
            if cmd == "register_reset":
                sw.registers.pop(x.name, None)
                continue
            if len(args) != 3:
                raise UserError(f"{where}: expected register_write REGISTER INDEX VALUE")
            i = index(where, args[1], x.size, f"an index of register {x.name}")
            v = _int(where, args[2], "a value")
            if v >> x.bitwidth:
                raise UserError(f"{where}: value {args[2]} does not fit in register {x.name}'s {x.bitwidth} bits")
            sw.registers.setdefault(x.name, {})[i] = v
        elif cmd in ("set_crc16_parameters", "set_crc32_parameters"):
            w = 16 if "16" in cmd else 32
            if len(args) != 6:
                raise UserError(f"{where}: expected {cmd} CALCULATION POLYNOMIAL INIT XOR REFLECT_DATA REFLECT_REMAINDER")
            calc = args[0]
            if prog.calculations.get(calc) != f"crc{w}_custom":
                known = ", ".join(n for n, a in prog.calculations.items() if a == f"crc{w}_custom") or "none"
                raise UserError(f"{where}: expected a crc{w}_custom calculation of the program ({known}), found {calc!r}")
            poly, init, xor = (_int(where, tok, "a polynomial, init or xor value") for tok in args[1:4])
            if max(poly, init, xor) >> w:
                raise UserError(f"{where}: expected {w}-bit polynomial, init and xor values")
            sw.crc_params[calc] = CrcConfig(w, poly, init, xor, _bool(where, args[4]), _bool(where, args[5]))
        elif CLI_UNSUPPORTED.match(cmd):
            raise UserError(f"{where}: {cmd} is not supported here; expected table_add, table_set_default "
                            "or the act_prof_*/table_indirect_* commands that create and use members and groups")
        else:
            raise UserError(f"{where}: unknown command {cmd!r}; expected table_add or table_set_default")
    for obj, pr, h in pending:
        if not pr.groups[h]:
            raise UserError(f"{obj.source if isinstance(obj, Entry) else path}: group {h} of action profile {pr.name} "
                            "has no members left (BMv2 would not pick any)")
        members = pr.group_members(h)
        if isinstance(obj, Entry):
            obj.group = members
        else:
            obj.default_group = members
    for g, nodes in mc_members.items():
        sw.mc_groups[g] = [(port, rid) for n in nodes if mc_nodes[n] is not None for rid, ports in [mc_nodes[n]]
                           for port in ports]
    return ld.finish()


# --- format (b): the P4 tutorials' runtime JSON ---


def _json_match(v: object, kf: KeyField) -> tuple:
    if isinstance(v, list):
        if len(v) != 2:
            return ("bad", (v,))
        form = {"lpm": "lpm", "ternary": "ternary", "optional": "ternary", "range": "range"}.get(kf.match, "pair")
        return (form, tuple(v))
    return ("value", (v,))


def _load_json(doc: object, path: str, prog: P4Program) -> Entries:
    if not isinstance(doc, dict) or not isinstance(doc.get("table_entries"), list):
        raise UserError(f'{path}: expected a JSON object with a list "table_entries" (P4 tutorials\' runtime file)')
    ld = _Loader(prog, path)
    profiles = _json_profiles(doc, path, prog, ld)

    def action_and_params(where: str, t: TableSpec, e: dict) -> tuple[ActionInfo, dict[str, int]]:
        a = ld.action(where, t, e.get("action_name"))
        ap = e.get("action_params", {})
        if not isinstance(ap, dict):
            raise UserError(f'{where}: expected "action_params" an object {{name: value}}')
        extra = sorted(set(ap) - {p.name for p in a.params})
        if extra:
            raise UserError(f"{where}: action {a.name} has no parameter {extra[0]!r} (its parameters: "
                            f"{', '.join(p.name for p in a.params) or 'none'})")
        missing = [p.name for p in a.params if p.name not in ap]
        if missing:
            raise UserError(f"{where}: action {a.name} of table {t.name} takes {len(a.params)} parameters, "
                            f"missing {', '.join(missing)}")
        return a, ld.params(where, t, a, [ap[p.name] for p in a.params])

    for i, e in enumerate(doc["table_entries"]):
        where = f"{path}: entry {i}"
        if not isinstance(e, dict):
            raise UserError(f"{where}: expected an object")
        unknown = sorted(set(e) - {"table", "match", "action_name", "action_params", "priority", "default_action",
                                   "member_id", "group_id"})
        if unknown:
            raise UserError(f"{where}: unknown keys {unknown}")
        t = ld.table(where, e.get("table"))
        group = None
        if t.action_profile is not None:
            # an indirect table takes a member or a group of its profile, as in P4Runtime
            if ("member_id" in e) == ("group_id" in e) or "action_name" in e:
                raise UserError(f"{where}: table {t.name} is behind action profile {t.action_profile}: expected "
                                '"member_id" or "group_id" (of "action_profile_members"/"action_profile_groups"), not an action')
            members, groups = profiles.get(t.action_profile, ({}, {}))
            if "member_id" in e:
                if e["member_id"] not in members:
                    raise UserError(f"{where}: expected a member_id of action profile {t.action_profile}, found {e['member_id']!r}")
                a, params = members[e["member_id"]][1:]
            else:
                if e["group_id"] not in groups:
                    raise UserError(f"{where}: expected a group_id of action profile {t.action_profile}, found {e['group_id']!r}")
                group = groups[e["group_id"]]
                a = ld.action(where, t, group[0][0])
                params = dict(group[0][1])
        else:
            if "member_id" in e or "group_id" in e:
                raise UserError(f"{where}: table {t.name} has no action profile: expected an action, not a member or group")
            a, params = action_and_params(where, t, e)
        if e.get("default_action"):
            if e.get("match"):
                raise UserError(f"{where}: a default action has no match")
            ld.set_default(where, t, a, params)
            ld.out[t.name].default_group = group
            continue
        m = e.get("match", {})
        if not isinstance(m, dict):
            raise UserError(f'{where}: expected "match" an object {{field: value}}')
        fields = match_fields(t)
        by_name: dict[str, KeyField] = {}
        for kf, nm in fields:
            by_name[nm] = kf
            by_name.setdefault(kf.field, kf)
        given: dict[str, object] = {}
        for name, v in m.items():
            kf = by_name.get(name) or (by_name.get(name[4:]) if name.startswith("hdr.") else None)
            if kf is None:
                names = ", ".join(nm for _, nm in fields)
                raise UserError(f"{where}: table {t.name} has no key field {name!r} (its fields: {names})")
            if kf.field in given:
                raise UserError(f"{where}: field {name!r} given twice")
            given[kf.field] = v
        matches = {}
        for kf, nm in fields:
            if kf.field not in given:
                if kf.match in ("exact", "valid"):
                    raise UserError(f"{where}: missing exact field {nm!r} of table {t.name}")
                matches[kf.field] = wildcard(kf)
                continue
            form, parts = _json_match(given[kf.field], kf)
            if form in ("bad", "pair"):
                raise UserError(f"{where}: field {nm} ({kf.match}) of {t.name}: expected "
                                + {"lpm": "[value, prefix_len]", "ternary": "[value, mask]", "range": "[lo, hi]"}.get(kf.match, "a single value"))
            matches[kf.field] = ld.match(where, t, kf, (form, parts))
        entry = ld.add(where, t, matches, a, params, ld.priority(where, t, e.get("priority"), cli=False), f"{path}#entry {i}")
        entry.group = group
    return ld.finish()


def _json_profiles(doc: dict, path: str, prog: P4Program, ld: _Loader) -> dict[str, tuple[dict, dict]]:
    """``action_profile_members`` and ``action_profile_groups`` of a runtime
    JSON file (P4Runtime's ActionProfileMember / ActionProfileGroup):
    profile -> (member_id -> (order, action, params), group_id -> members).
    A group's members are in the order the members were written (BMv2's
    member handles, from which its selector picks)."""
    out: dict[str, tuple[dict, dict]] = {}
    tables = {t.action_profile: t for t in prog.tables.values() if t.action_profile}

    def profile(where: str, x: dict) -> str:
        from synapse_vmt.p4.bmv2 import resolve_name

        name = x.get("action_profile")
        t = resolve_name(name, tables) if isinstance(name, str) else None
        if t is None:
            raise UserError(f"{where}: expected an action_profile of the program ({', '.join(tables) or 'none'}), found {name!r}")
        return t.action_profile

    for i, x in enumerate(doc.get("action_profile_members", []) or []):
        where = f"{path}: action_profile_members[{i}]"
        if not isinstance(x, dict) or sorted(set(x) - {"action_profile", "member_id", "action_name", "action_params"}):
            raise UserError(f"{where}: expected an object with action_profile, member_id, action_name, action_params")
        prof = profile(where, x)
        members = out.setdefault(prof, ({}, {}))[0]
        mid = x.get("member_id")
        if not isinstance(mid, int) or isinstance(mid, bool) or mid in members:
            raise UserError(f"{where}: expected a new integer member_id, found {mid!r}")
        t = tables[prof]
        a = ld.action(where, t, x.get("action_name"))
        ap = x.get("action_params", {})
        if not isinstance(ap, dict) or set(ap) != {p.name for p in a.params}:
            raise UserError(f"{where}: expected action_params {{{', '.join(p.name for p in a.params)}}} for {a.name}")
        members[mid] = (len(members), a, ld.params(where, t, a, [ap[p.name] for p in a.params]))
    for i, x in enumerate(doc.get("action_profile_groups", []) or []):
        where = f"{path}: action_profile_groups[{i}]"
        if not isinstance(x, dict) or sorted(set(x) - {"action_profile", "group_id", "members"}):
            raise UserError(f"{where}: expected an object with action_profile, group_id, members")
        prof = profile(where, x)
        if not prog.profiles.get(prof, tables[prof].kind == "indirect_ws"):
            raise UserError(f"{where}: action profile {prof} has no selector (no groups)")
        members, groups = out.setdefault(prof, ({}, {}))
        gid, ms = x.get("group_id"), x.get("members")
        if not isinstance(gid, int) or isinstance(gid, bool) or gid in groups:
            raise UserError(f"{where}: expected a new integer group_id, found {gid!r}")
        if not isinstance(ms, list) or not ms or any(m not in members for m in ms) or len(set(ms)) != len(ms):
            raise UserError(f"{where}: expected members: a non-empty list of distinct member_ids of {prof}")
        groups[gid] = tuple((members[m][1].name, dict(members[m][2])) for m in sorted(ms, key=lambda m: members[m][0]))
    return {p: (m, g) for p, (m, g) in out.items()}


def load_entries(path: str | Path, prog: P4Program | str | Path) -> Entries:
    """Read the entries in ``path`` (CLI commands or tutorial JSON, detected)
    for program ``prog`` (a :class:`P4Program` or the path of its BMv2 JSON).
    Returns every keyed table of the program, in CFG order, with its entries
    in match order; tables the file does not mention have none."""
    if not isinstance(prog, P4Program):
        prog = read_program(prog)
    text = read_text(path)
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise UserError(f"{path}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
        return _load_json(doc, str(path), prog)
    return _load_cli(text, str(path), prog)


# --- writing format (a) ---

_ADDR_NAME = re.compile(r"(addr|ipv4|_ip\b|ip_|_ip$|prefix|_sa$|_da$|^src$|^dst$)", re.I)


def format_value(v: int, width: int, name: str = "") -> str:
    """A value in the CLI's notation: MAC for 48 bits, IPv6 for 128, IPv4 for
    32-bit address-like names, decimal for small fields, else hex."""
    if width == 48:
        return ":".join(f"{(v >> s) & 0xFF:02x}" for s in range(40, -8, -8))
    if width == 128:
        return str(ipaddress.IPv6Address(v))
    if width == 32 and _ADDR_NAME.search(name.split(".")[-1]):
        return str(ipaddress.IPv4Address(v))
    if width <= 16:
        return str(v)
    return hex(v)


def format_match(m: Match, kf: KeyField) -> str:
    """``m`` as simple_switch_CLI reads it; a key on a slice of a field is
    written at the full field's width, the slice's bits in place."""
    w, n = kf.width, kf.field
    tz, plen = 0, m.prefix_len
    if kf.slice_mask:
        tz = (kf.slice_mask & -kf.slice_mask).bit_length() - 1
        if plen is not None:
            plen += kf.full_width - tz - kf.width  # the bits above the slice are cut off by its mask
        m = Match(m.kind, m.value << tz, None if m.mask is None else m.mask << tz, plen,
                  None if m.lo is None else m.lo << tz, None if m.hi is None else m.hi << tz)
        w = kf.full_width
    if m.kind == "lpm":
        return f"{format_value(m.value, w, n)}/{plen}"
    if m.kind in ("ternary", "optional"):
        return f"{format_value(m.value, w, n)}&&&{format_value(m.mask or 0, w, n) if w in (48, 128) else hex(m.mask or 0)}"
    if m.kind == "range":
        return f"{m.lo}->{m.hi}" if w <= 32 else f"{hex(m.lo or 0)}->{hex(m.hi or 0)}"
    return format_value(m.value, w, n)


def format_cli(t: TableSpec, entries: list[Entry], members: dict[str, dict[tuple, int]] | None = None) -> list[str]:
    """simple_switch_CLI lines for ``entries`` of table ``t`` (CLI priorities:
    smaller wins, i.e. ``PRIO_MAX - priority``). A table behind an action
    profile gets ``table_indirect_create_member`` (one member per distinct
    action and parameters, shared across the profile's tables through
    ``members``: profile -> {(action, params): handle}) and
    ``table_indirect_add`` lines, as BMv2 requires; others ``table_add``."""
    lines = []
    prof = None
    if t.action_profile is not None:
        prof = (members if members is not None else {}).setdefault(t.action_profile, {})
    for e in entries:
        a = t.action(e.action)
        assert a is not None
        ms = " ".join(format_match(e.matches[kf.field], kf) for kf, _ in match_fields(t))
        ps = " ".join(format_value(e.params[p.name], p.width, p.name) for p in a.params)
        pr = f" {PRIO_MAX - e.priority}" if e.priority is not None else ""
        if prof is None:
            lines.append(f"table_add {t.name} {a.name} {ms} =>{' ' + ps if ps else ''}{pr}")
            continue
        key = (a.name, tuple(e.params[p.name] for p in a.params))
        if key not in prof:
            prof[key] = len(prof)
            lines.append(f"act_prof_create_member {t.action_profile} {a.name}{' ' + ps if ps else ''}")
        lines.append(f"table_indirect_add {t.name} {ms} => {prof[key]}{pr}")
    return lines


def _json_value(v: int, width: int, name: str) -> int | str:
    s = format_value(v, width, name)
    return int(s) if s.isdigit() else s


def format_json(t: TableSpec, entries: list[Entry], members: list[dict] | None = None) -> list[dict]:
    """``table_entries`` items (the tutorials' runtime JSON) for ``entries``
    of table ``t``: fields by their P4Runtime names, addresses as strings,
    priorities as stored (P4Runtime: larger wins). A table behind an action
    profile gets an entry per ``member_id``: one member per distinct action
    and parameters, appended to ``members`` (the file's
    ``action_profile_members``, shared by the profile's tables)."""
    out = []
    known: dict[tuple, int] = {}
    if members is not None:
        for m in members:
            known[(m["action_profile"], m["action_name"], tuple(sorted(m["action_params"].items())))] = m["member_id"]
    for e in entries:
        a = t.action(e.action)
        assert a is not None
        match: dict[str, object] = {}
        for kf, nm in match_fields(t):
            m = e.matches[kf.field]
            w, f = kf.width, kf.field
            if m.kind == "lpm":
                if m.prefix_len:
                    match[nm] = [_json_value(m.value, w, f), m.prefix_len]
            elif m.kind in ("ternary", "optional"):
                if m.mask:
                    match[nm] = [_json_value(m.value, w, f), _json_value(m.mask, w, f)] if m.kind == "ternary" else m.value
            elif m.kind == "range":
                if (m.lo, m.hi) != (0, _full(w)):
                    match[nm] = [m.lo, m.hi]
            else:
                match[nm] = _json_value(m.value, w, f)
        ap = {p.name: _json_value(e.params[p.name], p.width, p.name) for p in a.params}
        item: dict[str, object] = {"table": t.name, "match": match, "action_name": a.name, "action_params": ap}
        if t.action_profile is not None:
            if members is None:
                raise ValueError(f"table {t.name} is behind action profile {t.action_profile}: pass members")
            key = (t.action_profile, a.name, tuple(sorted(ap.items())))
            if key not in known:
                known[key] = sum(1 for m in members if m["action_profile"] == t.action_profile)
                members.append({"action_profile": t.action_profile, "member_id": known[key], "action_name": a.name,
                                "action_params": ap})
            item = {"table": t.name, "match": match, "member_id": known[key]}
        if e.priority is not None:
            item["priority"] = e.priority
        out.append(item)
    return out

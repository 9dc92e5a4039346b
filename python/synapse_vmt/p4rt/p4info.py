"""P4Info from p4c's BMv2 JSON, with stable ids, and the id index the server uses.

Ids follow p4c's scheme: the top byte says what an entity is (P4Ids: 0x01
action, 0x02 table, 0x12 counter, 0x13 direct counter, 0x14 meter, 0x15
direct meter), the low 24 bits are Jenkins'
one-at-a-time hash of the entity's fully qualified name; when two names of
one kind collide the later one (names sorted) takes the next free value, so
the same program always gets the same ids. Match fields and action
parameters are numbered from 1 in declaration order, as p4c does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from finsy.proto import p4i
from google.protobuf import text_format

from synapse_vmt.p4.bmv2 import ActionInfo, P4Program, TableSpec
from synapse_vmt.p4.cfg import KeyField

PREFIX_ACTION = 0x01
PREFIX_TABLE = 0x02
PREFIX_ACTION_PROFILE = 0x11
PREFIX_COUNTER = 0x12
PREFIX_DIRECT_COUNTER = 0x13
PREFIX_METER = 0x14
PREFIX_DIRECT_METER = 0x15

_MATCH = {
    "exact": p4i.MatchField.EXACT,
    "lpm": p4i.MatchField.LPM,
    "ternary": p4i.MatchField.TERNARY,
    "range": p4i.MatchField.RANGE,
    "optional": p4i.MatchField.OPTIONAL,
}
MATCH_NAMES = {v: k for k, v in _MATCH.items()}


def jenkins(name: str) -> int:
    """Jenkins' one-at-a-time hash of ``name`` (32 bits), as p4c hashes names."""
    h = 0
    for b in name.encode():
        h = (h + b) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    return (h + (h << 15)) & 0xFFFFFFFF


def assign_ids(names: list[str], prefix: int) -> dict[str, int]:
    """Stable ids for ``names`` of one kind: prefix byte + 24-bit name hash,
    collisions resolved by probing upwards in sorted-name order."""
    used: set[int] = set()
    out: dict[str, int] = {}
    for n in sorted(set(names)):
        h = jenkins(n)
        for i in range(1 << 24):
            cand = (prefix << 24) | ((h + i) & 0xFFFFFF)
            if cand not in used and cand & 0xFFFFFF:
                break
        used.add(cand)
        out[n] = cand
    return out


def _alias(name: str, all_names: list[str]) -> str:
    """The shortest dotted suffix of ``name`` no other name ends with (p4c's alias)."""
    parts = name.split(".")
    for k in range(1, len(parts) + 1):
        cand = ".".join(parts[-k:])
        if sum(1 for n in all_names if n == cand or n.endswith("." + cand)) == 1:
            return cand
    return name


def build_p4info(prog: P4Program) -> p4i.P4Info:
    """The P4Info of ``prog``: its keyed tables (without const entries' tables
    being writable: they are marked ``is_const_table``), their actions, and
    the program's counters and meters (direct ones listed in their table's
    ``direct_resource_ids``). Aliases are the shortest name suffix unique
    among every entity of the P4Info, as p4c makes them."""
    tables = list(prog.tables.values())
    actions: dict[str, ActionInfo] = {}
    for t in tables:
        for a in t.actions:
            actions.setdefault(a.name, a)
    tids = assign_ids([t.name for t in tables], PREFIX_TABLE)
    aids = assign_ids(list(actions), PREFIX_ACTION)
    profiles = sorted({t.action_profile for t in tables if t.action_profile})
    pids = assign_ids(profiles, PREFIX_ACTION_PROFILE)
    arrays = {  # P4Info field, id prefix -> arrays of that kind
        ("counters", PREFIX_COUNTER): [c for c in prog.counters if c.direct_table is None],
        ("direct_counters", PREFIX_DIRECT_COUNTER): [c for c in prog.counters if c.direct_table is not None],
        ("meters", PREFIX_METER): [m for m in prog.meters if m.direct_table is None],
        ("direct_meters", PREFIX_DIRECT_METER): [m for m in prog.meters if m.direct_table is not None],
    }
    every = [t.name for t in tables] + list(actions) + [x.name for xs in arrays.values() for x in xs] + profiles
    info = p4i.P4Info()
    info.pkg_info.arch = "v1model"
    direct: dict[str, list[int]] = {}
    for (fld, prefix), xs in arrays.items():
        ids = assign_ids([x.name for x in xs], prefix)
        for x in sorted(xs, key=lambda x: ids[x.name]):
            e = getattr(info, fld).add()
            e.preamble.id, e.preamble.name, e.preamble.alias = ids[x.name], x.name, _alias(x.name, every)
            unit = type(e.spec).Unit
            e.spec.unit = {"bytes": unit.BYTES, "packets": unit.PACKETS}.get(x.unit, getattr(unit, "BOTH", 0))
            if x.direct_table is None:
                e.size = x.size
            elif x.direct_table in tids:
                e.direct_table_id = tids[x.direct_table]
                direct.setdefault(x.direct_table, []).append(ids[x.name])
    for t in tables:
        pt = info.tables.add()
        pt.preamble.id = tids[t.name]
        pt.preamble.name = t.name
        pt.preamble.alias = _alias(t.name, every)
        for i, (kf, nm) in enumerate(t.match_fields, 1):
            mf = pt.match_fields.add()
            mf.id, mf.name, mf.bitwidth, mf.match_type = i, nm, kf.width, _MATCH[kf.match]
        for a in t.actions:
            pt.action_refs.add().id = aids[a.name]
        if t.default is not None and t.default_const:
            pt.const_default_action_id = aids[t.default[0]]
        pt.direct_resource_ids.extend(direct.get(t.name, []))
        pt.size = t.info.max_size
        pt.is_const_table = bool(t.const_entries)
        if t.action_profile:
            pt.implementation_id = pids[t.action_profile]
    for name in profiles:
        users = [t for t in tables if t.action_profile == name]
        ap = info.action_profiles.add()
        ap.preamble.id, ap.preamble.name, ap.preamble.alias = pids[name], name, _alias(name, every)
        ap.table_ids.extend(tids[t.name] for t in users)
        ap.with_selector = prog.profiles.get(name, any(t.kind == "indirect_ws" for t in users))
        ap.size = max(t.info.max_size for t in users)
    for name, a in sorted(actions.items(), key=lambda kv: aids[kv[0]]):
        pa = info.actions.add()
        pa.preamble.id, pa.preamble.name, pa.preamble.alias = aids[name], name, _alias(name, every)
        for i, p in enumerate(a.params, 1):
            pp = pa.params.add()
            pp.id, pp.name, pp.bitwidth = i, p.name, p.width
    return info


def to_text(info: p4i.P4Info) -> str:
    return text_format.MessageToString(info)


def parse_p4info(data: bytes | str) -> p4i.P4Info:
    """A P4Info from its binary or text encoding."""
    info = p4i.P4Info()
    if isinstance(data, bytes):
        try:
            info.ParseFromString(data)
            return info
        except Exception:
            data = data.decode()
    text_format.Parse(data, info)
    return info


# --- the index the server resolves ids through ---


@dataclass
class ActionRef:
    id: int
    info: ActionInfo  # BMv2 names and parameter widths, in order


@dataclass
class TableRef:
    id: int
    spec: TableSpec
    #: match field id -> (KeyField, p4runtime name)
    fields: dict[int, tuple[KeyField, str]]
    #: action id -> ActionRef, the actions this table allows
    actions: dict[int, ActionRef]
    size: int
    const_default: bool
    const_table: bool
    field_ids: dict[str, int] = field(default_factory=dict)  # header.field -> match field id
    profile: int | None = None  # the action profile behind it (P4Info implementation_id)
    idle_timeout: bool = False  # the P4Info asks for idle-timeout notifications
    direct_meter: bool = False  # the P4Info gives the table a direct meter


@dataclass
class ProfileRef:
    """An action profile: its BMv2 name, whether it has a selector (groups),
    the actions its members may run (those of its tables)."""

    id: int
    name: str
    with_selector: bool
    actions: dict[int, ActionRef]
    size: int


class IndexError_(Exception):
    """A P4Info that does not fit the program (a name it cannot find)."""


@dataclass
class P4Index:
    """The P4Info's ids resolved against the BMv2 program."""

    info: p4i.P4Info
    prog: P4Program
    tables: dict[int, TableRef]
    actions: dict[int, ActionRef]
    profiles: dict[int, ProfileRef] = field(default_factory=dict)

    @classmethod
    def build(cls, info: p4i.P4Info, prog: P4Program) -> P4Index:
        acts: dict[int, ActionRef] = {}
        bm_actions = {a.name: a for t in prog.tables.values() for a in t.actions}
        for a in info.actions:
            bm = bm_actions.get(a.preamble.name)
            if bm is None:  # an action no keyed table uses: nothing to resolve
                continue
            acts[a.preamble.id] = ActionRef(a.preamble.id, bm)
        tabs: dict[int, TableRef] = {}
        for t in info.tables:
            spec = prog.tables.get(t.preamble.name) or prog.table(t.preamble.name)
            if spec is None:
                raise IndexError_(f"P4Info table {t.preamble.name!r} is not a keyed table of the program")
            by_name = {nm: kf for kf, nm in spec.match_fields}
            fields = {}
            for mf in t.match_fields:
                kf = by_name.get(mf.name)
                if kf is None:
                    raise IndexError_(f"P4Info match field {mf.name!r} of {t.preamble.name} is not in the program")
                fields[mf.id] = (kf, mf.name)
            tacts = {r.id: acts[r.id] for r in t.action_refs if r.id in acts}
            tabs[t.preamble.id] = TableRef(
                t.preamble.id, spec, fields, tacts, int(t.size) or spec.info.max_size,
                bool(t.const_default_action_id), bool(t.is_const_table),
                {kf.field: i for i, (kf, _) in fields.items()}, t.implementation_id or None,
                t.idle_timeout_behavior == p4i.Table.NOTIFY_CONTROL,
                any(r >> 24 == PREFIX_DIRECT_METER for r in t.direct_resource_ids))
        profs: dict[int, ProfileRef] = {}
        for ap in info.action_profiles:
            users = [tabs[i] for i in ap.table_ids if i in tabs]
            if not users or any(u.spec.action_profile is None for u in users):
                raise IndexError_(f"P4Info action profile {ap.preamble.name!r}: expected indirect tables of the program")
            pacts = {aid: a for u in users for aid, a in u.actions.items()}
            profs[ap.preamble.id] = ProfileRef(ap.preamble.id, users[0].spec.action_profile, bool(ap.with_selector), pacts,
                                               int(ap.size) or 1024)
        return cls(info, prog, tabs, acts, profs)

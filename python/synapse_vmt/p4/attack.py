"""Attack traffic through a P4 program (docs/flood.md, "Attack traffic").

A program scenario's (or ``--traffic`` file's) ``[attack]`` table mixes
cache-flooding packets into the generated traffic, as ``[attack]`` does for
the traffic model (``crates/synapse-core/src/workload/attack.rs``: the same
share, kinds and timing, :func:`mix`)::

    [attack]
    share = 0.3            # of the offered packets, in [0, 1)
    kind = "random"        # random | nomatch | scan
    scan_factor = 1.1      # scan: distinct frames, x the PMU entries of the largest table
    start_ns = 0           # no attack packet before this simulated time
    classes = ["uplink"]   # traffic classes whose frames the attacker forges (default: all)
    keep = ["uplink:ipv4.dst"]  # fields (FIELD or CLASS:FIELD) drawn as the legitimate traffic draws them

An attack packet is a frame of one of ``classes`` (taken in turn by their
shares) whose fields drawn from a table's entries (``{table = ...}``), other
than those in ``keep``, are forged: ``random`` and ``scan`` draw them
uniformly over the field's width (random TEIDs, UE addresses, spoofed
sources), ``nomatch`` draws values that match no entry of that table at
that key but catch-alls; ranges are drawn from their range and fixed fields
kept. Every attack frame differs from every other and from every legitimate
frame: ``random`` and ``nomatch`` send each once (a key never repeats),
``scan`` cycles through ``scan_factor`` x the PMU entries of the largest
table's frames. The frames are made in Rust (``workload/forge.rs``): each
class's frame is built once by the frame builder as a template, and an
attack frame is that template with its drawn fields written in at their
offsets and its checksums recomputed (seeded: the same frames for the same
seed). Attack frames, with the legitimate ones, run through the compiled
program's Rust executor (``simrun._attack_run``: the interpreter's trace);
their routes are numbered after the legitimate ones, so the simulator counts
their PHVs apart (the summary's ``legit`` and ``attack``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from synapse_vmt import _core
from synapse_vmt.errors import UserError

KEYS = {"share", "kind", "scan_factor", "start_ns", "classes", "keep"}
KINDS = ("random", "nomatch", "scan")


@dataclass
class ProgramAttack:
    share: float = 0.0
    kind: str = "random"
    scan_factor: float = 1.1
    start_ns: float = 0.0
    classes: list[str] | None = None
    keep: list[str] = field(default_factory=list)

    def core(self) -> dict:
        """The traffic model's ``[attack]`` (what :func:`mix` takes)."""
        return {"share": self.share, "kind": self.kind, "scan_factor": self.scan_factor, "start_ns": self.start_ns}

    def packets(self, legit: int) -> int:
        """Attack packets mixed into ``legit`` legitimate ones (at most)."""
        return math.ceil(legit * self.share / (1.0 - self.share)) + 1

    def pool(self, legit: int, capacity: int) -> int:
        """Distinct attack frames: one per packet, or a scan's cycle."""
        if self.kind == "scan":
            return max(1, math.ceil(self.scan_factor * capacity))
        return self.packets(legit)


def mix(t_ps: np.ndarray, flows: np.ndarray, attack: ProgramAttack, legit_flows: int, pool: int) -> tuple[np.ndarray, np.ndarray]:
    """The legitimate arrivals with the attack's packets mixed in (attack
    packet j is flow ``legit_flows + j % pool``): the traffic model's mix."""
    try:
        return _core.attack_mix(np.ascontiguousarray(t_ps, dtype=np.uint64), np.ascontiguousarray(flows, dtype=np.uint32),
                                json.dumps(attack.core()), int(legit_flows), int(pool))
    except ValueError as e:
        raise UserError(f"[attack]: {e}") from None


def parse(doc: Any, where: str, class_names: list[str]) -> ProgramAttack:
    """A :class:`ProgramAttack` from an ``[attack]`` table; errors name ``where``."""
    from synapse_vmt.p4.gentraffic import FIELDS, GTPU_FIELDS

    if not isinstance(doc, Mapping):
        raise UserError(f"{where}: expected a table")
    for k in doc:
        if k not in KEYS:
            raise UserError(f"{where}: unknown key {k!r}; expected one of {', '.join(sorted(KEYS))}")
    a = ProgramAttack()
    share = doc.get("share", 0.0)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share < 1.0:
        raise UserError(f"{where}.share: expected a number in [0, 1), found {share!r}")
    a.share = float(share)
    if doc.get("kind", "random") not in KINDS:
        raise UserError(f"{where}.kind: expected one of {', '.join(KINDS)}, found {doc.get('kind')!r}")
    a.kind = doc.get("kind", "random")
    sf = doc.get("scan_factor", 1.1)
    if isinstance(sf, bool) or not isinstance(sf, (int, float)) or not (sf > 0 and math.isfinite(sf)):
        raise UserError(f"{where}.scan_factor: expected a number > 0, found {sf!r}")
    a.scan_factor = float(sf)
    st = doc.get("start_ns", 0.0)
    if isinstance(st, bool) or not isinstance(st, (int, float)) or not (st >= 0 and math.isfinite(st)):
        raise UserError(f"{where}.start_ns: expected a number >= 0, found {st!r}")
    a.start_ns = float(st)
    cl = doc.get("classes")
    if cl is not None:
        if not isinstance(cl, list) or not cl or any(c not in class_names for c in cl):
            raise UserError(f"{where}.classes: expected a non-empty list of traffic classes among {', '.join(class_names)}, found {cl!r}")
        a.classes = [str(c) for c in cl]
    keep = doc.get("keep", [])
    ok = lambda f: isinstance(f, str) and (f in FIELDS | GTPU_FIELDS or (  # noqa: E731
        f.partition(":")[0] in class_names and f.partition(":")[2] in FIELDS | GTPU_FIELDS))
    if not isinstance(keep, list) or not all(ok(f) for f in keep):
        raise UserError(f"{where}.keep: expected a list of frame fields (FIELD or CLASS:FIELD) among "
                        f"{', '.join(sorted(FIELDS | GTPU_FIELDS))}, found {keep!r}")
    a.keep = [str(f) for f in keep]
    return a


def field_bits(name: str) -> int:
    """Width of a generated frame's field."""
    if name.startswith("eth."):
        return 48
    if name.endswith(("proto", "ttl")):
        return 8
    if name.endswith(("sport", "dport")):
        return 16
    return 32  # addresses, TEID


_U64 = (1 << 64) - 1


def _nomatch_rows(spec, ents: list, key: str) -> list[tuple[int, int, int]]:
    """The (lo, hi, mask) rows of the entries at key field ``key`` (an
    entry matches v iff lo <= v & mask <= hi), catch-alls left out: a
    ``nomatch`` value matches none of them. Cut to 64 bits (a frame's
    fields have at most 48)."""
    from synapse_vmt.p4.interp import match_row

    kf = next(k for k, _ in spec.match_fields if k.field == key)
    rows = [match_row(e.matches.get(key), kf, e.source) for e in ents]
    return [(lo, min(hi, _U64), mask & _U64) for lo, hi, mask in rows if mask != 0 and lo <= _U64]


def _entry_match(m, width: int, where: str) -> tuple:
    """An entry's match as the Rust forger draws a value hitting it (``entries.sample_value``)."""
    if m.kind == "exact":
        return ("exact", m.value & _U64, 0, 0, 0, 0)
    if m.kind == "range":
        if m.hi > _U64:
            raise UserError(f"{where}: a range wider than 64 bits cannot be drawn into a frame")
        return ("range", 0, 0, 0, m.lo, m.hi)
    return ("masked", m.value & _U64, m.mask & _U64, min(width, 64), 0, 0)


def _class_spec(c, d, forged: dict, share: float) -> tuple:
    """One class for ``_core.attack_frames``: its UDP and TCP templates (the
    frame builder's, fixed fields set), and per field its draw."""
    from synapse_vmt.p4.gentraffic import build_frame

    gtpu = c.frame == "gtpu"
    proto = "inner.proto" if gtpu else "ipv4.proto"
    fixed = dict(d.fixed)
    templates = [build_frame(c.frame, {**fixed, proto: p}) for p in (17, 6)]
    fields: list[tuple] = []
    if proto not in d.ranges and proto not in d.from_table:  # the template's protocol
        fields.append((proto, ("fixed", fixed.get(proto, 6 if c.frame == "ipv4-tcp" else 17), 0, [])))
    for f, (lo, hi) in d.ranges.items():
        fields.append((f, ("range", lo, hi, [])))
    tables = list(d.tables)
    ents = []
    for t in tables:
        spec, es = d.tables[t]
        keys = [kf for kf, _ in spec.match_fields]
        ents.append([[_entry_match(e.matches[kf.field], kf.width, e.source) for kf in keys] for e in es])
    for f, (t, key) in d.from_table.items():
        if f in forged:
            rows = forged[f]
            fields.append((f, ("forged", field_bits(f), 0, rows)))
        else:
            spec, _ = d.tables[t]
            k = [kf.field for kf, _ in spec.match_fields].index(key)
            fields.append((f, ("entry", tables.index(t), k, [])))
    return (c.name, "gtpu" if gtpu else "plain", templates[0], templates[1], fields, ents, share)


def attack_frames(spec, attack: ProgramAttack, prog, entries: Mapping[str, Any], n: int, seed: int,
                  legit: set[bytes], where: str = "attack") -> list[bytes]:
    """``n`` distinct attack frames (none among ``legit``), classes in turn
    by their shares, made in Rust (``_core.attack_frames``): each class's
    frame built once as a template, each attack frame that template with
    its drawn fields written in and its checksums recomputed."""
    from synapse_vmt.p4.gentraffic import _Drawer

    names = attack.classes or [c.name for c in spec.classes]
    classes = [(i, c) for i, c in enumerate(spec.classes) if c.name in names]
    total = sum(c.share for _, c in classes)
    specs = []
    for i, c in classes:
        d = _Drawer(c, prog, entries, f"traffic.classes[{i}]")
        forged = {}
        for f, (t, key) in d.from_table.items():
            if f not in attack.keep and f"{c.name}:{f}" not in attack.keep:
                tspec, ents = d.tables[t]
                forged[f] = _nomatch_rows(tspec, ents, key) if attack.kind == "nomatch" else []
        if not forged and not d.ranges:
            raise UserError(f"{where}: class {c.name!r} has no field to forge (every field is fixed or kept)")
        specs.append(_class_spec(c, d, forged, c.share / total))
    try:
        return _core.attack_frames(specs, int(n), int(seed) & _U64, list(legit))
    except ValueError as e:
        raise UserError(f"{where}: {e}") from None

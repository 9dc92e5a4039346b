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
table's frames. Attack frames run through the interpreter like the others;
their routes are numbered after the legitimate ones, so the simulator counts
their PHVs apart (the summary's ``legit`` and ``attack``).
"""

from __future__ import annotations

import json
import math
import random
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


class _Forger:
    """Forged values of one table-drawn field: uniform over its width, and
    for ``nomatch`` not matching any entry of the table at the key but
    catch-alls (an entry's (lo, hi, mask) row: it matches v iff lo <= v & mask <= hi)."""

    def __init__(self, bits: int, spec, ents: list, key: str, nomatch: bool):
        from synapse_vmt.p4.interp import match_row

        self.bits = bits
        self.rows = None
        if nomatch:
            kf = next(k for k, _ in spec.match_fields if k.field == key)
            rows = [match_row(e.matches.get(key), kf, e.source) for e in ents]
            rows = [r for r in rows if r[2] != 0]  # catch-alls match anything
            self.rows = tuple(np.array([r[i] for r in rows], dtype=object) for i in range(3)) if rows else None

    def draw(self, rng: random.Random) -> int:
        while True:
            v = rng.getrandbits(self.bits)
            if self.rows is None:
                return v
            lo, hi, mask = self.rows
            m = np.bitwise_and(v, mask)
            if not ((lo <= m) & (m <= hi)).any():
                return v


def attack_frames(spec, attack: ProgramAttack, prog, entries: Mapping[str, Any], n: int, seed: int,
                  legit: set[bytes], where: str = "attack") -> list[bytes]:
    """``n`` distinct attack frames (none among ``legit``), classes in turn by their shares."""
    from synapse_vmt.p4.gentraffic import _Drawer, build_frame

    names = attack.classes or [c.name for c in spec.classes]
    classes = [(i, c) for i, c in enumerate(spec.classes) if c.name in names]
    shares = np.array([c.share for _, c in classes], dtype=float)
    shares /= shares.sum()
    drawers = []
    for i, c in classes:
        d = _Drawer(c, prog, entries, f"traffic.classes[{i}]")
        forged = {}
        for f, (t, key) in d.from_table.items():
            if f not in attack.keep and f"{c.name}:{f}" not in attack.keep:
                tspec, ents = d.tables[t]
                forged[f] = _Forger(field_bits(f), tspec, ents, key, attack.kind == "nomatch")
        if not forged and not d.ranges:
            raise UserError(f"{where}: class {c.name!r} has no field to forge (every field is fixed or kept)")
        drawers.append((c, d, forged))
    rng = random.Random(f"{seed}:attack")
    out: list[bytes] = []
    seen = set(legit)
    credit = np.zeros(len(classes))
    tries = 0
    while len(out) < n:
        credit += shares  # classes in turn by their shares (no randomness)
        k = int(np.argmax(credit))
        credit[k] -= 1.0
        c, d, forged = drawers[k]
        while True:
            v = d.draw(rng)
            for f, fg in forged.items():
                v[f] = fg.draw(rng)
            fr = build_frame(c.frame, v)
            tries += 1
            if fr not in seen:
                break
            if tries > 20 * n + 1000:
                raise UserError(f"{where}: class {c.name!r} cannot make {n} distinct attack frames (too few forged bits)")
        seen.add(fr)
        out.append(fr)
    return out

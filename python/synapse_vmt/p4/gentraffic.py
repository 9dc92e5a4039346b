"""Generated traffic for a P4 program: traffic classes of flows, one frame per flow.

A class is a share of the flows with its own time profile (so the mix can
shift over the run) and a frame template whose header fields are fixed,
drawn from a range, or drawn from a table's entries (so the packets hit).
Sizes and timing follow the CAIDA flow model of ``synapse traffic``
(``_core.Traffic``: flow sizes from a distribution, each flow a Poisson
process, flow starts along the class's profile). Every packet of a flow is
the same frame (built once with dpkt), so the interpreter runs each flow once.

Format (TOML, the ``[traffic]`` table of a program scenario; JSON alike)::

    [traffic]
    flows = 4000                 # all classes together
    dist = "caida2019"           # flow sizes (built-in name or a distribution file)
    max_bytes = 1e6              # truncate the size distribution
    flow_duration_ns = 300000    # how long a flow lasts
    mean_pkt_bytes = 800

    [[traffic.classes]]
    name = "uplink"
    share = 0.5                  # of the flows (shares are normalised)
    profile = [[0, 1.6], [0.5, 1.6], [0.5, 0.4], [1, 0.4]]   # or flat|step|ramp|diurnal|burst
    frame = "gtpu"               # ipv4-udp | ipv4-tcp | gtpu
    [traffic.classes.fields]
    "eth.dst" = "00:00:00:00:aa:01"                                   # fixed
    "l4.sport" = {range = [1024, 65535]}                             # per flow, uniform
    "ipv4.dst" = {table = "sessions_uplink", key = "ipv4.dst_addr"}  # from an entry
    "gtpu.teid" = {table = "sessions_uplink", key = "scalars.userMetadata.teid"}

Fields: ``eth.dst``, ``eth.src``, ``ipv4.src``, ``ipv4.dst``, ``ipv4.proto``,
``ipv4.ttl``, ``l4.sport``, ``l4.dport``; for ``gtpu`` also ``gtpu.teid``,
``inner.src``, ``inner.dst``, ``inner.proto``, ``inner.sport``,
``inner.dport`` (the outer UDP ports default to 2152). A value is an integer
or a string the entries accept (``10.0.0.1``, ``00:11:22:33:44:55``,
``0x1f``). A ``table`` draw picks one entry of the table per flow (uniformly,
the same entry for every field of the class naming that table) and a key
value that hits it (:func:`synapse_vmt.p4.entries.sample_key`; ``key`` is the
key field's ``header.field`` name; short table names are accepted).
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from synapse_vmt.errors import UserError

FRAMES = ("ipv4-udp", "ipv4-tcp", "gtpu")
FIELDS = {"eth.dst", "eth.src", "ipv4.src", "ipv4.dst", "ipv4.proto", "ipv4.ttl", "l4.sport", "l4.dport"}
GTPU_FIELDS = {"gtpu.teid", "inner.src", "inner.dst", "inner.proto", "inner.sport", "inner.dport"}
TRAFFIC_KEYS = {"flows", "dist", "max_bytes", "flow_duration_ns", "mean_pkt_bytes", "classes"}
CLASS_KEYS = {"name", "share", "profile", "frame", "fields"}
GTPU_PORT = 2152


@dataclass
class TrafficClass:
    name: str
    share: float
    profile: Any
    frame: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class TrafficSpec:
    classes: list[TrafficClass]
    flows: int = 1000
    dist: str = "caida2019"
    max_bytes: float | None = 1e6
    flow_duration_ns: float = 300_000.0
    mean_pkt_bytes: float = 800.0
    attack: Any = None  # the [attack] beside it (synapse_vmt.p4.attack.ProgramAttack), if any

    def class_flows(self) -> list[int]:
        """Flows per class (shares normalised, rounded, summing to ``flows``)."""
        s = np.array([c.share for c in self.classes], dtype=float)
        want = s / s.sum() * self.flows
        n = np.floor(want).astype(int)
        for i in np.argsort(-(want - n))[: self.flows - int(n.sum())]:
            n[i] += 1
        return n.tolist()


def parse_spec(doc: Mapping, where: str) -> TrafficSpec:
    """A :class:`TrafficSpec` from the ``[traffic]`` table; errors name ``where``."""
    if not isinstance(doc, Mapping):
        raise UserError(f"{where}: expected a table")
    for k in doc:
        if k not in TRAFFIC_KEYS:
            raise UserError(f"{where}: unknown key {k!r}; expected one of {', '.join(sorted(TRAFFIC_KEYS))}")
    raw = doc.get("classes")
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{where}.classes: expected a non-empty array of tables ([[traffic.classes]])")
    classes = []
    for i, c in enumerate(raw):
        w = f"{where}.classes[{i}]"
        if not isinstance(c, Mapping):
            raise UserError(f"{w}: expected a table")
        for k in c:
            if k not in CLASS_KEYS:
                raise UserError(f"{w}: unknown key {k!r}; expected one of {', '.join(sorted(CLASS_KEYS))}")
        share = c.get("share", 1.0)
        if not isinstance(share, (int, float)) or not share > 0:
            raise UserError(f"{w}.share: expected a number > 0, found {share!r}")
        frame = c.get("frame", "ipv4-udp")
        if frame not in FRAMES:
            raise UserError(f"{w}.frame: expected one of {', '.join(FRAMES)}, found {frame!r}")
        fields = dict(c.get("fields", {}) or {})
        allowed = FIELDS | (GTPU_FIELDS if frame == "gtpu" else set())
        for f in fields:
            if f not in allowed:
                raise UserError(f"{w}.fields: unknown field {f!r} for frame {frame}; expected one of {', '.join(sorted(allowed))}")
        classes.append(TrafficClass(str(c.get("name", f"class{i}")), float(share), c.get("profile", "flat"), frame, fields))
    flows = doc.get("flows", 1000)
    if not isinstance(flows, int) or flows < len(classes):
        raise UserError(f"{where}.flows: expected an integer >= the number of classes, found {flows!r}")
    mb = doc.get("max_bytes", 1e6)
    return TrafficSpec(classes, flows, str(doc.get("dist", "caida2019")), None if mb in (None, 0) else float(mb),
                       float(doc.get("flow_duration_ns", 300_000.0)), float(doc.get("mean_pkt_bytes", 800.0)))


def _value(text: Any, where: str) -> int:
    from synapse_vmt.p4.entries import parse_value

    try:
        return parse_value(text)
    except (UserError, ValueError) as e:
        raise UserError(f"{where}: {e}") from None


class _Drawer:
    """Per flow field values of one class."""

    def __init__(self, cls: TrafficClass, prog, entries: Mapping[str, Any], where: str):
        self.fixed: dict[str, int] = {}
        self.ranges: dict[str, tuple[int, int]] = {}
        self.from_table: dict[str, tuple[str, str]] = {}  # field -> (table, key field)
        self.tables: dict[str, tuple[Any, list]] = {}
        for f, v in cls.fields.items():
            w = f"{where}.fields.{f}"
            if isinstance(v, Mapping) and "range" in v:
                r = v["range"]
                if not (isinstance(r, list) and len(r) == 2):
                    raise UserError(f"{w}: expected range = [lo, hi]")
                lo, hi = _value(r[0], w), _value(r[1], w)
                if lo > hi:
                    raise UserError(f"{w}: expected lo <= hi in range, found {lo} > {hi}")
                self.ranges[f] = (lo, hi)
            elif isinstance(v, Mapping) and "table" in v:
                try:
                    spec = prog.table(str(v["table"]))
                except (KeyError, UserError):
                    raise UserError(f"{w}: no table {v['table']!r} in the program") from None
                keys = [kf.field for kf, _ in spec.match_fields]
                key = v.get("key", keys[0] if len(keys) == 1 else None)
                if key not in keys:
                    raise UserError(f"{w}: expected key = one of the key fields of {spec.name}: {', '.join(keys)}")
                te = entries.get(spec.name)
                ents = list(getattr(te, "entries", []) or [])
                if not ents:
                    raise UserError(f"{w}: table {spec.name} has no entries to draw from")
                self.tables[spec.name] = (spec, ents)
                self.from_table[f] = (spec.name, key)
            elif isinstance(v, (int, str)):
                self.fixed[f] = _value(v, w)
            else:
                raise UserError(f"{w}: expected a value, {{range = [lo, hi]}} or {{table = ..., key = ...}}")

    def draw(self, rng: random.Random) -> dict[str, int]:
        from synapse_vmt.p4.entries import sample_key

        out = dict(self.fixed)
        for f, (lo, hi) in self.ranges.items():
            out[f] = rng.randint(lo, hi)
        got: dict[str, dict[str, int]] = {}
        for f, (t, key) in self.from_table.items():
            if t not in got:
                spec, ents = self.tables[t]
                got[t] = sample_key(ents[rng.randrange(len(ents))], spec, rng)
            out[f] = got[t][key]
        return out


def _mac(v: int) -> bytes:
    return (v & (2**48 - 1)).to_bytes(6, "big")


def _ip(v: int) -> bytes:
    return (v & 0xFFFFFFFF).to_bytes(4, "big")


def build_frame(frame: str, v: Mapping[str, int], payload: int = 32) -> bytes:
    """One Ethernet frame of the template with the given field values."""
    import dpkt

    def l4(proto: int, sport: int, dport: int, data: bytes):
        if proto == 6:
            return dpkt.tcp.TCP(sport=sport & 0xFFFF, dport=dport & 0xFFFF, flags=dpkt.tcp.TH_ACK, data=data)
        return dpkt.udp.UDP(sport=sport & 0xFFFF, dport=dport & 0xFFFF, data=data)

    def ip(src: int, dst: int, proto: int, ttl: int, inner) -> "dpkt.ip.IP":
        pkt = dpkt.ip.IP(src=_ip(src), dst=_ip(dst), p=proto & 0xFF, ttl=ttl & 0xFF, data=inner)
        pkt.len = len(pkt)
        return pkt

    data = bytes(payload)
    if frame == "gtpu":
        ip_in = ip(v.get("inner.src", 0x11000001), v.get("inner.dst", 0x08080808), v.get("inner.proto", 17), 64,
                   l4(v.get("inner.proto", 17), v.get("inner.sport", 40000), v.get("inner.dport", 80), data))
        inner = bytes(ip_in)
        # GTP-U: version 1, PT 1, no options; message 0xff (G-PDU), length, TEID.
        gtp = struct.pack("!BBHI", 0x30, 0xFF, len(inner), v.get("gtpu.teid", 1) & 0xFFFFFFFF) + inner
        outer = ip(v.get("ipv4.src", 0x0A000001), v.get("ipv4.dst", 0x0A000002), 17, v.get("ipv4.ttl", 64),
                   dpkt.udp.UDP(sport=v.get("l4.sport", GTPU_PORT) & 0xFFFF, dport=v.get("l4.dport", GTPU_PORT) & 0xFFFF, data=gtp))
        body = outer
    else:
        proto = v.get("ipv4.proto", 6 if frame == "ipv4-tcp" else 17)
        body = ip(v.get("ipv4.src", 0x0A000001), v.get("ipv4.dst", 0x0A000002), proto, v.get("ipv4.ttl", 64),
                  l4(proto, v.get("l4.sport", 40000), v.get("l4.dport", 80), data))
    eth = dpkt.ethernet.Ethernet(dst=_mac(v.get("eth.dst", 0x000000000002)), src=_mac(v.get("eth.src", 0x000000000001)),
                                 type=dpkt.ethernet.ETH_TYPE_IP, data=body)
    return bytes(eth)


def class_frames(spec: TrafficSpec, prog, entries: Mapping[str, Any], seed: int, where: str = "traffic") -> tuple[list[bytes], list[int]]:
    """One frame per flow, classes one after the other; and the flows per class."""
    counts = spec.class_flows()
    frames: list[bytes] = []
    for i, (c, n) in enumerate(zip(spec.classes, counts)):
        d = _Drawer(c, prog, entries, f"{where}.classes[{i}]")
        rng = random.Random(f"{seed}:{c.name}")
        frames.extend(build_frame(c.frame, d.draw(rng)) for _ in range(n))
    return frames, counts


def class_generators(spec: TrafficSpec, duration_ns: float, seed: int) -> list:
    """A ``_core.Traffic`` per class (its flows, its profile)."""
    from synapse_vmt.workloads.traffic import make_traffic

    gens = []
    for i, (c, n) in enumerate(zip(spec.classes, spec.class_flows())):
        gens.append(make_traffic(dist=spec.dist, flows=int(n), duration_ps=int(duration_ns * 1000),
                                 flow_duration_ps=int(spec.flow_duration_ns * 1000), mean_pkt_bytes=spec.mean_pkt_bytes,
                                 max_bytes=spec.max_bytes, profile=c.profile, seed=seed * 1000 + i))
    return gens

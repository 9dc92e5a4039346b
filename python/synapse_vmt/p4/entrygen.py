"""Realistic table entries for a P4 program (``synapse p4 entries gen``).

For a program's tables that come without entries, draws ``count`` entries per
table (never more than ``max_size`` or than the key space holds), written as
``simple_switch_CLI`` commands (:func:`synapse_vmt.p4.entries.format_cli`).
Deterministic: table T's entries depend only on (seed, T, count), so
``--table T`` gives the same lines as a run over every table.

How values are drawn, per key field (by width and name):

- *exact*: from a population, distinct per key: IPv4 hosts in a few /16
  pools, IPv6 hosts in a few /48s, MACs under a few vendor OUIs (a population
  of 2·count addresses per key name, shared by the tables with a key of that
  P4Runtime name, so entries of consecutive tables agree on hosts), small ids
  (``vrf``, ``bd``, ``ifindex``...: 1..max(4·count, 256)) for other fields of
  13–32 bits, any value for narrow fields (ports, flags, valid bits);
- *lpm*: prefix lengths from the global BGP table's mix: IPv4 peaks at /24
  (about 60 %), then /22, /23, /21, /20 (G. Huston, "BGP in 2018 - The BGP
  Table", APNIC blog, Jan 2019; RIPE Labs, "Visibility of IPv4 and IPv6
  prefix lengths in 2019"); IPv6 at /48 (about half) and /32, with /44, /40,
  /36, /29 and customer /56 and /64 routes (same sources). Other widths scale
  the IPv4 mix to the field's width;
- *ternary* in ClassBench's manner (Taylor & Turner, "ClassBench: a packet
  classification benchmark", 2007): addresses get prefix masks (wildcard,
  host, /24-ish, other lengths), protocols are TCP/UDP/ICMP or wildcard
  (acl1's seed: 87 % TCP, 8 % any), ports and other fields are exact or
  wildcard, MACs mostly wildcard;
- *range*: ClassBench's port classes: WC (0:65535), HI (1024:65535), LO
  (0:1023), AR (an arbitrary range, half of them the common ones of the acl1
  seed such as 1600:1649 or 8000:8100) and EM (a single port), with source
  ports mostly WC and destination ports mostly EM or AR;
- *optional*: exact or wildcard, evenly.

Ternary tables get distinct priorities, more specific entries first (as
ACLs are written). Actions are drawn from the table's allowed actions,
forwarding-like ones (those with parameters, or the first listed) three times
as often as ``NoAction``/drop/miss ones; parameters get values of their width
(MACs, IPv4 addresses, ports 1..64, small indices).
"""

from __future__ import annotations

import functools
import random
import re

from synapse_vmt.p4.bmv2 import ActionInfo, TableSpec
from synapse_vmt.p4.cfg import KeyField
from synapse_vmt.p4.entries import PRIO_MAX, Entry, Match, _full, _prefix_mask, match_fields, sort_entries, wildcard

# IPv4 BGP prefix-length mix (percent, rounded; sources in the module doc).
BGP_V4 = {8: 0.02, 10: 0.05, 11: 0.1, 12: 0.2, 13: 0.3, 14: 0.5, 15: 0.7, 16: 1.5, 17: 1.0, 18: 1.6, 19: 2.8,
          20: 4.5, 21: 5.0, 22: 11.5, 23: 9.5, 24: 60.0}
# IPv6: BGP mix plus customer /56 and /64 routes.
BGP_V6 = {29: 3.0, 32: 18.0, 33: 0.8, 34: 0.8, 36: 3.0, 40: 5.0, 42: 1.5, 44: 7.0, 46: 2.0, 47: 1.5, 48: 48.0,
          56: 5.0, 64: 4.4}
# ClassBench port classes (WC, HI, LO, AR, EM): shares for source and destination ports.
PORT_CLASSES = ("WC", "HI", "LO", "AR", "EM")
SPORT_MIX = (0.88, 0.03, 0.01, 0.03, 0.05)
DPORT_MIX = (0.25, 0.05, 0.02, 0.15, 0.53)
# Common arbitrary ranges of ClassBench's acl1 seed (-dpar).
AR_COMMON = [(1600, 1649), (1300, 1349), (1300, 1350), (7500, 7599), (2200, 2210), (1025, 65535), (1700, 1750),
             (5001, 65535), (32200, 32207), (8000, 8100)]
OUIS = [0x001B21, 0x3CFDFE, 0x005056, 0x525400, 0x080027, 0x000C29, 0xF8F21E, 0xB8599F]

_ADDR = re.compile(r"(addr|ipv4|ipv6|_ip\b|ip_|_ip$|prefix|_sa$|_da$|^src$|^dst$|_src$|_dst$)", re.I)
_PORT = re.compile(r"port", re.I)
_PROTO = re.compile(r"proto|next_hdr|nexthdr", re.I)
_ETYPE = re.compile(r"eth_?type|ether_?type", re.I)
_DROPPY = re.compile(r"(^|\.)(NoAction|nop)$|drop|miss|deny", re.I)


def _short(name: str) -> str:
    return name.split(".")[-1]


class _Gen:
    def __init__(self, t: TableSpec, count: int, seed: int):
        self.t = t
        self.seed = seed
        self.rng = random.Random(f"synapse-entries:{seed}:{t.name}")
        self.count = count
        self.pools: dict[tuple[str, int], list[int]] = {}

    # -- populations --

    def pool(self, name: str, width: int, size: int, make) -> int:
        p = self.pools.get((name, width))
        if p is None:
            p = self.pools[(name, width)] = [make() for _ in range(size)]
        return self.rng.choice(p)

    def ipv4_host(self, name: str) -> int:
        base = self.pool(name, 32, 4, lambda: (self.rng.choice([10, 100, 172, 192, 198]) << 24) | (self.rng.getrandbits(8) << 16))
        return base | self.rng.getrandbits(16)

    def ipv6_host(self, name: str) -> int:
        base = self.pool(name, 128, 4, lambda: (0x2001 << 112) | (self.rng.getrandbits(32) << 80))
        return base | self.rng.getrandbits(80)

    def mac(self) -> int:
        return (self.rng.choice(OUIS) << 24) | self.rng.getrandbits(24)

    def small_id(self, width: int) -> int:
        hi = min(_full(width), max(4 * self.count, 256))
        return self.rng.randint(1, hi) if hi >= 1 else 0

    def value(self, name: str, width: int) -> int:
        """A value from the field's population (exact and optional matches):
        addresses come from a population per header field shared by every
        table keyed on that field (:func:`population`), so that, as in a real
        configuration, a host in one table is found in the next one too."""
        s = _short(name)
        if width in (48, 128) or (width == 32 and _ADDR.search(s)):
            return self.rng.choice(population(self.seed, name, width, self.count))
        if width <= 12:
            return self.rng.getrandbits(width)
        if width <= 32:
            return self.small_id(width)
        return self.rng.getrandbits(width)

    # -- per match kind --

    def prefix_len(self, width: int) -> int:
        mix = BGP_V6 if width == 128 else BGP_V4
        L = self.rng.choices(list(mix), weights=list(mix.values()))[0]
        if width not in (32, 128):
            L = max(0, min(width, round(L * width / 32)))
        return L

    def lpm(self, kf: KeyField) -> Match:
        w = kf.width
        plen = self.prefix_len(w)
        if w == 32:  # a public-looking unicast address
            v = (self.rng.randint(1, 223) << 24) | self.rng.getrandbits(24)
        elif w == 128:
            v = (0x2000 << 112) | self.rng.getrandbits(113)
        else:
            v = self.rng.getrandbits(w)
        m = _prefix_mask(w, plen)
        return Match("lpm", v & m, m, plen)

    def ternary(self, kf: KeyField) -> Match:
        w, s, r = kf.width, _short(kf.field), self.rng.random()
        full = _full(w)
        if w in (32, 128) and _ADDR.search(s) or w == 128:
            if r < 0.3:
                return wildcard(kf)
            if r < 0.55:
                plen = w
            elif r < 0.8:
                plen = 24 if w == 32 else 64
            else:
                plen = self.rng.randint(8, w - 1) if w == 32 else self.rng.choice([32, 40, 48, 56])
            m = _prefix_mask(w, plen)
            # host entries name the field's known hosts; wider prefixes anywhere in its pools
            v = self.value(kf.field, w) if plen == w else self.ipv4_host(kf.field) if w == 32 else self.ipv6_host(kf.field)
            return Match("ternary", v & m, m)
        if w == 48:
            if r < 0.6:
                return wildcard(kf)
            m = full if r < 0.95 else _prefix_mask(48, 24)
            return Match("ternary", self.value(kf.field, w) & m, m)
        if w == 8 and _PROTO.search(s):
            if r < 0.1:
                return wildcard(kf)
            return Match("ternary", self.rng.choices([6, 17, 1], weights=[87, 10, 3])[0], full)
        if w == 16 and _ETYPE.search(s):
            if r < 0.4:
                return wildcard(kf)
            return Match("ternary", self.rng.choices([0x0800, 0x86DD, 0x0806, 0x8100], weights=[70, 20, 5, 5])[0], full)
        if w == 16 and _PORT.search(s):
            if r < 0.45:
                return wildcard(kf)
            if r < 0.9:
                return Match("ternary", self._port_em(), full)
            plen = self.rng.randint(6, 15)  # a range cut into prefixes, one of them
            m = _prefix_mask(16, plen)
            return Match("ternary", self.rng.getrandbits(16) & m, m)
        if r < 0.5:
            return wildcard(kf)
        return Match("ternary", self.value(kf.field, w), full)

    def _port_em(self) -> int:
        return self.rng.choice([80, 443, 53, 22, 25, 123, 161, 179, 8080, 2152]) if self.rng.random() < 0.6 else self.rng.randint(1, 65535)

    def range(self, kf: KeyField) -> Match:
        w = kf.width
        s = _short(kf.field)
        mix = SPORT_MIX if re.search(r"sport|src", s, re.I) else DPORT_MIX
        cls = self.rng.choices(PORT_CLASSES, weights=mix)[0]
        top = _full(w)
        split = max(1, (top + 1) // 64)  # 1024 for 16 bits
        if cls == "WC":
            lo, hi = 0, top
        elif cls == "HI":
            lo, hi = split, top
        elif cls == "LO":
            lo, hi = 0, split - 1
        elif cls == "EM":
            lo = hi = self._port_em() & top if w == 16 else self.rng.randint(0, top)
        elif w == 16 and self.rng.random() < 0.5:
            lo, hi = self.rng.choice(AR_COMMON)
        else:
            lo = self.rng.randint(0, top)
            hi = min(top, lo + self.rng.randint(1, max(1, top // 16)))
        return Match("range", lo, lo=lo, hi=hi)

    def optional(self, kf: KeyField) -> Match:
        if self.rng.random() < 0.5:
            return wildcard(kf)
        return Match("optional", self.value(kf.field, kf.width), _full(kf.width))

    def match(self, kf: KeyField) -> Match:
        if kf.match in ("exact", "valid"):
            return Match("exact", self.value(kf.field, kf.width))
        return {"lpm": self.lpm, "ternary": self.ternary, "range": self.range, "optional": self.optional}[kf.match](kf)

    # -- actions --

    def action(self) -> ActionInfo:
        acts = list(self.t.actions)
        weights = [1 if _DROPPY.search(a.name) and not (a.params and i == 0) else 3 for i, a in enumerate(acts)]
        return self.rng.choices(acts, weights=weights)[0]

    def param(self, name: str, width: int) -> int:
        s = _short(name)
        if width == 48:
            return self.mac()
        if width == 32 and _ADDR.search(s):
            return self.ipv4_host("param:" + name)
        if width == 128:
            return self.ipv6_host("param:" + name)
        if _PORT.search(s) and width >= 7:
            return self.rng.randint(1, 64)
        if width <= 8:
            return self.rng.getrandbits(width)
        return self.rng.randint(0, min(_full(width), 4095))


@functools.lru_cache(maxsize=256)
def population(seed: int, field: str, width: int, count: int) -> tuple[int, ...]:
    """The addresses key ``field`` (a P4Runtime key name) takes across the program's tables: twice
    as many as a table's entries (so two tables keyed on it share about half
    their keys), drawn like :class:`_Gen` draws hosts and MACs."""
    g = _Gen.__new__(_Gen)
    g.rng = random.Random(f"synapse-population:{seed}:{field}:{width}")
    g.pools = {}
    out: set[int] = set()
    size = min(2 * count + 16, 1 << min(width, 24))
    while len(out) < size:
        out.add(g.mac() if width == 48 else g.ipv6_host(field) if width == 128 else g.ipv4_host(field))
    return tuple(sorted(out))


def _invalid_headers_zero(ms: dict[str, Match], fields) -> dict[str, Match]:
    """An entry that matches a header as invalid (``h.$valid$`` == 0) matches
    its fields as BMv2 reads them then: 0 (exact) or anything (others)."""
    invalid = {f.rsplit(".", 1)[0] for f, m in ms.items() if f.endswith(".$valid$") and m.value == 0 and m.mask != 0}
    if not invalid:
        return ms
    out = {}
    for kf, _ in fields:
        m = ms[kf.field]
        if kf.field.rsplit(".", 1)[0] in invalid and not kf.field.endswith(".$valid$"):
            m = Match("exact", 0) if m.kind == "exact" else wildcard(kf)
        out[kf.field] = m
    return out


def key_space(t: TableSpec) -> int | None:
    """How many distinct keys an exact-only table can hold (None: effectively unbounded)."""
    if t.match_type != "exact":
        return None
    bits = sum(kf.width for kf, _ in match_fields(t))
    return 1 << bits if bits < 40 else None


def gen_table(t: TableSpec, count: int, seed: int) -> list[Entry]:
    """Up to ``count`` distinct entries for table ``t`` (fewer if max_size or
    the key space is smaller; none if the program has const entries for it),
    in match order."""
    if t.const_entries:  # the program fixes this table's entries
        return []
    n = count
    if t.info.max_size:
        n = min(n, t.info.max_size)
    space = key_space(t)
    if space is not None:
        n = min(n, space)
    g = _Gen(t, count, seed)
    fields = match_fields(t)
    seen: set[tuple] = set()
    drafts: list[tuple[dict[str, Match], ActionInfo, dict[str, int]]] = []
    budget = 50 * n + 1000
    while len(drafts) < n and budget > 0:
        budget -= 1
        # Values are drawn by the key's P4Runtime name (UPF's sessions_downlink
        # and terminations_downlink both key on "ue_address", through different fields).
        ms = _invalid_headers_zero({kf.field: g.match(KeyField(nm, kf.width, kf.match)) for kf, nm in fields}, fields)
        k = tuple(m.key() for m in ms.values())
        if k in seen:
            continue
        seen.add(k)
        a = g.action()
        drafts.append((ms, a, {p.name: g.param(p.name, p.width) for p in a.params}))
    entries = []
    if t.needs_priority:
        # More specific entries first (as ACLs are written): rank by matched bits.
        def specificity(ms: dict[str, Match]) -> int:
            return sum(
                bin(m.mask or 0).count("1") if m.kind != "range" else (m.lo == m.hi) * 16 for m in ms.values()
            )

        order = sorted(range(len(drafts)), key=lambda i: (-specificity(drafts[i][0]), g.rng.random()))
        for rank, i in enumerate(order):
            ms, a, ps = drafts[i]
            entries.append(Entry(t.name, ms, a.name, ps, PRIO_MAX - (rank + 1), f"gen#{rank}"))
    else:
        entries = [Entry(t.name, ms, a.name, ps, None, f"gen#{i}") for i, (ms, a, ps) in enumerate(drafts)]
    return sort_entries(t, entries)

"""Deterministic captures for a P4 program, where every frame differs.

Generated traffic (:mod:`synapse_vmt.p4.gentraffic`) gives one frame per
flow; a real trace never repeats a frame: the IPv4 identification, the TTL
and the TCP sequence number change from packet to packet. :func:`frames`
draws ``count`` packets from the flows of a ``[traffic]`` spec (each packet
a uniformly drawn flow, seeded) and makes each one distinct the way a trace
is: the outer IPv4 ``identification`` counts packets, the ``ttl`` walks
through 32..231 (never expiring), a TCP segment's ``seq`` advances by the
flow's payload per packet; the IPv4 and TCP checksums are updated to
match. ``synapse p4 capture`` writes them as a pcap.
"""

from __future__ import annotations

import random
import struct
from typing import Iterator, Mapping

from synapse_vmt.errors import UserError

ETH = 14


def _csum_fix(old: int, old_word: int, new_word: int) -> int:
    """RFC 1624 incremental update of a ones'-complement checksum for one changed 16-bit word."""
    s = (~old & 0xFFFF) + (~old_word & 0xFFFF) + new_word
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _set16(b: bytearray, off: int, v: int, ck: int) -> None:
    """Write the 16-bit word at ``off`` and fix the checksum at ``ck``."""
    old = struct.unpack_from("!H", b, off)[0]
    struct.pack_into("!H", b, off, v)
    struct.pack_into("!H", b, ck, _csum_fix(struct.unpack_from("!H", b, ck)[0], old, v))


def vary(frame: bytes, i: int, seq: int) -> bytes:
    """``frame`` (Ethernet/IPv4) as packet ``i`` of a trace: identification
    ``i``, a TTL from ``i``, a TCP sequence number ``seq``."""
    b = bytearray(frame)
    if len(b) < ETH + 20 or b[12:14] != b"\x08\x00" or b[ETH] >> 4 != 4:
        return bytes(b)
    ihl = (b[ETH] & 0xF) * 4
    ck = ETH + 10
    _set16(b, ETH + 4, i & 0xFFFF, ck)
    ttl_proto = struct.unpack_from("!H", b, ETH + 8)[0]
    _set16(b, ETH + 8, ((32 + (i * 7) % 200) << 8) | (ttl_proto & 0xFF), ck)
    if b[ETH + 9] == 6 and len(b) >= ETH + ihl + 20:
        t = ETH + ihl
        tck = t + 16
        _set16(b, t + 4, (seq >> 16) & 0xFFFF, tck)
        _set16(b, t + 6, seq & 0xFFFF, tck)
    return bytes(b)


def frames(spec, prog, entries: Mapping, count: int, seed: int) -> Iterator[bytes]:
    """``count`` distinct frames from the flows of traffic ``spec`` (see the module doc)."""
    from synapse_vmt.p4.gentraffic import class_frames

    flows, _ = class_frames(spec, prog, entries, seed)
    if not flows:
        raise UserError("traffic: expected at least one flow")
    rng = random.Random(f"capture:{seed}")
    seqs = [rng.getrandbits(32) for _ in flows]
    for i in range(count):
        f = rng.randrange(len(flows))
        yield vary(flows[f], i, seqs[f])
        seqs[f] = (seqs[f] + max(0, len(flows[f]) - 54)) & 0xFFFFFFFF


def write_pcap(path: str, frames_: Iterator[bytes], gap_ns: int = 1000) -> int:
    """Writes the frames (nanosecond timestamps ``gap_ns`` apart) to a pcap file; returns the count."""
    import dpkt

    from synapse_vmt.errors import atomic_write

    n = 0
    with atomic_write(path, "wb") as f:
        w = dpkt.pcap.Writer(f, nano=True)
        for n, fr in enumerate(frames_, 1):
            w.writepkt(fr, ts=n * gap_ns / 1e9)
    return n

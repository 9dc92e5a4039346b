"""Flow-level traffic: flow-size distributions, pcap fitting and arrival traces.

The arrival generator itself is Rust (``synapse_vmt._core.Traffic``, see
``crates/synapse-core/src/workload/traffic.rs``): following §6 of the Synapse
paper, flow sizes are drawn from a flow-size distribution, each flow's
packets are a Poisson process with rate proportional to its size, flows start
uniformly over the run (or along a time-varying profile), and offered load is
set by the number of flows. This module supplies the distributions — the
built-in CAIDA ones or one fitted from a pcap — and the ``synapse traffic``
commands.

A distribution file (what ``synapse traffic fit`` writes and ``--dist``
reads) is JSON::

    {"format": "synapse-flowsize", "version": 1,
     "points": [[bytes, cumulative_fraction], ...],   # required
     "mean_pkt_bytes": 612.5,                          # optional
     "source": ..., "bytes_measure": ..., "summary": {...}, "fits": {...}}

``points``: bytes finite, > 0 and strictly increasing; fractions in [0, 1],
non-decreasing, the last 1. The first point is an atom (P(size = bytes₀) =
its fraction); between points sizes are log-uniform.
"""

from __future__ import annotations

import json
import os
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from synapse_vmt import _core
from synapse_vmt.errors import UserError, atomic_write, open_binary

FORMAT = "synapse-flowsize"
FORMAT_VERSION = 1
FILE_KEYS = {"format", "version", "points", "mean_pkt_bytes", "source", "bytes_measure", "summary", "fits"}
BYTES_MEASURE = "IP total length (header + payload) summed per unidirectional 5-tuple flow"

# Downsampling of an empirical CDF (same rule as scripts/caida_cdf.py): keep a
# point before F moves by DU, the size by DLOG decades or the tail 1-F by DTAIL decades.
DU, DLOG, DTAIL = 0.004, 1 / 16, 0.1


# ----------------------------------------------------------------- distributions


def load_dist(spec: str) -> tuple[str | list[tuple[float, float]], float | None]:
    """A distribution for ``_core``: a built-in name (``caida2019``, or
    ``caida2019:1e7`` truncated at 10 MB) as is, or a JSON file's
    points; with the file's ``mean_pkt_bytes`` when it has one."""
    if spec.split(":", 1)[0] in _core.FLOW_DISTS:  # name or name:max_bytes
        try:
            _core.flow_dist_points(spec)
        except ValueError as e:
            raise UserError(f"--dist {spec}: {e}") from None
        return spec, None
    p = Path(spec)
    if not p.exists():
        raise UserError(
            f"{spec}: no such distribution file (built-ins: {', '.join(_core.FLOW_DISTS)})"
        )
    try:
        doc = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{spec}: cannot read: {e}") from None
    except json.JSONDecodeError as e:
        raise UserError(f"{spec}: line {e.lineno}: invalid JSON: {e.msg}") from None
    if not isinstance(doc, dict) or "points" not in doc:
        raise UserError(f'{spec}: expected a JSON object with "points": [[bytes, cumulative_fraction], ...]')
    unknown = sorted(set(doc) - FILE_KEYS)
    if unknown:
        raise UserError(f"{spec}: unknown key {unknown[0]!r}; expected one of: {', '.join(sorted(FILE_KEYS))}")
    if doc.get("format", FORMAT) != FORMAT:
        raise UserError(f"{spec}: format is {doc['format']!r}, expected {FORMAT!r}")
    pts = doc["points"]
    if not isinstance(pts, list) or not all(
        isinstance(q, list) and len(q) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in q)
        for q in pts
    ):
        raise UserError(f'{spec}: "points" must be a list of [bytes, cumulative_fraction] number pairs')
    points = [(float(b), float(c)) for b, c in pts]
    try:
        _core.flow_dist_points(points)  # validates
    except ValueError as e:
        raise UserError(f"{spec}: {e}") from None
    m = doc.get("mean_pkt_bytes")
    if m is not None and not (isinstance(m, (int, float)) and m > 0):
        raise UserError(f'{spec}: "mean_pkt_bytes" must be a number > 0, got {m!r}')
    return points, (float(m) if m is not None else None)


def empirical_points(sizes: np.ndarray) -> list[tuple[float, float]]:
    """Empirical CDF points of flow sizes, downsampled to a few hundred while
    keeping the tail (the largest flow is always the last point)."""
    x = np.sort(np.asarray(sizes, dtype=np.float64))
    b, counts = np.unique(x, return_counts=True)
    f = np.cumsum(counts) / len(x)
    if len(b) <= 2:
        return [(float(bb), float(ff)) for bb, ff in zip(b, f)]

    def tail(v: float) -> float:
        return float(np.log10(max(1.0 - v, 1e-12)))

    keep = [0]
    for i in range(1, len(b) - 1):
        j, n = keep[-1], i + 1
        if f[n] - f[j] > DU or np.log10(b[n] / b[j]) > DLOG or abs(tail(f[n]) - tail(f[j])) > DTAIL:
            keep.append(i)
    keep.append(len(b) - 1)
    out = [(float(b[k]), float(f[k])) for k in keep]
    out[-1] = (out[-1][0], 1.0)
    return out


def fit_parametric(sizes: np.ndarray) -> dict[str, Any]:
    """Heavy-tailed fits by maximum likelihood, each with its KS statistic:
    lognormal and Pareto (x_min = smallest flow) over all flows, and a
    generalized Pareto over the top 10 % (exceedances of the 90th percentile).
    ``best`` is the whole-body fit with the smaller KS statistic."""
    from scipy import stats

    x = np.asarray(sizes, dtype=np.float64)
    out: dict[str, Any] = {}
    if len(np.unique(x)) < 3:
        out["note"] = "fewer than 3 distinct flow sizes: no parametric fit"
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        s, _, scale = stats.lognorm.fit(x, floc=0)
        ks_ln = stats.kstest(x, "lognorm", args=(s, 0, scale)).statistic
        out["lognormal"] = {"mu": float(np.log(scale)), "sigma": float(s), "ks": float(ks_ln)}
        xm = float(x.min())
        alpha = len(x) / float(np.sum(np.log(x / xm)))  # closed-form MLE for fixed x_min
        ks_pa = stats.kstest(x, "pareto", args=(alpha, 0, xm)).statistic
        out["pareto"] = {"alpha": alpha, "x_min": xm, "ks": float(ks_pa)}
        u = float(np.quantile(x, 0.9))
        y = x[x > u] - u
        if len(y) >= 20 and len(np.unique(y)) >= 3:
            xi, _, beta = stats.genpareto.fit(y, floc=0)
            ks_g = stats.kstest(y, "genpareto", args=(xi, 0, beta)).statistic
            out["gpd_tail"] = {"threshold": u, "xi": float(xi), "beta": float(beta), "exceedances": int(len(y)), "ks": float(ks_g)}
    out["best"] = "lognormal" if ks_ln <= ks_pa else "pareto"
    return out


# ----------------------------------------------------------------- pcap reading


@dataclass
class Flows:
    """Per-flow totals from a capture (one row per unidirectional 5-tuple)."""

    bytes: np.ndarray  # float64, IP total length summed
    packets: np.ndarray  # int64
    first_ts: np.ndarray  # float64 seconds
    last_ts: np.ndarray
    ip_packets: int
    skipped: int  # packets that were not IPv4/IPv6


_PCAP_MAGICS = {bytes.fromhex(h) for h in ("a1b2c3d4", "d4c3b2a1", "a1b23c4d", "4d3cb2a1")}
_PCAPNG_MAGIC = bytes.fromhex("0a0d0d0a")
_MAX_CAPLEN = 1 << 18


def _records_pcap(f: BinaryIO, path: str):
    import dpkt

    head = f.read(24)
    if len(head) < 24:
        raise UserError(f"{path}: truncated pcap file header ({len(head)} of 24 bytes)")
    try:
        reader = dpkt.pcap.Reader(_Bytes(head))
    except (ValueError, dpkt.Error) as e:
        raise UserError(f"{path}: not a pcap file ({e})") from None
    magic = struct.unpack(">I", head[:4])[0]  # as dpkt.pcap.FileHdr reads it
    hdr_cls = dpkt.pcap.MAGIC_TO_PKT_HDR[magic]
    nano = magic in (dpkt.pcap.TCPDUMP_MAGIC_NANO, dpkt.pcap.PMUDPCT_MAGIC_NANO)
    div = 1e9 if nano else 1e6
    limit = max(reader.snaplen, _MAX_CAPLEN)
    yield reader.datalink()
    n = 0
    while True:
        buf = f.read(16)
        if not buf:
            return
        n += 1
        if len(buf) < 16:
            raise UserError(f"{path}: packet {n}: truncated record header ({len(buf)} of 16 bytes)")
        h = hdr_cls(buf)
        if h.caplen > limit:
            raise UserError(f"{path}: packet {n}: capture length {h.caplen} exceeds the snapshot length {reader.snaplen}: corrupt file")
        data = f.read(h.caplen)
        if len(data) < h.caplen:
            raise UserError(f"{path}: packet {n}: truncated ({len(data)} of {h.caplen} bytes)")
        yield n, h.tv_sec + h.tv_usec / div, data


def _records_pcapng(f: BinaryIO, path: str):
    import dpkt

    try:
        reader = dpkt.pcapng.Reader(f)  # reads the section header and first interface block
    except (ValueError, dpkt.Error, struct.error) as e:
        raise UserError(f"{path}: not a readable pcapng file ({e})") from None
    pos = f.tell()
    f.seek(8)
    le = f.read(4) == bytes.fromhex("4d3c2b1a")
    f.seek(pos)
    yield reader.idb.linktype
    order = "<" if le else ">"
    div, off = float(reader._divisor), reader._tsoffset
    n = 0
    while True:
        buf = f.read(8)
        if not buf:
            return
        if len(buf) < 8:
            raise UserError(f"{path}: packet {n + 1}: truncated block header ({len(buf)} of 8 bytes)")
        btype, blen = struct.unpack(order + "II", buf)
        if blen < 12 or blen % 4:
            raise UserError(f"{path}: packet {n + 1}: bad block length {blen}: corrupt file")
        rest = f.read(blen - 8)
        if len(rest) < blen - 8:
            raise UserError(f"{path}: packet {n + 1}: truncated ({len(rest) + 8} of {blen} bytes)")
        if btype in (dpkt.pcapng.PCAPNG_BT_EPB, dpkt.pcapng.PCAPNG_BT_PB):
            n += 1
            try:
                if btype == dpkt.pcapng.PCAPNG_BT_EPB:
                    blk = (dpkt.pcapng.EnhancedPacketBlockLE if le else dpkt.pcapng.EnhancedPacketBlock)(buf + rest)
                else:
                    blk = (dpkt.pcapng.PacketBlockLE if le else dpkt.pcapng.PacketBlock)(buf + rest)
            except (dpkt.Error, struct.error) as e:
                raise UserError(f"{path}: packet {n}: corrupt packet block ({e})") from None
            yield n, off + ((blk.ts_high << 32) | blk.ts_low) / div, blk.pkt_data
        elif btype == dpkt.pcapng.PCAPNG_BT_SPB:
            n += 1
            (plen,) = struct.unpack(order + "I", rest[:4])
            yield n, 0.0, rest[4 : 4 + plen]


class _Bytes:
    """A minimal file object over bytes (dpkt's Reader only calls read)."""

    def __init__(self, b: bytes) -> None:
        self.b, self.name = b, "<header>"

    def read(self, n: int) -> bytes:
        out, self.b = self.b[:n], self.b[n:]
        return out


def _ip_layer(linktype: int, data: bytes):
    import dpkt

    if linktype == dpkt.pcap.DLT_EN10MB:
        return dpkt.ethernet.Ethernet(data).data
    if linktype in (101, 12, 14, 228, 229):  # LINKTYPE_RAW and the platform DLT_RAW values
        v = data[0] >> 4 if data else 0
        return dpkt.ip.IP(data) if v == 4 else dpkt.ip6.IP6(data) if v == 6 else None
    if linktype == dpkt.pcap.DLT_LINUX_SLL:
        return dpkt.sll.SLL(data).data
    if linktype in (dpkt.pcap.DLT_NULL, dpkt.pcap.DLT_LOOP):
        return dpkt.loopback.Loopback(data).data
    return None


_U16 = struct.Struct("!H")
_V4 = struct.Struct("!BxHxxHxB")  # ver/ihl, total length, flags/frag, protocol
_PORTS = struct.Struct("!HH")
_ETH_VLAN = (0x8100, 0x88A8, 0x9100)


def _key_fast(linktype: int, data: bytes) -> tuple[tuple, int] | None:
    """Flow key and IP length for the common case (Ethernet with up to two
    VLAN tags, or raw IP; IPv4, or IPv6 without extension headers), parsed
    with struct; None sends the packet to :func:`_key_dpkt`, which agrees
    with this on every packet both can read."""
    try:
        if linktype == 1:
            off = 14
            et = _U16.unpack_from(data, 12)[0]
            while et in _ETH_VLAN:
                et = _U16.unpack_from(data, off + 2)[0]
                off += 4
            if et == 0x0800:
                v = 4
            elif et == 0x86DD:
                v = 6
            else:
                return None
        elif linktype in (101, 12, 14):
            off, v = 0, data[0] >> 4
        else:
            return None
        if v == 4:
            vihl, length, frag, proto = _V4.unpack_from(data, off)
            if vihl >> 4 != 4:
                return None
            l4 = off + (vihl & 15) * 4
            src, dst = data[off + 12 : off + 16], data[off + 16 : off + 20]
            first = frag & 0x1FFF == 0
        elif v == 6:
            proto = data[off + 6]
            if proto not in (6, 17):  # extension headers etc.: let dpkt walk them
                return None
            length = 40 + _U16.unpack_from(data, off + 4)[0]
            l4 = off + 40
            src, dst = data[off + 8 : off + 24], data[off + 24 : off + 40]
            first = True
        else:
            return None
        if first and proto in (6, 17) and len(data) >= l4 + 4:
            sport, dport = _PORTS.unpack_from(data, l4)
        elif proto in (6, 17) and first:
            return None  # ports cut off: dpkt decides
        else:
            sport = dport = 0
        return (src, dst, proto, sport, dport), length
    except (struct.error, IndexError):
        return None


def _key_dpkt(linktype: int, data: bytes) -> tuple[tuple, int] | None:
    """Flow key and IP length decoded by dpkt (any supported link type,
    IPv6 extension headers, odd packets); None for non-IP."""
    import dpkt

    try:
        ip = _ip_layer(linktype, data)
    except (dpkt.Error, struct.error, IndexError):
        return None
    if isinstance(ip, dpkt.ip.IP):
        length, proto, first_frag = ip.len, ip.p, ip.offset == 0
    elif isinstance(ip, dpkt.ip6.IP6):
        length, proto, first_frag = 40 + ip.plen, ip.p, True
    else:
        return None
    l4 = ip.data
    if first_frag and isinstance(l4, (dpkt.tcp.TCP, dpkt.udp.UDP)):
        sport, dport = l4.sport, l4.dport
    else:
        sport = dport = 0
    return (bytes(ip.src), bytes(ip.dst), proto, sport, dport), length


SUPPORTED_LINKTYPES = {1: "Ethernet", 101: "raw IP", 12: "raw IP", 14: "raw IP", 228: "IPv4", 229: "IPv6", 113: "Linux SLL", 0: "BSD loopback", 108: "OpenBSD loopback"}


def read_flows(path: str | os.PathLike) -> Flows:
    """Group a pcap/pcapng's packets into unidirectional 5-tuple flows (IPv4
    and IPv6; TCP and UDP ports, other protocols with ports 0) and total the
    IP bytes of each. A truncated or corrupt file raises UserError naming the
    packet. Shows a progress bar on a terminal for captures over 32 MB."""
    from rich.progress import Progress

    path = str(path)
    f = open_binary(path)
    table: dict[tuple, list] = {}
    ip_packets = skipped = 0
    with f:
        magic = f.read(4)
        f.seek(0)
        if magic in _PCAP_MAGICS:
            recs = _records_pcap(f, path)
        elif magic == _PCAPNG_MAGIC:
            recs = _records_pcapng(f, path)
        else:
            raise UserError(f"{path}: not a pcap or pcapng file (starts with {magic.hex() or 'nothing'})")
        linktype = next(recs)
        if linktype not in SUPPORTED_LINKTYPES:
            raise UserError(
                f"{path}: unsupported link type {linktype}; expected one of: "
                + ", ".join(f"{k} ({v})" for k, v in sorted(SUPPORTED_LINKTYPES.items()))
            )
        size = os.fstat(f.fileno()).st_size
        with Progress(transient=True, disable=size < (32 << 20)) as bar:
            task = bar.add_task(f"reading {os.path.basename(path)}", total=size)
            for n, ts, data in recs:
                if n & 0xFFFF == 0:
                    bar.update(task, completed=f.tell())
                kl = _key_fast(linktype, data) or _key_dpkt(linktype, data)
                if kl is None:
                    skipped += 1
                    continue
                key, length = kl
                row = table.get(key)
                if row is None:
                    table[key] = [length, 1, ts, ts]
                else:
                    row[0] += length
                    row[1] += 1
                    row[3] = ts
                ip_packets += 1
    rows = np.array(list(table.values()), dtype=np.float64).reshape(-1, 4)
    return Flows(rows[:, 0], rows[:, 1].astype(np.int64), rows[:, 2], rows[:, 3], ip_packets, skipped)


def fit_pcap(path: str | os.PathLike) -> dict[str, Any]:
    """Read a capture and build the distribution document (see module doc)."""
    fl = read_flows(path)
    if len(fl.bytes) == 0:
        raise UserError(f"{path}: no IPv4/IPv6 packets ({fl.skipped} other packets)")
    sizes = fl.bytes
    dur = fl.last_ts - fl.first_ts
    summary = {
        "flows": int(len(sizes)),
        "packets": int(fl.ip_packets),
        "skipped_packets": int(fl.skipped),
        "bytes": float(sizes.sum()),
        "mean_bytes": float(sizes.mean()),
        "median_bytes": float(np.median(sizes)),
        "p99_bytes": float(np.quantile(sizes, 0.99)),
        "max_bytes": float(sizes.max()),
        "mean_pkts_per_flow": float(fl.packets.mean()),
        "mean_flow_duration_s": float(dur[fl.packets > 1].mean()) if np.any(fl.packets > 1) else 0.0,
    }
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "source": os.path.basename(str(path)),
        "bytes_measure": BYTES_MEASURE,
        "mean_pkt_bytes": float(sizes.sum() / fl.ip_packets),
        "summary": summary,
        "fits": fit_parametric(sizes),
        "points": [list(p) for p in empirical_points(sizes)],
    }


# ----------------------------------------------------------------- generation


def traffic_config(
    dist: str = "caida2019",
    flows: int = 1000,
    duration_ps: int = 10_000_000_000,
    flow_duration_ps: int | None = None,
    mean_pkt_bytes: float | None = None,
    max_bytes: float | None = None,
    profile: str | list | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """The config dict of ``_core.Traffic``; ``dist`` is a built-in name or a
    distribution file (whose ``mean_pkt_bytes`` applies unless given)."""
    d, file_m = load_dist(dist)
    cfg: dict[str, Any] = {"dist": d, "flows": flows, "duration_ps": duration_ps, "seed": seed, "profile": profile}
    if flow_duration_ps is not None:
        cfg["flow_duration_ps"] = flow_duration_ps
    m = mean_pkt_bytes if mean_pkt_bytes is not None else file_m
    if m is not None:
        cfg["mean_pkt_bytes"] = m
    if max_bytes is not None:
        cfg["max_bytes"] = max_bytes
    return cfg


def make_traffic(**kw: Any) -> "_core.Traffic":
    """A ``_core.Traffic`` from :func:`traffic_config`'s arguments."""
    try:
        return _core.Traffic(traffic_config(**kw))
    except ValueError as e:
        raise UserError(str(e)) from None


def flows_for_rate(rate_pps: float, **kw: Any) -> int:
    """Flows giving an expected aggregate rate of ``rate_pps`` packets/s
    (the other arguments as for :func:`traffic_config`)."""
    if not (np.isfinite(rate_pps) and rate_pps >= 0):
        raise UserError(f"--rate-pps must be a finite number >= 0, got {rate_pps}")
    mean = make_traffic(flows=0, **kw).mean_packets
    flows = round(rate_pps * kw["duration_ps"] * 1e-12 / mean)
    if flows >= 2**32:
        raise UserError(f"--rate-pps {rate_pps:g} needs {flows} flows, more than a 32-bit flow id allows")
    return int(flows)


def write_arrivals(tr: "_core.Traffic", out: str | os.PathLike, clip_ps: int | None, batch: int = 1 << 20) -> tuple[int, int]:
    """Write arrivals to ``.csv`` (``t_ps,flow``) or ``.npy`` (structured
    array with fields ``t_ps`` uint64, ``flow`` uint32); returns (written, total).
    With ``clip_ps``, arrivals at or after it are dropped."""
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in (".csv", ".npy"):
        raise UserError(f"{out}: unknown output format {suffix or '(none)'}; expected .csv or .npy")
    written = 0
    dtype = np.dtype([("t_ps", "<u8"), ("flow", "<u4")])
    chunks = []
    with atomic_write(out, "wb") as f:
        if suffix == ".csv":
            f.write(b"t_ps,flow\n")
        while True:
            t, fl = tr.next_batch(batch)
            done = len(t) == 0
            if clip_ps is not None and len(t) and t[-1] >= clip_ps:
                keep = int(np.searchsorted(t, clip_ps, side="left"))  # arrivals are sorted
                t, fl, done = t[:keep], fl[:keep], True
            if len(t):
                if suffix == ".csv":
                    f.write(_core.arrivals_csv(t, fl))
                else:
                    a = np.empty(len(t), dtype=dtype)
                    a["t_ps"], a["flow"] = t, fl
                    chunks.append(a)
                written += len(t)
            if done:
                break
        if suffix == ".npy":
            np.save(f, np.concatenate(chunks) if chunks else np.empty(0, dtype=dtype))
    return written, int(tr.total_packets)


def fmt_bytes(b: float) -> str:
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= k:
            return f"{b / k:.3g} {unit}"
    return f"{b:.3g} B"


"""Deterministic captures for the P4 test programs (dpkt; the same bytes on every run).

    python scripts/p4_captures.py NAME -o FILE.pcap [--packets N] [--seed S]

NAME is one of:

- ``route3-edge``: the edge cases of real captures for tests/data/p4/route3-edge.json,
  every destination of its routes crossed with TCP/UDP/SCTP/GRE/ICMP/OSPF, a
  VLAN tag, IPv4 options (IHL 6..15), a bad IHL, fragments (first, middle,
  last), TTL 0..2, IPv6, ARP, unknown EtherTypes, QinQ and frames cut short
  at every header (committed as tests/data/p4/route3-edge.pcap);
- ``route3-edge-large``: ``--packets`` frames drawn from the same mix, IP id, TTL,
  ports and TCP sequence numbers varying per packet, as in a real trace;
- ``upf-large``: the traffic classes of examples/upf/scenario.toml over
  examples/upf/entries.txt (GTP-U uplink, IPv4 downlink), a few packets per
  flow with the IP id varying;
- ``switch``: the traffic classes of examples/switch/traffic.toml over
  tests/data/p4/switch-entries.txt for the P4_16 switch program
  (../shared/data/p4/switch-p416.json), then control-protocol frames its
  parser gives a queue priority (ARP, LLDP, LACP, OSPF, BGP, DHCP...);
- ``heavyhitter``: flows for tests/data/p4/heavyhitter.json: a few heavy flows
  crossing its per-flow threshold among light ones, in arrival order.

The goldens' manifest (tests/data/p4/goldens/manifest.toml) names the
command that writes each capture that is not committed.
"""

from __future__ import annotations

import argparse
import random
import socket
import struct
import sys
from pathlib import Path

import dpkt

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data" / "p4"


def mac(s: str) -> bytes:
    return bytes(int(x, 16) for x in s.split(":"))


def ip4(s: str) -> bytes:
    return socket.inet_aton(s)


def ip6(s: str) -> bytes:
    return socket.inet_pton(socket.AF_INET6, s)


SRC_MAC, DST_MAC = mac("00:00:00:00:aa:01"), mac("00:00:00:00:bb:02")


def eth(etype: int, payload: bytes, vlan: int | None = None, pad: bool = True) -> bytes:
    if vlan is not None:
        payload = struct.pack("!HH", vlan, etype) + payload
        etype = 0x8100
    fr = bytes(dpkt.ethernet.Ethernet(dst=DST_MAC, src=SRC_MAC, type=etype, data=payload))
    if pad and len(fr) < 60:
        fr += b"\x00" * (60 - len(fr))  # Ethernet's minimum frame (without FCS)
    return fr


def l4(proto: int, sport: int, dport: int, payload: bytes = b"", seq: int = 1) -> bytes:
    if proto == 6:
        return bytes(dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq, flags=dpkt.tcp.TH_SYN, data=payload))
    if proto == 17:
        u = dpkt.udp.UDP(sport=sport, dport=dport, data=payload)
        u.ulen = 8 + len(payload)
        return bytes(u)
    if proto == 132:  # SCTP common header + an INIT chunk header
        return struct.pack("!HHII", sport, dport, 0x1234_5678, 0) + struct.pack("!BBH", 1, 0, 4) + payload
    if proto == 47:  # GRE carrying IPv4
        return struct.pack("!HH", 0, 0x0800) + payload
    if proto == 1:
        return bytes(dpkt.icmp.ICMP(type=8, code=0, data=dpkt.icmp.ICMP.Echo(id=sport, seq=dport, data=payload)))
    if proto == 89:  # OSPF hello (header only)
        return struct.pack("!BBHIIHHQ", 2, 1, 24, 0x0a000001, 0, 0, 0, 0)
    return payload or b"\x00" * 8


def ipv4(src: str, dst: str, proto: int, payload: bytes, ttl: int = 64, ident: int = 1, opts: bytes = b"",
         frag_off: int = 0, mf: bool = False, df: bool = False) -> bytes:
    h = dpkt.ip.IP(src=ip4(src), dst=ip4(dst), p=proto, ttl=ttl, id=ident, data=payload)
    if opts:
        h.opts = opts + b"\x00" * (-len(opts) % 4)
        h.hl = 5 + len(h.opts) // 4
    h.offset, h.mf, h.df = frag_off // 8, int(mf), int(df)  # offset in 8-byte units
    h.len = 20 + len(h.opts) + len(payload)
    return bytes(h)


def with_ihl(raw: bytes, ihl: int) -> bytes:
    """The IPv4 header with another IHL nibble (checksum left as is)."""
    return bytes([(raw[0] & 0xF0) | ihl]) + raw[1:]


def ipv6(src: str, dst: str, nh: int, payload: bytes, hlim: int = 64) -> bytes:
    return struct.pack("!IHBB", 0x6000_0000, len(payload), nh, hlim) + ip6(src) + ip6(dst) + payload


def arp(op: int, spa: str, tpa: str) -> bytes:
    return struct.pack("!HHBBH", 1, 0x0800, 6, 4, op) + SRC_MAC + ip4(spa) + b"\x00" * 6 + ip4(tpa)


# route3-edge.json's routes (route3-edge-entries.txt): one destination per prefix, and ones no prefix holds
DESTS = ["10.1.2.3", "10.1.2.77", "10.1.9.9", "10.200.0.1", "10.66.1.1", "192.168.3.4", "172.20.0.1",
         "100.100.0.1", "224.0.0.5", "8.8.8.8"]
SOURCES = ["1.2.3.4", "10.9.0.5", "192.168.7.7"]
# (protocol, sport, dport): the ACL's cases
FLOWS = [(6, 40000, 80), (6, 40001, 22), (6, 5555, 8080), (17, 53, 5353), (17, 5000, 6500), (17, 1234, 1234),
         (132, 2905, 2905), (47, 0, 0), (1, 7, 1), (89, 0, 0)]
V6 = ["2001:db8::1", "2001:db8:1::2", "fe80::1"]


def route3_edge() -> list[bytes]:
    out: list[bytes] = []
    ident = 1
    for dst in DESTS:
        for src in SOURCES:
            for proto, sp, dp in FLOWS:
                inner = bytes(dpkt.ip.IP(src=ip4("9.9.9.9"), dst=ip4("9.9.9.8"), p=17, data=b"")) if proto == 47 else b"hello"
                out.append(eth(0x0800, ipv4(src, dst, proto, l4(proto, sp, dp, inner), ident=ident)))
                ident += 1
        # a VLAN tag
        for proto, sp, dp in FLOWS[:6]:
            out.append(eth(0x0800, ipv4("1.2.3.4", dst, proto, l4(proto, sp, dp, b"v")), vlan=100))
    # IPv4 options: IHL 6..15 (NOPs, then a record-route option)
    for ihl in range(6, 16):
        n = (ihl - 5) * 4
        opts = bytes([7, min(n - 1, 39), 4]) + b"\x00" * (n - 4) + b"\x01" if n >= 8 else b"\x01" * n
        for dst, (proto, sp, dp) in zip(["10.1.2.3", "10.1.9.9", "192.168.3.4"], [(6, 40000, 80), (6, 1, 443), (17, 53, 1)]):
            out.append(eth(0x0800, ipv4("1.2.3.4", dst, proto, l4(proto, sp, dp, b"opt"), opts=opts[:n])))
    # a bad IHL (4, 0): verify fails after ipv4 was extracted
    for ihl in (4, 0):
        out.append(eth(0x0800, with_ihl(ipv4("1.2.3.4", "10.1.9.9", 6, l4(6, 1, 80)), ihl)))
    # fragments of one UDP datagram: first (with the UDP header), middle, last; and a DF packet
    for dst in ("10.1.2.3", "10.1.9.9", "192.168.3.4"):
        body = l4(17, 5000, 6500, b"x" * 40)
        out.append(eth(0x0800, ipv4("1.2.3.4", dst, 17, body[:24], ident=777, mf=True)))
        out.append(eth(0x0800, ipv4("1.2.3.4", dst, 17, body[24:40], ident=777, frag_off=24, mf=True)))
        out.append(eth(0x0800, ipv4("1.2.3.4", dst, 17, body[40:], ident=777, frag_off=40)))
        out.append(eth(0x0800, ipv4("1.2.3.4", dst, 6, l4(6, 1234, 80), df=True)))
    # TTL 0, 1, 2
    for ttl in (0, 1, 2):
        out.append(eth(0x0800, ipv4("1.2.3.4", "10.1.2.3", 6, l4(6, 40000, 80), ttl=ttl)))
    # IPv6 (parsed, not routed), with and without a VLAN tag
    for v in (None, 200):
        for dst in V6:
            for nh, sp, dp in ((6, 1000, 80), (17, 53, 53), (132, 1, 2), (58, 0, 0)):
                pl = l4(nh, sp, dp, b"six") if nh != 58 else b"\x80\x00\x00\x00\x00\x01\x00\x01"
                out.append(eth(0x86DD, ipv6("2001:db8::99", dst, nh, pl), vlan=v))
    # ARP request and reply, with and without a tag
    for v in (None, 300):
        out.append(eth(0x0806, arp(1, "10.1.2.1", "10.1.2.3"), vlan=v))
        out.append(eth(0x0806, arp(2, "10.1.2.3", "10.1.2.1"), vlan=v))
    # unknown EtherTypes (LLDP, MPLS), QinQ (an inner 0x8100: not parsed further)
    out.append(eth(0x88CC, b"\x02\x07\x04" + b"\x00" * 40))
    out.append(eth(0x8847, struct.pack("!I", (16 << 12) | (1 << 8) | 64) + ipv4("1.2.3.4", "10.1.2.3", 6, l4(6, 1, 80))))
    out.append(eth(0x8100, struct.pack("!HH", 20, 0x0800) + ipv4("1.2.3.4", "10.1.2.3", 6, l4(6, 1, 80)), vlan=10))
    # frames cut short: inside Ethernet, at its end, inside the tag, inside IPv4, inside its options,
    # inside TCP, UDP, SCTP, GRE, IPv6 and ARP (no Ethernet padding: the cut is the point)
    full = eth(0x0800, ipv4("1.2.3.4", "10.1.2.3", 6, l4(6, 40000, 80, b"payload")), pad=False)
    for n in (6, 13, 14, 20, 33, 34, 40, 53):
        out.append(full[:n])
    out.append(eth(0x0800, ipv4("1.2.3.4", "10.1.2.3", 6, l4(6, 1, 80)), vlan=5, pad=False)[:16])
    opt = eth(0x0800, ipv4("1.2.3.4", "10.1.2.3", 17, l4(17, 1, 2), opts=b"\x01" * 40), pad=False)
    out.append(opt[:14 + 20 + 12])
    for proto in (17, 132, 47):
        fr = eth(0x0800, ipv4("1.2.3.4", "10.1.9.9", proto, l4(proto, 1, 2, b"zz")), pad=False)
        out.append(fr[:14 + 20 + 3])
    v6 = eth(0x86DD, ipv6("2001:db8::99", "2001:db8::1", 6, l4(6, 1, 2)), pad=False)
    out.append(v6[:14 + 30])
    out.append(v6[:14 + 40 + 10])
    out.append(eth(0x0806, arp(1, "10.1.2.1", "10.1.2.3"), pad=False)[:30])
    return out


def route3_large(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out: list[bytes] = []
    for i in range(n):
        r = rng.random()
        ident, ttl = rng.randrange(65536), rng.choice([1, 2] + [64] * 20 + list(range(3, 128)))
        if r < 0.10:  # IPv6
            nh, sp, dp = rng.choice(((6, rng.randrange(1024, 65536), 443), (17, 53, 53), (132, 1, 2)))
            out.append(eth(0x86DD, ipv6("2001:db8::99", rng.choice(V6), nh, l4(nh, sp, dp, b"six", seq=rng.getrandbits(32))),
                           vlan=rng.choice([None, None, 200])))
            continue
        if r < 0.12:
            out.append(eth(0x0806, arp(rng.choice((1, 2)), "10.1.2.1", rng.choice(DESTS))))
            continue
        if r < 0.125:  # short
            full = eth(0x0800, ipv4("1.2.3.4", "10.1.2.3", 6, l4(6, 40000, 80)), pad=False)
            out.append(full[:rng.randrange(1, len(full))])
            continue
        dst = rng.choice(DESTS[:-1]) if rng.random() < 0.9 else f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        src = rng.choice(SOURCES) if rng.random() < 0.3 else f"{rng.randrange(1, 224)}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        proto, sp, dp = rng.choice(FLOWS)
        if proto in (6, 17) and rng.random() < 0.6:
            sp, dp = rng.randrange(1024, 65536), rng.choice([80, 443, 53, 22, 6100, rng.randrange(1, 65536)])
        opts = b"\x01" * (4 * rng.randrange(1, 11)) if rng.random() < 0.05 else b""
        payload = l4(proto, sp, dp, b"p" * rng.randrange(0, 64), seq=rng.getrandbits(32))
        if rng.random() < 0.05:  # a fragment
            off = rng.choice([0, 0, 8, 64, 1480])
            ip = ipv4(src, dst, proto, payload if off == 0 else payload[: 8 + rng.randrange(16)], ttl=ttl, ident=ident,
                      opts=opts, frag_off=off, mf=rng.random() < 0.7)
        else:
            ip = ipv4(src, dst, proto, payload, ttl=ttl, ident=ident, opts=opts)
        out.append(eth(0x0800, ip, vlan=rng.choice([None] * 4 + [100])))
    return out


def scenario_frames(program: Path, entries: Path, traffic_toml: Path, seed: int, per_flow: int) -> list[bytes]:
    """Generated traffic of a program scenario (synapse_vmt.p4.gentraffic): a frame per flow, then
    ``per_flow`` - 1 more packets of random flows with the outer IP id varying."""
    import tomllib

    from synapse_vmt.p4 import gentraffic
    from synapse_vmt.p4.bmv2 import read_program
    from synapse_vmt.p4.entries import load_entries

    doc = tomllib.loads(traffic_toml.read_text())
    spec = gentraffic.parse_spec(doc["traffic"], f"{traffic_toml}: [traffic]")
    frames, _ = gentraffic.class_frames(spec, read_program(str(program)), load_entries(str(entries), str(program)), seed)
    rng = random.Random(seed)
    out = list(frames)
    for _ in range(len(frames) * (per_flow - 1)):
        e = dpkt.ethernet.Ethernet(rng.choice(frames))
        if isinstance(e.data, dpkt.ip.IP):
            e.data.id = rng.randrange(65536)
            e.data.sum = 0
        out.append(bytes(e))
    return out


def switch_edge() -> list[bytes]:
    """Frames the switch program's parser gives a queue priority (3 or 5: control protocols), and tagged
    and IPv6 ones."""
    out = [eth(0x0806, arp(1, "10.0.0.1", "10.0.0.2")), eth(0x88CC, b"\x02\x07\x04" + b"\x00" * 40),
           eth(0x8809, b"\x01\x01" + b"\x00" * 40), eth(0x88CC, b"\x02\x07\x04" + b"\x00" * 40, vlan=10)]
    for proto in (2, 88, 89, 103, 112):
        out.append(eth(0x0800, ipv4("10.0.0.1", "224.0.0.5", proto, l4(proto, 0, 0))))
    for proto, dport in ((6, 179), (6, 639), (17, 67), (17, 68), (17, 546), (17, 547), (17, 520), (17, 521), (17, 1985)):
        out.append(eth(0x0800, ipv4("10.0.0.1", "10.0.0.2", proto, l4(proto, 40000, dport))))
    for nh in (88, 89, 6, 17):
        out.append(eth(0x86DD, ipv6("2001:db8::1", "2001:db8::2", nh, l4(nh, 1000, 80) if nh in (6, 17) else b"\x00" * 8)))
    out.append(eth(0x0800, ipv4("10.0.0.1", "10.0.0.2", 6, l4(6, 1000, 80)), vlan=10))
    return out


def heavyhitter(seed: int) -> list[bytes]:
    """Flows for heavyhitter.json: 4 heavy flows (40 packets each) among 40 light ones (1-3 packets),
    interleaved; a few IPv6 and ARP frames (not counted) and a TCP flow to the monitor's own range."""
    rng = random.Random(seed)
    flows = []
    for i in range(4):
        flows += [("10.0.0.%d" % (i + 1), "10.1.0.%d" % (i + 1), 6, 1000 + i, 80)] * 40
    for i in range(40):
        flows += [("10.2.%d.%d" % (i // 10, i % 10 + 1), "10.3.0.%d" % (i + 1), rng.choice((6, 17)), 2000 + i, 53)] * rng.randrange(1, 4)
    rng.shuffle(flows)
    out = []
    for n, (s, d, p, sp, dp) in enumerate(flows):
        out.append(eth(0x0800, ipv4(s, d, p, l4(p, sp, dp, b"x" * rng.randrange(0, 200), seq=n), ident=n + 1)))
        if n % 37 == 0:
            out.append(eth(0x86DD, ipv6("2001:db8::1", "2001:db8::2", 17, l4(17, 1, 2))))
        if n % 53 == 0:
            out.append(eth(0x0806, arp(1, "10.0.0.1", "10.0.0.2")))
    return out


def write(path: Path, frames: list[bytes]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(tmp, "wb") as f:
        w = dpkt.pcap.Writer(f)
        for i, fr in enumerate(frames):
            w.writepkt(fr, ts=1.0 + i * 1e-6)
    tmp.rename(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name", choices=["route3-edge", "route3-edge-large", "upf-large", "switch", "heavyhitter"])
    ap.add_argument("-o", "--output", type=Path, required=True)
    ap.add_argument("--packets", type=int, default=20000, help="route3-edge-large: frames")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--per-flow", type=int, help="upf-large, switch: packets per flow (default 3 and 1)")
    a = ap.parse_args(argv)
    if a.name == "route3-edge":
        frames = route3_edge()
    elif a.name == "route3-edge-large":
        frames = route3_large(a.packets, a.seed)
    elif a.name == "upf-large":
        from synapse_vmt.p4.simrun import resolve_program

        frames = scenario_frames(Path(resolve_program("builtin:up4")), ROOT / "examples" / "upf" / "entries.txt",
                                 ROOT / "examples" / "upf" / "scenario.toml", a.seed, per_flow=a.per_flow or 3)
    elif a.name == "switch":
        prog = SHARED / "switch-p416.json"
        if not prog.exists():
            print(f"p4_captures: {prog}: not found (the switch program is in ../shared only)", file=sys.stderr)
            return 2
        frames = scenario_frames(prog, ROOT / "tests" / "data" / "p4" / "switch-entries.txt", ROOT / "examples" / "switch" / "traffic.toml",
                                 a.seed, per_flow=a.per_flow or 1) + switch_edge()
    else:
        frames = heavyhitter(a.seed)
    write(a.output, frames)
    print(f"wrote {len(frames)} frames to {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

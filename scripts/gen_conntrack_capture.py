"""A deterministic connection-tracking capture for ``examples/conntrack``
(``docs/p4-stateful.md``): connections open at a Poisson rate, each sends a
heavy-tailed number of packets with exponential gaps (now and then a pause
longer than its flow-table entry's expire time, so the entry ages out and is
learned again), and the packets of all open connections are merged in time
order and written with their timestamps (replay them with ``timestamps =
true`` so the entries age on the capture's clock).

    python scripts/gen_conntrack_capture.py -n 200000 -o examples/conntrack/conntrack.pcap
    python scripts/gen_conntrack_capture.py -n 10000000 --conns-per-s 200000 -o /tmp/ct10m.pcap.gz
    python scripts/gen_conntrack_capture.py -n 1000000 --single -o /tmp/ct-new.pcap   # every packet a new flow

Destinations are drawn from the example's routes (``entries.txt``), so
packets pass the routing tables; TCP connections take expire time profile 1
(120 ms), others profile 0 (30 ms). Every frame differs (IP id, TTL, TCP
sequence). The file is written as it is generated (bounded memory), gzip'd
if the name ends in .gz.
"""

from __future__ import annotations

import argparse
import gzip
import heapq
import ipaddress
import struct
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ENTRIES = ROOT / "examples" / "conntrack" / "entries.txt"
DPORTS = [80, 443, 53, 22, 123, 8080, 25, 3306]


def prefixes(path: Path) -> list[tuple[int, int]]:
    out = []
    for line in path.read_text().splitlines():
        t = line.split()
        if len(t) > 3 and t[0] == "table_add" and t[1].endswith("ipv4_lpm"):
            n = ipaddress.ip_network(t[3], strict=False)
            out.append((int(n.network_address), n.prefixlen))
    return out


def csum(b: bytes) -> int:
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(src: int, dst: int, proto: int, sport: int, dport: int, ipid: int, ttl: int, seq: int) -> bytes:
    if proto == 6:
        l4 = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x10, 65535, 0, 0)
    else:
        l4 = struct.pack("!HHHH", sport, dport, 8 + 18, 0) + bytes(18)
    ip = struct.pack("!BBHHHBBHII", 0x45, 0, 20 + len(l4), ipid, 0, ttl, proto, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    eth = bytes.fromhex("020000000001" "020000000002" "0800")
    return eth + ip + l4


def generate(path: str, n: int, conns_per_s: float, seed: int, single: bool = False) -> None:
    rng = np.random.default_rng(seed)
    pre = prefixes(ENTRIES)
    opener = gzip.open if path.endswith(".gz") else open
    heap: list[tuple[float, int, list]] = []  # (time s, tiebreak, connection state)
    t_open, k, written = 0.0, 0, 0
    tmp = Path(path + ".tmp")
    with opener(tmp, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        while written < n:
            # open connections until the next one would start after the earliest packet due
            while not heap or t_open <= heap[0][0]:
                net, plen = pre[int(rng.integers(len(pre)))]
                dst = net | int(rng.integers(1 << (32 - plen))) if plen < 32 else net
                src = (192 << 24) | (168 << 16) | int(rng.integers(1 << 16))
                proto = 6 if rng.random() < 0.6 else 17
                size = 1 if single else int(min(1 + rng.pareto(1.2) * 4, 2000))
                conn = [src, dst, proto, int(rng.integers(1024, 65536)), DPORTS[int(rng.integers(len(DPORTS)))],
                        size, int(rng.integers(1 << 32))]
                heapq.heappush(heap, (t_open, k, conn))
                k += 1
                t_open += rng.exponential(1 / conns_per_s)
            t, _, c = heapq.heappop(heap)
            src, dst, proto, sport, dport, left, seq = c
            fr = frame(src, dst, proto, sport, dport, written & 0xFFFF, 32 + int(rng.integers(32)), seq)
            us = int(round(t * 1e6))
            f.write(struct.pack("<IIII", us // 1_000_000, us % 1_000_000, len(fr), len(fr)) + fr)
            written += 1
            c[5], c[6] = left - 1, (seq + 1000) & 0xFFFFFFFF
            if c[5] > 0:
                # mostly a few ms apart; now and then a pause beyond the 120 ms expire time
                gap = rng.exponential(0.003) if rng.random() > 0.02 else rng.uniform(0.15, 0.4)
                heapq.heappush(heap, (t + gap, k, c))
                k += 1
    tmp.rename(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=200_000, help="packets")
    ap.add_argument("--conns-per-s", type=float, default=20_000.0, help="connections opened per second")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--single", action="store_true",
                    help="one packet per connection: every packet is a new flow (the data-plane write benchmark)")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    generate(a.out, a.n, a.conns_per_s, a.seed, a.single)


if __name__ == "__main__":
    main()

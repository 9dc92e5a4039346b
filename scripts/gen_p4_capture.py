"""A deterministic capture for measuring ``synapse run --p4`` on large inputs
(``docs/program-layer-streaming.md``): every frame differs, as in a real
trace (IP id, TTL and TCP sequence vary per packet), over a fixed set of
flows whose frames hit the program's entries.

    python scripts/gen_p4_capture.py router -n 1000000 -o /tmp/r1m.pcap
    python scripts/gen_p4_capture.py upf -n 10000000 -o /tmp/u10m.pcap.gz

``router``: tests/data/p4/router.json with its entries (UDP and TCP flows to
10.0.0.0/8, some elsewhere); ``upf``: builtin:up4 with examples/upf/entries.txt
and the flows of examples/upf/scenario.toml. Flows are drawn per packet from
a seeded generator; the file is written as it is generated (bounded memory),
gzip'd if the name ends in .gz. Large captures are generated, never committed.
"""

from __future__ import annotations

import argparse
import gzip
import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def flow_frames(which: str, flows: int, seed: int) -> list[bytes]:
    from synapse_vmt.p4 import gentraffic, simrun
    from synapse_vmt.p4.bmv2 import read_program
    from synapse_vmt.p4.entries import load_entries

    if which == "upf":
        kw = simrun.load_scenario(str(ROOT / "examples" / "upf" / "scenario.toml"))
        prog, ent, spec = kw["program"], kw["entries_file"], kw["traffic"]
    else:
        prog = str(ROOT / "tests" / "data" / "p4" / "router.json")
        ent = str(ROOT / "tests" / "data" / "p4" / "router-entries.txt")
        spec = gentraffic.parse_spec({"flows": flows, "classes": [
            {"name": "udp", "share": 0.6, "frame": "ipv4-udp", "fields": {
                "ipv4.dst": {"range": ["10.0.0.0", "10.255.255.255"]}, "l4.sport": {"range": [0, 2047]},
                "l4.dport": {"range": [1, 100]}}},
            {"name": "tcp", "share": 0.3, "frame": "ipv4-tcp", "fields": {
                "ipv4.dst": {"range": ["10.0.0.0", "10.3.255.255"]}, "l4.dport": {"range": [1, 1024]}}},
            {"name": "other", "share": 0.1, "frame": "ipv4-udp", "fields": {
                "ipv4.dst": {"range": ["11.0.0.0", "12.0.0.0"]}}},
        ]}, "router traffic")
    spec.flows = flows
    frames, _ = gentraffic.class_frames(spec, read_program(prog), load_entries(ent, prog), seed)
    return frames


def write(path: str, frames: list[bytes], n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        done = 0
        while done < n:
            m = min(65536, n - done)
            pick = rng.integers(0, len(frames), m)
            out = bytearray()
            for j, fi in enumerate(pick.tolist()):
                i = done + j
                b = bytearray(frames[fi])
                b[18:20] = struct.pack(">H", i & 0xFFFF)  # IP id
                b[22] = 32 + i % 200  # TTL
                if b[23] == 6 and len(b) >= 42:
                    b[38:42] = struct.pack(">I", (i * 1460) & 0xFFFFFFFF)  # TCP sequence
                out += struct.pack("<IIII", 1_700_000_000 + i // 1_000_000, i % 1_000_000, len(b), len(b))
                out += b
            f.write(out)
            done += m


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("program", choices=["router", "upf"])
    ap.add_argument("-n", "--packets", type=int, default=1_000_000)
    ap.add_argument("--flows", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args(argv)
    write(a.output, flow_frames(a.program, a.flows, a.seed), a.packets, a.seed)
    print(f"{a.output}: {a.packets} packets over {a.flows} flows", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Random frames built from a program's own parser, for differential tests.

:func:`parser_frames` walks the compiled parser (the description of
:mod:`synapse_vmt.p4.compile`) over random bytes: at each state it
extracts where the parser would, picks one of the state's transitions at
random (or its default) and writes the transition's value into the select
key's bits (header fields, lookahead bits, a stack's last element), so
the frame follows a valid header chain whose other fields are random.
Then it cuts the frame after the chain plus a random payload. Frames that
the walk cannot steer (a key on a metadata field, a `verify` failing) take
whatever path the bytes give, which tests the reject paths too.
"""

from __future__ import annotations

import random


def _layout(d: dict) -> tuple[dict[int, tuple[int, int, int]], dict[int, int]]:
    """slot -> (header, bit offset in the header, width); header -> bytes."""
    where: dict[int, tuple[int, int, int]] = {}
    size: dict[int, int] = {}
    for hi, h in enumerate(d["headers"]):
        bit = 0
        for s in h["fields"]:
            w = d["fields"][s][1]
            where[s] = (hi, bit, w)
            bit += w
        size[hi] = (bit + 7) // 8
    return where, size


def parser_frames(d: dict, rng: random.Random, n: int, max_len: int = 256) -> list[bytes]:
    where, size = _layout(d)
    states = d["parser"]["states"]
    out = []
    for _ in range(n):
        buf = bytearray(rng.getrandbits(8) for _ in range(max_len))
        pos, st, steps = 0, d["parser"]["init"], 0
        at: dict[int, int] = {}  # header -> byte offset of its last extraction
        nxt = {i: 0 for i in range(len(d["stacks"]))}
        while 0 <= st and steps < 40:
            steps += 1
            s = states[st]
            if s.get("reject") is not None:
                break
            stop = False
            for op in s["ops"]:
                h = None
                if op[0] == "extract":
                    h = op[1]
                elif op[0] == "extract_stack":
                    hs = d["stacks"][op[1]]["headers"]
                    if nxt[op[1]] >= len(hs):
                        stop = True
                        break
                    h = hs[nxt[op[1]]]
                    nxt[op[1]] += 1
                elif op[0] in ("extract_vl", "advance"):
                    stop = True  # lengths computed from the packet: not steered
                    break
                if h is not None:
                    at[h] = pos
                    pos += size[h]
            if stop or pos > max_len - 16:
                break
            trans = s["transitions"]
            choice = rng.randrange(len(trans) + 1)
            if choice == len(trans):  # the default
                st = s["default"] if s["default"] is not None else -1
                continue
            value, mask, st = int(trans[choice][0], 16), int(trans[choice][1], 16), trans[choice][2]
            total = sum((p[-1] + 7) // 8 * 8 for p in s["key"])
            off = 0
            for p in s["key"]:
                w = p[-1]
                pw = (w + 7) // 8 * 8
                sh = total - off - pw
                off += pw
                v, m = (value >> sh) & ((1 << w) - 1), (mask >> sh) & ((1 << w) - 1)
                if p[0] == "f":
                    h, b, _ = where.get(p[1], (None, 0, 0))
                    if h is None or h not in at or d["headers"][h]["metadata"]:
                        continue
                    bit = at[h] * 8 + b
                elif p[0] == "la":
                    bit = pos * 8 + p[1]
                else:  # a stack's last extracted element
                    hs = d["stacks"][p[1]]["headers"]
                    k = nxt[p[1]]
                    h = hs[k - 1] if k else hs[-1]
                    if h not in at:
                        continue
                    bit = at[h] * 8 + where[d["headers"][h]["fields"][p[2]]][1]
                if bit + w > len(buf) * 8:
                    continue
                cur = int.from_bytes(buf, "big") >> (len(buf) * 8 - bit - w) & ((1 << w) - 1)
                new = (cur & ~m) | (v & m)
                whole = int.from_bytes(buf, "big")
                sh2 = len(buf) * 8 - bit - w
                whole = (whole & ~(((1 << w) - 1) << sh2)) | (new << sh2)
                buf[:] = whole.to_bytes(len(buf), "big")
        out.append(bytes(buf[: min(len(buf), pos + rng.randrange(0, 40))]))
    return out


def truncations(frames: list[bytes], rng: random.Random, n: int) -> list[bytes]:
    """``n`` frames cut short at a random byte (headers cut in the middle)."""
    return [f[: rng.randrange(len(f) + 1)] for f in (rng.choice(frames) for _ in range(n))] if frames else []


def mutants(frames: list[bytes], rng: random.Random, n: int) -> list[bytes]:
    """``n`` frames with a few random bytes changed."""
    out = []
    for _ in range(n):
        b = bytearray(rng.choice(frames))
        for _ in range(rng.randrange(1, 5)):
            if b:
                b[rng.randrange(len(b))] = rng.randrange(256)
        out.append(bytes(b))
    return out

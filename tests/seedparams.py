"""An independent reader of ClassBench seed files, used by the tests to
compute the distributions a generated set should show."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

PPC = ["wc_wc", "wc_hi", "hi_wc", "hi_hi", "wc_lo", "lo_wc", "hi_lo", "lo_hi", "lo_lo", "wc_ar", "ar_wc",
       "hi_ar", "ar_hi", "wc_em", "em_wc", "hi_em", "em_hi", "lo_ar", "ar_lo", "lo_em", "em_lo", "ar_ar",
       "ar_em", "em_ar", "em_em"]


def sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    cur = None
    for line in text.splitlines():
        t = line.strip()
        if t.startswith("-") and len(t) > 1 and t[1].isalpha():
            cur = t[1:]
            out[cur] = []
        elif t == "#":
            cur = None
        elif cur is not None and t:
            out[cur].append(t)
    return out


def expected(path: Path) -> dict[str, dict]:
    """Shares the seed implies: protocol, sport/dport class, port-pair class,
    source and destination prefix-length marginals."""
    s = sections(path.read_text())
    prots = [line.split() for line in s["prots"]]
    total_p = sum(float(p[1]) for p in prots)
    proto: dict[str, float] = {}
    ppc: dict[str, float] = defaultdict(float)
    for p in prots:
        name = "*" if p[0] == "0" else p[0]
        w = float(p[1]) / total_p
        proto[name] = proto.get(name, 0) + w
        cls = [float(x) for x in p[2:]]
        tot = sum(cls)
        for k, x in enumerate(cls):
            if x > 0:
                ppc[PPC[k]] += w * x / tot
    sport: dict[str, float] = defaultdict(float)
    dport: dict[str, float] = defaultdict(float)
    src = [0.0] * 33
    dst = [0.0] * 33
    for name, w in ppc.items():
        a, b = name.split("_")
        sport[a] += w
        dport[b] += w
        rows = [line.split() for line in s[name]]
        tsum = sum(float(r[0].split(",")[1]) for r in rows)
        for r in rows:
            total, tp = r[0].split(",")
            srcs = [(int(x.split(",")[0]), float(x.split(",")[1])) for x in r[1:]]
            ssum = sum(p for _, p in srcs)
            for sl, sp in srcs:
                q = w * float(tp) / tsum * sp / ssum
                src[sl] += q
                dst[int(total) - sl] += q
    return {"protocols": proto, "sport": dict(sport), "dport": dict(dport), "ppc": dict(ppc), "src_len": src,
            "dst_len": dst}

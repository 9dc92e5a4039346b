#!/usr/bin/env python3
"""Classifiers on the P4 programs' wide ACL tables: lookups/s and bytes per
rule of ptree, dtree and the linear oracle on entries of realistic size.

For each table, ``synapse p4 entries gen``'s generator (``p4.entrygen``)
draws COUNT entries (the table's ``max_size`` lifted, so 10K and 100K fit),
in match order; the keys are drawn inside random entries (a point in every
word's range) and, one in ten, anywhere. Every structure's answer to every
key is checked against the linear oracle's (on a 100K set, where the oracle
is slow, against the oracle on the first ``--check`` keys and the decision
tree's on all); the rate is batch passes over the keys in Rust
(``Classifier.time_keys``), medians of ROUNDS rounds interleaved across the
structures. The linear scan is timed only up to ``--linear-max`` rules.

    python scripts/bench_wide.py                      # UPF acls, switch ACLs; 1K, 10K, 100K
    python scripts/bench_wide.py --counts 1000 --rounds 1 --json

Needs ``../shared/data/p4`` (the P4 programs) beside the checkout
(``SYNAPSE_SHARED`` names another shared directory). Not part
of CI: it takes minutes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from synapse_vmt import _core
from synapse_vmt.p4 import bmv2, entrygen
from synapse_vmt.p4.keys import KeyLayout

DATA = Path(os.environ.get("SYNAPSE_SHARED", Path(__file__).resolve().parent.parent.parent / "shared")) / "data" / "p4"
# (program, table): UPF's ACL (233 bits, 12 words) and the switch program's
# ingress and egress IPv6 ACLs (328 and 312 bits, 15 and 13 words).
TABLES = [
    ("up4-bmv2.json", "PreQosPipe.Acl.acls"),
    ("switch-p416.json", "ipv6_acl"),
    ("switch-p416.json", "egress_ipv6_acl"),
]


def keys_inside(lo: np.ndarray, hi: np.ndarray, mask: np.ndarray, bits: list[int], n: int, seed: int) -> np.ndarray:
    """``n`` keys: nine in ten a point inside a random entry (each word in
    its range, or its masked value with the free bits random), else random."""
    rng = np.random.default_rng(seed)
    rows, words = lo.shape
    wmask = np.array([(1 << b) - 1 for b in bits], dtype=np.uint64)
    rnd = rng.integers(0, 1 << 32, size=(n, words), dtype=np.uint64) & wmask
    if rows == 0:
        return rnd.astype(np.uint32)
    idx = rng.integers(0, rows, size=n)
    l, h, m = lo[idx].astype(np.uint64), hi[idx].astype(np.uint64), mask[idx].astype(np.uint64)
    ranged = l != h
    inside = np.where(ranged, l + rnd % np.maximum(h - l + 1, 1), (l & m) | (rnd & ~m & wmask))
    anywhere = rng.random(n) < 0.1
    return np.where(anywhere[:, None], rnd, inside).astype(np.uint32)


def rate(clf, keys: np.ndarray, secs: float) -> float:
    """Lookups per second of batch passes over ``keys`` for about ``secs``."""
    passes = 1
    while True:
        t = clf.time_keys(keys, passes)
        if t >= secs / 4 or passes >= 1 << 20:
            break
        passes *= 2
    passes = max(1, int(passes * secs / max(t, 1e-9)))
    return passes * len(keys) / clf.time_keys(keys, passes)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--counts", default="1000,10000,100000")
    ap.add_argument("--algos", default="ptree,dtree,linear")
    ap.add_argument("--tables", default=",".join(t for _, t in TABLES), help="tables (program order above)")
    ap.add_argument("--keys", type=int, default=50_000, help="keys per set")
    ap.add_argument("--check", type=int, default=5_000, help="keys checked against the oracle on sets over --linear-max")
    ap.add_argument("--linear-max", type=int, default=10_000, help="largest set the linear scan is timed on")
    ap.add_argument("--secs", type=float, default=0.5, help="seconds per timing")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=str(DATA), help="directory of the P4 programs")
    ap.add_argument("--json", action="store_true", help="one JSON object per line")
    a = ap.parse_args()
    want = a.tables.split(",")
    algos = a.algos.split(",")
    progs: dict[str, bmv2.P4Program] = {}
    rows = []
    for prog, tname in TABLES:
        if tname not in want:
            continue
        path = Path(a.data) / prog
        if not path.exists():
            print(f"bench_wide: {path}: not found (the P4 programs of ../shared/data)", file=sys.stderr)
            return 2
        p = progs.setdefault(prog, bmv2.read_program(path))
        spec = p.table(tname)
        layout = KeyLayout.from_table(spec.info)
        bits = layout.word_bits()
        # The table's max_size lifted: entries of the sizes asked for.
        spec = dataclasses.replace(spec, info=dataclasses.replace(spec.info, max_size=0))
        for count in (int(c) for c in a.counts.split(",")):
            t0 = time.perf_counter()
            entries = entrygen.gen_table(spec, count, a.seed)
            lo, hi, mask = layout.rule_arrays(entries)
            rs = layout.rule_set(lo, hi, mask)
            keys = keys_inside(lo, hi, mask, bits, a.keys, a.seed)
            gen_s = time.perf_counter() - t0
            n = len(entries)
            small = n <= a.linear_max
            lin = _core.Classifier(rs, "linear")
            check = keys if small else keys[: a.check]
            want_ans = lin.classify_keys(check)
            built = {}
            for algo in algos:
                if algo == "linear" and not small:
                    continue
                try:
                    clf = lin if algo == "linear" else _core.Classifier(rs, algo)
                except ValueError as e:  # over its memory budget: a row that says so
                    rows.append({"program": prog, "table": tname, "rules": n, "algo": algo, "error": str(e), "wrong": 0})
                    print(json.dumps(rows[-1]) if a.json else f"{tname} {n:>6} {algo:>6}: {e}", flush=True)
                    continue
                got = clf.classify_keys(keys)
                wrong = int((got[: len(check)] != want_ans).sum())
                built[algo] = (clf, got, wrong)
            if not small and "dtree" in built:
                # Past the oracle's reach: every answer against the decision tree's.
                ref = built["dtree"][1]
                for algo, (clf, got, wrong) in built.items():
                    built[algo] = (clf, got, wrong + int((got != ref).sum()))
            rates: dict[str, list[float]] = {algo: [] for algo in built}
            for _ in range(a.rounds):
                for algo, (clf, _, _) in built.items():
                    rates[algo].append(rate(clf, keys, a.secs))
            for algo, (clf, _, wrong) in built.items():
                rec = {
                    "program": prog, "table": tname, "key_bits": sum(f.width for f in layout.fields),
                    "words": layout.n_words, "rules": n, "algo": algo,
                    "lookups_per_s": statistics.median(rates[algo]), "rounds": a.rounds,
                    "bytes_per_rule": clf.memory_bytes() / max(n, 1), "build_s": clf.build_s,
                    "keys": len(keys), "checked_oracle": len(check), "wrong": wrong, "gen_s": gen_s,
                }
                rows.append(rec)
                if a.json:
                    print(json.dumps(rec), flush=True)
                else:
                    print(f"{tname} ({rec['key_bits']} bits, {rec['words']} words) {n:>6} {algo:>6}: "
                          f"{rec['lookups_per_s'] / 1e6:7.2f} M lookups/s, {rec['bytes_per_rule']:8.1f} B/rule, "
                          f"build {rec['build_s'] * 1e3:8.1f} ms, wrong {wrong}", flush=True)
    return 1 if any(r["wrong"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

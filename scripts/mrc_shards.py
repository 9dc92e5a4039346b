"""The closed loop's online miss-ratio curves against the exact engine's
per-table sweep (``reproduce upf --quick``'s static oracle: every table at
k PMUs, ids as ``placement.initial`` deals them), per table and k, over the
whole run: the curve as the loop read it without re-sharding (each count
over the table's even-split ids first, then the lowest others) and
re-sharded over the sweep's own ids (``OnlineMrc.follow``'s
``TableMrc::set_pmus``). Both sampled as the loop samples (SHARDS, 4,096
keys a table).

    python scripts/mrc_shards.py [--seeds 1] [--pmus 1-4] [-o DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from synapse_vmt import _core
from synapse_vmt.figures.upf import BLOCK, setup
from synapse_vmt.opt import oracle, placement
from synapse_vmt.opt.mrcfeed import DEFAULT_SIZE
from synapse_vmt.p4 import simrun


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--pmus", default="1-4")
    ap.add_argument("-o", "--out", default="/tmp/mrc-shards")
    a = ap.parse_args()
    def span(t: str) -> list[int]:  # "A-B" or "A", as upf_seeds.py reads --seeds
        lo, _, hi = t.partition("-")
        return list(range(int(lo), int(hi or lo) + 1))

    ks = span(a.pmus)
    print("| seed | table | PMUs | exact miss ratio | curve, unsharded | curve, sharded | error unsharded | error sharded |")
    print("|---|---|---|---|---|---|---|---|")
    errs = {"before": [], "after": []}
    for seed in span(a.seeds):
        pl, _, _, _, pr = setup(Path(a.out) / f"seed{seed}", True, seed)
        names, N, T = pr.routes.tables, pl["pmus"], len(pr.routes.tables)
        t, r = pr.feeder_factory()(int(pl["duration"] * 1000) + 1)
        t, r = np.ascontiguousarray(t, dtype=np.uint64), np.ascontiguousarray(r, dtype=np.uint32)
        even = simrun.build_sim(pr, simrun.even_split(names, N), N, window_ns=10_000.0, seed=seed)
        curves = {}
        for what in ("before", "after"):
            m = _core.mrc_routed(even.core, list(range(1, max(ks) + 1)), [BLOCK], "size", float(DEFAULT_SIZE), True)
            if what == "after":
                for k in ks:
                    alloc = placement.initial(max(N, k * T), 4, {n: k for n in names})
                    for n in names:
                        m.set_pmus(n, k, alloc[n], 0.0)
            _core.mrc_push(m, even.core, t, r)
            rows = m.rows()
            curves[what] = {(str(n), int(p)): 1.0 - h for n, p, h in zip(rows["table"], rows["pmus"], rows["hit_rate"])}
        for k in ks:
            pool = max(N, k * T)
            alloc = placement.initial(pool, 4, {n: k for n in names})
            sim = simrun.build_sim(pr, alloc, pool, window_ns=10_000.0, seed=seed)
            run = oracle.run_static(sim, T, pl["period"], pl["duration"], np.full(T, k))
            look, miss = run.lookups.sum(axis=0), run.misses.sum(axis=0)
            for j, n in enumerate(names):
                if look[j] < 1000:
                    continue
                ex = miss[j] / look[j]
                b, f = curves["before"][(n, k)], curves["after"][(n, k)]
                errs["before"].append(b - ex)
                errs["after"].append(f - ex)
                print(f"| {seed} | {n.split('.')[-1]} | {k} | {ex:.3f} | {b:.3f} | {f:.3f} | {b - ex:+.3f} | {f - ex:+.3f} |", flush=True)
    for what, e in errs.items():
        e = np.abs(e)
        print(f"{what}: mean |error| {e.mean():.4f}, max {e.max():.4f} over {len(e)} points")


if __name__ == "__main__":
    main()

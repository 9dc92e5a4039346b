"""Run ``synapse reproduce upf --quick`` over several seeds (two at a time:
the machine it was written on has two cores) and print the done_when table.

    python scripts/upf_seeds.py [--seeds 1-5] [--full] [--jobs 2] [-o DIR] [-- EXTRA reproduce upf ARGS]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="1-5")
    ap.add_argument("--full", action="store_true", help="without --quick")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("-o", "--out", default="/tmp/upf-seeds")
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    lo, _, hi = a.seeds.partition("-")
    seeds = list(range(int(lo), int(hi or lo) + 1))
    out = Path(a.out)
    todo, running, t0 = list(seeds), {}, time.time()
    while todo or running:
        while todo and len(running) < a.jobs:
            s = todo.pop(0)
            d = out / f"seed{s}"
            cmd = ["synapse", "reproduce", "upf", *([] if a.full else ["--quick"]), "--seed", str(s), "-o", str(d), *a.extra]
            d.mkdir(parents=True, exist_ok=True)
            running[s] = subprocess.Popen(cmd, stdout=open(d / "log.txt", "w"), stderr=subprocess.STDOUT)
        time.sleep(0.5)
        for s, p in list(running.items()):
            if p.poll() is not None:
                del running[s]
                if p.returncode:
                    print(f"seed {s}: exit {p.returncode}, see {out / f'seed{s}' / 'log.txt'}", file=sys.stderr)
    print(f"| seed | throughput | PMU-time | latency cl / static / even (ns) | drops cl / static / even | targets | issue 25's |")
    print("|---|---|---|---|---|---|---|")
    ok_all = ok_25 = 0
    for s in seeds:
        f = out / f"seed{s}" / "summary.json"
        if not f.exists():
            print(f"| {s} | - | - | - | - | failed |")
            continue
        m = json.loads(f.read_text())
        cl, sc, dw = m["closed_loop"], m["schemes"], m["done_when"]
        bad = [k for k, v in dw.items() if not v]
        ok_all += not bad
        # issue 25's: throughput >= 0.98x the static oracle's, mean latency <= 1.5x its, less PMU-time
        lat = sc["closed_loop"]["mean_latency_ns"] / sc["static"]["mean_latency_ns"]
        miss = [what for what, ok in (("throughput", cl["throughput_ratio_vs_static"] >= 0.98), ("latency", lat <= 1.5),
                                     ("PMU-time", cl["pmu_time_ratio_vs_static"] < 1.0)) if not ok]
        ok_25 += not miss
        print(f"| {s} | {cl['throughput_ratio_vs_static']:.3f}x | {cl['pmu_time_ratio_vs_static']:.3f}x | "
              f"{sc['closed_loop']['mean_latency_ns']:.0f} / {sc['static']['mean_latency_ns']:.0f} / "
              f"{sc['even_split']['mean_latency_ns']:.0f} | {sc['closed_loop']['drops']} / {sc['static']['drops']} / "
              f"{sc['even_split']['drops']} | {'all three' if not bad else 'NOT ' + ', '.join(bad)} | "
              f"{'all three' if not miss else 'NOT ' + ', '.join(miss)} |")
    print(f"{ok_all}/{len(seeds)} seeds meet all three targets, {ok_25}/{len(seeds)} issue 25's ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()

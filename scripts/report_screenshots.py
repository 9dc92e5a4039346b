#!/usr/bin/env python3
"""Rebuild the report screenshots of docs/report.md (docs/img/report-*.png).

Runs each kind of command whose report the docs show, opens its
report.html in headless Chromium (Debian's ``chromium``) and keeps the top
of the page, scaled and reduced to 256 colours (small PNGs). Needs ../shared
for the switch program. Usage (from the repository root, a few minutes)::

    python scripts/report_screenshots.py [--work results/report-shots]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWITCH = ROOT.parent / "shared" / "data" / "p4" / "switch-p416.json"


def sh(*args: str) -> None:
    print("+", " ".join(args), flush=True)
    subprocess.run(args, check=True, cwd=ROOT)


def shot(url: str, png: Path, height: int, crop: tuple[int, int] | None = None, width: int = 1500, scale: float = 0.8,
         budget_ms: int = 30000) -> None:
    """A screenshot of ``url``, rows ``crop`` kept, scaled by ``scale``, 256 colours."""
    from PIL import Image

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    raw = png.with_suffix(".raw.png")
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={width},{height}",
                    f"--virtual-time-budget={budget_ms}", f"--screenshot={raw}", url], check=True, capture_output=True)
    im = Image.open(raw).convert("RGB")
    if crop:
        im = im.crop((0, crop[0], width, crop[1]))
    im = im.resize((int(im.width * scale), int(im.height * scale)), Image.LANCZOS)
    im.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(png, optimize=True)
    raw.unlink()
    print(f"wrote {png} ({png.stat().st_size // 1024} KiB)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default="results/report-shots", help="where the runs go")
    ap.add_argument("--docs", default=str(ROOT / "docs"))
    a = ap.parse_args()
    w, docs = (ROOT / a.work).resolve(), Path(a.docs)
    w.mkdir(parents=True, exist_ok=True)
    syn = [sys.executable, "-m", "synapse_vmt.cli"]
    # a program scenario (UPF, 10 tables)
    sh(*syn, "run", "examples/upf/scenario.toml", "-o", str(w / "upf"), "-q")
    shot((w / "upf" / "report.html").as_uri(), docs / "img" / "report-run.png", 1500, (0, 1000))
    # the switch program: 37 tables visited
    if SWITCH.exists():
        sh(*syn, "p4", "entries", "gen", str(SWITCH), "--count", "64", "-o", str(w / "switch-entries.txt"))
        sh(*syn, "run", "--p4", str(SWITCH), "--entries", str(w / "switch-entries.txt"), "--traffic", "examples/switch/traffic.toml",
           "--pmus", "48", "--duration-ns", "200000", "-o", str(w / "switch"), "-q")
        shot((w / "switch" / "report.html").as_uri(), docs / "img" / "report-switch.png", 1800, (0, 1800), scale=0.7)
        shutil.copy(w / "switch" / "run.png", w / "switch-run.png")
        from PIL import Image

        im = Image.open(w / "switch-run.png").convert("RGB")
        im = im.resize((im.width // 2, im.height // 2), Image.LANCZOS)
        im.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(docs / "img" / "report-switch-run-png.png", optimize=True)
    # the closed loop (reproduce upf): PMU allocation with the controller's decisions
    sh(*syn, "reproduce", "upf", "--quick", "-o", str(w / "rupf"))
    shot((w / "rupf" / "report.html").as_uri(), docs / "img" / "report-closed-loop.png", 1500, (560, 1500))
    # two runs: the UPF program with 10 and 20 PMUs
    for n in (10, 20):
        sh(*syn, "run", "--p4", "builtin:up4", "--entries", "examples/upf/entries.txt", "--traffic", "examples/upf/scenario.toml",
           "--pmus", str(n), "--duration-ns", "2000000", "-o", str(w / f"upf-{n}"), "-q")
    sh(*syn, "report", str(w / "upf-10"), str(w / "upf-20"))
    shot((w / "upf-20" / "compare.html").as_uri(), docs / "img" / "report-compare.png", 1400, (0, 1000))
    # a sweep
    grid = w / "grid.toml"
    grid.write_text('seeds = [1, 2]\n[set]\nduration_ns = 200000\n[grid]\n"pmus.count" = [1, 2, 4, 8]\n"pmus.block_size" = [64, 256]\n')
    sh(*syn, "sweep", str(grid), "-o", str(w / "sweep"), "-q")
    shot((w / "sweep" / "report.html").as_uri(), docs / "img" / "report-sweep.png", 1300, (0, 900))
    # the live view of serve --sim, the optimizer moving PMUs after the shift
    p = subprocess.Popen([*syn, "serve", "--p4", "tests/data/p4/router.json", "--sim", "examples/shift/scenario.toml",
                          "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--sim-speed", "1e6"],
                         cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        port = None
        while port is None:
            line = p.stderr.readline()
            if not line:
                raise SystemExit("serve stopped before its live view started")
            if line.startswith("live view on http://"):
                port = int(line.split()[3].rstrip("/").rsplit(":", 1)[1])
        import urllib.request

        while True:  # past the shift at 8 ms simulated
            m = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
            if float(next(ln.split()[1] for ln in m.splitlines() if ln.startswith("synapse_sim_time_ns"))) > 12e6:
                break
            time.sleep(0.5)
        shot(f"http://127.0.0.1:{port}/", docs / "img" / "report-live.png", 1500, (0, 1400), scale=0.7, budget_ms=3000)
    finally:
        p.terminate()
        p.wait(30)


if __name__ == "__main__":
    main()

"""Resource estimates of the RTL with yosys (``synapse hw synth``).

Each design point (unit, entries, key bits) is synthesized with
``synth_xilinx -family xcup`` (UltraScale+, the U50's family) for LUTs,
flip-flops, BRAM and URAM, and its logic depth is the longest path in
cells (LUTs, MUXF, CARRY) between flip-flops (``ltp -noff`` once the mapped
flip-flops are cut). These are yosys estimates of a
flat netlist, not vendor place-and-route: no timing closure, no packing.
Results are cached by the hash of the RTL file, the parameters and the
yosys version, so a rerun only synthesizes what changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from synapse_vmt.errors import UserError, atomic_write
from synapse_vmt.hw.cosim import RTL_DIR

#: (unit, entries, key bits) -> (top module, parameters).
def design(unit: str, entries: int, key_bits: int) -> tuple[str, dict]:
    if unit == "pmu":
        return "synapse_pmu", dict(N=entries, KEY_W=key_bits, TAU=2, II=1, QR=16, QP=16, QM=16,
                                   FILL_SLOTS=64)
    if unit == "orb":
        return "synapse_orb", dict(N=entries, SLOTS=8, KEY_W=key_bits)
    if unit == "vmu":
        # entries = lookup-table entries (2^BITS); the key is hashed upstream.
        bits = max(1, entries.bit_length() - 1)
        return "synapse_vmu", dict(BITS=bits, FIFO=64)
    raise UserError(f"unknown unit {unit!r} (expected pmu, vmu or orb)")


#: The table the README shows: the PMU at four sizes and two key widths
#: (104-bit 5-tuple, 233-bit UPF ACL), the ORB and the VMU at their defaults.
PMU_SIZES = (64, 128, 256, 512)
KEY_WIDTHS = (104, 233)
#: Sizes synthesized to fit the PMU's growth when the table's sizes are not
#: synthesized themselves (a 64-entry PMU took over 20 minutes of yosys on a
#: loaded 2-core machine; 512 x 233 bits is ~18x the logic).
FIT_SIZES = (8, 16, 32)
DEFAULT_POINTS = [("pmu", n, k) for k in KEY_WIDTHS for n in FIT_SIZES] + [
    ("orb", 64, 104), ("vmu", 1024, 0)]
EXACT_POINTS = [("pmu", n, k) for k in KEY_WIDTHS for n in PMU_SIZES] + [
    ("orb", 64, 104), ("orb", 64, 233), ("vmu", 1024, 0)]


@dataclass
class Row:
    unit: str
    entries: int
    key_bits: int
    luts: int
    ffs: int
    bram: float
    uram: int
    depth: int
    seconds: float
    cached: bool = False
    #: "yosys", or "fit" for a size extrapolated from synthesized ones.
    source: str = "yosys"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "synapse-vmt" / "synth"


def yosys_version() -> str:
    if shutil.which("yosys") is None:
        raise UserError("yosys is not installed (apt-get install yosys)")
    return subprocess.run(["yosys", "-V"], capture_output=True, text=True, check=True).stdout.strip()


#: The synthesis script after ``read_verilog``/``chparam`` (part of the cache key).
#: Hierarchical: a PMU's CAM slot (``synapse_pmu_entry``) is mapped once and
#: counted per instance (``stat -top``), as vendor flows report a design kept
#: hierarchical; flattening the PMU made yosys take over 20 minutes at 64
#: entries. The mapped netlist is flattened only for the depth (``ltp``).
FLOW = """synth_xilinx -top {top} -family xcup
tee -q -o {d}/stat.json stat -json -top {top}
flatten
delete t:FD* t:BUFG* t:IBUF* t:OBUF*
tee -q -o {d}/ltp.txt ltp -noff
"""


def _key(top: str, params: dict) -> str:
    h = hashlib.sha256()
    h.update((RTL_DIR / f"{top}.v").read_bytes())
    h.update(json.dumps(params, sort_keys=True).encode())
    h.update(yosys_version().encode())
    h.update(FLOW.encode())
    return h.hexdigest()[:20]


def parse_stat(stat: dict) -> tuple[int, int, float, int]:
    """LUTs, FFs, BRAM (36 Kb blocks), URAM from ``stat -json`` cells."""
    cells: dict[str, int] = stat["design"]["num_cells_by_type"]
    luts = sum(n for c, n in cells.items() if re.fullmatch(r"LUT[1-6]", c))
    # LUTRAM cells hold state in LUTs: count them as LUTs too.
    luts += sum(n for c, n in cells.items() if re.fullmatch(r"RAM\d+[MSX]\d*.*|SRL\w*", c))
    ffs = sum(n for c, n in cells.items() if re.fullmatch(r"FD[CPRS]E?(_1)?", c))
    bram = sum(n for c, n in cells.items() if c.startswith("RAMB36")) + 0.5 * sum(
        n for c, n in cells.items() if c.startswith("RAMB18"))
    uram = sum(n for c, n in cells.items() if c.startswith("URAM"))
    return luts, ffs, bram, uram


def synth_one(unit: str, entries: int, key_bits: int, use_cache: bool = True) -> Row:
    top, params = design(unit, entries, key_bits)
    key = _key(top, params)
    cached = cache_dir() / f"{key}.json"
    if use_cache and cached.exists():
        return Row(**{**json.loads(cached.read_text()), "cached": True})
    sets = " ".join(f"-set {k} {v}" for k, v in params.items())
    with tempfile.TemporaryDirectory(prefix="synapse-synth-") as d:
        script = Path(d) / "run.ys"
        script.write_text(
            f"read_verilog {RTL_DIR / f'{top}.v'}\n"
            f"chparam {sets} {top}\n"
            + FLOW.format(top=top, d=d))
        t0 = time.perf_counter()
        p = subprocess.run(["yosys", "-q", "-l", f"{d}/log.txt", str(script)], capture_output=True, text=True)
        secs = time.perf_counter() - t0
        if p.returncode != 0:
            log = Path(f"{d}/log.txt")
            tail = log.read_text()[-1500:] if log.exists() else p.stderr[-1500:]
            raise RuntimeError(f"yosys failed on {top} {params}:\n{tail}")
        luts, ffs, bram, uram = parse_stat(json.loads(Path(f"{d}/stat.json").read_text()))
        m = re.search(r"Longest topological path in \S+ \(length=(\d+)\)", Path(f"{d}/ltp.txt").read_text())
        depth = int(m.group(1)) if m else -1
    row = Row(unit, entries, key_bits, luts, ffs, bram, uram, depth, round(secs, 1))
    with atomic_write(cached) as f:
        json.dump(asdict(row), f)
    return row


def cached_row(unit: str, entries: int, key_bits: int) -> Row | None:
    top, params = design(unit, entries, key_bits)
    f = cache_dir() / f"{_key(top, params)}.json"
    return Row(**{**json.loads(f.read_text()), "cached": True}) if f.exists() else None


def fit_pmu(rows: list[Row], sizes=PMU_SIZES) -> list[Row]:
    """PMU rows at ``sizes`` per key width: synthesized ones from the cache,
    the others extrapolated from the synthesized rows (least squares: LUTs and
    FFs linear in entries, as every entry adds its key, pointers and
    comparators; depth linear in log2 entries, the match-reduction tree)."""
    import numpy as np

    out = []
    for k in sorted({r.key_bits for r in rows if r.unit == "pmu"}):
        pts = sorted((r for r in rows if r.unit == "pmu" and r.key_bits == k), key=lambda r: r.entries)
        for n in sizes:
            try:
                real = cached_row("pmu", n, k)
            except UserError:  # no yosys: nothing can be cached either
                real = None
            if real is not None:
                out.append(real)
                continue
            if len(pts) < 2:
                continue
            x = np.array([r.entries for r in pts], float)
            fit = lambda y, xs=x: np.polyval(np.polyfit(xs, np.array(y, float), 1), n)  # noqa: E731
            lg = np.log2(x)
            depth = np.polyval(np.polyfit(lg, [r.depth for r in pts], 1), np.log2(n))
            out.append(Row("pmu", n, k, int(round(fit([r.luts for r in pts]))),
                           int(round(fit([r.ffs for r in pts]))), 0.0, 0, int(round(depth)), 0.0,
                           source="fit"))
    return out


def write_csv(rows: list[Row], path: str | os.PathLike) -> None:
    import csv

    with atomic_write(path) as f:
        w = csv.writer(f)
        w.writerow(["unit", "entries", "key_bits", "luts", "ffs", "bram", "uram", "depth", "seconds", "source"])
        for r in rows:
            w.writerow([r.unit, r.entries, r.key_bits, r.luts, r.ffs, r.bram, r.uram, r.depth, r.seconds,
                        r.source])


def table(rows: list[Row]) -> str:
    head = (f"{'unit':<5} {'entries':>7} {'key':>4} {'LUTs':>8} {'FFs':>8} {'BRAM36':>6} {'URAM':>4} "
            f"{'depth':>5} {'yosys s':>7}  source")
    lines = [head]
    for r in rows:
        src = "linear fit" if r.source == "fit" else "yosys" + (" (cached)" if r.cached else "")
        secs = f"{r.seconds:>7.1f}" if r.source != "fit" else f"{'-':>7}"
        lines.append(f"{r.unit:<5} {r.entries:>7} {r.key_bits:>4} {r.luts:>8} {r.ffs:>8} {r.bram:>6g} "
                     f"{r.uram:>4} {r.depth:>5} {secs}  {src}")
    return "\n".join(lines)

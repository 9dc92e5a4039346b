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


#: The table docs/how-to/rtl.md shows: the PMU at four sizes and two key widths
#: (104-bit 5-tuple, 233-bit UPF ACL), the ORB and the VMU at their defaults.
PMU_SIZES = (64, 128, 256, 512)
KEY_WIDTHS = (104, 233)
DEFAULT_POINTS = [("pmu", n, k) for k in KEY_WIDTHS for n in PMU_SIZES] + [
    ("orb", 64, 104), ("orb", 64, 233), ("vmu", 1024, 0)]
#: Rows synthesized here, shipped with the package (same cache key), so a
#: fresh clone prints the table at once and resynthesizes a point only when
#: its RTL, parameters, flow or yosys version differ.
SHIPPED = Path(__file__).resolve().parent / "synth_results.json"


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
    if use_cache:
        hit = _lookup(key)
        if hit is not None:
            return hit
    sets = " ".join(f"-set {k} {v}" for k, v in params.items())
    with tempfile.TemporaryDirectory(prefix="synapse-synth-") as d:
        script = Path(d) / "run.ys"
        script.write_text(
            f"read_verilog {RTL_DIR / f'{top}.v'}\n"
            f"chparam {sets} {top}\n"
            + FLOW.format(top=top, d=d))
        t0 = time.perf_counter()
        p = subprocess.run(_deterministic() + ["yosys", "-q", "-l", f"{d}/log.txt", str(script)],
                           capture_output=True, text=True)
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


def _deterministic() -> list[str]:
    """yosys iterates some sets in pointer order, so its netlist (and the
    LUT count) can change with the heap's addresses: run it without address
    space randomization where ``setarch -R`` exists."""
    import platform

    if shutil.which("setarch") is None:
        return []
    probe = subprocess.run(["setarch", platform.machine(), "-R", "true"], capture_output=True)
    return ["setarch", platform.machine(), "-R"] if probe.returncode == 0 else []


def _lookup(key: str) -> Row | None:
    f = cache_dir() / f"{key}.json"
    if f.exists():
        return Row(**{**json.loads(f.read_text()), "cached": True})
    shipped = json.loads(SHIPPED.read_text()) if SHIPPED.exists() else {}
    if key in shipped:
        return Row(**{**shipped[key], "cached": True})
    return None


def ship(points: list[tuple[str, int, int]]) -> Path:
    """Adds the cached rows of ``points`` to the shipped results."""
    shipped = json.loads(SHIPPED.read_text()) if SHIPPED.exists() else {}
    for u, n, k in points:
        top, params = design(u, n, k)
        key = _key(top, params)
        row = _lookup(key)
        if row is None:
            raise UserError(f"{u} entries={n} key_bits={k} is not synthesized yet")
        shipped[key] = {kk: v for kk, v in asdict(row).items() if kk != "cached"}
    with atomic_write(SHIPPED) as f:
        json.dump(shipped, f, indent=1, sort_keys=True)
        f.write("\n")
    return SHIPPED


def cached_row(unit: str, entries: int, key_bits: int) -> Row | None:
    top, params = design(unit, entries, key_bits)
    return _lookup(_key(top, params))


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
        src = "yosys" + (" (cached)" if r.cached else "")
        secs = f"{r.seconds:>7.1f}"
        lines.append(f"{r.unit:<5} {r.entries:>7} {r.key_bits:>4} {r.luts:>8} {r.ffs:>8} {r.bram:>6g} "
                     f"{r.uram:>4} {r.depth:>5} {secs}  {src}")
    return "\n".join(lines)

"""The machine the CPU model is fitted on, and the one ``synapse cost`` runs on.

A fingerprint: the CPU's model name, its widest SIMD level, its L2 and L3
sizes (what the cost forms depend on: the exact-match table's two pieces meet
where it outgrows L3) and its clock. The clock is measured, not read: a loop
of dependent additions of known cycle count (``_core.spin_adds``: one cycle
each) timed with the thread's CPU clock; ``/proc/cpuinfo``'s figure is
reported beside it as a check (it is the current frequency of one core at
one moment, and varies with load and boost).

The fitted parameters in ``params.toml`` carry the fingerprint of the machine
they were fitted on; ``synapse cost`` compares it with its own
(:func:`differences`) and warns when they differ.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

from synapse_vmt import _core

SIMD_LEVELS = ("avx512f", "avx2", "avx", "sse4_2", "asimd")


def _cpuinfo() -> tuple[str, set[str], list[float]]:
    """(model name, flags, every core's "cpu MHz") from /proc/cpuinfo."""
    name, flags, mhz = "", set(), []
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown", flags, mhz
    for line in text.splitlines():
        key, _, val = line.partition(":")
        key, val = key.strip(), val.strip()
        if key == "model name" and not name:
            name = val
        elif key in ("flags", "Features") and not flags:
            flags = set(val.split())
        elif key == "cpu MHz":
            try:
                mhz.append(float(val))
            except ValueError:
                pass
    return name or platform.processor() or "unknown", flags, mhz


def simd_level(flags: set[str]) -> str:
    s = next((f for f in SIMD_LEVELS if f in flags), "scalar")
    return {"avx512f": "AVX512", "sse4_2": "SSE4.2", "asimd": "NEON"}.get(s, s.upper())


def cache_bytes(level: int) -> int | None:
    """Size of the data or unified cache of ``level`` seen by CPU 0 (sysfs), or None."""
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for d in sorted(base.glob("index*")):
        try:
            if int((d / "level").read_text()) != level or (d / "type").read_text().strip() == "Instruction":
                continue
            size = (d / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        units = {"K": 1024, "M": 1024**2, "G": 1024**3}
        return int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
    return None


def measure_clock(min_s: float = 0.05, rounds: int = 5) -> float:
    """The clock (Hz) the calling thread runs at: the median over ``rounds``
    of a loop of known cycles, each timed for at least ``min_s`` CPU seconds.
    ValueError where no such loop exists for the architecture."""
    per = int(_core.SPIN_ADDS_PER_ITERATION)
    n = 1 << 14
    while True:
        t0 = time.thread_time()
        _core.spin_adds(n)
        dt = time.thread_time() - t0
        if dt >= min_s:
            break
        n = int(n * min(max(2 * min_s / max(dt, 1e-6), 2.0), 64.0))
    rates = [n * per / dt]
    for _ in range(rounds - 1):
        t0 = time.thread_time()
        _core.spin_adds(n)
        rates.append(n * per / (time.thread_time() - t0))
    rates.sort()
    return float(rates[len(rates) // 2])


def fingerprint(clock_hz: float | None = None) -> dict:
    """This machine: CPU model, SIMD level, L2/L3 bytes, cores, the measured
    clock (``clock_hz`` if already measured) and /proc/cpuinfo's mean MHz."""
    name, flags, mhz = _cpuinfo()
    if clock_hz is None:
        try:
            clock_hz = measure_clock()
        except ValueError:
            clock_hz = float(max(mhz) * 1e6) if mhz else float("nan")
    return {
        "cpu": name,
        "simd": simd_level(flags),
        "l2_bytes": cache_bytes(2),
        "l3_bytes": cache_bytes(3),
        "cores": os.cpu_count(),
        "clock_hz": float(clock_hz),
        "cpuinfo_mhz": float(sum(mhz) / len(mhz)) if mhz else None,
    }


#: Fingerprint keys that must match for the fitted cycles to describe this
#: machine; the clock may differ by CLOCK_TOLERANCE (boost, load).
SAME = ("cpu", "simd", "l2_bytes", "l3_bytes")
CLOCK_TOLERANCE = 0.10


def differences(fitted: dict, here: dict) -> list[str]:
    """How this machine differs from the one the model was fitted on (empty: the same)."""
    out = [f"{k}: fitted on {fitted.get(k)!r}, this machine {here.get(k)!r}" for k in SAME
           if fitted.get(k) != here.get(k)]
    a, b = fitted.get("clock_hz"), here.get("clock_hz")
    if a and b and abs(b / a - 1) > CLOCK_TOLERANCE:
        out.append(f"clock: fitted at {a / 1e9:.3g} GHz, this machine runs at {b / 1e9:.3g} GHz")
    return out

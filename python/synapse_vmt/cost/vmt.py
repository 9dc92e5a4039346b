"""Synapse's cost of a table: PMUs for a target hit rate (or mean latency) at
the table's packet rate, found with the cycle-accurate simulator, and the HBM
bytes of the ELU's structure for its entries, built by the Rust structures.

PMUs: a one-table scenario (the built-in one, its traffic scaled to the
table's rate) is simulated with 1, 2, 4, ... PMUs, then bisected, for the
fewest PMUs whose hit rate reaches the target, whose mean match latency is
within the latency target (when given), and that carry at least 99% of the
offered load (or what the largest allocation carries, when that is 90% or
more); the hit-rate target is capped at what the largest allocation
reaches, since a flow's first packet misses however many PMUs there are.
Rates are rounded up to a geometric grid (ratio
``RATE_STEP``) so tables with similar rates share one search.

HBM bytes: the exact-match hash table for exact tables, the trie for
single-field LPM tables, the decision tree otherwise (what the ELU would walk),
built over a stand-in rule set of the table's shape and entry count
(:func:`synapse_vmt._core.structure_bytes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from synapse_vmt import _core
from synapse_vmt.scenario import load
from synapse_vmt.sim import Simulation, finish_checked

RATE_STEP = 1.25
#: Simulated time per point: long enough for the caches to warm (flows last
#: the whole run), short enough for a program of 100+ tables.
DURATION_NS = 300_000
#: Offered Mpps per flow of the built-in traffic model when each flow lasts
#: the whole run (measured by :func:`_mpps_per_flow`).
_PILOT_FLOWS = 2000


def _base(pmus: int, flows: int, block_size: int) -> list[str]:
    return [f"pmus.count={pmus}", f"pmus.block_size={block_size}", f"traffic.flows={flows}",
            f"duration_ns={DURATION_NS}", f"traffic.flow_duration_ns={DURATION_NS}",
            "tables.0.rules.generate.count=500"]


@lru_cache(maxsize=None)
def _mpps_per_flow(block_size: int) -> float:
    sim = Simulation(load(None, _base(8, _PILOT_FLOWS, block_size)))
    summ = sim.run()
    finish_checked(sim)
    return next(iter(summ["tables"].values()))["offered_mpps"] / _PILOT_FLOWS


@dataclass(frozen=True)
class PmuPoint:
    pmus: int
    hit_rate: float
    mean_latency_ns: float
    carried: float  # throughput / offered


@lru_cache(maxsize=None)
def _simulate(pmus: int, flows: int, block_size: int) -> PmuPoint:
    sim = Simulation(load(None, _base(pmus, flows, block_size)))
    summ = sim.run()
    finish_checked(sim)
    t = next(iter(summ["tables"].values()))
    carried = t["throughput_mpps"] / t["offered_mpps"] if t["offered_mpps"] > 0 else 1.0
    return PmuPoint(pmus, t["hit_rate"], t["mean_latency_ns"], carried)


def quantize_rate(mpps: float) -> float:
    """Rounds a rate up to the grid RATE_STEP^k (a conservative estimate)."""
    if mpps <= 0:
        return 0.0
    return RATE_STEP ** math.ceil(math.log(mpps, RATE_STEP) - 1e-9)


def pmus_needed(mpps: float, hit_rate: float, latency_ns: float | None, block_size: int,
                max_pmus: int) -> tuple[PmuPoint | None, PmuPoint]:
    """(the fewest PMUs meeting the targets at ``mpps`` or None if even
    ``max_pmus`` do not, the point at ``max_pmus``); simulated points are cached."""
    rate = quantize_rate(mpps)
    if rate == 0.0:
        return PmuPoint(0, 1.0, 0.0, 1.0), PmuPoint(0, 1.0, 0.0, 1.0)
    flows = max(1, round(rate / _mpps_per_flow(block_size)))
    # Compulsory misses (a flow's first packet) no PMU can hide: the target
    # is capped at the hit rate of the largest allocation.
    top = _simulate(max_pmus, flows, block_size)
    hit_rate = min(hit_rate, top.hit_rate - 0.005)
    carried = min(0.99, top.carried - 0.005)
    if top.carried < 0.9:  # the VMT cannot carry its load at any size
        return None, top

    def ok(pt: PmuPoint) -> bool:
        return pt.hit_rate >= hit_rate and pt.carried >= carried and (latency_ns is None or pt.mean_latency_ns <= latency_ns)

    lo, hi = 0, 1  # lo fails (or is 0), hi is tested next
    while True:
        pt = _simulate(hi, flows, block_size)
        if ok(pt):
            break
        if hi >= max_pmus:
            return None, top
        lo, hi = hi, min(2 * hi, max_pmus)
    best = pt
    while hi - lo > 1:
        mid = (lo + hi) // 2
        pt = _simulate(mid, flows, block_size)
        if ok(pt):
            hi, best = mid, pt
        else:
            lo = mid
    return best, top


def elu_structure(word_kinds: list[str]) -> str:
    """The ELU structure a table's entries are kept in: the hash table for
    exact keys, the trie for a single LPM word, the decision tree otherwise."""
    if all(k == "exact" for k in word_kinds):
        return "exact"
    if word_kinds == ["lpm"]:
        return "trie"
    return "dtree"


def hbm_bytes(table, entries: list) -> tuple[int | None, str]:
    """(bytes, structure) of the ELU's structure built over ``entries`` (a
    :class:`~synapse_vmt.p4.bmv2.TableSpec`'s entries in match order), at the
    table's key layout; bytes is None, with the reason in place of the
    structure, when it cannot be built."""
    from synapse_vmt.p4.keys import KeyLayout

    layout = KeyLayout.from_table(table.info)
    algo = elu_structure(layout.word_kinds())
    if not entries:
        return 0, algo
    try:
        rs = layout.rule_set(*layout.rule_arrays(entries))
    except Exception as e:  # a key the layout cannot hold (e.g. over 32 words)
        return None, str(e).splitlines()[0]
    # Fallbacks, as the ELU would take them: an exact table whose entries
    # wildcard a field goes to the tree; a tree over its memory budget to the
    # linear scan (which always fits, at n reads per miss).
    tried, err = [], ""
    for a in [algo, "dtree", "linear"] if algo == "exact" else [algo, "linear"]:
        try:
            cfg = {"trie.max_bytes": str(1 << 30)} if a == "trie" else None
            b = int(_core.Classifier(rs, a, cfg).memory_bytes())
            return b, a if not tried else f"{a} ({'; '.join(tried)})"
        except MemoryError:
            tried.append(f"{a} over its memory budget")
        except ValueError as e:
            msg = str(e).splitlines()[0]
            tried.append(f"{a} over its memory budget" if "memory budget" in msg else f"{a}: {msg}")
    return None, "; ".join(tried)

"""Online miss-ratio curves of a running simulator's tables, for the closed
loop (the controller's model of what each PMU buys, without calibration).

Each batch of arrivals a routed simulator takes (``RoutedSim.taps``,
:mod:`synapse_vmt.p4.simrun`) is pushed, as the same batch, into one
miss-ratio curve per table (``_core.mrc_push``: the per-key work in Rust,
``crates/synapse-core/src/sim/mrc.rs``). The curve models what the exact
engine does to that key stream: the VMU's sharding of the keys over P PMUs
(a stack per PMU), each PMU's LRU, and the fill latency of early-miss PMUs.
It is sampled (SHARDS, fixed size: at most ``size`` keys tracked per
table, the sampling rate falling as keys arrive), so the stacks stay
bounded and the cost per arrival does not grow with the run (a few bytes of
bookkeeping per distinct key remain, as in the simulator's own key table).
Per control period the controller reads the curves (a few hundred numbers) and knows,
for every table, its miss ratio at every PMU count of the pool: the marginal
gain of each PMU.

The curve at P PMUs shards the keys as the VMU would over the PMU ids the
table would hold at P (:meth:`OnlineMrc.follow`, before every read: the ids
it holds, plus the ones the placement would give it next or minus the ones
it would release, ``placement.candidate_sets``), not over a fixed order: the
ring's imbalance between two or three shards moves a small curve's cliff
by a PMU or so. A count whose ids change is re-sharded in Rust
(``TableMrc::set_pmus``): its per-PMU LRU stacks are rebuilt exactly from
the tracked keys' recency order, and the hits counted under the old ids are
kept as at most :data:`CARRY_REFS` references, so the point moves to the
new sharding's within a control period or so.

The curve is over the stream since the run started (compulsory misses of
new flows included, as the exact engine has them).
"""

from __future__ import annotations

import numpy as np

from synapse_vmt import _core
from synapse_vmt.mrc import Sampling

#: Keys tracked per table (SHARDS fixed size) unless told otherwise.
DEFAULT_SIZE = 4096
#: A re-sharded count keeps the hits counted under its old PMU ids as at
#: most this many references (about a control period of a busy table's).
CARRY_REFS = 2000.0


class OnlineMrc:
    """The miss-ratio curves of a routed simulator's tables, fed by its own
    arrivals, batch by batch (hook it up before the first ``run_until``)."""

    def __init__(self, sim, pmus: int, block_size: int, sampling: Sampling | None = None):
        core = getattr(sim, "core", None)
        taps = getattr(sim, "taps", None)
        if core is None or taps is None:
            # Recording and other wrappers pass attributes through
            raise TypeError("OnlineMrc: a routed simulator (p4.simrun.RoutedSim) is needed")
        self.core, self.pmus, self.block = core, int(pmus), int(block_size)
        self.sampling = sampling or Sampling("size", DEFAULT_SIZE)
        self.m = _core.mrc_routed(core, list(range(1, self.pmus + 1)), [self.block], self.sampling.kind,
                                  self.sampling.value, True)
        self.names = [str(n) for n in sim.table_names()]
        taps.append(self.push)

    def follow(self, states: list[dict]) -> int:
        """Shards every table's count P over the PMU ids it would hold at P
        now (``states``: the simulator's ``pmu_states()``); returns how many
        (table, count) points were re-sharded."""
        from synapse_vmt.opt.placement import candidate_sets

        changed = 0
        for name in self.names:
            for p, ids in enumerate(candidate_sets(states, name, self.pmus), start=1):
                changed += bool(self.m.set_pmus(name, p, ids, CARRY_REFS))
        return changed

    def pmu_sets(self) -> dict[str, list[list[int]]]:
        """Per table, the PMU ids each count 1..pmus shards its keys over."""
        return {n: [list(x) for x in v] for n, v in self.m.pmu_sets().items()}

    def push(self, t_ps: np.ndarray, route: np.ndarray) -> None:
        _core.mrc_push(self.m, self.core, t_ps, route)

    def totals(self) -> tuple[np.ndarray, np.ndarray]:
        """References per table (T,) and estimated hits per table and PMU
        count 1..pmus (T, pmus), over the stream so far."""
        rows, st = self.m.rows(), self.m.stats()
        T, idx = len(self.names), {n: j for j, n in enumerate(self.names)}
        refs = np.array([float(st[n]["refs"]) for n in self.names])
        hits = np.zeros((T, self.pmus))
        for name, p, h in zip(rows["table"], rows["pmus"], rows["hit_rate"]):
            j = idx[str(name)]
            hits[j, int(p) - 1] = float(h) * refs[j]
        return refs, hits

    def miss_curves(self) -> np.ndarray:
        """Per table, its miss ratio at 0..pmus PMUs, shape (T, pmus + 1)
        (0 PMUs: every lookup misses; a table with no reference yet: 1)."""
        refs, hits = self.totals()
        out = np.ones((len(self.names), self.pmus + 1))
        ok = refs > 0
        out[ok, 1:] = np.clip(1.0 - hits[ok] / refs[ok, None], 0.0, 1.0)
        return out

    def stats(self) -> dict:
        """Per table: references seen, distinct keys, the sampling rate now."""
        return {n: dict(v) for n, v in self.m.stats().items()}

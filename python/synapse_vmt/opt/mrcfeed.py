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

The curve at P PMUs shards the keys as the VMU would over the table's own
PMU ids first, then the lowest others (``synapse mrc``'s order), not over
the ids the controller's placement later gives the table: the ring's
imbalance between shards moves a small curve's cliffs by a PMU or so.

The curve is over the stream since the run started (compulsory misses of
new flows included, as the exact engine has them).
"""

from __future__ import annotations

import numpy as np

from synapse_vmt import _core
from synapse_vmt.mrc import Sampling

#: Keys tracked per table (SHARDS fixed size) unless told otherwise.
DEFAULT_SIZE = 4096


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

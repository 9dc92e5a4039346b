"""The allocation problem of the runtime OPT (paper §5, eqs. 1–4) and its answer.

Maximise the flow F that the source s sends into the CFG, where

- the source feeds table j the share ``entry[j]`` of F (the traffic decides
  where PHVs enter, the optimizer does not);
- the flow leaving table j for table k is ``P[j, k]`` times the flow through j
  (proportional routing, eq. 2 with equality);
- the flow through table j is at most its capacity ``C_j(n_j)`` with ``n_j``
  PMUs (eq. 3; C from the USL curve, eq. 5, see :mod:`synapse_vmt.opt.usl`);
- ``Σ n_j ≤ N``, ``n_j`` integer, ``n_j ≥ min_pmus`` for every table that
  traffic reaches (eq. 4), and 0 for tables nothing reaches;
- optionally ``F ≤ offered_mpps`` (the measured input rate λ_in): then the
  objective is min(F, λ_in), and among the allocations reaching it the one
  with the fewest PMUs wins, so the controller does not hold PMUs it does not
  need. Without the cap, the fewest PMUs reaching the maximum F win too.

With proportional routing the flow through table j is ``F · v_j`` where the
visit ratios solve ``v = entry + Pᵀ v``. Both solvers (:mod:`.fast`,
:mod:`.milp`) take a :class:`Problem` and return an :class:`Allocation`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Relative slack when comparing a flow with a capacity (floating point).
REL_TOL = 1e-9


class Infeasible(ValueError):
    """No allocation satisfies the constraints (e.g. N < min_pmus · tables)."""


@dataclass
class Problem:
    names: list[str]
    entry: np.ndarray  # (T,) share of F entering each table
    P: np.ndarray  # (T, T) routing matrix
    capacity: np.ndarray  # (T, N+1): C_j(n) in Mpps for n = 0..N
    pmus: int  # N
    min_pmus: int = 1
    offered_mpps: float | None = None
    _visits: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.entry = np.asarray(self.entry, dtype=float)
        self.P = np.asarray(self.P, dtype=float)
        self.capacity = np.asarray(self.capacity, dtype=float)
        t = len(self.names)
        if self.entry.shape != (t,) or self.P.shape != (t, t):
            raise ValueError(f"entry must be ({t},) and P ({t}, {t})")
        if self.capacity.shape != (t, self.pmus + 1):
            raise ValueError(f"capacity must be ({t}, N+1 = {self.pmus + 1}), got {self.capacity.shape}")
        if (self.P < 0).any() or (self.P.sum(axis=1) > 1 + 1e-9).any() or (self.entry < 0).any():
            raise ValueError("P and entry must be non-negative with rows summing to <= 1")
        if self.min_pmus < 0 or self.pmus < 0:
            raise ValueError("pmus and min_pmus must be >= 0")

    @property
    def visits(self) -> np.ndarray:
        """v_j: flow through table j per unit of input flow F."""
        if self._visits is None:
            t = len(self.names)
            try:
                v = np.linalg.solve(np.eye(t) - self.P.T, self.entry)
            except np.linalg.LinAlgError:
                raise ValueError("routing matrix has a loop that PHVs never leave") from None
            self._visits = np.clip(v, 0.0, None)
        return self._visits

    @property
    def active(self) -> np.ndarray:
        """Tables that traffic reaches."""
        return self.visits > 1e-12


@dataclass
class Allocation:
    names: list[str]
    pmus: np.ndarray  # n_j
    throughput_mpps: float  # F
    flows_mpps: np.ndarray  # F · v_j
    capacity_mpps: np.ndarray  # C_j(n_j)
    solver: str

    @property
    def used(self) -> int:
        return int(self.pmus.sum())

    @property
    def bottlenecks(self) -> list[str]:
        """Tables running at capacity."""
        full = self.flows_mpps >= self.capacity_mpps * (1 - 1e-6)
        return [n for n, f, a in zip(self.names, full, self.flows_mpps) if f and a > 0]

    def to_json(self) -> dict:
        return {
            "solver": self.solver,
            "throughput_mpps": self.throughput_mpps,
            "pmus_used": self.used,
            "tables": {
                n: {"pmus": int(k), "flow_mpps": float(f), "capacity_mpps": float(c)}
                for n, k, f, c in zip(self.names, self.pmus, self.flows_mpps, self.capacity_mpps)
            },
            "bottlenecks": self.bottlenecks,
        }


def allocation(problem: Problem, n: np.ndarray, F: float, solver: str) -> Allocation:
    n = np.asarray(n, dtype=np.int64)
    cap = problem.capacity[np.arange(len(n)), n]
    return Allocation(list(problem.names), n, float(F), F * problem.visits, cap, solver)


def evaluate(problem: Problem, n: np.ndarray) -> float:
    """The flow F an allocation supports: min over tables of C_j(n_j) / v_j,
    capped by the offered load (the check every solver's answer must pass)."""
    v = problem.visits
    act = problem.active
    cap = problem.capacity[np.arange(len(n)), np.asarray(n, dtype=np.int64)]
    f = float(np.min(cap[act] / v[act])) if act.any() else np.inf
    if problem.offered_mpps is not None:
        f = min(f, problem.offered_mpps)
    return f

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
            self._visits = np.clip(visit_ratios(self.entry, self.P), 0.0, None)
        return self._visits

    @property
    def active(self) -> np.ndarray:
        """Tables that traffic reaches."""
        return self.visits > 1e-12


def topological_order(P: np.ndarray) -> np.ndarray | None:
    """Tables in an order where every edge goes forward, or None on a cycle."""
    T = len(P)
    src, dst = np.nonzero(P)
    indeg = np.bincount(dst, minlength=T).tolist()
    succ: list[list[int]] = [[] for _ in range(T)]
    for a, b in zip(src.tolist(), dst.tolist()):
        succ[a].append(b)
    ready = [j for j in range(T) if indeg[j] == 0]
    order = []
    while ready:
        a = ready.pop()
        order.append(a)
        for b in succ[a]:
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
    return np.array(order) if len(order) == T else None


def visit_ratios(entry: np.ndarray, P: np.ndarray) -> np.ndarray:
    """Solve v = entry + Pᵀ v. A CFG is a DAG: in topological order I − Pᵀ is
    lower triangular and a triangular solve is O(T²) (LAPACK's general solve is
    slower and, with threaded BLAS on a busy machine, erratic). Tables usually
    come in topological order already: try that first and check the residual."""
    from scipy.linalg import solve_triangular

    T = len(entry)
    v = solve_triangular(np.eye(T) - P.T, entry, lower=True, check_finite=False)
    if np.abs(v - entry - P.T @ v).max(initial=0.0) <= 1e-9 * (1.0 + np.abs(v).max(initial=0.0)):
        return v
    order = topological_order(P)
    if order is not None:
        Q = P[np.ix_(order, order)]
        v = np.empty(T)
        v[order] = solve_triangular(np.eye(T) - Q.T, entry[order], lower=True, check_finite=False)
        return v
    try:
        return np.linalg.solve(np.eye(T) - P.T, entry)
    except np.linalg.LinAlgError:
        raise ValueError("routing matrix has a loop that PHVs never leave") from None


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


PROBLEM_KEYS = {"cfg", "pmus", "min_pmus", "offered_mpps", "capacity"}


def problem_from_json(d: object, where: str, base_dir=None) -> Problem:
    """Build a :class:`Problem` from a problem file (format in docs/reference/file-formats.md):
    a CFG (path or inline), the PMU budget, and per-table capacity as USL
    parameters or a list of C(n) in Mpps."""
    from pathlib import Path

    from synapse_vmt.errors import UserError
    from synapse_vmt.opt.usl import Usl
    from synapse_vmt.p4.cfg import cfg_from_json, load_cfg

    def bad(w: str, what: str):
        raise UserError(f"{where}: {w}: expected {what}")

    if not isinstance(d, dict):
        bad("top level", "a JSON object")
    assert isinstance(d, dict)
    unknown = sorted(set(d) - PROBLEM_KEYS)
    if unknown:
        bad("top level", f"keys among {sorted(PROBLEM_KEYS)}, found unknown {unknown}")
    c = d.get("cfg")
    if isinstance(c, str):
        cfg = load_cfg(Path(base_dir or ".") / c)
    elif isinstance(c, dict):
        cfg = cfg_from_json(c, f"{where}: cfg")
    else:
        bad("cfg", "a CFG file path or an inline CFG object")
    N = d.get("pmus")
    if not isinstance(N, int) or isinstance(N, bool) or N < 0:
        bad("pmus", "the number of PMUs, an integer >= 0")
    nmin = d.get("min_pmus", 1)
    if not isinstance(nmin, int) or isinstance(nmin, bool) or nmin < 0:
        bad("min_pmus", "an integer >= 0")
    off = d.get("offered_mpps")
    if off is not None and (not isinstance(off, (int, float)) or off < 0):
        bad("offered_mpps", "a rate in Mpps >= 0 or null")
    caps = d.get("capacity")
    if not isinstance(caps, dict):
        bad("capacity", "an object {table or \"default\": {\"usl\": {...}} or {\"mpps\": [...]}}")
    names = cfg.names
    for k in caps:
        if k != "default" and k not in names:
            bad("capacity", f"table names from the CFG or \"default\", found {k!r}")
    counts = np.arange(N + 1)
    rows = []
    for name in names:
        spec = caps.get(name, caps.get("default"))
        w = f"capacity[{name!r}]"
        if spec is None:
            bad(w, 'a capacity for every table (or a "default")')
        if not isinstance(spec, dict) or len(spec) != 1 or not set(spec) <= {"usl", "mpps"}:
            bad(w, 'exactly one of {"usl": {...}} or {"mpps": [C(0), C(1), ...]}')
        if "usl" in spec:
            rows.append(Usl.from_json(spec["usl"], f"{where}: {w}.usl").capacity(counts))
        else:
            lst = spec["mpps"]
            if not isinstance(lst, list) or not lst or not all(isinstance(x, (int, float)) and x >= 0 for x in lst):
                bad(f"{w}.mpps", "a non-empty list of capacities >= 0 for 0, 1, 2, ... PMUs")
            row = np.array([lst[min(i, len(lst) - 1)] for i in counts], dtype=float)
            rows.append(row)
    e, P = cfg.routing()
    try:
        p = Problem(names, e, P, np.array(rows), N, nmin, None if off is None else float(off))
        p.visits
    except ValueError as err:
        raise UserError(f"{where}: {err}") from None
    return p


def load_problem(path) -> Problem:
    from pathlib import Path

    from synapse_vmt.p4.cfg import load_json

    return problem_from_json(load_json(path), str(path), Path(path).parent)

"""The exact allocation solver: a mixed-integer program solved by HiGHS (paper §5, eqs. 1–4).

The paper solves its max-flow formulation with Gurobi; this is the same model
with HiGHS (highspy). Variables:

- F ≥ 0: flow from the source s (eq. 1, the objective);
- f_j ≥ 0: flow through table j;
- z_{j,n} ∈ {0, 1}: table j holds exactly n PMUs. The USL capacity C_j(n)
  (eq. 5) is nonlinear in n but only integer n matter, so it enters as
  constants: capacity_j = Σ_n C_j(n) z_{j,n}. No concavity or monotonicity of
  C_j is assumed.

Constraints:

- flow conservation with proportional routing (eq. 2):
  f_j = entry_j · F + Σ_i P_ij f_i;
- capacity (eq. 3): f_j ≤ Σ_n C_j(n) z_{j,n};
- one choice per table: Σ_n z_{j,n} = 1;
- PMU budget (eq. 4): Σ_j Σ_n n z_{j,n} ≤ N;
- F ≤ offered load when the problem has one.

Choices n that a smaller count dominates (C_j(m) ≥ C_j(n) for some m < n)
get no variable: they are never better. Formulation ``incremental`` is the
alternative textbook encoding of the same choice: ordered binaries y
("more than the k-th useful count") with capacity growing by each step.

Stage 1 maximises F with a zero MIP gap; stage 2 fixes F at its optimum and
minimises Σ n (the tie-break of :mod:`.problem`). Tables no traffic reaches
get no variables and 0 PMUs.

Numerics: HiGHS's tolerances are absolute, so F is solved in units of a guess
of its optimum with capacities clipped just above the flow that guess needs
(raised and solved again if the optimum reaches it); an unsaturating USL
curve (capacity 1e12 Mpps) would otherwise swamp the real capacities. The
dominated-choice reduction also avoids a HiGHS 1.15 presolve fault seen on
models with many identical (clipped) choice columns.
"""

from __future__ import annotations

import highspy
import numpy as np
from scipy.sparse import coo_matrix

from synapse_vmt.opt.problem import Allocation, Infeasible, Problem, allocation

FORMULATIONS = ("onehot", "incremental")
STAGE2_TOL = 1e-7


def solve(problem: Problem, time_limit_s: float = 60.0, formulation: str = "onehot") -> Allocation:
    if formulation not in FORMULATIONS:
        raise ValueError(f"formulation must be one of {FORMULATIONS}")
    T, N, nmin = len(problem.names), problem.pmus, problem.min_pmus
    name = "milp" if formulation == "onehot" else f"milp-{formulation}"
    v = problem.visits
    act = np.flatnonzero(problem.active)
    if len(act) == 0:
        return allocation(problem, np.zeros(T, dtype=np.int64), 0.0, name)
    if nmin * len(act) > N or nmin > N:
        raise Infeasible(f"{len(act)} tables need {nmin} PMU(s) each but only {N} exist")
    # Upper bound on F: no table can carry more than its best capacity.
    f_ub = float(np.min(problem.capacity[act, nmin:].max(axis=1) / v[act]))
    if problem.offered_mpps is not None:
        f_ub = min(f_ub, problem.offered_mpps)
    f_lb = float(np.min(problem.capacity[act, nmin] / v[act]))  # every table at n_min
    guess = min(f_ub, max(4 * f_lb, 1.0)) if f_ub > 0 else 1.0
    while True:
        cap = np.minimum(problem.capacity[act, nmin:] / guess, v[act, None] * (1 + 1e-6))
        m = _Model(problem, act, cap, min(f_ub, guess) / guess, formulation, time_limit_s)
        _run(m.h, "maximise F")
        F = float(m.h.getSolution().col_value[0])  # in units of guess
        if F < 1 - 1e-6 or guess >= f_ub:
            break
        guess = min(f_ub, guess * 16)

    # Stage 2: keep F, use the fewest PMUs. HiGHS meets rows to ~1e-7, so
    # stage 1's F may sit a hair above what the integral choice carries.
    h = m.h
    h.changeColBounds(0, F * (1 - STAGE2_TOL), F)
    h.changeObjectiveSense(highspy.ObjSense.kMinimize)
    obj = np.zeros(m.n_col)
    obj[m.choice_cols] = m.choice_pmus
    h.changeColsCost(m.n_col, np.arange(m.n_col, dtype=np.int32), obj)
    _run(h, "minimise PMUs")
    n = np.zeros(T, dtype=np.int64)
    n[act] = m.decode(np.asarray(h.getSolution().col_value))
    return allocation(problem, n, F * guess, name)


class _Model:
    """The stage-1 model (maximise F); F and capacities in scaled units.

    Columns: F | f_0..f_{T-1} | per active table, one column per useful choice."""

    def __init__(self, problem: Problem, act: np.ndarray, cap: np.ndarray, f_hi: float, formulation: str, time_limit_s: float):
        T, N, nmin = len(problem.names), problem.pmus, problem.min_pmus
        self.formulation = formulation
        inf = highspy.kHighsInf
        rows: list[int] = []
        cols: list[int] = []
        vals: list[float] = []
        lo: list[float] = []
        hi: list[float] = []
        r = 0
        # Conservation: f_j - Σ_i P_ij f_i - e_j F = 0.
        Pt = problem.P.T
        for j in range(T):
            src = np.flatnonzero(Pt[j])
            rows += [r] * (1 + len(src))
            cols += [1 + j, *(1 + src)]
            vals += [1.0, *(-Pt[j, src])]
            if problem.entry[j] != 0:
                rows.append(r)
                cols.append(0)
                vals.append(-problem.entry[j])
            lo.append(0.0)
            hi.append(0.0)
            r += 1
        next_col = 1 + T
        self.useful: list[np.ndarray] = []  # per active table: PMU counts worth choosing
        self.cols: list[np.ndarray] = []
        choice_pmus: list[float] = []
        budget = float(N)
        for i, j in enumerate(act):
            c = cap[i]
            best = np.maximum.accumulate(c)
            keep = np.concatenate([[True], c[1:] > best[:-1]])  # strictly better than every smaller count
            counts = nmin + np.flatnonzero(keep)
            caps = c[keep]
            self.useful.append(counts)
            if formulation == "onehot":
                zc = next_col + np.arange(len(counts))
                # Capacity: f_j - Σ C z <= 0; choice: Σ z = 1.
                rows += [r] * (1 + len(zc))
                cols += [1 + j, *zc]
                vals += [1.0, *(-caps)]
                lo.append(-inf)
                hi.append(0.0)
                rows += [r + 1] * len(zc)
                cols += list(zc)
                vals += [1.0] * len(zc)
                lo.append(1.0)
                hi.append(1.0)
                r += 2
                choice_pmus += list(counts.astype(float))
            else:
                # y_k = 1: at least counts[k+1] PMUs; capacity steps by the rise.
                zc = next_col + np.arange(len(counts) - 1)
                rows += [r] * (1 + len(zc))
                cols += [1 + j, *zc]
                vals += [1.0, *(-np.diff(caps))]
                lo.append(-inf)
                hi.append(float(caps[0]))
                r += 1
                for k in range(len(zc) - 1):  # y_{k+1} <= y_k
                    rows += [r, r]
                    cols += [int(zc[k + 1]), int(zc[k])]
                    vals += [1.0, -1.0]
                    lo.append(-inf)
                    hi.append(0.0)
                    r += 1
                choice_pmus += list(np.diff(counts).astype(float))
                budget -= nmin
            self.cols.append(zc)
            next_col += len(zc)
        self.n_col = next_col
        self.choice_cols = np.arange(1 + T, next_col)
        self.choice_pmus = np.array(choice_pmus)
        # Budget: Σ PMUs <= N.
        rows += [r] * len(self.choice_cols)
        cols += list(self.choice_cols)
        vals += list(self.choice_pmus)
        lo.append(-inf)
        hi.append(budget)
        r += 1

        A = coo_matrix((vals, (rows, cols)), shape=(r, self.n_col)).tocsc()
        A.sum_duplicates()
        lp = highspy.HighsLp()
        lp.num_col_ = self.n_col
        lp.num_row_ = r
        cost = np.zeros(self.n_col)
        cost[0] = 1.0
        lp.col_cost_ = cost
        col_hi = np.full(self.n_col, inf)
        col_hi[0] = f_hi
        col_hi[self.choice_cols] = 1.0
        lp.col_lower_ = np.zeros(self.n_col)
        lp.col_upper_ = col_hi
        lp.row_lower_ = np.array(lo)
        lp.row_upper_ = np.array(hi)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = A.indptr
        lp.a_matrix_.index_ = A.indices
        lp.a_matrix_.value_ = A.data
        integ = np.full(self.n_col, highspy.HighsVarType.kContinuous)
        integ[self.choice_cols] = highspy.HighsVarType.kInteger
        lp.integrality_ = list(integ)
        lp.sense_ = highspy.ObjSense.kMaximize
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("mip_rel_gap", 0.0)
        h.setOptionValue("mip_abs_gap", 0.0)
        h.setOptionValue("time_limit", float(time_limit_s))
        h.setOptionValue("threads", 1)
        h.passModel(lp)
        self.h = h

    def decode(self, x: np.ndarray) -> np.ndarray:
        """PMU count per active table from a solution vector."""
        out = []
        for counts, zc in zip(self.useful, self.cols):
            if self.formulation == "onehot":
                out.append(counts[int(np.argmax(x[zc]))])
            else:
                out.append(counts[int(np.rint(x[zc]).sum())] if len(zc) else counts[0])
        return np.array(out, dtype=np.int64)


def _run(h: highspy.Highs, what: str) -> None:
    h.run()
    status = h.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise Infeasible(f"HiGHS could not {what}: {h.modelStatusToString(status)}")

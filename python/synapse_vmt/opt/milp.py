"""The exact allocation solver: a mixed-integer program solved by HiGHS (paper §5, eqs. 1–4).

The paper solves its max-flow formulation with Gurobi; this is the same model
with HiGHS (highspy). Variables:

- F ≥ 0: flow from the source s (eq. 1, the objective);
- f_j ≥ 0: flow through table j;
- z_{j,n} ∈ {0, 1} for n = n_min..N: table j holds exactly n PMUs. The USL
  capacity C_j(n) (eq. 5) is nonlinear in n but only integer n matter, so it
  enters as constants: capacity_j = Σ_n C_j(n) z_{j,n}. No concavity or
  monotonicity of C_j is assumed.

Constraints:

- flow conservation with proportional routing (eq. 2):
  f_j = entry_j · F + Σ_i P_ij f_i;
- capacity (eq. 3): f_j ≤ Σ_n C_j(n) z_{j,n};
- one choice per table: Σ_n z_{j,n} = 1;
- PMU budget (eq. 4): Σ_j Σ_n n z_{j,n} ≤ N;
- F ≤ offered load when the problem has one.

Stage 1 maximises F with a zero MIP gap; stage 2 fixes F at its optimum and
minimises Σ n (the tie-break of :mod:`.problem`). Tables no traffic reaches
get no variables and 0 PMUs. Capacities above the largest flow the table can
ever see are clipped to it: this changes no feasible set and keeps the matrix
well scaled (an unsaturating USL curve has capacity 1e12).
"""

from __future__ import annotations

import highspy
import numpy as np
from scipy.sparse import coo_matrix

from synapse_vmt.opt.problem import REL_TOL, Allocation, Infeasible, Problem, allocation


def solve(problem: Problem, time_limit_s: float = 60.0) -> Allocation:
    T, N, nmin = len(problem.names), problem.pmus, problem.min_pmus
    v = problem.visits
    act = np.flatnonzero(problem.active)
    if len(act) == 0:
        return allocation(problem, np.zeros(T, dtype=np.int64), 0.0, "milp")
    if nmin * len(act) > N or nmin > N:
        raise Infeasible(f"{len(act)} tables need {nmin} PMU(s) each but only {N} exist")
    counts = np.arange(nmin, N + 1)
    K = len(counts)
    # Upper bound on F: no table can carry more than its best capacity.
    f_ub = float(np.min(problem.capacity[act].max(axis=1) / v[act]))
    if problem.offered_mpps is not None:
        f_ub = min(f_ub, problem.offered_mpps)
    cap = np.minimum(problem.capacity[act][:, nmin:], f_ub * v[act, None] * (1 + 1e-6))

    # Columns: F | f_0..f_{T-1} | z (active table i, count k) at 1 + T + i*K + k.
    n_col = 1 + T + len(act) * K
    zcol = 1 + T + np.arange(len(act) * K).reshape(len(act), K)
    rows, cols, vals = [], [], []
    lo, hi = [], []
    r = 0
    # Conservation: f_j - Σ_i P_ij f_i - e_j F = 0.
    Pt = problem.P.T
    for j in range(T):
        rows += [r]
        cols += [1 + j]
        vals += [1.0]
        src = np.flatnonzero(Pt[j])
        rows += [r] * len(src)
        cols += list(1 + src)
        vals += list(-Pt[j, src])
        if problem.entry[j] != 0:
            rows += [r]
            cols += [0]
            vals += [-problem.entry[j]]
        lo.append(0.0)
        hi.append(0.0)
        r += 1
    # Capacity: f_j - Σ_n C_j(n) z_jn <= 0; choice: Σ_n z_jn = 1.
    for i, j in enumerate(act):
        rows += [r] * (K + 1)
        cols += [1 + j, *zcol[i]]
        vals += [1.0, *(-cap[i])]
        lo.append(-highspy.kHighsInf)
        hi.append(0.0)
        r += 1
        rows += [r] * K
        cols += list(zcol[i])
        vals += [1.0] * K
        lo.append(1.0)
        hi.append(1.0)
        r += 1
    # Budget: Σ n z <= N.
    budget_row = r
    rows += [r] * (len(act) * K)
    cols += list(zcol.ravel())
    vals += list(np.tile(counts, len(act)).astype(float))
    lo.append(-highspy.kHighsInf)
    hi.append(float(N))
    r += 1
    del budget_row

    A = coo_matrix((vals, (rows, cols)), shape=(r, n_col)).tocsc()
    A.sum_duplicates()
    lp = highspy.HighsLp()
    lp.num_col_ = n_col
    lp.num_row_ = r
    cost = np.zeros(n_col)
    cost[0] = 1.0
    lp.col_cost_ = cost
    col_lo = np.zeros(n_col)
    col_hi = np.full(n_col, highspy.kHighsInf)
    col_hi[0] = f_ub
    col_hi[zcol.ravel()] = 1.0
    lp.col_lower_ = col_lo
    lp.col_upper_ = col_hi
    lp.row_lower_ = np.array(lo)
    lp.row_upper_ = np.array(hi)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = A.indptr
    lp.a_matrix_.index_ = A.indices
    lp.a_matrix_.value_ = A.data
    integ = [highspy.HighsVarType.kContinuous] * n_col
    for c in zcol.ravel():
        integ[c] = highspy.HighsVarType.kInteger
    lp.integrality_ = integ
    lp.sense_ = highspy.ObjSense.kMaximize

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("mip_abs_gap", 0.0)
    h.setOptionValue("time_limit", float(time_limit_s))
    h.setOptionValue("threads", 1)
    h.passModel(lp)
    _run(h, "maximise F")
    F = float(h.getSolution().col_value[0])

    # Stage 2: keep F, use the fewest PMUs.
    h.changeColBounds(0, F * (1 - REL_TOL), F)
    h.changeObjectiveSense(highspy.ObjSense.kMinimize)
    obj = np.zeros(n_col)
    obj[zcol.ravel()] = np.tile(counts, len(act))
    h.changeColsCost(n_col, np.arange(n_col, dtype=np.int32), obj)
    _run(h, "minimise PMUs")
    z = np.asarray(h.getSolution().col_value)[zcol]
    n = np.zeros(T, dtype=np.int64)
    n[act] = counts[np.argmax(z, axis=1)]
    return allocation(problem, n, F, "milp")


def _run(h: highspy.Highs, what: str) -> None:
    h.run()
    status = h.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise Infeasible(f"HiGHS could not {what}: {h.modelStatusToString(status)}")

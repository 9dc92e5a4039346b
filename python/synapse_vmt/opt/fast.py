"""The fast allocation solver: exact, by raising the bottleneck (paper §5, eqs. 1–4).

With proportional routing the flow through table j is F · v_j (see
:mod:`.problem`), so the problem is

    maximise F  subject to  F · v_j ≤ C_j(n_j),  Σ n_j ≤ N,  n_j ≥ n_min,

i.e. maximise min_j C_j(n_j) / v_j over integer allocations: a max-min
resource allocation with one resource. Let Ĉ_j(n) = max_{n_min ≤ m ≤ n} C_j(m)
be the best capacity reachable with at most n PMUs (USL curves need not be
monotone in n once σ and κ are extrapolated). The algorithm:

1. start every reached table at n_min;
2. repeatedly take the bottleneck table b (smallest Ĉ_b(n_b) / v_b) and give it
   PMUs up to the next count at which Ĉ_b strictly increases; stop when that
   would exceed N, when b cannot improve, or when the bottleneck already
   carries the offered load;
3. F* = min(bottleneck value, offered load); finally give every table the
   fewest PMUs m with Ĉ_j(m) ≥ F* · v_j.

Exactness: invariant — every table's current n_j is a lower bound on its PMUs
in any allocation with F > current bottleneck value. It holds at the start
(n_min), and a table is only raised when it is the bottleneck, so reaching any
larger F needs Ĉ_b > Ĉ_b(n_b), i.e. at least the next strict increase of Ĉ_b.
When the stop rule fires the lower bounds already exceed N (or b is maxed
out), so no allocation beats the current value. Step 3 then picks, per table
independently, the minimum PMUs for F*, which minimises Σ n_j among optimal
allocations. Cost: O(T·N) to tabulate Ĉ and O(N log T) heap steps.
"""

from __future__ import annotations

import heapq

import numpy as np

from synapse_vmt.opt.problem import REL_TOL, Allocation, Infeasible, Problem, allocation


def solve(problem: Problem) -> Allocation:
    T, N, nmin = len(problem.names), problem.pmus, problem.min_pmus
    v = problem.visits
    act = np.flatnonzero(problem.active)
    n = np.zeros(T, dtype=np.int64)
    if len(act) == 0:
        return allocation(problem, n, 0.0, "fast")
    if nmin * len(act) > N or nmin > N:
        raise Infeasible(f"{len(act)} tables need {nmin} PMU(s) each but only {N} exist")
    # Ĉ: running max from n_min on (columns below n_min are never used).
    env = problem.capacity[act].copy()
    env[:, :nmin] = -np.inf
    env = np.maximum.accumulate(env, axis=1)
    va = v[act]
    # next_up[i, m]: the smallest m' > m with env[i, m'] > env[i, m] (N+1 if none).
    rise = np.full(env.shape, N + 1, dtype=np.int64)
    rise[:, 1:] = np.where(env[:, 1:] > env[:, :-1], np.arange(1, N + 1), N + 1)
    later = np.minimum.accumulate(rise[:, ::-1], axis=1)[:, ::-1]  # min rise at >= m
    next_up = np.full(env.shape, N + 1, dtype=np.int64)
    next_up[:, :-1] = later[:, 1:]
    cap_in = problem.offered_mpps if problem.offered_mpps is not None else np.inf
    cur = np.full(len(act), nmin, dtype=np.int64)
    used = nmin * len(act)
    heap = [(env[i, nmin] / va[i], i) for i in range(len(act))]
    heapq.heapify(heap)
    while True:
        value, b = heap[0]
        if value >= cap_in:
            break
        m = next_up[b, cur[b]]
        if m > N or used + (m - cur[b]) > N:
            break
        used += m - cur[b]
        cur[b] = m
        heapq.heapreplace(heap, (env[b, m] / va[b], b))
    best = min(heap[0][0], cap_in)
    # Fewest PMUs per table that carry F* (env rows are non-decreasing).
    need = best * va * (1 - REL_TOL)
    enough = env >= need[:, None]
    n[act] = np.argmax(enough, axis=1)
    return allocation(problem, n, best, "fast")

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
    C = problem.capacity  # rows are indexed through act (no copy of the table)
    rows = act.tolist()
    va = v[act]
    cap_in = problem.offered_mpps if problem.offered_mpps is not None else np.inf
    # The loop runs on Python scalars (item()): numpy scalars make heap compares slow.
    # cur[i] always sits where Ĉ_i rises, so Ĉ_i(cur[i]) = C_i(cur[i]).
    vl = va.tolist()
    cur = [nmin] * len(act)
    used = nmin * len(act)
    heap = list(zip((C[act, nmin] / va).tolist(), range(len(act))))
    heapq.heapify(heap)
    done = False
    while not done:
        value, b = heap[0]
        if value >= cap_in:
            break
        # b stays the bottleneck while its value is at most the next smallest:
        # climb it in one go, without touching the heap.
        second = min(heap[1][0], heap[2][0]) if len(heap) > 2 else heap[1][0] if len(heap) > 1 else np.inf
        r = rows[b]
        cb, here, vb = cur[b], C.item(r, cur[b]), vl[b]
        while True:
            # Next count at which Ĉ_b strictly rises. Each row is scanned
            # forward only, so all scans together cost O(N + T).
            m = cb + 1
            while m <= N and C.item(r, m) <= here:
                m += 1
            if m > N or used + (m - cb) > N:
                done = True
                break
            used += m - cb
            cb, here = m, C.item(r, m)
            if here / vb > second or here / vb >= cap_in:
                break
        cur[b] = cb
        heapq.heapreplace(heap, (here / vb, b))
    best = min(heap[0][0], cap_in)
    # Fewest PMUs per table that carry F*: the first count from n_min whose
    # capacity reaches F* v_j (the same count where Ĉ_j first reaches it).
    # The answer is at most cur, so only columns up to max(cur) matter.
    need = best * va * (1 - REL_TOL)
    n[act] = nmin + np.argmax(C[act, nmin : max(cur) + 1] >= need[:, None], axis=1)
    return allocation(problem, n, best, "fast")

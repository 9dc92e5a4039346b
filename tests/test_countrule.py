"""The budget count rule of the MRC-fed closed loop (opt/countrule.py): its
decisions on synthetic curves against a brute force of the same objective,
and the loop's early first decision on a short UPF run."""

from __future__ import annotations

import numpy as np
import pytest

from synapse_vmt.opt import countrule
from synapse_vmt.opt.countrule import ELU_BYTES_PER_US, budget_counts, elu_cost, objective
from test_mrcfeed import brute_min, random_case, upf_run
from test_upf_controller import controller, solve


def brute(cost, held, total, add, release, min_pmus=1):
    """The least :func:`objective` over every allocation."""
    return brute_min(lambda n: objective(n, cost, held, add, release), cost.shape[0], cost.shape[1] - 1, total, min_pmus)


@pytest.mark.parametrize("seed", range(16))
def test_budget_counts_match_brute_force(seed):
    rng, T, K, curves, load, total = random_case(seed, 40.0)
    cost = elu_cost(load, curves, rng.choice([32.0, 96.0, 256.0], T))
    held = rng.integers(1, K + 1, T)
    release = float(rng.choice([0.0, 0.005, 0.02]))
    add = release * float(rng.choice([1.0, 2.0, 4.0]))
    n = budget_counts(cost, held, total, add, release)
    want = brute(cost, held, total, add, release)
    assert n.sum() <= total and n.min() >= 1
    assert objective(n, cost, held, add, release) == pytest.approx(want[0], abs=1e-12), (n.tolist(), want)
    assert n.sum() == sum(want[1])


def test_a_pmu_is_worth_the_elu_time_it_saves():
    # 10 Mpps, a miss of 200 B: 0.1 us of the ELU; the second PMU saves 0.1 of the lookups' misses
    cost = elu_cost(np.array([10.0]), np.array([[1.0, 0.3, 0.2]]), np.array([200.0]))
    assert cost[0, 1] - cost[0, 2] == pytest.approx(10.0 * 0.1 * 200.0 / ELU_BYTES_PER_US)


def test_a_flat_curve_releases_a_steep_one_keeps():
    # both tables hold 3 of a pool of 6, same load and bytes per miss
    flat = [1.0, 0.30, 0.299, 0.298]
    steep = [1.0, 0.60, 0.30, 0.05]
    cost = elu_cost(np.array([20.0, 20.0]), np.array([flat, steep]), np.array([100.0, 100.0]))
    assert budget_counts(cost, np.array([3, 3]), 6, add=0.02, release=0.01).tolist() == [1, 3]


def test_hysteresis_holds_between_the_budgets():
    # the second PMU saves 20 Mpps x 0.015 x 100 B / 2000 B/us = 0.015 of the ELU: between release 0.01 and add 0.02
    cost = elu_cost(np.array([20.0]), np.array([[1.0, 0.1, 0.085]]), np.array([100.0]))
    assert cost[0, 1] - cost[0, 2] == pytest.approx(0.015)
    assert budget_counts(cost, np.array([2]), 2, add=0.02, release=0.01).tolist() == [2]  # held: kept
    assert budget_counts(cost, np.array([1]), 2, add=0.02, release=0.01).tolist() == [1]  # not held: not added
    # outside the band the rule moves both ways
    assert budget_counts(cost, np.array([2]), 2, add=0.03, release=0.02).tolist() == [1]
    assert budget_counts(cost, np.array([1]), 2, add=0.01, release=0.005).tolist() == [2]


def test_a_cliff_is_taken_whole():
    # the working set fits three PMUs, not two: the second saves nothing, the third a lot
    cost = elu_cost(np.array([20.0]), np.array([[1.0, 0.2, 0.2, 0.0]]), np.array([100.0]))
    assert budget_counts(cost, np.array([1]), 3, add=0.05, release=0.02).tolist() == [3]


def test_bytes_per_miss_from_windows():
    w = {"table": [0, 0, 1, 2], "hbm_bytes": [960.0, 960.0, 0.0, 2560.0], "elu_requests": [10.0, 10.0, 0.0, 10.0]}
    assert countrule.bytes_per_miss(w, 3).tolist() == [96.0, 176.0, 256.0]  # table 1: none yet, the mean of the others
    assert countrule.bytes_per_miss(w, 3, np.array([1.0, 32.0, 1.0])).tolist() == [96.0, 32.0, 256.0]  # kept


def test_the_budget_loop_gives_back_at_most_max_release_a_period():
    curves = [[1.0, 0.3, 0.3, 0.3, 0.3]] * 3  # flat: every PMU beyond the first is worth nothing
    ctl = controller(curves, [4, 4, 4], 12, target=0.0)
    ctl.rule, ctl.bytes_per_miss, ctl.max_release, ctl.early = "budget", np.full(3, 100.0), 2, False
    ctl.add_budget, ctl.release_budget = 0.02, 0.01
    assert solve(ctl, [10.0, 10.0, 10.0]).sum() == 10
    ctl.sim.held = [4, 4, 4]
    ctl.early = True  # the first period's early decision: the caches are nearly empty, all go at once
    assert solve(ctl, [10.0, 10.0, 10.0]).tolist() == [1, 1, 1]
    ctl.early = False  # a table behind: nothing goes back
    assert solve(ctl, [10.0, 10.0, 10.0], processed=[5.0, 10.0, 10.0]).sum() == 12


def test_the_early_decision_leaves_the_even_split_in_the_first_period(tmp_path):
    """A short UPF run with warm joins: the loop decides at 20 us, from the
    live curves, and holds fewer PMUs over its first period than the even
    split's 16 that a loop without it holds."""
    from synapse_vmt.figures.simexp import Recording
    from synapse_vmt.figures.upf import BLOCK, MissAware
    from synapse_vmt.opt.controller import Settings
    from synapse_vmt.opt.mrcfeed import OnlineMrc
    from synapse_vmt.opt.usl import Usl
    from synapse_vmt.p4 import simrun

    pr = upf_run(tmp_path, flows=800, duration_ns=200_000.0)
    names, N = pr.routes.tables, 16
    first = []
    for early in (None, 20_000.0):
        sim = Recording(simrun.build_sim(pr, simrun.even_split(names, N), N, window_ns=10_000.0, seed=3,
                                         overrides={"vmu": {"join": "warm"}}))
        ctl = MissAware(sim, {n: Usl(0.0, 0.0, 0.0, 0.0) for n in names}, N, Settings(period_ns=100_000.0, window_ns=10_000.0))
        ctl.curves, ctl.feed, ctl.first_decision_ns = np.ones((len(names), N + 1)), OnlineMrc(sim, N, BLOCK), early
        hist = ctl.run(200_000.0)
        first.append(hist[0].active_pmus)
        if early:
            assert ctl.decisions[0]["t_ns"] == early and len(ctl.decisions) == 3
    assert first[0] == N and first[1] < N

"""The miss-volume model of ``reproduce upf`` (figures/upf.py): PMUs only
while the shared ELU would be over its target, online curve correction."""

from __future__ import annotations

import numpy as np

from synapse_vmt.figures.upf import MissAware, elu_capacity, greedy_misses


def curves_of(rows):
    return np.array([[1.0, *r] for r in rows])


def test_greedy_stops_once_the_elu_has_slack():
    # two tables, 10 Mpps each; table 0's misses fall with PMUs, table 1's do not
    c = curves_of([[0.5, 0.3, 0.2, 0.15], [0.2, 0.2, 0.2, 0.2]])
    load = np.array([10.0, 10.0])
    # without a target: every PMU that saves >= theta (table 0 only)
    assert greedy_misses(load, c, 8, theta_mpps=0.25).tolist() == [4, 1]
    # volume at (1, 1) = 5 + 2 = 7; at (2, 1) = 3 + 2 = 5 <= 6: stop there
    assert greedy_misses(load, c, 8, theta_mpps=0.25, elu_target_mpps=6.0).tolist() == [2, 1]
    # a target already met: the minimum
    assert greedy_misses(load, c, 8, theta_mpps=0.25, elu_target_mpps=7.0).tolist() == [1, 1]
    # never more than the pool
    assert greedy_misses(load, c, 3, theta_mpps=0.25, elu_target_mpps=0.0).sum() == 3


def test_over_target_pmus_explore_unmeasured_curves_only():
    c = curves_of([[0.2, 0.2, 0.2], [0.4, 0.4, 0.4]])  # flat: nothing promised
    load = np.array([10.0, 10.0])
    measured = np.zeros(c.shape, dtype=bool)
    # over target (6 > 1): the PMU goes to the largest miss volume per PMU, table 1
    assert greedy_misses(load, c, 3, theta_mpps=0.25, elu_target_mpps=1.0, measured=measured).tolist() == [1, 2]
    # once table 1 was measured flat at 2 PMUs, table 0 is explored instead
    measured[1, 2] = True
    assert greedy_misses(load, c, 3, theta_mpps=0.25, elu_target_mpps=1.0, measured=measured).tolist() == [2, 1]
    # both measured flat: no PMU is worth adding
    measured[0, 2] = True
    assert greedy_misses(load, c, 3, theta_mpps=0.25, elu_target_mpps=1.0, measured=measured).tolist() == [1, 1]


def test_curves_are_corrected_from_a_period_and_stay_monotone():
    ctl = MissAware.__new__(MissAware)  # only the curve state is exercised
    ctl.curves = curves_of([[0.5, 0.4, 0.3], [0.5, 0.4, 0.3]])
    ctl.measured, ctl.blend, ctl.min_lookups, ctl.warm = None, 0.5, 100, None
    # table 0 held 2 PMUs all period: 1000 lookups, 100 misses (0.1); table 1 changed PMUs mid-period
    w = {"table": np.array([0, 0, 1, 1]), "pmus": np.array([2, 2, 1, 2]), "hits": np.array([450, 450, 500, 500]),
         "misses": np.array([50, 50, 20, 20])}
    # the first period (cold caches: no period before it at that count) teaches nothing
    ctl.correct_curves(w)
    assert np.allclose(ctl.curves, curves_of([[0.5, 0.4, 0.3], [0.5, 0.4, 0.3]])) and ctl.measured is None
    ctl.correct_curves(w)
    assert np.allclose(ctl.curves[0], [1.0, 0.5, 0.25, 0.25])  # 0.5 x 0.4 + 0.5 x 0.1; 3 PMUs no worse than 2
    assert np.allclose(ctl.curves[1], [1.0, 0.5, 0.4, 0.3])  # untouched
    assert ctl.measured[0, 2] and not ctl.measured[1].any()
    # too few lookups: no correction
    ctl.correct_curves({k: v[:1] // (10 if k in ("hits", "misses") else 1) for k, v in w.items()})
    assert np.allclose(ctl.curves[0], [1.0, 0.5, 0.25, 0.25])


def test_elu_capacity_is_a_high_quantile_of_the_calibration_rates():
    rates = list(np.linspace(0.0, 20.0, 101))
    assert abs(elu_capacity(rates) - 19.0) < 1e-9
    assert elu_capacity([]) == float("inf")

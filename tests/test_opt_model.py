"""Counters -> routing matrix and samples; the USL capacity model and its fit."""

from __future__ import annotations

import numpy as np
import pytest

from synapse_vmt.errors import UserError
from synapse_vmt.opt.counters import estimate, routing_matrix, usl_samples, window_length_ns
from synapse_vmt.opt.usl import Usl, fit


def walk_counters(P, entry, arrivals, rng, window_ns=10_000.0):
    """A stand-in for the data plane: PHVs walk the DAG (tables in topological
    order) window by window; returns docs/simulator-api.md-shaped window and edge columns."""
    T = len(entry)
    wins = {k: [] for k in ("t_ns", "table", "arrived", "processed", "pmus")}
    eds = {k: [] for k in ("t_ns", "src", "dst", "count")}
    for w, a in enumerate(arrivals):
        t = (w + 1) * window_ns
        at = rng.multinomial(a, [*entry, 1 - sum(entry)])[:T].astype(float)
        for i in range(T):
            out = rng.multinomial(int(at[i]), [*P[i], max(0.0, 1 - P[i].sum())])
            for j in range(T):
                if out[j]:
                    eds["t_ns"].append(t), eds["src"].append(i), eds["dst"].append(j), eds["count"].append(out[j])
                    at[j] += out[j]
            if out[T]:
                eds["t_ns"].append(t), eds["src"].append(i), eds["dst"].append(-1), eds["count"].append(out[T])
            wins["t_ns"].append(t), wins["table"].append(i), wins["arrived"].append(at[i])
            wins["processed"].append(at[i]), wins["pmus"].append(2)
    return {k: np.array(v) for k, v in wins.items()}, {k: np.array(v) for k, v in eds.items()}


def test_routing_matrix_from_edge_counts():
    edges = {
        "t_ns": np.array([1.0, 1.0, 1.0, 2.0]),
        "src": np.array([0, 0, 1, 0]),
        "dst": np.array([1, -1, -1, 2]),
        "count": np.array([30, 10, 5, 60]),
    }
    P, left = routing_matrix(edges, 3, prior=np.full((3, 3), 0.25))
    np.testing.assert_allclose(P[0], [0, 0.3, 0.6])
    np.testing.assert_allclose(P[1], [0, 0, 0])  # all of table 1's PHVs left the pipeline
    np.testing.assert_allclose(P[2], [0.25, 0.25, 0.25])  # nothing left table 2: keeps the prior
    np.testing.assert_allclose(left, [100, 5, 0])
    with pytest.raises(ValueError):
        routing_matrix({**edges, "dst": np.array([1, -1, 7, 2])}, 3)


def test_estimate_recovers_routing_entry_and_rates():
    rng = np.random.default_rng(7)
    P = np.array([[0, 0.5, 0.3, 0], [0, 0, 0.2, 0.7], [0, 0, 0, 0.9], [0, 0, 0, 0]])
    entry = np.array([0.6, 0.3, 0.0, 0.1])
    arrivals = [2000] * 50  # PHVs per 10 µs window = 200 Mpps
    wins, eds = walk_counters(P, entry, arrivals, rng)
    assert window_length_ns(wins) == 10_000.0
    tr = estimate(wins, eds, 4, 10_000.0)
    np.testing.assert_allclose(tr.P, P, atol=0.02)
    np.testing.assert_allclose(tr.entry, entry / entry.sum(), atol=0.02)
    assert tr.input_mpps == pytest.approx(200.0 * entry.sum(), rel=0.02)
    v = np.linalg.solve(np.eye(4) - P.T, entry)  # expected visits per arriving PHV
    np.testing.assert_allclose(tr.offered_mpps, 200.0 * v, rtol=0.03)


def test_usl_samples_skip_idle_windows():
    wins = {
        "t_ns": np.array([10.0, 10.0, 20.0, 20.0]),
        "table": np.array([0, 1, 0, 1]),
        "arrived": np.array([50, 0, 100, 20]),
        "processed": np.array([40, 0, 90, 20]),
        "pmus": np.array([3, 1, 4, 1]),
    }
    s = usl_samples(wins, 10.0, 2)
    np.testing.assert_allclose(s[0].load_mpps, [5000, 10000])
    np.testing.assert_allclose(s[0].throughput_mpps, [4000, 9000])
    assert list(s[0].pmus) == [3, 4] and len(s[1]) == 1


PARAMS = [
    Usl(0.0, 0.01, 0.0, 1e-5),
    Usl(-0.001, 0.008, -2e-6, 1.2e-5),
    Usl(0.0, 0.05, 0.0, 0.0),  # no retrograde term: ceiling 1/σ
    Usl(0.0, 0.3, 0.0, 0.01, unit_mpps=10.0),
]


@pytest.mark.parametrize("u", PARAMS)
def test_closed_form_peak_matches_a_grid_search(u):
    for n in (1, 3, 5):
        lam_star, cap = u.peak(n)
        grid = np.linspace(0.01, 50 * min(float(lam_star), 1e4) if np.isfinite(lam_star) else 1e6, 400_001)
        x = u.throughput(grid, n)
        assert cap == pytest.approx(x.max(), rel=1e-6 if np.isfinite(lam_star) else 1e-4)  # else: an asymptote
        if np.isfinite(lam_star):
            assert lam_star == pytest.approx(grid[x.argmax()], rel=1e-3)


def test_unsaturating_curve_has_huge_capacity():
    assert Usl(0, 0, 0, 0).capacity(3) >= 1e12


def test_fit_recovers_parameters_from_noiseless_samples():
    true = Usl(-0.001, 0.008, -2e-6, 1.2e-5)
    lam = np.tile(np.linspace(5, 800, 60), 3)
    n = np.repeat([3, 4, 5], 60)
    f = fit(lam, true.throughput(lam, n), n)
    assert f.r2 > 0.999999 and f.rmse_mpps < 1e-3 and f.pmu_counts == (3, 4, 5)
    np.testing.assert_allclose(f.usl.capacity([3, 4, 5]), true.capacity([3, 4, 5]), rtol=1e-4)


def test_fit_with_noise_keeps_capacity_close():
    rng = np.random.default_rng(11)
    true = Usl(-0.0015, 0.01, -1e-6, 8e-6)
    lam = rng.uniform(1, 600, 900)
    n = rng.integers(3, 6, 900)
    x = true.throughput(lam, n) * (1 + 0.03 * rng.standard_normal(900))
    f = fit(lam, x, n)
    assert f.r2 > 0.95
    np.testing.assert_allclose(f.usl.capacity([3, 4, 5]), true.capacity([3, 4, 5]), rtol=0.05)


def test_fit_with_one_pmu_count_has_flat_lines():
    true = Usl(0.0, 0.01, 0.0, 2e-5)
    lam = np.linspace(1, 500, 50)
    f = fit(lam, true.throughput(lam, 4), np.full(50, 4))
    assert f.usl.a_sigma == 0 and f.usl.a_kappa == 0
    assert f.usl.capacity(4) == pytest.approx(true.capacity(4), rel=1e-4)


@pytest.mark.parametrize(
    "d,ok",
    [
        ({"a_sigma": 0, "b_sigma": 0.01, "a_kappa": 0, "b_kappa": 1e-5}, True),
        ({"a_sigma": 0, "b_sigma": 0.01, "a_kappa": 0, "b_kappa": 1e-5, "unit_mpps": 2}, True),
        ({"a_sigma": 0, "b_sigma": 0.01, "a_kappa": 0}, False),
        ({"a_sigma": 0, "b_sigma": 0.01, "a_kappa": 0, "b_kappa": 1e-5, "gamma": 1}, False),
        ({"a_sigma": "x", "b_sigma": 0.01, "a_kappa": 0, "b_kappa": 1e-5}, False),
        ({"a_sigma": 0, "b_sigma": 0.01, "a_kappa": 0, "b_kappa": 1e-5, "unit_mpps": 0}, False),
    ],
)
def test_usl_from_json(d, ok):
    if ok:
        assert Usl.from_json(d).b_sigma == 0.01
    else:
        with pytest.raises(UserError):
            Usl.from_json(d)

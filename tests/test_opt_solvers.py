"""The two allocation solvers agree with each other and with brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from synapse_vmt.opt import fast, milp
from synapse_vmt.opt.problem import Infeasible, Problem, evaluate
from synapse_vmt.opt.usl import Usl


def random_problem(rng, T, N, min_pmus=1, offered=None, monotone=True):
    """A random DAG (tables in topological order), random P and entry shares,
    random USL curves (or arbitrary capacity tables when not monotone)."""
    P = np.zeros((T, T))
    for i in range(T - 1):
        k = int(rng.integers(0, min(3, T - 1 - i) + 1))
        dst = rng.choice(np.arange(i + 1, T), size=k, replace=False)
        P[i, dst] = rng.dirichlet(np.ones(k + 1))[:k]
    entry = rng.dirichlet(np.ones(T)) * (rng.random(T) < 0.6)
    entry[0] += 0.1
    entry /= entry.sum()
    if monotone:
        caps = []
        for _ in range(T):
            u = Usl(-rng.uniform(0, 0.002), rng.uniform(0.005, 0.02), -rng.uniform(0, 2e-6), rng.uniform(1e-6, 2e-5))
            caps.append(u.capacity(np.arange(N + 1)))
        cap = np.array(caps)
    else:
        cap = rng.uniform(10, 200, (T, N + 1))
    return Problem([f"t{j}" for j in range(T)], entry, P, cap, N, min_pmus, offered)


def brute_force(p: Problem):
    """Every allocation with Σn ≤ N: best F, then fewest PMUs."""
    act = np.flatnonzero(p.active)
    best = (-1.0, 0)
    for combo in itertools.product(range(p.min_pmus, p.pmus + 1), repeat=len(act)):
        if sum(combo) > p.pmus:
            continue
        n = np.zeros(len(p.names), dtype=np.int64)
        n[act] = combo
        F = evaluate(p, n)
        if F > best[0] * (1 + 1e-12) or (F >= best[0] * (1 - 1e-12) and sum(combo) < best[1]):
            best = (F, sum(combo))
    return best


def check_answer(p, a):
    assert a.used <= p.pmus
    act = p.active
    assert (a.pmus[act] >= p.min_pmus).all() and (a.pmus[~act] == 0).all()
    # The claimed throughput is carried: every table within its capacity.
    assert evaluate(p, a.pmus) >= a.throughput_mpps * (1 - 1e-7)


@pytest.mark.parametrize("seed", range(40))
def test_fast_and_milp_agree_on_random_cfgs(seed):
    rng = np.random.default_rng(seed)
    T = int(rng.integers(2, 13))
    N = int(rng.integers(T, 4 * T + 8))
    offered = float(rng.uniform(20, 400)) if seed % 3 == 0 else None
    p = random_problem(rng, T, N, min_pmus=int(seed % 2), offered=offered, monotone=seed % 5 != 4)
    a = fast.solve(p)
    check_answer(p, a)
    for b in (milp.solve(p), milp.solve(p, formulation="incremental")):
        check_answer(p, b)
        assert a.throughput_mpps == pytest.approx(b.throughput_mpps, rel=1e-6), b.solver
        assert a.used == b.used, b.solver


@pytest.mark.parametrize("seed", range(25))
def test_solvers_match_brute_force_on_tiny_cases(seed):
    rng = np.random.default_rng(1000 + seed)
    T = int(rng.integers(1, 4))
    N = int(rng.integers(T, 7))
    offered = float(rng.uniform(20, 300)) if seed % 2 else None
    p = random_problem(rng, T, N, min_pmus=int(seed % 3 == 0), offered=offered, monotone=seed % 4 != 0)
    F, used = brute_force(p)
    for a in (fast.solve(p), milp.solve(p), milp.solve(p, formulation="incremental")):
        assert a.throughput_mpps == pytest.approx(F, rel=1e-7), a.solver
        assert a.used == used, a.solver


def test_offered_load_cap_releases_pmus():
    rng = np.random.default_rng(5)
    p = random_problem(rng, 6, 30)
    full = fast.solve(p)
    capped = fast.solve(Problem(p.names, p.entry, p.P, p.capacity, p.pmus, 1, full.throughput_mpps / 3))
    assert capped.throughput_mpps == pytest.approx(full.throughput_mpps / 3)
    assert capped.used < full.used


def test_a_chain_balances_the_bottleneck():
    # t0 -> t1 (all), identical linear capacities 10 n: with 6 PMUs, 3 each carries 30.
    cap = np.tile(10.0 * np.arange(7), (2, 1))
    p = Problem(["a", "b"], [1.0, 0.0], [[0, 1.0], [0, 0]], cap, 6)
    for a in (fast.solve(p), milp.solve(p)):
        assert list(a.pmus) == [3, 3] and a.throughput_mpps == pytest.approx(30.0)
        assert a.bottlenecks == ["a", "b"]


def test_half_the_traffic_needs_half_the_capacity():
    # t0 sends half its PHVs to t1: v = (1, 0.5); with 6 PMUs the best split is 4/2 (40 Mpps).
    cap = np.tile(10.0 * np.arange(7), (2, 1))
    p = Problem(["a", "b"], [1.0, 0.0], [[0, 0.5], [0, 0]], cap, 6)
    for a in (fast.solve(p), milp.solve(p)):
        assert list(a.pmus) == [4, 2] and a.throughput_mpps == pytest.approx(40.0)


def test_unreached_tables_get_no_pmus():
    cap = np.tile(10.0 * np.arange(5), (3, 1))
    p = Problem(["a", "b", "c"], [1.0, 0, 0], np.zeros((3, 3)), cap, 4)
    for a in (fast.solve(p), milp.solve(p)):
        assert list(a.pmus) == [4, 0, 0]


@pytest.mark.parametrize("solver", [fast.solve, milp.solve])
def test_too_few_pmus_is_infeasible(solver):
    cap = np.tile(10.0 * np.arange(3), (3, 1))
    p = Problem(["a", "b", "c"], [0.4, 0.3, 0.3], np.zeros((3, 3)), cap, 2)
    with pytest.raises(Infeasible):
        solver(p)


@pytest.mark.parametrize(
    "kw,msg",
    [
        ({"P": [[0, 0.7], [0, 0]], "entry": [1.0, 0], "capacity": np.ones((2, 3))}, "capacity must be"),
        ({"P": [[0, 1.2], [0, 0]], "entry": [1.0, 0], "capacity": np.ones((2, 4))}, "rows summing"),
        ({"P": [[0, 1.0], [1.0, 0]], "entry": [1.0, 0], "capacity": np.ones((2, 4))}, "loop"),
    ],
)
def test_bad_problems(kw, msg):
    with pytest.raises(ValueError, match=msg):
        p = Problem(["a", "b"], pmus=3, **kw)
        p.visits


def _cli(*args):
    from click.testing import CliRunner

    from synapse_vmt.cli import main

    r = CliRunner().invoke(main, list(args))
    r.returncode = r.exit_code
    return r


CFG = {
    "format": "synapse-cfg",
    "version": 1,
    "tables": [{"name": "a"}, {"name": "b"}],
    "entry": {"a": 1.0},
    "edges": [{"src": "a", "dst": "b", "p": 0.5}],
}


@pytest.mark.parametrize(
    "doc,expect",
    [
        ({"cfg": CFG, "pmus": 6, "capacity": {"default": {"mpps": [0, 10, 20, 30, 40, 50, 60]}}}, (40.0, [4, 2])),
        ({"cfg": CFG, "pmus": 6, "offered_mpps": 15, "capacity": {"default": {"mpps": [0, 10, 20, 30, 40, 50, 60]}}}, (15.0, [2, 1])),
        (
            {"cfg": CFG, "pmus": 6, "capacity": {"a": {"mpps": [0, 10]}, "b": {"usl": {"a_sigma": 0, "b_sigma": 0.01, "a_kappa": 0, "b_kappa": 0}}}},
            (10.0, [1, 1]),
        ),
        ({"cfg": CFG, "pmus": 6, "capacity": {"c": {"mpps": [1]}}}, "found 'c'"),
        ({"cfg": CFG, "pmus": 6, "capacity": {"a": {"mpps": [1]}}}, "capacity['b']"),
        ({"cfg": CFG, "pmus": -1, "capacity": {}}, "pmus"),
        ({"cfg": CFG, "pmus": 1, "capacity": {"default": {"mpps": [1, 2]}}}, "only 1 exist"),
        ({"cfg": CFG, "pmus": 3, "budget": 2, "capacity": {}}, "unknown ['budget']"),
        ({"cfg": "missing.json", "pmus": 3, "capacity": {}}, "no such file"),
    ],
)
def test_opt_solve_cli(tmp_path, doc, expect):
    import json

    path = tmp_path / "problem.json"
    path.write_text(json.dumps(doc))
    r = _cli("opt", "solve", str(path), "--solver", "both", "--json")
    if isinstance(expect, str):
        assert r.returncode == 2 and expect in r.stderr and r.stderr.count("\n") == 1, r.stderr
        return
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    F, pmus = expect
    for s in ("fast", "milp"):
        assert out[s]["throughput_mpps"] == pytest.approx(F)
        assert [out[s]["tables"][t]["pmus"] for t in ("a", "b")] == pmus

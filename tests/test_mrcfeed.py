"""The closed loop's online miss-ratio curves (opt/mrcfeed.py) and the
allocation it makes from them (figures/upf.py, ``optimal_misses``)."""

from __future__ import annotations

import itertools
import tomllib

import numpy as np
import pytest

from synapse_vmt import _core
from synapse_vmt.figures.upf import BLOCK, MissAware, greedy_misses, optimal_misses
from synapse_vmt.mrc import Sampling
from synapse_vmt.opt.mrcfeed import OnlineMrc
from synapse_vmt.p4 import gentraffic, simrun, upf


def upf_run(tmp_path, flows=1500, duration_ns=400_000.0, seed=3):
    """UP4 with coherent entries and the shifting mix of ``reproduce upf``, short."""
    entries = tmp_path / "entries.txt"
    entries.write_text("\n".join(upf.entries_cli(1000, seed)) + "\n")
    doc = tomllib.loads(upf.scenario(flows=flows, duration_ns=duration_ns, pmus=16))
    traffic = gentraffic.parse_spec(doc["traffic"], "upf: [traffic]")
    program = simrun.resolve_program("builtin:up4")
    return simrun.prepare(program, str(entries), traffic=traffic, duration_ns=duration_ns, seed=seed)


def one_pass(sim, pr, N, sampling: Sampling) -> np.ndarray:
    """Miss ratios at 1..N PMUs of the whole stream pushed in one batch
    (the offline `synapse mrc` path), shape (T, N)."""
    m = _core.mrc_routed(sim.core, list(range(1, N + 1)), [BLOCK], sampling.kind, sampling.value, True)
    t, r = pr.feeder_factory()(int(pr.duration_ns * 1000) + 1)
    _core.mrc_push(m, sim.core, np.ascontiguousarray(t, dtype=np.uint64), np.ascontiguousarray(r, dtype=np.uint32))
    rows, names = m.rows(), list(sim.table_names())
    out = np.zeros((len(names), N))
    for name, p, h in zip(rows["table"], rows["pmus"], rows["hit_rate"]):
        out[names.index(name), int(p) - 1] = 1.0 - h
    return out


def test_online_curves_follow_the_simulators_own_batches_and_sampling_stays_close(tmp_path):
    """The curves fed by the simulator's own arrival batches, period by
    period, equal the one-pass exact curve of the same stream (batches only
    split it); the fixed-size sample (at most 256 keys a table, so the
    per-flow tables are sampled) is within 0.02 of it at every PMU count of
    every table with references (measured: at most 0.008)."""
    pr = upf_run(tmp_path)
    N = 16
    sim = simrun.build_sim(pr, simrun.even_split(pr.routes.tables, N), N)
    exact = OnlineMrc(sim, N, BLOCK, Sampling("exact"))
    sampled = OnlineMrc(sim, N, BLOCK, Sampling("size", 256))
    t = 0.0
    while t < pr.duration_ns:
        t = min(pr.duration_ns, t + 50_000.0)
        sim.run_until(t)
        exact.miss_curves()  # reads in between change nothing
    ref = one_pass(sim, pr, N, Sampling("exact"))
    got = exact.miss_curves()
    refs = np.array([exact.stats()[n]["refs"] for n in exact.names])
    assert (refs > 0).sum() >= 5
    assert np.allclose(got[:, 0], 1.0)
    assert np.allclose(got[refs > 0, 1:], ref[refs > 0], atol=1e-9)
    # the ACL's curve falls with PMUs (its calibrated curve came out flat with seed 1)
    acl = exact.names.index("PreQosPipe.Acl.acls")
    assert got[acl, 1] > got[acl, 4] + 0.02, got[acl, :6]
    st = sampled.stats()
    assert min(v["rate"] for v in st.values()) < 0.5  # some table was sampled, not tracked whole
    err = np.abs(sampled.miss_curves()[refs > 0, 1:] - ref[refs > 0])
    assert err.max() <= 0.02, err.max()


def test_a_routed_simulator_is_needed():
    with pytest.raises(TypeError, match="routed"):
        OnlineMrc(object(), 4, 256)


def brute_min(value, T, K, total, min_pmus=1):
    """Every allocation of ``min_pmus..K`` PMUs to each of ``T`` tables, at
    most ``total`` in all: the least ``value(n)`` and its ``n`` (on a tie the
    fewest PMUs)."""
    best = None
    for n in itertools.product(range(min_pmus, K + 1), repeat=T):
        if sum(n) > total:
            continue
        v = value(np.array(n))
        if best is None or v < best[0] - 1e-12 or (abs(v - best[0]) <= 1e-12 and sum(n) < sum(best[1])):
            best = (v, n)
    return best


def brute(load, curves, total, min_pmus, theta):
    """The least miss volume + theta x PMUs over every allocation."""
    T, K = curves.shape[0], curves.shape[1] - 1
    return brute_min(lambda n: float(np.sum(load * curves[np.arange(T), n])) + theta * n.sum(), T, K, total, min_pmus)


def random_curves(rng, T, K):
    """Non-increasing miss curves with cliffs (a working set that fits k PMUs but not k - 1)."""
    out = np.ones((T, K + 1))
    for j in range(T):
        drops = rng.random(K) * (rng.random(K) < 0.5)
        c = 1.0 - np.cumsum(drops) / max(1.0, drops.sum() * 1.05)
        out[j, 1:] = c
    return out


def random_case(seed, max_load):
    """A seeded case for the brute-force tests: the generator, tables, the
    most PMUs a table, curves, per-table loads and the pool."""
    rng = np.random.default_rng(seed)
    T, K = 3 + seed % 2, 5
    curves = random_curves(rng, T, K)
    load = rng.uniform(0.5, max_load, T)
    return rng, T, K, curves, load, int(rng.integers(T, T * K + 1))


@pytest.mark.parametrize("seed", range(12))
def test_optimal_allocation_matches_brute_force(seed):
    rng, T, K, curves, load, total = random_case(seed, 20.0)
    theta = float(rng.choice([0.0, 0.3, 1.0]))
    n = optimal_misses(load, curves, total, 1, theta)
    v = float(np.sum(load * curves[np.arange(T), n])) + theta * n.sum()
    want = brute(load, curves, total, 1, theta)
    assert n.sum() <= total and n.min() >= 1
    assert v == pytest.approx(want[0], abs=1e-9), (n, want)


def test_greedy_misses_a_cliff_the_optimum_takes():
    # table 0's working set fits two PMUs, not one: its first extra PMU saves nothing, its second all
    c = np.array([[1.0, 0.8, 0.8, 0.0], [1.0, 0.5, 0.45, 0.4]])
    load = np.array([10.0, 10.0])
    assert optimal_misses(load, c, 4, 1, 0.1).tolist() == [3, 1]
    assert greedy_misses(load, c, 4, 1, 0.1).tolist() == [1, 3]


class Feed:
    def __init__(self, curves):
        self.curves = np.asarray(curves, dtype=float)

    def miss_curves(self):
        return self.curves.copy()


@pytest.mark.parametrize("seed", range(6))
def test_the_mrc_fed_controller_picks_the_brute_force_allocation(seed):
    """MissAware with a feed of known curves, from one PMU per table and the
    rest of the pool free: its target is the brute-force optimum (no table
    behind, flat load: nothing else shapes it)."""
    from test_upf_controller import controller, solve

    rng = np.random.default_rng(100 + seed)
    T, K = 3, 5
    curves = random_curves(rng, T, K)
    ctl = controller(curves, [1] * T, total=9, target=0.0)
    ctl.feed, ctl.theta_mpps = Feed(curves), 0.5
    load = rng.uniform(1.0, 20.0, T)
    n = solve(ctl, load)
    want = brute(load, curves, 9, 1, 0.5)
    got = float(np.sum(load * curves[np.arange(T), n])) + 0.5 * n.sum()
    assert got == pytest.approx(want[0], abs=1e-9), (n.tolist(), want)
    assert isinstance(ctl, MissAware) and ctl.measured.all()


@pytest.mark.parametrize("bad", ["rate:2", "size:0", "shards"])
def test_a_bad_sampling_is_one_line_and_status_2(tmp_path, bad):
    from click.testing import CliRunner

    from synapse_vmt.cli import main

    r = CliRunner().invoke(main, ["reproduce", "upf", "--quick", "--curves", "mrc", "--mrc-sampling", bad, "-o", str(tmp_path)])
    assert r.exit_code == 2 and "--mrc-sampling " + bad in r.output and "Traceback" not in r.output, r.output
    assert not (tmp_path / "summary.json").exists()

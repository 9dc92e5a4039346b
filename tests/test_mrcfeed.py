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


def test_online_curves_shard_each_count_over_the_pmus_the_table_would_hold(tmp_path):
    """``follow`` shards every count over the ids the placement would give
    (the held count over exactly the ids the simulator holds, after a
    re-placement too), and the re-sharded exact curve equals a fresh exact
    curve that held those ids from the start, once the old window is
    gone: the point at the held count is the one of the table's own PMUs."""
    from synapse_vmt.opt import placement

    pr = upf_run(tmp_path, flows=800, duration_ns=200_000.0)
    N, names = 16, pr.routes.tables
    sim = simrun.build_sim(pr, simrun.even_split(names, N), N)
    feed = OnlineMrc(sim, N, BLOCK, Sampling("exact"))
    sim.run_until(100_000.0)
    acl = "PreQosPipe.Acl.acls"
    held = placement.current_sets(sim.pmu_states(), names)
    assert feed.follow(sim.pmu_states()) > 0
    for n in names:
        assert feed.pmu_sets()[n] == placement.candidate_sets(sim.pmu_states(), n, N)
        assert feed.pmu_sets()[n][len(held[n]) - 1] == held[n]
    assert feed.follow(sim.pmu_states()) == 0  # nothing moved: nothing re-sharded
    # the ACL takes one PMU of another table's
    other = next(n for n in names if n != acl and len(held[n]) >= 2)
    target = {n: len(v) for n, v in held.items()} | {acl: len(held[acl]) + 1, other: len(held[other]) - 1}
    for n, ids in sorted(placement.plan(sim.pmu_states(), target).items(), key=lambda kv: len(kv[1]) - len(held[kv[0]])):
        sim.assign(n, ids)
    sim.run_until(150_000.0)  # the moved PMU drains, then joins
    feed.follow(sim.pmu_states())
    now = placement.current_sets(sim.pmu_states(), names)
    assert len(now[acl]) == len(held[acl]) + 1 and feed.pmu_sets()[acl][len(now[acl]) - 1] == now[acl]
    # an exact curve re-sharded with no carry equals one sharded so from the
    # start over the references after: check through the core directly
    m_old = _core.mrc_routed(sim.core, [1, 2, 3], [BLOCK], "exact", 0.0, False)
    t, r = pr.feeder_factory()(int(pr.duration_ns * 1000) + 1)
    half = len(t) // 2
    push = lambda m, a, b: _core.mrc_push(m, sim.core, np.ascontiguousarray(t[a:b], dtype=np.uint64),  # noqa: E731
                                          np.ascontiguousarray(r[a:b], dtype=np.uint32))
    push(m_old, 0, half)
    ids = {p: feed.pmu_sets()[acl][p - 1] for p in (1, 2, 3)}
    # one PMU: every ring sends all keys to it, nothing to re-shard
    changed = {p: m_old.set_pmus(acl, p, ids[p], 0.0) for p in (1, 2, 3)}
    assert changed == {1: False, 2: True, 3: True}
    push(m_old, half, len(t))
    m_new = _core.mrc_routed(sim.core, [1, 2, 3], [BLOCK], "exact", 0.0, False)
    for p in (1, 2, 3):
        m_new.set_pmus(acl, p, ids[p], 0.0)
    push(m_new, 0, half)
    before = {int(p): h for tb, p, h in zip(*(m_new.rows()[k] for k in ("table", "pmus", "hit_rate"))) if tb == acl}
    n_half = m_new.stats()[acl]["refs"]
    push(m_new, half, len(t))
    after = {int(p): h for tb, p, h in zip(*(m_new.rows()[k] for k in ("table", "pmus", "hit_rate"))) if tb == acl}
    n_all = m_new.stats()[acl]["refs"]
    got = {int(p): h for tb, p, h in zip(*(m_old.rows()[k] for k in ("table", "pmus", "hit_rate"))) if tb == acl}
    for p in (1, 2, 3):
        # re-sharded: hits after the half, over the references after it
        want = (after[p] * n_all - before[p] * n_half) / (n_all - n_half) if changed[p] else after[p]
        assert got[p] == pytest.approx(want, abs=1e-9), (p, got, want)


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
    """Known curves in place of OnlineMrc; records what it was told to follow."""

    def __init__(self, curves):
        self.curves = np.asarray(curves, dtype=float)
        self.followed = []

    def follow(self, states):
        self.followed.append(states)
        return 0

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
    # the curves were sharded over the simulator's PMUs as they are, before they were read
    assert ctl.feed.followed == [ctl.sim.pmu_states()]


@pytest.mark.parametrize("bad", ["rate:2", "size:0", "shards"])
def test_a_bad_sampling_is_one_line_and_status_2(tmp_path, bad):
    from click.testing import CliRunner

    from synapse_vmt.cli import main

    r = CliRunner().invoke(main, ["reproduce", "upf", "--quick", "--curves", "mrc", "--mrc-sampling", bad, "-o", str(tmp_path)])
    assert r.exit_code == 2 and "--mrc-sampling " + bad in r.output and "Traceback" not in r.output, r.output
    assert not (tmp_path / "summary.json").exists()

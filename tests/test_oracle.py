"""The static oracle (opt/oracle.py): the true offered load against the
simulator's own arrivals, the HiGHS split against brute force, and the
search on stand-in simulators whose answer is known."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from synapse_vmt.opt import oracle, placement


def brute_force(load: np.ndarray, total: int, cap: float) -> tuple[int, float] | None:
    """Fewest PMUs whose summed load stays within cap in every period, and its least peak (None: no split does)."""
    K, P, T = load.shape
    best = None
    for ks in itertools.product(range(K), repeat=T):
        n = sum(k + 1 for k in ks)
        if n > total:
            continue
        peak = float(max(sum(load[k, p, j] for j, k in enumerate(ks)) for p in range(P)))
        if peak <= cap and (best is None or (n, peak) < best):
            best = (n, peak)
    return best


@pytest.mark.parametrize("seed", range(12))
def test_cheapest_split_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    K, P, T = 4, 5, 3
    # per table and period, a load falling with the PMU count
    load = np.sort(rng.uniform(0.0, 10.0, (K, P, T)), axis=0)[::-1].copy()
    total = int(rng.integers(T, K * T + 1))
    cap = float(rng.uniform(5.0, 25.0))
    n, met = oracle.cheapest_split(load, total, cap)
    want = brute_force(load, total, cap)
    peak = float(load[n - 1, :, np.arange(T)].sum(axis=0).max())
    assert n.sum() <= total and (n >= 1).all()
    if want is None:
        assert not met
        # then: the least peak load of any split of the pool
        least = min(float(load[list(ks), :, range(T)].sum(axis=0).max())
                    for ks in itertools.product(range(K), repeat=T) if sum(k + 1 for k in ks) <= total)
        assert peak == pytest.approx(least)
    else:
        assert met and (int(n.sum()), peak) == pytest.approx(want)


def stub_run(counts, offered: np.ndarray, elu_load: np.ndarray, cap: float) -> oracle.Run:
    """A stand-in for a simulated static run: table j at count k misses
    ``elu_load[k - 1, p, j] / offered[p, j]`` of its lookups in period p, and
    a period whose ELU load (summed over tables) exceeds ``cap`` drops."""
    T = len(counts)
    P = elu_load.shape[1]
    per = elu_load[np.asarray(counts) - 1, :, np.arange(T)].T  # (P, T)
    over = per.sum(axis=1) > cap
    lookups = np.full((P, T), 1000.0)
    drops = np.zeros((P, T))
    drops[over, 0] = 10.0
    return oracle.Run(np.asarray(counts), lookups, lookups * per / offered, lookups, lookups, drops,
                      np.full(P, 1000.0), 1e5, created=1000 * P)


def test_search_on_a_single_table_takes_the_fewest_pmus_that_keep_up():
    calls = []

    def simulate(counts, pool):
        calls.append(int(counts[0]))
        k = int(counts[0])
        drops = np.zeros((4, 1))
        if k < 3 or k == 5:  # not monotone: 5 drops, 3 and 4 do not
            drops[2, 0] = 1.0
        one = np.ones((4, 1))
        return oracle.Run(counts, one, 0 * one, one, one, drops, np.full(4, 10.0), 1e5, created=40)

    o = oracle.search(["t"], 6, np.ones((4, 1)), simulate)
    assert o.counts == {"t": 3} and o.carries_peak
    assert sorted(calls) == [1, 2, 3, 4, 5, 6]  # every static count of the pool was run


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("margin", [1.15, 1.0001])  # 1.0001: only the best splits of the pool carry it
def test_search_finds_the_cheapest_split_a_stand_in_elu_carries(seed, margin):
    """Three tables behind one stand-in ELU: the search (sweep, split,
    simulate, descend) ends at the fewest PMUs any split needs."""
    rng = np.random.default_rng(seed)
    P, T, N = 6, 3, 9
    K = N - T + 1  # the most PMUs one table can hold
    offered = rng.uniform(5.0, 20.0, (P, T))
    ratio = np.sort(rng.uniform(0.05, 0.6, (K, 1, T)), axis=0)[::-1]  # miss ratio per count
    load = offered[None] * ratio  # (K, P, T)
    least = min(float(load[list(ks), :, range(T)].sum(axis=0).max())
                for ks in itertools.product(range(K), repeat=T) if sum(k + 1 for k in ks) <= N)
    cap = margin * least  # some splits of the pool carry it, the cheap ones do not
    ran = []

    def simulate(counts, pool):
        ran.append(tuple(int(c) for c in counts))
        return stub_run(counts, offered, load, cap)

    o = oracle.search(["a", "b", "c"], N, offered, simulate, descent=T)
    want = brute_force(load, N, cap)
    assert want is not None and o.carries_peak
    got = np.array([o.counts[n] for n in "abc"])
    assert int(got.sum()) == want[0]
    assert not stub_run(got, offered, load, cap).behind.any()
    assert ran[:K] == [(k, k, k) for k in range(1, K + 1)]  # the sweep came first


def test_true_offered_load_is_what_the_simulator_receives():
    """fig8's true offered load (the traffic generator's arrivals per period)
    against the exact simulator's own arrivals, period by period."""
    from synapse_vmt.figures.fig8 import traffic_offered
    from synapse_vmt.figures.simexp import Setup, core_factory

    setup, period, dur = Setup(), 100_000.0, 600_000.0
    cfg = setup.config(list(range(8)), 3000, dur, "burst")
    off = traffic_offered(cfg, period)
    r = oracle.run_static(core_factory(cfg), 1, period, dur, [8])
    want = np.round(off[:, 0] * period / 1e3)
    assert r.arrived[:, 0].sum() == want.sum() > 1000
    # the simulator takes an arrival at its next clock edge: one landing within a cycle of a
    # period's end counts in the next period
    assert np.abs(np.cumsum(r.arrived[:, 0]) - np.cumsum(want)).max() <= 2


def test_upf_true_offered_load_counts_every_table_a_route_visits():
    from synapse_vmt.figures import upf as U
    from synapse_vmt.p4 import gentraffic, simrun, upf

    import tomllib
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        ent = Path(d) / "e.txt"
        ent.write_text("\n".join(upf.entries_cli(100, 1)) + "\n")
        doc = tomllib.loads(upf.scenario(flows=300, duration_ns=200_000.0, pmus=16))
        traffic = gentraffic.parse_spec(doc["traffic"], "t")
        pr = simrun.prepare(simrun.resolve_program("builtin:up4"), str(ent), traffic=traffic, duration_ns=200_000.0, seed=1)
    names = pr.routes.tables
    T, period = len(names), 50_000.0
    off = U.true_offered(pr, T, period, 200_000.0)
    counts = np.full(T, 3)
    sim = simrun.build_sim(pr, placement.initial(3 * T, 4, dict(zip(names, counts.tolist()))), 3 * T, window_ns=10_000.0)
    r = oracle.run_static(sim, T, period, 200_000.0, counts)
    inv = sim.check_invariants()
    assert r.drops.sum() == 0 and names[0].endswith("my_station")
    want = np.round(off * period / 1e3)
    # every packet enters at my_station when it arrives
    assert np.abs(np.cumsum(r.arrived[:, 0]) - np.cumsum(want[:, 0])).max() <= 2 and r.arrived[:, 0].sum() == want[:, 0].sum()
    # later tables see a PHV a little after it entered: at the end, what they have not seen yet is in flight
    short = want.sum(axis=0) - r.arrived.sum(axis=0)
    assert (short >= 0).all() and short.max() <= inv["in_flight"]
    assert np.abs(np.cumsum(r.arrived - want, axis=0)).max() <= inv["in_flight"] + 2

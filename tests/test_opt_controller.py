"""PMU placement and the closed loop, against a fluid test double of the simulator."""

from __future__ import annotations

import numpy as np
import pytest

from fake_sim import FakeSim
from synapse_vmt.opt import placement
from synapse_vmt.opt.controller import Controller, Settings, observe, static_oracle
from synapse_vmt.opt.usl import Usl


def states(owner, channels_of):
    return [
        {"id": i, "state": "free" if o is None else "associated", "table": o, "channel": channels_of[i]}
        for i, o in enumerate(owner)
    ]


CH = [0, 0, 0, 0, 1, 1, 1, 1]


@pytest.mark.parametrize(
    "owner,target,expect",
    [
        # Growing takes free PMUs on the table's own channel first.
        (["a", None, None, None, "b", None, None, None], {"a": 3, "b": 1}, {"a": [0, 1, 2]}),
        (["a", None, None, None, "b", None, None, None], {"a": 1, "b": 3}, {"b": [4, 5, 6]}),
        # Shrinking drops the PMU on the channel where the table has fewest.
        (["a", "a", None, None, "a", None, None, None], {"a": 2}, {"a": [0, 1]}),
        # No change, no move.
        (["a", "b", None, None, None, None, None, None], {"a": 1, "b": 1}, {}),
        # A new table starts on the channel with the most free PMUs.
        (["a", "a", "a", None, None, None, None, None], {"a": 3, "b": 2}, {"b": [4, 5]}),
        # A full channel: the move takes a PMU released by another table.
        (["a", "a", "a", "a", "b", "b", "b", "b"], {"a": 5, "b": 3}, {"a": [0, 1, 2, 3, 7], "b": [4, 5, 6]}),
    ],
)
def test_placement_moves_few_pmus_and_keeps_channels(owner, target, expect):
    got = placement.plan(states(owner, CH), target)
    assert got == expect


def test_placement_rejects_impossible_targets():
    with pytest.raises(ValueError):
        placement.plan(states([None] * 8, CH), {"a": 5, "b": 4})


def test_placement_moves_are_minimal_on_random_cases():
    rng = np.random.default_rng(3)
    for _ in range(200):
        owner = [None if rng.random() < 0.4 else "abc"[rng.integers(3)] for _ in range(8)]
        target = dict(zip("abc", rng.multinomial(int(rng.integers(0, 9)), [1 / 3] * 3).tolist()))
        have = {t: {i for i, o in enumerate(owner) if o == t} for t in "abc"}
        got = placement.plan(states(owner, CH), target)
        new = {t: set(got.get(t, have[t])) for t in "abc"}
        assert all(len(new[t]) == target[t] for t in "abc")
        assert not (new["a"] & new["b"] or new["a"] & new["c"] or new["b"] & new["c"])
        # Fewest moves: a table keeps min(had, target) of its PMUs.
        assert all(len(new[t] & have[t]) == min(len(have[t]), target[t]) for t in "abc")


def test_candidate_sets_are_what_the_placement_gives_at_each_count():
    """A table's candidate ids at count n (what its online curve shards
    over) are the ids plan() gives it at n with the other tables unchanged,
    wherever the free pool suffices; they are nested, each count one PMU
    more; beyond the free pool they still name n distinct PMUs."""
    rng = np.random.default_rng(5)
    for _ in range(100):
        owner = [None if rng.random() < 0.4 else "abc"[rng.integers(3)] for _ in range(8)]
        st = states(owner, CH)
        for t in "abc":
            have = sorted(i for i, o in enumerate(owner) if o == t)
            free = owner.count(None)
            sets = placement.candidate_sets(st, t, 8)
            assert len(sets) == 8
            for n, ids in enumerate(sets, start=1):
                assert len(set(ids)) == n == len(ids)
                if n <= len(have) + free:
                    assert ids == placement.plan(st, {t: n}).get(t, have), (owner, t, n)
                if n > 1:
                    assert set(sets[n - 2]) < set(ids)
            if have:
                assert sets[len(have) - 1] == have


TRUE = {
    "acl": Usl(-0.0012, 0.0095, -1e-6, 9e-6),
    "fwd": Usl(-0.0015, 0.011, -1e-6, 1.2e-5),
}
NAMES = ["acl", "fwd"]
ENTRY = [1.0, 0.0]
P = [[0.0, 0.8], [0.0, 0.0]]
N = 16


def step_profile(t_ns):
    """30 → 120 → 30 Mpps in thirds of a 30 ms run."""
    return 120.0 if 10e6 <= t_ns < 20e6 else 30.0


def run_pair(models, rate, duration=30e6):
    s = Settings(period_ns=1e6)
    start = placement.initial(N, 4, {"acl": 2, "fwd": 2})
    sim = FakeSim(NAMES, ENTRY, P, TRUE, N, 4, rate, start)
    ctl = Controller(sim, dict(models), N, s)
    loop = ctl.run(duration)
    # The static oracle from what the double really is (its true curves, routing and peak rate),
    # not from anything the controller under test measured or learnt.
    peak = max(rate(t) for t in np.arange(0.0, duration, s.window_ns))
    true_cap = np.array([TRUE[n].capacity(np.arange(N + 1)) for n in NAMES])
    fixed = static_oracle(NAMES, true_cap, N, np.array(P), np.array(ENTRY), peak, 1.0)
    sim2 = FakeSim(NAMES, ENTRY, P, TRUE, N, 4, rate, placement.initial(N, 4, fixed))
    base = observe(sim2, 2, s, duration)
    return ctl, loop, base, fixed


def test_closed_loop_matches_static_throughput_with_fewer_pmus():
    ctl, loop, base, fixed = run_pair(TRUE, step_profile)
    thr = np.mean([p.throughput_mpps for p in loop]) / np.mean([p.throughput_mpps for p in base])
    pmus = np.mean([p.active_pmus for p in loop]) / np.mean([p.active_pmus for p in base])
    assert thr > 0.95
    assert pmus < 0.9
    # The loop followed the load: more PMUs in the middle third than at the ends.
    mid = np.mean([p.active_pmus for p in loop[12:20]])
    ends = np.mean([p.active_pmus for p in loop[3:9] + loop[23:29]])
    assert mid > ends + 1


def test_an_optimistic_model_is_corrected_by_what_the_loop_sees():
    # The controller believes every table is twice as fast as it is.
    optimistic = {n: Usl(u.a_sigma / 2, u.b_sigma / 2, u.a_kappa / 4, u.b_kappa / 4) for n, u in TRUE.items()}
    for n in NAMES:
        assert optimistic[n].capacity(3) > 1.5 * TRUE[n].capacity(3)
    ctl, loop, base, _ = run_pair(optimistic, lambda t: 120.0, duration=20e6)
    late = np.mean([p.throughput_mpps for p in loop[-5:]])
    assert late > 0.95 * np.mean([p.throughput_mpps for p in base[-5:]])
    assert any(ctl.seen_cap[j] for j in range(2))  # it learned a capacity from saturation


def test_the_overload_alarm_catches_a_burst_within_the_period():
    def burst(t_ns):  # 20 → 110 Mpps for 1.5 ms in a 10 ms run
        return 110.0 if 4e6 <= t_ns < 5.5e6 else 20.0

    out = {}
    for alarm in (0.0, 100_000.0):
        s = Settings(period_ns=2e6, alarm_ns=alarm)
        sim = FakeSim(NAMES, ENTRY, P, TRUE, N, 4, burst, placement.initial(N, 4, {"acl": 1, "fwd": 1}))
        ctl = Controller(sim, dict(TRUE), N, s)
        hist = ctl.run(10e6)
        out[alarm] = (sum(p.throughput_mpps for p in hist), sum(p.drops for p in hist), ctl.alarms)
    assert out[0.0][2] == 0 and out[100_000.0][2] >= 1
    assert out[100_000.0][1] < 0.5 * out[0.0][1]  # far fewer drops
    assert out[100_000.0][0] > out[0.0][0]


def test_a_run_that_breaks_the_simulators_invariants_is_an_error():
    """The closed loop checks the simulator's invariants when its run ends."""

    class Broken(FakeSim):
        def check_invariants(self):
            return {**super().check_invariants(), "wrong_action": 3, "ok": False}

    sim = Broken(NAMES, ENTRY, P, TRUE, N, 4, lambda t: 30.0, placement.initial(N, 4, {"acl": 2, "fwd": 2}))
    ctl = Controller(sim, dict(TRUE), N, Settings(period_ns=1e6))
    with pytest.raises(RuntimeError, match="invariant violated.*'wrong_action': 3"):
        ctl.run(3e6)


def test_the_flood_guard_lets_a_legitimate_load_rise_through():
    """A load step raises a table's misses and its hits together: the flood
    guard (Settings.flood_guard) holds no table, and the loop still follows
    the load (docs/flood.md)."""
    s = Settings(period_ns=1e6, flood_guard=True)
    sim = FakeSim(NAMES, ENTRY, P, TRUE, N, 4, step_profile, placement.initial(N, 4, {"acl": 2, "fwd": 2}))
    loop = Controller(sim, dict(TRUE), N, s).run(30e6)
    assert not any(p.flooded for p in loop)
    mid = np.mean([p.active_pmus for p in loop[12:20]])
    ends = np.mean([p.active_pmus for p in loop[3:9] + loop[23:29]])
    assert mid > ends + 1

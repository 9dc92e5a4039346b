"""The miss-volume model of ``reproduce upf`` (figures/upf.py): PMUs only
while the shared ELU would be over its target, online curve correction."""

from __future__ import annotations

import numpy as np
import pytest

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


class FakeSim:
    """Just what MissAware.solve reads: the PMUs each table holds."""

    def __init__(self, names, held):
        self.names, self.held = names, list(held)

    def pmu_states(self):
        out, i = [], 0
        for name, k in zip(self.names, self.held):
            for _ in range(k):
                out.append({"id": i, "state": "associated", "table": name, "channel": 0})
                i += 1
        return out

    def now_ns(self):
        return 0.0


def controller(curves, held, total, target, release_at=None, trend=False):
    from synapse_vmt.opt.controller import Settings

    names = [f"t{j}" for j in range(len(held))]
    ctl = MissAware.__new__(MissAware)
    ctl.sim, ctl.names, ctl.total_pmus = FakeSim(names, held), names, total
    ctl.settings = Settings(headroom=1.0)
    ctl.curves, ctl.measured = np.array(curves, dtype=float), None
    ctl.elu_target_mpps, ctl.elu_release_mpps, ctl.trend, ctl.prev_offered = target, release_at, trend, None
    return ctl


def solve(ctl, load, processed=None):
    from types import SimpleNamespace

    load = np.asarray(load, dtype=float)
    return ctl.solve(SimpleNamespace(offered_mpps=load, processed_mpps=load if processed is None else np.asarray(processed))).pmus


# table 0: one key (never misses with one PMU); tables 1, 2: misses fall with PMUs
CURVES = [[1.0, 0.0, 0.0, 0.0, 0.0], [1.0, 0.30, 0.20, 0.15, 0.12], [1.0, 0.30, 0.25, 0.22, 0.20]]


def test_pmus_that_save_nothing_are_re_placed_while_the_elu_is_over_target():
    ctl = controller(CURVES, [2, 2, 2], 6, target=1.0)
    # the one-key table's second PMU saves nothing: free to re-place; a curve that is flat but misses is not
    assert ctl.useful(np.array([2, 2, 2])).tolist() == [1, 2, 2]
    flat = controller([[1.0, 0.2, 0.2, 0.2]], [2], 2, target=1.0)
    assert flat.useful(np.array([2])).tolist() == [2]
    # the ELU predicted over target (10 x 0.2 + 10 x 0.25 = 4.5 > 1): the pool is full, so the only PMU
    # that can move is the one saving nothing, to the largest saving (table 1: 10 x (0.20 - 0.15))
    assert solve(ctl, [10.0, 10.0, 10.0]).tolist() == [1, 3, 2]


def test_held_allocation_grows_from_the_free_pool_when_a_move_is_not_worth_it():
    # held (1, 2, 1) of 6: the ELU is over target (10 x 0.2 + 10 x 0.3 = 5 > 1). The greedy from one each
    # gives table 1 (saves 10 x 0.1) then tables 1 and 2 (0.5 each, the first on a tie), then table 2
    # (0.5 against 0.3): (1, 3, 2), the held allocation plus the two free PMUs, so nothing moves
    ctl = controller(CURVES, [1, 2, 1], 6, target=1.0)
    assert solve(ctl, [0.0, 10.0, 10.0]).tolist() == [1, 3, 2]


def test_release_shrinks_where_pmus_save_least_and_moves_nothing():
    # light load: the held allocation is far under the target, so PMUs go back (at most max_release),
    # first the one that saves nothing, then the least predicted loss; no table gains a PMU
    # (the second: table 1 loses 1 x (0.20 - 0.15) = 0.05 at 3 -> 2, table 2 loses 0.05 at 2 -> 1 at equal
    # loads; a load of 2 on either makes its loss 0.10, so the other gives its PMU back)
    for load, want in (([1.0, 1.0, 2.0], [1, 2, 2]), ([1.0, 2.0, 1.0], [1, 3, 1])):
        ctl = controller(CURVES, [2, 3, 2], 7, target=10.0)
        assert solve(ctl, load).tolist() == want, load
        assert sum(want) == 7 - ctl.max_release


def test_hysteresis_holds_the_count_inside_the_band():
    # the band: add above 5.0 Mpps of predicted ELU load, give back only under 3.0
    held = [1, 2, 2]
    # held predicts 10 x 0.2 + 10 x 0.25 = 4.5: under the top, but giving back one PMU would go over the bottom
    ctl = controller(CURVES, held, 6, target=5.0, release_at=3.0)
    assert solve(ctl, [10.0, 10.0, 10.0]).tolist() == held
    # without the band (bottom = top) the same load gives PMUs back
    ctl = controller(CURVES, held, 6, target=5.0)
    assert solve(ctl, [10.0, 10.0, 10.0]).sum() < sum(held)
    # under the bottom even without them: PMUs go back inside the band rule too
    ctl = controller(CURVES, held, 6, target=5.0, release_at=3.0)
    assert solve(ctl, [1.0, 1.0, 1.0]).sum() < sum(held)


def test_a_rising_load_is_extrapolated_a_falling_one_is_not():
    # first period: the load rose from nothing, so twice 6 Mpps is provisioned (2 x 6 x (0.3 + 0.3) > 4);
    # as it is, 6 x 0.6 = 3.6 needs nothing more
    ctl = controller(CURVES, [1, 1, 1], 6, target=4.0, trend=True)
    assert solve(ctl, [0.0, 6.0, 6.0]).sum() > 3
    assert solve(controller(CURVES, [1, 1, 1], 6, target=4.0), [0.0, 6.0, 6.0]).tolist() == [1, 1, 1]
    # a falling load is taken as it is: 3 x (0.3 + 0.3) = 1.8 < 4, nothing added
    ctl = controller(CURVES, [1, 1, 1], 6, target=4.0, trend=True)
    ctl.prev_offered = np.array([0.0, 5.0, 5.0])
    assert solve(ctl, [0.0, 3.0, 3.0]).tolist() == [1, 1, 1]


@pytest.mark.slow
def test_reproduce_upf_quick_meets_the_targets_the_readme_states(tmp_path):
    """`synapse reproduce upf --quick` (seed 1): the closed loop carries at
    least 0.95x the static oracle's throughput and beats the even split (the
    docs/explanation/fidelity.md: every seed 1-10); done_when is what the schemes' own
    figures say; the oracle's split is the cheapest run that kept up, and
    every run kept the simulator's invariants."""
    import json

    from click.testing import CliRunner

    from synapse_vmt.cli import main

    r = CliRunner().invoke(main, ["reproduce", "upf", "--quick", "-o", str(tmp_path)])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "summary.json").read_text())
    sc = s["schemes"]
    cl, st, ev = sc["closed_loop"], sc["static"], sc["even_split"]
    thr = cl["throughput_mpps"] / st["throughput_mpps"]
    pmu = cl["pmu_time_ms"] / st["pmu_time_ms"]
    beats = cl["throughput_mpps"] > 1.005 * ev["throughput_mpps"] or cl["mean_latency_ns"] < ev["mean_latency_ns"]
    assert s["done_when"] == {"throughput_within_5pct": thr >= 0.95, "less_pmu_time": pmu < 1.0, "beats_even_split": beats}
    assert thr >= 0.95 and beats
    assert all(x["invariants"]["ok"] for x in sc.values())
    o = s["static"]["oracle"]
    held = sum(o["pmus"].values())
    assert o["carries_peak"] and st["drops"] == 0 and held <= s["settings"]["pmus_total"]
    assert st["pmu_time_ms"] == pytest.approx(held * s["settings"]["duration_ns"] / 1e6, rel=0.02)
    fits = [v for v in o["sweep"].values() if sum(v["pmus"]) <= s["settings"]["pmus_total"]]
    assert min(sum(v["pmus"]) for v in fits if v["kept_up"]) == held  # no cheaper run kept up
    # the report: the PMU allocation figure marks each decision that moved PMUs, its hover naming what changed
    from synapse_vmt.view import figures, rundir

    assert (tmp_path / "report.html").is_file()
    moved = [d for d in s["closed_loop_decisions"] if d["held"] != d["target"]]
    assert moved
    run = rundir.load(tmp_path)
    marks = next(tr for tr in figures.pmu_figure(run).data if tr.name == "controller decisions")
    assert len(marks.x) == len(moved)
    lab = figures.labels(s["tables"])
    for d, txt in zip(moved, marks.hovertext):
        assert [ln.split(" ")[0] for ln in txt.split("<br>")[1:] if "→" in ln] == \
            [lab[n] for n, h, t in zip(s["tables"], d["held"], d["target"]) if h != t]

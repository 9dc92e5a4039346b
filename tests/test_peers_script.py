"""scripts/peers/run_peers.sh on a small generated set: the trace it writes
for CutSplit (the oracle's answers as the last column) must give zero
wrong answers, TupleMerge's own Validate mode must run, and TupleMerge
online (NuevoMatch's patched copy) must answer as a linear scan after the
churn. It needs the
peers' sources and a compiler, so it runs only where SYNAPSE_TM_SRC and
SYNAPSE_NM_SRC name checkouts of github.com/drjdaly/tuplemerge and
github.com/acsl-technion/nuevomatch (CI has neither: no network)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from synapse_vmt import _core

ROOT = Path(__file__).resolve().parents[1]
TM, NM = os.environ.get("SYNAPSE_TM_SRC"), os.environ.get("SYNAPSE_NM_SRC")

pytestmark = pytest.mark.skipif(
    not (TM and NM and Path(TM, "makefile").is_file() and Path(NM, "Makefile").is_file() and shutil.which("g++")),
    reason="the peers' checkouts (SYNAPSE_TM_SRC, SYNAPSE_NM_SRC) or g++ are absent",
)


def test_run_peers_checks_cutsplit_against_the_oracle(tmp_path):
    rs = _core.RuleSet.generate("acl", 300, 3)
    rules, trace = tmp_path / "acl_300", tmp_path / "acl_300_trace"
    rules.write_text(rs.format())
    trace.write_text(_core.Trace.generate(rs, 3000, 3).format())
    nm = tmp_path / "nm"  # built in a copy: the test leaves the checkout as it was
    shutil.copytree(NM, nm, ignore=shutil.ignore_patterns("bin", "tuplemerge"))
    env = dict(os.environ, OUT=str(tmp_path / "out"), TM_SRC=TM, NM_SRC=str(nm), UPDATES="2000", MIN_PACKETS="6000",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    out = subprocess.run(["bash", str(ROOT / "scripts/peers/run_peers.sh"), str(rules), str(trace)], env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [json.loads(line) for line in (tmp_path / "out/peers.jsonl").read_text().splitlines()]
    cs = [r for r in rows if r["peer"] == "CutSplit"]
    assert len(cs) == 1 and cs[0]["checked"] == 6000 and cs[0]["wrong"] == 0 and cs[0]["lookups_per_s"] > 0
    theirs = [r for r in rows if "packets_in_disagreement" in r]
    assert {r["peer"] for r in theirs} == {"TupleMerge-Online", "TupleMerge-Offline", "PartitionSort", "PriorityTuple"}
    # TupleMerge online after the churn, against a linear scan over the rules
    # left (tm_updates mirrors its rule vector; linked with the patched copy).
    tmu = [r for r in rows if r["peer"] == "TupleMerge online"]
    assert len(tmu) == 1 and tmu[0]["checked"] > 0 and tmu[0]["wrong"] == 0
    # and before it, every header against our oracle (their priorities mapped to rule numbers)
    assert tmu[0]["static_checked"] == 3000 and tmu[0]["static_wrong"] == 0

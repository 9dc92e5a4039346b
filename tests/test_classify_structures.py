"""`synapse classify --algo trie|dtree`: the ELU's lookup structures give the
oracle's answers, print their build statistics, and refuse bad parameters or
an over-budget build with one line and exit status 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from synapse_vmt import _core


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "synapse_vmt.cli", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("cls")
    rs = _core.RuleSet.generate("fw", 300, 4)
    (d / "rules").write_text(rs.format())
    (d / "trace").write_text(_core.Trace.generate(rs, 3000, 4).format())
    return d / "rules", d / "trace"


@pytest.mark.parametrize("algo", ["trie", "dtree"])
def test_structures_equal_the_linear_oracle(files, algo):
    rules, trace = files
    rs = _core.RuleSet.parse(rules.read_text(), str(rules))
    tr = _core.Trace.parse(trace.read_text(), str(trace))
    want = _core.Classifier(rs, "linear").classify(tr)
    got = _core.Classifier(rs, algo, {"trie.stride": "4"}).classify(tr)
    assert np.array_equal(got, want)


@pytest.mark.parametrize(
    "algo, settings, code, expect",
    [
        ("dtree", [], 0, "FACL DT mapping: fits"),
        ("dtree", ["--set", "dtree.bucket=4", "--set", "facl.dt_layers=8"], 0, "DT layers used"),
        ("trie", ["--set", "trie.stride=4"], 0, "mean depth"),
        ("trie", ["--set", "trie.max_bytes=4096"], 2, "memory budget of 4096 bytes (stopped at"),
        # The advice names the structure's own budget parameter.
        ("trie", ["--set", "trie.max_bytes=4096"], 2, "raise it (--set trie.max_bytes=BYTES)"),
        ("trie", ["--set", "trie.stride=17"], 2, "stride must be 1..16"),
        ("dtree", ["--set", "dtree.buckets=4"], 2, "unknown build parameter"),
        ("dtree", ["--set", "dtree.bucket"], 2, "expected KEY=VALUE"),
        ("dtree", ["--set", "dtree.max_bytes=1000"], 2, "raise it (--set dtree.max_bytes=BYTES)"),
        ("ptree", ["--set", "ptree.max_bytes=1000"], 2, "raise it (--set ptree.max_bytes=BYTES)"),
    ],
)
def test_classify_cli(files, algo, settings, code, expect):
    rules, trace = files
    out = run("classify", "--rules", str(rules), "--trace", str(trace), "--algo", algo, *settings)
    assert out.returncode == code, out.stderr
    if code == 0:
        assert expect in out.stdout
        assert "wrong results (ClassBench measure): 0 of 3000" in out.stdout
    else:
        assert expect in out.stderr
        assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr

"""`synapse bench classify`: rates any structure on the user's files, checks
it against the linear oracle first, prints the documented JSON keys, and
refuses bad input with one line and exit status 2."""

from __future__ import annotations

import json
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
    d = tmp_path_factory.mktemp("bench")
    rs = _core.RuleSet.generate("ipc", 400, 2)
    (d / "rules").write_text(rs.format())
    (d / "trace").write_text(_core.Trace.generate(rs, 2000, 2).format())
    return d / "rules", d / "trace"


@pytest.mark.parametrize("algo", ["ptree", "dtree", "linear"])
def test_bench_json_has_the_documented_keys(files, algo):
    rules, trace = files
    out = run("bench", "classify", "--rules", str(rules), "--trace", str(trace), "--algo", algo, "--secs", "0.05",
              "--json")
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)
    assert set(rec) == {"algo", "rules", "lookups_per_s", "bytes", "bytes_per_rule", "build_s"}
    assert rec["algo"] == algo and rec["rules"] == 400
    assert rec["lookups_per_s"] > 0 and rec["build_s"] >= 0
    assert rec["bytes_per_rule"] == pytest.approx(rec["bytes"] / 400)
    clf = _core.Classifier(_core.RuleSet.parse(rules.read_text(), str(rules)), algo)
    assert rec["bytes"] == clf.memory_bytes()


@pytest.mark.parametrize("algo, extra", [("ptree", []), ("ptree", ["--set", "ptree.max_delta=4"]),
                                         ("ptree", ["--churn", "near", "--set", "ptree.wide_leaves=1"]),
                                         ("ptree", ["--churn", "rank"]), ("dtree", ["--churn", "near"])])
def test_bench_under_update_churn_adds_the_documented_keys_and_answers_right(files, algo, extra):
    rules, trace = files
    out = run("bench", "classify", "--rules", str(rules), "--trace", str(trace), "--algo", algo, "--secs", "0.05",
              "--updates-per-s", "1e6", "--json", *extra)
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)
    assert {"updates_per_s", "update_latency_us_p50", "update_latency_us_p99", "wrong", "checked",
            "churn_lookups_per_s", "churn_lookup_ratio", "fresh_lookups_per_s", "churn_lookup_ratio_fresh",
            "update_latency_us_p999", "churn", "updates_owed", "saturated"} <= set(rec)
    assert rec["saturated"] == (rec["updates_owed"] > 256)
    assert rec["churn"] == (extra[extra.index("--churn") + 1] if "--churn" in extra else "uniform")
    assert rec["updates"] > 0 and rec["checked"] > 0 and rec["fresh_lookups_per_s"] > 0
    assert rec["churn_lookup_ratio_fresh"] == pytest.approx(rec["churn_lookups_per_s"] / rec["fresh_lookups_per_s"])
    # Every sampled answer under churn equals the oracle's over the rules then.
    assert rec["wrong"] == 0
    assert rec["update_latency_us_p50"] <= rec["update_latency_us_p99"]


def test_bench_under_churn_refuses_a_structure_rebuilt_whole(files):
    rules, trace = files
    out = run("bench", "classify", "--rules", str(rules), "--trace", str(trace), "--algo", "trie", "--secs", "0",
              "--updates-per-s", "10")
    assert out.returncode == 2 and "not updated in place" in out.stderr


def test_ptree_kernels_equal_the_oracle_through_the_binding(files):
    rules, trace = files
    rs = _core.RuleSet.parse(rules.read_text(), str(rules))
    tr = _core.Trace.parse(trace.read_text(), str(trace))
    want = _core.Classifier(rs, "linear").classify(tr)
    # The widest kernels, AVX2 at most, scalar.
    for simd, avx512 in (("1", "1"), ("1", "0"), ("0", "1")):
        got = _core.Classifier(rs, "ptree", {"ptree.simd": simd, "ptree.avx512": avx512, "ptree.bucket": "4"}).classify(tr)
        assert np.array_equal(got, want), f"simd={simd} avx512={avx512}"


@pytest.mark.parametrize(
    "extra, expect",
    [
        (["--set", "ptree.buckets=4"], "unknown build parameter"),
        (["--set", "ptree.bucket"], "expected KEY=VALUE"),
        (["--set", "ptree.max_bytes=100"], "memory budget of 100 bytes"),
    ],
)
def test_bench_refuses_bad_input(files, extra, expect):
    rules, trace = files
    out = run("bench", "classify", "--rules", str(rules), "--trace", str(trace), "--secs", "0", *extra)
    assert out.returncode == 2
    assert expect in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr

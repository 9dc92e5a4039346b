"""A missing tool or data set skips a test on a user's machine but fails it
where it must be there (requires.py): under CI (SYNAPSE_CI=1) and where the
real data is declared present (SYNAPSE_REQUIRE_SHARED=1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import requires

TESTS = Path(__file__).resolve().parent


@pytest.mark.parametrize("var, value, outcome", [
    (requires.CI_VAR, None, pytest.skip.Exception),
    (requires.CI_VAR, "0", pytest.skip.Exception),
    (requires.CI_VAR, "1", pytest.fail.Exception),
])
def test_a_missing_tool_skips_or_fails(monkeypatch, var, value, outcome):
    if value is None:
        monkeypatch.delenv(var, raising=False)
    else:
        monkeypatch.setenv(var, value)
    with pytest.raises(outcome, match="frobnicator is not installed"):
        requires.tool("frobnicator is not installed")
    requires.tool(None)  # present: nothing happens


def _pytest(args: list[str], **env: str) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in (requires.CI_VAR, requires.SHARED_VAR)}
    e.update(env)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rsf", *args],
                          cwd=TESTS.parent, env=e, capture_output=True, text=True, timeout=300)


def test_rtl_tests_fail_under_ci_without_their_tools(tmp_path):
    """With no yosys and no iverilog on PATH: skipped for a user, failed under CI."""
    tests = ["tests/test_hw_synth.py::test_synth_command_prints_json_rows_and_writes_csv",
             "tests/test_hw_synth.py::test_cosim_command_reports_agreement",
             "tests/test_hw_cosim.py::test_a_recorded_stream_cut_too_short_is_refused"]
    user = _pytest(tests, PATH=str(tmp_path))
    assert user.returncode == 0 and "3 skipped" in user.stdout, user.stdout
    ci = _pytest(tests, PATH=str(tmp_path), SYNAPSE_CI="1")
    last = ci.stdout.strip().splitlines()[-1]  # a fixture's failure counts as an error
    assert ci.returncode == 1 and "skipped" not in last and "1 failed, 2 errors" in last, ci.stdout
    assert "yosys is not installed (SYNAPSE_CI is set" in ci.stdout
    assert "iverilog (Icarus Verilog) is not installed (SYNAPSE_CI is set" in ci.stdout


def test_shared_data_tests_fail_when_the_data_is_declared_present(tmp_path):
    test = ["tests/test_p4_cfg.py::test_upf_program"]
    gone = str(tmp_path / "nowhere")
    user = _pytest(test, SYNAPSE_SHARED=gone)
    assert user.returncode == 0 and "skipped" in user.stdout and "failed" not in user.stdout, user.stdout
    req = _pytest(test, SYNAPSE_SHARED=gone, SYNAPSE_REQUIRE_SHARED="1")
    assert req.returncode == 1 and "SYNAPSE_REQUIRE_SHARED is set" in req.stdout, req.stdout

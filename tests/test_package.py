import subprocess
import sys

import synapse_vmt


def test_extension_matches_package_version():
    assert synapse_vmt.core_version() == synapse_vmt.__version__


def test_version_is_the_package_and_the_changelog():
    """`synapse --version` prints the installed package's version, which is
    pyproject.toml's and the newest release in CHANGELOG.md."""
    import re
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-m", "synapse_vmt.cli", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == f"synapse {synapse_vmt.__version__}"
    assert tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"] == synapse_vmt.__version__
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", (root / "CHANGELOG.md").read_text(), re.M)
    assert releases and releases[0] == synapse_vmt.__version__


def test_cli_help_lists_commands():
    out = subprocess.run([sys.executable, "-m", "synapse_vmt.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "Synapse" in out.stdout


def test_unknown_option_exits_2():
    out = subprocess.run([sys.executable, "-m", "synapse_vmt.cli", "--no-such-option"], capture_output=True, text=True)
    assert out.returncode == 2


def test_atomic_write_keeps_nothing_on_error_and_uses_umask_permissions(tmp_path):
    import os
    import stat

    import pytest

    from synapse_vmt.errors import atomic_write

    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError):
        with atomic_write(target) as f:
            f.write("half")
            raise RuntimeError("crash mid-write")
    assert list(tmp_path.iterdir()) == []
    old = os.umask(0o022)
    try:
        with atomic_write(target) as f:
            f.write("whole")
    finally:
        os.umask(old)
    assert target.read_text() == "whole"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644

import subprocess
import sys

import synapse_vmt


def test_extension_matches_package_version():
    assert synapse_vmt.core_version() == synapse_vmt.__version__


def test_cli_help_lists_commands():
    out = subprocess.run([sys.executable, "-m", "synapse_vmt.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "Synapse" in out.stdout


def test_unknown_option_exits_2():
    out = subprocess.run([sys.executable, "-m", "synapse_vmt.cli", "--no-such-option"], capture_output=True, text=True)
    assert out.returncode == 2

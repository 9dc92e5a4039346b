"""What a test needs from the machine (a tool, a package, the real data), and
what happens when it is missing.

On a developer's or user's machine a missing tool or ``../shared`` skips the
test with the reason. Where it must be there, a skip would look like a pass,
so it fails instead:

- ``SYNAPSE_CI=1`` (``.ci/run`` exports it): CI installs every tool and
  package the tests use (iverilog, yosys, cocotb, ray, finsy, openssl);
- ``SYNAPSE_REQUIRE_SHARED=1``: the real data set (``../shared/data``, or
  ``$SYNAPSE_SHARED/data``) is supposed to be present. The Rust tests read the
  same variable.
"""

from __future__ import annotations

import importlib
import os
from typing import NoReturn

import pytest

CI_VAR = "SYNAPSE_CI"
SHARED_VAR = "SYNAPSE_REQUIRE_SHARED"


def _set(var: str) -> bool:
    return os.environ.get(var, "") not in ("", "0")


def unavailable(reason: str, var: str = CI_VAR) -> NoReturn:
    """Skips with ``reason``, or fails when ``var`` says it must be there."""
    if _set(var):
        pytest.fail(f"{reason} ({var} is set: it must be present here)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def tool(why_not: str | None) -> None:
    """``why_not``: None when the tool is usable, else why it is not."""
    if why_not is not None:
        unavailable(why_not)


def module(name: str, hint: str = ""):
    """Imports ``name`` (a test dependency), or is :func:`unavailable`."""
    try:
        return importlib.import_module(name)
    except ImportError:
        unavailable(f"{name} is not installed{' (' + hint + ')' if hint else ''}")

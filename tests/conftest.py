"""Shared pytest fixtures: the optional ../shared data folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from requires import SHARED_VAR, unavailable

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SYNAPSE_SHARED", ROOT.parent / "shared"))


@pytest.fixture
def shared_data() -> Path:
    """The real data sets (ClassBench, CAIDA, p4c output); a user's clone has
    none, so tests that need them skip (or fail, with SYNAPSE_REQUIRE_SHARED=1:
    see requires.py)."""
    d = SHARED / "data"
    if not d.is_dir():
        unavailable(f"real data not present at {d} (only in the developers' checkout)", SHARED_VAR)
    return d

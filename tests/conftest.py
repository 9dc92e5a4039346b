"""Shared pytest fixtures: the optional ../shared data folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SYNAPSE_SHARED", ROOT.parent / "shared"))


@pytest.fixture
def shared_data() -> Path:
    """The real data sets (ClassBench, CAIDA, p4c output); a user's clone has
    none, so tests that need them skip."""
    d = SHARED / "data"
    if not d.is_dir():
        pytest.skip(f"real data not present at {d} (only in the developers' checkout)")
    return d

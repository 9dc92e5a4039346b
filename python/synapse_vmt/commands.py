"""The list of top-level ``synapse`` commands, one line per subsystem."""

from __future__ import annotations

ALL: list = []

"""The list of top-level ``synapse`` commands, one line per subsystem."""

from __future__ import annotations

from synapse_vmt.traffic_cli import traffic

ALL: list = []
ALL += [traffic]

"""The list of top-level ``synapse`` commands, one line per subsystem."""

from __future__ import annotations

from synapse_vmt.opt.cli import opt
from synapse_vmt.p4.cli import p4
from synapse_vmt.reproduce import reproduce

ALL: list = [p4, opt, reproduce]

"""The list of top-level ``synapse`` commands, one line per subsystem."""

from __future__ import annotations

from synapse_vmt.opt.cli import opt
from synapse_vmt.p4.cli import p4
from synapse_vmt.reproduce import reproduce
from synapse_vmt.rules_cli import classify, rules, trace
from synapse_vmt.run_cli import run
from synapse_vmt.traffic_cli import traffic

ALL: list = []
ALL += [rules, trace, classify]
ALL += [traffic]
ALL += [run]  # the simulator's main job (run_cli.py)
ALL += [p4, opt, reproduce]

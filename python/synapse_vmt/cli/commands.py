"""The list of top-level ``synapse`` commands, one line per subsystem."""

from __future__ import annotations

from synapse_vmt.cli.bench import bench
from synapse_vmt.cli.cost import cost
from synapse_vmt.cli.hw import hw
from synapse_vmt.cli.mrc import mrc
from synapse_vmt.cli.opt import opt
from synapse_vmt.cli.p4 import p4
from synapse_vmt.cli.report import report
from synapse_vmt.cli.reproduce import reproduce
from synapse_vmt.cli.rules import classify, rules, trace
from synapse_vmt.cli.run import run
from synapse_vmt.cli.serve import p4info_cmd, serve
from synapse_vmt.cli.sweep import sweep
from synapse_vmt.cli.traffic import traffic

ALL: list = []
ALL += [rules, trace, classify]
ALL += [traffic]
ALL += [run]  # the simulator's main job (cli/run.py)
ALL += [mrc]  # miss-ratio curves, one pass over each table's keys (cli/mrc.py)
ALL += [report]  # a run's HTML report, rebuilt from its files; two runs compared (cli/report.py)
ALL += [sweep]  # many runs: overrides × seeds, local pool or Ray (cli/sweep.py)
ALL += [p4, opt, reproduce]
ALL += [cost]  # cost models: CPU, ASIC, Synapse (cli/cost.py)
ALL += [hw]  # RTL co-simulation and synthesis (cli/hw.py)
ALL += [bench]  # measured rates on the user's files (cli/bench.py)
ALL += [serve]  # P4Runtime server over the table store (cli/serve.py)
p4.add_command(p4info_cmd)  # synapse p4 p4info

"""One line and an example for every ``synapse`` command.

``synapse --help`` lists each command with a short help that must stand
alone (click would otherwise cut a command's docstring at its first period,
or shorten it with "..."), and every command's ``--help`` ends with an
example. Both live in this table, one row per command path, so they are
easy to review side by side; :func:`apply` sets them on the click commands
(``short_help`` and ``epilog``). A command without a row fails
``tests/test_cli_help.py``: add one when you add a command.

Examples run from a clone's top directory on the files it ships.
"""

from __future__ import annotations

import click

#: command path -> (short help, example command lines)
HELP: dict[str, tuple[str, list[str]]] = {
    "synapse": ("Elastic, virtualized match tables for programmable data planes.",
                ["synapse run -o results/default"]),
    # rule sets and traces
    "rules": ("Generate ClassBench rule sets; print their statistics.",
              ["synapse rules gen --type acl --count 1000 -o rules.txt"]),
    "rules gen": ("Generate a ClassBench-style rule set.",
                  ["synapse rules gen --type fw --count 5000 --seed 2 -o fw.txt"]),
    "rules stats": ("Print rule sets' distributions side by side.",
                    ["synapse rules stats rules.txt fw.txt"]),
    "trace": ("Generate header traces from a rule set.",
              ["synapse trace gen --rules rules.txt --packets 100000 -o trace.txt"]),
    "trace gen": ("Draw headers inside a rule set, ClassBench-style.",
                  ["synapse trace gen --rules rules.txt --packets 100000 --pareto 1 1 -o trace.txt"]),
    "classify": ("Classify a trace; check answers, print lookups/s.",
                 ["synapse classify --rules rules.txt --trace trace.txt --algo ptree"]),
    # traffic
    "traffic": ("Flow-level traffic: flow sizes, Poisson packets.",
                ["synapse traffic show"]),
    "traffic fit": ("Fit the flow-size distribution of a capture.",
                    ["synapse traffic fit tests/data/p4/upf-sample.pcap -o dist.json"]),
    "traffic gen": ("Generate packet arrivals (time, flow) to a file.",
                    ["synapse traffic gen --flows 2000 --duration-us 1000 --profile step -o arrivals.csv"]),
    "traffic show": ("Print the built-in flow sizes and profiles.",
                     ["synapse traffic show"]),
    # the simulator
    "run": ("Simulate a scenario or a P4 program; plot the run.",
            ["synapse run -o results/default",
             "synapse run examples/upf/scenario.toml -o results/upf",
             "synapse run -o out --set pmus.count=4 --set pmus.block_size=128",
             "synapse run --mode fast -o results/fast"]),
    "mrc": ("Miss-ratio curves of every table in one pass.",
            ["synapse mrc -o results/mrc --pmus 1-8 --validate 2,8"]),
    "sweep": ("Run a grid of scenario overrides x seeds.",
              ["synapse sweep grid.toml -o results/grid -w 2",
               "synapse sweep --fast grid.toml -o results/grid-fast"]),
    "report": ("Rebuild a run's HTML report; compare two runs.",
               ["synapse report results/upf",
                "synapse report results/upf-10 results/upf-20 -o compare.html"]),
    # P4 programs
    "p4": ("P4 programs: CFG, entries, interpreter, compiler.",
           ["synapse p4 cfg tests/data/p4/router.json"]),
    "p4 cfg": ("Print a program's tables and control-flow graph.",
               ["synapse p4 cfg tests/data/p4/router.json -o cfg.json"]),
    "p4 entries": ("Check or generate a program's table entries.",
                   ["synapse p4 entries check tests/data/p4/router.json tests/data/p4/router-entries.txt"]),
    "p4 entries check": ("Validate entries against a program.",
                         ["synapse p4 entries check tests/data/p4/router.json tests/data/p4/router-entries.txt"]),
    "p4 entries gen": ("Generate realistic entries for a program.",
                       ["synapse p4 entries gen tests/data/p4/router.json --count 100 -o entries.txt"]),
    "p4 interp": ("Run a capture through a program, as BMv2 would.",
                  ["synapse p4 interp tests/data/p4/router.json --entries tests/data/p4/router-entries.txt "
                   "--pcap tests/data/p4/router.pcap"]),
    "p4 p4info": ("Write a program's P4Info (stable ids).",
                  ["synapse p4 p4info tests/data/p4/router.json -o p4info.txtpb"]),
    "p4 compile": ("Compile a program and entries for the executor.",
                   ["synapse p4 compile tests/data/p4/route3.json --entries tests/data/p4/route3-entries.txt "
                    "-o route3-compiled.json"]),
    "p4 capture": ("Write a capture whose frames all differ.",
                   ["synapse p4 capture tests/data/p4/route3.json --entries tests/data/p4/route3-entries.txt "
                    "--traffic tests/data/p4/route3-traffic.toml --count 10000 -o route3.pcap"]),
    # control plane
    "opt": ("The runtime optimizer: PMUs to tables.",
            ["synapse opt solve problem.json --solver both"]),
    "opt solve": ("Allocate PMUs to a CFG's tables (max flow).",
                  ["synapse opt solve problem.json --solver both"]),
    "serve": ("Serve P4Runtime over Synapse's tables.",
              ["synapse serve --p4 tests/data/p4/router.json",
               "synapse serve --p4 tests/data/p4/router.json --sim default --http 127.0.0.1:9560"]),
    # the paper's figures
    "reproduce": ("Reproduce the paper's figures and other experiments.",
                  ["synapse reproduce fig7 --quick -o results/fig7"]),
    "reproduce fig6": ("Paper Fig. 6: hit rate, latency, HBM vs capacity.",
                       ["synapse reproduce fig6 --quick -o results/fig6"]),
    "reproduce fig7": ("Paper Fig. 7: throughput, HBM vs offered load.",
                       ["synapse reproduce fig7 --quick -o results/fig7"]),
    "reproduce fig8": ("Paper Fig. 8: closed loop vs static oracle.",
                       ["synapse reproduce fig8 --quick -o results/fig8"]),
    "reproduce fig9": ("Paper Fig. 9: solver time vs CFG size.",
                       ["synapse reproduce fig9 --quick -o results/fig9"]),
    "reproduce fig10": ("Paper Fig. 10: USL fit of VMT throughput.",
                        ["synapse reproduce fig10 --quick -o results/fig10"]),
    "reproduce cpu-model": ("Fit the CPU cost model on this machine.",
                            ["synapse reproduce cpu-model --quick -o results/cpu-model"]),
    "reproduce upf": ("UPF: closed loop vs static oracle, shifting mix.",
                      ["synapse reproduce upf --quick -o results/upf-opt"]),
    "reproduce updates": ("Rule updates under churn: latency, consistency.",
                          ["synapse reproduce updates --quick -o results/updates"]),
    "reproduce flood": ("Cache flooding: attack share vs legit throughput, p99; defences.",
                        ["synapse reproduce flood --quick -o results/flood"]),
    # cost, hardware, benchmarks
    "cost": ("Cost of a P4 program on CPU, Tofino and Synapse.",
             ["synapse cost tests/data/p4/router.json --no-pmus"]),
    "hw": ("RTL of the PMU, VMU, ORB and the cluster: co-simulation, synthesis.",
           ["synapse hw cosim --unit pmu --cycles 2000"]),
    "hw cosim": ("Compare the RTL with the model, cycle by cycle.",
                 ["synapse hw cosim --unit pmu --cycles 5000 --seed 1",
                  "synapse hw cosim --unit cluster --pmus 4"]),
    "hw synth": ("Estimate the RTL's FPGA resources with yosys.",
                 ["synapse hw synth --unit pmu --entries 64 --key-bits 104"]),
    "bench": ("Measure the data plane's structures on your inputs.",
              ["synapse bench classify --rules rules.txt --trace trace.txt --algo ptree"]),
    "bench classify": ("Lookups/s, bytes and build time of a classifier.",
                       ["synapse bench classify --rules rules.txt --trace trace.txt --algo ptree --secs 2"]),
    "bench fast": ("Fast mode vs exact engine: keys/s and errors.",
                   ["synapse bench fast --rounds 3"]),
    "bench p4rt": ("Write rates of synapse serve, batched and single.",
                   ["synapse bench p4rt --p4 tests/data/p4/router.json --entries 2000 --singles 200"]),
    "bench p4": ("Packets/s of a program run by the executor.",
                 ["synapse bench p4 tests/data/p4/route3.json --entries tests/data/p4/route3-entries.txt "
                  "--pcap route3.pcap"]),
}


def walk(cmd: click.Command, path: str = ""):
    """Every (path, command) under ``cmd``, ``cmd`` itself as ``""``."""
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            yield from walk(sub, f"{path} {name}".strip())


def epilog(examples: list[str]) -> str:
    # "\b" keeps click from rewrapping the example lines.
    return "\b\nExample" + ("s" if len(examples) > 1 else "") + ":\n" + "\n".join(f"  {e}" for e in examples)


def apply(root: click.Command) -> None:
    """Sets ``short_help`` and ``epilog`` of every command that has a row."""
    for path, cmd in walk(root):
        row = HELP.get(path or "synapse")
        if row is None:
            continue  # tests/test_cli_help.py names it
        cmd.short_help, examples = row
        cmd.epilog = epilog(examples)

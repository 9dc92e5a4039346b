"""Every ``synapse`` command's help reads well: its line in its group's
``--help`` stands alone (not cut at a period, no "..."), and its own
``--help`` ends with an example whose options the command accepts."""

from __future__ import annotations

import shlex

import click
import pytest
from click.testing import CliRunner

from synapse_vmt.cli import help as cli_help
from synapse_vmt.cli import main

COMMANDS = list(cli_help.walk(main))


def test_every_command_has_a_help_row():
    missing = [p for p, _ in COMMANDS if (p or "synapse") not in cli_help.HELP]
    stale = set(cli_help.HELP) - {p or "synapse" for p, _ in COMMANDS}
    assert not missing, f"add a row to synapse_vmt/cli/help.py for: {missing}"
    assert not stale, f"rows without a command: {sorted(stale)}"


@pytest.mark.parametrize("path", [p for p, c in COMMANDS if isinstance(c, click.Group)], ids=lambda p: p or "synapse")
def test_group_lists_whole_short_helps(path):
    """In the group's --help (80 columns), each subcommand's line is its whole short help."""
    r = CliRunner().invoke(main, [*path.split(), "--help"], terminal_width=80)
    assert r.exit_code == 0, r.output
    listing = r.output.split("Commands:\n", 1)[1]
    group = dict(COMMANDS)[path]
    for name, sub in group.commands.items():
        line = next(ln for ln in listing.splitlines() if ln.split()[:1] == [name])
        shown = line.split(None, 1)[1].strip()
        assert shown == sub.short_help, f"{path} {name}: shows {shown!r}"
        assert not shown.endswith("...") and len(shown) > 20, shown


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=lambda p: p or "synapse")
def test_help_ends_with_an_example_the_command_accepts(path):
    r = CliRunner().invoke(main, [*path.split(), "--help"], terminal_width=80)
    assert r.exit_code == 0, r.output
    tail = r.output.split("Example", 1)
    assert len(tail) == 2, f"{path or 'synapse'} --help shows no example"
    examples = [ln.strip() for ln in tail[1].splitlines()[1:] if ln.strip().startswith("synapse")]
    assert examples == cli_help.HELP[path or "synapse"][1]
    for ex in examples:
        args = shlex.split(ex)[1:]
        assert " ".join(args[: len(path.split())]) == path, f"{ex!r} is not an example of {path!r}"
        # Parse it as click would (unknown options, bad choices and missing required options fail).
        cmds = dict(COMMANDS)
        n = max(k for k in range(len(args) + 1) if " ".join(args[:k]) in cmds)
        leaf = cmds[" ".join(args[:n])]
        assert not isinstance(leaf, click.Group), f"{ex!r} names no command"
        leaf.make_context(args[n - 1], args[n:], resilient_parsing=False)

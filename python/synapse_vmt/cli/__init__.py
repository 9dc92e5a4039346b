"""The ``synapse`` command line.

Each subsystem defines its click commands in its own module; this file only
assembles them. A :class:`~synapse_vmt.errors.UserError` anywhere becomes one
line on stderr and exit status 2 (click does the same for unknown options).
"""

from __future__ import annotations

import sys

import click

from synapse_vmt import cmdline
from synapse_vmt.errors import EXIT_USAGE, UserError


class _Group(click.Group):
    """A click group that turns UserError into one line and exit status 2."""

    def main(self, args=None, *a, **kw):
        # the command line, for the records a run writes (run.json, report.html)
        cmdline.record(list(sys.argv[1:] if args is None else args))
        return super().main(args, *a, **kw)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except UserError as e:
            click.echo(f"synapse: error: {e}", err=True)
            ctx.exit(EXIT_USAGE)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="synapse-vmt", prog_name="synapse", message="%(prog)s %(version)s")
def main() -> None:
    """Synapse: elastic, virtualized match tables for programmable data planes."""


def _register() -> None:
    # Subsystems add their commands here (one import each).
    from synapse_vmt.cli import commands, help

    for cmd in commands.ALL:
        main.add_command(cmd)
    help.apply(main)  # one-line helps and examples (cli/help.py)


_register()


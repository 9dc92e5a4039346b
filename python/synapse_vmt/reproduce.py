"""``synapse reproduce FIGURE -o DIR``: regenerate the paper's figures.

Each subsystem adds its figure commands to the ``reproduce`` group here (one
line each in :func:`_register`); every command takes ``-o DIR`` and
``--quick`` and writes CSV, PNG and ``summary.json``.
"""

from __future__ import annotations

import click


@click.group("reproduce")
def reproduce() -> None:
    """Reproduce the paper's figures (CSV, PNG and summary.json in DIR)."""


def _register() -> None:
    from synapse_vmt import experiments
    from synapse_vmt.opt import figures

    for cmd in [*experiments.COMMANDS, *figures.COMMANDS]:
        reproduce.add_command(cmd)


_register()

"""Experiments over the simulator: the paper's simulator figures (Fig. 6,
Fig. 7) as ``synapse reproduce fig6|fig7``. :data:`COMMANDS` lists the click
commands the ``reproduce`` group registers."""

from synapse_vmt.experiments.figures import COMMANDS

__all__ = ["COMMANDS"]

"""The command line of this process, for the records a run writes
(``run.json``, the report's header): set by the CLI before it runs a command,
None when a run is started from Python."""

from __future__ import annotations

import shlex
import sys

ARGV: list[str] | None = None


def record(args: list[str]) -> None:
    global ARGV
    ARGV = ["synapse", *args]


def text() -> str:
    """The command line as a shell would take it back."""
    return shlex.join(ARGV) if ARGV else f"(from Python: {shlex.join(sys.argv[:1])})"

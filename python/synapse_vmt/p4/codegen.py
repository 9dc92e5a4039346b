"""Generated code for ``synapse run --p4 --codegen``: the program's
generated Rust module built as a library on this machine, loaded, and
checked against the compiled program's interpreter before a run uses it
(``docs/program-layer-streaming.md``, "Generated code, built and loaded").

``auto`` uses it when it can (the generator takes the program, cargo and
synapse-core's source are there) and otherwise runs the interpreter with
one info line; ``on`` fails with an error when it cannot; ``off`` never
tries. Either way a library whose first packets differ from the
interpreter's is left out with a warning naming the packet.
"""

from __future__ import annotations

import json

from synapse_vmt import _core
from synapse_vmt.errors import UserError

MODES = ("auto", "on", "off")
CHECK_PACKETS = 1000  # packets of the capture run through both before a run uses the loaded code


def load(rp, mode: str, pcap: str, ingress_port: int | None, warn=None, info=None, check: int = CHECK_PACKETS):
    """The loaded code (a ``_core.GenProgram``) for ``rp`` (a
    :class:`synapse_vmt.p4.engine.RustProgram`), or None: run the
    interpreter. ``warn(line)`` hears of a difference from the interpreter,
    ``info(line)`` of why ``auto`` runs the interpreter."""
    if mode not in MODES:
        raise UserError(f"--codegen: expected one of {', '.join(MODES)}, found {mode!r}")
    if mode == "off":
        return None
    desc = json.dumps(rp.description, separators=(",", ":"))
    why = _core.codegen_unavailable(desc)
    gen = None
    if why is None:
        try:
            gen = _core.GenProgram(desc)
        except ValueError as e:
            why = str(e)
    if gen is None:
        if mode == "on":
            raise UserError(f"--codegen on: {why}")
        if info:
            info(f"codegen: {why}; running the interpreter")
        return None
    try:
        diff = gen.check(pcap, check, ingress_port)
    except ValueError as e:
        raise UserError(str(e)) from None
    if diff is not None:
        if warn:
            warn(f"codegen: packet {diff[0]} of {pcap} differs from the interpreter ({diff[1][:200]}); "
                 "running the interpreter")
        return None
    return gen

"""Synapse: elastic, virtualized match tables for programmable data planes.

The data plane (rules, classifiers, the cycle-accurate simulator) is the Rust
extension ``synapse_vmt._core``; this package is the control plane and tools:
validated scenarios, the runtime optimizer, sweeps, plots and the ``synapse``
command line.
"""

from synapse_vmt._core import version as core_version
from synapse_vmt.errors import UserError

__version__ = "0.1.0"
__all__ = ["UserError", "core_version", "__version__"]

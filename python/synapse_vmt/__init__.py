"""Synapse: elastic, virtualized match tables for programmable data planes.

The data plane (rules, classifiers, the cycle-accurate simulator) is the Rust
extension ``synapse_vmt._core``; this package is the control plane and tools:
validated scenarios, the runtime optimizer, sweeps, plots and the ``synapse``
command line.
"""

from importlib.metadata import version as _version

from synapse_vmt._core import version as core_version
from synapse_vmt.errors import UserError

#: The installed package's version (pyproject.toml; CHANGELOG.md lists what each one brought).
__version__ = _version("synapse-vmt")
__all__ = ["UserError", "core_version", "__version__"]

"""``python -m synapse_vmt.cli`` runs the ``synapse`` command."""

import sys

from synapse_vmt.cli import main

sys.exit(main())

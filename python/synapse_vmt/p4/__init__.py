"""P4 programs: read p4c's BMv2 JSON into the tables and control-flow graph
(:class:`~synapse_vmt.p4.cfg.Cfg`) that the optimizer and the simulator take."""

from synapse_vmt.p4.bmv2 import read_bmv2
from synapse_vmt.p4.cfg import Cfg, Edge, KeyField, TableInfo, load_cfg

__all__ = ["Cfg", "Edge", "KeyField", "TableInfo", "load_cfg", "read_bmv2"]

"""Small data files shipped with the package (e.g. the UPF program's CFG,
made by ``synapse p4 cfg`` from p4c's BMv2 JSON of ONF's UP4, Apache-2.0)."""

from importlib.resources import files


def path(name: str):
    return files(__name__) / name

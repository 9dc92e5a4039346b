"""CPU cost of a match-action table on a software target (t4p4s on DPDK), in
the seed's model forms (``p4-target-properties.txt``):

- a packet costs ``base_cycles`` plus each table it visits;
- **exact** (a hash table): ``p ln(q n) + r`` cycles while the table's
  footprint ``R(n) = 128 B + n (k + a + 8 B)`` fits the L3 cache, and the
  seed's ``s / (t n + u) + v`` beyond it (DRAM misses take over), with ``v``
  set so the pieces meet where the footprint reaches L3 (``n_b``; it depends
  on the key width ``k``): beyond, ``p ln(q n_b) + r + s / (t n + u) -
  s / (t n_b + u)``. The seed fits ``v`` freely, so its cost jumps at the
  boundary;
- **lpm**: logarithmic, ``p ln(q n) + r`` (DIR-24-8 in t4p4s; a trie here);
- **ternary** (and range/optional): software loops over the entries, so the
  cost is linear, ``a n + b``.

The parameters, the base and the clock are measured on one machine by
:mod:`.measure` and kept in ``params.toml`` with its fingerprint
(:mod:`.machine`); packets per second per core is ``clock / cycles`` and, as
the seed observed, scales linearly with cores.
"""

from __future__ import annotations

import numpy as np

from synapse_vmt.cost.params import Params


def exact_footprint(n: np.ndarray | float, key_bytes: float, p: Params) -> np.ndarray:
    """The seed's R_exact(n, k, a) in bytes."""
    c = p.cpu
    return c.table_overhead_bytes.value + np.asarray(n, float) * (key_bytes + c.action_bytes.value + c.entry_overhead_bytes.value)


def log_form(n, p_, q, r):
    return p_ * np.log(q * np.asarray(n, float)) + r


def hyperbolic_form(n, s, t, u, v):
    return s / (t * np.asarray(n, float) + u) + v


def boundary_entries(key_bytes: float, p: Params) -> float:
    """``n_b``: the entries at which an exact table's footprint fills L3."""
    c = p.cpu
    return (c.l3_bytes.value - c.table_overhead_bytes.value) / (key_bytes + c.action_bytes.value + c.entry_overhead_bytes.value)


def linear_form(n, a, b):
    return a * np.asarray(n, float) + b


def exact_cycles(n, fits: dict[str, float], n_boundary: float) -> np.ndarray:
    """Exact-match cycles per lookup: the log form below ``n_boundary``
    entries, the hyperbolic form beyond, meeting the log form there."""
    n = np.maximum(np.asarray(n, float), 1.0)
    f = fits
    nb = max(float(n_boundary), 1.0)
    at = float(log_form(nb, f["p"], f["q"], f["r"]))
    beyond = at + hyperbolic_form(n, f["s"], f["t"], f["u"], 0.0) - float(hyperbolic_form(nb, f["s"], f["t"], f["u"], 0.0))
    return np.where(n < nb, log_form(n, f["p"], f["q"], f["r"]), beyond)


def kind_of(matches: list[str]) -> str:
    """The cost class of a table from its fields' match kinds: any ternary,
    range or optional field makes it ternary; else any lpm makes it lpm."""
    if any(m in ("ternary", "range", "optional") for m in matches):
        return "ternary"
    if "lpm" in matches:
        return "lpm"
    return "exact"


def table_cycles(kind: str, n: int, key_bytes: float, p: Params) -> float:
    """Cycles one lookup in a table of ``n`` entries costs (one core)."""
    fit = p.cpu.fit
    n = max(int(n), 1)
    if kind == "exact":
        return float(exact_cycles(n, fit.exact.values(), boundary_entries(key_bytes, p)))
    if kind == "lpm":
        f = fit.lpm.values()
        return float(max(log_form(n, f["p"], f["q"], f["r"]), 1.0))
    f = fit.ternary.values()
    return float(linear_form(n, f["a"], f["b"]))

"""Simulator experiments of the runtime OPT: Fig. 10 (USL samples and fit) and Fig. 8 (closed loop).

Both drive the cycle-accurate simulator through its Python API
(``synapse_vmt._core.Simulator(config_json)``, see ``docs/simulator-api.md``)
with one VMT, as in the paper's single-VMT experiments: a ClassBench-style
ACL rule set, PMUs of 256 entries, CAIDA-like flow traffic. Offered load is
set by the number of flows (each flow a Poisson process with rate
proportional to its size), so load and working set grow together, as they
do when the flow arrival rate of a profile rises.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Callable

import numpy as np

from synapse_vmt.opt.controller import concat
from synapse_vmt.opt.counters import Samples, warm_samples
from synapse_vmt.opt.usl import Fit, fit

SimFactory = Callable[[dict], object]

TABLE = "acl"


def core_factory(config: dict):
    """Build the Rust simulator from a config dict."""
    try:
        from synapse_vmt._core import Simulator
    except ImportError:  # pragma: no cover - depends on the build
        from synapse_vmt.errors import UserError

        raise UserError("this build of synapse_vmt has no simulator (synapse_vmt._core.Simulator)") from None
    return Simulator(json.dumps(config))


@dataclass
class Setup:
    """The single-VMT experiment: everything but PMUs and traffic size.

    Traffic goes through the traffic model with a named profile (``flat`` for
    calibration): CAIDA 2019 flow sizes truncated at 1 MB (so that a window's
    load comes from many flows rather than one elephant), 800-byte packets,
    flows active ``flow_duration_ns`` each. Calibration and the closed loop
    use the same flow duration, so load and working set scale alike in both."""

    pmus_total: int = 8
    block_size: int = 256
    channels: int = 4
    rules: int = 1000
    window_ns: float = 10_000.0
    flow_duration_ns: float = 300_000.0
    dist: str = "caida2019"
    max_bytes: float = 1e6
    seed: int = 1

    def config(self, pmus: list[int], flows: int, duration_ns: float, profile: str = "flat") -> dict:
        traffic = {"kind": "flows", "dist": self.dist, "max_bytes": self.max_bytes, "flows": int(flows),
                   "flow_duration_ns": self.flow_duration_ns, "mean_pkt_bytes": 800.0, "profile": profile}
        return {
            "seed": self.seed,
            "window_ns": self.window_ns,
            "duration_ns": float(duration_ns),
            "tables": [{"name": TABLE, "rules": {"generate": {"type": "acl", "count": self.rules, "seed": self.seed}}, "pmus": list(pmus)}],
            "entry": {TABLE: 1.0},
            "pmus": {"count": self.pmus_total, "block_size": self.block_size},
            "interconnect": {"kind": "segmented", "channels": self.channels},
            "traffic": traffic,
        }


class Recording:
    """The simulator, keeping every window and edge batch the controller reads."""

    def __init__(self, sim):
        self.sim, self.parts, self.edge_parts = sim, [], []

    def windows(self):
        w = self.sim.windows()
        self.parts.append(w)
        return w

    def edges(self):
        e = self.sim.edges()
        self.edge_parts.append(e)
        return e

    def __getattr__(self, name):
        return getattr(self.sim, name)

    def all_windows(self) -> dict:
        parts = [p for p in self.parts if len(p["t_ns"])]
        return concat(parts) if parts else {}

    def all_edges(self) -> dict:
        parts = [p for p in self.edge_parts if len(p["t_ns"])]
        return concat(parts) if parts else {}


def mean_latency_ns(w: dict) -> float:
    """Mean per-key match latency over window rows (each window's mean
    weighted by its lookups); NaN without latency columns or lookups."""
    if "lat_mean_ns" not in w or not len(w.get("t_ns", [])):
        return float("nan")
    n = np.asarray(w["hits"], dtype=float) + np.asarray(w["misses"], dtype=float)
    lat = np.nan_to_num(np.asarray(w["lat_mean_ns"], dtype=float))
    return float(np.sum(lat * n) / n.sum()) if n.sum() > 0 else float("nan")


def collect(factory: SimFactory, setup: Setup, n: int, flows: int, duration_ns: float, warmup_ns: float) -> Samples:
    """(load, throughput, n) of every window after the warm-up, one run."""
    sim = factory(setup.config(list(range(n)), flows, duration_ns))
    return warm_samples(sim, warmup_ns, duration_ns, setup.window_ns)[0]


def calibrate(factory: SimFactory, setup: Setup, pmu_counts, flow_levels, duration_ns: float, warmup_ns: float) -> tuple[Fit, dict[int, Samples]]:
    """Samples over loads for each PMU count, and the USL fitted to all of them."""
    per_n = {}
    for n in pmu_counts:
        s = Samples.empty()
        for f in flow_levels:
            s = s.extend(collect(factory, setup, n, f, duration_ns, warmup_ns))
        per_n[int(n)] = s
    alls = Samples.empty()
    for s in per_n.values():
        alls = alls.extend(s)
    return fit(alls.load_mpps, alls.throughput_mpps, alls.pmus), per_n


def override(setup: Setup, **kw) -> Setup:
    s = copy.copy(setup)
    for k, v in kw.items():
        setattr(s, k, v)
    return s

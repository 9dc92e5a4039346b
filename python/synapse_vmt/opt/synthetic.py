"""Synthetic allocation problems shaped like a large switch pipeline (for Fig. 9).

switch.p4-style programs apply their tables in stages: a PHV crosses every
stage, each stage holds a few alternative tables (which one applies depends
on the packet: L2 or L3, v4 or v6, tunnelled or not), and some tables are
skipped by a branch. The generator builds such a layered DAG: ``T`` tables in
stages of 1–4, every table sending its PHVs on to 1–3 tables of the next one
or two stages (a small share leaving the pipeline, as drops do), and draws a
USL curve per table around the capacities the simulator shows for 256-entry
PMUs (tens to a few hundred Mpps).
"""

from __future__ import annotations

import numpy as np

from synapse_vmt.opt.problem import Problem
from synapse_vmt.opt.usl import Usl


def switch_like_cfg(T: int, rng: np.random.Generator) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(names, entry, P) of a layered DAG with T tables."""
    stages: list[list[int]] = []
    j = 0
    while j < T:
        w = int(min(rng.integers(1, 5), T - j))
        stages.append(list(range(j, j + w)))
        j += w
    P = np.zeros((T, T))
    for s, tables in enumerate(stages[:-1]):
        later = [t for st in stages[s + 1 : s + 3] for t in st]
        for i in tables:
            k = int(min(rng.integers(1, 4), len(later)))
            dst = rng.choice(later, size=k, replace=False)
            share = rng.dirichlet(np.ones(k)) * rng.uniform(0.9, 1.0)  # the rest is dropped
            P[i, dst] = share
    entry = np.zeros(T)
    entry[stages[0]] = rng.dirichlet(np.ones(len(stages[0])))
    return [f"t{i}" for i in range(T)], entry, P


def random_usl(rng: np.random.Generator) -> Usl:
    """A USL curve whose capacity grows with n, ~50 Mpps at 1 PMU to a few hundred."""
    b_s = rng.uniform(0.01, 0.03)
    return Usl(-b_s * rng.uniform(0.02, 0.08), b_s, -rng.uniform(0, 5e-7), rng.uniform(5e-6, 2e-5))


def switch_like_problem(T: int, N: int, rng: np.random.Generator, offered_mpps: float | None = None) -> Problem:
    names, entry, P = switch_like_cfg(T, rng)
    counts = np.arange(N + 1)
    cap = np.array([random_usl(rng).capacity(counts) for _ in range(T)])
    return Problem(names, entry, P, cap, N, 1, offered_mpps)

"""A TEST DOUBLE of the simulator's Python API (docs/simulator-api.md), for controller tests only.

A fluid model, not the hardware: per 10 µs window each table receives its
share of the input, processes at most its (hidden, true) USL throughput for
the PMUs it holds, carries a bounded backlog and drops the rest; PMUs leaving
a table drain for one window (transient) before they are free or join the
next table. Results from it are never reported as Synapse results.
"""

from __future__ import annotations

import numpy as np

from synapse_vmt.opt.usl import Usl


class FakeSim:
    def __init__(self, names, entry, P, true_usl: dict[str, Usl], n_pmus, channels, rate_mpps, initial, window_ns=10_000.0, fifo=2000.0):
        self.names = list(names)
        self.entry = np.asarray(entry, float)
        self.P = np.asarray(P, float)
        self.true = true_usl
        self.rate = rate_mpps  # t_ns -> Mpps
        self.w = window_ns
        self.fifo = fifo
        self.t = 0.0
        per = -(-n_pmus // channels)
        self.chan = [i // per for i in range(n_pmus)]
        self.owner: list[int | None] = [None] * n_pmus  # associated table
        self.draining: list[tuple[int, int | None] | None] = [None] * n_pmus  # (from, next) while transient
        for name, ids in initial.items():
            for p in ids:
                self.owner[p] = self.names.index(name)
        self.backlog = np.zeros(len(self.names))
        self._w = {k: [] for k in ("t_ns", "table", "arrived", "processed", "hits", "misses", "pmus", "drops")}
        self._e = {k: [] for k in ("t_ns", "src", "dst", "count")}
        self.assign_calls = 0
        self.totals = {"created": 0.0, "exited": 0.0, "dropped": 0.0}

    def table_names(self):
        return list(self.names)

    def now_ns(self):
        return self.t

    def _window(self):
        T = len(self.names)
        t_end = self.t + self.w
        n = np.array([sum(1 for o in self.owner if o == j) for j in range(T)])
        arrived = self.entry * self.rate(self.t) * self.w / 1e3
        self.totals["created"] += float(arrived.sum())
        out = np.zeros(T)
        for j in range(T):  # tables are in topological order
            a = arrived[j] + (out @ self.P[:, j] if j else 0.0)
            arrived[j] = a
            work = a + self.backlog[j]
            x = float(self.true[self.names[j]].throughput(work * 1e3 / self.w, n[j])) * self.w / 1e3 if n[j] else 0.0
            done = min(work, x)
            left = work - done
            drops = max(0.0, left - self.fifo)
            self.backlog[j] = left - drops
            self.totals["dropped"] += drops
            self.totals["exited"] += done * (1 - self.P[j].sum())
            out[j] = done
            hit = 1 - 0.5 ** n[j]
            for k, v in (("t_ns", t_end), ("table", j), ("arrived", a), ("processed", done), ("hits", done * hit), ("misses", done * (1 - hit)), ("pmus", n[j]), ("drops", drops)):
                self._w[k].append(v)
            for k in range(T):
                if self.P[j, k] > 0:
                    self._edge(t_end, j, k, done * self.P[j, k])
            self._edge(t_end, j, -1, done * (1 - self.P[j].sum()))
        # Arrivals that enter no table leave at once.
        self.t = t_end
        for p, d in enumerate(self.draining):  # transient PMUs finish draining
            if d is not None:
                self.draining[p] = None
                self.owner[p] = d[1]

    def _edge(self, t, s, d, c):
        for k, v in (("t_ns", t), ("src", s), ("dst", d), ("count", c)):
            self._e[k].append(v)

    def run_until(self, t_ns):
        while self.t + self.w <= t_ns + 1e-9:
            self._window()

    def windows(self):
        out = {k: np.array(v) for k, v in self._w.items()}
        self._w = {k: [] for k in self._w}
        return out

    def edges(self):
        out = {k: np.array(v) for k, v in self._e.items()}
        self._e = {k: [] for k in self._e}
        return out

    def assign(self, table, pmus):
        self.assign_calls += 1
        j = self.names.index(table)
        want = set(pmus)
        for p in range(len(self.owner)):
            if self.owner[p] == j and p not in want:
                self.owner[p] = None
                self.draining[p] = (j, None)
        for p in want:
            if self.draining[p] is not None:
                self.draining[p] = (self.draining[p][0], j)
            elif self.owner[p] is None:
                self.owner[p] = j
            elif self.owner[p] != j:
                self.draining[p] = (self.owner[p], j)
                self.owner[p] = None

    def check_invariants(self):
        """The fluid's conservation (its counts rounded): created = exited + dropped + in flight."""
        c = {k: int(round(v)) for k, v in self.totals.items()}
        c["in_flight"] = int(round(float(self.backlog.sum())))
        return {**c, "lost": 0, "duplicates": 0, "wrong_action": 0, "stale_answers": 0, "ok": c["in_flight"] == 0}

    def drain(self):
        """Ends the run: the fluid's backlog leaves at once (drained)."""
        self.totals["exited"] += float(self.backlog.sum())
        self.backlog[:] = 0.0
        return {"drained": True, "ns": 0.0, "in_flight": {}}

    def pmu_states(self):
        out = []
        for p in range(len(self.owner)):
            if self.draining[p] is not None:
                out.append({"id": p, "state": "transient", "table": self.names[self.draining[p][0]], "channel": self.chan[p]})
            elif self.owner[p] is not None:
                out.append({"id": p, "state": "associated", "table": self.names[self.owner[p]], "channel": self.chan[p]})
            else:
                out.append({"id": p, "state": "free", "table": None, "channel": self.chan[p]})
        return out


FAKE_USL = Usl(-0.0012, 0.0095, -1e-6, 9e-6)
SHAPES = {  # relative flow arrival rate over the run, t in [0, 1]
    "step": lambda x: 3.0 if 1 / 3 <= x < 2 / 3 else 1.0,
    "ramp": lambda x: 1 + 3 * x / 0.75 if x < 0.75 else 4 - 3 * (x - 0.75) / 0.25,
    "diurnal": lambda x: 1 + 0.75 * np.sin(2 * np.pi * x),
    "burst": lambda x: 4.0 if 0.2 <= x < 0.3 or 0.6 <= x < 0.65 else 1.0,
}


def fake_factory(config: dict, mpps_per_flow: float = 0.01) -> FakeSim:
    """Config (docs/simulator-api.md shape, one table) -> FakeSim; offered rate = flows × mpps_per_flow (times the profile)."""
    t = config["tables"][0]
    tr = config["traffic"]
    dur = config["duration_ns"]
    shape = SHAPES.get(tr.get("profile"), lambda x: 1.0)
    base = tr["flows"] * mpps_per_flow
    return FakeSim([t["name"]], [1.0], [[0.0]], {t["name"]: FAKE_USL}, config["pmus"]["count"],
                   config["interconnect"]["channels"], lambda ns: base * shape(ns / dur), {t["name"]: t["pmus"]},
                   window_ns=config["window_ns"])

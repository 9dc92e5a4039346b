"""``synapse serve --sim SCENARIO``: the running simulated Synapse as the
P4Runtime target.

A scenario (ClassBench-style TOML, :mod:`synapse_vmt.scenario`) builds a
``_core.Simulator``; a background thread advances it ``slice_ns`` of
simulated time every ``period_s`` of wall time (``run_until`` releases the
GIL, so gRPC keeps serving). A P4 table is **simulated** when the scenario
has a table of the same name (full or after the last dot) and its key is the
ClassBench 5-tuple shape (five fields of 32, 32, 16, 16, 8 bits), the schema
the scenario's tables are built over. Every committed Write on a simulated
table is forwarded as one transaction to ``Simulator.request_transaction`` (lines of
sim/updates.rs: ``insert POS FIELDS...``, ``delete POS``, ``modify POS``,
``default``), so the VMT's update engine builds the new version, the PMUs
drop the answers it made stale, and the versioned oracle checks every answer
after it.

With ``optimizer`` (``simopt.OptConfig``) the runtime optimizer runs in the
same thread: slices end at its period ends, and each period's counters go to
``opt.Controller`` which re-assigns PMUs (``opt/simopt.py``).

Positions: the P4Runtime entries sit above the scenario's initial rules, in
P4 match order (ternary/range: higher priority first; lpm: longer prefixes
first; ties: insertion order); this module keeps that order to turn an
entry into its position.
"""

from __future__ import annotations

import bisect
import threading

from synapse_vmt.p4.entries import Entry, Match, wildcard
from synapse_vmt.p4rt.store import Op
from synapse_vmt.sim import Simulation

CLASSBENCH_WIDTHS = (32, 32, 16, 16, 8)


def _token(m: Match, kf) -> str:
    """One field in the update-file syntax."""
    if m == wildcard(kf) and kf.match != "exact":
        return "*"
    if m.kind == "exact":
        return str(m.value)
    if m.kind == "lpm":
        return f"{m.value}/{m.prefix_len}"
    if m.kind == "range":
        return f"{m.lo}..{m.hi}"
    return f"{m.value}&&&{m.mask}"  # ternary, optional


class MatchOrder:
    """Per table, where the P4Runtime entries sit in P4 match order (the
    positions the simulator's update engine numbers): ternary/range higher
    priority first, lpm longer prefixes first, ties in insertion order."""

    def __init__(self, tables):
        self.order: dict[str, list[tuple]] = {n: [] for n in tables}  # entry keys in position order
        self.rank: dict[str, list[int]] = {n: [] for n in tables}  # their sort keys (ascending)

    @staticmethod
    def _sort_key(e: Entry) -> int:
        if e.priority is not None:
            return -e.priority
        return -sum(m.prefix_len or 0 for m in e.matches.values() if m.kind == "lpm")

    def apply(self, table: str, kind: str, e: Entry) -> int | None:
        """The position an insert, modify or delete of ``e`` takes (the
        order follows it); None: ``e`` is not known here (written before the
        simulator started, e.g. before a reconcile)."""
        order, rank = self.order[table], self.rank[table]
        if kind == "insert":
            r = self._sort_key(e)
            pos = bisect.bisect_right(rank, r)
            order.insert(pos, e.key())
            rank.insert(pos, r)
            return pos
        key = e.key()
        if key not in order:
            return None
        pos = order.index(key)
        if kind == "delete":
            del order[pos], rank[pos]
        return pos


class SimTarget:
    """A simulator fed by a server's committed writes."""

    def __init__(self, scenario, prog, slice_ns: float = 20_000.0, period_s: float = 0.01, optimizer=None,
                 calibrated=None):
        self.sim = Simulation(scenario)
        # The runtime optimizer (simopt.OptConfig; None: the scenario's PMU
        # assignment stays). Calibrated before the clock starts.
        self.opt = None
        if optimizer is not None:
            from synapse_vmt.opt.simopt import ServeOptimizer

            self.opt = ServeOptimizer(self.sim, scenario, optimizer, calibrated)
        self.slice_ns, self.period_s = slice_ns, period_s
        names = set(self.sim.table_names())
        self.tables: dict[str, str] = {}  # P4 table -> simulator table
        self.skipped: dict[str, str] = {}  # P4 table -> why it is not simulated
        for name, spec in prog.tables.items():
            sim_name = name if name in names else name.rsplit(".", 1)[-1]
            if sim_name not in names:
                continue
            widths = tuple(k.width for k in spec.info.key)
            if widths != CLASSBENCH_WIDTHS:
                self.skipped[name] = f"key widths {widths}, the simulator's tables take {CLASSBENCH_WIDTHS}"
                continue
            self.tables[name] = sim_name
        self.specs = {n: prog.tables[n] for n in self.tables}
        self.positions = MatchOrder(self.tables)
        self.forwarded = 0
        from synapse_vmt.view.live import Recorder

        self.recorder = Recorder(self.sim.table_names(), self.sim.window_ns)  # recent windows: the live view (--http)
        self.cfg_json = None  # the graph: the scenario's tables and edges
        self.lock = threading.Lock()  # the simulator is used by one thread at a time
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="synapse-sim")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            with self.lock:
                t = self.sim.now_ns() + self.slice_ns
                if self.opt is None:
                    self.sim.run_until(t)
                    # drained: the server keeps the summary and the live view's recent windows
                    self.recorder.add(self.sim.core.windows(), self.sim.core.edges())
                    continue
                # Slices end at the optimizer's period ends and alarm checks.
                while True:
                    stop = min(t, self.opt.next_stop())
                    self.sim.run_until(stop)
                    w, e = self.sim.core.windows(), self.sim.core.edges()
                    self.opt.after_slice(w, e)
                    self.recorder.add(w, e)
                    if stop >= t:
                        break

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def forward(self, ops: list[Op], locked: bool = False) -> int:
        """Queue the committed ``ops`` (in store order) on the simulator, one
        batch per table; how many lines went. ``locked``: the caller holds
        :attr:`lock` (so the store's order and the simulator's agree)."""
        if not locked:
            with self.lock:
                return self.forward(ops, locked=True)
        batches: dict[str, list[str]] = {}
        for op in ops:
            if op.table not in self.tables:
                continue
            lines = batches.setdefault(op.table, [])
            if op.kind == "default":
                lines.append("default")
                continue
            pos = self.positions.apply(op.table, op.kind, op.entry)
            if pos is None:  # written before this simulator started (a reconcile)
                continue
            if op.kind == "insert":
                spec = self.specs[op.table]
                fields = " ".join(_token(op.entry.matches[k.field], k) for k in spec.info.key)
                lines.append(f"insert {pos} {fields}")
            else:
                lines.append(f"{op.kind} {pos}")
        # One Write is one transaction over the tables it touches.
        parts = {self.tables[t]: lines for t, lines in batches.items() if lines}
        n = self.sim.request_transaction(parts) if parts else 0
        self.forwarded += n
        return n

    def state(self, table: str) -> dict:
        """Synapse's state of a simulated table (the state extern's ``sim``)."""
        with self.lock:
            summ = self.sim.summary()
            inv = self.sim.check_invariants()
            upd = self.sim.update_stats()
            pmus = [p for p in self.sim.pmu_states() if p.get("table") == self.tables[table] and p["state"] == "associated"]
            opt = self.opt.state() if self.opt is not None else {"enabled": False}
        t = summ["tables"].get(self.tables[table], {})
        return {
            "sim_table": self.tables[table], "sim_time_ns": summ["sim_time_ns"], "pmus": len(pmus),
            "hit_rate": t.get("hit_rate", 0.0), "keys": t.get("keys", 0),
            "mean_latency_ns": t.get("mean_latency_ns", 0.0), "p99_latency_ns": t.get("p99_latency_ns", 0.0),
            "wrong_action": inv["wrong_action"], "stale_answers": inv["stale_answers"],
            "updates_requested": upd["requested"], "updates_committed": upd["committed"],
            "updates_rejected": upd["rejected"], "invalidated": upd["invalidated"],
            "update_latency_ns_p50": upd["latency_ns_p50"], "update_latency_ns_p99": upd["latency_ns_p99"],
            "optimizer": opt,
        }

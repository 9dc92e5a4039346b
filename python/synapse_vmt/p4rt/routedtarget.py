"""``synapse serve --sim PROGRAM_SCENARIO``: a P4 program's tables (UPF)
simulated while a P4Runtime client writes them.

Why a separate target: in a program like UPF one table's action sets the
metadata the next table keys on (a session entry gives the UE address the
terminations key on), so a write changes not only a table's entries but
which tables a packet visits and with which keys. The routed simulator
(``crates/synapse-core/src/sim/routed.rs``) replays the functional
interpreter's visits (:mod:`synapse_vmt.p4.simrun`); here the routes follow
the writes:

- At start the scenario's ``[traffic]`` classes give the frames (drawn from
  the scenario's entries file, e.g. the UPF example's sessions, so uplink
  frames carry TEIDs a controller will install); the interpreter runs them
  over the store (empty after a pipeline push) and every keyed table of the
  program becomes a VMT, visited or not yet. Each distinct frame is a
  **flow**; arrivals pick flows uniformly at the scenario's ``rate_mpps``.
- A committed Write is **one transaction** (``_core.change_routes``): its
  table operations (insert/delete/modify/default at positions in match
  order), the keys new to a table, and the new route of every flow whose
  path may change. Those are the flows with a hop whose key a written entry
  covers (or, for a default change, every flow visiting the table): only a
  changed entry can change a match, and the interpreter re-runs those
  frames over the store after the Write, so changes further down their
  paths are followed too. The simulator runs ``[update_engine] consistency
  = "program"``: the flows switch at the transaction's flip, so a PHV sees
  one version of every table and of its route; the interpreter's matched
  entry on every new hop is checked against the simulator's versioned
  oracle (``route_stats``: ``mismatched`` must be 0).
- The ELU defaults to the decision tree (P4 ternary and range entries), the
  PMUs are dealt evenly over the tables (the scenario's ``pmus``).
"""

from __future__ import annotations

import json
import os
import threading
import time

import numpy as np

from synapse_vmt import _core
from synapse_vmt.errors import UserError
from synapse_vmt.p4.entries import Entry, TableEntries
from synapse_vmt.p4.interp import Program, encode_words
from synapse_vmt.p4.simrun import _word_rows, even_split, max_key_words, sim_config
from synapse_vmt.p4rt.simtarget import MatchOrder
from synapse_vmt.p4rt.store import Op

KINDS = {"insert": 0, "delete": 1, "modify": 2, "default": 3}


def is_program_scenario(path: str) -> bool:
    """A TOML with ``[program]`` (simrun.load_scenario), not a ClassBench scenario."""
    from synapse_vmt.errors import read_toml

    return isinstance(read_toml(path).get("program"), dict)


class UniformFeeder:
    """Arrivals at a fixed rate, each of a flow drawn uniformly (seeded)."""

    def __init__(self, flows: int, rate_mpps: float, seed: int):
        self.flows, self.gap = flows, 1e6 / rate_mpps  # ps between arrivals
        self.rng = np.random.default_rng(seed)
        self.next = 0  # arrivals fed so far

    def __call__(self, t_end_ps: int) -> tuple[np.ndarray, np.ndarray]:
        n = max(0, int(np.ceil(t_end_ps / self.gap)) - self.next)
        t = ((self.next + np.arange(n)) * self.gap).astype(np.uint64)
        t = t[t < t_end_ps]
        self.next += len(t)
        return t, self.rng.integers(0, self.flows, len(t), dtype=np.uint32)


class RoutedTarget:
    """A routed simulator of the served program, fed by committed writes
    (same face as :class:`simtarget.SimTarget` for the server)."""

    def __init__(self, scenario: dict, device_config: bytes, store, slice_ns: float = 20_000.0,
                 period_s: float = 0.01):
        from synapse_vmt.p4 import gentraffic
        from synapse_vmt.p4.bmv2 import read_program
        from synapse_vmt.p4.entries import load_entries
        from synapse_vmt.p4.simrun import dedup_frames

        self.store = store
        self.seed = int(scenario.get("seed", 1))
        try:
            doc = json.loads(device_config)
        except ValueError as e:
            raise UserError(f"serve --sim: the pipeline's device config is not BMv2 JSON ({e})") from None
        self.interp = Program(doc, "<pipeline>")
        traffic = scenario.get("traffic")
        if traffic is None:
            raise UserError("serve --sim: a program scenario needs [traffic] (the frames to simulate)")
        # The frames: drawn from the scenario's entries (what a controller is expected to write).
        prog = scenario["program"]
        seed_entries = load_entries(scenario.get("entries_file") or os.devnull, prog)
        frames, _ = gentraffic.class_frames(traffic, read_program(prog), seed_entries, self.seed)
        self.frames, _ = dedup_frames(frames)
        # Every keyed table of the program a simulated key can hold.
        limit = max_key_words()
        self.specs = [t for t in self.interp.tables if 0 < t.words <= limit]
        self.skipped = {t.name: f"key of {t.words} words (simulator: 1..{limit})"
                        for t in self.interp.tables if not 0 < t.words <= limit}
        self.index = {t.name: i for i, t in enumerate(self.specs)}  # P4 table -> simulator table
        self.tables = {n: n for n in self.index}  # the server's view: simulated P4 tables
        self._interp_index = {t.name: i for i, t in enumerate(self.interp.tables)}
        self.key_ids: list[dict[tuple, int]] = [{} for _ in self.specs]
        self.key_rows: list[list[list[int]]] = [[] for _ in self.specs]
        self._keys_np: list[np.ndarray | None] = [None for _ in self.specs]
        self.users: list[dict[int, set[int]]] = [{} for _ in self.specs]  # per table: key -> flows using it
        self.route: list[list[tuple[int, int]]] = [[] for _ in self.frames]  # per flow: its latest hops
        # Positions (match order) as the store orders entries: per table the entries' keys and sort keys.
        self.positions = MatchOrder(self.index)
        snap = store.snapshot()
        # The interpreter's bound tables, kept across writes: a table a Write
        # does not touch keeps its entries object (self._snap), so it is not bound again.
        self._tcache: dict = {}
        self._snap = snap
        for name, te in snap.items():
            if name in self.index:
                for e in te.entries:
                    self.positions.apply(name, "insert", e)
        hops, expected = self._interpret(range(len(self.frames)), snap)
        self._sent = [len(r) for r in self.key_rows]  # built into the simulator
        start, ht, hk = [0], [], []
        for f, h in enumerate(hops):
            self._set_route(f, h)
            for s, k in h:
                ht.append(s)
                hk.append(k)
            start.append(len(ht))
        args = []
        for s, spec in enumerate(self.specs):
            bits, kinds, lo, hi, mask = _word_rows(spec, snap.get(spec.name))
            keys = np.array(self.key_rows[s], dtype=np.uint32).reshape(len(self.key_rows[s]), len(bits))
            exp = np.full(len(keys), -1, dtype=np.int64)
            for f, h in enumerate(hops):
                for (t, k), e in zip(h, expected[f]):
                    if t == s:
                        exp[k] = e
            args.append((spec.name, bits, kinds, lo, hi, mask, keys, exp))
        base = json.loads(_core.default_sim_config())
        base["elu"]["algo"] = "dtree"  # P4 ternary and range entries
        overrides = scenario.get("overrides") or {}
        for k, v in overrides.items():
            if isinstance(v, dict) and isinstance(base.get(k), dict):
                base[k].update(v)
            else:
                base[k] = v
        base.setdefault("update_engine", {})["consistency"] = "program"
        base["seed"] = self.seed
        names = [t.name for t in self.specs]
        total = int(scenario.get("pmus", 16))
        cfg = sim_config(base, names, even_split(names, total), total)
        try:
            self.core = _core.routed_simulator(json.dumps(cfg), args, np.array(start, dtype=np.uint32),
                                               np.array(ht, dtype=np.uint32), np.array(hk, dtype=np.uint32))
        except ValueError as e:
            raise UserError(f"serve --sim: {e}") from None
        self.width = int(self.core.key_words)  # rows cross PyO3 this wide
        self.feeder = UniformFeeder(len(self.frames), float(scenario.get("rate_mpps", 50.0)), self.seed)
        self.forwarded = 0
        self.writes = 0  # transactions sent
        self.reinterpreted = 0  # flows run through the interpreter again
        self.write_s: list[float] = []  # wall time per forwarded Write (interpreter + simulator call)
        self.opt = None  # the runtime optimizer is not wired for routed tables
        self.slice_ns, self.period_s = slice_ns, period_s
        from synapse_vmt.p4.bmv2 import read_bmv2
        from synapse_vmt.view.live import Recorder

        self.recorder = Recorder(names, float(json.loads(self.core.config_json()).get("window_ns", 10_000.0)))  # the live view
        self.cfg_json = read_bmv2(prog).to_json()  # the live view's graph
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="synapse-routed-sim")
        self._thread.start()

    # --- the clock ---

    def run_until(self, t_ns: float) -> None:
        """Feed the arrivals before ``t_ns`` and advance (caller holds :attr:`lock`)."""
        t, f = self.feeder(int(t_ns * 1000) + 1)
        if len(t):
            _core.push_arrivals(self.core, t, f)
        self.core.run_until(t_ns)
        # drained: the server keeps the summary and the live view's recent windows
        self.recorder.add(self.core.windows(), self.core.edges())

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            with self.lock:
                self.run_until(self.core.now_ns() + self.slice_ns)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    # --- routes ---

    def _interpret(self, flows, snap) -> tuple[list[list[tuple[int, int]]], list[list[int]]]:
        """Per flow its hops (simulator table, key id; new keys get ids) and
        the matched entry per hop (-1: miss), from the interpreter over ``snap``."""
        flows = list(flows)
        tr = self.interp.run([self.frames[f] for f in flows], snap, seed=self.seed, table_cache=self._tcache)
        st, se = tr.step_table.tolist(), tr.step_entry.tolist()
        ps = tr.pkt_start.tolist()
        sim_of = [self.index.get(t.name, -1) for t in tr.tables]
        hops, expected = [], []
        for i in range(len(flows)):
            h, e = [], []
            for j in range(ps[i], ps[i + 1]):
                s = sim_of[st[j]]
                if s < 0:
                    continue
                key = tr.step_keys[j]
                ids = self.key_ids[s]
                k = ids.get(key)
                if k is None:
                    k = ids[key] = len(ids)
                    self.key_rows[s].append(encode_words(self.specs[s], key))
                    self._keys_np[s] = None
                h.append((s, k))
                e.append(se[j])
            hops.append(h)
            expected.append(e)
        return hops, expected

    def _take_new_keys(self) -> dict[int, list[list[int]]]:
        """Keys given ids since the last call (per table, in id order)."""
        out = {}
        for s, rows in enumerate(self.key_rows):
            out[s] = rows[self._sent[s]:]
            self._sent[s] = len(rows)
        return out

    def _set_route(self, f: int, hops: list[tuple[int, int]]) -> None:
        for s, k in self.route[f]:
            u = self.users[s].get(k)
            if u is not None:
                u.discard(f)
        self.route[f] = hops
        for s, k in hops:
            self.users[s].setdefault(k, set()).add(f)

    def _keys(self, s: int) -> np.ndarray:
        if self._keys_np[s] is None:
            w = self.specs[s].words
            self._keys_np[s] = np.array(self.key_rows[s], dtype=np.uint32).reshape(len(self.key_rows[s]), w)
        return self._keys_np[s]

    def _covered(self, s: int, e: Entry | None) -> set[int]:
        """Flows with a hop at table ``s`` whose key entry ``e`` covers (None:
        a default change: every flow visiting the table)."""
        users = self.users[s]
        if e is None:
            return set().union(*users.values()) if users else set()
        keys = self._keys(s)
        if not len(keys):
            return set()
        _, _, lo, hi, mask = _word_rows(self.specs[s], TableEntries(self.specs[s].name, [e]))
        m = keys & mask[0]
        hit = np.nonzero(np.all((m >= lo[0]) & (m <= hi[0]), axis=1))[0]
        out: set[int] = set()
        for k in hit.tolist():
            out |= users.get(k, set())
        return out

    # --- writes ---

    def forward(self, ops: list[Op], locked: bool = False) -> int:
        """One committed Write (``ops`` in store order, applied to the store
        already) as one simulator transaction; how many table operations went."""
        if not locked:
            with self.lock:
                return self.forward(ops, locked=True)
        t0 = time.perf_counter()
        tab, kind, pos, rows = [], [], [], []
        affected: set[int] = set()
        for op in ops:
            s = self.index.get(op.table)
            if s is None:
                continue
            spec = self.specs[s]
            if op.kind == "default":
                p, e = 0, None
            else:
                p = self.positions.apply(op.table, op.kind, op.entry)
                if p is None:  # written before this simulator started: not in it
                    continue
                e = op.entry
            affected |= self._covered(s, e)
            tab.append(s)
            kind.append(KINDS[op.kind])
            pos.append(p)
            w = np.zeros((3, self.width), dtype=np.uint32)
            if op.kind == "insert":
                _, _, lo, hi, mask = _word_rows(spec, TableEntries(spec.name, [op.entry]))
                n = spec.words
                w[0, :n], w[1, :n], w[2, :n] = lo[0], hi[0], mask[0]
            rows.append(w)
        if not tab:
            return 0
        flows = sorted(affected)
        touched = {op.table for op in ops}
        snap = {**self._snap, **self.store.snapshot(touched)}
        self._snap = snap
        hops, expected = self._interpret(flows, snap)
        new = self._take_new_keys()
        key_table = [s for s, r in new.items() for _ in r]
        width = self.width
        keys = np.zeros((len(key_table), width), dtype=np.uint32)
        i = 0
        for s, r in new.items():
            for row in r:
                keys[i, :len(row)] = row
                i += 1
        start, ht, hk, he = [0], [], [], []
        for f, h, e in zip(flows, hops, expected):
            self._set_route(f, h)
            for (s, k), x in zip(h, e):
                ht.append(s)
                hk.append(k)
                he.append(x)
            start.append(len(ht))
        R = np.stack(rows) if rows else np.zeros((0, 3, width), dtype=np.uint32)
        _core.change_routes(
            self.core, np.array(tab, dtype=np.uint16), np.array(kind, dtype=np.uint8), np.array(pos, dtype=np.uint32),
            np.ascontiguousarray(R[:, 0]), np.ascontiguousarray(R[:, 1]), np.ascontiguousarray(R[:, 2]),
            np.array(key_table, dtype=np.uint16), keys, np.array(flows, dtype=np.uint32),
            np.array(start, dtype=np.uint32), np.array(ht, dtype=np.uint16), np.array(hk, dtype=np.uint32),
            np.array(he, dtype=np.int64))
        self.forwarded += len(tab)
        self.writes += 1
        self.reinterpreted += len(flows)
        self.write_s.append(time.perf_counter() - t0)
        return len(tab)

    # --- state ---

    def flow_tables(self, f: int) -> list[str]:
        """The tables flow ``f`` visits now in the simulator (in force)."""
        with self.lock:
            return [self.specs[t].name for t, _ in _core.flow_route(self.core, f)]

    def state(self, table: str) -> dict:
        """Synapse's state of a simulated table (the state extern's ``sim``)."""
        with self.lock:
            summ = self.core.summary()
            inv = self.core.check_invariants()
            upd = self.core.update_stats()
            rs = _core.route_stats(self.core)
            pmus = [p for p in self.core.pmu_states() if p.get("table") == table and p["state"] == "associated"]
        t = summ["tables"].get(table, {})
        ws = sorted(self.write_s)
        i = self.index[table]
        hit = upd["answers_matched"][i] if upd["answers_matched"] else 0
        miss = upd["answers_missed"][i] if upd["answers_missed"] else 0
        return {
            "sim_table": table, "sim_time_ns": summ["sim_time_ns"], "pmus": len(pmus),
            "hit_rate": t.get("hit_rate", 0.0), "keys": t.get("keys", 0),
            "entry_hits": hit, "entry_misses": miss,
            "mean_latency_ns": t.get("mean_latency_ns", 0.0), "p99_latency_ns": t.get("p99_latency_ns", 0.0),
            "wrong_action": inv["wrong_action"], "stale_answers": inv["stale_answers"],
            "mixed_version_phvs": upd["mixed_version_phvs"], "checked_phvs": upd["checked_phvs"],
            "flips": upd["flips"],
            "updates_requested": upd["requested"], "updates_committed": upd["committed"],
            "updates_rejected": upd["rejected"], "invalidated": upd["invalidated"],
            "update_latency_ns_p50": upd["latency_ns_p50"], "update_latency_ns_p99": upd["latency_ns_p99"],
            "routes": rs, "writes": self.writes, "reinterpreted_flows": self.reinterpreted,
            "write_ms_p50": 1e3 * ws[len(ws) // 2] if ws else 0.0,
            "optimizer": {"enabled": False},
        }


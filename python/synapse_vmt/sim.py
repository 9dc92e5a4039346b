"""The simulator seen from Python: :class:`Simulation` wraps the Rust
``synapse_vmt._core.Simulator`` (contract: docs/simulator-api.md) and collects its
per-window rows as numpy columns while it runs in chunks.

A run ends drained (:func:`finish`): arrivals stop and the simulator runs on
until every PHV has exited or been dropped, within the scenario's
``drain_ns``; PHVs still in flight then are a failure (:func:`failure`),
never a pass. Tables that start without a PMU send every key to the ELU:
:func:`pmu_warning` says so before the run."""

from __future__ import annotations

import json
import time
from typing import Any, Callable

import numpy as np

from synapse_vmt import _core
from synapse_vmt.errors import UserError
from synapse_vmt.scenario import Scenario


class Simulation:
    """A simulator built from a :class:`Scenario` (or a config dict)."""

    def __init__(self, scenario: Scenario | dict[str, Any]):
        if isinstance(scenario, Scenario):
            self.scenario: Scenario | None = scenario
            cfg = scenario.sim_config()
            mix = [(m.at_ns, dict(m.entry)) for m in scenario.mix]
            self.fast: dict[str, Any] = scenario.fast.model_dump()
        else:
            self.scenario = None
            cfg = dict(scenario)
            mix = [(float(m["at_ns"]), dict(m["entry"])) for m in cfg.pop("mix", [])]
            self.fast = dict(cfg.pop("fast", None) or {})
        # The traffic mix's shifts still to come, by time (``[[mix]]``).
        self._mix = sorted(mix, key=lambda m: m[0])
        # Serialized beside the config (the encoder is warm here; cold, after
        # the build, it took a tenth of a fast run): run_fast reuses it while
        # ``fast`` is unchanged.
        self._fast_json = (dict(self.fast), json.dumps(self.fast))
        try:
            self.core = _core.Simulator(json.dumps(cfg))
        except ValueError as e:
            msg = str(e)
            # An inline update operation: name the scenario's file and line.
            lines = getattr(scenario, "_op_lines", None) or {}
            where = msg.split(": ", 1)[0]
            if where in lines:
                msg = f"{lines[where]}: {msg.split(': ', 1)[1]}"
            raise UserError(msg) from None
        #: The simulator's config tree (as built from).
        self.config = cfg
        self.duration_ns = float(cfg.get("duration_ns", 1_000_000.0))
        self.window_ns = float(cfg.get("window_ns", 10_000.0))
        self.drain_ns = float(cfg.get("drain_ns", 1_000_000.0))
        self._windows: list[dict[str, np.ndarray]] = []
        self._edges: list[dict[str, np.ndarray]] = []
        #: Window rows closed while draining (:meth:`finish`), kept apart
        #: from the run's own (:meth:`all_windows`).
        self.drain_windows: dict[str, np.ndarray] = {}
        self.wall_s = 0.0
        #: Said before the run (the CLI prints them; summaries carry them).
        self.warnings: list[str] = [w for w in [pmu_warning(self.core)] if w]

    # Thin pass-throughs of the contract.
    def run_until(self, t_ns: float) -> None:
        t0 = time.perf_counter()
        # A mix shift due by then: run to it, then change the entry shares
        # (arrivals from that cycle on draw the new mix).
        while self._mix and self._mix[0][0] <= t_ns:
            at, shares = self._mix.pop(0)
            if at > self.core.now_ns():
                self.core.run_until(at)
            try:
                self.core.set_entry(shares)
            except ValueError as e:
                raise UserError(str(e)) from None
        self.core.run_until(t_ns)
        self.wall_s += time.perf_counter() - t0

    def now_ns(self) -> float:
        return self.core.now_ns()

    def table_names(self) -> list[str]:
        return self.core.table_names()

    def assign(self, table: str, pmus: list[int]) -> None:
        try:
            self.core.assign(table, list(pmus))
        except ValueError as e:
            raise UserError(str(e)) from None

    def pmu_states(self) -> list[dict]:
        return self.core.pmu_states()

    def windows(self) -> dict[str, np.ndarray]:
        """Rows completed since the last call (also kept for :meth:`all_windows`)."""
        w = self.core.windows()
        self._windows.append(w)
        return w

    def edges(self) -> dict[str, np.ndarray]:
        e = self.core.edges()
        self._edges.append(e)
        return e

    def summary(self) -> dict:
        return self.core.summary()

    def latency_histogram(self, table: str) -> tuple[np.ndarray, np.ndarray]:
        return self.core.latency_histogram(table)

    def check_invariants(self) -> dict:
        return self.core.check_invariants()

    def drain(self) -> dict:
        """Stops the arrivals and runs on until no PHV is in flight (at most
        ``drain_ns``): ``{"drained", "ns", "in_flight": {table: n}}``.
        Windows closed meanwhile go to :attr:`drain_windows`."""
        t0 = time.perf_counter()
        d = self.core.drain()
        self.wall_s += time.perf_counter() - t0
        self.drain_windows = self.core.windows()
        self.core.edges()
        return d

    def finish(self) -> dict:
        """Ends the run drained and returns the invariants (:func:`finish`).
        Read the summary, windows and histograms first: they then cover the
        scenario's duration only."""
        return finish(self)

    def request_updates(self, table: str, ops: list[str]) -> int:
        """Queues a batch of rule updates on ``table`` now (lines as in a
        schedule file); they commit as the simulation runs."""
        try:
            return self.core.request_updates(table, list(ops))
        except ValueError as e:
            raise UserError(str(e)) from None

    def request_transaction(self, parts: dict[str, list[str]]) -> int:
        """Queues one transaction now: per table, its operations. Under
        ``consistency = "program"`` a PHV sees all of it or none of it."""
        try:
            return self.core.request_transaction({t: list(o) for t, o in parts.items()})
        except ValueError as e:
            raise UserError(str(e)) from None

    def update_stats(self) -> dict:
        return self.core.update_stats()

    def run(self, until_ns: float | None = None, chunk_ns: float | None = None,
            progress: Callable[[float, float], None] | None = None) -> dict:
        """Runs to ``until_ns`` (default: the scenario's duration) in chunks,
        collecting windows and edges; returns the summary."""
        end = self.duration_ns if until_ns is None else until_ns
        chunk = chunk_ns or max(self.window_ns, end / 100.0)
        t = self.now_ns()
        while t < end:
            t = min(end, t + chunk)
            self.run_until(t)
            self.windows()
            self.edges()
            if progress:
                progress(t, end)
        return self.summary()

    def run_fast(self) -> dict:
        """The fast mode on this fresh simulation (docs/fast-mode.md): the
        summary's keys per table, each figure also as ``interval[KEY] =
        (lo, hi)``, plus ``mode: "fast"`` and the sampling record ``fast``.
        Arrivals, the ELU's windows and the caches are estimated, never
        simulated to the end: the run is not drained (no ``invariants``)."""
        if self._mix:
            raise UserError("fast mode: a traffic [[mix]] runs in the exact engine only")
        if self.now_ns() > 0:
            raise UserError("fast mode: runs on a fresh simulation only")
        t0 = time.perf_counter()
        try:
            was, fj = self._fast_json
            s = self.core.run_fast(fj if self.fast == was else json.dumps(self.fast))
        except ValueError as e:
            raise UserError(str(e)) from None
        self.wall_s += time.perf_counter() - t0
        # The ceiling only where it is used (an overloaded run): on a short
        # run every fixed cost shows.
        ceiling = elu_ceiling_gbps(self.config) if s["fast"]["overloaded"] else None
        self.warnings.extend(fast_summary(s, self.duration_ns, self.drain_ns, ceiling))
        return s

    @staticmethod
    def _concat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        parts = [p for p in parts if p]
        if not parts:
            return {}
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def all_windows(self) -> dict[str, np.ndarray]:
        """Every window row collected so far through :meth:`windows`."""
        return self._concat(self._windows)

    def all_edges(self) -> dict[str, np.ndarray]:
        return self._concat(self._edges)


def elu_ceiling_gbps(cfg: dict) -> float | None:
    """The most HBM bandwidth the ELU can draw walking a trie: each of its
    ``lookup_slots`` walks one chain of reads, one burst each (an 8-byte
    trie entry), each taking at least the HBM's latency and the burst's
    transfer. ``None`` for the other structures (their reads vary)."""
    elu, hbm = cfg.get("elu", {}), cfg.get("hbm", {})
    if elu.get("algo", "trie") != "trie":
        return None
    burst = float(hbm.get("bytes_per_access", 32))
    return elu.get("lookup_slots", 8) * burst / (hbm.get("latency_ns", 100.0) + burst / hbm.get("peak_gbps", 14.4))


def _cap_served(s: dict, ceiling_gbps: float) -> None:
    """An overloaded fast run whose served misses would draw more HBM
    bandwidth than the ELU can (:func:`elu_ceiling_gbps`): its served share
    scaled down to the ceiling (throughput, keys, hits, misses, HBM; the
    entry tables drop the rest, as the core models them)."""
    share = s["fast"]["served_share"]
    total = sum(t["hbm_gbps"] for t in s["tables"].values())
    if not (0 < share < 1) or total <= ceiling_gbps:
        return
    c = ceiling_gbps / total
    for t in s["tables"].values():
        arrived = t["throughput_mpps"] / share  # the core's: throughput = arrived × share
        entry = t["drops"] / (arrived * (1 - share) * s["sim_time_ns"] / 1e3) if arrived > 0 else 1.0
        new = share * c
        iv = t["interval"]
        for k in ("throughput_mpps", "keys", "hits", "misses", "hbm_gbps"):
            t[k] *= c
            iv[k] = (iv[k][0] * c, iv[k][1] * c)
        for k, v in (("drops", arrived * entry * (1 - new) * s["sim_time_ns"] / 1e3),
                     ("offered_mpps", arrived * (entry + (1 - entry) * new))):
            lo, hi = iv[k]
            iv[k] = (v - (t[k] - lo), v + (hi - t[k]))
            t[k] = v
    s["fast"]["served_share"] = share * c
    s["fast"]["elu_ceiling_gbps"] = ceiling_gbps


#: The rows of a fast summary's ``windows`` (``_core.Simulator.run_fast``), in order.
FAST_WINDOW_COLUMNS = ("t_ns", "table", "arrived", "processed", "hits", "misses", "hbm_bytes", "pmus")


def fast_windows(s: dict) -> dict[str, np.ndarray]:
    """A fast summary's estimated windows by column (as :meth:`Simulation.windows`
    gives the exact run's; table and PMUs as whole floats). The core gives
    them as one (8, n) array, one object made instead of eight; named here,
    where they are written (row views, no copy)."""
    w = s.get("windows")
    return {} if w is None else dict(zip(FAST_WINDOW_COLUMNS, w))


def fast_summary(s: dict, duration_ns: float, drain_ns: float, ceiling_gbps: float | None = None) -> list[str]:
    """Completes a fast run's summary as the core returns it (``mode`` and,
    on a run that is not overloaded, the integer counts, are the core's; an
    overloaded run's served share held to the ELU's ceiling
    ``ceiling_gbps`` when given, its counts rounded, its latency intervals
    widened) and returns its warnings."""
    s["mode"] = "fast"
    if not s["fast"]["overloaded"]:
        return []
    if ceiling_gbps is not None:
        _cap_served(s, ceiling_gbps)
    for t in s["tables"].values():
        for k in ("keys", "drops", "hits", "misses"):
            t[k] = int(round(t[k]))
    # The ELU falls behind its misses: the core models what that does to
    # throughput, keys, drops and HBM bandwidth (the share of the misses the
    # ELU serves, measured in its windows; their intervals carry the error
    # measured on the validation suite's overloaded points), not the
    # latencies behind full queues: their intervals say only what is certain.
    # A PHV leaves by the end of the drain, or the run fails.
    end = duration_ns + drain_ns
    for t in s["tables"].values():
        for k in ("mean_latency_ns", "mean_sojourn_ns", "p99_latency_ns"):
            t["interval"][k] = (0.0, end)
    return [f"fast mode: the ELU falls behind its misses (backlog {s['fast']['backlog_ns'] / 1e3:.1f} µs a window; "
            f"it serves {100 * s['fast']['served_share']:.0f} % of the offered load): throughput and drops are "
            "modelled within wider intervals, latencies are not; run the exact engine for them"]


def finish(sim: Any) -> dict:
    """Ends a run of ``sim`` (a :class:`Simulation` or a ``_core.Simulator``,
    plain or routed, or anything passing ``drain`` and ``check_invariants``
    through): arrivals stop and it simulates on until every PHV has exited
    or been dropped, for at most the config's ``drain_ns``. Returns the
    invariants (``check_invariants()``, whose ``ok`` is False while PHVs are
    in flight) with ``drained``, ``drain_ns`` (simulated time the drain
    took), ``stuck`` (``{table: PHVs still in flight}``, empty when
    drained) and ``in_flight_before_drain``. Read what the run measured
    first."""
    before = int(sim.check_invariants()["in_flight"])
    d = sim.drain()
    inv = dict(sim.check_invariants())
    inv.update(drained=bool(d["drained"]), drain_ns=float(d["ns"]), stuck=dict(d["in_flight"]),
               in_flight_before_drain=before)
    return inv


def finish_checked(sim: Any, what: str = "") -> dict:
    """:func:`finish`, raising ``RuntimeError`` (prefixed by ``what``) when
    the run did not end well (:func:`failure`): for experiments, whose
    numbers must come from a run that drained with every invariant held."""
    inv = finish(sim)
    msg = failure(inv)
    if msg:
        raise RuntimeError(f"{what}: {msg}" if what else msg)
    return inv


def failure(inv: dict) -> str | None:
    """What is wrong with a finished run's invariants (:func:`finish`), in
    one line, or None when it ended well."""
    if inv.get("ok"):
        return None
    if inv.get("drained") is False or inv.get("in_flight", 0) > 0:
        where = ", ".join(f"{t} {n}" for t, n in sorted((inv.get("stuck") or {}).items(), key=lambda kv: -kv[1]))
        return (f"not drained: {inv['in_flight']} of {inv['created']} PHVs still in flight "
                f"{inv.get('drain_ns', 0.0) / 1e3:.0f} µs after the last arrival"
                + (f", at {where}" if where else "")
                + " (stuck, or queued behind a bottleneck too slow to clear them; raise drain_ns to wait longer)")
    bad = {k: inv[k] for k in ("lost", "duplicates", "wrong_action", "stale_answers") if inv.get(k)}
    if inv.get("mixed_version_phvs"):
        bad["mixed_version_phvs"] = inv["mixed_version_phvs"]
    return "simulator invariant violated: " + ", ".join(f"{k} {v}" for k, v in bad.items()) + f" ({inv})"


def pmu_warning(core: Any, pool: int | None = None) -> str | None:
    """A warning when tables start without a PMU (every key of theirs goes
    to the ELU, which serves them all), or None."""
    none = list(core.tables_without_pmus())
    if not none:
        return None
    n = len(core.table_names())
    pool = len(core.pmu_states()) if pool is None else pool
    head = f"{pool} PMUs for {n} tables: " if pool < n else ""
    return (f"{head}{len(none)} table{'s' * (len(none) != 1)} without a PMU (ELU only, no cache): "
            + ", ".join(none))

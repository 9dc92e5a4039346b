"""The runtime optimizer in ``synapse serve --sim``'s loop (paper §3
"Synapse OPT", §5, §6 Fig. 8).

The serve loop advances the simulator in small slices (the gRPC server
writes rules between them); :class:`ServeOptimizer` is the closed loop of
:class:`synapse_vmt.opt.controller.Controller` around those slices, not a
second optimizer. After each slice it takes the windows and edges the slice
closed; every ``alarm_ns`` it checks them for overload (the controller's
mid-period re-solve, PMUs added only), and when a control period of
``period_ns`` simulated ns ends it hands the period's counters to
``Controller.close_period``: estimate the routing and the per-table loads,
learn from saturated tables, solve (``fast`` or the HiGHS ``milp``: the same
optimum) and apply the new PMU allocation through ``Simulator.assign``
(fewest moves; leaving PMUs drain). Each period is kept (PMUs per table, the
solver's objective F, its wall time) for the state extern.

The capacity model: the controller needs each table's USL curve (Appendix
C). :func:`calibrate` fits it when the server starts, as the paper does
offline: for each table of the scenario alone, short runs at a few PMU
counts and loads (the scenario's own rules, traffic and hardware, flat
profile), then :func:`synapse_vmt.opt.usl.fit`. The controller corrects it
online from what it sees while tables are at capacity.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass

import numpy as np

from synapse_vmt.opt.controller import Controller, Period, Settings, concat
from synapse_vmt.opt.counters import Samples, warm_samples
from synapse_vmt.opt.usl import Usl, fit


@dataclass
class OptConfig:
    """The serve loop's optimizer settings (CLI: ``--opt-period-ns``, ``--opt-solver``)."""

    period_ns: float = 100_000.0
    alarm_ns: float = 0.0  # overload re-solve between periods; 0: only at period ends
    headroom: float = 1.3
    solver: str = "fast"
    settle_periods: int = 3  # Settings.settle_periods: a move's cold caches teach nothing
    # No allocation before this simulated time (None: the scenario's flow
    # duration, over which its flows ramp up): the start's low load would
    # shrink every table, then cost cold caches when the load arrives.
    warmup_ns: float | None = None
    # calibration: PMU counts (clipped to the pool), load scales (x the scenario's traffic), run length
    cal_counts: tuple[int, ...] = (1, 2, 4, 8)
    cal_scales: tuple[float, ...] = (0.5, 1.0, 2.0)
    cal_warmup_ns: float = 250_000.0
    cal_ns: float = 200_000.0
    history: int = 500  # periods kept for the state extern


def calibration_config(base: dict, table: str, pmus: int, scale: float, duration_ns: float) -> dict:
    """The scenario's simulator config reduced to ``table`` alone, holding
    PMUs 0..pmus-1, fed ``scale`` x the scenario's traffic (flat profile)."""
    cfg = copy.deepcopy(base)
    t = next(x for x in cfg["tables"] if x["name"] == table)
    t["pmus"] = list(range(pmus))
    cfg["tables"], cfg["edges"], cfg["entry"] = [t], [], {table: 1.0}
    cfg.pop("updates", None)
    cfg.pop("update_engine", None)
    tr = cfg["traffic"]
    if tr.get("kind", "flows") == "flows":
        # Flows start over the run: the same rate over a shorter run is
        # proportionally fewer flows.
        tr["flows"] = max(1, int(round(tr["flows"] * scale * duration_ns / float(cfg["duration_ns"]))))
        tr["profile"] = "flat"
    cfg["duration_ns"] = float(duration_ns)
    if tr.get("kind", "flows") != "flows":
        tr["rate_mpps"] = tr["rate_mpps"] * scale
    return cfg


def calibrate(scenario, cfg: OptConfig) -> tuple[dict[str, Usl], dict[str, dict]]:
    """A USL curve per table of ``scenario`` from short calibration runs; also
    each fit's quality (r2, rmse, samples, PMU counts) and the wall time."""
    from synapse_vmt import _core

    base = scenario.sim_config()
    n_pool = int(base["pmus"]["count"])
    counts = sorted({min(c, n_pool) for c in cfg.cal_counts if c >= 1})
    window = float(base.get("window_ns", 10_000.0))
    # the warm-up covers a flow's life: the rate has ramped up by then
    warm = max(cfg.cal_warmup_ns, float(base["traffic"].get("flow_duration_ns", 0.0)))
    models, info = {}, {}
    for t in base["tables"]:
        t0 = time.perf_counter()
        s = Samples.empty()
        for n in counts:
            for k in cfg.cal_scales:
                sim = _core.Simulator(json.dumps(calibration_config(base, t["name"], n, k, warm + cfg.cal_ns)))
                s = s.extend(warm_samples(sim, warm, warm + cfg.cal_ns, window)[0])
        f = fit(s.load_mpps, s.throughput_mpps, s.pmus)
        models[t["name"]] = f.usl
        info[t["name"]] = {"r2": f.r2, "rmse_mpps": f.rmse_mpps, "samples": f.samples, "pmu_counts": list(f.pmu_counts),
                           "wall_s": time.perf_counter() - t0}
    return models, info


class ServeOptimizer:
    """The controller's closed loop, fed slice by slice (the caller holds the
    simulator's lock around :meth:`after_slice`)."""

    def __init__(self, sim, scenario, cfg: OptConfig, calibrated: tuple[dict[str, Usl], dict] | None = None):
        """``calibrated``: the (models, calibration) of an earlier
        :func:`calibrate` of the same scenario (a new pipeline: no new runs)."""
        self.sim, self.cfg = sim, cfg
        if cfg.period_ns < sim.window_ns:
            from synapse_vmt.errors import UserError

            raise UserError(f"--opt-period-ns {cfg.period_ns:g}: shorter than the scenario's window_ns "
                            f"{sim.window_ns:g} (a period reads whole counter windows)")
        if calibrated is None:
            calibrated = calibrate(scenario, cfg)
        models, self.calibration = dict(calibrated[0]), calibrated[1]
        settings = Settings(period_ns=cfg.period_ns, window_ns=sim.window_ns, headroom=cfg.headroom,
                            alarm_ns=cfg.alarm_ns, solver=cfg.solver, settle_periods=cfg.settle_periods)
        self.ctl = Controller(sim, models, int(scenario.pmus.count), settings)
        self.names = self.ctl.names
        # run_until stops on a cycle: a stop within one cycle counts as reached
        self.eps = 1000.0 / float(scenario.clock_mhz)
        self.history: list[dict] = []
        self.periods = 0
        self.moves = 0  # PMUs that changed table (assign calls' gains)
        tr = scenario.traffic
        self.warmup_ns = cfg.warmup_ns if cfg.warmup_ns is not None else float(getattr(tr, "flow_duration_ns", 0.0))
        # Counters before t_skip (the period boundary at or after the warm-up) are dropped.
        now = sim.now_ns()
        self.t_skip = now + cfg.period_ns * max(0.0, -(-(self.warmup_ns - now) // cfg.period_ns))
        self._reset(self.t_skip)

    def _reset(self, now: float) -> None:
        self.t_end = now + self.cfg.period_ns
        self.t_alarm = now + self.cfg.alarm_ns if self.cfg.alarm_ns > 0 else float("inf")
        self.parts_w: list[dict] = []
        self.parts_e: list[dict] = []
        self.alarm_w: list[dict] = []
        self.alarm_e: list[dict] = []

    def next_stop(self) -> float:
        """The next simulated time the loop must stop at (the warm-up's end, a
        period's end or an alarm check)."""
        if self.sim.now_ns() < self.t_skip - self.eps:
            return self.t_skip
        return min(self.t_end, self.t_alarm)

    def after_slice(self, w: dict, e: dict) -> Period | None:
        """Take the windows and edges of a slice that ended at ``sim.now_ns()``;
        at a period's end, close it (solve and apply) and return its record."""
        now = self.sim.now_ns()
        if now <= self.t_skip + self.eps:
            return None  # warming up: the scenario's PMUs stay
        for parts, x in ((self.parts_w, w), (self.parts_e, e), (self.alarm_w, w), (self.alarm_e, e)):
            if len(next(iter(x.values()), ())):
                parts.append(x)
        if now >= self.t_end - self.eps:
            rec = None
            if self.parts_w:
                before = self._held()
                rec = self.ctl.close_period(concat(self.parts_w), concat(self.parts_e) if self.parts_e else e, self.t_end)
                self._record(rec, before)
            self._reset(now)
            return rec
        if now >= self.t_alarm - self.eps:
            if self.alarm_w:
                aw = concat(self.alarm_w)
                if self.ctl.overloaded(aw):
                    before = self._held()
                    self.ctl.alarm(aw, concat(self.alarm_e) if self.alarm_e else e)
                    self.moves += self._gained(before)
            self.alarm_w, self.alarm_e = [], []
            self.t_alarm = now + self.cfg.alarm_ns
        return None

    def _held(self) -> dict[str, set[int]]:
        from synapse_vmt.opt.placement import current_sets

        return {n: set(p) for n, p in current_sets(self.sim.pmu_states(), self.names).items()}

    def _gained(self, before: dict[str, set[int]]) -> int:
        """PMUs newly given to a table since ``before`` (joined or joining)."""
        want = {n: set() for n in self.names}
        for p in self.sim.pmu_states():
            if p["table"] in want and p["state"] in ("associated", "transient"):
                want[p["table"]].add(int(p["id"]))
        return sum(len(want[n] - before[n]) for n in self.names)

    def _record(self, rec: Period, before: dict[str, set[int]]) -> None:
        self.periods += 1
        self.moves += int(sum(max(0, int(k) - len(before[n])) for n, k in zip(self.names, rec.target)))
        self.history.append({
            "t_ns": rec.t_ns,
            "pmus": {n: int(k) for n, k in zip(self.names, rec.target)},
            "pmus_held": {n: float(x) for n, x in zip(self.names, rec.pmus)},
            "offered_mpps": {n: float(x) for n, x in zip(self.names, rec.offered_mpps)},
            "input_mpps": float(rec.input_mpps),
            "objective_mpps": float(rec.objective_mpps) if np.isfinite(rec.objective_mpps) else -1.0,
            "solve_us": rec.solve_s * 1e6,
        })
        del self.history[: -self.cfg.history]

    def state(self) -> dict:
        """The optimizer's part of the state extern."""
        sol = [h["solve_us"] for h in self.history]
        return {
            "enabled": True, "period_ns": self.cfg.period_ns, "solver": self.cfg.solver, "headroom": self.cfg.headroom,
            "periods": self.periods, "pmu_moves": self.moves, "alarms": self.ctl.alarms, "refits": self.ctl.refits,
            "solve_us_mean": float(np.mean(sol)) if sol else 0.0, "solve_us_max": float(np.max(sol)) if sol else 0.0,
            "calibration": self.calibration, "history": list(self.history),
        }

"""The closed loop: read counters, solve, apply (paper §3 "Synapse OPT", §5, §6 Fig. 8).

Every period (default 1 ms of simulated time) the controller, like host
software driving the hardware:

1. advances the simulator to the end of the period (``run_until``), checking
   every ``alarm_ns`` (default 100 µs) for overload — drops, or a table
   processing clearly less than arrives — and then re-solving at once, adding
   PMUs only (as drop counters raising an interrupt would);
2. reads the window and edge counters (``windows()``, ``edges()``) and
   estimates the routing matrix P, the entry shares and the input rate
   (:mod:`.counters`);
3. checks the capacity model against what it saw: a table that fell behind
   (processed clearly less than arrived) was at capacity, so its (load,
   throughput) samples are added and its USL curve refitted
   (:mod:`.usl`) once they span two PMU counts; until then its capacity at
   the PMU count it held is capped at what it actually processed;
4. solves the allocation (:mod:`.fast`) for the measured input rate times a
   headroom factor, so that it holds only the PMUs that load needs;
5. applies it through ``assign`` (:mod:`.placement`: fewest moves, PMUs of a
   table on the same channel). Leaving PMUs drain through the transient
   state in the simulator; only the affected lookup-table entries change.

The static oracle the figures compare with is built without the controller
(:mod:`.oracle`); :func:`static_oracle` here is its model-based form, for a
test double whose true capacity curves are known.

Anything with the simulator's Python API (``docs/simulator-api.md``) can be
driven: ``run_until``, ``now_ns``, ``windows``, ``edges``, ``table_names``,
``assign``, ``pmu_states``, ``check_invariants`` (checked when a run ends).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from synapse_vmt.opt import fast, milp, placement
from synapse_vmt.opt.counters import Samples, estimate, usl_samples
from synapse_vmt.opt.problem import Problem
from synapse_vmt.opt.usl import Usl, fit


@dataclass
class Settings:
    period_ns: float = 1_000_000.0
    window_ns: float = 10_000.0
    headroom: float = 1.3  # provision for this multiple of the measured input rate
    min_pmus: int = 1
    behind: float = 0.97  # processed / arrived below this over a period: the table was at capacity
    refit_min_samples: int = 20
    alarm_ns: float = 100_000.0  # overload check between periods (0: only at period ends)
    alarm_behind: float = 0.9  # processed / arrived below this in an alarm check: overloaded
    # Optional per-table service targets (None: throughput only). A table whose
    # mean per-key latency over a period exceeds slo_latency_ns, or whose hit
    # rate is below hit_rate_floor, holds at least one PMU more from then on;
    # one comfortably inside both (latency < slo_relax x target, hit rate above
    # the floor by slo_relax_hits) may give one back.
    slo_latency_ns: float | None = None
    hit_rate_floor: float | None = None
    slo_relax: float = 0.6
    slo_relax_hits: float = 0.03
    solver: str = "fast"  # "fast" (opt/fast.py) or "milp" (HiGHS, opt/milp.py): the same optimum
    # Periods a table must have held one PMU count before the current one for
    # its saturation to teach the model: PMUs that just joined have cold
    # caches (after a large move the table falls behind for a period whatever
    # its capacity). 0: only the period itself must be steady.
    settle_periods: int = 0
    # Cache-flooding guard (docs/flood.md, flood_guard()): a table whose
    # misses over a period rose by flood_miss_rise x or more while its hits
    # did not rise (by more than 5 %) is being flooded with keys that will not
    # repeat: more PMUs would cache the attack, not serve it, so its
    # allocation is held at what it has (never raised) until its misses fall
    # back.
    flood_guard: bool = False
    flood_miss_rise: float = 1.5


def table_hits_misses(windows: dict, T: int) -> np.ndarray:
    """Per table, the hits and misses over a span of windows: shape (T, 2)."""
    tab = np.asarray(windows["table"], dtype=np.int64)
    h = np.bincount(tab, weights=np.asarray(windows["hits"], dtype=float), minlength=T)
    m = np.bincount(tab, weights=np.asarray(windows["misses"], dtype=float), minlength=T)
    return np.stack([h, m], axis=1)


def flood_guard(prev: tuple[np.ndarray, np.ndarray] | None, cur: np.ndarray, held: np.ndarray,
                target: np.ndarray, rise: float, base: dict[int, tuple[float, float]] | None = None
                ) -> tuple[np.ndarray, list[int]]:
    """The cache-flooding guard (``Settings.flood_guard``): a table whose
    misses rose ``rise`` x or more since the last period while its hits rose
    by at most 5 % is flooded, unless its PMUs fell and its lookups (hits +
    misses) did not rise by 10 %: fewer PMUs turn hits into misses, they add
    no lookups. A flooded table gets no more PMUs than it ``held``, and stays
    flooded while its misses stay ``rise`` x above, and its hits no more than
    5 % above, those of the period before the flood. ``prev``: the last
    period's per-table (hits, misses) and PMUs held; ``cur``: this period's
    (hits, misses); ``base``: the flooded tables' (hits, misses) before their
    flood, updated in place (kept by the caller across periods). Returns the
    target and the tables held."""
    out = np.array(target, copy=True)
    base = {} if base is None else base
    flagged = []
    for j in range(len(out)):
        h1, m1 = cur[j]
        if j in base:
            h0, m0 = base[j]
            if m1 >= rise * max(m0, 1.0) and h1 <= 1.05 * h0:
                flagged.append(j)
                out[j] = min(out[j], held[j])
                continue
            del base[j]  # its misses fell back (or its hits grew: legitimate load)
        if prev is None:
            continue
        prev_hm, prev_held = prev
        h0, m0 = prev_hm[j]
        more_lookups = h1 + m1 > 1.1 * (h0 + m0)
        if m1 >= rise * max(m0, 1.0) and h1 <= 1.05 * h0 and (held[j] >= prev_held[j] or more_lookups):
            flagged.append(j)
            base[j] = (float(h0), float(m0))
            out[j] = min(out[j], held[j])
    return out, flagged


@dataclass
class Period:
    """What one control period saw and did."""

    t_ns: float
    input_mpps: float
    throughput_mpps: float  # PHVs leaving the pipeline per second
    processed_mpps: np.ndarray  # per table
    offered_mpps: np.ndarray  # per table
    hit_rate: float
    drops: int
    pmus: np.ndarray  # per table, mean over the period's windows (associated PMUs)
    target: np.ndarray  # the allocation applied at the end of the period
    objective_mpps: float = float("nan")  # the solver's F (max flow the allocation carries)
    solve_s: float = 0.0  # wall time of the solve
    flooded: list[str] = field(default_factory=list)  # tables the flood guard held (Settings.flood_guard)

    @property
    def active_pmus(self) -> float:
        return float(self.pmus.sum())


def concat(parts: list[dict]) -> dict:
    """Column-wise concatenation of window (or edge) batches."""
    keys = parts[0].keys()
    return {k: np.concatenate([np.asarray(p[k]) for p in parts]) for k in keys}


def period_stats(windows: dict, edges: dict, T: int, span_ns: float) -> dict:
    """Throughput, hit rate, drops and mean PMUs per table over a span of windows."""
    tab = np.asarray(windows["table"], dtype=np.int64)
    hits = float(np.sum(windows["hits"]))
    misses = float(np.sum(windows["misses"]))
    exits = float(np.sum(np.asarray(edges["count"])[np.asarray(edges["dst"]) < 0]))
    n_win = np.maximum(np.bincount(tab, minlength=T), 1)
    pmus = np.bincount(tab, weights=np.asarray(windows["pmus"], dtype=float), minlength=T) / n_win
    return {
        "throughput_mpps": exits * 1e3 / span_ns,
        "hit_rate": hits / (hits + misses) if hits + misses > 0 else float("nan"),
        "drops": int(np.sum(windows["drops"])) if "drops" in windows else 0,
        "pmus": pmus,
    }


@dataclass
class Controller:
    """Runtime OPT in a closed loop around a simulator."""

    sim: object
    models: dict[str, Usl]
    total_pmus: int
    settings: Settings = field(default_factory=Settings)
    prior_P: np.ndarray | None = None
    prior_entry: np.ndarray | None = None
    history: list[Period] = field(default_factory=list)
    refits: int = 0
    alarms: int = 0

    def __post_init__(self) -> None:
        self.names = list(self.sim.table_names())
        T = len(self.names)
        missing = [n for n in self.names if n not in self.models]
        if missing:
            raise ValueError(f"no capacity model for tables {missing}")
        self.samples = [Samples.empty() for _ in range(T)]
        # Per table and PMU count: the most it was seen to process while behind.
        self.seen_cap: list[dict[int, float]] = [{} for _ in range(T)]
        # Per table: the PMU count at the end of the last period, and how many
        # periods in a row (this one included) it held one count.
        self.last_held: list[int | None] = [None] * T
        self.steady: list[int] = [0] * T

    def capacity(self, j: int) -> np.ndarray:
        counts = np.arange(self.total_pmus + 1)
        c = self.models[self.names[j]].capacity(counts).astype(float)
        for n, x in self.seen_cap[j].items():
            # Observed saturation caps this count and every smaller one.
            c[: n + 1] = np.minimum(c[: n + 1], x)
        return c

    def capacities(self) -> np.ndarray:
        return np.array([self.capacity(j) for j in range(len(self.names))])

    def step(self, t_end: float | None = None, parts: tuple[list, list] | None = None) -> Period:
        """One period, to ``t_end`` (default: one period from now); ``parts``:
        the period's windows and edges a caller already read."""
        s = self.settings
        t_end = self.sim.now_ns() + s.period_ns if t_end is None else t_end
        parts_w, parts_e = ([], []) if parts is None else parts
        # Between period boundaries, watch for overload every alarm_ns (the
        # hardware's drop counters raising an interrupt): a burst then gets
        # PMUs at once instead of at the end of the period.
        while True:
            t_next = min(t_end, self.sim.now_ns() + s.alarm_ns) if s.alarm_ns > 0 else t_end
            self.sim.run_until(t_next)
            w, e = self.sim.windows(), self.sim.edges()
            parts_w.append(w)
            parts_e.append(e)
            if t_next >= t_end - 1e-6:
                break
            if len(w["t_ns"]) and self.overloaded(w):
                self.alarm(w, e)
        return self.close_period(concat(parts_w), concat(parts_e), t_end)

    def close_period(self, w: dict, e: dict, t_end: float) -> Period:
        """Steps 2–5 on the period's windows ``w`` and edges ``e``: estimate,
        learn, solve, apply (for a caller that advances the simulator itself,
        e.g. ``synapse serve --sim``)."""
        s, T = self.settings, len(self.names)
        if len(w["t_ns"]) == 0:
            raise RuntimeError("the simulator closed no window in a control period")
        tr = estimate(w, e, T, s.window_ns, self.prior_P, self.prior_entry)
        self.prior_P, self.prior_entry = tr.P, tr.entry
        st = period_stats(w, e, T, tr.span_ns)
        self.learn(w, tr)
        t0 = time.perf_counter()
        alloc = self.solve(tr)
        solve_s = time.perf_counter() - t0
        pm = self.service_floor(w, alloc.pmus.copy())
        flooded: list[str] = []
        if s.flood_guard:
            hm = table_hits_misses(w, T)
            held = np.array([len(x) for x in placement.current_sets(self.sim.pmu_states(), self.names).values()])
            last = getattr(self, "_last_hm", None)
            if not hasattr(self, "_flood_base"):
                self._flood_base: dict[int, tuple[float, float]] = {}
            pm, flagged = flood_guard(last, hm, held, pm, s.flood_miss_rise, self._flood_base)
            flooded = [self.names[j] for j in flagged]
            self._last_hm = (hm, held)
        alloc.pmus[:] = pm
        self.apply({n: int(k) for n, k in zip(self.names, alloc.pmus)})
        rec = Period(
            t_ns=t_end,
            input_mpps=tr.input_mpps,
            throughput_mpps=st["throughput_mpps"],
            processed_mpps=tr.processed_mpps,
            offered_mpps=tr.offered_mpps,
            hit_rate=st["hit_rate"],
            drops=st["drops"],
            pmus=st["pmus"],
            target=alloc.pmus.copy(),
            objective_mpps=float(getattr(alloc, "throughput_mpps", float("nan"))),
            solve_s=solve_s,
            flooded=flooded,
        )
        self.history.append(rec)
        return rec

    def solve(self, tr):
        s = self.settings
        prob = Problem(self.names, tr.entry, tr.P, self.capacities(), self.total_pmus, s.min_pmus, tr.input_mpps * s.headroom)
        return milp.solve(prob) if s.solver == "milp" else fast.solve(prob)

    def service_floor(self, w: dict, pmus: np.ndarray) -> np.ndarray:
        """Raise the allocation to the per-table service floors (latency SLO,
        hit-rate floor), learnt from this period's windows; trims tables above
        their floor (largest surplus first) if the pool is exceeded."""
        s, T = self.settings, len(self.names)
        if s.slo_latency_ns is None and s.hit_rate_floor is None:
            return pmus
        if not hasattr(self, "floors"):
            self.floors = np.full(T, s.min_pmus, dtype=np.int64)
        tab = np.asarray(w["table"], dtype=np.int64)
        lookups = np.asarray(w["hits"], dtype=float) + np.asarray(w["misses"], dtype=float)
        lat = np.asarray(w["lat_mean_ns"], dtype=float) if "lat_mean_ns" in w else np.zeros_like(lookups)
        held = np.bincount(tab, weights=np.asarray(w["pmus"], dtype=float), minlength=T) / np.maximum(np.bincount(tab, minlength=T), 1)
        for j in range(T):
            m = (tab == j) & (lookups > 0)
            n = float(lookups[m].sum())
            if n <= 0:
                continue
            mean_lat = float(np.sum(np.nan_to_num(lat[m]) * lookups[m]) / n)
            hit = float(np.asarray(w["hits"], dtype=float)[m].sum() / n)
            bad = (s.slo_latency_ns is not None and mean_lat > s.slo_latency_ns) or (s.hit_rate_floor is not None and hit < s.hit_rate_floor)
            good = (s.slo_latency_ns is None or mean_lat < s.slo_relax * s.slo_latency_ns) and (
                s.hit_rate_floor is None or hit > s.hit_rate_floor + s.slo_relax_hits)
            h = int(round(held[j]))
            if bad:
                # far off the latency target: a bigger step (a cache far too small)
                step = 1 + (s.slo_latency_ns is not None and mean_lat > 2 * s.slo_latency_ns) + (
                    s.slo_latency_ns is not None and mean_lat > 4 * s.slo_latency_ns)
                self.floors[j] = min(self.total_pmus, max(self.floors[j], h + step))
            elif good and self.floors[j] > s.min_pmus:
                self.floors[j] -= 1
        out = np.maximum(pmus, self.floors)
        while out.sum() > self.total_pmus:
            surplus = out - np.minimum(self.floors, out)
            j = int(np.argmax(surplus)) if surplus.max() > 0 else int(np.argmax(out))
            out[j] -= 1
        return out

    def overloaded(self, w: dict) -> bool:
        """Drops, or a table clearly processing less than arrives."""
        if "drops" in w and np.sum(w["drops"]) > 0:
            return True
        arrived, processed = float(np.sum(w["arrived"])), float(np.sum(w["processed"]))
        return arrived > 0 and processed < self.settings.alarm_behind * arrived

    def alarm(self, w: dict, e: dict) -> None:
        """Mid-period re-solve on overload; it only adds PMUs (the period
        boundary decides about removing them)."""
        T = len(self.names)
        tr = estimate(w, e, T, self.settings.window_ns, self.prior_P, self.prior_entry)
        alloc = self.solve(tr)
        have = placement.current_sets(self.sim.pmu_states(), self.names)
        target = {n: max(int(k), len(have[n])) for n, k in zip(self.names, alloc.pmus)}
        if sum(target.values()) > self.total_pmus:
            return
        if any(target[n] > len(have[n]) for n in self.names):
            self.alarms += 1
            self.apply(target)

    def learn(self, w: dict, tr) -> None:
        """Compare the period with the model; learn from tables that were at capacity.

        Only periods in which the table held the same PMUs throughout count (a
        period in which PMUs joined mixes counts and cold caches). A refit
        replaces the model only if it fits the saturated samples better."""
        s, T = self.settings, len(self.names)
        per_table = usl_samples(w, s.window_ns, T)
        tab = np.asarray(w["table"], dtype=np.int64)
        for j in range(T):
            held = np.asarray(w["pmus"])[tab == j]
            if len(held):
                same = held.min() == held.max() and held[0] == self.last_held[j]
                self.steady[j] = 0 if held.min() != held.max() else self.steady[j] + 1 if same else 1
                self.last_held[j] = int(held[-1])
            off, done = tr.offered_mpps[j], tr.processed_mpps[j]
            if off <= 0 or done >= s.behind * off:
                continue
            if len(held) == 0 or held.min() != held.max() or self.steady[j] <= s.settle_periods:
                continue
            n_now = int(held[0])
            # The capacity seen: the median processing rate over the windows in
            # which the table was behind (drops, or clearly less processed than
            # arrived) — not the period's mean, which mixes in calm windows
            # when an overload ends mid-period.
            rows = tab == j
            arr = np.asarray(w["arrived"], dtype=float)[rows]
            pro = np.asarray(w["processed"], dtype=float)[rows]
            drp = np.asarray(w["drops"], dtype=float)[rows] if "drops" in w else np.zeros_like(arr)
            hot = (drp > 0) | (pro < s.alarm_behind * arr)
            if hot.sum() < 3:
                continue
            done = float(np.median(pro[hot])) * 1e3 / s.window_ns
            prev = self.seen_cap[j].get(n_now, np.inf)
            self.seen_cap[j][n_now] = min(prev, done)
            self.samples[j] = self.samples[j].extend(per_table[j])
            smp = self.samples[j]
            if len(smp) >= s.refit_min_samples and len(set(smp.pmus.tolist())) >= 2:
                name = self.names[j]
                new = fit(smp.load_mpps, smp.throughput_mpps, smp.pmus).usl
                err_new = np.mean((new.throughput(smp.load_mpps, smp.pmus) - smp.throughput_mpps) ** 2)
                err_old = np.mean((self.models[name].throughput(smp.load_mpps, smp.pmus) - smp.throughput_mpps) ** 2)
                if err_new < err_old:
                    self.models[name] = new
                    self.refits += 1

    def apply(self, target: dict[str, int]) -> None:
        changes = placement.plan(self.sim.pmu_states(), target)
        # Shrinking tables first, so the PMUs they release are theirs to give.
        have = placement.current_sets(self.sim.pmu_states(), self.names)
        for name in sorted(changes, key=lambda n: len(changes[n]) - len(have[n])):
            self.sim.assign(name, changes[name])

    def run(self, duration_ns: float) -> list[Period]:
        """Periods until ``duration_ns``; then the simulator's invariants must
        hold (:func:`checked_so_far`), else RuntimeError."""
        while self.sim.now_ns() + self.settings.period_ns <= duration_ns + 1e-6:
            self.step()
        self.invariants = checked_so_far(self.sim, "closed loop")
        return self.history


#: The invariants a run must hold at any moment: no PHV lost, none left twice,
#: none with another action than the linear oracle's. (PHVs still in flight
#: are not among them: a run's end is checked once it has drained.)
SO_FAR = ("lost", "duplicates", "wrong_action")


def checked_so_far(sim, what: str) -> dict:
    """The simulator's invariants (``check_invariants()``); RuntimeError
    naming ``what`` when one of :data:`SO_FAR` is violated."""
    inv = dict(sim.check_invariants())
    bad = {k: inv[k] for k in SO_FAR if inv.get(k)}
    if bad:
        raise RuntimeError(f"{what}: simulator invariant violated: {bad} ({inv})")
    return inv


def static_oracle(
    names: list[str], capacity: np.ndarray, total_pmus: int, P: np.ndarray, entry: np.ndarray, peak_input_mpps: float,
    headroom: float = 1.3, min_pmus: int = 1,
) -> dict[str, int]:
    """The fixed allocation an oracle that knows the run's peak input rate
    provisions, from the true capacity rows C_j(0..N) (a test double's: never
    a model of the controller under test, which would grade it by its own
    mistakes; the figures' oracle is :mod:`.oracle`)."""
    alloc = fast.solve(Problem(names, entry, P, capacity, total_pmus, min_pmus, peak_input_mpps * headroom))
    return {n: int(k) for n, k in zip(names, alloc.pmus)}


def observe(sim, T: int, settings: Settings, duration_ns: float) -> list[Period]:
    """Run without control (a static allocation), recording the same per-period metrics."""
    out, P, e0 = [], None, None
    while sim.now_ns() + settings.period_ns <= duration_ns + 1e-6:
        t_end = sim.now_ns() + settings.period_ns
        sim.run_until(t_end)
        w, e = sim.windows(), sim.edges()
        tr = estimate(w, e, T, settings.window_ns, P, e0)
        P, e0 = tr.P, tr.entry
        st = period_stats(w, e, T, tr.span_ns)
        out.append(
            Period(t_end, tr.input_mpps, st["throughput_mpps"], tr.processed_mpps, tr.offered_mpps, st["hit_rate"], st["drops"], st["pmus"], np.round(st["pmus"]).astype(np.int64))
        )
    return out

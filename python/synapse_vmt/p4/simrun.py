"""A P4 program on virtual match tables: ``synapse run --p4``.

The functional interpreter (:mod:`synapse_vmt.p4.interp`) decides *what*
happens to each packet; the Rust simulator replays it to decide *when*.
Every keyed table the packets visit becomes a VMT drawing PMUs from one
shared pool. The frames are deduplicated first (generated traffic has one
frame per flow; a capture repeats frames), each distinct frame is run
through the interpreter once, and its visit sequence — the tables in order,
with its key at each — becomes a **route**. The simulator's PHVs follow their
route hop by hop (``_core.routed_simulator``, ``crates/synapse-core/src/sim/routed.rs``);
arrivals (time, route) cross PyO3 in batches, one per chunk of simulated
time.

The oracle invariant covers the program: each table's rule set is its
entries in match order (index 0 wins), so the linear oracle's answer for a
key is an entry index; the simulator counts a visit as wrong when the
PMU/ELU answer differs from the oracle, and the build counts a key whose
oracle answer differs from the interpreter's matched entry.

Key width: a key of w-bit fields is ceil(w/32) words per field
(:func:`synapse_vmt.p4.interp.encode_words`); the simulator takes keys up to
``_core.MAX_KEY_WORDS`` words (:func:`max_key_words`, the one place that
limit is read: 32 words, 1024 bits) and is built at the narrowest compiled
width (8, 16 or 32 words) holding the widest table it simulates (the
summary's ``sim_key_words``). A visited table wider than that is an error
naming it. ``unsimulated_tables`` (kept in the summary) lists visited tables
the simulator leaves out: none today.

A frame whose run took a fallback branch (a random draw) follows the path of
its first run for every copy.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from synapse_vmt import _core
from synapse_vmt.errors import UserError, read_toml
from synapse_vmt.p4.interp import Program, Trace, TableSpec, _match_row, encode_words


def max_key_words() -> int:
    """Widest key (in 32-bit words) the simulator takes."""
    return int(getattr(_core, "MAX_KEY_WORDS", 8))


@dataclass
class Routes:
    """What the simulator needs from an interpreter run over distinct frames."""

    tables: list[str]  # simulated tables, in simulator order
    table_args: list[tuple]  # per simulated table, the tuple _core.routed_simulator takes
    route_start: np.ndarray  # uint32, n_routes + 1
    hop_table: np.ndarray  # uint32
    hop_key: np.ndarray  # uint32
    frame_route: np.ndarray  # int64 per distinct frame: its route, -1 if it visits no simulated table
    unsimulated: dict[str, str] = field(default_factory=dict)
    distinct_keys: dict[str, int] = field(default_factory=dict)

    @property
    def n_routes(self) -> int:
        return len(self.route_start) - 1


def _word_rows(spec: TableSpec, te: object) -> tuple[list[int], list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Per key word its bits and kind; the entries as (lo, hi, mask) word rows (keys contract)."""
    bits: list[int] = []
    kinds: list[str] = []
    for k in spec.key:
        n = (k.width + 31) // 32
        bits.extend([k.width - 32 * (n - 1)] + [32] * (n - 1))
        kinds.extend([k.match if k.match in ("exact", "lpm", "ternary", "range", "optional") else "exact"] * n)
    entries = list(getattr(te, "entries", []) or [])
    W = len(bits)
    lo = np.zeros((len(entries), W), dtype=np.uint32)
    hi = np.zeros((len(entries), W), dtype=np.uint32)
    mask = np.zeros((len(entries), W), dtype=np.uint32)
    for r, e in enumerate(entries):
        ms = getattr(e, "matches", {}) or {}
        where = getattr(e, "source", None) or f"{spec.name}#entry {r}"
        c = 0
        for k in spec.key:
            l, h, m = _match_row(ms.get(k.field, ms.get(k.name)), k, where)
            n = (k.width + 31) // 32
            if n > 1 and k.match == "range" and (l != h):
                raise UserError(f"{where}: range match on {k.field} ({k.width} bits): expected a field of at most 32 bits")
            for i in range(n):
                sh = 32 * (n - 1 - i)
                lo[r, c + i] = (l >> sh) & 0xFFFFFFFF
                hi[r, c + i] = (h >> sh) & 0xFFFFFFFF
                mask[r, c + i] = (m >> sh) & 0xFFFFFFFF
            c += n
    return bits, kinds, lo, hi, mask


def _first_seen(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(per row its id, numbered in order of first appearance; per id the
    index of its first row) of a 2-D array's distinct rows."""
    n, w = rows.shape
    if w == 0:
        return np.zeros(n, dtype=np.int64), np.zeros(min(n, 1), dtype=np.int64)
    v = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.dtype.itemsize * w))).ravel()
    _, first, inv = np.unique(v, return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    rank = np.empty(len(first), dtype=np.int64)
    rank[by_first] = np.arange(len(first))
    return rank[inv.ravel()], first[by_first]


def compile_routes(trace: Trace, entries: Mapping[str, object], fresh_from: int | None = None) -> Routes:
    """Routes (one per distinct frame's visit sequence) from a run over
    distinct frames; frames from ``fresh_from`` on (an attack's) share no
    route with those before it, so their routes are numbered after. Keys
    and routes are numbered in the order they first appear."""
    limit = max_key_words()
    sim_index: dict[int, int] = {}
    visited = set(np.unique(trace.step_table).tolist())
    for ti, spec in enumerate(trace.tables):
        if ti not in visited:
            continue
        if spec.words > limit:
            raise UserError(f"table {spec.name}: key of {spec.words} 32-bit words is wider than the simulator's "
                            f"{limit} words ({32 * limit} bits)")
        sim_index[ti] = len(sim_index)
    order = sorted(sim_index, key=lambda t: sim_index[t])
    st = np.asarray(trace.step_table, dtype=np.int64)
    se = np.asarray(trace.step_entry, dtype=np.int64)
    sim_of = np.full(len(trace.tables), -1, dtype=np.int64)
    sim_of[order] = np.arange(len(order))
    # Each step's key id within its table, the keys as word rows and the
    # entry each key's first lookup found (the simulator's expected answer).
    kid = np.zeros(len(st), dtype=np.int64)
    args, distinct = [], {}
    for s, ti in enumerate(order):
        spec = trace.tables[ti]
        sel = np.nonzero(st == ti)[0]
        rows = trace.key_rows(ti, sel)
        bits, kinds, lo, hi, mask = _word_rows(spec, entries.get(spec.name))
        if rows.shape[1] != len(bits):
            raise AssertionError(f"table {spec.name}: {rows.shape[1]} key words, the entries have {len(bits)}")
        ids, first = _first_seen(rows)
        kid[sel] = ids
        distinct[spec.name] = len(first)
        args.append((spec.name, bits, kinds, lo, hi, mask, rows[first], se[sel[first]]))
    # Each frame's hops (simulated table, key id), as a padded row led by
    # a flag that keeps fresh frames' routes apart; routes are its distinct rows.
    n = trace.n_packets
    frame = np.repeat(np.arange(n), np.diff(np.asarray(trace.pkt_start, dtype=np.int64)))
    keep = sim_of[st] >= 0
    frame, hop_t, hop_k = frame[keep], sim_of[st[keep]], kid[keep]
    count = np.bincount(frame, minlength=n)
    at = np.concatenate([[0], np.cumsum(count)[:-1]])
    pad = np.full((n, 1 + int(count.max(initial=0))), -1, dtype=np.int64)
    pad[:, 0] = 0 if fresh_from is None else (np.arange(n) >= fresh_from)
    pad[frame, 1 + np.arange(len(frame)) - at[frame]] = (hop_t << 32) | hop_k
    some = np.nonzero(count > 0)[0]
    frame_route = np.full(n, -1, dtype=np.int64)
    rid, first = _first_seen(pad[some])
    frame_route[some] = rid
    rep = some[first]  # each route's first frame
    lens = count[rep]
    start = np.concatenate([[0], np.cumsum(lens)]).astype(np.uint32)
    take = np.repeat(at[rep] - start[:-1].astype(np.int64), lens) + np.arange(int(lens.sum()))
    return Routes(
        tables=[trace.tables[t].name for t in order],
        table_args=args,
        route_start=start,
        hop_table=hop_t[take].astype(np.uint32),
        hop_key=hop_k[take].astype(np.uint32),
        frame_route=frame_route,
        unsimulated={},
        distinct_keys=distinct,
    )


def dedup_frames(frames: Sequence[bytes]) -> tuple[list[bytes], np.ndarray]:
    """(distinct frames in first-seen order, per input frame its distinct index)."""
    ids: dict[bytes, int] = {}
    idx = np.empty(len(frames), dtype=np.int64)
    for i, f in enumerate(frames):
        idx[i] = ids.setdefault(bytes(f), len(ids))
    return list(ids), idx


def weighted_counters(trace: Trace, weights: np.ndarray) -> dict[str, dict]:
    """:meth:`Trace.counters` when distinct frame i stands for ``weights[i]`` packets."""
    w_step = np.repeat(weights.astype(np.int64), np.diff(trace.pkt_start))
    nt = len(trace.tables)
    lookups = np.bincount(trace.step_table, weights=w_step, minlength=nt)
    hit = trace.step_entry >= 0
    matched = np.bincount(trace.step_table[hit], weights=w_step[hit], minlength=nt)
    na = len(trace.actions) + 1
    pair = trace.step_table.astype(np.int64) * na + (trace.step_action + 1)
    out: dict[str, dict] = {}
    acts: dict[int, dict[str, int]] = {}
    uniq, inv = np.unique(pair, return_inverse=True)
    sums = np.bincount(inv, weights=w_step, minlength=len(uniq))
    for u, c in zip(uniq.tolist(), sums.tolist()):
        t, a = divmod(u, na)
        if c > 0:
            acts.setdefault(t, {})[trace.actions[a - 1] if a else ""] = int(c)
    for i, t in enumerate(trace.tables):
        if lookups[i] > 0:
            out[t.name] = {"lookups": int(lookups[i]), "matched": int(matched[i]), "actions": acts.get(i, {})}
    return out


def sim_config(base: dict, tables: list[str], pmus: dict[str, list[int]], total_pmus: int) -> dict:
    """A simulator config for the routed tables (rules and traffic come from the routes)."""
    cfg = json.loads(json.dumps(base))
    cfg["tables"] = [{"name": t, "rules": {"generate": {"type": "acl", "count": 0, "seed": 0}}, "pmus": list(pmus.get(t, []))}
                     for t in tables]
    cfg["pmus"] = {**cfg.get("pmus", {}), "count": int(total_pmus)}
    cfg.pop("edges", None)
    cfg.pop("entry", None)
    return cfg


def even_split(tables: list[str], total: int) -> dict[str, list[int]]:
    """PMUs 0..total-1 dealt round robin over the tables."""
    out: dict[str, list[int]] = {t: [] for t in tables}
    for p in range(total if tables else 0):
        out[tables[p % len(tables)]].append(p)
    return out


class RoutedSim:
    """The simulator API (``run_until``, ``windows``, ``edges``, ``assign``...)
    around a routed core, pushing arrivals from a feeder before each advance."""

    def __init__(self, config: dict, routes: Routes, feeder):
        try:
            self.core = _core.routed_simulator(json.dumps(config), routes.table_args, routes.route_start,
                                               routes.hop_table, routes.hop_key)
        except ValueError as e:
            raise UserError(str(e)) from None
        self.config = config  # what the core was built from (its drain_ns, window_ns, ...)
        self.feeder = feeder  # callable(t_end_ps) -> (t_ps uint64, route uint32) arrivals before t_end_ps
        self.pushed = 0
        # callables(t_ps, route) given each batch of arrivals as it is pushed
        # (e.g. the controller's online miss-ratio curves, opt/mrcfeed.py)
        self.taps: list = []

    def run_until(self, t_ns: float) -> None:
        t, r = self.feeder(int(t_ns * 1000) + 1)
        if len(t):
            t, r = np.ascontiguousarray(t, dtype=np.uint64), np.ascontiguousarray(r, dtype=np.uint32)
            _core.push_arrivals(self.core, t, r)
            self.pushed += len(t)
            for tap in self.taps:
                tap(t, r)
        self.core.run_until(t_ns)

    def __getattr__(self, name):
        return getattr(self.core, name)


class ArrayFeeder:
    """Feeds precomputed arrivals (sorted by time) in chunks."""

    def __init__(self, t_ps: np.ndarray, route: np.ndarray):
        self.t, self.r, self.i = t_ps, route, 0

    def __call__(self, t_end_ps: int):
        j = int(np.searchsorted(self.t, t_end_ps, side="left"))
        out = self.t[self.i:j], self.r[self.i:j]
        self.i = j
        return out


class TrafficFeeder:
    """Feeds arrivals of generated traffic classes (``_core.Traffic`` per class),
    mapping each class's flow to its route."""

    def __init__(self, gens: list, flow_offset: list[int], flow_route: np.ndarray):
        self.gens, self.off, self.flow_route = gens, flow_offset, flow_route

    def __call__(self, t_end_ps: int):
        ts, rs = [], []
        for g, off in zip(self.gens, self.off):
            t, f = g.until(t_end_ps)
            fl = f.astype(np.int64) + off
            if hasattr(self, "flow_counts"):
                np.add.at(self.flow_counts, fl, 1)
            ts.append(t)
            rs.append(self.flow_route[fl])
        t = np.concatenate(ts) if ts else np.zeros(0, np.uint64)
        r = np.concatenate(rs) if rs else np.zeros(0, np.int64)
        keep = r >= 0  # flows visiting no simulated table
        t, r = t[keep], r[keep]
        o = np.argsort(t, kind="stable")
        return t[o], r[o].astype(np.uint32)


# ---- synapse run --p4 ------------------------------------------------------------

@dataclass
class ProgramRun:
    """A program, its entries and its traffic, compiled for the simulator."""

    prog: Program
    entries: dict
    trace: Trace  # over the distinct frames
    routes: Routes
    frame_idx: np.ndarray  # per flow (generated) or per packet (pcap): its distinct frame
    feeder_factory: object  # () -> a fresh feeder (arrivals from t = 0)
    duration_ns: float
    counts_of: object  # feeder -> packets per distinct frame that were fed
    full: Trace | None = None  # a capture: the run over every packet (exact per-packet counters)
    attack: dict | None = None  # with an [attack]: its settings, legit_routes, packets (summary's attack_traffic)


def _simulable(pr: ProgramRun, program: str) -> ProgramRun:
    """``pr``, or a one-line error when no packet reaches a table the
    simulator can take (the exact and the fast run refuse alike)."""
    if not pr.routes.tables:
        raise UserError(f"{program}: no packet visits a keyed table the simulator can take; nothing to simulate")
    return pr


def prepare(program: str, entries_file: str | None, *, pcap: str | None = None, traffic=None,
            duration_ns: float | None = None, rate_mpps: float = 50.0, seed: int = 1,
            pmus: int = 16, block_size: int = 256) -> ProgramRun:
    """Interpret the distinct frames of a capture or of generated traffic
    (:mod:`synapse_vmt.p4.gentraffic`) and compile their routes. Generated
    traffic with an ``[attack]`` (``traffic.attack``) gets the attack's
    frames and packets (:mod:`synapse_vmt.p4.attack`; ``pmus`` split
    evenly, of ``block_size`` entries: a scan's cycle)."""
    import os

    from synapse_vmt.p4 import gentraffic
    from synapse_vmt.p4.bmv2 import read_program
    from synapse_vmt.p4.entries import load_entries
    from synapse_vmt.p4.parser import read_packets

    prog = Program.load(program)
    entries = load_entries(entries_file or os.devnull, program)
    if (pcap is None) == (traffic is None):
        raise UserError("run --p4: expected the packets: either --pcap FILE or generated traffic (--traffic FILE or a scenario's [traffic])")
    if pcap is not None:
        packets = list(read_packets(pcap))
        if not packets:
            raise UserError(f"{pcap}: no packets")
        distinct, idx = dedup_frames(packets)
        gap = 1e6 / rate_mpps  # ps between packets: a fixed-rate replay
        t_all = (np.arange(len(packets)) * gap).astype(np.uint64)
        dur = duration_ns if duration_ns is not None else len(packets) * gap / 1000 + 50_000.0
    else:
        bprog = read_program(program)
        frames, _ = gentraffic.class_frames(traffic, bprog, entries, seed)
        dur = float(duration_ns or 1_000_000.0)
        attack = getattr(traffic, "attack", None)
        if attack is not None:
            return _prepare_attack(prog, bprog, entries, traffic, attack, frames, dur, seed, pmus, block_size)
        distinct, idx = dedup_frames(frames)
    trace = prog.run(distinct, entries, seed=seed)
    full = prog.run(packets, entries, seed=seed) if pcap is not None else None
    routes = compile_routes(trace, entries)
    route_of = routes.frame_route[idx]

    if pcap is not None:
        keep = route_of >= 0

        def factory():
            f = ArrayFeeder(t_all[keep], route_of[keep].astype(np.uint32))
            f.frames = idx
            return f

        def counts_of(f) -> np.ndarray:  # a replay feeds every packet
            return np.bincount(idx, minlength=len(distinct))
    else:
        def factory():
            gens = gentraffic.class_generators(traffic, dur, seed)
            off = np.concatenate([[0], np.cumsum(traffic.class_flows())[:-1]]).astype(np.int64).tolist()
            f = TrafficFeeder(gens, off, route_of)
            f.flow_counts = np.zeros(len(idx), dtype=np.int64)
            return f

        def counts_of(f) -> np.ndarray:
            return np.bincount(idx, weights=f.flow_counts, minlength=len(distinct)).astype(np.int64)
    return ProgramRun(prog, entries, trace, routes, idx, factory, dur, counts_of, full)


def _attack_run(prog: Program, entries: dict, seed: int, frames: list[bytes]) -> Trace:
    """``prog.run(frames, entries, seed=seed)`` by the compiled program's
    Rust executor, as a capture runs: an attack's frames are each new, so
    the interpreter's run (and its Python per frame) was most of an attack
    run's preparation. The same trace (tests/test_flood.py checks it); a
    program the executor does not compile runs in the interpreter."""
    from synapse_vmt.p4.engine import RustProgram

    try:
        rp = RustProgram(prog, entries, seed=seed)
    except UserError:
        return prog.run(frames, entries, seed=seed)
    return rp.run(frames)


def _prepare_attack(prog: Program, bprog, entries: dict, traffic, attack, frames: list[bytes], dur: float, seed: int,
                    pmus: int, block_size: int) -> ProgramRun:
    """:func:`prepare` of generated traffic with an ``[attack]``: the
    legitimate arrivals of the whole run (those of the same run without
    attack), the attack's packets mixed in (:func:`synapse_vmt.p4.attack.mix`),
    attack frame j being flow ``legit flows + j``; the attack's routes are
    numbered after the legitimate ones (``legit_routes``)."""
    from synapse_vmt.p4 import attack as atk
    from synapse_vmt.p4 import gentraffic

    gens = gentraffic.class_generators(traffic, dur, seed)
    off = np.concatenate([[0], np.cumsum(traffic.class_flows())[:-1]]).astype(np.int64)
    ts, fs = [], []
    for g, o in zip(gens, off.tolist()):
        t, f = g.until(int(dur * 1000))
        ts.append(t)
        fs.append(f.astype(np.int64) + o)
    t = np.concatenate(ts)
    f = np.concatenate(fs)
    o = np.argsort(t, kind="stable")
    t, f = t[o], f[o]
    n_flows = len(frames)
    legit_distinct, legit_idx = dedup_frames(frames)
    capacity = 0
    if attack.kind == "scan":  # the largest table's PMU entries, the pool split evenly over the legit tables
        n_tables = len(compile_routes(_attack_run(prog, entries, seed, legit_distinct), entries).tables)
        capacity = -(-pmus // max(1, n_tables)) * block_size
    pool = attack.pool(len(t), capacity)
    forged = atk.attack_frames(traffic, attack, bprog, entries, pool, seed, set(legit_distinct))
    distinct = legit_distinct + forged  # forged frames are distinct and new
    idx = np.concatenate([legit_idx, len(legit_distinct) + np.arange(pool, dtype=np.int64)])
    trace = _attack_run(prog, entries, seed, distinct)
    routes = compile_routes(trace, entries, fresh_from=len(legit_distinct))
    route_of = routes.frame_route[idx]
    lr = routes.frame_route[:len(legit_distinct)]
    legit_routes = int(lr.max()) + 1 if len(lr) and lr.max() >= 0 else 0
    mt, mf = atk.mix(t, f, attack, n_flows, pool)
    mf = mf.astype(np.int64)
    r = route_of[mf]
    keep = r >= 0  # packets visiting no simulated table
    counts = np.bincount(mf, minlength=len(idx))

    def factory():
        fd = ArrayFeeder(mt[keep], r[keep].astype(np.uint32))
        fd.legit_routes = legit_routes
        return fd

    def counts_of(fd) -> np.ndarray:  # every packet before the end is fed
        return np.bincount(idx, weights=counts, minlength=len(distinct)).astype(np.int64)
    return ProgramRun(prog, entries, trace, routes, idx, factory, dur, counts_of, None, attack={"legit_routes": legit_routes, "attack_frames": pool, "legit_packets": int(len(t)),
                 "attack_packets": int(len(mt) - len(t)), **attack.core()})


def _sim_base(seed: int, window_ns: float, duration_ns: float, block_size: int, overrides: dict | None) -> dict:
    """The simulator's default config with a P4 run's settings and the
    scenario's overrides (a table of settings updates that table)."""
    base = json.loads(_core.default_sim_config())
    base.update({"seed": seed, "window_ns": window_ns, "duration_ns": duration_ns})
    base["pmus"]["block_size"] = block_size
    for k, v in (overrides or {}).items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            base[k].update(v)
        else:
            base[k] = v
    return base


def build_sim(pr: ProgramRun, pmus: dict[str, list[int]], total_pmus: int, *, block_size: int = 256,
              window_ns: float = 10_000.0, seed: int = 1, overrides: dict | None = None) -> RoutedSim:
    base = _sim_base(seed, window_ns, pr.duration_ns, block_size, overrides)
    cfg = sim_config(base, pr.routes.tables, pmus, total_pmus)
    sim = RoutedSim(cfg, pr.routes, pr.feeder_factory())
    if pr.attack is not None:  # the attack's routes come after the legitimate ones
        _core.count_classes(sim.core, pr.attack["legit_routes"])
    return sim


def program_summary(pr: ProgramRun, sim: RoutedSim, s: dict | None = None) -> dict:
    """The simulator's per-table summary (or ``s``, a fast run's) plus the program's counters."""
    s = sim.summary() if s is None else s
    weights = pr.counts_of(sim.feeder)
    if pr.full is not None:
        counters = {k: v for k, v in pr.full.counters().items() if v["lookups"] > 0}
    else:
        counters = weighted_counters(pr.trace, weights)
    tables = {}
    for name, c in counters.items():
        row = dict(s["tables"].get(name, {}))
        row.update(c)
        row["simulated"] = name in s["tables"]
        if name in pr.routes.distinct_keys:
            row["distinct_keys"] = pr.routes.distinct_keys[name]
        tables[name] = row
    s["tables"] = tables
    s["packets"] = int(weights.sum())
    s["synthesized_fields"] = dict(sorted(pr.trace.synthesized_fields.items()))
    s["fallback_branches"] = dict(sorted(pr.trace.fallback_branches.items()))
    # a capture: per packet (the full run); generated traffic: per distinct frame (well-formed frames)
    s["parser_rejects"] = dict(sorted((pr.full.parser_rejects if pr.full is not None else pr.trace.parser_rejects).items()))
    s["unsimulated_tables"] = pr.routes.unsimulated
    s["sim_key_words"] = int(sim.core.key_words)
    s["unsupported"] = pr.trace.unsupported
    s["routes"] = pr.routes.n_routes
    # packets the program dropped, weighted as the counters (per distinct frame's packets)
    dp = pr.trace.drop_pipeline
    by = {InterpExec.REASONS[p + 1]: int(weights[dp == p].sum()) for p in (0, 1) if (weights[dp == p] > 0).any()}
    s["p4_drops"] = {"total": sum(by.values()), "by_reason": by}
    return s


def fast_program(pr: ProgramRun, pmus: int, *, block_size: int = 256, window_ns: float = 10_000.0, seed: int = 1,
                 overrides: dict | None = None, fast: dict | None = None) -> tuple[dict, RoutedSim]:
    """The fast mode (docs/fast-mode.md) on generated traffic through a
    program: the routed core gets every arrival of the run at once
    (``run_fast``'s ``t_ps``, ``flows``); a sampled flow's PHVs follow its
    route. Returns the summary (:func:`program_summary`'s, with the fast
    run's figures and intervals) and the simulator (not run)."""
    from synapse_vmt.scenario import Fast
    from synapse_vmt.sim import fast_summary

    if pr.full is not None:
        raise UserError("fast mode: a capture (--pcap) runs in the exact engine only; generated traffic runs in both")
    try:
        fc = Fast.model_validate(fast or {}).model_dump()
    except ValueError as e:
        raise UserError(f"[fast]: {e}") from None
    sim = build_sim(pr, even_split(pr.routes.tables, pmus), pmus, block_size=block_size, window_ns=window_ns, seed=seed,
                    overrides=overrides)
    t, r = sim.feeder(int(pr.duration_ns * 1000))
    try:
        s = sim.core.run_fast(json.dumps(fc), np.ascontiguousarray(t, dtype=np.uint64),
                              np.ascontiguousarray(r, dtype=np.uint32))
    except ValueError as e:
        raise UserError(str(e)) from None
    s["warnings"] = fast_summary(s, pr.duration_ns, float(sim.config["drain_ns"]))
    return program_summary(pr, sim, s), sim


def run_program_fast(out, *, program: str, entries_file: str | None, pcap: str | None = None, traffic=None,
                     duration_ns: float | None = None, rate_mpps: float = 50.0, pmus: int = 16, block_size: int = 256,
                     window_ns: float = 10_000.0, seed: int = 1, overrides: dict | None = None, fast: dict | None = None,
                     warn=None, **_ignored) -> dict:
    """``synapse run --fast`` of a program: summary.json (the exact run's
    keys per table, an ``interval`` per figure, the program's counters),
    windows.csv (estimated, no latency columns) and report.html."""
    from pathlib import Path

    from synapse_vmt import report, view
    from synapse_vmt.sim import fast_windows

    if pcap is not None:
        raise UserError("fast mode: a capture (--pcap) runs in the exact engine only; generated traffic runs in both")
    out = Path(out)
    if getattr(traffic, "attack", None) is not None:
        raise UserError("fast mode: [attack] runs in the exact engine only (its PHVs are counted apart there)")
    pr = _simulable(prepare(program, entries_file, pcap=None, traffic=traffic, duration_ns=duration_ns,
                            rate_mpps=rate_mpps, seed=seed), program)
    s, sim = fast_program(pr, pmus, block_size=block_size, window_ns=window_ns, seed=seed, overrides=overrides, fast=fast)
    for w in s["warnings"]:
        if warn:
            warn(w)
    s["pmus_total"] = pmus
    w = fast_windows(s)
    s.pop("windows", None)
    out.mkdir(parents=True, exist_ok=True)
    report.write_json(out / "summary.json", s)
    if w and len(w["t_ns"]):
        nan = np.full(len(w["t_ns"]), np.nan)
        report.write_windows_csv(out / "windows.csv", {**w, "lat_mean_ns": nan, "lat_p99_ns": nan},
                                 sim.table_names(), window_ns)
        view.finish_run(out, kind="fast", window_ns=window_ns)
    return s


# ---- a capture, streamed -------------------------------------------------------

DISCOVER = 100_000  # packets read before the simulator is built: its tables are those they visit
INTERP_BATCH = 8192  # frames per interpreter batch (the Python path)


class InterpExec:
    """Runs a stream's held frames through the Python interpreter and hands
    the visits to Rust (``CaptureStream.run_held``): the executor of the
    streaming path until the compiled program runs in Rust. Each batch is a
    separate interpreter run (its frame cache and fallback draws per batch,
    seeded by the seed and the batch number)."""

    REASONS = ["dropped", "ingress", "egress"]  # drop_pipeline -1 / 0 / 1

    def __init__(self, prog: Program, entries: Mapping[str, object], seed: int):
        self.prog, self.entries, self.seed = prog, entries, seed
        self.table_cache: dict = {}
        self.action_id = np.array(sorted(prog.actions) + [0xFFFFFFFF], dtype=np.uint32)  # index -1: none
        self.batches = 0
        self.synthesized: dict[str, int] = {}
        self.fallback: dict[str, int] = {}
        self.unsupported: list[str] = []

    def run(self, stream) -> None:
        buf, start, _t, ports = stream.held()
        data = buf.tobytes()
        st = start.tolist()
        frames = [data[st[i]:st[i + 1]] for i in range(len(st) - 1)]
        pl = ports.tolist()
        traces = []
        i = 0
        while i < len(frames):  # a run per stretch of one ingress port
            j = i + 1
            while j < len(frames) and pl[j] == pl[i]:
                j += 1
            seed = self.seed if self.batches == 0 else hash((self.seed, self.batches)) & 0x7FFFFFFF
            traces.append(self.prog.run(frames[i:j], self.entries, seed=seed, ingress_port=pl[i], table_cache=self.table_cache))
            self.batches += 1
            i = j
        for tr in traces:
            for k, v in tr.synthesized_fields.items():
                self.synthesized[k] = self.synthesized.get(k, 0) + v
            for k, v in tr.fallback_branches.items():
                self.fallback[k] = self.fallback.get(k, 0) + v
            self.unsupported = tr.unsupported
        specs = self.prog.tables
        narrow = [all(k.width <= 32 for k in sp.key) for sp in specs]
        tab, ent, act, kst, kw, pst, drp, rsn, per = [], [], [], [0], [], [0], [], [], []
        for tr in traces:
            tab.append(tr.step_table)
            ent.append(tr.step_entry)
            act.append(self.action_id[tr.step_action])
            for t, k in zip(tr.step_table.tolist(), tr.step_keys):
                kw.extend(k if narrow[t] else encode_words(specs[t], k))
                kst.append(len(kw))
            pst.extend((tr.pkt_start[1:] + (pst[-1])).tolist())
            drp.append(tr.dropped)
            rsn.append((tr.drop_pipeline.astype(np.int64) + 1).astype(np.uint32))
            per.append(tr.parser_error)
        cat = lambda xs, dt: np.ascontiguousarray(np.concatenate(xs) if xs else np.zeros(0), dtype=dt)  # noqa: E731
        stream.run_held(cat(tab, np.uint16), cat(ent, np.int32), cat(act, np.uint32), np.array(kst, dtype=np.uint32),
                        np.array(kw, dtype=np.uint32), np.array(pst, dtype=np.uint32), cat(drp, bool), cat(rsn, np.uint32),
                        cat(per, np.uint32))

    def action_name(self, a: int) -> str:
        return self.prog.actions[a].name if a in self.prog.actions else ""

    def events(self) -> tuple[dict, dict, list]:
        return self.synthesized, self.fallback, self.unsupported

    def fill(self, stream, until_ps: int, max_packets: int | None = None) -> None:
        """Reads and runs packets while the last one read arrives before ``until_ps``."""
        left = max_packets
        while left is None or left > 0:
            n = stream.read(until_ps, INTERP_BATCH if left is None else min(INTERP_BATCH, left))
            if n == 0:
                return
            self.run(stream)
            if left is not None:
                left -= n


class NativeExec:
    """The compiled program's Rust executor (:class:`synapse_vmt.p4.engine.RustProgram`)
    run by the stream itself: the per-packet loop never leaves Rust."""

    def __init__(self, rp, gen=None):
        self.rp = rp
        # the program's generated code when loaded (synapse_vmt.p4.codegen): the same answers, sooner
        self.runner = rp.core if gen is None else gen
        self.action_names = list(rp.core.actions)
        self.error_names = dict(rp.core.error_names)

    def fill(self, stream, until_ps: int, max_packets: int | None = None) -> None:
        stream.fill(self.runner, until_ps, max_packets)

    def action_name(self, a: int) -> str:
        return self.action_names[a] if 0 <= a < len(self.action_names) else ""

    def learn_stats(self) -> dict:
        return dict(self.rp.core.learn_stats())

    def events(self) -> tuple[dict, dict, list]:
        ev = self.rp.core.events()
        synth = {k.split(": ", 1)[1]: v for k, v in ev.items() if k.startswith("synthesized field: ")}
        fb = {k.split(": ", 1)[1]: v for k, v in ev.items() if k.startswith("fallback branch: ")}
        return synth, fb, list(self.rp.core.unsupported)


def _capture_error(e: ValueError) -> UserError:
    return UserError(str(e))


def run_capture(out, *, program: str, entries_file: str | None, pcap: str, rate_mpps: float | None = 50.0,
                ingress_port: int | None = 0, duration_ns: float | None = None, pmus: int = 16, block_size: int = 256,
                window_ns: float = 10_000.0, seed: int = 1, overrides: dict | None = None, out_pcap: str | None = None,
                stop_at_truncated: bool = False, discover: int = DISCOVER, quiet: bool = True,
                engine: str = "rust", warn=None, threads: int = 2, codegen: str = "off", info=None) -> dict:
    """``synapse run --p4 --pcap``, streamed: the capture is read in chunks in
    Rust, each batch run through the program, its routes interned and
    appended to the running simulator, one control period at a time
    (``docs/program-layer-streaming.md``). ``rate_mpps`` None replays at the
    capture's timestamps; ``ingress_port`` None takes the capture's
    interface. The simulator's tables are the keyed tables the first
    ``discover`` packets visit; a table first visited later is counted but
    not simulated (``unsimulated_tables``). The summary covers the capture
    (its last arrival plus 50 µs) or ``duration_ns``; the run then ends
    drained (:func:`synapse_vmt.sim.finish`); ``warn(line)`` hears of
    tables left without a PMU.

    ``threads`` 2 (the default) overlaps the two halves of a period: while
    the simulator runs period k, another thread reads and executes the
    packets of period k + 1 (both release the GIL). The simulator is handed
    the same keys, routes and arrivals in the same order as with
    ``threads`` 1, so the results are the same bit for bit; memory grows by
    one period's arrivals.

    ``codegen`` (``auto``, ``on``, ``off``) runs the program's generated
    code instead of the Rust interpreter when :func:`synapse_vmt.p4.codegen.load`
    gives it (``info(line)`` hears which ran); the counts are the same."""
    import concurrent.futures
    import contextlib
    import csv
    import os
    import time
    from pathlib import Path

    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    from synapse_vmt import report
    from synapse_vmt.errors import atomic_write
    from synapse_vmt.p4.entries import load_entries
    from synapse_vmt.sim import failure, finish, pmu_warning
    from synapse_vmt.view.bins import WindowBins

    if out_pcap is not None and engine != "rust":
        raise UserError("run --p4 --out-pcap: output packets need the compiled program's executor (the deparser); "
                        "the interpreter computes no output packets")
    out = Path(out)
    prog = Program.load(program)
    entries = load_entries(entries_file or os.devnull, program)
    specs = prog.tables
    gen = None
    if engine == "rust":
        from synapse_vmt.p4 import codegen as gencode
        from synapse_vmt.p4.engine import RustProgram

        rp = RustProgram(prog, entries)
        gen = gencode.load(rp, codegen, pcap, ingress_port, warn=warn, info=info)
        if gen is not None and info:
            info(f"codegen: running the generated code ({gen.path}, {'built' if gen.built else 'cached'}, "
                 f"{gen.load_s:.1f} s)")
        exe = NativeExec(rp, gen)
        reasons = ["dropped"]
    else:
        if codegen == "on":
            raise UserError("run --p4 --codegen on: generated code replaces the Rust executor; leave out --engine python")
        if any(t.get("add_on_miss") for _, t in prog.table_json.values()):
            raise UserError(f"{program}: add-on-miss tables (data-plane writes) run in the Rust executor only: "
                            "leave out --engine python")
        exe = InterpExec(prog, entries, seed)
        reasons = InterpExec.REASONS
    try:
        stream = _core.CaptureStream(str(pcap), [sp.words for sp in specs], rate_mpps, ingress_port, None,
                                     stop_at_truncated, out_pcap, reasons)
    except ValueError as e:
        raise _capture_error(e) from None
    limit_ps = None if duration_ns is None else int(duration_ns * 1000)
    con = Console(stderr=True, quiet=quiet)
    t0, c0 = time.perf_counter(), time.process_time()
    files = contextlib.ExitStack()
    with files, Progress(TextColumn("streaming"), BarColumn(), DownloadColumn(), TextColumn("{task.fields[pkts]:,} packets"),
                  TextColumn("{task.fields[rate]:,.0f} packets/s"), TimeElapsedColumn(), console=con, transient=True,
                  disable=quiet) as bar:
        size = stream.progress()[1]
        task = bar.add_task("run", total=size, pkts=0, rate=0.0)

        def tick():
            b, _, n = stream.progress()
            bar.update(task, completed=b, pkts=n, rate=n / max(time.perf_counter() - t0, 1e-9))

        try:
            exe.fill(stream, limit_ps if limit_ps is not None else 1 << 63, discover)
        except ValueError as e:
            raise _capture_error(e) from None
        if stream.progress()[2] == 0:
            raise UserError(f"{pcap}: no packets")
        limit = max_key_words()
        visited = stream.visited()
        for t in visited:
            if specs[t].words > limit:
                raise UserError(f"table {specs[t].name}: key of {specs[t].words} 32-bit words is wider than the simulator's "
                                f"{limit} words ({32 * limit} bits)")
        sim_tables = visited
        if not sim_tables:
            raise UserError(f"{program}: no packet visits a keyed table the simulator can take; nothing to simulate")
        sim_of = [None] * len(specs)
        for i, t in enumerate(sim_tables):
            sim_of[t] = i
        stream.simulate(sim_of)
        names = [specs[t].name for t in sim_tables]
        args = []
        for t in sim_tables:
            bits, kinds, lo, hi, mask = _word_rows(specs[t], entries.get(specs[t].name))
            args.append((specs[t].name, bits, kinds, lo, hi, mask, np.zeros((0, len(bits)), dtype=np.uint32),
                         np.zeros(0, dtype=np.int64)))
        base = _sim_base(seed, window_ns, duration_ns or 0.0, block_size, overrides)
        cfg = sim_config(base, names, even_split(names, pmus), pmus)
        try:
            core = _core.routed_simulator(json.dumps(cfg), args, np.zeros(1, np.uint32), np.zeros(0, np.uint32),
                                          np.zeros(0, np.uint32))
        except ValueError as e:
            raise UserError(str(e)) from None
        warnings = [w for w in [pmu_warning(core, pmus)] if w]
        for w in warnings:
            if warn:
                warn(w)
        period = max(window_ns, 50 * window_ns)  # ns of simulated time per control period
        t, series = 0.0, WindowBins()  # run.png's series: at most view.bins.CAP bins per table
        sim_s = sim_cpu = 0.0
        # windows.csv and edges.csv are written as the run goes (renamed at the end): only the
        # plot's columns stay in memory
        wcsv = csv.writer(files.enter_context(atomic_write(out / "windows.csv")))
        header = [False]  # windows.csv's columns are the simulator's: written with its first windows
        ecsv = csv.writer(files.enter_context(atomic_write(out / "edges.csv")))
        ecsv.writerow(report.EDGE_COLUMNS)

        glue_cpu = 0.0  # the main thread's Python per period: windows, CSV rows, the plot's bins
        fill_cpu = [0.0]  # CPU of the reading + executing calls

        def fill(until_ps: int, max_packets: int | None = None) -> None:
            c = time.thread_time()
            exe.fill(stream, until_ps, max_packets)
            fill_cpu[0] += time.thread_time() - c

        def advance(t_end: float, ahead=None) -> None:
            """Syncs, then runs the simulator to ``t_end`` while ``ahead()``
            (the next period's reading and executing) runs in the other thread."""
            nonlocal sim_s, sim_cpu, glue_cpu
            stream.sync(core)
            job = pool.submit(ahead) if ahead is not None and pool is not None else None
            a, b = time.perf_counter(), time.thread_time()
            core.run_until(t_end)
            sim_s += time.perf_counter() - a
            sim_cpu += time.thread_time() - b
            g = time.thread_time()
            w = core.windows()
            if not header[0] and w and len(w["t_ns"]):
                wcsv.writerow(report.window_columns(w))
                header[0] = True
            wcsv.writerows(report.window_rows(w, names, window_ns))
            ecsv.writerows(report.edge_rows(core.edges(), names))
            if w and len(w["t_ns"]):
                series.add(w["t_ns"], w["table"], w)
            glue_cpu += time.thread_time() - g
            if job is not None:
                job.result()
            elif ahead is not None:
                ahead()

        def next_t(t: float) -> float:
            return t + period if limit_ps is None else min(t + period, limit_ps / 1000)

        def more(t: float) -> bool:
            return not stream.done and (limit_ps is None or t * 1000 < limit_ps)

        # Period k's packets are read and executed before the simulator runs
        # period k; with threads 2, while it runs period k - 1.
        pool = files.enter_context(concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="synapse-stream")) \
            if threads > 1 else None
        try:
            if more(t):
                t = next_t(t)
                fill(int(t * 1000) + 1)
                while True:
                    t_next = next_t(t)
                    ahead = (lambda u=int(t_next * 1000) + 1: fill(u)) if more(t) else None
                    advance(t, ahead)
                    tick()
                    if ahead is None:
                        break
                    t = t_next
        except ValueError as e:
            raise _capture_error(e) from None
        stream.sync(core)
        # The duration: the capture plus 50 µs (as a generated run's), or the given one
        end = max(t, stream.last_time_ps / 1000 + 50_000.0) if limit_ps is None else limit_ps / 1000
        if end > t:
            advance(end)
            t = end
        if not header[0]:
            wcsv.writerow(report.window_columns({}))
        # the summary covers the duration; the run then ends drained (arrivals stop: none is pending)
        s = core.summary()
        hists = {n: core.latency_histogram(n) for n in names}
        a, b = time.perf_counter(), time.thread_time()
        inv = finish(core)
        sim_s += time.perf_counter() - a
        sim_cpu += time.thread_time() - b
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if not inv["ok"] and inv["drained"]:
        raise RuntimeError(failure(inv))
    c = stream.counters()
    tables = {}
    for ti, sp in enumerate(specs):
        if c["lookups"][ti] == 0:
            continue
        row = dict(s["tables"].get(sp.name, {}))
        acts = {}
        for a, n in c["actions"][ti].items():
            acts[exe.action_name(a)] = n
        row.update({"lookups": c["lookups"][ti], "matched": c["matched"][ti], "actions": acts})
        row["simulated"] = sp.name in s["tables"]
        row["distinct_keys"] = c["keys"][ti]
        tables[sp.name] = row
    s["tables"] = tables
    s["packets"] = c["packets"]
    synth, fallback, unsupported = exe.events()
    s["synthesized_fields"] = dict(sorted(synth.items()))
    s["fallback_branches"] = dict(sorted(fallback.items()))
    names_of = exe.error_names if engine == "rust" else prog.pc.error_names
    s["parser_rejects"] = dict(sorted((names_of.get(k, f"error {k}"), v) for k, v in c["parser_errors"].items()))
    s["unsimulated_tables"] = {specs[t].name: f"first visited after the first {discover} packets"
                               for t in range(len(specs)) if c["lookups"][t] > 0 and sim_of[t] is None}
    s["sim_key_words"] = int(core.key_words)
    s["unsupported"] = unsupported
    s["routes"] = c["routes"]
    inv["fifo_overflows"] = inv.pop("dropped")
    s["invariants"] = inv
    s["warnings"] = warnings
    s["pmus_total"] = pmus
    s["p4_drops"] = {"total": c["dropped"], "by_reason": c["drops"]}
    learned = exe.learn_stats() if engine == "rust" else {}
    if learned:
        # the data plane's writes (docs/p4-stateful.md): what the tables learned, and the updates they made
        s["learned_entries"] = learned
        u = core.update_stats()
        s["updates"] = {k: u[k] for k in ("requested", "committed", "batches", "invalidated", "stale_answers",
                                          "latency_ns_p50", "latency_ns_p99", "latency_ns_max")}
    s["stream"] = {
        "clock": "timestamps" if rate_mpps is None else f"rate {rate_mpps} Mpps",
        "ingress_port": "interface" if ingress_port is None else ingress_port,
        "unrouted_packets": c["unrouted"],
        "reordered_timestamps": c["reordered"],
        "entry_conflicts": c["entry_conflicts"],
        "table_writes": c["table_writes"],
        "interner_bytes": c["interner_bytes"],
        "wall_s": wall,
        "packets_per_s": c["packets"] / wall if wall > 0 else 0.0,
        "sim_wall_s": sim_s,
        "cpu_s": cpu,
        "sim_cpu_s": sim_cpu,
        "drained": inv["drained"],
        "threads": threads,
        "pending_peak": c["pending_peak"],  # the most arrivals held between two syncs (one period's)
        # CPU seconds per stage, each of the thread it ran on: reading frames, the executor,
        # counters and route interning, output pcaps, handing the simulator what is new (sync),
        # the cycle simulator (run_until and the drain), and Python's per-period work
        "stages_cpu_s": {**c["stage_s"], "simulate": sim_cpu, "python": glue_cpu},
    }
    s["stream"]["engine"] = engine
    s["stream"]["generated_code"] = gen is not None  # the program's generated code ran (--codegen)
    if stream.warning:
        s["stream"]["warning"] = stream.warning
        con.print(f"warning: {stream.warning}")
    per_port = stream.finish()
    if out_pcap is not None:
        s["out_pcap"] = {"dir": str(out_pcap), "packets": c["outputs"], "per_port": {str(k): v for k, v in per_port.items()},
                         "dropped": c["dropped"], "copies": c["copies"]}
    report.plot_run(out / "run.png", series.windows_dict(), names, window_ns * series.k, hists)
    report.write_json(out / "summary.json", s)
    from synapse_vmt import view

    view.finish_run(out, kind="run --p4", window_ns=window_ns, sim=core, hists=hists, cfg=program)
    return s


# ---- program scenarios and the run command ---------------------------------------

SCENARIO_KEYS = {"program", "traffic", "sim", "fast", "attack"}
PROGRAM_KEYS = {"p4", "entries", "pcap", "rate_mpps", "duration_ns", "pmus", "block_size", "window_ns", "seed",
                "timestamps", "ingress_port", "out_pcap", "stop_at_truncated", "engine"}
BUILTIN = {"builtin:up4": "up4-bmv2.json.gz"}


def resolve_program(spec: str, base: "Path | None" = None) -> str:
    """A program path; ``builtin:up4`` is the UPF copy shipped in the package
    (ONF UP4, Apache-2.0: see ``synapse_vmt/data/NOTICE-up4.md``)."""
    from pathlib import Path

    if spec in BUILTIN:
        import gzip
        import tempfile
        from importlib import resources

        data = gzip.decompress(resources.files("synapse_vmt.data").joinpath(BUILTIN[spec]).read_bytes())
        d = Path(tempfile.gettempdir()) / "synapse-vmt-builtin"
        d.mkdir(exist_ok=True)
        p = d / BUILTIN[spec].removesuffix(".gz")
        if not p.exists() or p.read_bytes() != data:
            p.write_bytes(data)
        return str(p)
    p = Path(spec)
    if base is not None and not p.is_absolute():
        p = base / p
    return str(p)


def parse_ingress_port(v, where: str) -> int | None:
    """An ingress port: a number, or ``interface`` (the capture's; None)."""
    if v == "interface":
        return None
    try:
        p = int(v)
    except (TypeError, ValueError):
        p = -1
    if p < 0 or isinstance(v, bool):
        raise UserError(f"{where}: expected a port number >= 0 or \"interface\", found {v!r}")
    return p


def load_scenario(path: str) -> dict:
    """A program scenario (TOML with ``[program]``): the keyword arguments of :func:`run_program`."""
    from pathlib import Path

    from synapse_vmt.p4 import gentraffic

    doc = read_toml(path)
    for k in doc:
        if k not in SCENARIO_KEYS:
            raise UserError(f"{path}: unknown table [{k}]; a program scenario has {', '.join(sorted(SCENARIO_KEYS))}")
    pg = doc.get("program")
    if not isinstance(pg, dict) or "p4" not in pg:
        raise UserError(f"{path}: [program]: expected p4 = \"PROGRAM.json\" (or \"builtin:up4\")")
    for k in pg:
        if k not in PROGRAM_KEYS:
            raise UserError(f"{path}: [program]: unknown key {k!r}; expected one of {', '.join(sorted(PROGRAM_KEYS))}")
    base = Path(path).parent
    kw = {k: v for k, v in pg.items() if k not in ("p4", "entries", "pcap")}
    kw["program"] = resolve_program(pg["p4"], base)
    kw["entries_file"] = str(base / pg["entries"]) if pg.get("entries") else None
    kw["pcap"] = str(base / pg["pcap"]) if pg.get("pcap") else None
    kw["traffic"] = _with_attack(doc, path)
    kw["overrides"] = doc.get("sim", {})
    if "ingress_port" in kw:
        kw["ingress_port"] = parse_ingress_port(kw["ingress_port"], f"{path}: [program] ingress_port")
    if kw.get("out_pcap"):
        kw["out_pcap"] = str(base / kw["out_pcap"])
    return kw


def load_fast(path: str, overrides: tuple[str, ...] | list[str] = ()) -> dict:
    """A program scenario's ``[fast]`` table (the fast mode's parameters),
    with ``--set fast.KEY=VALUE`` overrides; any other ``--set`` is an error."""
    doc = read_toml(path) if path else {}
    fast = dict(doc.get("fast") or {})
    for o in overrides:
        k, sep, v = o.partition("=")
        if not sep or not k.startswith("fast.") or "." in k[5:]:
            raise UserError(f"--set {o}: a program run takes only fast.KEY=VALUE overrides (its settings are in [program] and [sim])")
        try:
            fast[k[5:]] = tomllib.loads(f"x = {v}")["x"]
        except tomllib.TOMLDecodeError:
            fast[k[5:]] = v
    return fast


def load_traffic(path: str):
    """Generated traffic for ``run --p4 --traffic``: the ``[traffic]`` table of a TOML file."""
    from synapse_vmt.p4 import gentraffic

    doc = read_toml(path)
    if not isinstance(doc.get("traffic"), dict):
        raise UserError(f"{path}: expected a [traffic] table (traffic classes, as in a program scenario)")
    return _with_attack(doc, path)


def _with_attack(doc: dict, path: str):
    """The ``[traffic]`` of a document and its ``[attack]`` (``spec.attack``, :mod:`synapse_vmt.p4.attack`)."""
    from synapse_vmt.p4 import attack, gentraffic

    if "traffic" not in doc:
        if "attack" in doc:
            raise UserError(f"{path}: [attack]: needs generated traffic ([traffic])")
        return None
    spec = gentraffic.parse_spec(doc["traffic"], f"{path}: [traffic]")
    if "attack" in doc:
        spec.attack = attack.parse(doc["attack"], f"{path}: [attack]", [c.name for c in spec.classes])
    return spec


def run_program(out, *, program: str, entries_file: str | None, pcap: str | None = None, traffic=None,
                duration_ns: float | None = None, rate_mpps: float = 50.0, pmus: int = 16, block_size: int = 256,
                window_ns: float = 10_000.0, seed: int = 1, overrides: dict | None = None, quiet: bool = True,
                warn=None, timestamps: bool = False, ingress_port: int | None = 0, out_pcap: str | None = None,
                stop_at_truncated: bool = False, engine: str = "rust", threads: int = 2, codegen: str = "off",
                info=None) -> dict:
    """``synapse run --p4``: every keyed table a VMT from one pool of ``pmus``
    PMUs (split evenly to start; the run is static); writes windows.csv,
    edges.csv, run.png and summary.json to ``out``, then the report
    (report.html, latency.csv, cfg.json, run.json: :func:`synapse_vmt.view.finish_run`).
    A capture is streamed (:func:`run_capture`); generated traffic has one
    frame per flow, run through the interpreter up front. The summary covers
    the duration; the run then ends drained (``invariants``: ``drained``,
    ``stuck``); ``warn(line)`` hears of tables left without a PMU before the run."""
    from pathlib import Path

    from synapse_vmt import report
    from synapse_vmt.sim import failure, finish, pmu_warning

    if pcap is not None and traffic is None:
        return run_capture(out, program=program, entries_file=entries_file, pcap=pcap,
                           rate_mpps=None if timestamps else rate_mpps, ingress_port=ingress_port,
                           duration_ns=duration_ns, pmus=pmus, block_size=block_size, window_ns=window_ns, seed=seed,
                           overrides=overrides, out_pcap=out_pcap, stop_at_truncated=stop_at_truncated, quiet=quiet,
                           engine=engine, warn=warn, threads=threads, codegen=codegen, info=info)
    if codegen == "on":
        raise UserError("run --p4 --codegen on: generated code runs a capture (--pcap), not generated traffic")
    if out_pcap is not None:
        raise UserError("run --p4 --out-pcap: output packets are written for a capture (--pcap), not generated traffic")
    out = Path(out)
    pr = _simulable(prepare(program, entries_file, pcap=pcap, traffic=traffic, duration_ns=duration_ns,
                            rate_mpps=rate_mpps, seed=seed, pmus=pmus, block_size=block_size), program)
    sim = build_sim(pr, even_split(pr.routes.tables, pmus), pmus, block_size=block_size, window_ns=window_ns, seed=seed,
                    overrides=overrides)
    warnings = [w for w in [pmu_warning(sim.core, pmus)] if w]
    for w in warnings:
        if warn:
            warn(w)
    chunk = max(window_ns, pr.duration_ns / 50)
    t, ws, es = 0.0, [], []
    while t < pr.duration_ns:
        t = min(pr.duration_ns, t + chunk)
        sim.run_until(t)
        ws.append(sim.windows())
        es.append(sim.edges())
    s = program_summary(pr, sim)
    if pr.attack is not None:
        s["attack_traffic"] = pr.attack
    names = sim.table_names()
    hists = {n: sim.latency_histogram(n) for n in names}
    inv = finish(sim)  # the summary above covers the duration only
    if not inv["ok"] and inv["drained"]:
        raise RuntimeError(failure(inv))
    inv["fifo_overflows"] = inv.pop("dropped")
    s["invariants"] = inv
    s["warnings"] = warnings
    s["pmus_total"] = pmus
    from synapse_vmt.opt.controller import concat

    w, e = concat(ws), concat(es)
    out.mkdir(parents=True, exist_ok=True)
    report.write_windows_csv(out / "windows.csv", w, names, window_ns)
    report.write_edges_csv(out / "edges.csv", e, names)
    report.plot_run(out / "run.png", w, names, window_ns, hists)
    report.write_json(out / "summary.json", s)
    from synapse_vmt import view

    view.finish_run(out, kind="run --p4", window_ns=window_ns, sim=sim, hists=hists, cfg=program)
    return s

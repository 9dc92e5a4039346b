"""Scenarios: the validated configuration of one simulation.

A scenario is a TOML file whose tree mirrors the simulator's component tree
(``[pmus]``, ``[elu]``, ``[hbm]``, ``[interconnect]``, ``[[tables]]``, ...).
It is validated here with pydantic (unknown keys and bad values are errors
that name the key), then handed to the Rust simulator as JSON, which checks
it again with ``deny_unknown_fields``. ``--set a.b=c`` overrides any field:
``--set pmus.count=4 --set pmus.block_size=256``, ``--set tables.0.lookup_bits=12``.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from synapse_vmt.errors import TomlLines, UserError, read_text


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def F(default: Any = ..., doc: str = "", unit: str | None = None, **kw: Any) -> Any:
    """A scenario field with its meaning and unit: the documentation's
    schema page (docs/reference/scenario.md) is generated from them, and a
    field without a ``doc`` fails the docs build."""
    return Field(default, description=doc, json_schema_extra={"unit": unit} if unit else None, **kw)


class Generate(_Model):
    """A rule set generated in ClassBench's manner (``synapse rules gen``)."""

    type: Literal["acl", "fw", "ipc"] = F("acl", "ClassBench seed the set is drawn from (acl1, fw1, ipc1).")
    count: int = F(1000, "Rules in the set.", "rules", ge=0)
    seed: int = F(1, "Seed of the rule generator (the scenario's `seed` does not change the rules).", ge=0)


class RulesFile(_Model):
    """A ClassBench filter file (relative paths: to the scenario file)."""

    path: str = F(doc="Path of the rule file.")


class RulesGen(_Model):
    """A generated rule set."""

    generate: Generate = F(Generate(), "How the rules are generated.")


class Table(_Model):
    """One ``[[tables]]`` item: a logical table backed by a VMT."""

    name: str = F("acl", "The table's name (edges, entry shares and updates refer to it).")
    rules: Union[RulesFile, RulesGen] = F(RulesGen(), "The rule set: `{path = FILE}` or `{generate = {...}}`.")
    lookup_bits: int = F(10, "N of the VMU's 2^N-entry lookup table (consistent-hashing slots).", "bits", ge=1, le=24)
    pmus: list[Annotated[int, Field(ge=0)]] | None = F(
        None, "PMU ids the table owns at the start; omitted: an even share of the PMUs no table names.", "PMU ids")
    phv_fifo: int = F(256, "The VMU's PHV waiting FIFO (PHVs parked on a miss).", "PHVs", ge=1)


class Edge(_Model):
    """One ``[[edges]]`` item: PHVs leaving ``src`` go to ``dst`` with probability ``p``."""

    src: str = F(doc="Table the PHV leaves.")
    dst: str = F(doc="Table it goes to.")
    p: float = F(doc="Probability of this edge; what a table's edges leave over exits the pipeline.", ge=0.0, le=1.0)


class Pmus(_Model):
    """``[pmus]``: the pool of Physical Matching Units (CAM caches)."""

    count: int = F(8, "PMUs in the system.", "PMUs", ge=0, le=65000)
    block_size: int = F(256, "CAM entries per PMU.", "entries", ge=0)
    clock_ratio: float = F(1.0, "PMU clock over the pipeline clock.", "ratio", gt=0.0)
    latency_cycles: int = F(2, "τ_c: cycles from a request to its CAM answer.", "PMU cycles", ge=1)
    ii_cycles: int = F(1, "II_c: cycles between two requests a PMU accepts.", "PMU cycles", ge=1)
    q_r: int = F(16, "Q_r: request queue depth.", "requests", ge=1)
    q_p: int = F(16, "Q_p: response queue depth.", "responses", ge=1)
    q_m: int = F(16, "Q_m: miss queue depth (misses waiting for the ELU bus).", "misses", ge=1)


class Vmu(_Model):
    """``[vmu]``: the Virtual Matching Unit in front of each table's PMUs."""

    latency_cycles: int = F(2, "Cycles from a key entering the VMU to its request leaving (hash and lookup-table read).",
                            "cycles", ge=0)
    vnodes: int = F(1, "Points per PMU on the consistent-hashing ring (the paper: one).", "points", ge=1)
    join: Literal["cold", "warm"] = F("cold", "How a PMU joins a table that has PMUs: cold (its share of the keys "
                                      "misses to the ELU, the paper's) or warm (the old owners copy their cached "
                                      "entries of the moved slots over the ELU bus first).")


class Pipeline(_Model):
    """``[pipeline]``: the match-action pipeline around the tables."""

    stage_fifo: int = F(64, "Input FIFO of each table: full at an entry table drops the packet, "
                            "between tables it back-pressures.", "PHVs", ge=1)


class Interconnect(_Model):
    """``[interconnect]``: the network between VMUs and PMUs."""

    kind: Literal["segmented", "crossbar", "bus"] = F("segmented", "Segmented channels (the paper's), a full crossbar or a "
                                                                   "shared bus; a conflict waits a cycle.")
    channels: int = F(4, "Channels of the segmented design (PMUs split into equal contiguous groups).", "channels", ge=1)
    latency_cycles: int = F(1, "Cycles a request spends crossing the network.", "cycles", ge=0)


class TrieBuild(_Model):
    """The multibit trie's build (``[elu.build.trie]``; classify/trie.rs)."""

    stride: int = F(8, "Key bits consumed per level (a node has 2^stride entries).", "bits", ge=1, le=16)
    max_bytes: int = F(256 << 20, "Most bytes the trie may take; a larger build is an error (use another `elu.algo`).",
                       "bytes", ge=1)


class Facl(_Model):
    """FACL's classification module the decision tree is mapped onto
    (``[elu.build.dtree.facl]``; the paper's 4 x DT-20(4K), 3 x LS-8(8K))."""

    dt_modules: int = F(4, "Decision-tree engines.", "engines", ge=1)
    dt_layers: int = F(20, "Layers per decision-tree engine.", "layers", ge=1)
    layer_nodes: int = F(4096, "Nodes one layer holds.", "nodes", ge=1)
    ls_engines: int = F(8, "Parallel linear-search engines per module.", "engines", ge=1)
    ls_depth: int = F(8192, "Rules one linear-search engine holds.", "rules", ge=1)
    ls_modules: int = F(3, "Linear-search modules.", "modules", ge=1)


class DtreeBuild(_Model):
    """The decision tree's build (``[elu.build.dtree]``; classify/dtree.rs)."""

    bucket: int = F(8, "Most rules in a leaf (searched linearly).", "rules", ge=1)
    max_depth: int = F(40, "Deepest the tree may grow.", "levels", ge=1)
    spfac: float = F(4.0, "Cuts may replicate rules up to this times a node's rule count.", "ratio", ge=1.0)
    max_cut_bits: int = F(7, "Most bits one cut consumes.", "bits", ge=1, le=16)
    max_bytes: int = F(512 << 20, "Most bytes the tree may take.", "bytes", ge=1)
    facl: Facl = F(Facl(), "The FACL engines the tree is laid out on.")


class PtreeBuild(_Model):
    """The partitioned tree's build (``[elu.build.ptree]``; classify/partition.rs)."""

    bucket: int = F(32, "Most rules in a leaf.", "rules", ge=1)
    max_depth: int = F(16, "Deepest a tree may grow.", "levels", ge=1)
    spfac: float = F(1.2, "A node's children hold at most this times its rules.", "ratio", ge=1.0)
    max_bytes: int = F(512 << 20, "Most bytes the structure may take.", "bytes", ge=1)
    simd: bool = F(True, "SIMD kernels (AVX2 or AVX-512, chosen at run time); false forces the scalar path.")
    avx512: bool = F(True, "AVX-512 kernels where the CPU has them; false: AVX2.")
    max_trees: int = F(4, "Most trees (the smallest partitions join the catch-all one).", "trees", ge=1)
    small: int = F(16384, "Sets up to this many rules also try one or two trees (0: never).", "rules", ge=0)
    max_delta: int = F(64, "Unused leaf blocks tolerated before a compaction: max(max_delta, blocks in use).",
                       "blocks", ge=0)
    wide_leaves: int | None = F(None, "Rules reaching more leaves than this are kept in the side leaf (0: never; "
                                "unset: 64 when the set's few such rules make most of an update's leaf writes, else never).",
                                "leaves", ge=0)


class EluBuild(_Model):
    """Build parameters of the ELU's lookup structures (``[elu.build]``)."""

    trie: TrieBuild = F(TrieBuild(), "The multibit trie (`elu.algo = \"trie\"`).")
    dtree: DtreeBuild = F(DtreeBuild(), "The decision tree (`elu.algo = \"dtree\"`).")
    ptree: PtreeBuild = F(PtreeBuild(), "The partitioned tree (`elu.algo = \"ptree\"`).")


class Elu(_Model):
    """``[elu]``: the External Lookup Unit resolving PMU misses from HBM."""

    algo: Literal["trie", "linear", "dtree", "ptree"] = F("trie", "The lookup structure walked in HBM.")
    orb_entries: int = F(64, "Outstanding Request Buffer entries (lookups in flight, replies in order).", "entries", ge=1)
    miss_queue: int = F(64, "The shared miss queue from all PMUs.", "misses", ge=1)
    lookup_slots: int = F(8, "Lookups the static scheduler keeps in flight at once.", "lookups", ge=1)
    latency_cycles: int = F(1, "Cycles from the miss queue into the ORB.", "cycles", ge=0)
    build: EluBuild = F(EluBuild(), "How each structure is built.")


class Hbm(_Model):
    """``[hbm]``: the off-chip memory holding the full rule sets."""

    pseudo_channels: int = F(1, "Pseudo-channels.", "channels", ge=1)
    banks: int = F(16, "Banks per pseudo-channel.", "banks", ge=1)
    latency_ns: float = F(100.0, "Access latency.", "ns", ge=0.0)
    bytes_per_access: int = F(32, "Bytes one access transfers.", "bytes", ge=1)
    peak_gbps: float = F(14.4, "Peak bandwidth of one pseudo-channel.", "GB/s", gt=0.0)
    bank_busy_ns: float = F(48.0, "Row cycle: how long a bank is busy after an access starts.", "ns", ge=0.0)


class FlowTraffic(_Model):
    """``[traffic]`` of kind ``flows``: the flow-level model (CAIDA flow sizes,
    Poisson packets per flow)."""

    kind: Literal["flows"] = F("flows", "This kind (the default).")
    dist: str = F("caida2019", "A built-in flow-size distribution, optionally truncated: `NAME[:MAX_BYTES]`.",
                  pattern=r"^(caida2019|caida2018)(:[0-9.eE+]+)?$")
    flows: int = F(1_200, "Flows over the run (sets the offered load).", "flows", ge=0)
    mean_pkt_bytes: float = F(800.0, "Bytes per packet: a flow of B bytes sends ceil(B / this) packets.", "bytes", gt=0.0)
    flow_duration_ns: float = F(250_000.0, "Mean active time of a flow.", "ns", gt=0.0)
    profile: Literal["uniform", "flat", "step", "ramp", "diurnal", "burst"] = F(
        "uniform", "Flow arrival rate over the run (`synapse traffic show`).")
    max_bytes: float = F(1e7, "Largest flow drawn (the CAIDA tail reaches 10 GB); 0: no limit.", "bytes", ge=0.0)
    nomatch_share: float = F(0.0, "Share of the flows whose key at a table matches none of its rules but catch-alls "
                                  "(docs: Keys that match no rule).", "fraction", ge=0.0, le=1.0)


class TraceTraffic(_Model):
    """``[traffic]`` of kind ``trace``: a ClassBench header trace replayed."""

    kind: Literal["trace"] = F(doc="This kind.")
    path: str = F(doc="The trace file (relative paths: to the scenario file).")
    rate_mpps: float = F(100.0, "Replay rate.", "Mpps", gt=0.0)


class UpdateEngine(_Model):
    """What a rule update costs (``[update_engine]``; sim/updates.rs)."""

    invalidate: Literal["exact", "flush", "none"] = F(
        "exact", "Cached answers an update made stale: `exact` (the keys a changed entry covers), `flush` "
                 "(the whole CAM), `none` (a test hook).")
    build_gbps: float = F(16.0, "Write bandwidth of a replica build beside the old trie.", "GB/s", gt=0.0)
    swap_ns: float = F(1000.0, "Fixed cost of a replica swap.", "ns", ge=0.0)
    dtree_op_ns: float = F(200.0, "An incremental decision-tree update, per operation.", "ns", ge=0.0)
    ptree_op_ns: float = F(200.0, "An incremental partitioned-tree update, per operation (a fold-in is also charged "
                                  "the tree's bytes at `build_gbps` plus `swap_ns`).", "ns", ge=0.0)
    max_batch: int = F(256, "Most operations one build (batch) takes; the rest wait for the next.", "operations", ge=1)
    consistency: Literal["table", "program"] = F(
        "table", "`table`: each table commits its updates on its own; `program`: a PHV sees one version of every "
                 "table (two-phase updates with version tags).")


class Update(_Model):
    """One ``[[updates]]`` item: operations at ``at_ns`` (``file``: one per
    line; ``ops``: inline lines) or random churn of ``churn_per_s``
    operations per second from ``at_ns`` to ``until_ns`` (0: the end)."""

    at_ns: float = F(0.0, "When the operations are requested (churn: when it starts).", "ns", ge=0.0)
    table: str = F("", "Table the operations apply to; empty: the first table.")
    file: str | None = F(None, "Operation file, one operation per line (relative paths: to the scenario file).")
    ops: list[str] = F([], "Operations inline (`insert POS F1 F2 ...`, `delete POS`, `modify POS`, `default`).")
    churn_per_s: float = F(0.0, "Random churn: inserts, deletes, modifies in equal parts.", "operations/s", ge=0.0)
    until_ns: float = F(0.0, "When churn stops; 0: the end of the run.", "ns", ge=0.0)
    seed: int = F(1, "Seed of the churn.", ge=0)
    transaction: dict[str, list[str]] = F(
        {}, "One transaction over several tables: per table, its operations (one program version under "
            "`consistency = \"program\"`).")
    churn_tables: list[str] = F([], "Churn whose every event is one transaction of one random operation on each of "
                                    "these tables (instead of `table`).")


class Mix(_Model):
    """One ``[[mix]]`` item: from ``at_ns`` on, arriving PHVs enter the
    tables in these shares (``entry``'s form): the traffic shifts between
    tables while the pipeline runs (applied by :class:`synapse_vmt.sim.Simulation`
    through ``Simulator.set_entry``)."""

    at_ns: float = F(doc="When the new shares take effect.", unit="ns", ge=0.0)
    entry: dict[str, float] = F(doc="Share of arriving PHVs entering each table (shares >= 0, positive sum).")


class Fast(_Model):
    """The fast mode's parameters (``synapse run --mode fast``,
    docs/fast-mode.md; the Rust side is ``sim::fast::FastConfig``)."""

    sample_flows: int = F(150, "Flows simulated (SHARDS sampling rate: this over the flows, at most 1).", ge=1)
    elu_share: float = F(0.1, "Share of the run's time the exact ELU and HBM run in sampled windows.", gt=0.0, le=1.0)
    warm_ns: float = F(4_000.0, "A window's warm-up (its misses not measured).", "ns", ge=0.0)
    measure_ns: float = F(8_000.0, "A window's measured part.", "ns", gt=0.0)
    tail_ns: float = F(4_000.0, "A window's tail after the measured part.", "ns", ge=0.0)
    groups: int = F(16, "Random groups of sampled flows the intervals come from.", ge=2, le=255)
    seed: int = F(0, "Seed of the sampling hash and draws (mixed with the scenario's seed).", ge=0)
    min_entries: int = F(16, "Fewest entries of a miniature PMU cache (the sampling rate rises to give them).", ge=1)
    max_windows: int = F(32, "ELU windows at most (a long run samples a smaller share of its time).", ge=1)
    backlog_limit_ns: float = F(1_000.0, "Mean ELU backlog after a window's measured part beyond which the run is "
                                         "flagged overloaded (beyond the fast mode's model).", "ns", gt=0.0)
    elephant_packets: int = F(32, "A sampled flow of at least this many packets is a large flow: its hits in the "
                                  "miniature caches are counted, not looked up one by one (0: none is).", ge=0)


class Attack(_Model):
    """``[attack]``: attack packets mixed into the flows (cache flooding,
    docs/flood.md). Their PHVs are counted apart from the legitimate ones
    (``summary.json``'s ``legit`` and ``attack``)."""

    share: float = F(0.0, "Share of the offered packets that are attack packets.", "fraction", ge=0.0, lt=1.0)
    kind: Literal["random", "nomatch", "scan"] = F(
        "random", "`random`: a new random key per packet; `nomatch`: a new key per packet matching no rule but "
                  "catch-alls; `scan`: a cycle through `scan_factor` × the PMU entries of the largest table.")
    scan_factor: float = F(1.1, "`scan`: distinct keys, as a multiple of the PMU entries of the largest table.",
                           gt=0.0)
    start_ns: float = F(0.0, "Simulated time the attack starts at (no attack packet before it).", "ns", ge=0.0)
    table: str | None = F(None, "The table attack PHVs enter (a flood aimed at one table); unset: the scenario's "
                                "entry shares, as the legitimate PHVs.")


class Admission(_Model):
    """``[defence.admission]``: which ELU fills enter a PMU's CAM."""

    policy: Literal["lru", "doorkeeper"] = F(
        "lru", "`lru`: every fill (plain LRU); `doorkeeper`: a fill that would evict only for a key that missed "
               "before (TinyLFU's doorkeeper, a Bloom filter per PMU).")
    bits_per_entry: int = F(32, "Doorkeeper filter bits per CAM entry.", "bits", ge=1, le=1024)
    reset_factor: int = F(4, "Keys recorded per CAM entry before the doorkeeper is cleared.", ge=1, le=1024)
    repeats: bool = F(False, "A second filter of the keys that missed twice since the last clear: the shed gate "
                             "sheds a key's later misses too (a scan's keys, which the CAM cannot keep).")
    judge_backlog: int = F(0, "The doorkeeper judges fills only while the ELU holds at least this many misses; "
                              "below, every fill is cached (plain LRU). 0: always.", "misses", ge=0)


class Defence(_Model):
    """``[defence]``: defences against cache flooding (docs/flood.md); all off
    by default."""

    admission: Admission = F(Admission(), "Admission of ELU fills into the PMUs.")
    miss_rate_mpps: float = F(0.0, "Misses each table may send to the ELU (a token bucket per table; misses over "
                                   "it wait in their PMU's Q_m); 0: no limit.", "Mpps", ge=0.0)
    miss_burst: int = F(0, "Burst of the miss-rate limit's token bucket (0 counts as 1).", "misses", ge=0)
    shed_backlog: int = F(0, "The ELU's shed gate: a miss of a key the PMU's doorkeeper has not seen is dropped "
                             "(counted in `defence.miss_shed`) while the ELU holds at least this many misses "
                             "(miss queue + ORB); 0: never. Needs `admission.policy = \"doorkeeper\"`.",
                          "misses", ge=0)
    shed_all_backlog: int = F(0, "Any miss is shed while the ELU holds at least this many misses; 0: never.",
                              "misses", ge=0)
    slru_protected: float = F(0.0, "Segmented LRU in the PMUs' CAMs: the share of a CAM's entries in its protected "
                                   "segment (keys hit since their fill); a fill enters the probation segment, whose "
                                   "LRU entry is the victim. 0: plain LRU.", "fraction", ge=0.0, lt=1.0)

    @model_validator(mode="after")
    def _shed_needs_doorkeeper(self) -> "Defence":
        if self.shed_backlog > 0 and self.admission.policy != "doorkeeper":
            raise ValueError("defence.shed_backlog needs defence.admission.policy = \"doorkeeper\" "
                             "(its filter tells first-time keys)")
        return self


class Scenario(_Model):
    """A scenario file: one simulation of VMT-backed tables."""

    #: ``FILE:LINE`` of each inline update operation (set by :func:`load`).
    _op_lines: dict[str, str] = PrivateAttr(default_factory=dict)
    seed: int = F(1, "Seed of the traffic and the hashing: the same seed gives the same run, bit for bit.", ge=0)
    clock_mhz: float = F(250.0, "The pipeline clock.", "MHz", gt=0.0)
    window_ns: float = F(10_000.0, "Statistics window (a row of windows.csv per window and table).", "ns", gt=0.0)
    duration_ns: float = F(1_000_000.0, "Simulated time with arrivals (the summary covers it).", "ns", gt=0.0)
    drain_ns: float = F(1_000_000.0, "After the run, how long the simulator may run on (arrivals stopped) until "
                                     "every PHV has left; PHVs still in flight then fail the run.", "ns", ge=0.0)
    tables: list[Table] = F(doc="The logical tables (`[[tables]]`); default: one ACL table of 1000 generated rules.",
                            default_factory=lambda: [Table()], min_length=1)
    edges: list[Edge] = F([], "The pipeline's control-flow graph (`[[edges]]`); none: every table is an exit.")
    entry: dict[str, float] = F({}, "Share of arriving PHVs entering each table; empty: all enter the first table.")
    pmus: Pmus = F(Pmus(), "The PMU pool.")
    vmu: Vmu = F(Vmu(), "The VMU of every table.")
    pipeline: Pipeline = F(Pipeline(), "The pipeline's queues.")
    interconnect: Interconnect = F(Interconnect(), "VMU to PMU network.")
    elu: Elu = F(Elu(), "The External Lookup Unit.")
    hbm: Hbm = F(Hbm(), "The off-chip memory.")
    traffic: Annotated[Union[FlowTraffic, TraceTraffic], Field(discriminator="kind")] = F(
        FlowTraffic(), "Arriving packets: generated flows (`kind = \"flows\"`) or a header trace (`kind = \"trace\"`).")
    updates: list[Update] = F([], "Rule updates while traffic flows (`[[updates]]`).")
    update_engine: UpdateEngine = F(UpdateEngine(), "What rule updates cost.")
    mix: list[Mix] = F([], "Shifts of the entry shares during the run (`[[mix]]`).")
    fast: Fast = F(Fast(), "The fast mode's parameters (`synapse run --mode fast`; not used by the exact engine).")
    attack: Attack | None = F(None, "Attack traffic mixed into the flows (`[attack]`, docs/flood.md).")
    defence: Defence = F(Defence(), "Defences against cache flooding (`[defence]`, docs/flood.md).")

    @model_validator(mode="after")
    def _check_names(self) -> "Scenario":
        names = [t.name for t in self.tables]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"table names must be unique, repeated: {sorted(dup)}")
        for e in self.edges:
            for end in (e.src, e.dst):
                if end not in names:
                    raise ValueError(f"edge {e.src}->{e.dst}: no table named {end!r}")
        for n in self.entry:
            if n not in names:
                raise ValueError(f"entry: no table named {n!r}")
        for m in self.mix:
            bad = [n for n in m.entry if n not in names]
            if bad:
                raise ValueError(f"mix at {m.at_ns} ns: no table named {bad[0]!r}")
            if any(v < 0 for v in m.entry.values()) or sum(m.entry.values()) <= 0:
                raise ValueError(f"mix at {m.at_ns} ns: shares must be >= 0 with a positive sum")
        for u in self.updates:
            for n in [u.table] * bool(u.table) + list(u.transaction) + u.churn_tables:
                if n not in names:
                    raise ValueError(f"updates: no table named {n!r}")
        if self.attack is not None and isinstance(self.traffic, TraceTraffic):
            raise ValueError("attack: needs flow traffic (traffic.kind = \"flows\"), not a trace")
        for t in self.tables:
            for p in t.pmus or []:
                if p >= self.pmus.count:
                    raise ValueError(f"table {t.name!r} names PMU {p}, but pmus.count is {self.pmus.count}")
        return self

    def sim_config(self) -> dict[str, Any]:
        """The JSON tree the Rust simulator takes: tables without explicit
        PMUs get an even share of the unnamed ones, relative paths resolved."""
        d = self.model_dump()
        taken = {p for t in self.tables for p in (t.pmus or [])}
        free = [p for p in range(self.pmus.count) if p not in taken]
        auto = [i for i, t in enumerate(self.tables) if t.pmus is None]
        for k, i in enumerate(auto):
            d["tables"][i]["pmus"] = free[k::len(auto)] if auto else []
        # Absent when unused: the simulator's tree is then what it was
        # before rule updates existed.
        if not d["updates"]:
            del d["updates"]
        if d["update_engine"] == UpdateEngine().model_dump():
            del d["update_engine"]
        del d["mix"]  # applied by sim.Simulation between runs, not a simulator key
        del d["fast"]  # the fast mode's own parameters (Simulation.run_fast)
        if d["attack"] is None:
            del d["attack"]
        if d["defence"] == Defence().model_dump():
            del d["defence"]
        for u in d.get("updates", []):
            # Absent when unused, as above.
            for k in ("transaction", "churn_tables"):
                if not u[k]:
                    del u[k]
        return d

    def to_json(self) -> str:
        return json.dumps(self.sim_config())


def default_scenario() -> Scenario:
    """The built-in scenario: one ACL table of 1000 generated rules backed by
    8 PMUs of 256 entries, 1200 flows of CAIDA 2019 sizes each active about
    250 µs (a steady ~40 Mpps after the first 250 µs), 1 ms of traffic."""
    return Scenario()


def _coerce(value: str) -> Any:
    """A command-line value as TOML would read it (ints, floats, booleans,
    arrays, quoted strings); anything else stays a bare string."""
    try:
        return tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        return value


def _set(tree: dict, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node: Any = tree
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        where = ".".join(parts[: i + 1])
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise UserError(f"--set {dotted}: {where}: expected an index below {len(node)}")
            idx = int(part)
            if last:
                node[idx] = value
            else:
                node = node[idx]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            else:
                if part not in node:
                    node[part] = [Table().model_dump(exclude_none=True)] if part == "tables" else {}
                node = node[part]
        else:
            raise UserError(f"--set {dotted}: {'.'.join(parts[:i])} is a value, not a table")


def _fmt_error(e: ValidationError, source: str, text: str | None = None, overridden: set[str] = frozenset()) -> str:
    errs = e.errors()
    first = errs[0]
    path = [x for x in first["loc"] if not (isinstance(x, str) and x in ("RulesFile", "RulesGen", "flows", "trace"))]
    loc = ".".join(str(x) for x in path)
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
    line = _line_of(text, path) if text is not None and loc not in overridden else None
    return f"{source}{f':{line}' if line else ''}: {loc or '<top>'}: {msg}{more}"


def _line_of(text: str, path: list) -> int | None:
    """The line of the scenario file where the key at ``path`` is written
    (``["tables", 0, "lookup_bits"]``: in the first ``[[tables]]``), or
    None when the file does not write it (a default, or a missing key)."""
    if not path:
        return None
    where = TomlLines(text)
    head, rest, nth = str(path[0]), [str(x) for x in path[1:]], 0
    if rest and path[1:2] and isinstance(path[1], int):
        nth, rest = path[1], [str(x) for x in path[2:]]
    if head in {h for _, h in where.headers} and rest:
        line = where.key(".".join(rest), head, nth)
    else:
        line = where.key(".".join([head, *rest]))
    last = str(path[-1])
    written = where.lines[line - 1] if 0 < line <= len(where.lines) else ""
    return line if re.search(rf"(^|[\s{{,.\"']){re.escape(last)}[\"']?\s*=", written) else None


def load(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    """Loads a TOML scenario (or the built-in default) and applies dotted
    ``key=value`` overrides. Errors are :class:`UserError` naming the key."""
    if path is None:
        tree: dict = {}
        source = "<default scenario>"
    else:
        source = str(path)
        text = read_text(path)
        try:
            tree = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise UserError(f"{source}: {e}") from None
        base = Path(path).resolve().parent
        for t in tree.get("tables", []) if isinstance(tree.get("tables"), list) else []:
            r = t.get("rules") if isinstance(t, dict) else None
            if isinstance(r, dict) and isinstance(r.get("path"), str) and not Path(r["path"]).is_absolute():
                r["path"] = str(base / r["path"])
        tr = tree.get("traffic")
        if isinstance(tr, dict) and isinstance(tr.get("path"), str) and not Path(tr["path"]).is_absolute():
            tr["path"] = str(base / tr["path"])
        for u in tree.get("updates", []) if isinstance(tree.get("updates"), list) else []:
            if isinstance(u, dict) and isinstance(u.get("file"), str) and not Path(u["file"]).is_absolute():
                u["file"] = str(base / u["file"])
    for o in overrides:
        if "=" not in o:
            raise UserError(f"--set {o}: expected key=value")
        k, v = o.split("=", 1)
        k = k.strip()
        if not k:
            raise UserError(f"--set {o}: empty key")
        _set(tree, k, _coerce(v.strip()))
    tr = tree.get("traffic")
    if isinstance(tr, dict) and "kind" not in tr:
        tr["kind"] = "flows"  # the default kind; a trace must say so
    try:
        scn = Scenario.model_validate(tree)
    except ValidationError as e:
        given = {o.split("=", 1)[0].strip() for o in overrides}
        raise UserError(_fmt_error(e, source, None if path is None else text, given)) from None
    if path is not None:
        scn._op_lines = _op_lines(text, scn, source)
    return scn


def _op_lines(text: str, scn: Scenario, source: str) -> dict[str, str]:
    """Where each inline update operation is written: the simulator names
    a bad one ``updates.K.ops:I`` or ``updates.K.transaction.TABLE:I``; this
    maps those to ``FILE:LINE`` (the first line after the K-th
    ``[[updates]]`` (and the table's key) that holds the quoted operation)."""
    lines = text.splitlines()
    heads = [i for i, ln in enumerate(lines) if ln.strip().startswith("[[updates]]")]
    out: dict[str, str] = {}

    def find(start: int, end: int, op: str) -> int:
        q = json.dumps(op)
        for i in range(start, end):
            if q in lines[i] or repr(op) in lines[i]:
                return i
        return start

    for k, u in enumerate(scn.updates):
        if k >= len(heads):
            break
        start, end = heads[k], heads[k + 1] if k + 1 < len(heads) else len(lines)
        for i, op in enumerate(u.ops):
            out[f"updates.{k}.ops:{i}"] = f"{source}:{find(start, end, op) + 1}"
        for name, ops in u.transaction.items():
            at = next((i for i in range(start, end) if re.search(rf"(^|[{{,\s]){re.escape(name)}\s*=", lines[i])), start)
            for i, op in enumerate(ops):
                out[f"updates.{k}.transaction.{name}:{i}"] = f"{source}:{find(at, end, op) + 1}"
    return out

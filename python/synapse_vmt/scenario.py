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

from synapse_vmt.errors import UserError, read_text


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Generate(_Model):
    type: Literal["acl", "fw", "ipc"] = "acl"
    count: int = Field(1000, ge=0)
    seed: int = Field(1, ge=0)


class RulesFile(_Model):
    path: str


class RulesGen(_Model):
    generate: Generate = Generate()


class Table(_Model):
    name: str = "acl"
    rules: Union[RulesFile, RulesGen] = RulesGen()
    lookup_bits: int = Field(10, ge=1, le=24)
    #: PMU ids owned at the start; omitted = an even share of the PMUs that
    #: no table names.
    pmus: list[Annotated[int, Field(ge=0)]] | None = None
    phv_fifo: int = Field(256, ge=1)


class Edge(_Model):
    src: str
    dst: str
    p: float = Field(ge=0.0, le=1.0)


class Pmus(_Model):
    count: int = Field(8, ge=0, le=65000)
    block_size: int = Field(256, ge=0)
    clock_ratio: float = Field(1.0, gt=0.0)
    latency_cycles: int = Field(2, ge=1)
    ii_cycles: int = Field(1, ge=1)
    q_r: int = Field(16, ge=1)
    q_p: int = Field(16, ge=1)
    q_m: int = Field(16, ge=1)


class Vmu(_Model):
    latency_cycles: int = Field(2, ge=0)
    #: Points per PMU on the consistent-hashing ring (the paper: one).
    vnodes: int = Field(1, ge=1)


class Pipeline(_Model):
    stage_fifo: int = Field(64, ge=1)


class Interconnect(_Model):
    kind: Literal["segmented", "crossbar", "bus"] = "segmented"
    channels: int = Field(4, ge=1)
    latency_cycles: int = Field(1, ge=0)


class TrieBuild(_Model):
    """The multibit trie's build (``[elu.build.trie]``; classify/trie.rs)."""

    #: Key bits consumed per level (a node has ``2^stride`` entries).
    stride: int = Field(8, ge=1, le=16)
    #: Most bytes the trie may take (else the build fails: use another algo).
    max_bytes: int = Field(256 << 20, ge=1)


class Facl(_Model):
    """FACL's classification module the decision tree is mapped onto
    (``[elu.build.dtree.facl]``)."""

    dt_modules: int = Field(4, ge=1)
    dt_layers: int = Field(20, ge=1)
    layer_nodes: int = Field(4096, ge=1)
    ls_engines: int = Field(8, ge=1)
    ls_depth: int = Field(8192, ge=1)
    ls_modules: int = Field(3, ge=1)


class DtreeBuild(_Model):
    """The decision tree's build (``[elu.build.dtree]``; classify/dtree.rs)."""

    #: Most rules in a leaf (searched linearly).
    bucket: int = Field(8, ge=1)
    max_depth: int = Field(40, ge=1)
    #: Cuts may replicate rules up to ``spfac`` times a node's rule count.
    spfac: float = Field(4.0, ge=1.0)
    #: Most bits one cut consumes.
    max_cut_bits: int = Field(7, ge=1, le=16)
    max_bytes: int = Field(512 << 20, ge=1)
    facl: Facl = Facl()


class PtreeBuild(_Model):
    """The partitioned tree's build (``[elu.build.ptree]``; classify/partition.rs)."""

    #: Most rules in a leaf.
    bucket: int = Field(32, ge=1)
    max_depth: int = Field(16, ge=1)
    spfac: float = Field(1.2, ge=1.0)
    max_bytes: int = Field(512 << 20, ge=1)
    simd: bool = True
    avx512: bool = True
    #: Most trees (the smallest partitions join the catch-all one).
    max_trees: int = Field(4, ge=1)
    #: Sets up to this many rules also try fewer trees (0: never).
    small: int = Field(16384, ge=0)
    #: Updates fold in past ``max(max_delta, rules / 16)`` inserts.
    max_delta: int = Field(64, ge=0)


class EluBuild(_Model):
    """Build parameters of the ELU's lookup structures (``[elu.build]``)."""

    trie: TrieBuild = TrieBuild()
    dtree: DtreeBuild = DtreeBuild()
    ptree: PtreeBuild = PtreeBuild()


class Elu(_Model):
    algo: Literal["trie", "linear", "dtree", "ptree"] = "trie"
    orb_entries: int = Field(64, ge=1)
    miss_queue: int = Field(64, ge=1)
    lookup_slots: int = Field(8, ge=1)
    latency_cycles: int = Field(1, ge=0)
    build: EluBuild = EluBuild()


class Hbm(_Model):
    pseudo_channels: int = Field(1, ge=1)
    banks: int = Field(16, ge=1)
    latency_ns: float = Field(100.0, ge=0.0)
    bytes_per_access: int = Field(32, ge=1)
    peak_gbps: float = Field(14.4, gt=0.0)
    bank_busy_ns: float = Field(48.0, ge=0.0)


class FlowTraffic(_Model):
    kind: Literal["flows"] = "flows"
    #: A built-in flow-size distribution, optionally truncated: ``NAME[:MAX_BYTES]``.
    dist: str = Field("caida2019", pattern=r"^(caida2019|caida2018)(:[0-9.eE+]+)?$")
    flows: int = Field(1_200, ge=0)
    mean_pkt_bytes: float = Field(800.0, gt=0.0)
    flow_duration_ns: float = Field(250_000.0, gt=0.0)
    profile: Literal["uniform", "flat", "step", "ramp", "diurnal", "burst"] = "uniform"
    #: Largest flow drawn, bytes (the CAIDA tail reaches 10 GB); 0 = no limit.
    max_bytes: float = Field(1e7, ge=0.0)
    #: Share of the flows whose key at a table matches none of its rules
    #: but catch-alls (chosen per table): they end at a catch-all rule, or,
    #: in a set without one, at the default action (docs/traffic-nomatch.md).
    nomatch_share: float = Field(0.0, ge=0.0, le=1.0)


class TraceTraffic(_Model):
    kind: Literal["trace"]
    path: str
    rate_mpps: float = Field(100.0, gt=0.0)


class UpdateEngine(_Model):
    """What a rule update costs (``[update_engine]``; sim/updates.rs)."""

    #: Cached answers an update made stale: ``exact`` (the keys a changed
    #: entry covers), ``flush`` (the whole CAM), ``none`` (a test hook).
    invalidate: Literal["exact", "flush", "none"] = "exact"
    #: Write bandwidth of a replica build beside the old trie, GB/s.
    build_gbps: float = Field(16.0, gt=0.0)
    #: Fixed cost of a replica swap, ns.
    swap_ns: float = Field(1000.0, ge=0.0)
    #: An incremental decision-tree update, ns per operation.
    dtree_op_ns: float = Field(200.0, ge=0.0)
    #: An incremental partitioned-tree update, ns per operation; a batch
    #: that folds its pending updates in is also charged the tree's bytes
    #: at ``build_gbps`` plus ``swap_ns`` (a replica write).
    ptree_op_ns: float = Field(200.0, ge=0.0)
    #: Most operations one build (batch) takes; the rest wait for the next.
    max_batch: int = Field(256, ge=1)
    #: ``table``: each table commits its updates on its own; ``program``: a
    #: PHV sees one version of every table (two-phase updates with version
    #: tags; sim/xtable.rs).
    consistency: Literal["table", "program"] = "table"


class Update(_Model):
    """One ``[[updates]]`` item: operations at ``at_ns`` (``file``: one per
    line; ``ops``: inline lines) or random churn of ``churn_per_s``
    operations per second from ``at_ns`` to ``until_ns`` (0: the end)."""

    at_ns: float = Field(0.0, ge=0.0)
    table: str = ""
    file: str | None = None
    ops: list[str] = []
    churn_per_s: float = Field(0.0, ge=0.0)
    until_ns: float = Field(0.0, ge=0.0)
    seed: int = Field(1, ge=0)
    #: One transaction over several tables: per table, its operations
    #: (one program version under ``consistency = "program"``).
    transaction: dict[str, list[str]] = {}
    #: Churn whose every event is one transaction of one random operation
    #: on each of these tables (instead of ``table``).
    churn_tables: list[str] = []


class Mix(_Model):
    """One ``[[mix]]`` item: from ``at_ns`` on, arriving PHVs enter the
    tables in these shares (``entry``'s form): the traffic shifts between
    tables while the pipeline runs (applied by :class:`synapse_vmt.sim.Simulation`
    through ``Simulator.set_entry``)."""

    at_ns: float = Field(ge=0.0)
    entry: dict[str, float]


class Scenario(_Model):
    #: ``FILE:LINE`` of each inline update operation (set by :func:`load`).
    _op_lines: dict[str, str] = PrivateAttr(default_factory=dict)
    seed: int = Field(1, ge=0)
    clock_mhz: float = Field(250.0, gt=0.0)
    window_ns: float = Field(10_000.0, gt=0.0)
    duration_ns: float = Field(1_000_000.0, gt=0.0)
    #: After the run, how long the simulator may run on (arrivals stopped)
    #: until every PHV has left; PHVs still in flight then fail the run.
    drain_ns: float = Field(1_000_000.0, ge=0.0)
    tables: list[Table] = Field(default_factory=lambda: [Table()], min_length=1)
    edges: list[Edge] = []
    entry: dict[str, float] = {}
    pmus: Pmus = Pmus()
    vmu: Vmu = Vmu()
    pipeline: Pipeline = Pipeline()
    interconnect: Interconnect = Interconnect()
    elu: Elu = Elu()
    hbm: Hbm = Hbm()
    traffic: Annotated[Union[FlowTraffic, TraceTraffic], Field(discriminator="kind")] = FlowTraffic()
    updates: list[Update] = []
    update_engine: UpdateEngine = UpdateEngine()
    mix: list[Mix] = []

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


def _fmt_error(e: ValidationError, source: str) -> str:
    errs = e.errors()
    first = errs[0]
    loc = ".".join(str(x) for x in first["loc"] if not (isinstance(x, str) and x in ("RulesFile", "RulesGen", "flows", "trace")))
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
    return f"{source}: {loc or '<top>'}: {msg}{more}"


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
        raise UserError(_fmt_error(e, source)) from None
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

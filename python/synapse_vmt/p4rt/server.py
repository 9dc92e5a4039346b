"""A P4Runtime v1 gRPC server whose target is Synapse's table store.

Supported: Capabilities; Set/GetForwardingPipelineConfig (BMv2 JSON as the
device config; P4Info given by the client or derived, ``p4info.py``);
Write INSERT/MODIFY/DELETE of table entries (exact, lpm, ternary, range,
optional; priorities; MODIFY of the default entry) with per-update
``p4.v1.Error`` details, CONTINUE_ON_ERROR or all-or-nothing
(ROLLBACK_ON_ERROR, DATAPLANE_ATOMIC); Read of table entries (wildcard, per
table, per entry, default entries, ``counter_data``), of direct counters,
and of Synapse's state as an extern (``SYNAPSE_STATE_EXTERN``); StreamChannel
master arbitration for the default role (the highest election id is
primary; writes from anyone else are PERMISSION_DENIED; no election id: a
backup); action profile members and groups (Write and Read; a table entry
behind a profile names a member or a group; a selector picks among a
group's members in the order they were created, as BMv2 numbers them;
members and groups are applied as their update is decoded, even in an
atomic batch, and one in use cannot be modified or deleted). Not supported
(UNIMPLEMENTED): member weights above 1, meters, reading indirect counters,
registers, packet I/O, roles.

Transport (``make_server``): a grpc.aio server on its own event-loop
thread. StreamChannels are coroutines there, bounded per connection and in
total (``StreamLimits``); the other RPCs run the synchronous handlers below
on a pool of worker threads (``_AioServicer``). Reads stream ReadResponses
of at most ``READ_CHUNK_BYTES``. docs/p4runtime-limits.md says what holds.

Synapse's state: ``Read`` an ``ExternEntry`` with ``extern_type_id =
0x81`` (``extern_id`` a table id, or 0 for all) answers one ExternEntry per
table whose ``entry`` packs a ``google.protobuf.Struct``: entries, size,
version, lookups, hits, hit_rate, classifier, build_us, lookup_ns_per_key;
with ``sim`` (``simtarget.py``: the running simulated Synapse as the target)
a simulated table's struct also holds ``sim``: PMUs, hit rate, latency,
stale_answers, update counts and latency of the simulator.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
import threading
import weakref
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
from finsy.proto import p4r, p4r_grpc, rpc_code, rpc_status
from google.protobuf import any_pb2, struct_pb2

from synapse_vmt import _core
from synapse_vmt.errors import UserError
from synapse_vmt.p4.bmv2 import P4Program, read_program
from synapse_vmt.p4.entries import Entry, Match, wildcard
from synapse_vmt.p4rt.p4info import MATCH_NAMES, IndexError_, P4Index, TableRef, build_p4info, parse_p4info
from synapse_vmt.p4rt.store import Op, StoreError, TableStore

SYNAPSE_STATE_EXTERN = 0x81
#: A ReadResponse carries at most this many bytes of entities (gRPC clients
#: refuse messages over 4 MiB unless told otherwise); a read streams as many as it needs.
READ_CHUNK_BYTES = 1 << 20
#: A Write of at most this many updates runs on the event loop's thread when
#: it would not wait there (``_AioServicer._write_here``), not on a worker.
INLINE_UPDATES = 8
API_VERSION = "1.4.0"
_CODES = {name: getattr(rpc_code, name) for name in (
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED")}


_nolock = contextlib.nullcontext()
#: Every successful Write's answer (empty; never changed), made once.
_WRITE_OK = p4r.WriteResponse()


def _int(b: bytes) -> int:
    return int.from_bytes(b, "big")


def _bytes(v: int, width: int) -> bytes:
    """P4Runtime's canonical byte string: shortest big-endian, at least one byte."""
    return v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big")


def program_from_bytes(data: bytes) -> P4Program:
    """Read a BMv2 JSON given as bytes (a pipeline's ``p4_device_config``)."""
    json.loads(data)  # a clear error before the reader's
    fd, path = tempfile.mkstemp(suffix=".json")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return read_program(path)
    finally:
        os.unlink(path)


@dataclass(frozen=True)
class StreamLimits:
    """Bounds on StreamChannels: open streams in all and per connection, and
    the seconds a stream may stay open without arbitrating."""

    max_streams: int = 1024
    per_peer: int = 16
    arbitration_timeout: float = 10.0


_FAST_KINDS = ("exact", "lpm", "ternary", "range", "optional")


def _write_decoder(index: P4Index):
    """The Rust fast path for table writes (``_core.WriteDecoder``) over the
    tables it may write: not const, no action profile, match kinds it knows,
    one match field per key field."""
    from synapse_vmt import _core

    tables = []
    for t in index.tables.values():
        kinds = [kf.match for kf, _ in t.fields.values()]
        if t.const_table or t.profile is not None or any(k not in _FAST_KINDS for k in kinds) \
                or len({kf.field for kf, _ in t.fields.values()}) != len(t.fields):
            continue
        tables.append((t.id, t.spec.name, t.spec.needs_priority,
                       [(fid, kf.match, kf.width) for fid, (kf, _) in t.fields.items()],
                       [(aid, [ap.width for ap in a.info.params]) for aid, a in t.actions.items()]))
    return _core.WriteDecoder(tables)


class _EntryDecoder:
    """``decode(raw, kind)`` for the entries the fast path stores undecoded
    (``store._Lazy``): the server's Python decoder on an entry's bytes,
    with the ids of the pipeline's P4Info (``index``). It holds the server
    weakly and nothing of the store, so a stored entry refers to nothing
    that refers back to it and the store can leave those entries out of the
    cycle collector (``_core.apply_items``). The fast path's tables have no
    action profile, so the decoder never needs the pipeline's members."""

    __slots__ = ("svc", "index")

    def __init__(self, svc: P4RuntimeServer, index: P4Index):
        self.svc, self.index = weakref.ref(svc), index

    def __call__(self, raw: bytes, kind: str) -> Entry:
        te = p4r.TableEntry.FromString(raw)
        return self.svc()._decode_entry(None, self.index.tables[te.table_id], te, kind)


class _Pipeline:
    def __init__(self, prog: P4Program, index: P4Index, device_config: bytes, cookie: int | None, store: TableStore):
        self.prog, self.index, self.device_config, self.cookie, self.store = prog, index, device_config, cookie, store
        self.action_ids = {a.info.name: a.id for a in index.actions.values()}
        # action profiles: profile id -> member id -> (creation order, action, params); -> group id -> member ids
        self.members: dict[int, dict[int, tuple[int, str, dict[str, int]]]] = {i: {} for i in index.profiles}
        self.groups: dict[int, dict[int, list[int]]] = {i: {} for i in index.profiles}
        self.order = 0
        self.decoder = _write_decoder(index)

    def in_use(self, prof: int, kind: str, ident: int) -> bool:
        """Whether a table entry (or, for a member, a group) of profile ``prof`` points at it."""
        if kind == "member" and any(ident in ms for ms in self.groups[prof].values()):
            return True
        for t in self.index.tables.values():
            if t.profile == prof:
                if any(s.entry.ref == (kind, ident) for s in self.store.entries(t.spec.name)):
                    return True
        return False

    def group_members(self, prof: int, gid: int) -> tuple[tuple[str, dict[str, int]], ...]:
        """A group's members in creation order (BMv2's member handles, which its selector indexes)."""
        ms = self.members[prof]
        return tuple((ms[m][1], dict(ms[m][2])) for m in sorted(self.groups[prof][gid], key=lambda m: ms[m][0]))


class P4RuntimeServer(p4r_grpc.P4RuntimeServicer):
    """The service; ``prog`` (a BMv2 JSON path) preloads a pipeline."""

    def __init__(self, prog: str | Path | None = None, p4info: str | Path | None = None, device_id: int = 1,
                 sizes: dict[str, int] | None = None, algo: str = "linear", traffic: float = 0.0,
                 sim=None, sim_speed: float = 2e6, sim_opt=None, before_update=None,
                 limits: StreamLimits | None = None, fast_writes: bool = True):
        self.device_id = device_id
        # Table entries decoded by the Rust fast path (False: all by the
        # Python decoder, the reference a test compares the fast path with).
        self.fast_writes = fast_writes
        # Test-only: called as before_update(i, context) before a Write's
        # i-th update is applied (a test drops the connection there).
        self.before_update = before_update
        # A Scenario (ClassBench tables, simtarget.py) or a program scenario
        # (simrun.load_scenario's dict, routedtarget.py): committed writes
        # also go to a running simulator.
        self.sim_scenario = sim
        self.sim_opt = sim_opt  # simopt.OptConfig: the runtime optimizer in the loop (None: off)
        self.sim_calibrated = None  # its capacity models and their fits, kept across pipelines (same scenario)
        self.sim = None  # simtarget.SimTarget of the current pipeline
        self.sim_speed = sim_speed  # simulated ns per wall second
        self.traffic_rate = traffic
        self.traffic = None  # store.Traffic on the current pipeline's store
        self.sizes = sizes
        self.algo = algo
        self.lock = threading.RLock()
        self.behind_frontend = False  # served through the Rust front end (make_server)
        self.limits = limits or StreamLimits()
        self.arb_lock = threading.Lock()  # streams, peers, primary
        self.peers: dict[str, int] = {}  # open streams per connection (gRPC peer)
        self.pipeline: _Pipeline | None = None
        self.saved: _Pipeline | None = None
        self.streams: dict[int, dict] = {}  # id(stream) -> {"election": int|None, "q": Queue}
        self.primary: int | None = None  # the primary's election id
        if prog is not None:
            program = read_program(prog)
            info = parse_p4info(Path(p4info).read_bytes()) if p4info else build_p4info(program)
            try:
                index = P4Index.build(info, program)
            except IndexError_ as e:
                raise UserError(f"{p4info}: {e}") from None
            self.pipeline = self._make(program, index, Path(prog).read_bytes(), None)
            self._start_traffic()

    def _start_traffic(self, keep_sim: bool = False) -> None:
        """(Re)start background lookups on the current pipeline's store;
        ``keep_sim``: the simulator keeps running (a RECONCILE of the same
        program: its rules are the kept store's entries already)."""
        from synapse_vmt.p4rt.store import Traffic

        if self.traffic is not None:
            self.traffic.stop()
            self.traffic = None
        if self.traffic_rate > 0 and self.pipeline is not None:
            self.traffic = Traffic(self.pipeline.store, self.traffic_rate)
        if keep_sim and self.sim is not None:
            return
        if self.sim is not None:
            self.sim.stop()
            self.sim = None
        if isinstance(self.sim_scenario, dict) and self.pipeline is not None:
            # A program scenario (routedtarget.py): the program's own tables, routes following the writes.
            from synapse_vmt.p4rt.routedtarget import RoutedTarget

            self.sim = RoutedTarget(self.sim_scenario, self.pipeline.device_config, self.pipeline.store,
                                    slice_ns=self.sim_speed * 0.01, period_s=0.01)
        elif self.sim_scenario is not None and self.pipeline is not None:
            from synapse_vmt.p4rt.simtarget import SimTarget

            self.sim = SimTarget(self.sim_scenario, self.pipeline.prog, slice_ns=self.sim_speed * 0.01, period_s=0.01,
                                 optimizer=self.sim_opt, calibrated=self.sim_calibrated)
            if self.sim.opt is not None and self.sim_calibrated is None:
                self.sim_calibrated = (dict(self.sim.opt.ctl.models), self.sim.opt.calibration)

    def stop(self) -> None:
        """Stop the background threads (traffic, simulator)."""
        if self.traffic is not None:
            self.traffic.stop()
        if self.sim is not None:
            self.sim.stop()

    def _make(self, prog, index, device_config, cookie) -> _Pipeline:
        sizes = dict(self.sizes or {})
        every = sizes.pop("*", None)  # one cap for every table (``--table-size N``)
        for t in index.tables.values():
            sizes.setdefault(t.spec.name, every or t.size)
        p = _Pipeline(prog, index, device_config, cookie, TableStore(prog, sizes, self.algo))
        p.lazy_entry = _EntryDecoder(self, index)
        return p

    @property
    def store(self) -> TableStore | None:
        return self.pipeline.store if self.pipeline else None

    # --- arbitration ---

    def _is_primary(self, request) -> bool:
        """The request carries the primary's election id (none: never primary)."""
        if not request.HasField("election_id"):
            return False
        return self._is_primary_id((request.election_id.high << 64) | request.election_id.low)

    def _is_primary_id(self, eid: int | None) -> bool:
        with self.arb_lock:
            return eid is not None and self.primary is not None and eid == self.primary

    def _recompute(self) -> None:
        """Elect the highest election id among open streams; tell every
        arbitrated stream (on the event loop's thread, which owns the queues)."""
        elections = [s["election"] for s in self.streams.values() if s["election"] is not None]
        self.primary = max(elections) if elections else None
        for s in self.streams.values():
            if not s["arbitrated"]:
                continue
            m = p4r.StreamMessageResponse()
            a = m.arbitration
            a.device_id = self.device_id
            top = self.primary or 0
            a.election_id.high, a.election_id.low = top >> 64, top & ((1 << 64) - 1)
            primary = s["election"] is not None and s["election"] == self.primary
            a.status.code = rpc_code.OK if primary else rpc_code.ALREADY_EXISTS
            a.status.message = "primary" if primary else "backup"
            s["q"].put_nowait(m)

    def _arbitrate(self, key: int, me: dict, a) -> tuple | None:
        """A stream's arbitration message: None, or the (code, message) it is aborted with."""
        eid = (a.election_id.high << 64) | a.election_id.low if a.HasField("election_id") else None
        with self.arb_lock:
            if a.device_id != self.device_id:
                return grpc.StatusCode.NOT_FOUND, f"no device {a.device_id}"
            if a.role.name or a.role.HasField("config"):
                return grpc.StatusCode.UNIMPLEMENTED, "roles are not supported"
            if eid is not None and any(s["election"] == eid for k, s in self.streams.items() if k != key):
                return grpc.StatusCode.INVALID_ARGUMENT, f"election id {eid} is used by another controller"
            me["election"], me["arbitrated"] = eid, True
            self._recompute()
        return None

    async def StreamChannel(self, request_iterator, context):
        """Arbitration (a coroutine on the server's event loop: an open
        stream holds no thread). Streams are bounded per connection and in
        total (RESOURCE_EXHAUSTED past either); one that sends no
        arbitration within the timeout is closed (DEADLINE_EXCEEDED)."""
        lim, peer = self.limits, context.peer()
        if self.behind_frontend:  # the client's address, as the front end saw it
            peer = dict(context.invocation_metadata() or ()).get("x-synapse-peer", peer)
        with self.arb_lock:
            if len(self.streams) >= lim.max_streams:
                refused = f"too many streams ({lim.max_streams} open)"
            elif self.peers.get(peer, 0) >= lim.per_peer:
                refused = f"too many streams from {peer} ({lim.per_peer} open)"
            else:
                refused = None
                # election None: no election id (a backup, as in Stratum: it is told who is primary, never writes)
                me = {"election": None, "arbitrated": False, "q": asyncio.Queue()}
                key = id(me)
                self.streams[key] = me
                self.peers[peer] = self.peers.get(peer, 0) + 1
        if refused:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refused)
        q = me["q"]

        def silent():
            if not me["arbitrated"]:
                q.put_nowait(("abort", grpc.StatusCode.DEADLINE_EXCEEDED,
                              f"no arbitration message within {lim.arbitration_timeout:g} s"))

        async def reader():
            try:
                async for req in request_iterator:
                    if req.HasField("arbitration"):
                        err = self._arbitrate(key, me, req.arbitration)
                        if err is not None:
                            q.put_nowait(("abort", *err))
                            return
                    # packet-out and digest acks: no packet I/O in this target
            except Exception:  # noqa: BLE001 - the client went away: the stream ends
                pass
            finally:
                q.put_nowait(None)

        timer = asyncio.get_running_loop().call_later(lim.arbitration_timeout, silent)
        task = asyncio.create_task(reader())
        try:
            while True:
                m = await q.get()
                if m is None:
                    break
                if isinstance(m, tuple):
                    await context.abort(m[1], m[2])
                yield m
        finally:
            timer.cancel()
            task.cancel()
            with self.arb_lock:
                self.streams.pop(key, None)
                self.peers[peer] -= 1
                if not self.peers[peer]:
                    del self.peers[peer]
                self._recompute()

    # --- pipeline ---

    def Capabilities(self, request, context):
        return p4r.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    def SetForwardingPipelineConfig(self, request, context):
        if request.device_id != self.device_id:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no device {request.device_id}")
        if not self._is_primary(request):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "not the primary controller")
        A = p4r.SetForwardingPipelineConfigRequest
        if request.action == A.COMMIT:
            with self.lock:
                if self.saved is None:
                    context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no saved forwarding pipeline config")
                self.pipeline, self.saved = self.saved, None
                self._start_traffic()
            return p4r.SetForwardingPipelineConfigResponse()
        if request.action not in (A.VERIFY, A.VERIFY_AND_SAVE, A.VERIFY_AND_COMMIT, A.RECONCILE_AND_COMMIT):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unknown pipeline action")
        cfg = request.config
        try:
            with self.lock:
                cur = self.pipeline
            dev = cfg.p4_device_config or (cur.device_config if cur else b"")
            if not dev:
                raise ValueError("no p4_device_config (BMv2 JSON) and no program loaded")
            prog = cur.prog if cur and dev == cur.device_config else program_from_bytes(dev)
            info = cfg.p4info if cfg.HasField("p4info") and len(cfg.p4info.tables) else build_p4info(prog)
            index = P4Index.build(info, prog)
        except (ValueError, UserError, IndexError_) as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad pipeline config: {e}")
        cookie = cfg.cookie.cookie if cfg.HasField("cookie") else None
        if request.action == A.VERIFY:
            return p4r.SetForwardingPipelineConfigResponse()
        new = self._make(prog, index, dev, cookie)
        with self.lock:
            keep = request.action == A.RECONCILE_AND_COMMIT and cur is not None and cur.device_config == dev
            if keep:
                new.store = cur.store  # same program: the entries stay
            if request.action == A.VERIFY_AND_SAVE:
                self.saved = new
            else:
                self.pipeline = new
                # A reconcile keeps the data plane running with its rules
                # (the store's entries): the simulator is not restarted.
                self._start_traffic(keep_sim=keep)
        return p4r.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):
        if request.device_id != self.device_id:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no device {request.device_id}")
        p = self.pipeline
        if p is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "No forwarding pipeline config set")
        R = p4r.GetForwardingPipelineConfigRequest
        out = p4r.GetForwardingPipelineConfigResponse()
        if p.cookie is not None:
            out.config.cookie.cookie = p.cookie
        if request.response_type in (R.ALL, R.P4INFO_AND_COOKIE):
            out.config.p4info.CopyFrom(p.index.info)
        if request.response_type in (R.ALL, R.DEVICE_CONFIG_AND_COOKIE):
            out.config.p4_device_config = p.device_config
        return out

    # --- write ---

    def Write(self, request, context):
        p = self._write_checks(request.device_id, request.role,
                               (request.election_id.high << 64) | request.election_id.low
                               if request.HasField("election_id") else None, request.atomicity, context)
        updates = request.updates
        fast = p.decoder.decode(request.SerializeToString()) if self.fast_writes else None
        if fast is None:
            fast = [None] * len(updates)
        return self._write(p, request.atomicity != p4r.WriteRequest.CONTINUE_ON_ERROR, fast, lambda: updates, context)

    def write_raw(self, raw: bytes, call) -> tuple | None:
        """A Write served by the Rust front end (``_core.Frontend``), given
        as its bytes: None when it succeeded, else the gRPC status (code,
        message, ``grpc-status-details-bin`` or None). The Rust decoder reads
        the request's header and takes the well-formed plain table entries;
        protobuf parses the request only when it has anything else."""
        ctx = _CallContext(call)
        try:
            p = self.pipeline
            head = p.decoder.decode_write(raw) if p is not None and self.fast_writes else None
            if head is None:
                try:
                    request = p4r.WriteRequest.FromString(raw)
                except Exception:  # noqa: BLE001 - the bytes are no WriteRequest
                    return grpc.StatusCode.INVALID_ARGUMENT.value[0], "the request is no WriteRequest", None
                self.Write(request, ctx)
            else:
                device_id, role, eid, atomicity, fast = head
                now = self._write_checks(device_id, role, eid, atomicity, ctx)
                if now is not p:  # the pipeline changed meanwhile: decode afresh
                    p, fast = now, now.decoder.decode(raw)

                parsed = []  # the protobuf request, parsed once if an update needs the Python decoder

                def updates():
                    if not parsed:
                        parsed.append(p4r.WriteRequest.FromString(raw).updates)
                    return parsed[0]

                self._write(p, atomicity != p4r.WriteRequest.CONTINUE_ON_ERROR, fast, updates, ctx)
        except _Abort as e:
            return e.code.value[0], e.details, None
        if ctx.code is not None and ctx.code != grpc.StatusCode.OK:
            trailing = dict(ctx.trailing or ())
            return ctx.code.value[0], ctx.details or "", trailing.get("grpc-status-details-bin")
        return None

    def write_here(self, raw: bytes, call) -> tuple:
        """A small Write on the front end's thread that received it: (True,
        ``write_raw``'s answer), or (False, None) where it would wait (the
        store's lock busy, the simulator in the loop, a test hook): the writer
        thread takes it then, so the front end's thread never blocks."""
        p = self.pipeline
        if self.sim is not None or self.before_update is not None:
            return False, None
        if p is None:  # refused at once
            return True, self.write_raw(raw, call)
        lock = p.store.lock
        if not lock.acquire(blocking=False):
            return False, None
        try:
            return True, self.write_raw(raw, call)
        finally:
            lock.release()

    def _write_checks(self, device_id: int, role: str, eid: int | None, atomicity: int, context) -> _Pipeline:
        """A Write's header checked (device, role, pipeline, primary, atomicity): the pipeline it writes."""
        if device_id != self.device_id:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no device {device_id}")
        if role:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "roles are not supported")
        p = self.pipeline
        if p is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "No forwarding pipeline config set")
        if not self._is_primary_id(eid):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "not the primary controller")
        W = p4r.WriteRequest
        if atomicity not in (W.CONTINUE_ON_ERROR, W.ROLLBACK_ON_ERROR, W.DATAPLANE_ATOMIC):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unknown atomicity")
        return p

    def _write(self, p: _Pipeline, atomic: bool, fast: list, updates, context):
        """Apply a Write's updates (``fast``: the Rust decoder's item per
        update, None where ``updates()[i]``, the protobuf update, is decoded here)."""
        # Decode every update first; a malformed one fails alone (or the batch, if atomic).
        # Action profile members and groups are applied as they are decoded (None: no table op).
        # The Rust decoder takes the well-formed plain table entries (their
        # Entry is built when first read); None: this decoder's (and its errors).
        lazy = p.lazy_entry
        sim = self.sim
        before, is_active = self.before_update, context.is_active

        def gone(i: int) -> bool:  # the client cancelled or its connection dropped: stop applying
            if before is not None:
                before(i, context)
            return not is_active()

        if sim is None and None not in fast:  # plain table entries only: the store takes the decoder's items
            if before is None and isinstance(context, _CallContext) and isinstance(context._call, _core.Call):
                # the front end's call: whether the client is gone is asked in Rust
                _, final = p.store.apply(fast, atomic=atomic, call=context._call, decode=lazy)
            else:
                _, final = p.store.apply(fast, atomic=atomic, gone=gone, decode=lazy)
            return self._answer(context, atomic, final)
        ops: list[Op | None] = []
        errs: list[StoreError | None] = []
        for i, f in enumerate(fast):
            if i % 1024 == 1023 and not context.is_active():  # cancelled while decoding: apply nothing
                context.abort(grpc.StatusCode.CANCELLED, "cancelled by the client")
            if f is not None:
                kind, table, key, raw, meta = f
                ops.append(Op(kind, table, None, meta, key, (raw, kind), lazy))
                errs.append(None)
                continue
            try:
                ops.append(self._decode_update(p, updates()[i]))
                errs.append(None)
            except StoreError as e:
                ops.append(None)
                errs.append(e)
        good = [o for o in ops if o is not None]
        # An atomic batch with a malformed update is still checked (dry run) so every update gets its error.
        with sim.lock if sim is not None else _nolock:  # the simulator sees the store's order
            _, applied = p.store.apply(good, atomic=atomic, dry_run=atomic and any(errs), gone=gone)
            if sim is not None and not (atomic and (any(errs) or any(applied))):
                sim.forward([o for o, e in zip(good, applied) if e is None], locked=True)
        it = iter(applied)
        return self._answer(context, atomic, [e if o is None else next(it) for o, e in zip(ops, errs)])

    def _answer(self, context, atomic: bool, final: list[StoreError | None]):
        """A Write's answer from each update's error (or None)."""
        if any(final):
            if atomic:
                final = [e or StoreError("ABORTED", "not applied: another update of the atomic batch failed")
                         for e in final]
            self._fail(context, final)
        return _WRITE_OK

    @staticmethod
    def _fail(context, errs: list[StoreError | None]) -> None:
        """The spec's batch error: status UNKNOWN, one p4.v1.Error per update."""
        st = rpc_status.Status(code=rpc_code.UNKNOWN, message="write failed")
        for e in errs:
            d = any_pb2.Any()
            if e is None:
                d.Pack(p4r.Error(canonical_code=rpc_code.OK))
            else:
                d.Pack(p4r.Error(canonical_code=_CODES.get(e.code, rpc_code.UNKNOWN), message=e.message))
            st.details.append(d)
        context.set_trailing_metadata((("grpc-status-details-bin", st.SerializeToString()),))
        context.set_code(grpc.StatusCode.UNKNOWN)
        context.set_details(next(e.message for e in errs if e and e.code != "ABORTED") if any(
            e and e.code != "ABORTED" for e in errs) else "write failed")

    def _decode_update(self, p: _Pipeline, u) -> Op | None:
        U = p4r.Update
        kind = {U.INSERT: "insert", U.MODIFY: "modify", U.DELETE: "delete"}.get(u.type)
        if kind is None:
            raise StoreError("INVALID_ARGUMENT", "update type unspecified")
        which = u.entity.WhichOneof("entity")
        if which in ("action_profile_member", "action_profile_group"):
            self._profile_update(p, kind, getattr(u.entity, which))
            return None
        if which != "table_entry":
            raise StoreError("UNIMPLEMENTED", f"writing {which} is not supported")
        te = u.entity.table_entry
        t = p.index.tables.get(te.table_id)
        if t is None:
            raise StoreError("NOT_FOUND", f"unknown table id {te.table_id:#x}")
        if te.is_default_action:
            if kind != "modify":
                raise StoreError("INVALID_ARGUMENT", "the default entry can only be modified")
            if len(te.match):
                raise StoreError("INVALID_ARGUMENT", "a default entry has no match")
            if t.const_default:
                raise StoreError("PERMISSION_DENIED", f"{t.spec.name}: the default action is const")
            if not te.HasField("action"):
                return Op("default", t.spec.name, None)
            name, params, group, ref = self._decode_table_action(p, t, te.action)
            if group:
                raise StoreError("UNIMPLEMENTED", f"{t.spec.name}: a default action pointing at a group")
            return Op("default", t.spec.name, Entry(t.spec.name, {}, name, params, None, "p4runtime", ref=ref))
        if t.const_table:
            raise StoreError("PERMISSION_DENIED", f"{t.spec.name} has const entries")
        return Op(kind, t.spec.name, self._decode_entry(p, t, te, kind), te.metadata)

    def _decode_entry(self, p: _Pipeline, t: TableRef, te, kind: str) -> Entry:
        """The Entry of a (non-default) table entry update."""
        self._check_unstored(t, te)
        matches = self._decode_match(t, te)
        ternary = t.spec.needs_priority
        if ternary and te.priority <= 0:
            raise StoreError("INVALID_ARGUMENT", f"{t.spec.name}: entries need a priority > 0")
        if not ternary and te.priority != 0:
            raise StoreError("INVALID_ARGUMENT", f"{t.spec.name}: priority must be 0 for an exact/lpm table")
        group, ref = None, None
        if kind == "delete":
            name, params = "", {}
        elif not te.HasField("action"):
            raise StoreError("INVALID_ARGUMENT", "an entry needs an action")
        else:
            name, params, group, ref = self._decode_table_action(p, t, te.action)
        return Entry(t.spec.name, matches, name, params, te.priority if ternary else None, "p4runtime",
                     group=group, ref=ref)

    def _decode_table_action(self, p: _Pipeline, t: TableRef, ta):
        """(action, params, group members or None, ("member" | "group", id) or None) of a table entry's action."""
        which = ta.WhichOneof("type")
        if t.profile is None:
            if which != "action":
                raise StoreError("INVALID_ARGUMENT", f"{t.spec.name} has no action profile: expected an action")
            return (*self._decode_action(t, ta), None, None)
        if which == "action_profile_member_id":
            m = p.members[t.profile].get(ta.action_profile_member_id)
            if m is None:
                raise StoreError("NOT_FOUND", f"{t.spec.name}: no member {ta.action_profile_member_id}")
            return m[1], dict(m[2]), None, ("member", ta.action_profile_member_id)
        if which == "action_profile_group_id":
            gid = ta.action_profile_group_id
            if gid not in p.groups[t.profile]:
                raise StoreError("NOT_FOUND", f"{t.spec.name}: no group {gid}")
            members = p.group_members(t.profile, gid)
            if not members:
                raise StoreError("FAILED_PRECONDITION", f"{t.spec.name}: group {gid} has no members (BMv2: EMPTY_GRP)")
            return members[0][0], dict(members[0][1]), members, ("group", gid)
        raise StoreError("INVALID_ARGUMENT", f"{t.spec.name} is behind an action profile: expected a member or group id")

    def _profile_update(self, p: _Pipeline, kind: str, x) -> None:
        """INSERT/MODIFY/DELETE of an ActionProfileMember or ActionProfileGroup.
        A member or group that a table entry (or, for a member, a group) points
        at cannot be deleted (P4Runtime) nor, here, modified."""
        prof = p.index.profiles.get(x.action_profile_id)
        if prof is None:
            raise StoreError("NOT_FOUND", f"unknown action profile id {x.action_profile_id:#x}")
        group = isinstance(x, p4r.ActionProfileGroup)
        ident = x.group_id if group else x.member_id
        what = "group" if group else "member"
        table = p.groups[prof.id] if group else p.members[prof.id]
        exists = ident in table
        if kind == "insert" and exists:
            raise StoreError("ALREADY_EXISTS", f"{prof.name}: {what} {ident} exists")
        if kind != "insert" and not exists:
            raise StoreError("NOT_FOUND", f"{prof.name}: no {what} {ident}")
        if kind != "insert" and p.in_use(prof.id, what, ident):
            raise StoreError("FAILED_PRECONDITION", f"{prof.name}: {what} {ident} is in use"
                             + ("" if kind == "delete" else " (modifying a member or group in use is not supported)"))
        if kind == "delete":
            del table[ident]
            return
        if group:
            if not prof.with_selector:
                raise StoreError("INVALID_ARGUMENT", f"{prof.name} has no selector: no groups")
            ms = []
            for m in x.members:
                if m.member_id not in p.members[prof.id]:
                    raise StoreError("NOT_FOUND", f"{prof.name}: group {ident}: no member {m.member_id}")
                if m.weight > 1:
                    raise StoreError("UNIMPLEMENTED", f"{prof.name}: member weights above 1")
                if m.member_id in ms:
                    raise StoreError("INVALID_ARGUMENT", f"{prof.name}: group {ident}: member {m.member_id} twice")
                ms.append(m.member_id)
            table[ident] = ms
            return
        a = prof.actions.get(x.action.action_id)
        if a is None:
            raise StoreError("INVALID_ARGUMENT", f"{prof.name}: action id {x.action.action_id:#x} not allowed")
        ref = TableRef(prof.id, next(t.spec for t in p.index.tables.values() if t.profile == prof.id), {}, prof.actions,
                       prof.size, False, False)
        name, params = self._decode_action(ref, p4r.TableAction(action=x.action))
        p.order += 1
        table[ident] = (p.order, name, params)

    @staticmethod
    def _check_unstored(t: TableRef, te) -> None:
        """Refuse what the store would drop: an idle timeout or a meter
        config is INVALID_ARGUMENT on a table the P4Info gives none, and
        UNIMPLEMENTED where it does (neither is modelled)."""
        if te.idle_timeout_ns or te.HasField("time_since_last_hit"):
            if not t.idle_timeout:
                raise StoreError("INVALID_ARGUMENT", f"{t.spec.name} has no idle timeout (idle_timeout_ns must be 0)")
            raise StoreError("UNIMPLEMENTED", f"{t.spec.name}: idle timeouts are not supported")
        if te.HasField("meter_config") or te.HasField("meter_counter_data"):
            if not t.direct_meter:
                raise StoreError("INVALID_ARGUMENT", f"{t.spec.name} has no direct meter (no meter_config)")
            raise StoreError("UNIMPLEMENTED", f"{t.spec.name}: direct meters are not supported")

    @staticmethod
    def _decode_match(t: TableRef, te) -> dict[str, Match]:
        got: dict[int, Match] = {}
        for fm in te.match:
            f = t.fields.get(fm.field_id)
            if f is None:
                raise StoreError("INVALID_ARGUMENT", f"{t.spec.name}: unknown match field id {fm.field_id}")
            if fm.field_id in got:
                raise StoreError("INVALID_ARGUMENT", f"{t.spec.name}: match field {f[1]} given twice")
            kf, nm = f
            top = (1 << kf.width) - 1
            kind = fm.WhichOneof("field_match_type")

            def val(b: bytes, what: str) -> int:
                if not b:
                    raise StoreError("INVALID_ARGUMENT", f"{nm}: empty {what}")
                v = _int(b)
                if v > top:
                    raise StoreError("INVALID_ARGUMENT", f"{nm}: {what} {v:#x} is wider than {kf.width} bits")
                return v

            want = {"exact": "exact", "lpm": "lpm", "ternary": "ternary", "range": "range", "optional": "optional"}
            if kind != want.get(kf.match):
                raise StoreError("INVALID_ARGUMENT", f"{nm}: a {kf.match} field, got a {kind} match")
            if kind == "exact":
                m = Match("exact", val(fm.exact.value, "value"))
            elif kind == "lpm":
                v, pl = val(fm.lpm.value, "value"), fm.lpm.prefix_len
                if not 0 < pl <= kf.width:
                    raise StoreError("INVALID_ARGUMENT", f"{nm}: prefix length {pl} not in 1..{kf.width}")
                mask = top ^ ((1 << (kf.width - pl)) - 1)
                if v & ~mask:
                    raise StoreError("INVALID_ARGUMENT", f"{nm}: value has bits past the /{pl} prefix")
                m = Match("lpm", v, mask, pl)
            elif kind == "ternary":
                v, mask = val(fm.ternary.value, "value"), val(fm.ternary.mask, "mask")
                if mask == 0:
                    raise StoreError("INVALID_ARGUMENT", f"{nm}: a don't-care ternary is omitted, not mask 0")
                if v & ~mask:
                    raise StoreError("INVALID_ARGUMENT", f"{nm}: value has bits outside the mask")
                m = Match("ternary", v, mask)
            elif kind == "range":
                lo, hi = val(fm.range.low, "low"), val(fm.range.high, "high")
                if lo > hi:
                    raise StoreError("INVALID_ARGUMENT", f"{nm}: range low > high")
                m = Match("range", lo, lo=lo, hi=hi)
            else:
                m = Match("optional", val(fm.optional.value, "value"), top)
            got[fm.field_id] = m
        out: dict[str, Match] = {}
        for fid, (kf, nm) in sorted(t.fields.items()):
            if fid in got:
                out[kf.field] = got[fid]
            elif kf.match == "exact":
                raise StoreError("INVALID_ARGUMENT", f"{t.spec.name}: exact field {nm} missing")
            else:
                out[kf.field] = wildcard(kf)
        return out

    @staticmethod
    def _decode_action(t: TableRef, ta) -> tuple[str, dict[str, int]]:
        which = ta.WhichOneof("type")
        if which != "action":
            raise StoreError("UNIMPLEMENTED", f"{which} (action profiles) is not supported")
        a = t.actions.get(ta.action.action_id)
        if a is None:
            raise StoreError("INVALID_ARGUMENT", f"{t.spec.name}: action id {ta.action.action_id:#x} not allowed")
        params: dict[str, int] = {}
        for pp in ta.action.params:
            if not 1 <= pp.param_id <= len(a.info.params):
                raise StoreError("INVALID_ARGUMENT", f"{a.info.name}: unknown param id {pp.param_id}")
            spec = a.info.params[pp.param_id - 1]
            v = _int(pp.value)
            if not pp.value or v >> spec.width:
                raise StoreError("INVALID_ARGUMENT", f"{a.info.name}.{spec.name}: value does not fit {spec.width} bits")
            params[spec.name] = v
        if len(params) != len(a.info.params):
            raise StoreError("INVALID_ARGUMENT", f"{a.info.name}: needs {len(a.info.params)} params, got {len(params)}")
        return a.info.name, params

    # --- read ---

    def _encode(self, p: _Pipeline, t: TableRef, e: Entry | None, default=None, counters=None):
        te = p4r.TableEntry(table_id=t.id)
        if e is None:
            te.is_default_action = True
            name, params = default if default else (None, {})
        else:
            for fid, (kf, _) in sorted(t.fields.items()):
                m = e.matches[kf.field]
                if m == wildcard(kf):
                    continue  # a don't-care is omitted
                fm = te.match.add(field_id=fid)
                if m.kind == "exact":
                    fm.exact.value = _bytes(m.value, kf.width)
                elif m.kind == "lpm":
                    fm.lpm.value, fm.lpm.prefix_len = _bytes(m.value, kf.width), m.prefix_len or 0
                elif m.kind == "ternary":
                    fm.ternary.value, fm.ternary.mask = _bytes(m.value, kf.width), _bytes(m.mask or 0, kf.width)
                elif m.kind == "range":
                    fm.range.low, fm.range.high = _bytes(m.lo or 0, kf.width), _bytes(m.hi or 0, kf.width)
                else:
                    fm.optional.value = _bytes(m.value, kf.width)
            if e.priority is not None:
                te.priority = e.priority
            name, params = e.action, e.params
        if e is not None and e.ref is not None:
            if e.ref[0] == "member":
                te.action.action_profile_member_id = e.ref[1]
            else:
                te.action.action_profile_group_id = e.ref[1]
        elif name:
            aid = p.action_ids.get(name)
            if aid is not None:
                te.action.action.action_id = aid
                info = p.index.actions[aid].info
                for i, ap in enumerate(info.params, 1):
                    te.action.action.params.add(param_id=i, value=_bytes(params.get(ap.name, 0), ap.width))
        if counters is not None:
            te.counter_data.packet_count, te.counter_data.byte_count = counters
        return te

    def Read(self, request, context):
        """The entities asked for, streamed in ReadResponses of at most
        ``READ_CHUNK_BYTES`` each (clients refuse messages over 4 MiB by default)."""
        if request.device_id != self.device_id:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no device {request.device_id}")
        p = self.pipeline
        if p is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "No forwarding pipeline config set")
        out, size = p4r.ReadResponse(), 0
        for ent in request.entities:
            which = ent.WhichOneof("entity")
            if which == "table_entry":
                found = self._read_table(p, ent.table_entry, context, as_counter=False)
            elif which == "direct_counter_entry":
                found = self._read_table(p, ent.direct_counter_entry.table_entry, context, as_counter=True)
            elif which == "extern_entry" and ent.extern_entry.extern_type_id == SYNAPSE_STATE_EXTERN:
                found = self._read_state(p, ent.extern_entry.extern_id)
            elif which in ("action_profile_member", "action_profile_group"):
                found = self._read_profile(p, getattr(ent, which), which == "action_profile_group", context)
            elif which in ("counter_entry", "meter_entry", "direct_meter_entry"):
                context.abort(grpc.StatusCode.UNIMPLEMENTED, f"reading {which}: the P4Info declares the program's "
                              "counters and meters, but the store's lookups run no actions, so only direct "
                              "counters count")
            else:
                context.abort(grpc.StatusCode.UNIMPLEMENTED, f"reading {which} is not supported")
            for e in found:
                n = e.ByteSize() + 6  # + the repeated field's tag and length
                if size + n > READ_CHUNK_BYTES and size:
                    yield out
                    out, size = p4r.ReadResponse(), 0
                out.entities.append(e)
                size += n
        yield out

    def _read_table(self, p: _Pipeline, req, context, as_counter: bool):
        """The table entries (or direct counter entries) ``req`` selects, one Entity each."""
        if req.table_id and req.table_id not in p.index.tables:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown table id {req.table_id:#x}")
        tables = [p.index.tables[req.table_id]] if req.table_id else list(p.index.tables.values())
        want_counters = as_counter or req.HasField("counter_data")

        def entity(te) -> p4r.Entity:
            if as_counter:
                d = p4r.DirectCounterEntry(data=te.counter_data)
                te.ClearField("counter_data")
                d.table_entry.CopyFrom(te)
                return p4r.Entity(direct_counter_entry=d)
            return p4r.Entity(table_entry=te)

        for t in tables:
            if req.is_default_action:
                yield entity(self._encode(p, t, None, p.store.default(t.spec.name)))
                continue
            if len(req.match):
                try:
                    e = Entry(t.spec.name, self._decode_match(t, req), "", {},
                              req.priority if t.spec.needs_priority else None, "read")
                except StoreError as err:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, err.message)
                s = p.store.get(t.spec.name, e)
                stored = [s] if s is not None else []
            else:
                stored = p.store.entries(t.spec.name)
            for s in stored:
                if not want_counters:  # an entry reads the same until it changes (a new Stored): encode it once
                    if s.wire is None or s.wire[0] is not p.index:
                        te = self._encode(p, t, s.entry)
                        te.metadata = s.metadata
                        s.wire = (p.index, te.SerializeToString())
                    e = p4r.Entity()
                    e.table_entry.MergeFromString(s.wire[1])
                    yield e
                    continue
                te = self._encode(p, t, s.entry, counters=(s.packets, s.bytes))
                if not as_counter:
                    te.metadata = s.metadata
                yield entity(te)

    def _read_profile(self, p: _Pipeline, req, group: bool, context):
        """The action profile members or groups ``req`` selects, one Entity each."""
        if req.action_profile_id and req.action_profile_id not in p.index.profiles:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown action profile id {req.action_profile_id:#x}")
        for pid in [req.action_profile_id] if req.action_profile_id else list(p.index.profiles):
            want = req.group_id if group else req.member_id
            if group:
                for gid, ms in sorted(p.groups[pid].items()):
                    if not want or want == gid:
                        e = p4r.Entity()
                        g = e.action_profile_group
                        g.action_profile_id, g.group_id = pid, gid
                        for m in ms:
                            g.members.add(member_id=m, weight=1)
                        yield e
                continue
            for mid, (_, name, params) in sorted(p.members[pid].items()):
                if want and want != mid:
                    continue
                e = p4r.Entity()
                m = e.action_profile_member
                m.action_profile_id, m.member_id = pid, mid
                aid = p.action_ids[name]
                m.action.action_id = aid
                for i, ap in enumerate(p.index.actions[aid].info.params, 1):
                    m.action.params.add(param_id=i, value=_bytes(params.get(ap.name, 0), ap.width))
                yield e

    def _read_state(self, p: _Pipeline, extern_id: int):
        stats = p.store.stats()
        for t in p.index.tables.values():
            if extern_id and extern_id != t.id:
                continue
            s = struct_pb2.Struct()
            s.update({"table": t.spec.name, **stats[t.spec.name]})
            if self.sim is not None and t.spec.name in self.sim.tables:
                s.update({"sim": self.sim.state(t.spec.name)})
            x = p4r.Entity()
            x.extern_entry.extern_type_id, x.extern_entry.extern_id = SYNAPSE_STATE_EXTERN, t.id
            x.extern_entry.entry.Pack(s)
            yield x


def parse_listen(listen: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) checked: a host and a port in 0..65535
    (0: any free port), or a one-line UserError."""
    host, sep, port = listen.rpartition(":")
    if not sep or not host or host == "[]":
        raise UserError(f"--listen {listen!r}: expected HOST:PORT (e.g. 127.0.0.1:9559)")
    if not port.isdigit() or int(port) > 65535:
        raise UserError(f"--listen {listen!r}: port {port!r} is not a number in 0..65535")
    return host, int(port)


def _check_bind(listen: str) -> None:
    """Bind ``listen`` once as gRPC will (SO_REUSEADDR, no SO_REUSEPORT) and
    turn a failure into one line naming the OS's reason (gRPC's own error
    is a log line and a bare RuntimeError)."""
    import socket

    host, port = parse_listen(listen)
    if port == 0:
        return
    try:
        addrs = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise UserError(f"--listen {listen}: {e.strerror}") from None
    for fam, typ, proto, _, addr in addrs:
        with socket.socket(fam, typ, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(addr)
            except OSError as e:
                raise UserError(f"--listen {listen}: cannot bind: {e.strerror}") from None


class _Abort(Exception):
    def __init__(self, code, details: str):
        super().__init__(details)
        self.code, self.details = code, details


class _SyncContext:
    """What a handler run on a worker thread sees of its aio call: ``abort``
    raises (the event loop aborts the call), ``is_active`` turns False once
    the call is done or cancelled, a status set is applied when it returns."""

    def __init__(self, context):
        self.done = threading.Event()
        self.code = self.details = self.trailing = None
        self._peer = context.peer()

    def abort(self, code, details: str):
        raise _Abort(code, details)

    def is_active(self) -> bool:
        return not self.done.is_set()

    def peer(self) -> str:
        return self._peer

    def set_code(self, code) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details

    def set_trailing_metadata(self, md) -> None:
        self.trailing = md


class _CallContext(_SyncContext):
    """What a Write served by the Rust front end sees of its call (``_core.Call``)."""

    def __init__(self, call):
        self.code = self.details = self.trailing = None
        self._call = call

    def is_active(self) -> bool:
        return self._call.is_active()

    def peer(self) -> str:
        return self._call.peer()


class _AioServicer(p4r_grpc.P4RuntimeServicer):
    """The service on a grpc.aio server: StreamChannel runs on the event loop
    (an idle stream costs no thread); the other RPCs run the service's
    synchronous handlers on a bounded pool of worker threads."""

    def __init__(self, svc: P4RuntimeServer, pool: futures.Executor):
        self.svc, self.pool = svc, pool
        self.StreamChannel = svc.StreamChannel  # an async generator itself: gRPC must see it as one

    async def _run(self, fn, request, context):
        ctx = _SyncContext(context)
        context.add_done_callback(lambda _: ctx.done.set())
        try:
            out = await asyncio.get_running_loop().run_in_executor(self.pool, fn, request, ctx)
        except asyncio.CancelledError:  # the client cancelled: the worker stops at its next check
            ctx.done.set()
            raise
        except _Abort as e:
            await context.abort(e.code, e.details)
        return await self._status(ctx, context, out)

    @staticmethod
    async def _status(ctx: _SyncContext, context, out):
        if ctx.code is not None and ctx.code != grpc.StatusCode.OK:
            await context.abort(ctx.code, ctx.details or "", ctx.trailing)
        return out

    def _write_here(self, request, context) -> tuple | None:
        """A small Write run on the event loop's thread, when nothing would
        make it wait: (its context, its answer), or None for the worker pool.
        Handing a Write to a worker thread and back costs more than a few
        updates do; a lock that is busy (a batch, background lookups) or a
        simulator in the loop sends it to the pool, so the loop never blocks."""
        svc = self.svc
        p = svc.pipeline
        if len(request.updates) > INLINE_UPDATES or p is None or svc.sim is not None or svc.before_update is not None:
            return None
        lock = p.store.lock
        if not lock.acquire(blocking=False):
            return None
        ctx = _SyncContext(context)
        try:
            return ctx, svc.Write(request, ctx)
        except _Abort as e:
            return ctx, e
        finally:
            lock.release()

    async def Capabilities(self, request, context):
        return self.svc.Capabilities(request, context)  # a constant: no worker needed

    async def SetForwardingPipelineConfig(self, request, context):
        return await self._run(self.svc.SetForwardingPipelineConfig, request, context)

    async def GetForwardingPipelineConfig(self, request, context):
        return await self._run(self.svc.GetForwardingPipelineConfig, request, context)

    async def Write(self, request, context):
        here = self._write_here(request, context)
        if here is None:
            return await self._run(self.svc.Write, request, context)
        ctx, out = here
        if isinstance(out, _Abort):
            await context.abort(out.code, out.details)
        return await self._status(ctx, context, out)

    async def Read(self, request, context):
        for m in await self._run(lambda r, c: list(self.svc.Read(r, c)), request, context):
            yield m


def _serve_loop(loop: asyncio.AbstractEventLoop, closed: threading.Event) -> None:
    """Run the server's event loop until stopped; then end what is left on
    it, close it and set ``closed``."""
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        left = asyncio.all_tasks(loop)
        for t in left:
            t.cancel()
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
        closed.set()


class RunningServer:
    """A started server: its event loop runs on a thread of its own;
    ``frontend`` is the Rust front end in front of it, if any, and
    ``writer`` the thread that applies the Writes it queues."""

    def __init__(self, loop: asyncio.AbstractEventLoop, closed: threading.Event, server, pool, frontend=None):
        self.loop, self.closed, self.server, self.pool, self.frontend = loop, closed, server, pool, frontend
        self.writer: threading.Thread | None = None

    def stop(self, grace: float | None = None) -> threading.Event:
        """Stop serving (``grace`` seconds for the RPCs in flight; the front
        end drops its RPCs at once); the event is set once the server and its
        loop are closed."""
        if self.frontend is not None:
            self.frontend.stop()
            if self.writer is not None and self.writer is not threading.current_thread():
                self.writer.join(10)  # out of Rust before the interpreter can finalize

        async def stop():
            await self.server.stop(grace)
            self.pool.shutdown(wait=False)
            self.loop.call_soon(self.loop.stop)

        if not self.closed.is_set():
            with contextlib.suppress(RuntimeError):  # the loop is stopping already
                asyncio.run_coroutine_threadsafe(stop(), self.loop)
        return self.closed


TRANSPORTS = ("rust", "grpc")


def make_server(service: P4RuntimeServer, listen: str = "127.0.0.1:9559", cert: str | None = None,
                key: str | None = None, ca: str | None = None, workers: int = 32,
                transport: str = "rust") -> tuple[RunningServer, int]:
    """A started gRPC server (TLS when ``cert``/``key`` are given; client
    certificates required when ``ca`` is); the port it bound. The port is
    bound without SO_REUSEPORT, so a second server on a busy port fails
    instead of taking half of the new connections. ``workers`` threads run
    the unary RPCs; streams need none (grpc.aio).

    ``transport``: ``rust`` (insecure only; with TLS the grpc.aio server
    serves) puts the Rust front end (``_core.Frontend``) on ``listen``: it
    serves Write itself and proxies the other RPCs to the grpc.aio server on
    a loopback port of its own; ``grpc``: the grpc.aio server alone."""
    if transport not in TRANSPORTS:
        raise UserError(f"--transport {transport!r}: expected one of {', '.join(TRANSPORTS)}")
    _check_bind(listen)
    if (cert or key) and not (cert and key):
        raise UserError("--cert and --key go together")
    if transport == "rust" and not cert:
        return _with_frontend(service, listen, workers)
    pool = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="p4rt")
    loop, closed = asyncio.new_event_loop(), threading.Event()
    threading.Thread(target=_serve_loop, args=(loop, closed), name="p4rt-server", daemon=True).start()

    async def start():
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", 64 << 20),
                                          ("grpc.max_send_message_length", 64 << 20),
                                          ("grpc.so_reuseport", 0)])
        p4r_grpc.add_P4RuntimeServicer_to_server(_AioServicer(service, pool), server)
        try:
            if cert:
                creds = grpc.ssl_server_credentials([(Path(key).read_bytes(), Path(cert).read_bytes())],
                                                    root_certificates=Path(ca).read_bytes() if ca else None,
                                                    require_client_auth=bool(ca))
                port = server.add_secure_port(listen, creds)
            else:
                port = server.add_insecure_port(listen)
        except RuntimeError:  # grpcio >= 1.60 raises where it used to return 0
            port = 0
        if port:
            await server.start()
        return server, port

    try:
        server, port = asyncio.run_coroutine_threadsafe(start(), loop).result()
    except BaseException:
        loop.call_soon_threadsafe(loop.stop)
        raise
    running = RunningServer(loop, closed, server, pool)
    if not port:
        running.stop(None).wait(5)
        raise UserError(f"--listen {listen}: cannot bind (address in use, or not an address of this host)")
    return running, port


def _with_frontend(service: P4RuntimeServer, listen: str, workers: int) -> tuple[RunningServer, int]:
    """The Rust front end on ``listen`` before a grpc.aio server on a free loopback port."""
    from synapse_vmt import _core

    inner, inner_port = make_server(service, "127.0.0.1:0", workers=workers, transport="grpc")
    service.behind_frontend = True  # StreamChannel's peer: the front end's x-synapse-peer header
    host, port = parse_listen(listen)
    try:
        front = _core.Frontend(host.strip("[]"), port, inner_port, service.write_here,
                               p4r.CapabilitiesResponse(p4runtime_api_version=API_VERSION).SerializeToString())
    except OSError as e:
        inner.stop(None).wait(5)
        raise UserError(f"--listen {listen}: cannot bind: {os.strerror(e.errno) if e.errno else e}") from None
    except ValueError as e:  # SYNAPSE_SERVE_SPIN_US not a number
        inner.stop(None).wait(5)
        raise UserError(str(e)) from None
    inner.writer = threading.Thread(target=_writer, args=(front, service.write_raw), name="p4rt-writer", daemon=True)
    inner.writer.start()
    inner.frontend = front
    return inner, front.port


def _writer(front, write) -> None:
    """The writer thread: answer the Writes the front end queued, every
    queued one per turn, until it stops."""
    while (calls := front.take()) is not None:
        for raw, call in calls:
            try:
                answer = write(raw, call)
            except Exception as e:  # noqa: BLE001 - a bug: the client gets it, the server keeps serving
                import traceback

                traceback.print_exc()
                answer = grpc.StatusCode.UNKNOWN.value[0], f"write failed: {e}", None
            call.reply(answer)

"""``synapse serve``: a P4Runtime server tested with an unmodified PyPI client
(finsy) and the generated gRPC stub, on 127.0.0.1 with a free port.

Oracles: what a client reads back is what it wrote; the store's lookups
(through Synapse's classifiers) agree with the linear oracle
``TableEntries.lookup`` and change with the writes; a failed atomic batch
leaves every table as it was."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import random
import threading
import time
from pathlib import Path

import grpc
import pytest
from click.testing import CliRunner
from finsy.proto import p4r, p4r_grpc, rpc_status

from synapse_vmt.cli import main
from synapse_vmt.p4.bmv2 import read_program
from synapse_vmt.p4.entries import sample_key
from synapse_vmt.p4.entrygen import gen_table
from synapse_vmt.p4rt import p4info as p4info_mod
from synapse_vmt.p4rt.p4info import assign_ids, build_p4info, jenkins, parse_p4info, to_text
from synapse_vmt.p4rt.server import SYNAPSE_STATE_EXTERN, P4RuntimeServer, make_server

import finsy as fy  # a core dependency (server.py imports it)
import requires

HEADER_TYPES = [
    {"name": "eth_t", "id": 0, "fields": [["dst", 48, False], ["src", 48, False], ["type", 16, False]]},
    {"name": "ip_t", "id": 1, "fields": [["src", 32, False], ["dst", 32, False], ["proto", 8, False]]},
    {"name": "l4_t", "id": 2, "fields": [["sport", 16, False], ["dport", 16, False]]},
    {"name": "meta_t", "id": 3, "fields": [["port", 9, False], ["flag", 1, False]]},
]
ACTIONS = [
    {"name": "NoAction", "id": 0, "runtime_data": []},
    {"name": "ingress.set_port", "id": 1, "runtime_data": [{"name": "port", "bitwidth": 9}]},
    {"name": "ingress.set_nhop", "id": 2, "runtime_data": [{"name": "nhop", "bitwidth": 16}]},
    {"name": "ingress.drop", "id": 3, "runtime_data": []},
    {"name": "ingress.permit", "id": 4, "runtime_data": []},
    {"name": "ingress.deny", "id": 5, "runtime_data": [{"name": "reason", "bitwidth": 4}]},
]


def _table(name, key, action_ids, nxt, default, size):
    names = [next(a["name"] for a in ACTIONS if a["id"] == i) for i in action_ids]
    return {
        "name": name, "max_size": size, "action_ids": action_ids, "actions": names,
        "key": [{"match_type": m, "name": n, "target": t, "mask": None} for m, n, t in key],
        "next_tables": {a: nxt for a in names}, "base_default_next": nxt,
        "default_entry": {"action_id": default, "action_const": False, "action_data": [], "action_entry_const": False},
    }


PROGRAM = {
    "header_types": HEADER_TYPES,
    "headers": [{"name": n, "header_type": f"{t}_t"} for n, t in [("eth", "eth"), ("ipv4", "ip"), ("l4", "l4"), ("meta", "meta")]],
    "actions": ACTIONS,
    "pipelines": [{
        "name": "ingress", "init_table": "ingress.fwd", "conditionals": [],
        "tables": [
            _table("ingress.fwd", [("exact", "hdr.eth.dst", ["eth", "dst"])], [1, 0], "ingress.route", 0, 64),
            _table("ingress.route", [("lpm", "hdr.ipv4.dst", ["ipv4", "dst"])], [2, 3], "ingress.acl", 3, 20000),
            _table("ingress.acl", [("ternary", "hdr.ipv4.src", ["ipv4", "src"]), ("exact", "hdr.ipv4.proto", ["ipv4", "proto"]),
                                   ("range", "hdr.l4.dport", ["l4", "dport"]), ("optional", "meta.flag", ["meta", "flag"])],
                   [4, 5], None, 4, 4),
        ],
    }],
}
ROUTE = "ingress.route"


@pytest.fixture
def prog(tmp_path) -> Path:
    p = tmp_path / "tiny.json"
    p.write_text(json.dumps(PROGRAM))
    return p


@pytest.fixture
def served(prog):
    """A server with the tiny program loaded, on a free loopback port."""
    svc = P4RuntimeServer(prog)
    server, port = make_server(svc, "127.0.0.1:0")
    yield svc, port
    server.stop(grace=None)


# --- P4Info ---


def test_jenkins_matches_published_values():
    # Bob Jenkins' one-at-a-time test vectors.
    assert jenkins("a") == 0xCA2E9442
    assert jenkins("The quick brown fox jumps over the lazy dog") == 0x519E91F5


def test_ids_are_stable_and_collisions_resolve_deterministically(monkeypatch, prog):
    a, b = build_p4info(read_program(prog)), build_p4info(read_program(prog))
    assert a == b
    ids = {t.preamble.name: t.preamble.id for t in a.tables}
    assert all(i >> 24 == 0x02 for i in ids.values())
    assert ids[ROUTE] == (0x02 << 24) | (jenkins(ROUTE) & 0xFFFFFF)
    assert all(x.preamble.id >> 24 == 0x01 for x in a.actions)
    monkeypatch.setattr(p4info_mod, "jenkins", lambda name: 7)  # every name collides
    got = assign_ids(["c", "a", "b"], 0x02)
    assert got == {"a": 0x02000007, "b": 0x02000008, "c": 0x02000009}
    assert assign_ids(["b", "c", "a"], 0x02) == got


def test_p4info_command_writes_parseable_text(tmp_path, prog):
    out = tmp_path / "p4info.txtpb"
    r = CliRunner().invoke(main, ["p4", "p4info", str(prog), "-o", str(out)])
    assert r.exit_code == 0, r.output
    info = parse_p4info(out.read_text())
    assert info == build_p4info(read_program(prog))
    acl = next(t for t in info.tables if t.preamble.name == "ingress.acl")
    assert [m.name for m in acl.match_fields] == ["hdr.ipv4.src", "hdr.ipv4.proto", "hdr.l4.dport", "meta.flag"]
    assert acl.size == 4


# --- finsy: the unmodified client ---


def _switch(prog: Path, port: int, tmp_path: Path, election: int = 10, p4info: Path | None = None):
    if p4info is None:
        p4info = tmp_path / "p4info.txtpb"
        p4info.write_text(to_text(build_p4info(read_program(prog))))
    opts = fy.SwitchOptions(p4info=p4info, p4blob=prog, device_id=1, initial_election_id=election)
    return fy.Switch("s1", f"127.0.0.1:{port}", opts)


def _route(i: int) -> tuple[str, int]:
    """The i-th distinct prefix: /24s under 10.0.0.0/8 then /32s."""
    return (f"10.{i >> 8 & 255}.{i & 255}.0/24", 24) if i < 65536 else (f"11.0.{i >> 8 & 255}.{i & 255}/32", 32)


def _hits(svc, n_keys: int, rng) -> dict:
    """Route lookups through the store's classifier vs the linear oracle."""
    store = svc.store
    snap = store.snapshot()[ROUTE]
    spec = svc.pipeline.prog.tables[ROUTE]
    rows = [sample_key(e, spec, rng) for e in rng.sample(snap.entries, min(n_keys, len(snap.entries)))]
    rows += [{"ipv4.dst": rng.getrandbits(32)} for _ in range(20)]
    got = store.lookup(ROUTE, rows)
    want = [snap.lookup(r) for r in rows]
    assert [(e.key() if e else None) for e in got] == [(e.key() if e else None) for e in want]
    return {"hits": sum(e is not None for e in got), "params": [e.params["nhop"] for e in got if e]}


def test_finsy_inserts_10000_reads_modifies_deletes_and_matches_follow(tmp_path, prog, served):
    svc, port = served
    n = 10_000
    rng = random.Random(1)

    async def run():
        sw = _switch(prog, port, tmp_path)
        async with sw:
            entries = [fy.P4TableEntry(ROUTE, match=fy.P4TableMatch(dst=_route(i)[0]),
                                       action=fy.P4TableAction("set_nhop", nhop=i % 65536)) for i in range(n)]
            assert _hits(svc, 10, rng)["hits"] == 0  # empty table: every key misses
            t0 = time.perf_counter()
            await sw.insert(entries)
            dt = time.perf_counter() - t0
            back = [e async for e in sw.read(fy.P4TableEntry(ROUTE))]
            assert len(back) == n
            assert {(e.match["dst"], e.action.args["nhop"]) for e in back} == \
                {(_ip_prefix(i), i % 65536) for i in range(n)}
            h = _hits(svc, 100, rng)
            assert h["hits"] >= 100
            # modify: every nhop + 1 for the first 100 entries
            await sw.modify([fy.P4TableEntry(ROUTE, match=fy.P4TableMatch(dst=_route(i)[0]),
                                             action=fy.P4TableAction("set_nhop", nhop=(i + 1) % 65536)) for i in range(100)])
            one = [e async for e in sw.read(fy.P4TableEntry(ROUTE, match=fy.P4TableMatch(dst=_route(5)[0])))]
            assert len(one) == 1 and one[0].action.args["nhop"] == 6
            _hits(svc, 100, rng)
            # direct counters count the lookups' hits
            cnt = [e async for e in sw.read(fy.P4TableEntry(ROUTE, counter_data=fy.P4CounterData()))]
            assert sum(e.counter_data.packet_count for e in cnt) == svc.store.stats()[ROUTE]["hits"]
            await sw.delete(entries)
            assert [e async for e in sw.read(fy.P4TableEntry(ROUTE))] == []
            assert _hits(svc, 10, rng)["hits"] == 0
            return dt

    dt = asyncio.run(run())
    print(f"finsy: inserted {n} entries in one Write in {dt:.2f} s ({n / dt:.0f} writes/s)")


def _ip_prefix(i: int) -> tuple[int, int]:
    """How finsy decodes the i-th prefix it reads back: (value, prefix length)."""
    text, plen = _route(i)
    return int(ipaddress.IPv4Address(text.split("/")[0])), plen


# --- the raw generated stub: arbitration, atomicity, bad input ---


class Raw:
    """A controller on the generated stub: a StreamChannel for arbitration."""

    def __init__(self, port: int, election: int | None, device_id: int = 1):
        self.ch = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = p4r_grpc.P4RuntimeStub(self.ch)
        self.election = election
        self._out: list = []
        self._ev = threading.Event()
        self._q: list = []
        self._cond = threading.Condition()
        req = p4r.StreamMessageRequest()
        req.arbitration.device_id = device_id
        if election is not None:  # None: no election id at all
            req.arbitration.election_id.low = election
        self._closed = threading.Event()

        def gen():
            yield req
            self._closed.wait()

        self.stream = self.stub.StreamChannel(gen())
        self.first = next(self.stream)

    def write(self, updates, atomicity=p4r.WriteRequest.CONTINUE_ON_ERROR, timeout=30):
        req = p4r.WriteRequest(device_id=1, updates=updates, atomicity=atomicity)
        if self.election is not None:
            req.election_id.low = self.election
        return self.stub.Write(req, timeout=timeout)

    def close(self):
        self._closed.set()
        self.stream.cancel()
        self.ch.close()


def _index(svc):
    return svc.pipeline.index


def _upd(svc, kind, table, match: dict, action=None, params=(), priority=0):
    """An Update from names (ids resolved through the server's P4Info)."""
    idx = _index(svc)
    t = next(t for t in idx.tables.values() if t.spec.name == table)
    u = p4r.Update(type=kind)
    te = u.entity.table_entry
    te.table_id, te.priority = t.id, priority
    fid = {nm: i for i, (_, nm) in t.fields.items()}
    for name, (k, *v) in match.items():
        fm = te.match.add(field_id=fid[name])
        if k == "exact":
            fm.exact.value = v[0]
        elif k == "lpm":
            fm.lpm.value, fm.lpm.prefix_len = v
        elif k == "ternary":
            fm.ternary.value, fm.ternary.mask = v
        elif k == "range":
            fm.range.low, fm.range.high = v
        else:
            fm.optional.value = v[0]
    if action:
        aid = next(i for i, a in idx.actions.items() if a.info.name == action)
        te.action.action.action_id = aid
        for i, val in enumerate(params, 1):
            te.action.action.params.add(param_id=i, value=val)
    return u


def _errors(e: grpc.RpcError) -> list[int]:
    md = dict(e.trailing_metadata() or ())
    st = rpc_status.Status.FromString(md["grpc-status-details-bin"])
    out = []
    for d in st.details:
        err = p4r.Error()
        d.Unpack(err)
        out.append(err.canonical_code)
    return out


def _route_entries(svc):
    return {(s.entry.key(), s.entry.params["nhop"]) for s in svc.store.entries(ROUTE)}


def test_arbitration_non_primary_refused_and_failover(served):
    svc, port = served
    a = Raw(port, 10)
    assert a.first.arbitration.status.code == 0  # OK: primary
    b = Raw(port, 5)
    assert b.first.arbitration.status.code == 6  # ALREADY_EXISTS: backup
    u = _upd(svc, p4r.Update.INSERT, ROUTE, {"hdr.ipv4.dst": ("lpm", b"\x0a\x00\x00\x00", 8)}, "ingress.set_nhop", [b"\x01"])
    with pytest.raises(grpc.RpcError) as ei:
        b.write([u])
    assert ei.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert _route_entries(svc) == set()
    a.write([u])
    assert len(_route_entries(svc)) == 1
    a.close()  # the primary leaves: b is elected
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            b.write([_upd(svc, p4r.Update.DELETE, ROUTE, {"hdr.ipv4.dst": ("lpm", b"\x0a\x00\x00\x00", 8)})])
            break
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.PERMISSION_DENIED
            time.sleep(0.05)
    assert _route_entries(svc) == set()
    b.close()


def test_per_update_errors_and_atomic_batches(served):
    svc, port = served
    c = Raw(port, 1)
    ins = lambda i: _upd(svc, p4r.Update.INSERT, ROUTE, {"hdr.ipv4.dst": ("lpm", bytes([10, i, 0, 0]), 16)},
                         "ingress.set_nhop", [bytes([i])])
    c.write([ins(1), ins(2)])
    before = _route_entries(svc)
    bad = [
        ins(1),  # ALREADY_EXISTS
        _upd(svc, p4r.Update.DELETE, ROUTE, {"hdr.ipv4.dst": ("lpm", b"\x0b\x00\x00\x00", 16)}),  # NOT_FOUND
        _upd(svc, p4r.Update.INSERT, ROUTE, {"hdr.ipv4.dst": ("lpm", b"\x01\x0a\x00\x00\x00", 16)},
             "ingress.set_nhop", [b"\x01"]),  # 40-bit value for a 32-bit field
        _upd(svc, p4r.Update.INSERT, ROUTE, {"hdr.ipv4.dst": ("lpm", b"\x0a\x03\x00\x00", 16)},
             "ingress.set_nhop", [b"\x01\x00\x00"]),  # param wider than 16 bits
        ins(3),  # fine
    ]
    bad[2].entity.table_entry.match[0].lpm.value = b"\x01\x0a\x00\x00\x00"
    for atomicity in (p4r.WriteRequest.ROLLBACK_ON_ERROR, p4r.WriteRequest.DATAPLANE_ATOMIC):
        with pytest.raises(grpc.RpcError) as ei:
            c.write(bad, atomicity)
        assert ei.value.code() == grpc.StatusCode.UNKNOWN
        assert _errors(ei.value) == [6, 5, 3, 3, 10]  # the good one is ABORTED (not applied)
        assert _route_entries(svc) == before  # nothing applied
    with pytest.raises(grpc.RpcError) as ei:
        c.write(bad)  # CONTINUE_ON_ERROR: the good one lands
    assert _errors(ei.value) == [6, 5, 3, 3, 0]
    assert len(_route_entries(svc)) == len(before) + 1
    # unknown ids
    u = ins(9)
    u.entity.table_entry.table_id = 0x02ABCDEF
    with pytest.raises(grpc.RpcError) as ei:
        c.write([u])
    assert _errors(ei.value) == [5]
    u = ins(9)
    u.entity.table_entry.match[0].field_id = 77
    u2 = ins(9)
    u2.entity.table_entry.action.action.action_id = 0x01000001
    with pytest.raises(grpc.RpcError) as ei:
        c.write([u, u2])
    assert _errors(ei.value) == [3, 3]
    c.close()


def test_acl_kinds_priorities_and_full_table(served):
    svc, port = served
    c = Raw(port, 1)
    acl = "ingress.acl"

    def rule(i, prio):
        return _upd(svc, p4r.Update.INSERT, acl, {
            "hdr.ipv4.src": ("ternary", bytes([10, i, 0, 0]), b"\xff\xff\x00\x00"),
            "hdr.ipv4.proto": ("exact", b"\x06"),
            "hdr.l4.dport": ("range", b"\x00\x50", b"\x01\xbb"),
            "meta.flag": ("optional", b"\x01"),
        }, "ingress.deny", [bytes([i])], priority=prio)

    with pytest.raises(grpc.RpcError) as ei:
        c.write([rule(1, 0)])  # a ternary table needs priority > 0
    assert _errors(ei.value) == [3]
    c.write([rule(i, 10 + i) for i in range(4)])
    with pytest.raises(grpc.RpcError) as ei:
        c.write([rule(4, 20)])
    assert _errors(ei.value) == [8]  # RESOURCE_EXHAUSTED: size 4
    # a wildcard on src/flag (fields omitted) at a higher priority wins over the others
    c.write([_upd(svc, p4r.Update.DELETE, acl, {
        "hdr.ipv4.src": ("ternary", bytes([10, 3, 0, 0]), b"\xff\xff\x00\x00"), "hdr.ipv4.proto": ("exact", b"\x06"),
        "hdr.l4.dport": ("range", b"\x00\x50", b"\x01\xbb"), "meta.flag": ("optional", b"\x01")}, priority=13)])
    c.write([_upd(svc, p4r.Update.INSERT, acl, {"hdr.ipv4.proto": ("exact", b"\x06")}, "ingress.permit", priority=99)])
    key = {"ipv4.src": 0x0A010203, "ipv4.proto": 6, "l4.dport": 100, "meta.flag": 1}
    got = svc.store.lookup(acl, [key, {**key, "ipv4.proto": 17}])
    assert got[0].action == "ingress.permit" and got[1] is None
    # modify the default entry, then read it back
    d = _upd(svc, p4r.Update.MODIFY, acl, {}, "ingress.deny", [b"\x07"])
    d.entity.table_entry.is_default_action = True
    c.write([d])
    req = p4r.ReadRequest(device_id=1)
    e = req.entities.add().table_entry
    e.table_id, e.is_default_action = d.entity.table_entry.table_id, True
    back = [x for r in c.stub.Read(req) for x in r.entities]
    assert back[0].table_entry.action.action.params[0].value == b"\x07"
    c.close()


def test_write_before_pipeline_and_bad_pipeline(prog):
    svc = P4RuntimeServer(None)
    server, port = make_server(svc, "127.0.0.1:0")
    try:
        c = Raw(port, 1)
        req = p4r.WriteRequest(device_id=1)
        req.election_id.low = 1
        with pytest.raises(grpc.RpcError) as ei:
            c.stub.Write(req)
        assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        sp = p4r.SetForwardingPipelineConfigRequest(device_id=1, action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        sp.election_id.low = 1
        sp.config.p4_device_config = b"{not json"
        with pytest.raises(grpc.RpcError) as ei:
            c.stub.SetForwardingPipelineConfig(sp)
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        sp.config.p4_device_config = prog.read_bytes()
        c.stub.SetForwardingPipelineConfig(sp)  # still serving; now it works
        got = c.stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(device_id=1))
        assert got.config.p4info == build_p4info(read_program(prog))
        c.close()
    finally:
        server.stop(grace=None)


@pytest.mark.parametrize("atomicity, kept", [
    (p4r.WriteRequest.ROLLBACK_ON_ERROR, 0),  # all or nothing: nothing
    (p4r.WriteRequest.DATAPLANE_ATOMIC, 0),
    (p4r.WriteRequest.CONTINUE_ON_ERROR, 2500),  # the updates before the drop stay: a partial apply
])
def test_dropped_connection_mid_batch(prog, atomicity, kept):
    """The server's test hook drops the client's connection just before the
    batch's 2,500th update: an atomic batch applies nothing, another exactly
    the 2,500 updates before the drop; the server keeps serving."""
    seen: dict = {}

    def drop(i, context):
        if i != 2500:
            return
        seen["client"].ch.close()  # the connection goes away mid-batch
        deadline = time.monotonic() + 10
        while context.is_active() and time.monotonic() < deadline:
            time.sleep(0.002)
        seen["inactive"] = not context.is_active()

    svc = P4RuntimeServer(prog, before_update=drop)
    server, port = make_server(svc, "127.0.0.1:0")
    try:
        c = seen["client"] = Raw(port, 1)
        dst = [(0x0A000000 | i << 8).to_bytes(4, "big") for i in range(5000)]
        batch = [_upd(svc, p4r.Update.INSERT, ROUTE, {"hdr.ipv4.dst": ("lpm", d, 24)}, "ingress.set_nhop", [b"\x01"])
                 for d in dst]
        req = p4r.WriteRequest(device_id=1, updates=batch, atomicity=atomicity)
        req.election_id.low = 1
        fut = c.stub.Write.future(req)
        with pytest.raises((grpc.RpcError, grpc.FutureCancelledError)):
            fut.result(timeout=30)
        deadline = time.monotonic() + 30
        while "inactive" not in seen and time.monotonic() < deadline:
            time.sleep(0.01)
        assert seen.get("inactive"), "the server never saw the connection drop"
        with svc.store.lock:  # the Write holds it while it applies: taken, the batch is done
            got = [next(iter(s.entry.matches.values())).value for s in svc.store.entries(ROUTE)]
        assert got == [int.from_bytes(d, "big") for d in dst[:kept]]  # the first `kept`, in order
        d = Raw(port, 2)  # the server keeps serving
        d.write([_upd(svc, p4r.Update.INSERT, ROUTE, {"hdr.ipv4.dst": ("lpm", b"\x0c\x00\x00\x00", 8)},
                      "ingress.set_nhop", [b"\x02"])])
        assert len(_route_entries(svc)) == kept + 1
        d.close()
    finally:
        server.stop(grace=None)


def test_concurrent_writers_lose_and_duplicate_nothing(served):
    """Bounded load: 4 writers × 2,000 entries in batches of 200 through one
    primary's election id (P4Runtime allows many RPCs from the primary)."""
    svc, port = served
    primary = Raw(port, 1)
    writers, per, batch = 4, 2000, 200
    errors: list = []

    def writer(w):
        ch = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = p4r_grpc.P4RuntimeStub(ch)
        try:
            for s in range(0, per, batch):
                ups = [_upd(svc, p4r.Update.INSERT, ROUTE,
                            {"hdr.ipv4.dst": ("lpm", (w << 24 | i << 8).to_bytes(4, "big"), 24)},
                            "ingress.set_nhop", [w.to_bytes(1, "big")]) for i in range(s, s + batch)]
                req = p4r.WriteRequest(device_id=1, updates=ups)
                req.election_id.low = 1
                stub.Write(req, timeout=60)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            ch.close()

    threads = [threading.Thread(target=writer, args=(w + 1,)) for w in range(writers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    dt = time.perf_counter() - t0
    assert not errors
    got = svc.store.entries(ROUTE)
    assert len(got) == writers * per
    vals = sorted(s.entry.matches["ipv4.dst"].value for s in got)
    assert vals == sorted((w << 24 | i << 8) for w in range(1, writers + 1) for i in range(per))
    print(f"{writers} writers: {writers * per} entries in {dt:.2f} s ({writers * per / dt:.0f} writes/s)")
    primary.close()


def test_synapse_state_extern(served):
    svc, port = served
    c = Raw(port, 1)
    c.write([_upd(svc, p4r.Update.INSERT, ROUTE, {"hdr.ipv4.dst": ("lpm", b"\x0a\x00\x00\x00", 8)}, "ingress.set_nhop", [b"\x01"])])
    svc.store.lookup(ROUTE, [{"ipv4.dst": 0x0A000001}, {"ipv4.dst": 0x0B000001}])
    req = p4r.ReadRequest(device_id=1)
    req.entities.add().extern_entry.extern_type_id = SYNAPSE_STATE_EXTERN
    from google.protobuf import struct_pb2

    out = {}
    for r in c.stub.Read(req):
        for e in r.entities:
            s = struct_pb2.Struct()
            e.extern_entry.entry.Unpack(s)
            out[s["table"]] = s
    assert set(out) == {"ingress.fwd", ROUTE, "ingress.acl"}
    assert out[ROUTE]["entries"] == 1 and out[ROUTE]["lookups"] == 2 and out[ROUTE]["hit_rate"] == 0.5
    c.close()


def test_upf_pipeline_with_finsy(shared_data, tmp_path):
    """Push UPF through finsy, write 10,000 generated entries of its biggest
    writable table, read them back, and see lookups hit them; then delete."""
    upf = shared_data / "p4" / "up4-bmv2.json"
    svc = P4RuntimeServer(None, sizes={})
    server, port = make_server(svc, "127.0.0.1:0")
    try:
        prog = read_program(upf)
        name = max((t for t in prog.tables.values() if not t.const_entries and t.kind == "simple"),
                   key=lambda t: t.info.key_bits).name
        spec = prog.tables[name]
        entries = gen_table(spec, 10_000, seed=3)
        rng = random.Random(2)

        async def run():
            sw = _switch(upf, port, tmp_path)
            async with sw:
                svc.store._tables[name].size = max(svc.store._tables[name].size, len(entries))
                idx = svc.pipeline.index
                t = next(t for t in idx.tables.values() if t.spec.name == name)
                ups = []
                for e in entries:
                    u = p4r.Update(type=p4r.Update.INSERT)
                    u.entity.table_entry.CopyFrom(svc._encode(svc.pipeline, t, e))
                    ups.append(u)
                await sw.write(ups)
                back = [x async for x in sw.read(fy.P4TableEntry(name))]
                assert len(back) == len(entries)
                rows = [sample_key(e, spec, rng) for e in entries[:300]]
                snap = svc.store.snapshot()[name]
                got = svc.store.lookup(name, rows)
                assert [g.key() for g in got] == [snap.lookup(r).key() for r in rows]
                await sw.write([p4r.Update(type=p4r.Update.DELETE, entity=u.entity) for u in ups])
                assert [x async for x in sw.read(fy.P4TableEntry(name))] == []
                assert all(g is None for g in svc.store.lookup(name, rows))

        asyncio.run(run())
    finally:
        server.stop(grace=None)


def test_serve_command_binds_loopback_and_stops_on_sigterm(prog):
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-m", "synapse_vmt.cli", "serve", "--p4", str(prog), "--listen", "127.0.0.1:0"],
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        assert line.startswith("P4Runtime on 127.0.0.1:"), line
        port = int(line.split()[2].rsplit(":", 1)[1])
        c = Raw(port, 1)
        assert c.first.arbitration.status.code == 0
        c.close()
    finally:
        p.terminate()
        rc = p.wait(10)
        p.stderr.close()
    assert rc == 0


def test_tls_with_client_certificates(tmp_path, prog):
    """--cert/--key/--ca: a client with a certificate the CA signed connects;
    one without a client certificate is refused."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        requires.unavailable("openssl is not installed")

    def run(*args):
        subprocess.run(["openssl", *args], cwd=tmp_path, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
        "-subj", "/CN=test-ca")
    for who in ("server", "client"):
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{who}.key", "-out", f"{who}.csr", "-subj", "/CN=localhost")
        (tmp_path / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        run("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{who}.pem", "-days", "1", "-extfile", "ext.cnf")
    svc = P4RuntimeServer(prog)
    server, port = make_server(svc, "127.0.0.1:0", cert=str(tmp_path / "server.pem"), key=str(tmp_path / "server.key"),
                               ca=str(tmp_path / "ca.pem"))
    try:
        ca = (tmp_path / "ca.pem").read_bytes()
        good = grpc.ssl_channel_credentials(ca, (tmp_path / "client.key").read_bytes(), (tmp_path / "client.pem").read_bytes())
        with grpc.secure_channel(f"127.0.0.1:{port}", good) as ch:
            r = p4r_grpc.P4RuntimeStub(ch).Capabilities(p4r.CapabilitiesRequest(), timeout=10)
            assert r.p4runtime_api_version == "1.4.0"
        with grpc.secure_channel(f"127.0.0.1:{port}", grpc.ssl_channel_credentials(ca)) as ch:
            with pytest.raises(grpc.RpcError) as ei:
                p4r_grpc.P4RuntimeStub(ch).Capabilities(p4r.CapabilitiesRequest(), timeout=10)
            assert ei.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        server.stop(grace=None)


def test_background_traffic_follows_the_writes(prog):
    """With --traffic, lookups run while a client writes: before any entry
    nothing is looked up; after inserts the hit rate climbs to about the
    share of keys drawn from entries; after the deletes every lookup misses."""
    svc = P4RuntimeServer(prog, traffic=2000)
    server, port = make_server(svc, "127.0.0.1:0")
    try:
        c = Raw(port, 1)
        c.write([_upd(svc, p4r.Update.INSERT, ROUTE, {"hdr.ipv4.dst": ("lpm", bytes([10, i, 0, 0]), 16)},
                      "ingress.set_nhop", [b"\x01"]) for i in range(50)])
        deadline = time.time() + 20
        while svc.store.stats()[ROUTE]["lookups"] < 500 and time.time() < deadline:
            time.sleep(0.05)
        s = svc.store.stats()[ROUTE]
        assert s["lookups"] >= 500 and 0.8 <= s["hit_rate"] <= 0.97  # 90% drawn to hit (+ random hits)
        pk, by = (sum(getattr(e, f) for e in svc.store.entries(ROUTE)) for f in ("packets", "bytes"))
        assert pk > 0 and 64 * pk < by < 1500 * pk  # IMIX lengths: bytes counted too
        c.write([_upd(svc, p4r.Update.DELETE, ROUTE, {"hdr.ipv4.dst": ("lpm", bytes([10, i, 0, 0]), 16)})
                 for i in range(50)])
        before = svc.store.stats()[ROUTE]
        time.sleep(0.3)  # an empty table gets no traffic: counts stay
        assert svc.store.stats()[ROUTE]["lookups"] == before["lookups"]
        c.close()
    finally:
        svc.traffic.stop()
        server.stop(grace=None)


# --- the simulated Synapse as the target (serve --sim) ---

ACL5 = "ingress.acl5"


def _sim_prog(tmp_path) -> Path:
    """The tiny program plus a ClassBench-shaped table (5-tuple key)."""
    prog = json.loads(json.dumps(PROGRAM))
    prog["pipelines"][0]["tables"][2]["next_tables"] = {a: ACL5 for a in ["ingress.permit", "ingress.deny"]}
    prog["pipelines"][0]["tables"][2]["base_default_next"] = ACL5
    prog["pipelines"][0]["tables"].append(_table(ACL5, [
        ("ternary", "hdr.ipv4.src", ["ipv4", "src"]), ("ternary", "hdr.ipv4.dst", ["ipv4", "dst"]),
        ("range", "hdr.l4.sport", ["l4", "sport"]), ("range", "hdr.l4.dport", ["l4", "dport"]),
        ("ternary", "hdr.ipv4.proto", ["ipv4", "proto"])], [4, 5], None, 4, 1024))
    p = tmp_path / "acl5.json"
    p.write_text(json.dumps(prog))
    return p


@pytest.mark.parametrize("invalidate", ["exact", "none"])
def test_sim_target_gets_the_writes_as_rule_updates(tmp_path, invalidate):
    """serve --sim: finsy writes on the simulated table reach the running
    simulator as rule updates (each committed once), the versioned oracle
    finds no stale or wrong answer while traffic flows, and the catch-all
    entry changes the answers the PMUs had cached (they are invalidated).
    With invalidation off (the test hook) the same writes leave stale cached
    answers, which the oracle counts: the writes did change the matches."""
    from synapse_vmt.scenario import load

    prog = _sim_prog(tmp_path)
    scn = tmp_path / "scn.toml"
    scn.write_text(f'duration_ns = 100000000.0\n[pmus]\ncount = 4\n[update_engine]\ninvalidate = "{invalidate}"\n'
                   '[[tables]]\nname = "acl5"\nrules = {generate = {type = "acl", count = 200, seed = 3}}\n')
    svc = P4RuntimeServer(prog, sim=load(scn), sim_speed=2e6)
    server, port = make_server(svc, "127.0.0.1:0")
    assert list(svc.sim.tables) == [ACL5] and svc.sim.tables[ACL5] == "acl5"
    assert ROUTE not in svc.sim.tables and "ingress.acl" not in svc.sim.tables  # not the 5-tuple shape

    def state() -> dict:
        req = p4r.ReadRequest(device_id=1)
        req.entities.add().extern_entry.extern_type_id = SYNAPSE_STATE_EXTERN
        from google.protobuf import json_format, struct_pb2

        for r in svc.Read(req, None):
            for e in r.entities:
                s = struct_pb2.Struct()
                e.extern_entry.entry.Unpack(s)
                if s["table"] == ACL5:
                    return json_format.MessageToDict(s)["sim"]
        raise AssertionError("no state of the simulated table")

    def wait(cond, what: str, limit: float = 20.0) -> dict:
        deadline = time.time() + limit
        while time.time() < deadline:
            s = state()
            if cond(s):
                return s
            time.sleep(0.05)
        raise AssertionError(f"{what}: {state()}")

    try:
        wait(lambda s: s["keys"] > 0, "traffic flows")
        before = state()
        assert before["updates_requested"] == 0 and before["pmus"] == 4
        assert before["optimizer"] == {"enabled": False}  # the API's default: the scenario's PMUs stay

        entries = [fy.P4TableEntry(ACL5, match=fy.P4TableMatch(src=(0x0A000000 + (i << 8), 0xFFFFFF00), dport=(80, 80 + i)),
                                   action=fy.P4TableAction("permit"), priority=10 + i) for i in range(20)]
        catch_all = fy.P4TableEntry(ACL5, action=fy.P4TableAction("deny", reason=1), priority=1000)

        async def run():
            async with _switch(prog, port, tmp_path) as sw:
                await sw.insert(entries)
                await sw.insert([catch_all])
                await sw.modify([fy.P4TableEntry(ACL5, match=entries[3].match, action=fy.P4TableAction("deny", reason=2),
                                                 priority=entries[3].priority)])
                await sw.delete(entries[:5])
                await sw.insert([fy.P4TableEntry(ROUTE, match=fy.P4TableMatch(dst="10.0.0.0/8"),
                                                 action=fy.P4TableAction("set_nhop", nhop=1))])  # not simulated
                back = [e async for e in sw.read(fy.P4TableEntry(ACL5))]
                assert len(back) == 16

        asyncio.run(run())
        writes = 20 + 1 + 1 + 5
        assert svc.sim.forwarded == writes
        s = wait(lambda s: s["updates_committed"] == writes, "every write committed in the simulator")
        s = wait(lambda s: s["keys"] > before["keys"] + 1000, "traffic after the writes")
        assert s["updates_requested"] == writes and s["updates_rejected"] == 0
        assert s["wrong_action"] == 0 and s["update_latency_ns_p99"] > 0
        if invalidate == "exact":
            assert s["stale_answers"] == 0
            assert s["invalidated"] > 0  # the catch-all changed cached answers: the PMUs dropped them
        else:
            s = wait(lambda s: s["stale_answers"] > 0, "stale answers without invalidation")
            assert s["invalidated"] == 0
    finally:
        svc.stop()
        server.stop(grace=None)


def test_serve_sim_bad_scenario_is_one_line_error(tmp_path, prog):
    bad = tmp_path / "bad.toml"
    bad.write_text("[pmus]\ncount = -1\n")
    r = CliRunner().invoke(main, ["serve", "--p4", str(prog), "--sim", str(bad), "--listen", "127.0.0.1:0"])
    assert r.exit_code == 2 and str(bad) in r.output and "pmus.count" in r.output, r.output


# --- serve --sim: the runtime optimizer in the loop; RECONCILE_AND_COMMIT ---

ACLA, ACLB = "ingress.acla", "ingress.aclb"
FIVE_TUPLE = [("ternary", "hdr.ipv4.src", ["ipv4", "src"]), ("ternary", "hdr.ipv4.dst", ["ipv4", "dst"]),
              ("range", "hdr.l4.sport", ["l4", "sport"]), ("range", "hdr.l4.dport", ["l4", "dport"]),
              ("ternary", "hdr.ipv4.proto", ["ipv4", "proto"])]


def _two_acl_prog(tmp_path) -> Path:
    """The tiny program plus two ClassBench-shaped tables in a row."""
    prog = json.loads(json.dumps(PROGRAM))
    tabs = prog["pipelines"][0]["tables"]
    tabs[2]["next_tables"] = {a: ACLA for a in ["ingress.permit", "ingress.deny"]}
    tabs[2]["base_default_next"] = ACLA
    tabs.append(_table(ACLA, FIVE_TUPLE, [4, 5], ACLB, 4, 1024))
    tabs.append(_table(ACLB, FIVE_TUPLE, [4, 5], None, 4, 1024))
    p = tmp_path / "acl2.json"
    p.write_text(json.dumps(prog))
    return p


def _state(port: int) -> dict:
    """Synapse's state extern through a real gRPC client: {P4 table: struct}."""
    from google.protobuf import json_format, struct_pb2

    ch = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        req = p4r.ReadRequest(device_id=1)
        req.entities.add().extern_entry.extern_type_id = SYNAPSE_STATE_EXTERN
        out = {}
        for r in p4r_grpc.P4RuntimeStub(ch).Read(req, timeout=10):
            for e in r.entities:
                s = struct_pb2.Struct()
                e.extern_entry.entry.Unpack(s)
                d = json_format.MessageToDict(s)
                out[d["table"]] = d
        return out
    finally:
        ch.close()


def _wait(port: int, cond, what: str, limit: float = 60.0) -> dict:
    deadline = time.time() + limit
    while time.time() < deadline:
        s = _state(port)
        if cond(s):
            return s
        time.sleep(0.05)
    raise AssertionError(f"{what}: {_state(port)}")


SHIFT_NS = 1_500_000.0

SHIFT_SCENARIO = f"""
duration_ns = 20000000.0
[pmus]
count = 8
ii_cycles = 16
[[tables]]
name = "acla"
rules = {{generate = {{type = "acl", count = 300, seed = 3}}}}
[[tables]]
name = "aclb"
rules = {{generate = {{type = "acl", count = 300, seed = 4}}}}
[entry]
acla = 0.9
aclb = 0.1
[[mix]]
at_ns = {SHIFT_NS}
entry = {{acla = 0.1, aclb = 0.9}}
[traffic]
flows = 53000
max_bytes = 1e6
"""


def test_serve_sim_optimizer_moves_pmus_to_the_loaded_table(tmp_path):
    """serve --sim with the runtime optimizer: the traffic enters acla (90 %)
    until SHIFT_NS, then aclb (90 %). Read through the state extern, the
    optimizer's allocation gives the loaded table more PMUs than the other,
    before and after the shift, and PMUs moved; every period has a solve time
    and the solver's objective. A finsy write still goes to the simulator."""
    from synapse_vmt.opt.simopt import OptConfig
    from synapse_vmt.scenario import load

    prog = _two_acl_prog(tmp_path)
    scn = tmp_path / "shift.toml"
    scn.write_text(SHIFT_SCENARIO)
    svc = P4RuntimeServer(prog, sim=load(scn), sim_speed=2e6, sim_opt=OptConfig(period_ns=100_000.0))
    server, port = make_server(svc, "127.0.0.1:0")
    try:
        assert set(svc.sim.tables) == {ACLA, ACLB}
        # finsy pushes its pipeline (the simulator restarts; the capacity
        # models are kept) and writes an entry on the simulated aclb
        asyncio.run(_finsy(prog, port, tmp_path, lambda sw: sw.insert(
            [fy.P4TableEntry(ACLB, action=fy.P4TableAction("deny", reason=1), priority=5)])))

        def opt(s):
            return s[ACLA]["sim"]["optimizer"]

        s = _wait(port, lambda s: opt(s)["periods"] >= 14, "the control periods before the shift")
        hist = opt(s)["history"]
        assert all(h["solve_us"] > 0 and h["objective_mpps"] > 0 for h in hist)
        pre = [h for h in hist if 500_000.0 < h["t_ns"] <= SHIFT_NS]
        assert pre and all(h["pmus"]["acla"] > h["pmus"]["aclb"] for h in pre), pre
        s = _wait(port, lambda s: opt(s)["history"][-1]["t_ns"] >= SHIFT_NS + 1_500_000.0, "1.5 ms after the shift")
        hist = opt(s)["history"]
        post = [h for h in hist if h["t_ns"] > SHIFT_NS + 700_000.0]
        assert post and all(h["pmus"]["aclb"] > h["pmus"]["acla"] for h in post), post
        assert opt(s)["pmu_moves"] > 0
        # the PMUs the simulator's tables hold follow the allocation
        last = hist[-1]["pmus"]
        assert s[ACLB]["sim"]["pmus"] >= last["aclb"] - 1 and s[ACLA]["sim"]["pmus"] <= last["acla"] + 1
        assert s[ACLB]["sim"]["updates_committed"] == 1 and s[ACLB]["sim"]["wrong_action"] == 0
        assert s[ACLB]["sim"]["stale_answers"] == 0
        first = next(h["t_ns"] for h in hist if h["t_ns"] > SHIFT_NS and h["pmus"]["aclb"] > h["pmus"]["acla"])
        sol = sorted(h["solve_us"] for h in hist)
        print(f"serve --sim optimizer: period 100 us; before the shift {pre[-1]['pmus']}, after {post[-1]['pmus']}; "
              f"aclb ahead {(first - SHIFT_NS) / 1e3:.0f} us after the shift; {opt(s)['pmu_moves']} PMU moves; "
              f"solve p50 {sol[len(sol) // 2]:.0f} us, max {sol[-1]:.0f} us; calibration "
              f"{sum(c['wall_s'] for c in opt(s)['calibration'].values()):.1f} s")
    finally:
        svc.stop()
        server.stop(grace=None)


def test_reconcile_keeps_the_simulator_and_its_rules_follow_the_store(tmp_path):
    """RECONCILE_AND_COMMIT of the same program keeps the store's entries and
    the running simulator (not restarted: simulated time goes on), so deletes
    and modifies of entries written before the reconcile reach the simulator
    at the right positions: every write commits there, none is rejected, the
    versioned oracle sees no stale or wrong answer, and the simulator's
    P4Runtime rules are the store's, in match order. A VERIFY_AND_COMMIT of a
    new pipeline empties the store and restarts the simulator."""
    from synapse_vmt.scenario import load

    prog = _sim_prog(tmp_path)
    scn = tmp_path / "scn.toml"
    scn.write_text('duration_ns = 100000000.0\n[pmus]\ncount = 4\n'
                   '[[tables]]\nname = "acl5"\nrules = {generate = {type = "acl", count = 200, seed = 3}}\n')
    svc = P4RuntimeServer(prog, sim=load(scn), sim_speed=2e6)
    server, port = make_server(svc, "127.0.0.1:0")
    entries = [fy.P4TableEntry(ACL5, match=fy.P4TableMatch(src=(0x0A000000 + (i << 8), 0xFFFFFF00), dport=(80, 80 + i)),
                               action=fy.P4TableAction("permit"), priority=10 + i % 4) for i in range(12)]

    def sim_state():
        return _state(port)[ACL5]["sim"]

    try:
        asyncio.run(_finsy(prog, port, tmp_path, lambda sw: sw.insert(entries)))
        sim_before = svc.sim
        s = _wait(port, lambda s: s[ACL5]["sim"]["updates_committed"] == 12, "the inserts committed")
        t_before = s[ACL5]["sim"]["sim_time_ns"]
        # the reconcile, from a raw controller: same device config, P4Info and cookie
        c = Raw(port, 10)
        cur = c.stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(device_id=1))
        req = p4r.SetForwardingPipelineConfigRequest(device_id=1, action=p4r.SetForwardingPipelineConfigRequest.RECONCILE_AND_COMMIT)
        req.election_id.low = 10
        req.config.CopyFrom(cur.config)
        c.stub.SetForwardingPipelineConfig(req)
        c.close()
        assert svc.sim is sim_before and len(svc.store.entries(ACL5)) == 12
        assert sim_state()["sim_time_ns"] >= t_before

        async def change(sw):
            await sw.delete(entries[:4])
            await sw.modify([fy.P4TableEntry(ACL5, match=e.match, action=fy.P4TableAction("deny", reason=3), priority=e.priority)
                             for e in entries[6:8]])
        asyncio.run(_finsy(prog, port, tmp_path, change))
        assert svc.sim is sim_before  # finsy saw its own pipeline: no push
        writes = 12 + 4 + 2
        assert svc.sim.forwarded == writes
        s = _wait(port, lambda s: s[ACL5]["sim"]["updates_committed"] == writes, "the deletes and modifies committed")
        s = s[ACL5]["sim"]
        assert s["updates_requested"] == writes and s["updates_rejected"] == 0
        assert s["stale_answers"] == 0 and s["wrong_action"] == 0
        # the simulator's P4Runtime rules, in position order, are the store's in match order
        store = sorted(svc.store.entries(ACL5), key=lambda x: -x.entry.priority)
        assert sorted(svc.sim.positions.order[ACL5]) == sorted(x.entry.key() for x in store)
        pos = {k: i for i, k in enumerate(svc.sim.positions.order[ACL5])}
        assert all(pos[a.entry.key()] < pos[b.entry.key()] for a, b in zip(store, store[1:])
                   if a.entry.priority > b.entry.priority)

        # a new pipeline (VERIFY_AND_COMMIT, another cookie): empty store, new simulator
        c = Raw(port, 10)
        req.action = p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
        req.config.cookie.cookie = cur.config.cookie.cookie + 1
        c.stub.SetForwardingPipelineConfig(req)
        c.close()
        assert svc.sim is not sim_before and svc.store.entries(ACL5) == [] and svc.sim.positions.order[ACL5] == []
    finally:
        svc.stop()
        server.stop(grace=None)


async def _finsy(prog, port, tmp_path, fn):
    """One finsy session (connect, become primary, push the pipeline unless
    the device has it with finsy's cookie) running ``fn(switch)``."""
    async with _switch(prog, port, tmp_path) as sw:
        await fn(sw)


def test_serve_command_runs_the_optimizer_with_highs(tmp_path):
    """``synapse serve --sim ... --opt-solver milp``: the command prints the
    optimizer's calibration, and the state extern shows HiGHS solving each
    period (the same allocations as the fast solver would give: opt tests)."""
    import subprocess
    import sys

    prog = _two_acl_prog(tmp_path)
    scn = tmp_path / "shift.toml"
    scn.write_text(SHIFT_SCENARIO)
    p = subprocess.Popen([sys.executable, "-m", "synapse_vmt.cli", "serve", "--p4", str(prog), "--listen", "127.0.0.1:0",
                          "--sim", str(scn), "--opt-solver", "milp", "--opt-period-ns", "200000"],
                         stderr=subprocess.PIPE, text=True)
    try:
        lines = [p.stderr.readline() for _ in range(3)]
        assert lines[0].startswith("P4Runtime on 127.0.0.1:"), lines
        assert lines[1].startswith("simulated tables: ingress.acla, ingress.aclb"), lines
        assert lines[2].startswith("runtime optimizer: every 200000 ns simulated (milp)"), lines
        port = int(lines[0].split()[2].rsplit(":", 1)[1])
        s = _wait(port, lambda s: s[ACLA]["sim"]["optimizer"]["periods"] >= 3, "three periods")
        o = s[ACLB]["sim"]["optimizer"]
        assert o["enabled"] and o["solver"] == "milp" and o["period_ns"] == 200000
        assert all(h["solve_us"] > 0 and sum(h["pmus"].values()) <= 8 for h in o["history"])
        assert set(o["calibration"]) == {"acla", "aclb"}
    finally:
        p.terminate()
        rc = p.wait(20)
        p.stderr.close()
    assert rc == 0


def test_serve_opt_period_shorter_than_a_window_is_one_line_error(tmp_path):
    prog = _two_acl_prog(tmp_path)
    scn = tmp_path / "shift.toml"
    scn.write_text(SHIFT_SCENARIO)
    r = CliRunner().invoke(main, ["serve", "--p4", str(prog), "--sim", str(scn), "--opt-period-ns", "5000",
                                  "--listen", "127.0.0.1:0"])
    assert r.exit_code == 2 and "--opt-period-ns 5000: shorter than the scenario's window_ns 10000" in r.output, r.output


def test_serve_optimizer_loop_fast_and_highs_agree(tmp_path):
    """The serve loop's optimizer fed slice by slice (no server), once with the
    fast solver and once with HiGHS on the same seeded run: the same
    allocation every period (both are exact), the PMUs follow the shift, and
    the oracle finds no wrong answer. Prints solve times and drops beside the
    scenario's static even split (the figures of docs/explanation/perf-control-plane.md)."""
    import numpy as np

    from synapse_vmt.opt.simopt import OptConfig, ServeOptimizer, calibrate
    from synapse_vmt.scenario import load
    from synapse_vmt.sim import Simulation

    p = tmp_path / "shift.toml"
    p.write_text(SHIFT_SCENARIO)
    scn = load(p)
    cal = calibrate(scn, OptConfig())
    end = SHIFT_NS + 1_500_000.0
    runs = {}
    for solver in ("fast", "milp"):
        sim = Simulation(scn)
        opt = ServeOptimizer(sim, scn, OptConfig(solver=solver), cal)
        while sim.now_ns() < end - 1:
            t = sim.now_ns() + 20_000.0
            while True:  # the serve thread's loop: slices end at period ends
                stop = min(t, opt.next_stop())
                sim.run_until(stop)
                opt.after_slice(sim.core.windows(), sim.core.edges())
                if stop >= t:
                    break
        inv = sim.check_invariants()
        assert inv["wrong_action"] == 0 and inv["lost"] == 0
        runs[solver] = (opt.history, inv)
    fast, milp = (runs[s][0] for s in ("fast", "milp"))
    assert len(fast) == len(milp) == int((end - opt.t_skip) / 100_000.0)  # periods after the warm-up
    assert [h["pmus"] for h in fast] == [h["pmus"] for h in milp]
    assert all(abs(a["objective_mpps"] - b["objective_mpps"]) <= 1e-6 * max(1.0, a["objective_mpps"])
               for a, b in zip(fast, milp))
    after = [h["pmus"] for h in fast if h["t_ns"] > SHIFT_NS + 200_000.0]
    assert after and all(a["aclb"] > a["acla"] for a in after)
    static = Simulation(scn)
    static.run_until(end)
    si = static.check_invariants()
    med = {s: float(np.median([h["solve_us"] for h in runs[s][0]])) for s in runs}
    drops = {s: 100.0 * runs[s][1]["dropped"] / runs[s][1]["created"] for s in runs}
    print(f"optimizer loop: solve p50 fast {med['fast']:.0f} us, milp {med['milp']:.0f} us; drops {drops['fast']:.1f} % "
          f"(static even split {100.0 * si['dropped'] / si['created']:.1f} %); mean PMUs held "
          f"{np.mean([sum(h['pmus_held'].values()) for h in fast]):.1f} of 8")


def test_action_profile_members_groups_and_selector_entries(tmp_path):
    """Members and groups written through P4Runtime back a selector table (the
    stateful test program's route); what is read back is what was written; the
    interpreter picks among the group's members in creation order; a member in
    use cannot be deleted."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    import dpkt

    from p4stateful import program
    from synapse_vmt.p4.interp import Program

    path = tmp_path / "stateful.json"
    path.write_text(json.dumps(program()))
    svc = P4RuntimeServer(path)
    server, port = make_server(svc, "127.0.0.1:0")
    try:
        idx = svc.pipeline.index
        (pid, prof), = idx.profiles.items()
        assert prof.name == "route_sel" and prof.with_selector
        route = next(t for t in idx.tables.values() if t.spec.name == "ingress.route")
        assert route.profile == pid
        set_port = next(i for i, a in idx.actions.items() if a.info.name == "ingress.set_port")
        c = Raw(port, 1)
        stub = c.stub

        def write(*updates):
            c.write(list(updates))

        def member(mid, port_, kind=p4r.Update.INSERT):
            u = p4r.Update(type=kind)
            m = u.entity.action_profile_member
            m.action_profile_id, m.member_id = pid, mid
            m.action.action_id = set_port
            m.action.params.add(param_id=1, value=bytes([port_]))
            return u

        def group(gid, mids, kind=p4r.Update.INSERT):
            u = p4r.Update(type=kind)
            g = u.entity.action_profile_group
            g.action_profile_id, g.group_id = pid, gid
            for m in mids:
                g.members.add(member_id=m, weight=1)
            return u

        def entry(prefix, **ref):
            u = _upd(svc, p4r.Update.INSERT, "ingress.route", {"ipv4.dstAddr": ("lpm", prefix, 8)})
            a = u.entity.table_entry.action
            if "group" in ref:
                a.action_profile_group_id = ref["group"]
            else:
                a.action_profile_member_id = ref["member"]
            return u

        # members 30 (port 13), 10 (port 1), 20 (port 12) created in that order; group 7 = {10, 20, 30}
        write(member(30, 13), member(10, 1), member(20, 12), group(7, [10, 20, 30]),
              entry(b"\x0a\x00\x00\x00", group=7), entry(b"\x14\x00\x00\x00", member=10))
        got = svc.store.snapshot()["ingress.route"]
        by_prefix = {e.matches["ipv4.dstAddr"].value >> 24: e for e in got.entries}
        assert by_prefix[10].group == (("ingress.set_port", {"port": 13}), ("ingress.set_port", {"port": 1}),
                                       ("ingress.set_port", {"port": 12}))
        assert by_prefix[20].group is None and by_prefix[20].params == {"port": 1}
        # read back: the entries name their group and member; the group its members
        req = p4r.ReadRequest(device_id=1)
        req.entities.add().table_entry.table_id = route.id
        req.entities.add().action_profile_group.action_profile_id = pid
        ents = [e for r in stub.Read(req) for e in r.entities]
        refs = sorted((e.table_entry.action.WhichOneof("type"), e.table_entry.action.action_profile_group_id
                       or e.table_entry.action.action_profile_member_id) for e in ents if e.HasField("table_entry"))
        assert refs == [("action_profile_group_id", 7), ("action_profile_member_id", 10)]
        groups = [e.action_profile_group for e in ents if e.HasField("action_profile_group")]
        assert [(g.group_id, [m.member_id for m in g.members]) for g in groups] == [(7, [10, 20, 30])]
        # in use: refused (P4Runtime: FAILED_PRECONDITION); an unknown group: NOT_FOUND
        for u, code in [(member(10, 1, p4r.Update.DELETE), "FAILED_PRECONDITION"),
                        (group(7, [10], p4r.Update.DELETE), "FAILED_PRECONDITION"),
                        (entry(b"\x1e\x00\x00\x00", group=8), "NOT_FOUND")]:
            with pytest.raises(grpc.RpcError) as ei:
                write(u)
            assert _errors(ei.value) == [getattr(grpc.StatusCode, code).value[0]]
        # the interpreter on the written entries: a selector pick per packet, in creation order
        prog = Program(program(), "stateful.json")
        ports = []
        for sport in range(40):
            u = dpkt.udp.UDP(sport=sport, dport=80, data=b"x")
            ip = dpkt.ip.IP(src=b"\xc0\xa8\x00\x01", dst=b"\x0a\x00\x00\x01", p=17, data=u)
            tr = prog.run([bytes(dpkt.ethernet.Ethernet(data=ip, type=0x0800))], svc.store.snapshot())
            ports.append(next(s.key[0] for s in tr.packet(0) if s.table == "egress.eg"))
        from synapse_vmt.p4.hashes import hasher, pack_bits
        want = [[13, 1, 12][hasher("crc16")(pack_bits([(0xC0A80001, 32), (sp, 16)])) % 3] for sp in range(40)]
        assert ports == want and set(ports) == {13, 1, 12}
        c.close()
    finally:
        server.stop(grace=None)


# --- hardening: what a careless or hostile client (or user) must not break ---


def test_second_serve_on_a_busy_port_fails_with_one_line(prog, served, monkeypatch):
    """No SO_REUSEPORT: a second server on the port of a running one does
    not start (it would otherwise take half of the new connections)."""
    from synapse_vmt.errors import UserError
    from synapse_vmt.p4rt import server as server_mod

    _, port = served
    r = CliRunner().invoke(main, ["serve", "--p4", str(prog), "--listen", f"127.0.0.1:{port}"])
    assert r.exit_code == 2, r.output
    assert r.output.strip().splitlines() == [f"synapse: error: --listen 127.0.0.1:{port}: cannot bind: "
                                             "Address already in use"]
    # gRPC's own bind (without the up-front check) refuses too: SO_REUSEPORT is off.
    monkeypatch.setattr(server_mod, "_check_bind", lambda listen: None)
    with pytest.raises(UserError, match="cannot bind"):
        make_server(P4RuntimeServer(prog), f"127.0.0.1:{port}")


@pytest.mark.parametrize("listen, why", [
    ("nonsense", "expected HOST:PORT"),
    ("127.0.0.1:99999", "port '99999' is not a number in 0..65535"),
    ("127.0.0.1:-1", "port '-1' is not a number"),
    (":9559", "expected HOST:PORT"),
    ("192.0.2.1:9559", "cannot bind: Cannot assign requested address"),  # TEST-NET: not this host's
])
def test_serve_bad_listen_is_one_line_exit_2(prog, listen, why):
    r = CliRunner().invoke(main, ["serve", "--p4", str(prog), "--listen", listen])
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"synapse: error: --listen ") and why in lines[0], lines


def test_entry_metadata_reads_back_and_unstored_fields_are_refused(tmp_path, prog, served):
    """TableEntry.metadata is returned as written (and as modified), through
    finsy; an idle timeout or a meter config on a table without them is
    INVALID_ARGUMENT, not OK-and-dropped."""
    svc, port = served

    async def run():
        async with _switch(prog, port, tmp_path) as sw:
            await sw.insert([fy.P4TableEntry(ROUTE, match=fy.P4TableMatch(dst=_route(i)[0]),
                                             action=fy.P4TableAction("set_nhop", nhop=i),
                                             metadata=f"cookie-{i}".encode()) for i in range(3)])
            await sw.modify([fy.P4TableEntry(ROUTE, match=fy.P4TableMatch(dst=_route(1)[0]),
                                             action=fy.P4TableAction("set_nhop", nhop=7), metadata=b"\x00changed")])
            got = [e async for e in sw.read(fy.P4TableEntry(ROUTE))]
            back = {e.action.args["nhop"]: e.metadata for e in got}
            assert back == {0: b"cookie-0", 7: b"\x00changed", 2: b"cookie-2"}
            for extra in ({"idle_timeout_ns": 10**9}, {"meter_config": fy.P4MeterConfig(cir=1, cburst=1, pir=2, pburst=2)}):
                with pytest.raises(fy.P4ClientError) as ei:
                    await sw.insert([fy.P4TableEntry(ROUTE, match=fy.P4TableMatch(dst=_route(9)[0]),
                                                     action=fy.P4TableAction("set_nhop", nhop=9), **extra)])
                assert ei.value.code == fy.GRPCStatusCode.UNKNOWN  # a batch error; the update's own code:
                assert [d.canonical_code for d in ei.value.details.values()] == [3]  # INVALID_ARGUMENT
            assert len(svc.store.entries(ROUTE)) == 3

    asyncio.run(run())


def test_no_election_id_is_a_backup_that_cannot_write(served):
    """A controller that arbitrates without an election id is a backup (as
    in Stratum): told so, refused its writes, and told who the primary is
    once one arrives."""
    svc, port = served
    nobody = Raw(port, None)
    assert nobody.first.arbitration.status.code == 6  # ALREADY_EXISTS: backup, not primary
    u = _upd(svc, p4r.Update.INSERT, ROUTE, {"hdr.ipv4.dst": ("lpm", b"\x0a\x00\x00\x00", 8)}, "ingress.set_nhop", [b"\x01"])
    with pytest.raises(grpc.RpcError) as ei:
        nobody.write([u])
    assert ei.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert _route_entries(svc) == set()
    primary = Raw(port, 3)
    assert primary.first.arbitration.status.code == 0
    told = next(nobody.stream).arbitration
    assert told.status.code == 6 and told.election_id.low == 3
    with pytest.raises(grpc.RpcError) as ei:
        nobody.write([u])
    assert ei.value.code() == grpc.StatusCode.PERMISSION_DENIED
    primary.write([u])
    assert len(_route_entries(svc)) == 1
    primary.close()
    nobody.close()


def test_100k_upf_sessions_read_by_finsy_in_messages_under_4mib(shared_data, tmp_path):
    """A read of 100,000 UPF downlink sessions (about 4.5 MB of entries)
    streams in several ReadResponses, each under the 4 MiB a client accepts
    by default: finsy (default limits) and the raw stub (4 MiB receive cap)
    get every session back."""
    from synapse_vmt.p4.entries import Entry, Match
    from synapse_vmt.p4rt.store import Op

    upf = shared_data / "p4" / "up4-bmv2.json"
    name, n = "PreQosPipe.sessions_downlink", 100_000
    svc = P4RuntimeServer(None, sizes={name: n})
    server, port = make_server(svc, "127.0.0.1:0")
    try:
        ue = [0x0A000000 + 7 * i for i in range(n)]  # distinct UE addresses

        def fill_and_read_raw():
            _, errs = svc.store.apply([Op("insert", name, Entry(
                name, {"ipv4.dst_addr": Match("exact", a)}, "PreQosPipe.set_session_downlink",
                {"tunnel_peer_id": i % 256, "session_meter_idx": i}, None, "t")) for i, a in enumerate(ue)])
            assert not any(errs)
            tid = next(t.id for t in svc.pipeline.index.tables.values() if t.spec.name == name)
            with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_receive_message_length", 4 << 20)]) as ch:
                req = p4r.ReadRequest(device_id=1)
                req.entities.add().table_entry.table_id = tid
                return [(r.ByteSize(), len(r.entities)) for r in p4r_grpc.P4RuntimeStub(ch).Read(req, timeout=60)]

        async def run():
            async with _switch(upf, port, tmp_path) as sw:  # finsy pushes the pipeline, then the store is filled
                sizes = fill_and_read_raw()
                return sizes, [(e.match["ue_address"], e.action.args["session_meter_idx"])
                               async for e in sw.read(fy.P4TableEntry("sessions_downlink"))]

        sizes, got = asyncio.run(run())
        assert sum(k for _, k in sizes) == n and len(sizes) > 1 and sum(b for b, _ in sizes) > 4 << 20
        assert max(b for b, _ in sizes) < 4 << 20
        assert sorted(got) == [(a, i) for i, a in enumerate(ue)]
    finally:
        server.stop(grace=None)


# p4c's own P4Info of UP4 (as published in omec-project/upf's pfcpiface tests): ids an independent
# compiler gave, to check ours against. (name, P4Info field, id)
P4C_UP4_IDS = [
    ("PreQosPipe.Acl.acls", "tables", 47204971), ("PreQosPipe.sessions_downlink", "tables", 34742049),
    ("PreQosPipe.Routing.routes_v4", "tables", 39015874), ("PreQosPipe.my_station", "tables", 40931612),
    ("PreQosPipe.set_session_downlink", "actions", 21848329), ("NoAction", "actions", 21257015),
    ("PreQosPipe.pre_qos_counter", "counters", 315693181), ("PostQosPipe.post_qos_counter", "counters", 302958180),
    ("acls", "direct_counters", 325583051), ("PreQosPipe.app_meter", "meters", 338231090),
]


def test_upf_p4info_declares_counters_and_meters_with_p4c_ids(shared_data):
    info = build_p4info(read_program(shared_data / "p4" / "up4-bmv2.json"))
    for name, kind, want in P4C_UP4_IDS:
        got = {x.preamble.name: x.preamble.id for x in getattr(info, kind)}
        assert got.get(name) == want, (name, kind)
    assert [(c.preamble.name, c.size, c.spec.unit) for c in info.counters] == [
        ("PostQosPipe.post_qos_counter", 1024, 3), ("PreQosPipe.pre_qos_counter", 1024, 3)]  # 3: BOTH
    assert sorted((m.preamble.name, m.size, m.spec.unit) for m in info.meters) == [
        ("PreQosPipe.app_meter", 1024, 1), ("PreQosPipe.session_meter", 1024, 1),
        ("PreQosPipe.slice_tc_meter", 64, 1)]  # 1: BYTES
    acls = next(t for t in info.tables if t.preamble.name == "PreQosPipe.Acl.acls")
    assert list(acls.direct_resource_ids) == [325583051] and info.direct_counters[0].direct_table_id == acls.preamble.id
    assert acls.preamble.alias == "Acl.acls"  # as p4c: "acls" is the direct counter's alias


def test_direct_counters_count_bytes(tmp_path, prog, served):
    """byte_count, read through finsy, is the sum of the lengths of the
    packets that hit each entry (the linear oracle says which entry)."""
    svc, port = served
    rng = random.Random(5)

    async def run():
        async with _switch(prog, port, tmp_path) as sw:
            await sw.insert([fy.P4TableEntry(ROUTE, match=fy.P4TableMatch(dst=_route(i)[0]),
                                             action=fy.P4TableAction("set_nhop", nhop=i)) for i in range(20)])
            snap = svc.store.snapshot()[ROUTE]
            spec = svc.pipeline.prog.tables[ROUTE]
            rows = [sample_key(rng.choice(snap.entries), spec, rng) for _ in range(300)]
            rows += [{"ipv4.dst": rng.getrandbits(32)} for _ in range(30)]
            sizes = [rng.choice((64, 576, 1500)) for _ in rows]
            svc.store.lookup(ROUTE, rows, sizes)
            want: dict = {}
            for r, n in zip(rows, sizes):
                e = snap.lookup(r)
                if e is not None:
                    c = want.setdefault(e.params["nhop"], [0, 0])
                    c[0], c[1] = c[0] + 1, c[1] + n
            got = {e.action.args["nhop"]: [e.counter_data.packet_count, e.counter_data.byte_count]
                   async for e in sw.read(fy.P4TableEntry(ROUTE, counter_data=fy.P4CounterData()))
                   if e.counter_data.packet_count}
            assert got == want and sum(b for _, b in got.values()) > 0

    asyncio.run(run())


@pytest.mark.parametrize("atomicity, at, kept", [
    (p4r.WriteRequest.ROLLBACK_ON_ERROR, 30_000, 0),  # all or nothing: a cancel before the swap leaves nothing
    (p4r.WriteRequest.DATAPLANE_ATOMIC, 30_000, 0),
    (p4r.WriteRequest.CONTINUE_ON_ERROR, 29_999, 29_999),  # each update stands alone: those before the cancel stay
])
def test_write_cancelled_after_its_last_update(prog, atomicity, at, kept):
    """The client cancels a 30,000-update Write at the end (the test hook
    cancels there): once every update is applied to an atomic batch's copy
    but before it is swapped in, nothing is applied; a CONTINUE_ON_ERROR
    batch cancelled before its last update keeps the updates before (as the
    spec allows, and the docs say)."""
    n, seen = 30_000, {}

    def cancel_at_the_end(i, context):
        if i != at:
            return
        seen["future"].cancel()
        deadline = time.monotonic() + 10
        while context.is_active() and time.monotonic() < deadline:
            time.sleep(0.002)
        seen["inactive"] = not context.is_active()

    svc = P4RuntimeServer(prog, sizes={ROUTE: n}, before_update=cancel_at_the_end)
    server, port = make_server(svc, "127.0.0.1:0")
    try:
        c = Raw(port, 1)
        ups = [_upd(svc, p4r.Update.INSERT, ROUTE, {"hdr.ipv4.dst": ("lpm", (0x0A000000 | i << 8).to_bytes(4, "big"), 24)},
                    "ingress.set_nhop", [b"\x01"]) for i in range(n)]
        req = p4r.WriteRequest(device_id=1, updates=ups, atomicity=atomicity)
        req.election_id.low = 1
        seen["future"] = c.stub.Write.future(req)
        with pytest.raises(grpc.FutureCancelledError):
            seen["future"].result(timeout=60)
        deadline = time.monotonic() + 60
        while "inactive" not in seen and time.monotonic() < deadline:
            time.sleep(0.01)
        assert seen.get("inactive"), "the server never saw the cancel"
        with svc.store.lock:  # taken once the Write is done
            assert len(svc.store.entries(ROUTE)) == kept
        c.close()
    finally:
        server.stop(grace=None)


OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]  # channels of one process otherwise share one


def test_500_idle_streams_do_not_lock_out_the_primary(prog):
    """500 StreamChannels that never arbitrate (50 connections × 10) hold no
    server thread: the primary arbitrates after them and makes 200 single
    writes (10 s deadline each), and a Read answers, while they stay open."""
    from synapse_vmt.p4rt.server import StreamLimits

    svc = P4RuntimeServer(prog, limits=StreamLimits(arbitration_timeout=120))
    server, port = make_server(svc, "127.0.0.1:0")

    async def run():
        chans = [grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=OWN_CONNECTION) for _ in range(50)]
        idle = [p4r_grpc.P4RuntimeStub(ch).StreamChannel() for ch in chans for _ in range(10)]
        try:
            deadline = time.monotonic() + 30
            while len(svc.streams) < 500 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert len(svc.streams) == 500
            return await asyncio.to_thread(primary_writes)
        finally:
            for call in idle:
                call.cancel()
            for ch in chans:
                await ch.close()

    def primary_writes():
        c = Raw(port, 7)
        assert c.first.arbitration.status.code == 0
        t0 = time.perf_counter()
        for i in range(200):
            c.write([_upd(svc, p4r.Update.INSERT, ROUTE, {"hdr.ipv4.dst": ("lpm", bytes([10, i, 0, 0]), 16)},
                          "ingress.set_nhop", [b"\x01"])], timeout=10)
        dt = time.perf_counter() - t0
        req = p4r.ReadRequest(device_id=1)
        req.entities.add().table_entry.table_id = next(t.id for t in svc.pipeline.index.tables.values()
                                                       if t.spec.name == ROUTE)
        assert sum(len(r.entities) for r in c.stub.Read(req, timeout=10)) == 200
        c.close()
        return dt

    try:
        dt = asyncio.run(run())
        print(f"with 500 idle streams: 200 single writes in {dt:.2f} s ({200 / dt:.0f} writes/s)")
    finally:
        server.stop(grace=None)


def test_stream_limits_refuse_clearly_and_silent_streams_time_out(prog):
    """Past the per-connection or the total bound a new stream is refused
    with RESOURCE_EXHAUSTED; a stream that never arbitrates is closed with
    DEADLINE_EXCEEDED, which frees its place for a real controller."""
    from synapse_vmt.p4rt.server import StreamLimits

    svc = P4RuntimeServer(prog, limits=StreamLimits(max_streams=6, per_peer=3, arbitration_timeout=1.0))
    server, port = make_server(svc, "127.0.0.1:0")

    async def run():
        async def status(call):
            try:
                async for _ in call:
                    pass
            except grpc.aio.AioRpcError as e:
                return e.code(), e.details()
            return await call.code(), ""

        a, b, c = (grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=OWN_CONNECTION) for _ in range(3))
        try:
            first = [p4r_grpc.P4RuntimeStub(a).StreamChannel() for _ in range(3)]
            while len(svc.streams) < 3:
                await asyncio.sleep(0.02)
            code, why = await status(p4r_grpc.P4RuntimeStub(a).StreamChannel())  # a 4th on one connection
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "too many streams from" in why
            more = [p4r_grpc.P4RuntimeStub(b).StreamChannel() for _ in range(3)]
            while len(svc.streams) < 6:
                await asyncio.sleep(0.02)
            code, why = await status(p4r_grpc.P4RuntimeStub(c).StreamChannel())  # a 7th in all
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "too many streams (6 open)" in why
            for call in first + more:  # silent: closed after the arbitration timeout
                code, why = await status(call)
                assert code == grpc.StatusCode.DEADLINE_EXCEEDED and "no arbitration message" in why
            deadline = time.monotonic() + 10  # the server forgets them once their handlers finish
            while svc.streams and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert len(svc.streams) == 0
        finally:
            for ch in (a, b, c):
                await ch.close()

    try:
        asyncio.run(run())
        ctl = Raw(port, 1)  # the places are free again
        assert ctl.first.arbitration.status.code == 0
        ctl.close()
    finally:
        server.stop(grace=None)


def test_table_size_option_raises_the_p4_size(prog):
    """--table-size lifts a table's cap above its P4 `size` (4 for the ACL
    here): the store takes 6 entries, refuses the 7th; bad values are one line."""
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-m", "synapse_vmt.cli", "serve", "--p4", str(prog), "--listen", "127.0.0.1:0",
                          "--table-size", "acl=6", "--table-size", "100"], stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        port = int(line.split()[2].rsplit(":", 1)[1])
        c = Raw(port, 1)
        idx = P4RuntimeServer(prog)  # the same ids (a local copy, to build updates)

        def rule(i):
            return _upd(idx, p4r.Update.INSERT, "ingress.acl", {"hdr.ipv4.proto": ("exact", bytes([i]))},
                        "ingress.permit", priority=1)

        c.write([rule(i) for i in range(1, 7)])
        with pytest.raises(grpc.RpcError) as ei:
            c.write([rule(7)])
        assert _errors(ei.value) == [8]  # RESOURCE_EXHAUSTED at 6
        c.write([_upd(idx, p4r.Update.INSERT, "ingress.fwd", {"hdr.eth.dst": ("exact", bytes([i + 1]))},
                      "ingress.set_port", [b"\x01"]) for i in range(100)])  # fwd (P4 size 64) takes 100
        c.close()
    finally:
        p.terminate()
        p.wait(10)
        p.stderr.close()
    for bad, why in [("acl=0", "expected [TABLE=]N"), ("nosuch=5", "has no table 'nosuch'"), ("x", "expected")]:
        r = CliRunner().invoke(main, ["serve", "--p4", str(prog), "--table-size", bad])
        assert r.exit_code == 2 and why in r.output and len(r.output.strip().splitlines()) == 1, r.output


@pytest.mark.parametrize("client", [None, "python"])
def test_bench_p4rt_reports_rates_and_checks_the_inserts_landed(client):
    r = CliRunner().invoke(main, ["bench", "p4rt", "--p4", str(Path(__file__).parent / "data" / "p4" / "router.json"),
                                  "--entries", "300", "--batch", "100", "--singles", "20", "--json",
                                  *(["--client", client] if client else [])])
    assert r.exit_code == 0, r.output
    rec = json.loads(r.output)
    assert rec["table"] == "MyIngress.acl" and rec["entries"] == 300
    assert rec["transport"] == "rust" and rec["client"] == (client or "rust")
    assert 0 < rec["pipelined_p50_ms"] <= rec["pipelined_p99_ms"]
    assert all(rec[k] > 0 for k in ("batched_inserts_per_s", "batched_deletes_per_s", "single_writes_per_s",
                                    "single_writes_pipelined_per_s"))
    assert 0 < rec["single_p50_ms"] <= rec["single_p99_ms"]


def test_frontend_sets_the_peer_a_client_cannot_spoof(prog):
    """Behind the Rust front end the stream limits count the client's real
    connection: a client that sends its own ``x-synapse-peer`` on each stream
    is still refused past the per-connection bound."""
    from synapse_vmt.p4rt.server import StreamLimits

    svc = P4RuntimeServer(prog, limits=StreamLimits(per_peer=2, arbitration_timeout=30))
    server, port = make_server(svc, "127.0.0.1:0")
    assert server.frontend is not None  # the default transport

    async def run():
        ch = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=OWN_CONNECTION)
        stub = p4r_grpc.P4RuntimeStub(ch)
        try:
            calls = [stub.StreamChannel(metadata=(("x-synapse-peer", f"spoofed-{i}"),)) for i in range(2)]
            while len(svc.streams) < 2:
                await asyncio.sleep(0.02)
            third = stub.StreamChannel(metadata=(("x-synapse-peer", "spoofed-2"),))
            with pytest.raises(grpc.aio.AioRpcError) as ei:
                async for _ in third:
                    pass
            assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "too many streams from ipv4:127.0.0.1:" in ei.value.details()
            for c in calls:
                c.cancel()
        finally:
            await ch.close()

    try:
        asyncio.run(run())
    finally:
        server.stop(grace=None)


@pytest.mark.parametrize("transport", ["rust", "grpc"])
def test_both_transports_write_refuse_and_read_alike(prog, transport):
    """The Rust front end and the grpc.aio server alone (``--transport``)
    give the same answers: a batch with a duplicate fails with per-update
    errors in the status details, a backup is refused, bytes that are no
    WriteRequest are refused, and the entries read back."""
    svc = P4RuntimeServer(prog)
    server, port = make_server(svc, "127.0.0.1:0", transport=transport)
    try:
        assert (server.frontend is not None) == (transport == "rust")
        a, b = Raw(port, 2), Raw(port, 1)
        ups = [_upd(svc, p4r.Update.INSERT, ROUTE, {"hdr.ipv4.dst": ("lpm", bytes([10, i, 0, 0]), 16)},
                    "ingress.set_nhop", [b"\x01"]) for i in range(3)]
        a.write(ups[:2])
        with pytest.raises(grpc.RpcError) as ei:
            a.write(ups[1:])
        assert ei.value.code() == grpc.StatusCode.UNKNOWN and _errors(ei.value) == [6, 0]  # ALREADY_EXISTS, OK
        with pytest.raises(grpc.RpcError) as ei:
            b.write(ups[:1])
        assert ei.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.RpcError) as ei:
            a.ch.unary_unary("/p4.v1.P4Runtime/Write")(b"\xff\xff\xff", timeout=10)
        assert ei.value.code() != grpc.StatusCode.OK
        req = p4r.ReadRequest(device_id=1)
        req.entities.add().table_entry.table_id = next(t.id for t in svc.pipeline.index.tables.values()
                                                       if t.spec.name == ROUTE)
        got = {e.table_entry.match[0].lpm.value for r in a.stub.Read(req, timeout=10) for e in r.entities}
        assert got == {bytes([10, i, 0, 0]) for i in range(3)}
        a.close()
        b.close()
    finally:
        server.stop(grace=None)


def test_serve_refuses_a_spin_that_is_no_number(prog):
    import os
    import subprocess
    import sys

    env = dict(os.environ, SYNAPSE_SERVE_SPIN_US="soon")
    p = subprocess.run([sys.executable, "-m", "synapse_vmt.cli", "serve", "--p4", str(prog), "--listen", "127.0.0.1:0"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == ["synapse: error: SYNAPSE_SERVE_SPIN_US=soon: not a whole number of µs"]

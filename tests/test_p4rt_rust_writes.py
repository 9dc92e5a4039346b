"""Writes through the Rust front end's hot path (``_core.Frontend`` ->
``WriteDecoder`` -> ``_core.apply_items``) seen by a raw gRPC client, and
the Rust benchmark client (``_core.BenchClient``).

Oracle: a dict of what the client wrote, updated by the P4Runtime rules
(INSERT of an existing entry -> ALREADY_EXISTS, INSERT past the table's cap
-> RESOURCE_EXHAUSTED, MODIFY/DELETE of a missing one -> NOT_FOUND; an
atomic batch with an error applies nothing, its other updates ABORTED).
Every Write's per-update codes must be the oracle's, and the table read
back must equal it, Write after Write. No update may reach the Python
decoder: these are all well-formed plain table entries."""

from __future__ import annotations

import random

import grpc
import pytest
from finsy.proto import p4r

from synapse_vmt import _core
from synapse_vmt.p4rt.server import P4RuntimeServer, make_server
from test_p4rt import ROUTE, Raw, _errors, _upd, prog  # noqa: F401 - prog: the fixture

W = p4r.WriteRequest
OK, NOT_FOUND, ALREADY_EXISTS, RESOURCE_EXHAUSTED, ABORTED = 0, 5, 6, 8, 10
CAP = 12  # the route table's cap here: some inserts find it full


@pytest.fixture
def front(prog):
    svc = P4RuntimeServer(prog, sizes={ROUTE: CAP})
    server, port = make_server(svc, "127.0.0.1:0")  # the default transport: the Rust front end
    assert server.frontend is not None
    slow = []
    decode = svc._decode_update

    def python_decoder(p, u):  # the reference decoder: must not be needed here
        slow.append(u)
        return decode(p, u)

    svc._decode_update = python_decoder
    yield svc, port, slow
    server.stop(grace=None)


def _expect(oracle: dict, batch: list, atomic: bool) -> tuple[list[int], dict]:
    """The per-update codes and the table after ``batch`` of (kind, prefix, nhop, metadata)."""
    table = dict(oracle)
    codes = []
    for kind, key, nhop, meta in batch:
        if kind == "insert":
            code = ALREADY_EXISTS if key in table else RESOURCE_EXHAUSTED if len(table) >= CAP else OK
        else:
            code = OK if key in table else NOT_FOUND
        if code == OK:
            if kind == "delete":
                del table[key]
            else:
                table[key] = (nhop, meta)
        codes.append(code)
    if atomic and any(codes):
        return [c or ABORTED for c in codes], oracle
    return codes, table


def _read(c: Raw, svc) -> dict:
    req = p4r.ReadRequest(device_id=1)
    req.entities.add().table_entry.table_id = next(t.id for t in svc.pipeline.index.tables.values()
                                                   if t.spec.name == ROUTE)
    out = {}
    for r in c.stub.Read(req, timeout=30):
        for e in r.entities:
            te = e.table_entry
            key = (te.match[0].lpm.value, te.match[0].lpm.prefix_len)
            assert key not in out
            out[key] = (int.from_bytes(te.action.action.params[0].value, "big"), te.metadata)
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_random_batches_read_back_as_the_oracle(front, seed):
    svc, port, slow = front
    rng = random.Random(seed)
    c = Raw(port, 1)
    oracle: dict = {}
    kinds = {"insert": p4r.Update.INSERT, "modify": p4r.Update.MODIFY, "delete": p4r.Update.DELETE}
    seen = set()
    for _ in range(60):
        batch = []
        for _ in range(rng.choice([1, 1, 2, 5, 20])):
            kind = rng.choices(list(kinds), [5, 2, 2])[0]
            i = rng.randrange(20)  # a small key space: entries collide
            key = (bytes([10, i, 0, 0]), 16) if i % 2 else (bytes([10, i, 7, 0]), 24)
            batch.append((kind, key, rng.randrange(1 << 16), rng.randbytes(rng.randrange(3))))
        atomicity = rng.choice([W.CONTINUE_ON_ERROR, W.ROLLBACK_ON_ERROR, W.DATAPLANE_ATOMIC])
        ups = []
        for kind, (value, plen), nhop, meta in batch:
            u = _upd(svc, kinds[kind], ROUTE, {"hdr.ipv4.dst": ("lpm", value, plen)},
                     *(("ingress.set_nhop", [nhop.to_bytes(2, "big")]) if kind != "delete" else ()))
            u.entity.table_entry.metadata = meta
            ups.append(u)
        codes, oracle = _expect(oracle, batch, atomicity != W.CONTINUE_ON_ERROR)
        try:
            c.write(ups, atomicity)
            got = [OK] * len(ups)
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNKNOWN, e.details()
            got = _errors(e)
        assert got == codes
        seen.update(codes)
        assert _read(c, svc) == oracle
    assert {OK, NOT_FOUND, ALREADY_EXISTS, RESOURCE_EXHAUSTED, ABORTED} <= seen  # every error case came up
    assert slow == []  # every update took the Rust path
    c.close()


def test_backup_and_stale_election_refused_on_the_rust_path(front):
    svc, port, _ = front
    a, b = Raw(port, 5), Raw(port, 3)
    u = _upd(svc, p4r.Update.INSERT, ROUTE, {"hdr.ipv4.dst": ("lpm", b"\x0a\x00\x00\x00", 8)}, "ingress.set_nhop",
             [b"\x01"])
    with pytest.raises(grpc.RpcError) as ei:
        b.write([u])
    assert ei.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as ei:  # no election id at all
        a.stub.Write(p4r.WriteRequest(device_id=1, updates=[u]), timeout=10)
    assert ei.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as ei:
        a.stub.Write(p4r.WriteRequest(device_id=1, updates=[u], atomicity=7, election_id={"low": 5}), timeout=10)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert _read(a, svc) == {}
    a.write([u])
    assert len(_read(a, svc)) == 1
    a.close()
    b.close()


@pytest.mark.parametrize("spin_us", [0, 150])
def test_rust_bench_client_times_writes_and_raises_on_a_refused_one(front, spin_us):
    svc, port, _ = front
    c = Raw(port, 1)
    reqs = []
    for i in range(CAP):
        r = W(device_id=1, updates=[_upd(svc, p4r.Update.INSERT, ROUTE, {"hdr.ipv4.dst": ("lpm", bytes([10, i, 0, 0]), 16)},
                                         "ingress.set_nhop", [b"\x01"])])
        r.election_id.low = 1
        reqs.append(r.SerializeToString())
    bench = _core.BenchClient(port, spin_us)  # 0: sleeps at once waiting for an answer
    total, lat = bench.run("/p4.v1.P4Runtime/Write", reqs[:4], 1)
    assert len(lat) == 4 and all(x > 0 for x in lat) and total >= sum(lat)
    total, lat = bench.run("/p4.v1.P4Runtime/Write", reqs[4:], 4)  # 4 in flight
    assert len(lat) == CAP - 4 and all(0 < x <= total for x in lat)
    assert len(_read(c, svc)) == CAP  # every Write landed
    with pytest.raises(RuntimeError, match="Unknown: write failed|ALREADY_EXISTS|exists"):
        bench.run("/p4.v1.P4Runtime/Write", reqs[:1], 1)  # a duplicate: the status comes back as an error
    _, lat = bench.run("/p4.v1.P4Runtime/Capabilities", [b""] * 3, 2)
    assert len(lat) == 3
    c.close()

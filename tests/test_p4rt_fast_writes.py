"""The Rust fast path for P4Runtime table writes (``_core.WriteDecoder``)
against the Python decoder, its reference: the same random Writes (valid and
malformed updates, every match kind, atomic and not) go to a server that
decodes every update in Python (``fast_writes=False``) and to one that
decodes through Rust, and as bytes to the Rust front end's entry point
(``write_raw``); each Write must end the same way (status, message,
per-update errors) and leave the same store (keys, entries, metadata,
order), Write after Write."""

from __future__ import annotations

import json
import random
import types

import grpc
import pytest
from finsy.proto import p4r, rpc_status

from synapse_vmt.p4rt.server import P4RuntimeServer, _Abort, _SyncContext
from synapse_vmt.p4rt.store import key_bytes
from test_p4rt import PROGRAM

W = p4r.WriteRequest


@pytest.fixture
def servers(tmp_path):
    p = tmp_path / "tiny.json"
    prog = json.loads(json.dumps(PROGRAM))
    for t in prog["pipelines"][0]["tables"]:
        t["max_size"] = 24  # small: some inserts find the table full
    p.write_text(json.dumps(prog))
    out = []
    for fast in (False, True, True):  # the reference, Write through Rust, the front end's write_raw
        svc = P4RuntimeServer(p, fast_writes=fast)
        svc.primary = 1  # as if its controller (election id 1) had arbitrated
        out.append(svc)
    yield out
    for svc in out:
        svc.stop()


def _value(rng, width: int) -> bytes:
    """Mostly a small value (so entries collide), sometimes an odd encoding."""
    r = rng.random()
    if r < 0.03:
        return b""
    if r < 0.06:
        return (1 << width).to_bytes((width + 8) // 8, "big")  # one bit too wide
    v = rng.randrange(4) if rng.random() < 0.8 else rng.getrandbits(width)
    n = max(1, (v.bit_length() + 7) // 8) + (1 if rng.random() < 0.1 else 0)  # some with a leading zero byte
    return v.to_bytes(n, "big")


def _field_match(rng, fm, kf):
    kind = kf.match if rng.random() > 0.03 else rng.choice(["exact", "lpm", "ternary", "range", "optional"])
    w = kf.width
    if kind == "exact":
        fm.exact.value = _value(rng, w)
    elif kind == "optional":
        fm.optional.value = _value(rng, w)
    elif kind == "lpm":
        pl = rng.choice([w, w // 2, 1, rng.randrange(-1, w + 2)])
        v = int.from_bytes(_value(rng, w) or b"\0", "big")
        if rng.random() < 0.9 and 0 < pl <= w:
            v &= ((1 << w) - 1) ^ ((1 << (w - pl)) - 1)
        fm.lpm.value, fm.lpm.prefix_len = v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big"), pl
    elif kind == "ternary":
        mask = rng.choice([(1 << w) - 1, 0xF0, 0x0F, 0, rng.getrandbits(w)]) & ((1 << w) - 1)
        v = rng.randrange(256) & (mask if rng.random() < 0.9 else (1 << w) - 1)
        fm.ternary.value = v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big")
        fm.ternary.mask = mask.to_bytes(max(1, (mask.bit_length() + 7) // 8), "big") if rng.random() > 0.02 else b""
    else:
        lo, hi = sorted(rng.randrange(4) for _ in range(2))
        if rng.random() < 0.05:
            lo, hi = hi + 1, lo
        fm.range.low, fm.range.high = lo.to_bytes(1, "big"), hi.to_bytes(1, "big")


def _update(rng, svc) -> p4r.Update:
    """A random update of one of the program's tables, now and then malformed."""
    idx = svc.pipeline.index
    t = rng.choice(list(idx.tables.values()))
    u = p4r.Update(type=rng.choice([W.CONTINUE_ON_ERROR + 1] * 5 + [2, 2, 3, 3, 3] + [0] * (rng.random() < 0.02)))
    te = u.entity.table_entry
    te.table_id = t.id if rng.random() > 0.01 else 0x777
    for fid, (kf, _) in sorted(t.fields.items()):
        if kf.match != "exact" and rng.random() < 0.3:
            continue  # a don't-care: omitted
        if kf.match == "exact" and rng.random() < 0.01:
            continue  # an exact field missing
        _field_match(rng, te.match.add(field_id=fid), kf)
    if rng.random() < 0.01:
        te.match.add(field_id=99).exact.value = b"\1"
    if rng.random() < 0.01 and len(te.match):
        te.match.append(te.match[0])  # a field twice
    if t.spec.needs_priority:
        te.priority = rng.choice([1, 2, 3, 0x10000, 0 if rng.random() < 0.05 else 1])
    elif rng.random() < 0.02:
        te.priority = 1
    if rng.random() > 0.02:
        aid = rng.choice(list(t.actions)) if rng.random() > 0.02 else 0x999
        a = te.action.action
        a.action_id = aid
        widths = [p.width for p in t.actions[aid].info.params] if aid in t.actions else [4]
        for i, w in enumerate(widths, 1):
            if rng.random() < 0.02:
                continue  # a param missing
            a.params.add(param_id=i if rng.random() > 0.02 else 7, value=_value(rng, w))
        if widths and rng.random() < 0.02:
            a.params.add(param_id=1, value=b"\1")  # a param twice
    r = rng.random()
    if r < 0.05:
        te.metadata = rng.randbytes(rng.randrange(1, 6))
    elif r < 0.06:
        te.idle_timeout_ns = 5
    elif r < 0.07:
        te.meter_config.cir = 1
    elif r < 0.08:
        te.is_default_action = True
        te.ClearField("match")
    elif r < 0.09:
        m = p4r.Update(type=1)
        m.entity.action_profile_member.action_profile_id = 5  # another entity: no profile here
        return m
    return u


def _write(svc, req) -> tuple:
    """What the Write answers: OK, an abort, or the batch error with its per-update errors."""
    ctx = _SyncContext(types.SimpleNamespace(peer=lambda: "test"))
    try:
        svc.Write(req, ctx)
    except _Abort as e:
        return ("abort", e.code, e.details)
    if ctx.code is None:
        return ("ok",)
    st = rpc_status.Status.FromString(dict(ctx.trailing)["grpc-status-details-bin"])
    errs = []
    for d in st.details:
        err = p4r.Error()
        d.Unpack(err)
        errs.append((err.canonical_code, err.message))
    return (ctx.code, ctx.details, st.code, st.message, errs)


def _write_raw(svc, req) -> tuple:
    """What the Rust front end's entry point (``write_raw``: the request's
    bytes in, a status out) answers, in ``_write``'s terms."""
    call = types.SimpleNamespace(is_active=lambda: True, peer=lambda: "test")
    got = svc.write_raw(req.SerializeToString(), call)
    if got is None:
        return ("ok",)
    code, details, status = got
    code = next(c for c in grpc.StatusCode if c.value[0] == code)
    if status is None:
        return ("abort", code, details)
    st = rpc_status.Status.FromString(status)
    errs = []
    for d in st.details:
        err = p4r.Error()
        d.Unpack(err)
        errs.append((err.canonical_code, err.message))
    return (code, details, st.code, st.message, errs)


def _contents(svc) -> dict:
    out = {}
    for name, t in svc.store._tables.items():
        out[name] = (t.version, t.default, [(k, s.seq, s.entry, s.metadata) for k, s in t.entries.items()])
    return out


@pytest.mark.parametrize("seed", range(4))
def test_fast_writes_answer_and_store_as_the_python_decoder(servers, seed):
    ref, fast, raw = servers
    rng = random.Random(seed)
    took = total = 0
    for _ in range(80):
        req = W(device_id=1, atomicity=rng.choice([W.CONTINUE_ON_ERROR] * 3 + [W.ROLLBACK_ON_ERROR, W.DATAPLANE_ATOMIC]))
        req.election_id.low = 1
        for _ in range(rng.choice([1, 1, 5, 40])):
            req.updates.append(_update(rng, ref))
        took += sum(x is not None for x in fast.pipeline.decoder.decode(req.SerializeToString()))
        total += len(req.updates)
        want = _write(ref, req)
        assert _write(fast, req) == want
        assert _write_raw(raw, req) == want
        assert _contents(fast) == _contents(ref) == _contents(raw)
    # every stored key is the key of the entry the Python decoder builds from the stored bytes
    for t in fast.store._tables.values():
        assert all(k == key_bytes(s.entry) for k, s in t.entries.items())
    print(took, total, {n: len(t.entries) for n, t in fast.store._tables.items()})
    assert took > total / 2  # the fast path took most updates (and the Python decoder the malformed ones)


def test_store_key_is_entry_key_as_bytes(servers):
    """``key_bytes`` tells entries apart exactly as ``Entry.key()`` does."""
    ref = servers[0]
    rng = random.Random(9)
    entries = []
    for _ in range(3000):
        u = _update(rng, ref)
        try:
            op = ref._decode_update(ref.pipeline, u)
        except Exception:  # noqa: BLE001 - the malformed ones
            continue
        if op is not None and op.kind != "default":
            entries.append(op.entry)
    assert len(entries) > 1000
    by_key = {e.key() for e in entries}
    assert len({key_bytes(e) for e in entries}) == len(by_key)
    assert len({(e.key(), key_bytes(e)) for e in entries}) == len(by_key)

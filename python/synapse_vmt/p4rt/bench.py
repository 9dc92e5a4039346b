"""Write throughput of ``synapse serve``, measured with a raw gRPC client.

The server runs in a process of its own (``synapse serve`` on a free
loopback port), so client and server do not share an interpreter. Every
request is built and serialised before the clock starts; the client sends
the bytes through a raw gRPC method (no protobuf work while timed): by
default the Rust client in the extension (``_core.BenchClient``: HTTP/2
on ``h2``, each request one ``writev``, its socket polled for
``client_spin_us`` before it sleeps), whose few µs per call leave the server the bound, or Python's grpcio
(``client="python"``, 120–180 µs of CPU per call) for comparison. The
arbitration stream is grpcio's either way. Three phases on one table: batched INSERTs (``batch`` updates per Write), the
same entries batched DELETEd, then ``singles`` Writes of one INSERT each
(their latency percentiles too), then ``singles`` more with ``window`` of
them in flight at once (a controller that does not wait for each answer
before it sends the next), then as many Capabilities calls: the rate
of an RPC that does nothing, the transport's bound on single Writes. A Read after the inserts checks that the
server holds every entry, so a server that drops writes cannot report a rate.
The client's own CPU time per single Write (this process, gRPC's threads
included) is reported, and where ``/proc`` tells, the server's CPU time per
update of each phase too: on a loaded machine the rates follow the share of a core the
server gets, its CPU time per update much less so. A second Read at the end
checks the single inserts landed too.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import subprocess
import sys
import threading
import time

import grpc
import numpy as np
from finsy.proto import p4r

from synapse_vmt.errors import UserError
from synapse_vmt.p4.bmv2 import read_program
from synapse_vmt.p4.entrygen import gen_table

WRITE = "/p4.v1.P4Runtime/Write"
CAPABILITIES = "/p4.v1.P4Runtime/Capabilities"
READ = "/p4.v1.P4Runtime/Read"
STREAM = "/p4.v1.P4Runtime/StreamChannel"


def _pick_table(prog, name: str | None):
    if name is not None:
        t = prog.table(name)
        if t is None or t.const_entries:
            raise UserError(f"{prog.path}: no writable table {name!r} (tables: {', '.join(prog.tables)})")
        return t
    writable = [t for t in prog.tables.values() if not t.const_entries and t.kind == "simple"]
    if not writable:
        raise UserError(f"{prog.path}: no writable table")
    return max(writable, key=lambda t: t.info.key_bits)


def _requests(program: str, table, entries, kind: int, batch: int) -> list[bytes]:
    """Serialised WriteRequests (election id 1) of ``batch`` updates each."""
    from synapse_vmt.p4rt.server import P4RuntimeServer

    local = P4RuntimeServer(program)  # the same ids and encoding as the server's
    ref = next(t for t in local.pipeline.index.tables.values() if t.spec.name == table.name)
    out = []
    for i in range(0, len(entries), batch):
        req = p4r.WriteRequest(device_id=1)
        req.election_id.low = 1
        for e in entries[i:i + batch]:
            u = req.updates.add(type=kind)
            u.entity.table_entry.CopyFrom(local._encode(local.pipeline, ref, e))
        out.append(req.SerializeToString())
    local.stop()
    return out


def default_client() -> str:
    """``rust`` where the extension has its benchmark client, else ``python``."""
    from synapse_vmt import _core

    return "rust" if hasattr(_core, "BenchClient") else "python"


def _rust_sender(port: int, spin_us: int = 150):
    """``send(method, requests, window, timeout_s)`` -> (seconds, [latency s]) through
    the Rust client (``_core.BenchClient``): the CPU of a call is Rust's, not Python's."""
    from synapse_vmt import _core

    c = _core.BenchClient(port, spin_us)

    def send(method: str, requests: list[bytes], window: int, timeout_s: float):
        try:
            return c.run(method, requests, window, timeout_s)
        except RuntimeError as e:
            raise UserError(f"synapse serve answered {e}") from None

    return send


def _python_sender(ch):
    """The same as ``_rust_sender`` with Python's grpcio on channel ``ch``."""

    def send(method: str, requests: list[bytes], window: int, timeout_s: float):
        call = ch.unary_unary(method)  # bytes in, bytes out: no protobuf work while timed
        lat = [0.0] * len(requests)
        t0 = time.perf_counter()
        if window == 1:
            for i, r in enumerate(requests):
                t = time.perf_counter()
                call(r, timeout=timeout_s)
                lat[i] = time.perf_counter() - t
            return time.perf_counter() - t0, lat
        pending: collections.deque = collections.deque()

        def done():
            i, t, f = pending.popleft()
            f.result()
            lat[i] = time.perf_counter() - t  # an upper bound: the answer may have come earlier

        for i, r in enumerate(requests):
            if len(pending) >= window:
                done()
            pending.append((i, time.perf_counter(), call.future(r, timeout=timeout_s)))
        while pending:
            done()
        return time.perf_counter() - t0, lat

    return send


def _cpu_s(pid: int) -> float | None:
    """The CPU seconds (user + system) process ``pid`` has used, or None where /proc does not tell."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def bench_p4rt(program: str, table: str | None = None, entries: int = 20_000, batch: int = 1000,
               singles: int = 2000, seed: int = 1, traffic: float = 0.0, transport: str = "rust",
               window: int = 16, client: str | None = None, client_spin_us: int = 150) -> dict:
    """Rates of batched and single Writes to a ``synapse serve`` of ``program``
    (``traffic``: its ``--traffic``, background lookups per second per table;
    ``transport``: its ``--transport``; ``client``: ``rust`` (the default
    where the extension has it) or ``python``; ``client_spin_us``: the Rust
    client's poll of its socket before it sleeps, 0: never)."""
    if client is None:
        client = default_client()
    prog = read_program(program)
    spec = _pick_table(prog, table)
    need = entries + 2 * singles
    big = dataclasses.replace(spec, info=dataclasses.replace(spec.info, max_size=need))
    rows = gen_table(big, need, seed)
    if len(rows) < need:
        raise UserError(f"{spec.name}: its key space holds {len(rows)} entries, fewer than "
                        f"--entries + 2 × --singles = {need}")
    bulk, one, piped = rows[:entries], rows[entries:entries + singles], rows[entries + singles:]
    ins = _requests(program, spec, bulk, p4r.Update.INSERT, batch)
    dels = _requests(program, spec, bulk, p4r.Update.DELETE, batch)
    single = _requests(program, spec, one, p4r.Update.INSERT, 1)
    pipelined = _requests(program, spec, piped, p4r.Update.INSERT, 1)
    read = p4r.ReadRequest(device_id=1)
    read.entities.add().table_entry.table_id = 0

    proc = subprocess.Popen([sys.executable, "-m", "synapse_vmt.cli", "serve", "--p4", program, "--listen",
                             "127.0.0.1:0", "--table-size", f"{spec.name}={need}", "--traffic", str(traffic),
                             "--transport", transport],
                            stderr=subprocess.PIPE, text=True)
    closed = threading.Event()
    try:
        line = proc.stderr.readline()
        if not line.startswith("P4Runtime on "):
            raise UserError(f"synapse serve did not start: {line.strip() or proc.stderr.read().strip()}")
        port = int(line.split()[2].rsplit(":", 1)[1])
        ch = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_receive_message_length", 64 << 20)])
        arb = p4r.StreamMessageRequest()
        arb.arbitration.device_id = 1
        arb.arbitration.election_id.low = 1

        def hello():
            yield arb
            closed.wait()

        stream = ch.stream_stream(STREAM, request_serializer=p4r.StreamMessageRequest.SerializeToString,
                                  response_deserializer=p4r.StreamMessageResponse.FromString)(hello())
        if next(stream).arbitration.status.code != 0:
            raise UserError("the benchmark's controller did not become primary")
        send = _rust_sender(port, client_spin_us) if client == "rust" else _python_sender(ch)
        reads = ch.unary_stream(READ, request_serializer=p4r.ReadRequest.SerializeToString,
                                response_deserializer=p4r.ReadResponse.FromString)

        cpu = [_cpu_s(proc.pid)]
        t_ins, _ = send(WRITE, ins, 1, 120)
        cpu.append(_cpu_s(proc.pid))
        held = sum(len(m.entities) for m in reads(read, timeout=120))
        if held != entries:
            raise UserError(f"the server holds {held} entries after {entries} inserts")
        cpu.append(_cpu_s(proc.pid))
        t_del, _ = send(WRITE, dels, 1, 120)
        cpu.append(_cpu_s(proc.pid))
        client0 = time.process_time()
        _, lat = send(WRITE, single, 1, 60)
        client_us = (time.process_time() - client0) / singles * 1e6
        lat_ms = np.array(lat) * 1e3
        cpu.append(_cpu_s(proc.pid))
        t_piped, lat_piped = send(WRITE, pipelined, window, 60)
        piped_ms = np.array(lat_piped) * 1e3
        cpu.append(_cpu_s(proc.pid))
        t_empty, _ = send(CAPABILITIES, [p4r.CapabilitiesRequest().SerializeToString()] * singles, 1, 60)
        cpu.append(_cpu_s(proc.pid))
        held = sum(len(m.entities) for m in reads(read, timeout=120))
        if held != 2 * singles:
            raise UserError(f"the server holds {held} entries after {2 * singles} single inserts")
        closed.set()
        stream.cancel()
        ch.close()
    finally:
        closed.set()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:  # a server stuck past SIGTERM must not outlive the bench
            proc.kill()
            proc.wait()
        proc.stderr.close()
    return {
        "program": program, "table": spec.name, "entries": entries, "batch": batch, "singles": singles,
        "traffic": traffic, "transport": transport, "client": client,
        "client_spin_us": client_spin_us if client == "rust" else None,
        "batched_inserts_per_s": entries / t_ins, "batched_deletes_per_s": entries / t_del,
        "single_writes_per_s": singles / float(lat_ms.sum() / 1e3),
        "single_p50_ms": float(np.percentile(lat_ms, 50)), "single_p99_ms": float(np.percentile(lat_ms, 99)),
        "client_cpu_us_per_single": client_us, "window": window, "single_writes_pipelined_per_s": singles / t_piped,
        "pipelined_p50_ms": float(np.percentile(piped_ms, 50)), "pipelined_p99_ms": float(np.percentile(piped_ms, 99)),
        "empty_rpcs_per_s": singles / t_empty,
        **_cpu_per_update(cpu, entries, singles),
    }


def _cpu_per_update(cpu: list, entries: int, singles: int) -> dict:
    """Server CPU µs per update of each phase (``cpu``: its CPU seconds at
    the phase boundaries, the Read between inserts and deletes left out)."""
    if any(c is None for c in cpu):
        return {}
    per = [(cpu[1] - cpu[0]) / entries, (cpu[3] - cpu[2]) / entries, (cpu[4] - cpu[3]) / singles,
           (cpu[5] - cpu[4]) / singles, (cpu[6] - cpu[5]) / singles]
    names = ("server_cpu_us_per_insert", "server_cpu_us_per_delete", "server_cpu_us_per_single",
             "server_cpu_us_per_pipelined_single", "server_cpu_us_per_empty_rpc")
    return {n: p * 1e6 for n, p in zip(names, per)}

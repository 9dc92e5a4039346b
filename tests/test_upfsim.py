"""serve --sim with a program scenario: UPF's tables simulated while an
unmodified P4Runtime client (finsy) writes them (p4rt/routedtarget.py,
sim/routed.rs change_routes).

A session entry's action sets the UE address the terminations key on, so a
write changes which tables a packet visits and with which keys; the
simulator's routes must follow, one transaction per Write, and every PHV
must see one version of the tables and of its route."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from finsy.proto import p4r

from synapse_vmt.p4 import upf
from synapse_vmt.p4.bmv2 import read_program
from synapse_vmt.p4.entries import load_entries
from synapse_vmt.p4.interp import Program
from synapse_vmt.p4.simrun import load_scenario, resolve_program
from synapse_vmt.p4rt.p4info import build_p4info, to_text
from synapse_vmt.p4rt.server import P4RuntimeServer, make_server
from test_p4rt import _state as p4rt_state

import finsy as fy  # a core dependency (server.py imports it)

T = upf.T
SU, TU = T + "sessions_uplink", T + "terminations_uplink"


def _scenario(tmp_path: Path, sessions: int = 20, flows: int = 120) -> Path:
    """The UPF example, small: its entries draw the frames (uplink TEIDs and UE
    addresses a controller will install); 20 Mpps of uniform arrivals."""
    (tmp_path / "entries.txt").write_text("\n".join(upf.entries_cli(sessions=sessions)) + "\n")
    text = upf.scenario(str(tmp_path / "scenario.toml"), flows=flows, duration_ns=1e6, pmus=16, shift=False)
    p = tmp_path / "scenario.toml"
    p.write_text(text.replace("seed = 1\n", "seed = 1\nrate_mpps = 20.0\n", 1))
    return p


def _switch(prog: str, port: int, tmp_path: Path):
    p4info = tmp_path / "p4info.txtpb"
    p4info.write_text(to_text(build_p4info(read_program(prog))))
    opts = fy.SwitchOptions(p4info=p4info, p4blob=Path(prog), device_id=1, initial_election_id=10)
    return fy.Switch("s1", f"127.0.0.1:{port}", opts)


def _state(port: int) -> dict:
    """Synapse's state extern through a real gRPC client: {P4 table: sim struct}."""
    return {t: d["sim"] for t, d in p4rt_state(port).items() if "sim" in d}


def _settled(svc, extra_ns: float = 20_000.0, limit: float = 60.0) -> None:
    """Every route change in force, then ``extra_ns`` more of simulated time
    (the PHVs stamped before the last flip have left)."""
    from synapse_vmt import _core

    deadline = time.time() + limit
    sim = svc.sim
    while time.time() < deadline:
        with sim.lock:
            r = _core.route_stats(sim.core)
            now = sim.core.now_ns()
        if r["applied"] == r["requested"]:
            break
        time.sleep(0.02)
    else:
        raise AssertionError(f"route changes not in force: {r}")
    while _now(svc) < now + extra_ns:
        assert time.time() < deadline, "the simulator does not advance"
        time.sleep(0.02)


def _now(svc) -> float:
    with svc.sim.lock:  # the clock thread holds the simulator while it runs
        return svc.sim.core.now_ns()


def _answers(svc, table: str) -> tuple[int, int]:
    """The simulator's P4 answers at ``table``: (entry hits, misses)."""
    st = svc.sim.state(table)
    return st["entry_hits"], st["entry_misses"]


def _keys(svc, table: str) -> int:
    with svc.sim.lock:
        return int(svc.sim.core.summary()["tables"][table]["keys"])


def _profile_updates(svc, entries) -> list:
    """Writes of routes_v4's action-selector members and groups (one group per
    distinct member list); each entry is set to name its group."""
    idx = svc.pipeline.index
    ref = {t.spec.name: t for t in idx.tables.values()}
    (pid, _), = idx.profiles.items()
    members: dict = {}
    groups: dict = {}
    out = []
    for e in entries[T + "Routing.routes_v4"].entries:
        for a, ps in e.group:
            key = (a, tuple(sorted(ps.items())))
            if key not in members:
                members[key] = len(members) + 1
                u = p4r.Update(type=p4r.Update.INSERT)
                m = u.entity.action_profile_member
                m.action_profile_id, m.member_id = pid, members[key]
                aid = svc.pipeline.action_ids[a]
                m.action.action_id = aid
                for i, ap in enumerate(idx.actions[aid].info.params, 1):
                    m.action.params.add(param_id=i, value=ps[ap.name].to_bytes(max(1, (ps[ap.name].bit_length() + 7) // 8), "big"))
                out.append(u)
        gkey = tuple((a, tuple(sorted(ps.items()))) for a, ps in e.group)
        if gkey not in groups:
            groups[gkey] = len(groups) + 1
            u = p4r.Update(type=p4r.Update.INSERT)
            grp = u.entity.action_profile_group
            grp.action_profile_id, grp.group_id = pid, groups[gkey]
            for k in gkey:
                grp.members.add(member_id=members[k], weight=1)
            out.append(u)
        e.ref = ("group", groups[gkey])
    assert ref[T + "Routing.routes_v4"].profile == pid
    return out


def test_serve_sim_upf_routes_and_lookups_follow_the_writes(tmp_path):
    """finsy pushes UP4 and writes its entries (one Write) but one uplink
    session; the flow of that session stops at sessions_uplink while the
    others go on to their terminations. Inserting the session sends it on;
    deleting every uplink session stops all lookups at terminations_uplink;
    inserting them back starts them again. Throughout: the interpreter's
    matched entry on every new hop equals the simulator's versioned oracle,
    0 wrong or stale answers, 0 PHVs of mixed versions (tables or route)."""
    scn = _scenario(tmp_path)
    prog = resolve_program("builtin:up4")
    svc = P4RuntimeServer(None, sizes={}, sim=load_scenario(str(scn)), sim_speed=2e6)
    server, port = make_server(svc, "127.0.0.1:0")
    entries = load_entries(str(tmp_path / "entries.txt"), prog)
    try:
        async def run():
            sw = _switch(prog, port, tmp_path)
            async with sw:
                sim = svc.sim
                assert type(sim).__name__ == "RoutedTarget" and SU in sim.tables and TU in sim.tables
                # The flows' TEIDs: the interpreter over the full entries.
                tr = Program.load(prog).run(sim.frames, entries, seed=1)
                teid = {}
                for f in range(tr.n_packets):
                    for s in tr.packet(f):
                        if s.table == SU:
                            teid[f] = s.key[1]
                f0, g = sorted(teid)[:2]
                assert teid[f0] != teid[g]
                idx = svc.pipeline.index
                ref = {t.spec.name: t for t in idx.tables.values()}

                await sw.write(_profile_updates(svc, entries))

                def update(kind, name, e):
                    u = p4r.Update(type=kind)
                    u.entity.table_entry.CopyFrom(svc._encode(svc.pipeline, ref[name], e))
                    return u

                def is_f0(name, e):
                    return name == SU and e.matches[next(iter(k for k in e.matches if "teid" in k))].value == teid[f0]

                # Nothing installed: every flow stops at my_station.
                _settled(svc, 10_000.0)
                assert sim.flow_tables(f0) == [T + "my_station"]
                assert _keys(svc, SU) == 0
                ins = p4r.Update.INSERT
                first = [update(ins, n, e) for n, te in entries.items() for e in te.entries if not is_f0(n, e)]
                await sw.write(first)
                _settled(svc)
                assert SU in sim.flow_tables(f0) and TU not in sim.flow_tables(f0)
                assert TU in sim.flow_tables(g)
                # f0's session: one Write of one entry sends it on.
                miss = next(e for e in entries[SU].entries if is_f0(SU, e))
                await sw.write([update(ins, SU, miss)])
                _settled(svc)
                assert TU in sim.flow_tables(f0)
                # Every uplink session deleted: no lookup reaches terminations_uplink.
                await sw.write([update(p4r.Update.DELETE, SU, e) for e in entries[SU].entries])
                _settled(svc)
                assert all(TU not in sim.flow_tables(f) for f in teid)
                a, su_a = _keys(svc, TU), _keys(svc, SU)
                (tu_hit, _), (su_hit, su_miss) = _answers(svc, TU), _answers(svc, SU)
                assert tu_hit > 0 and su_hit > 0
                t0 = _now(svc)
                while _now(svc) < t0 + 100_000:
                    await asyncio.sleep(0.02)
                assert _keys(svc, TU) == a and _keys(svc, SU) > su_a
                # The simulator's own answers: no session hit any more, only misses.
                assert _answers(svc, TU)[0] == tu_hit
                assert _answers(svc, SU)[0] == su_hit and _answers(svc, SU)[1] > su_miss
                # ...and back.
                await sw.write([update(ins, SU, e) for e in entries[SU].entries])
                _settled(svc)
                b, (su_hit, _) = _keys(svc, TU), _answers(svc, SU)
                t0 = _now(svc)
                while _now(svc) < t0 + 50_000:
                    await asyncio.sleep(0.02)
                assert _keys(svc, TU) > b and _answers(svc, SU)[0] > su_hit
                assert all(TU in sim.flow_tables(f) for f in teid)

        asyncio.run(run())
        st = _state(port)
        assert set(st) == set(svc.sim.tables)
        s = st[TU]
        r = s["routes"]
        assert s["wrong_action"] == 0 and s["stale_answers"] == 0, s
        assert s["mixed_version_phvs"] == 0 and s["checked_phvs"] > 0, s
        assert s["updates_rejected"] == 0 and s["updates_committed"] == s["updates_requested"] > 0, s
        assert s["flips"] >= 4, s
        assert r["mismatched"] == 0 and r["checked"] > 0 and r["wrong_version_routes"] == 0, r
        assert r["applied"] == r["requested"] > 0 and r["unrouted"] == 0, r
        assert s["keys"] > 0 and 0 < s["hit_rate"] <= 1
    finally:
        server.stop(grace=None)
        svc.stop()


def test_serve_sim_upf_session_writes(tmp_path):
    """The UPF example (1000 sessions, 4000 flows) under serve --sim: finsy
    writes every entry but the uplink sessions in one Write, then installs
    and removes sessions one Write at a time (the session and its uplink
    termination), as a control plane attaching and detaching UEs would.
    Each Write's flows follow (the session's flows reach terminations_uplink
    after the insert, not after the delete); 0 wrong/stale/mixed. Prints the
    writes/s and the simulated update latency (request -> flip) for the
    docs/explanation/perf-control-plane.md: ``pytest tests/test_upfsim.py -k session_writes -s``."""
    from synapse_vmt import _core

    scn = Path(__file__).resolve().parents[1] / "examples" / "upf" / "scenario.toml"
    prog = resolve_program("builtin:up4")
    svc = P4RuntimeServer(None, sizes={}, sim=load_scenario(str(scn)), sim_speed=2e6)
    server, port = make_server(svc, "127.0.0.1:0")
    entries = load_entries(str(scn.parent / "entries.txt"), prog)
    n_sessions = 40
    try:
        async def run():
            sw = _switch(prog, port, tmp_path)
            async with sw:
                sim = svc.sim
                ref = {t.spec.name: t for t in svc.pipeline.index.tables.values()}

                await sw.write(_profile_updates(svc, entries))

                def update(kind, name, e):
                    u = p4r.Update(type=kind)
                    u.entity.table_entry.CopyFrom(svc._encode(svc.pipeline, ref[name], e))
                    return u

                ins, dele = p4r.Update.INSERT, p4r.Update.DELETE
                t0 = time.perf_counter()
                await sw.write([update(ins, n, e) for n, te in entries.items() for e in te.entries if n != SU])
                first_s = time.perf_counter() - t0
                _settled(svc)
                # Uplink flows by session (TEID), from the Python side's routes.
                tr = Program.load(prog).run(sim.frames, entries, seed=1)
                flows_of: dict[int, list[int]] = {}
                for f in range(tr.n_packets):
                    for s in tr.packet(f):
                        if s.table == SU:
                            flows_of.setdefault(s.key[1], []).append(f)
                sessions = [e for e in entries[SU].entries if _teid(e) in flows_of][:n_sessions]
                assert len(sessions) == n_sessions
                w0 = len(sim.write_s)
                t0 = time.perf_counter()
                for e in sessions:
                    await sw.write([update(ins, SU, e)])
                    await sw.write([update(dele, SU, e)])
                dt = time.perf_counter() - t0
                _settled(svc)
                # After the last delete none of those flows reaches terminations_uplink;
                # with the session back (one more Write) they do.
                for e in sessions[:3]:
                    assert all(TU not in sim.flow_tables(f) for f in flows_of[_teid(e)])
                await sw.write([update(ins, SU, e) for e in sessions[:3]])
                _settled(svc)
                for e in sessions[:3]:
                    assert all(TU in sim.flow_tables(f) for f in flows_of[_teid(e)])
                ms = sorted(sim.write_s[w0:w0 + 2 * n_sessions])
                with sim.lock:
                    u = sim.core.update_stats()
                    r = _core.route_stats(sim.core)
                    inv = sim.core.check_invariants()
                print(f"\nUPF example: first Write {sum(len(te.entries) for n, te in entries.items() if n != SU)} "
                      f"entries {first_s:.2f} s; {2 * n_sessions} one-session Writes in {dt:.2f} s = "
                      f"{2 * n_sessions / dt:.0f} writes/s (server side p50 {1e3 * ms[len(ms) // 2]:.1f} ms, "
                      f"max {1e3 * ms[-1]:.1f} ms); simulated update latency p50 {u['latency_ns_p50'] / 1e3:.1f} us "
                      f"p99 {u['latency_ns_p99'] / 1e3:.1f} us; flips {u['flips']}; routes {r}")
                assert inv["wrong_action"] == 0 and inv["stale_answers"] == 0 and inv["lost"] == 0, inv
                assert u["mixed_version_phvs"] == 0 and u["rejected"] == 0, u
                assert r["mismatched"] == 0 and r["wrong_version_routes"] == 0 and r["checked"] > 0, r

        asyncio.run(run())
    finally:
        server.stop(grace=None)
        svc.stop()


def _teid(e) -> int:
    return next(m.value for k, m in e.matches.items() if "teid" in k)


def test_serve_command_with_a_program_scenario(tmp_path):
    """``synapse serve --p4 up4.json --sim scenario.toml``: every table of the
    program simulated; a program scenario without traffic is a one-line error."""
    import subprocess
    import sys

    from click.testing import CliRunner

    from synapse_vmt.cli import main

    scn = _scenario(tmp_path, sessions=4, flows=20)
    prog = resolve_program("builtin:up4")
    p = subprocess.Popen([sys.executable, "-m", "synapse_vmt.cli", "serve", "--p4", prog, "--sim", str(scn),
                          "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
    try:
        assert p.stderr.readline().startswith("P4Runtime on 127.0.0.1:")
        line = p.stderr.readline()
        assert line.startswith("simulated tables: ") and SU in line and TU in line and T + "Acl.acls" in line, line
        line = p.stderr.readline()  # no silent fallback: the optimizer is said not to run here
        assert line.startswith("runtime optimizer: not run"), line
    finally:
        p.terminate()
        rc = p.wait(30)
        p.stderr.close()
    assert rc == 0
    bad = tmp_path / "bad.toml"
    bad.write_text('[program]\np4 = "builtin:up4"\n')
    r = CliRunner().invoke(main, ["serve", "--p4", prog, "--sim", str(bad), "--listen", "127.0.0.1:0"])
    assert r.exit_code == 2 and "[traffic]" in r.output and len(r.output.strip().splitlines()) == 1, r.output

"""Cache flooding (docs/flood.md): attack PHVs counted apart from the
legitimate ones, the [attack] / [defence] settings, and
``synapse reproduce flood --quick``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from synapse_vmt.cli import main
from synapse_vmt.errors import UserError
from synapse_vmt.scenario import load
from synapse_vmt.sim import Simulation, finish_checked

BASE = ["duration_ns=200000", "traffic.flows=240"]


def _run(extra: list[str]) -> dict:
    sim = Simulation(load(None, BASE + extra))
    s = sim.run()
    s["invariants"] = finish_checked(sim)
    return s


def test_attack_phvs_are_counted_apart_from_the_legitimate_ones():
    """The legitimate class of an attacked run is the attack-free run's
    traffic (same arrivals), the classes add up to every PHV, random keys
    never repeat (no attack hit), and every answer is the oracle's."""
    base = _run(["attack.share=0"])
    hit = _run(["attack.share=0.3"])
    assert base["attack"]["arrived"] == 0
    assert hit["legit"]["arrived"] == base["legit"]["arrived"] == base["invariants"]["created"]
    a = hit["attack"]["arrived"] / (hit["attack"]["arrived"] + hit["legit"]["arrived"])
    assert a == pytest.approx(0.3, abs=0.01)
    inv = hit["invariants"]
    assert hit["legit"]["arrived"] + hit["attack"]["arrived"] == inv["created"]
    assert hit["legit"]["dropped"] + hit["attack"]["dropped"] == inv["dropped"]
    assert hit["attack"]["hits"] == 0
    assert inv["wrong_action"] == 0
    # Without [attack] the summary has no classes.
    assert "legit" not in _run([])


@pytest.mark.parametrize("setting, msg", [
    ("attack.share=1.0", "attack.share"),
    ("attack.kind=flood", "attack.kind"),
    ("defence.admission.policy=lfu", "defence.admission.policy"),
    ("defence.miss_rate_mpps=-1", "defence.miss_rate_mpps"),
    # The shed gate tells first-time keys by the doorkeeper's filter.
    ("defence.shed_backlog=8", "doorkeeper"),
    ("defence.shed_all_backlog=-1", "defence.shed_all_backlog"),
])
def test_bad_attack_and_defence_settings_are_refused(setting, msg):
    with pytest.raises(UserError, match=msg):
        load(None, [setting])


def test_defaults_leave_the_simulator_tree_unchanged():
    """No [attack], no [defence]: the JSON the simulator takes has neither
    key (the simgolden runs are unchanged)."""
    d = load(None, []).sim_config()
    assert "attack" not in d and "defence" not in d
    d = load(None, ["defence.admission.policy=doorkeeper"]).sim_config()
    assert d["defence"]["admission"]["policy"] == "doorkeeper"


def test_slru_keeps_the_legitimate_hits_through_a_scan_at_little_cost():
    """Segmented LRU ([defence] slru_protected) against plain LRU on the
    same runs: under a scan of 1.1 x the PMU entries the legitimate hit
    rate is higher; with no attack it costs at most 0.005 of it (the
    issue's bound on CAIDA-sized flows). Small CAMs (64 entries), so the
    scan cycles through them within the run."""
    runs = {}
    for share, slru in [(0.0, 0.0), (0.0, 0.8), (0.3, 0.0), (0.3, 0.8)]:
        runs[(share, slru)] = _run([f"attack.share={share}", "attack.kind=scan", f"defence.slru_protected={slru}",
                                    "pmus.block_size=64"])
    assert all(r["invariants"]["wrong_action"] == 0 for r in runs.values())
    assert runs[(0.3, 0.8)]["legit"]["hit_rate"] > runs[(0.3, 0.0)]["legit"]["hit_rate"]
    assert runs[(0.0, 0.0)]["legit"]["hit_rate"] - runs[(0.0, 0.8)]["legit"]["hit_rate"] <= 0.005
    with pytest.raises(UserError, match="slru_protected"):
        load(None, ["defence.slru_protected=1.0"])


def test_reproduce_flood_quick(tmp_path):
    r = CliRunner().invoke(main, ["reproduce", "flood", "-o", str(tmp_path), "--quick", "-q"])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "summary.json").read_text())
    keys = {"scenario", "defence", "attack_share", "legit_throughput_ratio", "legit_p99_ratio", "wrong_action"}
    assert s["runs"] and all(keys <= set(run) for run in s["runs"])
    assert {r["defence"] for r in s["runs"]} >= {"none", "shed+bound", "shed+scan"}
    assert {r["scenario"] for r in s["runs"]} == {"acl", "upf", "upf-p4"}
    assert all(r["wrong_action"] == 0 for r in s["runs"])
    for name in ("acl", "upf", "upf-p4"):
        runs = [r for r in s["runs"] if r["scenario"] == name]
        base = next(r for r in runs if r["defence"] == "none" and r["attack_share"] == 0)
        assert base["legit_throughput_ratio"] == 1.0 and base["legit_p99_ratio"] == 1.0
        # The attack costs plain LRU's legitimate traffic: more latency or
        # less throughput (here the ELU walks every attack key).
        hit = next(r for r in runs if r["defence"] == "none" and r["attack_share"] > 0)
        assert hit["legit_p99_ratio"] > 1.0 or hit["legit_throughput_ratio"] < 1.0
        if name != "upf-p4":  # the program's first tables key on fields the attacker keeps (the router MAC)
            assert hit["attack_hit_rate"] == 0.0
        # The shed gate (doorkeeper + shed of first-time keys + a bounded
        # ELU backlog) keeps the targets at 30 %: >= 90 % of the
        # throughput (shed legitimate PHVs count as lost), p99 within 2x,
        # and it sheds the attack's misses rather than the flows'.
        gate = next(r for r in runs if r["defence"] == "shed+bound" and r["attack_share"] == 0.3)
        assert gate["legit_throughput_ratio"] >= 0.9 and gate["legit_p99_ratio"] <= 2.0, gate
        assert gate["legit_p99_ratio"] < hit["legit_p99_ratio"]
        assert gate["attack_shed"] > gate["legit_shed"] > 0
        assert gate["legit_drops"] >= gate["legit_shed"]
    # The UPF program under a scan: its keys come back and pass the first
    # filter as seen; the second filter (shed+scan) sheds their later misses,
    # so fewer legitimate misses are shed with them and more PHVs leave.
    p4 = {r["defence"]: r for r in s["runs"]
          if r["scenario"] == "upf-p4" and r["kind"] == "scan" and r["attack_share"] == 0.3}
    assert p4["shed+scan"]["legit_throughput_ratio"] > p4["shed+bound"]["legit_throughput_ratio"], p4
    assert p4["shed+scan"]["legit_shed"] < p4["shed+bound"]["legit_shed"]
    assert (tmp_path / "flood.png").stat().st_size > 0 and (tmp_path / "flood.csv").exists()
    # The closed loop under a flood aimed at one table: without the guard the
    # optimizer gives the flooded table more PMUs; with it, the table whose
    # misses rose while its hits did not gains none while the flood lasts.
    c = {(r["attack"], r["flood_guard"]): r for r in s["controller"]["runs"]}
    assert all(r["wrong_action"] == 0 for r in c.values())
    assert not c[(False, True)]["flooded_periods"]
    plain, guard = c[(True, False)], c[(True, True)]
    assert plain["target_pmus_max_after_attack"] > plain["target_pmus_before_attack"]
    assert guard["flooded_periods"] >= 3
    assert guard["target_pmus_max_after_attack"] <= guard["target_pmus_before_attack"]
    assert guard["pmus_moved"] < plain["pmus_moved"]


@pytest.mark.parametrize("prev, cur, prev_held, flagged", [
    # Misses x3, hits flat: flooded, held at its 2 PMUs (the solver wanted 5).
    ([[1000, 100], [500, 50]], [[1000, 300], [500, 50]], [2, 3], [0]),
    # The table lost PMUs (3 -> 2): hits turned into misses, as many lookups; not held.
    ([[1000, 100], [500, 50]], [[800, 300], [500, 50]], [3, 2], []),
    # It lost PMUs (4 -> 3) but its lookups rose by a flood of new keys: held.
    ([[1700, 190], [500, 50]], [[1050, 1450], [500, 50]], [4, 3], [0]),
    # Misses x3 with hits x2: more traffic, not a flood; the target stands.
    ([[1000, 100], [500, 50]], [[2000, 300], [500, 50]], [2, 3], []),
    # Misses x1.2: under the rise.
    ([[1000, 100], [500, 50]], [[1000, 120], [500, 50]], [2, 3], []),
])
def test_flood_guard_holds_a_flooded_table(prev, cur, prev_held, flagged):
    import numpy as np

    from synapse_vmt.opt.controller import flood_guard

    held, target = np.array([2, 3]), np.array([5, 1])
    out, got = flood_guard((np.array(prev, float), np.array(prev_held)), np.array(cur, float), held, target, 1.5)
    assert got == flagged
    want = target.copy()
    for j in flagged:
        want[j] = min(target[j], held[j])
    assert list(out) == list(want)
    assert flood_guard(None, np.array(cur, float), held, target, 1.5)[1] == []


def test_flood_guard_holds_a_table_until_its_misses_fall_back():
    """A flooded table stays held while its misses stay high against the
    period before the flood (not only in the period they rose), and is let
    go when they fall back."""
    import numpy as np

    from synapse_vmt.opt.controller import flood_guard

    held, target, base = np.array([2, 3]), np.array([5, 1]), {}
    before = (np.array([[1000, 100], [500, 50]], float), np.array([2, 3]))
    flood = np.array([[1000, 300], [500, 50]], float)
    assert flood_guard(before, flood, held, target, 1.5, base)[1] == [0]
    # Misses stay high, not rising further: still held.
    out, got = flood_guard((flood, held), np.array([[990, 310], [500, 50]], float), held, target, 1.5, base)
    assert got == [0] and out[0] == 2
    # They fall back: the solver's target stands.
    out, got = flood_guard((flood, held), np.array([[1000, 110], [500, 50]], float), held, target, 1.5, base)
    assert got == [] and out[0] == 5 and base == {}


def test_fast_mode_refuses_defences(tmp_path):
    """The fast mode models plain LRU and no gate: a [defence] runs in the
    exact engine only (one line, exit 2), never silently ignored."""
    r = CliRunner().invoke(main, ["run", "--fast", "-q", "-o", str(tmp_path), "--set", "duration_ns=20000",
                                  "--set", "defence.admission.policy=doorkeeper", "--set", "defence.shed_backlog=8"])
    assert r.exit_code == 2 and "[defence] runs in the exact engine only" in r.output, r.output


# ---- attack traffic through a P4 program (synapse run --p4, [attack]) ----

UPF_TRAFFIC = """
[traffic]
flows = 300
flow_duration_ns = 100000
[[traffic.classes]]
name = "uplink"
frame = "gtpu"
[traffic.classes.fields]
"eth.dst" = "00:00:0a:fa:00:01"
"ipv4.dst" = {table = "sessions_uplink", key = "ipv4.dst_addr"}
"gtpu.teid" = {table = "sessions_uplink", key = "scalars.userMetadata.teid"}
"inner.src" = {table = "terminations_uplink", key = "scalars.userMetadata.ue_addr"}
"inner.sport" = {range = [1024, 65535]}
[[traffic.classes]]
name = "downlink"
frame = "ipv4-udp"
[traffic.classes.fields]
"eth.dst" = "00:00:0a:fa:00:01"
"ipv4.dst" = {table = "sessions_downlink", key = "ipv4.dst_addr"}
"l4.sport" = {range = [1, 65535]}
"""


def _p4_run(tmp_path, attack: str, name: str) -> dict:
    from pathlib import Path

    t = tmp_path / f"{name}.toml"
    t.write_text(UPF_TRAFFIC + attack)
    entries = Path(__file__).resolve().parents[1] / "examples" / "upf" / "entries.txt"
    out = tmp_path / name
    r = CliRunner().invoke(main, ["run", "--p4", "builtin:up4", "--entries", str(entries), "--traffic", str(t),
                                  "--duration-ns", "100000", "-q", "-o", str(out)])
    assert r.exit_code == 0, r.output
    return json.loads((out / "summary.json").read_text())


def test_p4_attack_packets_go_through_the_program_and_are_counted_apart(tmp_path):
    """`run --p4 --traffic` with an [attack]: the legitimate PHVs are the
    attack-free run's (same arrivals), the attack is its share of the
    offered packets, every answer (attack PHVs' too) is the oracle's, and
    the forged uplink frames reach the session tables and miss there."""
    base = _p4_run(tmp_path, "[attack]\nshare = 0\n", "base")
    hit = _p4_run(tmp_path, '[attack]\nshare = 0.3\nkind = "nomatch"\nkeep = ["uplink:ipv4.dst"]\n', "hit")
    assert base["attack"]["arrived"] == 0
    assert hit["legit"]["arrived"] == base["legit"]["arrived"] == base["invariants"]["created"]
    a = hit["attack"]["arrived"] / (hit["attack"]["arrived"] + hit["legit"]["arrived"])
    assert a == pytest.approx(0.3, abs=0.01)
    inv = hit["invariants"]
    assert hit["legit"]["arrived"] + hit["attack"]["arrived"] == inv["created"]
    assert inv["wrong_action"] == 0 and base["invariants"]["wrong_action"] == 0
    # Attack frames are new routes after the legitimate ones, one per packet.
    at = hit["attack_traffic"]
    assert at["attack_packets"] == hit["attack"]["arrived"] and at["legit_routes"] == base["attack_traffic"]["legit_routes"]
    # No forged key matches a session (nomatch), so the uplink sessions table
    # matched at most the legitimate lookups' count.
    up = next(v for k, v in hit["tables"].items() if k.endswith("sessions_uplink"))
    up0 = next(v for k, v in base["tables"].items() if k.endswith("sessions_uplink"))
    assert up["lookups"] > up0["lookups"] and up["matched"] == up0["matched"]


def test_nomatch_attack_frames_match_no_entry_of_a_forged_field():
    """Forged uplink frames (TEID and UE address drawn anew, the N3 address
    kept): under `nomatch` no session or termination entry matches them."""
    from pathlib import Path

    from synapse_vmt.p4 import attack, gentraffic, simrun
    from synapse_vmt.p4.bmv2 import read_program
    from synapse_vmt.p4.entries import load_entries
    from synapse_vmt.p4.interp import Program

    import tomllib

    prog_path = simrun.resolve_program("builtin:up4")
    entries = load_entries(str(Path(__file__).resolve().parents[1] / "examples" / "upf" / "entries.txt"), prog_path)
    spec = gentraffic.parse_spec(tomllib.loads(UPF_TRAFFIC)["traffic"], "t")
    a = attack.parse({"share": 0.3, "kind": "nomatch", "classes": ["uplink"], "keep": ["ipv4.dst"]}, "a", ["uplink", "downlink"])
    frames = attack.attack_frames(spec, a, read_program(prog_path), entries, 300, 1, set())
    assert len(set(frames)) == 300
    c = Program.load(prog_path).run(frames, entries, seed=1).counters()
    sess = next(v for k, v in c.items() if k.endswith("sessions_uplink"))
    assert sess["lookups"] == 300 and sess["matched"] == 0


@pytest.mark.parametrize("attack, msg", [
    ("[attack]\nshare = 1.0\n", "share"),
    ("[attack]\nkind = \"flood\"\n", "kind"),
    ("[attack]\nkeep = [\"gtpu.nope\"]\n", "keep"),
    ("[attack]\nclasses = [\"sideways\"]\n", "classes"),
    ("[attack]\nwhen = 3\n", "unknown key 'when'"),
])
def test_bad_p4_attack_settings_are_one_line_errors(tmp_path, attack, msg):
    t = tmp_path / "t.toml"
    t.write_text(UPF_TRAFFIC + attack)
    r = CliRunner().invoke(main, ["run", "--p4", "builtin:up4", "--traffic", str(t), "-q", "-o", str(tmp_path / "o")])
    assert r.exit_code == 2 and msg in r.output and "Traceback" not in r.output, r.output


def _frame_values(frame: str, f: bytes) -> dict[str, int]:
    """The frame builder's fields of a frame (Ethernet, IPv4 without
    options), read back from their offsets."""
    n = lambda a, b: int.from_bytes(f[a:b], "big")  # noqa: E731
    v = {"eth.dst": n(0, 6), "eth.src": n(6, 12), "ipv4.ttl": n(22, 23), "ipv4.proto": n(23, 24),
         "ipv4.src": n(26, 30), "ipv4.dst": n(30, 34), "l4.sport": n(34, 36), "l4.dport": n(36, 38)}
    if frame == "gtpu":
        v.update({"gtpu.teid": n(46, 50), "inner.proto": n(59, 60), "inner.src": n(62, 66), "inner.dst": n(66, 70),
                  "inner.sport": n(70, 72), "inner.dport": n(72, 74)})
    return v


@pytest.mark.parametrize("kind", ["random", "nomatch"])
def test_rust_attack_frames_are_the_frame_builders_bytes(kind):
    """Each attack frame made in Rust (a class's template with its drawn
    fields written in, checksums recomputed) is byte for byte what the
    Python frame builder (dpkt) makes of the same field values, for GTP-U and
    plain frames, UDP and TCP alike; the same seed gives the same frames."""
    from pathlib import Path

    import tomllib

    from synapse_vmt.p4 import attack, gentraffic, simrun
    from synapse_vmt.p4.bmv2 import read_program
    from synapse_vmt.p4.entries import load_entries

    prog_path = simrun.resolve_program("builtin:up4")
    entries = load_entries(str(Path(__file__).resolve().parents[1] / "examples" / "upf" / "entries.txt"), prog_path)
    proto = ('[[traffic.classes]]\nname = "mixed"\nframe = "ipv4-udp"\n[traffic.classes.fields]\n'
             '"ipv4.proto" = {range = [5, 7]}\n"l4.dport" = {range = [1, 9]}\n'
             '"ipv4.dst" = {table = "sessions_downlink", key = "ipv4.dst_addr"}\n'
             '[[traffic.classes]]\nname = "up-tcp"\nframe = "gtpu"\n[traffic.classes.fields]\n'
             '"inner.proto" = 6\n"gtpu.teid" = {table = "sessions_uplink", key = "scalars.userMetadata.teid"}\n')
    spec = gentraffic.parse_spec(tomllib.loads(UPF_TRAFFIC + proto)["traffic"], "t")
    names = [c.name for c in spec.classes]
    a = attack.parse({"share": 0.3, "kind": kind, "keep": ["uplink:ipv4.dst"]}, "a", names)
    prog = read_program(prog_path)
    frames = attack.attack_frames(spec, a, prog, entries, 400, 3, set())
    assert frames == attack.attack_frames(spec, a, prog, entries, 400, 3, set())
    assert len(set(frames)) == 400
    seen_tcp = 0
    for f in frames:
        frame = "gtpu" if f[23] == 17 and f[36:38] == (2152).to_bytes(2, "big") else "ipv4-udp"
        v = _frame_values(frame, f)
        seen_tcp += v["ipv4.proto"] == 6 or v.get("inner.proto") == 6
        assert gentraffic.build_frame(frame, v) == f
    assert seen_tcp > 0


@pytest.mark.parametrize("kind", ["random", "nomatch", "scan"])
def test_attack_runs_give_the_interpreters_trace(kind):
    """An attack's frames (with the legitimate ones) run through the compiled
    program's Rust executor (``simrun._attack_run``) give the interpreter's
    trace: the same visits, keys, entries, actions, drops (and the pipeline
    that dropped), parser errors and events, so the routes and every figure
    of an attacked run are the interpreter's."""
    from pathlib import Path

    import numpy as np
    import tomllib

    from synapse_vmt.p4 import attack, gentraffic, simrun
    from synapse_vmt.p4.bmv2 import read_program
    from synapse_vmt.p4.entries import load_entries
    from synapse_vmt.p4.interp import Program

    prog_path = simrun.resolve_program("builtin:up4")
    entries = load_entries(str(Path(__file__).resolve().parents[1] / "examples" / "upf" / "entries.txt"), prog_path)
    # a class of odd protocols too: frames the parser rejects or the program drops
    proto = ('[[traffic.classes]]\nname = "mixed"\nframe = "ipv4-udp"\n[traffic.classes.fields]\n'
             '"ipv4.proto" = {range = [1, 17]}\n"l4.dport" = {range = [1, 9]}\n'
             '"ipv4.dst" = {table = "sessions_downlink", key = "ipv4.dst_addr"}\n')
    spec = gentraffic.parse_spec(tomllib.loads(UPF_TRAFFIC + proto)["traffic"], "t")
    a = attack.parse({"share": 0.3, "kind": kind, "keep": ["uplink:ipv4.dst"]}, "a", [c.name for c in spec.classes])
    bprog = read_program(prog_path)
    legit, _ = simrun.dedup_frames(gentraffic.class_frames(spec, bprog, entries, 2)[0])
    frames = legit + attack.attack_frames(spec, a, bprog, entries, 600, 2, set(legit))
    prog = Program.load(prog_path)
    want, got = prog.run(frames, entries, seed=2), simrun._attack_run(prog, entries, 2, frames)
    assert got.n_packets == want.n_packets == len(frames)
    for k in ("pkt_start", "step_table", "step_entry", "step_action", "dropped", "parser_error", "drop_pipeline"):
        assert np.array_equal(getattr(got, k), getattr(want, k)), k
    assert got.step_keys == want.step_keys
    assert (got.drop_pipeline >= 0).any() and got.dropped.any()  # drops are compared, not absent
    for k in ("synthesized_fields", "fallback_branches", "parser_rejects", "unsupported", "actions"):
        assert getattr(got, k) == getattr(want, k), k
    r0, r1 = simrun.compile_routes(want, entries, len(legit)), simrun.compile_routes(got, entries, len(legit))
    assert np.array_equal(r0.frame_route, r1.frame_route) and np.array_equal(r0.hop_key, r1.hop_key)
    # the routes numbered as a plain first-seen walk over the steps numbers them
    ref = _routes_by_walk(got, r1.tables, len(legit))
    for k in ("frame_route", "route_start", "hop_table", "hop_key"):
        assert np.array_equal(ref[k], getattr(r1, k)), k
    assert (r1.frame_route[len(legit):] > r1.frame_route[:len(legit)].max()).all()  # fresh routes after
    for (name, *_, keys, expected), want_keys, want_expected in zip(r1.table_args, ref["keys"], ref["expected"]):
        assert [tuple(r) for r in keys.tolist()] == want_keys and expected.tolist() == want_expected, name


def _routes_by_walk(trace, tables, fresh_from):
    """compile_routes' numbering by a walk over every step: key ids and
    routes (a fresh frame's apart) numbered in the order they first appear."""
    import numpy as np

    from synapse_vmt.p4.interp import encode_words

    sim = {[t.name for t in trace.tables].index(n): s for s, n in enumerate(tables)}
    ids = [{} for _ in tables]
    expected = [[] for _ in tables]
    routes, frame_route = {}, []
    ps = trace.pkt_start.tolist()
    for f in range(trace.n_packets):
        hops = []
        for j in range(ps[f], ps[f + 1]):
            s = sim[int(trace.step_table[j])]
            k = tuple(encode_words(trace.tables[int(trace.step_table[j])], trace.step_keys[j]))
            if k not in ids[s]:
                ids[s][k] = len(ids[s])
                expected[s].append(int(trace.step_entry[j]))
            hops.append((s, ids[s][k]))
        frame_route.append(routes.setdefault((f >= fresh_from, tuple(hops)), len(routes)) if hops else -1)
    flat = [h for _, hops in routes for h in hops]
    return {"frame_route": np.array(frame_route), "route_start": np.cumsum([0] + [len(h) for _, h in routes]),
            "hop_table": np.array([s for s, _ in flat]), "hop_key": np.array([k for _, k in flat]),
            "keys": [list(d) for d in ids], "expected": expected}

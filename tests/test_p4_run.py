"""``synapse run --p4``: the hand-checked router program, entries and packets of
test_p4_interp through the simulator (counts worked out by hand there), the
oracle invariant (0 wrong), generated traffic classes, and ``reproduce upf``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from synapse_vmt.cli import main
from synapse_vmt.errors import UserError
from test_p4_interp import DATA, PACKETS, A, L, N, _write_pcap


def test_run_p4_router_counts_by_hand(tmp_path):
    f = tmp_path / "a.pcap"
    _write_pcap(f, [p for p, *_ in PACKETS] * 3)  # each packet three times: 36 packets
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["run", "--p4", str(DATA / "router.json"), "--entries", str(DATA / "router-entries.txt"),
                                  "--pcap", str(f), "--pmus", "4", "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    s = json.loads((out / "summary.json").read_text())
    # test_p4_interp: per 12 packets, lpm 9 lookups / 7 matched, acl 6 / 5, nhop 3 / 3
    assert s["tables"][L]["lookups"] == 27 and s["tables"][L]["matched"] == 21
    assert s["tables"][L]["actions"] == {"MyIngress.set_nhop": 21, "MyIngress.drop": 6}
    assert s["tables"][A]["actions"] == {"MyIngress.deny": 6, "MyIngress.permit": 12}
    assert s["tables"][N]["matched"] == 9
    assert s["parser_rejects"] == {"BadIhl": 3, "NoMatch": 3, "PacketTooShort": 3, "StackOutOfBounds": 3}
    inv = s["invariants"]
    assert inv["ok"] and inv["wrong_action"] == 0 and inv["lost"] == 0
    # every visit was replayed: the simulator's keys equal the program's lookups (ingress: no
    # random fallback branch, so a repeated frame takes the same path)
    for name in (L, A, N):
        assert s["tables"][name]["simulated"] and s["tables"][name]["keys"] == s["tables"][name]["lookups"], name
    assert (out / "run.png").exists() and (out / "windows.csv").exists()


def test_routes_replay_visit_order(tmp_path):
    """The routes rebuilt from the compiled arrays give back every packet's simulated visits."""
    from synapse_vmt.p4 import simrun
    from synapse_vmt.p4.interp import Program
    from synapse_vmt.p4.entries import load_entries

    prog = Program.load(DATA / "router.json")
    ent = load_entries(DATA / "router-entries.txt", DATA / "router.json")
    frames = [p for p, *_ in PACKETS]
    tr = prog.run(frames, ent, seed=1)
    ro = simrun.compile_routes(tr, ent)
    for i in range(tr.n_packets):
        want = [(s.table, s.key) for s in tr.packet(i) if s.table in ro.tables]
        r = ro.frame_route[i]
        if r < 0:
            assert want == []
            continue
        lo, hi = ro.route_start[r], ro.route_start[r + 1]
        got = []
        for t, k in zip(ro.hop_table[lo:hi], ro.hop_key[lo:hi]):
            name = ro.tables[t]
            words = ro.table_args[t][6][k]
            spec = tr.tables[[x.name for x in tr.tables].index(name)]
            from synapse_vmt.p4.interp import encode_words

            key = next(s.key for s in tr.packet(i) if s.table == name)
            assert list(words) == encode_words(spec, key)
            got.append((name, key))
        assert got == want


def test_even_split_deals_every_pmu():
    from synapse_vmt.p4.simrun import even_split

    s = even_split(["a", "b", "c"], 7)
    assert sorted(p for v in s.values() for p in v) == list(range(7))
    assert [len(v) for v in s.values()] == [3, 2, 2]


def test_traffic_spec_errors_are_one_line():
    from synapse_vmt.p4.gentraffic import parse_spec

    with pytest.raises(UserError, match=r"t.classes\[0\].frame: expected one of"):
        parse_spec({"classes": [{"frame": "x"}]}, "t")
    with pytest.raises(UserError, match=r"t.classes\[0\].fields: unknown field 'gtpu.teid' for frame ipv4-udp"):
        parse_spec({"classes": [{"fields": {"gtpu.teid": 1}}]}, "t")
    with pytest.raises(UserError, match="t: unknown key 'flow'"):
        parse_spec({"flow": 3, "classes": [{}]}, "t")


def test_class_flows_shares():
    from synapse_vmt.p4.gentraffic import TrafficClass, TrafficSpec

    s = TrafficSpec([TrafficClass("a", 1, "flat", "ipv4-udp"), TrafficClass("b", 2, "flat", "ipv4-udp")], flows=10)
    assert s.class_flows() == [3, 7]


def test_upf_example_hits_every_session_table(tmp_path):
    """Generated UPF traffic (the shipped program and example entries, plus two
    ACL rules that match): uplink flows hit sessions_uplink, downlink flows
    sessions_downlink; every visited table is simulated, the 12-word ACL too (a
    16-word simulator), with the oracle invariant: each simulated ACL answer is
    the interpreter's entry."""
    from pathlib import Path

    from synapse_vmt.p4 import simrun

    ex = Path(__file__).parent.parent / "examples" / "upf" / "scenario.toml"
    kw = simrun.load_scenario(str(ex))
    ent = tmp_path / "entries.txt"
    acl = "table_add PreQosPipe.Acl.acls PreQosPipe.Acl."
    # uplink (src_iface 1, access) is punted; downlink (2) to an odd UDP port >= 32768 cloned
    ent.write_text(Path(kw["entries_file"]).read_text()
                   + f"{acl}punt 0&&&0 1&&&0xff 0&&&0 0&&&0 0x0800&&&0xffff 0&&&0 0&&&0 0&&&0 0&&&0 0&&&0 => 20\n"
                   + f"{acl}clone_to_cpu 0&&&0 2&&&0xff 0&&&0 0&&&0 0&&&0 0&&&0 0&&&0 17&&&0xff 0&&&0 0x8001&&&0x8001 => 21\n")
    kw["entries_file"] = str(ent)
    kw["traffic"].flows = 300
    kw["duration_ns"] = 200_000.0
    s = simrun.run_program(tmp_path / "out", **kw)
    t = s["tables"]
    up, down = t["PreQosPipe.sessions_uplink"], t["PreQosPipe.sessions_downlink"]
    assert up["lookups"] > 0 and up["matched"] == up["lookups"]
    assert down["lookups"] > 0 and down["matched"] == down["lookups"]
    assert t["PreQosPipe.my_station"]["lookups"] == s["packets"]
    assert up["lookups"] + down["lookups"] == s["packets"]
    assert s["invariants"]["wrong_action"] == 0 and s["invariants"]["ok"]
    assert s["unsimulated_tables"] == {} and all(r["simulated"] for r in t.values())
    assert s["sim_key_words"] == 16
    a = t["PreQosPipe.Acl.acls"]
    cloned = a["actions"].get("PreQosPipe.Acl.clone_to_cpu", 0)
    assert 0 < cloned < down["lookups"]  # about half the downlink ports
    assert a["actions"] == {"PreQosPipe.Acl.punt": up["lookups"], "PreQosPipe.Acl.clone_to_cpu": cloned,
                            "NoAction": down["lookups"] - cloned}
    assert a["matched"] == up["lookups"] + cloned
    # the simulated ACL saw every lookup but those still in flight at the end
    assert 0 < a["keys"] <= a["lookups"] <= a["keys"] + s["invariants"]["in_flight_before_drain"]
    assert a["hit_rate"] > 0


def test_reproduce_upf_quick(tmp_path):
    r = CliRunner().invoke(main, ["reproduce", "upf", "--quick", "-o", str(tmp_path), "--slo-latency-ns", "60"])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "summary.json").read_text())
    for k in ("throughput_ratio_vs_static", "pmu_time_ratio_vs_static", "mean_latency_ns"):
        assert np.isfinite(s["closed_loop"][k])
    for k in ("throughput_ratio_vs_static", "mean_latency_ns"):
        assert np.isfinite(s["even_split"][k])
    assert all(v["invariants"]["wrong_action"] == 0 for v in s["schemes"].values())
    assert "closed_loop_slo" in s
    assert (tmp_path / "upf.png").exists()


def test_switch_program_with_generated_entries(tmp_path, shared_data):
    """The 123-table switch program, entries generated for every table, generated
    IPv4 traffic: every visited table is simulated (the widest, system_acl,
    24 words: a 32-word simulator), and the oracle invariant holds (0 wrong)."""
    from synapse_vmt.p4 import simrun
    from synapse_vmt.p4.gentraffic import parse_spec

    prog = shared_data / "p4" / "switch-p416.json"
    ent = tmp_path / "entries.txt"
    r = CliRunner().invoke(main, ["p4", "entries", "gen", str(prog), "--count", "16", "--seed", "1", "-o", str(ent)])
    assert r.exit_code == 0, r.output
    traffic = parse_spec({"flows": 60, "classes": [{"frame": "ipv4-udp", "fields": {
        "ipv4.dst": {"range": ["10.0.0.0", "10.255.255.255"]}, "l4.sport": {"range": [1024, 65535]}}}]}, "t")
    s = simrun.run_program(tmp_path / "out", program=str(prog), entries_file=str(ent), traffic=traffic, duration_ns=60_000.0,
                           pmus=48)
    assert s["invariants"]["ok"] and s["invariants"]["wrong_action"] == 0
    sim = [n for n, t in s["tables"].items() if t["simulated"]]
    assert len(sim) >= 20
    assert set(s["tables"]) == set(sim) and s["unsimulated_tables"] == {}
    assert s["sim_key_words"] == 32
    for wide in ("ingress.validate_packet.validate_packet", "ingress.system_acl.system_acl"):
        w = [n for n in sim if n.endswith(wide.split(".")[-1])]
        assert w and all(s["tables"][n]["keys"] > 0 for n in w), wide


def test_routed_simulator_width_follows_the_widest_table():
    """The routed simulator is built at 8, 16 or 32 words (the narrowest that
    holds the widest table); one-word tables give the same counters at every
    width (zero-padded keys); a 33-word table is an error naming it."""
    import json as _json

    from synapse_vmt import _core
    from synapse_vmt.p4 import simrun

    assert _core.MAX_KEY_WORDS == simrun.max_key_words() == 32

    def table(name, words, keys):
        bits, kinds = [32] * words, ["ternary"] * words
        lo = np.zeros((2, words), np.uint32)
        mask = np.zeros((2, words), np.uint32)
        lo[0, 0], mask[0, 0] = 5, 0xFF  # entry 0: word 0 == 5; entry 1: catch-all
        k = np.zeros((len(keys), words), np.uint32)
        k[:, 0] = keys
        exp = np.array([0 if x == 5 else 1 for x in keys], np.int64)
        return (name, bits, kinds, lo, lo.copy(), mask, k, exp)

    def run(words_c):
        # a (1 word) -> b (1 word), or b alone; c (words_c words, no PMU) sets the width, no route visits it
        base = _json.loads(_core.default_sim_config())
        cfg = simrun.sim_config(base, ["a", "b", "c"], {"a": [0], "b": [1], "c": []}, 2)
        sim = _core.routed_simulator(_json.dumps(cfg), [table("a", 1, [5, 6]), table("b", 1, [5]),
                                                        table("c", words_c, [5])],
                                     np.array([0, 2, 3], np.uint32), np.array([0, 1, 0], np.uint32),
                                     np.array([0, 0, 1], np.uint32))
        t = np.arange(400, dtype=np.uint64) * 100_000
        _core.push_arrivals(sim, t, (np.arange(400) % 2).astype(np.uint32))
        sim.run_until(100_000.0)
        inv = sim.check_invariants()
        assert inv["ok"] and inv["exited"] == 400, inv
        s = sim.summary()["tables"]
        return sim.key_words, {n: (r["keys"], r["hit_rate"], r["mean_latency_ns"]) for n, r in s.items()}

    w8, s8 = run(1)
    assert w8 == 8 and s8["a"][0] == 400 and s8["b"][0] == 200 and s8["c"][0] == 0
    for words, width in ((8, 8), (9, 16), (12, 16), (24, 32), (32, 32)):
        w, s = run(words)
        assert w == width and s == s8, (words, s)
    with pytest.raises(ValueError, match="table c: key of 33"):
        run(33)


def test_a_table_wider_than_the_simulator_is_a_one_line_error(tmp_path, monkeypatch):
    """A visited table wider than the simulator's widest key (here the limit is
    lowered to 1 word) stops the run with one line naming the table, exit 2."""
    from synapse_vmt.p4 import simrun

    monkeypatch.setattr(simrun, "max_key_words", lambda: 1)
    f = tmp_path / "a.pcap"
    _write_pcap(f, [p for p, *_ in PACKETS])
    r = CliRunner().invoke(main, ["run", "--p4", str(DATA / "router.json"), "--entries", str(DATA / "router-entries.txt"),
                                  "--pcap", str(f), "-o", str(tmp_path / "out"), "-q"])
    assert r.exit_code == 2, r.output
    assert "is wider than the simulator's 1 words (32 bits)" in r.output and "table MyIngress." in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_run_p4_with_a_traffic_file(tmp_path):
    """``run --p4 --traffic FILE``: generated packets from a [traffic] table,
    the same run as through a program scenario; no [traffic] is one line."""
    from synapse_vmt.p4 import simrun

    tf = tmp_path / "traffic.toml"
    tf.write_text('[traffic]\nflows = 40\n[[traffic.classes]]\nframe = "ipv4-udp"\n'
                  '[traffic.classes.fields]\n"ipv4.dst" = {range = ["10.0.0.0", "10.0.0.255"]}\n')
    args = ["run", "--p4", str(DATA / "router.json"), "--entries", str(DATA / "router-entries.txt"), "--pmus", "4",
            "--duration-ns", "50000", "-q"]
    r = CliRunner().invoke(main, args + ["--traffic", str(tf), "-o", str(tmp_path / "a")])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "a" / "summary.json").read_text())
    ref = simrun.run_program(tmp_path / "b", program=str(DATA / "router.json"), entries_file=str(DATA / "router-entries.txt"),
                             traffic=simrun.load_traffic(str(tf)), duration_ns=50_000.0, pmus=4)
    assert s["packets"] > 0 and s["invariants"]["ok"]
    assert {n: t["actions"] for n, t in s["tables"].items()} == {n: t["actions"] for n, t in ref["tables"].items()}
    bad = tmp_path / "bad.toml"
    bad.write_text("[program]\n")
    r = CliRunner().invoke(main, args + ["--traffic", str(bad), "-o", str(tmp_path / "c")])
    assert r.exit_code == 2 and "expected a [traffic] table" in r.output and len(r.output.strip().splitlines()) == 1

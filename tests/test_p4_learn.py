"""Tables written from the data plane (PNA add-on-miss, ``docs/p4-stateful.md``):
the conntrack example's flow table learns new 5-tuples on a miss and ages
them out. The Rust executor agrees with the interpreter (the oracle) on every
visit, register and learner counter over random packets; a hand-worked
sequence pins the semantics both follow; a streamed run gives the simulator
the learned entries with no stale or wrong answer."""

from __future__ import annotations

import json
import random
import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_p4_extern_engines import same  # noqa: E402

from synapse_vmt.errors import UserError  # noqa: E402
from synapse_vmt.p4.engine import RustProgram  # noqa: E402
from synapse_vmt.p4.entries import load_entries  # noqa: E402
from synapse_vmt.p4.interp import Program  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "conntrack"
PROG, ENTRIES = EX / "conntrack.json", EX / "entries.txt"
CT = "Conntrack.ct_flows"
MS = 1_000_000_000  # ps


def pkt(src: str, dst: str, proto: int = 17, sport: int = 1000, dport: int = 5000) -> bytes:
    a = bytes(int(x) for x in src.split(".")) + bytes(int(x) for x in dst.split("."))
    l4 = struct.pack("!HHHH", sport, dport, 8, 0) if proto == 17 else struct.pack("!HHIIBBHHH", sport, dport, 0, 0, 0x50, 0x10, 1, 0, 0)
    ip = struct.pack("!BBHHHBBH", 0x45, 0, 20 + len(l4), 0, 0, 64, proto, 0) + a
    return bytes.fromhex("020000000001020000000002" "0800") + ip + l4


def doc(**table) -> dict:
    d = json.loads(PROG.read_text())
    t = next(t for t in d["pipelines"][0]["tables"] if t["name"] == CT)
    t.update(table)
    return d


def engines(d: dict, pk, entries=ENTRIES):
    prog = Program(d, "conntrack.json")
    ents = load_entries(entries, PROG)
    a = prog.run(pk, ents)
    r = RustProgram(prog, ents)
    b = r.run(pk)
    return a, b, prog.learn_stats(), dict(r.core.learn_stats())


def test_a_flow_is_learned_hit_refreshed_and_aged_out():
    # UDP: expire time profile 0 (30 ms), restarted by every hit (ct_established)
    f, g = pkt("192.168.0.1", "25.78.110.9"), pkt("192.168.0.2", "25.78.110.9")
    times = [0, 20, 45, 76, 77, 200]  # ms
    pk = [(t * MS, f) for t in times] + [(201 * MS, g)]
    a, b, la, lb = engines(doc(), pk)
    same(a, b)
    fixed = 0  # the flow table starts empty
    ct = [e for t, e in zip(a.step_table.tolist(), a.step_entry.tolist()) if a.tables[t].name == CT]
    # 0: miss, learned as entry 0; 20, 45: hits (each restarts: expires at 75); 76: gone, learned
    # again as entry 1; 77: hit; 200: gone again (107 < 200), learned as 2; g: a new flow, 3
    assert ct == [-1, fixed, fixed, -1, fixed + 1, -1, -1]
    assert la[CT] == {"adds": 4, "full": 0, "expired": 2, "restarts": 3, "hits": 3, "entries": 2}
    assert lb[CT] == la[CT]
    assert a.registers["Conntrack.flows_opened"] == [4] == b.registers["Conntrack.flows_opened"]


def test_a_full_table_learns_nothing_more():
    pk = [(i * MS, pkt("192.168.0.1", "25.78.110.9", sport=1000 + i)) for i in range(5)]
    a, b, la, lb = engines(doc(max_size=3), pk)
    same(a, b)
    assert la[CT]["adds"] == 3 and la[CT]["full"] == 2 and lb[CT] == la[CT]


def random_packets(rng: random.Random, n: int) -> list[tuple[int, bytes]]:
    """A few hundred flows (TCP and UDP, to routed and unrouted destinations,
    ports the ACL permits and denies) at random gaps around the expire times."""
    flows = [(f"192.168.{rng.randrange(4)}.{rng.randrange(1, 60)}", rng.choice(["25.78.110.9", "202.94.188.7", "39.79.108.1",
              "8.8.8.8"]), rng.choice([6, 17]), rng.randrange(1024, 1100), rng.choice([22, 53, 80, 443, 8080]))
             for _ in range(300)]
    out, t = [], 0
    for _ in range(n):
        t += 40 * MS if rng.random() < 0.02 else rng.choice([0, 10_000_000, 100_000_000, 1 * MS])
        out.append((t, pkt(*rng.choice(flows))))
    return out


@pytest.mark.parametrize("seed,max_size", [(1, 65536), (2, 50), (3, 15)])
def test_both_engines_agree_on_random_packets(seed, max_size):
    rng = random.Random(seed)
    a, b, la, lb = engines(doc(max_size=max_size), random_packets(rng, 3000))
    same(a, b)
    assert la == lb
    s = la[CT]
    assert s["adds"] > 0 and s["expired"] > 0 and s["restarts"] > 0
    if max_size < 300:
        assert s["full"] > 0


@pytest.mark.parametrize("change,msg", [
    ({"expire_time_profiles_us": []}, "expire_time_profiles_us"),
    ({"expire_time_profiles_us": [1, -2]}, "expire_time_profiles_us"),
    ({"with_counters": True}, "not supported"),
])
def test_bad_add_on_miss_tables_are_refused(change, msg):
    with pytest.raises(UserError, match=msg):
        engines(doc(**change), [(0, pkt("192.168.0.1", "25.78.110.9"))])


def test_add_on_miss_needs_exact_keys():
    d = doc()
    t = next(t for t in d["pipelines"][0]["tables"] if t["name"] == CT)
    t["key"][0]["match_type"] = "ternary"
    with pytest.raises(UserError, match="exact keys only"):
        engines(d, [(0, pkt("192.168.0.1", "25.78.110.9"))])


def test_streamed_run_gives_the_simulator_the_learned_entries(tmp_path):
    """``run --p4`` on a generated capture: the flow table's adds and
    expiries reach the ELU as updates, and the versioned oracle counts no
    stale or wrong answer."""
    from synapse_vmt.p4.simrun import run_capture

    sys.path.insert(0, str(ROOT / "scripts"))
    from gen_conntrack_capture import generate

    cap = tmp_path / "ct.pcap"
    generate(str(cap), 6000, 20_000.0, 1)
    s = run_capture(tmp_path / "out", program=str(PROG), entries_file=str(ENTRIES), pcap=str(cap), rate_mpps=None, pmus=8)
    inv = s["invariants"]
    assert inv["ok"], inv
    learn = s["learned_entries"][CT]
    assert learn["adds"] > 0 and learn["expired"] > 0
    up = s["updates"]
    # every add and every expiry is one update request, committed by the end
    assert up["requested"] == learn["adds"] + learn["expired"] == s["stream"]["table_writes"]
    assert up["stale_answers"] == 0 and inv["wrong_action"] == 0

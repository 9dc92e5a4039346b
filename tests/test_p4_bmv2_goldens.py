"""Synapse against BMv2 simple_switch, the semantic reference: for every golden
recorded by ``scripts/bmv2_goldens.py`` (tests/data/p4/goldens/: a program,
its entries and a capture run through simple_switch from source, with
provenance), run the same program, entries and capture through Synapse and
compare per keyed table the lookups, matches and actions run, the packets
dropped, the parser errors and the output packets. CI does not build BMv2:
it reads the goldens.

Where Synapse differs from BMv2 today the case is a strict xfail naming the
difference (``KNOWN``; docs/bmv2-differences.md): it fails once Synapse
starts agreeing, so the entry is removed with the fix. A table's failure
message names the first packets whose visits to it differ (from the
golden's per-packet record, for small captures)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from synapse_vmt.errors import UserError
from synapse_vmt.p4.entries import load_entries
from synapse_vmt.p4.interp import Program
from synapse_vmt.p4.parser import read_packets

ROOT = Path(__file__).resolve().parent.parent
GOLDENS = ROOT / "tests" / "data" / "p4" / "goldens"
MANIFEST = tomllib.loads((GOLDENS / "manifest.toml").read_text())

# (golden, table | "drops" | "parser_errors" | "output" | "cli" | "state") -> why Synapse differs today
KNOWN: dict[tuple[str, str], str] = {}
# (The switch program's sliced keys, hash-keyed tables and priority queues, the heavy-hitter
# program's hashes, meters, registers and clones, and UPF's action-selector routes_v4 agree
# with BMv2: docs/externs.md.)


def goldens() -> dict[str, dict]:
    out = {}
    for name in MANIFEST:
        f = GOLDENS / name / "golden.json"
        if f.exists():
            out[name] = json.loads(f.read_text())
    return out


GOLD = goldens()


def program_path(g: dict, tmp: Path) -> Path | None:
    p = ROOT / g["inputs"]["program"]["path"]
    if not p.exists():
        return None
    if p.suffix == ".gz":
        q = tmp / p.stem
        if not q.exists():
            q.write_bytes(gzip.decompress(p.read_bytes()))
        return q
    return p


def keyed_tables(name: str) -> list[str]:
    """The program's keyed tables (Synapse's counters cover those), for parametrization."""
    g = GOLD[name]
    p = ROOT / g["inputs"]["program"]["path"]
    if not p.exists():
        return sorted(t for t in g["tables"] if not t.startswith("tbl_"))
    raw = p.read_bytes()
    doc = json.loads(gzip.decompress(raw) if p.suffix == ".gz" else raw)
    return [t["name"] for pl in doc["pipelines"] for t in pl.get("tables", []) if t.get("key")]


def xcase(name: str, what: str):
    why = KNOWN.get((name, what))
    marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
    return pytest.param(name, what, id=f"{name}/{what}", marks=marks)


class Runs:
    """Synapse's run of each golden's inputs, once per session."""

    def __init__(self, tmp: Path):
        self.tmp, self.cache = tmp, {}

    def capture(self, g: dict) -> Path:
        pc = g["inputs"]["pcap"]
        p = ROOT / pc["path"]
        if pc.get("generate") and not (p.exists() and sha(p) == pc["sha256"]):
            p = self.tmp / Path(pc["path"]).name
            if not p.exists():
                cmd = [sys.executable if a == "python" else a for a in pc["generate"]]
                cmd = [str(p) if a == pc["path"] else a for a in cmd]
                subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
        assert sha(p) == pc["sha256"], f"{pc['path']}: not the capture the golden was recorded on ({pc.get('generate')})"
        return p

    def get(self, name: str):
        if name not in self.cache:
            g = GOLD[name]
            prog_path = program_path(g, self.tmp)
            if prog_path is None:
                pytest.skip(f"{g['inputs']['program']['path']} not found (the program is in ../shared only)")
            stale(g)
            entries_file = ROOT / g["inputs"]["entries"]["path"]
            prog = Program.load(prog_path)
            ents = load_entries(entries_file, prog_path)
            pkts = list(read_packets(str(self.capture(g))))
            trace = prog.run(pkts, ents, seed=1, ingress_port=g["options"]["ingress_port"], **switch_options(g))
            self.cache[name] = (prog_path, entries_file, trace)
        return self.cache[name]


def stale(g: dict) -> None:
    """Skip a golden whose entries file changed since it was recorded: the golden is not
    evidence about the new entries until scripts/bmv2_goldens.py records it again."""
    want = g["inputs"]["entries"]
    if want and sha(ROOT / want["path"]) != want["sha256"]:
        pytest.skip(f"{want['path']}: changed since the golden was recorded (re-record it: "
                    "python scripts/bmv2_goldens.py --bmv2 SRC record NAME)")


def switch_options(g: dict) -> dict:
    """simple_switch's options the golden was recorded with, for a Synapse that takes them
    (``SwitchOptions``); without them Synapse runs as simple_switch's defaults would."""
    try:
        from synapse_vmt.p4.externs import SwitchOptions
    except ImportError:
        return {}
    o = g["options"]
    return {"options": SwitchOptions(priority_queues=o["priority_queues"], drop_port=o["drop_port"])}


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture(scope="session")
def runs(tmp_path_factory) -> Runs:
    return Runs(tmp_path_factory.mktemp("bmv2-goldens"))


def bmv2_visits(name: str, table: str) -> dict[int, list]:
    """Per input packet (copy 0): its visits to ``table`` as (hit, action), from packets.jsonl.gz."""
    f = GOLDENS / name / "packets.jsonl.gz"
    out: dict[int, list] = {}
    if f.exists():
        for line in gzip.decompress(f.read_bytes()).decode().splitlines():
            r = json.loads(line)
            if r["copy"] == 0:
                out[r["pkt"]] = [(h >= 0, "" if a == "NULL" else a) for t, h, a in r["visits"] if t == table]
    return out


def first_diffs(name: str, trace, table: str, n: int = 2) -> str:
    ours = bmv2_visits(name, table)
    if not ours:
        return ""
    found = []
    for i in range(trace.n_packets):
        syn = [(s.entry >= 0, s.action) for s in trace.packet(i) if s.table == table]
        if syn != ours.get(i, []):
            found.append(f"packet {i}: BMv2 {ours.get(i, [])}, Synapse {syn}")
            if len(found) == n:
                break
    return "; first differing: " + "; ".join(found) if found else ""


ZERO = {"lookups": 0, "matched": 0, "actions": {}}


def bmv2_actions(actions: dict) -> dict:
    """BMv2 logs a miss of an indirect table with no default member as action "NULL"; Synapse names no action ""."""
    return dict(sorted(Counter({("" if a == "NULL" else a): n for a, n in actions.items()}).items()))


@pytest.mark.parametrize("name,table", [xcase(n, t) for n in GOLD for t in keyed_tables(n)])
def test_table_counts_equal_bmv2(runs, name, table):
    """Per keyed table: lookups, entries matched (BMv2: hits) and the actions run."""
    _, _, trace = runs.get(name)
    ours = trace.counters().get(table, ZERO)
    theirs = GOLD[name]["tables"].get(table, ZERO)
    got = (ours["lookups"], ours["matched"], dict(sorted(ours["actions"].items())))
    want = (theirs["lookups"], theirs["matched"], bmv2_actions(theirs["actions"]))
    assert got == want, f"{name} {table}: Synapse (lookups, matched, actions) {got}, BMv2 {want}" + first_diffs(name, trace, table)


def extern_summary(trace) -> dict | None:
    """What the externs did in Synapse's run (drops per reason, registers, counters), when it reports it."""
    es = getattr(trace, "extern_summary", None)
    return es() if callable(es) else es


@pytest.mark.parametrize("name,what", [xcase(n, "drops") for n in GOLD])
def test_drops_equal_bmv2(runs, name, what):
    """Packet instances dropped (BMv2: at the end of ingress or egress, or for a queue priority out of
    range; a packet whose clone left still counts as dropped)."""
    _, _, trace = runs.get(name)
    d = GOLD[name]["drops"]
    assert d.get("queue", 0) == 0, "the golden lost packets to simple_switch's egress queues: re-record it"
    want = d.get("ingress", 0) + d.get("egress", 0) + d.get("priority_out_of_range", 0)
    es = extern_summary(trace)
    got = sum(es["drops"].values()) if es and "drops" in es else int(trace.dropped.sum())
    assert got == want, f"{name}: Synapse dropped {got}, BMv2 {d}"


@pytest.mark.parametrize("name,what", [xcase(n, "parser_errors") for n in GOLD])
def test_parser_errors_equal_bmv2(runs, name, what):
    _, _, trace = runs.get(name)
    assert dict(sorted(trace.parser_rejects.items())) == GOLD[name]["parser_errors"]


@pytest.mark.parametrize("name,what", [xcase(n, "cli") for n in GOLD if GOLD[n]["cli"]["refused"]])
def test_entries_bmv2_refuses_are_refused(runs, name, what):
    """An entries line simple_switch_CLI refuses is refused by Synapse too, naming the file and line."""
    g = GOLD[name]
    prog_path = program_path(g, runs.tmp)
    if prog_path is None:
        pytest.skip("program not found")
    stale(g)
    first = g["cli"]["refused"][0]
    with pytest.raises(UserError, match=rf":{first['line']}\b"):
        load_entries(ROOT / g["inputs"]["entries"]["path"], prog_path)


# Output frames: the interpreter (this file's engine) writes none; the executor's are compared with
# these goldens byte for byte in test_p4_exec.py::test_output_packets_equal_bmv2s.


@pytest.mark.parametrize("name,what", [xcase(n, "state") for n in GOLD if "state" in GOLD[n]])
def test_register_and_counter_state_equal_bmv2(runs, name, what):
    """Registers and indirect counters cell by cell; a direct counter's cells as a multiset (BMv2 reads
    them by entry handle, Synapse by entry)."""
    prog_path, _, trace = runs.get(name)
    es = extern_summary(trace)
    assert es is not None and "registers" in es, "Synapse reports no register or counter state"
    want = GOLD[name]["state"]
    doc = json.loads(prog_path.read_text())
    direct = {c["name"]: c["binding"] for c in doc.get("counter_arrays", []) if c.get("is_direct")}

    def cells(d: dict) -> list:
        return sorted((v["packets"], v["bytes"]) for v in d.values())
    assert {k: v for k, v in es["registers"].items() if v} == want["registers"]
    assert {k: v for k, v in es.get("counters", {}).items() if v} == {k: v for k, v in want["counters"].items() if k not in direct}
    for cname, table in direct.items():
        assert cells(es.get("direct_counters", {}).get(table, {})) == cells(want["counters"].get(cname, {})), cname


def test_goldens_are_consistent():
    """Each golden's own numbers agree with each other (an independent check of the recording): every
    input packet was received; transmitted + dropped + cloned copies account for every instance; the
    committed output pcaps hold the recorded frames; actions per table sum to its lookups."""
    import dpkt

    assert GOLD, "no goldens recorded"
    for name, g in GOLD.items():
        assert g["received"] == g["packets"] == g["inputs"]["pcap"]["packets"], name
        sent = sum(g["transmitted"].values())
        dropped = sum(g["drops"].values())
        assert sent + dropped == g["instances"], (name, sent, dropped, g["instances"])
        assert g["instances"] == g["packets"] + sum(g["copies"].values()) - g["copies"].get("multicast", 0), name
        for t, c in g["tables"].items():
            assert sum(c["actions"].values()) == c["lookups"] >= c["matched"], (name, t)
        for port, o in g["output"].items():
            assert o["packets"] == g["transmitted"][port], (name, port)
            if o["pcap"]:
                raw = io.BytesIO((GOLDENS / name / o["pcap"]).read_bytes())
                frames = [bytes(b) for _, b in dpkt.pcap.Reader(raw)]
                digest = hashlib.sha256(b"".join(len(f).to_bytes(4, "big") + f for f in frames)).hexdigest()
                assert (len(frames), sum(map(len, frames)), digest) == (o["packets"], o["bytes"], o["sha256"]), (name, port)
        assert not g["log_errors"], (name, g["log_errors"])
        prov = g["provenance"]
        assert prov["bmv2"].get("commit") and prov["script_version"] >= 1 and prov["command"].startswith("simple_switch"), name


def test_every_manifest_golden_is_recorded():
    missing = [n for n in MANIFEST if n not in GOLD]
    assert not missing, f"goldens in the manifest but not recorded: {missing} (python scripts/bmv2_goldens.py record NAME)"


def test_packet_records_agree_with_counts():
    """packets.jsonl.gz (per instance) sums to golden.json's per-table counts."""
    for name in GOLD:
        f = GOLDENS / name / "packets.jsonl.gz"
        if not f.exists():
            continue
        c: Counter = Counter()
        for line in gzip.decompress(f.read_bytes()).decode().splitlines():
            for t, h, a in json.loads(line)["visits"]:
                c[(t, "lookups")] += 1
                c[(t, "matched")] += h >= 0
        for t, v in GOLD[name]["tables"].items():
            assert (c[(t, "lookups")], c[(t, "matched")]) == (v["lookups"], v["matched"]), (name, t)

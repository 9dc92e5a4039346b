"""Traffic model: the Rust arrival generator through Python, pcap fitting, CLI."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import dpkt
import numpy as np
import pytest
from click.testing import CliRunner

from synapse_vmt import _core
from synapse_vmt.cli import main
from synapse_vmt.errors import UserError
from synapse_vmt.workloads import traffic as tw

MS = 1_000_000_000

# ----------------------------------------------------------------- pcap helpers


def _udp(src: str, dst: str, sport: int, dport: int, ip_len: int, v6: bool = False) -> bytes:
    """An Ethernet frame whose IP total length is exactly ip_len."""
    if v6:
        payload = b"\0" * (ip_len - 40 - 8)
        u = dpkt.udp.UDP(sport=sport, dport=dport, data=payload)
        u.ulen = len(u)
        ip = dpkt.ip6.IP6(src=socket.inet_pton(socket.AF_INET6, src), dst=socket.inet_pton(socket.AF_INET6, dst),
                          nxt=dpkt.ip.IP_PROTO_UDP, hlim=64, data=u, plen=len(u))
        return bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP6, data=ip))
    payload = b"\0" * (ip_len - 20 - 8)
    u = dpkt.udp.UDP(sport=sport, dport=dport, data=payload)
    u.ulen = len(u)
    ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst), p=dpkt.ip.IP_PROTO_UDP, data=u)
    ip.len = len(ip)
    return bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip))


def _split(size: int) -> list[int]:
    """IP packet lengths (each 28..1500) summing to size (>= 28)."""
    n = max(1, -(-size // 1500))
    base, extra = divmod(size, n)
    return [base + (1 if i < extra else 0) for i in range(n)]


def write_capture(path: Path, sizes: list[int], fmt: str = "pcap", extra: list[bytes] = ()) -> int:
    """One UDP flow per size (distinct source ports), packets interleaved in
    time; returns the number of packets written."""
    frames = []
    for i, s in enumerate(sizes):
        for j, ln in enumerate(_split(s)):
            frames.append((j * 1e-3 + i * 1e-6, _udp("10.0.0.1", "10.0.0.2", 1000 + i % 60000, 80 + i // 60000, ln)))
    for k, fr in enumerate(extra):
        frames.append((k * 1e-7, fr))
    frames.sort(key=lambda x: x[0])
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f) if fmt == "pcap" else dpkt.pcapng.Writer(f)
        for ts, fr in frames:
            w.writepkt(fr, ts=ts)
    return len(frames)


def ks_points(points: list, sizes: np.ndarray) -> float:
    """KS distance between a points-distribution and the sizes' empirical CDF."""
    x = np.sort(sizes)
    u = np.unique(x)
    emp = np.searchsorted(x, u, side="right") / len(x)
    model = _core.flow_dist_cdf(points, list(map(float, u)))
    return float(np.max(np.abs(model - emp)))


# ----------------------------------------------------------------- fitting


@pytest.mark.parametrize(
    "family, draw, best",
    [
        ("lognormal", lambda r, n: np.exp(r.normal(8.0, 1.2, n)), "lognormal"),
        ("pareto", lambda r, n: 200.0 * (1 - r.random(n)) ** (-1 / 1.3), "pareto"),
    ],
)
def test_fit_recovers_generated_sizes(tmp_path, family, draw, best):
    rng = np.random.default_rng(1)
    sizes = np.maximum(np.round(draw(rng, 400)), 60).astype(int)
    pcap = tmp_path / "c.pcap"
    npk = write_capture(pcap, list(sizes))
    doc = tw.fit_pcap(pcap)
    s = doc["summary"]
    assert s["flows"] == 400 and s["packets"] == npk and s["skipped_packets"] == 0
    assert s["bytes"] == sizes.sum()
    assert s["median_bytes"] == np.median(sizes)
    assert doc["mean_pkt_bytes"] == pytest.approx(sizes.sum() / npk)
    # The saved empirical CDF is the sizes' CDF (downsampling error < DU).
    assert ks_points(doc["points"], sizes.astype(float)) < 0.01
    assert doc["fits"]["best"] == best
    if family == "lognormal":
        ln = doc["fits"]["lognormal"]
        assert ln["mu"] == pytest.approx(8.0, abs=0.2) and ln["sigma"] == pytest.approx(1.2, abs=0.15)
    else:
        assert doc["fits"]["pareto"]["alpha"] == pytest.approx(1.3, rel=0.2)


def test_pcapng_reads_like_pcap(tmp_path):
    sizes = [100, 3000, 45_000, 70, 1500]
    write_capture(tmp_path / "a.pcap", sizes, "pcap")
    write_capture(tmp_path / "a.pcapng", sizes, "pcapng")
    a, b = tw.fit_pcap(tmp_path / "a.pcap"), tw.fit_pcap(tmp_path / "a.pcapng")
    assert a["summary"] == b["summary"] and a["points"] == b["points"]
    assert sorted(tw.read_flows(tmp_path / "a.pcapng").bytes) == sorted(sizes)


def test_flows_are_five_tuples_across_ip_versions_and_protocols(tmp_path):
    frames = [
        _udp("10.0.0.1", "10.0.0.2", 5, 6, 100),
        _udp("10.0.0.1", "10.0.0.2", 5, 6, 200),  # same flow
        _udp("10.0.0.2", "10.0.0.1", 6, 5, 300),  # reverse direction: another flow
        _udp("2001:db8::1", "2001:db8::2", 5, 6, 400, v6=True),
        _udp("2001:db8::1", "2001:db8::2", 5, 6, 100, v6=True),
    ]
    icmp = dpkt.ip.IP(src=socket.inet_aton("1.1.1.1"), dst=socket.inet_aton("2.2.2.2"), p=dpkt.ip.IP_PROTO_ICMP,
                      data=dpkt.icmp.ICMP(type=8, data=dpkt.icmp.ICMP.Echo(id=1, seq=1, data=b"x" * 20)))
    icmp.len = len(icmp)
    frames.append(bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=icmp)))
    arp = bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_ARP, data=dpkt.arp.ARP()))
    frames.append(arp)
    p = tmp_path / "mix.pcap"
    write_capture(p, [], extra=frames)
    fl = tw.read_flows(p)
    assert sorted(fl.bytes) == sorted([300.0, 300.0, 500.0, float(len(icmp))])
    assert fl.ip_packets == 6 and fl.skipped == 1


def test_fast_header_path_agrees_with_dpkt():
    """The struct fast path and dpkt decode the same key and length."""
    vlan = dpkt.ethernet.Ethernet(_udp("10.1.1.1", "10.2.2.2", 7, 8, 300))
    vlan.vlan_tags = [dpkt.ethernet.VLANtag8021Q(id=5)]
    vlan.type = dpkt.ethernet.ETH_TYPE_8021Q
    tcp_ip = dpkt.ip.IP(src=b"\x01\x02\x03\x04", dst=b"\x05\x06\x07\x08", p=dpkt.ip.IP_PROTO_TCP,
                        data=dpkt.tcp.TCP(sport=443, dport=5555, data=b"y" * 100))
    tcp_ip.len = len(tcp_ip)
    frag = dpkt.ip.IP(src=b"\x01\x02\x03\x04", dst=b"\x05\x06\x07\x08", p=dpkt.ip.IP_PROTO_UDP, data=b"z" * 64)
    frag.offset = 800  # a later fragment: no ports
    frag.len = len(frag)
    frames = {
        1: [_udp("10.0.0.1", "10.0.0.2", 1, 2, 100), _udp("2001:db8::1", "2001:db8::9", 3, 4, 200, v6=True), bytes(vlan),
            bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=tcp_ip)),
            bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=frag))],
        101: [bytes(tcp_ip), bytes(frag)],
    }
    n = 0
    for link, frs in frames.items():
        for fr in frs:
            fast, slow = tw._key_fast(link, fr), tw._key_dpkt(link, fr)
            assert fast is not None and fast == slow, (link, fr.hex())
            n += 1
    assert n == 7
    assert tw._key_fast(1, bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_ARP, data=dpkt.arp.ARP()))) is None


def _truncate(path: Path, cut: int) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - cut])


@pytest.mark.parametrize(
    "fmt, cut, want",
    [
        ("pcap", 7, r"packet 5: truncated \(\d+ of \d+ bytes\)"),
        # Each record: 16-byte header + 114-byte frame; keep 4 bytes of the last header.
        ("pcap", 114 + 12, r"packet 5: truncated record header \(4 of 16 bytes\)"),
        ("pcapng", 5, r"packet 5: truncated"),
    ],
)
def test_truncated_capture_is_one_line_error_and_no_output(tmp_path, fmt, cut, want):
    p = tmp_path / f"t.{fmt}"
    write_capture(p, [100, 100, 100, 100, 100], fmt)
    _truncate(p, cut)
    out = tmp_path / "dist.json"
    r = CliRunner().invoke(main, ["traffic", "fit", str(p), "-o", str(out)])
    assert r.exit_code == 2, r.output
    err = r.stderr.strip()
    assert "\n" not in err and str(p) in err
    assert re.search(want, err), err
    assert not out.exists()


@pytest.mark.parametrize(
    "content, want",
    [
        (b"", "not a pcap or pcapng file"),
        (b"hello world, not a capture", "not a pcap or pcapng file"),
        (bytes.fromhex("d4c3b2a1") + b"\0" * 10, "truncated pcap file header"),
        (None, "no such file"),
        ("header only", "no IPv4/IPv6 packets"),
        ("linktype 147", "unsupported link type 147"),
    ],
)
def test_bad_capture_files(tmp_path, content, want):
    p = tmp_path / "x.pcap"
    if isinstance(content, str):
        with open(p, "wb") as f:
            w = dpkt.pcap.Writer(f, linktype=147 if "147" in content else 1)
            if "147" in content:
                w.writepkt(b"\0" * 40, ts=0)
    elif content is not None:
        p.write_bytes(content)
    r = CliRunner().invoke(main, ["traffic", "fit", str(p)])
    assert r.exit_code == 2 and want in r.stderr and str(p) in r.stderr, r.stderr


def test_fit_cli_saves_a_distribution_gen_accepts(tmp_path):
    rng = np.random.default_rng(5)
    sizes = list(np.maximum(np.exp(rng.normal(8, 1, 200)).astype(int), 60))
    p = tmp_path / "c.pcap"
    write_capture(p, sizes)
    dist = tmp_path / "d.json"
    r = CliRunner().invoke(main, ["traffic", "fit", str(p), "-o", str(dist)])
    assert r.exit_code == 0, r.output
    assert "200 flows" in r.output and "KS" in r.output and "lognormal" in r.output
    doc = json.loads(dist.read_text())
    assert doc["format"] == "synapse-flowsize" and doc["points"][-1][1] == 1.0
    out = tmp_path / "a.csv"
    r = CliRunner().invoke(main, ["traffic", "gen", "--dist", str(dist), "--flows", "300", "--duration-us", "100",
                                  "--no-clip", "-o", str(out)])
    assert r.exit_code == 0, r.output
    a = np.loadtxt(out, delimiter=",", skiprows=1, dtype=np.int64).reshape(-1, 2)
    assert np.all(np.diff(a[:, 0]) >= 0) and set(a[:, 1]) <= set(range(300))
    # Packets follow the file's mean packet size: ceil(size / mean) per flow.
    tr = tw.make_traffic(dist=str(dist), flows=300, duration_ps=100 * 1_000_000)
    assert len(a) == tr.total_packets


# ----------------------------------------------------------------- generation


def test_batches_are_sorted_and_match_flow_sizes():
    tr = tw.make_traffic(dist="caida2018", flows=300, duration_ps=MS, max_bytes=1e7, profile="burst", seed=3)
    ts, fs = [], []
    while True:
        t, f = tr.next_batch(10_007)
        assert t.dtype == np.uint64 and f.dtype == np.uint32 and len(t) == len(f)
        if len(t) == 0:
            break
        ts.append(t)
        fs.append(f)
    t, f = np.concatenate(ts), np.concatenate(fs)
    assert np.all(np.diff(t) >= 0)
    np.testing.assert_array_equal(np.bincount(f, minlength=300), tr.flow_packets())
    assert tr.remaining == 0 and len(t) == tr.total_packets
    # First packet of each flow at its start; starts non-decreasing in flow id.
    first = np.full(300, np.iinfo(np.uint64).max, dtype=np.uint64)
    np.minimum.at(first, f, t)
    np.testing.assert_array_equal(first, tr.flow_starts_ps())


def test_until_splits_at_a_time():
    a = tw.make_traffic(flows=100, duration_ps=MS, seed=1)
    b = tw.make_traffic(flows=100, duration_ps=MS, seed=1)
    t1, f1 = a.until(MS // 2)
    assert len(t1) and t1.max() < MS // 2
    t2, _ = a.next_batch(1 << 30)
    tall, fall = b.next_batch(1 << 30)
    np.testing.assert_array_equal(np.concatenate([t1, t2]), tall)
    assert t2.min() >= MS // 2


def test_gen_is_deterministic(tmp_path):
    args = ["traffic", "gen", "--flows", "500", "--duration-us", "200", "--profile", "diurnal", "--max-bytes", "1e7"]
    outs = []
    for seed, name in [(4, "a"), (4, "b"), (5, "c")]:
        o = tmp_path / f"{name}.npy"
        r = CliRunner().invoke(main, [*args, "--seed", str(seed), "-o", str(o)])
        assert r.exit_code == 0, r.output
        outs.append(o.read_bytes())
    assert outs[0] == outs[1] and outs[0] != outs[2]
    a = np.load(tmp_path / "a.npy")
    assert a.dtype.names == ("t_ps", "flow") and a["t_ps"].max() < 200 * 1_000_000


def test_spec_with_max_bytes_equals_max_bytes_option():
    a = tw.make_traffic(dist="caida2019:1e6", flows=50, duration_ps=MS, seed=2)
    b = tw.make_traffic(dist="caida2019", max_bytes=1e6, flows=50, duration_ps=MS, seed=2)
    np.testing.assert_array_equal(a.next_batch(1 << 20)[0], b.next_batch(1 << 20)[0])
    assert a.total_packets == b.total_packets and a.flow_packets().max() <= 1000


def test_rate_pps_sets_the_flow_count(tmp_path):
    o = tmp_path / "a.npy"
    r = CliRunner().invoke(main, ["traffic", "gen", "--rate-pps", "5e7", "--max-bytes", "1e6",
                                  "--duration-us", "100", "-o", str(o)])
    assert r.exit_code == 0, r.output
    flows = int(r.output.split()[0])
    tr = tw.make_traffic(flows=flows, duration_ps=100_000_000, max_bytes=1e6)
    assert tr.offered_pps == pytest.approx(5e7, rel=0.01)


@pytest.mark.parametrize(
    "args, want",
    [
        (["--flows", "10", "--rate-pps", "1"], "exactly one of --flows and --rate-pps"),
        (["--flows", "10", "--dist", "nosuch"], "nosuch: no such distribution file"),
        (["--flows", "10", "--profile", "nosuch"], "Invalid value for '--profile'"),
        (["--flows", "10", "--max-bytes", "0.5"], "leaves no probability mass"),
        (["--flows", "10", "-o", "x.txt"], "expected .csv or .npy"),
        (["--flows", "10", "--dist", "caida2019:big"], "expected NAME or NAME:MAX_BYTES"),
    ],
)
def test_gen_errors(tmp_path, args, want):
    if "-o" not in args:
        args = [*args, "-o", str(tmp_path / "a.csv")]
    r = CliRunner().invoke(main, ["traffic", "gen", *args])
    assert r.exit_code == 2 and want in r.stderr, r.stderr
    assert not (tmp_path / "a.csv").exists()


@pytest.mark.parametrize(
    "doc, want",
    [
        ('{"points": [[100, 0.5], [1000, 1.0]]}', None),
        ('{"points": [[100, 0.5], [1000, 1.0]], "mean_pkt_bytes": 500}', 500.0),
        ("{not json", "line 1: invalid JSON"),
        ('{"pts": []}', '"points"'),
        ('{"points": [[100, 0.5], [1000, 1.0]], "colour": 1}', "unknown key 'colour'"),
        ('{"points": [[100, 0.5], [50, 1.0]]}', "point 1: bytes 50 must be greater"),
        ('{"points": [[100, 0.5], [1000, 0.9]]}', "last cumulative fraction is 0.9"),
        ('{"points": [[100, "a"]]}', "number pairs"),
        ('{"points": [[100, 1.0]], "mean_pkt_bytes": -1}', '"mean_pkt_bytes" must be a number > 0'),
    ],
)
def test_distribution_files(tmp_path, doc, want):
    p = tmp_path / "d.json"
    p.write_text(doc)
    if want is None or isinstance(want, float):  # a good file: its points and its packet size (None: not given)
        pts, m = tw.load_dist(str(p))
        assert pts == [(100.0, 0.5), (1000.0, 1.0)] and m == want
    else:
        with pytest.raises(UserError, match=want) as e:
            tw.load_dist(str(p))
        assert str(p) in str(e.value)


@pytest.mark.parametrize(
    "cfg, want",
    [
        ({"dist": "caida2019", "flows": 1, "duration_ps": 10, "colour": 1}, "unknown traffic config key"),
        ({"dist": "caida2014", "flows": 1, "duration_ps": 10}, "unknown flow-size distribution"),
        ({"dist": "caida2019", "duration_ps": 10}, "needs \"flows\""),
        ({"dist": "caida2019", "flows": -1, "duration_ps": 10}, "flows: expected an integer"),
        ({"dist": "caida2019", "flows": 1, "duration_ps": 0}, "duration_ps must be > 0"),
        ({"dist": "caida2019", "flows": 1, "duration_ps": 10, "profile": [[0, 1]]}, "at least two points"),
        ({"dist": "caida2019", "flows": 1, "duration_ps": 10, "mean_pkt_bytes": 0.0}, "mean_pkt_bytes"),
    ],
)
def test_core_config_errors(cfg, want):
    with pytest.raises(ValueError, match=want):
        _core.Traffic(cfg)


def test_show_lists_builtins():
    r = CliRunner().invoke(main, ["traffic", "show"])
    assert r.exit_code == 0
    for name in [*_core.FLOW_DISTS, *_core.FIG8_PROFILES]:
        assert name in r.output


def test_builtin_cdfs_match_the_caida_files(shared_data):
    """The embedded points reproduce the raw CAIDA CDFs (TCP and UDP mixed by
    their non-zero flow counts) within the downsampling tolerance."""
    for name, sub in [("caida2019", "2019-A"), ("caida2018", "2018-A")]:
        d = shared_data / "caida" / sub
        num = {k: int((d / f"num-{k}.txt").read_text().split()[0]) for k in
               ("tcp-flows", "udp-flows", "zero-tcp", "zero-udp")}
        nt, nu = num["tcp-flows"] - num["zero-tcp"], num["udp-flows"] - num["zero-udp"]
        tcp, udp = np.loadtxt(d / "sz-tcp-cdf.txt"), np.loadtxt(d / "sz-udp-cdf.txt")
        grid = np.unique(np.geomspace(10, 1e8, 300).round())

        def step(a):
            i = np.searchsorted(a[:, 0], grid, side="right") - 1
            return np.where(i >= 0, a[np.maximum(i, 0), 1], 0.0)

        want = (nt * step(tcp) + nu * step(udp)) / (nt + nu)
        got = _core.flow_dist_cdf(name, list(grid))
        assert np.max(np.abs(got - want)) < 0.006, name

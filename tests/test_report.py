"""The run report (synapse_vmt.view): the files every run writes for it, the
per-table figures read back against the simulator's own summary, the graph
layout, two runs compared, bad input, run.png at many tables, and the live
view's Prometheus metrics. In a real browser: test_report_browser.py."""

from __future__ import annotations

import contextlib
import csv
import json
import random
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from synapse_vmt.cli import main
from synapse_vmt.view import rundir
from synapse_vmt.view.layout import layout
from test_sim import SMALL

DATA = Path(__file__).parent / "data" / "p4"


def _run(out, *extra):
    args = ["run", "-q", "-o", str(out)]
    for o in SMALL + list(extra):
        args += ["--set", o]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    return out


@contextlib.contextmanager
def serving(tmp_path, rows: int):
    """A P4Runtime server whose simulator (one ACL table, 4 PMUs) runs at
    2e6 x slower than real time, and its live view on a free loopback port;
    entered once the simulator has recorded ``rows`` windows (60 s at most)."""
    from synapse_vmt.p4rt.server import P4RuntimeServer
    from synapse_vmt.scenario import load
    from synapse_vmt.view.live import LiveServer
    from test_p4rt import _sim_prog

    scn = tmp_path / "scn.toml"
    scn.write_text('duration_ns = 100000000.0\n[pmus]\ncount = 4\n[[tables]]\nname = "acl5"\n'
                   'rules = {generate = {type = "acl", count = 100, seed = 3}}\n')
    svc = P4RuntimeServer(_sim_prog(tmp_path), sim=load(scn), sim_speed=2e6)
    live = LiveServer(lambda: svc.sim, "127.0.0.1:0")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and svc.sim.recorder.rows < rows:
            time.sleep(0.1)
        yield svc, live
    finally:
        live.stop()
        svc.stop()


def test_run_writes_the_report_and_its_inputs(tmp_path):
    out = _run(tmp_path / "r", "pmus.count=4")
    for f in ("report.html", "latency.csv", "run.json", "windows.csv", "edges.csv", "scenario.json"):
        assert (out / f).is_file(), f
    meta = json.loads((out / "run.json").read_text())
    assert meta["kind"] == "run" and meta["window_ns"] == 10_000.0
    assert meta["command"].startswith("synapse run -q -o ") and "--set pmus.count=4" in meta["command"]
    html = (out / "report.html").read_text()
    # self-contained: Plotly's JavaScript is in the page, nothing is loaded from elsewhere
    assert "<script src=" not in html and "Plotly.react" in html and len(html) > 1_000_000


def test_per_table_figures_agree_with_the_simulators_summary(tmp_path):
    """The report recomputes each table's figures from windows.csv and
    latency.csv; the simulator's summary (Rust, from its own run counters)
    must agree: hit rate and offered/processed rates exactly, p99 within the
    histogram bucket it falls in."""
    out = _run(tmp_path / "r", "pmus.count=2")
    run = rundir.load(out)
    s = json.loads((out / "summary.json").read_text())["tables"]["acl"]
    t = run.tables["acl"]
    assert t["hit_rate"] == pytest.approx(s["hit_rate"], rel=1e-9)
    assert t["offered_mpps"] == pytest.approx(s["offered_mpps"], rel=1e-9)
    assert t["throughput_mpps"] == pytest.approx(s["throughput_mpps"], rel=1e-9)
    lo, hi, c = run.latency["acl"]
    b = int(np.searchsorted(np.cumsum(c), 0.99 * c.sum()))
    assert lo[b] - 1 <= t["p99_latency_ns"] <= hi[b] and lo[b] - 1 <= s["p99_latency_ns"] <= hi[b]
    # latency.csv holds every answered key once (as the simulator's histogram does)
    inv = json.loads((out / "summary.json").read_text())["invariants"]
    assert s["keys"] <= c.sum() <= s["keys"] + inv.get("in_flight_before_drain", inv["in_flight"])
    # the heatmap grid: one row per table, one column per window, rows summing to the windows' counts
    with (out / "windows.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert run.grid["pmus"].shape == (1, len(rows))
    assert np.nansum(run.grid["throughput_mpps"]) * run.window_ns / 1e3 == pytest.approx(sum(int(r["processed"]) for r in rows))


def test_p4_run_report_graph_is_the_programs(tmp_path):
    """run --p4 writes cfg.json (synapse p4 cfg's format): the graph's nodes
    are the program's tables, its edges the program's with the PHVs of edges.csv."""
    from synapse_vmt.p4.bmv2 import read_bmv2

    out = tmp_path / "p4"
    r = CliRunner().invoke(main, ["run", "--p4", str(DATA / "router.json"), "--entries", str(DATA / "router-entries.txt"),
                                  "--pcap", str(DATA / "router.pcap"), "--pmus", "4", "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    run = rundir.load(out)
    cfg = read_bmv2(str(DATA / "router.json"))
    assert run.kind == "run --p4" and run.graph_nodes == cfg.names
    phvs: dict = {}
    with (out / "edges.csv").open() as f:
        edge_rows = list(csv.DictReader(f))
    for row in edge_rows:
        if row["dst"] != "exit":
            phvs[(row["src"], row["dst"])] = phvs.get((row["src"], row["dst"]), 0) + int(row["count"])
    for e in cfg.edges:
        assert run.graph_edges[(e.src, e.dst)] == phvs.get((e.src, e.dst), 0)
    assert all(run.graph_edges[k] == v for k, v in phvs.items())
    assert run.bottleneck == max(run.names, key=lambda n: run.tables[n]["lookups"] * run.tables[n]["mean_latency_ns"])


def test_large_programs_show_the_visited_tables():
    nodes = [f"t{i}" for i in range(50)]
    cfg = {"tables": [{"name": n} for n in nodes], "edges": [{"src": f"t{i}", "dst": f"t{i + 1}"} for i in range(49)]}
    shown, edges = rundir._graph(["t0", "t7", "t9"], {}, cfg, {("t0", "t7"): 5.0, ("t7", "t9"): 3.0})
    assert shown == ["t0", "t7", "t9"] and edges == {("t0", "t7"): 5.0, ("t7", "t9"): 3.0}
    shown, edges = rundir._graph(["t0"], {}, {**cfg, "tables": cfg["tables"][:3], "edges": cfg["edges"][:2]}, {})
    assert shown == ["t0", "t1", "t2"] and edges == {("t0", "t1"): 0.0, ("t1", "t2"): 0.0}


@pytest.mark.parametrize("seed", range(5))
def test_layout_places_every_table_once_and_edges_go_forward(seed):
    """On random DAGs (plus a back edge): distinct positions, every DAG edge
    from an earlier layer to a later one, layers in reading order (row, then column)."""
    rnd = random.Random(seed)
    n = rnd.randint(2, 60)
    nodes = [f"n{i}" for i in range(n)]
    edges = [(nodes[i], nodes[j]) for i in range(n) for j in range(i + 1, min(n, i + 4)) if rnd.random() < 0.5]
    edges.append((nodes[-1], nodes[0]))  # a cycle: ignored for the layers
    lay = layout(nodes, edges, per_row=7)
    assert set(lay.pos) == set(nodes) and len(set(lay.pos.values())) == n
    for s, t in edges[:-1]:
        assert lay.layer[s] < lay.layer[t]
    for s in nodes:
        for t in nodes:
            if lay.layer[s] < lay.layer[t]:
                rs, rt = lay.layer[s] // 7, lay.layer[t] // 7
                assert rs < rt or (rs == rt and lay.pos[s][0] < lay.pos[t][0])
                if rs < rt:
                    assert lay.pos[s][1] < lay.pos[t][1]


def test_layout_of_tables_without_edges_fills_rows():
    """A scenario's independent tables (no edge): one per layer after the
    DAG's, 12 to a row, so 100 of them take 9 rows, not one column of 100."""
    lay = layout([f"t{i}" for i in range(100)], [], per_row=12)
    assert lay.rows == 9 and len(set(lay.pos.values())) == 100
    assert [lay.pos[f"t{i}"] for i in (0, 11, 12)] == [(0.0, 0.0), (11.0, 0.0), (0.0, lay.pos["t12"][1])]
    assert lay.pos["t12"][1] > 0 and lay.height < 20
    lay = layout(["a", "b", "c", "x"], [("a", "b"), ("a", "c")], per_row=12)  # x follows the DAG's two layers
    assert lay.layer == {"a": 0, "b": 1, "c": 1, "x": 2} and lay.rows == 1


def test_report_command_compares_two_runs(tmp_path):
    a = _run(tmp_path / "a", "pmus.count=1")
    b = _run(tmp_path / "b", "pmus.count=4")
    r = CliRunner().invoke(main, ["report", str(a), str(b)])
    assert r.exit_code == 0, r.output
    page = (b / "compare.html").read_text()
    sa, sb = (json.loads((d / "summary.json").read_text())["tables"]["acl"] for d in (a, b))
    # the per-table table: A, B and B - A of the hit rate (3 significant digits)
    assert f"<td>{sa['hit_rate']:.3g}</td><td>{sb['hit_rate']:.3g}</td><td>{sb['hit_rate'] - sa['hit_rate']:+.3g}</td>" in page
    assert "pmus.count" in page  # the configuration difference
    r = CliRunner().invoke(main, ["report", str(a)])
    assert r.exit_code == 0 and (a / "report.html").is_file()


@pytest.mark.parametrize("setup, msg", [
    (lambda d: None, "no such run directory"),
    (lambda d: d.mkdir(), "no windows.csv"),
    (lambda d: (d.mkdir(), (d / "windows.csv").write_text("t_ns,table\n1,a\n")), "windows.csv:1: missing column(s) arrived"),
    (lambda d: (d.mkdir(), (d / "windows.csv").write_text(",".join(rundir.NEEDED) + "\n1,a,2\n")), "windows.csv:2: expected 10 fields, found 3"),
])
def test_report_bad_directory_is_one_line_exit_2(tmp_path, setup, msg):
    d = tmp_path / "x"
    setup(d)
    r = CliRunner().invoke(main, ["report", str(d)])
    assert r.exit_code == 2 and msg in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert not (d / "report.html").exists()


def test_run_png_with_many_tables_is_heatmaps_not_a_legend(tmp_path, monkeypatch):
    """Past 8 tables run.png shows a row per table (images) and the latency
    CDFs of 8 tables plus the others pooled: no legend lists every table."""
    from synapse_vmt import report

    T, W = 37, 5
    rng = np.random.default_rng(1)
    w = {"t_ns": np.repeat(np.arange(1, W + 1) * 1e4, T), "table": np.tile(np.arange(T), W)}
    for c in ("arrived", "processed", "hits", "misses", "hbm_bytes", "pmus"):
        w[c] = rng.integers(1, 100, T * W)
    w["lat_mean_ns"] = rng.uniform(20, 2000, T * W)
    w["lat_p99_ns"] = w["lat_mean_ns"] * 3
    edges = np.array([0.0, 20, 40, 80, 160, 320])
    hists = {f"t{j}": (edges, rng.integers(0, 50, 5)) for j in range(T)}
    seen = {}
    monkeypatch.setattr(report, "save_png", lambda fig, path: seen.update(fig=fig))
    report.plot_run(tmp_path / "run.png", w, [f"t{j}" for j in range(T)], 1e4, hists)
    fig = seen["fig"]
    assert sum(len(a.images) for a in fig.axes) == 5
    legends = [a.get_legend() for a in fig.axes if a.get_legend() is not None]
    assert legends and max(len(lg.get_texts()) for lg in legends) == 9  # 8 tables + "29 others (pooled)"
    heat = fig.axes[0]
    assert heat.images[0].get_array().shape == (T, W)
    # rows sorted by load (offered PHVs), the heaviest first
    load = np.bincount(w["table"], weights=w["arrived"], minlength=T)
    assert heat.get_yticklabels()[0].get_text() == f"t{int(np.argmax(load))}"


def test_live_metrics_of_a_serving_simulator(tmp_path):
    """serve --sim's live view: /metrics in Prometheus format per table
    (hits/lookups since the start agree with the simulator's own hit rate),
    / is the report's page, /view.json its figures, advancing with the simulation."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from test_p4rt import ACL5

    with serving(tmp_path, 20) as (svc, live):
        get = lambda p: urllib.request.urlopen(f"http://127.0.0.1:{live.port}{p}", timeout=30).read().decode()  # noqa: E731
        samples = [s for f in text_string_to_metric_families(get("/metrics")) for s in f.samples]
        with svc.sim.lock:
            summ = svc.sim.sim.summary()["tables"]["acl5"]
            look, hits = svc.sim.recorder.totals["acl5"]
        val = lambda name, **lab: next(s.value for s in samples  # noqa: E731
                                       if s.name == name and all(s.labels.get(k) == v for k, v in lab.items()))
        assert look >= val("synapse_table_lookups_total", table="acl5") > 0  # read before: the simulation went on
        assert val("synapse_table_hits_total", table="acl5") / val("synapse_table_lookups_total", table="acl5") == \
            pytest.approx(summ["hit_rate"], abs=0.05)
        assert 0 <= val("synapse_table_hit_rate", table="acl5") <= 1
        assert val("synapse_table_pmus", table="acl5") == 4
        assert val("synapse_table_latency_ns", table="acl5", quantile="0.99") >= val("synapse_table_latency_ns", table="acl5", quantile="0.5") > 0
        assert val("synapse_sim_time_ns") > 0
        if val("synapse_updates_committed_total") == 0:  # no update yet: no latency, not a latency of 0
            assert np.isnan(val("synapse_update_latency_ns", quantile="0.99"))
        else:
            assert val("synapse_update_latency_ns", quantile="0.99") > 0
        assert "Synapse run report" in get("/") and '<script src="plotly.min.js">' in get("/")
        v1 = json.loads(get("/view.json"))
        assert {"fig-graph", "fig-heatmap", "fig-cdf"} <= set(v1["figures"]) and "html-tables" in v1["html"]

        def last_window(v) -> float:
            x = v["figures"]["fig-heatmap"]["data"][0]["x"]
            if isinstance(x, dict):  # Plotly's typed array: {"dtype", "bdata": base64}
                import base64

                x = np.frombuffer(base64.b64decode(x["bdata"]), dtype=x["dtype"])
            return float(max(x))

        t1 = last_window(v1)
        time.sleep(1.0)
        t2 = last_window(json.loads(get("/view.json")))
        assert t2 > t1  # the view follows the simulation
        assert ACL5 in svc.sim.tables

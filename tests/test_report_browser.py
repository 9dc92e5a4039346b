"""The report in a real browser: headless Chromium (Debian's ``chromium``)
loads each kind of page and dumps the DOM it rendered. Checked: no
JavaScript error (the page records every one in ``#js-errors``), every
figure drawn (``body[data-rendered]``), the graph's node labels are the
program's tables, a 37-table switch run's heatmap has 37 rows, in load
order, and a 100-table run's has its 100 rows all labelled. Without chromium the tests skip (fail in CI: tests/requires.py)."""

from __future__ import annotations

import csv
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from requires import tool

from synapse_vmt.cli import main
from synapse_vmt.view.figures import labels

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "p4"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(autouse=True)
def _chromium():
    tool(None if CHROMIUM else "chromium is not installed (Debian: apt-get install chromium)")


class Dom(HTMLParser):
    """What the browser drew: per figure div, the texts of its node labels
    (``g.textpoint``) and y-axis ticks (``g.ytick``); the error list; the
    body's data-rendered."""

    def __init__(self, text: str):
        super().__init__()
        self.stack: list[tuple[str, dict]] = []
        self.fig: dict[str, dict[str, list[str]]] = {}
        self.errors = ""
        self.rendered = None
        self.feed(text)

    VOID = {"meta", "link", "br", "img", "input", "hr", "wbr", "area", "base", "col", "embed", "source", "track"}  # HTML's

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.rendered = a.get("data-rendered")
        if tag not in self.VOID:
            self.stack.append((tag, a))

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        if any(t == tag for t, _ in self.stack):
            while self.stack.pop()[0] != tag:
                pass

    def handle_data(self, data):
        if not self.stack:
            return
        tag, a = self.stack[-1]
        if a.get("id") == "js-errors":
            self.errors += data
        if tag != "text":
            return
        fig = next((x.get("id") for _, x in reversed(self.stack) if (x.get("id") or "").startswith("fig-")), None)
        classes = {c for _, x in self.stack for c in (x.get("class") or "").split()}
        if fig is None:
            return
        for kind in ("textpoint", "ytick"):
            if kind in classes:
                self.fig.setdefault(fig, {}).setdefault(kind, []).append(data)


def render(url: str, budget_ms: int = 30000) -> Dom:
    """The DOM after the page's scripts ran (``budget_ms`` of virtual time:
    the live page polls every second, so it gets a short one)."""
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        "--window-size=1500,3000", f"--virtual-time-budget={budget_ms}", "--dump-dom", url],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and "</html>" in r.stdout, r.stderr[-2000:]
    dom = Dom(r.stdout)
    assert dom.errors.strip() == "", f"JavaScript errors: {dom.errors}"
    return dom


def _figures(page: Path) -> int:
    text = page.read_text()
    return text.count('class="fig"')


def _ticks(dom: Dom, fig: str) -> list[str]:
    return list(dict.fromkeys(dom.fig.get(fig, {}).get("ytick", [])))


def test_p4_run_report_renders_with_the_programs_tables(tmp_path):
    from synapse_vmt.p4.bmv2 import read_bmv2

    out = tmp_path / "p4"
    r = CliRunner().invoke(main, ["run", "--p4", str(DATA / "router.json"), "--entries", str(DATA / "router-entries.txt"),
                                  "--pcap", str(DATA / "router.pcap"), "--pmus", "4", "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    dom = render((out / "report.html").as_uri())
    assert dom.rendered == str(_figures(out / "report.html")) and int(dom.rendered) >= 4
    names = read_bmv2(str(DATA / "router.json")).names
    assert sorted(dom.fig["fig-graph"]["textpoint"]) == sorted(labels(names).values())
    with (out / "windows.csv").open() as f:
        simulated = {row["table"] for row in csv.DictReader(f)}
    assert set(_ticks(dom, "fig-heatmap")) == {labels(names)[n] for n in simulated}


def test_switch_run_heatmap_has_37_rows_in_load_order(tmp_path, shared_data):
    """The P4_16 switch program (123 tables, 37 visited by the example
    traffic): the graph draws the 37 visited tables, the heatmap has 37 rows,
    the most offered PHVs first (from windows.csv, summed here)."""
    prog = shared_data / "p4" / "switch-p416.json"
    ent = tmp_path / "entries.txt"
    r = CliRunner().invoke(main, ["p4", "entries", "gen", str(prog), "--count", "16", "--seed", "1", "-o", str(ent)])
    assert r.exit_code == 0, r.output
    out = tmp_path / "switch"
    r = CliRunner().invoke(main, ["run", "--p4", str(prog), "--entries", str(ent), "--traffic", str(ROOT / "examples/switch/traffic.toml"),
                                  "--pmus", "48", "--duration-ns", "60000", "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    load: dict[str, int] = {}
    with (out / "windows.csv").open() as f:
        for row in csv.DictReader(f):
            load[row["table"]] = load.get(row["table"], 0) + int(row["arrived"])
    assert len(load) == 37
    dom = render((out / "report.html").as_uri())
    assert dom.rendered == str(_figures(out / "report.html"))
    assert sorted(dom.fig["fig-graph"]["textpoint"]) == sorted(load)
    rows = _ticks(dom, "fig-heatmap")
    assert len(rows) == 37 and rows == sorted(load, key=lambda n: (-load[n], n))
    with (out / "latency.csv").open() as f:
        answered = {row["table"] for row in csv.DictReader(f)}  # tables with an answered key (the pipeline is still filling)
    assert sorted(_ticks(dom, "fig-latmap")) == sorted(answered)


def test_report_of_100_tables_labels_every_row(tmp_path):
    """Readable at 100 tables: a run directory of 100 independent tables
    (``windows.csv`` only, written here with a known load per table) gives a
    heatmap whose 100 rows are all labelled, the most offered first, and a
    graph with the 100 tables as nodes."""
    from synapse_vmt.view import rundir, write_report

    T, W = 100, 20
    arrived = {f"t{j:03d}": 1000 + 37 * ((j * 53) % T) for j in range(T)}  # distinct loads, not in name order
    with (tmp_path / "windows.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(rundir.NEEDED)
        for k in range(W):
            for n, a in arrived.items():
                row = {"t_ns": (k + 1) * 1e4, "table": n, "arrived": a, "processed": a, "hits": a // 2, "misses": a - a // 2,
                       "hbm_bytes": 64 * (a - a // 2), "lat_mean_ns": 50.0, "lat_p99_ns": 400.0, "pmus": 1}
                w.writerow([row[c] for c in rundir.NEEDED])
    dom = render(write_report([tmp_path]).as_uri())
    assert dom.rendered == str(_figures(tmp_path / "report.html"))
    assert _ticks(dom, "fig-heatmap") == sorted(arrived, key=lambda n: -arrived[n])
    assert sorted(dom.fig["fig-graph"]["textpoint"]) == sorted(arrived)


def test_report_of_a_long_run_draws_bins(tmp_path):
    """A run of 5,000 windows (more than view.bins.CAP) is drawn in bins of 4
    windows: the page says so and draws without a JavaScript error, the heatmap's
    hover carrying each bin's smallest and largest window."""
    from synapse_vmt.view import rundir, write_report

    W = 5000
    with (tmp_path / "windows.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(rundir.NEEDED)
        for k in range(W):
            for n in ("a", "b"):
                spike = 5000.0 if (n, k) == ("a", 2500) else 60.0  # one window's p99
                w.writerow([(k + 1) * 1e4, n, 100, 100, 50, 50, 64 * 50, 50.0, spike, 1])
    page = write_report([tmp_path])
    text = page.read_text()
    assert "5000 windows of 10 µs, drawn in bins of 4" in text and "windows from" in text
    dom = render(page.as_uri())
    assert dom.rendered == str(_figures(page))
    assert _ticks(dom, "fig-heatmap") == ["a", "b"]


def test_compare_sweep_and_live_pages_render(tmp_path):
    import urllib.request

    from test_sim import SMALL

    def run(out, n):
        args = ["run", "-q", "-o", str(out), "--set", f"pmus.count={n}"]
        for o in SMALL:
            args += ["--set", o]
        assert CliRunner().invoke(main, args).exit_code == 0
    run(tmp_path / "a", 1)
    run(tmp_path / "b", 4)
    r = CliRunner().invoke(main, ["report", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(tmp_path / "ab.html")])
    assert r.exit_code == 0, r.output
    dom = render((tmp_path / "ab.html").as_uri())
    assert dom.rendered == str(_figures(tmp_path / "ab.html"))
    assert dom.fig["fig-graph"]["textpoint"] == ["acl"]

    grid = tmp_path / "grid.toml"
    grid.write_text('seeds = [1]\n[set]\nduration_ns = 30000\n"traffic.flows" = 100\n[grid]\n"pmus.count" = [1, 2]\n')
    r = CliRunner().invoke(main, ["sweep", str(grid), "-o", str(tmp_path / "sw"), "-w", "1", "-q"])
    assert r.exit_code == 0, r.output
    dom = render((tmp_path / "sw" / "report.html").as_uri())
    assert dom.rendered == "1" and _ticks(dom, "fig-points") == ["acl"]

    from test_report import serving

    with serving(tmp_path, 5) as (svc, live):
        url = f"http://127.0.0.1:{live.port}/"
        page = urllib.request.urlopen(url, timeout=30).read().decode()
        dom = render(url, 3000)  # loads plotly.min.js from the server, polls view.json
        assert dom.rendered == str(page.count('class="fig"')) and dom.fig["fig-graph"]["textpoint"] == ["acl5"]


def test_fast_run_report_renders(tmp_path):
    """``run --mode fast``'s report (estimated windows, no per-window latency) draws without a JavaScript error."""
    out = tmp_path / "fast"
    r = CliRunner().invoke(main, ["run", "--mode", "fast", "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    dom = render((out / "report.html").as_uri())
    assert dom.rendered == str(_figures(out / "report.html")) and int(dom.rendered) >= 2
    assert _ticks(dom, "fig-heatmap"), "the heatmap of the estimated windows has no rows"

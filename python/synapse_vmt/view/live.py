"""The live view of ``synapse serve --sim``: the report's page, updating as
the simulation runs, and Prometheus metrics, on one loopback HTTP port.

- ``/``: the run report's page (:func:`synapse_vmt.view.single_page`) of the
  simulation so far; it polls ``/view.json`` every second and redraws;
- ``/view.json``: the page's figures and tables, rebuilt from the recorded windows;
- ``/plotly.min.js``: Plotly's JavaScript (the page loads it from here: nothing
  from outside);
- ``/metrics``: Prometheus text format (``prometheus_client``), per table:
  ``synapse_table_hit_rate``, ``synapse_table_throughput_mpps``,
  ``synapse_table_offered_mpps``, ``synapse_table_latency_ns{quantile="0.5"|"0.99"}``,
  ``synapse_table_latency_mean_ns``, ``synapse_table_pmus``,
  ``synapse_table_hbm_gbps`` (all over the last :attr:`Recorder.recent`
  windows; quantiles: the last of those windows that answered keys), ``synapse_table_lookups_total``,
  ``synapse_table_hits_total``; and ``synapse_update_latency_ns{quantile}``,
  ``synapse_updates_committed_total``, ``synapse_sim_time_ns``,
  ``synapse_invariant_violations_total{check}``.

A :class:`Recorder` on the serve target keeps a bounded number of recent
windows (the serve loop runs for as long as the server does); the target's
thread feeds it after each slice, under the simulator's lock.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

from synapse_vmt import cmdline
from synapse_vmt.errors import UserError
from synapse_vmt.view import rundir
from synapse_vmt.view.bins import WindowBins


class Recorder:
    """The last ``keep`` windows of every table, the edge counts since the
    start, for the live report and the metrics."""

    recent = 10  # windows the metrics average over

    def __init__(self, names: list[str], window_ns: float, keep: int = 1000):
        self.names, self.window_ns, self.keep = list(names), float(window_ns), int(keep)
        self.parts: list[dict] = []
        self.rows = 0
        self.edges: dict[tuple[str, str], float] = {}
        self.totals = {n: [0, 0] for n in self.names}  # lookups, hits since the start

    def add(self, w: dict, e: dict) -> None:
        if len(w.get("t_ns", ())):
            w = {k: np.asarray(v) for k, v in w.items()}
            self.parts.append(w)
            self.rows += len(w["t_ns"])
            tab = w["table"].astype(np.int64)
            lk = np.bincount(tab, weights=(w["hits"] + w["misses"]).astype(float), minlength=len(self.names))
            hi = np.bincount(tab, weights=w["hits"].astype(float), minlength=len(self.names))
            for j, n in enumerate(self.names):
                self.totals[n][0] += int(lk[j])
                self.totals[n][1] += int(hi[j])
            # bounded: drop the oldest batches once more than keep windows per table are held
            while self.parts and self.rows - len(self.parts[0]["t_ns"]) >= self.keep * len(self.names):
                self.rows -= len(self.parts.pop(0)["t_ns"])
        for s, t, c in zip(e.get("src", ()), e.get("dst", ()), e.get("count", ())):
            if t >= 0:
                k = (self.names[int(s)], self.names[int(t)])
                self.edges[k] = self.edges.get(k, 0.0) + float(c)

    def windows(self) -> dict[str, np.ndarray]:
        if not self.parts:
            return {}
        keys = self.parts[0].keys()
        return {k: np.concatenate([p[k] for p in self.parts]) for k in keys}


def _hist(edges: np.ndarray, counts: np.ndarray):
    nz = np.flatnonzero(np.asarray(counts) > 0)
    return np.asarray(edges)[nz], np.asarray(edges)[nz + 1], np.asarray(counts, dtype=float)[nz]


def snapshot(target) -> rundir.Run | None:
    """The run so far as a :class:`~synapse_vmt.view.rundir.Run` (None before
    any window), read under the target's lock."""
    rec = getattr(target, "recorder", None)
    if rec is None:
        return None
    with target.lock:
        w = rec.windows()
        core = target.sim.core if hasattr(target, "sim") else target.core
        lat = {n: _hist(*core.latency_histogram(n)) for n in rec.names}
        inv = core.check_invariants()
        edges = dict(rec.edges)
        summ = core.summary()
        config = json.loads(core.config_json())
        decisions = _decisions(getattr(target, "opt", None))
    if not w:
        return None
    num = {k: np.asarray(v, dtype=float) for k, v in w.items() if k != "table"}
    t_ns = np.unique(num["t_ns"])
    bins = WindowBins(ends=t_ns)
    bins.add(num.pop("t_ns"), np.asarray(w["table"], dtype=np.int64), num)
    summ["invariants"] = inv
    run = rundir.build(Path("(live)"), rec.names, bins, rec.window_ns,
                       meta={"kind": "serve --sim (live)", "command": cmdline.text()}, summary=summ, config=config,
                       edges=edges, latency=lat, cfg=getattr(target, "cfg_json", None))
    run.decisions = [d for d in decisions if d["t_ns"] >= t_ns[0] - rec.window_ns]  # those within the recorded windows
    return run


def _decisions(opt) -> list[dict]:
    """The serve optimizer's periods as the report's decisions."""
    if opt is None:
        return []
    out = []
    for h in opt.history:
        held = {n: int(round(v)) for n, v in h["pmus_held"].items()}
        out.append({"t_ns": h["t_ns"], "held": held, "target": dict(h["pmus"]),
                    "note": f"input {h['input_mpps']:.3g} Mpps, objective {h['objective_mpps']:.3g} Mpps, solved in {h['solve_us']:.0f} µs"})
    return out


# ---------------------------------------------------------------- Prometheus


class Collector:
    """A prometheus_client collector reading the current target on each scrape."""

    def __init__(self, current):
        self.current = current  # () -> the serve target or None

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        target = self.current()
        rec = getattr(target, "recorder", None)
        if rec is None:
            return
        g = {k: GaugeMetricFamily(f"synapse_table_{k}", h, labels=["table"]) for k, h in (
            ("hit_rate", "hits / lookups over the recent windows"),
            ("throughput_mpps", "PHVs processed per µs over the recent windows"),
            ("offered_mpps", "PHVs arrived per µs over the recent windows"),
            ("latency_mean_ns", "mean per-key match latency over the recent windows"),
            ("pmus", "PMUs held at the last window's end"),
            ("hbm_gbps", "HBM bytes read per ns over the recent windows"))}
        q = GaugeMetricFamily("synapse_table_latency_ns", "per-key match latency quantile, the last window that answered keys",
                              labels=["table", "quantile"])
        lookups = CounterMetricFamily("synapse_table_lookups", "keys looked up since the start", labels=["table"])
        hits = CounterMetricFamily("synapse_table_hits", "PMU hits since the start", labels=["table"])
        with target.lock:
            w = rec.windows()
            core = target.sim.core if hasattr(target, "sim") else target.core
            upd = core.update_stats() if hasattr(core, "update_stats") else {}
            inv = core.check_invariants()
            now = core.now_ns()
            totals = {n: list(v) for n, v in rec.totals.items()}
        if w:
            t = np.asarray(w["t_ns"], dtype=float)
            ends = np.unique(t)[-rec.recent:]
            span = len(ends) * rec.window_ns
            m0 = np.isin(t, ends)
            tab = np.asarray(w["table"], dtype=np.int64)
            for j, n in enumerate(rec.names):
                m = m0 & (tab == j)
                if not m.any():
                    continue
                lk = float(np.sum(w["hits"][m]) + np.sum(w["misses"][m]))
                last = np.flatnonzero(m)[-1]
                g["hit_rate"].add_metric([n], float(np.sum(w["hits"][m]) / lk) if lk else float("nan"))
                g["throughput_mpps"].add_metric([n], float(np.sum(w["processed"][m]) / span * 1e3))
                g["offered_mpps"].add_metric([n], float(np.sum(w["arrived"][m]) / span * 1e3))
                lat = np.nan_to_num(np.asarray(w["lat_mean_ns"][m], dtype=float))
                n_k = np.asarray(w["hits"][m] + w["misses"][m], dtype=float)
                g["latency_mean_ns"].add_metric([n], float(np.sum(lat * n_k) / lk) if lk else float("nan"))
                g["pmus"].add_metric([n], float(w["pmus"][last]))
                g["hbm_gbps"].add_metric([n], float(np.sum(w["hbm_bytes"][m]) / span))
                # quantiles do not add up over windows: the last recent window in which keys were answered
                answered = np.flatnonzero(m & np.isfinite(np.asarray(w["lat_p99_ns"], dtype=float)))
                if len(answered):
                    k = answered[-1]
                    if "lat_p50_ns" in w:
                        q.add_metric([n, "0.5"], float(w["lat_p50_ns"][k]))
                    q.add_metric([n, "0.99"], float(w["lat_p99_ns"][k]))
        for n, (lk, hi) in totals.items():
            lookups.add_metric([n], lk)
            hits.add_metric([n], hi)
        yield from g.values()
        yield from (q, lookups, hits)
        u = GaugeMetricFamily("synapse_update_latency_ns", "rule update latency (request to every PMU consistent) since the start",
                              labels=["quantile"])
        if upd:
            done = upd.get("committed", 0) > 0  # before the first commit the simulator says 0: no latency yet (NaN, as Prometheus's summaries)
            u.add_metric(["0.5"], float(upd.get("latency_ns_p50", float("nan"))) if done else float("nan"))
            u.add_metric(["0.99"], float(upd.get("latency_ns_p99", float("nan"))) if done else float("nan"))
            c = CounterMetricFamily("synapse_updates_committed", "rule updates committed since the start")
            c.add_metric([], float(upd.get("committed", 0)))
            yield c
        yield u
        yield GaugeMetricFamily("synapse_sim_time_ns", "simulated time", value=float(now))
        v = CounterMetricFamily("synapse_invariant_violations", "PHVs that broke an invariant", labels=["check"])
        for k in ("lost", "duplicates", "wrong_action", "stale_answers"):
            v.add_metric([k], float(inv.get(k, 0)))
        yield v


# ---------------------------------------------------------------- the HTTP server


class LiveServer:
    """The loopback HTTP server of the live view; ``current()`` gives the
    serve target now (a new pipeline replaces it)."""

    def __init__(self, current, listen: str = "127.0.0.1:9560", interval_ms: int = 1000):
        from prometheus_client import CollectorRegistry

        self.current, self.interval_ms = current, int(interval_ms)
        self.registry = CollectorRegistry()
        self.registry.register(Collector(current))
        host, _, port = listen.rpartition(":")
        try:
            self.httpd = ThreadingHTTPServer((host or "127.0.0.1", int(port)), self._handler())
        except (OSError, ValueError) as e:
            raise UserError(f"--http {listen}: cannot listen there ({e})") from None
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True, name="synapse-live-http")
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()

    def page(self) -> str:
        from synapse_vmt.view import single_page
        from synapse_vmt.view.page import render

        run = snapshot(self.current())
        if run is None:
            return render("Synapse live", "<h1>Synapse live view</h1><p id=\"live-status\">waiting for the simulation's first "
                          "window (reload in a moment)</p>", [], None, embed_js=False)
        return single_page(run, live_interval_ms=self.interval_ms, embed_js=False)

    def view_json(self) -> dict:
        from synapse_vmt.view import sections
        from synapse_vmt.view.page import figure_json

        run = snapshot(self.current())
        if run is None:
            return {"figures": {}, "html": {}}
        from synapse_vmt.view import facts

        secs = sections(run)
        return {"figures": {f"fig-{s.id}": figure_json(s.figure) for s in secs if s.figure is not None},
                "html": {f"html-{s.id}": s.html for s in secs if s.html} | {"facts": facts(run)}}

    def _handler(self):
        live = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet: the server's stderr is the serve command's
                pass

            def _send(self, body: bytes, ctype: str, cache: bool = False) -> None:
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "max-age=3600" if cache else "no-store")
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):  # noqa: N802 - http.server's name
                from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

                path = self.path.split("?", 1)[0]
                try:
                    if path in ("/", "/index.html"):
                        self._send(live.page().encode(), "text/html; charset=utf-8")
                    elif path == "/view.json":
                        self._send(json.dumps(live.view_json(), separators=(",", ":")).encode(), "application/json")
                    elif path == "/plotly.min.js":
                        from synapse_vmt.view.page import plotly_js

                        self._send(plotly_js().encode(), "application/javascript", cache=True)
                    elif path == "/metrics":
                        self._send(generate_latest(live.registry), CONTENT_TYPE_LATEST)
                    else:
                        self.send_error(404, "the live view serves /, /view.json, /plotly.min.js and /metrics")
                except BrokenPipeError:
                    pass

        return Handler

"""The report as one HTML file: sections of Plotly figures and HTML tables,
Plotly's JavaScript embedded (the file opens offline, nothing is fetched).

The same page serves the live view (``synapse serve --sim``): there it polls
``view.json`` and redraws each figure and table in place (``Plotly.react``).
A script installed before anything else records any JavaScript error in
``#js-errors`` (the browser tests read it) and ``body[data-rendered]`` says
every figure was drawn.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass

import plotly.io as pio


@dataclass
class Section:
    id: str
    title: str
    figure: object = None  # a plotly Figure
    html: str = ""  # or an HTML fragment
    note: str = ""  # a line under the title: how to read it


CSS = """
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 0 auto; max-width: 1500px; padding: 12px 24px; color: #222; }
h1 { font-size: 22px; margin: 6px 0; } h2 { font-size: 18px; margin: 22px 0 4px; border-bottom: 1px solid #ddd; }
.note { color: #555; font-size: 13px; margin: 2px 0 6px; } code, pre { font-size: 12.5px; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; max-height: 480px; }
table.t { border-collapse: collapse; font-size: 12.5px; } table.t td, table.t th { padding: 2px 8px; border-bottom: 1px solid #eee; text-align: right; }
table.t th { background: #f2f2f2; position: sticky; top: 0; } table.t td:first-child, table.t th:first-child { text-align: left; }
tr.hl td { background: #fde8e8; font-weight: bold; } .bad { color: #c00; font-weight: bold; } .ok { color: #070; font-weight: bold; }
.facts span { display: inline-block; margin-right: 22px; font-size: 14px; } .cols { display: flex; gap: 24px; flex-wrap: wrap; }
#js-errors:empty { display: none; } #js-errors { color: #c00; }
"""

ERRORS_JS = """
window.__errors = [];
function __err(msg) { window.__errors.push(String(msg)); var e = document.getElementById('js-errors');
  if (e) e.textContent = window.__errors.join('\\n'); }
window.addEventListener('error', function (ev) { __err(ev.message || ev); });
window.addEventListener('unhandledrejection', function (ev) { __err('unhandled rejection: ' + (ev.reason && ev.reason.message || ev.reason)); });
"""

DRAW_JS = """
var CFG = {responsive: true, displaylogo: false, modeBarButtonsToRemove: ['lasso2d', 'select2d']};
function draw(figs) {
  var jobs = [];
  for (var id in figs) {
    var el = document.getElementById(id);
    if (!el) { __err('no element ' + id); continue; }
    jobs.push(Plotly.react(el, figs[id].data, figs[id].layout, CFG));
  }
  return Promise.all(jobs);
}
draw(FIGS).then(function () { document.body.dataset.rendered = Object.keys(FIGS).length; })
          .catch(function (e) { __err(e && e.message || e); });
"""

LIVE_JS = """
function poll() {
  fetch('view.json', {cache: 'no-store'}).then(function (r) { return r.json(); }).then(function (v) {
    for (var id in v.html) { var el = document.getElementById(id); if (el) el.innerHTML = v.html[id]; }
    return draw(v.figures);
  }).catch(function (e) { var s = document.getElementById('live-status'); if (s) s.textContent = 'not updating: ' + e; })
    .finally(function () { setTimeout(poll, INTERVAL_MS); });
}
setTimeout(poll, INTERVAL_MS);
"""


def _json(obj) -> str:
    # "</" cannot appear inside a <script> block
    return json.dumps(obj, separators=(",", ":")).replace("</", "<\\/")


def figure_json(fig) -> dict:
    return json.loads(pio.to_json(fig, validate=False, remove_uids=True))


def plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def render(title: str, header: str, sections: list[Section], live_interval_ms: int | None = None,
           embed_js: bool = True) -> str:
    """The page. ``live_interval_ms``: poll ``view.json`` that often;
    ``embed_js`` False: load Plotly from ``plotly.min.js`` beside the page (the live server serves it)."""
    figs = {f"fig-{s.id}": figure_json(s.figure) for s in sections if s.figure is not None}
    body = []
    for s in sections:
        body.append(f'<section id="sec-{s.id}"><h2>{html.escape(s.title)}</h2>')
        if s.note:
            body.append(f'<p class="note">{s.note}</p>')
        if s.figure is not None:
            body.append(f'<div id="fig-{s.id}" class="fig"></div>')
        if s.html:
            body.append(f'<div id="html-{s.id}">{s.html}</div>')
        body.append("</section>")
    js = f"<script>{plotly_js()}</script>" if embed_js else '<script src="plotly.min.js"></script>'
    live = ""
    if live_interval_ms:
        live = f"<script>var INTERVAL_MS = {int(live_interval_ms)};{LIVE_JS}</script>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<script>{ERRORS_JS}</script><style>{CSS}</style>
{js}
</head><body>
<pre id="js-errors"></pre>
{header}
{''.join(body)}
<script>var FIGS = {_json(figs)};{DRAW_JS}</script>
{live}
</body></html>
"""


def table_html(head: list[str], rows: list[list[str]], highlight: set[int] = frozenset(), cls: str = "t") -> str:
    h = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    body = []
    for i, r in enumerate(rows):
        tr = ' class="hl"' if i in highlight else ""
        body.append(f"<tr{tr}>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>")
    return f'<table class="{cls}"><thead><tr>{h}</tr></thead><tbody>{"".join(body)}</tbody></table>'

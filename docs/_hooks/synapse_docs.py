"""MkDocs hooks of Synapse's documentation site (mkdocs.yml ``hooks:``).

- Pages under docs/ that the nav leaves out are added under "More", so a
  new page is never lost (give it its place in mkdocs.yml's nav).
- ``<!-- synapse:scenario-schema -->`` in a page becomes the scenario
  schema, generated from the pydantic models in
  ``synapse_vmt/scenario.py``: every key with its type, default, unit and
  meaning. A field without a description is a warning, so
  ``mkdocs build --strict`` fails on it.
- Links to other sites are listed, never fetched (CI has no internet):
  ``site/external-links.txt`` names each with the pages that use it.
  Internal links and anchors are MkDocs's own ``validation`` (strict).
"""

from __future__ import annotations

import logging
import re
import sys
import types
import typing
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.synapse")

SCHEMA_MARK = "<!-- synapse:scenario-schema -->"
_external: dict[str, set[str]] = {}


def _listed(nav) -> set[str]:
    out: set[str] = set()
    for item in nav or []:
        if isinstance(item, str):
            out.add(item)
        elif isinstance(item, dict):
            for v in item.values():
                out |= _listed(v) if isinstance(v, list) else ({v} if isinstance(v, str) else set())
    return out


def on_config(config, **_):
    docs = Path(config["docs_dir"])
    listed = _listed(config["nav"])
    extra = sorted(str(p.relative_to(docs)) for p in docs.rglob("*.md")
                   if not p.relative_to(docs).parts[0].startswith("_") and str(p.relative_to(docs)) not in listed)
    if extra:
        log.info("pages not in mkdocs.yml's nav, added under More: %s", ", ".join(extra))
        config["nav"].append({"More": extra})
    # The schema and the CLI reference import the package: the installed one
    # (`pip install .` built its Rust extension, which the source tree lacks
    # unless the install was editable), else the source tree. mkdocstrings
    # reads the source tree without importing it (mkdocs.yml: paths).
    try:
        import synapse_vmt  # noqa: F401
    except ImportError:
        src = str(Path(config["config_file_path"]).parent / "python")
        if src not in sys.path:
            sys.path.insert(0, src)
    _external.clear()
    return config


# --- the scenario schema -------------------------------------------------------------------------

def _type_name(t) -> str:
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " \\| ".join(f'`"{a}"`' if isinstance(a, str) else f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a) for a in args if a is not type(None)]
        return " or ".join(names) + (" (optional)" if type(None) in args else "")
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"table {_type_name(args[0])} → {_type_name(args[1])}"
    if isinstance(t, type):
        from pydantic import BaseModel

        if issubclass(t, BaseModel):
            return "table"
        return {"int": "integer", "float": "float", "str": "string", "bool": "boolean"}.get(t.__name__, t.__name__)
    return str(t)


def _default(f) -> str:
    from pydantic import BaseModel
    from pydantic_core import PydanticUndefined

    if f.default_factory is not None:
        return "see below"
    d = f.default
    if d is PydanticUndefined:
        return "required"
    if isinstance(d, BaseModel):
        return "see below"
    if d is None:
        return "none"
    if isinstance(d, bool):
        return f"`{str(d).lower()}`"
    if isinstance(d, str):
        return f'`"{d}"`'
    if isinstance(d, int) and d >= 1 << 20 and d % (1 << 20) == 0:
        return f"`{d}` ({d >> 20} MiB)"
    return f"`{d!r}`"


def _limits(f) -> str:
    out = []
    for m in f.metadata:
        for k, sym in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"), ("min_length", "items ≥")):
            v = getattr(m, k, None)
            if v is not None:
                out.append(f"{sym} {v}")
    return ", ".join(out)


def _models(t):
    """The pydantic models a field's type holds (nested tables)."""
    from pydantic import BaseModel

    if isinstance(t, type) and issubclass(t, BaseModel):
        yield t
    for a in typing.get_args(t):
        yield from _models(a)


def scenario_schema() -> str:
    """Markdown tables of every scenario key, one section per TOML table."""
    from synapse_vmt import scenario as sc

    sections: list[tuple[str, type, str]] = []
    seen: set[tuple[str, type]] = set()

    def visit(prefix: str, model: type, how: str) -> None:
        if (prefix, model) in seen:
            return
        seen.add((prefix, model))
        sections.append((prefix, model, how))
        for name, f in model.model_fields.items():
            for sub in _models(f.annotation):
                key = f"{prefix}.{name}" if prefix else name
                origin = typing.get_origin(f.annotation)
                arr = origin is list
                if sub in (sc.RulesFile, sc.RulesGen):
                    visit(f"{key}", sub, f"`{name} = {{...}}`, one form of the table's rules")
                elif sub in (sc.FlowTraffic, sc.TraceTraffic):
                    visit(key, sub, f"`[{key}]` with `kind = \"{sub.model_fields['kind'].default if sub is sc.FlowTraffic else 'trace'}\"`")
                else:
                    visit(key, sub, f"`[[{key}]]`, repeatable" if arr else f"`[{key}]`")

    visit("", sc.Scenario, "the top level of the file")
    lines: list[str] = []
    for prefix, model, how in sections:
        title = prefix or "top level"
        lines += [f"### {title}" + (f" ({model.__name__})" if prefix else ""), ""]
        doc = " ".join((model.__doc__ or "").split())
        lines += [f"{how[0].upper()}{how[1:]}. {doc}".strip(), ""]
        lines += ["| key | type | default | unit | meaning |", "|---|---|---|---|---|"]
        for name, f in model.model_fields.items():
            desc = f.description or ""
            if not desc:
                log.warning("scenario schema: %s.%s has no description (give it one in scenario.py: F(..., doc))",
                            model.__name__, name)
            unit = (f.json_schema_extra or {}).get("unit", "") if isinstance(f.json_schema_extra, dict) else ""
            lim = _limits(f)
            lines.append(f"| `{name}` | {_type_name(f.annotation)} | {_default(f)} | {unit} | "
                         f"{desc}{' (' + lim + ')' if lim else ''} |")
        lines.append("")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, **_):
    if SCHEMA_MARK in markdown:
        markdown = markdown.replace(SCHEMA_MARK, scenario_schema())
    return markdown


# --- external links: listed, not fetched ---------------------------------------------------------

_HREF = re.compile(r'href="(https?://[^"#]+)[^"]*"')


def on_page_content(html: str, page, **_):
    for url in _HREF.findall(html):
        _external.setdefault(url, set()).add(page.file.src_uri)
    return html


def on_post_build(config, **_):
    out = Path(config["site_dir"]) / "external-links.txt"
    ours = ("squidfunk.github.io", "www.mkdocs.org")  # the theme's own footer
    rows = [f"{u}\t{', '.join(sorted(p))}" for u, p in sorted(_external.items()) if not u.startswith(
        tuple(f"https://{h}" for h in ours))]
    out.write_text("# external links (not fetched: CI has no internet)\n" + "\n".join(rows) + "\n")
    log.info("%d external links listed in %s (not fetched)", len(rows), out)

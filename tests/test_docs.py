"""The documentation builds and says what is true of the code.

- The site builds with ``mkdocs build --strict``: a broken link or anchor,
  a page missing from the nav's files, a scenario key without a
  description (docs/_hooks/synapse_docs.py) fails it. Without mkdocs the
  test skips, or fails under ``SYNAPSE_CI=1`` (the ``test`` extra installs
  it).
- The generated reference covers every command and every scenario key.
- The README is a short front page whose set-up commands are the ones CI
  runs (``.ci/run``) and whose links lead to files that exist.
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

import pytest

from requires import module

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    module("mkdocs", "pip install '.[test]' or '.[docs]'")
    module("material", "pip install '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=600, env={**__import__("os").environ,
                                                                          "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return out


def _text(page: Path, sep: str = " ") -> str:
    return html.unescape(re.sub(r"<[^>]+>", sep, page.read_text()))


def test_site_builds_strict(site):
    assert (site / "index.html").exists()
    for page in ("tutorials/size-pmus", "tutorials/p4runtime", "tutorials/reproduce-figures",
                 "tutorials/own-inputs", "reference/cli", "reference/scenario", "explanation/fidelity"):
        assert (site / page / "index.html").exists(), page
    assert (site / "external-links.txt").exists()


def test_cli_reference_lists_every_command(site):
    from synapse_vmt.cli import help as cli_help
    from synapse_vmt.cli import main

    text = " ".join(_text(site / "reference/cli/index.html").split())
    paths = [p for p, _ in cli_help.walk(main) if p]
    missing = [p for p in paths if f"synapse {p}" not in text]
    assert paths and not missing, missing


def test_scenario_schema_lists_every_key(site):
    """Every field of every scenario model appears in the generated schema
    with its description."""
    from pydantic import BaseModel

    from synapse_vmt import scenario as sc

    text = " ".join(_text(site / "reference/scenario/index.html", sep="").split())
    models = [m for m in vars(sc).values()
              if isinstance(m, type) and issubclass(m, BaseModel) and m.__module__ == sc.__name__]
    assert sc.Scenario in models
    seen = 0
    for m in models:
        for name, f in m.model_fields.items():
            if f.description and m in _reachable(sc.Scenario):
                desc = " ".join(re.sub(r"[`*]", "", f.description).split())[:40]
                assert name in text and desc in text, f"{m.__name__}.{name}: {desc!r}"
                seen += 1
    assert seen > 50


def _reachable(root) -> set:
    import typing

    from pydantic import BaseModel

    out, todo = set(), [root]
    while todo:
        m = todo.pop()
        if m in out:
            continue
        out.add(m)
        for f in m.model_fields.values():
            stack = [f.annotation]
            while stack:
                t = stack.pop()
                if isinstance(t, type) and issubclass(t, BaseModel):
                    todo.append(t)
                stack.extend(typing.get_args(t))
    return out


def _fenced(text: str, lang: str) -> list[str]:
    return [b for lg, b in re.findall(r"^```(\w*)\n(.*?)^```", text, re.M | re.S) if lg == lang]


def test_readme_is_a_short_front_page():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    sh = [ln for b in _fenced(text, "sh") for ln in b.splitlines()]
    # the test command is the one .ci/run runs, verbatim
    ci = (ROOT / ".ci/run").read_text()
    test_cmd = "pip install '.[test]' && cargo test -p synapse-core && python -m pytest"
    assert test_cmd in sh and f"\n{test_cmd}\n" in ci
    # the install command creates the venv as CI does and runs the default scenario
    install = next(ln for ln in sh if "pip install ." in ln)
    assert install.startswith("python3 -m venv .venv && . .venv/bin/activate && ")
    assert "python3 -m venv .venv\n. .venv/bin/activate\n" in ci
    # no measurement journal: no issue numbers, branch names or dates
    assert not re.search(r"\bissue \d+|\bbranch `|\b20\d\d-\d\d-\d\d\b|this session", text, re.I)


def test_readme_links_exist():
    text = (ROOT / "README.md").read_text()
    links = [u.split("#")[0] for u in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in u]
    assert links
    missing = [u for u in links if u and not (ROOT / u).exists()]
    assert not missing, missing


def test_docs_deps_are_in_the_test_extra():
    """CI installs '.[test]': the strict build needs the docs extra's packages there too."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(extras["docs"]) <= set(extras["test"])

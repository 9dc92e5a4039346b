"""``synapse p4 ...``: commands on P4 programs."""

from __future__ import annotations

import json

import click

from synapse_vmt.p4.bmv2 import read_bmv2
from synapse_vmt.p4.cfg import Cfg


def program_path(ctx, param, value: str | None) -> str | None:
    """A PROGRAM argument: a BMv2 JSON path, or ``builtin:up4`` (the UPF program shipped in the package)."""
    from synapse_vmt.p4.simrun import resolve_program

    return resolve_program(value) if value else value


@click.group("p4")
def p4() -> None:
    """P4 programs (p4c's BMv2 JSON output)."""


def format_cfg(cfg: Cfg) -> str:
    lines = [f"{len(cfg.tables)} tables, {len(cfg.edges)} edges" + (f" ({cfg.program})" if cfg.program else "")]
    w = max(len(t.name) for t in cfg.tables)
    for t in cfg.tables:
        keys = ", ".join(f"{k.field}:{k.width} {k.match}" for k in t.key)
        lines.append(f"  table {t.name:<{w}}  size {t.max_size:>6}  key {t.key_bits:>4} b  [{keys}]")
    for name, share in cfg.entry.items():
        lines.append(f"  entry -> {name}  p={share:.4g}")
    for e in cfg.edges:
        lines.append(f"  edge  {e.src} -> {e.dst}  p={e.p:.4g}")
    return "\n".join(lines)


@p4.command("cfg")
@click.argument("program", type=click.Path(dir_okay=False), callback=program_path)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="write the CFG file here")
def cfg_cmd(program: str, output: str | None) -> None:
    """Print the tables and control-flow graph of PROGRAM (p4c BMv2 JSON);
    keyless compiler tables and conditionals are folded into edges."""
    cfg = read_bmv2(program)
    click.echo(format_cfg(cfg))
    if output:
        cfg.save(output)
        click.echo(f"wrote {output}")


@p4.group("entries")
def entries() -> None:
    """Table entries: simple_switch_CLI commands or the P4 tutorials' runtime JSON."""


@entries.command("check")
@click.argument("program", type=click.Path(dir_okay=False), callback=program_path)
@click.argument("file", type=click.Path(dir_okay=False))
def entries_check(program: str, file: str) -> None:
    """Load FILE's entries for PROGRAM (p4c BMv2 JSON), validate every one
    against the program and print the entries per table."""
    from synapse_vmt.p4.bmv2 import read_program
    from synapse_vmt.p4.entries import load_entries

    prog = read_program(program)
    got = load_entries(file, prog)
    warn(got)
    w = max(len(n) for n in got)
    total = 0
    for name, te in got.items():
        t = prog.tables[name]
        total += len(te.entries)
        dflt = f"  default {te.default[0]}" if te.default else ""
        click.echo(f"  {name:<{w}}  {t.match_type:<7}  {len(te.entries):>6} / {t.info.max_size:<6}{dflt}")
    empty = sum(1 for te in got.values() if not te.entries)
    click.echo(f"{total} entries in {len(got) - empty} of {len(got)} tables ({file})")


@entries.command("gen")
@click.argument("program", type=click.Path(dir_okay=False), callback=program_path)
@click.option("--table", "tables", multiple=True, help="only this table (repeatable; default: every keyed table)")
@click.option("--count", type=click.IntRange(min=0), required=True, help="entries per table (capped by max_size and the key space)")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["cli", "json"]), default="cli", show_default=True,
              help="simple_switch_CLI commands or the P4 tutorials' runtime JSON")
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True, help="the file to write")
def entries_gen(program: str, tables: tuple[str, ...], count: int, seed: int, fmt: str, output: str) -> None:
    """Write realistic entries for PROGRAM's tables as simple_switch_CLI
    commands (exact keys from a population, LPM with the BGP prefix-length
    mix, ternary and range in ClassBench's manner). Same seed, same file."""
    import json

    from synapse_vmt.errors import UserError, atomic_write
    from synapse_vmt.p4.bmv2 import read_program
    from synapse_vmt.p4.entries import format_cli, format_json
    from synapse_vmt.p4.entrygen import gen_table

    prog = read_program(program)
    chosen = []
    for n in tables:
        t = prog.table(n)
        if t is None:
            raise UserError(f"--table {n}: expected a keyed table of {program}")
        chosen.append(t)
    chosen = chosen or list(prog.tables.values())
    opts = "".join(f" --table {t.name}" for t in chosen) if tables else ""
    lines = [f"# synapse p4 entries gen {program}{opts} --count {count} --seed {seed}"]
    total = 0
    members: dict = {}  # action profile -> member handles, shared by its tables
    json_members: list = []  # the JSON file's action_profile_members
    items: list = []
    for t in chosen:
        es = gen_table(t, count, seed)
        total += len(es)
        lines.append(f"# {t.name}: {len(es)} entries ({t.match_type}, max_size {t.info.max_size})")
        if fmt == "cli":
            lines += format_cli(t, es, members)
        else:
            items += format_json(t, es, json_members)
    with atomic_write(output) as f:
        if fmt == "cli":
            f.write("\n".join(lines) + "\n")
        else:
            doc = {"target": "bmv2", "bmv2_json": program, "table_entries": items}
            if json_members:
                doc["action_profile_members"] = json_members
            json.dump(doc, f, indent=1)
            f.write("\n")
    click.echo(f"wrote {total} entries for {len(chosen)} tables to {output}")


@p4.command("compile")
@click.argument("program")
@click.option("--entries", "entries_file", type=click.Path(dir_okay=False), help="table entries (simple_switch_CLI commands or runtime JSON)")
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True, help="the description (JSON) to write")
def compile_cmd(program: str, entries_file: str | None, output: str) -> None:
    """Compile PROGRAM (p4c BMv2 JSON, or builtin:up4) and its entries into
    the description the Rust executor runs (docs/program-layer.md), check
    that the executor links it, and write it as JSON."""
    from synapse_vmt.errors import atomic_write
    from synapse_vmt.p4.engine import RustProgram
    from synapse_vmt.p4.simrun import resolve_program

    rp = RustProgram.load(resolve_program(program), entries_file)
    with atomic_write(output) as f:
        json.dump(rp.description, f, indent=None, separators=(",", ":"))
        f.write("\n")
    d = rp.description
    click.echo(f"wrote {output}: {len(d['fields'])} PHV slots, {len(d['parser']['states'])} parser states, "
               f"{len(d['actions'])} actions, {len(d['keyed'])} keyed tables, "
               f"{sum(len(n.get('entries', [])) for n in d['nodes'])} entries"
               + (f"; not executed: {', '.join(rp.core.unsupported)}" if rp.core.unsupported else ""))


@p4.command("capture")
@click.argument("program", type=click.Path(dir_okay=False))
@click.option("--entries", "entries_file", type=click.Path(dir_okay=False), help="table entries the traffic draws keys from")
@click.option("--traffic", "traffic_file", type=click.Path(dir_okay=False), required=True,
              help="a TOML file with a [traffic] table (traffic classes, as in a program scenario)")
@click.option("--count", type=click.IntRange(min=1), required=True, help="packets to write")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True, help="the pcap file to write")
def capture_cmd(program: str, entries_file: str | None, traffic_file: str, count: int, seed: int, output: str) -> None:
    """Write a capture for PROGRAM where every frame differs: packets drawn
    from the flows of the traffic classes, each with its own IPv4
    identification, TTL and TCP sequence number (checksums kept valid).
    Same seed, same file."""
    import os

    from synapse_vmt.p4.bmv2 import read_program
    from synapse_vmt.p4.capture import frames, write_pcap
    from synapse_vmt.p4.entries import load_entries
    from synapse_vmt.p4.simrun import load_traffic, resolve_program

    program = resolve_program(program)
    prog = read_program(program)
    ents = load_entries(entries_file or os.devnull, prog)
    spec = load_traffic(traffic_file)
    n = write_pcap(output, frames(spec, prog, ents, count, seed))
    click.echo(f"wrote {n} packets ({spec.flows} flows) to {output}")


@p4.command("interp")
@click.argument("program", type=click.Path(dir_okay=False), callback=program_path)
@click.option("--pcap", "pcap", type=click.Path(dir_okay=False), required=True, help="the packets (pcap or pcapng)")
@click.option("--entries", "entries_file", type=click.Path(dir_okay=False), help="table entries (simple_switch_CLI commands or runtime JSON); none: only the program's const entries")
@click.option("--ingress-port", type=click.IntRange(min=0), default=0, show_default=True, help="standard_metadata.ingress_port of every packet")
@click.option("--seed", type=int, default=1, show_default=True, help="seeds random() and the fallback branches")
@click.option("--priority-queues", type=click.IntRange(min=1), default=1, show_default=True,
              help="simple_switch's --priority-queues: a packet whose priority is not below it is dropped")
@click.option("--drop-port", type=click.IntRange(min=0), default=511, show_default=True,
              help="simple_switch's --drop-port: where mark_to_drop sends a packet")
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON")
@click.option("--steps", "steps_file", type=click.Path(dir_okay=False),
              help="write every table visit as CSV: packet, table, entry (-1: miss), action, key (hex field values)")
@click.option("--engine", type=click.Choice(["rust", "python"]), default="rust", show_default=True,
              help="the compiled program run in Rust, or the Python interpreter (the test oracle)")
def interp_cmd(program: str, pcap: str, entries_file: str | None, ingress_port: int, seed: int, priority_queues: int,
               drop_port: int, as_json: bool, steps_file: str | None, engine: str) -> None:
    """Run the packets of a capture through PROGRAM (p4c BMv2 JSON) as
    simple_switch would: its parser, its pipelines with the entries, its
    externs (registers, counters, meters, hashes, clones, multicast...);
    print per keyed table the lookups, the entries matched and the actions
    run, what the externs did, and name what the run could not compute
    (synthesized key fields, fallback branches, parser rejects). The
    capture's timestamps are the packets' arrival times (meters, timestamps)."""
    import json
    import os
    import time

    from synapse_vmt.p4.entries import load_entries
    from synapse_vmt.p4.externs import SwitchOptions
    from synapse_vmt.p4.interp import Program
    from synapse_vmt.p4.parser import read_frames

    prog = Program.load(program)
    # no file: still the program's own const entries and default actions
    got = load_entries(entries_file or os.devnull, program)
    warn(got)
    t0 = time.process_time()
    options = SwitchOptions(priority_queues=priority_queues, drop_port=drop_port)
    # streamed: a capture larger than memory runs too (only the trace is kept)
    frames = ((round(ts * 1e12), buf) for ts, buf in read_frames(pcap))
    if engine == "rust":
        from synapse_vmt.p4.engine import RustProgram

        # compiled once; the frames run in Rust in batches as they are read
        trace = RustProgram(prog, got, seed=seed, options=options).run(frames, ingress_port=ingress_port)
    else:
        trace = prog.run(frames, got, seed=seed, ingress_port=ingress_port, options=options)
    cpu = time.process_time() - t0
    summary = trace.summary()
    if steps_file:
        write_steps(trace, steps_file)
    if as_json:
        click.echo(json.dumps(summary, indent=1))
        return
    click.echo(format_interp(summary, cpu))


def warn(entries) -> None:
    """The entries file's warnings, one line each on stderr."""
    for w in getattr(entries, "warnings", []):
        click.echo(f"synapse: warning: {w}", err=True)


def format_interp(s: dict, cpu_s: float | None = None) -> str:
    # the rate includes binding the entries: only meaningful on a real capture
    rate = f", {s['packets'] / cpu_s:,.0f} packets/s (CPU time, reading included)" if cpu_s and s["packets"] >= 1000 else ""
    lines = [f"{s['packets']} packets, {s['dropped']} dropped{rate}"]
    w = max((len(n) for n in s["tables"]), default=5)
    lines.append(f"  {'table':<{w}}  {'lookups':>8}  {'matched':>8}  actions")
    for name, c in s["tables"].items():
        acts = ", ".join(f"{a or '(none)'}={n}" for a, n in sorted(c["actions"].items()))
        lines.append(f"  {name:<{w}}  {c['lookups']:>8}  {c['matched']:>8}  {acts}")
    for key, label in (("parser_rejects", "parser rejects"), ("synthesized_fields", "synthesized fields"),
                       ("fallback_branches", "fallback branches")):
        items = s[key]
        lines.append(f"{label}: " + (", ".join(f"{k}={v}" for k, v in items.items()) if items else "none"))
    if s["unsupported"]:
        lines.append("not executed (no-ops): " + ", ".join(s["unsupported"]))
    for key, label in (("drops", "drops"), ("copies", "copies"), ("out_ports", "packets out per port"),
                       ("digests", "digests")):
        if s.get(key):
            lines.append(f"{label}: " + ", ".join(f"{k}={v}" for k, v in s[key].items()))
    for key, label in (("counters", "counter"), ("direct_counters", "direct counter")):
        for name, cells in s.get(key, {}).items():
            shown = list(cells.items())[:8]
            more = f" (+{len(cells) - 8} more)" if len(cells) > 8 else ""
            lines.append(f"{label} {name}: " + ", ".join(f"[{i}] {c['packets']} pkts {c['bytes']} B" for i, c in shown) + more)
    for name, c in s.get("meter_colors", {}).items():
        lines.append(f"meter {name}: " + ", ".join(f"{k}={v}" for k, v in c.items()))
    for name, cells in s.get("registers", {}).items():
        lines.append(f"register {name}: {len(cells)} non-zero cells")
    return "\n".join(lines)


def write_steps(trace, path: str) -> None:
    """Every table visit of ``trace``, one CSV row each, in packet then visit order."""
    import csv

    from synapse_vmt.errors import atomic_write

    names = [t.name for t in trace.tables]
    with atomic_write(path) as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["packet", "table", "entry", "action", "key"])
        starts = trace.pkt_start.tolist()
        tables, entries, actions = trace.step_table.tolist(), trace.step_entry.tolist(), trace.step_action.tolist()
        for pkt in range(trace.n_packets):
            for j in range(starts[pkt], starts[pkt + 1]):
                a = actions[j]
                key = " ".join(hex(v) for v in trace.step_keys[j])
                w.writerow([pkt, names[tables[j]], entries[j], trace.actions[a] if a >= 0 else "", key])

"""``synapse serve``: a P4Runtime server over Synapse's tables; ``synapse p4 p4info``."""

from __future__ import annotations

import gc
import signal
import threading

import click

from synapse_vmt.cli.p4 import program_path


@click.command("serve")
@click.option("--p4", "program", type=click.Path(dir_okay=False), required=True, callback=program_path,
              help="p4c BMv2 JSON loaded as the initial pipeline")
@click.option("--p4info", type=click.Path(dir_okay=False), help="P4Info (text or binary); default: derived")
@click.option("--listen", default="127.0.0.1:9559", show_default=True, help="address:port (loopback by default)")
@click.option("--device-id", default=1, show_default=True)
@click.option("--cert", type=click.Path(dir_okay=False), help="TLS server certificate (PEM)")
@click.option("--key", type=click.Path(dir_okay=False), help="TLS private key (PEM)")
@click.option("--ca", type=click.Path(dir_okay=False), help="CA (PEM): require client certificates it signed")
@click.option("--algo", default="linear", show_default=True, help="classifier answering the tables' lookups")
@click.option("--traffic", "rate", default=0.0, show_default=True,
              help="background lookups per second per table (90%% drawn to hit an entry), 0: none")
@click.option("--sim", "scenario", help="scenario TOML (or 'default'): run the simulated Synapse as the target; "
              "writes on its tables (same name, 5-tuple key) go to the simulator as rule updates; a program "
              "scenario ([program] + [traffic], e.g. examples/upf/scenario.toml) simulates every table of the "
              "program, the packets' routes following the writes")
@click.option("--sim-speed", default=2e6, show_default=True,
              help="simulated ns advanced per wall-clock second")
@click.option("--no-optimizer", is_flag=True,
              help="with --sim: keep the scenario's PMU assignment (no runtime optimizer in the loop)")
@click.option("--opt-period-ns", default=100_000.0, show_default=True, type=click.FloatRange(min=1.0),
              help="with --sim: the runtime optimizer's control period, simulated ns")
@click.option("--opt-solver", type=click.Choice(["fast", "milp"]), default="fast", show_default=True,
              help="with --sim: the allocation solver (milp: HiGHS; the same optimum)")
@click.option("--http", "http", default="127.0.0.1:9560", show_default=True,
              help="with --sim: the live view (the run report, updating) and Prometheus /metrics on this "
              "address:port (port 0: any free one; 'off': none)")
@click.option("--table-size", "table_sizes", multiple=True, metavar="[TABLE=]N",
              help="hold up to N entries in TABLE (full or short name), or in every table without TABLE= "
              "(default: the program's P4 size); repeatable")
@click.option("--max-streams", default=1024, show_default=True, type=click.IntRange(min=1),
              help="StreamChannels open at once, in all (more are refused: RESOURCE_EXHAUSTED)")
@click.option("--max-streams-per-peer", default=16, show_default=True, type=click.IntRange(min=1),
              help="StreamChannels open at once on one client connection")
@click.option("--arbitration-timeout", default=10.0, show_default=True, type=click.FloatRange(min=0.01),
              help="seconds a StreamChannel may stay open without an arbitration message")
@click.option("--transport", type=click.Choice(["rust", "grpc"]), default="rust", show_default=True,
              help="rust: a Rust gRPC front end serves Write and passes the other RPCs to the grpc.aio server "
              "(without TLS); grpc: the grpc.aio server alone")
def serve(program: str, p4info: str | None, listen: str, device_id: int, cert: str | None, key: str | None,
          ca: str | None, algo: str, rate: float, scenario: str | None, sim_speed: float, no_optimizer: bool,
          opt_period_ns: float, opt_solver: str, http: str, table_sizes: tuple[str, ...], max_streams: int,
          max_streams_per_peer: int, arbitration_timeout: float, transport: str) -> None:
    """Run a P4Runtime v1 gRPC server whose target is Synapse's table store
    (docs/reference/p4runtime.md). Stops on Ctrl-C / SIGTERM."""
    from synapse_vmt.p4rt.server import P4RuntimeServer, StreamLimits, make_server, parse_listen

    parse_listen(listen)  # before anything slow starts
    sizes = _table_sizes(program, table_sizes)
    scn = None
    if scenario is not None and scenario != "default":
        from synapse_vmt.p4rt.routedtarget import is_program_scenario

        if is_program_scenario(scenario):  # the program's own tables (UPF): routes follow the writes
            from synapse_vmt.p4.simrun import load_scenario

            scn = load_scenario(scenario)
    if scenario is not None and scn is None:
        from synapse_vmt.scenario import load

        scn = load(None if scenario == "default" else scenario)
    opt = None
    if scn is not None and not isinstance(scn, dict) and not no_optimizer:
        from synapse_vmt.opt.simopt import OptConfig

        opt = OptConfig(period_ns=opt_period_ns, solver=opt_solver)
    # SIGTERM before the server is up (a slow start: a simulator to build) stops it cleanly too;
    # the previous handler comes back when serve returns (or fails).
    done = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        svc = P4RuntimeServer(program, p4info, device_id=device_id, algo=algo, traffic=rate, sim=scn,
                              sim_speed=sim_speed, sim_opt=opt, sizes=sizes,
                              limits=StreamLimits(max_streams, max_streams_per_peer, arbitration_timeout))
        server, port = make_server(svc, listen, cert, key, ca, transport=transport)
        # What is loaded by now (program, protobuf descriptors, gRPC) lives as
        # long as the server: keep the garbage collector from scanning it again
        # at every full collection while the store fills.
        gc.freeze()
        host = listen.rsplit(":", 1)[0]
        click.echo(f"P4Runtime on {host}:{port} (device {device_id}, {'TLS' if cert else 'insecure'}), "
                   f"{len(svc.pipeline.index.tables)} tables", err=True)
        if svc.sim is not None:
            click.echo(f"simulated tables: {', '.join(svc.sim.tables) or 'none'}"
                       + "".join(f"; {t}: not simulated ({why})" for t, why in svc.sim.skipped.items()), err=True)
            if isinstance(scn, dict) and not no_optimizer:
                click.echo("runtime optimizer: not run on a program scenario's routed tables yet "
                           "(their PMUs are dealt evenly)", err=True)
            if svc.sim.opt is not None:
                cal = svc.sim.opt.calibration
                click.echo(f"runtime optimizer: every {opt_period_ns:g} ns simulated ({opt_solver}); capacity models "
                           + ", ".join(f"{t} r2={c['r2']:.2f}" for t, c in cal.items())
                           + f" (calibrated in {sum(c['wall_s'] for c in cal.values()):.1f} s)", err=True)
        live = None
        if scn is not None and http != "off":
            from synapse_vmt.view.live import LiveServer

            live = LiveServer(lambda: svc.sim, http)
            click.echo(f"live view on http://{http.rsplit(':', 1)[0]}:{live.port}/ (Prometheus: /metrics)", err=True)
        try:
            done.wait()
        except KeyboardInterrupt:
            pass
        if live is not None:
            live.stop()
        server.stop(grace=1).wait()
        svc.stop()
    finally:
        signal.signal(signal.SIGTERM, previous)


def _table_sizes(program: str, given: tuple[str, ...]) -> dict[str, int]:
    """``--table-size [TABLE=]N`` values as {full table name (or "*"): N}."""
    from synapse_vmt.errors import UserError
    from synapse_vmt.p4.bmv2 import read_program

    out: dict[str, int] = {}
    prog = read_program(program) if any("=" in g for g in given) else None
    for g in given:
        name, _, n = g.rpartition("=")
        if not n.isdigit() or int(n) < 1:
            raise UserError(f"--table-size {g}: expected [TABLE=]N with N a positive number")
        if not name:
            out["*"] = int(n)
            continue
        t = prog.table(name) if prog else None
        if t is None:
            raise UserError(f"--table-size {g}: {program} has no table {name!r} (tables: {', '.join(prog.tables)})")
        out[t.name] = int(n)
    return out


@click.command("p4info")
@click.argument("program", type=click.Path(dir_okay=False), callback=program_path)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="write here (default: stdout)")
def p4info_cmd(program: str, output: str | None) -> None:
    """Write the P4Info of PROGRAM (p4c BMv2 JSON) in protobuf text format,
    with the stable ids `synapse serve` uses."""
    from synapse_vmt.errors import atomic_write
    from synapse_vmt.p4.bmv2 import read_program
    from synapse_vmt.p4rt.p4info import build_p4info, to_text

    text = to_text(build_p4info(read_program(program)))
    if output:
        with atomic_write(output) as f:
            f.write(text)
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)

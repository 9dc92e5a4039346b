"""``synapse traffic``: flow-size distributions and packet arrival traces.

``fit`` reads a pcap/pcapng, fits its flow-size distribution and saves it;
``gen`` writes the arrivals of the flow-level traffic model (Rust) to CSV or
npy; ``show`` prints the built-in distributions and profiles.
"""

from __future__ import annotations

import json
import sys
import time

import click
import numpy as np

from synapse_vmt import _core
from synapse_vmt.errors import UserError, atomic_write
from synapse_vmt.workloads import traffic as tw

PS_PER_US = 1_000_000


@click.group()
def traffic() -> None:
    """Flow-level traffic: heavy-tailed flow sizes, Poisson packets per flow."""


@traffic.command()
@click.argument("capture", type=click.Path(dir_okay=False))
@click.option("-o", "--out", type=click.Path(dir_okay=False), help="Save the distribution as JSON (for --dist).")
def fit(capture: str, out: str | None) -> None:
    """Fit the flow-size distribution of CAPTURE (pcap or pcapng).

    Packets are grouped into unidirectional 5-tuple flows (IPv4/IPv6,
    TCP/UDP ports, other protocols without ports); a flow's size is the sum
    of its packets' IP total lengths. Prints the empirical summary and
    lognormal / Pareto / GPD-tail fits (MLE) with their KS statistics.
    """
    doc = tw.fit_pcap(capture)
    s, fits = doc["summary"], doc["fits"]
    click.echo(f"{capture}: {s['flows']} flows, {s['packets']} IP packets"
               + (f" ({s['skipped_packets']} non-IP skipped)" if s["skipped_packets"] else ""))
    click.echo(f"  flow size: mean {tw.fmt_bytes(s['mean_bytes'])}, median {tw.fmt_bytes(s['median_bytes'])}, "
               f"p99 {tw.fmt_bytes(s['p99_bytes'])}, max {tw.fmt_bytes(s['max_bytes'])}")
    click.echo(f"  mean packet {doc['mean_pkt_bytes']:.1f} B, {s['mean_pkts_per_flow']:.2f} packets/flow, "
               f"mean flow duration {s['mean_flow_duration_s'] * 1e3:.3g} ms")
    if "lognormal" in fits:
        ln, pa = fits["lognormal"], fits["pareto"]
        click.echo(f"  lognormal: mu {ln['mu']:.4g}, sigma {ln['sigma']:.4g}  KS {ln['ks']:.4f}")
        click.echo(f"  pareto:    alpha {pa['alpha']:.4g}, x_min {pa['x_min']:.4g}  KS {pa['ks']:.4f}")
        if "gpd_tail" in fits:
            g = fits["gpd_tail"]
            click.echo(f"  GPD tail above {tw.fmt_bytes(g['threshold'])} ({g['exceedances']} flows): "
                       f"xi {g['xi']:.4g}, beta {g['beta']:.4g}  KS {g['ks']:.4f}")
        click.echo(f"  better whole-body fit (smaller KS): {fits['best']}")
    else:
        click.echo(f"  {fits['note']}")
    click.echo(f"  empirical CDF: {len(doc['points'])} points")
    if out:
        with atomic_write(out) as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        click.echo(f"wrote {out}")


@traffic.command()
@click.option("--dist", default="caida2019", show_default=True,
              help=f"Flow-size distribution: {', '.join(_core.FLOW_DISTS)} (NAME:MAX_BYTES truncates) "
                   "or a JSON file from 'traffic fit'.")
@click.option("--flows", type=click.IntRange(0, 2**32 - 1), help="Number of flows (sets the offered load).")
@click.option("--rate-pps", type=float, help="Offered load in packets/s instead of --flows.")
@click.option("--duration-us", type=click.FloatRange(min=0, min_open=True), default=1000.0, show_default=True,
              help="Run length over which flows start.")
@click.option("--flow-duration-us", type=click.FloatRange(min=0, min_open=True),
              help="Mean active time of a flow [default: a tenth of the run].")
@click.option("--mean-pkt-bytes", type=click.FloatRange(min=0, min_open=True),
              help=f"Bytes per packet: packets = ceil(bytes / this) [default: the file's, else {_core.DEFAULT_MEAN_PKT_BYTES:g}].")
@click.option("--max-bytes", type=click.FloatRange(min=0, min_open=True), help="Truncate flow sizes at this many bytes.")
@click.option("--profile", type=click.Choice(_core.PROFILES), help="Time-varying flow arrival rate [default: flat].")
@click.option("--seed", type=click.IntRange(0, 2**64 - 1), default=0, show_default=True)
@click.option("--clip/--no-clip", default=True, show_default=True,
              help="Drop packets after the run (flows starting late run past it).")
@click.option("-o", "--out", type=click.Path(dir_okay=False), required=True, help="Arrivals: .csv (t_ps,flow) or .npy.")
def gen(dist, flows, rate_pps, duration_us, flow_duration_us, mean_pkt_bytes, max_bytes, profile, seed, clip, out) -> None:
    """Generate packet arrivals (time in ps, flow id) in time order."""
    if (flows is None) == (rate_pps is None):
        raise UserError("give exactly one of --flows and --rate-pps")
    duration_ps = round(duration_us * PS_PER_US)
    kw = dict(dist=dist, duration_ps=duration_ps, mean_pkt_bytes=mean_pkt_bytes, max_bytes=max_bytes,
              profile=profile, seed=seed,
              flow_duration_ps=None if flow_duration_us is None else max(1, round(flow_duration_us * PS_PER_US)))
    if rate_pps is not None:
        flows = tw.flows_for_rate(rate_pps, **kw)
    tr = tw.make_traffic(flows=flows, **kw)
    t0 = time.perf_counter()
    n, total = tw.write_arrivals(tr, out, duration_ps if clip else None)
    dt = time.perf_counter() - t0
    click.echo(f"{flows} flows, {total} packets ({tr.mean_packets:.1f} expected per flow); "
               f"offered {tr.offered_pps / 1e6:.4g} Mpps")
    click.echo(f"wrote {n} arrivals to {out}" + (f" ({total - n} after the run dropped)" if clip else "")
               + f" in {dt:.2f} s")


@traffic.command()
@click.option("--mean-pkt-bytes", type=click.FloatRange(min=0, min_open=True), default=_core.DEFAULT_MEAN_PKT_BYTES,
              show_default=True)
@click.option("--dist", "extra", multiple=True, help="Also show this distribution file.")
def show(mean_pkt_bytes: float, extra: tuple[str, ...]) -> None:
    """Print the built-in flow-size distributions and traffic profiles."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"Flow-size distributions (packets at {mean_pkt_bytes:g} B)")
    for col in ("name", "points", "min", "median", "mean", "p90", "p99", "p99.9", "max", "pkts/flow"):
        t.add_column(col, justify="left" if col == "name" else "right")
    for name in [*_core.FLOW_DISTS, *extra]:
        d, _ = tw.load_dist(name)
        s = _core.flow_dist_stats(d, mean_pkt_bytes)
        t.add_row(name, str(s["points"]), *(tw.fmt_bytes(s[k]) for k in
                  ("min_bytes", "median_bytes", "mean_bytes", "p90_bytes", "p99_bytes", "p999_bytes", "max_bytes")),
                  f"{s['mean_packets']:.1f}")
    p = Table(title="Traffic profiles (flow arrival rate over the run, mean 1)")
    p.add_column("name")
    p.add_column("peak", justify="right")
    p.add_column("rate at 0, 10, ..., 100 % of the run")
    x = np.linspace(0, 1, 11)
    for name in _core.PROFILES:
        dens = _core.profile_density(name, list(x))
        p.add_row(name, f"{dens.max():.2f}", " ".join(f"{v:.2f}" for v in dens))
    c = Console(width=None if sys.stdout.isatty() else 120)
    c.print(t)
    c.print(p)
    c.print("Sources: CAIDA anonymized passive traces (Equinix), 2019-01-17 and 2018-03-15, via Zeek "
            "conn logs (responder bytes, zero-byte flows excluded).")

"""The UPF example (paper §2, Fig. 1): ONF's UP4 with populated tables and
uplink/downlink traffic whose mix can shift.

:func:`entries_cli` writes coherent ``simple_switch_CLI`` entries — unlike
``synapse p4 entries gen``'s independent tables, the tables agree with each
other so that packets go the whole way: the router MAC in ``my_station``;
``interfaces`` sends the N3 address to the uplink (access, direction 1) and
the UE pool to the downlink (core, direction 2); per session ``i`` a UE
``10.250.i/16``, a TEID ``1000 + i``, an uplink and a downlink session and
termination (application 0); four tunnel peers (eNBs); a few application
filters; IPv4 routes (a default and /16s) as action-selector groups of
one or two next hops; a few ACL rules.

:func:`scenario` gives the program scenario (``[program]`` + ``[traffic]``,
format in :mod:`synapse_vmt.p4.gentraffic`): uplink GTP-U to the N3 address
with TEIDs of ``sessions_uplink`` and inner sources of ``terminations_uplink``;
downlink to UE addresses of ``sessions_downlink``. ``examples/upf/`` holds
what these functions write (``synapse p4 upf-example -o DIR`` regenerates it).
"""

from __future__ import annotations

import random

ROUTER_MAC = "00:00:0a:fa:00:01"
N3 = "198.18.0.1"
T = "PreQosPipe."


def ue(i: int) -> str:
    return f"10.250.{i >> 8}.{i & 255}"


def entries_cli(sessions: int = 1000, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    out = [
        "# UP4 (PreQosPipe) entries: synapse_vmt.p4.upf.entries_cli",
        f"table_add {T}my_station NoAction {ROUTER_MAC} =>",
        f"table_add {T}interfaces {T}set_source_iface {N3}/32 => 1 1 0",
        f"table_add {T}interfaces {T}set_source_iface 10.250.0.0/16 => 2 2 0",
    ]
    for p in range(1, 5):
        out.append(f"table_add {T}tunnel_peers {T}load_tunnel_param {p} => {N3} 198.18.1.{p} 2152")
    for i in range(sessions):
        out.append(f"table_add {T}sessions_uplink {T}set_session_uplink {N3} {1000 + i} => {i}")
        out.append(f"table_add {T}sessions_downlink {T}set_session_downlink {ue(i)} => {1 + i % 4} {i}")
        out.append(f"table_add {T}terminations_uplink {T}uplink_term_fwd {ue(i)} 0 => {i} 0 0")
        out.append(f"table_add {T}terminations_downlink {T}downlink_term_fwd {ue(i)} 0 => {i} {1000 + i} 0 0 0")
    # applications: slice 0, a server prefix, a port range, a protocol (ternary: priorities)
    for a in range(1, 9):
        out.append(f"table_add {T}applications {T}set_app_id 0 203.0.{a}.0/24 {a * 1000}->{a * 1000 + 999} 17&&&0xff => {a} {a}")
    # routes_v4 is behind an action selector: one member per next hop, one
    # group per route; every fourth route and the default balance over two
    # next hops (ECMP, the selector hashing the flow's 5-tuple)
    hops = [("00:00:00:00:00:fe", 1), ("00:00:00:00:00:fd", 2)]
    prefixes = ["0.0.0.0/0"]
    for r in range(1, 64):
        hops.append((f"00:00:00:00:01:{r:02x}", 1 + r % 8))
        prefixes.append(f"{rng.randint(11, 223)}.{rng.randint(0, 255)}.0.0/16")
    hops.append(("00:00:00:00:02:01", 2))
    prefixes.append("198.18.1.0/24")
    sel = "hashed_selector"  # p4c names the selector without its control's prefix
    for dmac, port in hops:
        out.append(f"act_prof_create_member {sel} {T}Routing.route {ROUTER_MAC} {dmac} {port}")
    for g, prefix in enumerate(prefixes):
        out.append(f"act_prof_create_group {sel}")
        members = [0, 1] if g == 0 else [g + 1] + ([g + 2] if g % 4 == 0 and g + 2 < len(hops) else [])
        out += [f"act_prof_add_member_to_group {sel} {m} {g}" for m in members]
        out.append(f"table_indirect_add_with_group {T}Routing.routes_v4 {prefix} => {g}")
    for k, port in enumerate((23, 135, 445)):
        out.append(f"table_add {T}Acl.acls {T}Acl.drop 0&&&0 0&&&0 0&&&0 0&&&0 0x0800&&&0xffff 0&&&0 0&&&0 6&&&0xff 0&&&0 {port}&&&0xffff => {10 + k}")
    return out


SCENARIO = """\
# UPF (ONF UP4) on virtual match tables: uplink GTP-U and downlink traffic.
# Run: synapse run {path} -o results/upf
[program]
p4 = "builtin:up4"        # the packaged UP4 BMv2 JSON (Apache-2.0)
entries = "entries.txt"   # synapse_vmt.p4.upf.entries_cli
duration_ns = {duration_ns}
pmus = {pmus}
seed = 1

[traffic]
flows = {flows}
dist = "caida2019"
max_bytes = 1e6
flow_duration_ns = 300000
mean_pkt_bytes = 800

[[traffic.classes]]
name = "uplink"
share = 0.5
profile = {up_profile}
frame = "gtpu"
[traffic.classes.fields]
"eth.dst" = "{mac}"
"ipv4.dst" = {{table = "sessions_uplink", key = "ipv4.dst_addr"}}
"gtpu.teid" = {{table = "sessions_uplink", key = "scalars.userMetadata.teid"}}
"inner.src" = {{table = "terminations_uplink", key = "scalars.userMetadata.ue_addr"}}
"inner.dst" = {{range = ["11.0.0.0", "223.255.255.255"]}}
"inner.sport" = {{range = [1024, 65535]}}

[[traffic.classes]]
name = "downlink"
share = 0.5
profile = {down_profile}
frame = "ipv4-udp"
[traffic.classes.fields]
"eth.dst" = "{mac}"
"ipv4.dst" = {{table = "sessions_downlink", key = "ipv4.dst_addr"}}
"ipv4.src" = {{range = ["11.0.0.0", "223.255.255.255"]}}
"l4.sport" = {{range = [1, 65535]}}
"l4.dport" = {{range = [1024, 65535]}}
"""

# The mix shifts: uplink-heavy first half, downlink-heavy second half.
UP_SHIFT = [[0.0, 1.6], [0.45, 1.6], [0.55, 0.4], [1.0, 0.4]]
DOWN_SHIFT = [[0.0, 0.4], [0.45, 0.4], [0.55, 1.6], [1.0, 1.6]]


def scenario(path: str = "examples/upf/scenario.toml", flows: int = 4000, duration_ns: float = 2_000_000.0, pmus: int = 16,
             shift: bool = True) -> str:
    up, down = (UP_SHIFT, DOWN_SHIFT) if shift else ("flat", "flat")
    return SCENARIO.format(path=path, flows=flows, duration_ns=float(duration_ns), pmus=pmus, mac=ROUTER_MAC,
                           up_profile=_toml(up),
                           down_profile=_toml(down))


def _toml(v) -> str:
    return f'"{v}"' if isinstance(v, str) else "[" + ", ".join(f"[{a}, {b}]" for a, b in v) + "]"

"""The stateful parts of a v1model switch, as BMv2 simple_switch runs them.

What a program's externs keep between packets and what the control plane
configures besides table entries:

- :class:`Meter`: BMv2's N-rate, N+1-colour marker (``src/bm_sim/meters.cpp``;
  for P4 a two-rate three-colour marker: GREEN 0, YELLOW 1, RED 2). Rates
  come from ``meter_set_rates`` / ``meter_array_set_rates`` in
  simple_switch_CLI units: units (bytes or packets) per microsecond and a
  burst in units. A meter without rates marks every packet GREEN, as BMv2.
- :func:`choose_member`: an action selector's pick of a group member.
- :class:`SwitchConfig`: mirroring sessions (``mirroring_add``), multicast
  groups (``mc_mgrp_create``, ``mc_node_create``, ``mc_node_associate``),
  meter rates, register values written by ``register_write``, custom CRC
  parameters (``set_crc16_parameters``/``set_crc32_parameters``) and the
  switch's own options (:class:`SwitchOptions`).

The interpreter (:mod:`synapse_vmt.p4.interp`) and the Rust executor
(``crates/synapse-core/src/program/``) follow these definitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from synapse_vmt.p4.hashes import CrcConfig

GREEN, YELLOW, RED = 0, 1, 2


class Meter:
    """One meter cell: BMv2's ``Meter``, its time given in microseconds.

    ``set_rates`` takes the rates smallest first (CIR then PIR for a
    trTCM), each ``(units per microsecond, burst in units)``; every bucket
    starts full. ``execute`` refills each bucket by the tokens accrued since
    time 0 (``floor(now_us * rate)``, computed from time 0 every time, as
    BMv2 does, so no rounding accumulates), then, from the highest rate
    down, takes ``units`` tokens: the first bucket short of them gives the
    colour (RED for the peak rate, YELLOW for the committed one) and the
    lower buckets are left untouched; GREEN if every bucket had enough."""

    __slots__ = ("packets", "rates")

    def __init__(self, packets: bool):
        self.packets = packets
        # per rate, highest first: [info_rate, burst, tokens, tokens_last, color]
        self.rates: list[list] | None = None

    @property
    def configured(self) -> bool:
        return self.rates is not None

    def set_rates(self, rates: list[tuple[float, int]]) -> None:
        """ValueError if a rate is smaller than the one before (BMv2: INVALID_INFO_RATE_VALUE)."""
        for a, b in zip(rates, rates[1:]):
            if a[0] > b[0]:
                raise ValueError(f"rates must not decrease ({a[0]} then {b[0]})")
        self.rates = [[float(r), int(b), int(b), 0, i + 1] for i, (r, b) in enumerate(rates)][::-1]

    def execute(self, length: int, now_us: int) -> int:
        if self.rates is None:
            return GREEN
        units = 1 if self.packets else length
        for rate in self.rates:
            since = int(now_us * rate[0])  # BMv2: static_cast<uint64_t>(micros * info_rate)
            rate[2] = min(rate[2] + since - rate[3], rate[1])
            rate[3] = since
            if rate[2] < units:
                return rate[4]
            rate[2] -= units
        return GREEN


class SplitMix64:
    """The run's random numbers (``random()``, the ``random`` hash algorithm):
    SplitMix64 from the run's seed, as the Rust executor draws them
    (``crates/synapse-core/src/program/externs.rs``), so both engines agree.
    ``range(lo, hi)`` is ``lo + next % (hi - lo + 1)`` (a bias below 2^-40 for
    the field widths P4 programs draw)."""

    __slots__ = ("state",)
    M = (1 << 64) - 1

    def __init__(self, seed: int):
        self.state = seed & self.M

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & self.M
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & self.M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & self.M
        return z ^ (z >> 31)

    def range(self, lo: int, hi: int) -> int:
        n = hi - lo + 1
        x = self.next()
        return lo + x if n > self.M else lo + x % n


def choose_member(members: tuple, hash64: int):
    """The member an action selector runs for a packet: BMv2's
    ``GroupMgr::get_from_hash``: the hash cut to 32 bits (``hash_t`` is an
    unsigned int), modulo the group's size, indexes the group's members in
    ascending member-handle order (``members`` must be in that order)."""
    return members[(hash64 & 0xFFFFFFFF) % len(members)]


@dataclass(frozen=True)
class SwitchOptions:
    """simple_switch command-line options that change what packets do, with
    its defaults.

    - ``priority_queues`` (``--priority-queues``): egress queues per port; a
      packet whose ``standard_metadata.priority`` (v1model's
      ``intrinsic_metadata.priority``) is not below it is dropped when it is
      enqueued for egress ("Priority out of range").
    - ``drop_port`` (``--drop-port``): the port ``mark_to_drop`` sends to
      (511 for simple_switch's default 9-bit ports).
    """

    priority_queues: int = 1
    drop_port: int = 511


@dataclass
class SwitchConfig:
    """What a run's control-plane file configures besides table entries."""

    #: mirror session id -> (egress port or None, multicast group or None)
    mirroring: dict[int, tuple[int | None, int | None]] = field(default_factory=dict)
    #: multicast group -> its replicas (egress port, egress_rid) in BMv2's order:
    #: nodes in association order, each node's ports ascending
    mc_groups: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    #: meter array name -> {index: rates} (index None: every cell); direct
    #: meters are keyed by table name and entry handle
    meter_rates: dict[str, dict[int | None, list[tuple[float, int]]]] = field(default_factory=dict)
    #: register array name -> {index: value}
    registers: dict[str, dict[int, int]] = field(default_factory=dict)
    #: calculation name -> CRC parameters (crc16_custom / crc32_custom)
    crc_params: dict[str, CrcConfig] = field(default_factory=dict)
    options: SwitchOptions = field(default_factory=SwitchOptions)

"""The externs' state machines (meters, selectors) against BMv2's
semantics worked out by hand, and the interpreter's definitions against the
Rust executor's (hashes and meters, on random inputs)."""

import random

import pytest

from synapse_vmt import _core
from synapse_vmt.p4.externs import GREEN, RED, YELLOW, Meter, choose_member
from synapse_vmt.p4.hashes import CUSTOM_DEFAULTS, PREDEFINED, CrcConfig, hasher


def test_meter_two_rates_three_colours_as_bmv2():
    # packets: CIR 0.1/us burst 2, PIR 0.2/us burst 3; buckets start full
    m = Meter(packets=True)
    m.set_rates([(0.1, 2), (0.2, 3)])
    assert [m.execute(64, 0) for _ in range(4)] == [GREEN, GREEN, YELLOW, RED]
    # 10 us on: PIR accrued floor(10 * 0.2) = 2 tokens, CIR 1
    assert [m.execute(64, 10) for _ in range(3)] == [GREEN, YELLOW, RED]
    # a RED packet takes nothing from the CIR bucket below the PIR one
    m = Meter(packets=True)
    m.set_rates([(0.1, 1), (0.2, 1)])
    assert [m.execute(1, 0), m.execute(1, 0), m.execute(1, 5)] == [GREEN, RED, YELLOW]


def test_meter_without_rates_is_green_and_decreasing_rates_are_refused():
    m = Meter(packets=False)
    assert {m.execute(1500, t) for t in range(50)} == {GREEN}
    with pytest.raises(ValueError):
        m.set_rates([(2.0, 1), (1.0, 1)])


def test_byte_meter_counts_lengths_and_bursts_cap():
    m = Meter(packets=False)
    m.set_rates([(1.0, 1000), (2.0, 2000)])
    assert [m.execute(1000, 0), m.execute(1, 0)] == [GREEN, YELLOW]
    assert [m.execute(1000, 10**6), m.execute(1, 10**6)] == [GREEN, YELLOW]


def test_selector_cuts_the_hash_to_32_bits():
    assert choose_member(("a", "b", "c"), 7) == "b"
    assert choose_member(("a", "b", "c"), (1 << 32) + 1) == "b"  # not (2^32 + 1) % 3 = 2


ALGOS = ["crc16", "crc32", "crcCCITT", "csum16", "xor16", "xor32", "identity", *CUSTOM_DEFAULTS, *PREDEFINED,
         "poly_0x11021_init_0x1d0f_not_rev"]


@pytest.mark.parametrize("algo", ALGOS)
def test_python_and_rust_hashes_agree(algo):
    rng = random.Random(algo)
    bufs = [bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 40))) for _ in range(60)]
    assert _core.p4_hash(algo, bufs) == [hasher(algo)(b) for b in bufs]


def test_python_and_rust_custom_crcs_agree_on_random_configs():
    rng = random.Random(5)
    bufs = [bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 24))) for _ in range(20)]
    for _ in range(40):
        w = rng.choice([16, 32])
        full = (1 << w) - 1
        cfg = CrcConfig(w, rng.getrandbits(w) | 1, rng.getrandbits(w) & full, rng.getrandbits(w) & full,
                        rng.random() < 0.5, rng.random() < 0.5)
        algo = "crc16_custom" if w == 16 else "crc32_custom"
        got = _core.p4_hash(algo, bufs, (cfg.width, cfg.poly, cfg.init, cfg.xor_out, cfg.refin, cfg.refout))
        assert got == [hasher(algo, cfg)(b) for b in bufs], cfg


@pytest.mark.parametrize("packets", [True, False])
def test_python_and_rust_meters_agree(packets):
    rng = random.Random(int(packets))
    seen = set()
    for _ in range(20):
        cir = rng.choice([0.001, 0.05, 0.3, 1.5])
        rates = [(cir, rng.randrange(1, 3000)), (cir * rng.choice([1, 2, 3.7]), rng.randrange(1, 5000))]
        t, times, lengths = 0, [], []
        for _ in range(300):
            t += rng.choice([0, 0, 1, 3, 17, 250])
            times.append(t)
            lengths.append(rng.randrange(60, 1500))
        m = Meter(packets)
        m.set_rates(rates)
        want = [m.execute(n, u) for n, u in zip(lengths, times)]
        assert _core.p4_meter(packets, rates, lengths, times) == want
        seen.update(want)
    assert seen == {GREEN, YELLOW, RED}  # the draws exercise every colour

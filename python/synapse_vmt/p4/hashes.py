"""BMv2's hash algorithms, and the bytes a calculation hashes.

A P4 ``hash()``, an action selector, a ``verify_checksum`` or an
``update_checksum`` is, in p4c's BMv2 JSON, a *calculation*: an algorithm
name (``algo``) and a list of inputs. BMv2 (``src/bm_sim/calculations.cpp``)
packs the inputs into a byte buffer and hashes it; this module does the
same, bit for bit, so that the interpreter (the test oracle) and the Rust
executor (``crates/synapse-core/src/program/hash.rs``) agree with BMv2.

The buffer (BMv2's ``BufBuilder``): the inputs in order, each written
most-significant bit first right after the previous one (no per-field byte
padding), the whole zero-padded at the end to a whole number of bytes.
A field of an invalid header is left out (it adds no bits); a ``hexstr``
input is a constant of its ``bitwidth``; a ``header`` input is the
header's bytes if it is valid; ``payload`` appends the bytes after the
parsed headers.

Algorithms (BMv2's names; outputs are unsigned):

- ``crc16``: CRC-16/ARC (poly 0x8005, reflected in and out, init 0, xor 0);
- ``crc32``: CRC-32 (poly 0x04c11db7, reflected, init and xor 0xffffffff);
- ``crcCCITT``: CRC-16/CCITT-FALSE (poly 0x1021, init 0xffff, not reflected);
- ``crc8_custom``, ``crc16_custom``, ``crc32_custom``, ``crc64_custom``: a
  CRC of that width with a configurable polynomial, initial remainder,
  final xor and reflections (simple_switch_CLI's ``set_crc16_parameters``
  / ``set_crc32_parameters``); by default crc8_custom is CRC-8 (0x07, not
  reflected) and the others equal crc16, crc32 and CRC-64/GO-ISO;
- crcmod's predefined names (``crc_16_usb``, ``crc_32c``, ``xmodem``...)
  and the ``poly_0x1..._init_..._xout_..._not_rev`` strings BMv2 accepts;
- ``csum16`` (``cksum16``): the Internet checksum (RFC 1071; an odd
  trailing byte is padded with a zero byte);
- ``xor16``, ``xor32``: the xor of the buffer's 16/32-bit big-endian words,
  the last one zero-padded at its end;
- ``identity``: the buffer's first 8 bytes (fewer if shorter) as a
  big-endian integer.

``random`` is not a BMv2 algorithm (simple_switch refuses a program using
it); here it draws from the run's seeded generator (see
:class:`Calculation`). Unknown names raise :class:`KeyError`.
"""

from __future__ import annotations

import binascii
import sys
import zlib
from array import array
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable


@dataclass(frozen=True)
class CrcConfig:
    """A CRC in BMv2's ``crc_config_t`` terms (the Rocksoft model)."""

    width: int
    poly: int
    init: int
    xor_out: int
    refin: bool
    refout: bool


def _reflect(v: int, bits: int) -> int:
    return int(f"{v:0{bits}b}"[::-1], 2) if bits else 0


@lru_cache(maxsize=64)
def _table(width: int, poly: int) -> tuple[int, ...]:
    """BMv2's ``recompute_crc_table``: the remainder of each byte followed by zeros."""
    top, full = 1 << (width - 1), (1 << width) - 1
    out = []
    for dividend in range(256):
        r = (dividend << (width - 8)) & full
        for _ in range(8):
            r = ((r << 1) ^ poly) & full if r & top else (r << 1) & full
        out.append(r)
    return tuple(out)


_REFLECT8 = tuple(_reflect(b, 8) for b in range(256))
_LITTLE = sys.byteorder == "little"


def crc(cfg: CrcConfig, data: bytes) -> int:
    """BMv2's ``crc_custom<T>::operator()``: a table-driven, MSB-first CRC
    whose input bytes are reflected first when ``refin``."""
    w = cfg.width
    full = (1 << w) - 1
    table = _table(w, cfg.poly & full)
    r = cfg.init & full
    shift = w - 8
    for b in data:
        if cfg.refin:
            b = _REFLECT8[b]
        r = table[(b ^ (r >> shift)) & 0xFF] ^ ((r << 8) & full)
    if cfg.refout:
        r = _reflect(r, w)
    return r ^ (cfg.xor_out & full)


CRC16 = CrcConfig(16, 0x8005, 0x0000, 0x0000, True, True)
CRC32 = CrcConfig(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True)
CRC_CCITT = CrcConfig(16, 0x1021, 0xFFFF, 0x0000, False, False)
#: Default configurations of BMv2's ``crc<N>_custom`` algorithms.
CUSTOM_DEFAULTS = {
    "crc8_custom": CrcConfig(8, 0x07, 0x00, 0x00, False, False),
    "crc16_custom": CRC16,
    "crc32_custom": CRC32,
    "crc64_custom": CrcConfig(64, 0x1B, 0, 0, True, True),
}

#: crcmod's predefined CRCs as BMv2's ``CrcMap`` names them (``src/bm_sim/crc_map.cpp``).
PREDEFINED: dict[str, CrcConfig] = {
    name: CrcConfig(w, p, i, x, r, r)
    for name, (w, p, i, x, r) in {
        "crc_8": (8, 0x07, 0x00, 0x00, False),
        "crc_8_darc": (8, 0x39, 0x00, 0x00, True),
        "crc_8_i_code": (8, 0x1D, 0xFD, 0x00, False),
        "crc_8_itu": (8, 0x07, 0x00, 0x55, False),
        "crc_8_maxim": (8, 0x31, 0x00, 0x00, True),
        "crc_8_rohc": (8, 0x07, 0xFF, 0x00, True),
        "crc_8_wcdma": (8, 0x9B, 0x00, 0x00, True),
        "crc_16": (16, 0x8005, 0x0000, 0x0000, True),
        "crc_16_buypass": (16, 0x8005, 0x0000, 0x0000, False),
        "crc_16_dds_110": (16, 0x8005, 0x800D, 0x0000, False),
        "crc_16_dect": (16, 0x0589, 0x0000, 0x0001, False),
        "crc_16_dnp": (16, 0x3D65, 0x0000, 0xFFFF, True),
        "crc_16_en_13757": (16, 0x3D65, 0x0000, 0xFFFF, False),
        "crc_16_genibus": (16, 0x1021, 0xFFFF, 0xFFFF, False),
        "crc_16_maxim": (16, 0x8005, 0x0000, 0xFFFF, True),
        "crc_16_mcrf4xx": (16, 0x1021, 0xFFFF, 0x0000, True),
        "crc_16_riello": (16, 0x1021, 0xB2AA, 0x0000, True),
        "crc_16_t10_dif": (16, 0x8BB7, 0x0000, 0x0000, False),
        "crc_16_teledisk": (16, 0xA097, 0x0000, 0x0000, False),
        "crc_16_usb": (16, 0x8005, 0xFFFF, 0xFFFF, True),
        "x_25": (16, 0x1021, 0xFFFF, 0xFFFF, True),
        "xmodem": (16, 0x1021, 0x0000, 0x0000, False),
        "modbus": (16, 0x8005, 0xFFFF, 0x0000, True),
        "kermit": (16, 0x1021, 0x0000, 0x0000, True),
        "crc_ccitt_false": (16, 0x1021, 0xFFFF, 0x0000, False),
        "crc_aug_ccitt": (16, 0x1021, 0x1D0F, 0x0000, False),
        "crc_32": (32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True),
        "crc_32_bzip2": (32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, False),
        "crc_32c": (32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, True),
        "crc_32d": (32, 0xA833982B, 0xFFFFFFFF, 0xFFFFFFFF, True),
        "crc_32_mpeg": (32, 0x04C11DB7, 0xFFFFFFFF, 0x00000000, False),
        "posix": (32, 0x04C11DB7, 0x00000000, 0xFFFFFFFF, False),
        "crc_32q": (32, 0x814141AB, 0x00000000, 0x00000000, False),
        "jamcrc": (32, 0x04C11DB7, 0xFFFFFFFF, 0x00000000, True),
        "xfer": (32, 0x000000AF, 0x00000000, 0x00000000, False),
        "crc_64": (64, 0x1B, 0, 0, True),
        "crc_64_we": (64, 0x42F0E1EBA9EA3693, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF, False),
        "crc_64_jones": (64, 0xAD93D23594C935A9, 0xFFFFFFFFFFFFFFFF, 0, True),
    }.items()
}


def parse_custom(name: str) -> CrcConfig | None:
    """BMv2's ``get_copy_from_custom_str``: ``poly_0x1<hex>[_init_<hex>][_xout_<hex>][_not_rev]``
    (the polynomial written with its leading 1, which gives the width 8/16/32/64); None if not of that form."""
    toks = name.split("_")
    poly = init = xout = ""
    rev = True
    i = 0
    while i < len(toks):
        t = toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        if t in ("poly", "init", "xout") and nxt:
            poly, init, xout = (nxt, init, xout) if t == "poly" else (poly, nxt, xout) if t == "init" else (poly, init, nxt)
            i += 2
        elif t == "not" and nxt == "rev":
            rev = False
            i += 2
        else:
            return None
    if len(poly) < 3 or not poly.startswith("0x1"):
        return None
    width = (len(poly) - 3) * 4
    if width not in (8, 16, 32, 64):
        return None
    try:
        return CrcConfig(width, int(poly[3:], 16), int(init, 16) if init else 0, int(xout, 16) if xout else 0, rev, rev)
    except ValueError:
        return None


def csum16(data: bytes) -> int:
    """The Internet checksum (BMv2's ``cksum16``): ones' complement of the
    ones'-complement sum of big-endian 16-bit words, odd length zero-padded.
    (The sum is taken over native words and swapped back: the ones'-complement
    sum does not depend on byte order, RFC 1071 §2.)"""
    if len(data) % 2:
        data = data + b"\0"
    s = sum(array("H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    s = ~s & 0xFFFF
    return ((s & 0xFF) << 8) | (s >> 8) if _LITTLE else s


def _xor(n: int) -> Callable[[bytes], int]:
    def xor_hash(data: bytes) -> int:
        v = 0
        for i in range(0, len(data), n):
            v ^= int.from_bytes(data[i:i + n].ljust(n, b"\0"), "big")
        return v
    return xor_hash


def identity(data: bytes) -> int:
    return int.from_bytes(data[:8], "big")


_FIXED: dict[str, Callable[[bytes], int]] = {
    "crc16": lambda d: crc(CRC16, d),
    "crc32": zlib.crc32,  # CRC-32 exactly as BMv2's crc32
    "crcCCITT": lambda d: binascii.crc_hqx(d, 0xFFFF),  # CRC-16/CCITT-FALSE
    "csum16": csum16,
    "cksum16": csum16,
    "xor16": _xor(2),
    "xor32": _xor(4),
    "identity": identity,
}

#: Names whose configuration the control plane can change (``set_crc16_parameters``...).
CUSTOM = frozenset(CUSTOM_DEFAULTS)


def known(algo: str) -> bool:
    return algo in _FIXED or algo in CUSTOM_DEFAULTS or algo in PREDEFINED or parse_custom(algo) is not None


def hasher(algo: str, config: CrcConfig | None = None) -> Callable[[bytes], int]:
    """The hash function BMv2 runs for ``algo`` (``config`` overrides a
    ``crc<N>_custom``'s default). KeyError for a name BMv2 does not know."""
    if algo in CUSTOM_DEFAULTS:
        cfg = config or CUSTOM_DEFAULTS[algo]
        return lambda d: crc(cfg, d)
    if algo in _FIXED:
        return _FIXED[algo]
    cfg = PREDEFINED.get(algo) or parse_custom(algo)
    if cfg is None:
        raise KeyError(algo)
    return lambda d: crc(cfg, d)


# ---- the buffer --------------------------------------------------------------

def pack_bits(parts: list[tuple[int, int]]) -> bytes:
    """``(value, bits)`` pairs written MSB first one after another, zero-padded
    at the end to whole bytes (BMv2's ``BufBuilder`` over fields and constants)."""
    acc, n = 0, 0
    for v, w in parts:
        acc = (acc << w) | (v & ((1 << w) - 1))
        n += w
    pad = -n % 8
    return (acc << pad).to_bytes((n + pad) // 8, "big")

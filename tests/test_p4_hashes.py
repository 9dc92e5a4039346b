"""BMv2's hash algorithms: the expected values are BMv2's own (its
tests/test_calculations.cpp and the crcmod check values its CrcMap test
uses), never this code's output."""

import pytest

from synapse_vmt.p4.hashes import CrcConfig, crc, csum16, hasher, known, pack_bits, parse_custom

PORTS = bytes([0x0B, 0xB8, 0x1F, 0x90])  # BMv2's HashTest input: ports 3000 and 8080


@pytest.mark.parametrize(("algo", "data", "expected"), [
    ("identity", bytes([1, 2, 3, 4, 5]), 0x0102030405),
    ("xor16", PORTS, 0x1428),
    ("xor16", PORTS + b"\x5a", 0x4E28),
    ("xor32", bytes.fromhex("0b0bb8b81f1f9090"), 0x14142828),
    ("xor32", bytes.fromhex("0b0bb8b81f1f90905a"), 0x4E142828),
    ("xor32", bytes.fromhex("0b0bb8b81f1f90905a5a"), 0x4E4E2828),
    ("xor32", bytes.fromhex("0b0bb8b81f1f90905a5abd"), 0x4E4E9528),
    ("csum16", bytes.fromhex("450000730000400040110000c0a80001c0a800c7"), 0xB861),
    ("crc16", PORTS, 0x5D8A),
    ("crcCCITT", PORTS, 0x5D75),
    ("crc32", PORTS, 0x005D6A6F),
    ("crc16_custom", PORTS, 0x5D8A),  # its default is crc16
    ("crc32_custom", PORTS, 0x005D6A6F),
])
def test_bmv2_hash_vectors(algo, data, expected):
    assert hasher(algo)(data) == expected


@pytest.mark.parametrize(("cfg", "expected"), [
    (CrcConfig(16, 0x8005, 0, 0, True, True), 0x5D8A),
    (CrcConfig(16, 0x1021, 0xFFFF, 0, False, False), 0x5D75),  # CCITT
    (CrcConfig(16, 0x1021, 0, 0, False, False), 0xD9B5),  # XMODEM
    (CrcConfig(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True), 0x005D6A6F),
    (CrcConfig(32, 0x04C11DB7, 0xFFFFFFFF, 0, False, False), 0x125E1592),  # MPEG-2
])
def test_custom_crc_configs_as_set_crc_parameters(cfg, expected):
    assert hasher("crc16_custom" if cfg.width == 16 else "crc32_custom", cfg)(PORTS) == expected


# crcmod's check values over b"123456789" (BMv2's CrcMapTest)
CHECK = {
    "crc_8": 0xF4, "crc_8_darc": 0x15, "crc_8_i_code": 0x7E, "crc_8_itu": 0xA1, "crc_8_maxim": 0xA1,
    "crc_8_rohc": 0xD0, "crc_8_wcdma": 0x25, "crc_16": 0xBB3D, "crc_16_buypass": 0xFEE8,
    "crc_16_dds_110": 0x9ECF, "crc_16_dect": 0x007E, "crc_16_dnp": 0xEA82, "crc_16_en_13757": 0xC2B7,
    "crc_16_genibus": 0xD64E, "crc_16_maxim": 0x44C2, "crc_16_mcrf4xx": 0x6F91, "crc_16_riello": 0x63D0,
    "crc_16_t10_dif": 0xD0DB, "crc_16_teledisk": 0x0FB3, "crc_16_usb": 0xB4C8, "x_25": 0x906E,
    "xmodem": 0x31C3, "modbus": 0x4B37, "kermit": 0x2189, "crc_ccitt_false": 0x29B1, "crc_aug_ccitt": 0xE5CC,
    "crc_32": 0xCBF43926, "crc_32_bzip2": 0xFC891918, "crc_32c": 0xE3069283, "crc_32d": 0x87315576,
    "crc_32_mpeg": 0x0376E6E7, "posix": 0x765E7680, "crc_32q": 0x3010BF7F, "jamcrc": 0x340BC6D9,
    "xfer": 0xBD0BE338, "crc_64": 0x46A5A9388A5BEFFE, "crc_64_we": 0x62EC59E3F1A4F00A,
    "crc_64_jones": 0xCAA717168609F281,
}


@pytest.mark.parametrize("name", sorted(CHECK))
def test_predefined_crcs_give_crcmod_check_values(name):
    assert hasher(name)(b"123456789") == CHECK[name]


def test_custom_strings_as_bmv2_parses_them():
    assert parse_custom("poly_0x18005") == CrcConfig(16, 0x8005, 0, 0, True, True)
    assert parse_custom("poly_0x11021_init_0xffff_not_rev") == CrcConfig(16, 0x1021, 0xFFFF, 0, False, False)
    assert hasher("poly_0x11021_init_0xffff_not_rev")(PORTS) == 0x5D75
    for bad in ("poly_0x8005", "poly_0x1800", "init_0x1", "poly_0x18005_lsb", "poly"):
        assert parse_custom(bad) is None
        assert not known(bad)
    with pytest.raises(KeyError):
        hasher("sha1")


def test_refin_and_refout_apart_follow_the_rocksoft_model():
    # CRC-16/ARC with only the output reflected equals CRC-16/BUYPASS's register, reflected
    buy = hasher("crc_16_buypass")(b"123456789")
    half = crc(CrcConfig(16, 0x8005, 0, 0, False, True), b"123456789")
    assert half == int(f"{buy:016b}"[::-1], 2)


def test_csum16_is_rfc1071_with_odd_padding():
    assert csum16(b"") == 0xFFFF
    assert csum16(b"\x01") == csum16(b"\x01\x00") == 0xFEFF


def test_buffer_packs_bits_as_bmv2_bufbuilder():
    # BMv2's WithConstantNonAligned: 4-bit 0, a 16-bit field of ones, 12-bit 0x9fd -> identity 0x0ffff9fd
    assert hasher("identity")(pack_bits([(0, 4), (0xFFFF, 16), (0x9FD, 12)])) == 0x0FFFF9FD
    # BMv2's Extra: fields of 6, 8, 9, 9 bits = 0x3d, 0x3e, 1, 0 -> 0xf4f80200
    assert hasher("identity")(pack_bits([(0x3D, 6), (0x3E, 8), (1, 9), (0, 9)])) == 0xF4F80200
    assert pack_bits([(1, 1)]) == b"\x80"

"""Tests for model.net.checksum: CRC32c (RFC 4960 6.8, RFC 3720 B.4) and the Internet checksum (RFC 1071)."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from model.net.checksum import (
    crc32c,
    internet_checksum,
    sctp_checksum,
    sctp_checksum_from_bytes,
    sctp_checksum_to_bytes,
)
from model.errors import DecodeError


@pytest.mark.parametrize(
    "data, expected",
    [
        (bytes(32), 0x8A9136AA),
        (b"\xff" * 32, 0x62A8AB43),
        (bytes(range(32)), 0x46DD794E),
        (bytes(range(31, -1, -1)), 0x113FDB5C),
    ],
)
def test_crc32c_rfc3720_b4_vectors(data: bytes, expected: int) -> None:
    """RFC 3720 B.4 CRC32c test vectors (the CRC of RFC 4960 Appendix B)."""
    assert crc32c(data) == expected


def test_rfc4960_6_8_crc32c_byte_order() -> None:
    """RFC 4960 6.8 / Appendix B: the CRC 0x8A9136AA is stored as AA 36 91 8A."""
    assert sctp_checksum_to_bytes(0x8A9136AA) == bytes([0xAA, 0x36, 0x91, 0x8A])
    assert sctp_checksum_from_bytes(bytes([0xAA, 0x36, 0x91, 0x8A])) == 0x8A9136AA


def test_sctp_checksum_treats_field_as_zero() -> None:
    """RFC 4960 6.8: the CRC is computed with the checksum field set to zero."""
    header = struct.pack("!HHI", 1, 2, 3)
    body = b"\x01\x02\x03\x04"
    expected = crc32c(header + bytes(4) + body)
    assert sctp_checksum(header + b"\xde\xad\xbe\xef" + body) == expected
    assert sctp_checksum(header + bytes(4) + body) == expected


def test_sctp_checksum_needs_common_header() -> None:
    with pytest.raises(DecodeError):
        sctp_checksum(bytes(11))
    with pytest.raises(DecodeError):
        sctp_checksum_from_bytes(b"\x00\x01")


def test_internet_checksum_rfc1071_example() -> None:
    """RFC 1071 3 worked example: words 0001 f203 f4f5 f6f7 sum to ddf2, checksum 220d."""
    assert internet_checksum(bytes.fromhex("0001f203f4f5f6f7")) == 0x220D


def test_internet_checksum_ipv4_header_known() -> None:
    """A well-known IPv4 header (RFC 791 layout) whose checksum is 0xB861."""
    header = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")
    assert internet_checksum(header) == 0xB861


def test_internet_checksum_odd_length_pads_with_zero() -> None:
    """RFC 1071 4.1: an odd byte count is padded with a zero byte."""
    assert internet_checksum(b"\x12\x34\x56") == internet_checksum(b"\x12\x34\x56\x00")


@given(st.binary(max_size=300), st.binary(max_size=300))
def test_crc32c_continues_across_chunks(a: bytes, b: bytes) -> None:
    assert crc32c(b, crc32c(a)) == crc32c(a + b)


@given(st.binary(max_size=300).filter(lambda d: len(d) % 2 == 0))
def test_internet_checksum_verifies_to_zero(data: bytes) -> None:
    """RFC 1071 1: summing the data with its checksum appended yields zero."""
    checksum = internet_checksum(data)
    assert internet_checksum(data + struct.pack("!H", checksum)) == 0


def _ones_complement_sum_of_words(data: bytes) -> int:
    """RFC 1071's definition, word by word: the 16-bit words added with end-around carry, complemented."""
    if len(data) % 2:
        data += b"\x00"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


@given(st.one_of(st.binary(max_size=1600), st.lists(st.sampled_from([b"\x00", b"\xff"]), max_size=64).map(b"".join)))
def test_internet_checksum_is_the_word_by_word_sum(data: bytes) -> None:
    """`internet_checksum` reads the bytes as one integer modulo 0xFFFF: the same as adding the words one by one
    (zero and all-ones data included, where 0 and 0xFFFF, the two zeros of one's complement, could be confused)."""
    assert internet_checksum(data) == _ones_complement_sum_of_words(data)
    assert internet_checksum(bytearray(data)) == internet_checksum(memoryview(data)) == internet_checksum(data)

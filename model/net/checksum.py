"""Checksums used on the wire: CRC32c for SCTP and the Internet checksum.

* CRC32c (Castagnoli), RFC 4960 6.8 and Appendix B, with the test vectors of
  RFC 3720 B.4.  The SCTP checksum field holds the CRC least-significant byte
  first (RFC 4960 Appendix B: the CRC 0x8A9136AA goes on the wire as
  AA 36 91 8A).
* The Internet checksum of RFC 1071, used by the IPv4 header (RFC 791) and by
  UDP (RFC 768) for SCTP over UDP (RFC 6951).
"""

from __future__ import annotations


import crc32c as _crc32c

from model.errors import DecodeError

SCTP_CHECKSUM_OFFSET = 8
"""Byte offset of the checksum field in the SCTP common header (RFC 4960 3.1)."""


_ZERO_CHECKSUM_FIELD = bytes(4)


def crc32c(data: bytes, value: int = 0) -> int:
    """CRC32c of `data`, continuing from a previous result `value` (0 to start)."""
    return _crc32c.crc32c(bytes(data), value)


def sctp_checksum(packet: bytes | bytearray | memoryview) -> int:
    """CRC32c of an SCTP packet with its checksum field taken as zero (RFC 4960 6.8).

    `packet` is the whole SCTP packet (common header and chunks); the four bytes
    at offset 8 are ignored whatever they hold.  The CRC runs over memoryview
    slices of the packet: no byte of it is copied.
    """
    if len(packet) < SCTP_CHECKSUM_OFFSET + 4:
        raise DecodeError("sctp", f"packet of {len(packet)} bytes has no checksum field")
    view = memoryview(packet)
    value = _crc32c.crc32c(view[:SCTP_CHECKSUM_OFFSET], 0)
    value = _crc32c.crc32c(_ZERO_CHECKSUM_FIELD, value)
    return _crc32c.crc32c(view[SCTP_CHECKSUM_OFFSET + 4 :], value)


def sctp_checksum_field_of_zeroed(packet: bytes | bytearray) -> bytes:
    """The checksum field's bytes (`sctp_checksum_to_bytes`) for a packet whose field holds zero, as one being
    built does (RFC 4960 6.8, B): the CRC32c of its bytes as they are, in one pass."""
    return _crc32c.crc32c(packet, 0).to_bytes(4, "little")


def sctp_checksum_field_of_parts(header: bytes, body: bytes) -> bytes:
    """`sctp_checksum_field_of_zeroed` of the packet `header` + `body` (the common header, its checksum field
    zero, then the chunks), without joining them: the CRC32c runs on from the header into the body (6.8, B)."""
    return _crc32c.crc32c(body, _crc32c.crc32c(header, 0)).to_bytes(4, "little")


def sctp_checksum_to_bytes(crc: int) -> bytes:
    """The four checksum-field bytes for CRC value `crc`: least-significant byte first (RFC 4960 B)."""
    return (crc & 0xFFFFFFFF).to_bytes(4, "little")


def sctp_checksum_from_bytes(field: bytes) -> int:
    """The CRC value held by the four checksum-field bytes (inverse of `sctp_checksum_to_bytes`)."""
    if len(field) != 4:
        raise DecodeError("sctp", f"checksum field must be 4 bytes, got {len(field)}")
    return int.from_bytes(field, "little")


def internet_checksum(data: bytes) -> int:
    """RFC 1071 checksum: one's complement of the one's complement sum of 16-bit words.

    An odd trailing byte is padded with a zero byte.  Summing a block that
    already holds its correct checksum gives 0.

    Computed without visiting the words: 2**16 is 1 modulo 0xFFFF, so the bytes read as
    one big-endian integer are congruent to the sum of their 16-bit words, and the folded one's complement sum
    is that residue, 0xFFFF in place of 0 unless every word is 0 (a sum above 0 never folds to 0).
    """
    if len(data) % 2:
        data = bytes(data) + b"\x00"
    value = int.from_bytes(data, "big")
    total = value % 0xFFFF
    if total == 0 and value:
        total = 0xFFFF
    return ~total & 0xFFFF

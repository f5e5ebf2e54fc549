"""Capture files: libpcap and pcapng, read and written as bytes.

Sans-I/O like the rest of the model: `read_capture` takes the file's bytes and
yields records, `write_pcap` returns the bytes of a classic libpcap file.
The reader accepts both byte orders and both timestamp resolutions of libpcap
and the Section Header, Interface Description, Enhanced Packet and Simple
Packet blocks of pcapng (other pcapng blocks are skipped by their length).
Damage (a short header, a record running past the end of the file, an
unknown magic number) raises `DecodeError` at the point where it is found,
after every whole record before it has been yielded.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Iterable, Iterator

from model.errors import DecodeError, EncodeError

LAYER = "pcap"

PCAP_MAGIC_MICRO = 0xA1B2C3D4
PCAP_MAGIC_NANO = 0xA1B23C4D
PCAPNG_SECTION_HEADER = 0x0A0D0D0A
PCAPNG_BYTE_ORDER_MAGIC = 0x1A2B3C4D
PCAPNG_INTERFACE_DESCRIPTION = 0x00000001
PCAPNG_SIMPLE_PACKET = 0x00000003
PCAPNG_ENHANCED_PACKET = 0x00000006


class LinkType(IntEnum):
    """The link-layer header types the dissector understands (tcpdump.org list)."""

    ETHERNET = 1
    RAW = 101  # raw IPv4 or IPv6, no link header
    IPV4 = 228


@dataclass(frozen=True)
class CaptureRecord:
    """One captured frame: when, what link type, the captured bytes, the length on the wire."""

    index: int
    timestamp: float
    linktype: int
    data: bytes
    original_length: int

    @property
    def truncated(self) -> bool:
        return len(self.data) < self.original_length


def write_pcap(
    frames: Iterable[tuple[float, bytes]],
    linktype: int = LinkType.ETHERNET,
    snaplen: int = 65535,
) -> bytes:
    """Return a little-endian, microsecond libpcap file holding `frames` ((time, bytes) pairs)."""
    out = [struct.pack("<IHHiIII", PCAP_MAGIC_MICRO, 2, 4, 0, 0, snaplen, int(linktype))]
    for timestamp, data in frames:
        if timestamp < 0:
            raise EncodeError(f"pcap timestamp {timestamp} is negative")
        if len(data) > snaplen:
            raise EncodeError(f"frame of {len(data)} bytes exceeds the snapshot length {snaplen}")
        seconds = int(timestamp)
        micros = round((timestamp - seconds) * 1_000_000)
        if micros == 1_000_000:
            seconds, micros = seconds + 1, 0
        out.append(struct.pack("<IIII", seconds, micros, len(data), len(data)))
        out.append(bytes(data))
    return b"".join(out)


def read_capture(data: bytes) -> Iterator[CaptureRecord]:
    """Yield every record of a libpcap or pcapng file given as bytes."""
    if len(data) < 4:
        raise DecodeError(LAYER, f"file of {len(data)} bytes is too short for a capture header", 0)
    magic_le = struct.unpack_from("<I", data)[0]
    if magic_le == PCAPNG_SECTION_HEADER:
        yield from _read_pcapng(data)
        return
    for order in "<>":
        magic = struct.unpack_from(order + "I", data)[0]
        if magic in (PCAP_MAGIC_MICRO, PCAP_MAGIC_NANO):
            yield from _read_pcap(data, order, 1e-9 if magic == PCAP_MAGIC_NANO else 1e-6)
            return
    raise DecodeError(LAYER, f"unknown capture magic 0x{magic_le:08x} (not pcap or pcapng)", 0)


def _read_pcap(data: bytes, order: str, tick: float) -> Iterator[CaptureRecord]:
    if len(data) < 24:
        raise DecodeError(LAYER, "libpcap global header needs 24 bytes", 0)
    _, major, _minor, _zone, _sigfigs, _snaplen, linktype = struct.unpack_from(order + "IHHiIII", data)
    if major != 2:
        raise DecodeError(LAYER, f"libpcap major version {major} is not 2", 4)
    linktype &= 0x0FFFFFFF  # the upper bits carry FCS information (pcap-linktype)
    offset, index = 24, 0
    while offset < len(data):
        if len(data) - offset < 16:
            raise DecodeError(LAYER, f"record {index} header is cut short", offset)
        seconds, fraction, captured, original = struct.unpack_from(order + "IIII", data, offset)
        offset += 16
        if len(data) - offset < captured:
            raise DecodeError(
                LAYER, f"record {index} claims {captured} bytes, {len(data) - offset} left", offset
            )
        yield CaptureRecord(
            index, seconds + fraction * tick, linktype, bytes(data[offset : offset + captured]), original
        )
        offset += captured
        index += 1


def _read_pcapng(data: bytes) -> Iterator[CaptureRecord]:
    order = "<"
    interfaces: list[tuple[int, float]] = []
    offset, index = 0, 0
    while offset < len(data):
        if len(data) - offset < 12:
            raise DecodeError(LAYER, "pcapng block header is cut short", offset)
        block_type = struct.unpack_from(order + "I", data, offset)[0]
        if block_type == PCAPNG_SECTION_HEADER:
            bom = struct.unpack_from("<I", data, offset + 8)[0]
            if bom == PCAPNG_BYTE_ORDER_MAGIC:
                order = "<"
            elif bom == int.from_bytes(struct.pack("<I", PCAPNG_BYTE_ORDER_MAGIC), "big"):
                order = ">"
            else:
                raise DecodeError(LAYER, f"pcapng byte-order magic 0x{bom:08x} is invalid", offset + 8)
            interfaces = []
        length = struct.unpack_from(order + "I", data, offset + 4)[0]
        if length < 12 or length % 4 or len(data) - offset < length:
            raise DecodeError(LAYER, f"pcapng block length {length} is invalid", offset + 4)
        body = data[offset + 8 : offset + length - 4]
        if block_type == PCAPNG_INTERFACE_DESCRIPTION:
            if len(body) < 8:
                raise DecodeError(LAYER, "pcapng interface description is cut short", offset)
            linktype = struct.unpack_from(order + "H", body)[0]
            interfaces.append((linktype, _pcapng_tick(body[8:], order)))
        elif block_type in (PCAPNG_ENHANCED_PACKET, PCAPNG_SIMPLE_PACKET):
            yield _pcapng_packet(block_type, body, order, interfaces, index, offset)
            index += 1
        offset += length


def _pcapng_tick(options: bytes, order: str) -> float:
    """Timestamp resolution from the if_tsresol option (code 9), default microseconds."""
    offset = 0
    while len(options) - offset >= 4:
        code, length = struct.unpack_from(order + "HH", options, offset)
        if code == 0:
            break
        if code == 9 and length >= 1 and len(options) - offset >= 5:
            value = options[offset + 4]
            return 2.0 ** -(value & 0x7F) if value & 0x80 else 10.0 ** -value
        offset += 4 + (length + 3) // 4 * 4
    return 1e-6


def _pcapng_packet(
    block_type: int, body: bytes, order: str, interfaces: list[tuple[int, float]], index: int, offset: int
) -> CaptureRecord:
    if block_type == PCAPNG_SIMPLE_PACKET:
        if len(body) < 4 or not interfaces:
            raise DecodeError(LAYER, "pcapng simple packet without header or interface", offset)
        original = struct.unpack_from(order + "I", body)[0]
        captured = min(original, len(body) - 4)
        linktype, _ = interfaces[0]
        return CaptureRecord(index, 0.0, linktype, bytes(body[4 : 4 + captured]), original)
    if len(body) < 20:
        raise DecodeError(LAYER, "pcapng enhanced packet is cut short", offset)
    interface, high, low, captured, original = struct.unpack_from(order + "IIIII", body)
    if interface >= len(interfaces):
        raise DecodeError(LAYER, f"pcapng packet names interface {interface}, which is not described", offset)
    if len(body) - 20 < captured:
        raise DecodeError(LAYER, f"pcapng packet claims {captured} bytes, {len(body) - 20} present", offset)
    linktype, tick = interfaces[interface]
    return CaptureRecord(index, ((high << 32) | low) * tick, linktype, bytes(body[20 : 20 + captured]), original)

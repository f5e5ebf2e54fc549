"""Link, network and UDP framing around SCTP packets.

Implements the encapsulations of the project (see docs/protocol.md):

    Ethernet II (ethertype 0x0800) | IPv4 (protocol 132) | SCTP packet
    Ethernet II | IPv4 (protocol 17) | UDP (RFC 6951, port 9899) | SCTP packet

* Ethernet II header: destination MAC, source MAC (6 bytes each, as `bytes`),
  ethertype.  Frames are handled without FCS and without VLAN tags.
* IPv4 header, RFC 791.  Encoding writes a 20-byte header without options and
  computes the header checksum (RFC 1071).  Decoding skips options (IHL > 5;
  they are kept in `options` for display), verifies the checksum, honours the
  Total Length (Ethernet padding after it is ignored; a Total Length past the
  end of the frame is an error).
* UDP header, RFC 768, checksum over the IPv4 pseudo-header.  A received
  checksum of 0 means "no checksum" and is accepted (RFC 768); RFC 6951 5 lets
  SCTP over UDP send it as 0 because SCTP's CRC32c protects the data.

IPv4 addresses are `ipaddress.IPv4Address`; constructors also accept strings
such as "192.0.2.1" and convert them.

Checksum failures: with `verify=True` (the default) decoding raises
`ChecksumError`; with `verify=False` the header is returned with
`checksum_ok=False` so a dissector can show the frame and flag the failure.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, field, replace
from typing import ClassVar, Union

from model.net.checksum import internet_checksum
from model.errors import ChecksumError, DecodeError, EncodeError, check_field, need

ETHERTYPE_IPV4 = 0x0800
IP_PROTOCOL_UDP = 17
IP_PROTOCOL_SCTP = 132
SCTP_UDP_PORT = 9899
"""IANA port for SCTP over UDP (RFC 6951 5)."""

AddressLike = Union[ipaddress.IPv4Address, str, int]


def _to_ipv4(value: AddressLike) -> ipaddress.IPv4Address:
    """`value` as an IPv4Address, parsed only if it is not one already (it is, past the first call)."""
    if isinstance(value, ipaddress.IPv4Address):
        return value
    try:
        return ipaddress.IPv4Address(value)
    except (ValueError, TypeError) as exc:
        raise EncodeError(f"not an IPv4 address: {value!r}") from exc


def _check_mac(mac: bytes, name: str) -> None:
    if not isinstance(mac, (bytes, bytearray)) or len(mac) != 6:
        raise EncodeError(f"{name} must be 6 bytes, got {mac!r}")


@dataclass(frozen=True)
class EthernetHeader:
    """Ethernet II header: dst MAC, src MAC, ethertype (IEEE 802.3 / RFC 894)."""

    dst: bytes
    src: bytes
    ethertype: int = ETHERTYPE_IPV4

    LENGTH: ClassVar[int] = 14

    def encode(self) -> bytes:
        _check_mac(self.dst, "dst")
        _check_mac(self.src, "src")
        check_field(self.ethertype, 16, "ethertype")
        return bytes(self.dst) + bytes(self.src) + struct.pack("!H", self.ethertype)

    @classmethod
    def decode(cls, data: bytes) -> EthernetHeader:
        """Decode the header at the start of `data` (the payload that follows is not examined)."""
        need(data, cls.LENGTH, "ethernet", "header")
        (ethertype,) = struct.unpack_from("!H", data, 12)
        return cls(dst=bytes(data[0:6]), src=bytes(data[6:12]), ethertype=ethertype)


@dataclass(frozen=True)
class Ipv4Header:
    """IPv4 header, RFC 791 3.1.

    `flags` is the 3-bit flags field (0x2 = Don't Fragment, 0x1 = More
    Fragments).  `total_length` and `options` are filled in by `decode`; the
    encoder always writes a 20-byte header (no options: a header with options
    raises EncodeError) and takes the payload length as an argument.
    `checksum_ok` is False only for a header decoded with `verify=False` whose
    checksum did not match.
    """

    src: ipaddress.IPv4Address
    dst: ipaddress.IPv4Address
    protocol: int = IP_PROTOCOL_SCTP
    ttl: int = 64
    identification: int = 0
    tos: int = 0
    flags: int = 0x2
    fragment_offset: int = 0
    total_length: int = field(default=0, compare=False)
    options: bytes = b""
    checksum_ok: bool = field(default=True, compare=False)

    MIN_LENGTH: ClassVar[int] = 20
    FLAG_DONT_FRAGMENT: ClassVar[int] = 0x2
    FLAG_MORE_FRAGMENTS: ClassVar[int] = 0x1

    def __post_init__(self) -> None:
        object.__setattr__(self, "src", _to_ipv4(self.src))
        object.__setattr__(self, "dst", _to_ipv4(self.dst))

    @property
    def header_length(self) -> int:
        """Header length in bytes (IHL * 4)."""
        return self.MIN_LENGTH + len(self.options)

    @property
    def is_fragment(self) -> bool:
        """True if this datagram is a fragment (MF set or a non-zero offset, RFC 791 2.3)."""
        return bool(self.flags & self.FLAG_MORE_FRAGMENTS) or self.fragment_offset != 0

    def encode(self, payload_length: int) -> bytes:
        """The 20-byte header for a payload of `payload_length` bytes, checksum computed."""
        if self.options:
            raise EncodeError("IPv4 options are not supported on encode")
        total = self.MIN_LENGTH + payload_length
        if not 0 <= payload_length or total > 0xFFFF:
            raise EncodeError(f"IPv4 total length {total} out of range")
        check_field(self.protocol, 8, "protocol")
        check_field(self.ttl, 8, "ttl")
        check_field(self.identification, 16, "identification")
        check_field(self.tos, 8, "tos")
        check_field(self.flags, 3, "flags")
        check_field(self.fragment_offset, 13, "fragment_offset")
        header = bytearray(
            struct.pack(
                "!BBHHHBBH4s4s",
                0x45,
                self.tos,
                total,
                self.identification,
                (self.flags << 13) | self.fragment_offset,
                self.ttl,
                self.protocol,
                0,
                self.src.packed,
                self.dst.packed,
            )
        )
        struct.pack_into("!H", header, 10, internet_checksum(bytes(header)))
        return bytes(header)

    @classmethod
    def decode(cls, data: bytes, verify: bool = True, check_total_length: bool = True) -> Ipv4Header:
        """Decode the header at the start of `data`, the IPv4 datagram (plus any link padding).

        Raises DecodeError for a version other than 4, an IHL below 5, or a
        header or Total Length that runs past `data`; ChecksumError for a bad
        header checksum when `verify` is set.  With `check_total_length` False
        the Total Length is not compared with `data` (a receiver that checks
        the header before the datagram's length; `payload_of` checks it later).
        """
        need(data, cls.MIN_LENGTH, "ipv4", "header")
        (_, tos, total, ident, frag, ttl, proto, checksum, src, dst) = struct.unpack_from(
            "!BBHHHBBH4s4s", data, 0
        )
        version, ihl = ipv4_version_and_ihl(data)
        if version != 4:
            raise DecodeError("ipv4", f"version {version} is not 4", 0)
        header_length = ihl * 4
        if header_length < cls.MIN_LENGTH:
            raise DecodeError("ipv4", f"IHL {ihl} below 5", 0)
        need(data, header_length, "ipv4", "header with options")
        if check_total_length:
            _check_total_length(total, header_length, len(data))
        header = bytes(data[:header_length])
        ok = internet_checksum(header) == 0
        if not ok and verify:
            computed = internet_checksum(header[:10] + b"\x00\x00" + header[12:])
            raise ChecksumError("ipv4", computed, checksum)
        return cls(
            src=ipaddress.IPv4Address(src),
            dst=ipaddress.IPv4Address(dst),
            protocol=proto,
            ttl=ttl,
            identification=ident,
            tos=tos,
            flags=frag >> 13,
            fragment_offset=frag & 0x1FFF,
            total_length=total,
            options=header[cls.MIN_LENGTH :],
            checksum_ok=ok,
        )


    def payload_of(self, datagram: bytes) -> bytes:
        """The payload of `datagram`, whose header this is: the bytes after the header up to
        Total Length (link padding after it dropped); DecodeError when Total Length is shorter
        than the header or runs past `datagram`."""
        _check_total_length(self.total_length, self.header_length, len(datagram))
        return bytes(datagram[self.header_length : self.total_length])


def _check_total_length(total: int, header_length: int, available: int) -> None:
    if total < header_length:
        raise DecodeError("ipv4", f"total length {total} shorter than header {header_length}", 2)
    if total > available:
        raise DecodeError("ipv4", f"total length {total} past the {available} bytes received", 2)


def _udp_pseudo_header(src: ipaddress.IPv4Address, dst: ipaddress.IPv4Address, length: int) -> bytes:
    # RFC 768: source address, destination address, zero, protocol, UDP length.
    return src.packed + dst.packed + struct.pack("!BBH", 0, IP_PROTOCOL_UDP, length)


@dataclass(frozen=True)
class UdpHeader:
    """UDP header, RFC 768.

    `checksum_enabled=False` sends a checksum of 0 ("none", allowed for SCTP
    over UDP by RFC 6951 5).  `length` (header plus payload) is filled in by
    `decode`.  On decode, `checksum_present` says whether the checksum was
    non-zero and `checksum_ok` whether it matched (True when absent).
    """

    src_port: int = SCTP_UDP_PORT
    dst_port: int = SCTP_UDP_PORT
    checksum_enabled: bool = True
    length: int = field(default=0, compare=False)
    checksum_present: bool = field(default=True, compare=False)
    checksum_ok: bool = field(default=True, compare=False)

    LENGTH: ClassVar[int] = 8

    def encode(self, payload: bytes, src_ip: AddressLike, dst_ip: AddressLike) -> bytes:
        """The 8-byte header for `payload`, checksum over the pseudo-header of src_ip/dst_ip."""
        check_field(self.src_port, 16, "src_port")
        check_field(self.dst_port, 16, "dst_port")
        length = self.LENGTH + len(payload)
        if length > 0xFFFF:
            raise EncodeError(f"UDP length {length} out of range")
        header = struct.pack("!HHHH", self.src_port, self.dst_port, length, 0)
        checksum = 0
        if self.checksum_enabled:
            pseudo = _udp_pseudo_header(_to_ipv4(src_ip), _to_ipv4(dst_ip), length)
            # RFC 768: a computed checksum of zero is transmitted as all ones.
            checksum = internet_checksum(pseudo + header + bytes(payload)) or 0xFFFF
        return header[:6] + struct.pack("!H", checksum)

    @classmethod
    def decode(
        cls, data: bytes, src_ip: AddressLike, dst_ip: AddressLike, verify: bool = True
    ) -> UdpHeader:
        """Decode the header at the start of `data`, the UDP datagram as bounded by IPv4.

        The UDP length must lie between 8 and len(data); bytes after it are ignored.
        """
        need(data, cls.LENGTH, "udp", "header")
        src_port, dst_port, length, checksum = struct.unpack_from("!HHHH", data, 0)
        if length < cls.LENGTH:
            raise DecodeError("udp", f"length {length} shorter than the header", 4)
        if length > len(data):
            raise DecodeError("udp", f"length {length} past the {len(data)} bytes of the datagram", 4)
        present = checksum != 0
        ok = True
        if present:
            pseudo = _udp_pseudo_header(_to_ipv4(src_ip), _to_ipv4(dst_ip), length)
            ok = internet_checksum(pseudo + bytes(data[:length])) == 0
            if not ok and verify:
                zeroed = pseudo + bytes(data[:6]) + b"\x00\x00" + bytes(data[8:length])
                raise ChecksumError("udp", internet_checksum(zeroed) or 0xFFFF, checksum)
        return cls(
            src_port=src_port,
            dst_port=dst_port,
            checksum_enabled=present,
            length=length,
            checksum_present=present,
            checksum_ok=ok,
        )


@dataclass(frozen=True)
class Frame:
    """An Ethernet frame carrying one SCTP packet, directly over IPv4 or over UDP.

    `sctp` is the SCTP packet's bytes (decode them with `model.sctp.packet.SctpPacket`).
    On encode the IPv4 protocol is set from `udp` (17 with UDP, 132 without)
    and the lengths and checksums are computed.
    """

    eth: EthernetHeader
    ip: Ipv4Header
    udp: UdpHeader | None
    sctp: bytes

    @property
    def checksums_ok(self) -> bool:
        """True unless a decode with verify=False found a bad IPv4 or UDP checksum."""
        return self.ip.checksum_ok and (self.udp is None or self.udp.checksum_ok)

    def encode(self) -> bytes:
        if self.eth.ethertype != ETHERTYPE_IPV4:
            raise EncodeError(f"ethertype 0x{self.eth.ethertype:04x} is not IPv4")
        sctp = bytes(self.sctp)
        if self.udp is None:
            ip = replace(self.ip, protocol=IP_PROTOCOL_SCTP)
            payload = sctp
        else:
            ip = replace(self.ip, protocol=IP_PROTOCOL_UDP)
            payload = self.udp.encode(sctp, ip.src, ip.dst) + sctp
        return self.eth.encode() + ip.encode(len(payload)) + payload

    @classmethod
    def decode(cls, data: bytes, verify: bool = True) -> Frame:
        """Decode an Ethernet frame (without FCS) carrying SCTP over IPv4 or over UDP.

        Raises DecodeError for another ethertype or IP protocol and for IPv4
        fragments (not reassembled here); ChecksumError for a bad IPv4 or UDP
        checksum when `verify` is set.  UDP ports are not checked (RFC 6951
        allows ports other than 9899).  The SCTP checksum is not examined.
        """
        data = bytes(data)
        eth = EthernetHeader.decode(data)
        if eth.ethertype != ETHERTYPE_IPV4:
            raise DecodeError("ethernet", f"ethertype 0x{eth.ethertype:04x} is not IPv4", 12)
        datagram = data[EthernetHeader.LENGTH :]
        ip = Ipv4Header.decode(datagram, verify=verify)
        if ip.is_fragment:
            raise DecodeError("ipv4", "fragmented datagram (not reassembled)", 6)
        payload = ip.payload_of(datagram)
        if ip.protocol == IP_PROTOCOL_SCTP:
            return cls(eth=eth, ip=ip, udp=None, sctp=payload)
        if ip.protocol == IP_PROTOCOL_UDP:
            udp = UdpHeader.decode(payload, ip.src, ip.dst, verify=verify)
            return cls(eth=eth, ip=ip, udp=udp, sctp=payload[UdpHeader.LENGTH : udp.length])
        raise DecodeError("ipv4", f"protocol {ip.protocol} is neither SCTP nor UDP", 9)


def build_frame(
    sctp_bytes: bytes,
    src_mac: bytes,
    dst_mac: bytes,
    src_ip: AddressLike,
    dst_ip: AddressLike,
    udp: bool = False,
    src_port: int = SCTP_UDP_PORT,
    dst_port: int = SCTP_UDP_PORT,
    udp_checksum: bool = True,
    ttl: int = 64,
    identification: int = 0,
) -> bytes:
    """Encode an SCTP packet into an Ethernet frame, over IPv4 or (udp=True) over UDP.

    `src_port`/`dst_port` are the UDP ports (RFC 6951 default 9899) and are
    only used with udp=True.
    """
    frame = Frame(
        eth=EthernetHeader(dst=dst_mac, src=src_mac),
        ip=Ipv4Header(src=src_ip, dst=dst_ip, ttl=ttl, identification=identification),
        udp=UdpHeader(src_port, dst_port, checksum_enabled=udp_checksum) if udp else None,
        sctp=sctp_bytes,
    )
    return frame.encode()


class FrameTemplate:
    """`build_frame` for one pair of endpoints, the headers' fixed fields packed once: what a host uses for
    every packet of an association (the bytes are `build_frame`'s, byte for byte).

    And the receive side's shortcut, `plain_sctp`: the SCTP packet of a frame from the peer to this end in
    the common form (SCTP straight over IPv4, a 20-byte header, not a fragment, a good header checksum), found
    without decoding the headers into objects; any other frame gives None, for `Frame.decode` to judge."""

    __slots__ = ("_ethernet", "_ip_fixed", "_addresses", "_udp", "_reverse", "_pseudo")

    _IPV4 = struct.Struct("!BBHHHBBH")

    def __init__(self, src_mac: bytes, dst_mac: bytes, src_ip: AddressLike, dst_ip: AddressLike, *,
                 udp: UdpHeader | None = None, ttl: int = 64) -> None:
        _check_mac(src_mac, "src")
        _check_mac(dst_mac, "dst")
        src, dst = _to_ipv4(src_ip), _to_ipv4(dst_ip)
        check_field(ttl, 8, "ttl")
        self._ethernet = bytes(dst_mac) + bytes(src_mac) + struct.pack("!H", ETHERTYPE_IPV4)
        self._ip_fixed = (ttl, IP_PROTOCOL_UDP if udp is not None else IP_PROTOCOL_SCTP)
        self._addresses = src.packed + dst.packed
        self._udp = udp
        self._pseudo = (src, dst)
        # What a frame from the peer to this end starts with: the MACs swapped, IPv4.
        self._reverse = (bytes(src_mac) + bytes(dst_mac) + struct.pack("!H", ETHERTYPE_IPV4), dst.packed + src.packed)

    def frame(self, sctp: bytes, identification: int = 0) -> bytes:
        """The Ethernet frame of `sctp`, IPv4 Identification `identification` (Don't Fragment set)."""
        payload = sctp if self._udp is None else self._udp.encode(sctp, *self._pseudo) + sctp
        total = 20 + len(payload)
        if total > 0xFFFF:
            raise EncodeError(f"IPv4 total length {total} out of range")
        ttl, protocol = self._ip_fixed
        header = self._IPV4.pack(0x45, 0, total, identification & 0xFFFF,
                                 Ipv4Header.FLAG_DONT_FRAGMENT << 13, ttl, protocol, 0) + self._addresses
        checksum = internet_checksum(header)
        return b"".join((self._ethernet, header[:10], checksum.to_bytes(2, "big"), header[12:], payload))

    def plain_sctp(self, frame: bytes) -> bytes | None:
        """The SCTP packet of `frame` if it is a plain SCTP-over-IPv4 frame from the peer to this end (see the
        class docs), else None."""
        if self._udp is not None or len(frame) < 34:
            return None
        ethernet, addresses = self._reverse
        if frame[:14] != ethernet or frame[14] != 0x45 or frame[23] != IP_PROTOCOL_SCTP or frame[26:34] != addresses:
            return None
        total = (frame[16] << 8) | frame[17]
        if frame[20] & 0x3F or frame[21] or total < 20 or 14 + total > len(frame):
            return None  # a fragment (MF or an offset), or a Total Length the frame does not hold
        if internet_checksum(frame[14:34]) != 0:
            return None
        return bytes(frame[34:14 + total])


# Fields a receiver decides on as soon as they have arrived, before (or
# without) the rest of the header: the MAC filter, the IP version check and
# the UDP port demultiplexer.  None when the bytes do not reach the field.


def ethernet_destination(frame: bytes) -> bytes | None:
    """The destination MAC of an Ethernet frame (its first 6 bytes)."""
    return bytes(frame[0:6]) if len(frame) >= 6 else None


def ipv4_version_and_ihl(datagram: bytes) -> tuple[int, int] | None:
    """Version and IHL (header length in 32-bit words) of an IPv4 header, its first byte (RFC 791 3.1)."""
    return (datagram[0] >> 4, datagram[0] & 0xF) if datagram else None


def udp_destination_port(datagram: bytes) -> int | None:
    """The destination port of a UDP datagram (RFC 768), bytes 2-3."""
    return struct.unpack_from("!H", datagram, 2)[0] if len(datagram) >= 4 else None

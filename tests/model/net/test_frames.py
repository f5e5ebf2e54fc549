"""Tests for model.net.frames: Ethernet II, IPv4 (RFC 791), UDP (RFC 768) and SCTP over UDP (RFC 6951)."""

import dataclasses
import ipaddress
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from model.net.checksum import internet_checksum
from model.errors import ChecksumError, DecodeError, EncodeError
from model.net.frames import (
    ETHERTYPE_IPV4,
    IP_PROTOCOL_SCTP,
    IP_PROTOCOL_UDP,
    SCTP_UDP_PORT,
    EthernetHeader,
    Frame,
    FrameTemplate,
    Ipv4Header,
    UdpHeader,
    build_frame,
)

h = bytes.fromhex
SRC_MAC = h("020000000001")
DST_MAC = h("020000000002")
SCTP = h("1388138900000000 aabbccdd 0b000004")


def test_ethernet_header_vector() -> None:
    header = EthernetHeader(dst=DST_MAC, src=SRC_MAC)
    assert header.encode() == DST_MAC + SRC_MAC + h("0800")
    assert EthernetHeader.decode(header.encode() + b"payload") == header
    with pytest.raises(DecodeError):
        EthernetHeader.decode(bytes(13))
    with pytest.raises(EncodeError):
        EthernetHeader(dst=b"\x00" * 5, src=SRC_MAC).encode()


def test_rfc791_ipv4_header_vector() -> None:
    """RFC 791 3.1 header layout, checksum per RFC 1071 (a well-known header, checksum b861)."""
    header = Ipv4Header(
        src="192.168.0.1", dst="192.168.0.199", protocol=17, ttl=64, identification=0, flags=0x2
    )
    wire = header.encode(payload_length=0x73 - 20)
    assert wire == h("45000073 00004000 4011b861 c0a80001 c0a800c7")
    decoded = Ipv4Header.decode(wire + bytes(0x73 - 20))
    assert decoded == header and decoded.total_length == 0x73 and decoded.checksum_ok
    assert decoded.src == ipaddress.IPv4Address("192.168.0.1")


def test_full_frame_vector_plain_ipv4() -> None:
    """Ethernet | IPv4 protocol 132 | SCTP (docs/protocol.md encapsulation)."""
    wire = build_frame(SCTP, SRC_MAC, DST_MAC, "10.0.0.1", "10.0.0.2")
    ip = h("45000024 00004000 4084") + b"\x00\x00" + h("0a000001 0a000002")
    ip = ip[:10] + struct.pack("!H", internet_checksum(ip)) + ip[12:]
    assert wire == DST_MAC + SRC_MAC + h("0800") + ip + SCTP
    frame = Frame.decode(wire)
    assert frame.udp is None and frame.sctp == SCTP and frame.ip.protocol == IP_PROTOCOL_SCTP


def test_rfc6951_udp_encapsulation_vector() -> None:
    """RFC 6951 5: SCTP over UDP port 9899; UDP checksum over the RFC 768 pseudo-header."""
    wire = build_frame(SCTP, SRC_MAC, DST_MAC, "10.0.0.1", "10.0.0.2", udp=True)
    udp = wire[34:42]
    assert struct.unpack("!HHH", udp[:6]) == (SCTP_UDP_PORT, SCTP_UDP_PORT, 8 + len(SCTP))
    pseudo = h("0a000001 0a000002 0011") + struct.pack("!H", 8 + len(SCTP))
    assert internet_checksum(pseudo + udp + SCTP) == 0
    frame = Frame.decode(wire)
    assert frame.ip.protocol == IP_PROTOCOL_UDP and frame.udp.checksum_present and frame.sctp == SCTP


def test_rfc768_zero_udp_checksum_means_none() -> None:
    """RFC 768: a transmitted checksum of zero means none was computed; it is accepted."""
    wire = build_frame(SCTP, SRC_MAC, DST_MAC, "10.0.0.1", "10.0.0.2", udp=True, udp_checksum=False)
    assert wire[40:42] == b"\x00\x00"
    frame = Frame.decode(wire)
    assert frame.udp.checksum_present is False and frame.udp.checksum_ok and frame.sctp == SCTP


def test_rfc768_computed_zero_sent_as_all_ones() -> None:
    """RFC 768: a computed checksum of 0 is transmitted as 0xFFFF."""
    # Choose a 2-byte payload that makes the one's complement sum 0xFFFF.
    src, dst = "0.0.0.0", "0.0.0.0"
    base = internet_checksum(h("00000000 00000000 0011 000a") + h("0001 0002 000a 0000"))
    payload = struct.pack("!H", base)
    header = UdpHeader(1, 2).encode(payload, src, dst)
    assert header[6:8] == b"\xff\xff"
    assert UdpHeader.decode(header + payload, src, dst).checksum_ok


def test_trailing_ethernet_padding_ignored() -> None:
    """RFC 791: Total Length bounds the datagram; the minimum-frame padding after it is ignored."""
    wire = build_frame(SCTP, SRC_MAC, DST_MAC, "10.0.0.1", "10.0.0.2")
    padded = wire + bytes(60 - len(wire)) if len(wire) < 60 else wire + bytes(4)
    assert Frame.decode(padded).sctp == SCTP


def test_total_length_past_frame_is_error() -> None:
    wire = build_frame(SCTP, SRC_MAC, DST_MAC, "10.0.0.1", "10.0.0.2")
    with pytest.raises(DecodeError):
        Frame.decode(wire[:-1])


def _ip_with_options(options: bytes, payload: bytes) -> bytes:
    ihl = (20 + len(options)) // 4
    header = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, 20 + len(options) + len(payload), 0, 0x4000, 64, 132, 0, bytes(4), bytes(4)) + options
    return header[:10] + struct.pack("!H", internet_checksum(header)) + header[12:] + payload


def test_rfc791_options_skipped_on_decode() -> None:
    """RFC 791 3.1: IHL counts the options; the payload starts after them."""
    options = h("01010100")  # NOP NOP NOP End-of-options
    wire = DST_MAC + SRC_MAC + h("0800") + _ip_with_options(options, SCTP)
    frame = Frame.decode(wire)
    assert frame.ip.options == options and frame.ip.header_length == 24 and frame.sctp == SCTP
    with pytest.raises(EncodeError):
        frame.encode()  # no options on encode


@pytest.mark.parametrize(
    "mutate",
    [
        lambda ip: bytes([0x65]) + ip[1:],  # version 6
        lambda ip: bytes([0x44]) + ip[1:],  # IHL 4
        lambda ip: bytes([0x4F]) + ip[1:],  # IHL 15 past the data
        lambda ip: ip[:2] + struct.pack("!H", 19) + ip[4:],  # total length below header
        lambda ip: ip[:19],  # truncated header
    ],
)
def test_malformed_ipv4_header(mutate) -> None:
    ip = _ip_with_options(b"", SCTP)
    with pytest.raises(DecodeError):
        Ipv4Header.decode(mutate(ip), verify=False)


def test_rfc791_bad_header_checksum_raises_or_flags() -> None:
    """RFC 791: a bad header checksum is detected; verify=False shows the frame and flags it."""
    wire = bytearray(build_frame(SCTP, SRC_MAC, DST_MAC, "10.0.0.1", "10.0.0.2"))
    wire[14 + 8] ^= 0x01  # TTL
    with pytest.raises(ChecksumError) as info:
        Frame.decode(bytes(wire))
    assert info.value.layer == "ipv4"
    frame = Frame.decode(bytes(wire), verify=False)
    assert frame.ip.checksum_ok is False and not frame.checksums_ok and frame.sctp == SCTP


def test_rfc768_bad_udp_checksum_raises_or_flags() -> None:
    wire = bytearray(build_frame(SCTP, SRC_MAC, DST_MAC, "10.0.0.1", "10.0.0.2", udp=True))
    wire[-1] ^= 0x01
    with pytest.raises(ChecksumError) as info:
        Frame.decode(bytes(wire))
    assert info.value.layer == "udp"
    frame = Frame.decode(bytes(wire), verify=False)
    assert frame.udp.checksum_ok is False and frame.ip.checksum_ok and not frame.checksums_ok


@pytest.mark.parametrize("length", [7, 100])
def test_bad_udp_length(length: int) -> None:
    datagram = struct.pack("!HHHH", 1, 2, length, 0) + SCTP
    with pytest.raises(DecodeError):
        UdpHeader.decode(datagram, "1.2.3.4", "5.6.7.8")


def test_frame_decode_rejects_other_protocols_and_fragments() -> None:
    wire = build_frame(SCTP, SRC_MAC, DST_MAC, "10.0.0.1", "10.0.0.2")
    with pytest.raises(DecodeError):
        Frame.decode(wire[:12] + h("86dd") + wire[14:])
    ip = Ipv4Header(src="1.1.1.1", dst="2.2.2.2", protocol=6).encode(len(SCTP))
    with pytest.raises(DecodeError):
        Frame.decode(wire[:14] + ip + SCTP)
    fragment = Ipv4Header(src="1.1.1.1", dst="2.2.2.2", flags=0x1).encode(len(SCTP))
    with pytest.raises(DecodeError):
        Frame.decode(wire[:14] + fragment + SCTP)


def test_encode_rejects_out_of_range() -> None:
    with pytest.raises(EncodeError):
        Ipv4Header(src="1.1.1.1", dst="2.2.2.2", ttl=256).encode(0)
    with pytest.raises(EncodeError):
        Ipv4Header(src="1.1.1.1", dst="2.2.2.2").encode(0xFFFF)
    with pytest.raises(EncodeError):
        Ipv4Header(src="300.1.1.1", dst="2.2.2.2")
    with pytest.raises(EncodeError):
        UdpHeader(src_port=1 << 16).encode(b"", "1.1.1.1", "2.2.2.2")


addresses = st.integers(0, 0xFFFFFFFF).map(ipaddress.IPv4Address)
frames = st.builds(
    Frame,
    eth=st.builds(EthernetHeader, dst=st.binary(min_size=6, max_size=6), src=st.binary(min_size=6, max_size=6)),
    ip=st.builds(
        Ipv4Header,
        src=addresses,
        dst=addresses,
        ttl=st.integers(0, 255),
        identification=st.integers(0, 0xFFFF),
        tos=st.integers(0, 255),
        flags=st.sampled_from([0, 2]),
    ),
    udp=st.none() | st.builds(UdpHeader, st.integers(0, 0xFFFF), st.integers(0, 0xFFFF), st.booleans()),
    sctp=st.binary(max_size=64),
)


@given(frames, st.binary(max_size=8))
def test_frame_round_trip(frame: Frame, trailer: bytes) -> None:
    wire = frame.encode()
    decoded = Frame.decode(wire + trailer)
    expected_protocol = IP_PROTOCOL_UDP if frame.udp is not None else IP_PROTOCOL_SCTP
    assert decoded.ip == dataclasses.replace(frame.ip, protocol=expected_protocol)
    assert decoded.eth == frame.eth and decoded.udp == frame.udp and decoded.sctp == frame.sctp
    assert decoded.encode() == wire
    assert decoded.checksums_ok and decoded.eth.ethertype == ETHERTYPE_IPV4


@given(st.binary(max_size=80), st.booleans())
def test_random_bytes_raise_only_decode_error(data: bytes, verify: bool) -> None:
    try:
        Frame.decode(data, verify=verify)
    except DecodeError:
        pass


@given(frames, st.data())
def test_mutated_frames_raise_only_decode_error(frame: Frame, data: st.DataObject) -> None:
    wire = bytearray(frame.encode())
    index = data.draw(st.integers(0, len(wire) - 1))
    wire[index] ^= data.draw(st.integers(1, 255))
    try:
        Frame.decode(bytes(wire), verify=data.draw(st.booleans()))
    except DecodeError:
        pass


def test_ipv4_header_before_total_length_and_payload_of_rfc791_3_1() -> None:
    """check_total_length=False decodes a header whose Total Length runs past the bytes;
    payload_of then checks it, and drops link padding after it."""
    from model.net.frames import ipv4_version_and_ihl

    frame = build_frame(SCTP, SRC_MAC, DST_MAC, "10.0.0.1", "10.0.0.2")
    datagram = frame[EthernetHeader.LENGTH :]
    assert ipv4_version_and_ihl(datagram) == (4, 5) and ipv4_version_and_ihl(b"") is None
    header = Ipv4Header.decode(datagram[:30], verify=True, check_total_length=False)
    assert header.total_length == 20 + len(SCTP)
    with pytest.raises(DecodeError, match="past the 30 bytes"):
        Ipv4Header.decode(datagram[:30])
    with pytest.raises(DecodeError, match="past the 30 bytes"):
        header.payload_of(datagram[:30])
    assert header.payload_of(datagram + bytes(6)) == SCTP


def test_fields_read_before_the_whole_header() -> None:
    from model.net.frames import ethernet_destination, udp_destination_port

    assert ethernet_destination(DST_MAC + h("02")) == DST_MAC and ethernet_destination(DST_MAC[:5]) is None
    assert udp_destination_port(h("1388 26ab")) == 9899 and udp_destination_port(h("1388 26")) is None


# -- FrameTemplate: build_frame's bytes for one pair of endpoints, and the receive shortcut ---------------


@given(st.binary(min_size=6, max_size=6), st.binary(min_size=6, max_size=6), addresses, addresses,
       st.booleans(), st.integers(0, 0xFFFF), st.binary(min_size=12, max_size=1500))
def test_template_frames_are_build_frames_bytes(src_mac, dst_mac, src_ip, dst_ip, udp, identification, sctp) -> None:
    template = FrameTemplate(src_mac, dst_mac, src_ip, dst_ip, udp=UdpHeader() if udp else None)
    assert template.frame(sctp, identification) == build_frame(sctp, src_mac, dst_mac, src_ip, dst_ip, udp=udp,
                                                                identification=identification)


def test_template_frames_as_scapy_decodes_them_rfc791() -> None:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    for udp in (False, True):
        template = FrameTemplate(SRC_MAC, DST_MAC, "192.0.2.1", "192.0.2.2", udp=UdpHeader() if udp else None)
        wire = template.frame(SCTP, identification=0x1234)
        parsed = Ether(wire)
        assert (parsed.src, parsed.dst, parsed.type) == ("02:00:00:00:00:01", "02:00:00:00:00:02", 0x0800)
        ip = parsed[IP]
        assert (ip.version, ip.ihl, ip.len, ip.id, ip.flags, ip.frag, ip.ttl) == (4, 5, len(wire) - 14, 0x1234,
                                                                                  "DF", 0, 64)
        assert (ip.src, ip.dst, ip.proto) == ("192.0.2.1", "192.0.2.2", 17 if udp else 132)
        checksum = ip.chksum
        del ip.chksum                       # scapy recomputes it on build
        assert IP(bytes(ip)).chksum == checksum
        payload = bytes(ip.payload)
        if udp:
            assert (parsed[UDP].sport, parsed[UDP].dport) == (SCTP_UDP_PORT, SCTP_UDP_PORT)
            payload = bytes(parsed[UDP].payload)
        assert payload == SCTP


def _plain_frame_decoded(frame: bytes, peer_mac: bytes, peer_ip) -> bytes | None:
    """What the full decoder says of `frame` for this end (`local`'s source) from the peer: the SCTP bytes of
    an SCTP-over-IPv4 frame to and from them, None for anything else or an error."""
    try:
        decoded = Frame.decode(frame)
    except DecodeError:
        return None
    if (decoded.udp is not None or decoded.eth.src != peer_mac or decoded.eth.dst != local_mac
            or decoded.ip.src != peer_ip or decoded.ip.dst != local_ip):
        return None
    return decoded.sctp


local_mac, local_ip = DST_MAC, ipaddress.IPv4Address("192.0.2.2")


@given(st.binary(min_size=12, max_size=200), st.binary(max_size=8), st.data())
def test_the_receive_shortcut_takes_only_what_the_decoder_takes(sctp: bytes, padding: bytes,
                                                                 data: st.DataObject) -> None:
    """A frame either gives the packet the full decoder gives, or None (the caller then decodes it in full):
    never another packet, never a frame the decoder refuses (RFC 791 3.1: checksum, length, fragments)."""
    peer_ip = ipaddress.IPv4Address("192.0.2.1")
    sent = FrameTemplate(SRC_MAC, local_mac, peer_ip, local_ip).frame(sctp, data.draw(st.integers(0, 0xFFFF)))
    wire = bytearray(sent + padding)
    if data.draw(st.booleans()):
        index = data.draw(st.integers(0, 33))      # a header byte changed
        wire[index] ^= data.draw(st.integers(1, 255))
    local = FrameTemplate(local_mac, SRC_MAC, local_ip, peer_ip)
    shortcut = local.plain_sctp(bytes(wire))
    full = _plain_frame_decoded(bytes(wire), SRC_MAC, peer_ip)
    assert shortcut is None or shortcut == full
    if wire[:34] == sent[:34]:
        assert shortcut == sctp                    # the unchanged frame, Ethernet padding dropped


def test_the_receive_shortcut_leaves_fragments_options_and_udp_to_the_decoder() -> None:
    peer_ip, local_ip_ = "192.0.2.1", "192.0.2.2"
    local = FrameTemplate(DST_MAC, SRC_MAC, local_ip_, peer_ip)
    fragment = Frame(EthernetHeader(DST_MAC, SRC_MAC), Ipv4Header(peer_ip, local_ip_, flags=1), None, SCTP).encode()
    over_udp = build_frame(SCTP, SRC_MAC, DST_MAC, peer_ip, local_ip_, udp=True)
    assert local.plain_sctp(fragment) is None and local.plain_sctp(over_udp) is None
    with_options = bytearray(build_frame(SCTP, SRC_MAC, DST_MAC, peer_ip, local_ip_))
    with_options[14] = 0x46                        # IHL 6: one word of options, which plain frames never have
    assert local.plain_sctp(bytes(with_options)) is None
    assert local.plain_sctp(build_frame(SCTP, SRC_MAC, DST_MAC, peer_ip, local_ip_)) == SCTP

"""Independent decoder check: scapy's SCTP layer and the model agree on frames each other built.

Covers an INIT with the Adaptation Layer Indication (RFC 5043 5.1), bundled
unordered DATA chunks with PPIDs 16 and 17 (RFC 5043 5.2), and a SACK with gap
blocks and duplicate TSNs (RFC 4960 3.3.4), over plain IPv4 and over UDP 9899
(RFC 6951), plus the CRC32c (RFC 4960 6.8) as scapy recomputes it.
"""

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.layers.sctp import (
    SCTP,
    SCTPChunkAbort,
    SCTPChunkCookieAck,
    SCTPChunkCookieEcho,
    SCTPChunkData,
    SCTPChunkHeartbeatReq,
    SCTPChunkInit,
    SCTPChunkInitAck,
    SCTPChunkParamAdaptationLayer,
    SCTPChunkParamHeartbeatInfo,
    SCTPChunkParamIPv4Addr,
    SCTPChunkParamStateCookie,
    SCTPChunkParamSupportedAddrTypes,
    SCTPChunkSACK,
    SCTPChunkShutdown,
    SCTPChunkShutdownAck,
    SCTPChunkShutdownComplete,
)

from model.net.frames import SCTP_UDP_PORT, Frame, build_frame
from model.sctp.packet import (
    PPID_DDP_SEGMENT,
    PPID_DDP_SESSION_CONTROL,
    AbortChunk,
    AdaptationLayerIndication,
    CookieAckChunk,
    CookieEchoChunk,
    DataChunk,
    HeartbeatChunk,
    InitAckChunk,
    InitChunk,
    Ipv4AddressParameter,
    SackChunk,
    SctpPacket,
    ShutdownAckChunk,
    ShutdownChunk,
    ShutdownCompleteChunk,
    StateCookieParameter,
    SupportedAddressTypesParameter,
)

SRC_MAC, DST_MAC = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
SRC_IP, DST_IP = "192.0.2.1", "192.0.2.2"

INIT = SctpPacket(
    5000,
    5001,
    0,
    (
        InitChunk(
            initiate_tag=0x1A2B3C4D,
            a_rwnd=65536,
            outbound_streams=16,
            inbound_streams=16,
            initial_tsn=1000,
            parameters=(
                Ipv4AddressParameter(SRC_IP),
                SupportedAddressTypesParameter(address_types=(5,)),
                AdaptationLayerIndication(),
            ),
        ),
    ),
)
DATA = SctpPacket(
    5000,
    5001,
    0x1A2B3C4D,
    (
        DataChunk(1000, 3, 0, PPID_DDP_SESSION_CONTROL, b"\x00\x00\x00\x01hello", unordered=True),
        DataChunk(1001, 3, 0, PPID_DDP_SEGMENT, b"\x00\x01" + bytes(range(23)), unordered=True),
        DataChunk(1002, 4, 0, PPID_DDP_SEGMENT, b"\x00\x00xyz", unordered=True, immediate=True),
    ),
)
SACK = SctpPacket(5001, 5000, 0x0BADCAFE, (SackChunk(999, 32768, ((2, 3), (5, 9)), (997, 998)),))


def _scapy_crc_bytes(raw: bytes) -> bytes:
    """The checksum bytes scapy computes for `raw` when asked to fill the field itself."""
    packet = SCTP(raw)
    packet.chksum = None
    return bytes(packet)[8:12]


def _scapy_sctp(frame: bytes, udp: bool) -> SCTP:
    ether = Ether(frame)
    assert ether[IP].src == SRC_IP and ether[IP].dst == DST_IP
    if udp:
        datagram = ether[UDP]
        assert datagram.sport == SCTP_UDP_PORT and datagram.dport == SCTP_UDP_PORT
        recomputed = UDP(bytes(datagram))
        recomputed.chksum = None
        rebuilt = IP(src=SRC_IP, dst=DST_IP) / recomputed
        assert UDP(bytes(rebuilt)[20:]).chksum == datagram.chksum
        return SCTP(bytes(datagram.payload))
    assert ether[IP].proto == 132
    return ether[SCTP]


@pytest.mark.parametrize("udp", [False, True], ids=["ipv4", "udp9899"])
def test_scapy_reads_init_with_adaptation_indication(udp: bool) -> None:
    """RFC 5043 5.1: scapy sees the INIT and its Adaptation Layer Indication of 1."""
    raw = INIT.encode()
    sctp = _scapy_sctp(build_frame(raw, SRC_MAC, DST_MAC, SRC_IP, DST_IP, udp=udp), udp)
    assert (sctp.sport, sctp.dport, sctp.tag) == (5000, 5001, 0)
    assert _scapy_crc_bytes(raw) == raw[8:12]
    init = sctp[SCTPChunkInit]
    assert (init.init_tag, init.a_rwnd, init.n_out_streams, init.n_in_streams, init.init_tsn) == (
        0x1A2B3C4D,
        65536,
        16,
        16,
        1000,
    )
    assert init.len == len(INIT.chunks[0].encode())
    params = init.params
    assert isinstance(params[0], SCTPChunkParamIPv4Addr) and params[0].addr == SRC_IP
    assert isinstance(params[1], SCTPChunkParamSupportedAddrTypes) and list(params[1].addr_type_list) == [5]
    assert isinstance(params[2], SCTPChunkParamAdaptationLayer) and params[2].indication == 1


@pytest.mark.parametrize("udp", [False, True], ids=["ipv4", "udp9899"])
def test_scapy_reads_bundled_unordered_ddp_data(udp: bool) -> None:
    """RFC 5043 5.2 / 10: bundled unordered DATA chunks with PPIDs 17 and 16."""
    raw = DATA.encode()
    sctp = _scapy_sctp(build_frame(raw, SRC_MAC, DST_MAC, SRC_IP, DST_IP, udp=udp), udp)
    assert _scapy_crc_bytes(raw) == raw[8:12]
    seen = []
    layer = sctp.payload
    while isinstance(layer, SCTPChunkData):
        seen.append(layer)
        layer = layer.payload
    assert len(seen) == len(DATA.chunks)
    for theirs, ours in zip(seen, DATA.chunks):
        assert (theirs.tsn, theirs.stream_id, theirs.stream_seq, theirs.proto_id) == (
            ours.tsn,
            ours.stream_id,
            ours.ssn,
            ours.ppid,
        )
        assert (theirs.unordered, theirs.beginning, theirs.ending, theirs.delay_sack) == (
            1,
            1,
            1,
            int(ours.immediate),
        )
        assert theirs.len == 16 + len(ours.user_data)
        assert bytes(theirs.data)[: len(ours.user_data)] == ours.user_data


@pytest.mark.parametrize("udp", [False, True], ids=["ipv4", "udp9899"])
def test_scapy_reads_sack_with_gap_blocks(udp: bool) -> None:
    """RFC 4960 3.3.4: gap blocks and duplicate TSNs as scapy reads them."""
    raw = SACK.encode()
    sctp = _scapy_sctp(build_frame(raw, SRC_MAC, DST_MAC, SRC_IP, DST_IP, udp=udp), udp)
    assert _scapy_crc_bytes(raw) == raw[8:12]
    sack = sctp[SCTPChunkSACK]
    assert (sack.cumul_tsn_ack, sack.a_rwnd, sack.n_gap_ack, sack.n_dup_tsn) == (999, 32768, 2, 2)
    assert list(sack.gap_ack_list) == ["2:3", "5:9"]
    assert list(sack.dup_tsn_list) == [997, 998]


def test_scapy_and_model_agree_on_bad_checksum() -> None:
    """RFC 4960 6.8: a corrupted packet fails both scapy's recomputation and ours."""
    raw = bytearray(DATA.encode())
    raw[-1] ^= 0xFF
    raw = bytes(raw)
    assert _scapy_crc_bytes(raw) != raw[8:12]
    assert SctpPacket.decode(raw, verify_checksum=False).checksum_ok is False


SCAPY_PACKETS = [
    (
        SCTP(sport=1, dport=2, tag=0)
        / SCTPChunkInit(
            init_tag=77,
            a_rwnd=1500,
            n_out_streams=2,
            n_in_streams=3,
            init_tsn=9,
            params=[SCTPChunkParamAdaptationLayer(indication=1), SCTPChunkParamSupportedAddrTypes(addr_type_list=[5])],
        ),
        SctpPacket(
            1,
            2,
            0,
            (InitChunk(77, 1500, 2, 3, 9, (AdaptationLayerIndication(1), SupportedAddressTypesParameter(address_types=(5,)))),),
        ),
    ),
    (
        SCTP(sport=1, dport=2, tag=5)
        / SCTPChunkInitAck(
            init_tag=78, a_rwnd=1500, n_out_streams=2, n_in_streams=3, init_tsn=9,
            params=[SCTPChunkParamStateCookie(cookie=b"cookie!")],
        ),
        SctpPacket(1, 2, 5, (InitAckChunk(78, 1500, 2, 3, 9, (StateCookieParameter(cookie=b"cookie!"),)),)),
    ),
    (
        SCTP(sport=3, dport=4, tag=6)
        / SCTPChunkData(tsn=10, stream_id=1, stream_seq=0, proto_id=16, unordered=1, beginning=1, ending=1, data=b"\x00\x05seg")
        / SCTPChunkData(tsn=11, stream_id=1, stream_seq=0, proto_id=17, unordered=1, beginning=1, ending=1, data=b"\x00\x06\x00\x04"),
        SctpPacket(
            3,
            4,
            6,
            (
                DataChunk(10, 1, 0, 16, b"\x00\x05seg", unordered=True),
                DataChunk(11, 1, 0, 17, b"\x00\x06\x00\x04", unordered=True),
            ),
        ),
    ),
    (
        SCTP(sport=3, dport=4, tag=6)
        / SCTPChunkSACK(cumul_tsn_ack=20, a_rwnd=999, gap_ack_list=["2:4", "6:6"], dup_tsn_list=[18]),
        SctpPacket(3, 4, 6, (SackChunk(20, 999, ((2, 4), (6, 6)), (18,)),)),
    ),
    (
        SCTP(sport=3, dport=4, tag=6) / SCTPChunkHeartbeatReq(params=[SCTPChunkParamHeartbeatInfo(data=b"tick")]),
        SctpPacket(3, 4, 6, (HeartbeatChunk(info=b"tick"),)),
    ),
    (
        SCTP(sport=3, dport=4, tag=6)
        / SCTPChunkShutdown(cumul_tsn_ack=42)
        / SCTPChunkShutdownAck()
        / SCTPChunkCookieEcho(cookie=b"abc")
        / SCTPChunkCookieAck()
        / SCTPChunkAbort(TCB=1)
        / SCTPChunkShutdownComplete(TCB=1),
        SctpPacket(
            3,
            4,
            6,
            (
                ShutdownChunk(42),
                ShutdownAckChunk(),
                CookieEchoChunk(b"abc"),
                CookieAckChunk(),
                AbortChunk(tag_reflected=True),
                ShutdownCompleteChunk(tag_reflected=True),
            ),
        ),
    ),
]


@pytest.mark.parametrize("scapy_packet, expected", SCAPY_PACKETS)
def test_model_reads_scapy_packets(scapy_packet, expected: SctpPacket) -> None:
    """Packets built by scapy decode in the model with a valid CRC32c and the same fields."""
    raw = bytes(scapy_packet)
    decoded = SctpPacket.decode(raw)
    assert decoded == expected
    if not isinstance(expected.chunks[0], (InitChunk, InitAckChunk)):
        assert decoded.encode() == raw


def test_rfc4960_3_2_scapy_counts_final_parameter_padding() -> None:
    """RFC 4960 3.2: the chunk length excludes the last parameter's padding, and a robust
    receiver accepts it either way.  scapy includes it (INIT length 36, not 34): the model
    decodes scapy's form and writes the RFC's form, which scapy reads back as the same INIT.
    """
    raw = bytes(SCAPY_PACKETS[0][0])
    assert raw[14:16] == (36).to_bytes(2, "big")
    ours = SctpPacket.decode(raw).encode()
    assert ours[14:16] == (34).to_bytes(2, "big")
    assert ours[16:] == raw[16:]
    assert SCTP(ours)[SCTPChunkInit].params[1].addr_type_list == [5]


@pytest.mark.parametrize("udp", [False, True], ids=["ipv4", "udp9899"])
def test_model_reads_scapy_frames(udp: bool) -> None:
    """A full Ethernet/IPv4(/UDP) frame built by scapy decodes in the model, checksums verified."""
    sctp = SCAPY_PACKETS[2][0]
    if udp:
        frame = Ether(src=SRC_MAC, dst=DST_MAC) / IP(src=SRC_IP, dst=DST_IP) / UDP(sport=9899, dport=9899) / sctp
    else:
        frame = Ether(src=SRC_MAC, dst=DST_MAC) / IP(src=SRC_IP, dst=DST_IP) / sctp
    decoded = Frame.decode(bytes(frame))
    assert decoded.checksums_ok and (decoded.udp is not None) == udp
    assert str(decoded.ip.src) == SRC_IP and decoded.eth.src == SRC_MAC
    assert SctpPacket.decode(decoded.sctp) == SCAPY_PACKETS[2][1]

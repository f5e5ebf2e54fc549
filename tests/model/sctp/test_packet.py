"""Tests for model.sctp.packet: SCTP common header, chunks, parameters (RFC 4960 3) and RFC 1982 serial numbers.

The hand-written vectors follow the field diagrams of RFC 4960 3.1-3.3.
"""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model.net.checksum import crc32c
from model.errors import ChecksumError, DecodeError, EncodeError
from model.sctp.packet import (
    ADAPTATION_CODE_POINT_DDP,
    PPID_DDP_SEGMENT,
    PPID_DDP_SESSION_CONTROL,
    AbortChunk,
    AdaptationLayerIndication,
    Chunk,
    ChunkType,
    CookieAckChunk,
    CookieEchoChunk,
    DataChunk,
    ErrorCause,
    ErrorCauseCode,
    ErrorChunk,
    HeartbeatAckChunk,
    HeartbeatChunk,
    HeartbeatInfoParameter,
    InitAckChunk,
    InitChunk,
    Ipv4AddressParameter,
    Parameter,
    ParameterBase,
    SackChunk,
    SctpPacket,
    ShutdownAckChunk,
    ShutdownChunk,
    ShutdownCompleteChunk,
    StateCookieParameter,
    SupportedAddressTypesParameter,
    UnknownChunk,
    UnrecognizedAction,
    checksum_ok,
    decode_chunks,
    serial_add,
    serial_ge,
    serial_gt,
    serial_le,
    serial_lt,
)

h = bytes.fromhex


# ---------------------------------------------------------------- constants


def test_rfc5043_5_2_ppids() -> None:
    """RFC 5043 5.2: PPID 16 = DDP Segment Chunk, 17 = DDP Stream Session Control."""
    assert PPID_DDP_SEGMENT == 16
    assert PPID_DDP_SESSION_CONTROL == 17


def test_rfc5043_5_1_adaptation_code_point() -> None:
    """RFC 5043 5.1: the DDP Adaptation Indication value is 0x00000001."""
    assert ADAPTATION_CODE_POINT_DDP == 0x00000001


def test_rfc4960_3_2_chunk_type_numbers() -> None:
    assert [int(t) for t in ChunkType] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 14]


# ---------------------------------------------------------------- byte-exact chunks

VECTORS = [
    # RFC 4960 3.3.1 DATA: type 0, flags U|B|E, length 16+3, TSN, SID, SSN, PPID, data, 1 pad.
    (
        DataChunk(tsn=0x01020304, stream_id=5, ssn=6, ppid=16, user_data=b"abc", unordered=True),
        h("00070013 01020304 0005 0006 00000010 616263 00"),
    ),
    # I bit (RFC 7053), middle fragment (no B, no E), ordered.
    (
        DataChunk(tsn=1, stream_id=0, ssn=0, ppid=17, user_data=b"wxyz", beginning=False, ending=False, immediate=True),
        h("00080014 00000001 0000 0000 00000011 7778797a"),
    ),
    # RFC 4960 3.3.2 INIT with Supported Address Types (5) and the Adaptation Layer Indication.
    (
        InitChunk(
            initiate_tag=0xAABBCCDD,
            a_rwnd=0x10000,
            outbound_streams=10,
            inbound_streams=11,
            initial_tsn=0x12345678,
            parameters=(SupportedAddressTypesParameter(address_types=(5,)), AdaptationLayerIndication(1)),
        ),
        h("01000024 aabbccdd 00010000 000a 000b 12345678 000c0006 0005 0000 c0060008 00000001"),
    ),
    # RFC 4960 3.3.3 INIT ACK with a 5-byte State Cookie: last parameter's padding excluded from length.
    (
        InitAckChunk(1, 2, 3, 4, 5, parameters=(Ipv4AddressParameter("192.0.2.1"), StateCookieParameter(cookie=b"12345"))),
        h("02000025 00000001 00000002 0003 0004 00000005 00050008 c0000201 00070009 3132333435 000000"),
    ),
    # RFC 4960 3.3.4 SACK with two gap blocks and one duplicate TSN.
    (
        SackChunk(cumulative_tsn_ack=100, a_rwnd=4096, gap_blocks=((2, 3), (5, 5)), duplicate_tsns=(99,)),
        h("0300001c 00000064 00001000 0002 0001 0002 0003 0005 0005 00000063"),
    ),
    # RFC 4960 3.3.5 / 3.3.6 HEARTBEAT and HEARTBEAT ACK carry one Heartbeat Info parameter.
    (HeartbeatChunk(info=b"hb!"), h("0400000b 00010007 686221 00")),
    (HeartbeatAckChunk(info=b"ping"), h("0500000c 00010008 70696e67")),
    # RFC 4960 3.3.7 ABORT, T=1, one "User Initiated Abort" cause with 2 bytes of reason.
    (
        AbortChunk(tag_reflected=True, causes=(ErrorCause(ErrorCauseCode.USER_INITIATED_ABORT, b"no"),)),
        h("0601000a 000c0006 6e6f 0000"),
    ),
    (AbortChunk(), h("06000004")),
    # RFC 4960 3.3.8 SHUTDOWN, 3.3.9 SHUTDOWN ACK.
    (ShutdownChunk(cumulative_tsn_ack=0xFFFFFFFE), h("07000008 fffffffe")),
    (ShutdownAckChunk(), h("08000004")),
    # RFC 4960 3.3.10 ERROR with two causes: padding between them, not counted after the last.
    (
        ErrorChunk(causes=(ErrorCause(1, b"\x00\x07\x00\x00"), ErrorCause(6, b"\xc1\x00\x00\x05\x01"))),
        h("09000015 00010008 00070000 00060009 c100000501 000000"),
    ),
    # RFC 4960 3.3.11 COOKIE ECHO, 3.3.12 COOKIE ACK, 3.3.13 SHUTDOWN COMPLETE.
    (CookieEchoChunk(cookie=b"cookie"), h("0a00000a 636f6f6b6965 0000")),
    (CookieAckChunk(), h("0b000004")),
    (ShutdownCompleteChunk(tag_reflected=True), h("0e010004")),
    (ShutdownCompleteChunk(), h("0e000004")),
    # RFC 4960 3.2: an unknown type is kept whole (type 0xC1 with flags 0x5A).
    (UnknownChunk(chunk_type=0xC1, flags=0x5A, value=b"\x01\x02"), h("c15a0006 0102 0000")),
]


@pytest.mark.parametrize("chunk, wire", VECTORS, ids=lambda v: type(v).__name__ if isinstance(v, Chunk) else "")
def test_rfc4960_3_3_chunk_vectors(chunk: Chunk, wire: bytes) -> None:
    """RFC 4960 3.3: each chunk's bytes as drawn in its diagram, padded to 4 bytes (3.2)."""
    assert chunk.encode() == wire
    assert len(wire) % 4 == 0
    assert Chunk.decode(wire) == chunk
    assert type(chunk).decode(wire) == chunk


def test_rfc4960_3_2_chunk_length_excludes_padding() -> None:
    """RFC 4960 3.2: the Chunk Length does not count the padding."""
    wire = DataChunk(1, 2, 3, 4, b"x").encode()
    assert struct.unpack("!H", wire[2:4])[0] == 17
    assert len(wire) == 20


def test_rfc4960_3_2_unknown_chunk_action_bits() -> None:
    """RFC 4960 3.2: the two high bits of an unrecognized chunk type say what to do."""
    assert UnknownChunk(0x3F).unrecognized_action is UnrecognizedAction.STOP
    assert UnknownChunk(0x40).unrecognized_action is UnrecognizedAction.STOP_AND_REPORT
    assert UnknownChunk(0x80).unrecognized_action is UnrecognizedAction.SKIP
    action = UnknownChunk(0xC0).unrecognized_action
    assert action is UnrecognizedAction.SKIP_AND_REPORT and action.skip and action.report


def test_rfc4960_3_2_1_unknown_parameter_action_bits() -> None:
    """RFC 4960 3.2.1: the two high bits of an unrecognized parameter type say what to do."""
    assert Parameter(0x8001).unrecognized_action is UnrecognizedAction.SKIP
    assert AdaptationLayerIndication().unrecognized_action is UnrecognizedAction.SKIP_AND_REPORT


def test_unknown_parameter_kept_intact_in_init() -> None:
    """RFC 4960 3.2.1: an unrecognized parameter is carried through with its bytes."""
    chunk = InitChunk(1, 2, 3, 4, 5, parameters=(Parameter(0x8123, b"\x01\x02\x03"),))
    decoded = Chunk.decode(chunk.encode())
    assert decoded.parameters == (Parameter(0x8123, b"\x01\x02\x03"),)


def test_rfc5043_5_1_adaptation_indication_parameter() -> None:
    """RFC 5043 5.1 / RFC 5061 4.2.5: type 0xC006, length 8, code point 1."""
    assert AdaptationLayerIndication().encode() == h("c0060008 00000001")
    init = InitChunk(1, 2, 3, 4, 5, parameters=(AdaptationLayerIndication(),))
    assert Chunk.decode(init.encode()).adaptation_code_point == 1
    assert InitChunk(1, 2, 3, 4, 5).adaptation_code_point is None


def test_init_ack_state_cookie_accessor() -> None:
    """RFC 4960 3.3.3: the State Cookie parameter of an INIT ACK."""
    assert InitAckChunk(1, 2, 3, 4, 5, (StateCookieParameter(cookie=b"c"),)).state_cookie == b"c"
    assert InitAckChunk(1, 2, 3, 4, 5).state_cookie is None


def test_parameter_vectors() -> None:
    """RFC 4960 3.2.1 / 3.3.2.1: parameter TLVs padded to 4 bytes, length unpadded."""
    assert HeartbeatInfoParameter(info=b"a").encode() == h("00010005 61000000")
    assert Ipv4AddressParameter("10.1.2.3").encode() == h("00050008 0a010203")
    assert SupportedAddressTypesParameter(address_types=(5, 6)).encode() == h("000c0008 00050006")
    assert StateCookieParameter(cookie=b"").encode() == h("00070004")
    for wire in (h("00010005 61000000"), h("00050008 0a010203"), h("000c0006 0005 0000")):
        assert ParameterBase.decode(wire).encode() == wire


@pytest.mark.parametrize(
    "wire",
    [
        h("00050007 0a0102 00"),  # IPv4 address of 3 bytes
        h("c0060006 0001 0000"),  # adaptation indication of 2 bytes
        h("000c0007 000500 00"),  # odd-length supported address types
        h("00050003"),  # length below 4
        h("00050010 0a010203"),  # length past the end
    ],
)
def test_malformed_parameters(wire: bytes) -> None:
    with pytest.raises(DecodeError):
        ParameterBase.decode(wire)


# ---------------------------------------------------------------- packets


def test_rfc4960_3_1_common_header_and_checksum_vector() -> None:
    """RFC 4960 3.1 header fields, 6.8 CRC32c over the packet with a zeroed checksum, LSB first."""
    packet = SctpPacket(src_port=5000, dst_port=5001, verification_tag=0x01020304, chunks=(CookieAckChunk(),))
    wire = packet.encode()
    unsummed = h("1388 1389 01020304 00000000 0b000004")
    crc = crc32c(unsummed)
    assert wire == unsummed[:8] + crc.to_bytes(4, "little") + unsummed[12:]
    assert SctpPacket.decode(wire) == packet


def test_rfc4960_6_10_bundling_and_padding() -> None:
    """RFC 4960 6.10 bundling: chunks back to back, each padded to 4 bytes."""
    chunks = (
        DataChunk(10, 1, 0, PPID_DDP_SEGMENT, b"A", unordered=True),
        DataChunk(11, 1, 0, PPID_DDP_SESSION_CONTROL, b"BCDEF", unordered=True),
        SackChunk(7, 1000),
    )
    wire = SctpPacket(1, 2, 3, chunks).encode()
    assert len(wire) == 12 + 20 + 24 + 16
    assert SctpPacket.decode(wire).chunks == chunks


def test_rfc4960_6_8_bad_checksum_raises() -> None:
    """RFC 4960 6.8: a packet whose CRC32c does not match is an error (ChecksumError)."""
    wire = bytearray(SctpPacket(1, 2, 3, (ShutdownAckChunk(),)).encode())
    wire[-1] ^= 0x01  # corrupt the chunk, not the checksum
    wire[5] ^= 0x80  # and the tag
    with pytest.raises(ChecksumError) as info:
        SctpPacket.decode(bytes(wire))
    assert info.value.layer == "sctp"
    assert not checksum_ok(bytes(wire))


def test_unverified_decode_flags_bad_checksum() -> None:
    """A dissector can decode a packet with a bad CRC32c and see the failure."""
    good = SctpPacket(1, 2, 3, (ShutdownChunk(9),)).encode()
    bad = good[:8] + bytes(4) + good[12:]
    packet = SctpPacket.decode(bad, verify_checksum=False)
    assert packet.checksum_ok is False
    assert packet.chunks == (ShutdownChunk(9),)
    assert SctpPacket.decode(good, verify_checksum=False).checksum_ok is True
    assert checksum_ok(good)


def _with_crc(body: bytes) -> bytes:
    body = body[:8] + bytes(4) + body[12:]
    return body[:8] + crc32c(body).to_bytes(4, "little") + body[12:]


HEADER = h("0001 0002 00000003 00000000")


@pytest.mark.parametrize(
    "chunks",
    [
        h("00000003"),  # chunk length 3 < 4
        h("0b000008"),  # chunk length past the packet
        h("0b000004 0b"),  # trailing bytes that cannot hold a chunk header
        b"",  # no chunk at all (RFC 4960 3: one or more chunks)
        h("0003000c 00000001 00000000"),  # DATA shorter than its 16-byte header
        h("0300000c 00000001 00000000"),  # SACK without its count fields
        h("03000010 00000001 00000000 00010000"),  # SACK announces a gap block it lacks
        h("03000014 00000001 00000000 00000000 00000000"),  # SACK with extra bytes
        h("07000004"),  # SHUTDOWN without cumulative TSN ack
        h("08000008 00000000"),  # SHUTDOWN ACK with a value
        h("0e000008 00000000"),  # SHUTDOWN COMPLETE with a value
        h("0b000008 00000000"),  # COOKIE ACK with a value
        h("04000008 00050008"),  # HEARTBEAT whose parameter overruns the chunk
        h("0400000c 00050008 0a000001"),  # HEARTBEAT with an IPv4 address instead of info
        h("01000010 00000001 00000002 00030004"),  # INIT shorter than its fixed fields
        h("01000018 00000001 00000002 00030004 00000005 00020001"),  # INIT parameter length 1
    ],
)
def test_rfc4960_3_2_malformed_chunks_raise_decode_error(chunks: bytes) -> None:
    """RFC 4960 3.2: lengths below 4, past the packet or inconsistent with the chunk's format."""
    with pytest.raises(DecodeError):
        SctpPacket.decode(_with_crc(HEADER + chunks))


def test_rfc4960_3_2_padding_bytes_ignored_and_last_padding_optional() -> None:
    """RFC 4960 3.2: the receiver MUST ignore the padding bytes; the final chunk's padding may be absent."""
    padded_with_junk = h("0a000005 41 ffffff 0b000004")
    assert decode_chunks(padded_with_junk) == (CookieEchoChunk(b"A"), CookieAckChunk())
    assert decode_chunks(h("0a000005 41")) == (CookieEchoChunk(b"A"),)


def test_reserved_flag_bits_ignored_on_receipt() -> None:
    """RFC 4960 3.3: flags not defined for a chunk are set to 0 and ignored on receipt."""
    assert Chunk.decode(h("0bff0004")) == CookieAckChunk()
    data = Chunk.decode(h("00f70011 00000001 0000 0000 00000000 41000000"))
    assert data == DataChunk(1, 0, 0, 0, b"A", unordered=True, immediate=False, beginning=True, ending=True)


def test_empty_data_chunk_is_carried() -> None:
    """RFC 4960 6.2: a DATA chunk without user data is decodable so the receiver can ABORT."""
    assert Chunk.decode(h("00030010 00000001 00000000 00000000")) == DataChunk(1, 0, 0, 0, b"")


def test_decode_of_wrong_class_raises() -> None:
    with pytest.raises(DecodeError):
        SackChunk.decode(CookieAckChunk().encode())
    with pytest.raises(DecodeError):
        Chunk.decode(CookieAckChunk().encode() * 2)


@pytest.mark.parametrize(
    "make",
    [
        lambda: DataChunk(1 << 32, 0, 0, 0, b"x"),
        lambda: DataChunk(0, 1 << 16, 0, 0, b"x"),
        lambda: DataChunk(0, 0, 0, -1, b"x"),
        lambda: InitChunk(0, 0, 1 << 16, 0, 0),
        lambda: SackChunk(0, 0, gap_blocks=((1, 1 << 16),)),
        lambda: SackChunk(0, 0, gap_blocks=((1, 2, 3),)),
        lambda: ShutdownChunk(1 << 32),
        lambda: UnknownChunk(256),
        lambda: CookieEchoChunk(bytes(65532)),
        lambda: ErrorChunk((ErrorCause(1 << 16),)),
        lambda: AdaptationLayerIndication(1 << 32),
    ],
)
def test_out_of_range_fields_raise_encode_error(make) -> None:
    with pytest.raises(EncodeError):
        make().encode()


def test_packet_encode_rejects_bad_header_and_empty_packet() -> None:
    with pytest.raises(EncodeError):
        SctpPacket(1 << 16, 0, 0, (CookieAckChunk(),)).encode()
    with pytest.raises(EncodeError):
        SctpPacket(1, 2, 3, ()).encode()


def test_ipv4_address_parameter_rejects_garbage() -> None:
    with pytest.raises(EncodeError):
        Ipv4AddressParameter("not an address")


# ---------------------------------------------------------------- serial numbers


def test_rfc1982_serial_comparisons() -> None:
    """RFC 1982 3.2: comparisons across the wrap for 32-bit TSNs and 16-bit SSNs."""
    assert serial_lt(0xFFFFFFFF, 0, 32)
    assert serial_gt(0, 0xFFFFFFFF, 32)
    assert serial_lt(1, 2, 32) and not serial_lt(2, 1, 32)
    assert serial_lt(0xFFF0, 0x0010, 16)
    assert serial_le(5, 5, 16) and serial_ge(5, 5, 16)
    # Exactly half the space apart: undefined, neither less nor greater.
    assert not serial_lt(0, 0x8000, 16) and not serial_gt(0, 0x8000, 16)
    assert serial_add(0xFFFF, 2, 16) == 1
    with pytest.raises(ValueError):
        serial_add(0, 0x8000, 16)


@given(st.integers(0, 0xFFFFFFFF), st.integers(1, 0x7FFFFFFF))
def test_rfc1982_add_then_greater(value: int, increment: int) -> None:
    """RFC 1982 3.2: s + n > s for 0 < n < 2^(SERIAL_BITS - 1)."""
    later = serial_add(value, increment, 32)
    assert serial_gt(later, value, 32) and serial_lt(value, later, 32)
    assert not serial_lt(later, value, 32)


# ---------------------------------------------------------------- properties

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
small = st.binary(max_size=40)

parameters = st.one_of(
    st.builds(HeartbeatInfoParameter, info=small),
    st.builds(Ipv4AddressParameter, address=u32),
    st.builds(StateCookieParameter, cookie=small),
    st.builds(SupportedAddressTypesParameter, address_types=st.lists(u16, max_size=4).map(tuple)),
    st.builds(AdaptationLayerIndication, code_point=u32),
    st.builds(Parameter, param_type=st.sampled_from([0x8000, 0x4001, 0xC003, 3]), value=small),
)
causes = st.lists(st.builds(ErrorCause, code=u16, value=small), max_size=3).map(tuple)

chunks = st.one_of(
    st.builds(
        DataChunk,
        tsn=u32,
        stream_id=u16,
        ssn=u16,
        ppid=u32,
        user_data=small,
        unordered=st.booleans(),
        beginning=st.booleans(),
        ending=st.booleans(),
        immediate=st.booleans(),
    ),
    st.builds(InitChunk, u32, u32, u16, u16, u32, st.lists(parameters, max_size=4).map(tuple)),
    st.builds(InitAckChunk, u32, u32, u16, u16, u32, st.lists(parameters, max_size=4).map(tuple)),
    st.builds(
        SackChunk,
        u32,
        u32,
        st.lists(st.tuples(u16, u16), max_size=4).map(tuple),
        st.lists(u32, max_size=4).map(tuple),
    ),
    st.builds(HeartbeatChunk, info=small),
    st.builds(HeartbeatAckChunk, info=small),
    st.builds(AbortChunk, tag_reflected=st.booleans(), causes=causes),
    st.builds(ShutdownChunk, u32),
    st.just(ShutdownAckChunk()),
    st.builds(ErrorChunk, causes=causes),
    st.builds(CookieEchoChunk, cookie=small),
    st.just(CookieAckChunk()),
    st.builds(ShutdownCompleteChunk, tag_reflected=st.booleans()),
    st.builds(
        UnknownChunk,
        chunk_type=u8.filter(lambda t: t not in {int(c) for c in ChunkType}),
        flags=u8,
        value=small,
    ),
)
packets = st.builds(SctpPacket, u16, u16, u32, st.lists(chunks, min_size=1, max_size=5).map(tuple))


@settings(max_examples=200)
@given(packets)
def test_packet_round_trip(packet: SctpPacket) -> None:
    """encode/decode are inverse for every chunk type, bundled and padded (RFC 4960 3.2, 6.10)."""
    wire = packet.encode()
    assert len(wire) % 4 == 0
    decoded = SctpPacket.decode(wire)
    assert decoded == packet
    assert decoded.encode() == wire
    assert checksum_ok(wire)


@given(chunks)
def test_chunk_round_trip(chunk: Chunk) -> None:
    assert Chunk.decode(chunk.encode()) == chunk


@given(st.binary(max_size=120))
def test_random_chunk_bytes_raise_only_decode_error(data: bytes) -> None:
    """Decoding arbitrary bytes returns chunks or raises DecodeError, nothing else."""
    try:
        decoded = decode_chunks(data)
    except DecodeError:
        return
    for chunk in decoded:
        chunk.encode()


@given(st.binary(max_size=120), st.booleans())
def test_random_packet_bytes_raise_only_decode_error(data: bytes, fix_crc: bool) -> None:
    if fix_crc and len(data) >= 12:
        data = _with_crc(data)
    try:
        SctpPacket.decode(data)
    except DecodeError:
        pass
    try:
        SctpPacket.decode(data, verify_checksum=False)
    except DecodeError:
        pass


@given(packets, st.data())
def test_mutated_packets_raise_only_decode_error(packet: SctpPacket, data: st.DataObject) -> None:
    """Flipping a byte of a valid packet (and fixing the CRC) never escapes DecodeError."""
    wire = bytearray(packet.encode())
    index = data.draw(st.integers(12, len(wire) - 1))
    wire[index] ^= data.draw(st.integers(1, 255))
    try:
        SctpPacket.decode(_with_crc(bytes(wire)))
    except DecodeError:
        pass


def test_rfc4960_3_3_10_error_cause_vector() -> None:
    """RFC 4960 3.3.10: cause code, cause length (unpadded), cause-specific information, padded."""
    cause = ErrorCause(ErrorCauseCode.INVALID_STREAM_IDENTIFIER, h("0007 0000"))
    assert cause.encode() == h("00010008 00070000")
    assert ErrorCause.decode(cause.encode()) == cause
    assert ErrorCause(ErrorCauseCode.NO_USER_DATA, b"\x01").encode() == h("00090005 01000000")
    with pytest.raises(DecodeError):
        ErrorCause.decode(h("00010008 0007"))


def test_typed_parameter_decode_checks_class() -> None:
    with pytest.raises(DecodeError):
        StateCookieParameter.decode(AdaptationLayerIndication().encode())
    assert AdaptationLayerIndication.decode(h("c0060008 00000001")) == AdaptationLayerIndication(1)


@given(st.binary(max_size=40))
def test_random_parameter_and_cause_bytes_raise_only_decode_error(data: bytes) -> None:
    for decoder in (ParameterBase.decode, ErrorCause.decode):
        try:
            decoder(data).encode()
        except DecodeError:
            pass


@given(parameters)
def test_parameter_round_trip(parameter: ParameterBase) -> None:
    assert ParameterBase.decode(parameter.encode()) == parameter


# ---------------------------------------------------------------- lenient chunk walk and common header


def test_walk_chunks_yields_raw_chunks_then_stops_with_a_reason_rfc4960_3_2() -> None:
    """walk_chunks: every whole chunk undecoded, padding skipped; a length past the packet ends the walk."""
    from model.sctp.packet import BrokenChunk, ChunkWalkStop, RawChunk, walk_chunks

    sack = SackChunk(7, 100).encode()
    echo = CookieEchoChunk(b"A").encode()  # 5 bytes + 3 of padding
    broken = h("0000 0040 00000009")  # DATA, length 64, only 8 bytes left
    items = list(walk_chunks(sack + echo + broken, base_offset=12))
    assert items[:2] == [RawChunk(12, sack), RawChunk(12 + len(sack), echo[:5])]
    assert items[1].decode() == CookieEchoChunk(b"A") and items[0].decode() == SackChunk(7, 100)
    (end,) = items[2:]
    assert isinstance(end, BrokenChunk) and end.reason is ChunkWalkStop.LENGTH_PAST_END
    assert (end.offset, end.chunk_type, end.flags) == (12 + len(sack) + 8, 0, 0)
    assert "past the end" in str(end.error())
    with pytest.raises(DecodeError, match="chunk length 64 past the end of the packet"):
        decode_chunks(sack + echo + broken)


@pytest.mark.parametrize("tail, reason, message", [
    (h("01"), "HEADER_PAST_END", "chunk header needs 4 bytes, only 1 left"),
    (h("06010002"), "LENGTH_BELOW_HEADER", "chunk length 2 below 4"),
])
def test_walk_chunks_broken_headers(tail, reason, message) -> None:
    from model.sctp.packet import BrokenChunk, ChunkWalkStop, walk_chunks

    (end,) = list(walk_chunks(tail))
    assert isinstance(end, BrokenChunk) and end.reason is ChunkWalkStop[reason]
    assert end.chunk_type == tail[0] and end.flags == (tail[1] if len(tail) > 1 else None)
    with pytest.raises(DecodeError, match=message):
        decode_chunks(tail)


def test_data_tsn_of_a_truncated_data_chunk_rfc4960_3_3_1() -> None:
    """A DATA chunk too short for its 16-byte header still names its TSN when it holds one."""
    from model.sctp.packet import RawChunk

    assert RawChunk(0, h("0003000c 0000002a 0000 0000")).data_tsn == 42
    assert RawChunk(0, h("00030004")).data_tsn is None
    assert RawChunk(0, SackChunk(1, 1).encode()).data_tsn is None
    with pytest.raises(DecodeError):
        RawChunk(0, h("0003000c 0000002a 0000 0000")).decode()


def test_common_header_rfc4960_3_1() -> None:
    from model.sctp.packet import CommonHeader

    wire = SctpPacket(5001, 5002, 0x01020304, [CookieAckChunk()]).encode()
    header = CommonHeader.decode(wire)
    assert (header.src_port, header.dst_port, header.verification_tag) == (5001, 5002, 0x01020304)
    assert checksum_ok(wire) and header.checksum == crc32c(wire[:8] + bytes(4) + wire[12:])
    with pytest.raises(DecodeError):
        CommonHeader.decode(wire[:11])


@given(st.lists(st.tuples(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF)), max_size=20),
       st.lists(st.integers(0, 0xFFFFFFFF), max_size=20))
def test_sack_encoded_length_is_the_length_of_its_encoding(gaps, duplicates):
    sack = SackChunk(1, 2, tuple(gaps), tuple(duplicates))
    assert sack.encoded_length == len(sack.encode())

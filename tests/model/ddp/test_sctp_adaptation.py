"""Tests for model.ddp.sctp_adaptation: DDP over SCTP user data (RFC 5043 5.2) and enhanced session control (RFC 6581 7, 9)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from model.ddp.sctp_adaptation import (
    IRD_ORD_NO_NEGOTIATION,
    MAX_PRIVATE_DATA,
    DdpSegmentChunkData,
    EnhancedData,
    FunctionCode,
    SessionControl,
)
from model.errors import DecodeError, EncodeError

h = bytes.fromhex


def test_rfc5043_5_2_2_segment_chunk_vector() -> None:
    """RFC 5043 5.2.2: DDP-SSN (16 bits) then the DDP Segment."""
    segment = h("c1 40 00000000 00001234 0000000000000000") + b"payload"
    data = DdpSegmentChunkData(ddp_ssn=0x0102, segment=segment)
    assert data.encode() == h("0102") + segment
    assert DdpSegmentChunkData.decode(data.encode()) == data
    with pytest.raises(DecodeError):
        DdpSegmentChunkData.decode(b"\x01")
    with pytest.raises(EncodeError):
        DdpSegmentChunkData(1 << 16, b"").encode()


def test_rfc5043_5_2_3_function_codes() -> None:
    """RFC 5043 5.2.3 codes 1-4 and RFC 6581 7 enhanced codes 5-7."""
    assert [int(c) for c in FunctionCode] == [1, 2, 3, 4, 5, 6, 7]
    assert [c.is_enhanced for c in FunctionCode] == [False] * 4 + [True] * 3


def test_rfc5043_5_2_3_session_control_vector() -> None:
    """RFC 5043 5.2.3: DDP-SSN (16), Function Code (16), Private Data."""
    message = SessionControl(ddp_ssn=7, function=FunctionCode.INITIATE, private_data=b"hello")
    assert message.encode() == h("0007 0001") + b"hello"
    assert SessionControl.decode(message.encode()) == message
    assert message.enhanced_data is None and message.ulp_private_data == b"hello"


def test_rfc5043_5_2_3_zero_length_private_data_allowed() -> None:
    """RFC 5043 5.2.3: private data MUST be included on Initiate/Accept/Reject but MAY be of zero length."""
    for function in (FunctionCode.INITIATE, FunctionCode.ACCEPT, FunctionCode.REJECT):
        assert SessionControl.decode(SessionControl(1, function).encode()).private_data == b""


@pytest.mark.parametrize("function", list(FunctionCode))
def test_rfc5043_5_2_3_private_data_must_not_exceed_512(function: FunctionCode) -> None:
    """RFC 5043 5.2.3: Private Data length MUST NOT exceed 512 bytes in any message."""
    too_long = bytes(MAX_PRIVATE_DATA + 1)
    with pytest.raises(EncodeError):
        SessionControl(1, function, too_long).encode()
    with pytest.raises(DecodeError):
        SessionControl.decode(h("0001") + function.to_bytes(2, "big") + too_long)
    if function != FunctionCode.TERMINATE:
        at_limit = SessionControl(1, function, bytes(MAX_PRIVATE_DATA))
        assert SessionControl.decode(at_limit.encode()) == at_limit


def test_rfc6581_7_enhanced_data_counts_toward_512() -> None:
    """RFC 6581 7/9: the 512-byte limit includes the enhanced data, so 508 bytes are left for the ULP."""
    enhanced = EnhancedData(ird=1, ord=1)
    ok = SessionControl.enhanced(1, FunctionCode.ENHANCED_INITIATE, enhanced, bytes(508))
    assert len(ok.encode()) == 4 + 512
    with pytest.raises(EncodeError):
        SessionControl.enhanced(1, FunctionCode.ENHANCED_INITIATE, enhanced, bytes(509)).encode()


def test_rfc5043_5_2_3_no_private_data_on_terminate() -> None:
    """RFC 5043 5.2.3 (and RFC 6581 7): Private Data MUST NOT be included in Terminate."""
    assert SessionControl(3, FunctionCode.TERMINATE).encode() == h("0003 0004")
    with pytest.raises(EncodeError):
        SessionControl(3, FunctionCode.TERMINATE, b"x").encode()
    with pytest.raises(DecodeError):
        SessionControl.decode(h("0003 0004 78"))


def test_unknown_function_code() -> None:
    with pytest.raises(DecodeError):
        SessionControl.decode(h("0001 0008"))
    with pytest.raises(DecodeError):
        SessionControl.decode(h("0001 0000"))
    with pytest.raises(EncodeError):
        SessionControl(1, 8).encode()  # type: ignore[arg-type]


def test_rfc6581_9_enhanced_data_bit_layout() -> None:
    """RFC 6581 9: A B IRD(14) C D ORD(14) in network byte order."""
    assert EnhancedData(True, False, False, False, 0, 0).encode() == h("8000 0000")
    assert EnhancedData(True, True, False, False, 0, 0).encode() == h("c000 0000")
    assert EnhancedData(True, False, True, False, 0, 0).encode() == h("8000 8000")
    assert EnhancedData(True, False, False, True, 0, 0).encode() == h("8000 4000")
    assert EnhancedData(False, False, False, False, 0x1234, 0x0567).encode() == h("1234 0567")
    assert EnhancedData.decode(h("ffff ffff")) == EnhancedData(True, True, True, True, 0x3FFF, 0x3FFF)


def test_rfc6581_9_no_negotiation_value() -> None:
    """RFC 6581 9: an all ones IRD/ORD (0x3FFF) means no automatic negotiation."""
    assert IRD_ORD_NO_NEGOTIATION == 0x3FFF
    data = EnhancedData(ird=IRD_ORD_NO_NEGOTIATION, ord=IRD_ORD_NO_NEGOTIATION)
    assert data.encode() == h("3fff 3fff")


def test_rfc6581_9_flags_must_be_zero_without_a() -> None:
    """RFC 6581 9: if A is 0, B, C and D MUST be 0 on send and MUST be ignored on reception."""
    for flags in ((True, False, False), (False, True, False), (False, False, True)):
        with pytest.raises(EncodeError):
            EnhancedData(False, *flags).encode()
    decoded = EnhancedData.decode(h("4005 c006"))
    assert decoded == EnhancedData(False, False, False, False, 5, 6)


def test_enhanced_data_field_ranges() -> None:
    with pytest.raises(EncodeError):
        EnhancedData(ird=0x4000).encode()
    with pytest.raises(EncodeError):
        EnhancedData(ord=-1).encode()
    with pytest.raises(DecodeError):
        EnhancedData.decode(b"\x00\x00\x00")


@pytest.mark.parametrize(
    "function", [FunctionCode.ENHANCED_INITIATE, FunctionCode.ENHANCED_ACCEPT, FunctionCode.ENHANCED_REJECT]
)
def test_rfc6581_7_enhanced_messages_split_private_data(function: FunctionCode) -> None:
    """RFC 6581 7: ULP private data follows the enhanced connection establishment data."""
    enhanced = EnhancedData(True, True, False, True, ird=8, ord=IRD_ORD_NO_NEGOTIATION)
    message = SessionControl.enhanced(9, function, enhanced, b"ulp")
    wire = message.encode()
    assert wire == h("0009") + function.to_bytes(2, "big") + h("c008 7fff") + b"ulp"
    decoded = SessionControl.decode(wire)
    assert decoded.enhanced_data == enhanced and decoded.ulp_private_data == b"ulp"


def test_rfc6581_7_enhanced_message_needs_enhanced_data() -> None:
    with pytest.raises(DecodeError):
        SessionControl.decode(h("0001 0005 0000"))
    with pytest.raises(EncodeError):
        SessionControl(1, FunctionCode.ENHANCED_ACCEPT, b"abc").encode()
    with pytest.raises(EncodeError):
        SessionControl.enhanced(1, FunctionCode.ACCEPT, EnhancedData())


enhanced_data = st.builds(
    lambda a, b, c, d, ird, ord_: EnhancedData(a, a and b, a and c, a and d, ird, ord_),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.integers(0, 0x3FFF),
    st.integers(0, 0x3FFF),
)


@given(enhanced_data)
def test_enhanced_data_round_trip(data: EnhancedData) -> None:
    assert EnhancedData.decode(data.encode()) == data


@given(st.integers(0, 0xFFFF), st.sampled_from(list(FunctionCode)), st.binary(max_size=600))
def test_session_control_round_trip(ddp_ssn: int, function: FunctionCode, private: bytes) -> None:
    message = SessionControl(ddp_ssn, function, private)
    try:
        wire = message.encode()
    except EncodeError:
        assert (
            len(private) > 512
            or (function == FunctionCode.TERMINATE and private)
            or (function.is_enhanced and len(private) < 4)
        )
        return
    assert SessionControl.decode(wire) == message


@given(st.integers(0, 0xFFFF), st.binary(max_size=100))
def test_segment_round_trip(ddp_ssn: int, segment: bytes) -> None:
    assert DdpSegmentChunkData.decode(DdpSegmentChunkData(ddp_ssn, segment).encode()) == DdpSegmentChunkData(
        ddp_ssn, segment
    )


@given(st.binary(max_size=600))
def test_random_bytes_raise_only_decode_error(data: bytes) -> None:
    for decoder in (SessionControl.decode, DdpSegmentChunkData.decode, EnhancedData.decode):
        try:
            decoder(data)
        except DecodeError:
            pass

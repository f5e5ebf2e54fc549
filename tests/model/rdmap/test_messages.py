"""Tests for model.rdmap.messages: RDMAP control field, Read Request, Terminate (RFC 5040 4)."""

import pytest
from hypothesis import given, strategies as st

from model.ddp.segment import TaggedHeader, UntaggedHeader
from model.errors import DecodeError, EncodeError
from model.rdmap.messages import (
    Opcode,
    RdmapControl,
    ReadRequest,
    Terminate,
    invalidate_stag_of,
    rdmap_control_of,
    tagged_rsvd_ulp,
    untagged_rsvd_ulp,
)


@pytest.mark.parametrize(
    "opcode, tagged, qn",
    [
        (Opcode.RDMA_WRITE, True, None),
        (Opcode.RDMA_READ_REQUEST, False, 1),
        (Opcode.RDMA_READ_RESPONSE, True, None),
        (Opcode.SEND, False, 0),
        (Opcode.SEND_WITH_INVALIDATE, False, 0),
        (Opcode.SEND_WITH_SE, False, 0),
        (Opcode.SEND_WITH_SE_AND_INVALIDATE, False, 0),
        (Opcode.TERMINATE, False, 2),
    ],
)
def test_opcode_model_and_queue_rfc5040_4_2(opcode, tagged, qn):
    assert opcode.tagged is tagged
    assert opcode.queue_number == qn


def test_control_field_rv_is_one_rfc5040_4_1():
    """RFC 5040 4.1: RV (2 bits) = 1, so the control byte is 0x40 | opcode."""
    assert tagged_rsvd_ulp(Opcode.RDMA_WRITE) == 0x40
    assert untagged_rsvd_ulp(Opcode.SEND_WITH_INVALIDATE, 0xAABBCCDD) == 0x44_AABBCCDD
    assert RdmapControl.decode(0xCF) == RdmapControl(opcode=0xF, rv=3, rsvd=0)
    assert RdmapControl.decode(0xCF).known_opcode is None


def test_invalidate_stag_only_for_invalidate_variants_rfc5040_4_1():
    with pytest.raises(EncodeError):
        untagged_rsvd_ulp(Opcode.SEND, 5)
    with pytest.raises(EncodeError):
        untagged_rsvd_ulp(Opcode.RDMA_WRITE)
    with pytest.raises(EncodeError):
        tagged_rsvd_ulp(Opcode.SEND)


def test_control_and_stag_from_headers():
    untagged = UntaggedHeader(True, untagged_rsvd_ulp(Opcode.SEND_WITH_SE_AND_INVALIDATE, 77), 0, 1, 0)
    assert rdmap_control_of(untagged).opcode == Opcode.SEND_WITH_SE_AND_INVALIDATE
    assert invalidate_stag_of(untagged) == 77
    tagged = TaggedHeader(True, tagged_rsvd_ulp(Opcode.RDMA_READ_RESPONSE), 1, 0)
    assert rdmap_control_of(tagged).opcode == Opcode.RDMA_READ_RESPONSE
    assert invalidate_stag_of(tagged) == 0


def test_read_request_layout_rfc5040_4_4():
    """RFC 5040 4.4: sink STag, sink TO, size, source STag, source TO: 28 bytes."""
    raw = ReadRequest(1, 2, 3, 4, 5).encode()
    assert raw == bytes.fromhex("00000001" "0000000000000002" "00000003" "00000004" "0000000000000005")
    with pytest.raises(DecodeError):
        ReadRequest.decode(raw[:27])
    with pytest.raises(DecodeError):
        ReadRequest.decode(raw + b"\0")


def test_terminate_control_word_rfc5040_4_8():
    """Layer (4) EType (4) Code (8) M D R (3) reserved (13)."""
    assert Terminate(1, 2, 0x05).encode() == bytes.fromhex("12050000")
    full = Terminate(0, 1, 0x02, segment_length=46, ddp_header=UntaggedHeader(True, 0x41 << 32, 1, 1, 0),
                     rdma_header=ReadRequest(1, 2, 3, 4, 5))
    raw = full.encode()
    assert raw[:4] == bytes.fromhex("0102e000")
    assert raw[4:6] == b"\x00\x2e" and len(raw) == 4 + 2 + 18 + 28
    assert Terminate.decode(raw) == full


def test_terminate_decode_errors():
    with pytest.raises(DecodeError):
        Terminate.decode(b"\x00\x00")
    with pytest.raises(DecodeError):
        Terminate.decode(bytes.fromhex("0102c000") + b"\x00\x10" + b"\x80")  # D set, header truncated
    with pytest.raises(DecodeError):
        Terminate.decode(bytes.fromhex("12050000") + b"x")  # trailing bytes


headers = st.one_of(
    st.builds(TaggedHeader, st.booleans(), st.integers(0, 255), st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1)),
    st.builds(UntaggedHeader, st.booleans(), st.integers(0, 2**40 - 1), st.integers(0, 2**32 - 1),
              st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)),
)


@given(st.integers(0, 15), st.integers(0, 15), st.integers(0, 255), st.none() | st.integers(0, 0xFFFF),
       st.none() | headers, st.none() | st.builds(ReadRequest, *[st.integers(0, 2**32 - 1)] * 5))
def test_terminate_round_trip(layer, etype, code, length, header, request):
    terminate = Terminate(layer, etype, code, length, header, request)
    assert Terminate.decode(terminate.encode()) == terminate


@given(st.binary(max_size=64))
def test_terminate_random_bytes_raise_only_decode_error(raw):
    try:
        Terminate.decode(raw)
    except DecodeError:
        pass

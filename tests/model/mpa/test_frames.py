"""Tests for model.mpa.frames: MPA Request/Reply frames (RFC 5044 7.1) with RFC 6581 6 enhanced data."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from model.ddp.sctp_adaptation import EnhancedData
from model.errors import DecodeError, EncodeError
from model.mpa.frames import (
    MAX_PRIVATE_DATA,
    REPLY_KEY,
    REQUEST_KEY,
    MpaReply,
    MpaRequest,
    decode_mpa_frame,
    frame_length,
)

h = bytes.fromhex


def test_rfc6581_6_keys() -> None:
    """RFC 6581 6 (unchanged from RFC 5044): the two 16-byte keys."""
    assert REQUEST_KEY == h("4D50412049442052657120467261 6D65")
    assert REPLY_KEY == h("4D50412049442052657020467261 6D65")


def test_rfc5044_request_vector() -> None:
    """RFC 5044 7.1: Key, M C R Res, Rev, PD_Length, Private Data."""
    request = MpaRequest(markers=False, crc=True, revision=1, private_data=b"pd")
    assert request.encode() == REQUEST_KEY + h("40 01 0002") + b"pd"
    assert MpaRequest.decode(request.encode()) == request
    assert decode_mpa_frame(request.encode()) == request


def test_rfc5044_reply_reject_vector() -> None:
    """RFC 5044 7.1: R set in a reply means the responder rejects the connection."""
    reply = MpaReply(markers=True, crc=False, reject=True, revision=1)
    assert reply.encode() == REPLY_KEY + h("a0 01 0000")
    decoded = decode_mpa_frame(reply.encode())
    assert isinstance(decoded, MpaReply) and decoded.reject


def test_rfc6581_6_enhanced_request_vector() -> None:
    """RFC 6581 6: S=1, Rev 2, PD_Length counts the 4 enhanced bytes, which begin the private data."""
    enhanced = EnhancedData(True, False, True, False, ird=4, ord=2)
    request = MpaRequest(enhanced=True, revision=2, private_data=enhanced.encode() + b"ulp")
    assert request.encode() == REQUEST_KEY + h("50 02 0007 8004 8002") + b"ulp"
    decoded = MpaRequest.decode(request.encode())
    assert decoded.enhanced_data == enhanced and decoded.ulp_private_data == b"ulp"
    assert MpaRequest(private_data=b"x").enhanced_data is None


def test_rfc6581_6_enhanced_needs_revision_2() -> None:
    """RFC 6581 6: with enhanced connection establishment Rev MUST be two or higher."""
    with pytest.raises(EncodeError):
        MpaRequest(enhanced=True, revision=1, private_data=bytes(4)).encode()
    with pytest.raises(DecodeError):
        MpaRequest.decode(REQUEST_KEY + h("50 01 0004 00000000"))


def test_rfc6581_6_enhanced_needs_four_bytes() -> None:
    with pytest.raises(EncodeError):
        MpaRequest(enhanced=True, revision=2, private_data=b"abc").encode()
    with pytest.raises(DecodeError):
        MpaRequest.decode(REQUEST_KEY + h("50 02 0003 000000"))


def test_rfc6581_6_revision_one_still_accepted() -> None:
    """RFC 6581 6: a host MUST continue to accept MPA Requests with version one."""
    assert MpaRequest.decode(REQUEST_KEY + h("40 01 0000")).revision == 1


def test_rfc5044_private_data_at_most_512() -> None:
    """RFC 5044 7.1: PD_Length MUST NOT exceed 512."""
    assert MpaReply(private_data=bytes(MAX_PRIVATE_DATA)).encode()
    with pytest.raises(EncodeError):
        MpaReply(private_data=bytes(513)).encode()
    with pytest.raises(DecodeError):
        MpaReply.decode(REPLY_KEY + h("40 01 0201") + bytes(513))


def test_rfc5044_res_and_request_r_not_checked() -> None:
    """RFC 5044 7.1 / RFC 6581 6: Res is not checked on reception; R is not checked in a request."""
    decoded = MpaRequest.decode(REQUEST_KEY + h("2f 01 0000"))
    assert decoded == MpaRequest(markers=False, crc=False, revision=1)
    assert MpaRequest(crc=False).encode()[16] == 0


@pytest.mark.parametrize(
    "wire",
    [
        b"MPA ID Xyz Frame" + h("40 01 0000"),  # bad key
        REPLY_KEY + h("40 01 0000"),  # reply key given to the request decoder
        REQUEST_KEY + h("40 03 0000"),  # unknown revision
        REQUEST_KEY + h("40 00 0000"),  # revision 0
        REQUEST_KEY + h("40 01 0005") + b"abc",  # PD_Length past the data
        REQUEST_KEY + h("40 01 0001") + b"ab",  # bytes beyond PD_Length
        REQUEST_KEY + h("40 01"),  # truncated header
    ],
)
def test_malformed_requests(wire: bytes) -> None:
    with pytest.raises(DecodeError):
        MpaRequest.decode(wire)


def test_frame_length_on_a_stream() -> None:
    """Frames are followed by FPDUs on the TCP stream: frame_length finds the boundary."""
    request = MpaRequest(private_data=b"12345").encode()
    assert frame_length(request + b"FPDU...") == len(request)
    with pytest.raises(DecodeError):
        frame_length(request[:19])


enhanced_data = st.builds(
    lambda a, b, c, d, ird, ord_: EnhancedData(a, a and b, a and c, a and d, ird, ord_),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.integers(0, 0x3FFF),
    st.integers(0, 0x3FFF),
)


@st.composite
def frames(draw):
    enhanced = draw(st.booleans())
    ulp = draw(st.binary(max_size=40))
    private = draw(enhanced_data).encode() + ulp if enhanced else ulp
    fields = dict(
        markers=draw(st.booleans()),
        crc=draw(st.booleans()),
        enhanced=enhanced,
        revision=2 if enhanced else draw(st.sampled_from([1, 2])),
        private_data=private,
    )
    if draw(st.booleans()):
        return MpaReply(reject=draw(st.booleans()), **fields)
    return MpaRequest(**fields)


@given(frames())
def test_round_trip(frame) -> None:
    wire = frame.encode()
    assert decode_mpa_frame(wire) == frame
    assert frame_length(wire) == len(wire)


@given(st.binary(max_size=60), st.sampled_from([b"", REQUEST_KEY, REPLY_KEY]))
def test_random_bytes_raise_only_decode_error(data: bytes, prefix: bytes) -> None:
    try:
        decode_mpa_frame(prefix + data)
    except DecodeError:
        pass

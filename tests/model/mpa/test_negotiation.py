"""Tests for model.mpa.negotiation: RFC 6581 6/9/10 negotiation over RFC 5044 7.1 Request/Reply frames."""

import pytest

from model.ddp.sctp_adaptation import EnhancedData
from model.errors import DecodeError, EncodeError, LlpError
from model.mpa.frames import FLAG_CRC, FLAG_ENHANCED, FLAG_REJECT, REPLY_KEY, REQUEST_KEY, MpaReply, MpaRequest
from model.mpa.negotiation import (
    ConnectionRejected,
    EnhancedRequestUnsupported,
    NegotiationError,
    Rejected,
    build_request,
    complete,
    respond,
)
from model.ddp.negotiation import LocalResources, NegotiatedParameters, RtrType, initiator_data

INITIATOR = LocalResources(ird=4, ord=2, peer_to_peer=True, rtr_types=(RtrType.SEND, RtrType.WRITE))
RESPONDER = LocalResources(ird=8, ord=8, rtr_types=(RtrType.WRITE, RtrType.READ))


def test_rfc6581_6_enhanced_request_layout() -> None:
    """RFC 6581 6: S=1, Rev 2, PD_Length counts the 4 enhanced bytes that begin the private data."""
    frame = build_request(INITIATOR, b"hello")
    assert frame[:16] == REQUEST_KEY
    assert frame[16] == FLAG_CRC | FLAG_ENHANCED and frame[17] == 2
    assert int.from_bytes(frame[18:20], "big") == 4 + 5
    assert frame[20:24] == initiator_data(INITIATOR).encode() and frame[24:] == b"hello"


def test_rfc6581_10_unenhanced_request_when_nothing_enhanced_is_wanted() -> None:
    """RFC 6581 10: the initiator MUST NOT use the enhanced format when no enhanced function is desired."""
    frame = build_request(None, b"pd", crc=False)
    request = MpaRequest.decode(frame)
    assert not request.enhanced and request.revision == 1 and not request.crc
    assert request.private_data == b"pd"


def test_rfc6581_9_round_trip_negotiates_on_both_sides() -> None:
    """RFC 6581 9 over MPA frames: Request -> Reply -> both sides' parameters agree; RTR chosen."""
    reply, responder_result = respond(build_request(INITIATOR, b"req"), RESPONDER, b"rep")
    assert isinstance(responder_result, NegotiatedParameters)
    decoded = MpaReply.decode(reply)
    assert decoded.enhanced and decoded.revision == 2 and not decoded.reject
    assert decoded.ulp_private_data == b"rep"
    initiator_result = complete(reply, INITIATOR)
    assert isinstance(initiator_result, NegotiatedParameters)
    assert initiator_result.rtr is RtrType.WRITE and RtrType.WRITE in responder_result.rtr_accepted
    assert initiator_result.ord <= responder_result.ird and responder_result.ord <= initiator_result.ird
    assert responder_result.peer == initiator_data(INITIATOR)


def test_rfc6581_10_unenhanced_request_gets_unenhanced_reply() -> None:
    """RFC 6581 10: responders MUST answer an unenhanced request with an unenhanced reply."""
    reply, result = respond(build_request(None, b"req"), RESPONDER, b"rep")
    decoded = MpaReply.decode(reply)
    assert result is None
    assert not decoded.enhanced and decoded.revision == 1 and decoded.private_data == b"rep"
    assert complete(reply, None) is None


def test_rfc6581_10_enhanced_reply_to_unenhanced_request_is_refused() -> None:
    enhanced_reply = MpaReply(enhanced=True, revision=2, private_data=EnhancedData(False, ird=1, ord=1).encode())
    with pytest.raises(NegotiationError) as caught:
        complete(enhanced_reply.encode(), None)
    assert caught.value.error is LlpError.NO_MATCHING_RTR


def test_rfc6581_10_unenhanced_reply_to_enhanced_request_fails_negotiation() -> None:
    """RFC 6581 10: an enhanced responder MUST reply enhanced; a plain reply leaves nothing negotiated."""
    with pytest.raises(NegotiationError) as caught:
        complete(MpaReply(private_data=b"x").encode(), INITIATOR)
    assert caught.value.error is LlpError.NO_MATCHING_RTR and caught.value.peer is None


def test_rfc6581_10_responder_without_enhanced_support_closes() -> None:
    """RFC 6581 10: a responder not supporting enhanced establishment MUST close the connection."""
    with pytest.raises(EnhancedRequestUnsupported):
        respond(build_request(INITIATOR), None)
    reply, result = respond(build_request(None), None)
    assert result is None and not MpaReply.decode(reply).enhanced


def test_rfc5044_7_1_ulp_reject_sets_r_and_initiator_sees_responder_values() -> None:
    """RFC 5044 7.1: R=1 rejects; RFC 6581 9: the initiator passes the responder's IRD/ORD to the ULP on reject."""
    reply, result = respond(build_request(INITIATOR, b"req"), RESPONDER, b"no", reject=True)
    assert result == Rejected(None, initiator_data(INITIATOR), b"req")
    assert reply[16] & FLAG_REJECT and reply[16] & FLAG_ENHANCED
    with pytest.raises(ConnectionRejected) as caught:
        complete(reply, INITIATOR)
    assert caught.value.rejected.private_data == b"no"
    assert caught.value.rejected.peer is not None and caught.value.rejected.peer.peer_to_peer


def test_rfc5044_7_1_unenhanced_reject() -> None:
    reply, result = respond(build_request(None, b"req"), None, b"no", reject=True)
    assert result == Rejected(None, None, b"req")
    with pytest.raises(ConnectionRejected) as caught:
        complete(reply, None)
    assert caught.value.rejected == Rejected(None, None, b"no")


def test_rfc6581_9_insufficient_initiator_ird_rejected_with_required_ord() -> None:
    """RFC 6581 9: reject naming the required ORD in the Reject's responder ORD; code 0x06."""
    responder = LocalResources(ird=8, ord=8, required_ord=6)
    reply, result = respond(build_request(LocalResources(ird=2, ord=2)), responder)
    assert isinstance(result, Rejected) and result.error is LlpError.INSUFFICIENT_IRD
    with pytest.raises(ConnectionRejected) as caught:
        complete(reply, LocalResources(ird=2, ord=2))
    assert caught.value.rejected.peer.ord == 6


def test_rfc6581_7_9_no_matching_rtr_rejected_listing_responder_options() -> None:
    initiator = LocalResources(ird=1, ord=1, peer_to_peer=True, rtr_types=(RtrType.SEND,))
    reply, result = respond(build_request(initiator), RESPONDER)
    assert isinstance(result, Rejected) and result.error is LlpError.NO_MATCHING_RTR
    peer = MpaReply.decode(reply).enhanced_data
    assert peer.write_rtr and peer.read_rtr and not peer.send_rtr


def test_rfc6581_9_initiator_without_ird_for_responder_ord_raises_code_6() -> None:
    """RFC 6581 9: the initiator MUST send TERM layer 2, EType 0, code 6."""
    reply = MpaReply(enhanced=True, revision=2, private_data=EnhancedData(False, ird=1, ord=9).encode())
    with pytest.raises(NegotiationError) as caught:
        complete(reply.encode(), LocalResources(ird=2, ord=1))
    assert caught.value.error.number == (2, 0, 6)


def test_rfc5044_7_1_reply_crc_if_either_side_wants_it() -> None:
    reply, _ = respond(build_request(None, crc=True), None, crc=False)
    assert MpaReply.decode(reply).crc
    reply, _ = respond(build_request(None, crc=False), None, crc=False)
    assert not MpaReply.decode(reply).crc


def test_malformed_frames_raise_decode_error() -> None:
    with pytest.raises(DecodeError):
        respond(REPLY_KEY + bytes(4), RESPONDER)
    with pytest.raises(DecodeError):
        complete(build_request(INITIATOR), INITIATOR)  # a Request where a Reply belongs
    truncated = build_request(INITIATOR, b"abc")[:-1]
    with pytest.raises(DecodeError):
        respond(truncated, RESPONDER)


def test_rfc6581_9_private_data_limit_includes_enhanced_bytes() -> None:
    """RFC 6581 9: the ULP's share of the 512 bytes is reduced by 4."""
    assert len(build_request(INITIATOR, bytes(508))) == 20 + 512
    with pytest.raises(EncodeError):
        build_request(INITIATOR, bytes(509))
    assert len(build_request(None, bytes(512))) == 20 + 512

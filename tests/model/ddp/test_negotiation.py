"""Tests for model.ddp.negotiation: RFC 6581 9 IRD/ORD and RTR negotiation, RFC 6581 8 codes, RFC 6581 10."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from model.ddp.segment import DdpSegment
from model.ddp.sctp_adaptation import IRD_ORD_NO_NEGOTIATION, EnhancedData
from model.errors import LlpError
from model.ddp.negotiation import (
    MAX_QUEUE_DEPTH,
    LocalResources,
    NegotiatedParameters,
    NegotiationConfigError,
    NegotiationFailed,
    Role,
    RtrType,
    check_reply,
    initiator_data,
    is_rdmap_terminate,
    llp_terminate_segment,
    offered_rtr_types,
    respond,
    rtr_segment,
    rtr_type_of,
)
from model.rdmap.messages import Opcode, Terminate, rdmap_control_of

ALL = (RtrType.SEND, RtrType.WRITE, RtrType.READ)
NO_NEG = IRD_ORD_NO_NEGOTIATION


def negotiate(initiator: LocalResources, responder: LocalResources):
    reply, decision = respond(initiator_data(initiator), responder)
    return reply, decision, check_reply(initiator, reply)


def test_rfc6581_9_initiator_data_sets_a_and_its_rtr_options() -> None:
    """RFC 6581 9: A=1 for peer-to-peer with B, C, D for each option it supports; A=0 -> B, C, D = 0."""
    p2p = initiator_data(LocalResources(ird=3, ord=5, peer_to_peer=True, rtr_types=(RtrType.READ, RtrType.SEND)))
    assert p2p == EnhancedData(True, send_rtr=True, write_rtr=False, read_rtr=True, ird=3, ord=5)
    client = initiator_data(LocalResources(ird=3, ord=5, peer_to_peer=False, rtr_types=ALL))
    assert client == EnhancedData(False, False, False, False, ird=3, ord=5)
    assert offered_rtr_types(client) == frozenset()


def test_rfc6581_9_automatic_negotiation_off_sends_all_ones() -> None:
    """RFC 6581 9: 0x3FFF in IRD or ORD means the ULP negotiates it."""
    data = initiator_data(LocalResources(ird=3, ord=5, automatic_ird=False, automatic_ord=False))
    assert (data.ird, data.ord) == (NO_NEG, NO_NEG)


def test_local_resources_are_checked() -> None:
    """14-bit depths, all ones reserved for 'no negotiation' (RFC 6581 9); required ORD within ORD."""
    with pytest.raises(NegotiationConfigError):
        LocalResources(ird=NO_NEG, ord=0)
    with pytest.raises(NegotiationConfigError):
        LocalResources(ird=0, ord=-1)
    with pytest.raises(NegotiationConfigError):
        LocalResources(ird=0, ord=1, required_ord=2)
    with pytest.raises(NegotiationConfigError):
        LocalResources(ird=0, ord=0, rtr_types=(RtrType.SEND, RtrType.SEND))
    assert LocalResources(ird=MAX_QUEUE_DEPTH, ord=MAX_QUEUE_DEPTH).ird == 0x3FFE


def test_rfc6581_9_responder_ird_covers_initiator_ord_and_ord_within_initiator_ird() -> None:
    """RFC 6581 9: initiator ORD <= responder IRD, responder ORD <= initiator IRD; values passed to the ULP."""
    initiator = LocalResources(ird=4, ord=6)
    responder = LocalResources(ird=16, ord=10)
    reply, decision, result = negotiate(initiator, responder)
    assert isinstance(decision, NegotiatedParameters) and isinstance(result, NegotiatedParameters)
    assert (reply.ird, reply.ord) == (6, 4)
    assert (decision.ird, decision.ord) == (6, 4)
    assert (result.ird, result.ord) == (4, 6)
    assert result.ord <= decision.ird and decision.ord <= result.ird
    # RFC 6581 9: the peer's provided IRD and ORD reach the ULP on both sides.
    assert decision.peer == initiator_data(initiator) and result.peer == reply
    assert decision.role is Role.RESPONDER and result.role is Role.INITIATOR
    assert decision.rtr_sender is None and result.rtr is None


def test_rfc6581_9_responder_short_of_ird_offers_what_it_has_and_initiator_lowers_ord() -> None:
    """RFC 6581 9: the initiator sets its ORD at most to the responder IRD."""
    reply, decision, result = negotiate(LocalResources(ird=4, ord=8), LocalResources(ird=3, ord=2))
    assert reply.ird == 3 and decision.ird == 3
    assert isinstance(result, NegotiatedParameters) and result.ord == 3
    assert reply.ord == 2 and decision.ord == 2


def test_rfc6581_9_responder_rejects_insufficient_initiator_ird_naming_required_ord() -> None:
    """RFC 6581 9: responder MAY reject when the initiator IRD is not sufficient for the ULP-required ORD,
    specifying the required ORD in the reject; the TERM carries layer 2, EType 0, code 6."""
    reply, decision = respond(initiator_data(LocalResources(ird=1, ord=1)), LocalResources(ird=4, ord=4, required_ord=3))
    assert decision == NegotiationFailed(LlpError.INSUFFICIENT_IRD, initiator_data(LocalResources(ird=1, ord=1)))
    assert reply.ord == 3
    assert LlpError.INSUFFICIENT_IRD.number == (2, 0, 6)


def test_rfc6581_9_initiator_without_ird_for_responder_ord_fails_code_6() -> None:
    """RFC 6581 9: an initiator without resources for the required IRD MUST send TERM code 6."""
    initiator = LocalResources(ird=2, ord=2)
    excessive = EnhancedData(False, ird=2, ord=3)
    assert check_reply(initiator, excessive) == NegotiationFailed(LlpError.INSUFFICIENT_IRD, excessive)


def test_rfc6581_9_initiator_required_ord_above_responder_ird_fails_code_6() -> None:
    initiator = LocalResources(ird=2, ord=4, required_ord=4)
    reply, decision, result = negotiate(initiator, LocalResources(ird=3, ord=0))
    assert isinstance(decision, NegotiatedParameters)
    assert result == NegotiationFailed(LlpError.INSUFFICIENT_IRD, reply)


def test_rfc6581_9_initiator_ord_all_ones_keeps_responder_ird_and_answers_all_ones() -> None:
    """RFC 6581 9: initiator ORD 0x3FFF -> responder IRD unchanged, reply IRD 0x3FFF; initiator ORD unchanged."""
    initiator = LocalResources(ird=4, ord=6, automatic_ord=False)
    reply, decision, result = negotiate(initiator, LocalResources(ird=9, ord=1))
    assert reply.ird == NO_NEG and decision.ird == 9
    assert result.ord == 6


def test_rfc6581_9_initiator_ird_all_ones_keeps_responder_ord_and_answers_all_ones() -> None:
    """RFC 6581 9: initiator IRD 0x3FFF -> responder ORD unchanged, reply ORD 0x3FFF; initiator IRD unchanged."""
    initiator = LocalResources(ird=4, ord=6, automatic_ird=False)
    reply, decision, result = negotiate(initiator, LocalResources(ird=9, ord=7, required_ord=7))
    assert reply.ord == NO_NEG and decision.ord == 7
    assert result.ird == 4


def test_rfc6581_9_responder_ird_raised_to_one_for_a_read_rtr() -> None:
    """RFC 6581 9: initiator ORD 0 with a zero-length Read RTR -> responder IRD can be set to 1."""
    initiator = LocalResources(ird=0, ord=0, peer_to_peer=True, rtr_types=(RtrType.READ,))
    reply, decision, result = negotiate(initiator, LocalResources(ird=4, ord=0))
    assert reply.ird == 1 and decision.ird == 1
    assert result.rtr is RtrType.READ
    # No IRD at all: a Read RTR is not offered.
    reply, decision = respond(initiator_data(initiator), LocalResources(ird=0, ord=0))
    assert decision == NegotiationFailed(LlpError.NO_MATCHING_RTR, initiator_data(initiator))


def test_rfc6581_9_responder_mirrors_a_and_offers_common_rtr_options() -> None:
    """RFC 6581 9: A mirrored; responder sets the flags of initiator-supported options it supports."""
    initiator = LocalResources(ird=1, ord=1, peer_to_peer=True, rtr_types=(RtrType.WRITE, RtrType.SEND))
    reply, decision, result = negotiate(initiator, LocalResources(ird=1, ord=1, rtr_types=ALL))
    assert reply.peer_to_peer and offered_rtr_types(reply) == {RtrType.SEND, RtrType.WRITE}
    assert decision.rtr_accepted == {RtrType.SEND, RtrType.WRITE} and decision.rtr is None
    assert decision.rtr_sender is Role.INITIATOR
    # RFC 6581 1: the initiator chooses among the common options at its sole discretion (its preference).
    assert result.rtr is RtrType.WRITE and result.rtr_sender is Role.INITIATOR
    assert result.rtr_accepted == {RtrType.WRITE}


def test_rfc6581_9_client_server_request_gets_a_zero_and_no_rtr() -> None:
    """RFC 6581 9: responder MUST set A to 0 if A is 0 in the request; B, C, D then 0."""
    reply, decision, result = negotiate(LocalResources(ird=1, ord=1), LocalResources(ird=1, ord=1))
    assert not reply.peer_to_peer and offered_rtr_types(reply) == frozenset()
    assert decision.rtr_accepted == frozenset() and result.rtr is None


def test_rfc6581_7_9_no_common_rtr_option_is_refused_code_7_listing_responder_options() -> None:
    """RFC 6581 7: the provider MAY reject, indicating the RTR types it supports; RFC 6581 8 code 0x07."""
    initiator = LocalResources(ird=1, ord=1, peer_to_peer=True, rtr_types=(RtrType.SEND,))
    reply, decision = respond(initiator_data(initiator), LocalResources(ird=1, ord=1, rtr_types=(RtrType.WRITE,)))
    assert isinstance(decision, NegotiationFailed) and decision.error is LlpError.NO_MATCHING_RTR
    assert reply.peer_to_peer and offered_rtr_types(reply) == {RtrType.WRITE}
    assert LlpError.NO_MATCHING_RTR.number == (2, 0, 7)


def test_rfc6581_9_initiator_cannot_generate_any_offered_rtr_fails_code_7() -> None:
    """RFC 6581 9: initiator unable to generate any responder-supported RTR MUST send TERM code 7."""
    initiator = LocalResources(ird=1, ord=1, peer_to_peer=True, rtr_types=(RtrType.SEND,))
    reply = EnhancedData(True, write_rtr=True, ird=1, ord=1)
    assert check_reply(initiator, reply) == NegotiationFailed(LlpError.NO_MATCHING_RTR, reply)


def test_rfc6581_9_connection_model_mismatch_fails_code_7() -> None:
    """RFC 6581 9: the responder MUST match A; a mismatch is no mutually compatible connection model."""
    p2p = LocalResources(ird=1, ord=1, peer_to_peer=True)
    client = LocalResources(ird=1, ord=1)
    assert check_reply(p2p, EnhancedData(False, ird=1, ord=1)).error is LlpError.NO_MATCHING_RTR
    assert check_reply(client, EnhancedData(True, send_rtr=True, ird=1, ord=1)).error is LlpError.NO_MATCHING_RTR


def test_rfc6581_10_unenhanced_reply_to_enhanced_request_fails_code_7() -> None:
    """RFC 6581 10: an enhanced responder MUST answer enhanced; an unenhanced reply fails the negotiation."""
    assert check_reply(LocalResources(ird=1, ord=1), None) == NegotiationFailed(LlpError.NO_MATCHING_RTR, None)


@pytest.mark.parametrize("rtr", list(RtrType))
def test_rfc6581_1_rtr_segments_are_zero_length_messages(rtr: RtrType) -> None:
    """RFC 6581 1: the RTR is a zero-length Send, RDMA Write or RDMA Read message."""
    segment = DdpSegment.decode(rtr_segment(rtr))
    opcode = rdmap_control_of(segment.header).known_opcode
    assert segment.header.last
    if rtr is RtrType.SEND:
        assert opcode is Opcode.SEND and segment.header.qn == 0 and segment.payload == b""
    elif rtr is RtrType.WRITE:
        assert opcode is Opcode.RDMA_WRITE and segment.tagged and segment.payload == b""
    else:
        assert opcode is Opcode.RDMA_READ_REQUEST and segment.header.qn == 1 and segment.payload == bytes(28)
    assert rtr_type_of(rtr_segment(rtr)) is rtr
    assert not is_rdmap_terminate(rtr_segment(rtr))


def test_rtr_type_of_refuses_messages_that_are_not_rtrs() -> None:
    send_with_data = bytearray(rtr_segment(RtrType.SEND)) + b"x"
    assert rtr_type_of(bytes(send_with_data)) is None
    write_with_data = rtr_segment(RtrType.WRITE) + b"x"
    assert rtr_type_of(write_with_data) is None
    read_of_one_byte = bytearray(rtr_segment(RtrType.READ))
    read_of_one_byte[18 + 12 + 3] = 1  # RDMA Read Message Size
    assert rtr_type_of(bytes(read_of_one_byte)) is None
    not_last = bytearray(rtr_segment(RtrType.SEND))
    not_last[0] &= ~0x40
    assert rtr_type_of(bytes(not_last)) is None
    assert rtr_type_of(llp_terminate_segment(LlpError.NO_MATCHING_RTR)) is None
    assert rtr_type_of(b"\x41") is None


@pytest.mark.parametrize("error", list(LlpError))
def test_rfc6581_8_llp_terminate_segment_carries_layer_2_etype_0(error: LlpError) -> None:
    """RFC 6581 8: TERM with Layer 2 (LLP), Error Type 0 and codes 0x05, 0x06, 0x07."""
    segment = DdpSegment.decode(llp_terminate_segment(error))
    assert is_rdmap_terminate(llp_terminate_segment(error))
    assert segment.header.qn == 2 and segment.header.last and segment.header.mo == 0
    assert Terminate.decode(segment.payload).number == (2, 0, error.code)


resources = st.builds(
    LocalResources,
    ird=st.integers(0, MAX_QUEUE_DEPTH),
    ord=st.integers(0, MAX_QUEUE_DEPTH),
    peer_to_peer=st.booleans(),
    rtr_types=st.lists(st.sampled_from(ALL), unique=True).map(tuple),
    automatic_ird=st.booleans(),
    automatic_ord=st.booleans(),
)


@given(resources, resources)
def test_rfc6581_9_negotiated_values_respect_the_bounds(initiator: LocalResources, responder: LocalResources) -> None:
    """Whenever the responder accepts, the initiator agrees, initiator ORD <= responder IRD and responder ORD <= initiator IRD
    (unless 0x3FFF handed that pair to the ULP), and the RTR is one the responder accepts."""
    sent = initiator_data(initiator)
    reply, decision = respond(sent, responder)
    assert EnhancedData.decode(reply.encode()) == reply
    if not isinstance(decision, NegotiatedParameters):
        return
    result = check_reply(initiator, reply)
    assert isinstance(result, NegotiatedParameters)  # no required_ord: a conforming reply always suffices
    if sent.ord != NO_NEG:
        assert result.ord <= decision.ird
    if sent.ird != NO_NEG:
        assert decision.ord <= result.ird
    if initiator.peer_to_peer:
        assert result.rtr in decision.rtr_accepted
        if result.rtr is RtrType.READ:
            assert decision.ird >= 1
    else:
        assert result.rtr is None and decision.rtr_accepted == frozenset()

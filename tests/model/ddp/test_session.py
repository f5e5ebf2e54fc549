"""Tests for model.ddp.session: DDP Stream Sessions (RFC 5043 6, 10) and their enhanced twins (RFC 6581 7-9)."""

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model.ddp.segment import DdpSegment
from model.ddp.sctp_adaptation import DdpSegmentChunkData, EnhancedData, FunctionCode, SessionControl
from model.ddp.session import (
    MAX_UNACKNOWLEDGED,
    AcknowledgementError,
    DdpSessions,
    InitiateReceived,
    InitiateRefused,
    NegotiationRefused,
    RefusalReason,
    RtrReceived,
    SegmentReceived,
    SessionAccepted,
    SessionPhase,
    SessionRejected,
    SessionStateError,
    SessionTerminated,
    StreamBusy,
    StreamReleased,
    TerminationCause,
    UnexpectedPpid,
)
from model.errors import EncodeError, LlpError
from model.ddp.negotiation import LocalResources, RtrType, llp_terminate_segment, rtr_segment
from model.rdmap.messages import Terminate

SEG = 16
CTRL = 17


def control(ssn: int, function: FunctionCode, private_data: bytes = b"") -> bytes:
    return SessionControl(ssn, function, private_data).encode()


def segment(ssn: int, body: bytes) -> bytes:
    return DdpSegmentChunkData(ssn, body).encode()


def decoded(messages):
    """(stream, 'ctrl'|'seg', ssn, function|segment) for each message."""
    out = []
    for stream_id, ppid, payload in messages:
        if ppid == CTRL:
            message = SessionControl.decode(payload)
            out.append((stream_id, "ctrl", message.ddp_ssn, message.function))
        else:
            chunk = DdpSegmentChunkData.decode(payload)
            out.append((stream_id, "seg", chunk.ddp_ssn, chunk.segment))
    return out


def received(sessions: DdpSessions, message) -> list:
    """Feed one (stream_id, ppid, payload) message; the events it queued."""
    sessions.receive(message)
    return sessions.next_events()


def acked(sessions: DdpSessions, stream_id: int, count: int) -> list:
    """Report `count` chunks of the stream acknowledged; the events it queued."""
    sessions.acknowledged(stream_id, count)
    return sessions.next_events()


def accepted(sessions: DdpSessions, *args, **kwargs) -> list:
    """Accept a pending Initiate; the events it queued (segments held until then, RFC 5043 6.2)."""
    sessions.accept(*args, **kwargs)
    return sessions.next_events()


def deliver(src: DdpSessions, dst: DdpSessions, ack: bool = True) -> tuple[list, list]:
    """Move src's messages into dst; optionally acknowledge them to src. Returns (dst events, src events)."""
    messages = src.data_to_send()
    dst_events = []
    for message in messages:
        dst_events += received(dst, message)
    src_events = []
    if ack:
        for stream_id, count in Counter(m[0] for m in messages).items():
            src_events += acked(src, stream_id, count)
    return dst_events, src_events


def establish(a: DdpSessions, b: DdpSessions, stream_id: int = 1, enhanced: LocalResources | None = None):
    a.initiate(stream_id, b"hello", enhanced=enhanced)
    b_events, _ = deliver(a, b)
    assert isinstance(b_events[0], InitiateReceived)
    b_accept_events = accepted(b, stream_id, b"welcome")
    a_events, _ = deliver(b, a)
    return b_events, b_accept_events, a_events


# -- RFC 5043 6.2 accepted, 6.1 DDP-SSN ---------------------------------------------


def test_rfc5043_6_2_accepted_session_exchanges_segments() -> None:
    """RFC 5043 6.2: Initiate, Accept, then segments both ways; private data reported (5.2.3)."""
    a, b = DdpSessions(), DdpSessions()
    a.initiate(3, b"hello")
    sent = a.data_to_send()
    assert decoded(sent) == [(3, "ctrl", 0, FunctionCode.INITIATE)]
    assert received(b, sent[0]) == [InitiateReceived(3, b"hello")]
    assert accepted(b, 3, b"welcome") == []
    assert deliver(b, a)[0] == [SessionAccepted(3, b"welcome")]
    assert a.phase(3) is b.phase(3) is SessionPhase.ESTABLISHED
    a.send_segment(3, b"seg-a1")
    a.send_segment(3, b"seg-a2")
    b.send_segment(3, b"seg-b1")
    assert deliver(a, b)[0] == [SegmentReceived(3, 1, b"seg-a1"), SegmentReceived(3, 2, b"seg-a2")]
    assert deliver(b, a)[0] == [SegmentReceived(3, 1, b"seg-b1")]


def test_rfc5043_6_1_ddp_ssn_starts_at_zero_without_gaps_and_restarts_per_session() -> None:
    """RFC 5043 6, 6.1: DDP-SSN reset to zero each session, no gaps."""
    a, b = DdpSessions(), DdpSessions()
    a.initiate(1)
    sent = list(a.data_to_send())
    received(b, sent[0])
    acked(a, 1, 1)
    accepted(b, 1)
    sent_b = b.data_to_send()
    received(a, sent_b[0])
    acked(b, 1, 1)
    for i in range(5):
        a.send_segment(1, bytes([i]))
    a.terminate(1)
    sent += a.data_to_send()  # the Initiate is answered: the Terminate may go (6.6)
    assert [m[2] for m in decoded(sent)] == list(range(7))
    acked(a, 1, 6)
    assert decoded(sent)[-1][3] is FunctionCode.TERMINATE
    for message in sent[1:]:
        received(b, message)
    a_events = []
    for message in b.data_to_send():  # b answers with its own Terminate
        assert decoded([message]) == [(1, "ctrl", 1, FunctionCode.TERMINATE)]
        a_events += received(a, message)
    assert a_events == [StreamReleased(1)]
    a.initiate(1)
    assert decoded(a.data_to_send()) == [(1, "ctrl", 0, FunctionCode.INITIATE)]


def test_rfc5043_6_2_terminate_is_answered_and_both_sides_release_the_stream() -> None:
    """RFC 5043 6.2: at least one side sends Terminate; each side's last chunk MAY be one (we answer)."""
    a, b = DdpSessions(), DdpSessions()
    establish(a, b)
    a.terminate(1)
    assert a.phase(1) is SessionPhase.CLOSING
    b_events, a_events = deliver(a, b)
    assert b_events == [SessionTerminated(1, TerminationCause.PEER_TERMINATE)]
    assert a_events == []
    a_events, b_events = deliver(b, a)
    assert a_events == [StreamReleased(1)] and b_events == [StreamReleased(1)]
    assert a.stream_available(1) and b.stream_available(1)
    with pytest.raises(SessionStateError):
        b.send_segment(1, b"late")


# -- RFC 5043 6.3 rejected, 6.4 non-ULP rejected ------------------------------------


def test_rfc5043_6_3_reject_at_the_users_direction_carries_private_data() -> None:
    a, b = DdpSessions(), DdpSessions()
    a.initiate(2, b"please")
    b_events, _ = deliver(a, b)
    assert b_events == [InitiateReceived(2, b"please")]
    assert b.data_to_send() == []  # 6.3: no Reject unless the ULP says so
    b.reject(2, b"no thanks")
    a_events, b_release = deliver(b, a)
    assert a_events == [SessionRejected(2, b"no thanks"), StreamReleased(2)]  # our Initiate was acknowledged
    assert b_release == [StreamReleased(2)]
    assert a.data_to_send() == []  # the rejected sequence ends: Initiate, Reject
    assert a.stream_available(2) and b.stream_available(2)


def test_rfc5043_6_4_pending_limit_answers_with_terminate() -> None:
    """RFC 5043 6.4 / 5.2.3: a finite limit of Initiates pending; beyond it, a Terminate."""
    a, b = DdpSessions(), DdpSessions(pending_limit=1)
    a.initiate(1, b"first")
    a.initiate(2, b"second")
    b_events, _ = deliver(a, b)
    assert b_events == [
        InitiateReceived(1, b"first"),
        InitiateRefused(2, RefusalReason.PENDING_LIMIT, b"second"),
    ]
    assert b.pending_initiates == 1
    assert decoded(b.data_to_send()) == [(2, "ctrl", 0, FunctionCode.TERMINATE)]


def test_rfc5043_6_4_non_ulp_reject_reaches_the_active_side() -> None:
    a, b = DdpSessions(), DdpSessions(pending_limit=0)
    a.initiate(5)
    deliver(a, b)
    answer = b.data_to_send()
    assert decoded(answer) == [(5, "ctrl", 0, FunctionCode.TERMINATE)]
    events = received(a, answer[0])
    assert events == [SessionTerminated(5, TerminationCause.PEER_NON_ULP_REJECT), StreamReleased(5)]
    assert a.data_to_send() == []


def test_rfc5043_6_4_user_terminate_of_pending_initiate() -> None:
    a, b = DdpSessions(), DdpSessions()
    a.initiate(1)
    deliver(a, b)
    b.terminate(1)
    assert b.pending_initiates == 0
    assert deliver(b, a)[0] == [SessionTerminated(1, TerminationCause.PEER_NON_ULP_REJECT), StreamReleased(1)]
    with pytest.raises(SessionStateError):
        accepted(b, 1)


# -- RFC 5043 6.6 ordering ---------------------------------------------------------


def test_rfc5043_6_6_control_waits_until_previous_control_is_received() -> None:
    """RFC 5043 6.6: a Terminate that could overtake the Initiate is not sent."""
    a = DdpSessions()
    a.initiate(1)
    assert len(a.data_to_send()) == 1
    a.terminate(1)
    assert a.data_to_send() == []
    acked(a, 1, 1)
    assert decoded(a.data_to_send()) == [(1, "ctrl", 1, FunctionCode.TERMINATE)]


def test_rfc5043_6_6_control_released_when_the_initiate_is_answered() -> None:
    a, b = DdpSessions(), DdpSessions()
    a.initiate(1)
    deliver(a, b, ack=False)
    a.terminate(1)
    assert a.data_to_send() == []
    accepted(b, 1)
    assert deliver(b, a)[0] == []  # the user terminated: no SessionAccepted
    assert decoded(a.data_to_send()) == [(1, "ctrl", 1, FunctionCode.TERMINATE)]


def test_rfc5043_6_6_no_segment_before_the_initiate_is_known_received() -> None:
    """RFC 5043 6.6 (and 6.3: no payload before the passive side commits): segments wait for the Accept."""
    a = DdpSessions()
    a.initiate(1)
    a.send_segment(1, b"early")
    assert decoded(a.data_to_send()) == [(1, "ctrl", 0, FunctionCode.INITIATE)]
    acked(a, 1, 1)
    assert a.data_to_send() == []
    received(a, (1, CTRL, control(0, FunctionCode.ACCEPT)))
    assert decoded(a.data_to_send()) == [(1, "seg", 1, b"early")]


def test_rfc5043_6_6_stream_not_reused_while_chunks_are_outstanding() -> None:
    a, b = DdpSessions(), DdpSessions()
    establish(a, b)
    with pytest.raises(StreamBusy):
        a.initiate(1)
    a.terminate(1)
    deliver(a, b, ack=False)
    received(a, b.data_to_send()[0])  # b's Terminate
    assert not a.stream_available(1)  # our Terminate is not acknowledged yet
    with pytest.raises(StreamBusy):
        a.initiate(1)
    assert acked(a, 1, 1) == [StreamReleased(1)]
    a.initiate(1)


def test_tolerant_of_segments_sent_before_the_accept() -> None:
    """A peer using the 6.6 acknowledgement rule may send segments before the Accept: held until accept()."""
    b = DdpSessions()
    assert received(b, (1, SEG, segment(1, b"early"))) == []
    assert received(b, (1, CTRL, control(0, FunctionCode.INITIATE, b"pd"))) == [InitiateReceived(1, b"pd")]
    assert accepted(b, 1) == [SegmentReceived(1, 1, b"early")]


# -- RFC 5043 6.1 illegal sequences --------------------------------------------------


@pytest.mark.parametrize(
    "function",
    [FunctionCode.INITIATE, FunctionCode.ACCEPT, FunctionCode.REJECT, FunctionCode.ENHANCED_ACCEPT],
)
def test_rfc5043_6_1_control_other_than_terminate_after_the_first_terminates(function: FunctionCode) -> None:
    a, b = DdpSessions(), DdpSessions(responder=LocalResources(ird=1, ord=1))
    establish(a, b)
    body = EnhancedData().encode() if function.is_enhanced else b""
    events = received(b, (1, CTRL, control(1, function, body)))
    assert events == [SessionTerminated(1, TerminationCause.ILLEGAL_SEQUENCE)]
    assert decoded(b.data_to_send()) == [(1, "ctrl", 1, FunctionCode.TERMINATE)]


@pytest.mark.parametrize(
    "answer",
    [
        segment(0, b"data first"),
        control(0, FunctionCode.INITIATE),
        control(0, FunctionCode.ENHANCED_ACCEPT, EnhancedData().encode()),
        control(0, FunctionCode.ENHANCED_REJECT, EnhancedData().encode()),
        bytes.fromhex("0000 0009"),  # unknown function code
    ],
)
def test_rfc5043_6_1_illegal_answers_to_an_initiate_terminate(answer: bytes) -> None:
    """RFC 5043 6.1/6.2-6.4 and RFC 6581 7: the plain and enhanced sequences do not mix."""
    a = DdpSessions()
    a.initiate(1)
    a.data_to_send()
    ppid = SEG if answer == segment(0, b"data first") else CTRL
    assert received(a, (1, ppid, answer)) == [SessionTerminated(1, TerminationCause.ILLEGAL_SEQUENCE)]
    acked(a, 1, 1)  # 6.6: unless the answer was a control message, the Terminate waits for this
    assert decoded(a.data_to_send()) == [(1, "ctrl", 1, FunctionCode.TERMINATE)]


def test_stray_first_messages_are_dropped_without_answer() -> None:
    """A Terminate/Accept for a session this side does not have is not answered (no echo loops)."""
    b = DdpSessions()
    assert received(b, (1, CTRL, control(0, FunctionCode.TERMINATE))) == []
    assert received(b, (2, CTRL, control(0, FunctionCode.ACCEPT))) == []
    assert b.data_to_send() == []


# -- RFC 5043 10 DDP-SSN validity and the 32767 limit --------------------------------


def test_rfc5043_10_ddp_ssn_validity_window() -> None:
    """RFC 5043 10: accept a DDP-SSN only if the gap can be explained by unreceived chunks."""
    a, b = DdpSessions(), DdpSessions()
    establish(a, b)
    # b's lowest missing DDP-SSN from a is 1: 1 + 32766 is the farthest valid one.
    assert received(b, (1, SEG, segment(32767, b"edge"))) == [SegmentReceived(1, 32767, b"edge")]
    assert received(b, (1, SEG, segment(32768, b"beyond"))) == [
        SessionTerminated(1, TerminationCause.INVALID_DDP_SSN)
    ]
    assert decoded(b.data_to_send()) == [(1, "ctrl", 1, FunctionCode.TERMINATE)]


def test_rfc5043_10_duplicate_ddp_ssn_is_invalid() -> None:
    a, b = DdpSessions(), DdpSessions()
    establish(a, b)
    assert received(b, (1, SEG, segment(1, b"x"))) == [SegmentReceived(1, 1, b"x")]
    assert received(b, (1, SEG, segment(1, b"x"))) == [SessionTerminated(1, TerminationCause.INVALID_DDP_SSN)]


def test_rfc5043_10_segments_reported_out_of_order_controls_in_order() -> None:
    """RFC 5043 10: unordered delivery; segments are placed at once, the Terminate waits its turn (6.1)."""
    a, b = DdpSessions(), DdpSessions()
    establish(a, b)
    assert received(b, (1, CTRL, control(3, FunctionCode.TERMINATE))) == []
    assert received(b, (1, SEG, segment(2, b"two"))) == [SegmentReceived(1, 2, b"two")]
    events = received(b, (1, SEG, segment(1, b"one")))
    assert events == [SegmentReceived(1, 1, b"one"), SessionTerminated(1, TerminationCause.PEER_TERMINATE)]


def test_rfc5043_10_at_most_32767_unacknowledged_chunks_per_stream() -> None:
    """RFC 5043 10: the sender refrains from more than 32767 chunks of a stream without acknowledgement."""
    a, b = DdpSessions(), DdpSessions()
    establish(a, b)
    a.data_to_send()
    for _ in range(MAX_UNACKNOWLEDGED + 2):
        a.send_segment(1, b"")
    first = a.data_to_send()
    assert len(first) == MAX_UNACKNOWLEDGED and a.unacknowledged(1) == MAX_UNACKNOWLEDGED
    acked(a, 1, 1)
    assert [m[2] for m in decoded(a.data_to_send())] == [MAX_UNACKNOWLEDGED + 1]
    acked(a, 1, 5)
    assert [m[2] for m in decoded(a.data_to_send())] == [MAX_UNACKNOWLEDGED + 2]


def test_rfc5043_6_2_passive_segments_before_the_accept_are_held_for_the_active_side() -> None:
    a = DdpSessions()
    a.initiate(1)
    assert received(a, (1, SEG, segment(1, b"b1"))) == []
    assert received(a, (1, CTRL, control(0, FunctionCode.ACCEPT, b"ok"))) == [
        SessionAccepted(1, b"ok"),
        SegmentReceived(1, 1, b"b1"),
    ]


# -- RFC 5043 5.2.3 private data, misuse -------------------------------------------------


def test_rfc5043_5_2_3_private_data_limits_are_checked_before_any_change() -> None:
    a = DdpSessions()
    with pytest.raises(EncodeError):
        a.initiate(1, bytes(513))
    with pytest.raises(EncodeError):
        a.initiate(1, bytes(509), enhanced=LocalResources(ird=1, ord=1))
    assert a.stream_available(1) and a.data_to_send() == []
    a.initiate(1, bytes(508), enhanced=LocalResources(ird=1, ord=1))


def test_local_misuse_raises_typed_errors() -> None:
    a = DdpSessions()
    with pytest.raises(UnexpectedPpid):
        received(a, (1, 0, b"\x00\x00"))
    with pytest.raises(AcknowledgementError):
        acked(a, 1, 1)
    with pytest.raises(SessionStateError):
        a.send_segment(1, b"x")
    with pytest.raises(SessionStateError):
        accepted(a, 1)
    with pytest.raises(SessionStateError):
        a.reject(1)
    with pytest.raises(SessionStateError):
        a.terminate(1)
    with pytest.raises(EncodeError):
        a.initiate(1 << 16)


# -- RFC 6581 7-9 enhanced sessions ------------------------------------------------------

P2P = LocalResources(ird=4, ord=2, peer_to_peer=True, rtr_types=(RtrType.WRITE, RtrType.SEND))
RESPONDER = LocalResources(ird=8, ord=8, rtr_types=(RtrType.SEND, RtrType.WRITE))


def test_rfc6581_9_enhanced_peer_to_peer_session_with_rtr() -> None:
    """RFC 6581 9: negotiated values on both sides; the initiator's first message is the chosen RTR;
    the responder sends nothing of its own until the RTR has arrived."""
    a, b = DdpSessions(), DdpSessions(responder=RESPONDER)
    b_events, _, a_events = establish(a, b, 1, enhanced=P2P)
    assert b_events[0].enhanced == EnhancedData(True, True, True, False, ird=4, ord=2)
    proposal = b_events[0].proposal
    assert proposal.rtr_accepted == {RtrType.SEND, RtrType.WRITE}
    assert b.phase(1) is SessionPhase.AWAITING_RTR
    b.send_segment(1, b"from b")
    assert b.data_to_send() == []  # held until the RTR
    (accepted,) = a_events
    assert isinstance(accepted, SessionAccepted) and accepted.private_data == b"welcome"
    assert accepted.negotiated.rtr is RtrType.WRITE and (accepted.negotiated.ird, accepted.negotiated.ord) == (4, 2)
    a.send_segment(1, b"from a")
    sent = decoded(a.data_to_send())
    assert sent == [(1, "seg", 1, rtr_segment(RtrType.WRITE)), (1, "seg", 2, b"from a")]
    b_events = received(b, (1, SEG, segment(1, rtr_segment(RtrType.WRITE))))
    assert b_events == [RtrReceived(1, RtrType.WRITE)]
    assert decoded(b.data_to_send()) == [(1, "seg", 1, b"from b")]
    assert received(b, (1, SEG, segment(2, b"from a"))) == [SegmentReceived(1, 2, b"from a")]
    assert b.negotiated(1) == proposal and a.negotiated(1) == accepted.negotiated


def test_rfc6581_9_first_segment_not_the_rtr_terminates_with_code_7() -> None:
    """RFC 6581 8/9: no matching RTR -> TERM layer 2, EType 0, code 0x07, then the session Terminate."""
    a, b = DdpSessions(), DdpSessions(responder=RESPONDER)
    establish(a, b, 1, enhanced=P2P)
    b.data_to_send()
    events = received(b, (1, SEG, segment(1, rtr_segment(RtrType.READ))))  # never offered
    assert events == [SessionTerminated(1, TerminationCause.NEGOTIATION_FAILED, LlpError.NO_MATCHING_RTR)]
    sent = decoded(b.data_to_send())
    assert sent[0][:3] == (1, "seg", 1) and sent[1] == (1, "ctrl", 2, FunctionCode.TERMINATE)
    assert Terminate.decode(DdpSegment.decode(sent[0][3]).payload).number == (2, 0, 7)


def test_rfc6581_9_insufficient_ird_at_the_initiator_terminates_with_code_6() -> None:
    """RFC 6581 9: initiator without IRD for the responder ORD sends TERM code 6; it sees the peer's values."""
    a = DdpSessions()
    a.initiate(1, enhanced=LocalResources(ird=1, ord=1))
    a.data_to_send()
    reply = EnhancedData(False, ird=1, ord=5)
    events = received(a, (1, CTRL, control(0, FunctionCode.ENHANCED_ACCEPT, reply.encode() + b"pd")))
    assert events == [
        SessionTerminated(1, TerminationCause.NEGOTIATION_FAILED, LlpError.INSUFFICIENT_IRD, reply, b"pd")
    ]
    sent = decoded(a.data_to_send())
    assert sent == [(1, "seg", 1, llp_terminate_segment(LlpError.INSUFFICIENT_IRD)), (1, "ctrl", 2, FunctionCode.TERMINATE)]


def test_rfc6581_7_no_matching_rtr_is_refused_by_the_provider_with_enhanced_reject() -> None:
    """RFC 6581 7: not reported to the ULP; the provider MAY reject, listing the RTR types it supports."""
    a, b = DdpSessions(), DdpSessions(responder=LocalResources(ird=1, ord=1, rtr_types=(RtrType.READ,)))
    a.initiate(1, b"x", enhanced=P2P)
    b_events, _ = deliver(a, b)
    assert b_events == [
        InitiateRefused(1, RefusalReason.NEGOTIATION_FAILED, b"x", b_events[0].enhanced, LlpError.NO_MATCHING_RTR)
    ]
    a_events, _ = deliver(b, a)
    assert isinstance(a_events[0], SessionRejected)
    assert a_events[0].enhanced.read_rtr and not a_events[0].enhanced.write_rtr


def test_rfc6581_7_enhanced_reject_reaches_the_initiator_with_responder_values() -> None:
    """RFC 6581 9: the initiator MUST pass the responder's IRD and ORD to the ULP for a reject too."""
    a, b = DdpSessions(), DdpSessions(responder=RESPONDER)
    a.initiate(1, enhanced=P2P)
    deliver(a, b)
    b.reject(1, b"busy")
    rejected, released = deliver(b, a)[0]
    assert released == StreamReleased(1)
    assert rejected.private_data == b"busy" and rejected.enhanced.peer_to_peer
    assert (rejected.enhanced.ird, rejected.enhanced.ord) == (2, 4)


def test_rfc6581_9_accept_with_resources_that_cannot_accept_raises() -> None:
    a, b = DdpSessions(), DdpSessions(responder=RESPONDER)
    a.initiate(1, enhanced=LocalResources(ird=1, ord=1))
    deliver(a, b)
    with pytest.raises(NegotiationRefused) as caught:
        accepted(b, 1, resources=LocalResources(ird=1, ord=2, required_ord=2))
    assert caught.value.error is LlpError.INSUFFICIENT_IRD
    assert b.phase(1) is SessionPhase.PENDING
    accepted(b, 1, resources=LocalResources(ird=1, ord=1))
    assert b.phase(1) is SessionPhase.ESTABLISHED  # client-server model: no RTR


def test_rfc6581_10_unenhanced_initiate_gets_unenhanced_accept_from_enhanced_endpoint() -> None:
    """RFC 6581 10: responders MUST continue to accept unenhanced requests, answering unenhanced."""
    a, b = DdpSessions(), DdpSessions(responder=RESPONDER)
    a.initiate(1)
    b_events, _ = deliver(a, b)
    assert b_events == [InitiateReceived(1, b"")]
    accepted(b, 1, resources=RESPONDER)
    assert decoded(b.data_to_send()[:1]) == [(1, "ctrl", 0, FunctionCode.ACCEPT)]


def test_rfc6581_10_unenhanced_endpoint_refuses_enhanced_initiate_with_terminate() -> None:
    """RFC 6581 10: an unenhanced responder cannot take the enhanced request; the initiator sees a
    non-ULP reject and may retry unenhanced."""
    a, b = DdpSessions(), DdpSessions()
    a.initiate(1, b"pd", enhanced=P2P)
    b_events, _ = deliver(a, b)
    assert [type(e) for e in b_events] == [InitiateRefused]
    assert b_events[0].reason is RefusalReason.ENHANCED_UNSUPPORTED
    a_events, _ = deliver(b, a)
    assert a_events[0] == SessionTerminated(1, TerminationCause.PEER_NON_ULP_REJECT)
    a.initiate(1, b"pd")  # retry unenhanced
    assert deliver(a, b)[0] == [InitiateReceived(1, b"pd")]


def test_rfc6581_10_plain_accept_to_enhanced_initiate_terminates() -> None:
    a = DdpSessions()
    a.initiate(1, enhanced=P2P)
    a.data_to_send()
    events = received(a, (1, CTRL, control(0, FunctionCode.ACCEPT)))
    assert events == [SessionTerminated(1, TerminationCause.ILLEGAL_SEQUENCE)]


# -- property: two endpoints back to back ------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    counts=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=3),
    enhanced=st.booleans(),
)
def test_back_to_back_sessions_establish_exchange_and_terminate(seed, counts, enhanced) -> None:
    """Two DdpSessions wired back to back, chunks delivered in random order and acknowledged at random
    moments: every session establishes, every segment arrives exactly once with its DDP-SSN, both
    sides terminate and release every stream."""
    rng = random.Random(seed)
    a, b = DdpSessions(), DdpSessions(responder=RESPONDER)
    in_flight: list[tuple[str, tuple[int, int, bytes]]] = []
    unacked = {"a": Counter(), "b": Counter()}
    events = {"a": [], "b": []}
    ends = {"a": a, "b": b}

    def collect() -> None:
        for name, end in ends.items():
            for message in end.data_to_send():
                in_flight.append((name, message))
                unacked[name][message[0]] += 1

    def step() -> None:
        choice = rng.randrange(len(in_flight) + 2)
        if choice < len(in_flight):
            name, message = in_flight.pop(choice)
            other = "b" if name == "a" else "a"
            events[other].extend(received(ends[other], message))
        else:
            name = rng.choice(["a", "b"])
            for stream_id, count in list(unacked[name].items()):
                events[name].extend(acked(ends[name], stream_id, count))
            unacked[name].clear()
        collect()

    def run_until(predicate, limit: int = 10_000) -> None:
        for _ in range(limit):
            if predicate():
                return
            if not in_flight and not any(unacked[n] for n in unacked):
                break
            step()
        assert predicate()

    streams = range(1, len(counts) + 1)
    for stream_id in streams:
        a.initiate(stream_id, b"i%d" % stream_id, enhanced=P2P if enhanced else None)
    collect()
    run_until(lambda: all(b.phase(s) is SessionPhase.PENDING for s in streams))
    for stream_id in streams:
        events["b"].extend(accepted(b, stream_id, b"ok"))
    collect()
    run_until(lambda: all(a.phase(s) is SessionPhase.ESTABLISHED for s in streams))
    expected = {"a": set(), "b": set()}
    for stream_id, (from_a, from_b) in zip(streams, counts):
        for i in range(from_a):
            a.send_segment(stream_id, b"a%d-%d" % (stream_id, i))
            expected["b"].add((stream_id, b"a%d-%d" % (stream_id, i)))
        for i in range(from_b):
            b.send_segment(stream_id, b"b%d-%d" % (stream_id, i))
            expected["a"].add((stream_id, b"b%d-%d" % (stream_id, i)))
    collect()
    run_until(lambda: all(b.phase(s) is SessionPhase.ESTABLISHED for s in streams) and not in_flight)
    for stream_id in streams:
        rng.choice([a, b]).terminate(stream_id)
    collect()
    run_until(lambda: all(a.stream_available(s) and b.stream_available(s) for s in streams))

    for name in ("a", "b"):
        arrived = [e for e in events[name] if isinstance(e, SegmentReceived)]
        assert {(e.stream_id, e.segment) for e in arrived} == expected[name]
        assert len(arrived) == len(expected[name])
        for stream_id in streams:
            ssns = sorted(e.ddp_ssn for e in arrived if e.stream_id == stream_id)
            first = 2 if enhanced and name == "b" else 1  # the RTR took DDP-SSN 1
            assert ssns == list(range(first, first + len(ssns)))
        assert sorted(e.stream_id for e in events[name] if isinstance(e, StreamReleased)) == list(streams)
        assert not [e for e in events[name] if isinstance(e, SessionTerminated) and e.cause is not TerminationCause.PEER_TERMINATE]
    assert sum(isinstance(e, RtrReceived) for e in events["b"]) == (len(counts) if enhanced else 0)


# -- the transition table (RFC 5043 6) -------------------------------------------------------------


def test_every_session_row_cites_an_rfc_section() -> None:
    import re

    from model.ddp.session import TRANSITIONS

    uncited = [key for key, row in TRANSITIONS.items() if not re.search(r"RFC \d{4} \d+(\.\d+)*", row.rfc)]
    assert not uncited, uncited


def test_every_peer_message_has_a_row_in_every_stored_phase() -> None:
    """The peer's messages never fall through: an illegal one is a row (RFC 5043 6.1) like the rest."""
    from model.ddp.session import TRANSITIONS, SessionInput

    messages = [i for i in SessionInput if not i.name.startswith("USER_")]
    phases = [p for p in SessionPhase if p is not SessionPhase.CLOSING]
    missing = [(p, m) for p in phases for m in messages if (p, m) not in TRANSITIONS]
    assert not missing, missing


def test_a_user_call_without_a_row_raises_a_typed_transition_error() -> None:
    """accept() while our own Initiate waits for its answer has no row: SessionTransitionError, which is
    both the session's SessionStateError and the model's TransitionError, naming phase and call."""
    from model.ddp.session import SessionInput, SessionTransitionError
    from model.errors import TransitionError

    a = DdpSessions()
    a.initiate(1)
    with pytest.raises(SessionTransitionError) as raised:
        a.accept(1)
    assert isinstance(raised.value, TransitionError) and isinstance(raised.value, SessionStateError)
    assert (raised.value.state, raised.value.trigger) == (SessionPhase.INITIATING, SessionInput.USER_ACCEPT)
    a.terminate(1)
    with pytest.raises(SessionTransitionError):
        a.send_segment(1, b"after the final message")  # RFC 5043 6.2: nothing follows our Terminate

"""Unrecognized INIT and INIT ACK parameters, RFC 4960 3.2.1, 3.2.2, 3.3.3 and 3.3.10.8.

A parameter type's upper two bits say what a receiver that does not know
the type does: 00 stop processing the chunk's parameters, 01 stop and
report, 10 skip, 11 skip and report.  "In all four cases, an INIT ACK or
COOKIE ECHO chunk is sent.  In the 00 or 01 case, the processing of the
parameters after the unknown parameter is canceled" (3.2.1).  The report of
an INIT's parameter is an Unrecognized Parameter parameter (type 8) in the
INIT ACK, holding the parameter "complete with Parameter Type, Length, and
Value fields" (3.2.2, 3.3.3); the report of an INIT ACK's parameter is an
ERROR chunk with the Unrecognized Parameters cause (code 8) bundled with the
COOKIE ECHO, which comes first (3.2.2, 3.3.10.8).

The packets come from the model's codec; the INIT ACK and the COOKIE ECHO
packet the model answers with are read back with scapy, an independent
decoder.
"""

from __future__ import annotations

import random
import struct

from scapy.layers.sctp import (
    SCTP,
    SCTPChunkCookieEcho,
    SCTPChunkError,
    SCTPChunkInitAck,
    SCTPChunkParamStateCookie,
    SCTPChunkParamUnrocognizedParam,
)

from model.sctp.association import Association, AssociationState
from model.sctp.config import AssociationConfig
from model.sctp.events import AssociationEstablished
from model.sctp.listener import Listener
from model.sctp.packet import (
    AdaptationLayerIndication,
    CookieEchoChunk,
    ErrorCauseCode,
    ErrorChunk,
    InitAckChunk,
    InitChunk,
    Parameter,
    SctpPacket,
    StateCookieParameter,
)

CLIENT_PORT, SERVER_PORT = 5000, 6000
SECRET = bytes(range(32))

FORWARD_TSN_SUPPORTED = Parameter(0xC000)
"""RFC 3758 3.1, as usrsctp's INIT carries it: upper bits 11, skip and report; four bytes on the wire."""
FORWARD_TSN_SUPPORTED_BYTES = bytes.fromhex("c0000004")
SUPPORTED_EXTENSIONS = Parameter(0x8008, bytes([0xC0, 0x82]))
"""RFC 5061 4.2.7: upper bits 10, skip silently."""
STOP_AND_REPORT = Parameter(0x4ABC, b"\x01\x02\x03")
"""An unassigned type with upper bits 01; its value of 3 bytes makes a 7-byte parameter (plus padding)."""
STOP_AND_REPORT_BYTES = bytes.fromhex("4abc0007010203")
STOP_SILENTLY = Parameter(0x3ABC, b"\xff" * 4)
"""An unassigned type with upper bits 00."""
DDP_INDICATION = AdaptationLayerIndication(code_point=1)


def config(local: int, peer: int, seed: int) -> AssociationConfig:
    return AssociationConfig(local_port=local, peer_port=peer, rng=random.Random(seed), hmac_secret=SECRET)


def init_packet(*parameters: Parameter | AdaptationLayerIndication) -> bytes:
    init = InitChunk(initiate_tag=0x1234_5678, a_rwnd=65536, outbound_streams=8, inbound_streams=8,
                     initial_tsn=100, parameters=parameters)
    return SctpPacket(CLIENT_PORT, SERVER_PORT, 0, (init,)).encode()


def answer_to_init(*parameters: Parameter | AdaptationLayerIndication) -> tuple[Listener, bytes]:
    """A Listener's INIT ACK packet for an INIT carrying `parameters`."""
    listener = Listener(config(SERVER_PORT, 0, 2))
    listener.receive(init_packet(*parameters), 0.0)
    [reply] = listener.data_to_send(0.0)
    return listener, reply


def unrecognized_reports(reply: bytes) -> list[bytes]:
    """The value of every Unrecognized Parameter (type 8) in the INIT ACK, as scapy decodes it."""
    init_ack = SCTP(reply)[SCTPChunkInitAck]
    return [bytes(p.param) for p in init_ack.params if isinstance(p, SCTPChunkParamUnrocognizedParam)]


def peer_adaptation_after_cookie(listener: Listener, reply: bytes) -> int | None:
    """Complete the handshake with the INIT ACK's cookie: the adaptation code point the new association
    took from the INIT (None: it processed no indication)."""
    ack = SctpPacket.decode(reply)
    echo = SctpPacket(CLIENT_PORT, SERVER_PORT, ack.chunks[0].initiate_tag,
                      (CookieEchoChunk(cookie=ack.chunks[0].state_cookie),)).encode()
    listener.receive(echo, 0.1)
    [accepted] = listener.next_events()
    [established] = [e for e in accepted.association.next_events() if isinstance(e, AssociationEstablished)]
    return established.peer_adaptation_code_point


# -- an INIT's parameters: reported in the INIT ACK ------------------------------------------------


def test_forward_tsn_supported_in_init_is_reported_in_the_init_ack_and_processing_goes_on() -> None:
    """Upper bits 11: the INIT ACK carries one Unrecognized Parameter holding exactly the four bytes
    C0 00 00 04; the Adaptation Layer Indication after it is still processed (skip, continue)."""
    listener, reply = answer_to_init(FORWARD_TSN_SUPPORTED, DDP_INDICATION)
    assert unrecognized_reports(reply) == [FORWARD_TSN_SUPPORTED_BYTES]
    init_ack = SCTP(reply)[SCTPChunkInitAck]
    assert any(isinstance(p, SCTPChunkParamStateCookie) for p in init_ack.params)
    assert peer_adaptation_after_cookie(listener, reply) == 1


def test_a_skip_type_in_init_is_ignored_without_a_report() -> None:
    """Upper bits 10: no Unrecognized Parameter; the indication after it is processed."""
    listener, reply = answer_to_init(SUPPORTED_EXTENSIONS, DDP_INDICATION)
    assert unrecognized_reports(reply) == []
    assert peer_adaptation_after_cookie(listener, reply) == 1


def test_a_stop_and_report_type_in_init_is_reported_and_ends_parameter_processing() -> None:
    """Upper bits 01: the INIT ACK is still sent and reports the parameter (its 7 bytes, no padding);
    the parameters after it are not processed: neither the Forward-TSN-Supported that would have been
    reported nor the Adaptation Layer Indication (the association sees none)."""
    listener, reply = answer_to_init(STOP_AND_REPORT, FORWARD_TSN_SUPPORTED, DDP_INDICATION)
    assert unrecognized_reports(reply) == [STOP_AND_REPORT_BYTES]
    assert peer_adaptation_after_cookie(listener, reply) is None


def test_a_stop_type_in_init_ends_parameter_processing_without_a_report() -> None:
    """Upper bits 00: the INIT ACK is sent with no Unrecognized Parameter; the parameters after the
    unknown one are not processed (the indication is not seen), those before it are."""
    listener, reply = answer_to_init(STOP_SILENTLY, FORWARD_TSN_SUPPORTED, DDP_INDICATION)
    assert unrecognized_reports(reply) == []
    assert peer_adaptation_after_cookie(listener, reply) is None
    listener, reply = answer_to_init(DDP_INDICATION, STOP_SILENTLY)
    assert peer_adaptation_after_cookie(listener, reply) == 1


def test_an_established_association_answers_a_repeated_init_with_the_same_reports() -> None:
    """5.2.2: an association that is up answers an INIT itself; its INIT ACK reports too (3.2.2)."""
    client = Association(config(CLIENT_PORT, SERVER_PORT, 1))
    listener = Listener(config(SERVER_PORT, 0, 2))
    client.connect(0.0)
    [init] = client.data_to_send(0.0)
    listener.receive(init, 0.0)
    [init_ack] = listener.data_to_send(0.0)
    client.receive(init_ack, 0.0)
    [cookie_echo] = client.data_to_send(0.0)
    listener.receive(cookie_echo, 0.0)
    [accepted] = listener.next_events()
    server = accepted.association
    assert server.state is AssociationState.ESTABLISHED
    server.data_to_send(0.0)  # the COOKIE ACK
    server.receive(init_packet(FORWARD_TSN_SUPPORTED, DDP_INDICATION), 1.0)
    [answer] = server.data_to_send(1.0)
    assert unrecognized_reports(answer) == [FORWARD_TSN_SUPPORTED_BYTES]


# -- an INIT ACK's parameters: reported in an ERROR chunk after the COOKIE ECHO ------------------


def cookie_echo_packet(*parameters: Parameter | AdaptationLayerIndication) -> tuple[Association, SctpPacket, SCTP]:
    """A client that sent INIT gets an INIT ACK with `parameters` after its State Cookie; its answer,
    decoded by the model's codec and by scapy."""
    client = Association(config(CLIENT_PORT, SERVER_PORT, 1))
    client.connect(0.0)
    [init_bytes] = client.data_to_send(0.0)
    init = SctpPacket.decode(init_bytes).chunks[0]
    ack = InitAckChunk(initiate_tag=0x0BAD_CAFE, a_rwnd=65536, outbound_streams=8, inbound_streams=8,
                       initial_tsn=7, parameters=(StateCookieParameter(cookie=b"c" * 32),) + parameters)
    client.receive(SctpPacket(SERVER_PORT, CLIENT_PORT, init.initiate_tag, (ack,)).encode(), 0.01)
    [answer] = client.data_to_send(0.01)
    return client, SctpPacket.decode(answer), SCTP(answer)


def test_an_unknown_init_ack_parameter_of_type_11_is_reported_in_an_error_bundled_after_the_cookie_echo() -> None:
    """The ETSI conformance case sctp-e-i-6-5: INIT ACK with parameter 0xC00C of length 5; the answer is
    COOKIE ECHO, then ERROR with one Unrecognized Parameters cause holding that parameter's 5 bytes."""
    unknown = Parameter(0xC00C, b"\x01")
    client, packet, decoded = cookie_echo_packet(unknown, DDP_INDICATION)
    assert [type(c) for c in packet.chunks] == [CookieEchoChunk, ErrorChunk]
    [cause] = packet.chunks[1].causes
    assert cause.code == ErrorCauseCode.UNRECOGNIZED_PARAMETERS == 8
    assert cause.value == bytes.fromhex("c00c000501")
    assert decoded.haslayer(SCTPChunkCookieEcho) and decoded.haslayer(SCTPChunkError)
    error_causes = bytes(decoded[SCTPChunkError].error_causes)
    assert struct.unpack("!HH", error_causes[:4]) == (8, 4 + 5)
    assert error_causes[4:9] == bytes.fromhex("c00c000501")
    assert client.peer_adaptation_code_point == 1  # skipped, processing went on


def test_an_unknown_init_ack_parameter_of_type_10_gets_no_error() -> None:
    client, packet, _ = cookie_echo_packet(SUPPORTED_EXTENSIONS, DDP_INDICATION)
    assert [type(c) for c in packet.chunks] == [CookieEchoChunk]
    assert client.peer_adaptation_code_point == 1


def test_an_unknown_init_ack_parameter_of_type_01_is_reported_and_ends_processing() -> None:
    """The COOKIE ECHO still goes (3.2.1), with the ERROR reporting the parameter; the indication after it
    is not processed, so the client sees no DDP adaptation (RFC 5043 11.1 row NONE)."""
    client, packet, decoded = cookie_echo_packet(STOP_AND_REPORT, DDP_INDICATION)
    assert [type(c) for c in packet.chunks] == [CookieEchoChunk, ErrorChunk]
    assert packet.chunks[1].causes[0].value == STOP_AND_REPORT_BYTES
    assert client.peer_adaptation_code_point is None
    assert client.state is AssociationState.COOKIE_ECHOED


def test_an_unknown_init_ack_parameter_of_type_00_ends_processing_silently() -> None:
    client, packet, _ = cookie_echo_packet(STOP_SILENTLY, DDP_INDICATION)
    assert [type(c) for c in packet.chunks] == [CookieEchoChunk]
    assert client.peer_adaptation_code_point is None


def test_the_retransmitted_cookie_echo_goes_without_the_error() -> None:
    """The ERROR reports the INIT ACK once; T1-cookie resends the COOKIE ECHO alone (5.1 C)."""
    client, _, _ = cookie_echo_packet(FORWARD_TSN_SUPPORTED)
    expiry = client.next_timeout()
    client.handle_timeout(expiry)
    [again] = client.data_to_send(expiry)
    assert [type(c) for c in SctpPacket.decode(again).chunks] == [CookieEchoChunk]


def test_an_unrecognized_parameter_parameter_round_trips_through_the_codec() -> None:
    """Type 8 wraps one whole parameter; scapy reads the same bytes the codec wrote."""
    _, reply = answer_to_init(STOP_AND_REPORT)
    ack = SctpPacket.decode(reply).chunks[0]
    reports = [p for p in ack.parameters if p.param_type == 8]
    assert len(reports) == 1 and reports[0].parameter == Parameter(0x4ABC, b"\x01\x02\x03")
    assert [bytes(p.param) for p in SCTP(reply)[SCTPChunkInitAck].params
            if isinstance(p, SCTPChunkParamUnrocognizedParam)] == [reports[0].encode()[4:11]]

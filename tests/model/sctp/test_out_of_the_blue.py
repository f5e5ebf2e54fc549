"""RFC 4960 8.4 rule 3: an INIT that no listener can process is answered with an ABORT.

RFC 4960 8.4 (3): "If the packet contains an INIT chunk with a Verification
Tag set to '0', process it as described in Section 5.1.  If, for whatever
reason, the INIT cannot be processed normally and an ABORT has to be sent in
response, the Verification Tag of the packet containing the ABORT chunk MUST
be the Initiate Tag of the received INIT chunk, and the T bit of the ABORT
chunk has to be set to 0, indicating that the Verification Tag is NOT
reflected."  An endpoint with nothing listening cannot process an INIT, so the
initiator hears of it within one round trip (as a TCP SYN to a closed port
meets a RST) instead of retransmitting its INIT until Max.Init.Retransmits
(5.1 C).  The ABORT carries the initiator's own tag with T=0, which is what
its COOKIE-WAIT state accepts (8.5.1 B).
"""

from __future__ import annotations

import random

from model.sctp.association import Association
from model.sctp.config import AssociationConfig
from model.sctp.events import AssociationAborted
from model.sctp.out_of_the_blue import out_of_the_blue_reply
from model.sctp.packet import AbortChunk, DataChunk, InitChunk, SctpPacket
from model.sctp.state import AssociationState

CLIENT_PORT, SERVER_PORT = 5000, 6000
INITIATE_TAG = 0x1234_5678


def init_packet(tag: int = 0, *extra) -> SctpPacket:
    init = InitChunk(initiate_tag=INITIATE_TAG, a_rwnd=65536, outbound_streams=8, inbound_streams=8, initial_tsn=7)
    return SctpPacket(CLIENT_PORT, SERVER_PORT, tag, (init, *extra))


def test_rfc4960_8_4_rule_3_an_init_nobody_listens_for_gets_an_abort_with_its_initiate_tag_t_bit_0():
    reply = out_of_the_blue_reply(init_packet())
    assert reply is not None
    assert (reply.src_port, reply.dst_port) == (SERVER_PORT, CLIENT_PORT)
    assert reply.verification_tag == INITIATE_TAG
    assert reply.chunks == (AbortChunk(tag_reflected=False),)


def test_rfc4960_8_5_1_a_an_init_not_alone_or_with_a_tag_is_discarded_not_answered():
    """8.5.1 A: an INIT travels alone in a packet whose Verification Tag is 0; any other is discarded."""
    assert out_of_the_blue_reply(init_packet(tag=99)) is None
    data = DataChunk(tsn=1, stream_id=0, ssn=0, ppid=16, user_data=b"x")
    assert out_of_the_blue_reply(init_packet(0, data)) is None


def test_rfc4960_8_4_rule_3_the_initiator_is_aborted_within_one_round_trip():
    """The ABORT (own tag, T=0) ends the initiator's COOKIE-WAIT at once: no INIT is retransmitted, no timer
    is left (instead of giving up after Max.Init.Retransmits, 5.1 C, 333 s at the defaults)."""
    client = Association(AssociationConfig(local_port=CLIENT_PORT, peer_port=SERVER_PORT, rng=random.Random(1)))
    client.connect(0.0)
    (init_bytes,) = client.data_to_send(0.0)
    reply = out_of_the_blue_reply(SctpPacket.decode(init_bytes))
    assert reply is not None and reply.verification_tag == client.local_tag
    client.receive(reply.encode(), 0.001)
    assert [type(event) for event in client.next_events()] == [AssociationAborted]
    assert client.state is AssociationState.CLOSED
    assert client.next_timeout() is None and client.data_to_send(3.0) == []

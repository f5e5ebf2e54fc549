"""The transmit engine's model with its transport unit (`write_transport`): the peer's SACKs and the timers
decide what leaves, as RFC 4960 says, with no ACK, RESEND or LIMIT from the host.

The expectations are the RFC's arithmetic, not the unit's output: the initial cwnd of 7.2.1 at a 1480-byte
MTU (4380 bytes) lets four chunks start when each is counted at the largest chunk (1452 bytes: the unit's
documented rule for 6.1 B); T3-rtx (6.3.3) resends the earliest chunk byte for byte; three miss indications
(7.2.4) fast-retransmit it; Association.Max.Retrans (8.1) stops the row. Frames are read back by scapy.
"""

import pytest

from abi.tx import TsnOpcode, WorkOpcode
from model.engine.transport import AssociationFailure, ProtocolViolation, RTO_INITIAL_TICKS
from model.engine.tx import Completion, RefusedTsn, TransportStopped, WorkRequest, ticks_at
from model.sctp.packet import SackChunk
from tests.model.engine.test_tx import engine, tsn, tsns, write

WINDOW = 65536
SEGMENT = 46   # payload bytes of a tagged segment at the tests' MULPDU (60)


def transported(**parameters):
    model, memory = engine()
    model.write_transport(0, WINDOW, **parameters)
    return model, memory


def sack(cumulative: int, blocks=(), a_rwnd: int = WINDOW) -> SackChunk:
    return SackChunk(cumulative & 0xFFFFFFFF, a_rwnd, tuple(blocks))


def test_the_initial_window_lets_four_chunks_start():
    """RFC 4960 7.2.1: cwnd = min(4 * 1480, max(2 * 1480, 4380)) = 4380 bytes; 6.1 B with every chunk not yet
    sent counted at 1452 bytes: ceil(4380 / 1452) = 4 chunks, the rest of the Write waits."""
    model, _ = transported()
    model.post_work(write(SEGMENT * 10))
    assert tsns(model.data_to_send()) == [tsn(n) for n in range(4)]
    assert model.data_to_send() == [] and model.waiting()


def test_a_sack_retires_completes_and_releases_more():
    """RFC 4960 6.2.1 D: the Cumulative TSN Ack retires the chunks up to it; RFC 5041 5.4: the Write
    completes once its last chunk is covered, not before; the window opened lets the rest go."""
    model, _ = transported()
    model.post_work(write(SEGMENT * 6, wr_id=7))
    assert tsns(model.data_to_send(now=1)) == [tsn(n) for n in range(4)]
    model.peer_sack(0, sack(tsn(1)), now=2)
    assert model.next_events() == []
    assert tsns(model.data_to_send(now=2)) == [tsn(4), tsn(5)]
    model.peer_sack(0, sack(tsn(4)), now=3)
    assert model.next_events() == []
    model.peer_sack(0, sack(tsn(5)), now=3)
    assert model.next_events() == [Completion(7, WorkOpcode.RDMA_WRITE, 0)]
    assert model.transport.state(0).cumulative_tsn_ack == tsn(5)


def test_a_stale_sack_changes_nothing():
    """RFC 4960 6.2.1 D i: a SACK whose Cumulative TSN Ack is below the one already taken is dropped."""
    model, _ = transported()
    model.post_work(write(SEGMENT * 2, wr_id=3))
    model.data_to_send()
    model.peer_sack(0, sack(tsn(0)), now=1)
    model.peer_sack(0, sack(tsn(-1)), now=1)
    assert model.transport.state(0).cumulative_tsn_ack == tsn(0) and model.next_events() == []


def test_t3_rtx_resends_the_earliest_chunk_byte_for_byte():
    """RFC 4960 6.3.3 E3: when T3-rtx expires (RTO.Initial, 3 s, after the first chunk left) the earliest
    outstanding chunk goes again, its payload read again, the same bytes; nothing before."""
    model, _ = transported()
    model.post_work(write(SEGMENT * 2))
    first = model.data_to_send(now=10)
    model.tick(10 + RTO_INITIAL_TICKS - 1)
    assert model.data_to_send(now=10 + RTO_INITIAL_TICKS - 1) == []
    model.tick(10 + RTO_INITIAL_TICKS)
    assert model.data_to_send(now=10 + RTO_INITIAL_TICKS) == [first[0]]


def test_three_miss_indications_fast_retransmit_the_chunk():
    """RFC 4960 7.2.4: the first chunk lost, the SACKs' Gap Ack Blocks report the second, third and fourth in
    turn; the third miss indication resends the first chunk at once, byte for byte."""
    model, _ = transported()
    model.post_work(write(SEGMENT * 4))
    frames = model.data_to_send(now=1)
    assert tsns(frames) == [tsn(n) for n in range(4)]
    for end in (2, 3):
        model.peer_sack(0, sack(tsn(-1), [(2, end)]), now=2)
        assert model.data_to_send(now=2) == []
    model.peer_sack(0, sack(tsn(-1), [(2, 4)]), now=2)
    assert model.data_to_send(now=2) == [frames[0]]


def test_past_max_retrans_the_row_stops_and_the_host_hears_of_it():
    """RFC 4960 8.1: with Association.Max.Retrans 1, the second T3-rtx expiry in a row (RTO doubled by
    6.3.3 E2) stops the association; no new chunk leaves."""
    model, _ = transported(max_retrans=1)
    model.post_work(write(SEGMENT * 6))
    model.data_to_send(now=0)
    model.tick(RTO_INITIAL_TICKS)
    assert len(model.data_to_send(now=RTO_INITIAL_TICKS)) == 1
    assert model.next_events() == []
    model.tick(RTO_INITIAL_TICKS * 3)
    events = model.next_events()
    assert len(events) == 1 and isinstance(events[0], TransportStopped)
    assert isinstance(events[0].record, AssociationFailure) and events[0].record.error_count == 2
    assert model.data_to_send(now=RTO_INITIAL_TICKS * 3) == []


def test_a_sack_of_a_tsn_never_sent_stops_the_row():
    """A Cumulative TSN Ack past the highest TSN sent: the host aborts (RFC 4960 6.2.1 leaves it to the
    implementation; the host's SCTP aborts with a Protocol Violation)."""
    model, _ = transported()
    model.post_work(write(SEGMENT))
    model.data_to_send()
    model.peer_sack(0, sack(tsn(5)), now=1)
    event, = model.next_events()
    assert event == TransportStopped(ProtocolViolation(0, tsn(5), tsn(0)))


def test_the_hosts_tsn_requests_are_refused_while_the_transport_holds_the_row():
    model, _ = transported()
    model.post_work(write(SEGMENT * 2))
    model.data_to_send()
    for opcode in (TsnOpcode.ACK, TsnOpcode.RESEND, TsnOpcode.LIMIT):
        model.tsn_request(opcode, 0, tsn(0))
    assert model.next_events() == [RefusedTsn(opcode, 0, tsn(0))
                                   for opcode in (TsnOpcode.ACK, TsnOpcode.RESEND, TsnOpcode.LIMIT)]


def test_the_transport_takes_a_row_with_nothing_outstanding():
    model, _ = engine()
    with pytest.raises(ValueError, match="has no transport"):
        model.peer_sack(0, sack(tsn(0)), now=0)
    model.post_work(write(SEGMENT))
    model.data_to_send()
    with pytest.raises(ValueError, match="1 chunks unacknowledged"):
        model.write_transport(0, WINDOW)


def test_ticks_count_from_time_zero():
    """The unit's tick: 2**17 cycles of 156.25 MHz (0.8389 ms)."""
    assert [ticks_at(t) for t in (0.0, 0.000838, 0.000839, 1.0)] == [0, 0, 1, 1192]


def test_a_read_request_chunk_counts_its_whole_segment():
    """A Read Request's chunk counts as its user data: the DDP-SSN (RFC 5043 5.2.2), the 18-byte untagged DDP
    header (RFC 5041 4.3) and the 28-byte Read Request (RFC 5040 4.4)."""
    model, _ = transported()
    model.post_work(WorkRequest(WorkOpcode.RDMA_READ_REQUEST, 0, 1, 0, 4096, stag=5, to=0, sink_stag=6,
                                sink_to=0, wr_id=9))
    frame, = model.data_to_send(now=0)
    chunk, = model.transport.chunks(0)
    assert chunk.size == 2 + 18 + 28

"""The transmit engine's model (model/engine/tx.py) on its own: what it sends, holds, resends and completes.

Every frame is read back by scapy (an independent decoder): DATA chunks with
U = B = E = 1 and PPID 16 (RFC 5043 9, 10), TSNs one apart per association
(RFC 4960 6.1), the DDP header's fields (RFC 5041 4). The RTL is compared with
this model in tests/hdl/tx/.
"""

import pytest
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether
from scapy.layers.sctp import SCTP, SCTPChunkData

from abi.tx import READ_RESPONSE_OPCODE, ControlOpcode, TsnOpcode, WorkOpcode
from model.ddp.memory import SparseMemory
from model.engine.tx import (
    Completion, ControlRequest, ReadResponseRequest, RefusedRead, RefusedTsn, TransmitConfig, TransmitEngineModel,
    TxAssociationRow, WorkRequest,
)
from model.sctp.packet import SackChunk, encode_chunks

MULPDU = 60            # 46 payload bytes a tagged segment, 42 an untagged one (RFC 5041 5.2)
FIRST_TSN = 0xFFFFFFFE  # the TSN wraps within a few chunks


def engine(ring_tsns: int = 64, ird: int = 4) -> tuple[TransmitEngineModel, SparseMemory]:
    memory = SparseMemory()
    memory.write(0x1000, bytes(range(256)) * 16)
    model = TransmitEngineModel(TransmitConfig(bytes.fromhex("02000000000a"), "10.0.0.2", ring_tsns=ring_tsns,
                                               ird=ird), memory)
    model.write_association(TxAssociationRow(0, bytes.fromhex("02000000000b"), "10.0.0.1", 5000, 6000, 0xA1B2C3D4,
                                             MULPDU, FIRST_TSN))
    model.write_stream(0, 1, 1)
    return model, memory


def write(length: int, wr_id: int = 1, to: int = 0) -> WorkRequest:
    return WorkRequest(WorkOpcode.RDMA_WRITE, 0, 1, 0x1003, length, stag=0x77, to=to, wr_id=wr_id)


def data(frame: bytes) -> SCTPChunkData:
    packet = Ether(frame)
    assert packet[IP].dst == "10.0.0.1" and packet[SCTP].tag == 0xA1B2C3D4
    chunk = packet[SCTPChunkData]
    assert (chunk.unordered, chunk.beginning, chunk.ending, chunk.stream_id) == (1, 1, 1, 1)
    return chunk


def tsns(frames) -> list[int]:
    return [data(frame).tsn for frame in frames]


def tsn(n: int) -> int:
    return (FIRST_TSN + n) & 0xFFFFFFFF


def test_a_write_is_segmented_and_numbered():
    """RFC 5041 5.2: 100 bytes at 46 a segment are three segments, the TO advancing by each one's payload;
    RFC 4960 6.1: consecutive TSNs across the wrap; RFC 5043 5.2.1: DDP-SSN from the stream's first."""
    model, memory = engine()
    model.post_work(write(100, to=0x500))
    frames = model.data_to_send()
    assert tsns(frames) == [tsn(0), tsn(1), tsn(2)]
    for index, frame in enumerate(frames):
        user_data = bytes(data(frame).data)
        assert int.from_bytes(user_data[:2], "big") == 1 + index                 # DDP-SSN
        ddp = user_data[2:]
        assert ddp[0] & 0x80 and bool(ddp[0] & 0x40) == (index == 2)            # T = 1, L on the last
        assert int.from_bytes(ddp[2:6], "big") == 0x77                          # STag
        assert int.from_bytes(ddp[6:14], "big") == 0x500 + 46 * index            # TO
        assert ddp[14:] == memory.read(0x1003 + 46 * index, min(46, 100 - 46 * index))
    assert data(frames[0]).proto_id == 16
    assert model.next_events() == [] and not model.waiting()


def test_the_last_chunk_of_a_work_request_asks_for_its_sack_at_once_rfc9260_3_3_1():
    """RFC 9260 3.3.1 (RFC 7053 4): the I bit on the last DATA chunk of a Write, a Send and a Read Request
    (their completions wait for the SACK that covers them), on no other chunk, and not on a Read Response's
    last (scapy's ``delay_sack`` is the I bit)."""
    model, _ = engine()
    model.post_work(write(100))
    model.post_work(WorkRequest(WorkOpcode.SEND, 0, 1, 0x1003, 50, wr_id=2))
    model.post_work(WorkRequest(WorkOpcode.RDMA_READ_REQUEST, 0, 1, 0, 64, stag=0x12, to=0, sink_stag=0x34,
                                sink_to=0, wr_id=3))
    model.tsn_request(TsnOpcode.LIMIT, 0, tsn(20))
    assert model.post_read_response(ReadResponseRequest(0, 1, 0x1000, 60, sink_stag=0x40, sink_to=0, msn=1))
    frames = model.data_to_send()
    ddp_last = [bool(bytes(data(frame).data)[2] & 0x40) for frame in frames]
    opcodes = [bytes(data(frame).data)[3] & 0x0F for frame in frames]
    flags = [data(frame).delay_sack for frame in frames]
    assert len(frames) == 3 + 2 + 1 + 2 and ddp_last.count(True) == 4
    assert flags == [int(last and opcode != READ_RESPONSE_OPCODE) for last, opcode in zip(ddp_last, opcodes)]
    assert sum(flags) == 3


def test_the_limit_holds_new_chunks_and_a_row_write_lifts_it():
    """RFC 4960 6.1 A, B through LIMIT: chunks up to the limit leave (serial arithmetic across the wrap), the
    next waits and with it the message behind; a resend of a held row still leaves; raising the limit lets
    the rest go; a row write forgets it."""
    model, _ = engine()
    model.tsn_request(TsnOpcode.LIMIT, 0, tsn(-1))       # below the first TSN: nothing new
    model.post_work(write(100))
    model.post_work(write(10, wr_id=2))
    assert model.data_to_send() == []
    model.tsn_request(TsnOpcode.LIMIT, 0, tsn(1))        # 0xFFFFFFFF: two chunks
    first = model.data_to_send()
    assert tsns(first) == [tsn(0), tsn(1)]
    model.tsn_request(TsnOpcode.RESEND, 0, tsn(0))
    assert model.data_to_send() == [first[0]]
    model.tsn_request(TsnOpcode.LIMIT, 0, tsn(3))
    assert tsns(model.data_to_send()) == [tsn(2), tsn(3)]
    model.write_association(TxAssociationRow(0, bytes.fromhex("02000000000b"), "10.0.0.1", 5000, 6000, 0xA1B2C3D4,
                                             MULPDU, 7))
    model.post_work(write(100, wr_id=3))
    assert tsns(model.data_to_send()) == [7, 8, 9]


def test_a_full_ring_waits_for_an_ack_and_acks_complete_in_tsn_order():
    """Four TSNs in the ring: a 6-segment Write sends four and waits; an ACK of two lets two more go; the
    ACK of everything completes the Write and the Send behind it (RFC 5041 5.4: only once the last chunk is
    acknowledged), the Read Request not (it completes on the receive side). An ACK below the last changes
    nothing; one past the last chunk sent retires what was sent."""
    model, _ = engine(ring_tsns=4)
    model.post_work(write(46 * 6))
    model.post_work(WorkRequest(WorkOpcode.RDMA_READ_REQUEST, 0, 1, 0, 4096, stag=5, to=0, sink_stag=6,
                                sink_to=0, wr_id=9))
    model.post_work(WorkRequest(WorkOpcode.SEND, 0, 1, 0x1000, 5, wr_id=2))
    assert tsns(model.data_to_send()) == [tsn(n) for n in range(4)]
    model.tsn_request(TsnOpcode.ACK, 0, tsn(1))
    assert model.next_events() == []
    assert tsns(model.data_to_send()) == [tsn(4), tsn(5)]
    model.tsn_request(TsnOpcode.ACK, 0, tsn(5))
    assert model.next_events() == [Completion(1, WorkOpcode.RDMA_WRITE, 0)]
    assert tsns(model.data_to_send()) == [tsn(6), tsn(7)]
    model.tsn_request(TsnOpcode.ACK, 0, tsn(3))
    model.tsn_request(TsnOpcode.ACK, 0, tsn(40))
    assert model.next_events() == [Completion(2, WorkOpcode.SEND, 0)]
    model.post_work(write(1, wr_id=4))
    assert tsns(model.data_to_send()) == [tsn(8)]


def test_resends_outside_the_ring_are_refused():
    model, _ = engine()
    model.post_work(write(50))
    frames = model.data_to_send()
    model.tsn_request(TsnOpcode.ACK, 0, tsn(0))
    for number in (tsn(0), tsn(2), tsn(-5)):
        model.tsn_request(TsnOpcode.RESEND, 0, number)
    model.tsn_request(TsnOpcode.RESEND, 0, tsn(1))
    assert model.next_events() == [RefusedTsn(TsnOpcode.RESEND, 0, n) for n in (tsn(0), tsn(2), tsn(-5))]
    assert model.data_to_send() == [frames[1]]


def test_read_requests_beyond_ird_are_refused_until_a_response_is_sent():
    """RFC 6581 4.1: IRD 2 per stream; a third request while two wait is refused, once the first response is
    sent one is taken again; the responses go out in order (RFC 5040 5.5) as tagged Read Responses."""
    model, memory = engine(ird=2)
    model.tsn_request(TsnOpcode.LIMIT, 0, tsn(-1))
    requests = [ReadResponseRequest(0, 1, 0x1000 + 10 * n, 30, sink_stag=0x40 + n, sink_to=n << 32, msn=n + 1)
                for n in range(4)]
    assert [model.post_read_response(r) for r in requests[:3]] == [True, True, False]
    assert model.next_events() == [RefusedRead(requests[2])]
    model.tsn_request(TsnOpcode.LIMIT, 0, tsn(0))
    assert len(model.data_to_send()) == 1
    assert model.post_read_response(requests[3])
    model.tsn_request(TsnOpcode.LIMIT, 0, tsn(10))
    frames = model.data_to_send()
    for frame, request in zip(frames, (requests[1], requests[3])):
        ddp = bytes(data(frame).data)[2:]
        assert ddp[1] & 0x0F == READ_RESPONSE_OPCODE and ddp[0] & 0xC0 == 0xC0     # tagged, last
        assert int.from_bytes(ddp[2:6], "big") == request.sink_stag
        assert int.from_bytes(ddp[6:14], "big") == request.sink_to
        assert ddp[14:] == memory.read(request.host_address, 30)


def test_control_goes_ahead_of_responses_and_work_between_messages():
    """A Write under way is finished first; then the control packet (no TSN), the session-control message
    (the next TSN, PPID 17), the Read Response, and the waiting Write last."""
    model, memory = engine()
    sack = encode_chunks([SackChunk(123, 4096, (), ())])
    memory.write(0x3000, sack)
    memory.write(0x3100, b"\x40\x01\x00\x00")
    model.tsn_request(TsnOpcode.LIMIT, 0, tsn(0))
    model.post_work(write(60, wr_id=1))
    model.post_work(write(10, wr_id=2))
    model.post_read_response(ReadResponseRequest(0, 1, 0x1000, 8, sink_stag=3))
    model.post_control(ControlRequest(ControlOpcode.SESSION_CONTROL, 0, 0x3100, 4, stream_id=1, wr_id=5))
    model.post_control(ControlRequest(ControlOpcode.PACKET, 0, 0x3000, len(sack), tag=0x55))
    assert tsns(model.data_to_send()) == [tsn(0)]
    model.tsn_request(TsnOpcode.LIMIT, 0, tsn(10))
    frames = model.data_to_send()
    assert tsns(frames[:1]) == [tsn(1)]                                          # the Write finished first
    session, control = Ether(frames[1]), Ether(frames[2])
    assert session[SCTPChunkData].proto_id == 17 and session[SCTPChunkData].tsn == tsn(2)
    assert control[SCTP].tag == 0x55 and control[SCTP].payload.type == 3        # a SACK, no TSN taken
    assert [bytes(data(f).data)[3] & 0x0F for f in frames[3:]] == [READ_RESPONSE_OPCODE, WorkOpcode.RDMA_WRITE]
    assert tsns(frames[3:]) == [tsn(3), tsn(4)]


def test_requests_name_rows_and_streams_that_exist():
    model, _ = engine()
    with pytest.raises(ValueError, match="stream 4 not below 4"):
        model.post_work(WorkRequest(WorkOpcode.SEND, 0, 4, 0x1000, 1))
    with pytest.raises(ValueError, match="row 1 was never written"):
        model.tsn_request(TsnOpcode.ACK, 1, 0)

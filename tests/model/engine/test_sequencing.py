"""DDP-SSN order in the receive engine's model: duplicates, reordering, the window (RFC 5043 6.1, 10;
RFC 5041 5.3, 5.4), checked against the RFC's rules and against the protocol model's DdpSink; a record
per segment (``segment_reports``), and per message (its reset value)."""

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from abi.rx import SEQUENCE_WINDOW
from model.ddp.memory import Access, MemoryRegion, MemoryTable, ProtectionDomain, SparseMemory
from model.ddp.sctp_adaptation import DdpSegmentChunkData
from model.ddp.segment import TaggedHeader, UntaggedHeader
from model.ddp.sink import DdpSink, Delivered
from model.engine.config import ReceiveConfig
from model.engine.rx import ReceiveEngineModel, SegmentStatus
from model.net.frames import build_frame
from model.rdmap.messages import Opcode, tagged_rsvd_ulp, untagged_rsvd_ulp
from model.sctp.packet import DataChunk, SctpPacket
from sim.samples import SAMPLE_CONFIG

LOCAL_MAC, PEER_MAC = bytes.fromhex("020000000002"), bytes.fromhex("020000000001")
TAG = 0x5E6F7080
SEND_BUFFERS = (0x60000, 0x61000, 0x62000, 0x63000)  # QN 0 of stream (0, 0), 4096 bytes each, MSN 1..4


def engine(segment_reports: bool = True) -> ReceiveEngineModel:
    """The sample configuration's engine, by default with a record per segment (the order is the subject)."""
    config = ReceiveConfig.from_json(SAMPLE_CONFIG.read_text())
    return ReceiveEngineModel(replace(config, segment_reports=segment_reports))


def segment_frame(ssn: int, segment: bytes, tsn: int = 1) -> bytes:
    chunk = DataChunk(tsn, 0, 0, 16, DdpSegmentChunkData(ssn, segment).encode(), unordered=True)
    return build_frame(SctpPacket(5001, 5002, TAG, [chunk]).encode(), PEER_MAC, LOCAL_MAC, "10.0.0.1", "10.0.0.2")


def send_segment(msn: int, mo: int, payload: bytes, last: bool, qn: int = 0) -> bytes:
    opcode = Opcode.RDMA_READ_REQUEST if qn == 1 else Opcode.SEND   # RFC 5040 4.2: the opcode's queue
    return UntaggedHeader(last, untagged_rsvd_ulp(opcode), qn, msn, mo).encode() + payload


def write_segment(to: int, payload: bytes, last: bool = True) -> bytes:
    return TaggedHeader(last, tagged_rsvd_ulp(Opcode.RDMA_WRITE), 0x0142, 0x8000 + to).encode() + payload


def feed(model: ReceiveEngineModel, frames: list[bytes]):
    """Every frame in turn; the records of each (in emission order) and every arrival verdict."""
    records, arrivals = [], []
    for frame in frames:
        model.receive(frame, 0.0)
        (result,) = model.next_events()
        records.append(result.segments)
        arrivals += result.arrivals
    return records, arrivals


def message(msn: int, sizes: list[int], rng: random.Random) -> list[tuple[bytes, bytes]]:
    """An untagged Send in segments of `sizes` bytes: (segment, payload) each, MO from 0 (RFC 5041 5.2)."""
    segments, mo = [], 0
    for i, size in enumerate(sizes):
        payload = rng.randbytes(size)
        segments.append((send_segment(msn, mo, payload, i == len(sizes) - 1), payload))
        mo += size
    return segments


def test_a_message_completes_when_its_last_missing_segment_arrives_rfc5041_5_4():
    """The L = 1 segment arrives first: placed at once (5.3), but the message completes (its record
    with L = 1 leaves) only after the other two, records in DDP-SSN order."""
    rng = random.Random(1)
    parts = message(1, [100, 100, 50], rng)
    model = engine()
    frames = [segment_frame(1 + i, segment) for i, (segment, _) in enumerate(parts)]
    records, arrivals = feed(model, [frames[2], frames[0], frames[1]])
    assert [v.status for v in arrivals] == [SegmentStatus.ACCEPTED] * 3
    assert model.memory.read(SEND_BUFFERS[0] + 200, 50) == parts[2][1]  # placed on arrival
    assert [[r.ddp_ssn for r in frame] for frame in records] == [[], [1], [2, 3]]
    last = records[2][-1]
    assert last.last and last.message_length == 250 and last.msn == 1
    assert model.memory.read(SEND_BUFFERS[0], 250) == b"".join(p for _, p in parts)


def test_duplicates_are_dropped_before_placement_and_complete_nothing_rfc5043_10():
    """A retransmitted chunk (its SACK lost), while waiting and after its message completed: DUPLICATE,
    nothing placed again, no second completion."""
    rng = random.Random(2)
    parts = message(1, [10, 10], rng)
    frames = [segment_frame(1 + i, segment) for i, (segment, _) in enumerate(parts)]
    model = engine()
    records, arrivals = feed(model, [frames[1], frames[1], frames[0], frames[0], frames[1]])
    assert [v.status for v in arrivals] == [SegmentStatus.ACCEPTED, SegmentStatus.DUPLICATE,
                                            SegmentStatus.ACCEPTED, SegmentStatus.DUPLICATE,
                                            SegmentStatus.DUPLICATE]
    accepted = [r for frame in records for r in frame if r.status is SegmentStatus.ACCEPTED]
    assert [(r.ddp_ssn, r.last) for r in accepted] == [(1, False), (2, True)]
    assert sum(r.status is SegmentStatus.DUPLICATE for frame in records for r in frame) == 3
    assert model.memory.writes == [(SEND_BUFFERS[0] + 10, 10), (SEND_BUFFERS[0], 10)]


def test_the_window_bounds_the_gap_rfc5043_10():
    """SEQUENCE_WINDOW - 1 DDP-SSNs ahead of the lowest missing one is placed and waits; SEQUENCE_WINDOW
    ahead cannot be explained within the window: INVALID_SSN, nothing placed, the stream ends."""
    model = engine()
    records, arrivals = feed(model, [segment_frame(SEQUENCE_WINDOW, write_segment(0, b"a")),
                                     segment_frame(1 + SEQUENCE_WINDOW, write_segment(1, b"b")),
                                     segment_frame(1, write_segment(2, b"c"))])
    assert [v.status for v in arrivals] == [SegmentStatus.ACCEPTED, SegmentStatus.INVALID_SSN,
                                            SegmentStatus.DROPPED]
    assert model.memory.writes == [(0x40000, 1)]
    assert [[r.status for r in frame] for frame in records] == [[], [SegmentStatus.INVALID_SSN],
                                                                 [SegmentStatus.DROPPED]]


def test_rearm_restarts_delivery_at_first_ssn_and_drops_waiting_records():
    """A new session on the stream (RFC 5043 6.1): delivery from the row's first_ssn; a record left
    waiting by the old session is never released."""
    model = engine()
    records, _ = feed(model, [segment_frame(3, write_segment(0, b"a")), segment_frame(1, write_segment(1, b"b"))])
    assert [[r.ddp_ssn for r in frame] for frame in records] == [[], [1]]
    model.rearm_stream(0, 0, first_ssn=7)
    records, _ = feed(model, [segment_frame(8, write_segment(2, b"c")), segment_frame(7, write_segment(3, b"d")),
                              segment_frame(2, write_segment(4, b"e"))])
    assert [[(r.ddp_ssn, r.status) for r in frame] for frame in records] == [
        [], [(7, SegmentStatus.ACCEPTED), (8, SegmentStatus.ACCEPTED)], [(2, SegmentStatus.DUPLICATE)]]


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), first=st.integers(0, 0xFFFF))
def test_every_order_of_arrival_agrees_with_the_ddp_sink(seed, first):
    """Random messages (Sends in several segments, Writes) on one stream, shuffled within the window and
    with duplicated chunks: the engine's ACCEPTED records are each DDP-SSN once, in DDP-SSN order; its
    completions (L = 1 records) are the protocol model's Delivered messages in the same order; host
    memory ends as in-order arrival leaves it."""
    rng = random.Random(seed)
    segments: list[bytes] = []
    to = 0  # Writes to disjoint places: the memory then ends the same in any order
    for msn in range(1, 5):
        segments += [segment for segment, _ in message(msn, [rng.randrange(1, 300) for _ in range(rng.randrange(1, 4))],
                                                          rng)]
        if rng.random() < 0.5:
            length = rng.randrange(1, 64)
            segments.append(write_segment(to, rng.randbytes(length)))
            to += length + rng.randrange(0, 100)
    ssns = [(first + i) & 0xFFFF for i in range(len(segments))]
    order = list(range(len(segments)))
    rng.shuffle(order)  # fewer segments than the window: any order is within it
    arrivals = [i for i in order for _ in range(1 + (rng.random() < 0.25))]
    config = ReceiveConfig.from_json(SAMPLE_CONFIG.read_text())
    config = type(config)(**{**vars(config), "segment_reports": True, "streams": tuple(
        type(s)(s.association, s.stream_id, s.pd, first) for s in config.streams)})

    model = ReceiveEngineModel(config)
    records, verdicts = feed(model, [segment_frame(ssns[i], segments[i], tsn=i) for i in arrivals])
    accepted = [r for frame in records for r in frame if r.status is SegmentStatus.ACCEPTED]
    assert [r.ddp_ssn for r in accepted] == ssns
    assert sum(v.status is SegmentStatus.DUPLICATE for v in verdicts) == len(arrivals) - len(segments)

    reference = _reference_sink(first)
    delivered = [e for i in arrivals for e in reference.receive(segments[i], ssns[i]) if isinstance(e, Delivered)]
    completions = [r for r in accepted if r.last]
    assert [(d.tagged, d.msn, d.length if not d.tagged else None) for d in delivered] == \
        [(r.tagged, None if r.tagged else r.msn, None if r.tagged else r.message_length) for r in completions]

    in_order = ReceiveEngineModel(config)
    feed(in_order, [segment_frame(ssns[i], segments[i], tsn=i) for i in range(len(segments))])
    for address, length in in_order.memory.writes:
        assert model.memory.read(address, length) == in_order.memory.read(address, length)

    # Per message: the same records less the accepted ones with L = 0 (every message here is on QN 0 or
    # tagged), in the same order; each left out is counted.
    per_message = ReceiveEngineModel(replace(config, segment_reports=False))
    message_records, _ = feed(per_message, [segment_frame(ssns[i], segments[i], tsn=i) for i in arrivals])
    assert message_records == [[r for r in frame if r.status is not SegmentStatus.ACCEPTED or r.last]
                               for frame in records]
    assert per_message.reports_withheld == sum(not r.last for r in accepted) and model.reports_withheld == 0


def test_per_message_reports_leave_one_record_per_message_rfc5041_5_4():
    """Per-message reports (the engine's reset value): a Send in three segments, its L = 1 segment first,
    yields one record, its completion, once the other two have arrived; the two are counted withheld."""
    rng = random.Random(1)
    parts = message(1, [100, 100, 50], rng)
    model = engine(segment_reports=False)
    frames = [segment_frame(1 + i, segment) for i, (segment, _) in enumerate(parts)]
    records, arrivals = feed(model, [frames[2], frames[0], frames[1]])
    assert [v.status for v in arrivals] == [SegmentStatus.ACCEPTED] * 3
    assert [[(r.ddp_ssn, r.last, r.message_length) for r in frame] for frame in records] == [[], [], [(3, True, 250)]]
    assert model.reports_withheld == 2 and model.reports_waiting == 0
    assert model.memory.read(SEND_BUFFERS[0], 250) == b"".join(p for _, p in parts)


def test_per_message_reports_keep_control_queues_and_every_verdict_but_accepted_rfc5040_4_2():
    """Per message, a segment of QN 1 (Read Request) or QN 2 (Terminate) keeps its record even with L = 0,
    and so do a duplicate's and an error's: only accepted QN 0 and tagged middle segments are left out."""
    model = engine(segment_reports=False)
    records, arrivals = feed(model, [
        segment_frame(1, write_segment(0, b"ab", last=False)),     # tagged middle: withheld
        segment_frame(2, send_segment(1, 0, b"x" * 8, False, qn=1)),  # QN 1 middle: kept
        segment_frame(2, send_segment(1, 0, b"x" * 8, False, qn=1)),  # its duplicate: kept
        segment_frame(3, write_segment(2, b"cd")),                  # tagged last: kept
    ])
    assert [v.status for v in arrivals] == [SegmentStatus.ACCEPTED, SegmentStatus.ACCEPTED,
                                            SegmentStatus.DUPLICATE, SegmentStatus.ACCEPTED]
    assert [[(r.ddp_ssn, r.status) for r in frame] for frame in records] == [
        [], [(2, SegmentStatus.ACCEPTED)], [(2, SegmentStatus.DUPLICATE)], [(3, SegmentStatus.ACCEPTED)]]
    assert model.reports_withheld == 1


def _reference_sink(first_ssn: int) -> DdpSink:
    """The protocol model's data sink for the sample stream, nothing of the engine's model."""
    table, pd, memory = MemoryTable(), ProtectionDomain(2), SparseMemory()
    table.register(MemoryRegion(0x0142, pd, 0x8000, 8192, Access.REMOTE_READ | Access.REMOTE_WRITE, 0x40000))
    sink = DdpSink(pd=pd, memory_table=table, host_memory=memory, stream_id=(0, 0), queues=(0, 1, 2),
                   first_sequence=first_ssn)
    for address in SEND_BUFFERS:
        sink.post_buffer(0, address, 4096)
    return sink


@pytest.mark.parametrize("window", [0, (1 << 15) + 1])
def test_a_window_must_fit_the_sequence_space(window):
    with pytest.raises(ValueError, match="window"):
        DdpSink(pd=ProtectionDomain(1), memory_table=MemoryTable(), host_memory=SparseMemory(), stream_id=0,
                window=window)

"""The receive engine's reference model (model/engine/rx.py) on the sample capture and crafted frames."""

import itertools
import struct

import pytest

from model.ddp.sctp_adaptation import DdpSegmentChunkData
from model.ddp.segment import TaggedHeader, UntaggedHeader
from model.engine.config import ReceiveConfig
from model.engine.rx import (
    AckDisposition,
    ChunkError,
    ChunkException,
    FrameAction,
    FrameDrop,
    FrameException,
    ReceiveEngineModel,
    SegmentStatus,
)
from model.engine.sack import TICK_SECONDS, SackRecord
from model.errors import DdpError, RdmapError
from model.net.frames import build_frame
from model.net.pcap import read_capture
from model.rdmap.messages import Opcode, tagged_rsvd_ulp, untagged_rsvd_ulp
from model.sctp.packet import AbortChunk, DataChunk, InitChunk, SackChunk, SctpPacket
from sim.samples import SAMPLE_CAPTURE, SAMPLE_CONFIG

LOCAL_MAC, PEER_MAC = bytes.fromhex("020000000002"), bytes.fromhex("020000000001")
TAG = 0x5E6F7080


class Engine(ReceiveEngineModel):
    """The model with a one-frame helper: `receive_one(frame)` feeds it and returns that frame's result."""

    def receive_one(self, data: bytes):
        self.receive(data, now=float(self.counters.frames))
        (result,) = self.next_events()
        return result


_ssns = itertools.count(1)


def restart_ssn():
    """A new session on the stream: DDP-SSNs from the configured first_ssn (1) again."""
    global _ssns
    _ssns = itertools.count(1)


@pytest.fixture
def engine():
    restart_ssn()
    return Engine(ReceiveConfig.from_json(SAMPLE_CONFIG.read_text()))


def frame(*chunks, tag=TAG, src_port=5001, dst_port=5002, udp=False, src_ip="10.0.0.1", dst_ip="10.0.0.2",
          dst_mac=LOCAL_MAC):
    packet = SctpPacket(src_port, dst_port, tag, list(chunks)).encode()
    return build_frame(packet, PEER_MAC, dst_mac, src_ip, dst_ip, udp=udp)


def segment_chunk(header, payload=b"", tsn=1, ssn=None, stream=0, flags=None):
    """A DDP Segment Chunk; its DDP-SSN the stream's next one unless given."""
    data = DdpSegmentChunkData(next(_ssns) if ssn is None else ssn, header.encode() + payload).encode()
    chunk = DataChunk(tsn, stream, 0, 16, data, unordered=True)
    if flags is not None:
        chunk = DataChunk(tsn, stream, 0, 16, data, unordered=bool(flags & 4), beginning=bool(flags & 2),
                          ending=bool(flags & 1))
    return chunk


def write(to, payload, stag=0x0142, last=True):
    return TaggedHeader(last, tagged_rsvd_ulp(Opcode.RDMA_WRITE), stag, to), payload


@pytest.mark.parametrize("segment_reports, accepted_records", [(True, 8), (False, 6)])
def test_sample_capture_through_the_model(engine, segment_reports, accepted_records):
    """Per segment: 3 Write segments, 1 Read Request, 4 Sends; per message the Write's first two (L = 0)
    are left out (abi.rx.report_withheld)."""
    engine.segment_reports = segment_reports
    records = list(read_capture(SAMPLE_CAPTURE.read_bytes()))
    for record in records:
        engine.receive(record.data, record.timestamp)
    results = engine.next_events()
    assert [(r.index, r.time) for r in results] == [(i, r.timestamp) for i, r in enumerate(records)]
    segments = [s for r in results for s in r.segments]
    assert [s.status for s in segments].count(SegmentStatus.ACCEPTED) == accepted_records
    assert engine.reports_withheld == 8 - accepted_records
    (error,) = [s for s in segments if s.status is SegmentStatus.ERROR]
    assert error.error == DdpError.INVALID_STAG.number
    assert engine.memory.read(0x40010, 2500) == bytes(i % 251 for i in range(2500))
    assert engine.counters.delivered + engine.counters.exceptions == engine.counters.frames == len(results)
    allowed = [(0x40000, 8192), (0x60000, 0x4000), (0x70000, 0x80), (0x71000, 64)]
    assert engine.memory.written_outside(allowed) == []


def test_write_placed_at_host_address_rfc5041_4_2(engine):
    result = engine.receive_one(frame(segment_chunk(*write(0x8100, b"hello"))))
    (verdict,) = result.segments
    assert verdict.status is SegmentStatus.ACCEPTED and verdict.host_address == 0x40100
    assert engine.memory.read(0x40100, 5) == b"hello"


@pytest.mark.parametrize(
    "data, expected",
    [
        (lambda f: b"\xff" * 6 + f[6:], FrameException.NOT_LOCAL_MAC),
        (lambda f: f[:12] + b"\x86\xdd" + f[14:], FrameException.NOT_IPV4),
        (lambda f: f[:14] + b"\x46" + f[15:], FrameException.IP_OPTIONS),
    ],
)
def test_frame_exceptions(engine, data, expected):
    result = engine.receive_one(data(frame(SackChunk(1, 100))))
    assert (result.action, result.reason) == (FrameAction.EXCEPTION, expected)


def test_frame_level_rules_rfc4960_8_5(engine):
    assert engine.receive_one(frame(InitChunk(1, 1, 8, 8, 1), tag=0)).reason is FrameException.INIT
    assert engine.receive_one(frame(AbortChunk(tag_reflected=True), tag=9)).reason is FrameException.TAG_REFLECTED
    assert engine.receive_one(frame(SackChunk(1, 1), src_port=7)).reason is FrameException.NO_ASSOCIATION
    assert engine.receive_one(frame(SackChunk(1, 1), tag=TAG ^ 0x100)).reason is FrameDrop.TAG
    # a tag naming another row (abi.rx.association_row), empty here, finds no association: the host's to judge
    assert engine.receive_one(frame(SackChunk(1, 1), tag=TAG ^ 0x1)).reason is FrameException.NO_ASSOCIATION
    assert engine.receive_one(frame(SackChunk(1, 1), dst_ip="10.0.0.9")).reason is FrameException.NOT_LOCAL_IP
    assert engine.receive_one(frame(SackChunk(1, 1), udp=True)).action is FrameAction.DELIVER
    assert engine.counters.tag_errors == 1


def test_bad_crc_dropped_and_counted_rfc4960_6_8(engine):
    data = bytearray(frame(segment_chunk(*write(0x8000, b"x"))))
    data[34 + 8] ^= 1
    result = engine.receive_one(bytes(data))
    assert (result.action, result.reason) == (FrameAction.DROP, FrameDrop.CRC)
    assert engine.counters.crc_errors == 1 and engine.memory.writes == []


def test_bad_ip_checksum_and_length(engine):
    data = bytearray(frame(SackChunk(1, 1)))
    data[24] ^= 1
    assert engine.receive_one(bytes(data)).reason is FrameDrop.IP_CHECKSUM
    good = frame(SackChunk(1, 1))
    assert engine.receive_one(good[:40]).reason is FrameDrop.LENGTH


def test_chunk_rules_rfc5043_9_10(engine):
    header, payload = write(0x8000, b"abcd")
    result = engine.receive_one(frame(
        segment_chunk(header, payload, tsn=5, flags=0b011),
        segment_chunk(header, payload, tsn=6, flags=0b110),
        DataChunk(7, 0, 0, 17, b"\0\0\0\x01"), DataChunk(8, 0, 0, 99, b"other"), SackChunk(1, 1),
    ))
    assert [(f.tsn, f.kind) for f in result.chunk_faults] == [(5, ChunkError.ORDERED), (6, ChunkError.FRAGMENTED)]
    assert [c.reason for c in result.chunks_to_host] == [
        ChunkException.SESSION_CONTROL, ChunkException.OTHER_PPID, ChunkException.CONTROL]
    assert result.segments == []


def test_chunk_length_past_packet_ends_the_walk(engine):
    packet = bytearray(SctpPacket(5001, 5002, TAG, [SackChunk(1, 1), SackChunk(2, 2)]).encode())
    packet[12 + 16 + 2 : 12 + 16 + 4] = struct.pack("!H", 64)
    from model.net.checksum import sctp_checksum, sctp_checksum_to_bytes
    packet[8:12] = sctp_checksum_to_bytes(sctp_checksum(bytes(packet)))
    result = engine.receive_one(build_frame(bytes(packet), PEER_MAC, LOCAL_MAC, "10.0.0.1", "10.0.0.2"))
    assert [c.reason for c in result.chunks_to_host] == [ChunkException.CONTROL]
    assert [f.kind for f in result.chunk_faults] == [ChunkError.PAST_END]


def test_after_an_error_the_stream_drops_silently_rfc5041_7_1(engine):
    first = engine.receive_one(frame(segment_chunk(*write(0x8000, b"x", stag=0x0F77))))
    assert first.segments[0].error == DdpError.INVALID_STAG.number
    later = engine.receive_one(frame(segment_chunk(*write(0x8000, b"y"))))
    assert later.segments[0].status is SegmentStatus.DROPPED and engine.memory.read(0x40000, 1) == b"\0"


def test_unknown_stream_is_no_stream(engine):
    result = engine.receive_one(frame(segment_chunk(*write(0x8000, b"x"), stream=3)))
    assert result.segments[0].status is SegmentStatus.NO_STREAM


def test_send_message_length_rfc5041_5_4(engine):
    header = UntaggedHeader(True, untagged_rsvd_ulp(Opcode.SEND), 0, 1, 100)
    (verdict,) = engine.receive_one(frame(segment_chunk(header, b"z" * 10))).segments
    assert verdict.message_length == 110 and verdict.host_address == 0x60000 + 100


def test_rdmap_opcode_on_wrong_queue_rfc5040_4_2(engine):
    header = UntaggedHeader(True, untagged_rsvd_ulp(Opcode.SEND), 1, 1, 0)
    (verdict,) = engine.receive_one(frame(segment_chunk(header, b"z"))).segments
    assert verdict.error == RdmapError.UNEXPECTED_OPCODE.number


def test_sans_io_interface(engine):
    """receive() queues, next_events() drains everything queued, in order; nothing to send, no timers
    without an acknowledgement unit's row."""
    good, bad = frame(SackChunk(1, 1)), frame(SackChunk(1, 1), tag=TAG ^ 0x100)
    engine.receive(good, 1.5)
    engine.receive(bad, 2.5)
    assert engine.data_to_send(3.0) == [] and engine.next_timeout() is None
    engine.handle_timeout(3.0)
    first, second = engine.next_events()
    assert (first.index, first.time, first.action) == (0, 1.5, FrameAction.DELIVER)
    assert (second.index, second.time, second.reason) == (1, 2.5, FrameDrop.TAG)
    assert engine.next_events() == []


def test_truncated_data_chunks_report_their_tsn_and_the_walk_goes_on(engine):
    """DATA shorter than its 16-byte header: TOO_SHORT with the TSN when the chunk holds one
    (length >= 8), 0 otherwise; PPID 16 without room for the DDP-SSN: TOO_SHORT with its TSN."""
    from model.sctp.packet import UnknownChunk

    short = UnknownChunk(0, 0b111, struct.pack("!IH", 0x1234, 0))   # length 10: TSN, no PPID
    tiny = UnknownChunk(0, 0b111, b"")                               # length 4: no TSN
    no_ssn = DataChunk(0x99, 0, 0, 16, b"", unordered=True)          # length 16: no DDP-SSN
    result = engine.receive_one(frame(short, tiny, no_ssn, SackChunk(1, 1)))
    assert [(f.tsn, f.kind) for f in result.chunk_faults] == [
        (0x1234, ChunkError.TOO_SHORT), (0, ChunkError.TOO_SHORT), (0x99, ChunkError.TOO_SHORT)]
    assert [c.reason for c in result.chunks_to_host] == [ChunkException.CONTROL]


def acks(result):
    return [(a.association, a.tsn, a.disposition, a.length) for a in result.acks]


def test_every_data_chunk_with_its_header_is_acknowledged_rfc4960_6_2(engine):
    """Placed, refused and passed to the host alike, in chunk order; not control chunks."""
    header, payload = write(0x8000, b"abcd")
    result = engine.receive_one(frame(
        segment_chunk(header, payload, tsn=4),
        segment_chunk(header, payload, tsn=5, flags=0b011),
        DataChunk(7, 0, 0, 17, b"\0\0\0\x01"), SackChunk(1, 1), DataChunk(8, 0, 0, 99, b"other"),
    ))
    assert acks(result) == [(0, 4, AckDisposition.SEGMENT, 20), (0, 5, AckDisposition.REFUSED, 20),
                            (0, 7, AckDisposition.TO_HOST, 4), (0, 8, AckDisposition.TO_HOST, 5)]


def test_the_packets_last_data_chunk_ends_it_rfc4960_6_10(engine):
    """Each ack record says whether its chunk, padded, ends the packet: DATA chunks come last (6.10), so only
    the last one's does; a control chunk after it (against 6.10) leaves no record ending the packet."""
    header, payload = write(0x8000, b"abcde")
    result = engine.receive_one(frame(segment_chunk(header, payload, tsn=4), segment_chunk(header, payload, tsn=5)))
    assert [a.packet_end for a in result.acks] == [False, True]
    result = engine.receive_one(frame(segment_chunk(header, payload, tsn=6), SackChunk(1, 1)))
    assert [a.packet_end for a in result.acks] == [False]


def test_engine_sacks_replace_the_hosts_ack_records_rfc4960_6_2(engine):
    """An association whose SACK row is enabled: no ack record for the host, the unit's SACKs instead (every
    second packet, at once on a gap), and the delayed SACK when its tick comes (`next_timeout`)."""
    header, payload = write(0x8000, b"abcd")
    engine.write_sack(0, 3, 5, 9000, 1000, True)
    times = itertools.count(1)

    def receive_one(data):            # 1 ms apart: within the 5-tick (4.2 ms) delay
        engine.receive(data, next(times) * 1e-3)
        (result,) = engine.next_events()
        return result

    first = receive_one(frame(segment_chunk(header, payload, tsn=4)))
    assert first.acks == [] and first.sacks == []
    second = receive_one(frame(segment_chunk(header, payload, tsn=5)))
    assert second.sacks == [SackRecord(0, 5, (), (), 9000)]
    gap = receive_one(frame(segment_chunk(header, payload, tsn=7)))
    assert gap.sacks == [SackRecord(0, 5, ((2, 2),), (), 8000)]
    assert engine.next_sacks() == second.sacks + gap.sacks
    filled = receive_one(frame(segment_chunk(header, payload, tsn=6)))   # the gap closed: at once
    assert filled.sacks == [SackRecord(0, 7, (), (), 9000)]
    last = receive_one(frame(segment_chunk(header, payload, tsn=8)))
    assert last.sacks == [] and engine.next_sacks() == filled.sacks
    due = engine.next_timeout()
    assert due == pytest.approx((int(last.time / TICK_SECONDS) + 5) * TICK_SECONDS)
    engine.handle_timeout(due - TICK_SECONDS)
    assert engine.next_sacks() == []
    engine.handle_timeout(due)
    assert engine.next_sacks() == [SackRecord(0, 8, (), (), 9000)] and engine.next_timeout() is None
    engine.write_sack(0, 8, 5, 9000, 1000, False)       # the host SACKs again: its ack records come back
    assert acks(receive_one(frame(segment_chunk(header, payload, tsn=9)))) == [
        (0, 9, AckDisposition.SEGMENT, 20)]


def test_data_chunks_shorter_than_their_header_are_not_acknowledged_rfc4960_3_3_1(engine):
    from model.sctp.packet import UnknownChunk

    short = UnknownChunk(0, 0b111, struct.pack("!IH", 0x1234, 0))   # length 10
    no_ssn = DataChunk(0x99, 0, 0, 16, b"", unordered=True)          # length 16: a whole header
    assert acks(engine.receive_one(frame(short, no_ssn))) == [(0, 0x99, AckDisposition.REFUSED, 0)]


def test_segment_verdicts_carry_the_header_fields(engine):
    """STag (RFC 5041 4.2), QN, MSN, MO (4.3) and the Invalidate STag (RFC 5040 4.1)."""
    tagged = engine.receive_one(frame(segment_chunk(*write(0x8000, b"x", stag=0x0142)))).segments[0]
    assert (tagged.stag, tagged.qn, tagged.msn, tagged.mo, tagged.invalidate_stag) == (0x0142, 0, 0, 0, 0)
    header = UntaggedHeader(True, untagged_rsvd_ulp(Opcode.SEND_WITH_INVALIDATE, 0x0344), 0, 1, 8)
    (untagged,) = engine.receive_one(frame(segment_chunk(header, b"z" * 4))).segments
    assert (untagged.stag, untagged.qn, untagged.msn, untagged.mo, untagged.invalidate_stag) == (0, 0, 1, 8, 0x0344)


def send(msn, payload=b"m", last=True, mo=0):
    return UntaggedHeader(last, untagged_rsvd_ulp(Opcode.SEND), 0, msn, mo), payload


def test_revoked_buffer_is_out_of_range_and_rearm_resumes(engine):
    """A revoked MSN is refused as out of range (RFC 5041 7.1 item 5), which latches the stream; after the
    host re-arms the stream the buffers still posted are placed into again."""
    assert engine.revoke_buffer(0, 0, 0, 2) and not engine.revoke_buffer(0, 0, 0, 2)
    assert engine.receive_one(frame(segment_chunk(*send(1)))).segments[0].status is SegmentStatus.ACCEPTED
    (refused,) = engine.receive_one(frame(segment_chunk(*send(2)))).segments
    assert refused.error == DdpError.MSN_RANGE.number
    assert engine.receive_one(frame(segment_chunk(*send(3)))).segments[0].status is SegmentStatus.DROPPED
    engine.rearm_stream(0, 0)
    restart_ssn()
    (placed,) = engine.receive_one(frame(segment_chunk(*send(3, b"again")))).segments
    assert placed.status is SegmentStatus.ACCEPTED and engine.memory.read(0x62000, 5) == b"again"


def test_reset_queue_starts_again_at_msn_1_rfc5041_4_3(engine):
    engine.reset_queue(0, 0, 0)
    assert engine.receive_one(frame(segment_chunk(*send(1)))).segments[0].error == DdpError.NO_BUFFER.number
    engine.rearm_stream(0, 0)
    restart_ssn()
    assert engine.post_buffer(0, 0, 0, 0x68000, 16) == 1
    assert engine.receive_one(frame(segment_chunk(*send(1, b"new")))).segments[0].host_address == 0x68000


def test_refused_write_is_a_local_catastrophic_error_rfc5041_7_2(engine):
    """Host memory that refuses a write: nothing is written there, the segment is reported with DDP Local
    Catastrophic Error and the stream latches (RFC 5041 7.1); the bytes outside the range are written."""
    engine.refuse_writes(0x40002, 2)
    (failed,) = engine.receive_one(frame(segment_chunk(*write(0x8000, b"abcdef")))).segments
    assert (failed.status, failed.error, failed.dma_error) == (
        SegmentStatus.ERROR, DdpError.LOCAL_CATASTROPHIC.number, True)
    assert failed.host_address == 0x40000
    assert engine.memory.read(0x40000, 6) == b"ab\0\0ef"
    assert engine.receive_one(frame(segment_chunk(*write(0x8100, b"x")))).segments[0].status is SegmentStatus.DROPPED


def test_overflow_counts_a_dropped_frame(engine):
    engine.overflow(frame(SackChunk(1, 1)), 0.5)
    (result,) = engine.next_events()
    assert (result.index, result.action, result.reason) == (0, FrameAction.DROP, FrameDrop.OVERFLOW)
    assert (engine.counters.frames, engine.counters.overflow) == (1, 1)

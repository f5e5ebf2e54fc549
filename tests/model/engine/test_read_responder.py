"""The receive engine's model with the read responder (model/engine/rx.py, ``read_responder``): an inbound RDMA
Read Request checked against the region table and handed to the transmit engine, no host buffer involved.

Expectations come from the RFCs: RFC 5040 4.4 (the request's fields), 5.2 and RFC 5041 7.1 / 8.2 (the Data
Source checks: STag, PD, stream, REMOTE_READ, bounds, wrap), RFC 5040 7.2 (the Remote Protection Error numbers),
RFC 5040 5.5 (requests answered in order).
"""

import pytest

from model.ddp.memory import Access
from model.engine.config import ReceiveConfig, RegionEntry, StreamEntry
from model.engine.rx import SegmentStatus
from model.engine.tx import ReadResponseRequest
from model.errors import RdmapError
from model.rdmap.messages import Opcode, ReadRequest, untagged_rsvd_ulp
from model.ddp.segment import UntaggedHeader
from sim.samples import SAMPLE_CONFIG
from tests.model.engine.test_rx import Engine, frame, restart_ssn, segment_chunk, write

SINK_STAG, SINK_TO = 0x0A0B0C0D, 0x1122334455667788
# The sample's regions (sim/samples/sample_rx.json): 0x0142 (PD 2, remote read and write, TO 0x8000 + 8192 at
# 0x40000), 0x0243 (remote read, TO 0 + 256 at 0x50000), 0x0344 (remote read, bound to stream (0, 0)).


@pytest.fixture
def engine():
    restart_ssn()
    return Engine(ReceiveConfig.from_json(SAMPLE_CONFIG.read_text()), read_responder=True)


def read_request(source_stag, source_to, size, *, msn=1, last=True, mo=0, body=None):
    header = UntaggedHeader(last, untagged_rsvd_ulp(Opcode.RDMA_READ_REQUEST), 1, msn, mo)
    payload = ReadRequest(SINK_STAG, SINK_TO, size, source_stag, source_to).encode() if body is None else body
    return header, payload


def test_accepted_request_goes_to_the_transmit_engine_not_the_host_rfc5040_4_4(engine):
    result = engine.receive_one(frame(segment_chunk(*read_request(0x0142, 0x8010, 100, msn=1))))
    assert result.segments == []   # no report: the host no longer sees the request
    assert result.read_responses == [ReadResponseRequest(0, 0, 0x40010, 100, SINK_STAG, SINK_TO, 1)]
    (arrival,) = result.arrivals
    assert arrival.status is SegmentStatus.ACCEPTED and arrival.host_address == 0x40010
    assert engine.memory.writes == []   # nothing placed: no QN 1 buffer is used


def test_request_needs_no_posted_buffer(engine):
    """More requests than the sample's two QN 1 buffers: each is accepted (IRD is the transmit engine's)."""
    results = [engine.receive_one(frame(segment_chunk(*read_request(0x0243, 16 * i, 16, msn=i + 1), tsn=i + 1)))
               for i in range(4)]
    assert [r.read_responses[0].host_address for r in results] == [0x50000 + 16 * i for i in range(4)]
    assert [r.read_responses[0].msn for r in results] == [1, 2, 3, 4]


def test_zero_length_read_is_not_checked_rfc5041_5_2(engine):
    result = engine.receive_one(frame(segment_chunk(*read_request(0xDEAD00, 0, 0))))
    assert result.read_responses == [ReadResponseRequest(0, 0, 0, 0, SINK_STAG, SINK_TO, 1)]


def test_requests_leave_in_ddp_ssn_order_rfc5040_5_5(engine):
    later = engine.receive_one(frame(segment_chunk(*read_request(0x0243, 32, 8, msn=2), tsn=2, ssn=2)))
    assert later.read_responses == []      # waits for DDP-SSN 1
    earlier = engine.receive_one(frame(segment_chunk(*read_request(0x0243, 0, 8, msn=1), tsn=1, ssn=1)))
    assert [r.msn for r in earlier.read_responses] == [1, 2]


def _error(engine, request, stream=0):
    result = engine.receive_one(frame(segment_chunk(*request, stream=stream)))
    assert result.read_responses == []
    (record,) = result.segments
    assert record.status is SegmentStatus.ERROR and not record.tagged and record.qn == 1
    assert (record.stag, record.to) == (SINK_STAG, SINK_TO)   # the request's Data Sink, for the Terminate
    return record.error


def test_invalid_stag_rfc5040_7_2(engine):
    assert _error(engine, read_request(0x0942, 0, 8)) == RdmapError.INVALID_STAG.number


def test_revoked_stag_is_invalid(engine):
    engine.write_region(5, RegionEntry(0x0545, 2, 0, 256, Access.REMOTE_READ, 0x52000))
    engine.write_region(5, None)   # RFC 5041 8.3.1 item 6: revoked
    assert _error(engine, read_request(0x0545, 0, 8)) == RdmapError.INVALID_STAG.number


def test_key_mismatch_is_invalid_stag(engine):
    assert _error(engine, read_request(0x0244, 0, 8)) == RdmapError.INVALID_STAG.number


def test_protection_domain_mismatch_rfc5041_8_2(engine):
    engine.write_region(5, RegionEntry(0x0545, 3, 0, 256, Access.REMOTE_READ, 0x52000))
    assert _error(engine, read_request(0x0545, 0, 8)) == RdmapError.STAG_NOT_ASSOCIATED.number


def test_stream_binding_rfc5041_8_2(engine):
    engine.write_stream(StreamEntry(0, 1, 2, 1))
    restart_ssn()
    assert _error(engine, read_request(0x0344, 0, 8), stream=1) == RdmapError.STAG_NOT_ASSOCIATED.number


def test_bound_stream_itself_is_allowed(engine):
    result = engine.receive_one(frame(segment_chunk(*read_request(0x0344, 8, 8))))
    assert result.read_responses[0].host_address == 0x51008


def test_no_remote_read_access_rfc5040_5_2(engine):
    engine.write_region(5, RegionEntry(0x0545, 2, 0, 256, Access.REMOTE_WRITE | Access.LOCAL_WRITE, 0x52000))
    assert _error(engine, read_request(0x0545, 0, 8)) == RdmapError.ACCESS_RIGHTS.number


@pytest.mark.parametrize("source_to, size", [(0x0, 8), (0x8000 + 8192 - 4, 8), (0x8000, 8193)])
def test_out_of_bounds_rfc5041_7_1(engine, source_to, size):
    assert _error(engine, read_request(0x0142, source_to, size)) == RdmapError.BASE_OR_BOUNDS.number


def test_64_bit_wrap_rfc5041_7_1(engine):
    engine.write_region(5, RegionEntry(0x0545, 2, (1 << 64) - 256, 256, Access.REMOTE_READ, 0x52000))
    assert _error(engine, read_request(0x0545, (1 << 64) - 16, 16)) == RdmapError.TO_WRAP.number


@pytest.mark.parametrize("request_", [
    read_request(0x0243, 0, 8, last=False),
    read_request(0x0243, 0, 8, mo=28),
    read_request(0x0243, 0, 8, body=ReadRequest(SINK_STAG, SINK_TO, 8, 0x0243, 0).encode() + b"\0\0\0\0"),
], ids=["not_last", "mo", "long"])
def test_request_not_one_whole_28_byte_message(engine, request_):
    assert _error(engine, request_) == RdmapError.OPERATION_UNSPECIFIED.number


def test_error_ends_the_stream_rfc5041_7_1(engine):
    _error(engine, read_request(0x0942, 0, 8))
    result = engine.receive_one(frame(segment_chunk(*read_request(0x0243, 0, 8))))
    assert result.read_responses == [] and result.segments[0].status is SegmentStatus.DROPPED


def test_option_off_places_the_request_in_a_qn1_buffer(engine):
    restart_ssn()
    plain = Engine(ReceiveConfig.from_json(SAMPLE_CONFIG.read_text()))
    result = plain.receive_one(frame(segment_chunk(*read_request(0x0142, 0x8010, 100))))
    (record,) = result.segments
    assert record.status is SegmentStatus.ACCEPTED and record.host_address == 0x70000 and record.stag == 0
    assert result.read_responses == []


def test_writes_unchanged_with_the_option(engine):
    (verdict,) = engine.receive_one(frame(segment_chunk(*write(0x8100, b"hello")))).segments
    assert verdict.status is SegmentStatus.ACCEPTED and engine.memory.read(0x40100, 5) == b"hello"

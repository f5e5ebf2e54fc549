"""Tests for model.rdmap.endpoint: RDMAP semantics over DDP, two endpoints back to back (RFC 5040)."""

import pytest

from model.ddp.segment import DdpSegment, TaggedHeader, UntaggedHeader
from model.errors import DdpError, EncodeError, ErrorNumber, RdmapError, TerminateLayer
from model.ddp.memory import Access, MemoryRegion, MemoryTable, ProtectionDomain, SparseMemory
from model.rdmap.messages import Opcode, ReadRequest, Terminate, untagged_rsvd_ulp
from model.rdmap.endpoint import (
    RdmapEndpoint,
    ReadCompleted,
    ReadLimitExceeded,
    SendReceived,
    StreamInError,
    TerminateReceived,
    TerminateSent,
    WorkCompleted,
    WriteReceived,
)

DATA = bytes((i * 7) % 251 for i in range(3000))


class Peer:
    def __init__(self, pd_id, **kwargs):
        self.pd = ProtectionDomain(pd_id)
        self.table = MemoryTable()
        self.memory = SparseMemory()
        self.endpoint = RdmapEndpoint(pd=self.pd, memory_table=self.table, host_memory=self.memory, **kwargs)
        self.sequence = 0
        self.completed = []

    def _events(self):
        """The endpoint's queued events; Write and Send completions are kept apart for `completions`."""
        events = []
        for event in self.endpoint.next_events():
            (self.completed if isinstance(event, WorkCompleted) else events).append(event)
        return events

    def completions(self):
        """The Writes and Sends completed at the Data Source since the last call (RFC 5041 5.4)."""
        self._events()
        done, self.completed = self.completed, []
        return done

    def register(self, stag, access, address, length=4096, base_to=0, **extra):
        return self.table.register(MemoryRegion(stag, extra.pop("pd", self.pd), base_to, length, access, address, **extra))

    def feed(self, raw):
        self.endpoint.receive(raw, self.sequence)
        self.sequence += 1
        return self._events()


def pump(source, destination):
    events = []
    for raw in source.endpoint.data_to_send():
        events += destination.feed(raw)
    return events


@pytest.fixture
def pair():
    a, b = Peer(1, mulpdu=200), Peer(2, mulpdu=200)
    a.memory.write(0x1000, DATA)
    b.register(0x77, Access.REMOTE_WRITE | Access.REMOTE_READ, 0x9000, base_to=0x100000)
    a.register(0x55, Access.LOCAL_WRITE, 0x4000)
    return a, b


def test_rdma_write_back_to_back_rfc5040_5_1(pair):
    a, b = pair
    wr = a.endpoint.post_write(0x77, 0x100010, 0x1000, 1000)
    events = pump(a, b)
    assert events == [WriteReceived(0x77, 1000)]
    assert b.memory.read(0x9010, 1000) == DATA[:1000]
    assert b.memory.written_outside([(0x9000, 4096)]) == []
    assert [c.wr_id for c in a.completions()] == [wr]


def test_gather_list_write_and_send_are_one_message_each(pair):
    """A gather list's pieces, in order, make one RDMA Write and one Send message (RFC 5040 5.1, 5.3), here
    across several 200-byte MULPDU segments with piece boundaries inside segments."""
    a, b = pair
    pieces = [(0x1000 + 500, 170), (0x1000, 300), (0x1000 + 2000, 1)]
    expected = DATA[500:670] + DATA[:300] + DATA[2000:2001]
    wr = a.endpoint.post_write(0x77, 0x100000, pieces, 471)
    assert pump(a, b) == [WriteReceived(0x77, 471)]
    assert b.memory.read(0x9000, 471) == expected
    b.endpoint.post_receive(0x20000, 1000)
    a.endpoint.post_send(pieces, 471)
    assert pump(a, b) == [SendReceived(Opcode.SEND, 0x20000, 471, False, None)]
    assert b.memory.read(0x20000, 471) == expected
    assert [c.wr_id for c in a.completions()][0] == wr


def test_gather_list_must_add_up_to_the_length(pair):
    a, _ = pair
    with pytest.raises(EncodeError):
        a.endpoint.post_write(0x77, 0x100000, [(0x1000, 10), (0x2000, 10)], 21)


def test_rdma_read_back_to_back_rfc5040_5_2(pair):
    a, b = pair
    b.memory.write(0x9000, DATA)
    wr = a.endpoint.post_read(0x55, 8, 0x77, 0x100000 + 3, 700)
    assert pump(a, b) == []
    assert pump(b, a) == [ReadCompleted(wr, 700)]
    assert a.memory.read(0x4008, 700) == DATA[3:703]
    assert a.memory.written_outside([(0x1000, len(DATA)), (0x4000, 4096)]) == []


def test_zero_length_read_rfc5041_5_2(pair):
    a, b = pair
    wr = a.endpoint.post_read(0x55, 0, 0x77, 0x100000, 0)
    pump(a, b)
    assert pump(b, a) == [ReadCompleted(wr, 0)]


@pytest.mark.parametrize(
    "solicited, invalidate, opcode",
    [
        (False, False, Opcode.SEND),
        (False, True, Opcode.SEND_WITH_INVALIDATE),
        (True, False, Opcode.SEND_WITH_SE),
        (True, True, Opcode.SEND_WITH_SE_AND_INVALIDATE),
    ],
)
def test_send_variants_back_to_back_rfc5040_5_3(pair, solicited, invalidate, opcode):
    a, b = pair
    b.endpoint.post_receive(0x20000, 2000)
    a.endpoint.post_send(0x1000, 1500, solicited=solicited, invalidate_stag=0x77 if invalidate else None)
    events = pump(a, b)
    assert events == [SendReceived(opcode, 0x20000, 1500, solicited, 0x77 if invalidate else None)]
    assert b.memory.read(0x20000, 1500) == DATA[:1500]
    assert b.table.lookup(0x77).valid is (not invalidate)
    assert [c.opcode for c in a.completions()] == [opcode]


def test_ord_never_exceeded():
    """RFC 5040: outstanding outbound Read Requests never exceed ORD (post_read raises)."""
    a = Peer(1, ord=1)
    a.endpoint.post_read(1, 0, 2, 0, 10)
    with pytest.raises(ReadLimitExceeded):
        a.endpoint.post_read(1, 0, 2, 0, 10)


def terminate_of(events):
    sent = [e for e in events if isinstance(e, TerminateSent)]
    assert len(sent) == 1
    return sent[0]


def raw_untagged(opcode_byte, qn, msn=1, payload=b"", stag=0):
    return DdpSegment(UntaggedHeader(True, (opcode_byte << 32) | stag, qn, msn, 0), payload).encode()


def read_request(source_stag=0x77, source_to=0x100000, size=10, msn=1):
    return raw_untagged(0x41, 1, msn, ReadRequest(0x55, 0, size, source_stag, source_to).encode())


TERMINATE_CASES = [
    ("RV != 1", raw_untagged(0x83, 0), RdmapError.INVALID_VERSION.number),
    ("undefined opcode", raw_untagged(0x48, 0), RdmapError.UNEXPECTED_OPCODE.number),
    ("Send on QN 1", raw_untagged(0x43, 1), RdmapError.UNEXPECTED_OPCODE.number),
    ("untagged opcode in tagged model", DdpSegment(TaggedHeader(True, 0x43, 0x77, 0x100000), b"x").encode(),
     RdmapError.UNEXPECTED_OPCODE.number),
    ("Read Response without a read", DdpSegment(TaggedHeader(True, 0x42, 0x77, 0x100000), b"x").encode(),
     RdmapError.UNEXPECTED_OPCODE.number),
    ("read source STag invalid", read_request(source_stag=0x99), RdmapError.INVALID_STAG.number),
    ("read source out of bounds", read_request(size=5000), RdmapError.BASE_OR_BOUNDS.number),
    ("read source TO wrap", read_request(source_stag=0x88, source_to=2**64 - 4, size=4), RdmapError.TO_WRAP.number),
    ("read source not associated", read_request(source_stag=0x66), RdmapError.STAG_NOT_ASSOCIATED.number),
    ("read without remote read", read_request(source_stag=0x44), RdmapError.ACCESS_RIGHTS.number),
    ("invalidate unknown STag", raw_untagged(0x44, 0, payload=b"x", stag=0x99),
     RdmapError.OPERATION_STAG_NOT_INVALIDATED.number),
    ("invalidate other PD's STag", raw_untagged(0x46, 0, payload=b"x", stag=0x66),
     RdmapError.PROTECTION_STAG_NOT_INVALIDATED.number),
    ("DDP error: bad DV", raw_untagged(0x43, 0)[:0] + bytes([0x42]) + raw_untagged(0x43, 0)[1:],
     DdpError.UNTAGGED_INVALID_VERSION.number),
    ("DDP error: invalid QN", raw_untagged(0x43, 5), DdpError.INVALID_QN.number),
    ("DDP error: no receive buffer", raw_untagged(0x43, 0, msn=3, payload=b"x"), DdpError.NO_BUFFER.number),
    ("DDP error: write to unknown STag", DdpSegment(TaggedHeader(True, 0x40, 0x99, 0), b"x").encode(),
     DdpError.INVALID_STAG.number),
    ("write without remote write", DdpSegment(TaggedHeader(True, 0x40, 0x44, 0), b"x").encode(),
     RdmapError.ACCESS_RIGHTS.number),
]


@pytest.mark.parametrize("name, raw, number", TERMINATE_CASES, ids=[c[0] for c in TERMINATE_CASES])
def test_terminate_codes_rfc5040_7(name, raw, number):
    """Each error sends one Terminate with layer, EType, code and the terminated headers."""
    b = Peer(2)
    b.register(0x77, Access.REMOTE_WRITE | Access.REMOTE_READ, 0x9000, base_to=0x100000)
    b.register(0x88, Access.REMOTE_READ, 0xF000, length=4, base_to=2**64 - 4)
    b.register(0x66, Access.REMOTE_READ | Access.REMOTE_WRITE, 0xA000, pd=ProtectionDomain(9))
    b.register(0x44, Access.LOCAL_READ, 0xB000)
    b.endpoint.post_receive(0x20000, 100)
    sent = terminate_of(b.feed(raw))
    assert sent.number == number
    terminate = Terminate.decode(sent.terminate.encode())
    assert terminate.segment_length == len(raw)
    assert terminate.ddp_header == DdpSegment.decode(raw).header
    segment = DdpSegment.decode(raw)
    if not segment.header.tagged and segment.header.qn == 1 and len(segment.payload) == 28:
        assert terminate.rdma_header == ReadRequest.decode(segment.payload)  # R: Read Request header
    else:
        assert terminate.rdma_header is None
    # The Terminate goes out as the one message allowed after the error: untagged, QN 2, L=1.
    outbound = [DdpSegment.decode(s) for s in b.endpoint.data_to_send()]
    assert len(outbound) == 1 and outbound[0].header.qn == 2 and outbound[0].header.last
    assert outbound[0].header.rsvd_ulp == untagged_rsvd_ulp(Opcode.TERMINATE)
    assert Terminate.decode(outbound[0].payload) == sent.terminate
    # Stream in error: nothing more is placed, posting is refused.
    writes = list(b.memory.writes)
    assert b.feed(DdpSegment(TaggedHeader(True, 0x40, 0x77, 0x100000), b"late").encode()) == []
    assert b.memory.writes == writes
    with pytest.raises(StreamInError):
        b.endpoint.post_send(0, 0)


def test_ird_overflow_terminates():
    """More inbound Read Requests outstanding than IRD: Remote Operation Error, catastrophic to the stream."""
    b = Peer(2, ird=2)
    b.register(0x77, Access.REMOTE_READ, 0x9000, base_to=0x100000)
    assert b.feed(read_request(msn=1)) == [] and b.feed(read_request(msn=2)) == []
    sent = terminate_of(b.feed(read_request(msn=3)))
    assert sent.number == RdmapError.CATASTROPHIC_STREAM.number


def test_ird_frees_when_response_sent():
    b = Peer(2, ird=1)
    b.register(0x77, Access.REMOTE_READ, 0x9000, base_to=0x100000)
    for msn in range(1, 5):
        assert b.feed(read_request(msn=msn)) == []
        assert len(b.endpoint.data_to_send()) == 1


def test_terminate_received_puts_stream_in_error(pair):
    a, b = pair
    b.endpoint.post_receive(0x20000, 100)
    a.feed(DdpSegment(TaggedHeader(True, 0x40, 0x1234, 0), b"x").encode())
    events = pump(a, b)
    assert len(events) == 1 and isinstance(events[0], TerminateReceived)
    assert events[0].terminate.number == (TerminateLayer.DDP, 1, 0)
    assert b.endpoint.in_error
    a.memory.write(0, b"q")
    with pytest.raises(StreamInError):
        b.endpoint.post_write(0x77, 0, 0, 1)
    assert ErrorNumber(TerminateLayer.DDP, 1, 0) == DdpError.INVALID_STAG.number


def test_mixed_traffic_exact_memory(pair):
    a, b = pair
    b.memory.write(0x9800, DATA[:900])
    for index in range(3):
        b.endpoint.post_receive(0x20000 + index * 0x1000, 1000)
    a.endpoint.post_write(0x77, 0x100000, 0x1000, 1200)
    a.endpoint.post_send(0x1000 + 5, 999)
    read = a.endpoint.post_read(0x55, 0, 0x77, 0x100000 + 0x800, 900)
    a.endpoint.post_send(0x1000, 0, solicited=True)
    events = pump(a, b)
    assert [type(e) for e in events] == [WriteReceived, SendReceived, SendReceived]
    assert pump(b, a) == [ReadCompleted(read, 900)]
    assert b.memory.read(0x9000, 1200) == DATA[:1200]
    assert b.memory.read(0x20000, 999) == DATA[5:1004]
    assert a.memory.read(0x4000, 900) == DATA[:900]


class CountingMemory(SparseMemory):
    """Host memory that counts the bytes read from it."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes_read = 0

    def read(self, address: int, length: int) -> bytes:
        self.bytes_read += length
        return super().read(address, length)


def test_a_message_is_read_from_memory_segment_by_segment_as_it_is_handed_over() -> None:
    """MULPDU 200 leaves 186 payload bytes per tagged segment (RFC 5041 5.2: MULPDU - 14): a 1000-byte RDMA
    Write is 6 segments.  Posting reads nothing; each segment handed over reads its own payload only; the
    Write completes with its last segment (RFC 5041 5.4); the bytes are those in memory at that time."""
    memory = CountingMemory()
    memory.write(0x1000, DATA[:1000])
    endpoint = RdmapEndpoint(pd=ProtectionDomain(1), memory_table=MemoryTable(), host_memory=memory, mulpdu=200)
    wr = endpoint.post_write(0x77, 0, 0x1000, 1000)
    assert memory.bytes_read == 0 and endpoint.segments_queued == 6
    first = endpoint.data_to_send(limit=1)
    assert len(first) == 1 and memory.bytes_read == 186
    assert endpoint.next_events() == [] and endpoint.segments_queued == 5
    memory.write(0x1000 + 186, b"\xee" * 186)  # the buffer still belongs to the endpoint: this is what goes
    rest = endpoint.data_to_send(limit=4)
    assert memory.bytes_read == 5 * 186 and endpoint.next_events() == []
    rest += endpoint.data_to_send()
    assert memory.bytes_read == 1000 and endpoint.segments_queued == 0
    assert endpoint.next_events() == [WorkCompleted(wr, Opcode.RDMA_WRITE, 1000)]
    payloads = [DdpSegment.decode(raw).payload for raw in first + rest]
    assert [len(p) for p in payloads] == [186] * 5 + [70]
    assert b"".join(payloads) == DATA[:186] + b"\xee" * 186 + DATA[372:1000]

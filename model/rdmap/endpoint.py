"""RDMAP stream endpoint over the DDP source and sink: RFC 5040 semantics, sans-I/O.

One `RdmapEndpoint` is one RDMAP/DDP Stream.  The ULP posts work
(`post_write`, `post_read`, `post_send`, `post_receive`); outbound DDP
segments are collected with `data_to_send()` (encoded bytes, in
transmission order; the LLP numbers them, e.g. with the DDP-SSN), all of
them or at most `limit`, so an LLP takes what its window allows; inbound
segments go to `receive(segment_bytes, sequence)`; `next_events()` returns
every event queued since the last call, completions included.  The
endpoint has no timers, so no call takes `now` (see `model`'s convention).

Decisions recorded here:

* Local completion of RDMA Write and Send (RFC 5041 5.4, Data Source side):
  a message is complete once all its segments have been handed to the LLP,
  i.e. returned by `data_to_send()`; `WorkCompleted` then waits in `next_events()`.
* Gather lists: a Write or Send's source may be one host address or a list
  of (address, length) pieces read one after the other as one message
  (the verbs layer's scatter/gather list); the pieces' lengths add up to
  the message length.
* A message's payload is read from host memory segment by segment as
  `data_to_send()` hands the segments over (an RNIC's DMA), never copied
  whole: the source buffer belongs to the endpoint until the message's
  `WorkCompleted` (an RDMA Read's source, until its Read Response is handed
  over), and the endpoint holds one segment at a time, not the message.
* ORD (RFC 5040 RDMA Read): `post_read` raises `ReadLimitExceeded` when ORD
  reads are already outstanding; nothing is queued.  A read stays
  outstanding until its Read Response has been delivered.
* IRD: an inbound Read Request stays outstanding until its Read Response
  has been handed to the LLP by `data_to_send()`.  One more than IRD
  outstanding is a Terminate with RDMAP Remote Operation Error
  "catastrophic error, localized to RDMAP Stream" (0x2/0x07).  QN 1 keeps
  IRD + 1 buffers posted so that the excess request reaches RDMAP instead of
  failing in DDP for lack of a buffer.
* RDMAP header checks before any buffer check: RV != 1 -> 0x2/0x05; an
  undefined opcode, an opcode in the wrong DDP model, an untagged opcode on
  the wrong QN, or a Read Response with no read outstanding -> 0x2/0x06.
* Data Source of a Read Request: the source STag must allow REMOTE_READ
  (checked with `MemoryTable.check_tagged`); a refusal is a Terminate with
  the RDMAP Remote Protection Error of the fault (EType 1).
* Tagged placement rights: RDMA Write needs REMOTE_WRITE on the sink STag,
  a Read Response needs LOCAL_WRITE (the requester's own buffer).
* Send with Invalidate: the named STag is invalidated when the message is
  delivered.  An unknown or already invalid STag -> 0x2/0x09 (Remote
  Operation Error); an STag of another PD or bound to another stream ->
  0x1/0x09 (Remote Protection Error).  The Send is then not delivered.
* Every error, local or from the DDP sink, sends one Terminate (QN 2,
  L = 1) carrying layer, EType and code; when the error was found on an
  inbound segment it also carries that segment's length (M), its DDP header
  (D) and, for an RDMA Read Request, the Read Request header (R).  After a
  Terminate is sent or received the stream is in error: nothing more is
  placed, inbound segments are dropped, `post_*` raise `StreamInError`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Union

from model.ddp.segment import DdpSegment, TaggedHeader, UntaggedHeader
from model.ddp.sink import Delivered, DdpSink, SinkError
from model.ddp.source import DdpSource
from model.errors import DdpError, DecodeError, EncodeError, ErrorNumber, RdmapError, RnicError
from model.ddp.memory import Access, MemoryTable, ProtectionDomain, SparseMemory
from model.rdmap.messages import (
    READ_REQUEST_LENGTH,
    Opcode,
    QueueNumber,
    ReadRequest,
    header_error,
    placement_access,
    Terminate,
    invalidate_stag_of,
    rdmap_control_of,
    tagged_rsvd_ulp,
    untagged_rsvd_ulp,
)

_TERMINATE_BUFFER = 4 + 2 + 18 + READ_REQUEST_LENGTH  # largest Terminate body
_DDP_TAGGED = 0x80
"""The T bit of a DDP segment's first byte, its Control Field (RFC 5041 4.1): set on a tagged segment."""

Gather = Union[int, Sequence[tuple[int, int]]]
"""A message's source in host memory: one address, or (address, length) pieces in message order."""


def _checked_by_header() -> dict[int, Access]:
    """The tagged RsvdULP values (RDMAP Control Fields, RFC 5040 4.1) that pass `_check_rdmap_header` on the
    header alone, with the access their placement needs (`placement_access`): every tagged opcode but the Read
    Response, whose check also asks whether a read is outstanding. What the sink's `place_next_tagged` may take."""
    checked = {}
    for rsvd_ulp in range(256):
        header = TaggedHeader(False, rsvd_ulp, 0, 0)
        if header_error(header) is None and rdmap_control_of(header).opcode != Opcode.RDMA_READ_RESPONSE:
            checked[rsvd_ulp] = placement_access(header)
    return checked


_CHECKED_BY_HEADER = _checked_by_header()


def _checked_while_reading() -> dict[int, Access]:
    """The tagged RsvdULP values of the Read Response (RFC 5040 4.1) that pass `_check_rdmap_header` on the header
    while an RDMA Read is outstanding (4.4), with the access their placement needs (`placement_access`): what the
    sink's `place_next_tagged` may also take while a read is outstanding."""
    checked = {}
    for rsvd_ulp in range(256):
        header = TaggedHeader(False, rsvd_ulp, 0, 0)
        if header_error(header) is None and rdmap_control_of(header).opcode == Opcode.RDMA_READ_RESPONSE:
            checked[rsvd_ulp] = placement_access(header)
    return checked


_CHECKED_WHILE_READING = _checked_while_reading()


def _untagged_checked_by_header() -> dict[int, int]:
    """The RDMAP Control Fields of untagged messages (the first byte of the untagged RsvdULP, RFC 5040 4.1) that
    pass `_check_rdmap_header` on the header alone, with the QN they must come on (`header_error`, RFC 5040
    4.2): every untagged opcode, whose check asks nothing of the stream. What the sink's `place_next_untagged`
    may take."""
    checked = {}
    for control in range(256):
        opcode = rdmap_control_of(UntaggedHeader(False, control << 32, 0, 0, 0)).known_opcode
        if opcode is not None and not opcode.tagged:
            qn = opcode.queue_number
            if header_error(UntaggedHeader(False, control << 32, qn, 0, 0)) is None:
                checked[control] = qn
    return checked


_UNTAGGED_CHECKED_BY_HEADER = _untagged_checked_by_header()


class StreamInError(RnicError):
    """The stream has sent or received a Terminate; no more work is accepted."""


class ReadLimitExceeded(RnicError):
    """`post_read` with ORD RDMA Reads already outstanding (RFC 5040 ORD)."""


# -- events ------------------------------------------------------------------


@dataclass(frozen=True)
class WorkCompleted:
    """A locally posted Write or Send whose segments were all handed to the LLP."""

    wr_id: int
    opcode: Opcode
    length: int


@dataclass(frozen=True)
class ReadCompleted:
    """An RDMA Read whose Read Response was fully placed and delivered."""

    wr_id: int
    length: int


@dataclass(frozen=True)
class SendReceived:
    """An inbound Send variant delivered into the receive buffer at `address`."""

    opcode: Opcode
    address: int
    length: int
    solicited: bool
    invalidated_stag: int | None


@dataclass(frozen=True)
class WriteReceived:
    """An inbound RDMA Write message delivered (RFC 5040: no ULP completion needed); `length` None: not known
    (`model.rnic.events.WriteArrived`)."""

    stag: int
    length: int | None


@dataclass(frozen=True)
class TerminateSent:
    """This endpoint detected an error and queued a Terminate carrying it."""

    terminate: Terminate

    @property
    def number(self) -> ErrorNumber:
        return ErrorNumber(*self.terminate.number)


@dataclass(frozen=True)
class TerminateReceived:
    """The peer's Terminate was delivered; the stream is now in error."""

    terminate: Terminate


Event = Union[WorkCompleted, ReadCompleted, SendReceived, WriteReceived, TerminateSent, TerminateReceived]


@dataclass
class _PendingRead:
    wr_id: int
    sink_stag: int
    length: int


@dataclass(frozen=True)
class Outbound:
    """An outbound message as a transmit engine takes it whole (`RdmapEndpoint.take_message`): the RDMAP
    opcode and what its DDP segments are made of (RFC 5040 4, RFC 5041 5.2)."""
    opcode: Opcode
    length: int
    source: Gather | None = None
    """The payload in host memory (Write, Sends, Read Response); None when `body` holds it or it has none."""
    stag: int = 0
    """Write: the Data Sink STag; Read Request: the Data Source STag."""
    to: int = 0
    sink_stag: int = 0
    """Read Request and Read Response: the Data Sink STag and TO (RFC 5040 4.4)."""
    sink_to: int = 0
    invalidate_stag: int = 0
    body: bytes = b""
    """Terminate: the message's bytes (RFC 5040 4.8), which the engine reads from host memory."""


@dataclass(slots=True)
class _OutboundMessage:
    segments: Iterator[bytes]
    """The encoded segments still to hand over, each read from memory when taken."""
    remaining: int
    """How many: the message completes when the last one is handed over."""
    completion: WorkCompleted | None = None
    responds_to_read: bool = False
    outbound: Outbound | None = None
    lengths: list[int] = field(default_factory=list)
    """The bytes of each segment (header and payload), known without reading the payload."""


class RdmapEndpoint:
    """One RDMAP Stream endpoint (see the module docstring)."""

    def __init__(
        self,
        *,
        pd: ProtectionDomain,
        memory_table: MemoryTable,
        host_memory: SparseMemory,
        stream_id: int = 0,
        mulpdu: int = 1500,
        ird: int = 4,
        ord: int = 4,
        first_sequence: int = 0,
        sequence_bits: int = 16,
    ) -> None:
        self.pd = pd
        self.memory_table = memory_table
        self.host_memory = host_memory
        self.stream_id = stream_id
        self.ird = ird
        self.ord = ord
        self.source = DdpSource(mulpdu)
        self.control_memory = SparseMemory()
        """Private memory for Read Request and Terminate buffers (QN 1 and 2)."""
        self.sink = DdpSink(
            pd=pd,
            memory_table=memory_table,
            host_memory=host_memory,
            stream_id=stream_id,
            queues=(QueueNumber.SEND, QueueNumber.READ_REQUEST, QueueNumber.TERMINATE),
            tagged_access=placement_access,
            ulp_check=self._check_rdmap_header,
            first_sequence=first_sequence,
            sequence_bits=sequence_bits,
            report_placed=False,   # `receive` acts on deliveries and errors only
            checked_by_header=_CHECKED_BY_HEADER,
            checked_with_ulp_state=_CHECKED_WHILE_READING,
            untagged_checked_by_header=_UNTAGGED_CHECKED_BY_HEADER,
        )
        self._control_next_address = 0
        for _ in range(ird + 1):
            self._post_control_buffer(QueueNumber.READ_REQUEST, READ_REQUEST_LENGTH)
        self._post_control_buffer(QueueNumber.TERMINATE, _TERMINATE_BUFFER)
        self._outbound: deque[_OutboundMessage] = deque()
        self.on_outbound: Callable[[int], None] | None = None
        """Told the stream id whenever a message is queued to send, so a host with many streams visits only those
        that have something to send."""
        self._events: list[Event] = []
        self._reads_outstanding: deque[_PendingRead] = deque()
        self._inbound_reads_outstanding = 0
        self._next_wr_id = 1
        self.in_error = False
        self.terminate_sent: Terminate | None = None
        self.terminate_received: Terminate | None = None

    # -- posting -----------------------------------------------------------

    def post_receive(self, address: int, length: int) -> int:
        """Post a receive buffer on QN 0 for inbound Sends; returns its MSN."""
        return self.sink.post_buffer(QueueNumber.SEND, address, length)

    def post_write(self, remote_stag: int, remote_to: int, local_address: Gather, length: int) -> int:
        """RDMA Write `length` bytes from host memory to the peer's STag/TO (RFC 5040 5.1)."""
        self._check_usable()
        segments = self.source.encoded_tagged_segments(self._reader(local_address, length), length, remote_stag,
                                                       remote_to, tagged_rsvd_ulp(Opcode.RDMA_WRITE))
        return self._queue_work(Opcode.RDMA_WRITE, segments, True, length,
                                Outbound(Opcode.RDMA_WRITE, length, local_address, remote_stag, remote_to))

    def post_send(
        self,
        local_address: Gather,
        length: int,
        *,
        solicited: bool = False,
        invalidate_stag: int | None = None,
    ) -> int:
        """Send, Send with SE, Send with Invalidate or Send with SE and Invalidate (RFC 5040 5.3)."""
        self._check_usable()
        if invalidate_stag is None:
            opcode = Opcode.SEND_WITH_SE if solicited else Opcode.SEND
        else:
            opcode = Opcode.SEND_WITH_SE_AND_INVALIDATE if solicited else Opcode.SEND_WITH_INVALIDATE
        rsvd_ulp = untagged_rsvd_ulp(opcode, invalidate_stag or 0)
        segments = self.source.encoded_untagged_segments(self._reader(local_address, length), length,
                                                         QueueNumber.SEND, rsvd_ulp)
        return self._queue_work(opcode, segments, False, length,
                                Outbound(opcode, length, local_address, invalidate_stag=invalidate_stag or 0))

    def post_read(self, local_stag: int, local_to: int, remote_stag: int, remote_to: int, length: int) -> int:
        """RDMA Read `length` bytes of the peer's STag/TO into local STag/TO (RFC 5040 5.2)."""
        self._check_usable()
        if len(self._reads_outstanding) >= self.ord:
            raise ReadLimitExceeded(f"ORD {self.ord} RDMA Reads already outstanding")
        request = ReadRequest(local_stag, local_to, length, remote_stag, remote_to)
        segments = self.source.untagged_message(
            request.encode(), QueueNumber.READ_REQUEST, untagged_rsvd_ulp(Opcode.RDMA_READ_REQUEST)
        )
        wr_id = self._take_wr_id()
        self._reads_outstanding.append(_PendingRead(wr_id, local_stag, length))
        self._queue_segments(segments, Outbound(Opcode.RDMA_READ_REQUEST, length, None, remote_stag, remote_to,
                                                local_stag, local_to))
        return wr_id

    # -- LLP side ----------------------------------------------------------

    def data_to_send(self, limit: int | None = None) -> list[bytes]:
        """The queued outbound DDP segments, encoded, in transmission order: every one, or at most `limit`.
        Each is read from host memory as it is handed over; a Write or Send whose last segment is handed
        over completes here (`WorkCompleted` queued, RFC 5041 5.4)."""
        out: list[bytes] = []
        while self._outbound and (limit is None or len(out) < limit):
            message = self._outbound[0]
            out.append(next(message.segments))
            message.remaining -= 1
            if message.remaining:
                continue
            self._outbound.popleft()
            if message.completion is not None:
                self._events.append(message.completion)
            if message.responds_to_read:
                self._inbound_reads_outstanding -= 1
        return out

    def take_message(self) -> tuple[Outbound, list[int], WorkCompleted | None] | None:
        """The next outbound message whole, for a transmit engine that segments it and reads its payload
        itself: what it is, the bytes of each of its segments (header and payload: nothing is read from
        memory here) and the completion the caller reports once the peer has the message (RFC 5041 5.4),
        instead of `data_to_send()`'s."""
        if not self._outbound:
            return None
        message = self._outbound.popleft()
        assert message.outbound is not None
        segments = message.lengths
        if message.responds_to_read:
            self._inbound_reads_outstanding -= 1
        return message.outbound, segments, message.completion

    @property
    def has_segments_to_send(self) -> bool:
        """Whether `data_to_send` has a segment to hand over."""
        return bool(self._outbound)

    @property
    def segments_queued(self) -> int:
        """Outbound segments not handed over yet (none of them read from memory yet)."""
        return sum(message.remaining for message in self._outbound)

    def next_events(self) -> list[Event]:
        """Every event queued since the last call (completions included), oldest first."""
        events, self._events = self._events, []
        return events

    def receive(self, segment_bytes: bytes, sequence: int | None = None) -> bool:
        """Process one inbound DDP segment; `sequence` is its DDP-SSN (None: arrival order). True when it was
        placed with nothing to report (a segment in the middle of a Write, a Read Response or a Send, RFC 5041
        5.3), so `next_events` has nothing new; False otherwise."""
        if self.in_error:
            return False
        # A middle segment of a Write or a Read Response (tagged), or of a Send: placed, nothing to report. Each
        # straight path takes only its own kind, so the T bit (RFC 5041 4.1) says which one to ask.
        if sequence is not None and segment_bytes and (
                self.sink.place_next_tagged(segment_bytes, sequence, bool(self._reads_outstanding))
                if segment_bytes[0] & _DDP_TAGGED else self.sink.place_next_untagged(segment_bytes, sequence)):
            return True
        events = self._events
        for sink_event in self.sink.receive(segment_bytes, sequence):   # no `Placed` (`report_placed`)
            if isinstance(sink_event, SinkError):
                events.append(self._terminate_for_segment(sink_event.error, sink_event.segment,
                                                          sink_event.segment_length))
                break
            events.extend(self._on_delivered(sink_event))
            if self.in_error:
                break
        return False

    # -- internals ---------------------------------------------------------

    def _check_usable(self) -> None:
        if self.in_error:
            raise StreamInError("the RDMAP stream is in error (Terminate sent or received)")

    def _take_wr_id(self) -> int:
        wr_id = self._next_wr_id
        self._next_wr_id += 1
        return wr_id

    def _queue_work(self, opcode: Opcode, segments: Iterator[bytes], tagged: bool, length: int,
                    outbound: Outbound) -> int:
        """A Write or Send whose encoded `segments` are read from memory as they are handed over."""
        wr_id = self._take_wr_id()
        lengths = self.source.segment_lengths(length, tagged)
        self._enqueue(_OutboundMessage(segments, len(lengths), WorkCompleted(wr_id, opcode, length),
                                       outbound=outbound, lengths=lengths))
        return wr_id

    def _queue_segments(self, segments: list[DdpSegment], outbound: Outbound) -> None:
        """A short message built whole (Read Request, Terminate)."""
        encoded = [s.encode() for s in segments]
        self._enqueue(_OutboundMessage(iter(encoded), len(encoded), lengths=[len(e) for e in encoded],
                                       outbound=outbound))

    def _enqueue(self, message: _OutboundMessage) -> None:
        self._outbound.append(message)
        if self.on_outbound is not None:
            self.on_outbound(self.stream_id)

    def _reader(self, source: Gather, length: int | None = None):
        """Reads a message's bytes from host memory at `source` as its segments are produced."""
        memory = self.host_memory
        if not isinstance(source, int):
            pieces = [(address, size) for address, size in source]
            if any(size < 0 for _, size in pieces) or sum(size for _, size in pieces) != length:
                raise EncodeError(f"gather list lengths {[size for _, size in pieces]} do not add up to {length}")
            if len(pieces) != 1:
                return self._gather_reader(pieces)
            source = pieces[0][0]   # one piece (the driver's usual list) reads as its address alone does
        return lambda offset, count: memory.read(source + offset, count)

    def _gather_reader(self, pieces: list[tuple[int, int]]):
        """Reads a message's bytes from the (address, length) `pieces` of a gather list, in order."""
        memory = self.host_memory

        def read(offset: int, count: int) -> bytes:
            out = bytearray()
            for address, size in pieces:
                if count and offset < size:
                    take = min(size - offset, count)
                    out += memory.read(address + offset, take)
                    count -= take
                offset = max(0, offset - size)
            return bytes(out)
        return read

    def _post_control_buffer(self, qn: int, length: int) -> None:
        self.sink.post_buffer(qn, self._control_next_address, length, self.control_memory)
        self._control_next_address += length

    def _check_rdmap_header(self, segment: DdpSegment) -> RdmapError | None:
        """RFC 5040 4.1/4.2 header checks done before any buffer check."""
        problem = header_error(segment.header)
        if problem is not None:
            return problem
        opcode = rdmap_control_of(segment.header).opcode
        if opcode == Opcode.RDMA_READ_RESPONSE and not self._reads_outstanding:
            return RdmapError.UNEXPECTED_OPCODE
        return None

    def _on_delivered(self, delivered: Delivered) -> list[Event]:
        opcode = Opcode(rdmap_control_of(delivered.last_header).opcode)
        if opcode is Opcode.RDMA_WRITE:
            return [WriteReceived(delivered.stag, delivered.length)]
        if opcode is Opcode.RDMA_READ_RESPONSE:
            read = self._reads_outstanding.popleft()
            return [ReadCompleted(read.wr_id, delivered.length)]
        if opcode is Opcode.RDMA_READ_REQUEST:
            return self._on_read_request(delivered)
        if opcode is Opcode.TERMINATE:
            return self._on_terminate(delivered)
        return self._on_send(opcode, delivered)

    def _on_send(self, opcode: Opcode, delivered: Delivered) -> list[Event]:
        invalidated = None
        if opcode.carries_invalidate_stag:
            invalidated = invalidate_stag_of(delivered.last_header)
            problem = self._invalidate(invalidated)
            if problem is not None:
                return [self._terminate_for_message(problem, delivered)]
        buffer = delivered.buffer
        return [SendReceived(opcode, buffer.address, delivered.length, opcode.solicited, invalidated)]

    def _invalidate(self, stag: int) -> RdmapError | None:
        """Invalidate `stag` for a Send with Invalidate (RFC 5040 5.3)."""
        region = self.memory_table.lookup(stag)
        if region is None or not region.valid:
            return RdmapError.OPERATION_STAG_NOT_INVALIDATED
        if region.pd != self.pd or (region.stream is not None and region.stream != self.stream_id):
            return RdmapError.PROTECTION_STAG_NOT_INVALIDATED
        self.memory_table.invalidate(stag)
        return None

    def _on_read_request(self, delivered: Delivered) -> list[Event]:
        buffer = delivered.buffer
        self._post_control_buffer(QueueNumber.READ_REQUEST, READ_REQUEST_LENGTH)
        try:
            request = ReadRequest.decode(buffer.memory.read(buffer.address, delivered.length))
        except DecodeError:
            return [self._terminate_for_message(RdmapError.OPERATION_UNSPECIFIED, delivered)]
        if self._inbound_reads_outstanding >= self.ird:
            return [self._terminate_for_message(RdmapError.CATASTROPHIC_STREAM, delivered, request)]
        fault = self.memory_table.check_tagged(
            request.source_stag, request.source_to, request.size, self.stream_id, self.pd, Access.REMOTE_READ
        )
        if fault is not None:
            return [self._terminate_for_message(fault.rdmap_error, delivered, request)]
        address = 0
        if request.size:
            address = self.memory_table.lookup(request.source_stag).host_address(request.source_to)
        segments = self.source.encoded_tagged_segments(self._reader(address), request.size, request.sink_stag,
                                                       request.sink_to, tagged_rsvd_ulp(Opcode.RDMA_READ_RESPONSE))
        self._inbound_reads_outstanding += 1
        lengths = self.source.segment_lengths(request.size, tagged=True)
        self._enqueue(_OutboundMessage(segments, len(lengths), lengths=lengths, responds_to_read=True,
                                       outbound=Outbound(Opcode.RDMA_READ_RESPONSE, request.size,
                                                         address if request.size else None,
                                                         sink_stag=request.sink_stag, sink_to=request.sink_to)))
        return []

    def _on_terminate(self, delivered: Delivered) -> list[Event]:
        buffer = delivered.buffer
        body = buffer.memory.read(buffer.address, delivered.length)
        self.in_error = True
        try:
            terminate = Terminate.decode(body)
        except DecodeError:
            terminate = Terminate(0, RdmapError.OPERATION_UNSPECIFIED.etype, RdmapError.OPERATION_UNSPECIFIED.code)
        self.terminate_received = terminate
        return [TerminateReceived(terminate)]

    def _terminate_for_message(
        self, error: RdmapError, delivered: Delivered, request: ReadRequest | None = None
    ) -> TerminateSent:
        """Terminate for an error found on a delivered message: its last DDP header."""
        header = delivered.last_header
        segment_length = header.length + (delivered.length - (0 if header.tagged else header.mo))
        return self._send_terminate(error.number, segment_length, header, request)

    def _terminate_for_segment(
        self, error: DdpError | RdmapError, segment: DdpSegment | None, segment_length: int
    ) -> TerminateSent:
        if segment is None:
            return self._send_terminate(error.number, None, None, None)
        request = None
        header = segment.header
        if not header.tagged and header.qn == QueueNumber.READ_REQUEST and len(segment.payload) == READ_REQUEST_LENGTH:
            request = ReadRequest.decode(segment.payload)
        return self._send_terminate(error.number, segment_length, header, request)

    def _send_terminate(self, number: ErrorNumber, segment_length, header, request) -> TerminateSent:
        """Queue the one message allowed after an error (RFC 5041 7.1) and enter error."""
        terminate = Terminate(
            layer=int(number.layer),
            etype=number.etype,
            code=number.code,
            segment_length=segment_length,
            ddp_header=header,
            rdma_header=request,
        )
        self.in_error = True
        self.sink.use_final_message()
        body = terminate.encode()
        segments = self.source.untagged_message(body, QueueNumber.TERMINATE, untagged_rsvd_ulp(Opcode.TERMINATE))
        self._queue_segments(segments, Outbound(Opcode.TERMINATE, len(body), body=body))
        self.terminate_sent = terminate
        return TerminateSent(terminate)

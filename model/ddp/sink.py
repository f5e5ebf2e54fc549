"""DDP Data Sink for one DDP Stream: RFC 5041 5.3, 5.4, 7.1 and 7.2.

`DdpSink.receive(segment_bytes, sequence)` validates a segment before any
Placement, places its payload into host memory, and returns events:
`Placed`, `Delivered` and at most one `SinkError`.

Validation order (RFC 5041 7.1, 7.2):

1. DV must be 1: tagged -> 0x1/0x04, untagged -> 0x2/0x06 (4.1, 7.2).
2. Untagged: the QN is one of the stream's queues -> 0x2/0x01 (7.1 item 1).
3. The ULP's own header check (`ulp_check`, e.g. RDMAP version and opcode),
   so that a wrong opcode is reported before any buffer is touched.
4. Untagged: the (QN, MSN) buffer.  Buffers get MSNs in posting order,
   starting at 1 per queue.  The legal window runs from the MSN of the first
   buffer not yet consumed.  An MSN behind that window (serial arithmetic
   mod 2^32, i.e. an already completed message) or 2^31 or more ahead is
   outside the legal range -> 0x2/0x03 (item 5).  An MSN inside the forward
   half but beyond the last posted buffer has no buffer -> 0x2/0x02 (item 2:
   the ULP did not post enough buffers, the "system fault" of its note).
   An MSN inside the window whose buffer is already consumed (a later
   message completed first) is again outside the legal range -> 0x2/0x03.
   Then, for non-zero payloads, MO must be a legal offset of the buffer
   (MO < buffer length) -> 0x2/0x04 (item 3), and MO + payload length must
   not exceed the buffer -> 0x2/0x05 "message too long" (item 4: the segment
   starts inside the buffer but runs past its end).
   Zero-length untagged segments still need their buffer (for delivery) but
   place nothing, so MO is not checked.
   A second last segment (L = 1) for a buffer whose message's last segment
   has already arrived, and awaits delivery of the segments before it, is
   outside the legal range too -> 0x2/0x03: delivering it would complete the
   message twice (5.3: at most once).  RFC 5041 names no code for this
   case; MSN range is the one that says "this message has ended".
5. Tagged, non-zero length only (5.2): `MemoryTable.check_tagged` (STag
   valid, PD and stream association, access right, TO range, TO + length
   range, 64-bit wrap) -> 0x1/0x00, 0x1/0x02, 0x1/0x01, 0x1/0x03.  A missing
   access right has no DDP number; it is reported as the RFC 5040 Remote
   Protection Error "access rights violation" (layer RDMAP, 0x1/0x02).

A segment too short to hold a DDP header has no 7.2 number of its own; it is
reported as Local Catastrophic (0x0/0x00).

After an error the sink places nothing more, reports the error once and
silently drops every later segment; `final_message_allowed` tells the ULP
that it may send one more message (the Terminate) (RFC 5041 7.1).

Ordering (RFC 5041 5.3, 5.4): Placement happens on arrival, in any order.
Delivery follows the LLP sequence number (for DDP over SCTP the DDP-SSN,
RFC 5043 6.1) compared in serial arithmetic modulo 2^`sequence_bits`: a
message is delivered once its last segment and every segment before it in
sequence have arrived.  A segment whose sequence number was already seen
(or lies behind the delivery point) is a duplicate and is dropped without
any event, so no message is delivered twice.  With a `window`, a sequence
number `window` or more ahead of the delivery point (and less than half the
sequence space) cannot be explained by the segments a bounded receiver
tracks: RFC 5043 10 lets the receiver terminate the stream, so the sink
returns `OutOfWindow`, places nothing and drops every later segment, as after
an error.  Without sequence numbers
(`sequence=None`) arrival order is the delivery order and the LLP is taken
to deliver each segment exactly once (as MPA/TCP does); use one mode per
sink.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Union

from model.ddp.segment import DDP_VERSION, TAGGED_HEADER_LENGTH, UNTAGGED_HEADER_LENGTH, DdpHeader, DdpSegment
from model.errors import DdpError, DecodeError, EncodeError, ErrorNumber, RdmapError, check_field
from model.ddp.memory import Access, MemoryTable, ProtectionDomain, SparseMemory, TaggedFault

ProtocolError = Union[DdpError, RdmapError]
UlpCheck = Callable[[DdpSegment], Union[ProtocolError, None]]
TaggedAccessPolicy = Callable[[DdpHeader], Access]

_MSN_MODULUS = 1 << 32
_TAGGED_FIELDS = struct.Struct("!BBIQ")
"""DDP Control Field, RsvdULP, STag and TO of a tagged header (RFC 5041 4.1, 4.2)."""
_TAGGED_MIDDLE = 0x80 | DDP_VERSION
"""The Control Field of a tagged segment that is not a message's last: T = 1, L = 0, Rsvd 0, DV 1 (4.1)."""
_UNTAGGED_FIELDS = struct.Struct("!BB4xIII")
"""DDP Control Field, the RsvdULP's first byte (its other four skipped), QN, MSN and MO of an untagged header
(RFC 5041 4.1, 4.3)."""
_UNTAGGED_MIDDLE = DDP_VERSION
"""The Control Field of an untagged segment that is not a message's last: T = 0, L = 0, Rsvd 0, DV 1 (4.1)."""


@dataclass(frozen=True)
class UntaggedBuffer:
    """A posted Untagged Buffer: host `address`, `length`, the MSN it will take."""

    qn: int
    msn: int
    address: int
    length: int
    memory: SparseMemory = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Placed:
    """`length` payload bytes of a segment were written at host `address`."""

    address: int
    length: int
    header: DdpHeader


@dataclass(frozen=True, slots=True)
class Delivered:
    """A complete DDP Message delivered to the ULP (RFC 5041 5.4).

    `length` is the ULP Message Length: MO + payload length of the last
    segment for untagged messages (5.4), the sum of the segment payloads for
    tagged ones.  `buffer` is the consumed Untagged Buffer (None if tagged).
    """

    first_header: DdpHeader
    last_header: DdpHeader
    length: int
    buffer: UntaggedBuffer | None

    @property
    def tagged(self) -> bool:
        return self.last_header.tagged

    @property
    def rsvd_ulp(self) -> int:
        return self.last_header.rsvd_ulp

    @property
    def qn(self) -> int | None:
        return None if self.tagged else self.last_header.qn

    @property
    def msn(self) -> int | None:
        return None if self.tagged else self.last_header.msn

    @property
    def stag(self) -> int | None:
        return self.last_header.stag if self.tagged else None


@dataclass(frozen=True)
class SinkError:
    """A receive error (RFC 5041 7.1 last paragraph): header, error, segment length."""

    error: ProtocolError
    segment_length: int
    segment: DdpSegment | None
    raw: bytes = field(repr=False)

    @property
    def number(self) -> ErrorNumber:
        return self.error.number

    @property
    def header(self) -> DdpHeader | None:
        return None if self.segment is None else self.segment.header


@dataclass(frozen=True)
class OutOfWindow:
    """A sequence number `ahead` of the delivery point by `window` or more (RFC 5043 10)."""

    sequence: int
    ahead: int
    window: int


@dataclass
class _Queue:
    next_post_msn: int = 1
    buffers: dict = field(default_factory=dict)  # MSN -> UntaggedBuffer, posting order

    @property
    def first_msn(self) -> int:
        """MSN of the first buffer not yet consumed (start of the legal window)."""
        return next(iter(self.buffers)) if self.buffers else self.next_post_msn


@dataclass(frozen=True, slots=True)
class _Arrived:
    segment: DdpSegment
    buffer: UntaggedBuffer | None


def _remote_write(header: DdpHeader) -> Access:
    return Access.REMOTE_WRITE


class DdpSink:
    """The Data Sink half of one DDP Stream (see the module docstring)."""

    def __init__(
        self,
        *,
        pd: ProtectionDomain,
        memory_table: MemoryTable,
        host_memory: SparseMemory,
        stream_id: int,
        queues: Iterable[int] = (0,),
        tagged_access: TaggedAccessPolicy = _remote_write,
        ulp_check: UlpCheck | None = None,
        first_sequence: int = 0,
        sequence_bits: int = 16,
        window: int | None = None,
        report_placed: bool = True,
        checked_by_header: Mapping[int, Access] | None = None,
        checked_with_ulp_state: Mapping[int, Access] | None = None,
        untagged_checked_by_header: Mapping[int, int] | None = None,
        unbuffered_queues: Iterable[int] = (),
    ) -> None:
        self.pd = pd
        self._report_placed = report_placed
        """False: `receive` places without reporting `Placed` (for a ULP that reads no placement events)."""
        self._checked_by_header = checked_by_header or {}
        """The tagged RsvdULP values whose `ulp_check` passes on the header alone (no stream state enters it) and
        the access right `tagged_access` asks for them: what lets `place_next_tagged` take a segment."""
        self._checked_with_ulp_state = checked_with_ulp_state or {}
        """The tagged RsvdULP values whose `ulp_check` passes on the header when a state of the ULP's holds (its
        caller says so: `place_next_tagged`'s `ulp_state_holds`), and their access right."""
        self._untagged_checked_by_header = untagged_checked_by_header or {}
        """The first byte of an untagged RsvdULP with which `ulp_check` passes on the header alone, and the QN the
        segment must then come on: what lets `place_next_untagged` take a segment."""
        self._unbuffered = frozenset(unbuffered_queues)
        """Queues whose messages need no posted buffer (an RDMA Read Request answered by the RNIC itself, RFC
        5040 4.4): `ulp_check` decides them whole, nothing of them is placed, and they are delivered in
        sequence with no buffer."""
        self.memory_table = memory_table
        self.host_memory = host_memory
        self.stream_id = stream_id
        self._queues = {check_field(qn, 32, "QN"): _Queue() for qn in queues}
        self._tagged_access = tagged_access
        self._ulp_check = ulp_check
        self._modulus = 1 << sequence_bits
        self._next_sequence = first_sequence % self._modulus
        if window is not None and not 0 < window <= self._modulus // 2:
            raise ValueError(f"window must be in 1..{self._modulus // 2}, not {window}")
        self._window = window
        self.out_of_window: OutOfWindow | None = None
        self._pending: dict[int, _Arrived] = {}
        self._last_arrived: set[tuple[int, int]] = set()  # (QN, MSN) whose L = 1 segment awaits delivery
        self._message_bytes = 0
        self._message_first: DdpHeader | None = None
        self.error: SinkError | None = None
        self.final_message_allowed = False

    # -- ULP side ---------------------------------------------------------

    def post_buffer(self, qn: int, address: int, length: int, memory: SparseMemory | None = None) -> int:
        """Post an Untagged Buffer on `qn`; returns the MSN it is assigned (RFC 5041 4.3)."""
        queue = self._queues.get(qn)
        if queue is None:
            raise EncodeError(f"QN {qn} is not a queue of this stream")
        if address < 0 or length < 0:
            raise EncodeError("buffer address and length must be non-negative")
        msn = queue.next_post_msn
        queue.buffers[msn] = UntaggedBuffer(qn, msn, address, length, memory or self.host_memory)
        queue.next_post_msn = (msn + 1) % _MSN_MODULUS
        return msn

    def posted_buffers(self, qn: int) -> list[UntaggedBuffer]:
        return list(self._queues[qn].buffers.values())

    def revoke_buffer(self, qn: int, msn: int) -> UntaggedBuffer | None:
        """Take back the buffer posted with `msn` on `qn`, if it is still posted (RFC 5041 leaves
        buffer management to the ULP); a later segment for that MSN is out of the legal range."""
        self._last_arrived.discard((qn, msn % _MSN_MODULUS))
        return self._queues[qn].buffers.pop(msn % _MSN_MODULUS, None)

    def reset_queue(self, qn: int) -> None:
        """Take back every buffer of `qn`; the next post takes MSN 1 again, as on a new stream (4.3)."""
        self._queues[qn] = _Queue()
        self._last_arrived = {(queue, msn) for queue, msn in self._last_arrived if queue != qn}

    def local_failure(self, raw: bytes) -> SinkError:
        """Placement of an accepted segment failed below DDP (the host memory refused a write):
        a Local Catastrophic Error (RFC 5041 7.2), after which the stream is in error (7.1)."""
        segment = DdpSegment.decode(raw)
        return self._fail(DdpError.LOCAL_CATASTROPHIC, raw, segment)

    @property
    def delivery_point(self) -> int:
        """The lowest sequence number not yet delivered: every one before it was."""
        return self._next_sequence

    def rearm(self, first_sequence: int | None = None) -> None:
        """The ULP starts the stream afresh after an error: no error, no message in progress,
        delivery from `first_sequence` if given (a new session, RFC 5043 6.1); posted buffers stay
        posted."""
        if first_sequence is not None:
            self._next_sequence = first_sequence % self._modulus
        self.out_of_window = None
        self.error = None
        self.final_message_allowed = False
        self._pending.clear()
        self._last_arrived.clear()
        self._message_bytes = 0
        self._message_first = None

    def use_final_message(self) -> bool:
        """Claim the one outbound message allowed after an error (RFC 5041 7.1)."""
        allowed = self.final_message_allowed
        self.final_message_allowed = False
        return allowed

    # -- LLP side ---------------------------------------------------------

    def sequence_seen(self, sequence: int) -> bool:
        """Whether a segment with this sequence number was received before (or lies behind the
        delivery point): `receive` drops it as a duplicate."""
        sequence %= self._modulus
        ahead = (sequence - self._next_sequence) % self._modulus
        return ahead >= self._modulus // 2 or sequence in self._pending

    @property
    def failed(self) -> bool:
        """An error or an out-of-window sequence number ended the stream: later segments are dropped."""
        return self.error is not None or self.out_of_window is not None

    def receive(self, segment_bytes: bytes, sequence: int | None = None
                ) -> list[Placed | Delivered | SinkError | OutOfWindow]:
        if self.failed:
            return []  # RFC 5041 7.1: silently drop every later segment
        raw = bytes(segment_bytes)
        if sequence is None:
            sequence = self._next_sequence
        else:
            sequence %= self._modulus
            if self.sequence_seen(sequence):
                return []  # duplicate: already placed, never delivered twice (5.3)
            ahead = (sequence - self._next_sequence) % self._modulus
            if self._window is not None and ahead >= self._window:
                self.out_of_window = OutOfWindow(sequence, ahead, self._window)
                self.final_message_allowed = True
                return [self.out_of_window]
        try:
            segment = DdpSegment.decode(raw)
        except DecodeError:
            return [self._fail(DdpError.LOCAL_CATASTROPHIC, raw, None)]
        problem, buffer = self._validate(segment)
        if problem is not None:
            return [self._fail(problem, raw, segment)]
        events: list[Placed | Delivered | SinkError] = []
        placed = self._place(segment, buffer)
        if placed is not None and self._report_placed:
            events.append(placed)
        if sequence == self._next_sequence:
            # The next in order (nearly every segment): delivered now, not held in `_pending` on the way.
            self._next_sequence = (sequence + 1) % self._modulus
            delivered = self._take(segment, buffer)
            if delivered is not None:
                events.append(delivered)
            if self._pending:
                events.extend(self._deliver_ready())
            return events
        self._pending[sequence] = _Arrived(segment, buffer)
        if buffer is not None and segment.header.last:
            self._last_arrived.add((buffer.qn, buffer.msn))
        events.extend(self._deliver_ready())
        return events

    def place_next_tagged(self, segment_bytes: bytes | memoryview, sequence: int, ulp_state_holds: bool = False
                          ) -> bool:
        """`receive` of the common segment, without a segment object: the next in sequence (nothing pending, no
        error), tagged, not its message's last (L = 0, DV = 1), with payload, of a message already begun
        (`receive` took its first segment), and an RsvdULP in `checked_by_header` (or, when the caller says the
        ULP's state holds, in `checked_with_ulp_state`). The same checks in the same order: DV (7.2), the ULP's
        header check (passed, by those tables), `check_tagged` (7.1, 8.2);
        then placement on arrival (5.3) and the message's byte count (5.4). Only with `report_placed` off (no
        `Placed` to report). True once placed; False, with nothing done, for any other segment or a failed
        check, which `receive` takes and reports."""
        if (sequence != self._next_sequence or self._pending or self._message_first is None
                or self.error is not None or self.out_of_window is not None or self._report_placed
                or len(segment_bytes) <= TAGGED_HEADER_LENGTH):
            return False
        control, rsvd_ulp, stag, to = _TAGGED_FIELDS.unpack_from(segment_bytes, 0)
        if control != _TAGGED_MIDDLE:
            return False
        access = self._checked_by_header.get(rsvd_ulp)
        if access is None and ulp_state_holds:
            access = self._checked_with_ulp_state.get(rsvd_ulp)
        if access is None:
            return False
        payload = segment_bytes[TAGGED_HEADER_LENGTH:]
        length = len(payload)
        table = self.memory_table
        if table.check_tagged(stag, to, length, self.stream_id, self.pd, access) is not None:
            return False
        region = table.lookup(stag)   # there, since the check passed: `host_address` in place
        self.host_memory.write(region.address + (to - region.base_to), payload)   # type: ignore[union-attr]
        self._next_sequence = (sequence + 1) % self._modulus
        self._message_bytes += length
        return True

    def place_next_untagged(self, segment_bytes: bytes | memoryview, sequence: int) -> bool:
        """`receive` of the common untagged segment (a Send's middle), without a segment object: the next in
        sequence (nothing pending, no error), untagged, not its message's last (L = 0, DV = 1), with payload, of
        a message already begun, its RsvdULP's first byte and QN in `untagged_checked_by_header`. The same checks
        in the same order: DV (7.2), the QN (7.1 item 1), the ULP's header check (passed, by
        `untagged_checked_by_header`), the buffer's MSN, MO and length (`_validate_untagged`: items 5, 2, 3,
        4); then placement on arrival (5.3) and the message's byte count (5.4). Only with `report_placed` off.
        True once placed; False, with nothing done, for any other segment or a failed check, which `receive`
        takes and reports."""
        if (sequence != self._next_sequence or self._pending or self._message_first is None
                or self.error is not None or self.out_of_window is not None or self._report_placed
                or len(segment_bytes) <= UNTAGGED_HEADER_LENGTH):
            return False
        control, ulp_first, qn, msn, mo = _UNTAGGED_FIELDS.unpack_from(segment_bytes, 0)
        queue = self._queues.get(qn)
        if (control != _UNTAGGED_MIDDLE or queue is None or self._untagged_checked_by_header.get(ulp_first) != qn
                or (msn - queue.first_msn) % _MSN_MODULUS >= _MSN_MODULUS // 2):
            return False
        buffer = queue.buffers.get(msn)
        payload = segment_bytes[UNTAGGED_HEADER_LENGTH:]
        length = len(payload)
        if buffer is None or mo >= buffer.length or mo + length > buffer.length:
            return False
        buffer.memory.write(buffer.address + mo, payload)
        self._next_sequence = (sequence + 1) % self._modulus
        self._message_bytes += length
        return True

    # -- internals ----------------------------------------------------------

    def _fail(self, error: ProtocolError, raw: bytes, segment: DdpSegment | None) -> SinkError:
        self.error = SinkError(error, len(raw), segment, raw)
        self.final_message_allowed = True
        return self.error

    def _validate(self, segment: DdpSegment) -> tuple[ProtocolError | None, UntaggedBuffer | None]:
        header = segment.header
        if not header.version_ok:
            return (DdpError.TAGGED_INVALID_VERSION if header.tagged else DdpError.UNTAGGED_INVALID_VERSION), None
        if not header.tagged and header.qn not in self._queues:
            return DdpError.INVALID_QN, None
        if self._ulp_check is not None:
            problem = self._ulp_check(segment)
            if problem is not None:
                return problem, None
        if header.tagged:
            return self._validate_tagged(segment), None
        if header.qn in self._unbuffered:
            return None, None
        return self._validate_untagged(segment)

    def _validate_tagged(self, segment: DdpSegment) -> ProtocolError | None:
        header = segment.header
        fault = self.memory_table.check_tagged(
            header.stag, header.to, len(segment.payload), self.stream_id, self.pd, self._tagged_access(header)
        )
        if fault is None:
            return None
        if fault is TaggedFault.ACCESS_RIGHTS:
            return fault.rdmap_error
        return fault.ddp_error

    def _validate_untagged(self, segment: DdpSegment) -> tuple[ProtocolError | None, UntaggedBuffer | None]:
        header = segment.header
        queue = self._queues[header.qn]
        half = _MSN_MODULUS // 2
        if (header.msn - queue.first_msn) % _MSN_MODULUS >= half:
            return DdpError.MSN_RANGE, None  # behind the window: already completed
        buffer = queue.buffers.get(header.msn)
        if buffer is None:
            if (header.msn - queue.next_post_msn) % _MSN_MODULUS < half:
                return DdpError.NO_BUFFER, None  # beyond the last posted buffer
            return DdpError.MSN_RANGE, None  # inside the window but already consumed
        if header.last and (header.qn, header.msn) in self._last_arrived:
            return DdpError.MSN_RANGE, None  # the message's last segment came already (5.3: at most once)
        length = len(segment.payload)
        if length:
            if header.mo >= buffer.length:
                return DdpError.INVALID_MO, None
            if header.mo + length > buffer.length:
                return DdpError.MESSAGE_TOO_LONG, None
        return None, buffer

    def _place(self, segment: DdpSegment, buffer: UntaggedBuffer | None) -> Placed | None:
        if not segment.payload or (buffer is None and not segment.header.tagged):   # unbuffered: nothing placed
            return None
        header = segment.header
        if header.tagged:
            region = self.memory_table.lookup(header.stag)
            address = region.host_address(header.to)
            self.host_memory.write(address, segment.payload)
        else:
            address = buffer.address + header.mo
            buffer.memory.write(address, segment.payload)
        return Placed(address, len(segment.payload), header)

    def _deliver_ready(self) -> list[Delivered]:
        delivered = []
        while self._next_sequence in self._pending:
            arrived = self._pending.pop(self._next_sequence)
            self._next_sequence = (self._next_sequence + 1) % self._modulus
            message = self._take(arrived.segment, arrived.buffer)
            if message is not None:
                delivered.append(message)
        return delivered

    def _take(self, segment: DdpSegment, buffer: UntaggedBuffer | None) -> Delivered | None:
        """The segment at the delivery point joins its message; a last segment (L = 1) delivers it."""
        header = segment.header
        if self._message_first is None:
            self._message_first = header
        self._message_bytes += len(segment.payload)
        if not header.last:
            return None
        if header.tagged:
            length = self._message_bytes
            buffer = None
        else:
            length = header.mo + len(segment.payload)  # RFC 5041 5.4
            if header.qn not in self._unbuffered:
                buffer = self._queues[header.qn].buffers.pop(header.msn, buffer)
            self._last_arrived.discard((header.qn, header.msn))
        delivered = Delivered(self._message_first, header, length, buffer)
        self._message_first = None
        self._message_bytes = 0
        return delivered

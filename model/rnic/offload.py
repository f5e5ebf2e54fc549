"""A host whose receive data plane is the receive engine and whose control plane is software.

`OffloadRnic` is a `SoftRnic` whose inbound frames go through a receive
engine (`hdl.rx.engine.RxEngine`, or its golden model
`model.engine.rx.ReceiveEngineModel`) instead of its own codecs: the engine
places DDP segments into host memory and hands the host only records, as
the engine ABI (`abi`) defines them:

* a whole frame on the exception stream (anything it does not own: an INIT,
  a frame before the association's row is written...) goes to the
  SoftRnic's own receive path;
* for a delivered packet, the chunks it passed up (control chunks, PPID 17
  session control) and one ack record per DATA chunk (TSN, length,
  disposition) go to the SCTP association as one packet
  (`Association.receive_offloaded`): chunks the engine placed count for the
  SACKs by TSN alone (cumulative TSN, gap blocks, duplicates, RFC 4960 6.2);
* the report records (per message: a message's last segment, every QN 1 and
  QN 2 segment and every record but an accepted one, `abi.rx.report_withheld`;
  the accepted ones in DDP-SSN order per stream) go to the DDP session (every
  DDP-SSN once, RFC 5043 6.1, so a session Terminate is judged after the
  segments before it: an accepted record at DDP-SSN n hands it every earlier
  DDP-SSN of the stream without a record, placed by the engine, RFC 5041
  5.3) and to the stream's `OffloadedEndpoint`: a Send's last record completes the posted
  receive whose MSN it names, with byte_len = message_length (RFC 5041 5.4),
  and invalidates its STag (RFC 5040 5.3); a Read Request's record makes the
  endpoint read the request from its QN 1 buffer and queue the Read
  Response (sent by software); a Terminate's record (QN 2) ends the stream;
  a Read Response's last record completes the Read; an ERROR record sends a
  Terminate with the record's RFC number (RFC 5040 7, RFC 5041 7.2). When the
  engine SACKs, the chunks placed without a record reach the association by
  count (`Association.placed_unnamed`), for its SHUTDOWN's Cumulative TSN Ack.
  An engine reporting every segment (`segment_reports`) works the same way.

Transmit stays in software (the SoftRnic's RDMAP endpoints, DDP sessions and
association) until the transmit engine lands.

Tables: the association row is written when the association is up; a
region row when memory is registered (STag = row << key_bits | key, row 0
never used, the key drawn afresh, `key_rng`), cleared on deregistration or
invalidation; a stream row when a session is about to open, before the
first message that lets the peer send segments (the initiator's Initiate,
the responder's Accept), with
`first_ssn` the DDP-SSN of the peer's first DDP segment: 1, or 2 at a
responder waiting for the RTR (RFC 6581 9). The RTR (DDP-SSN 1, a
zero-length RDMA Write from the model) then lies behind the engine's window:
the engine reports it DUPLICATE without placing anything, and its record's
header fields go to the session, which judges it. Buffers: each stream
keeps IRD + 1 buffers posted on QN 1 and one on QN 2 in the host's control
area (RFC 5040 4.2), reposted as they are used; receives beyond the engine's
posted buffers per queue wait in the host and are posted as earlier ones
complete. When a stream is released (RFC 5043 6.6) its row is cleared and
its queues revoked, so the next session's MSNs start at 1 (RFC 5041 4.3).

The engine is driven through commands (`EngineCommand`): `engine=` a
`ModelEngine` runs them at once; without one, the caller takes them
(`take_engine_work`), runs them on its engine and hands each frame's
records back (`engine_output`). A command made while the host handles
records goes ahead of the frames still waiting, so a row is written before
the next frame meets the engine.

Receive window (RFC 4960 6.2).  The engine keeps at most `SEQUENCE_WINDOW`
(32) DDP-SSNs of a stream from the lowest one missing: a segment beyond
ends the stream (INVALID_SSN, RFC 5043 10), and its record store holds the
records of segments placed past a gap.  SCTP's a_rwnd does not count the
chunks a SACK's gap blocks acknowledge, so a plain window would let a peer
send on past a lost chunk without bound.  The host therefore counts every
record the engine holds (`reports_waiting`, after each frame) as a full
DATA chunk of buffer still in use (`Association.hold_placed`) and offers a
receive buffer of `WINDOW_SLOTS` such chunks: a peer filling the window
with full segments has at most that many in flight past the lowest missing
one, half the engine's window, which leaves room for the short last
segments of messages.  A peer sending many short segments may still pass
the engine's window; the stream then ends as RFC 5043 10 allows.

Limits: segments arriving on the exception path (a frame the engine passes
up whole after the association's row is written) are not placed.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Protocol, Union

from model.ddp.memory import Access, MemoryRegion, ProtectionDomain, SparseMemory
from model.ddp.negotiation import LocalResources, NegotiatedParameters
from model.ddp.sctp_adaptation import DdpSegmentChunkData
from model.ddp.segment import DdpSegment, TaggedHeader, UntaggedHeader
from model.ddp.session import Message, SegmentReceived
from model.ddp.session import StreamReleased as SessionStreamReleased
from model.ddp.sink import Delivered, UntaggedBuffer
from model.engine.config import AssociationEntry, BufferEntry, ReceiveConfig, RegionEntry, StreamEntry
from model.engine.sack import SackRecord
# the engine ABI's names (abi) as the engine's model gives them: model/ reaches the ABI only there
from model.engine.rx import (ASSOCIATION_BITS, SEQUENCE_WINDOW, STAG_KEY_BITS, AckDisposition, FrameAction,
                             FrameResult, PeerSack, ReceiveEngineModel, SegmentStatus, SegmentVerdict,
                             check_key_bits)
from model.errors import DdpError, RdmapError, RnicError
from model.rdmap.endpoint import RdmapEndpoint, WriteReceived
from model.rdmap.messages import Opcode, QueueNumber, RdmapControl
from model.rnic.host import RnicConfig, SessionPolicy, SoftRnic, accept_every_session
from model.sctp.association import PlacedData
from model.sctp.config import AssociationConfig
from model.sctp.packet import PPID_DDP_SEGMENT
from model.sctp.events import AssociationEstablished

ASSOCIATION_INDEX = 0
"""The host's one association takes row 0."""
CONTROL_SLOT = 64
"""Bytes of host memory per QN 1 or QN 2 buffer: a Read Request (28) or a Terminate (at most 52)."""
_SSN_MASK = 0xFFFF


# -- the engine's interface: commands in, records out ------------------------------------------


@dataclass(frozen=True)
class FrameIn:
    frame: bytes
    now: float


@dataclass(frozen=True)
class AssociationRow:
    entry: AssociationEntry
    valid: bool = True


@dataclass(frozen=True)
class RegionRow:
    index: int
    entry: RegionEntry | None


@dataclass(frozen=True)
class StreamRow:
    entry: StreamEntry
    valid: bool = True


@dataclass(frozen=True)
class BufferPost:
    entry: BufferEntry


@dataclass(frozen=True)
class QueueRevoke:
    """Every buffer of the queue taken back; its next post takes MSN 1."""

    association: int
    stream_id: int
    qn: int


@dataclass(frozen=True)
class SackRow:
    """The acknowledgement unit's row (`abi.rx.sack_row_layout`)."""

    association: int
    cumulative_tsn: int
    delay_ticks: int
    window: int
    held_bytes: int
    enabled: bool
    peer_sacks: bool = False
    """The peer's SACK chunks of the association go to the transmit engine's transport unit, not the host."""


@dataclass(frozen=True)
class SackFlush:
    """The SACK the association owes (a packet waiting for its delayed SACK), sent now (`abi.rx.sack_row_layout`
    ``flush``); nothing else of the row changes."""

    association: int


EngineCommand = Union[FrameIn, AssociationRow, RegionRow, StreamRow, BufferPost, QueueRevoke, SackRow, SackFlush]


@dataclass(frozen=True)
class Ack:
    """An ack record (`abi.rx.ack_layout`)."""

    tsn: int
    disposition: AckDisposition
    length: int
    immediate: bool = False
    """The DATA chunk's I bit (RFC 9260 3.3.1)."""


WINDOW_SLOTS = SEQUENCE_WINDOW // 2
"""Full DATA chunks the host's receive buffer holds (see the module docstring)."""


@dataclass
class EngineOutput:
    """The records the engine emitted for one frame."""

    frame: bytes | None = None
    """The whole frame, passed up on the exception stream."""
    chunks: list[bytes] = field(default_factory=list)
    """Chunks of a delivered packet passed up on the exception stream, without padding."""
    acks: list[Ack] = field(default_factory=list)
    reports: list[SegmentVerdict] = field(default_factory=list)
    """SEGMENT report records, in the order the engine emitted them."""
    chunk_errors: int = 0
    reports_waiting: int = 0
    """The engine's `reports_waiting` after the frame: records of placed segments held for an earlier DDP-SSN."""
    sacks: list[SackRecord] = field(default_factory=list)
    """The acknowledgement unit's SACKs for the frame's packet, for the transmit engine."""
    peer_sacks: list[PeerSack] = field(default_factory=list)
    """The peer's SACK chunks of a SACK row with ``peer_sacks``, for the transmit engine's transport unit
    (they do not reach the host's association)."""
    read_responses: list = field(default_factory=list)
    """With the engine's read responder: the accepted Read Requests (`model.engine.tx.ReadResponseRequest`), in
    DDP-SSN order, for the transmit engine's ``s_axis_rr`` (they do not reach the host)."""


class ReceiveEngine(Protocol):
    """A receive engine that runs a command at once, with the acknowledgement unit's timer."""

    memory: SparseMemory

    def execute(self, command: EngineCommand) -> EngineOutput | None: ...
    def next_timeout(self) -> float | None: ...
    def handle_timeout(self, now: float) -> list[SackRecord]: ...
    def flush_sack(self, association: int) -> list[SackRecord]: ...


class ModelEngine:
    """The golden model of the receive engine (`ReceiveEngineModel`) behind the command interface; its one timer,
    the acknowledgement unit's delayed SACK, runs by `next_timeout` / `handle_timeout`."""

    def __init__(self, local_mac: bytes, local_ip: str, memory: SparseMemory, key_bits: int = STAG_KEY_BITS,
                 segment_reports: bool = False, read_responder: bool = False) -> None:
        self.memory = memory
        self.model = ReceiveEngineModel(ReceiveConfig(local_mac, local_ip, key_bits=key_bits,
                                                      segment_reports=segment_reports), memory,
                                        read_responder=read_responder)
        self.last_result: FrameResult | None = None
        """The model's whole result for the last frame (a testbench compares the RTL's records with it)."""

    def execute(self, command: EngineCommand) -> EngineOutput | None:
        model = self.model
        if isinstance(command, FrameIn):
            model.receive(command.frame, command.now)
            (self.last_result,) = model.next_events()
            output = output_of(self.last_result, command.frame, model.reports_waiting)
            output.sacks = model.next_sacks()   # the delayed ones due before the frame, then the frame's
            return output
        if isinstance(command, AssociationRow):
            model.write_association(command.entry, command.valid)
        elif isinstance(command, RegionRow):
            model.write_region(command.index, command.entry)
        elif isinstance(command, StreamRow):
            model.write_stream(command.entry, command.valid)
        elif isinstance(command, BufferPost):
            entry = command.entry
            model.post_buffer(entry.association, entry.stream_id, entry.qn, entry.host_address, entry.length)
        elif isinstance(command, SackRow):
            model.write_sack(command.association, command.cumulative_tsn, command.delay_ticks, command.window,
                             command.held_bytes, command.enabled, command.peer_sacks)
        elif isinstance(command, SackFlush):
            model.flush_sack(command.association)   # its SACK waits in next_sacks: see `flush_sack`
        else:
            model.reset_queue(command.association, command.stream_id, command.qn)
        return None

    def next_timeout(self) -> float | None:
        return self.model.next_timeout()

    def handle_timeout(self, now: float) -> list[SackRecord]:
        """The delayed SACKs due by `now`, for the transmit engine."""
        self.model.handle_timeout(now)
        return self.model.next_sacks()

    def flush_sack(self, association: int) -> list[SackRecord]:
        """`SackFlush` at once: the SACK the association owes, if any, for the transmit engine."""
        self.execute(SackFlush(association))
        return self.model.next_sacks()


def output_of(result: FrameResult, frame: bytes, reports_waiting: int = 0) -> EngineOutput:
    """The records of one frame's `FrameResult`, as the engine's output streams carry them."""
    if result.action is FrameAction.EXCEPTION:
        return EngineOutput(frame=frame, reports_waiting=reports_waiting)
    return EngineOutput(chunks=[c.chunk for c in result.chunks_to_host],
                        acks=[Ack(a.tsn, a.disposition, a.length, a.immediate) for a in result.acks],
                        reports=list(result.segments), chunk_errors=len(result.chunk_faults),
                        reports_waiting=reports_waiting, sacks=list(result.sacks),
                        peer_sacks=list(result.peer_sacks), read_responses=list(result.read_responses))


# -- per-stream receive state -------------------------------------------------------------------


class _SsnsSeen:
    """The DDP-SSNs of a stream handed to the DDP session, each once (DDP-SSN 0 is the session's control
    message, which reaches it on its own path)."""

    def __init__(self) -> None:
        self.cum = 1
        self.above: set[int] = set()

    def first_time(self, ssn: int) -> bool:
        if (ssn - self.cum) & _SSN_MASK >= 0x8000 or ssn in self.above:
            return False
        self.above.add(ssn)
        while self.cum in self.above:
            self.above.discard(self.cum)
            self.cum = (self.cum + 1) & _SSN_MASK
        return True

    def placed_before(self, first: int, ssn: int) -> int:
        """The engine placed every DDP-SSN of the stream from `first` (its row's) up to `ssn` (an accepted record
        at `ssn` follows them, RFC 5041 5.3): those not yet handed count as handed; returns how many, the
        segments whose records per-message reports left out (`abi.rx.report_withheld`)."""
        start = first if (first - self.cum) & _SSN_MASK < 0x8000 else self.cum
        span = (ssn - start) & _SSN_MASK
        unreported = 0
        for offset in range(span if span < 0x8000 else 0):
            unreported += self.first_time((start + offset) & _SSN_MASK)
        return unreported


class OffloadedEndpoint(RdmapEndpoint):
    """An RDMAP endpoint whose Data Sink is the engine: its buffers are posted to the engine, its inbound
    messages arrive as report records (`on_report`); transmit is the `RdmapEndpoint`'s own."""

    def __init__(self, host: OffloadRnic, stream_id: int, ird: int, ord: int, mulpdu: int,
                 pd: ProtectionDomain | None = None) -> None:
        self._host = host
        self._posted: dict[int, dict[int, UntaggedBuffer]] = {qn: {} for qn in QueueNumber}
        self._next_msn = {qn: 1 for qn in QueueNumber}
        self._waiting: deque[tuple[int, int]] = deque()  # receives not yet posted to the engine
        base = host.control_base + stream_id * host.control_stride
        slots = host.buffers_per_queue
        self._free_slots = {QueueNumber.READ_REQUEST: [base + i * CONTROL_SLOT for i in range(slots)],
                            QueueNumber.TERMINATE: [base + slots * CONTROL_SLOT]}
        self._tagged_bytes = 0
        super().__init__(pd=host.pd if pd is None else pd, memory_table=host.memory_table, host_memory=host.memory,
                         stream_id=stream_id, mulpdu=mulpdu, ird=ird, ord=ord)

    # -- buffers ----------------------------------------------------------------------

    def post_receive(self, address: int, length: int) -> int:
        """Post a receive buffer on QN 0; returns the MSN it takes. Beyond the engine's buffers per queue it
        waits here and is posted when an earlier one completes."""
        msn = (self._next_msn[QueueNumber.SEND] + len(self._waiting)) & 0xFFFFFFFF
        self._waiting.append((address, length))
        self._post_waiting()
        return msn

    def _post_waiting(self) -> None:
        queue = self._posted[QueueNumber.SEND]
        while self._waiting and len(queue) < self._host.buffers_per_queue:
            self._post(QueueNumber.SEND, *self._waiting.popleft())

    def _post_control_buffer(self, qn: int, length: int) -> None:
        self._post(qn, self._free_slots[qn].pop(), max(length, CONTROL_SLOT))

    def _post(self, qn: int, address: int, length: int) -> None:
        msn = self._next_msn[qn]
        self._next_msn[qn] = (msn + 1) & 0xFFFFFFFF
        self._posted[qn][msn] = UntaggedBuffer(qn, msn, address, length, self.host_memory)
        self._host.command(BufferPost(BufferEntry(ASSOCIATION_INDEX, self.stream_id, qn, address, length)))

    def _retire(self, qn: int, msn: int) -> UntaggedBuffer | None:
        buffer = self._posted[qn].pop(msn, None)
        if buffer is not None and qn != QueueNumber.SEND:
            self._free_slots[qn].insert(0, buffer.address)  # reused last
        return buffer

    # -- records --------------------------------------------------------------------------

    def on_report(self, record: SegmentVerdict, unreported: int = 0) -> None:
        """One report record of the stream (RFC 5041 5.3, 5.4, 7.1); `unreported` segments before it were placed
        without a record (per-message reports, `abi.rx.report_withheld`): a tagged message's length is then
        not the sum of its records' payloads. A Read Response carries the Read's whole size (RFC 5040 4.5);
        of a Write (no completion at the Data Sink, RFC 5040 4.4) the host knows where it ended: its
        length is taken from the region's start."""
        if self.in_error or record.status not in (SegmentStatus.ACCEPTED, SegmentStatus.ERROR):
            return
        header = _header_of(record)
        if record.status is SegmentStatus.ERROR:
            assert record.error is not None
            length = header.length + record.payload_length
            # The DDP header as the record gives it (RFC 5040 7); a refused Read Request was not placed,
            # so no RDMA header either.
            self._events.append(self._send_terminate(record.error, length, header, None))
            return
        if record.tagged:
            if record.opcode == Opcode.RDMA_READ_RESPONSE and not self._reads_outstanding:
                self._events.append(self._send_terminate(RdmapError.UNEXPECTED_OPCODE.number,
                                                         header.length + record.payload_length, None, None))
                return
            self._tagged_bytes += record.payload_length
            if record.last:
                length, self._tagged_bytes = self._tagged_bytes, 0
                if unreported:
                    if record.opcode != Opcode.RDMA_READ_RESPONSE:
                        # A Write's length is not known: it may start anywhere in its region, and a tagged
                        # segment names no message offset (RFC 5041 4.2).
                        self._events.append(WriteReceived(record.stag, None))
                        return
                    length = self._reads_outstanding[0].length   # a Read Response's: its Read's size (RFC 5040 4.5)
                self._events.extend(self._on_delivered(Delivered(header, header, length, None)))
            return
        if not record.last:
            return
        buffer = self._retire(record.qn, record.msn)
        if buffer is None:  # the engine delivered into a buffer the host does not hold: its own fault
            self._events.append(self._send_terminate(DdpError.LOCAL_CATASTROPHIC.number, None, None, None))
            return
        assert record.message_length is not None
        self._events.extend(self._on_delivered(Delivered(header, header, record.message_length, buffer)))
        if record.qn == QueueNumber.SEND:
            self._post_waiting()

    def _invalidate(self, stag: int) -> RdmapError | None:
        problem = super()._invalidate(stag)
        if problem is None:
            self._host.invalidated(stag)
        return problem


def _header_of(record: SegmentVerdict) -> TaggedHeader | UntaggedHeader:
    """The segment's DDP header as its record describes it (RFC 5041 4); the versions are the ones
    accepted segments passed."""
    control = RdmapControl(record.opcode).encode()
    if record.tagged:
        return TaggedHeader(last=record.last, rsvd_ulp=control, stag=record.stag, to=record.to)
    return UntaggedHeader(last=record.last, rsvd_ulp=control << 32 | record.invalidate_stag, qn=record.qn,
                          msn=record.msn, mo=record.mo)


def reported_segment(record: SegmentVerdict) -> bytes:
    """The DDP segment a record stands for, for the DDP session: its header (`_header_of`) and as many
    payload bytes as it had; the engine placed them, the session needs only their count (an RTR is
    zero-length, RFC 6581 1)."""
    return DdpSegment(_header_of(record), bytes(record.payload_length)).encode()


# -- the host -------------------------------------------------------------------------------------


class OffloadRnic(SoftRnic):
    """A SoftRnic whose receive data plane is a receive engine (see the module docstring).

    `regions`, `buffers_per_queue`: the engine's region rows and posted buffers per queue; `key_bits`: the
    engine's STag key width (`abi.rx.check_key_bits`); `key_rng`: the generator of the STag keys, by default
    `rng` (a host on a real wire whose `rng` is seeded draws them from `secrets.SystemRandom`, RFC 5042 5.1:
    STags hard to guess); `control_base`:
    host memory for the QN 1 and QN 2 buffers, `control_stride` bytes per stream."""

    endpoint_class: type[OffloadedEndpoint] = OffloadedEndpoint

    def __init__(
        self,
        config: RnicConfig,
        memory: SparseMemory,
        rng: random.Random,
        engine: ReceiveEngine | None = None,
        session_policy: SessionPolicy | None = accept_every_session,
        *,
        regions: int = 16,
        buffers_per_queue: int = 8,
        control_base: int = 0x10000,
        key_bits: int = STAG_KEY_BITS,
        key_rng: random.Random | None = None,
    ) -> None:
        check_key_bits(key_bits, regions)
        super().__init__(config, memory, rng, session_policy)
        self.engine = engine
        self.regions = regions
        self.key_bits = key_bits
        self.key_rng = rng if key_rng is None else key_rng
        self.buffers_per_queue = buffers_per_queue
        self.control_base = control_base
        self.control_stride = (buffers_per_queue + 1) * CONTROL_SLOT
        self.chunk_errors = 0
        self._work: deque[EngineCommand] = deque()
        self._made: list[EngineCommand] = []
        self._handling = False
        self._rows: dict[int, int] = {}  # region row -> STag
        self._last_keys: dict[int, int] = {}  # region row -> the key of its last registration, kept past it
        self._receivers: dict[int, OffloadedEndpoint] = {}
        self._ssns: dict[int, _SsnsSeen] = {}
        self._first_ssn: dict[int, int] = {}
        self._row: AssociationEntry | None = None
        if config.resources.ird >= buffers_per_queue:
            raise ValueError(f"IRD {config.resources.ird}: a stream keeps IRD + 1 Read Request buffers posted "
                             f"(RFC 5040 4.2), the engine holds {buffers_per_queue} per queue")

    @property
    def expects_acks(self) -> bool:
        """Whether the engine sends ack records for the association's DATA (not when it SACKs it itself)."""
        association = self._association
        return association is None or not association.sacks_by_engine

    @property
    def own_areas(self) -> list[tuple[int, int]]:
        """(address, length) of the host memory the host keeps for itself, beside the user's regions and
        buffers: its QN 1 and QN 2 buffers (RFC 5040 4.2)."""
        return [(self.control_base, self.config.streams * self.control_stride)]

    def _association_config(self, peer_port: int) -> AssociationConfig:
        """The receive window in record slots (`WINDOW_SLOTS`, a full DATA chunk each; see the module docstring),
        and Initiate Tags that name the association's row (`abi.rx.association_row`), which the engine's lookup
        reads from every inbound packet's verification tag."""
        config = super()._association_config(peer_port)
        return replace(config, receive_buffer=min(config.receive_buffer, WINDOW_SLOTS * config.max_user_data),
                       tag_row=(ASSOCIATION_BITS, ASSOCIATION_INDEX))

    # -- the engine -----------------------------------------------------------------------

    def command(self, command: EngineCommand) -> None:
        """Queue a command for the engine; made while records are handled, it goes ahead of waiting frames."""
        (self._made if self._handling else self._work).append(command)
        self._run_engine()

    @property
    def engine_work_waiting(self) -> bool:
        return bool(self._work)

    def take_engine_work(self) -> EngineCommand | None:
        """The next command for the engine (without `engine`), or None."""
        return self._work.popleft() if self._work else None

    def engine_output(self, output: EngineOutput, now: float) -> None:
        """The records the engine emitted for a `FrameIn`."""
        self._handling = True
        try:
            self._on_output(output, now)
        finally:
            self._handling = False
            made, self._made = self._made, []
            self._work.extendleft(reversed(made))
        self._run_engine()

    def _run_engine(self) -> None:
        engine = self.engine
        if engine is None or self._handling:
            return
        while self._work:
            command = self._work.popleft()
            output = engine.execute(command)
            if output is not None:
                assert isinstance(command, FrameIn)
                self.engine_output(output, command.now)

    def receive(self, frame: bytes, now: float) -> None:
        """A frame off the wire goes to the engine."""
        self.command(FrameIn(bytes(frame), now))

    def _on_output(self, output: EngineOutput, now: float) -> None:
        if output.frame is not None:
            super().receive(output.frame, now)
            return
        self._counters.frames_received += 1
        self.chunk_errors += output.chunk_errors
        association = self._association
        if association is None or association.is_closed:
            return
        if association.sacks_by_engine:
            # The engine SACKs (`hand_sacks_to_engine`): the TSNs of its reports keep the association's record
            # of what arrived (for its SHUTDOWN's Cumulative TSN Ack, RFC 4960 9.2); the window is the engine's.
            # Per-message reports name a message's last chunk only: the others are counted (`_on_report`,
            # `Association.placed_unnamed`), so a DUPLICATE's TSN, a chunk already named or counted, is left
            # out, unless its DDP-SSN lies before the row's first (the RTR, RFC 6581: new).
            placed = [PlacedData(record.tsn, record.payload_length) for record in output.reports
                      if record.status is not SegmentStatus.DUPLICATE or self._before_first(record)]
        else:
            placed = [PlacedData(ack.tsn, ack.length, ack.immediate) for ack in output.acks
                      if ack.disposition is not AckDisposition.TO_HOST]
            association.hold_placed(output.reports_waiting * association.config.max_user_data)
        association.receive_offloaded(b"".join(c + bytes(-len(c) % 4) for c in output.chunks), placed, now)
        self._drain_association(now)
        for record in output.reports:
            self._on_report(record)
        self._flush()
        self._maybe_shutdown(now)

    def _before_first(self, record: SegmentVerdict) -> bool:
        """The record's DDP-SSN lies before its stream row's first (the RTR's, RFC 6581)."""
        return (record.ddp_ssn - self._first_ssn.get(record.stream_id, 1)) & _SSN_MASK >= 0x8000

    def _on_report(self, record: SegmentVerdict) -> None:
        stream_id, status = record.stream_id, record.status
        seen = self._ssns.get(stream_id)
        unreported = 0
        if seen is not None and status is SegmentStatus.ACCEPTED:
            # Per-message reports: an accepted record follows every earlier DDP-SSN of its stream (RFC 5041 5.3,
            # RFC 5043 6.1); those without a record were placed, and reach the session as such.
            first = self._first_ssn.get(stream_id, 1)
            unreported = seen.placed_before(first, record.ddp_ssn)
            if unreported:
                self._sessions.placed_before(stream_id, first, record.ddp_ssn)
                self._drain_sessions()
                association = self._association
                if association is not None and association.sacks_by_engine:
                    association.placed_unnamed(record.tsn, unreported)
        behind = self._before_first(record)
        handed = status in (SegmentStatus.ACCEPTED, SegmentStatus.ERROR, SegmentStatus.DROPPED,
                            SegmentStatus.INVALID_SSN) or (status is SegmentStatus.DUPLICATE and behind)
        if seen is not None and handed and seen.first_time(record.ddp_ssn):
            payload = DdpSegmentChunkData(record.ddp_ssn, reported_segment(record)).encode()
            self._sessions.receive(Message(stream_id, PPID_DDP_SEGMENT, payload))
            self._drain_sessions()
        receiver = self._receivers.get(stream_id)
        if receiver is None:
            return
        if status is SegmentStatus.INVALID_SSN:  # RFC 5043 10: no chunk explains the gap; the session ends
            receiver.in_error = True
            if stream_id in self._streams:
                self.terminate_stream(stream_id)
            return
        receiver.on_report(record, unreported)
        self._on_rdmap_events(stream_id, receiver.next_events())

    # -- memory -----------------------------------------------------------------------

    def register_memory(self, address: int, length: int, access: Access, base_to: int = 0,
                        stream_id: int | None = None, pd_id: int | None = None) -> int:
        """Register host memory in a free region row of the engine (STag = row << key_bits | key), in Protection Domain
        `pd_id` (the row's PD, which the engine matches with the stream's, RFC 5041 8.2); row 0 is never used,
        so no STag is 0 (the RTR's). The key is drawn afresh, never the row's last one, so the STag of a
        deregistered region never reaches the row's next region (RFC 5042 5.1: STags hard to guess, not
        reused while a peer may still hold one)."""
        row = next((r for r in range(1, self.regions) if r not in self._rows), None)
        if row is None:
            raise RnicError(f"every one of the engine's {self.regions - 1} region rows is in use")
        stag = row << self.key_bits | self._fresh_key(row)
        pd = self._protection_domain(pd_id)
        self.memory_table.register(MemoryRegion(stag, pd, base_to, length, access, address, stream_id))
        self._rows[row] = stag
        bound = None if stream_id is None else (ASSOCIATION_INDEX, stream_id)
        self.command(RegionRow(row, RegionEntry(stag, pd.pd_id, base_to, length, access, address, bound)))
        return stag

    def _fresh_key(self, row: int) -> int:
        """A key for the row's next registration: uniform over the keys other than its last one."""
        last = self._last_keys.get(row)
        if last is None:
            key = self.key_rng.randrange(1 << self.key_bits)
        else:
            key = self.key_rng.randrange((1 << self.key_bits) - 1)
            key += key >= last
        self._last_keys[row] = key
        return key

    def deregister_memory(self, stag: int) -> None:
        self.memory_table.deregister(stag)
        self.invalidated(stag)
        self._rows.pop(stag >> self.key_bits, None)

    def invalidated(self, stag: int) -> None:
        """The STag is invalid from now on (RFC 5040 5.3): its row is cleared."""
        if self._rows.get(stag >> self.key_bits) == stag:
            self.command(RegionRow(stag >> self.key_bits, None))

    # -- sessions ---------------------------------------------------------------------

    def open_stream(self, stream_id: int, private_data: bytes = b"", enhanced: bool = True,
                    resources: LocalResources | None = None, pd_id: int | None = None) -> None:
        """The stream's row (with its PD) is written before the Initiate goes: the peer's first segment follows
        its Accept, DDP-SSN 1 (RFC 5043 6.1)."""
        local = resources if resources is not None else self.config.resources
        self._require_ddp()
        self._arm(stream_id, first_ssn=1, ird=local.ird, ord=local.ord, pd=self._protection_domain(pd_id))
        super().open_stream(stream_id, private_data, enhanced, resources, pd_id)

    def _make_endpoint(self, stream_id: int, negotiated: NegotiatedParameters | None, local: LocalResources,
                       first_sequence: int, pd: ProtectionDomain | None = None) -> RdmapEndpoint:
        """The initiator's endpoint was made with its row; the responder's row is written here, before
        its Accept goes."""
        ird, ord = (negotiated.ird, negotiated.ord) if negotiated is not None else (local.ird, local.ord)
        pd = self.pd if pd is None else pd
        receiver = self._receivers.get(stream_id)
        if receiver is None or self._first_ssn.get(stream_id) != first_sequence or receiver.pd != pd:
            receiver = self._arm(stream_id, first_sequence, ird, ord, pd)
        receiver.ird, receiver.ord = ird, ord
        return receiver

    def _arm(self, stream_id: int, first_ssn: int, ird: int, ord: int,
             pd: ProtectionDomain | None = None) -> OffloadedEndpoint:
        self._disarm(stream_id)
        assert self._association is not None
        pd = self.pd if pd is None else pd
        self.command(StreamRow(StreamEntry(ASSOCIATION_INDEX, stream_id, pd.pd_id, first_ssn)))
        self._first_ssn[stream_id] = first_ssn
        self._ssns[stream_id] = _SsnsSeen()
        receiver = self.endpoint_class(self, stream_id, ird, ord, self._association.mulpdu, pd)
        self._receivers[stream_id] = receiver
        return receiver

    def _disarm(self, stream_id: int) -> None:
        """The stream's row cleared and its queues taken back: its next session's MSNs start at 1."""
        if self._receivers.pop(stream_id, None) is None:
            return
        self.command(StreamRow(StreamEntry(ASSOCIATION_INDEX, stream_id, self.pd.pd_id), valid=False))
        for qn in QueueNumber:
            self.command(QueueRevoke(ASSOCIATION_INDEX, stream_id, qn))

    def _on_session_events(self, events: list) -> None:
        """Segments are the engine's (they reached the session as records); a released stream is disarmed."""
        super()._on_session_events([event for event in events if not isinstance(event, SegmentReceived)])
        for event in events:
            if isinstance(event, SessionStreamReleased):
                self._disarm(event.stream_id)

    def _on_association_events(self, events: list, now: float) -> None:
        """The association's row is written when it is up (RFC 4960 5.1) and cleared when it is over."""
        super()._on_association_events(events, now)
        association, peer = self._association, self._peer
        if association is None or peer is None:
            return
        for event in events:
            if isinstance(event, AssociationEstablished):
                self._row = AssociationEntry(ASSOCIATION_INDEX, association.config.local_port,
                                             association.config.peer_port, str(peer.ip), association.local_tag,
                                             event.ddp_enabled)
                self.command(AssociationRow(self._row))
        if association.is_closed and self._row is not None:
            for stream_id in list(self._receivers):
                self._disarm(stream_id)
            self.command(AssociationRow(self._row, valid=False))
            self._row = None


__all__ = ["Ack", "AssociationRow", "BufferPost", "EngineCommand", "EngineOutput", "FrameIn", "ModelEngine",
           "OffloadRnic", "OffloadedEndpoint", "QueueRevoke", "ReceiveEngine", "RegionRow", "SackFlush", "SackRow",
           "StreamRow",
           "output_of", "reported_segment"]

"""Reference model of the transmit engine: requests in, frames, completions and refusals out.

The golden model of what the gateware transmit path (`hdl/tx/`) does with the
host's requests (the records of `abi`: work requests, inbound Read
Requests to answer, control requests, and the host SCTP's ACK, RESEND and
LIMIT), independent of the RTL. Every byte it sends comes from the model's
codecs: `model.ddp.source` segments each message (RFC 5041 5.2) with the
RDMAP control field of `model.rdmap.messages` (RFC 5040 4.1), the segment
goes into a `DdpSegmentChunkData` (DDP-SSN, RFC 5043 5.2.1), one `DataChunk`
(U = B = E = 1, PPID 16, RFC 5043 9, 10), one `SctpPacket` (CRC32c) and
`build_frame` (IPv4, or UDP with checksum 0, RFC 6951 5).

Sans-I/O: the `post_*` calls queue requests, `tsn_request` acts at once,
`data_to_send()` returns the frames the engine sends next, in its order,
and `next_events()` drains completions and refusals. The engine's order, as
the RTL has it:

* the receive engine's SACKs (`post_sack`: one packet of the SACK chunk,
  the row's verification tag, RFC 4960 6.2) go before anything else, between
  two frames of a message too, and never wait for the window: a SACK is due
  at once, and the peer's window may be waiting for it;
* messages one at a time, each finished before the next starts; an idle
  engine starts the request it is offered at once; between messages control
  requests go first, then Read Responses, then local work (RFC 5040 5.5:
  Read Responses in the order of their requests);
* each DATA chunk takes the association's next TSN (RFC 4960 6.1) and
  enters the retransmission ring; a new chunk waits while its row has
  `ring_tsns` chunks unacknowledged or its TSN is beyond the row's LIMIT
  (RFC 4960 6.1 A, B: the host's SCTP computes the window), and every
  message behind it waits too; a control PACKET takes no TSN and never waits
  on them;
* RESENDs go before anything new (RFC 4960 6.1), the same chunk again with
  its payload read again from host memory (6.3.3 E3, 7.2.4);
* an ACK retires the chunks up to its TSN and completes each RDMA Write,
  Send or session-control message whose last chunk it covers (RFC 5041 5.4,
  Data Source); a RESEND of a TSN the ring does not hold is refused;
* a Read Request record beyond IRD for its stream (RFC 6581 4.1) is refused;
  a request counts until its response's last segment has been sent.

Transport (`write_transport`): a row may hand the peer's SACKs to the engine's
transport unit (`model.engine.transport.TransportUnit`, held here: RFC 4960
6.2.1, 6.3, 7.2, 8.1). The engine then tells the unit of every new chunk it
sends (`sent`, its user data and the tick), the peer's SACK chunks come to
`peer_sack` and the timers to `tick`, and the unit's records act as the
host's requests did: a `Retirement` is an ACK up to its last TSN, a
`Retransmission` a RESEND, a `Limit` a LIMIT. Its `AssociationFailure` and
`ProtocolViolation` go to the host as `TransportStopped`; the row then sends
no new chunk until written again. The host's own ACK, RESEND and LIMIT for
such a row are refused (`RefusedTsn`): one owner of the window at a time.
Time comes in the unit's ticks (`ticks_at`).

The RTL runs its ports concurrently, so this order is the RTL's whenever the
host offers a request only once the engine has sent everything before it, as
the driver does; the differential tests pace the RTL that way.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from abi.tx import READ_RESPONSE_OPCODE, CompletionStatus, ControlOpcode, TsnOpcode, WorkOpcode
from model.ddp.sctp_adaptation import DdpSegmentChunkData
from model.ddp.segment import DdpSegment
from model.ddp.source import DdpSource
from model.net.frames import build_frame
from model.engine.sack import SackRecord, tick_time, ticks_at
from model.engine.transport import (AssociationFailure, Limit, ProtocolViolation, Retirement, Retransmission,
                                    TransportRecord, TransportUnit)
from model.rdmap.messages import Opcode, QueueNumber, ReadRequest, tagged_rsvd_ulp, untagged_rsvd_ulp
from model.sctp.packet import (
    PPID_DDP_SEGMENT, PPID_DDP_SESSION_CONTROL, DataChunk, SackChunk, SctpPacket, decode_chunks, serial_add,
)

__all__ = ["TransmitConfig", "TxAssociationRow", "WorkRequest", "ReadResponseRequest", "ControlRequest",
           "Completion", "RefusedRead", "RefusedTsn", "TransportStopped", "TransmitEngineModel", "ticks_at",
           "tick_time",
           # the ABI's names for the model's users (model/ reaches abi only in model/engine)
           "ControlOpcode", "TsnOpcode", "WorkOpcode"]

TSN_MOD = 1 << 32
_DDP_SSN_BYTES = 2   # RFC 5043 5.2.2: the DDP-SSN ahead of the segment in a PPID 16 chunk's user data


@dataclass(frozen=True)
class TransmitConfig:
    """The engine's parameters and this end's addresses (the receive engine's configuration words)."""
    local_mac: bytes
    local_ip: str
    udp_port: int = 9899
    associations: int = 2
    stream_ids: int = 4
    ird: int = 4
    ring_tsns: int = 64


@dataclass(frozen=True)
class TxAssociationRow:
    """`abi.tx.tx_association_write_layout`."""
    index: int
    peer_mac: bytes
    peer_ip: str
    local_port: int
    peer_port: int
    tag: int
    mulpdu: int
    next_tsn: int
    udp: bool = False
    peer_udp_port: int = 9899


@dataclass(frozen=True)
class WorkRequest:
    """`abi.tx.work_request_layout`."""
    opcode: WorkOpcode
    association: int
    stream_id: int
    host_address: int
    length: int
    stag: int = 0
    to: int = 0
    sink_stag: int = 0
    sink_to: int = 0
    invalidate_stag: int = 0
    wr_id: int = 0


@dataclass(frozen=True)
class ReadResponseRequest:
    """`abi.tx.read_response_layout`: an inbound Read Request, its Data Source already at `host_address`."""
    association: int
    stream_id: int
    host_address: int
    length: int
    sink_stag: int = 0
    sink_to: int = 0
    msn: int = 1


@dataclass(frozen=True)
class ControlRequest:
    """`abi.tx.control_request_layout`: `length` bytes at `host_address`, a PACKET's chunks or a
    session-control message."""
    opcode: ControlOpcode
    association: int
    host_address: int
    length: int
    stream_id: int = 0
    tag: int = 0
    wr_id: int = 0


@dataclass(frozen=True)
class Completion:
    """`abi.tx.completion_layout`."""
    wr_id: int
    opcode: int
    association: int
    status: CompletionStatus = CompletionStatus.SUCCESS


@dataclass(frozen=True)
class RefusedRead:
    request: ReadResponseRequest


@dataclass(frozen=True)
class RefusedTsn:
    opcode: TsnOpcode
    association: int
    tsn: int


@dataclass(frozen=True)
class TransportStopped:
    """The transport unit stopped the row: the peer is unreachable (`AssociationFailure`, RFC 4960 8.1) or a
    SACK acknowledged a TSN never sent (`ProtocolViolation`); the host aborts the association."""
    record: AssociationFailure | ProtocolViolation


@dataclass(frozen=True)
class _Chunk:
    """One DATA chunk as the ring records it: enough to send it again byte for byte."""
    association: int
    stream_id: int
    ppid: int
    ssn: int                 # DDP-SSN (PPID 16)
    header: bytes            # DDP header (PPID 16); empty for session control
    address: int
    length: int
    opcode: int
    wr_id: int
    last: bool


def _asks_sack(chunk: _Chunk) -> bool:
    """The I bit (RFC 9260 3.3.1, RFC 7053 4): set on the last DATA chunk of a work request's message, whose
    completion waits for the SACK that covers it when the transport is the engine's, and which a receiver
    would otherwise hold for its delayed SACK (RFC 4960 6.2) when it ends an odd packet; not on a Read
    Response's or a session-control message's."""
    return chunk.last and chunk.ppid == PPID_DDP_SEGMENT and chunk.opcode != READ_RESPONSE_OPCODE


@dataclass
class _Row:
    config: TxAssociationRow
    next_tsn: int
    retired: int
    ring: dict[int, _Chunk] = field(default_factory=dict)
    limit: int | None = None
    transport: bool = False
    stopped: bool = False


class TransmitEngineModel:
    """The transmit engine's behaviour at the request level (see the module docstring); `memory` is what the
    engine reads over AXI (`read(address, length)`)."""

    def __init__(self, config: TransmitConfig, memory) -> None:
        self.config, self.memory = config, memory
        self._rows: dict[int, _Row] = {}
        self._ssn: dict[tuple[int, int], int] = {}
        self._sources: dict[tuple[int, int], DdpSource] = {}
        self._sacks: deque[bytes] = deque()   # SACK frames, sent first
        self._controls: deque[ControlRequest] = deque()
        self._responses: deque[ReadResponseRequest] = deque()
        self._works: deque[WorkRequest] = deque()
        self._ird_held: dict[tuple[int, int], int] = {}
        self._current: deque[_Chunk | bytes] = deque()   # the message under way: chunks, or a PACKET's frame
        self._current_response: tuple[int, int] | None = None
        self._resends: deque[bytes] = deque()
        self._events: list[Completion | RefusedRead | RefusedTsn | TransportStopped] = []
        self.transport = TransportUnit(config.associations, ring_tsns=config.ring_tsns)
        self.transport_resends = 0
        """Chunks sent again on the transport unit's order (T3-rtx or fast retransmit)."""
        self.peer_sacks_from_host = 0
        """The peer's SACK chunks the host gave the transport unit (`peer_sack`)."""
        self.peer_sacks_from_receive_engine = 0
        """The peer's SACK chunks the receive engine handed the transport unit (`take_peer_sack`)."""
        self.messages_started = 0
        """Messages started (control requests, Read Responses, work), in the order started."""

    # -- tables ---------------------------------------------------------------

    def write_association(self, row: TxAssociationRow) -> None:
        """A new row: its TSN counter loaded, its ring emptied, its limit lifted."""
        self._check_row(row.index)
        self._rows[row.index] = _Row(row, row.next_tsn, (row.next_tsn - 1) % TSN_MOD)

    def write_transport(self, association: int, peer_a_rwnd: int, **parameters) -> None:
        """The peer's SACKs go to the transport unit for this row from now on: its row written from the
        engine's next TSN and the peer's a_rwnd (`TransportUnit.reset`'s `parameters`: mtu, chunk_bytes, RTO
        ticks, max_retrans, max_burst), its first LIMIT taken. The row's ring must be empty."""
        row = self._row(association)
        if row.ring:
            raise ValueError(f"association row {association}: {len(row.ring)} chunks unacknowledged; the "
                             "transport takes a row whose ring is empty")
        row.transport, row.stopped = True, False
        self._apply(association, self.transport.reset(association, row.next_tsn, peer_a_rwnd, **parameters))

    def peer_sack(self, association: int, sack: SackChunk, now: int) -> None:
        """A SACK chunk from the peer of a row with the transport, arrived at tick `now` (RFC 4960 6.2.1)."""
        self.peer_sacks_from_host += 1
        self._peer_sack(association, sack, now)

    def _peer_sack(self, association: int, sack: SackChunk, now: int) -> None:
        row = self._row(association)
        if not row.transport:
            raise ValueError(f"association row {association} has no transport: its SACKs are the host's")
        self._apply(association, self.transport.sack(association, sack.cumulative_tsn_ack, sack.a_rwnd,
                                                     sack.gap_blocks, sack.duplicate_tsns, now))

    def take_peer_sack(self, association: int, sack: SackChunk, now: int) -> None:
        """A SACK chunk the receive engine handed the transport unit itself (its SACK row's ``peer_sacks``):
        taken as `peer_sack`; the gateware's goes from engine to engine without the host."""
        self.peer_sacks_from_receive_engine += 1
        self._peer_sack(association, sack, now)

    def peer_shutdown(self, association: int, cumulative_tsn_ack: int, now: int) -> None:
        """A SHUTDOWN's Cumulative TSN Ack for a row with the transport (RFC 4960 9.2), at tick `now`."""
        row = self._row(association)
        if not row.transport:
            raise ValueError(f"association row {association} has no transport: its SACKs are the host's")
        self._apply(association, self.transport.shutdown(association, cumulative_tsn_ack, now))

    def cumulative_tsn_ack(self, association: int) -> int:
        """The row's Cumulative TSN Ack: the last TSN retired (what the host reads when it shuts down)."""
        return self._row(association).retired

    def tick(self, now: int) -> None:
        """The transport unit's timers due by tick `now` (RFC 4960 6.3.3, 7.2.1)."""
        for record in self.transport.tick(now):
            self._apply(record.association, [record])

    def next_deadline(self) -> int | None:
        """The tick at which `tick` next has something to do."""
        return self.transport.next_deadline()

    def _apply(self, association: int, records: list[TransportRecord]) -> None:
        row = self._rows[association]
        for record in records:
            if isinstance(record, Retirement):
                self._acknowledge(row, association, record.last_tsn)
            elif isinstance(record, Retransmission):
                self._resends.append(self._frame(row, record.tsn, row.ring[record.tsn]))
                self.transport_resends += 1
            elif isinstance(record, Limit):
                row.limit = record.tsn
            else:
                row.stopped = True
                self._events.append(TransportStopped(record))

    def write_stream(self, association: int, stream_id: int, first_ssn: int) -> None:
        """A new DDP stream: DDP-SSN from `first_ssn` (RFC 5043 6.1), MSNs from 1 (RFC 5041 4.3)."""
        self._check_stream(association, stream_id)
        key = (association, stream_id)
        self._ssn[key] = first_ssn & 0xFFFF
        self._sources.pop(key, None)

    # -- requests -------------------------------------------------------------

    def post_work(self, request: WorkRequest) -> None:
        self._check_stream(request.association, request.stream_id)
        self._works.append(request)
        self._take()

    def post_read_response(self, request: ReadResponseRequest) -> bool:
        """False (and a `RefusedRead` event) when the stream already holds IRD requests (RFC 6581 4.1)."""
        self._check_stream(request.association, request.stream_id)
        key = (request.association, request.stream_id)
        if self._ird_held.get(key, 0) >= self.config.ird:
            self._events.append(RefusedRead(request))
            return False
        self._ird_held[key] = self._ird_held.get(key, 0) + 1
        self._responses.append(request)
        self._take()
        return True

    def post_sack(self, record: SackRecord) -> None:
        """A SACK of the receive engine's acknowledgement unit (`model.engine.sack`), sent before any other frame."""
        row = self._row(record.association)
        packet = SctpPacket(row.config.local_port, row.config.peer_port, row.config.tag, [record.chunk()])
        self._sacks.append(self._wrap(row, packet.encode()))

    def post_control(self, request: ControlRequest) -> None:
        self._check_stream(request.association, request.stream_id)
        self._controls.append(request)
        self._take()

    def _take(self) -> None:
        """An idle engine starts the request it is offered at once; the others wait for the order below."""
        if not self._current:
            self._start_next()

    def tsn_request(self, opcode: TsnOpcode, association: int, tsn: int) -> None:
        row = self._row(association)
        if row.transport:   # the transport unit owns the row's window and ring
            self._events.append(RefusedTsn(opcode, association, tsn))
        elif opcode is TsnOpcode.LIMIT:
            row.limit = tsn
        elif opcode is TsnOpcode.RESEND:
            if tsn in row.ring:   # sent before the next request is taken, as the RTL replays it at once
                self._resends.append(self._frame(row, tsn, row.ring[tsn]))
            else:
                self._events.append(RefusedTsn(opcode, association, tsn))
        else:
            self._acknowledge(row, association, tsn)

    def _acknowledge(self, row: _Row, association: int, tsn: int) -> None:
        """RFC 4960 6.2.1 D: everything up to `tsn` (serial arithmetic) is acknowledged; at most what was sent."""
        ahead = (tsn - row.retired) % TSN_MOD
        if ahead == 0 or ahead >= TSN_MOD // 2:
            return
        for _ in range(min(ahead, len(row.ring))):
            row.retired = serial_add(row.retired, 1, 32)
            chunk = row.ring.pop(row.retired)
            if chunk.last and _completes(chunk.opcode):
                self._events.append(Completion(chunk.wr_id, chunk.opcode, association))

    # -- outputs --------------------------------------------------------------

    def next_events(self) -> list[Completion | RefusedRead | RefusedTsn | TransportStopped]:
        events, self._events = self._events, []
        return events

    def data_to_send(self, limit: int | None = None, now: int = 0) -> list[bytes]:
        """Every frame the engine sends before it must wait (at most `limit`): resends, then the message under
        way, then the next messages in the engine's order, until a chunk's row is full or past its limit (or
        stopped by its transport). `now`: the tick, for a row with the transport (`TransportUnit.sent`)."""
        frames = []
        while limit is None or len(frames) < limit:
            if self._sacks:
                frames.append(self._sacks.popleft())
                continue
            if self._resends:
                frames.append(self._resends.popleft())
                continue
            if not self._current and not self._start_next():
                return frames
            item = self._current[0]
            if isinstance(item, bytes):
                self._current.popleft()
                frames.append(item)
                continue
            row = self._rows[item.association]
            tsn = row.next_tsn
            beyond_limit = row.limit is not None and (tsn - row.limit - 1) % TSN_MOD < TSN_MOD // 2
            if len(row.ring) >= self.config.ring_tsns or beyond_limit or row.stopped:
                return frames
            self._current.popleft()
            row.ring[tsn] = item
            row.next_tsn = serial_add(tsn, 1, 32)
            frame = self._frame(row, tsn, item)
            frames.append(frame)
            if row.transport:
                self.transport.sent(item.association, tsn, self._user_data_length(item), now)
            if item.last and self._current_response is not None and not self._current:
                self._ird_held[self._current_response] -= 1
                self._current_response = None
        return frames

    def accepts_next(self) -> bool:
        """No request is waiting unstarted: one offered now starts right after the message under way, so
        requests offered one at a time this way are sent in the order offered, whatever their port."""
        return not (self._controls or self._responses or self._works)

    def unstarted(self) -> tuple[int, int, int]:
        """The control requests, Read Responses and work requests waiting unstarted."""
        return len(self._controls), len(self._responses), len(self._works)

    def waiting(self) -> bool:
        """Anything posted and not yet sent (RESENDs included)."""
        return bool(self._resends or self._current or self._sacks or self._controls or self._responses
                    or self._works)

    # -- segmentation -----------------------------------------------------------

    def _start_next(self) -> bool:
        if self._controls:
            self._current.extend(self._control_message(self._controls.popleft()))
        elif self._responses:
            request = self._responses.popleft()
            self._current_response = (request.association, request.stream_id)
            payload = self._read(request.host_address, request.length)
            segments = self._source(request.association, request.stream_id).tagged_message(
                payload, request.sink_stag, request.sink_to, tagged_rsvd_ulp(Opcode.RDMA_READ_RESPONSE))
            self._current.extend(self._chunks(request.association, request.stream_id, segments,
                                              request.host_address, READ_RESPONSE_OPCODE, 0))
        elif self._works:
            self._current.extend(self._work_message(self._works.popleft()))
        else:
            return False
        self.messages_started += 1
        return True

    def _work_message(self, work: WorkRequest) -> list[_Chunk]:
        source = self._source(work.association, work.stream_id)
        opcode = Opcode(int(work.opcode))
        if opcode is Opcode.RDMA_READ_REQUEST:
            request = ReadRequest(work.sink_stag, work.sink_to, work.length, work.stag, work.to).encode()
            segments = source.untagged_message(request, QueueNumber.READ_REQUEST, untagged_rsvd_ulp(opcode))
            # The 28 bytes are the engine's own, not read from memory: each resend rebuilds them.
            return self._chunks(work.association, work.stream_id, segments, None, int(work.opcode), work.wr_id)
        payload = self._read(work.host_address, work.length)
        if opcode is Opcode.RDMA_WRITE:
            segments = source.tagged_message(payload, work.stag, work.to, tagged_rsvd_ulp(opcode))
        elif opcode is Opcode.TERMINATE:
            segments = source.untagged_message(payload, QueueNumber.TERMINATE, untagged_rsvd_ulp(opcode))
        else:
            invalidate = work.invalidate_stag if opcode.carries_invalidate_stag else 0
            segments = source.untagged_message(payload, QueueNumber.SEND, untagged_rsvd_ulp(opcode, invalidate))
        return self._chunks(work.association, work.stream_id, segments, work.host_address, int(work.opcode),
                            work.wr_id)

    def _chunks(self, association: int, stream_id: int, segments: list[DdpSegment], address: int | None,
                opcode: int, wr_id: int) -> list[_Chunk]:
        key = (association, stream_id)
        chunks, offset = [], 0
        for index, segment in enumerate(segments):
            ssn = self._ssn.get(key, 1)
            self._ssn[key] = (ssn + 1) & 0xFFFF
            header = segment.header.encode()
            if address is None:   # a Read Request: the payload is its header's, kept whole
                header, length, at = segment.encode(), 0, 0
            else:
                length, at = len(segment.payload), address + offset
            chunks.append(_Chunk(association, stream_id, PPID_DDP_SEGMENT, ssn, header, at, length, opcode, wr_id,
                                 index == len(segments) - 1))
            offset += len(segment.payload)
        return chunks

    def _control_message(self, request: ControlRequest) -> list[_Chunk | bytes]:
        row = self._row(request.association)
        body = self._read(request.host_address, request.length)
        if request.opcode is ControlOpcode.SESSION_CONTROL:
            return [_Chunk(request.association, request.stream_id, PPID_DDP_SESSION_CONTROL, 0, b"",
                           request.host_address, request.length, int(request.opcode), request.wr_id, True)]
        chunks = decode_chunks(body + bytes(-len(body) % 4))   # the last chunk's padding is the engine's
        packet = SctpPacket(row.config.local_port, row.config.peer_port, request.tag, chunks)
        return [self._wrap(row, packet.encode())]

    def _frame(self, row: _Row, tsn: int, chunk: _Chunk) -> bytes:
        body = self._read(chunk.address, chunk.length)
        if chunk.ppid == PPID_DDP_SEGMENT:
            body = DdpSegmentChunkData(chunk.ssn, chunk.header + body).encode()
        data = DataChunk(tsn, chunk.stream_id, 0, chunk.ppid, body, unordered=True, immediate=_asks_sack(chunk))
        return self._wrap(row, SctpPacket(row.config.local_port, row.config.peer_port, row.config.tag,
                                          [data]).encode())

    @staticmethod
    def _user_data_length(chunk: _Chunk) -> int:
        """The DATA chunk's user data (RFC 4960 3.3.1): the DDP-SSN and the segment (RFC 5043 5.2.1), or the
        session-control message."""
        if chunk.ppid != PPID_DDP_SEGMENT:
            return chunk.length
        return _DDP_SSN_BYTES + len(chunk.header) + chunk.length

    def _wrap(self, row: _Row, packet: bytes) -> bytes:
        c, config = row.config, self.config
        return build_frame(packet, config.local_mac, c.peer_mac, config.local_ip, c.peer_ip, udp=c.udp,
                           src_port=config.udp_port, dst_port=c.peer_udp_port, udp_checksum=False)

    def _read(self, address: int, length: int) -> bytes:
        """The engine reads exactly `length` bytes, none for an empty payload."""
        return self.memory.read(address, length) if length else b""

    # -- rows -------------------------------------------------------------------

    def _source(self, association: int, stream_id: int) -> DdpSource:
        key = (association, stream_id)
        if key not in self._sources:
            self._sources[key] = DdpSource(self._row(association).config.mulpdu)
        return self._sources[key]

    def _row(self, association: int) -> _Row:
        if association not in self._rows:
            raise ValueError(f"association row {association} was never written")
        return self._rows[association]

    def _check_row(self, association: int) -> None:
        if not 0 <= association < self.config.associations:
            raise ValueError(f"association row {association} not below {self.config.associations}")

    def _check_stream(self, association: int, stream_id: int) -> None:
        self._check_row(association)
        if not 0 <= stream_id < self.config.stream_ids:
            raise ValueError(f"stream {stream_id} not below {self.config.stream_ids}")


def _completes(opcode: int) -> bool:
    """RFC 5041 5.4: the engine completes RDMA Writes, Sends and session-control messages."""
    return opcode == WorkOpcode.RDMA_WRITE or WorkOpcode.SEND <= opcode <= ControlOpcode.SESSION_CONTROL

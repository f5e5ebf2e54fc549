"""A host whose data plane is two engines: the receive engine, and the transmit engine for every DATA chunk.

`EngineRnic` is an `OffloadRnic` (receive through the receive engine) whose
DDP segments and session-control messages are sent by a transmit engine
(`model.engine.tx.TransmitEngineModel`, or the gateware's `hdl.tx.engine.TxEngine`
behind the same calls): the host hands it whole messages and keeps the
control plane.

* Messages: an RDMAP endpoint's outbound message (`RdmapEndpoint.take_message`)
  becomes one engine request: a work request for an RDMA Write, a Send, a Read
  Request or a Terminate (its bytes put in host memory first), a Read Response
  record for a Read Response (its Data Source already translated). Its
  segments still pass through the DDP session as their lengths (`EngineSegment`:
  DDP-SSN, RFC 5043 5.2.1; the chunks counted for 6.6; the payload is never
  read by the host) and each becomes `Association.send_offloaded`: the
  association numbers it as the engine will (one TSN space, RFC 4960 6.1) and
  windows it. A session-control message (PPID 17) is a SESSION_CONTROL request;
  the RTR (a zero-length RDMA Write, RFC 6581 1) a zero-length Write.
* Order: the engine numbers chunks in the order it starts messages, and it may
  start a waiting control request or Read Response ahead of waiting work. So
  the host offers a request only when the engine has none waiting unstarted
  (`accepts_next`); its chunks then take exactly the TSNs the association gave
  them, and their DDP-SSNs and MSNs are the session's and the endpoint's.
* Window and retransmission: the association's `engine_requests()` (LIMIT,
  RESEND, ACK) go to the engine as they come.
* Completions: an RDMA Write or Send completes when the engine reports its
  last chunk acknowledged (RFC 5041 5.4, Data Source: the source stays valid
  until then), not when its segments are handed over.
* Tables: the engine's association row when the association is up (the
  peer's addresses and tag, MULPDU, the association's next TSN), a stream row
  (first DDP-SSN 1, MSNs from 1) when a stream is armed for a session.

* Transport (`config.engine_transport`, the engine's model only): the
  transmit engine's transport unit takes the peer's SACKs (the chunks the
  receive engine passes up, split off before the association sees the
  packet) and a SHUTDOWN's Cumulative TSN Ack, runs the windows and T3-rtx
  in its ticks and retransmits (RFC 4960 6.1, 6.2.1, 6.3, 7.2, 8.1); the
  association only numbers the chunks, learns the Cumulative TSN Ack the
  engine reached after each of its events (for the DDP streams, RFC 5043
  6.6, and SHUTDOWN, RFC 4960 9.2) and fails when the engine stops the row.

An engine request has one address: a gather list of several pieces is copied
whole into a bounce area of host memory when its message is handed over, and
kept there until it completes. Only the RDMA Write RTR is sent (the host's
default).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, replace
from typing import Protocol

from model.ddp.memory import ProtectionDomain, SparseMemory
from model.ddp.negotiation import RtrType, rtr_segment
from model.ddp.session import EngineChunk, EngineSegment
# the engine ABI's names (abi) as the engine's model gives them: model/ reaches the ABI only there
from model.engine.transport import DATA_CHUNK_OVERHEAD, AssociationFailure, ticks
from model.engine.tx import (
    Completion, ControlOpcode, ControlRequest, ReadResponseRequest, RefusedRead, RefusedTsn, TransmitConfig,
    TransmitEngineModel, TransportStopped, TsnOpcode, TxAssociationRow, WorkOpcode, WorkRequest, tick_time, ticks_at,
)
from model.errors import DecodeError, RnicError
from model.rdmap.endpoint import Outbound, WorkCompleted
from model.rdmap.messages import Opcode
from model.rnic.host import RnicConfig, SessionPolicy, accept_every_session
from model.engine.sack import DELAY_BITS as SACK_DELAY_BITS
from model.engine.sack import TICK_SECONDS, SackRecord
from model.rnic.offload import (ASSOCIATION_INDEX, WINDOW_SLOTS, EngineOutput, OffloadedEndpoint, OffloadRnic,
                                ReceiveEngine, SackFlush, SackRow)
from model.sctp.association import AssociationError, EngineRequestKind
from model.sctp.events import AssociationEstablished
from model.sctp.packet import PPID_DDP_SESSION_CONTROL, ChunkType, SackChunk, decode_chunks

__all__ = ["EngineRnic", "TransmitEngine", "TransportEngine"]

SCRATCH_SLOT = 1024
"""Host memory per message the host builds for the engine (a session-control message or a Terminate)."""
SCRATCH_SLOTS = 64
DEFAULT_SCRATCH_BASE = 0x30000
"""The scratch slots' address unless the QN 1 and QN 2 buffers reach past it (many streams or buffers)."""
_KIND = {EngineRequestKind.LIMIT: TsnOpcode.LIMIT, EngineRequestKind.RESEND: TsnOpcode.RESEND,
         EngineRequestKind.ACK: TsnOpcode.ACK}
_WORK = {Opcode.RDMA_WRITE: WorkOpcode.RDMA_WRITE, Opcode.RDMA_READ_REQUEST: WorkOpcode.RDMA_READ_REQUEST,
         Opcode.SEND: WorkOpcode.SEND, Opcode.SEND_WITH_INVALIDATE: WorkOpcode.SEND_WITH_INVALIDATE,
         Opcode.SEND_WITH_SE: WorkOpcode.SEND_WITH_SE,
         Opcode.SEND_WITH_SE_AND_INVALIDATE: WorkOpcode.SEND_WITH_SE_AND_INVALIDATE,
         Opcode.TERMINATE: WorkOpcode.TERMINATE}


class TransmitEngine(Protocol):
    """What the host asks of a transmit engine (`TransmitEngineModel` has these calls)."""

    def write_association(self, row: TxAssociationRow) -> None: ...
    def write_stream(self, association: int, stream_id: int, first_ssn: int) -> None: ...
    def post_work(self, request: WorkRequest) -> None: ...
    def post_read_response(self, request: ReadResponseRequest) -> bool: ...
    def post_control(self, request: ControlRequest) -> None: ...
    def post_sack(self, record: SackRecord) -> None: ...
    def tsn_request(self, opcode: TsnOpcode, association: int, tsn: int) -> None: ...
    def accepts_next(self) -> bool: ...
    def data_to_send(self) -> list[bytes]: ...
    def next_events(self) -> list: ...


class TransportEngine(TransmitEngine, Protocol):
    """A transmit engine with the transport unit (`TransmitEngineModel` has these calls; `now` in its ticks)."""

    def write_transport(self, association: int, peer_a_rwnd: int, **parameters) -> None: ...
    def peer_sack(self, association: int, sack: SackChunk, now: int) -> None: ...
    def take_peer_sack(self, association: int, sack: SackChunk, now: int) -> None: ...
    def peer_shutdown(self, association: int, cumulative_tsn_ack: int, now: int) -> None: ...
    def cumulative_tsn_ack(self, association: int) -> int: ...
    def tick(self, now: int) -> None: ...
    def next_deadline(self) -> int | None: ...


@dataclass
class _Post:
    """One request for the engine, waiting for its turn; `completion` is reported at its Completion."""
    request: WorkRequest | ReadResponseRequest | ControlRequest
    stream_id: int
    completion: WorkCompleted | None = None


class EngineRnic(OffloadRnic):
    """An `OffloadRnic` whose DATA chunks a transmit engine sends (see the module docstring).

    `transmit`: the engine; by default `TransmitEngineModel` over the host's memory. `scratch_base`: host
    memory for the messages the host builds for the engine, `scratch_slots` of `SCRATCH_SLOT` bytes;
    `bounce_base`, `bounce_bytes`: host memory where a gather list of several pieces is copied whole.
    With `config.engine_sacks` the receive engine SACKs the peer's DATA itself (its SACK row written when
    the association is up, `Association.hand_sacks_to_engine`), through the transmit engine; the host then
    sees no ack record."""

    def __init__(self, config: RnicConfig, memory: SparseMemory, rng: random.Random,
                 engine: ReceiveEngine | None = None, session_policy: SessionPolicy | None = accept_every_session,
                 *, transmit: TransmitEngine | None = None, scratch_base: int | None = None,
                 scratch_slots: int = SCRATCH_SLOTS, bounce_base: int = 0x4000_0000, bounce_bytes: int = 1 << 24,
                 **options) -> None:
        super().__init__(config, memory, rng, engine, session_policy, **options)
        self.transmit = transmit if transmit is not None else TransmitEngineModel(
            TransmitConfig(config.mac, str(config.ip), stream_ids=1 << (config.streams - 1).bit_length(),
                           ird=self.buffers_per_queue), memory)
        if scratch_base is None:   # after the QN 1 and QN 2 buffers, which grow with the streams and queues
            control_end = self.control_base + config.streams * self.control_stride
            scratch_base = max(DEFAULT_SCRATCH_BASE, -(-control_end // SCRATCH_SLOT) * SCRATCH_SLOT)
        self.scratch_base, self.scratch_slots = scratch_base, scratch_slots
        self.bounce_base, self.bounce_bytes = bounce_base, bounce_bytes
        self._bounce_used = 0
        self._bounced: set[int] = set()   # engine wr_ids whose source is in the bounce area
        self._scratch_next = 0
        self._posts: deque[_Post] = deque()
        self._segments_due: dict[int, int] = {}      # stream -> segments of taken messages not yet numbered
        self._completions: dict[int, tuple[int, WorkCompleted | None]] = {}   # engine wr_id -> (stream, completion)
        self._next_wr_id = 1
        self._tx_row = False
        self._engine_frames: list[bytes] = []
        self._sending = False   # in `data_to_send`: see `_terminate_waits`
        self._transport = False   # the transmit engine's transport unit holds the association's row
        self._now = 0.0           # the time of the call under way, for the transport unit's ticks
        if config.engine_transport and not hasattr(self.transmit, "write_transport"):
            raise RnicError("engine_transport needs a transmit engine with the transport unit (`TransportEngine`: "
                            "its model, or the gateware built with it)")

    @property
    def own_areas(self) -> list[tuple[int, int]]:
        """The QN 1 and QN 2 buffers, and the scratch slots and bounce area the engine reads from."""
        return [*super().own_areas, (self.scratch_base, SCRATCH_SLOT * self.scratch_slots),
                (self.bounce_base, self.bounce_bytes)]

    # -- messages to the engine -------------------------------------------------------------

    def _flush(self) -> None:
        """Whole messages from each stream with one to send (`_streams_sending`), each an engine request, its
        segments numbered now."""
        association = self._association
        for stream_id in list(self._streams_sending) if self._send_room() > 0 else ():
            endpoint = self._sending_endpoint(stream_id)
            if endpoint is None:
                continue
            while (endpoint.has_segments_to_send and self._segments_wanted(stream_id)
                   and self._segments_due.get(stream_id, 0) == 0):
                taken = endpoint.take_message()
                if taken is None:
                    break
                outbound, lengths, completion = taken
                self._queue_post(self._request_of(stream_id, outbound), stream_id, completion)
                self._segments_due[stream_id] = len(lengths)
                for length in lengths:   # numbered by the session, read and built by the engine
                    self._sessions.send_segment(stream_id, EngineSegment(length))
                self._send_session_messages()
            self._visited(stream_id, endpoint)
        self._send_session_messages()
        if association is not None:
            self._forward_engine_requests()

    def _send_session_messages(self) -> None:
        association = self._association
        for stream_id, ppid, payload in self._sessions.data_to_send():
            if association is None:
                raise RnicError("DDP messages to send without an association")
            request = None
            if ppid == PPID_DDP_SESSION_CONTROL:
                request = ControlRequest(ControlOpcode.SESSION_CONTROL, ASSOCIATION_INDEX, self._scratch(payload),
                                         len(payload), stream_id, wr_id=self._take_wr_id())
            elif not self._segments_due.get(stream_id, 0):
                if isinstance(payload, EngineChunk) or payload[2:] != rtr_segment(RtrType.WRITE):
                    raise RnicError(f"stream {stream_id}: a DDP segment no engine request stands for")
                # The session's own segment, the RTR (RFC 6581 1): a zero-length RDMA Write to STag 0.
                request = WorkRequest(WorkOpcode.RDMA_WRITE, ASSOCIATION_INDEX, stream_id, 0, 0,
                                      wr_id=self._take_wr_id())
            try:
                association.send_offloaded(stream_id, ppid, len(payload))
            except AssociationError:
                return   # the association is closing or closed: nothing more can go out
            if request is None:
                self._segments_due[stream_id] -= 1
            else:
                self._queue_post(request, stream_id)

    def _request_of(self, stream_id: int, outbound: Outbound):
        wr_id = self._take_wr_id()
        if outbound.opcode is Opcode.RDMA_READ_RESPONSE:
            return ReadResponseRequest(ASSOCIATION_INDEX, stream_id, outbound.source or 0, outbound.length,
                                       outbound.sink_stag, outbound.sink_to)
        if outbound.body:
            address = self._scratch(outbound.body)
        elif isinstance(outbound.source, int) or outbound.source is None:
            address = outbound.source or 0
        else:
            address = self._gathered(outbound.source, wr_id)
        return WorkRequest(_WORK[outbound.opcode], ASSOCIATION_INDEX, stream_id, address, outbound.length,
                           outbound.stag, outbound.to, outbound.sink_stag, outbound.sink_to,
                           outbound.invalidate_stag, wr_id)

    def _queue_post(self, request, stream_id: int, completion: WorkCompleted | None = None) -> None:
        self._posts.append(_Post(request, stream_id, completion))
        # The engine completes Writes, Sends, Terminates and session-control messages, not Read Requests.
        if isinstance(request, ControlRequest) or (isinstance(request, WorkRequest)
                                                   and request.opcode is not WorkOpcode.RDMA_READ_REQUEST):
            self._completions[request.wr_id] = (stream_id, completion)

    def _take_wr_id(self) -> int:
        wr_id = self._next_wr_id
        self._next_wr_id = (wr_id + 1) & 0xFFFFFFFF
        return wr_id

    def _gathered(self, pieces, wr_id: int) -> int:
        """One address for a gather list: the piece itself, or its pieces copied one after the other into the
        bounce area (the engine reads one address), kept until the request completes."""
        pieces = [(address, size) for address, size in pieces if size]
        if len(pieces) <= 1:
            return pieces[0][0] if pieces else 0
        length = sum(size for _, size in pieces)
        if not self._bounced:
            self._bounce_used = 0
        if self._bounce_used + length > self.bounce_bytes:
            raise RnicError(f"a {length}-byte gather list does not fit the {self.bounce_bytes}-byte bounce area "
                            "with the gathers still in flight")
        address = self.bounce_base + self._bounce_used
        self.memory.write(address, b"".join(self.memory.read(a, n) for a, n in pieces))
        self._bounce_used += length
        self._bounced.add(wr_id)
        return address

    def _scratch(self, body: bytes) -> int:
        """A slot of host memory holding `body` until the engine has sent it (slots are reused in turn)."""
        if len(body) > SCRATCH_SLOT:
            raise RnicError(f"{len(body)} bytes for the engine exceed a {SCRATCH_SLOT}-byte slot")
        address = self.scratch_base + SCRATCH_SLOT * self._scratch_next
        self._scratch_next = (self._scratch_next + 1) % self.scratch_slots
        self.memory.write(address, body)
        return address

    # -- the engine --------------------------------------------------------------------------

    def _forward_engine_requests(self) -> None:
        association = self._association
        if association is None or not self._tx_row:
            return
        for request in association.engine_requests():
            if request.kind is EngineRequestKind.PEER_ACK:
                self.transmit.peer_shutdown(ASSOCIATION_INDEX, request.tsn, ticks_at(self._now))
                self._engine_acknowledged()
            else:
                self.transmit.tsn_request(_KIND[request.kind], ASSOCIATION_INDEX, request.tsn)

    def _engine_acknowledged(self) -> None:
        """The Cumulative TSN Ack the transport unit reached, for the association (RFC 5043 6.6, RFC 4960 9.2)."""
        association = self._association
        if association is not None and not association.is_closed:
            association.engine_acknowledged(self.transmit.cumulative_tsn_ack(ASSOCIATION_INDEX), self._now)

    def transport_progressed(self, now: float) -> None:
        """The transport unit retired chunks with no record for the host (a board's unit takes the peer's SACKs
        inside the board, and its Cumulative TSN Ack is read from a register): the association learns what was
        acknowledged (RFC 4960 6.2.1 D, RFC 5043 6.6) and whatever waited for it goes (a SHUTDOWN, 9.2)."""
        self._now = now
        if self._transport:
            self._engine_acknowledged()
            self._drain_association(now)

    def _pump(self) -> None:
        """Offer the waiting requests one at a time, as the engine takes them; its frames wait for
        `data_to_send`, its completions are reported now."""
        frames = self._engine_frames
        engine = self.transmit
        while True:
            progressed = False
            while self._posts and self._tx_row and engine.accepts_next() and not self._terminate_waits():
                post = self._posts.popleft()
                if isinstance(post.request, WorkRequest):
                    if post.request.opcode is WorkOpcode.TERMINATE:
                        self._owed_sack_first()
                    engine.post_work(post.request)
                elif isinstance(post.request, ReadResponseRequest):
                    engine.post_read_response(post.request)
                else:
                    engine.post_control(post.request)
                progressed = True
            sent = engine.data_to_send(now=ticks_at(self._now)) if self._transport else engine.data_to_send()
            frames += sent
            if not (progressed or sent):
                break
        for event in engine.next_events():
            if isinstance(event, Completion):
                self._bounced.discard(event.wr_id)
                stream_id, completion = self._completions.pop(event.wr_id, (None, None))
                if completion is not None:
                    self._on_rdmap_events(stream_id, [completion])
            elif isinstance(event, (RefusedRead, RefusedTsn)):
                raise RnicError(f"the transmit engine refused {event}: the host and the engine disagree")
            elif isinstance(event, TransportStopped) and self._association is not None:
                record = event.record
                if isinstance(record, AssociationFailure):
                    self._association.engine_peer_unreachable(record.error_count, self._now)
                else:
                    self._association.engine_protocol_violation(record.cumulative_tsn_ack, self._now)
                # The failure reaches the host now: a board's stop record comes with no timer of the host's.
                super()._drain_association(self._now)

    def _drain_association(self, now: float) -> None:
        """An ACK reaches the engine as the SACK is processed, so a Write completes before a Terminate that
        followed the SACK is handled (RFC 5040 5.5: the peer's completions in order)."""
        super()._drain_association(now)
        self._forward_engine_requests()
        self._pump()

    def data_to_send(self, now: float) -> list[bytes]:
        self._now = now
        frames = super().data_to_send(now)
        self._forward_engine_requests()
        self._sending = True
        try:
            self._pump()
        finally:
            self._sending = False
        sent, self._engine_frames = self._engine_frames, []
        self._counters.frames_sent += len(sent)
        return frames + sent

    def _on_association_events(self, events: list, now: float) -> None:
        """The engine's association row when the association is up (RFC 4960 5.1)."""
        super()._on_association_events(events, now)
        association, peer = self._association, self._peer
        if association is None or peer is None:
            return
        for event in events:
            if isinstance(event, AssociationEstablished):
                self.transmit.write_association(TxAssociationRow(
                    ASSOCIATION_INDEX, peer.mac, str(peer.ip), association.config.local_port,
                    association.config.peer_port, association.peer_tag, association.mulpdu,
                    association.next_tsn, self.config.udp))
                self._tx_row = True
                # The transport row first: once the SACK row says `peer_sacks`, the receive engine hands the
                # peer's SACKs to a unit that already owns the row (those of frames before it reach the host).
                if self.config.engine_transport:
                    self._hand_transport_over(association)
                if self.config.engine_sacks or self.config.engine_transport:
                    self._write_sack_row(association)

    def _hand_transport_over(self, association) -> None:
        """The transport unit's row (RFC 4960 6.2.1 A, 7.2.1, 15): from the association's next TSN and the
        peer's rwnd, its MTU and largest chunk, its RTO parameters in the unit's ticks, Association.Max.Retrans
        and Max.Burst."""
        config = association.config
        rwnd = association.hand_transport_to_engine()
        self.transmit.write_transport(
            ASSOCIATION_INDEX, rwnd, mtu=config.max_packet_size,
            chunk_bytes=min(config.max_user_data, config.max_packet_size - DATA_CHUNK_OVERHEAD),
            rto_initial=ticks(config.rto_initial),
            rto_min=ticks(config.rto_min), rto_max=ticks(config.rto_max),
            max_retrans=config.association_max_retrans, max_burst=config.max_burst)
        self._transport = True

    def _write_sack_row(self, association) -> None:
        """The receive engine's SACK row. With `engine_sacks` (RFC 4960 6.2): from the association's Cumulative
        TSN Ack, its delayed-ACK time in the engine's ticks, a window of `WINDOW_SLOTS` full chunks less one per
        TSN held past a gap (the host's own rule, see `model.rnic.offload`). With `engine_transport`,
        `peer_sacks`: the peer's SACK chunks go to the transport unit (6.2.1), not the host."""
        chunk = association.config.max_user_data
        delay = min((1 << SACK_DELAY_BITS) - 1, max(1, round(association.config.delayed_ack_time / TICK_SECONDS)))
        engine_sacks = self.config.engine_sacks
        cumulative = association.hand_sacks_to_engine() if engine_sacks else 0
        self.command(SackRow(ASSOCIATION_INDEX, cumulative, delay,
                             min(association.config.receive_buffer, WINDOW_SLOTS * chunk), chunk, engine_sacks,
                             peer_sacks=self.config.engine_transport))

    def _terminate_waits(self) -> bool:
        """A Terminate next waits for the host's turn to send (`data_to_send`), after every frame that arrived
        with the one it answers, so that the SACK sent ahead of it covers them all, as the host SCTP's SACK
        bundled with it would (RFC 4960 6.10)."""
        request = self._posts[0].request
        return (self.config.engine_sacks and not self._sending and isinstance(request, WorkRequest)
                and request.opcode is WorkOpcode.TERMINATE)

    def _owed_sack_first(self) -> None:
        """Before a Terminate, the SACK the receive engine owes (RFC 5040 5.5: a Write the peer sent before the
        error completes there before the Terminate's error; the host SCTP bundled its SACK ahead of the DATA,
        RFC 4960 6.10): the model engine's at once, to the transmit engine ahead of the Terminate; the
        gateware's by the `sack` row's flush write, which goes ahead of the transmit requests."""
        association = self._association
        if not self.config.engine_sacks or association is None or not association.sacks_by_engine:
            return
        if self.engine is None:
            self.command(SackFlush(ASSOCIATION_INDEX))
            return
        for record in self.engine.flush_sack(ASSOCIATION_INDEX):
            self.transmit.post_sack(record)

    def _on_output(self, output: EngineOutput, now: float) -> None:
        self._now = now
        for record in output.sacks:       # a model receive engine's SACKs go to the transmit engine
            self.transmit.post_sack(record)
        for peer_sack in output.peer_sacks:   # and the peer's SACKs it hands the transport unit
            self.transmit.take_peer_sack(peer_sack.association, peer_sack.sack, ticks_at(now))
        if self._transport and output.chunks:
            output = self._take_peer_sacks(output, now)
        super()._on_output(output, now)
        self._pump()
        if self._transport:   # what the unit retired on the SACKs the engine handed it
            self._engine_acknowledged()

    def _take_peer_sacks(self, output: EngineOutput, now: float) -> EngineOutput:
        """The peer's SACK chunks of a delivered packet that reached the host (the engine took the packet
        before the SACK row said `peer_sacks`) go to the transport unit (RFC 4960 6.2.1), the packet's other
        chunks to the association; then the association learns what was retired."""
        kept, taken = [], False
        for chunk in output.chunks:
            sack = None
            if chunk[:1] == bytes([ChunkType.SACK]):
                try:
                    sack, = decode_chunks(chunk + bytes(-len(chunk) % 4))
                except DecodeError:
                    pass                     # a malformed SACK: the association's to judge
            if isinstance(sack, SackChunk):
                self.transmit.peer_sack(ASSOCIATION_INDEX, sack, ticks_at(now))
                taken = True
            else:
                kept.append(chunk)
        if taken:
            self._pump()
            self._engine_acknowledged()
        return replace(output, chunks=kept)

    def next_timeout(self) -> float | None:
        times = [super().next_timeout(), self.engine.next_timeout() if self.engine is not None else None]
        if self._transport:
            deadline = self.transmit.next_deadline()
            times.append(None if deadline is None else tick_time(deadline))
        return min((t for t in times if t is not None), default=None)

    def handle_timeout(self, now: float) -> None:
        self._now = now
        if self._transport:
            self.transmit.tick(ticks_at(now))
            self._pump()
        if self.engine is not None:
            for record in self.engine.handle_timeout(now):
                self.transmit.post_sack(record)
            self._pump()
        super().handle_timeout(now)

    def _arm(self, stream_id: int, first_ssn: int, ird: int, ord: int,
             pd: ProtectionDomain | None = None) -> OffloadedEndpoint:
        """The engine's stream row with the receive engine's: the session's first segment is DDP-SSN 1."""
        receiver = super()._arm(stream_id, first_ssn, ird, ord, pd)
        self.transmit.write_stream(ASSOCIATION_INDEX, stream_id, 1)
        self._segments_due[stream_id] = 0
        return receiver


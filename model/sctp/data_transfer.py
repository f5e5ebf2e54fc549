"""Data transfer, RFC 4960 6 and 7: DATA in and out, SACKs both ways, retransmission, congestion use.

`DataTransferMixin` holds the association's handlers for DATA (6.2: receipt,
ordered delivery 6.6, delayed acknowledgement), SACK generation (3.3.4, 6.2:
gap blocks and duplicate TSNs) and processing (6.2.1, with rwnd), the
transmission of new and retransmitted DATA within cwnd, rwnd and Max.Burst
(6.1), T3-rtx (6.3.3, 7.2.3) and fast retransmit (RFC 9260 7.2.4).

A transmit offload engine may build and send DATA chunks itself
(`OffloadedData`, queued by `send_offloaded`): they count like any chunk, but
each is a packet of its own that the engine sends, so where this code would
put one in a packet it asks the engine instead (`EngineRequest`): LIMIT, the
highest TSN released for a first transmission; RESEND, a chunk to send again
(T3-rtx or fast retransmit); ACK, the Cumulative TSN Ack once it advances.

SACK processing costs time in proportion to the SACK, not to the window:
the chunks outstanding run without holes from the Cumulative TSN Ack (a
dict by TSN), a SACK's Gap Ack Blocks are compared, as ranges, with the
previous SACK's so only chunks whose state changed are visited, and the
miss indications of 7.2.4 go only to the holes between the blocks.

The handlers work on the `Association`'s attributes (it is the only class
that mixes this in); a handler returns False when the RFC has it discard
the chunk.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass
from enum import Enum

from model.sctp.events import DataAcknowledged, DataReceived
from model.sctp.packet import (
    COMMON_HEADER_LENGTH,
    SACK_FIXED_FIELDS,
    SACK_FIXED_LENGTH,
    TSN_BITS,
    Chunk,
    ChunkType,
    DataChunk,
    ErrorCause,
    ErrorCauseCode,
    ErrorChunk,
    SackChunk,
    SctpPacket,
    ShutdownChunk,
    encode_packet,
    serial_add,
    serial_gt,
    serial_lt,
)
from model.sctp.state import AssociationState, InvalidStreamError, PayloadSizeError, Trigger

_COMMON_HEADER_FIELDS = struct.Struct("!HHI")
"""Source port, destination port and verification tag (RFC 4960 3.1)."""
_DATA_CHUNK_FIELDS = struct.Struct("!BBHIHHI")
"""Type, flags, length, TSN, stream identifier, SSN and PPID of a DATA chunk (RFC 4960 3.3.1)."""
_WHOLE_UNORDERED = DataChunk.FLAG_U | DataChunk.FLAG_B | DataChunk.FLAG_E
_FLAG_I, _DATA_HEADER_LENGTH = DataChunk.FLAG_I, DataChunk.HEADER_LENGTH
_T3_RTX, _DELAYED_ACK = Trigger.T3_RTX, Trigger.DELAYED_ACK
_DATA_TYPE, _SACK_TYPE = int(ChunkType.DATA), int(ChunkType.SACK)
"""Read on every packet under their names
(an enum member's class attribute is a descriptor call in Python 3.11, a module name a dict lookup)."""


@dataclass(frozen=True)
class PlacedData:
    """A DATA chunk a receive offload engine took for placement (RFC 5043 over an engine that places DDP
    segments itself): the association learns its TSN and user data length from the engine's ack record,
    for its SACKs (RFC 4960 6.2), never its payload."""

    tsn: int
    length: int
    immediate: bool = False
    """The chunk's I bit (RFC 9260 3.3.1), from the ack record."""
    CHUNK_TYPE = ChunkType.DATA


@dataclass(frozen=True)
class OffloadedData:
    """A DATA chunk a transmit offload engine builds and sends alone in its packet (RFC 5043 over an engine that
    segments DDP messages itself): the association numbers it, counts its user data against cwnd and rwnd and
    decides when it goes and goes again (RFC 4960 6.1, 6.3.3, 7.2.4), never holding its bytes."""

    tsn: int
    stream_id: int
    ppid: int
    length: int
    unordered: bool = True
    CHUNK_TYPE = ChunkType.DATA


class EngineRequestKind(Enum):
    LIMIT = "send new chunks up to the TSN"
    RESEND = "send the chunk of the TSN again"
    ACK = "the chunks up to the TSN are acknowledged"
    PEER_ACK = "a SHUTDOWN's Cumulative TSN Ack, for the engine's transport unit (RFC 4960 9.2)"


@dataclass(frozen=True)
class EngineRequest:
    """What the association asks of the transmit engine that sends its `OffloadedData`."""

    kind: EngineRequestKind
    tsn: int


@dataclass(slots=True)
class _SentChunk:
    """A DATA chunk sent and not yet covered by the Cumulative TSN Ack.

    Whether it waits for a retransmission is kept by the association in TSN
    sets (`_t3_marked`, `_fast_marked`), so "what to resend" costs nothing when
    nothing waits."""

    chunk: DataChunk | OffloadedData
    sent_at: float
    size: int
    """User data bytes (RFC 4960 6.1 counts these against cwnd and rwnd)."""
    wire_size: int
    """Bytes of the chunk in a packet, padding included (RFC 4960 3.2)."""
    transmissions: int = 1
    in_flight: bool = True
    gap_acked: bool = False
    missing_reports: int = 0
    fast_retransmitted: bool = False


def _user_data_length(chunk: DataChunk | OffloadedData) -> int:
    return chunk.length if isinstance(chunk, OffloadedData) else len(chunk.user_data)


def _data_chunk_wire_size(user_data_length: int) -> int:
    """The length in a packet of a DATA chunk with `user_data_length` bytes: 16-byte header, user data, padding
    to 4 (RFC 4960 3.2, 3.3.1)."""
    return (DataChunk.HEADER_LENGTH + user_data_length + 3) & ~3



def merge_ranges(blocks: tuple[tuple[int, int], ...], low: int, high: int) -> list[tuple[int, int]]:
    """Gap Ack Blocks as sorted, disjoint, non-adjacent (start, end) ranges clipped to low..high."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(blocks):
        start, end = max(start, low), min(end, high)
        if start > end:
            continue
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def subtract_ranges(ranges: list[tuple[int, int]], taken: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of sorted disjoint `ranges` outside sorted disjoint `taken`, in time linear in both."""
    out: list[tuple[int, int]] = []
    index = 0
    for start, end in ranges:
        while index < len(taken) and taken[index][1] < start:
            index += 1
        probe = index
        while start <= end:
            if probe >= len(taken) or taken[probe][0] > end:
                out.append((start, end))
                break
            if taken[probe][0] > start:
                out.append((start, taken[probe][0] - 1))
            start = max(start, taken[probe][1] + 1)
            probe += 1
    return out


class DataTransferMixin:
    """The association's handlers for RFC 4960 6 and 7 (see the module docstring)."""

    def _queue_data(self, stream_id: int, ppid: int, payload: bytes, unordered: bool = True) -> int:
        """6.1: queue one DATA chunk and return its TSN.  DDP sets U=1 on every chunk (RFC 5043 10)."""
        self._check_data(stream_id, len(payload))
        ssn = 0
        if not unordered:
            ssn = self._next_ssn_out.get(stream_id, 0)
            self._next_ssn_out[stream_id] = (ssn + 1) & 0xFFFF
        tsn = self._next_tsn
        self._next_tsn = (tsn + 1) & 0xFFFFFFFF   # serial_add(tsn, 1, TSN_BITS): one chunk at a time
        # tsn, stream_id, ssn, ppid, user_data, unordered: by position, the dataclass's __init__ takes them faster
        self._send_queue.append(DataChunk(tsn, stream_id, ssn, ppid, bytes(payload), unordered))
        self._queued_bytes += len(payload)
        return tsn

    def _queue_offloaded(self, stream_id: int, ppid: int, length: int, unordered: bool = True) -> int:
        """6.1: queue one DATA chunk a transmit engine builds and return its TSN (see `OffloadedData`)."""
        self._check_data(stream_id, length)
        if not unordered:
            raise ValueError("a transmit engine sends unordered DATA only (U = 1, RFC 5043 10)")
        tsn = self._next_tsn
        self._next_tsn = serial_add(tsn, 1, TSN_BITS)
        if self._transport_by_engine:   # numbered only: the engine sends, windows and retransmits it
            self._engine_unacked.append((tsn, stream_id, length))
            self._engine_unacked_bytes += length
            self._stats["data_chunks_sent"] += 1
            return tsn
        self._send_queue.append(OffloadedData(tsn, stream_id, ppid, length))
        self._queued_bytes += length
        self._offloading = True
        return tsn

    def _check_data(self, stream_id: int, length: int) -> None:
        if not 0 <= stream_id < self.outbound_streams:
            raise InvalidStreamError(f"stream {stream_id} not below {self.outbound_streams} outbound streams")
        if not length:
            raise PayloadSizeError("DATA needs at least one byte of user data (RFC 4960 6.2)")
        if length > self.config.max_user_data:
            raise PayloadSizeError(
                f"{length} bytes exceed {self.config.max_user_data} (DDP-SSN + MULPDU {self.mulpdu}, "
                "RFC 5043 9: never fragmented)"
            )

    def _release_buffer(self, nbytes: int) -> None:
        """6.2: `nbytes` of delivered data's buffer are free again; the window update (SWS avoidance) tells the
        sender once the window grew noticeably."""
        self._buffered -= nbytes
        self._window_changed()

    def _window_changed(self) -> None:
        """The window update (SWS avoidance): tell the sender once the window grew noticeably."""
        threshold = min(self.config.max_packet_size, self.config.receive_buffer // 2)
        if self._tracker is not None and self._receive_window() - self._last_advertised_rwnd >= threshold:
            self._ack_now = True

    def _receive_window(self) -> int:
        return max(self.config.receive_buffer - self._buffered - self._held_by_engine, 0)

    def _make_sack(self, room: int) -> SackChunk:
        """SACK of RFC 4960 6.2 / 3.3.4, trimmed to `room` bytes; resets the delayed-ACK state."""
        assert self._tracker is not None
        duplicates = self._tracker.take_duplicates()
        room = max(room - SACK_FIXED_LENGTH, 0)
        duplicates = duplicates[: room // 8]
        gaps = self._tracker.gap_blocks(limit=max((room - 4 * len(duplicates)) // 4, 0))
        window = self._receive_window()
        self._last_advertised_rwnd = window
        self._ack_now = False
        self._data_packets_since_sack = 0
        self._timers.pop(_DELAYED_ACK, None)
        return SackChunk(self._tracker.cumulative_tsn, window, gaps, duplicates)

    def _in_tsn_order(self, tsns: set[int]) -> list[_SentChunk]:
        """The outstanding chunks of `tsns`, lowest TSN first (serial order from the Cumulative TSN Ack)."""
        base = self._last_cum_ack
        return [self._outstanding[tsn] for tsn in sorted(tsns, key=lambda tsn: (tsn - base) & 0xFFFFFFFF)]

    def _set_in_flight(self, sent: _SentChunk, in_flight: bool) -> None:
        if sent.in_flight != in_flight:
            self._flight_size += sent.size if in_flight else -sent.size
            sent.in_flight = in_flight

    def _new_data_may_go(self) -> bool:
        """The first queued chunk may go now: there is one, cwnd has room (6.1 B), and the peer's rwnd has room
        for it or nothing is in flight (6.1 A)."""
        queue = self._send_queue
        if not queue or self._flight_size >= self._cc.cwnd:
            return False
        return self._flight_size == 0 or _user_data_length(queue[0]) <= self._peer_rwnd

    def _add_data(self, now: float, packets: list[bytes], current: list[Chunk], current_size: int
                  ) -> tuple[list[Chunk], int]:
        """Fill packets with DATA: fast retransmissions (7.2.4), T3 retransmissions, then new data (6.1)."""
        assert self._cc is not None
        if not (self._fast_marked or self._t3_marked) and not self._new_data_may_go():
            # Nothing to send again and nothing new that may go: what the loops below would conclude, without
            # setting them up (most calls, one after every frame received, end here).
            self._sacks_since_send = 0
            self._cc.on_transmit(self._flight_size)
            return current, current_size
        if not (self._fast_marked or self._t3_marked or self._offloading):
            return self._add_new_data(now, packets, current, current_size)
        limit = self.config.max_packet_size
        sent_data = False

        def emit() -> None:
            nonlocal current, current_size
            if current:
                packets.append(self._encode(self.peer_tag, current))
            current, current_size = [], 12

        released: int | None = None   # the highest TSN of an engine's chunk sent for the first time

        def resend(sent: _SentChunk) -> None:
            self._retransmitted(now, sent)
            self._engine_requests.append(EngineRequest(EngineRequestKind.RESEND, sent.chunk.tsn))

        # RFC 9260 7.2.4 step 3: one packet of the earliest chunks marked for fast retransmit, cwnd aside.
        if self._fast_marked:
            for sent in self._in_tsn_order(self._fast_marked):
                if isinstance(sent.chunk, OffloadedData):   # the engine's packet holds this chunk alone
                    if not current or not isinstance(current[-1], DataChunk):
                        resend(sent)
                        self._fast_marked.discard(sent.chunk.tsn)
                        sent.fast_retransmitted = True
                        self._stats["fast_retransmitted"] += 1
                    break
                size = sent.wire_size
                if current_size + size > limit and current:
                    break
                current.append(sent.chunk)
                current_size += size
                self._retransmitted(now, sent)
                self._fast_marked.discard(sent.chunk.tsn)
                sent.fast_retransmitted = True
                self._stats["fast_retransmitted"] += 1
            emit()
            sent_data = True
        # 6.1 D: Max.Burst packets per event.  Every SACK processed since the last call is one event, so a
        # caller that hands over several SACKs before asking for packets may send what it would have sent
        # had it asked after each of them.
        max_packets = self.config.max_burst * max(1, self._sacks_since_send)
        self._sacks_since_send = 0
        bursts = 0
        retransmit = deque(self._in_tsn_order(self._t3_marked)) if self._t3_marked else deque()
        while bursts < max_packets:
            added = False
            while self._flight_size < self._cc.cwnd:
                if retransmit and isinstance(retransmit[0].chunk, OffloadedData):
                    if added:
                        break   # this packet is done; the engine's chunk is a packet of its own
                    sent = retransmit.popleft()
                    self._t3_marked.discard(sent.chunk.tsn)
                    resend(sent)
                    self._stats["retransmitted_by_timeout"] += 1
                    added = True
                    break
                if retransmit:
                    sent = retransmit[0]
                    size = sent.wire_size
                    if current_size + size > limit and current:
                        break
                    retransmit.popleft()
                    self._t3_marked.discard(sent.chunk.tsn)
                    self._retransmitted(now, sent)
                    self._stats["retransmitted_by_timeout"] += 1
                elif self._send_queue:
                    chunk = self._send_queue[0]
                    length = _user_data_length(chunk)
                    size = _data_chunk_wire_size(length)
                    offloaded = isinstance(chunk, OffloadedData)
                    if (offloaded and added) or (not offloaded and current_size + size > limit and current):
                        break
                    # RFC 4960 6.1 A: respect the peer's rwnd, except for one chunk when nothing is in flight.
                    if length > self._peer_rwnd and (self._flight_size > 0 or added):
                        break
                    self._send_queue.popleft()
                    self._queued_bytes -= length
                    sent = _SentChunk(chunk, now, length, size)
                    self._outstanding[chunk.tsn] = sent
                    self._outstanding_bytes += sent.size
                    self._flight_size += sent.size
                    self._peer_rwnd = max(self._peer_rwnd - sent.size, 0)
                    self._stats["data_chunks_sent"] += 1
                    if self._rtt_probe is None:
                        self._rtt_probe = chunk.tsn
                    if offloaded:
                        released = chunk.tsn
                        added = True
                        break
                else:
                    break
                current.append(sent.chunk)
                current_size += size
                added = True
            if not added:
                break
            emit()
            sent_data = True
            bursts += 1
        if released is not None:
            self._engine_requests.append(EngineRequest(EngineRequestKind.LIMIT, released))
        self._cc.on_transmit(self._flight_size)
        if sent_data:
            self._timers.setdefault(_T3_RTX, now + self._rto.rto)
            self._restart_heartbeat(now)
        return current, current_size

    def _add_new_data(self, now: float, packets: list[bytes], current: list[Chunk], current_size: int
                      ) -> tuple[list[Chunk], int]:
        """`_add_data` when nothing waits to be sent again and no transmit engine sends chunks (every queued
        chunk a `DataChunk`): the general loop's new data alone, the same packets. Within cwnd (6.1 B) and the
        peer's rwnd, but one chunk when nothing is in flight (6.1 A), at most Max.Burst packets per SACK
        processed since the last call (6.1 D); T3-rtx started and the heartbeat pushed back once DATA went.
        The flight size, the peer's rwnd and the byte counts are kept in locals and stored once at the end."""
        cc, queue, outstanding, config = self._cc, self._send_queue, self._outstanding, self.config
        assert cc is not None
        limit, cwnd = config.max_packet_size, cc.cwnd
        max_packets = config.max_burst * max(1, self._sacks_since_send)
        self._sacks_since_send = 0
        flight_size, peer_rwnd = self._flight_size, self._peer_rwnd
        sent_bytes = sent_chunks = bursts = 0
        header_length = DataChunk.HEADER_LENGTH
        while bursts < max_packets:
            added = False
            while flight_size < cwnd and queue:
                chunk = queue[0]
                length = len(chunk.user_data)
                size = (header_length + length + 3) & ~3   # `_data_chunk_wire_size`
                if current_size + size > limit and current:
                    break
                if length > peer_rwnd and (flight_size > 0 or added):
                    break
                queue.popleft()
                outstanding[chunk.tsn] = _SentChunk(chunk, now, length, size)
                sent_bytes += length
                sent_chunks += 1
                flight_size += length
                peer_rwnd = peer_rwnd - length if peer_rwnd > length else 0
                if self._rtt_probe is None:
                    self._rtt_probe = chunk.tsn
                current.append(chunk)
                current_size += size
                added = True
            if not added:
                break
            # `_encode`, its count of packets sent made once below
            packets.append(encode_packet(config.local_port, config.peer_port, self.peer_tag, current))
            current, current_size = [], 12
            bursts += 1
        self._stats["packets_sent"] += bursts
        self._flight_size, self._peer_rwnd = flight_size, peer_rwnd
        self._queued_bytes -= sent_bytes
        self._outstanding_bytes += sent_bytes
        self._stats["data_chunks_sent"] += sent_chunks
        cc.on_transmit(flight_size)
        if bursts:
            self._timers.setdefault(_T3_RTX, now + self._rto.rto)
            self._restart_heartbeat(now)
        return current, current_size

    def _retransmitted(self, now: float, sent: _SentChunk) -> None:
        sent.transmissions += 1
        sent.sent_at = now
        self._set_in_flight(sent, True)
        if self._rtt_probe == sent.chunk.tsn:
            self._rtt_probe = None  # Karn's rule (6.3.1 C5)

    # -- receiving DATA, RFC 4960 6.2 ---------------------------------------------------

    def _on_data(self, now: float, packet: SctpPacket, chunk: DataChunk | PlacedData) -> bool | None:
        """6.2: take a DATA chunk (acknowledged by the SACK `_after_data_packet` arranges); a `PlacedData`
        counts for the SACK like any other and is delivered by its engine, not here."""
        events = self._events
        if isinstance(chunk, PlacedData):
            self._data_in_packet = True
            self._ack_now |= chunk.immediate           # RFC 9260 6.2 (RFC 7053 4.2): the I bit, no delay
            self._take_tsn(chunk.tsn, chunk.length)
            return None
        if not chunk.user_data:
            # 6.2: a DATA chunk without user data aborts with "No User Data".
            events.append(self._failure("DATA chunk without user data (RFC 4960 6.2)"))
            self._close_with_abort(ErrorCause(ErrorCauseCode.NO_USER_DATA, struct.pack("!I", chunk.tsn)))
            return None
        if not (chunk.beginning and chunk.ending):
            events.append(self._failure("fragmented DATA chunk: DDP/SCTP forbids SCTP fragmentation (RFC 5043 9)"))
            self._close_with_abort(ErrorCause(ErrorCauseCode.PROTOCOL_VIOLATION, b"fragmented DATA (RFC 5043 9)"))
            return None
        if not self._take_whole_chunk(chunk.tsn, chunk.stream_id, len(chunk.user_data), chunk.immediate):
            return None
        if chunk.unordered:
            self._deliver(chunk)
        else:
            self._deliver_ordered(chunk)
        return None

    def _take_whole_chunk(self, tsn: int, stream_id: int, length: int, immediate: bool) -> bool:
        """6.2: a whole DATA chunk with `length` bytes of user data; True if it is to be delivered."""
        self._data_in_packet = True
        self._ack_now |= immediate                     # RFC 9260 6.2 (RFC 7053 4.2): the I bit, no delay
        if not self._take_tsn(tsn, length):
            return False
        if stream_id >= self.inbound_streams:
            # 6.5: acknowledge, discard, report "Invalid Stream Identifier".
            self._queue_control(ErrorChunk(causes=(
                ErrorCause(ErrorCauseCode.INVALID_STREAM_IDENTIFIER, struct.pack("!HH", stream_id, 0)),)))
            return False
        return True

    def _receive_whole_unordered_data(self, data: bytes, now: float) -> bool:
        """The common packet of an association carrying DDP, read without chunk objects: common header to
        this association with its verification tag (8.5), then whole (B=E=1, RFC 5043 9), unordered (U=1,
        RFC 5043 10) DATA chunks with user data, in ESTABLISHED or SHUTDOWN-PENDING (the rows of `_on_data`).
        Each chunk is taken as `_on_data` takes it; False, with nothing done, for any other packet, which the
        general path decodes."""
        end = len(data)
        if end < COMMON_HEADER_LENGTH:
            return False
        src_port, dst_port, tag = _COMMON_HEADER_FIELDS.unpack_from(data, 0)
        config = self.config
        if dst_port != config.local_port or src_port != config.peer_port or tag != self.local_tag:
            return False
        chunks = []
        offset = COMMON_HEADER_LENGTH
        while offset < end:
            if end - offset < _DATA_HEADER_LENGTH:
                return False
            chunk_type, flags, length, tsn, stream_id, _ssn, ppid = _DATA_CHUNK_FIELDS.unpack_from(data, offset)
            if (chunk_type != _DATA_TYPE or flags & _WHOLE_UNORDERED != _WHOLE_UNORDERED
                    or length <= _DATA_HEADER_LENGTH or offset + length > end):
                return False
            chunks.append((tsn, stream_id, ppid, data[offset + _DATA_HEADER_LENGTH : offset + length],
                           flags & _FLAG_I != 0))
            offset += length
            offset += min(-length % 4, end - offset)   # padding, which the last chunk may lack (3.2)
        if not chunks:
            return False
        self._stats["packets_received"] += 1
        self._data_in_packet = False
        hand_off = self.data_hand_off
        if hand_off is not None and not self._events:   # the packet's deliveries are its only news: handed over
            manual = self.config.manual_receive_window
            for tsn, stream_id, ppid, user_data, immediate in chunks:
                if self._take_whole_chunk(tsn, stream_id, len(user_data), immediate):
                    if manual:
                        self._buffered += len(user_data)
                    hand_off.append((stream_id, ppid, bytes(user_data)))
        else:
            for tsn, stream_id, ppid, user_data, immediate in chunks:
                if self._take_whole_chunk(tsn, stream_id, len(user_data), immediate):
                    self._deliver_user_data(stream_id, ppid, tsn, user_data, True)
        if self._data_in_packet:
            self._data_in_packet = False
            self._after_data_packet(now)
        return True

    def _take_tsn(self, tsn: int, size: int) -> bool:
        """6.2: a DATA chunk's TSN: False for a duplicate (noted for the SACK), one beyond the window, or new
        data beyond the highest TSN received when the buffer has no room for it; else recorded."""
        tracker = self._tracker
        assert tracker is not None
        if tsn != (tracker.cumulative_tsn + 1) & 0xFFFFFFFF:   # the next TSN in order is new and in the window
            if tracker.is_duplicate(tsn):
                tracker.note_duplicate(tsn)
                self._stats["duplicate_tsns_received"] += 1
                return False
            if not tracker.within_window(tsn):
                return False
        if not self._sacks_by_engine and size > self._receive_window() and (
                tracker.highest_received is None or serial_gt(tsn, tracker.highest_received, TSN_BITS)):
            self._ack_now = True  # 6.2: no buffer space; drop new data beyond the highest TSN received
            return False
        tracker.accept(tsn)
        self._stats["data_chunks_received"] += 1
        return True

    def _on_data_in_shutdown_sent(self, now: float, packet: SctpPacket, chunk: DataChunk) -> bool | None:
        """9.2: DATA still arrives after our SHUTDOWN; each packet of it is answered with SHUTDOWN."""
        self._on_data(now, packet, chunk)
        self._shutdown_answers_data = self._data_in_packet
        return None

    def _deliver(self, chunk: DataChunk) -> None:
        self._deliver_user_data(chunk.stream_id, chunk.ppid, chunk.tsn, chunk.user_data, chunk.unordered)

    def _deliver_user_data(self, stream_id: int, ppid: int, tsn: int, user_data: bytes, unordered: bool) -> None:
        if self.config.manual_receive_window:
            self._buffered += len(user_data)
        self._events.append(DataReceived(stream_id, ppid, tsn, bytes(user_data), unordered))

    def _deliver_ordered(self, chunk: DataChunk) -> None:
        """Ordered chunks wait for their SSN turn on their stream (RFC 4960 6.6)."""
        expected = self._next_ssn_in.get(chunk.stream_id, 0)
        held = self._reorder.setdefault(chunk.stream_id, {})
        if chunk.ssn != expected:
            held[chunk.ssn] = chunk
            self._buffered += len(chunk.user_data)
            return
        self._deliver(chunk)
        expected = (expected + 1) & 0xFFFF
        while expected in held:
            waiting = held.pop(expected)
            self._buffered -= len(waiting.user_data)
            self._deliver(waiting)
            expected = (expected + 1) & 0xFFFF
        self._next_ssn_in[chunk.stream_id] = expected

    def _after_data_packet(self, now: float) -> None:
        """6.2: SACK at once on gaps, duplicates or every second packet, else within the delayed-ACK time."""
        assert self._tracker is not None
        self._data_packets_since_sack += 1
        if self._shutdown_answers_data:
            # 9.2: in SHUTDOWN-SENT, answer DATA with SHUTDOWN and restart T2-shutdown.
            self._shutdown_answers_data = False
            self._queue_control(ShutdownChunk(self._tracker.cumulative_tsn))
            self._timers[Trigger.T2_SHUTDOWN] = now + self._rto.rto
            self._ack_now = True
        if self._sacks_by_engine:                # the engine SACKs (`hand_sacks_to_engine`)
            self._ack_now, self._data_packets_since_sack = False, 0
            self._tracker.take_duplicates()
            return
        if (self._data_packets_since_sack >= 2 or self._tracker.has_gaps or self._tracker.has_duplicates):
            self._ack_now = True
        if self._ack_now:
            # Built now, not when the caller next asks for packets: a caller that feeds several packets
            # before `data_to_send` still gets a SACK for every second packet (6.2), not one stretch SACK.
            self._sacks_due.append(self._make_sack(self.config.max_packet_size - 12))
        else:
            self._timers.setdefault(_DELAYED_ACK, now + self.config.delayed_ack_time)

    def _on_delayed_ack(self, now: float) -> None:
        """6.2: the delayed-ACK time is up: the SACK goes with the next packets."""
        self._ack_now = True

    # -- SACK processing, RFC 4960 6.2.1 -------------------------------------------------

    def _on_sack(self, now: float, packet: SctpPacket, sack: SackChunk) -> None:
        """6.2.1: process a SACK."""
        self._sacks_since_send += 1
        self._process_ack(now, sack.cumulative_tsn_ack, sack.a_rwnd, sack.gap_blocks)

    def _receive_lone_sack(self, data: bytes, now: float) -> bool:
        """A packet of one SACK chunk (3.3.4) to this association with its verification tag (8.5), read in place
        and processed as `_on_sack` processes it; False, with nothing done, for any other packet (one with more
        chunks, or a SACK whose length does not match its counts, which the general path discards)."""
        end = len(data)
        if end < COMMON_HEADER_LENGTH + SACK_FIXED_LENGTH:
            return False
        src_port, dst_port, tag = _COMMON_HEADER_FIELDS.unpack_from(data, 0)
        config = self.config
        if dst_port != config.local_port or src_port != config.peer_port or tag != self.local_tag:
            return False
        chunk_type, _flags, length, cum_ack, a_rwnd, gaps, duplicates = SACK_FIXED_FIELDS.unpack_from(
            data, COMMON_HEADER_LENGTH)
        if (chunk_type != _SACK_TYPE or length != SACK_FIXED_LENGTH + 4 * (gaps + duplicates)
                or COMMON_HEADER_LENGTH + length != end):
            return False
        blocks: tuple[tuple[int, int], ...] = ()
        if gaps:   # an in-order receiver's SACK has none
            offsets = struct.unpack_from(f"!{2 * gaps}H", data, COMMON_HEADER_LENGTH + SACK_FIXED_LENGTH)
            blocks = tuple(zip(offsets[0::2], offsets[1::2]))
        self._stats["packets_received"] += 1
        self._data_in_packet = False
        self._sacks_since_send += 1
        self._process_ack(now, cum_ack, a_rwnd, blocks)
        return True

    def _process_ack(self, now: float, cum_ack: int, a_rwnd: int, gap_blocks: tuple[tuple[int, int], ...]) -> None:
        """6.2.1 D: the Cumulative TSN Ack, Gap Ack Blocks and a_rwnd of a SACK (or of a SHUTDOWN, 9.2)."""
        events = self._events
        if self._transport_by_engine:
            # The engine's transport unit processes the peer's acknowledgements (`hand_transport_to_engine`):
            # a SHUTDOWN's goes to it, and `engine_acknowledged` brings back what it retired.
            self._engine_requests.append(EngineRequest(EngineRequestKind.PEER_ACK, cum_ack))
            self._peer_is_alive()
            return
        assert self._cc is not None
        if serial_lt(cum_ack, self._last_cum_ack, TSN_BITS):
            return  # 6.2.1 D i): an older SACK, out of order
        highest_sent = (self._next_tsn - 1 - len(self._send_queue)) & 0xFFFFFFFF
        if serial_gt(cum_ack, highest_sent, TSN_BITS):
            events.append(self._failure("SACK acknowledges a TSN never sent (RFC 9260 6.2.1)"))
            self._close_with_abort(ErrorCause(ErrorCauseCode.PROTOCOL_VIOLATION,
                                              b"cumulative TSN ack beyond TSNs sent"))
            return
        flight_before = self._flight_size
        cum_advanced = serial_gt(cum_ack, self._last_cum_ack, TSN_BITS)
        newly_acked = 0
        highest_newly_acked: int | None = None
        acked_per_stream: dict[int, int] = {}
        # The outstanding TSNs run without holes from the last Cumulative TSN Ack: pop them up to the new one.
        outstanding, t3_marked, fast_marked = self._outstanding, self._t3_marked, self._fast_marked
        # The byte counts in locals, stored once after the loop (`_measure_rtt` reads neither).
        outstanding_bytes, flight_size = self._outstanding_bytes, self._flight_size
        previous_cum_ack = tsn = self._last_cum_ack
        while tsn != cum_ack:
            tsn = (tsn + 1) & 0xFFFFFFFF
            sent = outstanding.pop(tsn, None)
            if sent is None:
                continue  # queued when the association closed, never sent
            size = sent.size
            if not sent.gap_acked:
                newly_acked += size
                outstanding_bytes -= size
                highest_newly_acked = tsn
                if tsn == self._rtt_probe:
                    self._measure_rtt(now, sent)
            if t3_marked or fast_marked:   # most SACKs find nothing marked
                t3_marked.discard(tsn)
                fast_marked.discard(tsn)
            if sent.in_flight:   # `_set_in_flight(sent, False)`
                flight_size -= size
                sent.in_flight = False
            stream_id = sent.chunk.stream_id
            acked_per_stream[stream_id] = acked_per_stream.get(stream_id, 0) + 1
        self._outstanding_bytes, self._flight_size = outstanding_bytes, flight_size
        self._last_cum_ack = cum_ack
        if cum_advanced and self._offloading:
            self._engine_requests.append(EngineRequest(EngineRequestKind.ACK, cum_ack))
        # Gap Ack Blocks (3.3.4): compared with the previous SACK's, so only the TSNs whose state changed are
        # visited, newly gap-acknowledged or reneged (6.2.1 D iv).
        if gap_blocks or self._gap_ranges:
            now_acked, gap_newly_acked, gap_highest = self._compare_gap_blocks(now, cum_ack, previous_cum_ack,
                                                                               gap_blocks)
            newly_acked += gap_newly_acked
            if gap_highest is not None and (highest_newly_acked is None
                                            or serial_gt(gap_highest, highest_newly_acked, TSN_BITS)):
                highest_newly_acked = gap_highest
        else:
            now_acked = []   # no Gap Ack Block now or before: nothing to compare (the usual SACK)
        self._gap_ranges = now_acked
        if now_acked:   # without Gap Ack Blocks every TSN newly acknowledged is at or below the Cumulative TSN Ack
            highest_gap_acked = (cum_ack + now_acked[-1][1]) & 0xFFFFFFFF
            self._count_miss_indications(cum_advanced, highest_newly_acked, highest_gap_acked, now_acked)
        outstanding_bytes = self._outstanding_bytes
        self._peer_a_rwnd = a_rwnd
        self._peer_rwnd = max(a_rwnd - outstanding_bytes, 0)
        self._cc.on_sack(newly_acked, cum_advanced, cum_ack, flight_before, self._flight_size)
        # 6.3.2 R2/R3.
        if not self._outstanding:
            self._timers.pop(_T3_RTX, None)
        elif cum_advanced:
            self._timers[_T3_RTX] = now + self._rto.rto
        # RFC 9260 6.1 A: SACKs answering zero window probes do not count as errors; any SACK shows the peer is alive.
        self._peer_is_alive()
        for stream_id in sorted(acked_per_stream):
            events.append(DataAcknowledged(stream_id, acked_per_stream[stream_id]))
        self._progress_shutdown(now)

    def _compare_gap_blocks(self, now: float, cum_ack: int, previous_cum_ack: int,
                            gap_blocks: tuple[tuple[int, int], ...]) -> tuple[list[tuple[int, int]], int, int | None]:
        """6.2.1 D iv: the SACK's Gap Ack Blocks against the previous SACK's, after the Cumulative TSN Ack moved
        from `previous_cum_ack` to `cum_ack`: the blocks as merged ranges, and the bytes and the highest TSN
        they acknowledge for the first time (renegings are undone here too)."""
        newly_acked = 0
        highest_newly_acked: int | None = None
        advanced_by = (cum_ack - previous_cum_ack) & 0xFFFFFFFF
        before = [(max(start - advanced_by, 1), end - advanced_by)
                  for start, end in self._gap_ranges if end - advanced_by >= 1]
        now_acked = merge_ranges(gap_blocks, 1, len(self._outstanding))
        for first, last in subtract_ranges(now_acked, before):
            for offset in range(first, last + 1):
                tsn = (cum_ack + offset) & 0xFFFFFFFF
                sent = self._outstanding[tsn]
                sent.gap_acked = True
                self._t3_marked.discard(tsn)
                self._fast_marked.discard(tsn)
                newly_acked += sent.size
                self._outstanding_bytes -= sent.size
                if tsn == self._rtt_probe:
                    self._measure_rtt(now, sent)
                self._set_in_flight(sent, False)
            last_tsn = (cum_ack + last) & 0xFFFFFFFF
            if highest_newly_acked is None or serial_gt(last_tsn, highest_newly_acked, TSN_BITS):
                highest_newly_acked = last_tsn
        for first, last in subtract_ranges(before, now_acked):
            for offset in range(first, last + 1):
                sent = self._outstanding[(cum_ack + offset) & 0xFFFFFFFF]
                sent.gap_acked = False  # renege (6.2.1 D iv): the chunk needs sending again
                self._outstanding_bytes += sent.size
        return now_acked, newly_acked, highest_newly_acked

    def _measure_rtt(self, now: float, sent: _SentChunk) -> None:
        """6.3.1: the chunk timed for an RTT measurement (`_rtt_probe`) is acknowledged: measured, unless it was
        sent again (Karn's rule, C5); the next chunk sent is timed next."""
        self._rtt_probe = None
        if sent.transmissions == 1:
            self._rto.measure(now - sent.sent_at)

    def _count_miss_indications(self, cum_advanced: bool, highest_newly_acked: int | None,
                                 highest_gap_acked: int | None, gap_ranges: list[tuple[int, int]]) -> None:
        """RFC 9260 7.2.4: miss indications below the highest TSN newly acknowledged; 3 mark a fast retransmit.

        The chunks missing below that TSN are the holes between the SACK's Gap Ack Blocks, so only they are
        visited."""
        assert self._cc is not None
        limit = highest_newly_acked
        if self._cc.in_fast_recovery and cum_advanced and highest_gap_acked is not None:
            limit = highest_gap_acked
        if limit is None:
            return
        cum_ack = self._last_cum_ack
        limit_offset = (limit - cum_ack) & 0xFFFFFFFF
        if limit_offset > len(self._outstanding):
            return  # at or below the Cumulative TSN Ack: nothing is missing below it
        marked = False
        hole_start = 1
        for start, end in gap_ranges + [(limit_offset, limit_offset)]:
            for offset in range(hole_start, min(start, limit_offset)):
                tsn = (cum_ack + offset) & 0xFFFFFFFF
                sent = self._outstanding[tsn]
                if sent.gap_acked or sent.fast_retransmitted or tsn in self._fast_marked:
                    continue
                sent.missing_reports += 1
                if sent.missing_reports >= 3:
                    self._fast_marked.add(tsn)
                    self._t3_marked.discard(tsn)
                    self._set_in_flight(sent, False)
                    marked = True
            hole_start = max(hole_start, end + 1)
            if hole_start >= limit_offset:
                break
        if marked:
            highest_outstanding = (cum_ack + len(self._outstanding)) & 0xFFFFFFFF
            self._cc.on_fast_retransmit(highest_outstanding)

    def _on_t3_rtx(self, now: float) -> None:
        """RFC 4960 6.3.3 E1-E3 and 7.2.3: back off, collapse cwnd, mark everything unacknowledged; each expiry
        counts against Association.Max.Retrans first (8.1, 8.2)."""
        assert self._cc is not None
        if not self._outstanding:
            return
        self._count_error("T3-rtx expired")
        if self.state is AssociationState.CLOSED:
            return
        self._rto.back_off()
        self._cc.on_retransmission_timeout()
        self._rtt_probe = None
        for tsn, sent in self._outstanding.items():
            if not sent.gap_acked:
                self._t3_marked.add(tsn)
                self._fast_marked.discard(tsn)
                self._set_in_flight(sent, False)
        self._timers[Trigger.T3_RTX] = now + self._rto.rto


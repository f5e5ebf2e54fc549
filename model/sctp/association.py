"""Sans-I/O SCTP association endpoint: the subset of RFC 4960 / RFC 9260 a DDP association uses.

Input and output are SCTP packets as bytes (common header and chunks; the IP
or UDP framing is `model.net.frames`'s).  The caller passes the current time to
every call and drives the timers:

    association.connect(now)                  # active side: INIT (5.1)
    association.receive(packet, now)          # any packet from the peer
    association.handle_timeout(now)           # when now >= next_timeout()
    for packet in association.data_to_send(now): ...   # SCTP packets
    for event in association.next_events(): ...        # AssociationEvent

The caller may hand over several packets before it asks for packets again
(all that arrived at one instant, say): SACKs and bursts come out as if it
had asked after each one, a SACK for every second DATA packet (6.2) and
Max.Burst packets per SACK received (6.1 D).

A `Listener` answers INITs statelessly with a MAC-protected State Cookie and
creates an `Association` from a valid COOKIE ECHO (5.1.3, 5.1.5).

Implemented: the four-way handshake with T1-init/T1-cookie back-off (5.1,
5.3), verification tags (8.5, 8.5.1), INIT collision and duplicate INIT /
COOKIE ECHO cases (5.2.1, 5.2.2, 5.2.4 cases B, C, D), Stale Cookie (5.2.6),
the Adaptation Layer Indication (RFC 5043 5.1, 11.1), equal stream counts
(RFC 5043 8), DATA transmission with bundling (6.1, 6.10), SACK generation
with delayed acknowledgement, gap blocks and duplicate TSNs (6.2), SACK
processing with rwnd (6.2.1), T3-rtx and RTO (6.3), congestion control and
fast retransmit (7.2, RFC 9260 7.2.4), heartbeats (8.3), error counting
(8.1, 8.2), ABORT (9.1) and graceful shutdown (9.2).

Deliberately left out, each rejected cleanly: association restart (5.2.4
case A: such a COOKIE ECHO is discarded and the old association goes on),
multi-homing (one destination), SCTP fragmentation (RFC 5043 9 forbids it
for DDP: a fragmented DATA chunk from the peer aborts the association with
"Protocol Violation"; `send()` rejects payloads above the MULPDU).
"""

from __future__ import annotations

import struct
from collections import Counter, deque
from dataclasses import dataclass, replace
from enum import Enum

from model.errors import DecodeError, RnicError
from model.sctp.packet import (
    ADAPTATION_CODE_POINT_DDP,
    TSN_BITS,
    AbortChunk,
    AdaptationLayerIndication,
    Chunk,
    CookieAckChunk,
    CookieEchoChunk,
    DataChunk,
    ErrorCause,
    ErrorCauseCode,
    ErrorChunk,
    HeartbeatAckChunk,
    HeartbeatChunk,
    InitAckChunk,
    InitChunk,
    Parameter,
    ParameterBase,
    ParameterType,
    SackChunk,
    SctpPacket,
    ShutdownAckChunk,
    ShutdownChunk,
    ShutdownCompleteChunk,
    StateCookieParameter,
    UnknownChunk,
    serial_add,
    serial_gt,
    serial_lt,
)
from model.sctp.config import AssociationConfig
from model.sctp.congestion import CongestionControl
from model.sctp.cookie import CookieSigner, CookieState
from model.sctp.events import (
    AssociationAborted,
    AssociationClosed,
    AssociationEstablished,
    AssociationEvent,
    AssociationFailed,
    DataAcknowledged,
    DataReceived,
    DdpProceduresForbidden,
    ErrorReported,
    PathStatusChanged,
    PeerShutdownStarted,
)
from model.sctp.rto import RtoEstimator
from model.sctp.tsn_tracker import TsnTracker

_HEARTBEAT_INFO = struct.Struct("!dQ")
_SACK_FIXED_LENGTH = 16


class AssociationError(RnicError):
    """Misuse of an association by its caller."""


class InvalidStateError(AssociationError):
    """The call is not allowed in the association's current state."""


class PayloadSizeError(AssociationError, ValueError):
    """Empty user data (RFC 4960 6.2) or more than a DDP-SSN plus MULPDU bytes (RFC 5043 9)."""


class InvalidStreamError(AssociationError, ValueError):
    """A stream identifier at or above the negotiated number of outbound streams (RFC 4960 6.5)."""


class AssociationState(Enum):
    """RFC 4960 4 states."""

    CLOSED = "CLOSED"
    COOKIE_WAIT = "COOKIE-WAIT"
    COOKIE_ECHOED = "COOKIE-ECHOED"
    ESTABLISHED = "ESTABLISHED"
    SHUTDOWN_PENDING = "SHUTDOWN-PENDING"
    SHUTDOWN_SENT = "SHUTDOWN-SENT"
    SHUTDOWN_RECEIVED = "SHUTDOWN-RECEIVED"
    SHUTDOWN_ACK_SENT = "SHUTDOWN-ACK-SENT"


_DATA_STATES = {
    AssociationState.ESTABLISHED,
    AssociationState.SHUTDOWN_PENDING,
    AssociationState.SHUTDOWN_SENT,
    AssociationState.SHUTDOWN_RECEIVED,
    AssociationState.SHUTDOWN_ACK_SENT,
}


@dataclass(frozen=True)
class AssociationStatistics:
    data_chunks_sent: int
    """New DATA chunks put on the wire (retransmissions not counted)."""
    data_chunks_received: int
    retransmitted_by_timeout: int
    fast_retransmitted: int
    duplicate_tsns_received: int
    packets_sent: int
    packets_received: int
    rto: float
    srtt: float | None
    rttvar: float | None
    cwnd: int
    ssthresh: int
    flight_size: int
    peer_rwnd: int


@dataclass
class _SentChunk:
    """A DATA chunk sent and not yet covered by the Cumulative TSN Ack.

    Whether it waits for a retransmission is kept by the association in TSN
    sets (`_t3_marked`, `_fast_marked`), so "what to resend" costs nothing when
    nothing waits."""

    chunk: DataChunk
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


def _data_chunk_wire_size(chunk: DataChunk) -> int:
    """A DATA chunk's length in a packet: 16-byte header, user data, padding to 4 (RFC 4960 3.2, 3.3.1)."""
    return (DataChunk.HEADER_LENGTH + len(chunk.user_data) + 3) & ~3


@dataclass(frozen=True)
class _Outgoing:
    chunk: Chunk
    verification_tag: int
    alone: bool = False
    """INIT, INIT ACK and SHUTDOWN COMPLETE travel alone (RFC 4960 6.10)."""


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


def _random_tag(config: AssociationConfig) -> int:
    """A non-zero Initiate Tag (RFC 4960 5.3.1)."""
    return config.rng.randrange(1, 1 << 32)


def _adaptation_parameters(config: AssociationConfig) -> tuple[ParameterBase, ...]:
    if config.adaptation_code_point is None:
        return ()
    return (AdaptationLayerIndication(code_point=config.adaptation_code_point),)


def _invalid_init(init: InitChunk | InitAckChunk) -> bool:
    """RFC 4960 3.3.2/3.3.3: Initiate Tag 0 or no streams make the INIT (ACK) invalid."""
    return init.initiate_tag == 0 or init.outbound_streams == 0 or init.inbound_streams == 0


def _cookie_preservative(init: InitChunk) -> float:
    """Suggested Cookie Life-Span Increment in seconds (RFC 4960 3.3.2.1 type 9), 0 if absent."""
    for parameter in init.parameters:
        if parameter.param_type == ParameterType.COOKIE_PRESERVATIVE and len(parameter.value) == 4:
            return struct.unpack("!I", parameter.value)[0] / 1000
    return 0.0


def build_init_ack(
    config: AssociationConfig,
    signer: CookieSigner,
    init: InitChunk,
    now: float,
    local_tag: int,
    local_initial_tsn: int,
    local_tie_tag: int = 0,
    peer_tie_tag: int = 0,
) -> InitAckChunk:
    """The INIT ACK answering `init`, its State Cookie sealed by `signer` (RFC 4960 5.1.3).

    A Cookie Preservative is honoured up to one more `cookie_lifetime` (5.2.6 lets the receiver bound it).
    """
    lifetime = config.cookie_lifetime + min(_cookie_preservative(init), config.cookie_lifetime)
    state = CookieState(
        created=now,
        lifetime=lifetime,
        local_port=config.local_port,
        peer_port=config.peer_port,
        local_tag=local_tag,
        peer_tag=init.initiate_tag,
        local_initial_tsn=local_initial_tsn,
        peer_initial_tsn=init.initial_tsn,
        peer_a_rwnd=init.a_rwnd,
        peer_outbound_streams=init.outbound_streams,
        peer_inbound_streams=init.inbound_streams,
        local_outbound_streams=min(config.streams, init.inbound_streams),
        local_inbound_streams=min(config.streams, init.outbound_streams),
        peer_adaptation_code_point=init.adaptation_code_point,
        local_tie_tag=local_tie_tag,
        peer_tie_tag=peer_tie_tag,
    )
    return InitAckChunk(
        initiate_tag=local_tag,
        a_rwnd=config.receive_buffer,
        outbound_streams=config.streams,
        inbound_streams=config.streams,
        initial_tsn=local_initial_tsn,
        parameters=(StateCookieParameter(cookie=signer.seal(state)),) + _adaptation_parameters(config),
    )


def _stale_cookie_error(staleness: float) -> ErrorCause:
    """Stale Cookie cause: Measure of Staleness in microseconds (RFC 4960 3.3.10.3)."""
    micros = min(int(staleness * 1_000_000), 0xFFFFFFFF)
    return ErrorCause(ErrorCauseCode.STALE_COOKIE, struct.pack("!I", micros))


class Association:
    """One SCTP association with a single peer address; see the module docstring for the call pattern."""

    def __init__(self, config: AssociationConfig):
        self.config = config
        self.state = AssociationState.CLOSED
        self.local_tag = _random_tag(config)
        self.peer_tag = 0
        self._signer = CookieSigner(config.hmac_secret) if config.hmac_secret else None
        self._initial_tsn = config.rng.getrandbits(32)
        self._next_tsn = self._initial_tsn
        self._used = False
        self._passive_open = False
        self._rto = RtoEstimator(config.rto_initial, config.rto_min, config.rto_max)
        self._timers: dict[str, float] = {}
        self._control: list[_Outgoing] = []
        self._final_packet_sent = False
        # Handshake.
        self._init_chunk: InitChunk | None = None
        self._cookie_echo: CookieEchoChunk | None = None
        self._init_retransmits = 0
        self._stale_cookie_retried = False
        self._cookie_preservative_ms = 0
        self.outbound_streams = 0
        self.inbound_streams = 0
        self.peer_adaptation_code_point: int | None = None
        self.ddp_enabled = False
        # Sender.
        self._send_queue: deque[DataChunk] = deque()
        self._outstanding: dict[int, _SentChunk] = {}
        """TSN -> chunk, exactly the TSNs after the Cumulative TSN Ack up to the highest sent (no holes)."""
        self._outstanding_bytes = 0
        """User data bytes outstanding and not gap-acknowledged (RFC 4960 6.2.1: rwnd minus these)."""
        self._gap_ranges: list[tuple[int, int]] = []
        """The last SACK's Gap Ack Blocks as offsets from `_last_cum_ack`: sorted, merged, within outstanding."""
        self._t3_marked: set[int] = set()
        """TSNs marked for retransmission by T3-rtx (6.3.3 E3)."""
        self._fast_marked: set[int] = set()
        """TSNs marked for fast retransmit (RFC 9260 7.2.4), not sent again yet."""
        self._flight_size = 0
        self._peer_rwnd = 0
        self._peer_a_rwnd = 0
        self._last_cum_ack = (self._initial_tsn - 1) & 0xFFFFFFFF
        self._rtt_probe: int | None = None
        self._cc: CongestionControl | None = None
        self._sacks_since_send = 0
        """SACKs processed since the last `data_to_send`: each is one event entitled to a Max.Burst (6.1 D)."""
        self._next_ssn_out: dict[int, int] = {}
        # Receiver.
        self._tracker: TsnTracker | None = None
        self._ack_now = False
        self._data_packets_since_sack = 0
        self._sacks_due: list[SackChunk] = []
        """SACKs built when a received packet called for one at once (6.2), waiting for `data_to_send`."""
        self._buffered = 0
        self._last_advertised_rwnd = config.receive_buffer
        self._next_ssn_in: dict[int, int] = {}
        self._reorder: dict[int, dict[int, DataChunk]] = {}
        # Fault handling.
        self._association_errors = 0
        self._path_errors = 0
        self._path_reachable = True
        self._heartbeat_nonce: int | None = None
        self._heartbeat_unanswered = False
        # Statistics.
        self._stats = Counter[str]()
        self._events: list[AssociationEvent] = []

    # ------------------------------------------------------------------ public API

    @property
    def mulpdu(self) -> int:
        """Largest DDP segment the DDP layer may hand down (RFC 5043 9)."""
        return self.config.mulpdu

    @property
    def is_closed(self) -> bool:
        return self.state is AssociationState.CLOSED

    @property
    def statistics(self) -> AssociationStatistics:
        cc = self._cc
        return AssociationStatistics(
            data_chunks_sent=self._stats["data_chunks_sent"],
            data_chunks_received=self._stats["data_chunks_received"],
            retransmitted_by_timeout=self._stats["retransmitted_by_timeout"],
            fast_retransmitted=self._stats["fast_retransmitted"],
            duplicate_tsns_received=self._stats["duplicate_tsns_received"],
            packets_sent=self._stats["packets_sent"],
            packets_received=self._stats["packets_received"],
            rto=self._rto.rto,
            srtt=self._rto.srtt,
            rttvar=self._rto.rttvar,
            cwnd=cc.cwnd if cc else 0,
            ssthresh=cc.ssthresh if cc else 0,
            flight_size=self._flight_size,
            peer_rwnd=self._peer_rwnd,
        )

    @property
    def outstanding_chunks(self) -> int:
        """DATA chunks sent and not yet covered by the Cumulative TSN Ack, plus those still queued."""
        return len(self._outstanding) + len(self._send_queue)

    def connect(self, now: float) -> None:
        """Active open: send INIT and start T1-init (RFC 4960 5.1 A)."""
        if self._used:
            raise InvalidStateError("an Association object opens once; create a new one")
        self._used = True
        self._init_chunk = self._make_init()
        self._control.append(_Outgoing(self._init_chunk, 0, alone=True))
        self.state = AssociationState.COOKIE_WAIT
        self._timers["t1_init"] = now + self._rto.rto

    def send(self, stream_id: int, ppid: int, payload: bytes, unordered: bool = True) -> int:
        """Queue one DATA chunk and return its TSN (RFC 4960 6.1).  DDP sets U=1 on every chunk (RFC 5043 10)."""
        if self.state is not AssociationState.ESTABLISHED:
            raise InvalidStateError(f"send() in state {self.state.value}")
        if not 0 <= stream_id < self.outbound_streams:
            raise InvalidStreamError(f"stream {stream_id} not below {self.outbound_streams} outbound streams")
        if not payload:
            raise PayloadSizeError("DATA needs at least one byte of user data (RFC 4960 6.2)")
        if len(payload) > self.config.max_user_data:
            raise PayloadSizeError(
                f"{len(payload)} bytes exceed {self.config.max_user_data} (DDP-SSN + MULPDU {self.mulpdu}, "
                "RFC 5043 9: never fragmented)"
            )
        ssn = 0
        if not unordered:
            ssn = self._next_ssn_out.get(stream_id, 0)
            self._next_ssn_out[stream_id] = (ssn + 1) & 0xFFFF
        tsn = self._next_tsn
        self._next_tsn = serial_add(tsn, 1, TSN_BITS)
        self._send_queue.append(
            DataChunk(tsn=tsn, stream_id=stream_id, ssn=ssn, ppid=ppid, user_data=bytes(payload), unordered=unordered)
        )
        return tsn

    def consume(self, nbytes: int) -> None:
        """With `manual_receive_window`, give `nbytes` of delivered data's buffer back (RFC 4960 6.2 a_rwnd)."""
        if not self.config.manual_receive_window:
            raise InvalidStateError("consume() needs manual_receive_window=True")
        if not 0 <= nbytes <= self._buffered:
            raise ValueError(f"consume({nbytes}) with {self._buffered} bytes held")
        self._buffered -= nbytes
        # Window update (RFC 4960 6.2, SWS avoidance): tell the sender once the window grew noticeably.
        threshold = min(self.config.max_packet_size, self.config.receive_buffer // 2)
        if self._receive_window() - self._last_advertised_rwnd >= threshold and self.state in _DATA_STATES:
            self._ack_now = True

    def shutdown(self, now: float) -> None:
        """Graceful close (RFC 4960 9.2): SHUTDOWN once every queued and outstanding chunk is acknowledged."""
        if self.state is AssociationState.ESTABLISHED:
            self.state = AssociationState.SHUTDOWN_PENDING
            self._timers.pop("heartbeat", None)
            self._progress_shutdown(now)
        elif self.state in (AssociationState.COOKIE_WAIT, AssociationState.COOKIE_ECHOED, AssociationState.CLOSED):
            raise InvalidStateError(f"shutdown() in state {self.state.value}; use abort()")

    def abort(self, now: float, reason: str = "") -> None:
        """Send ABORT with a User-Initiated Abort cause (RFC 4960 9.1, 3.3.10.12) and close at once."""
        if self.state is AssociationState.CLOSED:
            return
        cause = ErrorCause(ErrorCauseCode.USER_INITIATED_ABORT, reason.encode())
        self._close_with_abort(cause)

    def next_timeout(self) -> float | None:
        return min(self._timers.values(), default=None)

    def next_events(self) -> list[AssociationEvent]:
        """Every event queued since the last call, oldest first."""
        events, self._events = self._events, []
        return events

    def handle_timeout(self, now: float) -> None:
        """Fire every timer due at `now` (call when now >= `next_timeout()`); events are queued."""
        events = self._events
        for name, deadline in sorted(self._timers.items(), key=lambda item: item[1]):
            if deadline <= now and self._timers.get(name) == deadline:
                del self._timers[name]
                getattr(self, f"_on_{name}")(now, events)

    def receive(self, data: bytes, now: float) -> None:
        """Process one SCTP packet from the peer; malformed or misaddressed packets are discarded."""
        events = self._events
        if self.state is AssociationState.CLOSED and (self._used or not self._passive_open):
            return  # after close nothing is processed; only a Listener's new association waits here
        try:
            packet = SctpPacket.decode(data)
        except DecodeError:
            return
        if packet.dst_port != self.config.local_port or packet.src_port != self.config.peer_port:
            return
        if not self._verification_tag_ok(packet):
            return
        self._stats["packets_received"] += 1
        had_data = False
        for chunk in packet.chunks:
            if isinstance(chunk, DataChunk):
                had_data = self._on_data(now, chunk, events) or had_data
            elif isinstance(chunk, UnknownChunk):
                action = chunk.unrecognized_action
                if action.report:
                    self._queue_control(ErrorChunk(causes=(
                        ErrorCause(ErrorCauseCode.UNRECOGNIZED_CHUNK_TYPE, chunk.encode()),)))
                if not action.skip:
                    break
            else:
                handler = getattr(self, f"_on_{type(chunk).__name__}", None)
                if handler is not None:
                    handler(now, packet, chunk, events)
            if self.state is AssociationState.CLOSED:
                break
        if had_data:
            self._after_data_packet(now)

    def data_to_send(self, now: float) -> list[bytes]:
        """SCTP packets due now: control chunks, a SACK if one is due, and DATA within cwnd and rwnd."""
        packets: list[bytes] = []
        if self._final_packet_sent:
            return packets
        current: list[Chunk] = []
        current_tag = self.peer_tag
        current_size = 12

        def flush() -> None:
            nonlocal current, current_size
            if current:
                packets.append(self._encode(current_tag, current))
            current, current_size = [], 12

        for item in self._control:
            size = len(item.chunk.encode())
            if item.alone or item.verification_tag != current_tag or current_size + size > self.config.max_packet_size:
                flush()
                current_tag = item.verification_tag
            current.append(item.chunk)
            current_size += size
            if item.alone:
                flush()
        self._control.clear()
        sacks_due, self._sacks_due = self._sacks_due, []
        if self.state is AssociationState.CLOSED:
            flush()
            if self._used:
                self._final_packet_sent = True  # after close nothing more is sent
            return packets
        if current_tag != self.peer_tag:
            flush()
            current_tag = self.peer_tag
        # One packet per SACK built on receipt, as if each had been sent when its packet arrived; the last one
        # may share its packet with DATA (6.1).
        for index, sack in enumerate(sacks_due):
            size = len(sack.encode())
            if current_size + size > self.config.max_packet_size:
                flush()
            current.append(sack)
            current_size += size
            if index < len(sacks_due) - 1:
                flush()
        if self._tracker is not None and (self._ack_now or (self._data_packets_since_sack and self._has_data_to_send())):
            sack = self._make_sack(self.config.max_packet_size - 12)
            if current_size + len(sack.encode()) > self.config.max_packet_size:
                flush()
            current.append(sack)
            current_size += len(sack.encode())
        if self.state in _DATA_STATES:
            current, current_size = self._add_data(now, packets, current, current_size)
        flush()
        return packets

    # ------------------------------------------------------------------ packets out

    def _encode(self, tag: int, chunks: list[Chunk]) -> bytes:
        self._stats["packets_sent"] += 1
        return SctpPacket(self.config.local_port, self.config.peer_port, tag, tuple(chunks)).encode()

    def _queue_control(self, chunk: Chunk, tag: int | None = None, alone: bool = False) -> None:
        self._control.append(_Outgoing(chunk, self.peer_tag if tag is None else tag, alone))

    def _make_init(self) -> InitChunk:
        parameters: list[ParameterBase] = list(_adaptation_parameters(self.config))
        if self._cookie_preservative_ms:
            parameters.append(Parameter(ParameterType.COOKIE_PRESERVATIVE, struct.pack("!I", self._cookie_preservative_ms)))
        return InitChunk(
            initiate_tag=self.local_tag,
            a_rwnd=self.config.receive_buffer,
            outbound_streams=self.config.streams,
            inbound_streams=self.config.streams,
            initial_tsn=self._initial_tsn,
            parameters=tuple(parameters),
        )

    def _receive_window(self) -> int:
        return max(self.config.receive_buffer - self._buffered, 0)

    def _make_sack(self, room: int) -> SackChunk:
        """SACK of RFC 4960 6.2 / 3.3.4, trimmed to `room` bytes; resets the delayed-ACK state."""
        assert self._tracker is not None
        duplicates = self._tracker.take_duplicates()
        room = max(room - _SACK_FIXED_LENGTH, 0)
        duplicates = duplicates[: room // 8]
        gaps = self._tracker.gap_blocks(limit=max((room - 4 * len(duplicates)) // 4, 0))
        window = self._receive_window()
        self._last_advertised_rwnd = window
        self._ack_now = False
        self._data_packets_since_sack = 0
        self._timers.pop("delayed_ack", None)
        return SackChunk(self._tracker.cumulative_tsn, window, gaps, duplicates)

    def _has_data_to_send(self) -> bool:
        return bool(self._send_queue or self._t3_marked or self._fast_marked)

    def _in_tsn_order(self, tsns: set[int]) -> list[_SentChunk]:
        """The outstanding chunks of `tsns`, lowest TSN first (serial order from the Cumulative TSN Ack)."""
        base = self._last_cum_ack
        return [self._outstanding[tsn] for tsn in sorted(tsns, key=lambda tsn: (tsn - base) & 0xFFFFFFFF)]

    def _set_in_flight(self, sent: _SentChunk, in_flight: bool) -> None:
        if sent.in_flight != in_flight:
            self._flight_size += sent.size if in_flight else -sent.size
            sent.in_flight = in_flight

    def _add_data(self, now: float, packets: list[bytes], current: list[Chunk], current_size: int
                  ) -> tuple[list[Chunk], int]:
        """Fill packets with DATA: fast retransmissions (7.2.4), T3 retransmissions, then new data (6.1)."""
        assert self._cc is not None
        limit = self.config.max_packet_size
        sent_data = False

        def emit() -> None:
            nonlocal current, current_size
            if current:
                packets.append(self._encode(self.peer_tag, current))
            current, current_size = [], 12

        # RFC 9260 7.2.4 step 3: one packet of the earliest chunks marked for fast retransmit, cwnd aside.
        if self._fast_marked:
            for sent in self._in_tsn_order(self._fast_marked):
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
                    size = _data_chunk_wire_size(chunk)
                    if current_size + size > limit and current:
                        break
                    # RFC 4960 6.1 A: respect the peer's rwnd, except for one chunk when nothing is in flight.
                    if len(chunk.user_data) > self._peer_rwnd and (self._flight_size > 0 or added):
                        break
                    self._send_queue.popleft()
                    sent = _SentChunk(chunk, now, len(chunk.user_data), size)
                    self._outstanding[chunk.tsn] = sent
                    self._outstanding_bytes += sent.size
                    self._flight_size += sent.size
                    self._peer_rwnd = max(self._peer_rwnd - sent.size, 0)
                    self._stats["data_chunks_sent"] += 1
                    if self._rtt_probe is None:
                        self._rtt_probe = chunk.tsn
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
        self._cc.on_transmit(self._flight_size)
        if sent_data:
            self._timers.setdefault("t3_rtx", now + self._rto.rto)
            self._restart_heartbeat(now)
        return current, current_size

    def _retransmitted(self, now: float, sent: _SentChunk) -> None:
        sent.transmissions += 1
        sent.sent_at = now
        self._set_in_flight(sent, True)
        if self._rtt_probe == sent.chunk.tsn:
            self._rtt_probe = None  # Karn's rule (6.3.1 C5)

    # ------------------------------------------------------------------ verification tags, RFC 4960 8.5 / 8.5.1

    def _verification_tag_ok(self, packet: SctpPacket) -> bool:
        first = packet.chunks[0]
        tag = packet.verification_tag
        if any(isinstance(c, InitChunk) for c in packet.chunks):
            # 8.5.1 A: INIT travels alone with tag 0.
            return isinstance(first, InitChunk) and len(packet.chunks) == 1 and tag == 0
        if isinstance(first, CookieEchoChunk):
            return True  # checked against the cookie (5.1.5, 5.2.4)
        if isinstance(first, (AbortChunk, ShutdownCompleteChunk)):
            # 8.5.1 B, C: own tag with T=0, the peer's with T=1.
            if first.tag_reflected:
                return self.peer_tag != 0 and tag == self.peer_tag
            return tag == self.local_tag
        return tag == self.local_tag

    # ------------------------------------------------------------------ handshake

    def _on_InitChunk(self, now: float, packet: SctpPacket, init: InitChunk, events: list[AssociationEvent]) -> None:
        if _invalid_init(init):
            self._control.append(_Outgoing(AbortChunk(tag_reflected=True, causes=(
                ErrorCause(ErrorCauseCode.INVALID_MANDATORY_PARAMETER),)), 0, alone=True))
            return
        if self._signer is None:
            return  # cannot answer without a cookie secret
        state = self.state
        if state is AssociationState.SHUTDOWN_ACK_SENT:
            # RFC 4960 9.2: discard the INIT and retransmit SHUTDOWN ACK.
            self._queue_control(ShutdownAckChunk())
            return
        if state is AssociationState.COOKIE_WAIT:
            # 5.2.1: answer with our original INIT's tag and TSN, Tie-Tags zero.
            ack = build_init_ack(self.config, self._signer, init, now, self.local_tag, self._initial_tsn)
        elif state is AssociationState.COOKIE_ECHOED:
            # 5.2.1: same parameters; Tie-Tags populated.
            ack = build_init_ack(self.config, self._signer, init, now, self.local_tag, self._initial_tsn,
                                 self.local_tag, self.peer_tag)
        elif state in _DATA_STATES:
            # 5.2.2: new tag and TSN, Tie-Tags are the current tags; the association goes on.
            ack = build_init_ack(self.config, self._signer, init, now, _random_tag(self.config),
                                 self.config.rng.getrandbits(32), self.local_tag, self.peer_tag)
        else:
            return
        self._control.append(_Outgoing(ack, init.initiate_tag, alone=True))

    def _on_InitAckChunk(self, now: float, packet: SctpPacket, ack: InitAckChunk, events: list[AssociationEvent]) -> None:
        if self.state is not AssociationState.COOKIE_WAIT:
            return  # 5.2.3: discard an INIT ACK in any other state
        cookie = ack.state_cookie
        if _invalid_init(ack) or cookie is None:
            self._timers.clear()
            causes = (ErrorCause(ErrorCauseCode.INVALID_MANDATORY_PARAMETER),)
            if ack.initiate_tag:
                self.peer_tag = ack.initiate_tag
                self._close_with_abort(*causes)
            else:
                self.state = AssociationState.CLOSED
            events.append(AssociationFailed("invalid INIT ACK (RFC 4960 3.3.3)"))
            return
        self.peer_tag = ack.initiate_tag
        self._learn_peer(ack.initial_tsn, ack.a_rwnd, min(self.config.streams, ack.inbound_streams),
                         min(self.config.streams, ack.outbound_streams), ack.adaptation_code_point)
        self._timers.pop("t1_init", None)
        self._cookie_echo = CookieEchoChunk(cookie=cookie)
        self._queue_control(self._cookie_echo)
        self.state = AssociationState.COOKIE_ECHOED
        self._init_retransmits = 0
        self._timers["t1_cookie"] = now + self._rto.rto

    def _learn_peer(self, peer_initial_tsn: int, peer_a_rwnd: int, outbound: int, inbound: int,
                    code_point: int | None) -> None:
        self._tracker = TsnTracker(cumulative_tsn=(peer_initial_tsn - 1) & 0xFFFFFFFF)
        self._peer_a_rwnd = self._peer_rwnd = peer_a_rwnd
        self.outbound_streams = outbound
        self.inbound_streams = inbound
        self.peer_adaptation_code_point = code_point

    def _on_CookieAckChunk(self, now: float, packet: SctpPacket, chunk: CookieAckChunk, events: list[AssociationEvent]) -> None:
        if self.state is AssociationState.COOKIE_ECHOED:
            self._timers.pop("t1_cookie", None)
            self._establish(now, events)

    def _on_CookieEchoChunk(self, now: float, packet: SctpPacket, echo: CookieEchoChunk, events: list[AssociationEvent]) -> None:
        if self._signer is None:
            return
        cookie = self._signer.open(echo.cookie)
        if cookie is None or packet.verification_tag != cookie.local_tag:
            return  # 5.1.5 steps 1-2: silently discard
        if cookie.local_port != self.config.local_port or cookie.peer_port != self.config.peer_port:
            return
        if self.state is AssociationState.CLOSED:
            if not self._passive_open or self._used:
                return
            if cookie.staleness(now) > 0:
                self._stale(cookie, now)
                return
            self._used = True
            self._adopt_cookie(cookie)
            self._queue_control(CookieAckChunk())
            self._establish(now, events)
            return
        local_match = cookie.local_tag == self.local_tag
        peer_match = cookie.peer_tag == self.peer_tag
        if local_match and peer_match:
            # 5.2.4 case D.
            if self.state in (AssociationState.COOKIE_WAIT, AssociationState.COOKIE_ECHOED):
                self._adopt_cookie(cookie)
                self._timers.pop("t1_init", None)
                self._timers.pop("t1_cookie", None)
                self._establish(now, events)
            self._queue_control(CookieAckChunk())
        elif local_match and (cookie.local_tie_tag == 0 or self.state is AssociationState.COOKIE_WAIT):
            # 5.2.4 case B (INIT collision): take the peer's tag and parameters from the cookie.
            if cookie.staleness(now) > 0:
                self._stale(cookie, now)
                return
            self._adopt_cookie(cookie)
            self._timers.pop("t1_init", None)
            self._timers.pop("t1_cookie", None)
            if self.state in (AssociationState.COOKIE_WAIT, AssociationState.COOKIE_ECHOED):
                self._establish(now, events)
            self._queue_control(CookieAckChunk())
        # Case A (peer restart) is not supported and case C is discarded by 5.2.4: nothing to do.

    def _adopt_cookie(self, cookie: CookieState) -> None:
        self.local_tag = cookie.local_tag
        self.peer_tag = cookie.peer_tag
        if self._initial_tsn != cookie.local_initial_tsn:
            self._initial_tsn = self._next_tsn = cookie.local_initial_tsn
            self._last_cum_ack = (cookie.local_initial_tsn - 1) & 0xFFFFFFFF
        self._learn_peer(cookie.peer_initial_tsn, cookie.peer_a_rwnd, cookie.local_outbound_streams,
                         cookie.local_inbound_streams, cookie.peer_adaptation_code_point)

    def _stale(self, cookie: CookieState, now: float) -> None:
        """RFC 4960 5.1.5 step 3: answer a stale cookie with ERROR "Stale Cookie" (tag = the peer's)."""
        self._control.append(_Outgoing(ErrorChunk(causes=(_stale_cookie_error(cookie.staleness(now)),)),
                                       cookie.peer_tag))

    def _establish(self, now: float, events: list[AssociationEvent]) -> None:
        """COMMUNICATION UP with the RFC 5043 11.1 verdict and the RFC 5043 8 stream count."""
        self.state = AssociationState.ESTABLISHED
        self._cc = CongestionControl(mtu=self.config.max_packet_size, ssthresh=self._peer_a_rwnd)
        self._last_cum_ack = (self._initial_tsn - 1) & 0xFFFFFFFF
        local_ddp = self.config.adaptation_code_point == ADAPTATION_CODE_POINT_DDP
        peer_ddp = self.peer_adaptation_code_point == ADAPTATION_CODE_POINT_DDP
        self.ddp_enabled = local_ddp and peer_ddp
        events.append(AssociationEstablished(
            outbound_streams=self.outbound_streams,
            inbound_streams=self.inbound_streams,
            streams=min(self.outbound_streams, self.inbound_streams),
            peer_adaptation_code_point=self.peer_adaptation_code_point,
            ddp_enabled=self.ddp_enabled,
            mulpdu=self.mulpdu,
        ))
        if not self.ddp_enabled:
            if not local_ddp:
                reason = "this endpoint did not announce the DDP adaptation (RFC 5043 11.1)"
            elif self.peer_adaptation_code_point is None:
                reason = "peer sent no Adaptation Layer Indication: NONE (RFC 5043 11.1)"
            else:
                reason = (f"peer indicated adaptation code point 0x{self.peer_adaptation_code_point:08x}: "
                          "ANY-OTHER (RFC 5043 11.1)")
            events.append(DdpProceduresForbidden(self.peer_adaptation_code_point, reason))
        self._restart_heartbeat(now)

    def _on_t1_init(self, now: float, events: list[AssociationEvent]) -> None:
        """RFC 4960 5.1 / 6.3.3: retransmit INIT with a backed-off RTO, up to Max.Init.Retransmits."""
        self._init_retransmits += 1
        if self._init_retransmits > self.config.max_init_retransmits:
            self.state = AssociationState.CLOSED
            self._timers.clear()
            events.append(AssociationFailed("INIT not answered (Max.Init.Retransmits, RFC 4960 5.1)"))
            return
        self._rto.back_off()
        assert self._init_chunk is not None
        self._control.append(_Outgoing(self._init_chunk, 0, alone=True))
        self._timers["t1_init"] = now + self._rto.rto

    def _on_t1_cookie(self, now: float, events: list[AssociationEvent]) -> None:
        """RFC 4960 5.1 C: retransmit COOKIE ECHO with a backed-off RTO."""
        self._init_retransmits += 1
        if self._init_retransmits > self.config.max_init_retransmits:
            self._timers.clear()
            self._close_with_abort()
            events.append(AssociationFailed("COOKIE ECHO not answered (Max.Init.Retransmits, RFC 4960 5.1)"))
            return
        self._rto.back_off()
        assert self._cookie_echo is not None
        self._queue_control(self._cookie_echo)
        self._timers["t1_cookie"] = now + self._rto.rto

    def _on_ErrorChunk(self, now: float, packet: SctpPacket, chunk: ErrorChunk, events: list[AssociationEvent]) -> None:
        stale = [c for c in chunk.causes if c.code == ErrorCauseCode.STALE_COOKIE and len(c.value) == 4]
        if stale and self.state is AssociationState.COOKIE_ECHOED:
            # 5.2.6: one new INIT with a Cookie Preservative of twice the staleness; a second time gives up.
            if self._stale_cookie_retried:
                self._timers.clear()
                self._close_with_abort()
                events.append(AssociationFailed("State Cookie stale twice (RFC 4960 5.2.6)"))
                return
            self._stale_cookie_retried = True
            staleness_us = struct.unpack("!I", stale[0].value)[0]
            self._cookie_preservative_ms = min(max(2 * staleness_us // 1000, 1), 0xFFFFFFFF)
            self._timers.pop("t1_cookie", None)
            self.peer_tag = 0
            self._init_chunk = self._make_init()
            self._control.append(_Outgoing(self._init_chunk, 0, alone=True))
            self.state = AssociationState.COOKIE_WAIT
            self._timers["t1_init"] = now + self._rto.rto
            return
        events.append(ErrorReported(chunk.causes))

    # ------------------------------------------------------------------ receiving DATA, RFC 4960 6.2

    def _on_data(self, now: float, chunk: DataChunk, events: list[AssociationEvent]) -> bool:
        if self.state not in (AssociationState.ESTABLISHED, AssociationState.SHUTDOWN_PENDING,
                              AssociationState.SHUTDOWN_SENT) or self._tracker is None:
            return False
        if not chunk.user_data:
            # 6.2: a DATA chunk without user data aborts with "No User Data".
            events.append(AssociationFailed("DATA chunk without user data (RFC 4960 6.2)"))
            self._close_with_abort(ErrorCause(ErrorCauseCode.NO_USER_DATA, struct.pack("!I", chunk.tsn)))
            return False
        if not (chunk.beginning and chunk.ending):
            events.append(AssociationFailed("fragmented DATA chunk: DDP/SCTP forbids SCTP fragmentation (RFC 5043 9)"))
            self._close_with_abort(ErrorCause(ErrorCauseCode.PROTOCOL_VIOLATION, b"fragmented DATA (RFC 5043 9)"))
            return False
        tracker = self._tracker
        if tracker.is_duplicate(chunk.tsn):
            tracker.note_duplicate(chunk.tsn)
            self._stats["duplicate_tsns_received"] += 1
            return True
        if not tracker.within_window(chunk.tsn):
            return True
        size = len(chunk.user_data)
        if size > self._receive_window() and (
                tracker.highest_received is None or serial_gt(chunk.tsn, tracker.highest_received, TSN_BITS)):
            self._ack_now = True  # 6.2: no buffer space; drop new data beyond the highest TSN received
            return True
        tracker.accept(chunk.tsn)
        self._stats["data_chunks_received"] += 1
        if chunk.stream_id >= self.inbound_streams:
            # 6.5: acknowledge, discard, report "Invalid Stream Identifier".
            self._queue_control(ErrorChunk(causes=(
                ErrorCause(ErrorCauseCode.INVALID_STREAM_IDENTIFIER, struct.pack("!HH", chunk.stream_id, 0)),)))
            return True
        if chunk.unordered:
            self._deliver(chunk, events)
        else:
            self._deliver_ordered(chunk, events)
        return True

    def _deliver(self, chunk: DataChunk, events: list[AssociationEvent]) -> None:
        if self.config.manual_receive_window:
            self._buffered += len(chunk.user_data)
        events.append(DataReceived(chunk.stream_id, chunk.ppid, chunk.tsn, bytes(chunk.user_data), chunk.unordered))

    def _deliver_ordered(self, chunk: DataChunk, events: list[AssociationEvent]) -> None:
        """Ordered chunks wait for their SSN turn on their stream (RFC 4960 6.6)."""
        expected = self._next_ssn_in.get(chunk.stream_id, 0)
        held = self._reorder.setdefault(chunk.stream_id, {})
        if chunk.ssn != expected:
            held[chunk.ssn] = chunk
            self._buffered += len(chunk.user_data)
            return
        self._deliver(chunk, events)
        expected = (expected + 1) & 0xFFFF
        while expected in held:
            waiting = held.pop(expected)
            self._buffered -= len(waiting.user_data)
            self._deliver(waiting, events)
            expected = (expected + 1) & 0xFFFF
        self._next_ssn_in[chunk.stream_id] = expected

    def _after_data_packet(self, now: float) -> None:
        """6.2: SACK at once on gaps, duplicates or every second packet, else within the delayed-ACK time."""
        assert self._tracker is not None
        self._data_packets_since_sack += 1
        if self.state is AssociationState.SHUTDOWN_SENT:
            # 9.2: answer DATA with SHUTDOWN and restart T2-shutdown.
            self._queue_control(ShutdownChunk(self._tracker.cumulative_tsn))
            self._timers["t2_shutdown"] = now + self._rto.rto
            self._ack_now = True
        if (self._data_packets_since_sack >= 2 or self._tracker.has_gaps or self._tracker.has_duplicates):
            self._ack_now = True
        if self._ack_now:
            # Built now, not when the caller next asks for packets: a caller that feeds several packets
            # before `data_to_send` still gets a SACK for every second packet (6.2), not one stretch SACK.
            self._sacks_due.append(self._make_sack(self.config.max_packet_size - 12))
        else:
            self._timers.setdefault("delayed_ack", now + self.config.delayed_ack_time)

    def _on_delayed_ack(self, now: float, events: list[AssociationEvent]) -> None:
        self._ack_now = True

    # ------------------------------------------------------------------ SACK processing, RFC 4960 6.2.1

    def _on_SackChunk(self, now: float, packet: SctpPacket, sack: SackChunk, events: list[AssociationEvent]) -> None:
        if self.state in _DATA_STATES:
            self._sacks_since_send += 1
            self._process_ack(now, sack.cumulative_tsn_ack, sack.a_rwnd, sack.gap_blocks, events)

    def _process_ack(self, now: float, cum_ack: int, a_rwnd: int, gap_blocks: tuple[tuple[int, int], ...],
                     events: list[AssociationEvent]) -> None:
        assert self._cc is not None
        if serial_lt(cum_ack, self._last_cum_ack, TSN_BITS):
            return  # 6.2.1 D i): an older SACK, out of order
        highest_sent = (self._next_tsn - 1 - len(self._send_queue)) & 0xFFFFFFFF
        if serial_gt(cum_ack, highest_sent, TSN_BITS):
            events.append(AssociationFailed("SACK acknowledges a TSN never sent (RFC 9260 6.2.1)"))
            self._close_with_abort(ErrorCause(ErrorCauseCode.PROTOCOL_VIOLATION, b"cumulative TSN ack beyond TSNs sent"))
            return
        flight_before = self._flight_size
        cum_advanced = serial_gt(cum_ack, self._last_cum_ack, TSN_BITS)
        newly_acked = 0
        highest_newly_acked: int | None = None
        acked_per_stream: Counter[int] = Counter()
        # The outstanding TSNs run without holes from the last Cumulative TSN Ack: pop them up to the new one.
        previous_cum_ack = tsn = self._last_cum_ack
        while tsn != cum_ack:
            tsn = (tsn + 1) & 0xFFFFFFFF
            sent = self._outstanding.pop(tsn, None)
            if sent is None:
                continue  # queued when the association closed, never sent
            if not sent.gap_acked:
                newly_acked += sent.size
                self._outstanding_bytes -= sent.size
                highest_newly_acked = tsn
                self._measure_rtt(now, sent)
            self._t3_marked.discard(tsn)
            self._fast_marked.discard(tsn)
            self._set_in_flight(sent, False)
            acked_per_stream[sent.chunk.stream_id] += 1
        self._last_cum_ack = cum_ack
        # Gap Ack Blocks (3.3.4): compared with the previous SACK's, so only the TSNs whose state changed are
        # visited, newly gap-acknowledged or reneged (6.2.1 D iv).
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
        self._gap_ranges = now_acked
        highest_gap_acked = (cum_ack + now_acked[-1][1]) & 0xFFFFFFFF if now_acked else None
        self._count_miss_indications(cum_advanced, highest_newly_acked, highest_gap_acked, now_acked)
        outstanding_bytes = self._outstanding_bytes
        self._peer_a_rwnd = a_rwnd
        self._peer_rwnd = max(a_rwnd - outstanding_bytes, 0)
        self._cc.on_sack(newly_acked, cum_advanced, cum_ack, flight_before, self._flight_size)
        # 6.3.2 R2/R3.
        if not self._outstanding:
            self._timers.pop("t3_rtx", None)
        elif cum_advanced:
            self._timers["t3_rtx"] = now + self._rto.rto
        # RFC 9260 6.1 A: SACKs answering zero window probes do not count as errors; any SACK shows the peer is alive.
        self._peer_is_alive(events)
        for stream_id in sorted(acked_per_stream):
            events.append(DataAcknowledged(stream_id, acked_per_stream[stream_id]))
        self._progress_shutdown(now)

    def _measure_rtt(self, now: float, sent: _SentChunk) -> None:
        if self._rtt_probe == sent.chunk.tsn:
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

    def _on_t3_rtx(self, now: float, events: list[AssociationEvent]) -> None:
        """RFC 4960 6.3.3 E1-E3 and 7.2.3: back off, collapse cwnd, mark everything unacknowledged."""
        assert self._cc is not None
        if not self._outstanding:
            return
        self._rto.back_off()
        self._cc.on_retransmission_timeout()
        self._rtt_probe = None
        for tsn, sent in self._outstanding.items():
            if not sent.gap_acked:
                self._t3_marked.add(tsn)
                self._fast_marked.discard(tsn)
                self._set_in_flight(sent, False)
        self._timers["t3_rtx"] = now + self._rto.rto
        self._count_error(events, "T3-rtx expired")

    # ------------------------------------------------------------------ fault management, RFC 4960 8

    def _count_error(self, events: list[AssociationEvent], what: str) -> None:
        """8.1 and 8.2: count an unanswered transmission; fail past Association.Max.Retrans."""
        self._association_errors += 1
        self._path_errors += 1
        if self._association_errors > self.config.association_max_retrans:
            self._close_with_abort()
            events.append(AssociationFailed(f"{what}: Association.Max.Retrans exceeded (RFC 4960 8.1)"))
            return
        if self._path_reachable and self._path_errors > self.config.path_max_retrans:
            self._path_reachable = False
            events.append(PathStatusChanged(reachable=False))

    def _peer_is_alive(self, events: list[AssociationEvent]) -> None:
        self._association_errors = self._path_errors = 0
        if not self._path_reachable:
            self._path_reachable = True
            events.append(PathStatusChanged(reachable=True))

    def _restart_heartbeat(self, now: float) -> None:
        """8.3: the next HEARTBEAT is due RTO + HB.interval after the path was last used, RTO jittered +-50%."""
        if self.config.heartbeat_interval is None or self.state is not AssociationState.ESTABLISHED:
            return
        jitter = self.config.rng.uniform(0.5, 1.5)
        self._timers["heartbeat"] = now + self.config.heartbeat_interval + self._rto.rto * jitter

    def _on_heartbeat(self, now: float, events: list[AssociationEvent]) -> None:
        if self._heartbeat_unanswered:
            self._count_error(events, "HEARTBEAT unanswered")
            if self.state is AssociationState.CLOSED:
                return
        self._heartbeat_nonce = self.config.rng.getrandbits(64)
        self._heartbeat_unanswered = True
        self._queue_control(HeartbeatChunk(info=_HEARTBEAT_INFO.pack(now, self._heartbeat_nonce)))
        self._restart_heartbeat(now)

    def _on_HeartbeatChunk(self, now: float, packet: SctpPacket, chunk: HeartbeatChunk, events: list[AssociationEvent]) -> None:
        if self.state in _DATA_STATES or self.state is AssociationState.COOKIE_ECHOED:
            self._queue_control(HeartbeatAckChunk(info=chunk.info))  # 8.3: echo the info unchanged

    def _on_HeartbeatAckChunk(self, now: float, packet: SctpPacket, chunk: HeartbeatAckChunk, events: list[AssociationEvent]) -> None:
        if len(chunk.info) != _HEARTBEAT_INFO.size:
            return
        sent_at, nonce = _HEARTBEAT_INFO.unpack(chunk.info)
        if nonce != self._heartbeat_nonce:
            return
        self._heartbeat_nonce = None
        self._heartbeat_unanswered = False
        self._rto.measure(now - sent_at)  # 8.3: the HEARTBEAT ACK updates the RTT
        self._peer_is_alive(events)

    # ------------------------------------------------------------------ ABORT and shutdown, RFC 4960 9

    def _close_with_abort(self, *causes: ErrorCause) -> None:
        if self.peer_tag:
            self._queue_control(AbortChunk(causes=causes))
        self.state = AssociationState.CLOSED
        self._timers.clear()
        self._send_queue.clear()

    def _on_AbortChunk(self, now: float, packet: SctpPacket, chunk: AbortChunk, events: list[AssociationEvent]) -> None:
        self.state = AssociationState.CLOSED
        self._timers.clear()
        self._control.clear()
        self._final_packet_sent = True
        events.append(AssociationAborted(chunk.causes))

    def _progress_shutdown(self, now: float) -> None:
        if self._outstanding or self._send_queue or self._tracker is None:
            return
        if self.state is AssociationState.SHUTDOWN_PENDING:
            self.state = AssociationState.SHUTDOWN_SENT
            self._queue_control(ShutdownChunk(self._tracker.cumulative_tsn))
            self._ack_now = False
        elif self.state is AssociationState.SHUTDOWN_RECEIVED:
            self.state = AssociationState.SHUTDOWN_ACK_SENT
            self._queue_control(ShutdownAckChunk())
        else:
            return
        self._timers.pop("t3_rtx", None)
        self._timers["t2_shutdown"] = now + self._rto.rto

    def _on_ShutdownChunk(self, now: float, packet: SctpPacket, chunk: ShutdownChunk, events: list[AssociationEvent]) -> None:
        if self.state in (AssociationState.ESTABLISHED, AssociationState.SHUTDOWN_PENDING):
            self._process_ack(now, chunk.cumulative_tsn_ack, self._peer_a_rwnd, (), events)
            if self.state is AssociationState.CLOSED:
                return
            self.state = AssociationState.SHUTDOWN_RECEIVED
            self._timers.pop("heartbeat", None)
            events.append(PeerShutdownStarted())
            self._progress_shutdown(now)
        elif self.state is AssociationState.SHUTDOWN_RECEIVED:
            self._process_ack(now, chunk.cumulative_tsn_ack, self._peer_a_rwnd, (), events)
        elif self.state is AssociationState.SHUTDOWN_SENT:
            # 9.2: both sides shut down: answer with SHUTDOWN ACK.
            self.state = AssociationState.SHUTDOWN_ACK_SENT
            self._queue_control(ShutdownAckChunk())
            self._timers["t2_shutdown"] = now + self._rto.rto

    def _on_ShutdownAckChunk(self, now: float, packet: SctpPacket, chunk: ShutdownAckChunk, events: list[AssociationEvent]) -> None:
        if self.state in (AssociationState.SHUTDOWN_SENT, AssociationState.SHUTDOWN_ACK_SENT):
            self._control.append(_Outgoing(ShutdownCompleteChunk(), self.peer_tag, alone=True))
            self.state = AssociationState.CLOSED
            self._timers.clear()
            events.append(AssociationClosed())

    def _on_ShutdownCompleteChunk(self, now: float, packet: SctpPacket, chunk: ShutdownCompleteChunk,
                                  events: list[AssociationEvent]) -> None:
        if self.state is AssociationState.SHUTDOWN_ACK_SENT:
            self.state = AssociationState.CLOSED
            self._timers.clear()
            self._final_packet_sent = True
            events.append(AssociationClosed())

    def _on_t2_shutdown(self, now: float, events: list[AssociationEvent]) -> None:
        """9.2: retransmit SHUTDOWN or SHUTDOWN ACK with a backed-off RTO."""
        assert self._tracker is not None
        self._count_error(events, "T2-shutdown expired")
        if self.state is AssociationState.CLOSED:
            return
        self._rto.back_off()
        if self.state is AssociationState.SHUTDOWN_SENT:
            self._queue_control(ShutdownChunk(self._tracker.cumulative_tsn))
        elif self.state is AssociationState.SHUTDOWN_ACK_SENT:
            self._queue_control(ShutdownAckChunk())
        else:
            return
        self._timers["t2_shutdown"] = now + self._rto.rto


@dataclass(frozen=True)
class Accepted:
    """Listener event: a new association created from a valid COOKIE ECHO (RFC 4960 5.1.5).

    The association has processed that packet; its own events (COMMUNICATION UP...) wait in its
    `next_events()`."""

    association: Association


class Listener:
    """Passive side on `config.local_port`: answers INIT statelessly and turns valid cookies into associations.

    Packets of an existing association go to that association (the caller
    demultiplexes by port pair and verification tag); everything else comes
    here.  Out-of-the-blue packets are treated per RFC 4960 8.4.
    """

    def __init__(self, config: AssociationConfig):
        if not config.hmac_secret:
            raise ValueError("a Listener needs config.hmac_secret for its State Cookies (RFC 4960 5.1.3)")
        self.config = config
        self._signer = CookieSigner(config.hmac_secret)
        self._outgoing: list[bytes] = []
        self._events: list[Accepted] = []

    def next_events(self) -> list[Accepted]:
        """The associations accepted since the last call."""
        events, self._events = self._events, []
        return events

    def receive(self, data: bytes, now: float) -> None:
        """One SCTP packet for the listening port: an INIT is answered, a valid COOKIE ECHO accepted."""
        self._accept(data, now)

    def _accept(self, data: bytes, now: float) -> None:
        try:
            packet = SctpPacket.decode(data)
        except DecodeError:
            return None
        if packet.dst_port != self.config.local_port:
            return None
        config = replace(self.config, peer_port=packet.src_port)
        first = packet.chunks[0]
        if isinstance(first, InitChunk):
            if len(packet.chunks) != 1 or packet.verification_tag != 0:
                return None  # 8.5.1 A
            if _invalid_init(first):
                self._reply(config, 0, AbortChunk(tag_reflected=True, causes=(
                    ErrorCause(ErrorCauseCode.INVALID_MANDATORY_PARAMETER),)))
                return None
            ack = build_init_ack(config, self._signer, first, now, _random_tag(config), config.rng.getrandbits(32))
            self._reply(config, first.initiate_tag, ack)
            return None
        if isinstance(first, CookieEchoChunk):
            cookie = self._signer.open(first.cookie)
            if cookie is None or cookie.local_tag != packet.verification_tag:
                return None  # 5.1.5: bad MAC or wrong tag, silently discarded
            if cookie.staleness(now) > 0:
                self._reply(config, cookie.peer_tag, ErrorChunk(causes=(_stale_cookie_error(cookie.staleness(now)),)))
                return None
            association = Association(config)
            association._passive_open = True
            association.receive(data, now)
            self._events.append(Accepted(association))
            return None
        # 8.4: out of the blue.
        if any(isinstance(c, (AbortChunk, ShutdownCompleteChunk, ErrorChunk, CookieAckChunk)) for c in packet.chunks):
            return None
        if isinstance(first, ShutdownAckChunk):
            self._reply(config, packet.verification_tag, ShutdownCompleteChunk(tag_reflected=True))
            return None
        self._reply(config, packet.verification_tag, AbortChunk(tag_reflected=True))
        return None

    def _reply(self, config: AssociationConfig, tag: int, chunk: Chunk) -> None:
        self._outgoing.append(SctpPacket(config.local_port, config.peer_port, tag, (chunk,)).encode())

    def data_to_send(self, now: float) -> list[bytes]:
        """SCTP packets to send: INIT ACKs and the answers of RFC 4960 8.4 (the Listener has no timers)."""
        packets, self._outgoing = self._outgoing, []
        return packets

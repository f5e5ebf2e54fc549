"""Sans-I/O SCTP association endpoint: the subset of RFC 4960 / RFC 9260 a DDP association uses.

Input and output are SCTP packets as bytes (common header and chunks; the IP
or UDP framing is `model.net.frames`'s).  The caller passes the current time to
every call and drives the timers:

    association.connect(now)                  # active side: INIT (5.1)
    association.receive(packet, now)          # any packet from the peer
    association.receive_offloaded(chunks, placed, now)  # one an offload engine split
    association.handle_timeout(now)           # when now >= next_timeout()
    for packet in association.data_to_send(now): ...   # SCTP packets
    for event in association.next_events(): ...        # AssociationEvent

The caller may hand over several packets before it asks for packets again
(all that arrived at one instant, say): SACKs and bursts come out as if it
had asked after each one, a SACK for every second DATA packet (6.2) and
Max.Burst packets per SACK received (6.1 D).

A `model.sctp.listener.Listener` answers INITs statelessly with a
MAC-protected State Cookie and creates an `Association` from a valid COOKIE
ECHO (5.1.3, 5.1.5).

The state logic is one table, `TRANSITIONS`: (state, trigger) -> (handler,
next state, RFC section), for every state of RFC 4960 4 and every chunk
type, timer, user call and internal trigger.  Every chunk type has a row in
every state (discarding is a row too, with the section that says so); a
user call or timer with no row raises `InvalidStateError`, a
`model.errors.TransitionError`.  The handlers live by phase:
`model.sctp.handshake` (5), `model.sctp.data_transfer` (6, 7),
`model.sctp.fault_management` (8) and `model.sctp.shutdown` (9); this file
holds the class, the table, the public API, verification tags (8.5) and
bundling into packets (6.10).

Implemented: the four-way handshake with T1-init/T1-cookie back-off (5.1,
5.3), verification tags (8.5, 8.5.1), INIT collision and duplicate INIT /
COOKIE ECHO cases (5.2.1, 5.2.2, 5.2.4 cases B, C, D), Stale Cookie (5.2.6),
the Adaptation Layer Indication (RFC 5043 5.1, 11.1), equal stream counts
(RFC 5043 8), DATA transmission with bundling (6.1, 6.10), SACK generation
with delayed acknowledgement, gap blocks and duplicate TSNs (6.2), SACK
processing with rwnd (6.2.1), T3-rtx and RTO (6.3), congestion control and
fast retransmit (7.2, RFC 9260 7.2.4), heartbeats (8.3), error counting
(8.1, 8.2), ABORT (9.1) and graceful shutdown (9.2).

A peer's restart (5.2.4 case A) ends the association as if the peer had
aborted it (`PeerRestarted`); its owner makes the new association from the
same COOKIE ECHO (`model.rnic.host`).

Deliberately left out, each rejected cleanly: multi-homing (one destination), SCTP fragmentation (RFC 5043 9 forbids it
for DDP: a fragmented DATA chunk from the peer aborts the association with
"Protocol Violation"; `send()` rejects payloads above the MULPDU).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from model.errors import DecodeError
from model.sctp.config import AssociationConfig
from model.sctp.congestion import CongestionControl
from model.sctp.cookie import CookieSigner
from model.sctp.data_transfer import (
    DataTransferMixin, EngineRequest, EngineRequestKind, OffloadedData, PlacedData, _SentChunk,
)
from model.sctp.events import AssociationEvent, DataAcknowledged, RetransmissionLimit
from model.sctp.fault_management import FaultManagementMixin
from model.sctp.handshake import HandshakeMixin, random_tag
from model.sctp.packet import (
    COMMON_HEADER_LENGTH,
    TSN_BITS,
    AbortChunk,
    Chunk,
    ChunkType,
    CookieEchoChunk,
    DataChunk,
    ErrorCause,
    ErrorCauseCode,
    ErrorChunk,
    InitChunk,
    SackChunk,
    SctpPacket,
    ShutdownCompleteChunk,
    UnknownChunk,
    decode_chunks,
    encode_packet,
    serial_gt,
)
from model.sctp.rto import RtoEstimator
from model.sctp.shutdown import ShutdownMixin
from model.sctp.state import (
    DATA_STATES,
    AnyTrigger,
    AssociationError,
    AssociationState,
    InvalidStateError,
    InvalidStreamError,
    PayloadSizeError,
    Transition,
    Trigger,
)
from model.sctp.tsn_tracker import TsnTracker

_CLOSED, _SEND = AssociationState.CLOSED, Trigger.SEND
_DATA_TYPE, _SACK_TYPE = int(ChunkType.DATA), int(ChunkType.SACK)
"""Read on every packet under their names
(an enum member's class attribute is a descriptor call in Python 3.11, a module name a dict lookup)."""

__all__ = [
    "Association", "AssociationError", "AssociationState", "AssociationStatistics", "EngineRequest",
    "EngineRequestKind", "InvalidStateError", "InvalidStreamError", "OffloadedData", "PayloadSizeError", "PlacedData",
    "TRANSITIONS", "Transition", "Trigger",
]


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
    packets_discarded: int = 0
    """Packets from the peer's address discarded before any chunk was processed: undecodable, to or from other
    ports, or with a verification tag that is not the association's (RFC 4960 8.5, 8.5.1)."""


@dataclass(frozen=True)
class _Outgoing:
    chunk: Chunk
    verification_tag: int
    alone: bool = False
    """INIT, INIT ACK and SHUTDOWN COMPLETE travel alone (RFC 4960 6.10)."""


class Association(HandshakeMixin, DataTransferMixin, FaultManagementMixin, ShutdownMixin):
    """One SCTP association with a single peer address; see the module docstring for the call pattern."""

    def __init__(self, config: AssociationConfig, passive_open: bool = False):
        """`passive_open`: created by a Listener for a COOKIE ECHO (5.1.5), which it then receives."""
        self.config = config
        self.state = AssociationState.CLOSED
        self.local_tag = random_tag(config)
        self.peer_tag = 0
        self._signer = CookieSigner(config.hmac_secret) if config.hmac_secret else None
        self._initial_tsn = config.rng.getrandbits(32)
        self._next_tsn = self._initial_tsn
        self._used = False
        self._passive_open = passive_open
        self._rto = RtoEstimator(config.rto_initial, config.rto_min, config.rto_max)
        self._timers: dict[Trigger, float] = {}
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
        self._send_queue: deque[DataChunk | OffloadedData] = deque()
        self._engine_requests: list[EngineRequest] = []
        """For a transmit engine sending the `OffloadedData` chunks: see `engine_requests()`."""
        self._offloading = False
        self._transport_by_engine = False
        self._engine_unacked: deque[tuple[int, int, int]] = deque()
        """With the engine's transport: (TSN, stream, user data bytes) of the chunks numbered and not yet
        acknowledged."""
        self._engine_unacked_bytes = 0
        self._queued_bytes = 0
        """User data bytes in `_send_queue`: accepted by `send()`, not sent yet."""
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
        self._data_in_packet = False
        """A DATA chunk of the packet being received was taken (or was a duplicate): a SACK is owed (6.2)."""
        self._shutdown_answers_data = False
        """9.2: the packet being received brought DATA in SHUTDOWN-SENT."""
        self._sacks_due: list[SackChunk] = []
        """SACKs built when a received packet called for one at once (6.2), waiting for `data_to_send`."""
        self._buffered = 0
        self._held_by_engine = 0
        self._sacks_by_engine = False
        """Bytes of placed data an offload engine still holds (`hold_placed`)."""
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
        self.data_hand_off: list[tuple[int, int, bytes]] | None = None
        """None, or a list the user set (`model.rnic.host.SoftRnic`): then a packet of whole unordered DATA chunks
        (`_receive_whole_unordered_data`) that comes while no event waits hands its user data here as (stream,
        PPID, user data), in the order the chunks were taken, instead of a `DataReceived` each (RFC 4960 10.2
        DATA ARRIVE); such a packet queues no event, so the user takes these before the events `receive` left."""

    # -- public API -------------------------------------------------------------------

    @property
    def mulpdu(self) -> int:
        """Largest DDP segment the DDP layer may hand down (RFC 5043 9)."""
        return self.config.mulpdu

    @property
    def is_closed(self) -> bool:
        return self.state is _CLOSED

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
            packets_discarded=self._stats["packets_discarded"],
        )

    @property
    def data_chunks_received(self) -> int:
        """New DATA chunks taken from the peer (`statistics.data_chunks_received`, without building the rest)."""
        return self._stats["data_chunks_received"]

    @property
    def next_tsn(self) -> int:
        """The TSN the next DATA chunk queued takes (RFC 4960 6.1): where a transmit engine's counter starts."""
        return self._next_tsn

    @property
    def queued_bytes(self) -> int:
        """User data accepted by `send()` and not sent yet: what a user bounds to keep a send buffer. With the
        engine's transport (`hand_transport_to_engine`), the user data handed to it and not yet acknowledged."""
        return self._queued_bytes + self._engine_unacked_bytes

    @property
    def outstanding_chunks(self) -> int:
        """DATA chunks sent and not yet covered by the Cumulative TSN Ack, plus those still queued."""
        return len(self._outstanding) + len(self._send_queue) + len(self._engine_unacked)

    def connect(self, now: float) -> None:
        """Active open: send INIT and start T1-init (RFC 4960 5.1 A)."""
        self._fire(Trigger.CONNECT, now)

    def send(self, stream_id: int, ppid: int, payload: bytes, unordered: bool = True) -> int:
        """Queue one DATA chunk and return its TSN (RFC 4960 6.1).  DDP sets U=1 on every chunk (RFC 5043 10)."""
        return self._fire(Trigger.SEND, stream_id, ppid, payload, unordered)

    def send_messages(self, messages: Iterable[tuple[int, int, bytes]]) -> None:
        """`send` (unordered, U=1) for each (stream_id, ppid, payload) in order: what a DDP session hands over
        at once (RFC 5043 10). Queuing leaves the state as it is, so each would take the same row of the table,
        which is looked up once; an error is raised at the message that meets it, those before it queued."""
        row = TRANSITIONS.get((self.state, _SEND))
        if row is None or row.next_state is not None:   # each raises (or moves the state) as `send` does
            for stream_id, ppid, payload in messages:
                self.send(stream_id, ppid, payload)
            return
        handler = row.handler
        for stream_id, ppid, payload in messages:
            handler(self, stream_id, ppid, payload, True)

    def send_offloaded(self, stream_id: int, ppid: int, length: int, unordered: bool = True) -> int:
        """Queue one DATA chunk of `length` bytes of user data that a transmit offload engine builds and sends,
        alone in its packet, and return its TSN (RFC 4960 6.1; the engine numbers its chunks the same way).
        The association decides when it goes and goes again (cwnd and rwnd, 6.1; T3-rtx, 6.3.3; fast
        retransmit, 7.2.4) and says so in `engine_requests()`."""
        return self._fire(Trigger.SEND_OFFLOADED, stream_id, ppid, length, unordered)

    def engine_requests(self) -> list[EngineRequest]:
        """What the transmit engine is to do since the last call, oldest first: send its chunks up to a TSN
        (LIMIT), send one again (RESEND), retire those acknowledged (ACK)."""
        requests, self._engine_requests = self._engine_requests, []
        return requests

    def consume(self, nbytes: int) -> None:
        """With `manual_receive_window`, give `nbytes` of delivered data's buffer back (RFC 4960 6.2 a_rwnd)."""
        if not self.config.manual_receive_window:
            raise AssociationError("consume() needs manual_receive_window=True")
        if not 0 <= nbytes <= self._buffered:
            raise ValueError(f"consume({nbytes}) with {self._buffered} bytes held")
        self._release_buffer(nbytes)

    def hand_sacks_to_engine(self) -> int:
        """From now on a receive offload engine SACKs the peer's DATA itself (RFC 4960 6.2, `hdl/rx/sack_unit.py`):
        the association sends no SACK, keeps no delayed-ACK timer and leaves the receive window to the
        engine, but still records the TSNs it learns (`receive_offloaded`: the engine's reports and the
        chunks it passes up), for duplicate chunks passed up and for the Cumulative TSN Ack its SHUTDOWN
        carries (9.2). Returns the Cumulative TSN Ack the engine starts from."""
        if self._tracker is None:
            raise AssociationError("no peer TSN yet: hand the SACKs over once the association is up")
        self._sacks_by_engine = True
        self._sacks_due.clear()
        self._ack_now = False
        self._data_packets_since_sack = 0
        self._timers.pop(Trigger.DELAYED_ACK, None)
        return self._tracker.cumulative_tsn

    @property
    def sacks_by_engine(self) -> bool:
        return self._sacks_by_engine

    def hand_transport_to_engine(self) -> int:
        """From now on the transmit engine's transport unit sends, windows and retransmits the offloaded DATA
        and processes the peer's SACKs (RFC 4960 6.1, 6.2.1, 6.3, 7.2, `model.engine.transport`):
        `send_offloaded` only numbers a chunk (6.1), the association keeps no outstanding chunk, cwnd or
        T3-rtx and asks the engine for nothing but a SHUTDOWN's Cumulative TSN Ack (`EngineRequestKind.PEER_ACK`,
        9.2); `engine_acknowledged` tells it what the engine retired (for the DDP streams' acknowledgements and
        SHUTDOWN), `engine_peer_unreachable` and `engine_protocol_violation` what stopped it. Only with
        nothing queued or outstanding. Returns the peer's rwnd, where the engine's starts (6.2.1 A)."""
        if self._tracker is None:
            raise AssociationError("no peer yet: hand the transport over once the association is up")
        if self._outstanding or self._send_queue:
            raise AssociationError("DATA queued or outstanding: hand the transport over before any is sent")
        self._transport_by_engine = True
        self._timers.pop(Trigger.T3_RTX, None)
        return self._peer_rwnd

    @property
    def transport_by_engine(self) -> bool:
        return self._transport_by_engine

    def engine_acknowledged(self, cumulative_tsn_ack: int, now: float) -> None:
        """The engine's transport unit retired the chunks up to `cumulative_tsn_ack` (RFC 4960 6.2.1 D): their
        streams count them acknowledged (`DataAcknowledged`, RFC 5043 6.6), and a SHUTDOWN waiting for them
        goes (9.2)."""
        if not self._transport_by_engine:
            raise AssociationError("the association processes its own SACKs")
        acked: Counter[int] = Counter()
        unacked = self._engine_unacked
        while unacked and not serial_gt(unacked[0][0], cumulative_tsn_ack, TSN_BITS):
            _, stream_id, length = unacked.popleft()
            acked[stream_id] += 1
            self._engine_unacked_bytes -= length
        if not acked:
            return
        self._peer_is_alive()                      # 8.1, 8.2: the peer acknowledged DATA
        self._last_cum_ack = cumulative_tsn_ack
        for stream_id in sorted(acked):
            self._events.append(DataAcknowledged(stream_id, acked[stream_id]))
        self._progress_shutdown(now)

    def engine_peer_unreachable(self, error_count: int, now: float) -> None:
        """The engine's T3-rtx expired `error_count` times in a row, past Association.Max.Retrans (RFC 4960
        8.1): the association fails as when its own timer does."""
        if self.state is AssociationState.CLOSED:
            return
        self._events.append(self._failure(
            f"T3-rtx expired in the transmit engine {error_count} times in a row: Association.Max.Retrans exceeded "
            "(RFC 4960 8.1)", RetransmissionLimit.ASSOCIATION_MAX_RETRANS))
        self._close_with_abort()

    def engine_protocol_violation(self, cumulative_tsn_ack: int, now: float) -> None:
        """The engine took a SACK acknowledging TSN `cumulative_tsn_ack`, never sent: abort as the
        association's own SACK processing does (RFC 9260 6.2.1)."""
        if self.state is AssociationState.CLOSED:
            return
        self._events.append(self._failure("SACK acknowledges a TSN never sent (RFC 9260 6.2.1)"))
        self._close_with_abort(ErrorCause(ErrorCauseCode.PROTOCOL_VIOLATION, b"cumulative TSN ack beyond TSNs sent"))

    def placed_unnamed(self, below: int, count: int) -> None:
        """An offload engine that SACKs itself placed `count` more DATA chunks, TSNs it does not name, before the
        chunk with TSN `below` (it reports a message by its last segment, `abi.rx.report_withheld`): recorded for
        the Cumulative TSN Ack a SHUTDOWN carries (RFC 4960 9.2) once the count closes a range
        (`TsnTracker.vouch`)."""
        if self._tracker is not None:
            self._tracker.vouch(below, count)

    def hold_placed(self, nbytes: int) -> None:
        """An offload engine now holds `nbytes` of buffer for data it placed (records waiting for an earlier
        DDP-SSN): the a_rwnd announced is the receive buffer less these and the data held here (RFC 4960 6.2)."""
        if nbytes < 0:
            raise ValueError(f"hold_placed({nbytes})")
        self._held_by_engine = nbytes
        self._window_changed()

    def shutdown(self, now: float) -> None:
        """Graceful close (RFC 4960 9.2): SHUTDOWN once every queued and outstanding chunk is acknowledged.
        Before the association is up there is nothing to shut down (`InvalidStateError`; use `abort`)."""
        self._fire(Trigger.SHUTDOWN, now)

    def abort(self, now: float, reason: str = "") -> None:
        """Send ABORT with a User-Initiated Abort cause (RFC 4960 9.1, 3.3.10.12) and close at once."""
        self._fire(Trigger.ABORT, now, reason)

    def next_timeout(self) -> float | None:
        timers = self._timers
        return min(timers.values()) if timers else None

    def next_events(self) -> list[AssociationEvent]:
        """Every event queued since the last call, oldest first."""
        events, self._events = self._events, []
        return events

    def handle_timeout(self, now: float) -> None:
        """Fire every timer due at `now` (call when now >= `next_timeout()`); events are queued."""
        for timer, deadline in sorted(self._timers.items(), key=lambda item: item[1]):
            if deadline <= now and self._timers.get(timer) == deadline:
                del self._timers[timer]
                self._fire(timer, now)

    def receive(self, data: bytes, now: float, checksum_checked: bool = False) -> None:
        """Process one SCTP packet from the peer; malformed or misaddressed packets are discarded.
        `checksum_checked`: the caller verified the packet's CRC32c (RFC 4960 6.8), so it is not computed again."""
        if self.state is _CLOSED and (self._used or not self._passive_open):
            return  # after close nothing is processed; only a Listener's new association waits here
        if checksum_checked and self._receive_common_packet(data, now):
            return  # DDP's DATA chunks or a SACK, read in place
        self._receive_decoded(data, now, checksum_checked)

    def receive_checked(self, data: bytes, now: float) -> None:
        """`receive(data, now, checksum_checked=True)`, for a caller that verified every packet's CRC32c (RFC
        4960 6.8) and hands each over (`model.rnic.host.SoftRnic`): the same, without a keyword per packet."""
        if self.state is _CLOSED and (self._used or not self._passive_open):
            return
        if not self._receive_common_packet(data, now):
            self._receive_decoded(data, now, True)

    def _receive_decoded(self, data: bytes, now: float, checksum_checked: bool) -> None:
        """`receive` of a packet the in-place paths did not take: decoded, its ports and tag checked (8.5)."""
        try:
            packet = SctpPacket.decode(data, checksum_checked=checksum_checked)
        except DecodeError:
            self._stats["packets_discarded"] += 1
            return
        if packet.dst_port != self.config.local_port or packet.src_port != self.config.peer_port:
            self._stats["packets_discarded"] += 1
            return
        if not self._verification_tag_ok(packet):
            self._stats["packets_discarded"] += 1
            return
        self._receive_packet(packet, now)

    def receive_offloaded(self, chunks: bytes, placed: Sequence[PlacedData], now: float) -> None:
        """Process one packet from the peer that a receive offload engine checked (CRC32c, ports,
        verification tag: RFC 4960 6.8, 8.5) and split: `chunks`, the chunks it passed up, bundled as in
        a packet, and `placed`, the DATA chunks it placed itself, known by TSN and length; the packet's
        SACK obligations (6.2) are those of the packet whole."""
        if self.state is AssociationState.CLOSED and (self._used or not self._passive_open):
            return
        try:
            decoded = decode_chunks(chunks)
        except DecodeError:
            return
        self._receive_packet(SctpPacket(self.config.peer_port, self.config.local_port, self.local_tag,
                                        decoded + tuple(placed)), now)

    def _receive_common_packet(self, data: bytes, now: float) -> bool:
        """The two packets of a data transfer, read in place, chosen by the first chunk's type: whole unordered
        DATA chunks (`_receive_whole_unordered_data`) in the states whose DATA row is `_on_data`, or a lone
        SACK (`_receive_lone_sack`) in those whose SACK row is `_on_sack`.  False, with nothing done, for any
        other packet, which `SctpPacket.decode` and the table take."""
        if len(data) <= COMMON_HEADER_LENGTH:
            return False
        first = data[COMMON_HEADER_LENGTH]
        if first == _DATA_TYPE:
            return self.state in _TAKING_DATA and self._receive_whole_unordered_data(data, now)
        if first == _SACK_TYPE:
            return self.state in _TAKING_SACKS and self._receive_lone_sack(data, now)
        return False

    def _receive_packet(self, packet: SctpPacket, now: float) -> None:
        self._stats["packets_received"] += 1
        self._data_in_packet = False
        for chunk in packet.chunks:
            if isinstance(chunk, UnknownChunk):
                # 3.2: the two high bits of an unrecognized type say whether to report it and go on.
                action = chunk.unrecognized_action
                if action.report:
                    self._queue_control(ErrorChunk(causes=(
                        ErrorCause(ErrorCauseCode.UNRECOGNIZED_CHUNK_TYPE, chunk.encode()),)))
                if not action.skip:
                    break
            else:
                self._fire(chunk.CHUNK_TYPE, now, packet, chunk)
            if self.state is AssociationState.CLOSED:
                break
        if self._data_in_packet:
            self._data_in_packet = False
            self._after_data_packet(now)

    def data_to_send(self, now: float) -> list[bytes]:
        """SCTP packets due now: control chunks, a SACK if one is due, and DATA within cwnd and rwnd."""
        packets: list[bytes] = []
        if self._final_packet_sent:
            return packets
        if not (self._control or self._sacks_due) and self.state in DATA_STATES and not self._sack_due_now():
            # Nothing but DATA can be due (most calls: one after every frame): straight to 6.1.
            current, _ = self._add_data(now, packets, [], 12)
            if current:
                packets.append(self._encode(self.peer_tag, current))
            return packets
        sacks_due = self._sacks_due
        if not self._control and len(sacks_due) == 1 and self.state in DATA_STATES and not self._sack_due_now():
            # One SACK built on receipt and nothing else owed (a receiver's every second packet, 6.2): it leads
            # the packet and DATA may follow it (6.1), as the loops below would conclude, without setting them up.
            sack = sacks_due[0]
            self._sacks_due = []
            current, _ = self._add_data(now, packets, [sack], 12 + sack.encoded_length)
            if current:   # else the SACK went in a packet with DATA
                packets.append(self._encode(self.peer_tag, current))
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
        if self.state is _CLOSED:
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
            size = sack.encoded_length
            if current_size + size > self.config.max_packet_size:
                flush()
            current.append(sack)
            current_size += size
            if index < len(sacks_due) - 1:
                flush()
        if self._sack_due_now():
            sack = self._make_sack(self.config.max_packet_size - 12)
            # A packet holds one SACK (3.3.4, 6.2: the latest state); one built on receipt goes in its own
            # packet before this fresher one, never bundled ahead of it.
            if sacks_due or current_size + sack.encoded_length > self.config.max_packet_size:
                flush()
            current.append(sack)
            current_size += sack.encoded_length
        if self.state in DATA_STATES:
            current, current_size = self._add_data(now, packets, current, current_size)
        flush()
        return packets

    def sends_nothing(self) -> bool:
        """Whether `data_to_send` would now send nothing and change nothing, whatever `now`: no control chunk or
        SACK waits or is due (6.2), nothing is marked to go again, no new DATA may go (6.1 A, B), and the Max.Burst
        count and the congestion control's note of the last transmission (6.1 D, 7.2.1) are as a call leaves
        them. So, after a call, until the association is given something (a packet, a timer, a message, a
        shutdown or abort), a caller that finds this true need not ask again (`model.rnic.host.SoftRnic.quiet`)."""
        if self._final_packet_sent:
            return True
        if self._control or self._sacks_due:
            return False
        state = self.state
        if state is _CLOSED:
            return not self._used   # a call would note the final packet sent
        if self._sack_due_now():
            return False
        if state not in DATA_STATES:
            return True
        cc = self._cc
        return (cc is not None and not (self._fast_marked or self._t3_marked) and self._sacks_since_send == 0
                and cc.used_at_last_transmit == (self._flight_size + cc.mtu > cc.cwnd) and not self._new_data_may_go())

    # ------------------------------------------------------------------ packets out

    def _sack_due_now(self) -> bool:
        """A SACK goes with these packets: one is owed at once (6.2), or DATA goes out that it can ride with."""
        return self._tracker is not None and not self._sacks_by_engine and (
            self._ack_now or bool(self._data_packets_since_sack
                                  and (self._send_queue or self._t3_marked or self._fast_marked)))

    def _encode(self, tag: int, chunks: list[Chunk]) -> bytes:
        self._stats["packets_sent"] += 1
        return encode_packet(self.config.local_port, self.config.peer_port, tag, chunks)

    # -- the state machine ------------------------------------------------------------

    def _fire(self, trigger: AnyTrigger, *args: object) -> object:
        """Run the row of `TRANSITIONS` for (state, trigger); `InvalidStateError` if there is none."""
        row = TRANSITIONS.get((self.state, trigger))
        if row is None:
            raise InvalidStateError(self.state, trigger)
        before = self.state
        result = row.handler(self, *args)
        if result is not False and row.next_state is not None and self.state is before:
            self.state = row.next_state
        return result

    def _discard(self, *args: object) -> bool:
        """The RFC discards what triggered this row."""
        return False

    def _nothing_to_do(self, *args: object) -> None:
        """The trigger needs no action in this state."""

    # -- packets out --------------------------------------------------------------------

    def _queue_control(self, chunk: Chunk, tag: int | None = None, alone: bool = False) -> None:
        """A control chunk for the next packets; `tag` defaults to the peer's, `alone` for 6.10."""
        self._control.append(_Outgoing(chunk, self.peer_tag if tag is None else tag, alone))

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


# -- the transition table (RFC 4960 4) ---------------------------------------------------------------

S = AssociationState
C = ChunkType
A = Association
_ALL = tuple(S)
_BEFORE_UP = (S.CLOSED, S.COOKIE_WAIT, S.COOKIE_ECHOED)
_OPENING = (S.COOKIE_WAIT, S.COOKIE_ECHOED)
_SHUTTING = (S.SHUTDOWN_PENDING, S.SHUTDOWN_SENT, S.SHUTDOWN_RECEIVED, S.SHUTDOWN_ACK_SENT)
_UP = tuple(sorted(DATA_STATES, key=_ALL.index))
_TAKING_DATA = (S.ESTABLISHED, S.SHUTDOWN_PENDING)
"""The states whose DATA row is `_on_data` (below), where `_receive_whole_unordered_data` may take a packet."""
_TAKING_SACKS = frozenset(_UP)
"""The states whose SACK row is `_on_sack` (below), where `_receive_lone_sack` may take a packet."""

TRANSITIONS: dict[tuple[AssociationState, AnyTrigger], Transition] = {}
"""(state, trigger) -> Transition; read by tests, printed by nothing, the only place state logic branches."""


def _rows(states: tuple[AssociationState, ...], trigger: AnyTrigger, handler, next_state: AssociationState | None,
          rfc: str) -> None:
    for state in states:
        key = (state, trigger)
        if key in TRANSITIONS:
            raise ValueError(f"two rows for {key}")
        TRANSITIONS[key] = Transition(handler, next_state, rfc)


# User calls (RFC 4960 10.1).  Missing rows raise InvalidStateError: SEND before or after ESTABLISHED,
# SHUTDOWN before the association is up.
_rows((S.CLOSED,), Trigger.CONNECT, A._send_init, S.COOKIE_WAIT, "RFC 4960 5.1 A")
_rows((S.ESTABLISHED,), Trigger.SEND, A._queue_data, None, "RFC 4960 6.1; RFC 5043 9, 10")
_rows((S.ESTABLISHED,), Trigger.SEND_OFFLOADED, A._queue_offloaded, None, "RFC 4960 6.1; RFC 5043 9, 10")
_rows((S.ESTABLISHED,), Trigger.SHUTDOWN, A._start_shutdown, S.SHUTDOWN_PENDING, "RFC 4960 9.2")
_rows(_SHUTTING, Trigger.SHUTDOWN, A._nothing_to_do, None, "RFC 4960 9.2 (already shutting down)")
_rows(_OPENING + _UP, Trigger.ABORT, A._abort_call, S.CLOSED, "RFC 4960 9.1")
_rows((S.CLOSED,), Trigger.ABORT, A._nothing_to_do, None, "RFC 4960 9.1 (nothing to abort)")

# Timers.
_rows((S.COOKIE_WAIT,), Trigger.T1_INIT, A._on_t1_init, None, "RFC 4960 5.1 C, 6.3.3")
_rows((S.COOKIE_ECHOED,), Trigger.T1_COOKIE, A._on_t1_cookie, None, "RFC 4960 5.1 C, 6.3.3")
_rows(_UP, Trigger.T3_RTX, A._on_t3_rtx, None, "RFC 4960 6.3.3, 7.2.3")
_rows(_UP, Trigger.DELAYED_ACK, A._on_delayed_ack, None, "RFC 4960 6.2")
_rows((S.ESTABLISHED,), Trigger.HEARTBEAT, A._on_heartbeat_timer, None, "RFC 4960 8.3")
_rows((S.SHUTDOWN_SENT,), Trigger.T2_SHUTDOWN, A._resend_shutdown, None, "RFC 4960 9.2")
_rows((S.SHUTDOWN_ACK_SENT,), Trigger.T2_SHUTDOWN, A._resend_shutdown_ack_on_t2, None, "RFC 4960 9.2")

# Internal: nothing queued or outstanding any more.
_rows((S.SHUTDOWN_PENDING,), Trigger.ALL_ACKED, A._send_shutdown, S.SHUTDOWN_SENT, "RFC 4960 9.2")
_rows((S.SHUTDOWN_RECEIVED,), Trigger.ALL_ACKED, A._send_shutdown_ack, S.SHUTDOWN_ACK_SENT, "RFC 4960 9.2")
_rows((S.ESTABLISHED, S.SHUTDOWN_SENT, S.SHUTDOWN_ACK_SENT), Trigger.ALL_ACKED, A._nothing_to_do, None,
      "RFC 4960 9.2 (no SHUTDOWN waits for it)")

# Chunks received: a row for every chunk type in every state.
_OOTB = "RFC 4960 8.4 (out of the blue: the Listener's or the host's)"
for _chunk in C:
    if _chunk is not C.COOKIE_ECHO:
        _rows((S.CLOSED,), _chunk, A._discard, None, _OOTB)
_rows((S.CLOSED,), C.COOKIE_ECHO, A._accept_cookie_echo, S.ESTABLISHED, "RFC 4960 5.1.5")

_rows((S.COOKIE_WAIT,), C.INIT, A._answer_init_in_cookie_wait, None, "RFC 4960 5.2.1")
_rows((S.COOKIE_ECHOED,), C.INIT, A._answer_init_in_cookie_echoed, None, "RFC 4960 5.2.1")
_rows((S.ESTABLISHED, S.SHUTDOWN_PENDING, S.SHUTDOWN_SENT, S.SHUTDOWN_RECEIVED), C.INIT, A._answer_init_when_up,
      None, "RFC 4960 5.2.2")
_rows((S.SHUTDOWN_ACK_SENT,), C.INIT, A._resend_shutdown_ack, None, "RFC 4960 9.2")

_rows((S.COOKIE_WAIT,), C.INIT_ACK, A._on_init_ack, S.COOKIE_ECHOED, "RFC 4960 5.1 C")
_rows((S.COOKIE_ECHOED,) + _UP, C.INIT_ACK, A._discard, None, "RFC 4960 5.2.3")

_rows(_OPENING, C.COOKIE_ECHO, A._on_cookie_echo, S.ESTABLISHED, "RFC 4960 5.2.4 (cases B, D)")
_rows(_UP, C.COOKIE_ECHO, A._on_cookie_echo, None, "RFC 4960 5.2.4 (case D: COOKIE ACK again)")

_rows((S.COOKIE_ECHOED,), C.COOKIE_ACK, A._on_cookie_ack, S.ESTABLISHED, "RFC 4960 5.1 E")
_rows((S.COOKIE_WAIT,) + _UP, C.COOKIE_ACK, A._discard, None, "RFC 4960 5.2.5")

_rows(_TAKING_DATA, C.DATA, A._on_data, None, "RFC 4960 6.2")
_rows((S.SHUTDOWN_SENT,), C.DATA, A._on_data_in_shutdown_sent, None, "RFC 4960 9.2, 6.2")
_rows((S.SHUTDOWN_RECEIVED, S.SHUTDOWN_ACK_SENT), C.DATA, A._discard, None,
      "RFC 4960 9.2 (no new DATA after the peer's SHUTDOWN)")
_rows(_OPENING, C.DATA, A._discard, None, "RFC 4960 5.1 (DATA only once ESTABLISHED)")

_rows(tuple(sorted(_TAKING_SACKS, key=_ALL.index)), C.SACK, A._on_sack, None, "RFC 4960 6.2.1")
_rows(_OPENING, C.SACK, A._discard, None, "RFC 4960 6.2.1 (no DATA sent yet)")

_rows((S.COOKIE_ECHOED,) + _UP, C.HEARTBEAT, A._answer_heartbeat, None, "RFC 4960 8.3")
_rows((S.COOKIE_WAIT,), C.HEARTBEAT, A._discard, None, "RFC 4960 8.3 (no peer tag to answer with)")
_rows(_OPENING + _UP, C.HEARTBEAT_ACK, A._on_heartbeat_ack, None, "RFC 4960 8.3")

_rows(_OPENING + _UP, C.ABORT, A._on_abort, S.CLOSED, "RFC 4960 9.1")

_rows((S.ESTABLISHED, S.SHUTDOWN_PENDING), C.SHUTDOWN, A._on_shutdown, S.SHUTDOWN_RECEIVED, "RFC 4960 9.2")
_rows((S.SHUTDOWN_RECEIVED,), C.SHUTDOWN, A._on_repeated_shutdown, None, "RFC 4960 9.2")
_rows((S.SHUTDOWN_SENT,), C.SHUTDOWN, A._answer_shutdown_with_ack, S.SHUTDOWN_ACK_SENT,
      "RFC 4960 9.2 (both sides shut down)")
_rows(_OPENING + (S.SHUTDOWN_ACK_SENT,), C.SHUTDOWN, A._discard, None, "RFC 4960 9.2")

_rows((S.SHUTDOWN_SENT, S.SHUTDOWN_ACK_SENT), C.SHUTDOWN_ACK, A._complete_shutdown, S.CLOSED, "RFC 4960 9.2")
_rows(_OPENING + (S.ESTABLISHED, S.SHUTDOWN_PENDING, S.SHUTDOWN_RECEIVED), C.SHUTDOWN_ACK, A._discard, None,
      "RFC 4960 9.2 (no SHUTDOWN of ours to acknowledge)")

_rows((S.SHUTDOWN_ACK_SENT,), C.SHUTDOWN_COMPLETE, A._on_shutdown_complete, S.CLOSED, "RFC 4960 9.2")
_rows(_OPENING + (S.ESTABLISHED, S.SHUTDOWN_PENDING, S.SHUTDOWN_SENT, S.SHUTDOWN_RECEIVED), C.SHUTDOWN_COMPLETE,
      A._discard, None, "RFC 4960 9.2 (no SHUTDOWN ACK of ours to complete)")

_rows((S.COOKIE_ECHOED,), C.ERROR, A._on_error_in_cookie_echoed, S.COOKIE_WAIT, "RFC 4960 5.2.6, 3.3.10")
_rows((S.COOKIE_WAIT,) + _UP, C.ERROR, A._report_error, None, "RFC 4960 3.3.10")

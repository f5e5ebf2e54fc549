"""DDP Stream Sessions over one SCTP association (RFC 5043 6, 10; RFC 6581 7-9), sans-I/O.

`DdpSessions` runs the session of every DDP stream of an association.  It
sits above any LLP that carries (stream_id, ppid, payload) DATA messages and
reports per-stream acknowledgements:

* LLP -> `receive(message)` for a `Message(stream_id, ppid, payload)` of
  PPID 16 or 17; `acknowledged(stream_id, count)` when `count` more chunks
  of that stream are acknowledged;
* `data_to_send()` -> [Message], to be sent unordered (U=1) and
  unfragmented (RFC 5043 10, 9);
* user -> `initiate`, `accept`, `reject`, `terminate`, `send_segment`;
* `next_events()` -> the events (frozen dataclasses below) queued by any of
  these calls.  The sessions have no timers, so no call takes `now`
  (see `model`'s convention).

Rules and decisions:

* DDP-SSN: 0 for each session's first chunk, +1 per chunk, no gaps (6, 6.1),
  assigned when a chunk is handed to the LLP, so queued segments follow an
  RTR that is decided later.
* Legal sequences (6.2-6.4 and their RFC 6581 7 twins, which do not mix
  with the plain codes): active Initiate [segments] [Terminate]; passive
  Accept [segments] [Terminate], or Reject, or Terminate.  The peer's chunks
  are judged in DDP-SSN order (6.1); anything else terminates the session
  (`SessionTerminated` with ILLEGAL_SEQUENCE, and a Terminate sent).
* The phases and what moves them are one table, `TRANSITIONS`:
  (phase, input) -> (handler, next phase, RFC section), for the peer's
  messages in DDP-SSN order and the user's calls.  Every message has a row
  in every phase; a user call without one raises `SessionTransitionError`
  (a `model.errors.TransitionError`).  Whether each side's final message
  is queued or received is kept beside the phase (`phase()` reports the
  first as CLOSING).
* A received Terminate is answered with our own unless we already sent a
  final message (allowed: "the final User Data Chunk for each side MAY be a
  DDP Stream Terminate", 6.2).  This tells each side when the other's chunks
  are all in, which 6.6 needs before a stream id is reused.
* 6.6: a control message waits until every earlier chunk of the stream is
  acknowledged or the previous control message is answered (the Initiate by
  the passive side's first message, an Enhanced Accept by the RTR).
* The active side sends DDP segments only after the Accept: 6.6 would allow
  them once the Initiate is acknowledged, but 6.3 lets each party send "a
  single non-payload message before the other end commits" and a rejected
  session is just Initiate, Reject.  Segments of a tolerant peer that does
  send early are held until the user accepts (dropped on reject).
* 6.4: at most `pending_limit` Initiates wait for the user; beyond, the
  answer is a Terminate (`InitiateRefused`, reason PENDING_LIMIT).  A Reject
  is only sent by `reject()` (6.3), except the RFC 6581 7 provider reject
  when no RTR option or IRD matches (`InitiateRefused`, NEGOTIATION_FAILED).
* Stream reuse (6.6): `initiate` raises `StreamBusy` until the previous
  session on that stream is over on both sides and all our chunks are
  acknowledged (`StreamReleased` event, `stream_available()`).  A peer that
  never sends its final message keeps the stream busy.
* DDP-SSN validity (10): a chunk is accepted only if its DDP-SSN is at most
  32766 after the lowest one not yet received and not received before;
  checked before anything is stored.  An invalid DDP-SSN terminates the
  session (INVALID_DDP_SSN).  The sender keeps at most 32767 chunks of a
  stream unacknowledged (`MAX_UNACKNOWLEDGED`); more `send_segment` calls
  queue.
* Received segments are reported at once (`SegmentReceived`, possibly out of
  DDP-SSN order; the DDP sink orders delivery) once the session is open; a
  segment the session cannot take yet (before the user's accept, before the
  RTR) is held and reported in order when it can.
* Enhanced sessions (RFC 6581): the responder's `accept` negotiates with
  `model.ddp.negotiation.respond` (`InitiateReceived.proposal` shows the
  outcome with the endpoint's default resources); the initiator checks the
  Enhanced Accept with `check_reply` and, on success, sends the RTR chosen
  (`rtr_segment`) as its first segment, before any user segment.  The
  responder holds its own segments until the RTR arrives and then reports
  `RtrReceived`; the RTR is consumed here, not passed on as a segment (a
  Read RTR is not answered with a Read Response).  A first segment that is
  not an accepted RTR, or a failed negotiation at the initiator, sends an
  RDMAP Terminate with LLP layer 2, EType 0, code 0x07 or 0x06
  (`llp_terminate_segment`, MSN 1 of QN 2) and then the session Terminate.
  An unenhanced endpoint (`responder=None`) answers an Enhanced Initiate
  with a Terminate (RFC 6581 10: the initiator may retry unenhanced).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable, NamedTuple, Union

from model.ddp.sctp_adaptation import (
    EnhancedData,
    FunctionCode,
    SessionControl,
    ddp_segment_chunk_bytes,
)
from model.errors import DecodeError, LlpError, RnicError, TransitionError, check_field
from model.ddp.negotiation import (
    LocalResources,
    NegotiatedParameters,
    NegotiationFailed,
    check_reply,
    initiator_data,
    is_rdmap_terminate,
    llp_terminate_segment,
    respond,
    rtr_segment,
    rtr_type_of,
    RtrType,
)
from model.sctp.packet import PPID_DDP_SEGMENT, PPID_DDP_SESSION_CONTROL

MAX_UNACKNOWLEDGED = 32767
"""RFC 5043 10: never more than 32767 chunks of one stream without acknowledgement."""
RECEIVE_WINDOW = 32767
"""RFC 5043 10: a received DDP-SSN is valid if at most RECEIVE_WINDOW - 1 after the lowest missing one."""
DEFAULT_PENDING_LIMIT = 16
"""RFC 5043 6.4: the finite number of Initiates that may wait for the user."""
_SSN_MASK = 0xFFFF


# -- exceptions (local misuse) ---------------------------------------------------


class SessionStateError(RnicError):
    """A user call that the stream's session state does not allow."""


class SessionTransitionError(SessionStateError, TransitionError):
    """No row of `TRANSITIONS` for the session's phase and the call or message (RFC 5043 6)."""

    def __init__(self, phase: SessionPhase, trigger: SessionInput, stream_id: int):
        self.stream_id = stream_id
        TransitionError.__init__(self, "DDP stream session", phase, trigger, f"stream {stream_id}")


class StreamBusy(SessionStateError):
    """RFC 5043 6.6: the stream id still carries, or may still receive, chunks of a session."""


class UnexpectedPpid(RnicError, ValueError):
    """`receive` was given a PPID other than 16 or 17 (RFC 5043 5.2)."""


class AcknowledgementError(RnicError, ValueError):
    """`acknowledged` reported more chunks than are outstanding on the stream."""


class NegotiationRefused(SessionStateError):
    """`accept` with resources that cannot accept this Enhanced Initiate (RFC 6581 9): use `reject`."""

    def __init__(self, failed: NegotiationFailed):
        self.error = failed.error
        super().__init__(f"RFC 6581 9: cannot accept, {failed.error.name}")


# -- events ------------------------------------------------------------------------


class TerminationCause(Enum):
    PEER_TERMINATE = "the peer sent a Terminate"
    PEER_NON_ULP_REJECT = "the peer answered the Initiate with a Terminate (RFC 5043 6.4)"
    ILLEGAL_SEQUENCE = "the peer broke the legal sequences (RFC 5043 6.1)"
    INVALID_DDP_SSN = "the peer sent an invalid DDP-SSN (RFC 5043 10)"
    NEGOTIATION_FAILED = "enhanced negotiation failed (RFC 6581 8, 9)"


class RefusalReason(Enum):
    PENDING_LIMIT = "too many Initiates pending (RFC 5043 6.4)"
    ENHANCED_UNSUPPORTED = "Enhanced Initiate to an unenhanced endpoint (RFC 6581 10)"
    NEGOTIATION_FAILED = "no matching RTR option or insufficient IRD (RFC 6581 7, 9)"


class SessionInput(Enum):
    """What moves a session: the peer's next message in DDP-SSN order (RFC 5043 6.1) or a user call."""

    # Identity hashes, in C, for the `TRANSITIONS` row looked up per segment (Enum's own hashes the name in
    # Python); the members are singletons compared by identity.
    __hash__ = object.__hash__

    INITIATE = "Initiate or Enhanced Initiate (RFC 5043 5.2.3, RFC 6581 7)"
    ACCEPT = "Accept or Enhanced Accept"
    REJECT = "Reject or Enhanced Reject"
    TERMINATE = "Terminate"
    MALFORMED = "a session control message that does not decode"
    SEGMENT = "a DDP segment (PPID 16)"
    USER_ACCEPT = "accept()"
    USER_REJECT = "reject()"
    USER_TERMINATE = "terminate()"
    USER_SEGMENT = "send_segment()"


_INPUT_OF_FUNCTION = {
    FunctionCode.INITIATE: SessionInput.INITIATE,
    FunctionCode.ENHANCED_INITIATE: SessionInput.INITIATE,
    FunctionCode.ACCEPT: SessionInput.ACCEPT,
    FunctionCode.ENHANCED_ACCEPT: SessionInput.ACCEPT,
    FunctionCode.REJECT: SessionInput.REJECT,
    FunctionCode.ENHANCED_REJECT: SessionInput.REJECT,
    FunctionCode.TERMINATE: SessionInput.TERMINATE,
}


class SessionPhase(Enum):
    __hash__ = object.__hash__   # as `SessionInput`'s
    AWAITING_INITIATE = "chunks arrived before the Initiate"
    INITIATING = "active: Initiate sent, no answer yet"
    PENDING = "passive: Initiate reported, waiting for accept/reject"
    AWAITING_RTR = "passive, enhanced peer-to-peer: accepted, waiting for the RTR"
    ESTABLISHED = "segments flow"
    CLOSING = "our final message is queued or sent; waiting for the peer's"


_ESTABLISHED = SessionPhase.ESTABLISHED
"""Read for every segment under its name
(an enum member's class attribute is a descriptor call in Python 3.11, a module name a dict lookup)."""


@dataclass(frozen=True)
class InitiateReceived:
    """Passive side: an Initiate (5.2.3) that needs `accept` or `reject`.

    `enhanced`: the initiator's RFC 6581 9 data (None for a plain Initiate);
    `proposal`: what `accept` with the endpoint's default resources gives."""

    stream_id: int
    private_data: bytes
    enhanced: EnhancedData | None = None
    proposal: NegotiatedParameters | None = None


@dataclass(frozen=True)
class InitiateRefused:
    """Passive side: an Initiate answered without the user (Terminate or RFC 6581 Enhanced Reject)."""

    stream_id: int
    reason: RefusalReason
    private_data: bytes
    enhanced: EnhancedData | None = None
    error: LlpError | None = None


@dataclass(frozen=True)
class SessionAccepted:
    """Active side: the Accept arrived; `negotiated` for an enhanced session (its RTR is already queued)."""

    stream_id: int
    private_data: bytes
    negotiated: NegotiatedParameters | None = None


@dataclass(frozen=True)
class SessionRejected:
    """Active side: the peer's (Enhanced) Reject, with its private data and RFC 6581 9 values."""

    stream_id: int
    private_data: bytes
    enhanced: EnhancedData | None = None


@dataclass(frozen=True)
class RtrReceived:
    """Passive side, enhanced peer-to-peer: the RTR arrived; queued segments now flow (RFC 6581 9)."""

    stream_id: int
    rtr: RtrType


@dataclass(frozen=True, slots=True)
class SegmentReceived:
    """A DDP segment of the session (RFC 5043 5.2.2), for the DDP sink."""

    stream_id: int
    ddp_ssn: int
    segment: bytes


@dataclass(frozen=True)
class SessionTerminated:
    """The session ended other than by this user's own call.

    `error`/`peer`/`private_data` are set for NEGOTIATION_FAILED: the LLP
    code sent, the peer's enhanced data and its private data (RFC 6581 9)."""

    stream_id: int
    cause: TerminationCause
    error: LlpError | None = None
    peer: EnhancedData | None = None
    private_data: bytes = b""


@dataclass(frozen=True)
class StreamReleased:
    """RFC 5043 6.6: no chunk of the previous session is outstanding; the stream id may be reused."""

    stream_id: int


Event = Union[
    InitiateReceived,
    InitiateRefused,
    SessionAccepted,
    SessionRejected,
    RtrReceived,
    SegmentReceived,
    SessionTerminated,
    StreamReleased,
]


@dataclass(frozen=True)
class EngineSegment:
    """A DDP segment a transmit engine builds and reads from host memory itself (`send_segment`): the
    session numbers it like any other (RFC 5043 5.2.2) but holds its length, never its bytes."""

    length: int
    """Bytes of the DDP segment, header and payload."""


@dataclass(frozen=True)
class EngineChunk:
    """The user data of an `EngineSegment`'s DATA chunk (RFC 5043 5.2.2): its DDP-SSN and, as a length
    (``len()``), the 2-byte DDP-SSN and the segment that the engine sends."""

    ddp_ssn: int
    length: int

    def __len__(self) -> int:
        return self.length


class Message(NamedTuple):
    """One DATA chunk's user data for the LLP: sent unordered and unfragmented (RFC 5043 9, 10)."""

    stream_id: int
    ppid: int
    payload: bytes | EngineChunk


_new_tuple = tuple.__new__
"""`Message(...)` as `_new_tuple(Message, (...))` where every segment goes: the same object, without the
NamedTuple's constructor (a Python function)."""


# -- internal state ----------------------------------------------------------------


class _Kind(Enum):
    CONTROL = 1
    SEGMENT = 2  # the user's: waits for the session to be open
    SYSTEM = 3  # RTR or LLP Terminate: only the unacknowledged limit applies


@dataclass(slots=True)
class _Outgoing:
    kind: _Kind
    body: bytes | EngineSegment
    function: FunctionCode = FunctionCode.TERMINATE  # CONTROL only


@dataclass(slots=True)
class _Inbound:
    """The peer's direction: lowest DDP-SSN not yet received, and what arrived beyond it."""

    cum: int = 0
    above: dict[int, tuple[int, object] | None] = field(default_factory=dict)

    def valid(self, ssn: int) -> bool:
        """RFC 5043 10: the gap must be explainable by unreceived chunks."""
        return ((ssn - self.cum) & _SSN_MASK) < RECEIVE_WINDOW and ssn not in self.above


@dataclass(slots=True)
class _Session:
    active: bool
    phase: SessionPhase
    resources: LocalResources | None = None
    next_ssn: int = 0
    queue: deque[_Outgoing] = field(default_factory=deque)
    control_confirmed: bool = True
    our_final: bool = False
    peer_final: bool = False
    inbound: _Inbound = field(default_factory=_Inbound)
    held: list[tuple[int, bytes]] = field(default_factory=list)
    peer_enhanced: EnhancedData | None = None
    negotiated: NegotiatedParameters | None = None


@dataclass(slots=True)
class _Stream:
    unacked: int = 0
    session: _Session | None = None
    ghost: _Inbound | None = None
    release_due: bool = False


class DdpSessions:
    """Every DDP Stream Session of one SCTP association (see the module docstring).

    `responder`: the resources used to answer Enhanced Initiates (None: this
    endpoint does not do RFC 6581 and refuses them).  `pending_limit`: the
    RFC 5043 6.4 limit of Initiates waiting for the user.
    """

    def __init__(self, responder: LocalResources | None = None, pending_limit: int = DEFAULT_PENDING_LIMIT):
        if pending_limit < 0:
            raise ValueError("pending_limit must be at least 0")
        self.responder = responder
        self.pending_limit = pending_limit
        self._streams: dict[int, _Stream] = {}
        self.outbox: list[Message] = []
        """The messages `data_to_send` hands out next, oldest first (a caller may test it before asking)."""
        self._events: list[Event] = []
        self._pending = 0

    # -- queries ---------------------------------------------------------------

    def data_to_send(self) -> list[Message]:
        """DATA messages to send unordered, in DDP-SSN order per stream."""
        out, self.outbox = self.outbox, []
        return out

    def next_events(self) -> list[Event]:
        """Every event queued since the last call, oldest first."""
        events, self._events = self._events, []
        return events

    def stream_available(self, stream_id: int) -> bool:
        """RFC 5043 6.6: True if `initiate` may open a session on `stream_id`."""
        stream = self._streams.get(stream_id)
        return stream is None or (stream.session is None and stream.unacked == 0)

    def phase(self, stream_id: int) -> SessionPhase | None:
        stream = self._streams.get(stream_id)
        if stream is None or stream.session is None:
            return None
        return SessionPhase.CLOSING if stream.session.our_final else stream.session.phase

    def negotiated(self, stream_id: int) -> NegotiatedParameters | None:
        """The enhanced parameters in force on the stream's session (RFC 6581 9), if any."""
        stream = self._streams.get(stream_id)
        return stream.session.negotiated if stream is not None and stream.session is not None else None

    def unacknowledged(self, stream_id: int) -> int:
        stream = self._streams.get(stream_id)
        return stream.unacked if stream is not None else 0

    def queued(self, stream_id: int) -> int:
        """Chunks of the stream's session waiting to be handed to the LLP (not open yet, 6.6, or 10)."""
        stream = self._streams.get(stream_id)
        return len(stream.session.queue) if stream is not None and stream.session is not None else 0

    @property
    def pending_initiates(self) -> int:
        return self._pending

    # -- user calls ------------------------------------------------------------

    def initiate(self, stream_id: int, private_data: bytes = b"", enhanced: LocalResources | None = None) -> None:
        """Active side: send an Initiate, or an Enhanced Initiate with `enhanced` (RFC 5043 6.2, RFC 6581 7)."""
        stream = self._stream(stream_id)
        if not self.stream_available(stream_id):
            raise StreamBusy(f"stream {stream_id}: a previous session may still have chunks outstanding")
        if enhanced is None:
            function, body = FunctionCode.INITIATE, bytes(private_data)
        else:
            function, body = FunctionCode.ENHANCED_INITIATE, initiator_data(enhanced).encode() + bytes(private_data)
        SessionControl(0, function, body).encode()  # RFC 5043 5.2.3 limits, before any state changes
        stream.session = _Session(active=True, phase=SessionPhase.INITIATING, resources=enhanced)
        stream.ghost = None
        stream.release_due = True
        stream.session.queue.append(_Outgoing(_Kind.CONTROL, body, function))
        self._pump(stream_id, stream)

    def accept(self, stream_id: int, private_data: bytes = b"", resources: LocalResources | None = None) -> None:
        """Passive side: accept a pending Initiate (RFC 5043 6.2).  For an Enhanced Initiate,
        `resources` (default: the endpoint's `responder`) are negotiated (RFC 6581 9)."""
        self._call(stream_id, SessionInput.USER_ACCEPT, private_data, resources)

    def reject(self, stream_id: int, private_data: bytes = b"") -> None:
        """Passive side: reject a pending Initiate, at the user's direction only (RFC 5043 6.3)."""
        self._call(stream_id, SessionInput.USER_REJECT, private_data)

    def terminate(self, stream_id: int) -> None:
        """Either side: end the session with a Terminate (RFC 5043 6.2), after any segments already
        submitted on an open session; a pending Initiate so answered is a 6.4 non-ULP reject."""
        self._call(stream_id, SessionInput.USER_TERMINATE)

    def send_segment(self, stream_id: int, segment: bytes | EngineSegment) -> None:
        """Queue one DDP segment (RFC 5043 5.2.2); it is sent with the next DDP-SSN once the session
        is open and fewer than 32767 chunks of the stream are unacknowledged (RFC 5043 10). An
        `EngineSegment` leaves as an `EngineChunk`."""
        self.send_segments(stream_id, [segment])

    def send_segments(self, stream_id: int, segments: list[bytes | EngineSegment]) -> None:
        """`send_segment` for each of `segments` in order (what the RDMAP endpoint hands over at once), through
        the state table's row once: queuing leaves the session as the table found it (same phase, no final
        message), so each of them would take the same row; they are queued together, then handed on in order."""
        if not segments:
            return
        stream = self._streams.get(stream_id)
        session = stream.session if stream is not None else None
        if session is None or session.queue or not self._open(session):
            self._call(stream_id, SessionInput.USER_SEGMENT, segments)
            return
        # The common call: an open session with nothing queued. The row (ESTABLISHED, USER_SEGMENT) would queue
        # the segments and `_pump` hand each on at once, numbered (6.1, 10), up to the unacknowledged limit; so
        # they are numbered here, without queuing, and what the limit or an `EngineSegment` stops goes the
        # row's way.
        outbox, ssn = self.outbox, session.next_ssn
        for index, segment in enumerate(segments):
            if stream.unacked >= MAX_UNACKNOWLEDGED or type(segment) is EngineSegment:
                session.next_ssn = ssn
                self._call(stream_id, SessionInput.USER_SEGMENT, segments[index:])
                return
            stream.unacked += 1
            payload = ddp_segment_chunk_bytes(ssn, bytes(segment))
            outbox.append(_new_tuple(Message, (stream_id, PPID_DDP_SEGMENT, payload)))
            ssn = (ssn + 1) & _SSN_MASK
        session.next_ssn = ssn

    # -- LLP input -------------------------------------------------------------

    def placed_before(self, stream_id: int, first: int, ssn: int) -> None:
        """An offload engine placed every DDP Segment of the stream from DDP-SSN `first` (its row's first) up to
        `ssn` and reports a message by its last segment only (`abi.rx.report_withheld`): an accepted record
        leaves after every earlier DDP-SSN of its stream (RFC 5041 5.3, RFC 5043 6.1). Those not yet received
        count as received now, segments with nothing left to do (their bytes are in place); the DDP-SSNs
        before `first` (the RTR, RFC 6581) still arrive on their own."""
        stream = self._streams.get(stream_id)
        session = stream.session if stream is not None else None
        if session is None:
            return
        inbound = session.inbound
        start = first if (first - inbound.cum) & _SSN_MASK < 0x8000 else inbound.cum
        for offset in range((ssn - start) & _SSN_MASK if (ssn - start) & _SSN_MASK < 0x8000 else 0):
            inbound.above.setdefault((start + offset) & _SSN_MASK, None)
        self._advance(stream_id, stream, self._events)
        self._pump(stream_id, stream)
        self._settle(stream_id, stream, self._events)

    def acknowledged(self, stream_id: int, count: int) -> None:
        """The LLP acknowledged `count` more chunks of `stream_id`."""
        stream = self._streams.get(stream_id) or self._stream(stream_id)   # a known stream's number was checked
        if not 0 <= count <= stream.unacked:
            raise AcknowledgementError(f"stream {stream_id}: {count} acknowledged, {stream.unacked} outstanding")
        stream.unacked -= count
        session = stream.session
        if stream.unacked == 0 and session is not None:
            session.control_confirmed = True  # 6.6: every earlier control message is received
        if session is not None and session.queue:   # `_pump` has nothing to hand on otherwise
            self._pump(stream_id, stream)
        self._settle(stream_id, stream, self._events)

    def receive(self, message: Message | tuple[int, int, bytes]) -> None:
        """One DATA chunk's user data, (stream_id, ppid, payload) with PPID 16 or 17 (RFC 5043 5.2)."""
        stream_id, ppid, payload = message
        if ppid not in (PPID_DDP_SEGMENT, PPID_DDP_SESSION_CONTROL):
            raise UnexpectedPpid(f"PPID {ppid} is not DDP (16) or DDP session control (17)")
        stream = self._stream(stream_id)
        events = self._events
        payload = bytes(payload)
        if len(payload) < 2:
            self._violation(stream_id, stream, TerminationCause.ILLEGAL_SEQUENCE, events)
            self._settle(stream_id, stream, events)
            return
        ssn = int.from_bytes(payload[:2], "big")
        session = stream.session
        if (ppid == PPID_DDP_SEGMENT and session is not None and ssn == session.inbound.cum
                and not session.inbound.above and self._open(session)):
            # The common chunk: the next segment in order on an open session, nothing held beyond it.  What
            # `_advance` does with it, without holding it first: the row (ESTABLISHED, SEGMENT) reports it
            # (`_report_segment`, 6.2, 10) and leaves the phase as it is.
            session.inbound.cum = (ssn + 1) & _SSN_MASK
            events.append(SegmentReceived(stream_id, ssn, payload[2:]))
            self._pump(stream_id, stream)
            self._settle(stream_id, stream, events)
            return
        item: tuple[int, object]
        if ppid == PPID_DDP_SEGMENT:
            item = (ppid, payload[2:])   # the DDP Segment after the DDP-SSN (RFC 5043 5.2.2), not examined here
        else:
            try:
                item = (ppid, SessionControl.decode(payload))
            except DecodeError:
                item = (ppid, None)  # not a valid control message: illegal where it falls
        if session is None:
            session = self._new_inbound_session(stream, ssn, item)
            if session is None:
                return
        if not session.inbound.valid(ssn):
            if not session.our_final:
                self._violation(stream_id, stream, TerminationCause.INVALID_DDP_SSN, events)
            self._settle(stream_id, stream, events)
            return
        if ppid == PPID_DDP_SEGMENT and ssn != session.inbound.cum and self._open(session):
            session.inbound.above[ssn] = None  # placed now, out of order (RFC 5043 10)
            events.append(SegmentReceived(stream_id, ssn, item[1]))  # type: ignore[arg-type]
        else:
            session.inbound.above[ssn] = item
        self._advance(stream_id, stream, events)
        self._pump(stream_id, stream)
        self._settle(stream_id, stream, events)

    def receive_next_segment(self, stream_id: int, payload: bytes) -> int | None:
        """`receive` of the common chunk, a DDP Segment (PPID 16) that is the next in DDP-SSN order on an open
        session with nothing held beyond it, nothing queued to send and no event waiting: its DDP-SSN, for the
        caller to hand the segment (`payload[2:]`) on as `receive` would report it (`SegmentReceived`, 6.2,
        10). None, with nothing done, for any other chunk, which `receive` takes. Nothing else moves: the
        session's phase, final flags and queue stay as they are, so `_pump` and `_settle` would do nothing."""
        stream = self._streams.get(stream_id)
        session = stream.session if stream is not None else None
        if session is None or session.queue or self._events or len(payload) < 2:
            return None
        inbound = session.inbound
        ssn = int.from_bytes(payload[:2], "big")
        if (ssn != inbound.cum or inbound.above or session.phase is not _ESTABLISHED
                or session.our_final or session.peer_final):   # not `_open`
            return None
        inbound.cum = (ssn + 1) & _SSN_MASK
        return ssn

    # -- internals -------------------------------------------------------------

    def _stream(self, stream_id: int) -> _Stream:
        check_field(stream_id, 16, "stream_id")
        stream = self._streams.get(stream_id)
        if stream is None:   # the first use of the stream (not a new `_Stream` per call, for `setdefault`)
            stream = self._streams[stream_id] = _Stream()
        return stream

    def _call(self, stream_id: int, call: SessionInput, *args: object) -> None:
        """A user call on the stream's session: the row of `TRANSITIONS` for its phase, or
        `SessionTransitionError` (also once our final message is queued: nothing may follow it, 6.2)."""
        stream = self._stream(stream_id)
        session = stream.session
        if session is None:
            raise SessionStateError(f"stream {stream_id}: no session for {call.value}")
        if session.our_final:
            raise SessionTransitionError(SessionPhase.CLOSING, call, stream_id)
        self._fire(session, call, stream_id, stream, *args)

    def _fire(self, session: _Session, trigger: SessionInput, *args: object) -> None:
        """Run the row of `TRANSITIONS` for (phase, trigger); `SessionTransitionError` if there is none."""
        row = TRANSITIONS.get((session.phase, trigger))
        if row is None:
            raise SessionTransitionError(session.phase, trigger, args[0])  # type: ignore[arg-type]
        before = session.phase
        result = row.handler(self, session, *args)
        if result is not False and row.next_phase is not None and session.phase is before:
            session.phase = row.next_phase

    @staticmethod
    def _open(session: _Session) -> bool:
        return session.phase is _ESTABLISHED and not session.our_final and not session.peer_final

    def _new_inbound_session(self, stream: _Stream, ssn: int, item: tuple[int, object]) -> _Session | None:
        """A chunk on a stream without a session: a new passive session, or a straggler to drop."""
        if ssn == 0:
            control = item[1]
            is_initiate = isinstance(control, SessionControl) and control.function in (
                FunctionCode.INITIATE,
                FunctionCode.ENHANCED_INITIATE,
            )
            if not is_initiate:
                return None  # a stray first message; answering it could echo forever
        elif stream.ghost is not None and stream.ghost.valid(ssn):
            stream.ghost.above[ssn] = None  # a late chunk of the previous session
            return None
        stream.ghost = None
        stream.release_due = True
        stream.session = _Session(active=False, phase=SessionPhase.AWAITING_INITIATE)
        return stream.session

    def _advance(self, stream_id: int, stream: _Stream, events: list[Event]) -> None:
        """Process the peer's chunks in DDP-SSN order (RFC 5043 6.1)."""
        while stream.session is not None:
            session = stream.session
            inbound = session.inbound
            if inbound.cum not in inbound.above:
                return
            ssn = inbound.cum
            item = inbound.above.pop(ssn)
            inbound.cum = (ssn + 1) & _SSN_MASK
            if item is None or session.peer_final:
                continue
            ppid, body = item
            if ppid == PPID_DDP_SESSION_CONTROL:
                trigger = _INPUT_OF_FUNCTION.get(body.function) if body is not None else None  # type: ignore[union-attr]
                self._fire(session, trigger or SessionInput.MALFORMED, stream_id, stream, ssn, body, events)
            else:
                self._in_order_segment(stream_id, stream, session, ssn, body, events)  # type: ignore[arg-type]
            self._settle(stream_id, stream, events)

    def _in_order_segment(
        self, stream_id: int, stream: _Stream, session: _Session, ssn: int, segment: bytes, events: list[Event]
    ) -> None:
        """The peer's next segment in DDP-SSN order; after either side's final message it is dropped (6.2)."""
        if session.our_final or session.peer_final:
            return
        self._fire(session, SessionInput.SEGMENT, stream_id, stream, ssn, segment, events)

    # -- row handlers: the peer's messages in DDP-SSN order (RFC 5043 6.1) ----------------------

    def _report_segment(self, session: _Session, stream_id: int, stream: _Stream, ssn: int, segment: bytes,
                        events: list[Event]) -> None:
        """6.2: a segment of an open session goes to the DDP sink."""
        events.append(SegmentReceived(stream_id, ssn, segment))

    def _hold_segment(self, session: _Session, stream_id: int, stream: _Stream, ssn: int, segment: bytes,
                      events: list[Event]) -> None:
        """6.3: a tolerant peer's early segment waits for the user's accept (dropped on reject)."""
        session.held.append((ssn, segment))

    def _illegal(self, session: _Session, stream_id: int, stream: _Stream, ssn: int, body: object,
                 events: list[Event]) -> bool:
        """6.1: not a legal sequence: terminate the session."""
        self._violation(stream_id, stream, TerminationCause.ILLEGAL_SEQUENCE, events)
        return False

    def _on_peer_terminate(self, session: _Session, stream_id: int, stream: _Stream, ssn: int,
                           control: SessionControl, events: list[Event]) -> None:
        """6.2: the peer's Terminate ends its direction; ours ends with a Terminate too unless already final."""
        if not session.our_final:
            events.append(SessionTerminated(stream_id, TerminationCause.PEER_TERMINATE))
            if session.phase is SessionPhase.PENDING:
                self._pending -= 1
                session.held.clear()
            self._drop_user_segments(session)
            session.queue.append(_Outgoing(_Kind.CONTROL, b"", FunctionCode.TERMINATE))
        self._finish(session, peer_final=True)

    def _check_rtr(
        self, session: _Session, stream_id: int, stream: _Stream, ssn: int, segment: bytes, events: list[Event]
    ) -> bool | None:
        """RFC 6581 9: the initiator's first message is one of the RTRs offered."""
        accepted = session.negotiated.rtr_accepted if session.negotiated is not None else frozenset()
        rtr = rtr_type_of(segment)
        if rtr is not None and rtr in accepted:
            session.phase = SessionPhase.ESTABLISHED
            session.control_confirmed = True  # the RTR answers our Enhanced Accept
            events.append(RtrReceived(stream_id, rtr))
            self._pump(stream_id, stream)
            return None
        if is_rdmap_terminate(segment):
            events.append(SegmentReceived(stream_id, ssn, segment))  # the initiator's own TERM
        else:
            self._violation(
                stream_id, stream, TerminationCause.NEGOTIATION_FAILED, events, error=LlpError.NO_MATCHING_RTR
            )
        return False

    def _on_initiate(self, session: _Session, stream_id: int, stream: _Stream, ssn: int,
                     control: SessionControl, events: list[Event]) -> bool | None:
        """RFC 5043 6.2-6.4 passive side, RFC 6581 7 for the enhanced code: report the Initiate to the user,
        or refuse it without the user (pending limit, negotiation); a refusal ends the session (False)."""
        enhanced = control.enhanced_data
        private_data = control.ulp_private_data
        refusal: RefusalReason | None = None
        error: LlpError | None = None
        answer: tuple[FunctionCode, bytes] = (FunctionCode.TERMINATE, b"")
        proposal: NegotiatedParameters | None = None
        if control.function is FunctionCode.ENHANCED_INITIATE and self.responder is None:
            refusal = RefusalReason.ENHANCED_UNSUPPORTED
        elif self._pending >= self.pending_limit:
            refusal = RefusalReason.PENDING_LIMIT
        elif enhanced is not None and self.responder is not None:
            reply, decision = respond(enhanced, self.responder)
            if isinstance(decision, NegotiationFailed):
                refusal, error = RefusalReason.NEGOTIATION_FAILED, decision.error
                answer = (FunctionCode.ENHANCED_REJECT, reply.encode())
            else:
                proposal = decision
        if refusal is not None:
            events.append(InitiateRefused(stream_id, refusal, private_data, enhanced, error))
            session.held.clear()
            self._finish(session, peer_final=True)
            session.queue.append(_Outgoing(_Kind.CONTROL, answer[1], answer[0]))
            return False
        session.peer_enhanced = enhanced
        self._pending += 1
        events.append(InitiateReceived(stream_id, private_data, enhanced, proposal))
        return None

    # The active side's INITIATING rows.  The passive side's first message (DDP-SSN 0) answers the Initiate
    # (6.6: control_confirmed).  A later message finds the session still INITIATING only when that first one
    # broke the sequence and our Terminate is queued: it is not an answer.

    def _answer_codes(self, session: _Session) -> tuple[FunctionCode, FunctionCode]:
        """The Accept and Reject codes that answer our Initiate: enhanced ones for an Enhanced Initiate."""
        if session.resources is not None:
            return FunctionCode.ENHANCED_ACCEPT, FunctionCode.ENHANCED_REJECT
        return FunctionCode.ACCEPT, FunctionCode.REJECT

    @staticmethod
    def _is_answer(session: _Session, ssn: int, control: SessionControl, expected: FunctionCode) -> bool:
        """The first message (DDP-SSN 0) answers our Initiate (6.6), legally if it carries `expected`."""
        if ssn != 0:
            return False
        session.control_confirmed = True
        return control.function is expected

    def _on_accept(self, session: _Session, stream_id: int, stream: _Stream, ssn: int,
                   control: SessionControl, events: list[Event]) -> bool | None:
        """RFC 5043 6.2, RFC 6581 7, 9: the Accept opens the session (the enhanced one after checking the
        negotiation and queueing the RTR first)."""
        if not self._is_answer(session, ssn, control, self._answer_codes(session)[0]):
            return self._illegal(session, stream_id, stream, ssn, control, events)
        session.phase = SessionPhase.ESTABLISHED
        if session.our_final:
            return None  # the user already terminated; the Terminate follows the Accept
        if session.resources is None:
            events.append(SessionAccepted(stream_id, control.ulp_private_data))
            return None
        result = check_reply(session.resources, control.enhanced_data)
        if isinstance(result, NegotiationFailed):
            self._violation(stream_id, stream, TerminationCause.NEGOTIATION_FAILED, events, error=result.error,
                            peer=control.enhanced_data, private_data=control.ulp_private_data)
            return None
        session.negotiated = result
        if result.rtr is not None:
            session.queue.appendleft(_Outgoing(_Kind.SYSTEM, rtr_segment(result.rtr)))  # RFC 6581 9: first
        events.append(SessionAccepted(stream_id, control.ulp_private_data, result))
        return None

    def _on_reject(self, session: _Session, stream_id: int, stream: _Stream, ssn: int,
                   control: SessionControl, events: list[Event]) -> bool | None:
        """RFC 5043 6.3, RFC 6581 7: the user's Reject ends the sequence; nothing more of ours is sent."""
        if not self._is_answer(session, ssn, control, self._answer_codes(session)[1]):
            return self._illegal(session, stream_id, stream, ssn, control, events)
        self._answered_with_an_end(session, SessionRejected(stream_id, control.ulp_private_data,
                                                            control.enhanced_data), events)
        return None

    def _on_provider_reject(self, session: _Session, stream_id: int, stream: _Stream, ssn: int,
                            control: SessionControl, events: list[Event]) -> bool | None:
        """RFC 5043 6.4: a Terminate answering the Initiate is a non-ULP reject; nothing more of ours."""
        if ssn != 0:
            return self._on_peer_terminate(session, stream_id, stream, ssn, control, events)
        session.control_confirmed = True
        self._answered_with_an_end(session, SessionTerminated(stream_id, TerminationCause.PEER_NON_ULP_REJECT), events)
        return None

    def _answered_with_an_end(self, session: _Session, event: Event, events: list[Event]) -> None:
        """6.3, 6.4: the answer ends the sequence: reported unless our final message went first; nothing more
        of ours is sent."""
        if not session.our_final:
            events.append(event)
        session.queue.clear()
        self._finish(session, peer_final=True)

    def _on_unexpected_answer(self, session: _Session, stream_id: int, stream: _Stream, ssn: int,
                              control: SessionControl, events: list[Event]) -> bool | None:
        """RFC 5043 6.1: an Initiate answering our Initiate answers it, illegally."""
        if ssn == 0:
            session.control_confirmed = True
        return self._illegal(session, stream_id, stream, ssn, control, events)

    # -- row handlers: the user's calls ---------------------------------------------------------

    def _accept(self, session: _Session, stream_id: int, stream: _Stream, private_data: bytes,
                resources: LocalResources | None) -> None:
        """RFC 5043 6.2; RFC 6581 9: answer with (Enhanced) Accept; an enhanced peer-to-peer session then waits
        for the RTR; segments held until now are judged in order."""
        negotiated: NegotiatedParameters | None = None
        if session.peer_enhanced is not None:
            local = resources if resources is not None else self.responder
            if local is None:
                raise SessionStateError("an Enhanced Initiate needs local resources to accept")
            reply, decision = respond(session.peer_enhanced, local)
            if isinstance(decision, NegotiationFailed):
                raise NegotiationRefused(decision)
            function, body = FunctionCode.ENHANCED_ACCEPT, reply.encode() + bytes(private_data)
            negotiated = decision
        else:
            function, body = FunctionCode.ACCEPT, bytes(private_data)
        SessionControl(0, function, body).encode()
        self._pending -= 1
        session.negotiated = negotiated
        session.queue.append(_Outgoing(_Kind.CONTROL, body, function))
        session.phase = (SessionPhase.AWAITING_RTR if negotiated is not None and negotiated.peer_to_peer
                         else SessionPhase.ESTABLISHED)
        events = self._events
        self._pump(stream_id, stream)
        held, session.held = session.held, []
        for ssn, segment in held:
            self._in_order_segment(stream_id, stream, session, ssn, segment, events)
        self._pump(stream_id, stream)
        self._settle(stream_id, stream, events)

    def _reject(self, session: _Session, stream_id: int, stream: _Stream, private_data: bytes) -> None:
        """RFC 5043 6.3; RFC 6581 9: answer with (Enhanced) Reject; both directions end."""
        if session.peer_enhanced is not None:
            local = self.responder
            reply = respond(session.peer_enhanced, local)[0] if local is not None else EnhancedData()
            function, body = FunctionCode.ENHANCED_REJECT, reply.encode() + bytes(private_data)
        else:
            function, body = FunctionCode.REJECT, bytes(private_data)
        SessionControl(0, function, body).encode()
        self._pending -= 1
        session.held.clear()
        self._finish(session, peer_final=True)
        session.queue.append(_Outgoing(_Kind.CONTROL, body, function))
        self._pump(stream_id, stream)

    def _terminate_pending(self, session: _Session, stream_id: int, stream: _Stream) -> None:
        """RFC 5043 6.4: a Terminate answering a pending Initiate is a non-ULP reject; the peer's direction
        ends with its Initiate."""
        self._pending -= 1
        session.held.clear()
        session.peer_final = True
        self._terminate_unopened(session, stream_id, stream)

    def _terminate_unopened(self, session: _Session, stream_id: int, stream: _Stream) -> None:
        """RFC 5043 6.2: a session not open yet ends at once: the user's queued segments never go."""
        self._drop_user_segments(session)
        self._terminate_open(session, stream_id, stream)

    def _terminate_open(self, session: _Session, stream_id: int, stream: _Stream) -> None:
        """RFC 5043 6.2: the Terminate follows the segments already submitted."""
        session.our_final = True
        session.queue.append(_Outgoing(_Kind.CONTROL, b"", FunctionCode.TERMINATE))
        self._pump(stream_id, stream)

    def _queue_segments(self, session: _Session, stream_id: int, stream: _Stream,
                        segments: list[bytes | EngineSegment]) -> None:
        """RFC 5043 5.2.2, 10: queued now, numbered and sent once the session is open."""
        session.queue.extend(_Outgoing(_Kind.SEGMENT, segment if isinstance(segment, EngineSegment) else bytes(segment))
                             for segment in segments)
        self._pump(stream_id, stream)

    def _violation(
        self,
        stream_id: int,
        stream: _Stream,
        cause: TerminationCause,
        events: list[Event],
        error: LlpError | None = None,
        peer: EnhancedData | None = None,
        private_data: bytes = b"",
    ) -> None:
        """Terminate the session for the peer's fault (RFC 5043 6.1, 10; RFC 6581 8, 9)."""
        session = stream.session
        if session is None or session.our_final:
            return
        if session.phase is SessionPhase.AWAITING_INITIATE:
            # No Initiate, no session: drop what arrived and answer nothing (the user saw nothing).
            stream.session = None
            stream.ghost = session.inbound
            return
        events.append(SessionTerminated(stream_id, cause, error, peer, private_data))
        if session.phase is SessionPhase.PENDING:
            self._pending -= 1
        session.held.clear()
        self._drop_user_segments(session)
        if error is not None and session.phase in (SessionPhase.ESTABLISHED, SessionPhase.AWAITING_RTR):
            session.queue.append(_Outgoing(_Kind.SYSTEM, llp_terminate_segment(error)))
        session.our_final = True
        session.queue.append(_Outgoing(_Kind.CONTROL, b"", FunctionCode.TERMINATE))
        self._pump(stream_id, stream)

    @staticmethod
    def _drop_user_segments(session: _Session) -> None:
        session.queue = deque(item for item in session.queue if item.kind is not _Kind.SEGMENT)

    @staticmethod
    def _finish(session: _Session, peer_final: bool) -> None:
        session.our_final = True
        session.peer_final = session.peer_final or peer_final

    def _pump(self, stream_id: int, stream: _Stream) -> None:
        """Hand queued chunks to the LLP in order, numbering them (RFC 5043 6, 6.6, 10)."""
        session = stream.session
        if session is None:
            return
        while session.queue and stream.unacked < MAX_UNACKNOWLEDGED:
            item = session.queue[0]
            if item.kind is _Kind.CONTROL and not session.control_confirmed:
                return
            if item.kind is _Kind.SEGMENT and not self._open(session):
                return
            session.queue.popleft()
            ssn = session.next_ssn
            session.next_ssn = (ssn + 1) & _SSN_MASK
            stream.unacked += 1
            if item.kind is _Kind.CONTROL:
                session.control_confirmed = False
                payload = SessionControl(ssn, item.function, item.body).encode()
                self.outbox.append(Message(stream_id, PPID_DDP_SESSION_CONTROL, payload))
            elif isinstance(item.body, EngineSegment):
                self.outbox.append(Message(stream_id, PPID_DDP_SEGMENT, EngineChunk(ssn, 2 + item.body.length)))
            else:
                self.outbox.append(Message(stream_id, PPID_DDP_SEGMENT, ddp_segment_chunk_bytes(ssn, item.body)))

    def _settle(self, stream_id: int, stream: _Stream, events: list[Event]) -> None:
        """Close a session that is over on both sides, and report the stream free (6.6)."""
        session = stream.session
        if session is not None and session.our_final and session.peer_final and not session.queue:
            stream.session = None
            stream.ghost = session.inbound
        if stream.session is None and stream.unacked == 0 and stream.release_due:
            stream.release_due = False
            events.append(StreamReleased(stream_id))


# -- the transition table (RFC 5043 6; RFC 6581 7, 9) -----------------------------------------------


@dataclass(frozen=True)
class SessionTransition:
    """One row: in the row's phase, the input runs `handler` and leads to `next_phase` (None: it stays).

    A handler returns False when the input ends or refuses the session instead; the phase then stays and
    the session's final-message flags say what is left."""

    handler: Callable
    next_phase: SessionPhase | None
    rfc: str


P = SessionPhase
I = SessionInput  # noqa: E741 (the table's short name, as P and D)
D = DdpSessions
TRANSITIONS: dict[tuple[SessionPhase, SessionInput], SessionTransition] = {}
"""(phase, input) -> SessionTransition.  Every message input has a row in every stored phase (CLOSING is
not stored: it is a session whose final message is queued); a user call without a row raises
`SessionTransitionError`."""

_MESSAGES = (I.INITIATE, I.ACCEPT, I.REJECT, I.TERMINATE, I.MALFORMED, I.SEGMENT)
_ILLEGAL = "RFC 5043 6.1 (not a legal sequence)"


def _row(phases: tuple[SessionPhase, ...], inputs: tuple[SessionInput, ...], handler: Callable,
         next_phase: SessionPhase | None, rfc: str) -> None:
    for phase in phases:
        for trigger in inputs:
            if (phase, trigger) in TRANSITIONS:
                raise ValueError(f"two rows for {(phase, trigger)}")
            TRANSITIONS[(phase, trigger)] = SessionTransition(handler, next_phase, rfc)


_row((P.AWAITING_INITIATE,), (I.INITIATE,), D._on_initiate, P.PENDING, "RFC 5043 6.2, 6.4; RFC 6581 7")
_row((P.AWAITING_INITIATE,), (I.ACCEPT, I.REJECT, I.TERMINATE, I.MALFORMED, I.SEGMENT), D._illegal, None,
     "RFC 5043 6.1 (no Initiate: dropped, unanswered)")

_row((P.INITIATING,), (I.ACCEPT,), D._on_accept, P.ESTABLISHED, "RFC 5043 6.2; RFC 6581 7, 9")
_row((P.INITIATING,), (I.REJECT,), D._on_reject, None, "RFC 5043 6.3; RFC 6581 7")
_row((P.INITIATING,), (I.TERMINATE,), D._on_provider_reject, None, "RFC 5043 6.4")
_row((P.INITIATING,), (I.INITIATE,), D._on_unexpected_answer, None, _ILLEGAL)
_row((P.INITIATING,), (I.MALFORMED, I.SEGMENT), D._illegal, None, "RFC 5043 6.1, 6.3 (no segment before the answer)")

_row((P.PENDING,), (I.SEGMENT,), D._hold_segment, None, "RFC 5043 6.3 (held until the user's answer)")
_row((P.AWAITING_RTR,), (I.SEGMENT,), D._check_rtr, P.ESTABLISHED, "RFC 6581 9 (the first message is the RTR)")
_row((P.ESTABLISHED,), (I.SEGMENT,), D._report_segment, None, "RFC 5043 6.2, 10")
_row((P.PENDING, P.AWAITING_RTR, P.ESTABLISHED), (I.TERMINATE,), D._on_peer_terminate, None, "RFC 5043 6.2")
_row((P.PENDING, P.AWAITING_RTR, P.ESTABLISHED), (I.INITIATE, I.ACCEPT, I.REJECT, I.MALFORMED), D._illegal, None,
     _ILLEGAL)

_row((P.PENDING,), (I.USER_ACCEPT,), D._accept, P.ESTABLISHED, "RFC 5043 6.2; RFC 6581 9")
_row((P.PENDING,), (I.USER_REJECT,), D._reject, None, "RFC 5043 6.3")
_row((P.PENDING,), (I.USER_TERMINATE,), D._terminate_pending, None, "RFC 5043 6.4")
_row((P.INITIATING, P.AWAITING_RTR), (I.USER_TERMINATE,), D._terminate_unopened, None, "RFC 5043 6.2")
_row((P.ESTABLISHED,), (I.USER_TERMINATE,), D._terminate_open, None, "RFC 5043 6.2")
_row((P.INITIATING, P.AWAITING_RTR, P.ESTABLISHED), (I.USER_SEGMENT,), D._queue_segments, None,
     "RFC 5043 5.2.2, 10")

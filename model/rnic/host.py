"""A complete software RNIC host: iWARP over SCTP from Ethernet frames to verbs, sans-I/O.

`SoftRnic` joins the model's layers into one host with one SCTP endpoint:

    Ethernet / IPv4 (/ UDP 9899, RFC 6951)        model.net.frames
    SCTP association (+ Listener when passive)   model.sctp.association
    DDP Stream Sessions (RFC 5043 6, RFC 6581)   model.ddp.session
    one RDMAP endpoint per open DDP stream       model.rdmap.endpoint
    memory: one Protection Domain, one MemoryTable, the host's SparseMemory

Like every model object it follows `model`'s sans-I/O convention:

    host.connect(now, peer_mac, peer_ip, peer_port)   # or host.listen()
    host.receive(frame, now)                           # any Ethernet frame off the wire
    host.handle_timeout(now)                           # when now >= host.next_timeout()
    frames = host.data_to_send(now)                    # Ethernet frames, after any other call
    events = host.next_events()                        # RnicEvents queued by any call

Routing inside: association DataReceived (PPID 16/17) -> sessions.receive ->
SegmentReceived -> the stream's RdmapEndpoint.receive(segment, ddp_ssn);
association DataAcknowledged -> sessions.acknowledged; RdmapEndpoint
segments -> sessions.send_segment; session messages -> association.send
(U=1, unfragmented, RFC 5043 9, 10); association packets -> Ethernet frames.
Each layer's `next_events()` is drained right after the call that fed it.

Decisions recorded here:

* One association per host.  While none is open, a passive host answers
  INITs from anyone with its stateless Listener for the port they are
  sent to (`listen(port)`, one per port; RFC 4960 5.1.3, 8.4 for
  out-of-the-blue packets).  While one is open, frames from any other host
  are dropped and every SCTP packet of the peer goes to the association,
  which checks its verification tag (RFC 4960 8.5) and handles a repeated
  INIT or COOKIE ECHO (5.2).  A peer that restarted (5.2.4 A: its COOKIE
  ECHO carries our tags as tie-tags) ends the association as if it had
  aborted it (`Aborted(peer_restarted=True)`: every DDP stream is gone with
  the peer's state), and its COOKIE ECHO makes the new association
  (`Connected`), as a listener on that port would, listening or not.
* Out of the blue (RFC 4960 8.4): a host with no open association and no
  Listener (it never listened: an active opener whose association closed,
  or a host never opened) still answers for its port (an INIT for any
  port), through
  `out_of_the_blue_reply`: rule 1, a packet from a non-unicast IPv4
  source, is discarded; rule 2, a packet with an ABORT, is discarded;
  rule 3, an INIT, cannot be processed without a listener (5.1) and is
  answered with an ABORT carrying the INIT's Initiate Tag, T bit 0, so
  the initiator learns within a round trip that nothing listens (its
  COOKIE-WAIT accepts its own tag with T=0, 8.5.1 B); rule 4, a COOKIE
  ECHO first, is discarded, since no cookie can be ours without a listener; rule 5, a
  SHUTDOWN ACK, gets a SHUTDOWN COMPLETE with the T bit set and the
  packet's own verification tag (so the peer whose final SHUTDOWN
  COMPLETE was lost closes instead of failing after
  Association.Max.Retrans); rules 6 and 7, a SHUTDOWN COMPLETE, a COOKIE
  ACK or a Stale Cookie ERROR, are discarded; rule 8, anything else, gets
  an ABORT with the T bit set and the packet's tag.  One answer per packet,
  not rate-limited: an answer is never itself answered (rules 2 and 6), so
  two hosts cannot loop, and the link delivers one answer per packet that
  arrived.  A listening host's Listener applies the same rules.
* Frames are accepted only if addressed to this host's MAC and IPv4
  address (and, over UDP, to port 9899) and, once a peer is known, sent by
  the peer's MAC and IPv4 address.  Nothing past the IPv4 header checksum,
  the UDP checksum and the SCTP CRC32c reaches the association; a frame
  failing any of them is dropped and counted (RFC 4960 6.8).
* RTR: the host offers and accepts only the zero-length RDMA Write RTR
  (RFC 6581 9, flag C) by default.  The session layer sends and consumes the
  RTR outside the RDMAP endpoint; a Send or Read RTR would use an MSN of
  queue 0 or 1 that the endpoints never see, a Write RTR uses none.  The
  responder's RDMAP sink therefore starts at DDP-SSN 2 when an RTR follows
  the Accept (Initiate 0, RTR 1) and at 1 otherwise; the initiator's at 1
  (the Accept is 0).
* Protection Domains: `config.pd_id` is the host's; `register_memory`,
  `open_stream` and `accept_session` take another `pd_id`, and a stream
  reaches only the regions of its own PD (RFC 5041 8.2).
* IRD/ORD: an enhanced session configures its RDMAP endpoint with the
  negotiated values (RFC 6581 9); a plain session with the host's own.
* A session request is decided by `session_policy` (default: accept every
  Initiate with the host's resources).  A policy returning None, or no
  policy, reports `SessionRequested` and waits for `accept_session` or
  `reject_session` (RFC 5043 6.2, 6.3).
* Completions: a Write or Send completes when its last segment is handed to
  SCTP (RFC 5041 5.4 Data Source side); a Read when its Read Response is
  placed; an inbound Send when it is delivered.  Every event, completions
  included, waits in `next_events()`.
* Memory: a posted message is segmented and read from host memory only as
  the association's send buffer (`RnicConfig.send_buffer`) has room, which
  the peer's window frees (RFC 4960 6.1); the source buffer must stay as it
  is until the message's completion.  What the host holds of outbound data
  is bounded by the send buffer and the window, not by message sizes.
* `close()` ends every DDP session with a Terminate (RFC 5043 6.2) and sends
  the SCTP SHUTDOWN (RFC 4960 9.2) once every stream is released (RFC 5043
  6.6: both Terminates exchanged and acknowledged), so that the peer can
  still answer the Terminates.  A peer that has not released every stream
  `config.close_timeout` seconds (of the injected `now`) after `close()`
  gets an ABORT (RFC 4960 9.1, User-Initiated Abort cause) and the host
  reports `CloseAborted` with the streams still open; None waits for ever.
  Once SHUTDOWN is under way the association's own T2-shutdown and
  Association.Max.Retrans bound the rest.  `abort()` ends it at once.
* STags are a 24-bit index and an 8-bit key drawn from the host's random
  generator, as hardware RNICs form them; the index starts at 1.
"""

from __future__ import annotations

import ipaddress
import random
from dataclasses import dataclass, replace
from typing import Callable, Protocol, Union

from model.sctp.association import Association, AssociationError, AssociationState, AssociationStatistics
from model.sctp.listener import Listener
from model.sctp.out_of_the_blue import out_of_the_blue_reply
from model.ddp.session import (
    DdpSessions,
    InitiateReceived,
    Message,
    InitiateRefused,
    NegotiationRefused,
    RtrReceived,
    SegmentReceived,
    SessionAccepted,
    SessionPhase,
    SessionStateError,
    SessionTerminated,
    StreamReleased as SessionStreamReleased,
    TerminationCause,
)
from model.ddp.session import SessionRejected as SessionRejectedBySession
from model.errors import ChecksumError, DecodeError, RnicError
from model.net.frames import SCTP_UDP_PORT, Frame, FrameTemplate, UdpHeader, build_frame
from model.ddp.memory import Access, MemoryRegion, MemoryTable, ProtectionDomain, SparseMemory
from model.ddp.negotiation import LocalResources, NegotiatedParameters, Role, RtrType
from model.rdmap.endpoint import (
    Gather,
    RdmapEndpoint,
    ReadCompleted,
    SendReceived,
    WorkCompleted,
    TerminateReceived,
    TerminateSent,
    WriteReceived,
)
from model.rnic.link import Unframed
from model.rnic.events import (
    Aborted,
    CloseAborted,
    Closed,
    Connected,
    DdpUnavailable,
    Failed,
    PathStatus,
    PeerClosing,
    RdmapTerminated,
    ReadCompletion,
    ReceiveCompletion,
    RnicEvent,
    RtrArrived,
    SessionEstablished,
    SessionRefused,
    SessionRejected,
    SessionRequested,
    StreamReleased,
    StreamTerminated,
    WorkCompletion,
    WriteArrived,
)
from model.sctp.packet import (
    ADAPTATION_CODE_POINT_DDP,
    PPID_DDP_SEGMENT,
    PPID_DDP_SESSION_CONTROL,
    InitChunk,
    SctpPacket,
    checksum_ok,
)
from model.sctp.config import DDP_SSN_LENGTH, IPV4_HEADER_LENGTH, AssociationConfig
from model.sctp.events import (
    AssociationAborted,
    AssociationClosed,
    AssociationEstablished,
    AssociationEvent,
    AssociationFailed,
    DataAcknowledged,
    DataReceived,
    DdpProceduresForbidden,
    PathStatusChanged,
    PeerRestarted,
    PeerShutdownStarted,
)

_ESTABLISHED = AssociationState.ESTABLISHED
"""Read at every flush under its name
(an enum member's class attribute is a descriptor call in Python 3.11, a module name a dict lookup)."""
_new_tuple = tuple.__new__
"""`Unframed(packet, length)` as `_new_tuple(Unframed, (packet, length))`: the same object, built without the
NamedTuple's constructor, a Python function."""
UDP_HEADER_LENGTH = 8
ETHERNET_HEADER_LENGTH = 14
DEFAULT_RESOURCES = LocalResources(ird=4, ord=4, peer_to_peer=True, rtr_types=(RtrType.WRITE,))
"""IRD/ORD 4, peer-to-peer model with the zero-length RDMA Write RTR (see the module docstring)."""


# -- exceptions ----------------------------------------------------------------------


class RnicStateError(RnicError):
    """A call the host's current state does not allow."""


class NotConnected(RnicStateError):
    """No established association."""


class DdpForbidden(RnicStateError):
    """RFC 5043 11.1: the association did not agree on DDP, so no DDP or RDMA procedure may run."""


class StreamNotOpen(RnicStateError):
    """No open DDP stream session with an RDMAP endpoint on this stream id."""


# -- configuration and session policy ---------------------------------------------------


@dataclass(frozen=True)
class RnicConfig:
    """One host's addresses and protocol parameters."""

    mac: bytes
    ip: ipaddress.IPv4Address | str
    port: int
    """SCTP port of the host's endpoint."""
    resources: LocalResources = DEFAULT_RESOURCES
    """RFC 6581 9 IRD/ORD and RTR abilities, offered as initiator and used to answer as responder."""
    udp: bool = False
    """Encapsulate SCTP in UDP port 9899 (RFC 6951); the MTU then holds 28 bytes of IPv4 and UDP."""
    ddp: bool = True
    """Announce the DDP adaptation code point (RFC 5043 5.1); False makes a plain SCTP host."""
    streams: int = 8
    path_mtu: int = 1500
    receive_buffer: int = 65536
    heartbeat_interval: float | None = 30.0
    delayed_ack_time: float = 0.2
    pending_limit: int = 16
    """RFC 5043 6.4: Initiates that may wait for the user's decision."""
    pd_id: int = 1
    close_timeout: float | None = 30.0
    """Seconds `close()` waits for the peer to release every DDP stream before it ABORTs; None: no limit."""
    send_buffer: int = 65536
    """Bytes of DDP segments the host hands its association ahead of what the association has sent, like a
    socket's send buffer: posted messages are segmented and read from memory only as this room allows."""
    rto_initial: float = 3.0
    """RTO.Initial, RTO.Min, RTO.Max, Association.Max.Retrans, Path.Max.Retrans and Max.Init.Retransmits: RFC 4960
    15's defaults, for the host's associations (shorter on a test's loopback, so that a dead peer is found in
    seconds, RFC 4960 8.1, 8.2)."""
    rto_min: float = 1.0
    rto_max: float = 60.0
    association_max_retrans: int = 10
    path_max_retrans: int = 5
    max_init_retransmits: int = 8
    engine_sacks: bool = False
    """A host on the engines (`EngineRnic`): the receive engine SACKs the peer's DATA itself (RFC 4960 6.2,
    `hdl/rx/sack_unit.py`) and the host sees no ack record; a software host has no such engine. The driver's
    `engine` and `board` backends turn it on unless told `engine_sacks=False`."""
    engine_transport: bool = False
    """A host on the engines' models (`EngineRnic` over `model.engine.tx.TransmitEngineModel`): the transmit
    engine's transport unit processes the peer's SACKs and runs the windows and T3-rtx (RFC 4960 6.1, 6.2.1,
    6.3, 7.2, 8.1, `model.engine.transport`); the host's association only numbers the chunks. The gateware's
    transport unit is not built yet, so only the `engine` backend offers it."""

    def __post_init__(self) -> None:
        if len(self.mac) != 6:
            raise ValueError("mac must be 6 bytes")
        object.__setattr__(self, "ip", ipaddress.IPv4Address(self.ip))

    @property
    def lower_layer_overhead(self) -> int:
        return IPV4_HEADER_LENGTH + (UDP_HEADER_LENGTH if self.udp else 0)


@dataclass(frozen=True)
class AcceptSession:
    """Session policy answer: accept with this private data and resources (None: the host's)."""

    private_data: bytes = b""
    resources: LocalResources | None = None


@dataclass(frozen=True)
class RejectSession:
    """Session policy answer: reject with this private data (RFC 5043 6.3)."""

    private_data: bytes = b""


SessionDecision = Union[AcceptSession, RejectSession]
SessionPolicy = Callable[[SessionRequested], Union[SessionDecision, None]]


def accept_every_session(request: SessionRequested) -> SessionDecision:
    """The default policy: accept every Initiate with the host's own resources."""
    return AcceptSession()


@dataclass(frozen=True)
class RnicStatistics:
    frames_sent: int
    frames_received: int
    dropped_bad_checksum: int
    """IPv4 header, UDP or SCTP CRC32c checksum failures (RFC 791, RFC 768, RFC 4960 6.8)."""
    dropped_malformed: int
    dropped_misaddressed: int
    association: AssociationStatistics | None


@dataclass(slots=True)
class _Stream:
    role: Role
    resources: LocalResources
    endpoint: RdmapEndpoint | None = None
    negotiated: NegotiatedParameters | None = None
    pd: ProtectionDomain | None = None
    """The stream's Protection Domain (RFC 5041 8.2); None: the host's."""


class Sctp(Protocol):
    """The SCTP a host runs over: what makes its associations (active open) and listeners (passive open) from
    the host's `AssociationConfig`. The model's (`MODEL_SCTP`) by default; another stack behind the same calls
    (usrsctp's, in `sim.usrsctp_host`) makes the host's DDP and RDMAP run over it unchanged."""

    def association(self, config: AssociationConfig) -> Association: ...
    def listener(self, config: AssociationConfig) -> Listener: ...


class _ModelSctp:
    def association(self, config: AssociationConfig) -> Association:
        return Association(config)

    def listener(self, config: AssociationConfig) -> Listener:
        return Listener(config)


MODEL_SCTP: Sctp = _ModelSctp()
"""`model.sctp`'s associations and listeners."""


@dataclass(slots=True)
class _Counters:
    frames_sent: int = 0
    frames_received: int = 0
    dropped_bad_checksum: int = 0
    dropped_malformed: int = 0
    dropped_misaddressed: int = 0


@dataclass(frozen=True)
class _Peer:
    mac: bytes
    ip: ipaddress.IPv4Address


def takes_packets(host: SoftRnic) -> bool:
    """Whether the host takes and gives SCTP packets (`receive_packet`, `packets_to_send`,
    `data_to_send_unframed`) as it takes and gives frames: a `SoftRnic` whatever its SCTP, not a host that
    handles frames its own way (`model.rnic.offload.OffloadRnic`, `model.rnic.engine_host.EngineRnic`)."""
    kind = type(host)
    known = _TAKES_PACKETS.get(kind)
    if known is None:
        known = _TAKES_PACKETS[kind] = all(getattr(kind, name) is getattr(SoftRnic, name) for name in (
            "receive", "data_to_send", "receive_packet", "packets_to_send", "data_to_send_unframed"))
    return known


_TAKES_PACKETS: dict[type, bool] = {}


class SoftRnic:
    """A software RNIC host (see the module docstring)."""

    def __init__(
        self,
        config: RnicConfig,
        memory: SparseMemory,
        rng: random.Random,
        session_policy: SessionPolicy | None = accept_every_session,
        sctp: Sctp = MODEL_SCTP,
    ) -> None:
        self.config = config
        self.memory = memory
        self.rng = rng
        self.session_policy = session_policy
        self.sctp = sctp
        self.pd = ProtectionDomain(config.pd_id)
        self.memory_table = MemoryTable()
        self._hmac_secret = bytes(rng.getrandbits(8) for _ in range(32))
        self._association: Association | None = None
        self._listeners: dict[int, Listener] = {}
        """Listeners by SCTP port."""
        self._peer: _Peer | None = None
        self._sessions = DdpSessions(config.resources, config.pending_limit)
        self._streams: dict[int, _Stream] = {}
        self._requests: dict[int, SessionRequested] = {}
        self._known_streams: set[int] = set()
        self._ddp_enabled = False
        self._closing = False
        self._close_deadline: float | None = None
        self._peer_restarted = False
        self._events: list[RnicEvent] = []
        self._streams_sending: dict[int, None] = {}
        """The streams whose endpoint has a message to send, in the order they got one: what `_flush` visits."""
        self._replies: list[tuple[bytes, _Peer]] = []
        """SCTP packets of the host's own (a listener's or an out-of-the-blue answer) and whom they go to, framed
        as they leave (`data_to_send`), in order, before the association's."""
        self._next_stag_index = 1
        self._ip_identification = 0
        self._peer_template: tuple[_Peer, FrameTemplate] | None = None   # the headers to and from `_peer`
        self._counters = _Counters()
        self._frame_overhead = ETHERNET_HEADER_LENGTH + IPV4_HEADER_LENGTH + (UDP_HEADER_LENGTH if config.udp else 0)
        """What a frame adds to its SCTP packet (`FrameTemplate.frame`: no IPv4 options)."""
        self._segments_straight = type(self)._on_session_events is SoftRnic._on_session_events
        """Whether the next segment in order may go straight to its endpoint (`_next_segment`): not for a host
        that handles the sessions' `SegmentReceived` its own way (`model.rnic.offload.OffloadRnic`)."""
        self.quiet = False
        """True while `data_to_send` (or `packets_to_send`, `data_to_send_unframed`) would send nothing and change
        nothing: set by such a call when it finds so (`_settled`), cleared by every call that may give the host
        something to do (a frame or packet, a timer, a post, a connection's or a session's call). A caller that
        sends for the host (`model.rnic.pair.HostPair.send_due`) need not ask it while set, and its
        `next_timeout` is the one that call found. Only a `SoftRnic` itself over the model's SCTP sets it: other
        hosts (`OffloadRnic`, `EngineRnic`, another SCTP) have entry points of their own and are always asked."""
        self._may_be_quiet = type(self) is SoftRnic and sctp is MODEL_SCTP
        self._hand_off = False   # set with each association (`_new_association`)
        self.quiet_deadline: float | None = None
        """`next_timeout` while `quiet` (kept by the call that set it: a caller may read it instead of asking)."""
        self._pumped = False
        """True from a packet's receipt, which ran the pump (`_flush`, `_maybe_shutdown`), until the next call that
        may give the host something to do (those that clear `quiet`) or `_packets_due`: that pump has nothing to
        do until then, so `_packets_due` does not run it again. Only where `quiet` may be set."""

    # -- connection ------------------------------------------------------------

    def listen(self, port: int | None = None) -> None:
        """Passive open: answer INITs on `port` (default `config.port`; RFC 4960 5.1).  A host may listen on
        several ports; it still has one association at a time, on the port its INIT came to."""
        self.quiet = self._pumped = False
        local_port = self.config.port if port is None else port
        config = replace(self._association_config(peer_port=0), local_port=local_port)
        self._listeners[local_port] = self.sctp.listener(config)

    def connect(self, now: float, peer_mac: bytes, peer_ip: ipaddress.IPv4Address | str, peer_port: int) -> None:
        """Active open: send INIT to the peer (RFC 4960 5.1)."""
        self.quiet = self._pumped = False
        if self._association is not None and not self._association.is_closed:
            raise RnicStateError("the host already has an association; close it first")
        association = self.sctp.association(self._association_config(peer_port))
        self._new_association(association, _Peer(bytes(peer_mac), ipaddress.IPv4Address(peer_ip)))
        association.connect(now)

    def close(self, now: float) -> None:
        """Terminate every DDP session (RFC 5043 6.2), then SHUTDOWN the association (RFC 4960 9.2)."""
        self.quiet = self._pumped = False
        self._closing = True
        association, timeout = self._association, self.config.close_timeout
        if (timeout is not None and self._close_deadline is None and association is not None
                and association.state is AssociationState.ESTABLISHED):
            self._close_deadline = now + timeout
        for stream_id in sorted(self._known_streams):
            phase = self._sessions.phase(stream_id)
            if phase is not None and phase not in (SessionPhase.CLOSING, SessionPhase.AWAITING_INITIATE):
                self._sessions.terminate(stream_id)
            self._streams.pop(stream_id, None)
        self._requests.clear()
        self._flush()
        self._maybe_shutdown(now)

    def abort(self, now: float) -> None:
        """ABORT the association at once (RFC 4960 9.1)."""
        self.quiet = self._pumped = False
        self._close_deadline = None
        if self._association is not None:
            self._association.abort(now)
            self._streams.clear()

    @property
    def connected(self) -> bool:
        return self._association is not None and self._association.state is AssociationState.ESTABLISHED

    @property
    def closed(self) -> bool:
        """True once an association existed and is over (graceful or not)."""
        return self._association is not None and self._association.is_closed

    @property
    def ddp_enabled(self) -> bool:
        return self._ddp_enabled

    @property
    def mulpdu(self) -> int:
        """The largest DDP segment (RFC 5043 9): the association's, or what this host's path MTU gives one."""
        if self._association is not None:
            return self._association.mulpdu
        return self._association_config(peer_port=0).mulpdu

    @property
    def association(self) -> Association | None:
        return self._association

    @property
    def statistics(self) -> RnicStatistics:
        c = self._counters
        return RnicStatistics(
            frames_sent=c.frames_sent,
            frames_received=c.frames_received,
            dropped_bad_checksum=c.dropped_bad_checksum,
            dropped_malformed=c.dropped_malformed,
            dropped_misaddressed=c.dropped_misaddressed,
            association=self._association.statistics if self._association is not None else None,
        )

    # -- DDP stream sessions ---------------------------------------------------

    def open_stream(
        self,
        stream_id: int,
        private_data: bytes = b"",
        enhanced: bool = True,
        resources: LocalResources | None = None,
        pd_id: int | None = None,
    ) -> None:
        """Send an (Enhanced, RFC 6581 7) Initiate on `stream_id` (RFC 5043 6.2).

        `resources` default to the host's, `pd_id` (the stream's Protection Domain, RFC 5041 8.2) to
        `config.pd_id`; `SessionEstablished` or `SessionRejected` follows."""
        self.quiet = self._pumped = False
        self._require_ddp()
        local = resources if resources is not None else self.config.resources
        self._sessions.initiate(stream_id, private_data, local if enhanced else None)
        self._known_streams.add(stream_id)
        self._streams[stream_id] = _Stream(Role.INITIATOR, local, pd=self._protection_domain(pd_id))
        self._flush()

    def accept_session(self, stream_id: int, private_data: bytes = b"", resources: LocalResources | None = None,
                       pd_id: int | None = None) -> None:
        """Accept a `SessionRequested` Initiate (RFC 5043 6.2, RFC 6581 9) into Protection Domain `pd_id`
        (default `config.pd_id`)."""
        self.quiet = self._pumped = False
        request = self._requests.get(stream_id)
        if request is None:
            raise RnicStateError(f"stream {stream_id}: no session request waiting")
        self._accept(request, private_data, resources, pd_id)  # NegotiationRefused leaves the request waiting
        del self._requests[stream_id]
        self._flush()

    def reject_session(self, stream_id: int, private_data: bytes = b"") -> None:
        """Reject a `SessionRequested` Initiate (RFC 5043 6.3)."""
        self.quiet = self._pumped = False
        if self._requests.pop(stream_id, None) is None:
            raise RnicStateError(f"stream {stream_id}: no session request waiting")
        self._sessions.reject(stream_id, private_data)
        self._flush()

    def terminate_stream(self, stream_id: int) -> None:
        """End the stream's session with a Terminate after the segments already posted (RFC 5043 6.2)."""
        self.quiet = self._pumped = False
        self._sessions.terminate(stream_id)
        self._streams.pop(stream_id, None)
        self._flush()

    def stream_available(self, stream_id: int) -> bool:
        """No session on the stream and every chunk of its last one acknowledged: it may be opened (RFC 5043
        6.6)."""
        return self._sessions.stream_available(stream_id)

    def negotiated(self, stream_id: int) -> NegotiatedParameters | None:
        """The RFC 6581 9 parameters in force on the stream's session, if enhanced."""
        stream = self._streams.get(stream_id)
        return stream.negotiated if stream is not None else None

    # -- memory ----------------------------------------------------------------

    def register_memory(
        self, address: int, length: int, access: Access, base_to: int = 0, stream_id: int | None = None,
        pd_id: int | None = None,
    ) -> int:
        """Register host memory [address, address+length) as Tagged Offsets from `base_to`; return its STag.

        `stream_id` binds the region to one DDP stream (RFC 5041 8.2); None lets every stream of the PD use it.
        `pd_id`: the region's Protection Domain (default `config.pd_id`): only the streams of that PD reach it
        (RFC 5041 8.2)."""
        stag = (self._next_stag_index << 8) | self.rng.randrange(256)
        self._next_stag_index += 1
        self.memory_table.register(MemoryRegion(stag, self._protection_domain(pd_id), base_to, length, access,
                                                address, stream_id))
        return stag

    def _protection_domain(self, pd_id: int | None) -> ProtectionDomain:
        return self.pd if pd_id is None else ProtectionDomain(pd_id)

    def deregister_memory(self, stag: int) -> None:
        self.memory_table.deregister(stag)

    # -- work requests (RFC 5040 5) -----------------------------------------------

    def post_recv(self, stream_id: int, address: int, length: int) -> int:
        """Post a receive buffer for inbound Sends on the stream; returns the MSN it will take."""
        self.quiet = self._pumped = False
        return self._endpoint(stream_id).post_receive(address, length)

    def post_send(
        self, stream_id: int, address: Gather, length: int, solicited: bool = False, invalidate_stag: int | None = None
    ) -> int:
        """Send, Send with SE, Send with Invalidate, Send with SE and Invalidate (RFC 5040 5.3); returns wr_id.
        `address`: one host address or a gather list of (address, length) pieces."""
        self.quiet = self._pumped = False
        wr_id = self._endpoint(stream_id).post_send(address, length, solicited=solicited,
                                                    invalidate_stag=invalidate_stag)
        self._flush()
        return wr_id

    def post_write(self, stream_id: int, remote_stag: int, remote_to: int, address: Gather, length: int) -> int:
        """RDMA Write `length` bytes at host `address` (or a gather list) to the peer's STag/TO (RFC 5040 5.1);
        returns wr_id."""
        self.quiet = self._pumped = False
        wr_id = self._endpoint(stream_id).post_write(remote_stag, remote_to, address, length)
        self._flush()
        return wr_id

    def post_read(
        self, stream_id: int, local_stag: int, local_to: int, remote_stag: int, remote_to: int, length: int
    ) -> int:
        """RDMA Read the peer's STag/TO into our STag/TO (RFC 5040 5.2); raises ReadLimitExceeded past ORD."""
        self.quiet = self._pumped = False
        wr_id = self._endpoint(stream_id).post_read(local_stag, local_to, remote_stag, remote_to, length)
        self._flush()
        return wr_id

    # -- the sans-I/O surface ----------------------------------------------------

    def receive(self, frame: bytes, now: float) -> None:
        """Process one Ethernet frame off the wire; its events wait in `next_events()`."""
        self.quiet = self._pumped = False
        self._counters.frames_received += 1
        association, peer = self._association, self._peer
        if association is not None and peer is not None and not association.is_closed:
            packet = self._template(peer).plain_sctp(frame)   # the association's frames, headers unparsed
            if packet is not None:
                if not checksum_ok(packet):
                    self._counters.dropped_bad_checksum += 1
                    return
                self._from_peer(association, packet, peer, now)
                self._flush()
                if self._closing:
                    self._maybe_shutdown(now)
                self._pumped = self._may_be_quiet
                return
        try:
            decoded = Frame.decode(frame)
        except ChecksumError:
            self._counters.dropped_bad_checksum += 1
            return
        except DecodeError:
            self._counters.dropped_malformed += 1
            return
        if not self._addressed_to_us(decoded):
            self._counters.dropped_misaddressed += 1
            return
        if not checksum_ok(decoded.sctp):
            self._counters.dropped_bad_checksum += 1
            return
        self._route(decoded, now)
        self._flush()
        self._maybe_shutdown(now)

    def data_to_send(self, now: float) -> list[bytes]:
        """Every Ethernet frame due now; call after any other call."""
        replies, packets, peer = self._packets_due(now)
        frames = [self._frame(packet, to) for packet, to in replies] if replies else []
        if packets:
            frame = self._frame
            frames += [frame(packet, peer) for packet in packets]
        return frames

    def _packets_due(self, now: float) -> tuple[list[tuple[bytes, _Peer]], list[bytes], _Peer | None]:
        """Every SCTP packet due now: the host's own answers and whom each goes to, then the association's
        packets, for its peer."""
        if self._pumped:   # the packet just received ran the pump, and nothing came since
            self._pumped = False
        else:
            self._flush()
            if self._closing:
                self._maybe_shutdown(now)
        replies, self._replies = self._replies, []
        association, peer = self._association, self._peer
        packets = association.data_to_send(now) if association is not None and peer is not None else []
        self._counters.frames_sent += len(replies) + len(packets)
        if self._may_be_quiet and self._settled():
            self.quiet_deadline = self.next_timeout()
            self.quiet = True
        return replies, packets, peer

    def _settled(self) -> bool:
        """Whether another call of `_packets_due` now would find nothing and change nothing: no answer waits, the
        pump (`_flush`) has nothing to hand the association (no stream with a message to send, or no room in the
        send buffer) and the association sends nothing (`Association.sends_nothing`). `_maybe_shutdown` does
        nothing twice: what it waits for comes with the peer's packets."""
        association = self._association
        return (not self._replies and not (self._streams_sending and self._send_room() > 0)
                and (association is None or self._peer is None or association.sends_nothing()))

    # The same surface one layer down, for a host whose packets travel in a transport's datagrams, never in
    # frames (`driver.backends.network`): the IPv4 (and UDP) headers are the operating system's, and so are
    # their checks; the host sees the sender of each packet as a MAC and an IPv4 address.

    def receive_packet(self, packet: bytes, source_mac: bytes, source_ip: ipaddress.IPv4Address, now: float) -> None:
        """Process one SCTP packet from (`source_mac`, `source_ip`), addressed to this host: what `receive` does
        with it in a frame to this host (over UDP, to port 9899), without building and parsing that frame for
        the association's own packets."""
        self.quiet = self._pumped = False
        association, peer = self._association, self._peer
        if (association is None or peer is None or association.is_closed or source_mac != peer.mac
                or (source_ip is not peer.ip and source_ip != peer.ip)):
            config = self.config   # a handshake, a stray packet: the frame's path, every rule of `receive`
            self.receive(build_frame(packet, source_mac, config.mac, source_ip, config.ip, udp=config.udp,
                                     udp_checksum=False), now)
            return
        if source_ip is not peer.ip:   # the peer's address, as the caller holds it: the next packet's compares
            self._peer = peer = _Peer(peer.mac, source_ip)   # by identity (IPv4Address's __eq__ is Python's)
        self._counters.frames_received += 1
        if not checksum_ok(packet):
            self._counters.dropped_bad_checksum += 1
            return
        self._from_peer(association, packet, peer, now)
        self._flush()
        if self._closing:
            self._maybe_shutdown(now)
        self._pumped = self._may_be_quiet

    def packets_to_send(self, now: float) -> list[tuple[bytes, bytes]]:
        """`data_to_send` unframed: every SCTP packet due now, as (destination MAC, packet)."""
        replies, packets, peer = self._packets_due(now)
        due = [(to.mac, packet) for packet, to in replies] if replies else []
        if packets:
            assert peer is not None
            mac = peer.mac
            due += [(mac, packet) for packet in packets]
        return due

    def data_to_send_unframed(self, now: float, peer_mac: bytes, peer_ip: ipaddress.IPv4Address
                              ) -> list[bytes | Unframed]:
        """`data_to_send` for a link whose far end is the host (`peer_mac`, `peer_ip`) and takes packets
        (`receive_packet`), where nobody looks at the frames (`model.rnic.pair.HostPair`): a packet to that host
        goes as an `Unframed` (the frame's length with it, for the wire), anything else as its frame. The IPv4
        Identification runs on as if each had been framed."""
        replies, packets, peer = self._packets_due(now)
        due: list[bytes | Unframed] = []
        for packet, to in replies:
            due.append(self._unframed(packet) if to.mac == peer_mac and to.ip == peer_ip
                       else self._frame(packet, to))
        if packets:
            assert peer is not None
            if peer.mac == peer_mac and (peer.ip is peer_ip or peer.ip == peer_ip):
                # `_unframed` for each, the IPv4 Identification moved on at once
                overhead = self._frame_overhead
                self._ip_identification = (self._ip_identification + len(packets)) & 0xFFFF
                due += [_new_tuple(Unframed, (packet, len(packet) + overhead)) for packet in packets]   # in C
            else:
                frame = self._frame
                due += [frame(packet, peer) for packet in packets]
        return due

    def _unframed(self, packet: bytes) -> Unframed:
        self._ip_identification = (self._ip_identification + 1) & 0xFFFF
        return Unframed(packet, len(packet) + self._frame_overhead)

    def next_timeout(self) -> float | None:
        """The earliest of the association's timers and the close deadline (asked after every frame): while
        `quiet`, as the call that found the host so saw it, since only the calls that clear `quiet` move them."""
        if self.quiet:
            return self.quiet_deadline
        deadline = self._close_deadline
        if self._association is not None:
            timer = self._association.next_timeout()
            if timer is not None and (deadline is None or timer < deadline):
                deadline = timer
        return deadline

    def handle_timeout(self, now: float) -> None:
        """Fire every timer due at `now`; events wait in `next_events()`."""
        self.quiet = self._pumped = False
        if self._association is not None:
            self._association.handle_timeout(now)
            self._drain_association(now)
        self._flush()
        self._maybe_shutdown(now)
        if self._close_deadline is not None and now >= self._close_deadline:
            self._close_timed_out(now)

    def next_events(self) -> list[RnicEvent]:
        """Every event queued since the last call (completions of posts included), oldest first."""
        events, self._events = self._events, []
        return events

    # -- internals: framing and routing ---------------------------------------------

    def _association_config(self, peer_port: int) -> AssociationConfig:
        config = self.config
        return AssociationConfig(
            local_port=config.port,
            peer_port=peer_port,
            rng=self.rng,
            hmac_secret=self._hmac_secret,
            streams=config.streams,
            path_mtu=config.path_mtu,
            lower_layer_overhead=config.lower_layer_overhead,
            receive_buffer=config.receive_buffer,
            heartbeat_interval=config.heartbeat_interval,
            delayed_ack_time=config.delayed_ack_time,
            rto_initial=config.rto_initial,
            rto_min=config.rto_min,
            rto_max=config.rto_max,
            association_max_retrans=config.association_max_retrans,
            path_max_retrans=config.path_max_retrans,
            max_init_retransmits=config.max_init_retransmits,
            adaptation_code_point=ADAPTATION_CODE_POINT_DDP if config.ddp else None,
        )

    def _new_association(self, association: Association, peer: _Peer) -> None:
        self._association = association
        self._receive_checked = (association.receive_checked if isinstance(association, Association)
                                 else association.receive)
        """Hands the association a packet whose CRC32c the host verified: the model's association then skips its
        own check (RFC 4960 6.8: once per packet), another SCTP (`Sctp`) checks as it does."""
        self._hand_off = self._may_be_quiet and isinstance(association, Association)
        """A `SoftRnic` itself over the model's SCTP takes a packet's DATA handed over (`_drain_association`)."""
        if self._hand_off:
            association.data_hand_off = []
        self._peer = peer
        self._sessions = DdpSessions(self.config.resources, self.config.pending_limit)
        self._streams.clear()
        self._requests.clear()
        self._known_streams.clear()
        self._ddp_enabled = False
        self._closing = False
        self._close_deadline = None

    def _frame(self, packet: bytes, peer: _Peer) -> bytes:
        self._ip_identification = (self._ip_identification + 1) & 0xFFFF
        return self._template(peer).frame(packet, self._ip_identification)

    def _template(self, peer: _Peer) -> FrameTemplate:
        """The headers between this end and `peer` (RFC 6951's port 9899 both ways with UDP); kept for the
        association's peer only, so senders of stray packets cost nothing lasting."""
        kept = self._peer_template
        if kept is not None and (kept[0] is peer or kept[0] == peer):   # the same object, every frame
            return kept[1]
        config = self.config
        template = FrameTemplate(config.mac, peer.mac, config.ip, peer.ip, udp=UdpHeader() if config.udp else None)
        if peer == self._peer:
            self._peer_template = (peer, template)
        return template

    def _addressed_to_us(self, frame: Frame) -> bool:
        config = self.config
        if frame.eth.dst != config.mac or frame.ip.dst != config.ip:
            return False
        if (frame.udp is not None) != config.udp:
            return False
        if frame.udp is not None and frame.udp.dst_port != SCTP_UDP_PORT:
            return False
        association, peer = self._association, self._peer
        if association is not None and not association.is_closed and peer is not None:
            return frame.eth.src == peer.mac and frame.ip.src == peer.ip
        return True

    def _route(self, frame: Frame, now: float) -> None:
        packet = frame.sctp
        association = self._association
        if association is not None and not association.is_closed:
            # The peer's packets, whatever their tag: the association checks it (RFC 4960 8.5, 5.2).
            self._from_peer(association, packet, _Peer(frame.eth.src, frame.ip.src), now)
            return
        listener = self._listeners.get(int.from_bytes(packet[2:4], "big"))  # the destination port
        if listener is None:
            self._out_of_the_blue(frame)
            return
        self._answer(listener, packet, _Peer(frame.eth.src, frame.ip.src), now)

    def _from_peer(self, association: Association, packet: bytes, sender: _Peer, now: float) -> None:
        """A packet for the open association, its CRC32c verified: the association takes it, and a restarted
        peer's COOKIE ECHO (5.2.4 A) makes the new association. Every path of a packet to the association comes
        here (`receive`'s plain frames included: the restart is not the frame's form to decide)."""
        self._receive_checked(packet, now)
        self._drain_association(now)
        if self._peer_restarted:
            self._peer_restarted = False
            self._restarted_association(packet, association.config.local_port, sender, now)

    def _answer(self, listener: Listener, packet: bytes, sender: _Peer, now: float) -> None:
        """A listener's answer to the packet, and the association its COOKIE ECHO makes (RFC 4960 5.1)."""
        listener.receive(packet, now)
        for reply in listener.data_to_send(now):
            self._replies.append((reply, sender))
        for accepted in listener.next_events():
            self._new_association(accepted.association, sender)
            self._drain_association(now)

    def _restarted_association(self, packet: bytes, local_port: int, sender: _Peer, now: float) -> None:
        """RFC 4960 5.2.4 A: the restarted peer's COOKIE ECHO (signed by the old association with the host's
        key) makes the new association, as a listener on the old one's port would; the host takes it whether
        or not it listens, since its peer is the same."""
        config = replace(self._association_config(peer_port=0), local_port=local_port)
        self._answer(self._listeners.get(local_port) or self.sctp.listener(config), packet, sender, now)

    def _out_of_the_blue(self, frame: Frame) -> None:
        """RFC 4960 8.4 without a Listener: see `out_of_the_blue_reply`."""
        source = frame.ip.src
        if source.is_multicast or source.is_unspecified or source == ipaddress.IPv4Address("255.255.255.255"):
            return  # rule 1: to or from a non-unicast address
        try:
            packet = SctpPacket.decode(frame.sctp)
        except DecodeError:
            self._counters.dropped_malformed += 1
            return
        if packet.dst_port != self.config.port and not isinstance(packet.chunks[0], InitChunk):
            return  # no endpoint of ours on that port; an INIT to any port is refused (rule 3)
        reply = out_of_the_blue_reply(packet)
        if reply is not None:
            self._replies.append((reply.encode(), _Peer(frame.eth.src, source)))

    # -- internals: association events ----------------------------------------------

    def _drain_association(self, now: float) -> None:
        association = self._association
        assert association is not None
        events = association.next_events()
        delivered = association.data_hand_off if self._hand_off else None
        if delivered:   # a packet's user data, handed over without events: before the events (none came with it)
            association.data_hand_off = []
            on_data = self._on_data
            for stream_id, ppid, payload in delivered:
                on_data(stream_id, ppid, payload)
        if events:   # most packets bring none (DATA handed over, a SACK without news)
            self._on_association_events(events, now)

    def _drain_sessions(self) -> None:
        events = self._sessions.next_events()
        if events:   # most calls (after a SACK's acknowledgement) find none
            self._on_session_events(events)

    def _on_association_events(self, events: list[AssociationEvent], now: float) -> None:
        for event in events:
            if isinstance(event, DataReceived):
                self._on_data(event.stream_id, event.ppid, event.payload)
            elif isinstance(event, DataAcknowledged):
                self._sessions.acknowledged(event.stream_id, event.count)
                self._drain_sessions()
            elif isinstance(event, AssociationEstablished):
                self._ddp_enabled = event.ddp_enabled
                assert self._peer is not None and self._association is not None
                self._events.append(Connected(
                    self._peer.mac, self._peer.ip, self._association.config.peer_port,
                    event.peer_adaptation_code_point, event.ddp_enabled, event.streams, event.mulpdu,
                ))
            elif isinstance(event, DdpProceduresForbidden):
                self._ddp_enabled = False
                self._events.append(DdpUnavailable(event.peer_adaptation_code_point, event.reason))
            elif isinstance(event, PeerShutdownStarted):
                self._events.append(PeerClosing())
            elif isinstance(event, AssociationClosed):
                self._association_over()
                self._events.append(Closed())
            elif isinstance(event, AssociationAborted):
                self._association_over()
                self._events.append(Aborted(event.causes))
            elif isinstance(event, PeerRestarted):
                self._association_over()
                self._peer_restarted = True   # `_route` hands the COOKIE ECHO to a new association
                self._events.append(Aborted((), peer_restarted=True))
            elif isinstance(event, AssociationFailed):
                self._association_over()
                self._events.append(Failed(event.reason, event.state, event.limit, event.limit_value))
            elif isinstance(event, PathStatusChanged):
                self._events.append(PathStatus(event.reachable))

    def _on_data(self, stream_id: int, ppid: int, payload: bytes) -> None:
        """A DATA chunk's user data (`DataReceived`, or handed over by the association: `data_hand_off`): a DDP
        Segment chunk (RFC 5043 5.2.2) or session control message (5.2.1) to the sessions; anything else is
        dropped."""
        if self._ddp_enabled and ppid in (PPID_DDP_SEGMENT, PPID_DDP_SESSION_CONTROL):
            if ppid == PPID_DDP_SEGMENT and self._segments_straight and self._next_segment(stream_id, payload):
                return
            try:
                self._sessions.receive(Message(stream_id, ppid, payload))
            except DecodeError:
                return  # not a DDP Segment Chunk (RFC 5043 5.2.2): nothing to place
            self._drain_sessions()

    def _association_over(self) -> None:
        self._streams.clear()
        self._close_deadline = None

    # -- internals: session events --------------------------------------------------

    def _on_session_events(self, events: list) -> None:
        for event in events:
            stream_id = event.stream_id
            self._known_streams.add(stream_id)
            if isinstance(event, SegmentReceived):
                stream = self._streams.get(stream_id)
                if stream is not None and stream.endpoint is not None:
                    stream.endpoint.receive(event.segment, event.ddp_ssn)
                    self._on_rdmap_events(stream_id, stream.endpoint.next_events())
            elif isinstance(event, InitiateReceived):
                self._on_initiate(event)
            elif isinstance(event, SessionAccepted):
                self._on_accepted(event)
            elif isinstance(event, SessionRejectedBySession):
                self._streams.pop(stream_id, None)
                self._events.append(SessionRejected(stream_id, event.private_data, event.enhanced, by_user=True))
            elif isinstance(event, InitiateRefused):
                self._events.append(SessionRefused(stream_id, event.reason, event.private_data, event.error))
            elif isinstance(event, RtrReceived):
                self._events.append(RtrArrived(stream_id, event.rtr))
            elif isinstance(event, SessionTerminated):
                stream = self._streams.pop(stream_id, None)
                self._requests.pop(stream_id, None)
                if event.cause is TerminationCause.PEER_NON_ULP_REJECT and stream is not None:
                    self._events.append(SessionRejected(stream_id, b"", None, by_user=False))
                else:
                    self._events.append(StreamTerminated(stream_id, event.cause, event.error))
            elif isinstance(event, SessionStreamReleased):
                self._events.append(StreamReleased(stream_id))

    def _next_segment(self, stream_id: int, payload: bytes) -> bool:
        """A DDP Segment chunk (RFC 5043 5.2.2) that is the next in DDP-SSN order on a stream with an endpoint
        (`DdpSessions.receive_next_segment`): straight to the endpoint, as `_on_session_events` hands on the
        `SegmentReceived` the sessions would report, without the event. False, with nothing done, for any other
        chunk."""
        stream = self._streams.get(stream_id)
        endpoint = stream.endpoint if stream is not None else None
        if endpoint is None:
            return False
        ssn = self._sessions.receive_next_segment(stream_id, payload)
        if ssn is None:
            return False
        self._known_streams.add(stream_id)
        if not endpoint.receive(memoryview(payload)[2:], ssn):   # True: placed, nothing to report
            events = endpoint.next_events()
            if events:
                self._on_rdmap_events(stream_id, events)
        return True

    def _on_initiate(self, event: InitiateReceived) -> None:
        request = SessionRequested(event.stream_id, event.private_data, event.enhanced, event.proposal)
        if self._closing:
            self._sessions.terminate(event.stream_id)  # RFC 5043 6.4: refused, the host is closing
            return
        decision = self.session_policy(request) if self.session_policy is not None else None
        if decision is None:
            self._requests[event.stream_id] = request
            self._events.append(request)
        elif isinstance(decision, RejectSession):
            self._sessions.reject(event.stream_id, decision.private_data)
        else:
            try:
                self._accept(request, decision.private_data, decision.resources)
            except NegotiationRefused:
                self._sessions.reject(event.stream_id)

    def _accept(self, request: SessionRequested, private_data: bytes, resources: LocalResources | None,
                pd_id: int | None = None) -> None:
        """Accept at the session layer, then build the responder's RDMAP endpoint before any segment."""
        stream_id = request.stream_id
        local = resources if resources is not None else self.config.resources
        self._sessions.accept(stream_id, private_data, local)
        negotiated = self._sessions.negotiated(stream_id)
        rtr_follows = negotiated is not None and negotiated.peer_to_peer
        stream = _Stream(Role.RESPONDER, local, negotiated=negotiated, pd=self._protection_domain(pd_id))
        stream.endpoint = self._attach(stream_id, self._make_endpoint(
            stream_id, negotiated, local, first_sequence=2 if rtr_follows else 1, pd=stream.pd))
        self._streams[stream_id] = stream
        self._events.append(SessionEstablished(
            stream_id, Role.RESPONDER, request.private_data, stream.endpoint.ird, stream.endpoint.ord,
            rtr_follows, None, negotiated,
        ))
        self._drain_sessions()  # segments held until the accept (RFC 5043 6.2)

    def _on_accepted(self, event: SessionAccepted) -> None:
        stream = self._streams.get(event.stream_id)
        if stream is None:
            return  # terminated by the user before the Accept arrived
        negotiated = event.negotiated
        stream.negotiated = negotiated
        stream.endpoint = self._attach(event.stream_id, self._make_endpoint(
            event.stream_id, negotiated, stream.resources, first_sequence=1, pd=stream.pd))
        self._events.append(SessionEstablished(
            event.stream_id, Role.INITIATOR, event.private_data, stream.endpoint.ird, stream.endpoint.ord,
            negotiated.peer_to_peer if negotiated is not None else False,
            negotiated.rtr if negotiated is not None else None, negotiated,
        ))

    def _attach(self, stream_id: int, endpoint: RdmapEndpoint) -> RdmapEndpoint:
        """The stream's endpoint tells `_streams_sending` of each message it queues."""
        endpoint.on_outbound = self._mark_sending
        if endpoint.has_segments_to_send:
            self._mark_sending(stream_id)
        return endpoint

    def _mark_sending(self, stream_id: int) -> None:
        self._streams_sending.setdefault(stream_id, None)

    def _make_endpoint(
        self, stream_id: int, negotiated: NegotiatedParameters | None, local: LocalResources, first_sequence: int,
        pd: ProtectionDomain | None = None,
    ) -> RdmapEndpoint:
        ird, ord = (negotiated.ird, negotiated.ord) if negotiated is not None else (local.ird, local.ord)
        assert self._association is not None
        return RdmapEndpoint(
            pd=pd if pd is not None else self.pd,
            memory_table=self.memory_table,
            host_memory=self.memory,
            stream_id=stream_id,
            mulpdu=self._association.mulpdu,
            ird=ird,
            ord=ord,
            first_sequence=first_sequence,
        )

    def _on_rdmap_events(self, stream_id: int, events: list) -> None:
        for event in events:
            if isinstance(event, WorkCompleted):
                self._events.append(WorkCompletion(stream_id, event.wr_id, event.opcode, event.length))
            elif isinstance(event, SendReceived):
                self._events.append(ReceiveCompletion(stream_id, event.opcode, event.address, event.length,
                                                      event.solicited, event.invalidated_stag))
            elif isinstance(event, ReadCompleted):
                self._events.append(ReadCompletion(stream_id, event.wr_id, event.length))
            elif isinstance(event, WriteReceived):
                self._events.append(WriteArrived(stream_id, event.stag, event.length))
            elif isinstance(event, TerminateSent):
                self._events.append(RdmapTerminated(stream_id, event.terminate, sent=True))
            elif isinstance(event, TerminateReceived):
                self._events.append(RdmapTerminated(stream_id, event.terminate, sent=False))

    # -- internals: the transmit pump -----------------------------------------------

    def _flush(self) -> None:
        """RDMAP segments -> DDP sessions -> SCTP DATA chunks, as many as the send buffer takes; local
        completions -> events. Only the streams with a message to send are visited (`_streams_sending`), none
        while the send buffer is full: an endpoint queues events only as it hands segments over, or as the host
        feeds it inbound segments, whose events the host takes at once."""
        for stream_id in list(self._streams_sending) if self._streams_sending and self._send_room() > 0 else ():
            endpoint = self._sending_endpoint(stream_id)
            if endpoint is None:
                continue
            while endpoint.has_segments_to_send and (wanted := self._segments_wanted(stream_id)):
                segments = endpoint.data_to_send(wanted)
                if not segments:
                    break
                try:
                    self._sessions.send_segments(stream_id, segments)
                except SessionStateError:
                    break  # the session ended under the endpoint; nothing more of it is sent
                self._send_session_messages()
            self._visited(stream_id, endpoint)
        if self._sessions.outbox:   # most flushes, after a packet received, have nothing for the association
            self._send_session_messages()

    def _sending_endpoint(self, stream_id: int) -> RdmapEndpoint | None:
        """The endpoint of a stream in `_streams_sending`; a stream that has none (released) leaves it."""
        stream = self._streams.get(stream_id)
        if stream is None or stream.endpoint is None:
            del self._streams_sending[stream_id]
            return None
        return stream.endpoint

    def _visited(self, stream_id: int, endpoint: RdmapEndpoint) -> None:
        """After a flush's turn at the stream: its local completions to events; it stays in `_streams_sending`
        while it still has something to send."""
        events = endpoint.next_events()
        if events:
            self._on_rdmap_events(stream_id, events)
        if not endpoint.has_segments_to_send:
            del self._streams_sending[stream_id]

    def _send_room(self) -> int:
        """Bytes the association's send buffer still takes (`RnicConfig.send_buffer`); 0 while it takes no new
        data (not established, RFC 4960 9.2)."""
        association = self._association
        if association is None or association.state is not _ESTABLISHED:
            return 0
        return self.config.send_buffer - association.queued_bytes

    def _segments_wanted(self, stream_id: int) -> int:
        """How many segments the stream's endpoint may hand over now: enough to fill the association's send
        buffer (`RnicConfig.send_buffer`), none while the session still holds some (not open yet, RFC 5043
        6.2, 6.6) or while the association takes no new data (RFC 4960 9.2).  So a message is read from
        memory as the window lets it go, and memory is bounded by the send buffer, not by message sizes."""
        room = self._send_room()
        if room <= 0 or self._sessions.queued(stream_id):   # a full buffer first: most calls find it full
            return 0
        assert self._association is not None
        return -(-room // (self._association.mulpdu + DDP_SSN_LENGTH))

    def _send_session_messages(self) -> None:
        messages = self._sessions.data_to_send()
        if not messages:
            return
        association = self._association
        if association is None:
            raise NotConnected("DDP messages to send without an association")
        try:
            if isinstance(association, Association):
                association.send_messages(messages)   # the same, the state table asked once
                return
            for stream_id, ppid, payload in messages:
                association.send(stream_id, ppid, payload)  # U=1 (RFC 5043 10)
        except AssociationError:
            return  # the association is closing or closed: nothing more can go out

    def _maybe_shutdown(self, now: float) -> None:
        """With `close()` called: SHUTDOWN once every DDP stream is released (RFC 5043 6.6). The per-packet
        paths call it only while `_closing`."""
        association = self._association
        if not self._closing or association is None or association.state is not AssociationState.ESTABLISHED:
            return
        if all(self._sessions.stream_available(stream_id) for stream_id in self._known_streams):
            association.shutdown(now)
            self._close_deadline = None  # T2-shutdown and Association.Max.Retrans bound the rest (RFC 4960 9.2)

    def _close_timed_out(self, now: float) -> None:
        """`close_timeout` passed with streams unreleased: ABORT (RFC 4960 9.1) and say why."""
        self._close_deadline = None
        association = self._association
        if association is None or association.is_closed:
            return
        if association.state is not AssociationState.ESTABLISHED:
            return  # SHUTDOWN already under way
        waiting = tuple(sorted(s for s in self._known_streams if not self._sessions.stream_available(s)))
        timeout = self.config.close_timeout
        reason = (f"close(): DDP streams {list(waiting)} not released by the peer within {timeout:g} s "
                  "(RFC 5043 6.2, 6.6); association aborted (RFC 4960 9.1)")
        association.abort(now, reason)
        self._streams.clear()
        self._events.append(CloseAborted(reason, waiting, timeout if timeout is not None else 0.0))

    def _require_ddp(self) -> None:
        if not self.connected:
            raise NotConnected("no established association")
        if not self._ddp_enabled:
            raise DdpForbidden("RFC 5043 11.1: the peer did not indicate DDP; DDP procedures are not allowed")

    def _endpoint(self, stream_id: int) -> RdmapEndpoint:
        stream = self._streams.get(stream_id)
        if stream is None or stream.endpoint is None:
            raise StreamNotOpen(f"stream {stream_id} has no open DDP session")
        return stream.endpoint

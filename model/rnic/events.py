"""Events a `model.rnic.host.SoftRnic` reports to its user.

Every event is a frozen dataclass deriving from `RnicEvent`.  They fall in
three groups, in the order a connection sees them:

* connection: `Connected`, `DdpUnavailable` (RFC 5043 11.1), `PathStatus`,
  `PeerClosing`, `Closed`, `Aborted`, `Failed`, `CloseAborted`;
* DDP stream sessions (RFC 5043 6, RFC 6581 7-9): `SessionRequested`,
  `SessionRefused`, `SessionEstablished`, `SessionRejected`, `RtrArrived`,
  `StreamTerminated`, `StreamReleased`;
* completions, verbs-style (RFC 5040 5): `WorkCompletion` (RDMA Write or a
  Send variant handed to SCTP), `ReadCompletion`, `ReceiveCompletion` (an
  inbound Send variant), `WriteArrived` (an inbound RDMA Write, for
  observability: RFC 5040 gives the Data Sink no completion for it) and
  `RdmapTerminated` (a Terminate sent or received: the stream is in error).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from model.ddp.sctp_adaptation import EnhancedData
from model.ddp.session import RefusalReason, TerminationCause
from model.errors import LlpError
from model.ddp.negotiation import NegotiatedParameters, Role, RtrType
from model.rdmap.messages import Opcode, Terminate
from model.sctp.events import RetransmissionLimit
from model.sctp.packet import ErrorCause
from model.sctp.state import AssociationState


class RnicEvent:
    """Base of every SoftRnic event."""


# -- connection --------------------------------------------------------------------


@dataclass(frozen=True)
class Connected(RnicEvent):
    """The SCTP association is up (RFC 4960 10.2 A).

    `ddp_enabled` is the RFC 5043 11.1 verdict: both sides indicated the DDP
    adaptation code point.  `streams` DDP streams are usable (RFC 5043 8);
    `mulpdu` is the largest DDP segment (RFC 5043 9)."""

    peer_mac: bytes
    peer_ip: ipaddress.IPv4Address
    peer_port: int
    peer_adaptation_code_point: int | None
    ddp_enabled: bool
    streams: int
    mulpdu: int


@dataclass(frozen=True)
class DdpUnavailable(RnicEvent):
    """RFC 5043 11.1: the peer did not indicate DDP; no DDP or RDMA procedure will be used."""

    peer_adaptation_code_point: int | None
    reason: str


@dataclass(frozen=True)
class PeerClosing(RnicEvent):
    """The peer sent SHUTDOWN (RFC 4960 9.2): nothing new can be sent."""


@dataclass(frozen=True)
class Closed(RnicEvent):
    """Graceful close complete (SHUTDOWN COMPLETE, RFC 4960 10.2 E)."""


@dataclass(frozen=True)
class Aborted(RnicEvent):
    """The peer aborted the association (RFC 4960 9.1), or restarted (`peer_restarted`, RFC 4960 5.2.4 A: as
    if it had aborted it; a `Connected` for the new association follows)."""

    causes: tuple[ErrorCause, ...]
    peer_restarted: bool = False


@dataclass(frozen=True)
class PathStatus(RnicEvent):
    """The peer's address became unreachable, its error count past Path.Max.Retrans, or reachable again
    (RFC 4960 8.2).  The association goes on until Association.Max.Retrans."""

    reachable: bool


@dataclass(frozen=True)
class Failed(RnicEvent):
    """The association gave up (RFC 4960 10.2 E COMMUNICATION LOST): a retransmission limit ran out
    (`limit`: Max.Init.Retransmits, 5.1 C; Association.Max.Retrans, 8.1) or the peer broke the protocol."""

    reason: str
    state: AssociationState | None = None
    """The association state it gave up in (RFC 4960 4)."""
    limit: RetransmissionLimit | None = None
    limit_value: int | None = None
    """With `limit`: its configured value, the retransmissions made."""


@dataclass(frozen=True)
class CloseAborted(RnicEvent):
    """`close()` gave up: the peer did not release every DDP stream (RFC 5043 6.2, 6.6: answer our
    Terminate) within `RnicConfig.close_timeout` seconds, so this host ABORTed the association
    (RFC 4960 9.1, User-Initiated Abort cause carrying `reason`).  The association is closed."""

    reason: str
    streams: tuple[int, ...]
    """The DDP streams still unreleased at the deadline."""
    timeout: float


# -- DDP stream sessions -----------------------------------------------------------


@dataclass(frozen=True)
class SessionRequested(RnicEvent):
    """An Initiate arrived and waits for `SoftRnic.accept_session` or `reject_session` (RFC 5043 6.2, 6.3).

    Only reported when the session policy leaves the decision to the user.
    `proposal` is what accepting with the host's own resources negotiates (RFC 6581 9)."""

    stream_id: int
    private_data: bytes
    enhanced: EnhancedData | None
    proposal: NegotiatedParameters | None


@dataclass(frozen=True)
class SessionRefused(RnicEvent):
    """An Initiate the provider answered itself: too many pending (RFC 5043 6.4) or
    no matching RTR option / insufficient IRD (RFC 6581 7, 9)."""

    stream_id: int
    reason: RefusalReason
    private_data: bytes
    error: LlpError | None


@dataclass(frozen=True)
class SessionEstablished(RnicEvent):
    """A DDP stream session is open and its RDMAP stream accepts work.

    `role`: INITIATOR (this side sent the Initiate) or RESPONDER.  `ird` and
    `ord` are the values the stream's RDMAP endpoint enforces: negotiated for
    an enhanced session (RFC 6581 9), the host's own otherwise.  `rtr`: the
    RTR this initiator sends first (RFC 6581 9); at a responder it stays None
    and `RtrArrived` follows when the peer-to-peer model is in use.
    `peer_private_data`: the peer's Accept (initiator) or Initiate (responder)
    private data."""

    stream_id: int
    role: Role
    peer_private_data: bytes
    ird: int
    ord: int
    peer_to_peer: bool
    rtr: RtrType | None
    negotiated: NegotiatedParameters | None


@dataclass(frozen=True)
class SessionRejected(RnicEvent):
    """The peer rejected our Initiate (RFC 5043 6.3, RFC 6581 7) or refused it with a Terminate (6.4)."""

    stream_id: int
    private_data: bytes
    enhanced: EnhancedData | None
    by_user: bool
    """True for a (Enhanced) Reject, False for the provider's Terminate (RFC 5043 6.4)."""


@dataclass(frozen=True)
class RtrArrived(RnicEvent):
    """Responder, peer-to-peer model: the initiator's RTR arrived; our queued messages now flow (RFC 6581 9)."""

    stream_id: int
    rtr: RtrType


@dataclass(frozen=True)
class StreamTerminated(RnicEvent):
    """The peer ended the session, or broke its rules and we ended it (RFC 5043 6.1, 6.2, 10)."""

    stream_id: int
    cause: TerminationCause
    error: LlpError | None = None


@dataclass(frozen=True)
class StreamReleased(RnicEvent):
    """RFC 5043 6.6: every chunk of the stream's last session is acknowledged; the stream id is free."""

    stream_id: int


# -- completions -----------------------------------------------------------------


@dataclass(frozen=True)
class WorkCompletion(RnicEvent):
    """A posted RDMA Write or Send variant was handed to SCTP in full (local completion, RFC 5041 5.4).

    The source buffer is read as the message is segmented; from now on it may be reused."""

    stream_id: int
    wr_id: int
    opcode: Opcode
    length: int


@dataclass(frozen=True)
class ReadCompletion(RnicEvent):
    """A posted RDMA Read whose Read Response was placed in full (RFC 5040 5.2)."""

    stream_id: int
    wr_id: int
    length: int


@dataclass(frozen=True)
class ReceiveCompletion(RnicEvent):
    """An inbound Send variant delivered into the posted buffer at `address` (RFC 5040 5.3).

    `solicited`: Send with Solicited Event; `invalidated_stag`: the local STag
    a Send with Invalidate revoked."""

    stream_id: int
    opcode: Opcode
    address: int
    length: int
    solicited: bool
    invalidated_stag: int | None


@dataclass(frozen=True)
class WriteArrived(RnicEvent):
    """An inbound RDMA Write message was placed in full at `stag` (RFC 5040 5.1). `length`: its bytes, or None
    where the host cannot know them: a receive engine reporting per message (`segment_reports` 0) hands up the
    Write's last segment alone, and a tagged segment carries no message offset (RFC 5041 4.2). RFC 5040 gives the
    Data Sink of a Write no completion, so nothing depends on it."""

    stream_id: int
    stag: int
    length: int | None


@dataclass(frozen=True)
class RdmapTerminated(RnicEvent):
    """An RDMAP Terminate was sent (`sent`) or received: the stream is in error (RFC 5040 5.5)."""

    stream_id: int
    terminate: Terminate
    sent: bool

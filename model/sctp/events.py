"""Events an SCTP association reports to its user (RFC 4960 10.2 notifications).

Every event is a frozen dataclass deriving from `AssociationEvent`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from model.sctp.packet import ErrorCause
from model.sctp.state import AssociationState


class AssociationEvent:
    """Base of every association event."""


@dataclass(frozen=True)
class AssociationEstablished(AssociationEvent):
    """COMMUNICATION UP (RFC 4960 10.2 A) with the RFC 5043 11.1 verdict on the adaptation layer.

    `streams` = min(outbound, inbound): the DDP streams usable in both
    directions (RFC 5043 8).  `ddp_enabled` is True only if this side
    announced DDP and the peer's INIT or INIT ACK indicated DDP (code point 1).
    """

    outbound_streams: int
    inbound_streams: int
    streams: int
    peer_adaptation_code_point: int | None
    ddp_enabled: bool
    mulpdu: int


@dataclass(frozen=True)
class DdpProceduresForbidden(AssociationEvent):
    """RFC 5043 11.1: the exchange did not agree on DDP; DDP and RDMA procedures MUST NOT be used.

    `peer_adaptation_code_point` is None when the peer sent no indication
    (row NONE) and another value for row ANY-OTHER.
    """

    peer_adaptation_code_point: int | None
    reason: str


@dataclass(frozen=True, slots=True)
class DataReceived(AssociationEvent):
    """A DATA chunk's user data handed to the user (RFC 4960 10.2 DATA ARRIVE)."""

    stream_id: int
    ppid: int
    tsn: int
    payload: bytes
    unordered: bool


@dataclass(frozen=True, slots=True)
class DataAcknowledged(AssociationEvent):
    """The Cumulative TSN Ack passed `count` more chunks sent on `stream_id` (RFC 5043 6.6, 10)."""

    stream_id: int
    count: int


class RetransmissionLimit(Enum):
    """The protocol parameters of RFC 4960 15 that bound retransmissions to an unresponsive peer."""

    MAX_INIT_RETRANSMITS = "Max.Init.Retransmits"
    """INIT or COOKIE ECHO retransmissions (RFC 4960 5.1 C; default 8)."""
    ASSOCIATION_MAX_RETRANS = "Association.Max.Retrans"
    """Consecutive retransmissions and unanswered HEARTBEATs once up (RFC 4960 8.1; default 10).  The same
    count against Path.Max.Retrans only marks the path unreachable (8.2, `PathStatusChanged`)."""


@dataclass(frozen=True)
class PathStatusChanged(AssociationEvent):
    """The peer's address became unreachable (error count above Path.Max.Retrans) or reachable (RFC 4960 8.2)."""

    reachable: bool


@dataclass(frozen=True)
class ErrorReported(AssociationEvent):
    """The peer sent an ERROR chunk (RFC 4960 3.3.10) that the association does not act on itself."""

    causes: tuple[ErrorCause, ...]


@dataclass(frozen=True)
class PeerShutdownStarted(AssociationEvent):
    """The peer sent SHUTDOWN (RFC 4960 9.2): `send()` is refused from now on."""


@dataclass(frozen=True)
class AssociationClosed(AssociationEvent):
    """SHUTDOWN COMPLETE (RFC 4960 10.2 E): graceful close done."""


@dataclass(frozen=True)
class AssociationAborted(AssociationEvent):
    """The peer sent ABORT (RFC 4960 9.1, 10.2 E COMMUNICATION LOST); `causes` are its error causes."""

    causes: tuple[ErrorCause, ...]


@dataclass(frozen=True)
class PeerRestarted(AssociationEvent):
    """RFC 4960 5.2.4 A: a COOKIE ECHO whose tie-tags are this association's tags and whose tags are new: the
    peer restarted.  This association is over, as if the peer had aborted it (its chunks are not kept: the
    choice 5.2.4 A leaves open), and the COOKIE ECHO is for a new association (RESTART, 10.2 E)."""


@dataclass(frozen=True)
class AssociationFailed(AssociationEvent):
    """The association gave up (COMMUNICATION LOST, RFC 4960 10.2 E); an ABORT was sent if a peer tag was known."""

    reason: str
    state: AssociationState | None = None
    """The state it gave up in (RFC 4960 4); it is CLOSED now."""
    limit: RetransmissionLimit | None = None
    """The retransmission limit that ran out (RFC 4960 5.1, 8.1); None for another failure (a protocol
    violation, an invalid INIT ACK...)."""
    limit_value: int | None = None
    """With `limit`: its configured value, the retransmissions made before giving up."""

"""The vocabulary of the SCTP association's state machine: states, triggers, transitions, errors.

`AssociationState` is the state of RFC 4960 4.  A `Trigger` is what moves it:
a chunk received (its `ChunkType`), a timer expiring, a user call (RFC 4960
10.1) or an internal condition.  A `Transition` is one row of the table in
`model.sctp.association`: the handler, the state it leads to and the RFC
section that says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable, Union

from model.errors import RnicError, TransitionError
from model.sctp.packet import ChunkType


class AssociationState(Enum):
    """RFC 4960 4 states."""

    # Enum's own __hash__ is a Python function (the hash of the name) that runs for every row looked up in
    # `TRANSITIONS`, chunk by chunk; the members are singletons compared by identity, so identity hashes them
    # as well, in C.
    __hash__ = object.__hash__

    CLOSED = "CLOSED"
    COOKIE_WAIT = "COOKIE-WAIT"
    COOKIE_ECHOED = "COOKIE-ECHOED"
    ESTABLISHED = "ESTABLISHED"
    SHUTDOWN_PENDING = "SHUTDOWN-PENDING"
    SHUTDOWN_SENT = "SHUTDOWN-SENT"
    SHUTDOWN_RECEIVED = "SHUTDOWN-RECEIVED"
    SHUTDOWN_ACK_SENT = "SHUTDOWN-ACK-SENT"


DATA_STATES = frozenset({
    AssociationState.ESTABLISHED,
    AssociationState.SHUTDOWN_PENDING,
    AssociationState.SHUTDOWN_SENT,
    AssociationState.SHUTDOWN_RECEIVED,
    AssociationState.SHUTDOWN_ACK_SENT,
})
"""States after COMMUNICATION UP: the association has a peer, TSNs and a congestion window."""


class Trigger(Enum):
    """What moves the association besides a received chunk (which is its `ChunkType`)."""

    __hash__ = object.__hash__   # as `AssociationState`'s: the timers dict and `TRANSITIONS` hash these

    # User calls, RFC 4960 10.1.
    CONNECT = "ASSOCIATE"
    SEND = "SEND"
    SEND_OFFLOADED = "SEND (a transmit engine builds the chunk)"
    SHUTDOWN = "SHUTDOWN"
    ABORT = "ABORT"
    # Timers.
    T1_INIT = "T1-init expired"
    T1_COOKIE = "T1-cookie expired"
    T3_RTX = "T3-rtx expired"
    T2_SHUTDOWN = "T2-shutdown expired"
    HEARTBEAT = "heartbeat timer expired"
    DELAYED_ACK = "delayed-ACK timer expired"
    # Internal.
    ALL_ACKED = "nothing queued or outstanding"


TIMERS = frozenset({Trigger.T1_INIT, Trigger.T1_COOKIE, Trigger.T3_RTX, Trigger.T2_SHUTDOWN, Trigger.HEARTBEAT,
                    Trigger.DELAYED_ACK})
AnyTrigger = Union[ChunkType, Trigger]


@dataclass(frozen=True)
class Transition:
    """One row: in the row's state, `trigger` runs `handler` and leads to `next_state` (None: the state stays).

    A handler returns False when the RFC has it discard what triggered it; the
    state then stays.  A handler may also end the association (CLOSED, on an
    error) or go further itself (a SHUTDOWN that finds nothing outstanding)."""

    handler: Callable
    next_state: AssociationState | None
    rfc: str


class AssociationError(RnicError):
    """Misuse of an association by its caller."""


class InvalidStateError(AssociationError, TransitionError):
    """The call or event has no transition in the association's current state (RFC 4960 4)."""

    def __init__(self, state: AssociationState, trigger: AnyTrigger, detail: str = ""):
        TransitionError.__init__(self, "SCTP association", state, trigger, detail)


class PayloadSizeError(AssociationError, ValueError):
    """Empty user data (RFC 4960 6.2) or more than a DDP-SSN plus MULPDU bytes (RFC 5043 9)."""


class InvalidStreamError(AssociationError, ValueError):
    """A stream identifier at or above the negotiated number of outbound streams (RFC 4960 6.5)."""

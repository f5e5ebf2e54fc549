"""Fault management, RFC 4960 8 (and the ERROR chunk of 3.3.10): error counters, heartbeats.

`FaultManagementMixin` holds the association's handlers for the error
counters of 8.1 (Association.Max.Retrans) and 8.2 (Path.Max.Retrans, path
reachability), the heartbeats of 8.3 (sending on the HB.interval timer,
answering a HEARTBEAT, an answered HEARTBEAT as an RTT sample), and the
reporting of ERROR chunks the association does not act on.

The handlers work on the `Association`'s attributes (it is the only class
that mixes this in).
"""

from __future__ import annotations

import struct

from model.sctp.events import AssociationFailed, ErrorReported, PathStatusChanged, RetransmissionLimit
from model.sctp.packet import ErrorChunk, HeartbeatAckChunk, HeartbeatChunk, SctpPacket
from model.sctp.state import AssociationState, Trigger

_ESTABLISHED, _HEARTBEAT = AssociationState.ESTABLISHED, Trigger.HEARTBEAT
"""Read whenever DATA goes out (`_restart_heartbeat`) under their names
(an enum member's class attribute is a descriptor call in Python 3.11, a module name a dict lookup)."""

HEARTBEAT_INFO = struct.Struct("!dQ")
"""The Heartbeat Information we send (8.3): the time sent and a nonce, echoed back unchanged."""


class FaultManagementMixin:
    """The association's handlers for RFC 4960 8 (see the module docstring)."""

    def _failure(self, reason: str, limit: RetransmissionLimit | None = None) -> AssociationFailed:
        """The failure event, with the state the association gives up in; call before closing."""
        values = {RetransmissionLimit.MAX_INIT_RETRANSMITS: self.config.max_init_retransmits,
                  RetransmissionLimit.ASSOCIATION_MAX_RETRANS: self.config.association_max_retrans}
        return AssociationFailed(reason, self.state, limit, values.get(limit))

    def _count_error(self, what: str) -> None:
        """8.1 and 8.2: count an unanswered transmission; fail past Association.Max.Retrans."""
        self._association_errors += 1
        self._path_errors += 1
        limit = self.config.association_max_retrans
        if self._association_errors > limit:
            # 8.1: "the endpoint shall consider the peer endpoint unreachable and shall stop transmitting".
            self._events.append(self._failure(
                f"{what} after {limit} retransmissions or unanswered HEARTBEATs in a row: "
                "Association.Max.Retrans exceeded (RFC 4960 8.1)",
                RetransmissionLimit.ASSOCIATION_MAX_RETRANS))
            self._close_with_abort()
            return
        if self._path_reachable and self._path_errors > self.config.path_max_retrans:
            self._path_reachable = False
            self._events.append(PathStatusChanged(reachable=False))

    def _peer_is_alive(self) -> None:
        """8.1, 8.2: an answer from the peer clears both error counters."""
        self._association_errors = self._path_errors = 0
        if not self._path_reachable:
            self._path_reachable = True
            self._events.append(PathStatusChanged(reachable=True))

    def _restart_heartbeat(self, now: float) -> None:
        """8.3: the next HEARTBEAT is due RTO + HB.interval after the path was last used, RTO jittered +-50%;
        heartbeats run in ESTABLISHED only."""
        if self.config.heartbeat_interval is None or self.state is not _ESTABLISHED:
            return
        jitter = self.config.rng.uniform(0.5, 1.5)
        self._timers[_HEARTBEAT] = now + self.config.heartbeat_interval + self._rto.rto * jitter

    def _on_heartbeat_timer(self, now: float) -> None:
        """8.3: send a HEARTBEAT; one still unanswered counts as an error first. While the engine's transport
        has DATA outstanding the destination is not idle: no HEARTBEAT (its T3-rtx counts the errors, 8.1)."""
        if self._engine_unacked:
            self._heartbeat_unanswered = False
            self._restart_heartbeat(now)
            return
        if self._heartbeat_unanswered:
            self._count_error("HEARTBEAT unanswered")
            if self.state is AssociationState.CLOSED:
                return
        self._heartbeat_nonce = self.config.rng.getrandbits(64)
        self._heartbeat_unanswered = True
        self._queue_control(HeartbeatChunk(info=HEARTBEAT_INFO.pack(now, self._heartbeat_nonce)))
        self._restart_heartbeat(now)

    def _answer_heartbeat(self, now: float, packet: SctpPacket, chunk: HeartbeatChunk) -> None:
        """8.3: echo the Heartbeat Information unchanged."""
        self._queue_control(HeartbeatAckChunk(info=chunk.info))

    def _on_heartbeat_ack(self, now: float, packet: SctpPacket, chunk: HeartbeatAckChunk) -> bool | None:
        """8.3: the answer to our last HEARTBEAT is an RTT sample and shows the peer alive."""
        if len(chunk.info) != HEARTBEAT_INFO.size:
            return False
        sent_at, nonce = HEARTBEAT_INFO.unpack(chunk.info)
        if nonce != self._heartbeat_nonce:
            return False
        self._heartbeat_nonce = None
        self._heartbeat_unanswered = False
        self._rto.measure(now - sent_at)
        self._peer_is_alive()
        return None

    def _report_error(self, now: float, packet: SctpPacket, chunk: ErrorChunk) -> None:
        """3.3.10: an ERROR the association does not act on goes to the user."""
        self._events.append(ErrorReported(chunk.causes))

"""Association teardown, RFC 4960 9: ABORT (9.1) and the graceful SHUTDOWN exchange (9.2).

`ShutdownMixin` holds the association's handlers for the user's SHUTDOWN and
ABORT, a received ABORT, SHUTDOWN, SHUTDOWN ACK and SHUTDOWN COMPLETE, the
internal trigger "nothing queued or outstanding" that lets SHUTDOWN or
SHUTDOWN ACK go, and T2-shutdown.

The handlers work on the `Association`'s attributes (it is the only class
that mixes this in).
"""

from __future__ import annotations

from model.sctp.events import AssociationAborted, AssociationClosed, PeerShutdownStarted
from model.sctp.packet import (
    AbortChunk,
    ErrorCause,
    ErrorCauseCode,
    SctpPacket,
    ShutdownAckChunk,
    ShutdownChunk,
    ShutdownCompleteChunk,
)
from model.sctp.state import AssociationState, Trigger


class ShutdownMixin:
    """The association's handlers for RFC 4960 9 (see the module docstring)."""

    # -- ABORT, 9.1 -------------------------------------------------------------------

    def _close_with_abort(self, *causes: ErrorCause) -> None:
        """Send ABORT (when the peer's tag is known) and close at once."""
        if self.peer_tag:
            self._queue_control(AbortChunk(causes=causes))
        self.state = AssociationState.CLOSED
        self._timers.clear()
        self._send_queue.clear()
        self._queued_bytes = 0

    def _abort_call(self, now: float, reason: str = "") -> None:
        """9.1: the user's ABORT, with a User-Initiated Abort cause (3.3.10.12)."""
        self._close_with_abort(ErrorCause(ErrorCauseCode.USER_INITIATED_ABORT, reason.encode()))

    def _on_abort(self, now: float, packet: SctpPacket, chunk: AbortChunk) -> None:
        """9.1: the peer aborted; nothing more is sent."""
        self._timers.clear()
        self._control.clear()
        self._final_packet_sent = True
        self._events.append(AssociationAborted(chunk.causes))

    # -- SHUTDOWN, 9.2 ----------------------------------------------------------------

    def _start_shutdown(self, now: float) -> None:
        """9.2: the user's SHUTDOWN: no more new data; SHUTDOWN goes once everything is acknowledged."""
        self.state = AssociationState.SHUTDOWN_PENDING
        self._timers.pop(Trigger.HEARTBEAT, None)
        self._progress_shutdown(now)

    def _progress_shutdown(self, now: float) -> None:
        """Fire ALL_ACKED once nothing is queued or outstanding (9.2)."""
        if self._outstanding or self._send_queue or self._engine_unacked or self._tracker is None:
            return
        self._fire(Trigger.ALL_ACKED, now)

    def _send_shutdown(self, now: float) -> None:
        """9.2: SHUTDOWN-PENDING with nothing outstanding: send SHUTDOWN, start T2-shutdown."""
        self._queue_control(ShutdownChunk(self._tracker.cumulative_tsn))
        self._ack_now = False
        self._timers.pop(Trigger.T3_RTX, None)
        self._timers[Trigger.T2_SHUTDOWN] = now + self._rto.rto

    def _send_shutdown_ack(self, now: float) -> None:
        """9.2: SHUTDOWN-RECEIVED with nothing outstanding: send SHUTDOWN ACK, start T2-shutdown."""
        self._queue_control(ShutdownAckChunk())
        self._timers.pop(Trigger.T3_RTX, None)
        self._timers[Trigger.T2_SHUTDOWN] = now + self._rto.rto

    def _on_shutdown(self, now: float, packet: SctpPacket, chunk: ShutdownChunk) -> None:
        """9.2: the peer shuts down: its Cumulative TSN Ack acknowledges, no new data from the user, and
        SHUTDOWN ACK once ours are all acknowledged."""
        self._process_ack(now, chunk.cumulative_tsn_ack, self._peer_a_rwnd, ())
        if self.state is AssociationState.CLOSED:
            return
        self.state = AssociationState.SHUTDOWN_RECEIVED
        self._timers.pop(Trigger.HEARTBEAT, None)
        self._events.append(PeerShutdownStarted())
        self._progress_shutdown(now)

    def _on_repeated_shutdown(self, now: float, packet: SctpPacket, chunk: ShutdownChunk) -> None:
        """9.2: a SHUTDOWN again (ours is not acknowledged yet): its Cumulative TSN Ack still counts."""
        self._process_ack(now, chunk.cumulative_tsn_ack, self._peer_a_rwnd, ())

    def _answer_shutdown_with_ack(self, now: float, packet: SctpPacket, chunk: ShutdownChunk) -> None:
        """9.2: both sides sent SHUTDOWN: answer with SHUTDOWN ACK and restart T2-shutdown."""
        self._queue_control(ShutdownAckChunk())
        self._timers[Trigger.T2_SHUTDOWN] = now + self._rto.rto

    def _complete_shutdown(self, now: float, packet: SctpPacket, chunk: ShutdownAckChunk) -> None:
        """9.2: SHUTDOWN ACK received: send SHUTDOWN COMPLETE and close."""
        self._queue_control(ShutdownCompleteChunk(), alone=True)
        self._timers.clear()
        self._events.append(AssociationClosed())

    def _on_shutdown_complete(self, now: float, packet: SctpPacket, chunk: ShutdownCompleteChunk) -> None:
        """9.2: SHUTDOWN COMPLETE received: closed, nothing more to send."""
        self._timers.clear()
        self._final_packet_sent = True
        self._events.append(AssociationClosed())

    def _resend_shutdown(self, now: float) -> None:
        """9.2: T2-shutdown expired in SHUTDOWN-SENT: SHUTDOWN again with a backed-off RTO."""
        if self._t2_expired(now):
            self._queue_control(ShutdownChunk(self._tracker.cumulative_tsn))

    def _resend_shutdown_ack_on_t2(self, now: float) -> None:
        """9.2: T2-shutdown expired in SHUTDOWN-ACK-SENT: SHUTDOWN ACK again with a backed-off RTO."""
        if self._t2_expired(now):
            self._queue_control(ShutdownAckChunk())

    def _t2_expired(self, now: float) -> bool:
        """8.1: the expiry counts as an error; unless that ends the association, back off and restart T2."""
        self._count_error("T2-shutdown expired")
        if self.state is AssociationState.CLOSED:
            return False
        self._rto.back_off()
        self._timers[Trigger.T2_SHUTDOWN] = now + self._rto.rto
        return True

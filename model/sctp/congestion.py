"""SCTP congestion control for one destination, RFC 4960 7.2 with RFC 9260 7.2.

`CongestionControl` keeps cwnd, ssthresh, partial_bytes_acked and the Fast
Recovery state, and applies:

* 7.2.1 initial cwnd min(4*MTU, max(2*MTU, 4380)) and slow start: on a SACK
  that advances the Cumulative TSN Ack while cwnd is fully used, cwnd grows by
  min(bytes acked, MTU);
* 7.2.2 congestion avoidance above ssthresh: partial_bytes_acked collects the
  bytes acked, and once it reaches cwnd (with cwnd fully used) cwnd grows by
  one MTU; while cwnd is not fully used it is capped at cwnd (RFC 9260
  7.2.2), so a long rwnd-limited stretch cannot be cashed in later as a burst
  of increases; it resets when nothing is outstanding;
* 7.2.3 on a T3-rtx expiry: ssthresh = max(cwnd/2, 4*MTU), cwnd = 1*MTU;
* 7.2.4 on fast retransmit outside Fast Recovery: ssthresh = max(cwnd/2,
  4*MTU), cwnd = ssthresh, and Fast Recovery until the Cumulative TSN Ack
  reaches the highest TSN outstanding when it began; no cwnd growth in it.

"Fully used" (7.2.1: "the current congestion window is being fully
utilized"; 7.2.2: "before the arrival of the SACK the sender had cwnd or more
bytes of data outstanding") is read as: less than one MTU of cwnd was left
unused, either by the bytes in flight just before the SACK or by those in
flight when the sender last had the chance to transmit (`on_transmit`).  The
second reading matters when several SACKs are processed before the sender is
asked for packets again: only the first of them finds the flight it left, the
others find it already shrunk by their predecessors although the sender never
had a chance to refill it.  Each of them would have found cwnd used had the
sender been asked after each SACK, so each of them counts.  A window left
unused because the peer's rwnd, Max.Burst or the user's data ran short is not
fully used and does not grow (RFC 9260 7.2.1: otherwise "the cwnd MUST NOT be
increased").
"""

from __future__ import annotations

from dataclasses import dataclass

from model.sctp.packet import TSN_BITS, serial_ge


def initial_cwnd(mtu: int) -> int:
    """RFC 4960 7.2.1: min(4*MTU, max(2*MTU, 4380 bytes))."""
    return min(4 * mtu, max(2 * mtu, 4380))


@dataclass
class CongestionControl:
    mtu: int
    ssthresh: int
    """Initially the peer's a_rwnd (7.2.1)."""

    def __post_init__(self) -> None:
        self.cwnd: int = initial_cwnd(self.mtu)
        self.partial_bytes_acked: int = 0
        self.fast_recovery_exit: int | None = None
        self.used_at_last_transmit: bool = False
        """Whether the flight left less than one MTU of cwnd unused at the last transmission opportunity."""

    @property
    def in_fast_recovery(self) -> bool:
        return self.fast_recovery_exit is not None

    def _fully_used(self, flight_before: int) -> bool:
        return flight_before + self.mtu > self.cwnd or self.used_at_last_transmit

    def on_transmit(self, flight_size: int) -> None:
        """Record, after the sender had the chance to transmit, whether its flight filled cwnd."""
        self.used_at_last_transmit = flight_size + self.mtu > self.cwnd

    def on_sack(self, bytes_newly_acked: int, cum_ack_advanced: bool, cum_tsn_ack: int,
                flight_before: int, flight_after: int) -> None:
        """Update cwnd for one SACK (7.2.1, 7.2.2); leaves Fast Recovery at its exit point (7.2.4)."""
        if self.fast_recovery_exit is not None and serial_ge(cum_tsn_ack, self.fast_recovery_exit, TSN_BITS):
            self.fast_recovery_exit = None
        elif self.fast_recovery_exit is not None:
            return
        if not cum_ack_advanced:
            return
        if self.cwnd <= self.ssthresh:
            if self._fully_used(flight_before):
                self.cwnd += min(bytes_newly_acked, self.mtu)
        else:
            self.partial_bytes_acked += bytes_newly_acked
            fully_used = self._fully_used(flight_before)
            if self.partial_bytes_acked > self.cwnd and not fully_used:
                self.partial_bytes_acked = self.cwnd  # RFC 9260 7.2.2 (RFC 8540 3.26): no credit saved up
            if self.partial_bytes_acked >= self.cwnd and fully_used:
                self.partial_bytes_acked -= self.cwnd
                self.cwnd += self.mtu
        if flight_after == 0:
            self.partial_bytes_acked = 0

    def on_retransmission_timeout(self) -> None:
        """RFC 4960 7.2.3: ssthresh = max(cwnd/2, 4*MTU); cwnd = 1*MTU.  Fast Recovery ends (RFC 9260 7.2.4)."""
        self.ssthresh = max(self.cwnd // 2, 4 * self.mtu)
        self.cwnd = self.mtu
        self.partial_bytes_acked = 0
        self.fast_recovery_exit = None
        self.used_at_last_transmit = False  # everything outstanding is marked for retransmission, nothing in flight

    def on_fast_retransmit(self, highest_outstanding_tsn: int) -> bool:
        """RFC 9260 7.2.4 step 2; returns False (and changes nothing) when already in Fast Recovery."""
        if self.fast_recovery_exit is not None:
            return False
        self.ssthresh = max(self.cwnd // 2, 4 * self.mtu)
        self.cwnd = self.ssthresh
        self.partial_bytes_acked = 0
        self.fast_recovery_exit = highest_outstanding_tsn
        return True

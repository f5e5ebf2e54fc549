"""SCTP congestion control for one destination, RFC 4960 7.2 with RFC 9260 7.2.

`CongestionControl` keeps cwnd, ssthresh, partial_bytes_acked and the Fast
Recovery state, and applies:

* 7.2.1 initial cwnd min(4*MTU, max(2*MTU, 4380)) and slow start: on a SACK
  that advances the Cumulative TSN Ack while cwnd is fully used, cwnd grows by
  min(bytes acked, MTU);
* 7.2.2 congestion avoidance above ssthresh: partial_bytes_acked collects the
  bytes acked, and once it reaches cwnd (with cwnd fully used) cwnd grows by
  one MTU; it resets when nothing is outstanding;
* 7.2.3 on a T3-rtx expiry: ssthresh = max(cwnd/2, 4*MTU), cwnd = 1*MTU;
* 7.2.4 on fast retransmit outside Fast Recovery: ssthresh = max(cwnd/2,
  4*MTU), cwnd = ssthresh, and Fast Recovery until the Cumulative TSN Ack
  reaches the highest TSN outstanding when it began; no cwnd growth in it.

"Fully used" (7.2.1: "the current congestion window is being fully
utilized") is read as: the bytes in flight before the SACK left less than one
MTU of cwnd unused.
"""

from __future__ import annotations

from dataclasses import dataclass

from model.sctp import TSN_BITS, serial_ge


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

    @property
    def in_fast_recovery(self) -> bool:
        return self.fast_recovery_exit is not None

    def _fully_used(self, flight_before: int) -> bool:
        return flight_before + self.mtu > self.cwnd

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
            if self.partial_bytes_acked >= self.cwnd and self._fully_used(flight_before):
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

    def on_fast_retransmit(self, highest_outstanding_tsn: int) -> bool:
        """RFC 9260 7.2.4 step 2; returns False (and changes nothing) when already in Fast Recovery."""
        if self.fast_recovery_exit is not None:
            return False
        self.ssthresh = max(self.cwnd // 2, 4 * self.mtu)
        self.cwnd = self.ssthresh
        self.partial_bytes_acked = 0
        self.fast_recovery_exit = highest_outstanding_tsn
        return True

"""Retransmission timeout estimator of RFC 4960 6.3.1 (unchanged in RFC 9260 6.3.1).

Holds SRTT, RTTVAR and RTO for the one destination of an association.
`measure()` applies rules C1-C3 with the constants of RFC 4960 15
(RTO.Alpha 1/8, RTO.Beta 1/4) and clamps the result to RTO.Min/RTO.Max
(C6, C7); `back_off()` doubles the RTO after a timer expiry (6.3.3 E2,
capped by RTO.Max).  Karn's rule (C5: no measurement from a retransmitted
chunk) is the caller's, which alone knows what was retransmitted.
"""

from __future__ import annotations

from dataclasses import dataclass

RTO_ALPHA = 1 / 8
RTO_BETA = 1 / 4


@dataclass
class RtoEstimator:
    """SRTT/RTTVAR/RTO state; `srtt` and `rttvar` are None until the first measurement (C1)."""

    rto_initial: float
    rto_min: float
    rto_max: float
    clock_granularity: float = 0.001

    def __post_init__(self) -> None:
        if not 0 < self.rto_min <= self.rto_max:
            raise ValueError(f"need 0 < RTO.Min ({self.rto_min}) <= RTO.Max ({self.rto_max})")
        self.srtt: float | None = None
        self.rttvar: float | None = None
        self.rto: float = self._clamp(self.rto_initial)

    def _clamp(self, rto: float) -> float:
        return min(max(rto, self.rto_min), self.rto_max)

    def measure(self, rtt: float) -> None:
        """Fold a round-trip measurement R into SRTT/RTTVAR and recompute RTO (C1, C2, C3)."""
        rtt = max(rtt, 0.0)
        if self.srtt is None or self.rttvar is None:
            self.srtt = rtt
            self.rttvar = rtt / 2
        else:
            self.rttvar = (1 - RTO_BETA) * self.rttvar + RTO_BETA * abs(self.srtt - rtt)
            self.srtt = (1 - RTO_ALPHA) * self.srtt + RTO_ALPHA * rtt
        # C3 / RFC 9260 6.3.1: an RTTVAR of 0 is replaced by the clock granularity G.
        self.rttvar = max(self.rttvar, self.clock_granularity)
        self.rto = self._clamp(self.srtt + 4 * self.rttvar)

    def back_off(self) -> None:
        """RTO = RTO * 2, at most RTO.Max (RFC 4960 6.3.3 E2)."""
        self.rto = min(self.rto * 2, self.rto_max)

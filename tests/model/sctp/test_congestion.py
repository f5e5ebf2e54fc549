"""Tests for model.sctp.congestion and model.sctp.rto (RFC 4960 6.3.1, 7.2; RFC 9260 7.2.4)."""

import pytest

from model.sctp.congestion import CongestionControl, initial_cwnd
from model.sctp.rto import RtoEstimator


def test_rfc4960_7_2_1_initial_cwnd() -> None:
    assert initial_cwnd(1500) == 4380
    assert initial_cwnd(9000) == 18000
    assert initial_cwnd(1000) == 4000


def test_rfc4960_7_2_1_slow_start_grows_by_at_most_one_mtu_only_when_cwnd_is_used() -> None:
    cc = CongestionControl(mtu=1000, ssthresh=100_000)
    cc.on_sack(3000, True, 10, flight_before=4000, flight_after=1000)
    assert cc.cwnd == 5000
    cc.on_sack(500, True, 11, flight_before=4800, flight_after=500)
    assert cc.cwnd == 5500
    cc.on_sack(1000, True, 12, flight_before=1000, flight_after=0)  # window not fully used
    assert cc.cwnd == 5500
    cc.on_sack(1000, False, 12, flight_before=5500, flight_after=4500)  # cum ack did not advance
    assert cc.cwnd == 5500


def test_rfc4960_7_2_2_congestion_avoidance_one_mtu_per_cwnd_acked() -> None:
    cc = CongestionControl(mtu=1000, ssthresh=3000)
    cc.cwnd = 4000
    for tsn in range(3):
        cc.on_sack(1000, True, tsn, flight_before=4000, flight_after=3000)
        assert cc.cwnd == 4000
    cc.on_sack(1000, True, 3, flight_before=4000, flight_after=3000)
    assert cc.cwnd == 5000 and cc.partial_bytes_acked == 0
    cc.on_sack(1000, True, 4, flight_before=4000, flight_after=0)
    assert cc.partial_bytes_acked == 0  # reset when nothing is outstanding


def test_rfc4960_7_2_3_timeout_and_rfc9260_7_2_4_fast_recovery() -> None:
    cc = CongestionControl(mtu=1000, ssthresh=100_000)
    cc.cwnd = 20_000
    assert cc.on_fast_retransmit(highest_outstanding_tsn=50)
    assert (cc.ssthresh, cc.cwnd, cc.in_fast_recovery) == (10_000, 10_000, True)
    assert not cc.on_fast_retransmit(highest_outstanding_tsn=60)  # once per recovery
    cc.on_sack(5000, True, 40, flight_before=10_000, flight_after=5000)
    assert cc.cwnd == 10_000  # no growth in Fast Recovery
    cc.on_sack(1000, True, 50, flight_before=10_000, flight_after=9000)
    assert not cc.in_fast_recovery and cc.cwnd == 11_000  # the exit SACK counts again (slow start)
    cc.on_retransmission_timeout()
    assert (cc.ssthresh, cc.cwnd) == (5500, 1000)
    cc.cwnd = 3000
    cc.on_retransmission_timeout()
    assert cc.ssthresh == 4000  # floor of 4 MTU


def test_rfc4960_6_3_1_rto_rules_c1_to_c7() -> None:
    rto = RtoEstimator(rto_initial=3.0, rto_min=1.0, rto_max=60.0)
    assert rto.rto == 3.0 and rto.srtt is None
    rto.measure(2.0)
    assert (rto.srtt, rto.rttvar, rto.rto) == (2.0, 1.0, 6.0)  # C1
    rto.measure(1.0)
    assert rto.rttvar == pytest.approx(0.75 * 1.0 + 0.25 * 1.0)  # C2, RTTVAR before SRTT
    assert rto.srtt == pytest.approx(0.875 * 2.0 + 0.125 * 1.0)
    assert rto.rto == pytest.approx(rto.srtt + 4 * rto.rttvar)
    rto.measure(0.001)
    rto.measure(0.001)
    assert rto.rto >= 1.0  # C6: RTO.Min
    for _ in range(10):
        rto.back_off()
    assert rto.rto == 60.0  # E2 capped by RTO.Max
    with pytest.raises(ValueError):
        RtoEstimator(rto_initial=1.0, rto_min=2.0, rto_max=1.0)


def test_rfc9260_7_2_1_sacks_processed_together_count_the_window_the_sender_left() -> None:
    """Three SACKs handed over before the sender may transmit again: each finds cwnd as used as the sender left it."""
    cc = CongestionControl(mtu=1000, ssthresh=100_000)
    cc.on_transmit(flight_size=4380)  # filled cwnd (4000) and overshot it by less than one MTU (6.1 B)
    cc.on_sack(2000, True, 2, flight_before=4380, flight_after=2380)
    cc.on_sack(2000, True, 4, flight_before=2380, flight_after=380)  # shrunk by its predecessor only
    cc.on_sack(380, True, 5, flight_before=380, flight_after=0)
    assert cc.cwnd == 4000 + 1000 + 1000 + 380
    cc.on_transmit(flight_size=2000)  # rwnd, Max.Burst or the user left cwnd unused: no growth
    cc.on_sack(2000, True, 7, flight_before=2000, flight_after=0)
    assert cc.cwnd == 6380
    cc.on_transmit(flight_size=6000)
    cc.on_retransmission_timeout()  # nothing is in flight after T3-rtx until the retransmission goes out
    cc.on_sack(1000, True, 8, flight_before=0, flight_after=0)
    assert cc.cwnd == 1000


def test_rfc9260_7_2_2_partial_bytes_acked_capped_at_cwnd_while_cwnd_is_not_used() -> None:
    cc = CongestionControl(mtu=1000, ssthresh=3000)
    cc.cwnd = 4000
    for tsn in range(20):  # an rwnd-limited stretch: 20 000 bytes acked, cwnd never full
        cc.on_transmit(flight_size=2000)
        cc.on_sack(1000, True, tsn, flight_before=2000, flight_after=1000)
    assert cc.cwnd == 4000 and cc.partial_bytes_acked == 4000
    cc.on_transmit(flight_size=4000)
    for tsn in range(20, 24):  # cwnd used again: one MTU, not one per cwnd acked while it was not
        cc.on_sack(1000, True, tsn, flight_before=4000, flight_after=3000)
    assert cc.cwnd == 5000

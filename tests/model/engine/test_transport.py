"""The transmit engine's transport unit (model/engine/transport.py) against RFC 4960 6.1, 6.2.1, 6.3, 7.2 and 8.1.

Expectations: the RFC's rules worked out by hand per case (the numbers in
the comments), and the host's own software SCTP (`model.sctp.association`,
driven through its offload interface: `send_offloaded`, SACK packets in,
LIMIT/ACK/RESEND out) on a lossy run where the two readings of the RFC
must agree. TSNs wrap past 2**32 in these runs (RFC 4960 1.6).
"""

import math
import random
from collections import deque
from fractions import Fraction

import pytest

from model.engine.sack import SackUnit
from model.engine.transport import (
    RTO_INITIAL_TICKS, RTO_MAX_TICKS, RTO_MIN_TICKS, TICK_SECONDS, AssociationFailure, Limit, ProtocolViolation,
    Retirement, Retransmission, RetransmitCause, TransportUnit, ticks,
)
from model.sctp.association import EngineRequestKind
from model.sctp.packet import PPID_DDP_SEGMENT, SctpPacket
from tests.model.sctp.test_association import established_link

A = 1                    # the association row under test
INITIAL = 0xFFFFFFFE     # its initial TSN: the third chunk wraps to TSN 0
MTU = 1500
CHUNK = 1000             # user data of every chunk sent, below MTU - 28
WINDOW = 100_000
FAST, TIMEOUT = RetransmitCause.FAST, RetransmitCause.TIMEOUT


def tsn(k: int) -> int:
    """The k-th chunk's TSN (k = 1 the first); tsn(0) is the Cumulative TSN Ack point a row starts from."""
    return (INITIAL - 1 + k) & 0xFFFFFFFF


def row(**options) -> tuple[TransportUnit, list]:
    """A unit with row A written (Max.Burst out of the way unless given); the row's first records."""
    unit = TransportUnit(2)
    options = {"mtu": MTU, "chunk_bytes": CHUNK, "max_burst": 64} | options
    peer_a_rwnd = options.pop("peer_a_rwnd", WINDOW)
    return unit, unit.reset(A, INITIAL, peer_a_rwnd, **options)


def send(unit: TransportUnit, first: int, last: int, now: int, size: int = CHUNK) -> None:
    for k in range(first, last + 1):
        unit.sent(A, tsn(k), size, now)


def sack(unit: TransportUnit, cumulative: int, blocks=(), now: int = 0, a_rwnd: int = WINDOW, duplicates=()) -> list:
    """The peer's SACK: Cumulative TSN Ack tsn(`cumulative`), Gap Ack Blocks as offsets from it."""
    return unit.sack(A, tsn(cumulative), a_rwnd, tuple(blocks), tuple(duplicates), now)


def index(unit: TransportUnit, value: int) -> int:
    """The k of TSN `value`."""
    return (value - tsn(0)) & 0xFFFFFFFF


def slow_start_rounds(unit: TransportUnit, rounds: int, now: int) -> int:
    """Send the whole window and acknowledge it all, `rounds` times (each adds one MTU, RFC 4960 7.2.1);
    the k of the last chunk sent."""
    for _ in range(rounds):
        state = unit.state(A)
        first, last = index(unit, state.highest_tsn_sent) + 1, index(unit, state.limit)
        send(unit, first, last, now)
        sack(unit, last, now=now + 1)
        now += 2
    return index(unit, unit.state(A).highest_tsn_sent)


# ---------------------------------------------------------------- windows: RFC 4960 6.1, 7.2.1, 7.2.2


def test_initial_cwnd_ssthresh_and_the_first_limit_rfc4960_7_2_1_and_6_1():
    unit, records = row()
    state = unit.state(A)
    assert state.cwnd == min(4 * 1500, max(2 * 1500, 4380)) == 4380
    assert state.ssthresh == WINDOW and state.rwnd == WINDOW         # 7.2.1 (a_rwnd), 6.2.1 A
    # 6.1 B: a chunk may start while the flight is below cwnd: at 0, 1000, 2000, 3000 and 4000 bytes.
    assert records == [Limit(A, tsn(5))]
    # 6.1 D: Max.Burst (4 by default, RFC 4960 15) packets per event.
    assert unit.reset(0, 7, WINDOW, mtu=MTU, chunk_bytes=CHUNK) == [Limit(0, 10)]
    unit.reset(0, 7, WINDOW, mtu=9000)
    assert unit.state(0).cwnd == min(4 * 9000, max(2 * 9000, 4380)) == 18000
    unit.reset(0, 7, WINDOW, mtu=1000)
    assert unit.state(0).cwnd == 4000


def test_slow_start_rfc4960_7_2_1():
    """cwnd grows by at most min(bytes acknowledged, MTU), only while fully utilized and only on a SACK that
    advances the Cumulative TSN Ack."""
    unit, _ = row()
    send(unit, 1, 5, now=0)                                            # flight 5000 >= cwnd 4380
    assert sack(unit, 2, now=10) == [Retirement(A, tsn(1), tsn(2)), Limit(A, tsn(8))]
    assert unit.state(A).cwnd == 4380 + min(2000, MTU) == 5880
    # Flight 3000 left 2880 of 5880 unused: not fully utilized, no growth.
    assert sack(unit, 3, now=11) == [Retirement(A, tsn(3), tsn(3)), Limit(A, tsn(9))]
    assert unit.state(A).cwnd == 5880
    send(unit, 6, 9, now=11)                                           # flight 6000
    sack(unit, 4, now=12)
    assert unit.state(A).cwnd == 5880 + min(1000, MTU) == 6880
    sack(unit, 4, now=13)                                              # no advance: no growth
    assert unit.state(A).cwnd == 6880


def test_congestion_avoidance_rfc4960_7_2_2():
    """Above ssthresh, one MTU per cwnd of bytes acknowledged while fully utilized; partial_bytes_acked back
    to 0 once everything sent is acknowledged."""
    unit, records = row(peer_a_rwnd=4000)                              # ssthresh 4000 < cwnd 4380
    assert records == [Limit(A, tsn(4))]                               # 6.1 A: rwnd 4000 holds 4 chunks
    send(unit, 1, 4, now=0)
    assert sack(unit, 1, now=10)[-1] == Limit(A, tsn(6))               # flight 3000, cwnd 4380: two more
    assert (unit.state(A).cwnd, unit.state(A).partial_bytes_acked) == (4380, 1000)
    send(unit, 5, 6, now=10)
    sack(unit, 3, now=20)
    assert (unit.state(A).cwnd, unit.state(A).partial_bytes_acked) == (4380, 3000)
    send(unit, 7, 8, now=20)
    sack(unit, 5, now=30)                                              # 5000 >= 4380: one MTU, 620 kept
    assert (unit.state(A).cwnd, unit.state(A).partial_bytes_acked) == (4380 + MTU, 5000 - 4380)
    sack(unit, 8, now=40)                                              # all acknowledged
    assert (unit.state(A).cwnd, unit.state(A).partial_bytes_acked) == (5880, 0)


def test_max_burst_bounds_each_event_rfc4960_6_1_d():
    unit, records = row(max_burst=4)
    assert records == [Limit(A, tsn(4))]                               # cwnd would allow 5
    send(unit, 1, 4, now=0)
    # cwnd 4380 + 1500 = 5880 with nothing in flight would allow 6 chunks; the SACK releases 4.
    assert sack(unit, 4, now=10) == [Retirement(A, tsn(1), tsn(4)), Limit(A, tsn(8))]
    assert unit.state(A).cwnd == 5880


def test_max_burst_counts_retransmissions_as_cwnd_allows_rfc4960_6_1_c_d():
    unit, _ = row(chunk_bytes=100, max_burst=4, rto_initial=100, rto_min=50, rto_max=1000)
    for k in range(0, 12, 4):                                          # three events, four chunks each
        send(unit, k + 1, k + 4, now=0, size=100)
        sack(unit, 0, now=0)
    assert unit.tick(100) == [Retransmission(A, tsn(1), TIMEOUT), Limit(A, tsn(12))]   # no new data
    # cwnd 1500 + 100: sixteen chunks of 100 bytes would start below it; the event releases four.
    assert sack(unit, 1, now=110)[1:] == [Retransmission(A, tsn(k), TIMEOUT) for k in (2, 3, 4, 5)]
    assert unit.state(A).cwnd == MTU + 100


def test_rwnd_is_a_rwnd_less_the_bytes_outstanding_rfc4960_6_2_1():
    unit, records = row(peer_a_rwnd=10_000)
    assert records == [Limit(A, tsn(5))] and unit.state(A).rwnd == 10_000        # A
    send(unit, 1, 5, now=0)
    assert unit.state(A).rwnd == 10_000 - 5 * CHUNK                               # B
    sack(unit, 1, [(2, 2)], now=10, a_rwnd=8000)                                  # TSN 1 and 3 acknowledged
    assert unit.state(A).rwnd == 8000 - 3 * CHUNK                                 # D ii: 2, 4, 5 outstanding
    # The window shrinks to 4500: 1500 left, room for one chunk (6.1 A), though cwnd would take three.
    assert sack(unit, 1, [(2, 2)], now=11, a_rwnd=4500) == [Limit(A, tsn(6))]
    # A zero window with nothing in flight still lets one chunk go (6.1 A) ...
    assert sack(unit, 5, now=12, a_rwnd=0) == [Retirement(A, tsn(2), tsn(5))]
    assert unit.state(A).rwnd == 0 and unit.state(A).limit == tsn(6)
    send(unit, 6, 6, now=12)
    # ... and only one: the next must wait for the window or for the flight to empty.
    assert sack(unit, 5, now=13, a_rwnd=0) == [] and unit.state(A).limit == tsn(6)
    assert sack(unit, 6, now=14, a_rwnd=0) == [Retirement(A, tsn(6), tsn(6)), Limit(A, tsn(7))]


def test_a_stale_sack_is_discarded_rfc4960_6_2_1_d_i():
    unit, _ = row()
    send(unit, 1, 5, now=0)
    sack(unit, 3, now=10, a_rwnd=50_000)
    before, chunks = unit.state(A), unit.chunks(A)
    assert before.rwnd == 50_000 - 2 * CHUNK
    # Out of order: its Cumulative TSN Ack is below the point, so nothing of it counts, not even a_rwnd.
    assert sack(unit, 2, [(2, 3)], now=11, a_rwnd=0, duplicates=[tsn(1)]) == []
    assert unit.state(A) == before and unit.chunks(A) == chunks


def test_cwnd_decays_per_rto_without_data_rfc4960_7_2_1():
    unit, _ = row(rto_initial=100, rto_min=100, rto_max=100)
    last = slow_start_rounds(unit, 6, now=0)                          # 4380 + 6 * 1500 = 13380; all acked at 11
    assert unit.state(A).cwnd == 13380 and unit.state(A).flight_size == 0
    assert unit.next_deadline() == 11 + 100
    assert unit.tick(110) == []
    # One RTO without data: cwnd = max(cwnd/2, 4*MTU); nothing in flight, so ceil(6690 / 1000) chunks may go.
    assert unit.tick(111) == [Limit(A, tsn(last + 7))] and unit.state(A).cwnd == max(13380 // 2, 4 * MTU)
    assert unit.tick(211) == [Limit(A, tsn(last + 6))] and unit.state(A).cwnd == max(6690 // 2, 4 * MTU)
    assert unit.tick(311) == [] and unit.state(A).cwnd == 4 * MTU    # never below 4*MTU by this rule


# ---------------------------------------------------------------- fast retransmit: RFC 4960 7.2.4, 7.2.3


def test_miss_indications_follow_htna_rfc4960_7_2_4():
    """Miss indications only for TSNs missing below the highest TSN newly acknowledged by the SACK."""
    unit, _ = row()
    send(unit, 1, 5, now=0)                                            # 1 and 3 lost

    def misses() -> list[int]:
        return [chunk.miss_indications for chunk in unit.chunks(A)]
    sack(unit, 0, [(2, 2)], now=10)
    assert misses() == [1, 0, 0, 0, 0]                                 # 3 is above TSN 2, the highest new one
    sack(unit, 0, [(2, 2)], now=11, duplicates=[tsn(2)])               # nothing newly acknowledged
    assert misses() == [1, 0, 0, 0, 0] and unit.state(A).duplicate_tsns_reported == 1
    sack(unit, 0, [(2, 2), (4, 4)], now=12)
    assert misses() == [2, 0, 1, 0, 0]
    records = sack(unit, 0, [(2, 2), (4, 5)], now=13)
    assert misses() == [3, 0, 2, 0, 0]
    assert [r for r in records if isinstance(r, Retransmission)] == [Retransmission(A, tsn(1), FAST)]


def fast_recovery(unit: TransportUnit) -> tuple[int, int]:
    """cwnd grown to 13380, 14 chunks sent at tick 20, the first lost, three SACKs reporting it missing.
    Returns (k of the last chunk before the 14, the tick of the third SACK)."""
    base = slow_start_rounds(unit, 6, now=0)
    assert unit.state(A).cwnd == 4380 + 6 * MTU == 13380
    assert unit.state(A).limit == tsn(base + 14)                       # ceil(13380 / 1000)
    send(unit, base + 1, base + 14, now=20)
    for tick, last in ((30, 2), (31, 3)):
        records = sack(unit, base, [(2, last)], now=tick)
        assert not [r for r in records if isinstance(r, Retransmission)]   # one and two miss indications
    return base, 32


def test_fast_retransmit_on_the_third_miss_indication_rfc4960_7_2_4_and_7_2_3():
    unit, _ = row()
    base, now = fast_recovery(unit)
    records = sack(unit, base, [(2, 4)], now=now)
    # Step 3: the chunk at once, cwnd aside. Flight 11000 (10 chunks and the retransmission) >= the new cwnd:
    # no new data, the LIMIT falls back to the highest TSN sent.
    assert records == [Retransmission(A, tsn(base + 1), FAST), Limit(A, tsn(base + 14))]
    state = unit.state(A)
    assert state.ssthresh == max(13380 // 2, 4 * MTU) == 6690               # 7.2.3
    assert state.cwnd == state.ssthresh and state.partial_bytes_acked == 0
    assert state.fast_recovery_exit == tsn(base + 14)                        # the highest TSN outstanding
    assert state.t3_deadline == now + state.rto_ticks                        # step 4: the first chunk went again
    assert unit.chunks(A)[0].fast_retransmitted


def test_no_further_reduction_in_fast_recovery_and_its_exit_point_rfc4960_7_2_4():
    unit, _ = row()
    base, now = fast_recovery(unit)
    sack(unit, base, [(2, 4)], now=now)                                # base+1 fast retransmitted, cwnd 6690
    # base+6 is lost too: base+5, +7, +8, +9 arrive.
    sack(unit, base, [(2, 5)], now=40)
    for tick, last in ((41, 7), (42, 8)):
        assert not [r for r in sack(unit, base, [(2, 5), (7, last)], now=tick) if isinstance(r, Retransmission)]
    # Third miss indication in Fast Recovery: retransmitted, cwnd and ssthresh untouched (flight 7000 >= 6690).
    assert sack(unit, base, [(2, 5), (7, 9)], now=43) == [Retransmission(A, tsn(base + 6), FAST)]
    assert (unit.state(A).cwnd, unit.state(A).ssthresh) == (6690, 6690)
    # base+1's retransmission arrives: the Cumulative TSN Ack advances short of the exit point: no growth.
    sack(unit, base + 5, [(2, 4)], now=50)
    state = unit.state(A)
    assert (state.cwnd, state.fast_recovery_exit) == (6690, tsn(base + 14))
    # All up to the exit point acknowledged: Fast Recovery is over, and this SACK grows cwnd again (7.2.1:
    # flight 6000 left less than an MTU of 6690 unused; 6000 bytes newly acknowledged).
    sack(unit, base + 14, now=60)
    state = unit.state(A)
    assert state.fast_recovery_exit is None and state.cwnd == 6690 + min(6000, MTU)


def test_growth_comes_before_the_fast_retransmit_reduction_rfc4960_7_2_4_note():
    """7.2.4's Note: a SACK that advances the Cumulative TSN Ack and completes a third miss indication first
    grows cwnd by 7.2.1, then halves it."""
    unit, _ = row()
    base = slow_start_rounds(unit, 6, now=0)                           # cwnd 13380
    send(unit, base + 1, base + 14, now=20)                            # base+1 late, base+2 lost
    sack(unit, base, [(3, 3)], now=30)
    sack(unit, base, [(3, 4)], now=31)
    # base+1 and base+5 arrive: 2000 bytes newly acknowledged, flight 12000 of 13380: fully utilized.
    records = sack(unit, base + 1, [(2, 4)], now=32)
    assert Retransmission(A, tsn(base + 2), FAST) in records
    cwnd = 13380 + min(2000, MTU)
    assert (unit.state(A).ssthresh, unit.state(A).cwnd) == (max(cwnd // 2, 4 * MTU),) * 2 == (7440, 7440)


def test_in_fast_recovery_every_tsn_reported_missing_counts_rfc4960_7_2_4():
    """In Fast Recovery a SACK that advances the Cumulative TSN Ack counts a miss indication for every TSN it
    reports missing, not only those below the highest TSN newly acknowledged."""
    unit, _ = row()
    base, now = fast_recovery(unit)
    sack(unit, base, [(2, 4)], now=now)                                # base+1 fast retransmitted
    sack(unit, base, [(2, 5)], now=40)                                 # base+6 lost
    sack(unit, base, [(2, 5), (7, 7)], now=41)
    assert unit.chunks(A)[5].miss_indications == 1
    # base+1's retransmission arrives: only base+1 is newly acknowledged, below base+6; base+6 counts anyway.
    sack(unit, base + 5, [(2, 2)], now=50)
    assert index(unit, unit.chunks(A)[0].tsn) == base + 6 and unit.chunks(A)[0].miss_indications == 2


# ---------------------------------------------------------------- T3-rtx: RFC 4960 6.3.2, 6.3.3, 7.2.3


def test_t3_rtx_timer_rules_rfc4960_6_3_2():
    unit, _ = row(rto_initial=100, rto_min=1, rto_max=10_000)
    send(unit, 1, 1, now=0)
    assert unit.state(A).t3_deadline == 100                            # R1
    send(unit, 2, 2, now=10)
    assert unit.state(A).t3_deadline == 100                            # running: not restarted
    sack(unit, 1, now=50)                                              # RTT 50: RTO 50 + 4 * 25 = 150
    assert unit.state(A).t3_deadline == 50 + 150                       # R3
    sack(unit, 1, [(1, 1)], now=60)                                    # all acknowledged (a Gap Ack Block)
    assert unit.state(A).t3_deadline is None                           # R2
    sack(unit, 1, now=70)                                              # the peer reneged on TSN 2
    assert unit.state(A).t3_deadline == 70 + 150                       # R4
    sack(unit, 2, now=80)
    assert unit.state(A).t3_deadline is None and unit.tick(10 ** 6) == []


def test_t3_rtx_expiry_backs_off_and_collapses_cwnd_rfc4960_6_3_3_and_7_2_3():
    unit, _ = row(rto_initial=100, rto_min=50, rto_max=1000)
    send(unit, 1, 5, now=0)
    assert unit.tick(99) == []
    # E3 with one chunk per packet (K = 1); the others wait; no new data.
    assert unit.tick(100) == [Retransmission(A, tsn(1), TIMEOUT)]
    state = unit.state(A)
    assert state.ssthresh == max(4380 // 2, 4 * MTU) == 6000 and state.cwnd == MTU       # E1, 7.2.3
    assert state.rto_ticks == 200 and state.t3_deadline == 100 + 200                    # E2, E4
    assert state.flight_size == CHUNK and state.limit == tsn(5)
    assert [chunk.marked for chunk in unit.chunks(A)] == [None] + [TIMEOUT] * 4
    # 7.2.3: one packet in flight until data is acknowledged.
    assert sack(unit, 0, now=150) == []
    # TSN 1 acknowledged: cwnd 1500 + 1000; the waiting chunks start while the flight is below it (6.1 B, C):
    # at 0, 1000 and 2000 bytes.
    assert sack(unit, 1, now=160) == [Retirement(A, tsn(1), tsn(1)), Retransmission(A, tsn(2), TIMEOUT),
                                      Retransmission(A, tsn(3), TIMEOUT), Retransmission(A, tsn(4), TIMEOUT)]
    state = unit.state(A)
    assert state.cwnd == MTU + CHUNK and state.t3_deadline == 160 + 200                 # R3, RTO still backed off
    assert state.srtt_ticks is None                                                     # Karn: TSN 1 was resent


def test_one_packet_after_a_timeout_until_data_is_acknowledged_rfc4960_7_2_3():
    unit, _ = row(rto_initial=100, rto_min=50, rto_max=1000)
    send(unit, 1, 5, now=0)
    assert unit.tick(100) == [Retransmission(A, tsn(1), TIMEOUT)]
    assert sack(unit, 0, now=150) == []                                # nothing delivered: still one packet
    # A Gap Ack Block acknowledges TSN 2 (it had arrived): data delivered, so the marked chunks may go as
    # cwnd (1 MTU) allows: TSN 3 starts at flight 1000.
    assert sack(unit, 0, [(2, 2)], now=160) == [Retransmission(A, tsn(3), TIMEOUT)]
    assert unit.state(A).cwnd == MTU                                   # no advance: no growth


def test_rto_bounds_and_back_off_rfc4960_6_3_1_c6_c7_and_6_3_3_e2():
    unit, _ = row()
    assert unit.state(A).rto_ticks == RTO_INITIAL_TICKS                # C1: RTO.Initial, 3 s
    send(unit, 1, 1, now=0)
    sack(unit, 1, now=10)                                              # 10 + 4 * 5 = 30 ticks
    assert unit.state(A).rto_ticks == RTO_MIN_TICKS                    # C6: RTO.Min, 1 s
    unit, _ = row(rto_max=2000)
    send(unit, 1, 1, now=0)
    sack(unit, 1, now=1000)                                            # 1000 + 4 * 500 = 3000 ticks
    assert unit.state(A).rto_ticks == 2000                             # C7
    unit, _ = row(rto_initial=300, rto_min=1, rto_max=1000)
    send(unit, 1, 1, now=0)
    backed_off = []
    for _ in range(4):
        unit.tick(unit.state(A).t3_deadline)
        backed_off.append(unit.state(A).rto_ticks)
    assert backed_off == [600, 1000, 1000, 1000]                       # E2, at most RTO.Max


def test_rto_parameters_in_ticks_round_up_rfc4960_15():
    for seconds, value in ((3.0, RTO_INITIAL_TICKS), (1.0, RTO_MIN_TICKS), (60.0, RTO_MAX_TICKS)):
        assert value == ticks(seconds) and (value - 1) * TICK_SECONDS < seconds <= value * TICK_SECONDS
    assert ticks(0) == 0 and ticks(Fraction(5 * 2 ** 17, 156_250_000)) == 5
    with pytest.raises(ValueError):
        ticks(-1)


# ---------------------------------------------------------------- RTT: RFC 4960 6.3.1


def rfc_rto(measurements: list[int]) -> tuple[Fraction, Fraction, int]:
    """SRTT, RTTVAR and RTO after `measurements` (ticks), by C2 and C3 with RTO.Alpha 1/8, RTO.Beta 1/4 (RFC 4960
    15), RTO rounded up to a whole tick."""
    alpha, beta = Fraction(1, 8), Fraction(1, 4)
    srtt = rttvar = None
    for r in measurements:
        if srtt is None:
            srtt, rttvar = Fraction(r), Fraction(r, 2)
        else:
            rttvar = (1 - beta) * rttvar + beta * abs(srtt - r)
            srtt = (1 - alpha) * srtt + alpha * r
    return srtt, rttvar, math.ceil(srtt + 4 * rttvar)


def test_rtt_measurements_rfc4960_6_3_1_c1_to_c4():
    unit, _ = row(rto_initial=300, rto_min=1, rto_max=100_000)
    state = unit.state(A)
    assert (state.rto_ticks, state.srtt_ticks) == (300, None)          # C1
    send(unit, 1, 2, now=0)                                            # TSN 1 is timed, TSN 2 is not
    sack(unit, 1, now=100)
    srtt, rttvar, rto = rfc_rto([100])                                 # C2
    assert (unit.state(A).srtt_ticks, unit.state(A).rttvar_ticks, unit.state(A).rto_ticks) == (srtt, rttvar, rto)
    sack(unit, 2, now=110)                                             # C4: once per round trip
    assert unit.state(A).srtt_ticks == 100
    send(unit, 3, 3, now=110)
    sack(unit, 3, now=170)
    srtt, rttvar, rto = rfc_rto([100, 60])                             # C3: 95, 47.5, 285
    assert (unit.state(A).srtt_ticks, unit.state(A).rttvar_ticks, unit.state(A).rto_ticks) == (srtt, rttvar, rto)
    unit, _ = row(rto_initial=300, rto_min=1, rto_max=100_000)
    for k, (sent_at, acked_at) in enumerate(((0, 7), (7, 17)), start=1):
        send(unit, k, k, now=sent_at)
        sack(unit, k, now=acked_at)
    srtt, rttvar, rto = rfc_rto([7, 10])                               # 7.375 + 4 * 3.375 = 20.875
    assert (unit.state(A).srtt_ticks, unit.state(A).rttvar_ticks, unit.state(A).rto_ticks) == (srtt, rttvar, 21)
    assert rto == 21


def test_karns_rule_rfc4960_6_3_1_c5():
    unit, _ = row(rto_initial=100, rto_min=1, rto_max=10_000)
    send(unit, 1, 1, now=0)                                            # timed
    assert unit.tick(100) == [Retransmission(A, tsn(1), TIMEOUT), Limit(A, tsn(1))]
    sack(unit, 1, now=130)                                             # ambiguous: no measurement
    assert (unit.state(A).srtt_ticks, unit.state(A).rto_ticks) == (None, 200)
    send(unit, 2, 2, now=130)
    sack(unit, 2, now=160)                                             # a new chunk: RTO collapses (6.3.3)
    assert (unit.state(A).srtt_ticks, unit.state(A).rto_ticks) == (30, rfc_rto([30])[2])
    # The implementation note: TSN 6 timed, TSN 2 (below it) fast retransmitted: TSN 6 is not measured either.
    unit, _ = row()
    send(unit, 1, 5, now=0)
    sack(unit, 1, now=10)                                              # TSN 1 timed: SRTT 10
    send(unit, 6, 6, now=10)                                           # TSN 6 timed; TSN 2 is lost
    for tick, last in ((20, 2), (21, 3), (22, 4)):
        records = sack(unit, 1, [(2, last)], now=tick)
    assert records[0] == Retransmission(A, tsn(2), FAST)
    sack(unit, 6, now=40)
    assert unit.state(A).srtt_ticks == 10


# ---------------------------------------------------------------- Gap Ack Blocks: RFC 4960 6.2.1 D iii, 3.3.4


def test_a_reneged_chunk_counts_a_miss_and_is_outstanding_again_rfc4960_6_2_1_d_iii():
    unit, _ = row()
    send(unit, 1, 4, now=0)
    sack(unit, 0, [(2, 3)], now=10)
    assert [c.gap_acked for c in unit.chunks(A)] == [False, True, True, False]
    assert unit.state(A).rwnd == WINDOW - 2 * CHUNK
    sack(unit, 0, now=20)                                              # 2 and 3 no longer acknowledged
    chunks = unit.chunks(A)
    assert [c.gap_acked for c in chunks] == [False] * 4
    assert [c.miss_indications for c in chunks] == [1, 1, 1, 0]        # 1 from the first SACK (HTNA)
    assert unit.state(A).rwnd == WINDOW - 4 * CHUNK                    # outstanding again (D ii)
    assert unit.state(A).flight_size == 2 * CHUNK                      # 1 and 4: the peer had 2 and 3


def test_only_the_first_four_gap_ack_blocks_are_read():
    """The unit's bound: blocks past the fourth are absent; TSNs past the fourth block read are neither
    acknowledged nor taken as reneged by that SACK."""
    unit, _ = row(chunk_bytes=400)
    send(unit, 1, 11, now=0, size=400)

    def acked() -> set[int]:
        return {index(unit, c.tsn) for c in unit.chunks(A) if c.gap_acked}
    sack(unit, 0, [(4, 4), (6, 6), (8, 8), (10, 10)], now=10)
    assert acked() == {4, 6, 8, 10}
    sack(unit, 0, [(2, 2), (4, 4), (6, 6), (8, 8), (10, 10)], now=11)
    assert acked() == {2, 4, 6, 8, 10}                                 # 10 stays acknowledged
    sack(unit, 0, [(2, 2), (4, 4), (6, 6), (8, 8), (10, 11)], now=12)
    assert acked() == {2, 4, 6, 8, 10}                                 # 11 is in the fifth block only
    sack(unit, 0, [(2, 2), (4, 4), (6, 6), (8, 8)], now=13)           # a whole SACK: 10 reneged
    assert acked() == {2, 4, 6, 8}


def test_a_sack_beyond_the_tsns_sent_is_a_protocol_violation():
    unit, _ = row()
    send(unit, 1, 3, now=0)
    assert sack(unit, 4, now=10) == [ProtocolViolation(A, tsn(4), tsn(3))]
    assert unit.state(A).failed and sack(unit, 3, now=11) == [] and unit.next_deadline() is None
    with pytest.raises(ValueError, match="failed"):
        unit.sent(A, tsn(4), CHUNK, 12)


# ---------------------------------------------------------------- failure: RFC 4960 8.1


def test_association_failure_past_max_retrans_rfc4960_8_1():
    unit, _ = row(rto_initial=100, rto_min=1, rto_max=100_000, max_retrans=2)
    send(unit, 1, 1, now=0)
    assert unit.tick(100) == [Retransmission(A, tsn(1), TIMEOUT), Limit(A, tsn(1))]     # RTO 200
    assert unit.tick(300) == [Retransmission(A, tsn(1), TIMEOUT)]     # RTO 400
    assert unit.state(A).error_count == 2
    assert sack(unit, 0, now=400) == [] and unit.state(A).error_count == 0   # a SACK: the peer is there
    assert unit.tick(700) == [Retransmission(A, tsn(1), TIMEOUT)]     # RTO 800
    assert unit.tick(1500) == [Retransmission(A, tsn(1), TIMEOUT)]    # RTO 1600
    assert unit.tick(3100) == [AssociationFailure(A, 3, tsn(0), tsn(1))]     # 3 > Association.Max.Retrans
    assert unit.tick(10 ** 6) == [] and sack(unit, 1, now=10 ** 6) == [] and unit.next_deadline() is None
    with pytest.raises(ValueError, match="failed"):
        unit.sent(A, tsn(2), CHUNK, 10 ** 6)


# ---------------------------------------------------------------- bounds and rows


def test_the_ring_bounds_the_chunks_in_flight():
    unit = TransportUnit(2, ring_tsns=8)
    # cwnd would release 44 chunks of 100 bytes; the ring holds 8.
    assert unit.reset(A, INITIAL, WINDOW, mtu=MTU, chunk_bytes=100, max_burst=64) == [Limit(A, tsn(8))]
    with pytest.raises(ValueError, match="next new chunk"):
        unit.sent(A, tsn(2), 100, 0)
    with pytest.raises(ValueError, match="size"):
        unit.sent(A, tsn(1), 101, 0)
    send(unit, 1, 8, now=0, size=100)
    with pytest.raises(ValueError, match="past the LIMIT"):
        unit.sent(A, tsn(9), 100, 0)
    assert sack(unit, 3, now=10) == [Retirement(A, tsn(1), tsn(3)), Limit(A, tsn(11))]


def test_rows_are_independent_and_must_be_written():
    unit, _ = row()
    with pytest.raises(ValueError, match="never written"):
        unit.sack(0, 0, WINDOW, (), (), 0)
    with pytest.raises(ValueError, match="not one of"):
        unit.reset(2, 0, WINDOW)
    with pytest.raises(ValueError, match="chunk_bytes"):
        unit.reset(0, 0, WINDOW, mtu=1500, chunk_bytes=1473)
    unit.reset(0, 100, WINDOW, rto_initial=50, rto_min=50, rto_max=50)
    unit.sent(0, 100, CHUNK, 0)
    send(unit, 1, 1, now=0)
    assert unit.next_deadline() == 50
    assert unit.tick(50) == [Retransmission(0, 100, TIMEOUT), Limit(0, 100)] and unit.state(A).cwnd == 4380


# ---------------------------------------------------------------- against the host's SCTP


def host_requests(host, now: int, sack_record=None) -> list:
    """The host's SCTP takes the SACK (if any) at tick `now` and may send: its LIMIT, ACK and RESEND requests."""
    seconds = now * TICK_SECONDS
    if sack_record is not None:
        packet = SctpPacket(host.config.peer_port, host.config.local_port, host.local_tag, (sack_record.chunk(),))
        host.receive(packet.encode(), seconds)
    host.data_to_send(seconds)
    return host.engine_requests()


@pytest.mark.parametrize("seed, window", [(1, 65536), (2, 65536), (3, 12000), (4, 12000)])
def test_the_hosts_sctp_agrees_on_a_lossy_run(seed, window):
    """The host's SCTP (`send_offloaded`) and the unit take the same SACKs, from the receive engine's own
    acknowledgement unit (`SackUnit`, a_rwnd shrinking with each chunk held past a gap), and must agree after
    each: the Cumulative TSN Ack (ACK / Retirement), the TSNs fast retransmitted (RESEND / Retransmission),
    the new TSNs released (LIMIT), cwnd, ssthresh, flight size and rwnd.

    Full-sized chunks (the LIMIT assumes them); 3% of new chunks lost, a new loss only once every earlier
    one is acknowledged and Fast Recovery is over (so no two chunks reach three miss indications together,
    and none on the SACK that ends Fast Recovery: there the two readings part, see the module docs);
    retransmissions and SACKs are never lost, so T3-rtx never expires; 3 ticks each way."""
    rng, delay = random.Random(seed), 3
    link = established_link(client_overrides={"heartbeat_interval": None},
                            server_overrides={"receive_buffer": window})
    host = link.client
    size, first = host.config.max_user_data, host.next_tsn
    for _ in range(6000):
        host.send_offloaded(0, PPID_DDP_SEGMENT, size)
    unit = TransportUnit(1)
    [limit] = unit.reset(0, first, window, mtu=host.config.max_packet_size, chunk_bytes=size)
    peer = SackUnit(1)
    peer.reset(0, (first - 1) & 0xFFFFFFFF, window=window, held_bytes=size)
    [host_limit] = [r.tsn for r in host_requests(host, 0) if r.kind is EngineRequestKind.LIMIT]
    assert host_limit == limit.tsn
    to_peer: deque[tuple[int, int]] = deque()                          # (arrival tick, TSN)
    to_sender: deque = deque()                                         # (arrival tick, SackRecord)
    next_new, last_lost = first, None
    fast_retransmits = sacks = growth_in_avoidance = rwnd_limited = 0

    def send_new(now: int) -> None:
        nonlocal next_new, last_lost
        while (limit.tsn - next_new) & 0xFFFFFFFF < 1 << 31:          # next_new <= LIMIT
            state = unit.state(0)
            recovered = last_lost is None or (state.cumulative_tsn_ack - last_lost) & 0xFFFFFFFF < 1 << 31
            unit.sent(0, next_new, size, now)
            if recovered and state.fast_recovery_exit is None and rng.random() < 0.03:
                last_lost = next_new
            else:
                to_peer.append((now + delay, next_new))
            next_new = (next_new + 1) & 0xFFFFFFFF

    send_new(0)
    for now in range(1, 2500):
        while to_peer and to_peer[0][0] == now:
            to_sender.extend((now + delay, record) for record in peer.chunk(0, to_peer.popleft()[1], now))
        to_sender.extend((now + delay, record) for record in peer.tick(now))
        while to_sender and to_sender[0][0] == now:
            record = to_sender.popleft()[1]
            sacks += 1
            before = unit.state(0)
            records = unit.sack(0, record.cumulative_tsn_ack, record.a_rwnd, record.gap_blocks,
                                record.duplicate_tsns, now)
            requests = host_requests(host, now, record)
            assert [r.tsn for r in requests if r.kind is EngineRequestKind.ACK] == \
                [r.last_tsn for r in records if isinstance(r, Retirement)]
            resent = [r for r in records if isinstance(r, Retransmission)]
            assert [r.tsn for r in requests if r.kind is EngineRequestKind.RESEND] == [r.tsn for r in resent]
            for retransmission in resent:
                assert retransmission.cause is FAST
                fast_retransmits += 1
                to_peer.append((now + delay, retransmission.tsn))
            limit = next((r for r in reversed(records) if isinstance(r, Limit)), limit)
            send_new(now)
            host_limit = next((r.tsn for r in reversed(requests) if r.kind is EngineRequestKind.LIMIT), host_limit)
            state, stats = unit.state(0), host.statistics
            assert host_limit == state.highest_tsn_sent
            assert (state.cwnd, state.ssthresh, state.flight_size, state.rwnd) == \
                (stats.cwnd, stats.ssthresh, stats.flight_size, stats.peer_rwnd)
            growth_in_avoidance += before.cwnd > before.ssthresh and state.cwnd > before.cwnd
            rwnd_limited += state.rwnd < state.cwnd - state.flight_size
        assert unit.tick(now) == []
    assert sacks > 1000 and fast_retransmits > 40 and growth_in_avoidance > 5
    assert rwnd_limited > 100 if window < 20_000 else True

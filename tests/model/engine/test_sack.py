"""The receive engine's acknowledgement unit (model/engine/sack.py) against RFC 4960 6.2, 6.7 and 3.3.4.

Expectations: the RFC's rules written out per case; the host's own receive
bookkeeping (`model.sctp.tsn_tracker.TsnTracker`, written for the software
SCTP) for the Cumulative TSN Ack, the Gap Ack Blocks and the duplicates
wherever the unit's bounds are not reached; scapy's SCTP decoder for the
SACK chunk's bytes.
"""

import random

import pytest
from scapy.layers.sctp import SCTPChunkSACK

from model.engine.sack import DEFAULT_DELAY_TICKS, DEFAULT_WINDOW, TICK_SECONDS, SackRecord, SackUnit
from model.sctp.tsn_tracker import TsnTracker

WINDOW = DEFAULT_WINDOW
START = 0xFFFFFFF0   # the peer's initial TSN - 1: the TSNs wrap past 2**32 in these runs (RFC 4960 1.6)


def unit(**options) -> SackUnit:
    sack = SackUnit(2, **options)
    sack.reset(1, START)
    return sack


def tsn(offset: int) -> int:
    return (START + offset) & 0xFFFFFFFF


def test_a_packet_with_the_i_bit_is_sacked_without_delay_rfc9260_6_2():
    """RFC 9260 3.3.1 and 6.2 (RFC 7053 4.2): a packet one of whose DATA chunks has the I bit set is SACKed at
    once, where the same lone packet without it waits for the delayed SACK; the bit asks for that packet's SACK
    only."""
    sack = unit()
    assert sack.chunk(1, tsn(1), 0, packet_end=False, immediate=True) == []
    assert sack.chunk(1, tsn(2), 0) == [SackRecord(1, tsn(2), (), (), WINDOW)]
    assert sack.chunk(1, tsn(3), 1) == [] and sack.next_deadline() == 1 + DEFAULT_DELAY_TICKS
    assert sack.chunk(1, tsn(4), 2, immediate=True) == [SackRecord(1, tsn(4), (), (), WINDOW)]


def test_every_second_packet_and_the_delayed_sack_rfc4960_6_2():
    sack = unit()
    assert sack.chunk(1, tsn(1), now=10) == []            # the first packet waits ...
    assert sack.tick(10 + DEFAULT_DELAY_TICKS - 1) == []
    assert sack.chunk(1, tsn(2), now=11) == [SackRecord(1, tsn(2), (), (), WINDOW)]   # ... the second is SACKed
    assert sack.chunk(1, tsn(3), now=20) == []
    assert sack.next_deadline() == 20 + DEFAULT_DELAY_TICKS
    assert sack.tick(20 + DEFAULT_DELAY_TICKS) == [SackRecord(1, tsn(3), (), (), WINDOW)]   # the delayed SACK
    assert sack.tick(10 ** 6) == [] and sack.next_deadline() is None
    # 200 ms by default, within the RFC's 500 ms bound.
    assert 0.19 < DEFAULT_DELAY_TICKS * TICK_SECONDS <= 0.2


def test_a_packet_of_several_chunks_counts_once_rfc4960_6_2():
    sack = unit()
    assert sack.chunk(1, tsn(1), 0, packet_end=False) == [] and sack.chunk(1, tsn(2), 0) == []
    assert sack.chunk(1, tsn(3), 1, packet_end=False) == []
    assert sack.chunk(1, tsn(4), 1) == [SackRecord(1, tsn(4), (), (), WINDOW)]


def test_a_gap_is_sacked_at_once_and_so_is_its_closing_rfc4960_6_7():
    sack = unit()
    assert sack.chunk(1, tsn(1), 0) == []
    assert sack.chunk(1, tsn(3), 0) == [SackRecord(1, tsn(1), ((2, 2),), (), WINDOW)]
    # 6.7: each packet that does not fill the gap is SACKed.
    assert sack.chunk(1, tsn(5), 0) == [SackRecord(1, tsn(1), ((2, 2), (4, 4)), (), WINDOW)]
    assert sack.chunk(1, tsn(2), 0) == [SackRecord(1, tsn(3), ((2, 2),), (), WINDOW)]
    assert sack.chunk(1, tsn(4), 0) == [SackRecord(1, tsn(5), (), (), WINDOW)]   # the gap closed: at once


def test_duplicates_are_sacked_at_once_and_listed_once_rfc4960_6_2():
    sack = unit(duplicate_tsns=2)
    sack.chunk(1, tsn(1), 0)
    assert sack.chunk(1, tsn(1), 0) == [SackRecord(1, tsn(1), (), (tsn(1),), WINDOW)]
    sack.chunk(1, tsn(3), 0)
    # A packet of three duplicates (one below the Cumulative TSN Ack, one in the map): two listed, one counted.
    for offset in (1, 3):
        assert sack.chunk(1, tsn(offset), 0, packet_end=False) == []
    assert sack.chunk(1, tsn(0), 0) == [SackRecord(1, tsn(1), ((2, 2),), (tsn(1), tsn(3)), WINDOW)]
    assert sack.duplicates_dropped(1) == 1
    assert sack.chunk(1, tsn(2), 0) == [SackRecord(1, tsn(3), (), (), WINDOW)]   # "since the last SACK": none left


def test_beyond_the_map_is_dropped_and_sacked_at_once_rfc4960_6_2():
    sack = unit(map_tsns=4)
    assert sack.chunk(1, tsn(6), 0) == [SackRecord(1, tsn(0), (), (), WINDOW)]    # offset 6 > 4: not recorded
    assert sack.chunk(1, tsn(4), 0) == [SackRecord(1, tsn(0), ((4, 4),), (), WINDOW)]
    for offset in (1, 2, 3):
        sack.chunk(1, tsn(offset), 0, packet_end=False)
    assert sack.chunk(1, tsn(6), 0) == [SackRecord(1, tsn(4), ((2, 2),), (), WINDOW)]   # now within the map


def test_at_most_the_lowest_gap_blocks_rfc4960_3_3_4():
    sack = unit(gap_blocks=2)
    for offset in (3, 5, 7):
        sack.chunk(1, tsn(offset), 0, packet_end=False)
    assert sack.chunk(1, tsn(9), 0) == [SackRecord(1, tsn(0), ((3, 3), (5, 5)), (), WINDOW)]


def test_rows_are_independent_and_must_be_written():
    sack = unit()
    with pytest.raises(ValueError, match="never written"):
        sack.chunk(0, 1, 0)
    with pytest.raises(ValueError, match="not one of"):
        sack.reset(2, 0)
    sack.reset(0, 99)
    assert sack.chunk(0, 100, 0) == [] and sack.chunk(1, tsn(1), 0) == []
    assert sack.tick(DEFAULT_DELAY_TICKS) == [SackRecord(0, 100, (), (), WINDOW), SackRecord(1, tsn(1), (), (), WINDOW)]


def test_the_sack_chunk_as_scapy_decodes_it():
    record = SackRecord(1, tsn(3), ((2, 4), (7, 7)), (tsn(2), tsn(1)), 0x10000)
    decoded = SCTPChunkSACK(record.chunk().encode())
    assert (decoded.cumul_tsn_ack, decoded.a_rwnd, decoded.n_gap_ack, decoded.n_dup_tsn) == (tsn(3), 0x10000, 2, 2)
    assert decoded.gap_ack_list == ["2:4", "7:7"] and decoded.dup_tsn_list == [tsn(2), tsn(1)]


def test_a_rwnd_is_the_window_less_what_waits_past_a_gap_rfc4960_6_2():
    """The buffer left (RFC 4960 6.2): every TSN received past the Cumulative TSN Ack holds `held_bytes`; the
    window comes back as the gap fills, and a_rwnd never goes below 0."""
    sack = SackUnit(2)
    sack.reset(1, START, window=4000, held_bytes=1500)
    assert sack.chunk(1, tsn(2), 0) == [SackRecord(1, tsn(0), ((2, 2),), (), 2500)]
    assert sack.chunk(1, tsn(3), 0) == [SackRecord(1, tsn(0), ((2, 3),), (), 1000)]
    assert sack.chunk(1, tsn(5), 0) == [SackRecord(1, tsn(0), ((2, 3), (5, 5)), (), 0)]   # 4500 held: 0
    assert sack.chunk(1, tsn(1), 0) == [SackRecord(1, tsn(3), ((2, 2),), (), 2500)]


def test_a_flush_sends_only_an_owed_delayed_sack_rfc4960_6_2():
    """The host's flush before a Terminate: the delayed SACK of a waiting packet leaves now, its countdown
    stops; with no packet waiting, or on a disabled row, nothing is sent."""
    sack = unit()
    assert sack.flush(1) == []                            # nothing received
    assert sack.chunk(1, tsn(1), now=10) == []
    assert sack.flush(1) == [SackRecord(1, tsn(1), (), (), WINDOW)]
    assert sack.flush(1) == [] and sack.next_deadline() is None and sack.tick(10 ** 6) == []
    assert sack.chunk(1, tsn(2), now=11) == []            # the packet count started again from the flush
    assert sack.chunk(1, tsn(3), now=12) == [SackRecord(1, tsn(3), (), (), WINDOW)]
    sack.reset(0, START, enabled=False)
    assert sack.chunk(0, tsn(1), 0) == [] and sack.flush(0) == []


def test_a_row_written_disabled_takes_no_records():
    """The host SACKs such an association itself: the unit neither records its TSNs nor sends SACKs for it."""
    sack = SackUnit(2)
    sack.reset(0, START, enabled=False)
    assert sack.chunk(0, tsn(2), 0) == [] and sack.chunk(0, tsn(1), 0) == [] and sack.tick(10 ** 6) == []
    assert sack.cumulative_tsn(0) == START
    with pytest.raises(ValueError, match="out of range"):
        sack.reset(0, START, delay_ticks=1024)


@pytest.mark.parametrize("seed", range(6))
def test_the_host_trackers_view_within_the_bounds(seed):
    """Random arrivals (loss, reordering, duplication, packets of 1-3 chunks) kept within the map: every SACK
    the unit sends says what the host's TsnTracker says at that moment, and one is sent exactly when the
    RFC asks."""
    rng = random.Random(seed)
    sack, tracker = unit(map_tsns=64, gap_blocks=64, duplicate_tsns=64), TsnTracker(START)
    highest, packets_since_sack, sacks = 0, 0, 0
    for _ in range(400):
        chunks = []
        for _ in range(rng.randint(1, 3)):
            low = (tracker.cumulative_tsn - START) & 0xFFFFFFFF
            chunks.append(rng.randint(max(1, low - 3), min(low + 64, highest + 5)))
        gap_before = tracker.has_gaps
        duplicate = False
        for index, offset in enumerate(chunks):
            highest = max(highest, offset)
            duplicate |= not tracker.accept(tsn(offset)) and tracker.is_duplicate(tsn(offset))
            out = sack.chunk(1, tsn(offset), 0, packet_end=index == len(chunks) - 1)
        packets_since_sack += 1
        due = duplicate or tracker.has_gaps or gap_before or packets_since_sack >= 2
        assert bool(out) == due
        if out:
            sacks += 1
            packets_since_sack = 0
            assert out == [SackRecord(1, tracker.cumulative_tsn, tracker.gap_blocks(), tracker.take_duplicates(), WINDOW)]
    assert sacks > 100

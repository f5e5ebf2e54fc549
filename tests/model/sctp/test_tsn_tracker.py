"""Tests for model.sctp.tsn_tracker: cumulative TSN, gap blocks and duplicates (RFC 4960 6.2, 3.3.4)."""

from model.sctp.tsn_tracker import TsnTracker


def test_rfc4960_3_3_4_gap_blocks_are_offsets_from_the_cumulative_tsn() -> None:
    tracker = TsnTracker(cumulative_tsn=99)
    for tsn in (100, 102, 103, 106):
        assert tracker.accept(tsn)
    assert tracker.cumulative_tsn == 100
    assert tracker.gap_blocks() == ((2, 3), (6, 6))
    assert tracker.gap_blocks(limit=1) == ((2, 3),)
    assert tracker.accept(101)
    assert tracker.cumulative_tsn == 103 and tracker.gap_blocks() == ((3, 3),)


def test_rfc4960_6_2_duplicates_reported_once() -> None:
    tracker = TsnTracker(cumulative_tsn=99)
    tracker.accept(100)
    tracker.accept(102)
    assert not tracker.accept(100) and not tracker.accept(102)
    assert tracker.take_duplicates() == (100, 102)
    assert tracker.take_duplicates() == ()


def test_tsn_wraps_at_2_32() -> None:
    tracker = TsnTracker(cumulative_tsn=0xFFFFFFFE)
    assert tracker.accept(0)
    assert tracker.gap_blocks() == ((2, 2),)
    assert tracker.accept(0xFFFFFFFF)
    assert tracker.cumulative_tsn == 0 and not tracker.has_gaps


def test_tsn_beyond_16_bit_gap_offset_refused_and_old_tsn_duplicate() -> None:
    tracker = TsnTracker(cumulative_tsn=1000)
    assert not tracker.accept(1000 + 0x10000)
    assert tracker.accept(1000 + 0xFFFF)
    assert not tracker.accept(5) and tracker.take_duplicates() == (5,)


def test_gap_blocks_match_the_tsns_held_in_any_arrival_order() -> None:
    """The runs kept per arrival give the same Gap Ack Blocks (3.3.4) as sorting every TSN held, across the wrap."""
    import random

    rng = random.Random(7)
    for _ in range(50):
        start = rng.choice((0, 1000, 0xFFFFFFF0))
        tracker = TsnTracker(cumulative_tsn=start)
        received: set[int] = set()
        for _ in range(60):
            offset = rng.randrange(1, 40)
            tsn = (start + offset) & 0xFFFFFFFF
            tracker.accept(tsn)
            received.add(offset)
        cumulative = 0
        while cumulative + 1 in received:
            cumulative += 1
        assert tracker.cumulative_tsn == (start + cumulative) & 0xFFFFFFFF
        above = sorted(offset - cumulative for offset in received if offset > cumulative)
        blocks: list[tuple[int, int]] = []
        for offset in above:
            if blocks and blocks[-1][1] + 1 == offset:
                blocks[-1] = (blocks[-1][0], offset)
            else:
                blocks.append((offset, offset))
        assert tracker.gap_blocks() == tuple(blocks)


def test_vouched_chunks_close_the_range_they_count_and_no_more() -> None:
    """Two streams interleave: stream A's TSNs 100, 102, 104 (its last, 104, named), stream B's 101, 103 (its
    last, 103, named). A vouches for 2 chunks below 104; with 103 known that leaves 101 missing until B vouches
    for 1 below 103: then every TSN up to 104 arrived."""
    tracker = TsnTracker(cumulative_tsn=99)
    tracker.accept(104)
    tracker.vouch(104, 2)
    assert tracker.cumulative_tsn == 99   # 100..103: four TSNs, two vouched, none known
    tracker.accept(103)
    assert tracker.cumulative_tsn == 99   # three of four: 101 may be missing
    tracker.vouch(103, 1)
    assert tracker.cumulative_tsn == 104 and tracker.gap_blocks() == ()
    assert tracker.accept(105) and tracker.cumulative_tsn == 105


def test_vouched_chunks_leave_a_real_gap_open() -> None:
    """A vouch that cannot account for every TSN below it moves nothing: 100 was lost, 101 and 102 were placed
    without being named, 103 named: two vouched, three TSNs missing before 103."""
    tracker = TsnTracker(cumulative_tsn=99)
    tracker.accept(103)
    tracker.vouch(103, 2)
    assert tracker.cumulative_tsn == 99 and tracker.gap_blocks() == ((4, 4),)
    tracker.accept(100)   # the retransmission
    assert tracker.cumulative_tsn == 103 and tracker.gap_blocks() == ()

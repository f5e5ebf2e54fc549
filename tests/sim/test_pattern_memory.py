"""`sim.commands.pattern_memory`: a PatternMemory reads and writes like a SparseMemory holding the same bytes.

The reference is a plain `SparseMemory` that stores everything: the source region preloaded with the
pattern, then every write applied to both.  Whatever the order, overlap or content of the writes, both read
the same, and `intact` is true exactly where the reference holds the expected pattern.
"""

from __future__ import annotations

import random

import pytest

from model.ddp.memory import SparseMemory
from sim.commands.pattern_memory import BLOCK, Pattern, PatternMemory

SOURCE, SINK, LENGTH = 0x10_000, 0x40_000, 3 * BLOCK + 123


def test_a_pattern_is_the_same_slice_however_it_is_read_and_differs_by_key_and_offset() -> None:
    whole = Pattern(5).read(0, 3 * BLOCK)
    assert len(whole) == 3 * BLOCK
    assert Pattern(5).read(BLOCK - 10, 30) == whole[BLOCK - 10:BLOCK + 20]
    assert Pattern(6).read(0, 64) != whole[:64]
    assert whole[:BLOCK] != whole[BLOCK:2 * BLOCK]


@pytest.mark.parametrize("seed", range(20))
def test_reads_and_intact_match_a_memory_that_stores_every_byte(seed: int) -> None:
    rng = random.Random(seed)
    memory, reference = PatternMemory(), SparseMemory()
    memory.add_source(SOURCE, LENGTH, key=1)
    memory.add_sink(SINK, LENGTH, key=2)
    reference.write(SOURCE, Pattern(1).read(0, LENGTH))
    expected = Pattern(2).read(0, LENGTH)
    for _ in range(60):
        base = rng.choice((SOURCE, SINK, SINK, SINK, 0x80_000))
        offset = rng.randrange(-50, LENGTH)
        count = rng.randrange(0, 2000)
        address = max(base + offset, 0)
        if base == SINK and rng.random() < 0.8 and 0 <= offset and offset + count <= LENGTH:
            data = expected[offset:offset + count]  # what the peer's data would place
        else:
            data = rng.randbytes(count)  # damage, or a write elsewhere, or across an edge
        memory.write(address, data)
        reference.write(address, data)
    for address, length in ((SOURCE, LENGTH), (SINK, LENGTH), (SINK - 64, 200), (SINK + LENGTH - 100, 200),
                            (0x80_000, 2100)):
        assert memory.read(address, length) == reference.read(address, length)
    assert memory.intact(SINK, LENGTH) == (reference.read(SINK, LENGTH) == expected)
    for start in range(0, LENGTH, 97):
        assert memory.intact(SINK + start, 97) == (reference.read(SINK + start, 97) == expected[start:start + 97])


def test_a_sink_filled_out_of_order_in_segments_is_intact_and_keeps_no_bytes() -> None:
    memory = PatternMemory()
    size = 40 * BLOCK
    memory.add_sink(SINK, size, key=9)
    expected = Pattern(9).read(0, size)
    pieces = [(offset, expected[offset:offset + 1000]) for offset in range(0, size, 1000)]
    random.Random(1).shuffle(pieces)
    for offset, data in pieces:
        assert not memory.intact(SINK, size)
        memory.write(SINK + offset, data)
    assert memory.intact(SINK, size) and memory.read(SINK, size) == expected
    assert memory.writes == [] and memory._pages == {}  # nothing stored, nothing logged
    assert memory.bytes_written == size


def test_a_damaged_byte_breaks_the_sink_until_the_right_byte_is_placed_again() -> None:
    memory = PatternMemory()
    memory.add_sink(SINK, 100, key=3)
    expected = Pattern(3).read(0, 100)
    memory.write(SINK, expected)
    memory.write(SINK + 40, bytes([expected[40] ^ 0xFF]))
    assert not memory.intact(SINK, 100) and memory.intact(SINK, 40) and memory.intact(SINK + 41, 59)
    assert memory.read(SINK + 39, 3) == bytes([expected[39], expected[40] ^ 0xFF, expected[41]])
    memory.write(SINK + 40, expected[40:41])
    assert memory.intact(SINK, 100)


def test_writes_outside_the_regions_are_logged_for_the_stray_write_check() -> None:
    memory = PatternMemory()
    memory.add_sink(SINK, 100, key=3)
    memory.write(SINK + 90, b"x" * 20)  # across the sink's end
    memory.write(0x1234, b"yy")
    assert memory.written_outside([(SINK, 100)]) == [(SINK + 90, 20), (0x1234, 2)]


def test_regions_may_not_overlap() -> None:
    memory = PatternMemory()
    memory.add_source(SOURCE, 100, key=1)
    with pytest.raises(ValueError):
        memory.add_sink(SOURCE + 99, 10, key=2)

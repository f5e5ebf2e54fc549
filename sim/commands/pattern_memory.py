"""Host memory for `rnic demo` that does not grow with the data: patterns instead of stored bytes.

The demo's hosts send data they can recompute and check what arrives
against it, so neither side needs to keep the bytes:

* a *source* region reads as `Pattern(key)` at the offset within the
  region (what the host writes, sends and lets its peer read);
* a *sink* region compares every write with the pattern it expects there and
  keeps only which byte ranges hold it (`intact`); a write that differs
  is stored as ordinary memory and its range is no longer intact, so
  `read` returns what the memory really holds.

Everything else is a `SparseMemory`, whose write log sees only writes
outside the regions (those are what a stray-write check looks for).  A
pattern is 4 KiB blocks, each drawn from its own seeded generator, so any
slice costs what it spans and two keys or two offsets never give the same
bytes.
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass, field

from model.ddp.memory import SparseMemory

BLOCK = 4096

_MULTIPLIER = random.Random(0).getrandbits(8 * BLOCK) | 1
"""A fixed odd number of a block's width: multiplying by it is one-to-one modulo 2^(8*BLOCK)."""
_BLOCK_MASK = (1 << (8 * BLOCK)) - 1


class Pattern:
    """The bytes of pattern `key`: block i is (2 * (key * 2^48 + i) + 1) * `_MULTIPLIER` modulo 2^(8*BLOCK), as
    BLOCK bytes, least significant first. An odd multiplier is invertible modulo a power of two, so distinct
    (key, i) give distinct blocks, every one of them random-looking (the product of an odd seed and a random
    number); one multiplication costs about a third of what seeding a `random.Random` and drawing 4 KiB does."""

    def __init__(self, key: int) -> None:
        self.key = key
        self._index = -1
        self._block = b""

    def _block_at(self, index: int) -> bytes:
        if index != self._index:  # one block kept: reads and writes mostly go in order
            seed = 2 * ((self.key << 48) | index) + 1   # indices below 2^48: 2^60 bytes of pattern per key
            self._block = (seed * _MULTIPLIER & _BLOCK_MASK).to_bytes(BLOCK, "little")
            self._index = index
        return self._block

    def read(self, offset: int, length: int) -> bytes:
        index, start = divmod(offset, BLOCK)
        if start + length <= BLOCK:   # within one block: a DDP segment's worth mostly is
            return self._block_at(index)[start:start + length]
        out = bytearray()
        while length > 0:
            index, start = divmod(offset, BLOCK)
            count = min(BLOCK - start, length)
            out += self._block_at(index)[start:start + count]
            offset += count
            length -= count
        return bytes(out)


@dataclass
class _Region:
    address: int
    length: int
    pattern: Pattern
    intact: list[tuple[int, int]] = field(default_factory=list)
    """Sorted, disjoint, non-adjacent [start, end) offsets that hold the pattern."""

    def mark(self, start: int, end: int, holds_pattern: bool) -> None:
        """Record that [start, end) now holds the pattern, or does not."""
        intact = self.intact
        if holds_pattern and intact and intact[-1][1] == start < end:   # the next bytes in order: the last
            intact[-1] = (intact[-1][0], end)                           # range grows (nothing lies beyond it)
            return
        low = bisect.bisect_left(self.intact, (start, start))
        if low and self.intact[low - 1][1] >= start:
            low -= 1
        high = low
        kept: list[tuple[int, int]] = []
        merged_start, merged_end = start, end
        while high < len(self.intact) and self.intact[high][0] <= end:
            first, last = self.intact[high]
            if holds_pattern:
                merged_start, merged_end = min(merged_start, first), max(merged_end, last)
            else:
                if first < start:
                    kept.append((first, start))
                if last > end:
                    kept.append((end, last))
            high += 1
        if holds_pattern:
            kept = [(merged_start, merged_end)]
        self.intact[low:high] = kept

    def holds(self, start: int, end: int) -> bool:
        """Whether one intact range covers [start, end), start < end: `covered(start, end) == [(start, end)]`
        (the ranges are disjoint), found by one bisection."""
        index = bisect.bisect_right(self.intact, (start, math.inf)) - 1
        return index >= 0 and self.intact[index][1] >= end

    def covered(self, start: int, end: int) -> list[tuple[int, int]]:
        """The intact ranges clipped to [start, end)."""
        index = max(bisect.bisect_left(self.intact, (start, start)) - 1, 0)
        out = []
        for first, last in self.intact[index:]:
            if first >= end:
                break
            if last > start:
                out.append((max(first, start), min(last, end)))
        return out


class PatternMemory(SparseMemory):
    """A SparseMemory with source and sink regions (see the module docstring)."""

    def __init__(self, fill: int = 0) -> None:
        super().__init__(fill)
        self._regions: list[_Region] = []
        self._recent: list[_Region] = []
        """The two regions `_region` found last, the latest first: a host reads its source and writes one sink
        at a time, a segment after another."""
        self.bytes_written = 0
        """Every byte written, inside the regions or not."""

    def add_source(self, address: int, length: int, key: int) -> None:
        """[address, address+length) reads as pattern `key` from its first byte."""
        self._add(_Region(address, length, Pattern(key), [(0, length)] if length else []))

    def add_sink(self, address: int, length: int, key: int) -> None:
        """[address, address+length) expects pattern `key` from its first byte; nothing is intact yet."""
        self._add(_Region(address, length, Pattern(key)))

    def intact(self, address: int, length: int) -> bool:
        """True if every byte of the range lies in one region and holds that region's pattern."""
        region = self._region(address, length)
        if region is None:
            return length == 0
        start = address - region.address
        return region.covered(start, start + length) == ([(start, start + length)] if length else [])

    def write(self, address: int, data: bytes) -> None:
        data = bytes(data)
        self.bytes_written += len(data)
        region = self._region(address, len(data))
        if region is None or not data:
            end = address + len(data)
            for other in self._regions:  # whatever part of a region this covers now holds these bytes
                first, last = max(address, other.address), min(end, other.address + other.length)
                if first < last:
                    other.mark(first - other.address, last - other.address, holds_pattern=False)
            super().write(address, data)
            return
        start = address - region.address
        holds_pattern = data == region.pattern.read(start, len(data))
        region.mark(start, start + len(data), holds_pattern)
        if not holds_pattern:
            super().write(address, data)

    def read(self, address: int, length: int) -> bytes:
        region = self._region(address, length)
        if region is not None and length:
            start = address - region.address
            if region.holds(start, start + length):
                return region.pattern.read(start, length)   # all of it the pattern: nothing else to look at
        out = bytearray(super().read(address, length))
        end = address + length
        for region in self._regions:
            first, last = max(address, region.address), min(end, region.address + region.length)
            if first >= last:
                continue
            for start, stop in region.covered(first - region.address, last - region.address):
                at = region.address + start - address
                out[at:at + stop - start] = region.pattern.read(start, stop - start)
        return bytes(out)

    def _add(self, region: _Region) -> None:
        end = region.address + region.length
        for other in self._regions:
            if region.address < other.address + other.length and other.address < end:
                raise ValueError(f"region at 0x{region.address:x} overlaps the one at 0x{other.address:x}")
        self._regions.append(region)

    def _region(self, address: int, length: int) -> _Region | None:
        """The region holding all of [address, address+length), if any (a write that straddles a region's
        edge is ordinary memory, and so is seen by the stray-write check)."""
        end = address + length
        for region in self._recent:   # regions do not overlap: the one that holds the range is the one
            if region.address <= address and end <= region.address + region.length:
                return region
        for region in self._regions:
            if region.address <= address and end <= region.address + region.length:
                self._recent = [region, *self._recent[:1]]
                return region
        return None

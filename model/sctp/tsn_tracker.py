"""Receive-side TSN bookkeeping for SACK generation, RFC 4960 6.2 and 3.3.4.

`TsnTracker` remembers the Cumulative TSN (the last TSN of the contiguous run
received) and every TSN received beyond it, detects duplicates, and renders
the Gap Ack Blocks (offsets from the Cumulative TSN Ack, 3.3.4) and the
Duplicate TSNs of the next SACK.  Duplicates are reported once each, in the
next SACK only (6.2: "the list of duplicate TSNs ... since the last SACK").

The TSNs beyond the Cumulative TSN are also kept as runs (first TSN -> last
TSN, merged as TSNs arrive), so a SACK's Gap Ack Blocks cost time in the
number of blocks, not in the number of TSNs held.

TSNs more than 65535 beyond the Cumulative TSN cannot be described by a
16-bit gap offset: they are refused (`accept` returns False) so the sender
will retransmit them later.

TSNs known by count (`vouch`): a receive offload engine that SACKs itself
and reports a message by its last segment tells the host that `count`
more chunks, whose TSNs it never names, arrived before a TSN it does name.
They are new (a chunk the host saw is never among them) and lie between the
Cumulative TSN and that TSN.  The Cumulative TSN moves over them only when
the count closes a range: when the TSNs known beyond it up to some TSN X and
the chunks vouched for below X + 1 together number every TSN up to X, every
one of them arrived.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from model.sctp.packet import TSN_BITS, serial_gt, serial_le

MAX_GAP_OFFSET = 0xFFFF
MAX_REPORTED_DUPLICATES = 64
_TSN_MASK = (1 << TSN_BITS) - 1


@dataclass(slots=True)
class TsnTracker:
    cumulative_tsn: int
    """The peer's initial TSN minus one at the start (RFC 4960 6.2)."""
    highest_received: int | None = None
    _above: set[int] = field(default_factory=set)
    _run_end_of: dict[int, int] = field(default_factory=dict)
    """First TSN of each run received beyond the Cumulative TSN -> its last TSN."""
    _run_start_of: dict[int, int] = field(default_factory=dict)
    """Last TSN of each run -> its first TSN."""
    _duplicates: list[int] = field(default_factory=list)
    _vouched: list[tuple[int, int]] = field(default_factory=list)
    """(TSN, count): `count` new chunks arrived with TSNs beyond the Cumulative TSN and below TSN (`vouch`)."""

    def offset(self, tsn: int) -> int:
        """Distance of `tsn` beyond the Cumulative TSN, modulo 2**32."""
        return (tsn - self.cumulative_tsn) & _TSN_MASK

    def is_duplicate(self, tsn: int) -> bool:
        return serial_le(tsn, self.cumulative_tsn, TSN_BITS) or tsn in self._above

    def within_window(self, tsn: int) -> bool:
        """True if `tsn` is new and a gap offset can describe it."""
        return 0 < self.offset(tsn) <= MAX_GAP_OFFSET

    def note_duplicate(self, tsn: int) -> None:
        if len(self._duplicates) < MAX_REPORTED_DUPLICATES:
            self._duplicates.append(tsn)

    def accept(self, tsn: int) -> bool:
        """Record a new TSN; False if it is a duplicate (noted for the SACK) or beyond the window."""
        if tsn == (self.cumulative_tsn + 1) & _TSN_MASK and not self._run_end_of:
            # The next TSN in order with nothing received beyond (the usual case): it is the new Cumulative
            # TSN at once (6.2), as the general path below would conclude.
            self.cumulative_tsn = tsn
            highest = self.highest_received
            # serial_gt(tsn, highest), RFC 1982 3.2: tsn lies less than half the TSN space after highest
            if highest is None or 0 < (tsn - highest) & _TSN_MASK < 1 << (TSN_BITS - 1):
                self.highest_received = tsn
            if self._vouched:   # `settle` has nothing to do without
                self.settle()
            return True
        if self.is_duplicate(tsn):
            self.note_duplicate(tsn)
            return False
        if not self.within_window(tsn):
            return False
        self._above.add(tsn)
        if self.highest_received is None or serial_gt(tsn, self.highest_received, TSN_BITS):
            self.highest_received = tsn
        start = end = tsn
        before, after = (tsn - 1) & _TSN_MASK, (tsn + 1) & _TSN_MASK
        if before in self._run_start_of:
            start = self._run_start_of.pop(before)
            del self._run_end_of[start]
        if after in self._run_end_of:
            end = self._run_end_of.pop(after)
            del self._run_start_of[end]
        if start == (self.cumulative_tsn + 1) & _TSN_MASK:
            self._absorb(start, end)
        else:
            self._run_end_of[start] = end
            self._run_start_of[end] = start
        self.settle()
        return True

    def vouch(self, below: int, count: int) -> None:
        """`count` chunks the tracker was never shown arrived with TSNs between the Cumulative TSN and `below`
        (see the module docstring); the Cumulative TSN moves over them once the count closes a range."""
        if count <= 0:
            return
        self._vouched.append((below, count))
        self.settle()

    def settle(self) -> None:
        """Move the Cumulative TSN to the highest TSN X up to which the TSNs known and the chunks vouched for
        below X + 1 leave no TSN missing, as long as there is one."""
        while self._vouched and self._close_a_range():
            pass

    def _close_a_range(self) -> bool:
        ends = {(below - 1) & _TSN_MASK for below, _ in self._vouched} | {below for below, _ in self._vouched}
        if self.highest_received is not None:
            ends.add(self.highest_received)
        for end in sorted(ends, key=self.offset, reverse=True):
            reach = self.offset(end)
            if not 0 < reach <= MAX_GAP_OFFSET:
                continue
            known = sum(1 for tsn in self._above if self.offset(tsn) <= reach)
            vouched = sum(count for below, count in self._vouched if 0 < self.offset(below) <= reach + 1)
            if known + vouched == reach:
                self._close_through(end)
                return True
        return False

    def _close_through(self, end: int) -> None:
        """Every TSN up to `end` arrived: it becomes the Cumulative TSN, or the end of a run of TSNs known
        that reaches past it; the vouches that TSN covers are spent."""
        reach = self.offset(end)
        for start, last in list(self._run_end_of.items()):
            if self.offset(start) <= reach + 1:
                del self._run_end_of[start], self._run_start_of[last]
                reach = max(reach, self.offset(last))
        self._above = {tsn for tsn in self._above if self.offset(tsn) > reach}
        self._vouched = [(below, count) for below, count in self._vouched if self.offset(below) > reach + 1]
        self.cumulative_tsn = (self.cumulative_tsn + reach) & _TSN_MASK
        if self.highest_received is None or serial_gt(self.cumulative_tsn, self.highest_received, TSN_BITS):
            self.highest_received = self.cumulative_tsn

    def _absorb(self, start: int, end: int) -> None:
        """The run start..end follows the Cumulative TSN: it becomes the new Cumulative TSN (6.2)."""
        tsn = start
        while True:
            self._above.discard(tsn)
            if tsn == end:
                break
            tsn = (tsn + 1) & _TSN_MASK
        self.cumulative_tsn = end

    @property
    def has_gaps(self) -> bool:
        return bool(self._above)

    @property
    def has_duplicates(self) -> bool:
        return bool(self._duplicates)

    def gap_blocks(self, limit: int | None = None) -> tuple[tuple[int, int], ...]:
        """(start, end) offsets of the runs received beyond the Cumulative TSN, lowest first (3.3.4)."""
        if not self._run_end_of:   # in order: no run, no block (most SACKs)
            return ()
        blocks = sorted((self.offset(start), self.offset(end)) for start, end in self._run_end_of.items())
        return tuple(blocks if limit is None else blocks[:limit])

    def take_duplicates(self) -> tuple[int, ...]:
        """The duplicate TSNs received since the last call (reported in one SACK, 6.2)."""
        duplicates = tuple(self._duplicates)
        self._duplicates.clear()
        return duplicates

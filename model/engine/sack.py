"""Golden model of the receive engine's acknowledgement unit: per association, the TSNs received and the SACKs
they call for (RFC 4960 6.2, 6.7, 3.3.4), in the gateware's bounded resources and timer ticks.

The receive engine hands the unit one record per DATA chunk it took: the
association, the TSN and whether the chunk ends its packet, whatever became
of the chunk's DDP segment (a DDP error is RDMAP's to report, RFC 5040 7,
not SCTP's; today's ack records, `abi.rx.ack_layout`, without the packet's
end). Per association the unit keeps:

* the Cumulative TSN Ack point (the last TSN of the contiguous run received,
  the peer's initial TSN minus one at the start, RFC 4960 6.2);
* a map of the ``map_tsns`` TSNs after it (the transmit ring's depth by
  default): a TSN further on is dropped, unrecorded, and the peer sends it
  again (RFC 4960 6.2: a receiver without room drops new DATA and
  acknowledges at once what it holds);
* up to ``duplicate_tsns`` duplicate TSNs for the next SACK (RFC 4960 6.2:
  "the list of duplicate TSNs since the last SACK"); more are counted and
  not listed;
* the packets with DATA since the last SACK, and a delayed-SACK deadline.

Decisions are per packet (RFC 4960 6.2): a record says whether its chunk
ends its packet (``packet_end``; DATA chunks come last in a packet, RFC
4960 6.10, so the last DATA chunk ends it). At a packet's end a SACK goes
out at once (RFC 4960 6.2, 6.7) if the packet held a duplicate or a chunk
dropped beyond the map, if a gap remains (6.7: "after receipt of each SCTP
packet that doesn't fill the gap") or one was open when the packet began (so
the SACK that shows it closed goes at once), or if it is the second packet
with DATA since the last SACK, or if one of its DATA chunks has the I bit set
(RFC 9260 3.3.1 and 6.2, from RFC 7053 4.2: the sender asks for the SACK without
delay). Otherwise the first packet not yet
acknowledged starts the association's delayed-SACK timer: ``delay_ticks``
ticks (RFC 4960 6.2: at most 500 ms, 200 ms by default) after the tick it
ended in, the SACK goes (`tick`); each row holds its own delay (`reset`).
Time is in whole ticks of the gateware's timer unit; a deadline is reached
when the tick count reaches it.

A SACK (`SackRecord`) carries the Cumulative TSN Ack, at most
``gap_blocks`` Gap Ack Blocks (the lowest runs received after it, RFC 4960
3.3.4: offsets from the Cumulative TSN Ack), the duplicates listed and the
a_rwnd (6.2: the receive buffer left): the row's ``window`` bytes less
``held_bytes`` for each TSN received past a gap, down to 0. Data received in
order is placed where its ULP wants it and holds no buffer; a chunk past a
gap holds a record in the engine until the gap fills, which the row
counts as ``held_bytes`` (the host's choice: its largest DATA chunk).
Sending it clears the duplicates and the count, and stops the timer.

A row written with ``enabled`` false takes no records: the host SACKs that
association itself.

Sans-I/O: `chunk(association, tsn, now, packet_end, immediate)` and `tick(now)` return the SACKs
due, in order; `reset(association, cumulative_tsn, delay_ticks)` writes a row (the
association's set-up, RFC 4960 5.1: the peer's initial TSN minus one; the
unit's ``delay_ticks`` unless given).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from abi.rx import SACK_DELAY_BITS as DELAY_BITS
from abi.rx import SACK_TICK_CYCLES
from model.engine.rows import check_row, written_row
from model.sctp.packet import TSN_BITS, SackChunk, serial_add, serial_le

__all__ = ["SackRecord", "SackUnit", "DEFAULT_DELAY_TICKS", "DEFAULT_WINDOW", "DELAY_BITS", "TICK_SECONDS", "ticks_at",
           "tick_time"]

_TSN_MASK = (1 << TSN_BITS) - 1

TICK_SECONDS = SACK_TICK_CYCLES / 156.25e6
"""The gateware timer unit's tick: 2**17 cycles of the 156.25 MHz core clock, about 0.84 ms."""


def ticks_at(now: float) -> int:
    """The timer's tick count at `now` seconds: the ticks begun since time 0 (`tick_time(n)` maps back to tick
    n, whatever the float's rounding). The acknowledgement and transport units count the same ticks."""
    return math.floor(now / TICK_SECONDS + 1e-6)


def tick_time(tick: int) -> float:
    """The time in seconds at which tick `tick` begins."""
    return tick * TICK_SECONDS


DEFAULT_DELAY_TICKS = 238
"""The delayed-SACK time in ticks: 199.7 ms, within RFC 4960 6.2's 200 ms default."""
DEFAULT_WINDOW = 65536
"""A row's a_rwnd in bytes unless the host gives one (RFC 4960 6: at least 1500)."""


@dataclass(frozen=True)
class SackRecord:
    """One SACK the unit sends for `association`: what the gateware hands the transmit path."""

    association: int
    cumulative_tsn_ack: int
    gap_blocks: tuple[tuple[int, int], ...]
    """(start, end) offsets from the Cumulative TSN Ack, lowest first (RFC 4960 3.3.4)."""
    duplicate_tsns: tuple[int, ...]
    a_rwnd: int

    def chunk(self) -> SackChunk:
        """The SACK chunk (RFC 4960 3.3.4)."""
        return SackChunk(self.cumulative_tsn_ack, self.a_rwnd, self.gap_blocks, self.duplicate_tsns)


@dataclass
class _Row:
    cumulative_tsn: int
    delay_ticks: int
    window: int
    held_bytes: int
    enabled: bool
    received: set[int] = field(default_factory=set)
    """Offsets (1..map_tsns) from the Cumulative TSN Ack of the TSNs received after it."""
    duplicates: list[int] = field(default_factory=list)
    duplicates_dropped: int = 0
    packets_since_sack: int = 0
    deadline: int | None = None
    in_packet: bool = False
    """A packet's chunks are coming: the next record does not start one."""
    gap_at_packet_start: bool = False
    at_once: bool = False
    """The packet so far calls for a SACK at once (a duplicate, a chunk dropped, a chunk with the I bit)."""


class SackUnit:
    """The acknowledgement unit of `associations` rows (see the module docs)."""

    def __init__(self, associations: int, *, map_tsns: int = 64, gap_blocks: int = 4, duplicate_tsns: int = 4,
                 delay_ticks: int = DEFAULT_DELAY_TICKS) -> None:
        if map_tsns < 1 or gap_blocks < 1 or duplicate_tsns < 0 or delay_ticks < 1:
            raise ValueError(f"map_tsns {map_tsns}, gap_blocks {gap_blocks}, duplicate_tsns {duplicate_tsns}"
                             f" and delay_ticks {delay_ticks}: each must be at least 1 (duplicates 0)")
        self.associations, self.map_tsns = associations, map_tsns
        self.gap_blocks, self.duplicate_tsns, self.delay_ticks = gap_blocks, duplicate_tsns, delay_ticks
        self._rows: dict[int, _Row] = {}

    def reset(self, association: int, cumulative_tsn: int, delay_ticks: int | None = None, *,
              window: int = DEFAULT_WINDOW, held_bytes: int = 0, enabled: bool = True) -> None:
        """Write the association's row: nothing received after `cumulative_tsn`, no SACK due, delayed SACKs
        `delay_ticks` after the packet (the unit's default if None), a_rwnd `window` less `held_bytes` per
        TSN held past a gap; `enabled` false: the row takes no records."""
        self._check(association)
        delay = self.delay_ticks if delay_ticks is None else delay_ticks
        if not 1 <= delay < 1 << DELAY_BITS or not 0 <= window < 1 << 32 or not 0 <= held_bytes < 1 << 16:
            raise ValueError(f"delay_ticks {delay} (1..{(1 << DELAY_BITS) - 1}), window {window} (32 bits) and "
                             f"held_bytes {held_bytes} (16 bits) out of range")
        self._rows[association] = _Row(cumulative_tsn & _TSN_MASK, delay, window, held_bytes, enabled)

    def cumulative_tsn(self, association: int) -> int:
        return self._row(association).cumulative_tsn

    def duplicates_dropped(self, association: int) -> int:
        """Duplicates received beyond the list's room since the row was written (counted, never listed)."""
        return self._row(association).duplicates_dropped

    def chunk(self, association: int, tsn: int, now: int, packet_end: bool = True,
              immediate: bool = False) -> list[SackRecord]:
        """One DATA chunk's TSN, taken at tick `now`; `packet_end`: it ends its packet; `immediate`: its I bit
        (RFC 9260 3.3.1). The SACK due at once, if any (at a packet's end only)."""
        row = self._row(association)
        if not row.enabled:
            return []
        if not row.in_packet:
            row.in_packet, row.gap_at_packet_start = True, bool(row.received)
        if immediate:
            row.at_once = True                                  # RFC 9260 6.2 (RFC 7053 4.2): no delay
        offset = (tsn - row.cumulative_tsn) & _TSN_MASK
        if serial_le(tsn, row.cumulative_tsn, TSN_BITS) or offset in row.received:
            if len(row.duplicates) < self.duplicate_tsns:     # RFC 4960 6.2: listed in the next SACK
                row.duplicates.append(tsn & _TSN_MASK)
            else:
                row.duplicates_dropped += 1
            row.at_once = True
        elif offset > self.map_tsns:
            row.at_once = True                                  # dropped: no room in the map (6.2)
        else:
            row.received.add(offset)
            advance = 0
            while advance + 1 in row.received:
                advance += 1
            if advance:
                row.cumulative_tsn = serial_add(row.cumulative_tsn, advance, TSN_BITS)
                row.received = {o - advance for o in row.received if o > advance}
        if not packet_end:
            return []
        row.in_packet = False
        row.packets_since_sack += 1
        if row.at_once or row.received or row.gap_at_packet_start or row.packets_since_sack >= 2:
            return [self._send(association, row)]
        if row.deadline is None:
            row.deadline = now + row.delay_ticks
        return []

    def flush(self, association: int) -> list[SackRecord]:
        """The SACK the association owes, now: one if a packet of its DATA waits for its delayed SACK (RFC
        4960 6.2), else none. A host asks for it before a message whose receiver must see that SACK first
        (the host SCTP bundled it ahead of the DATA; the engine sends it as a packet of its own)."""
        row = self._row(association)
        if not row.enabled or row.deadline is None:
            return []
        return [self._send(association, row)]

    def tick(self, now: int) -> list[SackRecord]:
        """The delayed SACKs due by tick `now`, by association."""
        return [self._send(association, row) for association, row in sorted(self._rows.items())
                if row.deadline is not None and row.deadline <= now]

    def next_deadline(self) -> int | None:
        deadlines = [row.deadline for row in self._rows.values() if row.deadline is not None]
        return min(deadlines, default=None)

    def _send(self, association: int, row: _Row) -> SackRecord:
        runs: list[tuple[int, int]] = []
        for offset in sorted(row.received):
            if runs and offset == runs[-1][1] + 1:
                runs[-1] = (runs[-1][0], offset)
            else:
                runs.append((offset, offset))
        a_rwnd = max(0, row.window - len(row.received) * row.held_bytes)
        record = SackRecord(association, row.cumulative_tsn, tuple(runs[:self.gap_blocks]), tuple(row.duplicates),
                            a_rwnd)
        row.duplicates, row.packets_since_sack, row.deadline, row.at_once = [], 0, None, False
        return record

    def _row(self, association: int) -> _Row:
        return written_row(self._rows, association, self.associations)

    def _check(self, association: int) -> None:
        check_row(association, self.associations)

"""Golden model of the transmit engine's transport unit: the peer's SACKs processed in gateware, per association
(RFC 4960 6.1, 6.2.1, 6.3, 7.2, 8.1; RFC 9260 7.2.4), in the gateware's bounded resources and timer ticks.

Today the host's SCTP processes every SACK and tells the transmit engine
what to do (`model.engine.tx`: ACK, RESEND, LIMIT). This unit makes those
decisions in the engine itself, one association row at a time, and its
records say the same things: a `Retirement` is an ACK (the chunks up to the
new Cumulative TSN Ack leave the ring, and the messages they end complete,
RFC 5041 5.4), a `Retransmission` is a RESEND (the chunk again, its payload
read again from host memory), a `Limit` is a LIMIT (the highest TSN new DATA
may take). Past Association.Max.Retrans an `AssociationFailure` goes to the
host (RFC 4960 8.1); a SACK acknowledging a TSN never sent is a
`ProtocolViolation` for the host, which aborts the association as its own
SCTP does (model/sctp/data_transfer.py). After either record the row is dead
until written again: it takes no SACK, runs no timer and refuses `sent`.

Per association row (`reset`: the host writes it once the association is up,
with the parameters the association negotiated) the unit keeps the
Cumulative TSN Ack point, the ring of chunks sent and not cumulatively
acknowledged (TSN order, no holes, at most ``ring_tsns``; per chunk its
size, the tick it was last sent, whether it was retransmitted, whether a Gap
Ack Block acknowledges it, whether and why it waits for retransmission, its
miss indications and whether it was fast retransmitted), cwnd, ssthresh,
partial_bytes_acked, the peer's rwnd, the Fast Recovery exit point,
SRTT/RTTVAR/RTO, the T3-rtx deadline, the error counter and the LIMIT last
given.

Sans-I/O, like `model.engine.sack`: `reset(association, initial_tsn,
peer_a_rwnd, ...)` writes a row and returns its first `Limit`;
`sent(association, tsn, size, now)` tells the unit a new DATA chunk left;
`sack(association, cumulative_tsn_ack, a_rwnd, gap_blocks, duplicate_tsns,
now)` processes a SACK chunk's fields, `shutdown(association,
cumulative_tsn_ack, now)` a SHUTDOWN's (RFC 4960 9.2); `tick(now)` runs the
timers of every row. `sack`, `shutdown` and `tick` return their records in the order the engine acts on
them: the `Retirement`, then `Retransmission`s, then the `Limit` (only when
it changed); a row's records are never interleaved with another's. `state`
and `chunks` show a row's variables and ring.

Units. Time is in whole ticks of the gateware's timer unit (`TICK_SECONDS`
of `model.engine.sack`, 2**17 cycles of the 156.25 MHz clock, about
0.84 ms); a deadline is reached when the tick count reaches it. RTO.Initial,
RTO.Min and RTO.Max come in ticks: `ticks(seconds)` rounds up, so no timer
runs shorter than the RFC asks (defaults from RFC 4960 15: 3 s, 1 s, 60 s
are 3577, 1193 and 71526 ticks). Sizes are bytes of user data: the flight
size, rwnd and partial_bytes_acked count the DATA chunks' user data, as the
host's SCTP does; MTU is the row's ``mtu`` (the SCTP packet size of the path:
the host's ``max_packet_size``, 1480 bytes on a 1500-byte IPv4 path).

Where the RFC leaves room, the unit does this:

* Gap Ack Blocks: the first ``gap_blocks`` (4) of a SACK are read, the rest
  are absent: their TSNs are neither acknowledged nor counted missing. A
  truncated SACK says nothing the unit read about TSNs past the end of its
  last block read, so a TSN acknowledged by an earlier block there is not
  taken as reneged (6.2.1 D iii applies at or below that end only). A block
  with start 0 or start > end is malformed and ignored; TSNs past the
  highest sent are ignored.
* One DATA chunk per packet (the engine's frames), so K of 6.3.3 E3 and
  7.2.4 step 3 is 1: one chunk goes at once, the others marked wait.
* cwnd starts at min(4*MTU, max(2*MTU, 4380)) (7.2.1) and ssthresh at the
  peer's a_rwnd (7.2.1: "MAY be arbitrarily high"); cwnd/2 rounds down.
* The window for new data (6.1 A, B, D) is a TSN, but the sizes of chunks
  not yet sent are unknown: each is taken to carry ``chunk_bytes`` (the
  row's largest), so the LIMIT never lets the flight pass what 6.1 allows.
  Rule B lets a chunk start while the flight size is below cwnd:
  ceil((cwnd - flight size) / chunk_bytes) chunks. Rule A: floor(rwnd /
  chunk_bytes), but one chunk when the flight size is 0, whatever rwnd.
  Max.Burst (6.1 D) bounds the packets each event releases (a SACK taken, a
  T3-rtx expiry, a row written, an idle decay): chunks retransmitted as
  cwnd allows count, the fast retransmit packet does not (7.2.4 step 3). So
  the LIMIT is computed at events only, never on `sent`. No new TSN is
  released while a chunk waits for retransmission (6.1 C) or while 7.2.3's
  one packet after a T3-rtx expiry is unacknowledged, nor past the ring.
* "Fully utilized" (7.2.1) and "had cwnd or more bytes of data outstanding"
  (7.2.2) are read as the host's SCTP reads them
  (model/sctp/congestion.py): the flight size just before the SACK left
  less than one MTU of cwnd unused. The unit hears of every chunk as it is
  sent, so the host's second clause (the flight at the last chance to send,
  for SACKs handed over together) is the same flight here.
* partial_bytes_acked is capped at cwnd while cwnd is not fully utilized
  (RFC 9260 7.2.2) and set to 0 when every chunk sent is acknowledged.
* 7.2.4's Note: the growth of 7.2.1/7.2.2 is applied before a fast
  retransmit's reduction; 6.2.1 D iv (Fast Recovery exit) before both. So a
  SACK that reaches the exit point and also completes a third miss
  indication starts a new Fast Recovery (the host's SCTP reduces nothing
  then). In Fast Recovery cwnd equals ssthresh, so 7.2.1 (no growth in Fast
  Recovery) holds for the whole of it.
* Miss indications (7.2.4, HTNA): below the highest TSN newly acknowledged;
  in Fast Recovery, on a SACK that advances the Cumulative TSN Ack, every
  TSN the blocks read report missing (below the end of the highest one);
  Fast Recovery as it stood when the SACK arrived. A TSN reneged (6.2.1
  D iii) takes that SACK's one miss indication there. Counts never reset;
  a chunk fast retransmitted once takes no more (7.2.4 step 5).
* T3-rtx runs while a chunk sent is neither cumulatively nor
  gap-acknowledged (R2 counts a Gap Ack Block as an acknowledgement; R4 and
  6.2.1 D iii start it again on a renege). An expiry marks every chunk not
  gap-acknowledged, retransmits the earliest (E3) and ends Fast Recovery
  (there cwnd would stay at 1 MTU until the exit point). 7.2.4 step 4: a
  fast retransmit of the ring's first chunk restarts the timer.
* RTT (6.3.1): one chunk timed per round trip (C4), the first new chunk sent
  while none is timed, measured when it is first acknowledged (cumulative
  or gap) at the SACK's tick, unless a chunk at or below it was
  retransmitted since it was sent (C5 and its implementation note). SRTT and
  RTTVAR are kept in eighths of a tick: RTO.Alpha (1/8) and RTO.Beta (1/4)
  are shifts, each product rounded down; an RTTVAR of 0 becomes the clock
  granularity G, one tick (C3); RTO = SRTT + 4*RTTVAR rounded up to a whole
  tick, then held within RTO.Min and RTO.Max (C6, C7). RTO.Initial is held
  within them too; E2's doubling stops at RTO.Max.
* The error counter (8.1) counts T3-rtx expiries in a row and is reset by
  every SACK taken (each acknowledges the DATA up to its Cumulative TSN
  Ack); the expiry that takes it past Association.Max.Retrans fails the
  association instead of retransmitting. HEARTBEATs are the host's (8.3),
  with their own count.
* rwnd (6.2.1): A at `reset`; B on every transmission, new or not; C when a
  chunk is marked for retransmission; D ii counts as outstanding the chunks
  neither acknowledged nor marked, consistently with C.
* 7.2.1/7.2.2's decay while no data is sent: once the ring has stayed empty
  an RTO, cwnd = max(cwnd/2, 4*MTU) and again each RTO after, but a cwnd at
  or below 4*MTU is left as it is (the rule decays, it never raises).
* A retransmission counts as sent at the tick the unit orders it (the
  engine sends RESENDs before anything else, `model.engine.tx`).
* Duplicate TSNs drive no rule of RFC 4960 6.2.1, 6.3 or 7.2: they are
  counted per row (``duplicate_tsns_reported``), for statistics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction

from abi.rx import SACK_TICK_CYCLES
from model.engine.sack import TICK_SECONDS
from model.engine.rows import check_row, written_row
from model.sctp.packet import TSN_BITS, serial_add, serial_ge, serial_gt, serial_le, serial_lt

__all__ = [
    "AssociationFailure", "ChunkState", "Limit", "ProtocolViolation", "Retirement", "Retransmission",
    "RetransmitCause", "TransportRecord", "TransportState", "TransportUnit", "ticks", "initial_cwnd",
    "CORE_CLOCK_HZ", "DATA_CHUNK_OVERHEAD", "DEFAULT_MTU", "MAX_BURST", "MAX_RETRANS", "RTO_INITIAL_TICKS",
    "RTO_MAX_TICKS", "RTO_MIN_TICKS", "TICK_SECONDS",
]

_TSN_MASK = (1 << TSN_BITS) - 1
CORE_CLOCK_HZ = 156_250_000
"""The core clock whose 2**17 cycles make a tick (`TICK_SECONDS`)."""
_TICK = Fraction(SACK_TICK_CYCLES, CORE_CLOCK_HZ)
_EIGHTHS = 8
"""SRTT and RTTVAR are kept in eighths of a tick (RTO.Alpha = 1/8, RTO.Beta = 1/4 as shifts)."""
CLOCK_GRANULARITY_EIGHTHS = _EIGHTHS
"""G of RFC 4960 6.3.1 C3: one tick."""
DATA_CHUNK_OVERHEAD = 12 + 16
"""The common header and a DATA chunk's header (RFC 4960 3, 3.3.1): a packet of MTU bytes carries MTU - 28."""
DEFAULT_MTU = 1480
"""The SCTP packet of a 1500-byte IPv4 path (the host's ``max_packet_size``)."""
MAX_BURST = 4
"""Max.Burst, RFC 4960 15."""
MAX_RETRANS = 10
"""Association.Max.Retrans, RFC 4960 15."""


def ticks(seconds: float | Fraction) -> int:
    """`seconds` in whole ticks, rounded up: a timer of that many ticks never runs shorter than `seconds`."""
    if seconds < 0:
        raise ValueError(f"{seconds} s: a duration is not negative")
    exact = seconds if isinstance(seconds, Fraction) else Fraction(str(seconds))
    return math.ceil(exact / _TICK)


RTO_INITIAL_TICKS = ticks(3.0)
"""RTO.Initial, RFC 4960 15: 3 s (3577 ticks)."""
RTO_MIN_TICKS = ticks(1.0)
"""RTO.Min, RFC 4960 15: 1 s (1193 ticks)."""
RTO_MAX_TICKS = ticks(60.0)
"""RTO.Max, RFC 4960 15: 60 s (71526 ticks)."""


def initial_cwnd(mtu: int) -> int:
    """RFC 4960 7.2.1: min(4*MTU, max(2*MTU, 4380 bytes))."""
    return min(4 * mtu, max(2 * mtu, 4380))


class RetransmitCause(Enum):
    """Why a chunk was marked for retransmission."""
    FAST = "three miss indications (RFC 4960 7.2.4)"
    TIMEOUT = "T3-rtx expiry (RFC 4960 6.3.3)"


@dataclass(frozen=True)
class Retirement:
    """The Cumulative TSN Ack advanced: the chunks `first_tsn`..`last_tsn` (serial order, `last_tsn` the new
    Cumulative TSN Ack) leave the ring; the engine completes each message whose last chunk is among them."""
    association: int
    first_tsn: int
    last_tsn: int


@dataclass(frozen=True)
class Retransmission:
    """Send the chunk of `tsn` again, now."""
    association: int
    tsn: int
    cause: RetransmitCause


@dataclass(frozen=True)
class Limit:
    """New DATA may take TSNs up to and including `tsn` (serial order); none past it."""
    association: int
    tsn: int


@dataclass(frozen=True)
class AssociationFailure:
    """RFC 4960 8.1: `error_count` T3-rtx expiries in a row, past Association.Max.Retrans: the peer is
    unreachable; the chunks after `cumulative_tsn_ack` up to `highest_tsn_sent` were never acknowledged."""
    association: int
    error_count: int
    cumulative_tsn_ack: int
    highest_tsn_sent: int


@dataclass(frozen=True)
class ProtocolViolation:
    """A SACK's Cumulative TSN Ack `cumulative_tsn_ack` is past `highest_tsn_sent`: the host aborts."""
    association: int
    cumulative_tsn_ack: int
    highest_tsn_sent: int


TransportRecord = Retirement | Retransmission | Limit | AssociationFailure | ProtocolViolation


@dataclass(frozen=True)
class ChunkState:
    """One chunk of a row's ring, as `TransportUnit.chunks` shows it."""
    tsn: int
    size: int
    sent_tick: int
    retransmitted: bool
    in_flight: bool
    gap_acked: bool
    marked: RetransmitCause | None
    miss_indications: int
    fast_retransmitted: bool


@dataclass(frozen=True)
class TransportState:
    """A row's variables, as `TransportUnit.state` shows them (bytes, ticks, TSNs)."""
    cumulative_tsn_ack: int
    highest_tsn_sent: int
    limit: int
    flight_size: int
    outstanding_bytes: int
    cwnd: int
    ssthresh: int
    partial_bytes_acked: int
    rwnd: int
    fast_recovery_exit: int | None
    srtt_ticks: float | None
    rttvar_ticks: float | None
    rto_ticks: int
    t3_deadline: int | None
    error_count: int
    duplicate_tsns_reported: int
    failed: bool


@dataclass
class _Chunk:
    size: int
    sent_tick: int
    retransmitted: bool = False
    in_flight: bool = True
    gap_acked: bool = False
    marked: RetransmitCause | None = None
    miss_indications: int = 0
    fast_retransmitted: bool = False
    """Ineligible for another fast retransmit (RFC 4960 7.2.4 step 5)."""


@dataclass
class _Row:
    cumulative_tsn: int
    mtu: int
    chunk_bytes: int
    rto_min: int
    rto_max: int
    max_retrans: int
    max_burst: int
    cwnd: int
    ssthresh: int
    rwnd: int
    rto: int
    limit: int
    peer_a_rwnd: int
    """The a_rwnd of the peer's last SACK (of `reset` before one): a SHUTDOWN's acknowledgement keeps it."""
    ring: list[_Chunk] = field(default_factory=list)
    """The chunks of TSNs cumulative_tsn + 1, + 2, ... (no holes)."""
    partial_bytes_acked: int = 0
    fast_recovery_exit: int | None = None
    srtt_eighths: int | None = None
    rttvar_eighths: int | None = None
    timed_tsn: int | None = None
    """The chunk being timed for an RTT measurement (RFC 4960 6.3.1 C4)."""
    t3_deadline: int | None = None
    one_packet_until_ack: bool = False
    """RFC 4960 7.2.3: after a T3-rtx expiry, one packet in flight until data is acknowledged."""
    error_count: int = 0
    idle_deadline: int | None = None
    duplicate_tsns_reported: int = 0
    failed: bool = False

    def tsn(self, index: int) -> int:
        return serial_add(self.cumulative_tsn, index + 1, TSN_BITS)

    @property
    def highest_tsn_sent(self) -> int:
        return serial_add(self.cumulative_tsn, len(self.ring), TSN_BITS)

    @property
    def flight_size(self) -> int:
        return sum(chunk.size for chunk in self.ring if chunk.in_flight)

    @property
    def outstanding_bytes(self) -> int:
        """RFC 4960 6.2.1 D ii: neither acknowledged nor marked for retransmission (6.2.1 C)."""
        return sum(chunk.size for chunk in self.ring if not chunk.gap_acked and chunk.marked is None)

    @property
    def all_acknowledged(self) -> bool:
        return all(chunk.gap_acked for chunk in self.ring)


class TransportUnit:
    """The transport unit of `associations` rows (see the module docs): at most `ring_tsns` chunks in flight
    per association, the first `gap_blocks` Gap Ack Blocks of each SACK read."""

    def __init__(self, associations: int, *, ring_tsns: int = 64, gap_blocks: int = 4) -> None:
        if associations < 1 or ring_tsns < 1 or gap_blocks < 1:
            raise ValueError(f"associations {associations}, ring_tsns {ring_tsns} and gap_blocks {gap_blocks}: "
                             "each must be at least 1")
        self.associations, self.ring_tsns, self.gap_blocks = associations, ring_tsns, gap_blocks
        self._rows: dict[int, _Row] = {}

    # -- the host's writes -------------------------------------------------------

    def reset(self, association: int, initial_tsn: int, peer_a_rwnd: int, *, mtu: int = DEFAULT_MTU,
              chunk_bytes: int | None = None, rto_initial: int = RTO_INITIAL_TICKS, rto_min: int = RTO_MIN_TICKS,
              rto_max: int = RTO_MAX_TICKS, max_retrans: int = MAX_RETRANS, max_burst: int = MAX_BURST
              ) -> list[TransportRecord]:
        """Write the association's row: nothing sent yet, the first new chunk takes `initial_tsn`, rwnd and
        ssthresh the peer's a_rwnd (RFC 4960 6.2.1 A, 7.2.1); `mtu` the MTU of 7.2's formulas, `chunk_bytes`
        the largest DATA chunk's user data (MTU - 28 unless given); RTO parameters in ticks. Returns the
        row's first `Limit`."""
        self._check(association)
        chunk_bytes = mtu - DATA_CHUNK_OVERHEAD if chunk_bytes is None else chunk_bytes
        if not 0 <= initial_tsn <= _TSN_MASK or not 0 <= peer_a_rwnd <= _TSN_MASK:
            raise ValueError(f"initial_tsn {initial_tsn} and peer_a_rwnd {peer_a_rwnd} must fit 32 bits")
        if mtu <= DATA_CHUNK_OVERHEAD or not 1 <= chunk_bytes <= mtu - DATA_CHUNK_OVERHEAD:
            raise ValueError(f"chunk_bytes {chunk_bytes} must be 1..{mtu - DATA_CHUNK_OVERHEAD} (MTU {mtu} - 28)")
        if not 1 <= rto_min <= rto_max or rto_initial < 1:
            raise ValueError(f"RTO ticks: need 1 <= RTO.Min ({rto_min}) <= RTO.Max ({rto_max}), "
                             f"RTO.Initial ({rto_initial}) >= 1")
        if max_retrans < 0 or max_burst < 1:
            raise ValueError(f"max_retrans {max_retrans} (>= 0) and max_burst {max_burst} (>= 1)")
        cumulative = (initial_tsn - 1) & _TSN_MASK
        row = _Row(cumulative, mtu, chunk_bytes, rto_min, rto_max, max_retrans, max_burst,
                   cwnd=initial_cwnd(mtu), ssthresh=peer_a_rwnd, rwnd=peer_a_rwnd,
                   rto=min(max(rto_initial, rto_min), rto_max), limit=cumulative, peer_a_rwnd=peer_a_rwnd)
        self._rows[association] = row
        records: list[TransportRecord] = []
        self._release(association, row, 0, records, packets=0, always=True)
        return records

    # -- the engine's inputs -----------------------------------------------------

    def sent(self, association: int, tsn: int, size: int, now: int) -> None:
        """A new DATA chunk of `size` bytes of user data took `tsn` and left at tick `now`."""
        row = self._live_row(association)
        expected = serial_add(row.highest_tsn_sent, 1, TSN_BITS)
        if tsn != expected:
            raise ValueError(f"TSN {tsn}: the next new chunk takes {expected}")
        if serial_gt(tsn, row.limit, TSN_BITS) or len(row.ring) >= self.ring_tsns:
            raise ValueError(f"TSN {tsn} is past the LIMIT {row.limit} (or the ring of {self.ring_tsns} is full)")
        if not 1 <= size <= row.chunk_bytes:
            raise ValueError(f"size {size}: a chunk carries 1..{row.chunk_bytes} bytes")
        row.ring.append(_Chunk(size, now))
        row.rwnd = max(row.rwnd - size, 0)                       # 6.2.1 B
        if row.timed_tsn is None:
            row.timed_tsn = tsn                                   # 6.3.1 C4: one measurement per round trip
        if row.t3_deadline is None:
            row.t3_deadline = now + row.rto                       # 6.3.2 R1
        row.idle_deadline = None

    def sack(self, association: int, cumulative_tsn_ack: int, a_rwnd: int,
             gap_blocks: tuple[tuple[int, int], ...], duplicate_tsns: tuple[int, ...], now: int
             ) -> list[TransportRecord]:
        """A SACK chunk's fields (RFC 4960 3.3.4), arrived at tick `now`: the records it calls for."""
        row = self._row(association)
        if row.failed:
            return []
        cumulative = cumulative_tsn_ack & _TSN_MASK
        if serial_lt(cumulative, row.cumulative_tsn, TSN_BITS):
            return []                                             # 6.2.1 D i: out of order, dropped
        advance = (cumulative - row.cumulative_tsn) & _TSN_MASK
        if advance > len(row.ring):
            highest = row.highest_tsn_sent
            self._stop(row)
            return [ProtocolViolation(association, cumulative, highest)]
        records: list[TransportRecord] = []
        row.error_count = 0                                       # 8.1: the peer acknowledges DATA
        row.duplicate_tsns_reported += len(duplicate_tsns)
        flight_before = row.flight_size
        in_fast_recovery = row.fast_recovery_exit is not None
        newly_acked_bytes = 0
        highest_newly_acked: int | None = None   # its ring index after the retirement; -1: retired ones only

        # The Cumulative TSN Ack: the chunks up to it leave the ring.
        if advance:
            first = row.tsn(0)
            for index, chunk in enumerate(row.ring[:advance]):
                if not chunk.gap_acked:
                    newly_acked_bytes += chunk.size
                    highest_newly_acked = -1
                    self._measure(row, row.tsn(index), chunk, now)
            del row.ring[:advance]
            row.cumulative_tsn = cumulative
            records.append(Retirement(association, first, cumulative))

        # Gap Ack Blocks (3.3.4): the first `gap_blocks` are read.
        covered = [False] * len(row.ring)
        highest_block_end = 0
        for start, end in gap_blocks[:self.gap_blocks]:
            if not 1 <= start <= end or start > len(row.ring):
                continue                                          # malformed, or past the TSNs sent
            end = min(end, len(row.ring))
            highest_block_end = max(highest_block_end, end)
            for offset in range(start, end + 1):
                covered[offset - 1] = True
        judged = highest_block_end if len(gap_blocks) > self.gap_blocks else len(row.ring)
        reneged: list[int] = []
        for index, chunk in enumerate(row.ring):
            if covered[index] and not chunk.gap_acked:
                chunk.gap_acked, chunk.in_flight, chunk.marked = True, False, None
                newly_acked_bytes += chunk.size
                highest_newly_acked = index
                self._measure(row, row.tsn(index), chunk, now)
            elif not covered[index] and chunk.gap_acked and index < judged:
                chunk.gap_acked = False                           # 6.2.1 D iii: reneged
                reneged.append(index)
        row.rwnd = max(a_rwnd - row.outstanding_bytes, 0)         # 6.2.1 D ii
        row.peer_a_rwnd = a_rwnd
        if newly_acked_bytes:
            row.one_packet_until_ack = False                      # 7.2.3: data delivered

        # Miss indications (7.2.4, HTNA) and the marks for fast retransmit.
        below = -1 if highest_newly_acked is None else highest_newly_acked
        if in_fast_recovery and advance and highest_block_end:
            below = max(below, highest_block_end - 1)             # every TSN reported missing
        missed = set(reneged) | {index for index in range(below) if not covered[index]}
        newly_marked = False
        for index in sorted(missed):
            chunk = row.ring[index]
            if chunk.gap_acked or chunk.fast_retransmitted:
                continue
            chunk.miss_indications += 1
            if chunk.miss_indications >= 3:                       # 7.2.4 steps 1 and 5
                self._mark(row, chunk, RetransmitCause.FAST)
                chunk.fast_retransmitted = True
                newly_marked = True

        # 6.2.1 D iv, then 7.2.1/7.2.2 (7.2.4's Note: before the fast retransmit's adjustment).
        if row.fast_recovery_exit is not None and serial_ge(cumulative, row.fast_recovery_exit, TSN_BITS):
            row.fast_recovery_exit = None
        if advance and row.fast_recovery_exit is None:
            self._grow(row, newly_acked_bytes, fully_utilized=flight_before + row.mtu > row.cwnd)
        if row.all_acknowledged:
            row.partial_bytes_acked = 0                           # 7.2.2: all data acknowledged
        if newly_marked and row.fast_recovery_exit is None:      # 7.2.4 step 2, 7.2.3
            row.ssthresh = max(row.cwnd // 2, 4 * row.mtu)
            row.cwnd, row.partial_bytes_acked = row.ssthresh, 0
            row.fast_recovery_exit = row.highest_tsn_sent

        # T3-rtx, 6.3.2.
        if row.all_acknowledged:
            row.t3_deadline = None                                # R2
        elif advance:
            row.t3_deadline = now + row.rto                       # R3
        elif reneged and row.t3_deadline is None:
            row.t3_deadline = now + row.rto                       # R4, 6.2.1 D iii
        if row.ring:
            row.idle_deadline = None
        elif row.idle_deadline is None:
            row.idle_deadline = now + row.rto

        if newly_marked:                                          # 7.2.4 step 3: one packet, cwnd aside
            index = next(i for i, chunk in enumerate(row.ring) if chunk.marked is not None)
            self._retransmit(association, row, index, now, records)
            if index == 0:
                row.t3_deadline = now + row.rto                   # 7.2.4 step 4
        self._release(association, row, now, records, packets=0)
        return records

    def shutdown(self, association: int, cumulative_tsn_ack: int, now: int) -> list[TransportRecord]:
        """A SHUTDOWN's Cumulative TSN Ack (RFC 4960 9.2), arrived at tick `now`: taken as a SACK of no Gap
        Ack Block and the peer's last a_rwnd (the host's SCTP reads it so too)."""
        row = self._row(association)
        return self.sack(association, cumulative_tsn_ack, row.peer_a_rwnd, (), (), now)

    def tick(self, now: int) -> list[TransportRecord]:
        """The timers due by tick `now`, by association: T3-rtx expiries (RFC 4960 6.3.3) and idle decay."""
        records: list[TransportRecord] = []
        for association, row in sorted(self._rows.items()):
            if row.failed:
                continue
            if row.t3_deadline is not None and row.t3_deadline <= now:
                self._expire(association, row, now, records)
            elif row.idle_deadline is not None and row.idle_deadline <= now:
                while row.idle_deadline <= now:                   # 7.2.1, 7.2.2: per RTO without data
                    if row.cwnd > 4 * row.mtu:
                        row.cwnd = max(row.cwnd // 2, 4 * row.mtu)
                    row.idle_deadline += row.rto
                self._release(association, row, now, records, packets=0)
        return records

    # -- reading ---------------------------------------------------------------

    def next_deadline(self) -> int | None:
        """The earliest tick at which `tick` has something to do."""
        deadlines = [deadline for row in self._rows.values() if not row.failed
                     for deadline in (row.t3_deadline, row.idle_deadline) if deadline is not None]
        return min(deadlines, default=None)

    def state(self, association: int) -> TransportState:
        row = self._row(association)
        srtt = None if row.srtt_eighths is None else row.srtt_eighths / _EIGHTHS
        rttvar = None if row.rttvar_eighths is None else row.rttvar_eighths / _EIGHTHS
        return TransportState(row.cumulative_tsn, row.highest_tsn_sent, row.limit, row.flight_size,
                              row.outstanding_bytes, row.cwnd, row.ssthresh, row.partial_bytes_acked, row.rwnd,
                              row.fast_recovery_exit, srtt, rttvar, row.rto, row.t3_deadline, row.error_count,
                              row.duplicate_tsns_reported, row.failed)

    def chunks(self, association: int) -> tuple[ChunkState, ...]:
        """The row's ring, lowest TSN first."""
        row = self._row(association)
        return tuple(ChunkState(row.tsn(index), chunk.size, chunk.sent_tick, chunk.retransmitted, chunk.in_flight,
                                chunk.gap_acked, chunk.marked, chunk.miss_indications, chunk.fast_retransmitted)
                     for index, chunk in enumerate(row.ring))

    # -- the rules -----------------------------------------------------------------

    @staticmethod
    def _grow(row: _Row, acked: int, fully_utilized: bool) -> None:
        """RFC 4960 7.2.1 (slow start) and 7.2.2 (congestion avoidance), for a SACK that advanced the Cumulative
        TSN Ack outside Fast Recovery."""
        if row.cwnd <= row.ssthresh:
            if fully_utilized:
                row.cwnd += min(acked, row.mtu)
            return
        row.partial_bytes_acked += acked
        if row.partial_bytes_acked > row.cwnd and not fully_utilized:
            row.partial_bytes_acked = row.cwnd                    # RFC 9260 7.2.2
        if row.partial_bytes_acked >= row.cwnd and fully_utilized:
            row.partial_bytes_acked -= row.cwnd
            row.cwnd += row.mtu

    @staticmethod
    def _measure(row: _Row, tsn: int, chunk: _Chunk, now: int) -> None:
        """RFC 4960 6.3.1 C2, C3, C6, C7: the timed chunk was acknowledged for the first time (C5: `_retransmit`
        stops timing a chunk once it or one below it goes again)."""
        if row.timed_tsn != tsn:
            return
        row.timed_tsn = None
        rtt = (now - chunk.sent_tick) * _EIGHTHS
        if row.srtt_eighths is None or row.rttvar_eighths is None:
            srtt, rttvar = rtt, rtt // 2                          # C2
        else:
            srtt, rttvar = row.srtt_eighths, row.rttvar_eighths   # C3: RTTVAR from the SRTT before its update
            rttvar = rttvar - (rttvar >> 2) + (abs(srtt - rtt) >> 2)
            srtt = srtt - (srtt >> 3) + (rtt >> 3)
        if rttvar == 0:
            rttvar = CLOCK_GRANULARITY_EIGHTHS
        row.srtt_eighths, row.rttvar_eighths = srtt, rttvar
        rto = -(-(srtt + 4 * rttvar) // _EIGHTHS)                 # rounded up to a whole tick
        row.rto = min(max(rto, row.rto_min), row.rto_max)

    @staticmethod
    def _mark(row: _Row, chunk: _Chunk, cause: RetransmitCause) -> None:
        """The chunk waits for retransmission: out of the flight, its bytes back in rwnd (6.2.1 C)."""
        if chunk.marked is None:
            row.rwnd += chunk.size
        chunk.marked, chunk.in_flight = cause, False

    def _retransmit(self, association: int, row: _Row, index: int, now: int, records: list[TransportRecord]) -> None:
        chunk = row.ring[index]
        tsn = row.tsn(index)
        assert chunk.marked is not None
        records.append(Retransmission(association, tsn, chunk.marked))
        chunk.marked, chunk.in_flight, chunk.retransmitted, chunk.sent_tick = None, True, True, now
        row.rwnd = max(row.rwnd - chunk.size, 0)                  # 6.2.1 B
        if row.timed_tsn is not None and serial_le(tsn, row.timed_tsn, TSN_BITS):
            row.timed_tsn = None                                  # 6.3.1 C5
        if row.t3_deadline is None:
            row.t3_deadline = now + row.rto                       # 6.3.2 R1

    def _release(self, association: int, row: _Row, now: int, records: list[TransportRecord], *, packets: int,
                 always: bool = False) -> None:
        """One event's transmissions (6.1 C, D): chunks marked for retransmission, lowest TSN first, while the
        flight size is below cwnd; then the LIMIT for new data (6.1 A, B), if it changed."""
        if not row.one_packet_until_ack:
            flight = row.flight_size
            for index, chunk in enumerate(row.ring):
                if packets >= row.max_burst or flight >= row.cwnd:
                    break
                if chunk.marked is not None:
                    self._retransmit(association, row, index, now, records)
                    flight += chunk.size
                    packets += 1
        new_chunks = 0
        if not row.one_packet_until_ack and not any(chunk.marked is not None for chunk in row.ring):
            flight = row.flight_size
            by_cwnd = -(-(row.cwnd - flight) // row.chunk_bytes) if flight < row.cwnd else 0
            by_rwnd = row.rwnd // row.chunk_bytes
            if flight == 0:
                by_rwnd = max(by_rwnd, 1)                         # 6.1 A: one chunk, whatever rwnd
            new_chunks = max(0, min(by_cwnd, by_rwnd, row.max_burst - packets, self.ring_tsns - len(row.ring)))
        limit = serial_add(row.highest_tsn_sent, new_chunks, TSN_BITS)
        if always or limit != row.limit:
            row.limit = limit
            records.append(Limit(association, limit))

    def _expire(self, association: int, row: _Row, now: int, records: list[TransportRecord]) -> None:
        """RFC 4960 6.3.3 (E1-E3), 7.2.3 and 8.1: one T3-rtx expiry."""
        row.error_count += 1
        if row.error_count > row.max_retrans:
            records.append(AssociationFailure(association, row.error_count, row.cumulative_tsn, row.highest_tsn_sent))
            self._stop(row)
            return
        row.ssthresh = max(row.cwnd // 2, 4 * row.mtu)            # E1, 7.2.3
        row.cwnd, row.partial_bytes_acked, row.fast_recovery_exit = row.mtu, 0, None
        row.rto = min(row.rto * 2, row.rto_max)                   # E2
        row.timed_tsn = None                                      # 6.3.1 C5
        row.t3_deadline = None
        for chunk in row.ring:
            if not chunk.gap_acked and chunk.marked is None:
                self._mark(row, chunk, RetransmitCause.TIMEOUT)
        index = next(i for i, chunk in enumerate(row.ring) if chunk.marked is not None)
        self._retransmit(association, row, index, now, records)   # E3 (K = 1), E4 by R1
        row.one_packet_until_ack = True                           # 7.2.3
        self._release(association, row, now, records, packets=1)

    @staticmethod
    def _stop(row: _Row) -> None:
        row.failed = True
        row.t3_deadline = row.idle_deadline = None

    # -- rows ----------------------------------------------------------------------

    def _live_row(self, association: int) -> _Row:
        row = self._row(association)
        if row.failed:
            raise ValueError(f"association row {association} failed: write it again first")
        return row

    def _row(self, association: int) -> _Row:
        return written_row(self._rows, association, self.associations)

    def _check(self, association: int) -> None:
        check_row(association, self.associations)

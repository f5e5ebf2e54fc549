"""The gateware's acknowledgement and transport units behind their golden models' calls.

`RtlSackUnit` (``hdl.rx.sack_unit.SackUnit``) and `RtlTransportUnit`
(``hdl.tx.transport_unit.TransportUnit``) take the calls of
`model.engine.sack.SackUnit` and `model.engine.transport.TransportUnit`, with
the same arguments and results, and run each on the gateware in Amaranth's
simulator, from ordinary synchronous code: a caller written for the model
(an interop test's peer loop, say) runs the gateware unchanged. Each keeps the
model as a shadow, gives it every call too, and raises `UnitMismatch` on the
first record, or row state, where the two differ.

Time. The units count ticks of the engine's timer (`model.engine.sack.TICK_SECONDS`);
the gateware's counter moves one tick per pulse of its ``tick`` input. A call
at tick ``now`` first pulses the gateware's tick up to ``now``, one tick at a
time, each taken before the next, and gives the shadow the same ticks; what
those ticks decide comes first in the call's result. `RtlTransportUnit.sent`
returns nothing (as the model's), so a tick that decides something must be
given by `tick` before it (`UnitMismatch` otherwise, not a lost record).

Each call runs the simulator until the unit has taken the input and made the
records the shadow made, and a margin of cycles after, so a record the
gateware makes and the model does not shows up at the latest in the next call's
comparison; `close` runs a last margin and checks that nothing more came.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable

from amaranth.sim import Simulator

from abi.tx import RetransmitCause as RtlCause
from abi.tx import TransportOpcode
from hdl.rx.sack_unit import SackUnit as RtlSackDesign
from hdl.tx.transport_unit import TransportUnit as RtlTransportDesign
from model.engine.sack import DEFAULT_DELAY_TICKS, DEFAULT_WINDOW, SackRecord, SackUnit
from model.engine.transport import (
    DEFAULT_MTU, MAX_BURST, MAX_RETRANS, RTO_INITIAL_TICKS, RTO_MAX_TICKS, RTO_MIN_TICKS,
    AssociationFailure, Limit, ProtocolViolation, RetransmitCause, Retirement, Retransmission, TransportRecord,
    TransportState, TransportUnit,
)

__all__ = ["UnitMismatch", "SteppedSimulation", "RtlSackUnit", "RtlTransportUnit",
           "transport_record_fields", "transport_state_fields", "rtl_row_fields"]

_MASK = 0xFFFFFFFF
_MARGIN_CYCLES = 40
_LONGEST_CYCLES = 4000
"""Cycles after which a call stops waiting for records the gateware has not made (and fails the comparison)."""
"""Cycles run after the expected records: more than the units take for any one input (a SACK of 4 Gap Ack
Blocks is 19 cycles after its record; a transport input walks at most the ring's Max.Burst chunks)."""


class UnitMismatch(AssertionError):
    """The gateware unit made a record, or holds a row state, other than its golden model's."""


class SteppedSimulation:
    """An Amaranth simulation of `design` run from synchronous code: `call(coroutine)` runs one async function of
    the testbench context on the design's clock and returns its result, and the clock stops between calls."""

    def __init__(self, design, *, background: Callable[[object], Awaitable[None]] | None = None) -> None:
        self._pending: deque = deque()
        self._results: deque = deque()
        self._sim = Simulator(design)
        self._sim.add_clock(1e-8)
        self._sim.add_testbench(self._serve)
        if background is not None:
            self._sim.add_testbench(background, background=True)

    async def _serve(self, ctx) -> None:
        while True:
            while not self._pending:
                await ctx.tick()
            self._results.append(await self._pending.popleft()(ctx))

    def call(self, command: Callable[[object], Awaitable[object]]):
        self._pending.append(command)
        while not self._results:
            self._sim.advance()
        return self._results.popleft()


async def _put(ctx, stream, payload: dict) -> None:
    ctx.set(stream.payload, payload)
    ctx.set(stream.valid, 1)
    while True:
        _, _, ready = await ctx.tick().sample(stream.ready)
        if ready:
            break
    ctx.set(stream.valid, 0)


def _compare(what: str, rtl: list, model: list) -> None:
    if rtl != model:
        raise UnitMismatch(f"{what}: the gateware made {rtl}, its model {model}")


# ---------------------------------------------------------------- the acknowledgement unit


def _sack_record(payload) -> SackRecord:
    return SackRecord(
        payload.association, payload.cumulative_tsn_ack,
        tuple((payload.gaps[i].start, payload.gaps[i].end) for i in range(payload.gap_count)),
        tuple(payload.duplicates[i] for i in range(payload.duplicate_count)), payload.a_rwnd)


class RtlSackUnit:
    """`model.engine.sack.SackUnit`'s calls on ``hdl.rx.sack_unit.SackUnit`` (see the module docstring)."""

    def __init__(self, associations: int, *, map_tsns: int = 64, gap_blocks: int = 4, duplicate_tsns: int = 4,
                 delay_ticks: int = DEFAULT_DELAY_TICKS) -> None:
        self.model = SackUnit(associations, map_tsns=map_tsns, gap_blocks=gap_blocks,
                              duplicate_tsns=duplicate_tsns, delay_ticks=delay_ticks)
        self.associations, self.map_tsns = associations, map_tsns
        self.gap_blocks, self.duplicate_tsns, self.delay_ticks = gap_blocks, duplicate_tsns, delay_ticks
        self.design = RtlSackDesign(associations, map_tsns=map_tsns, gap_blocks=gap_blocks,
                                    duplicate_tsns=duplicate_tsns)
        self._made: list[SackRecord] = []
        self._sim = SteppedSimulation(self.design, background=self._collect)
        self.ticks = 0
        """The gateware's tick count: the ticks pulsed so far."""

    async def _collect(self, ctx) -> None:
        ctx.set(self.design.sacks.ready, 1)
        while True:
            _, _, valid, payload = await ctx.tick().sample(self.design.sacks.valid, self.design.sacks.payload)
            if valid:
                self._made.append(_sack_record(payload))

    def _run(self, what: str, expected: list[SackRecord], stimulus) -> list[SackRecord]:
        async def command(ctx):
            await stimulus(ctx)
            for _ in range(_LONGEST_CYCLES):
                if len(self._made) >= len(expected) and not ctx.get(self.design.tick_pending):
                    break
                await ctx.tick()
            await ctx.tick().repeat(_MARGIN_CYCLES)
        self._sim.call(command)
        made, self._made = self._made, []
        _compare(what, made, expected)
        return made

    def _catch_up(self, now: int) -> list[SackRecord]:
        made = []
        while self.ticks < now:
            self.ticks += 1

            async def pulse(ctx):
                ctx.set(self.design.tick, 1)
                await ctx.tick()
                ctx.set(self.design.tick, 0)
            made += self._run(f"tick {self.ticks}", self.model.tick(self.ticks), pulse)
        return made

    def reset(self, association: int, cumulative_tsn: int, delay_ticks: int | None = None, *,
              window: int = DEFAULT_WINDOW, held_bytes: int = 0, enabled: bool = True) -> None:
        self.model.reset(association, cumulative_tsn, delay_ticks, window=window, held_bytes=held_bytes,
                         enabled=enabled)
        delay = self.delay_ticks if delay_ticks is None else delay_ticks
        row = {"association": association, "cumulative_tsn": cumulative_tsn & _MASK, "delay": delay,
               "window": window, "held_bytes": held_bytes, "enabled": enabled}
        self._run(f"reset of row {association}", [], lambda ctx: _put(ctx, self.design.resets, row))

    def chunk(self, association: int, tsn: int, now: int, packet_end: bool = True,
              immediate: bool = False) -> list[SackRecord]:
        made = self._catch_up(now)
        record = {"association": association, "tsn": tsn, "packet_end": packet_end, "immediate": immediate}
        expected = self.model.chunk(association, tsn, now, packet_end, immediate)
        return made + self._run(f"TSN {tsn} of row {association}", expected,
                                lambda ctx: _put(ctx, self.design.chunks, record))

    def flush(self, association: int) -> list[SackRecord]:
        return self._run(f"flush of row {association}", self.model.flush(association),
                         lambda ctx: _put(ctx, self.design.resets, {"association": association, "flush": 1}))

    def tick(self, now: int) -> list[SackRecord]:
        return self._catch_up(now)

    def next_deadline(self) -> int | None:
        return self.model.next_deadline()

    def duplicates_dropped(self, association: int) -> int:
        return self.model.duplicates_dropped(association)

    def close(self) -> None:
        """A last margin: nothing more comes from the gateware."""
        self._run("the end", [], lambda ctx: ctx.tick())


# ---------------------------------------------------------------- the transport unit


def transport_record_fields(record: TransportRecord) -> tuple:
    """A model record as the gateware's record fields: (opcode, association, tsn, first_tsn, cause, error_count)."""
    if isinstance(record, Retirement):
        return (TransportOpcode.RETIRE, record.association, record.last_tsn, record.first_tsn, 0, 0)
    if isinstance(record, Retransmission):
        cause = RtlCause.FAST if record.cause is RetransmitCause.FAST else RtlCause.TIMEOUT
        return (TransportOpcode.RESEND, record.association, record.tsn, 0, cause, 0)
    if isinstance(record, Limit):
        return (TransportOpcode.LIMIT, record.association, record.tsn, 0, 0, 0)
    if isinstance(record, AssociationFailure):
        return (TransportOpcode.FAILURE, record.association, record.highest_tsn_sent, record.cumulative_tsn_ack,
                0, record.error_count)
    assert isinstance(record, ProtocolViolation)
    return (TransportOpcode.VIOLATION, record.association, record.highest_tsn_sent, record.cumulative_tsn_ack, 0, 0)


def transport_state_fields(state: TransportState) -> tuple:
    """The model's row state in the gateware's units (SRTT, RTTVAR in eighths of a tick)."""
    return (state.cumulative_tsn_ack, state.highest_tsn_sent, state.limit, state.flight_size,
            state.outstanding_bytes, state.cwnd, state.ssthresh, state.partial_bytes_acked, state.rwnd,
            state.fast_recovery_exit, None if state.srtt_ticks is None else round(state.srtt_ticks * 8),
            None if state.rttvar_ticks is None else round(state.rttvar_ticks * 8), state.rto_ticks,
            state.t3_deadline, state.error_count, state.duplicate_tsns_reported, state.failed)


def rtl_row_fields(row) -> tuple:
    """The gateware's row (``TransportUnit.state``) as `transport_state_fields` gives the model's."""
    return (row.cumulative_tsn, (row.cumulative_tsn + row.length) & _MASK, row.limit, row.flight_size,
            row.outstanding_bytes, row.cwnd, row.ssthresh, row.partial_bytes_acked, row.rwnd,
            row.fast_recovery_exit if row.fast_recovery else None,
            row.srtt_eighths if row.srtt_valid else None, row.rttvar_eighths if row.srtt_valid else None,
            row.rto, row.t3_deadline if row.t3_running else None, row.error_count,
            row.duplicate_tsns_reported, bool(row.failed))


class RtlTransportUnit:
    """`model.engine.transport.TransportUnit`'s calls on ``hdl.tx.transport_unit.TransportUnit`` (see the module
    docstring). After every call each row the call touched holds the model's state, field for field."""

    def __init__(self, associations: int, *, ring_tsns: int = 64, gap_blocks: int = 4) -> None:
        self.model = TransportUnit(associations, ring_tsns=ring_tsns, gap_blocks=gap_blocks)
        self.associations, self.ring_tsns, self.gap_blocks = associations, ring_tsns, gap_blocks
        self.design = RtlTransportDesign(associations, ring_tsns=ring_tsns, gap_blocks=gap_blocks)
        self._sim = SteppedSimulation(self.design)
        self._rows: set[int] = set()
        self.ticks = 0
        """The gateware's tick count: the ticks pulsed so far."""

    def _run(self, what: str, expected: list[TransportRecord], stimulus) -> list[TransportRecord]:
        design = self.design

        async def command(ctx):
            made = []
            ctx.set(design.records.ready, 0)
            await stimulus(ctx)
            ctx.set(design.records.ready, 1)
            margin, longest = _MARGIN_CYCLES, _LONGEST_CYCLES
            while margin and longest:
                longest -= 1
                _, _, valid, idle, payload = await ctx.tick().sample(design.records.valid, design.idle,
                                                                      design.records.payload)
                if valid:
                    made.append((TransportOpcode(payload.opcode), payload.association, payload.tsn,
                                 payload.first_tsn, payload.cause, payload.error_count))
                if idle and not valid and len(made) >= len(expected):
                    margin -= 1
            states = {}
            for association in sorted(self._rows):
                ctx.set(design.peek, association)
                states[association] = rtl_row_fields(ctx.get(design.state))
            return made, states, ctx.get(design.now)

        made, states, now = self._sim.call(command)
        _compare(what, made, [transport_record_fields(record) for record in expected])
        for association, fields in states.items():
            _compare(f"{what}: row {association}", [fields], [transport_state_fields(self.model.state(association))])
        if now != self.ticks:
            raise UnitMismatch(f"{what}: the gateware counts tick {now}, the caller {self.ticks}")
        return expected

    def _catch_up(self, now: int) -> list[TransportRecord]:
        made = []
        while self.ticks < now:
            self.ticks += 1

            async def pulse(ctx):
                ctx.set(self.design.tick, 1)
                await ctx.tick()
                ctx.set(self.design.tick, 0)
            made += self._run(f"tick {self.ticks}", self.model.tick(self.ticks), pulse)
        return made

    def reset(self, association: int, initial_tsn: int, peer_a_rwnd: int, *, mtu: int = DEFAULT_MTU,
              chunk_bytes: int | None = None, rto_initial: int = RTO_INITIAL_TICKS, rto_min: int = RTO_MIN_TICKS,
              rto_max: int = RTO_MAX_TICKS, max_retrans: int = MAX_RETRANS, max_burst: int = MAX_BURST
              ) -> list[TransportRecord]:
        expected = self.model.reset(association, initial_tsn, peer_a_rwnd, mtu=mtu, chunk_bytes=chunk_bytes,
                                    rto_initial=rto_initial, rto_min=rto_min, rto_max=rto_max,
                                    max_retrans=max_retrans, max_burst=max_burst)
        self._rows.add(association)
        row = {"association": association, "initial_tsn": initial_tsn, "peer_a_rwnd": peer_a_rwnd, "mtu": mtu,
               "chunk_bytes": mtu - 28 if chunk_bytes is None else chunk_bytes, "rto_initial": rto_initial,
               "rto_min": rto_min, "rto_max": rto_max, "max_retrans": max_retrans, "max_burst": max_burst}
        return self._run(f"reset of row {association}", expected, lambda ctx: _put(ctx, self.design.resets, row))

    def sent(self, association: int, tsn: int, size: int, now: int) -> None:
        if self._catch_up(now):
            raise UnitMismatch(f"TSN {tsn} sent at tick {now}: the ticks before it made records; give them by tick")
        self.model.sent(association, tsn, size, now)
        record = {"association": association, "tsn": tsn, "size": size, "sent_tick": now}
        self._run(f"TSN {tsn} sent on row {association}", [], lambda ctx: _put(ctx, self.design.sent, record))

    def sack(self, association: int, cumulative_tsn_ack: int, a_rwnd: int,
             gap_blocks: tuple[tuple[int, int], ...], duplicate_tsns: tuple[int, ...], now: int
             ) -> list[TransportRecord]:
        made = self._catch_up(now)
        expected = self.model.sack(association, cumulative_tsn_ack, a_rwnd, gap_blocks, duplicate_tsns, now)
        gaps = [{"start": start & 0xFFFF, "end": end & 0xFFFF} for start, end in gap_blocks[:self.gap_blocks]]
        gaps += [{"start": 0, "end": 0}] * (self.gap_blocks - len(gaps))
        fields = {"association": association, "cumulative_tsn_ack": cumulative_tsn_ack & _MASK,
                  "a_rwnd": a_rwnd, "gap_count": len(gap_blocks), "gaps": gaps,
                  "duplicate_count": len(duplicate_tsns)}
        return made + self._run(f"SACK {cumulative_tsn_ack} on row {association}", expected,
                                lambda ctx: _put(ctx, self.design.sacks, fields))

    def shutdown(self, association: int, cumulative_tsn_ack: int, now: int) -> list[TransportRecord]:
        made = self._catch_up(now)
        expected = self.model.shutdown(association, cumulative_tsn_ack, now)
        fields = {"association": association, "shutdown": 1, "cumulative_tsn_ack": cumulative_tsn_ack & _MASK}
        return made + self._run(f"SHUTDOWN {cumulative_tsn_ack} on row {association}", expected,
                                lambda ctx: _put(ctx, self.design.sacks, fields))

    def tick(self, now: int) -> list[TransportRecord]:
        return self._catch_up(now)

    def next_deadline(self) -> int | None:
        return self.model.next_deadline()

    def state(self, association: int) -> TransportState:
        """The row's state (the gateware's equals it after every call)."""
        return self.model.state(association)

    def chunks(self, association: int):
        return self.model.chunks(association)

    def close(self) -> None:
        """A last margin: nothing more comes from the gateware."""
        self._run("the end", [], lambda ctx: ctx.tick())

"""hdl.rx.sack_unit.SackUnit in Amaranth's simulator against its golden model (model/engine/sack.py, itself
tested against RFC 4960 6.2, 6.7 and 3.3.4): the same SACKs, in the same order, for the same records and
ticks, under loss, reordering, duplication, TSNs beyond the map, wrapping TSNs, the host's flushes and a slow
transmit path."""

import random

import pytest
from amaranth.sim import Simulator

from hdl.rx.sack_unit import SackUnit
from hdl.stream.simulation import Pace, stream_get, stream_put
from model.engine.sack import SackRecord
from model.engine.sack import SackUnit as ModelSackUnit

ASSOCIATIONS = 4
TICK_SPACING = 60   # cycles: more than the unit needs to send the SACKs a tick makes due


def peer_traffic(rng: random.Random, start: int, packets: int, map_tsns: int, impaired: bool = True) -> list[list[int]]:
    """One association's packets of DATA TSNs as a lossy, reordering, duplicating network delivers them (or a
    clean one, not `impaired`)."""
    tsns = [(start + 1 + i) & 0xFFFFFFFF for i in range(packets * 3)]
    for i in range(len(tsns) - 1):                 # reordering
        if impaired and rng.random() < 0.2:
            j = min(len(tsns) - 1, i + rng.randint(1, 6))
            tsns[i], tsns[j] = tsns[j], tsns[i]
    delivered = []
    for tsn in tsns:
        if impaired and rng.random() < 0.1:
            continue                               # lost: sent again later
        delivered.append(tsn)
        if impaired and rng.random() < 0.1:
            delivered.append(rng.choice(delivered))                                        # duplicate
        if impaired and rng.random() < 0.03:
            delivered.append((tsn + map_tsns + rng.randint(1, 40)) & 0xFFFFFFFF)           # beyond the map
    lost = [tsn for tsn in tsns if tsn not in delivered]
    delivered += lost                              # the retransmissions
    out, i = [], 0
    while i < len(delivered):
        size = rng.randint(1, 3)                   # chunks bundled in one packet (RFC 4960 6.10)
        out.append(delivered[i:i + size])
        i += size
    return out


def scenario(seed: int, map_tsns: int, impaired: bool = True) -> list[tuple]:
    """Resets, then every association's packets interleaved with ticks; each event as the model takes it."""
    rng = random.Random(seed)
    starts = [rng.randrange(1 << 32) for _ in range(ASSOCIATIONS)]
    starts[0] = 0xFFFFFFF8                         # the TSNs wrap (RFC 4960 1.6)
    # Association 1's window closes past a few held TSNs (a_rwnd 0); association 3: the host SACKs it.
    events = [("reset", a, starts[a], rng.randint(1, 4), 5000 if a == 1 else rng.randrange(1 << 32),
               1452 if a == 1 else rng.randrange(1 << 16), a != 3) for a in range(ASSOCIATIONS)]
    queues = {a: peer_traffic(rng, starts[a], 25, map_tsns, impaired) for a in range(ASSOCIATIONS)}
    while any(queues.values()):
        if rng.random() < 0.25:
            events.append(("tick",))
            continue
        a = rng.choice([a for a, packets in queues.items() if packets])
        packet = queues[a].pop(0)
        for index, tsn in enumerate(packet):       # now and then a sender's I bit (RFC 9260 3.3.1)
            events.append(("chunk", a, tsn, index == len(packet) - 1, rng.random() < 0.08))
        if rng.random() < 0.2:                     # the host's flush write, a SACK owed or not
            events.append(("flush", rng.choice([a, a, rng.randrange(ASSOCIATIONS)])))
    events += [("tick",)] * 6                      # every delayed SACK leaves
    return events


def model_sacks(events, flushed: list[int] | None = None, **options) -> tuple[list[SackRecord], int]:
    """The model's SACKs and unlisted duplicates; `flushed` gets each flush's SACK count."""
    unit = ModelSackUnit(ASSOCIATIONS, **options)
    now, sacks = 0, []
    for event in events:
        if event[0] == "reset":
            unit.reset(event[1], event[2], event[3], window=event[4], held_bytes=event[5], enabled=event[6])
        elif event[0] == "tick":
            now += 1
            sacks += unit.tick(now)
        elif event[0] == "flush":
            sacks += (flush := unit.flush(event[1]))
            if flushed is not None:
                flushed.append(len(flush))
        else:
            sacks += unit.chunk(event[1], event[2], now, event[3], event[4])
    written = {event[1] for event in events if event[0] == "reset"}
    return sacks, sum(unit.duplicates_dropped(a) for a in written)


def rtl_sacks(events, pace: Pace, **options) -> tuple[list[SackRecord], int]:
    dut = SackUnit(ASSOCIATIONS, **options)
    sacks, unlisted = [], []
    expected_count = len(model_sacks(events, **options)[0])

    async def driver(ctx):
        for event in events:
            if event[0] == "reset":
                await stream_put(ctx, dut.resets, {"association": event[1], "cumulative_tsn": event[2],
                                                   "delay": event[3], "window": event[4],
                                                   "held_bytes": event[5], "enabled": event[6]})
            elif event[0] == "flush":
                await stream_put(ctx, dut.resets, {"association": event[1], "flush": 1})
            elif event[0] == "tick":             # ticks come 2**17 cycles apart: one is taken before the next
                ctx.set(dut.tick, 1)
                await ctx.tick()
                ctx.set(dut.tick, 0)
                for _ in range(TICK_SPACING):   # plain ticks: see hdl.stream.simulation.stream_put
                    await ctx.tick()
            else:
                await stream_put(ctx, dut.chunks, {"association": event[1], "tsn": event[2],
                                                   "packet_end": event[3], "immediate": event[4]}, pace=pace)

    async def collector(ctx):
        while True:
            payload = await stream_get(ctx, dut.sacks, pace=pace)
            sacks.append(SackRecord(
                payload.association, payload.cumulative_tsn_ack,
                tuple((payload.gaps[i].start, payload.gaps[i].end) for i in range(payload.gap_count)),
                tuple(payload.duplicates[i] for i in range(payload.duplicate_count)), payload.a_rwnd))

    async def watchdog(ctx):
        for _ in range(40 * len(events) + 200):
            await ctx.tick()
            if len(sacks) >= expected_count:
                break
        await ctx.tick().repeat(100)               # nothing more comes
        unlisted.append(ctx.get(dut.duplicates_unlisted))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(driver, background=True)
    sim.add_testbench(collector, background=True)
    sim.add_testbench(watchdog)
    sim.run()
    return sacks, unlisted[0]


@pytest.mark.parametrize("options", [
    {},                                                            # the engine's: 64 TSNs, 4 blocks, 4 duplicates
    {"map_tsns": 16, "gap_blocks": 2, "duplicate_tsns": 1},        # bounds reached often
], ids=["map64", "map16"])
@pytest.mark.parametrize("seed", [1, 2])
def test_rtl_sends_the_models_sacks(options, seed):
    events = scenario(seed, options.get("map_tsns", 64))
    expected, expected_unlisted = model_sacks(events, **options)
    assert any(sack.gap_blocks for sack in expected) and any(sack.duplicate_tsns for sack in expected)
    assert any(sack.a_rwnd == 0 for sack in expected) and {sack.association for sack in expected} == {0, 1, 2}
    got, unlisted = rtl_sacks(events, Pace(0.3, seed=seed), **options)
    assert got == expected
    assert unlisted == expected_unlisted


def test_rtl_sends_the_models_sacks_on_a_clean_link_with_flushes():
    """No loss: SACKs every second packet and after the delay, and the host's flushes of the delayed ones."""
    events, flushed = scenario(3, 64, impaired=False), []
    expected, _ = model_sacks(events, flushed)
    assert not any(sack.gap_blocks or sack.duplicate_tsns for sack in expected)
    assert 0 in flushed and 1 in flushed           # some flushes found a SACK owed, some none
    got, _ = rtl_sacks(events, Pace(0.3, seed=3))
    assert got == expected


def test_a_delayed_sack_leaves_after_the_rows_delay_rfc4960_6_2():
    """One packet, then ticks: the SACK comes with the row's delay-th tick, not before (RFC 4960 6.2)."""
    events = [("reset", 1, 99, 3, 5000, 1500, True), ("chunk", 1, 100, True, False), ("tick",), ("tick",)]
    assert rtl_sacks(events, Pace())[0] == []
    assert rtl_sacks(events + [("tick",)], Pace())[0] == [SackRecord(1, 100, (), (), 5000)]


def test_a_packet_with_the_i_bit_is_sacked_at_once_rfc9260_6_2():
    """RFC 9260 3.3.1 and 6.2 (RFC 7053 4.2): a packet one of whose DATA chunks has the I bit set is SACKed
    without delay, where the same packet without it waits for the delayed SACK; the next packet waits again."""
    reset = ("reset", 1, 99, 3, 5000, 1500, True)
    assert rtl_sacks([reset, ("chunk", 1, 100, False, True), ("chunk", 1, 101, True, False)], Pace())[0] == [
        SackRecord(1, 101, (), (), 5000)]
    assert rtl_sacks([reset, ("chunk", 1, 100, True, True), ("chunk", 1, 101, True, False), ("tick",), ("tick",)],
                     Pace())[0] == [SackRecord(1, 100, (), (), 5000)]


def test_a_flush_sends_the_owed_sack_at_once_and_nothing_else():
    """A packet waiting for its delayed SACK (RFC 4960 6.2): the flush write sends that SACK now, and the row
    is as before (the next packet again waits, its SACK acknowledging both); no SACK owed, no SACK."""
    events = [("reset", 1, 99, 3, 5000, 1500, True), ("flush", 1), ("chunk", 1, 100, True, False), ("flush", 1),
              ("flush", 1), ("chunk", 1, 101, True, False), ("tick",), ("tick",)]
    assert rtl_sacks(events, Pace())[0] == [SackRecord(1, 100, (), (), 5000)]
    assert rtl_sacks(events + [("tick",)], Pace())[0] == [SackRecord(1, 100, (), (), 5000),
                                                          SackRecord(1, 101, (), (), 5000)]

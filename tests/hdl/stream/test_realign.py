"""hdl.stream.realign.Realign in Amaranth's simulator: every drop value, packet length and stall pattern."""

import random

import pytest
from amaranth.sim import Simulator

from hdl.stream.realign import Realign
from hdl.stream.simulation import Pace, beats_of, packet_collector, settle


def realign(width: int, jobs: list[tuple[bytes, int]], seed: int, *, stall=0.3, gap=0.3):
    dut = Realign(width, max_drop=max(drop for _, drop in jobs))
    rng = random.Random(seed)
    packets = [(beats_of(packet, width, rng), drop) for packet, drop in jobs]
    beat_count = sum(len(beats) for beats, _ in packets)
    received, accepted, refused = [], [], []
    expected_packets = sum(1 for p, d in jobs if len(p) > d)

    async def source(ctx):
        # A packet's drop is valid from its first beat (or a gap before it) to its last, as the
        # contract asks; it is taken with the last beat.
        for beats, drop in packets:
            ctx.set(dut.drop.payload, drop)
            ctx.set(dut.drop.valid, 1)
            for beat in beats:
                while rng.random() < gap:
                    ctx.set(dut.sink.valid, 0)
                    await ctx.tick()
                ctx.set(dut.sink.payload, beat)
                ctx.set(dut.sink.valid, 1)
                while True:
                    _, _, ready, drop_ready = await ctx.tick().sample(dut.sink.ready, dut.drop.ready)
                    if ready:
                        break
                    refused.append(beat)
            assert drop_ready, "drop is taken with the last beat"
            accepted.append(drop)
            ctx.set(dut.drop.valid, 0)
        ctx.set(dut.sink.valid, 0)

    async def watch(ctx):
        await settle(ctx, lambda: len(received) >= expected_packets and len(accepted) == len(jobs),
                     budget=20 * beat_count + 100, tail=20)

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    simulator.add_testbench(source, background=True)
    simulator.add_testbench(packet_collector(dut.source, received, pace=Pace(stall, seed=rng)), background=True)
    simulator.add_testbench(watch)
    simulator.run()
    realign.refused = len(refused)
    return received, accepted


def tail_cycles(width: int, jobs) -> int:
    """Packets that need one output beat more than their kept input beats (the documented extra cycle)."""
    count = 0
    for packet, drop in jobs:
        beats = -(-len(packet) // width)
        kept = beats - drop // width
        last_bytes = len(packet) - (beats - 1) * width
        count += bool(drop % width) and kept >= 2 and last_bytes > drop % width
    return count


@pytest.mark.parametrize("width", [8, 64])
def test_every_drop_and_length(width):
    """Every drop 0..2W+3 against lengths around beat boundaries, with stalls and gaps on both sides."""
    rng = random.Random(width)
    jobs = []
    for drop in range(2 * width + 4):
        for length in {1, drop, drop + 1, width - 1, width, width + 1, 3 * width + 5, rng.randrange(1, 4 * width)}:
            if length >= 1:
                jobs.append((rng.randbytes(length), drop))
    rng.shuffle(jobs)
    packets, accepted = realign(width, jobs, seed=width)
    assert accepted == [drop for _, drop in jobs]
    assert packets == [packet[drop:] for packet, drop in jobs if len(packet) > drop]


@pytest.mark.parametrize("width", [8, 16, 32, 64])
def test_back_to_back_full_rate(width):
    """Without stalls the input is refused at most once per packet with a tail beat, never otherwise (the
    input queue's skid register absorbs a refusal while it has room)."""
    rng = random.Random(1)
    jobs = [(rng.randbytes(rng.randrange(1, 5 * width)), rng.randrange(0, width + 20)) for _ in range(40)]
    packets, _ = realign(width, jobs, seed=2, stall=0, gap=0)
    assert packets == [packet[drop:] for packet, drop in jobs if len(packet) > drop]
    # The last packet's tail cycle refuses nothing: no beat is waiting behind it.
    assert 0 < realign.refused <= tail_cycles(width, jobs[:-1])

"""The register slice (hdl/stream/queue.py): order, back-pressure, one transfer per cycle."""

import random

import pytest
from amaranth.hdl import unsigned
from amaranth.sim import Simulator

from hdl.stream.queue import StreamBuffer


def run(depth, values, source_gaps, sink_stalls):
    dut = StreamBuffer(unsigned(16), depth=depth)
    received, accepted_cycles = [], []

    async def source(ctx):
        for value, gap in zip(values, source_gaps):
            ctx.set(dut.sink.valid, 0)
            await ctx.tick().repeat(gap) if gap else None
            ctx.set(dut.sink.payload, value)
            ctx.set(dut.sink.valid, 1)
            await ctx.tick().until(dut.sink.ready)
        ctx.set(dut.sink.valid, 0)

    async def sink(ctx):
        cycle = 0
        stalls = iter(sink_stalls)
        while len(received) < len(values):
            ready = not next(stalls, False)
            ctx.set(dut.source.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.source.valid, dut.source.payload)
            cycle += 1
            if valid and ready:
                received.append(payload)
                accepted_cycles.append(cycle)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source)
    sim.add_testbench(sink)
    sim.run()
    return received, accepted_cycles


@pytest.mark.parametrize("depth", [2, 4])
def test_order_under_random_backpressure(depth):
    rng = random.Random(depth)
    values = [rng.randrange(1 << 16) for _ in range(300)]
    gaps = [rng.choice([0, 0, 0, 1, 3]) for _ in values]
    stalls = [rng.random() < 0.3 for _ in range(5000)]
    received, _ = run(depth, values, gaps, stalls)
    assert received == values


def test_default_depth_passes_one_transfer_per_cycle():
    """Back to back with both sides ready: no bubble (a slice must not halve the stream's rate)."""
    values = list(range(200))
    _, cycles = run(StreamBuffer.DEFAULT_DEPTH, values, [0] * len(values), [])
    assert cycles[-1] - cycles[0] == len(values) - 1

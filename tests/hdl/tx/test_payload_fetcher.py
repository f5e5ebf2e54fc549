"""hdl.tx.payload_fetcher.PayloadFetcher in Amaranth's simulator against a behavioural AXI4 memory.

Random fetches (any byte alignment, 1 to 9000 bytes, many across 4 KiB pages)
must come out as exactly their bytes, lane 0 first, with every burst legal
(the memory model checks INCR, ARSIZE, alignment, at most 256 beats, no 4 KiB
crossing) and reading only beats that hold payload bytes, under random AR
back-pressure, read latency and R gaps and a stalling consumer.
"""

import random

import pytest
from amaranth.sim import Simulator

from hdl.stream.simulation import Pace, packet_collector, stream_put
from hdl.tx.payload_fetcher import PayloadFetcher
from sim.tb.axi_read_memory import ReadMemory


@pytest.mark.parametrize("width", [8, 64])
def test_random_fetches(width):
    rng = random.Random(width)
    base = (1 << 40) - 0x8000
    memory = ReadMemory(base, rng.randbytes(0x10000), width, ar_ready=0.6, latency=(1, 10), r_gap=0.3,
                        seed=width)
    fetches = []
    for _ in range(24 if width == 8 else 60):
        length = rng.choice((1, 2, width - 1, width, width + 1, rng.randrange(1, 9000), rng.randrange(1, 300)))
        fetches.append((base + rng.randrange(0x10000 - length), length))
    memory.ranges = fetches
    dut = PayloadFetcher(width)
    received = []

    async def source(ctx):
        for address, length in fetches:
            await stream_put(ctx, dut.fetches, {"address": address, "length": length}, pace=Pace(0.2, seed=rng))

    async def watch(ctx):
        for _ in range(40 * sum(length // width + 8 for _, length in fetches)):
            if len(received) == len(fetches):
                break
            await ctx.tick()
        await ctx.tick().repeat(20)

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    simulator.add_testbench(source, background=True)
    for process in memory.processes(dut.axi):
        simulator.add_testbench(process, background=True)
    simulator.add_testbench(packet_collector(dut.payload, received, pace=Pace(0.3, seed=rng)), background=True)
    simulator.add_testbench(watch)
    simulator.run()
    assert received == [memory.data[address - base:address - base + length] for address, length in fetches]
    assert memory.beats == sum((address % width + length + width - 1) // width for address, length in fetches)

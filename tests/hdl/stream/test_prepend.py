"""hdl.stream.prepend.Prepend in Amaranth's simulator: every header length, body lengths around beat
boundaries, padding, stalls on every side, and one beat per cycle when nothing stalls."""

import gc
import random
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable
from amaranth.sim import Simulator

from hdl.stream.prepend import Prepend
from hdl.stream.simulation import Pace, packet_put, settle, stream_put



def prepend(width, lengths, jobs, *, pad_to=1, stall=0.0, gap=0.0, seed=0):
    """Run ``jobs`` (header bytes, body bytes) through; the output packets and the cycle of each output beat."""
    dut = Prepend(width, lengths, pad_to=pad_to)
    rng = random.Random(seed)
    packets, cycles, current = [], [], [b""]

    async def headers(ctx):
        for header, body in jobs:
            await stream_put(ctx, dut.header, {"data": int.from_bytes(header, "little"), "length": len(header),
                                               "body": bool(body)}, pace=Pace(gap, seed=rng))

    async def bodies(ctx):
        for _, body in jobs:
            if body:
                await packet_put(ctx, dut.sink, body, pace=Pace(gap, seed=rng), rng=rng)

    async def network(ctx):
        cycle = 0
        while True:
            ready = not (stall and rng.random() < stall)
            ctx.set(dut.source.ready, ready)
            _, _, valid, beat = await ctx.tick().sample(dut.source.valid, dut.source.payload)
            cycle += 1
            if valid and ready:
                count = bin(beat.keep).count("1")
                assert beat.keep == (1 << count) - 1 and (beat.last or count == width)
                cycles.append(cycle)
                current[0] += int(beat.data).to_bytes(width, "little")[:count]
                if beat.last:
                    packets.append(current[0])
                    current[0] = b""

    async def watch(ctx):
        await settle(ctx, lambda: len(packets) == len(jobs), budget=50 * sum(len(h) + len(b) for h, b in jobs))

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    for process in (headers, bodies, network):
        simulator.add_testbench(process, background=True)
    simulator.add_testbench(watch)
    simulator.run()
    return packets, cycles


@pytest.mark.parametrize("width", [8, 16, 32, 64])
@pytest.mark.parametrize("pad_to, lengths", [(4, (44, 48, 76)), (1, (34, 42)), (1, (1, 7, 13, 64, 65))])
def test_header_then_body_under_stalls(width, pad_to, lengths):
    rng = random.Random(width * 100 + len(lengths))
    jobs = []
    for length in lengths:
        for size in {0, 1, 2, 3, 4, 5, width - 1, width, width + 1, 2 * width + 3, rng.randrange(300)}:
            jobs.append((rng.randbytes(length), rng.randbytes(size)))
    rng.shuffle(jobs)
    packets, _ = prepend(width, lengths, jobs, pad_to=pad_to, stall=0.3, gap=0.3, seed=width)
    assert packets == [header + body + bytes(-len(body) % pad_to) for header, body in jobs]


@pytest.mark.parametrize("width", [8, 64])
def test_one_beat_per_cycle_across_packets(width):
    rng = random.Random(width)
    jobs = [(rng.randbytes(rng.choice((44, 48, 76))), rng.randbytes(rng.choice((0, 1, 60, 61, 200))))
            for _ in range(40)]
    packets, cycles = prepend(width, (44, 48, 76), jobs, pad_to=4)
    assert packets == [header + body + bytes(-len(body) % 4) for header, body in jobs]
    assert cycles[-1] - cycles[0] + 1 == len(cycles) == sum(-(-len(p) // width) for p in packets)


def test_lengths_are_checked():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)   # the refused components are never elaborated
        with pytest.raises(ValueError):
            Prepend(8, (44, 46), pad_to=4)
        with pytest.raises(ValueError):
            Prepend(8, (0, 4))
        gc.collect()

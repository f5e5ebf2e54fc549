"""hdl.stream.packet_buffer.PacketBuffer in Amaranth's simulator: frames in, commanded reads out."""

import random

import pytest
from amaranth.hdl import unsigned
from amaranth.sim import Simulator

from hdl.stream.packet_buffer import PacketBuffer
from hdl.stream.packet import keep_mask
from hdl.stream.simulation import stream_put


def run(width, depth, frames, commands, *, ready_chance=1.0, seed=0, command_late=False, cycles=None):
    """Writes `frames` (lists of beats as bytes) while issuing `commands` (skip, count, user) per frame."""
    dut = PacketBuffer(width, depth, unsigned(8))
    rng = random.Random(seed)
    reads, levels, full_cycles = [], [], [0]
    written = [0]

    async def writer(ctx):
        for frame in frames:
            for index, beat in enumerate(frame):
                ctx.set(dut.write.valid, 1)
                ctx.set(dut.write.payload, {"data": int.from_bytes(beat.ljust(width, b"\xee"), "little"),
                                            "keep": keep_mask(len(beat)), "last": index == len(frame) - 1})
                while True:
                    _, _, ready = await ctx.tick().sample(dut.write.ready)
                    if ready:
                        break
                    full_cycles[0] += 1
                levels.append(ctx.get(dut.level))
            written[0] += 1
        ctx.set(dut.write.valid, 0)

    async def commander(ctx):
        for index, (skip, count, user) in enumerate(commands):
            while written[0] <= (len(frames) - 1 if command_late else index):  # once its frame is complete
                await ctx.tick()
            await stream_put(ctx, dut.command,
                             {"skip": skip, "count": count, "total": len(frames[index]), "user": user})

    async def reader(ctx):
        cycle = 0
        while True:
            cycle += 1
            ready = rng.random() < ready_chance
            ctx.set(dut.read.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.read.valid, dut.read.payload)
            if ready and valid:
                if cycles is not None:
                    cycles.append(cycle)
                count = bin(int(payload.keep)).count("1")
                reads.append((int(payload.data).to_bytes(width, "little")[:count], int(payload.last),
                              int(payload.user)))

    async def main(ctx):
        await commander(ctx)
        for _ in range(40 + 4 * sum(len(f) for f in frames)):
            await ctx.tick()

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    simulator.add_testbench(writer, background=True)
    simulator.add_testbench(main)
    simulator.add_testbench(reader, background=True)
    simulator.run()
    return reads, levels, full_cycles[0]


def frame_beats(rng, width, beats):
    return [rng.randbytes(width) for _ in range(beats - 1)] + [rng.randbytes(rng.randrange(1, width + 1))]


@pytest.mark.parametrize("ready_chance", [1.0, 0.4])
def test_skip_count_discard_wraparound(ready_chance):
    """Reads return exactly beats skip..skip+count-1 of each frame, last on the final one, user copied;
    count 0 discards; a 16-beat ring wraps many times and fills (write back-pressure)."""
    width, depth = 8, 16
    rng = random.Random(int(ready_chance * 10))
    frames, commands, expected = [], [], []
    for index in range(40):
        beats = rng.randrange(1, 12)
        frame = frame_beats(rng, width, beats)
        skip = rng.randrange(0, beats)
        count = 0 if rng.random() < 0.25 else rng.randrange(1, beats - skip + 1)
        frames.append(frame)
        commands.append((skip, count, index))
        for k in range(count):
            expected.append((frame[skip + k], int(k == count - 1), index))
    reads, levels, full_cycles = run(width, depth, frames, commands, ready_chance=ready_chance, seed=1)
    assert reads == expected
    assert max(levels) <= depth
    assert full_cycles > 0


def test_back_to_back_reads_have_no_gap():
    """All frames stored first: reads of consecutive frames come out one beat per cycle, no gap."""
    width, depth = 8, 64
    rng = random.Random(2)
    frames = [frame_beats(rng, width, rng.randrange(1, 6)) for _ in range(8)]
    commands = [(0, len(frame), i) for i, frame in enumerate(frames)]
    cycles = []
    dut_reads, _, _ = run(width, depth, frames, commands, command_late=True, cycles=cycles)
    assert [beat for beat, _, _ in dut_reads] == [beat for frame in frames for beat in frame]
    assert cycles == list(range(cycles[0], cycles[0] + len(cycles)))

"""AxiStreamMux in Amaranth's simulator: every input's frames come out whole and in their order, and
inputs that all have frames waiting take turns, whatever the pacing on either side."""

import random

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from hdl.bus.axis import AxiStreamToPacket, PacketToAxiStream
from hdl.bus.axis_mux import AxiStreamMux
from hdl.stream.simulation import Pace, packet_collector, packet_put, settle

WIDTH = 8


def run(frames: list[list[bytes]], *, source_pace: float, sink_pace: float, seed: int) -> list[bytes]:
    m = Module()
    mux = m.submodules.mux = AxiStreamMux(WIDTH, len(frames))
    inputs = []
    for index in range(len(frames)):
        adapter = m.submodules[f"in_{index}"] = PacketToAxiStream(WIDTH)
        wiring.connect(m, adapter.axis, getattr(mux, f"s_axis_{index}"))
        inputs.append(adapter.packets)
    output = m.submodules.out = AxiStreamToPacket(WIDTH)
    wiring.connect(m, mux.m_axis, output.axis)
    received: list[bytes] = []
    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(packet_collector(output.packets, received, pace=Pace(sink_pace, seed=seed)), background=True)

    def producer(index):
        async def testbench(ctx):
            rng = random.Random(seed + index)
            for frame in frames[index]:
                await packet_put(ctx, inputs[index], frame, pace=Pace(source_pace, seed=rng), rng=rng)
        return testbench
    for index in range(len(frames)):
        sim.add_testbench(producer(index), background=True)
    total = sum(len(each) for each in frames)

    async def main(ctx):
        await settle(ctx, lambda: len(received) == total, budget=20000)
    sim.add_testbench(main)
    sim.run()
    return received


@pytest.mark.parametrize("inputs,source_pace,sink_pace", [(2, 0.0, 0.0), (2, 0.3, 0.3), (3, 0.0, 0.5)])
def test_frames_pass_whole_and_in_order(inputs, source_pace, sink_pace):
    rng = random.Random(inputs)
    frames = [[bytes([index]) + rng.randbytes(rng.randint(0, 70)) for _ in range(12)] for index in range(inputs)]
    received = run(frames, source_pace=source_pace, sink_pace=sink_pace, seed=inputs)
    assert sorted(received) == sorted(frame for each in frames for frame in each)
    for index in range(inputs):   # the first byte names the input
        assert [frame for frame in received if frame[0] == index] == frames[index]


def test_waiting_inputs_take_turns():
    """Both inputs always have a frame waiting: the output alternates between them."""
    frames = [[bytes([0, n]) * 10 for n in range(8)], [bytes([1, n]) * 10 for n in range(8)]]
    received = run(frames, source_pace=0.0, sink_pace=0.0, seed=1)
    order = [frame[0] for frame in received]
    assert sorted(order) == [0] * 8 + [1] * 8
    assert all(first != second for first, second in zip(order, order[1:])), order

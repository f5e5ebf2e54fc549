"""The MAC's transmit path from the core's AXI4-Stream to GMII bytes (hdl/mac/mac.py, store.py, transmitter.py).

Every carrier on GMII must be the IEEE 802.3 wire image of a frame sent: seven
``0x55``, ``0xD5``, the frame padded with zeros to 60 bytes, zlib's CRC-32 of
that, least significant byte first; at least 12 idle clocks between carriers,
exactly 12 while whole frames wait.
"""

import random

import pytest
from amaranth.hdl import Elaboratable, Module

from hdl.mac.mac import EthernetMac
from hdl.stream.simulation import Pace
from tests.hdl.mac.harness import (axis_collector, axis_send, gaps, gmii_recorder, padded, simulate, wait_until,
                                   wire_image)


def run(dut, frames, *, expected_carriers=None, core_period=6.4e-9, pace=None, stalls=None):
    carriers, counts = [], {}
    expected_carriers = len(frames) if expected_carriers is None else expected_carriers

    async def core(ctx):
        for frame in frames:
            await axis_send(ctx, dut.s_axis, frame, pace=pace, stalls=stalls)

    async def watch(ctx):
        budget = sum(len(padded(frame)) + 40 for frame in frames) * 2 + 200
        await wait_until(ctx, lambda: len(carriers) >= expected_carriers, budget=budget, domain="gmii_tx", tail=100)
        counts.update(tx_frames=ctx.get(dut.counters.tx_frames), tx_oversize=ctx.get(dut.counters.tx_oversize))

    simulate(dut, testbenches=[watch], background=[core, gmii_recorder(dut.gmii_tx, carriers)],
             core_period=core_period)
    return carriers, counts


def test_frames_back_to_back_with_padding_and_fcs():
    """Frames of every kind of length, queued by a faster core: exact wire images, padded, 12-clock gaps."""
    rng = random.Random(1)
    frames = [rng.randbytes(n) for n in (60, 1, 14, 59, 61, 64, 100, 127, 128, 129, 7, 300, 1514, 60, 65)]
    carriers, counts = run(EthernetMac(8), frames)
    assert [image for _, image in carriers] == [wire_image(frame) for frame in frames]
    assert gaps(carriers) == [12] * (len(frames) - 1)
    assert counts == {"tx_frames": len(frames), "tx_oversize": 0}


@pytest.mark.parametrize("core_period,idle", [(16e-9, 0.5), (6.4e-9, 0.6)], ids=["62.5MHz", "156MHz"])
def test_a_slow_core_never_starves_the_wire(core_period, idle):
    """Beats from the core with random holes, at 62.5 MHz (the board) or 156.25 MHz: each frame still leaves whole, unbroken."""
    rng = random.Random(int(idle * 10))
    frames = [rng.randbytes(rng.randrange(40, 400)) for _ in range(8)]
    carriers, counts = run(EthernetMac(8), frames, core_period=core_period,
                           pace=Pace(idle, seed=rng.randrange(1 << 30), longest=8))
    assert [image for _, image in carriers] == [wire_image(frame) for frame in frames]
    assert all(gap >= 12 for gap in gaps(carriers))
    assert counts["tx_frames"] == len(frames)


def test_backpressure_from_a_small_store():
    """A store of 32 beats fills while the wire is slower than the core: s_axis waits, nothing is lost."""
    rng = random.Random(2)
    frames = [rng.randbytes(rng.randrange(100, 200)) for _ in range(6)]
    stalls = [0]
    carriers, _ = run(EthernetMac(8, max_frame_bytes=200, tx_store_beats=32), frames, stalls=stalls)
    assert stalls[0] > 0
    assert [image for _, image in carriers] == [wire_image(frame) for frame in frames]
    assert gaps(carriers) == [12] * (len(frames) - 1)


def test_frames_over_the_maximum_are_dropped():
    """A maximum of 197 bytes, within a beat: 197 bytes are sent, 198 (the same number of beats) are not."""
    rng = random.Random(4)
    frames = [rng.randbytes(100), rng.randbytes(198), rng.randbytes(197), rng.randbytes(500), rng.randbytes(60)]
    carriers, counts = run(EthernetMac(8, max_frame_bytes=197), frames, expected_carriers=3)
    assert [image for _, image in carriers] == [wire_image(frames[0]), wire_image(frames[2]), wire_image(frames[4])]
    assert counts == {"tx_frames": 3, "tx_oversize": 2}


def test_a_longer_gap():
    rng = random.Random(6)
    frames = [rng.randbytes(70) for _ in range(4)]
    carriers, _ = run(EthernetMac(8, ifg_bytes=20), frames)
    assert gaps(carriers) == [20] * 3


class _Loopback(Elaboratable):
    """The MAC with its GMII transmit side registered into its receive side (same period, another phase)."""

    def __init__(self, width_bytes: int):
        self.mac = EthernetMac(width_bytes)

    def elaborate(self, platform):
        m = Module()
        m.submodules.mac = self.mac
        m.d.gmii_rx += self.mac.gmii_rx.eq(self.mac.gmii_tx)
        return m


@pytest.mark.parametrize("width_bytes", [8, pytest.param(4, marks=pytest.mark.slow),
                                         pytest.param(16, marks=pytest.mark.slow),
                                         pytest.param(64, marks=pytest.mark.slow)])
def test_loopback(width_bytes):
    """From s_axis through GMII back to m_axis: each frame returns padded to 60 bytes, FCS checked and stripped."""
    rng = random.Random(8)
    frames = [rng.randbytes(n) for n in (1, 59, 60, 61, 333, 64, 1000, 20, 65, 66, 67, 68, 69, 70, 71)]
    loop = _Loopback(width_bytes)
    received = []

    async def core(ctx):
        for frame in frames:
            await axis_send(ctx, loop.mac.s_axis, frame, pace=Pace(0.2, seed=3))

    async def watch(ctx):
        await wait_until(ctx, lambda: len(received) >= len(frames), budget=10_000)

    simulate(loop, testbenches=[watch], background=[core, axis_collector(loop.mac.m_axis, received)])
    assert received == [padded(frame) for frame in frames]


@pytest.mark.slow
def test_jumbo_frames_at_the_default_maximum():
    """The default maximum is 9018 bytes without FCS: such a frame is sent, one byte more is dropped."""
    rng = random.Random(9)
    largest, too_long = rng.randbytes(9018), rng.randbytes(9019)
    frames = [largest, too_long, largest[:61]]
    carriers, counts = run(EthernetMac(8), frames, expected_carriers=2)
    assert [image for _, image in carriers] == [wire_image(largest), wire_image(largest[:61])]
    assert counts == {"tx_frames": 2, "tx_oversize": 1}

"""The MAC's receive path from GMII bytes to the core's AXI4-Stream (hdl/mac/mac.py, receiver.py, store.py).

Frames are put on GMII as IEEE 802.3 wire images with zlib's CRC-32 as the FCS;
the core must see exactly the good frames, without FCS, byte for byte, and the
counters must count each dropped frame once under its reason.
"""

import random

import pytest

from hdl.mac.mac import EthernetMac
from hdl.stream.simulation import Pace
from tests.hdl.mac.harness import (axis_collector, drive_gmii, fcs, idle, simulate, symbols, wait_until,
                                   wire_image)

COUNTERS = ("rx_frames", "rx_symbol_errors", "rx_oversize", "rx_runts", "rx_fcs_errors", "rx_overflows")


def run(dut, stream, *, expected_frames: int, core_period=None, pace=None, hold=None, hold_clocks=0):
    received, counts = [], {}

    async def line(ctx):
        await drive_gmii(ctx, dut.gmii_rx, stream)

    async def release(ctx):
        await ctx.tick().repeat(hold_clocks)
        hold[0] = False

    async def core(ctx):
        await wait_until(ctx, lambda: len(received) >= expected_frames, budget=4 * len(stream) + hold_clocks)
        await ctx.tick().repeat(len(stream) // 2)    # anything more would show up, and counters settle
        counts.update({name: ctx.get(getattr(dut.counters, name)) for name in COUNTERS})

    background = [axis_collector(dut.m_axis, received, pace=pace, hold=hold), line]
    if hold is not None:
        background.append(release)
    simulate(dut, testbenches=[core], background=background,
             **({"core_period": core_period} if core_period else {}))
    return received, counts


@pytest.mark.parametrize("core_period,stall", [pytest.param(6.4e-9, 0.0, marks=pytest.mark.slow),
                                               (16e-9, 0.3), (6.4e-9, 0.5)],
                         ids=["156MHz", "62.5MHz-backpressure", "156MHz-backpressure"])
def test_frames_back_to_back_at_line_rate(core_period, stall):
    """Good frames at line rate, minimum gap, shortened and long preambles: all reach the core byte-exact."""
    rng = random.Random(int(core_period * 1e12) + int(stall * 10))
    lengths = [60, 61, 64, 127, 128, 200, 333, 60, 1514, 75]
    preambles = [7, 1, 0, 3, 7, 15, 2, 7, 6, 5]
    frames = [rng.randbytes(n) for n in lengths]
    stream = idle(5)
    for frame, preamble in zip(frames, preambles):
        stream += symbols(wire_image(frame, preamble=preamble)) + idle(12)
    dut = EthernetMac(8)
    received, counts = run(dut, stream, expected_frames=len(frames), core_period=core_period,
                           pace=Pace(stall, seed=rng.randrange(1 << 30)) if stall else None)
    assert received == frames
    assert counts == {**dict.fromkeys(COUNTERS, 0), "rx_frames": len(frames)}


def test_shrunk_gap():
    """A receiver must take frames whose gap shrank on the way (IEEE 802.3 clause 4.2.3.2.2): gaps of 1 to 11."""
    rng = random.Random(7)
    frames = [rng.randbytes(rng.randrange(60, 100)) for _ in range(6)]
    stream = []
    for gap, frame in zip((1, 2, 4, 8, 11, 1), frames):
        stream += symbols(wire_image(frame)) + idle(gap)
    received, counts = run(EthernetMac(8), stream, expected_frames=len(frames))
    assert received == frames
    assert counts["rx_frames"] == len(frames)


def test_bad_frames_dropped_and_counted():
    """Bad FCS, RX_ER, runts and frames over the maximum never reach the core; each counts once."""
    rng = random.Random(3)
    maximum = 200
    good = [rng.randbytes(n) for n in (60, 100, maximum, 61, 150, 60)]
    corrupt = bytearray(wire_image(rng.randbytes(90)))
    corrupt[40] ^= 0x10                                           # a data bit flipped: FCS mismatch
    bad_fcs_only = wire_image(b"")[:8] + rng.randbytes(80) + b"\x00\x00\x00\x00"
    runt = b"\x55" * 7 + b"\xd5" + rng.randbytes(59)              # 59 bytes + FCS < 64
    runt = runt + fcs(runt[8:])
    tiny = b"\x55" * 7 + b"\xd5" + b"\x01\x02"                    # shorter than an FCS
    oversize = wire_image(rng.randbytes(maximum + 1))
    error_frame = wire_image(rng.randbytes(120))
    no_sfd = b"\x55" * 7 + rng.randbytes(70)                      # no SFD: not a frame, not counted
    stream = idle(3)
    stream += symbols(wire_image(good[0])) + idle(12)
    stream += symbols(bytes(corrupt)) + idle(12)
    stream += symbols(wire_image(good[1])) + idle(12)
    stream += symbols(bad_fcs_only) + idle(12)
    stream += symbols(runt) + idle(12)
    stream += symbols(wire_image(good[2])) + idle(12)             # exactly the maximum: taken
    stream += symbols(oversize) + idle(12)
    stream += symbols(error_frame, error_at=50) + idle(12)
    stream += symbols(wire_image(good[3])) + idle(12)
    stream += symbols(wire_image(rng.randbytes(70)), error_at=3) + idle(12)   # RX_ER in the preamble
    stream += symbols(tiny) + idle(12)
    stream += symbols(no_sfd) + idle(12)
    stream += symbols(wire_image(good[4])) + idle(12)
    stream += symbols(wire_image(good[5]))
    received, counts = run(EthernetMac(8, max_frame_bytes=maximum), stream, expected_frames=len(good))
    assert received == good
    assert counts == {"rx_frames": len(good), "rx_fcs_errors": 2, "rx_symbol_errors": 2, "rx_runts": 2,
                      "rx_oversize": 1, "rx_overflows": 0}


def test_overflow_while_the_core_waits():
    """The line cannot wait: while the core holds m_axis, frames that meet a full store are dropped and counted."""
    rng = random.Random(11)
    frames = [rng.randbytes(rng.randrange(60, 200)) for _ in range(12)]
    stream = []
    for frame in frames:
        stream += symbols(wire_image(frame)) + idle(12)
    # 64 beats (512 bytes): a few frames fit while the core waits.
    dut = EthernetMac(8, max_frame_bytes=200, rx_store_beats=64)
    received, counts = run(dut, stream, expected_frames=1, hold=[True], hold_clocks=len(stream) * 2)
    assert 0 < len(received) < len(frames)
    kept = iter(frames)
    assert all(any(frame == candidate for candidate in kept) for frame in received), "frames out of order or altered"
    assert counts["rx_frames"] == len(received)
    assert counts["rx_overflows"] == len(frames) - len(received)


@pytest.mark.slow
def test_jumbo_frames_at_the_default_maximum():
    """The default maximum is 9018 bytes without FCS: such a frame reaches the core, one byte more does not."""
    rng = random.Random(5)
    largest, too_long = rng.randbytes(9018), rng.randbytes(9019)
    stream = symbols(wire_image(largest)) + idle(12) + symbols(wire_image(too_long)) + idle(12)
    stream += symbols(wire_image(largest[:100]))
    received, counts = run(EthernetMac(8), stream, expected_frames=2)
    assert received == [largest, largest[:100]]
    assert counts["rx_oversize"] == 1 and counts["rx_frames"] == 2

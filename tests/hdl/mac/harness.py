"""The MAC at the GMII byte level: wire images of frames (zlib's CRC-32 as the FCS), drivers and monitors.

The expectations come from IEEE 802.3, not from the gateware: a frame on the
wire is ``0x55`` bytes, ``0xD5``, the frame padded with zeros to 60 bytes and
the FCS, the CRC-32 that ``zlib.crc32`` computes, least significant byte first.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from amaranth.sim import Simulator

from hdl.stream.simulation import Pace

GMII_PERIOD = 8e-9          # 125 MHz
CORE_PERIOD = 6.4e-9        # 156.25 MHz


def fcs(frame: bytes) -> bytes:
    return struct.pack("<I", zlib.crc32(frame))


def padded(frame: bytes) -> bytes:
    return frame + bytes(max(0, 60 - len(frame)))


def wire_image(frame: bytes, *, preamble: int = 7) -> bytes:
    """The bytes of a frame on GMII while the enable is high: preamble, SFD, padded frame, FCS."""
    body = padded(frame)
    return b"\x55" * preamble + b"\xd5" + body + fcs(body)


@dataclass
class Symbol:
    data: int = 0
    en: int = 0
    er: int = 0


def symbols(image: bytes, *, error_at: int | None = None) -> list[Symbol]:
    """``image`` with the enable high; RX_ER high on byte ``error_at`` if given."""
    return [Symbol(byte, 1, int(i == error_at)) for i, byte in enumerate(image)]


def idle(cycles: int) -> list[Symbol]:
    return [Symbol() for _ in range(cycles)]


def simulate(dut, *, testbenches=(), background=(), core_period=CORE_PERIOD, rx_period=GMII_PERIOD,
             tx_period=GMII_PERIOD):
    sim = Simulator(dut)
    sim.add_clock(core_period, domain="sync")
    sim.add_clock(rx_period, domain="gmii_rx")
    sim.add_clock(tx_period, domain="gmii_tx", phase=tx_period / 3)
    for testbench in background:
        sim.add_testbench(testbench, background=True)
    for testbench in testbenches:
        sim.add_testbench(testbench)
    sim.run()


async def drive_gmii(ctx, port, stream: list[Symbol], domain: str = "gmii_rx") -> None:
    """Put one symbol on ``port`` per clock of ``domain``, then leave it idle."""
    for symbol in stream:
        ctx.set(port.data, symbol.data)
        ctx.set(port.en, symbol.en)
        ctx.set(port.er, symbol.er)
        await ctx.tick(domain)
    ctx.set(port.en, 0)
    ctx.set(port.er, 0)


def axis_collector(axis, frames: list[bytes], *, pace: Pace | None = None, hold: list[bool] | None = None):
    """Background testbench taking frames from an AXI4-Stream transmitter port, in ``sync``.

    ``pace`` stalls ``tready`` at random; while ``hold[0]`` is true, ``tready`` stays low.
    """
    width = len(axis.tkeep)

    async def testbench(ctx):
        current = b""
        while True:
            ready = not (hold and hold[0]) and not (pace and pace.cycles())
            ctx.set(axis.tready, ready)
            _, _, valid, data, keep, last = await ctx.tick().sample(axis.tvalid, axis.tdata, axis.tkeep, axis.tlast)
            if not (valid and ready):
                continue
            count = bin(keep).count("1")
            assert keep == (1 << count) - 1 and count >= 1, f"keep {keep:#x} not contiguous from lane 0"
            assert last or count == width, "only the last beat may be partial"
            current += data.to_bytes(width, "little")[:count]
            if last:
                frames.append(current)
                current = b""
    return testbench


async def axis_send(ctx, axis, frame: bytes, *, pace: Pace | None = None, stalls: list[int] | None = None) -> None:
    """Send ``frame`` on an AXI4-Stream receiver port, in ``sync``; count cycles with ``tready`` low in ``stalls``."""
    width = len(axis.tkeep)
    for offset in range(0, len(frame), width):
        piece = frame[offset:offset + width]
        if pace and (idle_cycles := pace.cycles()):
            ctx.set(axis.tvalid, 0)
            await ctx.tick().repeat(idle_cycles)
        ctx.set(axis.tdata, int.from_bytes(piece, "little"))
        ctx.set(axis.tkeep, (1 << len(piece)) - 1)
        ctx.set(axis.tlast, offset + width >= len(frame))
        ctx.set(axis.tvalid, 1)
        while True:
            _, _, ready = await ctx.tick().sample(axis.tready)
            if ready:
                break
            if stalls is not None:
                stalls[0] += 1
    ctx.set(axis.tvalid, 0)


def gmii_recorder(port, carriers: list[tuple[int, bytes]], domain: str = "gmii_tx"):
    """Background testbench recording each carrier (run of TX_EN) as (first clock, bytes); asserts TX_ER low."""
    async def testbench(ctx):
        clock, start, current = 0, None, b""
        while True:
            _, _, data, en, er = await ctx.tick(domain).sample(port.data, port.en, port.er)
            assert not er, "TX_ER set"
            if en:
                if start is None:
                    start = clock
                current += bytes([data])
            elif start is not None:
                carriers.append((start, current))
                start, current = None, b""
            clock += 1
    return testbench


def gaps(carriers: list[tuple[int, bytes]]) -> list[int]:
    """Clocks with the enable low between consecutive carriers."""
    return [start - (previous + len(image)) for (previous, image), (start, _) in zip(carriers, carriers[1:])]


async def wait_until(ctx, done, *, budget: int, tail: int = 40, domain: str = "sync") -> None:
    for _ in range(budget):
        if done():
            break
        await ctx.tick(domain)
    else:
        raise AssertionError(f"not done within {budget} clocks")
    await ctx.tick(domain).repeat(tail)

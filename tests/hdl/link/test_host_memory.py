"""The board's host memory (hdl/link/host_memory.py) on its AXI4 port, in Amaranth's simulator.

The testbench is an AXI4 manager written from the specification (ARM IHI 0022: AW then W beats with
WSTRB, one B; AR then R beats to RLAST), and the expectation a bytearray written the same way.
"""

import random

from amaranth.sim import Simulator

from hdl.bus.axi import Burst, Resp
from hdl.link.host_memory import HostMemory

SIZE = 1024


async def _handshake(ctx, valid, ready):
    """Offer on a channel the manager drives: ``valid`` until the subordinate's ``ready``."""
    ctx.set(valid, 1)
    while True:
        _, _, taken = await ctx.tick().sample(ready)
        if taken:
            break
    ctx.set(valid, 0)


async def _take(ctx, ready, valid, *values):
    """Take one transfer on a channel the subordinate drives; its ``values``."""
    ctx.set(ready, 1)
    while True:
        _, _, present, *sampled = await ctx.tick().sample(valid, *values)
        if present:
            ctx.set(ready, 0)
            return sampled


async def axi_write(ctx, axi, address: int, beats: list[tuple[int, int]], burst=Burst.INCR) -> int:
    """One burst of (data, strobes) beats of 8 bytes; its BRESP."""
    ctx.set(axi.awaddr, address)
    ctx.set(axi.awlen, len(beats) - 1)
    ctx.set(axi.awsize, 3)
    ctx.set(axi.awburst, burst)
    await _handshake(ctx, axi.awvalid, axi.awready)
    for index, (data, strobes) in enumerate(beats):
        ctx.set(axi.wdata, data)
        ctx.set(axi.wstrb, strobes)
        ctx.set(axi.wlast, index == len(beats) - 1)
        await _handshake(ctx, axi.wvalid, axi.wready)
    (resp,) = await _take(ctx, axi.bready, axi.bvalid, axi.bresp)
    return resp


async def axi_read(ctx, axi, address: int, beats: int) -> tuple[bytes, list[int]]:
    ctx.set(axi.araddr, address)
    ctx.set(axi.arlen, beats - 1)
    ctx.set(axi.arsize, 3)
    ctx.set(axi.arburst, Burst.INCR)
    await _handshake(ctx, axi.arvalid, axi.arready)
    data, responses, last = b"", [], False
    while not last:
        word, resp, last = await _take(ctx, axi.rready, axi.rvalid, axi.rdata, axi.rresp, axi.rlast)
        data += word.to_bytes(8, "little")
        responses.append(resp)
    assert len(responses) == beats
    return data, responses


def test_bursts_with_strobes_and_ranges():
    dut = HostMemory(SIZE)
    rng = random.Random(4)
    expected = bytearray(SIZE)
    outcome = {}

    async def testbench(ctx):
        axi = dut.axi
        beats = [(rng.getrandbits(64), rng.getrandbits(8)) for _ in range(6)]
        assert await axi_write(ctx, axi, 0x40, beats) == Resp.OKAY
        for index, (data, strobes) in enumerate(beats):
            for lane in range(8):
                if strobes >> lane & 1:
                    expected[0x40 + 8 * index + lane] = data.to_bytes(8, "little")[lane]
        outcome["read"] = await axi_read(ctx, axi, 0x38, 8)
        # A burst running past the memory: the beats inside are written, the burst answered SLVERR.
        outcome["past_end"] = await axi_write(ctx, axi, SIZE - 8, [(0x1122334455667788, 0xFF)] * 2)
        expected[SIZE - 8:] = (0x1122334455667788).to_bytes(8, "little")
        outcome["past_end_read"] = await axi_read(ctx, axi, SIZE - 8, 2)
        outcome["wrap"] = await axi_write(ctx, axi, 0, [(0xFFFF, 0xFF)] * 2, burst=Burst.WRAP)
        outcome["after_wrap"] = await axi_read(ctx, axi, 0, 2)

    sim = Simulator(dut)
    sim.add_clock(10e-9)
    sim.add_testbench(testbench)
    sim.run()
    data, responses = outcome["read"]
    assert data == bytes(expected[0x38:0x78]) and responses == [Resp.OKAY] * 8
    assert outcome["past_end"] == Resp.SLVERR
    data, responses = outcome["past_end_read"]
    assert data[:8] == bytes(expected[SIZE - 8:]) and responses == [Resp.OKAY, Resp.SLVERR]
    assert outcome["wrap"] == Resp.SLVERR
    assert outcome["after_wrap"] == (bytes(16), [Resp.OKAY] * 2)  # a WRAP burst writes nothing


def test_link_port_shares_the_rams_with_axi_bursts():
    """The link's byte writes and reads run while AXI bursts use the RAMs: each waits for ``ready``, none
    is lost, and each side reads what was written."""
    dut = HostMemory(SIZE)
    rng = random.Random(5)
    link_bytes = rng.randbytes(64)
    axi_beats = [(rng.getrandbits(64), 0xFF) for _ in range(16)]
    outcome = {}

    async def link_side(ctx):
        port = dut.link
        for offset, byte in enumerate(link_bytes):
            ctx.set(port.addr, 0x200 + offset)
            ctx.set(port.wdata, byte)
            await _handshake(ctx, port.we, port.ready)
        outcome["link_written"] = True
        read = b""
        for offset in range(64):
            ctx.set(port.addr, 0x100 + offset)  # the AXI burst's bytes
            await _handshake(ctx, port.re, port.ready)
            await ctx.tick().repeat(3)          # rdata holds until the next read
            read += bytes([ctx.get(port.rdata)])
        outcome["link_read"] = read

    async def axi_side(ctx):
        bursts = 0
        while bursts < 4 or "link_written" not in outcome:  # bursts all through the link's writes
            assert await axi_write(ctx, dut.axi, 0x100, axi_beats[:8]) == Resp.OKAY
            await axi_read(ctx, dut.axi, 0x200, 8)
            bursts += 1
        outcome["axi_read"] = await axi_read(ctx, dut.axi, 0x200, 8)

    sim = Simulator(dut)
    sim.add_clock(10e-9)
    sim.add_testbench(link_side)
    sim.add_testbench(axi_side)
    sim.run()
    expected_axi = b"".join(data.to_bytes(8, "little") for data, _ in axi_beats[:8])
    assert outcome["link_read"] == expected_axi
    data, _ = outcome["axi_read"]
    assert data == link_bytes

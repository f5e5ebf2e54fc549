"""AXI4-Lite register file (hdl/bus/register_file.py) in Amaranth's simulator."""

import pytest
from amaranth.sim import Simulator

from abi.layout import Struct
from abi.register_file import DEVICE_ID, RegisterMap
from abi.rx import register_map
from hdl.bus.register_file import RegisterFile
from sim.tb.axi_lite import axil_read, axil_write

LAYOUT = Struct({"index": 3, "value": 40})


def make():
    regmap = RegisterMap(config=[("ip", 32), ("port", 16)], counters=["frames"], tables=[("things", LAYOUT)])
    return regmap, RegisterFile(regmap)


def test_config_counters_and_table_commit():
    regmap, dut = make()
    window = regmap.tables["things"]
    seen = []

    async def testbench(ctx):
        bus = dut.axil
        ctx.set(dut.counter_frames, 1234)
        ctx.set(dut.params, 0x0408)
        assert await axil_read(ctx, bus, 0x000) == DEVICE_ID
        assert await axil_read(ctx, bus, 0x004) == 0x0408
        await axil_write(ctx, bus, regmap.config_offset("ip"), 0x0A000002)
        await axil_write(ctx, bus, regmap.config_offset("port"), 0x12345)
        assert ctx.get(dut.config_ip) == 0x0A000002 and ctx.get(dut.config_port) == 0x2345
        assert await axil_read(ctx, bus, regmap.config_offset("port")) == 0x2345
        assert await axil_read(ctx, bus, regmap.counters["frames"]) == 1234
        for offset, word in enumerate(window.encode({"index": 5, "value": 0xAB_CDEF0123})):
            await axil_write(ctx, bus, window.base + 4 * offset, word)
        await axil_write(ctx, bus, window.commit, 1)
        assert await axil_read(ctx, bus, window.commit) == 1  # pending: nobody took it yet
        ctx.set(dut.table_things.ready, 1)
        await ctx.tick().until(~dut.table_things.valid)
        assert await axil_read(ctx, bus, window.commit) == 0
        assert await axil_read(ctx, bus, 0x3F0) == 0  # unmapped

    async def consumer(ctx):
        async for _, _, valid, ready, payload in ctx.tick().sample(
                dut.table_things.valid, dut.table_things.ready, dut.table_things.payload):
            if valid and ready:
                seen.append((payload.index, payload.value))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.add_process(consumer)
    sim.run()
    assert seen == [(5, 0xAB_CDEF0123)]


def test_engine_map_fits_and_windows_do_not_overlap():
    regmap = register_map(associations=2, stream_ids=8, regions=16)
    offsets = sorted(w.base for w in regmap.tables.values())
    assert all(b - a >= 0x100 for a, b in zip(offsets, offsets[1:]))
    assert all(w.words * 4 < 0xFC for w in regmap.tables.values())


def test_params_words_follow_one_another_from_0x004():
    """Two PARAMS words (the receive engine's: RX_PARAMS, RX_TABLES) read at 0x004 and 0x008; 0x00C, below the
    configuration words, reads 0; more words than fit below 0x010 are refused."""
    regmap = RegisterMap(config=[("ip", 32)], counters=[], tables=[])
    dut = RegisterFile(regmap, params_words=2)

    async def testbench(ctx):
        ctx.set(dut.params, 0x0000_0400_1C40_0810)
        assert await axil_read(ctx, dut.axil, 0x004) == 0x1C40_0810
        assert await axil_read(ctx, dut.axil, 0x008) == 0x0000_0400
        assert await axil_read(ctx, dut.axil, 0x00C) == 0

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    with pytest.raises(ValueError, match="4 PARAMS words do not fit"):
        RegisterFile(regmap, params_words=4)

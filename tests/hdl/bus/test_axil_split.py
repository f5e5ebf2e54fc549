"""AXI4-Lite address split (hdl/bus/axil_split.py): each window reaches its own register file, and only it."""

import pytest
from amaranth.hdl import Elaboratable, Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from abi.register_file import CONFIG_BASE, RegisterMap
from hdl.bus.axil_split import AxiLiteSplit
from hdl.bus.register_file import RegisterFile
from sim.tb.axi_lite import axil_read, axil_write


class Split(Elaboratable):
    """A 13-bit space in two: register files 0 and 1, each with one 32-bit configuration word."""

    def __init__(self, subordinates=2):
        self.split = AxiLiteSplit(12 + (subordinates - 1).bit_length(), subordinates)
        self.files = [RegisterFile(RegisterMap(config=[("word", 32)], counters=[], tables=[]))
                      for _ in range(subordinates)]

    def elaborate(self, platform):
        m = Module()
        m.submodules.split = self.split
        for index, registers in enumerate(self.files):
            m.submodules[f"file_{index}"] = registers
            m.d.comb += registers.params.eq(0x100 + index)
            wiring.connect(m, getattr(self.split, f"sub_{index}"), registers.axil)
        return m


@pytest.mark.parametrize("subordinates", [2, 4])
def test_each_window_reaches_its_own_registers(subordinates):
    dut = Split(subordinates)
    seen = {}

    async def testbench(ctx):
        bus = dut.split.bus
        for index in range(subordinates):
            await axil_write(ctx, bus, index * 0x1000 + CONFIG_BASE, 0xA0 + index)
        for index in reversed(range(subordinates)):
            base = index * 0x1000
            seen[index] = (await axil_read(ctx, bus, base + 4), await axil_read(ctx, bus, base + CONFIG_BASE))
        seen["words"] = [ctx.get(registers.config_word) for registers in dut.files]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    for index in range(subordinates):
        assert seen[index] == (0x100 + index, 0xA0 + index)   # PARAMS and the word of that file alone
    assert seen["words"] == [0xA0 + index for index in range(subordinates)]


"""The AXI4 / AXI4-Lite signatures (hdl/bus/axi.py) and their Verilog port names (hdl/bus/ports.py)."""

import pytest
from amaranth.hdl import Module, Shape
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.bus.axi import Axi4LiteSignature, Axi4ReadSignature, Axi4Signature, Axi4WriteSignature
from hdl.bus.ports import convert


def test_axi_signatures():
    """Flat AXI signal names; the Verilog port of member awaddr of port m_axi is m_axi_awaddr."""
    full = Axi4Signature(addr_width=40, data_width=128, id_width=6)
    write = Axi4WriteSignature(addr_width=40, data_width=128, id_width=6)
    read = Axi4ReadSignature(addr_width=40, data_width=128, id_width=6)
    assert set(full.members) == set(write.members) | set(read.members)
    assert Shape.cast(full.members["wstrb"].shape).width == 16 and full.members["awaddr"].flow == wiring.Out
    assert full.members["bresp"].flow == wiring.In and Shape.cast(full.members["rid"].shape).width == 6
    assert full == Axi4Signature(addr_width=40, data_width=128, id_width=6) != write
    assert full.flip() == Axi4Signature(addr_width=40, data_width=128, id_width=6).flip()
    lite = Axi4LiteSignature(addr_width=12)
    assert set(lite.members) == {
        "awaddr", "awprot", "awvalid", "awready", "wdata", "wstrb", "wvalid", "wready", "bresp", "bvalid",
        "bready", "araddr", "arprot", "arvalid", "arready", "rdata", "rresp", "rvalid", "rready"}
    with pytest.raises(ValueError):
        Axi4Signature(addr_width=32, data_width=48, id_width=1)

    class Subordinate(wiring.Component):
        s_axil: In(Axi4LiteSignature(addr_width=12))
        m_axi: Out(Axi4Signature(addr_width=32, data_width=64, id_width=2))

        def elaborate(self, platform):
            m = Module()
            m.d.comb += [self.s_axil.awready.eq(self.s_axil.awvalid), self.m_axi.awaddr.eq(self.s_axil.awaddr)]
            return m

    text = convert(Subordinate(), name="top")
    for port in ("input [11:0] s_axil_awaddr", "output s_axil_awready", "output [31:0] m_axi_awaddr",
                 "input [1:0] m_axi_rresp", "output [7:0] m_axi_wstrb"):
        assert port in text

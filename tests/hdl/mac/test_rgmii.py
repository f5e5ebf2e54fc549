"""The RGMII shell (hdl/mac/rgmii.py) elaborates for the ECPIX-5: DDR registers on every RGMII wire.

DDR buffers cannot be simulated; this checks that the shell, on the board's
``eth_rgmii`` resource, becomes the ECP5's IDDRX1F / ODDRX1F primitives, that
TX_CLK leaves through a DELAYG of 2 ns (80 taps of 25 ps) and that the PHY's
receive clock is constrained to 125 MHz. No bitstream is built.
"""

import re

from amaranth.hdl import ClockDomain, ClockSignal, Elaboratable, Module
from amaranth_boards.ecpix5 import ECPIX585Platform

from hdl.mac.rgmii import RgmiiShell


class _Top(Elaboratable):
    def elaborate(self, platform):
        m = Module()
        m.domains.gmii_tx = gmii_tx = ClockDomain("gmii_tx")
        m.d.comb += gmii_tx.clk.eq(ClockSignal("sync"))
        shell = m.submodules.shell = RgmiiShell(platform.request("eth_rgmii", 0, dir="-"))
        # Something for both GMII sides to drive and be driven by.
        m.d.gmii_tx += shell.gmii_tx.eq(shell.gmii_rx)
        return m


def test_shell_elaborates_onto_ecp5_ddr_primitives():
    plan = ECPIX585Platform().prepare(_Top())
    rtlil = plan.files["top.il"]
    cells = re.findall(r"^\s*cell \\(\w+) ", rtlil, re.MULTILINE)
    # RGMII: four data wires and a control wire each way, plus the forwarded clock.
    assert cells.count("IDDRX1F") == 5
    assert cells.count("ODDRX1F") == 6
    assert cells.count("DELAYG") == 1
    assert re.search(r"parameter \\DEL_VALUE 80\b", rtlil)
    assert re.search(r'FREQUENCY PORT "eth_rgmii_0__rx_clk__io" 125000000\.0 HZ', plan.files["top.lpf"])

"""The board's testable part (boards/ecpix5_top.py BoardCore: MAC, RNIC core, host memory, control link)
under Verilator, from GMII bytes and UART bits, driven by the host's link code (sim/tb/board.py).

One run: the engine is programmed over the link, DDP frames from the model's encoders arrive on GMII
with preamble and FCS, the reports, acks and the exception come back over the link and match the
golden model, as does the host memory read back; a raw frame sent over the link leaves on GMII with
zlib's CRC-32 as its FCS; an RDMA Write pushed over the link leaves on GMII as the transmit engine's
model sends it, and completes once acknowledged. Bytes are dropped and flipped both ways on the UART
all along.
"""

import pytest
from amaranth.hdl import ClockDomain, Elaboratable, Module, Signal
from amaranth.hdl._ir import PortDirection

from boards.ecpix5_top import HOST_MEMORY_BYTES, BoardCore
from hdl.bus.ports import verilog_ports
from sim.runner import default_build_root, run_cocotb

#: UART clocks per bit in the simulation (25 Mbaud at 100 MHz, the receiver's least): the link's logic
#: does not depend on the rate, and bits are what the simulation spends its time on.
BIT_CLOCKS = 4


class ClockedCore(Elaboratable):
    """``BoardCore`` with its three clock domains defined here, their clocks and resets ports
    (``clk``/``rst``, ``gmii_rx_clk``/``_rst``, ``gmii_tx_clk``/``_rst``): left undefined, Amaranth
    orders the domains' ports differently from one Python process to the next, and every run
    would rebuild the Verilator model."""

    def __init__(self, core: BoardCore):
        self.core = core
        self.clocks = {name: (Signal(name=f"{prefix}clk"), Signal(name=f"{prefix}rst"))
                       for name, prefix in (("sync", ""), ("gmii_rx", "gmii_rx_"), ("gmii_tx", "gmii_tx_"))}

    def ports(self) -> dict:
        ports = {signal.name: (signal, PortDirection.Input) for pair in self.clocks.values() for signal in pair}
        return {**ports, **verilog_ports(self.core)}

    def elaborate(self, platform):
        m = Module()
        for name, (clk, rst) in self.clocks.items():
            domain = ClockDomain(name)
            m.domains += domain
            m.d.comb += [domain.clk.eq(clk), domain.rst.eq(rst)]
        m.submodules.core = self.core
        return m


@pytest.mark.cocotb
@pytest.mark.slow   # the board's Verilator build alone is minutes: more than the default suite can spend
def test_board_over_the_control_link():
    top = ClockedCore(BoardCore(divisor=BIT_CLOCKS))
    result = run_cocotb(
        top,
        ports=top.ports(),
        test_module="sim.tb.board",
        toplevel="board_core",
        build_root=default_build_root() / "board",
        parameters={"bit_clocks": BIT_CLOCKS, "memory_bytes": HOST_MEMORY_BYTES, "seed": 5,
                    "request_faults": [150, 433, 901, 1302], "response_faults": [120, 377, 702]},
    )
    assert result.tests == 1

"""RGMII at 1000 Mb/s onto GMII and back, for the ECP5 (RGMII v2.0; the ECPIX-5's KSZ9031).

RGMII carries a GMII byte per clock on four wires at double data rate: bits
3:0 on the rising edge, 7:4 on the falling edge; its control wire carries
the enable on the rising edge and enable XOR error on the falling edge. The
DDR registers are ``amaranth.lib.io.DDRBuffer`` (IDDRX1F / ODDRX1F on the
ECP5), so this shell has no logic of its own to test; it cannot be simulated.

Clocks:

* receive: the PHY's RX_CLK clocks the ``gmii_rx`` domain, which this shell
  creates (125 MHz, constrained here; reset by ``rx_reset``, released in step
  with the clock). RGMII needs the clock about 2 ns after the data edges; the
  KSZ9031 adds that delay itself on RX_CLK (RGMII-ID), so the data are sampled
  with no delay in the FPGA;
* transmit: the ``gmii_tx`` domain comes from the board (a PLL at 125 MHz); its
  clock leaves on TX_CLK through an ODDRX1F like the data, then a DELAYG of
  ``tx_clock_delay_taps`` taps (25 ps each; 80 is the 2 ns RGMII wants),
  since the KSZ9031's TX pad-skew registers reach about 1.4 ns at most
  (GTX_CLK +0.96 ns, TXD -0.42 ns).
"""

from amaranth.hdl import Cat, ClockDomain, ClockSignal, Instance, Module, Signal
from amaranth.lib import io, wiring
from amaranth.lib.cdc import ResetSynchronizer
from amaranth.lib.wiring import In, Out

from hdl.mac.gmii import gmii_layout

__all__ = ["RgmiiShell", "RGMII_CLOCK_HZ"]

RGMII_CLOCK_HZ = 125e6
_TAP_SECONDS = 25e-12


class RgmiiShell(wiring.Component):
    """RGMII ``pins`` (the board's ``eth_rgmii`` resource requested with ``dir="-"``) as GMII.

    Ports
    -----
    gmii_rx : ``Out(gmii_layout())``, domain ``gmii_rx``
    gmii_tx : ``In(gmii_layout())``, domain ``gmii_tx``
    rx_reset : ``In(1)``
        Holds the ``gmii_rx`` domain in reset (while the PHY is in reset, its clock may be absent).
    """

    def __init__(self, pins, *, tx_clock_delay_taps: int = round(2e-9 / _TAP_SECONDS)):
        if not 0 <= tx_clock_delay_taps < 128:
            raise ValueError(f"A DELAYG has 0 to 127 taps, not {tx_clock_delay_taps}")
        self._pins, self._taps = pins, tx_clock_delay_taps
        super().__init__({"gmii_rx": Out(gmii_layout()), "gmii_tx": In(gmii_layout()), "rx_reset": In(1)})

    def elaborate(self, platform):
        m = Module()
        pins = self._pins

        m.domains.gmii_rx = rx_domain = ClockDomain("gmii_rx")
        rx_clk = m.submodules.rx_clk = io.Buffer("i", pins.rx_clk)
        m.d.comb += rx_domain.clk.eq(rx_clk.i)
        m.submodules.rx_reset_sync = ResetSynchronizer(self.rx_reset, domain="gmii_rx")
        if platform is not None:  # on the pin: Yosys renames the net, nextpnr keeps the port's name
            platform.add_clock_constraint(pins.rx_clk.io, RGMII_CLOCK_HZ)
        rx_data = m.submodules.rx_data = io.DDRBuffer("i", pins.rx_data, i_domain="gmii_rx")
        rx_ctl = m.submodules.rx_ctl = io.DDRBuffer("i", pins.rx_ctrl, i_domain="gmii_rx")
        m.d.comb += [
            self.gmii_rx.data.eq(Cat(rx_data.i[0], rx_data.i[1])),
            self.gmii_rx.en.eq(rx_ctl.i[0]),
            self.gmii_rx.er.eq(rx_ctl.i[0] ^ rx_ctl.i[1]),
        ]

        tx_data = m.submodules.tx_data = io.DDRBuffer("o", pins.tx_data, o_domain="gmii_tx")
        tx_ctl = m.submodules.tx_ctl = io.DDRBuffer("o", pins.tx_ctrl, o_domain="gmii_tx")
        m.d.comb += [
            tx_data.o[0].eq(self.gmii_tx.data[:4]),
            tx_data.o[1].eq(self.gmii_tx.data[4:]),
            tx_ctl.o[0].eq(self.gmii_tx.en),
            tx_ctl.o[1].eq(self.gmii_tx.en ^ self.gmii_tx.er),
        ]
        # TX_CLK: the clock through the same kind of DDR register as the data, then delayed.
        clock_out, clock_delayed = Signal(), Signal()
        m.submodules.tx_clk_ddr = Instance("ODDRX1F", i_SCLK=ClockSignal("gmii_tx"), i_RST=0, i_D0=1, i_D1=0,
                                           o_Q=clock_out)
        m.submodules.tx_clk_delay = Instance("DELAYG", p_DEL_MODE="USER_DEFINED", p_DEL_VALUE=self._taps,
                                             i_A=clock_out, o_Z=clock_delayed)
        tx_clk = m.submodules.tx_clk = io.Buffer("o", pins.tx_clk)
        m.d.comb += tx_clk.o.eq(clock_delayed)
        return m

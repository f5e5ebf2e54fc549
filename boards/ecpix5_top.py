"""The ECPIX-5 board build: the RNIC core on the board's gigabit Ethernet, with its host on the USB UART.

::

    KSZ9031 ═RGMII═ RgmiiShell ─GMII─ EthernetMac ─m_axis─► Rnic (W = 8) ─m_axi─► HostMemory (64 KiB BRAM)
                                          ▲ s_axis      m_axis │ │ s_axil, record streams   ▲ link port
                                       AxiStreamMux ◄──────────┘ │                          │
                                          ▲ raw frames           ▼                          │
                                          └─────────────── ControlLink ◄────────────────────┘
                                                 │ uart_rx, uart_tx
    FT2232H channel B (USB) ═══════ UART ════════┘

:class:`BoardCore` is everything but the pins, the DDR registers and the PLL:
it is what the tests simulate, from GMII bytes and UART bits. :class:`Ecpix5Top`
puts it on :class:`amaranth_boards.ecpix5.ECPIX585Platform`:

* ``sync`` (the core, 62.5 MHz): the PLL's second output. At W = 8 the engine
  moves 8 bytes a clock, 500 MB/s, 4 times what gigabit Ethernet brings
  (125 MB/s), so the board need not run it at the 156.25 MHz the core is
  designed to close at out of context; on the 71%-full device the core's
  longest routes did not make 100 MHz (docs/boards.md, "Building and programming");
* ``gmii_tx`` (125 MHz): the PLL's first output (:data:`PLL_SETTINGS`);
* ``gmii_rx`` (125 MHz): the PHY's RX_CLK, made by :class:`hdl.mac.rgmii.RgmiiShell`.

The PHY is held in reset 10 ms after configuration (:class:`hdl.mac.phy_reset.PhyReset`),
its receive domain until it is ready; RGB LED 0 shows green once it is. The
user button resets the core.
"""

from amaranth.hdl import ClockDomain, ClockSignal, Elaboratable, Instance, Module, ResetSignal, Signal
from amaranth.lib import io, wiring
from amaranth.utils import exact_log2
from amaranth.lib.cdc import AsyncFFSynchronizer, ResetSynchronizer
from amaranth.lib.wiring import In, Out

from abi.rx import MIN_ADDRESS_BITS
from hdl.bus.axis_mux import AxiStreamMux
from hdl.link.host_memory import HostMemory
from hdl.link.link import ControlLink
from hdl.link.uart import uart_divisor
from hdl.mac.gmii import gmii_layout
from hdl.mac.mac import EthernetMac
from hdl.mac.phy_reset import PhyReset
from hdl.mac.rgmii import RgmiiShell
from hdl.rnic import Rnic

__all__ = ["BoardCore", "Ecpix5Top", "CORE_CLOCK_HZ", "DEFAULT_BAUD", "HOST_MEMORY_BYTES", "PLL_SETTINGS"]

CORE_CLOCK_HZ = 62.5e6
#: The FT2232H makes 3 Mbaud exactly (12 MHz / 4); the core's 21 clocks a bit give 2.976 Mbaud, 0.8% slow.
DEFAULT_BAUD = 3_000_000
HOST_MEMORY_BYTES = 64 * 1024
WIDTH_BYTES = 8

#: EHXPLLL settings for 125 MHz (CLKOP) and 62.5 MHz (CLKOS) from 100 MHz, as
#: ``yowasp-ecppll -i 100 -o 125 --clkout1 62.5`` gives them: 100 MHz / 4 = 25 MHz at the phase
#: detector, x 5 through the CLKOP feedback, VCO 625 MHz / 5 and / 10.
PLL_SETTINGS = {"CLKI_DIV": 4, "CLKFB_DIV": 5, "CLKOP_DIV": 5, "CLKOP_CPHASE": 2, "CLKOP_FPHASE": 0,
                "CLKOS_DIV": 10, "CLKOS_CPHASE": 2, "CLKOS_FPHASE": 0}


class BoardCore(wiring.Component):
    """The MAC, the RNIC core (receive and transmit engines), the host memory and the control link, joined;
    see the module docs. The MAC sends the core's frames and the link's raw frames, a frame at a time.

    Domains: ``sync`` (the core), ``gmii_rx``, ``gmii_tx``.

    Ports
    -----
    gmii_rx : ``In(gmii_layout())``, gmii_tx : ``Out(gmii_layout())``
    uart_rx : ``In(1, init=1)``, uart_tx : ``Out(1, init=1)``
    """

    def __init__(self, *, divisor: int = uart_divisor(CORE_CLOCK_HZ, DEFAULT_BAUD),
                 memory_bytes: int = HOST_MEMORY_BYTES, **engine_options):
        self.divisor, self.memory_bytes = divisor, memory_bytes
        self._engine_options = engine_options
        super().__init__({
            "gmii_rx": In(gmii_layout()),
            "gmii_tx": Out(gmii_layout()),
            "uart_rx": In(1, init=1),
            "uart_tx": Out(1, init=1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.mac = mac = EthernetMac(WIDTH_BYTES)
        # Host addresses as wide as the memory's (at least the engines' least): 16 bits for 64 KiB.
        address_bits = max(MIN_ADDRESS_BITS, exact_log2(self.memory_bytes))
        # The wide FIFOs in LUT RAM: at 62.5 MHz the board is a routing problem, and block RAM crowds it.
        m.submodules.engine = engine = Rnic(WIDTH_BYTES, address_bits=address_bits, block_ram_queues=False,
                                            **self._engine_options)
        m.submodules.memory = memory = HostMemory(self.memory_bytes, data_bytes=WIDTH_BYTES, addr_width=address_bits)
        m.submodules.link = link = ControlLink(divisor=self.divisor, memory_bytes=self.memory_bytes,
                                               width_bytes=WIDTH_BYTES)
        m.d.comb += [mac.gmii_rx.eq(self.gmii_rx), self.gmii_tx.eq(mac.gmii_tx),
                     link.uart_rx.eq(self.uart_rx), self.uart_tx.eq(link.uart_tx),
                     link.mac_counters.eq(mac.counters)]
        wiring.connect(m, mac.m_axis, engine.s_axis)
        wiring.connect(m, engine.m_axi, memory.axi)
        wiring.connect(m, link.axil, engine.s_axil)
        wiring.connect(m, link.memory, memory.link)
        wiring.connect(m, engine.m_axis_report, link.report)
        wiring.connect(m, engine.m_axis_ack, link.ack)
        wiring.connect(m, engine.m_axis_exc, link.exceptions)
        m.submodules.frames = frames = AxiStreamMux(WIDTH_BYTES)
        wiring.connect(m, engine.m_axis, frames.s_axis_0)
        wiring.connect(m, link.frames, frames.s_axis_1)
        wiring.connect(m, frames.m_axis, mac.s_axis)
        for link_port, engine_port in (("push_work", "s_axis_wr"), ("push_read_response", "s_axis_rr"),
                                       ("push_control", "s_axis_ctl"), ("push_tsn", "s_axis_tsn"),
                                       ("completions", "m_axis_completion"), ("tsn_refused", "m_axis_tsn_refused"),
                                       ("read_responses_refused", "m_axis_rr_refused")):
            wiring.connect(m, getattr(link, link_port), getattr(engine, engine_port))
        return m


class Ecpix5Top(Elaboratable):
    """:class:`BoardCore` on the ECPIX-5's pins, with its clocks, resets and PHY reset (see the module docs)."""

    def __init__(self, *, baud: float = DEFAULT_BAUD, memory_bytes: int = HOST_MEMORY_BYTES):
        self.core = BoardCore(divisor=uart_divisor(CORE_CLOCK_HZ, baud), memory_bytes=memory_bytes)

    def elaborate(self, platform):
        m = Module()
        clk100 = platform.request("clk100", 0)
        button = platform.request("rst", 0)

        m.domains.sync = ClockDomain("sync")
        m.domains.gmii_tx = ClockDomain("gmii_tx")
        locked, tx_clock, core_clock = Signal(), Signal(), Signal()
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI="100", a_FREQUENCY_PIN_CLKOP="125",
            a_FREQUENCY_PIN_CLKOS=f"{CORE_CLOCK_HZ / 1e6:g}",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_CLKOP_ENABLE="ENABLED", p_CLKOS_ENABLE="ENABLED",
            p_FEEDBK_PATH="CLKOP", **{f"p_{name}": value for name, value in PLL_SETTINGS.items()},
            i_CLKI=clk100.i, i_CLKFB=tx_clock, i_RST=0, i_STDBY=0, i_PHASESEL0=0, i_PHASESEL1=0,
            i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1, i_PLLWAKESYNC=0, i_ENCLKOP=0,
            o_CLKOP=tx_clock, o_CLKOS=core_clock, o_LOCK=locked)
        # nextpnr derives the outputs' constraints from the PLL's FREQUENCY_PIN_* attributes (a
        # constraint on a clock net itself names a net that synthesis renames, and is ignored).
        m.d.comb += [ClockSignal("gmii_tx").eq(tx_clock), ClockSignal("sync").eq(core_clock)]
        # The core's reset reaches some 43,000 flip-flops: synchronized, then through a DCCA onto a global
        # network, which reaches their LSR inputs (as general routing, it kept router2 from converging).
        core_reset = Signal()
        m.submodules.sync_reset = AsyncFFSynchronizer(~locked | button.i, core_reset, o_domain="sync")
        m.submodules.sync_reset_buffer = Instance("DCCA", i_CLKI=core_reset, i_CE=1,
                                                  o_CLKO=ResetSignal("sync"))
        m.submodules.gmii_tx_reset = ResetSynchronizer(~locked | button.i, domain="gmii_tx")

        eth = platform.request("eth_rgmii", 0, dir="-")
        m.submodules.phy_reset = phy = PhyReset(CORE_CLOCK_HZ)
        m.submodules.phy_reset_pin = phy_pin = io.Buffer("o", eth.rst)
        m.submodules.rgmii = shell = RgmiiShell(eth)
        m.d.comb += [phy_pin.o.eq(phy.reset), shell.rx_reset.eq(~phy.ready)]

        uart = platform.request("uart", 0)
        led = platform.request("rgb_led", 0)
        m.submodules.core = core = self.core
        m.d.comb += [core.gmii_rx.eq(shell.gmii_rx), shell.gmii_tx.eq(core.gmii_tx),
                     core.uart_rx.eq(uart.rx.i), uart.tx.o.eq(core.uart_tx), led.g.o.eq(phy.ready)]
        return m

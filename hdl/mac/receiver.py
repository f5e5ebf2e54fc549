"""GMII receive: find the frame after its preamble, check its FCS and length, strip the FCS.

One byte per clock of the receive clock (domain ``sync`` here; the MAC
renames it ``gmii_rx``). A frame starts at the SFD after any number of
preamble bytes (none included: IEEE 802.3 clause 35.2.3.2.2 lets a PHY shorten
the preamble); a carrier whose bytes before the SFD are neither is ignored to
its end. The frame's bytes leave four clocks late, so when RX_DV falls the
four bytes still held are the FCS and are never sent: the byte before them
leaves with ``last``, and with ``drop`` set if the frame is bad:

* RX_ER during the carrier (``symbol_error``; also a carrier with RX_ER in the
  preamble, which sends nothing);
* more than ``max_frame_bytes`` bytes before the FCS (``oversize``): at most
  ``max_frame_bytes`` bytes are sent, then only the final ``last``;
* fewer than 64 bytes with the FCS (``runt``, IEEE 802.3 clause 4.2.4.2.2);
* an FCS that does not match (``fcs_error``): the CRC of the frame and its FCS
  leaves the CRC-32 residue (IEEE 802.3 clause 3.2.9).

Each bad frame pulses the one event first in that list. ``source`` cannot
wait: its consumer takes one byte per clock.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.crc import catalog
from amaranth.lib.wiring import In, Out

from hdl.mac.gmii import (DEFAULT_MAX_FRAME_BYTES, FCS_BYTES, MIN_FRAME_BYTES, PREAMBLE_BYTE, SFD,
                          frame_byte_layout, gmii_layout)

__all__ = ["GmiiReceiver"]


class GmiiReceiver(wiring.Component):
    """GMII bytes in, the frame's bytes without preamble and FCS out, with a verdict on the last.

    Ports
    -----
    gmii : ``In(gmii_layout())``
        RXD, RX_DV, RX_ER; registered on entry.
    source : ``Out(stream.Signature(frame_byte_layout(), always_ready=True))``
        At most one byte per clock, from flip-flops.
    fcs_error, symbol_error, runt, oversize : ``Out(1)``
        One-clock pulses, one per bad frame (see the module docs).
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES):
        if max_frame_bytes < MIN_FRAME_BYTES:
            raise ValueError(f"The largest frame must be at least {MIN_FRAME_BYTES} bytes, not {max_frame_bytes}")
        self._max = max_frame_bytes
        super().__init__({
            "gmii": In(gmii_layout()),
            "source": Out(stream.Signature(frame_byte_layout(), always_ready=True)),
            "fcs_error": Out(1),
            "symbol_error": Out(1),
            "runt": Out(1),
            "oversize": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        rx = Signal(gmii_layout())
        m.d.sync += rx.eq(self.gmii)

        crc = m.submodules.crc = catalog.CRC32_ETHERNET(8).create()
        m.d.comb += crc.data.eq(rx.data)

        # The four newest bytes and the one before them; `held_valid` marks the filled ones.
        held = Signal(8 * (FCS_BYTES + 1))
        held_valid = Signal(FCS_BYTES + 1)
        oldest = held[-8:]
        # Bytes after the SFD with the FCS, counted up to `limit` (more than the largest frame).
        limit = self._max + FCS_BYTES + 1
        count = Signal(range(limit + 1))
        saturated = Signal()     # count == limit: oversize
        long_enough = Signal()   # count >= 64
        errored = Signal()

        m.d.sync += [self.source.valid.eq(0), self.fcs_error.eq(0), self.symbol_error.eq(0),
                     self.runt.eq(0), self.oversize.eq(0)]

        def start_frame():
            m.d.comb += crc.start.eq(1)
            m.d.sync += [held_valid.eq(0), count.eq(0), saturated.eq(0), long_enough.eq(0), errored.eq(0)]

        with m.FSM():
            with m.State("idle"):
                with m.If(rx.en):
                    with m.If(rx.er):
                        m.d.sync += self.symbol_error.eq(1)
                        m.next = "discard"
                    with m.Elif(rx.data == SFD):
                        start_frame()
                        m.next = "frame"
                    with m.Elif(rx.data == PREAMBLE_BYTE):
                        m.next = "preamble"
                    with m.Else():
                        m.next = "discard"
            with m.State("preamble"):
                with m.If(~rx.en):
                    m.next = "idle"
                with m.Elif(rx.er):
                    m.d.sync += self.symbol_error.eq(1)
                    m.next = "discard"
                with m.Elif(rx.data == SFD):
                    start_frame()
                    m.next = "frame"
                with m.Elif(rx.data != PREAMBLE_BYTE):
                    m.next = "discard"
            with m.State("frame"):
                with m.If(rx.en):
                    m.d.comb += crc.valid.eq(1)
                    m.d.sync += [
                        held.eq(Cat(rx.data, held[:-8])),
                        held_valid.eq(Cat(1, held_valid[:-1])),
                        errored.eq(errored | rx.er),
                        self.source.valid.eq(held_valid[-1] & ~saturated),
                        self.source.payload.data.eq(oldest),
                        self.source.payload.last.eq(0),
                    ]
                    with m.If(~saturated):
                        m.d.sync += [count.eq(count + 1), saturated.eq(count == limit - 1)]
                    with m.If(count == MIN_FRAME_BYTES + FCS_BYTES - 1):
                        m.d.sync += long_enough.eq(1)
                with m.Else():
                    m.d.sync += [
                        self.source.valid.eq(1),
                        self.source.payload.data.eq(oldest),
                        self.source.payload.last.eq(1),
                        self.source.payload.drop.eq(errored | saturated | ~long_enough | ~crc.match_detected),
                    ]
                    with m.If(errored):
                        m.d.sync += self.symbol_error.eq(1)
                    with m.Elif(saturated):
                        m.d.sync += self.oversize.eq(1)
                    with m.Elif(~long_enough):
                        m.d.sync += self.runt.eq(1)
                    with m.Elif(~crc.match_detected):
                        m.d.sync += self.fcs_error.eq(1)
                    m.next = "idle"
            with m.State("discard"):
                with m.If(~rx.en):
                    m.next = "idle"
        return m

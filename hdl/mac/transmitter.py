"""GMII transmit: preamble, SFD, the frame padded to the minimum, its FCS, then the inter-frame gap.

One byte per clock of the transmit clock (domain ``sync`` here; the MAC
renames it ``gmii_tx``). A frame starts when its first beat is on ``sink``
and the gap after the previous one (``ifg_bytes`` clocks with TX_EN low) is
over; its later beats must follow without a gap, one per ``W`` clocks, which
the :class:`~hdl.mac.store.FrameStore` in front guarantees (it releases only
whole frames and reads one beat per clock). On the wire (IEEE 802.3 clauses
3.2 and 4.2.3): 7 preamble bytes, the SFD, the frame, zero bytes up to 60
bytes (clause 4.2.3.3), the CRC-32 of all of them least significant byte first
(clause 3.2.9), TX_EN low for the gap. TX_ER stays low.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.crc import catalog
from amaranth.lib.wiring import In, Out

from hdl.mac.gmii import FCS_BYTES, MIN_FRAME_BYTES, MIN_IFG_BYTES, PREAMBLE_BYTE, PREAMBLE_BYTES, SFD, gmii_layout
from hdl.stream.bits import check_width
from hdl.stream.packet import packet_signature

__all__ = ["GmiiTransmitter"]


class GmiiTransmitter(wiring.Component):
    """Frames from ``sink`` onto GMII; see the module docs.

    Ports
    -----
    sink : ``In(packet_signature(W))``
        Frames without FCS, at least one byte each; beats after a frame's first must be ready in time.
    gmii : ``Out(gmii_layout())``
        TXD, TX_EN, TX_ER, from flip-flops.
    sent : ``Out(1)``
        A one-clock pulse per frame sent.
    """

    def __init__(self, width_bytes: int, ifg_bytes: int = MIN_IFG_BYTES):
        check_width(width_bytes)
        if ifg_bytes < MIN_IFG_BYTES:
            raise ValueError(f"The inter-frame gap must be at least {MIN_IFG_BYTES} bytes, not {ifg_bytes}")
        self._width, self._ifg = width_bytes, ifg_bytes
        super().__init__({
            "sink": In(packet_signature(width_bytes)),
            "gmii": Out(gmii_layout()),
            "sent": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        width = self._width
        crc = m.submodules.crc = catalog.CRC32_ETHERNET(8).create()

        # The beat being sent: its bytes still to go, lane 0 first, and their keep bits. Lanes
        # past `keep` are loaded as zeros and zeros shift in, so once a frame's bytes are out
        # `shift` gives the padding: the CRC's input is a flip-flop, not the output mux.
        shift = Signal(8 * width)
        lanes_left = Signal(width)
        beat_last = Signal()
        beat_ends = ~lanes_left[1]
        sent = Signal(range(MIN_FRAME_BYTES + 1))     # bytes of the frame and its padding, saturating
        phase = Signal(range(max(self._ifg, PREAMBLE_BYTES + 1) + 1))

        byte, enable = Signal(8), Signal()
        m.d.sync += [self.gmii.data.eq(byte), self.gmii.en.eq(enable), self.gmii.er.eq(0), self.sent.eq(0)]
        m.d.comb += crc.data.eq(shift[:8])

        def take_beat():
            m.d.comb += self.sink.ready.eq(1)
            keep = self.sink.payload.keep
            m.d.sync += [shift.eq(self.sink.payload.data & Cat(keep[lane].replicate(8) for lane in range(width))),
                         lanes_left.eq(keep),
                         beat_last.eq(self.sink.payload.last)]

        def count_byte():
            m.d.comb += crc.valid.eq(1)
            with m.If(sent != MIN_FRAME_BYTES):
                m.d.sync += sent.eq(sent + 1)

        with m.FSM():
            with m.State("gap"):
                with m.If(phase != 0):
                    m.d.sync += phase.eq(phase - 1)
                with m.Elif(self.sink.valid):
                    take_beat()
                    m.d.comb += [byte.eq(PREAMBLE_BYTE), enable.eq(1), crc.start.eq(1)]
                    m.d.sync += [phase.eq(1), sent.eq(0)]
                    m.next = "preamble"
            with m.State("preamble"):
                m.d.comb += [byte.eq(Mux(phase == PREAMBLE_BYTES, SFD, PREAMBLE_BYTE)), enable.eq(1)]
                m.d.sync += phase.eq(phase + 1)
                with m.If(phase == PREAMBLE_BYTES):
                    m.next = "frame"
            with m.State("frame"):
                m.d.comb += [byte.eq(shift[:8]), enable.eq(1)]
                count_byte()
                m.d.sync += [shift.eq(shift >> 8), lanes_left.eq(lanes_left >> 1)]
                with m.If(beat_ends):
                    with m.If(~beat_last):
                        take_beat()
                    with m.Elif(sent >= MIN_FRAME_BYTES - 1):
                        m.d.sync += phase.eq(0)
                        m.next = "fcs"
                    with m.Else():
                        m.next = "pad"
            with m.State("pad"):
                m.d.comb += [byte.eq(shift[:8]), enable.eq(1)]
                count_byte()
                with m.If(sent == MIN_FRAME_BYTES - 1):
                    m.d.sync += phase.eq(0)
                    m.next = "fcs"
            with m.State("fcs"):
                m.d.comb += [byte.eq(crc.crc.word_select(phase[:2], 8)), enable.eq(1)]
                m.d.sync += phase.eq(phase + 1)
                with m.If(phase == FCS_BYTES - 1):
                    m.d.sync += [phase.eq(self._ifg), self.sent.eq(1)]
                    m.next = "gap"
        return m

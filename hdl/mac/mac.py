"""The gigabit Ethernet MAC: GMII on one side, AXI4-Stream frames without FCS in the core's domain on the other.

::

    gmii_rx ─► GmiiReceiver ─byte─► BytePacker ─beat─► FrameStore (lossy) ─► AsyncFIFO ─► Queue ─► m_axis
              (preamble/SFD, FCS check and strip, length)                    gmii_rx │ sync

    s_axis ─► Queue ─► AsyncFIFO ─► FrameStore (waits) ─► GmiiTransmitter ─► gmii_tx
                  sync │ gmii_tx                      (preamble, padding, FCS, gap)

Three clock domains: ``gmii_rx`` (the PHY's receive clock), ``gmii_tx`` (the
transmit clock, 125 MHz at 1000 Mb/s) and ``sync`` (the core's). Both
directions store and forward in the GMII domain, so what crosses to the other
domain is only whole, good frames:

* receive: the core sees only frames whose FCS, length and RX_ER were good;
  bad frames are dropped before any of their bytes crosses. The receive store
  cannot make the line wait: a frame that meets it full is dropped
  (``rx_overflows``), which happens only while the core holds ``m_axis`` back;
* transmit: a frame starts on the wire only once all of it is in the transmit
  store, so the wire never runs dry in the middle of a frame whatever the core's
  pace; frames leave back to back with the minimum gap while whole frames wait.
  ``s_axis`` waits while the store is full. A frame longer than
  ``max_frame_bytes`` is dropped (``tx_oversize``).

The counters (:func:`mac_counters_layout`) are 32-bit, wrapping, in ``sync``.
"""

from amaranth.hdl import DomainRenamer, Module, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.fifo import AsyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from abi.link import MAC_RX_EVENTS, MAC_TX_EVENTS
from hdl.bus.axis import AxiStreamSignature, AxiStreamToPacket, PacketToAxiStream
from hdl.mac.counters import COUNTER_BITS, EventCounters
from hdl.mac.gmii import DEFAULT_MAX_FRAME_BYTES, MIN_IFG_BYTES, gmii_layout
from hdl.mac.packer import BytePacker
from hdl.mac.receiver import GmiiReceiver
from hdl.mac.store import FrameStore
from hdl.mac.transmitter import GmiiTransmitter
from hdl.stream.bits import check_width
from hdl.stream.packet import packet_layout
from hdl.stream.queue import Queue

__all__ = ["EthernetMac", "mac_counters_layout", "RX_EVENTS", "TX_EVENTS"]

#: Receive and transmit events, each counted once per frame (the ABI's, :data:`abi.link.MAC_RX_EVENTS`).
RX_EVENTS, TX_EVENTS = MAC_RX_EVENTS, MAC_TX_EVENTS

# Beats in flight in each clock-domain crossing; enough that neither side waits for the
# synchronizers at the MAC's rates.
_CROSSING_DEPTH = 8


def mac_counters_layout() -> data.StructLayout:
    return data.StructLayout({name: unsigned(COUNTER_BITS) for name in RX_EVENTS + TX_EVENTS})


def _store_beats(max_beats: int) -> int:
    """The smallest ring that holds the longest frame whole (a power of two, one beat kept free)."""
    return 1 << (max_beats + 1).bit_length()


class EthernetMac(wiring.Component):
    """The MAC; see the module docs.

    Parameters
    ----------
    width_bytes : int
        ``W``, the core's beat width.
    max_frame_bytes : int
        The longest frame without FCS taken on receive and sent on transmit.
    rx_store_beats, tx_store_beats : int or None
        Ring sizes in beats (powers of two); by default the smallest that holds the longest frame.
    ifg_bytes : int
        The transmit inter-frame gap, at least 12.

    Ports
    -----
    gmii_rx : ``In(gmii_layout())``, domain ``gmii_rx``
    gmii_tx : ``Out(gmii_layout())``, domain ``gmii_tx``
    m_axis : ``Out(AxiStreamSignature(W))``
        Received Ethernet frames without FCS; ``tvalid`` and ``tdata`` from flip-flops.
    s_axis : ``In(AxiStreamSignature(W))``
        Frames to send, without FCS (shorter than 60 bytes: padded); ``tready`` from a flip-flop.
    counters : ``Out(mac_counters_layout())``
    """

    def __init__(self, width_bytes: int = 8, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 rx_store_beats: int | None = None, tx_store_beats: int | None = None,
                 ifg_bytes: int = MIN_IFG_BYTES):
        check_width(width_bytes)
        self._width, self._max, self._ifg = width_bytes, max_frame_bytes, ifg_bytes
        self._max_beats = -(-max_frame_bytes // width_bytes)
        self._rx_beats = rx_store_beats or _store_beats(self._max_beats)
        self._tx_beats = tx_store_beats or _store_beats(self._max_beats)
        super().__init__({
            "gmii_rx": In(gmii_layout()),
            "gmii_tx": Out(gmii_layout()),
            "m_axis": Out(AxiStreamSignature(width_bytes)),
            "s_axis": In(AxiStreamSignature(width_bytes)),
            "counters": Out(mac_counters_layout()),
        })

    def elaborate(self, platform):
        m = Module()
        width = self._width
        events = {**{name: "gmii_rx" for name in RX_EVENTS}, **{name: "gmii_tx" for name in TX_EVENTS}}
        counters = m.submodules.counters = EventCounters(events)
        m.d.comb += self.counters.eq(counters.counts)

        # Receive.
        rx = m.submodules.rx = DomainRenamer("gmii_rx")(GmiiReceiver(self._max))
        packer = m.submodules.rx_packer = DomainRenamer("gmii_rx")(BytePacker(width))
        rx_store = m.submodules.rx_store = DomainRenamer("gmii_rx")(
            FrameStore(width, self._rx_beats, self._max, lossy=True))
        m.d.comb += rx.gmii.eq(self.gmii_rx)
        wiring.connect(m, rx.source, packer.sink)
        wiring.connect(m, packer.source, rx_store.sink)
        m.d.comb += [
            counters.rx_frames.eq(rx_store.stored),
            counters.rx_overflows.eq(rx_store.dropped),
            counters.rx_symbol_errors.eq(rx.symbol_error),
            counters.rx_oversize.eq(rx.oversize),
            counters.rx_runts.eq(rx.runt),
            counters.rx_fcs_errors.eq(rx.fcs_error),
        ]
        rx_cross = m.submodules.rx_cross = AsyncFIFOBuffered(
            width=packet_layout(width).size, depth=_CROSSING_DEPTH, w_domain="gmii_rx", r_domain="sync")
        rx_out = m.submodules.rx_out = Queue(packet_layout(width), 2)
        to_axis = m.submodules.to_axis = PacketToAxiStream(width)
        m.d.comb += [
            rx_cross.w_data.eq(rx_store.source.payload),
            rx_cross.w_en.eq(rx_store.source.valid),
            rx_store.source.ready.eq(rx_cross.w_rdy),
            rx_out.sink.payload.eq(rx_cross.r_data),
            rx_out.sink.valid.eq(rx_cross.r_rdy),
            rx_cross.r_en.eq(rx_out.sink.ready),
        ]
        wiring.connect(m, rx_out.source, to_axis.packets)
        wiring.connect(m, to_axis.axis, wiring.flipped(self.m_axis))

        # Transmit.
        from_axis = m.submodules.from_axis = AxiStreamToPacket(width)
        tx_in = m.submodules.tx_in = Queue(packet_layout(width), 2)
        wiring.connect(m, wiring.flipped(self.s_axis), from_axis.axis)
        wiring.connect(m, from_axis.packets, tx_in.sink)
        tx_cross = m.submodules.tx_cross = AsyncFIFOBuffered(
            width=packet_layout(width).size, depth=_CROSSING_DEPTH, w_domain="sync", r_domain="gmii_tx")
        tx_store = m.submodules.tx_store = DomainRenamer("gmii_tx")(
            FrameStore(width, self._tx_beats, self._max, lossy=False))
        tx = m.submodules.tx = DomainRenamer("gmii_tx")(GmiiTransmitter(width, self._ifg))
        beat = data.View(packet_layout(width), tx_cross.r_data)
        m.d.comb += [
            tx_cross.w_data.eq(tx_in.source.payload),
            tx_cross.w_en.eq(tx_in.source.valid),
            tx_in.source.ready.eq(tx_cross.w_rdy),
            tx_store.sink.payload.data.eq(beat.data),
            tx_store.sink.payload.keep.eq(beat.keep),
            tx_store.sink.payload.last.eq(beat.last),
            tx_store.sink.valid.eq(tx_cross.r_rdy),
            tx_cross.r_en.eq(tx_store.sink.ready),
            counters.tx_frames.eq(tx.sent),
            counters.tx_oversize.eq(tx_store.dropped),
        ]
        wiring.connect(m, tx_store.source, tx.sink)
        m.d.comb += self.gmii_tx.eq(tx.gmii)
        return m

"""Segment payloads from host memory: an AXI4 read manager and the realignment to lane 0.

Each fetch (address, length >= 1, any byte alignment) reads the beats that
hold its bytes, from the beat-aligned address down from ``address``, as INCR
bursts of at most ``max_burst_beats`` beats inside aligned blocks of
``max_burst_beats * W`` bytes (a power of two dividing 4096): no burst is
longer than 256 beats nor crosses a 4 KiB boundary (AXI4, ARM IHI 0022 A3.4.1).
The read data is in order (one ARID), marked with its ``keep`` and ``last``
from the fetch, and :class:`~hdl.stream.realign.Realign` drops the bytes
before ``address``: each fetch leaves as one packet of ``length`` bytes from
lane 0. The bytes read outside a payload's range lie in its first and last
beats only.

Timing: the burst generator takes a fetch, then sizes a burst and issues it
(through a skid queue onto AR) in alternate cycles, and takes the next fetch in
the cycle it issues the last burst of the previous one: a fetch of one burst
costs two cycles. The beats left in the address's block are a register
loaded with the address, so sizing a burst is one compare of flip-flops.
Read responses (``RRESP``) are not checked in this slice.
"""

from amaranth.hdl import Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.bus.axi import Axi4ReadSignature, Burst
from hdl.stream.bits import check_width, thermometer
from hdl.stream.packet import packet_signature
from hdl.stream.queue import Queue
from hdl.stream.realign import Realign
from hdl.tx.layouts import SEGMENT_PAYLOAD_BITS, fetch_layout

__all__ = ["PayloadFetcher"]


class PayloadFetcher(wiring.Component):
    """Reads each fetch's bytes over ``axi`` and sends them on ``payload``.

    Parameters
    ----------
    width_bytes : int
        ``W``; the AXI data bus is ``8 * W`` bits.
    address_bits, id_bits : int
        ``ARADDR`` and ``ARID`` widths; every burst uses ID 0.
    plan_depth : int
        Fetches whose bursts may be issued ahead of their read data.
    cache, prot : int
        Constant ``ARCACHE`` (normal non-cacheable bufferable) and ``ARPROT``.

    Ports
    -----
    fetches : ``In(stream.Signature(fetch_layout(address_bits)))``
    axi : ``Out(Axi4ReadSignature(addr_width=address_bits, data_width=8 * W, id_width=id_bits))``
        AR (from a queue) and R (``rready`` from a queue).
    payload : ``Out(packet_signature(W))``
        One packet per fetch, in fetch order, registered.
    """

    def __init__(self, width_bytes: int, address_bits: int = 64, id_bits: int = 4, *, plan_depth: int = 16,
                 cache: int = 0b0011, prot: int = 0b000):
        check_width(width_bytes)
        self._width, self._address_bits, self._id_bits = width_bytes, address_bits, id_bits
        self._plan_depth, self._cache, self._prot = plan_depth, cache, prot
        self.max_burst_beats = min(256, 4096 // width_bytes)
        super().__init__({
            "fetches": In(stream.Signature(fetch_layout(address_bits))),
            "axi": Out(Axi4ReadSignature(addr_width=address_bits, data_width=8 * width_bytes, id_width=id_bits)),
            "payload": Out(packet_signature(width_bytes)),
        })

    def elaborate(self, platform):
        m = Module()
        width = self._width
        lane_bits = (width - 1).bit_length()
        block = self.max_burst_beats
        block_bits = (block - 1).bit_length()
        max_beats = ((1 << SEGMENT_PAYLOAD_BITS) + 2 * width) // width
        plan_layout = data.StructLayout({
            "beats": range(max_beats + 1),
            "single": unsigned(1),       # one beat
            "double": unsigned(1),       # two beats
            "last_keep": unsigned(width),
            "drop": range(width),
        })
        ar_layout = data.StructLayout({"address": unsigned(self._address_bits), "length": unsigned(8)})
        plans = m.submodules.plans = Queue(plan_layout, self._plan_depth)
        requests = m.submodules.requests = Queue(ar_layout, 2)
        responses = m.submodules.responses = Queue(unsigned(8 * width), 2)
        realign = m.submodules.realign = Realign(width, max_drop=width - 1)

        # AR: the burst generator.
        taking, sizing, issuing = Signal(init=1), Signal(), Signal()
        address = Signal(self._address_bits)          # beat-aligned
        beats_left = Signal(range(max_beats + 1))
        burst = Signal(range(block + 1))
        final = Signal()                              # this burst ends the fetch
        first = Signal()                              # the fetch's plan is not queued yet
        plan = Signal(plan_layout)

        fetch = self.fetches.payload
        lane = fetch.address[:lane_bits] if lane_bits else Const(0, 1)
        end = Signal(SEGMENT_PAYLOAD_BITS + 1)
        m.d.comb += end.eq(lane + fetch.length)
        # ceil(end / W), with the lane's few bits added to W - 1 first: one carry chain after the fetch.
        beats = (fetch.length + (lane + (width - 1))) >> lane_bits
        end_lanes = end[:lane_bits] if lane_bits else Const(0, 1)
        issued = requests.sink.valid & requests.sink.ready
        m.d.comb += self.fetches.ready.eq(taking | (issued & final))
        # Beats from `address` to the end of its block, kept beside it so sizing compares flip-flops:
        # the fetch's, and `block` after a burst that was not the last (it ended at a block's end).
        block_room = Signal(range(block + 1))
        with m.If(self.fetches.valid & self.fetches.ready):
            m.d.sync += [
                taking.eq(0), sizing.eq(1), issuing.eq(0), first.eq(1),
                address.eq(fetch.address >> lane_bits << lane_bits),
                block_room.eq(block - (fetch.address[lane_bits:lane_bits + block_bits] if block_bits else 0)),
                beats_left.eq(beats),
                plan.beats.eq(beats), plan.single.eq(end <= width), plan.double.eq((end > width) & (end <= 2 * width)),
                plan.last_keep.eq(Mux(end_lanes == 0, (1 << width) - 1, thermometer(end_lanes, width))),
                plan.drop.eq(lane),
            ]
        with m.Elif(issued & final):
            m.d.sync += [taking.eq(1), issuing.eq(0)]

        m.d.comb += [plans.sink.payload.eq(plan), plans.sink.valid.eq(sizing & first)]
        with m.If(sizing & (~first | plans.sink.ready)):
            m.d.sync += [
                sizing.eq(0), issuing.eq(1), first.eq(0),
                burst.eq(Mux(beats_left <= block_room, beats_left, block_room)),
                final.eq(beats_left <= block_room),
            ]
        m.d.comb += [
            requests.sink.valid.eq(issuing),
            requests.sink.payload.address.eq(address),
            requests.sink.payload.length.eq(burst - 1),
        ]
        with m.If(issued & ~final):
            m.d.sync += [
                address.eq(address + (burst << lane_bits)),
                block_room.eq(block),
                beats_left.eq(beats_left - burst),
                issuing.eq(0), sizing.eq(1),
            ]

        axi = self.axi
        m.d.comb += [
            axi.arid.eq(0), axi.araddr.eq(requests.source.payload.address),
            axi.arlen.eq(requests.source.payload.length), axi.arsize.eq(lane_bits), axi.arburst.eq(Burst.INCR),
            axi.arlock.eq(0), axi.arcache.eq(self._cache), axi.arprot.eq(self._prot),
            axi.arvalid.eq(requests.source.valid), requests.source.ready.eq(axi.arready),
            responses.sink.payload.eq(axi.rdata), responses.sink.valid.eq(axi.rvalid),
            axi.rready.eq(responses.sink.ready),
        ]

        # R: each beat marked from the plan at the head, then realigned.
        started, at_last = Signal(), Signal()
        left = Signal(range(max_beats + 1))
        head = plans.source.payload
        is_last = Mux(started, at_last, head.single)
        sink = realign.sink
        m.d.comb += [
            sink.payload.data.eq(responses.source.payload),
            sink.payload.keep.eq(Mux(is_last, head.last_keep, (1 << width) - 1)),
            sink.payload.last.eq(is_last),
            sink.valid.eq(responses.source.valid & plans.source.valid),
            responses.source.ready.eq(sink.ready & plans.source.valid),
            realign.drop.payload.eq(head.drop),
            realign.drop.valid.eq(plans.source.valid),
            plans.source.ready.eq(realign.drop.ready),
        ]
        with m.If(sink.valid & sink.ready):
            with m.If(is_last):
                m.d.sync += started.eq(0)
            with m.Elif(started):
                m.d.sync += [left.eq(left - 1), at_last.eq(left == 2)]
            with m.Else():
                m.d.sync += [started.eq(1), left.eq(head.beats - 1), at_last.eq(head.double)]
        wiring.connect(m, realign.source, wiring.flipped(self.payload))
        return m

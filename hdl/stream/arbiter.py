"""Merge several packet streams, each with a per-packet metadata stream, into one.

Every input is a packet stream plus a metadata stream carrying one transfer
per packet (as the receive path's blocks produce them). The arbiter picks
an input whose metadata is waiting, round robin, forwards that packet whole
(from its first beat to the one with ``last``) with the metadata held on
``meta`` for every beat, and pops the metadata with the last beat. Packets
are never interleaved.

Latency: one cycle to choose an input after the previous packet ended
(the choice is registered). Throughput: one beat per cycle within a packet;
one idle cycle between packets.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.packet import packet_signature

__all__ = ["PacketArbiter"]


class PacketArbiter(wiring.Component):
    """``inputs`` packet streams ``packets[i]`` + ``metas[i]`` onto ``packets_out`` + ``meta_out``.

    Every metadata layout is ``meta_layout``; ``meta_out`` carries the
    current packet's metadata and is valid with its beats.
    """

    def __init__(self, width_bytes: int, meta_layout: data.Layout, inputs: int = 2):
        self._inputs = inputs
        self._meta_layout = data.Layout.cast(meta_layout)
        members = {}
        for i in range(inputs):
            members[f"packets_{i}"] = In(packet_signature(width_bytes))
            members[f"meta_{i}"] = In(stream.Signature(meta_layout))
        members["packets_out"] = Out(packet_signature(width_bytes))
        members["meta_out"] = Out(meta_layout)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        count = self._inputs
        busy = Signal()
        current = Signal(range(count))
        last_granted = Signal(range(count))
        packets = [getattr(self, f"packets_{i}") for i in range(count)]
        metas = [getattr(self, f"meta_{i}") for i in range(count)]

        with m.If(~busy):
            # Round robin: the first waiting input after the one granted last.
            for previous in range(count):
                with m.If(last_granted == previous):
                    order = [(previous + k) % count for k in range(1, count + 1)]
                    for position, i in enumerate(order):
                        with (m.If if position == 0 else m.Elif)(metas[i].valid):
                            m.d.sync += [current.eq(i), last_granted.eq(i), busy.eq(1)]

        for i in range(count):
            with m.If(busy & (current == i)):
                m.d.comb += [
                    self.packets_out.payload.eq(packets[i].payload),
                    self.packets_out.valid.eq(packets[i].valid),
                    packets[i].ready.eq(self.packets_out.ready),
                    self.meta_out.eq(metas[i].payload),
                ]
                with m.If(packets[i].valid & packets[i].ready & packets[i].payload.last):
                    m.d.comb += metas[i].ready.eq(1)
                    m.d.sync += busy.eq(0)
        return m


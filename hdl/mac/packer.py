"""Bytes of a received frame packed into beats of ``W`` bytes, lane 0 first (:mod:`hdl.stream.packet`)."""

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.mac.gmii import frame_byte_layout
from hdl.stream.bits import check_width, thermometer
from hdl.stream.packet import packet_layout

__all__ = ["BytePacker", "verdict_beat_layout"]


def verdict_beat_layout(width_bytes: int) -> data.StructLayout:
    """A packet beat (:func:`hdl.stream.packet.packet_layout`) with ``drop``: on the last beat, the frame is bad."""
    return data.StructLayout({**packet_layout(width_bytes).members, "drop": unsigned(1)})


class BytePacker(wiring.Component):
    """One byte per clock in, one beat out when ``W`` bytes or the frame's last byte have arrived.

    Ports
    -----
    sink : ``In(stream.Signature(frame_byte_layout(), always_ready=True))``
    source : ``Out(stream.Signature(verdict_beat_layout(W), always_ready=True))``
        From flip-flops; ``drop`` copied from the last byte.
    """

    def __init__(self, width_bytes: int):
        check_width(width_bytes)
        self._width = width_bytes
        super().__init__({
            "sink": In(stream.Signature(frame_byte_layout(), always_ready=True)),
            "source": Out(stream.Signature(verdict_beat_layout(width_bytes), always_ready=True)),
        })

    def elaborate(self, platform):
        m = Module()
        width = self._width
        byte = self.sink.payload
        lane = Signal(range(width))
        gathered = Signal(8 * width)    # lanes below `lane` of the beat being packed
        complete = (lane == width - 1) | byte.last
        lanes = [Mux(lane == i, byte.data, gathered[8 * i:8 * i + 8]) for i in range(width)]

        m.d.sync += self.source.valid.eq(0)
        with m.If(self.sink.valid):
            m.d.sync += gathered.eq(Cat(*lanes))
            with m.If(complete):
                m.d.sync += [
                    lane.eq(0),
                    self.source.valid.eq(1),
                    self.source.payload.data.eq(Cat(*lanes)),
                    self.source.payload.keep.eq(thermometer(lane, width, inclusive=True)),
                    self.source.payload.last.eq(byte.last),
                    self.source.payload.drop.eq(byte.last & byte.drop),
                ]
            with m.Else():
                m.d.sync += lane.eq(lane + 1)
        return m

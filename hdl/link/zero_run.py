"""The control link's zero-run coding (:func:`abi.link.zero_run_encode`) of a response's body, a byte at a time.

A zero byte of the coded part is counted, not sent; the run goes out as
0x00 and its length when a nonzero byte or the frame's end follows, or when
it reaches :data:`~abi.link.ZERO_RUN_MAX` (a longer run takes several
pairs, the full ones first). Bytes outside the coded part pass unchanged.
"""

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from abi.link import ZERO_RUN_MAX
from hdl.link.slip import frame_byte_layout

__all__ = ["ZeroRunEncoder", "coded_byte_layout"]


def coded_byte_layout() -> data.StructLayout:
    """A response's byte before the coding: ``last`` on the frame's final byte, ``coded`` on the body's bytes
    that go zero-run coded."""
    return data.StructLayout({"data": unsigned(8), "last": unsigned(1), "coded": unsigned(1)})


class ZeroRunEncoder(wiring.Component):
    """Frame bytes in, the same frames with their ``coded`` bytes zero-run coded out.

    Holds a zero counter and the byte that ends a run (sent after the run's two bytes). Takes a byte a clock
    while no run ends; a run's end takes two more clocks.

    Ports
    -----
    sink : ``In(stream.Signature(coded_byte_layout()))``
    source : ``Out(stream.Signature(frame_byte_layout()))``
        ``valid`` and ``payload`` from flip-flops.
    """

    def __init__(self):
        super().__init__({"sink": In(stream.Signature(coded_byte_layout())),
                          "source": Out(stream.Signature(frame_byte_layout()))})

    def elaborate(self, platform):
        m = Module()
        zeros = Signal(range(ZERO_RUN_MAX + 1))     # zeros counted and not yet sent
        held = Signal(frame_byte_layout())          # the byte after the run, sent after its count
        held_pending = Signal()
        count_last = Signal()                       # the run's count ends the frame
        free = ~self.source.valid | self.source.ready
        byte = self.sink.payload
        with m.If(self.source.valid & self.source.ready):
            m.d.sync += self.source.valid.eq(0)

        def send(value, last):
            m.d.sync += [self.source.payload.data.eq(value), self.source.payload.last.eq(last),
                         self.source.valid.eq(1)]

        with m.FSM():
            with m.State("TAKE"):
                m.d.comb += self.sink.ready.eq(free)
                with m.If(self.sink.valid & free):
                    with m.If(byte.coded & (byte.data == 0)):
                        m.d.sync += zeros.eq(zeros + 1)
                        # A full run, or the frame's end: 0x00 now, the count next.
                        with m.If((zeros == ZERO_RUN_MAX - 1) | byte.last):
                            send(0, 0)
                            m.d.sync += [held_pending.eq(0), count_last.eq(byte.last)]
                            m.next = "COUNT"
                    with m.Elif(zeros != 0):
                        send(0, 0)
                        m.d.sync += [held.data.eq(byte.data), held.last.eq(byte.last), held_pending.eq(1),
                                     count_last.eq(0)]
                        m.next = "COUNT"
                    with m.Else():
                        send(byte.data, byte.last)
            with m.State("COUNT"):
                with m.If(free):
                    send(zeros, count_last)
                    m.d.sync += zeros.eq(0)
                    with m.If(held_pending):
                        m.next = "HELD"
                    with m.Else():
                        m.next = "TAKE"
            with m.State("HELD"):
                with m.If(free):
                    send(held.data, held.last)
                    m.next = "TAKE"
        return m

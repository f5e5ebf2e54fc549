"""SLIP framing (RFC 1055): frames of bytes on a byte stream, ``END`` between them, ``END`` and ``ESC`` escaped.

The encoder sends ``END`` before each frame as well as after it (RFC 1055:
the leading ``END`` ends whatever line noise came before). The decoder marks
a frame in which ``ESC`` is followed by anything but ``ESC_END`` or
``ESC_ESC`` as bad; empty frames (``END END``) are passed on as an ``end``
with no bytes, for the consumer to ignore.
"""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from abi.link import END, ESC, ESC_END, ESC_ESC

__all__ = ["SlipDecoder", "SlipEncoder", "decoded_layout", "frame_byte_layout"]


def decoded_layout() -> data.StructLayout:
    """A decoder output: a frame's byte (``end`` = 0), or its end (``end`` = 1, ``error`` if it was bad)."""
    return data.StructLayout({"data": unsigned(8), "end": unsigned(1), "error": unsigned(1)})


def frame_byte_layout() -> data.StructLayout:
    """An encoder input: a frame's byte, ``last`` on its final one."""
    return data.StructLayout({"data": unsigned(8), "last": unsigned(1)})


class SlipDecoder(wiring.Component):
    """Wire bytes in, frame bytes and frame ends out; one byte a clock, never waits (``sink.ready`` is 1).

    Ports
    -----
    sink : ``In(stream.Signature(8))``
    source : ``Out(stream.Signature(decoded_layout()))``
        ``valid`` for one clock per output; the consumer must take it.
    """

    def __init__(self):
        super().__init__({"sink": In(stream.Signature(8)), "source": Out(stream.Signature(decoded_layout()))})

    def elaborate(self, platform):
        m = Module()
        escaped = Signal()
        bad = Signal()
        byte = self.sink.payload
        m.d.comb += self.sink.ready.eq(1)
        m.d.sync += self.source.valid.eq(0)
        with m.If(self.sink.valid):
            with m.If(byte == END):
                m.d.sync += [self.source.payload.end.eq(1), self.source.payload.error.eq(bad | escaped),
                             self.source.valid.eq(1), escaped.eq(0), bad.eq(0)]
            with m.Elif(escaped):
                m.d.sync += escaped.eq(0)
                with m.If((byte == ESC_END) | (byte == ESC_ESC)):
                    m.d.sync += [self.source.payload.data.eq(Mux(byte == ESC_END, END, ESC)),
                                 self.source.payload.end.eq(0), self.source.valid.eq(1)]
                with m.Else():
                    m.d.sync += bad.eq(1)
            with m.Elif(byte == ESC):
                m.d.sync += escaped.eq(1)
            with m.Else():
                m.d.sync += [self.source.payload.data.eq(byte), self.source.payload.end.eq(0),
                             self.source.valid.eq(1)]
        return m


class SlipEncoder(wiring.Component):
    """Frames of bytes in (``last`` on each frame's final byte), SLIP wire bytes out.

    Ports
    -----
    sink : ``In(stream.Signature(frame_byte_layout()))``
    source : ``Out(stream.Signature(8))``
        ``valid`` and ``payload`` from flip-flops.
    """

    def __init__(self):
        super().__init__({"sink": In(stream.Signature(frame_byte_layout())), "source": Out(stream.Signature(8))})

    def elaborate(self, platform):
        m = Module()
        in_frame = Signal()        # the leading END was sent
        second = Signal(8)         # the byte after an ESC still to send
        second_pending = Signal()
        end_pending = Signal()     # the trailing END still to send
        free = ~self.source.valid | self.source.ready
        byte = self.sink.payload.data
        with m.If(self.source.valid & self.source.ready):
            m.d.sync += self.source.valid.eq(0)
        busy = second_pending | end_pending
        m.d.comb += self.sink.ready.eq(free & ~busy & in_frame)
        with m.If(free):
            with m.If(second_pending):
                m.d.sync += [self.source.payload.eq(second), self.source.valid.eq(1), second_pending.eq(0)]
            with m.Elif(end_pending):
                m.d.sync += [self.source.payload.eq(END), self.source.valid.eq(1), end_pending.eq(0),
                             in_frame.eq(0)]
            with m.Elif(self.sink.valid & ~in_frame):
                m.d.sync += [self.source.payload.eq(END), self.source.valid.eq(1), in_frame.eq(1)]
            with m.Elif(self.sink.valid):
                special = (byte == END) | (byte == ESC)
                m.d.sync += [self.source.payload.eq(Mux(special, ESC, byte)), self.source.valid.eq(1),
                             second.eq(Mux(byte == END, ESC_END, ESC_ESC)), second_pending.eq(special),
                             end_pending.eq(self.sink.payload.last)]
        return m

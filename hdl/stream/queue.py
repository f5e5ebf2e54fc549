"""The one stream queue of the gateware: registered ``valid``, registered ``ready``, a ``level``.

Every block boundary of the receive path goes through a :class:`Queue`, and
so does every FIFO inside a block that holds a payload layout: the payload
is a :mod:`amaranth.lib.data` layout (or any shape) carried whole, on
:mod:`amaranth.lib.stream` interfaces, never packed into a raw ``w_data``.

Timing contract (what makes it a boundary):

* ``source.valid`` and ``source.payload`` come straight from flip-flops;
* ``sink.ready`` is a function of the queue's own flip-flops only: no
  combinational path from ``source.ready`` (the consumer) to ``sink.ready``
  (the producer), nor from ``sink.valid`` to ``source.valid``.

So a chain of blocks joined by queues has no ready/valid path longer than
one block. One transfer per cycle is sustained at every depth.

Structure: at ``depth = 2`` a skid buffer (an output register plus one skid
register that catches the beat in flight when the consumer stalls: the
register slice of AXI interconnects); from ``depth = 3`` an
``amaranth.lib.fifo.SyncFIFOBuffered`` (whose ``w_rdy`` is a compare of its
level register, and whose output is registered), for queues sized to a
pipeline's depth.

Latency: a transfer on ``sink`` at edge ``t`` is valid on ``source`` from
edge ``t`` + 1 (``depth = 2``) or ``t`` + 2 (deeper, the memory read).
"""

from amaranth.hdl import Module, Shape, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Queue"]


class Queue(wiring.Component):
    """``depth`` payloads of ``shape`` between ``sink`` and ``source``; see the module docs.

    Parameters
    ----------
    shape : shape-castable
        Payload of both streams (usually a ``data.StructLayout``).
    depth : int
        Payloads held, at least 2.

    Ports
    -----
    sink : ``In(stream.Signature(shape))``
    source : ``Out(stream.Signature(shape))``
    level : ``Out(range(depth + 1))``
        Payloads held (in the skid and output registers, or the FIFO).
    """

    def __init__(self, shape, depth: int = 2):
        if not isinstance(depth, int) or depth < 2:
            raise ValueError(f"Queue depth must be an integer of at least 2, not {depth!r}")
        self._shape = shape
        self._depth = depth
        super().__init__({
            "sink": In(stream.Signature(shape)),
            "source": Out(stream.Signature(shape)),
            "level": Out(range(depth + 1)),
        })

    @property
    def depth(self) -> int:
        return self._depth

    def elaborate(self, platform):
        m = Module()
        sink, source = self.sink, self.source
        if self._depth == 2:
            skid = Signal(self._shape, name="skid")
            skid_valid = Signal()
            m.d.comb += [
                sink.ready.eq(~skid_valid),
                self.level.eq(source.valid + skid_valid),
            ]
            with m.If(~source.valid | source.ready):
                # The output register is free: the skid's beat first, else the sink's.
                with m.If(skid_valid):
                    m.d.sync += [source.valid.eq(1), source.payload.eq(skid), skid_valid.eq(0)]
                with m.Else():
                    m.d.sync += [source.valid.eq(sink.valid), source.payload.eq(sink.payload)]
            with m.Elif(sink.valid & sink.ready):
                m.d.sync += [skid.eq(sink.payload), skid_valid.eq(1)]
        else:
            storage = m.submodules.storage = fifo.SyncFIFOBuffered(
                width=Shape.cast(self._shape).width, depth=self._depth)
            m.d.comb += [
                storage.w_data.eq(sink.payload),
                storage.w_en.eq(sink.valid),
                sink.ready.eq(storage.w_rdy),
                source.payload.eq(storage.r_data),
                source.valid.eq(storage.r_rdy),
                storage.r_en.eq(source.ready),
                self.level.eq(storage.level),
            ]
        return m

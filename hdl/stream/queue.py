"""A stream register slice: a small FIFO whose output and ``ready`` come from flip-flops.

Placed between two blocks it cuts every combinational path between them
(``valid``/``payload`` forward, ``ready`` backward) at the cost of two cycles
of latency, keeping one transfer per cycle at the default depth:
``amaranth.lib.fifo.SyncFIFOBuffered`` behind a stream interface.
"""

from amaranth.hdl import Module, Value
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["StreamBuffer"]


class StreamBuffer(wiring.Component):
    """``depth`` payloads of ``layout`` between ``sink`` and ``source``.

    At depth 2 a ``SyncFIFOBuffered`` alternates between full and empty and
    passes one transfer every other cycle; from depth 3 it keeps one per cycle.
    """

    DEFAULT_DEPTH = 3

    def __init__(self, layout: data.Layout, depth: int = DEFAULT_DEPTH):
        self._depth = depth
        super().__init__({
            "sink": In(stream.Signature(layout)),
            "source": Out(stream.Signature(layout)),
        })

    def elaborate(self, platform):
        m = Module()
        width = len(Value.cast(self.sink.payload))
        m.submodules.storage = storage = fifo.SyncFIFOBuffered(width=width, depth=self._depth)
        m.d.comb += [
            storage.w_data.eq(self.sink.payload),
            storage.w_en.eq(self.sink.valid),
            self.sink.ready.eq(storage.w_rdy),
            self.source.payload.eq(storage.r_data),
            self.source.valid.eq(storage.r_rdy),
            storage.r_en.eq(self.source.ready),
        ]
        return m

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
one block. One transfer per cycle is sustained at every depth while the
consumer keeps up. After a stall, payloads behind others pass the FIFO (three
cycles each), so a queue of depth 3 then takes two payloads in three cycles
until it has drained; from depth 4 it keeps one per cycle.

Structure: at ``depth = 2`` a skid buffer (an output register plus one skid
register that catches the beat in flight when the consumer stalls: the
register slice of AXI interconnects); from ``depth = 3`` an
``amaranth.lib.fifo.SyncFIFOBuffered`` followed by that skid buffer, with
one count register for ``level`` and ``sink.ready`` (a compare of it), for
queues sized to a pipeline's depth; ``sink.ready`` and the FIFO-empty flag are
registers loaded with their next value. The skid buffer keeps memory outputs (a block
RAM's slow clock-to-output) away from the consumer's logic.

Lookahead (``lookahead=True``): ``following`` is the payload that the output
register loads on this edge if it is free (``source.valid`` low or
``source.ready`` high), with ``following_valid``: the skid's beat, else the
sink's. A consumer whose acceptance depends on what it holds (a hazard
against its own pipeline) can compute that condition for the next head one
cycle early and keep it in a flip-flop, so its ``ready`` (the output
register's enable, a wide fan-out) is a short function of flip-flops.

Latency: a transfer on ``sink`` at edge ``t`` is valid on ``source`` from
edge ``t`` + 1 (``depth = 2``, or a deeper queue whose FIFO is empty: the
payload bypasses it) or ``t`` + 3 (deeper, behind payloads in the FIFO: the
memory read, then the output register).
"""

from amaranth.hdl import Module, Mux, Shape, Signal
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
        Payloads held, at least 2 (3 does not sustain one transfer per cycle).
    lookahead : bool
        Add the ``following`` and ``following_valid`` outputs (see the module docs).

    Ports
    -----
    sink : ``In(stream.Signature(shape))``
    source : ``Out(stream.Signature(shape))``
    level : ``Out(range(depth + 1))``
        Payloads held (in the FIFO, the output and the skid registers).
    following : ``Out(shape)``, following_valid : ``Out(1)``
        With ``lookahead``: what the output register takes when it is free.
    """

    def __init__(self, shape, depth: int = 2, *, lookahead: bool = False):
        if not isinstance(depth, int) or depth < 2:
            raise ValueError(f"Queue depth must be an integer of at least 2, not {depth!r}")
        self._shape = shape
        self._depth = depth
        members = {
            "sink": In(stream.Signature(shape)),
            "source": Out(stream.Signature(shape)),
            "level": Out(range(depth + 1)),
        }
        if lookahead:
            members.update(following=Out(shape), following_valid=Out(1))
        self._lookahead = lookahead
        super().__init__(members)

    @property
    def depth(self) -> int:
        return self._depth

    def elaborate(self, platform):
        m = Module()
        if self._depth == 2:
            self._elaborate_skid(m, self.sink, self.source, self.level)
            return m
        # A FIFO, then a skid stage: the consumer sees flip-flops, not the FIFO's
        # memory output (a block RAM's clock-to-output and routing ate most of a cycle
        # in front of decision logic), and the FIFO's read enable is a flip-flop. One
        # count of every payload held gives ``level`` and ``sink.ready``; the FIFO is
        # as deep as the queue, so it has room whenever the count allows a write.
        storage = m.submodules.storage = fifo.SyncFIFOBuffered(
            width=Shape.cast(self._shape).width, depth=self._depth)
        # While the FIFO is empty, payloads go straight to the skid stage (its latency, one
        # edge), so a drained queue adds no more latency than a skid buffer.
        # `sink.ready` and `bypass` (the FIFO is empty) are flip-flops, loaded with the next
        # cycle's value: the payload muxes and the producer's enables read no counter logic.
        outlet = stream.Signature(self._shape).create()
        count = Signal(range(self._depth + 1))
        stored = Signal(range(self._depth + 1))   # payloads in the FIFO (storage.level)
        ready = Signal(init=1)
        bypass = Signal(init=1)
        entering = self.sink.valid & self.sink.ready
        leaving = self.source.valid & self.source.ready
        count_next = Signal.like(count)
        m.d.comb += count_next.eq(count + entering - leaving)
        stored_next = Signal.like(stored)
        m.d.comb += stored_next.eq(stored + storage.w_en - (storage.r_en & storage.r_rdy))
        m.d.sync += [
            count.eq(count_next), ready.eq(count_next != self._depth),
            stored.eq(stored_next), bypass.eq(stored_next == 0),
        ]
        m.d.comb += [
            storage.w_data.eq(self.sink.payload),
            storage.w_en.eq(entering & ~(bypass & outlet.ready)),
            self.sink.ready.eq(ready),
            outlet.payload.eq(Mux(bypass, self.sink.payload, storage.r_data)),
            outlet.valid.eq(Mux(bypass, entering, storage.r_rdy)),
            storage.r_en.eq(outlet.ready & ~bypass),
            self.level.eq(count),
        ]
        self._elaborate_skid(m, outlet, self.source, Signal(range(3)))
        return m

    def _elaborate_skid(self, m, sink, source, level):
        skid = Signal(self._shape, name="skid")
        skid_valid = Signal()
        m.d.comb += [
            sink.ready.eq(~skid_valid),
            level.eq(source.valid + skid_valid),
        ]
        # The skid register follows the sink while it is empty, so its enable is a flip-flop
        # and the consumer's ready reaches only the output register.
        with m.If(~skid_valid):
            m.d.sync += skid.eq(sink.payload)
        if self._lookahead:
            m.d.comb += [
                self.following.eq(Mux(skid_valid, skid, sink.payload)),
                self.following_valid.eq(skid_valid | sink.valid),
            ]
        with m.If(~source.valid | source.ready):
            # The output register is free: the skid's beat first, else the sink's.
            with m.If(skid_valid):
                m.d.sync += [source.valid.eq(1), source.payload.eq(skid), skid_valid.eq(0)]
            with m.Else():
                m.d.sync += [source.valid.eq(sink.valid), source.payload.eq(sink.payload)]
        with m.Elif(sink.valid & sink.ready):
            m.d.sync += skid_valid.eq(1)

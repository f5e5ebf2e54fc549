"""Drop the first N bytes of each packet and re-pack the rest to lane 0.

The chunk parser and the DDP header validator both need this: a chunk starts
at any 4-byte offset of an SCTP packet (RFC 4960 3.2), and the DDP payload
starts 14 or 18 bytes into a segment (RFC 5041 4.2, 4.3).

Output beat ``k`` of a packet holds input bytes ``N + kW .. N + kW + W - 1``.
With ``N = sW + a`` (``1 <= a <= W``, ``s`` whole beats skipped) it is lanes
``a .. W-1`` of input beat ``k + s - 1`` followed by lanes ``0 .. a-1`` of
input beat ``k + s``: a byte shifter over the concatenation of the previous
and the current beat, one beat of history and no buffering beyond it.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.bits import check_width
from hdl.stream.packet import packet_layout, packet_signature
from hdl.stream.queue import Queue

__all__ = ["Realign"]


class Realign(wiring.Component):
    """Drop the first ``drop`` bytes of every packet on ``sink``; lane 0 of ``source`` is the next byte.

    Parameters
    ----------
    width_bytes : int
        Datapath width ``W`` in bytes, a power of two.
    max_drop : int
        Largest ``drop`` value used (sets the counter widths).

    Ports
    -----
    sink : ``In(packet_signature(W))``
        Packets; ``keep`` may be partial on the last beat only.
    drop : ``In(stream.Signature(unsigned(bits(max_drop))))``
        One transfer per packet: the bytes to drop. It must be valid whenever
        one of the packet's beats is (``sink.valid`` implies ``drop.valid``);
        it is taken (``ready``) with the last beat.
    source : ``Out(packet_signature(W))``
        The packet without its first ``drop`` bytes. A packet of at most
        ``drop`` bytes produces no beat at all.

    Latency: four cycles from an input beat to the output beat it completes
    (the input queue, the byte selection, the shift, the output queue).
    Throughput: one beat per cycle. A packet of two or more kept beats whose
    last beat holds more than ``drop mod W`` bytes (``drop mod W != 0``) needs
    one more output beat than it has kept input beats and takes one extra
    cycle (the input waits); a packet whose kept bytes sit in one beat never
    does. ``sink`` goes through a :class:`~hdl.stream.queue.Queue`, so
    ``sink.ready`` is its flip-flop, not gated by ``drop.valid``: it is the
    producer's wide enable. The two stages advance together, on a flip-flop that says the
    output queue has room for every beat in flight: ``source.ready`` reaches
    no stage enable.
    """

    def __init__(self, width_bytes: int, max_drop: int):
        check_width(width_bytes)
        self._width = width_bytes
        self._max_drop = max_drop
        super().__init__({
            "sink": In(packet_signature(width_bytes)),
            "drop": In(stream.Signature(range(max_drop + 1))),
            "source": Out(packet_signature(width_bytes)),
        })

    def elaborate(self, platform):
        m = Module()
        width = self._width
        lane_bits = (width - 1).bit_length()

        # Input: each beat through a queue, with its packet's `drop` (valid with every beat), so
        # `sink.ready` is a flip-flop and `drop` is taken with the last beat.
        # The drop is decoded on its way in: skip count, shift a (1..W), and whether a = W.
        inbox = m.submodules.inbox = Queue(data.StructLayout({
            "beat": packet_layout(width), "first_skip": range(self._max_drop // width + 1),
            "first_amount": range(width + 1), "first_full": 1, "last_direct": 1, "first_kept": 1,
            "last_tail": 1}))
        drop_lanes = self.drop.payload[:lane_bits] if lane_bits else Const(0, 1)
        m.d.comb += [
            inbox.sink.payload.beat.eq(self.sink.payload),
            inbox.sink.payload.first_skip.eq(self.drop.payload >> lane_bits),
            inbox.sink.payload.first_amount.eq(Mux(drop_lanes == 0, width, drop_lanes)),
            inbox.sink.payload.first_full.eq(drop_lanes == 0),
            inbox.sink.payload.first_kept.eq((self.drop.payload >> lane_bits) == 0),  # no whole beat skipped
            # a packet's first beat that is also its last and is shifted on its own (below)
            inbox.sink.payload.last_direct.eq(self.sink.payload.last & (drop_lanes != 0)),
            # a last beat with bytes at or beyond lane a (a < W): its packet's `drop` is valid
            # from the first beat to the last, so a is known for every beat
            inbox.sink.payload.last_tail.eq(self.sink.payload.last & (drop_lanes != 0)
                                            & self.sink.payload.keep.bit_select(drop_lanes, 1)),
            inbox.sink.valid.eq(self.sink.valid),
            self.sink.ready.eq(inbox.sink.ready),
            self.drop.ready.eq(self.sink.valid & self.sink.ready & self.sink.payload.last),
        ]
        inner = inbox.source
        sink = inner.payload.beat

        started = Signal()          # a beat of the current packet was taken
        flush = Signal()            # the tail of the last beat is still to go out
        skip = Signal(range(self._max_drop // width + 1))
        skip_done = Signal(init=1)          # skip = 0, kept beside it
        amount = Signal(range(width + 1))   # a, 1..W
        amount_full = Signal()              # a = W, kept beside it
        prev_data = Signal(8 * width)
        prev_keep = Signal(width)
        # ~flush & ~prev_keep[0] & ~amount_full, kept as a flip-flop beside them: a held packet's
        # last beat is shifted on its own.
        held_direct = Signal(init=1)
        # started | flush, kept as a flip-flop beside them: it selects `direct`, whose fanout is the
        # whole byte selection.
        held = Signal()

        # The packet's first beat takes its skip count and shift from its drop, decoded.
        cur_amount = Mux(held, amount, inner.payload.first_amount)
        cur_full = Mux(held, amount_full, inner.payload.first_full)
        cur_skip = Mux(started, skip, inner.payload.first_skip)
        cur_kept = Mux(started, skip_done, inner.payload.first_kept)   # cur_skip == 0

        # A last beat with nothing held before it (a < W) is shifted on its own: no tail cycle.
        # (~flush & ~(held & prev_keep[0]) & sink.last & ~cur_full, from flags.)
        direct = Mux(held, held_direct & sink.last, inner.payload.last_direct)
        low_data = Mux(direct, sink.data, prev_data)
        low_keep = Mux(direct, sink.keep, Mux(held, prev_keep, 0))
        high_data = Mux(flush | direct, 0, sink.data)
        high_keep = Mux(flush | direct, 0, sink.keep)
        # A last beat with bytes beyond lane a-1 needs one more output beat (decoded on the way in).
        # A packet's first beat never does when it is also its last (its `last_tail` implies its
        # `last_direct`), so with no tail flushing it is a later beat's `last_tail` unless that beat is
        # shifted on its own: written so, the `flush` register's input does not go through `direct`.
        last_tail = started & ~held_direct & inner.payload.last_tail

        # Two registered stages: the selection (stage 1: which bytes, the shift), then the
        # byte shifter (stage 2), so the shifter's select comes from flip-flops.
        stage = Signal(data.StructLayout({
            "low_data": 8 * width, "high_data": 8 * width, "low_keep": width, "high_keep": width,
            "amount": range(width + 1), "last": 1,
        }))
        stage_valid = Signal()
        # Both stages advance while the output queue has room for them and one more (a
        # flip-flop, from its level a cycle ago: at most one beat entered since).
        outbox = m.submodules.outbox = Queue(packet_layout(width), depth=4)
        wiring.connect(m, outbox.source, wiring.flipped(self.source))
        advance = Signal()
        m.d.sync += advance.eq(outbox.level < outbox.depth - 1)
        m.d.comb += inner.ready.eq(advance & ~flush)
        accept = inner.valid & inner.ready

        # Stage 2: the shift; a beat with nothing in lane 0 (the first kept beat, only held) is not sent.
        shifted_keep = Cat(stage.low_keep, stage.high_keep).bit_select(stage.amount, width)
        shifted_valid, shifted = Signal(), Signal(packet_layout(width))
        m.d.comb += [outbox.sink.valid.eq(shifted_valid & advance), outbox.sink.payload.eq(shifted)]
        with m.If(advance):
            m.d.sync += [
                shifted_valid.eq(stage_valid & shifted_keep[0]),
                shifted.data.eq(Cat(stage.low_data, stage.high_data).bit_select(stage.amount * 8, 8 * width)),
                shifted.keep.eq(shifted_keep),
                shifted.last.eq(stage.last),
            ]

        # Stage 1: the bytes below and above the shift and the decisions on the packet's state;
        # `stage_valid` says whether a beat was loaded.
        with m.If(advance):
            m.d.sync += [
                stage_valid.eq(flush | (accept & cur_kept)),
                stage.low_data.eq(low_data), stage.high_data.eq(high_data),
                stage.low_keep.eq(low_keep), stage.high_keep.eq(high_keep),
                stage.amount.eq(cur_amount), stage.last.eq(flush | (sink.last & ~last_tail)),
            ]
        with m.If(flush):
            with m.If(advance):
                m.d.sync += [flush.eq(0), held.eq(started), held_direct.eq(~prev_keep[0] & ~amount_full)]
        with m.Elif(accept):
            # A tail follows only a kept later beat (`last_tail` has `started`, and a later beat is kept
            # once `skip_done`): so `flush` does not wait on `cur_kept`, a wide enable placed by its loads.
            m.d.sync += [amount.eq(cur_amount), amount_full.eq(cur_full), started.eq(~sink.last),
                         flush.eq(skip_done & last_tail), held.eq(~sink.last | (skip_done & last_tail))]
            with m.If(~cur_kept):
                m.d.sync += [skip.eq(cur_skip - 1), skip_done.eq(cur_skip == 1), prev_keep.eq(0),
                             held_direct.eq(~cur_full)]
            with m.Else():
                m.d.sync += [
                    skip.eq(0),
                    skip_done.eq(1),
                    prev_data.eq(sink.data),
                    prev_keep.eq(sink.keep),
                    held_direct.eq(~last_tail & ~sink.keep[0] & ~cur_full),
                ]
        return m

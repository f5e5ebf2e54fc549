"""Per-message reports: the records of accepted middle segments left out of the report stream.

The records arrive here after the delivery order, so an accepted record at
DDP-SSN n of a stream follows every earlier DDP-SSN of that stream (RFC 5041
5.3, RFC 5043 6.1): the host learns from it that those were accepted and
placed. With ``segment_reports`` at 0 (the configuration bit's reset value)
a record leaves only when :func:`abi.rx.report_withheld` does not withhold it
(a message's last segment, every untagged QN 1 and QN 2 segment, every status
but ACCEPTED, every CHUNK_ERROR); ``withheld`` counts the others. At 1 every
record leaves, as before the filter.

Timing: the decision is a few LUTs from ``records_in``'s payload, which
comes straight from the delivery order's output queue (flip-flops), and it
is registered beside the record (``staged``, ``staged_withheld``): it
reaches a flip-flop's data input, never an enable. The staged record is
dropped or enters a skid buffer (:class:`hdl.stream.queue.Queue`, depth 2)
whose output drives ``records_out``, so that port's ``ready`` reaches no
decision; the stage loads when it is empty, withheld or taken, a function
of three flip-flops kept in a flip-flop of its own (``free``, loaded with
that function's next value), which is ``records_in.ready``: the delivery
order's output queue, its loads, meets no logic here (seed 2 of the top
had it 0.49 ns late through the three-flip-flop LUT). (The top builds with the decision in the input's
``ready`` missed the bar at the delivery order's 436 outbound enables,
-1.67 ns; with it in the skid buffer's valid and the counter's enable,
there, -0.37 and -0.28 ns.) One record per cycle, kept or withheld, while
the consumer keeps up; two cycles of latency.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect

from abi.rx import ReportKind, SegmentStatus, report_layout
from hdl.layout import struct_layout
from hdl.stream.queue import Queue

__all__ = ["ReportFilter"]


class ReportFilter(wiring.Component):
    """Report records in, the ones the host needs out (see the module docstring)."""

    def __init__(self, address_bits: int = 64):
        self._layout = struct_layout(report_layout(address_bits))
        super().__init__({
            "records_in": In(stream.Signature(self._layout)),
            "records_out": Out(stream.Signature(self._layout)),
            "segment_reports": In(1),
            "withheld": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.kept = kept = Queue(self._layout)
        connect(m, kept.source, wiring.flipped(self.records_out))

        record = self.records_in.payload
        # abi.rx.report_withheld: an accepted middle segment that is not untagged QN 1 / QN 2 (RFC 5040 4.2).
        control_queue = ~record.tagged & (record.qn[2:] == 0) & (record.qn[0] ^ record.qn[1])
        withheld = Signal()
        m.d.comb += withheld.eq(~self.segment_reports & (record.kind == ReportKind.SEGMENT)
                                & (record.status == SegmentStatus.ACCEPTED) & ~record.last & ~control_queue)

        staged = Signal(self._layout)
        staged_valid, staged_withheld = Signal(), Signal()
        # The stage frees this cycle when it is empty, its record withheld (dropped now) or taken by the buffer:
        # ~staged_valid | staged_withheld | kept.sink.ready, kept in a flip-flop loaded with that OR's next
        # value, so the delivery order's output queue (its ready's loads) meets no logic of this block.
        free = Signal(init=1)
        next_valid = Mux(free, self.records_in.valid, staged_valid)
        next_withheld = Mux(free, withheld, staged_withheld)
        # The skid buffer's ready next (hdl/stream/queue.py): free when its output register frees, else
        # it holds unless it catches a beat now.
        next_skid_free = ((~kept.source.valid | kept.source.ready)
                          | (kept.sink.ready & ~(staged_valid & ~staged_withheld)))
        m.d.sync += free.eq(~next_valid | next_withheld | next_skid_free)
        m.d.comb += self.records_in.ready.eq(free)
        with m.If(free):
            m.d.sync += [staged.eq(record), staged_valid.eq(self.records_in.valid), staged_withheld.eq(withheld)]
        m.d.comb += [kept.sink.payload.eq(staged), kept.sink.valid.eq(staged_valid & ~staged_withheld)]
        with m.If(staged_valid & staged_withheld):   # a withheld record stays in the stage one cycle
            m.d.sync += self.withheld.eq(self.withheld + 1)
        return m

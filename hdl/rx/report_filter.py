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
reaches only the valid of a skid buffer (:class:`hdl.stream.queue.Queue`,
depth 2) that the records kept enter. ``records_in.ready`` is that buffer's
ready, a flip-flop, for kept and withheld records alike: a withheld record
waiting on a full buffer costs a cycle, but the decision never reaches the
delivery order's outbound register enables (436 of them: the first build
with the decision in ``ready`` missed the bar by 1.67 ns there). So
``records_out`` is driven by flip-flops and its ``ready`` reaches no
decision. One record per cycle, kept or withheld, while the consumer keeps
up; one cycle of latency.
"""

from amaranth.hdl import Module, Signal
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
        m.d.comb += [
            kept.sink.payload.eq(record),
            kept.sink.valid.eq(self.records_in.valid & ~withheld),
            self.records_in.ready.eq(kept.sink.ready),
        ]
        with m.If(self.records_in.valid & kept.sink.ready & withheld):
            m.d.sync += self.withheld.eq(self.withheld + 1)
        return m

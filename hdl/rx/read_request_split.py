"""The read responder's exit: accepted RDMA Read Requests leave the report stream for the transmit engine.

:class:`ReadRequestSplit` sits after the delivery order (:mod:`hdl.rx.delivery_order`)
when the receive engine is built with its read responder. Its input is the
report records in DDP-SSN order per stream; the record of an accepted RDMA
Read Request (SEGMENT, ACCEPTED, untagged, QN 1, opcode 1: the placement check
has checked its Data Source, RFC 5040 4.4, 5.2) becomes one
:func:`abi.tx.read_response_layout` record on ``requests``, every other record
leaves unchanged on ``records_out``. So the requests of a stream leave in the
order the stream's DDP-SSNs give (RFC 5040 5.5: responses in request order).

The record carries what the response needs (the placement check put it
there): ``stag`` and ``to`` are the request's SinkSTag and SinkTO,
``message_length`` its RDMA Read Message Size, ``host_address`` the translated
Data Source, ``msn`` its QN 1 MSN.

Timing: the input and both outputs pass :class:`hdl.stream.queue.Queue`; whether
a record is a request is decided as it enters the input queue and held there
beside it, so the choice at the queue's head is one flip-flop (decided there, it
drove the enables of the output queue's 400-odd payload flip-flops: the top's
worst paths at seed 1). One record per cycle.
"""

from amaranth.hdl import Module, Mux
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out, connect

from abi.rx import ReportKind, SegmentStatus, report_layout
from abi.tx import read_response_layout
from hdl.layout import struct_layout
from hdl.stream.queue import Queue

__all__ = ["ReadRequestSplit"]

_QN_READ_REQUEST, _OPCODE_READ_REQUEST = 1, 1   # RFC 5040 4.2


class ReadRequestSplit(wiring.Component):
    """Records in; accepted Read Requests out on ``requests``, the rest on ``records_out``.

    Ports
    -----
    records_in : ``In(stream.Signature(report_layout(address_bits)))``
    records_out : ``Out(stream.Signature(report_layout(address_bits)))``
    requests : ``Out(stream.Signature(read_response_layout(address_bits)))``
    """

    def __init__(self, address_bits: int = 64):
        self._records = struct_layout(report_layout(address_bits))
        self._requests = struct_layout(read_response_layout(address_bits))
        super().__init__({
            "records_in": In(stream.Signature(self._records)),
            "records_out": Out(stream.Signature(self._records)),
            "requests": Out(stream.Signature(self._requests)),
        })

    def elaborate(self, platform):
        m = Module()
        inbound = m.submodules.inbound = Queue(data.StructLayout({"record": self._records, "is_request": 1}))
        kept = m.submodules.kept = Queue(self._records)
        requests = m.submodules.requests = Queue(self._requests)
        connect(m, kept.source, wiring.flipped(self.records_out))
        connect(m, requests.source, wiring.flipped(self.requests))

        arriving = self.records_in.payload
        m.d.comb += [
            inbound.sink.payload.record.eq(arriving),
            inbound.sink.payload.is_request.eq(
                (arriving.kind == ReportKind.SEGMENT) & (arriving.status == SegmentStatus.ACCEPTED)
                & ~arriving.tagged & (arriving.qn == _QN_READ_REQUEST) & (arriving.opcode == _OPCODE_READ_REQUEST)),
            inbound.sink.valid.eq(self.records_in.valid),
            self.records_in.ready.eq(inbound.sink.ready),
        ]

        record, is_request = inbound.source.payload.record, inbound.source.payload.is_request
        request = requests.sink.payload
        m.d.comb += [
            kept.sink.payload.eq(record),
            kept.sink.valid.eq(inbound.source.valid & ~is_request),
            request.association.eq(record.association),
            request.stream_id.eq(record.stream_id),
            request.host_address.eq(record.host_address),
            request.length.eq(record.message_length),
            request.sink_stag.eq(record.stag),
            request.sink_to.eq(record.to),
            request.msn.eq(record.msn),
            requests.sink.valid.eq(inbound.source.valid & is_request),
            inbound.source.ready.eq(Mux(is_request, requests.sink.ready, kept.sink.ready)),
        ]
        return m

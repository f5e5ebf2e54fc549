"""The control plane's requests, then Read Responses, then local work requests, one message at a time, into
the segmenter.

Local and control requests come from :class:`~hdl.stream.queue.Queue` LUT RAMs
(their opcode and association from flip-flops), the Read Responses from the
IRD queue's head register, and the choice is made by the ``valid`` of the
control and responses queues: flip-flops, so the segmenter sees a 3:1 choice. Whenever the
segmenter takes its next message, a waiting control request goes first (the
control plane's packets, a SACK or a HEARTBEAT ACK, are small and their
timing is SCTP's, RFC 4960 6.2, 8.3), then a waiting Read Response, in the
order the requests were accepted (RFC 5040 5.5 orders Read Responses by their
requests and leaves their place among the responder's own messages to it),
and a local request only when neither waits. The choice is made between
messages: a message the segmenter has started is finished first (a long local
Write delays a response by its own length). A peer that keeps the IRD queue
from emptying holds back local requests: it is bounded by IRD and by its own
round trips (its ORD, RFC 6581 9).

A Read Response becomes the message the segmenter knows: tagged, RDMAP
opcode :data:`~abi.tx.READ_RESPONSE_OPCODE`, to the Data Sink STag and TO
(RFC 5040 4.4, 4.5), ``length`` bytes read from ``host_address``; a control
request keeps its :class:`~abi.tx.ControlOpcode`.
"""

from amaranth.hdl import Module, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from abi.rx import ADDRESS_BITS
from abi.tx import READ_RESPONSE_OPCODE, control_request_layout, read_response_layout, work_request_layout
from hdl.layout import struct_layout
from hdl.tx.layouts import message_layout

__all__ = ["WorkArbiter"]


class WorkArbiter(wiring.Component):
    """``control`` first, then ``responses``, else ``local``, onto ``work``.

    Ports
    -----
    control : ``In(stream.Signature(control_request_layout()))``
    responses : ``In(stream.Signature(read_response_layout()))``
    local : ``In(stream.Signature(work_request_layout()))``
        Each from a queue: ``control.valid`` and ``responses.valid`` are the choice.
    work : ``Out(stream.Signature(message_layout()))``
        ``ready`` reaches the inputs' ``ready`` through one gate.
    """

    def __init__(self, address_bits: int = ADDRESS_BITS):
        super().__init__({
            "control": In(stream.Signature(struct_layout(control_request_layout(address_bits)))),
            "responses": In(stream.Signature(struct_layout(read_response_layout(address_bits)))),
            "local": In(stream.Signature(struct_layout(work_request_layout(address_bits)))),
            "work": Out(stream.Signature(message_layout(address_bits))),
        })

    def elaborate(self, platform):
        m = Module()
        control, response, local, work = self.control.payload, self.responses.payload, self.local.payload, \
            self.work.payload
        choose_control, choose_response = self.control.valid, self.responses.valid
        as_work = {
            "opcode": READ_RESPONSE_OPCODE, "association": response.association, "stream_id": response.stream_id,
            "host_address": response.host_address, "length": response.length,
            "stag": response.sink_stag, "to": response.sink_to, "sink_stag": 0, "sink_to": 0, "invalidate_stag": 0,
            "tag": 0, "wr_id": 0,
        }
        control_as_work = {
            "opcode": control.opcode, "association": control.association, "stream_id": control.stream_id,
            "host_address": control.host_address, "length": control.length, "tag": control.tag,
            "wr_id": control.wr_id,
        }
        for name in work.shape().members:
            local_value = getattr(local, name) if name in local.shape().members else 0
            m.d.comb += getattr(work, name).eq(Mux(choose_control, control_as_work.get(name, 0),
                                                   Mux(choose_response, as_work[name], local_value)))
        m.d.comb += [
            self.work.valid.eq(choose_control | choose_response | self.local.valid),
            self.control.ready.eq(self.work.ready),
            self.responses.ready.eq(self.work.ready & ~choose_control),
            self.local.ready.eq(self.work.ready & ~choose_control & ~choose_response),
        ]
        return m

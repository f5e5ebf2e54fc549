"""Read Responses ahead of local work requests, one message at a time, into the segmenter.

Both inputs come from :class:`~hdl.stream.queue.Queue` outputs (flip-flops),
and the choice is the responses queue's ``valid``: a flip-flop, so the
segmenter sees a 2:1 choice of registers. Whenever the segmenter takes its
next message, a waiting Read Response goes first, in the order the requests
were accepted (RFC 5040 5.5 orders Read Responses by their requests and leaves
their place among the responder's own messages to it); a local request goes
only when no response waits. The choice is made between messages: a message
the segmenter has started is finished first (a long local Write delays a
response by its own length). A peer that keeps the IRD queue from emptying
holds back local requests: it is bounded by IRD and by its own round trips
(its ORD, RFC 6581 9).

A Read Response becomes the work request the segmenter knows: tagged, RDMAP
opcode :data:`~hdl.abi.READ_RESPONSE_OPCODE`, to the Data Sink STag and TO
(RFC 5040 4.4, 4.5), ``length`` bytes read from ``host_address``.
"""

from amaranth.hdl import Module, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.abi import ADDRESS_BITS, READ_RESPONSE_OPCODE, read_response_layout, work_request_layout

__all__ = ["WorkArbiter"]


class WorkArbiter(wiring.Component):
    """``responses`` first, else ``local``, onto ``work``.

    Ports
    -----
    local : ``In(stream.Signature(work_request_layout()))``
    responses : ``In(stream.Signature(read_response_layout()))``
        Both from queues: ``responses.valid`` is the choice.
    work : ``Out(stream.Signature(work_request_layout()))``
        ``ready`` reaches both inputs' ``ready`` through one gate.
    """

    def __init__(self, address_bits: int = ADDRESS_BITS):
        super().__init__({
            "local": In(stream.Signature(work_request_layout(address_bits))),
            "responses": In(stream.Signature(read_response_layout(address_bits))),
            "work": Out(stream.Signature(work_request_layout(address_bits))),
        })

    def elaborate(self, platform):
        m = Module()
        response, local, work = self.responses.payload, self.local.payload, self.work.payload
        choose_response = self.responses.valid
        as_work = {
            "opcode": READ_RESPONSE_OPCODE, "association": response.association, "stream_id": response.stream_id,
            "host_address": response.host_address, "length": response.length,
            "stag": response.sink_stag, "to": response.sink_to, "sink_stag": 0, "sink_to": 0, "invalidate_stag": 0,
        }
        m.d.comb += [getattr(work, name).eq(Mux(choose_response, value, getattr(local, name)))
                     for name, value in as_work.items()]
        m.d.comb += [
            self.work.valid.eq(choose_response | self.local.valid),
            self.responses.ready.eq(self.work.ready),
            self.local.ready.eq(self.work.ready & ~choose_response),
        ]
        return m

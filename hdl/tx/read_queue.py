"""The inbound RDMA Read Request queue (IRRQ, RFC 6581 3, 4.1): IRD requests per stream row, the rest refused.

Each record (:func:`abi.tx.read_response_layout`) is decided on in one
registered stage: if its stream row already holds ``ird`` requests it is
refused and leaves on ``refused``, otherwise it is counted and joins the one
queue of accepted requests, ``responses``, in arrival order (RFC 5040 5.5:
Read Responses in the order of their requests). A request stops counting when
the segmenter has handed its response's last segment on (``sent``), as the
model's responder counts an inbound read until its response is handed to the
LLP (``model.rdmap.endpoint``).

The queue is per stream row because IRD is negotiated per DDP Stream Session
(RFC 6581 7, 9), one stream row each; it is one FIFO of ``ird`` entries for
every row, so every row can hold its ``ird`` at once and rows never wait on
each other's refusals.

Timing: ``requests.ready`` is a flip-flop (the stage is empty), so a record
is taken every other cycle at most: as often as the segmenter can start a
message (two cycles for the shortest). The decision reads one flag per row
(the row is decoded when the record enters the stage) and the two output
queues' registered readies; each row's count and flag are loaded from
compares of their present values chosen by that row's increment and
decrement, and the next record is decided a cycle after they are.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from abi.rx import ADDRESS_BITS
from abi.tx import read_response_layout
from hdl.layout import struct_layout
from hdl.stream.bits import index_bits
from hdl.stream.queue import Queue
from hdl.tx.layouts import stream_row

__all__ = ["ReadRequestQueue"]


class ReadRequestQueue(wiring.Component):
    """At most ``ird`` Read Requests per stream row of ``associations`` x ``stream_ids``, in order.

    Ports
    -----
    requests : ``In(stream.Signature(read_response_layout()))``
        ``ready`` is a flip-flop; a record is taken every other cycle at most.
    responses : ``Out(stream.Signature(read_response_layout()))``
        Accepted requests in arrival order, from a queue of ``ird`` entries per stream row, through
        a head register (``valid`` and ``payload`` are flip-flops; one every other cycle at most).
    refused : ``Out(stream.Signature(read_response_layout()))``
        Requests beyond their row's IRD, from a queue; while it is full, ``requests`` waits.
    sent, sent_row : ``In(1)``, ``In(index_bits(streams))``
        A pulse per response whose last segment was handed on, with its stream row.
    """

    def __init__(self, *, associations: int = 2, stream_ids: int = 4, ird: int = 4,
                 address_bits: int = ADDRESS_BITS):
        if not isinstance(ird, int) or ird < 1:
            raise ValueError(f"IRD must be a positive integer, not {ird!r}")
        self.associations, self.stream_ids, self.ird = associations, stream_ids, ird
        self._layout = struct_layout(read_response_layout(address_bits))
        streams = associations * stream_ids
        super().__init__({
            "requests": In(stream.Signature(self._layout)),
            "responses": Out(stream.Signature(self._layout)),
            "refused": Out(stream.Signature(self._layout)),
            "sent": In(1),
            "sent_row": In(index_bits(streams)),
        })

    def elaborate(self, platform):
        m = Module()
        ird, streams = self.ird, self.associations * self.stream_ids
        # The accepted requests, in LUT RAM, reach ``responses`` through one head register that
        # loads while it is empty: its enable is a flip-flop, and the segmenter's late `ready`
        # clears only `head_valid`. A request is offered every other cycle at most, as often as
        # the segmenter can start a message.
        accepted = m.submodules.accepted = Queue(self._layout, max(4, ird * streams), memory_output=True)
        refused = m.submodules.refused = Queue(self._layout, 4, memory_output=True)   # its reader's ready: a counter
        wiring.connect(m, refused.source, wiring.flipped(self.refused))
        head, head_valid = Signal(self._layout), Signal()
        m.d.comb += [self.responses.payload.eq(head), self.responses.valid.eq(head_valid),
                     accepted.source.ready.eq(~head_valid)]
        with m.If(~head_valid):
            m.d.sync += [head.eq(accepted.source.payload), head_valid.eq(accepted.source.valid)]
        with m.Elif(self.responses.ready):
            m.d.sync += head_valid.eq(0)

        # Per stream row: requests counted, and whether that is IRD (loaded with the count).
        counts = [Signal(range(ird + 1), name=f"outstanding_{row}") for row in range(streams)]
        full = [Signal(name=f"full_{row}") for row in range(streams)]

        # The decision stage: the record with its row decoded.
        held, held_valid, held_rows = Signal(self._layout), Signal(), Signal(streams)
        incoming = self.requests.payload
        incoming_row = stream_row(incoming.association, incoming.stream_id, self.associations, self.stream_ids)
        # (held_rows & full).any(), kept as a flip-flop: loaded with the incoming row's `full` as it
        # will be, and cleared when a response of the held row is sent (only the held record, as it
        # leaves, can fill a row). The queues' counters then start from it, not from an OR of the rows.
        refuse = Signal()
        done_rows = Cat(self.sent & (self.sent_row == row) for row in range(streams))
        leaving = held_valid & Mux(refuse, refused.sink.ready, accepted.sink.ready)
        m.d.comb += [
            self.requests.ready.eq(~held_valid),
            accepted.sink.payload.eq(held), accepted.sink.valid.eq(held_valid & ~refuse),
            refused.sink.payload.eq(held), refused.sink.valid.eq(held_valid & refuse),
        ]
        incoming_rows = Cat(incoming_row == row for row in range(streams))
        with m.If(~held_valid):
            m.d.sync += [
                held.eq(incoming), held_valid.eq(self.requests.valid), held_rows.eq(incoming_rows),
                refuse.eq((incoming_rows & Cat(*full) & ~done_rows).any()),
            ]
        with m.Else():
            m.d.sync += refuse.eq(refuse & ~(held_rows & done_rows).any())
            with m.If(leaving):
                m.d.sync += held_valid.eq(0)

        for row in range(streams):
            # The held record is this row's and the row is not full: it is counted as it leaves.
            counted = held_valid & held_rows[row] & ~full[row] & accepted.sink.ready
            done = done_rows[row]
            with m.If(counted & ~done):
                m.d.sync += [counts[row].eq(counts[row] + 1), full[row].eq(counts[row] == ird - 1)]
            with m.Elif(done & ~counted):
                m.d.sync += [counts[row].eq(counts[row] - 1), full[row].eq(0)]
        return m

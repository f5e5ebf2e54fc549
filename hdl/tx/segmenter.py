"""Messages to numbered DDP segments: RFC 5041 5.2 segmentation, RFC 5043 5.2.1 DDP-SSN, RFC 4960 TSN.

For each message (a work request, a Read Response or a control request) the segmenter emits one
:func:`~hdl.tx.layouts.segment_layout` record per DDP segment, with its payload's host address:

* payload per segment: MULPDU - 14 tagged (RDMA Write, Read Response), MULPDU
  - 18 untagged (the RFC 5041 5.2 worked examples); a zero-length message is
  one segment (5.2); L on the
  last segment only (4.1); a Read Request is one segment whose payload is its
  28-byte header (RFC 5040 4.4), nothing read from memory;
* a tagged segment's TO is the message's TO plus its offset, an untagged
  segment's MO its offset, and the host address advances with them (5.2);
* the MSN of the queue (QN 0 Sends, QN 1 Read Requests, QN 2 Terminate) is the stream's next,
  from 1, mod 2**32 (4.3), and advances once per message;
* every segment takes the stream's next DDP-SSN (RFC 5043 5.2.1) and the
  association's next TSN (RFC 4960 6.1), both mod their width;
* a control request (:class:`~abi.tx.ControlOpcode`) is one segment, its
  bytes read from memory whole, no DDP-SSN or MSN: a session-control message
  takes the association's next TSN like a DDP segment (RFC 4960 6.1: one TSN
  space), a control packet none;
* when a Read Response's last segment leaves, ``response_sent`` pulses with its
  stream row (the IRD count, :class:`~hdl.tx.read_queue.ReadRequestQueue`).

Timing: one segment per cycle. A request is staged first (its kind decoded,
its association's two segment rooms, into registers) once the one before
it is at its last segment; its counters are read in the cycle it is taken
from the stage, so a request costs one cycle more than its segments. Counters are
written back with every segment and read by the next request a cycle after
its predecessor's last segment, so no forwarding is needed.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from abi.rx import ADDRESS_BITS
from abi.tx import READ_RESPONSE_OPCODE, ControlOpcode, WorkOpcode, tx_association_write_layout, tx_stream_write_layout
from hdl.layout import struct_layout
from hdl.stream.bits import index_bits
from hdl.tx import layouts
from hdl.tx.layouts import SEGMENT_PAYLOAD_BITS, message_layout, segment_layout

__all__ = ["Segmenter", "TAGGED_HEADER", "UNTAGGED_HEADER"]

#: DDP header bytes with the RDMAP fields they carry (RFC 5041 4.2, 4.3).
TAGGED_HEADER = 14
UNTAGGED_HEADER = 18
QUEUES = 3   # the untagged queues of RFC 5040 4.2 with MSNs: 0 Send, 1 Read Request, 2 Terminate


class Segmenter(wiring.Component):
    """Segments work requests for ``associations`` associations of ``stream_ids`` streams each.

    Ports
    -----
    work : ``In(stream.Signature(message_layout()))``
        Messages (:func:`hdl.tx.layouts.message_layout`); ``ready`` is a function of flip-flops.
    association_write : ``In(stream.Signature(tx_association_write_layout()))``
        Always ready: loads the row's MULPDU and its TSN counter.
    stream_write : ``In(stream.Signature(tx_stream_write_layout(streams)))``
        Always ready: starts the stream's DDP-SSN at ``first_ssn`` and both MSNs at 1.
    segments : ``Out(stream.Signature(segment_layout()))``
        ``valid`` is a flip-flop; put a :class:`~hdl.stream.queue.Queue` behind it.
    response_sent, response_sent_row : ``Out(1)``, ``Out(index_bits(streams))``
        Registered: a pulse the cycle after a Read Response's last segment left, with its stream row.
    """

    def __init__(self, *, associations: int = 2, stream_ids: int = 4, address_bits: int = ADDRESS_BITS):
        self.associations, self.stream_ids = associations, stream_ids
        self._address_bits = address_bits
        streams = associations * stream_ids
        super().__init__({
            "work": In(stream.Signature(message_layout(address_bits))),
            "association_write": In(stream.Signature(struct_layout(tx_association_write_layout()))),
            "stream_write": In(stream.Signature(struct_layout(tx_stream_write_layout(streams)))),
            "segments": Out(stream.Signature(segment_layout(address_bits))),
            "response_sent": Out(1),
            "response_sent_row": Out(index_bits(streams)),
        })

    def elaborate(self, platform):
        m = Module()
        associations, streams = self.associations, self.associations * self.stream_ids
        association_bits = index_bits(associations)

        # Tables: per association the payload room of a tagged and an untagged segment and the
        # TSN counter; per stream the DDP-SSN counter and the MSNs of queues 0 and 1.
        tagged_room = Array(Signal(SEGMENT_PAYLOAD_BITS, name=f"tagged_room_{i}") for i in range(associations))
        untagged_room = Array(Signal(SEGMENT_PAYLOAD_BITS, name=f"untagged_room_{i}") for i in range(associations))
        next_tsn = Array(Signal(32, name=f"next_tsn_{i}") for i in range(associations))
        next_ssn = Array(Signal(16, name=f"next_ssn_{i}") for i in range(streams))
        next_msn = Array(Array(Signal(32, init=1, name=f"next_msn_{i}_{qn}") for qn in range(QUEUES))
                         for i in range(streams))

        work = self.work.payload
        request = Signal(message_layout(self._address_bits))
        busy = Signal()
        ddp, numbered = Signal(), Signal()   # takes DDP-SSN and MSN; takes a TSN
        responding, has_payload, last = Signal(), Signal(), Signal()
        per_segment = Signal(SEGMENT_PAYLOAD_BITS)
        remaining = Signal(32)
        rest = Signal(signed(34))   # remaining - per_segment: the next segment's remaining bytes
        tsn, ssn, msn, mo = Signal(32), Signal(16), Signal(32), Signal(32)
        offset_to, address = Signal(64), Signal(self._address_bits)
        row = Signal(association_bits)
        stream_row = Signal(index_bits(streams))
        # The MSN this message advances, one flag per (stream row, queue), decoded when it is taken:
        # the last segment's write enable of each 32-bit counter is then one gate.
        advances_msn = Signal(4 * streams)

        # Stage a request: its kind decoded and its association's rooms, into registers.
        staged, staged_valid = Signal(message_layout(self._address_bits)), Signal()
        staged_row, staged_stream_row = Signal(association_bits), Signal(index_bits(streams))
        staged_responding, staged_tagged, staged_read_request, staged_ddp = Signal(), Signal(), Signal(), Signal()
        staged_queue = Signal(2)   # the untagged queue (RFC 5040 4.2): 0 Send, 1 Read Request, 2 Terminate
        work_row = work.association[:association_bits]
        work_responding = work.opcode == READ_RESPONSE_OPCODE
        work_tagged = (work.opcode == WorkOpcode.RDMA_WRITE) | work_responding
        work_ddp = work.opcode < ControlOpcode.SESSION_CONTROL
        # A request is staged once the one before it is at its last segment, not earlier, so the
        # arbiter still chooses between messages at that boundary; `ready` is made of flip-flops.
        # While the stage is empty its registers follow the arbiter's output, so their enable is
        # the flip-flop `staged_valid`, not the handshake; the handshake sets only `staged_valid`.
        take = staged_valid & ~busy
        m.d.comb += self.work.ready.eq(~staged_valid & (~busy | last))
        with m.If(take):
            m.d.sync += staged_valid.eq(0)
        with m.If(self.work.valid & self.work.ready):
            m.d.sync += staged_valid.eq(1)
        with m.If(~staged_valid):
            m.d.sync += [
                staged.eq(work),
                staged_row.eq(work_row),
                staged_stream_row.eq(layouts.stream_row(work.association, work.stream_id, associations,
                                                        self.stream_ids)),
                staged_responding.eq(work_responding), staged_tagged.eq(work_tagged),
                staged_read_request.eq(work.opcode == WorkOpcode.RDMA_READ_REQUEST), staged_ddp.eq(work_ddp),
                staged_queue.eq(Mux(work.opcode == WorkOpcode.RDMA_READ_REQUEST, 1,
                                    Mux(work.opcode == WorkOpcode.TERMINATE, 2, 0))),
            ]
        unlimited = (1 << SEGMENT_PAYLOAD_BITS) - 1   # a control request: one segment
        # `length <= room` as a compare of the room's width and a zero test of the bits above it, in
        # parallel: a 32-bit compare (the room zero-extended) is a carry chain twice as long.
        length_fits_room_width = staged.length[SEGMENT_PAYLOAD_BITS:] == 0

        def by_room(function):
            # `function(room)` for every room of every association, chosen by the staged row and kind
            # after it: the comparisons and subtractions below start from the rooms' flip-flops, and the
            # arbiter's choice reaches only the staged row and kind.
            def of_row(rooms):
                return Array(function(rooms[index]) for index in range(associations))[staged_row]
            return Mux(staged_ddp, Mux(staged_tagged, of_row(tagged_room), of_row(untagged_room)),
                       function(Const(unlimited, SEGMENT_PAYLOAD_BITS)))

        # Take the staged request: its counters are read from the rows it names.
        with m.If(take):
            m.d.sync += [
                busy.eq(1),
                request.eq(staged),
                row.eq(staged_row), stream_row.eq(staged_stream_row),
                responding.eq(staged_responding),
                ddp.eq(staged_ddp), numbered.eq(staged.opcode != ControlOpcode.PACKET),
                per_segment.eq(by_room(lambda room: room)),
                remaining.eq(Mux(staged_read_request, 0, staged.length)),
                rest.eq(by_room(lambda room: Cat(staged.length, Const(0, 1)).as_signed() - room)),
                last.eq(staged_read_request
                        | (length_fits_room_width
                           & by_room(lambda room: staged.length[:SEGMENT_PAYLOAD_BITS] <= room))),
                has_payload.eq(~staged_read_request & (staged.length != 0)),
                tsn.eq(next_tsn[staged_row]),
                ssn.eq(next_ssn[staged_stream_row]),
                msn.eq(next_msn[staged_stream_row][staged_queue]),
                advances_msn.eq(Mux(staged_ddp & ~staged_tagged,
                                    Const(1, 4 * streams) << Cat(staged_queue, staged_stream_row), 0)),
                mo.eq(0),
                offset_to.eq(staged.to),
                address.eq(staged.host_address),
            ]

        # Emit one segment per cycle while both outputs have room.
        payload_length = Mux(last, remaining[:SEGMENT_PAYLOAD_BITS], per_segment)
        segment = self.segments.payload
        carries_invalidate = ((request.opcode == WorkOpcode.SEND_WITH_INVALIDATE)
                              | (request.opcode == WorkOpcode.SEND_WITH_SE_AND_INVALIDATE))
        m.d.comb += [
            segment.association.eq(request.association),
            segment.stream_id.eq(request.stream_id),
            segment.tsn.eq(tsn),
            segment.ddp_ssn.eq(ssn),
            segment.opcode.eq(request.opcode),
            segment.last.eq(last),
            segment.stag.eq(request.stag),
            segment.to.eq(offset_to),
            segment.msn.eq(msn),
            segment.mo.eq(mo),
            segment.invalidate_stag.eq(Mux(carries_invalidate, request.invalidate_stag, 0)),
            segment.sink_stag.eq(request.sink_stag),
            segment.sink_to.eq(request.sink_to),
            segment.size.eq(request.length),
            segment.tag.eq(request.tag),
            segment.wr_id.eq(request.wr_id),
            segment.address.eq(address),
            segment.fetch.eq(has_payload),
            segment.numbered.eq(numbered),
            segment.payload_length.eq(payload_length),
            self.segments.valid.eq(busy),
        ]
        emit = self.segments.valid & self.segments.ready
        m.d.sync += [self.response_sent.eq(emit & last & responding), self.response_sent_row.eq(stream_row)]
        with m.If(emit):
            m.d.sync += [
                remaining.eq(rest),
                rest.eq(rest - per_segment),
                # Before the last segment rest > 0, so its sign bit is among the high bits tested.
                last.eq((rest[SEGMENT_PAYLOAD_BITS:] == 0) & (rest[:SEGMENT_PAYLOAD_BITS] <= per_segment)),
                tsn.eq(tsn + 1),
                ssn.eq(ssn + 1),
                mo.eq(mo + per_segment),
                offset_to.eq(offset_to + per_segment),
                address.eq(address + per_segment),
            ]
            with m.If(numbered):
                m.d.sync += next_tsn[row].eq(tsn + 1)
            with m.If(ddp):
                m.d.sync += next_ssn[stream_row].eq(ssn + 1)
            with m.If(last):
                m.d.sync += busy.eq(0)
                for index in range(streams):
                    for queue in range(QUEUES):
                        with m.If(advances_msn[4 * index + queue]):
                            m.d.sync += next_msn[index][queue].eq(msn + 1)

        # Host writes (only while the association or stream has no work in flight).
        m.d.comb += [self.association_write.ready.eq(1), self.stream_write.ready.eq(1)]
        write = self.association_write.payload
        with m.If(self.association_write.valid & (write.index < associations)):
            index = write.index[:association_bits]
            m.d.sync += [
                tagged_room[index].eq(write.mulpdu - TAGGED_HEADER),
                untagged_room[index].eq(write.mulpdu - UNTAGGED_HEADER),
                next_tsn[index].eq(write.next_tsn),
            ]
        stream_write = self.stream_write.payload
        with m.If(self.stream_write.valid & (stream_write.index < streams)):
            m.d.sync += [
                next_ssn[stream_write.index].eq(stream_write.first_ssn),
                *(next_msn[stream_write.index][queue].eq(1) for queue in range(QUEUES)),
            ]
        return m

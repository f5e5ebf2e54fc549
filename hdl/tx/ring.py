"""The retransmission ring: every DATA chunk sent and not yet acknowledged, by TSN, to send again on request.

Between the segmenter and the header and payload paths. Each segment record
(:func:`~hdl.tx.layouts.segment_layout`: every header field, the payload's
host address and length, the work request's ``wr_id``) that takes a TSN is
written into a block RAM at (association, TSN mod ``ring_tsns``) as it
passes; a control packet (no TSN) passes unrecorded. Per association the ring
keeps the last TSN acknowledged (``retired``) and how many TSNs after it are
recorded (``outstanding``, at most ``ring_tsns``): the TSNs recorded are
exactly ``retired + 1 .. retired + outstanding``. A segment of a full row
waits, as does one beyond the row's sending limit: the host's SCTP computes
the window (RFC 4960 6.1 A, B) and the ring enforces it, counting down the
new TSNs the last LIMIT still allows (``credit``).

``tsn_requests`` (:func:`abi.tx.tsn_request_layout`) are handled one at a
time by one read port:

* RESEND: the record of the TSN is read while the TSN's offset from
  ``retired`` is taken; in the ring if that offset is below ``outstanding``
  (counted from the cycle before the read, so a TSN recorded in that very
  cycle is not yet in it), it leaves again on the outputs ahead of the
  segments waiting (RFC 4960 6.1: retransmissions first), else the request
  leaves on ``refused``;
* ACK: the records from ``retired + 1`` up to the TSN (at most
  ``outstanding`` of them) are read one every two cycles and retired; a
  record that ends an RDMA Write, a Send or a session-control message gives
  one :func:`abi.tx.completion_layout` record (RFC 5041 5.4). A record is
  read only while the completion queue has room, so it is retired the cycle
  after, whatever it holds.
* LIMIT: the row's new segments wait from the cycle after the request is
  taken (so ``outstanding`` holds still), the credit ``tsn - retired -
  outstanding`` is taken over two stages, and the row is released with it
  (0 for a TSN at or below the last one sent).

Timing: the outputs are a 2:1 choice, by a flip-flop, between the replayed
record (the RAM's output) and the input queue's head; ``segments.ready`` is
made of flip-flops and the head's row flag. The valids take the replayed
record's ``fetch`` from a flip-flop loaded beside the RAM's output, so a
block RAM's output reaches only the outputs' data. The TSN arithmetic is one
32-bit subtraction a stage.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import memory, stream, wiring
from amaranth.lib.data import ArrayLayout
from amaranth.lib.wiring import In, Out

from abi.rx import ADDRESS_BITS
from abi.tx import (CompletionStatus, ControlOpcode, TsnOpcode, WorkOpcode, completion_layout, tsn_request_layout,
                    tx_association_write_layout)
from hdl.layout import struct_layout
from hdl.stream.bits import index_bits
from hdl.stream.queue import Queue
from hdl.tx.layouts import fetch_layout, segment_layout

__all__ = ["RetransmitRing"]


class RetransmitRing(wiring.Component):
    """``ring_tsns`` (a power of two) TSNs in flight per association of ``associations``.

    Ports
    -----
    segments : ``In(stream.Signature(segment_layout()))``
        From a queue; ``ready`` is a function of flip-flops and the head's association.
    association_write : ``In(stream.Signature(tx_association_write_layout()))``
        Always ready: empties the row's ring, ``retired`` = ``next_tsn - 1``.
    tsn_requests : ``In(stream.Signature(tsn_request_layout()))``
        ``ready`` is a flip-flop.
    sent, fetches : ``Out(stream.Signature(segment_layout()))``, ``Out(stream.Signature(fetch_layout()))``
        Every segment, new or again; one with payload leaves on both in the same cycle. Put a
        :class:`~hdl.stream.queue.Queue` behind each (their ``ready`` is read as a flip-flop).
    refused : ``Out(stream.Signature(tsn_request_layout()))``
    completions : ``Out(stream.Signature(completion_layout()))``
        Both from queues.
    """

    def __init__(self, *, associations: int = 2, ring_tsns: int = 64, address_bits: int = ADDRESS_BITS):
        if ring_tsns < 2 or ring_tsns & (ring_tsns - 1):
            raise ValueError(f"ring_tsns must be a power of two of at least 2, not {ring_tsns}")
        self.associations, self.ring_tsns = associations, ring_tsns
        self._address_bits = address_bits
        super().__init__({
            "segments": In(stream.Signature(segment_layout(address_bits))),
            "association_write": In(stream.Signature(struct_layout(tx_association_write_layout()))),
            "tsn_requests": In(stream.Signature(struct_layout(tsn_request_layout()))),
            "sent": Out(stream.Signature(segment_layout(address_bits))),
            "fetches": Out(stream.Signature(fetch_layout(address_bits))),
            "refused": Out(stream.Signature(struct_layout(tsn_request_layout()))),
            "completions": Out(stream.Signature(struct_layout(completion_layout()))),
            # For the transport unit: each new numbered segment as it is recorded (a strobe with the
            # segment); a row's new segments held until its next LIMIT; a row's next TSN.
            "recorded": Out(1),
            "recorded_segment": Out(segment_layout(address_bits)),
            "hold": In(1),
            "hold_row": In(range(associations)),
            "peek_row": In(range(associations)),
            "peek_next_tsn": Out(32),
            # Each row's last TSN retired, its Cumulative TSN Ack (a register of an RNIC with the transport).
            "retired": Out(ArrayLayout(32, associations)),
        })

    def elaborate(self, platform):
        m = Module()
        associations, ring_tsns = self.associations, self.ring_tsns
        association_bits, index_width = index_bits(associations), (ring_tsns - 1).bit_length()
        layout = segment_layout(self._address_bits)
        store = m.submodules.store = memory.Memory(shape=layout, depth=associations * ring_tsns, init=[])
        write, read = store.write_port(), store.read_port(transparent_for=())
        # Both read straight from LUT RAM: their readers' ready (a port's) reaches a read counter.
        refused = m.submodules.refused = Queue(struct_layout(tsn_request_layout()), 4, memory_output=True)
        completions = m.submodules.completions = Queue(struct_layout(completion_layout()), 4, memory_output=True)
        wiring.connect(m, refused.source, wiring.flipped(self.refused))
        wiring.connect(m, completions.source, wiring.flipped(self.completions))

        def slot(association, tsn):
            return Cat(tsn[:index_width], association[:association_bits]) if association_bits else tsn[:index_width]

        retired = [Signal(32, name=f"retired_{i}") for i in range(associations)]
        outstanding = [Signal(range(ring_tsns + 1), name=f"outstanding_{i}") for i in range(associations)]
        full = [Signal(name=f"full_{i}") for i in range(associations)]
        # The sending limit (LIMIT): new TSNs still allowed, counted down; `stopped` = limited & credit == 0.
        limited = [Signal(name=f"limited_{i}") for i in range(associations)]
        credit = [Signal(32, name=f"credit_{i}") for i in range(associations)]
        stopped = [Signal(name=f"stopped_{i}") for i in range(associations)]
        # A TSN that takes the last credit sets `exhausted`, which halts the row at once and sets `stopped`
        # on the next edge: the late `adding` then reaches one flip-flop's input, not `stopped`'s enable
        # behind the row write's and the LIMIT's priority.
        exhausted = [Signal(name=f"exhausted_{i}") for i in range(associations)]
        holding = [Signal(name=f"holding_{i}") for i in range(associations)]   # a LIMIT of the row is taken
        # A TSN taken under the limit, counted off `credit` the cycle after: the 32-bit count's enable is
        # then a flip-flop, and `stopped` is decided in the adding cycle from the credit less this one.
        spent = [Signal(name=f"spent_{i}") for i in range(associations)]
        # The four flags' next values (assigned below, later assignments first as for `sync`), and a flip-flop
        # of their OR: a halted row is one flip-flop, so the input queue's ready is a level of logic shorter.
        flags = {"full": full, "stopped": stopped, "exhausted": exhausted, "holding": holding}
        following = {name: [Signal(name=f"{name}_next_{i}") for i in range(associations)] for name in flags}
        for name, values in flags.items():
            m.d.comb += [next_value.eq(value) for next_value, value in zip(following[name], values)]
        halted_rows = [Signal(name=f"halted_{i}") for i in range(associations)]
        halted = Cat(*halted_rows)

        # The outputs: a replayed record (the read port's data, held) ahead of the input queue's head.
        replaying = Signal()
        head = self.segments.payload
        numbered = head.numbered
        head_row = head.association[:association_bits] if association_bits else Const(0, 1)
        blocked = numbered & halted.bit_select(head_row, 1)
        out = Signal(layout)
        m.d.comb += out.eq(Mux(replaying, read.data, head))
        # The replayed record's `fetch` from a flip-flop (loaded while the RAM's output holds it, below),
        # so the block RAM's slow output reaches the output queues' data, not their valid and enables.
        replay_fetch = Signal()
        out_fetch = Mux(replaying, replay_fetch, head.fetch)
        sent, fetches = self.sent, self.fetches
        m.d.comb += [
            sent.payload.eq(out),
            fetches.payload.address.eq(out.address), fetches.payload.length.eq(out.payload_length),
            sent.valid.eq((replaying | (self.segments.valid & ~blocked)) & (fetches.ready | ~out_fetch)),
            fetches.valid.eq((replaying | (self.segments.valid & ~blocked)) & out_fetch & sent.ready),
            self.segments.ready.eq(~replaying & ~blocked & sent.ready & (fetches.ready | ~head.fetch)),
        ]
        taken = self.segments.valid & self.segments.ready
        recording = taken & numbered
        # `recording` less the head row's choice of the halted flags: a row adds the head's record
        # when it is the head's row and not halted itself (one level of logic less before its counters).
        flowing = self.segments.valid & numbered & ~replaying & sent.ready & (fetches.ready | ~head.fetch)
        m.d.comb += [write.addr.eq(slot(head.association, head.tsn)), write.data.eq(head),
                     write.en.eq(recording), self.recorded.eq(recording), self.recorded_segment.eq(head)]
        m.d.comb += [self.retired[row].eq(retired[row]) for row in range(associations)]
        m.d.comb += self.peek_next_tsn.eq(Array(retired)[self.peek_row] + Array(outstanding)[self.peek_row] + 1)

        # TSN requests, one at a time: TAKE -> MEASURE -> COMPARE -> DECIDE -> (REPLAY | WALK_READ <-> WALK_EMIT).
        request = Signal(struct_layout(tsn_request_layout()))
        request_row = request.association[:association_bits] if association_bits else Const(0, 1)
        offset, count = Signal(32), Signal(range(ring_tsns + 1))
        in_ring = Signal()   # offset < count, registered: the 32-bit compare is a stage of its own
        headroom = Signal(signed(34))   # LIMIT: tsn - retired - outstanding, registered beside in_ring
        limit_load = Signal()
        walk_tsn, walk_left = Signal(32), Signal(range(ring_tsns + 1))
        retiring, retire_step = Signal(), Signal()
        row_retired, row_outstanding = Array(retired)[request_row], Array(outstanding)[request_row]
        m.d.comb += [read.addr.eq(slot(request.association, Mux(retiring, walk_tsn, request.tsn))), read.en.eq(0)]
        entry = read.data
        # The completion a walked record gives: RDMA Write, the Sends, Terminate and session control, not Read
        # Requests nor Read Responses. Its fields come from the record whatever the state (only `valid`
        # waits for WALK_EMIT), so the state reaches no wide clear of the completion queue's input register.
        completes = entry.last & ((entry.opcode == WorkOpcode.RDMA_WRITE)
                                  | ((entry.opcode >= WorkOpcode.SEND)
                                     & (entry.opcode <= ControlOpcode.SESSION_CONTROL)))
        completion = completions.sink.payload
        m.d.comb += [
            completion.wr_id.eq(entry.wr_id), completion.opcode.eq(entry.opcode),
            completion.association.eq(request.association), completion.status.eq(CompletionStatus.SUCCESS),
        ]
        with m.FSM() as fsm:
            with m.State("TAKE"):
                m.d.comb += self.tsn_requests.ready.eq(1)
                with m.If(self.tsn_requests.valid):
                    taken_request = self.tsn_requests.payload
                    m.d.sync += request.eq(taken_request)
                    for row in range(associations):
                        with m.If((taken_request.opcode == TsnOpcode.LIMIT) & (taken_request.association == row)):
                            m.d.comb += following["holding"][row].eq(1)
                    m.next = "MEASURE"
            with m.State("MEASURE"):
                m.d.comb += read.en.eq(1)
                # tsn - retired - 1 as one adder: tsn + ~retired (mod 2**32).
                m.d.sync += [offset.eq(request.tsn + ~row_retired), count.eq(row_outstanding),
                             walk_tsn.eq(row_retired + 1)]
                m.next = "COMPARE"
            with m.State("COMPARE"):     # the RAM's output: the record read in MEASURE, held until the next read
                m.d.sync += [in_ring.eq(offset < count), replay_fetch.eq(read.data.fetch),
                             headroom.eq(Mux(offset[31], -1, offset[:31] + 1 - count))]
                m.next = "DECIDE"
            with m.State("DECIDE"):
                with m.If(request.opcode == TsnOpcode.LIMIT):
                    m.d.comb += limit_load.eq(1)    # the row's credit and flags, below
                    m.next = "TAKE"
                with m.Elif(request.opcode == TsnOpcode.RESEND):
                    with m.If(in_ring):
                        m.d.sync += replaying.eq(1)
                        m.next = "REPLAY"
                    with m.Else():
                        m.d.comb += [refused.sink.payload.eq(request), refused.sink.valid.eq(1)]
                        with m.If(refused.sink.ready):
                            m.next = "TAKE"
                with m.Elif(offset[31] | (count == 0)):
                    m.next = "TAKE"        # at or below the last ACK (serial arithmetic), or nothing in flight
                with m.Else():
                    m.d.sync += [walk_left.eq(Mux(in_ring, offset + 1, count)), retiring.eq(1)]
                    m.next = "WALK_READ"
            with m.State("REPLAY"):
                with m.If(sent.valid & sent.ready):
                    m.d.sync += replaying.eq(0)
                    m.next = "TAKE"
            with m.State("WALK_READ"):
                # Only with room for a completion: then WALK_EMIT retires whatever the record says,
                # and the row's counters never wait on the RAM's output.
                with m.If(completions.sink.ready):
                    m.d.comb += read.en.eq(1)
                    m.next = "WALK_EMIT"
            with m.State("WALK_EMIT"):
                m.d.comb += completions.sink.valid.eq(completes)
                m.d.comb += retire_step.eq(1)
                m.d.sync += [walk_tsn.eq(walk_tsn + 1), walk_left.eq(walk_left - 1)]
                with m.If(walk_left == 1):
                    m.d.sync += retiring.eq(0)
                    m.next = "TAKE"
                with m.Else():
                    m.next = "WALK_READ"

        # Per row: a record in, a TSN retired, or the host's row write (the row is idle then).
        row_write = self.association_write.payload
        m.d.comb += self.association_write.ready.eq(1)
        no_headroom = headroom[-1] | (headroom == 0)
        for row in range(associations):
            adding = flowing & (head_row == row) & ~halted[row]
            removing = retire_step & (request_row == row)
            row_written = self.association_write.valid & (row_write.index == row)
            row_limited = limit_load & (request_row == row)
            full_next, stopped_next = following["full"][row], following["stopped"][row]
            exhausted_next, holding_next = following["exhausted"][row], following["holding"][row]
            with m.If(row_written):
                m.d.sync += [retired[row].eq(row_write.next_tsn - 1), outstanding[row].eq(0)]
                m.d.comb += full_next.eq(0)
            with m.Elif(adding & ~removing):
                m.d.sync += outstanding[row].eq(outstanding[row] + 1)
                m.d.comb += full_next.eq(outstanding[row] == ring_tsns - 1)
            with m.Elif(removing & ~adding):
                m.d.sync += outstanding[row].eq(outstanding[row] - 1)
                m.d.comb += full_next.eq(0)
            with m.If(removing):
                m.d.sync += retired[row].eq(retired[row] + 1)
            # The limit: no segment of the row is added while its LIMIT is under way (holding), so no
            # TSN is still to be counted off when the LIMIT loads the credit.
            m.d.sync += spent[row].eq(adding & limited[row])
            with m.If(spent[row]):
                m.d.sync += credit[row].eq(credit[row] - 1)
            with m.If(row_written):
                m.d.sync += limited[row].eq(0)
                m.d.comb += stopped_next.eq(0)
            with m.Elif(row_limited):
                m.d.sync += [limited[row].eq(1), credit[row].eq(Mux(no_headroom, 0, headroom[:32]))]
                m.d.comb += stopped_next.eq(no_headroom)
            with m.Elif(exhausted[row]):
                m.d.comb += stopped_next.eq(1)
            # The last credit: 1 left once the TSN still to be counted off is. A row write or a LIMIT of
            # the row comes first, as for the other flags.
            last_credit = limited[row] & Mux(spent[row], credit[row] == 2, credit[row] == 1)
            m.d.comb += exhausted_next.eq(adding & last_credit & ~row_written & ~row_limited)
            with m.If(row_limited):
                m.d.comb += holding_next.eq(0)
            with m.Elif(self.hold & (self.hold_row == row)):
                m.d.comb += holding_next.eq(1)
            m.d.sync += [full[row].eq(full_next), stopped[row].eq(stopped_next), exhausted[row].eq(exhausted_next),
                         holding[row].eq(holding_next),
                         halted_rows[row].eq(full_next | stopped_next | exhausted_next | holding_next)]
        # The registers the safety proof (formal/ring.py) ties to its shadow, and the request's states.
        self._registers = {
            "request": request, "count": count, "in_ring": in_ring, "walk_left": walk_left, "replaying": replaying,
            "offset": offset, "walk_tsn": walk_tsn, "retiring": retiring, "replay_fetch": replay_fetch,
            **{f"retired_{row}": retired[row] for row in range(associations)},
            **{f"outstanding_{row}": outstanding[row] for row in range(associations)},
            **{f"full_{row}": full[row] for row in range(associations)},
            **{f"halted_{row}": halted_rows[row] for row in range(associations)},
            **{f"halted_flags_{row}": full[row] | stopped[row] | exhausted[row] | holding[row]
               for row in range(associations)},
            "state": {name: fsm.ongoing(name) for name in fsm.encoding},
        }
        return m

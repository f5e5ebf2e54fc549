"""Report records in DDP-SSN order per DDP stream: completions after every segment before them.

RFC 5041 5.3 lets segments be placed in any order; 5.4 delivers a message
to the ULP only when all of its segments have been placed, and RFC 5043 6.1
makes the DDP-SSN the order of a stream. The placement check places on
arrival; this block holds the report record of an ACCEPTED segment until
every earlier DDP-SSN of its stream has been reported, so the records of a
stream leave in DDP-SSN order and the one with L = 1 is its message's
completion. Every other record (errors, duplicates, drops, chunk errors)
passes in arrival order. Records are handled one at a time, as if each
arrival were processed whole: a record leaves, or is stored, and when it
fills its stream's gap the stored run behind it follows before the next
record is taken.

Per stream: ``next``, the DDP-SSN to report next, and one bit per slot of
``window`` record slots in block RAM (slot ``DDP-SSN mod window``). The
placement check admits only DDP-SSNs less than ``window`` after its own
lowest missing one, which is never before ``next`` here (records arrive in
decision order), so a slot is always free when its record comes.

An untagged ACCEPTED record with L = 1 leaving here retires its buffer
(``retire``: stream row, QN, MSN): the message is complete (RFC 5041 5.4),
so retirement follows MSN order per queue and a segment of the message that
arrives after its L = 1 segment still finds its buffer.

Host writes of a stream row pass through ``stream_write_in`` to
``stream_write_out`` (the placement check): taken between records, they set
the stream's ``next`` to ``first_ssn`` and drop its stored records (left
waiting after the stream's error, RFC 5041 7.1: never delivered).

``waiting`` counts the records stored (a level for the host's counters: the
records its counters announce but it has not seen), ``discarded`` the
records host writes dropped.

Throughput: one record per cycle; a run of ``k`` stored records takes
``k + 1`` cycles after the record that releases it.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out, connect

from hdl.abi import ReportKind, SegmentStatus, report_layout, stream_write_layout
from hdl.rx.untagged_buffers import untagged_retire_layout
from hdl.stream.bits import index_bits
from hdl.stream.queue import Queue

__all__ = ["DeliveryOrder"]


class DeliveryOrder(wiring.Component):
    """The records of ``associations x stream_ids`` DDP streams, put in DDP-SSN order."""

    def __init__(self, *, associations: int, stream_ids: int, window: int = 32, address_bits: int = 64):
        if window < 2 or window & (window - 1):
            raise ValueError(f"window must be a power of two of at least 2, not {window}")
        self._associations, self._stream_ids = associations, stream_ids
        self._streams = associations * stream_ids
        self._window, self._address_bits = window, address_bits
        super().__init__({
            "records_in": In(stream.Signature(report_layout(address_bits))),
            "records_out": Out(stream.Signature(report_layout(address_bits))),
            "retire": Out(stream.Signature(untagged_retire_layout(self._streams))),
            "stream_write_in": In(stream.Signature(stream_write_layout(self._streams))),
            "stream_write_out": Out(stream.Signature(stream_write_layout(self._streams))),
            "waiting": Out(range(self._streams * window + 1)),
            "discarded": Out(32),
        })

    def _row(self, record):
        """The stream table row of a record: association * stream_ids + stream id."""
        association_bits = (self._associations - 1).bit_length()
        stream_id_bits = (self._stream_ids - 1).bit_length()
        row = Cat(record.stream_id[:stream_id_bits], record.association[:association_bits])
        return row if len(row) else record.association[:1]

    def elaborate(self, platform):
        m = Module()
        window, streams = self._window, self._streams
        slot_bits = (window - 1).bit_length()
        layout = report_layout(self._address_bits)

        inbound = m.submodules.inbound = Queue(layout)
        connect(m, wiring.flipped(self.records_in), inbound.sink)
        writes = m.submodules.writes = Queue(stream_write_layout(streams))
        connect(m, writes.source, wiring.flipped(self.stream_write_out))
        outbound = m.submodules.outbound = Queue(layout, depth=8)
        connect(m, outbound.source, wiring.flipped(self.records_out))

        store = m.submodules.store = memory.Memory(shape=layout, depth=streams * window, init=[])
        store_w = store.write_port()
        store_r = store.read_port()

        next_ssn = [Signal(16, name=f"next_{i}") for i in range(streams)]
        held = [Signal(window, name=f"held_{i}") for i in range(streams)]
        occupied = Signal(streams)   # held[i] != 0

        # Room in the output queue for this cycle's record and one read in flight (registered,
        # conservative by the records of the last two cycles).
        room = Signal()
        m.d.sync += room.eq(outbound.level < outbound.depth - 3)

        head = inbound.source.payload
        row = Signal(index_bits(streams))
        m.d.comb += row.eq(self._row(head))
        head_next = Signal(16)
        head_held = Signal(window)
        head_occupied = Signal()
        m.d.comb += [head_next.eq(Cat(*next_ssn).word_select(row, 16)),
                     head_held.eq(Cat(*held).word_select(row, window)),
                     head_occupied.eq(occupied.bit_select(row, 1))]
        in_order = (head.kind == ReportKind.SEGMENT) & (head.status == SegmentStatus.ACCEPTED)

        emit = Signal()
        emit_record = Signal(layout)
        read_pending = Signal()
        m.d.sync += read_pending.eq(0)

        # The run being drained: its stream, the next DDP-SSN, a working copy of its slot bits.
        run_row = Signal.like(row)
        run_next = Signal(16)
        run_held = Signal(window)
        run_slot = run_next[:slot_bits]

        # The count of stored records: one more per store, one less per record read back, and the
        # records a host write drops, counted over two cycles off the write's path.
        stored, released = Signal(), Signal()
        dropped_word, dropped_count = Signal(window), Signal(range(window + 1))
        m.d.sync += [
            dropped_word.eq(0),
            dropped_count.eq(sum(dropped_word[i] for i in range(window))),
            self.waiting.eq(self.waiting + stored - released - dropped_count),
            self.discarded.eq(self.discarded + dropped_count),
        ]

        write_request = self.stream_write_in
        with m.FSM():
            with m.State("TAKE"):
                with m.If(write_request.valid & writes.sink.ready):
                    # A host write of a stream row: restart its window.
                    request = write_request.payload
                    m.d.comb += [write_request.ready.eq(1), writes.sink.valid.eq(1),
                                 writes.sink.payload.eq(request)]
                    m.d.sync += dropped_word.eq(Cat(*held).word_select(request.index, window))
                    for i in range(streams):
                        with m.If(request.index == i):
                            m.d.sync += [next_ssn[i].eq(request.first_ssn), held[i].eq(0), occupied[i].eq(0)]
                with m.Elif(inbound.source.valid & room):
                    m.d.comb += inbound.source.ready.eq(1)
                    with m.If(~in_order):
                        m.d.comb += [emit.eq(1), emit_record.eq(head)]
                    with m.Elif(head.ddp_ssn == head_next):
                        m.d.comb += [emit.eq(1), emit_record.eq(head)]
                        for i in range(streams):
                            with m.If(row == i):
                                m.d.sync += next_ssn[i].eq(head.ddp_ssn + 1)
                        with m.If(head_occupied):
                            m.d.sync += [run_row.eq(row), run_next.eq(head.ddp_ssn + 1), run_held.eq(head_held)]
                            m.next = "RUN"
                    with m.Else():
                        m.d.comb += [stored.eq(1), store_w.en.eq(1),
                                     store_w.addr.eq(Cat(head.ddp_ssn[:slot_bits], row)),
                                     store_w.data.eq(head)]
                        for i in range(streams):
                            with m.If(row == i):
                                m.d.sync += [held[i].eq(held[i] | (1 << head.ddp_ssn[:slot_bits])),
                                             occupied[i].eq(1)]
            with m.State("RUN"):
                with m.If(~run_held.bit_select(run_slot, 1)):
                    for i in range(streams):
                        with m.If(run_row == i):
                            m.d.sync += [next_ssn[i].eq(run_next), held[i].eq(run_held),
                                         occupied[i].eq(run_held.any())]
                    m.next = "TAKE"
                with m.Elif(room):
                    m.d.comb += [released.eq(1), store_r.addr.eq(Cat(run_slot, run_row))]
                    m.d.sync += [read_pending.eq(1), run_next.eq(run_next + 1),
                                 run_held.eq(run_held & ~(1 << run_slot))]
        m.d.comb += store_r.en.eq(1)

        # Records out: the head, or the stored record read on the previous cycle.
        out = outbound.sink
        m.d.comb += [
            out.valid.eq(emit | read_pending),
            out.payload.eq(Mux(read_pending, store_r.data, emit_record)),
        ]
        # A delivered untagged message retires its buffer (registered: off the RAM's output).
        record = out.payload
        retire = self.retire
        m.d.sync += [
            retire.valid.eq(out.valid & (record.kind == ReportKind.SEGMENT)
                            & (record.status == SegmentStatus.ACCEPTED) & ~record.tagged & record.last),
            retire.payload.stream.eq(self._row(record)),
            retire.payload.qn.eq(record.qn),
            retire.payload.msn.eq(record.msn),
        ]
        return m

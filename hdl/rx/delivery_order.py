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

The placement check's :class:`hdl.rx.sequence_window.SequenceWindow` says,
with each record (:func:`hdl.rx.layouts.sequence_flags_layout`), whether its
DDP-SSN was the lowest one its stream had not received (``in_order``) and
whether the next one had already come (``releases``). Records arrive here in
the order the placement check decided them, so every earlier ACCEPTED record
of the stream has come: an in-order record leaves at once; a record that is
not in order is stored in block RAM, slot ``DDP-SSN mod window`` of its
stream, which is free (the window admits only DDP-SSNs less than ``window``
after the lowest missing one); a record that releases is followed by the
stored records of the DDP-SSNs after it, up to the first slot not filled.

An untagged ACCEPTED record with L = 1 leaving here retires its buffer
(``retire``: stream row, QN, MSN): the message is complete (RFC 5041 5.4),
so a segment of the message that arrives after its L = 1 segment still
finds its buffer. Retirement frees the slot for the host's next post; the
placement check already counts the buffer consumed from the decision that
delivered its message, so the retirement's timing changes no verdict.

Host writes of a stream row pass through ``stream_write_in`` to
``stream_write_out`` (the placement check): taken between records, they
drop the stream's stored records (left waiting after the stream's error,
RFC 5041 7.1: never delivered). A write is taken ahead of records still in
the input queue, so the host rewrites a row only once the records of the
stream's earlier segments have come through (the engine's host does: it
re-arms after the error's own record, which follows them, or a stream
that has had no segments). ``waiting`` counts the records stored (a
level for the host's counters: the records its counters announce but it
has not seen), ``discarded`` the records host writes dropped.

Timing: a record's decision (leave at once, start a run, or be stored) is
decoded from its kind, status and sequence flags as it enters the inbound
queue; the two decision bits and the stream are kept in flip-flops beside the
queue's LUT RAM (the rest of the record is read from it). Stores, emissions and
the held-slot bits are registered before they reach the record RAM, the output
queue and the slot maps; a run looks one slot ahead, so its test is a
flip-flop. Throughput: one record per cycle; a run of ``k`` stored records
takes ``k + 3`` cycles after the record that releases it (its slot bits are
loaded, then the first two of them looked up).
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out, connect

from abi.rx import ReportKind, SegmentStatus, report_layout, stream_write_layout
from hdl.layout import struct_layout
from hdl.rx.layouts import ordered_record_layout
from hdl.rx.untagged_buffers import untagged_retire_layout
from hdl.stream.bits import index_bits
from hdl.stream.queue import Queue
from hdl.synthesis import NO_RW_CHECK

__all__ = ["DeliveryOrder"]


class DeliveryOrder(wiring.Component):
    """The records of ``associations x stream_ids`` DDP streams, put in DDP-SSN order."""

    def __init__(self, *, associations: int, stream_ids: int, window: int = 32, address_bits: int = 64,
                 block_ram: bool = True):
        if window < 2 or window & (window - 1):
            raise ValueError(f"window must be a power of two of at least 2, not {window}")
        self._associations, self._stream_ids = associations, stream_ids
        self._streams = associations * stream_ids
        self._window, self._address_bits, self._block_ram = window, address_bits, block_ram
        super().__init__({
            "records_in": In(stream.Signature(ordered_record_layout(address_bits))),
            "records_out": Out(stream.Signature(struct_layout(report_layout(address_bits)))),
            "retire": Out(stream.Signature(untagged_retire_layout(self._streams))),
            "stream_write_in": In(stream.Signature(struct_layout(stream_write_layout(self._streams)))),
            "stream_write_out": Out(stream.Signature(struct_layout(stream_write_layout(self._streams)))),
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
        layout = struct_layout(report_layout(self._address_bits))

        # The head is read from the inbound queue's LUT RAM: taking it moves a read address,
        # not the enable of a wide output register. Its decision is decoded on the way in and
        # kept, with the stream, in flip-flops: `leaves` (not an ACCEPTED segment, or the lowest
        # DDP-SSN missing: out at once), `releases` (and the next one is stored: a run follows).
        inbound = m.submodules.inbound = Queue(
            data.StructLayout({"record": layout, "leaves": 1, "releases": 1}), 4, memory_output=True,
            registered_fields=("record.association", "record.stream_id", "leaves", "releases"))
        arriving = self.records_in.payload
        arriving_accepted = ((arriving.record.kind == ReportKind.SEGMENT)
                             & (arriving.record.status == SegmentStatus.ACCEPTED))
        m.d.comb += [
            inbound.sink.valid.eq(self.records_in.valid),
            self.records_in.ready.eq(inbound.sink.ready),
            inbound.sink.payload.record.eq(arriving.record),
            inbound.sink.payload.leaves.eq(~arriving_accepted | arriving.sequence.in_order),
            inbound.sink.payload.releases.eq(arriving_accepted & arriving.sequence.in_order
                                             & arriving.sequence.releases),
        ]
        writes = m.submodules.writes = Queue(struct_layout(stream_write_layout(streams)))
        connect(m, writes.source, wiring.flipped(self.stream_write_out))
        outbound = m.submodules.outbound = Queue(layout, depth=8, block_ram=self._block_ram)
        connect(m, outbound.source, wiring.flipped(self.records_out))

        # A record is read only in RUN, and stores happen on the cycle after a TAKE decision: never both
        # on one edge (the RUN_LOAD and RUN_START cycles lie between), so a read never meets a write.
        store = m.submodules.store = memory.Memory(shape=layout, depth=streams * window, init=[],
                                                   attrs=NO_RW_CHECK)
        store_w = store.write_port()
        store_r = store.read_port()
        held = [Signal(window, name=f"held_{i}") for i in range(streams)]

        # Room in the output queue for the records of this cycle's decision and the two stages
        # in flight (registered, so conservative by the last cycles' records).
        room = Signal()
        m.d.sync += room.eq(outbound.level < outbound.depth - 4)

        head = inbound.source.payload.record
        row = Signal(index_bits(streams))
        m.d.comb += row.eq(self._row(head))

        # Registered outputs of a decision: the head to emit, a store, a read of the record RAM.
        emit_record = Signal(layout)
        store_en, store_addr, store_record = Signal(), Signal(len(store_w.addr)), Signal(layout)
        read_en = Signal()
        # The output queue's sink.valid, one flip-flop: the head is emitted, or a stored record is
        # read back (`read_data_valid`, below; loaded from `read_en`), which reaches the queue's flags.
        out_valid = Signal()
        # The record and store address registers load the head on every cycle (their enables are
        # not the decision, which only sets the valid flags: it fans out to a 436-bit record).
        m.d.sync += [store_en.eq(0), read_en.eq(0), emit_record.eq(head), store_record.eq(head),
                     store_addr.eq(Cat(head.ddp_ssn[:slot_bits], row)), out_valid.eq(read_en)]

        # The run being drained: its stream, the next DDP-SSN's slot (and the two after it), a
        # working copy of its slot bits, and whether the slot and the one after it are held.
        run_row = Signal.like(row)
        run_slot, run_slot_1, run_slot_2 = (Signal(slot_bits, name=f"run_slot{s}") for s in ("", "_1", "_2"))
        run_held = Signal(window)
        slot_held, next_slot_held = Signal(), Signal()

        # The stored count: one more per store, one less per record read back, and the records a
        # host write drops, counted over three cycles off the write's path (two halves, then
        # their sum).
        dropped_word, dropped_count = Signal(window), Signal(range(window + 1))
        half = window // 2
        dropped_halves = [Signal(range(half + 1), name=f"dropped_half_{i}") for i in range(2)]
        m.d.sync += [
            dropped_word.eq(0),
            dropped_halves[0].eq(sum(dropped_word[i] for i in range(half))),
            dropped_halves[1].eq(sum(dropped_word[i] for i in range(half, window))),
            dropped_count.eq(dropped_halves[0] + dropped_halves[1]),
            self.waiting.eq(self.waiting + store_en - read_en - dropped_count),
            self.discarded.eq(self.discarded + dropped_count),
        ]

        # A store marks its slot held on the next cycle, from the store registers (off the
        # decision's path); until then a read of the stream's slots adds it. Each held bit is
        # written by one of three exclusive causes, each enabled by flip-flops: a store (its row
        # and slot decoded one-hot as the store is registered), the end of a run (its row decoded
        # as the run's row is loaded) and a host write (its row decoded on acceptance, the bits
        # cleared on the CLEAR cycle after it).
        store_row, store_slot = store_addr[slot_bits:], store_addr[:slot_bits]
        store_row_hot, store_slot_hot = Signal(streams), Signal(window)
        run_row_hot, clear_row_hot = Signal(streams), Signal(streams)
        m.d.sync += [store_row_hot.eq(1 << row), store_slot_hot.eq(1 << head.ddp_ssn[:slot_bits])]
        run_ends, clearing = Signal(), Signal()
        for i in range(streams):
            with m.If(clearing & clear_row_hot[i]):
                m.d.sync += held[i].eq(0)
            with m.Elif(run_ends & run_row_hot[i]):
                m.d.sync += held[i].eq(run_held)
            with m.Elif(store_en & store_row_hot[i]):
                m.d.sync += held[i].eq(held[i] | store_slot_hot)

        def held_now(index):
            pending = Mux(store_en & (store_row == index), 1 << store_slot, 0)
            return Cat(*held).word_select(index, window) | pending

        request = self.stream_write_in
        # The write queue's payload is the request's on every cycle (its valid says when one is taken), so
        # the queue's skid register follows a flip-flop's output, not the FSM's decision.
        m.d.comb += writes.sink.payload.eq(request.payload)
        with m.FSM():
            with m.State("TAKE"):
                with m.If(request.valid & writes.sink.ready):
                    # A host write of a stream row: its stored records are dropped (on CLEAR).
                    m.d.comb += [request.ready.eq(1), writes.sink.valid.eq(1)]
                    m.d.sync += [dropped_word.eq(held_now(request.payload.index)),
                                 clear_row_hot.eq(1 << request.payload.index)]
                    m.next = "CLEAR"
                with m.Elif(inbound.source.valid & room):
                    m.d.comb += inbound.source.ready.eq(1)
                    with m.If(inbound.source.payload.leaves):
                        m.d.sync += out_valid.eq(1)
                        with m.If(inbound.source.payload.releases):
                            m.next = "RUN_LOAD"
                    with m.Else():
                        m.d.sync += store_en.eq(1)
                # Loaded on every cycle of TAKE: used only when the run starts.
                m.d.sync += [run_row.eq(row), run_row_hot.eq(1 << row),
                             run_slot.eq(head.ddp_ssn[:slot_bits] + 1), run_slot_1.eq(head.ddp_ssn[:slot_bits] + 2),
                             run_slot_2.eq(head.ddp_ssn[:slot_bits] + 3)]
            with m.State("CLEAR"):
                # No record is taken and none stored on this cycle (the write took TAKE's), so the
                # stream's held bits are read again only after they are cleared.
                m.d.comb += clearing.eq(1)
                m.next = "TAKE"
            with m.State("RUN_LOAD"):
                m.d.sync += run_held.eq(held_now(run_row))
                m.next = "RUN_START"
            with m.State("RUN_START"):
                m.d.sync += [slot_held.eq(run_held.bit_select(run_slot, 1)),
                             next_slot_held.eq(run_held.bit_select(run_slot_1, 1))]
                m.next = "RUN"
            with m.State("RUN"):
                with m.If(~slot_held):
                    m.d.comb += run_ends.eq(1)
                    m.next = "TAKE"
                with m.Elif(room):
                    m.d.sync += [read_en.eq(1), run_slot.eq(run_slot_1), run_slot_1.eq(run_slot_2),
                                 run_slot_2.eq(run_slot_2 + 1), run_held.eq(run_held & ~(1 << run_slot)),
                                 slot_held.eq(next_slot_held), next_slot_held.eq(run_held.bit_select(run_slot_2, 1))]

        # The record RAM: writes a cycle after the decision; the run's slot is read as it is taken,
        # its data one cycle later into a register of its own (the RAM's output stays off the queue).
        m.d.comb += [store_w.en.eq(store_en), store_w.addr.eq(store_addr), store_w.data.eq(store_record),
                     store_r.addr.eq(Cat(run_slot, run_row)), store_r.en.eq(1)]
        read_data_valid, read_record = Signal(), Signal(layout)
        m.d.sync += [read_data_valid.eq(read_en), read_record.eq(store_r.data)]

        # Records out: the head decided on the previous cycle, or a stored record read back.
        out = outbound.sink
        m.d.comb += [
            out.valid.eq(out_valid),
            out.payload.eq(Mux(read_data_valid, read_record, emit_record)),
        ]
        # A delivered untagged message retires its buffer (registered).
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

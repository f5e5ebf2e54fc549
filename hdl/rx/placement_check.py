"""The placement decision of the receive path: tagged and untagged checks, error latching.

:class:`PlacementCheck` sits between the DDP header validator and the DMA
writer (:class:`hdl.rx.engine.RxEngine`'s receive path). For every DDP segment it decides, before
any byte is placed (RFC 5041 7.1), whether the payload may be written and
where; it emits one ``verdict`` per segment, one DMA ``cmd`` per segment that
places bytes, and forwards the payload of those segments only.

Decision, in the order of the golden model (``model.ddp.sink.DdpSink``):

1. stream: the (association, stream id) must be a valid row of the stream
   table, else the segment is dropped with status ``NO_STREAM`` (nothing is
   latched: there is no DDP Stream to report to);
2. a stream already in error drops every later segment silently: status
   ``DROPPED`` (RFC 5041 7.1, last paragraph);
   2a. the DDP-SSN (:class:`hdl.rx.sequence_window.SequenceWindow`): seen
   before -> ``DUPLICATE``, dropped before placement with no error (RFC
   5043 10, RFC 5041 5.3); beyond the stream's window -> ``INVALID_SSN``,
   nothing placed, the error bit latched (RFC 5043 10: the stream ends);
3. a header-level error from the validator (DV, QN, RDMAP version, opcode,
   truncation) is the verdict as it came;
4. tagged, non-zero payload only (RFC 5041 5.2): invalid STag (DDP 0x1/0x00),
   PD or stream association mismatch (8.2; 0x1/0x02), access right (RDMA
   Write needs remote write, Read Response local write; RDMAP 0x1/0x02),
   TO below base or TO + length past the end (0x1/0x01), 64-bit wrap
   (0x1/0x03): :class:`hdl.rx.region_table.RegionTable`;
5. untagged: QN below ``queues`` (0x2/0x01), then the buffer checks of
   :class:`hdl.rx.untagged_buffers.UntaggedBuffers` (no buffer, MSN range,
   invalid MO, message too long), which also apply to zero-length segments
   except the MO checks.

An error (2a beyond, 3-5) is reported once in the verdict and latches the
stream's error bit; the host clears it by rewriting the stream's row
(re-arming it, which also restarts the DDP-SSN window at the row's
``first_ssn``; the row is written after the untagged buffers have swept
the stream's message completions, one slot a cycle: ``forget`` in
:class:`hdl.rx.untagged_buffers.UntaggedBuffers`). A buffer counts as
consumed from the decision that delivers its message (its L = 1 segment
accepted and every DDP-SSN before it received, RFC 5041 5.4), judged from
the DDP-SSN window, and is retired (its slot freed for a post) on
``retire``, when its message's record leaves the delivery order
(:class:`hdl.rx.delivery_order.DeliveryOrder`), later by the records
between the two blocks (the completion is judged in 16-bit serial
arithmetic, so the retirement must come within 2**15 of the stream's
DDP-SSNs, which those bounded queues hold far fewer of). Accepted
segments with a payload get a ``cmd``: ``host_address + (TO - base_to)``
(tagged) or ``buffer address + MO`` (untagged), ``payload_length`` bytes;
every byte of it lies in the region or buffer just checked (RFC 5041
8.3.1 item 3).

Payload framing: ``payload_in`` carries exactly one packet for each segment
whose ``payload_length`` is non-zero and whose header-level ``error`` is not
valid (whatever its verdict here), and none for the others, in segment order:
the contract of :class:`hdl.rx.ddp_header.DdpHeaderValidator`, which discards
the payload of a segment it found in error. The packets of accepted segments
leave on ``payload_out`` unchanged, after their ``cmd``; the others are
consumed and dropped here. The segment info of a packet must not wait for
the packet's beats to be accepted (decisions run ahead of the payload, up
to ``decisions`` segments).

Ordering guarantees:

* Host writes of the region table (including invalidation, RFC 5041 8.3.1
  item 6) and of the stream table wait until no segment is in the input
  queue or the decision pipeline, and no segment enters the input queue
  while a host write is pending. Every
  segment is therefore checked wholly against the tables before a write or
  wholly after it: once a write has been accepted (``ready`` seen), no
  segment checked against the old row can still produce a ``cmd``; the
  ``cmd`` stream order puts all commands of segments checked earlier before
  that point. (Commands already issued may still be in flight in the DMA
  writer: a host that must know that the old buffer is no longer written
  waits for the DMA writer's ``done`` of the last earlier command.)
* Buffer posts take effect at the cycle they are written; a segment looked
  up before sees no buffer, one after sees it.
* Segments of one DDP stream are decided strictly in order: a segment is not
  taken while an earlier one of the same stream is in stages 1-2, so the
  error bit, DDP-SSN window and message completions it reads are those left
  by every earlier segment (transparent reads and the buffers' stage-1
  correction cover a commit in the same cycle); a message delivered by one
  segment is consumed for the next, back to back, however late ``retire`` comes
  (within the bound above).

Latency: a segment enters an input queue (one edge, :class:`Queue`) that
also carries its stream row and range flags, so stage 0 decides to take it
from flip-flops. A segment taken on edge ``t`` is decided on edge ``t + 3`` (its
error latched, its buffer retired), its verdict and cmd enter their output
queues on edge ``t + 4`` and are visible on ``verdict``/``cmd`` one edge
later if the queue is empty, three behind earlier ones (:class:`hdl.stream.queue.Queue`); payload beats pass combinationally
(through one output queue) once their decision is made. A segment is taken only when
every output queue has room for it and for each segment ahead of it (a
registered count, one segment conservative), so the pipeline never stalls and
no consumer's ``ready`` reaches the tables.
Throughput: one segment decision per cycle when consecutive segments belong
to different streams; back-to-back segments of the same stream, one every
three cycles. Payload: one beat per cycle.

Read Requests (``read_requests``, the engine's read responder): a segment the
validator marks ``read_request`` (untagged, QN 1, opcode 1, RFC 5040 4.4) takes
step 4's region lookup instead of step 5's buffers, on its Data Source
(``source_stag``, ``source_to``, ``read_size``; zero size not checked, RFC
5041 5.2) with REMOTE_READ, its refusals the RDMAP Remote Protection Errors of
RFC 5040 7.2 (invalid STag 0x1/0x00, PD or stream 0x1/0x03, access 0x1/0x02,
bounds 0x1/0x01, wrap 0x1/0x04). Nothing of it is placed (no ``cmd``, no
payload: the validator kept it), no buffer is consumed; accepted, its verdict
carries the translated Data Source in ``host_address`` (0 for size 0) and the
size in ``message_length``.
"""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from abi.rx import (ASSOCIATION_BITS, ERROR_NUMBER, STAG_KEY_BITS, STREAM_BITS, SegmentStatus, buffer_post_layout,
                    buffer_revoke_layout, check_key_bits, region_write_layout, segment_report_fields,
                    stream_entry_layout, stream_write_layout)
from hdl.layout import enum_shape, struct_layout
from hdl.rx.layouts import dma_command_layout, segment_info_layout, sequence_flags_layout
from hdl.rx.region_table import RegionTable
from hdl.rx.sequence_window import SequenceWindow
from hdl.rx.untagged_buffers import UntaggedBuffers, UntaggedFault, untagged_retire_layout
from hdl.stream.packet import packet_signature
from hdl.stream.queue import Queue

__all__ = ["verdict_layout", "StreamTable", "PlacementCheck"]

_OPCODE_READ_RESPONSE = 2  # RFC 5040 4.3: RDMA Read Response
_LAYER_RDMAP, _LAYER_DDP = 0, 1
_TAGGED_BUFFER, _UNTAGGED_BUFFER = 1, 2  # RFC 5041 7.2 error types
_REMOTE_PROTECTION = 1                   # RFC 5040 7.2 EType



def verdict_layout(address_bits: int = 64) -> data.StructLayout:
    """One per segment, in segment order, for the completion engine."""
    return data.StructLayout({
        "tag": unsigned(16),             # equals the tag of the segment's cmd, if any
        **segment_report_fields(address_bits),
        "status": enum_shape(SegmentStatus),
        "error": struct_layout(ERROR_NUMBER),           # valid with status ERROR
        "placed": unsigned(1),           # ACCEPTED with a payload: a DMA done follows
        "sequence": sequence_flags_layout(),
    })



class StreamTable(wiring.Component):
    """Per DDP stream: armed, Protection Domain, and the error bit of RFC 5041 7.1.

    ``write`` (accepted while ``hold`` is low) sets a row and clears its error
    bit. ``fault`` (a write response that was not OKAY, from the completion
    engine) latches the error bit of its row on a cycle with neither
    ``set_error`` nor a host write. ``en`` takes a lookup of ``index``;
    ``entry`` and ``error`` hold the row one advance later. ``set_error`` latches the error bit of
    ``set_error_index`` (written on the next cycle); a lookup on the same
    cycle or later sees the bit set (``en`` high on the cycle after it).
    """

    def __init__(self, streams: int, *, pd_bits: int = 16):
        self._streams, self._pd_bits = streams, pd_bits
        index_bits = max(1, (streams - 1).bit_length())
        super().__init__({
            "write": In(stream.Signature(struct_layout(stream_write_layout(streams, pd_bits)))),
            "hold": In(1),
            "en": In(1),
            "index": In(index_bits),
            "entry": Out(struct_layout(stream_entry_layout(pd_bits))),
            "error": Out(1),
            "set_error": In(1),
            "set_error_index": In(index_bits),
            "fault": In(stream.Signature(index_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        rows = m.submodules.rows = memory.Memory(shape=struct_layout(stream_entry_layout(self._pd_bits)),
                                                 depth=self._streams, init=[])
        errors = m.submodules.errors = memory.Memory(shape=1, depth=self._streams, init=[])
        rows_w, errors_w = rows.write_port(), errors.write_port()
        rows_r = rows.read_port()
        errors_r = errors.read_port(transparent_for=(errors_w,))
        host_write = self.write.valid & ~self.hold
        # set_error is registered and written one cycle later (no caller logic at the write
        # enable); the lookup taken on its own cycle gets it on the output instead.
        set_error, set_error_index = Signal(), Signal.like(self.set_error_index)
        looked_up = Signal.like(self.index)
        m.d.sync += [set_error.eq(self.set_error), set_error_index.eq(self.set_error_index)]
        with m.If(self.en):
            m.d.sync += looked_up.eq(self.index)
        fault_write = self.fault.valid & ~set_error & ~host_write
        m.d.comb += [
            self.write.ready.eq(~self.hold),
            self.fault.ready.eq(fault_write),
            rows_w.addr.eq(self.write.payload.index),
            rows_w.data.eq(self.write.payload.entry),
            rows_w.en.eq(host_write),
            errors_w.addr.eq(Mux(set_error, set_error_index, Mux(host_write, self.write.payload.index,
                                                                 self.fault.payload))),
            errors_w.data.eq(~host_write),
            errors_w.en.eq(set_error | host_write | self.fault.valid),
            rows_r.addr.eq(self.index), rows_r.en.eq(self.en),
            errors_r.addr.eq(self.index), errors_r.en.eq(self.en),
            self.entry.eq(rows_r.data),
            self.error.eq(errors_r.data | (set_error & (set_error_index == looked_up))),
        ]
        return m


def _report(error, layer: int, etype: int, code):
    """Statements setting the ERROR_NUMBER view ``error`` to (layer, etype, code)."""
    return [error.valid.eq(1), error.layer.eq(layer), error.etype.eq(etype), error.code.eq(code)]


class PlacementCheck(wiring.Component):
    """STag/TO bounds check and untagged buffer check of each DDP segment (RFC 5041 7.1, 8.2, 8.3.1).

    Parameters
    ----------
    width_bytes : int
        Payload datapath width ``W``.
    regions : int
        Rows of the memory-region table (STag index ``0 .. regions - 1``).
    associations, stream_ids : int
        The stream table has ``associations x stream_ids`` rows, row
        ``association * stream_ids + stream_id``; other pairs are not streams.
    queues, depth : int
        Untagged queues per stream (QN ``0 .. queues - 1``) and buffers per queue.
    pd_bits, address_bits : int
        Protection Domain and host address widths.
    key_bits : int
        The STag's low bits that hold the key (:func:`abi.rx.check_key_bits`).
    read_requests : bool
        Decide RDMA Read Requests for the read responder (module docstring).
    decisions : int
        Decided segments whose payload may still be waiting.

    Ports
    -----
    segment : ``In(stream.Signature(segment_info_layout()))``
    payload_in : ``In(packet_signature(W))``
    cmd : ``Out(stream.Signature(dma_command_layout(address_bits)))``
    payload_out : ``Out(packet_signature(W))``
    verdict : ``Out(stream.Signature(verdict_layout(address_bits)))``
    region_write : ``In(stream.Signature(region_write_layout(regions, ...)))``
    stream_write : ``In(stream.Signature(stream_write_layout(streams, ...)))``
    post : ``In(stream.Signature(buffer_post_layout(streams, queues, ...)))``
        ``stream`` is the stream row index.
    revoke : ``In(stream.Signature(buffer_revoke_layout(streams, queues)))``
        Host revocations of posted buffers (:class:`UntaggedBuffers`).
    fault : ``In(stream.Signature(streams index))``
        Latch the error bit of a stream row: its placement got a bad write
        response. Segments looked up from the cycle after it is taken see it.
    retire : ``In(stream.Signature(untagged_retire_layout(...)))``
        A delivered untagged message: its buffer is consumed. Always ready.
    """

    def __init__(self, width_bytes: int, *, regions: int = 16, associations: int = 2, stream_ids: int = 4,
                 queues: int = 3, depth: int = 8, pd_bits: int = 16, address_bits: int = 64,
                 decisions: int = 4, window: int = 32, key_bits: int = STAG_KEY_BITS, block_ram: bool = True,
                 read_requests: bool = False):
        for name, value in (("associations", associations), ("stream_ids", stream_ids)):
            if value < 1 or value & (value - 1):
                raise ValueError(f"{name} must be a power of two, not {value}")
        if associations > 1 << ASSOCIATION_BITS or stream_ids > 1 << STREAM_BITS:
            raise ValueError("more associations or stream ids than the segment info can name")
        check_key_bits(key_bits, regions)
        self._width = width_bytes
        self._regions, self._associations, self._stream_ids = regions, associations, stream_ids
        self._streams = associations * stream_ids
        self._queues, self._depth = queues, depth
        self._pd_bits, self._address_bits = pd_bits, address_bits
        self._decisions = decisions
        self._window = window
        self._key_bits, self._block_ram = key_bits, block_ram
        self._read_requests = read_requests
        super().__init__({
            "segment": In(stream.Signature(segment_info_layout(read_requests))),
            "payload_in": In(packet_signature(width_bytes)),
            "cmd": Out(stream.Signature(dma_command_layout(address_bits))),
            "payload_out": Out(packet_signature(width_bytes)),
            "verdict": Out(stream.Signature(verdict_layout(address_bits))),
            "region_write": In(stream.Signature(struct_layout(region_write_layout(regions, pd_bits, address_bits,
                                                                                             key_bits)))),
            "stream_write": In(stream.Signature(struct_layout(stream_write_layout(self._streams, pd_bits)))),
            "post": In(stream.Signature(struct_layout(buffer_post_layout(self._streams, queues, address_bits)))),
            "revoke": In(stream.Signature(struct_layout(buffer_revoke_layout(self._streams, queues)))),
            "fault": In(stream.Signature(max(1, (self._streams - 1).bit_length()))),
            "retire": In(stream.Signature(untagged_retire_layout(self._streams, queues))),
        })

    @property
    def streams(self) -> int:
        return self._streams

    def stream_index(self, association: int, stream_id: int) -> int:
        """The stream table row of (association, stream id)."""
        return association * self._stream_ids + stream_id

    def elaborate(self, platform):
        m = Module()
        reads = self._read_requests
        regions = m.submodules.regions = RegionTable(self._regions, pd_bits=self._pd_bits,
                                                     address_bits=self._address_bits, key_bits=self._key_bits,
                                                     read_requests=reads)
        streams = m.submodules.streams = StreamTable(self._streams, pd_bits=self._pd_bits)
        buffers = m.submodules.buffers = UntaggedBuffers(self._streams, queues=self._queues, depth=self._depth,
                                                         address_bits=self._address_bits)
        wiring.connect(m, wiring.flipped(self.region_write), regions.write)
        wiring.connect(m, wiring.flipped(self.post), buffers.post)
        wiring.connect(m, wiring.flipped(self.revoke), buffers.revoke)
        wiring.connect(m, wiring.flipped(self.fault), streams.fault)
        window = m.submodules.window = SequenceWindow(self._streams, self._window)
        m.d.comb += [
            buffers.base.eq(window.base),
            window.reset.eq(self.stream_write.valid & self.stream_write.ready),
            window.reset_index.eq(self.stream_write.payload.index),
            window.reset_first.eq(self.stream_write.payload.first_ssn),
            self.retire.ready.eq(1),
            buffers.retire_en.eq(self.retire.valid),
            buffers.retire.eq(self.retire.payload),
        ]
        # A stream row is written once the untagged buffers have swept the stream's completions
        # against its old window (UntaggedBuffers, "forget"), after the pipeline has drained. The
        # sweep starts only with `hold` low, and no segment enters while the write is pending, so
        # `hold` stays low until the write: `ready` is the sweep's done flip-flop alone (it enables
        # the producer's wide output register).
        m.d.comb += [
            buffers.forget.valid.eq(self.stream_write.valid & ~streams.hold),
            buffers.forget.payload.eq(self.stream_write.payload.index),
            buffers.forget_base.eq(window.peek_base),
            streams.write.valid.eq(self.stream_write.valid & buffers.forget.ready),
            streams.write.payload.eq(self.stream_write.payload),
            self.stream_write.ready.eq(buffers.forget.ready),
        ]

        info_layout = segment_info_layout(reads)
        index_bits = max(1, (self._streams - 1).bit_length())
        stage_layout = data.StructLayout({
            "valid": 1, "info": info_layout, "index": index_bits, "known": 1, "qn_ok": 1,
        })
        s1, s2, s3 = Signal(stage_layout), Signal(stage_layout), Signal(stage_layout)

        # Output queues, written by the commit stage. A segment is taken only when
        # every queue has room for it and for every segment in stages 1-3 (a credit
        # check on flip-flops), so the pipeline never stalls: no path from the
        # consumers' ready into the tables.
        verdicts = m.submodules.verdicts = Queue(verdict_layout(self._address_bits), depth=8, block_ram=self._block_ram)
        commands = m.submodules.commands = Queue(dma_command_layout(self._address_bits), depth=8)
        decisions = m.submodules.decisions = Queue(unsigned(1), depth=self._decisions + 4)
        # Stage 4 holds the committed records, so the queues' inputs start at flip-flops.
        verdict_4 = Signal(verdict_layout(self._address_bits))
        command_4 = Signal(dma_command_layout(self._address_bits))
        decision_4 = Signal()
        verdict_valid_4, command_valid_4, decision_valid_4 = Signal(), Signal(), Signal()
        # The credit check is registered: it counts one more segment in flight than
        # there is (the one stage 0 may take on this cycle), so ``room`` on the next
        # cycle never overstates the queues' space.
        in_flight = Signal(range(5))
        m.d.comb += in_flight.eq(s1.valid + s2.valid + s3.valid + verdict_valid_4)
        room = Signal()
        m.d.sync += room.eq((verdicts.level + in_flight + 1 < verdicts.depth)
                            & (commands.level + in_flight + 1 < commands.depth)
                            & (decisions.level + in_flight + 1 < decisions.depth))

        # Stage -1: the input queue, carrying the stream row and the flags stage 0 needs,
        # so taking a segment is a short function of flip-flops.
        association_bits = (self._associations - 1).bit_length()
        stream_id_bits = (self._stream_ids - 1).bit_length()
        arriving = self.segment.payload
        inbound = m.submodules.inbound = Queue(stage_layout, lookahead=True)
        host_pending = self.region_write.valid | self.stream_write.valid
        m.d.comb += [
            inbound.sink.valid.eq(self.segment.valid & ~host_pending),
            self.segment.ready.eq(inbound.sink.ready & ~host_pending),
            inbound.sink.payload.valid.eq(1),
            inbound.sink.payload.info.eq(arriving),
            inbound.sink.payload.index.eq(
                arriving.association[:association_bits] * self._stream_ids + arriving.stream_id[:stream_id_bits]
                if stream_id_bits else arriving.association[:association_bits]),
            inbound.sink.payload.known.eq((arriving.association < self._associations)
                                          & (arriving.stream_id < self._stream_ids)),
            inbound.sink.payload.qn_ok.eq(arriving.qn < self._queues),
        ]

        # Stage 0: take a segment unless its stream is in stages 1-2. While a host write
        # is pending no segment enters the input queue; the queue drains, then the write
        # happens (the tables hold it while any segment is queued or in flight).
        # The hazard (the head's stream in stage 1 or 2) is a flip-flop, computed a cycle early
        # for whatever the head will be, so `take` (the input queue's wide enable) is one LUT.
        info = inbound.source.payload.info
        index = inbound.source.payload.index
        hazard = Signal()
        take = Signal()
        m.d.comb += [
            take.eq(inbound.source.valid & room & ~hazard),
            inbound.source.ready.eq(take),
        ]
        following = inbound.following.index
        head_next_is_following = ~inbound.source.valid | take
        # Next cycle: stage 1 holds the head if taken (else a bubble), stage 2 holds stage 1.
        m.d.sync += hazard.eq(Mux(head_next_is_following,
                                  (take & (following == index)) | (s1.valid & (following == s1.index)),
                                  s1.valid & (index == s1.index)))
        # `hold` is registered: it is high on any cycle after one where a segment was queued,
        # arriving or in stages 1-3, which covers every cycle a lookup or a commit write
        # (stage 4) can happen, and keeps the pipeline's state off the tables' write ports.
        hold = Signal()
        m.d.sync += hold.eq(inbound.level.any() | (inbound.sink.valid & inbound.sink.ready)
                            | s1.valid | s2.valid | s3.valid)
        m.d.comb += [regions.hold.eq(hold), streams.hold.eq(hold)]

        m.d.comb += [
            regions.en.eq(1),
            regions.lookup.stag.eq(info.stag),
            regions.lookup.to.eq(info.to),
            regions.lookup.length.eq(info.payload_length),
            regions.lookup.association.eq(info.association),
            regions.lookup.stream_id.eq(info.stream_id),
            regions.lookup.local_write.eq(info.opcode == _OPCODE_READ_RESPONSE),
            streams.en.eq(1),
            streams.index.eq(index),
            window.index.eq(index),
            window.ssn.eq(info.ddp_ssn),
            buffers.en.eq(1),
            buffers.lookup.stream.eq(index),
            buffers.lookup.qn.eq(info.qn),
            buffers.lookup.msn.eq(info.msn),
            buffers.lookup.mo.eq(info.mo),
            buffers.lookup.length.eq(info.payload_length),
            buffers.lookup.last.eq(info.last),
            window.peek_index.eq(self.stream_write.payload.index),
        ]
        if reads:   # a Read Request's Data Source (RFC 5040 4.4, 5.2)
            m.d.comb += [
                regions.lookup.stag.eq(Mux(info.read_request, info.source_stag, info.stag)),
                regions.lookup.to.eq(Mux(info.read_request, info.source_to, info.to)),
                regions.lookup.length.eq(Mux(info.read_request, info.read_size, info.payload_length)),
                regions.lookup.remote_read.eq(info.read_request),
            ]

        # Stages 1-3 follow the tables' own pipelines; the stream row is read on stage 1.
        stream_valid, stream_pd, stream_error = (Signal(), Signal(self._pd_bits), Signal())
        no_stream_3, dropped_3, zero_3 = Signal(), Signal(), Signal()
        message_length = Signal(33)
        m.d.sync += [
            s1.eq(inbound.source.payload), s1.valid.eq(take),
            s2.eq(s1), s3.eq(s2),
            stream_valid.eq(streams.entry.valid), stream_pd.eq(streams.entry.pd),
            stream_error.eq(streams.error),
            # Stage 3's flags, precomputed so the decision is a short chain of flip-flops.
            no_stream_3.eq(~s2.known | ~stream_valid), dropped_3.eq(stream_error),
            zero_3.eq(s2.info.payload_length == 0),
            message_length.eq(s2.info.mo + s2.info.payload_length),
        ]
        if reads:   # a Read Request's size in place of the payload (RFC 5040 4.4)
            m.d.sync += [
                zero_3.eq(Mux(s2.info.read_request, s2.info.read_size == 0, s2.info.payload_length == 0)),
                message_length.eq(Mux(s2.info.read_request, s2.info.read_size, s2.info.mo + s2.info.payload_length)),
            ]

        m.d.comb += regions.stream_pd.eq(stream_pd)  # on stage 2, beside the region's own PD

        # Stage 3: commit.
        seg = s3.info
        region = regions.result
        status = Signal(enum_shape(SegmentStatus))
        error = Signal(struct_layout(ERROR_NUMBER))
        address = Signal(self._address_bits)
        # A Read Request for the responder; without it, the expressions below are exactly as before.
        read = seg.read_request if reads else None
        checks_region = (seg.tagged | read) if reads else seg.tagged
        not_read = (lambda value: value & ~read) if reads else (lambda value: value)
        m.d.comb += address.eq(Mux(checks_region, region.address, buffers.result.address))
        with m.If(no_stream_3):
            m.d.comb += status.eq(SegmentStatus.NO_STREAM)
        with m.Elif(dropped_3):
            m.d.comb += status.eq(SegmentStatus.DROPPED)
        with m.Elif(window.duplicate):
            m.d.comb += status.eq(SegmentStatus.DUPLICATE)
        with m.Elif(window.beyond):
            m.d.comb += status.eq(SegmentStatus.INVALID_SSN)
        with m.Elif(seg.error.valid):
            m.d.comb += [status.eq(SegmentStatus.ERROR), error.eq(seg.error)]
        if reads:
            with m.Elif(read):   # RFC 5040 7.2: the Remote Protection Errors of the Data Source
                m.d.comb += status.eq(SegmentStatus.ERROR)
                with m.If(zero_3):
                    m.d.comb += status.eq(SegmentStatus.ACCEPTED)  # RFC 5041 5.2: not checked
                with m.Elif(region.invalid):
                    m.d.comb += _report(error, _LAYER_RDMAP, _REMOTE_PROTECTION, 0x00)
                with m.Elif(region.pd_mismatch | region.stream_mismatch):
                    m.d.comb += _report(error, _LAYER_RDMAP, _REMOTE_PROTECTION, 0x03)
                with m.Elif(region.access_denied):
                    m.d.comb += _report(error, _LAYER_RDMAP, _REMOTE_PROTECTION, 0x02)
                with m.Elif(region.below_base | region.past_end):
                    m.d.comb += _report(error, _LAYER_RDMAP, _REMOTE_PROTECTION, 0x01)
                with m.Elif(region.wrap):
                    m.d.comb += _report(error, _LAYER_RDMAP, _REMOTE_PROTECTION, 0x04)
                with m.Else():
                    m.d.comb += status.eq(SegmentStatus.ACCEPTED)
        with m.Elif(seg.tagged):
            m.d.comb += status.eq(SegmentStatus.ERROR)
            with m.If(zero_3):
                m.d.comb += status.eq(SegmentStatus.ACCEPTED)  # RFC 5041 5.2: not checked
            with m.Elif(region.invalid):
                m.d.comb += _report(error, _LAYER_DDP, _TAGGED_BUFFER, 0x00)
            with m.Elif(region.pd_mismatch | region.stream_mismatch):
                m.d.comb += _report(error, _LAYER_DDP, _TAGGED_BUFFER, 0x02)
            with m.Elif(region.access_denied):
                m.d.comb += _report(error, _LAYER_RDMAP, _REMOTE_PROTECTION, 0x02)
            with m.Elif(region.below_base | region.past_end):
                m.d.comb += _report(error, _LAYER_DDP, _TAGGED_BUFFER, 0x01)
            with m.Elif(region.wrap):
                m.d.comb += _report(error, _LAYER_DDP, _TAGGED_BUFFER, 0x03)
            with m.Else():
                m.d.comb += status.eq(SegmentStatus.ACCEPTED)
        with m.Else():
            m.d.comb += status.eq(SegmentStatus.ERROR)
            with m.If(~s3.qn_ok):
                m.d.comb += _report(error, _LAYER_DDP, _UNTAGGED_BUFFER, 0x01)
            with m.Elif(buffers.result.fault != UntaggedFault.NONE):
                m.d.comb += _report(error, _LAYER_DDP, _UNTAGGED_BUFFER, buffers.result.fault.as_value())
            with m.Else():
                m.d.comb += status.eq(SegmentStatus.ACCEPTED)

        # The table writes of the commit (error bit, DDP-SSN seen) from flat expressions of
        # flip-flops, not through the status priority chain above.
        commit = s3.valid
        accepted = Signal()
        refused = no_stream_3 | dropped_3 | window.duplicate
        untagged_fault = ~s3.qn_ok | (buffers.result.fault != UntaggedFault.NONE)
        tagged_fault = ~zero_3 & region.fault
        has_payload = ~zero_3
        m.d.comb += accepted.eq(~refused & ~window.beyond & ~seg.error.valid
                                & ~Mux(checks_region, tagged_fault, untagged_fault))
        tag = Signal(16)
        with m.If(commit):
            m.d.sync += tag.eq(tag + 1)
        m.d.comb += [
            streams.set_error.eq(commit & ~refused & (window.beyond | seg.error.valid
                                                      | Mux(checks_region, tagged_fault, untagged_fault))),
            streams.set_error_index.eq(s3.index),
            window.commit.eq(commit & ~refused & ~window.beyond),
            # The message's last segment: its buffer counts as consumed once the window passes it.
            buffers.complete_en.eq(commit & accepted & ~checks_region & seg.last),
            buffers.complete.stream.eq(s3.index),
            buffers.complete.qn.eq(seg.qn),
            buffers.complete.msn.eq(seg.msn),
            buffers.complete.ssn.eq(seg.ddp_ssn),
        ]

        verdict = Signal(verdict_layout(self._address_bits))
        m.d.comb += [
            verdict.tag.eq(tag),
            verdict.association.eq(seg.association),
            verdict.stream_id.eq(seg.stream_id),
            verdict.tsn.eq(seg.tsn),
            verdict.ddp_ssn.eq(seg.ddp_ssn),
            verdict.tagged.eq(seg.tagged),
            verdict.last.eq(seg.last),
            verdict.opcode.eq(seg.opcode),
            verdict.stag.eq(seg.stag),
            verdict.to.eq(seg.to),
            verdict.qn.eq(seg.qn),
            verdict.msn.eq(seg.msn),
            verdict.mo.eq(seg.mo),
            verdict.invalidate_stag.eq(seg.invalidate_stag),
            verdict.payload_length.eq(seg.payload_length),
            verdict.host_address.eq(address),  # zeroed after stage 4 unless placed
            verdict.status.eq(status),
            verdict.error.eq(error),
            verdict.message_length.eq(message_length),  # zeroed after stage 4 unless a message completed
            verdict.sequence.in_order.eq(window.in_order),
            verdict.sequence.releases.eq(window.releases),
        ]
        placed_4, completed_4 = Signal(), Signal()
        m.d.sync += [
            verdict_4.eq(verdict), verdict_valid_4.eq(commit),
            placed_4.eq(not_read(accepted & has_payload)), completed_4.eq(accepted & ~seg.tagged & seg.last),
        ]
        verdict_out = Signal.like(verdict_4)
        m.d.comb += [
            verdict_out.eq(verdict_4),
            verdict_out.host_address.eq(Mux(placed_4, verdict_4.host_address, 0)),
            verdict_out.message_length.eq(Mux(completed_4, verdict_4.message_length, 0)),
            verdict_out.placed.eq(placed_4),
        ]
        if reads:   # an accepted Read Request: where its Data Source is (size > 0), and its size
            translated_4 = Signal()
            m.d.sync += translated_4.eq(accepted & has_payload & read)
            m.d.comb += verdict_out.host_address.eq(Mux(placed_4 | translated_4, verdict_4.host_address, 0))
        command = Signal(dma_command_layout(self._address_bits))
        m.d.comb += [
            command.address.eq(address),
            command.length.eq(seg.payload_length),
            command.tag.eq(tag),
        ]
        m.d.sync += [
            command_4.eq(command),
            command_valid_4.eq(not_read(commit & accepted & has_payload)),
            decision_4.eq(accepted),
            # A packet follows only if the validator passed the header (its payload is dropped there,
            # and a Read Request's always).
            decision_valid_4.eq(not_read(commit & has_payload & ~seg.error.valid)),
        ]
        m.d.comb += [
            verdicts.sink.payload.eq(verdict_out), verdicts.sink.valid.eq(verdict_valid_4),
            commands.sink.payload.eq(command_4), commands.sink.valid.eq(command_valid_4),
            decisions.sink.payload.eq(decision_4), decisions.sink.valid.eq(decision_valid_4),
        ]

        # Outputs.
        wiring.connect(m, verdicts.source, wiring.flipped(self.verdict))
        wiring.connect(m, commands.source, wiring.flipped(self.cmd))

        # Payload: forward the packet of an accepted segment, consume a refused one.
        # The forwarded beats leave through a Queue, like every output of the block.
        payloads = m.submodules.payloads = Queue(self.payload_out.payload.shape())
        wiring.connect(m, payloads.source, wiring.flipped(self.payload_out))
        forward = decisions.source.payload
        beat = self.payload_in
        m.d.comb += [
            payloads.sink.payload.eq(beat.payload),
            payloads.sink.valid.eq(beat.valid & decisions.source.valid & forward),
            beat.ready.eq(decisions.source.valid & (~forward | payloads.sink.ready)),
            decisions.source.ready.eq(beat.valid & beat.ready & beat.payload.last),
        ]
        return m

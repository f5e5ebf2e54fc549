"""Decode and check the DDP and RDMAP headers of each DDP segment; pass its payload on at lane 0.

Header fields (all big-endian):

* DDP Control Field, byte 0 (RFC 5041 4.1): T (0x80), L (0x40), DV (0x03);
* RDMAP Control Field, byte 1, the first RsvdULP byte (RFC 5040 4.1): RV
  (bits 7-6), Opcode (bits 3-0);
* tagged, 14 bytes (RFC 5041 4.2): STag (bytes 2-5), TO (bytes 6-13);
* untagged, 18 bytes (RFC 5041 4.3): Invalidate STag (bytes 2-5, the rest of
  RsvdULP, RFC 5040 4.1), QN (6-9), MSN (10-13), MO (14-17).

Header-level checks, first failure wins, in the golden model's order
(``model/ddp/sink.py``, then ``RdmapEndpoint._check_rdmap_header``):

1. segment shorter than its header: DDP local catastrophic (1, 0x0/0x00);
2. DV != 1: tagged (1, 0x1/0x04), untagged (1, 0x2/0x06) (RFC 5041 4.1, 7.2);
3. untagged QN not 0, 1 or 2: (1, 0x2/0x01) (RFC 5041 7.1 item 1, RFC 5040 4.2);
4. RV != 1: RDMAP (0, 0x2/0x05) (RFC 5040 4.1);
5. opcode undefined or in the wrong buffer model or queue: RDMAP (0, 0x2/0x06)
   (RFC 5040 4.2: Write 0 and Read Response 2 tagged; Send variants 3-6 on
   QN 0, Read Request 1 on QN 1, Terminate 7 on QN 2). Whether a Read
   Response matches an outstanding Read is a later stage's check.

Outputs: one ``segment`` record per segment (decoded fields of the model the
T bit selects, the others zero; bytes beyond a short segment read as zero),
and the payload bytes on ``payload``. ``payload_length`` is the wire payload
length (segment length minus 14 or 18, 0 if shorter); payload beats follow
only when ``error.valid`` is 0 and ``payload_length`` > 0.

Ordering: a segment's record is written to the ``segment`` FIFO in the cycle
its header is complete, before any of its payload can leave, so it is valid
no later than its first payload beat. A consumer should take ``segment``
first; it may also take payload first, as long as it takes the records of
segments whose payload it has finished.

Pipeline: capture (header bytes gathered by beat index into a queue, beats
into a FIFO) -> decode and check (one registered record) -> :class:`~hdl.stream.realign.Realign`
with drop 14 or 18, or discard. Throughput: one beat per cycle; a segment
costs one cycle more when its realigned payload needs one more beat than the
segment (payload tail), and a 0-byte segment (``seg_meta.length`` = 0, no
beats) one cycle. Both inputs enter through a :class:`~hdl.stream.queue.Queue`
(one edge; ``seg_meta`` goes into two: its flags for the capture, and its
fields with their length checks precomputed for the decode). Latency from the
beat completing the header, as it leaves the input queue, to the record on
``segment``: 4 cycles (the gathered header passes a queue); to the first
payload beat: about 7 cycles (the
payload leaves through an output :class:`~hdl.stream.queue.Queue`).
"""

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.rx.layouts import segment_info_layout, segment_meta_layout
from hdl.stream.bits import big_endian, check_width
from hdl.stream.packet import packet_layout, packet_signature
from hdl.stream.queue import Queue
from hdl.stream.realign import Realign

__all__ = ["DdpHeaderValidator", "TAGGED_HEADER_BYTES", "UNTAGGED_HEADER_BYTES"]

TAGGED_HEADER_BYTES = 14     # RFC 5041 4.2
UNTAGGED_HEADER_BYTES = 18   # RFC 5041 4.3
READ_REQUEST_BYTES = 28      # RFC 5040 4.4: the RDMA Read Request header, the message's whole payload
_DDP_VERSION = 1             # RFC 5041 4.1
_RDMAP_VERSION = 1           # RFC 5040 4.1
_QUEUES = 3                  # RFC 5040 4.2: QN 0 Send, 1 Read Request, 2 Terminate
_RECORD_DEPTH = 4            # records and descriptors: a header taken on room of 2 (registered)
_METAS_DEPTH = 8             # segment metadata waiting for its header's decode, with slack

# (layer, etype, code): RFC 5041 7.2 for DDP (layer 1), RFC 5040 7.2 for RDMAP (layer 0).
LOCAL_CATASTROPHIC = (1, 0x0, 0x00)
TAGGED_INVALID_VERSION = (1, 0x1, 0x04)
UNTAGGED_INVALID_VERSION = (1, 0x2, 0x06)
INVALID_QN = (1, 0x2, 0x01)
INVALID_RDMAP_VERSION = (0, 0x2, 0x05)
UNEXPECTED_OPCODE = (0, 0x2, 0x06)
MALFORMED_READ_REQUEST = (0, 0x2, 0xFF)   # RFC 5040 7.2 Remote Operation Error, unspecified
_QN_READ_REQUEST, _OPCODE_READ_REQUEST = 1, 1   # RFC 5040 4.2


class DdpHeaderValidator(wiring.Component):
    """DDP/RDMAP header decode and header-level checks; see the module docstring.

    Parameters
    ----------
    width_bytes : int
        Datapath width ``W`` in bytes: 8, 16, 32 or 64.

    Ports
    -----
    seg : ``In(packet_signature(W))``
        DDP segments, lane 0 = DDP control byte (from the ChunkParser).
    seg_meta : ``In(stream.Signature(segment_meta_layout()))``
        One per segment, valid from its first beat, taken with its last; a
        segment with ``length`` 0 has no beats.
    segment : ``Out(stream.Signature(segment_info_layout()))``
        One per segment: decoded header and header-level error.
    payload : ``Out(packet_signature(W))``
        Payload of the segments without error, lane 0 = first payload byte.

    With ``read_requests`` (the receive engine's read responder) the capture gathers the 28 bytes
    after an untagged header too, and an RDMA Read Request (untagged, QN 1, opcode 1, RFC 5040
    4.4) is decoded whole into its record: SinkSTag and SinkTO in ``stag`` and ``to``, the Data
    Source in ``source_stag``, ``source_to``, ``read_size``, ``read_request`` set. Its payload never
    leaves on ``payload``. One more header-level check, after the opcode's: a Read Request must be
    one whole 28-byte message (L = 1, MO = 0), else RDMAP (0, 0x2/0xFF) (as the model's responder).
    The header record then waits for the beat holding byte 46 (or the segment's end), up to three
    beats later than without (W = 8), and the beat FIFO is as many beats deeper, so a segment's
    payload still leaves one beat per cycle behind its record.
    """

    def __init__(self, width_bytes: int, *, fifo_depth: int = 8, block_ram: bool = True,
                 read_requests: bool = False):
        check_width(width_bytes, (8, 16, 32, 64))
        self._width, self._block_ram = width_bytes, block_ram
        self._fifo_depth = fifo_depth
        self._read_requests = read_requests
        super().__init__({
            "seg": In(packet_signature(width_bytes)),
            "seg_meta": In(stream.Signature(segment_meta_layout())),
            "segment": Out(stream.Signature(segment_info_layout(read_requests))),
            "payload": Out(packet_signature(width_bytes)),
        })

    def elaborate(self, platform):
        m = Module()
        width = self._width
        reads = self._read_requests
        # The bytes gathered from each segment's start: its header (and a Read Request's body).
        capture = UNTAGGED_HEADER_BYTES + (READ_REQUEST_BYTES if reads else 0)
        # Input queues (registered ready towards the chunk parser); the metadata carries the
        # flags the capture stage needs, computed before the queue: empty, and which header
        # bytes the segment has.
        seg = m.submodules.seg_in = Queue(packet_layout(width))
        wiring.connect(m, wiring.flipped(self.seg), seg.sink)
        seg = seg.source
        # Each segment's metadata goes two ways: the capture needs only its flags (empty, which
        # header bytes it has), the decode its fields with the length checks of both header
        # sizes (so decoding needs no comparator or adder). The wide part waits in a queue of
        # its own for its gathered header, taken on the decode's registered room, so the
        # capture's late take enables only the flags.
        seg_meta = m.submodules.meta_in = Queue(data.StructLayout({
            "empty": 1, "present": capture}))
        metas = m.submodules.metas = Queue(data.StructLayout({
            "meta": segment_meta_layout(), "empty": 1, "short_tagged": 1, "short_untagged": 1,
            "payload_tagged": 16, "payload_untagged": 16, **({"read_sized": 1} if reads else {})}), _METAS_DEPTH)
        arriving = self.seg_meta.payload
        m.d.comb += [
            self.seg_meta.ready.eq(seg_meta.sink.ready & metas.sink.ready),
            seg_meta.sink.valid.eq(self.seg_meta.valid & metas.sink.ready),
            metas.sink.valid.eq(self.seg_meta.valid & seg_meta.sink.ready),
            seg_meta.sink.payload.empty.eq(arriving.length == 0),
            seg_meta.sink.payload.present.eq(Cat(arriving.length > i for i in range(capture))),
            metas.sink.payload.meta.eq(arriving),
            metas.sink.payload.empty.eq(arriving.length == 0),
            metas.sink.payload.short_tagged.eq(arriving.length < TAGGED_HEADER_BYTES),
            metas.sink.payload.short_untagged.eq(arriving.length < UNTAGGED_HEADER_BYTES),
            metas.sink.payload.payload_tagged.eq(arriving.length - TAGGED_HEADER_BYTES),
            metas.sink.payload.payload_untagged.eq(arriving.length - UNTAGGED_HEADER_BYTES),
        ]
        if reads:
            m.d.comb += metas.sink.payload.read_sized.eq(arriving.length == UNTAGGED_HEADER_BYTES + READ_REQUEST_BYTES)
        seg_meta = seg_meta.source
        header_beat = (capture - 1) // width   # beat holding the last header byte

        # A segment's beats wait here for its header's record (its descriptor): with a Read Request's
        # bytes gathered too, that many beats longer, so the FIFO is that much deeper.
        later = header_beat - (UNTAGGED_HEADER_BYTES - 1) // width
        beats = m.submodules.beats = Queue(packet_layout(width), self._fifo_depth + later)
        desc_layout = data.StructLayout({"discard": unsigned(1), "drop": range(UNTAGGED_HEADER_BYTES + 1)})
        descs = m.submodules.descs = Queue(desc_layout, _RECORD_DEPTH)
        records = m.submodules.records = Queue(segment_info_layout(reads), _RECORD_DEPTH, block_ram=self._block_ram)
        wiring.connect(m, records.source, wiring.flipped(self.segment))

        # ---- capture -------------------------------------------------------
        index = Signal(range(header_beat + 2))
        captured = [Signal(8, name=f"captured_{i}") for i in range(capture)]
        done = Signal()       # this segment's header record is out
        # The gathered header leaves through a queue: its registered ready, not the record
        # stage's, steers the capture.
        gathered = m.submodules.gathered = Queue(unsigned(8 * capture))

        merged = []
        for i in range(capture):
            lane = seg.payload.data.word_select(i % width, 8)
            byte = Mux(index == i // width, lane, captured[i])
            merged.append(Mux(seg_meta.payload.present[i], byte, 0))

        # Flags kept beside index and done: at_start = (index == 0) & ~done,
        # at_header = (index == header_beat) & ~done; so the ready logic reads flip-flops.
        at_start = Signal(init=1)
        at_header = Signal(init=int(header_beat == 0))
        rec_free = gathered.sink.ready
        empty = seg_meta.valid & seg_meta.payload.empty & at_start
        complete = at_header | (~done & seg.payload.last)
        # A beat that may complete the header waits for the record's room: every beat before the
        # header is out, judged from flip-flops (not from the beat's `last`, late and far away).
        m.d.comb += seg.ready.eq(seg_meta.valid & ~empty & beats.sink.ready & (rec_free | (done & ~at_header)))
        accept = seg.valid & seg.ready
        m.d.comb += [
            beats.sink.valid.eq(accept),
            beats.sink.payload.eq(seg.payload),
            seg_meta.ready.eq((accept & seg.payload.last) | (empty & rec_free)),
            gathered.sink.valid.eq((accept & complete) | empty),
            gathered.sink.payload.eq(Mux(empty, 0, Cat(merged))),
        ]
        with m.If(accept):
            m.d.sync += [byte.eq(value) for byte, value in zip(captured, merged)]
            m.d.sync += [
                index.eq(Mux(seg.payload.last, 0, Mux(index == header_beat + 1, index, index + 1))),
                done.eq(~seg.payload.last & (done | complete)),
                at_start.eq(seg.payload.last),
                at_header.eq(Mux(seg.payload.last, header_beat == 0,
                                 ~done & ~at_header & (index + 1 == header_beat))),
            ]
        # A gathered header and its segment's metadata are taken together (the metadata entered
        # its queue before the capture could finish the header).
        rec_valid = gathered.source.valid & metas.source.valid
        rec_ready = Signal()
        m.d.comb += [gathered.source.ready.eq(rec_ready & metas.source.valid),
                     metas.source.ready.eq(rec_ready & gathered.source.valid)]
        rec_bytes = [gathered.source.payload[8 * i:8 * i + 8] for i in range(capture)]
        rec_meta = metas.source.payload.meta

        # ---- decode and check ----------------------------------------------
        b = rec_bytes
        tagged, last, dv = b[0][7], b[0][6], b[0][0:2]
        rv, opcode = b[1][6:8], b[1][0:4]
        stag_or_invalidate = big_endian(b[2:6])
        qn, msn, mo = big_endian(b[6:10]), big_endian(b[10:14]), big_endian(b[14:18])
        header_length = Mux(tagged, TAGGED_HEADER_BYTES, UNTAGGED_HEADER_BYTES)
        checked = metas.source.payload
        short = Mux(tagged, checked.short_tagged, checked.short_untagged)
        send = (opcode >= 3) & (opcode <= 6)
        opcode_ok = Mux(tagged, (opcode == 0) | (opcode == 2),
                        (send & (qn == 0)) | ((opcode == 1) & (qn == 1)) | ((opcode == 7) & (qn == 2)))

        error = Signal(3 * 8)   # layer, etype, code as one value, for a priority chain
        error_valid = Signal()
        checks = [
            (short, LOCAL_CATASTROPHIC),
            (dv != _DDP_VERSION, None),
            (~tagged & (qn >= _QUEUES), INVALID_QN),
            (rv != _RDMAP_VERSION, INVALID_RDMAP_VERSION),
            (~opcode_ok, UNEXPECTED_OPCODE),
        ]
        if reads:
            # RFC 5040 4.4: the request is one untagged message of exactly its 28-byte header.
            read_request = ~tagged & (qn == _QN_READ_REQUEST) & (opcode == _OPCODE_READ_REQUEST)
            whole = last & (mo == 0) & checked.read_sized
            checks.append((read_request & ~whole, MALFORMED_READ_REQUEST))
        pack = lambda number: number[0] << 16 | number[1] << 8 | number[2]
        m.d.comb += error_valid.eq(Cat(condition for condition, _ in checks).any())
        with m.If(short):
            m.d.comb += error.eq(pack(LOCAL_CATASTROPHIC))
        with m.Elif(dv != _DDP_VERSION):
            m.d.comb += error.eq(Mux(tagged, pack(TAGGED_INVALID_VERSION), pack(UNTAGGED_INVALID_VERSION)))
        for condition, number in checks[2:]:
            with m.Elif(condition):
                m.d.comb += error.eq(pack(number))

        # The decoded record and its descriptor are registered on every cycle (no enable), with
        # `valid` saying whether one was taken; a header is taken while both queues have room for
        # it and the one in the register (flip-flops, from their levels a cycle ago).
        info = Signal(segment_info_layout(reads))
        desc = Signal(desc_layout)
        staged_valid, staged_has_beats = Signal(), Signal()
        room = Signal()
        m.d.sync += [
            room.eq((records.level < _RECORD_DEPTH - 2) & (descs.level < _RECORD_DEPTH - 2)),
            staged_valid.eq(rec_valid & rec_ready), staged_has_beats.eq(~checked.empty),
            records.sink.payload.eq(info), descs.sink.payload.eq(desc),
        ]
        m.d.comb += [
            rec_ready.eq(room),
            records.sink.valid.eq(staged_valid),
            descs.sink.valid.eq(staged_valid & staged_has_beats),
            info.association.eq(rec_meta.association),
            info.tsn.eq(rec_meta.tsn),
            info.stream_id.eq(rec_meta.stream_id),
            info.ddp_ssn.eq(rec_meta.ddp_ssn),
            info.tagged.eq(tagged),
            info.last.eq(last),
            info.dv.eq(dv),
            info.rv.eq(rv),
            info.opcode.eq(opcode),
            info.stag.eq(Mux(tagged, stag_or_invalidate, 0)),
            info.to.eq(Mux(tagged, big_endian(b[6:14]), 0)),
            info.qn.eq(Mux(tagged, 0, qn)),
            info.msn.eq(Mux(tagged, 0, msn)),
            info.mo.eq(Mux(tagged, 0, mo)),
            info.invalidate_stag.eq(Mux(tagged, 0, stag_or_invalidate)),
            info.payload_length.eq(Mux(short, 0, Mux(tagged, checked.payload_tagged, checked.payload_untagged))),
            info.error.valid.eq(error_valid),
            info.error.layer.eq(error[16:20]),
            info.error.etype.eq(error[8:12]),
            info.error.code.eq(error[0:8]),
            desc.discard.eq(error_valid),
            desc.drop.eq(header_length),
        ]
        if reads:
            # The request's fields (RFC 5040 4.4), after the untagged header; its payload goes nowhere.
            request = rec_bytes[UNTAGGED_HEADER_BYTES:]
            m.d.comb += [
                info.read_request.eq(read_request),
                info.stag.eq(Mux(tagged, stag_or_invalidate, Mux(read_request, big_endian(request[0:4]), 0))),
                info.to.eq(Mux(tagged, big_endian(b[6:14]), Mux(read_request, big_endian(request[4:12]), 0))),
                info.read_size.eq(big_endian(request[12:16])),
                info.source_stag.eq(big_endian(request[16:20])),
                info.source_to.eq(big_endian(request[20:28])),
                desc.discard.eq(error_valid | read_request),
            ]

        # ---- payload -------------------------------------------------------
        align = m.submodules.align = Realign(width, UNTAGGED_HEADER_BYTES)
        payloads = m.submodules.payloads = Queue(packet_layout(width))
        wiring.connect(m, align.source, payloads.sink)
        wiring.connect(m, payloads.source, wiring.flipped(self.payload))
        head = descs.source.payload
        head_beat = beats.source.payload
        both = descs.source.valid & beats.source.valid
        target_ready = Mux(head.discard, 1, align.sink.ready)
        m.d.comb += [
            align.drop.valid.eq(descs.source.valid & ~head.discard),
            align.drop.payload.eq(head.drop),
            align.sink.valid.eq(both & ~head.discard),
            align.sink.payload.eq(head_beat),
            beats.source.ready.eq(descs.source.valid & target_ready),
            descs.source.ready.eq(both & target_ready & head_beat.last),
        ]
        return m

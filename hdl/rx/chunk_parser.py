"""Split checked SCTP packets into their chunks: DDP segments to the DDP path, the rest to the host.

A packet (RFC 4960 3) is a 12-byte common header and chunks, each a type (8),
flags (8) and length (16, header included, padding excluded) and padded to a
multiple of 4 bytes (RFC 4960 3.2). For each chunk:

* a DATA chunk (type 0) with PPID 16 on an association that negotiated DDP
  (RFC 5043 5.1, 5.2.2), U=1 (RFC 5043 10) and B=E=1 (RFC 5043 9), goes to
  ``seg``: its DDP segment, i.e. the bytes after the 16-byte DATA header and
  the 2-byte DDP-SSN (``length - 18`` bytes; a 0-byte segment has a
  ``seg_meta`` transfer and no ``seg`` beats), with ``seg_meta``;
* any other chunk (PPID 17 session control, other PPIDs, DATA of a non-DDP
  association, every control chunk) goes to the host on ``exc``, intact from
  its type byte through its length (padding excluded), with ``exc_meta``;
* every DATA chunk whose 16-byte header lies whole in the packet also
  yields an ``acks`` record (:func:`abi.rx.ack_layout`: association, TSN,
  disposition, user data length, whether it is the packet's last chunk) for
  the SACKs (RFC 4960 6.2), in chunk order, written with the chunk's other
  records;
* errors go to ``errors`` (:class:`ChunkError`); the chunk is not forwarded:
  a DDP Segment Chunk with U=0 or without both B and E; a DATA chunk of a DDP
  association shorter than 16 bytes, or a PPID 16 one shorter than 18 bytes
  (``TOO_SHORT``, not placed, the walk goes on); a chunk length below 4
  (``TOO_SHORT``) or a chunk, or chunk header, running past the end of the
  packet (``PAST_END``): nothing can be trusted after it, so the rest of the
  packet is dropped. U, B and E are checked on PPID 16 only: session control
  goes to the host, which owns it (RFC 5043 9 allows SCTP fragmentation where
  the alternative is IP fragmentation).

Pipeline (each stage registered or a FIFO; nothing waits on a whole chunk):

1. *beat* stage: a register takes the beat with the bytes left in the
   packet and, for each 4-byte word ``k`` where a chunk could start, the sums
   of a chunk starting there (its end, its padded end); a register slice
   (:class:`~hdl.stream.queue.Queue`) then takes the beat with that chunk's
   length checks (fits in this beat, runs past the packet, next chunk in
   this beat, ...), each one compare of flip-flops, so the walker's loop is a
   ``W/4``-way mux and no adder;
2. *walker*: emits one *piece* per (beat, chunk) overlap: a beat holding the
   end of one chunk and the start of the next is emitted twice;
3. *header* stages: *gather* merges the chunk's first 20 bytes from its
   pieces into a register; *classify* registers the header's compares
   (type, PPID, length bounds) beside its fields; *decide* reads those flags,
   writes ``seg_meta``/``exc_meta``/``errors`` and a routing descriptor into a
   register, written to their FIFOs on the next cycle; pieces wait in a FIFO
   meanwhile;
4. *router*: sends each chunk's pieces to one of two :class:`~hdl.stream.realign.Realign`
   (drop ``offset + 18`` for ``seg``, ``offset`` for ``exc``) or discards them.

Throughput: one piece per cycle. A chunk costs one cycle more than the beats
it covers when it starts in a beat that also holds (the end of) the previous
chunk, and the realigner adds one cycle for a chunk whose realigned tail
overflows its last beat. So at W = 8 a stream of large DDP segments runs at
one beat per cycle except for at most 2 cycles per chunk; small chunks cost
one cycle each at any W (up to W/4 of them share a beat at wide W). A packet
costs nothing beyond its beats (the common-header beat at W = 8 is walked
like any other). Latency from a beat to its realigned output: about 11 cycles
(beat stage's register and slice, walker, gather, classify, decide, piece queue,
router/realigner output register, output :class:`~hdl.stream.queue.Queue`). Every output leaves through a
Queue, so no ready/valid path crosses the block's ports.

Contract: ``pkt_meta.length`` is the packet's byte count; ``pkt_meta`` must be
valid from the packet's first beat and is taken with its last beat. If the
beats end before ``length`` says, the chunk in progress is cut at the last
beat; the parser then starts afresh with the next packet.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from abi.rx import ASSOCIATION_BITS, AckDisposition, ChunkError, ChunkException, ack_layout
from hdl.layout import enum_shape, struct_layout
from hdl.rx.layouts import packet_meta_layout, segment_meta_layout
from hdl.stream.bits import big_endian, byte, check_width, thermometer
from hdl.stream.packet import packet_layout, packet_signature
from hdl.stream.queue import Queue
from hdl.stream.realign import Realign

__all__ = ["ChunkParser", "exception_meta_layout", "chunk_error_layout", "PPID_DDP_SEGMENT", "PPID_DDP_SESSION_CONTROL"]

PPID_DDP_SEGMENT = 16           # RFC 5043 5.2
PPID_DDP_SESSION_CONTROL = 17   # RFC 5043 5.2
_COMMON_HEADER = 12             # RFC 4960 3.1
_DATA_HEADER = 16               # RFC 4960 3.3.1
_SEGMENT_OFFSET = _DATA_HEADER + 2  # DDP-SSN, RFC 5043 5.2.2
_FLAG_I, _FLAG_U, _FLAG_B, _FLAG_E = 0x08, 0x04, 0x02, 0x01   # RFC 9260 3.3.1



def exception_meta_layout() -> data.StructLayout:
    """One per chunk on ``exc``: its association, why it is there, its length field."""
    return data.StructLayout({
        "association": unsigned(ASSOCIATION_BITS),
        "reason": enum_shape(ChunkException),
        "length": unsigned(16),
    })


def chunk_error_layout() -> data.StructLayout:
    """One per rejected chunk; ``tsn`` is 0 when the chunk is too short to carry one."""
    return data.StructLayout({
        "association": unsigned(ASSOCIATION_BITS),
        "tsn": unsigned(32),
        "kind": enum_shape(ChunkError),
    })


class _Dest(enum.IntEnum, shape=2):
    SEG = 0
    EXC = 1
    DISCARD = 2


class ChunkParser(wiring.Component):
    """Walks the chunks of each SCTP packet (RFC 4960 3.2); see the module docstring.

    Parameters
    ----------
    width_bytes : int
        Datapath width ``W`` in bytes: 8, 16, 32 or 64.

    Ports
    -----
    pkt : ``In(packet_signature(W))``
        Whole SCTP packets, lane 0 = first byte of the common header, CRC32c checked.
    pkt_meta : ``In(stream.Signature(packet_meta_layout()))``
        One per packet (``association``, ``ddp``, ``length`` are used).
    seg, seg_meta : ``Out(packet_signature(W))``, ``Out(stream.Signature(segment_meta_layout()))``
        DDP segments, lane 0 = DDP control byte; one ``seg_meta`` per segment
        (written when the chunk's header is parsed, before its bytes leave).
    exc, exc_meta : ``Out(packet_signature(W))``, ``Out(stream.Signature(exception_meta_layout()))``
        Chunks for the host, lane 0 = chunk type byte.
    errors : ``Out(stream.Signature(chunk_error_layout()))``
        One per rejected chunk, :class:`ChunkError` in ``kind``.
    acks : ``Out(stream.Signature(ack_layout()))``
        One per DATA chunk with a whole DATA header (RFC 4960 3.3.1, 6.2).
    """

    def __init__(self, width_bytes: int, *, fifo_depth: int = 8):
        check_width(width_bytes, (8, 16, 32, 64))
        self._width = width_bytes
        self._fifo_depth = fifo_depth
        super().__init__({
            "pkt": In(packet_signature(width_bytes)),
            "pkt_meta": In(stream.Signature(packet_meta_layout())),
            "seg": Out(packet_signature(width_bytes)),
            "seg_meta": Out(stream.Signature(segment_meta_layout())),
            "exc": Out(packet_signature(width_bytes)),
            "exc_meta": Out(stream.Signature(exception_meta_layout())),
            "errors": Out(stream.Signature(chunk_error_layout())),
            "acks": Out(stream.Signature(struct_layout(ack_layout()))),
        })

    def elaborate(self, platform):
        m = Module()
        width = self._width
        words = width // 4
        word_bits = (words - 1).bit_length()

        # ---- 1. beat stage -------------------------------------------------
        # Each beat enters a register slice (a Queue) with, per word k where a chunk could start,
        # its length checks; the walker takes it from there, so its late `take` reaches the
        # slice's output enable, not the ready of the frame receiver's queues.
        beat_layout = data.StructLayout({
            "beat": packet_layout(width),
            "association": ASSOCIATION_BITS,
            "ddp": 1,
            "entry_ok": 1,                    # a chunk may start at entry_word on entering the beat
            "entry_word": range(words),
            "rel_end": data.ArrayLayout(17, words),   # for a chunk starting at word k: 4k + length
            "avail": words,      # 4k < bytes left in the packet: a chunk starts here
            "hdr_past": words,   # its 4-byte header runs past the packet
            "short": words,      # length < 4
            "past": words,       # 4k + length > bytes left
            "fits": words,       # the chunk ends in this beat
            "done": words,       # no further chunk starts in this beat
            "final": words,      # 4k + padded length >= bytes left: the packet's last chunk (RFC 4960 3.2)
            "next_word": data.ArrayLayout(word_bits, words),
            # For a chunk starting at word k that runs past this beat, its bytes after the next
            # beat (rel_end - 2W): none (`end_small`), or fewer than 4 in the beat after
            # (`end_tail` low).
            "end_small": words,  # rel_end <= 2W
            "end_tail": words,   # rel_end > 2W - 4
            # The walker keeps the beat (does not take it) after a chunk that starts at word k,
            # fits and leaves room for another (`stay_word`); for the beat's entry word,
            # `entry_stay`.
            "stay_word": words,
            "entry_stay": 1,
        })
        beats = m.submodules.beats = Queue(beat_layout)
        arriving = beats.sink.payload

        # A register ahead of the slice takes the beat with the bytes left in the packet and, per word k,
        # the sums that only need the chunk length (its end, its padded end), so each check below is one
        # compare of flip-flops, not an adder into a comparator. It loads when empty or when the slice
        # takes its beat (the slice's ready is a flip-flop).
        pre_layout = data.StructLayout({
            "beat": packet_layout(width),
            "association": ASSOCIATION_BITS,
            "ddp": 1,
            "left": 16,                            # bytes left in the packet, this beat's included
            "entry_ok": 1,
            "entry_word": range(words),
            "length": data.ArrayLayout(16, words),   # the length of a chunk starting at word k
            "end": data.ArrayLayout(17, words),      # 4k + length
            "padded_end": data.ArrayLayout(18, words),   # 4k + length rounded up to 4 (RFC 4960 3.2)
        })
        pre = Signal(pre_layout, reset_less=True)   # read only while pre_valid, so after it was loaded
        pre_valid = Signal()
        pre_free = ~pre_valid | beats.sink.ready

        in_started = Signal()
        index_max = _COMMON_HEADER // width + 1
        in_index = Signal(range(index_max + 1))
        in_left = Signal(16)
        left_now = Mux(in_started, in_left, self.pkt_meta.payload.length)
        index_now = Mux(in_started, in_index, 0)

        m.d.comb += [
            self.pkt.ready.eq(self.pkt_meta.valid & pre_free),
            beats.sink.valid.eq(pre_valid),
        ]
        pkt_accept = self.pkt.valid & self.pkt.ready
        m.d.comb += self.pkt_meta.ready.eq(pkt_accept & self.pkt.payload.last)
        payload = self.pkt.payload
        with m.If(pkt_accept):
            m.d.sync += [
                in_started.eq(~payload.last),
                in_left.eq(Mux(left_now > width, left_now - width, 0)),
                in_index.eq(Mux(index_now == index_max, index_now, index_now + 1)),
            ]
        header_beat = _COMMON_HEADER // width
        with m.If(pre_free):
            m.d.sync += [
                pre_valid.eq(self.pkt.valid & self.pkt_meta.valid),
                pre.beat.eq(payload),
                pre.association.eq(self.pkt_meta.payload.association),
                pre.ddp.eq(self.pkt_meta.payload.ddp),
                pre.left.eq(left_now),
                pre.entry_ok.eq(index_now >= header_beat),
                pre.entry_word.eq(Mux(index_now == header_beat, (_COMMON_HEADER % width) // 4, 0)),
            ]
            for k in range(words):
                word = payload.data.word_select(k, 32)
                length = big_endian(byte(word, 2), byte(word, 3))
                m.d.sync += [pre.length[k].eq(length), pre.end[k].eq(length + 4 * k),
                             pre.padded_end[k].eq((length + (4 * k + 3)) >> 2 << 2)]
        left_now = pre.left
        entry_ok_next, entry_word_next = pre.entry_ok, pre.entry_word
        m.d.comb += [
            arriving.beat.eq(pre.beat),
            arriving.association.eq(pre.association),
            arriving.ddp.eq(pre.ddp),
            arriving.entry_ok.eq(entry_ok_next),
            arriving.entry_word.eq(entry_word_next),
        ]
        stay_next = []
        for k in range(words):
            length, end, padded_end = pre.length[k], pre.end[k], pre.padded_end[k]
            next_start = padded_end[2:]   # the next chunk, in words (padding, RFC 4960 3.2)
            m.d.comb += [
                arriving.rel_end[k].eq(end),
                arriving.avail[k].eq(left_now > 4 * k),
                arriving.hdr_past[k].eq(left_now < 4 * k + 4),
                arriving.short[k].eq(length < 4),
                arriving.past[k].eq(end > left_now),
                arriving.fits[k].eq(length <= width - 4 * k),
                arriving.done[k].eq((length > width - 4 * k - 4) | (padded_end >= left_now)),
                arriving.final[k].eq(padded_end >= left_now),
                arriving.next_word[k].eq(next_start[:word_bits]),
                arriving.end_small[k].eq(end <= 2 * width),
                arriving.end_tail[k].eq(end > 2 * width - 4),
            ]
            stay_next.append((left_now > 4 * k) & ~(left_now < 4 * k + 4) & ~(length < 4) & ~(end > left_now)
                             & (length <= width - 4 * k)
                             & ~((length > width - 4 * k - 4) | (padded_end >= left_now)))
        m.d.comb += [
            arriving.stay_word.eq(Cat(*stay_next)),
            arriving.entry_stay.eq(entry_ok_next & Cat(*stay_next).bit_select(entry_word_next, 1)),
        ]

        staged = beats.source.payload
        beat, beat_valid = staged.beat, beats.source.valid
        beat_assoc, beat_ddp = staged.association, staged.ddp
        entry_ok, entry_word = staged.entry_ok, staged.entry_word
        rel_end = [staged.rel_end[k] for k in range(words)]
        next_word = [staged.next_word[k] for k in range(words)]
        avail, hdr_past, short, past = staged.avail, staged.hdr_past, staged.short, staged.past
        fits, done, end_small, end_tail = staged.fits, staged.done, staged.end_small, staged.end_tail
        final = staged.final
        stay_word, entry_stay = staged.stay_word, staged.entry_stay
        beat_take = Signal()      # the walker is done with the beat stage's beat
        m.d.comb += beats.source.ready.eq(beat_take)

        # ---- 2. walker -----------------------------------------------------
        piece_layout = data.StructLayout({
            "beat": packet_layout(width),   # beat.last = last piece of the chunk
            "first": unsigned(1),
            "final": unsigned(1),           # first piece: the chunk is the packet's last
            "word": unsigned(word_bits),
            "error": unsigned(3),           # ChunkError found by the walker, 0 = none
            "association": unsigned(ASSOCIATION_BITS),
            "ddp": unsigned(1),
        })
        piece = data.Signal(piece_layout)
        piece_valid = Signal()
        piece_ready = Signal()

        fresh = Signal(init=1)       # the walker has not yet looked at the current beat
        in_chunk = Signal()
        ended = Signal()             # nothing more to parse in this packet
        cursor = Signal(range(words))
        cursor_has = Signal()
        left = Signal(17)            # bytes of the current chunk after this beat
        # Its compares, registered beside it (computed when it is loaded), so the walker's
        # decision and the piece's keep read flip-flops, not 17-bit comparators.
        left_small = Signal()        # left <= W: the chunk ends in this beat
        left_tail = Signal()         # left > W - 4: no other chunk starts in this beat after it
        left_keep = Signal(width)    # thermometer(left, W): the keep of the chunk's last beat

        cur_word = Mux(fresh, entry_word, cursor)
        cur_has = Mux(fresh, entry_ok & ~in_chunk, cursor_has) & ~ended

        def select(flags):
            return flags.bit_select(cur_word, 1)
        sel_rel_end = Cat(*rel_end).word_select(cur_word, 17)
        sel_next = Cat(*next_word).word_select(cur_word, word_bits)

        can_out = piece_ready   # the piece and header stages advance together (3c)
        with m.If(piece_ready):
            m.d.sync += piece_valid.eq(0)

        # The piece's data and tags load whenever the piece register is free (their enable is
        # no decision); the walker's decision sets only `valid` and the narrow fields below.
        with m.If(can_out):
            m.d.sync += [
                piece.beat.data.eq(beat.data),
                piece.word.eq(cur_word),
                piece.final.eq(select(final)),
                piece.association.eq(beat_assoc),
                piece.ddp.eq(beat_ddp),
            ]

        def emit(first, last, keep, error=0):
            m.d.sync += [
                piece_valid.eq(1),
                piece.beat.keep.eq(keep),
                piece.beat.last.eq(last),
                piece.first.eq(first),
                piece.error.eq(error),
            ]

        # Whether the walker keeps the beat this cycle, from flags registered for it: the
        # beat stage's `take` below is this, not the walker's branches (which it equals).
        stay_in_chunk = (left_small | beat.last) & ~left_tail
        stay_cursor = cursor_has & stay_word.bit_select(cursor, 1)
        stay = Mux(in_chunk, stay_in_chunk, ~ended & Mux(fresh, entry_stay, stay_cursor))
        m.d.comb += beat_take.eq(beat_valid & can_out & ~stay)

        def take():
            m.d.sync += [fresh.eq(1), cursor_has.eq(0)]
            with m.If(beat.last):
                m.d.sync += [in_chunk.eq(0), ended.eq(0)]

        full = Const((1 << width) - 1, width)
        with m.If(beat_valid & can_out):
            m.d.sync += fresh.eq(0)
            with m.If(in_chunk):
                ends = left_small | beat.last
                emit(0, ends, Mux(left_small, left_keep, beat.keep))
                m.d.sync += [left.eq(left - width), left_small.eq(left <= 2 * width),
                             left_tail.eq(left > 2 * width - 4),
                             left_keep.eq(Cat(*(left > width + lane for lane in range(width))))]
                with m.If(ends):
                    m.d.sync += in_chunk.eq(0)
                    restart = (left + 3) >> 2
                    with m.If(left_tail):
                        take()
                    with m.Else():
                        m.d.sync += [cursor.eq(restart[:word_bits]), cursor_has.eq(1)]
                with m.Else():
                    take()
            with m.Elif(cur_has & select(avail)):
                with m.If(select(hdr_past)):
                    emit(1, 1, full, ChunkError.PAST_END)
                    m.d.sync += ended.eq(1)
                    take()
                with m.Elif(select(short)):
                    emit(1, 1, full, ChunkError.TOO_SHORT)
                    m.d.sync += ended.eq(1)
                    take()
                with m.Elif(select(past)):
                    emit(1, 1, full, ChunkError.PAST_END)
                    m.d.sync += ended.eq(1)
                    take()
                with m.Elif(select(fits)):
                    emit(1, 1, thermometer(sel_rel_end, width))
                    with m.If(select(done)):
                        take()
                    with m.Else():
                        m.d.sync += [cursor.eq(sel_next), cursor_has.eq(1)]
                with m.Else():
                    emit(1, beat.last, beat.keep)
                    m.d.sync += [in_chunk.eq(~beat.last), left.eq(sel_rel_end - width),
                                 left_small.eq(select(end_small)), left_tail.eq(select(end_tail)),
                                 left_keep.eq(Cat(*(sel_rel_end > width + lane for lane in range(width))))]
                    take()
            with m.Else():
                take()

        # ---- 3. header stage ----------------------------------------------
        depth = self._fifo_depth
        pieces = m.submodules.pieces = Queue(packet_layout(width), depth)
        desc_layout = data.StructLayout({"dest": _Dest, "drop": range(width - 4 + _SEGMENT_OFFSET + 1)})
        descs = m.submodules.descs = Queue(desc_layout, depth)
        seg_metas = m.submodules.seg_metas = Queue(segment_meta_layout(), depth)
        exc_metas = m.submodules.exc_metas = Queue(exception_meta_layout(), 8)
        errors = m.submodules.errors = Queue(chunk_error_layout(), 8)
        acks = m.submodules.acks = Queue(struct_layout(ack_layout()), 8)
        for port, queue in ((self.seg_meta, seg_metas), (self.exc_meta, exc_metas), (self.errors, errors),
                            (self.acks, acks)):
            wiring.connect(m, queue.source, wiring.flipped(port))

        max_piece = (words - 1 + 4) // words
        b_word = Signal(range(words))
        b_piece = Signal(range(max_piece + 2))
        b_decided = Signal()
        b_final = Signal()
        hdr = [Signal(32, name=f"hdr_{j}") for j in range(5)]

        # 3a. gather: merge this piece's header words with those already seen, register.
        gathered = data.Signal(data.StructLayout({
            "beat": packet_layout(width),
            "decide": unsigned(1),       # the chunk's header is complete with this piece
            "final": unsigned(1),        # the chunk is the packet's last
            "start": unsigned(word_bits),
            "error": unsigned(3),
            "association": unsigned(ASSOCIATION_BITS),
            "ddp": unsigned(1),
        }))
        gathered_words = [Signal(32, name=f"gathered_{j}") for j in range(5)]
        gathered_valid = Signal()
        gathered_ready = Signal()
        # The walker, the piece and the header stage all advance on `room` (a flip-flop), not on
        # each other's state: a stall holds them together.
        m.d.comb += piece_ready.eq(gathered_ready)
        b_accept = piece_valid & piece_ready
        start = Mux(piece.first, piece.word, b_word)
        index = Mux(piece.first, 0, b_piece)
        merged, present = [], []
        for j in range(5):
            global_word = start + j
            here = index == (global_word >> word_bits)
            lane_word = piece.beat.data.word_select(global_word[:word_bits], 32)
            present.append(here)
            merged.append(Mux(here, lane_word, hdr[j]))
        decided = Mux(piece.first, 0, b_decided)
        decide = ~decided & (present[4] | piece.beat.last)
        with m.If(gathered_ready):
            m.d.sync += gathered_valid.eq(0)
        with m.If(b_accept):
            m.d.sync += [
                gathered_valid.eq(1),
                gathered.beat.eq(piece.beat),
                gathered.decide.eq(decide),
                gathered.final.eq(Mux(piece.first, piece.final, b_final)),
                gathered.start.eq(start),
                gathered.error.eq(piece.error),
                gathered.association.eq(piece.association),
                gathered.ddp.eq(piece.ddp),
            ]
            m.d.sync += [word.eq(value) for word, value in zip(gathered_words, merged)]
            with m.If(piece.error == 0):
                m.d.sync += [hdr[j].eq(merged[j]) for j in range(5)]
                m.d.sync += [
                    b_word.eq(start),
                    b_piece.eq(Mux(index == max_piece + 1, index, index + 1)),
                    b_decided.eq(decided | decide),
                    b_final.eq(Mux(piece.first, piece.final, b_final)),
                ]

        # 3b. classify: the gathered header's compares, registered beside the fields the decision
        # needs (on every cycle; `classified_valid` says whether a header was taken).
        # Room in every FIFO, from the levels one cycle ago: at most one write a cycle, and a
        # chunk taken now is written two cycles later, so four free entries then leave one for it.
        queues = (pieces, descs, seg_metas, exc_metas, errors, acks)
        room = Signal()
        m.d.sync += room.eq(Cat(queue.level <= queue.depth - 4 for queue in queues).all())
        m.d.comb += gathered_ready.eq(room)
        g_accept = gathered_valid & gathered_ready
        words_in = gathered_words
        length_in = big_endian(byte(words_in[0], 2), byte(words_in[0], 3))
        ppid_in = big_endian(*(byte(words_in[3], i) for i in range(4)))
        classified = Signal(data.StructLayout({
            "beat": packet_layout(width), "decide": 1, "final": 1, "start": word_bits, "error": 3,
            "association": ASSOCIATION_BITS, "ddp": 1, "flags": 8, "length": 16, "tsn": 32,
            "stream_id": 16, "ddp_ssn": 16,
            "control": 1,          # chunk type != DATA
            "has_tsn": 1,          # length >= 8
            "data_header": 1,      # length >= 16: a whole DATA header (RFC 4960 3.3.1)
            "segment_header": 1,   # length >= 18: and the DDP-SSN (RFC 5043 5.2.2)
            "ppid_control": 1, "ppid_segment": 1,
        }))
        classified_valid = Signal()
        m.d.sync += [
            classified_valid.eq(g_accept),
            classified.beat.eq(gathered.beat), classified.decide.eq(gathered.decide),
            classified.final.eq(gathered.final),
            classified.start.eq(gathered.start), classified.error.eq(gathered.error),
            classified.association.eq(gathered.association), classified.ddp.eq(gathered.ddp),
            classified.flags.eq(byte(words_in[0], 1)),
            classified.length.eq(length_in),
            classified.tsn.eq(big_endian(*(byte(words_in[1], i) for i in range(4)))),
            classified.stream_id.eq(big_endian(byte(words_in[2], 0), byte(words_in[2], 1))),
            classified.ddp_ssn.eq(big_endian(byte(words_in[4], 0), byte(words_in[4], 1))),
            classified.control.eq(byte(words_in[0], 0) != 0),
            classified.has_tsn.eq(length_in >= 8),
            classified.data_header.eq(length_in >= _DATA_HEADER),
            classified.segment_header.eq(length_in >= _SEGMENT_OFFSET),
            classified.ppid_control.eq(ppid_in == PPID_DDP_SESSION_CONTROL),
            classified.ppid_segment.eq(ppid_in == PPID_DDP_SEGMENT),
        ]

        # 3c. decide from the registered flags into a registered decision (3d writes the FIFOs).
        c_accept = classified_valid
        start = classified.start
        decide = classified.decide
        flags = classified.flags
        length = classified.length
        tsn = Mux(classified.has_tsn, classified.tsn, 0)
        stream_id = classified.stream_id
        ddp_ssn = classified.ddp_ssn

        dest = Signal(_Dest)
        reason = Signal(enum_shape(ChunkException))
        error = Signal(3)
        m.d.comb += [dest.eq(_Dest.EXC), error.eq(0)]
        with m.If(classified.control):
            m.d.comb += reason.eq(ChunkException.CONTROL)
        with m.Elif(~classified.ddp):
            m.d.comb += reason.eq(ChunkException.NOT_DDP)
        with m.Elif(~classified.data_header):
            m.d.comb += [dest.eq(_Dest.DISCARD), error.eq(ChunkError.TOO_SHORT)]
        with m.Elif(classified.ppid_control):
            m.d.comb += reason.eq(ChunkException.SESSION_CONTROL)
        with m.Elif(~classified.ppid_segment):
            m.d.comb += reason.eq(ChunkException.OTHER_PPID)
        with m.Elif(~classified.segment_header):
            m.d.comb += [dest.eq(_Dest.DISCARD), error.eq(ChunkError.TOO_SHORT)]
        with m.Elif(~(flags & _FLAG_U).any()):
            m.d.comb += [dest.eq(_Dest.DISCARD), error.eq(ChunkError.ORDERED)]
        with m.Elif((flags & (_FLAG_B | _FLAG_E)) != (_FLAG_B | _FLAG_E)):
            m.d.comb += [dest.eq(_Dest.DISCARD), error.eq(ChunkError.FRAGMENTED)]
        with m.Else():
            m.d.comb += dest.eq(_Dest.SEG)

        walker_error = classified.error != 0
        # A DATA chunk with its whole DATA header is acknowledged whatever its destination.
        whole_data_header = ~classified.control & classified.data_header
        disposition = Mux(dest == _Dest.SEG, AckDisposition.SEGMENT,
                          Mux(dest == _Dest.EXC, AckDisposition.TO_HOST, AckDisposition.REFUSED))
        ack = Signal.like(acks.sink.payload)
        write_ack = Signal()
        desc = Signal.like(descs.sink.payload)
        seg_meta = Signal.like(seg_metas.sink.payload)
        exc_meta = Signal.like(exc_metas.sink.payload)
        error_record = Signal.like(errors.sink.payload)
        write_piece, write_desc, write_seg_meta, write_exc_meta, write_error = (Signal() for _ in range(5))
        piece_beat = Signal.like(pieces.sink.payload)
        record = c_accept & decide & ~walker_error
        m.d.sync += [
            write_piece.eq(c_accept & ~walker_error),
            piece_beat.eq(classified.beat),
            write_desc.eq(record),
            desc.dest.eq(dest),
            desc.drop.eq(Cat(Const(0, 2), start) + Mux(dest == _Dest.SEG, _SEGMENT_OFFSET, 0)),
            write_seg_meta.eq(record & (dest == _Dest.SEG)),
            seg_meta.association.eq(classified.association),
            seg_meta.tsn.eq(tsn),
            seg_meta.stream_id.eq(stream_id),
            seg_meta.ddp_ssn.eq(ddp_ssn),
            seg_meta.length.eq(length - _SEGMENT_OFFSET),
            write_exc_meta.eq(record & (dest == _Dest.EXC)),
            exc_meta.association.eq(classified.association),
            exc_meta.reason.eq(reason),
            exc_meta.length.eq(length),
            write_error.eq(c_accept & (walker_error | (decide & (error != 0)))),
            error_record.association.eq(classified.association),
            error_record.tsn.eq(Mux(walker_error, 0, tsn)),
            error_record.kind.eq(Mux(walker_error, classified.error, error)),
            write_ack.eq(record & whole_data_header),
            ack.association.eq(classified.association),
            ack.disposition.eq(disposition),
            ack.tsn.eq(tsn),
            ack.length.eq(length - _DATA_HEADER),
            ack.packet_end.eq(classified.final),
            ack.immediate.eq((flags & _FLAG_I).any()),
        ]

        # 3d. write the FIFOs from the registered decision.
        m.d.comb += [
            pieces.sink.valid.eq(write_piece), pieces.sink.payload.eq(piece_beat),
            descs.sink.valid.eq(write_desc), descs.sink.payload.eq(desc),
            seg_metas.sink.valid.eq(write_seg_meta), seg_metas.sink.payload.eq(seg_meta),
            exc_metas.sink.valid.eq(write_exc_meta), exc_metas.sink.payload.eq(exc_meta),
            errors.sink.valid.eq(write_error), errors.sink.payload.eq(error_record),
            acks.sink.valid.eq(write_ack), acks.sink.payload.eq(ack),
        ]

        # ---- 4. router -----------------------------------------------------
        seg_align = m.submodules.seg_align = Realign(width, width - 4 + _SEGMENT_OFFSET)
        exc_align = m.submodules.exc_align = Realign(width, width - 4)
        for name, align, port in (("seg_out", seg_align, self.seg), ("exc_out", exc_align, self.exc)):
            out = m.submodules[name] = Queue(packet_layout(width))
            wiring.connect(m, align.source, out.sink)
            wiring.connect(m, out.source, wiring.flipped(port))
        head = descs.source.payload
        head_piece = pieces.source.payload
        both = descs.source.valid & pieces.source.valid
        for dest_value, align in ((_Dest.SEG, seg_align), (_Dest.EXC, exc_align)):
            chosen = head.dest == dest_value
            m.d.comb += [
                align.drop.valid.eq(descs.source.valid & chosen),
                align.drop.payload.eq(head.drop),
                align.sink.valid.eq(both & chosen),
                align.sink.payload.eq(head_piece),
            ]
        target_ready = Mux(head.dest == _Dest.SEG, seg_align.sink.ready,
                           Mux(head.dest == _Dest.EXC, exc_align.sink.ready, 1))
        m.d.comb += [
            pieces.source.ready.eq(descs.source.valid & target_ready),
            descs.source.ready.eq(both & target_ready & head_piece.last),
        ]
        return m

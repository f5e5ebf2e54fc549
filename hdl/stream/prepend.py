"""Put a header of a few known lengths in front of each packet of a stream, one beat per cycle.

The inverse of :mod:`hdl.stream.realign`: output packet ``k`` is header
``k`` followed by body ``k`` (or the header alone). A header of ``L`` bytes
fills ``L // W`` whole beats; its last ``s = L mod W`` bytes share a beat
with the body's first ``W - s`` bytes, so every body byte moves up by ``s``
lanes. Headers come in a handful of lengths (``header_lengths``), so ``s``
takes few values and the shift is a small AND-OR per lane, not a barrel
shifter: the lanes a body beat leaves over (its top ``s``) are held and go
out, ORed under the next beat's, at the bottom of the next output beat.
Headers wait in three slots, read in place word by word. A free slot follows
the header input and the handshake marks it full, so a slot's wide registers
load on its own ``full`` flip-flop, never on a late handshake or packet end.

With ``pad_to = 4`` a body's last beat is padded with zero bytes to a
multiple of four (the SCTP chunk padding, RFC 4960 3.2); every header length
is then a multiple of four, so the padding lands on the packet's 4-byte
boundary.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.bits import check_width
from hdl.stream.packet import packet_signature

__all__ = ["Prepend", "prepend_header_layout"]

SLOTS = 3


def prepend_header_layout(max_header: int) -> data.StructLayout:
    """A header for :class:`Prepend`: ``length`` bytes of ``data`` (lane order: byte 0 in bits
    7:0), zero beyond ``length``; ``body`` = 1 when a body packet follows it on ``sink``."""
    return data.StructLayout({
        "data": unsigned(8 * max_header),
        "length": range(max_header + 1),
        "body": unsigned(1),
    })


class Prepend(wiring.Component):
    """Header ``k`` from ``header``, then packet ``k`` from ``sink`` if the header says ``body``.

    Parameters
    ----------
    width_bytes : int
        Datapath width ``W``.
    header_lengths : iterable of int
        Every header length that may occur (each at least 1); a header of another length is
        undefined behaviour.
    pad_to : int
        1, or 4: pad each body to a multiple of 4 bytes with zeros (header lengths then multiples of 4).

    Ports
    -----
    header : ``In(stream.Signature(prepend_header_layout(max(header_lengths))))``
    sink : ``In(packet_signature(W))``
        Bodies, lane 0 aligned, at least one byte each.
    source : ``Out(packet_signature(W))``
        Registered. One beat per cycle while the inputs keep up, also from one packet to the
        next; a body whose last beat holds more than ``W - s`` bytes takes one more beat
        (and cycle) than its kept beats.
    """

    def __init__(self, width_bytes: int, header_lengths, *, pad_to: int = 1):
        check_width(width_bytes)
        lengths = tuple(sorted(set(header_lengths)))
        if not lengths or lengths[0] < 1:
            raise ValueError(f"Header lengths must be at least 1, not {lengths!r}")
        if pad_to not in (1, 4) or (pad_to == 4 and (width_bytes % 4 or any(length % 4 for length in lengths))):
            raise ValueError(f"pad_to {pad_to} needs every header length and the width to be multiples of 4")
        self._width, self._lengths, self._pad = width_bytes, lengths, pad_to
        super().__init__({
            "header": In(stream.Signature(prepend_header_layout(lengths[-1]))),
            "sink": In(packet_signature(width_bytes)),
            "source": Out(packet_signature(width_bytes)),
        })

    def elaborate(self, platform):
        m = Module()
        width, lengths = self._width, self._lengths
        shifts = sorted({length % width for length in lengths})
        words = lengths[-1] // width + 1   # whole header beats, and the word of its last s bytes
        ones = (1 << width) - 1

        # Header slots, filled in turn while free and read in turn: a header's bytes are kept from its
        # handshake and read in place, so no wide register loads on the decision that ends a packet. Three, so
        # that one-beat packets follow each other: a slot freed by one is written the next cycle.
        header = self.header.payload
        is_length = [header.length == length for length in lengths]
        slot_layout = data.StructLayout({
            "data": unsigned(8 * width * words),
            "beats": range(words),           # whole header beats
            "shift": unsigned(len(shifts)),  # one-hot: which s the packet has
            "tail_keep": unsigned(width),    # lanes of the last header word that belong to the packet
            "ends_at_header": unsigned(1),   # no body and s = 0: the last header beat ends the packet
            "flush": unsigned(1),            # no body and s != 0: the last header word ends it
        })
        slots = [Signal(slot_layout, name=f"slot_{index}") for index in range(SLOTS)]
        full = Signal(SLOTS)
        write_slot, read_slot = Signal(range(SLOTS)), Signal(range(SLOTS))

        def after(slot):
            return Mux(slot == SLOTS - 1, 0, slot + 1)

        # A free slot follows the header input every cycle, so its wide enable is its own `full` bit; the
        # handshake only marks the write slot full, keeping what it loaded in that cycle. `header.ready`
        # is a flip-flop loaded with the next write slot's freedom (it is the producer's wide enable).
        header_ready = Signal(init=1)
        taken = self.header.valid & header_ready
        m.d.comb += self.header.ready.eq(header_ready)
        with m.If(taken):
            m.d.sync += [full.bit_select(write_slot, 1).eq(1), write_slot.eq(after(write_slot))]
        for index, slot in enumerate(slots):
            with m.If(~full[index]):
                m.d.sync += [
                    slot.data.eq(header.data),
                    slot.beats.eq(_or([Mux(hit, length // width, 0) for hit, length in zip(is_length, lengths)],
                                      len(slot.beats))),
                    slot.shift.eq(Cat(*(_or([hit for hit, length in zip(is_length, lengths)
                                             if length % width == s], 1) for s in shifts))),
                    slot.tail_keep.eq(_or([Mux(hit, (1 << (length % width)) - 1, 0)
                                           for hit, length in zip(is_length, lengths)], width)),
                    slot.ends_at_header.eq(~header.body & _or([hit for hit, length in zip(is_length, lengths)
                                                               if length % width == 0], 1)),
                    slot.flush.eq(~header.body & _or([hit for hit, length in zip(is_length, lengths)
                                                      if length % width], 1)),
                ]

        active = Signal()               # a packet is being sent, from slot `read_slot`
        index = Signal(range(words))    # its header word to send next (the last s bytes' word after)
        following = Signal(words + 1, init=1)   # one-hot: bit index + 1 (the word loaded next)
        beats_left = Signal(range(words))   # whole header beats still to send
        shift = Signal(len(shifts))
        in_header = Signal()            # beats_left != 0
        tail = Signal()                 # the low lanes to send come from the header's last word
        carry = Signal(8 * width)       # else the body lanes carried from the last body beat
        carry_keep = Signal(width)      # lanes of those low lanes that belong to the packet
        ends_at_header = Signal()
        flush = Signal()                # only the low lanes are left to send
        body_open = Signal()            # active, no header beat left, not flushing: body beats are taken

        def word(slot_number, word_index):
            """Word `word_index` of header slot `slot_number` (a mux over the slots' words)."""
            chosen = Signal(8 * width)
            with m.Switch(slot_number):
                for number, slot in enumerate(slots):
                    with m.Case(number):
                        m.d.comb += chosen.eq(slot.data.word_select(word_index, 8 * width))
            return chosen

        # The header word `index` of slot `read_slot`: word 0 straight from the slot (a three-way mux on
        # `read_slot`), any later one from a register loaded as the word before it is sent (from the wide
        # mux of the slot's words, whose selects are flip-flops). The wide mux then stays off the output
        # register's path, and nothing loads on a packet's start, which is decided late.
        later_word = Signal(8 * width)
        header_word = Mux(index == 0, word(read_slot, 0), later_word)
        word_after = Signal(8 * width)   # the word `following` names: an AND-OR whose selects are flip-flops
        with m.Switch(read_slot):
            for number, slot in enumerate(slots):
                with m.Case(number):
                    m.d.comb += word_after.eq(_or([Mux(following[k], slot.data.word_select(k, 8 * width), 0)
                                                   for k in range(words)], 8 * width))
        low = Mux(tail, header_word, carry)

        # The body beat, padded.
        beat = self.sink.payload
        body_keep, body_data = Signal(width), Signal(8 * width)
        if self._pad == 4:
            m.d.comb += body_keep.eq(Cat(*(beat.keep[lane - lane % 4] for lane in range(width))))
            m.d.comb += body_data.eq(Cat(*(Mux(beat.keep[lane], beat.data.word_select(lane, 8), 0)
                                           for lane in range(width))))
        else:
            m.d.comb += [body_keep.eq(beat.keep), body_data.eq(beat.data)]

        def shifted(value, bits_per_lane, up):
            """``value`` moved up by s lanes (or down by W - s lanes), s from the one-hot ``shift``."""
            terms = []
            for position, s in enumerate(shifts):
                if up:
                    moved = (value << (bits_per_lane * s))[:bits_per_lane * width]
                elif s:
                    moved = value >> (bits_per_lane * (width - s))
                else:
                    continue
                terms.append(Mux(shift[position], moved, 0))
            return _or(terms, bits_per_lane * width)

        out_data = low | shifted(body_data, 8, True)
        out_keep = carry_keep | shifted(body_keep, 1, True)
        carry_data = shifted(body_data, 8, False)
        carry_keep_next = shifted(body_keep, 1, False)

        source = self.source.payload
        can_out = ~self.source.valid | self.source.ready
        # `sink.ready` from flip-flops and the consumer's ready only: it is a wide enable upstream.
        m.d.comb += self.sink.ready.eq(can_out & body_open)
        finishing = can_out & active & Mux(
            in_header, (beats_left == 1) & ends_at_header,
            flush | (self.sink.valid & beat.last & (carry_keep_next == 0)))
        # The output register loads whenever it is free, valid or not, so its wide enable is the consumer's
        # ready and its own valid; what it loads is chosen by flip-flops (`in_header`, `flush`).
        with m.If(can_out):
            m.d.sync += [
                self.source.valid.eq(active & (in_header | flush | self.sink.valid)),
                source.data.eq(Mux(in_header, header_word, Mux(flush, low, out_data))),
                source.keep.eq(Mux(in_header, ones, Mux(flush, carry_keep, out_keep))),
                source.last.eq(Mux(in_header, (beats_left == 1) & ends_at_header,
                                   flush | (beat.last & (carry_keep_next == 0)))),
            ]
        with m.If(can_out & active):
            with m.If(in_header):
                m.d.sync += [
                    index.eq(index + 1), following.eq(following << 1), later_word.eq(word_after),
                    beats_left.eq(beats_left - 1), in_header.eq(beats_left != 1),
                    body_open.eq((beats_left == 1) & ~flush),
                ]
            with m.Elif(flush):
                m.d.sync += flush.eq(0)
            with m.Elif(self.sink.valid):
                m.d.sync += [
                    carry.eq(carry_data), carry_keep.eq(carry_keep_next), tail.eq(0),
                    flush.eq(beat.last & (carry_keep_next != 0)),
                    body_open.eq(~(beat.last & (carry_keep_next != 0))),
                ]

        # A packet starts from the read slot once it is full, or right as the one before it finishes. Whether
        # the read slot and the one after it are full are flip-flops (loaded from the next `full` and
        # `read_slot`), so the late `finishing` meets one AND before the packet registers' enables, not a
        # choice among the slots.
        next_slot = Mux(active, after(read_slot), read_slot)
        read_full, after_full = Signal(), Signal()
        starting = Mux(active, after_full & finishing, read_full)
        with m.If(finishing):
            m.d.sync += [full.bit_select(read_slot, 1).eq(0), read_slot.eq(after(read_slot)), active.eq(0),
                         body_open.eq(0)]
        full_next = ((full | Mux(taken, Const(1, SLOTS) << write_slot, 0))
                     & ~Mux(finishing, Const(1, SLOTS) << read_slot, 0))[:SLOTS]
        read_slot_next = Mux(finishing, after(read_slot), read_slot)
        m.d.sync += [header_ready.eq(~full_next.bit_select(Mux(taken, after(write_slot), write_slot), 1)),
                     read_full.eq(full_next.bit_select(read_slot_next, 1)),
                     after_full.eq(full_next.bit_select(after(read_slot_next), 1))]
        with m.If(starting):
            slot = Signal(slot_layout)
            with m.Switch(next_slot):
                for number, candidate in enumerate(slots):
                    with m.Case(number):
                        m.d.comb += slot.eq(candidate)
            m.d.sync += [
                active.eq(1), index.eq(0), following.eq(0b10),
                beats_left.eq(slot.beats), in_header.eq(slot.beats != 0), shift.eq(slot.shift), tail.eq(1),
                carry_keep.eq(slot.tail_keep), ends_at_header.eq(slot.ends_at_header), flush.eq(slot.flush),
                body_open.eq((slot.beats == 0) & ~slot.flush),
            ]
        return m


def _or(terms, bits):
    """The OR of ``terms`` (a constant 0 of ``bits`` bits when there are none)."""
    result = Const(0, bits)
    for term in terms:
        result = result | term
    return result[:bits] if bits else result

"""Put a header of a few known lengths in front of each packet of a stream, one beat per cycle.

The inverse of :mod:`hdl.stream.realign`: output packet ``k`` is header
``k`` followed by body ``k`` (or the header alone). A header of ``L`` bytes
fills ``L // W`` whole beats; its last ``s = L mod W`` bytes share a beat
with the body's first ``W - s`` bytes, so every body byte moves up by ``s``
lanes. Headers come in a handful of lengths (``header_lengths``), so ``s``
takes few values and the shift is a small AND-OR per lane, not a barrel
shifter: the lanes a body beat leaves over (its top ``s``) are held and go
out, ORed under the next beat's, at the bottom of the next output beat.

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
        held_bytes = (lengths[-1] // width + 1) * width
        ones = (1 << width) - 1

        active = Signal()              # a packet is being sent
        held = Signal(8 * held_bytes)  # header bytes still to send, then the carried body lanes
        beats_left = Signal(range(lengths[-1] // width + 1))   # whole header beats still to send
        shift = Signal(len(shifts))    # one-hot: which s this packet has
        carry_keep = Signal(width)     # lanes of held[0:W] that belong to the packet
        ends_at_header = Signal()      # no body and s = 0: the last header beat ends the packet
        flush = Signal()               # only held[0:W] is left to send

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
            for index, s in enumerate(shifts):
                if up:
                    moved = (value << (bits_per_lane * s))[:bits_per_lane * width]
                elif s:
                    moved = value >> (bits_per_lane * (width - s))
                else:
                    continue
                terms.append(Mux(shift[index], moved, 0))
            return _or(terms, bits_per_lane * width)

        out_data = held[:8 * width] | shifted(body_data, 8, True)
        out_keep = carry_keep | shifted(body_keep, 1, True)
        carry_data = shifted(body_data, 8, False)
        carry_keep_next = shifted(body_keep, 1, False)

        source = self.source.payload
        can_out = ~self.source.valid | self.source.ready
        in_header = beats_left != 0
        in_body = active & ~in_header & ~flush
        take_body = can_out & in_body & self.sink.valid
        m.d.comb += self.sink.ready.eq(can_out & in_body)
        finishing = can_out & active & Mux(
            in_header, (beats_left == 1) & ends_at_header,
            flush | (self.sink.valid & beat.last & (carry_keep_next == 0)))
        with m.If(can_out):
            m.d.sync += self.source.valid.eq(active & (in_header | flush | self.sink.valid))
        with m.If(can_out & active):
            with m.If(in_header):
                m.d.sync += [
                    source.data.eq(held[:8 * width]), source.keep.eq(ones),
                    source.last.eq((beats_left == 1) & ends_at_header),
                    held.eq(held >> (8 * width)), beats_left.eq(beats_left - 1),
                ]
            with m.Elif(flush):
                m.d.sync += [source.data.eq(held[:8 * width]), source.keep.eq(carry_keep), source.last.eq(1),
                             flush.eq(0)]
            with m.Elif(self.sink.valid):
                m.d.sync += [
                    source.data.eq(out_data), source.keep.eq(out_keep),
                    source.last.eq(beat.last & (carry_keep_next == 0)),
                    held[:8 * width].eq(carry_data), carry_keep.eq(carry_keep_next),
                    flush.eq(beat.last & (carry_keep_next != 0)),
                ]
            with m.If(finishing):
                m.d.sync += active.eq(0)

        # The next header loads when no packet is active or this cycle ends one.
        header = self.header.payload
        m.d.comb += self.header.ready.eq(~active | finishing)
        with m.If(self.header.valid & self.header.ready):
            is_length = [header.length == length for length in lengths]
            m.d.sync += [
                active.eq(1),
                held.eq(header.data),
                beats_left.eq(_or([Mux(hit, length // width, 0) for hit, length in zip(is_length, lengths)],
                                  len(beats_left))),
                shift.eq(Cat(*(_or([hit for hit, length in zip(is_length, lengths) if length % width == s], 1)
                               for s in shifts))),
                carry_keep.eq(_or([Mux(hit, (1 << (length % width)) - 1, 0)
                                   for hit, length in zip(is_length, lengths)], width)),
                ends_at_header.eq(~header.body & _or([hit for hit, length in zip(is_length, lengths)
                                                      if length % width == 0], 1)),
                flush.eq(~header.body & _or([hit for hit, length in zip(is_length, lengths)
                                             if length % width], 1)),
            ]
        return m


def _or(terms, bits):
    """The OR of ``terms`` (a constant 0 of ``bits`` bits when there are none)."""
    result = Const(0, bits)
    for term in terms:
        result = result | term
    return result[:bits] if bits else result

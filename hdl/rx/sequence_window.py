"""The DDP-SSN window of each DDP stream: duplicates and DDP-SSNs out of range (RFC 5043 6.1, 10).

The same block, with ``bits = 32``, is the acknowledgement unit's map of
the TSNs received past an association's Cumulative TSN Ack
(:mod:`hdl.rx.sack_unit`, RFC 4960 6.2): ``base`` is the Cumulative TSN Ack
plus one, ``seen`` the TSNs received after it.

Per stream the block keeps ``base``, the lowest DDP-SSN not yet received,
and ``seen``, one bit per DDP-SSN ``base + i`` for ``i < window`` (bit 0,
``base`` itself, is never set). For a segment's DDP-SSN, with
``ahead = (ssn - base) mod 2**16``:

* ``ahead >= 2**15`` (behind ``base``: received long ago) or ``seen[ahead]``
  -> ``duplicate``: the peer's SCTP retransmitted a chunk, or the network
  duplicated a packet (RFC 5041 5.3: a segment is placed once, its message
  delivered once);
* ``window <= ahead < 2**15`` -> ``beyond``: more DDP-SSNs missing than the
  block tracks. RFC 5043 10 lets a receiver check that a gap can be
  explained by unreceived chunks and terminate the stream when it cannot;
  this block's bound is ``window``;
* otherwise the DDP-SSN is new; committing it sets its bit, and when it is
  ``base`` itself (``in_order``), ``base`` moves past it and every DDP-SSN
  after it already seen (``releases``: at least the next one was), so the
  window slides as the gaps fill.

Pipeline (the placement check's, which never stalls): a lookup of
``index``/``ssn`` on one cycle has ``duplicate``/``beyond`` three cycles
later, on the cycle its ``commit`` is given. Stage 1 subtracts ``base``
(and picks the bit at the slot's low bits in each group of slots), stage 2
tests the bit and finds how far ``base`` moves if the DDP-SSN is
``base`` (the first zero of ``seen``), stage 3 shifts and writes. The
caller must not look up a stream while an earlier lookup of it is in stages
1-2; a lookup on the commit's own cycle reads the written state
(transparent read), as the placement check's interlock provides.

``base`` is the looked-up stream's ``base`` on stage 1 (after every commit
before the lookup), for the untagged buffers' delivery test; ``peek_base``
is the ``base`` of stream ``peek_index`` one cycle after it is presented,
``peek_seen`` its ``seen``. With ``duplicate``, ``pending`` says some bit
of ``seen`` was set before the lookup, ``pending_after`` that one is set
after its commit (or, without a commit, still).

``reset`` (a host write of the stream row) starts the stream's window at
``first_ssn`` with nothing seen; it must not meet a commit (the placement
check writes its tables only while no segment is in flight).

``registered_write``: for a caller that looks a stream up at most every
fourth cycle (the acknowledgement unit). Stage 2 keeps the first zero of
``seen`` as found (one-hot), stage 3 encodes it and registers the commit or
reset, and the state is written one cycle after the commit from those
registers (both read ports transparent), so no path runs from the commit's
decision to the state's write enables, nor from the carry chain to the
shifter. A lookup may then come on the cycle after the commit, not on the
commit's own.

Cost: ``bits + window`` bits of state per stream; the logic is one ``bits``-bit
subtractor, one ``window``-to-1 bit select, one ``window``-bit increment
(first zero) and one ``window``-bit shifter.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.bits import index_bits

__all__ = ["SequenceWindow"]


class SequenceWindow(wiring.Component):
    """DDP-SSN windows of ``streams`` DDP streams, ``window`` DDP-SSNs each (a power of two); sequence
    numbers of ``bits`` bits (16: DDP-SSNs, RFC 5043 6.1; 32: TSNs, RFC 4960 1.6)."""

    latency = 3

    def __init__(self, streams: int, window: int = 32, *, bits: int = 16, registered_write: bool = False):
        if window < 2 or window & (window - 1) or window > 1 << (bits - 1):
            raise ValueError(f"window must be a power of two in 2..{1 << (bits - 1)}, not {window}")
        self._streams, self._window, self._bits = streams, window, bits
        self._registered_write = registered_write
        index = index_bits(streams)
        super().__init__({
            "index": In(index),
            "ssn": In(bits),
            "duplicate": Out(1),
            "beyond": Out(1),
            "in_order": Out(1),
            "releases": Out(1),
            "pending": Out(1),
            "pending_after": Out(1),
            "commit": In(1),
            "reset": In(1),
            "reset_index": In(index),
            "reset_first": In(bits),
            "base": Out(bits),
            "peek_index": In(index),
            "peek_base": Out(bits),
            "peek_seen": Out(window),
        })

    def elaborate(self, platform):
        m = Module()
        window, bits = self._window, self._bits
        slot_bits = (window - 1).bit_length()
        state_layout = data.StructLayout({"base": unsigned(bits), "seen": unsigned(window)})
        states = m.submodules.states = memory.Memory(shape=state_layout, depth=self._streams, init=[])
        write = states.write_port()
        read = states.read_port(transparent_for=(write,))
        peek = states.read_port(transparent_for=(write,) if self._registered_write else ())
        m.d.comb += [peek.addr.eq(self.peek_index), self.peek_base.eq(peek.data.base), self.peek_seen.eq(peek.data.seen),
                     self.base.eq(read.data.base)]

        # Stage 0: read the stream's state.
        m.d.comb += read.addr.eq(self.index)
        # The stage registers have no reset: each is loaded on every cycle, and a commit (the only use
        # of their values that lasts) comes for a lookup made after the reset, once it has reached them.
        index_1, ssn_1 = Signal.like(self.index, reset_less=True), Signal(bits, reset_less=True)
        m.d.sync += [index_1.eq(self.index), ssn_1.eq(self.ssn)]

        # Stage 1: how far ahead of base. The bit of `seen` at the slot is chosen half here, by the slot's
        # low bits (a subtraction of their own), so stage 2's choice is among groups, not `window` bits.
        index_2, ahead_2 = Signal.like(self.index, reset_less=True), Signal(bits, reset_less=True)
        base_2, seen_2 = Signal(bits, reset_less=True), Signal(window, reset_less=True)
        low_bits = slot_bits // 2
        low_1 = (ssn_1[:low_bits] - read.data.base[:low_bits])[:low_bits]
        chosen_2 = Signal(window >> low_bits, reset_less=True)      # per group of 2 ** low_bits slots, the bit at the low bits
        # Whether `seen` (bit 0 taken as set) has a zero below a one, i.e. a run past base's own: per
        # group of 8 adjacent pairs here, their OR in stage 2 (`pending_after`), so no carry chain.
        filled_1 = read.data.seen | 1
        holes_2 = Signal((window + 7) // 8, reset_less=True)
        m.d.sync += holes_2.eq(Cat(*(Cat(*(filled_1[j + 1] & ~filled_1[j]
                                           for j in range(start, min(start + 8, window - 1)))).any()
                                     for start in range(0, window, 8))))
        m.d.sync += [index_2.eq(index_1), ahead_2.eq(ssn_1 - read.data.base),
                     base_2.eq(read.data.base), seen_2.eq(read.data.seen),
                     chosen_2.eq(Cat(read.data.seen[start:start + (1 << low_bits)].bit_select(low_1, 1)
                                     for start in range(0, window, 1 << low_bits)))]

        # Stage 2: classify; the advance if this is base: the first zero of seen above bit 0.
        behind = ahead_2[-1]
        inside = ahead_2[slot_bits:] == 0
        slot = ahead_2[:slot_bits]
        filled = seen_2 | 1
        # One-hot (bit `window`: all seen), so its position is an OR of the bits at positions with each bit set.
        first_zero = Cat(~filled[:window] & (filled + 1)[:window], (filled + 1)[window])

        def encode(one_hot):
            return Cat(*(Cat(*(one_hot[position] for position in range(1, window + 1) if position >> bit & 1)).any()
                         for bit in range(len(advance_3))))

        index_3, base_3 = Signal.like(self.index, reset_less=True), Signal(bits, reset_less=True)
        marked_3, advance_3 = Signal(window, reset_less=True), Signal(range(window + 1), reset_less=True)
        if self._registered_write:
            first_zero_3 = Signal(window + 1, reset_less=True)    # base's own: zero unless the DDP-SSN is base
            m.d.sync += first_zero_3.eq(Mux(ahead_2 == 0, first_zero, 0))
            m.d.comb += advance_3.eq(encode(first_zero_3))
        else:
            m.d.sync += advance_3.eq(Mux(ahead_2 == 0, encode(first_zero), 0))
        m.d.sync += [
            self.duplicate.eq(behind | (inside & chosen_2.bit_select(slot[low_bits:], 1))),
            self.beyond.eq(~behind & ~inside),
            self.in_order.eq(ahead_2 == 0),
            self.releases.eq((ahead_2 == 0) & seen_2[1]),
            self.pending.eq(seen_2.any()),
            # After a commit: base's run gone (`filled & (filled + 1)` clears the lowest run of ones), or one
            # more bit; a duplicate or a DDP-SSN beyond is not committed and changes nothing.
            # (`filled & (filled + 1)` nonzero: a one above a zero, as `holes_2` has it.)
            self.pending_after.eq(Mux(ahead_2 == 0, holes_2.any(), seen_2.any() | inside)),
            index_3.eq(index_2), base_3.eq(base_2),
            marked_3.eq(seen_2 | (Const(1, window) << slot)),
        ]

        # Stage 3: commit (the caller's decision) or a host reset.
        if not self._registered_write:
            m.d.comb += [
                write.addr.eq(Mux(self.reset, self.reset_index, index_3)),
                write.data.base.eq(Mux(self.reset, self.reset_first, base_3 + advance_3)),
                write.data.seen.eq(Mux(self.reset, 0, (Cat(marked_3, Const(0, window)) >> advance_3)[:window])),
                write.en.eq(self.commit | self.reset),
            ]
            return m
        # Stage 4 (registered_write): the commit or reset from registers.
        # No reset but for the write enable, as the stages before.
        index_4, base_4 = Signal.like(self.index, reset_less=True), Signal(bits, reset_less=True)
        marked_4, advance_4 = Signal(window, reset_less=True), Signal(range(window + 1), reset_less=True)
        write_4 = Signal()
        m.d.sync += [
            index_4.eq(Mux(self.reset, self.reset_index, index_3)),
            base_4.eq(Mux(self.reset, self.reset_first, base_3)),
            marked_4.eq(Mux(self.reset, 0, marked_3)),
            advance_4.eq(Mux(self.reset, 0, advance_3)),
            write_4.eq(self.commit | self.reset),
        ]
        m.d.comb += [
            write.addr.eq(index_4),
            write.data.base.eq(base_4 + advance_4),
            write.data.seen.eq((Cat(marked_4, Const(0, window)) >> advance_4)[:window]),
            write.en.eq(write_4),
        ]
        return m

"""The receive engine's acknowledgement unit: per association, the TSNs received and the SACKs they call for
(RFC 4960 6.2, 6.7, 3.3.4). Its golden model is :class:`model.engine.sack.SackUnit`; the two make the same
decisions record for record and tick for tick.

Per association the unit keeps the Cumulative TSN Ack point and a map of
the ``map_tsns`` TSNs after it (a :class:`~hdl.rx.sequence_window.SequenceWindow`
of 32-bit sequence numbers in block RAM, ``base`` = Cumulative TSN Ack + 1),
and in flip-flops: up to ``duplicate_tsns`` duplicate TSNs for the next
SACK, whether a packet's chunks are coming, whether a gap was open when it
began, whether the packet calls for a SACK at once, whether one packet with
DATA waits for its SACK, and the delayed-SACK countdown.

``chunks`` takes one record per DATA chunk (association, TSN, whether it
ends its packet). A TSN at or before the Cumulative TSN Ack, or already in
the map, is a duplicate (listed in the next SACK while there is room,
counted in ``duplicates_unlisted`` after); one more than ``map_tsns`` past
it is dropped unrecorded (RFC 4960 6.2: a receiver without room drops new
DATA); both call for a SACK at once, as does a chunk with the I bit (RFC 9260
3.3.1, 6.2). At a packet's end a SACK goes at once
if the packet held a duplicate, a dropped chunk or an I bit, if a gap remains or was
open when the packet began (6.7), or if it is the second packet with DATA
since the last SACK (6.2); otherwise the association's countdown starts
(if it is not running): the SACK goes ``delay`` ticks later.

``tick`` is one cycle per tick of the engine's timer (the model's
:data:`~model.engine.sack.TICK_SECONDS`); the unit takes it between
records (a tick that comes while one is pending is the same tick:
``tick_pending`` says one is). Due
SACKs leave lowest association first, before the next record is taken.

``sacks`` carries one :func:`sack_record_layout` per SACK: the Cumulative
TSN Ack, the lowest ``gap_blocks`` Gap Ack Blocks (offsets from it, RFC 4960
3.3.4) and the duplicates listed. Sending clears the duplicates, the packet
count and the countdown.

``resets`` with ``flush`` sends the SACK the association owes now (if its
countdown runs) and changes nothing else; without, it writes an
association's row (RFC 4960 5.1: the peer's initial TSN
minus one, nothing received after it), its delayed-SACK time in ticks, its
a_rwnd (the ``window`` less ``held_bytes`` for each TSN received past the
Cumulative TSN Ack, down to 0: the model's rule) and whether the unit SACKs
the association at all (``enabled``; if not, its records are ignored).

Rate: a record takes 4 cycles (the map's three-stage lookup and the
decision), a SACK 8 cycles and 3 more per Gap Ack Block. At W = 8 a DATA
chunk carrying a DDP segment is at least 36 bytes, 5 beats (RFC 5043 5.2.2:
16 bytes of DATA header, at least 18 of DDP header), so the unit keeps up
with one beat per cycle; at wider W the receive engine's ack queue absorbs
the difference over a packet.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from abi.rx import ASSOCIATION_BITS, SACK_DELAY_BITS, sack_row_layout
from hdl.layout import struct_layout
from hdl.rx.sequence_window import SequenceWindow

__all__ = ["SackUnit", "sack_chunk_layout", "sack_record_layout", "sack_record_bytes"]

_TSN_BITS = 32


def sack_chunk_layout() -> data.StructLayout:
    """One DATA chunk the receive engine took (RFC 4960 3.3.1)."""
    return data.StructLayout({
        "association": unsigned(ASSOCIATION_BITS),
        "tsn": unsigned(_TSN_BITS),
        "packet_end": unsigned(1),   # the chunk is its packet's last DATA chunk (RFC 4960 6.10)
        "immediate": unsigned(1),    # its I bit (RFC 9260 3.3.1): the packet's SACK goes without delay (6.2)
    })


def sack_record_layout(gap_blocks: int = 4, duplicate_tsns: int = 4) -> data.StructLayout:
    """One SACK for the transmit path, less the a_rwnd it adds (RFC 4960 3.3.4)."""
    return data.StructLayout({
        "association": unsigned(ASSOCIATION_BITS),
        "cumulative_tsn_ack": unsigned(_TSN_BITS),
        "gap_count": range(gap_blocks + 1),
        "gaps": data.ArrayLayout(data.StructLayout({"start": unsigned(16), "end": unsigned(16)}), gap_blocks),
        "duplicate_count": range(duplicate_tsns + 1),
        "duplicates": data.ArrayLayout(unsigned(_TSN_BITS), duplicate_tsns),
        "a_rwnd": unsigned(32),
    })


def sack_record_bytes() -> int:
    """Bytes of one SACK record beat between the engines (``m_axis_sack`` to ``s_axis_sack``)."""
    return (sack_record_layout().size + 7) // 8


def _position(one_hot, width: int):
    """The index of the set bit of a ``width``-bit one-hot (or zero) vector: one OR tree per index bit."""
    return Cat(*(Cat(*(one_hot[i] for i in range(width) if i >> bit & 1)).any()
                 for bit in range(max(1, (width - 1).bit_length()))))


class SackUnit(wiring.Component):
    """The acknowledgement unit of ``associations`` rows (see the module docs)."""

    def __init__(self, associations: int, *, map_tsns: int = 64, gap_blocks: int = 4, duplicate_tsns: int = 4):
        if gap_blocks < 1 or duplicate_tsns < 1:
            raise ValueError(f"gap_blocks {gap_blocks} and duplicate_tsns {duplicate_tsns} must be at least 1")
        self.associations, self.map_tsns = associations, map_tsns
        self.gap_blocks, self.duplicate_tsns = gap_blocks, duplicate_tsns
        super().__init__({
            "chunks": In(stream.Signature(sack_chunk_layout())),
            "resets": In(stream.Signature(struct_layout(sack_row_layout()))),
            "tick": In(1),
            "tick_pending": Out(1),
            "sacks": Out(stream.Signature(sack_record_layout(gap_blocks, duplicate_tsns))),
            "duplicates_unlisted": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        rows, window_bits = self.associations, self.map_tsns
        m.submodules.map = tsn_map = SequenceWindow(rows, window_bits, bits=_TSN_BITS, registered_write=True)

        def row_array(shape, name):
            return Array(Signal(shape, name=f"{name}_{row}") for row in range(rows))

        in_packet, gap_start, at_once = row_array(1, "in_packet"), row_array(1, "gap_start"), row_array(1, "at_once")
        one_packet, armed, due = row_array(1, "one_packet"), row_array(1, "armed"), row_array(1, "due")
        remaining, delay = row_array(SACK_DELAY_BITS, "remaining"), row_array(SACK_DELAY_BITS, "delay")
        window, held_bytes, enabled = row_array(32, "window"), row_array(16, "held_bytes"), row_array(1, "enabled")
        duplicate_count = row_array(range(self.duplicate_tsns + 1), "duplicate_count")
        duplicates = Array(Array(Signal(_TSN_BITS, name=f"duplicate_{row}_{i}") for i in range(self.duplicate_tsns))
                           for row in range(rows))

        tick_pending = Signal()
        with m.If(self.tick):
            m.d.sync += tick_pending.eq(1)
        m.d.comb += self.tick_pending.eq(tick_pending)

        record = Signal(sack_chunk_layout())
        m.d.comb += [tsn_map.index.eq(self.chunks.payload.association), tsn_map.ssn.eq(self.chunks.payload.tsn)]

        # The SACK under construction.
        sack = Signal.like(self.sacks.payload)
        row = Signal(range(rows))
        rest = Signal(window_bits)       # the map's bits not yet turned into Gap Ack Blocks
        lowest = Signal(window_bits)     # rest's lowest set bit
        m.d.comb += [self.sacks.payload.eq(sack), tsn_map.peek_index.eq(row)]

        parts = [Signal(range(9), name=f"held_part_{i}") for i in range((window_bits + 7) // 8)]
        pairs = [Signal(range(17), name=f"held_pair_{i}") for i in range((len(parts) + 1) // 2)]
        held = Signal(range(window_bits + 1))
        held_total = Signal(len(held) + 16)
        row_held_bytes, row_window = Signal(16), Signal(32)
        slot_bits = max(1, (self.duplicate_tsns - 1).bit_length())
        duplicate_slot = Signal(rows << slot_bits)   # one-hot: the (row, slot) a duplicate would take
        duplicate_room = Signal()
        duplicate_next = Signal(range(self.duplicate_tsns + 2))
        # FIND's exits as flags of the unit's own, not compares of the SACK register (placed by its consumer).
        rest_empty, gaps_full = Signal(), Signal()
        due_any = Signal()
        row_in_packet, row_gap_start, row_at_once, row_one_packet, row_armed = (
            Signal(name=f"row_{name}") for name in ("in_packet", "gap_start", "at_once", "one_packet", "armed"))
        due_row = Signal(range(rows))
        for index in reversed(range(rows)):          # the lowest due association
            with m.If(due[index]):
                m.d.comb += [due_any.eq(1), due_row.eq(index)]

        # Gap Ack Block from rest's lowest run: map bit i is TSN Cumulative TSN Ack + 1 + i (offset i + 1).
        # FIND takes the lowest bit (a carry chain), SPAN the bit past its run (another), RUN encodes both.
        total = Signal(window_bits + 1)
        above = Signal(window_bits + 1)      # the bit just past the run (bit window_bits: the run reaches the top)
        m.d.comb += total.eq(rest + lowest)
        start_index, end_index = _position(lowest, window_bits), _position(above, window_bits + 1)

        # The state one-hot, a flip-flop per state: no decode of a binary state fanned out to every
        # enable, and the next state a function of one flag per state. `idle` (IDLE's flag) makes the
        # chunks' ready (the input queue's, placed apart) one LUT of flip-flops.
        states = ("IDLE", "LOOKUP_1", "LOOKUP_2", "DECIDE", "PEEK", "LOAD", "COUNT", "TOTAL", "PRODUCT", "WINDOW",
                  "FIND", "SPAN", "RUN", "SEND")
        in_state = {name: Signal(init=name == "IDLE", name=f"in_{name.lower()}") for name in states}
        idle = in_state["IDLE"]

        def go(m, current, state):
            # Only the two flags change, so each flag's next value gathers only the moves into and out of it.
            m.d.sync += [in_state[current].eq(0), in_state[state].eq(1)]

        def start_sack(m, current, which):
            m.d.sync += [row.eq(which), sack.association.eq(which),
                         one_packet[which].eq(0), armed[which].eq(0), due[which].eq(0), at_once[which].eq(0)]
            go(m, current, "PEEK")

        # One state's flag is set: its block alone acts (each an If of its own, no priority chain).
        with m.If(in_state["IDLE"]):        # in the model's order: a tick's SACKs before what follows it
            with m.If(tick_pending):
                m.d.sync += tick_pending.eq(self.tick)
                for index in range(rows):
                    with m.If(armed[index]):
                        with m.If(remaining[index] == 1):
                            m.d.sync += [armed[index].eq(0), due[index].eq(1)]
                        with m.Else():
                            m.d.sync += remaining[index].eq(remaining[index] - 1)
            with m.Elif(due_any):
                start_sack(m, "IDLE", due_row)
            with m.Elif(self.resets.valid & self.resets.payload.flush):
                m.d.comb += self.resets.ready.eq(1)      # the owed SACK now; the row unchanged
                with m.If(armed[self.resets.payload.association] & enabled[self.resets.payload.association]):
                    start_sack(m, "IDLE", self.resets.payload.association)
            with m.Elif(self.resets.valid):
                reset = self.resets.payload
                m.d.comb += [self.resets.ready.eq(1), tsn_map.reset.eq(1),
                             tsn_map.reset_index.eq(reset.association),
                             tsn_map.reset_first.eq(reset.cumulative_tsn + 1)]
                m.d.sync += [
                    in_packet[reset.association].eq(0), gap_start[reset.association].eq(0),
                    at_once[reset.association].eq(0), one_packet[reset.association].eq(0),
                    armed[reset.association].eq(0), due[reset.association].eq(0),
                    duplicate_count[reset.association].eq(0), delay[reset.association].eq(reset.delay),
                    window[reset.association].eq(reset.window),
                    held_bytes[reset.association].eq(reset.held_bytes),
                    enabled[reset.association].eq(reset.enabled),
                ]
            with m.Else():
                with m.If(self.chunks.valid & enabled[self.chunks.payload.association]):
                    m.d.sync += record.eq(self.chunks.payload)
                    go(m, "IDLE", "LOOKUP_1")
        with m.If(in_state["LOOKUP_1"]):
            go(m, "LOOKUP_1", "LOOKUP_2")
        with m.If(in_state["LOOKUP_2"]):     # the row's duplicate slot, decoded a cycle before it is written
            count = duplicate_count[record.association]
            # The row's flags, chosen here: nothing writes them before DECIDE, which then reads flip-flops.
            m.d.sync += [row_in_packet.eq(in_packet[record.association]),
                         row_gap_start.eq(gap_start[record.association]),
                         row_at_once.eq(at_once[record.association]),
                         row_one_packet.eq(one_packet[record.association]),
                         row_armed.eq(armed[record.association])]
            m.d.sync += [duplicate_room.eq(count < self.duplicate_tsns),
                         duplicate_slot.eq(Mux(count < self.duplicate_tsns,
                                               1 << Cat(count[:slot_bits], record.association), 0)),
                         duplicate_next.eq(count + 1)]
            go(m, "LOOKUP_2", "DECIDE")
        with m.If(in_state["DECIDE"]):
            a = record.association
            duplicate, beyond = tsn_map.duplicate, tsn_map.beyond
            m.d.comb += tsn_map.commit.eq(~duplicate & ~beyond)
            gap_at_start = Signal()
            urgent = Signal()
            m.d.comb += [gap_at_start.eq(Mux(row_in_packet, row_gap_start, tsn_map.pending)),
                         urgent.eq(row_at_once | duplicate | beyond | record.immediate)]
            with m.If(duplicate):
                for index in range(rows):
                    for slot in range(self.duplicate_tsns):
                        with m.If(duplicate_slot[index * (1 << slot_bits) + slot]):
                            m.d.sync += duplicates[index][slot].eq(record.tsn)
                with m.If(duplicate_room):
                    m.d.sync += duplicate_count[a].eq(duplicate_next)
                with m.Else():
                    m.d.sync += self.duplicates_unlisted.eq(self.duplicates_unlisted + 1)
            with m.If(record.packet_end):
                m.d.sync += in_packet[a].eq(0)
                with m.If(urgent | tsn_map.pending_after | gap_at_start | row_one_packet):
                    start_sack(m, "DECIDE", a)
                with m.Else():
                    m.d.sync += one_packet[a].eq(1)
                    with m.If(~row_armed):
                        m.d.sync += [armed[a].eq(1), remaining[a].eq(delay[a])]
                    go(m, "DECIDE", "IDLE")
            with m.Else():
                m.d.sync += [in_packet[a].eq(1), gap_start[a].eq(gap_at_start), at_once[a].eq(urgent)]
                go(m, "DECIDE", "IDLE")
        with m.If(in_state["PEEK"]):        # the map's row: its address on this cycle, its data on the next
            m.d.sync += [sack.duplicate_count.eq(duplicate_count[row]), duplicate_count[row].eq(0)]
            for i in range(self.duplicate_tsns):
                m.d.sync += sack.duplicates[i].eq(duplicates[row][i])
            go(m, "PEEK", "LOAD")
        with m.If(in_state["LOAD"]):
            m.d.sync += [sack.cumulative_tsn_ack.eq(tsn_map.peek_base - 1), rest.eq(tsn_map.peek_seen),
                         sack.gap_count.eq(0), rest_empty.eq(tsn_map.peek_seen == 0),
                         gaps_full.eq(self.gap_blocks == 0)]
            m.d.sync += [part.eq(sum(tsn_map.peek_seen[bit] for bit in range(8 * i, min(8 * i + 8, window_bits))))
                         for i, part in enumerate(parts)]
            go(m, "LOAD", "COUNT")
        with m.If(in_state["COUNT"]):       # a_rwnd (RFC 4960 6.2): the window less what waits past a gap
            m.d.sync += [pair.eq(sum(parts[2 * i:2 * i + 2])) for i, pair in enumerate(pairs)]
            m.d.sync += [row_held_bytes.eq(held_bytes[row]), row_window.eq(window[row])]
            go(m, "COUNT", "TOTAL")
        with m.If(in_state["TOTAL"]):       # the TSNs held past a gap, summed in two steps
            m.d.sync += held.eq(sum(pairs))
            go(m, "TOTAL", "PRODUCT")
        with m.If(in_state["PRODUCT"]):
            m.d.sync += held_total.eq(held * row_held_bytes)   # both factors flip-flops
            go(m, "PRODUCT", "WINDOW")
        with m.If(in_state["WINDOW"]):
            m.d.sync += sack.a_rwnd.eq(Mux(held_total > row_window, 0, row_window - held_total))
            go(m, "WINDOW", "FIND")
        with m.If(in_state["FIND"]):
            with m.If(rest_empty | gaps_full):
                go(m, "FIND", "SEND")
            with m.Else():
                m.d.sync += lowest.eq(rest & -rest)
                go(m, "FIND", "SPAN")
        with m.If(in_state["SPAN"]):
            m.d.sync += [above.eq(total & ~Cat(rest, Const(0, 1))), rest.eq(total[:window_bits] & rest)]
            go(m, "SPAN", "RUN")
        with m.If(in_state["RUN"]):
            gap = sack.gaps[sack.gap_count]
            m.d.sync += [gap.start.eq(start_index + 1), gap.end.eq(end_index), rest_empty.eq(rest == 0),
                         sack.gap_count.eq(sack.gap_count + 1), gaps_full.eq(sack.gap_count + 1 == self.gap_blocks)]
            go(m, "RUN", "FIND")
        with m.If(in_state["SEND"]):
            m.d.comb += self.sacks.valid.eq(1)
            with m.If(self.sacks.ready):
                go(m, "SEND", "IDLE")
        # A chunk is taken in IDLE when nothing before it waits (the Else of IDLE's chain).
        m.d.comb += self.chunks.ready.eq(idle & ~tick_pending & ~due_any & ~self.resets.valid)
        return m

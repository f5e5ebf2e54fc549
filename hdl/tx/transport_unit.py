"""The transmit engine's transport unit: the peer's SACKs processed in gateware, per association (RFC 4960
6.1, 6.2.1, 6.3, 7.2, 8.1; RFC 9260 7.2.4). Its golden model is :class:`model.engine.transport.TransportUnit`,
whose docstring says what the unit decides where the RFC leaves room; the two make the same records in the
same order, tick for tick, and keep the same state.

Inputs, each a stream taken while the unit is idle:

* ``resets`` writes an association's row (the model's ``reset``): nothing sent, the first new chunk takes
  ``initial_tsn``; the row's first LIMIT follows.
* ``sent``: a new DATA chunk left (the model's ``sent``), at the unit's current tick.
* ``sacks``: a SACK chunk's fields (the model's ``sack``: the first ``gap_blocks`` Gap Ack Blocks, with
  ``gap_count`` the number the chunk carried so the unit knows when it read only some) or, with
  ``shutdown``, a SHUTDOWN's Cumulative TSN Ack (the model's ``shutdown``: the row's last a_rwnd, no block).
* ``tick``: one cycle per tick of the engine's timer (:data:`abi.rx.SACK_TICK_CYCLES` cycles); the unit
  counts it and, before the next input, runs every row's timers (T3-rtx expiry, the idle decay of cwnd),
  lowest association first.

``records`` carries one :func:`transport_record_layout` per decision, in the model's order: RETIRE (the
Cumulative TSN Ack advanced: the ring's ACK), RESEND (the ring's RESEND), LIMIT (the ring's LIMIT), and
the two that stop a row and go to the host: FAILURE (RFC 4960 8.1) and VIOLATION (a Cumulative TSN Ack past
the highest TSN sent). ``peek`` selects the row shown on ``state`` (its variables, as the model's
``state``), ``now`` is the tick count.

Structure: per row a :func:`transport_row_layout` register, copied to a working register when an input
or a timer concerns the row and back when the unit is done with it (so one set of arithmetic serves every
row; rows in block RAM keep this shape). Per chunk in flight a
:func:`chunk_layout` word in one memory of ``associations * ring_tsns`` words, addressed by (association,
TSN mod ``ring_tsns``) as the ring's records are. The rules that look at chunks walk them in TSN order,
three cycles a chunk (the address, then the word registered with the flags the rule needs, then the
decision and the write): the retirement walk over the chunks the
Cumulative TSN Ack passes; the gap walk up to the highest block end read or the highest chunk a block had
acknowledged, whichever is further; the miss walk up to the highest TSN newly acknowledged (or the last
block's end in Fast Recovery, or the last chunk reneged); the retransmission walks from the lowest chunk
until the first marked one, or until cwnd or Max.Burst stops them. The window for new data (6.1 A, B) is
counted down chunk by chunk from cwnd less the flight and from rwnd, at most Max.Burst of them, instead
of divided.

Timing (built for the RNIC's 156.25 MHz clock; measured on the results page): every state computes from flip-flops (the
row, the event's registered input, the walk's registered word and flags) with at most one carry chain
before a register, and a row field's input is a register wherever a field has many writers: a chunk's
effect on the row's counts (flight, outstanding bytes, marked and gap-acknowledged chunks, rwnd, the bytes
newly acknowledged) is decided on the walk's edit cycle as a set of registered choices and applied on the
next one; a formula of several steps or a bound (RTO from SRTT and RTTVAR and its clamp, 7.2.1's initial
cwnd, 7.2.3's halving, 6.3.3's back-off, the T3-rtx and idle deadlines, the walk's TSN) is a register
computed every cycle from the row and copied by a state that comes once it has settled; a decision of
several compares is registered a state before it is acted on; one state loads a row, for every input and
the timer sweep; the records leave through a skid :class:`~hdl.stream.queue.Queue`, so the consumer's
``ready`` reaches no decision.

Rate: a SACK of no Gap Ack Block that acknowledges k chunks takes about 3k + 46 cycles (the common case, two
chunks: 52 cycles, a seventh of the 370 cycles two full-size packets take at W = 8); with blocks, two more
walks of up to ``ring_tsns`` chunks. A SACK waits in the receive engine's queue while the unit works.

Bounds: TSNs, byte counts and ticks are 32 bits; SRTT and RTTVAR are kept in eighths of a tick in 32 bits
(an RTT of up to 2**29 ticks, over five days); the error counter saturates at 255 (Association.Max.Retrans
is at most 254).
"""

from amaranth.lib import enum

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from abi.rx import ASSOCIATION_BITS
from abi.tx import RetransmitCause, TransportOpcode, peer_sack_layout, transport_record_layout, transport_write_layout
from hdl.layout import enum_shape, struct_layout
from hdl.stream.queue import Queue

__all__ = ["TransportUnit", "transport_reset_layout", "transport_sent_layout", "transport_row_layout", "chunk_layout"]

_TSN_BITS = 32
_BYTES_BITS = 32
_TICK_BITS = 32
_EIGHTHS = 8                  # SRTT, RTTVAR in eighths of a tick (the model's _EIGHTHS)


def transport_reset_layout() -> data.StructLayout:
    """A row write (the model's ``reset``): :func:`abi.tx.transport_write_layout` and the first new TSN."""
    return data.StructLayout({**transport_write_layout().members, "initial_tsn": unsigned(_TSN_BITS)})


def transport_sent_layout() -> data.StructLayout:
    """A new DATA chunk of ``size`` bytes of user data took ``tsn`` at tick ``sent_tick`` (the model's ``sent``)."""
    return data.StructLayout({"association": unsigned(ASSOCIATION_BITS), "tsn": unsigned(_TSN_BITS),
                              "size": unsigned(16), "sent_tick": unsigned(_TICK_BITS)})


def transport_row_layout() -> data.StructLayout:
    """One association's variables (the model's ``_Row`` less its ring)."""
    bytes_, ticks, tsn = unsigned(_BYTES_BITS), unsigned(_TICK_BITS), unsigned(_TSN_BITS)
    return data.StructLayout({
        "written": 1, "failed": 1,
        "cumulative_tsn": tsn, "length": unsigned(16), "limit": tsn,
        "mtu": unsigned(16), "chunk_bytes": unsigned(16),
        "rto_min": ticks, "rto_max": ticks, "max_retrans": unsigned(8), "max_burst": unsigned(4),
        "cwnd": bytes_, "ssthresh": bytes_, "rwnd": bytes_, "peer_a_rwnd": bytes_, "partial_bytes_acked": bytes_,
        "flight_size": bytes_, "outstanding_bytes": bytes_,
        "fast_recovery": 1, "fast_recovery_exit": tsn,
        "srtt_valid": 1, "srtt_eighths": unsigned(32), "rttvar_eighths": unsigned(32), "rto": ticks,
        "timed": 1, "timed_tsn": tsn,
        "t3_running": 1, "t3_deadline": ticks,
        "one_packet_until_ack": 1, "error_count": unsigned(8),
        "idle_running": 1, "idle_deadline": ticks,
        "duplicate_tsns_reported": unsigned(32),
        "gap_acked_count": unsigned(16),    # chunks a Gap Ack Block acknowledges
        "marked_count": unsigned(16),       # chunks waiting for retransmission
        "gap_extent": unsigned(16),         # one past the highest gap-acknowledged chunk's index
    })


def chunk_layout() -> data.StructLayout:
    """One chunk in flight (the model's ``_Chunk``); ``reneged`` lives from a SACK's gap walk to its miss walk."""
    return data.StructLayout({
        "size": unsigned(16), "sent_tick": unsigned(_TICK_BITS),
        "retransmitted": 1, "in_flight": 1, "gap_acked": 1, "marked": enum_shape(RetransmitCause),
        "miss_indications": unsigned(2), "fast_retransmitted": 1, "reneged": 1,
    })


def _serial_lt(a, b):
    """RFC 1982 3.2 for 32-bit serial numbers (model.sctp.packet.serial_lt): b - a in 1 .. 2**31 - 1."""
    difference = (b - a)[:_TSN_BITS]
    return (difference != 0) & ~difference[_TSN_BITS - 1]


def _at_most(value, bound):
    return Mux(value > bound, bound, value)


def _at_least(value, bound):
    return Mux(value < bound, bound, value)


def _less_floor(value, amount):
    """max(value - amount, 0)."""
    return Mux(value > amount, value - amount, 0)


class _Walk(enum.IntEnum, shape=3):
    RETIRE = 0         # the chunks the Cumulative TSN Ack passes
    GAP = 1            # Gap Ack Blocks: newly acknowledged, reneged
    MISS = 2           # miss indications, fast retransmit marks
    FIRST_MARKED = 3   # retransmit the lowest marked chunk
    MARK_ALL = 4       # T3-rtx expiry: every chunk not gap-acknowledged
    RELEASE = 5        # retransmissions as cwnd and Max.Burst allow


class _Load(enum.IntEnum, shape=2):
    SENT = 0
    SACK = 1
    TIMER = 2


class TransportUnit(wiring.Component):
    """The transport unit of ``associations`` rows, ``ring_tsns`` chunks in flight each (see the module docs)."""

    def __init__(self, associations: int = 2, *, ring_tsns: int = 64, gap_blocks: int = 4):
        if ring_tsns < 2 or ring_tsns & (ring_tsns - 1):
            raise ValueError(f"ring_tsns must be a power of two of at least 2, not {ring_tsns}")
        if not 1 <= associations <= 1 << ASSOCIATION_BITS or gap_blocks < 1:
            raise ValueError(f"associations {associations} (1..{1 << ASSOCIATION_BITS}), gap_blocks {gap_blocks} (>= 1)")
        self.associations, self.ring_tsns, self.gap_blocks = associations, ring_tsns, gap_blocks
        super().__init__({
            "resets": In(stream.Signature(transport_reset_layout())),
            "sent": In(stream.Signature(transport_sent_layout())),
            "sacks": In(stream.Signature(struct_layout(peer_sack_layout(gap_blocks)))),
            "tick": In(1),
            "records": Out(stream.Signature(struct_layout(transport_record_layout()))),
            "peek": In(range(associations)),
            "state": Out(transport_row_layout()),
            "now": Out(_TICK_BITS),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        rows, ring = self.associations, self.ring_tsns
        slot_bits = (ring - 1).bit_length()
        row_regs = Array(Signal(transport_row_layout(), name=f"row_{index}") for index in range(rows))
        m.d.comb += self.state.eq(row_regs[self.peek])

        chunks = m.submodules.chunks = memory.Memory(shape=chunk_layout(), depth=rows * ring, init=[])
        chunk_read, chunk_write = chunks.read_port(), chunks.write_port()

        now = Signal(_TICK_BITS)
        tick_pending = Signal()
        m.d.comb += self.now.eq(now)
        with m.If(self.tick):
            m.d.sync += tick_pending.eq(1)

        w = Signal(transport_row_layout())           # the working copy of row `a`
        a = Signal(range(rows))
        loading = Signal(_Load)                     # what the row is loaded for
        reset = Signal(transport_reset_layout())
        sack = Signal(struct_layout(peer_sack_layout(self.gap_blocks)))
        sent = Signal(transport_sent_layout())

        # The records leave through a skid queue, whose ready is a flip-flop.
        out = m.submodules.out = Queue(struct_layout(transport_record_layout()), 2)
        wiring.connect(m, out.source, wiring.flipped(self.records))
        record = out.sink.payload
        m.d.comb += record.association.eq(a)

        # The T3-rtx deadline a timer started now would have; registered, so it is read two cycles or more
        # after the row is loaded or its RTO changes (every state that reads it is).
        deadline = Signal(_TICK_BITS)
        m.d.sync += deadline.eq(now + w.rto)

        # Per event.
        advance = Signal(_TSN_BITS)
        advanced = Signal()                             # advance != 0
        violation = Signal()                            # advance > the chunks sent
        utilized_sum = Signal(_BYTES_BITS + 1)         # the flight before the SACK and one MTU (7.2.1, 7.2.2)
        fully_utilized = Signal()
        increment = Signal(_BYTES_BITS)
        in_fast_recovery = Signal()
        newly_acked = Signal(_BYTES_BITS)
        gap_newly_acked = Signal()
        highest_newly_acked = Signal(16)
        newly_marked = Signal()
        reneged_any = Signal()
        reneged_extent = Signal(16)
        block_valid = Signal(self.gap_blocks)
        block_end = Array(Signal(16, name=f"block_end_{b}") for b in range(self.gap_blocks))
        judged = Signal(16)
        highest_less_one = Signal(16)
        sample_valid = Signal()
        sample = Signal(32)
        difference = Signal(32)
        srtt_part = Signal(32)
        rttvar_part = Signal(32)
        rto_sum = Signal(33)
        packets = Signal(5)
        always_limit = Signal()
        first_marked = Signal(16)
        # 6.1 A, B: the chunks the windows still allow, counted down from cwnd - flight and rwnd.
        sending = Signal()                            # no retransmission waits, not one packet until an ack
        burst_room = Signal(5)
        ring_room = Signal(range(ring + 1))
        room = Signal(5)
        new_chunks = Signal(5)
        cwnd_left = Signal(signed(_BYTES_BITS + 2))
        rwnd_left = Signal(signed(_BYTES_BITS + 2))
        one_more = Signal()                           # the windows take one more chunk
        skip_walk = Signal()                          # no retransmission to release
        flight_empty = Signal()
        in_order = Signal()                        # the chunk sent is the row's next, below its LIMIT
        sent_usable = Signal()                     # the row is written, not failed, has room, the TSN within the LIMIT
        sent_previous = Signal(_TSN_BITS)          # the chunk sent's TSN less one
        m.d.sync += sent_previous.eq(sent.tsn - 1)
        limit_next = Signal(_TSN_BITS)
        decay_due = Signal()
        cwnd_above_floor = Signal()
        halved = Signal(_BYTES_BITS)
        exhausted = Signal()                          # the error count has reached Association.Max.Retrans
        all_acknowledged = Signal()                 # every chunk in flight gap-acknowledged
        chunks_left = Signal()
        reduce = Signal()                           # 7.2.4 step 2: a new Fast Recovery
        t3_restart = Signal()
        above_cwnd = Signal()                       # partial_bytes_acked > cwnd
        reached_cwnd = Signal()                     # partial_bytes_acked >= cwnd
        acked_less_cwnd = Signal(_BYTES_BITS)
        cwnd_grown = Signal(_BYTES_BITS)
        scan = Signal(range(rows + 1))             # the timer sweep's row

        # The walk: chunk `index` of row `a`, TSN `walk_tsn` (cumulative + 1 + index), at `offset` (index + 1)
        # from the Cumulative TSN Ack; its address is set on WALK_CHECK, its word registered on WALK_READ with
        # the flags the decision needs, and decided on WALK_EDIT.
        walk = Signal(_Walk)
        index = Signal(16)
        offset = Signal(16)
        walk_end = Signal(16)
        after_walk = Signal(8)
        # Free-running registers of the row, read two cycles or more after the row is loaded or changes them.
        walk_base = Signal(_TSN_BITS)                   # cumulative + 1
        highest_sent = Signal(_TSN_BITS)                # cumulative + length
        walk_tsn = Signal(_TSN_BITS)                    # walk_base + index, from WALK_READ on
        m.d.sync += [walk_base.eq(w.cumulative_tsn + 1), highest_sent.eq(w.cumulative_tsn + w.length),
                     walk_tsn.eq(walk_base + index)]
        slot = Signal(slot_bits)
        m.d.comb += [chunk_read.addr.eq(Cat(slot, a)), chunk_write.addr.eq(chunk_read.addr)]
        chunk = Signal(chunk_layout())
        flags = Signal(data.StructLayout({
            "covered": 1,       # a read Gap Ack Block covers the chunk
            "below": 1,         # index < highest_newly_acked (the miss walk's bound)
            "judged": 1,        # index < judged (a block read could have covered it)
            "timed": 1,         # the chunk is the one timed (6.3.1)
            "timed_after": 1,   # the timed chunk is this one or a later one (6.3.1 C5)
            "stop": 1,          # Max.Burst or cwnd stops the release walk (6.1 C, D)
        }))
        edited = Signal(chunk_layout())
        m.d.comb += chunk_write.data.eq(edited)

        def covered(at):
            """A read Gap Ack Block covers TSN Cumulative TSN Ack + `at`."""
            return Cat(*(block_valid[b] & (sack.gaps[b].start <= at) & (at <= block_end[b])
                         for b in range(self.gap_blocks))).any()

        def due(running, when):
            return running & ~_serial_lt(now, when)      # when <= now (serial)

        def measure():
            """6.3.1: the timed chunk, acknowledged for the first time, gives the RTT sample."""
            with m.If(flags.timed):
                m.d.sync += [w.timed.eq(0), sample_valid.eq(1),
                             sample.eq(Cat(Const(0, 3), (now - chunk.sent_tick)[:29]))]

        def retransmit():
            """The model's ``_retransmit`` of `chunk` (marked, so not gap-acknowledged)."""
            m.d.comb += [out.sink.valid.eq(1), record.opcode.eq(TransportOpcode.RESEND),
                         record.tsn.eq(walk_tsn), record.cause.eq(chunk.marked)]
            with m.If(out.sink.ready):
                m.d.comb += [chunk_write.en.eq(1), edited.marked.eq(RetransmitCause.NONE),
                             edited.in_flight.eq(1), edited.retransmitted.eq(1), edited.sent_tick.eq(now)]
                m.d.sync += [delta.marked_dec.eq(1), delta.flight_add.eq(1), delta.outstanding_add.eq(1),
                             delta.rwnd_sub.eq(1)]
                with m.If(flags.timed_after):
                    m.d.sync += w.timed.eq(0)                              # 6.3.1 C5
                with m.If(~w.t3_running):
                    m.d.sync += [w.t3_running.eq(1), w.t3_deadline.eq(deadline)]     # 6.3.2 R1
            return out.sink.ready

        def mark(cause):
            """The model's ``_mark``: out of the flight, its bytes back in rwnd (6.2.1 C)."""
            m.d.comb += [edited.marked.eq(cause), edited.in_flight.eq(0)]
            with m.If(chunk.in_flight):
                m.d.sync += delta.flight_sub.eq(1)
            with m.If(chunk.marked == RetransmitCause.NONE):
                m.d.sync += [delta.rwnd_add.eq(1), delta.marked_inc.eq(1), delta.outstanding_sub.eq(1)]

        def start_walk(kind, end, then):
            m.d.sync += [walk.eq(kind), index.eq(0), offset.eq(1), walk_end.eq(end), after_walk.eq(then)]
            m.next = "WALK_CHECK"

        def emit(opcode, tsn, first_tsn=0, error_count=0):
            m.d.comb += [out.sink.valid.eq(1), record.opcode.eq(opcode), record.tsn.eq(tsn),
                         record.first_tsn.eq(first_tsn), record.error_count.eq(error_count)]
            return out.sink.ready

        # After a walk the FSM goes to the state numbered `after_walk`.
        AFTER = {name: number for number, name in enumerate([
            "SACK_RETIRED", "SACK_GAPS_DONE", "SACK_MISSES_DONE", "SACK_FAST_DONE", "RELEASE_COUNT",
            "EXPIRE_MARKED", "EXPIRE_RETRANSMITTED"])}

        # Results computed every cycle from registers, each read by a state a cycle or more after its operands
        # settle, so a row field's input is a register, not an adder or a bound.
        reset_rto_floor, reset_rto = Signal(_TICK_BITS), Signal(_TICK_BITS)        # RTO.Initial within Min, Max
        reset_cwnd_floor, reset_cwnd = Signal(_BYTES_BITS), Signal(_BYTES_BITS)    # 7.2.1's initial cwnd
        rto_formula, rto_floor, rto_clamped = Signal(_TICK_BITS), Signal(_TICK_BITS), Signal(_TICK_BITS)
        rto_doubled = Signal(_TICK_BITS)                                          # 6.3.3 E2
        idle_next = Signal(_TICK_BITS)
        m.d.sync += [
            reset_rto_floor.eq(_at_least(reset.rto_initial, reset.rto_min)),
            reset_rto.eq(_at_most(reset_rto_floor, reset.rto_max)),
            reset_cwnd_floor.eq(_at_least(reset.mtu * 2, 4380)),
            reset_cwnd.eq(_at_most(reset_cwnd_floor, reset.mtu * 4)),
            rto_formula.eq((rto_sum + (w.rttvar_eighths << 2)) >> 3),                # 6.3.1 C3
            rto_floor.eq(_at_least(rto_formula, w.rto_min)),
            rto_clamped.eq(_at_most(rto_floor, w.rto_max)),
            rto_doubled.eq(_at_most(w.rto << 1, w.rto_max)),
            halved.eq(_at_least(w.cwnd >> 1, w.mtu << 2)),                          # 7.2.3
            cwnd_above_floor.eq(w.cwnd > w.mtu << 2),
            idle_next.eq(w.idle_deadline + w.rto),
        ]

        # A chunk's effect on the row's counts, decided on WALK_EDIT and applied on the next cycle (WALK_CHECK or
        # WALK_DONE, which write none of them): one adder a field, its operands and choice from flip-flops.
        delta = Signal(data.StructLayout({
            "flight_add": 1, "flight_sub": 1, "outstanding_add": 1, "outstanding_sub": 1,
            "marked_inc": 1, "marked_dec": 1, "gap_inc": 1, "gap_dec": 1, "rwnd_add": 1, "rwnd_sub": 1,
            "acked": 1,
        }))
        m.d.sync += delta.eq(0)
        size = chunk.size
        with m.If(delta.flight_add | delta.flight_sub):
            m.d.sync += w.flight_size.eq(Mux(delta.flight_add, w.flight_size + size, w.flight_size - size))
        with m.If(delta.outstanding_add | delta.outstanding_sub):
            m.d.sync += w.outstanding_bytes.eq(Mux(delta.outstanding_add, w.outstanding_bytes + size,
                                                   w.outstanding_bytes - size))
        with m.If(delta.marked_inc | delta.marked_dec):
            m.d.sync += w.marked_count.eq(Mux(delta.marked_inc, w.marked_count + 1, w.marked_count - 1))
        with m.If(delta.gap_inc | delta.gap_dec):
            m.d.sync += w.gap_acked_count.eq(Mux(delta.gap_inc, w.gap_acked_count + 1, w.gap_acked_count - 1))
        with m.If(delta.rwnd_add | delta.rwnd_sub):
            m.d.sync += w.rwnd.eq(Mux(delta.rwnd_add, w.rwnd + size, _less_floor(w.rwnd, size)))
        with m.If(delta.acked):
            m.d.sync += newly_acked.eq(newly_acked + size)

        m.d.comb += self.idle.eq(0)
        with m.FSM() as fsm:
            # The chunk's slot: a new chunk's by its TSN, a walk's by walk_base + index (a few bits of an adder).
            m.d.comb += slot.eq(Mux(fsm.ongoing("SENT_APPLY"), sent.tsn[:slot_bits], (walk_base + index)[:slot_bits]))
            with m.State("IDLE"):
                m.d.comb += self.idle.eq(~tick_pending & (out.level == 0))
                with m.If(tick_pending):
                    m.d.sync += [tick_pending.eq(self.tick), now.eq(now + 1), scan.eq(0)]
                    m.next = "TIMER_SCAN"
                with m.Elif(self.resets.valid):
                    m.d.comb += self.resets.ready.eq(1)
                    m.d.sync += [a.eq(self.resets.payload.association), reset.eq(self.resets.payload)]
                    m.next = "RESET_FLOOR"
                with m.Elif(self.sent.valid):
                    m.d.comb += self.sent.ready.eq(1)
                    m.d.sync += [a.eq(self.sent.payload.association), sent.eq(self.sent.payload)]
                    m.d.sync += loading.eq(_Load.SENT)
                    m.next = "LOAD"
                with m.Elif(self.sacks.valid):
                    m.d.comb += self.sacks.ready.eq(1)
                    m.d.sync += [a.eq(self.sacks.payload.association), sack.eq(self.sacks.payload)]
                    m.d.sync += loading.eq(_Load.SACK)
                    m.next = "LOAD"

            # -- reset: the row's first values, then its first LIMIT -------------------
            with m.State("RESET_FLOOR"):               # reset_rto_floor, reset_cwnd_floor
                m.next = "RESET_CEILING"
            with m.State("RESET_CEILING"):             # reset_rto, reset_cwnd
                m.next = "RESET_LOAD"
            with m.State("RESET_LOAD"):
                initial = Signal(transport_row_layout())
                m.d.comb += [
                    initial.written.eq(1), initial.cumulative_tsn.eq(reset.initial_tsn - 1),
                    initial.limit.eq(reset.initial_tsn - 1),
                    initial.mtu.eq(reset.mtu), initial.chunk_bytes.eq(reset.chunk_bytes),
                    initial.rto_min.eq(reset.rto_min), initial.rto_max.eq(reset.rto_max),
                    initial.max_retrans.eq(reset.max_retrans), initial.max_burst.eq(reset.max_burst),
                    initial.cwnd.eq(reset_cwnd), initial.ssthresh.eq(reset.peer_a_rwnd),
                    initial.rwnd.eq(reset.peer_a_rwnd), initial.peer_a_rwnd.eq(reset.peer_a_rwnd),
                    initial.rto.eq(reset_rto),
                ]
                m.d.sync += [w.eq(initial), packets.eq(0), always_limit.eq(1)]
                m.next = "RELEASE"

            # -- sent ------------------------------------------------------------------
            # -- the row of an input or of the timer sweep: one load, then its rules -----
            with m.State("LOAD"):
                m.d.sync += w.eq(row_regs[a])
                with m.Switch(loading):
                    with m.Case(_Load.SENT):
                        m.next = "SENT_CHECK"
                    with m.Case(_Load.SACK):
                        m.next = "SACK_CHECK"
                    with m.Case(_Load.TIMER):
                        m.next = "TIMER_ROW"
            with m.State("SENT_CHECK"):
                # The engine sends a new TSN only below the LIMIT and in order (the model raises otherwise).
                m.d.sync += sent_usable.eq(w.written & ~w.failed & (w.length < ring) & ~_serial_lt(w.limit, sent.tsn))
                m.next = "SENT_ORDER"
            with m.State("SENT_ORDER"):                 # (highest_sent follows the row loaded)
                m.d.sync += in_order.eq(sent_usable & (sent_previous == highest_sent))
                m.next = "SENT_APPLY"
            with m.State("SENT_APPLY"):
                size = sent.size
                with m.If(in_order):
                    m.d.comb += [chunk_write.en.eq(1), edited.size.eq(size),
                                 edited.sent_tick.eq(sent.sent_tick), edited.in_flight.eq(1)]
                    m.d.sync += [w.length.eq(w.length + 1), w.rwnd.eq(_less_floor(w.rwnd, size)),   # 6.2.1 B
                                 w.flight_size.eq(w.flight_size + size),
                                 w.outstanding_bytes.eq(w.outstanding_bytes + size), w.idle_running.eq(0)]
                    with m.If(~w.timed):
                        m.d.sync += [w.timed.eq(1), w.timed_tsn.eq(sent.tsn)]               # 6.3.1 C4
                    with m.If(~w.t3_running):
                        m.d.sync += [w.t3_running.eq(1), w.t3_deadline.eq(deadline)]        # 6.3.2 R1
                m.next = "STORE"

            # -- SACK ------------------------------------------------------------------
            with m.State("SACK_CHECK"):
                with m.If(sack.shutdown):                                   # 9.2: the last a_rwnd, no block
                    m.d.sync += [sack.a_rwnd.eq(w.peer_a_rwnd), sack.gap_count.eq(0), sack.duplicate_count.eq(0)]
                m.d.sync += [advance.eq(sack.cumulative_tsn_ack - w.cumulative_tsn),
                             utilized_sum.eq(w.flight_size + w.mtu),
                             in_fast_recovery.eq(w.fast_recovery), newly_acked.eq(0), gap_newly_acked.eq(0),
                             newly_marked.eq(0), reneged_any.eq(0), reneged_extent.eq(0), sample_valid.eq(0),
                             packets.eq(0), always_limit.eq(0)]
                with m.If(~w.written | w.failed | _serial_lt(sack.cumulative_tsn_ack, w.cumulative_tsn)):
                    m.next = "IDLE"                                         # 6.2.1 D i: dropped
                with m.Else():
                    m.next = "SACK_VIOLATION_CHECK"
            with m.State("SACK_VIOLATION_CHECK"):
                m.d.sync += [advanced.eq(advance != 0), violation.eq(advance > w.length)]
                m.next = "SACK_RETIRE"
            with m.State("SACK_RETIRE"):
                with m.If(violation):
                    with m.If(emit(TransportOpcode.VIOLATION, highest_sent, sack.cumulative_tsn_ack)):
                        m.d.sync += [w.failed.eq(1), w.t3_running.eq(0), w.idle_running.eq(0)]
                        m.next = "STORE"
                with m.Else():
                    m.d.sync += [w.error_count.eq(0),                                        # 8.1
                                 w.duplicate_tsns_reported.eq(w.duplicate_tsns_reported + sack.duplicate_count)]
                    start_walk(_Walk.RETIRE, advance, AFTER["SACK_RETIRED"])
            with m.State("SACK_RETIRED"):
                with m.If(~advanced):
                    m.next = "SACK_BLOCKS"
                with m.Else():
                    with m.If(emit(TransportOpcode.RETIRE, sack.cumulative_tsn_ack, walk_base)):
                        m.d.sync += [w.cumulative_tsn.eq(sack.cumulative_tsn_ack), w.length.eq(w.length - advance),
                                     w.gap_extent.eq(_less_floor(w.gap_extent, advance))]
                        m.next = "SACK_BLOCKS"
            with m.State("SACK_BLOCKS"):      # the blocks read: 1 <= start <= end, start within the chunks sent
                for b in range(self.gap_blocks):
                    gap = sack.gaps[b]
                    m.d.sync += [block_valid[b].eq((b < sack.gap_count) & (gap.start != 0) & (gap.start <= gap.end)
                                                   & (gap.start <= w.length)),
                                 block_end[b].eq(_at_most(gap.end, w.length))]
                m.next = "SACK_HIGHEST_0"
            # The highest block end read: a tree of comparisons, a level a cycle.
            ends = [Mux(block_valid[b], block_end[b], 0) for b in range(self.gap_blocks)]
            level = 0
            while True:
                pairs = [ends[i:i + 2] for i in range(0, len(ends), 2)]
                ends = [Signal(16, name=f"highest_{level}_{i}") for i in range(len(pairs))]
                with m.State(f"SACK_HIGHEST_{level}"):
                    m.d.sync += [end.eq(pair[0] if len(pair) == 1 else Mux(pair[0] > pair[1], pair[0], pair[1]))
                                 for end, pair in zip(ends, pairs)]
                    m.next = f"SACK_HIGHEST_{level + 1}" if len(ends) > 1 else "SACK_GAP_START"
                level += 1
                if len(ends) == 1:
                    break
            highest_block_end = ends[0]
            with m.State("SACK_GAP_START"):
                m.d.sync += [judged.eq(Mux(sack.gap_count > self.gap_blocks, highest_block_end, w.length)),
                             highest_less_one.eq(highest_block_end - 1),
                             w.gap_extent.eq(0)]                    # counted again by the walk
                start_walk(_Walk.GAP, _at_least(highest_block_end, w.gap_extent), AFTER["SACK_GAPS_DONE"])
            with m.State("SACK_GAPS_DONE"):             # 6.2.1 D ii; 7.2.3
                m.d.sync += [w.rwnd.eq(_less_floor(sack.a_rwnd, w.outstanding_bytes)), w.peer_a_rwnd.eq(sack.a_rwnd)]
                with m.If(newly_acked != 0):
                    m.d.sync += w.one_packet_until_ack.eq(0)
                m.next = "MEASURE"
            with m.State("MEASURE"):                    # 6.3.1 C2, C3: the RTT sample, in eighths
                srtt, rttvar = w.srtt_eighths, w.rttvar_eighths
                with m.If(~sample_valid):
                    m.next = "SACK_MISS_BELOW"
                with m.Elif(~w.srtt_valid):
                    m.d.sync += [w.srtt_valid.eq(1), w.srtt_eighths.eq(sample), w.rttvar_eighths.eq(sample >> 1)]
                    m.next = "MEASURE_RTO"
                with m.Else():
                    m.d.sync += [difference.eq(Mux(srtt > sample, srtt - sample, sample - srtt)),
                                 rttvar_part.eq(rttvar - (rttvar >> 2)), srtt_part.eq(srtt - (srtt >> 3))]
                    m.next = "MEASURE_SMOOTH"
            with m.State("MEASURE_SMOOTH"):             # C3: RTTVAR from the SRTT before this sample
                m.d.sync += [w.rttvar_eighths.eq(rttvar_part + (difference >> 2)),
                             w.srtt_eighths.eq(srtt_part + (sample >> 3))]
                m.next = "MEASURE_RTO"
            with m.State("MEASURE_RTO"):                # C3's G, then C6, C7
                m.d.sync += [w.rttvar_eighths.eq(Mux(w.rttvar_eighths == 0, _EIGHTHS, w.rttvar_eighths)),
                             rto_sum.eq(w.srtt_eighths + _EIGHTHS - 1)]
                m.next = "MEASURE_SUM"
            with m.State("MEASURE_SUM"):                # rto_formula
                m.next = "MEASURE_FLOOR"
            with m.State("MEASURE_FLOOR"):              # rto_floor: RTO.Min
                m.next = "MEASURE_CEILING"
            with m.State("MEASURE_CEILING"):            # rto_clamped: RTO.Max
                m.next = "MEASURE_SET"
            with m.State("MEASURE_SET"):
                m.d.sync += w.rto.eq(rto_clamped)
                m.next = "SACK_MISS_BELOW"
            with m.State("SACK_MISS_BELOW"):            # 7.2.4 with HTNA: below the highest TSN newly acknowledged
                below = Mux(gap_newly_acked, highest_newly_acked, 0)
                below = Mux(in_fast_recovery & advanced & (highest_block_end != 0),
                            _at_least(below, highest_less_one), below)
                m.d.sync += highest_newly_acked.eq(below)       # the bound of "missing"
                m.next = "SACK_MISS_START"
            with m.State("SACK_MISS_START"):
                start_walk(_Walk.MISS, _at_least(highest_newly_acked, reneged_extent), AFTER["SACK_MISSES_DONE"])
            with m.State("SACK_MISSES_DONE"):           # 6.2.1 D iv
                with m.If(w.fast_recovery & ~_serial_lt(sack.cumulative_tsn_ack, w.fast_recovery_exit)):
                    m.d.sync += w.fast_recovery.eq(0)
                m.d.sync += [fully_utilized.eq(utilized_sum > w.cwnd), increment.eq(_at_most(newly_acked, w.mtu))]
                m.next = "SACK_GROW"
            with m.State("SACK_GROW"):                  # 7.2.1, 7.2.2 (7.2.4's Note: before the reduction)
                with m.If(advanced & ~w.fast_recovery):
                    with m.If(w.cwnd <= w.ssthresh):
                        with m.If(fully_utilized):
                            m.d.sync += w.cwnd.eq(w.cwnd + increment)
                        m.next = "SACK_ALL_ACKED_CHECK"
                    with m.Else():
                        m.d.sync += w.partial_bytes_acked.eq(w.partial_bytes_acked + newly_acked)
                        m.next = "SACK_AVOIDANCE_CHECK"
                with m.Else():
                    m.next = "SACK_ALL_ACKED_CHECK"
            with m.State("SACK_AVOIDANCE_CHECK"):
                m.d.sync += [above_cwnd.eq(w.partial_bytes_acked > w.cwnd),
                             reached_cwnd.eq(w.partial_bytes_acked >= w.cwnd),
                             acked_less_cwnd.eq(w.partial_bytes_acked - w.cwnd), cwnd_grown.eq(w.cwnd + w.mtu)]
                m.next = "SACK_AVOIDANCE"
            with m.State("SACK_AVOIDANCE"):
                with m.If(above_cwnd & ~fully_utilized):
                    m.d.sync += w.partial_bytes_acked.eq(w.cwnd)              # RFC 9260 7.2.2
                with m.If(reached_cwnd & fully_utilized):
                    m.d.sync += [w.partial_bytes_acked.eq(acked_less_cwnd), w.cwnd.eq(cwnd_grown)]
                m.next = "SACK_ALL_ACKED_CHECK"
            with m.State("SACK_ALL_ACKED_CHECK"):       # (halved follows cwnd meanwhile)
                m.d.sync += [all_acknowledged.eq(w.gap_acked_count == w.length), chunks_left.eq(w.length != 0),
                             reduce.eq(newly_marked & ~w.fast_recovery),
                             t3_restart.eq(advanced | (reneged_any & ~w.t3_running))]
                m.next = "SACK_ALL_ACKED"
            with m.State("SACK_ALL_ACKED"):
                with m.If(all_acknowledged):
                    m.d.sync += w.partial_bytes_acked.eq(0)                  # 7.2.2
                with m.If(reduce):                                            # 7.2.4 step 2, 7.2.3
                    m.d.sync += [w.ssthresh.eq(halved), w.cwnd.eq(halved), w.partial_bytes_acked.eq(0),
                                 w.fast_recovery.eq(1), w.fast_recovery_exit.eq(highest_sent)]
                with m.If(all_acknowledged):                                  # 6.3.2 R2, R3, R4
                    m.d.sync += w.t3_running.eq(0)
                with m.Elif(t3_restart):
                    m.d.sync += [w.t3_running.eq(1), w.t3_deadline.eq(deadline)]
                with m.If(chunks_left):
                    m.d.sync += w.idle_running.eq(0)
                with m.Elif(~w.idle_running):
                    m.d.sync += [w.idle_running.eq(1), w.idle_deadline.eq(deadline)]
                with m.If(newly_marked):                                      # 7.2.4 step 3
                    start_walk(_Walk.FIRST_MARKED, w.length, AFTER["SACK_FAST_DONE"])
                with m.Else():
                    m.next = "RELEASE"
            with m.State("SACK_FAST_DONE"):
                with m.If(first_marked == 0):
                    m.d.sync += [w.t3_running.eq(1), w.t3_deadline.eq(deadline)]     # 7.2.4 step 4
                m.next = "RELEASE"

            # -- 6.1 C, D: retransmissions as cwnd allows, then the LIMIT (A, B) --------
            with m.State("RELEASE"):
                m.d.sync += skip_walk.eq(w.one_packet_until_ack | (w.marked_count == 0))
                m.next = "RELEASE_START"
            with m.State("RELEASE_START"):
                with m.If(skip_walk):
                    m.next = "RELEASE_COUNT"
                with m.Else():
                    start_walk(_Walk.RELEASE, w.length, AFTER["RELEASE_COUNT"])
            with m.State("RELEASE_COUNT"):
                m.d.sync += [new_chunks.eq(0), burst_room.eq(Mux(w.max_burst > packets, w.max_burst - packets, 0)),
                             ring_room.eq(ring - w.length),
                             sending.eq(~w.one_packet_until_ack & (w.marked_count == 0)),
                             cwnd_left.eq(Cat(w.cwnd, Const(0, 2)).as_signed() - Cat(w.flight_size, Const(0, 2)).as_signed()),
                             rwnd_left.eq(Cat(w.rwnd, Const(0, 2)).as_signed() - w.chunk_bytes),
                             flight_empty.eq(w.flight_size == 0), limit_next.eq(highest_sent)]
                m.next = "RELEASE_ROOM"
            with m.State("RELEASE_ROOM"):
                m.d.sync += room.eq(_at_most(burst_room, ring_room))
                m.next = "RELEASE_TEST"
            with m.State("RELEASE_TEST"):               # one more chunk while cwnd, rwnd, Max.Burst and the ring allow
                by_cwnd = cwnd_left > 0                                     # cwnd - flight > the chunks counted
                by_rwnd = (rwnd_left >= 0) | (flight_empty & (new_chunks == 0))
                m.d.sync += one_more.eq(sending & (new_chunks < room) & by_cwnd & by_rwnd)
                m.next = "RELEASE_CHUNK"
            with m.State("RELEASE_CHUNK"):
                with m.If(one_more):
                    m.d.sync += [new_chunks.eq(new_chunks + 1), limit_next.eq(limit_next + 1),
                                 cwnd_left.eq(cwnd_left - w.chunk_bytes), rwnd_left.eq(rwnd_left - w.chunk_bytes)]
                    m.next = "RELEASE_TEST"
                with m.Else():
                    m.next = "RELEASE_LIMIT"
            with m.State("RELEASE_LIMIT"):
                with m.If(~always_limit & (limit_next == w.limit)):
                    m.next = "STORE"
                with m.Else():
                    with m.If(emit(TransportOpcode.LIMIT, limit_next)):
                        m.d.sync += w.limit.eq(limit_next)
                        m.next = "STORE"

            # -- timers ----------------------------------------------------------------
            with m.State("TIMER_SCAN"):
                with m.If(scan == rows):
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += [a.eq(scan), scan.eq(scan + 1), packets.eq(0), always_limit.eq(0)]
                    m.d.sync += loading.eq(_Load.TIMER)
                    m.next = "LOAD"
            with m.State("TIMER_ROW"):
                m.d.sync += exhausted.eq(w.error_count >= w.max_retrans)
                with m.If(w.failed):
                    m.next = "TIMER_SCAN"
                with m.Elif(due(w.t3_running, w.t3_deadline)):
                    m.next = "EXPIRE"
                with m.Elif(due(w.idle_running, w.idle_deadline)):
                    m.next = "DECAY_CHECK"
                with m.Else():
                    m.next = "TIMER_SCAN"
            with m.State("DECAY_CHECK"):                # 7.2.1, 7.2.2: per RTO without data
                m.d.sync += decay_due.eq(due(1, w.idle_deadline))      # (halved, idle_next follow the row)
                m.next = "DECAY_APPLY"
            with m.State("DECAY_APPLY"):
                with m.If(decay_due):
                    with m.If(cwnd_above_floor):
                        m.d.sync += w.cwnd.eq(halved)
                    m.d.sync += w.idle_deadline.eq(idle_next)
                    m.next = "DECAY_CHECK"
                with m.Else():
                    m.next = "RELEASE"
            with m.State("EXPIRE"):                     # 6.3.3 E1-E3, 7.2.3, 8.1
                with m.If(exhausted):
                    error_count = _at_most(w.error_count + 1, 255)
                    with m.If(emit(TransportOpcode.FAILURE, highest_sent, w.cumulative_tsn,
                                   error_count)):
                        m.d.sync += [w.error_count.eq(error_count), w.failed.eq(1), w.t3_running.eq(0),
                                     w.idle_running.eq(0)]
                        m.next = "STORE"
                with m.Else():
                    m.d.sync += [w.error_count.eq(w.error_count + 1), w.ssthresh.eq(halved),
                                 w.cwnd.eq(w.mtu), w.partial_bytes_acked.eq(0), w.fast_recovery.eq(0),
                                 w.rto.eq(rto_doubled), w.timed.eq(0), w.t3_running.eq(0)]
                    start_walk(_Walk.MARK_ALL, w.length, AFTER["EXPIRE_MARKED"])
            with m.State("EXPIRE_MARKED"):
                start_walk(_Walk.FIRST_MARKED, w.length, AFTER["EXPIRE_RETRANSMITTED"])
            with m.State("EXPIRE_RETRANSMITTED"):
                m.d.sync += [w.one_packet_until_ack.eq(1), packets.eq(1)]
                m.next = "RELEASE"

            with m.State("STORE"):
                m.d.sync += row_regs[a].eq(w)
                with m.If(scan != 0):
                    m.next = "TIMER_SCAN"               # the sweep goes on with the next row
                with m.Else():
                    m.next = "IDLE"

            # -- the walk --------------------------------------------------------------
            with m.State("WALK_CHECK"):
                with m.If(index >= walk_end):
                    m.next = "WALK_DONE"
                with m.Else():
                    m.next = "WALK_READ"               # the read address is set: the word is there next cycle
            with m.State("WALK_READ"):
                m.d.sync += [
                    chunk.eq(chunk_read.data),
                    flags.covered.eq(covered(offset)), flags.below.eq(index < highest_newly_acked),
                    flags.judged.eq(index < judged),
                    flags.timed.eq(w.timed & (w.timed_tsn == walk_tsn)),
                    flags.timed_after.eq(w.timed & ((walk_tsn == w.timed_tsn) | _serial_lt(walk_tsn, w.timed_tsn))),
                    flags.stop.eq((packets >= w.max_burst) | (w.flight_size >= w.cwnd)),
                ]
                m.next = "WALK_EDIT"
            with m.State("WALK_EDIT"):
                m.d.comb += edited.eq(chunk)
                self._edit(m, walk, chunk, flags, edited, chunk_write, index, offset, walk_tsn, w, measure,
                           retransmit, mark, delta, gap_newly_acked, highest_newly_acked, reneged_any,
                           reneged_extent, newly_marked, first_marked, packets)
            with m.State("WALK_DONE"):
                with m.Switch(after_walk):
                    for name, number in AFTER.items():
                        with m.Case(number):
                            m.next = name
        # STORE also ends a sweep: scan is 0 outside it.
        with m.If(self.idle & ~tick_pending):
            m.d.sync += scan.eq(0)
        return m

    def _edit(self, m, walk, chunk, flags, edited, chunk_write, index, offset, walk_tsn, w, measure, retransmit,
              mark, delta, gap_newly_acked, highest_newly_acked, reneged_any, reneged_extent, newly_marked,
              first_marked, packets):
        """WALK_EDIT: the decision on chunk `index` of the working row, by walk, from the registered word and
        flags."""

        def step():
            m.d.sync += [index.eq(index + 1), offset.eq(offset + 1)]
            m.next = "WALK_CHECK"

        def stop():
            m.next = "WALK_DONE"

        with m.Switch(walk):
            with m.Case(_Walk.RETIRE):                 # 6.2.1 D: up to the Cumulative TSN Ack
                with m.If(~chunk.gap_acked):
                    m.d.sync += delta.acked.eq(1)
                    measure()
                with m.Else():
                    m.d.sync += delta.gap_dec.eq(1)
                with m.If(chunk.in_flight):
                    m.d.sync += delta.flight_sub.eq(1)
                with m.If(~chunk.gap_acked & (chunk.marked == RetransmitCause.NONE)):
                    m.d.sync += delta.outstanding_sub.eq(1)
                with m.If(chunk.marked != RetransmitCause.NONE):
                    m.d.sync += delta.marked_dec.eq(1)
                step()
            with m.Case(_Walk.GAP):                    # 3.3.4; 6.2.1 D iii
                # After the retirement the chunk's offset from the new Cumulative TSN Ack is index + 1.
                with m.If(flags.covered & ~chunk.gap_acked):
                    m.d.comb += [chunk_write.en.eq(1), edited.gap_acked.eq(1), edited.in_flight.eq(0),
                                 edited.marked.eq(RetransmitCause.NONE)]
                    m.d.sync += [delta.acked.eq(1), gap_newly_acked.eq(1), highest_newly_acked.eq(index),
                                 delta.gap_inc.eq(1)]
                    with m.If(chunk.in_flight):
                        m.d.sync += delta.flight_sub.eq(1)
                    with m.If(chunk.marked == RetransmitCause.NONE):
                        m.d.sync += delta.outstanding_sub.eq(1)
                    with m.Else():
                        m.d.sync += delta.marked_dec.eq(1)
                    measure()
                with m.Elif(~flags.covered & chunk.gap_acked & flags.judged):
                    m.d.comb += [chunk_write.en.eq(1), edited.gap_acked.eq(0), edited.reneged.eq(1)]
                    m.d.sync += [delta.gap_dec.eq(1), reneged_any.eq(1), reneged_extent.eq(offset),
                                 delta.outstanding_add.eq(1)]
                with m.If((flags.covered | chunk.gap_acked) & ~(~flags.covered & flags.judged)):
                    m.d.sync += w.gap_extent.eq(offset)
                step()
            with m.Case(_Walk.MISS):                   # 7.2.4 steps 1 and 5
                missed = chunk.reneged | (flags.below & ~flags.covered)
                m.d.comb += [chunk_write.en.eq(1), edited.reneged.eq(0)]
                with m.If(missed & ~chunk.gap_acked & ~chunk.fast_retransmitted):
                    m.d.comb += edited.miss_indications.eq(chunk.miss_indications + 1)
                    with m.If(chunk.miss_indications == 2):
                        m.d.comb += edited.fast_retransmitted.eq(1)
                        mark(RetransmitCause.FAST)
                        m.d.sync += newly_marked.eq(1)
                step()
            with m.Case(_Walk.FIRST_MARKED):           # the lowest marked chunk goes again
                with m.If(chunk.marked != RetransmitCause.NONE):
                    with m.If(retransmit()):
                        m.d.sync += first_marked.eq(index)
                        stop()
                with m.Else():
                    step()
            with m.Case(_Walk.MARK_ALL):               # 6.3.3 E3: every chunk not gap-acknowledged
                with m.If(~chunk.gap_acked & (chunk.marked == RetransmitCause.NONE)):
                    m.d.comb += chunk_write.en.eq(1)
                    mark(RetransmitCause.TIMEOUT)
                step()
            with m.Case(_Walk.RELEASE):                # 6.1 C, D: marked chunks while cwnd and Max.Burst allow
                with m.If(flags.stop):
                    stop()
                with m.Elif(chunk.marked != RetransmitCause.NONE):
                    with m.If(retransmit()):
                        m.d.sync += packets.eq(packets + 1)
                        step()
                with m.Else():
                    step()

"""Formal harness of :class:`hdl.tx.ring.RetransmitRing`: what the ring retransmits, retires and completes.

A work request completes only after a cumulative TSN ack covers its last
chunk (RFC 4960 6.2.1 D, RFC 5041 5.4), and the ring never retransmits
(RFC 4960 6.3.3 E3, 7.2.4) nor retires a TSN outside (cumulative ack, last
TSN sent]. The harness drives every input with free values (``AnySeq``)
that keep the stream rules, and every output's ``ready`` freely. The host's
contracts, assumed:

* the numbered segments of row ``r`` carry the TSNs ``next_tsn``,
  ``next_tsn + 1``, ... of the row's last write (1, 2, ... from reset), as the
  segmenter numbers them; each carries its TSN as its ``wr_id`` too, so a
  completion (which names no TSN) tells which record it came from (the ring
  decides nothing by ``wr_id``);
* rows, associations and opcodes are valid (``association < associations``,
  no TSN opcode 3);
* a row is written only while nothing of it is in flight: no numbered
  segment of the row offered, no TSN request of the row offered or under way.

The shadow, per row, from the ports alone: ``last``, the last TSN recorded
(a numbered segment taken), and ``acked``, the cumulative ack point: a row
write sets both to ``next_tsn - 1``; an accepted ACK of ``X`` ahead of it
(``0 < X - acked <= 2**31``: serial arithmetic, RFC 1982 as RFC 4960 1.6,
the undefined distance ``2**31`` counted ahead as the ring does) moves it
to ``X``, or to ``last`` if ``X`` lies beyond (a TSN recorded on the cycle
the ACK is taken counts). Of the request under way (one at a time): the
request, ``acked`` and ``last`` when it was taken (``acked_from``,
``last_at_take``), whether a RESEND's TSN lay in (``acked``, ``last``] then
(``in_window``), and ``floor``, the TSN of the last completion it gave
(``acked_from`` before the first).

Proved (the ``ring`` proof, k-induction with ``k = 1``, with
``associations = 2``, ``ring_tsns = 4``: every check is per row and per
slot, the TSNs full 32-bit and free), where records
enter the ring's ``completions`` and ``refused`` queues (which pass them on
unchanged and in order: :class:`~hdl.stream.queue.Queue`, its tests) and on
``sent``:

1. a completion comes only while an ACK of its association is under way,
   and is never dropped (its queue has room); its TSN is at or below the
   ACK's TSN, in (``acked_from``, ``acked``] (covered by the ACK, not
   retired before) and at or below ``last`` (recorded);
2. a record leaves on ``sent`` other than the input's head (a
   retransmission) only while a RESEND is under way whose TSN lay in
   (``acked``, ``last``] when taken, and it is that TSN's record of that
   association; a RESEND leaves on ``refused`` only if its TSN lay outside;
3. idle, the ring's ``retired`` point of each row is the shadow's
   ``acked``, and it holds exactly ``last - acked`` TSNs: an ACK beyond the
   last TSN recorded retires what was recorded and no more;
4. a completion's TSN is after ``floor``: the TSNs of one ACK's completions
   rise, and the intervals (``acked_from``, ``acked``] of successive ACKs of
   a row do not meet, so each recorded TSN completes at most once until the
   row is written again.

Strengthening invariants: of each row, ``outstanding = last - retired`` (at
most ``ring_tsns``, ``full`` when equal) and ``retired`` within
[``acked_from``, ``acked``] during the row's ACK (``acked`` otherwise);
each ring slot whose TSN lies in (``retired``, ``last``] holds that TSN's
record (TSN, ``wr_id``, association, numbered); and per state of the
request's state machine, its registers: the request is the shadow's, the
offset and count of COMPARE and DECIDE are ``tsn - acked_from - 1`` and
``last_at_take - acked_from``, a RESEND in the window has its record read,
and a walk reads ``retired + 1`` with ``acked - retired`` records to go; a
walk's record read has room in the completion queue. The harness looks
inside the ring in one place, :func:`ring_registers` (and reads the
record memory through read ports of its own, one a slot).

Reachable (the ``ring_cover`` proof, from reset, at the outputs, without
the invariants): a record is retransmitted (step 4); an ACK beyond the last
TSN sent gives a completion (step 5); a completion leaves (step 7); a RESEND
of the TSN whose completion left is refused (step 11).

The requests may come from the host or from the transmit engine's transport
unit (:mod:`hdl.tx.transport_unit`): whatever their source, the ring
completes only what an ACK covers and resends only what it holds.

Not covered: the sending limit (LIMIT requests and the transport unit's
``hold`` are free, and their effect only holds segments back); the records' other fields (carried, not decided
on); liveness (a request is answered, a full row drains).
"""

from amaranth.asserts import AnySeq
from amaranth.hdl import Array, Assert, Assume, Cat, Cover, Elaboratable, Module, Mux, ResetSignal, Signal, Value

from abi.tx import TsnOpcode, tsn_request_layout
from hdl.layout import struct_layout
from hdl.stream.bits import index_bits
from hdl.tx.ring import RetransmitRing

from formal.placement import PlacementHarness

__all__ = ["PROOF_PARAMETERS", "RingHarness", "ring_registers"]

#: Two rows (one walked or replayed, one recording meanwhile) of four slots (a TSN's slot reused).
PROOF_PARAMETERS = {"associations": 2, "ring_tsns": 4, "address_bits": 8}
_STATES = ("TAKE", "MEASURE", "COMPARE", "DECIDE", "REPLAY", "WALK_READ", "WALK_EMIT")


def _wrap(value):
    """``value`` mod ``2**32`` (TSN arithmetic)."""
    return Value.cast(value)[:32]


def _ack_point(acked, tsn, last):
    """Where an ACK of ``tsn`` moves the ack point ``acked`` with TSNs up to ``last`` recorded: to ``tsn`` if
    it lies in (``acked``, ``last``], to ``last`` if beyond, nowhere if at or below ``acked`` (``tsn - acked``
    is 0 or above ``2**31``: RFC 1982 serial arithmetic, as RFC 4960 1.6, with the undefined ``2**31``
    counted ahead)."""
    reach, room = _wrap(tsn - acked), _wrap(last - acked)
    ahead = (reach != 0) & (_wrap(reach - 1) < 2**31)
    return Mux(ahead, _wrap(acked + Mux(reach < room, reach, room)), acked)


def ring_registers(ring: RetransmitRing) -> dict:
    """The registers and states of an elaborated ring that the harness reads (``RetransmitRing._registers``):
    ``request``, ``count``, ``in_ring``, ``walk_left``, ``replaying``, ``offset``, ``walk_tsn``, ``retiring``,
    ``retired_N``, ``outstanding_N``, ``full_N``, ``halted_N`` (a flip-flop) and ``halted_flags_N`` (the OR of
    the row's flags it stands for), and ``state``, each state's ``ongoing`` flag."""
    registers = ring._registers
    if tuple(registers["state"]) != _STATES:
        raise NameError(f"RetransmitRing's states are {tuple(registers['state'])}, not {_STATES}: update the harness")
    return registers


class RingHarness(Elaboratable):
    """The proof top of the module docs: a RetransmitRing with free, contract-keeping inputs, the
    shadow and the asserts 1-4.

    ``strengthen``: add the strengthening invariants (k-induction); without them only the
    properties are asserted (runs from reset, and the mutants' tests, which want a property's
    own assert to be the one that fails). ``ring``: the ring's class (a test passes a mutant).
    """

    def __init__(self, *, strengthen: bool = True, ring=RetransmitRing):
        self.strengthen = strengthen
        self.ring = ring

    def elaborate(self, platform):
        m = Module()
        p = PROOF_PARAMETERS
        associations, ring_tsns = p["associations"], p["ring_tsns"]
        row_bits, index_width = index_bits(associations), (ring_tsns - 1).bit_length()
        dut = self.ring(**p)
        dut._MustUse__silence = True  # elaborated here, so its registers can be read
        inside = dut.elaborate(platform)
        registers = ring_registers(dut)
        store = inside.submodules.store
        read, = store.read_ports
        slots = [[store.read_port(domain="comb") for _ in range(ring_tsns)] for _ in range(associations)]
        m.submodules.ring = inside
        completion_in, refusal_in = inside.submodules.completions.sink, inside.submodules.refused.sink
        m.d.comb += Assume(~ResetSignal())

        def row_of(association):
            return association[:row_bits]

        # Free inputs that keep the stream rules; free back-pressure on every output.
        for port in (dut.segments, dut.association_write, dut.tsn_requests):
            PlacementHarness._drive_stream(m, port)
        for port in (dut.sent, dut.fetches, dut.refused, dut.completions):
            m.d.comb += port.ready.eq(AnySeq(1))
        # The transport unit's hold of a row (until its LIMIT), free as the LIMITs are: it only holds back.
        m.d.comb += [dut.hold.eq(AnySeq(1)), dut.hold_row.eq(AnySeq(len(dut.hold_row))),
                     dut.peek_row.eq(AnySeq(len(dut.peek_row)))]
        segment, request, row_write = dut.segments.payload, dut.tsn_requests.payload, dut.association_write.payload
        m.d.comb += [Assume(segment.association < associations), Assume(request.association < associations),
                     Assume(request.opcode <= TsnOpcode.LIMIT), Assume(row_write.index < associations)]

        # The shadow (module docs).
        last = [Signal(32, name=f"shadow_last_{row}") for row in range(associations)]
        acked = [Signal(32, name=f"shadow_acked_{row}") for row in range(associations)]
        pending = Signal(struct_layout(tsn_request_layout()))          # the request under way
        acked_from, last_at_take = Signal(32, name="acked_from"), Signal(32, name="last_at_take")
        floor, in_window = Signal(32, name="floor"), Signal(name="in_window")
        busy = ~dut.tsn_requests.ready                  # a request is under way
        taken = dut.segments.valid & dut.segments.ready
        recording = taken & segment.numbered
        offered = dut.segments.valid & segment.numbered
        accepting = dut.tsn_requests.valid & dut.tsn_requests.ready
        segment_row, request_row, pending_row = row_of(segment.association), row_of(request.association), \
            row_of(pending.association)

        # Numbered segments carry the row's next TSN, and it as their wr_id.
        m.d.comb += Assume(~offered | ((segment.tsn == _wrap(Array(last)[segment_row] + 1))
                                       & (segment.wr_id == segment.tsn)))
        last_now = [Signal(32, name=f"last_now_{row}") for row in range(associations)]  # with this cycle's record
        for row in range(associations):
            writing = dut.association_write.valid & (row_write.index == row)
            m.d.comb += [
                Assume(~(writing & ((offered & (segment_row == row)) | (dut.tsn_requests.valid & (request_row == row))
                                    | (busy & (pending_row == row))))),
                last_now[row].eq(Mux(recording & (segment_row == row), _wrap(last[row] + 1), last[row])),
            ]
            with m.If(writing):
                m.d.sync += [last[row].eq(_wrap(row_write.next_tsn - 1)), acked[row].eq(_wrap(row_write.next_tsn - 1))]
            with m.Elif(recording & (segment_row == row)):
                m.d.sync += last[row].eq(last_now[row])
        acked_now, taking_last = Array(acked)[request_row], Array(last_now)[request_row]
        with m.If(accepting):
            m.d.sync += [pending.eq(request), acked_from.eq(acked_now), floor.eq(acked_now),
                         last_at_take.eq(taking_last),
                         in_window.eq(_wrap(request.tsn - acked_now - 1) < _wrap(taking_last - acked_now))]
            with m.If(request.opcode == TsnOpcode.ACK):   # RFC 4960 6.2.1 D
                for row in range(associations):
                    with m.If(request_row == row):
                        m.d.sync += acked[row].eq(_ack_point(acked_now, request.tsn, taking_last))

        # The checks: completions and refusals where they enter their queues, retransmissions on `sent`.
        is_ack, is_resend = pending.opcode == TsnOpcode.ACK, pending.opcode == TsnOpcode.RESEND
        acked_q, last_q = Array(acked)[pending_row], Array(last)[pending_row]
        completion = completion_in.payload
        completion_tsn = completion.wr_id
        with m.If(completion_in.valid):
            m.d.sync += floor.eq(completion_tsn)
            # 1. Under an ACK of its association, never dropped; covered by the ACK, not retired before, recorded.
            m.d.comb += [
                Assert(completion_in.ready),
                Assert(busy & is_ack & (completion.association == pending.association)),
                Assert(_wrap(pending.tsn - completion_tsn) < 2**31),
                Assert(_wrap(completion_tsn - acked_from - 1) < _wrap(acked_q - acked_from)),
                Assert(_wrap(completion_tsn - acked_from - 1) < _wrap(last_q - acked_from)),
                # 4. After the walk's last completion: at most once.
                Assert(_wrap(completion_tsn - floor - 1) < _wrap(acked_q - floor)),
            ]
        # 2. A retransmission (a record on `sent` that is not the input's head) is the RESEND's, in the window.
        sent = dut.sent.payload
        replayed = dut.sent.valid & dut.sent.ready & ~taken
        with m.If(replayed):
            m.d.comb += Assert(busy & is_resend & in_window & (sent.tsn == pending.tsn) & (sent.wr_id == pending.tsn)
                               & (sent.association == pending.association) & sent.numbered)
        with m.If(refusal_in.valid & refusal_in.ready):
            m.d.comb += Assert(busy & is_resend & ~in_window & (Value.cast(refusal_in.payload) == Value.cast(pending)))
        # 3. Idle, the ring's retired point is the shadow's, and it holds last - acked TSNs.
        retired = [registers[f"retired_{row}"] for row in range(associations)]
        outstanding = [registers[f"outstanding_{row}"] for row in range(associations)]
        with m.If(~busy):
            for row in range(associations):
                m.d.comb += Assert((retired[row] == acked[row]) & (outstanding[row] == _wrap(last[row] - acked[row])))

        # Reachable, at the outputs.
        completion_left, completed_tsn = Signal(), Signal(32)   # a completion left, of that TSN
        with m.If(dut.completions.valid & dut.completions.ready):
            m.d.sync += [completion_left.eq(1), completed_tsn.eq(dut.completions.payload.wr_id)]
        refusal = dut.refused.payload
        beyond_last = _wrap(pending.tsn - acked_from) > _wrap(last_at_take - acked_from)
        m.d.comb += [
            Cover(dut.completions.valid & dut.completions.ready),
            # A RESEND of an acknowledged TSN refused, after its completion left.
            Cover(dut.refused.valid & dut.refused.ready & (refusal.opcode == TsnOpcode.RESEND)
                  & completion_left & (refusal.tsn == completed_tsn)),
            Cover(replayed),
            Cover(completion_in.valid & beyond_last),   # from an ACK beyond the last TSN sent
        ]

        if self.strengthen:
            self._invariants(m, registers, read.data, slots, last, acked, pending, acked_from, last_at_take, floor,
                             in_window, busy, completion_in, row_of, index_width)
        return m

    def _invariants(self, m, registers, entry, slots, last, acked, pending, acked_from, last_at_take, floor,
                    in_window, busy, completion_in, row_of, index_width):
        """The strengthening invariants of the module docs."""
        associations, ring_tsns = PROOF_PARAMETERS["associations"], PROOF_PARAMETERS["ring_tsns"]
        state = registers["state"]
        pending_row = row_of(pending.association)
        is_ack, is_resend = pending.opcode == TsnOpcode.ACK, pending.opcode == TsnOpcode.RESEND
        retired_q = Array(registers[f"retired_{row}"] for row in range(associations))[pending_row]
        acked_q = Array(acked)[pending_row]

        def holds(record, tsn, row):
            """``record`` is the one of TSN ``tsn`` of ``row`` as the harness's contract gives it."""
            return ((record.tsn == tsn) & (record.wr_id == tsn) & (record.association == row) & record.numbered)

        # Each row: outstanding = last - retired, full when the ring is; retired at acked but during its ACK.
        for row in range(associations):
            retired, outstanding = registers[f"retired_{row}"], registers[f"outstanding_{row}"]
            walking_row = busy & is_ack & (pending_row == row)
            m.d.comb += [
                Assert(outstanding <= ring_tsns),
                Assert(registers[f"full_{row}"] == (outstanding == ring_tsns)),
                Assert(registers[f"halted_{row}"] == registers[f"halted_flags_{row}"]),
                Assert(_wrap(last[row] - retired) == outstanding),
            ]
            with m.If(walking_row):
                m.d.comb += [Assert(_wrap(retired - acked_from) <= _wrap(acked[row] - acked_from)),
                             Assert(_wrap(acked[row] - retired) <= outstanding)]
            with m.Else():
                m.d.comb += Assert(retired == acked[row])
            # The slots of the TSNs in (retired, last] hold their records.
            for index, port in enumerate(slots[row]):
                m.d.comb += port.addr.eq(row * ring_tsns + index)
                distance = Signal(index_width, name=f"slot_distance_{row}_{index}")
                m.d.comb += distance.eq(index - retired - 1)
                with m.If(distance < outstanding):
                    m.d.comb += Assert(holds(port.data, _wrap(retired + 1 + distance), row))

        # The replayed record's fetch flag is the RAM output's, held from COMPARE on.
        with m.If(state["DECIDE"] | state["REPLAY"]):
            m.d.comb += Assert(registers["replay_fetch"] == entry.fetch)

        # The state machine: a known state; idle with nothing retiring or replaying.
        m.d.comb += Assert(Cat(*state.values()).any())
        with m.If(~busy):
            m.d.comb += Assert(~registers["retiring"] & ~registers["replaying"])
        with m.Else():
            m.d.comb += [Assert(Value.cast(registers["request"]) == Value.cast(pending)),
                         Assert(pending.association < associations), Assert(pending.opcode <= TsnOpcode.LIMIT)]
            # What the shadow took with the request: the row's ack point and last TSN then, the window.
            m.d.comb += [
                Assert(_wrap(last_at_take - acked_from) <= ring_tsns),
                Assert(_wrap(last_at_take - acked_from) <= _wrap(Array(last)[pending_row] - acked_from)),
                Assert(in_window == (_wrap(pending.tsn - acked_from - 1) < _wrap(last_at_take - acked_from))),
            ]
            with m.If(~is_ack):
                m.d.comb += Assert(acked_q == acked_from)
            with m.If(is_ack):
                m.d.comb += [Assert(acked_q == _ack_point(acked_from, pending.tsn, last_at_take)),
                             Assert(_wrap(floor - acked_from) <= _wrap(retired_q - acked_from))]
        deciding = state["COMPARE"] | state["DECIDE"]
        with m.If(state["MEASURE"] | deciding):
            m.d.comb += [Assert(~registers["retiring"] & ~registers["replaying"]), Assert(retired_q == acked_from)]
        with m.If(state["MEASURE"]):
            m.d.comb += Assert(Array(last)[pending_row] == last_at_take)
        with m.If(deciding):
            m.d.comb += [
                Assert(registers["offset"] == _wrap(pending.tsn - acked_from - 1)),
                Assert(registers["count"] == _wrap(last_at_take - acked_from)),
                Assert(registers["walk_tsn"] == _wrap(acked_from + 1)),
            ]
            with m.If(is_resend & in_window):
                m.d.comb += Assert(holds(entry, pending.tsn, pending.association))
        with m.If(state["DECIDE"]):
            m.d.comb += Assert(registers["in_ring"] == in_window)
        with m.If(state["REPLAY"]):
            m.d.comb += [Assert(registers["replaying"] & ~registers["retiring"] & is_resend & in_window),
                         Assert(holds(entry, pending.tsn, pending.association))]
        walking = state["WALK_READ"] | state["WALK_EMIT"]
        with m.If(walking):
            m.d.comb += [
                Assert(registers["retiring"] & ~registers["replaying"] & is_ack),
                Assert(registers["walk_tsn"] == _wrap(retired_q + 1)),
                Assert(registers["walk_left"] == _wrap(acked_q - retired_q)),
                Assert(registers["walk_left"] != 0),
            ]
        with m.If(state["WALK_EMIT"]):
            m.d.comb += [Assert(holds(entry, _wrap(retired_q + 1), pending.association)),
                         Assert(completion_in.ready)]

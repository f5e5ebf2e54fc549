"""Formal harness of :class:`hdl.rx.placement_check.PlacementCheck`: a delivered message's buffer (RFC 5041 7.1, 5.3).

Issue 28 item 1: a retired buffer is never written, and a buffer's message
completes at most once. The harness is the one of :mod:`formal.placement`
(free inputs that keep the stream rules and the host's write rules;
``revoke`` idle; ``retire`` free: any stream, QN and MSN, on any cycle, as
early or as late as it likes) with consumers that never stall and payload
packets of one beat, as in its ``induction`` proof. It watches one posted
buffer, MSN ``n0`` of queue ``q0`` of stream row ``s0`` (free constants,
``AnyConst``), and keeps a shadow of its message, from the block's outputs
and the stream's DDP-SSN window:

* ``completed``: an ACCEPTED untagged L = 1 verdict for ``(s0, q0, n0)``
  has left the block since the host's post of ``n0`` on ``(s0, q0)``, with
  DDP-SSN ``ssn0``;
* ``delivered``: since then, the DDP-SSN window of ``s0`` (its ``base``,
  the lowest DDP-SSN not yet received, read from the window's memory) has
  passed ``ssn0``, that is every DDP-SSN up to ``ssn0`` has been received,
  the golden model's delivery rule (``model.ddp.sink``, RFC 5041 5.4);
* a host write of stream row ``s0`` (a re-arm, which restarts its window)
  keeps a delivered message delivered (``swept``), and forgets an
  undelivered one (``completed`` cleared), as the model's ``rearm`` drops
  the last segments it has not delivered: that message's last segment may
  then be accepted again, and it is not a second completion;
* a post of ``n0`` on ``(s0, q0)`` starts the shadow afresh (a new buffer;
  with revocations idle that is the next post of the MSN, ``2**32`` posts
  later).

Proved at the outputs (``verdict``, ``cmd``), for every choice of
``s0, q0, n0`` (the ``delivery`` proof, k-induction):

(a) a retired buffer is never written: no verdict for ``(s0, q0, n0)``
    (untagged, on stream ``s0``) decided while the message was delivered
    is ACCEPTED, and no DMA command leaves for it. With consumers that never
    stall a verdict leaves two cycles after its decision (the queues'
    bypass, asserted), so "delivered at the decision" is: delivered two
    cycles before the verdict leaves, or an L = 1 verdict decided before
    this one (so left before it: ``completed`` now) lay behind the window
    base of the decision's cycle. The segment that fills the last gap is
    decided before the window moves past ``ssn0``, and is rightly accepted;
(b) a buffer's message completes at most once: no ACCEPTED untagged L = 1
    verdict for ``(s0, q0, n0)`` leaves while ``completed`` holds (every
    such verdict decided before it has left), i.e. at most one per post of
    the MSN, except that a re-arm of ``s0`` that comes while the first is
    undelivered forgets it (above), as the model does.

Assumption beyond the harness's: the watched buffer is retired (its slot's
live bit cleared, by ``retire`` of its MSN, or of any MSN of its slot)
before the window of ``s0`` moves ``2**14`` DDP-SSNs past ``ssn0`` after
delivering it, unless a re-arm swept it first. The block judges a PENDING
completion delivered by serial arithmetic on 16-bit DDP-SSNs, so a
completion whose buffer stayed live while the window moved ``2**15`` past
it would read as undelivered again (without the assumption the induction
finds exactly that). In the engine the delivery order retires the buffer
as the message's L = 1 record leaves it; the records between the two wait
in queues of bounded depth (and at most ``window`` stored per stream), and
the placement check stops deciding when they are full, so the bound is
never near. Retirements are otherwise free: at any time, before the
message's last segment is decided or never.

Strengthening invariants (``k = 7``): those of :mod:`formal.placement`
that the watched buffer needs (the post count equals ``next_post``, a live
buffer of MSN ``n0`` is one of its queue's last ``depth`` posts, the
posting state machine never revokes and writes the queue's next MSN, the
output queues' counts and bypass, the input queue's entries carry the
stream row and flags of their headers), and of the watched slot while it
is live with MSN ``n0`` (the buffer the host posted, not retired), where
``completed`` counts the verdict leaving on this cycle (its slot was
written on the cycle before): its completion state is NONE until the
message completes; then RETIRED if a re-arm swept it as delivered; during a
re-arm's sweep of ``s0`` that has passed the slot, RETIRED or NONE as the
message is delivered or not; otherwise PENDING with ``ssn0``. And: a
delivered message not swept, whose buffer is live, lies behind the window
base (``ssn0 - base`` negative mod ``2**16``); the sweep runs with nothing
in the pipeline (the stream table's ``hold`` low, the row write held) and
no completion written, and the row write is ready on its last state only.
``k = 6`` is not enough: from an arbitrary state the pipeline may hold
segments of one stream closer together than the interlock lets them (its
flip-flops are free on the first step), so a lookup reads a window base
that another commit of the stream changes before the lookup's decision,
whose verdict leaves on step 6.

Reachable (the ``delivery_cover`` proof, from reset, in the narrower
environment of ``DeliveryHarness(narrow=True)``: untagged segments with
small fields, no region writes, faults or retirements): a segment of a delivered message
whose buffer is still posted and not retired is refused, and a second
L = 1 segment of a message that waits for delivery is refused. Both take
18 steps (the stream row's write with its sweep, the post, two segments
of the stream), so the cover skips the steps before.

Not covered: revocations (idle, as in :mod:`formal.placement`); back-pressure
on the outputs (the ``induction`` proof's environment: the verdict's cycle
then tells its decision's); tables larger than :data:`PROOF_PARAMETERS`.
"""

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume, Cover, Module, Mux, ResetSignal, Signal

import hdl.rx.placement_check as placement_check
from abi.rx import SegmentStatus
from hdl.rx.sequence_window import SequenceWindow
from hdl.rx.untagged_buffers import Completion
from hdl.stream.bits import index_bits

from formal.placement import WIDTH_BYTES, PlacementHarness, _ObservedBuffers, observed_tables

__all__ = ["DeliveryHarness"]

_SSN_BITS = 16
#: The assumed bound on how far the window may move past a delivered message whose buffer is still live.
_RETIRE_BOUND_BITS = 14


class _ObservedWindow(SequenceWindow):
    """A SequenceWindow with an asynchronous read of stream ``observe_index``'s ``base`` on ``observed_base``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.observe_index = Signal(index_bits(self._streams))
        self.observed_base = Signal(_SSN_BITS)

    def elaborate(self, platform):
        m = super().elaborate(platform)
        port = m.submodules.states.read_port(domain="comb")
        m.d.comb += [port.addr.eq(self.observe_index), self.observed_base.eq(port.data.base)]
        return m


class _DeliveryBuffers(_ObservedBuffers):
    """The observed buffers, also with: the watched slot's completion state (``observed_completion``),
    the completion memory's write port (``completion_write_*``), and the forget sweep's writing
    state (``forget_writing_state``: FORGET_WRITE)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.observed_completion = Signal(Completion)
        self.observed_completion_ssn = Signal(_SSN_BITS)
        self.completion_write_en = Signal()
        self.completion_write_addr = Signal(16)   # wider than any slot index of the proofs' tables
        self.completion_write_state = Signal(Completion)
        self.forget_writing_state = Signal()

    def _observe(self, m):
        completions = m.submodules.completions
        port = completions.read_port(domain="comb")
        write, = completions.write_ports
        m.d.comb += [
            port.addr.eq(self._slot_index(self.observe_stream, self.observe_qn, self.observe_msn)),
            self.observed_completion.eq(port.data.state),
            self.observed_completion_ssn.eq(port.data.ssn),
            self.completion_write_en.eq(write.en),
            self.completion_write_addr.eq(write.addr),
            self.completion_write_state.eq(write.data.state),
        ]

    def _observe_states(self, m, fsm):
        m.d.comb += self.forget_writing_state.eq(fsm.ongoing("FORGET_WRITE"))


class DeliveryHarness(PlacementHarness):
    """The proof top of the module docs: a PlacementCheck with free, rule-keeping inputs, consumers
    that never stall, one watched buffer and the asserts (a) and (b).

    ``strengthen``: add the strengthening invariants (k-induction); without them only the
    properties are asserted (bounded runs from reset, and the mutant's test, which wants the
    property's own assert to be the one that fails). ``narrow``: the cover's environment, a
    subset of the proof's that keeps the solver's work small: untagged segments without header
    errors, association 0, QN 0, MSNs below 4, small offsets, lengths and DDP-SSNs,
    and no region writes, stream faults or retirements (so the covered buffers are never retired:
    the late retirement the block must tolerate). ``properties``: which of (a) ``"written"`` and
    (b) ``"once"`` to assert (the harness's test checks each alone). ``buffers``: the untagged
    buffers' class (a subclass of the observed one; the harness's test passes a mutant).
    """

    def __init__(self, *, strengthen: bool = True, narrow: bool = False, properties=("written", "once"),
                 buffers=_DeliveryBuffers, **overrides):
        super().__init__(stalls=False, **overrides)
        self.strengthen = strengthen
        self.narrow = narrow
        self.properties = frozenset(properties)
        self.buffers = buffers

    def elaborate(self, platform):
        m = Module()
        p = self.parameters
        dut = placement_check.PlacementCheck(WIDTH_BYTES, **p)
        dut._MustUse__silence = True  # elaborated here, below, so the tables can be observed
        tables = {}
        with observed_tables(tables, buffers=self.buffers, window=_ObservedWindow):
            m.submodules.dut = inside = dut.elaborate(platform)
        streams, buffers, window = tables["streams"], tables["buffers"], tables["window"]
        m.d.comb += Assume(~ResetSignal())

        # Free inputs that keep the stream rules; revocations idle; retirements free (formal.placement).
        for port in (dut.segment, dut.region_write, dut.stream_write, dut.post, dut.payload_in, dut.fault):
            self._drive_stream(m, port)
        info, beat = dut.segment.payload, dut.payload_in.payload
        m.d.comb += [info.dv.eq(0), info.rv.eq(0), info.invalidate_stag.eq(0),
                     info.error.layer.eq(0), info.error.etype.eq(0), info.error.code.eq(0),
                     beat.data.eq(0), beat.keep.eq(0)]
        for port in (dut.cmd, dut.verdict, dut.payload_out):
            m.d.comb += port.ready.eq(1)
        retire = dut.retire
        m.d.comb += [retire.valid.eq(AnySeq(1)), retire.payload.eq(AnySeq(len(retire.payload.as_value())))]
        m.d.comb += Assume(~dut.payload_in.valid | dut.payload_in.payload.last)
        self._payload_contract(m, dut)
        if self.narrow:
            m.d.comb += [Assume(~dut.region_write.valid), Assume(~dut.fault.valid), Assume(~retire.valid),
                         Assume(~info.tagged & ~info.error.valid & (info.stag == 0) & (info.to == 0)
                                & (info.tsn == 0) & (info.association == 0) & (info.qn == 0) & (info.msn < 4)
                                & (info.mo < 256) & (info.payload_length < 256) & (info.ddp_ssn < 16))]

        # The watched buffer.
        s0 = AnyConst(index_bits(dut.streams))
        q0, n0 = AnyConst(index_bits(p["queues"])), AnyConst(32)
        m.d.comb += [Assume(s0 < dut.streams), Assume(q0 < p["queues"])]
        stream_write, post = dut.stream_write, dut.post
        stream_in = stream_write.valid & stream_write.ready
        post_in = post.valid & post.ready
        m.d.comb += Assume(post.payload.qn < p["queues"])

        next_msn = Signal(32, init=1)
        posting_n0 = post_in & (post.payload.stream == s0) & (post.payload.qn == q0) & (next_msn == n0)
        with m.If(post_in & (post.payload.stream == s0) & (post.payload.qn == q0)):
            m.d.sync += next_msn.eq(next_msn + 1)
        descriptor = buffers.observed_descriptor
        ours = Signal()   # the watched slot holds the buffer the host posted for n0, not retired
        m.d.comb += [
            buffers.observe_stream.eq(s0), buffers.observe_qn.eq(q0), buffers.observe_msn.eq(n0),
            window.observe_index.eq(s0),
            ours.eq(buffers.observed_live & (descriptor.msn == n0)),
        ]

        # The verdict leaving on this cycle, if it names the watched buffer.
        verdict, cmd = dut.verdict, dut.cmd
        v = verdict.payload
        known, row = self._stream_row(v)
        for_watched = Signal()
        accepted = Signal()
        last_accepted = Signal()   # a completion record: an ACCEPTED untagged L = 1 verdict
        m.d.comb += [
            for_watched.eq(verdict.valid & ~v.tagged & known & (row == s0) & (v.qn == q0) & (v.msn == n0)),
            accepted.eq(v.status == SegmentStatus.ACCEPTED),
            last_accepted.eq(for_watched & accepted & v.last),
        ]

        # The shadow of the watched buffer's message (module docs).
        completed, delivered, swept = Signal(), Signal(), Signal()
        ssn0 = Signal(_SSN_BITS)
        base = window.observed_base
        behind_base = Signal()        # ssn0 lies behind s0's window base: received, and all before it
        distance = Signal(_SSN_BITS)  # how far the base has moved past ssn0
        delivered_now = Signal()      # delivered, as of the decisions on this cycle
        m.d.comb += [
            distance.eq(base - ssn0),
            behind_base.eq((ssn0 - base)[_SSN_BITS - 1]),
            delivered_now.eq(delivered | (completed & ~swept & behind_base)),
        ]
        with m.If(posting_n0):
            m.d.sync += [completed.eq(0), delivered.eq(0), swept.eq(0)]
        with m.Else():
            m.d.sync += delivered.eq(delivered_now)
            with m.If(last_accepted):
                m.d.sync += [completed.eq(1), ssn0.eq(v.ddp_ssn)]
            with m.If(stream_in & (stream_write.payload.index == s0) & completed & ~swept):
                # A re-arm: the sweep keeps a delivered completion, forgets an undelivered one.
                with m.If(delivered_now):
                    m.d.sync += swept.eq(1)
                with m.Else():
                    m.d.sync += completed.eq(0)
        # The verdict leaving now was decided two cycles ago (the queues' bypass, asserted below): the
        # message was delivered then if it was by then, or if an L = 1 verdict decided before it (and
        # so left before it: `completed` now) lay behind the window base of that cycle.
        delivered_1, delivered_2, ours_1, decided_ours = Signal(), Signal(), Signal(), Signal()
        base_1, base_2 = Signal(_SSN_BITS), Signal(_SSN_BITS)
        m.d.sync += [delivered_1.eq(delivered_now), delivered_2.eq(delivered_1), base_1.eq(base), base_2.eq(base_1),
                     ours_1.eq(ours), decided_ours.eq(ours_1)]
        decided_delivered = Signal()
        m.d.comb += decided_delivered.eq(delivered_2 | (completed & ~swept & (ssn0 - base_2)[_SSN_BITS - 1]))

        # Assumption: a delivered buffer still live is retired before the window moves 2**14 past it.
        m.d.comb += Assume(~(ours & delivered_now & ~swept & (distance[_RETIRE_BOUND_BITS:] != 0)))

        # The properties (module docs).
        m.d.comb += [
            Assert(cmd.valid == (verdict.valid & v.placed)),
            Assert(~cmd.valid | (cmd.payload.tag == v.tag)),
        ]
        if "written" in self.properties:  # (a) a retired buffer is never written
            m.d.comb += [
                Assert(~(for_watched & accepted & decided_delivered)),
                Assert(~(cmd.valid & for_watched & decided_delivered)),
            ]
        if "once" in self.properties:     # (b) a buffer's message completes at most once
            m.d.comb += Assert(~(last_accepted & completed))
        # Reachable, the buffer still posted and not retired: a delivered buffer's segment refused, and
        # a second L = 1 segment refused while the message waits for delivery.
        refused = for_watched & decided_ours & (v.status == SegmentStatus.ERROR)
        m.d.comb += [Cover(refused & decided_delivered), Cover(refused & v.last & completed & ~decided_delivered)]

        if self.strengthen:
            self._invariants(m, inside, streams, buffers, next_msn, n0, s0, q0, ours, dut,
                             completed | last_accepted, Mux(last_accepted, v.ddp_ssn, ssn0),
                             delivered, delivered_now, swept, behind_base)
        return m

    def _invariants(self, m, inside, streams, buffers, next_msn, n0, s0, q0, ours, dut,
                    completed, ssn0, delivered, delivered_now, swept, behind_base):
        """The strengthening invariants of the module docs. ``completed`` and ``ssn0`` count the
        completion record leaving on this cycle (its slot was written on the cycle before)."""
        p = self.parameters
        # The watched queue's posts (as formal.placement).
        m.d.comb += Assert(buffers.observed_next_post == next_msn)
        with m.If(ours):
            m.d.comb += Assert((next_msn - n0 - 1) < p["depth"])
        m.d.comb += [Assert(buffers.posting_only),
                     Assert(~buffers.writing | (buffers.writing_msn == buffers.post_queue_next))]
        self._queues_bypassed(m, inside)
        for name in ("verdicts", "commands", "decisions"):
            queue = inside.submodules[name]
            m.d.comb += Assert((queue.level == queue.held) & (queue.held <= queue.depth) & queue.consistent)
        inbound = inside.submodules.inbound
        for held, entry in ((inbound.source.valid, inbound.source.payload), (~inbound.sink.ready, inbound.following)):
            known, row = self._stream_row(entry.info)
            with m.If(held):
                m.d.comb += Assert(entry.valid & (entry.known == known) & (~known | (entry.index == row))
                                   & (entry.qn_ok == (entry.info.qn < p["queues"])))

        # The forget sweep runs with the pipeline empty and the row write held (formal.placement); no
        # completion meets it.
        stream_write = dut.stream_write
        self._forget_invariants(m, dut, streams, buffers)
        with m.If(buffers.forgetting):
            m.d.comb += Assert(~(buffers.completion_write_en & (buffers.completion_write_state == Completion.PENDING)))
        # Has a sweep of s0 written the watched slot? The sweep writes the stream's slots in order.
        local_bits = buffers._queue_bits + (p["depth"] - 1).bit_length()
        slot = buffers._slot_index(s0, q0, n0)
        swept_past = Signal()
        m.d.comb += swept_past.eq(
            stream_write.valid & (stream_write.payload.index == s0)
            & ((buffers.forget_writing_state & (buffers.completion_write_addr[:local_bits] > slot[:local_bits]))
               | buffers.forget_done))

        # The watched slot's completion state follows the shadow.
        state = buffers.observed_completion
        with m.If(ours & ~completed):
            m.d.comb += Assert(state == Completion.NONE)
        with m.If(ours & completed):
            with m.If(swept):
                m.d.comb += Assert(state == Completion.RETIRED)
            with m.Elif(swept_past):
                with m.If(delivered_now):
                    m.d.comb += Assert(state == Completion.RETIRED)
                with m.Else():
                    m.d.comb += Assert(state == Completion.NONE)
            with m.Else():
                m.d.comb += Assert((state == Completion.PENDING) & (buffers.observed_completion_ssn == ssn0))
        with m.If(ours & delivered & ~swept):
            m.d.comb += Assert(behind_base)
        m.d.comb += [Assert(~delivered | completed), Assert(~swept | delivered)]

"""Formal harness of :class:`hdl.rx.placement_check.PlacementCheck`: placement safety (RFC 5041 8.3.1 item 3, 7.1).

The harness drives every input of the block with free values (``AnySeq``) that
keep the stream rules (``valid`` held until ``ready``, payload stable) and the
host's write rules, except ``revoke``: host revocations of posted buffers are
not part of the proof (they would need the watched buffer's record to follow a
revocation and a reposting of its MSN) and stay idle. It watches one instance of everything it reasons about,
picked by free constants (``AnyConst``) so that the proof covers every choice:

* one segment, by its TSN ``tsn0`` (the block carries the TSN to the verdict
  and decides nothing by it, so "``tsn0`` is accepted at most once" loses no
  behaviour): the harness records its header and, at the cycle the block accepts
  it, the watched rows as the host last wrote them;
* one region row ``r0`` and one stream row ``s0``, shadowed from the host's
  writes;
* one posted buffer: MSN ``n0`` of queue ``q0`` of stream ``s0``, recorded
  when the host's post that takes that MSN is accepted (MSNs count from 1,
  RFC 5041 5.2).

Proved of the watched segment's command (paired with its ``verdict`` by
``tag``), where it is checked (below):

* tagged, STag index ``r0``, stream ``s0``: the row was valid, its key, PD
  (the stream's), stream binding and access right held (RFC 5041 7.1, 8.2),
  ``TO`` lay in ``[base_to, base_to + length)`` with the whole segment, and the
  command is ``host_address + (TO - base_to)``, the segment's length, inside
  ``[host_address, host_address + length)``;
* untagged on queue ``(s0, q0)`` with MSN ``n0``: that buffer was posted and
  the command is ``buffer address + MO`` inside the buffer;
* no write of row ``r0`` (invalidation, RFC 5041 8.3.1 item 6) nor of stream
  row ``s0`` (re-arm) was accepted between the segment's acceptance and the
  check;
* every command pairs with a verdict of the same tag that says ``placed``.

Three ways to check (``stalls``, ``at_queues``):

* consumers that never stall and payload packets of one beat that follow
  their segment at once; checked as the command leaves the block, on the
  cycle its verdict leaves (asserted) (the ``induction`` proof);
* free back-pressure on ``cmd``, ``verdict`` and ``payload_out`` and free
  payload timing, checked where the command and verdict enter their output
  queues, with: no record offered to an output queue (commands, verdicts,
  payload decisions) finds it full (the credit check) (``backpressure``);
  the queues pass records on unchanged and in order (:class:`Queue`, its
  tests). Checked as the command leaves, the rewrite clause is false under
  back-pressure: a write is accepted once the decision pipeline is empty,
  while earlier commands may still wait in the ``cmd`` queue (the ordering
  PlacementCheck documents);
* free back-pressure, checked as the command and verdict leave (each
  whenever its consumer takes it), without the rewrite clause (the
  ``bounded`` proof from reset and ``cover``).

Strengthening invariants for k-induction. Of every state: the shadow rows and
the post count equal the table memories, and a live buffer of MSN ``n0``
matches the recorded post and is one of its queue's last ``depth`` posts;
each output queue's count equals the payloads in its registers and FIFO, at
most its depth (and Amaranth's own FIFO invariants, elaborated for the
``formal`` platform); the posting state machine is never revoking, and
while it waits in WRITE it holds the queue's next MSN; the forget sweep
that precedes a stream row's write runs with nothing in the pipeline, and
the row write is ready on the sweep's last state only; every segment waiting
in the input queue carries the stream row, known and QN flags of its
header, and if it is the watched one it is the recorded segment and no
table write has been accepted since. With consumers that never stall, also:
the commands and verdicts queues never use their FIFO (each record goes
straight to the output register). These are what the pipeline cannot flush
by itself: everything else (stages 1-4, the tables' pipelines) is replaced
within the proofs' k = 6 steps, the five edges from a segment being taken
to its command leaving, plus one. The harness looks inside the block in one
place, :func:`observed_tables`: extra asynchronous read ports added to the
tables' own ``Memory`` objects, a view of the buffers' posting state machine
(its descriptor write port and states) and of each queue's FIFO; the other
stages are treated as a black box.

:mod:`formal.delivery` reuses this harness (its inputs, observed tables and
invariants of the posts and queues) for the delivery proofs of one watched
buffer: a delivered buffer is never written, a message completes at most
once.
"""

import contextlib
from dataclasses import dataclass
from unittest import mock

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import (Assert, Assume, Cat, Cover, Elaboratable, Fragment, Module, Mux, ResetSignal, Signal, Value,
                          unsigned)
from amaranth.lib import data

import hdl.rx.placement_check as placement_check
from abi.rx import STAG_KEY_BITS, region_entry_layout, stream_entry_layout
from hdl.layout import struct_layout
from hdl.rx.region_table import RegionTable
from hdl.rx.untagged_buffers import UntaggedBuffers
from hdl.stream.bits import index_bits
from hdl.stream.queue import Queue

__all__ = ["PROOF_PARAMETERS", "observed_tables", "PlacementHarness", "ContainmentLemma"]

#: Small tables: every check is per row and per field, and the widths generic, so two rows
#: of each kind (one watched, one not) show every interaction a larger table has.
PROOF_PARAMETERS = {
    "regions": 2, "associations": 1, "stream_ids": 2, "queues": 1, "depth": 2,
    "pd_bits": 4, "address_bits": 16, "decisions": 1, "window": 4,
}
WIDTH_BYTES = 8
_OPCODE_READ_RESPONSE = 2  # RFC 5040 4.3


class _ObservedRegionTable(RegionTable):
    """A RegionTable with an asynchronous read of row ``observe_index`` on ``observed``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.observe_index = Signal(index_bits(self.entries))
        self.observed = Signal(struct_layout(region_entry_layout(self._pd_bits, self._address_bits, self._key_bits)))

    def elaborate(self, platform):
        m = super().elaborate(platform)
        port = m.submodules.table.read_port(domain="comb")
        m.d.comb += [port.addr.eq(self.observe_index), self.observed.eq(port.data)]
        return m


class _ObservedStreamTable(placement_check.StreamTable):
    """A StreamTable with an asynchronous read of row ``observe_index`` on ``observed``."""

    def __init__(self, streams, **kwargs):
        super().__init__(streams, **kwargs)
        self.observe_index = Signal(index_bits(streams))
        self.observed = Signal(struct_layout(stream_entry_layout(self._pd_bits)))

    def elaborate(self, platform):
        m = super().elaborate(platform)
        port = m.submodules.rows.read_port(domain="comb")
        m.d.comb += [port.addr.eq(self.observe_index), self.observed.eq(port.data)]
        return m


class _ObservedBuffers(UntaggedBuffers):
    """UntaggedBuffers with asynchronous reads of one queue's ``next_post`` and one slot, and a view
    of the posting state machine: ``posting_only`` (in one of its posting or forgetting states, not
    revoking; forgetting writes only the completion states),
    ``writing`` (in WRITE) with ``writing_msn`` (the MSN being posted) and ``post_queue_next``
    (``next_post`` of the queue the ``post`` port names), ``forgetting`` (in a state of the forget
    sweep) and ``forget_done`` (in its last state, FORGET_DONE)."""

    _FORGET_STATES = ("FORGET_READ", "FORGET_WRITE", "FORGET_DONE")
    _POSTING_STATES = ("IDLE", "READ_LIVE", "CHECK", "WRITE", *_FORGET_STATES)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.observe_stream = Signal(index_bits(self._streams))
        self.observe_qn = Signal(index_bits(self._queues))
        self.observe_msn = Signal(32)
        self.observed_next_post = Signal(32)
        self.observed_live = Signal()
        self.observed_descriptor = Signal(data.StructLayout({
            "msn": unsigned(32), "address": unsigned(self._address_bits), "length": unsigned(32)}))
        self.posting_only = Signal()
        self.writing = Signal()
        self.writing_msn = Signal(32)
        self.post_queue_next = Signal(32)
        self.forgetting = Signal()
        self.forget_done = Signal()

    def elaborate(self, platform):
        m = super().elaborate(platform)
        next_post = m.submodules.next_post.read_port(domain="comb")
        post_next_post = m.submodules.next_post.read_port(domain="comb")
        live = m.submodules.live.read_port(domain="comb")
        descriptor = m.submodules.descriptors.read_port(domain="comb")
        # The descriptor is written on every cycle of WRITE, with the MSN being posted.
        descriptor_write, = m.submodules.descriptors.write_ports
        slot = self._slot_index(self.observe_stream, self.observe_qn, self.observe_msn)
        m.d.comb += [
            next_post.addr.eq(self._queue_index(self.observe_stream, self.observe_qn)),
            live.addr.eq(slot), descriptor.addr.eq(slot),
            self.observed_next_post.eq(next_post.data),
            self.observed_live.eq(live.data),
            self.observed_descriptor.eq(descriptor.data),
            post_next_post.addr.eq(self._queue_index(self.post.payload.stream, self.post.payload.qn)),
            self.post_queue_next.eq(post_next_post.data),
            self.writing.eq(descriptor_write.en),
            self.writing_msn.eq(descriptor_write.data.msn),
        ]
        self._observe(m)
        # The state machine's states, from the elaborated fragment (Amaranth lists a module's FSMs
        # in Fragment.generated).
        fragment = Fragment.get(m, platform)
        fsm = fragment.generated["fsm"]
        missing = [name for name in self._POSTING_STATES if name not in fsm.encoding]
        if missing:
            raise NameError(f"UntaggedBuffers has no state {missing}: update the harness")
        outer = Module()
        outer.submodules.buffers = fragment
        outer.d.comb += [
            self.posting_only.eq(Cat(fsm.ongoing(name) for name in self._POSTING_STATES).any()),
            self.forgetting.eq(Cat(fsm.ongoing(name) for name in self._FORGET_STATES).any()),
            self.forget_done.eq(fsm.ongoing("FORGET_DONE")),
        ]
        self._observe_states(outer, fsm)
        return outer

    def _observe(self, m):
        """Hook for a subclass: more observation ports on the block's memories (``m`` is the block's
        module, not yet elaborated into a fragment)."""

    def _observe_states(self, m, fsm):
        """Hook for a subclass: views of the state machine ``fsm`` (statements go into ``m``)."""


class _ObservedQueue(Queue):
    """A Queue with ``fifo_used``: its FIFO (depth 3 and more: the staging register and the LUT
    RAM, or the block RAM and the payload fetched from it) is written, holds a staged payload or is read
    on this cycle, and ``held``: the payloads in its output and skid registers and in its FIFO
    (``level`` counts the same payloads by the transfers at its ports)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fifo_used = Signal()
        self.held = Signal(range(2 * self.depth + 3))  # wide enough for any state of the registers
        self.consistent = Signal()

    def _elaborate_skid(self, m, sink, source, level):
        super()._elaborate_skid(m, sink, source, level)
        self._skid_level = level

    def _elaborate_memory(self, m, writing, taking):
        self._fifo = super()._elaborate_memory(m, writing, taking)
        return self._fifo

    def _elaborate_block_memory(self, m, writing, room):
        self._fifo = super()._elaborate_block_memory(m, writing, room)
        return self._fifo

    def elaborate(self, platform):
        m = super().elaborate(platform)
        skid = self._skid_flags
        if self.depth > 2 and self._block_ram:
            fifo, counters = self._fifo, self._counters  # the staging register, the block RAM, the fetched payload
            bits = len(counters.removed)
            stored = fifo.staged_valid + fifo.in_memory + fifo.readable
            m.d.comb += [
                self.fifo_used.eq(fifo.writing | fifo.staged_valid | fifo.fetching | fifo.readable),
                self.held.eq(self._skid_level + stored),
                # The flags kept equal to compares of the counters: ready, bypass, held (payloads in the
                # memory); the memory never holds more than the queue's depth; a payload is
                # fetched only when the skid will take it.
                self.consistent.eq((counters.ready == (counters.count != self.depth))
                                   & (counters.removed_ahead == (counters.removed + self.depth - 1)[:bits])
                                   & (counters.bypass == (counters.stored == 0))
                                   & (fifo.held == (fifo.in_memory != 0))
                                   & (fifo.in_memory <= self.depth)
                                   & (counters.stored == stored)
                                   & (~fifo.readable | skid.free)),
            ]
        elif self.depth > 2:
            fifo, counters = self._fifo, self._counters  # the staging register and the LUT RAM
            bits = len(counters.removed)
            stored = fifo.staged_valid + fifo.in_memory
            m.d.comb += [
                self.fifo_used.eq(fifo.writing | fifo.staged_valid | fifo.reading),
                self.held.eq(self._skid_level + stored),
                # The flags are kept equal to compares of the counters (loaded from the present
                # values, so an induction needs this said): ready, bypass, readable.
                self.consistent.eq((counters.ready == (counters.count != self.depth))
                                   & (counters.removed_ahead == (counters.removed + self.depth - 1)[:bits])
                                   & (counters.bypass == (counters.stored == 0))
                                   & (fifo.readable == (fifo.in_memory != 0))
                                   & (counters.stored == stored)),
            ]
        else:
            m.d.comb += [self.held.eq(self._skid_level), self.consistent.eq(1)]
        # The skid's `free` flag is the complement of its `valid` (ready is a flip-flop of its own);
        # the copies of a replicated flip-flop are equal.
        m.d.comb += Assert(self.consistent & (skid.free == ~skid.valid))
        for first, *copies in self.replica_groups:
            m.d.comb += [Assert(copy == first) for copy in copies]
        return m


@contextlib.contextmanager
def observed_tables(tables: dict, *, region_table=_ObservedRegionTable, buffers=_ObservedBuffers, window=None):
    """While active, a PlacementCheck elaborates observed tables and queues and lists the tables
    in ``tables`` (keys ``regions``, ``streams``, ``buffers``, and ``window`` if given).
    ``region_table`` and ``buffers`` replace the region table's and the untagged buffers' classes
    (subclasses of the observed ones: more views, or a mutant for a harness's own test);
    ``window``, if given, the DDP-SSN window's."""
    def recording(name, cls):
        def make(*args, **kwargs):
            tables[name] = cls(*args, **kwargs)
            return tables[name]
        return make

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(placement_check, "RegionTable", recording("regions", region_table)))
        stack.enter_context(mock.patch.object(placement_check, "StreamTable",
                                              recording("streams", _ObservedStreamTable)))
        stack.enter_context(mock.patch.object(placement_check, "UntaggedBuffers", recording("buffers", buffers)))
        stack.enter_context(mock.patch.object(placement_check, "Queue", _ObservedQueue))
        if window is not None:
            stack.enter_context(mock.patch.object(placement_check, "SequenceWindow", recording("window", window)))
        yield tables


@dataclass(frozen=True)
class _Watch:
    """What the harness watches (module docs): the free constants, the watched segment as accepted,
    the rows as they were then, the watched buffer's post, and whether a row was rewritten since."""
    tsn0: Value
    r0: Value
    s0: Value
    q0: Value
    n0: Value
    accepted: Signal
    segment: data.View
    region: data.View
    stream: data.View
    buffer: data.View
    region_rewritten: Signal
    stream_rewritten: Signal


class PlacementHarness(Elaboratable):
    """The proof top: a PlacementCheck with free, rule-keeping inputs and the asserts above.

    ``stalls``: free back-pressure and payload timing, or none. ``at_queues``: check the
    command and verdict where they enter the output queues, not as they leave (module docs).
    ``region_table``: the class of the region table (the harness's test passes a mutant).
    """

    def __init__(self, *, stalls: bool, at_queues: bool = False, region_table=_ObservedRegionTable, **overrides):
        self.stalls = stalls
        self.at_queues = at_queues
        self.region_table = region_table
        self.parameters = {**PROOF_PARAMETERS, **overrides}

    def elaborate(self, platform):
        m = Module()
        p = self.parameters
        dut = placement_check.PlacementCheck(WIDTH_BYTES, **p)
        dut._MustUse__silence = True  # elaborated here, below, so the tables can be observed
        tables = {}
        with observed_tables(tables, region_table=self.region_table):
            m.submodules.dut = inside = dut.elaborate(platform)
        regions, streams, buffers = tables["regions"], tables["streams"], tables["buffers"]
        address_bits = p["address_bits"]
        m.d.comb += Assume(~ResetSignal())

        # Free inputs that keep the stream rules.
        # (Not ``revoke``: host revocations of posted buffers stay idle, see module docs.)
        for port in (dut.segment, dut.region_write, dut.stream_write, dut.post, dut.payload_in, dut.fault):
            self._drive_stream(m, port)
        # Fields that no decision reads are fixed, which keeps the solver's work small.
        info, beat = dut.segment.payload, dut.payload_in.payload
        m.d.comb += [info.dv.eq(0), info.rv.eq(0), info.invalidate_stag.eq(0),
                     info.error.layer.eq(0), info.error.etype.eq(0), info.error.code.eq(0),
                     beat.data.eq(0), beat.keep.eq(0)]
        for port in (dut.cmd, dut.verdict, dut.payload_out):
            m.d.comb += port.ready.eq(AnySeq(1) if self.stalls else 1)
        # Retirements (messages delivered in DDP-SSN order, downstream of the block) come at any time.
        retire = dut.retire
        m.d.comb += [retire.valid.eq(AnySeq(1)), retire.payload.eq(AnySeq(len(retire.payload.as_value())))]

        # The watched segment, rows and buffer.
        tsn0 = AnyConst(32)
        r0, s0 = AnyConst(index_bits(p["regions"])), AnyConst(index_bits(dut.streams))
        q0, n0 = AnyConst(index_bits(p["queues"])), AnyConst(32)
        m.d.comb += [Assume(r0 < p["regions"]), Assume(s0 < dut.streams), Assume(q0 < p["queues"])]

        segment, region_write, stream_write, post = dut.segment, dut.region_write, dut.stream_write, dut.post
        segment_in = segment.valid & segment.ready
        region_in = region_write.valid & region_write.ready
        stream_in = stream_write.valid & stream_write.ready
        post_in = post.valid & post.ready

        # Host rules: a region or buffer lies in the host address space; QN below `queues`.
        entry = region_write.payload.entry
        buffer = post.payload
        m.d.comb += [
            Assume(entry.host_address + entry.length <= (1 << address_bits)),
            Assume(buffer.address + buffer.length <= (1 << address_bits)),
            Assume(buffer.qn < p["queues"]),
        ]

        # Shadows of the watched rows (memories start at zero) and of the watched queue's posts.
        key_bits = p.get("key_bits", STAG_KEY_BITS)
        region_shadow = Signal(struct_layout(region_entry_layout(p["pd_bits"], address_bits, key_bits)))
        stream_shadow = Signal(struct_layout(stream_entry_layout(p["pd_bits"])))
        next_msn = Signal(32, init=1)
        watched_buffer = Signal(data.StructLayout({"posted": 1, "address": address_bits, "length": 32}))
        with m.If(region_in & (region_write.payload.index == r0)):
            m.d.sync += region_shadow.eq(entry)
        with m.If(stream_in & (stream_write.payload.index == s0)):
            m.d.sync += stream_shadow.eq(stream_write.payload.entry)
        with m.If(post_in & (buffer.stream == s0) & (buffer.qn == q0)):
            m.d.sync += next_msn.eq(next_msn + 1)
            with m.If(next_msn == n0):
                m.d.sync += [watched_buffer.posted.eq(1), watched_buffer.address.eq(buffer.address),
                             watched_buffer.length.eq(buffer.length)]

        # Strengthening invariants: the tables hold what the host wrote.
        descriptor = buffers.observed_descriptor
        m.d.comb += [
            regions.observe_index.eq(r0), streams.observe_index.eq(s0),
            buffers.observe_stream.eq(s0), buffers.observe_qn.eq(q0), buffers.observe_msn.eq(n0),
            Assert(regions.observed == region_shadow),
            Assert(streams.observed == stream_shadow),
            Assert(buffers.observed_next_post == next_msn),
        ]
        # A live buffer is one of the queue's last `depth` posts (a post waits for its slot).
        posts_since = Signal(32)
        m.d.comb += posts_since.eq(next_msn - n0 - 1)
        with m.If(buffers.observed_live & (descriptor.msn == n0)):
            m.d.comb += Assert(watched_buffer.posted & (descriptor.address == watched_buffer.address)
                               & (descriptor.length == watched_buffer.length) & (posts_since < p["depth"]))

        # Ordering guarantee at the ports: no segment is accepted on the cycle a table write is.
        m.d.comb += Assert(~(segment_in & (region_in | stream_in)))

        # The watched segment, as accepted, and the rows as they were then.
        watched = Signal(segment.payload.shape())
        accepted, region_rewritten, stream_rewritten = Signal(), Signal(), Signal()
        region_then = Signal.like(region_shadow)
        stream_then = Signal.like(stream_shadow)
        with m.If(segment_in & (segment.payload.tsn == tsn0)):
            m.d.comb += Assume(~accepted)
            m.d.sync += [watched.eq(segment.payload), accepted.eq(1), region_then.eq(region_shadow),
                         stream_then.eq(stream_shadow), region_rewritten.eq(0), stream_rewritten.eq(0)]
        with m.If(accepted & region_in & (region_write.payload.index == r0)):
            m.d.sync += region_rewritten.eq(1)
        with m.If(accepted & stream_in & (stream_write.payload.index == s0)):
            m.d.sync += stream_rewritten.eq(1)

        watch = _Watch(tsn0=tsn0, r0=r0, s0=s0, q0=q0, n0=n0, accepted=accepted, segment=watched,
                       region=region_then, stream=stream_then, buffer=watched_buffer,
                       region_rewritten=region_rewritten, stream_rewritten=stream_rewritten)
        if not self.stalls:
            # Consumers never stall; a packet is one beat (see module docs).
            m.d.comb += Assume(~dut.payload_in.valid | dut.payload_in.payload.last)
            self._queues_bypassed(m, inside)
        if self.at_queues:
            self._pipeline_invariants(m, inside, buffers, watch, region_shadow, stream_shadow)
            self._forget_invariants(m, dut, streams, buffers)
            self._check_queue_entries(m, inside, watch)
        elif self.stalls:
            # From reset only (bmc, cover): the invariants are proved, for every reachable state with
            # back-pressure, by the at_queues proof, and would only slow the unrolling down here.
            self._check_outputs_paired_by_tag(m, dut, watch)
        else:
            self._pipeline_invariants(m, inside, buffers, watch, region_shadow, stream_shadow)
            self._forget_invariants(m, dut, streams, buffers)
            self._check_outputs(m, dut, watch)

        self._payload_contract(m, dut)
        return m

    def _stream_row(self, info):
        """(known, row): the segment names a stream of the table, and its row (RFC 5041 8.2: a
        stream is an (association, stream id) pair; PlacementCheck's row numbering)."""
        p = self.parameters
        known = (info.association < p["associations"]) & (info.stream_id < p["stream_ids"])
        return known, info.association * p["stream_ids"] + info.stream_id

    @staticmethod
    def _queues_bypassed(m, inside):
        """With consumers that never stall, the output queues pass each record straight to their
        output register: the FIFO is never used, so a command and its verdict take the same edge."""
        for name in ("verdicts", "commands"):
            queue = inside.submodules[name]
            m.d.comb += [Assert(~queue.fifo_used), Assert(queue.level == queue.source.valid),
                         Assert(queue.consistent)]

    def _pipeline_invariants(self, m, inside, buffers, watch, region_shadow, stream_shadow):
        """Facts of every reachable state about what can wait for any time (see module docs)."""
        # Each output queue's count is the payloads it holds (the credit check relies on it).
        for name in ("verdicts", "commands", "decisions"):
            queue = inside.submodules[name]
            m.d.comb += Assert((queue.level == queue.held) & (queue.held <= queue.depth) & queue.consistent)
        # Posting: no revocation is ever requested; a post waiting in WRITE (retirements take the
        # live-bit port first, on any number of cycles) writes the queue's next MSN.
        m.d.comb += [Assert(buffers.posting_only),
                     Assert(~buffers.writing | (buffers.writing_msn == buffers.post_queue_next))]
        # A segment may wait in the input queue for any time (until the output queues have room):
        # its stream row and flags are those of its header; the watched one there is the one
        # recorded at its acceptance, and no table write has been accepted since (writes wait
        # for the input queue to drain).
        inbound = inside.submodules.inbound
        entries = ((inbound.source.valid, inbound.source.payload),
                   (~inbound.sink.ready, inbound.following))  # the skid register, when full
        for held, entry in entries:
            known, row = self._stream_row(entry.info)
            qn_ok = entry.info.qn < self.parameters["queues"]
            with m.If(held):
                m.d.comb += Assert(entry.valid & (entry.known == known) & (~known | (entry.index == row))
                                   & (entry.qn_ok == qn_ok))
            with m.If(held & (entry.info.tsn == watch.tsn0)):
                m.d.comb += [
                    Assert(watch.accepted & (entry.info.as_value() == watch.segment.as_value())),
                    Assert(~watch.region_rewritten & ~watch.stream_rewritten),
                    Assert((watch.region == region_shadow) & (watch.stream == stream_shadow)),
                ]

    @staticmethod
    def _forget_invariants(m, dut, streams, buffers):
        """The forget sweep (a stream row's write sweeps the stream's buffer slots first) runs with
        nothing in the pipeline (``hold`` low: it starts so, and no segment enters while the row
        write is pending, which it is until the sweep's end), and the row write's ``ready`` (a
        flip-flop of its own) is high on the sweep's last state only."""
        with m.If(buffers.forgetting):
            m.d.comb += Assert(dut.stream_write.valid & ~streams.hold)
        m.d.comb += Assert(buffers.forget.ready == buffers.forget_done)

    def _check_outputs(self, m, dut, watch):
        """Consumers never stall: a command leaves with its verdict."""
        verdict, cmd = dut.verdict, dut.cmd
        verdict_out = verdict.valid & verdict.ready
        m.d.comb += [
            Assert(~(verdict_out & (verdict.payload.tsn == watch.tsn0)) | watch.accepted),
            Assert(cmd.valid == (verdict.valid & verdict.payload.placed)),
            Assert(~cmd.valid | (cmd.payload.tag == verdict.payload.tag)),
        ]
        with m.If(verdict_out & verdict.payload.placed & (verdict.payload.tsn == watch.tsn0)):
            self._check(m, cmd.payload, watch, watch.region_rewritten, watch.stream_rewritten)

    def _check_outputs_paired_by_tag(self, m, dut, watch):
        """Free back-pressure: pair the command and the verdict of tag t0, whichever leaves first.
        A table write may come between the watched segment's decision and its command leaving
        (module docs), so that is not asserted here."""
        verdict, cmd = dut.verdict, dut.cmd
        verdict_out = verdict.valid & verdict.ready
        cmd_out = cmd.valid & cmd.ready
        m.d.comb += Assert(~(verdict_out & (verdict.payload.tsn == watch.tsn0)) | watch.accepted)
        t0 = AnyConst(16)
        cmd_seen, verdict_seen = Signal(), Signal()
        cmd_record = Signal(cmd.payload.shape())
        verdict_record = Signal(data.StructLayout({"watched": 1, "placed": 1}))
        cmd_now = cmd_out & (cmd.payload.tag == t0)
        verdict_now = verdict_out & (verdict.payload.tag == t0)
        m.d.comb += [Assert(~(cmd_now & cmd_seen)), Assert(~(verdict_now & verdict_seen))]
        with m.If(cmd_now):
            m.d.sync += [cmd_seen.eq(1), cmd_record.eq(cmd.payload)]
        with m.If(verdict_now):
            m.d.sync += [verdict_seen.eq(1), verdict_record.watched.eq(verdict.payload.tsn == watch.tsn0),
                         verdict_record.placed.eq(verdict.payload.placed)]
        pair_cmd = Signal.like(cmd_record)
        pair_verdict = Signal.like(verdict_record)
        m.d.comb += [
            pair_cmd.eq(Mux(cmd_now, cmd.payload, cmd_record)),
            pair_verdict.watched.eq(Mux(verdict_now, verdict.payload.tsn == watch.tsn0, verdict_record.watched)),
            pair_verdict.placed.eq(Mux(verdict_now, verdict.payload.placed, verdict_record.placed)),
        ]
        with m.If((cmd_now | cmd_seen) & (verdict_now | verdict_seen)):
            m.d.sync += [cmd_seen.eq(0), verdict_seen.eq(0)]
            m.d.comb += Assert(pair_verdict.placed)
            with m.If(pair_verdict.watched):
                self._check(m, pair_cmd, watch, None, None)

    def _check_queue_entries(self, m, inside, watch):
        """Free back-pressure, checked where the records enter the output queues: no record is
        lost (the credit check), a command enters with its verdict, and the watched segment's
        command, as it enters the commands queue, follows the rows as they were at its acceptance,
        with no table write accepted since. The queues then pass records on in order
        (:class:`hdl.stream.queue.Queue`)."""
        verdicts, commands = inside.submodules.verdicts, inside.submodules.commands
        for queue in (verdicts, commands, inside.submodules.decisions):
            m.d.comb += Assert(~queue.sink.valid | queue.sink.ready)
        verdict, cmd = verdicts.sink, commands.sink
        m.d.comb += [
            Assert(~(verdict.valid & (verdict.payload.tsn == watch.tsn0)) | watch.accepted),
            Assert(cmd.valid == (verdict.valid & verdict.payload.placed)),
            Assert(~cmd.valid | (cmd.payload.tag == verdict.payload.tag)),
        ]
        with m.If(verdict.valid & verdict.payload.placed & (verdict.payload.tsn == watch.tsn0)):
            self._check(m, cmd.payload, watch, watch.region_rewritten, watch.stream_rewritten)

    @staticmethod
    def _drive_stream(m, port):
        """Free ``valid`` and payload, held until ``ready`` (amaranth.lib.stream rules)."""
        payload = Value.cast(port.payload)
        waiting = Signal()
        held = Signal.like(port.payload)
        m.d.sync += [waiting.eq(port.valid & ~port.ready), held.eq(port.payload)]
        m.d.comb += [port.valid.eq(AnySeq(1)), payload.eq(AnySeq(len(payload)))]
        with m.If(waiting):
            m.d.comb += [Assume(port.valid), Assume(payload == Value.cast(held))]

    def _payload_contract(self, m, dut):
        """One packet per segment with a payload and no header error, after that segment."""
        segment, beat = dut.segment, dut.payload_in
        owed = Signal(5)
        owes = (segment.valid & segment.ready & (segment.payload.payload_length != 0)
                & ~segment.payload.error.valid)
        ends = beat.valid & beat.ready & beat.payload.last
        m.d.sync += owed.eq(owed + owes - ends)
        m.d.comb += Assume(~beat.valid | (owed != 0))
        if not self.stalls:
            m.d.comb += Assume(beat.valid == (owed != 0))

    def _check(self, m, cmd, watch, region_rewritten, stream_rewritten):
        """The asserts on the command of the watched segment (see module docs); the rewrite flags
        are asserted low unless None."""
        segment, region, stream, buffer = watch.segment, watch.region, watch.stream, watch.buffer
        r0, s0, q0, n0 = watch.r0, watch.s0, watch.q0, watch.n0
        key_bits = self.parameters.get("key_bits", STAG_KEY_BITS)
        known, row = self._stream_row(segment)
        on_s0 = known & (row == s0)
        m.d.comb += Assert((cmd.length == segment.payload_length) & (cmd.length != 0))
        with m.If(segment.tagged & (segment.stag[key_bits:] == r0) & on_s0):
            to_end = segment.to + segment.payload_length
            access = Mux(segment.opcode == _OPCODE_READ_RESPONSE, region.local_write, region.remote_write)
            bound_ok = ~region.stream_bound | ((region.association == segment.association)
                                               & (region.stream_id == segment.stream_id))
            m.d.comb += [
                Assert(region.valid & stream.valid),
                Assert(region.key == segment.stag[:key_bits]),
                Assert(region.pd == stream.pd),
                Assert(bound_ok),
                Assert(access),
                Assert((segment.to >= region.base_to) & (to_end <= region.base_to + region.length)),
                Assert(cmd.address == (region.host_address + (segment.to - region.base_to))[:len(cmd.address)]),
                Cover(1),
            ]
            if region_rewritten is not None:
                m.d.comb += Assert(~region_rewritten & ~stream_rewritten)
        with m.If(~segment.tagged & on_s0 & (segment.qn == q0) & (segment.msn == n0)):
            m.d.comb += [
                Assert(stream.valid & buffer.posted),
                Assert(cmd.address == (buffer.address + segment.mo)[:len(cmd.address)]),
                Assert(segment.mo + segment.payload_length <= buffer.length),
                Cover(1),
            ]
            if stream_rewritten is not None:
                m.d.comb += Assert(~stream_rewritten)


class ContainmentLemma(Elaboratable):
    """The arithmetic step from the checks the harness proves to "the command lies inside".

    Tagged: ``base_to <= TO``, ``TO + length <= base_to + region length`` (exact), and
    ``address = host_address + (TO - base_to)`` modulo the address width, for a region inside
    the address space, give ``[address, address + length)`` inside
    ``[host_address, host_address + region length)``. Untagged: ``MO + length <= buffer
    length`` and ``address = buffer address + MO`` likewise. Kept apart from the harness
    because a bit-level solver proves this inequality alone quickly, and within the
    design's unrolled pipeline very slowly.
    """

    def __init__(self, address_bits: int = PROOF_PARAMETERS["address_bits"]):
        self.address_bits = address_bits

    def elaborate(self, platform):
        m = Module()
        bits = self.address_bits
        host, region_length = AnyConst(bits), AnyConst(64)
        base_to, to, length = AnyConst(64), AnyConst(64), AnyConst(16)
        buffer_address, buffer_length, mo = AnyConst(bits), AnyConst(32), AnyConst(32)
        tagged_address = Signal(bits)
        untagged_address = Signal(bits)
        m.d.comb += [
            tagged_address.eq(host + (to - base_to)),
            untagged_address.eq(buffer_address + mo),
            Assume(host + region_length <= (1 << bits)),
            Assume(buffer_address + buffer_length <= (1 << bits)),
            Assume(length != 0),
        ]
        with m.If((to >= base_to) & (to + length <= base_to + region_length)):
            m.d.comb += Assert((tagged_address >= host) & (tagged_address + length <= host + region_length))
        with m.If(mo + length <= buffer_length):
            m.d.comb += Assert((untagged_address >= buffer_address)
                               & (untagged_address + length <= buffer_address + buffer_length))
        return m

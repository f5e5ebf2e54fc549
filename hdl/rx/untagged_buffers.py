"""Posted Untagged Buffers and the untagged placement checks (RFC 5041 5.2, 7.1).

Each (stream, QN) queue owns ``depth`` slots. The host posts a buffer
{host address, length} on ``post``; it takes the queue's next MSN, starting
at 1 (RFC 5041 5.2: the first message of a queue has MSN 1), and the slot
``MSN mod depth``. A slot is *live* from its post until its buffer is
retired. Per queue the block keeps ``next_post`` (the MSN the next post
takes); every live buffer lies in ``[next_post - depth, next_post)``, the
legal MSN window.

Checks of a lookup {stream, qn, msn, mo, length, last}, in the order of the golden
model (``model.ddp.sink.DdpSink._validate_untagged``):

1. MSN behind the window, ``(msn - (next_post - depth)) mod 2**32 >= 2**31``
   -> MSN range (7.1 untagged item 5; DDP 0x2/0x03);
2. no live slot holds this MSN, or its message was delivered (below): if
   ``(msn - next_post) mod 2**32 < 2**31`` the ULP has not posted it -> no
   buffer (item 2; 0x2/0x02), else it is inside the window but already
   consumed -> MSN range (0x2/0x03);
   2a. an L = 1 segment for a buffer whose last segment has already been
   accepted -> MSN range (5.3: delivered at most once);
3. for a non-zero payload, ``mo >= buffer length`` -> invalid MO (item 3;
   0x2/0x04), then ``mo + length > buffer length`` -> message too long
   (item 4; 0x2/0x05). Zero-length segments need their buffer but place
   nothing, so MO is not checked (RFC 5041 5.2).

The model starts its window at the oldest buffer not yet consumed; MSNs
between that and ``next_post - depth`` have no live slot and are behind
``next_post``, so both give MSN range there. The two differ only for an MSN
about 2**31 ahead (within ``depth`` of the half-way point): MSN range here,
no buffer in the model.

``address`` is ``buffer address + mo``. The QN must be below ``queues``; the
caller refuses other QNs (0x2/0x01) before using the result.

Retirement: the caller retires a buffer by a cycle with ``retire_en`` high
when the message of that MSN is delivered (RFC 5041 5.4: all its segments
placed; :class:`hdl.rx.delivery_order.DeliveryOrder` does it when the L = 1
segment's record leaves in DDP-SSN order), so a segment of the message that
arrives after its L = 1 segment still finds the buffer. The slot stops
being live.

Delivery: retirement comes after the message's last record has left the
delivery order, later than the next segments' lookups (a memory stall makes
it later still), so the slot also keeps its message's *completion*, judged
against the stream's DDP-SSN window as the golden model's sink does: the
caller reports each accepted L = 1 segment (``complete_en``, ``complete``:
its MSN and DDP-SSN, on its commit cycle), and the slot's state becomes
PENDING with that DDP-SSN. A lookup reads the state beside the slot and,
on stage 1, the stream's window ``base`` (the lowest DDP-SSN not yet
received, after every earlier segment's commit): a PENDING DDP-SSN behind
``base`` is delivered (RFC 5041 5.4: every segment before it placed), so
the buffer counts as consumed from the commit that delivered it, whatever
the retirement's timing, as long as it comes before the stream's window
has moved 2**15 DDP-SSNs on (the serial comparison would then read the
completion as ahead of ``base`` again; ``make formal``'s delivery proof
assumes 2**14). A PENDING slot also refuses a second L = 1
segment of its MSN (MSN range, as the model: 5.3, a message completes at
most once). A post clears the state (NONE). ``forget`` (the caller's
rewrite of a stream row, which restarts its window) sweeps the stream's
slots, one a cycle: a PENDING state behind the stream's old base
(``forget_base``) becomes RETIRED (delivered; its retirement may still be
on the way), any other becomes NONE (the last segment was never
delivered: the model forgets it on re-arm). A completion write is
registered and written one cycle later, like a retirement, and stage 1
applies the one requested on the lookup's own cycle; posts wait for a
cycle without one.

Hazards: a lookup reads the queue and slot state on the cycle it is taken;
the reads are transparent for the retire and post writes, so a post on that
same cycle is seen. A retirement request is registered and written one
cycle later; stage 1 applies the one requested on the lookup's own cycle
(``en`` stays high, as in the placement check), so a retirement requested
on or before the cycle a lookup is taken is seen.

Posting: ``post`` is handled by a small state machine: read ``next_post``,
read the slot's live bit, then (on the next cycle, so the write
enables start at a flip-flop) write the slot and ``next_post + 1``. A post
to a queue whose next slot is still live (``depth`` buffers outstanding)
waits (``post.ready`` low) until a retirement frees that slot; a host that
gives up (drops ``valid``, outside the stream rules) leaves no trace. A post
takes four cycles; lookups are never held up by posts.

Revocation (:func:`abi.rx.buffer_revoke_layout`), by the same state
machine, so posts and revocations take turns: one buffer (its MSN) is
revoked by clearing its slot's live bit if the slot still holds that MSN,
i.e. the bit is set and ``next_post - depth <= msn < next_post``; a whole
queue by clearing every slot's live bit, one a cycle, then setting
``next_post`` to 1. A revoked MSN behaves like a consumed one: it is still
below ``next_post`` and has no live slot, so a lookup gets MSN range, as the
model does. A single revocation takes five cycles, a whole queue ``depth +
3``; writes wait for a cycle without retirement.

Latency: a lookup taken on a cycle with ``en`` high has its ``result``
three advances later. Throughput: one lookup per cycle.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, enum, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from abi.rx import buffer_post_layout, buffer_revoke_layout
from hdl.layout import struct_layout
from hdl.stream.bits import index_bits

__all__ = [
    "UntaggedFault", "untagged_lookup_layout", "untagged_result_layout", "untagged_retire_layout",
    "untagged_complete_layout", "Completion", "UntaggedBuffers",
]

_MSN_BITS = 32
_SSN_BITS = 16
_HALF = 1 << (_MSN_BITS - 1)
_BUFFER_LENGTH_BITS = 32
_PIECE_BITS = 8
"""Stage 1 compares the buffer length, from the descriptor RAM's output, a piece of this many bits at a time:
a carry chain of a byte after the RAM, not of the whole length. Stage 2 joins the pieces."""
_MSN_PIECE_BITS = 4
"""Likewise the descriptor's MSN against the lookup's, equal a piece of this many bits at a time: two levels of
logic after the RAM (and its read-through mux) instead of a 32-bit equality's four."""


def _piece_compares(value, length, *, strict: bool):
    """``value``'s pieces against ``length``'s (``_BUFFER_LENGTH_BITS``), lowest first: above (the lowest
    piece: at or above unless ``strict``) and, from the second piece on, equal. :func:`_joined` joins them."""
    above, equal = [], []
    for start in range(0, _BUFFER_LENGTH_BITS, _PIECE_BITS):
        piece, limit = value[start:start + _PIECE_BITS], length[start:start + _PIECE_BITS]
        above.append(piece > limit if strict or start else piece >= limit)
        if start:
            equal.append(piece == limit)
    return Cat(*above), Cat(*equal)


def _joined(above, equal):
    """``value > length`` (``>=`` if not strict) from :func:`_piece_compares`: the highest piece that differs."""
    result = above[0]
    for piece in range(1, len(above)):
        result = above[piece] | (equal[piece - 1] & result)
    return result


class UntaggedFault(enum.Enum, shape=3):
    """Outcome of the untagged checks; the value is the RFC 5041 7.2 type 2 code."""
    NONE = 0
    NO_BUFFER = 2        # 0x2/0x02
    MSN_RANGE = 3        # 0x2/0x03
    INVALID_MO = 4       # 0x2/0x04
    MESSAGE_TOO_LONG = 5  # 0x2/0x05





def untagged_lookup_layout(streams: int, queues: int = 3) -> data.StructLayout:
    return data.StructLayout({
        "stream": unsigned(index_bits(streams)),
        "qn": unsigned(index_bits(queues)),
        "msn": unsigned(_MSN_BITS),
        "mo": unsigned(32),
        "length": unsigned(16),
        "last": unsigned(1),
    })


def untagged_result_layout(address_bits: int = 64) -> data.StructLayout:
    return data.StructLayout({
        "fault": UntaggedFault,
        "address": unsigned(address_bits),
    })


def untagged_retire_layout(streams: int, queues: int = 3) -> data.StructLayout:
    return data.StructLayout({
        "stream": unsigned(index_bits(streams)),
        "qn": unsigned(index_bits(queues)),
        "msn": unsigned(_MSN_BITS),
    })


def untagged_complete_layout(streams: int, queues: int = 3) -> data.StructLayout:
    return data.StructLayout({
        "stream": unsigned(index_bits(streams)),
        "qn": unsigned(index_bits(queues)),
        "msn": unsigned(_MSN_BITS),
        "ssn": unsigned(_SSN_BITS),
    })


class Completion(enum.Enum, shape=2):
    """Where a slot's message stands: no last segment yet, last segment accepted (delivered once
    the stream's window base passes its DDP-SSN), or delivered before its stream was re-armed."""
    NONE = 0
    PENDING = 1
    RETIRED = 2


class UntaggedBuffers(wiring.Component):
    """Posted receive buffers of ``streams x queues`` queues, ``depth`` deep, and their checks.

    Parameters
    ----------
    streams : int
        DDP streams (rows of the stream table).
    queues : int
        Queues per stream (RDMAP uses QN 0 Send, 1 Read Request, 2 Terminate).
    depth : int
        Buffers per queue, a power of two.
    address_bits : int
        Width of a host address.

    Ports
    -----
    post : ``In(stream.Signature(buffer_post_layout(...)))``
        Host posts; each takes the queue's next MSN.
    en : ``In(1)``
        Pipeline advance: ``lookup`` is taken and every stage moves when high.
    lookup : ``In(untagged_lookup_layout(...))``
        The segment to check (``qn`` below ``queues``).
    result : ``Out(untagged_result_layout(...))``
        Outcome of the lookup taken three advances earlier.
    retire_en : ``In(1)``, retire : ``In(untagged_retire_layout(...))``
        Retire the buffer of ``msn`` (one cycle, any time).
    revoke : ``In(stream.Signature(buffer_revoke_layout(...)))``
        Host revocations of one buffer or of a whole queue.
    complete_en : ``In(1)``, complete : ``In(untagged_complete_layout(...))``
        An accepted L = 1 segment of ``msn`` with DDP-SSN ``ssn`` (one cycle, any time).
    base : ``In(16)``
        The looked-up stream's window base, one advance after the lookup (stage 1).
    forget : ``In(stream.Signature(stream index))``, forget_base : ``In(16)``
        Sweep a stream's completions before its row is rewritten; ``forget_base`` is the
        stream's base while ``forget`` is valid. ``ready`` when the sweep is done.
    """

    latency = 3

    def __init__(self, streams: int, *, queues: int = 3, depth: int = 8, address_bits: int = 64):
        if depth < 1 or depth & (depth - 1):
            raise ValueError(f"Queue depth must be a power of two, not {depth}")
        if depth > _HALF:
            raise ValueError("Queue depth must be below 2**31")
        self._streams, self._queues, self._depth = streams, queues, depth
        self._address_bits = address_bits
        super().__init__({
            "post": In(stream.Signature(struct_layout(buffer_post_layout(streams, queues, address_bits)))),
            "en": In(1),
            "lookup": In(untagged_lookup_layout(streams, queues)),
            "result": Out(untagged_result_layout(address_bits)),
            "retire_en": In(1),
            "retire": In(untagged_retire_layout(streams, queues)),
            "revoke": In(stream.Signature(struct_layout(buffer_revoke_layout(streams, queues)))),
            "complete_en": In(1),
            "complete": In(untagged_complete_layout(streams, queues)),
            "base": In(_SSN_BITS),
            "forget": In(stream.Signature(index_bits(streams))),
            "forget_base": In(_SSN_BITS),
        })

    @property
    def _queue_bits(self) -> int:
        return max(1, (self._queues - 1).bit_length())

    def _queue_index(self, stream_index, qn):
        # A power-of-two stride per stream: an index made of wires, no multiplier
        # in the lookup path (a stride of 3 put a DSP multiply in front of the
        # queue-state RAMs and limited the engine to 94 MHz on ECP5).
        return Cat(qn[:self._queue_bits], stream_index)

    def _slot_index(self, stream_index, qn, msn):
        slot_bits = (self._depth - 1).bit_length()
        queue = self._queue_index(stream_index, qn)
        return Cat(msn[:slot_bits], queue) if slot_bits else queue

    def elaborate(self, platform):
        m = Module()
        depth = self._depth
        queue_count = self._streams << self._queue_bits
        descriptor_layout = data.StructLayout({
            "msn": unsigned(_MSN_BITS), "address": unsigned(self._address_bits),
            "length": unsigned(_BUFFER_LENGTH_BITS)})

        # Queue state: `next_post` (written by posts and whole-queue revocations).
        next_mem = m.submodules.next_post = memory.Memory(shape=_MSN_BITS, depth=queue_count,
                                                          init=[1] * queue_count)
        live_mem = m.submodules.live = memory.Memory(shape=1, depth=queue_count * depth, init=[])
        desc_mem = m.submodules.descriptors = memory.Memory(shape=descriptor_layout, depth=queue_count * depth,
                                                            init=[])
        completion_layout = data.StructLayout({"state": Completion, "ssn": unsigned(_SSN_BITS)})
        completion_mem = m.submodules.completions = memory.Memory(shape=completion_layout,
                                                                  depth=queue_count * depth, init=[])
        next_w = next_mem.write_port()
        live_w = live_mem.write_port()
        desc_w = desc_mem.write_port()
        next_r = next_mem.read_port(transparent_for=(next_w,))
        live_r = live_mem.read_port(transparent_for=(live_w,))
        desc_r = desc_mem.read_port(transparent_for=(desc_w,))
        post_next_r = next_mem.read_port()
        post_live_r = live_mem.read_port(transparent_for=(live_w,))
        revoke_next_r = next_mem.read_port()
        revoke_live_r = live_mem.read_port(transparent_for=(live_w,))
        completion_w = completion_mem.write_port()
        completion_r = completion_mem.read_port(transparent_for=(completion_w,))
        forget_r = completion_mem.read_port()

        # Retirement (has priority on the live-bit write port). The request is registered and
        # written on the next cycle, so no caller logic reaches the RAM write enables; a lookup
        # taken on the request's own cycle misses the write and is corrected on stage 1.
        retire = Signal(untagged_retire_layout(self._streams, self._queues))
        retire_en = Signal()
        m.d.sync += [retire.eq(self.retire), retire_en.eq(self.retire_en)]
        retire_slot = self._slot_index(retire.stream, retire.qn, retire.msn)
        post_writing = Signal()
        # Completions, registered the same way; posts and the forget sweep wait for a cycle without one.
        complete = Signal(untagged_complete_layout(self._streams, self._queues))
        complete_en = Signal()
        m.d.sync += [complete.eq(self.complete), complete_en.eq(self.complete_en)]
        complete_slot = self._slot_index(complete.stream, complete.qn, complete.msn)
        # Forget: a sweep over every slot of one stream, pipelined: each cycle writes one slot and
        # reads the next.
        stream_slot_bits = self._queue_bits + (depth - 1).bit_length()
        forget_sweep = Signal(stream_slot_bits)
        forget_slot = Cat(forget_sweep, self.forget.payload)
        forget_writing = Signal()
        forget_reading = Signal(stream_slot_bits)
        forget_done = Signal()   # forget.ready, a flip-flop: the caller's row write waits on it alone
        forget_state = Signal(Completion)
        forget_read = forget_r.data
        forget_delivered = (forget_read.state == Completion.RETIRED) | (
            (forget_read.state == Completion.PENDING) & (forget_read.ssn - self.forget_base)[_SSN_BITS - 1])
        m.d.comb += [
            self.forget.ready.eq(forget_done),
            forget_reading.eq(Mux(forget_writing, forget_sweep + 1, forget_sweep)),
            forget_r.addr.eq(Cat(forget_reading, self.forget.payload)),
            forget_state.eq(Mux(forget_delivered, Completion.RETIRED, Completion.NONE)),
        ]

        # Posting state machine.
        # IDLE presents the queue index (payload is stable while valid), READ_LIVE has
        # next_post and presents its slot, CHECK has the live bit, WRITE writes the
        # descriptor, next_post and the live bit. The decision to write is registered
        # (CHECK -> WRITE), so no RAM read steers a write enable; a slot found free
        # stays free, since retirement only clears live bits.
        post = self.post.payload
        post_msn = Signal(_MSN_BITS)
        post_slot = self._slot_index(post.stream, post.qn, post_msn)
        writing = Signal()
        m.d.comb += [
            post_next_r.addr.eq(self._queue_index(post.stream, post.qn)),
            post_live_r.addr.eq(self._slot_index(post.stream, post.qn, post_next_r.data)),
        ]
        # Revocation: the addresses come from the command (stable while valid), the decision to
        # write is registered, like a post's.
        revoke = self.revoke.payload
        revoke_queue = self._queue_index(revoke.stream, revoke.qn)
        revoke_slot = Signal(len(retire_slot))
        revoke_distance = Signal(_MSN_BITS)   # next_post - 1 - msn: below depth if msn is still posted
        revoke_live = Signal()
        revoke_hit = Signal()
        revoke_writing = Signal()             # clear the live bit at revoke_slot on this cycle
        reset_writing = Signal()              # write next_post of the revoked queue on this cycle
        slot_bits = (depth - 1).bit_length()
        sweep = Signal(range(depth))
        m.d.comb += [
            revoke_next_r.addr.eq(revoke_queue),
            revoke_live_r.addr.eq(self._slot_index(revoke.stream, revoke.qn, revoke.msn)),
            revoke_slot.eq(self._slot_index(revoke.stream, revoke.qn, revoke.msn)),
        ]
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.post.valid):
                    m.next = "READ_LIVE"
                with m.Elif(self.revoke.valid):
                    m.next = "REVOKE_READ"
                with m.Elif(self.forget.valid):
                    m.d.sync += forget_sweep.eq(0)
                    m.next = "FORGET_READ"
            with m.State("FORGET_READ"):
                m.next = "FORGET_WRITE"
            with m.State("FORGET_WRITE"):
                with m.If(~complete_en):
                    m.d.comb += forget_writing.eq(1)
                    m.d.sync += forget_sweep.eq(forget_sweep + 1)
                    with m.If(forget_sweep == (1 << stream_slot_bits) - 1):
                        m.d.sync += forget_done.eq(1)
                        m.next = "FORGET_DONE"
            with m.State("FORGET_DONE"):
                m.d.sync += forget_done.eq(0)
                m.next = "IDLE"
            with m.State("REVOKE_READ"):
                # next_post - 1 - msn = next_post + ~msn: one adder.
                m.d.sync += [revoke_distance.eq(revoke_next_r.data + ~revoke.msn),
                             revoke_live.eq(revoke_live_r.data), sweep.eq(0)]
                with m.If(~self.revoke.valid):
                    m.next = "IDLE"
                with m.Elif(revoke.whole_queue):
                    m.next = "REVOKE_SWEEP"
                with m.Else():
                    m.next = "REVOKE_CHECK"
            with m.State("REVOKE_CHECK"):
                m.d.sync += revoke_hit.eq(revoke_live & (revoke_distance >> slot_bits == 0))
                m.next = "REVOKE_WRITE"
            with m.State("REVOKE_WRITE"):
                with m.If(~retire_en):
                    m.d.comb += [revoke_writing.eq(revoke_hit), self.revoke.ready.eq(1)]
                    m.next = "IDLE"
            with m.State("REVOKE_SWEEP"):
                m.d.comb += revoke_slot.eq(Cat(sweep, revoke_queue) if slot_bits else revoke_queue)
                with m.If(~retire_en):
                    m.d.comb += revoke_writing.eq(1)
                    m.d.sync += sweep.eq(sweep + 1)
                    with m.If(sweep == depth - 1):
                        m.next = "REVOKE_RESET"
            with m.State("REVOKE_RESET"):
                with m.If(~retire_en):
                    m.d.comb += [reset_writing.eq(1), self.revoke.ready.eq(1)]
                    m.next = "IDLE"
            with m.State("READ_LIVE"):
                m.d.sync += post_msn.eq(post_next_r.data)
                with m.If(self.post.valid):
                    m.next = "CHECK"
                with m.Else():
                    m.next = "IDLE"
            with m.State("CHECK"):
                with m.If(~self.post.valid):
                    m.next = "IDLE"
                with m.Elif(~post_live_r.data):
                    m.next = "WRITE"
                with m.Else():
                    m.next = "READ_LIVE"   # full: read again until a retirement frees the slot
            with m.State("WRITE"):
                m.d.comb += writing.eq(1)
                # The live-bit port is retirement's on this cycle: write again on the next.
                with m.If(~self.post.valid):
                    m.next = "IDLE"
                with m.Elif(~retire_en & ~complete_en):
                    m.d.comb += [post_writing.eq(1), self.post.ready.eq(1)]
                    m.next = "IDLE"

        m.d.comb += [
            live_w.addr.eq(Mux(retire_en, retire_slot, Mux(revoke_writing, revoke_slot, post_slot))),
            live_w.data.eq(post_writing),
            live_w.en.eq(retire_en | post_writing | revoke_writing),
            # The descriptor of a slot that is not live is never read as valid: write it
            # on every WRITE cycle, ahead of the live bit.
            desc_w.addr.eq(post_slot),
            desc_w.data.msn.eq(post_msn),
            desc_w.data.address.eq(post.address),
            desc_w.data.length.eq(post.length),
            desc_w.en.eq(writing),
            next_w.addr.eq(Mux(reset_writing, revoke_queue, self._queue_index(post.stream, post.qn))),
            next_w.data.eq(Mux(reset_writing, 1, post_msn + 1)),
            next_w.en.eq(post_writing | reset_writing),
            # A post starts its slot afresh (NONE); the sweep and the commits write their verdicts.
            completion_w.addr.eq(Mux(complete_en, complete_slot, Mux(post_writing, post_slot, forget_slot))),
            completion_w.data.state.eq(Mux(complete_en, Completion.PENDING,
                                           Mux(post_writing, Completion.NONE, forget_state))),
            completion_w.data.ssn.eq(Mux(complete_en, complete.ssn, forget_read.ssn)),
            completion_w.en.eq(complete_en | post_writing | forget_writing),
        ]

        # Stage 0: read the queue state and the slot of the MSN.
        lookup = self.lookup
        queue_index = self._queue_index(lookup.stream, lookup.qn)
        m.d.comb += [
            next_r.addr.eq(queue_index), next_r.en.eq(self.en),
            live_r.addr.eq(self._slot_index(lookup.stream, lookup.qn, lookup.msn)), live_r.en.eq(self.en),
            desc_r.addr.eq(self._slot_index(lookup.stream, lookup.qn, lookup.msn)), desc_r.en.eq(self.en),
            completion_r.addr.eq(self._slot_index(lookup.stream, lookup.qn, lookup.msn)),
            completion_r.en.eq(self.en),
        ]
        s1 = Signal(untagged_lookup_layout(self._streams, self._queues))
        s1_mo_end = Signal(33)
        with m.If(self.en):
            m.d.sync += [s1.eq(lookup), s1_mo_end.eq(lookup.mo + lookup.length)]

        # Stage 1: the retirement written on this cycle was requested on the lookup's cycle,
        # after its reads: apply it here. Then one subtractor or comparator per result (the
        # message end was added on stage 0).
        retiring_now = retire_en & (self._queue_index(retire.stream, retire.qn)
                                    == self._queue_index(s1.stream, s1.qn))
        live_now = live_r.data & ~(retiring_now & (retire_slot == self._slot_index(s1.stream, s1.qn, s1.msn)))
        # Likewise the completion written on this cycle; then delivered = behind the stream's base.
        completing_now = complete_en & (complete_slot == self._slot_index(s1.stream, s1.qn, s1.msn))
        state_now = Mux(completing_now, Completion.PENDING, completion_r.data.state)
        pending_now = state_now == Completion.PENDING
        # Delivered: retired, or pending with its DDP-SSN behind the base. Both subtractions start from the
        # RAMs at once, and the completion written on this cycle chooses between them after.
        read_delivered = (completion_r.data.state == Completion.RETIRED) | (
            (completion_r.data.state == Completion.PENDING) & (completion_r.data.ssn - self.base)[_SSN_BITS - 1])
        delivered_now = Mux(completing_now, (complete.ssn - self.base)[_SSN_BITS - 1], read_delivered)
        pieces = _BUFFER_LENGTH_BITS // _PIECE_BITS
        s2 = Signal(data.StructLayout({
            "from_next": _MSN_BITS,
            # present = live & msn equal, the MSN's equality in pieces (_MSN_PIECE_BITS), joined on stage 2.
            "live": 1, "msn_equal": _MSN_BITS // _MSN_PIECE_BITS,
            "delivered": 1, "second_last": 1, "nonzero": 1, "mo": 32,
            # mo >= length and mo + payload > length, each as its pieces' comparisons (_PIECE_BITS),
            # joined on stage 2; the end's carry out of 32 bits is past any length.
            "mo_above": pieces, "mo_equal": pieces - 1,
            "end_above": pieces, "end_equal": pieces - 1, "end_carry": 1,
            "buffer_address": self._address_bits,
        }))
        length = desc_r.data.length
        mo_above, mo_equal = _piece_compares(s1.mo, length, strict=False)
        end_above, end_equal = _piece_compares(s1_mo_end[:_BUFFER_LENGTH_BITS], length, strict=True)
        msn_equal = [desc_r.data.msn[start:start + _MSN_PIECE_BITS] == s1.msn[start:start + _MSN_PIECE_BITS]
                     for start in range(0, _MSN_BITS, _MSN_PIECE_BITS)]
        with m.If(self.en):
            m.d.sync += [
                s2.from_next.eq(s1.msn - next_r.data),
                s2.live.eq(live_now),
                s2.msn_equal.eq(Cat(*msn_equal)),
                s2.delivered.eq(delivered_now),
                s2.second_last.eq(pending_now & s1.last),
                s2.nonzero.eq(s1.length != 0),
                s2.mo.eq(s1.mo),
                s2.mo_above.eq(mo_above), s2.mo_equal.eq(mo_equal),
                s2.end_above.eq(end_above), s2.end_equal.eq(end_equal),
                s2.end_carry.eq(s1_mo_end[_BUFFER_LENGTH_BITS]),
                s2.buffer_address.eq(desc_r.data.address),
            ]

        # Stage 2: the window start bound, the fault in model order, the address. The window starts
        # at next_post - depth: msn - start = from_next + depth.
        behind = (s2.from_next + depth)[_MSN_BITS - 1] if depth < _HALF else 0
        present = s2.live & s2.msn_equal.all()                              # a live slot holds the MSN
        mo_past = _joined(s2.mo_above, s2.mo_equal)                         # mo >= length
        end_past = s2.end_carry | _joined(s2.end_above, s2.end_equal)       # mo + payload > length
        fault = Signal(UntaggedFault)
        with m.If(behind):
            m.d.comb += fault.eq(UntaggedFault.MSN_RANGE)
        with m.Elif(~present | s2.delivered):
            # A delivered buffer's MSN lies below next_post: MSN range.
            m.d.comb += fault.eq(Mux(s2.from_next[_MSN_BITS - 1], UntaggedFault.MSN_RANGE, UntaggedFault.NO_BUFFER))
        with m.Elif(s2.second_last):
            m.d.comb += fault.eq(UntaggedFault.MSN_RANGE)
        with m.Elif(s2.nonzero & mo_past):
            m.d.comb += fault.eq(UntaggedFault.INVALID_MO)
        with m.Elif(s2.nonzero & end_past):
            m.d.comb += fault.eq(UntaggedFault.MESSAGE_TOO_LONG)
        with m.Else():
            m.d.comb += fault.eq(UntaggedFault.NONE)
        with m.If(self.en):
            m.d.sync += [
                self.result.fault.eq(fault),
                self.result.address.eq(s2.buffer_address + s2.mo),
            ]
        return m

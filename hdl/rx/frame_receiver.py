"""The front of the receive path: frames in, checked SCTP packets out.

::

    net ──┬──────────────────────────────► PacketBuffer (BRAM ring) ──┬─► exc (whole frame)
          ├─► EthIpv4Parser ──► verdicts ─┐        ▲ command           └─► Realigner ─► pkt
          └─► reg ─► Realigner ─► zero     ├─► decide ┘ (+ pkt_meta / exc_meta)
                     checksum ─► Crc32c ───┘

Every frame is written to the :class:`~hdl.stream.packet_buffer.PacketBuffer` as it
arrives. Beside it the :class:`~hdl.rx.eth_ipv4_parser.EthIpv4Parser` classifies
the frame from its headers, and a :class:`Realigner` shifts the SCTP packet
(frame offset 34, or 42 over UDP, RFC 6951) down to lane 0, cut to its
length, for the CRC32c block with the checksum field zeroed (RFC 4960 6.8).
When the verdict and the CRC of a frame are both known, one command reads it
out of the buffer: to ``exc`` unchanged, to ``pkt`` through a second
Realigner (SCTP packet only, Ethernet padding and headers stripped), or
nowhere (dropped and counted). Store and forward: no byte of a frame leaves
before the frame is complete and checked.

Latency, outputs ready: the first beat of a delivered packet leaves 18
clock edges after the edge its frame's last beat came in on at W = 8, 23 at
16, 28 at 32, 29 at 64 (tested on a frame with one 300-byte chunk); the
CRC32c and the header checks run in parallel (each behind a register stage),
the CRC is compared with the header's checksum into a queue of results, then
decide (the heads registered, then the decision), the command queue, the
buffer read and staging, the realigner and the output queue. Every output leaves through a
:class:`~hdl.stream.queue.Queue`.

Throughput: ``net`` takes one beat per cycle, back to back frames with no
gap, until the buffer is full (``buffer_bytes``) or ``max_frames`` frames are
waiting; then ``net.ready`` is low until frames leave, or, with
``drop_when_full``, the frame that meets the full buffer is dropped whole
(its stored beats released unread) and counted as ``overflow``. A frame that alone
fills the whole buffer cannot wait: the rest of it is discarded and it is
dropped and counted as ``overflow``. On the output side, delivered and
exception frames leave at one beat per cycle with no gap between frames; a
dropped frame costs one idle cycle of the reader. ``pkt`` and ``exc`` are
separate streams, each frame on exactly one of them, and each pair of
streams keeps frame order; ``pkt_meta`` / ``exc_meta`` (FIFOs of 4) are
written when a frame's readout starts.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from abi.rx import FRAME_COUNTERS, FrameDrop, association_entry_layout
from hdl.layout import struct_layout
from hdl.rx.eth_ipv4_parser import (
    ETH_IPV4_SCTP_OFFSET,
    ETH_IPV4_UDP_SCTP_OFFSET,
    Action,
    EthIpv4Parser,
    header_verdict_layout,
)
from hdl.rx.layouts import packet_meta_layout
from hdl.stream.crc32c import Crc32c
from hdl.stream.bits import index_bits, thermometer
from hdl.stream.packet import packet_layout, packet_signature
from hdl.stream.packet_buffer import PacketBuffer
from hdl.stream.queue import Queue

__all__ = ["FrameReceiver", "Realigner", "realign_layout", "length_summary", "exception_meta_layout"]


_SCTP_CHECKSUM_OFFSET = 8  # RFC 4960 3.1
_DECIDE_QUEUE_DEPTH = 5  # the decide stage's output queues: three in flight, two to ride out a stall


def exception_meta_layout() -> data.StructLayout:
    """One per frame on ``exc``: why (:class:`FrameException`) and its length in bytes."""
    return data.StructLayout({"reason": unsigned(4), "length": unsigned(16)})


def realign_layout(width_bytes: int) -> data.StructLayout:
    """A :class:`Realigner` input beat: a packet beat plus where the wanted bytes are."""
    return data.StructLayout({
        "data": unsigned(8 * width_bytes),
        "keep": unsigned(width_bytes),
        "last": unsigned(1),
        "skip": unsigned(1),    # a beat before the wanted bytes (only before the first kept beat)
        "shift": unsigned(index_bits(width_bytes)),  # lane of the first wanted byte
        "length": unsigned(16),  # wanted bytes
        # its summary, from :func:`length_summary` (computed by the producer, off the
        # realigner's decision path): thermometer of min(length, W), a length of 0 counting
        # as 1, and length > W
        "length_mask": unsigned(width_bytes),
        "length_big": unsigned(1),
    })


def length_summary(value, width_bytes: int):
    """``(mask, big)`` of a 16-bit byte count for :func:`realign_layout`: the thermometer of
    min(value, W) (0 counting as 1) and value > W, without carry chains for W = 2^k."""
    width = width_bytes
    if width > 1 and width & (width - 1) == 0:
        k = width.bit_length() - 1
        at_least = value[k:].any()
        mask = Cat(*(at_least | (value[:k] > lane) for lane in range(width)))
        big = value[k + 1:].any() | (value[k] & value[:k].any())
    else:
        mask, big = thermometer(value, width), value > width
    return mask | 1, big


class Realigner(wiring.Component):
    """Cuts ``length`` bytes starting at lane ``shift`` out of each packet, moved to lane 0.

    ``shift`` and ``length`` are taken from the first beat without ``skip``;
    beats marked ``skip`` come first and are ignored, and so are beats after
    the ``length`` bytes. If the packet ends before ``length`` bytes, the
    output ends there; if it has no wanted byte at all, the output is one
    junk byte (so every input packet gives exactly one output packet, which
    the CRC path relies on). A ``length`` of 0 counts as 1.

    Latency: an output beat leaves with the input beat after the one it
    starts in (output beat ``k`` needs input beat ``k + 1``), or on the cycle
    after the input's last beat. Throughput: one beat per cycle; that extra
    cycle coincides with the next packet's first beat, which never produces
    output, so back to back packets pass without a bubble. With
    ``source.ready`` held high, ``sink.ready`` is always high.

    Not :class:`hdl.stream.realign.Realign`, which drops a leading byte count
    taken from a side stream and may emit nothing: this one also cuts the
    packet to ``length`` (Ethernet padding, RFC 894), takes its position from
    the beats themselves (the header parser knows it only after the first
    beats), and always emits one packet per input packet, which the CRC path
    counts on.
    """

    def __init__(self, width_bytes: int):
        self._width = width_bytes
        super().__init__({
            "sink": In(stream.Signature(realign_layout(width_bytes))),
            "source": Out(packet_signature(width_bytes)),
        })

    def elaborate(self, platform):
        m = Module()
        width = self._width
        sink, source = self.sink.payload, self.source.payload
        shift_bits = index_bits(width)

        # Timing: no cycle chains two wide adders or comparators. The 16-bit
        # remaining length is kept beside its registered summary (`rem_mask`,
        # the thermometer of min(remaining, W), and `rem_big`, remaining > W),
        # computed when it is loaded or counted down; byte counts are handled
        # as thermometer masks (`keep` codes), so the per-beat decisions are
        # narrow mask logic and a W:1 lane select.
        previous = Signal(8 * width)
        held = Signal()      # `previous` has bytes still to send
        flush = Signal()     # ... and it was its packet's last beat
        dummy = Signal()     # ... and none of them were wanted: send one junk byte
        dropping = Signal()  # output complete, ignoring the rest of the input packet
        shift = Signal(shift_bits)
        remaining = Signal(16)
        rem_mask = Signal(width)  # thermometer of min(remaining, width)
        rem_big = Signal()        # remaining > width
        held_keep = Signal(width)  # keep of `previous`

        m.d.comb += source.data.eq(Cat(previous, sink.data).bit_select(shift * 8, 8 * width))

        pad = 2 ** shift_bits - width if 2 ** shift_bits > width else 0

        def kept_at(keep, lane):
            """keep[lane], 0 past the last lane (keep is a thermometer: lane < bytes in the beat)."""
            return (Cat(keep, Const(0, pad)) if pad else keep).bit_select(lane, 1)

        # Bytes the current output beat can hold (as a mask), and whether it ends the packet.
        short_last = Signal()  # the sink's last beat has nothing past `shift` for a flush
        available = Signal(width)  # thermometer of (width - shift + sink bytes if short_last else width)
        shifted_keep = Cat(Const((1 << width) - 1, width), sink.keep, Const(0, pad)).bit_select(shift, width)
        m.d.comb += [
            short_last.eq(sink.last & ~kept_at(sink.keep, shift)),
            available.eq(Mux(short_last, shifted_keep, (1 << width) - 1)),
        ]
        tail = Signal(width)
        held_tail = Cat(held_keep, Const(0, width + pad)).bit_select(shift, width)
        m.d.comb += tail.eq(Mux(dummy, 1, rem_mask & held_tail))

        def summary_after_beat(value):
            """summary(value - width) for value > width, without the subtraction (W = 2^k: the
            low k bits stay, the rest drops by one)."""
            if width > 1 and width & (width - 1) == 0:
                k = width.bit_length() - 1
                high, low = value[k:], value[:k]
                at_least = high[1:].any()                                   # high - 1 >= 1
                mask = Cat(*(at_least | (low > lane) for lane in range(width)))
                big = high[2:].any() | (high[1] & (high[0] | low.any()))    # high >= 3, or 2 and low
                return mask, big
            mask, big = length_summary(remaining - width, width)
            return mask, big   # remaining > width: the mask's forced lane 0 is set anyway

        load_mask, load_big = sink.length_mask, sink.length_big
        next_mask, next_big = summary_after_beat(remaining)  # used only while remaining > width

        def load():
            with m.If(sink.skip):
                with m.If(sink.last):
                    m.d.sync += [held.eq(1), flush.eq(1), dummy.eq(1)]
            with m.Else():
                m.d.sync += [
                    previous.eq(sink.data),
                    held.eq(1),
                    shift.eq(sink.shift),
                    remaining.eq(Mux(sink.length == 0, 1, sink.length)),
                    rem_mask.eq(load_mask),  # a length of 0 counts as 1
                    rem_big.eq(load_big),
                    held_keep.eq(sink.keep),
                    flush.eq(sink.last),
                    dummy.eq(sink.last & ~kept_at(sink.keep, sink.shift)),
                ]

        with m.If(dropping):
            m.d.comb += self.sink.ready.eq(1)
            with m.If(self.sink.valid & sink.last):
                m.d.sync += dropping.eq(0)
        with m.Elif(held & flush):
            m.d.comb += [
                self.source.valid.eq(1),
                source.keep.eq(tail),
                source.last.eq(1),
                self.sink.ready.eq(self.source.ready),
            ]
            with m.If(self.source.ready):
                m.d.sync += [held.eq(0), flush.eq(0), dummy.eq(0)]
                with m.If(self.sink.valid):
                    load()
        with m.Elif(held):
            done = ~rem_big & ~(rem_mask & ~available).any()  # remaining <= available
            m.d.comb += [
                self.source.valid.eq(self.sink.valid),
                source.keep.eq(rem_mask & available),  # min(remaining, available)
                source.last.eq(done | short_last),
                self.sink.ready.eq(self.source.ready),
            ]
            with m.If(self.sink.valid & self.source.ready):
                m.d.sync += [previous.eq(sink.data), held_keep.eq(sink.keep), remaining.eq(remaining - width),
                             rem_mask.eq(next_mask), rem_big.eq(next_big)]
                with m.If(done | short_last):
                    m.d.sync += [held.eq(0), dropping.eq(~sink.last)]
                with m.Elif(sink.last):
                    m.d.sync += flush.eq(1)
        with m.Else():
            m.d.comb += self.sink.ready.eq(1)
            with m.If(self.sink.valid):
                load()
        return m


class FrameReceiver(wiring.Component):
    """Ethernet/IPv4(/UDP) frames in; checked SCTP packets and host exceptions out.

    Parameters
    ----------
    width_bytes : int
        Datapath width ``W`` (8, 16, 32, 64).
    associations : int
        Association table entries (1 to 16).
    buffer_bytes : int
        Store-and-forward buffer size; ``buffer_bytes / W`` must be a power
        of two (one BRAM word of ``9 W`` bits per beat).
    max_frames : int
        Frames that may wait in the buffer at once (sizes the verdict FIFOs).

    Ports
    -----
    net : ``In(packet_signature(W))``
        Ethernet II frames without FCS.
    local_mac, local_ip, udp_port : ``In(48)``, ``In(32)``, ``In(16)``
        This end's MAC and IPv4 address (integers, network order) and the
        SCTP-over-UDP port (RFC 6951, normally 9899).
    drop_when_full : ``In(1)``
        1: ``net.ready`` stays high; a frame that meets a full buffer (or
        ``max_frames`` frames waiting) is dropped whole and counted as
        ``overflow``. 0: ``net.ready`` goes low instead. Change it between frames.
    assoc_write : ``In(stream.Signature(association_entry_layout()))``
        Writes one association table entry per transfer (always ready).
    pkt, pkt_meta : ``Out(packet_signature(W))``, ``Out(stream.Signature(packet_meta_layout()))``
        Each SCTP packet that passed every check, common header at lane 0,
        exactly its bytes; one ``pkt_meta`` per packet, in the same order.
    exc, exc_meta : ``Out(packet_signature(W))``, ``Out(stream.Signature(exception_meta_layout()))``
        Frames for the host, unchanged, with an :class:`FrameException`.
    frames, delivered, exceptions, ip_checksum_errors, crc_errors, tag_errors, length_errors, overflow : ``Out(32)``
        Wrapping counters, updated when a frame's verdict is final (before
        it leaves): every frame, then one of the other seven per frame
        (:class:`FrameDrop` names the drop counters).

    The rules and their order are those of :mod:`hdl.rx.eth_ipv4_parser`; a
    CRC32c failure (RFC 4960 6.8) drops any packet that reached the SCTP
    checks, before the INIT, T bit, association and tag rules. See the
    module docs for latency and throughput.
    """

    def __init__(self, width_bytes: int, associations: int = 8, buffer_bytes: int = 16384,
                 max_frames: int = 64):
        depth = buffer_bytes // width_bytes
        if depth * width_bytes != buffer_bytes or depth < 2 or depth & (depth - 1):
            raise ValueError(f"buffer_bytes / width_bytes must be a power of two, not {buffer_bytes}/{width_bytes}")
        self._width = width_bytes
        self._associations = associations
        self._depth = depth
        self._max_frames = max_frames
        members = {
            "net": In(packet_signature(width_bytes)),
            "local_mac": In(48),
            "local_ip": In(32),
            "udp_port": In(16),
            "drop_when_full": In(1),
            "assoc_write": In(stream.Signature(struct_layout(association_entry_layout()))),
            "pkt": Out(packet_signature(width_bytes)),
            "pkt_meta": Out(stream.Signature(packet_meta_layout())),
            "exc": Out(packet_signature(width_bytes)),
            "exc_meta": Out(stream.Signature(exception_meta_layout())),
        }
        members.update({name: Out(32) for name in FRAME_COUNTERS})
        super().__init__(members)

    @property
    def width_bytes(self) -> int:
        return self._width

    @property
    def buffer_beats(self) -> int:
        return self._depth

    def elaborate(self, platform):
        m = Module()
        width, depth = self._width, self._depth
        net = self.net

        parser = m.submodules.parser = EthIpv4Parser(width, self._associations)
        wiring.connect(m, wiring.flipped(self.assoc_write), parser.assoc_write)
        m.d.comb += [
            parser.local_mac.eq(self.local_mac),
            parser.local_ip.eq(self.local_ip),
            parser.udp_port.eq(self.udp_port),
        ]
        user_layout = data.StructLayout({
            "exc": unsigned(1), "shift": unsigned(index_bits(width)), "length": unsigned(16),
            "length_mask": unsigned(width), "length_big": unsigned(1)})
        buffer = m.submodules.buffer = PacketBuffer(width, depth, user_layout)

        # Input: every beat goes to the buffer, unless a frame alone fills it (overflow). With
        # `drop_when_full`, `net` never waits: a beat that meets a full buffer is discarded and its
        # frame dropped (overflow); a frame that starts while `max_frames` frames wait is not taken
        # at all (`skipping`: nothing of it reaches the buffer or the checks) and counted here.
        accept = Signal()
        taken = Signal()       # accepted and part of a frame the receiver handles
        skipping = Signal()
        skipped = Signal()     # a skipped frame ended on the previous cycle
        in_frame = Signal()
        frame_beats = Signal(range(depth + 1))
        overflowing = Signal()
        overflowed = Signal()
        waiting_frames = Signal(range(self._max_frames + 1))
        released = Signal()
        # The buffer's ready keeps one beat in reserve, so a frame that holds depth - 1 beats fills it.
        # `frame_full` (frame_beats >= depth - 1) is kept as a flag beside the count it summarises.
        frame_full = Signal()
        refuse = ~buffer.write.ready & frame_full
        discard = overflowing | ~buffer.write.ready
        slot_free = Signal(init=1)  # waiting_frames != max_frames, registered with its next value
        waiting_next = Signal.like(waiting_frames)
        skip_now = accept & ~in_frame & ~slot_free
        m.d.comb += [
            waiting_next.eq(waiting_frames + (taken & ~in_frame) - released),
            net.ready.eq(self.drop_when_full
                         | ((in_frame | slot_free) & (buffer.write.ready | refuse | overflowing))),
            accept.eq(net.valid & net.ready),
            taken.eq(accept & ~skipping & ~skip_now),
            buffer.write.valid.eq(taken & ~discard),
            buffer.write.payload.eq(net.payload),
        ]
        m.d.sync += [
            waiting_frames.eq(waiting_next),
            slot_free.eq(waiting_next != self._max_frames),
            skipped.eq(accept & (skipping | skip_now) & net.payload.last),
        ]
        with m.If(accept):
            m.d.sync += skipping.eq((skipping | skip_now) & ~net.payload.last)

        info_layout = data.StructLayout({"beats": unsigned(frame_beats.shape().width), "overflow": unsigned(1)})
        infos = m.submodules.infos = Queue(info_layout, self._max_frames, memory_output=True)
        info_in = infos.sink.payload
        m.d.comb += [
            infos.sink.valid.eq(taken & net.payload.last),
            info_in.beats.eq(frame_beats + ~discard),
            info_in.overflow.eq(overflowed | discard),
        ]
        with m.If(accept):
            m.d.sync += in_frame.eq(~net.payload.last)
        with m.If(taken):
            with m.If(net.payload.last):
                m.d.sync += [frame_beats.eq(0), frame_full.eq(0), overflowing.eq(0), overflowed.eq(0)]
            with m.Else():
                m.d.sync += [frame_beats.eq(frame_beats + ~discard), overflowing.eq(discard),
                             overflowed.eq(overflowed | discard)]
                with m.If(~discard & (frame_beats == depth - 2)):
                    m.d.sync += frame_full.eq(1)

        # CRC path: register, realign the SCTP packet to lane 0, zero its checksum field, CRC32c.
        start_direct, start_udp = ETH_IPV4_SCTP_OFFSET, ETH_IPV4_UDP_SCTP_OFFSET
        max_start_beat = max(start_direct, start_udp) // width
        in_index = Signal(range(max_start_beat + 2))
        with m.If(taken):
            m.d.sync += in_index.eq(Mux(net.payload.last, 0, Mux(in_index == max_start_beat + 1,
                                                                   in_index, in_index + 1)))
        # The parser takes the beats from a register (`taken` fans out to every captured byte's
        # enable otherwise). Four register stages in front of the realigner: the parser's view
        # of the packet (UDP or not, the SCTP length: compares and subtracts of header bytes) is
        # registered beside the third, and the length's summary beside the fourth, so the
        # realigner's decisions start at flip-flops.
        crc_align = m.submodules.crc_align = Realigner(width)
        beat = crc_align.sink.payload
        early, later, third = (Signal(packet_layout(width), name=name) for name in ("early", "later", "third"))
        early_valid, later_valid, third_valid = Signal(), Signal(), Signal()
        early_index, later_index, third_index, beat_index = (Signal.like(in_index) for _ in range(4))
        parsed_udp, parsed_length = Signal(), Signal(16)
        over_udp, sctp_length, sctp_mask, sctp_big = Signal(), Signal(16), Signal(width), Signal()
        m.d.comb += [parser.sink.valid.eq(early_valid), parser.sink.payload.eq(early)]
        parsed_summary = length_summary(parsed_length, width)
        m.d.sync += [
            early_valid.eq(taken), early.eq(net.payload), early_index.eq(in_index),
            later_valid.eq(early_valid), later.eq(early), later_index.eq(early_index),
            third_valid.eq(later_valid), third.eq(later), third_index.eq(later_index),
            crc_align.sink.valid.eq(third_valid),
            beat.data.eq(third.data), beat.keep.eq(third.keep), beat.last.eq(third.last),
            beat_index.eq(third_index),
            parsed_udp.eq(parser.over_udp), parsed_length.eq(parser.sctp_length),
            over_udp.eq(parsed_udp), sctp_length.eq(parsed_length),
            sctp_mask.eq(parsed_summary[0]), sctp_big.eq(parsed_summary[1]),
        ]
        m.d.comb += [
            beat.skip.eq(beat_index < Mux(over_udp, start_udp // width, start_direct // width)),
            beat.shift.eq(Mux(over_udp, start_udp % width, start_direct % width)),
            beat.length.eq(sctp_length),
            beat.length_mask.eq(sctp_mask), beat.length_big.eq(sctp_big),
            crc_align.source.ready.eq(1),
        ]

        crc = m.submodules.crc = Crc32c(width)
        zero_beats = (_SCTP_CHECKSUM_OFFSET + 3) // width + 1
        out_index = Signal(range(zero_beats + 1))
        aligned = crc_align.source
        with m.If(aligned.valid):
            m.d.sync += out_index.eq(Mux(aligned.payload.last, 0,
                                         Mux(out_index == zero_beats, out_index, out_index + 1)))
        lanes = []
        for lane in range(width):
            byte = aligned.payload.data.word_select(lane, 8)
            zeroed = [b for b in range(zero_beats)
                      if _SCTP_CHECKSUM_OFFSET <= b * width + lane < _SCTP_CHECKSUM_OFFSET + 4]
            lanes.append(Mux(out_index == zeroed[0], 0, byte) if zeroed else byte)
        m.d.sync += [
            crc.sink.valid.eq(aligned.valid),
            crc.sink.payload.data.eq(Cat(*lanes)),
            crc.sink.payload.keep.eq(aligned.payload.keep),
            crc.sink.payload.last.eq(aligned.payload.last),
        ]
        # (Room for every frame in the buffer: `waiting_frames` keeps these queues from filling.)
        crcs = m.submodules.crcs = Queue(unsigned(32), self._max_frames)
        m.d.comb += [crc.crc.ready.eq(1), crcs.sink.valid.eq(crc.crc.valid), crcs.sink.payload.eq(crc.crc.payload)]

        verdict_layout = header_verdict_layout(width)
        verdicts = m.submodules.verdicts = Queue(verdict_layout, self._max_frames, memory_output=True)
        # The checksum the header carries waits in a queue of its own for its frame's CRC; their
        # compare (RFC 4960 6.8) is registered into `checks`, one bit per frame, in frame order.
        expected = m.submodules.expected = Queue(unsigned(32), self._max_frames)
        checks = m.submodules.checks = Queue(unsigned(1), self._max_frames)
        m.d.comb += [
            verdicts.sink.valid.eq(parser.verdict.valid), verdicts.sink.payload.eq(parser.verdict.payload),
            expected.sink.valid.eq(parser.verdict.valid),
            expected.sink.payload.eq(parser.verdict.payload.expected_crc),
        ]
        compare = crcs.source.valid & expected.source.valid
        m.d.comb += [crcs.source.ready.eq(compare), expected.source.ready.eq(compare)]
        m.d.sync += [checks.sink.valid.eq(compare),
                     checks.sink.payload.eq(crcs.source.payload == expected.source.payload)]

        # Decide: verdict + CRC + buffer info -> one registered command for the buffer.
        # The three queues are read from their LUT RAM (`pop` moves read addresses, not the
        # enables of wide output registers); the heads are registered on every cycle (no
        # enable: `pop` says whether they were taken), with the CRC compare; the decision is
        # made from those registers on the next cycle.
        verdict = Signal.like(verdicts.source.payload)
        info = Signal.like(infos.source.payload)
        crc_ok = Signal()
        m.d.sync += [verdict.eq(verdicts.source.payload), info.eq(infos.source.payload),
                     crc_ok.eq(checks.source.payload)]
        command_valid = Signal()
        command = Signal.like(buffer.command.payload)
        command_action = Signal(Action)
        pkt_meta = Signal(packet_meta_layout())
        exc_meta = Signal(exception_meta_layout())
        pkt_metas = m.submodules.pkt_metas = Queue(packet_meta_layout(), _DECIDE_QUEUE_DEPTH)
        exc_metas = m.submodules.exc_metas = Queue(exception_meta_layout(), _DECIDE_QUEUE_DEPTH)
        wiring.connect(m, pkt_metas.source, wiring.flipped(self.pkt_meta))
        wiring.connect(m, exc_metas.source, wiring.flipped(self.exc_meta))

        # The command reaches the buffer through a queue: its registered ready keeps the buffer's
        # read-side state (staging level, final read) off the decide stage's path. The decision
        # reads no ready: a frame is taken only while the command queue and both metadata
        # queues have room for it and the two before it (`room`, registered from their levels),
        # so the command register is always taken on the next cycle.
        commands = m.submodules.commands = Queue(buffer.command.payload.shape(), _DECIDE_QUEUE_DEPTH)
        wiring.connect(m, commands.source, buffer.command)
        room = Signal()
        m.d.sync += room.eq((commands.level < _DECIDE_QUEUE_DEPTH - 3) & (pkt_metas.level < _DECIDE_QUEUE_DEPTH - 3)
                            & (exc_metas.level < _DECIDE_QUEUE_DEPTH - 3))
        m.d.comb += [
            commands.sink.valid.eq(command_valid),
            commands.sink.payload.eq(command),
            released.eq(command_valid),
            pkt_metas.sink.valid.eq(command_valid & (command_action == Action.DELIVER)),
            pkt_metas.sink.payload.eq(pkt_meta),
            exc_metas.sink.valid.eq(command_valid & (command_action == Action.EXCEPTION)),
            exc_metas.sink.payload.eq(exc_meta),
        ]

        pop = Signal()
        m.d.comb += [
            pop.eq(verdicts.source.valid & checks.source.valid & infos.source.valid & room),
            verdicts.source.ready.eq(pop),
            checks.source.ready.eq(pop),
            infos.source.ready.eq(pop),
        ]
        popped = Signal()
        m.d.sync += [popped.eq(pop), command_valid.eq(popped)]
        action, reason = Signal(Action), Signal(4)
        with m.If(info.overflow):
            m.d.comb += [action.eq(Action.DROP), reason.eq(FrameDrop.OVERFLOW)]
        with m.Elif(verdict.sctp & ~crc_ok):
            m.d.comb += [action.eq(Action.DROP), reason.eq(FrameDrop.CRC)]
        with m.Else():
            m.d.comb += [action.eq(verdict.action), reason.eq(verdict.reason)]

        verdict_summary = length_summary(verdict.sctp_length, width)
        counters = {name: getattr(self, name) for name in FRAME_COUNTERS}
        m.d.sync += [
            command_action.eq(action),
            command.total.eq(info.beats),
            command.skip.eq(0),
            command.count.eq(Mux(action == Action.DROP, 0, info.beats)),
            command.user.exc.eq(1),
            command.user.shift.eq(verdict.shift),
            command.user.length.eq(verdict.sctp_length),
            command.user.length_mask.eq(verdict_summary[0]),
            command.user.length_big.eq(verdict_summary[1]),
            pkt_meta.association.eq(verdict.association),
            pkt_meta.ddp.eq(verdict.ddp),
            pkt_meta.length.eq(verdict.sctp_length),
            pkt_meta.peer_ip.eq(verdict.peer_ip),
            pkt_meta.udp.eq(verdict.udp),
            exc_meta.reason.eq(reason),
            exc_meta.length.eq(verdict.frame_length),
        ]
        with m.If(action == Action.DELIVER):
            m.d.sync += [
                command.skip.eq(verdict.skip),
                command.count.eq(verdict.count),
                command.user.exc.eq(0),
            ]

        # Counters, one cycle after the decision (off its timing path).
        counted, counted_action, counted_reason = Signal(), Signal(Action), Signal(4)
        m.d.sync += [counted.eq(popped), counted_action.eq(action), counted_reason.eq(reason)]
        counted_overflow = counted & (counted_action == Action.DROP) & (counted_reason == FrameDrop.OVERFLOW)
        m.d.sync += [
            counters["frames"].eq(counters["frames"] + counted + skipped),
            counters["overflow"].eq(counters["overflow"] + counted_overflow + skipped),
        ]
        with m.If(counted):
            with m.If(counted_action == Action.DELIVER):
                m.d.sync += counters["delivered"].eq(counters["delivered"] + 1)
            with m.If(counted_action == Action.EXCEPTION):
                m.d.sync += counters["exceptions"].eq(counters["exceptions"] + 1)
            with m.If(counted_action == Action.DROP):
                for why, name in [(FrameDrop.IP_CHECKSUM, "ip_checksum_errors"), (FrameDrop.CRC, "crc_errors"),
                                  (FrameDrop.TAG, "tag_errors"), (FrameDrop.LENGTH, "length_errors")]:
                    with m.If(counted_reason == why):
                        m.d.sync += counters[name].eq(counters[name] + 1)

        # Output: exception frames as stored, SCTP packets realigned to lane 0.
        read = buffer.read
        out_align = m.submodules.out_align = Realigner(width)
        pkt_out = m.submodules.pkt_out = Queue(packet_layout(width))
        exc_out = m.submodules.exc_out = Queue(packet_layout(width))
        wiring.connect(m, out_align.source, pkt_out.sink)
        wiring.connect(m, pkt_out.source, wiring.flipped(self.pkt))
        wiring.connect(m, exc_out.source, wiring.flipped(self.exc))
        m.d.comb += [
            exc_out.sink.payload.data.eq(read.payload.data),
            exc_out.sink.payload.keep.eq(read.payload.keep),
            exc_out.sink.payload.last.eq(read.payload.last),
            out_align.sink.payload.data.eq(read.payload.data),
            out_align.sink.payload.keep.eq(read.payload.keep),
            out_align.sink.payload.last.eq(read.payload.last),
            out_align.sink.payload.skip.eq(0),
            out_align.sink.payload.shift.eq(read.payload.user.shift),
            out_align.sink.payload.length.eq(read.payload.user.length),
            out_align.sink.payload.length_mask.eq(read.payload.user.length_mask),
            out_align.sink.payload.length_big.eq(read.payload.user.length_big),
        ]
        with m.If(read.payload.user.exc):
            m.d.comb += [exc_out.sink.valid.eq(read.valid), read.ready.eq(exc_out.sink.ready)]
        with m.Else():
            m.d.comb += [out_align.sink.valid.eq(read.valid), read.ready.eq(out_align.sink.ready)]
        return m

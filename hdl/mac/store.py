"""Store-and-forward of whole frames: a frame leaves only once all of it is stored, and only if it is good.

Beats go into a :class:`~hdl.stream.packet_buffer.PacketBuffer` ring as they
arrive; at a frame's last beat a command either releases the frame to
``source`` (read at one beat per clock, so the reader never waits for a frame
in the middle) or discards it, so ``source`` carries only whole, good frames.
A frame is dropped when its last beat says ``drop``, when it has more than
``max_frame_bytes`` bytes, and, if the store is ``lossy``, when it meets a full ring
or finds no free command slot at its first beat. A store that is not lossy
makes ``sink`` wait instead (a frame longer than ``max_frame_bytes`` is still
dropped: the ring holds the longest frame whole, so waiting never deadlocks).

Every frame that starts gets its command slot at its first beat, so the
command at its last beat always has room.
"""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.mac.packer import verdict_beat_layout
from hdl.stream.packet import packet_signature
from hdl.stream.packet_buffer import PacketBuffer, buffer_command_layout
from hdl.stream.queue import Queue

__all__ = ["FrameStore"]

_NO_USER = unsigned(0)


class FrameStore(wiring.Component):
    """A ring of ``depth`` beats holding up to ``frames`` frames of ``max_frame_bytes`` at most; see the module docs.

    Ports
    -----
    sink : ``In(stream.Signature(verdict_beat_layout(W), always_ready=lossy))``
        Frames with their verdict (``drop``) on the last beat.
    source : ``Out(packet_signature(W))``
        Good frames, whole; from flip-flops.
    stored, dropped : ``Out(1)``
        One-clock pulses: a frame was kept; a frame not marked ``drop`` was dropped here.
    """

    def __init__(self, width_bytes: int, depth: int, max_frame_bytes: int, *, lossy: bool, frames: int = 32):
        max_beats = -(-max_frame_bytes // width_bytes)
        if max_beats < 1 or depth < max_beats + 2:
            raise ValueError(f"A ring of {depth} beats does not hold a frame of {max_frame_bytes} bytes whole")
        self._width, self._depth, self._max_beats = width_bytes, depth, max_beats
        # Bytes the last beat of a frame of `max_beats` beats may hold.
        self._tail_bytes = max_frame_bytes - (max_beats - 1) * width_bytes
        self._lossy, self._frames = lossy, frames
        super().__init__({
            "sink": In(stream.Signature(verdict_beat_layout(width_bytes), always_ready=lossy)),
            "source": Out(packet_signature(width_bytes)),
            "stored": Out(1),
            "dropped": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        buffer = m.submodules.buffer = PacketBuffer(self._width, self._depth, _NO_USER)
        commands = m.submodules.commands = Queue(buffer_command_layout(self._depth, _NO_USER), self._frames)
        wiring.connect(m, commands.source, buffer.command)

        beat = self.sink.payload
        in_frame = Signal()     # a beat of the frame was taken
        admitted = Signal()     # the frame holds a command slot
        discarding = Signal()   # nothing more of the frame is written
        written = Signal(range(self._max_beats + 1))
        has_room = buffer.write.ready
        if not self._lossy:
            m.d.comb += self.sink.ready.eq(has_room & (in_frame | commands.sink.ready))
        taken = self.sink.valid & self.sink.ready

        admitting = ~in_frame & commands.sink.ready & has_room
        keeping = Signal()      # this beat's frame is still being stored
        m.d.comb += keeping.eq(admitting | (in_frame & admitted & ~discarding))
        writable = keeping & has_room & (written != self._max_beats)
        good = writable & ~beat.drop
        if self._tail_bytes < self._width:
            good &= ~((written == self._max_beats - 1) & beat.keep[self._tail_bytes])
        m.d.comb += [
            buffer.write.payload.data.eq(beat.data),
            buffer.write.payload.keep.eq(beat.keep),
            buffer.write.valid.eq(taken & Mux(beat.last, good, writable)),
            commands.sink.valid.eq(taken & beat.last & (admitting | (in_frame & admitted))),
            commands.sink.payload.total.eq(written + good),
            commands.sink.payload.count.eq(Mux(good, written + 1, 0)),
        ]

        m.d.sync += [self.stored.eq(0), self.dropped.eq(0)]
        with m.If(taken):
            with m.If(beat.last):
                m.d.sync += [in_frame.eq(0), admitted.eq(0), discarding.eq(0), written.eq(0),
                             self.stored.eq(good), self.dropped.eq(~good & ~beat.drop)]
            with m.Else():
                m.d.sync += [in_frame.eq(1), written.eq(written + writable), discarding.eq(~writable)]
                with m.If(~in_frame):
                    m.d.sync += admitted.eq(admitting)

        m.d.comb += [
            self.source.payload.data.eq(buffer.read.payload.data),
            self.source.payload.keep.eq(buffer.read.payload.keep),
            self.source.payload.last.eq(buffer.read.payload.last),
            self.source.valid.eq(buffer.read.valid),
            buffer.read.ready.eq(self.source.ready),
        ]
        return m

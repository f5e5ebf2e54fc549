"""Store-and-forward frame buffer: a BRAM ring of beats read out by command.

Frames are written beat by beat as they arrive; nothing is read until a
command, issued after the frame's checks are done, says what to do with the
frame at the head of the ring: read ``count`` of its beats starting ``skip``
beats in (``count = 0`` discards it), then release all its ``total`` beats.
That is the commit/discard step of a store-and-forward buffer, with the
verdict allowed to arrive long after the next frame has started writing.
"""

from amaranth.hdl import Cat, Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hdl.stream.packet import packet_signature
from hdl.stream.queue import Queue

__all__ = ["PacketBuffer", "buffer_command_layout", "buffer_read_layout"]

_STAGING_DEPTH = 5


def buffer_command_layout(depth: int, user_layout) -> data.StructLayout:
    return data.StructLayout({
        "skip": unsigned((depth - 1).bit_length() + 1),
        "count": unsigned((depth - 1).bit_length() + 1),
        "total": unsigned((depth - 1).bit_length() + 1),
        "user": user_layout,
    })


def buffer_read_layout(width_bytes: int, user_layout) -> data.StructLayout:
    return data.StructLayout({
        "data": unsigned(8 * width_bytes),
        "keep": unsigned(width_bytes),
        "last": unsigned(1),
        "user": user_layout,
    })


class PacketBuffer(wiring.Component):
    """A ring of ``depth`` beats (``data`` and ``keep``) in one simple dual-port memory.

    Parameters
    ----------
    width_bytes : int
        Beat width ``W``.
    depth : int
        Beats in the ring, a power of two (one BRAM word per beat).
    user_layout : Shape
        Sideband copied from each command onto every beat it reads.

    Ports
    -----
    write : ``In(packet_signature(W))``
        Beats to store, in order; ``last`` is not stored (commands count
        beats). ``ready`` is low only while the ring holds ``depth - 1``
        beats or more (it comes from a register).
    command : ``In(stream.Signature(buffer_command_layout(depth, user)))``
        One per stored frame, in frame order: skip ``skip`` beats, read
        ``count`` beats (0 discards the frame), release ``total`` beats
        (the frame's size in the ring; ``skip + count <= total``).
    read : ``Out(stream.Signature(buffer_read_layout(W, user)))``
        The beats read, ``last`` set on the ``count``-th, ``user`` from the
        command.
    level : ``Out``
        Beats in the ring (written and not yet released), registered: it
        counts a write on the cycle after it and a release one cycle late.

    Latency: a command accepted on edge ``t`` has its first beat on ``read``
    from ``t + 3``; ``read``'s payload comes straight from flip-flops. Throughput: one beat per cycle on each side; a command is
    accepted on the cycle its predecessor's final read is issued, so reads of
    consecutive frames have no gap; a discard (``count = 0``) takes one cycle.
    """

    def __init__(self, width_bytes: int, depth: int, user_layout):
        if depth < 2 or depth & (depth - 1):
            raise ValueError(f"Buffer depth must be a power of two of at least 2, not {depth}")
        self._width = width_bytes
        self._depth = depth
        self._user = user_layout
        super().__init__({
            "write": In(packet_signature(width_bytes)),
            "command": In(stream.Signature(buffer_command_layout(depth, user_layout))),
            "read": Out(stream.Signature(buffer_read_layout(width_bytes, user_layout))),
            "level": Out(range(depth + 1)),
        })

    @property
    def depth(self) -> int:
        return self._depth

    def elaborate(self, platform):
        m = Module()
        width, depth = self._width, self._depth
        addr_bits = (depth - 1).bit_length()
        ptr_bits = addr_bits + 1  # one extra bit tells full from empty

        m.submodules.memory = memory = Memory(shape=unsigned(9 * width), depth=depth, init=[])
        write_port = memory.write_port()
        read_port = memory.read_port(transparent_for=())

        # Write side.
        write_ptr = Signal(ptr_bits)
        head = Signal(ptr_bits)  # oldest beat not yet released
        # The level and ``ready`` are registered (a subtractor's and a comparator's
        # carry chains must not reach ``write.ready``); one write may have happened
        # since, so ``ready`` keeps one beat in reserve.
        level = Signal(ptr_bits)
        ready = Signal(init=1)
        m.d.sync += [level.eq(write_ptr - head), ready.eq((write_ptr - head)[:ptr_bits] < depth - 1)]
        m.d.comb += [
            self.level.eq(level),
            self.write.ready.eq(ready),
            write_port.addr.eq(write_ptr[:addr_bits]),
            write_port.data.eq(Cat(self.write.payload.data, self.write.payload.keep)),
            write_port.en.eq(self.write.valid & self.write.ready),
        ]
        with m.If(self.write.valid & self.write.ready):
            m.d.sync += write_ptr.eq(write_ptr + 1)

        # Read side: commands become memory reads, which land in a small staging FIFO.
        # Registered outputs, so that ``read`` consumers start from flip-flops.
        staging = m.submodules.staging = Queue(buffer_read_layout(width, self._user), _STAGING_DEPTH)
        wiring.connect(m, staging.source, wiring.flipped(self.read))

        active = Signal()
        read_ptr = Signal(ptr_bits)
        left = Signal(ptr_bits)
        frame_start = Signal(ptr_bits)  # first beat of the next command's frame
        release_at = Signal(ptr_bits)   # head after the active frame
        user = Signal(self._user)
        in_flight = Signal()
        in_flight_last = Signal()
        in_flight_user = Signal(self._user)

        issue = Signal()
        final = Signal()
        m.d.comb += [
            issue.eq(active & (staging.level + in_flight < _STAGING_DEPTH)),
            final.eq(issue & (left == 1)),
            read_port.addr.eq(read_ptr[:addr_bits]),
            read_port.en.eq(issue),
            staging.sink.valid.eq(in_flight),
            staging.sink.payload.eq(Cat(read_port.data, in_flight_last, in_flight_user)),
        ]
        m.d.sync += [in_flight.eq(issue), in_flight_last.eq(final), in_flight_user.eq(user)]
        with m.If(issue):
            m.d.sync += [read_ptr.eq(read_ptr + 1), left.eq(left - 1)]
        with m.If(final):
            m.d.sync += [active.eq(0), head.eq(release_at)]

        command = self.command.payload
        m.d.comb += self.command.ready.eq(~active | final)
        with m.If(self.command.valid & self.command.ready):
            frame_end = frame_start + command.total
            m.d.sync += [
                read_ptr.eq(frame_start + command.skip),
                left.eq(command.count),
                active.eq(command.count != 0),
                frame_start.eq(frame_end),
                release_at.eq(frame_end),
                user.eq(command.user),
            ]
            with m.If(command.count == 0):
                m.d.sync += head.eq(frame_end)
        return m

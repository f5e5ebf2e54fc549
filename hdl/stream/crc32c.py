"""CRC32c of every packet on a packet stream, one beat per cycle at any width.

The CRC is CRC-32C (Castagnoli; ``amaranth.lib.crc.catalog.CRC32_ISCSI``):
reflected, initial value 0xFFFFFFFF, final XOR 0xFFFFFFFF; it is the SCTP
checksum (RFC 4960 6.8 / RFC 9260 6.8, vectors in RFC 3720 B.4).

Structure (all matrices are GF(2) linear maps computed at elaboration time):

1. lanes outside ``keep`` are zeroed, and each block of ``block_bytes`` lanes
   gets its own partial CRC (zero initial state): a small XOR tree per block;
2. a binary tree joins neighbouring partials, ``left * A^len(right) + right``
   (``A`` = one zero byte through the CRC register), one register per level,
   giving the beat's contribution ``X`` as if it were a full beat;
3. the only feedback loop is 32 bits wide: ``state' = A^W * state + X``;
4. a partial last beat of ``n`` bytes was processed as ``n`` bytes followed
   by ``W - n`` zero bytes, which is the wanted CRC register advanced by
   ``A^(W-n)``. Since ``A`` is invertible, ``log2(W)`` pipelined stages apply
   ``A^-(2^k)`` for each set bit ``k`` of ``W - n``. This costs ``log2 W``
   32x32 matrices instead of one XOR network per ``keep`` value, and needs no
   byte shifter over the data path;
5. results go into a small :class:`~hdl.stream.queue.Queue` behind the ``crc`` stream. ``sink.ready`` (a
   flip-flop, from the queue's level a cycle old) is low only when that queue could not take the results
   of every beat in flight, so with ``crc.ready`` high the block accepts one beat every cycle.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.crc import catalog
from amaranth.lib.wiring import In, Out

from hdl.stream.packet import packet_signature
from hdl.stream.queue import Queue

__all__ = ["Crc32c", "crc_register_after_bytes"]

_ALGORITHM = catalog.CRC32_ISCSI
_CRC_BITS = _ALGORITHM.crc_width
_MASK = (1 << _CRC_BITS) - 1
assert _ALGORITHM.reflect_input and _ALGORITHM.reflect_output
# Reflected register: bit 0 of the register is the x^31 coefficient.
_POLY = int(f"{_ALGORITHM.polynomial:0{_CRC_BITS}b}"[::-1], 2)
INITIAL = _ALGORITHM.initial_crc
XOR_OUTPUT = _ALGORITHM.xor_output


def _zero_bit(state: int) -> int:
    return (state >> 1) ^ (_POLY if state & 1 else 0)


def _unzero_bit(state: int) -> int:
    # Inverse of _zero_bit: the top bit of its result is the bit shifted out.
    shifted_out = state >> (_CRC_BITS - 1)
    return (((state ^ (_POLY if shifted_out else 0)) << 1) | shifted_out) & _MASK


def crc_register_after_bytes(state: int, data: bytes) -> int:
    """The reflected CRC register after ``data`` enters it in ``state`` (no final XOR)."""
    for byte in data:
        state ^= byte
        for _ in range(8):
            state = _zero_bit(state)
    return state


def _advance(state: int, byte_count: int) -> int:
    for _ in range(8 * byte_count):
        state = _zero_bit(state)
    return state


def _rewind(state: int, byte_count: int) -> int:
    for _ in range(8 * byte_count):
        state = _unzero_bit(state)
    return state


def _columns(function, in_bits: int) -> list[int]:
    """A linear map as the list of images of its input unit vectors."""
    return [function(1 << bit) for bit in range(in_bits)]


def _multiply(columns: list[int], value: Value) -> Value:
    """Hardware product of the linear map ``columns`` with ``value``."""
    out_bits = []
    for out_bit in range(_CRC_BITS):
        taps = [value[in_bit] for in_bit, column in enumerate(columns) if column >> out_bit & 1]
        out_bits.append(Cat(*taps).xor() if taps else Const(0, 1))
    return Cat(*out_bits)


class Crc32c(wiring.Component):
    """CRC32c of each packet on ``sink``, one result on ``crc`` per packet.

    Parameters
    ----------
    width_bytes : int
        Datapath width ``W`` in bytes, a power of two (4 to 64 are tested).
    block_bytes : int
        Lanes per first-level partial CRC (at most ``W``); smaller blocks give
        shallower XOR trees and more pipeline levels.

    Ports
    -----
    sink : ``In(packet_signature(W))``
        Packets to checksum; every packet has at least one byte.
    crc : ``Out(stream.Signature(unsigned(32)))``
        The CRC32c value of each packet, in packet order (e.g. 0x8A9136AA for
        32 zero bytes). SCTP stores it least significant byte first: the wire
        bytes of the checksum field, in lane order, are ``crc.payload``'s
        little-endian bytes, so a 4-lane slice ``data[0:32] = crc.payload``
        writes it. To check a received packet, zero the field on the way in
        and compare the stored field with this value.

    Latency: a last beat transferred on clock edge ``t`` has its CRC
    transferred on ``crc`` at edge ``t + latency`` when ``crc.ready`` is high,
    ``latency = 4 + log2(W / block_bytes) + log2(W)`` (6 at W=4, 12 at W=32).
    Throughput: one beat per cycle while ``crc.ready`` keeps up (always true
    when ``crc.ready`` is held high); back-to-back packets need no gap.
    """

    def __init__(self, width_bytes: int, *, block_bytes: int = 4):
        block_bytes = min(block_bytes, width_bytes)
        if width_bytes % block_bytes or (width_bytes // block_bytes) & (width_bytes // block_bytes - 1):
            raise ValueError(f"block_bytes {block_bytes} must divide width {width_bytes} into a power of two")
        self._width = width_bytes
        self._block = block_bytes
        self._combine_levels = (width_bytes // block_bytes).bit_length() - 1
        self._shift_bits = (width_bytes - 1).bit_length()
        super().__init__({
            "sink": In(packet_signature(width_bytes)),
            "crc":  Out(stream.Signature(unsigned(_CRC_BITS))),
        })

    @property
    def width_bytes(self) -> int:
        return self._width

    @property
    def _stages(self) -> int:
        """Registers between a beat on ``sink`` and the FIFO write of its result."""
        return 1 + self._combine_levels + 1 + self._shift_bits

    @property
    def latency(self) -> int:
        """Clock edges from a last beat's transfer on ``sink`` to its result's transfer on ``crc``."""
        return self._stages + 2

    def elaborate(self, platform):
        m = Module()
        width, block = self._width, self._block
        payload = self.sink.payload

        # Results queue: room for one result per beat in flight and the one being accepted
        # beside the three a queue holds once payloads wait in its FIFO (memory read, output, skid).
        results = m.submodules.results = Queue(unsigned(_CRC_BITS), self._stages + 4)
        wiring.connect(m, results.source, wiring.flipped(self.crc))
        # `sink.ready` is a flip-flop: the level a cycle old, one place kept for the result that may have
        # entered since (a compare of the level itself is too slow for the producer's wide enables).
        ready = Signal(init=1)
        m.d.sync += ready.eq(results.level <= 2)
        m.d.comb += self.sink.ready.eq(ready)
        accepted = self.sink.valid & self.sink.ready

        # Stage 1: masked lanes -> per-block partial CRCs; position of the last valid lane.
        masked = Signal(8 * width)  # a signal, so that the XOR trees share one mask per bit
        m.d.comb += masked.eq(Cat(
            Mux(payload.keep[lane], payload.data.word_select(lane, 8), 0) for lane in range(width)))
        block_map = _columns(
            lambda bits: crc_register_after_bytes(0, bits.to_bytes(block, "little")), 8 * block)
        partials = []
        for index in range(width // block):
            partial = Signal(_CRC_BITS, name=f"partial_{index}")
            m.d.sync += partial.eq(_multiply(block_map, masked.word_select(index, 8 * block)))
            partials.append(partial)

        # keep is a thermometer code: lane i is the last valid one iff keep[i] and not keep[i+1].
        keep_next = Cat(payload.keep[1:], Const(0, 1))
        last_lane = payload.keep & ~keep_next
        zero_lanes = Signal(self._shift_bits)  # W - n = ~(n - 1) in log2(W) bits
        for bit in range(self._shift_bits):
            m.d.sync += zero_lanes[bit].eq(
                ~Cat(*(last_lane[lane] for lane in range(width) if lane >> bit & 1)).any())
        valid, last = Signal(), Signal()
        m.d.sync += [valid.eq(accepted), last.eq(payload.last)]

        # Combine tree: join neighbours, the later one covering `span` bytes.
        span = block
        for level in range(self._combine_levels):
            shift_map = _columns(lambda state: _advance(state, span), _CRC_BITS)
            joined = []
            for index in range(len(partials) // 2):
                left, right = partials[2 * index], partials[2 * index + 1]
                node = Signal(_CRC_BITS, name=f"join_{level}_{index}")
                m.d.sync += node.eq(_multiply(shift_map, left) ^ right)
                joined.append(node)
            partials, span = joined, span * 2
            valid, last, zero_lanes = self._delay(m, valid, last, zero_lanes, level)
        contribution, = partials

        # The loop: the only feedback, 32 bits wide.
        state = Signal(_CRC_BITS, init=INITIAL)
        beat_map = _columns(lambda value: _advance(value, width), _CRC_BITS)
        after_beat = _multiply(beat_map, state) ^ contribution
        with m.If(valid):
            m.d.sync += state.eq(Mux(last, INITIAL, after_beat))
        register = Signal(_CRC_BITS)
        result_valid = Signal()
        result_zero_lanes = Signal.like(zero_lanes)
        m.d.sync += [
            result_valid.eq(valid & last),
            register.eq(after_beat),
            result_zero_lanes.eq(zero_lanes),
        ]

        # Undo the zero lanes of a partial last beat, one power of two per stage.
        for bit in range(self._shift_bits):
            rewind_map = _columns(lambda value: _rewind(value, 1 << bit), _CRC_BITS)
            rewound = Signal(_CRC_BITS, name=f"rewound_{bit}")
            rewound_valid = Signal(name=f"rewound_{bit}_valid")
            rewound_zero_lanes = Signal.like(result_zero_lanes, name=f"rewound_{bit}_zero_lanes")
            m.d.sync += [
                rewound.eq(Mux(result_zero_lanes[bit], _multiply(rewind_map, register), register)),
                rewound_valid.eq(result_valid),
                rewound_zero_lanes.eq(result_zero_lanes),
            ]
            register, result_valid, result_zero_lanes = rewound, rewound_valid, rewound_zero_lanes

        m.d.comb += [
            results.sink.valid.eq(result_valid),
            results.sink.payload.eq(register ^ XOR_OUTPUT),
        ]
        return m

    @staticmethod
    def _delay(m: Module, valid: Value, last: Value, zero_lanes: Value, level: int):
        delayed = (Signal(name=f"join_{level}_valid"), Signal(name=f"join_{level}_last"),
                   Signal.like(zero_lanes, name=f"join_{level}_zero_lanes"))
        m.d.sync += [delayed[0].eq(valid), delayed[1].eq(last), delayed[2].eq(zero_lanes)]
        return delayed

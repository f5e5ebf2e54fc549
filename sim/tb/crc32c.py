"""cocotb testbench of ``hdl.stream.crc32c.Crc32c`` (run by tests/sim/test_crc32c_cocotb.py).

The reference is the ``crc32c`` package (software CRC-32C); the vectors are
RFC 3720 B.4. Parameters from :func:`sim.runner.test_parameters`:
``width_bytes``, ``latency`` (the block's documented latency), ``packets``
(random packets per test) and ``seed``.
"""

import random
from collections.abc import Callable

import cocotb
import crc32c
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from sim.runner import test_parameters

# RFC 3720 B.4 (and docs/protocol.md): packet -> CRC32c value.
RFC3720_VECTORS = [
    (bytes(32), 0x8A9136AA),
    (bytes([0xFF] * 32), 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]

Gaps = Callable[[], int]


def no_gaps() -> int:
    return 0


def random_gaps(rng: random.Random, idle_fraction: float = 0.3, longest: int = 4) -> Gaps:
    """Idle cycles before a beat: zero (back to back) most of the time."""
    return lambda: rng.randint(1, longest) if rng.random() < idle_fraction else 0


def split_beats(packet: bytes, width_bytes: int) -> list[tuple[int, int, bool]]:
    """``(data, keep, last)`` of each beat of ``packet``; lane 0 is the first byte."""
    beats = []
    for offset in range(0, len(packet), width_bytes):
        chunk = packet[offset:offset + width_bytes]
        beats.append((int.from_bytes(chunk, "little"), (1 << len(chunk)) - 1,
                      offset + width_bytes >= len(packet)))
    return beats


class PacketStreamSource:
    """Drives an Amaranth packet stream (``<name>__valid/ready/payload``)."""

    def __init__(self, dut, name: str, clock, width_bytes: int):
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")
        self.clock = clock
        self.width_bytes = width_bytes
        self.accepted_cycles: list[int] = []  # cycle number of every accepted beat
        self.last_accepted_cycles: list[int] = []
        self.cycle = 0
        self.valid.value = 0
        cocotb.start_soon(self._count_cycles())

    async def _count_cycles(self) -> None:
        while True:
            await RisingEdge(self.clock)
            self.cycle += 1

    def _pack(self, data: int, keep: int, last: bool) -> int:
        width = self.width_bytes
        return data | keep << (8 * width) | int(last) << (9 * width)

    async def send(self, packet: bytes, gaps: Gaps = no_gaps) -> None:
        for data, keep, last in split_beats(packet, self.width_bytes):
            idle = gaps()
            if idle:
                self.valid.value = 0
                await ClockCycles(self.clock, idle)
            self.payload.value = self._pack(data, keep, last)
            self.valid.value = 1
            while True:
                await RisingEdge(self.clock)
                if self.ready.value:
                    break
            self.accepted_cycles.append(self.cycle)
            if last:
                self.last_accepted_cycles.append(self.cycle)
        self.valid.value = 0


class ValueStreamSink:
    """Collects the payloads of a plain value stream, with optional back-pressure."""

    def __init__(self, dut, name: str, clock, ready_probability: float = 1.0, rng: random.Random | None = None):
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")
        self.clock = clock
        self.ready_probability = ready_probability
        self.rng = rng or random.Random(0)
        self.values: list[int] = []
        self.cycles: list[int] = []
        self.cycle = 0
        self.ready.value = 1
        cocotb.start_soon(self._run())

    async def _run(self) -> None:
        while True:
            await RisingEdge(self.clock)
            self.cycle += 1
            if self.valid.value and self.ready.value:
                self.values.append(int(self.payload.value))
                self.cycles.append(self.cycle)
            self.ready.value = int(self.rng.random() < self.ready_probability)

    async def wait_for(self, count: int, timeout_cycles: int) -> None:
        for _ in range(timeout_cycles):
            if len(self.values) >= count:
                return
            await RisingEdge(self.clock)
        raise AssertionError(f"only {len(self.values)} of {count} results within {timeout_cycles} cycles")


class TB:
    """Owns the clock, the reset, the packet source and the result sink."""

    def __init__(self, dut, ready_probability: float = 1.0):
        parameters = test_parameters()
        self.dut = dut
        self.width_bytes = int(parameters["width_bytes"])
        self.latency = int(parameters["latency"])
        self.packets = int(parameters.get("packets", 40))
        self.rng = random.Random(parameters.get("seed", 1))
        assert len(dut.sink__payload) == 9 * self.width_bytes + 1, "width parameter does not match the DUT"
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        self.source = PacketStreamSource(dut, "sink", dut.clk, self.width_bytes)
        self.sink = ValueStreamSink(dut, "crc", dut.clk, ready_probability, random.Random(self.rng.random()))

    async def reset(self) -> None:
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    def random_packet(self, longest: int = 2000) -> bytes:
        return self.rng.randbytes(self.rng.randint(1, longest))

    async def check(self, packets: list[bytes], gaps: Gaps = no_gaps) -> None:
        for packet in packets:
            await self.source.send(packet, gaps)
        await self.sink.wait_for(len(packets), timeout_cycles=100 * (self.latency + len(packets)))
        expected = [crc32c.crc32c(packet) for packet in packets]
        for index, (packet, want, got) in enumerate(zip(packets, expected, self.sink.values, strict=True)):
            assert got == want, f"packet {index} ({len(packet)} bytes): CRC {got:#010x}, expected {want:#010x}"


@cocotb.test()
async def rfc3720_vectors(dut):
    """RFC 3720 B.4 CRC32c examples (the SCTP checksum of RFC 4960 6.8), back to back."""
    tb = TB(dut)
    await tb.reset()
    await tb.check([packet for packet, _ in RFC3720_VECTORS])
    assert tb.sink.values == [value for _, value in RFC3720_VECTORS]


@cocotb.test()
async def random_packets_with_gaps(dut):
    """Random packets of 1..2000 bytes, random idle cycles between beats (often none)."""
    tb = TB(dut)
    await tb.reset()
    await tb.check([tb.random_packet() for _ in range(tb.packets)], random_gaps(tb.rng))


@cocotb.test()
async def random_back_pressure_loses_nothing(dut):
    """crc.ready low at random: every result arrives, in order, none lost or repeated."""
    tb = TB(dut, ready_probability=0.3)
    await tb.reset()
    lengths = [tb.rng.choice([1, tb.width_bytes, tb.width_bytes + 1]) for _ in range(tb.packets)]
    lengths += [tb.rng.randint(1, 300) for _ in range(tb.packets)]
    await tb.check([tb.rng.randbytes(length) for length in lengths], random_gaps(tb.rng, 0.1))


@cocotb.test()
async def one_beat_per_cycle_and_latency(dut):
    """No gaps, crc.ready high: a beat is accepted every cycle; each result after `latency` cycles."""
    tb = TB(dut)
    await tb.reset()
    width = tb.width_bytes
    lengths = [1, 1, width, 2 * width - 1, 1, 3 * width, width + 1] + [tb.rng.randint(1, 700) for _ in range(10)]
    packets = [tb.rng.randbytes(length) for length in lengths]
    await tb.check(packets)
    accepted = tb.source.accepted_cycles
    beats = sum(-(-len(packet) // width) for packet in packets)
    assert len(accepted) == beats
    assert accepted[-1] - accepted[0] + 1 == beats, "sink stalled although the output was always ready"
    latencies = [done - sent for sent, done in zip(tb.source.last_accepted_cycles, tb.sink.cycles, strict=True)]
    assert set(latencies) == {tb.latency}, f"latencies {sorted(set(latencies))}, documented {tb.latency}"

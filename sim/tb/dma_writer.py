"""cocotb testbench of ``hdl.rx.dma_writer.DmaWriter`` (run by tests/sim/test_dma_writer_cocotb.py).

The subordinate is cocotbext-axi's ``AxiRamWrite`` bound by prefix to the
DUT's ``axi`` port (Verilog names ``axi_awaddr``..., :mod:`hdl.bus.ports`:
``from_prefix(dut, "axi")``), its memory filled with a canary. A monitor checks every AW (INCR,
AWSIZE = log2 W, at most ``max_burst_beats`` beats, no 4 KiB crossing) and
counts W beats per burst. Parameters from :func:`sim.runner.test_parameters`:
``width_bytes``, ``max_burst_beats``, ``latency``, ``commands``, ``seed``.
"""

import random
from dataclasses import dataclass

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiRamWrite, AxiWriteBus

from sim.runner import test_parameters
from sim.tb.crc32c import PacketStreamSource, ValueStreamSink, no_gaps, random_gaps

CANARY = 0xC3
ADDRESS_BITS = 64


@dataclass
class Command:
    address: int
    length: int
    tag: int


def pause_pattern(rng: random.Random, busy: float):
    """An endless pause generator: True (stalled) with probability ``busy``, in short runs."""
    while True:
        stalled = rng.random() < busy
        for _ in range(rng.randint(1, 4)):
            yield stalled


class CommandSource:
    """Drives ``cmd`` (payload = address | length << 64 | tag << 80)."""

    def __init__(self, dut, clock):
        self.valid, self.ready, self.payload = dut.cmd__valid, dut.cmd__ready, dut.cmd__payload
        self.clock = clock
        self.valid.value = 0

    async def send(self, commands: list[Command], gaps=no_gaps) -> None:
        for command in commands:
            idle = gaps()
            if idle:
                self.valid.value = 0
                await ClockCycles(self.clock, idle)
            self.payload.value = (command.address | command.length << ADDRESS_BITS
                                  | command.tag << (ADDRESS_BITS + 16))
            self.valid.value = 1
            while True:
                await RisingEdge(self.clock)
                if self.ready.value:
                    break
        self.valid.value = 0


class BusMonitor:
    """Checks every AW burst and records the cycle of every payload and W transfer."""

    def __init__(self, dut, clock, width_bytes: int, max_burst_beats: int):
        self.dut, self.clock = dut, clock
        self.width_bytes, self.max_burst_beats = width_bytes, max_burst_beats
        self.bursts: list[tuple[int, int]] = []
        self.w_cycles: list[int] = []
        self.payload_cycles: list[int] = []
        self.w_lasts = 0
        self.cycle = 0
        self.errors: list[str] = []
        cocotb.start_soon(self._run())

    async def _run(self) -> None:
        dut = self.dut
        while True:
            await RisingEdge(self.clock)
            self.cycle += 1
            if dut.axi_awvalid.value and dut.axi_awready.value:
                address, beats = int(dut.axi_awaddr.value), int(dut.axi_awlen.value) + 1
                aligned = address & -self.width_bytes
                if int(dut.axi_awsize.value) != self.width_bytes.bit_length() - 1 or int(dut.axi_awburst.value) != 1:
                    self.errors.append(f"burst at {address:#x}: AWSIZE/AWBURST wrong")
                if beats > self.max_burst_beats:
                    self.errors.append(f"burst at {address:#x}: {beats} beats")
                if (aligned & 0xFFF) + beats * self.width_bytes > 0x1000:
                    self.errors.append(f"burst at {address:#x}: {beats} beats cross 4 KiB")
                self.bursts.append((address, beats))
            if dut.payload__valid.value and dut.payload__ready.value:
                self.payload_cycles.append(self.cycle)
            if dut.axi_wvalid.value and dut.axi_wready.value:
                self.w_cycles.append(self.cycle)
                self.w_lasts += int(dut.axi_wlast.value)


class TB:
    def __init__(self, dut):
        parameters = test_parameters()
        self.dut = dut
        self.width_bytes = int(parameters["width_bytes"])
        self.max_burst_beats = int(parameters["max_burst_beats"])
        self.latency = int(parameters["latency"])
        self.commands = int(parameters.get("commands", 100))
        self.rng = random.Random(parameters.get("seed", 1))
        assert len(dut.axi_wdata) == 8 * self.width_bytes, "width parameter does not match the DUT"
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        self.ram = AxiRamWrite(AxiWriteBus.from_prefix(dut, "axi"), dut.clk, dut.rst, size=1 << 40)
        self.commands_in = CommandSource(dut, dut.clk)
        self.payload = PacketStreamSource(dut, "payload", dut.clk, self.width_bytes)
        self.monitor = BusMonitor(dut, dut.clk, self.width_bytes, self.max_burst_beats)

    async def reset(self) -> None:
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    def back_pressure(self, busy: float) -> None:
        for channel in (self.ram.aw_channel, self.ram.w_channel, self.ram.b_channel):
            channel.set_pause_generator(pause_pattern(random.Random(self.rng.random()), busy))

    def random_commands(self, count: int, longest: int, base: int) -> list[Command]:
        """Non-overlapping commands at random byte addresses, crossing pages often."""
        commands, address = [], base + self.rng.randrange(64)
        for _ in range(count):
            kind = self.rng.random()
            if kind < 0.1:
                length = 0
            elif kind < 0.5:
                length = self.rng.randint(1, 2 * self.width_bytes + 1)
            else:
                length = self.rng.randint(1, longest)
            commands.append(Command(address, length, self.rng.randrange(1 << 16)))
            address += length + self.rng.choice([0, 1, self.rng.randrange(200)])
        return commands

    async def run(self, commands: list[Command], *, gaps=no_gaps, done_ready: float = 1.0) -> ValueStreamSink:
        """Place ``commands`` and check memory, canary, bursts and completions."""
        low = min(command.address for command in commands) - 512
        high = max(command.address + command.length for command in commands) + 512
        self.ram.write(low, bytes([CANARY]) * (high - low))
        done = ValueStreamSink(self.dut, "done", self.dut.clk, done_ready, random.Random(self.rng.random()))
        payloads = [self.rng.randbytes(command.length) for command in commands]
        cocotb.start_soon(self.commands_in.send(commands, gaps))
        for payload in payloads:
            if payload:
                await self.payload.send(payload, gaps)
        total = sum(command.length // self.width_bytes + 2 for command in commands)
        await done.wait_for(len(commands), timeout_cycles=200 + 20 * total)
        await ClockCycles(self.dut.clk, 20)

        assert not self.monitor.errors, self.monitor.errors[:5]
        assert len(done.values) == len(commands), "a completion too many"
        assert done.values == [command.tag for command in commands], "completions out of order, wrong or with error"
        assert self.monitor.w_lasts == len(self.monitor.bursts)
        expected = bytearray([CANARY]) * (high - low)
        for command, payload in zip(commands, payloads):
            expected[command.address - low:command.address - low + command.length] = payload
        memory = self.ram.read(low, high - low)
        if memory != expected:
            wrong = next(index for index in range(len(memory)) if memory[index] != expected[index])
            raise AssertionError(f"byte at {low + wrong:#x}: {memory[wrong]:#04x}, expected {expected[wrong]:#04x}")
        return done


@cocotb.test()
async def random_commands_with_back_pressure(dut):
    """Random addresses, 0..9000 bytes, AW/W/B paused at random, gaps on cmd/payload, done.ready random."""
    tb = TB(dut)
    await tb.reset()
    tb.back_pressure(0.4)
    commands = tb.random_commands(tb.commands, 9000, base=(1 << 32) - 30000)
    await tb.run(commands, gaps=random_gaps(tb.rng, 0.2, 3), done_ready=0.6)


@cocotb.test()
async def short_commands_back_to_back(dut):
    """0..2W+1-byte commands (a tenth of them empty) back to back, no pauses: each done, in order."""
    tb = TB(dut)
    await tb.reset()
    commands = tb.random_commands(3 * tb.commands, 2 * tb.width_bytes + 1, base=0x1234_0000)
    await tb.run(commands)


@cocotb.test()
async def one_beat_per_cycle(dut):
    """Bus and payload always ready: every W beat of long commands follows the previous one cycle later."""
    tb = TB(dut)
    await tb.reset()
    width = tb.width_bytes
    commands = [Command(0x10_0000, 9000, 1), Command(0x20_0005, 8191, 2), Command(0x30_0000 + width - 1, 2, 3)]
    await tb.run(commands)
    beats = sum((command.address % width + command.length + width - 1) // width for command in commands)
    cycles = tb.monitor.w_cycles
    assert len(cycles) == beats
    assert cycles[-1] - cycles[0] + 1 == beats, f"{beats} W beats took {cycles[-1] - cycles[0] + 1} cycles"
    # The input skid buffer takes the first beats ahead of their command: the latency from the first
    # command's last beat (it does not spill into one more W beat).
    first_beats = (commands[0].address % width + commands[0].length + width - 1) // width
    latency = cycles[first_beats - 1] - tb.monitor.payload_cycles[first_beats - 1]
    assert latency == tb.latency, f"latency {latency}, documented {tb.latency}"

"""hdl.rx.dma_writer.DmaWriter and hdl.bus.axi in Amaranth's own simulator.

A behavioural AXI4 subordinate (random AWREADY/WREADY/BVALID, optional SLVERR)
writes into a byte memory filled with a canary; random commands (any byte
address, 0..9000 bytes, back to back or with gaps) must land byte-exactly,
each target byte written once, nothing else touched, every burst legal
(INCR, AWSIZE = log2 W, at most max_burst_beats <= 256 beats, no 4 KiB
crossing, WLAST on its last beat only, no strobe below an unaligned start),
and ``done`` must carry the tags in command order with the right error flag.
"""

import bisect
import random
from dataclasses import dataclass, field

import pytest
from amaranth.sim import Simulator

from hdl.bus.axi import Burst, Resp
from hdl.rx.dma_writer import DmaWriter

CANARY = 0x5A

# test_parameters_are_checked builds components only to read their parameters.
pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")


@dataclass
class Command:
    address: int
    length: int
    tag: int


@dataclass
class Bus:
    """What the subordinate saw."""
    bursts: list = field(default_factory=list)          # (awaddr, awlen)
    write_count: dict = field(default_factory=dict)     # address -> times written
    burst_commands: list = field(default_factory=list)  # command index of each burst
    burst_errors: list = field(default_factory=list)    # SLVERR given to each burst
    w_cycles: list = field(default_factory=list)        # cycle of each W transfer
    aw_cycles: list = field(default_factory=list)       # cycle of each AW transfer
    cmd_cycles: list = field(default_factory=list)      # cycle of each cmd transfer
    done_cycles: list = field(default_factory=list)     # cycle of each done transfer
    b_cycles: list = field(default_factory=list)        # cycle of each B transfer
    payload_cycles: list = field(default_factory=list)  # cycle of each payload transfer
    done: list = field(default_factory=list)            # (tag, error)


def random_commands(rng: random.Random, count: int, width: int, *, longest: int = 9000,
                    base: int = (1 << 32) - 20000) -> list[Command]:
    """Non-overlapping commands at random byte addresses, often crossing 4 KiB pages."""
    commands, address = [], base + rng.randrange(64)
    for index in range(count):
        kind = rng.random()
        if kind < 0.1:
            length = 0
        elif kind < 0.4:
            length = rng.randint(1, 2 * width + 1)
        elif kind < 0.85:
            length = rng.randint(1, 1500)
        else:
            length = rng.randint(1, longest)
        commands.append(Command(address, length, rng.randrange(1 << 16)))
        address += length + rng.choice([0, 0, 1, rng.randrange(100), rng.randrange(5000)])
    return commands


def beats(data: bytes, width: int, rng: random.Random):
    """(data, keep, last) beats, junk in the lanes outside keep."""
    for offset in range(0, len(data), width):
        chunk = data[offset:offset + width]
        yield (int.from_bytes(chunk + rng.randbytes(width - len(chunk)), "little"),
               (1 << len(chunk)) - 1, offset + width >= len(data))


def simulate(width: int, commands: list[Command], *, seed: int = 0, aw_ready: float = 1.0, w_ready: float = 1.0,
             b_valid: float = 1.0, cmd_valid: float = 1.0, payload_valid: float = 1.0, done_ready: float = 1.0,
             slverr: float = 0.0, max_burst_beats: int | None = None, max_outstanding: int = 16):
    dut = DmaWriter(width, max_burst_beats=max_burst_beats, max_outstanding=max_outstanding)
    rng = random.Random(seed)
    payloads = [rng.randbytes(command.length) for command in commands]
    starts = [command.address for command in commands]
    low = min(starts) - 256
    high = max(command.address + command.length for command in commands) + 256
    memory = bytearray([CANARY]) * (high - low)
    bus = Bus()
    aw_queue, w_queue = [], []
    cycle = [0]

    def owner(address: int) -> int:
        index = bisect.bisect_right(starts, address) - 1
        while index >= 0 and commands[index].length == 0:
            index -= 1
        assert index >= 0 and address < commands[index].address + commands[index].length, f"{address:#x} not targeted"
        return index

    async def clock(ctx):
        while True:
            await ctx.tick()
            cycle[0] += 1

    async def command_source(ctx):
        for command in commands:
            while rng.random() > cmd_valid:
                ctx.set(dut.cmd.valid, 0)
                await ctx.tick()
            ctx.set(dut.cmd.payload, {"address": command.address, "length": command.length, "tag": command.tag})
            ctx.set(dut.cmd.valid, 1)
            await ctx.tick().until(dut.cmd.ready)
            bus.cmd_cycles.append(cycle[0])
        ctx.set(dut.cmd.valid, 0)

    async def payload_source(ctx):
        for payload in payloads:
            for data, keep, last in beats(payload, width, rng):
                while rng.random() > payload_valid:
                    ctx.set(dut.payload.valid, 0)
                    await ctx.tick()
                ctx.set(dut.payload.payload, {"data": data, "keep": keep, "last": last})
                ctx.set(dut.payload.valid, 1)
                await ctx.tick().until(dut.payload.ready)
                bus.payload_cycles.append(cycle[0])
        ctx.set(dut.payload.valid, 0)

    axi = dut.axi

    async def aw_channel(ctx):
        while True:
            ctx.set(axi.awready, rng.random() < aw_ready)
            _, _, valid, ready, address, length, size, kind, ident = await ctx.tick().sample(
                axi.awvalid, axi.awready, axi.awaddr, axi.awlen, axi.awsize, axi.awburst, axi.awid)
            if valid and ready:
                assert size == width.bit_length() - 1 and kind == Burst.INCR and ident == 0
                aw_queue.append((address, length))
                bus.aw_cycles.append(cycle[0])

    async def w_channel(ctx):
        while True:
            ctx.set(axi.wready, rng.random() < w_ready)
            _, _, valid, ready, data, strobe, last = await ctx.tick().sample(
                axi.wvalid, axi.wready, axi.wdata, axi.wstrb, axi.wlast)
            if valid and ready:
                w_queue.append((data, strobe, last))
                bus.w_cycles.append(cycle[0])

    async def b_channel(ctx):
        pending = []  # responses owed, in order
        while True:
            # A burst is complete once its AW and all its W beats are in.
            while aw_queue and len(w_queue) > aw_queue[0][1]:
                address, length = aw_queue.pop(0)
                burst_beats = length + 1
                assert burst_beats <= (max_burst_beats or min(256, 4096 // width)) <= 256
                aligned = address & -width
                assert (aligned & 0xFFF) + burst_beats * width <= 0x1000, f"burst {address:#x}+{burst_beats} crosses 4 KiB"
                command_index = None
                for index in range(burst_beats):
                    data, strobe, last = w_queue.pop(0)
                    assert last == (index == burst_beats - 1), f"WLAST wrong on beat {index} of {burst_beats}"
                    assert strobe, "beat without strobes"
                    beat_address = aligned + index * width
                    for lane in range(width):
                        if strobe >> lane & 1:
                            byte = beat_address + lane
                            assert byte >= address, "strobe below the burst's start address"
                            target = owner(byte)
                            assert command_index in (None, target), "burst spans two commands"
                            command_index = target
                            assert low <= byte < high
                            memory[byte - low] = data >> (8 * lane) & 0xFF
                            bus.write_count[byte] = bus.write_count.get(byte, 0) + 1
                error = rng.random() < slverr
                bus.bursts.append((address, length))
                bus.burst_commands.append(command_index)
                bus.burst_errors.append(error)
                pending.append(error)
            if pending and rng.random() < b_valid:
                ctx.set(axi.bvalid, 1)
                ctx.set(axi.bresp, Resp.SLVERR if pending[0] else Resp.OKAY)
                await ctx.tick().until(axi.bready)
                bus.b_cycles.append(cycle[0])
                pending.pop(0)
                ctx.set(axi.bvalid, 0)
            else:
                await ctx.tick()

    async def done_sink(ctx):
        while len(bus.done) < len(commands):
            ctx.set(dut.done.ready, rng.random() < done_ready)
            _, _, valid, ready, payload = await ctx.tick().sample(dut.done.valid, dut.done.ready, dut.done.payload)
            if valid and ready:
                bus.done.append((payload.tag, payload.error))
                bus.done_cycles.append(cycle[0])
        # Nothing more may happen once every command is done.
        for _ in range(30):
            ctx.set(dut.done.ready, 1)
            _, _, valid, wvalid, awvalid = await ctx.tick().sample(dut.done.valid, axi.wvalid, axi.awvalid)
            assert not (valid or wvalid or awvalid), "traffic after the last completion"

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    simulator.add_process(clock)
    for background in (aw_channel, w_channel, b_channel):
        simulator.add_testbench(background, background=True)
    for testbench in (command_source, payload_source, done_sink):
        simulator.add_testbench(testbench)
    total_beats = sum(len(payload) // width + 2 for payload in payloads) + len(commands)
    slowest = min(aw_ready, w_ready, b_valid, cmd_valid, payload_valid, done_ready)
    deadline = int(40 + 4 * total_beats / slowest)
    simulator.run_until(1e-8 * deadline)
    assert len(bus.done) == len(commands), f"{len(bus.done)} of {len(commands)} commands done in {deadline} cycles"

    # Memory: every targeted byte written once with its payload byte, nothing else touched.
    expected = bytearray([CANARY]) * (high - low)
    for command, payload in zip(commands, payloads):
        expected[command.address - low:command.address - low + command.length] = payload
    assert memory == expected
    assert set(bus.write_count.values()) <= {1}
    assert len(bus.write_count) == sum(command.length for command in commands)
    # Completions: in command order, error iff one of the command's bursts got SLVERR.
    errored = {index for index, error in zip(bus.burst_commands, bus.burst_errors) if error}
    assert bus.done == [(command.tag, int(index in errored)) for index, command in enumerate(commands)]
    return bus


@pytest.mark.slow   # kept out of the default suite, to hold it under 8 minutes
@pytest.mark.parametrize("width", [8, 64])
def test_random_commands_random_back_pressure(width):
    """Random addresses and lengths 0..9000, random ready/valid on every channel."""
    rng = random.Random(width)
    commands = random_commands(rng, 24 if width == 8 else 40, width)
    simulate(width, commands, seed=width, aw_ready=0.5, w_ready=0.6, b_valid=0.4,
             cmd_valid=0.7, payload_valid=0.8, done_ready=0.5)


@pytest.mark.slow   # kept out of the default suite, to hold it under 8 minutes
@pytest.mark.parametrize("width", [8, 64])
def test_back_to_back_short_commands_and_errors(width):
    """Many 0..3W-byte commands back to back, few outstanding bursts, SLVERR on some bursts."""
    rng = random.Random(100 + width)
    commands = random_commands(rng, 150, width, longest=3 * width)
    simulate(width, commands, seed=width + 1, aw_ready=0.7, w_ready=0.8, b_valid=0.5,
             slverr=0.15, max_outstanding=3)


def test_small_bursts_and_every_alignment():
    """max_burst_beats = 2 at W = 16: every start lane, every end lane, bursts cut every 32 bytes."""
    width = 16
    commands, address = [], 0x10000 - 3 * width
    for offset in range(width):
        for length in (1, width - offset, width - offset + 1, 3 * width + 5):
            address = (address & -width) + 4 * width + offset
            commands.append(Command(address, length, len(commands)))
            address += length
    bus = simulate(width, commands, seed=3, w_ready=0.7, aw_ready=0.6, max_burst_beats=2)
    assert max(length for _, length in bus.bursts) == 1


def test_one_beat_per_cycle_and_latency():
    """Bus always ready: a long command streams a W beat every cycle, 3 edges after its payload."""
    width = 8
    commands = [Command(0x1000_0000, 8000, 1), Command(0x2000_0003, 7001, 2), Command(0x3000_0005, 3, 3)]
    bus = simulate(width, commands, seed=5)
    w_beats = sum((command.address % width + command.length + width - 1) // width for command in commands)
    assert len(bus.w_cycles) == w_beats
    assert bus.w_cycles[-1] - bus.w_cycles[0] + 1 == w_beats, "W bus idled although always ready"
    # The input skid buffer takes the first beats ahead of their command: the latency from the last.
    assert bus.w_cycles[-1] - bus.payload_cycles[-1] == DmaWriter.latency
    # Bursts: 256 beats except where the 2 KiB block (256 * 8 bytes) starts or ends.
    assert sorted({length + 1 for _, length in bus.bursts})[-1] == 256


def test_command_latencies():
    """Documented edges: cmd -> first W beat 4, first AW 4, zero-length cmd -> done 5, last B -> done 1."""
    bus = simulate(8, [Command(0x1000, 0, 7)])
    assert bus.done_cycles[0] - bus.cmd_cycles[0] == 5
    bus = simulate(8, [Command(0x1003, 20, 8)])
    assert bus.w_cycles[0] - bus.cmd_cycles[0] == 4
    assert bus.aw_cycles[0] - bus.cmd_cycles[0] == 4
    assert bus.done_cycles[0] - bus.b_cycles[-1] == 1


def test_parameters_are_checked():
    with pytest.raises(ValueError):
        DmaWriter(64, max_burst_beats=128)  # 8 KiB bursts would cross 4 KiB pages
    with pytest.raises(ValueError):
        DmaWriter(8, max_burst_beats=100)
    with pytest.raises(ValueError):
        DmaWriter(12)
    assert DmaWriter(8).max_burst_beats == 256 and DmaWriter(32).max_burst_beats == 128


@pytest.mark.parametrize("width", [16, 32])
def test_other_widths_elaborate_and_place(width):
    """W = 16 and 32: a few commands with back-pressure place exactly."""
    rng = random.Random(width)
    simulate(width, random_commands(rng, 12, width, longest=1500), seed=width, w_ready=0.7, b_valid=0.6)

"""The stream queue (hdl/stream/queue.py): order, back-pressure, one transfer per cycle, registered ready, level."""

import gc
import random

import pytest
from amaranth.hdl import unsigned
from amaranth.lib import data
from amaranth.sim import Simulator

from hdl.stream.queue import Queue
from hdl.stream.simulation import Pace, stream_get, stream_put

LAYOUT = data.StructLayout({"value": unsigned(16), "flag": unsigned(1)})


def simulate(dut, *testbenches, background=()):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for testbench in background:
        sim.add_testbench(testbench, background=True)
    for testbench in testbenches:
        sim.add_testbench(testbench)
    sim.run()


# The FIFO's memory: LUT RAM behind a skid stage, LUT RAM as the output, block RAM behind a skid stage.
OPTIONS = {"lut": {}, "memory_output": {"memory_output": True}, "block_ram": {"block_ram": True},
           "lagged": {"memory_output": True, "lagged_ready": True}}   # the report engine's inputs, at depth 5

VARIANTS = [(2, "lut", ()), (3, "lut", ()), (8, "lut", ()), (3, "memory_output", ()), (8, "memory_output", ()),
            (4, "memory_output", ("flag",)), (3, "block_ram", ()), (8, "block_ram", ())]


@pytest.mark.parametrize("depth,memory,registered_fields", VARIANTS)
def test_order_under_random_backpressure(depth, memory, registered_fields):
    dut = Queue(LAYOUT, depth, registered_fields=registered_fields, **OPTIONS[memory])
    rng = random.Random(depth)
    values = [{"value": rng.randrange(1 << 16), "flag": rng.randrange(2)} for _ in range(300)]
    received = []

    async def producer(ctx):
        pace = Pace(0.3, seed=depth)
        for value in values:
            await stream_put(ctx, dut.sink, value, pace=pace)

    async def consumer(ctx):
        pace = Pace(0.3, seed=depth + 100)
        for _ in values:
            payload = await stream_get(ctx, dut.source, pace=pace)
            received.append({"value": payload.value, "flag": payload.flag})

    collisions = []

    async def block_memory(ctx):
        # The block RAM's NO_RW_CHECK: a fetch never reads the address written on the same edge.
        async for _, _, writing, write_address, fetching, fetch_address in ctx.tick().sample(
                *vars(dut._block_memory).values()):
            if writing and fetching and write_address == fetch_address:
                collisions.append(write_address)

    checks = [block_memory] if memory == "block_ram" else []
    simulate(dut, consumer, background=[producer, *checks])
    assert received == values
    assert collisions == []


@pytest.mark.parametrize("depth,memory", [(2, "lut"), (3, "lut"), (4, "lut"), (5, "lut"), (3, "memory_output"),
                                          (4, "memory_output"), (3, "block_ram"), (4, "block_ram"), (5, "lagged")])
def test_one_transfer_per_cycle(depth, memory):
    """Both sides always ready: a transfer on every cycle on both sides, no bubble."""
    dut = Queue(unsigned(16), depth, **OPTIONS[memory])
    count = 100
    taken = []

    async def bench(ctx):
        ctx.set(dut.source.ready, 1)
        ctx.set(dut.sink.valid, 1)
        sent = 0
        for cycle in range(count + 10):
            ctx.set(dut.sink.payload, sent)
            ctx.set(dut.sink.valid, sent < count)
            _, _, in_ready, out_valid, out_payload = await ctx.tick().sample(
                dut.sink.ready, dut.source.valid, dut.source.payload)
            if sent < count:
                assert in_ready, f"sink not ready on cycle {cycle}"
                sent += 1
            if out_valid:
                taken.append((cycle, out_payload))

    simulate(dut, bench)
    assert [value for _, value in taken] == list(range(count))
    assert taken[-1][0] - taken[0][0] == count - 1


@pytest.mark.parametrize("depth,memory", [(2, "lut"), (3, "lut"), (5, "lut"), (3, "memory_output"),
                                          (5, "memory_output"), (3, "block_ram"), (5, "block_ram")])
def test_level_and_backpressure(depth, memory):
    """With the consumer stalled the queue takes exactly ``depth`` payloads, ``level`` counting them."""
    dut = Queue(unsigned(8), depth, **OPTIONS[memory])

    async def bench(ctx):
        ctx.set(dut.source.ready, 0)
        assert ctx.get(dut.level) == 0
        for value in range(depth):
            await stream_put(ctx, dut.sink, value)
        await ctx.tick().repeat(3)
        assert ctx.get(dut.level) == depth
        assert not ctx.get(dut.sink.ready)
        for value in range(depth):
            assert await stream_get(ctx, dut.source) == value
        await ctx.tick().repeat(3)
        assert ctx.get(dut.level) == 0
        assert ctx.get(dut.sink.ready)

    simulate(dut, bench)


@pytest.mark.parametrize("depth,memory", [(2, "lut"), (4, "lut"), (4, "memory_output"), (4, "block_ram")])
def test_ready_and_valid_come_from_flip_flops(depth, memory):
    """Flipping ``source.ready`` or ``sink.valid`` without a clock edge changes neither ``sink.ready``
    nor ``source.valid``: no combinational path crosses the queue."""
    dut = Queue(unsigned(8), depth, **OPTIONS[memory])

    async def bench(ctx):
        for fill in range(depth + 1):
            ctx.set(dut.source.ready, 0)
            ctx.set(dut.sink.valid, 0)
            await ctx.tick().repeat(3)
            for toggles in ((1, 0), (0, 1), (1, 1), (0, 0)):
                ctx.set(dut.source.ready, toggles[0])
                ctx.set(dut.sink.valid, toggles[1])
                seen = (ctx.get(dut.sink.ready), ctx.get(dut.source.valid))
                ctx.set(dut.source.ready, 1 - toggles[0])
                ctx.set(dut.sink.valid, 1 - toggles[1])
                assert (ctx.get(dut.sink.ready), ctx.get(dut.source.valid)) == seen, (fill, toggles)
            ctx.set(dut.source.ready, 0)
            if fill < depth:
                await stream_put(ctx, dut.sink, fill)

    simulate(dut, bench)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_depth_below_two_is_refused():
    with pytest.raises(ValueError):
        Queue(unsigned(8), 1)
    with pytest.raises(ValueError, match="memory_output"):
        Queue(unsigned(8), 2, memory_output=True)
    with pytest.raises(ValueError, match="block RAM needs depth >= 3"):
        Queue(unsigned(8), 2, block_ram=True)
    with pytest.raises(ValueError, match="with memory_output"):
        Queue(unsigned(8), 4, block_ram=True, memory_output=True)
    with pytest.raises(ValueError, match="needs memory_output"):
        Queue(LAYOUT, 4, registered_fields=("flag",))
    with pytest.raises(ValueError, match="'missing' is not a field"):
        Queue(LAYOUT, 4, memory_output=True, registered_fields=("missing",))
    gc.collect()  # the half-built Queue warns when collected: here, under this test's filter


@pytest.mark.parametrize("depth", [2, 5])
def test_lookahead_names_the_next_head(depth):
    """Under random valid/ready, whenever the output register is free (``source.valid`` low or
    ``source.ready`` high) on a cycle, ``source`` on the next cycle is ``following`` of that
    cycle; otherwise ``source`` keeps its payload."""
    dut = Queue(unsigned(16), depth, lookahead=True)
    rng = random.Random(depth)
    checked = {"loads": 0, "holds": 0}

    async def bench(ctx):
        next_value = 0
        expected = None  # (valid, payload) the source must show after the edge
        for _ in range(400):
            sink_valid, source_ready = rng.random() < 0.6, rng.random() < 0.6
            ctx.set(dut.sink.valid, sink_valid)
            ctx.set(dut.sink.payload, next_value)
            ctx.set(dut.source.ready, source_ready)
            if expected is not None:
                valid, payload = expected
                assert ctx.get(dut.source.valid) == valid
                if valid:
                    assert ctx.get(dut.source.payload) == payload
            free = not ctx.get(dut.source.valid) or source_ready
            if free:
                expected = (ctx.get(dut.following_valid), ctx.get(dut.following))
                checked["loads"] += 1
            else:
                expected = (1, ctx.get(dut.source.payload))
                checked["holds"] += 1
            accepted = sink_valid and ctx.get(dut.sink.ready)
            await ctx.tick()
            if accepted:
                next_value += 1
        assert next_value > 100

    simulate(dut, bench)
    assert checked["loads"] > 50 and checked["holds"] > 50


@pytest.mark.parametrize("depth,memory", [(2, "lut"), (5, "lut"), (4, "block_ram")])
def test_valid_replicas_follow_the_valid(depth, memory):
    """Under random valid/ready, every replica equals ``source.valid`` on every cycle, through fills,
    drains and stalls, and the payloads still come out in order."""
    dut = Queue(unsigned(16), depth, valid_replicas=2, **OPTIONS[memory])
    rng = random.Random(depth)
    seen = {"valid": 0, "idle": 0}
    received = []

    async def bench(ctx):
        sent = 0
        for _ in range(600):
            ctx.set(dut.sink.valid, rng.random() < 0.5)
            ctx.set(dut.sink.payload, sent)
            ctx.set(dut.source.ready, rng.random() < 0.5)
            valid = ctx.get(dut.source.valid)
            assert ctx.get(dut.valid_replicas) == (0b11 if valid else 0)
            seen["valid" if valid else "idle"] += 1
            if valid and ctx.get(dut.source.ready):
                received.append(ctx.get(dut.source.payload))
            if ctx.get(dut.sink.valid) and ctx.get(dut.sink.ready):
                sent += 1
            await ctx.tick()

    simulate(dut, bench)
    assert received == list(range(len(received))) and len(received) > 100
    assert seen["valid"] > 100 and seen["idle"] > 50


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_valid_replicas_need_the_skid_stage():
    with pytest.raises(ValueError, match="valid_replicas needs the skid stage"):
        Queue(unsigned(8), 4, memory_output=True, valid_replicas=1)
    gc.collect()


@pytest.mark.parametrize("depth,memory", [(2, "lut"), (5, "lut"), (4, "block_ram"), (4, "memory_output")])
def test_wide_payload_under_random_backpressure(depth, memory):
    """A payload of several `Queue.SELECT_BITS` slices (each steered by its own copy of the selects)
    comes out whole and in order under random valid and ready."""
    width = 3 * Queue.SELECT_BITS + 5
    dut = Queue(unsigned(width), depth, **OPTIONS[memory])
    rng = random.Random(width + depth)
    values = [rng.getrandbits(width) for _ in range(200)]
    received = []

    async def producer(ctx):
        pace = Pace(0.4, seed=depth)
        for value in values:
            await stream_put(ctx, dut.sink, value, pace=pace)

    async def consumer(ctx):
        pace = Pace(0.4, seed=depth + 7)
        for _ in values:
            received.append(await stream_get(ctx, dut.source, pace=pace))

    simulate(dut, consumer, background=[producer])
    assert received == values


@pytest.mark.parametrize("depth,memory", [(3, "lut"), (5, "memory_output"), (5, "block_ram")])
def test_lagged_ready_keeps_order_and_bound(depth, memory):
    """``lagged_ready``: under random back-pressure every payload in order, the level never above the depth, and
    ``sink.ready`` only while the level plus a payload taken on the cycle before is below it."""
    dut = Queue(LAYOUT, depth, lagged_ready=True, **OPTIONS[memory])
    rng = random.Random(depth)
    values = [{"value": rng.randrange(1 << 16), "flag": rng.randrange(2)} for _ in range(300)]
    received, breaches = [], []

    async def producer(ctx):
        for value in values:
            await stream_put(ctx, dut.sink, value, pace=Pace(0.3, seed=depth))

    async def consumer(ctx):
        pace = Pace(0.4, seed=depth + 100)
        for _ in values:
            payload = await stream_get(ctx, dut.source, pace=pace)
            received.append({"value": payload.value, "flag": payload.flag})

    async def bound(ctx):
        left_before = 0
        async for _, _, level, ready, valid, taken in ctx.tick().sample(
                dut.level, dut.sink.ready, dut.source.valid, dut.source.ready):
            if level > depth or (ready and level + left_before >= depth):
                breaches.append((level, ready, left_before))
            left_before = int(valid and taken)

    simulate(dut, consumer, background=[producer, bound])
    assert received == values
    assert breaches == []


def test_lagged_ready_needs_a_fifo():
    with pytest.raises(ValueError):
        Queue(unsigned(8), 2, lagged_ready=True)

"""hdl.rx.sequence_window.SequenceWindow in Amaranth's simulator, against the protocol model's DdpSink
(RFC 5043 6.1, 10): duplicates, the window bound, the window sliding as gaps fill, resets."""

import random

import pytest
from amaranth.sim import Simulator

from hdl.rx.sequence_window import SequenceWindow
from model.ddp.memory import MemoryTable, ProtectionDomain, SparseMemory
from model.ddp.segment import TaggedHeader
from model.ddp.sink import DdpSink

STREAMS = 4
#: A zero-length tagged segment: accepted by a sink without any table (RFC 5041 5.2), so only its
#: sequence number matters.
EMPTY_SEGMENT = TaggedHeader(True, 0x40, 0, 0).encode()


def reference(window: int, first: int) -> DdpSink:
    return DdpSink(pd=ProtectionDomain(1), memory_table=MemoryTable(), host_memory=SparseMemory(), stream_id=0,
                   first_sequence=first, window=window)


def ssn_sequence(rng: random.Random, first: int, count: int, window: int) -> list[int]:
    """DDP-SSNs as an unordered, duplicating link delivers them, with now and then one far ahead."""
    ssns = [(first + i) & 0xFFFF for i in range(count)]
    for i in range(count - 1):
        if rng.random() < 0.4:
            j = min(count - 1, i + rng.randint(1, window // 2))
            ssns[i], ssns[j] = ssns[j], ssns[i]
    out = []
    for ssn in ssns:
        out.append(ssn)
        if rng.random() < 0.15:
            out.append(rng.choice(out))                                   # a duplicate, maybe long after
        if rng.random() < 0.05:
            out.append((ssn + window + rng.randrange(0, 3 * window)) & 0xFFFF)  # beyond the window
    return out


@pytest.mark.parametrize("registered_write", [False, True])
@pytest.mark.parametrize("window", [8, 32])
def test_agrees_with_the_ddp_sink_on_every_arrival(window, registered_write):
    rng = random.Random(window)
    firsts = [rng.randrange(1 << 16) for _ in range(STREAMS)]
    firsts[0] = 0xFFF0   # wraps during the run
    sequences = [ssn_sequence(rng, firsts[s], 120, window) for s in range(STREAMS)]
    sinks = [reference(window, first) for first in firsts]
    dut = SequenceWindow(STREAMS, window, registered_write=registered_write)
    outcomes = {s: [] for s in range(STREAMS)}

    async def bench(ctx):
        for s, first in enumerate(firsts):
            ctx.set(dut.reset, 1)
            ctx.set(dut.reset_index, s)
            ctx.set(dut.reset_first, first)
            await ctx.tick()
        ctx.set(dut.reset, 0)
        pipeline = [None] * SequenceWindow.latency
        # Round robin, a slot left empty where a stream's arrivals have run out: a stream is looked up
        # every STREAMS-th cycle at most (the block's contract in either write mode).
        lookups = [(s, sequences[s][i]) if i < len(sequences[s]) else None
                   for i in range(max(map(len, sequences))) for s in range(STREAMS)]
        for item in lookups + [None] * SequenceWindow.latency:
            done = pipeline.pop(0)
            commit = False
            if done is not None:
                s, ssn = done
                duplicate, beyond = ctx.get(dut.duplicate), ctx.get(dut.beyond)
                outcomes[s].append((ssn, duplicate, beyond))
                commit = not duplicate and not beyond
            ctx.set(dut.commit, commit)
            if item is not None:
                ctx.set(dut.index, item[0])
                ctx.set(dut.ssn, item[1])
            pipeline.append(item)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()

    for s in range(STREAMS):
        sink = sinks[s]
        assert [ssn for ssn, _, _ in outcomes[s]] == sequences[s]
        kinds = set()
        for ssn, duplicate, beyond in outcomes[s]:
            ahead = (ssn - sink.delivery_point) & 0xFFFF
            expected_duplicate = sink.sequence_seen(ssn)
            expected_beyond = not expected_duplicate and ahead >= window
            assert (duplicate, beyond) == (expected_duplicate, expected_beyond), (s, ssn, sink.delivery_point)
            kinds.add((duplicate, beyond))
            if not duplicate and not beyond:
                sink.receive(EMPTY_SEGMENT, ssn)
        assert kinds == {(0, 0), (1, 0), (0, 1)}  # the run met every outcome


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_window_must_be_a_power_of_two():
    for window in (0, 1, 24, 1 << 16):
        with pytest.raises(ValueError, match="window"):
            SequenceWindow(2, window)

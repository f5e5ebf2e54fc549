"""hdl.rx.delivery_order.DeliveryOrder in Amaranth's simulator: the records of each DDP stream leave in
DDP-SSN order, as the protocol model's DdpSink delivers (RFC 5041 5.3, 5.4; RFC 5043 6.1), other
records in arrival order, delivered untagged messages retire their buffers, host writes restart a stream."""

import random

import pytest
from amaranth.sim import Simulator

from abi.rx import ReportKind, SegmentStatus
from hdl.rx.delivery_order import DeliveryOrder
from hdl.stream.simulation import Pace, collector, settle, stream_put
from model.ddp.memory import MemoryTable, ProtectionDomain, SparseMemory
from model.ddp.segment import TaggedHeader
from model.ddp.sink import DdpSink

ASSOCIATIONS, STREAM_IDS, WINDOW = 2, 2, 8
STREAMS = ASSOCIATIONS * STREAM_IDS
EMPTY_SEGMENT = TaggedHeader(True, 0x40, 0, 0).encode()  # accepted by any sink: only its DDP-SSN matters


def record(association, stream_id, ssn, *, status=SegmentStatus.ACCEPTED, tagged=True, last=False, msn=0,
           tsn=0):
    return {"kind": ReportKind.SEGMENT, "status": status.value, "association": association,
            "stream_id": stream_id, "ddp_ssn": ssn, "tagged": tagged, "last": last, "qn": 0, "msn": msn, "tsn": tsn}


def arrivals(rng: random.Random, firsts: list[int]) -> list[dict]:
    """Per stream a run of DDP-SSNs reordered within the window (as the placement check admits them),
    interleaved across streams, with
    records that are not ACCEPTED mixed in; a Send's L = 1 record every few."""
    per_stream = []
    for row, first in enumerate(firsts):
        ssns = []
        for block in range(0, 40, WINDOW):  # shuffled in blocks: never WINDOW ahead of the lowest missing
            part = [(first + block + i) & 0xFFFF for i in range(WINDOW)]
            rng.shuffle(part)
            ssns += part
        association, stream_id = divmod(row, STREAM_IDS)
        per_stream.append([record(association, stream_id, ssn, tagged=ssn % 3 != 0, last=ssn % 3 == 0,
                                  msn=ssn, tsn=k) for k, ssn in enumerate(ssns)])
    out = []
    while any(per_stream):
        queue = rng.choice([q for q in per_stream if q])
        out.append(queue.pop(0))
        if rng.random() < 0.2:
            association, stream_id = rng.randrange(ASSOCIATIONS), rng.randrange(STREAM_IDS)
            out.append(record(association, stream_id, rng.randrange(1 << 16),
                              status=rng.choice([SegmentStatus.DUPLICATE, SegmentStatus.DROPPED]), tsn=9999))
    return out


def sinks_for(firsts: list[int]) -> list[DdpSink]:
    return [DdpSink(pd=ProtectionDomain(1), memory_table=MemoryTable(), host_memory=SparseMemory(), stream_id=row,
                    first_sequence=first) for row, first in enumerate(firsts)]


def with_sequence_flags(records: list[dict], firsts: list[int]) -> list[dict]:
    """The records as the report engine hands them on: each with where its DDP-SSN stood when the
    placement check decided it (in order: the lowest not yet received; releases: the next one too)."""
    sinks, out = sinks_for(firsts), []
    for r in records:
        flags = {"in_order": 0, "releases": 0}
        if r["status"] == SegmentStatus.ACCEPTED.value:
            sink = sinks[r["association"] * STREAM_IDS + r["stream_id"]]
            in_order = r["ddp_ssn"] == sink.delivery_point
            flags = {"in_order": in_order, "releases": in_order and sink.sequence_seen(r["ddp_ssn"] + 1)}
            sink.receive(EMPTY_SEGMENT, r["ddp_ssn"])
        out.append({"record": r, "sequence": flags})
    return out


def expected_order(records: list[dict], firsts: list[int]) -> list[dict]:
    """What leaves: each record in turn, ACCEPTED ones when a DdpSink per stream delivers them."""
    sinks = sinks_for(firsts)
    waiting = [{} for _ in firsts]
    out = []
    for r in records:
        if r["status"] != SegmentStatus.ACCEPTED.value:
            out.append(r)
            continue
        row = r["association"] * STREAM_IDS + r["stream_id"]
        before = sinks[row].delivery_point
        sinks[row].receive(EMPTY_SEGMENT, r["ddp_ssn"])
        waiting[row][r["ddp_ssn"]] = r
        for k in range((sinks[row].delivery_point - before) & 0xFFFF):
            out.append(waiting[row].pop((before + k) & 0xFFFF))
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_records_leave_in_ddp_ssn_order_per_stream(seed):
    rng = random.Random(seed)
    firsts = [rng.randrange(1 << 16) for _ in range(STREAMS)]
    firsts[0] = 0xFFFC  # wraps
    records = arrivals(rng, firsts)
    dut = DeliveryOrder(associations=ASSOCIATIONS, stream_ids=STREAM_IDS, window=WINDOW)
    out, retired, forwarded = [], [], []

    async def host_and_source(ctx):
        for row, first in enumerate(firsts):
            await stream_put(ctx, dut.stream_write_in, {"index": row, "entry": {"valid": 1, "pd": 1},
                                                         "first_ssn": first})
        pace = Pace(0.2, seed=seed)
        for r in with_sequence_flags(records, firsts):
            await stream_put(ctx, dut.records_in, r, pace=pace)

    async def retirements(ctx):
        while True:
            _, _, valid, payload = await ctx.tick().sample(dut.retire.valid, dut.retire.payload)
            if valid:
                retired.append((int(payload.stream), int(payload.msn)))

    async def main(ctx):
        await settle(ctx, lambda: len(out) == len(records), budget=20 * len(records))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(host_and_source, background=True)
    sim.add_testbench(collector(dut.records_out, out, pace=Pace(0.3, seed=seed + 1)), background=True)
    sim.add_testbench(collector(dut.stream_write_out, forwarded), background=True)
    sim.add_testbench(retirements, background=True)
    sim.add_testbench(main)
    sim.run()

    got = [(int(p.association), int(p.stream_id), int(p.ddp_ssn), int(p.status), int(p.tsn)) for p in out]
    want = [(r["association"], r["stream_id"], r["ddp_ssn"], r["status"], r["tsn"])
            for r in expected_order(records, firsts)]
    k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    assert got == want, "\n" + "\n".join(f"{i}: {got[i] if i < len(got) else None} {want[i] if i < len(want) else None}" for i in range(max(0, k - 4), k + 6))
    assert [int(w.index) for w in forwarded] == list(range(STREAMS))
    assert retired == [(a * STREAM_IDS + s, ssn) for a, s, ssn, status, _ in want
                       if status == SegmentStatus.ACCEPTED.value and ssn % 3 == 0]


@pytest.mark.parametrize("pace", [0.0, 0.5])
def test_a_host_write_drops_the_stream_s_stored_records(pace):
    """RFC 5041 7.1: a stream in error never delivers the records it held; rewriting its row (re-arming it)
    drops them, counted in ``discarded``, and delivery restarts at the row's ``first_ssn``; another
    stream's stored record stays held. The host writes once the records have reached the block (the
    module's contract: a write overtakes records still in its input queue)."""
    dut = DeliveryOrder(associations=ASSOCIATIONS, stream_ids=STREAM_IDS, window=WINDOW)
    out, counters = [], {}
    held_back = [record(0, 0, 2, tsn=1), record(0, 0, 3, tsn=2), record(0, 1, 6, tsn=3)]  # 1 and 5 missing
    after = [record(0, 0, 10, tsn=4), record(0, 0, 11, tsn=5), record(0, 1, 5, tsn=6)]

    async def host_and_source(ctx):
        for row, first in enumerate([1, 5, 0, 0]):
            await stream_put(ctx, dut.stream_write_in, {"index": row, "entry": {"valid": 1, "pd": 1},
                                                         "first_ssn": first})
        for r in held_back:
            await stream_put(ctx, dut.records_in, {"record": r, "sequence": {"in_order": 0, "releases": 0}},
                             pace=Pace(pace, seed=3))
        while ctx.get(dut.waiting) < len(held_back):
            await ctx.tick()
        await stream_put(ctx, dut.stream_write_in, {"index": 0, "entry": {"valid": 1, "pd": 1}, "first_ssn": 10})
        flags = [{"in_order": 1, "releases": 0}, {"in_order": 1, "releases": 0}, {"in_order": 1, "releases": 1}]
        for r, sequence in zip(after, flags):
            await stream_put(ctx, dut.records_in, {"record": r, "sequence": sequence}, pace=Pace(pace, seed=4))

    async def main(ctx):
        await settle(ctx, lambda: len(out) == 4, budget=400)
        await ctx.tick().repeat(20)
        counters.update(waiting=ctx.get(dut.waiting), discarded=ctx.get(dut.discarded))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(host_and_source, background=True)
    sim.add_testbench(collector(dut.records_out, out), background=True)
    sim.add_testbench(collector(dut.stream_write_out, []), background=True)
    sim.add_testbench(main)
    sim.run()
    assert [int(p.tsn) for p in out] == [4, 5, 6, 3]  # stream (0, 0)'s stored 2 and 3 never leave
    assert counters == {"waiting": 0, "discarded": 2}

"""hdl.rx.report_engine.ReportEngine in Amaranth's simulator: a bad write response turns a placed segment's
record into an error and names its stream for latching; segment records and chunk errors alternate."""

import pytest
from amaranth.sim import Simulator

from abi.rx import ChunkError, ReportKind, SegmentStatus
from hdl.rx.report_engine import ReportEngine
from hdl.stream.simulation import Pace, collector, settle, stream_put
from model.errors import DdpError


def verdict(tag: int, stream_id: int) -> dict:
    return {"tag": tag, "association": 1, "stream_id": stream_id, "tsn": 100 + tag, "tagged": 1,
            "status": SegmentStatus.ACCEPTED, "payload_length": 64, "host_address": 0x1000 * tag, "placed": 1}


def simulate(dut, *background, until, budget: int):
    """Run the background testbenches until ``until()`` holds, within ``budget`` cycles."""
    async def finish(ctx):
        await settle(ctx, until, budget=budget)

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    for testbench in background:
        simulator.add_testbench(testbench, background=True)
    simulator.add_testbench(finish)
    simulator.run()


def test_bad_write_response_reports_local_catastrophic_and_names_the_stream_rfc5041_7_2():
    dut = ReportEngine(64)
    ordered, faults = [], []

    async def verdicts(ctx):
        for tag, stream_id in ((1, 2), (2, 3), (3, 2)):
            await stream_put(ctx, dut.verdict, verdict(tag, stream_id))

    async def dones(ctx):
        for tag, error in ((1, 0), (2, 1), (3, 0)):
            await stream_put(ctx, dut.done, {"tag": tag, "error": error})

    simulate(dut, verdicts, dones, collector(dut.report, ordered), collector(dut.stream_fault, faults),
             until=lambda: len(ordered) == 3, budget=200)
    reports = [r.record for r in ordered]
    layer, etype, code = DdpError.LOCAL_CATASTROPHIC.number
    summary = [(int(r.tsn), SegmentStatus(r.status), int(r.dma_error), int(r.error.valid),
                (int(r.error.layer), int(r.error.etype), int(r.error.code))) for r in reports]
    assert summary == [(101, SegmentStatus.ACCEPTED, 0, 0, (0, 0, 0)),
                       (102, SegmentStatus.ERROR, 1, 1, (int(layer), etype, code)),
                       (103, SegmentStatus.ACCEPTED, 0, 0, (0, 0, 0))]
    assert [(int(f.association), int(f.stream_id)) for f in faults] == [(1, 3)]
    assert int(reports[1].host_address) == 0x2000


@pytest.mark.parametrize("seed", range(3))
def test_segments_and_chunk_errors_alternate_while_both_wait(seed):
    """Module docs: the two kinds alternate when both wait, each kind in its own order, whatever the
    consumer's back-pressure."""
    dut = ReportEngine(64)
    ordered = []

    async def verdicts(ctx):
        for tag in range(6):
            await stream_put(ctx, dut.verdict, {**verdict(tag, 1), "placed": 0, "payload_length": 0})

    async def errors(ctx):
        for tsn in range(6):
            await stream_put(ctx, dut.chunk_errors, {"association": 1, "tsn": 500 + tsn, "kind": ChunkError.ORDERED})

    simulate(dut, verdicts, errors, collector(dut.report, ordered, pace=Pace(0.5, seed=seed)),
             until=lambda: len(ordered) == 12, budget=400)
    kinds = [ReportKind(int(r.record.kind)) for r in ordered]
    assert all(a != b for a, b in zip(kinds, kinds[1:])), kinds
    assert [int(r.record.tsn) for r in ordered if r.record.kind == ReportKind.SEGMENT] == [100 + t for t in range(6)]
    assert [int(r.record.tsn) for r in ordered if r.record.kind == ReportKind.CHUNK_ERROR] == [500 + t for t in range(6)]

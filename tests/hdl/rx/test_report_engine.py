"""hdl.rx.report_engine.ReportEngine in Amaranth's simulator: a bad write response turns a placed segment's
record into an error and names its stream for latching."""

from amaranth.sim import Simulator

from abi.rx import SegmentStatus
from hdl.rx.report_engine import ReportEngine
from hdl.stream.simulation import collector, settle, stream_put
from model.errors import DdpError


def verdict(tag: int, stream_id: int) -> dict:
    return {"tag": tag, "association": 1, "stream_id": stream_id, "tsn": 100 + tag, "tagged": 1,
            "status": SegmentStatus.ACCEPTED, "payload_length": 64, "host_address": 0x1000 * tag, "placed": 1}


def test_bad_write_response_reports_local_catastrophic_and_names_the_stream_rfc5041_7_2():
    dut = ReportEngine(64)
    ordered, faults = [], []

    async def verdicts(ctx):
        for tag, stream_id in ((1, 2), (2, 3), (3, 2)):
            await stream_put(ctx, dut.verdict, verdict(tag, stream_id))

    async def dones(ctx):
        for tag, error in ((1, 0), (2, 1), (3, 0)):
            await stream_put(ctx, dut.done, {"tag": tag, "error": error})

    async def finish(ctx):
        await settle(ctx, lambda: len(ordered) == 3, budget=200)

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    simulator.add_testbench(verdicts, background=True)
    simulator.add_testbench(dones, background=True)
    simulator.add_testbench(collector(dut.report, ordered), background=True)
    simulator.add_testbench(collector(dut.stream_fault, faults), background=True)
    simulator.add_testbench(finish)
    simulator.run()
    reports = [r.record for r in ordered]
    layer, etype, code = DdpError.LOCAL_CATASTROPHIC.number
    summary = [(int(r.tsn), SegmentStatus(r.status), int(r.dma_error), int(r.error.valid),
                (int(r.error.layer), int(r.error.etype), int(r.error.code))) for r in reports]
    assert summary == [(101, SegmentStatus.ACCEPTED, 0, 0, (0, 0, 0)),
                       (102, SegmentStatus.ERROR, 1, 1, (int(layer), etype, code)),
                       (103, SegmentStatus.ACCEPTED, 0, 0, (0, 0, 0))]
    assert [(int(f.association), int(f.stream_id)) for f in faults] == [(1, 3)]
    assert int(reports[1].host_address) == 0x2000

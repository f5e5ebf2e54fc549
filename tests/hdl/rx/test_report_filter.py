"""hdl.rx.report_filter.ReportFilter in Amaranth's simulator: per message it leaves out exactly the records
abi.rx.report_withheld names and counts them, in order, one record a cycle; with segment_reports every record."""

import random

import pytest
from amaranth.sim import Simulator

from abi.rx import ReportKind, SegmentStatus
from hdl.rx.report_filter import ReportFilter
from hdl.stream.simulation import Pace, collector, settle, stream_put


def records(rng: random.Random, count: int) -> list[dict]:
    """Records of every kind, status, L, tag and queue the filter tells apart (QN 3 is no queue of RDMAP's)."""
    return [{"kind": rng.choice(list(ReportKind)), "status": rng.choice(list(SegmentStatus)).value,
             "tagged": rng.randrange(2), "last": rng.randrange(2), "qn": rng.choice((0, 1, 2, 3, 1 << 20 | 1)),
             "tsn": tsn} for tsn in range(count)]


def leaves(record: dict) -> bool:
    """RFC 5041 5.4, RFC 5040 4.2: a message's last segment, a segment of the Read Request or Terminate queue,
    and every record but an accepted segment's."""
    return (record["kind"] != ReportKind.SEGMENT or record["status"] != SegmentStatus.ACCEPTED.value
            or record["last"] == 1 or (not record["tagged"] and record["qn"] in (1, 2)))


@pytest.mark.parametrize("segment_reports, seed", [(0, 1), (0, 2), (1, 3)])
def test_records_left_out_per_message_and_counted(segment_reports, seed):
    rng = random.Random(seed)
    sent = records(rng, 200)
    dut = ReportFilter(64)
    out = []

    async def source(ctx):
        ctx.set(dut.segment_reports, segment_reports)
        for record in sent:
            await stream_put(ctx, dut.records_in, record)

    expected = [r["tsn"] for r in sent if segment_reports or leaves(r)]

    async def finish(ctx):
        await settle(ctx, lambda: len(out) == len(expected), budget=400)
        assert ctx.get(dut.withheld) == len(sent) - len(expected)

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    for testbench in (source, collector(dut.records_out, out, pace=Pace(0.3, seed=seed))):
        simulator.add_testbench(testbench, background=True)
    simulator.add_testbench(finish)
    simulator.run()
    assert [int(r.tsn) for r in out] == expected
    assert 0 < len(expected) < len(sent) or segment_reports


def test_one_record_a_cycle():
    """The consumer always ready: 100 records, half of them left out, pass in 100 cycles and the latency."""
    dut = ReportFilter(64)
    sent = [{"kind": ReportKind.SEGMENT, "status": SegmentStatus.ACCEPTED.value, "tagged": 1, "last": tsn % 2,
             "tsn": tsn} for tsn in range(100)]
    out, cycles = [], []

    async def source(ctx):
        for record in sent:
            await stream_put(ctx, dut.records_in, record)

    async def clock(ctx):
        async for _ in ctx.tick():
            cycles.append(1)

    async def finish(ctx):
        await settle(ctx, lambda: len(out) == 50, budget=400, tail=1)

    simulator = Simulator(dut)
    simulator.add_clock(1e-8)
    for testbench in (source, collector(dut.records_out, out), clock):
        simulator.add_testbench(testbench, background=True)
    simulator.add_testbench(finish)
    simulator.run()
    assert [int(r.tsn) for r in out] == list(range(1, 100, 2))
    assert len(cycles) <= 100 + 4, len(cycles)

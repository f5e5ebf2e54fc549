"""cocotb module behind `rnic bench rx`: throughput and latency of the RTL receive engine.

For each payload size, back-to-back frames each carrying one RDMA Write
segment of that size (tagged, RFC 5041 4.2) to one registered region are
sent with no idle cycle; the RAM and both output streams are always ready.
Measured, in clock cycles:

* wire bytes accepted per cycle while the frames went in (first accepted
  beat to last), as a fraction of W; beats accepted per cycle; the cycles
  the engine refused a beat the source offered (stalls) and the cycles the
  source offered nothing (source idle);
* per frame, from its last beat accepted to its segment's first W beat on
  the memory bus, and to its report record.

Parameters (:func:`sim.runner.test_parameters`): ``width_bytes``,
``payloads`` (list), ``frames`` (per payload size), ``output`` (JSON path).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from abi.rx import register_map
from sim.commands.bench_rx import CONFIG, MEMORY_BYTES, SHAPE, write_frames
from sim.runner import test_parameters
from sim.tb.rx_engine_tb import RxEngineTB

class Probe:
    """Cycle-stamps input beats, W beats and report records."""

    def __init__(self, dut) -> None:
        self.dut = dut
        self.cycle = 0
        self.input_beats: list[tuple[int, int, bool]] = []  # (cycle, bytes, last)
        self.stalls = 0
        self.w_beats: list[int] = []
        self.reports: list[int] = []
        cocotb.start_soon(self._run())

    async def _run(self) -> None:
        dut = self.dut
        while True:
            await RisingEdge(dut.clk)
            self.cycle += 1
            if dut.s_axis_tvalid.value:
                if dut.s_axis_tready.value:
                    keep = int(dut.s_axis_tkeep.value)
                    self.input_beats.append((self.cycle, bin(keep).count("1"), bool(dut.s_axis_tlast.value)))
                else:
                    self.stalls += 1
            if dut.m_axi_wvalid.value and dut.m_axi_wready.value:
                self.w_beats.append(self.cycle)
            if dut.m_axis_report_tvalid.value and dut.m_axis_report_tready.value:
                self.reports.append(self.cycle)

    def reset(self) -> None:
        self.input_beats, self.stalls, self.w_beats, self.reports = [], 0, [], []


@cocotb.test()
async def bench(dut) -> None:
    parameters = test_parameters()
    width = int(parameters["width_bytes"])
    tb = RxEngineTB(dut, width, register_map(SHAPE.associations, SHAPE.stream_ids, SHAPE.regions), SHAPE,
                    memory_bytes=MEMORY_BYTES)
    await tb.reset()
    await tb.configure(CONFIG)
    probe = Probe(dut)
    rows, tsn = [], 1
    for payload in parameters["payloads"]:
        count = int(parameters["frames"])
        frames, addresses = write_frames(payload, count, tsn)
        tsn += count
        probe.reset()
        await tb.send_frames(frames)
        await tb.drain()
        ends = [cycle for cycle, _, last in probe.input_beats if last]
        wire_bytes = sum(n for _, n, _ in probe.input_beats)
        beats = len(probe.input_beats)
        span = probe.input_beats[-1][0] - probe.input_beats[0][0] + 1
        # Each segment's W beats, in order: its bytes from its address's lane on.
        first_w, index = [], 0
        for address in addresses:
            first_w.append(probe.w_beats[index])
            index += (address % width + payload + width - 1) // width
        assert index == len(probe.w_beats), f"{len(probe.w_beats)} W beats, expected {index}"
        assert len(probe.reports) == count == len(ends), "a segment was not reported"
        to_write = [w - e for w, e in zip(first_w, ends)]
        to_report = [r - e for r, e in zip(probe.reports, ends)]
        rows.append({
            "payload": payload, "frame_bytes": len(frames[0]), "frames": count,
            "fraction": wire_bytes / span / width, "beats_per_cycle": beats / span, "stalls": probe.stalls,
            "source_idle": span - beats - probe.stalls,
            "write_latency": statistics.median(to_write), "report_latency": statistics.median(to_report),
        })
        await ClockCycles(dut.clk, 10)
    results = await tb.results()
    assert results.counters["segments_accepted"] == tsn - 1, results.counters
    Path(parameters["output"]).write_text(json.dumps(rows))

"""cocotb module behind `rnic replay`: a capture through the RTL receive engine.

Parameters (:func:`sim.runner.test_parameters`): ``width_bytes``, ``capture``
and ``config`` (file paths), ``output`` (where the JSON results go), ``gap``
(idle cycles on ``s_axis`` before every frame but the first) and
``memory_stall`` (the probability that the memory holds AW, W or B not ready
on a cycle, in short runs), optionally ``budget_cycles`` (else
:func:`budget_cycles` of the capture). The engine is configured from the config file
through its register map, every frame of the capture is sent, and once the
engine has consumed every frame and drained every output
(:meth:`~sim.tb.rx_engine_tb.RxEngineTB.drain`) its outputs (exception
packets, report records, ack records, counters, every byte the bus wrote with the RAM's
final contents, and the cycles from the first frame to the drained engine)
are written for `sim.commands.replay`. An engine that does not drain within
its budget gives ``{"failure": message}`` instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import cocotb

from abi.rx import register_map
from model.engine.config import ReceiveConfig
from model.net.pcap import read_capture
from sim.commands.replay import RTL_MEMORY_BYTES, RTL_SHAPE, written_runs
from sim.runner import test_parameters
from sim.tb.rx_engine_tb import EngineNotDrained, RxEngineTB

# The budget allows far more than the engine needs: it takes a beat per cycle at every stage
# and a frame's decision and parse take under 100 cycles.
BUDGET_FIXED_CYCLES = 10_000
BUDGET_CYCLES_PER_FRAME = 500
BUDGET_CYCLES_PER_BEAT = 8


def budget_cycles(frame_lengths: list[int], width_bytes: int, gap: int, memory_stall: float) -> int:
    """Cycles the engine is given to consume the capture and drain: in proportion to its frames and
    beats, stretched by the memory's stalls, plus the gaps between frames."""
    beats = sum(-(-length // width_bytes) for length in frame_lengths)
    work = (BUDGET_FIXED_CYCLES + BUDGET_CYCLES_PER_FRAME * len(frame_lengths)
            + BUDGET_CYCLES_PER_BEAT * beats)
    return int(work / (1.0 - memory_stall)) + gap * len(frame_lengths)


@cocotb.test()
async def replay(dut) -> None:
    parameters = test_parameters()
    width = int(parameters["width_bytes"])
    gap, memory_stall = int(parameters.get("gap", 0)), float(parameters.get("memory_stall", 0.0))
    tb = RxEngineTB(dut, width, register_map(RTL_SHAPE.associations, RTL_SHAPE.stream_ids, RTL_SHAPE.regions),
                    RTL_SHAPE, memory_bytes=RTL_MEMORY_BYTES)
    await tb.reset()
    await tb.configure(ReceiveConfig.from_json(Path(parameters["config"]).read_text()))
    frames = [record.data for record in read_capture(Path(parameters["capture"]).read_bytes())]
    budget = parameters.get("budget_cycles") or budget_cycles([len(f) for f in frames], width, gap, memory_stall)
    tb.set_memory_stall(memory_stall)
    start = tb.cycle
    cocotb.start_soon(tb.send_frames(frames, [0] + [gap] * (len(frames) - 1)))
    output = Path(parameters["output"])
    try:
        await tb.drain(budget)
    except EngineNotDrained as error:
        output.write_text(json.dumps({"failure": str(error)}))
        return
    drained = tb.cycle
    results = await tb.results()
    fields = lambda record: {k: v for k, v in record.fields.items()}  # noqa: E731
    document = {
        "segments": [fields(r) for r in results.segments],
        "chunk_errors": [fields(r) for r in results.chunk_errors],
        "acks": [fields(r) for r in results.acks],
        "exceptions": [{"source": p.source, "reason": p.reason, "association": p.association,
                        "data": p.data.hex()} for p in results.frame_exceptions + results.chunk_exceptions],
        "counters": results.counters,
        "writes": {str(address): bytes(data).hex() for address, data in written_runs(tb.ram, results.written).items()},
        "cycles": drained - start,
    }
    output.write_text(json.dumps(document))

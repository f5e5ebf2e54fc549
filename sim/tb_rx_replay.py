"""cocotb module behind `rnic replay`: a capture through the RTL receive engine.

Parameters (:func:`sim.runner.test_parameters`): ``width_bytes``, ``capture``
and ``config`` (file paths), ``output`` (where the JSON results go). The
engine is configured from the config file through its register map, every
frame of the capture is sent back to back, and once the engine is idle its
outputs (exception packets, report records, counters, every byte the bus
wrote with the RAM's final contents) are written for `sim.replay`.
"""

from __future__ import annotations

import json
from pathlib import Path

import cocotb

from hdl.rx_engine import register_map
from model.pcap import read_capture
from model.rx_config import ReceiveConfig
from sim.runner import test_parameters
from sim.rx_tb import RxEngineTB
from sim.rx_traffic import EngineShape

SHAPE = EngineShape()
MEMORY_BYTES = 1 << 24


def _merge(runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for start, end in sorted((a, a + n) for a, n in runs if n):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end - start) for start, end in merged]


@cocotb.test()
async def replay(dut) -> None:
    parameters = test_parameters()
    tb = RxEngineTB(dut, int(parameters["width_bytes"]), register_map(SHAPE.associations, SHAPE.stream_ids,
                                                                      SHAPE.regions), SHAPE,
                    memory_bytes=MEMORY_BYTES)
    await tb.reset()
    await tb.configure(ReceiveConfig.from_json(Path(parameters["config"]).read_text()))
    await tb.send_frames(record.data for record in read_capture(Path(parameters["capture"]).read_bytes()))
    await tb.drain()
    results = await tb.results()
    fields = lambda record: {k: v for k, v in record.fields.items()}  # noqa: E731
    document = {
        "segments": [fields(r) for r in results.segments],
        "chunk_errors": [fields(r) for r in results.chunk_errors],
        "exceptions": [{"source": p.source, "reason": p.reason, "association": p.association,
                        "data": p.data.hex()} for p in results.frame_exceptions + results.chunk_exceptions],
        "counters": results.counters,
        "writes": {str(address): tb.ram.read(address, length).hex()
                   for address, length in _merge(results.written)},
    }
    Path(parameters["output"]).write_text(json.dumps(document))

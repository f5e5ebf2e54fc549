"""cocotb module behind `rnic replay`: a capture through the RTL receive engine.

Parameters (:func:`sim.runner.test_parameters`): ``width_bytes``, ``capture``
and ``config`` (file paths), ``output`` (where the JSON results go). The
engine is configured from the config file through its register map, every
frame of the capture is sent back to back, and once the engine is idle its
outputs (exception packets, report records, counters, every byte the bus
wrote with the RAM's final contents) are written for `sim.commands.replay`.
"""

from __future__ import annotations

import json
from pathlib import Path

import cocotb

from hdl.abi import register_map
from model.engine.config import ReceiveConfig
from model.net.pcap import read_capture
from sim.commands.replay import written_runs
from sim.runner import test_parameters
from sim.tb.rx_engine_tb import RxEngineTB
from sim.traffic.rx import EngineShape

SHAPE = EngineShape()
MEMORY_BYTES = 1 << 24


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
        "writes": {str(address): bytes(data).hex() for address, data in written_runs(tb.ram, results.written).items()},
    }
    Path(parameters["output"]).write_text(json.dumps(document))

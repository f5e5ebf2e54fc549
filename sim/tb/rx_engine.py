"""cocotb tests of ``hdl.rx.engine.RxEngine`` against the golden model (run by tests/sim/test_rx_engine_cocotb.py).

Each test configures the engine through its AXI4-Lite register map, sends
frames on ``s_axis`` and compares everything the engine did (placed bytes
over the whole RAM, report records, exception packets, counters) with
``model.engine.rx.ReceiveEngineModel`` fed the same frames. Each test needs a
fresh engine (posted buffers cannot be revoked): the pytest side runs one
test per simulation. Parameters (:func:`sim.runner.test_parameters`):
``width_bytes``, ``seed``, ``messages``, ``max_payload``, ``backpressure``, ``part``.
"""

from __future__ import annotations

import random

import cocotb

from hdl.abi import register_map
from model.ddp.memory import SparseMemory
from model.engine.config import ReceiveConfig
from model.engine.rx import ReceiveEngineModel
from model.net.pcap import read_capture
from sim.runner import test_parameters
from sim.samples import SAMPLE_CAPTURE, SAMPLE_CONFIG
from sim.tb.rx_engine_tb import CANARY, RxEngineTB
from sim.traffic.rx import (
    Catalogue,
    EngineShape,
    ValidTraffic,
    case_frames,
    catalogue_config,
    catalogue_parts,
    random_config,
)

SHAPE = EngineShape()
MEMORY_BYTES = 1 << 22


async def _start(dut) -> tuple[RxEngineTB, dict]:
    parameters = test_parameters()
    tb = RxEngineTB(dut, int(parameters["width_bytes"]),
                    register_map(SHAPE.associations, SHAPE.stream_ids, SHAPE.regions), SHAPE,
                    memory_bytes=MEMORY_BYTES, seed=int(parameters.get("seed", 1)))
    await tb.reset()
    return tb, parameters


async def _run_and_compare(tb: RxEngineTB, config: ReceiveConfig, frames: list[bytes],
                           gaps: list[int] | None = None) -> None:
    model = ReceiveEngineModel(config, SparseMemory(CANARY))
    await tb.configure(config)
    await tb.send_frames(frames, gaps)
    await tb.drain()
    for frame in frames:
        model.receive(frame, 0.0)
    results = model.next_events()
    problems = await tb.compare_with_model(model, results)
    assert not problems, f"{len(problems)} mismatches with the model:\n" + "\n".join(problems)


@cocotb.test()
async def sample_capture(dut) -> None:
    """The demo capture (every RDMAP message, session control, SCTP over UDP) with its configuration."""
    tb, _ = await _start(dut)
    config = ReceiveConfig.from_json(SAMPLE_CONFIG.read_text())
    frames = [record.data for record in read_capture(SAMPLE_CAPTURE.read_bytes())]
    await _run_and_compare(tb, config, frames)


@cocotb.test()
async def random_valid_traffic(dut) -> None:
    """Random valid traffic (every opcode, multi-segment, bundled, back to back), with random back-pressure
    on the RAM and both output streams when the ``backpressure`` parameter is non-zero."""
    tb, parameters = await _start(dut)
    rng = random.Random(int(parameters.get("seed", 1)))
    max_payload = int(parameters["max_payload"])
    config = random_config(rng, SHAPE, MEMORY_BYTES, max_payload)
    frames = ValidTraffic(rng, config, max_payload=max_payload).frames(int(parameters["messages"]))
    back_to_back = parameters.get("profile") == "small"
    gaps = None if back_to_back else [0 if rng.random() < 0.7 else rng.randint(1, 20) for _ in frames]
    tb.set_backpressure(float(parameters["backpressure"]))
    await _run_and_compare(tb, config, frames, gaps)


@cocotb.test()
async def malformed_catalogue(dut) -> None:
    """One part of the malformed catalogue; every latching error on a DDP stream of its own (RFC 5041 7.1)."""
    tb, parameters = await _start(dut)
    config = catalogue_config(SHAPE)
    catalogue = Catalogue(config, SHAPE)
    part = catalogue_parts(SHAPE)[int(parameters["part"])]
    frames = [frame for case, association, stream_id in part
              for frame in case_frames(catalogue, case, association, stream_id)]
    tb.set_backpressure(0.2)
    await _run_and_compare(tb, config, frames)

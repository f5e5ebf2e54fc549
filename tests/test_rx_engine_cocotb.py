"""hdl.rx_engine.RxEngine under Verilator, differential against the golden model (sim/tb_rx_engine.py).

Each cocotb test runs in a simulation of its own (the engine's posted
buffers outlive a reset); the Verilator build of a width is shared.
"""

import pytest

from hdl.rx_engine import RxEngine
from sim.runner import default_build_root, run_cocotb
from sim.rx_traffic import EngineShape, catalogue_parts

BUILD_ROOT = default_build_root() / "rx_engine"
SHAPE = EngineShape()
WIDTHS = [8, 64]
#: Random traffic per width: messages and the largest message (cycles grow with bytes / W).
TRAFFIC = {8: (60, 2048), 16: (80, 4096), 32: (100, 9000), 64: (120, 9000)}
CASES = [("sample_capture", {})] + [("random_valid_traffic", {})] + \
    [("malformed_catalogue", {"part": part}) for part in range(len(catalogue_parts(SHAPE)))]


def _run(width_bytes: int, testcase: str, extra: dict) -> None:
    messages, max_payload = TRAFFIC[width_bytes]
    result = run_cocotb(
        RxEngine(width_bytes, associations=SHAPE.associations, stream_ids=SHAPE.stream_ids, regions=SHAPE.regions,
                 buffers_per_queue=SHAPE.buffers_per_queue),
        test_module="sim.tb_rx_engine",
        toplevel=f"rx_engine_w{width_bytes}",
        build_root=BUILD_ROOT,
        testcase=testcase,
        parameters={"width_bytes": width_bytes, "seed": width_bytes, "messages": messages,
                    "max_payload": max_payload, **extra},
    )
    assert result.tests == 1


@pytest.mark.cocotb
@pytest.mark.parametrize("width_bytes", WIDTHS)
@pytest.mark.parametrize("testcase, extra", CASES, ids=[f"{name}{extra.get('part', '')}" for name, extra in CASES])
def test_rx_engine_cocotb(width_bytes, testcase, extra):
    _run(width_bytes, testcase, extra)

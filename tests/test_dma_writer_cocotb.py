"""hdl.dma_writer.DmaWriter under Verilator against cocotbext-axi's AxiRamWrite (sim/tb_dma_writer.py)."""

import pytest

from hdl.dma_writer import DmaWriter
from sim.runner import default_build_root, run_cocotb

# sim.runner shares compiled Verilator runtime objects between designs, and
# among them verilator.o, cocotb's main, which is compiled against the design's
# Vtop.h (whose layout depends on the number of top-level ports): reused for a
# design with a different port count it corrupts the heap (segfault or
# "free(): invalid pointer"). DmaWriter has the same ports at every width, so
# its builds get a build root of their own.
BUILD_ROOT = default_build_root() / "dma_writer"


@pytest.mark.cocotb
@pytest.mark.parametrize("width_bytes", [8, 64])
def test_dma_writer_cocotb(width_bytes):
    dut = DmaWriter(width_bytes)
    result = run_cocotb(
        dut,
        test_module="sim.tb_dma_writer",
        toplevel=f"dma_writer_w{width_bytes}",
        build_root=BUILD_ROOT,
        parameters={"width_bytes": width_bytes, "max_burst_beats": dut.max_burst_beats,
                    "latency": dut.latency, "commands": 60 if width_bytes == 8 else 100, "seed": width_bytes},
    )
    assert result.tests == 3

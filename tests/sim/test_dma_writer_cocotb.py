"""hdl.rx.dma_writer.DmaWriter under Verilator against cocotbext-axi's AxiRamWrite (sim/tb/dma_writer.py)."""

import pytest

from hdl.rx.dma_writer import DmaWriter
from sim.runner import run_cocotb


@pytest.mark.cocotb
@pytest.mark.parametrize("width_bytes", [8, 64])
def test_dma_writer_cocotb(width_bytes):
    dut = DmaWriter(width_bytes)
    result = run_cocotb(
        dut,
        test_module="sim.tb.dma_writer",
        toplevel=f"dma_writer_w{width_bytes}",
        parameters={"width_bytes": width_bytes, "max_burst_beats": dut.max_burst_beats,
                    "latency": dut.latency, "commands": 60 if width_bytes == 8 else 100, "seed": width_bytes},
    )
    assert result.tests == 3

"""hdl.stream.crc32c.Crc32c under Verilator: the cocotb testbench sim/tb/crc32c.py at every width."""

import pytest

from hdl.stream.crc32c import Crc32c
from hdl.stream.packet import SUPPORTED_WIDTHS
from sim.runner import run_cocotb


@pytest.mark.cocotb
@pytest.mark.parametrize("width_bytes", SUPPORTED_WIDTHS)
def test_crc32c_cocotb(width_bytes):
    dut = Crc32c(width_bytes)
    result = run_cocotb(
        dut,
        test_module="sim.tb.crc32c",
        toplevel=f"crc32c_w{width_bytes}",
        parameters={"width_bytes": width_bytes, "latency": dut.latency, "packets": 30, "seed": width_bytes},
    )
    assert result.tests == 4

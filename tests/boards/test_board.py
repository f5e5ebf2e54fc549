"""The board's testable part (boards/ecpix5_top.py BoardCore: MAC, RNIC core, host memory, control link)
under Verilator, from GMII bytes and UART bits, driven by the host's link code (sim/tb/board.py).

One run: the engine is programmed over the link, DDP frames from the model's encoders arrive on GMII
with preamble and FCS, the reports, acks and the exception come back over the link and match the
golden model, as does the host memory read back; a raw frame sent over the link leaves on GMII with
zlib's CRC-32 as its FCS; an RDMA Write pushed over the link leaves on GMII as the transmit engine's
model sends it, and completes once acknowledged. Bytes are dropped and flipped both ways on the UART
all along.
"""

import pytest

from boards.ecpix5_top import HOST_MEMORY_BYTES
from sim.board_server import BIT_CLOCKS, run_board


@pytest.mark.cocotb
@pytest.mark.slow   # the board's Verilator build alone is minutes: more than the default suite can spend
def test_board_over_the_control_link():
    result = run_board("sim.tb.board", {
        "bit_clocks": BIT_CLOCKS, "memory_bytes": HOST_MEMORY_BYTES, "seed": 5,
        "request_faults": [150, 433, 901, 1302], "response_faults": [120, 377, 702]})
    assert result.tests == 1

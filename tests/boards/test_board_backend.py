"""The driver's `board` backend on the gateware: user programs against ``BoardCore`` under Verilator.

``sim.board_server.simulated_board`` serves the board: its control link on a pseudo-terminal, which the
backend opens with pyserial as it opens /dev/ttyUSB1, its Ethernet on a TCP socket (``tcp:HOST:PORT``),
which host B (a software RNIC) reaches through the impaired link. The example's server is the board: the
Send and the RDMA Write land in the board's memory through its receive engine, the RDMA Read is answered
by its transmit engine, and the completions and the bytes the example prints must be the program's.
The end-to-end program (sim/e2e_program.py) then runs every RDMAP operation both ways, at 0 and 1 bytes
(the board's memory is slow to fill over the link), and the teardown, over a link that loses, duplicates
and reorders frames.
"""

import pytest

from driver import LinkConfig, open_fabric
from scripts.driver_example import example
from sim.e2e_program import end_to_end_checked
from sim.board_server import simulated_board
from tests.driver.test_board_backend import EXAMPLE_LINES

#: The simulated board runs some 40 us of its time per second: the fabric's clock runs 20 times slower than
#: the wall clock, so that a request over the link (0.3 s) is short beside SCTP's timers (RTO.Initial 3 s).
TIME_SCALE = 0.05


def run_on_simulated_board(workdir, program, link: LinkConfig, **options) -> dict:
    """``program(fabric)`` on the board backend against the simulated board; the board's MAC counters after it."""
    with simulated_board(workdir) as board:
        host, port = board.ethernet
        fabric = open_fabric("board", serial=board.serial, ethernet=f"tcp:{host}:{port}", baud=400, latency=2.0,
                             time_scale=TIME_SCALE, link=link, **options)
        try:
            fabric.backend.run(lambda: program(fabric))
            return fabric.backend.board.control.mac_counters()
        finally:
            fabric.backend.close()


@pytest.mark.cocotb
@pytest.mark.slow   # the board's Verilator build is minutes, and the link's requests take 0.3 s each
def test_the_readme_example_on_the_simulated_board(tmp_path, capsys):
    """With ``engine_sacks=False`` the board's ack records reach the host, which SACKs the peer's DATA (RFC
    4960 6.2); the default, the gateware's acknowledgement unit SACKing and its transmit engine sending
    them, is the next test's (the model board runs both in the default suite)."""
    counters = run_on_simulated_board(tmp_path, example, LinkConfig(duplication=0.05, reordering=0.05, seed=2),
                                      engine_sacks=False)
    out = capsys.readouterr().out
    assert all(line in out for line in EXAMPLE_LINES), out
    assert counters["rx_frames"] > 0 and counters["tx_frames"] > 0
    assert counters["rx_fcs_errors"] == counters["rx_symbol_errors"] == 0


@pytest.mark.cocotb
@pytest.mark.slow
def test_every_operation_both_ways_on_the_simulated_board(tmp_path):
    """RFC 5040 5.1-5.3 both ways at 0 and 1 bytes, then RFC 5043 6.2 and RFC 4960 9.2 teardown (about 5 min)."""
    counters = run_on_simulated_board(tmp_path, lambda fabric: end_to_end_checked(fabric, (0, 1)),
                                      LinkConfig(loss=0.02, duplication=0.05, reordering=0.05, seed=4))
    assert counters["rx_fcs_errors"] == 0 and counters["tx_frames"] > 0

"""tests/driver/test_verbs.py's programs on the gateware (`sim`, Verilator; the slow set): device 0 is host A,
the RNIC top under the simulator, both ways.

Where a call reaches the device: a caller's buffer is mirrored in host A's
memory, the testbench's AXI RAM, which the RTL's receive engine writes over
AXI and its transmit engine reads (`driver.mr`); the requests of a list and the
unsignaled ones go to the RTL's transmit engine, whose every completion the
host takes (and compares with the golden model's) and shows only when
signaled; the PDs go into the RTL's region and stream rows, and its receive
engine refuses another PD's STag; the association's row carries the port
its INIT came to.  Each program makes its own checks; a failed check or an engine that
differs from its model fails the run.
"""

import pytest

from tests.driver.test_verbs import callers_buffers, two_listening_ports, two_protection_domains, unsignaled_sends

PROGRAMS = [callers_buffers, unsignaled_sends, two_protection_domains, two_listening_ports]


@pytest.mark.cocotb
@pytest.mark.slow
@pytest.mark.parametrize("program", PROGRAMS, ids=[program.__name__ for program in PROGRAMS])
def test_verbs_programs_on_the_rtl(program, tmp_path):
    from sim.driver_sim import run_program

    run_program(program, log_file=tmp_path / "sim.log")

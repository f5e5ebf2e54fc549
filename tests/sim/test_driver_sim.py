"""The driver's `sim` backend: the driver's example program and the driver tests' programs on the RTL.

Each run is a cocotb test on the W = 8 RNIC top (`rnic_driver_top`, the build the top's own
tests use) in which host A's data plane is the RTL both ways: every frame's
records are compared with the receive engine's golden model
(`sim.driver_sim.RtlEngine`), every frame sent and completion with the
transmit engine's (`sim.tb.rnic_transmit.RtlTransmit`); the program's own
checks are those it makes on every backend.  The fast test below drives
`SimFabric` on asyncio with the golden models behind the same interfaces, so
its scheduling is checked without a simulator.
"""

import asyncio
import re

import pytest

from driver import SendWR, SGE, WCStatus, WROpcode
from driver.device import Fabric
from model.ddp.memory import SparseMemory
from model.rnic.offload import ModelEngine
from model.rnic.pair import IPS, MACS
from scripts.driver_example import example, main as example_main
from sim.driver_sim import RTL_SIDE, SimFabric, run_program
from tests.driver.harness import connected
from tests.driver.test_operations import LOSSY_LINK, every_operation_checked, every_operation_lossy

EXAMPLE_LINES = (
    "connected: ESTABLISHED, IRD/ORD 4/4, server said b'server'",
    "wr_id 10 SEND SUCCESS 21 bytes", "wr_id 11 RDMA_WRITE SUCCESS 5 bytes", "wr_id 12 RDMA_READ SUCCESS 22 bytes",
    "wr_id 1 RECV SUCCESS 21 bytes",
    "server received b'hello over iWARP/SCTP', got written b'hello'; client read b\"the server's own bytes\"",
)


class ModelTakingTurns:
    """The golden model behind the asynchronous engine interface: each command yields to the loop first,
    as the RTL's do to the simulator."""

    def __init__(self) -> None:
        self.memory = SparseMemory()
        self.engine = ModelEngine(MACS[RTL_SIDE], IPS[RTL_SIDE], self.memory)
        self.commands = 0

    async def execute(self, command):
        await asyncio.sleep(0)
        self.commands += 1
        return self.engine.execute(command)

    def next_timeout(self):
        return self.engine.next_timeout()

    async def catch_up(self, now):
        assert not self.engine.handle_timeout(now), "the host SACKs: the engine has no SACK row enabled"


def test_the_sim_fabric_drives_the_example_like_the_soft_backend(capsys):
    """Time only moves when nothing is left to do now: the example takes the simulated time it takes on soft
    (4 ms: a handshake and a few round trips of 0.5 ms), every frame of host A through the engine."""
    engine = ModelTakingTurns()
    backend = SimFabric(engine, lock=asyncio.Lock(), engine_sacks=False)
    asyncio.run(example(Fabric(backend)))
    out = capsys.readouterr().out
    for line in EXAMPLE_LINES:
        assert line in out
    assert "4.0 ms of simulated time" in out
    assert backend.frames_through_rtl == engine.engine.model.counters.frames > 0


@pytest.mark.slow   # kept out of the default suite, to hold it under 8 minutes
@pytest.mark.cocotb
def test_example_program_on_the_rtl_engine(tmp_path):
    """docs/driver.md: `scripts/driver_example.py --backend sim` runs the example on the gateware."""
    log = tmp_path / "sim.log"
    run_program(example, log_file=log)
    out = log.read_text()
    for line in EXAMPLE_LINES:
        assert line in out
    assert "frames through the RTL receive engine, every record as its model's" in out
    assert "frames from the RTL transmit engine, each as its model's" in out


async def send_without_a_posted_receive(fabric):
    """RFC 5041 7.2 through the RTL: a Send to the engine's host with no buffer posted is Invalid MSN - no
    buffer available (DDP 0x2/0x02), reported by the engine and sent back by the host's Terminate."""
    server, client = await connected(fabric)
    client.qp.post_send(SendWR(4, WROpcode.SEND, [SGE(client.mr.buf, 10, client.mr.lkey)]))
    ok, failed = await client.cq.wait(2)
    assert (ok.wr_id, ok.status) == (4, WCStatus.SUCCESS)
    assert (failed.wr_id, failed.status, tuple(failed.error)) == (4, WCStatus.REM_OP_ERR, (1, 0x2, 0x02))


@pytest.mark.cocotb
@pytest.mark.slow
@pytest.mark.parametrize("program, link", [(every_operation_checked, None), (every_operation_lossy, LOSSY_LINK),
                                           (send_without_a_posted_receive, None)],
                         ids=["every_operation", "every_operation_lossy", "send_without_a_posted_receive"])
def test_driver_programs_on_the_rtl_engine(program, link, tmp_path):
    run_program(program, link=link, seed=3, log_file=tmp_path / "sim.log")


@pytest.mark.cocotb
@pytest.mark.slow
def test_example_script_with_backend_sim(caplog):
    """The simulator's output reaches the `cocotb` logger."""
    with caplog.at_level("INFO", logger="cocotb"):
        assert example_main(["--backend", "sim"]) == 0
    assert "wr_id 1 RECV SUCCESS 21 bytes" in caplog.text


@pytest.mark.cocotb
@pytest.mark.slow
def test_two_gateware_hosts_over_the_impaired_link(tmp_path):
    """Both hosts on RNIC tops in one simulation (`sim.tb.rnic_pair.RnicPair`): every operation both ways over
    the lossy link, each top's frames in and out compared with its golden models."""
    log = tmp_path / "sim.log"
    run_program(every_operation_lossy, link=LOSSY_LINK, seed=5, log_file=log, gateware_peer=True)
    out = log.read_text()
    for side in "AB":
        assert re.search(rf"host {side}: [1-9]\d* frames through the RTL receive engine, every record as its "
                         rf"model's; [1-9]\d* frames from the RTL transmit engine, each as its model's", out), side

"""The RNIC against usrsctp at the level of a whole host: the end-to-end driver program (every RDMAP operation
both ways, `sim.e2e_program`) between host A and a software host whose SCTP is usrsctp (`sim.usrsctp_host`:
the model's DDP sessions and RDMAP endpoints over an SCTP stack nobody here wrote).

Host A is the software RNIC (`soft`: the model's SCTP meets usrsctp), the host over the engines' golden models
with its SACKs and its transport in the engines (`engine`), and the RTL itself (`sim`, slow): the receive
engine SACKs usrsctp's DATA (RFC 4960 6.2) and hands usrsctp's SACKs to the transport unit (6.2.1), which
windows, times and retransmits host A's DATA (6.1, 6.3, 7.2); usrsctp does the same its own way. Over a
link that loses, duplicates and reorders 2 % of the frames, both sides retransmit, and every byte, completion
and the graceful close come out as the RFCs say (the program's checks, `sim.e2e_program`).
"""

from __future__ import annotations

import re

import pytest

from driver import Fabric
from driver.backends.engine import EngineFabric
from driver.backends.soft import SoftFabric
from sim.commands.demo import impaired
from sim.e2e_program import KIB, end_to_end_checked
from sim.usrsctp_host import UsrsctpAssociation, usrsctp_host

LOSSES = [pytest.param(0.0, id="lossless"), pytest.param(0.02, id="2%-impaired")]


@pytest.fixture
def peers(usrsctp):
    """`usrsctp_host`, each host made closed (its sockets and address) after the test."""
    made = []

    def make(config, rng):
        host = usrsctp_host(config, rng)
        made.append(host)
        return host

    yield make
    for host in made:
        host.sctp.close()


def run(backend) -> None:
    fabric = Fabric(backend)
    report = backend.run(lambda: end_to_end_checked(fabric, largest=16 * KIB))
    assert report.sizes[-1] == 16 * KIB
    return report


@pytest.mark.parametrize("loss", LOSSES)
def test_the_software_rnic_and_a_host_over_usrsctp(peers, loss: float) -> None:
    backend = SoftFabric(impaired(loss, seed=3) if loss else None, 3, peer_host=peers)
    run(backend)
    a, b = backend.pair.a, backend.pair.b
    assert isinstance(b.association, UsrsctpAssociation)
    usrsctp = b.association.statistics
    assert usrsctp.data_chunks_received == a.association.statistics.data_chunks_sent > 100
    if loss:
        assert usrsctp.data_chunks_resent > 0
        assert a.association.statistics.retransmitted_by_timeout + a.association.statistics.fast_retransmitted > 0


@pytest.mark.parametrize("loss", LOSSES)
def test_the_engines_sacks_and_transport_and_a_host_over_usrsctp(peers, loss: float) -> None:
    backend = EngineFabric(impaired(loss, seed=3) if loss else None, 3, peer_host=peers, engine_transport=True)
    run(backend)
    a, b = backend.pair.a, backend.pair.b
    usrsctp = b.association.statistics
    # RFC 4960 6.2.1 in the engines: every SACK of usrsctp went from the receive engine to the transport unit.
    assert a.transmit.peer_sacks_from_receive_engine > 0 and a.transmit.peer_sacks_from_host == 0
    # The host's SCTP sent no DATA again and SACKed nothing: the engines did.
    assert a.association.transport_by_engine and a.association.sacks_by_engine
    assert a.association.statistics.retransmitted_by_timeout == a.association.statistics.fast_retransmitted == 0
    assert usrsctp.sacks_received > 0
    if loss:
        assert a.transmit.transport_resends > 0 and usrsctp.data_chunks_resent > 0


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("width_bytes", [8, 64])
def test_the_rtl_and_a_host_over_usrsctp(usrsctp, tmp_path, width_bytes: int) -> None:
    """The same with host A on the RTL (`sim`) at W = 8 and 64: its SACKs and transport in the gateware, every
    frame and record as its models'."""
    from sim.driver_sim import run_program

    log = tmp_path / "sim.log"
    run_program(end_to_end_checked, link=impaired(0.02, seed=3), seed=3, memory_bytes=1 << 24, width_bytes=width_bytes,
                arguments={"largest": 16 * KIB}, log_file=log, usrsctp_peer=True,
                options={"engine_sacks": True, "engine_transport": True})
    text = log.read_text()
    assert "frames from the RTL transmit engine, each as its model's" in text
    sacks, resends = map(int, re.search(r"host A: (\d+) SACK frames from the RTL's acknowledgement unit, (\d+) "
                                        r"chunks resent by its transport unit", text).groups())
    from_engine, from_host = map(int, re.search(r"(\d+) of the peer's SACKs from its receive engine, (\d+) from the "
                                                r"host", text).groups())
    sent, resent, received = map(int, re.search(r"host B \(usrsctp\): (\d+) new DATA chunks sent, (\d+) sent again, "
                                                r"(\d+) messages received", text).groups())
    assert sacks > 0 and resends > 0 and from_engine > 0 and from_host == 0
    assert sent > 100 and resent > 0 and received > 100

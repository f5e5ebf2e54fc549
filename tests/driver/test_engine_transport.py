"""`engine_transport`: the transmit engine's transport unit (model/engine/transport.py) processes the peer's
SACKs and runs the windows, T3-rtx and fast retransmit (RFC 4960 6.1, 6.2.1, 6.3, 7.2); the host's association
only numbers the chunks it hands over.

Over a link that loses, duplicates and reorders, every RDMAP operation both ways completes with the right bytes
and the association shuts down (RFC 4960 9.2) as it does with the host's SCTP, and the transport unit, not the
host, retransmitted. A peer that goes silent fails the association after Association.Max.Retrans expiries in
the engine (RFC 4960 8.1).
"""

import random
import re

import pytest

from driver import InvalidArgument, open_fabric
from model.ddp.memory import SparseMemory
from model.rnic.engine_host import EngineRnic
from model.rnic.offload import ModelEngine
from model.rnic.pair import IPS, MACS, HostPair, host_config
from model.rnic.events import Failed
from model.rnic.link import Link, LinkConfig, Side
from model.sctp.events import RetransmissionLimit
from model.sctp.state import AssociationState
from sim.commands.demo import impaired
from sim.e2e_program import KIB, end_to_end_checked


def test_every_operation_both_ways_over_the_impaired_link():
    fabric = open_fabric("engine", link=impaired(0.02, seed=3), seed=3, engine_transport=True)
    report = fabric.backend.run(lambda: end_to_end_checked(fabric, largest=16 * KIB))
    assert report.sizes[-1] == 16 * KIB
    hosts = fabric.backend.pair.hosts.values()
    for host in hosts:
        association = host.association
        assert association.transport_by_engine and association.state is AssociationState.CLOSED
        # The host's SCTP sent no DATA again: the transport unit did (T3-rtx or fast retransmit).
        assert association.statistics.retransmitted_by_timeout == association.statistics.fast_retransmitted == 0
        # RFC 4960 6.2.1 in the engines: the receive engine hands every SACK of the peer to the transport unit
        # (the SACK row says so from the association's establishment, before any DATA); the host sees none.
        assert host.transmit.peer_sacks_from_receive_engine > 0 and host.transmit.peer_sacks_from_host == 0
    assert sum(host.transmit.transport_resends for host in hosts) > 0


def test_the_soft_backend_has_no_transport_unit():
    """No transmit engine: refused before anything opens (on board, a build without the unit refuses it,
    tests/driver/test_board_transport.py)."""
    with pytest.raises(InvalidArgument, match="engine_transport: only the engine, sim and board backends"):
        open_fabric("soft", engine_transport=True)


def test_a_silent_peer_fails_the_association_in_the_engine():
    """RFC 4960 8.1: the link goes dead once the session is open; A's Send leaves, the engine resends it at
    each T3-rtx expiry (6.3.3, RTO doubling to RTO.Max), and the expiry past Association.Max.Retrans (10)
    fails the association: the host reports it as its own SCTP would, and sends its ABORT."""
    hosts = {}
    for side in Side:
        memory = SparseMemory()
        hosts[side] = EngineRnic(host_config(side, engine_transport=True, engine_sacks=True), memory,
                                 random.Random(5 + (side is Side.B)), ModelEngine(MACS[side], IPS[side], memory))
    pair = HostPair(hosts, Link(None))
    pair.connect()
    pair.open_stream(0)
    a = pair.a
    a.memory.write(0x100000, b"x" * 100)
    pair.link.config = LinkConfig(loss=1.0)
    started = pair.now
    a.post_send(0, 0x100000, 100)
    pair.run_until(lambda: pair.seen(Side.A, Failed), limit=started + 3600)
    failed, = pair.of(Side.A, Failed)
    assert failed.limit is RetransmissionLimit.ASSOCIATION_MAX_RETRANS and "transmit engine 11 times" in failed.reason
    assert a.transmit.transport_resends == 10
    # RTO.Initial 3 s doubled per expiry up to RTO.Max 60 s: 3 + 6 + 12 + 24 + 48 + 60 * 6 s, within a tick each.
    assert abs(pair.now - started - (3 + 6 + 12 + 24 + 48 + 60 * 6)) < 0.1


@pytest.mark.slow
@pytest.mark.cocotb
def test_every_operation_both_ways_with_the_gateware_transport(tmp_path):
    """The same on `sim`: host A's SACKs (RFC 4960 6.2) and its transport (6.1, 6.2.1, 6.3, 7.2) are the RTL's,
    its delayed SACKs and T3-rtx on the timer the fabric ticks; every frame and record as the models'."""
    from sim.driver_sim import run_program

    log = tmp_path / "sim.log"
    run_program(end_to_end_checked, link=impaired(0.02, seed=3), seed=3, memory_bytes=1 << 24,
                arguments={"largest": 16 * KIB}, log_file=log,
                options={"engine_sacks": True, "engine_transport": True})
    text = log.read_text()
    assert "frames from the RTL transmit engine, each as its model's" in text
    sacks, resends = map(int, re.search(r"host A: (\d+) SACK frames from the RTL's acknowledgement unit, (\d+) "
                                        r"chunks resent by its transport unit", text).groups())
    assert sacks > 0 and resends > 0
    from_engine, from_host = map(int, re.search(r"(\d+) of the peer's SACKs from its receive engine, (\d+) from the "
                                                r"host", text).groups())
    assert from_engine > 0 and from_host == 0     # RFC 4960 6.2.1 in the gateware: the host sees no SACK

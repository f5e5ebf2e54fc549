"""A host with several Protection Domains (RFC 5041 8.2) and several listening ports (RFC 4960 5.1).

RFC 5041 8.2: a tagged buffer is reachable only through the DDP streams of
its own Protection Domain; a segment naming another PD's STag is refused
with "STag not associated with DDP Stream" (7.2: DDP layer, type 0x1, code
0x02) and places nothing.  A host listening on two ports answers an INIT on
either with the Listener of that port, and the association it makes is on
that port; an INIT for a port nobody listens on is answered with an ABORT
(RFC 4960 8.4 rule 3).  Both on the software RNIC and on the receive engine's
host (`OffloadRnic` over the engine's golden model), whose region and stream
rows carry the PD.
"""

from __future__ import annotations

import random

import pytest

from model.ddp.memory import Access, SparseMemory
from model.rnic.engine_host import EngineRnic
from model.rnic.events import Aborted, Connected, RdmapTerminated, SessionRequested
from model.rnic.link import Link, Side
from model.rnic.offload import ModelEngine
from model.rnic.pair import IPS, MACS, HostPair, host_config

STREAM = 0


def pair_of(kind: str) -> HostPair:
    """Hosts that wait for accept_session (no policy): software RNICs, or engine hosts over the models."""
    if kind == "soft":
        return HostPair.create(policies={side: None for side in Side})
    hosts = {}
    for side in Side:
        memory = SparseMemory()
        hosts[side] = EngineRnic(host_config(side), memory, random.Random(7 + (side is Side.B)),
                                 ModelEngine(MACS[side], IPS[side], memory), session_policy=None)
    return HostPair(hosts, Link(None))


@pytest.mark.parametrize("kind", ["soft", "engine"])
@pytest.mark.parametrize("stream_pd, expected", [(2, None), (1, (1, 0x1, 0x02))], ids=["same-pd", "other-pd"])
def test_rfc5041_8_2_a_stream_reaches_only_its_protection_domains_regions(kind, stream_pd, expected):
    pair = pair_of(kind)
    pair.connect()
    region = pair.b.register_memory(0x4000, 64, Access.LOCAL_WRITE | Access.REMOTE_WRITE, base_to=0x4000, pd_id=2)
    pair.a.open_stream(STREAM)
    pair.run_until(lambda: pair.seen(Side.B, SessionRequested))
    pair.b.accept_session(STREAM, pd_id=stream_pd)
    pair.run_until(lambda: pair.a.negotiated(STREAM) is not None)
    pair.a.memory.write(0x100, b"domain two")
    pair.a.post_write(STREAM, region, 0x4000, 0x100, 10)
    pair.run_until(lambda: pair.seen(Side.A, RdmapTerminated) or b"domain two" in pair.b.memory.read(0x4000, 10))
    terminated = [e for e in pair.events[Side.A] if isinstance(e, RdmapTerminated)]
    if expected is None:
        assert not terminated and pair.b.memory.read(0x4000, 10) == b"domain two"
    else:
        assert [tuple(e.terminate.number) for e in terminated] == [expected]
        assert pair.b.memory.read(0x4000, 10) == bytes(10)  # on the engine host, its rows' PDs decided


@pytest.mark.parametrize("kind", ["soft", "engine"])
def test_rfc4960_5_1_a_host_listens_on_two_ports_and_refuses_a_third(kind):
    pair = pair_of(kind)
    pair.b.listen()
    pair.b.listen(7000)
    pair.a.connect(pair.now, MACS[Side.B], IPS[Side.B], 7001)  # nobody listens on 7001: ABORT (8.4 rule 3)
    pair.run_until(lambda: pair.a.closed)
    assert pair.seen(Side.A, Aborted) and pair.b.association is None
    pair.a.connect(pair.now, MACS[Side.B], IPS[Side.B], 7000)
    pair.run_until(lambda: pair.a.connected and pair.b.connected)
    assert pair.b.association.config.local_port == 7000
    assert [e.peer_port for e in pair.events[Side.A] if isinstance(e, Connected)] == [7000]
    pair.a.open_stream(STREAM)
    pair.run_until(lambda: pair.seen(Side.B, SessionRequested))  # sessions run on the association on port 7000

"""Connection management: RFC 6581 IRD/ORD negotiation, reject with private data, disconnect, unreachable.

Expectations from RFC 6581 9: the initiator's ORD is at most the responder's
IRD and the responder's ORD at most the initiator's IRD; the responder's IRD
covers the initiator's ORD when it can.  RFC 5043 6.3: a Reject carries the
responder's private data to the initiator.  RFC 5043 6.2: either side ends a
session with a Terminate; the other answers with its own.
"""

import pytest

from driver import (
    SGE, AssociationEnd, CMEventType, ConnParam, LinkConfig, NotConnected, QPState, RecvWR, RtrType, SendWR,
    SimulationStalled, TerminateLayer, WaitTimeout, WCStatus, WROpcode, open_fabric, run,
)
from scripts.driver_example import main as example_main
from tests.driver.harness import connected


@pytest.mark.parametrize("client, server, client_ord, server_ord", [
    ((2, 3), (7, 1), 3, 1),   # (IRD, ORD): each ORD fits the other's IRD as offered
    ((2, 6), (3, 5), 3, 2),   # client ORD 6 > server IRD 3: lowered to 3; server ORD 5 > client IRD 2: 2
])
def test_ird_ord_negotiation_rfc6581_9(client, server, client_ord, server_ord, backend):
    result = {}

    async def main(fabric):
        s, c = await connected(fabric, ConnParam(responder_resources=client[0], initiator_depth=client[1]),
                               ConnParam(responder_resources=server[0], initiator_depth=server[1]))
        result.update(server=s, client=c)

    run(main, backend)
    s, c = result["server"], result["client"]
    assert c.qp.ord == client_ord and s.qp.ord == server_ord
    assert c.qp.ord <= s.qp.ird and s.qp.ord <= c.qp.ird  # RFC 6581 9
    assert s.qp.ird <= server[0] and c.qp.ird <= client[0]  # never more than offered
    for side in (s, c):
        param = side.established.conn_param
        assert (param.responder_resources, param.initiator_depth) == (side.qp.ird, side.qp.ord)


def test_connect_request_carries_the_peers_offer_and_private_data(backend):
    """rdma_cm's view of the request: responder_resources is the peer's ORD, initiator_depth its IRD."""
    result = {}

    async def main(fabric):
        server, client = fabric.devices
        listener = server.create_id()
        listener.listen()
        cm_id = client.create_id()
        cm_id.create_qp(client.alloc_pd(), client.create_cq())
        cm_id.connect(server.address, ConnParam(responder_resources=5, initiator_depth=3, private_data=b"hello"))
        result["request"] = await listener.get_cm_event()

    run(main, backend)
    request = result["request"]
    assert request.event_type is CMEventType.CONNECT_REQUEST and request.private_data == b"hello"
    assert (request.conn_param.responder_resources, request.conn_param.initiator_depth) == (3, 5)


def test_reject_with_private_data_rfc5043_6_3(backend):
    result = {}

    async def main(fabric):
        server, client = fabric.devices
        listener = server.create_id()
        listener.listen()
        cm_id = client.create_id()
        qp = cm_id.create_qp(client.alloc_pd(), client.create_cq())
        cm_id.connect(server.address, ConnParam(private_data=b"may I?"))
        (await listener.get_cm_event()).id.reject(b"not today")
        result["event"] = await cm_id.get_cm_event()
        result["qp"] = qp

    run(main, backend)
    event = result["event"]
    assert (event.event_type, event.private_data, event.error) == (CMEventType.REJECTED, b"not today", None)
    with pytest.raises(NotConnected):
        result["qp"].post_send(SendWR(1, WROpcode.SEND))


def test_no_matching_rtr_is_rejected_with_rfc6581_8_code_0x07(backend):
    """The client can only send a Read RTR, the server only accepts a Write RTR (RFC 6581 7, 9)."""
    result = {}

    async def main(fabric):
        server, client = fabric.devices
        server.create_id().listen()
        cm_id = client.create_id()
        cm_id.create_qp(client.alloc_pd(), client.create_cq())
        cm_id.connect(server.address, ConnParam(rtr_types=(RtrType.READ,)))
        result["event"] = await cm_id.get_cm_event()

    run(main, backend)
    event = result["event"]
    assert event.event_type is CMEventType.REJECTED
    assert tuple(event.error) == (TerminateLayer.LLP, 0x0, 0x07)  # RFC 6581 8: No matching RTR option


@pytest.mark.parametrize("who", ["client", "server"])
def test_disconnect_reaches_both_sides_and_flushes(who, backend):
    result = {}

    async def main(fabric):
        server, client = await connected(fabric)
        sides = {"client": client, "server": server}
        other = sides["server" if who == "client" else "client"]
        other.qp.post_recv(RecvWR(77, [SGE(other.mr.buf, 64, other.mr.lkey)]))
        sides[who].id.disconnect()
        result["events"] = [await side.id.get_cm_event() for side in (sides[who], other)]
        result["flushed"] = await other.cq.wait(1)
        result["states"] = [side.qp.state for side in (sides[who], other)]
        sides[who].qp.post_send(SendWR(1, WROpcode.SEND))  # a queue pair in error flushes what is posted (verbs)
        result["late"] = await sides[who].cq.wait(1)

    run(main, backend)
    assert [event.event_type for event in result["events"]] == [CMEventType.DISCONNECTED] * 2
    assert [(wc.wr_id, wc.status) for wc in result["flushed"]] == [(77, WCStatus.WR_FLUSH_ERR)]
    assert result["states"] == [QPState.ERROR, QPState.ERROR]
    assert [(wc.wr_id, wc.status) for wc in result["late"]] == [(1, WCStatus.WR_FLUSH_ERR)]


def test_device_close_disconnects_every_connection(backend):
    """RFC 5043 6.2 then RFC 4960 9.2: close terminates the sessions and shuts the association down."""
    result = {}

    async def main(fabric):
        server, client = await connected(fabric)
        client.device.close()
        result["events"] = [await side.id.get_cm_event() for side in (client, server)]

    run(main, backend)
    assert [event.event_type for event in result["events"]] == [CMEventType.DISCONNECTED] * 2


def test_no_device_at_the_address_is_unreachable_at_once(backend):
    result = {}

    async def main(fabric):
        client = fabric.devices[1]
        nowhere = client.create_id()
        nowhere.create_qp(client.alloc_pd(), client.create_cq())
        nowhere.connect(("10.9.9.9", 5002))
        result["event"] = await nowhere.get_cm_event()

    run(main, backend)
    assert result["event"].event_type is CMEventType.UNREACHABLE


def test_a_peer_that_does_not_listen_rejects_the_connect_within_a_round_trip(backend):
    """Issue 28 item 5: the peer's endpoint cannot process the INIT with nothing listening and answers it with
    an ABORT (RFC 4960 8.4 rule 3, 5.1), so the connect is REJECTED one round trip later (the link's delay is
    0.5 ms each way), as a TCP SYN to a closed port meets a RST; the association ended ABORTED."""
    result = {}

    async def main(fabric):
        server, client = fabric.devices
        cm_id = client.create_id()
        cm_id.create_qp(client.alloc_pd(), client.create_cq())
        cm_id.connect(server.address)
        result["event"] = await cm_id.get_cm_event()
        result["when"] = fabric.now()
        result["end"] = await client.wait_closed()

    run(main, backend)
    event = result["event"]
    assert (event.event_type, event.status) == (CMEventType.REJECTED, -1)
    assert "ABORT" in event.reason and "RFC 4960 8.4" in event.reason
    assert result["when"] < 0.01
    assert result["end"] is AssociationEnd.ABORTED


def test_a_peer_that_never_answers_is_unreachable_after_max_init_retransmits(backend):
    """Every frame lost: the INIT is retransmitted until Max.Init.Retransmits (RFC 4960 5.1 C), RTO.Initial 3 s
    doubling through 8 retransmissions (RFC 4960 15): UNREACHABLE."""
    result = {}

    async def main(fabric):
        server, client = fabric.devices
        server.create_id().listen()
        silent = client.create_id()
        silent.create_qp(client.alloc_pd(), client.create_cq())
        silent.connect(server.address)
        result["silent"] = await silent.get_cm_event()
        result["when"] = fabric.now()

    run(main, backend, link=LinkConfig(loss=1.0))
    assert result["silent"].event_type is CMEventType.UNREACHABLE
    assert result["when"] > 60


def test_a_wait_that_cannot_end(backend):
    """Nothing in flight and no timer: the wait fails at once (simulated time) instead of hanging; with the
    association up its heartbeats keep time moving, so the wait's timeout ends it."""
    result = {}

    async def main(fabric):
        device = fabric.devices[0]
        with pytest.raises(SimulationStalled):
            await device.create_cq().wait(1)
        server, client = await connected(fabric)
        with pytest.raises(WaitTimeout):
            await client.cq.wait(1, timeout=100.0)
        result["now"] = fabric.now()

    run(main, backend)
    assert 100.0 <= result["now"] < 101.0


def test_example_program(capsys, backend):
    assert example_main(["--backend", backend]) == 0
    out = capsys.readouterr().out
    assert "ESTABLISHED" in out
    assert "server received b'hello over iWARP/SCTP', got written b'hello'; client read b\"the server's own bytes\"" \
        in out
    for line in ("wr_id 10 SEND SUCCESS 21 bytes", "wr_id 11 RDMA_WRITE SUCCESS 5 bytes",
                 "wr_id 12 RDMA_READ SUCCESS 22 bytes", "wr_id 1 RECV SUCCESS 21 bytes"):
        assert line in out


def test_the_engine_backends_limits():
    """The engine's tables bound the device: 16 region rows (row 0 unused: 15 STags), 4 DDP streams, IRD 7 (a
    stream keeps IRD + 1 Read Request buffers posted, RFC 5040 4.2, and the engine holds 8 per queue)."""
    attr = open_fabric("engine").devices[0].query_device()
    assert (attr.max_mr, attr.max_qp, attr.max_qp_rd_atom) == (15, 4, 7)


def test_query_device_before_any_connection():
    """RFC 5043 9: a DDP segment fits one DATA chunk of one packet, kept below the theoretical maximum (here by
    room for a SACK riding along, 16 bytes without gaps, RFC 4960 3.3.4): 1500-byte MTU - IPv4 20 - SCTP common
    header 12 - DATA chunk header 16 - SACK 16, a multiple of 4, less the 16-bit DDP-SSN (RFC 5043 5.2.2)."""
    fabric = open_fabric("soft", streams=5)
    attr = fabric.devices[0].query_device()
    assert attr.mulpdu == 1500 - 20 - 12 - 16 - 16 - 2
    assert attr.max_qp == 5
    assert (attr.max_recv_sge, attr.max_sge_rd) == (1, 1)
    assert attr.max_msg_sz == 2**32 - 1  # RFC 5041 5.2: less than 2^32


def test_a_separate_receive_cq_takes_the_receives_and_wait_closed_says_how_it_ended(backend):
    """`create_qp(pd, send_cq, recv_cq)`: receive completions on the receive CQ, send completions on the send CQ
    (the receive CQ is empty, so falsy, when the QP is made); after a disconnect and a close, both devices see
    their association shut down gracefully (RFC 4960 9.2)."""
    result = {}

    async def main(fabric):
        server, client = fabric.devices
        listener = server.create_id()
        listener.listen()
        pds = [device.alloc_pd() for device in (server, client)]
        regions = [pd.reg_mr(64, 0x7) for pd in pds]
        s_send, s_recv, c_send = server.create_cq(), server.create_cq(), client.create_cq()
        c_id = client.create_id()
        c_id.create_qp(pds[1], c_send)
        c_id.connect(server.address)
        request = await listener.get_cm_event()
        s_qp = request.id.create_qp(pds[0], s_send, s_recv)
        s_qp.post_recv(RecvWR(9, [SGE(regions[0].buf, 64, regions[0].lkey)]))
        request.id.accept()
        await c_id.get_cm_event()
        c_id.qp.post_send(SendWR(3, WROpcode.SEND, [SGE(regions[1].buf, 8, regions[1].lkey)]))
        result["recv"] = await s_recv.wait(1)
        result["send"] = await c_send.wait(1)
        result["server_send_cq"] = len(s_send)
        c_id.disconnect()
        await c_id.get_cm_event()
        await request.id.get_cm_event()
        client.close()
        result["ends"] = [await device.wait_closed() for device in (client, server)]

    run(main, backend)
    assert [(wc.wr_id, wc.opcode.name, wc.byte_len) for wc in result["recv"]] == [(9, "RECV", 8)]
    assert [(wc.wr_id, wc.opcode.name) for wc in result["send"]] == [(3, "SEND")]
    assert result["server_send_cq"] == 0
    assert result["ends"] == [AssociationEnd.CLOSED, AssociationEnd.CLOSED]


def test_wait_closed_reports_the_end_of_the_current_association(backend):
    """Issue 28 item 4: a connect before the peer listens ends its association (ABORTED, RFC 4960 8.4 rule 3);
    the next association, set up once the peer listens, is up until client.close() shuts it down (RFC 4960 9.2):
    both devices' wait_closed() wait for that end and say CLOSED, not the first association's end."""
    result = {}

    async def main(fabric):
        server, client = fabric.devices
        pds = {device: device.alloc_pd() for device in fabric.devices}
        early = client.create_id()
        early.create_qp(pds[client], client.create_cq())
        early.connect(server.address)
        result["early"] = (await early.get_cm_event()).event_type
        listener = server.create_id()
        listener.listen()
        cm_id = client.create_id()
        cm_id.create_qp(pds[client], client.create_cq())
        cm_id.connect(server.address)
        request = await listener.get_cm_event()
        request.id.create_qp(pds[server], server.create_cq())
        request.id.accept()
        await cm_id.get_cm_event()
        result["up"] = fabric.now()
        client.close()
        result["ends"] = [await device.wait_closed() for device in (client, server)]
        result["closed"] = fabric.now()

    run(main, backend)
    assert result["early"] is CMEventType.REJECTED
    assert result["ends"] == [AssociationEnd.CLOSED, AssociationEnd.CLOSED]
    assert result["closed"] > result["up"]  # the SHUTDOWN exchange took its round trips

"""A Terminate from the peer, as the application sees it: the request it names, the event, later posts.

The peer checks a stream's segments in order, refuses the first one that
fails, and drops everything after it (RFC 5041 7.1); its Terminate quotes
the refused segment's DDP header (RFC 5040 7), so the error completion
belongs to the request that carried that header.  The queue pair is then in
error: the connection id gets an event and later posts complete flushed, as
in verbs (rdma_cm's DISCONNECTED; ibv_post_send on a QP in the error state).
"""

from driver import SGE, AccessFlags, RecvWR, SendWR, WCStatus, WROpcode, run
from tests.driver.harness import connected

DDP = 1
WRITABLE = AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE


def run_connected(body, backend, **options):
    result = {}

    async def main(fabric):
        server, client = await connected(fabric, **options)
        result["value"] = await body(fabric, server, client)

    run(main, backend)
    return result["value"]


def failed(wcs):
    return [(wc.wr_id, wc.status, tuple(wc.error)) for wc in wcs if wc.status is not WCStatus.SUCCESS]


def test_two_writes_to_a_deregistered_stag_name_the_first(backend):
    """Issue 28 item 3: Writes 52 and 53 to the same STag and TO, which the peer has deregistered.  The peer
    refuses 52 (Invalid STag, DDP 0x1/0x00, RFC 5041 7.2) and drops 53 after it (RFC 5041 7.1), so the error
    completion is 52's, though 53 quotes the same header fields and was posted last."""
    async def body(fabric, server, client):
        region = server.pd.reg_mr(4096, WRITABLE)
        region.dereg()
        for wr_id in (52, 53):
            client.qp.post_send(SendWR(wr_id, WROpcode.RDMA_WRITE, [SGE(client.mr.buf, 2000, client.mr.lkey)],
                                       remote_addr=region.buf + 7, rkey=region.rkey))
        return await client.cq.wait(3)

    wcs = run_connected(body, backend)
    assert failed(wcs) == [(52, WCStatus.REM_ACCESS_ERR, (DDP, 0x1, 0x00))]
    assert sorted(wc.wr_id for wc in wcs if wc.ok) == [52, 53]  # both handed over first (RFC 5041 5.4)


def test_a_write_accepted_before_the_region_went_away_is_not_named(backend):
    """The other way round: Write 60 lands and completes; the peer then deregisters the region, and Write 61 to
    the same STag and TO is refused.  61 is named, not the older 60 that carried the same header fields."""
    async def body(fabric, server, client):
        region = server.pd.reg_mr(4096, WRITABLE)
        write = dict(remote_addr=region.buf + 7, rkey=region.rkey)
        client.mr.write(b"landed")
        client.qp.post_send(SendWR(60, WROpcode.RDMA_WRITE, [SGE(client.mr.buf, 6, client.mr.lkey)], **write))
        first = await client.cq.wait(1)
        server.qp.post_recv(RecvWR(1, [SGE(server.mr.buf, 64, server.mr.lkey)]))
        client.qp.post_send(SendWR(70, WROpcode.SEND, [SGE(client.mr.buf, 6, client.mr.lkey)]))
        await server.cq.wait(1)  # the Send after the Write arrived: the Write was placed (RFC 5040 5.5)
        landed = region.read(6, 7)
        region.dereg()
        client.qp.post_send(SendWR(61, WROpcode.RDMA_WRITE, [SGE(client.mr.buf, 6, client.mr.lkey)], **write))
        return first, landed, await client.cq.wait(3)

    first, landed, wcs = run_connected(body, backend)
    assert [(wc.wr_id, wc.status) for wc in first] == [(60, WCStatus.SUCCESS)] and landed == b"landed"
    assert failed(wcs) == [(61, WCStatus.REM_ACCESS_ERR, (DDP, 0x1, 0x00))]


def test_a_terminate_ends_the_connection_with_an_event_and_later_posts_flush(backend):
    """Issue 28 item 6: a Write to an invalid STag makes the server send a Terminate (RFC 5041 7.2, DDP 0x1/0x00).
    Each side's connection id gets DISCONNECTED carrying that number (rdma_cm's event for an iWARP connection
    ended by a Terminate), the DDP Stream Terminate follows the RDMAP Terminate (RFC 5043 6.2), and posts on the
    queue pairs, now in error, complete flushed instead of raising (verbs).  With one DDP stream per association,
    a new connection then opens on the released stream (RFC 5043 6.6)."""
    async def main(fabric):
        server, client = await connected(fabric)
        bad_stag = server.mr.rkey ^ 0xFF
        client.qp.post_send(SendWR(7, WROpcode.RDMA_WRITE, [SGE(client.mr.buf, 8, client.mr.lkey)],
                                   remote_addr=server.mr.buf, rkey=bad_stag))
        await client.cq.wait(2)
        events = [await side.id.get_cm_event(timeout=10.0) for side in (client, server)]
        client.qp.post_send(SendWR(80, WROpcode.SEND, [SGE(client.mr.buf, 8, client.mr.lkey)]))
        client.qp.post_recv(RecvWR(81, [SGE(client.mr.buf, 8, client.mr.lkey)]))
        server.qp.post_send(SendWR(82, WROpcode.RDMA_WRITE, [SGE(server.mr.buf, 8, server.mr.lkey)],
                                   remote_addr=client.mr.buf, rkey=client.mr.rkey))
        _, *server_flushed = await server.cq.wait(2)  # its own Terminate's completion, then the flush
        flushed = await client.cq.wait(2) + server_flushed
        again = await reconnect(fabric, server, client)
        return events, flushed, again

    events, flushed, again = run_main(main, backend, streams=1)
    assert [(e.event_type.name, tuple(e.error)) for e in events] == [("DISCONNECTED", (DDP, 0x1, 0x00))] * 2
    assert "Terminate" in events[0].reason
    assert [(wc.wr_id, wc.status) for wc in flushed] == [(80, WCStatus.WR_FLUSH_ERR), (81, WCStatus.WR_FLUSH_ERR),
                                                         (82, WCStatus.WR_FLUSH_ERR)]
    assert again == [(9, WCStatus.SUCCESS)]


def run_main(main, backend, **options):
    result = {}

    async def wrapped(fabric):
        result["value"] = await main(fabric)

    run(wrapped, backend, **options)
    return result["value"]


async def reconnect(fabric, server, client):
    """A new connection between the same devices and PDs; the client Sends one message over it."""
    listener = server.listener
    cm_id = client.device.create_id()
    qp = cm_id.create_qp(client.pd, client.cq)
    cm_id.connect(server.device.address)
    request = await listener.get_cm_event(timeout=10.0)
    server_qp = request.id.create_qp(server.pd, server.cq)
    server_qp.post_recv(RecvWR(1, [SGE(server.mr.buf, 64, server.mr.lkey)]))
    request.id.accept()
    await cm_id.get_cm_event(timeout=10.0)
    qp.post_send(SendWR(9, WROpcode.SEND, [SGE(client.mr.buf, 8, client.mr.lkey)]))
    return [(wc.wr_id, wc.status) for wc in await client.cq.wait(1)]


def test_a_terminate_crossing_the_peers_disconnect(backend):
    """The client posts a Write to an invalid STag and disconnects at once: its DDP Stream Terminate follows the
    Write (RFC 5043 6.2) and reaches the server with it, so the server's RDMAP Terminate is sent on a session the
    peer is already ending.  Each side gets one DISCONNECTED, and nothing escapes the driver."""
    async def main(fabric):
        server, client = await connected(fabric)
        client.qp.post_send(SendWR(7, WROpcode.RDMA_WRITE, [SGE(client.mr.buf, 8, client.mr.lkey)],
                                   remote_addr=server.mr.buf, rkey=server.mr.rkey ^ 0xFF))
        client.id.disconnect()
        events = [(await side.id.get_cm_event(timeout=10.0)).event_type.name for side in (client, server)]
        return events, server.id.poll_cm_event(), client.id.poll_cm_event()

    events, server_more, client_more = run_main(main, backend)
    assert events == ["DISCONNECTED", "DISCONNECTED"] and server_more is None and client_more is None

"""The verbs that applications use beside the basic posts: lists of work requests, unsignaled sends, completion
channels, a caller's own buffers, several protection domains, ids listening on several ports.

Expectations are verbs' (ibv_post_send, ibv_qp_init_attr.sq_sig_all,
IBV_SEND_SIGNALED): on a queue pair created with `sq_sig_all=False` only the
requests posted SIGNALED complete successfully to the CQ, while a request
that fails completes whatever its flag; the data of every request moves all
the same (RFC 5040 5).  A list of requests is posted in order and stops at
the first one refused, which the error names and holds (`bad_wr`): those
before it are posted, those after it are not.  A CQ on a completion channel,
armed with `req_notify` (ibv_req_notify_cq), puts one event on the channel
for the next completion added to it, or for the next receive of a Send with
Solicited Event (or failure) when armed for solicited completions only.
A region over the caller's buffer shows the peer's writes in that buffer
and sends what the caller wrote there.  A connection reaches only the regions
of its queue pair's PD (RFC 5041 8.2).  A listening id bound to a port gets
the connections whose association was made to that port (RFC 4960 5.1).

Each program makes its own checks and runs unchanged on every backend: here
on `soft` and `engine`, on the model board (`test_board_backend.py`), and on
the gateware (`sim`, the slow set, `test_verbs_sim.py`); device 0, the one
that posts, is the board's or the RTL's host there.
"""

from __future__ import annotations

import pytest

from driver import (
    SGE, AccessFlags, AddressInUse, ConnParam, InvalidArgument, InvalidState, OutOfResources, RecvWR, SendFlags,
    SendWR, SgeOutsideRegion, WCOpcode, WCStatus, WROpcode, WrongArgumentType, open_fabric, run,
)
from tests.driver.harness import Side, connected

DDP = 1


async def unsignaled_sends(fabric) -> None:
    """Device 0 (sq_sig_all=False) posts one list: Writes, Sends and a Read, three of them SIGNALED.  Only those
    three complete; every byte lands; an unsignaled Write to an invalid STag still completes, in error (DDP 0x1/0x00,
    RFC 5041 7.2)."""
    poster, peer = await connected(fabric, region=1 << 14, sq_sig_all=False)
    mine, theirs = poster.mr, peer.mr
    mine.write(bytes(range(256)))
    theirs.write(b"their bytes", 4096)
    peer.qp.post_recv(RecvWR(90, [SGE(theirs.buf + 1024, 64, theirs.lkey)]))

    def write(wr_id: int, offset: int, flags: SendFlags = SendFlags.NONE, rkey: int | None = None) -> SendWR:
        return SendWR(wr_id, WROpcode.RDMA_WRITE, [SGE(mine.buf + offset, 16, mine.lkey)], flags,
                      remote_addr=theirs.buf + offset, rkey=theirs.rkey if rkey is None else rkey)

    poster.qp.post_send([
        write(1, 0), write(2, 16),
        SendWR(3, WROpcode.SEND, [SGE(mine.buf + 32, 16, mine.lkey)]),
        write(4, 48, SendFlags.SIGNALED),
        SendWR(5, WROpcode.RDMA_READ, [SGE(mine.buf + 2048, 11, mine.lkey)], SendFlags.SIGNALED,
               remote_addr=theirs.buf + 4096, rkey=theirs.rkey),
        SendWR(6, WROpcode.SEND, [SGE(mine.buf + 64, 16, mine.lkey)], SendFlags.SIGNALED | SendFlags.SOLICITED),
    ])
    peer.qp.post_recv(RecvWR(91, [SGE(theirs.buf + 1088, 64, theirs.lkey)]))
    signaled = await poster.cq.wait(3)
    received = await peer.cq.wait(2)
    assert sorted((wc.wr_id, wc.opcode, wc.status) for wc in signaled) == [
        (4, WCOpcode.RDMA_WRITE, WCStatus.SUCCESS), (5, WCOpcode.RDMA_READ, WCStatus.SUCCESS),
        (6, WCOpcode.SEND, WCStatus.SUCCESS)]
    assert [(wc.wr_id, wc.byte_len, wc.solicited) for wc in received] == [(90, 16, False), (91, 16, True)]
    assert theirs.read(64) == bytes(range(32)) + bytes(16) + bytes(range(48, 64))  # the Writes 1, 2 and 4
    assert theirs.read(16, 1024) == bytes(range(32, 48)) and theirs.read(16, 1088) == bytes(range(64, 80))
    assert mine.read(11, 2048) == b"their bytes"
    poster.qp.post_send(write(7, 96, rkey=theirs.rkey ^ 0xFF))
    (failed,) = [wc for wc in await poster.cq.wait(1)]
    assert (failed.wr_id, failed.status, tuple(failed.error)) == (7, WCStatus.REM_ACCESS_ERR, (DDP, 0x1, 0x00))
    assert poster.cq.poll(8) == []


async def lists_stop_at_the_first_bad_request(fabric) -> None:
    """post_send([good, bad lkey, good]) raises for the second, naming it; the first is posted and lands, the third
    is not; post_recv([good, good, not a RecvWR]) posts the first two, which take the peer's next two Sends."""
    poster, peer = await connected(fabric, region=1 << 14)
    mine, theirs = poster.mr, peer.mr
    mine.write(b"A" * 16 + b"C" * 16)

    def write(wr_id: int, offset: int, lkey: int) -> SendWR:
        return SendWR(wr_id, WROpcode.RDMA_WRITE, [SGE(mine.buf + offset, 16, lkey)], remote_addr=theirs.buf + offset,
                      rkey=theirs.rkey)

    requests = [write(21, 0, mine.lkey), write(22, 16, mine.lkey ^ 0xFF), write(23, 16, mine.lkey)]
    with pytest.raises(SgeOutsideRegion, match=r"^wr\[1\]\.sg_list\[0\]\.lkey") as refused:
        poster.qp.post_send(requests)
    assert refused.value.bad_wr is requests[1]
    receives = [RecvWR(31, [SGE(mine.buf + 4096, 8, mine.lkey)]), RecvWR(32, [SGE(mine.buf + 4104, 8, mine.lkey)]),
                "not a RecvWR"]
    with pytest.raises(WrongArgumentType, match=r"^wr\[2\] ") as refused:
        poster.qp.post_recv(receives)
    assert refused.value.bad_wr == "not a RecvWR"
    theirs.write(b"first...second..", 8192)
    for wr_id, offset in ((41, 8192), (42, 8200)):
        peer.qp.post_send(SendWR(wr_id, WROpcode.SEND, [SGE(theirs.buf + offset, 8, theirs.lkey)]))
    done = await poster.cq.wait(3)
    assert sorted((wc.wr_id, wc.status) for wc in done) == [(21, WCStatus.SUCCESS), (31, WCStatus.SUCCESS),
                                                            (32, WCStatus.SUCCESS)]
    assert mine.read(16, 4096) == b"first...second.."
    await peer.cq.wait(2)
    assert theirs.read(32) == b"A" * 16 + bytes(16)  # Write 23 was never posted
    assert poster.cq.poll(8) == []


@pytest.mark.parametrize("program", [unsignaled_sends, lists_stop_at_the_first_bad_request])
def test_verbs_programs(program, backend):
    run(program, backend)


# -- completion channels (ibv_comp_channel, ibv_req_notify_cq) ---------------------------------------------


def test_an_armed_cq_reports_its_next_completion_once(backend):
    """ibv_req_notify_cq: a completion already queued does not fire; the next one added puts one event on the
    channel naming its CQ; without re-arming, the one after does not."""
    async def main(fabric):
        server, client = fabric.devices
        channel = server.create_comp_channel()
        recv_cq, send_cq = server.create_cq(16, channel), server.create_cq(16, channel)
        poster, peer = await connected_with_cqs(fabric, send_cq, recv_cq)
        mr = peer.mr
        for wr_id in range(3):
            poster.qp.post_recv(RecvWR(wr_id, [SGE(poster.mr.buf + 64 * wr_id, 64, poster.mr.lkey)]))
        peer.qp.post_send(SendWR(10, WROpcode.SEND, [SGE(mr.buf, 8, mr.lkey)]))
        await recv_cq.wait(1)
        recv_cq.req_notify()
        assert channel.poll_cq_event() is None  # the completion taken before arming does not fire
        peer.qp.post_send(SendWR(11, WROpcode.SEND, [SGE(mr.buf, 8, mr.lkey)]))
        assert await channel.get_cq_event(timeout=5.0) is recv_cq
        recv_cq.ack_events(1)
        assert [wc.wr_id for wc in recv_cq.poll(4)] == [1]
        peer.qp.post_send(SendWR(12, WROpcode.SEND, [SGE(mr.buf, 8, mr.lkey)]))
        await recv_cq.wait(1)
        assert channel.poll_cq_event() is None  # not re-armed: no event
        send_cq.req_notify()
        poster.qp.post_send(SendWR(20, WROpcode.RDMA_WRITE, [SGE(poster.mr.buf, 8, poster.mr.lkey)],
                                   remote_addr=mr.buf, rkey=mr.rkey))
        assert await channel.get_cq_event(timeout=5.0) is send_cq

    run(main, backend)


def test_a_cq_armed_for_solicited_events_wakes_on_a_send_with_se(backend):
    """ibv_req_notify_cq(solicited_only=1): a Send without Solicited Event completes its receive quietly; the
    Send with SE (RFC 5040 4.1, 5.3) fires the event."""
    async def main(fabric):
        server, _ = fabric.devices
        channel = server.create_comp_channel()
        cq = server.create_cq(16, channel)
        poster, peer = await connected_with_cqs(fabric, cq, cq)
        for wr_id in range(2):
            poster.qp.post_recv(RecvWR(wr_id, [SGE(poster.mr.buf + 64 * wr_id, 64, poster.mr.lkey)]))
        cq.req_notify(solicited_only=True)
        peer.qp.post_send(SendWR(10, WROpcode.SEND, [SGE(peer.mr.buf, 8, peer.mr.lkey)]))
        (quiet,) = await cq.wait(1)
        assert not quiet.solicited and channel.poll_cq_event() is None
        peer.qp.post_send(SendWR(11, WROpcode.SEND, [SGE(peer.mr.buf, 8, peer.mr.lkey)], SendFlags.SOLICITED))
        assert await channel.get_cq_event(timeout=5.0) is cq
        (woke,) = cq.poll(4)
        assert (woke.wr_id, woke.solicited) == (1, True)

    run(main, backend)


def test_completion_channel_misuse(backend):
    async def main(fabric):
        server, client = fabric.devices
        channel = server.create_comp_channel()
        with pytest.raises(InvalidState, match="completion channel"):
            server.create_cq().req_notify()
        with pytest.raises(InvalidArgument, match="^channel"):
            client.create_cq(16, channel)
        cq = server.create_cq(16, channel)
        with pytest.raises(WrongArgumentType, match="^solicited_only"):
            cq.req_notify(solicited_only=1)
        with pytest.raises(InvalidArgument, match="^num_events"):
            cq.ack_events(1)  # no event returned yet
        with pytest.raises(InvalidArgument, match="^timeout"):
            channel.get_cq_event(timeout=0)

    run(main, backend)


async def connected_with_cqs(fabric, send_cq, recv_cq):
    """Device 0 accepts with a queue pair on `send_cq` and `recv_cq`; device 1 connects; both ESTABLISHED."""
    server, client = fabric.devices
    sides = []
    for device in fabric.devices:
        pd = device.alloc_pd()
        sides.append(Side(device, pd, device.create_cq(64), pd.reg_mr(1 << 14, 0x7)))
    poster, peer = sides
    listener = server.create_id()
    listener.listen()
    peer.id = client.create_id()
    peer.qp = peer.id.create_qp(peer.pd, peer.cq)
    peer.id.connect(server.address)
    request = await listener.get_cm_event()
    poster.id = request.id
    poster.qp = poster.id.create_qp(poster.pd, send_cq, recv_cq)
    poster.id.accept()
    for side in sides:
        assert (await side.id.get_cm_event()).event_type.name == "ESTABLISHED"
    return poster, peer


# -- registering the caller's buffer (ibv_reg_mr over an address) -------------------------------------------


async def callers_buffers(fabric) -> None:
    """Device 0 registers its own bytearrays.  The peer's RDMA Write and Send land in them (RFC 5040 5.1, 5.3),
    bytes device 0 writes into them in Python are what it Sends and what the peer's RDMA Read fetches (5.2), its
    own RDMA Read fills one; a bytes object registers for remote reading only."""
    owner, peer = await connected(fabric, region=1 << 14)
    landing, outgoing = bytearray(4096), bytearray(b"." * 64)
    every = AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE | AccessFlags.REMOTE_READ
    landing_mr, outgoing_mr = owner.pd.reg_mr(landing, every), owner.pd.reg_mr(outgoing, every)
    constant_mr = owner.pd.reg_mr(b"a constant", AccessFlags.REMOTE_READ)
    assert (landing_mr.length, landing_mr.buffer.obj) == (4096, landing)
    theirs = peer.mr
    theirs.write(b"written by the peer", 0)
    theirs.write(b"sent by the peer", 64)
    theirs.write(b"read from the peer", 128)
    owner.qp.post_recv(RecvWR(1, [SGE(landing_mr.buf + 2048, 64, landing_mr.lkey)]))
    peer.qp.post_send([
        SendWR(2, WROpcode.RDMA_WRITE, [SGE(theirs.buf, 19, theirs.lkey)], remote_addr=landing_mr.buf + 100,
               rkey=landing_mr.rkey),
        SendWR(3, WROpcode.SEND, [SGE(theirs.buf + 64, 16, theirs.lkey)]),
    ])
    (received,) = await owner.cq.wait(1)
    assert (received.wr_id, received.byte_len) == (1, 16)
    assert landing[100:119] == b"written by the peer" and landing[2048:2064] == b"sent by the peer"
    assert landing_mr.read(19, 100) == b"written by the peer"
    await peer.cq.wait(2)

    outgoing[0:13] = b"from python 1"  # the caller writes its own buffer, then posts from it
    peer.qp.post_recv(RecvWR(4, [SGE(theirs.buf + 1024, 64, theirs.lkey)]))
    owner.qp.post_send(SendWR(5, WROpcode.SEND, [SGE(outgoing_mr.buf, 13, outgoing_mr.lkey)]))
    owner.qp.post_send(SendWR(6, WROpcode.RDMA_READ, [SGE(landing_mr.buf + 3000, 18, landing_mr.lkey)],
                              remote_addr=theirs.buf + 128, rkey=theirs.rkey))
    await owner.cq.wait(2)
    await peer.cq.wait(1)
    assert theirs.read(13, 1024) == b"from python 1"
    assert landing[3000:3018] == b"read from the peer"

    outgoing[20:33] = b"from python 2"  # changed after the last post: the peer's Read still fetches it
    peer.qp.post_send([
        SendWR(7, WROpcode.RDMA_READ, [SGE(theirs.buf + 2048, 13, theirs.lkey)], remote_addr=outgoing_mr.buf + 20,
               rkey=outgoing_mr.rkey),
        SendWR(8, WROpcode.RDMA_READ, [SGE(theirs.buf + 2100, 10, theirs.lkey)], remote_addr=constant_mr.buf,
               rkey=constant_mr.rkey),
    ])
    await peer.cq.wait(2)
    assert theirs.read(13, 2048) == b"from python 2" and theirs.read(10, 2100) == b"a constant"
    landing_mr.dereg()
    assert landing[100:119] == b"written by the peer"  # the caller keeps its bytes


def test_the_callers_buffer_follows_the_region(backend):
    run(callers_buffers, backend)


def test_a_callers_buffer_must_fit_its_access(backend):
    async def main(fabric):
        pd = fabric.devices[0].alloc_pd()
        with pytest.raises(InvalidArgument, match="^buffer is read-only"):
            pd.reg_mr(b"constant", AccessFlags.LOCAL_WRITE)
        with pytest.raises(InvalidArgument, match="^buffer is not contiguous"):
            pd.reg_mr(memoryview(bytearray(16))[::2], AccessFlags.LOCAL_WRITE)
        with pytest.raises(WrongArgumentType, match="^length"):
            pd.reg_mr("a string", AccessFlags.LOCAL_WRITE)
        region = pd.reg_mr(bytearray(b"\x01\x02" * 8), AccessFlags.LOCAL_WRITE)
        region.write(b"zz", 4)  # MR.write writes the caller's buffer too
        assert bytes(region.buffer) == b"\x01\x02" * 2 + b"zz" + b"\x01\x02" * 5

    run(main, backend)


# -- protection domains (RFC 5041 8.2) ------------------------------------------------------------------


async def two_protection_domains(fabric) -> None:
    """Device 0 accepts two connections into two PDs, each with a region.  Through the connection of PD B the
    peer writes PD B's region; through the connection of PD A the same Write is refused: STag not associated
    with DDP Stream, DDP 0x1/0x02 (RFC 5041 7.2, 8.2), and that connection ends while PD B's goes on.  Locally,
    a queue pair names only its own PD's regions."""
    owner, peer = fabric.devices
    pds = [owner.alloc_pd(), owner.alloc_pd()]
    assert pds[0].pd_id != pds[1].pd_id
    every = AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE | AccessFlags.REMOTE_READ
    regions = [pd.reg_mr(1024, every) for pd in pds]
    regions[1].write(b"\xee" * 1024)  # a known fill (fresh memory is zeros on one backend, not on another)
    owner_cq = owner.create_cq(64)
    listener = owner.create_id()
    listener.listen()
    peer_pd, peer_cq = peer.alloc_pd(), peer.create_cq(64)
    source = peer_pd.reg_mr(1024, every)
    source.write(b"for domain B")
    peer_ids, owner_qps = [], []
    for pd in pds:
        cm_id = peer.create_id()
        cm_id.create_qp(peer_pd, peer_cq)
        cm_id.connect(owner.address)
        request = await listener.get_cm_event()
        owner_qps.append(request.id.create_qp(pd, owner_cq))
        request.id.accept()
        await cm_id.get_cm_event()
        peer_ids.append(cm_id)
    with pytest.raises(SgeOutsideRegion, match="protection domain"):
        owner_qps[0].post_send(SendWR(1, WROpcode.SEND, [SGE(regions[1].buf, 8, regions[1].lkey)]))

    def write(wr_id: int, offset: int) -> SendWR:
        return SendWR(wr_id, WROpcode.RDMA_WRITE, [SGE(source.buf, 12, source.lkey)],
                      remote_addr=regions[1].buf + offset, rkey=regions[1].rkey)

    peer_ids[1].qp.post_send(write(2, 0))
    assert [(wc.wr_id, wc.status) for wc in await peer_cq.wait(1)] == [(2, WCStatus.SUCCESS)]
    peer_ids[0].qp.post_send(write(3, 100))
    failed = [wc for wc in await peer_cq.wait(2) if not wc.ok]
    assert [(wc.wr_id, wc.status, tuple(wc.error)) for wc in failed] == [(3, WCStatus.REM_ACCESS_ERR, (DDP, 0x1, 0x02))]
    assert (await peer_ids[0].get_cm_event()).event_type.name == "DISCONNECTED"
    peer_ids[1].qp.post_send([write(4, 200), SendWR(5, WROpcode.RDMA_READ, [SGE(source.buf + 512, 12, source.lkey)],
                                                     remote_addr=regions[1].buf + 200, rkey=regions[1].rkey)])
    assert sorted((wc.wr_id, wc.status) for wc in await peer_cq.wait(2)) == [(4, WCStatus.SUCCESS),
                                                                              (5, WCStatus.SUCCESS)]
    assert source.read(12, 512) == b"for domain B"  # read back after the Write: it landed (RFC 5040 5.5)
    assert regions[1].read(12) == regions[1].read(12, 200) == b"for domain B"
    assert regions[1].read(12, 100) == b"\xee" * 12  # the refused Write placed nothing


def test_protection_domains_keep_their_regions(backend):
    run(two_protection_domains, backend)


def test_protection_domains_up_to_the_devices_limit(backend):
    """query_device().max_pd: the 16-bit PD field of the engine's rows bounds them; one more is refused."""
    device = open_fabric(backend).devices[0]
    limit = device.query_device().max_pd
    assert limit == 0xFFFF
    for _ in range(limit):
        device.alloc_pd()
    with pytest.raises(OutOfResources, match="protection domains"):
        device.alloc_pd()


# -- listening on several ports (rdma_bind_addr, rdma_listen) ------------------------------------------


SERVICE_PORT = 7000


async def two_listening_ports(fabric) -> None:
    """Device 0 listens on its own port and, through bind_addr, on SERVICE_PORT.  A connect to a port nobody
    listens on is REJECTED (RFC 4960 8.4 rule 3); a connect to SERVICE_PORT reaches that port's id alone, and a
    Send goes through; a second connection to the same port too.  While the device's one association is with
    SERVICE_PORT, a connect to another port of it is refused at once."""
    owner, peer = fabric.devices
    ip, own_port = owner.address
    default, service = owner.create_id(), owner.create_id()
    default.listen()
    service.bind_addr((ip, SERVICE_PORT))
    service.listen()
    with pytest.raises(AddressInUse, match=f"port {SERVICE_PORT}"):
        twin = owner.create_id()
        twin.bind_addr(("0.0.0.0", SERVICE_PORT))
        twin.listen()
    owner_pd, peer_pd = owner.alloc_pd(), peer.alloc_pd()
    owner_cq, peer_cq = owner.create_cq(64), peer.create_cq(64)
    owner_mr, peer_mr = owner_pd.reg_mr(1024, AccessFlags.LOCAL_WRITE), peer_pd.reg_mr(1024, AccessFlags.LOCAL_WRITE)

    def peer_id():
        cm_id = peer.create_id()
        cm_id.create_qp(peer_pd, peer_cq)
        return cm_id

    refused = peer_id()
    refused.connect((ip, SERVICE_PORT + 1))
    assert (await refused.get_cm_event()).event_type.name == "REJECTED"
    for number in range(2):
        cm_id = peer_id()
        cm_id.connect((ip, SERVICE_PORT), ConnParam(private_data=b"service %d" % number))
        request = await service.get_cm_event()
        assert request.private_data == b"service %d" % number
        qp = request.id.create_qp(owner_pd, owner_cq)
        qp.post_recv(RecvWR(number, [SGE(owner_mr.buf + 64 * number, 64, owner_mr.lkey)]))
        request.id.accept()
        await cm_id.get_cm_event()
        cm_id.qp.post_send(SendWR(10 + number, WROpcode.SEND, [SGE(peer_mr.buf, 8, peer_mr.lkey)]))
        assert [(wc.wr_id, wc.status) for wc in await owner_cq.wait(1)] == [(number, WCStatus.SUCCESS)]
    assert default.poll_cm_event() is None
    with pytest.raises(InvalidState, match="one association"):
        peer_id().connect((ip, own_port))


def test_ids_listening_on_two_ports(backend):
    run(two_listening_ports, backend)


def test_bind_addr_takes_the_devices_address_only(backend):
    async def main(fabric):
        device = fabric.devices[0]
        with pytest.raises(InvalidArgument, match=r"^address\[0\] \(ip\) 10.9.9.9"):
            device.create_id().bind_addr(("10.9.9.9", SERVICE_PORT))
        with pytest.raises(InvalidArgument, match=r"^address\[1\] \(port\)"):
            device.create_id().bind_addr((device.address[0], 0))
        listening = device.create_id()
        listening.listen()
        with pytest.raises(InvalidState, match="listening"):
            listening.bind_addr((device.address[0], SERVICE_PORT))

    run(main, backend)

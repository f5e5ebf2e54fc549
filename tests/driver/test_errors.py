"""Remote and local errors as error completions with their RFC numbers, and every misuse refused at once.

The numbers expected are the RFCs' tables: RFC 5041 7.2 (DDP layer 1: Tagged
Buffer Error type 1, Untagged Buffer Error type 2) and RFC 5040's RDMAP
Terminate codes (layer 0: Remote Protection Error type 1).
"""

import pytest

from driver import (
    SGE, AccessFlags, AddressInUse, BackendUnavailable, ConnParam, InvalidArgument, InvalidState, NotConnected,
    OrdExceeded, PrivateDataTooLong, QPCap, QPState, QueueFull, RecvWR, SendWR, SgeAccessDenied, SgeOutsideRegion,
    TooManySges, UnknownBackend, WCOpcode, WCStatus, WROpcode, open_fabric, run,
)
from tests.driver.harness import connected

DDP, RDMAP = 1, 0  # Terminate layers (RFC 5040 4.8)


def run_connected(body, backend, **options):
    result = {}

    async def main(fabric):
        server, client = await connected(fabric, **options)
        result["value"] = await body(fabric, server, client)

    run(main, backend)
    return result["value"]


def test_write_to_an_invalid_stag_completes_in_error_with_ddp_1_0(backend):
    """RFC 5041 7.2: Tagged Buffer Error, Invalid STag = layer DDP, type 0x1, code 0x00; the writer's completion
    names its Write (wr_id), the sink's names the error it found and its posted receive is flushed."""
    async def body(fabric, server, client):
        server.qp.post_recv(RecvWR(50, [SGE(server.mr.buf, 64, server.mr.lkey)]))
        bad_stag = server.mr.rkey ^ 0xFF  # the same index, another key: not a registered STag
        client.qp.post_send(SendWR(7, WROpcode.RDMA_WRITE, [SGE(client.mr.buf, 100, client.mr.lkey)],
                                   remote_addr=server.mr.buf, rkey=bad_stag))
        return await client.cq.wait(2), await server.cq.wait(2), client.qp.state, server.qp.state

    client_wcs, server_wcs, client_state, server_state = run_connected(body, backend)
    ok, failed = client_wcs
    assert (ok.wr_id, ok.status) == (7, WCStatus.SUCCESS)  # handed to SCTP (RFC 5041 5.4)
    assert failed.status is WCStatus.REM_ACCESS_ERR
    assert tuple(failed.error) == (DDP, 0x1, 0x00) and failed.remote
    assert failed.describe() == "Tagged Buffer Error: Invalid STag"
    local, flushed = server_wcs
    assert (local.status, tuple(local.error), local.remote) == (WCStatus.LOC_PROT_ERR, (DDP, 0x1, 0x00), False)
    assert (flushed.wr_id, flushed.status) == (50, WCStatus.WR_FLUSH_ERR)
    assert client_state is server_state is QPState.ERROR
    assert (failed.wr_id, failed.opcode) == (7, WCOpcode.RDMA_WRITE)  # named by the quoted STag and TO


def test_write_past_the_region_is_a_base_or_bounds_violation(backend):
    """RFC 5041 7.2: Base or bounds violation = DDP 0x1/0x01."""
    async def body(fabric, server, client):
        client.qp.post_send(SendWR(3, WROpcode.RDMA_WRITE, [SGE(client.mr.buf, 100, client.mr.lkey)],
                                   remote_addr=server.mr.buf + server.mr.length - 50, rkey=server.mr.rkey))
        return (await client.cq.wait(2))[1]

    failed = run_connected(body, backend)
    assert (failed.status, tuple(failed.error)) == (WCStatus.REM_ACCESS_ERR, (DDP, 0x1, 0x01))
    assert failed.wr_id == 3


def test_read_without_remote_read_access_fails_the_read_itself(backend):
    """RFC 5040 Remote Protection Error, Access rights violation = RDMAP 0x1/0x02; the Read is outstanding
    when the Terminate arrives, so its one completion is the error."""
    async def body(fabric, server, client):
        private = server.pd.reg_mr(256, AccessFlags.LOCAL_WRITE)
        client.qp.post_send(SendWR(9, WROpcode.RDMA_READ, [SGE(client.mr.buf, 64, client.mr.lkey)],
                                   remote_addr=private.buf, rkey=private.rkey))
        return await client.cq.wait(1)

    (failed,) = run_connected(body, backend)
    assert (failed.wr_id, failed.opcode, failed.status) == (9, WCOpcode.RDMA_READ, WCStatus.REM_ACCESS_ERR)
    assert tuple(failed.error) == (RDMAP, 0x1, 0x02)


def test_send_without_a_posted_receive_is_invalid_msn_no_buffer(backend):
    """RFC 5041 7.2: Untagged Buffer Error, Invalid MSN - no buffer available = DDP 0x2/0x02."""
    async def body(fabric, server, client):
        client.qp.post_send(SendWR(4, WROpcode.SEND, [SGE(client.mr.buf, 10, client.mr.lkey)]))
        client.qp.post_send(SendWR(5, WROpcode.SEND, [SGE(client.mr.buf, 10, client.mr.lkey)]))
        return await client.cq.wait(3)

    wcs = run_connected(body, backend)
    failed = [wc for wc in wcs if wc.status is not WCStatus.SUCCESS]
    assert [(wc.wr_id, wc.status, tuple(wc.error)) for wc in failed] == [(4, WCStatus.REM_OP_ERR, (DDP, 0x2, 0x02))]


def test_send_longer_than_the_posted_buffer_is_message_too_long(backend):
    """RFC 5041 7.2: DDP Message too long for available buffer = DDP 0x2/0x05."""
    async def body(fabric, server, client):
        server.qp.post_recv(RecvWR(1, [SGE(server.mr.buf, 100, server.mr.lkey)]))
        client.qp.post_send(SendWR(2, WROpcode.SEND, [SGE(client.mr.buf, 101, client.mr.lkey)]))
        return (await client.cq.wait(2))[1], await server.cq.wait(1)

    failed, (local,) = run_connected(body, backend)
    assert (failed.wr_id, failed.status, tuple(failed.error)) == (2, WCStatus.REM_INV_REQ_ERR, (DDP, 0x2, 0x05))
    assert (local.wr_id, local.status, tuple(local.error)) == (1, WCStatus.LOC_LEN_ERR, (DDP, 0x2, 0x05))


# -- misuse: typed errors at once --------------------------------------------------------


def test_post_send_on_an_unconnected_qp(backend):
    fabric = open_fabric(backend)
    device = fabric.devices[0]
    pd = device.alloc_pd()
    qp = device.create_id().create_qp(pd, device.create_cq())
    mr = pd.reg_mr(64)
    with pytest.raises(NotConnected):
        qp.post_send(SendWR(1, WROpcode.SEND, [SGE(mr.buf, 8, mr.lkey)]))
    qp.post_recv(RecvWR(1, [SGE(mr.buf, 8, mr.lkey)]))  # a receive may wait for the connection (verbs)


def test_sges_outside_their_region_or_without_the_access_needed(backend):
    async def body(fabric, server, client):
        qp, mr = client.qp, client.mr
        read_only = client.pd.reg_mr(64, AccessFlags(0))
        remote = dict(remote_addr=server.mr.buf, rkey=server.mr.rkey)
        raised = []
        for call in (
            lambda: qp.post_send(SendWR(1, WROpcode.SEND, [SGE(mr.buf + mr.length - 4, 8, mr.lkey)])),
            lambda: qp.post_send(SendWR(1, WROpcode.SEND, [SGE(mr.buf - 1, 8, mr.lkey)])),
            lambda: qp.post_send(SendWR(1, WROpcode.RDMA_WRITE, [SGE(mr.buf, 8, mr.lkey ^ 1)], **remote)),
            lambda: qp.post_recv(RecvWR(1, [SGE(read_only.buf, 8, read_only.lkey)])),
            lambda: qp.post_send(SendWR(1, WROpcode.RDMA_READ, [SGE(read_only.buf, 8, read_only.lkey)], **remote)),
            lambda: qp.post_recv(RecvWR(1, [SGE(mr.buf, 8, mr.lkey), SGE(mr.buf + 8, 8, mr.lkey)])),
            lambda: qp.post_send(SendWR(1, WROpcode.RDMA_READ, [SGE(mr.buf, 8, mr.lkey)] * 2, **remote)),
            lambda: qp.post_send(SendWR(1, WROpcode.SEND, [SGE(mr.buf, 1, mr.lkey)] * 5)),
        ):
            with pytest.raises(Exception) as info:
                call()
            raised.append(type(info.value))
        qp.post_send(SendWR(1, WROpcode.SEND, [SGE(read_only.buf, 8, read_only.lkey)]))  # local read is implicit
        return raised

    assert run_connected(body, backend) == [SgeOutsideRegion, SgeOutsideRegion, SgeOutsideRegion, SgeAccessDenied,
                                   SgeAccessDenied, TooManySges, TooManySges, TooManySges]


def test_rdma_read_past_the_negotiated_ord(backend):
    """RFC 5040 5.2 / RFC 6581 9: no more than ORD RDMA Reads outstanding; the next post is refused."""
    async def body(fabric, server, client):
        read = SendWR(1, WROpcode.RDMA_READ, [SGE(client.mr.buf, 8, client.mr.lkey)],
                      remote_addr=server.mr.buf, rkey=server.mr.rkey)
        for _ in range(2):
            client.qp.post_send(read)
        with pytest.raises(OrdExceeded):
            client.qp.post_send(read)
        await client.cq.wait(2)
        client.qp.post_send(read)  # the Reads completed: room again
        return client.qp.ord

    assert run_connected(body, backend, client_param=ConnParam(initiator_depth=2)) == 2


@pytest.mark.parametrize("where", ["connect", "accept", "reject"])
def test_private_data_too_long(where, backend):
    """RFC 5043 5.2.3: at most 512 bytes in any message, 4 of them the RFC 6581 9 enhanced data: 508 pass."""
    fits, too_long = b"x" * 508, b"x" * 509

    async def main(fabric):
        server, client = fabric.devices
        listener = server.create_id()
        listener.listen()
        cm_id = client.create_id()
        cm_id.create_qp(client.alloc_pd(), client.create_cq())
        if where == "connect":
            with pytest.raises(PrivateDataTooLong):
                cm_id.connect(server.address, ConnParam(private_data=too_long))
            assert cm_id.state.name == "IDLE"
        cm_id.connect(server.address, ConnParam(private_data=fits))
        request = await listener.get_cm_event()
        assert request.private_data == fits
        request.id.create_qp(server.alloc_pd(), server.create_cq())
        if where == "accept":
            with pytest.raises(PrivateDataTooLong):
                request.id.accept(ConnParam(private_data=too_long))
        if where == "reject":
            with pytest.raises(PrivateDataTooLong):
                request.id.reject(too_long)

    run(main, backend)


def test_wrong_states_and_arguments(backend):
    fabric = open_fabric(backend)
    server, client = fabric.devices
    server.create_id().listen()
    with pytest.raises(AddressInUse):
        server.create_id().listen()
    with pytest.raises(InvalidState):
        client.create_id().accept()
    with pytest.raises(InvalidState):  # connect needs a queue pair
        client.create_id().connect(server.address)
    pd = client.alloc_pd()
    with pytest.raises(InvalidArgument):  # ibv_reg_mr: remote write needs local write
        pd.reg_mr(64, AccessFlags.REMOTE_WRITE)
    cm_id = client.create_id()
    cm_id.create_qp(pd, client.create_cq())
    with pytest.raises(InvalidArgument):
        cm_id.connect(server.address, ConnParam(responder_resources=client.attr.max_qp_rd_atom + 1))


def test_backend_names():
    with pytest.raises(BackendUnavailable, match="runs inside a cocotb test"):
        open_fabric("sim")
    with pytest.raises(UnknownBackend):
        open_fabric("board9")


def test_queue_full_past_the_qp_capacity(backend):
    async def body(fabric, server, client):
        mr = client.mr
        client.qp.post_recv(RecvWR(1, [SGE(mr.buf, 8, mr.lkey)]))
        with pytest.raises(QueueFull):
            client.qp.post_recv(RecvWR(2, [SGE(mr.buf, 8, mr.lkey)]))
        # the Write is outstanding until its completion arrives (the fabric runs only while this coroutine waits)
        client.qp.post_send(SendWR(1, WROpcode.RDMA_WRITE, [SGE(mr.buf, 8, mr.lkey)],
                                   remote_addr=server.mr.buf, rkey=server.mr.rkey))
        with pytest.raises(QueueFull):
            client.qp.post_send(SendWR(2, WROpcode.SEND, [SGE(mr.buf, 8, mr.lkey)]))
        await client.cq.wait(1)
        client.qp.post_send(SendWR(3, WROpcode.SEND, [SGE(mr.buf, 8, mr.lkey)]))
        return True

    assert run_connected(body, backend, cap=QPCap(max_send_wr=1, max_recv_wr=1))

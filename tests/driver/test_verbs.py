"""The verbs that applications use beside the basic posts: lists of work requests and unsignaled sends.

Expectations are verbs' (ibv_post_send, ibv_qp_init_attr.sq_sig_all,
IBV_SEND_SIGNALED): on a queue pair created with `sq_sig_all=False` only the
requests posted SIGNALED complete successfully to the CQ, while a request
that fails completes whatever its flag; the data of every request moves all
the same (RFC 5040 5).  A list of requests is posted in order and stops at
the first one refused, which the error names and holds (`bad_wr`): those
before it are posted, those after it are not.

Each program makes its own checks and runs unchanged on every backend: here
on `soft` and `engine`, on the model board (`test_board_backend.py`), and on
the gateware (`sim`, the slow set, `test_verbs_sim.py`); device 0, the one
that posts, is the board's or the RTL's host there.
"""

from __future__ import annotations

import pytest

from driver import SGE, RecvWR, SendFlags, SendWR, SgeOutsideRegion, WCOpcode, WCStatus, WROpcode, WrongArgumentType, run
from tests.driver.harness import connected

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

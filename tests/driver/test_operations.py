"""Every RDMAP operation both ways through the driver's verbs, over a lossless and a 1%-lossy link (RFC 5040 5).

Expectations come from RFC 5040: the bytes land where the work request said, a
Send with Invalidate revokes the named STag at the receiver (5.3) and says so
in the receive completion, receives complete in the order posted (RFC 5041
5.3), and every completion carries the caller's wr_id, opcode and length.
"""

import random

import pytest

from driver import (
    SGE, AccessFlags, LinkConfig, RecvWR, SendFlags, SendWR, WCFlags, WCOpcode, WCStatus, WROpcode, run,
)
from tests.driver.harness import connected

SIZE = 20_000
"""Each message spans many DDP segments (MULPDU is about 1.4 KiB on a 1500-byte MTU)."""

SENDS = (  # (opcode, solicited)
    (WROpcode.SEND, False),
    (WROpcode.SEND_WITH_INV, False),
    (WROpcode.SEND, True),
    (WROpcode.SEND_WITH_INV, True),
)


async def every_operation(fabric):
    server, client = await connected(fabric)
    sides = {"server": server, "client": client}
    payload = {name: random.Random(name).randbytes(SIZE) for name in sides}
    layout = {"source": 0, "write_sink": SIZE, "read_sink": 2 * SIZE, "receives": 3 * SIZE}
    targets = {}
    for name, side in sides.items():
        side.mr.write(payload[name], layout["source"])
        targets[name] = [side.pd.reg_mr(64, AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE) for _ in range(2)]
        for index in range(len(SENDS)):
            side.qp.post_recv(RecvWR(100 + index, [SGE(side.mr.buf + layout["receives"] + index * SIZE, SIZE,
                                                       side.mr.lkey)]))
    for name, side in sides.items():
        peer_name = "client" if name == "server" else "server"
        peer = sides[peer_name]
        mr = side.mr
        half = SIZE // 2  # a gather list of two SGEs, the halves swapped
        gather = [SGE(mr.buf + half, SIZE - half, mr.lkey), SGE(mr.buf, half, mr.lkey)]
        side.qp.post_send(SendWR(1, WROpcode.RDMA_WRITE, gather, remote_addr=peer.mr.buf + layout["write_sink"],
                                 rkey=peer.mr.rkey))
        side.qp.post_send(SendWR(2, WROpcode.RDMA_READ, [SGE(mr.buf + layout["read_sink"], SIZE, mr.lkey)],
                                 remote_addr=peer.mr.buf + layout["source"], rkey=peer.mr.rkey))
        invalidate = iter(targets[peer_name])
        for index, (opcode, solicited) in enumerate(SENDS):
            side.qp.post_send(SendWR(10 + index, opcode, [SGE(mr.buf, SIZE, mr.lkey)],
                                     SendFlags.SOLICITED if solicited else SendFlags.NONE,
                                     invalidate_rkey=next(invalidate).rkey if opcode is WROpcode.SEND_WITH_INV
                                     else None))
    completions = {name: await side.cq.wait(2 + 2 * len(SENDS)) for name, side in sides.items()}
    return sides, payload, layout, targets, completions


async def every_operation_checked(fabric, loss: float = 0.0) -> None:
    """`every_operation`, then every byte and completion checked (RFC 5040 5.1-5.3, RFC 5041 5.3); a lossy link
    must have lost frames, or retransmission was not tested.  Runs on every backend, `sim` included."""
    sides, payload, layout, targets, completions = await every_operation(fabric)
    if loss:
        assert fabric.backend.pair.link.stats.lost > 0, "the lossy run lost no frame: it would not test retransmission"
    half = SIZE // 2
    for name, side in sides.items():
        peer_name = "client" if name == "server" else "server"
        peer_bytes = payload[peer_name]
        assert side.mr.read(SIZE, layout["write_sink"]) == peer_bytes[half:] + peer_bytes[:half]
        assert side.mr.read(SIZE, layout["read_sink"]) == peer_bytes
        for index in range(len(SENDS)):
            assert side.mr.read(SIZE, layout["receives"] + index * SIZE) == peer_bytes
        wcs = completions[name]
        assert all(wc.status is WCStatus.SUCCESS and wc.qp is side.qp for wc in wcs)
        local = sorted((wc.wr_id, wc.opcode, wc.byte_len) for wc in wcs if wc.opcode is not WCOpcode.RECV)
        assert local == [(1, WCOpcode.RDMA_WRITE, SIZE), (2, WCOpcode.RDMA_READ, SIZE)] + [
            (10 + i, WCOpcode.SEND, SIZE) for i in range(len(SENDS))]
        receives = [wc for wc in wcs if wc.opcode is WCOpcode.RECV]
        assert [wc.wr_id for wc in receives] == [100, 101, 102, 103]  # in the order posted
        assert [wc.byte_len for wc in receives] == [SIZE] * 4
        assert [wc.solicited for wc in receives] == [solicited for _, solicited in SENDS]
        expected_invalidated = [None, targets[name][0].rkey, None, targets[name][1].rkey]
        assert [wc.invalidated_rkey for wc in receives] == expected_invalidated
        assert [bool(wc.wc_flags & WCFlags.WITH_INV) for wc in receives] == [False, True, False, True]
        assert [mr.valid for mr in targets[name]] == [False, False]  # RFC 5040 5.3: revoked by the peer's Send


async def every_operation_lossy(fabric) -> None:
    await every_operation_checked(fabric, LOSS)


LOSS = 0.01
LOSSY_LINK = LinkConfig(loss=LOSS, seed=7)


@pytest.mark.parametrize("link", [LinkConfig(seed=7), LOSSY_LINK], ids=["lossless", "lossy"])
def test_every_operation_both_ways(link, backend):
    async def main(fabric):
        await every_operation_checked(fabric, link.loss)

    run(main, backend, link=link, seed=3)


def test_zero_length_send_write_and_read(backend):
    """RFC 5041 5.2: a zero-length message is one segment; each completes with byte_len 0."""
    result = {}

    async def main(fabric):
        server, client = await connected(fabric)
        server.qp.post_recv(RecvWR(5, []))
        client.qp.post_send(SendWR(1, WROpcode.SEND, []))
        client.qp.post_send(SendWR(2, WROpcode.RDMA_WRITE, [], remote_addr=server.mr.buf, rkey=server.mr.rkey))
        client.qp.post_send(SendWR(3, WROpcode.RDMA_READ, [SGE(client.mr.buf, 0, client.mr.lkey)],
                                   remote_addr=server.mr.buf, rkey=server.mr.rkey))
        result["client"] = await client.cq.wait(3)
        result["server"] = await server.cq.wait(1)

    run(main, backend)
    assert [(wc.wr_id, wc.status, wc.byte_len) for wc in result["client"]] == [
        (1, WCStatus.SUCCESS, 0), (2, WCStatus.SUCCESS, 0), (3, WCStatus.SUCCESS, 0)]
    assert [(wc.wr_id, wc.opcode, wc.byte_len) for wc in result["server"]] == [(5, WCOpcode.RECV, 0)]

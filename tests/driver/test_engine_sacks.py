"""`engine_sacks`: the receive engine SACKs the peer's DATA (RFC 4960 6.2), and the host still sends the SACK it
owes ahead of a Terminate (the flush write of the `sack` row), as a host SCTP bundles it (RFC 4960 6.10). So a
message the peer sent before the one in error completes there before the Terminate's error arrives (RFC 5040
5.5: completions in order), the same completions as when the host SACKs.

The programs are those of test_errors.py and test_terminate.py whose outcome depends on that order.
"""

import pytest

from driver import SGE, AccessFlags, SendWR, WCStatus, WROpcode, run
from tests.driver.harness import connected

DDP = 1


def completions(body, backend: str, **options) -> list[tuple]:
    result = {}

    async def main(fabric):
        server, client = await connected(fabric)
        result["value"] = await body(server, client)

    run(main, backend, **options)
    return [(wc.wr_id, wc.status, tuple(wc.error) if wc.error else None) for wc in result["value"]]


async def two_sends_without_a_posted_receive(server, client):
    """RFC 5041 7.2: the first Send is Invalid MSN - no buffer available (DDP 0x2/0x02); the second, sent
    before the Terminate came back, was acknowledged first."""
    for wr_id in (4, 5):
        client.qp.post_send(SendWR(wr_id, WROpcode.SEND, [SGE(client.mr.buf, 10, client.mr.lkey)]))
    return await client.cq.wait(3)


async def a_write_to_a_deregistered_stag(server, client):
    """RFC 5041 7.2: Invalid STag (DDP 0x1/0x00) for a Write of two segments, and a second Write after it."""
    region = server.pd.reg_mr(4096, AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE)
    region.dereg()
    for wr_id in (52, 53):
        client.qp.post_send(SendWR(wr_id, WROpcode.RDMA_WRITE, [SGE(client.mr.buf, 2000, client.mr.lkey)],
                                   remote_addr=region.buf + 7, rkey=region.rkey))
    return await client.cq.wait(3)


async def one_write_to_an_invalid_stag(server, client):
    """One packet, its SACK delayed at the engine: the Write is handed over (acknowledged, RFC 5041 5.4) before
    the Terminate's error names it (DDP 0x1/0x00)."""
    client.qp.post_send(SendWR(7, WROpcode.RDMA_WRITE, [SGE(client.mr.buf, 8, client.mr.lkey)],
                               remote_addr=server.mr.buf, rkey=server.mr.rkey ^ 0xFF))
    return await client.cq.wait(2)


@pytest.mark.parametrize("program", [two_sends_without_a_posted_receive, a_write_to_a_deregistered_stag,
                                     one_write_to_an_invalid_stag])
def test_the_engine_sacks_give_the_host_sacks_completions(program):
    expected = completions(program, "engine")
    got = completions(program, "engine", engine_sacks=True)
    assert got == expected
    assert sum(status is not WCStatus.SUCCESS for _, status, _ in got) == 1   # one error, nothing flushed


def test_the_errors_are_the_rfcs():
    got = completions(two_sends_without_a_posted_receive, "engine", engine_sacks=True)
    assert sorted(got, key=lambda c: c[1] is not WCStatus.SUCCESS) == [
        (4, WCStatus.SUCCESS, None), (5, WCStatus.SUCCESS, None), (4, WCStatus.REM_OP_ERR, (DDP, 0x2, 0x02))]
    got = completions(a_write_to_a_deregistered_stag, "engine", engine_sacks=True)
    assert [c for c in got if c[1] is not WCStatus.SUCCESS] == [(52, WCStatus.REM_ACCESS_ERR, (DDP, 0x1, 0x00))]
    assert completions(one_write_to_an_invalid_stag, "engine", engine_sacks=True) == [
        (7, WCStatus.SUCCESS, None), (7, WCStatus.REM_ACCESS_ERR, (DDP, 0x1, 0x00))]

"""The engine backend with a wider STag key (`key_bits`, issue 30 item 3): STag = row << key_bits | key.

Expectations: an STag is 32 bits (RFC 5041 4.2) whose structure the implementation chooses (8.2); a key drawn
afresh for each registration makes the STag of a deregistered region an Invalid STag (RFC 5041 7.2: DDP layer 1,
Tagged Buffer Error 0x1, code 0x00) for the row's next region, and a guess must match all of the key.
"""

import pytest

from driver import SGE, InvalidArgument, SendWR, WCStatus, WROpcode, open_fabric, run
from tests.driver.harness import ALL_ACCESS, connected

KEY_BITS = 16
DDP = 1


def test_write_and_read_exact_with_16_bit_keys():
    """A Write then a Read on the engine backend with 16-bit keys: every byte lands, every byte comes back; the
    STags are row << 16 | key with rows of the 16-row table."""
    async def main(fabric):
        server, client = await connected(fabric, region=1 << 16)
        payload = bytes((i * 7 + 3) & 0xFF for i in range(20000))
        client.mr.write(payload)
        client.qp.post_send([
            SendWR(1, WROpcode.RDMA_WRITE, [SGE(client.mr.buf, len(payload), client.mr.lkey)],
                   remote_addr=server.mr.buf + 100, rkey=server.mr.rkey),
            SendWR(2, WROpcode.RDMA_READ, [SGE(client.mr.buf + 30000, len(payload), client.mr.lkey)],
                   remote_addr=server.mr.buf + 100, rkey=server.mr.rkey),
        ])
        wcs = await client.cq.wait(2)
        return ([(wc.wr_id, wc.status) for wc in wcs], server.mr.read(len(payload), 100),
                client.mr.read(len(payload), 30000), payload, server.mr.rkey, client.mr.rkey)

    wcs, written, read_back, payload, server_rkey, client_rkey = run(main, "engine", key_bits=KEY_BITS)
    assert wcs == [(1, WCStatus.SUCCESS), (2, WCStatus.SUCCESS)]
    assert written == payload and read_back == payload
    for rkey in (server_rkey, client_rkey):
        assert 1 <= rkey >> KEY_BITS < 16


def test_a_stale_stag_after_reregistration_is_invalid_with_16_bit_keys():
    """The server deregisters its region and registers another, which takes the freed row with a new key: the
    client's Write with the old STag fails Invalid STag and places nothing; with the new STag it lands."""
    async def main(fabric):
        server, client = await connected(fabric, region=1 << 14)
        stale = server.mr.rkey
        server.mr.dereg()
        fresh = server.pd.reg_mr(1 << 14, ALL_ACCESS)
        fresh.write(bytes(64))
        client.mr.write(b"stale STag bytes")
        client.qp.post_send(SendWR(1, WROpcode.RDMA_WRITE, [SGE(client.mr.buf, 16, client.mr.lkey)],
                                   remote_addr=fresh.buf, rkey=stale))
        ok, failed = await client.cq.wait(2)
        return stale, fresh.rkey, failed.status, tuple(failed.error), fresh.read(16)

    stale, fresh, status, error, landed = run(main, "engine", key_bits=KEY_BITS)
    assert stale >> KEY_BITS == fresh >> KEY_BITS and stale != fresh  # the same row, another key
    assert status is WCStatus.REM_ACCESS_ERR and error == (DDP, 0x1, 0x00)
    assert landed == bytes(16)


@pytest.mark.parametrize("key_bits, message", [(7, "key_bits 7 is not within 8..28"),
                                               (29, "key_bits 29 is not within 8..28"),
                                               ("16", "key_bits must be an int")])
def test_a_key_width_the_engine_cannot_build_is_refused(key_bits, message):
    """At least 8 bits; with the 16 rows' 4 index bits, at most 28 (32 in all)."""
    with pytest.raises(InvalidArgument, match=message):
        open_fabric("engine", key_bits=key_bits)


def test_the_widest_key_the_engine_can_build_is_taken():
    assert open_fabric("engine", key_bits=28).devices


def test_only_the_engine_backend_takes_key_bits():
    with pytest.raises(InvalidArgument, match="key_bits"):
        open_fabric("soft", key_bits=KEY_BITS)

"""Devices of their own on loopback UDP (`driver.open_device`, RFC 6951): the verbs and rdma_cm calls as on a
fabric, bytes and completions checked against what was written."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace

import pytest

from driver import (AddressNotResolved, CMEventType, InvalidArgument, SendWR, RecvWR, SGE, TransportError,
                    WCOpcode, WROpcode, open_device)
from driver.transports import parse_spec
from tests.driver.harness import connected

FAST = dict(rto_initial=0.2, rto_min=0.1, rto_max=0.5)


def pair(**options):
    """A listening device and a connecting one on 127.0.0.1, UDP ports the kernel picks."""
    return SimpleNamespace(devices=(open_device("udp:127.0.0.1:0", **options),
                                    open_device("udp:127.0.0.1:0", **options)))


def test_specs_and_the_rfc_6951_default_port() -> None:
    assert parse_spec("udp:")[:3] == ("udp", "", 9899)
    assert parse_spec("udp:10.1.2.3")[:3] == ("udp", "10.1.2.3", 9899)
    assert parse_spec("udp::5000")[:3] == ("udp", "", 5000)
    assert parse_spec("ip:10.1.2.3")[:3] == ("ip", "10.1.2.3", 9899)
    assert parse_spec("eth:veth0:10.1.2.3:5001") == ("eth", "10.1.2.3", 5001, "veth0")
    for bad in ("tcp:1.2.3.4:5", "udp:host:port", "udp::70000", "ip:", "udp", "eth:veth0", "eth::10.1.2.3",
                "ip::5000"):
        with pytest.raises(TransportError):
            parse_spec(bad)


def test_a_name_that_does_not_resolve_is_a_typed_error() -> None:
    with pytest.raises(AddressNotResolved):
        open_device("udp:no-such-host.invalid:0")


def test_seeds_and_addresses_are_not_options_of_a_real_device() -> None:
    for option in ({"seed": 1}, {"ip": "1.2.3.4"}, {"udp": False}):
        with pytest.raises(InvalidArgument):
            open_device("udp:127.0.0.1:0", **option)


def test_write_read_send_between_two_devices_over_loopback_udp() -> None:
    async def main():
        fabric = pair(**FAST)
        server, client = await connected(fabric, region=1 << 16)
        payload = random.Random(7).randbytes(20000)   # many DDP segments (MULPDU 1426 at MTU 1500)
        client.mr.write(payload, 0)
        # RDMA Write client -> server, then RDMA Read it back into the client's second half
        client.qp.post_send(SendWR(1, WROpcode.RDMA_WRITE, [SGE(client.mr.buf, len(payload), client.mr.lkey)],
                                   remote_addr=server.mr.buf + 100, rkey=server.mr.rkey))
        client.qp.post_send(SendWR(2, WROpcode.RDMA_READ, [SGE(client.mr.buf + 30000, len(payload), client.mr.lkey)],
                                   remote_addr=server.mr.buf + 100, rkey=server.mr.rkey))
        completions = await client.cq.wait(2, timeout=10)
        assert [(wc.wr_id, wc.opcode, wc.ok) for wc in completions] == [(1, WCOpcode.RDMA_WRITE, True),
                                                                         (2, WCOpcode.RDMA_READ, True)]
        assert server.mr.read(len(payload), 100) == payload
        assert client.mr.read(len(payload), 30000) == payload
        # a Send into a posted receive
        server.qp.post_recv(RecvWR(9, [SGE(server.mr.buf + 40000, 5000, server.mr.lkey)]))
        client.qp.post_send(SendWR(3, WROpcode.SEND, [SGE(client.mr.buf, 4321, client.mr.lkey)]))
        (received,) = await server.cq.wait(1, timeout=10)
        assert (received.wr_id, received.opcode, received.byte_len) == (9, WCOpcode.RECV, 4321)
        assert server.mr.read(4321, 40000) == payload[:4321]
        await client.cq.wait(1, timeout=10)
        client.id.disconnect()
        for side in (client, server):
            event = await side.id.get_cm_event(timeout=10)
            assert event.event_type is CMEventType.DISCONNECTED
        for device in fabric.devices:
            statistics = device.statistics()
            assert statistics.datagrams_received > 0 and statistics.dropped_bad_checksum == 0
        client.device.close()
        await asyncio.gather(*(device.wait_closed(timeout=10) for device in fabric.devices))

    asyncio.run(main())


def test_connect_resolves_a_host_name() -> None:
    async def main():
        server, client = pair(**FAST).devices
        listener = server.create_id()
        listener.listen()
        pd, cq = client.alloc_pd(), client.create_cq()
        connection = client.create_id()
        connection.create_qp(pd, cq)
        connection.connect(("localhost", server.address[1]))
        request = await listener.get_cm_event(timeout=10)
        assert request.event_type is CMEventType.CONNECT_REQUEST
        for device in (client, server):
            device.close()

    asyncio.run(main())

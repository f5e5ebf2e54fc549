"""Devices on SCTP straight over IPv4 (`ip:ADDRESS`, protocol 132, a raw socket): two of them on loopback
addresses 127.0.0.1 and 127.0.0.2, where this process may open raw sockets (CAP_NET_RAW); and the typed error
where it may not."""

from __future__ import annotations

import asyncio
import os
import socket
from types import SimpleNamespace

import pytest

from driver import SGE, CMEventType, SendWR, TransportNotPermitted, WCOpcode, WROpcode, open_device
from tests.driver.harness import connected


LACKS_CAP_NET_RAW = "raw IPv4 sockets need CAP_NET_RAW, which this process lacks"


def raw_sockets_allowed() -> str | None:
    """None where a raw SCTP socket opens, else why not."""
    try:
        socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_SCTP).close()
    except PermissionError:
        return LACKS_CAP_NET_RAW
    except OSError as error:
        return f"no raw SCTP socket here: {error}"
    if os.path.exists("/sys/module/sctp"):
        return "the kernel's SCTP module is loaded: it would answer the same packets (RFC 4960 8.4)"
    return None


@pytest.mark.skipif(raw_sockets_allowed() is not None, reason=str(raw_sockets_allowed()))
def test_write_and_read_between_two_raw_ipv4_devices() -> None:
    async def main():
        fabric = SimpleNamespace(devices=(open_device("ip:127.0.0.1:5001"), open_device("ip:127.0.0.2:5002")))
        assert [device.address for device in fabric.devices] == [("127.0.0.1", 5001), ("127.0.0.2", 5002)]
        server, client = await connected(fabric, region=1 << 16)
        payload = bytes(range(256)) * 40
        client.mr.write(payload)
        client.qp.post_send(SendWR(1, WROpcode.RDMA_WRITE, [SGE(client.mr.buf, len(payload), client.mr.lkey)],
                                   remote_addr=server.mr.buf, rkey=server.mr.rkey))
        client.qp.post_send(SendWR(2, WROpcode.RDMA_READ, [SGE(client.mr.buf + 20000, len(payload),
                                                               client.mr.lkey)],
                                   remote_addr=server.mr.buf, rkey=server.mr.rkey))
        completions = await client.cq.wait(2, timeout=10)
        client.id.disconnect()
        event = await server.id.get_cm_event(timeout=10)
        landed, read_back = server.mr.read(len(payload)), client.mr.read(len(payload), 20000)
        for device in fabric.devices:
            device.fabric.backend.close()
        return completions, event, landed, read_back, payload

    completions, event, landed, read_back, payload = asyncio.run(main())
    assert [(wc.wr_id, wc.opcode, wc.ok) for wc in completions] == [(1, WCOpcode.RDMA_WRITE, True),
                                                                     (2, WCOpcode.RDMA_READ, True)]
    assert event.event_type is CMEventType.DISCONNECTED
    assert landed == payload and read_back == payload


def test_raw_ipv4_without_the_privilege_is_a_typed_error(monkeypatch) -> None:
    """The kernel's refusal (EPERM) is `TransportNotPermitted`, saying what is missing; where this process lacks
    CAP_NET_RAW the real socket is refused, elsewhere the refusal is made for it."""
    if raw_sockets_allowed() != LACKS_CAP_NET_RAW:
        real_socket = socket.socket

        def refusing(family=-1, kind=-1, proto=-1, *rest):
            if kind == socket.SOCK_RAW:
                raise PermissionError(1, "Operation not permitted")
            return real_socket(family, kind, proto, *rest)

        monkeypatch.setattr(socket, "socket", refusing)
    with pytest.raises(TransportNotPermitted, match="CAP_NET_RAW"):
        open_device("ip:127.0.0.1")

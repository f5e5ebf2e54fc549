"""Item 3 of issue 31: a device on a real network draws its verification tags, initial TSNs, cookie key and STag
keys from the system's generator (RFC 4960 5.1.3, 5.3.1; RFC 4086; RFC 5042 5), so two opens differ; the
simulated backends keep their seeds, so two runs of a seed are the same."""

from __future__ import annotations

import asyncio
import socket

from driver import AccessFlags, open_device, open_fabric
from model.sctp.packet import InitAckChunk, InitChunk, SctpPacket

KEYS = 16
"""STags registered per device: their 8-bit keys (RFC 5040 2.1 STag Key) compared as one sequence."""


def _init_of(**options) -> InitChunk:
    """The INIT a fresh device (with `options`) sends when it connects to a UDP socket of the test's."""
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    peer.bind(("127.0.0.1", 0))
    peer.settimeout(5)
    device = open_device("udp:127.0.0.1:0", **options)

    async def connect() -> bytes:
        pd, cq = device.alloc_pd(), device.create_cq()
        connection = device.create_id()
        connection.create_qp(pd, cq)
        connection.connect(peer.getsockname())
        await asyncio.sleep(0.05)   # the device's loop sends the INIT
        return peer.recv(2048)

    try:
        datagram = asyncio.run(connect())
    finally:
        device.fabric.backend.close()
        peer.close()
    packet = SctpPacket.decode(datagram)
    assert packet.verification_tag == 0   # RFC 4960 8.5.1 A
    (init,) = packet.chunks
    assert isinstance(init, InitChunk)
    return init


def _stag_keys(device) -> list[int]:
    pd = device.alloc_pd()
    return [pd.reg_mr(64, AccessFlags.REMOTE_WRITE | AccessFlags.LOCAL_WRITE).rkey & 0xFF for _ in range(KEYS)]


def test_two_opens_draw_different_tags_tsns_and_stag_keys() -> None:
    first, second = _init_of(), _init_of()
    assert first.initiate_tag != second.initiate_tag
    assert first.initial_tsn != second.initial_tsn
    devices = [open_device("udp:127.0.0.1:0") for _ in range(2)]
    try:
        assert _stag_keys(devices[0]) != _stag_keys(devices[1])
    finally:
        for device in devices:
            device.fabric.backend.close()


def test_two_devices_answer_one_init_with_different_cookies() -> None:
    """The same INIT (same tag and TSN) to two listening devices: State Cookies signed with different keys and
    different tags (RFC 4960 5.1.3)."""
    init = SctpPacket(5000, 0, 0, (InitChunk(initiate_tag=0x1234567, a_rwnd=65536, outbound_streams=8,
                                             inbound_streams=8, initial_tsn=42),))
    cookies = []
    for _ in range(2):
        device = open_device("udp:127.0.0.1:0")
        peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        peer.bind(("127.0.0.1", 0))
        peer.settimeout(5)

        async def ask() -> bytes:
            device.create_id().listen()
            packet = SctpPacket(5000, device.address[1], 0, init.chunks)
            peer.sendto(packet.encode(), device.address)
            await asyncio.sleep(0.05)
            return peer.recv(2048)

        try:
            answer = SctpPacket.decode(asyncio.run(ask()))
        finally:
            device.fabric.backend.close()
            peer.close()
        assert answer.verification_tag == 0x1234567
        (ack,) = answer.chunks
        assert isinstance(ack, InitAckChunk)
        cookies.append((ack.initiate_tag, ack.initial_tsn, ack.state_cookie))
    assert cookies[0][0] != cookies[1][0] and cookies[0][1] != cookies[1][1] and cookies[0][2] != cookies[1][2]


def test_the_soft_backend_keeps_its_seeded_draws() -> None:
    runs = []
    for _ in range(2):
        server, client = open_fabric("soft", seed=3).devices
        runs.append((_stag_keys(server), _stag_keys(client)))
    assert runs[0] == runs[1]


def test_a_device_on_a_real_network_announces_its_one_mib_window_unless_told() -> None:
    """RFC 4960 6.2 leaves a_rwnd to the implementation (at least 1500): a device on a real transport announces
    1 MiB in its INIT (`driver.backends.network.NETWORK_BUFFER`), and `receive_buffer` sets another."""
    assert _init_of().a_rwnd == 1 << 20
    assert _init_of(receive_buffer=4096).a_rwnd == 4096

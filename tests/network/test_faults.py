"""Faults a real network brings (issue 31 item 4), over loopback UDP: a peer process killed mid-transfer, a
peer restarted on the same port, and datagrams at the device's port that are garbage, truncated, from a
stranger, with a wrong verification tag or a wrong checksum."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from driver import (SGE, AccessFlags, AssociationEnd, CMEventType, QPCap, SendWR, WCOpcode, WCStatus,
                    WROpcode, open_device)
from model.ddp.segment import DdpSegment, TaggedHeader
from model.net.checksum import sctp_checksum, sctp_checksum_to_bytes
from model.rdmap.messages import Opcode, tagged_rsvd_ulp
from model.sctp.packet import PPID_DDP_SEGMENT, DataChunk, SctpPacket
from tests.driver.harness import connected
from tests.network.peer_program import FAST

ROOT = Path(__file__).resolve().parents[2]
WRITES = 32
WRITE_BYTES = 64 * 1024
WAIT = 30.0


def start_peer(port: int = 0) -> tuple[subprocess.Popen, int]:
    peer = subprocess.Popen([sys.executable, "-m", "tests.network.peer_program", str(port)], cwd=ROOT, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE)
    line = peer.stdout.readline()
    assert line.startswith("listening "), line
    return peer, int(line.split()[1])


async def connect(device, port: int):
    """A connection to the peer process; its QP, CQ and region, and the peer's region from its accept."""
    pd, cq = device.alloc_pd(), device.create_cq(4096)
    region = pd.reg_mr(WRITE_BYTES, AccessFlags.LOCAL_WRITE)
    cm_id = device.create_id()
    qp = cm_id.create_qp(pd, cq, cap=QPCap(max_send_wr=WRITES + 1, max_send_sge=1))
    cm_id.connect(("127.0.0.1", port))
    established = await cm_id.get_cm_event(timeout=WAIT)
    assert established.event_type is CMEventType.ESTABLISHED, established
    return SimpleNamespace(cm_id=cm_id, qp=qp, cq=cq, region=region, peer=json.loads(established.private_data))


def test_a_peer_killed_mid_transfer_fails_the_association_and_flushes_the_work() -> None:
    """RFC 4960 8.1: the survivor's DATA goes unacknowledged until Association.Max.Retrans is spent; the
    association fails, the connection is DISCONNECTED, and every request posted completes: the Writes handed to
    SCTP before the end successfully (RFC 5041 5.4), the rest and the Read flushed."""
    peer, port = start_peer()

    async def main():
        device = open_device("udp:127.0.0.1:0", **FAST)
        connection = await connect(device, port)
        for wr_id in range(WRITES):
            connection.qp.post_send(SendWR(wr_id, WROpcode.RDMA_WRITE, [SGE(connection.region.buf, WRITE_BYTES,
                                                                            connection.region.lkey)],
                                           remote_addr=connection.peer["addr"], rkey=connection.peer["rkey"]))
        completions = await connection.cq.wait(2, timeout=WAIT)   # mid-transfer: two Writes handed over
        peer.send_signal(signal.SIGKILL)
        peer.wait()
        connection.qp.post_send(SendWR(WRITES, WROpcode.RDMA_READ, [SGE(connection.region.buf, 64,
                                                                        connection.region.lkey)],
                                       remote_addr=connection.peer["addr"], rkey=connection.peer["rkey"]))
        event = await connection.cm_id.get_cm_event(timeout=WAIT)
        completions += connection.cq.poll(WRITES + 1)
        end = await device.wait_closed(timeout=WAIT)
        device.fabric.backend.close()
        return event, completions, end

    try:
        event, completions, end = asyncio.run(main())
    finally:
        peer.kill()
    assert event.event_type is CMEventType.DISCONNECTED and "Failed" in event.reason
    assert end is AssociationEnd.FAILED
    assert sorted(wc.wr_id for wc in completions) == list(range(WRITES + 1))   # each request once, none lost
    statuses = {wc.wr_id: wc.status for wc in completions}
    assert statuses[WRITES] is WCStatus.WR_FLUSH_ERR   # the Read posted after the kill
    assert set(statuses.values()) == {WCStatus.SUCCESS, WCStatus.WR_FLUSH_ERR}
    flushed = [wr_id for wr_id, status in statuses.items() if status is WCStatus.WR_FLUSH_ERR]
    assert flushed == list(range(min(flushed), WRITES + 1))   # in order: the flushed are the last posted


def test_a_peer_restarted_on_the_same_port_aborts_the_old_association_and_takes_a_new_one() -> None:
    """The restarted peer has no association: the survivor's packets are out of the blue to it and get an ABORT
    with the T bit (RFC 4960 8.4 rule 8, 8.5.1 B), which ends the old association; a new connect makes a new one
    with the new process, whose region is its own."""
    first, port = start_peer()
    second = None

    async def main():
        nonlocal second
        device = open_device("udp:127.0.0.1:0", **{**FAST, "association_max_retrans": 40})   # outlive the restart
        old = await connect(device, port)
        first.send_signal(signal.SIGKILL)
        first.wait()
        second, again = start_peer(port)
        assert again == port
        old.qp.post_send(SendWR(1, WROpcode.RDMA_WRITE, [SGE(old.region.buf, 64, old.region.lkey)],
                                remote_addr=old.peer["addr"], rkey=old.peer["rkey"]))
        event = await old.cm_id.get_cm_event(timeout=WAIT)
        end = await device.wait_closed(timeout=WAIT)
        new = await connect(device, port)
        new.region.write(b"x" * 64)
        new.qp.post_send(SendWR(2, WROpcode.RDMA_READ, [SGE(new.region.buf, 64, new.region.lkey)],
                                remote_addr=new.peer["addr"], rkey=new.peer["rkey"]))
        (read,) = await new.cq.wait(1, timeout=WAIT)
        device.fabric.backend.close()
        return event, end, read, new.region.read(64)

    try:
        event, end, read, landed = asyncio.run(main())
    finally:
        first.kill()
        if second is not None:
            second.kill()
    assert event.event_type is CMEventType.DISCONNECTED
    assert end is AssociationEnd.ABORTED
    assert (read.wr_id, read.opcode, read.status) == (2, WCOpcode.RDMA_READ, WCStatus.SUCCESS)
    assert landed == bytes(64)   # the new process's region: never written, so zeros over what this side wrote


def start_connecting_peer(server_port: int, port: int = 0) -> tuple[subprocess.Popen, int]:
    peer = subprocess.Popen([sys.executable, "-m", "tests.network.peer_program", "connect", str(server_port),
                             str(port)], cwd=ROOT, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE)
    return peer, port


def test_a_connecting_peer_restarted_on_the_same_port_is_a_new_association_rfc4960_5_2_4_a() -> None:
    """The restarted client's INIT reaches the survivor's association, whose INIT ACK carries its tags as
    tie-tags (5.2.2); the COOKIE ECHO then tells a restart (5.2.4 A): the old connection ends DISCONNECTED
    and the new process's connection arrives as a new CONNECT_REQUEST and is established."""
    peers = []

    async def established_from(listener, pd, cq):
        request = await listener.get_cm_event(timeout=WAIT)
        assert request.event_type is CMEventType.CONNECT_REQUEST, request
        request.id.create_qp(pd, cq)
        request.id.accept()
        event = await request.id.get_cm_event(timeout=WAIT)
        assert event.event_type is CMEventType.ESTABLISHED, event
        return request.id

    async def main():
        device = open_device("udp:127.0.0.1:0", **{**FAST, "association_max_retrans": 40,
                                                    "path_max_retrans": 40})
        pd, cq = device.alloc_pd(), device.create_cq()
        listener = device.create_id()
        listener.listen()
        first = start_connecting_peer(device.address[1])[0]
        peers.append(first)
        old = await established_from(listener, pd, cq)
        line = await asyncio.to_thread(first.stdout.readline)
        assert line.startswith("established "), line
        port = int(line.split()[1])
        first.send_signal(signal.SIGKILL)
        first.wait()
        peers.append(start_connecting_peer(device.address[1], port)[0])
        new = await established_from(listener, pd, cq)
        ended = await old.get_cm_event(timeout=WAIT)
        line = await asyncio.to_thread(peers[1].stdout.readline)
        device.fabric.backend.close()
        return ended, line, new

    try:
        ended, line, new = asyncio.run(main())
    finally:
        for peer in peers:
            peer.kill()
    assert ended.event_type is CMEventType.DISCONNECTED and "5.2.4 A" in ended.reason
    assert line.startswith("established ")
    assert new.state.name == "ESTABLISHED"


def test_garbage_truncated_stranger_wrong_tag_and_bad_checksum_datagrams_are_counted_and_dropped() -> None:
    async def main():
        loop = asyncio.get_running_loop()
        failures = []
        loop.set_exception_handler(lambda loop, context: failures.append(context))
        fabric = SimpleNamespace(devices=(open_device("udp:127.0.0.1:0"), open_device("udp:127.0.0.1:0")))
        server, client = await connected(fabric, region=1 << 16)
        target = server.device.address
        stranger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        stranger.bind(("127.0.0.1", 0))
        client_host = client.device.backend._host
        association = client_host.association
        write = DdpSegment(TaggedHeader(True, tagged_rsvd_ulp(Opcode.RDMA_WRITE), server.mr.rkey, server.mr.buf),
                           b"\xee" * 256)
        data = DataChunk(association._next_tsn, client.id.stream_id, 0, PPID_DDP_SEGMENT,
                         (1).to_bytes(2, "big") + write.encode(), unordered=True)
        ports = (client.device.address[1], target[1])
        right_tag = association.peer_tag
        wrong_tag = SctpPacket(*ports, right_tag ^ 0x5A5A5A5A, (data,)).encode()
        bad_checksum = bytearray(SctpPacket(*ports, right_tag, (data,)).encode())
        bad_checksum[-1] ^= 0xFF
        garbage = random.Random(1).randbytes(300)
        sends = [   # the host filters by address first, then checks the CRC32c (model.rnic.host)
            ("garbage", stranger, garbage),
            ("garbage from the peer", None, garbage),
            ("truncated", stranger, b"\x13\x88\x00"),
            ("stranger", stranger, SctpPacket(*ports, right_tag, (data,)).encode()),
            ("wrong tag", None, wrong_tag),
            ("bad checksum", None, bytes(bad_checksum)),
        ]
        counts = []
        for name, sender, datagram in sends:
            before = server.device.statistics()
            if sender is None:   # from the peer's own endpoint: the client's socket
                client.device.fabric.backend.transport.send(datagram, target)
            else:
                sender.sendto(datagram, target)
            await asyncio.sleep(0.1)
            after = server.device.statistics()
            counts.append((name, {field: getattr(after, field) - getattr(before, field)
                                  for field in ("datagrams_received", "dropped_not_sctp", "dropped_not_for_us",
                                                "dropped_bad_checksum", "dropped_by_association")
                                  if getattr(after, field) != getattr(before, field)}))
        stranger.close()
        untouched = server.mr.read(1 << 16)
        arrived = server.cq.poll(16)
        # the connection goes on: a real Write lands
        client.mr.write(b"\x11" * 64)
        client.qp.post_send(SendWR(1, WROpcode.RDMA_WRITE, [SGE(client.mr.buf, 64, client.mr.lkey)],
                                   remote_addr=server.mr.buf, rkey=server.mr.rkey))
        await client.cq.wait(1, timeout=WAIT)
        client.id.disconnect()
        await server.id.get_cm_event(timeout=WAIT)
        landed = server.mr.read(64)
        for device in fabric.devices:
            device.fabric.backend.close()
        return failures, counts, untouched, arrived, landed

    failures, counts, untouched, arrived, landed = asyncio.run(main())
    assert failures == []
    assert counts == [
        ("garbage", {"datagrams_received": 1, "dropped_not_for_us": 1}),
        ("garbage from the peer", {"datagrams_received": 1, "dropped_bad_checksum": 1}),
        ("truncated", {"datagrams_received": 1, "dropped_not_sctp": 1}),
        ("stranger", {"datagrams_received": 1, "dropped_not_for_us": 1}),
        ("wrong tag", {"datagrams_received": 1, "dropped_by_association": 1}),
        ("bad checksum", {"datagrams_received": 1, "dropped_bad_checksum": 1}),
    ]
    assert untouched == bytes(1 << 16) and arrived == []
    assert landed == b"\x11" * 64


def test_random_chunks_with_the_right_tag_and_checksum_never_raise() -> None:
    """A thousand packets from the peer's endpoint with its tag and a valid CRC32c but random chunks (types,
    flags, lengths, bodies; no ABORT or SHUTDOWN, so the association lives long enough to see them): whatever
    the association makes of them, the device's loop never raises."""
    kinds = (0, 0, 0, 1, 2, 3, 4, 5, 9, 10, 11, 12, 64, 128, 192, 255)

    async def main():
        loop = asyncio.get_running_loop()
        failures = []
        loop.set_exception_handler(lambda loop, context: failures.append(context))
        fabric = SimpleNamespace(devices=(open_device("udp:127.0.0.1:0"), open_device("udp:127.0.0.1:0")))
        server, client = await connected(fabric, region=1 << 16)
        rng = random.Random(31)
        header = SctpPacket(client.device.address[1], server.device.address[1],
                            client.device.backend._host.association.peer_tag, (DataChunk(0, 0, 0, 0, b"x"),))
        send = client.device.fabric.backend.transport.send
        for index in range(1000):
            chunks = b""
            for _ in range(rng.randrange(1, 4)):
                body = rng.randbytes(rng.choice((0, 1, 3, 4, 12, 16, 20, 40, 100)))
                length = rng.choice((4 + len(body), 4 + len(body), rng.randrange(0, 200)))
                chunks += bytes((rng.choice(kinds), rng.randrange(256))) + length.to_bytes(2, "big") + body
                chunks += bytes(-len(body) % 4)
            packet = header.encode()[:12] + chunks
            checksum = sctp_checksum(packet[:8] + bytes(4) + packet[12:])
            send(packet[:8] + sctp_checksum_to_bytes(checksum) + packet[12:], server.device.address)
            if index % 50 == 49:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        statistics = server.device.statistics()
        for device in fabric.devices:
            device.fabric.backend.close()
        return failures, statistics

    failures, statistics = asyncio.run(main())
    assert failures == []
    assert statistics.datagrams_received >= 1000 and statistics.dropped_bad_checksum == 0

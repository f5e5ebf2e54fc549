"""usrsctp doing its own UDP encapsulation (RFC 6951) in another process, and a ``udp:`` device of this process.

With the session layer only (`tests.network.usrsctp_udp_peer`): the association comes up whichever side opens
it, each side sees the other's Adaptation Layer Indication (RFC 5043 5.1, 11.1), the DDP session is negotiated
(RFC 5043 6, RFC 6581), and DDP segments cross both ways: usrsctp's, built with the model's encoders, placed by
the device; the device's, as usrsctp delivered them, decoded with the model's decoders. Every byte is one the
test chose.

With a whole host (`tests.network.usrsctp_udp_host_peer`, `sim.usrsctp_udp_host`): a driver program over usrsctp
connects to the device, and RDMA Writes, Reads and Sends go both ways, bytes checked, to the graceful close."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from driver import SGE, AccessFlags, CMEventType, ConnParam, QPCap, RecvWR, SendWR, WCOpcode, WROpcode, open_device
from sim.usrsctp import UsrsctpError, library, real_time_library
from sim.usrsctp_udp import STRUCT_SIZES
from tests.network.usrsctp_udp_host_peer import SEND_BYTES, SIZES
from tests.network.usrsctp_udp_peer import ANNOUNCED_STAG, ANNOUNCED_TO, SEGMENT_PAYLOAD

ROOT = Path(__file__).resolve().parents[2]
DDP_CODE_POINT = 0x00000001
"""RFC 5043 11.1: the Adaptation Layer Indication code point IANA assigned to DDP."""
TIMEOUT = 10
STARTUP = 60
"""Seconds a peer process may take to import and start usrsctp (a loaded machine's imports are slow)."""
needs_usrsctp = pytest.mark.usefixtures("usrsctp_library")


class Peer:
    """The usrsctp process: its JSON lines out (`expect`), its commands in (`command`)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self._unread: list[dict] = []

    @classmethod
    async def start(cls, *arguments: str, program: str = "tests.network.usrsctp_udp_peer") -> Peer:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", program, *arguments, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        return cls(process)

    async def expect(self, key: str, timeout: float = TIMEOUT) -> object:
        """The value of the first line not yet taken that has `key`, waiting for it if need be."""
        while True:
            for index, fields in enumerate(self._unread):
                if key in fields:
                    return self._unread.pop(index)[key]
            line = await asyncio.wait_for(self.process.stdout.readline(), timeout)
            if not line:
                raise AssertionError(f"the usrsctp peer ended: {(await self.process.stderr.read()).decode()}")
            self._unread.append(json.loads(line))

    def command(self, **fields: object) -> None:
        self.process.stdin.write(json.dumps(fields).encode() + b"\n")

    async def stop_and_wait(self) -> None:
        self.stop()
        await self.process.wait()

    def stop(self) -> None:
        if self.process.returncode is None:
            self.process.kill()


def region_param(region) -> ConnParam:
    return ConnParam(private_data=json.dumps({"addr": region.buf, "rkey": region.rkey}).encode())


async def segments_both_ways(peer: Peer, qp, cq, region) -> None:
    """usrsctp's RDMA Write and Send placed by the device; the device's RDMA Write and Send decoded at usrsctp."""
    written = random.Random(1).randbytes(3 * SEGMENT_PAYLOAD - 100)   # three tagged segments, the last short
    sent = random.Random(2).randbytes(1500)                            # two untagged ones
    qp.post_recv(RecvWR(1, [SGE(region.buf + 40000, 4000, region.lkey)]))
    peer.command(write=[region.rkey, region.buf + 100, written.hex()])
    peer.command(send=sent.hex())
    (received,) = await cq.wait(1, timeout=TIMEOUT)
    assert (received.wr_id, received.opcode, received.ok, received.byte_len) == (1, WCOpcode.RECV, True, len(sent))
    assert region.read(len(sent), 40000) == sent
    assert region.read(len(written), 100) == written      # RFC 5040 5.5: placed before the later Send completes

    ours = random.Random(3).randbytes(2000)
    region.write(ours, 10000)
    qp.post_send(SendWR(2, WROpcode.RDMA_WRITE, [SGE(region.buf + 10000, len(ours), region.lkey)],
                        remote_addr=ANNOUNCED_TO + 8, rkey=ANNOUNCED_STAG))
    qp.post_send(SendWR(3, WROpcode.SEND, [SGE(region.buf + 10000, 10, region.lkey)]))
    completions = await cq.wait(2, timeout=TIMEOUT)
    assert [(wc.wr_id, wc.opcode, wc.ok) for wc in completions] == [(2, WCOpcode.RDMA_WRITE, True),
                                                                     (3, WCOpcode.SEND, True)]
    write, send = [], []
    while sum(len(bytes.fromhex(s["payload"])) for s in write) < len(ours) or not send:
        segment = await peer.expect("segment")
        (write if segment["opcode"] == "RDMA_WRITE" else send).append(segment)
    write.sort(key=lambda segment: segment["to"])    # delivered unordered (RFC 5043 10)
    to = ANNOUNCED_TO + 8
    for index, segment in enumerate(write):           # RFC 5041 4.2: consecutive TOs, L on the last only
        assert (segment["stag"], segment["to"], segment["last"]) == (ANNOUNCED_STAG, to, index == len(write) - 1)
        to += len(bytes.fromhex(segment["payload"]))
    assert b"".join(bytes.fromhex(segment["payload"]) for segment in write) == ours
    # RFC 5040 4.4, RFC 5041 4.3: a Send is on queue 0, the first message there has MSN 1, one segment at MO 0
    assert [(s["opcode"], s["qn"], s["msn"], s["mo"], s["last"], s["payload"]) for s in send] == [
        ("SEND", 0, 1, 0, True, ours[:10].hex())]


def assert_clean(statistics, usrsctp_port: int) -> None:
    """Every datagram the device took was SCTP from usrsctp's own UDP socket (RFC 6951 5.4: its source port is
    usrsctp's encapsulation port), none dropped."""
    assert statistics.peer == ("127.0.0.1", usrsctp_port)
    assert statistics.datagrams_received > 0 and statistics.datagrams_sent > 0
    assert (statistics.dropped_not_sctp, statistics.dropped_not_for_us, statistics.dropped_bad_checksum,
            statistics.dropped_by_association) == (0, 0, 0, 0)


@needs_usrsctp
def test_usrsctp_connects_over_its_own_udp_encapsulation() -> None:
    async def main():
        device = open_device("udp:127.0.0.1:0")
        pd, cq = device.alloc_pd(), device.create_cq()
        region = pd.reg_mr(1 << 16, AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE)
        listener = device.create_id()
        listener.listen()
        peer = await Peer.start("connect", str(device.address[1]))
        try:
            usrsctp_port = await peer.expect("ready", STARTUP)
            request = await listener.get_cm_event(timeout=TIMEOUT)
            assert request.event_type is CMEventType.CONNECT_REQUEST
            assert json.loads(request.private_data) == {"stag": ANNOUNCED_STAG, "to": ANNOUNCED_TO}
            association = device.fabric.backend.host.association
            assert association.peer_adaptation_code_point == DDP_CODE_POINT   # usrsctp's, in its INIT
            assert await peer.expect("adaptation") == DDP_CODE_POINT           # ours, in the INIT ACK
            assert (await peer.expect("up"))["remote_udp_port"] == device.address[1]
            qp = request.id.create_qp(pd, cq)
            request.id.accept(region_param(region))
            session = await peer.expect("session")
            assert json.loads(session["private_data"]) == {"addr": region.buf, "rkey": region.rkey}
            established = await request.id.get_cm_event(timeout=TIMEOUT)   # after usrsctp's RTR (RFC 6581 9)
            assert established.event_type is CMEventType.ESTABLISHED
            await segments_both_ways(peer, qp, cq, region)
            assert_clean(device.statistics(), usrsctp_port)
        finally:
            await peer.stop_and_wait()
            device.fabric.backend.close()

    asyncio.run(main())


@needs_usrsctp
def test_the_device_connects_to_usrsctp_over_its_own_udp_encapsulation() -> None:
    async def main():
        device = open_device("udp:127.0.0.1:0")
        pd, cq = device.alloc_pd(), device.create_cq()
        region = pd.reg_mr(1 << 16, AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE)
        peer = await Peer.start("listen")
        try:
            usrsctp_port = await peer.expect("ready", STARTUP)
            connection = device.create_id()
            qp = connection.create_qp(pd, cq)
            connection.connect(("127.0.0.1", usrsctp_port), region_param(region))
            established = await connection.get_cm_event(timeout=TIMEOUT)
            assert established.event_type is CMEventType.ESTABLISHED
            assert json.loads(established.private_data) == {"stag": ANNOUNCED_STAG, "to": ANNOUNCED_TO}
            assert device.fabric.backend.host.association.peer_adaptation_code_point == DDP_CODE_POINT
            # usrsctp learnt the device's UDP port from its datagrams' source port (RFC 6951 5.5)
            assert (await peer.expect("up"))["remote_udp_port"] == device.address[1]
            assert await peer.expect("adaptation") == DDP_CODE_POINT
            assert await peer.expect("session") == {"stream": 0, "rtr": "WRITE"}   # the device's RTR (RFC 6581 9)
            await segments_both_ways(peer, qp, cq, region)
            assert_clean(device.statistics(), usrsctp_port)
        finally:
            await peer.stop_and_wait()
            device.fabric.backend.close()

    asyncio.run(main())


@needs_usrsctp
def test_a_driver_program_over_usrsctp_udp_encapsulation_and_a_udp_device() -> None:
    async def main():
        device = open_device("udp:127.0.0.1:0")
        pd, cq = device.alloc_pd(), device.create_cq()
        region = pd.reg_mr(1 << 18, AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE | AccessFlags.REMOTE_READ)
        listener = device.create_id()
        listener.listen()
        peer = await Peer.start(str(device.address[1]), program="tests.network.usrsctp_udp_host_peer")
        try:
            usrsctp_port = await peer.expect("ready", STARTUP)
            request = await listener.get_cm_event(timeout=TIMEOUT)
            assert request.event_type is CMEventType.CONNECT_REQUEST
            theirs = json.loads(request.private_data)
            qp = request.id.create_qp(pd, cq, cap=QPCap(max_send_wr=16, max_send_sge=1))
            qp.post_recv(RecvWR(7, [SGE(region.buf + 200000, 2 * SEND_BYTES, region.lkey)]))
            request.id.accept(region_param(region))
            assert (await request.id.get_cm_event(timeout=TIMEOUT)).event_type is CMEventType.ESTABLISHED
            assert json.loads(await peer.expect("established")) == {"addr": region.buf, "rkey": region.rkey}
            assert device.fabric.backend.host.association.peer_adaptation_code_point == DDP_CODE_POINT
            # ours into the usrsctp host's memory and back: its RDMAP places the Write, answers the Read
            ours = random.Random(9).randbytes(5000)
            region.write(ours, 100000)
            qp.post_send(SendWR(1, WROpcode.RDMA_WRITE, [SGE(region.buf + 100000, len(ours), region.lkey)],
                                remote_addr=theirs["addr"] + 10, rkey=theirs["rkey"]))
            qp.post_send(SendWR(2, WROpcode.RDMA_READ, [SGE(region.buf + 150000, len(ours), region.lkey)],
                                remote_addr=theirs["addr"] + 10, rkey=theirs["rkey"]))
            completions = await cq.wait(2, timeout=TIMEOUT)
            assert [(wc.wr_id, wc.opcode, wc.ok) for wc in completions] == [(1, WCOpcode.RDMA_WRITE, True),
                                                                             (2, WCOpcode.RDMA_READ, True)]
            assert region.read(len(ours), 150000) == ours
            # theirs: Writes and Reads of each size into our region, then a Send into the posted receive
            peer.command(go=True)
            (received,) = await cq.wait(1, timeout=TIMEOUT)
            assert (received.wr_id, received.opcode, received.ok, received.byte_len) == (7, WCOpcode.RECV, True,
                                                                                        SEND_BYTES)
            last = random.Random(SIZES[-1]).randbytes(SIZES[-1])
            assert region.read(SEND_BYTES, 200000) == last[:SEND_BYTES]
            assert region.read(len(last)) == last
            assert await peer.expect("done") == [
                [[2 * index, "RDMA_WRITE", True], [2 * index + 1, "RDMA_READ", True], True]
                for index in range(len(SIZES))] + [[[99, "SEND", True]]]
            # the graceful close (RFC 5043 6.2 Terminates, then SCTP's SHUTDOWN, RFC 4960 9.2)
            peer.command(go=True)
            assert (await request.id.get_cm_event(timeout=TIMEOUT)).event_type is CMEventType.DISCONNECTED
            assert await peer.expect("ended") == "DISCONNECTED"
            assert_clean(device.statistics(), usrsctp_port)
        finally:
            await peer.stop_and_wait()
            device.fabric.backend.close()

    asyncio.run(main())


@needs_usrsctp
def test_a_process_that_gave_usrsctp_the_virtual_clock_cannot_start_it_on_the_real_one() -> None:
    library()    # as sim.usrsctp's Stack and the interop tests load it: gettimeofday redirected
    with pytest.raises(UsrsctpError) as refused:
        real_time_library()
    assert refused.value.errno == errno.EBUSY


def test_struct_layouts_match_the_installed_header(tmp_path) -> None:
    """The ctypes structs of sim/usrsctp_udp.py have the sizes the C compiler gives usrsctp.h's."""
    compiler = next((c for c in (os.environ.get("CC"), "cc", "gcc") if c and shutil.which(c)), None)
    if compiler is None or not os.path.exists("/usr/include/usrsctp.h"):
        if os.environ.get("RNIC_REQUIRE_USRSCTP") == "1":
            pytest.fail("usrsctp is required (RNIC_REQUIRE_USRSCTP=1): no C compiler or no /usr/include/usrsctp.h")
        pytest.skip("no C compiler or no /usr/include/usrsctp.h to check the layouts against")
    source = tmp_path / "sizes.c"
    source.write_text("#include <stdio.h>\n#include <netinet/in.h>\n#include <usrsctp.h>\nint main(void) {\n" +
                      "".join(f'  printf("{name} %zu\\n", sizeof(struct {name}));\n' for name in STRUCT_SIZES) +
                      "  return 0;\n}\n")
    program = tmp_path / "sizes"
    subprocess.run([compiler, "-x", "c", str(source), "-o", str(program)], check=True, capture_output=True)
    output = subprocess.run([str(program)], check=True, capture_output=True, text=True).stdout
    assert {name: int(size) for name, size in (line.split() for line in output.splitlines())} == STRUCT_SIZES

"""Devices on raw Ethernet frames (`eth:IFACE:ADDRESS`, Linux AF_PACKET): two of them, IPv4 hosts of their own,
on the two ends of a veth pair the test makes (root, `ip link`), finding each other by ARP (RFC 826)."""

from __future__ import annotations

import asyncio
import os
import subprocess
from types import SimpleNamespace

import pytest

from driver import SGE, WCOpcode, WROpcode, SendWR, open_device
from tests.driver.harness import connected

ENDS = (f"rnic{os.getpid() % 100000}a", f"rnic{os.getpid() % 100000}b")
ADDRESSES = ("10.199.0.1", "10.199.0.2")


@pytest.fixture
def veth_pair():
    """Two interfaces joined as by a cable, up, with no IPv4 address: the devices own theirs."""
    made = subprocess.run(["ip", "link", "add", ENDS[0], "type", "veth", "peer", "name", ENDS[1]],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make a veth pair here: {made.stderr.strip() or made.returncode}")
    try:
        for end in ENDS:
            subprocess.run(["ip", "link", "set", end, "up"], check=True)
        yield ENDS
    finally:
        subprocess.run(["ip", "link", "del", ENDS[0]], capture_output=True)


def test_write_and_read_between_two_ethernet_devices_over_a_veth_pair(veth_pair) -> None:
    async def main():
        fabric = SimpleNamespace(devices=tuple(open_device(f"eth:{end}:{address}:{5001 + index}")
                                               for index, (end, address) in enumerate(zip(veth_pair, ADDRESSES))))
        assert fabric.devices[0].address == (ADDRESSES[0], 5001)
        server, client = await connected(fabric, region=1 << 16)
        payload = bytes(range(251)) * 97
        client.mr.write(payload)
        client.qp.post_send(SendWR(1, WROpcode.RDMA_WRITE, [SGE(client.mr.buf, len(payload), client.mr.lkey)],
                                   remote_addr=server.mr.buf, rkey=server.mr.rkey))
        client.qp.post_send(SendWR(2, WROpcode.RDMA_READ, [SGE(client.mr.buf + 30000, len(payload),
                                                               client.mr.lkey)],
                                   remote_addr=server.mr.buf, rkey=server.mr.rkey))
        completions = await client.cq.wait(2, timeout=10)
        landed, read_back = server.mr.read(len(payload)), client.mr.read(len(payload), 30000)
        statistics = [device.statistics() for device in fabric.devices]
        for device in fabric.devices:
            device.fabric.backend.close()
        return completions, landed, read_back, payload, statistics

    completions, landed, read_back, payload, statistics = asyncio.run(main())
    assert [(wc.wr_id, wc.opcode, wc.ok) for wc in completions] == [(1, WCOpcode.RDMA_WRITE, True),
                                                                     (2, WCOpcode.RDMA_READ, True)]
    assert landed == payload and read_back == payload
    assert all(s.dropped_bad_checksum == 0 and s.datagrams_received > 0 for s in statistics)

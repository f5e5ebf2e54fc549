"""A driver program in a process of its own whose device's SCTP is usrsctp with its own UDP encapsulation
(`sim.usrsctp_udp_host`: the model's DDP sessions and RDMAP over it), connecting to a ``udp:`` device:

    python -m tests.network.usrsctp_udp_host_peer SERVER_PORT

JSON lines out: ``{"ready": PORT}`` (usrsctp's UDP port, its SCTP port too), ``{"established": PRIVATE_DATA}``
once rdma_cm's connection is up (its private data announced this side's region, `REGION` bytes:
``{"addr", "rkey"}``); then, after a line in, its own operations on the server's region announced in the
accept's private data: for each of `SIZES`, an RDMA Write of bytes of `random.Random(size)` at offset 0 and an
RDMA Read of them back, then a Send of the first `SEND_BYTES` of the last; ``{"done": [...]}`` with the completions
and whether each read came back equal; after another line in, rdma_disconnect and ``{"ended": EVENT}``.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys

from driver import SGE, AccessFlags, CMEventType, ConnParam, QPCap, SendWR, WROpcode
from driver.backends.network import NetworkFabric
from driver.device import Fabric
from sim.usrsctp_udp import UdpStack
from sim.usrsctp_udp_host import UsrsctpUdpTransport, usrsctp_udp_host
from tests.network.usrsctp_udp_peer import free_udp_port, say

REGION = 1 << 18
SIZES = (1, 1400, 70000)
"""One byte, one DDP segment, and more than a send buffer (64 KiB): usrsctp's acknowledgements must free it."""
SEND_BYTES = 3000
READ_BACK = 1 << 17
"""Where in its own region each RDMA Read lands."""


async def main(server_port: int) -> None:
    stack = UdpStack.start(free_udp_port())
    transport = UsrsctpUdpTransport(stack, "127.0.0.1")
    fabric = Fabric(NetworkFabric(transport, transport.port, usrsctp_udp_host(stack, "127.0.0.1")))
    device = fabric.devices[0]
    say(ready=transport.port)
    pd, cq = device.alloc_pd(), device.create_cq()
    region = pd.reg_mr(REGION, AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE | AccessFlags.REMOTE_READ)
    connection = device.create_id()
    qp = connection.create_qp(pd, cq, cap=QPCap(max_send_wr=16, max_send_sge=1))
    connection.connect(("127.0.0.1", server_port),
                       ConnParam(private_data=json.dumps({"addr": region.buf, "rkey": region.rkey}).encode()))
    established = await connection.get_cm_event(timeout=30)
    say(established=established.private_data.decode() if established.event_type is CMEventType.ESTABLISHED
        else established.event_type.name)
    remote = json.loads(established.private_data)
    await asyncio.to_thread(sys.stdin.readline)
    done = []
    for index, size in enumerate(SIZES):
        data = random.Random(size).randbytes(size)
        region.write(data)
        qp.post_send(SendWR(2 * index, WROpcode.RDMA_WRITE, [SGE(region.buf, size, region.lkey)],
                            remote_addr=remote["addr"], rkey=remote["rkey"]))
        qp.post_send(SendWR(2 * index + 1, WROpcode.RDMA_READ, [SGE(region.buf + READ_BACK, size, region.lkey)],
                            remote_addr=remote["addr"], rkey=remote["rkey"]))
        completions = await cq.wait(2, timeout=30)
        done.append([[wc.wr_id, wc.opcode.name, wc.ok] for wc in completions]
                    + [region.read(size, READ_BACK) == data])
    qp.post_send(SendWR(99, WROpcode.SEND, [SGE(region.buf, SEND_BYTES, region.lkey)]))
    (sent,) = await cq.wait(1, timeout=30)
    done.append([[sent.wr_id, sent.opcode.name, sent.ok]])
    say(done=done)
    await asyncio.to_thread(sys.stdin.readline)
    connection.disconnect()
    ended = await connection.get_cm_event(timeout=30)
    say(ended=ended.event_type.name)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))

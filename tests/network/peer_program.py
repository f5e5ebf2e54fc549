"""A peer process for the fault tests: one device on loopback UDP that accepts connections, each with a region of
`REGION` bytes announced in the accept's private data, and serves until it is killed.

    python -m tests.network.peer_program [usrsctp] [PORT]     # prints "listening PORT" once it listens

(`usrsctp` first: the device's SCTP is usrsctp's, `sim.usrsctp_host`, its DDP and RDMAP the model's), or one
that connects from its UDP port to a server and holds the connection until it is killed:

    python -m tests.network.peer_program connect SERVER_PORT [PORT]   # prints "established PORT"
"""

from __future__ import annotations

import asyncio
import json
import sys

from driver import AccessFlags, CMEventType, open_device

REGION = 1 << 20
FAST = dict(rto_initial=0.2, rto_min=0.1, rto_max=0.4, association_max_retrans=4, path_max_retrans=4,
            max_init_retransmits=4, heartbeat_interval=0.5)
"""RFC 4960 15's timers cut short, so that a dead peer is found within seconds (RFC 4960 8.1, 8.2)."""


async def serve(port: int, usrsctp: bool = False) -> None:
    if usrsctp:
        from sim.usrsctp_host import usrsctp_host

        device = open_device(f"udp:127.0.0.1:{port}", host=usrsctp_host, **FAST)
    else:
        device = open_device(f"udp:127.0.0.1:{port}", **FAST)
    pd, cq = device.alloc_pd(), device.create_cq()
    region = pd.reg_mr(REGION, AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE | AccessFlags.REMOTE_READ)
    listener = device.create_id()
    listener.listen()
    print(f"listening {device.address[1]} {type(device.fabric.backend.host.sctp).__name__}", flush=True)
    while True:
        request = await listener.get_cm_event(timeout=None)
        if request.event_type is CMEventType.CONNECT_REQUEST:
            request.id.create_qp(pd, cq)
            request.id.accept(private_data_param(region))


def private_data_param(region):
    from driver import ConnParam

    return ConnParam(private_data=json.dumps({"addr": region.buf, "rkey": region.rkey}).encode())


async def hold(server_port: int, port: int) -> None:
    device = open_device(f"udp:127.0.0.1:{port}", **FAST)
    pd, cq = device.alloc_pd(), device.create_cq()
    connection = device.create_id()
    connection.create_qp(pd, cq)
    connection.connect(("127.0.0.1", server_port))
    event = await connection.get_cm_event(timeout=30)
    print(f"{event.event_type.name.lower()} {device.address[1]}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    if sys.argv[1:2] == ["connect"]:
        asyncio.run(hold(int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 0))
    else:
        usrsctp = sys.argv[1:2] == ["usrsctp"]
        arguments = sys.argv[2:] if usrsctp else sys.argv[1:]
        asyncio.run(serve(int(arguments[0]) if arguments else 0, usrsctp))

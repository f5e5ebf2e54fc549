"""One side of an exchange between two processes, each with one device (`driver.open_device`): an RDMA Write, an
RDMA Read and a Send each way, then the graceful close.

    python -m tests.network.exchange_program listen SPEC WRITE READ SEND
    python -m tests.network.exchange_program connect SPEC HOST:PORT WRITE READ SEND

WRITE, READ and SEND are this side's bytes, in hex: what it Writes into the peer's region, what it offers the
peer to Read, and what it Sends.  Each side registers one region of `SLOTS` slots of `SLOT` bytes, announces
(STag, address, lengths) in its connect's or accept's private data (RFC 5043 6.2), posts its receive, and once
connected Writes (RFC 5040 5.1) into the peer's `PEER_WRITES` slot, Reads (5.2) the peer's `OFFERED` slot into its
`READ_LANDS` slot, and when both have completed Sends (5.3): the peer's receive of it then says that its Write has
been placed (RFC 5040 5.5: in order on the stream).  Then each side Sends an empty "done" once its own
completions are in, and the connecting side disconnects once it has the peer's "done" (RFC 5043 6.2), each side closes its device (RFC 4960 9.2 SHUTDOWN) and prints one JSON line: the
bytes written into it, the bytes it read and the bytes it received, in hex, and how its association ended.
The listening side prints ``listening`` first.
"""

from __future__ import annotations

import asyncio
import json
import sys

from driver import (SGE, AccessFlags, AssociationEnd, CMEventType, ConnParam, RecvWR, SendWR, WROpcode,
                    open_device)

SLOT = 2048
OFFERED, WRITE_FROM, SEND_FROM, PEER_WRITES, READ_LANDS, RECEIVE, DONE = range(7)
SLOTS = 7
WAIT = 30.0


def post_receives(qp, region) -> None:
    """The receive of the peer's Send, and of its zero-length "done" Send after every completion of its own."""
    qp.post_recv([RecvWR(1, [SGE(region.buf + RECEIVE * SLOT, SLOT, region.lkey)]),
                  RecvWR(2, [SGE(region.buf + DONE * SLOT, SLOT, region.lkey)])])


async def exchange(role: str, spec: str, peer: tuple[str, int] | None, write: bytes, read: bytes,
                   send: bytes) -> dict:
    device = open_device(spec)
    try:
        pd = device.alloc_pd()
        region = pd.reg_mr(SLOTS * SLOT, AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE | AccessFlags.REMOTE_READ)
        for slot, data in ((OFFERED, read), (WRITE_FROM, write), (SEND_FROM, send)):
            region.write(data, slot * SLOT)
        mine = json.dumps({"addr": region.buf, "rkey": region.rkey, "write": len(write), "read": len(read)}).encode()
        send_cq, recv_cq = device.create_cq(), device.create_cq()
        if role == "connect":
            cm_id = device.create_id()
            qp = cm_id.create_qp(pd, send_cq, recv_cq)
            post_receives(qp, region)
            cm_id.connect(peer, ConnParam(private_data=mine))
            established = await cm_id.get_cm_event(timeout=WAIT)
            announced = established.private_data
        else:
            listener = device.create_id()
            listener.listen()
            print("listening", flush=True)
            request = await listener.get_cm_event(timeout=WAIT)
            assert request.event_type is CMEventType.CONNECT_REQUEST, request
            cm_id = request.id
            qp = cm_id.create_qp(pd, send_cq, recv_cq)
            post_receives(qp, region)
            cm_id.accept(ConnParam(private_data=mine))
            established = await cm_id.get_cm_event(timeout=WAIT)
            announced = request.private_data
        assert established.event_type is CMEventType.ESTABLISHED, established
        theirs = json.loads(announced)
        qp.post_send([
            SendWR(10, WROpcode.RDMA_WRITE, [SGE(region.buf + WRITE_FROM * SLOT, len(write), region.lkey)],
                   remote_addr=theirs["addr"] + PEER_WRITES * SLOT, rkey=theirs["rkey"]),
            SendWR(11, WROpcode.RDMA_READ, [SGE(region.buf + READ_LANDS * SLOT, theirs["read"], region.lkey)],
                   remote_addr=theirs["addr"] + OFFERED * SLOT, rkey=theirs["rkey"])])
        completions = await send_cq.wait(2, timeout=WAIT)
        qp.post_send(SendWR(12, WROpcode.SEND, [SGE(region.buf + SEND_FROM * SLOT, len(send), region.lkey)]))
        completions += await send_cq.wait(1, timeout=WAIT)
        (received,) = await recv_cq.wait(1, timeout=WAIT)
        statuses = sorted((wc.wr_id, wc.status.name) for wc in [*completions, received])
        qp.post_send(SendWR(13, WROpcode.SEND))   # "done": every completion of this side is in
        await recv_cq.wait(1, timeout=WAIT)
        if role == "connect":   # the peer is done too: nothing of its is in flight
            cm_id.disconnect()
        disconnected = await cm_id.get_cm_event(timeout=WAIT)
        report = {
            "completions": statuses,
            "written": region.read(theirs["write"], PEER_WRITES * SLOT).hex(),
            "read": region.read(theirs["read"], READ_LANDS * SLOT).hex(),
            "received": region.read(received.byte_len, RECEIVE * SLOT).hex(),
            "disconnected": disconnected.event_type.name,
        }
        device.close()
        end = await device.wait_closed(timeout=WAIT)
        report["end"] = end.name if isinstance(end, AssociationEnd) else str(end)
        return report
    finally:
        device.fabric.backend.close()


def main(argv: list[str]) -> None:
    role, spec = argv[0], argv[1]
    peer = None
    if role == "connect":
        host, _, port = argv[2].rpartition(":")
        peer, argv = (host, int(port)), argv[1:]
    write, read, send = (bytes.fromhex(text) for text in argv[2:5])
    print(json.dumps(asyncio.run(exchange(role, spec, peer, write, read, send))), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

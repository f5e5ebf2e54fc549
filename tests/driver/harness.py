"""A connected pair of queue pairs for the driver tests: server (device 0, listening) and client (device 1)."""

from __future__ import annotations

from dataclasses import dataclass

from driver import CQ, MR, PD, QP, CMEventType, CMID, ConnParam, Device, Fabric, QPCap

ALL_ACCESS = 0x7


@dataclass
class Side:
    device: Device
    pd: PD
    cq: CQ
    mr: MR
    id: CMID | None = None
    qp: QP | None = None
    established: object = None
    listener: CMID | None = None
    """The server's listening id."""


async def connected(fabric: Fabric, client_param: ConnParam = ConnParam(), server_param: ConnParam = ConnParam(),
                    region: int = 1 << 20, cap: QPCap = QPCap(), sq_sig_all: bool = True) -> tuple[Side, Side]:
    """Listen on the server, connect the client, accept; both ESTABLISHED.  Each side has one PD, one CQ and one
    `region`-byte MR with every access right; `sq_sig_all` for both queue pairs."""
    sides = []
    for device in fabric.devices:
        pd = device.alloc_pd()
        sides.append(Side(device, pd, device.create_cq(4096), pd.reg_mr(region, ALL_ACCESS)))
    server, client = sides
    listener = server.listener = server.device.create_id()
    listener.listen()
    client.id = client.device.create_id()
    client.qp = client.id.create_qp(client.pd, client.cq, cap=cap, sq_sig_all=sq_sig_all)
    client.id.connect(server.device.address, client_param)
    request = await listener.get_cm_event()
    assert request.event_type is CMEventType.CONNECT_REQUEST
    server.id = request.id
    server.qp = server.id.create_qp(server.pd, server.cq, cap=cap, sq_sig_all=sq_sig_all)
    server.id.accept(server_param)
    for side in (client, server):
        side.established = await side.id.get_cm_event()
        assert side.established.event_type is CMEventType.ESTABLISHED, side.established
    return server, client

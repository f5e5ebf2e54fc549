"""Every public call of the driver refuses bad input at once, with a typed error naming the argument.

One row per bad call: the call, the error type expected, and the argument's
name as the message must give it (`wr.sg_list[0].lkey`, `param.private_data`).
The limits are the RFCs' and verbs': STags and DDP message lengths 32 bits,
Tagged Offsets and host addresses 64 (RFC 5041 4.2, 5.2), private data 508
bytes (RFC 5043 5.2.3 less the RFC 6581 9 enhanced data), SCTP ports 1 to
65535 (RFC 4960 3.1), the device's IRD/ORD (RFC 6581 9).  After every bad
call has been made, and good traffic has run, neither device has written a
byte outside a registered region (which hold every receive posted) or, on
the engine's hosts, the buffers the host itself posts on QN 1 and 2 for
Read Requests and Terminates (RFC 5040 4.6, 4.8; `model.rnic.offload`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from driver import (
    CMID, MR, SGE, AccessFlags, CMEventType, ConnParam, Fabric, InvalidArgument, InvalidState, LinkConfig, NotConnected,
    PrivateDataTooLong, QPCap, RecvWR, RtrType, SendFlags, SendWR, SgeAccessDenied, SgeOutsideRegion, TooManySges,
    UnknownBackend, WCStatus, WrongArgumentType, WROpcode, open_fabric, run,
)
from model.rnic.link import Side
from model.rnic.offload import OffloadRnic
from tests.driver.harness import connected

BIG = 1 << 64


@dataclass
class World:
    """A connected pair; an idle id with a queue pair on the client; a connect request waiting on the server
    (its id has a queue pair); a region on the client without LOCAL_WRITE; every region registered."""

    fabric: Fabric
    server: object
    client: object
    idle: CMID
    request: CMID
    read_only: MR
    regions: dict[Side, list[MR]] = field(default_factory=dict)

    def sge(self, offset: int = 0, length: int = 16) -> SGE:
        return SGE(self.client.mr.buf + offset, length, self.client.mr.lkey)

    def write(self, **fields) -> SendWR:
        return SendWR(**{"wr_id": 1, "opcode": WROpcode.RDMA_WRITE, "sg_list": [self.sge()],
                         "remote_addr": self.server.mr.buf, "rkey": self.server.mr.rkey, **fields})


async def world(fabric: Fabric) -> World:
    server, client = await connected(fabric, region=1 << 16)
    idle = client.device.create_id()
    idle.create_qp(client.pd, client.cq)
    second = client.device.create_id()
    second.create_qp(client.pd, client.cq)
    second.connect(server.device.address)
    request = (await server.listener.get_cm_event()).id
    request.create_qp(server.pd, server.cq)
    read_only = client.pd.reg_mr(4096, AccessFlags.REMOTE_READ)
    regions = {Side.A: [server.mr], Side.B: [client.mr, read_only]}
    return World(fabric, server, client, idle, request, read_only, regions)


C = WROpcode
CASES = [
    # (call, error, the argument named)
    ("open_fabric(7)", WrongArgumentType, "backend", lambda w: open_fabric(7)),
    ("open_fabric('nic')", UnknownBackend, "backend", lambda w: open_fabric("nic")),
    ("open_fabric(link=)", WrongArgumentType, "link", lambda w: open_fabric("soft", link={"loss": 0.1})),
    ("open_fabric(seed=)", WrongArgumentType, "seed", lambda w: open_fabric("soft", seed="1")),
    ("open_fabric(option)", InvalidArgument, "colour", lambda w: open_fabric("soft", colour=1)),
    ("LinkConfig(loss=2)", InvalidArgument, "loss", lambda w: LinkConfig(loss=2)),
    ("LinkConfig(delay='1ms')", WrongArgumentType, "delay", lambda w: LinkConfig(delay="1ms")),
    ("open_fabric(streams=0)", InvalidArgument, "streams", lambda w: open_fabric("soft", streams=0)),
    ("open_fabric(path_mtu='x')", WrongArgumentType, "path_mtu", lambda w: open_fabric("soft", path_mtu="x")),
    ("open_fabric(resources=4)", WrongArgumentType, "resources", lambda w: open_fabric("soft", resources=4)),
    ("open_fabric(delayed_ack_time=1)", InvalidArgument, "delayed_ack_time",
     lambda w: open_fabric("soft", delayed_ack_time=1.0)),
    ("open_fabric(engine_sacks) on soft", InvalidArgument, "engine_sacks",
     lambda w: open_fabric("soft", engine_sacks=True)),
    ("open_fabric(engine_sacks='yes')", WrongArgumentType, "engine_sacks",
     lambda w: open_fabric("engine", engine_sacks="yes")),
    ("wait_closed(timeout=-1)", InvalidArgument, "timeout", lambda w: w.client.device.wait_closed(-1)),
    ("run(main)", WrongArgumentType, "main", lambda w: run(5, "soft")),
    ("create_cq(0)", InvalidArgument, "cqe", lambda w: w.client.device.create_cq(0)),
    ("create_cq('4')", WrongArgumentType, "cqe", lambda w: w.client.device.create_cq("4")),
    ("create_cq(huge)", InvalidArgument, "cqe", lambda w: w.client.device.create_cq(1 << 40)),
    ("reg_mr(-1)", InvalidArgument, "length", lambda w: w.client.pd.reg_mr(-1)),
    ("reg_mr(1.5)", WrongArgumentType, "length", lambda w: w.client.pd.reg_mr(1.5)),
    ("reg_mr(2**32)", InvalidArgument, "length", lambda w: w.client.pd.reg_mr(1 << 32)),
    ("reg_mr(access=8)", InvalidArgument, "access", lambda w: w.client.pd.reg_mr(64, 0x8)),
    ("reg_mr(access='rw')", WrongArgumentType, "access", lambda w: w.client.pd.reg_mr(64, "rw")),
    ("reg_mr(REMOTE_WRITE)", InvalidArgument, "access", lambda w: w.client.pd.reg_mr(64, AccessFlags.REMOTE_WRITE)),
    ("mr.write(str)", WrongArgumentType, "data", lambda w: w.client.mr.write("text")),
    ("mr.write(offset=-1)", InvalidArgument, "offset", lambda w: w.client.mr.write(b"x", -1)),
    ("mr.write(past end)", InvalidArgument, "offset", lambda w: w.client.mr.write(b"xy", w.client.mr.length - 1)),
    ("mr.read(-1)", InvalidArgument, "length", lambda w: w.client.mr.read(-1)),
    ("mr.read('4')", WrongArgumentType, "length", lambda w: w.client.mr.read("4")),
    ("mr.read(past end)", InvalidArgument, "offset", lambda w: w.client.mr.read(4, w.client.mr.length - 2)),
    ("cq.poll(0)", InvalidArgument, "num_entries", lambda w: w.client.cq.poll(0)),
    ("cq.poll('1')", WrongArgumentType, "num_entries", lambda w: w.client.cq.poll("1")),
    ("cq.wait(0)", InvalidArgument, "num_entries", lambda w: w.client.cq.wait(0)),
    ("cq.wait(> cqe)", InvalidArgument, "num_entries", lambda w: w.client.cq.wait(w.client.cq.cqe + 1)),
    ("cq.wait(timeout=-1)", InvalidArgument, "timeout", lambda w: w.client.cq.wait(1, timeout=-1)),
    ("cq.wait(timeout=nan)", InvalidArgument, "timeout", lambda w: w.client.cq.wait(1, timeout=float("nan"))),
    ("cq.wait(timeout='1')", WrongArgumentType, "timeout", lambda w: w.client.cq.wait(1, timeout="1")),
    ("create_qp(pd=str)", WrongArgumentType, "pd", lambda w: w.client.device.create_id().create_qp("pd", w.client.cq)),
    ("create_qp(send_cq=None)", WrongArgumentType, "send_cq",
     lambda w: w.client.device.create_id().create_qp(w.client.pd, None)),
    ("create_qp(recv_cq=5)", WrongArgumentType, "recv_cq",
     lambda w: w.client.device.create_id().create_qp(w.client.pd, w.client.cq, 5)),
    ("create_qp(cap=tuple)", WrongArgumentType, "cap",
     lambda w: w.client.device.create_id().create_qp(w.client.pd, w.client.cq, cap=(1, 1, 1, 1))),
    ("create_qp(max_send_wr=0)", InvalidArgument, "cap.max_send_wr",
     lambda w: w.client.device.create_id().create_qp(w.client.pd, w.client.cq, cap=QPCap(max_send_wr=0))),
    ("create_qp(max_recv_sge=2)", InvalidArgument, "cap.max_recv_sge",
     lambda w: w.client.device.create_id().create_qp(w.client.pd, w.client.cq, cap=QPCap(max_recv_sge=2))),
    ("create_qp(max_send_sge='4')", WrongArgumentType, "cap.max_send_sge",
     lambda w: w.client.device.create_id().create_qp(w.client.pd, w.client.cq, cap=QPCap(max_send_sge="4"))),
    ("create_qp(other device's cq)", InvalidArgument, "send_cq",
     lambda w: w.client.device.create_id().create_qp(w.client.pd, w.server.cq)),
    ("create_qp(other device's pd)", InvalidArgument, "pd",
     lambda w: w.client.device.create_id().create_qp(w.server.pd, w.client.cq)),
    ("create_qp(listening id)", InvalidState, "listening",
     lambda w: w.server.listener.create_qp(w.server.pd, w.server.cq)),
    ("listen(backlog=-1)", InvalidArgument, "backlog", lambda w: w.client.device.create_id().listen(-1)),
    ("listen(backlog='x')", WrongArgumentType, "backlog", lambda w: w.client.device.create_id().listen("x")),
    ("connect(address=str)", WrongArgumentType, "address", lambda w: w.idle.connect("10.0.0.1")),
    ("connect(bad ip)", InvalidArgument, "address[0]", lambda w: w.idle.connect(("10.0.0.300", 5001))),
    ("connect(ip bytes)", WrongArgumentType, "address[0]", lambda w: w.idle.connect((b"10.0.0.1", 5001))),
    ("connect(port 0)", InvalidArgument, "address[1]", lambda w: w.idle.connect(("10.0.0.1", 0))),
    ("connect(port 70000)", InvalidArgument, "address[1]", lambda w: w.idle.connect(("10.0.0.1", 70000))),
    ("connect(param=dict)", WrongArgumentType, "param", lambda w: w.idle.connect(w.server.device.address, {})),
    ("connect(IRD -1)", InvalidArgument, "param.responder_resources",
     lambda w: w.idle.connect(w.server.device.address, ConnParam(responder_resources=-1))),
    ("connect(ORD 99)", InvalidArgument, "param.initiator_depth",
     lambda w: w.idle.connect(w.server.device.address, ConnParam(initiator_depth=99))),
    ("connect(IRD '4')", WrongArgumentType, "param.responder_resources",
     lambda w: w.idle.connect(w.server.device.address, ConnParam(responder_resources="4"))),
    ("connect(private_data 509)", PrivateDataTooLong, "param.private_data",
     lambda w: w.idle.connect(w.server.device.address, ConnParam(private_data=bytes(509)))),
    ("connect(private_data str)", WrongArgumentType, "param.private_data",
     lambda w: w.idle.connect(w.server.device.address, ConnParam(private_data="hello"))),
    ("connect(no rtr_types)", InvalidArgument, "param.rtr_types",
     lambda w: w.idle.connect(w.server.device.address, ConnParam(rtr_types=()))),
    ("connect(rtr_types str)", InvalidArgument, "param.rtr_types[0]",
     lambda w: w.idle.connect(w.server.device.address, ConnParam(rtr_types=("write",)))),
    ("connect(rtr_types twice)", InvalidArgument, "param.rtr_types",
     lambda w: w.idle.connect(w.server.device.address, ConnParam(rtr_types=(RtrType.WRITE, RtrType.WRITE)))),
    ("accept(param=None)", WrongArgumentType, "param", lambda w: w.request.accept(None)),
    ("accept(private_data 600)", PrivateDataTooLong, "param.private_data",
     lambda w: w.request.accept(ConnParam(private_data=bytes(600)))),
    ("accept(ORD -2)", InvalidArgument, "param.initiator_depth",
     lambda w: w.request.accept(ConnParam(initiator_depth=-2))),
    ("reject(private_data 509)", PrivateDataTooLong, "private_data", lambda w: w.request.reject(bytes(509))),
    ("reject(private_data int)", WrongArgumentType, "private_data", lambda w: w.request.reject(7)),
    ("accept(idle id)", InvalidState, "idle", lambda w: w.idle.accept()),
    ("disconnect(idle id)", InvalidState, "idle", lambda w: w.idle.disconnect()),
    ("get_cm_event(timeout=0)", InvalidArgument, "timeout", lambda w: w.idle.get_cm_event(timeout=0)),
    ("get_cm_event(timeout='soon')", WrongArgumentType, "timeout", lambda w: w.idle.get_cm_event(timeout="soon")),
    ("post_recv(str)", WrongArgumentType, "wr", lambda w: w.client.qp.post_recv("wr")),
    ("post_recv(SendWR)", WrongArgumentType, "wr", lambda w: w.client.qp.post_recv(w.write())),
    ("post_recv(wr_id '1')", WrongArgumentType, "wr.wr_id", lambda w: w.client.qp.post_recv(RecvWR("1", [w.sge()]))),
    ("post_recv(wr_id -1)", InvalidArgument, "wr.wr_id", lambda w: w.client.qp.post_recv(RecvWR(-1, [w.sge()]))),
    ("post_recv(wr_id 2**64)", InvalidArgument, "wr.wr_id", lambda w: w.client.qp.post_recv(RecvWR(BIG, [w.sge()]))),
    ("post_recv(sg_list SGE)", WrongArgumentType, "wr.sg_list", lambda w: w.client.qp.post_recv(RecvWR(1, w.sge()))),
    ("post_recv(sg_list of str)", WrongArgumentType, "wr.sg_list[0]",
     lambda w: w.client.qp.post_recv(RecvWR(1, ["a"]))),
    ("post_recv(addr -1)", InvalidArgument, "wr.sg_list[0].addr",
     lambda w: w.client.qp.post_recv(RecvWR(1, [SGE(-1, 4, w.client.mr.lkey)]))),
    ("post_recv(length -4)", InvalidArgument, "wr.sg_list[0].length",
     lambda w: w.client.qp.post_recv(RecvWR(1, [w.sge(length=-4)]))),
    ("post_recv(length 2**32)", InvalidArgument, "wr.sg_list[0].length",
     lambda w: w.client.qp.post_recv(RecvWR(1, [w.sge(length=1 << 32)]))),
    ("post_recv(lkey 2**32)", InvalidArgument, "wr.sg_list[0].lkey",
     lambda w: w.client.qp.post_recv(RecvWR(1, [SGE(w.client.mr.buf, 4, 1 << 32)]))),
    ("post_recv(lkey str)", WrongArgumentType, "wr.sg_list[0].lkey",
     lambda w: w.client.qp.post_recv(RecvWR(1, [SGE(w.client.mr.buf, 4, "key")]))),
    ("post_recv(unknown lkey)", SgeOutsideRegion, "wr.sg_list[0].lkey",
     lambda w: w.client.qp.post_recv(RecvWR(1, [SGE(w.client.mr.buf, 4, w.client.mr.lkey ^ 0xFF)]))),
    ("post_recv(past the region)", SgeOutsideRegion, "wr.sg_list[0]",
     lambda w: w.client.qp.post_recv(RecvWR(1, [w.sge(offset=w.client.mr.length - 2, length=4)]))),
    ("post_recv(below the region)", SgeOutsideRegion, "wr.sg_list[0]",
     lambda w: w.client.qp.post_recv(RecvWR(1, [SGE(w.client.mr.buf - 1, 4, w.client.mr.lkey)]))),
    ("post_recv(two SGEs)", TooManySges, "wr.sg_list",
     lambda w: w.client.qp.post_recv(RecvWR(1, [w.sge(), w.sge(16)]))),
    ("post_recv(read-only region)", SgeAccessDenied, "wr.sg_list[0]",
     lambda w: w.client.qp.post_recv(RecvWR(1, [SGE(w.read_only.buf, 4, w.read_only.lkey)]))),
    ("post_send(RecvWR)", WrongArgumentType, "wr", lambda w: w.client.qp.post_send(RecvWR(1, [w.sge()]))),
    ("post_send(wr_id 1.0)", WrongArgumentType, "wr.wr_id", lambda w: w.client.qp.post_send(w.write(wr_id=1.0))),
    ("post_send(opcode 0)", InvalidArgument, "wr.opcode", lambda w: w.client.qp.post_send(w.write(opcode=0))),
    ("post_send(opcode 'SEND')", InvalidArgument, "wr.opcode", lambda w: w.client.qp.post_send(w.write(opcode="SEND"))),
    ("post_send(send_flags 0x100)", InvalidArgument, "wr.send_flags",
     lambda w: w.client.qp.post_send(w.write(opcode=C.SEND, send_flags=0x100))),
    ("post_send(send_flags str)", WrongArgumentType, "wr.send_flags",
     lambda w: w.client.qp.post_send(w.write(opcode=C.SEND, send_flags="solicited"))),
    ("post_send(SOLICITED Write)", InvalidArgument, "wr.send_flags",
     lambda w: w.client.qp.post_send(w.write(send_flags=SendFlags.SOLICITED))),
    ("post_send(remote_addr -1)", InvalidArgument, "wr.remote_addr",
     lambda w: w.client.qp.post_send(w.write(remote_addr=-1))),
    ("post_send(remote_addr 2**64)", InvalidArgument, "wr.remote_addr",
     lambda w: w.client.qp.post_send(w.write(remote_addr=BIG))),
    ("post_send(Write past 2**64)", InvalidArgument, "wr.remote_addr",
     lambda w: w.client.qp.post_send(w.write(remote_addr=BIG - 8))),
    ("post_send(rkey -1)", InvalidArgument, "wr.rkey", lambda w: w.client.qp.post_send(w.write(rkey=-1))),
    ("post_send(rkey 2**32)", InvalidArgument, "wr.rkey", lambda w: w.client.qp.post_send(w.write(rkey=1 << 32))),
    ("post_send(invalidate on Send)", InvalidArgument, "wr.invalidate_rkey",
     lambda w: w.client.qp.post_send(w.write(opcode=C.SEND, invalidate_rkey=5))),
    ("post_send(SEND_WITH_INV without)", InvalidArgument, "wr.invalidate_rkey",
     lambda w: w.client.qp.post_send(w.write(opcode=C.SEND_WITH_INV))),
    ("post_send(invalidate_rkey -1)", InvalidArgument, "wr.invalidate_rkey",
     lambda w: w.client.qp.post_send(w.write(opcode=C.SEND_WITH_INV, invalidate_rkey=-1))),
    ("post_send(sg_list generator)", WrongArgumentType, "wr.sg_list",
     lambda w: w.client.qp.post_send(w.write(sg_list=(s for s in [w.sge()])))),
    ("post_send(Write past the region)", SgeOutsideRegion, "wr.sg_list[1]",
     lambda w: w.client.qp.post_send(w.write(sg_list=[w.sge(), w.sge(w.client.mr.length - 8)]))),
    ("post_send(17 SGEs)", TooManySges, "wr.sg_list", lambda w: w.client.qp.post_send(w.write(sg_list=[w.sge()] * 17))),
    ("post_send(Read two SGEs)", TooManySges, "wr.sg_list",
     lambda w: w.client.qp.post_send(w.write(opcode=C.RDMA_READ, sg_list=[w.sge(), w.sge(16)]))),
    ("post_send(Read into read-only)", SgeAccessDenied, "wr.sg_list[0]",
     lambda w: w.client.qp.post_send(w.write(opcode=C.RDMA_READ, sg_list=[SGE(w.read_only.buf, 4, w.read_only.lkey)]))),
    ("post_send(Read past the region)", SgeOutsideRegion, "wr.sg_list[0]",
     lambda w: w.client.qp.post_send(w.write(opcode=C.RDMA_READ, sg_list=[w.sge(w.client.mr.length, 1)]))),
    ("post_send(unconnected)", NotConnected, "not connected", lambda w: w.idle.qp.post_send(w.write())),
]


def run_world(backend: str, body) -> None:
    async def main(fabric):
        await body(await world(fabric))

    run(main, backend, link=LinkConfig())


@pytest.mark.parametrize("call, error, argument, invoke", CASES, ids=[case[0] for case in CASES])
def test_a_bad_argument_is_refused_naming_it(call, error, argument, invoke, backend):
    async def body(w: World) -> None:
        with pytest.raises(error) as raised:
            invoke(w)
        assert argument in str(raised.value), f"{call}: {raised.value}"

    run_world(backend, body)


def test_no_bad_call_writes_outside_a_registered_region(backend):
    """Every bad call once, on one pair; then good traffic both ways (a Send into a posted receive, an RDMA Write,
    an RDMA Read) and the waits it takes: every byte either host's device wrote lies in a region."""
    memories = {}

    async def body(w: World) -> None:
        for call, error, _, invoke in CASES:
            with pytest.raises(error):
                invoke(w)
        client, server = w.client, w.server
        server.qp.post_recv(RecvWR(1, [SGE(server.mr.buf, 64, server.mr.lkey)]))
        client.mr.write(bytes(range(64)))
        client.qp.post_send(SendWR(2, C.SEND, [w.sge(0, 64)]))
        client.qp.post_send(w.write(wr_id=3, sg_list=[w.sge(0, 64)], remote_addr=server.mr.buf + 128))
        client.qp.post_send(w.write(wr_id=4, opcode=C.RDMA_READ, sg_list=[w.sge(256, 64)]))
        completions = await client.cq.wait(3) + await server.cq.wait(1)
        assert [wc.status for wc in completions] == [WCStatus.SUCCESS] * 4
        assert server.mr.read(64) == server.mr.read(64, 128) == client.mr.read(64, 256) == bytes(range(64))
        for side, regions in w.regions.items():
            host = w.fabric.backend.pair.hosts[side]
            allowed = [(mr.buf, mr.length) for mr in regions]
            if isinstance(host, OffloadRnic):   # the host's own buffers, scratch and bounce areas
                allowed += host.own_areas
            memories[side] = (host.memory, allowed)

    run_world(backend, body)
    for side, (memory, regions) in memories.items():
        assert memory.writes, side
        assert memory.written_outside(regions) == [], side


def test_a_closed_device_and_a_deregistered_region_take_no_more_calls(backend):
    async def main(fabric):
        server, client = await connected(fabric, region=4096)
        spare = client.pd.reg_mr(4096, AccessFlags.LOCAL_WRITE)
        spare.dereg()
        for call in (lambda: spare.write(b"x"), lambda: spare.read(1), spare.dereg):
            with pytest.raises(InvalidState, match="deregistered"):
                call()
        with pytest.raises(SgeOutsideRegion, match=r"wr\.sg_list\[0\]\.lkey"):
            client.qp.post_recv(RecvWR(1, [SGE(spare.buf, 4, spare.lkey)]))
        device = client.device
        device.close()
        for call in (device.alloc_pd, device.create_cq, device.create_id, device.close,
                     lambda: client.pd.reg_mr(64), lambda: client.qp.post_recv(RecvWR(1, [SGE(client.mr.buf, 4,
                                                                                              client.mr.lkey)])),
                     lambda: client.qp.post_send(SendWR(1, C.SEND, [SGE(client.mr.buf, 4, client.mr.lkey)])),
                     lambda: client.id.disconnect()):
            with pytest.raises(InvalidState, match="is closed"):
                call()
        assert device.query_device().max_qp >= 1  # its limits stay readable
        event = await server.id.get_cm_event()
        assert event.event_type is CMEventType.DISCONNECTED

    run(main, backend)

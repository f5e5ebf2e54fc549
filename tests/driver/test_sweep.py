"""Every public call, every argument, a set of bad values: whatever the driver raises is a `DriverError`.

`test_arguments.py` checks chosen bad calls, the error's type and the
argument it names; this sweep checks the promise of `driver/errors.py` for
every argument of every call (and every field of the records passed in:
`SendWR`, `RecvWR`, `SGE`, `ConnParam`, `QPCap`, `LinkConfig`, the fabric's
options): a wrong value is refused with a `DriverError` (or taken), never a
`TypeError`, `AttributeError` or one of the model's errors.
"""

from __future__ import annotations

import inspect
from dataclasses import fields, replace

from driver import (
    SGE, AccessFlags, ConnParam, DriverError, LinkConfig, QPCap, RecvWR, SendFlags, SendWR, WROpcode, open_fabric, run,
)
from model.rnic.host import RnicConfig
from tests.driver.harness import connected

BAD = (None, "x", -1, 1 << 70, 0.5, float("nan"), object(), b"\xff" * 600, (), [object()], {"a": 1}, True)


class Sweep:
    def __init__(self) -> None:
        self.escaped: list[str] = []
        self.calls = 0

    def call(self, label: str, function, *args, **kwargs) -> None:
        """Call `function`; anything but a DriverError escaping is recorded (a coroutine returned is closed)."""
        self.calls += 1
        try:
            result = function(*args, **kwargs)
        except DriverError:
            return
        except Exception as error:  # noqa: BLE001 - what the sweep looks for
            self.escaped.append(f"{label}: {type(error).__name__}: {error}")
            return
        if inspect.iscoroutine(result):
            result.close()

    def arguments(self, label: str, function, **good) -> None:
        """Each keyword of `good` replaced by each bad value in turn."""
        for name in good:
            for bad in BAD:
                self.call(f"{label}({name}={bad!r:.40})", function, **{**good, name: bad})

    def record_fields(self, label: str, build, record) -> None:
        """Each field of the dataclass `record` replaced by each bad value, the call made with `build(record)`."""
        for field in fields(record):
            for bad in BAD:
                self.call(f"{label}: {type(record).__name__}.{field.name}={bad!r:.40}",
                          lambda: build(replace(record, **{field.name: bad})))


def sweep_fabric(sweep: Sweep, backend: str) -> None:
    sweep.call("open_fabric(backend=?)", open_fabric, object())
    options = [f.name for f in fields(RnicConfig) if f.name not in ("mac", "ip", "port")] + ["link", "seed"]
    for name in options:
        for bad in BAD:
            sweep.call(f"open_fabric({name}={bad!r:.40})", open_fabric, backend, **{name: bad})
    for field in fields(LinkConfig):
        for bad in BAD:
            if field.name != "rate" or bad is not None:
                sweep.call(f"LinkConfig({field.name}={bad!r:.40})", LinkConfig, **{field.name: bad})


async def sweep_devices(fabric, sweep: Sweep) -> None:
    server, client = await connected(fabric, region=1 << 16)
    device, pd, cq, mr, qp = client.device, client.pd, client.cq, client.mr, client.qp
    channel = device.create_comp_channel()
    sweep.arguments("create_cq", device.create_cq, cqe=16, channel=channel)
    armed = device.create_cq(16, channel)
    sweep.arguments("req_notify", armed.req_notify, solicited_only=True)
    sweep.arguments("ack_events", armed.ack_events, num_events=0)
    sweep.arguments("get_cq_event", channel.get_cq_event, timeout=1.0)
    sweep.arguments("reg_mr", pd.reg_mr, length=64, access=AccessFlags.LOCAL_WRITE)
    sweep.arguments("mr.write", mr.write, data=b"x", offset=0)
    sweep.arguments("mr.read", mr.read, length=1, offset=0)
    sweep.arguments("cq.poll", cq.poll, num_entries=1)
    sweep.arguments("cq.wait", cq.wait, num_entries=1, timeout=1.0)
    sweep.arguments("wait_closed", device.wait_closed, timeout=1.0)
    sweep.arguments("create_qp", lambda **kw: device.create_id().create_qp(**kw), pd=pd, send_cq=cq, recv_cq=cq,
                    cap=QPCap(), sq_sig_all=False)
    sweep.record_fields("create_qp", lambda cap: device.create_id().create_qp(pd, cq, cap=cap), QPCap())
    sweep.arguments("listen", lambda **kw: device.create_id().listen(**kw), backlog=1)
    sweep.arguments("bind_addr", lambda **kw: device.create_id().bind_addr(**kw), address=(device.address[0], 9000))
    sweep.arguments("get_cm_event", client.id.get_cm_event, timeout=1.0)

    def idle_id():
        cm_id = device.create_id()
        cm_id.create_qp(pd, cq)
        return cm_id

    sweep.arguments("connect", lambda **kw: idle_id().connect(**kw), address=server.device.address,
                    param=ConnParam())
    sweep.record_fields("connect", lambda param: idle_id().connect(server.device.address, param), ConnParam())
    request = server.device.create_id()  # accept and reject on an id with no request: InvalidState, or the argument
    sweep.arguments("accept", request.accept, param=ConnParam())
    sweep.record_fields("accept", request.accept, ConnParam())
    sweep.arguments("reject", request.reject, private_data=b"")
    sge = SGE(mr.buf, 16, mr.lkey)
    write = SendWR(1, WROpcode.RDMA_WRITE, [sge], remote_addr=server.mr.buf, rkey=server.mr.rkey)
    sweep.arguments("post_send", qp.post_send, wr=write)
    for opcode in WROpcode:
        good = replace(write, opcode=opcode, invalidate_rkey=5 if opcode is WROpcode.SEND_WITH_INV else None,
                       send_flags=SendFlags.SOLICITED if opcode is WROpcode.SEND else SendFlags.NONE)
        sweep.record_fields(f"post_send({opcode.name})", qp.post_send, good)
        sweep.record_fields(f"post_send({opcode.name})", lambda s, good=good: qp.post_send(replace(good, sg_list=[s])),
                            sge)
    for bad in BAD:
        sweep.call(f"post_send([write, {bad!r:.40}])", qp.post_send, [write, bad])
        sweep.call(f"post_recv([recv, {bad!r:.40}])", qp.post_recv, [RecvWR(2, [sge]), bad])
    sweep.arguments("post_recv", qp.post_recv, wr=RecvWR(2, [sge]))
    sweep.record_fields("post_recv", qp.post_recv, RecvWR(2, [sge]))
    sweep.record_fields("post_recv", lambda s: qp.post_recv(RecvWR(2, [s])), sge)


def test_every_public_call_raises_only_driver_errors(backend):
    sweep = Sweep()
    sweep_fabric(sweep, backend)

    async def main(fabric):
        await sweep_devices(fabric, sweep)

    run(main, backend)
    assert sweep.calls > 1000
    assert sweep.escaped == []

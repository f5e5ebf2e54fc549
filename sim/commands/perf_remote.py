"""`rnic perf --server` and `rnic perf --client HOST`: the perftest measurements between two processes, each with
its own device on a real transport (`driver.open_device`), as `ib_write_bw` and the rest run with a server
and a client.

    rnic perf --server [--bind [udp:|ip:|eth:IFACE:]ADDR[:PORT]]              # waits for one client, then exits
    rnic perf --server --bind board:CONTROL@ADDR[:PORT]                      # the board is the server's device
    rnic perf --client HOST[:PORT] [--bind ...] [--test ...] [--sizes ...] [--iters N]

The server is the sink (the data lands on it, as on device 0 of `rnic perf`), the client the source; the
client chooses the plan and prints the tables.  Two connections join them (two DDP streams of one SCTP
association): a control connection whose Sends carry small JSON messages (`ControlChannel`), and the data
connection the measurements run on.  The client's connect carries its plan and its region (STag, address)
as private data (RFC 5043 6.2), the server's accept its own region and limits.  For each test and size the
client asks, the server prepares (clears its buffer, posts its receives) and answers "ready"; then:

* write_bw, send_bw: the client posts as `rnic perf` does; the server answers "done" at its last receive
  completion; the span is the client's, from its first post to the arrival of "done" (one control message
  more than `rnic perf` counts);
* read_bw: the server, the sink, Reads and times itself, and sends its span with "done";
* send_lat: ping-pong on the data connection, each sample half the client's round trip.

The bytes are the same seeded patterns as `rnic perf`'s (`sim.commands.perf._fill`), so each side checks
what landed on it against what it computes itself; the server's verdict on each step comes with its next
answer, and any mismatch fails the run.  send_bw posts every receive before the Sends start (the
server's queue pair holds `iters` receives), so `--iters` is at most the device's `max_qp_wr` there.

Both columns of the tables are real time here: "simulated" is the device's clock (`time.monotonic`),
"wall-clock" `time.perf_counter`.
"""

from __future__ import annotations

import asyncio
import io
import json
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from driver import (CQ, MR, PD, QP, SGE, AccessFlags, CMEventType, CMID, ConnParam, Device, DriverError, QPCap,
                    RecvWR, SendWR, WaitTimeout, WROpcode, open_device)
from sim.commands.perf import (RECV_DEPTH, WRITE_DEPTH, BandwidthRow, Clock, LatencyRow, PerfFailed, PerfPlan,
                               Report, Row, Span, _ok)

CONTROL_BYTES = 4096
"""The largest control message, and each of the control connection's buffers."""
CONTROL_RECEIVES = 4
"""Receives each side keeps posted on the control connection: the exchange is one message each way at a time."""
WAIT = 60.0
"""Seconds any one wait may take before the run is given up (a dead peer is found sooner by SCTP, RFC 4960 8.1)."""
ACCESS = AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE | AccessFlags.REMOTE_READ
CLOSE_WAIT = 5.0
"""Seconds the server waits for the association's shutdown once the client is done.  The last packet of a
shutdown, the client's SHUTDOWN COMPLETE (RFC 4960 9.2), can be lost, and the client's process gone by then:
nothing answers the server's SHUTDOWN ACK again, and its retransmissions would run to
Association.Max.Retrans (minutes)."""


def transport_spec(text: str, default_port: int | None = None) -> str:
    """`--bind`'s value as `open_device` takes it: a spec ("udp:...", "ip:...", "eth:...", or "board:..." for a
    board on its network), or ADDR[:PORT] over UDP."""
    if text.startswith(("udp:", "ip:", "eth:", "board:")):
        return text
    if default_port is not None and ":" not in text:
        text = f"{text}:{default_port}"
    return f"udp:{text}"


def peer_address(text: str, default_port: int = 9899) -> tuple[str, int]:
    """`--client`'s HOST[:PORT]."""
    host, colon, port = text.rpartition(":")
    if not colon:
        return text, default_port
    if not port.isdigit() or not 1 <= int(port) <= 0xFFFF:
        raise ValueError(f"{text!r}: the port is not a number within 1..65535")
    return host, int(port)


def pattern(size: int, seed: int) -> bytes:
    """The bytes `rnic perf` sends (`sim.commands.perf._fill`): both processes compute them."""
    return random.Random(seed).randbytes(size)


class ControlChannel:
    """JSON messages as Sends on the control connection: each side keeps `CONTROL_RECEIVES` receives posted."""

    def __init__(self, pd: PD, device: Device) -> None:
        self.mr: MR = pd.reg_mr(CONTROL_BYTES * (CONTROL_RECEIVES + 1), AccessFlags.LOCAL_WRITE)
        self.send_cq, self.recv_cq = device.create_cq(), device.create_cq()
        self.qp: QP | None = None
        self._next = 0

    def create_qp(self, cm_id: CMID, pd: PD) -> None:
        self.qp = cm_id.create_qp(pd, self.send_cq, self.recv_cq, QPCap(max_send_wr=4, max_recv_wr=CONTROL_RECEIVES,
                                                                         max_send_sge=1))
        for slot in range(CONTROL_RECEIVES):
            self._post(slot)

    def _post(self, slot: int) -> None:
        self.qp.post_recv(RecvWR(slot, [SGE(self.mr.buf + (slot + 1) * CONTROL_BYTES, CONTROL_BYTES,
                                            self.mr.lkey)]))

    async def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode()
        if len(data) > CONTROL_BYTES:
            raise PerfFailed(f"a control message of {len(data)} bytes is longer than {CONTROL_BYTES}")
        self.mr.write(data, 0)
        self.qp.post_send(SendWR(0, WROpcode.SEND, [SGE(self.mr.buf, len(data), self.mr.lkey)]))
        _ok(await self.send_cq.wait(1, timeout=WAIT))

    async def receive(self) -> dict[str, Any]:
        (wc,) = _ok(await self.recv_cq.wait(1, timeout=WAIT))
        message = json.loads(self.mr.read(wc.byte_len, (wc.wr_id + 1) * CONTROL_BYTES))
        self._post(wc.wr_id)
        if "failed" in message:
            raise PerfFailed(f"the peer: {message['failed']}")
        return message


@dataclass
class _Side:
    """This process's device, its region (the first `largest` bytes what it sends, the rest where what it
    receives lands), its data connection's completion queues and queue pair, and the control channel."""

    device: Device
    pd: PD
    mr: MR
    largest: int
    send_cq: CQ
    recv_cq: CQ
    control: ControlChannel
    qp: QP | None = None
    cm_id: CMID | None = None
    control_id: CMID | None = None

    @classmethod
    def open(cls, device: Device, largest: int) -> _Side:
        pd = device.alloc_pd()
        return cls(device, pd, pd.reg_mr(2 * largest, ACCESS), largest, device.create_cq(4096),
                   device.create_cq(4096), ControlChannel(pd, device))

    def outgoing(self, size: int) -> SGE:
        return SGE(self.mr.buf, size, self.mr.lkey)

    def incoming(self, size: int) -> SGE:
        return SGE(self.mr.buf + self.largest, size, self.mr.lkey)

    def fill(self, size: int, seed: int) -> bytes:
        data = pattern(size, seed)
        self.mr.write(data, 0)
        return data

    def clear(self, size: int) -> None:
        self.mr.write(bytes(size), self.largest)

    def landed(self, size: int, seed: int) -> bool:
        return self.mr.read(size, self.largest) == pattern(size, seed)

    def post_receive(self, wr_id: int = 0) -> None:
        self.qp.post_recv(RecvWR(wr_id, [self.incoming(self.largest)]))

    def region(self) -> dict[str, int]:
        return {"addr": self.mr.buf, "rkey": self.mr.rkey, "largest": self.largest}

    def limits(self) -> dict[str, int]:
        attr = self.device.query_device()
        return {"ird": attr.max_qp_rd_atom, "ord": attr.max_qp_init_rd_atom, "max_qp_wr": attr.max_qp_wr}


def _param(mine: dict[str, int], theirs: dict[str, int], private_data: bytes = b"") -> ConnParam:
    return ConnParam(responder_resources=min(mine["ird"], theirs["ird"]),
                     initiator_depth=min(mine["ord"], theirs["ord"]), private_data=private_data)


def _cap(receives: int) -> QPCap:
    return QPCap(max_send_wr=WRITE_DEPTH + 1, max_recv_wr=max(RECV_DEPTH, receives), max_send_sge=1)


async def _expect(cm_id: CMID, kind: CMEventType, what: str):
    event = await cm_id.get_cm_event(timeout=WAIT)
    if event.event_type is not kind:
        raise PerfFailed(f"{what}: {event.event_type.name} {event.reason}")
    return event


# -- the server -----------------------------------------------------------------------------------------------


async def serve(device: Device, out: TextIO, listening: Callable[[], object] | None = None) -> None:
    """Wait for one client, run its plan as the sink, check every byte that lands here, and return;
    `listening` is called once a client can connect."""
    listener = device.create_id()
    listener.listen()
    print(f"rnic perf --server: {device.name}, waiting for a client", file=out, flush=True)
    if listening is not None:
        listening()
    request = await _expect(listener, CMEventType.CONNECT_REQUEST, "the control connection")
    offer = json.loads(request.private_data)
    plan = PerfPlan(tuple(offer["tests"]), tuple(offer["sizes"]), offer["iters"])
    side = _Side.open(device, max(plan.sizes))
    side.control.create_qp(request.id, side.pd)
    side.control_id = request.id
    reply = json.dumps({"region": side.region(), "limits": side.limits()}).encode()
    request.id.accept(_param(side.limits(), offer["limits"], reply))
    await _expect(request.id, CMEventType.ESTABLISHED, "the control connection")
    request = await _expect(listener, CMEventType.CONNECT_REQUEST, "the data connection")
    side.qp = request.id.create_qp(side.pd, side.send_cq, side.recv_cq,
                                   _cap(plan.iters if "send_bw" in plan.tests else 0))
    side.cm_id = request.id
    request.id.accept(_param(side.limits(), offer["limits"]))
    await _expect(request.id, CMEventType.ESTABLISHED, "the data connection")
    client = offer["region"]
    print(f"rnic perf --server: a client connected; tests {', '.join(plan.tests)}, {len(plan.sizes)} sizes, "
          f"{plan.iters} iterations", file=out, flush=True)
    verdict: bool | None = None
    while True:
        message = await side.control.receive()
        if "end" in message:
            await side.control.send({"landed": verdict})
            break
        test, size = message["test"], message["size"]
        verdict = await SERVER_STEPS[test](side, client, size, plan.iters, verdict)
        print(f"  {test:<9}{size:>9} bytes x {plan.iters}: {'landed exactly' if verdict else 'DIFFERENT BYTES'}",
              file=out, flush=True)
    await _expect(side.cm_id, CMEventType.DISCONNECTED, "disconnecting")
    await _expect(side.control_id, CMEventType.DISCONNECTED, "disconnecting")


async def _serve_write(side: _Side, client: dict, size: int, iters: int, verdict: bool | None) -> bool:
    side.clear(size)
    side.post_receive()
    await side.control.send({"ready": verdict})
    _ok(await side.recv_cq.wait(1, timeout=WAIT))   # the zero-length Send after the last Write (RFC 5041 5.4)
    await side.control.send({"done": True})
    return side.landed(size, size)


async def _serve_send(side: _Side, client: dict, size: int, iters: int, verdict: bool | None) -> bool:
    side.clear(size)
    for wr_id in range(iters):
        side.post_receive(wr_id)
    await side.control.send({"ready": verdict})
    received = 0
    while received < iters:
        received += len(_ok(await side.recv_cq.wait(1, timeout=WAIT) + side.recv_cq.poll(iters)))
    await side.control.send({"done": True})
    return side.landed(size, size + 4)


async def _serve_read(side: _Side, client: dict, size: int, iters: int, verdict: bool | None) -> bool:
    side.clear(size)
    await side.control.send({"ready": verdict})
    clock, depth = Clock(side.device.fabric), side.qp.ord
    start = clock.stamp()
    posted = completed = 0
    while completed < iters:
        while posted < iters and posted - completed < depth:
            side.qp.post_send(SendWR(posted, WROpcode.RDMA_READ, [side.incoming(size)], remote_addr=client["addr"],
                                     rkey=client["rkey"]))
            posted += 1
        completed += len(_ok(await side.send_cq.wait(1, timeout=WAIT) + side.send_cq.poll(depth)))
    span = start.until(clock.stamp())
    await side.control.send({"done": {"wall": span.wall, "simulated": span.simulated}})
    return side.landed(size, size + 1)


async def _serve_latency(side: _Side, client: dict, size: int, iters: int, verdict: bool | None) -> bool:
    side.clear(size)
    side.fill(size, size + 3)
    side.post_receive()
    await side.control.send({"ready": verdict})
    for i in range(iters):
        _ok(await side.recv_cq.wait(1, timeout=WAIT))
        if i + 1 < iters:
            side.post_receive()
        side.qp.post_send(SendWR(i, WROpcode.SEND, [side.outgoing(size)]))
    _ok(await side.send_cq.wait(iters, timeout=WAIT))
    return side.landed(size, size + 2)


SERVER_STEPS = {"write_bw": _serve_write, "send_bw": _serve_send, "read_bw": _serve_read,
                "send_lat": _serve_latency}


# -- the client -----------------------------------------------------------------------------------------------


async def drive(device: Device, server: tuple[str, int], plan: PerfPlan, report: Report) -> list[Row]:
    """Connect to the server, run `plan` with the server the sink, report each row; every byte checked."""
    side = _Side.open(device, max(plan.sizes))
    attr = device.query_device()
    if "send_bw" in plan.tests and plan.iters > attr.max_qp_wr:
        raise PerfFailed(f"send_bw posts every receive first: --iters {plan.iters} is above max_qp_wr "
                         f"{attr.max_qp_wr}")
    control = device.create_id()
    side.control.create_qp(control, side.pd)
    side.control_id = control
    offer = {"tests": list(plan.tests), "sizes": list(plan.sizes), "iters": plan.iters, "region": side.region(),
             "limits": side.limits()}
    control.connect(server, _param(side.limits(), side.limits(), json.dumps(offer).encode()))
    accepted = await _expect(control, CMEventType.ESTABLISHED, "the control connection")
    answer = json.loads(accepted.private_data)
    side.cm_id = device.create_id()
    side.qp = side.cm_id.create_qp(side.pd, side.send_cq, side.recv_cq, _cap(0))
    side.cm_id.connect(server, _param(side.limits(), answer["limits"]))
    await _expect(side.cm_id, CMEventType.ESTABLISHED, "the data connection")
    sink, clock, rows = answer["region"], Clock(device.fabric), []
    for test in plan.tests:
        for size in plan.sizes:
            row = await CLIENT_STEPS[test](side, sink, clock, size, plan.iters)
            rows.append(row)
            report.row(row)
    await side.control.send({"end": True})
    _check((await side.control.receive())["landed"])
    side.cm_id.disconnect()
    control.disconnect()
    for cm_id in (side.cm_id, control):
        await _expect(cm_id, CMEventType.DISCONNECTED, "disconnecting")
    return rows


def _check(verdict: bool | None) -> None:
    """The server's verdict on the step before (None: there was none)."""
    if verdict is False:
        raise PerfFailed("the bytes that landed on the server differ from those sent")


async def _ask(side: _Side, test: str, size: int) -> None:
    """Ask the server for the next step (this side's buffers ready first) and wait until it is ready too."""
    await side.control.send({"test": test, "size": size})
    _check((await side.control.receive())["ready"])


async def _client_write(side: _Side, sink: dict, clock: Clock, size: int, iters: int) -> Row:
    side.fill(size, size)
    await _ask(side, "write_bw", size)
    start = clock.stamp()
    posted = completed = 0
    while completed < iters:
        while posted < iters and posted - completed < WRITE_DEPTH:
            side.qp.post_send(SendWR(posted, WROpcode.RDMA_WRITE, [side.outgoing(size)],
                                     remote_addr=sink["addr"] + sink["largest"], rkey=sink["rkey"]))
            posted += 1
        completed += len(_ok(await side.send_cq.wait(1, timeout=WAIT) + side.send_cq.poll(WRITE_DEPTH)))
    side.qp.post_send(SendWR(iters, WROpcode.SEND))
    await side.control.receive()   # "done": the server's receive of the Send, so every Write is placed
    end = clock.stamp()
    _ok(await side.send_cq.wait(1, timeout=WAIT))
    return BandwidthRow("write_bw", size, iters, start.until(end))


async def _client_send(side: _Side, sink: dict, clock: Clock, size: int, iters: int) -> Row:
    side.fill(size, size + 4)
    await _ask(side, "send_bw", size)
    start = clock.stamp()
    posted = completed = 0
    while posted < iters:
        while posted < iters and posted - completed < WRITE_DEPTH:
            side.qp.post_send(SendWR(posted, WROpcode.SEND, [side.outgoing(size)]))
            posted += 1
        if posted < iters:
            completed += len(_ok(await side.send_cq.wait(1, timeout=WAIT) + side.send_cq.poll(WRITE_DEPTH)))
    await side.control.receive()   # "done": the server's last receive completion
    end = clock.stamp()
    if completed < iters:
        _ok(await side.send_cq.wait(iters - completed, timeout=WAIT))
    return BandwidthRow("send_bw", size, iters, start.until(end))


async def _client_read(side: _Side, sink: dict, clock: Clock, size: int, iters: int) -> Row:
    side.fill(size, size + 1)
    await _ask(side, "read_bw", size)
    span = (await side.control.receive())["done"]
    return BandwidthRow("read_bw", size, iters, Span(span["wall"], span["simulated"]))


async def _client_latency(side: _Side, sink: dict, clock: Clock, size: int, iters: int) -> Row:
    side.clear(size)
    side.fill(size, size + 2)
    side.post_receive()
    await _ask(side, "send_lat", size)
    samples = []
    for i in range(iters):
        start = clock.stamp()
        side.qp.post_send(SendWR(i, WROpcode.SEND, [side.outgoing(size)]))
        _ok(await side.recv_cq.wait(1, timeout=WAIT))
        samples.append(start.until(clock.stamp()).half())
        if i + 1 < iters:
            side.post_receive()
    _ok(await side.send_cq.wait(iters, timeout=WAIT))
    if not side.landed(size, size + 3):
        raise PerfFailed(f"send_lat {size}: the pong that landed differs from the server's")
    return LatencyRow("send_lat", size, iters, tuple(samples))


CLIENT_STEPS = {"write_bw": _client_write, "send_bw": _client_send, "read_bw": _client_read,
                "send_lat": _client_latency}


# -- the commands ---------------------------------------------------------------------------------------------


def _header(report: Report, device: Device, peer: str, iters: int, path_mtu: int | None) -> None:
    mtu = "" if path_mtu is None else f"; path MTU {path_mtu}"
    lines = [f"rnic perf: {device.name} (this process, the source) and the server at {peer} (the sink); "
             f"{iters} iterations per size{mtu}",
             "  device 0: the server (rnic perf --server); device 1: this client",
             "  simulated: here the device's own clock, time.monotonic (real time, as wall-clock)",
             "  wall-clock: seconds of this process (time.perf_counter); write_bw and send_bw end at the server's "
             "\"done\" on the control connection, read_bw is the server's own span",
             "  MB = 2^20 bytes (as perftest); MsgRate in millions of messages per second; latencies in usec"]
    print("\n".join(lines), file=report.out, flush=True)


async def _server_main(spec: str, out: TextIO, options: dict[str, Any],
                       listening: Callable[[], object] | None) -> None:
    device = open_device(spec, **options)
    try:
        await serve(device, out, listening)
        device.close()
        try:
            await device.wait_closed(timeout=CLOSE_WAIT)
        except WaitTimeout:   # every byte was checked already: the run stands
            print(f"rnic perf --server: the association's shutdown did not finish within {CLOSE_WAIT:g} s (the "
                  "client's SHUTDOWN COMPLETE lost and the client gone, RFC 4960 9.2); the socket is closed",
                  file=out)
    finally:
        device.fabric.backend.close()


async def _client_main(spec: str, server: tuple[str, int], plan: PerfPlan, report: Report,
                       options: dict[str, Any]) -> list[Row]:
    device = open_device(spec, **options)
    try:
        _header(report, device, f"{server[0]}:{server[1]}", plan.iters, options.get("path_mtu"))
        rows = await drive(device, server, plan, report)
        device.close()
        await device.wait_closed(timeout=WAIT)
    finally:
        device.fabric.backend.close()
    return rows


def server_command(bind: str | None, out: TextIO | None = None, options: dict[str, Any] | None = None,
                   listening: Callable[[], object] | None = None) -> int:
    """`rnic perf --server`: 0 once a client's run has ended with every byte landed, else 1; `options`: the
    device's (`open_device`'s, such as `path_mtu`); `listening`: called once a client can connect."""
    out = out if out is not None else sys.stdout
    try:
        asyncio.run(_server_main(transport_spec(bind or "udp::9899", 9899), out, options or {}, listening))
    except (PerfFailed, DriverError) as error:
        print(f"rnic perf --server: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print("rnic perf --server: every byte landed as sent", file=out)
    return 0


def client_rows(server: tuple[str, int], plan: PerfPlan, spec: str, options: dict[str, Any] | None = None,
                out: TextIO | None = None) -> list[Row]:
    """`plan` run from a device of this process (`spec`, `open_device`'s `options`) against the server at
    `server`: its rows, the tables printed on `out` (none without it); `PerfFailed` or `DriverError` when a
    byte landed wrong or the run failed."""
    report = Report(out if out is not None else io.StringIO(), engine=False)
    try:
        return asyncio.run(_client_main(spec, server, plan, report, options or {}))
    finally:
        report.close()


def client_command(server: str, plan: PerfPlan, bind: str | None, out: TextIO | None = None,
                   options: dict[str, Any] | None = None) -> int:
    """`rnic perf --client HOST[:PORT]`: the tables; 0 when every byte landed, else 1; `options` as for
    `server_command`."""
    out = out if out is not None else sys.stdout
    report = Report(out, engine=False)
    try:
        address = peer_address(server)
        asyncio.run(_client_main(transport_spec(bind or "udp::0", 0), address, plan, report, options or {}))
    except (PerfFailed, DriverError, ValueError) as error:
        report.close()
        print(f"rnic perf --client: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    report.close()
    return 0


__all__ = ["server_command", "client_command", "client_rows", "serve", "drive", "transport_spec", "peer_address"]

"""`rnic perf`: perftest-shaped measurements through the host driver (ib_write_bw, ib_send_lat, ib_read_bw).

    rnic perf [--backend soft|engine|sim] [--test write_bw|send_lat|read_bw|all] [--sizes BYTES ...]
              [--iters N] [--rate GBPS] [--delay USEC] [--loss P] [--seed N]

The measurement is a driver program (`perf_program`, `measure`): it uses the
driver's public calls only, so it runs unchanged on every backend.  Device 0
(10.0.0.1; on `sim` the host on the RTL RNIC top) listens,
device 1 (10.0.0.2) connects, and every test's data lands on device 0:

* write_bw: device 1 RDMA Writes `iters` messages into one buffer of
  device 0, up to `WRITE_DEPTH` outstanding (perftest's tx-depth), then a
  zero-length Send; the clock stops at device 0's receive completion of
  that Send, since a message is delivered only after every earlier one was
  placed (RFC 5041 5.4).  A Write completes at its source once its data
  source may be reused (5.4: when SCTP took it on `soft`, when its last
  chunk is acknowledged on the engine hosts), so the Writes' own
  completions do not say it landed.
* read_bw: device 0 RDMA Reads `iters` messages from device 1, as many
  outstanding as the connection's ORD (RFC 6581 9); a Read completes when
  its response is placed (RFC 5040 5.2).
* send_lat: ping-pong: device 1 Sends, device 0 answers its receive
  completion with a Send of the same size; half the round trip is one
  sample, as ib_send_lat reports.

Every figure is taken on two clocks: simulated seconds (the fabric's clock:
the link's delay and wire time, SCTP's timers; the hosts' software takes no
simulated time) and wall-clock seconds of the process running the model (on
`sim`, the simulator's process).  On `sim` a third: the clock cycles the
simulator ran the RTL RNIC top.  After each test the bytes that
landed are compared with the source's.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

from driver import (
    CQ, MR, PD, QP, WC, AccessFlags, CMEventType, ConnParam, Device, DeviceAttr, DriverError, Fabric, LinkConfig,
    QPCap, RecvWR, SendWR, SGE, WROpcode, run,
)

TESTS = ("write_bw", "send_lat", "read_bw")
DEFAULT_SIZES = tuple(1 << k for k in range(1, 21))
"""2 bytes to 1 MiB in powers of two, as `ib_write_bw -a`."""
SIM_SIZES = (2, 64, 1024, 16384)
"""Fewer on `sim`, where every frame to device 0 goes through the simulator."""
LARGEST_SIZE = {"soft": 1 << 26, "engine": 1 << 26, "sim": 1 << 20}
"""The largest message per backend: each device registers twice this; `sim`'s host memory is the testbench's
4 MiB AXI RAM (`sim.driver_sim.MEMORY_BYTES`)."""
DEFAULT_ITERS = 10
WRITE_DEPTH = 128
"""RDMA Writes outstanding in write_bw (perftest's default tx-depth)."""
DEFAULT_RATE_GBPS = 10.0
DEFAULT_DELAY_USEC = LinkConfig().delay * 1e6
"""The model's link's one-way delay (500 usec)."""
MB = 1 << 20
"""perftest's MB: 2^20 bytes."""
ACCESS = AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE | AccessFlags.REMOTE_READ
ENGINE_CLOCK = "10 ns"


class PerfFailed(Exception):
    """A measurement that went wrong: an error completion, bytes that did not land as sent, a failed set-up."""


@dataclass(frozen=True)
class Span:
    """An interval on every clock: wall-clock and simulated seconds, the RTL engine's cycles and nanoseconds
    (None off `sim`)."""

    wall: float
    simulated: float
    cycles: int | None = None
    engine_ns: float | None = None

    def half(self) -> Span:
        return Span(self.wall / 2, self.simulated / 2, None if self.cycles is None else self.cycles / 2,
                    None if self.engine_ns is None else self.engine_ns / 2)


@dataclass(frozen=True)
class _Stamp:
    wall: float
    simulated: float
    engine: tuple[int, float] | None

    @staticmethod
    def now(fabric: Fabric) -> _Stamp:
        return _Stamp(time.perf_counter(), fabric.now(), fabric.engine_time())

    def until(self, end: _Stamp) -> Span:
        cycles = engine_ns = None
        if self.engine is not None and end.engine is not None:
            cycles, engine_ns = end.engine[0] - self.engine[0], end.engine[1] - self.engine[1]
        return Span(end.wall - self.wall, end.simulated - self.simulated, cycles, engine_ns)


@dataclass(frozen=True)
class BandwidthRow:
    """write_bw or read_bw at one size: `iters` messages of `size` bytes in `span`."""

    test: str
    size: int
    iters: int
    span: Span

    @property
    def nbytes(self) -> int:
        return self.size * self.iters

    def bandwidth(self, seconds: float) -> float:
        """MB (2^20 bytes) per second."""
        return self.nbytes / seconds / MB if seconds > 0 else math.inf

    def message_rate(self, seconds: float) -> float:
        """Millions of messages per second."""
        return self.iters / seconds / 1e6 if seconds > 0 else math.inf


@dataclass(frozen=True)
class LatencyRow:
    """send_lat at one size: each sample half a round trip."""

    test: str
    size: int
    iters: int
    samples: tuple[Span, ...]


Row = BandwidthRow | LatencyRow


@dataclass(frozen=True)
class PerfPlan:
    tests: tuple[str, ...] = TESTS
    sizes: tuple[int, ...] = DEFAULT_SIZES
    iters: int = DEFAULT_ITERS


# -- the driver program --------------------------------------------------------------------------------------


@dataclass
class _Host:
    """One side: a region whose first half is the source of what it sends and whose second half is where
    what it receives lands, a send and a receive completion queue, the queue pair."""

    device: Device
    attr: DeviceAttr
    pd: PD
    mr: MR
    send_cq: CQ
    recv_cq: CQ
    half: int
    qp: QP | None = None

    def outgoing(self, size: int) -> SGE:
        return SGE(self.mr.buf, size, self.mr.lkey)

    def incoming(self, size: int) -> SGE:
        return SGE(self.mr.buf + self.half, size, self.mr.lkey)

    def post_receive(self, wr_id: int = 0) -> None:
        self.qp.post_recv(RecvWR(wr_id, [self.incoming(self.half)]))


def _ok(completions: list[WC]) -> list[WC]:
    for wc in completions:
        if not wc.ok:
            raise PerfFailed(f"work request {wc.wr_id} ({wc.opcode.name}) completed with {wc.status.name}"
                             + (f": {wc.describe()}" if wc.error is not None else ""))
    return completions


async def _connect(fabric: Fabric, largest: int) -> tuple[_Host, _Host]:
    """Device 1 connects to device 0 with the devices' largest IRD and ORD; each has one region of twice
    `largest` bytes."""
    hosts = []
    for device in fabric.devices:
        attr = device.query_device()
        pd = device.alloc_pd()
        hosts.append(_Host(device, attr, pd, pd.reg_mr(2 * largest, ACCESS), device.create_cq(), device.create_cq(),
                           largest))
    sink, source = hosts
    param = ConnParam(responder_resources=sink.attr.max_qp_rd_atom, initiator_depth=sink.attr.max_qp_init_rd_atom)
    cap = QPCap(max_send_wr=min(WRITE_DEPTH + 1, sink.attr.max_qp_wr), max_recv_wr=4, max_send_sge=1)
    listener = sink.device.create_id()
    listener.listen()
    client = source.device.create_id()
    source.qp = client.create_qp(source.pd, source.send_cq, source.recv_cq, cap)
    client.connect(sink.device.address, param)
    request = await listener.get_cm_event()
    if request.event_type is not CMEventType.CONNECT_REQUEST:
        raise PerfFailed(f"connecting: {request.event_type.name} {request.reason}")
    sink.qp = request.id.create_qp(sink.pd, sink.send_cq, sink.recv_cq, cap)
    request.id.accept(param)
    for cm_id in (client, request.id):
        event = await cm_id.get_cm_event()
        if event.event_type is not CMEventType.ESTABLISHED:
            raise PerfFailed(f"connecting: {event.event_type.name} {event.reason}")
    return sink, source


def _fill(host: _Host, size: int, seed: int) -> bytes:
    data = random.Random(seed).randbytes(size)
    host.mr.write(data)
    return data


def _landed(host: _Host, expected: bytes, what: str) -> None:
    if host.mr.read(len(expected), host.half) != expected:
        raise PerfFailed(f"{what}: the bytes that landed differ from those sent")


def _clear(host: _Host, size: int) -> None:
    host.mr.write(bytes(size), host.half)


async def write_bw(fabric: Fabric, sink: _Host, source: _Host, size: int, iters: int) -> BandwidthRow:
    data = _fill(source, size, size)
    _clear(sink, size)
    sink.post_receive()
    start = _Stamp.now(fabric)
    posted = completed = 0
    while completed < iters:
        while posted < iters and posted - completed < WRITE_DEPTH:
            source.qp.post_send(SendWR(posted, WROpcode.RDMA_WRITE, [source.outgoing(size)],
                                       remote_addr=sink.incoming(size).addr, rkey=sink.mr.rkey))
            posted += 1
        completed += len(_ok(await source.send_cq.wait(1) + source.send_cq.poll(WRITE_DEPTH)))
    source.qp.post_send(SendWR(iters, WROpcode.SEND))  # delivered once every Write is placed (RFC 5041 5.4)
    _ok(await sink.recv_cq.wait(1))
    end = _Stamp.now(fabric)
    _ok(await source.send_cq.wait(1))
    _landed(sink, data, f"write_bw {size}")
    return BandwidthRow("write_bw", size, iters, start.until(end))


async def read_bw(fabric: Fabric, sink: _Host, source: _Host, size: int, iters: int) -> BandwidthRow:
    data = _fill(source, size, size + 1)
    _clear(sink, size)
    depth = sink.qp.ord
    start = _Stamp.now(fabric)
    posted = completed = 0
    while completed < iters:
        while posted < iters and posted - completed < depth:
            sink.qp.post_send(SendWR(posted, WROpcode.RDMA_READ, [sink.incoming(size)],
                                     remote_addr=source.outgoing(size).addr, rkey=source.mr.rkey))
            posted += 1
        completed += len(_ok(await sink.send_cq.wait(1) + sink.send_cq.poll(depth)))
    end = _Stamp.now(fabric)
    _landed(sink, data, f"read_bw {size}")
    return BandwidthRow("read_bw", size, iters, start.until(end))


async def send_lat(fabric: Fabric, sink: _Host, source: _Host, size: int, iters: int) -> LatencyRow:
    pings, pongs = _fill(source, size, size + 2), _fill(sink, size, size + 3)
    for host in (sink, source):
        _clear(host, size)
        host.post_receive()
    samples = []
    for i in range(iters):
        start = _Stamp.now(fabric)
        source.qp.post_send(SendWR(i, WROpcode.SEND, [source.outgoing(size)]))
        _ok(await sink.recv_cq.wait(1))
        more = i + 1 < iters  # the next ping's receive; none left posted after the last
        if more:
            sink.post_receive()
        sink.qp.post_send(SendWR(i, WROpcode.SEND, [sink.outgoing(size)]))
        _ok(await source.recv_cq.wait(1))
        samples.append(start.until(_Stamp.now(fabric)).half())
        if more:
            source.post_receive()
    for host in (sink, source):
        _ok(await host.send_cq.wait(iters))
    _landed(sink, pings, f"send_lat {size}")
    _landed(source, pongs, f"send_lat {size}")
    return LatencyRow("send_lat", size, iters, tuple(samples))


MEASUREMENTS = {"write_bw": write_bw, "send_lat": send_lat, "read_bw": read_bw}


async def measure(fabric: Fabric, plan: PerfPlan, on_row: Callable[[Row], None] | None = None) -> list[Row]:
    """Every test of `plan` at every size, on one connection; `on_row` sees each row as it is measured."""
    sink, source = await _connect(fabric, max(plan.sizes))
    rows: list[Row] = []
    for test in plan.tests:
        for size in plan.sizes:
            row = await MEASUREMENTS[test](fabric, sink, source, size, plan.iters)
            rows.append(row)
            if on_row is not None:
                on_row(row)
    return rows


async def perf_program(fabric: Fabric, *, tests: list[str], sizes: list[int], iters: int, output: str) -> None:
    """`measure` as a program `sim.driver_sim.run_program` runs: its plan from the program's arguments, its
    rows written as JSON to the file `output` names."""
    rows = await measure(fabric, PerfPlan(tuple(tests), tuple(sizes), iters))
    Path(output).write_text(json.dumps([asdict(row) for row in rows]))


def rows_from_json(text: str) -> list[Row]:
    rows: list[Row] = []
    for item in json.loads(text):
        if "samples" in item:
            rows.append(LatencyRow(item["test"], item["size"], item["iters"],
                                   tuple(Span(**sample) for sample in item["samples"])))
        else:
            rows.append(BandwidthRow(item["test"], item["size"], item["iters"], Span(**item["span"])))
    return rows


# -- the tables ------------------------------------------------------------------------------------------------


def percentile(values: list[float], percent: float) -> float:
    """The nearest-rank percentile: the smallest value with at least `percent` % of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(percent / 100 * len(ordered))) - 1]


TITLES = {
    "write_bw": f"RDMA Write bandwidth (ib_write_bw): device 1 writes into device 0, up to {WRITE_DEPTH} "
                "outstanding; the clock stops at device 0's receive of a zero-length Send posted after the "
                "last Write (delivered only once every Write is placed, RFC 5041 5.4)",
    "read_bw": "RDMA Read bandwidth (ib_read_bw): device 0 reads from device 1, ORD Reads outstanding; a Read "
               "completes when its response is placed (RFC 5040 5.2)",
    "send_lat": "Send latency (ib_send_lat): ping-pong of Sends, device 1 first; each sample is half a round trip",
}
BW_COLUMNS = ("BW average[MB/sec]", "MsgRate[Mpps]")
LAT_COLUMNS = ("t_min", "t_typical", "t_avg", "t_99%", "t_max")


class Report:
    """The tables, printed a row at a time: a title and header whenever the test changes."""

    def __init__(self, out: TextIO, engine: bool) -> None:
        self.out, self.engine, self._test = out, engine, None

    def header(self, backend: str, link: LinkConfig, iters: int) -> None:
        rate = f"{link.rate / 1e9:g} Gb/s each way" if link.rate else "no rate limit"
        lines = [f"rnic perf: backend {backend}; link {rate}, one-way delay {link.delay * 1e6:g} usec, "
                 f"loss {link.loss:g}, seed {link.seed}; {iters} iterations per size",
                 "  simulated: seconds of the fabric's clock (the link's delay and wire time, SCTP's timers; "
                 "the hosts' software takes none)",
                 "  wall-clock: seconds of the process running the model"
                 + (" and the RTL simulation" if self.engine else " (CPython, one core)")]
        if self.engine:
            lines.append(f"  RTL: cycles ({ENGINE_CLOCK} each) the simulator ran device 0's RNIC top (W = 8): "
                         "each frame to device 0 alone, then drained; each request to its transmit engine until "
                         "it sent what its model sent; the table writes; the engines' line rates are `rnic bench "
                         "rx`'s and `rnic bench tx`'s")
        lines.append("  MB = 2^20 bytes (as perftest); MsgRate in millions of messages per second; latencies in usec")
        print("\n".join(lines), file=self.out, flush=True)

    def row(self, row: Row) -> None:
        if row.test != self._test:
            self._test = row.test
            print(f"\n{TITLES[row.test]}", file=self.out)
            print(self._column_header(row.test), file=self.out)
        print(self._format(row), file=self.out, flush=True)

    def _column_header(self, test: str) -> str:
        names = BW_COLUMNS if test != "send_lat" else LAT_COLUMNS
        width = 20 if test != "send_lat" else 11
        group = len(names) * width
        rtl = ("cycles", "cycles/msg") if test != "send_lat" else ("cycles/sample",)
        first = f"{'':21}{' simulated '.center(group, '-')} {' wall-clock '.center(group, '-')}"
        second = f"{'#bytes':>8} {'#iterations':>12}" + "".join(f"{n:>{width}}" for n in names) * 2
        if self.engine:
            first += " " + " RTL ".center(14 * len(rtl), "-")
            second += " " + "".join(f"{n:>14}" for n in rtl)
        return f"{first}\n{second}"

    def _format(self, row: Row) -> str:
        text = f"{row.size:>8} {row.iters:>12}"
        if isinstance(row, BandwidthRow):
            for seconds in (row.span.simulated, row.span.wall):
                text += f"{row.bandwidth(seconds):>20.4g}{row.message_rate(seconds):>20.4g}"
            if self.engine:
                cycles = row.span.cycles or 0
                text += f" {cycles:>14}{cycles / row.iters:>14.1f}"
            return text
        for clock in ("simulated", "wall"):
            values = [getattr(sample, clock) * 1e6 for sample in row.samples]
            figures = (min(values), statistics.median(values), statistics.fmean(values), percentile(values, 99),
                       max(values))
            text += "".join(f"{value:>11.2f}" for value in figures)
        if self.engine:
            text += f" {statistics.fmean(sample.cycles or 0 for sample in row.samples):>14.1f}"
        return text


# -- the command ---------------------------------------------------------------------------------------------


def perf_link(rate_gbps: float | None, delay_usec: float, loss: float, seed: int) -> LinkConfig:
    return LinkConfig(loss=loss, delay=delay_usec * 1e-6, seed=seed,
                      rate=None if rate_gbps is None else rate_gbps * 1e9)


def perf_command(backend: str, plan: PerfPlan, link: LinkConfig, seed: int = 1, out: TextIO | None = None) -> int:
    """Print the header and the tables; 0 when every measurement finished and every byte landed, else 1 after
    one line on stderr."""
    out = out if out is not None else sys.stdout
    report = Report(out, engine=backend == "sim")
    report.header(backend, link, plan.iters)
    try:
        if backend == "sim":
            rows = _run_on_sim(plan, link, seed)
            for row in rows:
                report.row(row)
        else:
            run(lambda fabric: measure(fabric, plan, report.row), backend, link=link, seed=seed)
    except (PerfFailed, DriverError) as error:
        print(f"rnic perf: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


def _run_on_sim(plan: PerfPlan, link: LinkConfig, seed: int) -> list[Row]:
    from sim.driver_sim import run_program
    from sim.runner import SimulationFailed

    with tempfile.TemporaryDirectory(prefix="rnic-perf-") as directory:
        output, log = Path(directory) / "rows.json", Path(directory) / "simulation.log"
        arguments = {"tests": list(plan.tests), "sizes": list(plan.sizes), "iters": plan.iters, "output": str(output)}
        try:
            run_program(perf_program, link=link, seed=seed, log_file=log, arguments=arguments)
        except SimulationFailed as error:
            failures = [line for line in log.read_text(errors="replace").splitlines()
                        if "PerfFailed" in line or "Error" in line] if log.exists() else []
            raise PerfFailed(f"{error}{': ' + failures[-1].strip() if failures else ''}") from None
        return rows_from_json(output.read_text())

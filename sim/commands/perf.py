"""`rnic perf`: perftest-shaped measurements through the host driver (ib_write_bw, ib_send_bw, ib_send_lat,
ib_read_bw), and on the board backend what each message costs on the board's control link.

    rnic perf [--backend soft|engine|sim|board] [--test write_bw|send_bw|send_lat|read_bw|all] [--sizes BYTES ...]
              [--iters N] [--qps N] [--rate GBPS] [--delay USEC] [--loss P] [--seed N]
              [--serial DEV --ethernet IFACE|tcp:HOST:PORT [--baud B] [--latency S] [--time-scale X]]
              [--direction to-board|from-board|both]

The measurement is a driver program (`perf_program`, `measure`): it uses the
driver's public calls only, so it runs unchanged on every backend.  The
sink (device 0, 10.0.0.1, unless said otherwise; on `sim` the host on the
RTL RNIC top) listens, the source (device 1, 10.0.0.2) connects, and every
test's data lands on the sink:

* write_bw: the source RDMA Writes `iters` messages into one buffer of
  the sink, up to `WRITE_DEPTH` outstanding (perftest's tx-depth), then a
  zero-length Send; the clock stops at the sink's receive completion of
  that Send, since a message is delivered only after every earlier one was
  placed (RFC 5041 5.4).  A Write completes at its source once its data
  source may be reused (5.4: when SCTP took it on `soft`, when its last
  chunk is acknowledged on the engine hosts), so the Writes' own
  completions do not say it landed.
* send_bw: the source Sends `iters` messages, each into a receive the sink
  posted beforehand (`RECV_DEPTH` posted at a time, as ib_send_bw's
  rx-depth); the clock stops at the sink's last receive completion.
* read_bw: the sink RDMA Reads `iters` messages from the source, as many
  outstanding as the connection's ORD (RFC 6581 9); a Read completes when
  its response is placed (RFC 5040 5.2).
* send_lat: ping-pong: the source Sends, the sink answers its receive
  completion with a Send of the same size; half the round trip is one
  sample, as ib_send_lat reports.

`--qps N` (perftest's `-q N`): N connections between the sink and the
source, each its own queue pair on its own DDP stream of the devices' one
SCTP association (RFC 5043 8), with its own region on each side (the
layout above), its own send and receive completion queues on each side,
and one protection domain per device shared by all.  They are set up one
after the other, untimed; then each test runs on all N at once (asyncio
tasks on the backend's loop): the pairs prepare (fill, clear, post
receives), start their clocks together, run the test as above, wait for
each other, and only then compare what landed, each pair its own seeded
bytes (distinct per pair, so a byte landing in another pair's region is
caught).  Per size a row per pair, and a row "all": every pair's bytes
over the span from the first pair's start to the last pair's end (on
send_lat every pair's samples).  A device has `query_device().max_qp`
queue pairs (one per DDP stream): on `soft` the fabric is opened with
`streams=N` when N is above its default 8, up to `SOFT_QPS_LIMIT`; on
`engine`, above its default 4, with the engines built for N
(`engine_tables`: N streams and a region row for each pair's region, as an
`hdl.rnic.Rnic` built with those tables), up to the same limit; on `board`
the build's stream table fixes it (4), and a larger N fails before
anything is timed.  `sim` runs one pair: its program runs
under cocotb, whose scheduler this one does not share (no asyncio tasks).

A host whose memory cannot hold a region of twice the largest size (the
board: 32 KiB of buffers, `driver.backends.board.board_memory_map`)
registers one of the largest size and sends from where it receives (in
send_lat it answers with the bytes it got, as ib_send_lat's one buffer).

On `board` (device 0 the board, device 1 its software peer; by default the
model board, `sim.board_model`, behind a real `driver.link.SerialLink`)
every test runs twice, `--direction both`: the data to the board (the
board the sink: the peer Writes and Sends into it, the board Reads from
the peer, the peer pings) and from it (the peer the sink: the board
Writes and Sends, the peer Reads from the board, the board pings), each
on its own connection, the first torn down before the second.  From the
start of each timed part to its end, `LinkMeter` counts the control
link's requests by op and the UART bytes each way as
`driver.link.LinkClient.observe` reports them, and the message payload
that crossed the link (MEM_READ and MEM_WRITE bytes inside the board's
perf region); the tables give them per message and per payload byte, and
the payload rate the link would allow at that cost (`board_link_rate`).

Every figure is taken on two clocks: simulated seconds (the fabric's clock:
the link's delay and wire time, SCTP's timers; the hosts' software takes no
simulated time) and wall-clock seconds of the process running the model (on
`sim`, the simulator's process).  On `sim` a third: the clock cycles the
simulator ran the RTL RNIC top.  After each test the bytes that
landed are compared with the source's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from driver import (
    CQ, MR, PD, QP, WC, AccessFlags, CMEventType, CMID, ConnParam, Device, DeviceAttr, DriverError, Fabric,
    LinkConfig, OutOfResources, QPCap, RecvWR, SendWR, SGE, WROpcode, run,
)
from driver.backends.engine import STREAM_IDS
from driver.link import Exchanged
from driver.options import ENGINE_REGIONS
from abi.link import Op
from model.rnic.host import RnicConfig

TESTS = ("write_bw", "send_bw", "send_lat", "read_bw")
DEFAULT_SIZES = tuple(1 << k for k in range(1, 21))
"""2 bytes to 1 MiB in powers of two, as `ib_write_bw -a`."""
SIM_SIZES = (2, 64, 1024, 16384)
"""Fewer on `sim`, where every frame to device 0 goes through the simulator."""
BOARD_SIZES = SIM_SIZES
"""And on `board`, where every record of the board's engines crosses its control link."""
BOARD_BUFFER_BYTES = 32 * 1024
"""The board's memory for the driver's buffers: the ECPIX-5's 64 KiB of host memory less the 32 KiB the backend
keeps at its top (`driver.backends.board.board_memory_map`)."""
LARGEST_SIZE = {"soft": 1 << 26, "engine": 1 << 26, "sim": 1 << 20, "board": BOARD_BUFFER_BYTES - 2 * 64}
"""The largest message per backend: each device registers twice this where it can; `sim`'s host memory is the
testbench's 4 MiB AXI RAM (`sim.driver_sim.MEMORY_BYTES`); the board registers once this, in its buffers less
the 64-byte alignment before and after a buffer (`driver.backends.board.BUFFER_ALIGNMENT`)."""
DEFAULT_ITERS = 10
WRITE_DEPTH = 128
"""RDMA Writes outstanding in write_bw (perftest's default tx-depth)."""
RECV_DEPTH = 4
"""Receives each side keeps posted (the queue pairs' max_recv_wr): send_bw's rx-depth."""
SOFT_DEFAULT_STREAMS = RnicConfig.__dataclass_fields__["streams"].default
"""The soft backend's DDP streams per association, so its queue pairs per device, unless told otherwise (8)."""
SOFT_QPS_LIMIT = 1024
"""`--qps` on `soft` and `engine`: the fabric opened with `streams=N`.  RFC 4960 3.3.2 and the 16-bit DDP stream number would
allow 65535, but the run's cost grows faster than the pairs: a 2-byte write_bw, one iteration, took 4 s with 1024
pairs and 142 s with 4096 (measured on a busy 2-core machine)."""
DIRECTIONS = {"to-board": (0,), "from-board": (1,), "both": (0, 1)}
"""`--direction`: the device the data lands on, per run (device 0 is the board)."""
DEFAULT_RATE_GBPS = 10.0
DEFAULT_DELAY_USEC = LinkConfig().delay * 1e6
"""The model's link's one-way delay (500 usec)."""
MB = 1 << 20
"""perftest's MB: 2^20 bytes."""
ACCESS = AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE | AccessFlags.REMOTE_READ
ENGINE_CLOCK = "10 ns"


ENGINE_STREAM_IDS = STREAM_IDS
"""The engine backend's queue pairs unless built for more (`engine_tables`)."""


def engine_tables(qps: int) -> dict[str, int]:
    """The engine backend's build options for `qps` queue pairs: a DDP stream each (RFC 5043 8), and a region row
    for each pair's one region beside the default table (row 0 is never an STag's)."""
    return {"streams": qps, "regions": max(ENGINE_REGIONS, qps + 1)}


class PerfFailed(Exception):
    """A measurement that went wrong: an error completion, bytes that did not land as sent, a failed set-up."""


class QueuePairLimit(PerfFailed):
    """`--qps` above what a device offers (`query_device().max_qp`), found before anything is timed."""

    def __init__(self, qps: int, limit: int) -> None:
        super().__init__(f"--qps {qps}: the device has {limit} queue pairs (query_device().max_qp)")
        self.qps, self.limit = qps, limit

    def for_backend(self, backend: str) -> str:
        return f"--qps {self.qps}: the {backend} backend's device has {self.limit} queue pairs (query_device().max_qp)"


@dataclass(frozen=True)
class Span:
    """An interval on every clock: wall-clock and simulated seconds, the RTL engine's cycles and nanoseconds
    (None off `sim`), and the CPU seconds of this process (the wall clock less the time others had the CPU)."""

    wall: float
    simulated: float
    cycles: int | None = None
    engine_ns: float | None = None
    cpu: float | None = None

    def half(self) -> Span:
        return Span(self.wall / 2, self.simulated / 2, None if self.cycles is None else self.cycles / 2,
                    None if self.engine_ns is None else self.engine_ns / 2, None if self.cpu is None else self.cpu / 2)


@dataclass(frozen=True)
class LinkTally:
    """The board's control link over an interval: requests, UART bytes to and from the board, each by op
    name (`abi.link.Op`), and the message payload bytes MEM_READ and MEM_WRITE moved."""

    requests: dict[str, int] = field(default_factory=dict)
    to_board: dict[str, int] = field(default_factory=dict)
    from_board: dict[str, int] = field(default_factory=dict)
    payload: int = 0

    def __sub__(self, start: LinkTally) -> LinkTally:
        def less(end: dict[str, int], begin: dict[str, int]) -> dict[str, int]:
            return {op: end[op] - begin.get(op, 0) for op in end if end[op] - begin.get(op, 0)}
        return LinkTally(less(self.requests, start.requests), less(self.to_board, start.to_board),
                         less(self.from_board, start.from_board), self.payload - start.payload)

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())

    @property
    def bytes_to_board(self) -> int:
        return sum(self.to_board.values())

    @property
    def bytes_from_board(self) -> int:
        return sum(self.from_board.values())


class LinkMeter:
    """Counts the board's control-link traffic as `driver.link.LinkClient.observe` reports it (every request
    and every UART byte, retries too); `regions`: the board's message buffers, (address, length), whose bytes
    in MEM_READ and MEM_WRITE are message payload."""

    def __init__(self, client: Any) -> None:
        self.requests: Counter[str] = Counter()
        self.to_board: Counter[str] = Counter()
        self.from_board: Counter[str] = Counter()
        self.payload = 0
        self.regions: list[tuple[int, int]] = []
        client.observe = self.observe

    def observe(self, exchanged: Exchanged) -> None:
        name = exchanged.op.name
        self.requests[name] += 1
        self.to_board[name] += exchanged.sent
        self.from_board[name] += exchanged.received
        if exchanged.op in (Op.MEM_READ, Op.MEM_WRITE):
            start, end = exchanged.address, exchanged.address + exchanged.length
            self.payload += sum(max(0, min(end, base + length) - max(start, base)) for base, length in self.regions)

    def tally(self) -> LinkTally:
        return LinkTally(dict(self.requests), dict(self.to_board), dict(self.from_board), self.payload)


@dataclass(frozen=True)
class _Stamp:
    wall: float
    simulated: float
    engine: tuple[int, float] | None
    link: LinkTally | None = None
    cpu: float = 0.0

    def until(self, end: _Stamp) -> Span:
        cycles = engine_ns = None
        if self.engine is not None and end.engine is not None:
            cycles, engine_ns = end.engine[0] - self.engine[0], end.engine[1] - self.engine[1]
        return Span(end.wall - self.wall, end.simulated - self.simulated, cycles, engine_ns, end.cpu - self.cpu)

    def link_until(self, end: _Stamp) -> LinkTally | None:
        return None if self.link is None or end.link is None else end.link - self.link


@dataclass(frozen=True)
class Clock:
    """Where the stamps come from: the fabric's clocks, and the board's link meter if there is one."""

    fabric: Fabric
    meter: LinkMeter | None = None

    def stamp(self) -> _Stamp:
        return _Stamp(time.perf_counter(), self.fabric.now(), self.fabric.engine_time(),
                      None if self.meter is None else self.meter.tally(), time.process_time())


@dataclass(frozen=True)
class BandwidthRow:
    """write_bw, send_bw or read_bw at one size: `iters` messages of `size` bytes in `span`, landing on device
    `sink`; `link`: the board's control link over the span; `pairs`: the queue pairs that ran at once, `pair`
    this row's (None: every pair's messages, `span` from the first pair's start to the last one's end)."""

    test: str
    size: int
    iters: int
    span: Span
    sink: int = 0
    link: LinkTally | None = None
    pair: int | None = None
    pairs: int = 1

    @property
    def messages(self) -> int:
        return self.iters

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
    """send_lat at one size: each sample half a round trip; device `sink` answers; `link`: the board's control
    link from the first ping to the last pong; `pair` and `pairs` as `BandwidthRow`'s (None: every pair's
    samples)."""

    test: str
    size: int
    iters: int
    samples: tuple[Span, ...]
    sink: int = 0
    link: LinkTally | None = None
    pair: int | None = None
    pairs: int = 1

    @property
    def messages(self) -> int:
        """Pings and pongs."""
        return 2 * self.iters


Row = BandwidthRow | LatencyRow


@dataclass(frozen=True)
class PerfPlan:
    tests: tuple[str, ...] = TESTS
    sizes: tuple[int, ...] = DEFAULT_SIZES
    iters: int = DEFAULT_ITERS
    qps: int = 1
    """Queue pairs measured at once (`--qps`)."""


# -- the driver program --------------------------------------------------------------------------------------


@dataclass
class _Host:
    """One side: a region whose first `largest` bytes are the source of what it sends and whose bytes from
    `in_offset` are where what it receives lands (0 when the device's memory holds only one message's
    buffer: it then sends from where it receives), a send and a receive completion queue, the queue pair."""

    device: Device
    attr: DeviceAttr
    pd: PD
    mr: MR
    send_cq: CQ
    recv_cq: CQ
    largest: int
    in_offset: int
    qp: QP | None = None
    cm_id: CMID | None = None

    @property
    def one_buffer(self) -> bool:
        return self.in_offset == 0

    def outgoing(self, size: int) -> SGE:
        return SGE(self.mr.buf, size, self.mr.lkey)

    def incoming(self, size: int) -> SGE:
        return SGE(self.mr.buf + self.in_offset, size, self.mr.lkey)

    def post_receive(self, wr_id: int = 0) -> None:
        self.qp.post_recv(RecvWR(wr_id, [self.incoming(self.largest)]))


def _ok(completions: list[WC]) -> list[WC]:
    for wc in completions:
        if not wc.ok:
            raise PerfFailed(f"work request {wc.wr_id} ({wc.opcode.name}) completed with {wc.status.name}"
                             + (f": {wc.describe()}" if wc.error is not None else ""))
    return completions


def _region(pd: PD, largest: int) -> tuple[MR, int]:
    """A region of twice `largest` bytes, receiving in its second half; or, where that does not fit, one of
    `largest` bytes receiving where it sends from."""
    try:
        return pd.reg_mr(2 * largest, ACCESS), largest
    except OutOfResources:
        return pd.reg_mr(largest, ACCESS), 0


Pair = tuple[_Host, _Host]
"""A queue pair's two ends: (sink, source)."""


async def connect_pairs(fabric: Fabric, largest: int, sink_index: int = 0, qps: int = 1) -> list[Pair]:
    """`qps` connections from the source (the other device) to the sink (device `sink_index`), one after the
    other, each with the IRD and ORD both devices allow and a region of its own on each side (`_region`);
    each device has one protection domain for all.  `QueuePairLimit` first when a device has fewer than
    `qps` queue pairs (one per DDP stream of its association, RFC 5043 8)."""
    attrs = [device.query_device() for device in fabric.devices]
    limit = min(attr.max_qp for attr in attrs)
    if qps > limit:
        raise QueuePairLimit(qps, limit)
    pds = [device.alloc_pd() for device in fabric.devices]
    param = ConnParam(responder_resources=min(attr.max_qp_rd_atom for attr in attrs),
                      initiator_depth=min(attr.max_qp_init_rd_atom for attr in attrs))
    sink_device = fabric.devices[sink_index]
    listener = sink_device.create_id()
    listener.listen()
    pairs = []
    for pair in range(qps):
        hosts = []
        for device, attr, pd in zip(fabric.devices, attrs, pds):
            try:
                mr, in_offset = _region(pd, largest)
            except OutOfResources as error:
                raise PerfFailed(f"pair {pair}: {device.name} has no room for a region of {largest} bytes: "
                                 f"{error}") from None
            hosts.append(_Host(device, attr, pd, mr, device.create_cq(), device.create_cq(), largest, in_offset))
        sink, source = hosts[sink_index], hosts[1 - sink_index]
        cap = QPCap(max_send_wr=min(WRITE_DEPTH + 1, sink.attr.max_qp_wr), max_recv_wr=RECV_DEPTH, max_send_sge=1)
        client = source.device.create_id()
        source.qp = client.create_qp(source.pd, source.send_cq, source.recv_cq, cap)
        source.cm_id = client
        client.connect(sink_device.address, param)
        request = await listener.get_cm_event()
        if request.event_type is not CMEventType.CONNECT_REQUEST:
            raise PerfFailed(f"connecting pair {pair}: {request.event_type.name} {request.reason}")
        sink.qp = request.id.create_qp(sink.pd, sink.send_cq, sink.recv_cq, cap)
        sink.cm_id = request.id
        request.id.accept(param)
        for cm_id in (client, request.id):
            event = await cm_id.get_cm_event()
            if event.event_type is not CMEventType.ESTABLISHED:
                raise PerfFailed(f"connecting pair {pair}: {event.event_type.name} {event.reason}")
        pairs.append((sink, source))
    return pairs


async def _release(pairs: list[Pair]) -> None:
    """Each source disconnects (RFC 5043 6.2); once both ends see DISCONNECTED, the regions are deregistered
    (the board's buffers are free for the next connections')."""
    for sink, source in pairs:
        source.cm_id.disconnect()
        for host in (sink, source):
            event = await host.cm_id.get_cm_event()
            if event.event_type is not CMEventType.DISCONNECTED:
                raise PerfFailed(f"disconnecting: {event.event_type.name} {event.reason}")
        for host in (sink, source):
            host.mr.dereg()


def _fill(host: _Host, size: int, seed: int, pair: int | None = None) -> bytes:
    """`size` seeded bytes at the start of `host`'s region; each pair's differ (pair 0's are the one pair's)."""
    data = random.Random(seed + ((pair or 0) << 32)).randbytes(size)
    host.mr.write(data)
    return data


def _landed(host: _Host, expected: bytes, what: str) -> None:
    if host.mr.read(len(expected), host.in_offset) != expected:
        raise PerfFailed(f"{what}: the bytes that landed differ from those sent")


def _clear(host: _Host, size: int) -> None:
    host.mr.write(bytes(size), host.in_offset)


async def _in_step(together: asyncio.Barrier | None) -> None:
    """With other pairs (`together`), wait until every one has got here."""
    if together is not None:
        await together.wait()


Timed = tuple[Row, _Stamp, _Stamp]
"""A pair's row, and the stamps its span runs between."""


async def write_bw(clock: Clock, sink: _Host, source: _Host, size: int, iters: int, pair: int | None = None,
                   together: asyncio.Barrier | None = None) -> Timed:
    data = _fill(source, size, size, pair)
    _clear(sink, size)
    sink.post_receive()
    await _in_step(together)
    start = clock.stamp()
    posted = completed = 0
    while completed < iters:
        while posted < iters and posted - completed < WRITE_DEPTH:
            source.qp.post_send(SendWR(posted, WROpcode.RDMA_WRITE, [source.outgoing(size)],
                                       remote_addr=sink.incoming(size).addr, rkey=sink.mr.rkey))
            posted += 1
        completed += len(_ok(await source.send_cq.wait(1) + source.send_cq.poll(WRITE_DEPTH)))
    source.qp.post_send(SendWR(iters, WROpcode.SEND))  # delivered once every Write is placed (RFC 5041 5.4)
    _ok(await sink.recv_cq.wait(1))
    end = clock.stamp()
    _ok(await source.send_cq.wait(1))
    await _in_step(together)
    _landed(sink, data, f"write_bw {size}")
    return (BandwidthRow("write_bw", size, iters, start.until(end), _index(clock, sink), start.link_until(end), pair),
            start, end)


async def send_bw(clock: Clock, sink: _Host, source: _Host, size: int, iters: int, pair: int | None = None,
                  together: asyncio.Barrier | None = None) -> Timed:
    data = _fill(source, size, size + 4, pair)
    _clear(sink, size)
    receives = min(RECV_DEPTH, iters)
    for wr_id in range(receives):
        sink.post_receive(wr_id)
    await _in_step(together)
    start = clock.stamp()
    sent = received = sent_done = 0
    while received < iters:
        while sent < receives and sent - sent_done < WRITE_DEPTH:  # a Send only into a receive posted for it
            source.qp.post_send(SendWR(sent, WROpcode.SEND, [source.outgoing(size)]))
            sent += 1
        if sent > received:
            arrived = len(_ok(await sink.recv_cq.wait(1) + sink.recv_cq.poll(RECV_DEPTH)))
            received += arrived
            for wr_id in range(receives, min(iters, receives + arrived)):
                sink.post_receive(wr_id)
            receives = min(iters, receives + arrived)
        else:
            sent_done += len(_ok(await source.send_cq.wait(1)))
        sent_done += len(_ok(source.send_cq.poll(WRITE_DEPTH)))
    end = clock.stamp()
    if sent_done < iters:
        _ok(await source.send_cq.wait(iters - sent_done))
    await _in_step(together)
    _landed(sink, data, f"send_bw {size}")
    return (BandwidthRow("send_bw", size, iters, start.until(end), _index(clock, sink), start.link_until(end), pair),
            start, end)


async def read_bw(clock: Clock, sink: _Host, source: _Host, size: int, iters: int, pair: int | None = None,
                  together: asyncio.Barrier | None = None) -> Timed:
    data = _fill(source, size, size + 1, pair)
    _clear(sink, size)
    depth = sink.qp.ord
    await _in_step(together)
    start = clock.stamp()
    posted = completed = 0
    while completed < iters:
        while posted < iters and posted - completed < depth:
            sink.qp.post_send(SendWR(posted, WROpcode.RDMA_READ, [sink.incoming(size)],
                                     remote_addr=source.outgoing(size).addr, rkey=source.mr.rkey))
            posted += 1
        completed += len(_ok(await sink.send_cq.wait(1) + sink.send_cq.poll(depth)))
    end = clock.stamp()
    await _in_step(together)
    _landed(sink, data, f"read_bw {size}")
    return (BandwidthRow("read_bw", size, iters, start.until(end), _index(clock, sink), start.link_until(end), pair),
            start, end)


async def send_lat(clock: Clock, sink: _Host, source: _Host, size: int, iters: int, pair: int | None = None,
                   together: asyncio.Barrier | None = None) -> Timed:
    for host in (sink, source):
        _clear(host, size)   # first: a host with one buffer sends what it fills there
    ping, pong = _fill(source, size, size + 2, pair), _fill(sink, size, size + 3, pair)
    for host in (sink, source):
        host.post_receive()
    await _in_step(together)
    samples = []
    first = clock.stamp()
    for i in range(iters):
        start = clock.stamp()
        source.qp.post_send(SendWR(i, WROpcode.SEND, [source.outgoing(size)]))
        _ok(await sink.recv_cq.wait(1))
        more = i + 1 < iters  # the next ping's receive; none left posted after the last
        if more:
            sink.post_receive()
        sink.qp.post_send(SendWR(i, WROpcode.SEND, [sink.outgoing(size)]))
        if sink.one_buffer:
            pong = ping   # the sink answers with the ping's bytes
        _ok(await source.recv_cq.wait(1))
        samples.append(start.until(clock.stamp()).half())
        if more:
            source.post_receive()
            if source.one_buffer:
                ping = pong   # the source's next ping is the pong that landed on it
    last = clock.stamp()
    for host in (sink, source):
        _ok(await host.send_cq.wait(iters))
    await _in_step(together)
    _landed(sink, ping, f"send_lat {size}")
    _landed(source, pong, f"send_lat {size}")
    return (LatencyRow("send_lat", size, iters, tuple(samples), _index(clock, sink), first.link_until(last), pair),
            first, last)


def _index(clock: Clock, host: _Host) -> int:
    return next(index for index, device in enumerate(clock.fabric.devices) if device is host.device)


MEASUREMENTS = {"write_bw": write_bw, "send_bw": send_bw, "send_lat": send_lat, "read_bw": read_bw}


async def measure_pairs(clock: Clock, pairs: list[Pair], test: str, size: int, iters: int) -> list[Row]:
    """`test` at `size` on every pair at once: one pair, its row; more, a row per pair (`pair` its index) and
    the row of them all (`pair` None): every pair's bytes or samples, its span from the earliest start to the
    latest end.  A pair's failure fails the whole, named by its index; the other pairs are cancelled."""
    measurement = MEASUREMENTS[test]
    if len(pairs) == 1:
        row, _, _ = await measurement(clock, *pairs[0], size, iters)
        return [row]
    together = asyncio.Barrier(len(pairs))
    timed = await _concurrently([_naming_pair(index, measurement(clock, sink, source, size, iters, index, together))
                                 for index, (sink, source) in enumerate(pairs)])
    rows = [dataclasses.replace(row, pairs=len(pairs)) for row, _, _ in timed]
    start = min((start for _, start, _ in timed), key=lambda stamp: stamp.wall)
    end = max((end for _, _, end in timed), key=lambda stamp: stamp.wall)
    total = sum(row.iters for row in rows)
    first = rows[0]
    if isinstance(first, LatencyRow):
        samples = tuple(sample for row in rows for sample in row.samples)
        whole: Row = LatencyRow(test, size, total, samples, first.sink, start.link_until(end), None, len(pairs))
    else:
        whole = BandwidthRow(test, size, total, start.until(end), first.sink, start.link_until(end), None,
                             len(pairs))
    return [dataclasses.replace(row, link=None) for row in rows] + [whole]


async def _naming_pair(pair: int, measurement: Awaitable[Timed]) -> Timed:
    try:
        return await measurement
    except PerfFailed as error:
        raise PerfFailed(f"pair {pair}: {error}") from None


async def _concurrently(coroutines: list[Awaitable[Timed]]) -> list[Timed]:
    """The coroutines as tasks of the running loop, their results in order; the first failure (the others
    cancelled) raised as itself."""
    tasks = []
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(coroutine) for coroutine in coroutines]
    except BaseExceptionGroup as failures:
        raise _first_leaf(failures) from None
    return [task.result() for task in tasks]


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


async def measure(fabric: Fabric, plan: PerfPlan, on_row: Callable[[Row], None] | None = None, *,
                  sinks: tuple[int, ...] = (0,), meter: LinkMeter | None = None) -> list[Row]:
    """Every test of `plan` at every size, on `plan.qps` connections at once per device in `sinks` (where the data
    lands: the next connections once the ones before are released); `on_row` sees each row as it is measured;
    `meter` counts the board's control link (device 0 the board), its regions set to the board's perf
    regions."""
    clock = Clock(fabric, meter)
    rows: list[Row] = []
    for index, sink_index in enumerate(sinks):
        pairs = await connect_pairs(fabric, max(plan.sizes), sink_index, plan.qps)
        if meter is not None:
            meter.regions = [(host.mr.buf, host.mr.length) for pair in pairs for host in pair
                             if host.device is fabric.devices[0]]
        for test in plan.tests:
            for size in plan.sizes:
                for row in await measure_pairs(clock, pairs, test, size, plan.iters):
                    rows.append(row)
                    if on_row is not None:
                        on_row(row)
        if index + 1 < len(sinks):
            await _release(pairs)
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
                                   tuple(Span(**sample) for sample in item["samples"]), item.get("sink", 0),
                                   pair=item.get("pair"), pairs=item.get("pairs", 1)))
        else:
            rows.append(BandwidthRow(item["test"], item["size"], item["iters"], Span(**item["span"]),
                                     item.get("sink", 0), pair=item.get("pair"), pairs=item.get("pairs", 1)))
    return rows


# -- the tables ------------------------------------------------------------------------------------------------


def percentile(values: list[float], percent: float) -> float:
    """The nearest-rank percentile: the smallest value with at least `percent` % of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(percent / 100 * len(ordered))) - 1]


TITLES = {
    "write_bw": "RDMA Write bandwidth (ib_write_bw): {source} writes into {sink}, up to " + str(WRITE_DEPTH)
                + " outstanding; the clock stops at {sink}'s receive of a zero-length Send posted after the "
                "last Write (delivered only once every Write is placed, RFC 5041 5.4)",
    "send_bw": "Send bandwidth (ib_send_bw): {source} Sends into receives {sink} posted, " + str(RECV_DEPTH)
               + " posted at a time; the clock stops at {sink}'s last receive completion",
    "read_bw": "RDMA Read bandwidth (ib_read_bw): {sink} reads from {source}, ORD Reads outstanding; a Read "
               "completes when its response is placed (RFC 5040 5.2)",
    "send_lat": "Send latency (ib_send_lat): ping-pong of Sends, {source} first; each sample is half a round trip",
}
OPERATIONS = {"write_bw": "RDMA Write", "send_bw": "Send", "read_bw": "RDMA Read", "send_lat": "Send ping-pong"}
BW_COLUMNS = ("BW average[MB/sec]", "MsgRate[Mpps]")
LAT_COLUMNS = ("t_min", "t_typical", "t_avg", "t_99%", "t_max")
BITS_PER_UART_BYTE = 10
"""8N1: a start bit, eight data bits, a stop bit (hdl/link/uart.py)."""


def board_link_rate() -> tuple[float, str]:
    """The bytes a second each way of the ECPIX-5 build's control link, and where the figure comes from: the
    core's UART bit time (`boards.ecpix5_top`: 62.5 MHz over `uart_divisor` clocks a bit for 3 Mbaud), 8N1."""
    from boards.ecpix5_top import CORE_CLOCK_HZ, DEFAULT_BAUD
    from hdl.link.uart import uart_divisor

    divisor = uart_divisor(CORE_CLOCK_HZ, DEFAULT_BAUD)
    baud = CORE_CLOCK_HZ / divisor
    rate = baud / BITS_PER_UART_BYTE
    return rate, (f"the ECPIX-5 build's UART, {CORE_CLOCK_HZ / 1e6:g} MHz / {divisor} clocks a bit = "
                  f"{baud / 1e6:.4g} Mbaud (boards/ecpix5_top.py; the FT2232H's end runs 3 Mbaud), 8N1 "
                  f"({BITS_PER_UART_BYTE} bits a byte, hdl/link/uart.py): {rate:.0f} bytes/s each way")


class Report:
    """The tables, printed a row at a time: a title and header whenever the test or the sink changes. On the
    board, a control-link table per test and size after each direction's (`close` prints the last)."""

    def __init__(self, out: TextIO, engine: bool, board: bool = False) -> None:
        self.out, self.engine, self.board = out, engine, board
        self._table: tuple[str, int, int] | None = None
        self._costs: list[Row] = []
        self._link_rate = board_link_rate() if board else None
        self._line_rate: float | None = None   # the fabric's link, bits a second each way (`header`)

    def device(self, index: int) -> str:
        return f"device {index}" + ((" (the board)" if index == 0 else " (the peer)") if self.board else "")

    def title(self, test: str, sink: int, pairs: int = 1) -> str:
        title = TITLES[test].format(sink=self.device(sink), source=self.device(1 - sink))
        if pairs > 1:
            title += (f"; {pairs} queue pairs at once, a row per pair and a row 'all': "
                      + ("every pair's samples" if test == "send_lat" else "every pair's bytes over the span from "
                         "the first pair's start to the last pair's end"))
        return title

    def header(self, backend: str, link: LinkConfig, iters: int, board: str | None = None,
               peer: str = "model", qps: int = 1) -> None:
        rate = f"{link.rate / 1e9:g} Gb/s each way" if link.rate else "no rate limit"
        self._line_rate = link.rate or None
        pairs = f"; {qps} queue pairs at once" if qps > 1 else ""
        lines = [f"rnic perf: backend {backend}; link {rate}, one-way delay {link.delay * 1e6:g} usec, "
                 f"loss {link.loss:g}, seed {link.seed}; {iters} iterations per size{pairs}"]
        if peer == "usrsctp":
            lines.append("  device 1: a software host whose SCTP is usrsctp (its DDP and RDMAP the model's)")
        elif peer == "gateware":
            lines.append("  device 1: a second RNIC top in the same simulation")
        if board is not None:
            lines += [f"  board: {board}; device 1, its peer, a software RNIC on this computer",
                      "  simulated: seconds of the fabric's clock, on the board backend the wall clock (times "
                      "its time scale)"]
        else:
            lines.append("  simulated: seconds of the fabric's clock (the link's delay and wire time, SCTP's timers; "
                         "the hosts' software takes none)")
        lines.append("  wall-clock: seconds of the process running the model"
                     + (" and the RTL simulation" if self.engine else " (CPython, one core)"))
        if self.engine:
            lines.append(f"  RTL: cycles ({ENGINE_CLOCK} each) the simulator ran device 0's RNIC top (W = 8): "
                         "each frame to device 0 alone, then drained; each request to its transmit engine until "
                         "it sent what its model sent; the table writes; the engines' line rates are `rnic bench "
                         "rx`'s and `rnic bench tx`'s")
        lines.append("  MB = 2^20 bytes (as perftest); MsgRate in millions of messages per second; latencies in usec")
        if self._line_rate is not None:
            lines.append("  of link: the payload's bits a second in simulated time over the link's rate (a frame's "
                         "headers, its preamble and gap take the rest)")
        if self._link_rate is not None:
            link_rate, source = self._link_rate
            lines += ["  control link (a table per test and size after each direction's): the requests and UART bytes "
                      "of driver.link.LinkClient, every one, polling and retries included, from the start of the "
                      "timed part to its end (write_bw: with its closing zero-length Send; send_lat: first ping to "
                      "last pong, its messages the pings and the pongs); payload over the link: MEM_READ and "
                      "MEM_WRITE bytes inside the board's message buffer",
                      f"  link rate assumed: {source}; a request waits for its response, so the bytes both ways take "
                      f"turns: payload at most {link_rate:.0f} bytes/s / (UART bytes both ways per payload byte)"]
        print("\n".join(lines), file=self.out, flush=True)

    def row(self, row: Row) -> None:
        if self._costs and row.sink != self._costs[-1].sink:
            self._print_costs()
        if (row.test, row.sink, row.pairs) != self._table:
            self._table = (row.test, row.sink, row.pairs)
            print(f"\n{self.title(row.test, row.sink, row.pairs)}", file=self.out)
            print(self._column_header(row.test, row.pairs), file=self.out)
        print(self._format(row), file=self.out, flush=True)
        if row.link is not None:
            self._costs.append(row)

    def close(self) -> None:
        """The control-link tables not yet printed."""
        if self._costs:
            self._print_costs()

    def _print_costs(self) -> None:
        for row in self._costs:
            print(f"\n{self._cost_table(row)}", file=self.out)
        self._costs = []
        self._table = None
        self.out.flush()

    def _cost_table(self, row: Row) -> str:
        assert row.link is not None and self._link_rate is not None
        tally, link_rate = row.link, self._link_rate[0]
        messages, payload = row.messages, row.messages * row.size
        sink, source = self.device(row.sink), self.device(1 - row.sink)
        who = {"write_bw": f"{source} writes into {sink}", "send_bw": f"{source} Sends to {sink}",
               "read_bw": f"{sink} reads from {source}",
               "send_lat": f"{source} pings, {sink} pongs"}[row.test]
        lines = [f"Control link, {OPERATIONS[row.test]} ({row.test}), {who}: {row.size} bytes x {messages} messages "
                 f"= {payload} payload bytes",
                 f"  {'request':<16}{'requests':>10}{'per message':>14}{'bytes to board':>16}{'bytes from board':>18}"]
        for op, count in sorted(tally.requests.items(), key=lambda item: (-item[1], item[0])):
            lines.append(f"  {op:<16}{count:>10}{count / messages:>14.2f}{tally.to_board.get(op, 0):>16}"
                         f"{tally.from_board.get(op, 0):>18}")
        total = tally.total_requests
        lines.append(f"  {'total':<16}{total:>10}{total / messages:>14.2f}{tally.bytes_to_board:>16}"
                     f"{tally.bytes_from_board:>18}")
        if payload:
            to, back = tally.bytes_to_board / payload, tally.bytes_from_board / payload
            both = to + back
            limit = f"{link_rate / both / MB:.4g} MB/s" if both else "no limit"
            lines += [f"  UART bytes per payload byte: {to:.4g} to the board, {back:.4g} from it, {both:.4g} both "
                      "ways",
                      f"  payload bytes over the link: {tally.payload} ({tally.payload / payload:.4g} per payload "
                      "byte)",
                      f"  at this cost the link carries at most {limit} of payload ({link_rate:.0f} bytes/s / "
                      f"{both:.4g})"]
        else:
            lines.append(f"  payload bytes over the link: {tally.payload}")
        return "\n".join(lines)

    def _column_header(self, test: str, pairs: int = 1) -> str:
        names = BW_COLUMNS if test != "send_lat" else LAT_COLUMNS
        width = 20 if test != "send_lat" else 11
        group = len(names) * width
        rtl = ("cycles", "cycles/msg") if test != "send_lat" else ("cycles/sample",)
        lead = f"{'#bytes':>8} {'#iterations':>12}"
        if pairs > 1:
            lead = f"{'pair':>6} {lead}" + (f"{'bytes moved':>14}" if test != "send_lat" else "")
        of_link = self._line_rate is not None and test != "send_lat"
        simulated = "".join(f"{n:>{width}}" for n in names) + (f"{'of link':>10}" if of_link else "")
        first = (f"{'':{len(lead)}}{' simulated '.center(len(simulated), '-')} "
                 f"{' wall-clock '.center(group, '-')}")
        second = lead + simulated + "".join(f"{n:>{width}}" for n in names)
        if self.engine:
            first += " " + " RTL ".center(14 * len(rtl), "-")
            second += " " + "".join(f"{n:>14}" for n in rtl)
        return f"{first}\n{second}"

    def _format(self, row: Row) -> str:
        text = f"{row.size:>8} {row.iters:>12}"
        if row.pairs > 1:
            text = f"{'all' if row.pair is None else row.pair:>6} {text}"
            if isinstance(row, BandwidthRow):
                text += f"{row.nbytes:>14}"
        if isinstance(row, BandwidthRow):
            for seconds in (row.span.simulated, row.span.wall):
                text += f"{row.bandwidth(seconds):>20.4g}{row.message_rate(seconds):>20.4g}"
                if seconds is row.span.simulated and self._line_rate is not None:
                    share = row.nbytes * 8 / seconds / self._line_rate if seconds > 0 else math.inf
                    text += f"{share:>10.3f}"
            if self.engine:
                cycles = row.span.cycles or 0
                text += f" {cycles:>14}{cycles / row.iters:>14.1f}"
            return text
        for clock in ("simulated", "wall"):
            values = [getattr(sample, clock) * 1e6 for sample in row.samples]
            figures = (min(values), statistics.median(values), statistics.fmean(values), percentile(values, 99),
                       max(values))
            text += "".join(f" {value:>10.2f}" for value in figures)   # a space even past 10 digits (a 10 s stall)
        if self.engine:
            text += f" {statistics.fmean(sample.cycles or 0 for sample in row.samples):>14.1f}"
        return text


# -- the command ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BoardOptions:
    """`--backend board`: the board (`serial` and `ethernet` as `driver.backends.board.BoardFabric` takes
    them; both None: the model board), its link's `baud` and `latency`, the fabric's `time_scale`, and the
    devices the data lands on (`DIRECTIONS`)."""

    serial: str | None = None
    ethernet: str | None = None
    baud: float = 3_000_000
    latency: float = 0.05
    time_scale: float = 1.0
    sinks: tuple[int, ...] = DIRECTIONS["both"]
    engine_sacks: bool = True
    engine_transport: bool = False
    """The board's transmit engine's transport unit takes the peer's SACKs, the host pushes one request a message
    (`driver.backends.board_transport`); the model board is then built with the unit."""

    def describe(self) -> str:
        transport = "; its transport unit takes the peer's SACKs" if self.engine_transport else ""
        if self.serial is None:
            built = " built with the transport unit" if self.engine_transport else ""
            return (f"device 0 the model board{built} (sim/board_model.py: the engines' golden models behind the "
                    f"control link's bytes, driver.link.SerialLink on it){transport}")
        return f"device 0 the board on {self.serial} (control link) and {self.ethernet} (Ethernet){transport}"


def open_board(options: BoardOptions, link: LinkConfig, seed: int) -> Fabric:
    """The board backend's fabric: on the model board (its link a real `driver.link.SerialLink` over the
    board's bytes), or on the board `options` names."""
    from driver import open_fabric

    if options.serial is None:
        from driver.backends.board import BoardFabric
        from driver.link import SerialLink
        from model.rnic.link import Side
        from model.rnic.pair import IPS, MACS
        from sim.board_model import ModelBoard

        board = ModelBoard(MACS[Side.A], IPS[Side.A], transport=options.engine_transport)
        control = SerialLink(board.serial, baud=options.baud, latency=options.latency)
        return Fabric(BoardFabric(control, board.port, link=link, seed=seed, baud=options.baud,
                                  latency=options.latency, time_scale=options.time_scale,
                                  engine_sacks=options.engine_sacks, engine_transport=options.engine_transport))
    return open_fabric("board", serial=options.serial, ethernet=options.ethernet, baud=options.baud,
                       latency=options.latency, time_scale=options.time_scale, link=link, seed=seed,
                       engine_sacks=options.engine_sacks, engine_transport=options.engine_transport)


def perf_link(rate_gbps: float | None, delay_usec: float, loss: float, seed: int) -> LinkConfig:
    return LinkConfig(loss=loss, delay=delay_usec * 1e-6, seed=seed,
                      rate=None if rate_gbps is None else rate_gbps * 1e9)


def perf_command(backend: str, plan: PerfPlan, link: LinkConfig, seed: int = 1, out: TextIO | None = None,
                 board: BoardOptions | None = None, engine_sacks: bool = True, engine_transport: bool = False,
                 peer: str = "model") -> int:
    """Print the header and the tables; 0 when every measurement finished and every byte landed, else 1 after
    one line on stderr. `board`: the board backend's options (default: both directions on the model board);
    `engine_sacks`: on `engine`, the receive engines SACK, not the hosts (on `board`, `board.engine_sacks`);
    `engine_transport`: on `engine` and `sim`, the transmit engines' transport units take the peer's SACKs (on
    `board`, `board.engine_transport`);
    `peer`: device 1, "model" (the backend's own), "gateware" (on `sim`, a second RNIC top) or "usrsctp" (a
    software host whose SCTP is usrsctp, `sim.usrsctp_host`)."""
    out = out if out is not None else sys.stdout
    if backend == "board" and board is None:
        board = BoardOptions()
    report = Report(out, engine=backend == "sim", board=backend == "board")
    report.header(backend, link, plan.iters, board.describe() if backend == "board" else None, peer, plan.qps)
    try:
        if backend == "sim":
            if plan.qps > 1:
                raise PerfFailed(f"--qps {plan.qps}: the sim backend runs one queue pair (its program runs under "
                                 "cocotb's scheduler, without asyncio tasks)")
            rows = _run_on_sim(plan, link, seed, {"engine_sacks": engine_sacks, "engine_transport": engine_transport},
                               peer)
            for row in rows:
                report.row(row)
        elif backend == "board":
            _run_on_board(plan, link, seed, board, report)
        else:
            extra = {"engine_sacks": engine_sacks, "engine_transport": engine_transport} if backend == "engine" else {}
            if backend == "soft" and plan.qps > SOFT_DEFAULT_STREAMS:
                extra["streams"] = plan.qps   # a DDP stream per queue pair (RFC 5043 8)
            if backend == "engine" and plan.qps > ENGINE_STREAM_IDS:
                extra.update(engine_tables(plan.qps))
            if peer == "usrsctp":
                _run_with_usrsctp(backend, plan, link, seed, extra, report)
            else:
                run(lambda fabric: measure(fabric, plan, report.row), backend, link=link, seed=seed, **extra)
    except QueuePairLimit as error:
        report.close()
        print(f"rnic perf: {error.for_backend(backend)}", file=sys.stderr)
        return 1
    except (PerfFailed, DriverError) as error:
        report.close()
        print(f"rnic perf: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    report.close()
    return 0


def _run_on_board(plan: PerfPlan, link: LinkConfig, seed: int, options: BoardOptions, report: Report) -> None:
    fabric = open_board(options, link, seed)
    try:
        meter = LinkMeter(fabric.backend.board.control.client)
        fabric.backend.run(lambda: measure(fabric, plan, report.row, sinks=options.sinks, meter=meter))
    finally:
        fabric.backend.close()


def _run_with_usrsctp(backend: str, plan: PerfPlan, link: LinkConfig, seed: int, options: dict,
                      report: Report) -> None:
    from driver.backends.engine import EngineFabric
    from driver.backends.soft import SoftFabric
    from sim.usrsctp_host import usrsctp_host

    hosts = []

    def peer_host(config, rng):
        hosts.append(usrsctp_host(config, rng))
        return hosts[-1]

    fabric_class = EngineFabric if backend == "engine" else SoftFabric
    fabric = Fabric(fabric_class(link, seed, peer_host=peer_host, **options))
    try:
        fabric.backend.run(lambda: measure(fabric, plan, report.row))
    finally:
        for host in hosts:
            host.sctp.close()


def _run_on_sim(plan: PerfPlan, link: LinkConfig, seed: int, options: dict, peer: str) -> list[Row]:
    from sim.driver_sim import run_program
    from sim.runner import SimulationFailed

    with tempfile.TemporaryDirectory(prefix="rnic-perf-") as directory:
        output, log = Path(directory) / "rows.json", Path(directory) / "simulation.log"
        arguments = {"tests": list(plan.tests), "sizes": list(plan.sizes), "iters": plan.iters, "output": str(output)}
        try:
            run_program(perf_program, link=link, seed=seed, log_file=log, arguments=arguments, options=options,
                        gateware_peer=peer == "gateware", usrsctp_peer=peer == "usrsctp")
        except SimulationFailed as error:
            failures = [line for line in log.read_text(errors="replace").splitlines()
                        if "PerfFailed" in line or "Error" in line] if log.exists() else []
            raise PerfFailed(f"{error}{': ' + failures[-1].strip() if failures else ''}") from None
        return rows_from_json(output.read_text())

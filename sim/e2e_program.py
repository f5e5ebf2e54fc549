"""End to end through the host driver: every RDMAP operation both ways over a sweep of sizes, every byte checked.

`end_to_end(fabric, sizes)` is a user program of the public driver API
(`driver`), run unchanged on every backend (`soft`, `engine`; `sim` through
`sim.driver_sim.run_program`).  Host B (device 1) listens, host A (device 0)
connects (RFC 6581 enhanced set-up, IRD/ORD 4); then, for each size, each
host runs against the other at once: RDMA Write (two SGEs, halves swapped),
RDMA Read, Send, Send with Invalidate, Send with Solicited Event, Send with
SE and Invalidate (RFC 5040 5.1-5.3).  Checked per host and size:

* every byte placed: Write and Read sinks and the four receive buffers hold
  the peer's bytes, and the `GUARD` bytes before and after each (inside the
  same region) still hold the fill, as do the regions the Sends with
  Invalidate name: nothing written outside the buffer the request named;
* every completion: the send queue's are exactly the work posted (wr_id,
  opcode, byte_len, SUCCESS), the receive queue's come in the order posted
  (RFC 5041 5.3) with the Send's length, its Solicited Event and the STag it
  invalidated (RFC 5040 5.3), nothing more arrives;
* the invalidated STags are invalid at the receiver; the sources unchanged.

Then the graceful teardown: A disconnects (RFC 5043 6.2: both Terminates
exchanged and acknowledged, DISCONNECTED on both sides with nothing
flushed), and A closes its association (SHUTDOWN, RFC 4960 9.2): both
devices see it Closed.

`sweep(mulpdu, largest)` gives the sizes: 0 and 1 byte, the edges of one
untagged and one tagged segment (MULPDU less the 18- and 14-byte headers,
RFC 5041 4.2, 4.3), 64 KiB and `largest` (1 MiB by default).  Checks are
collected (`E2eReport`), each with its name; `end_to_end_checked` raises
when one failed.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from driver import (
    CMID, CQ, MR, PD, QP, SGE, AccessFlags, AssociationEnd, CMEventType, ConnParam, Device, Fabric, RecvWR,
    SendFlags, SendWR, WCFlags, WCOpcode, WCStatus, WROpcode,
)

KIB, MIB = 1 << 10, 1 << 20
TAGGED_HEADER = 14
"""RFC 5041 4.2 with the RDMAP control byte: a tagged segment carries MULPDU - 14 bytes of payload."""
UNTAGGED_HEADER = 18
"""RFC 5041 4.3: an untagged segment carries MULPDU - 18 bytes of payload."""
GUARD = 64
"""Bytes of fill before and after every sink and receive buffer, inside its region, that must stay unwritten."""
FILL = 0xA5
TARGET_LENGTH = 64
IRD_ORD = 4
PRIVATE_DATA = b"rnic demo"

SENDS = (  # (name, opcode, solicited), RFC 5040 5.3
    ("Send", WROpcode.SEND, False),
    ("Send with Invalidate", WROpcode.SEND_WITH_INV, False),
    ("Send with SE", WROpcode.SEND, True),
    ("Send with SE and Invalidate", WROpcode.SEND_WITH_INV, True),
)
OPERATIONS = ("RDMA Write", "RDMA Read") + tuple(name for name, _, _ in SENDS)
READ_WR, WRITE_WR, SEND_WR, RECV_WR = 1, 2, 10, 100


def sweep(mulpdu: int, largest: int = MIB) -> tuple[int, ...]:
    """0, 1, one untagged and one tagged segment's payload and a byte more, 64 KiB, `largest`."""
    untagged, tagged = mulpdu - UNTAGGED_HEADER, mulpdu - TAGGED_HEADER
    return tuple(sorted({size for size in (0, 1, untagged, untagged + 1, tagged, tagged + 1, 64 * KIB, largest)
                         if size <= largest}))


@dataclass
class Check:
    name: str
    passed: bool
    detail: str = ""


@dataclass
class E2eReport:
    checks: list[Check] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    established: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Each host's IRD and ORD in force (its ESTABLISHED event)."""
    data_seconds: float = 0.0
    """The fabric's seconds from the first post to the last completion, every size."""
    wall_seconds: float = 0.0
    regions: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    """Every region each host registered, (address, length): the only memory anything may write."""

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(check.passed for check in self.checks)

    def check(self, name: str, passed: bool, detail: str = "") -> None:
        self.checks.append(Check(name, bool(passed), detail))

    def failures(self) -> list[str]:
        return [f"{c.name}{' (' + c.detail + ')' if c.detail else ''}" for c in self.checks if not c.passed]


@dataclass
class _Host:
    name: str
    device: Device
    pd: PD
    send_cq: CQ
    recv_cq: CQ
    id: CMID | None = None
    qp: QP | None = None


def _pattern(name: str, size: int) -> bytes:
    return random.Random(f"end to end {name} {size}").randbytes(size)


def _first_difference(got: bytes, expected: bytes) -> str:
    if len(got) != len(expected):
        return f"{len(got)} bytes, expected {len(expected)}"
    index = next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b)
    return f"first difference at byte {index} of {len(expected)}"


async def connect(fabric: Fabric, report: E2eReport) -> tuple[_Host, _Host]:
    """B listens, A connects with IRD/ORD 4 and private data; both ESTABLISHED (RFC 6581 9)."""
    hosts = []
    for name, device in zip("AB", fabric.devices):
        pd = device.alloc_pd()
        hosts.append(_Host(name, device, pd, device.create_cq(1024), device.create_cq(1024)))
        report.regions[name] = []
    a, b = hosts
    listener = b.device.create_id()
    listener.listen()
    a.id = a.device.create_id()
    a.qp = a.id.create_qp(a.pd, a.send_cq, a.recv_cq)
    param = ConnParam(responder_resources=IRD_ORD, initiator_depth=IRD_ORD, private_data=PRIVATE_DATA)
    a.id.connect(b.device.address, param)
    request = await listener.get_cm_event()
    report.check("B: CONNECT_REQUEST with A's private data",
                 request.event_type is CMEventType.CONNECT_REQUEST and request.private_data == PRIVATE_DATA,
                 f"{request.event_type.name} {request.private_data!r}")
    b.id = request.id
    b.qp = b.id.create_qp(b.pd, b.send_cq, b.recv_cq)
    b.id.accept(ConnParam(responder_resources=IRD_ORD, initiator_depth=IRD_ORD))
    for host in (a, b):
        event = await host.id.get_cm_event()
        ok = event.event_type is CMEventType.ESTABLISHED
        if ok:
            report.established[host.name] = (event.conn_param.responder_resources, event.conn_param.initiator_depth)
        report.check(f"{host.name}: ESTABLISHED, IRD/ORD {IRD_ORD}/{IRD_ORD} (RFC 6581 9)",
                     ok and report.established[host.name] == (IRD_ORD, IRD_ORD),
                     f"{event.event_type.name} {event.reason}")
    return a, b


@dataclass
class _Round:
    """One host's regions for one size."""

    source: MR
    write_sink: MR
    read_sink: MR
    receives: MR
    targets: list[MR]
    data: bytes


def _register(host: _Host, size: int, report: E2eReport) -> _Round:
    pd, span = host.pd, size + 2 * GUARD
    data = _pattern(host.name, size)
    source = pd.reg_mr(span, AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_READ)
    write_sink = pd.reg_mr(span, AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE)
    read_sink = pd.reg_mr(span, AccessFlags.LOCAL_WRITE)
    receives = pd.reg_mr(len(SENDS) * (size + GUARD) + GUARD, AccessFlags.LOCAL_WRITE)
    targets = [pd.reg_mr(TARGET_LENGTH, AccessFlags.LOCAL_WRITE | AccessFlags.REMOTE_WRITE) for _ in range(2)]
    source.write(bytes([FILL]) * GUARD + data + bytes([FILL]) * GUARD)
    for region in (write_sink, read_sink, receives, *targets):
        region.write(bytes([FILL]) * region.length)
    for region in (source, write_sink, read_sink, receives, *targets):
        report.regions[host.name].append((region.buf, region.length))
    for index in range(len(SENDS)):
        host.qp.post_recv(RecvWR(RECV_WR + index, [SGE(_receive_buffer(receives, size, index), size,
                                                        receives.lkey)]))
    return _Round(source, write_sink, read_sink, receives, targets, data)


def _receive_buffer(receives: MR, size: int, index: int) -> int:
    return receives.buf + GUARD + index * (size + GUARD)


def _post(host: _Host, mine: _Round, peer: _Round, size: int) -> None:
    half, start = size // 2, mine.source.buf + GUARD
    gather = [SGE(start + half, size - half, mine.source.lkey), SGE(start, half, mine.source.lkey)]
    host.qp.post_send(SendWR(WRITE_WR, WROpcode.RDMA_WRITE, gather, remote_addr=peer.write_sink.buf + GUARD,
                             rkey=peer.write_sink.rkey))
    host.qp.post_send(SendWR(READ_WR, WROpcode.RDMA_READ, [SGE(mine.read_sink.buf + GUARD, size, mine.read_sink.lkey)],
                             remote_addr=peer.source.buf + GUARD, rkey=peer.source.rkey))
    targets = iter(peer.targets)
    for index, (_, opcode, solicited) in enumerate(SENDS):
        host.qp.post_send(SendWR(SEND_WR + index, opcode, [SGE(start, size, mine.source.lkey)],
                                 SendFlags.SOLICITED if solicited else SendFlags.NONE,
                                 invalidate_rkey=next(targets).rkey if opcode is WROpcode.SEND_WITH_INV else None))


def _guarded(inner: bytes) -> bytes:
    return bytes([FILL]) * GUARD + inner + bytes([FILL]) * GUARD


async def one_size(a: _Host, b: _Host, size: int, report: E2eReport) -> None:
    """Every operation both ways with `size` bytes, then every check (see the module docstring)."""
    hosts = {"A": a, "B": b}
    rounds = {name: _register(host, size, report) for name, host in hosts.items()}
    started = a.device.fabric.now()
    for name, host in hosts.items():
        _post(host, rounds[name], rounds["B" if name == "A" else "A"], size)
    completions = {}
    for name, host in hosts.items():
        completions[name] = (await host.send_cq.wait(2 + len(SENDS)), await host.recv_cq.wait(len(SENDS)))
    report.data_seconds += a.device.fabric.now() - started
    for name, host in hosts.items():
        peer_name = "B" if name == "A" else "A"
        mine, peer = rounds[name], rounds[peer_name]
        arrow, half = f"{peer_name}->{name} {size} B", size // 2
        sent, received = completions[name]

        def placed(what: str, got: bytes, expected: bytes) -> None:
            report.check(f"{what}: every byte placed, nothing around it written", got == expected,
                         "" if got == expected else _first_difference(got, expected))

        placed(f"RDMA Write {arrow}", mine.write_sink.read(mine.write_sink.length),
               _guarded(peer.data[half:] + peer.data[:half]))
        placed(f"RDMA Read {name}<-{peer_name} {size} B", mine.read_sink.read(mine.read_sink.length),
               _guarded(peer.data))
        expected_receives = bytes([FILL]) * GUARD + (peer.data + bytes([FILL]) * GUARD) * len(SENDS)
        placed(f"Sends {arrow}", mine.receives.read(mine.receives.length), expected_receives)
        report.check(f"host {name} {size} B: sources unchanged by the peer's Read",
                     mine.source.read(mine.source.length) == _guarded(mine.data))
        got_sent = sorted((wc.wr_id, wc.opcode, wc.byte_len, wc.status) for wc in sent)
        want_sent = sorted([(WRITE_WR, WCOpcode.RDMA_WRITE, size, WCStatus.SUCCESS),
                            (READ_WR, WCOpcode.RDMA_READ, size, WCStatus.SUCCESS)]
                           + [(SEND_WR + i, WCOpcode.SEND, size, WCStatus.SUCCESS) for i in range(len(SENDS))])
        report.check(f"host {name} {size} B: one send completion per request posted (wr_id, opcode, length)",
                     got_sent == want_sent, f"{got_sent}")
        targets = iter(mine.targets)
        want_received = []
        for index, (_, opcode, solicited) in enumerate(SENDS):
            stag = next(targets).rkey if opcode is WROpcode.SEND_WITH_INV else None
            want_received.append((RECV_WR + index, WCStatus.SUCCESS, WCOpcode.RECV, size, solicited, stag,
                                  WCFlags.WITH_INV if stag is not None else WCFlags.NONE))
        got_received = [(wc.wr_id, wc.status, wc.opcode, wc.byte_len, wc.solicited, wc.invalidated_rkey,
                         wc.wc_flags) for wc in received]
        report.check(f"Sends {arrow}: receive completions in the order posted, length, SE, invalidated STag "
                     "(RFC 5040 5.3, RFC 5041 5.3)", got_received == want_received, f"{got_received}")
        report.check(f"Sends with Invalidate {arrow}: both STags invalid (RFC 5040 5.3), their regions unwritten",
                     [t.valid for t in mine.targets] == [False, False]
                     and all(t.read(t.length) == bytes([FILL]) * t.length for t in mine.targets))
        extra = host.send_cq.poll(16) + host.recv_cq.poll(16)
        report.check(f"host {name} {size} B: no completion beyond the work posted", not extra, f"{len(extra)} more")
    for round_ in rounds.values():
        for region in (round_.source, round_.write_sink, round_.read_sink, round_.receives, *round_.targets):
            region.dereg()
    report.sizes.append(size)


async def teardown(a: _Host, b: _Host, report: E2eReport) -> None:
    """A disconnects (RFC 5043 6.2, 6.6), then closes its association (RFC 4960 9.2)."""
    a.id.disconnect()
    for host in (a, b):
        event = await host.id.get_cm_event()
        report.check(f"{host.name}: DISCONNECTED (RFC 5043 6.2)", event.event_type is CMEventType.DISCONNECTED,
                     f"{event.event_type.name}: {event.reason}")
        flushed = host.send_cq.poll(16) + host.recv_cq.poll(16)
        report.check(f"{host.name}: nothing outstanding flushed at the disconnect", not flushed,
                     f"{len(flushed)} flushed")
    a.device.close()
    for host in (a, b):
        ended = await host.device.wait_closed()
        report.check(f"{host.name}: association shut down gracefully (RFC 4960 9.2)", ended is AssociationEnd.CLOSED,
                     ended.value)


async def end_to_end(fabric: Fabric, sizes: tuple[int, ...] | None = None, largest: int = MIB) -> E2eReport:
    """Connect, every operation both ways for each of `sizes` (default `sweep(mulpdu, largest)`), tear down."""
    report = E2eReport()
    wall = time.perf_counter()
    a, b = await connect(fabric, report)
    if report.passed:
        for size in sizes if sizes is not None else sweep(a.device.query_device().mulpdu, largest):
            await one_size(a, b, size, report)
        await teardown(a, b, report)
    report.wall_seconds = time.perf_counter() - wall
    return report


async def end_to_end_checked(fabric: Fabric, sizes: tuple[int, ...] | None = None, largest: int = MIB) -> E2eReport:
    """`end_to_end`, raising `AssertionError` with every failed check."""
    report = await end_to_end(fabric, sizes, largest)
    if not report.passed:
        raise AssertionError("end to end: " + "; ".join(report.failures()[:12]))
    return report

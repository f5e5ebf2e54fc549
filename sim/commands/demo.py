"""`rnic demo`: two software RNICs end to end over a simulated lossy link.

`rnic demo`: host A (10.0.0.1, initiator) and host B (10.0.0.2, listening)
set up an SCTP association with the DDP adaptation indication (RFC 5043
5.1, 11.1), open DDP stream 0 with the RFC 6581 enhanced Initiate/Accept
(IRD/ORD 4, peer-to-peer, zero-length RDMA Write RTR), and then each host
runs every RDMAP operation against the other at once: RDMA Write, RDMA
Read, Send, Send with Invalidate, Send with SE, Send with SE and Invalidate
(RFC 5040 5).  Every byte placed is compared with its source, every
completion with the work posted, invalidated STags with the memory table,
and the host memories with the registered and posted ranges (nothing
written elsewhere).  Then the hosts terminate the session and shut the
association down (RFC 5043 6.2, RFC 4960 9.2).  The teardown is bounded by
`CLOSE_TIME_LIMIT` seconds of simulated time: a host is finished once its
association is Closed, Aborted, Failed or aborted by its own `close()`
deadline (`CloseAborted`); the summary says how each host ended, and only a
host that has not finished by the limit (or when nothing is left to happen)
fails the run.  An Aborted or Failed teardown after the data checks passed
is reported, not failed: the data was already verified.  The link loses, duplicates,
reorders and corrupts frames at the `--loss` rate, from `--seed`.

Memory does not grow with `--size`: the hosts' memories are
`PatternMemory`s, whose source regions read as a pattern computed from the
offset and whose sinks compare every byte written with the pattern expected
there, keeping which ranges hold it rather than the bytes; the SoftRnics read
a message a segment at a time as the send buffer and the window allow; frames
are kept only for `--pcap`.  The memory map (`MemoryMap`) grows with `--size`
so that no two buffers overlap.

A phase that cannot finish stops the run, which then still prints its summary
and the link's statistics and exits 1: an association that ran out of
retransmissions (Max.Init.Retransmits while opening, RFC 4960 5.1 C;
Association.Max.Retrans once up, 8.1) is named with its state and the limit,
and nothing else can end a live association (`model.rnic.pair.IDLE_LIMIT`
only stops a run that makes no progress at all).

It runs on `model.rnic.pair.HostPair` (so does `rnic bench e2e`, in
`sim.commands.bench_e2e`).  Everything is deterministic for a given seed except the
wall-clock figures.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from model.rnic.link import LinkConfig, Side
from model.rnic.pair import CLOSE_TIME_LIMIT, IPS, HostPair, Stalled
from model.ddp.memory import Access
from model.ddp.source import MESSAGE_LENGTH_LIMIT
from model.ddp.negotiation import RtrType
from model.rdmap.messages import Opcode
from model.rnic.events import (
    Aborted,
    CloseAborted,
    Closed,
    Connected,
    Failed,
    PathStatus,
    RdmapTerminated,
    ReadCompletion,
    ReceiveCompletion,
    RnicEvent,
    RtrArrived,
    SessionEstablished,
    WorkCompletion,
    WriteArrived,
)
from model.errors import TerminateLayer, error_name
from model.sctp.packet import ErrorCauseCode
from sim.commands.pattern_memory import PatternMemory
from sim.e2e_program import Check

STREAM = 0

TARGET_LENGTH = 4096
MIB = 1 << 20


@dataclass(frozen=True)
class MemoryMap:
    """Where each host keeps its buffers for operations of `size` bytes: regions `spacing` apart, a multiple
    of 16 MiB with at least 1 MiB free after every region, so that none overlaps another at any size."""

    size: int
    spacing: int

    @classmethod
    def for_size(cls, size: int) -> MemoryMap:
        return cls(size, 16 * MIB * max(1, -(-(size + MIB) // (16 * MIB))))

    @property
    def source(self) -> int:
        """The data this host writes, sends, and lets the peer read."""
        return self.spacing

    @property
    def write_sink(self) -> int:
        """The peer RDMA Writes here."""
        return 2 * self.spacing

    @property
    def read_sink(self) -> int:
        """Our RDMA Read Response lands here."""
        return 3 * self.spacing

    def receive_buffer(self, index: int) -> int:
        """The posted receive buffer of Send variant `index` (four of them, back to back)."""
        return 4 * self.spacing + index * max(self.size, 1)

    def invalidate_target(self, index: int) -> int:
        """Two small regions the peer's Sends with Invalidate revoke."""
        return 8 * self.spacing + index * TARGET_LENGTH


LARGEST_SIZE = MESSAGE_LENGTH_LIMIT - 1
"""The largest `--size`: every operation is one DDP message, shorter than 2**32 bytes (RFC 5041 5.2).  Its map
ends near 2**35, far inside the 64-bit addresses (and TO range) of a host memory."""

# The map for operations of up to 15 MiB.
SOURCE = MemoryMap.for_size(0).source
WRITE_SINK = MemoryMap.for_size(0).write_sink
READ_SINK = MemoryMap.for_size(0).read_sink
RECEIVE_BUFFERS = MemoryMap.for_size(0).receive_buffer(0)
INVALIDATE_TARGETS = MemoryMap.for_size(0).invalidate_target(0)


def impaired(loss: float, seed: int) -> LinkConfig:
    """The demo's link: loss, duplication, reordering and corruption each at `loss`."""
    return LinkConfig(loss=loss, duplication=loss, reordering=loss, corruption=loss, seed=seed)


# -- the demo --------------------------------------------------------------------------


@dataclass
class Operation:
    name: str
    opcode: Opcode
    sender: Side
    length: int


@dataclass
class DemoResult:
    checks: list[Check] = field(default_factory=list)
    operations: list[Operation] = field(default_factory=list)
    testbed: HostPair | None = None
    teardown: dict[Side, RnicEvent | None] = field(default_factory=dict)
    """How each host's association ended (`FINISHED`), None if it had not by the close time limit."""
    wall_seconds: float = 0.0
    data_seconds: float = 0.0
    """Simulated time from the first post to the last completion (or to the stop)."""
    phase: str = ""
    """The phase the run is in, or stopped in."""
    stopped: str | None = None
    """Why the run stopped before its end: the phase and what ended it (None: it ran to the end)."""

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(check.passed for check in self.checks)

    def check(self, name: str, passed: bool, detail: str = "") -> None:
        self.checks.append(Check(name, bool(passed), detail))


SEND_VARIANTS = (
    ("Send", Opcode.SEND, False, False),
    ("Send with Invalidate", Opcode.SEND_WITH_INVALIDATE, False, True),
    ("Send with SE", Opcode.SEND_WITH_SE, True, False),
    ("Send with SE and Invalidate", Opcode.SEND_WITH_SE_AND_INVALIDATE, True, True),
)


@dataclass
class _HostPlan:
    """What one host registered and expects, for the checks."""

    key: int
    """The pattern of the data this host sends (`PatternMemory`)."""
    write_sink_stag: int = 0
    read_sink_stag: int = 0
    source_stag: int = 0
    invalidate_targets: list[int] = field(default_factory=list)
    write_id: int = 0
    read_id: int = 0
    send_ids: dict[Opcode, int] = field(default_factory=dict)


PHASES = ("association set-up (RFC 4960 5.1)", "DDP session set-up (RFC 5043 6.2, RFC 6581 9)",
          "data transfer (RFC 5040 5)")


def run_demo(
    loss: float = 0.0,
    seed: int = 1,
    udp: bool = False,
    size: int = 1 << 20,
    progress: Callable[[float], None] | None = None,
    tamper: Callable[[HostPair], None] | None = None,
    record: bool = False,
) -> DemoResult:
    """Run the demo scenario; `tamper` (tests only) may change the testbed before verification; `record` keeps
    every frame for the capture (memory grows with the traffic).

    A phase that cannot finish (an association gave up: `AssociationEnded`; or nothing happens: `Stalled`)
    stops the run: `stopped` says which phase and why, a failed check records it, and each host's finishing
    event, if any, is in `teardown`."""
    result = DemoResult()
    bed = result.testbed = HostPair.create(impaired(loss, seed), seed=seed, record=record, udp=udp,
                                           memories={side: PatternMemory() for side in Side})
    wall_start = time.perf_counter()
    try:
        _run_phases(result, bed, seed, size, progress, tamper)
    except Stalled as error:
        result.stopped = f"{result.phase}: {error}"
        result.check(f"{result.phase} completed", False, str(error))
        result.teardown = {side: bed.finished(side) for side in Side}
    result.wall_seconds = time.perf_counter() - wall_start
    return result


def _run_phases(result: DemoResult, bed: HostPair, seed: int, size: int,
                progress: Callable[[float], None] | None, tamper: Callable[[HostPair], None] | None) -> None:
    result.phase = PHASES[0]
    bed.connect()
    _association_check(result, bed)
    result.phase = PHASES[1]
    bed.open_stream(STREAM, b"rnic demo")
    _session_checks(result, bed)

    result.phase = PHASES[2]
    layout = MemoryMap.for_size(size)
    plans = {side: _HostPlan(random.Random(f"rnic demo {seed} {side.name}").getrandbits(64)) for side in Side}
    for side, plan in plans.items():
        host, memory, peer_key = bed.hosts[side], _pattern_memory(bed, side), plans[side.peer].key
        memory.add_source(layout.source, size, plan.key)
        memory.add_sink(layout.write_sink, size, peer_key)
        memory.add_sink(layout.read_sink, size, peer_key)
        plan.source_stag = host.register_memory(layout.source, size, Access.LOCAL_READ | Access.REMOTE_READ)
        plan.write_sink_stag = host.register_memory(layout.write_sink, size,
                                                    Access.LOCAL_WRITE | Access.REMOTE_WRITE)
        plan.read_sink_stag = host.register_memory(layout.read_sink, size, Access.LOCAL_WRITE)
        plan.invalidate_targets = [
            host.register_memory(layout.invalidate_target(i), TARGET_LENGTH, Access.REMOTE_WRITE) for i in range(2)
        ]
        for index in range(len(SEND_VARIANTS)):
            memory.add_sink(layout.receive_buffer(index), size, peer_key)
            host.post_recv(STREAM, layout.receive_buffer(index), size)

    data_start = bed.now
    for side, plan in plans.items():
        host, peer = bed.hosts[side], plans[side.peer]
        plan.write_id = host.post_write(STREAM, peer.write_sink_stag, 0, layout.source, size)
        result.operations.append(Operation("RDMA Write", Opcode.RDMA_WRITE, side, size))
        plan.read_id = host.post_read(STREAM, plan.read_sink_stag, 0, peer.source_stag, 0, size)
        result.operations.append(Operation("RDMA Read", Opcode.RDMA_READ_REQUEST, side, size))
        targets = iter(peer.invalidate_targets)
        for name, opcode, solicited, invalidate in SEND_VARIANTS:
            stag = next(targets) if invalidate else None
            plan.send_ids[opcode] = host.post_send(STREAM, layout.source, size, solicited=solicited,
                                                   invalidate_stag=stag)
            result.operations.append(Operation(name, opcode, side, size))

    expected_bytes = len(result.operations) * size
    written_before = {side: _pattern_memory(bed, side).bytes_written for side in Side}

    def report_progress() -> None:
        result.data_seconds = bed.now - data_start
        if progress is None or not expected_bytes:
            return
        placed = sum(_pattern_memory(bed, side).bytes_written - written_before[side] for side in Side)
        progress(min(1.0, placed / expected_bytes))

    def all_done() -> bool:
        return all(
            bed.count(side, WriteArrived) >= 1 and bed.count(side, ReadCompletion) >= 1
            and bed.count(side, ReceiveCompletion) >= len(SEND_VARIANTS)
            and bed.count(side, WorkCompletion) >= 1 + len(SEND_VARIANTS)
            for side in Side
        )

    bed.run_until(all_done, report_progress)
    result.data_seconds = bed.now - data_start
    if progress is not None:
        progress(1.0)
    if tamper is not None:
        tamper(bed)
    result.phase = "verification"
    _verify(result, bed, plans, layout)
    result.phase = "teardown (RFC 5043 6.2, RFC 4960 9.2)"
    close_start = bed.now
    result.teardown = bed.close(limit=CLOSE_TIME_LIMIT)
    _teardown_check(result, bed, close_start)


def _association_check(result: DemoResult, bed: HostPair) -> None:
    connected = {side: bed.of(side, Connected)[0] for side in Side}
    result.check("association up with DDP on both sides (RFC 5043 11.1)",
                 all(event.ddp_enabled and event.peer_adaptation_code_point == 1 for event in connected.values()))


def _session_checks(result: DemoResult, bed: HostPair) -> None:
    established = {side: bed.of(side, SessionEstablished)[0] for side in Side}
    result.check("IRD/ORD 4/4 negotiated on both sides (RFC 6581 9)",
                 all((e.ird, e.ord) == (4, 4) for e in established.values()))
    result.check("initiator sends, responder receives the zero-length RDMA Write RTR (RFC 6581 9)",
                 established[Side.A].rtr is RtrType.WRITE
                 and [e.rtr for e in bed.of(Side.B, RtrArrived)] == [RtrType.WRITE])


def _teardown_check(result: DemoResult, bed: HostPair, close_start: float) -> None:
    unfinished = [side.name for side, event in result.teardown.items() if event is None]
    result.check("teardown: both hosts' associations ended (RFC 5043 6.2, RFC 4960 9.2)", not unfinished,
                 f"host {' and '.join(unfinished)} did not close within {bed.now - close_start:.3f} s "
                 f"of simulated time (limit {CLOSE_TIME_LIMIT:g} s)" if unfinished else "")


def _pattern_memory(bed: HostPair, side: Side) -> PatternMemory:
    memory = bed.memory[side]
    assert isinstance(memory, PatternMemory)
    return memory


def _verify(result: DemoResult, bed: HostPair, plans: dict[Side, _HostPlan], layout: MemoryMap) -> None:
    """Every sink holds the peer's data, byte for byte (`PatternMemory.intact`), every completion is the
    work posted, invalidated STags are invalid, and nothing was written outside the registered buffers."""
    size = layout.size
    for side in Side:
        peer = side.peer
        plan = plans[side]
        memory, host = _pattern_memory(bed, side), bed.hosts[side]
        arrow = f"{peer.name}->{side.name}"
        result.check(f"RDMA Write {arrow}: every byte placed", memory.intact(layout.write_sink, size))
        # the length, where known: an engine reporting per message hands up a Write's last segment alone
        result.check(f"RDMA Write {arrow}: one WriteArrived at the sink STag",
                     [(e.stag, e.length in (size, None)) for e in bed.of(side, WriteArrived)]
                     == [(plan.write_sink_stag, True)])
        result.check(f"RDMA Read {side.name}<-{peer.name}: every byte placed", memory.intact(layout.read_sink, size))
        result.check(f"RDMA Read {side.name}<-{peer.name}: one ReadCompletion",
                     [(e.wr_id, e.length) for e in bed.of(side, ReadCompletion)] == [(plan.read_id, size)])
        receives = bed.of(side, ReceiveCompletion)
        result.check(f"Sends {arrow}: four receive completions, in order",
                     [e.opcode for e in receives] == [opcode for _, opcode, _, _ in SEND_VARIANTS])
        targets = iter(plan.invalidate_targets)
        for index, (name, opcode, solicited, invalidate) in enumerate(SEND_VARIANTS):
            completion = next((e for e in receives if e.opcode is opcode), None)
            address = layout.receive_buffer(index)
            stag = next(targets) if invalidate else None
            result.check(
                f"{name} {arrow}: bytes, length, SE and invalidated STag",
                completion is not None and completion.address == address and completion.length == size
                and completion.solicited is solicited and completion.invalidated_stag == stag
                and memory.intact(address, size),
            )
            if stag is not None:
                region = host.memory_table.lookup(stag)
                result.check(f"{name} {arrow}: STag 0x{stag:08x} invalidated (RFC 5040 5.3)",
                             region is not None and not region.valid)
        done = bed.of(side, WorkCompletion)
        expected = [(plan.write_id, Opcode.RDMA_WRITE, size)] + [
            (plan.send_ids[opcode], opcode, size) for _, opcode, _, _ in SEND_VARIANTS
        ]
        result.check(f"host {side.name}: one local completion per Write and Send posted",
                     sorted((e.wr_id, e.opcode, e.length) for e in done) == sorted(expected))
        allowed = [(layout.source, size), (layout.write_sink, size), (layout.read_sink, size),
                   (layout.receive_buffer(0), len(SEND_VARIANTS) * max(size, 1))]
        stray = [w for w in memory.written_outside(allowed) if w[1]]
        result.check(f"host {side.name}: nothing written outside registered and posted buffers",
                     not stray, f"{len(stray)} stray writes")


# -- printing -------------------------------------------------------------------------


def _rate(nbytes: float, seconds: float) -> str:
    if seconds <= 0:
        return "-"
    return f"{nbytes / seconds / 1e6:,.2f} MB/s"


def _rtr_name(rtr: RtrType | None) -> str:
    return rtr.value if rtr is not None else "none"


def _cause_name(code: int) -> str:
    try:
        return ErrorCauseCode(code).name
    except ValueError:
        return f"cause {code}"


def _teardown_text(event: RnicEvent | None) -> str:
    if isinstance(event, Closed):
        return "Closed (SHUTDOWN COMPLETE, RFC 4960 9.2)"
    if isinstance(event, Aborted):
        causes = ", ".join(_cause_name(cause.code) for cause in event.causes)
        return f"Aborted by the peer (RFC 4960 9.1){': ' + causes if causes else ''}"
    if isinstance(event, Failed):
        return _failure_text(event)
    if isinstance(event, CloseAborted):
        return f"aborted by close(): {event.reason}"
    return "did not close"


def _failure_text(event: Failed) -> str:
    """`Failed in STATE: reason` (the reason names a retransmission limit that ran out, and its value)."""
    where = f" in {event.state.value}" if event.state is not None else ""
    return f"Failed{where}: {event.reason}"


def _association_text(bed: HostPair, side: Side) -> str:
    """How a host's association stands: how it ended, else its state (RFC 4960 4)."""
    finished = bed.finished(side)
    if finished is not None:
        return _teardown_text(finished)
    association = bed.hosts[side].association
    if association is None:
        return "none (listening)" if side is Side.B else "none"
    return association.state.value


def print_summary(result: DemoResult, loss: float, seed: int, udp: bool, size: int, out: TextIO,
                  measured: str = "model") -> None:
    """The summary; `measured` names what the wall-clock goodput measures ("model", or the RTL simulation)."""
    bed = result.testbed
    assert bed is not None
    transport = "SCTP over UDP 9899 (RFC 6951)" if udp else "SCTP over IPv4"
    print(f"rnic demo: A {IPS[Side.A]} <-> B {IPS[Side.B]}, {transport}, seed {seed}", file=out)
    print(f"link: loss, duplication, reordering and corruption each {loss:.1%}", file=out)
    for side in Side:
        connected = bed.of(side, Connected)
        if connected:
            event = connected[0]
            print(f"association {side.name}: peer adaptation code point {event.peer_adaptation_code_point} "
                  f"(DDP {'on' if event.ddp_enabled else 'off'}), {event.streams} streams, MULPDU {event.mulpdu}",
                  file=out)
    for side in Side:
        for event in bed.of(side, SessionEstablished):
            if side is Side.A:
                rtr = f"RTR sent: {_rtr_name(event.rtr)}"
            else:
                arrived = bed.of(side, RtrArrived)
                rtr = f"RTR received: {_rtr_name(arrived[0].rtr if arrived else None)}"
            print(f"session {event.stream_id} {side.name} ({event.role.value}): IRD {event.ird} ORD {event.ord}, "
                  f"{'peer-to-peer' if event.peer_to_peer else 'client-server'}, {rtr}", file=out)
    if result.stopped is not None:
        print(f"stopped during {result.stopped}", file=out)
        for side in Side:
            print(f"association {side.name}: {_association_text(bed, side)}", file=out)
    total = sum(operation.length for operation in result.operations)
    if result.operations:
        print(f"{'operation':<28} {'direction':>9} {'bytes':>10}", file=out)
        for operation in result.operations:
            direction = f"{operation.sender.name}->{operation.sender.peer.name}"
            if operation.opcode is Opcode.RDMA_READ_REQUEST:
                direction = f"{operation.sender.name}<-{operation.sender.peer.name}"
            print(f"{operation.name:<28} {direction:>9} {operation.length:>10,}", file=out)
        print(f"{'total':<28} {'':>9} {total:>10,}", file=out)
    for side in Side:
        stats = bed.hosts[side].statistics
        assoc = stats.association
        if assoc is not None:
            print(f"retransmissions {side.name}: timeout {assoc.retransmitted_by_timeout}, "
                  f"fast {assoc.fast_retransmitted}; frames sent {stats.frames_sent}, dropped on receipt: "
                  f"bad checksum {stats.dropped_bad_checksum}, malformed {stats.dropped_malformed}, "
                  f"misaddressed {stats.dropped_misaddressed}", file=out)
    for side in Side:
        lost = sum(1 for event in bed.of(side, PathStatus) if not event.reachable)
        if lost:
            print(f"path {side.name}->{side.peer.name}: marked unreachable {lost} time(s), its error count past "
                  "Path.Max.Retrans (RFC 4960 8.2)", file=out)
    link = bed.link.stats
    if result.stopped is None:
        for side in Side:
            print(f"teardown {side.name}: {_teardown_text(result.teardown.get(side))}", file=out)
    for side in Side:  # also for a stopped run: a Terminate may be what preceded the stop
        for event in bed.of(side, RdmapTerminated):
            layer, etype, code = event.terminate.number
            layer_name = {known.value: known.name for known in TerminateLayer}.get(layer, f"layer {layer}")
            print(f"terminate {side.name}: {'sent' if event.sent else 'received'} on stream {event.stream_id}, "
                  f"{layer_name} type {etype} code 0x{code:02x} ({error_name(layer, etype, code)})", file=out)
    print(f"link frames: sent {link.sent}, lost {link.lost}, duplicated {link.duplicated}, "
          f"reordered {link.reordered}, corrupted {link.corrupted}", file=out)
    print(f"time: simulated {bed.now:.3f} s (data phase {result.data_seconds:.3f} s), wall {result.wall_seconds:.2f} s",
          file=out)
    if result.operations and result.stopped is None:  # a stopped run did not move what was posted
        print(f"{measured} goodput: {_rate(total, result.wall_seconds)} wall-clock, "
              f"{_rate(total, result.data_seconds)} simulated (data phase)", file=out)
    failed = [check for check in result.checks if not check.passed]
    print(f"checks: {len(result.checks) - len(failed)} passed, {len(failed)} failed", file=out)
    for check in failed:
        print(f"  FAILED: {check.name}{' (' + check.detail + ')' if check.detail else ''}", file=out)
    print(f"result: {'PASS' if result.passed else 'FAIL'}", file=out)


class ProgressBar:
    """A plain-text bar redrawn in place with a carriage return, at most ten times a second."""

    WIDTH = 40

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._last = 0.0
        self._open = False

    def __call__(self, fraction: float) -> None:
        now = time.perf_counter()
        if fraction < 1.0 and now - self._last < 0.1:
            return
        self._last = now
        filled = int(fraction * self.WIDTH)
        self.stream.write(f"\r[{'#' * filled}{' ' * (self.WIDTH - filled)}] {fraction:4.0%}")
        self._open = fraction < 1.0
        if not self._open:
            self.stream.write("\n")
        self.stream.flush()

    def close(self) -> None:
        """End a bar left short of 100% (the run stopped) so that what follows starts on its own line."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False


class ProgressLines:
    """Progress when stderr is not a terminal: one line every `interval` wall-clock seconds, none for a
    run shorter than that."""

    def __init__(self, stream: TextIO, size: int, interval: float = 10.0) -> None:
        self.stream = stream
        self.total = size * 2 * (2 + len(SEND_VARIANTS))
        self.interval = interval
        self._start = self._last = time.perf_counter()

    def __call__(self, fraction: float) -> None:
        now = time.perf_counter()
        if fraction >= 1.0 or now - self._last < self.interval:
            return
        self._last = now
        print(f"rnic demo: {fraction:.0%} of {self.total:,} bytes placed after {now - self._start:.0f} s",
              file=self.stream, flush=True)


def demo_command(
    loss: float, seed: int, udp: bool, size: int, pcap: str | None, show_progress: bool,
    out: TextIO | None = None, tamper: Callable[[HostPair], None] | None = None, backend: str = "soft",
    gateware_peer: bool = False,
) -> int:
    """Run, print the summary (also when a phase could not finish), write the capture; exit status 0 only if
    every check passed.  `show_progress`: a bar on a terminal, else a line now and then (both on stderr);
    `backend` "sim": through the driver on the RTL (`sim_demo`; no progress, no `tamper`; `gateware_peer`:
    host B on the RTL too)."""
    out = out if out is not None else sys.stdout
    if backend == "sim":
        return sim_demo(loss, seed, size, pcap, out, gateware_peer=gateware_peer)
    progress = None
    if show_progress:
        progress = ProgressBar(sys.stderr) if sys.stderr.isatty() else ProgressLines(sys.stderr, size)
    result = run_demo(loss=loss, seed=seed, udp=udp, size=size, progress=progress, tamper=tamper,
                      record=pcap is not None)
    if isinstance(progress, ProgressBar):
        progress.close()
    print_summary(result, loss, seed, udp, size, out)
    if pcap is not None and result.testbed is not None:
        Path(pcap).write_bytes(result.testbed.pcap())
        print(f"capture: {pcap} ({len(result.testbed.link.recording or [])} frames)", file=out)
    return 0 if result.passed else 1


# -- --backend sim: the driver on the RTL ----------------------------------------------------

SIM_LARGEST_SIZE = 16 * MIB
"""The largest `--size` of `--backend sim`: host A's memory is the testbench's RAM, which holds its buffers."""


def sim_memory_bytes(size: int) -> int:
    """Host A's RAM for operations of `size` bytes, as a power of two of at least 4 MiB: its seven buffers
    (`sim.e2e_program`) past the driver's first megabyte in the lower three quarters, a gathered Write in
    the bounce area above (`sim.driver_sim.bounce_area`)."""
    return 1 << max(22, (10 * size + 2 * MIB).bit_length())


def sim_demo(loss: float, seed: int, size: int, pcap: str | None, out: TextIO,
             width_bytes: int = 8, gateware_peer: bool = False) -> int:
    """The demo through the host driver on the `sim` fabric: host A on the RTL RNIC top under Verilator, both
    ways (`sim.driver_sim`), host B on the engines' golden models or (`gateware_peer`) on a second RNIC top;
    the summary of `print_summary`."""
    import json
    import tempfile

    from sim.driver_sim import run_program
    from sim.runner import SimulationFailed

    with tempfile.TemporaryDirectory(prefix="rnic-demo-") as work:
        outcome_file, log = Path(work) / "outcome.json", Path(work) / "sim.log"
        try:
            run_program(sim_demo_program, link=impaired(loss, seed), seed=seed, log_file=log,
                        width_bytes=width_bytes, memory_bytes=sim_memory_bytes(size), record=pcap is not None,
                        gateware_peer=gateware_peer,
                        arguments={"loss": loss, "seed": seed, "size": size, "outcome": str(outcome_file),
                                   "pcap": str(Path(pcap).resolve()) if pcap is not None else None,
                                   "width_bytes": width_bytes, "gateware_peer": gateware_peer})
        except SimulationFailed as error:
            if not outcome_file.exists():
                print(f"rnic demo: the simulation failed: {error}", file=sys.stderr)
                print(log.read_text()[-4000:], file=sys.stderr)
                return 1
        outcome = json.loads(outcome_file.read_text())
    out.write(outcome["summary"])
    if pcap is not None and outcome["frames"] is not None:
        print(f"capture: {pcap} ({outcome['frames']} frames)", file=out)
    return 0 if outcome["passed"] else 1


async def sim_demo_program(fabric, loss: float, seed: int, size: int, outcome: str, pcap: str | None,
                           width_bytes: int, gateware_peer: bool = False) -> None:
    """Under cocotb (`sim.tb.driver_program`): the demo's phases through the driver (`sim.e2e_program`), the
    summary and the capture written for `sim_demo`."""
    import io
    import json

    from driver import DriverError
    from sim.e2e_program import E2eReport, connect, one_size, teardown

    result, report = DemoResult(), E2eReport()
    bed = result.testbed = fabric.backend.pair
    wall_start = time.perf_counter()
    try:
        result.phase = PHASES[0]
        a, b = await connect(fabric, report)
        _association_check(result, bed)
        result.phase = PHASES[1]
        _session_checks(result, bed)
        result.phase = PHASES[2]
        if report.passed:
            for side in Side:
                result.operations += [Operation("RDMA Write", Opcode.RDMA_WRITE, side, size),
                                      Operation("RDMA Read", Opcode.RDMA_READ_REQUEST, side, size)]
                result.operations += [Operation(name, opcode, side, size) for name, opcode, _, _ in SEND_VARIANTS]
            await one_size(a, b, size, report)
            result.data_seconds = report.data_seconds
            result.phase = "teardown (RFC 5043 6.2, RFC 4960 9.2)"
            close_start = bed.now
            await teardown(a, b, report)
            result.teardown = {side: bed.finished(side) for side in Side}
            _teardown_check(result, bed, close_start)
    except (DriverError, AssertionError) as error:
        result.stopped = f"{result.phase}: {error}"
        result.check(f"{result.phase} completed", False, str(error))
        result.teardown = {side: bed.finished(side) for side in Side}
    result.checks += report.checks
    result.wall_seconds = time.perf_counter() - wall_start
    summary = io.StringIO()
    hosts = "both hosts" if gateware_peer else "host A"
    print_summary(result, loss, seed, False, size, summary, measured=f"RTL simulation (W = {width_bytes}, {hosts})")
    frames = None
    if pcap is not None:
        Path(pcap).write_bytes(bed.pcap())
        frames = len(bed.link.recording or [])
    Path(outcome).write_text(json.dumps({"summary": summary.getvalue(), "passed": result.passed,
                                         "frames": frames}))

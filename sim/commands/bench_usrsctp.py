"""`rnic bench usrsctp`: the software RNIC beside usrsctp, the field's user-space SCTP in C, in one run.

Both move messages of each size between two endpoints in this one CPython
process over an in-memory link, one thread each, and each is timed by the
wall clock and by the CPU time of this process (equal on an idle machine;
on a loaded one the CPU time leaves out the time others had the CPU, so its
figures, and the ratio of the two, still mean something):

* usrsctp (Debian's ``libusrsctp-dev`` through ctypes, :mod:`sim.usrsctp`):
  two one-to-one sockets on one AF_CONN address, one listening; every
  packet either sends is handed straight back to ``usrsctp_conninput``
  (no loss, no delay, CRC32c computed and checked). The client sends
  ``iters`` messages (PPID 16, ordered, stream 0, Nagle off) as fast as its
  send buffer takes them; the clock stops when the server has read every
  byte. Timers run in usrsctp's virtual time and advance only when no packet
  is in flight (a delayed SACK then costs no wall-clock time).
* the software RNIC: ``rnic perf --backend soft --test write_bw`` at the
  same sizes and count (the driver's verbs, RDMAP, DDP, the model's SCTP,
  every byte placed in the sink's region and checked), its wall-clock
  column.

With ``--udp`` (`run_loopback_bench`), each instead runs as two processes over loopback UDP (RFC 6951),
at each path MTU: usrsctp's own UDP encapsulation, a sender and a receiver process, and ``rnic perf
--server`` and ``--client --test write_bw`` (`sim.loopback_bench`), timed on the system's monotonic clock
from the first send to the last byte read (usrsctp) or to the server's "done" (the RNIC).

MB = 2^20 bytes, as perftest and ``rnic perf``.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import TextIO

from sim.commands.perf import DEFAULT_DELAY_USEC, DEFAULT_RATE_GBPS, MB, BandwidthRow, PerfPlan, measure, perf_link
from sim.loopback_bench import LoopbackSpan, rnic_write, usrsctp_write
from sim.usrsctp import AssocChange, Message, Stack, check_installed

DEFAULT_SIZES = (1434, 65536, 1 << 20)
DEFAULT_ITERS = 16
DEFAULT_MTUS = (1500, 9000)
"""``--udp``'s path MTUs: Ethernet's and a jumbo frame's."""
#: usrsctp's first ports; each transfer takes the next two (a closed socket's port stays bound a while).
_FIRST_PORT = 5000
_ports = iter(range(_FIRST_PORT, 65536, 2))
#: usrsctp's own default send buffer (SO_SNDBUF); raised to two messages for larger ones.
_SEND_BUFFER = 256 * 1024
#: Virtual milliseconds usrsctp's clock moves when nothing is in flight (its timers' granularity is 10 ms).
_IDLE_STEP_MS = 10
#: Virtual time after which a usrsctp transfer that has not finished is reported as stalled.
_STALL_MS = 60_000


class BenchFailed(Exception):
    """A transfer did not finish or did not deliver what was sent."""


@dataclass(frozen=True)
class Seconds:
    wall: float
    cpu: float


@dataclass(frozen=True)
class SideBySide:
    size: int
    iters: int
    usrsctp: Seconds
    rnic: Seconds

    def rates(self, clock: str) -> tuple[float, float, float]:
        """MB/s of usrsctp and of the software RNIC by `clock` ("wall" or "cpu"), and the second over the first."""
        nbytes = self.size * self.iters
        usrsctp, rnic = (nbytes / getattr(seconds, clock) / MB for seconds in (self.usrsctp, self.rnic))
        return usrsctp, rnic, rnic / usrsctp


def usrsctp_transfer(size: int, iters: int) -> Seconds:
    """How long usrsctp takes to move `iters` messages of `size` bytes from one socket to another."""
    stack = Stack.instance()
    conn = stack.conn()
    server, client = stack.socket(), stack.socket()
    try:
        for sock in (server, client):
            sock.set_nodelay()
            sock.set_heartbeat(False)
        client.set_send_buffer(max(_SEND_BUFFER, 2 * size))
        client_port = next(_ports)
        server.bind(conn, client_port + 1)
        server.listen()
        client.bind(conn, client_port)
        client.connect(conn, client_port + 1)
        accepted = _until(stack, conn, lambda: server.accept(), "the association did not come up")
        _until(stack, conn, lambda: _established(client), "the client saw no COMM_UP")
        payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
        received = bytearray()
        messages = 0
        sent = 0
        started, started_cpu = time.perf_counter(), time.process_time()

        def done() -> bool:
            nonlocal sent, messages, received
            while sent < iters:
                try:
                    client.send(payload, ppid=16)
                except OSError:       # EWOULDBLOCK: the send buffer is full until a SACK frees it
                    break
                sent += 1
            while (item := accepted.receive(max(size, 1 << 16))) is not None:
                if isinstance(item, Message):
                    received += item.data
                    messages += item.complete
            return messages == iters

        _until(stack, conn, done, f"usrsctp moved {len(received)} of {size * iters} bytes")
        seconds = Seconds(time.perf_counter() - started, time.process_time() - started_cpu)
    finally:
        for sock in (client, server):
            sock.close()
        conn.close()
    if bytes(received) != payload * iters:
        raise BenchFailed(f"usrsctp delivered {len(received)} bytes, not the {size * iters} sent")
    return seconds


def _established(sock) -> bool:  # noqa: ANN001 - a sim.usrsctp.Socket
    return any(isinstance(item, AssocChange) and item.state == "COMM_UP" for item in sock.receive_all())


def _until(stack: Stack, conn, condition, failure: str):  # noqa: ANN001
    """Hand every packet back to usrsctp until `condition()` is truthy (its value); usrsctp's clock moves
    only while no packet is in flight."""
    idle_ms = 0
    while True:
        result = condition()
        if result:
            return result
        packets = conn.output()
        if packets:
            idle_ms = 0
            for packet in packets:
                conn.input(packet)
            continue
        if idle_ms >= _STALL_MS:
            raise BenchFailed(failure)
        stack.advance(_IDLE_STEP_MS)
        idle_ms += _IDLE_STEP_MS


def rnic_transfers(sizes: tuple[int, ...], iters: int, profiler=None) -> dict[int, Seconds]:  # noqa: ANN001
    """How long `rnic perf --backend soft --test write_bw` takes at each size; `profiler` (a pyinstrument
    Profiler) samples the run."""
    from driver import run

    plan = PerfPlan(tests=("write_bw",), sizes=sizes, iters=iters)
    link = perf_link(DEFAULT_RATE_GBPS, DEFAULT_DELAY_USEC, 0.0, seed=1)   # rnic perf's own link
    if profiler is not None:
        profiler.start()
    try:
        rows = run(lambda fabric: measure(fabric, plan), "soft", link=link)
    finally:
        if profiler is not None:
            profiler.stop()
    return {row.size: Seconds(row.span.wall, row.span.cpu) for row in rows if isinstance(row, BandwidthRow)}


def run_usrsctp_bench(sizes: tuple[int, ...] = DEFAULT_SIZES, iters: int = DEFAULT_ITERS,
                      out: TextIO | None = None, profile: bool = False) -> list[SideBySide]:
    """Print the table; with `profile`, then pyinstrument's call tree of the software RNIC's run (its frames
    that took at least 1 % of it; the `profile` extra)."""
    out = out if out is not None else sys.stdout
    profiler = None
    if profile:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.001)
    usrsctp = {size: usrsctp_transfer(size, iters) for size in sizes}   # first: without the library, no wait
    rnic = rnic_transfers(sizes, iters, profiler)
    rows = [SideBySide(size, iters, usrsctp[size], rnic[size]) for size in sizes]
    print("The software RNIC beside usrsctp: one process, an in-memory link (MB = 2^20 bytes)", file=out)
    print("  usrsctp: socket to socket over AF_CONN (SCTP alone); RNIC: rnic perf --backend soft --test write_bw "
          "(RDMA Writes: verbs, RDMAP, DDP, SCTP)", file=out)
    print("  cpu: MB per CPU-second of this process (the wall clock less the time others had the CPU)", file=out)
    header = f"{'usrsctp MB/s':>13} {'RNIC MB/s':>10} {'RNIC/usrsctp':>13}"
    print(f"{'':>20} {'wall-clock':-^38} {'cpu':-^38}", file=out)
    print(f"{'#bytes':>9} {'#messages':>10} {header} {header}", file=out)
    for row in rows:
        cells = " ".join(f"{usrsctp:>13.4g} {rnic:>10.4g} {ratio:>13.3f}"
                         for usrsctp, rnic, ratio in (row.rates("wall"), row.rates("cpu")))
        print(f"{row.size:>9} {row.iters:>10} {cells}", file=out)
    if profiler is not None:
        print("\nThe software RNIC's run, sampled by pyinstrument every millisecond of the wall clock:", file=out)
        print(profiler.output_text(unicode=False, color=False, processor_options={"filter_threshold": 0.01}),
              file=out)
    return rows


@dataclass(frozen=True)
class LoopbackRow:
    mtu: int
    size: int
    iters: int
    usrsctp: LoopbackSpan
    rnic: LoopbackSpan

    def rates(self) -> tuple[float, float, float]:
        """Wall-clock MB/s of usrsctp and of the software RNIC, and the second over the first."""
        nbytes = self.size * self.iters
        usrsctp, rnic = (nbytes / span.wall / MB for span in (self.usrsctp, self.rnic))
        return usrsctp, rnic, rnic / usrsctp


def run_loopback_bench(sizes: tuple[int, ...] = DEFAULT_SIZES, iters: int = DEFAULT_ITERS,
                       mtus: tuple[int, ...] = DEFAULT_MTUS, out: TextIO | None = None) -> list[LoopbackRow]:
    """``--udp``: print a row per path MTU and size as each finishes, with the load average before the runs."""
    out = out if out is not None else sys.stdout
    check_installed()   # before any process starts: without the library, say so and stop
    print("The software RNIC beside usrsctp: two processes each, over loopback UDP (RFC 6951) (MB = 2^20 bytes)",
          file=out)
    print("  usrsctp: a sender and a receiver process, socket to socket (SCTP alone); RNIC: rnic perf --server and "
          "--client --test write_bw (RDMA Writes: verbs, RDMAP, DDP, SCTP)", file=out)
    print("  MTU: the path MTU of both ends, IPv4 and UDP headers included; MB/s by the wall clock (the "
          "system's monotonic clock, shared by the processes)", file=out)
    print("  cpu s: CPU seconds over the span of usrsctp's sender and receiver, and of the RNIC's client (its "
          "server's are not measured)", file=out)
    print(f"  load average before the runs: {' '.join(f'{load:.2f}' for load in os.getloadavg())}", file=out)
    print(f"{'MTU':>6} {'#bytes':>9} {'#messages':>10} {'usrsctp MB/s':>13} {'RNIC MB/s':>10} {'RNIC/usrsctp':>13} "
          f"{'usrsctp cpu s':>14} {'RNIC cpu s':>11}", file=out, flush=True)
    rows = []
    for mtu in mtus:
        for size in sizes:
            row = LoopbackRow(mtu, size, iters, usrsctp_write(size, iters, mtu), rnic_write(size, iters, mtu))
            rows.append(row)
            usrsctp, rnic, ratio = row.rates()
            usrsctp_cpu = row.usrsctp.sender_cpu + (row.usrsctp.receiver_cpu or 0.0)
            print(f"{mtu:>6} {size:>9} {iters:>10} {usrsctp:>13.4g} {rnic:>10.4g} {ratio:>13.3f} "
                  f"{usrsctp_cpu:>14.3f} {row.rnic.sender_cpu:>11.3f}", file=out, flush=True)
    return rows

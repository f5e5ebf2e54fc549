"""Two processes over loopback UDP (RFC 6951): usrsctp and the software RNIC, each a sender and a receiver in
processes of their own, as two programs on one machine meet on a real transport.

* usrsctp (`sim.usrsctp_udp`: its own UDP socket and threads, its real clock): the receiver listens on
  127.0.0.1, the sender connects and sends `iters` messages of `size` bytes (PPID 16, ordered, stream 0,
  Nagle off, heartbeats off) on a blocking socket, its send buffer two messages (at least usrsctp's 256 KiB
  default) and its receive window 1 MiB (SO_RCVBUF), as a software RNIC's device on a network has
  (`driver.backends.network.NETWORK_BUFFER`); the path MTU is fixed (SPP_PMTUD_DISABLE). The span runs from
  the sender's first send to the receiver's read of the last byte; the receiver hashes what it reads and
  the sender what it sends, and the two must match.
* the software RNIC: `rnic perf --server` and `rnic perf --client --test write_bw` (`sim.commands.perf_remote`)
  on ``udp:127.0.0.1`` devices with the same path MTU: RDMA Writes through the driver's verbs, RDMAP, DDP and
  the model's SCTP, every byte checked where it lands. The span is the client's, from its first post to the
  server's "done" (one control message more than the Writes).

A path MTU bounds the IPv4 packets, IPv4 and UDP headers included (RFC 6951 5.6: the encapsulation's 8 bytes
come out of the SCTP packet's room), for both: `RnicConfig.path_mtu` on the driver's devices, and for
usrsctp ``spp_pathmtu`` less `USRSCTP_MTU_EXCESS`.

Both spans are on ``time.monotonic``, the system's one monotonic clock, so a start taken in one process and
an end in the other make an interval. Each process's CPU seconds over its part of the span come back beside
it. A run that does not finish within `TIMEOUT` seconds, or whose bytes differ, raises `LoopbackFailed`.
"""

from __future__ import annotations

import functools
import hashlib
import io
import multiprocessing
import socket
import time
from dataclasses import dataclass

__all__ = ["LoopbackFailed", "LoopbackSpan", "TIMEOUT", "USRSCTP_MTU_EXCESS", "free_udp_port", "rnic_write",
           "usrsctp_write"]

TIMEOUT = 300.0
"""Seconds a transfer, its processes' start-up included, may take."""
_RECEIVE_WINDOW = 1 << 20
_SEND_BUFFER = 256 * 1024
_POLL_SECONDS = 0.0005
USRSCTP_MTU_EXCESS = 40
"""usrsctp (0.9.5) with UDP encapsulation sends IPv4 packets this much longer than its ``spp_pathmtu``
(1540 bytes at 1500, 9040 at 9000, read off loopback), so it is given the path MTU less this; the driver's
devices count the IPv4 and UDP headers in `RnicConfig.path_mtu` themselves."""
_PPID_UNSPECIFIED = 16


class LoopbackFailed(Exception):
    """A transfer did not finish in time, failed in one of its processes, or delivered other bytes than sent."""


@dataclass(frozen=True)
class LoopbackSpan:
    """One transfer: wall-clock seconds (the system's monotonic clock), and the CPU seconds of the sending and
    receiving processes over it (None where the process does not measure its own: the RNIC's server)."""

    wall: float
    sender_cpu: float
    receiver_cpu: float | None


def free_udp_port() -> int:
    """A UDP port of 127.0.0.1 nothing holds now (the kernel's choice; free again when this returns)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _payload(size: int, index: int) -> bytes:
    """Message `index`'s bytes: distinct per message, so a message delivered twice or out of order is seen."""
    block = bytes((index + offset) & 0xFF for offset in range(256))
    return (block * (size // 256 + 1))[:size]


def _expected_digest(size: int, iters: int) -> str:
    digest = hashlib.blake2b()
    for index in range(iters):
        digest.update(_payload(size, index))
    return digest.hexdigest()


def _run_pair(receiver, receiver_args: tuple, sender, sender_args: tuple, what: str) -> tuple:  # noqa: ANN001
    """Start the receiver, then the sender once the receiver says it listens, in spawned processes; return
    (receiver's report, sender's report), then tell both to close. The receiver sends ("ready",) first; either
    may send ("error", text) instead of its report."""
    context = multiprocessing.get_context("spawn")
    deadline = time.monotonic() + TIMEOUT
    receiver_end, receiver_child = context.Pipe()
    sender_end, sender_child = context.Pipe()
    processes = [context.Process(target=receiver, args=(*receiver_args, receiver_child), daemon=True)]
    try:
        processes[0].start()
        if (first := _message(receiver_end, deadline, f"{what}: the receiver")) != ("ready",):
            raise LoopbackFailed(f"{what}: the receiver ended before it listened: {first}")
        processes.append(context.Process(target=sender, args=(*sender_args, sender_child), daemon=True))
        processes[1].start()
        sent = _message(sender_end, deadline, f"{what}: the sender")
        received = _message(receiver_end, deadline, f"{what}: the receiver")
        for end, process in ((sender_end, processes[1]), (receiver_end, processes[0])):
            try:
                end.send("close")
            except OSError:   # it has exited already
                pass
            process.join(max(1.0, deadline - time.monotonic()))
        return received, sent
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
                process.join()


def _message(end, deadline: float, who: str):  # noqa: ANN001 - a multiprocessing Connection
    """The next message on `end`; `LoopbackFailed` on an error, an exit or the deadline."""
    if not end.poll(max(0.0, deadline - time.monotonic())):
        raise LoopbackFailed(f"{who} did not report within {TIMEOUT:g} s")
    try:
        message = end.recv()
    except EOFError:
        raise LoopbackFailed(f"{who} exited without a report") from None
    if message[0] == "error":
        raise LoopbackFailed(f"{who}: {message[1]}")
    return message


def _closing(end) -> None:  # noqa: ANN001
    """Keep the association open until the parent has both reports and says "close"."""
    if end.poll(TIMEOUT):
        end.recv()


def _reporting(function):  # noqa: ANN001
    """A child's body: its exceptions go to the parent as ("error", text) instead of a traceback on stderr."""
    @functools.wraps(function)   # its module and name: what a spawned process imports it by
    def child(*args) -> None:
        end = args[-1]
        try:
            function(*args)
        except Exception as error:   # noqa: BLE001 - every failure is the parent's to report
            end.send(("error", f"{type(error).__name__}: {error}"))
    return child


# -- usrsctp

def usrsctp_write(size: int, iters: int, mtu: int) -> LoopbackSpan:
    """usrsctp moving `iters` messages of `size` bytes from one process to another over loopback UDP."""
    receiver_port, sender_port = free_udp_port(), free_udp_port()
    received, sent = _run_pair(_usrsctp_receiver, (receiver_port, size * iters, mtu),
                               _usrsctp_sender, (sender_port, receiver_port, size, iters, mtu), "usrsctp")
    _, end, receiver_cpu, nbytes, digest = received
    _, start, sender_cpu, path_mtu = sent
    if nbytes != size * iters or digest != _expected_digest(size, iters):
        raise LoopbackFailed(f"usrsctp delivered {nbytes} bytes, not the {size * iters} sent, or other bytes")
    if path_mtu != mtu - USRSCTP_MTU_EXCESS:
        raise LoopbackFailed(f"usrsctp's path MTU was {path_mtu}, not the {mtu - USRSCTP_MTU_EXCESS} set")
    return LoopbackSpan(end - start, sender_cpu, receiver_cpu)


def _usrsctp_socket(port: int, mtu: int, send_buffer: int):  # noqa: ANN202
    from sim.usrsctp_udp import UdpStack

    sock = UdpStack.start(port).socket()
    sock.set_nodelay()
    sock.set_heartbeat(False)
    sock.set_path_mtu(mtu - USRSCTP_MTU_EXCESS)
    sock.set_send_buffer(send_buffer)
    sock.set_receive_buffer(_RECEIVE_WINDOW)
    sock.bind("127.0.0.1", port)
    return sock


@_reporting
def _usrsctp_receiver(port: int, total: int, mtu: int, end) -> None:  # noqa: ANN001
    from sim.usrsctp import Message

    listener = _usrsctp_socket(port, mtu, _SEND_BUFFER)
    listener.listen()
    end.send(("ready",))
    deadline = time.monotonic() + TIMEOUT
    while (accepted := listener.accept()) is None:
        if time.monotonic() > deadline:
            raise TimeoutError("no association came up")
        time.sleep(_POLL_SECONDS)
    accepted.set_blocking(True)
    digest, nbytes, cpu = hashlib.blake2b(), 0, time.process_time()
    while nbytes < total:
        item = accepted.receive(_RECEIVE_WINDOW)
        if item is None:
            raise ConnectionError(f"the association ended after {nbytes} of {total} bytes (errno {accepted.error})")
        if isinstance(item, Message):
            digest.update(item.data)
            nbytes += len(item.data)
    end.send(("received", time.monotonic(), time.process_time() - cpu, nbytes, digest.hexdigest()))
    _closing(end)


@_reporting
def _usrsctp_sender(port: int, peer_port: int, size: int, iters: int, mtu: int, end) -> None:  # noqa: ANN001
    from sim.usrsctp import AssocChange

    sock = _usrsctp_socket(port, mtu, max(_SEND_BUFFER, 2 * size))
    sock.set_remote_udp_port(peer_port)
    sock.connect("127.0.0.1", peer_port)
    deadline = time.monotonic() + TIMEOUT
    while not any(isinstance(item, AssocChange) and item.state == "COMM_UP" for item in sock.receive_all()):
        if time.monotonic() > deadline:
            raise TimeoutError("the association did not come up")
        time.sleep(_POLL_SECONDS)
    messages = [_payload(size, index) for index in range(iters)]
    sock.set_blocking(True)
    start, cpu = time.monotonic(), time.process_time()
    for message in messages:
        sock.send(message, ppid=_PPID_UNSPECIFIED)
    end.send(("sent", start, time.process_time() - cpu, sock.status().mtu))
    _closing(end)   # the receiver has read it all
    sock.close()


# -- the software RNIC

def rnic_write(size: int, iters: int, mtu: int) -> LoopbackSpan:
    """`rnic perf --client --test write_bw` against an `rnic perf --server`, both on loopback UDP."""
    port = free_udp_port()
    received, sent = _run_pair(_rnic_server, (port, mtu), _rnic_client, (port, size, iters, mtu), "the software RNIC")
    if received[1] != 0:
        raise LoopbackFailed(f"the software RNIC's server: {received[2].strip()}")
    _, wall, cpu = sent
    return LoopbackSpan(wall, cpu, None)


@_reporting
def _rnic_server(port: int, mtu: int, end) -> None:  # noqa: ANN001
    from sim.commands.perf_remote import server_command

    out = io.StringIO()
    status = server_command(f"udp:127.0.0.1:{port}", out, {"path_mtu": mtu}, listening=lambda: end.send(("ready",)))
    end.send(("served", status, out.getvalue()))


@_reporting
def _rnic_client(port: int, size: int, iters: int, mtu: int, end) -> None:  # noqa: ANN001
    from sim.commands.perf import BandwidthRow, PerfPlan
    from sim.commands.perf_remote import client_rows

    rows = client_rows(("127.0.0.1", port), PerfPlan(("write_bw",), (size,), iters), "udp:127.0.0.1:0",
                       {"path_mtu": mtu})
    row = next(row for row in rows if isinstance(row, BandwidthRow))
    end.send(("sent", row.span.wall, row.span.cpu))
    _closing(end)

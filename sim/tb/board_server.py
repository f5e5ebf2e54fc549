"""cocotb test: ``boards.ecpix5_top.BoardCore`` served to a host program as a board is (run by sim/board_server.py,
which tells what the host sees).

The UART is a pseudo-terminal (:class:`PtyUart`), the Ethernet a TCP socket
carrying frames (:class:`FrameSocket`); the wires are driven and watched with
sim/tb/board.py's 8N1 bits and GMII carriers. Both are polled without blocking
every :data:`POLL_US` microseconds of simulated time. Once nothing moved for
:data:`IDLE_POLLS` polls (the board has nothing left to do: its core has no
timers), every poll first waits up to :data:`IDLE_WAIT` seconds for the host to
write to the pty or the socket (``select``), so that a board waiting for its
host leaves the processor alone and answers it at once (the 2 us of simulated
time between two polls cost Verilator tens of milliseconds).

Parameters: ``ready_file`` (where the pty's path and the socket's address are
written once served, as JSON), ``bit_clocks``, ``connect_seconds`` (default
600), ``wall_seconds`` (default 3600), ``stop_file`` (optional: its appearance
stops the run, failed), ``failure_file`` (optional: where the reason of a failure
is written). The test passes when the socket's client disconnects.
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import time
import tty
import zlib
from dataclasses import dataclass
from pathlib import Path

import cocotb
from cocotb.queue import Queue
from cocotb.simtime import get_sim_time
from cocotb.triggers import Timer

from sim.runner import test_parameters
from sim.tb.board import CORE_NS, gmii_record, gmii_send, start_board, uart_monitor, uart_send_byte, wire_image

POLL_US = 2
IDLE_POLLS = 25
IDLE_WAIT = 0.5
PREAMBLE = b"\x55" * 7 + b"\xd5"
FCS_BYTES = 4
LENGTH = struct.Struct(">I")


class PtyUart:
    """The board's UART on a pseudo-terminal: the bytes the host writes to the slave end (:attr:`path`) go to
    ``uart_rx`` as 8N1 bits, ``bit_clocks`` core clocks a bit; the bytes decoded from ``uart_tx`` go back."""

    def __init__(self, dut, bit_clocks: int):
        self.dut, self.bit_ns = dut, bit_clocks * CORE_NS
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        os.set_blocking(self.master, False)
        self.path = os.ttyname(self.slave)
        self.to_board: Queue[int] = Queue()
        self.to_host = bytearray()
        self.sent = self.received = 0
        cocotb.start_soon(uart_monitor(dut, self.bit_ns, self.to_host.append))
        cocotb.start_soon(self._drive())

    async def _drive(self) -> None:
        while True:
            await uart_send_byte(self.dut, await self.to_board.get(), self.bit_ns)

    @property
    def busy(self) -> bool:
        return not self.to_board.empty() or bool(self.to_host)

    def poll(self) -> bool:
        """The host's bytes taken, the board's given; True if any moved."""
        try:
            data = os.read(self.master, 4096)
        except BlockingIOError:
            data = b""
        for byte in data:
            self.to_board.put_nowait(byte)
        written = 0
        if self.to_host:
            try:
                written = os.write(self.master, self.to_host)
            except BlockingIOError:
                pass
            del self.to_host[:written]
        self.sent += len(data)
        self.received += written
        return bool(data or written)

    def readable(self) -> list[int]:
        """What ``select`` waits on for the host's bytes."""
        return [self.master]

    def close(self) -> None:
        os.close(self.master)
        os.close(self.slave)


class FrameSocket:
    """The board's Ethernet on a TCP server of 127.0.0.1 (:attr:`address`), for one client: each frame, both ways,
    a 4-byte big-endian length and the frame without preamble and FCS."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.setblocking(False)
        self.address: tuple[str, int] = self.listener.getsockname()[:2]
        self.client: socket.socket | None = None
        self.connected = self.ended = False
        self.incoming, self.outgoing = bytearray(), bytearray()
        self.frames: list[bytes] = []      # from the client, not yet taken
        self.sent = self.received = 0      # frames

    def send(self, frame: bytes) -> None:
        self.outgoing += LENGTH.pack(len(frame)) + frame
        self.sent += 1

    def poll(self) -> bool:
        """The client accepted, its frames read into :attr:`frames`, the board's written; True if anything moved."""
        if self.client is None:
            return not self.connected and self._accept()
        moved = self._write()
        data = self._read()
        if not data:
            return moved
        self.incoming += data
        while len(self.incoming) >= LENGTH.size:
            (length,) = LENGTH.unpack_from(self.incoming)
            if len(self.incoming) < LENGTH.size + length:
                break
            self.frames.append(bytes(self.incoming[LENGTH.size:LENGTH.size + length]))
            del self.incoming[:LENGTH.size + length]
            self.received += 1
        return True

    def _accept(self) -> bool:
        try:
            self.client, _ = self.listener.accept()
        except BlockingIOError:
            return False
        self.client.setblocking(False)
        self.client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connected = True
        return True

    def _write(self) -> bool:
        if not self.outgoing:
            return False
        try:
            written = self.client.send(self.outgoing)
        except BlockingIOError:
            return False
        except OSError:
            written = len(self.outgoing)   # the client left: what it did not take is lost
        del self.outgoing[:written]
        return written > 0

    def _read(self) -> bytes:
        try:
            data = self.client.recv(65536)
        except BlockingIOError:
            return b""
        except OSError:
            data = b""
        if not data:
            self.ended = True
            self.client.close()
        return data

    def readable(self) -> list[socket.socket]:
        """What ``select`` waits on for the client, or for it to connect."""
        if self.client is not None:
            return [self.client]
        return [] if self.connected else [self.listener]

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        self.listener.close()


class GmiiFeed:
    """Frames onto ``gmii_rx`` one after the other, each as :func:`sim.tb.board.wire_image` puts it on the wire."""

    def __init__(self, dut):
        self.dut = dut
        self.frames: Queue[bytes] = Queue()
        cocotb.start_soon(self._drive())

    async def _drive(self) -> None:
        while True:
            await gmii_send(self.dut, [wire_image(await self.frames.get())])

    @property
    def busy(self) -> bool:
        return not self.frames.empty()


def carried_frame(carrier: bytes) -> bytes | None:
    """The frame in a GMII carrier (preamble, SFD, frame, FCS) without its FCS, or None unless the preamble,
    the SFD and the FCS (``zlib.crc32``, least significant byte first) are right."""
    body, fcs = carrier[len(PREAMBLE):-FCS_BYTES], carrier[-FCS_BYTES:]
    if not carrier.startswith(PREAMBLE) or not body or struct.pack("<I", zlib.crc32(body)) != fcs:
        return None
    return body


def write_ready_file(path: Path, serial: str, ethernet: tuple[str, int]) -> None:
    """``{"serial": pty path, "ethernet": [host, port]}`` at ``path``, whole or not at all."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps({"serial": serial, "ethernet": list(ethernet)}))
    os.replace(temporary, path)


def failure_reason(error: Exception) -> str:
    """The first line of an error's message (an assertion's, without pytest's explanation), or its repr."""
    lines = str(error).splitlines()
    return lines[0] if lines else repr(error)


@dataclass(frozen=True)
class Limits:
    connect_seconds: float
    wall_seconds: float
    stop_file: Path | None

    def check(self, seconds: float, ethernet: FrameSocket) -> None:
        assert ethernet.connected or seconds < self.connect_seconds, \
            f"no client on the board's Ethernet socket {ethernet.address} within {self.connect_seconds:.0f} s"
        assert seconds < self.wall_seconds, \
            f"the board's Ethernet client was still connected after {self.wall_seconds:.0f} s (wall clock)"
        assert self.stop_file is None or not self.stop_file.exists(), f"stopped by its host ({self.stop_file})"


async def serve(dut, uart: PtyUart, ethernet: FrameSocket, limits: Limits) -> None:
    """Move bytes and frames between the host's ends and the wires until the Ethernet client leaves."""
    feed, carriers = GmiiFeed(dut), []
    cocotb.start_soon(gmii_record(dut, carriers))
    started, idle = time.monotonic(), 0
    while not ethernet.ended:
        limits.check(time.monotonic() - started, ethernet)
        moved = uart.poll() | ethernet.poll() | bool(ethernet.frames or carriers)
        for frame in ethernet.frames:
            feed.frames.put_nowait(frame)
        ethernet.frames.clear()
        for carrier in carriers:
            frame = carried_frame(carrier)
            if frame is None:
                dut._log.warning(f"a carrier from the board with a bad preamble or FCS, dropped: {carrier.hex()}")
            else:
                ethernet.send(frame)
        carriers.clear()
        idle = 0 if moved or uart.busy or feed.busy else idle + 1
        if idle >= IDLE_POLLS:
            select.select(uart.readable() + ethernet.readable(), [], [], IDLE_WAIT)
        await Timer(POLL_US, unit="us")


@cocotb.test()
async def serve_board(dut):
    parameters = test_parameters()
    await start_board(dut)
    uart = PtyUart(dut, int(parameters["bit_clocks"]))
    ethernet = FrameSocket()
    stop_file = parameters.get("stop_file")
    limits = Limits(float(parameters.get("connect_seconds", 600)), float(parameters.get("wall_seconds", 3600)),
                    Path(stop_file) if stop_file else None)
    write_ready_file(Path(parameters["ready_file"]), uart.path, ethernet.address)
    dut._log.info(f"serving: the UART on {uart.path}, the Ethernet on {ethernet.address}")
    started = time.monotonic()
    try:
        await serve(dut, uart, ethernet, limits)
    except Exception as error:
        if parameters.get("failure_file"):
            Path(parameters["failure_file"]).write_text(failure_reason(error))
        raise
    finally:
        uart.close()
        ethernet.close()
        dut._log.info(f"{uart.sent} bytes to the board's UART, {uart.received} from it; {ethernet.received} frames "
                      f"to its Ethernet, {ethernet.sent} from it; {get_sim_time('us'):.0f} us simulated "
                      f"in {time.monotonic() - started:.1f} s")

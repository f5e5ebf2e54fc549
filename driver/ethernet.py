"""The host's Ethernet port to a board: where the software peer of the `board` backend sends and receives frames.

A port moves whole Ethernet frames without preamble and FCS (destination
MAC first); `receive()` never blocks. Two kinds:

* `SocketPort`: a TCP connection to a simulated board
  (`sim.board_server`), each frame as a 4-byte big-endian length and the
  frame's bytes, both ways;
* `RawSocketPort`: a network interface of this computer cabled to the board
  (Linux `AF_PACKET`; needs `CAP_NET_RAW`, e.g. root). The interface's own
  stack sees the same frames: give it no address on the board's subnet.

`open_port("tcp:127.0.0.1:5555")` or `open_port("eth1")` picks one.
"""

from __future__ import annotations

import errno
import socket
import struct
from typing import Protocol

from driver.errors import DriverError

__all__ = ["EthernetPort", "EthernetError", "SocketPort", "RawSocketPort", "open_port"]

LENGTH = struct.Struct(">I")
MAX_FRAME = 16 * 1024
"""The longest frame a port takes: a jumbo frame and then some."""
ETH_P_ALL = 0x0003


class EthernetError(DriverError):
    """The port to the board failed (closed, refused, not permitted)."""


class EthernetPort(Protocol):
    def send(self, frame: bytes) -> None: ...

    def receive(self) -> list[bytes]:
        """Every frame that arrived since the last call; never waits."""

    def close(self) -> None: ...


class SocketPort:
    """Frames over a TCP stream, length-prefixed (see the module docs)."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        try:
            self._socket = socket.create_connection((host, port), timeout=timeout)
        except OSError as error:
            raise EthernetError(f"no board's Ethernet at {host}:{port}: {error.strerror or error}") from None
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._socket.setblocking(False)
        self._buffer = bytearray()
        self.closed = False

    def send(self, frame: bytes) -> None:
        if len(frame) > MAX_FRAME:
            raise EthernetError(f"a {len(frame)}-byte frame is longer than {MAX_FRAME}")
        self._socket.setblocking(True)
        try:
            self._socket.sendall(LENGTH.pack(len(frame)) + frame)
        except OSError as error:
            raise EthernetError(f"the board's Ethernet socket failed: {error}") from None
        finally:
            self._socket.setblocking(False)

    def receive(self) -> list[bytes]:
        while not self.closed:
            try:
                data = self._socket.recv(65536)
            except BlockingIOError:
                break
            except OSError as error:
                raise EthernetError(f"the board's Ethernet socket failed: {error}") from None
            if not data:
                self.closed = True
                break
            self._buffer += data
        frames = []
        while len(self._buffer) >= LENGTH.size:
            (length,) = LENGTH.unpack_from(self._buffer)
            if length > MAX_FRAME:
                raise EthernetError(f"the board's Ethernet socket announced a {length}-byte frame")
            if len(self._buffer) < LENGTH.size + length:
                break
            frames.append(bytes(self._buffer[LENGTH.size:LENGTH.size + length]))
            del self._buffer[:LENGTH.size + length]
        return frames

    def close(self) -> None:
        self._socket.close()
        self.closed = True


class RawSocketPort:
    """Frames on a network interface, through a Linux packet socket (see the module docs)."""

    def __init__(self, interface: str) -> None:
        try:
            self._socket = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            self._socket.bind((interface, 0))
        except AttributeError:
            raise EthernetError("raw Ethernet frames need Linux (AF_PACKET)") from None
        except PermissionError:
            raise EthernetError(f"raw frames on {interface} need CAP_NET_RAW (run as root, or "
                                "setcap cap_net_raw+ep on the Python interpreter)") from None
        except OSError as error:
            if error.errno == errno.ENODEV:
                raise EthernetError(f"no network interface {interface!r}") from None
            raise EthernetError(f"{interface}: {error}") from None
        self._socket.setblocking(False)
        self.interface = interface

    def fileno(self) -> int:
        """The packet socket's, for a caller that waits for frames (`selectors`)."""
        return self._socket.fileno()

    def send(self, frame: bytes) -> None:
        self._socket.send(frame)

    def receive(self) -> list[bytes]:
        frames = []
        while True:
            try:
                frame, address = self._socket.recvfrom(MAX_FRAME)
            except BlockingIOError:
                return frames
            if address[2] != socket.PACKET_OUTGOING:   # not our own frames, looped back by the kernel
                frames.append(frame)

    def close(self) -> None:
        self._socket.close()


def open_port(name: str) -> EthernetPort:
    """``tcp:HOST:PORT`` (a simulated board) or a network interface's name."""
    if name.startswith("tcp:"):
        host, _, port = name[4:].rpartition(":")
        if not host or not port.isdigit():
            raise EthernetError(f"{name!r}: a socket port is tcp:HOST:PORT")
        return SocketPort(host, int(port))
    return RawSocketPort(name)

"""The model board (`sim.board_model`) served as a board is reached: its control link's bytes on a TCP socket, its
Ethernet on a network interface, so that a host program in another process opens it as it opens a board.

    python -m sim.model_board_server IFACE [--control HOST:PORT]

prints ``serving socket://HOST:PORT, Ethernet on IFACE`` once it serves; a host opens the board as a device of
its network with ``driver.open_device("board:socket://HOST:PORT@ADDRESS")`` (`driver.backends.board_network`),
pyserial's ``socket://`` URL carrying the control link's bytes as a serial port carries them.

* The control link: each connection is the UART of one host (one at a time; a new connection takes the board
  over, as a host opening the serial port again): its bytes are the link's requests, answered by the model
  board's `ModelSerial` with the bytes the gateware's link would send (SLIP, CRC-32, `abi.link`).
* The Ethernet: the interface (Linux AF_PACKET, CAP_NET_RAW; `driver.ethernet.RawSocketPort`), one end of a
  veth pair say, the model's frames going out on it and the frames arriving on it going into the model's
  receive engine.  Give the interface no IPv4 address: the board is the host on it.

It serves until SIGTERM or SIGINT, then prints ``frames in N out M``.
"""

from __future__ import annotations

import argparse
import selectors
import signal
import socket

from driver.ethernet import RawSocketPort
from model.rnic.link import Side
from model.rnic.pair import IPS, MACS
from sim.board_model import ModelBoard, ModelSerial

TICK_SECONDS = 0.001
"""The longest the server sleeps: the model board's timers (its delayed SACKs) are looked at this often."""


class ModelBoardServer:
    """The model board behind `listener` (the control link) and `ethernet` (see the module docstring)."""

    def __init__(self, listener: socket.socket, ethernet: RawSocketPort) -> None:
        # Its addresses are the host's to write at opening (`driver.backends.board.BoardEnd`); these are placeholders.
        self.board = ModelBoard(MACS[Side.A], IPS[Side.A])
        self.listener, self.ethernet = listener, ethernet
        self.host: socket.socket | None = None
        self.frames_in = self.frames_out = 0
        self.stopped = False

    def serve(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self.listener, selectors.EVENT_READ)
        selector.register(self.ethernet.fileno(), selectors.EVENT_READ)
        while not self.stopped:
            for key, _ in selector.select(TICK_SECONDS):
                if key.fileobj is self.listener:
                    self._take_host(selector)
                elif key.fileobj is self.host:
                    self._serve_host(selector)
            for frame in self.ethernet.receive():
                self.frames_in += 1
                self.board.port.send(frame)
            for frame in self.board.port.receive():
                self.frames_out += 1
                self.ethernet.send(frame)

    def _take_host(self, selector: selectors.BaseSelector) -> None:
        connection, _ = self.listener.accept()
        if self.host is not None:
            selector.unregister(self.host)
            self.host.close()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.host = connection
        self.board.serial = ModelSerial(self.board)   # the UART's framing starts afresh; the board keeps its state
        selector.register(connection, selectors.EVENT_READ)

    def _serve_host(self, selector: selectors.BaseSelector) -> None:
        """The host's bytes to the link, its answers back; the connection closed once the host has gone."""
        assert self.host is not None
        try:
            data = self.host.recv(65536)
        except ConnectionError:
            data = b""
        if data:
            serial = self.board.serial
            serial.write(data)
            answer = serial.read(serial.in_waiting)
            if answer:
                try:
                    self.host.sendall(answer)
                except ConnectionError:
                    data = b""
        if not data:
            selector.unregister(self.host)
            self.host.close()
            self.host = None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("interface", help="the board's Ethernet: a network interface (CAP_NET_RAW)")
    parser.add_argument("--control", default="127.0.0.1:0", metavar="HOST:PORT",
                        help="where the control link listens (default 127.0.0.1, a free port)")
    args = parser.parse_args(argv)
    host, _, port = args.control.rpartition(":")
    if not port.isdigit():
        parser.error(f"--control {args.control!r}: HOST:PORT")
    ethernet = RawSocketPort(args.interface)
    listener = socket.create_server((host or "127.0.0.1", int(port)))
    server = ModelBoardServer(listener, ethernet)

    def stop(*_: object) -> None:
        server.stopped = True
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    address, bound = listener.getsockname()[:2]
    print(f"serving socket://{address}:{bound}, Ethernet on {args.interface}", flush=True)
    try:
        server.serve()
    finally:
        listener.close()
        ethernet.close()
    print(f"frames in {server.frames_in} out {server.frames_out}", flush=True)


if __name__ == "__main__":
    main()

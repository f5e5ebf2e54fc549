"""SCTP over UDP (RFC 6951): each SCTP packet is the payload of one UDP datagram; no privileges needed.

RFC 6951 5.4: the datagram's source port is the local UDP encapsulation
port (the one the transport is bound to, 9899 by default) and its
destination the peer's; 5.5: the peer's encapsulation port is the source
port its datagrams come from.  The kernel computes the UDP checksum (5.4:
the sender SHOULD; a receiver takes a zero one).
"""

from __future__ import annotations

import errno
import socket

from driver.errors import AddressInUse, TransportError
from driver.transports import MAX_DATAGRAM, Endpoint, TransportCounters

SCTP_COMMON_HEADER = 12
"""RFC 4960 3.1: a datagram shorter than the common header carries no SCTP packet."""
SOCKET_BUFFER = 4 << 20
"""Bytes asked of the kernel for each way (it caps them at net.core.rmem_max / wmem_max): a window or two of a
loopback burst, so that the kernel drops fewer datagrams than SCTP's window lets fly."""


class UdpTransport:
    """One UDP socket bound to (ip, port) (see the module docstring)."""

    kind = "udp"

    def __init__(self, ip: str, port: int) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                self._socket.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER)
            self._socket.bind((ip, port))
        except OSError as error:
            self._socket.close()
            if error.errno == errno.EADDRINUSE:
                raise AddressInUse(f"UDP {ip}:{port} is in use by another socket") from None
            raise TransportError(f"cannot bind UDP {ip}:{port}: {error.strerror or error}") from None
        self._socket.setblocking(False)
        self.ip, self.port = self._socket.getsockname()
        self.counters = TransportCounters()

    def fileno(self) -> int:
        return self._socket.fileno()

    def receive(self) -> list[tuple[bytes, Endpoint]]:
        packets = []
        receive = self._socket.recvfrom
        counters = self.counters
        while True:
            try:
                datagram, source = receive(MAX_DATAGRAM)
            except BlockingIOError:
                return packets
            except OSError:   # an ICMP error queued for an earlier send (port unreachable...): nothing to read
                counters.send_failures += 1
                continue
            counters.received += 1
            if len(datagram) < SCTP_COMMON_HEADER:
                counters.dropped_not_sctp += 1
                continue
            packets.append((datagram, source))

    def send(self, packet: bytes, destination: Endpoint) -> None:
        try:
            self._socket.sendto(packet, destination)
        except OSError:   # the kernel's buffer is full, or no route: the datagram is lost, SCTP retransmits
            self.counters.send_failures += 1
            return
        self.counters.sent += 1

    def close(self) -> None:
        self._socket.close()

"""SCTP straight over IPv4 (RFC 4960, IP protocol 132) through a raw socket: needs CAP_NET_RAW.

The kernel writes the IPv4 header of what is sent (no IP_HDRINCL) and hands
up every SCTP packet addressed to this computer with its IPv4 header; the
transport keeps those addressed to its own address (all of them when bound
to 0.0.0.0) and counts the rest.  If the kernel's own SCTP module is loaded,
it sees the same packets and answers those of no socket of its own with an
ABORT (RFC 4960 8.4): unload it (`modprobe -r sctp`) where a device runs on
raw IPv4.
"""

from __future__ import annotations

import socket

from model.net.frames import IP_PROTOCOL_SCTP

from driver.errors import TransportError, TransportNotPermitted
from driver.transports import MAX_DATAGRAM, Endpoint, TransportCounters
from driver.transports.udp import SCTP_COMMON_HEADER


class RawIpTransport:
    """One raw IPv4 socket for protocol 132, bound to `ip` (see the module docstring)."""

    kind = "ip"

    def __init__(self, ip: str) -> None:
        try:
            self._socket = socket.socket(socket.AF_INET, socket.SOCK_RAW, IP_PROTOCOL_SCTP)
        except PermissionError:
            raise TransportNotPermitted("SCTP over raw IPv4 needs CAP_NET_RAW: run as root, or give the interpreter "
                                        "the capability (setcap cap_net_raw+ep), or use udp: (RFC 6951, no "
                                        "privileges)") from None
        try:
            self._socket.bind((ip, 0))
        except OSError as error:
            self._socket.close()
            raise TransportError(f"cannot bind raw IPv4 to {ip}: {error.strerror or error}") from None
        self._socket.setblocking(False)
        self.ip, self.port = ip, 0
        self._own = None if ip == "0.0.0.0" else socket.inet_aton(ip)
        self.counters = TransportCounters()

    def fileno(self) -> int:
        return self._socket.fileno()

    def receive(self) -> list[tuple[bytes, Endpoint]]:
        packets = []
        counters = self.counters
        while True:
            try:
                datagram, source = self._socket.recvfrom(MAX_DATAGRAM)
            except BlockingIOError:
                return packets
            except OSError:
                counters.send_failures += 1
                continue
            counters.received += 1
            header = (datagram[0] & 0xF) * 4 if datagram else 0   # RFC 791 3.1: IHL in 32-bit words
            if len(datagram) < header + SCTP_COMMON_HEADER or datagram[0] >> 4 != 4 or datagram[9] != IP_PROTOCOL_SCTP:
                counters.dropped_not_sctp += 1
                continue
            if self._own is not None and datagram[16:20] != self._own:
                counters.dropped_not_for_us += 1
                continue
            packets.append((datagram[header:], (source[0], 0)))

    def send(self, packet: bytes, destination: Endpoint) -> None:
        try:
            self._socket.sendto(packet, (destination[0], 0))
        except OSError:
            self.counters.send_failures += 1
            return
        self.counters.sent += 1

    def close(self) -> None:
        self._socket.close()

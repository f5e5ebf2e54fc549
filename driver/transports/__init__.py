"""Real transports of a device (`driver.open_device`): where its SCTP packets go out and come in.

A transport moves whole SCTP packets (common header first) to and from
*endpoints*, (IPv4 address, port) pairs; the device puts them in and takes
them out of the frames its `SoftRnic` speaks (`driver.backends.network`).
`receive()` never waits; `fileno()` is what the device's loop watches.

    udp:[HOST][:PORT]   SCTP over UDP (RFC 6951), port 9899 by default: the SCTP packet is the
                        UDP payload; no privileges.  The endpoint's port is the UDP port.
    ip:ADDRESS[:PORT]   SCTP straight over IPv4, protocol 132 (RFC 4960), through a raw socket:
                        needs CAP_NET_RAW.  The endpoint's port is 0 (IPv4 has none); PORT is
                        the device's SCTP port, 9899 by default.

`open_transport(spec)` opens one; a spec it does not know, a name that does
not resolve, a port in use or a missing privilege is a `TransportError`.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Protocol

from model.net.frames import SCTP_UDP_PORT

from driver.errors import AddressNotResolved, TransportError

__all__ = ["Endpoint", "Transport", "TransportCounters", "open_transport", "parse_port", "parse_spec", "resolve_ipv4", "SCTP_UDP_PORT"]

Endpoint = tuple[str, int]
"""(IPv4 address, port): a UDP endpoint, or an IPv4 host with port 0."""
MAX_DATAGRAM = 65535


@dataclass
class TransportCounters:
    """What a transport saw below the device: datagrams in and out, and those it dropped itself."""

    received: int = 0
    sent: int = 0
    dropped_not_sctp: int = 0
    """Shorter than an SCTP common header (RFC 4960 3), or not IPv4 protocol 132 (raw IP)."""
    dropped_not_for_us: int = 0
    """Raw IP: addressed to another of this computer's addresses than the device's."""
    send_failures: int = 0
    """Datagrams the kernel refused to send (its buffer full, no route): lost, as on a wire; SCTP retransmits."""


class Transport(Protocol):
    kind: str
    """"udp" or "ip"."""
    ip: str
    """The IPv4 address the transport is bound to ("0.0.0.0": every address of this computer)."""
    port: int
    """The UDP port it is bound to (udp), 0 (ip)."""
    counters: TransportCounters

    def fileno(self) -> int: ...

    def receive(self) -> list[tuple[bytes, Endpoint]]:
        """Every SCTP packet that arrived since the last call, with the endpoint it came from; never waits."""

    def send(self, packet: bytes, destination: Endpoint) -> None: ...

    def close(self) -> None: ...


def resolve_ipv4(host: str) -> str:
    """`host` (a name or a dotted quad) as an IPv4 address, as rdma_cm's resolve_addr does (getaddrinfo)."""
    try:
        infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_DGRAM)
    except (socket.gaierror, UnicodeError) as error:
        raise AddressNotResolved(f"{host!r} does not resolve to an IPv4 address: {error}") from None
    return infos[0][4][0]


def parse_spec(spec: str) -> tuple[str, str, int]:
    """(kind, host, port) of a spec: "udp:[HOST][:PORT]" or "ip:ADDRESS[:PORT]"; HOST empty means every address
    (0.0.0.0), PORT 9899 by default (the device's SCTP port; over UDP its UDP port too, and 0 has the kernel
    pick a free one)."""
    if not isinstance(spec, str):
        raise TransportError(f"a transport spec is a str such as 'udp::9899', not {type(spec).__name__}")
    kind, colon, rest = spec.partition(":")
    if not colon or kind not in ("udp", "ip"):
        raise TransportError(f"{spec!r}: a transport is udp:[HOST][:PORT] or ip:ADDRESS[:PORT]")
    host, _, port_text = rest.rpartition(":") if ":" in rest else (rest, "", "")
    if port_text and not port_text.isdigit():
        raise TransportError(f"{spec!r}: the port {port_text!r} is not a number")
    port = int(port_text) if port_text else SCTP_UDP_PORT
    if not (0 if kind == "udp" else 1) <= port <= 0xFFFF:   # UDP port 0: one the kernel picks, free
        raise TransportError(f"{spec!r}: port {port} is not within {0 if kind == 'udp' else 1}..65535")
    if kind == "ip" and not host:
        raise TransportError(f"{spec!r}: raw IPv4 needs the device's address, ip:ADDRESS")
    return kind, host, port


def parse_port(spec: str) -> int:
    """The device's SCTP port in `spec`."""
    return parse_spec(spec)[2]


def open_transport(spec: str) -> Transport:
    """The transport `spec` names (see the module docstring and `parse_spec`)."""
    kind, host, port = parse_spec(spec)
    ip = resolve_ipv4(host) if host else "0.0.0.0"
    if kind == "udp":
        from driver.transports.udp import UdpTransport

        return UdpTransport(ip, port)
    from driver.transports.ip import RawIpTransport

    return RawIpTransport(ip)

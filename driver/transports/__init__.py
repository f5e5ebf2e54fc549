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
    eth:IFACE:ADDRESS[:PORT]
                        SCTP over IPv4 in raw Ethernet frames on IFACE (Linux AF_PACKET), the
                        device an IPv4 host of its own at ADDRESS, answering ARP: needs
                        CAP_NET_RAW.  Endpoints as over raw IPv4.

`open_transport(spec)` opens one; a spec it does not know, a name that does
not resolve, a port in use or a missing privilege is a `TransportError`.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from model.net.frames import SCTP_UDP_PORT

from driver.errors import AddressNotResolved, TransportError

__all__ = ["Endpoint", "Transport", "TransportCounters", "TransportSpec", "open_transport", "parse_port", "parse_spec",
           "resolve_ipv4", "SCTP_UDP_PORT"]

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
    """"udp", "ip" or "eth"."""
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


class TransportSpec(NamedTuple):
    kind: str
    """"udp", "ip" or "eth"."""
    host: str
    """The device's address (a name or a dotted quad; "" for every address, udp only)."""
    port: int
    """The device's SCTP port (over UDP its UDP port too; 0 there: a free one the kernel picks)."""
    interface: str = ""
    """eth: the network interface."""


def parse_spec(spec: str) -> TransportSpec:
    """"udp:[HOST][:PORT]", "ip:ADDRESS[:PORT]" or "eth:IFACE:ADDRESS[:PORT]"; PORT 9899 by default."""
    if not isinstance(spec, str):
        raise TransportError(f"a transport spec is a str such as 'udp::9899', not {type(spec).__name__}")
    kind, colon, rest = spec.partition(":")
    if not colon or kind not in ("udp", "ip", "eth"):
        raise TransportError(f"{spec!r}: a transport is udp:[HOST][:PORT], ip:ADDRESS[:PORT] or "
                             "eth:IFACE:ADDRESS[:PORT]")
    interface = ""
    if kind == "eth":
        interface, _, rest = rest.partition(":")
        if not interface or not rest:
            raise TransportError(f"{spec!r}: raw Ethernet needs the interface and the device's own address, "
                                 "eth:IFACE:ADDRESS[:PORT]")
    host, _, port_text = rest.rpartition(":") if ":" in rest else (rest, "", "")
    if port_text and not port_text.isdigit():
        raise TransportError(f"{spec!r}: the port {port_text!r} is not a number")
    port = int(port_text) if port_text else SCTP_UDP_PORT
    if not (0 if kind == "udp" else 1) <= port <= 0xFFFF:   # UDP port 0: one the kernel picks, free
        raise TransportError(f"{spec!r}: port {port} is not within {0 if kind == 'udp' else 1}..65535")
    if kind != "udp" and not host:
        raise TransportError(f"{spec!r}: the device's own IPv4 address is needed, {kind}:...ADDRESS")
    return TransportSpec(kind, host, port, interface)


def parse_port(spec: str) -> int:
    """The device's SCTP port in `spec`."""
    return parse_spec(spec).port


def open_transport(spec: str) -> Transport:
    """The transport `spec` names (see the module docstring and `parse_spec`)."""
    kind, host, port, interface = parse_spec(spec)
    ip = resolve_ipv4(host) if host else "0.0.0.0"
    if kind == "udp":
        from driver.transports.udp import UdpTransport

        return UdpTransport(ip, port)
    if kind == "ip":
        from driver.transports.ip import RawIpTransport

        return RawIpTransport(ip)
    from driver.transports.ethernet import EthernetTransport

    return EthernetTransport(interface, ip)

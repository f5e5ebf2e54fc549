"""The board as one device of its own on its network: `driver.open_device("board:CONTROL@ADDRESS[:PORT]")`.

    device = open_device("board:/dev/ttyUSB1@192.168.7.2")

The device is the board's RNIC core, as device 0 of the `board` backend
(`driver.backends.board`): its receive and transmit engines are the data
plane, this computer runs the control plane over the control link, and the
host memory is the board's.  But the board's Ethernet is cabled to a
network, not to this computer: the device's peer is any RNIC there (an
`rnic perf --server` on `eth:IFACE:ADDRESS` in another process or on another
computer, another board), and this process needs nothing but the control
link.

The spec: CONTROL is the control link, a serial device (the ECPIX-5's
FT2232H channel B, `/dev/ttyUSB1`) or a pyserial URL (`socket://HOST:PORT`:
the model board served by `sim.model_board_server`); ADDRESS the board's IPv4
address on its network; PORT its SCTP port, 9899 by default.

Addresses: the board's MAC is a locally administered one made of its IPv4
address, 02:00 then the address's four bytes (`board_mac`); the backend writes
both to the engines' configuration at opening (`BoardEnd`).  SCTP runs
straight over IPv4 (RFC 4960), as `ip:` and `eth:` devices do.

ARP (RFC 826, `driver.arp`): the receive engine passes up every frame it
does not take, ARP's among them (not IPv4); the host answers requests for the
board's address out of the board's MAC and learns its neighbours.  A connect
waits for the peer's MAC: a request once an `ARP_RETRY` seconds, `ARP_TRIES`
of them, and without an answer the connection is UNREACHABLE (the device
reports its association as failed in COOKIE-WAIT, before any INIT went out).
A peer that connects first is answered at the MAC its frames came from.

Secrets (RFC 4960 5.1.3, 5.3.1): the host's verification tags, initial TSNs,
cookie key and STag keys come from the system's generator
(`secrets.SystemRandom`), as on every real transport.

Time is the wall clock; each wait services the board (`BoardBackend`): records
in, ARP answered, the host's timers, its table writes, requests and frames out.
"""

from __future__ import annotations

import ipaddress
import secrets
import socket
from dataclasses import dataclass
from typing import Any

from model.net.frames import SCTP_UDP_PORT
from model.rnic.events import Failed, RnicEvent
from model.rnic.host import RnicConfig
from model.sctp.state import AssociationState

from driver.arp import ARP_RETRY, ETHERNET_HEADER, ETHERTYPE_ARP, Neighbours, ethertype
from driver.backends.board import DEFAULT_BAUD, BoardBackend, BoardBuffers
from driver.backends.soft import HostDevice
from driver.errors import TransportError
from driver.transports import resolve_ipv4

__all__ = ["BoardSpec", "parse_board_spec", "board_mac", "BoardNetworkDevice", "BoardNetworkFabric", "ARP_TRIES"]

ARP_TRIES = 3
"""ARP requests a connect sends for its peer's MAC before it gives up."""


@dataclass(frozen=True)
class BoardSpec:
    control: str
    """The control link: a serial device or a pyserial URL."""
    host: str
    """The board's IPv4 address (a name or a dotted quad)."""
    port: int
    """The board's SCTP port."""


def parse_board_spec(spec: str) -> BoardSpec:
    """"board:CONTROL@ADDRESS[:PORT]" (see the module docstring); `TransportError` for any other shape."""
    shape = "board:CONTROL@ADDRESS[:PORT] (CONTROL a serial device or a pyserial URL such as socket://HOST:PORT)"
    kind, colon, rest = spec.partition(":")
    if kind != "board" or not colon:
        raise TransportError(f"{spec!r}: a board device is {shape}")
    control, at, address = rest.rpartition("@")
    if not at or not control:
        raise TransportError(f"{spec!r}: the control link is missing: {shape}")
    host, colon, port_text = address.partition(":")
    if not host:
        raise TransportError(f"{spec!r}: the board's own IPv4 address on its network is needed: {shape}")
    if colon and not port_text.isdigit():
        raise TransportError(f"{spec!r}: the port {port_text!r} is not a number")
    port = int(port_text) if colon else SCTP_UDP_PORT
    if not 1 <= port <= 0xFFFF:
        raise TransportError(f"{spec!r}: port {port} is not within 1..65535")
    return BoardSpec(control, host, port)


def board_mac(ip: str) -> bytes:
    """The board's MAC on its network: locally administered (IEEE 802: the second bit of the first byte), 02:00
    then its IPv4 address."""
    return b"\x02\x00" + socket.inet_aton(ip)


@dataclass
class _Resolving:
    """A connect waiting for its peer's MAC."""
    ip: str
    port: int
    target: bytes
    asked: int = 0
    last: float = 0.0


class BoardNetworkDevice(BoardBuffers, HostDevice):
    """The fabric's one device: the board (see the module docstring)."""

    resolves_names = True

    def __init__(self, fabric: BoardNetworkFabric, host: Any, name: str, ip: str, port: int) -> None:
        super().__init__(fabric, host, name, ip, port)
        self.take_board_memory(fabric.board.memory_map)
        self._arp = fabric.arp
        self._resolving: _Resolving | None = None
        self._events: list[RnicEvent] = []

    def connect(self, ip: str, port: int) -> bool:
        self._resolving = _Resolving(ip, port, socket.inet_aton(ip))   # the next service asks (`resolve`)
        return True

    @property
    def association_opening(self) -> bool:
        return self._resolving is not None or super().association_opening

    def resolve(self, now: float) -> list[bytes]:
        """The waiting connect: made once its peer's MAC is known; else the ARP request due, if any (as frames to
        send); a failure after `ARP_TRIES` requests unanswered."""
        waiting = self._resolving
        if waiting is None:
            return []
        mac = self._arp.table.get(waiting.target)
        if mac is not None:
            self._resolving = None
            self._host.connect(now, mac, waiting.ip, waiting.port)
            return []
        if now - waiting.last < ARP_RETRY and waiting.asked:
            return []
        if waiting.asked >= ARP_TRIES:
            self._resolving = None
            self._events.append(Failed(f"no ARP answer (RFC 826) for {waiting.ip} after {ARP_TRIES} requests",
                                       AssociationState.COOKIE_WAIT))
            return []
        request = self._arp.request(waiting.target, now)
        if request is None:
            return []
        waiting.asked, waiting.last = waiting.asked + 1, now
        return [request]

    def events(self) -> list[RnicEvent]:
        self._events += self._host.next_events()
        events, self._events = self._events, []
        return events


class BoardNetworkFabric(BoardBackend):
    """The board as the one device of this fabric (see the module docstring): `control`, the control link (a
    serial device, a pyserial URL or an opened `driver.link.SerialLink`); `ip`, `port`: the board's address and
    SCTP port on its network; `name`: the device's; `baud`, `latency`, `time_scale`: the board's
    (`BoardBackend`); `options`: `RnicConfig` fields."""

    def __init__(self, control: Any, ip: str, port: int, name: str, *, baud: float = DEFAULT_BAUD,
                 latency: float = 0.05, time_scale: float = 1.0, **options: object) -> None:
        mac = board_mac(ip)
        self.arp = Neighbours(mac, ip)
        self._arp_out: list[bytes] = []
        self.open_board(control, mac, ip, baud=baud, latency=latency, time_scale=time_scale,
                        take_frame=self._take_arp)
        try:
            config = RnicConfig(mac, ip, port, **self.board_options(options))  # type: ignore[arg-type]
            self.host = self.board_host(config, secrets.SystemRandom())
            self.device = BoardNetworkDevice(self, self.host, name, ip, port)
        except BaseException:
            super().close()
            raise
        self.devices = (self.device,)

    def _take_arp(self, frame: bytes) -> bool:
        if ethertype(frame) != ETHERTYPE_ARP:
            return False
        _, reply = self.arp.take(frame[ETHERNET_HEADER:])
        if reply is not None:
            self._arp_out.append(reply)
        return True

    def service(self) -> None:
        """Records in (ARP taken on the way), the waiting connect, the host's timers, its work out."""
        host, board = self.host, self.board
        if self.before_service is not None:
            self.before_service()
        now = self.now()
        board.poll(host, now)
        frames, self._arp_out = self._arp_out, []
        frames += self.device.resolve(now)
        due = host.next_timeout()
        if due is not None and due <= now:
            host.handle_timeout(now)
        board.run_commands(host, frames + host.data_to_send(now))
        if self.on_change is not None:
            self.on_change()


def open_board_device(spec: str, **options: object) -> BoardNetworkFabric:
    """The fabric of `spec` (`parse_board_spec`), its link opened (`driver.link.open_serial_link`)."""
    parsed = parse_board_spec(spec)
    ip = resolve_ipv4(parsed.host)
    address = ipaddress.IPv4Address(ip)
    if address.is_unspecified or address.is_multicast or address == ipaddress.IPv4Address("255.255.255.255"):
        raise TransportError(f"{spec!r}: {ip} cannot be the board's own address (a host's unicast address is "
                             "needed, RFC 1122 3.2.1.3)")
    return BoardNetworkFabric(parsed.control, ip, parsed.port, f"board:{parsed.control}@{ip}:{parsed.port}",
                              **options)

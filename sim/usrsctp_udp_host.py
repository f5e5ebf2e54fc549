"""A software RNIC host whose SCTP is usrsctp doing its own UDP encapsulation (RFC 6951): the model's DDP sessions
and RDMAP endpoints over `sim.usrsctp_udp`, so a driver program runs with usrsctp on a real network.

`sim.usrsctp_host` puts usrsctp under a `SoftRnic` through AF_CONN: the host
frames every packet and sees every one. Here usrsctp sends and receives its
datagrams itself, on its own UDP socket and threads, so the host sees none:

* `UsrsctpUdpSctp` (a `model.rnic.host.Sctp`) makes associations whose socket
  is bound to the host's address and SCTP port (which must be usrsctp's UDP
  port: one number for both, as for a ``udp:`` device) and connects to the
  peer's SCTP port at UDP port the same number (RFC 6951 5.5 lets the
  initiator choose; a ``udp:`` device answers on its one port). The host's
  `Sctp` calls pass an association its ports only, so the peer's IPv4 address
  is the `UsrsctpUdpSctp`'s (one per host, as the host has one association);
* an association's `data_to_send` has no packets: only the messages, events
  and acknowledgements usrsctp has for it are moved, on every call, and it
  asks to be called every `STEP_SECONDS` while open (`sim.usrsctp_host`);
* acknowledgements (RFC 5043 6.6: the DDP sessions count them per stream)
  cannot be read off packets here; usrsctp reports the bytes it still holds
  (SCTP_GET_SNDBUF_USE), at least the user data its peer's Cumulative TSN Ack
  has not passed, and schedules DATA first come, first served (RFC 8260
  3.1), so TSNs follow the order messages were given: the messages given
  whose bytes, in that order, fit below (given - held) are acknowledged. A
  message may be reported some polls late, never early;
* passive open is not offered: a host gives its listeners only the packets
  it receives (RFC 4960 5.1's stateless answer to an INIT), and usrsctp
  receives its own. `listener` raises `UsrsctpUdpPassiveOpen`.

`UsrsctpUdpTransport` is what such a host's `driver.backends.network.NetworkFabric`
is given as its transport: the UDP endpoint usrsctp holds, a descriptor that
never becomes readable (the fabric's timer, every `STEP_SECONDS`, does the
polling) and no packets either way.
"""

from __future__ import annotations

import errno as errno_codes
import os
import random
from collections import Counter, deque
from collections.abc import Callable
from typing import NoReturn

from driver.transports import Endpoint, TransportCounters
from model.ddp.memory import SparseMemory
from model.rnic.host import RnicConfig, SoftRnic
from model.sctp.config import AssociationConfig
from model.sctp.events import DataAcknowledged
from model.sctp.state import AssociationState
from sim.usrsctp import UsrsctpError
from sim.usrsctp_host import SEND_BUFFER_FULL, UsrsctpAssociation, abort_and_close, configure
from sim.usrsctp_udp import UdpSocket, UdpStack

__all__ = [
    "UsrsctpUdpAssociation",
    "UsrsctpUdpPassiveOpen",
    "UsrsctpUdpSctp",
    "UsrsctpUdpTransport",
    "usrsctp_udp_host",
]


class UsrsctpUdpPassiveOpen(RuntimeError):
    """A host over usrsctp's own UDP encapsulation was asked to listen (see the module docstring)."""


class UsrsctpUdpSctp:
    """usrsctp's SCTP over its UDP socket for one host: sockets on `ip`, associations with `peer_ip`."""

    def __init__(self, stack: UdpStack, ip: str, peer_ip: str) -> None:
        self.stack, self.ip, self.peer_ip = stack, ip, peer_ip
        self._sockets: list[UdpSocket] = []
        self.now = 0.0

    def association(self, config: AssociationConfig) -> UsrsctpUdpAssociation:
        if config.local_port != self.stack.udp_port:
            raise ValueError(f"SCTP port {config.local_port} is not usrsctp's UDP port {self.stack.udp_port}: a "
                             "udp: peer answers on one port for both")
        return UsrsctpUdpAssociation(self, config)

    def listener(self, config: AssociationConfig) -> NoReturn:
        raise UsrsctpUdpPassiveOpen("a host over usrsctp's own UDP encapsulation only connects: it never sees the "
                                    "packets a listener answers (sim.usrsctp_udp_host)")

    def advance(self, now: float) -> None:
        """usrsctp keeps the real time itself; this only keeps the host's `now` for `next_timeout`."""
        self.now = max(self.now, now)

    def socket(self, config: AssociationConfig) -> UdpSocket:
        """A socket as a DDP association wants it (RFC 5043 5.1, 9, 10), bound to the host's port, its DATA in
        the order given (`UdpSocket.set_first_come_scheduling`)."""
        sock = self.stack.socket()
        self._sockets.append(sock)
        configure(sock, config)
        sock.set_first_come_scheduling()
        sock.bind(self.ip, config.local_port)
        return sock

    def close(self) -> None:
        """ABORT what is still up and close the sockets."""
        abort_and_close(self._sockets)


class UsrsctpUdpAssociation(UsrsctpAssociation):
    """One usrsctp association over its UDP socket behind `model.sctp.association.Association`'s calls."""

    def __init__(self, sctp: UsrsctpUdpSctp, config: AssociationConfig) -> None:
        super().__init__(sctp, config)  # type: ignore[arg-type]
        self._given: deque[tuple[int, int]] = deque()     # (stream, bytes) of each message usrsctp took, in order
        self._given_bytes = 0
        self._acknowledged_bytes = 0

    def connect(self, now: float) -> None:
        """Active open (RFC 4960 5.1): the INIT leaves from usrsctp's UDP port to the peer's SCTP port, as its
        UDP port too (RFC 6951 5.5)."""
        sctp: UsrsctpUdpSctp = self._sctp  # type: ignore[assignment]
        sctp.advance(now)
        sock = sctp.socket(self.config)
        sock.set_remote_udp_port(self.config.peer_port)
        sock.connect(sctp.peer_ip, self.config.peer_port)
        self._sock = sock
        self.state = AssociationState.COOKIE_WAIT

    def receive(self, packet: bytes, now: float) -> None:
        raise UsrsctpError(errno_codes.EPROTO, "usrsctp takes its own datagrams: the host has none to give it")

    def data_to_send(self, now: float) -> list[bytes]:
        self._sctp.advance(now)
        self._offer()
        self._read()
        self._poll_acknowledgements()
        return []

    def handle_timeout(self, now: float) -> None:
        super().handle_timeout(now)
        self._poll_acknowledgements()

    def _offer(self) -> None:
        while self._held and self._sock is not None and self.state is AssociationState.ESTABLISHED:
            stream_id, ppid, payload = self._held[0]
            try:
                self._sock.send(payload, ppid, stream_id, unordered=True)   # RFC 5043 9, 10
            except UsrsctpError as error:
                if error.errno in SEND_BUFFER_FULL:
                    return
                raise
            self._held.popleft()
            self._given.append((stream_id, len(payload)))
            self._given_bytes += len(payload)

    def _poll_acknowledgements(self) -> None:
        """RFC 5043 6.6's per-stream counts from what usrsctp still holds (see the module docstring)."""
        if not self._given or self._sock is None or self.is_closed:
            return
        try:
            held = self._sock.queued_bytes()
        except UsrsctpError:
            return          # no association any more
        passed = self._given_bytes - held
        acked: Counter[int] = Counter()
        while self._given and self._acknowledged_bytes + self._given[0][1] <= passed:
            stream_id, length = self._given.popleft()
            self._acknowledged_bytes += length
            self._queued_bytes -= length
            acked[stream_id] += 1
        for stream_id in sorted(acked):
            self._events.append(DataAcknowledged(stream_id, acked[stream_id]))


class UsrsctpUdpTransport:
    """The transport a `NetworkFabric` gets for a host over usrsctp's UDP socket (see the module docstring)."""

    kind = "udp"

    def __init__(self, stack: UdpStack, ip: str) -> None:
        self.ip, self.port = ip, stack.udp_port
        self.counters = TransportCounters()
        self._never_readable, self._unused = os.pipe()

    def fileno(self) -> int:
        return self._never_readable

    def receive(self) -> list[tuple[bytes, Endpoint]]:
        return []

    def send(self, packet: bytes, destination: Endpoint) -> None:
        raise UsrsctpError(errno_codes.EPROTO, f"a {len(packet)}-byte packet for {destination} framed by the host: "
                                               "usrsctp sends its own")

    def close(self) -> None:
        for descriptor in (self._never_readable, self._unused):
            os.close(descriptor)


def usrsctp_udp_host(stack: UdpStack, peer_ip: str) -> Callable[[RnicConfig, random.Random], SoftRnic]:
    """The `host` of a `NetworkFabric` on a `UsrsctpUdpTransport`: a `SoftRnic` over usrsctp's UDP socket, its
    association with `peer_ip` (every session request waits for the driver, as a fabric's hosts do)."""
    def host(config: RnicConfig, rng: random.Random) -> SoftRnic:
        return SoftRnic(config, SparseMemory(), rng, session_policy=None,
                        sctp=UsrsctpUdpSctp(stack, str(config.ip), peer_ip))

    return host

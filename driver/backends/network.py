"""A device of its own on a real transport: one software RNIC in this process, its SCTP packets on a socket.

`driver.open_device("udp::9899")` builds one `NetworkFabric` holding one
`NetworkDevice`: a `SoftRnic` (the model's RNIC, sans-I/O) whose packets go
out and come in through a `driver.transports` transport (SCTP over UDP,
RFC 6951, over raw IPv4, or over IPv4 in raw Ethernet frames).  Its peer is any RNIC that speaks SCTP with
DDP on the network: another process, another machine.

Frames: the `SoftRnic` speaks Ethernet frames, or the SCTP packets inside
them (`receive_packet`, `packets_to_send`), which is what a device hands it
here: no frame is built around a packet that the host would only strip
again (a host that handles frames its own way gets them, built here and
never leaving the process).  A packet that arrives from endpoint (ip, port)
comes from the MAC that *is* that endpoint, its four address bytes then its
two port bytes (`endpoint_mac`), and a packet the host sends goes to the
endpoint its destination MAC names.  So the host's own filter (one association at a
time, with one peer: `model.rnic.host`) tells two processes on one IPv4
address apart by their UDP ports.  RFC 6951 5.5 has the peer's UDP
encapsulation port learnt from its packets; the choice here: it is fixed
for the association by its first packet, and a packet of the same IPv4
address from another port is misaddressed (counted, dropped).

Ports: over UDP a device's SCTP port is its UDP port (the one number in
`udp:HOST:PORT`), so a peer's address (host, port) names both; a
`connect((host, port))` sends to UDP port `port`, SCTP port `port`.

Time and scheduling: the monotonic clock (`time.monotonic`, asyncio's own).
The device works on whatever asyncio loop the caller's coroutines run on:
at its first wait or post inside a loop it watches its socket there
(`add_reader`); each arrival, post or timer of the host is one *service*:
the packets in, the timers due fired, the host's packets out, its events
routed to the driver's objects, the waits whose predicates hold woken, and
the next timer set (`loop.call_at`).  A wait that cannot end waits for its
timeout: on a network, something may yet arrive.

Secrets (RFC 4960 5.1.3, 5.3.1; RFC 4086; RFC 5042 5): the host's
verification tags, initial TSNs, the State Cookie's HMAC key, heartbeat
nonces and STag keys come from `secrets.SystemRandom` (the operating
system's generator), never from a seed: the simulated backends keep theirs.

The device's socket is closed once the device is closed and its association
has ended (or it had none).
"""

from __future__ import annotations

import asyncio
import ipaddress
import random
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from model.ddp.memory import SparseMemory
from model.net.frames import build_frame
from model.rnic.events import Connected, RnicEvent
from model.rnic.host import RnicConfig, SoftRnic, takes_packets

from driver.backends.base import FabricBackend
from driver.backends.soft import DEFAULT_RESOURCES, HostDevice
from driver.errors import WaitTimeout
from driver.transports import Endpoint, Transport

T = TypeVar("T")

ETHERNET_HEADER = 14
UDP_HEADER = 8
NETWORK_BUFFER = 1 << 20
"""A device's receive window (a_rwnd) and send buffer on a real transport unless told otherwise: RFC 4960 leaves
them to the implementation (6.2 asks only that a_rwnd be at least 1500). The simulated hosts' 64 KiB keeps
64 KiB in flight, half a gigabit link's bandwidth-delay product at a 1 ms round trip; with 1 MiB, `rnic perf`'s
1 MiB RDMA Writes between two processes on loopback UDP went from 17.6-19.5 to 21.2-25.5 MB/s (docs/results.md,
the software RNIC's fifth round)."""
SENDERS_KEPT = 64
"""Endpoints whose names in the host's terms (MAC, IPv4 address) a device keeps; past it, it starts over."""


def endpoint_mac(endpoint: Endpoint) -> bytes:
    """The MAC that names `endpoint` inside the device's frames: its IPv4 address, then its port (see the module
    docstring)."""
    return socket.inet_aton(endpoint[0]) + endpoint[1].to_bytes(2, "big")


def mac_endpoint(mac: bytes) -> Endpoint:
    return socket.inet_ntoa(mac[:4]), int.from_bytes(mac[4:6], "big")


def sctp_packet(frame: bytes, udp: bool) -> bytes:
    """The SCTP packet inside one of the host's frames: past the Ethernet header, the IPv4 header (its IHL, RFC 791
    3.1) and, over UDP, the UDP header, up to the IPv4 Total Length."""
    ip_header = (frame[ETHERNET_HEADER] & 0xF) * 4
    total = int.from_bytes(frame[ETHERNET_HEADER + 2:ETHERNET_HEADER + 4], "big")
    return frame[ETHERNET_HEADER + ip_header + (UDP_HEADER if udp else 0):ETHERNET_HEADER + total]


@dataclass(frozen=True)
class NetworkStatistics:
    """What a device on a real transport received, sent and dropped (`Device.statistics()`)."""

    datagrams_received: int
    datagrams_sent: int
    dropped_not_sctp: int
    """Too short for an SCTP common header, or no SCTP packet (the transport's count) or none the host could
    decode (the host's)."""
    dropped_not_for_us: int
    """Addressed to another address of this computer (raw IPv4), or from an endpoint other than the peer of the
    device's association (the host's filter)."""
    dropped_bad_checksum: int
    """SCTP CRC32c failures (RFC 4960 6.8)."""
    dropped_by_association: int
    """Packets the association itself discarded: a wrong verification tag (RFC 4960 8.5), an unknown chunk."""
    send_failures: int
    """Datagrams the kernel would not send (its buffer full, no route), or errors it reported for earlier ones."""
    peer: Endpoint | None = None
    """The endpoint of the last association's peer, as its first packet (or our INIT's destination) fixed it:
    over UDP, its address and UDP encapsulation port (RFC 6951 5.5); None before any association came up."""


@dataclass
class _Waiter:
    predicate: Callable[[], bool]
    future: asyncio.Future
    deadline: float | None
    timeout: float | None


class NetworkDevice(HostDevice):
    """The fabric's one device (see the module docstring)."""

    resolves_names = True

    def __init__(self, fabric: NetworkFabric, host: SoftRnic, transport: Transport, port: int) -> None:
        interface = getattr(transport, "interface", None)
        where = f"{interface}:{transport.ip}" if interface else transport.ip
        super().__init__(fabric, host, f"{transport.kind}:{where}:{port}", transport.ip, port)
        self._network = fabric
        self._transport = transport
        self._events: list[RnicEvent] = []
        self._peer: Endpoint | None = None

    def connect(self, ip: str, port: int) -> bool:
        # RFC 6951: over UDP the peer's encapsulation port is the port it was asked at (its SCTP port, here)
        endpoint = (ip, port if self._transport.kind == "udp" else 0)
        self._host.connect(self._fabric.now(), endpoint_mac(endpoint), ip, port)
        self._fabric.kick()
        return True

    def listen(self, port: int) -> None:
        super().listen(port)
        self._fabric.kick()   # inside a loop: the socket is watched from now, whatever the caller awaits next

    def close(self) -> None:
        super().close()
        self._network.release_when_ended()

    def events(self) -> list[RnicEvent]:
        self._events += self._host.next_events()
        events, self._events = self._events, []
        for event in events:
            if isinstance(event, Connected):
                self._peer = mac_endpoint(event.peer_mac)
        return events

    def statistics(self) -> NetworkStatistics:
        counters, host = self._transport.counters, self._host.statistics
        association = host.association
        return NetworkStatistics(
            datagrams_received=counters.received, datagrams_sent=counters.sent,
            dropped_not_sctp=counters.dropped_not_sctp + host.dropped_malformed,
            dropped_not_for_us=counters.dropped_not_for_us + host.dropped_misaddressed,
            dropped_bad_checksum=host.dropped_bad_checksum,
            dropped_by_association=association.packets_discarded if association is not None else 0,
            send_failures=counters.send_failures, peer=self._peer)


class NetworkFabric(FabricBackend):
    """One device on `transport` (see the module docstring); `port`: its SCTP port; `host`: makes the device's
    host from its `RnicConfig` and random generator instead of a `SoftRnic` over the model's SCTP (a software
    host over another SCTP stack: `sim.usrsctp_host.usrsctp_host`); `options`: `RnicConfig` fields (`path_mtu`,
    `rto_initial`...)."""

    def __init__(self, transport: Transport, port: int,
                 host: Callable[[RnicConfig, random.Random], SoftRnic] | None = None, **options: object) -> None:
        options.setdefault("resources", DEFAULT_RESOURCES)
        options.setdefault("receive_buffer", NETWORK_BUFFER)
        options.setdefault("send_buffer", NETWORK_BUFFER)
        self.transport = transport
        self._udp = transport.kind == "udp"
        config = RnicConfig(endpoint_mac((transport.ip, transport.port)), transport.ip, port, udp=self._udp,
                            **options)  # type: ignore[arg-type]
        self._own_mac, self._own_ip = config.mac, transport.ip
        rng = secrets.SystemRandom()
        self.host = (host(config, rng) if host is not None
                     else SoftRnic(config, SparseMemory(), rng, session_policy=None))
        # A host with the SoftRnic's own frame surface takes and gives SCTP packets as they come off and go on
        # the socket (`SoftRnic.receive_packet`, `packets_to_send`), which spares building and parsing a frame
        # around each; a host that handles frames its own way gets frames.
        self._packets = takes_packets(self.host)
        self._senders: dict[Endpoint, tuple[bytes, ipaddress.IPv4Address]] = {}
        self._destinations: dict[bytes, Endpoint] = {}
        self.device = NetworkDevice(self, self.host, transport, port)
        self.devices = (self.device,)
        self.closed = False
        self._release_when_ended = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due: float | None = None
        self._soon = False
        self._waiters: list[_Waiter] = []
        self._attach()

    def now(self) -> float:
        return time.monotonic()

    def kick(self) -> None:
        loop = self._attach()
        if loop is not None and not self._soon:
            self._soon = True
            loop.call_soon(self._service_soon)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float | None) -> None:
        loop = self._attach()
        assert loop is not None
        self._service()
        if predicate():
            return
        deadline = None if timeout is None else loop.time() + timeout
        waiter = _Waiter(predicate, loop.create_future(), deadline, timeout)
        self._waiters.append(waiter)
        if deadline is not None:
            loop.call_at(deadline, self._wake)
        try:
            await waiter.future
        finally:
            self._waiters.remove(waiter)

    def run(self, main: Callable[[], Awaitable[T]]) -> T:
        return asyncio.run(main())

    def close(self) -> None:
        """Close the socket now, whatever the association's state (the device's `close` ends it first)."""
        if self.closed:
            return
        self.closed = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self.transport.fileno())
            if self._timer is not None:
                self._timer.cancel()
        self.transport.close()

    # -- internals ------------------------------------------------------------------

    def _attach(self) -> asyncio.AbstractEventLoop | None:
        """The running loop, watching the socket (a new loop after the last one's end: watched from now)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        if loop is not self._loop and not self.closed:
            self._loop, self._timer, self._timer_due, self._soon = loop, None, None, False
            loop.add_reader(self.transport.fileno(), self._readable)
        return loop

    def _readable(self) -> None:
        now = self.now()
        host = self.host
        if self.before_service is not None:
            self.before_service()
        if self._packets:
            sender = self._sender
            for packet, source in self.transport.receive():
                mac, ip = sender(source)
                host.receive_packet(packet, mac, ip, now)
        else:
            own_mac, own_ip, udp = self._own_mac, self._own_ip, self._udp
            for packet, source in self.transport.receive():
                # the host's own framing, never on a wire: no UDP checksum (RFC 768: 0 is none), SCTP's CRC32c
                # stands
                host.receive(build_frame(packet, endpoint_mac(source), own_mac, source[0], own_ip, udp=udp,
                                         udp_checksum=False), now)
        self._service(buffers_synced=True)

    def _sender(self, source: Endpoint) -> tuple[bytes, ipaddress.IPv4Address]:
        """The MAC and IPv4 address that name `source` to the host, kept for the endpoints seen last (the peer's,
        every packet)."""
        named = self._senders.get(source)
        if named is None:
            if len(self._senders) >= SENDERS_KEPT:
                self._senders.clear()
            named = self._senders[source] = (endpoint_mac(source), ipaddress.IPv4Address(source[0]))
        return named

    def _destination(self, mac: bytes) -> Endpoint:
        endpoint = self._destinations.get(mac)
        if endpoint is None:
            if len(self._destinations) >= SENDERS_KEPT:
                self._destinations.clear()
            endpoint = self._destinations[mac] = mac_endpoint(mac)
        return endpoint

    def _service_soon(self) -> None:
        self._soon = False
        self._service()

    def _on_timer(self) -> None:
        self._timer = self._timer_due = None
        self._service()

    def _service(self, buffers_synced: bool = False) -> None:
        """Timers due, the host's packets out, its events to the driver, the waiters woken, the next timer."""
        if self.closed:
            self._wake()
            return
        if self.before_service is not None and not buffers_synced:
            self.before_service()
        host, now = self.host, self.now()
        due = host.next_timeout()
        if due is not None and due <= now:
            host.handle_timeout(now)
        send = self.transport.send
        if self._packets:
            destination = self._destination
            for mac, packet in host.packets_to_send(now):
                send(packet, destination(mac))
        else:
            udp = self._udp
            for frame in host.data_to_send(now):
                send(sctp_packet(frame, udp), mac_endpoint(frame[:6]))
        if self.on_change is not None:
            self.on_change()
        self._wake()
        self._set_timer(host.next_timeout())
        if self._release_when_ended and (host.association is None or host.association.is_closed):
            self.close()

    def release_when_ended(self) -> None:
        """The device was closed: its socket goes once its association has ended (`Device.close`)."""
        self._release_when_ended = True
        self.kick()

    def _set_timer(self, due: float | None) -> None:
        loop = self._loop
        if loop is None or due == self._timer_due:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_due = due
        self._timer = None if due is None else loop.call_at(due, self._on_timer)

    def _wake(self) -> None:
        """Wake the waiters whose predicate holds, or whose deadline has passed (`WaitTimeout`)."""
        now = self._loop.time() if self._loop is not None else self.now()
        for waiter in list(self._waiters):
            if waiter.future.done():
                continue
            try:
                if waiter.predicate():
                    waiter.future.set_result(None)
                elif waiter.deadline is not None and now >= waiter.deadline:
                    waiter.future.set_exception(WaitTimeout(f"not done within {waiter.timeout:g} s"))
            except Exception as error:  # the predicate's own failure goes to its waiter
                waiter.future.set_exception(error)

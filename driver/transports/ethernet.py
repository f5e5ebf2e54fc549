"""SCTP over IPv4 in raw Ethernet frames on one network interface (Linux `AF_PACKET`): needs CAP_NET_RAW.

The device is an IPv4 host of its own on the interface: its own address
(the spec's: `eth:IFACE:ADDRESS[:PORT]`) and the interface's MAC.  The
computer's own stack sees the same frames: give the interface no address
in the device's subnet (or none at all), or it answers them too.

* IPv4 (RFC 791): a frame for the device is ethertype 0x0800, to its MAC
  or broadcast, its IPv4 header's checksum right, to its address, protocol
  132, not a fragment; its SCTP packet is handed up with the source
  address.  What it sends is built with the model's framing
  (`model.net.frames.build_frame`: a 20-byte header, Don't Fragment).
* ARP (RFC 826): the device answers requests for its address and learns
  the sender of every request and reply for it (its neighbour table).  A
  packet to an address not yet known waits (`PENDING_PER_NEIGHBOUR` at most)
  while a request goes out, broadcast, once a `ARP_RETRY` seconds; SCTP's
  own retransmissions cover an answer that never comes.
"""

from __future__ import annotations

import errno
import socket
import time

from model.net.checksum import internet_checksum
from model.net.frames import ETHERTYPE_IPV4, IP_PROTOCOL_SCTP, build_frame

from driver.arp import BROADCAST, ETHERNET_HEADER, ETHERTYPE_ARP, Neighbours, ethertype
from driver.errors import TransportError, TransportNotPermitted
from driver.transports import Endpoint, TransportCounters
from driver.transports.udp import SCTP_COMMON_HEADER

ETH_P_ALL = 0x0003
PENDING_PER_NEIGHBOUR = 16
MAX_FRAME = 16 * 1024


class EthernetTransport:
    """One packet socket on `interface`, the device at IPv4 address `ip` (see the module docstring)."""

    kind = "eth"

    def __init__(self, interface: str, ip: str) -> None:
        try:
            self._socket = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        except AttributeError:
            raise TransportError("raw Ethernet frames need Linux (AF_PACKET)") from None
        except PermissionError:
            raise TransportNotPermitted(f"raw Ethernet frames on {interface} need CAP_NET_RAW: run as root, or "
                                        "give the interpreter the capability (setcap cap_net_raw+ep)") from None
        try:
            self._socket.bind((interface, 0))
        except OSError as error:
            self._socket.close()
            if error.errno == errno.ENODEV:
                raise TransportError(f"no network interface {interface!r}") from None
            raise TransportError(f"{interface}: {error.strerror or error}") from None
        self._socket.setblocking(False)
        self.interface = interface
        self.mac: bytes = self._socket.getsockname()[4][:6]
        self.ip, self.port = ip, 0
        self._own = socket.inet_aton(ip)
        self._arp = Neighbours(self.mac, ip)
        self._pending: dict[bytes, list[bytes]] = {}
        """Packets waiting for their destination's MAC, by its IPv4 address."""
        self._identification = 0
        self.counters = TransportCounters()

    def fileno(self) -> int:
        return self._socket.fileno()

    def receive(self) -> list[tuple[bytes, Endpoint]]:
        packets = []
        counters = self.counters
        while True:
            try:
                frame, address = self._socket.recvfrom(MAX_FRAME)
            except BlockingIOError:
                return packets
            except OSError:
                counters.send_failures += 1
                continue
            if address[2] == socket.PACKET_OUTGOING:   # our own frames, looped back by the kernel
                continue
            kind = ethertype(frame)
            if kind == ETHERTYPE_ARP:
                self._on_arp(frame[ETHERNET_HEADER:])
                continue
            if kind != ETHERTYPE_IPV4 or frame[:6] not in (self.mac, BROADCAST):
                continue   # not IPv4 for this interface's MAC: the computer's traffic, not the device's
            counters.received += 1
            packet = self._sctp_packet(frame[ETHERNET_HEADER:])
            if packet is not None:
                packets.append(packet)

    def _sctp_packet(self, datagram: bytes) -> tuple[bytes, Endpoint] | None:
        counters = self.counters
        header = (datagram[0] & 0xF) * 4 if datagram else 0
        if (header < 20 or len(datagram) < header + SCTP_COMMON_HEADER or datagram[0] >> 4 != 4
                or internet_checksum(datagram[:header]) != 0):
            counters.dropped_not_sctp += 1
            return None
        if datagram[16:20] != self._own:
            counters.dropped_not_for_us += 1
            return None
        fragment = int.from_bytes(datagram[6:8], "big")
        if datagram[9] != IP_PROTOCOL_SCTP or fragment & 0x3FFF:   # More Fragments or an offset: RFC 5043 9
            counters.dropped_not_sctp += 1
            return None
        total = int.from_bytes(datagram[2:4], "big")
        return datagram[header:total], (socket.inet_ntoa(datagram[12:16]), 0)

    def _on_arp(self, body: bytes) -> None:
        sender, reply = self._arp.take(body)
        if sender is not None:
            for packet in self._pending.pop(sender, []):
                self._send_frame(packet, sender, self._arp.table[sender])
        if reply is not None:
            self._transmit(reply)

    def send(self, packet: bytes, destination: Endpoint) -> None:
        target = socket.inet_aton(destination[0])
        mac = self._arp.table.get(target)
        if mac is not None:
            self._send_frame(packet, target, mac)
            return
        waiting = self._pending.setdefault(target, [])
        if len(waiting) < PENDING_PER_NEIGHBOUR:
            waiting.append(packet)
        else:
            self.counters.send_failures += 1
        request = self._arp.request(target, time.monotonic())
        if request is not None:
            self._transmit(request)

    def _send_frame(self, packet: bytes, target: bytes, mac: bytes) -> None:
        self._identification = (self._identification + 1) & 0xFFFF
        frame = build_frame(packet, self.mac, mac, self.ip, socket.inet_ntoa(target),
                            identification=self._identification)
        if self._transmit(frame):
            self.counters.sent += 1

    def _transmit(self, frame: bytes) -> bool:
        try:
            self._socket.send(frame)
        except OSError:
            self.counters.send_failures += 1
            return False
        return True

    def close(self) -> None:
        self._socket.close()

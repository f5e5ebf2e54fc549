"""ARP (RFC 826) for a device that is an IPv4 host of its own on an Ethernet, without I/O: its neighbour table,
its answers to requests for its address, and its own requests, as frames for the caller to send.

A device on raw Ethernet frames (`driver.transports.ethernet`) and a board on its network (the `board:` device,
`driver.backends.board_network`) both keep one `Neighbours`.  Only ARP packets about the device's own address are
heeded: a request or reply whose target is its address teaches the sender's MAC (RFC 826 "merge"), and a request
is answered.  A request for a neighbour goes out broadcast, once an `ARP_RETRY` seconds at most.
"""

from __future__ import annotations

import socket
import struct

from model.net.frames import ETHERTYPE_IPV4

__all__ = ["ARP", "ARP_REPLY", "ARP_REQUEST", "ARP_RETRY", "BROADCAST", "ETHERNET_HEADER", "ETHERTYPE_ARP",
           "Neighbours", "ethertype"]

ETHERTYPE_ARP = 0x0806
ETHERNET_HEADER = 14
BROADCAST = b"\xff" * 6
ARP = struct.Struct("!HHBBH6s4s6s4s")
"""RFC 826: hardware type, protocol type, their address lengths, opcode, sender MAC and IPv4, target MAC and IPv4."""
ARP_REQUEST, ARP_REPLY = 1, 2
ARP_RETRY = 1.0
"""Seconds between two requests for the same neighbour."""


def ethertype(frame: bytes) -> int | None:
    """The frame's ethertype; None for a frame shorter than an Ethernet header."""
    return int.from_bytes(frame[12:14], "big") if len(frame) >= ETHERNET_HEADER else None


class Neighbours:
    """The ARP of the IPv4 host at `ip` with MAC `mac` (see the module docstring); `table`: IPv4 address (4 bytes)
    -> MAC, as ARP told."""

    def __init__(self, mac: bytes, ip: str) -> None:
        self.mac = mac
        self.own = socket.inet_aton(ip)
        self.table: dict[bytes, bytes] = {}
        self._asked: dict[bytes, float] = {}

    def take(self, body: bytes) -> tuple[bytes | None, bytes | None]:
        """An ARP packet (the frame past its Ethernet header): the IPv4 address of the sender learnt from it, if
        it is about this host's address, and the reply frame to send, if it is a request."""
        if len(body) < ARP.size:
            return None, None
        hardware, protocol, hlen, plen, operation, sender_mac, sender_ip, _, target_ip = ARP.unpack_from(body)
        if (hardware, protocol, hlen, plen) != (1, ETHERTYPE_IPV4, 6, 4) or target_ip != self.own:
            return None, None
        self.table[sender_ip] = sender_mac   # RFC 826: merge the sender, since the packet is for us
        if operation != ARP_REQUEST:
            return sender_ip, None
        reply = ARP.pack(1, ETHERTYPE_IPV4, 6, 4, ARP_REPLY, self.mac, self.own, sender_mac, sender_ip)
        return sender_ip, sender_mac + self.mac + ETHERTYPE_ARP.to_bytes(2, "big") + reply

    def request(self, target: bytes, now: float) -> bytes | None:
        """A broadcast request for the MAC of `target` (4 bytes), or None if one went out less than `ARP_RETRY`
        seconds before `now`."""
        if now - self._asked.get(target, now - ARP_RETRY) < ARP_RETRY:
            return None
        self._asked[target] = now
        request = ARP.pack(1, ETHERTYPE_IPV4, 6, 4, ARP_REQUEST, self.mac, self.own, bytes(6), target)
        return BROADCAST + self.mac + ETHERTYPE_ARP.to_bytes(2, "big") + request

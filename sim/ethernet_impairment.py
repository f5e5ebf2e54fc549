"""An impairing Ethernet bridge between two network interfaces (Linux AF_PACKET; CAP_NET_RAW): loss, duplication
and reordering of every frame, both ways, where the kernel has no netem.

    python -m sim.ethernet_impairment IFACE_A IFACE_B --loss 0.01 --duplication 0.01 --reordering 0.01 [--seed 1]

(until SIGTERM, when it prints what it relayed, dropped, duplicated and reordered.)

Each frame that arrives on one interface goes out of the other (the bridge learns nothing: two hosts, one on
each side, as two network namespaces joined through it by veth pairs), impaired as `sim.udp_impairment`
impairs datagrams: dropped with probability `loss`, else sent twice with probability `duplication`, and
delayed by `reorder_delay` seconds with probability `reordering`, from one seeded generator.  ARP crosses it
too, impaired alike.

A veth leaves the checksum of a host's UDP datagram to be completed by "the hardware" (the kernel marks such a
frame TP_STATUS_CSUMNOTREADY, PACKET_AUXDATA): the bridge completes it (RFC 768) before sending the frame on,
as a NIC would, or the other host's stack would drop the datagram.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import socket
import struct

from model.net.checksum import internet_checksum
from sim.udp_impairment import Impairment, RelayCounters

ETH_P_ALL = 0x0003
MAX_FRAME = 16 * 1024
SOL_PACKET = 263
PACKET_AUXDATA = 8
TP_STATUS_CSUMNOTREADY = 0x8
AUXDATA = struct.Struct("=IIIHHHH")
"""struct tpacket_auxdata: tp_status, tp_len, tp_snaplen, tp_mac, tp_net, tp_vlan_tci, tp_vlan_tpid."""
ETHERNET_HEADER = 14
IP_PROTOCOL_UDP = 17


def with_udp_checksum(frame: bytes) -> bytes:
    """An Ethernet frame carrying IPv4 and UDP with its UDP checksum computed (RFC 768: over the pseudo-header,
    the UDP header and the data; 0 sent as 0xFFFF); any other frame as it is."""
    ipv4 = len(frame) >= ETHERNET_HEADER + 28 and frame[12:14] == b"\x08\x00"
    if not ipv4 or frame[ETHERNET_HEADER + 9] != IP_PROTOCOL_UDP:
        return frame
    ip = frame[ETHERNET_HEADER:]
    header = (ip[0] & 0xF) * 4
    total = int.from_bytes(ip[2:4], "big")
    udp = bytearray(ip[header:total])
    if len(udp) < 8:
        return frame
    udp[6:8] = b"\0\0"
    pseudo = ip[12:20] + bytes((0, IP_PROTOCOL_UDP)) + len(udp).to_bytes(2, "big")
    checksum = internet_checksum(pseudo + bytes(udp)) or 0xFFFF
    udp[6:8] = checksum.to_bytes(2, "big")
    return frame[:ETHERNET_HEADER + header] + bytes(udp) + frame[ETHERNET_HEADER + total:]


class ImpairingBridge:
    """The bridge (see the module docstring); `start()` inside a running loop, `close()` at the end."""

    def __init__(self, interfaces: tuple[str, str], impairment: Impairment = Impairment()) -> None:
        self.interfaces, self.impairment = interfaces, impairment
        self.counters = RelayCounters()
        self._random = random.Random(impairment.seed)
        self._sockets: list[socket.socket] = []

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        for interface in self.interfaces:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            sock.bind((interface, 0))
            sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            sock.setblocking(False)
            self._sockets.append(sock)
        for index, sock in enumerate(self._sockets):
            loop.add_reader(sock.fileno(), self._forward, sock, self._sockets[1 - index])

    def close(self) -> None:
        loop = asyncio.get_running_loop()
        for sock in self._sockets:
            loop.remove_reader(sock.fileno())
            sock.close()

    def _forward(self, source: socket.socket, destination: socket.socket) -> None:
        chance, counters, impairment = self._random.random, self.counters, self.impairment
        while True:
            try:
                frame, ancillary, _, address = source.recvmsg(MAX_FRAME, socket.CMSG_SPACE(AUXDATA.size))
            except BlockingIOError:
                return
            if address[2] == socket.PACKET_OUTGOING:   # what this bridge itself sent out of the interface
                continue
            for level, kind, data in ancillary:
                if (level, kind) != (SOL_PACKET, PACKET_AUXDATA):
                    continue
                if AUXDATA.unpack_from(data)[0] & TP_STATUS_CSUMNOTREADY:
                    frame = with_udp_checksum(frame)
            if chance() < impairment.loss:
                counters.dropped += 1
                continue
            copies = 2 if chance() < impairment.duplication else 1
            counters.duplicated += copies - 1
            counters.relayed += 1
            if chance() < impairment.reordering:
                counters.reordered += 1
                asyncio.get_running_loop().call_later(impairment.reorder_delay, self._send, destination, frame,
                                                      copies)
            else:
                self._send(destination, frame, copies)

    @staticmethod
    def _send(destination: socket.socket, frame: bytes, copies: int) -> None:
        for _ in range(copies):
            try:
                destination.send(frame)
            except OSError:
                return   # the interface is gone or its queue full: the frame is lost, as on a wire


async def _serve(bridge: ImpairingBridge) -> None:
    """Bridge until SIGTERM, then say what was done."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    bridge.start()
    print(f"bridging {bridge.interfaces[0]} <-> {bridge.interfaces[1]}", flush=True)
    await stop.wait()
    bridge.close()
    counters = bridge.counters
    print(f"relayed {counters.relayed} dropped {counters.dropped} duplicated {counters.duplicated} "
          f"reordered {counters.reordered}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("interfaces", nargs=2, metavar="IFACE")
    for name in ("loss", "duplication", "reordering"):
        parser.add_argument(f"--{name}", type=float, default=0.0)
    parser.add_argument("--reorder-delay", type=float, default=0.005, metavar="S")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    impairment = Impairment(args.loss, args.duplication, args.reordering, args.reorder_delay, args.seed)
    try:
        asyncio.run(_serve(ImpairingBridge(tuple(args.interfaces), impairment)))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

"""An impairing UDP relay: loss, duplication and reordering between two devices on real UDP sockets.

This machine's kernel has no netem (`tc qdisc add ... netem` answers "Specified qdisc kind is unknown"), so
the impairments of a real network are made here, between a client and a server device (`driver.open_device`):

    python -m sim.udp_impairment --listen 127.0.0.2:9899 --to 127.0.0.1:9899 --loss 0.01 --duplication 0.01 \\
        --reordering 0.01 [--seed 1]

The relay listens where the client connects (`--listen`; the same port number as the server's, since a
device's SCTP port is its UDP port, `driver.backends.network`) and forwards each datagram to the server
(`--to`) from a socket of its own; what the server sends back goes to the client, from the listening socket.
The first endpoint that sends to the listening socket is the client.  Each datagram, either way, is dropped
with probability `loss`, else sent twice with probability `duplication`, and delayed by `reorder_delay`
seconds with probability `reordering` (so those after it overtake it), from one seeded generator.
"""

from __future__ import annotations

import argparse
import asyncio
import random
from dataclasses import dataclass

Endpoint = tuple[str, int]


@dataclass(frozen=True)
class Impairment:
    loss: float = 0.0
    duplication: float = 0.0
    reordering: float = 0.0
    reorder_delay: float = 0.005
    seed: int = 1


@dataclass
class RelayCounters:
    relayed: int = 0
    dropped: int = 0
    duplicated: int = 0
    reordered: int = 0


class _Side(asyncio.DatagramProtocol):
    def __init__(self, on_datagram) -> None:
        self.on_datagram = on_datagram
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, address) -> None:
        self.on_datagram(data, address)


class ImpairingRelay:
    """The relay (see the module docstring); `start()` inside a running loop, `close()` at the end."""

    def __init__(self, listen: Endpoint, server: Endpoint, impairment: Impairment = Impairment()) -> None:
        self.listen, self.server, self.impairment = listen, server, impairment
        self.counters = RelayCounters()
        self._random = random.Random(impairment.seed)
        self._client: Endpoint | None = None
        self._front = _Side(self._from_client)
        self._back = _Side(self._from_server)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.create_datagram_endpoint(lambda: self._front, local_addr=self.listen)
        await loop.create_datagram_endpoint(lambda: self._back, local_addr=(self.listen[0], 0))

    def close(self) -> None:
        for side in (self._front, self._back):
            if side.transport is not None:
                side.transport.close()

    def _from_client(self, data: bytes, address: Endpoint) -> None:
        if self._client is None:
            self._client = address
        if address == self._client:
            self._impaired(self._back, data, self.server)

    def _from_server(self, data: bytes, address: Endpoint) -> None:
        if self._client is not None and address == self.server:
            self._impaired(self._front, data, self._client)

    def _impaired(self, side: _Side, data: bytes, destination: Endpoint) -> None:
        chance, counters, impairment = self._random.random, self.counters, self.impairment
        if chance() < impairment.loss:
            counters.dropped += 1
            return
        copies = 2 if chance() < impairment.duplication else 1
        counters.duplicated += copies - 1
        counters.relayed += 1
        if chance() < impairment.reordering:
            counters.reordered += 1
            asyncio.get_running_loop().call_later(impairment.reorder_delay, self._send, side, data, destination,
                                                  copies)
        else:
            self._send(side, data, destination, copies)

    @staticmethod
    def _send(side: _Side, data: bytes, destination: Endpoint, copies: int) -> None:
        if side.transport is not None and not side.transport.is_closing():
            for _ in range(copies):
                side.transport.sendto(data, destination)


def _endpoint(text: str) -> Endpoint:
    host, _, port = text.rpartition(":")
    return host, int(port)


async def _serve(relay: ImpairingRelay) -> None:
    await relay.start()
    print(f"relaying {relay.listen[0]}:{relay.listen[1]} -> {relay.server[0]}:{relay.server[1]}", flush=True)
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", type=_endpoint, required=True, metavar="ADDR:PORT")
    parser.add_argument("--to", type=_endpoint, required=True, metavar="ADDR:PORT")
    for name in ("loss", "duplication", "reordering"):
        parser.add_argument(f"--{name}", type=float, default=0.0)
    parser.add_argument("--reorder-delay", type=float, default=0.005, metavar="S")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    impairment = Impairment(args.loss, args.duplication, args.reordering, args.reorder_delay, args.seed)
    try:
        asyncio.run(_serve(ImpairingRelay(args.listen, args.to, impairment)))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

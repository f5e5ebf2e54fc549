"""The host's side of a UART in Amaranth's simulator, written from the 8N1 definition, not from the RTL.

8N1: the line idles high; a byte is a start bit (low), its eight bits least
significant first, a stop bit (high), each ``bit_clocks`` long. The driver
puts bytes on the design's receive wire; the monitor finds each falling edge
on its transmit wire, samples the bits in their middles and checks the stop
bit. :class:`SimTransport` gives :class:`driver.link.AsyncLink` those wires,
with faults injected on the way: bytes of the host's requests dropped or
flipped (``request_faults``), bytes of the board's responses dropped or
flipped (``response_faults``), each a set of byte positions counted from the
start of the run in that direction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CLOCK_PERIOD = 16e-9  # 62.5 MHz, the board's core clock


async def _ticks(ctx, count: int, domain: str) -> None:
    # Plain ticks rather than ``repeat``: a background testbench left waiting when the simulation ends
    # must not leave a half-closed generator behind.
    for _ in range(count):
        await ctx.tick(domain)


def bits_8n1(byte: int) -> list[int]:
    return [0] + [(byte >> i) & 1 for i in range(8)] + [1]


@dataclass
class SimUart:
    rx: object            # the design's receive wire (the host drives it)
    tx: object            # the design's transmit wire
    bit_clocks: int
    domain: str = "sync"
    outgoing: list[int] = field(default_factory=list)
    incoming: list[int] = field(default_factory=list)
    framing_errors: int = 0
    sending: bool = False

    def driver(self):
        async def testbench(ctx):
            ctx.set(self.rx, 1)
            while True:
                if not self.outgoing:
                    await _ticks(ctx, self.bit_clocks, self.domain)
                    continue
                self.sending = True
                for bit in bits_8n1(self.outgoing.pop(0)):
                    ctx.set(self.rx, bit)
                    await _ticks(ctx, self.bit_clocks, self.domain)
                self.sending = False
        return testbench

    def monitor(self):
        async def testbench(ctx):
            while True:
                await ctx.negedge(self.tx)                # the start bit's falling edge
                await _ticks(ctx, self.bit_clocks // 2, self.domain)
                byte = 0
                for i in range(8):
                    await _ticks(ctx, self.bit_clocks, self.domain)
                    byte |= ctx.get(self.tx) << i
                await _ticks(ctx, self.bit_clocks, self.domain)
                if ctx.get(self.tx):
                    self.incoming.append(byte)
                else:
                    self.framing_errors += 1
        return testbench


class SimTransport:
    """:class:`driver.link.AsyncTransport` on a :class:`SimUart`; times in seconds of simulated time."""

    def __init__(self, ctx, uart: SimUart, *, clock_period: float = CLOCK_PERIOD,
                 request_faults: dict[int, str] | None = None, response_faults: dict[int, str] | None = None):
        self.ctx, self.uart, self.clock_period = ctx, uart, clock_period
        self.request_faults, self.response_faults = request_faults or {}, response_faults or {}
        self.sent = self.received = self.writes = 0
        self.requests_damaged = self.responses_damaged = 0

    @staticmethod
    def _apply(fault: str, byte: int) -> bytes:
        return b"" if fault == "drop" else bytes([byte ^ 0x10])

    async def send(self, data: bytes) -> None:
        self.writes += 1
        for byte in data:
            fault = self.request_faults.get(self.sent)
            self.sent += 1
            if fault:
                self.requests_damaged += 1
            self.uart.outgoing.extend(self._apply(fault, byte) if fault else bytes([byte]))
        while self.uart.outgoing or self.uart.sending:   # as pyserial's flush(): the bytes are on the wire
            await _ticks(self.ctx, self.uart.bit_clocks, self.uart.domain)

    async def receive(self, timeout: float) -> bytes:
        step = self.uart.bit_clocks
        for _ in range(max(1, round(timeout / self.clock_period / step))):
            if self.uart.incoming:
                break
            await _ticks(self.ctx, step, self.uart.domain)
        data = bytearray()
        while self.uart.incoming:
            byte = self.uart.incoming.pop(0)
            fault = self.response_faults.get(self.received)
            self.received += 1
            if fault:
                self.responses_damaged += 1
            data += self._apply(fault, byte) if fault else bytes([byte])
        return bytes(data)

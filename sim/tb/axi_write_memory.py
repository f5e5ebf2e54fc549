"""A behavioural AXI4 write subordinate for Amaranth's simulator: a byte memory behind AW, W and B.

Every burst is checked as it is accepted (INCR, ``AWSIZE`` = log2 W, at most
256 beats, no 4 KiB crossing, ARM IHI 0022 A3.4.1) and must lie inside the
memory; each beat's strobed bytes are written and recorded as one run in
``writes``; B answers OKAY with the burst's ID once its last beat is in.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from hdl.bus.axi import Burst, Resp


@dataclass
class WriteMemory:
    """``len(data)`` bytes at ``base``, zero at first; ``writes`` holds (address, bytes) of every beat."""

    base: int
    size: int
    width: int
    data: bytearray = field(init=False)
    writes: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.data = bytearray(self.size)

    def read(self, address: int, length: int) -> bytes:
        return bytes(self.data[address - self.base:address - self.base + length])

    def _check(self, address: int, length: int, size: int, burst: int) -> None:
        assert burst == Burst.INCR, f"AWBURST {burst}"
        assert 1 << size == self.width, f"AWSIZE {size} at W = {self.width}"
        assert length < 256, f"AWLEN {length}"
        start = address - address % self.width
        end = start + (length + 1) * self.width
        assert start // 4096 == (end - 1) // 4096, f"burst {address:#x}+{length + 1} beats crosses 4 KiB"
        assert self.base <= start and end <= self.base + self.size, f"burst {address:#x} outside memory"

    def processes(self, axi):
        """The AW, W and B testbenches (add each with ``background=True``)."""
        bursts: deque = deque()   # (beat-aligned address, beats, AWID)
        responses: deque = deque()   # BID of each burst written

        async def address_channel(ctx):
            ctx.set(axi.awready, 1)
            while True:
                _, _, valid, address, length, size, burst, ident = await ctx.tick().sample(
                    axi.awvalid, axi.awaddr, axi.awlen, axi.awsize, axi.awburst, axi.awid)
                if valid:
                    self._check(address, length, size, burst)
                    bursts.append((address - address % self.width, length + 1, ident))

        async def data_channel(ctx):
            beat = 0
            while True:
                ready = bool(bursts)   # W waits for its burst's AW
                ctx.set(axi.wready, ready)
                _, _, valid, data, strobe, last = await ctx.tick().sample(axi.wvalid, axi.wdata, axi.wstrb,
                                                                          axi.wlast)
                if not (valid and ready):
                    continue
                start, beats, ident = bursts[0]
                address = start + beat * self.width
                lanes = [lane for lane in range(self.width) if strobe >> lane & 1]
                raw = data.to_bytes(self.width, "little")
                for lane in lanes:
                    self.data[address + lane - self.base] = raw[lane]
                if lanes:
                    assert lanes == list(range(lanes[0], lanes[-1] + 1)), f"WSTRB {strobe:#x} has holes"
                    self.writes.append((address + lanes[0], raw[lanes[0]:lanes[-1] + 1]))
                beat += 1
                assert bool(last) == (beat == beats), f"WLAST on beat {beat} of {beats}"
                if beat == beats:
                    bursts.popleft()
                    responses.append(ident)
                    beat = 0

        async def response_channel(ctx):
            while True:
                offered = bool(responses)
                ctx.set(axi.bvalid, offered)
                ctx.set(axi.bresp, Resp.OKAY)
                ctx.set(axi.bid, responses[0] if offered else 0)
                _, _, ready = await ctx.tick().sample(axi.bready)
                if offered and ready:
                    responses.popleft()

        return address_channel, data_channel, response_channel

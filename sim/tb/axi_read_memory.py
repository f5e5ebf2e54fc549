"""A behavioural AXI4 read subordinate for Amaranth's simulator: a byte memory behind AR and R.

Random ``ARREADY`` and random read latency and gaps on R (``rvalid`` low),
every burst checked as it is accepted (INCR, ``ARSIZE`` = log2 W, aligned
address, at most 256 beats, no 4 KiB crossing, ARM IHI 0022 A3.4.1) and every
byte read checked against the ranges the test allows.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

from hdl.bus.axi import Burst, Resp


@dataclass
class ReadMemory:
    """``data`` at ``base``; ``ranges`` (start, length) are the bytes a burst may touch, or None for any."""

    base: int
    data: bytes
    width: int
    ar_ready: float = 1.0        # chance ARREADY is high on a cycle
    latency: tuple = (1, 1)      # cycles from AR to the first R beat, drawn per burst
    r_gap: float = 0.0           # chance a ready R beat is held back a cycle
    seed: int = 0
    ranges: list | None = None
    bursts: list = field(default_factory=list)    # (araddr, arlen)
    beats: int = 0

    def _check(self, address: int, length: int, size: int, burst: int) -> None:
        width = self.width
        assert burst == Burst.INCR, f"ARBURST {burst}"
        assert 1 << size == width, f"ARSIZE {size} at W = {width}"
        assert address % width == 0, f"ARADDR {address:#x} not beat-aligned"
        assert length < 256, f"ARLEN {length}"
        end = address + (length + 1) * width
        assert address // 4096 == (end - 1) // 4096, f"burst {address:#x}+{length + 1} beats crosses 4 KiB"
        assert self.base <= address and end <= self.base + len(self.data), f"burst {address:#x} outside memory"
        if self.ranges is not None:
            touched = [(s - s % width, s + n + (-(s + n)) % width) for s, n in self.ranges if n]
            assert any(lo <= address and end <= hi for lo, hi in touched), \
                f"burst {address:#x}..{end:#x} reads beats of no payload"

    def processes(self, axi):
        """The AR and R testbenches (add both with ``background=True``)."""
        rng = random.Random(self.seed)
        pending: deque = deque()   # (cycle the burst's first beat may leave, address, beats)
        clock = [0]

        async def address_channel(ctx):
            while True:
                ready = rng.random() < self.ar_ready
                ctx.set(axi.arready, ready)
                _, _, valid, address, length, size, burst = await ctx.tick().sample(
                    axi.arvalid, axi.araddr, axi.arlen, axi.arsize, axi.arburst)
                clock[0] += 1
                if valid and ready:
                    self._check(address, length, size, burst)
                    self.bursts.append((address, length))
                    pending.append((clock[0] + rng.randint(*self.latency), address, length + 1))

        async def data_channel(ctx):
            beat = 0
            cycle = 0
            while True:
                offer = bool(pending) and pending[0][0] <= cycle and not (self.r_gap and rng.random() < self.r_gap)
                if offer:
                    _, address, beats = pending[0]
                    start = address + beat * self.width - self.base
                    ctx.set(axi.rdata, int.from_bytes(self.data[start:start + self.width], "little"))
                    ctx.set(axi.rlast, beat == beats - 1)
                    ctx.set(axi.rresp, Resp.OKAY)
                ctx.set(axi.rvalid, offer)
                _, _, ready = await ctx.tick().sample(axi.rready)
                cycle += 1
                if offer and ready:
                    self.beats += 1
                    beat += 1
                    if beat == pending[0][2]:
                        pending.popleft()
                        beat = 0

        return address_channel, data_channel

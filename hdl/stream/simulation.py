"""Testbench helpers for :mod:`amaranth.lib.stream` interfaces in Amaranth's simulator.

One set of coroutines for every gateware test (in the style of Glasgow's
``gateware/stream.py``): :func:`stream_put` / :func:`stream_get` move one
payload, :func:`packet_put` / :func:`packet_get` move one packet of bytes as
:mod:`hdl.stream.packet` beats (``data``, ``keep``, ``last``). Each takes an
optional :class:`Pace`, which idles the producer (``valid`` low) or stalls the
consumer (``ready`` low) for random cycles, so the same helper tests both
full throughput and back-pressure. All are ``async`` functions of a
testbench's ``ctx`` (``Simulator.add_testbench``). :func:`collector` and
:func:`packet_collector` make background testbenches that drain an output
forever; :func:`settle` ends a simulation once the outputs are complete.
"""

from __future__ import annotations

import random

from hdl.stream.packet import keep_mask

__all__ = ["Pace", "stream_put", "stream_get", "packet_put", "packet_get", "beats_of", "packet_of_beats",
           "collector", "packet_collector", "settle"]


class Pace:
    """Random idle cycles before each transfer: with probability ``chance`` wait 1 to ``longest`` cycles."""

    def __init__(self, chance: float = 0.0, *, seed: int | random.Random = 0, longest: int = 3):
        self.chance, self.longest = chance, longest
        self.rng = seed if isinstance(seed, random.Random) else random.Random(seed)

    def cycles(self) -> int:
        if self.chance and self.rng.random() < self.chance:
            return self.rng.randint(1, self.longest)
        return 0


async def _idle(ctx, pace: Pace | None) -> None:
    cycles = pace.cycles() if pace else 0
    if cycles:
        await ctx.tick().repeat(cycles)


async def stream_put(ctx, stream, payload, *, pace: Pace | None = None) -> None:
    """Offer ``payload`` on ``stream`` (a sink of the design) until it is taken; ``valid`` low after."""
    await _idle(ctx, pace)
    ctx.set(stream.payload, payload)
    ctx.set(stream.valid, 1)
    # A loop of plain ticks rather than ``until``: a background testbench left waiting when the
    # simulation ends must not leave a half-closed generator behind.
    while True:
        _, _, ready = await ctx.tick().sample(stream.ready)
        if ready:
            break
    ctx.set(stream.valid, 0)


async def stream_get(ctx, stream, *, pace: Pace | None = None):
    """Take one payload from ``stream`` (a source of the design); ``ready`` low after."""
    await _idle(ctx, pace)
    ctx.set(stream.ready, 1)
    while True:
        _, _, valid, payload = await ctx.tick().sample(stream.valid, stream.payload)
        if valid:
            break
    ctx.set(stream.ready, 0)
    return payload


def beats_of(packet: bytes, width: int, rng: random.Random | None = None) -> list[dict]:
    """``packet`` as beats of a ``width``-byte packet stream; lanes outside ``keep`` hold junk (or zeros)."""
    beats = []
    for offset in range(0, len(packet), width):
        piece = packet[offset:offset + width]
        junk = rng.randbytes(width - len(piece)) if rng else bytes(width - len(piece))
        beats.append({
            "data": int.from_bytes(piece + junk, "little"),
            "keep": keep_mask(len(piece)),
            "last": offset + width >= len(packet),
        })
    return beats


def packet_of_beats(beats, width: int) -> list[bytes]:
    """Packets from received beats (objects with ``data``, ``keep``, ``last``), checking the keep rules."""
    packets, current = [], b""
    for beat in beats:
        keep = int(beat.keep) if not isinstance(beat, dict) else beat["keep"]
        data = int(beat.data) if not isinstance(beat, dict) else beat["data"]
        last = bool(beat.last) if not isinstance(beat, dict) else bool(beat["last"])
        count = bin(keep).count("1")
        assert keep == keep_mask(count) and count >= 1, f"keep {keep:#x} not contiguous from lane 0"
        assert last or count == width, "only the last beat may be partial"
        current += data.to_bytes(width, "little")[:count]
        if last:
            packets.append(current)
            current = b""
    assert current == b"", "a packet without its last beat"
    return packets


async def packet_put(ctx, stream, packet: bytes, *, pace: Pace | None = None,
                     rng: random.Random | None = None) -> None:
    """Send ``packet`` (at least one byte) as beats on the packet stream ``stream``."""
    width = len(stream.payload.keep)
    for beat in beats_of(packet, width, rng):
        await stream_put(ctx, stream, beat, pace=pace)


async def packet_get(ctx, stream, *, pace: Pace | None = None) -> bytes:
    """Receive one packet from the packet stream ``stream``, checking ``keep`` on every beat."""
    width = len(stream.payload.keep)
    beats = []
    while True:
        beat = await stream_get(ctx, stream, pace=pace)
        beats.append({"data": beat.data, "keep": beat.keep, "last": beat.last})
        if beat.last:
            return packet_of_beats(beats, width)[0]


def collector(stream, out: list, *, pace: Pace | None = None):
    """A background testbench appending every payload taken from ``stream`` to ``out``."""
    async def testbench(ctx):
        while True:
            out.append(await stream_get(ctx, stream, pace=pace))
    return testbench


def packet_collector(stream, out: list, *, pace: Pace | None = None):
    """A background testbench appending every packet (bytes) taken from the packet stream ``stream`` to ``out``."""
    async def testbench(ctx):
        while True:
            out.append(await packet_get(ctx, stream, pace=pace))
    return testbench


async def settle(ctx, done, *, budget: int, tail: int = 40) -> None:
    """Tick until ``done()`` is true (at most ``budget`` cycles), then ``tail`` more cycles."""
    for _ in range(budget):
        if done():
            break
        await ctx.tick()
    await ctx.tick().repeat(tail)

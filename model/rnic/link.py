"""An in-memory link between two endpoints with deterministic impairments.

Sans-I/O like the rest of the model: frames go in with `send(side, frame,
now)`; `deliveries(now)` returns every frame whose arrival time has come,
tagged with the side it arrives at. Loss, duplication, reordering (a random
extra delay), corruption (one flipped bit) and a fixed one-way delay are
drawn from a `random.Random` seeded by the configuration, so a run is the
same every time. With a `rate`, each direction is a wire of that many bits
per second: a frame starts when the one before it from the same side has
left, and occupies the wire for its bytes plus Ethernet's preamble, FCS and
inter-frame gap (IEEE 802.3: 8 + 4 + 12 bytes); without one the wire is
infinitely fast. Frames that arrive are recorded with their arrival time, so
the link yields the capture a tap in front of each receiver would see.

A payload may also be an `Unframed`: an SCTP packet sent without the frame
around it (`model.rnic.pair.HostPair` sends them while no frame is looked
at), on the wire for the length of the frame it stands for. It is lost,
duplicated and delayed as a frame is, with the same random draws; it cannot
be corrupted (a bit flipped in a frame may fall in its headers), so a link
with corruption takes frames only.
"""

from __future__ import annotations

from heapq import heappop, heappush
import math
import random
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from model.errors import EncodeError

ETHERNET_FRAMING = 8 + 4 + 12
"""Bytes a frame occupies on the wire beyond those the link carries: preamble and SFD, FCS, inter-frame gap."""


class Side(Enum):
    """The two ends of the link; a frame sent by A arrives at B and vice versa."""

    A = "a"
    B = "b"

    # Enum's __hash__ is Python code (the hash of the name); the members are singletons compared by identity,
    # and the pair and the driver look up `hosts[side]` and `events[side]` several times per frame.
    __hash__ = object.__hash__

    peer: Side
    """The other end (set on each member below: an attribute, read per frame, not a property's call)."""


Side.A.peer, Side.B.peer = Side.B, Side.A


@dataclass(frozen=True)
class LinkConfig:
    """Impairment probabilities per frame (0..1) and delays in seconds."""

    loss: float = 0.0
    duplication: float = 0.0
    reordering: float = 0.0
    corruption: float = 0.0
    delay: float = 0.0005
    reorder_delay: float = 0.002
    seed: int = 1
    rate: float | None = None
    """Bits per second each way (None: no serialization time, as before rates existed)."""

    def __post_init__(self) -> None:
        for name in ("loss", "duplication", "reordering", "corruption"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise EncodeError(f"link {name} probability {value} is not within 0..1")
        if self.delay < 0 or self.reorder_delay < 0:
            raise EncodeError("link delays must not be negative")
        if self.rate is not None and not (math.isfinite(self.rate) and self.rate > 0):
            raise EncodeError(f"link rate {self.rate} is not a number of bits per second above 0")


@dataclass
class LinkStats:
    sent: int = 0
    delivered: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    corrupted: int = 0


class Unframed(NamedTuple):
    """An SCTP packet on the link without its frame (see the module docstring)."""

    packet: bytes
    length: int
    """The bytes of the frame it stands for (without FCS): its wire time."""


_InFlight = tuple[float, int, Side, bytes | Unframed]
"""A frame on its way: (arrival, sequence, side it arrives at, frame), a plain tuple (built per frame without a
NamedTuple's constructor) that the heap orders by (arrival, sequence), in C. Ties at one arrival time go in the
order sent; no two frames share a sequence, so side and frame are never compared."""


class Link:
    """A full-duplex point-to-point link (see the module docstring)."""

    def __init__(self, config: LinkConfig | None = None, record: bool = False) -> None:
        self.config = config or LinkConfig()
        self._random = random.Random(self.config.seed)
        self._in_flight: list[_InFlight] = []
        self._sequence = 0
        self._wire_free = {Side.A: 0.0, Side.B: 0.0}
        self._draws_owed = 0
        """Draws of the random generator that frames sent without impairments did not make (see `send`)."""
        """When each side's wire has sent its last frame (with a `rate`)."""
        self.stats = LinkStats()
        self.recording: list[tuple[float, bytes]] | None = [] if record else None

    def send(self, side: Side, frame: bytes | Unframed, now: float) -> None:
        """Put a frame (or an `Unframed` packet) on the wire from `side` at time `now`; with a rate it leaves once
        the wire is free."""
        config = self.config
        self.stats.sent += 1
        unframed = type(frame) is Unframed
        if unframed and config.corruption:
            raise ValueError("a link with corruption takes frames only: an unframed packet cannot be corrupted")
        if config.rate is not None:  # a lost frame took its time on the wire too
            length = frame.length if unframed else len(frame)   # without FCS: `ETHERNET_FRAMING` adds it
            wire_time = (length + ETHERNET_FRAMING) * 8 / config.rate
            now = self._wire_free[side] = max(now, self._wire_free[side]) + wire_time
        if not (config.loss or config.duplication or config.corruption or config.reordering):
            # No impairment: each draw below would come out "no", so the frame goes straight on the wire. The
            # draws are owed, not skipped: should the configuration change, `_settle_draws` makes them first,
            # and the random generator stands where it would have.
            self._draws_owed += 4 if frame else 3
            self._sequence += 1
            heappush(self._in_flight, (now + config.delay, self._sequence, side.peer,
                                             frame if unframed else bytes(frame)))
            return
        if self._draws_owed:
            self._settle_draws()
        draw = self._random.random
        if draw() < config.loss:
            self.stats.lost += 1
            return
        copies = 1
        if draw() < config.duplication:
            copies = 2
            self.stats.duplicated += 1
        for _ in range(copies):
            data = frame if unframed else bytes(frame)
            if data and draw() < config.corruption:
                bit = self._random.randrange(len(data) * 8)
                data = bytearray(data)
                data[bit // 8] ^= 1 << (bit % 8)
                data = bytes(data)
                self.stats.corrupted += 1
            arrival = now + config.delay
            if draw() < config.reordering:
                arrival += self._random.uniform(0.0, config.reorder_delay)
                self.stats.reordered += 1
            self._sequence += 1
            heappush(self._in_flight, (arrival, self._sequence, side.peer, data))

    def _settle_draws(self) -> None:
        """Make the draws the unimpaired frames owe, as if they had been made when those frames were sent."""
        draw = self._random.random
        for _ in range(self._draws_owed):
            draw()
        self._draws_owed = 0

    def next_arrival(self) -> float | None:
        """When the next frame arrives, or None if nothing is in flight."""
        return self._in_flight[0][0] if self._in_flight else None

    def deliveries(self, now: float) -> list[tuple[Side, bytes | Unframed, float]]:
        """Every frame (or `Unframed` packet) that has arrived by `now`: (receiving side, frame, arrival time)."""
        out = []
        in_flight = self._in_flight
        while in_flight and in_flight[0][0] <= now:
            arrival, _, to, frame = heappop(in_flight)
            self.stats.delivered += 1
            if self.recording is not None:
                self.recording.append((arrival, frame))
            out.append((to, frame, arrival))
        return out

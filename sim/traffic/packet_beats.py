"""Packets as :mod:`hdl.stream.packet` beats and back, for testbenches in Amaranth's simulator."""

from __future__ import annotations

import random

from hdl.stream.packet import keep_mask

__all__ = ["beats_of", "packets_of"]


def beats_of(packet: bytes, width: int, rng: random.Random) -> list[dict]:
    """A packet as stream beats (``data``, ``keep``, ``last``); lanes outside ``keep`` hold junk."""
    beats = []
    for offset in range(0, len(packet), width):
        piece = packet[offset:offset + width]
        beats.append({
            "data": int.from_bytes(piece + rng.randbytes(width - len(piece)), "little"),
            "keep": keep_mask(len(piece)),
            "last": offset + width >= len(packet),
        })
    return beats


def packets_of(beats, width: int) -> list[bytes]:
    """Reassemble packets from received beats, checking the keep rules of :mod:`hdl.stream.packet`."""
    packets, current = [], b""
    for beat in beats:
        keep = int(beat.keep)
        count = bin(keep).count("1")
        assert keep == keep_mask(count) and count >= 1, f"keep {keep:#x} not contiguous from lane 0"
        assert beat.last or count == width, "only the last beat may be partial"
        current += int(beat.data).to_bytes(width, "little")[:count]
        if beat.last:
            packets.append(current)
            current = b""
    assert current == b"", "a packet without its last beat"
    return packets

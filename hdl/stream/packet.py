"""The packet stream shared by every gateware block.

A packet travels as beats of ``W`` bytes over an :mod:`amaranth.lib.stream`
interface whose payload is :func:`packet_layout`:

* ``data``: ``8 * W`` bits; lane ``i`` is ``data[8*i : 8*i+8]`` and lane 0
  (bits ``[7:0]``) is the first byte on the wire;
* ``keep``: ``W`` bits, one per lane, contiguous from lane 0; every beat but
  the last of a packet has all bits set, the last has at least lane 0 set;
* ``last``: set on the final beat of a packet.

A transfer happens on a cycle with both ``valid`` and ``ready`` high
(:mod:`amaranth.lib.stream` rules: ``valid`` never waits for ``ready``).
"""

from amaranth.hdl import unsigned
from amaranth.lib import data, stream

from hdl.stream.bits import check_width

__all__ = ["SUPPORTED_WIDTHS", "packet_layout", "packet_signature", "keep_mask"]

#: Datapath widths in bytes that the blocks are built and tested for.
SUPPORTED_WIDTHS = (4, 8, 16, 32, 64)


def packet_layout(width_bytes: int) -> data.StructLayout:
    """Payload layout of a ``width_bytes``-wide packet stream beat."""
    check_width(width_bytes)
    return data.StructLayout({
        "data": unsigned(8 * width_bytes),
        "keep": unsigned(width_bytes),
        "last": unsigned(1),
    })


def packet_signature(width_bytes: int) -> stream.Signature:
    """Stream signature of a ``width_bytes``-wide packet stream (use with ``In``/``Out``)."""
    return stream.Signature(packet_layout(width_bytes))


def keep_mask(byte_count: int) -> int:
    """The ``keep`` value of a beat holding ``byte_count`` bytes (lanes 0 .. byte_count-1)."""
    if byte_count < 0:
        raise ValueError(f"Byte count must be non-negative, not {byte_count}")
    return (1 << byte_count) - 1

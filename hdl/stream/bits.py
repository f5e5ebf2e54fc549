"""Bit and lane helpers shared by the gateware: big-endian fields, keep masks, widths.

Defined once here instead of per block:

* :func:`check_width`: a datapath width is a power of two number of bytes;
* :func:`index_bits`: bits of an index into ``count`` things (at least 1);
* :func:`byte`, :func:`big_endian`: wire bytes of a beat, and a field from
  its bytes in wire order (network byte order, RFC 791 appendix B);
* :func:`thermometer`: ``keep``-style masks (lanes ``0 .. count - 1`` set);
* :func:`keep_count`: the bytes of a beat from its ``keep`` (1 .. W).
"""

from amaranth.hdl import Cat, Const, Value

__all__ = ["check_width", "index_bits", "byte", "big_endian", "thermometer", "keep_count"]


def check_width(width_bytes: int, supported=None) -> None:
    """Raise ``ValueError`` unless ``width_bytes`` is a power of two (and in ``supported``, if given)."""
    if not isinstance(width_bytes, int) or width_bytes < 1 or width_bytes & (width_bytes - 1):
        raise ValueError(f"Stream width must be a power of two number of bytes, not {width_bytes!r}")
    if supported is not None and width_bytes not in supported:
        raise ValueError(f"Width {width_bytes} is not one of the supported {tuple(supported)}")


def index_bits(count: int) -> int:
    """Bits of an index into ``count`` things: ``ceil(log2(count))``, at least 1."""
    return max(1, (count - 1).bit_length())


def byte(word: Value, index: int) -> Value:
    """Byte ``index`` (lane order, lane 0 first on the wire) of ``word``."""
    return word[8 * index:8 * index + 8]


def big_endian(*bytes_) -> Value:
    """A big-endian field from its bytes in wire order (one iterable, or the bytes as arguments)."""
    if len(bytes_) == 1 and not isinstance(bytes_[0], Value):
        bytes_ = tuple(bytes_[0])
    return Cat(*reversed(bytes_))


def thermometer(count: Value, width: int, *, inclusive: bool = False) -> Value:
    """``width`` bits, bit ``j`` set when ``j < count`` (``j <= count`` if ``inclusive``): the ``keep`` of
    a beat holding ``count`` bytes."""
    count = Value.cast(count)
    return Cat(*((Const(j, len(count)) <= count) if inclusive else (count > j) for j in range(width)))


def keep_count(keep: Value, width_bytes: int) -> Value:
    """Bytes in a beat whose ``keep`` is a thermometer code with lane 0 set (1 .. W), without an adder chain."""
    if width_bytes == 1:
        return Const(1, 1)
    keep_next = Cat(keep[1:], Const(0, 1))
    last_lane = keep & ~keep_next
    bits = (width_bytes - 1).bit_length()
    index = Cat(*(Cat(*(last_lane[lane] for lane in range(width_bytes) if lane >> bit & 1)).any()
                  for bit in range(bits)))
    return index + 1

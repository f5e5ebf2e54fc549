"""Checks of the public calls' arguments: a bad value is refused at once with a typed error naming it.

Every check takes the argument's name as the caller wrote it (`cqe`,
`wr.sg_list[0].lkey`, `param.private_data`) and puts it first in the
message.  A value of the wrong type is `WrongArgumentType`, one out of range,
too long or not of the enumeration `InvalidArgument` (`driver.errors`).
"""

from __future__ import annotations

import ipaddress
import math
from enum import Enum, IntFlag
from typing import TypeVar

from driver.errors import InvalidArgument, WrongArgumentType

E = TypeVar("E", bound=Enum)
F = TypeVar("F", bound=IntFlag)
K = TypeVar("K")

U32 = (1 << 32) - 1
"""STags (RFC 5041 4.2), lengths of a DDP message (RFC 5041 5.2)."""
U64 = (1 << 64) - 1
"""Host addresses and Tagged Offsets (RFC 5041 4.2), work request ids (verbs' uint64 wr_id)."""


def _type_name(value: object) -> str:
    return type(value).__name__


def whole(name: str, value: object, low: int, high: int) -> int:
    """An int (not a bool) from `low` to `high`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise WrongArgumentType(f"{name} must be an int, not {_type_name(value)}")
    if not low <= value <= high:
        raise InvalidArgument(f"{name} {value} is not within {low}..{high}")
    return value


def instance(name: str, value: object, kind: type[K]) -> K:
    if not isinstance(value, kind):
        raise WrongArgumentType(f"{name} must be a {kind.__name__}, not {_type_name(value)}")
    return value


def boolean(name: str, value: object) -> bool:
    """True or False itself (not 0, 1 or another truthy value)."""
    if not isinstance(value, bool):
        raise WrongArgumentType(f"{name} must be True or False, not {_type_name(value)}")
    return value


def member(name: str, value: object, enum: type[E]) -> E:
    """A member of `enum` itself (not its value)."""
    if not isinstance(value, enum):
        known = ", ".join(f"{enum.__name__}.{m.name}" for m in enum)
        raise InvalidArgument(f"{name} {value!r} is not one of {known}")
    return value


def flags(name: str, value: object, kind: type[F]) -> F:
    """A combination of `kind`'s flags, given as such or as an int, with no other bit set."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise WrongArgumentType(f"{name} must be {kind.__name__} flags, not {_type_name(value)}")
    every = 0
    for flag in kind:
        every |= flag.value
    if value < 0 or value & ~every:
        raise InvalidArgument(f"{name} {value:#x} has bits that are not {kind.__name__} flags "
                              f"({', '.join(flag.name or '' for flag in kind if flag.value)})")
    return kind(value)


def data(name: str, value: object, limit: int) -> bytes:
    """Bytes (bytes, bytearray, memoryview) no longer than `limit`."""
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise WrongArgumentType(f"{name} must be bytes, not {_type_name(value)}")
    value = bytes(value)
    if len(value) > limit:
        raise InvalidArgument(f"{name} is {len(value)} bytes long: at most {limit}")
    return value


def timeout(name: str, value: object) -> float | None:
    """None (no limit) or a finite number of seconds above 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise WrongArgumentType(f"{name} must be a number of seconds or None, not {_type_name(value)}")
    if not (math.isfinite(value) and value > 0):
        raise InvalidArgument(f"{name} {value} is not a finite number of seconds above 0")
    return float(value)


def sequence(name: str, value: object) -> tuple:
    """A list or tuple (not a string or another iterable that a single use would exhaust)."""
    if not isinstance(value, (list, tuple)):
        raise WrongArgumentType(f"{name} must be a list or tuple, not {_type_name(value)}")
    return tuple(value)


def address(name: str, value: object) -> tuple[str, int]:
    """(IPv4 address, SCTP port 1..65535), the address as text."""
    if not isinstance(value, tuple) or len(value) != 2:
        raise WrongArgumentType(f"{name} must be an (ip, port) tuple, not {value!r}")
    ip, port = value
    if not isinstance(ip, str):
        raise WrongArgumentType(f"{name}[0] (ip) must be a str, not {_type_name(ip)}")
    try:
        ipaddress.IPv4Address(ip)
    except ValueError:
        raise InvalidArgument(f"{name}[0] (ip) {ip!r} is not an IPv4 address") from None
    whole(f"{name}[1] (port)", port, 1, 65535)  # SCTP port 0 is not a destination (RFC 4960 3.1)
    return ip, port

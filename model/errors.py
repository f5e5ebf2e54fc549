"""Error types shared by every layer of the model.

Two kinds of error live here:

* Python exceptions for malformed input to a codec or a bad argument from a
  caller (`DecodeError`, `ChecksumError`, `EncodeError`).  Every decoder raises
  only these on bad bytes: never IndexError, struct.error or a silent
  truncation.
* Protocol error identities that travel on the wire or are reported to the
  ULP: the DDP error numbers of RFC 5041 7.2 and the RDMAP Terminate error
  codes of RFC 5040 7.2 / RFC 6581 8, as (layer, type, code) triples.
"""

from __future__ import annotations

from enum import Enum, IntEnum
from typing import NamedTuple


class RnicError(Exception):
    """Base of every exception the model raises on purpose."""


class DecodeError(RnicError, ValueError):
    """Bytes that do not form a valid structure of `layer`.

    `offset` is the byte offset in the decoder's input where the problem was
    found, when there is one.
    """

    def __init__(self, layer: str, message: str, offset: int | None = None):
        self.layer = layer
        self.message = message
        self.offset = offset
        where = f" at offset {offset}" if offset is not None else ""
        super().__init__(f"{layer}: {message}{where}")


class ChecksumError(DecodeError):
    """A checksum (SCTP CRC32c, IPv4 or UDP) that does not match the bytes."""

    def __init__(self, layer: str, expected: int, received: int):
        self.expected = expected
        self.received = received
        super().__init__(
            layer, f"checksum mismatch: computed 0x{expected:08x}, received 0x{received:08x}"
        )


class EncodeError(RnicError, ValueError):
    """Field values that cannot be put on the wire (out of range, too long)."""


def need(data: bytes | memoryview, length: int, layer: str, what: str, offset: int = 0) -> None:
    """Raise DecodeError unless `data[offset:]` holds at least `length` bytes."""
    if len(data) - offset < length:
        raise DecodeError(
            layer, f"{what} needs {length} bytes, only {max(len(data) - offset, 0)} left", offset
        )


def check_field(value: int, bits: int, name: str) -> int:
    """Raise EncodeError unless `value` fits an unsigned field of `bits` bits."""
    if not isinstance(value, int):
        raise EncodeError(f"{name} must be an int, got {type(value).__name__}")
    if not 0 <= value < (1 << bits):
        raise EncodeError(f"{name}={value} does not fit in {bits} bits")
    return value


class TerminateLayer(IntEnum):
    """Layer nibble of the RDMAP Terminate Control field (RFC 5040 6.10)."""

    RDMAP = 0
    DDP = 1
    LLP = 2


class ErrorNumber(NamedTuple):
    """A (layer, error type, error code) triple as carried by a Terminate."""

    layer: TerminateLayer
    etype: int
    code: int


class _ErrorTable(Enum):
    """An RFC error table: each member's value is its `ErrorNumber`."""

    @property
    def etype(self) -> int:
        return self.value.etype

    @property
    def code(self) -> int:
        return self.value.code

    @property
    def number(self) -> ErrorNumber:
        return self.value


_DDP, _RDMAP, _LLP = TerminateLayer.DDP, TerminateLayer.RDMAP, TerminateLayer.LLP


class DdpError(_ErrorTable):
    """DDP error numbers, RFC 5041 7.2 (type, code), in the order of the checks of 7.1."""

    LOCAL_CATASTROPHIC = ErrorNumber(_DDP, 0x0, 0x00)
    # Type 1: Tagged Buffer Error
    INVALID_STAG = ErrorNumber(_DDP, 0x1, 0x00)
    BASE_OR_BOUNDS = ErrorNumber(_DDP, 0x1, 0x01)
    STAG_NOT_ASSOCIATED = ErrorNumber(_DDP, 0x1, 0x02)
    TO_WRAP = ErrorNumber(_DDP, 0x1, 0x03)
    TAGGED_INVALID_VERSION = ErrorNumber(_DDP, 0x1, 0x04)
    # Type 2: Untagged Buffer Error
    INVALID_QN = ErrorNumber(_DDP, 0x2, 0x01)
    NO_BUFFER = ErrorNumber(_DDP, 0x2, 0x02)
    MSN_RANGE = ErrorNumber(_DDP, 0x2, 0x03)
    INVALID_MO = ErrorNumber(_DDP, 0x2, 0x04)
    MESSAGE_TOO_LONG = ErrorNumber(_DDP, 0x2, 0x05)
    UNTAGGED_INVALID_VERSION = ErrorNumber(_DDP, 0x2, 0x06)


class RdmapError(_ErrorTable):
    """RDMAP-layer Terminate error numbers, RFC 5040 7.2 (type, code)."""

    LOCAL_CATASTROPHIC = ErrorNumber(_RDMAP, 0x0, 0x00)
    # EType 1: Remote Protection Error
    INVALID_STAG = ErrorNumber(_RDMAP, 0x1, 0x00)
    BASE_OR_BOUNDS = ErrorNumber(_RDMAP, 0x1, 0x01)
    ACCESS_RIGHTS = ErrorNumber(_RDMAP, 0x1, 0x02)
    STAG_NOT_ASSOCIATED = ErrorNumber(_RDMAP, 0x1, 0x03)
    TO_WRAP = ErrorNumber(_RDMAP, 0x1, 0x04)
    PROTECTION_STAG_NOT_INVALIDATED = ErrorNumber(_RDMAP, 0x1, 0x09)
    PROTECTION_UNSPECIFIED = ErrorNumber(_RDMAP, 0x1, 0xFF)
    # EType 2: Remote Operation Error
    INVALID_VERSION = ErrorNumber(_RDMAP, 0x2, 0x05)
    UNEXPECTED_OPCODE = ErrorNumber(_RDMAP, 0x2, 0x06)
    CATASTROPHIC_STREAM = ErrorNumber(_RDMAP, 0x2, 0x07)
    CATASTROPHIC_GLOBAL = ErrorNumber(_RDMAP, 0x2, 0x08)
    OPERATION_STAG_NOT_INVALIDATED = ErrorNumber(_RDMAP, 0x2, 0x09)
    OPERATION_UNSPECIFIED = ErrorNumber(_RDMAP, 0x2, 0xFF)


class LlpError(_ErrorTable):
    """LLP-layer Terminate error numbers added by RFC 6581 8 (layer 2, type 0)."""

    LOCAL_CATASTROPHIC = ErrorNumber(_LLP, 0x0, 0x05)
    INSUFFICIENT_IRD = ErrorNumber(_LLP, 0x0, 0x06)
    NO_MATCHING_RTR = ErrorNumber(_LLP, 0x0, 0x07)


class TransitionError(RnicError):
    """A protocol state machine has no row for (state, trigger) in its transition table.

    `machine` names the table (e.g. "SCTP association"), `state` and `trigger`
    the pair that was looked up."""

    def __init__(self, machine: str, state: object, trigger: object, detail: str = ""):
        self.machine = machine
        self.state = state
        self.trigger = trigger
        name = getattr(state, "value", state)
        what = getattr(trigger, "name", trigger)
        super().__init__(f"{machine}: no transition for {what} in state {name}{': ' + detail if detail else ''}")

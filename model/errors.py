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


#: The name of each error type as its RFC gives it, by (layer, type): RDMAP (RFC 5040, the Terminate
#: error codes), DDP (RFC 5041 7.2), and the LLP's MPA errors (RFC 6581 8, type 0 as RFC 6580 3.3
#: registers it).
ERROR_TYPE_NAMES = {
    (_RDMAP, 0x0): "Local Catastrophic Error",
    (_RDMAP, 0x1): "Remote Protection Error",
    (_RDMAP, 0x2): "Remote Operation Error",
    (_DDP, 0x0): "Local Catastrophic",
    (_DDP, 0x1): "Tagged Buffer Error",
    (_DDP, 0x2): "Untagged Buffer Error",
    (_DDP, 0x3): "Reserved for the use by the LLP",
    (_LLP, 0x0): "MPA Error",
}

#: The name of each error code under its type, as its RFC gives it (RFC 5040 abbreviates Steering
#: Tag and Tagged Offset as STag and TO). The local catastrophic errors of RDMAP and DDP (type 0) are
#: named by their type alone.
ERROR_CODE_NAMES: dict[_ErrorTable, str] = {
    DdpError.INVALID_STAG: "Invalid STag",
    DdpError.BASE_OR_BOUNDS: "Base or bounds violation",
    DdpError.STAG_NOT_ASSOCIATED: "STag not associated with DDP Stream",
    DdpError.TO_WRAP: "TO wrap",
    DdpError.TAGGED_INVALID_VERSION: "Invalid DDP version",
    DdpError.INVALID_QN: "Invalid QN",
    DdpError.NO_BUFFER: "Invalid MSN - no buffer available",
    DdpError.MSN_RANGE: "Invalid MSN - MSN range is not valid",
    DdpError.INVALID_MO: "Invalid MO",
    DdpError.MESSAGE_TOO_LONG: "DDP Message too long for available buffer",
    DdpError.UNTAGGED_INVALID_VERSION: "Invalid DDP version",
    RdmapError.INVALID_STAG: "Invalid STag",
    RdmapError.BASE_OR_BOUNDS: "Base or bounds violation",
    RdmapError.ACCESS_RIGHTS: "Access rights violation",
    RdmapError.STAG_NOT_ASSOCIATED: "STag not associated with RDMAP Stream",
    RdmapError.TO_WRAP: "TO wrap",
    RdmapError.PROTECTION_STAG_NOT_INVALIDATED: "STag cannot be invalidated",
    RdmapError.PROTECTION_UNSPECIFIED: "Unspecified Error",
    RdmapError.INVALID_VERSION: "Invalid RDMAP version",
    RdmapError.UNEXPECTED_OPCODE: "Unexpected OpCode",
    RdmapError.CATASTROPHIC_STREAM: "Catastrophic error, localized to RDMAP Stream",
    RdmapError.CATASTROPHIC_GLOBAL: "Catastrophic error, global",
    RdmapError.OPERATION_STAG_NOT_INVALIDATED: "STag cannot be Invalidated",
    RdmapError.OPERATION_UNSPECIFIED: "Unspecified Error",
    LlpError.LOCAL_CATASTROPHIC: "Local catastrophic",
    LlpError.INSUFFICIENT_IRD: "Insufficient IRD resources",
    LlpError.NO_MATCHING_RTR: "No matching RTR option",
}

_CODE_NAMES_BY_NUMBER = {member.number: name for member, name in ERROR_CODE_NAMES.items()}


def error_name(layer: int, etype: int, code: int) -> str:
    """The RFC's name of a (layer, type, code) error number, e.g. "Tagged Buffer Error: Base or bounds
    violation" for DDP (1, 1, 0x01); a number no RFC defines is said to be undefined."""
    type_name = ERROR_TYPE_NAMES.get((layer, etype))
    if type_name is None:
        return f"undefined layer {layer} type {etype}"
    code_name = _CODE_NAMES_BY_NUMBER.get((layer, etype, code))
    if code_name is not None:
        return f"{type_name}: {code_name}"
    if (layer, etype) == (_RDMAP, 0x0) or (layer, etype, code) == DdpError.LOCAL_CATASTROPHIC.number:
        return type_name  # RDMAP's takes any code (RFC 6580 registers 0x0/0x0/ALL); DDP's is code 0x00
    return f"{type_name}: undefined code 0x{code:02x}"


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

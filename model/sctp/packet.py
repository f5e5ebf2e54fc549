"""SCTP packet codec: common header, chunks and parameters (RFC 4960, RFC 9260).

Implements the wire formats of RFC 4960 3 (RFC 9260 3 keeps them):

* `SctpPacket`: common header (3.1) plus bundled chunks; `encode()` computes
  the CRC32c checksum (6.8, Appendix B), `decode()` verifies it.
  `CommonHeader` decodes the common header alone.
* `walk_chunks`: the lenient chunk walk of a receiver that processes chunk
  by chunk: every whole chunk undecoded (`RawChunk`), then, if a chunk runs
  past the packet or its length is below 4, a `BrokenChunk` with the
  `ChunkWalkStop` reason; `decode_chunks` is the strict walk built on it.
* One dataclass per chunk type of 3.3 that this project uses (`DataChunk`,
  `InitChunk`, `InitAckChunk`, `SackChunk`, `HeartbeatChunk`,
  `HeartbeatAckChunk`, `AbortChunk`, `ShutdownChunk`, `ShutdownAckChunk`,
  `ErrorChunk`, `CookieEchoChunk`, `CookieAckChunk`, `ShutdownCompleteChunk`)
  and `UnknownChunk`, which keeps any other chunk intact (3.2).
* Parameters (3.2.1): generic `Parameter` and typed ones for Heartbeat Info,
  IPv4 Address, State Cookie, Unrecognized Parameter, Supported Address
  Types and the Adaptation Layer Indication of RFC 5061 4.2.5 (DDP code
  point, RFC 5043 5.1).
* Error causes (3.3.10): generic `ErrorCause`; `unrecognized_parameters_cause`
  builds the Unrecognized Parameters cause (3.3.10.8).
* Serial-number arithmetic (RFC 1982) for TSNs (32 bits) and SSNs (16 bits).

Padding (3.2): every chunk and parameter is padded to a multiple of 4 bytes;
the Length fields exclude their own padding.  A chunk's length includes the
padding of the parameters inside it except the last one.  On decode the
padding bytes are ignored whatever they hold (3.2: "The receiver MUST ignore
the padding bytes"), and a packet whose last chunk lacks its padding is
accepted.  Reserved chunk flag bits are written as 0 and ignored on receipt.

Semantic rules that call for a protocol reaction (an Initiate Tag of 0, a
DATA chunk without user data, an INIT ACK without a State Cookie, bundling
restrictions) are left to the association: the codec carries such chunks both
ways so that the reaction can be tested.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import ClassVar, Union

from crc32c import crc32c as _crc32c

from model.net.checksum import (
    sctp_checksum,
    sctp_checksum_from_bytes,
    sctp_checksum_field_of_parts,
)
from model.errors import ChecksumError, DecodeError, EncodeError, check_field, need

LAYER = "sctp"
_ZERO_CHECKSUM_FIELD = bytes(4)

PPID_DDP_SEGMENT = 16
"""Payload Protocol Identifier of a DDP Segment Chunk (RFC 5043 5.2)."""
PPID_DDP_SESSION_CONTROL = 17
"""Payload Protocol Identifier of a DDP Stream Session Control message (RFC 5043 5.2)."""
ADAPTATION_CODE_POINT_DDP = 0x00000001
"""Adaptation Indication value assigned to DDP (RFC 5043 5.1)."""

COMMON_HEADER_LENGTH = 12
CHUNK_HEADER_LENGTH = 4
PARAMETER_HEADER_LENGTH = 4


# --------------------------------------------------------------------------
# Serial-number arithmetic, RFC 1982 3.


def serial_add(value: int, increment: int, bits: int) -> int:
    """`value + increment` modulo 2**bits; RFC 1982 3.1 limits increment to 0..2**(bits-1)-1."""
    if not 0 <= increment < (1 << (bits - 1)):
        raise ValueError(f"serial increment {increment} out of range for {bits} bits")
    return (value + increment) & ((1 << bits) - 1)


def serial_lt(a: int, b: int, bits: int) -> bool:
    """RFC 1982 3.2: a < b.  Undefined pairs (exactly half the space apart) are not less."""
    half = 1 << (bits - 1)
    return (a < b and b - a < half) or (a > b and a - b > half)


def serial_gt(a: int, b: int, bits: int) -> bool:
    """RFC 1982 3.2: a > b, that is b < a (`serial_lt` with the two swapped, without a second call)."""
    half = 1 << (bits - 1)
    return (b < a and a - b < half) or (b > a and b - a > half)


def serial_le(a: int, b: int, bits: int) -> bool:
    """a == b or a < b in serial-number order."""
    return a == b or serial_lt(a, b, bits)


def serial_ge(a: int, b: int, bits: int) -> bool:
    """a == b or a > b in serial-number order."""
    return a == b or serial_lt(b, a, bits)


TSN_BITS = 32
SSN_BITS = 16


# --------------------------------------------------------------------------
# Padding and TLV walking, RFC 4960 3.2 / 3.2.1.


def _padding(length: int) -> bytes:
    return b"\x00" * (-length % 4)


def _join_padded_tlvs(tlvs: list[bytes]) -> bytes:
    """Concatenate TLVs with padding between them but none after the last (RFC 4960 3.2)."""
    out = b"".join(tlv + _padding(len(tlv)) for tlv in tlvs)
    if tlvs:
        out = out[: len(out) - len(_padding(len(tlvs[-1])))]
    return out


def _split_tlvs(data: bytes, layer: str, what: str, base_offset: int) -> list[tuple[int, bytes, int]]:
    """Split type(16)/length(16)/value TLVs padded to 4 bytes; returns (type, value, offset)."""
    items = []
    offset = 0
    while offset < len(data):
        need(data, 4, layer, f"{what} header", offset)
        tlv_type, length = struct.unpack_from("!HH", data, offset)
        if length < 4:
            raise DecodeError(layer, f"{what} length {length} below 4", base_offset + offset)
        if offset + length > len(data):
            raise DecodeError(
                layer, f"{what} length {length} past the end of its container", base_offset + offset
            )
        items.append((tlv_type, bytes(data[offset + 4 : offset + length]), base_offset + offset))
        offset += length
        offset += min(-length % 4, len(data) - offset)
    return items


# --------------------------------------------------------------------------
# Parameters, RFC 4960 3.2.1.


class ParameterType(IntEnum):
    """Parameter types used by this project (RFC 4960 3.3.2.1, RFC 5061 4.2)."""

    HEARTBEAT_INFO = 1
    IPV4_ADDRESS = 5
    IPV6_ADDRESS = 6
    STATE_COOKIE = 7
    UNRECOGNIZED_PARAMETER = 8
    COOKIE_PRESERVATIVE = 9
    HOST_NAME_ADDRESS = 11
    SUPPORTED_ADDRESS_TYPES = 12
    ADAPTATION_LAYER_INDICATION = 0xC006


class UnrecognizedAction(IntEnum):
    """What to do with an unrecognized chunk or parameter: its type's two high bits (RFC 4960 3.2, 3.2.1)."""

    STOP = 0b00
    """Stop processing; discard (the packet for a chunk, the chunk for a parameter)."""
    STOP_AND_REPORT = 0b01
    """As STOP, and report it (ERROR 'Unrecognized Chunk Type' / 'Unrecognized Parameter')."""
    SKIP = 0b10
    """Skip it and continue processing."""
    SKIP_AND_REPORT = 0b11
    """Skip it, continue, and report it."""

    @property
    def skip(self) -> bool:
        return bool(self & 0b10)

    @property
    def report(self) -> bool:
        return bool(self & 0b01)


class ParameterBase:
    """Base of every parameter: `param_type`, `value` bytes, `encode()` (RFC 4960 3.2.1)."""

    param_type: int

    @property
    def value(self) -> bytes:
        return self.value_bytes()

    def value_bytes(self) -> bytes:
        raise NotImplementedError

    @property
    def unrecognized_action(self) -> UnrecognizedAction:
        """Action the high two bits of the type ask for if the type is not recognized (3.2.1)."""
        return UnrecognizedAction(self.param_type >> 14)

    def _tlv(self) -> bytes:
        check_field(self.param_type, 16, "parameter type")
        value = self.value_bytes()
        length = PARAMETER_HEADER_LENGTH + len(value)
        if length > 0xFFFF:
            raise EncodeError(f"parameter length {length} exceeds 65535")
        return struct.pack("!HH", self.param_type, length) + value

    def encode(self) -> bytes:
        """Type, length (header plus value), value, padding to 4 bytes."""
        tlv = self._tlv()
        return tlv + _padding(len(tlv))

    @classmethod
    def decode(cls, data: bytes) -> ParameterBase:
        """Decode exactly one parameter (its padding may be present or not).

        Called on a typed class, the parameter must be of that class.
        """
        items = _split_tlvs(bytes(data), LAYER, "parameter", 0)
        if len(items) != 1:
            raise DecodeError(LAYER, f"expected one parameter, found {len(items)}")
        parameter = parameter_from_tlv(*items[0])
        if cls is not ParameterBase and not isinstance(parameter, cls):
            raise DecodeError(LAYER, f"parameter is a {type(parameter).__name__}, not a {cls.__name__}")
        return parameter


@dataclass(frozen=True)
class Parameter(ParameterBase):
    """A parameter of any type as type number and value bytes, kept intact."""

    param_type: int
    value: bytes = b""  # type: ignore[assignment]

    def value_bytes(self) -> bytes:
        return bytes(self.value)


class TypedParameter(ParameterBase):
    """A parameter whose value this codec parses; `PARAM_TYPE` is its type number."""

    PARAM_TYPE: ClassVar[ParameterType]

    @property  # type: ignore[override]
    def param_type(self) -> ParameterType:
        return self.PARAM_TYPE


@dataclass(frozen=True)
class HeartbeatInfoParameter(TypedParameter):
    """Heartbeat Info, type 1 (RFC 4960 3.3.5): sender-specific bytes echoed back."""

    info: bytes = b""

    PARAM_TYPE: ClassVar[ParameterType] = ParameterType.HEARTBEAT_INFO

    def value_bytes(self) -> bytes:
        return bytes(self.info)


@dataclass(frozen=True)
class Ipv4AddressParameter(TypedParameter):
    """IPv4 Address, type 5 (RFC 4960 3.3.2.1); `address` accepts a str and becomes an IPv4Address."""

    address: ipaddress.IPv4Address

    PARAM_TYPE: ClassVar[ParameterType] = ParameterType.IPV4_ADDRESS

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "address", ipaddress.IPv4Address(self.address))
        except (ValueError, TypeError) as exc:
            raise EncodeError(f"not an IPv4 address: {self.address!r}") from exc

    def value_bytes(self) -> bytes:
        return self.address.packed


@dataclass(frozen=True)
class StateCookieParameter(TypedParameter):
    """State Cookie, type 7 (RFC 4960 3.3.3): opaque bytes, mandatory in INIT ACK."""

    cookie: bytes = b""

    PARAM_TYPE: ClassVar[ParameterType] = ParameterType.STATE_COOKIE

    def value_bytes(self) -> bytes:
        return bytes(self.cookie)


@dataclass(frozen=True)
class UnrecognizedParameter(TypedParameter):
    """Unrecognized Parameter, type 8 (RFC 4960 3.3.3): an INIT parameter the INIT ACK's sender reports,
    "copied from the INIT chunk complete with Parameter Type, Length, and Value fields" (its padding
    is not part of it)."""

    parameter: ParameterBase

    PARAM_TYPE: ClassVar[ParameterType] = ParameterType.UNRECOGNIZED_PARAMETER

    def value_bytes(self) -> bytes:
        return self.parameter._tlv()


@dataclass(frozen=True)
class SupportedAddressTypesParameter(TypedParameter):
    """Supported Address Types, type 12 (RFC 4960 3.3.2.1): 16-bit parameter type numbers."""

    address_types: tuple[int, ...] = (ParameterType.IPV4_ADDRESS,)

    PARAM_TYPE: ClassVar[ParameterType] = ParameterType.SUPPORTED_ADDRESS_TYPES

    def __post_init__(self) -> None:
        object.__setattr__(self, "address_types", tuple(self.address_types))

    def value_bytes(self) -> bytes:
        for address_type in self.address_types:
            check_field(address_type, 16, "address type")
        return b"".join(struct.pack("!H", t) for t in self.address_types)


@dataclass(frozen=True)
class AdaptationLayerIndication(TypedParameter):
    """Adaptation Layer Indication, type 0xC006 (RFC 5061 4.2.5); DDP uses code point 1 (RFC 5043 5.1)."""

    code_point: int = ADAPTATION_CODE_POINT_DDP

    PARAM_TYPE: ClassVar[ParameterType] = ParameterType.ADAPTATION_LAYER_INDICATION

    def value_bytes(self) -> bytes:
        return struct.pack("!I", check_field(self.code_point, 32, "adaptation code point"))


def parameter_from_tlv(param_type: int, value: bytes, offset: int = 0) -> ParameterBase:
    """The typed parameter for a known type with a well-formed value, else a generic `Parameter`.

    A known type whose value has the wrong size is a DecodeError.
    """
    if param_type == ParameterType.HEARTBEAT_INFO:
        return HeartbeatInfoParameter(info=value)
    if param_type == ParameterType.STATE_COOKIE:
        return StateCookieParameter(cookie=value)
    if param_type == ParameterType.UNRECOGNIZED_PARAMETER:
        try:
            [(wrapped_type, wrapped_value, _)] = _split_tlvs(value, LAYER, "parameter", offset + 4)
            return UnrecognizedParameter(parameter=parameter_from_tlv(wrapped_type, wrapped_value, offset + 4))
        except (DecodeError, ValueError):
            return Parameter(param_type=param_type, value=value)  # not one whole parameter: kept as bytes
    if param_type == ParameterType.IPV4_ADDRESS:
        if len(value) != 4:
            raise DecodeError(LAYER, f"IPv4 Address parameter of {len(value)} value bytes", offset)
        return Ipv4AddressParameter(address=ipaddress.IPv4Address(value))
    if param_type == ParameterType.SUPPORTED_ADDRESS_TYPES:
        if len(value) % 2:
            raise DecodeError(LAYER, "Supported Address Types value of odd length", offset)
        types = struct.unpack(f"!{len(value) // 2}H", value)
        return SupportedAddressTypesParameter(address_types=tuple(types))
    if param_type == ParameterType.ADAPTATION_LAYER_INDICATION:
        if len(value) != 4:
            raise DecodeError(LAYER, f"Adaptation Layer Indication of {len(value)} value bytes", offset)
        return AdaptationLayerIndication(code_point=struct.unpack("!I", value)[0])
    return Parameter(param_type=param_type, value=value)


def encode_parameters(parameters: tuple[ParameterBase, ...] | list[ParameterBase]) -> bytes:
    """Parameters back to back, padded between them, the last one's padding left out (3.2)."""
    return _join_padded_tlvs([p._tlv() for p in parameters])


def decode_parameters(data: bytes, base_offset: int = 0) -> tuple[ParameterBase, ...]:
    """Decode a run of padded parameters (the variable part of INIT, INIT ACK, HEARTBEAT)."""
    return tuple(
        parameter_from_tlv(t, v, o) for t, v, o in _split_tlvs(bytes(data), LAYER, "parameter", base_offset)
    )


# --------------------------------------------------------------------------
# Error causes, RFC 4960 3.3.10.


class ErrorCauseCode(IntEnum):
    """Error cause codes of RFC 4960 3.3.10."""

    INVALID_STREAM_IDENTIFIER = 1
    MISSING_MANDATORY_PARAMETER = 2
    STALE_COOKIE = 3
    OUT_OF_RESOURCE = 4
    UNRESOLVABLE_ADDRESS = 5
    UNRECOGNIZED_CHUNK_TYPE = 6
    INVALID_MANDATORY_PARAMETER = 7
    UNRECOGNIZED_PARAMETERS = 8
    NO_USER_DATA = 9
    COOKIE_WHILE_SHUTTING_DOWN = 10
    RESTART_WITH_NEW_ADDRESSES = 11
    USER_INITIATED_ABORT = 12
    PROTOCOL_VIOLATION = 13


@dataclass(frozen=True)
class ErrorCause:
    """An error cause (RFC 4960 3.3.10): code (16), length (16), cause-specific bytes, padded."""

    code: int
    value: bytes = b""

    def _tlv(self) -> bytes:
        check_field(self.code, 16, "error cause code")
        length = 4 + len(self.value)
        if length > 0xFFFF:
            raise EncodeError(f"error cause length {length} exceeds 65535")
        return struct.pack("!HH", self.code, length) + bytes(self.value)

    def encode(self) -> bytes:
        tlv = self._tlv()
        return tlv + _padding(len(tlv))

    @classmethod
    def decode(cls, data: bytes) -> ErrorCause:
        """Decode exactly one error cause (its padding may be present or not)."""
        causes = decode_error_causes(data)
        if len(causes) != 1:
            raise DecodeError(LAYER, f"expected one error cause, found {len(causes)}")
        return causes[0]


def unrecognized_parameters_cause(parameters: tuple[ParameterBase, ...] | list[ParameterBase]) -> ErrorCause:
    """Unrecognized Parameters cause (RFC 4960 3.3.10.8): the INIT ACK's unrecognized parameters, each
    complete with type, length and value, padded between them as in a chunk (3.2)."""
    return ErrorCause(ErrorCauseCode.UNRECOGNIZED_PARAMETERS, encode_parameters(parameters))


def encode_error_causes(causes: tuple[ErrorCause, ...] | list[ErrorCause]) -> bytes:
    return _join_padded_tlvs([c._tlv() for c in causes])


def decode_error_causes(data: bytes, base_offset: int = 0) -> tuple[ErrorCause, ...]:
    return tuple(ErrorCause(t, v) for t, v, _ in _split_tlvs(bytes(data), LAYER, "error cause", base_offset))


# --------------------------------------------------------------------------
# Chunks, RFC 4960 3.2 and 3.3.


class ChunkType(IntEnum):
    """Chunk type numbers, RFC 4960 3.2."""

    DATA = 0
    INIT = 1
    INIT_ACK = 2
    SACK = 3
    HEARTBEAT = 4
    HEARTBEAT_ACK = 5
    ABORT = 6
    SHUTDOWN = 7
    SHUTDOWN_ACK = 8
    ERROR = 9
    COOKIE_ECHO = 10
    COOKIE_ACK = 11
    SHUTDOWN_COMPLETE = 14


FLAG_T = 0x01
"""T bit of ABORT and SHUTDOWN COMPLETE: the verification tag is reflected (RFC 4960 3.3.7, 3.3.13)."""


class Chunk:
    """Base of every chunk: `encode()` gives type, flags, length, value and padding (RFC 4960 3.2)."""

    def _type_number(self) -> int:
        raise NotImplementedError

    def _flags(self) -> int:
        return 0

    def _value(self) -> bytes:
        return b""

    def _tlv(self) -> bytes:
        value = self._value()
        length = CHUNK_HEADER_LENGTH + len(value)
        if length > 0xFFFF:
            raise EncodeError(f"chunk length {length} exceeds 65535")
        return struct.pack("!BBH", self._type_number(), self._flags(), length) + value

    def encode(self) -> bytes:
        tlv = self._tlv()
        return tlv + _padding(len(tlv))

    @classmethod
    def decode(cls, data: bytes) -> Chunk:
        """Decode exactly one chunk (trailing padding optional).

        Called on a concrete class, the chunk must be of that class.
        """
        chunks = decode_chunks(data)
        if len(chunks) != 1:
            raise DecodeError(LAYER, f"expected one chunk, found {len(chunks)}")
        if cls is not Chunk and not isinstance(chunks[0], cls):
            raise DecodeError(LAYER, f"chunk is a {type(chunks[0]).__name__}, not a {cls.__name__}")
        return chunks[0]


class KnownChunk(Chunk):
    """A chunk of a type this codec parses; `CHUNK_TYPE` is its type number."""

    CHUNK_TYPE: ClassVar[ChunkType]

    @property
    def chunk_type(self) -> ChunkType:
        return self.CHUNK_TYPE

    def _type_number(self) -> int:
        return self.CHUNK_TYPE

    @classmethod
    def _from_value(cls, flags: int, value: bytes, offset: int) -> KnownChunk:
        raise NotImplementedError


def _need_exact(value: bytes, length: int, what: str, offset: int) -> None:
    if len(value) != length:
        raise DecodeError(LAYER, f"{what} chunk value must be {length} bytes, got {len(value)}", offset)


_DATA_CHUNK_HEADER = struct.Struct("!BBHIHHI")
_DATA_TYPE, _SACK_TYPE = int(ChunkType.DATA), int(ChunkType.SACK)
"""Packed into every DATA and SACK chunk under their names (an enum member's class attribute is a descriptor
call in Python 3.11, a module name a dict lookup)."""
"""Type, flags, length, TSN, stream, SSN and PPID of a DATA chunk (RFC 4960 3.3.1)."""
_PADDING = (b"", b"\x00", b"\x00\x00", b"\x00\x00\x00")
"""Padding by its length (RFC 4960 3.2)."""


@dataclass(frozen=True, slots=True)
class DataChunk(KnownChunk):
    """DATA, RFC 4960 3.3.1 (I bit from RFC 7053).

    A DATA chunk without user data is carried both ways; RFC 4960 6.2 makes
    the receiver answer it with an ABORT ("No User Data").
    """

    tsn: int
    stream_id: int
    ssn: int
    ppid: int
    user_data: bytes = b""
    unordered: bool = False
    beginning: bool = True
    ending: bool = True
    immediate: bool = False

    CHUNK_TYPE: ClassVar[ChunkType] = ChunkType.DATA
    FLAG_I: ClassVar[int] = 0x08
    FLAG_U: ClassVar[int] = 0x04
    FLAG_B: ClassVar[int] = 0x02
    FLAG_E: ClassVar[int] = 0x01
    HEADER_LENGTH: ClassVar[int] = 16

    def _flags(self) -> int:
        return (
            (self.FLAG_I if self.immediate else 0)
            | (self.FLAG_U if self.unordered else 0)
            | (self.FLAG_B if self.beginning else 0)
            | (self.FLAG_E if self.ending else 0)
        )

    def _value(self) -> bytes:
        check_field(self.tsn, 32, "tsn")
        check_field(self.stream_id, 16, "stream_id")
        check_field(self.ssn, 16, "ssn")
        check_field(self.ppid, 32, "ppid")
        return struct.pack("!IHHI", self.tsn, self.stream_id, self.ssn, self.ppid) + bytes(self.user_data)

    def encode(self) -> bytes:
        """The chunk header and DATA header in one `struct.pack`, then the user data and its padding (3.2,
        3.3.1): the chunk every data packet carries, so it skips the generic `_tlv` path (same bytes)."""
        return b"".join(self.encoded_parts())

    def encoded_parts(self) -> tuple[bytes, bytes, bytes]:
        """`encode` in its three parts, the headers, the user data and the padding, for a packet that joins
        its chunks once (`encode_packet`). The pack checks the fields' ranges; only when it refuses one do
        `_value`'s checks run, to name it."""
        user_data = self.user_data
        length = self.HEADER_LENGTH + len(user_data)
        if length > 0xFFFF:
            raise EncodeError(f"chunk length {length} exceeds 65535")
        try:
            header = _DATA_CHUNK_HEADER.pack(_DATA_TYPE, self._flags(), length, self.tsn, self.stream_id,
                                             self.ssn, self.ppid)
        except struct.error:
            self._value()   # raises the EncodeError that names the field
            raise
        return header, user_data, _PADDING[-length % 4]

    @classmethod
    def _from_value(cls, flags: int, value: bytes, offset: int) -> DataChunk:
        need(value, 12, LAYER, "DATA chunk header", 0)
        tsn, stream_id, ssn, ppid = struct.unpack_from("!IHHI", value, 0)
        return cls(
            tsn=tsn,
            stream_id=stream_id,
            ssn=ssn,
            ppid=ppid,
            user_data=value[12:],
            unordered=bool(flags & cls.FLAG_U),
            beginning=bool(flags & cls.FLAG_B),
            ending=bool(flags & cls.FLAG_E),
            immediate=bool(flags & cls.FLAG_I),
        )


@dataclass(frozen=True)
class _InitFields(KnownChunk):
    """Fixed fields and parameters shared by INIT and INIT ACK (RFC 4960 3.3.2, 3.3.3)."""

    initiate_tag: int
    a_rwnd: int
    outbound_streams: int
    inbound_streams: int
    initial_tsn: int
    parameters: tuple[ParameterBase, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", tuple(self.parameters))

    @property
    def adaptation_code_point(self) -> int | None:
        """Code point of the Adaptation Layer Indication parameter, or None (RFC 5061 4.2.5)."""
        for parameter in self.parameters:
            if isinstance(parameter, AdaptationLayerIndication):
                return parameter.code_point
        return None

    def _value(self) -> bytes:
        check_field(self.initiate_tag, 32, "initiate_tag")
        check_field(self.a_rwnd, 32, "a_rwnd")
        check_field(self.outbound_streams, 16, "outbound_streams")
        check_field(self.inbound_streams, 16, "inbound_streams")
        check_field(self.initial_tsn, 32, "initial_tsn")
        fixed = struct.pack(
            "!IIHHI",
            self.initiate_tag,
            self.a_rwnd,
            self.outbound_streams,
            self.inbound_streams,
            self.initial_tsn,
        )
        return fixed + encode_parameters(self.parameters)

    @classmethod
    def _from_value(cls, flags: int, value: bytes, offset: int) -> _InitFields:
        need(value, 16, LAYER, f"{cls.CHUNK_TYPE.name} fixed fields", 0)
        tag, a_rwnd, outbound, inbound, tsn = struct.unpack_from("!IIHHI", value, 0)
        return cls(
            initiate_tag=tag,
            a_rwnd=a_rwnd,
            outbound_streams=outbound,
            inbound_streams=inbound,
            initial_tsn=tsn,
            parameters=decode_parameters(value[16:], offset + CHUNK_HEADER_LENGTH + 16),
        )


@dataclass(frozen=True)
class InitChunk(_InitFields):
    """INIT, RFC 4960 3.3.2.  An Initiate Tag of 0 is carried; 3.3.2 makes the receiver ABORT."""

    CHUNK_TYPE: ClassVar[ChunkType] = ChunkType.INIT


@dataclass(frozen=True)
class InitAckChunk(_InitFields):
    """INIT ACK, RFC 4960 3.3.3; its State Cookie parameter is mandatory (see `state_cookie`)."""

    CHUNK_TYPE: ClassVar[ChunkType] = ChunkType.INIT_ACK

    @property
    def state_cookie(self) -> bytes | None:
        """Bytes of the State Cookie parameter, or None if the chunk lacks it."""
        for parameter in self.parameters:
            if isinstance(parameter, StateCookieParameter):
                return parameter.cookie
        return None


SACK_FIXED_FIELDS = struct.Struct("!BBHIIHH")
"""Type, flags, length, Cumulative TSN Ack, a_rwnd and the two counts of a SACK chunk (RFC 4960 3.3.4)."""
SACK_FIXED_LENGTH = SACK_FIXED_FIELDS.size
"""Cumulative TSN Ack, a_rwnd and the two counts of a SACK chunk, with its header: 16 bytes (RFC 4960 3.3.4)."""


@dataclass(frozen=True, slots=True)
class SackChunk(KnownChunk):
    """SACK, RFC 4960 3.3.4.  Gap blocks are (start, end) offsets from the cumulative TSN ack."""

    cumulative_tsn_ack: int
    a_rwnd: int
    gap_blocks: tuple[tuple[int, int], ...] = ()
    duplicate_tsns: tuple[int, ...] = ()

    CHUNK_TYPE: ClassVar[ChunkType] = ChunkType.SACK

    def __post_init__(self) -> None:
        gap_blocks = self.gap_blocks
        object.__setattr__(self, "gap_blocks", tuple(tuple(b) for b in gap_blocks) if gap_blocks else ())
        object.__setattr__(self, "duplicate_tsns", tuple(self.duplicate_tsns))

    @property
    def encoded_length(self) -> int:
        """`len(self.encode())` without encoding: the header, 12 bytes of fixed fields and 4 per Gap Ack Block
        and duplicate TSN (3.3.4), a multiple of 4, so no padding."""
        return CHUNK_HEADER_LENGTH + 12 + 4 * (len(self.gap_blocks) + len(self.duplicate_tsns))

    def encode(self) -> bytes:
        """A SACK without Gap Ack Blocks or duplicate TSNs, the one an in-order receiver sends, in one
        `struct.pack` (header and fixed fields, 3.3.4: a multiple of 4, no padding); any other through `_tlv`
        (same bytes). The pack checks the fields' ranges; only when it refuses one do `_value`'s checks run, to
        name it."""
        if self.gap_blocks or self.duplicate_tsns:
            return KnownChunk.encode(self)
        try:
            return SACK_FIXED_FIELDS.pack(_SACK_TYPE, 0, SACK_FIXED_LENGTH, self.cumulative_tsn_ack,
                                          self.a_rwnd, 0, 0)
        except struct.error:
            self._value()   # raises the EncodeError that names the field
            raise

    def _value(self) -> bytes:
        check_field(self.cumulative_tsn_ack, 32, "cumulative_tsn_ack")
        check_field(self.a_rwnd, 32, "a_rwnd")
        check_field(len(self.gap_blocks), 16, "number of gap ack blocks")
        check_field(len(self.duplicate_tsns), 16, "number of duplicate TSNs")
        out = [
            struct.pack(
                "!IIHH",
                self.cumulative_tsn_ack,
                self.a_rwnd,
                len(self.gap_blocks),
                len(self.duplicate_tsns),
            )
        ]
        for block in self.gap_blocks:
            if len(block) != 2:
                raise EncodeError(f"gap block {block!r} is not a (start, end) pair")
            start, end = block
            out.append(struct.pack("!HH", check_field(start, 16, "gap start"), check_field(end, 16, "gap end")))
        for tsn in self.duplicate_tsns:
            out.append(struct.pack("!I", check_field(tsn, 32, "duplicate tsn")))
        return b"".join(out)

    @classmethod
    def _from_value(cls, flags: int, value: bytes, offset: int) -> SackChunk:
        need(value, 12, LAYER, "SACK fixed fields", 0)
        cum_ack, a_rwnd, n_gaps, n_dups = struct.unpack_from("!IIHH", value, 0)
        expected = 12 + 4 * n_gaps + 4 * n_dups
        if len(value) != expected:
            raise DecodeError(
                LAYER,
                f"SACK with {n_gaps} gap blocks and {n_dups} duplicate TSNs needs "
                f"{expected} value bytes, has {len(value)}",
                offset,
            )
        gaps = struct.unpack_from(f"!{2 * n_gaps}H", value, 12)
        dups = struct.unpack_from(f"!{n_dups}I", value, 12 + 4 * n_gaps)
        return cls(
            cumulative_tsn_ack=cum_ack,
            a_rwnd=a_rwnd,
            gap_blocks=tuple(zip(gaps[0::2], gaps[1::2])),
            duplicate_tsns=tuple(dups),
        )


@dataclass(frozen=True)
class _HeartbeatFields(KnownChunk):
    """A single Heartbeat Info parameter (RFC 4960 3.3.5, 3.3.6)."""

    info: bytes = b""

    def _value(self) -> bytes:
        return HeartbeatInfoParameter(info=self.info)._tlv()

    @classmethod
    def _from_value(cls, flags: int, value: bytes, offset: int) -> _HeartbeatFields:
        parameters = decode_parameters(value, offset + CHUNK_HEADER_LENGTH)
        if len(parameters) != 1 or not isinstance(parameters[0], HeartbeatInfoParameter):
            raise DecodeError(
                LAYER, f"{cls.CHUNK_TYPE.name} must hold exactly one Heartbeat Info parameter", offset
            )
        return cls(info=parameters[0].info)


@dataclass(frozen=True)
class HeartbeatChunk(_HeartbeatFields):
    """HEARTBEAT, RFC 4960 3.3.5."""

    CHUNK_TYPE: ClassVar[ChunkType] = ChunkType.HEARTBEAT


@dataclass(frozen=True)
class HeartbeatAckChunk(_HeartbeatFields):
    """HEARTBEAT ACK, RFC 4960 3.3.6: echoes the HEARTBEAT's info."""

    CHUNK_TYPE: ClassVar[ChunkType] = ChunkType.HEARTBEAT_ACK


@dataclass(frozen=True)
class AbortChunk(KnownChunk):
    """ABORT, RFC 4960 3.3.7: T flag (tag reflected) and optional error causes."""

    tag_reflected: bool = False
    causes: tuple[ErrorCause, ...] = ()

    CHUNK_TYPE: ClassVar[ChunkType] = ChunkType.ABORT

    def __post_init__(self) -> None:
        object.__setattr__(self, "causes", tuple(self.causes))

    def _flags(self) -> int:
        return FLAG_T if self.tag_reflected else 0

    def _value(self) -> bytes:
        return encode_error_causes(self.causes)

    @classmethod
    def _from_value(cls, flags: int, value: bytes, offset: int) -> AbortChunk:
        return cls(
            tag_reflected=bool(flags & FLAG_T),
            causes=decode_error_causes(value, offset + CHUNK_HEADER_LENGTH),
        )


@dataclass(frozen=True)
class ShutdownChunk(KnownChunk):
    """SHUTDOWN, RFC 4960 3.3.8: cumulative TSN ack (length 8)."""

    cumulative_tsn_ack: int

    CHUNK_TYPE: ClassVar[ChunkType] = ChunkType.SHUTDOWN

    def _value(self) -> bytes:
        return struct.pack("!I", check_field(self.cumulative_tsn_ack, 32, "cumulative_tsn_ack"))

    @classmethod
    def _from_value(cls, flags: int, value: bytes, offset: int) -> ShutdownChunk:
        _need_exact(value, 4, "SHUTDOWN", offset)
        return cls(cumulative_tsn_ack=struct.unpack("!I", value)[0])


@dataclass(frozen=True)
class _EmptyChunk(KnownChunk):
    """A chunk that is only its 4-byte header."""

    def _value(self) -> bytes:
        return b""

    @classmethod
    def _from_value(cls, flags: int, value: bytes, offset: int) -> _EmptyChunk:
        _need_exact(value, 0, cls.CHUNK_TYPE.name, offset)
        return cls()


@dataclass(frozen=True)
class ShutdownAckChunk(_EmptyChunk):
    """SHUTDOWN ACK, RFC 4960 3.3.9 (length 4)."""

    CHUNK_TYPE: ClassVar[ChunkType] = ChunkType.SHUTDOWN_ACK


@dataclass(frozen=True)
class CookieAckChunk(_EmptyChunk):
    """COOKIE ACK, RFC 4960 3.3.12 (length 4)."""

    CHUNK_TYPE: ClassVar[ChunkType] = ChunkType.COOKIE_ACK


@dataclass(frozen=True)
class ShutdownCompleteChunk(KnownChunk):
    """SHUTDOWN COMPLETE, RFC 4960 3.3.13: T flag only (length 4)."""

    tag_reflected: bool = False

    CHUNK_TYPE: ClassVar[ChunkType] = ChunkType.SHUTDOWN_COMPLETE

    def _flags(self) -> int:
        return FLAG_T if self.tag_reflected else 0

    @classmethod
    def _from_value(cls, flags: int, value: bytes, offset: int) -> ShutdownCompleteChunk:
        _need_exact(value, 0, "SHUTDOWN COMPLETE", offset)
        return cls(tag_reflected=bool(flags & FLAG_T))


@dataclass(frozen=True)
class ErrorChunk(KnownChunk):
    """ERROR (Operation Error), RFC 4960 3.3.10: one or more error causes."""

    causes: tuple[ErrorCause, ...] = ()

    CHUNK_TYPE: ClassVar[ChunkType] = ChunkType.ERROR

    def __post_init__(self) -> None:
        object.__setattr__(self, "causes", tuple(self.causes))

    def _value(self) -> bytes:
        return encode_error_causes(self.causes)

    @classmethod
    def _from_value(cls, flags: int, value: bytes, offset: int) -> ErrorChunk:
        return cls(causes=decode_error_causes(value, offset + CHUNK_HEADER_LENGTH))


@dataclass(frozen=True)
class CookieEchoChunk(KnownChunk):
    """COOKIE ECHO, RFC 4960 3.3.11: the State Cookie bytes of the INIT ACK."""

    cookie: bytes = b""

    CHUNK_TYPE: ClassVar[ChunkType] = ChunkType.COOKIE_ECHO

    def _value(self) -> bytes:
        return bytes(self.cookie)

    @classmethod
    def _from_value(cls, flags: int, value: bytes, offset: int) -> CookieEchoChunk:
        return cls(cookie=value)


@dataclass(frozen=True)
class UnknownChunk(Chunk):
    """Any chunk type this codec does not parse, kept byte for byte (RFC 4960 3.2).

    The two high bits of the type say what a receiver that does not know the
    type must do: see `unrecognized_action`.
    """

    chunk_type: int
    flags: int = 0
    value: bytes = b""

    def _type_number(self) -> int:
        return check_field(self.chunk_type, 8, "chunk type")

    def _flags(self) -> int:
        return check_field(self.flags, 8, "chunk flags")

    def _value(self) -> bytes:
        return bytes(self.value)

    @property
    def unrecognized_action(self) -> UnrecognizedAction:
        """RFC 4960 3.2: 00 stop and discard the packet, 01 also report, 10 skip, 11 skip and report."""
        return UnrecognizedAction(self.chunk_type >> 6)


CHUNK_CLASSES: dict[int, type[KnownChunk]] = {
    cls.CHUNK_TYPE: cls
    for cls in (
        DataChunk,
        InitChunk,
        InitAckChunk,
        SackChunk,
        HeartbeatChunk,
        HeartbeatAckChunk,
        AbortChunk,
        ShutdownChunk,
        ShutdownAckChunk,
        ErrorChunk,
        CookieEchoChunk,
        CookieAckChunk,
        ShutdownCompleteChunk,
    )
}

AnyChunk = Union[
    DataChunk,
    InitChunk,
    InitAckChunk,
    SackChunk,
    HeartbeatChunk,
    HeartbeatAckChunk,
    AbortChunk,
    ShutdownChunk,
    ShutdownAckChunk,
    ErrorChunk,
    CookieEchoChunk,
    CookieAckChunk,
    ShutdownCompleteChunk,
    UnknownChunk,
]


def encode_chunks(chunks: tuple[Chunk, ...] | list[Chunk]) -> bytes:
    """Bundle chunks, each padded to 4 bytes (RFC 4960 3.2, 6.10)."""
    return b"".join(chunk.encode() for chunk in chunks)


class ChunkWalkStop(Enum):
    """Why `walk_chunks` stopped before the end of the packet (RFC 4960 3.2)."""

    HEADER_PAST_END = 1
    """Fewer than 4 bytes left for a chunk header."""
    LENGTH_BELOW_HEADER = 2
    """A Length field below the 4 bytes of the chunk header."""
    LENGTH_PAST_END = 3
    """A Length field that runs past the end of the packet."""


@dataclass(frozen=True)
class RawChunk:
    """One chunk as it lies in a packet, not yet decoded (RFC 4960 3.2).

    `data` is the chunk's header and value, `length` bytes, without padding;
    `offset` is where it starts (with `walk_chunks`' base offset added).
    """

    offset: int
    data: bytes

    @property
    def chunk_type(self) -> int:
        return self.data[0]

    @property
    def flags(self) -> int:
        return self.data[1]

    @property
    def value(self) -> bytes:
        return self.data[CHUNK_HEADER_LENGTH:]

    @property
    def data_tsn(self) -> int | None:
        """The TSN of a DATA chunk (RFC 4960 3.3.1) long enough to hold one (length >= 8), even
        when it is too short for the rest of the DATA header; None otherwise."""
        if self.chunk_type != ChunkType.DATA or len(self.value) < 4:
            return None
        return struct.unpack_from("!I", self.value, 0)[0]

    def decode(self) -> AnyChunk:
        """The typed chunk (`UnknownChunk` for a type this codec does not parse); DecodeError when
        the value does not fit its type."""
        cls = CHUNK_CLASSES.get(self.chunk_type)
        if cls is None:
            return UnknownChunk(chunk_type=self.chunk_type, flags=self.flags, value=self.value)
        return cls._from_value(self.flags, self.value, self.offset)  # type: ignore[return-value]


@dataclass(frozen=True)
class BrokenChunk:
    """Where `walk_chunks` stopped: `reason`, and the bytes from the broken chunk's start to the
    end of the packet (`data`, fewer than 4 of them for HEADER_PAST_END)."""

    offset: int
    reason: ChunkWalkStop
    data: bytes

    @property
    def chunk_type(self) -> int | None:
        """The type byte, if the packet holds it."""
        return self.data[0] if self.data else None

    @property
    def flags(self) -> int | None:
        """The flags byte, if the packet holds it."""
        return self.data[1] if len(self.data) > 1 else None

    def error(self) -> DecodeError:
        """The DecodeError a strict decoder raises for this chunk."""
        if self.reason is ChunkWalkStop.HEADER_PAST_END:
            return DecodeError(LAYER, f"chunk header needs {CHUNK_HEADER_LENGTH} bytes, only {len(self.data)} left",
                               self.offset)
        (length,) = struct.unpack_from("!H", self.data, 2)
        if self.reason is ChunkWalkStop.LENGTH_BELOW_HEADER:
            return DecodeError(LAYER, f"chunk length {length} below {CHUNK_HEADER_LENGTH}", self.offset)
        return DecodeError(LAYER, f"chunk length {length} past the end of the packet", self.offset)


def walk_chunks(data: bytes, base_offset: int = 0) -> Iterator[RawChunk | BrokenChunk]:
    """The bundled chunks of `data` (the packet after its common header) in order, undecoded (RFC 4960 3.2).

    Yields a `RawChunk` for every chunk that lies whole in `data`; a chunk
    header that runs past the end, or a Length below 4 or past the end, ends
    the walk with a `BrokenChunk` as the last item (the chunks before it
    still count for a receiver that processes chunk by chunk). Padding bytes
    are skipped whatever they hold; the last chunk may lack its padding.
    `base_offset` is added to the offsets.
    """
    data = bytes(data)
    offset = 0
    while offset < len(data):
        start = base_offset + offset
        if len(data) - offset < CHUNK_HEADER_LENGTH:
            yield BrokenChunk(start, ChunkWalkStop.HEADER_PAST_END, data[offset:])
            return
        (length,) = struct.unpack_from("!H", data, offset + 2)
        if length < CHUNK_HEADER_LENGTH:
            yield BrokenChunk(start, ChunkWalkStop.LENGTH_BELOW_HEADER, data[offset:])
            return
        if offset + length > len(data):
            yield BrokenChunk(start, ChunkWalkStop.LENGTH_PAST_END, data[offset:])
            return
        yield RawChunk(start, data[offset : offset + length])
        offset += length
        offset += min(-length % 4, len(data) - offset)


def decode_chunks(data: bytes, base_offset: int = 0) -> tuple[AnyChunk, ...]:
    """Unbundle and decode chunks (RFC 4960 3.2).

    A chunk length below 4 or past the end of `data` is a DecodeError; padding
    bytes are ignored; the last chunk may lack its padding.  `base_offset` is
    added to the offsets reported in errors.
    """
    data = bytes(data)
    return _decode_chunks_from(data, 0, base_offset)


_CHUNK_HEADER = struct.Struct("!BBH")
"""Type, flags and length of a chunk (RFC 4960 3.2)."""


def _decode_chunks_from(data: bytes, start: int, base_offset: int) -> tuple[AnyChunk, ...]:
    """`decode_chunks` of `data[start:]` without copying it first: the strict walk of `walk_chunks` done in
    place, one typed chunk per chunk and no `RawChunk` between (a receiver's every packet comes this way)."""
    chunks: list[AnyChunk] = []
    offset, end = start, len(data)
    while offset < end:
        at = base_offset + offset - start
        if end - offset < CHUNK_HEADER_LENGTH:
            raise BrokenChunk(at, ChunkWalkStop.HEADER_PAST_END, data[offset:]).error()
        chunk_type, flags, length = _CHUNK_HEADER.unpack_from(data, offset)
        if length < CHUNK_HEADER_LENGTH:
            raise BrokenChunk(at, ChunkWalkStop.LENGTH_BELOW_HEADER, data[offset:]).error()
        if offset + length > end:
            raise BrokenChunk(at, ChunkWalkStop.LENGTH_PAST_END, data[offset:]).error()
        value = data[offset + CHUNK_HEADER_LENGTH : offset + length]
        cls = CHUNK_CLASSES.get(chunk_type)
        chunks.append(UnknownChunk(chunk_type=chunk_type, flags=flags, value=value) if cls is None
                      else cls._from_value(flags, value, at))  # type: ignore[arg-type]
        offset += length
        offset += min(-length % 4, end - offset)   # padding, which the last chunk may lack (3.2)
    return tuple(chunks)


# --------------------------------------------------------------------------
# The packet, RFC 4960 3.1 and 6.8.


@dataclass(frozen=True)
class CommonHeader:
    """The SCTP common header (RFC 4960 3.1): ports, verification tag and the received CRC32c."""

    src_port: int
    dst_port: int
    verification_tag: int
    checksum: int  # as sent: the CRC32c value, stored least-significant byte first (6.8)

    LENGTH: ClassVar[int] = COMMON_HEADER_LENGTH

    @classmethod
    def decode(cls, data: bytes) -> CommonHeader:
        """Decode the header at the start of `data` (the chunks that follow are not examined)."""
        need(data, COMMON_HEADER_LENGTH, LAYER, "common header")
        src_port, dst_port, tag = struct.unpack_from("!HHI", data, 0)
        return cls(src_port, dst_port, tag, sctp_checksum_from_bytes(bytes(data[8:12])))


def checksum_ok(packet: bytes) -> bool:
    """True if the CRC32c in the packet's checksum field matches its bytes (RFC 4960 6.8): `sctp_checksum` in
    place (asked of every packet received), over memoryview slices, the field taken as zero."""
    if len(packet) < COMMON_HEADER_LENGTH:
        return False
    view = memoryview(packet)
    crc = _crc32c(view[12:], _crc32c(_ZERO_CHECKSUM_FIELD, _crc32c(view[:8], 0)))
    return int.from_bytes(view[8:12], "little") == crc   # the field: least-significant byte first


@dataclass(frozen=True)
class SctpPacket:
    """An SCTP packet: common header and one or more chunks (RFC 4960 3, 3.1).

    `checksum_ok` is False only for a packet decoded with
    `verify_checksum=False` whose CRC32c did not match.
    """

    src_port: int
    dst_port: int
    verification_tag: int
    chunks: tuple[Chunk, ...]
    checksum_ok: bool = field(default=True, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "chunks", tuple(self.chunks))

    def encode(self) -> bytes:
        """Header and bundled chunks, CRC32c inserted least-significant byte first (RFC 4960 6.8)."""
        return encode_packet(self.src_port, self.dst_port, self.verification_tag, self.chunks)

    @classmethod
    def decode(cls, data: bytes, verify_checksum: bool = True, checksum_checked: bool = False) -> SctpPacket:
        """Decode a packet; raise ChecksumError on a CRC32c mismatch unless verify_checksum is False.
        `checksum_checked`: the caller has verified the CRC32c already (`checksum_ok`), so it is not computed
        a second time (RFC 4960 6.8 asks for it once per packet)."""
        data = bytes(data)
        need(data, COMMON_HEADER_LENGTH, LAYER, "common header")
        src_port, dst_port, tag = _COMMON_HEADER_FIELDS.unpack_from(data, 0)
        matches = True
        if not checksum_checked:
            received, computed = sctp_checksum_from_bytes(data[8:12]), sctp_checksum(data)
            matches = received == computed
            if not matches and verify_checksum:
                raise ChecksumError(LAYER, computed, received)
        chunks = _decode_chunks_from(data, COMMON_HEADER_LENGTH, COMMON_HEADER_LENGTH)
        if not chunks:
            raise DecodeError(LAYER, "packet without chunks (RFC 4960 3)", COMMON_HEADER_LENGTH)
        return cls(src_port=src_port, dst_port=dst_port, verification_tag=tag, chunks=chunks,
                   checksum_ok=matches)


_COMMON_HEADER = struct.Struct("!HHII")
"""Source port, destination port, verification tag and checksum (RFC 4960 3.1)."""


def encode_packet(src_port: int, dst_port: int, verification_tag: int,
                  chunks: tuple[Chunk, ...] | list[Chunk]) -> bytes:
    """`SctpPacket(...).encode()` without the packet object, for a sender that has its chunks at hand.  The
    pack checks the header's ranges; only when it refuses one do the field checks run, to name it."""
    try:
        header = _COMMON_HEADER.pack(src_port, dst_port, verification_tag, 0)
    except struct.error:
        check_field(src_port, 16, "src_port")
        check_field(dst_port, 16, "dst_port")
        check_field(verification_tag, 32, "verification_tag")
        raise
    if not chunks:
        raise EncodeError("an SCTP packet carries at least one chunk (RFC 4960 3)")
    # The chunks joined once (a DATA chunk's user data copied once), then the header with the CRC32c of both,
    # its field taken as zero (6.8).
    parts: list[bytes] = []
    for chunk in chunks:
        if type(chunk) is DataChunk:
            parts += chunk.encoded_parts()
        else:
            parts.append(chunk.encode())
    body = b"".join(parts)
    return b"".join((header[:8], sctp_checksum_field_of_parts(header, body), body))
_COMMON_HEADER_FIELDS = struct.Struct("!HHI")

"""DDP headers and segments: RFC 5041 4 (Header Format).

A DDP Segment (RFC 5041 4.4) is a DDP header followed by ULP payload.  The
header is either the 14-byte Tagged Buffer Model header (4.2) or the 18-byte
Untagged Buffer Model header (4.3); the T bit of the DDP Control Field (4.1)
chooses between them.

Decoding is deliberately lenient about the fields a Data Sink must report
rather than reject: a DV other than 1 and non-zero reserved bits are decoded
and kept (`dv`, `rsvd`) so that the sink can raise the RFC 5041 7.2 "Invalid
DDP version" error of the right type, and because reserved bits are "not
checked on receive" (4.1).  Only bytes too short for the header raise
`DecodeError`.  Encoders check every field with `check_field`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Union

from model.errors import DecodeError, check_field, need

LAYER = "DDP"

DDP_VERSION = 1
"""RFC 5041 4.1: DV MUST be set to one."""

TAGGED_HEADER_LENGTH = 14
UNTAGGED_HEADER_LENGTH = 18

# RFC 5041 4.1: DDP Control Field bits.
_T_BIT = 0x80
_L_BIT = 0x40
_RSVD_MASK = 0x3C
_RSVD_SHIFT = 2
_DV_MASK = 0x03

_TAGGED = struct.Struct("!BBIQ")
_UNTAGGED = struct.Struct("!B5sIII")


def _control_byte(tagged: bool, last: bool, rsvd: int, dv: int) -> int:
    """Build the DDP Control Field byte (RFC 5041 4.1)."""
    check_field(rsvd, 4, "DDP Rsvd")
    check_field(dv, 2, "DDP DV")
    return (_T_BIT if tagged else 0) | (_L_BIT if last else 0) | (rsvd << _RSVD_SHIFT) | dv


@dataclass(frozen=True)
class ControlField:
    """The DDP Control Field, RFC 5041 4.1: T, L, Rsvd (4 bits), DV (2 bits)."""

    tagged: bool
    last: bool
    rsvd: int = 0
    dv: int = DDP_VERSION

    def encode(self) -> bytes:
        return bytes([_control_byte(self.tagged, self.last, self.rsvd, self.dv)])

    @classmethod
    def decode(cls, data: bytes) -> ControlField:
        need(data, 1, LAYER, "DDP Control Field")
        byte = data[0]
        return cls(
            tagged=bool(byte & _T_BIT),
            last=bool(byte & _L_BIT),
            rsvd=(byte & _RSVD_MASK) >> _RSVD_SHIFT,
            dv=byte & _DV_MASK,
        )


@dataclass(frozen=True, slots=True)
class TaggedHeader:
    """Tagged Buffer Model header, RFC 5041 4.2 (14 bytes)."""

    last: bool
    rsvd_ulp: int
    stag: int
    to: int
    rsvd: int = 0
    dv: int = DDP_VERSION

    tagged = True
    length = TAGGED_HEADER_LENGTH

    @property
    def version_ok(self) -> bool:
        """RFC 5041 4.1: DV must be 1."""
        return self.dv == DDP_VERSION

    def encode(self) -> bytes:
        control = _control_byte(True, self.last, self.rsvd, self.dv)
        return _TAGGED.pack(
            control,
            check_field(self.rsvd_ulp, 8, "DDP RsvdULP (tagged)"),
            check_field(self.stag, 32, "DDP STag"),
            check_field(self.to, 64, "DDP TO"),
        )

    @classmethod
    def decode(cls, data: bytes) -> TaggedHeader:
        need(data, TAGGED_HEADER_LENGTH, LAYER, "tagged DDP header")
        control, rsvd_ulp, stag, to = _TAGGED.unpack_from(data, 0)   # the whole header in one unpack
        if not control & _T_BIT:
            raise DecodeError(LAYER, "T bit is 0 in a tagged header", 0)
        return cls(bool(control & _L_BIT), rsvd_ulp, stag, to, (control & _RSVD_MASK) >> _RSVD_SHIFT,
                   control & _DV_MASK)


@dataclass(frozen=True, slots=True)
class UntaggedHeader:
    """Untagged Buffer Model header, RFC 5041 4.3 (18 bytes)."""

    last: bool
    rsvd_ulp: int
    qn: int
    msn: int
    mo: int
    rsvd: int = 0
    dv: int = DDP_VERSION

    tagged = False
    length = UNTAGGED_HEADER_LENGTH

    @property
    def version_ok(self) -> bool:
        """RFC 5041 4.1: DV must be 1."""
        return self.dv == DDP_VERSION

    def encode(self) -> bytes:
        control = _control_byte(False, self.last, self.rsvd, self.dv)
        rsvd_ulp = check_field(self.rsvd_ulp, 40, "DDP RsvdULP (untagged)").to_bytes(5, "big")
        return _UNTAGGED.pack(
            control,
            rsvd_ulp,
            check_field(self.qn, 32, "DDP QN"),
            check_field(self.msn, 32, "DDP MSN"),
            check_field(self.mo, 32, "DDP MO"),
        )

    @classmethod
    def decode(cls, data: bytes) -> UntaggedHeader:
        need(data, UNTAGGED_HEADER_LENGTH, LAYER, "untagged DDP header")
        control, rsvd_ulp, qn, msn, mo = _UNTAGGED.unpack_from(data, 0)   # the whole header in one unpack
        if control & _T_BIT:
            raise DecodeError(LAYER, "T bit is 1 in an untagged header", 0)
        return cls(bool(control & _L_BIT), int.from_bytes(rsvd_ulp, "big"), qn, msn, mo,
                   (control & _RSVD_MASK) >> _RSVD_SHIFT, control & _DV_MASK)


DdpHeader = Union[TaggedHeader, UntaggedHeader]

_TAGGED_CONTROL = (_T_BIT | DDP_VERSION, _T_BIT | _L_BIT | DDP_VERSION)
"""The Control Field of a tagged header (RFC 5041 4.1), by L: T=1, Rsvd 0, DV 1."""
_UNTAGGED_CONTROL = (DDP_VERSION, _L_BIT | DDP_VERSION)


def tagged_header_bytes(last: bool, rsvd_ulp: int, stag: int, to: int) -> bytes:
    """`TaggedHeader(last, rsvd_ulp, stag, to).encode()` for fields the caller has checked (a Data Source that
    checked its message whole, `model.ddp.source`): the same 14 bytes, without the object."""
    return _TAGGED.pack(_TAGGED_CONTROL[last], rsvd_ulp, stag, to)


def untagged_header_bytes(last: bool, rsvd_ulp: int, qn: int, msn: int, mo: int) -> bytes:
    """`UntaggedHeader(last, rsvd_ulp, qn, msn, mo).encode()` for fields the caller has checked: the same 18
    bytes, without the object."""
    return _UNTAGGED.pack(_UNTAGGED_CONTROL[last], rsvd_ulp.to_bytes(5, "big"), qn, msn, mo)


def decode_header(data: bytes) -> DdpHeader:
    """Decode the header at the start of `data`, choosing the model by T (RFC 5041 4.1)."""
    need(data, 1, LAYER, "DDP Control Field")
    return TaggedHeader.decode(data) if data[0] & _T_BIT else UntaggedHeader.decode(data)


@dataclass(frozen=True, slots=True)
class DdpSegment:
    """A DDP Segment, RFC 5041 4.4: DDP header + ULP payload (possibly empty)."""

    header: DdpHeader
    payload: bytes = b""

    @property
    def tagged(self) -> bool:
        return self.header.tagged

    def encode(self) -> bytes:
        return self.header.encode() + bytes(self.payload)

    @classmethod
    def decode(cls, data: bytes) -> DdpSegment:
        data = bytes(data)
        header = decode_header(data)
        return cls(header, data[header.length :])

    def __len__(self) -> int:
        return self.header.length + len(self.payload)

"""User data of the DATA chunks of DDP over SCTP (RFC 5043 5.2, RFC 6581 7 and 9).

* `DdpSegmentChunkData`: the user data of a DATA chunk with PPID 16, the
  DDP-SSN followed by a DDP Segment (RFC 5043 5.2.2).
* `SessionControl`: the user data of a DATA chunk with PPID 17, DDP-SSN,
  Function Code and Private Data (RFC 5043 5.2.3), with the enhanced function
  codes of RFC 6581 7.
* `EnhancedData`: the 32-bit enhanced RDMA connection establishment data
  (A, B, IRD, C, D, ORD) of RFC 6581 9 that begins the Private Data of the
  enhanced messages (and of MPA frames with S=1, see `model.mpa.frames`).

Private data limit: RFC 5043 5.2.3 allows at most 512 bytes in any message;
RFC 6581 7 repeats the limit "including enhanced RDMA connection establishment
data", and RFC 6581 9 says the ULP's share is "reduced by 4 bytes".  So the
4 enhanced bytes count toward the 512: an enhanced message carries at most
508 bytes of ULP private data.

Which messages carry enhanced data: RFC 6581 7 and 9 put it at the start of
the Private Data of Enhanced Initiate and Enhanced Accept.  This codec also
expects it at the start of an Enhanced Reject: RFC 6581 7 lets the provider's
reject say which RTR indications it supports and RFC 6581 9 lets a reject
carry the responder ORD it needs, and both exist only in the enhanced data
(as in an MPA Reply with R=1 and S=1).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Callable, ClassVar

from model.errors import DecodeError, EncodeError, check_field, need

LAYER = "ddp-sctp"

MAX_PRIVATE_DATA = 512
"""RFC 5043 5.2.3: Private Data length MUST NOT exceed 512 bytes in any message."""
IRD_ORD_NO_NEGOTIATION = 0x3FFF
"""RFC 6581 9: all ones in IRD or ORD means "no automatic negotiation"."""


class FunctionCode(IntEnum):
    """Session Control function codes: RFC 5043 5.2.3 (1-4) and RFC 6581 7 (5-7)."""

    INITIATE = 0x001
    ACCEPT = 0x002
    REJECT = 0x003
    TERMINATE = 0x004
    ENHANCED_INITIATE = 0x005
    ENHANCED_ACCEPT = 0x006
    ENHANCED_REJECT = 0x007

    @property
    def is_enhanced(self) -> bool:
        """True for the RFC 6581 7 codes, whose Private Data begins with `EnhancedData`."""
        return self in _ENHANCED_CODES


_ENHANCED_CODES = frozenset(
    {FunctionCode.ENHANCED_INITIATE, FunctionCode.ENHANCED_ACCEPT, FunctionCode.ENHANCED_REJECT}
)


@dataclass(frozen=True)
class EnhancedData:
    """Enhanced RDMA connection establishment data, RFC 6581 9: A B IRD(14) C D ORD(14).

    `peer_to_peer` is A; `send_rtr` (B), `write_rtr` (C) and `read_rtr` (D)
    are the zero-length Send, RDMA Write and RDMA Read RTR options.  With A=0
    the sender MUST set B, C and D to 0 (encode refuses otherwise) and the
    receiver MUST ignore them (decode reports them as False).  IRD and ORD are
    14-bit; `IRD_ORD_NO_NEGOTIATION` (0x3FFF) asks for no automatic negotiation.
    """

    peer_to_peer: bool = False
    send_rtr: bool = False
    write_rtr: bool = False
    read_rtr: bool = False
    ird: int = 0
    ord: int = 0

    LENGTH: ClassVar[int] = 4

    def encode(self) -> bytes:
        check_field(self.ird, 14, "ird")
        check_field(self.ord, 14, "ord")
        if not self.peer_to_peer and (self.send_rtr or self.write_rtr or self.read_rtr):
            raise EncodeError("RFC 6581 9: with A=0 the RTR flags B, C and D MUST be 0")
        ird_word = (0x8000 if self.peer_to_peer else 0) | (0x4000 if self.send_rtr else 0) | self.ird
        ord_word = (0x8000 if self.write_rtr else 0) | (0x4000 if self.read_rtr else 0) | self.ord
        return struct.pack("!HH", ird_word, ord_word)

    @classmethod
    def decode(cls, data: bytes) -> EnhancedData:
        """Decode exactly 4 bytes."""
        if len(data) != cls.LENGTH:
            raise DecodeError(LAYER, f"enhanced data must be 4 bytes, got {len(data)}")
        ird_word, ord_word = struct.unpack("!HH", bytes(data))
        peer_to_peer = bool(ird_word & 0x8000)
        return cls(
            peer_to_peer=peer_to_peer,
            send_rtr=peer_to_peer and bool(ird_word & 0x4000),
            write_rtr=peer_to_peer and bool(ord_word & 0x8000),
            read_rtr=peer_to_peer and bool(ord_word & 0x4000),
            ird=ird_word & 0x3FFF,
            ord=ord_word & 0x3FFF,
        )


_DDP_SSN = struct.Struct("!H")


def ddp_segment_chunk_bytes(ddp_ssn: int, segment: bytes) -> bytes:
    """`DdpSegmentChunkData(ddp_ssn, segment).encode()` for a DDP-SSN the caller keeps within 16 bits (the session
    numbering its segments, RFC 5043 5.2.2, 10): the same bytes, without the object."""
    return _DDP_SSN.pack(ddp_ssn) + segment


@dataclass(frozen=True)
class DdpSegmentChunkData:
    """User data of a DDP Segment Chunk (PPID 16), RFC 5043 5.2.2: DDP-SSN (16) and the DDP Segment."""

    ddp_ssn: int
    segment: bytes

    def encode(self) -> bytes:
        return ddp_segment_chunk_bytes(check_field(self.ddp_ssn, 16, "ddp_ssn"), bytes(self.segment))

    @classmethod
    def decode(cls, data: bytes) -> DdpSegmentChunkData:
        """The segment bytes are not examined here (see the DDP codec, RFC 5041 4)."""
        need(data, 2, LAYER, "DDP-SSN")
        (ddp_ssn,) = struct.unpack_from("!H", data, 0)
        return cls(ddp_ssn=ddp_ssn, segment=bytes(data[2:]))


@dataclass(frozen=True)
class SessionControl:
    """User data of a DDP Stream Session Control message (PPID 17), RFC 5043 5.2.3.

    `private_data` is the whole Private Data field; for the enhanced codes it
    starts with the 4 bytes of `EnhancedData` (use `enhanced_data` and
    `ulp_private_data` to split it, `SessionControl.enhanced` to build one).
    Encode and decode both enforce: at most 512 bytes of private data
    (RFC 5043 5.2.3, enhanced data included, RFC 6581 7), none on Terminate
    (RFC 5043 5.2.3), at least the 4 enhanced bytes on the enhanced codes.
    Unknown function codes are a DecodeError / EncodeError.
    """

    ddp_ssn: int
    function: FunctionCode
    private_data: bytes = b""

    HEADER_LENGTH: ClassVar[int] = 4

    @classmethod
    def enhanced(
        cls,
        ddp_ssn: int,
        function: FunctionCode,
        enhanced_data: EnhancedData,
        ulp_private_data: bytes = b"",
    ) -> SessionControl:
        """An enhanced message: `enhanced_data` followed by the ULP's private data (RFC 6581 7)."""
        if not FunctionCode(function).is_enhanced:
            raise EncodeError(f"{FunctionCode(function).name} does not carry enhanced data")
        return cls(ddp_ssn, FunctionCode(function), enhanced_data.encode() + bytes(ulp_private_data))

    @property
    def enhanced_data(self) -> EnhancedData | None:
        """The RFC 6581 9 data at the start of the private data, or None for unenhanced codes."""
        if not FunctionCode(self.function).is_enhanced:
            return None
        return EnhancedData.decode(self.private_data[: EnhancedData.LENGTH])

    @property
    def ulp_private_data(self) -> bytes:
        """The ULP's private data: everything after the enhanced data, if any."""
        if FunctionCode(self.function).is_enhanced:
            return bytes(self.private_data[EnhancedData.LENGTH :])
        return bytes(self.private_data)

    @staticmethod
    def _check(function: int, private_data: bytes, make: Callable[[str], Exception]) -> None:
        if len(private_data) > MAX_PRIVATE_DATA:
            raise make(f"RFC 5043 5.2.3: {len(private_data)} bytes of private data exceed {MAX_PRIVATE_DATA}")
        if function == FunctionCode.TERMINATE and private_data:
            raise make("RFC 5043 5.2.3: Private Data MUST NOT be included in Terminate")
        if function in _ENHANCED_CODES and len(private_data) < EnhancedData.LENGTH:
            raise make("RFC 6581 7/9: enhanced message without its 4 bytes of enhanced data")

    def encode(self) -> bytes:
        check_field(self.ddp_ssn, 16, "ddp_ssn")
        try:
            function = FunctionCode(self.function)
        except ValueError as exc:
            raise EncodeError(f"unknown function code {self.function!r}") from exc
        self._check(function, bytes(self.private_data), EncodeError)
        return struct.pack("!HH", self.ddp_ssn, function) + bytes(self.private_data)

    @classmethod
    def decode(cls, data: bytes) -> SessionControl:
        data = bytes(data)
        need(data, cls.HEADER_LENGTH, LAYER, "session control header")
        ddp_ssn, code = struct.unpack_from("!HH", data, 0)
        try:
            function = FunctionCode(code)
        except ValueError:
            raise DecodeError(LAYER, f"unknown function code 0x{code:03x}", 2) from None
        private_data = data[cls.HEADER_LENGTH :]
        cls._check(function, private_data, lambda message: DecodeError(LAYER, message, 4))
        return cls(ddp_ssn=ddp_ssn, function=function, private_data=private_data)

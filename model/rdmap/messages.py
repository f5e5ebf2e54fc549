"""RDMAP wire formats carried in DDP: RFC 5040 4 (Header Format).

* The RDMAP Control Field is the first RsvdULP byte of every DDP header:
  RV (2 bits, must be 1), Rsvd (2 bits), Opcode (4 bits) (RFC 5040 4.1).
* For untagged messages the next four RsvdULP bytes carry the Invalidate
  STag for Send with Invalidate and Send with SE and Invalidate, and are zero
  otherwise (RFC 5040 4.1).
* `Opcode` maps each RDMA message to its DDP buffer model and queue number
  (RFC 5040 4.2: QN 0 Send, QN 1 RDMA Read Request, QN 2 Terminate).
* `ReadRequest` is the 28-byte RDMA Read Request header (RFC 5040 4.4).
* `Terminate` is the Terminate message body (RFC 5040 4.8, Terminate Header):
  a 32-bit Terminate Control word (Layer 4, EType 4, Error Code 8, Hdrct
  M/D/R 3, reserved 13) then, as the Hdrct bits say, the 16-bit DDP Segment
  Length, the terminated DDP header and the terminated RDMA header.  The
  RFC 5040 text is not in this repository; the field order was read from
  the public RFC text and agrees with Wireshark's iWARP dissector.  Decision
  recorded here: the DDP Segment Length field is present when M or D is set
  (zero when M is clear); the terminated DDP header's length (14 or 18) is
  taken from its own T bit; the RDMA header is the 28-byte Read Request
  header, the only RDMAP header RFC 5040 defines beyond the control field.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from enum import IntEnum

from model.ddp.segment import DdpHeader, decode_header
from model.errors import DecodeError, EncodeError, RdmapError, TerminateLayer, check_field, need
from model.ddp.memory import Access

LAYER = "RDMAP"

RDMAP_VERSION = 1
"""RFC 5040 4.1: RV MUST be 1 for this version."""


class QueueNumber(IntEnum):
    """Untagged queues used by RDMAP, RFC 5040 4.2 / 5.x."""

    SEND = 0
    READ_REQUEST = 1
    TERMINATE = 2


class Opcode(IntEnum):
    """RDMA message opcodes, RFC 5040 4.2 (Table: RDMA Message Definitions)."""

    RDMA_WRITE = 0
    RDMA_READ_REQUEST = 1
    RDMA_READ_RESPONSE = 2
    SEND = 3
    SEND_WITH_INVALIDATE = 4
    SEND_WITH_SE = 5
    SEND_WITH_SE_AND_INVALIDATE = 6
    TERMINATE = 7

    @property
    def tagged(self) -> bool:
        """True if the message uses the DDP Tagged Buffer Model (RFC 5040 4.2)."""
        return self in (Opcode.RDMA_WRITE, Opcode.RDMA_READ_RESPONSE)

    @property
    def queue_number(self) -> int | None:
        """The DDP QN of an untagged message, None for tagged ones (RFC 5040 4.2)."""
        if self.tagged:
            return None
        if self is Opcode.RDMA_READ_REQUEST:
            return QueueNumber.READ_REQUEST
        if self is Opcode.TERMINATE:
            return QueueNumber.TERMINATE
        return QueueNumber.SEND

    @property
    def carries_invalidate_stag(self) -> bool:
        """Send with Invalidate variants carry the Invalidate STag (RFC 5040 4.1)."""
        return self in (Opcode.SEND_WITH_INVALIDATE, Opcode.SEND_WITH_SE_AND_INVALIDATE)

    @property
    def solicited(self) -> bool:
        """Send with Solicited Event variants (RFC 5040 5.3)."""
        return self in (Opcode.SEND_WITH_SE, Opcode.SEND_WITH_SE_AND_INVALIDATE)

    @property
    def is_send(self) -> bool:
        return self in (
            Opcode.SEND,
            Opcode.SEND_WITH_INVALIDATE,
            Opcode.SEND_WITH_SE,
            Opcode.SEND_WITH_SE_AND_INVALIDATE,
        )


@dataclass(frozen=True)
class RdmapControl:
    """RDMAP Control Field, RFC 5040 4.1: RV (2), Rsvd (2), Opcode (4).

    `opcode` is the raw 4-bit value (8-15 are not defined opcodes); decoding
    never rejects RV or opcode so that the receiver can answer with the
    Terminate codes of RFC 5040 (invalid version, unexpected opcode).
    """

    opcode: int
    rv: int = RDMAP_VERSION
    rsvd: int = 0

    def encode(self) -> int:
        check_field(self.rv, 2, "RDMAP RV")
        check_field(self.rsvd, 2, "RDMAP Rsvd")
        check_field(int(self.opcode), 4, "RDMAP Opcode")
        return (self.rv << 6) | (self.rsvd << 4) | int(self.opcode)

    @classmethod
    def decode(cls, byte: int) -> RdmapControl:
        return cls(opcode=byte & 0x0F, rv=(byte >> 6) & 0x3, rsvd=(byte >> 4) & 0x3)

    @functools.cached_property
    def known_opcode(self) -> Opcode | None:
        """The opcode as an `Opcode`, None for 8-15; kept on the (immutable) field, checked for every segment."""
        try:
            return Opcode(self.opcode)
        except ValueError:
            return None


def tagged_rsvd_ulp(opcode: Opcode, rv: int = RDMAP_VERSION) -> int:
    """The 8-bit tagged RsvdULP for `opcode`: the RDMAP Control Field (RFC 5040 4.1)."""
    if not Opcode(opcode).tagged:
        raise EncodeError(f"{Opcode(opcode).name} is not a tagged RDMA message")
    return RdmapControl(opcode, rv).encode()


def untagged_rsvd_ulp(opcode: Opcode, invalidate_stag: int = 0, rv: int = RDMAP_VERSION) -> int:
    """The 40-bit untagged RsvdULP: control byte then Invalidate STag (RFC 5040 4.1).

    The Invalidate STag MUST be zero unless the opcode is a Send with
    Invalidate variant.
    """
    op = Opcode(opcode)
    if op.tagged:
        raise EncodeError(f"{op.name} is not an untagged RDMA message")
    check_field(invalidate_stag, 32, "Invalidate STag")
    if invalidate_stag and not op.carries_invalidate_stag:
        raise EncodeError(f"{op.name} carries no Invalidate STag")
    return (RdmapControl(op, rv).encode() << 32) | invalidate_stag


@functools.cache
def _rdmap_control(byte: int) -> RdmapControl:
    """`RdmapControl.decode`, kept for each of the 256 byte values: the field is read three or four times per
    segment received (header checks, placement rights, delivery) and the result is immutable."""
    return RdmapControl.decode(byte)


def rdmap_control_of(header: DdpHeader) -> RdmapControl:
    """The RDMAP Control Field carried in a DDP header's RsvdULP (RFC 5040 4.1)."""
    if header.tagged:
        return _rdmap_control(header.rsvd_ulp & 0xFF)
    return _rdmap_control((header.rsvd_ulp >> 32) & 0xFF)


def invalidate_stag_of(header: DdpHeader) -> int:
    """The Invalidate STag field of an untagged header (RFC 5040 4.1); 0 for tagged."""
    return 0 if header.tagged else header.rsvd_ulp & 0xFFFFFFFF


def header_error(header: DdpHeader) -> RdmapError | None:
    """RFC 5040 4.1/4.2 checks of the RDMAP control field that need no stream state.

    RV must be 1 (-> Remote Operation Error 0x05); the opcode must be defined,
    use its own DDP buffer model and, untagged, its own queue (-> 0x06).
    """
    control = rdmap_control_of(header)
    if control.rv != RDMAP_VERSION:
        return RdmapError.INVALID_VERSION
    opcode = control.known_opcode
    if opcode is None or opcode.tagged != header.tagged:
        return RdmapError.UNEXPECTED_OPCODE
    if not header.tagged and header.qn != opcode.queue_number:
        return RdmapError.UNEXPECTED_OPCODE
    return None


def placement_access(header: DdpHeader) -> Access:
    """The right a tagged segment needs on its STag: RDMA Write places into an
    advertised buffer (REMOTE_WRITE), a Read Response into the requester's own
    local buffer (LOCAL_WRITE), RFC 5040 5.1, 5.2."""
    if rdmap_control_of(header).opcode == Opcode.RDMA_READ_RESPONSE:
        return Access.LOCAL_WRITE
    return Access.REMOTE_WRITE


_READ_REQUEST = struct.Struct("!IQIIQ")
READ_REQUEST_LENGTH = _READ_REQUEST.size  # 28


@dataclass(frozen=True)
class ReadRequest:
    """RDMA Read Request header, RFC 5040 4.4 (28 bytes)."""

    sink_stag: int
    sink_to: int
    size: int
    source_stag: int
    source_to: int

    def encode(self) -> bytes:
        return _READ_REQUEST.pack(
            check_field(self.sink_stag, 32, "Data Sink STag"),
            check_field(self.sink_to, 64, "Data Sink Tagged Offset"),
            check_field(self.size, 32, "RDMA Read Message Size"),
            check_field(self.source_stag, 32, "Data Source STag"),
            check_field(self.source_to, 64, "Data Source Tagged Offset"),
        )

    @classmethod
    def decode(cls, data: bytes) -> ReadRequest:
        need(data, READ_REQUEST_LENGTH, LAYER, "RDMA Read Request header")
        if len(data) != READ_REQUEST_LENGTH:
            raise DecodeError(LAYER, f"RDMA Read Request is {len(data)} bytes, expected 28")
        return cls(*_READ_REQUEST.unpack(bytes(data)))


_HDRCT_M = 0x4
_HDRCT_D = 0x2
_HDRCT_R = 0x1


@dataclass(frozen=True)
class Terminate:
    """Terminate message body, RFC 5040 4.8 (see the module docstring for the layout).

    Hdrct bits follow the optional fields: M = `segment_length` is not None,
    D = `ddp_header` is not None, R = `rdma_header` is not None.
    """

    layer: int
    etype: int
    code: int
    segment_length: int | None = None
    ddp_header: DdpHeader | None = None
    rdma_header: ReadRequest | None = None
    reserved: int = 0

    @property
    def number(self) -> tuple[int, int, int]:
        return (self.layer, self.etype, self.code)

    @property
    def terminate_layer(self) -> TerminateLayer | None:
        try:
            return TerminateLayer(self.layer)
        except ValueError:
            return None

    def encode(self) -> bytes:
        check_field(self.layer, 4, "Terminate Layer")
        check_field(self.etype, 4, "Terminate EType")
        check_field(self.code, 8, "Terminate Error Code")
        check_field(self.reserved, 13, "Terminate reserved")
        hdrct = (
            (_HDRCT_M if self.segment_length is not None else 0)
            | (_HDRCT_D if self.ddp_header is not None else 0)
            | (_HDRCT_R if self.rdma_header is not None else 0)
        )
        control = (self.layer << 28) | (self.etype << 24) | (self.code << 16) | (hdrct << 13) | self.reserved
        out = struct.pack("!I", control)
        if hdrct & (_HDRCT_M | _HDRCT_D):
            length = self.segment_length if self.segment_length is not None else 0
            out += struct.pack("!H", check_field(length, 16, "DDP Segment Length"))
        if self.ddp_header is not None:
            out += self.ddp_header.encode()
        if self.rdma_header is not None:
            out += self.rdma_header.encode()
        return out

    @classmethod
    def decode(cls, data: bytes) -> Terminate:
        data = bytes(data)
        need(data, 4, LAYER, "Terminate Control")
        (control,) = struct.unpack_from("!I", data, 0)
        hdrct = (control >> 13) & 0x7
        offset = 4
        segment_length: int | None = None
        ddp_header: DdpHeader | None = None
        rdma_header: ReadRequest | None = None
        if hdrct & (_HDRCT_M | _HDRCT_D):
            need(data, 2, LAYER, "Terminate DDP Segment Length", offset)
            (length,) = struct.unpack_from("!H", data, offset)
            segment_length = length if hdrct & _HDRCT_M else None
            offset += 2
        if hdrct & _HDRCT_D:
            try:
                ddp_header = decode_header(data[offset:])
            except DecodeError as error:
                raise DecodeError(LAYER, f"terminated DDP header: {error.message}", offset) from None
            offset += ddp_header.length
        if hdrct & _HDRCT_R:
            need(data, READ_REQUEST_LENGTH, LAYER, "terminated RDMA header", offset)
            rdma_header = ReadRequest.decode(data[offset : offset + READ_REQUEST_LENGTH])
            offset += READ_REQUEST_LENGTH
        if offset != len(data):
            raise DecodeError(LAYER, f"{len(data) - offset} bytes after the Terminate header", offset)
        return cls(
            layer=control >> 28,
            etype=(control >> 24) & 0xF,
            code=(control >> 16) & 0xFF,
            segment_length=segment_length,
            ddp_header=ddp_header,
            rdma_header=rdma_header,
            reserved=control & 0x1FFF,
        )

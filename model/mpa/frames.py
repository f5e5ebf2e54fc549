"""MPA Request and Reply frames (RFC 5044 7.1, enhanced by RFC 6581 6).

Layout: Key (16 bytes), flags byte M C R S Res(4), Rev (8), PD_Length (16),
Private Data.  With S=1 the Private Data begins with the 4 bytes of enhanced
RDMA connection establishment data (`model.ddp.sctp_adaptation.EnhancedData`, RFC 6581
9), and PD_Length counts them (RFC 6581 6).

Rules applied (RFC 5044 7.1 as amended by RFC 6581 6):

* the Key must be "MPA ID Req Frame" (request) or "MPA ID Rep Frame" (reply);
* Res is sent as zero and not checked on reception; R is only meaningful in
  a reply: a request is sent with R=0 and its R bit is not checked;
* Rev: 1, or 2 for enhanced connection establishment (S=1 needs Rev >= 2);
  receivers check it, so any other value is a DecodeError;
* PD_Length at most 512, the Private Data exactly PD_Length bytes; with S=1
  at least the 4 enhanced bytes.

The frames travel on a TCP byte stream ahead of the FPDUs: `decode` takes
exactly one frame; `frame_length(data)` tells how many bytes a frame whose
header starts `data` occupies.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar

from model.ddp.sctp_adaptation import EnhancedData
from model.errors import DecodeError, EncodeError, check_field, need

LAYER = "mpa"

REQUEST_KEY = b"MPA ID Req Frame"
REPLY_KEY = b"MPA ID Rep Frame"
MAX_PRIVATE_DATA = 512
"""RFC 5044 7.1: PD_Length MUST NOT exceed 512."""
HEADER_LENGTH = 20
REVISION_BASIC = 1
REVISION_ENHANCED = 2
"""RFC 6581 6: Rev is two or higher when enhanced connection establishment is used."""

FLAG_MARKERS = 0x80
FLAG_CRC = 0x40
FLAG_REJECT = 0x20
FLAG_ENHANCED = 0x10


def frame_length(data: bytes) -> int:
    """Total length (header plus PD_Length) of the MPA frame whose header begins `data`."""
    need(data, HEADER_LENGTH, LAYER, "frame header")
    (pd_length,) = struct.unpack_from("!H", data, 18)
    return HEADER_LENGTH + pd_length


@dataclass(frozen=True)
class _MpaFrame:
    """Fields shared by the MPA Request and Reply."""

    markers: bool = False
    crc: bool = True
    enhanced: bool = False
    revision: int = REVISION_BASIC
    private_data: bytes = b""

    KEY: ClassVar[bytes]

    @property
    def enhanced_data(self) -> EnhancedData | None:
        """The RFC 6581 9 data that begins the private data when S=1, else None."""
        if not self.enhanced:
            return None
        return EnhancedData.decode(self.private_data[: EnhancedData.LENGTH])

    @property
    def ulp_private_data(self) -> bytes:
        """The ULP's private data (after the enhanced data when S=1)."""
        if self.enhanced:
            return bytes(self.private_data[EnhancedData.LENGTH :])
        return bytes(self.private_data)

    def _reject_flag(self) -> bool:
        return False

    def encode(self) -> bytes:
        check_field(self.revision, 8, "revision")
        if self.revision not in (REVISION_BASIC, REVISION_ENHANCED):
            raise EncodeError(f"MPA revision {self.revision} is neither 1 nor 2")
        if self.enhanced and self.revision < REVISION_ENHANCED:
            raise EncodeError("RFC 6581 6: Rev MUST be two or higher with S=1")
        private_data = bytes(self.private_data)
        if len(private_data) > MAX_PRIVATE_DATA:
            raise EncodeError(f"RFC 5044 7.1: PD_Length {len(private_data)} exceeds {MAX_PRIVATE_DATA}")
        if self.enhanced and len(private_data) < EnhancedData.LENGTH:
            raise EncodeError("RFC 6581 6: with S=1 the private data begins with 4 bytes of enhanced data")
        flags = (
            (FLAG_MARKERS if self.markers else 0)
            | (FLAG_CRC if self.crc else 0)
            | (FLAG_REJECT if self._reject_flag() else 0)
            | (FLAG_ENHANCED if self.enhanced else 0)
        )
        return self.KEY + struct.pack("!BBH", flags, self.revision, len(private_data)) + private_data

    @classmethod
    def _decode_fields(cls, data: bytes) -> tuple[int, dict]:
        data = bytes(data)
        need(data, HEADER_LENGTH, LAYER, "frame header")
        if data[:16] != cls.KEY:
            raise DecodeError(LAYER, f"key {data[:16]!r} is not {cls.KEY!r}", 0)
        flags, revision, pd_length = struct.unpack_from("!BBH", data, 16)
        if revision not in (REVISION_BASIC, REVISION_ENHANCED):
            raise DecodeError(LAYER, f"unsupported MPA revision {revision}", 17)
        if pd_length > MAX_PRIVATE_DATA:
            raise DecodeError(LAYER, f"PD_Length {pd_length} exceeds {MAX_PRIVATE_DATA}", 18)
        if len(data) != HEADER_LENGTH + pd_length:
            raise DecodeError(
                LAYER, f"PD_Length {pd_length} but {len(data) - HEADER_LENGTH} private data bytes", 18
            )
        enhanced = bool(flags & FLAG_ENHANCED)
        if enhanced and revision < REVISION_ENHANCED:
            raise DecodeError(LAYER, "S=1 in a revision 1 frame (RFC 6581 6)", 16)
        if enhanced and pd_length < EnhancedData.LENGTH:
            raise DecodeError(LAYER, "S=1 but fewer than 4 bytes of private data (RFC 6581 6)", 18)
        fields = dict(
            markers=bool(flags & FLAG_MARKERS),
            crc=bool(flags & FLAG_CRC),
            enhanced=enhanced,
            revision=revision,
            private_data=data[HEADER_LENGTH:],
        )
        return flags, fields


@dataclass(frozen=True)
class MpaRequest(_MpaFrame):
    """MPA Request Frame (RFC 5044 7.1): sent by the initiator; R is 0 and not checked."""

    KEY: ClassVar[bytes] = REQUEST_KEY

    @classmethod
    def decode(cls, data: bytes) -> MpaRequest:
        _, fields = cls._decode_fields(data)
        return cls(**fields)


@dataclass(frozen=True)
class MpaReply(_MpaFrame):
    """MPA Reply Frame (RFC 5044 7.1): `reject` is the R bit (the responder refuses the connection)."""

    reject: bool = False

    KEY: ClassVar[bytes] = REPLY_KEY

    def _reject_flag(self) -> bool:
        return self.reject

    @classmethod
    def decode(cls, data: bytes) -> MpaReply:
        flags, fields = cls._decode_fields(data)
        return cls(reject=bool(flags & FLAG_REJECT), **fields)


def decode_mpa_frame(data: bytes) -> MpaRequest | MpaReply:
    """Decode a Request or a Reply, telling them apart by the Key."""
    need(data, 16, LAYER, "key")
    if bytes(data[:16]) == REPLY_KEY:
        return MpaReply.decode(data)
    return MpaRequest.decode(data)

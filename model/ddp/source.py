"""DDP Data Source: segmentation of ULP messages, RFC 5041 5.2 and 4.

* Every segment is at most MULPDU bytes: payload per segment = MULPDU - 14
  (tagged) or MULPDU - 18 (untagged) (RFC 5041 5.2 worked examples).
* Untagged segments carry MO = offset in the message; tagged segments carry
  TO = initial TO + offset (5.2).
* A zero-length message is exactly one segment (5.2).
* L is set on the last segment only, which carries the highest MO (4.1).
* MSN per queue starts at 1 and wraps to 0 after 0xFFFFFFFF (4.3).
* RsvdULP is passed through unchanged on every segment (4.2, 4.3).
* Rsvd is zero and DV is 1 on transmit (4.1).
"""

from __future__ import annotations

from model.ddp.segment import TAGGED_HEADER_LENGTH, UNTAGGED_HEADER_LENGTH, DdpSegment, TaggedHeader, UntaggedHeader
from model.errors import EncodeError, check_field

MESSAGE_LENGTH_LIMIT = 1 << 32
"""RFC 5041 5.2: the ULP Message Length MUST be less than 2^32."""


def _chunks(payload: bytes, per_segment: int) -> list[tuple[int, bytes]]:
    if len(payload) >= MESSAGE_LENGTH_LIMIT:
        raise EncodeError("ULP message length must be less than 2^32 (RFC 5041 5.2)")
    if len(payload) == 0:
        return [(0, b"")]
    return [(offset, payload[offset : offset + per_segment]) for offset in range(0, len(payload), per_segment)]


def _payload_per_segment(mulpdu: int, header_length: int) -> int:
    if mulpdu <= header_length:
        raise EncodeError(f"MULPDU {mulpdu} leaves no room for payload after a {header_length}-byte header")
    return mulpdu - header_length


def segment_tagged(payload: bytes, stag: int, to: int, mulpdu: int, rsvd_ulp: int = 0) -> list[DdpSegment]:
    """Segment a Tagged DDP Message starting at Tagged Offset `to` (RFC 5041 5.2)."""
    payload = bytes(payload)
    check_field(stag, 32, "STag")
    check_field(to, 64, "TO")
    check_field(rsvd_ulp, 8, "RsvdULP (tagged)")
    if to + len(payload) > 1 << 64:
        raise EncodeError("TO + message length exceeds the 64-bit Tagged Offset space")
    chunks = _chunks(payload, _payload_per_segment(mulpdu, TAGGED_HEADER_LENGTH))
    return [
        DdpSegment(TaggedHeader(index == len(chunks) - 1, rsvd_ulp, stag, to + offset), chunk)
        for index, (offset, chunk) in enumerate(chunks)
    ]


def segment_untagged(payload: bytes, qn: int, msn: int, mulpdu: int, rsvd_ulp: int = 0) -> list[DdpSegment]:
    """Segment an Untagged DDP Message with MO from 0 (RFC 5041 5.2)."""
    payload = bytes(payload)
    check_field(qn, 32, "QN")
    check_field(msn, 32, "MSN")
    check_field(rsvd_ulp, 40, "RsvdULP (untagged)")
    chunks = _chunks(payload, _payload_per_segment(mulpdu, UNTAGGED_HEADER_LENGTH))
    return [
        DdpSegment(UntaggedHeader(index == len(chunks) - 1, rsvd_ulp, qn, msn, offset), chunk)
        for index, (offset, chunk) in enumerate(chunks)
    ]


class DdpSource:
    """The Data Source half of one DDP Stream: MULPDU and per-queue MSNs."""

    def __init__(self, mulpdu: int) -> None:
        _payload_per_segment(mulpdu, UNTAGGED_HEADER_LENGTH)
        self.mulpdu = mulpdu
        self._next_msn: dict[int, int] = {}

    def next_msn(self, qn: int) -> int:
        """The MSN the next message on `qn` will carry (RFC 5041 4.3: first is 1)."""
        return self._next_msn.get(qn, 1)

    def tagged_message(self, payload: bytes, stag: int, to: int, rsvd_ulp: int = 0) -> list[DdpSegment]:
        return segment_tagged(payload, stag, to, self.mulpdu, rsvd_ulp)

    def untagged_message(self, payload: bytes, qn: int, rsvd_ulp: int = 0) -> list[DdpSegment]:
        """Segment the next message on `qn` and advance its MSN (mod 2^32)."""
        msn = self.next_msn(qn)
        segments = segment_untagged(payload, qn, msn, self.mulpdu, rsvd_ulp)
        self._next_msn[qn] = (msn + 1) & 0xFFFFFFFF
        return segments

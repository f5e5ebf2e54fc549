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

`tagged_segments` and `untagged_segments` check a message at once and then
yield its segments one by one, each payload read (`Reader`) only when its
segment is produced, as an RNIC's DMA reads host memory: a sender holds a
segment at a time, not the message.  `segment_tagged` and `segment_untagged`
do the same over bytes in hand and return the list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from model.ddp.segment import (
    TAGGED_HEADER_LENGTH, UNTAGGED_HEADER_LENGTH, DdpSegment, TaggedHeader, UntaggedHeader, tagged_header_bytes,
    untagged_header_bytes,
)
from model.errors import EncodeError, check_field

MESSAGE_LENGTH_LIMIT = 1 << 32
"""RFC 5041 5.2: the ULP Message Length MUST be less than 2^32."""

Reader = Callable[[int, int], bytes]
"""`read(offset, length)`: `length` bytes of the message from `offset`."""


def segment_count(length: int, per_segment: int) -> int:
    """Segments of a message of `length` bytes: a zero-length message is one segment (RFC 5041 5.2)."""
    return max(1, -(-length // per_segment))


def _check_length(length: int) -> None:
    if not 0 <= length < MESSAGE_LENGTH_LIMIT:
        raise EncodeError("ULP message length must be less than 2^32 (RFC 5041 5.2)")


def _segments(read: Reader, length: int, per_segment: int,
              header: Callable[[bool, int], TaggedHeader | UntaggedHeader]) -> Iterator[DdpSegment]:
    """The segments of a message, each read when produced; `header(last, offset)` makes each header."""
    if length == 0:
        yield DdpSegment(header(True, 0), b"")
        return
    for offset in range(0, length, per_segment):
        count = min(per_segment, length - offset)
        yield DdpSegment(header(offset + count == length, offset), bytes(read(offset, count)))


def _encoded_segments(read: Reader, length: int, per_segment: int,
                      header_bytes: Callable[[bool, int], bytes]) -> Iterator[bytes]:
    """`_segments` encoded (RFC 5041 4.4): each segment's header packed by `header_bytes(last, offset)` and its
    payload read when produced, no header or segment object between (a sender's every segment comes here)."""
    if length == 0:
        yield header_bytes(True, 0)
        return
    for offset in range(0, length, per_segment):
        count = min(per_segment, length - offset)
        yield header_bytes(offset + count == length, offset) + read(offset, count)


def _reader(payload: bytes) -> Reader:
    return lambda offset, count: payload[offset : offset + count]


def _payload_per_segment(mulpdu: int, header_length: int) -> int:
    if mulpdu <= header_length:
        raise EncodeError(f"MULPDU {mulpdu} leaves no room for payload after a {header_length}-byte header")
    return mulpdu - header_length


def tagged_segments(read: Reader, length: int, stag: int, to: int, mulpdu: int,
                    rsvd_ulp: int = 0) -> Iterator[DdpSegment]:
    """The segments of a Tagged DDP Message of `length` bytes from Tagged Offset `to` (RFC 5041 5.2), each
    read when produced; the message is checked now."""
    _check_length(length)
    check_field(stag, 32, "STag")
    check_field(to, 64, "TO")
    check_field(rsvd_ulp, 8, "RsvdULP (tagged)")
    if to + length > 1 << 64:
        raise EncodeError("TO + message length exceeds the 64-bit Tagged Offset space")
    per_segment = _payload_per_segment(mulpdu, TAGGED_HEADER_LENGTH)
    return _segments(read, length, per_segment, lambda last, offset: TaggedHeader(last, rsvd_ulp, stag, to + offset))


def encoded_tagged_segments(read: Reader, length: int, stag: int, to: int, mulpdu: int,
                            rsvd_ulp: int = 0) -> Iterator[bytes]:
    """`tagged_segments`, each segment encoded: the same bytes. The message is checked now, whole (its fields
    and TO + length within 2^64), so no segment's header needs checking again."""
    tagged_segments(read, length, stag, to, mulpdu, rsvd_ulp)   # the checks (its generator is not run)
    per_segment = _payload_per_segment(mulpdu, TAGGED_HEADER_LENGTH)
    return _encoded_segments(read, length, per_segment,
                             lambda last, offset: tagged_header_bytes(last, rsvd_ulp, stag, to + offset))


def untagged_segments(read: Reader, length: int, qn: int, msn: int, mulpdu: int,
                      rsvd_ulp: int = 0) -> Iterator[DdpSegment]:
    """The segments of an Untagged DDP Message of `length` bytes, MO from 0 (RFC 5041 5.2), each read when
    produced; the message is checked now."""
    _check_length(length)
    check_field(qn, 32, "QN")
    check_field(msn, 32, "MSN")
    check_field(rsvd_ulp, 40, "RsvdULP (untagged)")
    per_segment = _payload_per_segment(mulpdu, UNTAGGED_HEADER_LENGTH)
    return _segments(read, length, per_segment, lambda last, offset: UntaggedHeader(last, rsvd_ulp, qn, msn, offset))


def encoded_untagged_segments(read: Reader, length: int, qn: int, msn: int, mulpdu: int,
                              rsvd_ulp: int = 0) -> Iterator[bytes]:
    """`untagged_segments`, each segment encoded: the same bytes, the message checked now, whole (MO stays
    below 2^32 with the length)."""
    untagged_segments(read, length, qn, msn, mulpdu, rsvd_ulp)   # the checks (its generator is not run)
    per_segment = _payload_per_segment(mulpdu, UNTAGGED_HEADER_LENGTH)
    return _encoded_segments(read, length, per_segment,
                             lambda last, offset: untagged_header_bytes(last, rsvd_ulp, qn, msn, offset))


def segment_tagged(payload: bytes, stag: int, to: int, mulpdu: int, rsvd_ulp: int = 0) -> list[DdpSegment]:
    """Segment a Tagged DDP Message starting at Tagged Offset `to` (RFC 5041 5.2)."""
    payload = bytes(payload)
    return list(tagged_segments(_reader(payload), len(payload), stag, to, mulpdu, rsvd_ulp))


def segment_untagged(payload: bytes, qn: int, msn: int, mulpdu: int, rsvd_ulp: int = 0) -> list[DdpSegment]:
    """Segment an Untagged DDP Message with MO from 0 (RFC 5041 5.2)."""
    payload = bytes(payload)
    return list(untagged_segments(_reader(payload), len(payload), qn, msn, mulpdu, rsvd_ulp))


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
        payload = bytes(payload)
        return list(self.untagged_segments(_reader(payload), len(payload), qn, rsvd_ulp))

    def tagged_segments(self, read: Reader, length: int, stag: int, to: int,
                        rsvd_ulp: int = 0) -> Iterator[DdpSegment]:
        """`tagged_segments` at this stream's MULPDU: segments read as they are produced."""
        return tagged_segments(read, length, stag, to, self.mulpdu, rsvd_ulp)

    def encoded_tagged_segments(self, read: Reader, length: int, stag: int, to: int,
                                rsvd_ulp: int = 0) -> Iterator[bytes]:
        """`encoded_tagged_segments` at this stream's MULPDU."""
        return encoded_tagged_segments(read, length, stag, to, self.mulpdu, rsvd_ulp)

    def untagged_segments(self, read: Reader, length: int, qn: int, rsvd_ulp: int = 0) -> Iterator[DdpSegment]:
        """The next message on `qn`, its segments read as they are produced; its MSN is taken now."""
        msn = self.next_msn(qn)
        segments = untagged_segments(read, length, qn, msn, self.mulpdu, rsvd_ulp)
        self._next_msn[qn] = (msn + 1) & 0xFFFFFFFF
        return segments

    def encoded_untagged_segments(self, read: Reader, length: int, qn: int, rsvd_ulp: int = 0) -> Iterator[bytes]:
        """`untagged_segments` of this stream, each segment encoded; its MSN is taken now."""
        msn = self.next_msn(qn)
        segments = encoded_untagged_segments(read, length, qn, msn, self.mulpdu, rsvd_ulp)
        self._next_msn[qn] = (msn + 1) & 0xFFFFFFFF
        return segments

    def segment_lengths(self, length: int, tagged: bool) -> list[int]:
        """The bytes of each segment (header and payload) of a message of `length` bytes at this stream's MULPDU,
        without reading it (RFC 5041 5.2)."""
        header = TAGGED_HEADER_LENGTH if tagged else UNTAGGED_HEADER_LENGTH
        per_segment = _payload_per_segment(self.mulpdu, header)
        return [header + min(per_segment, length - offset) for offset in range(0, length, per_segment)] or [header]

    def segment_count(self, length: int, tagged: bool) -> int:
        """How many segments a message of `length` bytes takes at this stream's MULPDU (RFC 5041 5.2)."""
        header = TAGGED_HEADER_LENGTH if tagged else UNTAGGED_HEADER_LENGTH
        return segment_count(length, _payload_per_segment(self.mulpdu, header))
